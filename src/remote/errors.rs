//! What a remote's answers, records, packs and attestations can be wrong
//! in, and what a request of a remote can be malformed in: one enum per
//! concern, each variant with the values a caller acts on.
//!
//! Each reaches [`RemoteError`](super::RemoteError) (and so the crate's
//! [`Error`](crate::error::Error)) by `From`; its kind (exit code, JSON
//! `kind`) is the one [`RemoteError`](super::RemoteError)'s `Classify` gives
//! it: `remote` for an answer or record cestore cannot use, `integrity` for
//! bytes that do not hash to what they should ([`Mismatch`]), `usage` for a
//! request that cannot be made as given ([`RequestError`]).

use crate::digest::{ManifestDigest, ObjectId};
use crate::error::printable;
use crate::remote::oci::mapping::{CONFIG_MEDIA_TYPE, PACK_ANNOTATION, SNAPSHOT_ANNOTATION};
use crate::remote::oci::referrers::DSSE_MEDIA_TYPE;
use crate::sign::limits::AttestationLimit;

/// A registry's answer that is not what the distribution API promises.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// The body of an answer could not be read, for a reason the reader
    /// carried but did not give back.
    #[error("{method} {url}: the answer could not be read")]
    Unreadable {
        /// The HTTP method.
        method: String,
        /// The URL.
        url: String,
    },
    /// A blob's body could not be read.
    #[error("a blob could not be read{}", .cause.as_ref().map(|e| format!(": {e}")).unwrap_or_default())]
    BlobUnreadable {
        /// What the reader said, when it was no remote's error.
        cause: Option<std::io::Error>,
    },
    /// An upload was started without saying where it goes.
    #[error("POST {url} answered 202 without a Location header")]
    NoLocation {
        /// The URL posted to.
        url: String,
    },
    /// A manifest is larger than cestore reads.
    #[error("the manifest at {url} is larger than {max} bytes")]
    ManifestTooLarge {
        /// The manifest's URL.
        url: String,
        /// The most bytes read.
        max: usize,
    },
    /// A page of referrers is larger than cestore reads.
    #[error("the referrers list at {url} is larger than {max} bytes")]
    ReferrersTooLarge {
        /// The page's URL.
        url: String,
        /// The most bytes read.
        max: usize,
    },
    /// The referrers of a record span more pages than cestore follows.
    #[error("the referrers of sha256:{subject} span more than {max} pages")]
    TooManyReferrerPages {
        /// The record whose referrers were listed.
        subject: ObjectId,
        /// The most pages followed.
        max: usize,
    },
    /// The registry stored a manifest under another digest than its bytes'.
    #[error("the registry stored the manifest under {}, not {ours}", printable(.stored))]
    StoredUnder {
        /// The digest the registry answered with.
        stored: String,
        /// The digest of the bytes sent, `sha256:<hex>`.
        ours: String,
    },
}

