//! Remotes: where snapshots are pushed to and pulled from.
//!
//! The commands (`cestore push` and `cestore pull`) see only the [`Remote`]
//! trait and the engine-neutral transfers in [`transfer`]. An engine stores
//! two kinds of thing:
//!
//! - **blobs**, keyed by their SHA-256: the snapshot's packs (see [`pack`])
//!   and large contents, raw (format 2; format 1 had one blob per content,
//!   the empty content included), and the canonical manifest bytes
//!   themselves, whose SHA-256 is the snapshot's digest;
//! - **a record** that names a snapshot (for OCI, an image manifest or index
//!   and its tag), written last, so that a snapshot becomes visible only once
//!   every blob it needs is there.
//!
//! A snapshot may travel with **attestations**: signed statements about it
//! (DSSE envelopes), which this module moves as opaque bytes. The OCI engine
//! publishes each beside the snapshot's record as a referrer (see
//! [`oci::referrers`]); a pull brings them back in [`Incoming::attestations`]
//! and, when keys are trusted, a snapshot none of them vouches for is refused
//! before anything enters the store ([`crate::store::trust::signed::trust_check`]).
//!
//! The one engine today is [`oci`], the OCI distribution API that container
//! registries speak. Another engine (an S3 bucket, say) would implement
//! [`Remote`] and be chosen by [`open`] from the address's scheme, without
//! touching the commands.

pub mod errors;
pub mod oci;
pub mod pack;
pub mod preflight;
pub mod publish;
pub mod substitute;
pub mod transfer;

pub use errors::{
    AnswerError, Mismatch, NotIndex, PackDamage, PackError, RecordError, ReferrersError,
    RequestError, SlotsError,
};
pub use preflight::{preflight, OutgoingError};

use crate::digest::{ManifestDigest, ObjectId};
use crate::error::{Classified, Classify, Error, ErrorKind, Result};
use crate::profile::ce::manifest::Manifest;
use crate::store::ObjectKey;

/// What a transport error adds when a TLS request was answered in plain HTTP.
const PLAIN_HTTP_HINT: &str =
    " (the registry speaks plain HTTP? allow plain HTTP for a loopback or insecure registry)";

