//! `cestore mounts`: the read-only mounts one benchmark arm's sandbox gets.
//!
//! The arm rules are the reference's `ce_plugin_mounts_for_arm` and
//! `ce_plugin_dir_for_arm` ([`crate::gitnexus::ce_plugin_mounts_for_arm`]),
//! the check that a view is one cestore made is
//! [`crate::store::views::recorded_view`], and
//! [`crate::store::views::sandbox::mounts`] puts them together with the
//! GitNexus runtime's mounts.

use std::path::Path;

use crate::error::Result;
pub use crate::store::views::sandbox::{GitNexusRuntime, MountsOptions, MountsReport, ViewSource};

/// An arm's mounts; the store is opened only to find a view in it (a full
/// digest of `--digest` or `--gitnexus-runtime` the store lacks is fetched
/// from the substituters first).
pub fn mounts(root: &Path, opts: &MountsOptions<'_>) -> Result<MountsReport> {
    let open = |need| super::open(root, need);
    if let ViewSource::Digest(d) = opts.view {
        crate::remote::substitute::ensure_present(root, &open, d)?;
    }
    if let Some(d) = opts.gitnexus.stored {
        crate::remote::substitute::ensure_present(root, &open, d)?;
    }
    crate::store::views::sandbox::mounts(&|need| super::open(root, need), opts)
}
