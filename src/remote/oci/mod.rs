//! The OCI engine: snapshots as OCI artifacts in a container registry.
//!
//! A snapshot is one OCI image manifest (or, past the limits, an index of
//! several) whose config blob is the canonical manifest and whose layers
//! carry the snapshot's objects: packs of small objects with their index and
//! large objects raw (format 2), or one raw layer per object (format 1, still
//! read); it is tagged `sha256-<hex>`. Its attestations are referrers of
//! that record (see [`referrers`]). See [`mapping`], [`super::pack`] and
//! `docs/remote.md`.

pub mod auth;
pub mod client;
pub mod mapping;
#[cfg(test)]
mod pinned;
pub mod referrers;
mod retry;

use std::collections::BTreeSet;

use self::client::Client;
use self::mapping::{Document, Plan};
use super::pack::{self, Carriers, PackRef};
use super::{Incoming, Options, Outgoing, Published, Remote, RemoteError, SnapshotRef};
use super::{Mismatch, PackError, RecordError, RequestError};
use crate::digest::{ManifestDigest, ObjectId};
use crate::error::{Error, Result};

/// The default most layers per image manifest: the CNCF registry takes
/// thousands, but some hosted registries refuse manifests with more than
/// about a thousand layers, and smaller manifests are cheaper to re-fetch.
pub const DEFAULT_MAX_LAYERS: usize = 1000;
/// The largest canonical manifest (config blob) a pull accepts.
const MAX_CONFIG_BYTES: u64 = 16 * 1024 * 1024;

/// A registry and a repository in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    /// The registry host, with its port when it has one.
    pub registry: String,
    /// The repository path, e.g. `cestore/ce`.
    pub repository: String,
}

fn valid_repository(repo: &str) -> bool {
    !repo.is_empty()
        && repo.len() <= 255
        && repo.split('/').all(|c| {
            let b = c.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|&x| x.is_ascii_lowercase() || x.is_ascii_digit() || b"._-".contains(&x))
        })
}

fn valid_tag(tag: &str) -> bool {
    let b = tag.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|&x| x.is_ascii_alphanumeric() || b"._-".contains(&x))
}

fn valid_registry(reg: &str) -> bool {
    !reg.is_empty()
        && reg
            .bytes()
            .all(|x| x.is_ascii_alphanumeric() || b".-:[]".contains(&x))
}

impl Address {
    /// Parses `REGISTRY/REPOSITORY[:TAG|@sha256:HEX]`. A refusal shows the
    /// address without a user part, a query or a fragment.
    pub fn parse(s: &str) -> Result<(Address, Option<SnapshotRef>)> {
        let usage = |why: &'static str| -> Error {
            RequestError::Address {
                address: crate::source::url::redact_address(s),
                why,
            }
            .into()
        };
        let Some((registry, rest)) = s.split_once('/') else {
            return Err(usage("no repository"));
        };
        if !valid_registry(registry) {
            return Err(usage(
                "the registry is not a host name with an optional port",
            ));
        }
        let (repository, reference) = if let Some((repo, digest)) = rest.split_once('@') {
            let id = ObjectId::from_prefixed(digest)
                .map_err(|_| usage("a digest is sha256: and 64 hex characters"))?;
            (repo, Some(SnapshotRef::Digest(id)))
        } else {
            match rest.rsplit_once(':') {
                Some((repo, tag)) if !tag.contains('/') => {
                    if !valid_tag(tag) {
                        return Err(usage("the tag has characters a tag cannot have"));
                    }
                    (repo, Some(SnapshotRef::Tag(tag.to_string())))
                }
                _ => (rest, None),
            }
        };
        if !valid_repository(repository) {
            return Err(usage(
                "a repository is lowercase letters, digits and . _ - between slashes",
            ));
        }
        Ok((
            Address {
                registry: registry.to_string(),
                repository: repository.to_string(),
            },
            reference,
        ))
    }
}

/// A repository of an OCI registry, as a [`Remote`].
pub struct OciRemote {
    address: Address,
    client: Client,
    max_layers: usize,
}

impl OciRemote {
    /// A remote for `address`; credentials are looked up for its registry.
    pub fn new(address: Address, opts: &Options) -> Result<OciRemote> {
        let creds = auth::lookup(&address.registry);
        let client = Client::new(
            &address.registry,
            &address.repository,
            opts.plain_http,
            creds,
            opts.push,
            opts.timeouts,
        );
        Ok(OciRemote {
            address,
            client,
            max_layers: opts.max_layers,
        })
    }