/// A remote failed or answered something this cestore cannot use.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The request could not be made or its answer could not be read.
    #[error("{method} {url} failed{}", if *.plain_http { PLAIN_HTTP_HINT } else { "" })]
    Transport {
        /// The HTTP method.
        method: String,
        /// The URL.
        url: String,
        /// Whether the answer reads as plain HTTP to a TLS request: the
        /// registry likely speaks plain HTTP.
        plain_http: bool,
        /// What the client said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The remote answered with an unexpected status.
    #[error("{method} {url} answered {status}{}", fmt_detail(.detail))]
    Status {
        /// The HTTP method.
        method: String,
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The remote's own explanation, when it gave one.
        detail: String,
    },
    /// The remote refused the credentials, or none were found.
    #[error("authentication to {registry} failed: {reason}")]
    Auth {
        /// The registry's host.
        registry: String,
        /// What went wrong.
        reason: String,
    },
    /// The remote did not connect or answer in time.
    #[error("the registry {registry} did not answer in time ({request}: connect timeout {connect} s, idle timeout {idle} s)")]
    Timeout {
        /// The registry's host.
        registry: String,
        /// The request that timed out, `METHOD URL`.
        request: String,
        /// The connect timeout, in seconds.
        connect: u64,
        /// The idle timeout, in seconds.
        idle: u64,
        /// What the client said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A transfer with the remote fell below the transfer-rate floor.
    #[error("the registry {registry} was too slow ({request}: {detail})")]
    TooSlow {
        /// The registry's host.
        registry: String,
        /// The request that was too slow, `METHOD URL`.
        request: String,
        /// How it broke the floor.
        detail: String,
    },
    /// The remote has no such snapshot.
    #[error("{0} not found on the remote")]
    NotFound(String),
    /// An answer is not what the distribution API promises.
    #[error(transparent)]
    Answer(#[from] AnswerError),
    /// A record (image manifest, index, config) is not a cestore snapshot's.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// What a record lists of packs and raw blobs does not fit the snapshot.
    #[error(transparent)]
    Pack(#[from] PackError),
    /// A record's attestations are listed or served in a way cestore
    /// cannot use.
    #[error(transparent)]
    Referrers(#[from] ReferrersError),
    /// Bytes served do not hash to what names them, or name another
    /// snapshot.
    #[error(transparent)]
    Mismatch(#[from] Mismatch),
    /// The request cannot be made as given.
    #[error(transparent)]
    Request(#[from] RequestError),
}

fn fmt_detail(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    }
}

impl Classify for RemoteError {
    /// `not-found` for a snapshot the remote lacks, `integrity` for bytes
    /// that are not the ones asked for, `usage` for a request that cannot
    /// be made as given, else `remote`.
    fn kind(&self) -> ErrorKind {
        match self {
            RemoteError::NotFound(_) => ErrorKind::NotFound,
            RemoteError::Mismatch(_) => ErrorKind::Integrity,
            RemoteError::Request(_) => ErrorKind::Usage,
            _ => ErrorKind::Remote,
        }
    }

    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }
}

impl From<RemoteError> for Error {
    fn from(e: RemoteError) -> Self {
        Error::Remote(Classified::new(e))
    }
}

/// Each concern's error reaches the crate's [`Error`] as a [`RemoteError`].
macro_rules! into_error {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self {
                RemoteError::from(e).into()
            }
        }
    )*};
}
into_error!(
    AnswerError,
    RecordError,
    PackError,
    ReferrersError,
    Mismatch,
    RequestError
);

/// How to reach a remote.
#[derive(Clone, Debug)]
pub struct Options {
    /// Speak plain HTTP instead of HTTPS (loopback and insecure registries).
    pub plain_http: bool,
    /// The most layers one OCI image manifest may list before cestore falls
    /// back to an index of several manifests.
    pub max_layers: usize,
    /// Whether the remote will be written to (asks for push access).
    pub push: bool,
    /// How long to wait on the remote.
    pub timeouts: oci::client::Timeouts,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            plain_http: false,
            max_layers: oci::DEFAULT_MAX_LAYERS,
            push: false,
            timeouts: oci::client::Timeouts::default(),
        }
    }
}

/// Which snapshot of a remote is meant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotRef {
    /// A tag, e.g. `sha256-<hex>` (the snapshot's digest) or any other name.
    Tag(String),
    /// A SHA-256 in hex: the remote record's own digest (for OCI, the image
    /// manifest's or index's), or the snapshot's digest.
    Digest(ObjectId),
}

/// The snapshot's digest a tag names, when the tag is `sha256-<hex>`.
pub fn tag_digest(tag: &str) -> Option<ManifestDigest> {
    tag.strip_prefix("sha256-")?.parse().ok()
}

/// The tag a snapshot is published under: `sha256-<hex>`.
pub fn snapshot_tag(digest: &ManifestDigest) -> String {
    format!("sha256-{digest}")
}

/// One distinct object of an outgoing snapshot.
#[derive(Clone, Debug)]
pub struct OutgoingObject {
    /// Its key (content and exec bit).
    pub key: ObjectKey,
    /// Its size; zero for the empty content, which has no object in the store.
    pub size: u64,
    /// The first path in manifest order that uses it.
    pub path: String,
}

/// How a snapshot's objects travel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Format 1: one blob per distinct object (content and exec bit).
    V1,
    /// Format 2: small objects in packs (see [`pack`]), large ones raw.
    #[default]
    V2,
}

impl Format {
    /// The format's number, as reports give it.
    pub fn number(self) -> u8 {
        match self {
            Format::V1 => 1,
            Format::V2 => 2,
        }
    }
}

