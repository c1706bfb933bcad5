//! The `remote_blobs` table: which repository of a registry last held each
//! blob, so that a push can mount it rather than upload it again.

use super::{errors, immediate, Catalogue};
use crate::digest::ObjectId;
use crate::error::Result;

impl Catalogue {
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
}