    fn full(&self, reference: &str) -> String {
        let sep = if reference.starts_with("sha256:") {
            '@'
        } else {
            ':'
        };
        format!(
            "{}/{}{sep}{reference}",
            self.address.registry, self.address.repository
        )
    }

    /// Fetches the config blob (the canonical manifest) and checks its hash,
    /// its size when the record names one, and its bounds; returns it parsed.
    fn fetch_config(
        &self,
        config_id: &ObjectId,
        size: Option<u64>,
    ) -> Result<crate::profile::ce::manifest::Manifest> {
        // A tree kind's manifest may be longer than a CE manifest's bound:
        // a listed size up to a tree kind's is fetched, then held to its
        // kind's bound.
        let tree_max = crate::profile::ce::manifest::MAX_TREE_MANIFEST_BYTES;
        let max = size.unwrap_or(MAX_CONFIG_BYTES);
        if max > tree_max {
            return Err(RecordError::ConfigTooLarge { size: max }.into());
        }
        let bytes = self.client.get_blob(config_id, max)?;
        if crate::profile::ce::manifest::over_bound(&bytes) {
            return Err(RecordError::ConfigTooLarge {
                size: bytes.len() as u64,
            }
            .into());
        }
        if bytes.len() as u64 > max
            || size.is_some_and(|s| s != bytes.len() as u64)
            || ObjectId::of(&bytes) != *config_id
        {
            return Err(Mismatch::Config { config: *config_id }.into());
        }
        let manifest = crate::profile::ce::manifest::Manifest::parse(&bytes)
            .map_err(crate::store::ingest::adopt::AdoptError::from)?;
        match &manifest.tree {
            None => {
                crate::profile::Profile::check_entries(&crate::profile::ce::CE, &manifest.entries)
                    .map_err(crate::store::ingest::adopt::AdoptError::from)?
            }
            Some(stored) => crate::profile::tree::stored::check_alone(stored)
                .map_err(crate::store::ingest::adopt::AdoptError::from)?,
        }
        Ok(manifest)
    }

    /// Resolves an index: the snapshot it names and its config first (the
    /// canonical manifest, checked against the bounds), then each distinct
    /// manifest it lists, one at a time, keeping only what its layers carry.
    /// A snapshot of at most [`MAX_FILES`](crate::profile::ce::rules::MAX_FILES) files
    /// needs at most that many manifests (each lists one layer or more), so
    /// an index listing more is refused, and memory holds one manifest at a
    /// time, whatever the index lists.
    fn resolve_index(&self, doc: Document, promised: Option<ManifestDigest>) -> Result<Resolved> {
        let listed = doc.manifests.as_deref().unwrap_or_default();
        let snapshot = index_snapshot(&doc, listed, promised)?;
        let config_id = ObjectId::from_bytes(*snapshot.as_bytes());
        let manifest = self.fetch_config(&config_id, None)?;
        // Format 1 writes one layer per object: a content and its exec bit.
        let files: BTreeSet<crate::digest::ObjectKey> =
            manifest.entries.iter().map(|e| e.key()).collect();
        let mut collector = Collector::new(&manifest);
        let mut distinct = BTreeSet::new();
        for d in listed {
            let id = mapping::parse_digest(&d.digest)?;
            if !distinct.insert(id) {
                continue;
            }
            if distinct.len() > files.len() {
                return Err(RecordError::TooManyParts {
                    parts: distinct.len(),
                    objects: files.len(),
                }
                .into());
            }
            let config = (config_id, manifest.bytes.len() as u64);
            let part = self.fetch_part(d, id, config, snapshot)?;
            for l in &part.layers {
                collector.add(l)?;
            }
        }
        Ok(Resolved {
            media_type: mapping::INDEX_MEDIA_TYPE,
            manifests: distinct.len(),
            snapshot,
            manifest,
            collector,
        })
    }

