//! The catalogue: an embedded SQLite database of snapshots, files, ingests and views.
//!
//! The schema lives in `migrations/NNNN_name.sql`, applied in order inside one
//! `BEGIN IMMEDIATE` transaction and tracked with `PRAGMA user_version`. A
//! catalogue from a newer cestore, or one SQLite cannot read, is refused and
//! never modified or deleted.
//!
//! # Concurrency
//!
//! The database runs in WAL mode with a busy timeout, so readers never block
//! writers. An ingest that records a new snapshot (or a repair) commits with
//! `synchronous=FULL`, so that it survives a power loss once reported; the
//! event of a snapshot already recorded, and view records, commit with
//! `synchronous=NORMAL`, which in WAL mode may lose the last records on power
//! loss but never consistency.
//! Each write is one `BEGIN IMMEDIATE` transaction.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::digest::{DigestPrefix, ManifestDigest, ObjectId};
use crate::error::{Error, Result};
use crate::manifest::Entry;

/// The migrations, in order; migration `i` brings the schema to version `i + 1`.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_init", include_str!("../migrations/0001_init.sql")),
    (
        "0002_view_identity",
        include_str!("../migrations/0002_view_identity.sql"),
    ),
    (
        "0003_event_kind",
        include_str!("../migrations/0003_event_kind.sql"),
    ),
    (
        "0004_remote_blobs",
        include_str!("../migrations/0004_remote_blobs.sql"),
    ),
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How long a writer waits for another writer's transaction.
const BUSY_TIMEOUT: Duration = Duration::from_secs(120);

/// An open catalogue.
pub struct Catalogue {
    conn: Connection,
    path: PathBuf,
}

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

/// Resolves a digest or unique prefix typed by a user.
pub fn resolve(cat: &Catalogue, text: &str) -> Result<ManifestDigest> {
    let prefix: DigestPrefix = text
        .parse()
        .map_err(|e| Error::Usage(format!("'{text}' is not a digest or digest prefix: {e}")))?;
    cat.resolve(&prefix)
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
}

/// One ingest event.
#[derive(Clone, Debug, serde::Serialize)]
pub struct IngestEvent {
    /// The snapshot ingested.
    #[serde(rename = "manifest_digest")]
    pub digest: ManifestDigest,
    /// What happened: `ingest`, `recovered` (a row rebuilt by `cestore
    /// recover` from a manifest on disk) or `repair`.
    pub event: String,
    /// When (UTC, RFC 3339).
    pub at: String,
    /// The source directory or remote.
    pub source: String,
    /// The host name.
    pub host: String,
    /// The user name.
    pub user: String,
    /// The cestore version that ingested it.
    pub tool_version: String,
    /// Objects this ingest wrote.
    pub new_objects: i64,
    /// Objects it found already stored.
    pub reused_objects: i64,
}

/// Where a snapshot was first ingested: the fields of its first ingest
/// event, carried with the snapshot through registries and bundles so that
/// a pulled or imported snapshot keeps them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// When (UTC, RFC 3339).
    pub at: String,
    /// The host name.
    pub host: String,
    /// The user name.
    pub user: String,
    /// The source directory.
    pub source: String,
    /// The cestore version that ingested it.
    pub tool_version: String,
}

impl Origin {
    /// The event that records this origin for `digest` in another store.
    pub fn event(&self, digest: ManifestDigest) -> IngestEvent {
        IngestEvent {
            digest,
            event: "origin".into(),
            at: self.at.clone(),
            source: self.source.clone(),
            host: self.host.clone(),
            user: self.user.clone(),
            tool_version: self.tool_version.clone(),
            new_objects: 0,
            reused_objects: 0,
        }
    }
}

/// A view recorded in the catalogue.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ViewRow {
    /// The view's absolute path.
    pub path: String,
    /// The snapshot it shows.
    #[serde(rename = "manifest_digest")]
    pub digest: ManifestDigest,
    /// `checkout` or `shared`.
    pub kind: String,
    /// How its files were made: `hardlink`, `copy` (reflinks and copies),
    /// `mixed`, or `unknown` for a shared view found unrecorded and recorded
    /// again.
    pub method: String,
    /// Files made by hard link.
    pub linked: i64,
    /// Files made by copy or reflink.
    pub copied: i64,
    /// When it was made (UTC, RFC 3339).
    pub created_at: String,
    /// The device and inode of the view's root directory, to tell the view
    /// from whatever may later stand at its path.
    #[serde(skip)]
    pub root_id: Option<(u64, u64)>,
}

/// The SQL expression for "now" as RFC 3339 UTC with milliseconds.
const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

