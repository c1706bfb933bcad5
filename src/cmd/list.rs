//! `cestore list`, `cestore log` and `cestore find`: catalogue queries for auditors.

use std::io::{self, Write};
use std::path::Path;

use rusqlite::params;

use super::{resolve, Report};
use crate::catalogue::{IngestEvent, SnapshotRow};
use crate::digest::{ManifestDigest, ObjectId};
use crate::error::{Error, Result};
use crate::store::{LockMode, Store};

/// The report of `cestore list`.
#[derive(Debug, serde::Serialize)]
pub struct ListReport {
    /// The snapshots, oldest first.
    pub snapshots: Vec<SnapshotRow>,
}

impl Report for ListReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for s in &self.snapshots {
            writeln!(
                w,
                "{}  {} {}  {} files  {} bytes  {}",
                s.digest, s.name, s.version, s.file_count, s.total_bytes, s.first_ingested_at
            )?;
        }
        Ok(())
    }
}

/// Lists snapshots, optionally filtered.
pub fn list(store_root: &Path, version: Option<&str>, name: Option<&str>) -> Result<ListReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    Ok(ListReport {
        snapshots: store.catalogue().snapshots(version, name)?,
    })
}

/// The report of `cestore log`.
#[derive(Debug, serde::Serialize)]
pub struct LogReport {
    /// The ingest events, oldest first.
    pub ingests: Vec<IngestEvent>,
}

impl Report for LogReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for e in &self.ingests {
            writeln!(
                w,
                "{}  {}  {}  {}@{}  {}  new {} reused {}",
                e.at,
                e.digest,
                e.source,
                e.user,
                e.host,
                e.tool_version,
                e.new_objects,
                e.reused_objects
            )?;
        }
        Ok(())
    }
}

/// Lists ingest events, of one snapshot or all.
pub fn log(store_root: &Path, digest: Option<&str>) -> Result<LogReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    let digest = digest.map(|d| resolve(store.catalogue(), d)).transpose()?;
    Ok(LogReport {
        ingests: store.catalogue().ingests(digest.as_ref())?,
    })
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

impl Report for FindReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for h in &self.matches {
            writeln!(
                w,
                "{}  {}  {} {} {:>8} {}",
                h.manifest_digest,
                h.version,
                h.sha256,
                if h.executable { "x" } else { "-" },
                h.size,
                h.path
            )?;
        }
        Ok(())
    }
}

/// Lists the snapshots that contain a content or a path.
pub fn find(store_root: &Path, query: &FindQuery<'_>) -> Result<FindReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    let (clause, value) = match query {
        FindQuery::Object(hex) => {
            let id: ObjectId = hex
                .parse()
                .map_err(|e| Error::Usage(format!("--object takes a SHA-256: {e}")))?;
            ("f.sha256 = ?1", id.to_hex())
        }
        FindQuery::Path(p) => ("f.path = ?1", p.trim_start_matches("./").to_string()),
    };
    let cat = store.catalogue();
    let sql = format!(
        "SELECT s.digest, s.version, f.path, f.sha256, f.size, f.executable
         FROM files f JOIN snapshots s ON s.id = f.snapshot_id
         WHERE {clause} ORDER BY s.first_ingested_at, s.digest, f.seq"
    );
    let err = |source| Error::Catalogue {
        op: "search the files",
        path: cat.path().to_path_buf(),
        source,
    };
    let mut stmt = cat.conn().prepare(&sql).map_err(err)?;
    let rows = stmt
        .query_map(params![value], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, bool>(5)?,
            ))
        })
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(err)?;
    let matches = rows
        .into_iter()
        .map(|(d, version, path, sha, size, executable)| {
            let bad =
                |what: &str| Error::Integrity(format!("the catalogue holds a malformed {what}"));
            Ok(FindHit {
                manifest_digest: d.parse().map_err(|_| bad("digest"))?,
                version,
                path,
                sha256: sha.parse().map_err(|_| bad("object id"))?,
                size,
                executable,
            })
        })
        .collect::<Result<_>>()?;
    Ok(FindReport { matches })
}
