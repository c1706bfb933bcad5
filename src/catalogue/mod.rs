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
//! `synchronous=FULL`, so that it survives a power loss once reported, and
//! so does a migration (a new catalogue's schema included); the
//! event of a snapshot already recorded, and view records, commit with
//! `synchronous=NORMAL`, which in WAL mode may lose the last records on power
//! loss but never consistency.
//! Each write is one `BEGIN IMMEDIATE` transaction.
//!
//! # Layout
//!
//! [`Catalogue`] is one type, opened and migrated here; each table's module
//! adds the queries and transactions that belong to that table, with its row
//! types, so that what a table holds and how it is read stand in one place.
//! A transaction that writes several tables (an ingest writes a snapshot,
//! its files and its events) lives with the table it is about.

mod attestations;
mod events;
mod files;
pub mod kept;
mod remote_blobs;
mod snapshots;
mod sources;
#[cfg(test)]
mod tests;
mod views;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::digest::ManifestDigest;
use crate::error::{Error, Result};

pub use attestations::KeptAttestation;
pub use events::{IngestEvent, Origin, SUBSTITUTE_EVENT};
pub use files::{FileFilter, FileHit};
pub use snapshots::{resolve, Delta, NewSnapshot, Provenance, RecordedIngest, SnapshotRow};
pub use sources::{Attached, KeptSource};
pub use views::{ViewKind, ViewRow};

/// The migrations, in order; migration `i` brings the schema to version `i + 1`.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_init", include_str!("../../migrations/0001_init.sql")),
    (
        "0002_view_identity",
        include_str!("../../migrations/0002_view_identity.sql"),
    ),
    (
        "0003_event_kind",
        include_str!("../../migrations/0003_event_kind.sql"),
    ),
    (
        "0004_remote_blobs",
        include_str!("../../migrations/0004_remote_blobs.sql"),
    ),
    (
        "0005_sources",
        include_str!("../../migrations/0005_sources.sql"),
    ),
    (
        "0006_attestations",
        include_str!("../../migrations/0006_attestations.sql"),
    ),
    (
        "0007_profiles",
        include_str!("../../migrations/0007_profiles.sql"),
    ),
    (
        "0008_files_size",
        include_str!("../../migrations/0008_files_size.sql"),
    ),
    (
        "0009_environments",
        include_str!("../../migrations/0009_environments.sql"),
    ),
    (
        "0010_snapshot_listing",
        include_str!("../../migrations/0010_snapshot_listing.sql"),
    ),
    (
        "0011_shared_file_rows",
        include_str!("../../migrations/0011_shared_file_rows.sql"),
    ),
    (
        "0012_rows_moved",
        include_str!("../../migrations/0012_rows_moved.sql"),
    ),
];