/// A snapshot on its way to a remote.
#[derive(Clone, Debug)]
pub struct Outgoing<'a> {
    /// The canonical manifest.
    pub manifest: &'a Manifest,
    /// The release version, for annotations.
    pub version: &'a str,
    /// Its distinct objects (content and exec bit), in manifest order of
    /// first use, the empty content included.
    pub objects: Vec<OutgoingObject>,
    /// A human tag (e.g. `3.23.1`) to publish the record under as well as
    /// its digest tag.
    pub tag: Option<String>,
    /// Where the snapshot was first ingested, carried as an annotation.
    pub origin: Option<crate::catalogue::Origin>,
    /// When the snapshot was first ingested (UTC, RFC 3339), for the
    /// `org.opencontainers.image.created` annotation.
    pub created: Option<String>,
    /// The snapshot's source records, carried as annotations.
    pub sources: Vec<crate::source::SourceEntry>,
    /// How its objects travel.
    pub format: Format,
    /// In format 2, its packs as built (digest, size, objects); the push
    /// fills them in before it publishes.
    pub packs: Vec<pack::PackRef>,
    /// In format 2, its raw contents.
    pub raw: Vec<pack::RawObject>,
    /// Its attestations (DSSE envelopes, as bytes), published beside its
    /// record once the record is.
    pub attestations: Vec<Vec<u8>>,
}

impl<'a> Outgoing<'a> {
    /// Lays out a manifest's distinct objects in manifest order of first use.
    pub fn new(manifest: &'a Manifest, version: &'a str) -> Outgoing<'a> {
        let mut seen = std::collections::HashSet::new();
        let objects = manifest
            .entries
            .iter()
            .filter_map(|e| {
                let key = e.key();
                seen.insert(key).then(|| OutgoingObject {
                    key,
                    size: e.size,
                    path: e.path.clone(),
                })
            })
            .collect();
        Outgoing {
            manifest,
            version,
            objects,
            tag: None,
            origin: None,
            created: None,
            sources: Vec::new(),
            format: Format::default(),
            packs: Vec::new(),
            raw: Vec::new(),
            attestations: Vec::new(),
        }
    }
}

/// What a remote published.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Published {
    /// The full reference the snapshot can be pulled by, e.g.
    /// `127.0.0.1:5000/cestore/ce:sha256-<hex>`.
    pub reference: String,
    /// The digest of the record published (for OCI, the image manifest's or
    /// index's), `sha256:<hex>`.
    pub remote_digest: String,
    /// The record's media type.
    pub media_type: String,
    /// How many image manifests hold the layers (1 unless an index was needed).
    pub manifests: usize,
    /// How many layers the image manifests list together.
    pub layers: usize,
    /// The format published: 1 (one layer per file) or 2 (packs).
    pub format: u8,
    /// The full reference under the human tag, when one was given, e.g.
    /// `127.0.0.1:5000/cestore/ce:3.23.1`.
    pub tag_reference: Option<String>,
    /// Attestations this push published beside the record.
    pub attestations_pushed: u64,
    /// Attestations the remote already held beside the record.
    pub attestations_present: u64,
}

/// A snapshot a remote offers: its canonical manifest bytes, not yet trusted.
#[derive(Clone, Debug)]
pub struct Incoming {
    /// The canonical manifest as the remote served it: parsed (so
    /// canonical) and within the bounds; `adopt` checks it hashes to
    /// `snapshot`.
    pub manifest: crate::profile::ce::manifest::Manifest,
    /// The snapshot digest the remote's record claims; `adopt` checks the
    /// bytes against it.
    pub snapshot: ManifestDigest,
    /// Where it came from, for the ingest event, e.g.
    /// `oci://127.0.0.1:5000/cestore/ce@sha256:<hex>`.
    pub source: String,
    /// The digest of the remote's record, `sha256:<hex>`.
    pub remote_digest: String,
    /// The record's media type.
    pub media_type: String,
    /// How many image manifests the record has.
    pub manifests: usize,
    /// The format of the record: 1 (one layer per file) or 2 (packs).
    pub format: u8,
    /// The raw blobs and packs the record lists, already checked against
    /// the canonical manifest ([`pack::check`]).
    pub carriers: pack::Carriers,
    /// Where the snapshot was first ingested, when the record says.
    pub origin: Option<crate::catalogue::Origin>,
    /// The source records the record carries, marked as come from a registry.
    pub sources: Vec<crate::source::SourceEntry>,
    /// The attestations the remote holds beside the record (DSSE envelopes,
    /// as bytes, each checked against its digest), not yet trusted.
    pub attestations: Vec<Vec<u8>>,
}

