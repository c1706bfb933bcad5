//! Source records for people: a record on one line, and a short form for a
//! column of `list`, `log` and `audit`.

use crate::source::{Changes, SourceRecord};
use crate::store::core::query::SourceSummary;
use crate::store::trust::provenance::{CheckStatus, SourceCheck};

/// How many hex digits of a commit are shown.
const COMMIT_SHOWN: usize = 12;

/// How many changed paths a dirty record's line names.
const PATHS_SHOWN: usize = 3;

/// A commit cut to [`COMMIT_SHOWN`] hex digits, or `no commit`.
fn commit(c: Option<&str>) -> &str {
    c.map_or("no commit", |c| c.get(..COMMIT_SHOWN).unwrap_or(c))
}

/// `clean`, or `dirty: 1 changed, 2 added (a, b, …)`.
fn state(clean: bool, changes: &Changes) -> String {
    if clean {
        return "clean".into();
    }
    let counts: Vec<String> = [
        (changes.changed.len(), "changed"),
        (changes.added.len(), "added"),
        (changes.removed.len(), "removed"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    if counts.is_empty() {
        return "dirty".into();
    }
    let all = changes
        .changed
        .iter()
        .chain(&changes.added)
        .chain(&changes.removed);
    let mut paths: Vec<&str> = all.clone().take(PATHS_SHOWN).map(String::as_str).collect();
    if all.count() > PATHS_SHOWN {
        paths.push("…");
    }
    format!("dirty: {} ({})", counts.join(", "), paths.join(", "))
}

/// A record on one line: how it was read, the commit, its tag, the path in
/// the repository, the repository, and clean or what differs.
///
/// `git 0123456789ab (tag v1.2.3) at plugins/x of https://host/o/r, clean`
pub fn record_line(r: &SourceRecord) -> String {
    let read_from = match r.read_from {
        crate::source::ReadFrom::Git => "git",
        crate::source::ReadFrom::WorkTree => "work-tree",
    };
    let tag = r
        .tag
        .as_ref()
        .map(|t| format!(" (tag {t})"))
        .unwrap_or_default();
    let at = if r.path.is_empty() {
        "the root".to_string()
    } else {
        r.path.clone()
    };
    let refused = r
        .commit_refused
        .as_ref()
        .map(|why| format!("; the commit's tree makes no snapshot: {why}"))
        .unwrap_or_default();
    format!(
        "{read_from} {}{tag} at {at} of {}, {}{refused}",
        commit(r.commit.as_deref()),
        r.repository,
        state(r.clean, &r.changes)
    )
}

/// A record in brief: `0123456789ab v1.2.3 clean`, `… dirty`, and how the
/// store came to hold it when not by its own ingest.
pub fn short(s: &SourceSummary) -> String {
    let mut out = commit(s.commit.as_deref()).to_string();
    if let Some(t) = &s.tag {
        out.push(' ');
        out.push_str(t);
    }
    out.push_str(if s.clean { " clean" } else { " dirty" });
    if s.via != crate::source::Via::Ingest {
        out.push_str(" via ");
        out.push_str(s.via.as_str());
    }
    out
}

/// Why a re-derivation did not find the snapshot, on one line (`from
/// commit 0123456789ab at plugins/x: missing-commit: …`); `None` when it
/// did.
pub fn check_line(c: &SourceCheck) -> Option<String> {
    match c.status {
        CheckStatus::Equal => None,
        CheckStatus::NoSourceRecord => {
            Some("no source record names a commit to re-derive it from".into())
        }
        CheckStatus::SourceMismatch => {
            let why = match (&c.found, &c.detail) {
                (Some(found), _) => format!("its tree's digest is {found}"),
                (None, Some(detail)) => detail.clone(),
                (None, None) => "it makes no snapshot".into(),
            };
            Some(format!(
                "from commit {} at {}: {}: {why}",
                commit(c.commit.as_deref()),
                match c.path.as_deref() {
                    None | Some("") => "the root",
                    Some(p) => p,
                },
                c.mismatch.map_or("mismatch", |m| m.as_str()),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{ReadFrom, Via};

    fn record(read_from: ReadFrom, clean: bool, changes: Changes) -> SourceRecord {
        SourceRecord {
            read_from,
            repository: "https://github.com/o/r".into(),
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            path: "plugins/x".into(),
            tree: Some("f".repeat(40)),
            tag: Some("v1.2.3".into()),
            clean,
            changes,
            commit_refused: None,
        }
    }

    #[test]
    fn a_clean_git_record_reads_on_one_line() {
        let r = record(ReadFrom::Git, true, Changes::default());
        assert_eq!(
            record_line(&r),
            "git 0123456789ab (tag v1.2.3) at plugins/x of https://github.com/o/r, clean"
        );
    }

    #[test]
    fn a_dirty_work_tree_record_names_what_differs() {
        let r = record(
            ReadFrom::WorkTree,
            false,
            Changes {
                added: vec!["a.md".into(), "b.md".into()],
                changed: vec!["skills/x.md".into()],
                removed: vec!["c.md".into()],
            },
        );
        assert_eq!(
            record_line(&r),
            "work-tree 0123456789ab (tag v1.2.3) at plugins/x of https://github.com/o/r, \
             dirty: 1 changed, 2 added, 1 removed (skills/x.md, a.md, b.md, …)"
        );
        let few = record(
            ReadFrom::WorkTree,
            false,
            Changes {
                changed: vec!["skills/x.md".into()],
                ..Changes::default()
            },
        );
        assert!(
            record_line(&few).ends_with("dirty: 1 changed (skills/x.md)"),
            "{}",
            record_line(&few)
        );
    }

    #[test]
    fn a_record_without_a_commit_or_at_the_root_says_so() {
        let mut r = record(ReadFrom::WorkTree, false, Changes::default());
        r.commit = None;
        r.tag = None;
        r.path = String::new();
        r.commit_refused = Some("no such directory".into());
        assert_eq!(
            record_line(&r),
            "work-tree no commit at the root of https://github.com/o/r, dirty; \
             the commit's tree makes no snapshot: no such directory"
        );
    }

    #[test]
    fn the_short_form_names_the_commit_tag_state_and_a_foreign_origin() {
        let mut s = SourceSummary {
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            tag: Some("v1".into()),
            clean: true,
            read_from: ReadFrom::Git,
            via: Via::Ingest,
        };
        assert_eq!(short(&s), "0123456789ab v1 clean");
        s.clean = false;
        s.tag = None;
        s.via = Via::Registry;
        assert_eq!(short(&s), "0123456789ab dirty via registry");
    }

    #[test]
    fn a_check_names_the_commit_and_why_it_is_no_match() {
        use crate::digest::ManifestDigest;
        use crate::store::trust::provenance::Mismatch;
        let expected: ManifestDigest = "a".repeat(64).parse().unwrap();
        let found: ManifestDigest = "b".repeat(64).parse().unwrap();
        let mut c = SourceCheck {
            status: CheckStatus::Equal,
            mismatch: None,
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            path: Some(String::new()),
            expected,
            found: Some(expected),
            detail: None,
        };
        assert_eq!(check_line(&c), None);
        c.status = CheckStatus::SourceMismatch;
        c.mismatch = Some(Mismatch::Digest);
        c.found = Some(found);
        assert_eq!(
            check_line(&c).unwrap(),
            format!("from commit 0123456789ab at the root: digest: its tree's digest is {found}")
        );
        c.mismatch = Some(Mismatch::MissingCommit);
        c.found = None;
        c.path = Some("plugins/x".into());
        c.detail = Some("no such commit".into());
        assert_eq!(
            check_line(&c).unwrap(),
            "from commit 0123456789ab at plugins/x: missing-commit: no such commit"
        );
        c.status = CheckStatus::NoSourceRecord;
        assert!(check_line(&c).unwrap().starts_with("no source record"));
    }
}
