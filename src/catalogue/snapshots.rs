//! The `snapshots` table: one row per snapshot, its manifest as kept
//! (`manifests`), and the ingest that records one (its file rows and events
//! with it).

use rusqlite::{params, OptionalExtension};

use super::events::insert_event;
use super::files::{insert_files, prune_entries};
use super::{errors, immediate, Attached, Catalogue, IngestEvent, ViewKind};
use crate::digest::{DigestPrefix, ManifestDigest};
use crate::error::{Candidate, Error, Misuse, Result};
use crate::profile::ce::manifest::Entry;
use crate::profile::tree::stored::Stored;

/// The reference's six provenance fields, exactly as it names them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Provenance {
    /// The plugin name.
    pub name: String,
    /// The release version.
    pub version: String,
    /// The manifest schema version.
    pub manifest_schema_version: i64,
    /// The manifest digest.
    pub manifest_digest: ManifestDigest,
    /// The number of files.
    pub file_count: i64,
    /// The bytes of all files together.
    pub total_bytes: i64,
}

impl From<&SnapshotRow> for Provenance {
    fn from(row: &SnapshotRow) -> Self {
        Provenance {
            name: row.name.clone(),
            version: row.version.clone(),
            manifest_schema_version: row.schema_version,
            manifest_digest: row.digest,
            file_count: row.file_count,
            total_bytes: row.total_bytes,
        }
    }
}

/// Resolves a snapshot named by a user: by its digest, by a unique prefix of
/// it (at least [`MIN_PREFIX_LEN`](crate::digest::MIN_PREFIX_LEN) hex
/// digits), or as `@VERSION`, by the version only it has.
pub fn resolve(cat: &Catalogue, text: &str) -> Result<ManifestDigest> {
    if let Some(version) = text.strip_prefix('@') {
        if version.is_empty() {
            return Err(crate::error::Request::NoVersion {
                text: text.to_string(),
            }
            .into());
        }
        return cat.resolve_version(version);
    }
    let prefix: DigestPrefix = text
        .parse()
        .map_err(|e| crate::error::Request::NotADigest {
            text: text.to_string(),
            reason: format!("{e}"),
        })?;
    match cat.resolve(&prefix) {
        // A dependency list is found by its content digest too.
        Err(Error::UnknownDigest { .. }) if prefix.full().is_some() => {
            match cat.by_content_digest(prefix.as_str())? {
                Some(digest) => Ok(digest),
                None => cat.resolve(&prefix),
            }
        }
        found => found,
    }
}

impl From<SnapshotRow> for Candidate {
    fn from(row: SnapshotRow) -> Self {
        Candidate {
            manifest_digest: row.digest,
            version: row.version,
            ingested_at: row.first_ingested_at,
        }
    }
}

/// A snapshot's summary row.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SnapshotRow {
    /// The manifest digest.
    #[serde(rename = "manifest_digest")]
    pub digest: ManifestDigest,
    /// The plugin name.
    pub name: String,
    /// The release version.
    pub version: String,
    /// The manifest schema version.
    #[serde(rename = "manifest_schema_version")]
    pub schema_version: i64,
    /// The number of files.
    pub file_count: i64,
    /// The bytes of all files together.
    pub total_bytes: i64,
    /// When the snapshot was first ingested (UTC, RFC 3339).
    pub first_ingested_at: String,
    /// The snapshot's profile: `ce`, `tree`, `dependencies`, `task` or
    /// `environment`.
    pub profile: String,
}

/// What an ingest adds to the catalogue.
pub struct NewSnapshot<'a> {
    /// The snapshot's summary.
    pub name: &'a str,
    /// The release version.
    pub version: &'a str,
    /// The digest of `manifest`.
    pub digest: ManifestDigest,
    /// The canonical manifest bytes.
    pub manifest: &'a [u8],
    /// The entries `manifest` encodes.
    pub entries: &'a [Entry],
    /// When it was first ingested, when that is known from elsewhere (a
    /// recovered row); now when `None`.
    pub first_ingested_at: Option<&'a str>,
    /// What a tree-kind manifest holds (its profile, a dependency list's
    /// content digest, the manifests a task names); `None` for CE.
    pub tree: Option<&'a Stored>,
    /// `manifest` kept as a delta against a recorded manifest
    /// (catalogue/kept.rs), kept so when that base is still recorded and
    /// its chain short enough; else the manifest is kept whole.
    pub delta: Option<Delta<'a>>,
}

