//! `cestore recover`: rebuild the catalogue from the manifests in the store
//! ([`crate::store::upkeep::recover`] says how), and report what was done.
//!
//! Nothing is deleted. A manifest that fails the checks an import passes is
//! moved to `manifests-set-aside/` and reported; what cannot be recovered is
//! reported too, and either exits 1.

use std::path::Path;

use crate::error::Result;
pub use crate::store::upkeep::recover::{Recovery as RecoverReport, SetAside, Unrecovered};

/// Rebuilds the catalogue from the manifests in the store, opened for
/// recovery (once more, its catalogue set aside, when SQLite finds damage
/// its integrity check did not).
pub fn recover(root: &Path) -> Result<RecoverReport> {
    crate::store::upkeep::recover::recover(&|anyway| super::open_for_recovery(root, anyway))
}
