//! `cestore list`, `cestore log` and `cestore find`: catalogue queries for
//! auditors, which live in [`crate::store::core::query`].

use std::path::Path;

use super::{open, Need};
use crate::error::Result;
use crate::store::core::query;
pub use crate::store::core::query::{
    FindHit, FindQuery, FindReport, ListReport, ListedSnapshot, LogReport, LoggedEvent,
    SourceSummary,
};

/// The snapshots recorded, of a version or a name when given.
pub fn list(root: &Path, version: Option<&str>, name: Option<&str>) -> Result<ListReport> {
    let store = open(root, Need::Existing)?;
    query::list(&store, version, name)
}

/// The events recorded, of one snapshot when given.
pub fn log(root: &Path, digest: Option<&str>) -> Result<LogReport> {
    let store = open(root, Need::Existing)?;
    query::log(&store, digest)
}

/// The snapshots holding an object, or a path.
pub fn find(root: &Path, q: &FindQuery<'_>) -> Result<FindReport> {
    let store = open(root, Need::Existing)?;
    query::find(&store, q)
}
