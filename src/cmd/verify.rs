//! `cestore verify`: re-hash the store and check the catalogue against itself,
//! audit a directory tree against a snapshot (`--tree`), or re-derive a
//! snapshot from its recorded commit (`--source`). The checks live in
//! [`crate::store::upkeep::verify`] and [`crate::store::trust::provenance`].

use std::path::Path;

use super::{open, Need};
use crate::error::Result;
pub use crate::store::trust::provenance::{SourceCheck, SourceReport};
use crate::store::upkeep::verify::{audit_tree, verify_store};
pub use crate::store::upkeep::verify::{
    Problem, StaleView, TreeReport, VerifyOptions, VerifyReport,
};

/// Verifies the store, or the named snapshots.
pub fn verify(root: &Path, opts: &VerifyOptions<'_>) -> Result<VerifyReport> {
    let store = open(root, Need::Existing)?;
    verify_store(&store, opts)
}

/// Audits a directory against a snapshot.
pub fn verify_tree(root: &Path, dir: &Path, digest: &str) -> Result<TreeReport> {
    let store = open(root, Need::Existing)?;
    audit_tree(&store, dir, digest)
}

/// Re-derives a snapshot from its recorded commit in `repo`.
pub fn verify_source(root: &Path, repo: &Path, digest: &str) -> Result<SourceReport> {
    let store = open(root, Need::Existing)?;
    crate::store::trust::provenance::verify_source(&store, repo, digest)
}
