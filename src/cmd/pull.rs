//! `cestore pull`: take a snapshot from a remote (an OCI registry) into the store.
//!
//! The remote's record is fetched, its config (the canonical manifest) must
//! hash to the snapshot digest the record and the reference name, and
//! [`adopt`](crate::store::adopt) then checks the manifest against the ingest
//! rules and every fetched blob against its hash before anything enters the
//! store. Only the objects the store lacks are fetched: a pack none of whose
//! objects is wanted is skipped.

use std::io::{self, Write};
use std::path::Path;

use super::ingest::IngestReport;
use super::Report;
use crate::error::{Error, Result};
use crate::remote::{self, transfer};
use crate::store::adopt::adopt;

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
}

/// Where a pull came from and what it fetched.
#[derive(Debug, serde::Serialize)]
pub struct PullStats {
    /// The remote record pulled, as `oci://REGISTRY/REPOSITORY@sha256:<hex>`.
    pub source: String,
    /// The digest of the remote record (image manifest or index).
    pub remote_digest: String,
    /// The record's media type.
    pub media_type: String,
    /// How many image manifests the record has.
    pub manifests: usize,
    /// The record's format: 1 (one layer per file) or 2 (packs).
    pub format: u8,
    /// What was downloaded.
    #[serde(flatten)]
    pub fetched: transfer::FetchStats,
    /// The requests sent and the bytes they carried.
    pub requests: crate::remote::oci::client::Traffic,
}

/// The report of `cestore pull`: the ingest report and the transfer.
#[derive(Debug, serde::Serialize)]
pub struct PullReport {
    /// What entered the store.
    #[serde(flatten)]
    pub ingest: IngestReport,
    /// What was transferred.
    pub pull: PullStats,
}

impl Report for PullReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        self.ingest.human(w)?;
        let f = &self.pull.fetched;
        writeln!(
            w,
            "pulled from {}: {} fetched ({}); {} fetched, {} skipped",
            self.pull.source,
            super::counted(f.blobs_fetched, "blob", "blobs"),
            super::counted(f.bytes_fetched, "byte", "bytes"),
            super::counted(f.packs_fetched, "pack", "packs"),
            f.packs_skipped
        )
    }
}

/// Pulls a snapshot from a remote into the store.
pub fn pull(store_root: &Path, opts: &PullOptions<'_>) -> Result<PullReport> {
    let (remote, reference) = remote::open(opts.reference, &opts.remote_options)?;
    let reference = reference.ok_or_else(|| {
        Error::Usage(format!(
            "'{}': pull needs a tag or digest: REGISTRY/REPOSITORY:sha256-<hex>, :TAG or @sha256:<hex>",
            opts.reference
        ))
    })?;
    let incoming = remote.resolve(&reference)?;
    let mut fetched = transfer::FetchStats::default();
    let ingest = adopt(
        store_root,
        &incoming.manifest_bytes,
        Some(incoming.snapshot),
        &crate::store::adopt::Arrival {
            event: "pull",
            source: &incoming.source,
            origin: incoming.origin.as_ref(),
        },
        |wanted, staging| {
            fetched = transfer::fetch(
                remote.as_ref(),
                wanted,
                &incoming.carriers,
                opts.jobs,
                opts.progress,
                staging,
            )?;
            Ok(())
        },
    )?;
    Ok(PullReport {
        ingest,
        pull: PullStats {
            source: incoming.source,
            remote_digest: incoming.remote_digest,
            media_type: incoming.media_type,
            manifests: incoming.manifests,
            format: incoming.format,
            fetched,
            requests: remote
                .as_oci()
                .map(|o| o.client().traffic())
                .unwrap_or_default(),
        },
    })
}
