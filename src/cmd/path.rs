//! `cestore path`: the one shared frozen view of a snapshot, inside the store.

use std::path::Path;

use super::resolve;
use crate::error::Result;
use crate::store::views::shared_view;
pub use crate::store::views::PathReport;
use crate::store::{LockMode, Store};

/// Returns the shared view of a snapshot, making it once if it is absent.
pub fn path(store_root: &Path, digest: &str) -> Result<PathReport> {
    let mut store = Store::open(store_root, LockMode::Shared, false)?;
    let digest = resolve(store.catalogue(), digest)?;
    shared_view(&mut store, digest)
}