    /// Fetches one manifest an index lists, as `d` names it (its digest
    /// `id`), and checks that it is an image manifest of the index's
    /// snapshot: its config is `config` (the id and size of the snapshot's
    /// canonical manifest) and it lists layers.
    fn fetch_part(
        &self,
        d: &mapping::Descriptor,
        id: ObjectId,
        config: (ObjectId, u64),
        snapshot: ManifestDigest,
    ) -> Result<Document> {
        let part = self
            .fetch_document(&d.digest)?
            .ok_or_else(|| RecordError::MissingPart {
                part: d.digest.clone(),
            })?;
        if ObjectId::of(&part) != id {
            return Err(Mismatch::Part {
                part: d.digest.clone(),
                found: ObjectId::of(&part),
            }
            .into());
        }
        let part = Document::parse(&part)?;
        if part.is_index() {
            return Err(RecordError::NestedIndex.into());
        }
        let c = check_config(&part)?;
        if (mapping::parse_digest(&c.digest)?, c.size) != config {
            return Err(RecordError::PartConfig {
                part: d.digest.clone(),
                config: c.digest.clone(),
                snapshot,
            }
            .into());
        }
        if part.layers.is_empty() {
            return Err(RecordError::PartWithoutLayers {
                part: d.digest.clone(),
            }
            .into());
        }
        Ok(part)
    }

    /// Resolves an image manifest: its config (the canonical manifest) and
    /// what its layers carry.
    fn resolve_manifest(
        &self,
        doc: &Document,
        promised: Option<ManifestDigest>,
    ) -> Result<Resolved> {
        let config = check_config(doc)?;
        let config_id = mapping::parse_digest(&config.digest)?;
        let snapshot = ManifestDigest::from_bytes(*config_id.as_bytes());
        check_promise(promised, snapshot)?;
        let manifest = self.fetch_config(&config_id, Some(config.size))?;
        let mut collector = Collector::new(&manifest);
        for l in &doc.layers {
            collector.add(l)?;
        }
        Ok(Resolved {
            media_type: mapping::MANIFEST_MEDIA_TYPE,
            manifests: 1,
            snapshot,
            manifest,
            collector,
        })
    }

    /// Fetches the document a reference names, with the snapshot digest the
    /// reference itself promises (a `sha256-<hex>` tag) and the document
    /// digest it pins (`@sha256:`).
    fn fetch_top(&self, reference: &SnapshotRef) -> Result<Top> {
        let top = |bytes, promised, pinned| Top {
            bytes,
            promised,
            pinned,
        };
        Ok(match reference {
            SnapshotRef::Tag(tag) => {
                let bytes = self
                    .fetch_document(tag)?
                    .ok_or_else(|| RemoteError::NotFound(self.full(tag)))?;
                if let Some(digest) = super::tag_digest(tag).filter(|_| is_referrers_index(&bytes))
                {
                    return Err(RecordError::ReferrersTag {
                        tagged: self.full(tag),
                        record: digest,
                        pull: self.full(&format!("sha256:{digest}")),
                    }
                    .into());
                }
                top(bytes, super::tag_digest(tag), None)
            }
            SnapshotRef::Digest(id) => {
                // The snapshot's own digest is a tag; anything else must be a
                // manifest's digest. (Asking for the config blob's digest as a
                // manifest makes some registries answer 500, so the tag goes first.)
                let tag = format!("sha256-{id}");
                match self
                    .fetch_document(&tag)?
                    .filter(|b| !is_referrers_index(b))
                {
                    Some(bytes) => top(bytes, super::tag_digest(&tag), None),
                    None => {
                        let pinned = format!("sha256:{id}");
                        let bytes = self.fetch_document(&pinned)?.ok_or_else(|| {
                            RemoteError::NotFound(format!(
                                "{} (neither a snapshot's tag nor a manifest's digest)",
                                self.full(&pinned)
                            ))
                        })?;
                        top(bytes, None, Some(*id))
                    }
                }
            }
        })
    }

    fn fetch_document(&self, reference: &str) -> Result<Option<Vec<u8>>> {
        Ok(self
            .client
            .get_manifest(reference, mapping::MAX_MANIFEST_BYTES)?)
    }
}

impl Remote for OciRemote {
    fn as_oci(&self) -> Option<&OciRemote> {
        Some(self)
    }

    fn location(&self) -> String {
        format!(
            "oci://{}/{}",
            self.address.registry, self.address.repository
        )
    }

    fn has_blob(&self, id: &ObjectId) -> Result<bool> {
        Ok(self.client.has_blob(id)?)
    }

    fn put_blob(&self, id: &ObjectId, data: &[u8]) -> Result<()> {
        Ok(self.client.put_blob(id, data)?)
    }

