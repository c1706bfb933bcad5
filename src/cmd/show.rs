//! `cestore show`: everything the store knows about one snapshot; the query
//! lives in [`crate::store::core::query`].

use std::path::Path;

use super::{open, Need};
use crate::error::Result;
use crate::store::core::query;
pub use crate::store::core::query::{ManifestReport, ShowOptions, ShowReport};

/// Everything the store knows about one snapshot.
pub fn show(root: &Path, opts: &ShowOptions<'_>) -> Result<ShowReport> {
    let store = open(root, Need::Existing)?;
    query::show(&store, opts)
}

/// A snapshot's canonical manifest (`show --manifest`).
pub fn manifest(root: &Path, digest: &str) -> Result<ManifestReport> {
    let store = open(root, Need::Existing)?;
    query::manifest(&store, digest)
}
