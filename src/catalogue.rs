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
//! writers. Ingests commit with `synchronous=FULL`, so that a reported ingest
//! survives a power loss; view records commit with `synchronous=NORMAL`, which
//! in WAL mode may lose the last records on power loss but never consistency.
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
}

/// One ingest event.
#[derive(Clone, Debug, serde::Serialize)]
pub struct IngestEvent {
    /// The snapshot ingested.
    #[serde(rename = "manifest_digest")]
    pub digest: ManifestDigest,
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
    /// How its files were made: `hardlink`, `copy`, `reflink` or a mix.
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
    pub fn open(path: &Path) -> Result<Catalogue> {
        let err = |op, source| Error::Catalogue {
            op,
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(|e| err("open the database", e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| err("set the busy timeout", e))?;
        let mut cat = Catalogue {
            conn,
            path: path.to_path_buf(),
        };
        // Read-only checks first: a catalogue this build must refuse is left
        // byte for byte as it was.
        let found = Self::user_version(&cat.conn).map_err(|e| err("read the schema version", e))?;
        cat.check_not_newer(found)?;
        cat.conn
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| err("switch to WAL mode", e))?;
        cat.conn
            .execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
            .map_err(|e| err("set pragmas", e))?;
        // Each command is a short-lived process: rather than a checkpoint at
        // every close, the log is folded in once it grows (see `Drop`).
        cat.conn
            .set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            )
            .map_err(|e| err("configure checkpoints", e))?;
        cat.migrate()?;
        Ok(cat)
    }

    /// Opens an existing catalogue without creating or migrating anything.
    pub fn open_existing(path: &Path) -> Result<Catalogue> {
        if !path.exists() {
            return Err(Error::NotFound {
                what: "catalogue",
                path: path.to_path_buf(),
            });
        }
        Catalogue::open(path)
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
        let path = self.path.clone();
        let err = |op| {
            let path = path.clone();
            move |source| Error::Catalogue { op, path, source }
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err("begin the migration"))?;
        let found = Self::user_version(&tx).map_err(err("read the schema version"))?;
        if found > SCHEMA_VERSION {
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

    /// Records an ingest: the snapshot and its files when new, and the event
    /// always, in one transaction. Returns whether the snapshot was new.
    pub fn record_ingest(&mut self, snap: &NewSnapshot<'_>, event: &IngestEvent) -> Result<bool> {
        let path = self.path.clone();
        let err = |op| {
            let path = path.clone();
            move |source| Error::Catalogue { op, path, source }
        };
        self.conn
            .execute_batch("PRAGMA synchronous = FULL")
            .map_err(err("ask for a durable commit"))?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err("begin the ingest"))?;
        let inserted = tx
            .execute(
                &format!(
                    "INSERT OR IGNORE INTO snapshots
                     (digest, name, version, schema_version, file_count, total_bytes, manifest, first_ingested_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, {NOW})"
                ),
                params![
                    snap.digest.to_hex(),
                    snap.name,
                    snap.version,
                    crate::manifest::SCHEMA_VERSION,
                    snap.entries.len() as i64,
                    snap.entries.iter().map(|e| e.size).sum::<u64>() as i64,
                    snap.manifest,
                ],
            )
            .map_err(err("record the snapshot"))?
            == 1;
        if inserted {
            let id = tx.last_insert_rowid();
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO files (snapshot_id, seq, path, sha256, size, executable)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(err("prepare the file rows"))?;
            for (seq, e) in snap.entries.iter().enumerate() {
                stmt.execute(params![
                    id,
                    seq as i64,
                    e.path,
                    e.sha256.to_hex(),
                    e.size as i64,
                    e.executable
                ])
                .map_err(err("record a file row"))?;
            }
        }
        tx.execute(
            &format!(
                "INSERT INTO ingests (digest, at, source, host, user, tool_version, new_objects, reused_objects)
                 VALUES (?1, {NOW}, ?2, ?3, ?4, ?5, ?6, ?7)"
            ),
            params![
                event.digest.to_hex(),
                event.source,
                event.host,
                event.user,
                event.tool_version,
                event.new_objects,
                event.reused_objects
            ],
        )
        .map_err(err("record the ingest event"))?;
        tx.commit().map_err(err("commit the ingest"))?;
        Ok(inserted)
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
            .query_map([digest.to_hex()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, bool>(3)?,
                ))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(self.err("read the file list"))?;
        rows.into_iter()
            .map(|(path, sha, size, executable)| {
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
            })
            .collect()
    }

    /// The ingest events, of one snapshot or all, oldest first.
    pub fn ingests(&self, digest: Option<&ManifestDigest>) -> Result<Vec<IngestEvent>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT digest, at, source, host, user, tool_version, new_objects, reused_objects
                 FROM ingests WHERE (?1 IS NULL OR digest = ?1) ORDER BY id",
            )
            .map_err(self.err("prepare the ingest log"))?;
        let hex = digest.map(ManifestDigest::to_hex);
        stmt.query_map([hex], |r| {
            Ok(IngestEvent {
                digest: parse_digest_col(r, 0)?,
                at: r.get(1)?,
                source: r.get(2)?,
                host: r.get(3)?,
                user: r.get(4)?,
                tool_version: r.get(5)?,
                new_objects: r.get(6)?,
                reused_objects: r.get(7)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(self.err("read the ingest log"))
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

    /// Records a view.
    pub fn add_view(&self, view: &ViewRow) -> Result<()> {
        self.conn
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
            .map_err(self.err("record a view"))
            .map(|_| ())
    }

    /// Forgets a view. Returns whether one was recorded.
    pub fn remove_view(&self, path: &str) -> Result<bool> {
        self.conn
            .execute("DELETE FROM views WHERE path = ?1", [path])
            .map(|n| n > 0)
            .map_err(self.err("forget a view"))
    }

    /// Every object some snapshot uses (zero-length files use none).
    pub fn live_objects(&self) -> Result<std::collections::HashSet<crate::store::ObjectKey>> {
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
                Ok(crate::store::ObjectKey { id, executable })
            })
            .collect()
    }

    /// The underlying connection, for the commands that query it directly.
    pub fn conn(&self) -> &Connection {
        &self.conn
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
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, bool>(5)?,
                ))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(self.err("search the files"))?;
        rows.into_iter()
            .map(|(digest, version, path, sha, size, executable)| {
                let sha256 = sha.parse::<ObjectId>().map_err(|_| {
                    Error::Integrity(format!(
                        "the catalogue holds a malformed object id '{sha}' for '{path}'"
                    ))
                })?;
                Ok(FileHit {
                    digest,
                    version,
                    entry: Entry {
                        executable,
                        path,
                        sha256,
                        size: size as u64,
                    },
                })
            })
            .collect()
    }
}