    fn get_blob(&self, id: &ObjectId, max: u64) -> Result<Vec<u8>> {
        Ok(self.client.get_blob(id, max)?)
    }

    fn open_blob(&self, id: &ObjectId) -> Result<Box<dyn std::io::Read + Send + '_>> {
        Ok(Box::new(self.client.open_blob(id)?))
    }

    fn publish(&self, snapshot: &Outgoing<'_>) -> Result<Published> {
        let tag = super::snapshot_tag(&snapshot.manifest.digest);
        let reference = self.full(&tag);
        match mapping::plan(snapshot, self.max_layers, mapping::MAX_MANIFEST_BYTES) {
            Plan::Single(bytes, layers) => {
                self.client
                    .put_manifest(&tag, mapping::MANIFEST_MEDIA_TYPE, &bytes)?;
                if let Some(human) = &snapshot.tag {
                    self.client
                        .put_manifest(human, mapping::MANIFEST_MEDIA_TYPE, &bytes)?;
                }
                let attached = self.attach(
                    &referrers::Subject {
                        media_type: mapping::MANIFEST_MEDIA_TYPE.into(),
                        digest: ObjectId::of(&bytes),
                        size: bytes.len() as u64,
                    },
                    &snapshot.manifest.digest,
                    &snapshot.attestations,
                )?;
                Ok(Published {
                    reference,
                    remote_digest: format!("sha256:{}", ObjectId::of(&bytes)),
                    media_type: mapping::MANIFEST_MEDIA_TYPE.into(),
                    manifests: 1,
                    layers,
                    format: snapshot.format.number(),
                    tag_reference: snapshot.tag.as_ref().map(|t| self.full(t)),
                    attestations_pushed: attached.pushed,
                    attestations_present: attached.present,
                })
            }
            Plan::Index {
                parts,
                index,
                layers,
            } => {
                for p in &parts {
                    self.client.put_manifest(
                        &format!("sha256:{}", ObjectId::of(p)),
                        mapping::MANIFEST_MEDIA_TYPE,
                        p,
                    )?;
                }
                self.client
                    .put_manifest(&tag, mapping::INDEX_MEDIA_TYPE, &index)?;
                if let Some(human) = &snapshot.tag {
                    self.client
                        .put_manifest(human, mapping::INDEX_MEDIA_TYPE, &index)?;
                }
                let attached = self.attach(
                    &referrers::Subject {
                        media_type: mapping::INDEX_MEDIA_TYPE.into(),
                        digest: ObjectId::of(&index),
                        size: index.len() as u64,
                    },
                    &snapshot.manifest.digest,
                    &snapshot.attestations,
                )?;
                Ok(Published {
                    reference,
                    remote_digest: format!("sha256:{}", ObjectId::of(&index)),
                    media_type: mapping::INDEX_MEDIA_TYPE.into(),
                    manifests: parts.len(),
                    layers,
                    format: snapshot.format.number(),
                    tag_reference: snapshot.tag.as_ref().map(|t| self.full(t)),
                    attestations_pushed: attached.pushed,
                    attestations_present: attached.present,
                })
            }
        }
    }

    fn resolve(&self, reference: &SnapshotRef) -> Result<Incoming> {
        let Top {
            bytes,
            promised,
            pinned,
        } = self.fetch_top(reference)?;
        let top = ObjectId::of(&bytes);
        if let Some(id) = pinned {
            if top != id {
                return Err(Mismatch::Manifest {
                    asked: id,
                    found: top,
                }
                .into());
            }
        }
        let doc = Document::parse(&bytes)?;
        let origin = doc.origin();
        let sources = doc.sources()?;
        let format = if doc.artifact_type.as_deref() == Some(mapping::ARTIFACT_TYPE_V2) {
            2
        } else {
            1
        };
        let Resolved {
            media_type,
            manifests,
            snapshot,
            manifest,
            collector,
        } = if doc.is_index() {
            self.resolve_index(doc, promised)?
        } else {
            self.resolve_manifest(&doc, promised)?
        };
        let carriers = collector.carriers;
        pack::check(&manifest, &carriers)?;
        let attestations = self.attestations_of(&top)?;
        Ok(Incoming {
            manifest,
            snapshot,
            source: format!("{}@sha256:{top}", self.location()),
            remote_digest: format!("sha256:{top}"),
            media_type: media_type.into(),
            manifests,
            format,
            carriers,
            origin,
            sources,
            attestations,
        })
    }
}

