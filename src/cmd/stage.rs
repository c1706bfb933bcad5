//! `cestore stage`: the one call a harness makes per run
//! ([`crate::store::views::sandbox::stage`]), and the end of a held one
//! (`stage --hold`, whose protocol [`crate::cli`] speaks).

use std::path::Path;

use crate::error::Result;
use crate::interrupt::Signal;
pub use crate::store::views::sandbox::{
    ArmMounts, EnvironmentRequest, GitNexusRuntime, Release, StageOptions, StageReport,
};
use crate::store::views::{DiscardOptions, DiscardReport};

/// Stages a run: its view (the store opened only for a CE arm, and made
/// when the release is given as a source) and each arm's mounts. A full
/// digest of `--digest` or `--gitnexus-runtime` the store lacks is fetched
/// from the substituters first.
pub fn stage(root: &Path, opts: &StageOptions<'_>) -> Result<StageReport> {
    let open = |need| super::open(root, need);
    if let Release::Digest(d) = opts.release {
        crate::remote::substitute::ensure_present(root, &open, d)?;
    }
    if let Some(d) = opts.gitnexus.stored {
        crate::remote::substitute::ensure_present(root, &open, d)?;
    }
    crate::store::views::sandbox::stage(&|need| super::open(root, need), opts)
}

/// The report of a held stage's end: the discard's, and the signal that
/// ended it, if one did.
#[derive(Debug, serde::Serialize)]
pub struct ReleaseReport {
    /// What the discard did.
    #[serde(flatten)]
    pub discard: DiscardReport,
    /// The termination signal that ended the stage, or one that came while
    /// its release was under way; `None` without one.
    pub signal: Option<Signal>,
}

/// Ends a held stage: discards its view, keeping it as a spare only when
/// its caller asked for that (`spare`). A signal that comes meanwhile does
/// not stop the discard: `signal` is asked once the view is gone, and its
/// answer reported.
pub fn release(
    root: &Path,
    view: &Path,
    spare: bool,
    signal: impl FnOnce() -> Option<Signal>,
) -> Result<ReleaseReport> {
    let discard = super::discard::discard(
        root,
        &DiscardOptions {
            dest: view,
            force_digest: None,
            spare,
        },
    )?;
    Ok(ReleaseReport {
        discard,
        signal: signal(),
    })
}