/// A manifest's delta against a recorded one, as [`super::kept::delta`]
/// wrote it.
#[derive(Clone, Copy, Debug)]
pub struct Delta<'a> {
    /// The base manifest.
    pub base: ManifestDigest,
    /// The kept bytes.
    pub kept: &'a [u8],
}

impl Catalogue {
    /// Whether a snapshot with this digest is recorded.
    pub fn has_snapshot(&self, digest: &ManifestDigest) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT 1 FROM snapshots WHERE digest = ?1",
                [digest.to_hex()],
                |_| Ok(()),
            )
            .optional()
            .map(|r| r.is_some())
            .map_err(self.err("look up a snapshot"))
    }

    /// The kind of stored manifest recorded under this digest, `None` when
    /// none is (or the catalogue cannot say).
    pub fn kind_of(&self, digest: &ManifestDigest) -> Option<crate::profile::tree::stored::Kind> {
        self.conn
            .query_row(
                "SELECT profile FROM snapshots WHERE digest = ?1",
                [digest.to_hex()],
                |r| r.get::<_, String>(0),
            )
            .optional()
            .ok()
            .flatten()
            .and_then(|p| crate::profile::tree::stored::Kind::from_name(&p))
    }

    /// The snapshots whose manifests name this one (tasks, environments),
    /// with their profiles, by digest.
    pub fn named_by(&self, digest: &ManifestDigest) -> Result<Vec<(ManifestDigest, String)>> {
        let rows: Vec<(String, String)> = self
            .conn
            .prepare(
                "SELECT s.digest, s.profile FROM snapshot_refs r JOIN snapshots s ON s.id = r.task_id
                 WHERE r.digest = ?1 AND s.digest <> ?1 ORDER BY s.digest",
            )
            .and_then(|mut stmt| {
                stmt.query_map([digest.to_hex()], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect()
            })
            .map_err(self.err("list the snapshots naming a snapshot"))?;
        Ok(rows
            .into_iter()
            .filter_map(|(d, p)| d.parse().ok().map(|d| (d, p)))
            .collect())
    }

    /// Records an ingest: the snapshot and its files when new, the event
    /// always, `origin` (where an adopted snapshot was first ingested) before
    /// it when the snapshot is new, and `repairs` (events of objects it
    /// mended) after it, and what is `attached` (source records,
    /// attestations, a git tree's digest), in one transaction.
    pub fn record_ingest(
        &mut self,
        snap: &NewSnapshot<'_>,
        origin: Option<&IngestEvent>,
        event: &IngestEvent,
        repairs: &[IngestEvent],
        attached: Attached<'_>,
    ) -> Result<RecordedIngest> {
        let err = errors(&self.path);
        // One time for the event and, when new, the snapshot's row: the
        // event's own (its source record's), else now.
        let stamped;
        let event = if event.at.is_empty() {
            stamped = IngestEvent {
                at: crate::clock::now(),
                ..event.clone()
            };
            &stamped
        } else {
            event
        };
        // A new snapshot, or a repair, survives a power loss once reported;
        // one more event for a snapshot already recorded is not worth a
        // flush. (SQLite fixes the level outside the transaction: should the
        // snapshot vanish meanwhile, the transaction is made again durably.)
        let mut durable = !repairs.is_empty() || !self.has_snapshot(&snap.digest)?;
        loop {
            self.conn
                .execute_batch(if durable {
                    "PRAGMA synchronous = FULL"
                } else {
                    "PRAGMA synchronous = NORMAL"
                })
                .map_err(err("choose the commit's durability"))?;
            let tx = immediate(&mut self.conn).map_err(err("begin the ingest"))?;
            let inserted = tx
                .execute(
                    "INSERT OR IGNORE INTO snapshots
                     (digest, name, version, schema_version, file_count, total_bytes,
                      first_ingested_at, profile, content_digest)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, coalesce(?7, ?8), ?9, ?10)",
                    params![
                        snap.digest.to_hex(),
                        snap.name,
                        snap.version,
                        crate::profile::ce::manifest::SCHEMA_VERSION,
                        snap.entries.len() as i64,
                        snap.entries.iter().map(|e| e.size).sum::<u64>() as i64,
                        snap.first_ingested_at,
                        // Its first event's time: the origin's, else this ingest's.
                        origin
                            .map(|o| o.at.as_str())
                            .filter(|at| !at.is_empty())
                            .unwrap_or(event.at.as_str()),
                        snap.tree.map_or("ce", Stored::profile),
                        snap.tree
                            .and_then(Stored::content_digest)
                            .map(|d| d.to_hex()),
                    ],
                )
                .map_err(err("record the snapshot"))?
                == 1;
            if inserted && !durable {
                durable = true;
                continue;
            }
            if inserted {
                let id = tx.last_insert_rowid();
                insert_manifest(&tx, id, snap).map_err(err("record the manifest"))?;
                insert_files(&tx, id, snap.entries).map_err(err("record a file row"))?;
                for named in snap.tree.map(Stored::named).unwrap_or_default() {
                    tx.execute(
                        "INSERT OR IGNORE INTO snapshot_refs (task_id, digest) VALUES (?1, ?2)",
                        params![id, named.to_hex()],
                    )
                    .map_err(err("record the manifests a task names"))?;
                    // Checked in the transaction that records it: an `rm`
                    // of what it names either came first (and it is not
                    // recorded) or is refused after.
                    let held = tx
                        .query_row(
                            "SELECT 1 FROM snapshots WHERE digest = ?1",
                            [named.to_hex()],
                            |_| Ok(()),
                        )
                        .optional()
                        .map_err(err("look up a snapshot it names"))?
                        .is_some();
                    if !held {
                        return Err(Error::Conflict(format!(
                            "could not record {}: the snapshot {named} it names is not in the \
                             store (it was forgotten meanwhile); record that snapshot again first",
                            snap.digest
                        )));
                    }
                }
            }
            if let Some(origin) = origin.filter(|_| inserted) {
                insert_event(&tx, origin).map_err(err("record where the snapshot came from"))?;
            }
            insert_event(&tx, event).map_err(err("record the ingest event"))?;
            let event_id = tx.last_insert_rowid();
            for repair in repairs {
                insert_event(&tx, repair).map_err(err("record a repair event"))?;
            }
            attached
                .insert(&tx, &snap.digest)
                .map_err(err("record the source records and attestations"))?;
            tx.commit().map_err(err("commit the ingest"))?;
            if durable {
                self.conn
                    .execute_batch("PRAGMA synchronous = NORMAL")
                    .map_err(err("choose the commit's durability"))?;
            }
            return Ok(RecordedIngest {
                new_snapshot: inserted,
                event_id,
            });
        }
    }

    /// Takes back an ingest whose command then failed: its event, and the
    /// snapshot too when that ingest recorded it and nothing else uses it
    /// yet (no view, no other event). `forget` runs, inside the same
    /// transaction, when the snapshot goes. Returns whether it went.
    pub fn undo_ingest(
        &mut self,
        digest: &ManifestDigest,
        done: &RecordedIngest,
        forget: impl FnOnce() -> Result<()>,
    ) -> Result<bool> {
        let err = errors(&self.path);
        let tx = immediate(&mut self.conn).map_err(err("begin taking back an ingest"))?;
        tx.execute("DELETE FROM ingests WHERE id = ?1", [done.event_id])
            .map_err(err("take back an ingest event"))?;
        if done.new_snapshot {
            keep_dependents_whole(&tx, digest)?;
        }
        let forgotten = done.new_snapshot
            && tx
                .execute(
                    "DELETE FROM snapshots WHERE digest = ?1
                     AND NOT EXISTS (SELECT 1 FROM views v WHERE v.snapshot_id = snapshots.id)
                     AND NOT EXISTS (SELECT 1 FROM ingests i WHERE i.digest = ?1)",
                    [digest.to_hex()],
                )
                .map_err(err("take back a snapshot"))?
                == 1;
        if forgotten {
            prune_entries(&tx).map_err(err("forget file rows no snapshot lists"))?;
            forget()?;
        }
        tx.commit().map_err(err("commit taking back an ingest"))?;
        Ok(forgotten)
    }

    /// Resolves a digest or unique prefix to one snapshot's digest.
    pub fn resolve(&self, prefix: &DigestPrefix) -> Result<ManifestDigest> {
        let lo = prefix.as_str().to_string();
        let hi = format!("{lo}g");
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "{SNAPSHOT_SELECT} WHERE digest >= ?1 AND digest < ?2 ORDER BY digest LIMIT 11"
            ))
            .map_err(self.err("prepare a digest lookup"))?;
        let matches: Vec<SnapshotRow> = stmt
            .query_map([&lo, &hi], snapshot_row)
            .and_then(|rows| rows.collect())
            .map_err(self.err("look up a digest prefix"))?;
        one_of(prefix.to_string(), matches)
    }

    /// The dependency list whose content digest is `hex` (the first
    /// recorded, should several hold the same content).
    pub fn by_content_digest(&self, hex: &str) -> Result<Option<ManifestDigest>> {
        self.conn
            .query_row(
                "SELECT digest FROM snapshots WHERE content_digest = ?1
                 ORDER BY first_ingested_at, digest LIMIT 1",
                [hex],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err("look up a content digest"))
    }

    /// Resolves `@VERSION` to the one snapshot with that version.
    pub fn resolve_version(&self, version: &str) -> Result<ManifestDigest> {
        let matches = self.snapshots(Some(version), None)?;
        if matches.is_empty() {
            let mut versions: Vec<String> = Vec::new();
            for row in self.snapshots(None, None)? {
                if !versions.contains(&row.version) {
                    versions.push(row.version);
                }
            }
            return Err(Error::UnknownVersion {
                version: version.to_string(),
                versions,
            });
        }
        one_of(format!("@{version}"), matches)
    }

    /// A snapshot's summary row.
    pub fn snapshot(&self, digest: &ManifestDigest) -> Result<SnapshotRow> {
        self.conn
            .query_row(
                &format!("{SNAPSHOT_SELECT} WHERE digest = ?1"),
                [digest.to_hex()],
                snapshot_row,
            )
            .optional()
            .map_err(self.err("read a snapshot"))?
            .ok_or_else(|| Error::UnknownDigest {
                prefix: digest.to_hex(),
            })
    }

    /// Every snapshot, optionally filtered by version and name, oldest first.
    pub fn snapshots(&self, version: Option<&str>, name: Option<&str>) -> Result<Vec<SnapshotRow>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "{SNAPSHOT_SELECT} WHERE (?1 IS NULL OR version = ?1) AND (?2 IS NULL OR name = ?2)
                 ORDER BY first_ingested_at, digest"
            ))
            .map_err(self.err("prepare the snapshot list"))?;
        stmt.query_map(params![version, name], snapshot_row)
            .and_then(|rows| rows.collect())
            .map_err(self.err("list snapshots"))
    }

    /// Every snapshot row as it is written, without the ingest log: what
    /// [`Catalogue::salvage`] still reads of a catalogue whose log is damaged.
    pub(super) fn snapshot_rows_only(&self) -> Result<Vec<SnapshotRow>> {
        let mut stmt = self
            .conn
            .prepare(SNAPSHOT_ROWS_ONLY)
            .map_err(self.err("prepare the snapshot list"))?;
        stmt.query_map([], snapshot_row)
            .and_then(|rows| rows.collect())
            .map_err(self.err("list snapshots"))
    }

    /// A snapshot's canonical manifest bytes, unfolded from how the
    /// catalogue keeps them (whole, or a chain of deltas).
    pub fn manifest_bytes(&self, digest: &ManifestDigest) -> Result<Vec<u8>> {
        // One read of the whole chain, whatever an `rm` commits meanwhile.
        let _read = self.read_snapshot()?;
        canonical(&self.conn, &self.path, digest)
    }

    /// How the catalogue keeps a snapshot's manifest: its base, when it is
    /// a delta, and its depth in its chain.
    pub fn manifest_base(
        &self,
        digest: &ManifestDigest,
    ) -> Result<Option<(Option<ManifestDigest>, i64)>> {
        self.conn
            .query_row(
                "SELECT m.base, m.depth FROM manifests m JOIN snapshots s ON s.id = m.snapshot_id
                 WHERE s.digest = ?1",
                [digest.to_hex()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(self.err("read how a manifest is kept"))
    }

    /// The recorded snapshot a new manifest of `name` and `profile` is best
    /// kept against: the one of that name and profile recorded last, unless
    /// its chain of deltas is already [`super::kept::MAX_DEPTH`] long.
    pub fn delta_base(&self, name: &str, profile: &str) -> Result<Option<ManifestDigest>> {
        self.conn
            .query_row(
                "SELECT s.digest, m.depth FROM snapshots s JOIN manifests m ON m.snapshot_id = s.id
                 WHERE s.name = ?1 AND s.profile = ?2 ORDER BY s.id DESC LIMIT 1",
                params![name, profile],
                |r| Ok((r.get::<_, ManifestDigest>(0)?, r.get::<_, i64>(1)?)),
            )
            .optional()
            .map(|found| {
                found
                    .filter(|(_, depth)| *depth < super::kept::MAX_DEPTH)
                    .map(|(d, _)| d)
            })
            .map_err(self.err("choose a manifest's base"))
    }

    /// Forgets a snapshot with the records of its shared views and, with
    /// `force`, of its other views, in one transaction; without `force`,
    /// refuses while views of it other than the store's shared views are
    /// recorded. `forget` runs inside the transaction, after the rows are
    /// deleted. Returns every view record forgotten, with its kind.
    ///
    /// A shared view is the store's own: `discard` never removes one, and
    /// gc removes it once its snapshot is forgotten, so it never keeps its
    /// snapshot from being forgotten.
    pub fn remove_snapshot(
        &mut self,
        digest: &ManifestDigest,
        force: bool,
        forget: impl FnOnce() -> Result<()>,
    ) -> Result<Vec<(String, ViewKind)>> {
        let err = errors(&self.path);
        let hex = digest.to_hex();
        let tx = immediate(&mut self.conn).map_err(err("begin forgetting a snapshot"))?;
        let views: Vec<(String, ViewKind)> = tx
            .prepare(
                "SELECT v.path, v.kind FROM views v JOIN snapshots s ON s.id = v.snapshot_id
                 WHERE s.digest = ?1 ORDER BY v.path",
            )
            .and_then(|mut stmt| {
                stmt.query_map([&hex], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect()
            })
            .map_err(err("list a snapshot's views"))?;
        // A task names its tree and dependency list, an environment its
        // members: they stay while it does.
        let tasks: Vec<(String, String)> = tx
            .prepare(
                "SELECT s.digest, s.profile FROM snapshot_refs r JOIN snapshots s ON s.id = r.task_id
                 WHERE r.digest = ?1 AND s.digest <> ?1 ORDER BY s.digest",
            )
            .and_then(|mut stmt| {
                stmt.query_map([&hex], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect()
            })
            .map_err(err("list the tasks naming a snapshot"))?;
        if !tasks.is_empty() {
            let noun = if tasks.iter().all(|(_, p)| p == "task") {
                "task"
            } else if tasks.iter().all(|(_, p)| p == "environment") {
                "environment"
            } else {
                "snapshot"
            };
            return Err(Misuse::SnapshotNamedByTask {
                digest: *digest,
                tasks: tasks.iter().filter_map(|(t, _)| t.parse().ok()).collect(),
                noun,
            }
            .into());
        }
        let in_the_way: Vec<String> = views
            .iter()
            .filter(|(_, kind)| *kind != ViewKind::Shared)
            .map(|(path, _)| path.clone())
            .collect();
        if !in_the_way.is_empty() && !force {
            return Err(Misuse::SnapshotHasViews {
                digest: *digest,
                views: in_the_way,
            }
            .into());
        }
        tx.execute(
            "DELETE FROM views WHERE snapshot_id = (SELECT id FROM snapshots WHERE digest = ?1)",
            [&hex],
        )
        .map_err(err("forget a snapshot's views"))?;
        keep_dependents_whole(&tx, digest)?;
        let removed = tx
            .execute("DELETE FROM snapshots WHERE digest = ?1", [&hex])
            .map_err(err("forget a snapshot"))?;
        if removed == 0 {
            return Err(Error::UnknownDigest { prefix: hex });
        }
        prune_entries(&tx).map_err(err("forget file rows no snapshot lists"))?;
        forget()?;
        tx.commit().map_err(err("commit forgetting a snapshot"))?;
        Ok(views)
    }
}

/// The kept bytes of a recorded snapshot's manifest.
fn kept_of(conn: &rusqlite::Connection, digest: &ManifestDigest) -> rusqlite::Result<Vec<u8>> {
    conn.query_row(
        "SELECT m.kept FROM manifests m JOIN snapshots s ON s.id = m.snapshot_id
         WHERE s.digest = ?1",
        [digest.to_hex()],
        |r| r.get(0),
    )
}

/// A recorded snapshot's canonical manifest bytes, unfolded through the
/// catalogue's chain of deltas.
fn canonical(
    conn: &rusqlite::Connection,
    path: &std::path::Path,
    digest: &ManifestDigest,
) -> Result<Vec<u8>> {
    let read = |d: &ManifestDigest| {
        kept_of(conn, d).map_err(|source| Error::Catalogue {
            op: "read a manifest",
            path: path.to_path_buf(),
            source,
        })
    };
    let kept = read(digest)?;
    let whole = !kept.starts_with(super::kept::KEPT_PREFIX);
    let base = |base: &ManifestDigest| {
        kept_of(conn, base).map_err(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Error::Integrity(format!(
                "the catalogue '{}' keeps the manifest of {digest} as a delta against {base}, \
                 which it does not record; run `cestore recover`",
                path.display()
            )),
            source => Error::Catalogue {
                op: "read a manifest",
                path: path.to_path_buf(),
                source,
            },
        })
    };
    let bytes = super::kept::unfold(
        kept,
        crate::profile::ce::manifest::MAX_TREE_MANIFEST_BYTES,
        base,
    )
    .map_err(|e| match e {
        super::kept::Unfold::Kept(why) => Error::Integrity(format!(
            "the catalogue '{}' keeps the manifest of {digest} damaged: {why}; run `cestore recover`",
            path.display()
        )),
        super::kept::Unfold::Fetch(e) => e,
    })?;
    // What a delta or a packed frame unfolds to is checked here; whole
    // bytes, as ever, by whoever parses them.
    if !whole && ManifestDigest::of(&bytes) != *digest {
        return Err(Error::Integrity(format!(
            "the catalogue '{}' keeps the manifest of {digest} damaged: it unfolds to bytes that \
             hash to {}; run `cestore recover`",
            path.display(),
            ManifestDigest::of(&bytes)
        )));
    }
    Ok(bytes)
}

/// Records a new snapshot's manifest: as its delta when the base is
/// recorded and its chain short enough, else whole.
fn insert_manifest(
    tx: &rusqlite::Transaction<'_>,
    id: i64,
    snap: &NewSnapshot<'_>,
) -> rusqlite::Result<()> {
    let base = match snap.delta {
        Some(delta) => tx
            .query_row(
                "SELECT m.depth FROM manifests m JOIN snapshots s ON s.id = m.snapshot_id
                 WHERE s.digest = ?1",
                [delta.base.to_hex()],
                |r| r.get::<_, i64>(0),
            )
            .optional()?
            .filter(|depth| *depth < super::kept::MAX_DEPTH)
            .map(|depth| (delta, depth + 1)),
        None => None,
    };
    match base {
        Some((delta, depth)) => tx.execute(
            "INSERT INTO manifests (snapshot_id, base, depth, kept) VALUES (?1, ?2, ?3, ?4)",
            params![id, delta.base.to_hex(), depth, delta.kept],
        ),
        None => tx.execute(
            "INSERT INTO manifests (snapshot_id, base, depth, kept) VALUES (?1, NULL, 0, ?2)",
            params![id, super::kept::keep_whole(snap.manifest)],
        ),
    }
    .map(drop)
}

/// Keeps whole every manifest kept as a delta against `digest`, about to
/// be forgotten (inside the transaction that forgets it), so that each
/// still unfolds.
fn keep_dependents_whole(tx: &rusqlite::Transaction<'_>, digest: &ManifestDigest) -> Result<()> {
    let path = std::path::PathBuf::from(tx.path().unwrap_or_default());
    let err = errors(&path);
    let dependents: Vec<(i64, ManifestDigest)> = tx
        .prepare(
            "SELECT m.snapshot_id, s.digest FROM manifests m JOIN snapshots s ON s.id = m.snapshot_id
             WHERE m.base = ?1",
        )
        .and_then(|mut stmt| {
            stmt.query_map([digest.to_hex()], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .map_err(err("list the manifests kept against a snapshot"))?;
    for (id, dependent) in dependents {
        let bytes = canonical(tx, &path, &dependent)?;
        tx.execute(
            "UPDATE manifests SET base = NULL, depth = 0, kept = ?2 WHERE snapshot_id = ?1",
            params![id, super::kept::keep_whole(&bytes)],
        )
        .map_err(err("keep a manifest whole"))?;
    }
    Ok(())
}

/// The one snapshot a name matches; `name` as given, for the refusal.
fn one_of(name: String, matches: Vec<SnapshotRow>) -> Result<ManifestDigest> {
    let mut matches = matches.into_iter();
    match (matches.next(), matches.next()) {
        (None, _) => Err(Error::UnknownDigest { prefix: name }),
        (Some(one), None) => Ok(one.digest),
        (Some(first), Some(second)) => Err(Error::AmbiguousDigest {
            name,
            matches: [first, second]
                .into_iter()
                .chain(matches)
                .map(Candidate::from)
                .collect(),
        }),
    }
}

/// What [`Catalogue::record_ingest`] recorded.
#[derive(Clone, Copy, Debug, Default)]
pub struct RecordedIngest {
    /// Whether the snapshot was new.
    pub new_snapshot: bool,
    /// The event's row id.
    pub event_id: i64,
}

/// The summary columns of `snapshots`, in the order [`snapshot_row`] reads.
///
/// A snapshot's `first_ingested_at` is the earliest of the time its row
/// was written and the times of its events in the ingest log, which keeps
/// the events of a snapshot forgotten and ingested again, and the origin of
/// one pulled or imported: so `list`, `show`, `log` and an ambiguous name's
/// refusal give one time for one snapshot, in a store an older cestore
/// wrote too (whose rows took the time of the commit, not the event's).
pub(super) const SNAPSHOT_SELECT: &str =
    "SELECT digest, name, version, schema_version, file_count, total_bytes,
     min(first_ingested_at, coalesce(
         (SELECT min(i.at) FROM ingests i WHERE i.digest = snapshots.digest),
         first_ingested_at)) AS first_ingested_at, profile
     FROM snapshots";

/// [`SNAPSHOT_SELECT`] reading the rows alone, for a damaged catalogue
/// whose ingest log cannot be read. Such a catalogue may be of a schema
/// before profiles: its rows read `ce`, and `recover` reads each
/// snapshot's profile from its manifest's bytes anyway.
const SNAPSHOT_ROWS_ONLY: &str =
    "SELECT digest, name, version, schema_version, file_count, total_bytes, first_ingested_at,
     'ce' AS profile FROM snapshots";

/// A row of [`SNAPSHOT_SELECT`].
pub(super) fn snapshot_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SnapshotRow> {
    let (
        digest,
        name,
        version,
        schema_version,
        file_count,
        total_bytes,
        first_ingested_at,
        profile,
    ) = r.try_into()?;
    Ok(SnapshotRow {
        digest,
        name,
        version,
        schema_version,
        file_count,
        total_bytes,
        first_ingested_at,
        profile,
    })
}