impl Catalogue {
    /// Opens (creating when absent) and migrates the catalogue at `path`.
    ///
    /// A catalogue that is missing, empty, unreadable or without a schema is
    /// refused before anything is written when `holds_data` (asked only
    /// then) says the store holds objects or manifests: such a catalogue does
    /// not know them.
    pub fn open(path: &Path, holds_data: impl FnOnce() -> Result<bool>) -> Result<Catalogue> {
        let mut holds_data = Some(holds_data);
        let mut answer = None;
        let mut allow_new = move || -> Result<bool> {
            if let Some(f) = holds_data.take() {
                answer = Some(!f()?);
            }
            Ok(answer.unwrap_or(false))
        };
        let err = |op, source| Error::Catalogue {
            op,
            path: path.to_path_buf(),
            source,
        };
        let lost = |reason: &str| Error::CatalogueLost {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        };
        let reason = match probe(path) {
            Probe::Missing => Some("is missing"),
            Probe::Empty => Some("is empty"),
            Probe::NotSqlite => Some("is not an SQLite database"),
            Probe::Sqlite => None,
        };
        if let Some(reason) = reason {
            if !allow_new()? {
                return Err(lost(reason));
            }
        }
        let conn = match Connection::open(path) {
            Ok(c) => c,
            Err(e) if allow_new()? => return Err(err("open the database", e)),
            Err(e) => return Err(lost(&format!("cannot be opened ({e})"))),
        };
        // Each command is a short-lived process: rather than a checkpoint at
        // every close, the log is folded in once it grows (see `Drop`). Set
        // before anything is read, so that closing a catalogue this open
        // refuses never writes to it.
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        )
        .map_err(|e| err("configure checkpoints", e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| err("set the busy timeout", e))?;
        // Read-only checks first, before there is a `Catalogue` to fold its
        // log on drop: a catalogue this build must refuse is left byte for
        // byte as it was.
        let found = match Self::user_version(&conn) {
            Ok(v) => v,
            Err(e) if allow_new()? => return Err(err("read the schema version", e)),
            Err(e) => return Err(lost(&format!("cannot be read ({e})"))),
        };
        if found < 0 {
            return Err(lost(&format!("has a damaged schema version ({found})")));
        }
        if found > SCHEMA_VERSION {
            return Err(Error::CatalogueTooNew {
                path: path.to_path_buf(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if found == 0 && !allow_new()? {
            return Err(lost(
                "holds no schema (it is new, was emptied, or lost its write-ahead log)",
            ));
        }
        let mut cat = Catalogue {
            conn,
            path: path.to_path_buf(),
        };
        cat.conn
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| err("switch to WAL mode", e))?;
        cat.conn
            .execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
            .map_err(|e| err("set pragmas", e))?;
        cat.migrate()?;
        Ok(cat)
    }

    fn err(&self, op: &'static str) -> impl FnOnce(rusqlite::Error) -> Error + '_ {
        move |source| Error::Catalogue {
            op,
            path: self.path.clone(),
            source,
        }
    }

    fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
        conn.query_row("PRAGMA user_version", [], |r| r.get(0))
    }

    fn migrate(&mut self) -> Result<()> {
        let found = Self::user_version(&self.conn).map_err(self.err("read the schema version"))?;
        self.check_not_newer(found)?;
        if found == SCHEMA_VERSION {
            return Ok(());
        }
        let err = errors(&self.path);
        let tx = immediate(&mut self.conn).map_err(err("begin the migration"))?;
        let found = Self::user_version(&tx).map_err(err("read the schema version"))?;
        if !(0..=SCHEMA_VERSION).contains(&found) {
            drop(tx);
            return self.check_not_newer(found);
        }
        for (_name, sql) in &MIGRATIONS[found as usize..] {
            tx.execute_batch(sql).map_err(err("apply a migration"))?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(err("record the schema version"))?;
        tx.commit().map_err(err("commit the migration"))
    }

    fn check_not_newer(&self, found: i64) -> Result<()> {
        if found > SCHEMA_VERSION {
            return Err(Error::CatalogueTooNew {
                path: self.path.clone(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        Ok(())
    }

    /// The catalogue file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

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

    /// Records an ingest: the snapshot and its files when new, the event
    /// always, `origin` (where an adopted snapshot was first ingested) before
    /// it when the snapshot is new, and `repairs` (events of objects it
    /// mended) after it, in one transaction.
    pub fn record_ingest(
        &mut self,
        snap: &NewSnapshot<'_>,
        origin: Option<&IngestEvent>,
        event: &IngestEvent,
        repairs: &[IngestEvent],
    ) -> Result<RecordedIngest> {
        let err = errors(&self.path);
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
                    &format!(
                        "INSERT OR IGNORE INTO snapshots
                         (digest, name, version, schema_version, file_count, total_bytes, manifest, first_ingested_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, coalesce(?8, {NOW}))"
                    ),
                    params![
                        snap.digest.to_hex(),
                        snap.name,
                        snap.version,
                        crate::manifest::SCHEMA_VERSION,
                        snap.entries.len() as i64,
                        snap.entries.iter().map(|e| e.size).sum::<u64>() as i64,
                        snap.manifest,
                        snap.first_ingested_at,
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
                insert_files(&tx, id, snap.entries).map_err(err("record a file row"))?;
            }
            if let Some(origin) = origin.filter(|_| inserted) {
                insert_event(&tx, origin).map_err(err("record where the snapshot came from"))?;
            }
            insert_event(&tx, event).map_err(err("record the ingest event"))?;
            let event_id = tx.last_insert_rowid();
            for repair in repairs {
                insert_event(&tx, repair).map_err(err("record a repair event"))?;
            }
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
            .prepare_cached("SELECT digest FROM snapshots WHERE digest >= ?1 AND digest < ?2 ORDER BY digest LIMIT 11")
            .map_err(self.err("prepare a digest lookup"))?;
        let matches: Vec<String> = stmt
            .query_map([&lo, &hi], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(self.err("look up a digest prefix"))?;
        match matches.as_slice() {
            [] => Err(Error::UnknownDigest {
                prefix: prefix.to_string(),
            }),
            [one] => one.parse().map_err(|_| {
                Error::Integrity(format!("the catalogue holds a malformed digest '{one}'"))
            }),
            _ => Err(Error::AmbiguousDigest {
                prefix: prefix.to_string(),
                matches: matches.clone(),
            }),
        }
    }

    /// A snapshot's summary row.
    pub fn snapshot(&self, digest: &ManifestDigest) -> Result<SnapshotRow> {
        self.conn
            .query_row(
                "SELECT digest, name, version, schema_version, file_count, total_bytes, first_ingested_at
                 FROM snapshots WHERE digest = ?1",
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
            .prepare_cached(
                "SELECT digest, name, version, schema_version, file_count, total_bytes, first_ingested_at
                 FROM snapshots
                 WHERE (?1 IS NULL OR version = ?1) AND (?2 IS NULL OR name = ?2)
                 ORDER BY first_ingested_at, digest",
            )
            .map_err(self.err("prepare the snapshot list"))?;
        stmt.query_map(params![version, name], snapshot_row)
            .and_then(|rows| rows.collect())
            .map_err(self.err("list snapshots"))
    }

    /// A snapshot's canonical manifest bytes, exactly as stored.
    pub fn manifest_bytes(&self, digest: &ManifestDigest) -> Result<Vec<u8>> {
        self.conn
            .query_row(
                "SELECT manifest FROM snapshots WHERE digest = ?1",
                [digest.to_hex()],
                |r| r.get(0),
            )
            .map_err(self.err("read a manifest"))
    }

    /// A snapshot's file rows, in manifest order.
    pub fn files(&self, digest: &ManifestDigest) -> Result<Vec<Entry>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT f.path, f.sha256, f.size, f.executable
                 FROM files f JOIN snapshots s ON s.id = f.snapshot_id
                 WHERE s.digest = ?1 ORDER BY f.seq",
            )
            .map_err(self.err("prepare the file list"))?;
        let rows = stmt
            .query_map([digest.to_hex()], |r| file_cols(r, 0))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(self.err("read the file list"))?;
        rows.into_iter().map(entry_of).collect()
    }

    /// The ingest events, of one snapshot or all, oldest first.
    pub fn ingests(&self, digest: Option<&ManifestDigest>) -> Result<Vec<IngestEvent>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT digest, event, at, source, host, user, tool_version, new_objects, reused_objects
                 FROM ingests WHERE (?1 IS NULL OR digest = ?1) ORDER BY id",
            )
            .map_err(self.err("prepare the ingest log"))?;
        let hex = digest.map(ManifestDigest::to_hex);
        stmt.query_map([hex], |r| {
            Ok(IngestEvent {
                digest: parse_digest_col(r, 0)?,
                event: r.get(1)?,
                at: r.get(2)?,
                source: r.get(3)?,
                host: r.get(4)?,
                user: r.get(5)?,
                tool_version: r.get(6)?,
                new_objects: r.get(7)?,
                reused_objects: r.get(8)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(self.err("read the ingest log"))
    }

    /// The snapshot the latest ingest from `source` made, if any.
    pub fn last_ingested_from(&self, source: &str) -> Result<Option<ManifestDigest>> {
        self.conn
            .query_row(
                "SELECT digest FROM ingests WHERE source = ?1 AND event = 'ingest'
                 ORDER BY id DESC LIMIT 1",
                [source],
                |r| parse_digest_col(r, 0),
            )
            .optional()
            .map_err(self.err("read the ingest log"))
    }

    /// Where a snapshot was first ingested: its earliest `ingest` or
    /// `origin` event.
    pub fn origin(&self, digest: &ManifestDigest) -> Result<Option<Origin>> {
        self.conn
            .query_row(
                "SELECT at, host, user, source, tool_version FROM ingests
                 WHERE digest = ?1 AND event IN ('ingest', 'origin') ORDER BY id LIMIT 1",
                [digest.to_hex()],
                |r| {
                    Ok(Origin {
                        at: r.get(0)?,
                        host: r.get(1)?,
                        user: r.get(2)?,
                        source: r.get(3)?,
                        tool_version: r.get(4)?,
                    })
                },
            )
            .optional()
            .map_err(self.err("read where a snapshot came from"))
    }

    /// The first and last ingest times and the number of ingests of a snapshot.
    pub fn ingest_summary(
        &self,
        digest: &ManifestDigest,
    ) -> Result<(Option<String>, Option<String>, i64)> {
        self.conn
            .query_row(
                "SELECT min(at), max(at), count(*) FROM ingests WHERE digest = ?1",
                [digest.to_hex()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(self.err("summarise the ingests"))
    }

    /// The recorded views, of one snapshot or all.
    pub fn views(&self, digest: Option<&ManifestDigest>) -> Result<Vec<ViewRow>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT v.path, s.digest, v.kind, v.method, v.linked, v.copied, v.created_at, v.root_dev, v.root_ino
                 FROM views v JOIN snapshots s ON s.id = v.snapshot_id
                 WHERE (?1 IS NULL OR s.digest = ?1) ORDER BY v.created_at, v.path",
            )
            .map_err(self.err("prepare the view list"))?;
        let hex = digest.map(ManifestDigest::to_hex);
        stmt.query_map([hex], view_row)
            .and_then(|rows| rows.collect())
            .map_err(self.err("list views"))
    }

    /// The recorded view at `path`, if any.
    pub fn view(&self, path: &str) -> Result<Option<ViewRow>> {
        self.conn
            .query_row(
                "SELECT v.path, s.digest, v.kind, v.method, v.linked, v.copied, v.created_at, v.root_dev, v.root_ino
                 FROM views v JOIN snapshots s ON s.id = v.snapshot_id WHERE v.path = ?1",
                [path],
                view_row,
            )
            .optional()
            .map_err(self.err("look up a view"))
    }

    /// Records a view of a recorded snapshot, and returns that snapshot's
    /// row, read in the same transaction. Fails, recording nothing, when the
    /// snapshot is no longer recorded (a concurrent `rm` forgot it).
    pub fn add_view(&mut self, view: &ViewRow) -> Result<SnapshotRow> {
        let err = errors(&self.path);
        let tx = immediate(&mut self.conn).map_err(err("begin recording a view"))?;
        let inserted = tx
            .execute(
                &format!(
                    "INSERT OR REPLACE INTO views (path, snapshot_id, kind, method, linked, copied, created_at, root_dev, root_ino)
                     SELECT ?1, id, ?3, ?4, ?5, ?6, {NOW}, ?7, ?8 FROM snapshots WHERE digest = ?2"
                ),
                params![
                    view.path,
                    view.digest.to_hex(),
                    view.kind,
                    view.method,
                    view.linked,
                    view.copied,
                    view.root_id.map(|(dev, _)| dev as i64),
                    view.root_id.map(|(_, ino)| ino as i64)
                ],
            )
            .map_err(err("record a view"))?;
        if inserted != 1 {
            return Err(Error::Conflict(format!(
                "{} was removed from the store while the view '{}' was being made; the view was not kept",
                view.digest, view.path
            )));
        }
        let row = tx
            .query_row(
                "SELECT digest, name, version, schema_version, file_count, total_bytes, first_ingested_at
                 FROM snapshots WHERE digest = ?1",
                [view.digest.to_hex()],
                snapshot_row,
            )
            .map_err(err("read a snapshot"))?;
        tx.commit().map_err(err("commit a view"))?;
        Ok(row)
    }

    /// Forgets a snapshot and, with `force`, its view records, in one
    /// transaction; without `force`, refuses while views of it are recorded.
    /// `forget` runs inside the transaction, after the rows are deleted.
    /// Returns the view records forgotten.
    pub fn remove_snapshot(
        &mut self,
        digest: &ManifestDigest,
        force: bool,
        forget: impl FnOnce() -> Result<()>,
    ) -> Result<Vec<String>> {
        let err = errors(&self.path);
        let hex = digest.to_hex();
        let tx = immediate(&mut self.conn).map_err(err("begin forgetting a snapshot"))?;
        let views: Vec<String> = tx
            .prepare(
                "SELECT v.path FROM views v JOIN snapshots s ON s.id = v.snapshot_id
                 WHERE s.digest = ?1 ORDER BY v.path",
            )
            .and_then(|mut stmt| stmt.query_map([&hex], |r| r.get(0))?.collect())
            .map_err(err("list a snapshot's views"))?;
        if !views.is_empty() && !force {
            return Err(Error::Conflict(format!(
                "{digest} has {} recorded {} ({}); discard {} first, or pass --force",
                views.len(),
                if views.len() == 1 { "view" } else { "views" },
                views.join(", "),
                if views.len() == 1 { "it" } else { "them" },
            )));
        }
        tx.execute(
            "DELETE FROM views WHERE snapshot_id = (SELECT id FROM snapshots WHERE digest = ?1)",
            [&hex],
        )
        .map_err(err("forget a snapshot's views"))?;
        let removed = tx
            .execute("DELETE FROM snapshots WHERE digest = ?1", [&hex])
            .map_err(err("forget a snapshot"))?;
        if removed == 0 {
            return Err(Error::UnknownDigest { prefix: hex });
        }
        forget()?;
        tx.commit().map_err(err("commit forgetting a snapshot"))?;
        Ok(views)
    }

    /// Whether the rows recorded for a snapshot are exactly those of its
    /// manifest: the stored manifest bytes, the file rows and their sums.
    /// Rows that cannot be read do not match.
    pub fn rows_match(&self, manifest: &crate::manifest::Manifest) -> bool {
        let digest = &manifest.digest;
        let (Ok(row), Ok(bytes), Ok(files)) = (
            self.snapshot(digest),
            self.manifest_bytes(digest),
            self.files(digest),
        ) else {
            return false;
        };
        bytes == manifest.bytes
            && files == manifest.entries
            && row.file_count == manifest.entries.len() as i64
            && row.total_bytes == manifest.total_bytes() as i64
    }

    /// Rewrites a recorded snapshot's manifest bytes, sums and file rows
    /// from its manifest, keeping its name, version and history.
    pub fn rewrite_rows(&mut self, manifest: &crate::manifest::Manifest) -> Result<()> {
        let err = errors(&self.path);
        let tx = immediate(&mut self.conn).map_err(err("begin rewriting a snapshot's rows"))?;
        let id: i64 = tx
            .query_row(
                "SELECT id FROM snapshots WHERE digest = ?1",
                [manifest.digest.to_hex()],
                |r| r.get(0),
            )
            .map_err(err("find a snapshot"))?;
        tx.execute(
            "UPDATE snapshots SET manifest = ?2, file_count = ?3, total_bytes = ?4, schema_version = ?5 WHERE id = ?1",
            params![
                id,
                manifest.bytes,
                manifest.entries.len() as i64,
                manifest.total_bytes() as i64,
                crate::manifest::SCHEMA_VERSION
            ],
        )
        .map_err(err("rewrite a snapshot's row"))?;
        tx.execute("DELETE FROM files WHERE snapshot_id = ?1", [id])
            .map_err(err("forget a snapshot's file rows"))?;
        insert_files(&tx, id, &manifest.entries).map_err(err("record a file row"))?;
        tx.commit().map_err(err("commit the rewritten rows"))
    }

    /// The repository of `registry` each blob was last pushed to (found
    /// there or put there), by blob.
    pub fn remote_blobs(
        &self,
        registry: &str,
    ) -> Result<std::collections::HashMap<ObjectId, String>> {
        let err = self.err("read the remote blob locations");
        let mut stmt = match self
            .conn
            .prepare_cached("SELECT blob, repository FROM remote_blobs WHERE registry = ?1")
        {
            Ok(s) => s,
            Err(e) => return Err(err(e)),
        };
        let rows = stmt
            .query_map([registry], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>());
        let rows = match rows {
            Ok(r) => r,
            Err(e) => return Err(err(e)),
        };
        Ok(rows
            .into_iter()
            .filter_map(|(blob, repo)| Some((blob.parse::<ObjectId>().ok()?, repo)))
            .collect())
    }

    /// Records that `repository` of `registry` holds these blobs, in one
    /// transaction.
    pub fn record_remote_blobs(
        &mut self,
        registry: &str,
        repository: &str,
        blobs: &[ObjectId],
    ) -> Result<()> {
        let err = errors(&self.path);
        let tx = immediate(&mut self.conn).map_err(err("begin recording remote blobs"))?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO remote_blobs (registry, blob, repository) VALUES (?1, ?2, ?3)",
                )
                .map_err(err("record a remote blob"))?;
            for b in blobs {
                stmt.execute(rusqlite::params![registry, b.to_hex(), repository])
                    .map_err(err("record a remote blob"))?;
            }
        }
        tx.commit().map_err(err("commit the remote blobs"))
    }

    /// Adds one event to the ingest log as it is (its time included).
    pub fn add_event(&self, event: &IngestEvent) -> Result<()> {
        insert_event(&self.conn, event).map_err(self.err("record an event"))
    }

    /// Reads whatever rows a damaged catalogue still gives, read-only: its
    /// snapshots' summaries, its ingest log and its views. A table that
    /// cannot be read gives nothing.
    pub fn salvage(path: &Path) -> Salvage {
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let Ok(conn) = Connection::open_with_flags(path, flags) else {
            return Salvage::default();
        };
        let cat = Catalogue {
            conn,
            path: path.to_path_buf(),
        };
        Salvage {
            snapshots: cat.snapshots(None, None).unwrap_or_default(),
            ingests: cat.ingests(None).unwrap_or_default(),
            views: cat.views(None).unwrap_or_default(),
        }
    }

    /// What SQLite's integrity check finds wrong; nothing when the
    /// database is sound.
    pub fn integrity_problems(&self) -> Result<Vec<String>> {
        let answers: Vec<String> = self
            .conn
            .prepare("PRAGMA integrity_check")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .map_err(self.err("run the integrity check"))?;
        Ok(if answers == ["ok"] {
            Vec::new()
        } else {
            answers
        })
    }

    /// Runs `f` under the catalogue's write lock if the snapshot is not
    /// recorded, so that nothing records it meanwhile; `None` when it is.
    pub fn while_unrecorded<T>(
        &mut self,
        digest: &ManifestDigest,
        f: impl FnOnce() -> Result<T>,
    ) -> Result<Option<T>> {
        let err = errors(&self.path);
        let tx = immediate(&mut self.conn).map_err(err("take the write lock"))?;
        let recorded = tx
            .query_row(
                "SELECT 1 FROM snapshots WHERE digest = ?1",
                [digest.to_hex()],
                |_| Ok(()),
            )
            .optional()
            .map_err(err("look up a snapshot"))?
            .is_some();
        let done = if recorded { None } else { Some(f()?) };
        tx.commit().map_err(err("release the write lock"))?;
        Ok(done)
    }

    /// Folds the write-ahead log into the database file, so that the file
    /// alone holds every committed snapshot. Best effort: a reader that
    /// holds the log past the busy timeout leaves it for a later command.
    pub fn checkpoint(&self) -> Result<()> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(self.err("fold the write-ahead log into the catalogue"))
    }

    /// Forgets a view. Returns whether one was recorded.
    pub fn remove_view(&self, path: &str) -> Result<bool> {
        self.conn
            .execute("DELETE FROM views WHERE path = ?1", [path])
            .map(|n| n > 0)
            .map_err(self.err("forget a view"))
    }

    /// Every object some snapshot uses (zero-length files use none).
    pub fn live_objects(&self) -> Result<std::collections::HashSet<crate::digest::ObjectKey>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT DISTINCT sha256, executable FROM files WHERE size > 0")
            .map_err(self.err("prepare the live-object query"))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?)))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(self.err("list live objects"))?;
        rows.into_iter()
            .map(|(hex, executable)| {
                let id = hex.parse().map_err(|_| {
                    Error::Integrity(format!("the catalogue holds a malformed object id '{hex}'"))
                })?;
                Ok(crate::digest::ObjectKey { id, executable })
            })
            .collect()
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

/// What a damaged catalogue still gives (see [`Catalogue::salvage`]).
#[derive(Debug, Default)]
pub struct Salvage {
    /// The snapshots' summaries.
    pub snapshots: Vec<SnapshotRow>,
    /// The ingest log.
    pub ingests: Vec<IngestEvent>,
    /// The recorded views.
    pub views: Vec<ViewRow>,
}

/// Inserts one event into the ingest log; an empty `at` means now.
fn insert_event(conn: &Connection, event: &IngestEvent) -> rusqlite::Result<()> {
    conn.prepare_cached(&format!(
        "INSERT INTO ingests (digest, event, at, source, host, user, tool_version, new_objects, reused_objects)
         VALUES (?1, ?2, coalesce(nullif(?3, ''), {NOW}), ?4, ?5, ?6, ?7, ?8, ?9)"
    ))?
    .execute(params![
        event.digest.to_hex(),
        event.event,
        event.at,
        event.source,
        event.host,
        event.user,
        event.tool_version,
        event.new_objects,
        event.reused_objects,
    ])
    .map(|_| ())
}

/// Inserts a snapshot's file rows, in manifest order.
fn insert_files(
    tx: &rusqlite::Transaction<'_>,
    id: i64,
    entries: &[Entry],
) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT INTO files (snapshot_id, seq, path, sha256, size, executable)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (seq, e) in entries.iter().enumerate() {
        stmt.execute(params![
            id,
            seq as i64,
            e.path,
            e.sha256.to_hex(),
            e.size as i64,
            e.executable
        ])?;
    }
    Ok(())
}

/// Maps the SQLite errors of an operation on the catalogue at `path` to
/// [`Error::Catalogue`]: `errors(path)("record a view")`.
fn errors(path: &Path) -> impl Fn(&'static str) -> Box<dyn FnOnce(rusqlite::Error) -> Error> {
    let path = path.to_path_buf();
    move |op| {
        let path = path.clone();
        Box::new(move |source| Error::Catalogue { op, path, source })
    }
}

/// Begins a write transaction that takes SQLite's write lock at once.
fn immediate(conn: &mut Connection) -> rusqlite::Result<rusqlite::Transaction<'_>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
}

/// What a catalogue file looks like before SQLite opens it.
enum Probe {
    Missing,
    Empty,
    NotSqlite,
    Sqlite,
}

/// Looks at a catalogue file's first bytes without opening it as a database.
fn probe(path: &Path) -> Probe {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else {
        return if rustix::fs::lstat(path).is_ok() {
            Probe::NotSqlite
        } else {
            Probe::Missing
        };
    };
    let mut header = [0u8; 16];
    match file.read(&mut header) {
        Ok(0) => Probe::Empty,
        Ok(16) if &header == b"SQLite format 3\0" => Probe::Sqlite,
        _ => Probe::NotSqlite,
    }
}

/// Past this size the write-ahead log is folded into the database when a
/// catalogue is closed: every process that opens the catalogue first reads
/// the whole log, so a short log keeps every command fast.
const WAL_FOLD_BYTES: u64 = 256 * 1024;

impl Drop for Catalogue {
    fn drop(&mut self) {
        let mut wal = self.path.clone().into_os_string();
        wal.push("-wal");
        let long = std::fs::metadata(&wal).is_ok_and(|m| m.len() > WAL_FOLD_BYTES);
        if long {
            // Best effort: a busy or read-only catalogue keeps its log.
            let _ = self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)");
        }
    }
}

/// A file row's path, sha256, size and exec bit, from column `start` on.
type FileCols = (String, String, i64, bool);

fn file_cols(r: &rusqlite::Row<'_>, start: usize) -> rusqlite::Result<FileCols> {
    Ok((
        r.get(start)?,
        r.get(start + 1)?,
        r.get(start + 2)?,
        r.get(start + 3)?,
    ))
}

/// The entry a file row holds; a malformed sha256 is damage, named by path.
fn entry_of((path, sha, size, executable): FileCols) -> Result<Entry> {
    let sha256 = sha.parse::<ObjectId>().map_err(|_| {
        Error::Integrity(format!(
            "the catalogue holds a malformed object id '{sha}' for '{path}'"
        ))
    })?;
    Ok(Entry {
        executable,
        path,
        sha256,
        size: size as u64,
    })
}

fn parse_digest_col(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<ManifestDigest> {
    let hex: String = r.get(i)?;
    hex.parse().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn snapshot_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SnapshotRow> {
    Ok(SnapshotRow {
        digest: parse_digest_col(r, 0)?,
        name: r.get(1)?,
        version: r.get(2)?,
        schema_version: r.get(3)?,
        file_count: r.get(4)?,
        total_bytes: r.get(5)?,
        first_ingested_at: r.get(6)?,
    })
}

fn view_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ViewRow> {
    Ok(ViewRow {
        path: r.get(0)?,
        digest: parse_digest_col(r, 1)?,
        kind: r.get(2)?,
        method: r.get(3)?,
        linked: r.get(4)?,
        copied: r.get(5)?,
        created_at: r.get(6)?,
        root_id: match (r.get::<_, Option<i64>>(7)?, r.get::<_, Option<i64>>(8)?) {
            (Some(dev), Some(ino)) => Some((dev as u64, ino as u64)),
            _ => None,
        },
    })
}

/// Which files [`Catalogue::files_matching`] selects.
pub enum FileFilter<'a> {
    /// The files with this content.
    Object(ObjectId),
    /// The file at this exact path, and every file below it as a directory.
    PathOrUnder(&'a str),
    /// Every file whose path starts with this text.
    PathStartsWith(&'a str),
}

/// One file of one snapshot, as [`Catalogue::files_matching`] returns it.
#[derive(Clone, Debug)]
pub struct FileHit {
    /// The snapshot.
    pub digest: ManifestDigest,
    /// Its version.
    pub version: String,
    /// The file.
    pub entry: Entry,
}

/// File searches, for `cestore find`.
impl Catalogue {
    /// The distinct file contents whose SHA-256 starts with `prefix` (lowercase
    /// hex), at most `limit` of them, in order.
    pub fn objects_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT DISTINCT sha256 FROM files
                 WHERE sha256 >= ?1 AND sha256 < ?1 || 'g' ORDER BY sha256 LIMIT ?2",
            )
            .map_err(self.err("prepare an object lookup"))?;
        stmt.query_map(params![prefix, limit as i64], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(self.err("look up an object prefix"))
    }

    /// The files of every snapshot that `filter` selects, by snapshot (oldest
    /// first) then manifest order.
    pub fn files_matching(&self, filter: &FileFilter<'_>) -> Result<Vec<FileHit>> {
        let (clause, value) = match filter {
            FileFilter::Object(id) => ("f.sha256 = ?1", id.to_hex()),
            FileFilter::PathOrUnder(p) => (
                "(f.path = ?1 OR substr(f.path, 1, length(?1) + 1) = ?1 || '/')",
                (*p).to_owned(),
            ),
            FileFilter::PathStartsWith(p) => {
                ("substr(f.path, 1, length(?1)) = ?1", (*p).to_owned())
            }
        };
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT s.digest, s.version, f.path, f.sha256, f.size, f.executable
                 FROM files f JOIN snapshots s ON s.id = f.snapshot_id
                 WHERE {clause} ORDER BY s.first_ingested_at, s.digest, f.seq"
            ))
            .map_err(self.err("prepare the file search"))?;
        let rows = stmt
            .query_map([value], |r| {
                Ok((
                    parse_digest_col(r, 0)?,
                    r.get::<_, String>(1)?,
                    file_cols(r, 2)?,
                ))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(self.err("search the files"))?;
        rows.into_iter()
            .map(|(digest, version, cols)| {
                Ok(FileHit {
                    digest,
                    version,
                    entry: entry_of(cols)?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Manifest;
    use std::cell::Cell;

    fn entry(path: &str, data: &[u8], executable: bool) -> Entry {
        Entry::of(path, data, executable)
    }

    fn manifest(tag: &str) -> Manifest {
        Manifest::new(vec![
            entry("bin/run", format!("#!{tag}\n").as_bytes(), true),
            entry(&format!("skills/{tag}.md"), b"hello world\n", false),
        ])
    }

    fn snap<'a>(m: &'a Manifest, version: &'a str) -> NewSnapshot<'a> {
        NewSnapshot {
            name: "plug",
            version,
            digest: m.digest,
            manifest: &m.bytes,
            entries: &m.entries,
            first_ingested_at: None,
        }
    }

    fn event(digest: ManifestDigest, kind: &str, source: &str) -> IngestEvent {
        IngestEvent {
            digest,
            event: kind.into(),
            at: String::new(),
            source: source.into(),
            host: "host".into(),
            user: "user".into(),
            tool_version: "0.0.0".into(),
            new_objects: 2,
            reused_objects: 0,
        }
    }

    fn view(path: &str, digest: ManifestDigest) -> ViewRow {
        ViewRow {
            path: path.into(),
            digest,
            kind: "checkout".into(),
            method: "hardlink".into(),
            linked: 2,
            copied: 0,
            created_at: String::new(),
            root_id: Some((7, 42)),
        }
    }

    fn fresh(dir: &Path) -> Catalogue {
        Catalogue::open(&dir.join("catalogue.sqlite"), || Ok(false)).unwrap()
    }

    /// The kinds of a snapshot's events, oldest first.
    fn kinds(cat: &Catalogue, d: &ManifestDigest) -> Vec<String> {
        cat.ingests(Some(d))
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .collect()
    }

    /// The sorted names in a directory.
    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn remote_blobs_keep_the_last_repository_per_registry_and_blob() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cat = fresh(tmp.path());
        let (x, y) = (ObjectId::of(b"x"), ObjectId::of(b"y"));
        assert!(cat.remote_blobs("reg:5000").unwrap().is_empty());
        cat.record_remote_blobs("reg:5000", "a/one", &[x, y])
            .unwrap();
        cat.record_remote_blobs("reg:5000", "a/two", &[y]).unwrap();
        cat.record_remote_blobs("other", "a/one", &[x]).unwrap();
        let found = cat.remote_blobs("reg:5000").unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[&x], "a/one");
        assert_eq!(found[&y], "a/two");
        assert_eq!(cat.remote_blobs("other").unwrap().len(), 1);
        assert!(cat.remote_blobs("nowhere").unwrap().is_empty());
    }

    #[test]
    fn a_new_catalogue_is_created_at_the_current_schema_and_reopens() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("catalogue.sqlite");
        let asked = Cell::new(0);
        let cat = Catalogue::open(&path, || {
            asked.set(asked.get() + 1);
            Ok(false)
        })
        .unwrap();
        assert_eq!(
            asked.get(),
            1,
            "a missing catalogue asks whether data exists"
        );
        assert_eq!(cat.path(), path);
        assert!(cat.snapshots(None, None).unwrap().is_empty());
        let other = Connection::open(&path).unwrap();
        assert_eq!(
            Catalogue::user_version(&other).unwrap(),
            SCHEMA_VERSION,
            "every migration is applied"
        );
        let mode: String = other
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        drop(other);
        drop(cat);
        // A catalogue with a schema is opened without asking.
        let again = Catalogue::open(&path, || -> Result<bool> {
            panic!("holds_data must not be asked of a sound catalogue")
        })
        .unwrap();
        assert!(again.integrity_problems().unwrap().is_empty());
    }

    #[test]
    fn a_new_snapshot_records_rows_origin_event_and_repairs_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cat = fresh(tmp.path());
        let m = manifest("a");
        let mut new = snap(&m, "1.0.0");
        new.first_ingested_at = Some("2020-01-02T03:04:05.000Z");
        let origin = Origin {
            at: "2019-12-31T00:00:00.000Z".into(),
            host: "far".into(),
            user: "someone".into(),
            source: "/src/a".into(),
            tool_version: "0.0.1".into(),
        };
        let repair = event(m.digest, "repair", "/src/a");
        let done = cat
            .record_ingest(
                &new,
                Some(&origin.event(m.digest)),
                &event(m.digest, "ingest", "/here"),
                std::slice::from_ref(&repair),
            )
            .unwrap();
        assert!(done.new_snapshot);
        assert_eq!(kinds(&cat, &m.digest), ["origin", "ingest", "repair"]);
        let other = Connection::open(cat.path()).unwrap();
        let (kind, source): (String, String) = other
            .query_row(
                "SELECT event, source FROM ingests WHERE id = ?1",
                [done.event_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((kind.as_str(), source.as_str()), ("ingest", "/here"));

        let row = cat.snapshot(&m.digest).unwrap();
        assert_eq!(row.name, "plug");
        assert_eq!(row.version, "1.0.0");
        assert_eq!(row.file_count, 2);
        assert_eq!(row.total_bytes, m.total_bytes() as i64);
        assert_eq!(row.first_ingested_at, "2020-01-02T03:04:05.000Z");
        assert_eq!(cat.manifest_bytes(&m.digest).unwrap(), m.bytes);
        assert_eq!(cat.files(&m.digest).unwrap(), m.entries);
        assert_eq!(cat.origin(&m.digest).unwrap(), Some(origin));
        let live = cat.live_objects().unwrap();
        assert_eq!(live.len(), 2);
        assert!(m.entries.iter().all(|e| live.contains(&e.key())));
    }

    #[test]
    fn a_repeat_ingest_records_only_its_event() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cat = fresh(tmp.path());
        let m = manifest("a");
        let first = cat
            .record_ingest(
                &snap(&m, "1.0.0"),
                None,
                &event(m.digest, "ingest", "/one"),
                &[],
            )
            .unwrap();
        let origin = event(m.digest, "origin", "/elsewhere");
        // A repeat under another version keeps the first row as it was.
        let second = cat
            .record_ingest(
                &snap(&m, "9.9.9"),
                Some(&origin),
                &event(m.digest, "ingest", "/two"),
                &[event(m.digest, "repair", "/two")],
            )
            .unwrap();
        assert!(first.new_snapshot);
        assert!(!second.new_snapshot);
        assert!(second.event_id > first.event_id);
        assert_eq!(kinds(&cat, &m.digest), ["ingest", "ingest", "repair"]);
        assert_eq!(cat.snapshot(&m.digest).unwrap().version, "1.0.0");
        assert_eq!(cat.snapshots(None, None).unwrap().len(), 1);
        assert_eq!(cat.files(&m.digest).unwrap().len(), 2);
        assert_eq!(cat.origin(&m.digest).unwrap().unwrap().source, "/one");
        let (first_at, last_at, count) = cat.ingest_summary(&m.digest).unwrap();
        assert_eq!(count, 3);
        assert!(first_at.is_some() && first_at <= last_at);
    }

    #[test]
    fn undo_forgets_a_snapshot_only_its_own_ingest_recorded() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cat = fresh(tmp.path());
        let m = manifest("a");
        let done = cat
            .record_ingest(&snap(&m, "1"), None, &event(m.digest, "ingest", "/"), &[])
            .unwrap();
        let called = Cell::new(false);
        let gone = cat
            .undo_ingest(&m.digest, &done, || {
                called.set(true);
                Ok(())
            })
            .unwrap();
        assert!(gone);
        assert!(called.get());
        assert!(!cat.has_snapshot(&m.digest).unwrap());
        assert!(cat.ingests(None).unwrap().is_empty());
        assert!(cat.files(&m.digest).unwrap().is_empty(), "file rows go too");
    }

    #[test]
    fn undo_keeps_a_snapshot_something_else_uses() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cat = fresh(tmp.path());
        let never = || -> Result<()> { panic!("forget must not run while the snapshot stays") };

        // A repeat ingest did not record the snapshot.
        let m = manifest("a");
        cat.record_ingest(&snap(&m, "1"), None, &event(m.digest, "ingest", "/1"), &[])
            .unwrap();
        let repeat = cat
            .record_ingest(&snap(&m, "1"), None, &event(m.digest, "ingest", "/2"), &[])
            .unwrap();
        assert!(!cat.undo_ingest(&m.digest, &repeat, never).unwrap());
        assert!(cat.has_snapshot(&m.digest).unwrap());
        let left = cat.ingests(Some(&m.digest)).unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].source, "/1", "only the undone event goes");

        // Another ingest of it was recorded meanwhile.
        let b = manifest("b");
        let first = cat
            .record_ingest(&snap(&b, "1"), None, &event(b.digest, "ingest", "/1"), &[])
            .unwrap();
        cat.record_ingest(&snap(&b, "1"), None, &event(b.digest, "ingest", "/2"), &[])
            .unwrap();
        assert!(!cat.undo_ingest(&b.digest, &first, never).unwrap());
        assert!(cat.has_snapshot(&b.digest).unwrap());
        assert_eq!(cat.ingests(Some(&b.digest)).unwrap()[0].source, "/2");

        // A view of it was recorded meanwhile.
        let c = manifest("c");
        let done = cat
            .record_ingest(&snap(&c, "1"), None, &event(c.digest, "ingest", "/"), &[])
            .unwrap();
        cat.add_view(&view("/views/c", c.digest)).unwrap();
        assert!(!cat.undo_ingest(&c.digest, &done, never).unwrap());
        assert!(cat.has_snapshot(&c.digest).unwrap());
        assert!(cat.ingests(Some(&c.digest)).unwrap().is_empty());
    }

    #[test]
    fn a_failing_forget_leaves_the_ingest_recorded() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cat = fresh(tmp.path());
        let m = manifest("a");
        let done = cat
            .record_ingest(&snap(&m, "1"), None, &event(m.digest, "ingest", "/"), &[])
            .unwrap();
        let err = cat
            .undo_ingest(&m.digest, &done, || Err(Error::Integrity("no".into())))
            .unwrap_err();
        assert!(matches!(err, Error::Integrity(ref s) if s == "no"));
        // The deletions ran in the transaction `forget` failed inside.
        assert!(cat.has_snapshot(&m.digest).unwrap());
        assert_eq!(kinds(&cat, &m.digest), ["ingest"]);
        assert_eq!(cat.files(&m.digest).unwrap(), m.entries);
    }

    #[test]
    fn add_view_records_a_view_of_a_recorded_snapshot() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cat = fresh(tmp.path());
        let m = manifest("a");
        cat.record_ingest(&snap(&m, "1.2"), None, &event(m.digest, "ingest", "/"), &[])
            .unwrap();
        let row = cat.add_view(&view("/v/one", m.digest)).unwrap();
        assert_eq!((row.digest, row.version.as_str()), (m.digest, "1.2"));
        let got = cat.view("/v/one").unwrap().unwrap();
        assert_eq!(got.digest, m.digest);
        assert_eq!(got.root_id, Some((7, 42)));
        assert!(!got.created_at.is_empty());
        assert!(cat.remove_view("/v/one").unwrap());
        assert!(!cat.remove_view("/v/one").unwrap());
        assert!(cat.view("/v/one").unwrap().is_none());
    }

