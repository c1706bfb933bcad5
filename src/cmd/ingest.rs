//! `cestore ingest`: validate a release as the reference does, store each file
//! once, and record the snapshot.

use std::path::Path;

use crate::error::Result;
use crate::store::ingest::{ingest_into, open_source};
pub use crate::store::ingest::{IngestOptions, IngestReport, IngestStats};
use crate::store::{LockMode, Store};

/// Validates and stores a release.
pub fn ingest(store_root: &Path, opts: &IngestOptions<'_>) -> Result<IngestReport> {
    let source = open_source(opts)?;
    let mut store = Store::open(store_root, LockMode::Shared, true)?;
    ingest_into(&mut store, &source, opts)
}
