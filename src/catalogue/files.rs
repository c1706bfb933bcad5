//! The `files` table: each snapshot's manifest entries, in manifest order,
//! and the searches over them.

use rusqlite::params;

use super::{errors, immediate, Catalogue};
use crate::digest::{ManifestDigest, ObjectId};
use crate::error::{Damage, Result};
use crate::profile::ce::manifest::Entry;

impl Catalogue {
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

    /// Whether the rows recorded for a snapshot are exactly those of its
    /// manifest: the stored manifest bytes, the file rows and their sums.
    /// Rows that cannot be read do not match.
    pub fn rows_match(&self, manifest: &crate::profile::ce::manifest::Manifest) -> bool {
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
            && row.profile == manifest.profile()
    }

    /// Rewrites a recorded snapshot's manifest bytes, sums and file rows
    /// from its manifest, keeping its name, version and history.
    pub fn rewrite_rows(
        &mut self,
        manifest: &crate::profile::ce::manifest::Manifest,
    ) -> Result<()> {
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
            "UPDATE snapshots SET manifest = ?2, file_count = ?3, total_bytes = ?4, schema_version = ?5,
             profile = ?6, content_digest = ?7 WHERE id = ?1",
            params![
                id,
                manifest.bytes,
                manifest.entries.len() as i64,
                manifest.total_bytes() as i64,
                crate::profile::ce::manifest::SCHEMA_VERSION,
                manifest.profile(),
                manifest
                    .tree
                    .as_ref()
                    .and_then(|t| t.content_digest())
                    .map(|d| d.to_hex()),
            ],
        )
        .map_err(err("rewrite a snapshot's row"))?;
        tx.execute("DELETE FROM snapshot_refs WHERE task_id = ?1", [id])
            .map_err(err("forget the manifests a task names"))?;
        for named in manifest
            .tree
            .as_ref()
            .map(|t| t.named())
            .unwrap_or_default()
        {
            tx.execute(
                "INSERT OR IGNORE INTO snapshot_refs (task_id, digest) VALUES (?1, ?2)",
                params![id, named.to_hex()],
            )
            .map_err(err("record the manifests a task names"))?;
        }
        tx.execute("DELETE FROM files WHERE snapshot_id = ?1", [id])
            .map_err(err("forget a snapshot's file rows"))?;
        insert_files(&tx, id, &manifest.entries).map_err(err("record a file row"))?;
        tx.commit().map_err(err("commit the rewritten rows"))
    }

    /// Whether some recorded file has exactly `size` bytes.
    pub fn has_file_of_size(&self, size: u64) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT 1 FROM files WHERE size = ?1 LIMIT 1",
                [size as i64],
                |_| Ok(()),
            )
            .map(|()| true)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(false),
                e => Err(e),
            })
            .map_err(self.err("look up a file's size"))
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
                let id = hex.parse().map_err(|_| Damage::MalformedObjectId {
                    id: hex.clone(),
                    file: None,
                })?;
                Ok(crate::digest::ObjectKey { id, executable })
            })
            .collect()
    }
}

/// Inserts a snapshot's file rows, in manifest order.
pub(super) fn insert_files(
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
    let sha256 = sha
        .parse::<ObjectId>()
        .map_err(|_| Damage::MalformedObjectId {
            id: sha.clone(),
            file: Some(path.clone()),
        })?;
    Ok(Entry {
        executable,
        path,
        sha256,
        size: size as u64,
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
    pub fn objects_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<ObjectId>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT DISTINCT sha256 FROM files
                 WHERE sha256 >= ?1 AND sha256 < ?1 || 'g' ORDER BY sha256 LIMIT ?2",
            )
            .map_err(self.err("prepare an object lookup"))?;
        let ids: Vec<String> = stmt
            .query_map(params![prefix, limit as i64], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(self.err("look up an object prefix"))?;
        ids.iter()
            .map(|id| {
                id.parse().map_err(|_| {
                    Damage::MalformedObjectId {
                        id: id.clone(),
                        file: None,
                    }
                    .into()
                })
            })
            .collect()
    }

    /// The files of every snapshot that `filter` selects, by snapshot (oldest
    /// first) then manifest order.
    ///
    /// Each filter is a range of the `files_path` (or `files_sha256`) index,
    /// so that a search reads the rows it returns, not every snapshot's:
    /// paths compare as their UTF-8 bytes, in code point order, so the paths
    /// below `p/` are those from `p/` up to `p0` (`0` follows `/`), and those
    /// starting with a text are those from it up to its successor.
    pub fn files_matching(&self, filter: &FileFilter<'_>) -> Result<Vec<FileHit>> {
        let (clause, value, bound) = match filter {
            FileFilter::Object(id) => ("f.sha256 = ?1", id.to_hex(), None),
            FileFilter::PathOrUnder(p) => (
                "(f.path = ?1 OR (f.path >= ?1 || '/' AND f.path < ?1 || '0'))",
                (*p).to_owned(),
                None,
            ),
            FileFilter::PathStartsWith(p) => match successor(p) {
                Some(end) => (
                    "f.path >= ?1 AND f.path < ?2 AND substr(f.path, 1, length(?1)) = ?1",
                    (*p).to_owned(),
                    Some(end),
                ),
                None => ("substr(f.path, 1, length(?1)) = ?1", (*p).to_owned(), None),
            },
        };
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT s.digest, s.version, f.path, f.sha256, f.size, f.executable
                 FROM files f JOIN snapshots s ON s.id = f.snapshot_id
                 WHERE {clause} ORDER BY s.first_ingested_at, s.digest, f.seq"
            ))
            .map_err(self.err("prepare the file search"))?;
        let map = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get::<_, String>(1)?, file_cols(r, 2)?));
        let rows = match &bound {
            Some(end) => stmt.query_map(params![value, end], map),
            None => stmt.query_map([value], map),
        };
        let rows = rows
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

/// The least text greater than every text starting with `prefix`: its last
/// character replaced by the next one (code point order, which is UTF-8's
/// byte order); `None` for an empty prefix, or one ending in the last
/// character, which bound nothing.
pub(super) fn successor(prefix: &str) -> Option<String> {
    let last = prefix.chars().next_back()?;
    let next = (last as u32 + 1..=char::MAX as u32).find_map(char::from_u32)?;
    let mut out = prefix[..prefix.len() - last.len_utf8()].to_owned();
    out.push(next);
    Some(out)
}
