//! A stored snapshot published to a remote: the snapshot's own checks (it
//! is whole, its manifest canonical: [`super::preflight()`]), the tag it may
//! carry, then [`super::transfer::push`].

use super::oci::client::Traffic;
use super::preflight::Outbound;
use super::transfer::{push, PushStats};
use super::{Format, Outgoing, Published, RequestError, SnapshotRef};
use crate::error::Result;
use crate::store::Store;

/// What to push, and where.
pub struct PushOptions<'a> {
    /// A digest or unique prefix.
    pub digest: &'a str,
    /// `REGISTRY/REPOSITORY`.
    pub remote: &'a str,
    /// How to reach the remote.
    pub remote_options: super::Options,
    /// Transfers in flight at once.
    pub jobs: usize,
    /// The format to publish (format 1 is kept for compatibility tests).
    pub format: Format,
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
    pub stats: PushStats,
    /// The requests sent and the bytes they carried.
    pub requests: Traffic,
    /// The snapshots it names (an environment's members, a task's tree and
    /// dependency list), pushed before it in dependency order, each under
    /// its digest tag only; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<PushReport>,
}

/// Pushes a stored snapshot to a remote.
///
/// Every blob the snapshot needs is asked for first (HEAD) and only the
/// missing ones are uploaded; the record that names the snapshot (the image
/// manifest or index, tagged `sha256-<hex>`) goes last, so a snapshot is
/// visible only once it is complete. Its attestations follow, each an
/// artifact that refers to that record.
///
/// A snapshot that names others (an environment its members, a task its
/// tree and dependency list) pushes them first, each as an ordinary
/// snapshot under its digest tag, so that the record of the snapshot named
/// is published only once everything it names is.
pub fn push_snapshot(store: &mut Store, opts: &PushOptions<'_>) -> Result<PushReport> {
    let digest = crate::catalogue::resolve(store.catalogue(), opts.digest)?;
    let named = store.named_closure(&digest)?;
    // Members go under their digest tags: the repository without the tag.
    let (repository, reference) = match opts.remote.rsplit_once('/') {
        Some((head, last)) => match last.find([':', '@']) {
            Some(at) => (&opts.remote[..head.len() + 1 + at], Some(&last[at..])),
            None => (opts.remote, None),
        },
        None => (opts.remote, None),
    };
    // A reference the push refuses (a digest, another snapshot's digest
    // tag) is refused before any member is pushed.
    let refused = reference.is_some_and(|r| {
        r.starts_with('@') || super::tag_digest(&r[1..]).is_some_and(|d| d != digest)
    });
    if named.is_empty() || refused {
        return push_one(store, opts);
    }
    let mut members = Vec::new();
    for d in named {
        let hex = d.to_hex();
        members.push(push_one(
            store,
            &PushOptions {
                digest: &hex,
                remote: repository,
                remote_options: opts.remote_options.clone(),
                jobs: opts.jobs,
                format: opts.format,
                progress: opts.progress,
            },
        )?);
    }
    let mut report = push_one(store, opts)?;
    report.members = members;
    Ok(report)
}

/// Pushes one stored snapshot (see [`push_snapshot`]).
fn push_one(store: &mut Store, opts: &PushOptions<'_>) -> Result<PushReport> {
    // A registry gets only what a view could hold.
    let Outbound {
        digest,
        manifest,
        attestations,
    } = super::preflight(store, opts.digest)?;
    let row = store.catalogue().snapshot(&digest)?;
    let mut remote_options = opts.remote_options.clone();
    remote_options.push = true;
    let (remote, reference) = super::open(opts.remote, &remote_options)?;
    // A human tag is published beside the digest tag; a digest tag must be
    // this snapshot's own.
    let tag = match reference {
        None => None,
        Some(SnapshotRef::Tag(t)) => match super::tag_digest(&t) {
            None => Some(t),
            Some(d) if d == digest => None,
            Some(d) => {
                return Err(RequestError::PushTagOfAnother {
                    remote: opts.remote.to_string(),
                    tag: d,
                    snapshot: digest,
                }
                .into())
            }
        },
        Some(SnapshotRef::Digest(_)) => {
            return Err(RequestError::PushDigest {
                remote: opts.remote.to_string(),
            }
            .into())
        }
    };
    // Blobs pushed earlier to another repository of the same registry are
    // mounted from there rather than uploaded.
    let oci = remote.as_oci();
    if let Some(oci) = oci {
        let sources = store.catalogue().remote_blobs(&oci.address().registry)?;
        oci.client().set_mount_sources(sources);
    }
    let mut outgoing = Outgoing::new(&manifest, &row.version);
    outgoing.origin = store.catalogue().origin(&digest)?;
    // The first ingest's time: the origin's, which travels with the
    // snapshot, else the time this store first recorded it.
    outgoing.created = Some(
        outgoing
            .origin
            .as_ref()
            .map_or_else(|| row.first_ingested_at.clone(), |o| o.at.clone()),
    );
    outgoing.sources = store
        .catalogue()
        .sources(&digest)?
        .into_iter()
        .map(|kept| kept.entry)
        .collect();
    outgoing.tag = tag;
    outgoing.format = opts.format;
    outgoing.attestations = attestations;
    let (stats, published) = push(remote.as_ref(), store, &outgoing, opts.jobs, opts.progress)?;
    let requests = oci.map(|o| o.client().traffic()).unwrap_or_default();
    if let Some(oci) = oci {
        let a = oci.address();
        // A hint for later mounts: a push that could not record it still
        // published its snapshot, and a later push only uploads again.
        let _ = store.catalogue_mut().record_remote_blobs(
            &a.registry,
            &a.repository,
            &oci.client().present_blobs(),
        );
    }
    Ok(PushReport {
        manifest_digest: digest,
        published,
        stats,
        requests,
        members: Vec::new(),
    })
}
