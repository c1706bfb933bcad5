//! The `ingests` table: the log of every ingest, pull, import, origin,
//! recovery and repair event, oldest first.

use rusqlite::{params, Connection, OptionalExtension};

use super::{Catalogue, NOW};
use crate::digest::ManifestDigest;
use crate::error::Result;

/// The event a snapshot fetched from a substituter on a miss arrives with,
/// where `cestore pull` records `pull`. (An older store has, for a
/// substitution, a `pull` followed by a `substitute` of the same source.)
pub const SUBSTITUTE_EVENT: &str = "substitute";

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

impl Catalogue {
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
        stmt.query_map([hex], event_row)
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
                |r| r.get(0),
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

    /// Adds one event to the ingest log as it is (its time included).
    pub fn add_event(&self, event: &IngestEvent) -> Result<()> {
        insert_event(&self.conn, event).map_err(self.err("record an event"))
    }
}

/// Inserts one event into the ingest log; an empty `at` means now.
pub(super) fn insert_event(conn: &Connection, event: &IngestEvent) -> rusqlite::Result<()> {
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

/// A row of the ingest log, its columns in [`IngestEvent`]'s order.
fn event_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<IngestEvent> {
    let (digest, event, at, source, host, user, tool_version, new_objects, reused_objects) =
        r.try_into()?;
    Ok(IngestEvent {
        digest,
        event,
        at,
        source,
        host,
        user,
        tool_version,
        new_objects,
        reused_objects,
    })
}
