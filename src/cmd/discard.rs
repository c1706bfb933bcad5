//! `cestore discard`: remove a view made by checkout, and forget it
//! ([`crate::store::views::discard`]).

use std::path::Path;

use super::{open, Need};
use crate::error::Result;
pub use crate::store::views::{DiscardOptions, DiscardReport};

/// Removes a view checkout made, and forgets it.
pub fn discard(root: &Path, opts: &DiscardOptions<'_>) -> Result<DiscardReport> {
    let mut store = open(root, Need::Existing)?;
    crate::store::views::discard(&mut store, opts)
}
