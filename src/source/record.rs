//! Source records: where a snapshot's bytes came from, as an ingest found it.
//!
//! A record names a git commit and the directory of its tree the release was
//! read from, and says whether the snapshot is that tree's snapshot
//! (`clean`). It is kept beside the snapshot, never inside its manifest: the
//! manifest and its digest depend on the bytes alone.
//!
//! ```text
//! SourceEntry            one per ingest (or adoption) that found a source
//! ├── at                 when the ingest ran (UTC, RFC 3339)
//! ├── via                ingest | registry | bundle
//! └── record             SourceRecord
//!     ├── read_from      git (the revision's objects) | work-tree (a directory)
//!     ├── repository     the origin remote's URL, with no user part, query or
//!     │                  fragment ([`redact_url`]), else the path
//!     ├── commit, tree   the commit, and the tree id of `path` in it
//!     ├── path           the directory's path in the repository ("" at the root)
//!     ├── tag            a tag pointing at the commit, if any
//!     ├── clean          the snapshot equals the snapshot of `tree`
//!     └── changes        what differs, when not clean
//! ```

use serde::{Deserialize, Serialize};

pub use super::url::redact_url;

/// How an ingest read the bytes a source record describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadFrom {
    /// From a revision's objects (`ingest --git`): clean by construction.
    Git,
    /// From a directory inside a git work tree.
    WorkTree,
}

/// Where a snapshot's bytes came from: a directory of a git commit's tree,
/// and whether the snapshot is exactly that directory's snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    /// How the ingest read the bytes.
    pub read_from: ReadFrom,
    /// The repository: its `origin` remote's URL with no user part (user
    /// and password alike), query or fragment ([`redact_url`]), else the
    /// repository's absolute path.
    pub repository: String,
    /// The commit (`HEAD` of a work tree, or the revision asked for), as 40
    /// hex digits; `None` in a work tree with no commit yet.
    pub commit: Option<String>,
    /// The directory's path in the repository, `/`-separated; empty at the
    /// repository's root.
    pub path: String,
    /// The id of the commit's tree at `path`, when the commit has one there.
    pub tree: Option<String>,
    /// A tag pointing at the commit, if any (the first by name).
    pub tag: Option<String>,
    /// Whether the snapshot equals the snapshot of the commit's tree at
    /// `path`, by their digests.
    pub clean: bool,
    /// What differs from the commit's snapshot, when not clean.
    #[serde(default, skip_serializing_if = "Changes::is_empty")]
    pub changes: Changes,
    /// Why the commit's tree at `path` makes no snapshot, when it makes none:
    /// the rule it breaks, or that the commit has no such directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_refused: Option<String>,
}

/// The paths that differ between a snapshot and its commit's snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changes {
    /// Files the snapshot has and the commit's does not.
    #[serde(default)]
    pub added: Vec<String>,
    /// Files both have, with other bytes or another executable bit.
    #[serde(default)]
    pub changed: Vec<String>,
    /// Files the commit's snapshot has and the snapshot does not.
    #[serde(default)]
    pub removed: Vec<String>,
}

impl Changes {
    /// Whether nothing differs.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }

    /// The changes between two manifests' entries: `from` is the commit's,
    /// `to` the snapshot's. Each list is sorted.
    pub fn between(
        from: &[crate::profile::ce::manifest::Entry],
        to: &[crate::profile::ce::manifest::Entry],
    ) -> Changes {
        use std::collections::BTreeMap;
        let key = |e: &crate::profile::ce::manifest::Entry| (e.sha256, e.executable);
        let from: BTreeMap<&str, _> = from.iter().map(|e| (e.path.as_str(), key(e))).collect();
        let mut changes = Changes::default();
        for e in to {
            match from.get(e.path.as_str()) {
                None => changes.added.push(e.path.clone()),
                Some(k) if *k != key(e) => changes.changed.push(e.path.clone()),
                Some(_) => {}
            }
        }
        let to: std::collections::HashSet<&str> = to.iter().map(|e| e.path.as_str()).collect();
        changes.removed = from
            .keys()
            .filter(|p| !to.contains(*p))
            .map(|p| p.to_string())
            .collect();
        changes.added.sort();
        changes.changed.sort();
        changes
    }
}

#[cfg(test)]
impl SourceRecord {
    /// A clean record of `commit` at the root of `repository`, read from
    /// its objects: what tests vary one field of.
    pub(crate) fn of_commit(repository: &str, commit: Option<&str>) -> SourceRecord {
        SourceRecord {
            read_from: ReadFrom::Git,
            repository: repository.into(),
            commit: commit.map(str::to_string),
            path: String::new(),
            tree: None,
            tag: None,
            clean: true,
            changes: Changes::default(),
            commit_refused: None,
        }
    }
}

/// How a store came to hold a source record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Via {
    /// An ingest in this store found it.
    Ingest,
    /// A pull brought it from a registry.
    Registry,
    /// An import brought it from a bundle.
    Bundle,
}

impl Via {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Ingest => "ingest",
            Via::Registry => "registry",
            Via::Bundle => "bundle",
        }
    }
}

/// One source record of a snapshot, as kept: when the ingest that found it
/// ran, how this store came to hold it, and the record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceEntry {
    /// When the ingest that found the source ran (UTC, RFC 3339).
    pub at: String,
    /// How this store came to hold the record.
    pub via: Via,
    /// The record.
    pub record: SourceRecord,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ce::manifest::Entry;

    fn entry(path: &str, data: &[u8], executable: bool) -> Entry {
        Entry::of(path, data, executable)
    }

    #[test]
    fn changes_name_every_path_that_differs() {
        let from = [
            entry("a", b"1", false),
            entry("b", b"2", false),
            entry("c", b"3", false),
            entry("e", b"5", false),
        ];
        let to = [
            entry("a", b"1", false),
            entry("b", b"2", true),
            entry("d", b"4", false),
            entry("e", b"6", false),
            entry("f", b"7", false),
        ];
        let changes = Changes::between(&from, &to);
        assert_eq!(changes.added, ["d", "f"]);
        assert_eq!(changes.changed, ["b", "e"]);
        assert_eq!(changes.removed, ["c"]);
        assert!(Changes::between(&from, &from).is_empty());
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let entry = SourceEntry {
            at: "2026-01-02T03:04:05.678Z".into(),
            via: Via::Ingest,
            record: SourceRecord {
                read_from: ReadFrom::WorkTree,
                repository: "https://github.com/o/r".into(),
                commit: Some("a".repeat(40)),
                path: "plugins/p".into(),
                tree: Some("b".repeat(40)),
                tag: Some("v1".into()),
                clean: false,
                changes: Changes {
                    added: vec!["x".into()],
                    ..Changes::default()
                },
                commit_refused: None,
            },
        };
        let json = serde_json::to_string(&entry).unwrap();
        assert!(json.contains(r#""read_from":"work-tree""#), "{json}");
        assert!(json.contains(r#""via":"ingest""#), "{json}");
        assert!(!json.contains("commit_refused"), "{json}");
        let back: SourceEntry = serde_json::from_str(&json).unwrap();
        assert_eq!(back, entry);
    }
}
