//! The catalogue's answers for auditors: which snapshots are stored
//! (`list`), their ingest events (`log`), which hold a content or a path
//! (`find`), what is known of one (`show`), and what changed between two
//! (`diff`).

use std::collections::{BTreeMap, HashMap};

use crate::catalogue::{
    resolve, Catalogue, FileFilter, IngestEvent, Provenance, SnapshotRow, ViewRow,
};
use crate::digest::{DigestPrefix, ManifestDigest, ObjectId, ParseDigestError};
use crate::error::{Error, Misuse, Request, Result};
use crate::profile::ce::manifest::Entry;
use crate::source::{ReadFrom, SourceEntry, SourceRecord, Via};
use crate::store::Store;

/// A source record in brief: the commit, its tag, whether the snapshot is
/// the commit's, how the bytes were read and how the store came to hold the
/// record. `list` and `audit` show a snapshot's newest record so.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SourceSummary {
    /// The commit, as 40 hex digits; null in a work tree with no commit yet.
    pub commit: Option<String>,
    /// A tag pointing at the commit, if any.
    pub tag: Option<String>,
    /// Whether the snapshot equals the snapshot of the commit's tree.
    pub clean: bool,
    /// How the ingest read the bytes.
    pub read_from: ReadFrom,
    /// How the store came to hold the record.
    pub via: Via,
}

impl From<&SourceEntry> for SourceSummary {
    fn from(e: &SourceEntry) -> SourceSummary {
        SourceSummary {
            commit: e.record.commit.clone(),
            tag: e.record.tag.clone(),
            clean: e.record.clean,
            read_from: e.record.read_from,
            via: e.via,
        }
    }
}

/// The summary of a snapshot's newest source record, if it has one.
pub fn newest_source(cat: &Catalogue, digest: &ManifestDigest) -> Result<Option<SourceSummary>> {
    Ok(cat
        .sources(digest)?
        .last()
        .map(|k| SourceSummary::from(&k.entry)))
}

/// One snapshot as `cestore list` shows it.
#[derive(Debug, serde::Serialize)]
pub struct ListedSnapshot {
    /// The catalogue's row.
    #[serde(flatten)]
    pub row: SnapshotRow,
    /// Its newest source record in brief, or null when it has none.
    pub source: Option<SourceSummary>,
}

/// The report of `cestore list`.
#[derive(Debug, serde::Serialize)]
pub struct ListReport {
    /// The snapshots, oldest first.
    pub snapshots: Vec<ListedSnapshot>,
}

/// Lists snapshots, optionally filtered, each with its newest source record.
pub fn list(store: &Store, version: Option<&str>, name: Option<&str>) -> Result<ListReport> {
    let cat = store.catalogue();
    let snapshots = cat
        .snapshots(version, name)?
        .into_iter()
        .map(|row| {
            let source = newest_source(cat, &row.digest)?;
            Ok(ListedSnapshot { row, source })
        })
        .collect::<Result<_>>()?;
    Ok(ListReport { snapshots })
}

/// One ingest event as `cestore log` shows it.
#[derive(Debug, serde::Serialize)]
pub struct LoggedEvent {
    /// The catalogue's event.
    #[serde(flatten)]
    pub event: IngestEvent,
    /// The source record this event kept (the record of the same snapshot
    /// and time), or null.
    pub source_record: Option<SourceRecord>,
}

/// The report of `cestore log`.
#[derive(Debug, serde::Serialize)]
pub struct LogReport {
    /// The ingest events, oldest first.
    pub ingests: Vec<LoggedEvent>,
}

/// Lists ingest events, of one snapshot or all, each with the source
/// record it kept.
pub fn log(store: &Store, digest: Option<&str>) -> Result<LogReport> {
    let cat = store.catalogue();
    let digest = digest.map(|d| resolve(cat, d)).transpose()?;
    let mut records: HashMap<ManifestDigest, Vec<SourceEntry>> = HashMap::new();
    let mut ingests = Vec::new();
    for event in cat.ingests(digest.as_ref())? {
        let kept = match records.entry(event.digest) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(
                cat.sources(&event.digest)?
                    .into_iter()
                    .map(|k| k.entry)
                    .collect(),
            ),
        };
        let source_record = kept
            .iter()
            .find(|e| e.at == event.at)
            .map(|e| e.record.clone());
        ingests.push(LoggedEvent {
            event,
            source_record,
        });
    }
    Ok(LogReport { ingests })
}

