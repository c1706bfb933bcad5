//! `cestore digest`: validate a release as ingest does and print its manifest
//! digest, storing nothing: no object is written and no store or catalogue is
//! opened or created.

use crate::error::Result;
pub use crate::store::ingest::DigestReport;
use crate::store::ingest::IngestOptions;

/// Validates a release and computes its manifest digest; opens no store.
pub fn digest(opts: &IngestOptions<'_>) -> Result<DigestReport> {
    crate::store::ingest::digest_release(opts)
}
