//! `cestore digest`: validate a release as ingest does and print its manifest
//! digest, storing nothing: no object is written and no store or catalogue is
//! opened or created.

use std::io::{self, Write};

use super::{Provenance, Report};
use crate::error::{Error, Result};
use crate::manifest::{Manifest, SCHEMA_VERSION};
use crate::policy::{self, Rejection};
use crate::source::{Source, WalkError};
use crate::store::ingest::IngestOptions;

/// The report of `cestore digest`.
#[derive(Debug, serde::Serialize)]
pub struct DigestReport {
    /// The reference's provenance fields.
    pub provenance: Provenance,
    /// The source directory, absolute.
    pub source: String,
}

impl Report for DigestReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "{}", self.provenance.manifest_digest)
    }
}

/// Walks the release at `source` with every rule ingest checks, reading and
/// hashing each file and keeping none, and returns its provenance.
pub fn digest(opts: &IngestOptions<'_>) -> Result<DigestReport> {
    let (source, version) = (opts.source, opts.version);
    if !policy::is_exact_version(version) {
        return Err(Rejection::VersionNotExact {
            version: version.to_string(),
        }
        .into());
    }
    let source = Source::open(source)?;
    let walked = source
        .walk(version, opts.bounds, |_| Ok::<(), Error>(()))
        .map_err(|e| match e {
            WalkError::Rejected(r) => Error::Rejected(r),
            WalkError::Visitor(e) => e,
        })?;
    let manifest = Manifest::new(walked.entries);
    Ok(DigestReport {
        provenance: Provenance {
            name: policy::PLUGIN_NAME.to_string(),
            version: version.to_string(),
            manifest_schema_version: i64::from(SCHEMA_VERSION),
            manifest_digest: manifest.digest,
            file_count: manifest.entries.len() as i64,
            total_bytes: manifest.total_bytes() as i64,
        },
        source: source.root().display().to_string(),
    })
}