/// What `cestore find` looks for.
pub enum FindQuery<'a> {
    /// A file content, by SHA-256.
    Object(&'a str),
    /// A relative path.
    Path(&'a str),
}

/// One file of one snapshot that `cestore find` matched.
#[derive(Debug, serde::Serialize)]
pub struct FindHit {
    /// The snapshot.
    pub manifest_digest: ManifestDigest,
    /// Its version.
    pub version: String,
    /// The file's path.
    pub path: String,
    /// The file's SHA-256.
    pub sha256: ObjectId,
    /// The file's size.
    pub size: i64,
    /// Whether it is executable.
    pub executable: bool,
}

/// The report of `cestore find`.
#[derive(Debug, serde::Serialize)]
pub struct FindReport {
    /// Every match, by snapshot then manifest order.
    pub matches: Vec<FindHit>,
}

/// Lists the snapshots that contain a content or a path.
///
/// `--object` takes a SHA-256 or a prefix that only one stored content has.
/// `--path` takes an exact path, a directory (`skills/ce-plan` or
/// `skills/ce-plan/`: every file below it), or a glob (see [`PathGlob`]).
pub fn find(store: &Store, query: &FindQuery<'_>) -> Result<FindReport> {
    let cat = store.catalogue();
    let hits = match query {
        FindQuery::Object(text) => {
            let prefix: DigestPrefix =
                text.parse()
                    .map_err(|e: ParseDigestError| Misuse::ObjectPrefix {
                        reason: e.to_string(),
                    })?;
            let ids = cat.objects_with_prefix(prefix.as_str(), 11)?;
            match ids.as_slice() {
                [] => Vec::new(),
                [one] => cat.files_matching(&FileFilter::Object(*one))?,
                _ => {
                    return Err(Error::AmbiguousObject {
                        prefix: prefix.to_string(),
                        matches: ids,
                    })
                }
            }
        }
        FindQuery::Path(p) => {
            let p = p.trim_start_matches("./");
            if p.contains(['*', '?']) {
                let literal = &p[..p.find(['*', '?']).unwrap_or(p.len())];
                let glob = PathGlob::new(p).map_err(|e| Request::Glob {
                    pattern: p.to_string(),
                    reason: e.kind().to_string(),
                })?;
                cat.files_matching(&FileFilter::PathStartsWith(literal))?
                    .into_iter()
                    .filter(|h| glob.is_match(&h.entry.path))
                    .collect()
            } else {
                cat.files_matching(&FileFilter::PathOrUnder(p.trim_end_matches('/')))?
            }
        }
    };
    let matches = hits
        .into_iter()
        .map(|h| FindHit {
            manifest_digest: h.digest,
            version: h.version,
            path: h.entry.path,
            sha256: h.entry.sha256,
            size: h.entry.size as i64,
            executable: h.entry.executable,
        })
        .collect();
    Ok(FindReport { matches })
}

/// A glob of `find --path`, compiled once (by `globset`) and matched in time
/// linear in the path, however many `**` it holds.
///
/// A path matches when it matches component by component (split at `/`):
/// `*` matches any run of characters within one component, `?` one
/// character, and a component that is exactly `**` matches any number of
/// whole components, none included. Every other character matches itself.
///
/// `globset` reads `[`, `{` and `\` as syntax and matches `?` against a byte,
/// where this glob matches them literally and `?` against a character. So
/// both the pattern and the path are spelt for it one character at a time:
/// each component starts with `\x02` (so that an empty one is not lost to a
/// `**` beside it), each character but `/` becomes `\x01` and its code point
/// in six hex digits, and `?` a token of that shape with any digits. A token
/// starts with the only `\x01` it holds, so a `*` can only hand over to the
/// next token at a character's edge. A component `**` is kept, runs of them are one (as
/// they match the same), and a pattern ending in `/**` also matches the path
/// without it (`globset` asks for the `/`).
#[derive(Debug)]
pub struct PathGlob(globset::GlobSet);

impl PathGlob {
    /// Compiles `pattern`.
    pub fn new(pattern: &str) -> Result<PathGlob, globset::Error> {
        let mut parts: Vec<&str> = Vec::new();
        for part in pattern.split('/') {
            if !(part == "**" && parts.last() == Some(&"**")) {
                parts.push(part);
            }
        }
        let mut set = globset::GlobSetBuilder::new();
        set.add(Self::glob(&parts)?);
        if parts.len() > 1 && parts.last() == Some(&"**") {
            set.add(Self::glob(&parts[..parts.len() - 1])?);
        }
        Ok(PathGlob(set.build()?))
    }

    fn glob(parts: &[&str]) -> Result<globset::Glob, globset::Error> {
        let spelt: Vec<String> = parts
            .iter()
            .map(|part| match *part {
                "**" => "**".to_string(),
                part => std::iter::once("\u{2}".to_string())
                    .chain(part.chars().map(|c| match c {
                        '*' => "*".to_string(),
                        '?' => format!("\u{1}{}", "[0-9a-f]".repeat(6)),
                        c => spell(c),
                    }))
                    .collect(),
            })
            .collect();
        globset::GlobBuilder::new(&spelt.join("/"))
            .literal_separator(true)
            .backslash_escape(false)
            .build()
    }

    /// Whether `path` matches.
    pub fn is_match(&self, path: &str) -> bool {
        let spelt: Vec<String> = path
            .split('/')
            .map(|part| {
                std::iter::once("\u{2}".to_string())
                    .chain(part.chars().map(spell))
                    .collect()
            })
            .collect();
        let spelt = spelt.join("/");
        self.0.is_match(spelt)
    }
}

/// A character as [`PathGlob`] spells it.
fn spell(c: char) -> String {
    format!("\u{1}{:06x}", u32::from(c))
}

/// What to show.
pub struct ShowOptions<'a> {
    /// A digest or unique prefix.
    pub digest: &'a str,
    /// Whether to list the files.
    pub files: bool,
}

