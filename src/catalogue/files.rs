//! The file rows: each distinct entry once (`entries`), each snapshot's
//! list of them in manifest order (`snapshot_files`), and the searches over
//! them.

use rusqlite::{params, OptionalExtension};

use super::{errors, immediate, Catalogue};
use crate::digest::{ManifestDigest, ObjectId};
use crate::error::{Damage, Result};
use crate::profile::ce::manifest::Entry;

impl Catalogue {
    /// A snapshot's file rows, in manifest order.
    pub fn files(&self, digest: &ManifestDigest) -> Result<Vec<Entry>> {
        // One read of the list and its rows, whatever commits meanwhile.
        let _read = self.read_snapshot()?;
        let blob: Option<Vec<u8>> = self
            .conn
            .query_row(
                "SELECT f.entry_ids FROM snapshot_files f JOIN snapshots s ON s.id = f.snapshot_id
                 WHERE s.digest = ?1",
                [digest.to_hex()],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err("read the file list"))?;
        let Some(blob) = blob else {
            return Ok(Vec::new());
        };
        let ids = decode_ids(&blob).map_err(|why| self.damaged_list(digest, &why))?;
        let mut stmt = self
            .conn
            .prepare_cached("SELECT path, sha256, size, executable FROM entries WHERE id = ?1")
            .map_err(self.err("prepare the file list"))?;
        ids.iter()
            .map(|id| {
                let cols = stmt
                    .query_row([id], |r| file_cols(r, 0))
                    .optional()
                    .map_err(self.err("read the file list"))?
                    .ok_or_else(|| self.damaged_list(digest, &format!("it names no row {id}")))?;
                entry_of(cols)
            })
            .collect()
    }

