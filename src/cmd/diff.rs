//! `cestore diff`: what changed between two snapshots; the comparison lives
//! in [`crate::store::core::query`].

use std::path::Path;

use super::{open, Need};
use crate::error::Result;
pub use crate::store::core::query::{changes, Change, DiffReport};

/// Compares snapshot `a` with snapshot `b` (digests or unique prefixes).
pub fn diff(root: &Path, a: &str, b: &str) -> Result<DiffReport> {
    let store = open(root, Need::Existing)?;
    crate::store::core::query::diff(&store, a, b)
}