/// The report of `cestore show`.
#[derive(Debug, serde::Serialize)]
pub struct ShowReport {
    /// The reference's provenance fields.
    pub provenance: Provenance,
    /// The snapshot's profile: `ce`, `tree`, `dependencies` or `task`.
    pub profile: String,
    /// A tree kind's harness digests (a task's four), by the harness's names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub harness_digests: Option<HarnessDigests>,
    /// When the snapshot was first ingested.
    pub first_ingested_at: Option<String>,
    /// When it was last ingested.
    pub last_ingested_at: Option<String>,
    /// How many times it was ingested.
    pub ingest_count: i64,
    /// The views of it that are recorded.
    pub views: Vec<ShownView>,
    /// Its source records, oldest first: where its bytes came from, as each
    /// ingest (or the registry or bundle it came through) found it.
    pub sources: Vec<SourceEntry>,
    /// Its attestations, oldest first: who signed it and when (the key ids
    /// they claim; `cestore attestations --trusted-key` checks them).
    pub attestations: Vec<ShownAttestation>,
    /// The files in manifest order, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<Entry>>,
    /// An environment's members, in (role, digest) order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<ShownMember>>,
    /// The recorded environments that name this snapshot.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub environments: Vec<ManifestDigest>,
    /// How the snapshot came into this store, from its first event other
    /// than `origin`; null when the store recorded none.
    pub came_from: Option<CameFrom>,
}

/// One member of an environment, as `show` gives it.
#[derive(Debug, serde::Serialize)]
pub struct ShownMember {
    /// The results-row field it fills.
    pub role: String,
    /// Its kind.
    pub kind: &'static str,
    /// Its digest.
    pub digest: ManifestDigest,
    /// Its name in the store, `None` when the store does not record it.
    pub name: Option<String>,
}