    #[test]
    fn add_view_of_a_forgotten_snapshot_is_a_conflict_and_records_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cat = fresh(tmp.path());
        let m = manifest("a");
        cat.record_ingest(&snap(&m, "1"), None, &event(m.digest, "ingest", "/"), &[])
            .unwrap();
        cat.remove_snapshot(&m.digest, false, || Ok(())).unwrap();
        let err = cat.add_view(&view("/v/late", m.digest)).unwrap_err();
        assert!(
            matches!(err, Error::Conflict(ref s) if s.contains("/v/late") && s.contains(&m.digest.to_hex())),
            "{err}"
        );
        assert!(cat.views(None).unwrap().is_empty());
        assert!(cat.view("/v/late").unwrap().is_none());
    }

    #[test]
    fn remove_snapshot_refuses_while_views_exist_unless_forced() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cat = fresh(tmp.path());
        let m = manifest("a");
        let keep = manifest("b");
        for s in [&m, &keep] {
            cat.record_ingest(&snap(s, "1"), None, &event(s.digest, "ingest", "/"), &[])
                .unwrap();
        }
        cat.add_view(&view("/v/b", m.digest)).unwrap();
        cat.add_view(&view("/v/a", m.digest)).unwrap();
        cat.add_view(&view("/v/other", keep.digest)).unwrap();

        let called = Cell::new(false);
        let err = cat
            .remove_snapshot(&m.digest, false, || {
                called.set(true);
                Ok(())
            })
            .unwrap_err();
        assert!(
            matches!(err, Error::Conflict(ref s) if s.contains("2 recorded views") && s.contains("/v/a, /v/b")),
            "{err}"
        );
        assert!(!called.get());
        assert!(cat.has_snapshot(&m.digest).unwrap());
        assert_eq!(cat.views(Some(&m.digest)).unwrap().len(), 2);

        // A failing closure takes the whole removal back.
        let err = cat
            .remove_snapshot(&m.digest, true, || Err(Error::Integrity("stop".into())))
            .unwrap_err();
        assert!(matches!(err, Error::Integrity(_)));
        assert!(cat.has_snapshot(&m.digest).unwrap());
        assert_eq!(cat.views(Some(&m.digest)).unwrap().len(), 2);

        let forgotten = cat
            .remove_snapshot(&m.digest, true, || {
                called.set(true);
                Ok(())
            })
            .unwrap();
        assert!(called.get());
        assert_eq!(forgotten, ["/v/a", "/v/b"]);
        assert!(!cat.has_snapshot(&m.digest).unwrap());
        assert!(cat.files(&m.digest).unwrap().is_empty());
        assert!(cat.views(Some(&m.digest)).unwrap().is_empty());
        // The other snapshot, its view, and the history stay.
        assert!(cat.has_snapshot(&keep.digest).unwrap());
        assert_eq!(cat.views(None).unwrap().len(), 1);
        assert_eq!(kinds(&cat, &m.digest), ["ingest"]);
        let live = cat.live_objects().unwrap();
        assert!(live.contains(&keep.entries[0].key()));
        assert!(!live.contains(&m.entries[0].key()));

        let err = cat.remove_snapshot(&m.digest, true, || panic!("nothing to forget"));
        assert!(matches!(err, Err(Error::UnknownDigest { .. })));
    }

    #[test]
    fn rows_match_notices_damaged_rows_and_rewrite_rows_mends_them() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cat = fresh(tmp.path());
        let m = manifest("a");
        cat.record_ingest(&snap(&m, "1.0"), None, &event(m.digest, "ingest", "/"), &[])
            .unwrap();
        assert!(cat.rows_match(&m));
        assert!(!cat.rows_match(&manifest("unrecorded")));

        let other = Connection::open(cat.path()).unwrap();
        let damages = [
            "UPDATE files SET size = size + 1 WHERE seq = 1",
            "DELETE FROM files WHERE seq = 0",
            "UPDATE snapshots SET manifest = X'00'",
            "UPDATE snapshots SET total_bytes = 1",
            "UPDATE snapshots SET file_count = 5",
        ];
        for damage in damages {
            other.execute_batch(damage).unwrap();
            assert!(!cat.rows_match(&m), "unnoticed: {damage}");
            cat.rewrite_rows(&m).unwrap();
            assert!(cat.rows_match(&m), "not mended: {damage}");
        }
        let row = cat.snapshot(&m.digest).unwrap();
        assert_eq!((row.name.as_str(), row.version.as_str()), ("plug", "1.0"));
        assert_eq!(kinds(&cat, &m.digest), ["ingest"]);
        assert!(matches!(
            cat.rewrite_rows(&manifest("unrecorded")),
            Err(Error::Catalogue { .. })
        ));
    }

    #[test]
    fn origin_is_the_earliest_ingest_or_origin_event() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cat = fresh(tmp.path());
        let m = manifest("a");
        assert_eq!(cat.origin(&m.digest).unwrap(), None);
        let mut recovered = event(m.digest, "recovered", "/recovered");
        recovered.at = "2000-01-01T00:00:00.000Z".into();
        cat.record_ingest(&snap(&m, "1"), None, &recovered, &[])
            .unwrap();
        assert_eq!(
            cat.origin(&m.digest).unwrap(),
            None,
            "recovery is no origin"
        );
        let mut first = event(m.digest, "ingest", "/first");
        first.at = "2001-01-01T00:00:00.000Z".into();
        cat.record_ingest(&snap(&m, "1"), None, &first, &[])
            .unwrap();
        cat.record_ingest(
            &snap(&m, "1"),
            None,
            &event(m.digest, "ingest", "/later"),
            &[],
        )
        .unwrap();
        let origin = cat.origin(&m.digest).unwrap().unwrap();
        assert_eq!(origin.source, "/first");
        assert_eq!(origin.at, "2001-01-01T00:00:00.000Z");
        assert_eq!(
            (origin.host.as_str(), origin.user.as_str()),
            ("host", "user")
        );
    }

    /// How many snapshots the main file alone holds, once its log is gone.
    fn snapshots_without_log(path: &Path) -> Option<i64> {
        for ext in ["-wal", "-shm"] {
            let mut p = path.as_os_str().to_owned();
            p.push(ext);
            let _ = std::fs::remove_file(p);
        }
        let conn = Connection::open(path).unwrap();
        conn.query_row("SELECT count(*) FROM snapshots", [], |r| r.get(0))
            .ok()
    }

    #[test]
    fn checkpoint_leaves_the_rows_in_the_main_file() {
        let tmp = tempfile::tempdir().unwrap();
        let m = manifest("a");
        let folded = tmp.path().join("folded");
        let kept = tmp.path().join("kept");
        for (dir, fold) in [(&folded, true), (&kept, false)] {
            std::fs::create_dir(dir).unwrap();
            let mut cat = fresh(dir);
            cat.record_ingest(&snap(&m, "1"), None, &event(m.digest, "ingest", "/"), &[])
                .unwrap();
            if fold {
                cat.checkpoint().unwrap();
            }
        }
        assert_eq!(
            snapshots_without_log(&folded.join("catalogue.sqlite")),
            Some(1)
        );
        // Without the checkpoint the rows lived in the log only.
        assert_ne!(
            snapshots_without_log(&kept.join("catalogue.sqlite")),
            Some(1)
        );
    }

    /// Opening `path` while the store holds data is refused as lost, with
    /// `reason`, and leaves the directory as it was.
    fn assert_lost(dir: &Path, path: &Path, reason: &str) {
        let before = std::fs::read(path).ok();
        let names = listing(dir);
        let err = Catalogue::open(path, || Ok(true)).err().unwrap();
        match &err {
            Error::CatalogueLost { path: p, reason: r } => {
                assert_eq!(p, path);
                assert!(r.contains(reason), "{r}");
            }
            other => panic!("not CatalogueLost: {other}"),
        }
        assert_eq!(std::fs::read(path).ok(), before, "the file changed");
        assert_eq!(listing(dir), names, "files appeared or went");
    }

    #[test]
    fn a_lost_catalogue_is_refused_when_the_store_holds_data() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let path = dir.join("catalogue.sqlite");

        assert_lost(dir, &path, "is missing");
        assert!(!path.exists());

        std::fs::write(&path, b"").unwrap();
        assert_lost(dir, &path, "is empty");

        std::fs::write(&path, b"these are not the bytes of a database\n").unwrap();
        assert_lost(dir, &path, "is not an SQLite database");

        std::fs::remove_file(&path).unwrap();
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE unrelated (x)").unwrap();
        drop(conn);
        assert_lost(dir, &path, "holds no schema");

        // The same files are taken as new when the store holds nothing.
        let cat = Catalogue::open(&path, || Ok(false)).unwrap();
        assert!(cat.snapshots(None, None).unwrap().is_empty());
    }

    #[test]
    fn an_error_from_holds_data_is_returned_and_nothing_is_made() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("catalogue.sqlite");
        let err = Catalogue::open(&path, || Err(Error::Integrity("cannot tell".into())))
            .err()
            .unwrap();
        assert!(matches!(err, Error::Integrity(ref s) if s == "cannot tell"));
        assert!(listing(tmp.path()).is_empty());
    }

    #[test]
    fn a_damaged_or_newer_schema_version_is_refused_untouched() {
        let tmp = tempfile::tempdir().unwrap();
        for (version, name) in [(-1, "negative"), (SCHEMA_VERSION + 1, "newer")] {
            let path = tmp.path().join(name);
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch("CREATE TABLE t (x)").unwrap();
            conn.pragma_update(None, "user_version", version).unwrap();
            drop(conn);
            let before = std::fs::read(&path).unwrap();
            let names = listing(tmp.path());
            // Refused whatever holds_data would say.
            let err = Catalogue::open(&path, || Ok(false)).err().unwrap();
            match (version, &err) {
                (-1, Error::CatalogueLost { reason, .. }) => {
                    assert!(reason.contains("damaged schema version (-1)"), "{reason}")
                }
                (
                    _,
                    Error::CatalogueTooNew {
                        found, supported, ..
                    },
                ) if version > 0 => {
                    assert_eq!((*found, *supported), (version, SCHEMA_VERSION))
                }
                _ => panic!("wrong refusal of version {version}: {err}"),
            }
            assert_eq!(std::fs::read(&path).unwrap(), before);
            assert_eq!(listing(tmp.path()), names);
        }
    }
}
