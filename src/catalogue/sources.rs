//! The `sources` table, where snapshots' source records are indexed, and
//! `git_tree_digests`, the digests of git trees' snapshots.

use rusqlite::{params, OptionalExtension, Transaction};

use super::attestations::insert_attestation;
use super::{Catalogue, KeptAttestation};
use crate::digest::{ManifestDigest, SourceId};
use crate::error::Result;
use crate::source::{SourceEntry, TreeDigests, TreeKey};

/// A source record as a store keeps it: its file's bytes and their name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptSource {
    /// The SHA-256 of `json`: the file's name.
    pub id: SourceId,
    /// The file's bytes.
    pub json: String,
    /// What they say.
    pub entry: SourceEntry,
}

impl KeptSource {
    /// The kept form of `entry`: its JSON, one line, and the line's name.
    pub fn new(entry: SourceEntry) -> KeptSource {
        // Cannot fail: every field is a string, a bool or a list of strings.
        let mut json = serde_json::to_string(&entry).unwrap_or_default();
        json.push('\n');
        KeptSource {
            id: SourceId::of(json.as_bytes()),
            json,
            entry,
        }
    }

    /// Reads a kept record back from its bytes; `None` when they are not one.
    pub fn parse(json: &str) -> Option<KeptSource> {
        let entry = serde_json::from_str(json).ok()?;
        Some(KeptSource {
            id: SourceId::of(json.as_bytes()),
            json: json.to_string(),
            entry,
        })
    }
}

/// What an ingest's transaction adds besides the snapshot and its events.
#[derive(Clone, Copy, Debug, Default)]
pub struct Attached<'a> {
    /// Source records of the snapshot.
    pub sources: &'a [KeptSource],
    /// Attestations of the snapshot.
    pub attestations: &'a [KeptAttestation],
    /// The digest a git tree's snapshot was found to have, by its key.
    pub tree_digest: Option<(&'a str, ManifestDigest)>,
}

impl Attached<'_> {
    /// Adds the records, the attestations and the tree's digest inside an
    /// ingest's transaction.
    pub(super) fn insert(
        &self,
        tx: &Transaction<'_>,
        digest: &ManifestDigest,
    ) -> rusqlite::Result<()> {
        for kept in self.sources {
            insert_source(tx, digest, kept)?;
        }
        for kept in self.attestations {
            insert_attestation(tx, digest, kept)?;
        }
        if let Some((key, tree_digest)) = self.tree_digest {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO git_tree_digests (key, digest) VALUES (?1, ?2)",
            )?
            .execute(params![key, tree_digest.to_hex()])?;
        }
        Ok(())
    }
}

/// Adds one record of a recorded snapshot, unless it is there already.
fn insert_source(
    conn: &rusqlite::Connection,
    digest: &ManifestDigest,
    kept: &KeptSource,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "INSERT OR IGNORE INTO sources (snapshot_id, id, at, entry)
         SELECT id, ?2, ?3, ?4 FROM snapshots WHERE digest = ?1",
    )?
    .execute(params![
        digest.to_hex(),
        kept.id.to_hex(),
        kept.entry.at,
        kept.json
    ])
}

impl Catalogue {
    /// The source records of a snapshot, oldest first.
    pub fn sources(&self, digest: &ManifestDigest) -> Result<Vec<KeptSource>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT r.entry FROM sources r JOIN snapshots s ON s.id = r.snapshot_id
                 WHERE s.digest = ?1 ORDER BY r.at, r.id",
            )
            .map_err(self.err("prepare the source records"))?;
        let rows: Vec<String> = stmt
            .query_map([digest.to_hex()], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(self.err("read the source records"))?;
        Ok(rows
            .iter()
            .filter_map(|json| KeptSource::parse(json))
            .collect())
    }

    /// Adds a record of a recorded snapshot unless it is there already;
    /// returns whether it was added.
    pub fn add_source(&self, digest: &ManifestDigest, kept: &KeptSource) -> Result<bool> {
        insert_source(&self.conn, digest, kept)
            .map(|n| n == 1)
            .map_err(self.err("record a source record"))
    }

    /// The digest of a git tree's snapshot, when one was found before.
    pub fn tree_digest(&self, key: &str) -> Result<Option<ManifestDigest>> {
        self.conn
            .query_row(
                "SELECT digest FROM git_tree_digests WHERE key = ?1",
                [key],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err("read a git tree's digest"))
    }
}

impl TreeDigests for Catalogue {
    /// A catalogue that cannot be read answers as a cache that misses: the
    /// tree is walked instead.
    fn get(&self, key: &TreeKey) -> Option<ManifestDigest> {
        self.tree_digest(key.as_str()).ok().flatten()
    }
}