/// The harness's digests a tree-kind snapshot gives, by the harness's
/// field names; each present only for the kinds that have it.
#[derive(Debug, Default, serde::Serialize)]
pub struct HarnessDigests {
    /// A task's own digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_asset_snapshot_digest: Option<String>,
    /// A tree's digest, or the tree a task names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_asset_manifest_digest: Option<String>,
    /// A dependency list's digest, or the one a task names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_dependency_manifest_digest: Option<String>,
    /// A dependency list's content digest, or the one a task names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_dependency_content_digest: Option<String>,
    /// An environment's own digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment_digest: Option<String>,
}

impl HarnessDigests {
    /// The digests a `tree` manifest gives: its own, as the task's manifest
    /// digest.
    pub fn tree(digest: &ManifestDigest) -> HarnessDigests {
        HarnessDigests {
            task_asset_manifest_digest: Some(digest.to_hex()),
            ..HarnessDigests::default()
        }
    }

    /// The digests a tree-kind manifest gives; `None` for a CE manifest.
    pub fn of(manifest: &crate::profile::ce::manifest::Manifest) -> Option<HarnessDigests> {
        use crate::profile::tree::stored::Stored;
        let stored = manifest.tree.as_ref()?;
        let own = Some(manifest.digest.to_hex());
        Some(match stored {
            Stored::Tree(_) => HarnessDigests::tree(&manifest.digest),
            Stored::Dependencies(_) => HarnessDigests {
                sandbox_dependency_manifest_digest: own,
                sandbox_dependency_content_digest: stored.content_digest().map(|d| d.to_hex()),
                ..HarnessDigests::default()
            },
            Stored::Task(t) => HarnessDigests {
                task_asset_snapshot_digest: own,
                task_asset_manifest_digest: Some(t.manifest_digest.to_hex()),
                sandbox_dependency_manifest_digest: Some(t.dependencies.manifest.to_hex()),
                sandbox_dependency_content_digest: Some(t.dependencies.content.to_hex()),
                ..HarnessDigests::default()
            },
            Stored::Environment(_) => HarnessDigests {
                environment_digest: own,
                ..HarnessDigests::default()
            },
        })
    }

    /// Each digest present, with its field name, in the order above.
    pub fn named(&self) -> Vec<(&'static str, &str)> {
        [
            (
                "task_asset_snapshot_digest",
                &self.task_asset_snapshot_digest,
            ),
            (
                "task_asset_manifest_digest",
                &self.task_asset_manifest_digest,
            ),
            (
                "sandbox_dependency_manifest_digest",
                &self.sandbox_dependency_manifest_digest,
            ),
            (
                "sandbox_dependency_content_digest",
                &self.sandbox_dependency_content_digest,
            ),
            ("environment_digest", &self.environment_digest),
        ]
        .into_iter()
        .filter_map(|(name, d)| d.as_deref().map(|d| (name, d)))
        .collect()
    }
}

/// One attestation of a snapshot, in brief.
#[derive(Debug, serde::Serialize)]
pub struct ShownAttestation {
    /// Its id: the SHA-256 of its envelope.
    pub id: crate::digest::AttestationId,
    /// The id of the key that signed it, as the envelope claims.
    pub keyid: String,
    /// When it was made or received.
    pub at: String,
}

/// A recorded view, and whether it is still on disk.
#[derive(Debug, serde::Serialize)]
pub struct ShownView {
    /// The catalogue's record.
    #[serde(flatten)]
    pub row: ViewRow,
    /// Whether anything is at the view's path; a view removed without
    /// `cestore discard` stays recorded until `cestore gc` forgets it.
    pub on_disk: bool,
}

impl ShownView {
    /// Looks at the path of a recorded view.
    fn of(row: ViewRow) -> ShownView {
        let on_disk = std::fs::symlink_metadata(&row.path).is_ok();
        ShownView { row, on_disk }
    }
}

/// The canonical manifest bytes of a snapshot, as stored.
#[derive(Debug, serde::Serialize)]
pub struct ManifestReport {
    /// The manifest digest.
    pub manifest_digest: crate::digest::ManifestDigest,
    /// The canonical manifest, as text (it is ASCII).
    pub canonical_manifest: String,
    /// The bytes, for the raw form.
    #[serde(skip)]
    pub bytes: Vec<u8>,
}

