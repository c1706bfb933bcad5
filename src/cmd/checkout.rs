//! `cestore checkout`: materialise a frozen view of a snapshot at a new path
//! ([`crate::store::views::checkout`]).

use std::path::Path;

use super::{open, Need};
use crate::error::Result;
pub use crate::store::views::{CheckoutOptions, CheckoutReport};

/// Checks a snapshot out at a new path.
pub fn checkout(root: &Path, opts: &CheckoutOptions<'_>) -> Result<CheckoutReport> {
    let mut store = open(root, Need::Existing)?;
    crate::store::views::checkout(&mut store, opts)
}
