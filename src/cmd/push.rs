//! `cestore push`: publish a stored snapshot to a remote (an OCI registry).
//!
//! Every blob the snapshot needs is asked for first (HEAD) and only the
//! missing ones are uploaded; the record that names the snapshot (the image
//! manifest or index, tagged `sha256-<hex>`) goes last, so a snapshot is
//! visible only once it is complete.

use std::io::{self, Write};
use std::path::Path;

use super::{resolve, Report};
use crate::error::{Error, Result};
use crate::manifest::Manifest;
use crate::remote::{self, transfer, Outgoing, Published};
use crate::store::{LockMode, Store};

/// What to push, and where.
pub struct PushOptions<'a> {
    /// A digest or unique prefix.
    pub digest: &'a str,
    /// `REGISTRY/REPOSITORY`.
    pub remote: &'a str,
    /// How to reach the remote.
    pub remote_options: remote::Options,
    /// Transfers in flight at once.
    pub jobs: usize,
    /// Whether to draw a progress line on a terminal.
    pub progress: bool,
}

/// The report of `cestore push`.
#[derive(Debug, serde::Serialize)]
pub struct PushReport {
    /// The snapshot pushed.
    pub manifest_digest: crate::digest::ManifestDigest,
    /// Where it was published.
    #[serde(flatten)]
    pub published: Published,
    /// What was transferred.
    #[serde(flatten)]
    pub stats: transfer::PushStats,
}

impl Report for PushReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        let s = &self.stats;
        let p = &self.published;
        writeln!(w, "{}", p.reference)?;
        writeln!(
            w,
            "{}: {} blobs uploaded ({} bytes), {} already present; {} layers in {} {}",
            p.remote_digest,
            s.blobs_uploaded,
            s.bytes_uploaded,
            s.blobs_present,
            p.layers,
            p.manifests,
            if p.manifests == 1 {
                "manifest"
            } else {
                "manifests under an index"
            }
        )
    }
}

/// Pushes a stored snapshot to a remote.
pub fn push(store_root: &Path, opts: &PushOptions<'_>) -> Result<PushReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    let digest = resolve(store.catalogue(), opts.digest)?;
    let row = store.catalogue().snapshot(&digest)?;
    let bytes = store.catalogue().manifest_bytes(&digest)?;
    let manifest = Manifest::parse(&bytes).map_err(|e| {
        Error::Integrity(format!(
            "the catalogue's manifest for {digest} is not canonical: {e}"
        ))
    })?;
    if manifest.digest != digest {
        return Err(Error::Integrity(format!(
            "the catalogue's manifest for {digest} hashes to {}",
            manifest.digest
        )));
    }
    let mut remote_options = opts.remote_options.clone();
    remote_options.push = true;
    let (remote, reference) = remote::open(opts.remote, &remote_options)?;
    if reference.is_some() {
        return Err(Error::Usage(format!(
            "'{}': push takes REGISTRY/REPOSITORY without a tag or digest; the tag is always sha256-<digest>",
            opts.remote
        )));
    }
    let outgoing = Outgoing::new(&manifest, &row.version);
    let (stats, published) =
        transfer::push(remote.as_ref(), &store, &outgoing, opts.jobs, opts.progress)?;
    Ok(PushReport {
        manifest_digest: digest,
        published,
        stats,
    })
}