/// Gathers what the store knows about a snapshot.
pub fn show(store: &Store, opts: &ShowOptions<'_>) -> Result<ShowReport> {
    let cat = store.catalogue();
    let digest = resolve(cat, opts.digest)?;
    let row = cat.snapshot(&digest)?;
    let (_, last, count) = cat.ingest_summary(&digest)?;
    // A tree's one harness digest is its own: its manifest (megabytes for a
    // runtime, perhaps kept as a chain of deltas) is read only for the kinds
    // whose manifests name more.
    let parsed = match row.profile.as_str() {
        "ce" | "tree" => None,
        _ => crate::profile::ce::manifest::Manifest::parse(&cat.manifest_bytes(&digest)?).ok(),
    };
    let harness_digests = match row.profile.as_str() {
        "tree" => Some(HarnessDigests::tree(&digest)),
        _ => parsed.as_ref().and_then(HarnessDigests::of),
    };
    let members = match parsed.as_ref().and_then(|m| m.tree.as_ref()) {
        Some(crate::profile::tree::stored::Stored::Environment(members)) => Some(
            members
                .iter()
                .map(|m| ShownMember {
                    role: m.role.clone(),
                    kind: m.kind.name(),
                    digest: m.digest,
                    name: cat.snapshot(&m.digest).ok().map(|r| r.name),
                })
                .collect(),
        ),
        _ => None,
    };
    let environments = cat
        .named_by(&digest)?
        .into_iter()
        .filter(|(_, profile)| profile == "environment")
        .map(|(d, _)| d)
        .collect();
    Ok(ShowReport {
        provenance: Provenance::from(&row),
        profile: row.profile.clone(),
        harness_digests,
        // The time `list` gives (the earliest of the row's and its events').
        first_ingested_at: Some(row.first_ingested_at.clone()),
        last_ingested_at: last,
        ingest_count: count,
        views: cat
            .views(Some(&digest))?
            .into_iter()
            .map(ShownView::of)
            .collect(),
        sources: cat.sources(&digest)?.into_iter().map(|k| k.entry).collect(),
        attestations: cat
            .attestations(&digest)?
            .into_iter()
            .map(|k| ShownAttestation {
                id: k.id,
                keyid: k.keyid,
                at: k.at,
            })
            .collect(),
        files: if opts.files {
            Some(cat.files(&digest)?)
        } else {
            None
        },
        members,
        environments,
        came_from: CameFrom::of(&cat.ingests(Some(&digest))?),
    })
}

/// How a snapshot came into a store: its first event there other than an
/// `origin` (which says where it was first ingested, elsewhere maybe).
#[derive(Debug, serde::Serialize)]
pub struct CameFrom {
    /// `ingested` (from a directory or git), `pulled` (by `cestore pull`
    /// or an audit's `--registry`), `substituted` (pulled on a miss from a
    /// substituter), `imported` (from a bundle), `recovered` (a catalogue
    /// rebuilt by `cestore recover`), or another event's name.
    pub how: String,
    /// The event's source: a path, an `oci://` reference, a bundle.
    pub source: String,
    /// When (UTC, RFC 3339).
    pub at: String,
}

impl CameFrom {
    /// How the snapshot of `events` (its ingest log, oldest first) came.
    pub fn of(events: &[crate::catalogue::IngestEvent]) -> Option<CameFrom> {
        use crate::catalogue::SUBSTITUTE_EVENT as SUBSTITUTE;
        let first = events.iter().find(|e| e.event != "origin")?;
        let how = match first.event.as_str() {
            SUBSTITUTE => "substituted".to_string(),
            // As an older store recorded a substitution: its pull, then a
            // `substitute` event of the same source.
            "pull"
                if events
                    .iter()
                    .any(|e| e.event == SUBSTITUTE && e.source == first.source) =>
            {
                "substituted".to_string()
            }
            "ingest" => "ingested".into(),
            "pull" => "pulled".into(),
            "import" => "imported".into(),
            other => other.to_string(),
        };
        Some(CameFrom {
            how,
            source: first.source.clone(),
            at: first.at.clone(),
        })
    }
}

