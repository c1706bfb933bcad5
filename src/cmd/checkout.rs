//! `cestore checkout`: materialise a frozen view of a snapshot at a new path
//! ([`crate::store::views::checkout`]), or a writable copy of it
//! (`--writable`, [`crate::store::views::writable::checkout_writable`]);
//! and `cestore materialize`, a task's `sandbox_copy` written into a clone
//! ([`crate::store::views::writable::materialize`]).

use std::path::Path;

use super::{open, Need};
use crate::error::Result;
pub use crate::store::views::writable::{MaterializeReport, WritableReport};
pub use crate::store::views::{CheckoutOptions, CheckoutReport};

/// Checks a snapshot out at a new path (a full digest the store lacks is
/// fetched from the substituters first).
pub fn checkout(root: &Path, opts: &CheckoutOptions<'_>) -> Result<CheckoutReport> {
    crate::remote::substitute::ensure_present(root, &|need| open(root, need), opts.digest)?;
    let mut store = open(root, Need::Existing)?;
    crate::store::views::checkout(&mut store, opts)
}

/// Makes a writable copy of a snapshot at a new path, copying at most
/// `max_fallback_bytes` (2 GiB by default) where it cannot reflink.
pub fn writable(
    root: &Path,
    digest: &str,
    dest: &Path,
    max_fallback_bytes: Option<u64>,
) -> Result<WritableReport> {
    crate::remote::substitute::ensure_present(root, &|need| open(root, need), digest)?;
    let store = open(root, Need::Existing)?;
    crate::store::views::writable::checkout_writable(&store, digest, dest, max_fallback_bytes)
}

/// Replaces a task snapshot's declared roots in a clone.
pub fn materialize(
    root: &Path,
    digest: &str,
    clone: &Path,
    max_fallback_bytes: Option<u64>,
) -> Result<MaterializeReport> {
    crate::remote::substitute::ensure_present(root, &|need| open(root, need), digest)?;
    let store = open(root, Need::Existing)?;
    crate::store::views::writable::materialize(&store, digest, clone, max_fallback_bytes)
}