/// Whether a document a `sha256-<hex>` tag holds is a referrers index (the
/// referrers tag schema's) rather than a snapshot's record: an index that
/// names no cestore artifact type.
fn is_referrers_index(bytes: &[u8]) -> bool {
    Document::parse(bytes).is_ok_and(|doc| {
        doc.is_index()
            && doc.artifact_type.as_deref() != Some(mapping::ARTIFACT_TYPE)
            && doc.artifact_type.as_deref() != Some(mapping::ARTIFACT_TYPE_V2)
            && !doc.annotations.contains_key(mapping::SNAPSHOT_ANNOTATION)
    })
}

/// The document a reference names, as [`OciRemote::fetch_top`] fetches it.
struct Top {
    /// The document's bytes.
    bytes: Vec<u8>,
    /// The snapshot the reference itself promises (a `sha256-<hex>` tag).
    promised: Option<ManifestDigest>,
    /// The document digest the reference pins (`@sha256:`).
    pinned: Option<ObjectId>,
}

/// A record resolved down to its snapshot and what its layers carry.
struct Resolved {
    /// The record's media type: an image manifest or an index.
    media_type: &'static str,
    /// How many image manifests it is.
    manifests: usize,
    /// The snapshot it holds.
    snapshot: ManifestDigest,
    /// The snapshot's canonical manifest, as the config blob holds it,
    /// parsed and checked against the bounds.
    manifest: crate::profile::ce::manifest::Manifest,
    /// What the layers carry.
    collector: Collector,
}

/// The snapshot an index names: its annotation, which must agree with what
/// the reference promised (either may be absent, not both). An index that
/// lists no manifests, or more than a snapshot can need, is refused first.
fn index_snapshot(
    doc: &Document,
    listed: &[mapping::Descriptor],
    promised: Option<ManifestDigest>,
) -> Result<ManifestDigest> {
    if listed.is_empty() {
        return Err(RecordError::EmptyIndex.into());
    }
    if listed.len() > crate::profile::ce::rules::MAX_FILES {
        return Err(RecordError::IndexTooLong {
            listed: listed.len(),
            max_files: crate::profile::ce::rules::MAX_FILES,
        }
        .into());
    }
    let annotated = match doc.annotations.get(mapping::SNAPSHOT_ANNOTATION) {
        Some(hex) => Some(
            hex.parse::<ManifestDigest>()
                .map_err(|_| RecordError::SnapshotAnnotation { hex: hex.clone() })?,
        ),
        None => None,
    };
    match (promised, annotated) {
        (Some(p), Some(a)) if p != a => Err(Mismatch::TagIndex {
            tag: p,
            snapshot: a,
        }
        .into()),
        (Some(d), _) | (None, Some(d)) => Ok(d),
        (None, None) => Err(RecordError::NoSnapshot.into()),
    }
}

/// Gathers what a record's layers carry: raw blobs and packs, each pack
/// listed once (a pack listed again, by another manifest of an index, must
/// list the same objects). The slots read in all are bounded by the
/// snapshot's file count: cestore lists each content at most once per pack
/// and a pack's contents once per group, so a snapshot's packs together
/// hold at most one slot per file. A raw layer that is no content of the
/// snapshot is refused as it is read, so the raw blobs kept are bounded by
/// the snapshot's contents too, however many the record lists.
struct Collector {
    carriers: Carriers,
    contents: std::collections::HashSet<ObjectId>,
    seen: std::collections::BTreeMap<ObjectId, usize>,
    slots_left: usize,
}

impl Collector {
    fn new(manifest: &crate::profile::ce::manifest::Manifest) -> Collector {
        Collector {
            carriers: Carriers::default(),
            contents: manifest.entries.iter().map(|e| e.sha256).collect(),
            seen: std::collections::BTreeMap::new(),
            slots_left: manifest.entries.len(),
        }
    }

