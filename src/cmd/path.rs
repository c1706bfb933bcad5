//! `cestore path`: the one shared frozen view of a snapshot, inside the store
//! ([`crate::store::views::shared_view_of`]).

use std::path::Path;

use super::{open, Need};
use crate::error::Result;
pub use crate::store::views::PathReport;

/// The shared view of a snapshot (a digest or unique prefix), made when
/// it is not there; a full digest the store lacks is fetched from the
/// substituters first ([`crate::remote::substitute::ensure_present`]).
pub fn path(root: &Path, digest: &str) -> Result<PathReport> {
    crate::remote::substitute::ensure_present(root, &|need| open(root, need), digest)?;
    let mut store = open(root, Need::Existing)?;
    crate::store::views::shared_view_of(&mut store, digest)
}