/// Reads a snapshot's canonical manifest bytes.
pub fn manifest(store: &Store, digest: &str) -> Result<ManifestReport> {
    let digest = resolve(store.catalogue(), digest)?;
    let bytes = store.catalogue().manifest_bytes(&digest)?;
    Ok(ManifestReport {
        manifest_digest: digest,
        canonical_manifest: String::from_utf8_lossy(&bytes).into_owned(),
        bytes,
    })
}

/// One file that differs between two snapshots.
#[derive(Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "change", rename_all = "kebab-case")]
pub enum Change {
    /// In B only.
    Added {
        /// The path.
        path: String,
        /// Its SHA-256 in B.
        sha256: ObjectId,
    },
    /// In A only.
    Removed {
        /// The path.
        path: String,
        /// Its SHA-256 in A.
        sha256: ObjectId,
    },
    /// In both, with other bytes (and possibly another exec bit).
    Content {
        /// The path.
        path: String,
        /// Its SHA-256 in A.
        from: ObjectId,
        /// Its SHA-256 in B.
        to: ObjectId,
        /// Whether the exec bit changed too.
        exec_changed: bool,
    },
    /// In both, with the same bytes and another exec bit.
    Exec {
        /// The path.
        path: String,
        /// Whether it is executable in B.
        executable: bool,
    },
}

/// The report of `cestore diff`.
#[derive(Debug, serde::Serialize)]
pub struct DiffReport {
    /// The first snapshot.
    pub from: ManifestDigest,
    /// The second snapshot.
    pub to: ManifestDigest,
    /// The changes, by path.
    pub changes: Vec<Change>,
}

/// Lists the changes between the files of two manifests.
pub fn changes(a: &[Entry], b: &[Entry]) -> Vec<Change> {
    let a: BTreeMap<&str, &Entry> = a.iter().map(|e| (e.path.as_str(), e)).collect();
    let b: BTreeMap<&str, &Entry> = b.iter().map(|e| (e.path.as_str(), e)).collect();
    let mut out = Vec::new();
    for (path, ea) in &a {
        match b.get(path) {
            None => out.push(Change::Removed {
                path: path.to_string(),
                sha256: ea.sha256,
            }),
            Some(eb) if ea.sha256 != eb.sha256 => out.push(Change::Content {
                path: path.to_string(),
                from: ea.sha256,
                to: eb.sha256,
                exec_changed: ea.executable != eb.executable,
            }),
            Some(eb) if ea.executable != eb.executable => out.push(Change::Exec {
                path: path.to_string(),
                executable: eb.executable,
            }),
            Some(_) => {}
        }
    }
    for (path, eb) in &b {
        if !a.contains_key(path) {
            out.push(Change::Added {
                path: path.to_string(),
                sha256: eb.sha256,
            });
        }
    }
    out.sort_by(|x, y| change_path(x).cmp(change_path(y)));
    out
}

fn change_path(c: &Change) -> &str {
    match c {
        Change::Added { path, .. }
        | Change::Removed { path, .. }
        | Change::Content { path, .. }
        | Change::Exec { path, .. } => path,
    }
}

/// Compares two snapshots.
pub fn diff(store: &Store, a: &str, b: &str) -> Result<DiffReport> {
    let cat = store.catalogue();
    let from = resolve(cat, a)?;
    let to = resolve(cat, b)?;
    Ok(DiffReport {
        from,
        to,
        changes: changes(&cat.files(&from)?, &cat.files(&to)?),
    })
}

#[cfg(test)]
mod tests {
    use super::PathGlob;
    use proptest::prelude::*;

    /// Whether `path` matches `pattern`; a pattern too large to compile
    /// matches nothing.
    fn glob_matches(pattern: &str, path: &str) -> bool {
        PathGlob::new(pattern).is_ok_and(|g| g.is_match(path))
    }

