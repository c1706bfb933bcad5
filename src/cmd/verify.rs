//! `cestore verify`: re-hash the store and check the catalogue against itself,
//! audit a directory tree against a snapshot (`--tree`), or re-derive a
//! snapshot from its recorded commit (`--source`). The checks live in
//! [`crate::store::upkeep::verify`] and [`crate::store::trust::provenance`].

use std::path::Path;

use crate::error::Result;
pub use crate::store::trust::provenance::{verify_source, SourceCheck, SourceReport};
use crate::store::upkeep::verify::{audit_tree, verify_store};
pub use crate::store::upkeep::verify::{
    Problem, StaleView, TreeReport, VerifyOptions, VerifyReport,
};
use crate::store::{LockMode, Store};

/// Verifies the store, or the named snapshots.
pub fn verify(store_root: &Path, opts: &VerifyOptions<'_>) -> Result<VerifyReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    verify_store(&store, opts)
}

/// Audits a directory against a snapshot.
pub fn verify_tree(store_root: &Path, dir: &Path, digest: &str) -> Result<TreeReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    audit_tree(&store, dir, digest)
}
