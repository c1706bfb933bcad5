//! `cestore pull`: take a snapshot from a remote (an OCI registry) into the
//! store; [`crate::remote::transfer::pull`] says how.

use std::path::Path;

use crate::error::Result;
pub use crate::remote::transfer::{PullReport, PullStats};
use crate::remote::{self, transfer};

/// What to pull.
pub struct PullOptions<'a> {
    /// `REGISTRY/REPOSITORY:TAG` or `REGISTRY/REPOSITORY@sha256:<hex>`.
    pub reference: &'a str,
    /// How to reach the remote.
    pub remote_options: remote::Options,
    /// Transfers in flight at once.
    pub jobs: usize,
    /// Whether to draw a progress line on a terminal.
    pub progress: bool,
    /// The keys one of the snapshot's attestations must vouch for it under
    /// before it is adopted; none takes it whatever they say.
    pub trusted: &'a [crate::sign::PublicKey],
}

/// Pulls a snapshot from a remote into the store.
pub fn pull(root: &Path, opts: &PullOptions<'_>) -> Result<PullReport> {
    let (remote, reference) = remote::open(opts.reference, &opts.remote_options)?;
    let reference = reference.ok_or_else(|| remote::RequestError::PullWithoutReference {
        reference: opts.reference.to_string(),
    })?;
    transfer::pull(
        &|need| super::open(root, need),
        remote.as_ref(),
        &reference,
        opts.jobs,
        opts.progress,
        opts.trusted,
        transfer::Arrived::Pulled,
    )
}
