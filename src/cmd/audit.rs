//! `cestore audit`: every digest of a results file against the store, and
//! every row against the reference's arm rule ([`crate::audit::audit`]).

use std::path::Path;

pub use crate::audit::{AuditOptions, AuditReport, Fields, Source};
use crate::error::Result;

/// Audits results files against the store, which is opened only once they
/// are read (and, with `--registry`, made when it is not there).
pub fn audit(root: &Path, opts: &AuditOptions<'_>) -> Result<AuditReport> {
    crate::audit::audit(&|need| super::open(root, need), opts)
}