/// A registry's record (image manifest, index, config) that is not a
/// cestore snapshot's.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The record is not JSON, or not the OCI JSON of a manifest or index.
    #[error("the registry's manifest is not valid JSON: {error}")]
    NotJson {
        /// What the parser said.
        error: serde_json::Error,
    },
    /// The record's schema version is not 2.
    #[error("the registry's manifest has schemaVersion {found}, not 2")]
    SchemaVersion {
        /// The version it has.
        found: u32,
    },
    /// A digest is not `sha256:<hex>`.
    #[error("'{}' is not a sha256 digest", printable(.text))]
    NotDigest {
        /// The digest as written.
        text: String,
    },
    /// An image manifest has no config.
    #[error("the registry's manifest has no config")]
    NoConfig,
    /// An image manifest's config is not a canonical manifest.
    #[error(
        "not a cestore snapshot: the config's media type is '{}', not '{CONFIG_MEDIA_TYPE}'",
        printable(.found)
    )]
    ConfigMediaType {
        /// The media type it has.
        found: String,
    },
    /// The config is listed larger than a canonical manifest can be.
    #[error("the config is {size} bytes, more than a snapshot's manifest can be")]
    ConfigTooLarge {
        /// Its size as listed.
        size: u64,
    },
    /// An index lists no manifests.
    #[error("the registry's index lists no manifests")]
    EmptyIndex,
    /// An index lists more manifests than a snapshot can need.
    #[error("the index lists {listed} manifests, more than a snapshot of at most {max_files} files can need")]
    IndexTooLong {
        /// How many it lists.
        listed: usize,
        /// The most files a snapshot has.
        max_files: usize,
    },
    /// An index lists more distinct manifests than its snapshot has objects.
    #[error(
        "the index lists {parts} distinct manifests for a snapshot of {objects} distinct objects"
    )]
    TooManyParts {
        /// The distinct manifests listed so far.
        parts: usize,
        /// The snapshot's distinct objects.
        objects: usize,
    },
    /// An index lists a manifest the registry does not have.
    #[error("the index lists manifest {} that the registry does not have", printable(.part))]
    MissingPart {
        /// The manifest's digest, as listed.
        part: String,
    },
    /// An index lists an index.
    #[error("the index lists another index; cestore writes one level only")]
    NestedIndex,
    /// A manifest of an index names another config than the index's snapshot.
    #[error(
        "the index's manifest {} names another config ({}) than snapshot {snapshot}",
        printable(.part),
        printable(.config)
    )]
    PartConfig {
        /// The manifest's digest, as listed.
        part: String,
        /// The config it names, as written.
        config: String,
        /// The index's snapshot.
        snapshot: ManifestDigest,
    },
    /// A manifest of an index lists no layers.
    #[error("the index's manifest {} lists no layers", printable(.part))]
    PartWithoutLayers {
        /// The manifest's digest, as listed.
        part: String,
    },
    /// An index's snapshot annotation is not a digest.
    #[error("the index's {SNAPSHOT_ANNOTATION} annotation '{}' is not a digest", printable(.hex))]
    SnapshotAnnotation {
        /// The annotation's value.
        hex: String,
    },
    /// An index names no snapshot, and its reference promised none.
    #[error("the index names no snapshot (no {SNAPSHOT_ANNOTATION} annotation)")]
    NoSnapshot,
    /// A `sha256-<hex>` tag holds a referrers index, not a snapshot.
    #[error("{tagged} holds the referrers (attestations) of the manifest sha256:{record}, not a snapshot; pull {pull}")]
    ReferrersTag {
        /// The full reference of the tag.
        tagged: String,
        /// The record whose referrers it lists.
        record: ManifestDigest,
        /// The full reference of that record.
        pull: String,
    },
    /// A layer has a media type cestore does not write.
    #[error("layer {} has the media type '{}', which is no cestore layer", printable(.layer), printable(.media_type))]
    LayerMediaType {
        /// The layer's digest, as listed.
        layer: String,
        /// Its media type.
        media_type: String,
    },
}

/// A pack's index (its `dev.cestore.pack` annotation) that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum SlotsError {
    /// It lists more objects than the snapshot can have left.
    #[error("a pack's index is malformed: it lists more than {max} objects")]
    TooMany {
        /// The most objects read.
        max: usize,
    },
    /// An item is not `<sha256>:<offset>:<size>`.
    #[error("a pack's index is malformed: '{}' is not <sha256>:<offset>:<size>", printable(.item))]
    NotSlot {
        /// The item, cut to 100 characters.
        item: String,
    },
    /// An item's SHA-256 is not lowercase.
    #[error("a pack's index is malformed: '{}' is not lowercase hex", printable(.item))]
    NotLowercase {
        /// The item, cut to 100 characters.
        item: String,
    },
}

