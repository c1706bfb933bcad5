//! `cestore ingest`: validate a release as the reference does, store each file
//! once, and record the snapshot ([`crate::store::ingest::ingest`]).

use std::path::Path;

use crate::error::Result;
pub use crate::store::ingest::{IngestOptions, IngestReport, IngestStats};

/// Ingests a release; the store is opened once its source is open, and
/// made when it is not there.
pub fn ingest(root: &Path, opts: &IngestOptions<'_>) -> Result<IngestReport> {
    crate::store::ingest::ingest(&|need| super::open(root, need), opts)
}