    /// The damage of a snapshot's file list that cannot be read.
    fn damaged_list(&self, digest: &ManifestDigest, why: &str) -> crate::error::Error {
        crate::error::Error::Integrity(format!(
            "the catalogue '{}' holds a damaged file list for {digest}: {why}; run `cestore recover`",
            self.path.display()
        ))
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

    /// Rewrites a recorded snapshot's manifest, sums and file rows from its
    /// manifest, keeping its name, version and history. The manifest is
    /// kept whole: whatever names it as a base reads the same bytes.
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
            "UPDATE snapshots SET file_count = ?2, total_bytes = ?3, schema_version = ?4,
             profile = ?5, content_digest = ?6 WHERE id = ?1",
            params![
                id,
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
        tx.execute(
            "INSERT OR REPLACE INTO manifests (snapshot_id, base, depth, kept) VALUES (?1, NULL, 0, ?2)",
            params![id, super::kept::keep_whole(&manifest.bytes)],
        )
        .map_err(err("rewrite a snapshot's manifest"))?;
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
        insert_files(&tx, id, &manifest.entries).map_err(err("record a file row"))?;
        prune_entries(&tx).map_err(err("forget file rows no snapshot lists"))?;
        tx.commit().map_err(err("commit the rewritten rows"))
    }

    /// Whether some recorded file has exactly `size` bytes.
    pub fn has_file_of_size(&self, size: u64) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT 1 FROM entries WHERE size = ?1 LIMIT 1",
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
            .prepare_cached("SELECT DISTINCT sha256, executable FROM entries WHERE size > 0")
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

/// Records a snapshot's file list, in manifest order: each entry's shared
/// row (added when no snapshot listed it yet), and the list of their ids.
pub(super) fn insert_files(
    tx: &rusqlite::Transaction<'_>,
    id: i64,
    entries: &[Entry],
) -> rusqlite::Result<()> {
    let mut find = tx.prepare_cached(
        "SELECT id FROM entries WHERE path = ?1 AND sha256 = ?2 AND size = ?3 AND executable = ?4",
    )?;
    let mut add = tx.prepare_cached(
        "INSERT INTO entries (path, sha256, size, executable) VALUES (?1, ?2, ?3, ?4)",
    )?;
    let mut ids = Vec::with_capacity(entries.len());
    for e in entries {
        let cols = params![e.path, e.sha256.to_hex(), e.size as i64, e.executable];
        let found: Option<i64> = find.query_row(cols, |r| r.get(0)).optional()?;
        ids.push(match found {
            Some(id) => id,
            None => {
                add.execute(cols)?;
                tx.last_insert_rowid()
            }
        });
    }
    tx.execute(
        "INSERT OR REPLACE INTO snapshot_files (snapshot_id, entry_ids) VALUES (?1, ?2)",
        params![id, encode_ids(&ids)],
    )?;
    Ok(())
}

/// Lists the files of every snapshot from the per-snapshot rows of the
/// schema before migration 0011 (which made the shared rows).
pub(super) fn list_files_of_every_snapshot(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let snapshots: Vec<i64> = tx
        .prepare("SELECT id FROM snapshots ORDER BY id")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut rows = tx.prepare(
        "SELECT e.id FROM files f JOIN entries e ON e.path = f.path AND e.sha256 = f.sha256
         AND e.size = f.size AND e.executable = f.executable
         WHERE f.snapshot_id = ?1 ORDER BY f.seq",
    )?;
    for id in snapshots {
        let ids: Vec<i64> = rows
            .query_map([id], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        tx.execute(
            "INSERT INTO snapshot_files (snapshot_id, entry_ids) VALUES (?1, ?2)",
            params![id, encode_ids(&ids)],
        )?;
    }
    Ok(())
}

/// Forgets every shared file row no snapshot lists any more, after a
/// snapshot is forgotten or its list rewritten: what is left is what
/// [`Catalogue::live_objects`] and the searches read.
pub(super) fn prune_entries(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let mut listed = std::collections::HashSet::new();
    {
        let mut stmt = tx.prepare("SELECT entry_ids FROM snapshot_files")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let blob: Vec<u8> = row.get(0)?;
            // A list that cannot be read keeps every row: nothing it may
            // name is forgotten.
            match decode_ids(&blob) {
                Ok(ids) => listed.extend(ids),
                Err(_) => return Ok(()),
            }
        }
    }
    let all: Vec<i64> = tx
        .prepare("SELECT id FROM entries")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut forget = tx.prepare_cached("DELETE FROM entries WHERE id = ?1")?;
    for id in all.into_iter().filter(|id| !listed.contains(id)) {
        forget.execute([id])?;
    }
    Ok(())
}

/// The most ids a list holds: more entries than any manifest's bound.
const MAX_IDS: usize = 1 << 20;

/// The longest id list read, decompressed: ten bytes an id at most.
const MAX_ID_LIST_BYTES: u64 = 10 * MAX_IDS as u64;

/// A file list's ids as stored: each id less the one before (zigzag, as a
/// LEB128 varint), the whole compressed as one zstd frame. A snapshot whose
/// files were first listed together holds runs of `+1`, a few bytes.
pub(super) fn encode_ids(ids: &[i64]) -> Vec<u8> {
    let mut raw = Vec::with_capacity(ids.len() + 8);
    let mut prev = 0i64;
    for &id in ids {
        let delta = id.wrapping_sub(prev);
        prev = id;
        let mut z = ((delta << 1) ^ (delta >> 63)) as u64;
        loop {
            let byte = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                raw.push(byte);
                break;
            }
            raw.push(byte | 0x80);
        }
    }
    zstd::bulk::compress(&raw, 3).unwrap_or(raw)
}

/// Reads what [`encode_ids`] wrote; why not, in words.
pub(super) fn decode_ids(blob: &[u8]) -> std::result::Result<Vec<i64>, String> {
    use std::io::Read;
    let mut raw = Vec::new();
    zstd::stream::read::Decoder::new(blob)
        .and_then(|d| d.take(MAX_ID_LIST_BYTES + 1).read_to_end(&mut raw))
        .map_err(|e| format!("its ids do not decompress: {e}"))?;
    if raw.len() as u64 > MAX_ID_LIST_BYTES {
        return Err(format!(
            "it holds more than {MAX_ID_LIST_BYTES} bytes of ids"
        ));
    }
    let mut ids = Vec::new();
    let (mut prev, mut z, mut shift) = (0i64, 0u64, 0u32);
    for &byte in &raw {
        if shift > 63 {
            return Err("an id is longer than 64 bits".into());
        }
        z |= u64::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            let delta = ((z >> 1) as i64) ^ -((z & 1) as i64);
            prev = prev.wrapping_add(delta);
            if ids.len() == MAX_IDS {
                return Err(format!("it lists more than {MAX_IDS} files"));
            }
            ids.push(prev);
            (z, shift) = (0, 0);
        }
    }
    if shift != 0 {
        return Err("its last id is cut short".into());
    }
    Ok(ids)
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
                "SELECT DISTINCT sha256 FROM entries
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
    /// Each filter is a range of the shared rows' path (or sha256) index,
    /// so that a search reads the rows it returns, not every file's: paths
    /// compare as their UTF-8 bytes, in code point order, so the paths
    /// below `p/` are those from `p/` up to `p0` (`0` follows `/`), and those
    /// starting with a text are those from it up to its successor. Each
    /// snapshot's list of ids then says where, if anywhere, it holds them.
    pub fn files_matching(&self, filter: &FileFilter<'_>) -> Result<Vec<FileHit>> {
        let _read = self.read_snapshot()?;
        let (clause, value, bound) = match filter {
            FileFilter::Object(id) => ("sha256 = ?1", id.to_hex(), None),
            FileFilter::PathOrUnder(p) => (
                "(path = ?1 OR (path >= ?1 || '/' AND path < ?1 || '0'))",
                (*p).to_owned(),
                None,
            ),
            FileFilter::PathStartsWith(p) => match successor(p) {
                Some(end) => (
                    "path >= ?1 AND path < ?2 AND substr(path, 1, length(?1)) = ?1",
                    (*p).to_owned(),
                    Some(end),
                ),
                None => ("substr(path, 1, length(?1)) = ?1", (*p).to_owned(), None),
            },
        };
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT id, path, sha256, size, executable FROM entries WHERE {clause}"
            ))
            .map_err(self.err("prepare the file search"))?;
        let map = |r: &rusqlite::Row<'_>| Ok((r.get::<_, i64>(0)?, file_cols(r, 1)?));
        let rows = match &bound {
            Some(end) => stmt.query_map(params![value, end], map),
            None => stmt.query_map([value], map),
        };
        let rows = rows
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(self.err("search the files"))?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut wanted = std::collections::HashMap::with_capacity(rows.len());
        for (id, cols) in rows {
            wanted.insert(id, entry_of(cols)?);
        }
        let mut lists = self
            .conn
            .prepare_cached(
                "SELECT s.digest, s.version, f.entry_ids
                 FROM snapshots s JOIN snapshot_files f ON f.snapshot_id = s.id
                 ORDER BY s.first_ingested_at, s.digest",
            )
            .map_err(self.err("prepare the file search"))?;
        let lists = lists
            .query_map([], |r| {
                Ok((
                    r.get::<_, ManifestDigest>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                ))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(self.err("search the files"))?;
        let mut hits = Vec::new();
        for (digest, version, blob) in lists {
            let ids = decode_ids(&blob).map_err(|why| self.damaged_list(&digest, &why))?;
            for id in ids {
                if let Some(entry) = wanted.get(&id) {
                    hits.push(FileHit {
                        digest,
                        version: version.clone(),
                        entry: entry.clone(),
                    });
                }
            }
        }
        Ok(hits)
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