/// What a record lists of a snapshot's packs and raw blobs, when it does
/// not fit the snapshot or the layout of a cestore pack.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// A pack layer has no index.
    #[error("pack {} has no {PACK_ANNOTATION} annotation (its index)", printable(.pack))]
    NoIndex {
        /// The pack's digest, as listed.
        pack: String,
    },
    /// A pack is listed twice with different indexes or sizes.
    #[error("pack {} is listed twice with different objects", printable(.pack))]
    ListedTwice {
        /// The pack's digest, as listed.
        pack: String,
    },
    /// A pack's index does not parse.
    #[error("pack {}: {error}", printable(.pack))]
    Index {
        /// The pack's digest, as listed.
        pack: String,
        /// What is wrong with its index.
        error: SlotsError,
    },
    /// A raw layer is no content of the snapshot.
    #[error(
        "the registry's manifest lists layer sha256:{layer}, which is no content of the snapshot"
    )]
    ForeignLayer {
        /// The layer.
        layer: ObjectId,
    },
    /// A content of the snapshot is carried by no layer.
    #[error("no layer of the registry's manifest carries '{}' (sha256:{content})", printable(.path))]
    NotCarried {
        /// The first file with the content.
        path: String,
        /// The content.
        content: ObjectId,
    },
    /// A pack lists no objects.
    #[error("pack sha256:{pack} lists no objects")]
    Empty {
        /// The pack.
        pack: ObjectId,
    },
    /// A pack lists an object that is no content of the snapshot.
    #[error("pack sha256:{pack} lists object {object}, which is no content of the snapshot")]
    ForeignObject {
        /// The pack.
        pack: ObjectId,
        /// The object.
        object: ObjectId,
    },
    /// A pack lists an object with another size than the snapshot's.
    #[error(
        "pack sha256:{pack} lists object {object} with {listed} bytes, but '{}' has {size}",
        printable(.path)
    )]
    ObjectSize {
        /// The pack.
        pack: ObjectId,
        /// The object.
        object: ObjectId,
        /// Its size in the pack's index.
        listed: u64,
        /// The first file with the content.
        path: String,
        /// Its size in the snapshot.
        size: u64,
    },
    /// A pack lists an object twice.
    #[error("pack sha256:{pack} lists object {object} twice")]
    ObjectTwice {
        /// The pack.
        pack: ObjectId,
        /// The object.
        object: ObjectId,
    },
    /// A pack's index points outside the pack.
    #[error("pack sha256:{pack} has {pack_size} bytes, but its index points outside it: object {object} at offset {offset} with {size} bytes")]
    Outside {
        /// The pack.
        pack: ObjectId,
        /// The pack's size, as listed.
        pack_size: u64,
        /// The object.
        object: ObjectId,
        /// Its offset.
        offset: u64,
        /// Its size.
        size: u64,
    },
    /// A pack's index places an object where a cestore pack does not.
    #[error("pack sha256:{pack} places object {object} at offset {offset}, not where a pack's next object lies")]
    Misplaced {
        /// The pack.
        pack: ObjectId,
        /// The object.
        object: ObjectId,
        /// Its offset.
        offset: u64,
    },
    /// A pack's listed size is not the size its objects take.
    #[error("pack sha256:{pack} is listed with {listed} bytes, but its objects take {size} (its index points outside it)")]
    Size {
        /// The pack.
        pack: ObjectId,
        /// Its size, as listed.
        listed: u64,
        /// The size its objects take.
        size: u64,
    },
}

/// The attestations beside a record, when the registry lists or serves
/// them in a way cestore cannot use.
#[derive(Debug, thiserror::Error)]
pub enum ReferrersError {
    /// The referrers tag holds something else than a referrers index.
    #[error("the referrers tag holds no referrers index: {why}")]
    NotIndex {
        /// What it holds instead.
        why: NotIndex,
    },
    /// The referrers index, with this push's referrers, is too large.
    #[error("the referrers index would be {bytes} bytes, more than the {max} a registry takes")]
    IndexTooLarge {
        /// Its size.
        bytes: usize,
        /// The most a registry takes.
        max: usize,
    },
    /// A page of referrers is not an index.
    #[error("the list of referrers: {error}")]
    List {
        /// What is wrong with it.
        error: RecordError,
    },
    /// The registry lists more attestations than a snapshot travels with.
    #[error("the registry's attestations: {0}")]
    Listed(AttestationLimit),
    /// A listed attestation's manifest is missing.
    #[error("the referrers of sha256:{subject} list the attestation sha256:{attestation}, which the registry does not have")]
    Missing {
        /// The record.
        subject: ObjectId,
        /// The attestation's manifest.
        attestation: ObjectId,
    },
    /// An attestation's manifest has another number of layers than one.
    #[error("the attestation sha256:{attestation} has {layers} layers, not one envelope")]
    Layers {
        /// The attestation's manifest.
        attestation: ObjectId,
        /// How many layers it has.
        layers: usize,
    },
    /// An attestation's layer is no DSSE envelope.
    #[error("the attestation sha256:{attestation} holds a layer of media type '{}', not '{DSSE_MEDIA_TYPE}'", printable(.media_type))]
    LayerMediaType {
        /// The attestation's manifest.
        attestation: ObjectId,
        /// The layer's media type.
        media_type: String,
    },
    /// An attestation's envelope is larger than one may be.
    #[error("the attestation sha256:{attestation}: {limit}")]
    Envelope {
        /// The attestation's manifest.
        attestation: ObjectId,
        /// The bound its envelope breaks.
        limit: AttestationLimit,
    },
}

/// What the referrers tag holds instead of a referrers index.
#[derive(Debug, thiserror::Error)]
pub enum NotIndex {
    /// Not JSON.
    #[error("{0}")]
    Json(serde_json::Error),
    /// Not a JSON object.
    #[error("it is not a JSON object")]
    NotObject,
    /// Its schema version is not 2.
    #[error("its schemaVersion is not 2")]
    SchemaVersion,
    /// Another media type than an index's.
    #[error("its media type is {0}")]
    MediaType(serde_json::Value),
    /// Its manifests are not a list.
    #[error("its manifests are not a list")]
    ManifestsNotList,
    /// A descriptor names no digest.
    #[error("a descriptor names no digest")]
    NoDigest,
}

