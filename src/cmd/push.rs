//! `cestore push`: publish a stored snapshot to a remote (an OCI registry);
//! [`crate::remote::publish::push_snapshot`] says how.

use std::path::Path;

use super::{open, Need};
use crate::error::Result;
pub use crate::remote::publish::{PushOptions, PushReport};

/// Pushes a stored snapshot to a remote.
pub fn push(root: &Path, opts: &PushOptions<'_>) -> Result<PushReport> {
    let mut store = open(root, Need::Existing)?;
    crate::remote::publish::push_snapshot(&mut store, opts)
}
