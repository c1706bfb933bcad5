//! The `views` table: checkouts and shared views, recorded until they are
//! discarded.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use rusqlite::{params, OptionalExtension};

use super::snapshots::{snapshot_row, SNAPSHOT_SELECT};
use super::{errors, immediate, Catalogue, SnapshotRow, NOW};
use crate::digest::ManifestDigest;
use crate::error::Result;

/// What a recorded view is, stored in the `kind` column by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ViewKind {
    /// A writable copy made by `cestore checkout` (or `stage --out`) at a
    /// path of the user's choosing.
    Checkout,
    /// The store's own read-only view of a snapshot, under its `views/`
    /// directory, that sandboxes mount.
    Shared,
}

impl ViewKind {
    /// The name the catalogue and the JSON output use.
    pub fn as_str(self) -> &'static str {
        match self {
            ViewKind::Checkout => "checkout",
            ViewKind::Shared => "shared",
        }
    }
}

impl std::fmt::Display for ViewKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ToSql for ViewKind {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for ViewKind {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match value.as_str()? {
            "checkout" => Ok(ViewKind::Checkout),
            "shared" => Ok(ViewKind::Shared),
            other => Err(FromSqlError::Other(
                format!("unknown view kind '{other}'").into(),
            )),
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
    /// A checkout or the shared view.
    pub kind: ViewKind,
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

impl ViewRow {
    /// The row of a shared view found on disk but not recorded (a process
    /// died between publishing and recording it, or the catalogue was
    /// rebuilt): how its files were made is unknown.
    pub fn found_shared(path: String, digest: ManifestDigest, root_id: Option<(u64, u64)>) -> Self {
        ViewRow {
            path,
            digest,
            kind: ViewKind::Shared,
            method: "unknown".into(),
            linked: 0,
            copied: 0,
            created_at: String::new(),
            root_id,
        }
    }
}

impl Catalogue {
    /// The recorded views, of one snapshot or all.
    pub fn views(&self, digest: Option<&ManifestDigest>) -> Result<Vec<ViewRow>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "{VIEW_SELECT} WHERE (?1 IS NULL OR s.digest = ?1) ORDER BY v.created_at, v.path"
            ))
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
                &format!("{VIEW_SELECT} WHERE v.path = ?1"),
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
            return Err(crate::error::Clash::SnapshotRemoved {
                digest: view.digest,
                view: view.path.to_string(),
            }
            .into());
        }
        let row = tx
            .query_row(
                &format!("{SNAPSHOT_SELECT} WHERE digest = ?1"),
                [view.digest.to_hex()],
                snapshot_row,
            )
            .map_err(err("read a snapshot"))?;
        tx.commit().map_err(err("commit a view"))?;
        Ok(row)
    }

    /// Forgets a view. Returns whether one was recorded.
    pub fn remove_view(&self, path: &str) -> Result<bool> {
        self.conn
            .execute("DELETE FROM views WHERE path = ?1", [path])
            .map(|n| n > 0)
            .map_err(self.err("forget a view"))
    }
}

/// The columns of `views`, with the snapshot's digest, in the order
/// [`view_row`] reads.
const VIEW_SELECT: &str =
    "SELECT v.path, s.digest, v.kind, v.method, v.linked, v.copied, v.created_at, v.root_dev, v.root_ino
     FROM views v JOIN snapshots s ON s.id = v.snapshot_id";

/// A row of [`VIEW_SELECT`].
fn view_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ViewRow> {
    Ok(ViewRow {
        path: r.get(0)?,
        digest: r.get(1)?,
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