/// Bytes a registry served that are not the ones asked for: they do not
/// hash to the digest that names them, or name another snapshot.
#[derive(Debug, thiserror::Error)]
pub enum Mismatch {
    /// The config blob does not hash to its digest or has another size.
    #[error("the registry's config blob sha256:{config} does not hash to its digest")]
    Config {
        /// The config's digest (the snapshot's).
        config: ObjectId,
    },
    /// A manifest fetched by digest hashes to another.
    #[error("the registry served a manifest for sha256:{asked} that hashes to sha256:{found}")]
    Manifest {
        /// The digest asked for.
        asked: ObjectId,
        /// The digest of the bytes served.
        found: ObjectId,
    },
    /// A manifest an index lists hashes to another digest.
    #[error("the registry served a manifest for {} that hashes to sha256:{found}", printable(.part))]
    Part {
        /// The manifest's digest, as the index lists it.
        part: String,
        /// The digest of the bytes served.
        found: ObjectId,
    },
    /// An attestation's manifest hashes to another digest.
    #[error("the registry served a manifest for the attestation sha256:{attestation} that hashes to sha256:{found}")]
    Attestation {
        /// The attestation's manifest, as listed.
        attestation: ObjectId,
        /// The digest of the bytes served.
        found: ObjectId,
    },
    /// An attestation's envelope does not hash to its digest or has another size.
    #[error("the registry's envelope sha256:{envelope} (attestation sha256:{attestation}) does not hash to its digest or has another size")]
    Envelope {
        /// The envelope's digest.
        envelope: ObjectId,
        /// The attestation's manifest.
        attestation: ObjectId,
    },
    /// A `sha256-<hex>` tag names an index of another snapshot.
    #[error("the tag sha256-{tag} names an index of snapshot {snapshot}")]
    TagIndex {
        /// The snapshot the tag promises.
        tag: ManifestDigest,
        /// The snapshot the index names.
        snapshot: ManifestDigest,
    },
    /// A `sha256-<hex>` tag names a manifest of another snapshot.
    #[error("the tag sha256-{tag} names a manifest whose config is snapshot {snapshot}")]
    TagManifest {
        /// The snapshot the tag promises.
        tag: ManifestDigest,
        /// The snapshot the manifest's config is.
        snapshot: ManifestDigest,
    },
    /// A pack pulled is not the pack its index describes.
    #[error("pack sha256:{pack} {problem}")]
    Pack {
        /// The pack.
        pack: ObjectId,
        /// What is wrong with it.
        problem: PackDamage,
    },
}

/// How a pack pulled differs from the pack its index describes.
#[derive(Debug, thiserror::Error)]
pub enum PackDamage {
    /// It ends before an object's header.
    #[error("is truncated before object {0}")]
    TruncatedBefore(ObjectId),
    /// An object's header is not where the index says.
    #[error("has no header for object {object} at offset {offset} (a changed byte, or an index that does not match the pack)")]
    NoHeader {
        /// The object.
        object: ObjectId,
        /// Where its header should be.
        offset: u64,
    },
    /// It ends inside an object.
    #[error("is truncated in object {0}")]
    TruncatedIn(ObjectId),
    /// An object's bytes hash to another SHA-256.
    #[error("carries object {object} whose bytes hash to {found}")]
    Object {
        /// The object, as the index names it.
        object: ObjectId,
        /// What its bytes hash to.
        found: ObjectId,
    },
    /// It ends in an object's padding.
    #[error("is truncated after object {0}")]
    TruncatedAfter(ObjectId),
    /// An object's padding is not zero.
    #[error("has changed padding after object {0}")]
    Padding(ObjectId),
    /// It ends in its end blocks.
    #[error("is truncated in its end blocks")]
    TruncatedEnd,
    /// Its end blocks are not zero.
    #[error("has changed end blocks")]
    EndBlocks,
    /// Bytes follow its end.
    #[error("is longer than its {0} bytes")]
    Longer(u64),
}