    #[test]
    fn globs() {
        let yes = [
            ("skills/*/SKILL.md", "skills/ce-plan/SKILL.md"),
            ("skills/ce-*/SKILL.md", "skills/ce-plan/SKILL.md"),
            ("skills/**/SKILL.md", "skills/SKILL.md"),
            ("skills/**/SKILL.md", "skills/a/b/SKILL.md"),
            ("**", "a/b"),
            ("*.md", "README.md"),
            ("a?c", "abc"),
            ("a?c", "aéc"),
            ("*", ""),
        ];
        let no = [
            ("skills/*/SKILL.md", "skills/a/b/SKILL.md"),
            ("skills/*", "skills/a/b"),
            ("*.md", "skills/a.md"),
            ("a?c", "ac"),
            ("a*b", "a/b"),
            ("skills/*/SKILL.md", "skills/ce-plan/SKILL.mdx"),
        ];
        for (p, t) in yes {
            assert!(glob_matches(p, t), "{p} should match {t}");
        }
        for (p, t) in no {
            assert!(!glob_matches(p, t), "{p} should not match {t}");
        }
    }

    /// Many `**` against a long path: the recursive matcher this replaced
    /// tried every split of the path among them (exponential); globset's
    /// automaton answers at once.
    #[test]
    fn many_double_stars_against_a_long_path() {
        let pattern = format!("{}x", "**/".repeat(40));
        let long: Vec<String> = (0..200).map(|i| format!("d{i}")).collect();
        let long = long.join("/");
        assert!(!glob_matches(&pattern, &long));
        assert!(glob_matches(&pattern, &format!("{long}/x")));
        let pattern = format!("a/{}b/*.md", "**/c/".repeat(30));
        let path = format!("a/{}b/r.md", "c/".repeat(30));
        assert!(glob_matches(&pattern, &path));
        assert!(!glob_matches(
            &pattern,
            &format!("a/{}b/r.md", "c/".repeat(29))
        ));
    }

    /// The matcher this module had before globset, kept as the reference
    /// for the glob's meaning (exponential on many `**`: small inputs only).
    fn reference(pattern: &str, path: &str) -> bool {
        fn parts_match(pat: &[&str], parts: &[&str]) -> bool {
            match pat.split_first() {
                None => parts.is_empty(),
                Some((&"**", rest)) => (0..=parts.len()).any(|i| parts_match(rest, &parts[i..])),
                Some((first, rest)) => parts.split_first().is_some_and(|(part, tail)| {
                    part_matches(first, part) && parts_match(rest, tail)
                }),
            }
        }
        fn part_matches(pat: &str, text: &str) -> bool {
            let (pat, text): (Vec<char>, Vec<char>) =
                (pat.chars().collect(), text.chars().collect());
            let (mut p, mut t) = (0, 0);
            let mut star: Option<(usize, usize)> = None;
            while t < text.len() {
                if p < pat.len() && (pat[p] == '?' || pat[p] == text[t]) {
                    p += 1;
                    t += 1;
                } else if p < pat.len() && pat[p] == '*' {
                    star = Some((p, t));
                    p += 1;
                } else if let Some((sp, st)) = star {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                } else {
                    return false;
                }
            }
            pat[p..].iter().all(|c| *c == '*')
        }
        let pat: Vec<&str> = pattern.split('/').collect();
        let parts: Vec<&str> = path.split('/').collect();
        parts_match(&pat, &parts)
    }

    proptest! {
        /// The glob means what it meant: for patterns of `*`, `?`, `**`,
        /// globset's syntax (`[`, `]`, `{`, `,`, `}`, `\\`, `!`) and
        /// characters of one to four bytes, against paths of those
        /// characters, it matches exactly where the reference matches.
        #[test]
        fn globset_keeps_the_glob_meaning(
            pattern in proptest::collection::vec(
                prop_oneof![
                    Just("**".to_string()),
                    "[ab\\*?é€😀\\[\\]{},!\\\\]{0,4}",
                ],
                1..5,
            ),
            path in proptest::collection::vec("[abé€😀\\[\\]{},!\\\\]{1,4}", 1..5),
        ) {
            let (pattern, path) = (pattern.join("/"), path.join("/"));
            prop_assert_eq!(glob_matches(&pattern, &path), reference(&pattern, &path), "{} against {}", pattern, path);
        }
    }
}