/// A place snapshots are pushed to and pulled from.
///
/// Blob operations may run on several threads at once. Every method returns
/// the crate's [`Error`]: [`Error::Remote`] for a failing or refusing remote,
/// of kind `integrity` ([`RemoteError::Mismatch`]) for data that does not
/// hash to what it should.
pub trait Remote: Sync {
    /// The remote's address, e.g. `oci://127.0.0.1:5000/cestore/ce`.
    fn location(&self) -> String;

    /// Whether the remote holds the blob with this SHA-256.
    fn has_blob(&self, id: &ObjectId) -> Result<bool>;

    /// Uploads one blob whose SHA-256 is `id`.
    fn put_blob(&self, id: &ObjectId, data: &[u8]) -> Result<()>;

    /// Downloads one blob; reads at most `max` bytes (more is an error). The
    /// caller checks the hash.
    fn get_blob(&self, id: &ObjectId, max: u64) -> Result<Vec<u8>>;

    /// Opens one blob for reading, as the remote sends it. A failed read is an
    /// [`io::Error`](std::io::Error) whose inner error is a [`RemoteError`]
    /// (see [`read_error`]). The caller bounds what it reads and checks the hash.
    fn open_blob(&self, id: &ObjectId) -> Result<Box<dyn std::io::Read + Send + '_>>;

    /// Publishes the record that names the snapshot, once every blob is there.
    fn publish(&self, snapshot: &Outgoing<'_>) -> Result<Published>;

    /// Finds the snapshot a reference names and returns its manifest bytes.
    fn resolve(&self, reference: &SnapshotRef) -> Result<Incoming>;

    /// This remote as an OCI remote, for what only that engine has (its
    /// request counts, cross-repository mounts).
    fn as_oci(&self) -> Option<&oci::OciRemote> {
        None
    }
}

/// The error a failed read of a blob (from [`Remote::open_blob`]) stands for.
pub fn read_error(e: std::io::Error) -> Error {
    if e.get_ref().is_some_and(|inner| inner.is::<RemoteError>()) {
        if let Some(Ok(remote)) = e.into_inner().map(|inner| inner.downcast::<RemoteError>()) {
            return Error::from(*remote);
        }
        return AnswerError::BlobUnreadable { cause: None }.into();
    }
    AnswerError::BlobUnreadable { cause: Some(e) }.into()
}

/// Opens a remote from an address such as `REGISTRY/REPOSITORY`,
/// `REGISTRY/REPOSITORY:TAG` or `REGISTRY/REPOSITORY@sha256:<hex>` (an
/// `oci://` prefix is allowed), and returns it with the snapshot reference the
/// address carries, when it carries one.
pub fn open(address: &str, opts: &Options) -> Result<(Box<dyn Remote>, Option<SnapshotRef>)> {
    let rest = address.strip_prefix("oci://").unwrap_or(address);
    if let Some((scheme, _)) = rest.split_once("://") {
        return Err(RequestError::Scheme {
            address: crate::source::url::redact_address(address),
            scheme: scheme.to_string(),
        }
        .into());
    }
    let (addr, reference) = oci::Address::parse(rest)?;
    Ok((Box::new(oci::OciRemote::new(addr, opts)?), reference))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip() {
        let d = ManifestDigest::of(b"x");
        assert_eq!(tag_digest(&snapshot_tag(&d)), Some(d));
        assert_eq!(tag_digest("latest"), None);
        assert_eq!(tag_digest("sha256-abc"), None);
    }
}