/// A request of a remote that cannot be made as given.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The address is not `REGISTRY/REPOSITORY[:TAG|@sha256:HEX]`.
    #[error("'{address}' is not a remote address ({why}): write REGISTRY/REPOSITORY, e.g. 127.0.0.1:5000/cestore/ce, with :TAG or @sha256:<hex> to pull")]
    Address {
        /// The address, without a user part, a query or a fragment.
        address: String,
        /// The rule it breaks.
        why: &'static str,
    },
    /// The address names a scheme other than OCI's.
    #[error("'{address}': the remote scheme '{scheme}' is not supported (only OCI registries, as REGISTRY/REPOSITORY)")]
    Scheme {
        /// The address, without a user part, a query or a fragment.
        address: String,
        /// The scheme.
        scheme: String,
    },
    /// A push's `sha256-<hex>` tag names another snapshot.
    #[error("'{remote}': the tag names the snapshot {tag}, not {snapshot}; give a human tag such as 3.23.1, or none")]
    PushTagOfAnother {
        /// The remote as given.
        remote: String,
        /// The snapshot the tag names.
        tag: ManifestDigest,
        /// The snapshot pushed.
        snapshot: ManifestDigest,
    },
    /// A push names a digest.
    #[error("'{remote}': push takes REGISTRY/REPOSITORY or REGISTRY/REPOSITORY:TAG, not a digest; the digest tag sha256-<digest> is always published")]
    PushDigest {
        /// The remote as given.
        remote: String,
    },
    /// A pull names no tag or digest.
    #[error("'{reference}': pull needs a tag or digest: REGISTRY/REPOSITORY:sha256-<hex>, :TAG or @sha256:<hex>")]
    PullWithoutReference {
        /// The reference as given.
        reference: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ErrorKind};
    use crate::remote::RemoteError;

    /// Each concern keeps the kind (and so the exit code and JSON `kind`)
    /// and the words its errors had as a catch-all, and a caller reaches
    /// its fields through the crate's error.
    #[test]
    fn each_concern_keeps_its_kind_and_words_and_can_be_matched() {
        let id = ObjectId::of(b"x");
        let other = ObjectId::of(b"y");
        let d = ManifestDigest::of(b"m");
        let cases: Vec<(Error, ErrorKind, String)> = vec![
            (
                AnswerError::StoredUnder {
                    stored: format!("sha256:{other}"),
                    ours: format!("sha256:{id}"),
                }
                .into(),
                ErrorKind::Remote,
                format!("the registry stored the manifest under sha256:{other}, not sha256:{id}"),
            ),
            (
                AnswerError::BlobUnreadable { cause: None }.into(),
                ErrorKind::Remote,
                "a blob could not be read".into(),
            ),
            (
                RecordError::ConfigMediaType { found: "a/b".into() }.into(),
                ErrorKind::Remote,
                "not a cestore snapshot: the config's media type is 'a/b', not 'application/vnd.cestore.manifest.v1+json'".into(),
            ),
            (
                PackError::Index {
                    pack: format!("sha256:{id}"),
                    error: SlotsError::TooMany { max: 3 },
                }
                .into(),
                ErrorKind::Remote,
                format!("pack sha256:{id}: a pack's index is malformed: it lists more than 3 objects"),
            ),
            (
                ReferrersError::Listed(AttestationLimit::TooMany { count: 65 }).into(),
                ErrorKind::Remote,
                "the registry's attestations: 65 attestations are more than the 64 a snapshot travels with".into(),
            ),
            (
                Mismatch::Pack {
                    pack: id,
                    problem: PackDamage::Longer(7),
                }
                .into(),
                ErrorKind::Integrity,
                format!("pack sha256:{id} is longer than its 7 bytes"),
            ),
            (
                Mismatch::TagIndex {
                    tag: d,
                    snapshot: ManifestDigest::of(b"n"),
                }
                .into(),
                ErrorKind::Integrity,
                format!(
                    "the tag sha256-{d} names an index of snapshot {}",
                    ManifestDigest::of(b"n")
                ),
            ),
            (
                RequestError::PushDigest {
                    remote: "r/x@sha256:00".into(),
                }
                .into(),
                ErrorKind::Usage,
                "'r/x@sha256:00': push takes REGISTRY/REPOSITORY or REGISTRY/REPOSITORY:TAG, not a digest; the digest tag sha256-<digest> is always published".into(),
            ),
        ];
        for (e, kind, text) in cases {
            assert_eq!(e.error_kind(), kind, "{e}");
            assert_eq!(e.to_string(), text);
            assert_eq!(crate::error::error_chain(&e), text);
            assert_eq!(e.path(), None, "{e}");
        }
        let e: Error = Mismatch::Envelope {
            envelope: id,
            attestation: other,
        }
        .into();
        let Error::Remote(c) = &e else {
            panic!("{e:?}")
        };
        assert!(matches!(
            c.downcast_ref::<RemoteError>(),
            Some(RemoteError::Mismatch(Mismatch::Envelope { envelope, .. })) if *envelope == id
        ));
    }
}
