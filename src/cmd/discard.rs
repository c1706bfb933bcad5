//! `cestore discard`: remove a view made by checkout, and forget it.

use std::path::Path;

use crate::error::Result;
use crate::store::views::discard_view;
pub use crate::store::views::{DiscardOptions, DiscardReport};
use crate::store::{LockMode, Store};

/// Removes a view: directories get write permission, files are never chmod-ed.
pub fn discard(store_root: &Path, opts: &DiscardOptions<'_>) -> Result<DiscardReport> {
    let mut store = Store::open(store_root, LockMode::Shared, false)?;
    discard_view(&mut store, opts)
}
