//! `cestore checkout`: materialise a frozen view of a snapshot at a new path.

use std::path::Path;

use super::resolve;
use crate::error::Result;
use crate::store::views::{checkout_into, effective_method, Destination};
pub use crate::store::views::{CheckoutOptions, CheckoutReport};
use crate::store::{LockMode, Store};

/// Checks out a snapshot as a new frozen view and records it.
pub fn checkout(store_root: &Path, opts: &CheckoutOptions<'_>) -> Result<CheckoutReport> {
    let mut store = Store::open(store_root, LockMode::Shared, false)?;
    let digest = resolve(store.catalogue(), opts.digest)?;
    let dest = Destination::check(&store, opts.dest)?;
    let method = effective_method(opts.method, opts.require_hardlinks)?;
    let mut report = checkout_into(&mut store, digest, &dest, method)?;
    report.requested_method = opts.method;
    Ok(report)
}
