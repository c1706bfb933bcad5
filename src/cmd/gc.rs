//! `cestore rm` and `cestore gc`: forget snapshots, then sweep what nothing
//! uses; [`crate::store::upkeep::gc`] does both.

use std::path::Path;

use super::{open, Need};
use crate::error::Result;
pub use crate::store::upkeep::gc::{GcReport, RmReport, UnsafeManifest};

/// Forgets a snapshot (a digest or unique prefix).
pub fn rm(root: &Path, digest: &str, force: bool) -> Result<RmReport> {
    let mut store = open(root, Need::Existing)?;
    crate::store::upkeep::gc::rm(&mut store, digest, force)
}

/// Removes what no snapshot uses (with `dry_run`, only says what).
pub fn gc(root: &Path, dry_run: bool, force: bool, progress: bool) -> Result<GcReport> {
    let store = open(root, Need::Sweep { dry_run })?;
    crate::store::upkeep::gc::gc(&store, dry_run, force, progress)
}