/// A step of a migration written in Rust.
type AfterMigration = fn(&rusqlite::Transaction<'_>) -> rusqlite::Result<()>;

/// What a migration's SQL cannot do, run by its runner right after it in
/// the same transaction: 0011's file lists, encoded as catalogue/files.rs
/// reads them.
const AFTER: &[(&str, AfterMigration)] =
    &[("0011_shared_file_rows", files::list_files_of_every_snapshot)];

/// The migrations that edit a table's definition in place (under
/// `writable_schema`): their runner bumps the schema cookie after them, in
/// the same transaction, so that every connection reads the new definition.
const EDITS_SCHEMA_IN_PLACE: &[&str] = &["0009_environments"];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How long a writer waits for another writer's transaction.
const BUSY_TIMEOUT: Duration = Duration::from_secs(120);

/// An open catalogue.
pub struct Catalogue {
    conn: Connection,
    path: PathBuf,
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
        if let Some(reason) = probe(path).unusable() {
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
        cat.switch_to_wal()?;
        cat.conn
            .execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
            .map_err(|e| err("set pragmas", e))?;
        cat.migrate()?;
        Ok(cat)
    }

    /// Puts the database in WAL mode, once, under an exclusive `flock` on
    /// the directory that holds it.
    ///
    /// A new catalogue is in rollback mode until its first command switches
    /// it; several first commands at once would each try, and SQLite
    /// refuses a switch while another connection reads (`database is
    /// locked`, without waiting). Under the lock the switches take turns,
    /// and each looks again first: every later one finds WAL and does
    /// nothing. A catalogue already in WAL mode (every store but a new one)
    /// takes no lock.
    fn switch_to_wal(&mut self) -> Result<()> {
        let err = errors(&self.path);
        if self.journal_mode().map_err(err("read the journal mode"))? == "wal" {
            return Ok(());
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let lock = crate::fsutil::open_dir(rustix::fs::CWD, dir)
            .map_err(|e| Error::io("open the catalogue's directory", dir, e))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| Error::io("lock the catalogue's directory", dir, e))?;
        if self.journal_mode().map_err(err("read the journal mode"))? == "wal" {
            return Ok(());
        }
        // A command that opened the catalogue before this switch may still
        // read it in rollback mode for a moment; SQLite answers such a
        // switch `SQLITE_BUSY` at once rather than through the busy
        // handler, so it is asked again until the busy timeout.
        let started = std::time::Instant::now();
        loop {
            match self.conn.pragma_update(None, "journal_mode", "WAL") {
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::DatabaseBusy
                        && started.elapsed() < BUSY_TIMEOUT =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                done => return done.map_err(err("switch to WAL mode")),
            }
        }
    }

    /// The journal mode SQLite reports, in lower case.
    fn journal_mode(&self) -> rusqlite::Result<String> {
        self.conn
            .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
            .map(|m| m.to_ascii_lowercase())
    }

    /// A read transaction while the connection is in none: what is read
    /// until it drops is one state of the catalogue. Dropped, it ends.
    fn read_snapshot(&self) -> Result<Option<rusqlite::Transaction<'_>>> {
        if !self.conn.is_autocommit() {
            return Ok(None);
        }
        self.conn
            .unchecked_transaction()
            .map(Some)
            .map_err(self.err("begin a read"))
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
        // A migration, a new catalogue's schema above all, is on the disk
        // once committed: a store whose first command lost power after
        // naming objects must still open, not come back without a schema.
        self.conn
            .execute_batch("PRAGMA synchronous = FULL")
            .map_err(err("choose the migration's durability"))?;
        let tx = immediate(&mut self.conn).map_err(err("begin the migration"))?;
        let found = Self::user_version(&tx).map_err(err("read the schema version"))?;
        if !(0..=SCHEMA_VERSION).contains(&found) {
            drop(tx);
            return self.check_not_newer(found);
        }
        for (name, sql) in &MIGRATIONS[found as usize..] {
            tx.execute_batch(sql).map_err(err("apply a migration"))?;
            for (_, after) in AFTER.iter().filter(|(n, _)| n == name) {
                after(&tx).map_err(err("apply a migration"))?;
            }
            if EDITS_SCHEMA_IN_PLACE.contains(name) {
                let cookie: i64 = tx
                    .query_row("PRAGMA schema_version", [], |r| r.get(0))
                    .map_err(err("read the schema cookie"))?;
                tx.pragma_update(None, "schema_version", cookie + 1)
                    .map_err(err("bump the schema cookie"))?;
            }
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(err("record the schema version"))?;
        tx.commit().map_err(err("commit the migration"))?;
        self.conn
            .execute_batch("PRAGMA synchronous = NORMAL")
            .map_err(err("choose the commits' durability"))
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
            snapshots: cat
                .snapshots(None, None)
                .or_else(|_| cat.snapshot_rows_only())
                .unwrap_or_default(),
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
    /// alone holds every committed snapshot, after `work`; the one place
    /// that decides what a failed fold means.
    ///
    /// The log is a valid state of the catalogue: SQLite reads it with the
    /// file, and a later command folds it in. So after a command's effect is
    /// committed ([`Work::Committed`]) or as a catalogue closes
    /// ([`Work::Closing`]), a failed fold (a reader that holds the log past
    /// the busy timeout, a read-only store) is no failure of the command and
    /// is ignored: the command has done what it said. `recover`
    /// ([`Work::Rebuilt`]) is run when the catalogue or its log was lost or
    /// damaged, and what it reports is a catalogue file that holds every
    /// snapshot by itself: a fold it cannot make is its error.
    pub fn checkpoint_after(&self, work: Work) -> Result<()> {
        if work == Work::Closing && !self.log_is_long() {
            return Ok(());
        }
        let folded = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(self.err("fold the write-ahead log into the catalogue"));
        match work {
            Work::Rebuilt => folded,
            Work::Committed | Work::Closing => Ok(()),
        }
    }

    /// Whether the write-ahead log has grown past [`WAL_FOLD_BYTES`].
    fn log_is_long(&self) -> bool {
        let mut wal = self.path.clone().into_os_string();
        wal.push("-wal");
        std::fs::metadata(&wal).is_ok_and(|m| m.len() > WAL_FOLD_BYTES)
    }
}

/// What was done before the write-ahead log is folded in (see
/// [`Catalogue::checkpoint_after`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// A command's effect is committed (an ingest recorded or undone, a
    /// snapshot removed): a failed fold is ignored.
    Committed,
    /// `recover` rebuilt the catalogue: a failed fold is its error.
    Rebuilt,
    /// The catalogue is closing: the log is folded once it is longer than
    /// 256 KiB, and a failed fold is ignored.
    Closing,
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

impl Probe {
    /// Why a catalogue file that looks like this is unusable, if it is.
    fn unusable(&self) -> Option<&'static str> {
        match self {
            Probe::Missing => Some("is missing"),
            Probe::Empty => Some("is empty"),
            Probe::NotSqlite => Some("is not an SQLite database"),
            Probe::Sqlite => None,
        }
    }
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
        // Never an error (see `Work::Closing`): a busy or read-only
        // catalogue keeps its log.
        let _ = self.checkpoint_after(Work::Closing);
    }
}

/// A digest column: its lowercase hex, which must parse.
impl rusqlite::types::FromSql for ManifestDigest {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        value
            .as_str()?
            .parse()
            .map_err(|e| rusqlite::types::FromSqlError::Other(Box::new(e)))
    }
}