    fn add(&mut self, d: &mapping::Descriptor) -> Result<()> {
        let digest = mapping::parse_digest(&d.digest)?;
        match d.media_type.as_str() {
            mapping::LAYER_MEDIA_TYPE => {
                if !self.contents.contains(&digest) {
                    return Err(PackError::ForeignLayer { layer: digest }.into());
                }
                self.carriers.raw.insert(digest);
            }
            mapping::PACK_MEDIA_TYPE => {
                let text = d.annotations.get(mapping::PACK_ANNOTATION).ok_or_else(|| {
                    PackError::NoIndex {
                        pack: d.digest.clone(),
                    }
                })?;
                if let Some(&i) = self.seen.get(&digest) {
                    let known = &self.carriers.packs[i];
                    if known.size != d.size || pack::format_slots(&known.slots) != *text {
                        return Err(PackError::ListedTwice {
                            pack: d.digest.clone(),
                        }
                        .into());
                    }
                    return Ok(());
                }
                let slots =
                    pack::parse_slots(text, self.slots_left).map_err(|error| PackError::Index {
                        pack: d.digest.clone(),
                        error,
                    })?;
                self.slots_left -= slots.len();
                self.seen.insert(digest, self.carriers.packs.len());
                self.carriers.packs.push(PackRef {
                    digest,
                    size: d.size,
                    slots,
                });
            }
            other => {
                return Err(RecordError::LayerMediaType {
                    layer: d.digest.clone(),
                    media_type: other.to_string(),
                }
                .into())
            }
        }
        Ok(())
    }
}

/// An image manifest's config descriptor, which must be a cestore manifest.
fn check_config(part: &Document) -> Result<&mapping::Descriptor> {
    let c = part.config.as_ref().ok_or(RecordError::NoConfig)?;
    if c.media_type != mapping::CONFIG_MEDIA_TYPE {
        return Err(RecordError::ConfigMediaType {
            found: c.media_type.clone(),
        }
        .into());
    }
    Ok(c)
}

/// Checks that the snapshot a tag promises is the one its record names.
fn check_promise(promised: Option<ManifestDigest>, snapshot: ManifestDigest) -> Result<()> {
    match promised {
        Some(p) if p != snapshot => Err(Mismatch::TagManifest { tag: p, snapshot }.into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_layer_that_is_no_content_is_refused_as_it_is_read() {
        use crate::profile::ce::manifest::{Entry, Manifest};
        let manifest = Manifest::new(vec![Entry {
            executable: false,
            path: "a.md".into(),
            sha256: ObjectId::of(b"a"),
            size: 1,
        }]);
        let raw = |id: ObjectId| mapping::Descriptor {
            media_type: mapping::LAYER_MEDIA_TYPE.into(),
            artifact_type: None,
            digest: format!("sha256:{id}"),
            size: 1,
            annotations: Default::default(),
        };
        let mut c = Collector::new(&manifest);
        c.add(&raw(ObjectId::of(b"a"))).unwrap();
        for i in 0..3u8 {
            let e = c.add(&raw(ObjectId::of(&[i, 0xff]))).unwrap_err();
            assert!(e.to_string().contains("no content of the snapshot"), "{e}");
        }
        assert_eq!(c.carriers.raw.len(), 1);
    }

    #[test]
    fn parses_addresses() {
        let (a, r) = Address::parse("127.0.0.1:5000/cestore/ce").unwrap();
        assert_eq!(a.registry, "127.0.0.1:5000");
        assert_eq!(a.repository, "cestore/ce");
        assert_eq!(r, None);
        let (_, r) = Address::parse("reg.example/ce:sha256-abc").unwrap();
        assert_eq!(r, Some(SnapshotRef::Tag("sha256-abc".into())));
        let hex = "A".repeat(64);
        let (a, r) = Address::parse(&format!("localhost:5000/a/b@sha256:{hex}")).unwrap();
        assert_eq!(a.repository, "a/b");
        assert_eq!(
            r,
            Some(SnapshotRef::Digest("a".repeat(64).parse().unwrap()))
        );
        for bad in [
            "noslash",
            "reg/",
            "reg/UPPER",
            "reg/a//b",
            "reg/a@sha256:xyz",
            "reg/a:bad tag",
            "reg/-a",
        ] {
            assert!(Address::parse(bad).is_err(), "{bad}");
        }
        for hostile in [
            "u:S3CRET@reg.example/ce:1.0.0",
            "https://u:S3CRET@reg.example/ce",
            "reg.example/ce:1.0.0?token=S3CRET",
        ] {
            let err = Address::parse(hostile).unwrap_err().to_string();
            assert!(!err.contains("S3CRET"), "{err}");
            let err = crate::remote::open(hostile, &crate::remote::Options::default())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(!err.contains("S3CRET"), "{err}");
        }
    }
}
