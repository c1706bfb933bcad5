//! The mapping of a snapshot onto OCI image manifests, serialised from typed
//! documents so that the same snapshot always gives the same bytes (and so
//! the same digests): fixed key order (fields in declaration order, map keys
//! sorted), no white space, and no time but the snapshot's first ingest,
//! which a push does not change.
//!
//! The standard annotations (`org.opencontainers.image.version`, `.created`,
//! `.source`, `.revision`) say what any OCI tool can read; the full source
//! records travel in `dev.cestore.sources`, an annotation rather than the
//! config, whose bytes are the canonical manifest and must hash to the
//! snapshot's digest. Every value comes from what the store keeps of the
//! snapshot (its version, origin and source records, in a fixed order), so
//! a push of the same store state publishes the same manifest.
//!
//! See `docs/remote.md` for the mapping in prose.

use std::collections::BTreeMap;

use crate::digest::ObjectId;
use crate::remote::{pack, Format, Outgoing, RecordError};
use crate::source::carried;
use crate::source::record::{redact_url, SourceEntry, Via};
use crate::store::ingest::adopt::AdoptError;

/// The OCI image manifest media type.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The OCI image index media type.
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// The artifact type of a cestore snapshot in format 1 (one layer per file).
pub const ARTIFACT_TYPE: &str = "application/vnd.cestore.snapshot.v1";
/// The artifact type of a cestore snapshot in format 2 (packs).
pub const ARTIFACT_TYPE_V2: &str = "application/vnd.cestore.snapshot.v2";
/// The config's media type: the config blob is the canonical manifest.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.cestore.manifest.v1+json";
/// A layer's media type: one file content, raw bytes.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.cestore.file.v1";
/// A pack's media type: an uncompressed tar of objects named by their SHA-256.
pub const PACK_MEDIA_TYPE: &str = "application/vnd.cestore.pack.v1.tar";
/// The pack annotation indexing its objects: `<hex>:<offset>:<size>`,
/// comma-separated, in pack order.
pub const PACK_ANNOTATION: &str = "dev.cestore.pack";
/// The layer annotation naming a path that uses the content.
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";
/// The layer annotation carrying the exec bit, `"true"` or `"false"`.
pub const EXECUTABLE_ANNOTATION: &str = "dev.cestore.executable";
/// The manifest annotation carrying the snapshot's digest in hex.
pub const SNAPSHOT_ANNOTATION: &str = "dev.cestore.snapshot";
/// The annotation numbering the parts of an index, `"i/n"`.
pub const PART_ANNOTATION: &str = "dev.cestore.part";
/// The manifest annotation carrying the release version.
pub const VERSION_ANNOTATION: &str = "org.opencontainers.image.version";
/// The annotation that carries where the snapshot was first ingested, as a
/// JSON object `{at, host, user, source, tool_version}`.
pub const ORIGIN_ANNOTATION: &str = "dev.cestore.origin";
/// The manifest annotation carrying when the snapshot was first ingested
/// (RFC 3339).
pub const CREATED_ANNOTATION: &str = "org.opencontainers.image.created";
/// The manifest annotation carrying the repository of the snapshot's newest
/// source record that names a commit.
pub const SOURCE_ANNOTATION: &str = "org.opencontainers.image.source";
/// The manifest annotation carrying that record's commit.
pub const REVISION_ANNOTATION: &str = "org.opencontainers.image.revision";
/// The manifest annotation carrying the snapshot's source records, as a
/// JSON list of `{at, record}` (see [`crate::source::carried`]).
pub const SOURCES_ANNOTATION: &str = "dev.cestore.sources";
/// The largest manifest the CNCF distribution registry accepts (and most
/// hosted registries): 4 MiB.
pub const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;

/// What a push publishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// One image manifest, tagged, and how many layers it lists.
    Single(Vec<u8>, usize),
    /// Several image manifests, each pushed by digest, then an index of them, tagged.
    Index {
        /// The image manifests.
        parts: Vec<Vec<u8>>,
        /// The index.
        index: Vec<u8>,
        /// How many layers the parts list together.
        layers: usize,
    },
}

/// The JSON bytes of a document cestore writes: compact, its fields in
/// declaration order, its maps' keys sorted, strings escaped as serde_json
/// escapes them, so the same document always gives the same bytes.
pub(super) fn to_json(doc: &impl serde::Serialize) -> Vec<u8> {
    // Every document written is structs, strings, integers and maps with
    // string keys, which serde_json writes into a Vec without error.
    serde_json::to_vec(doc).unwrap_or_default()
}

/// `sha256:<hex>`, as a descriptor names a digest.
pub(super) fn oci_digest(id: &ObjectId) -> String {
    format!("sha256:{id}")
}

/// An image manifest as cestore writes it (a snapshot's, or an
/// attestation's artifact manifest).
#[derive(serde::Serialize)]
pub(super) struct ImageManifest<'a> {
    /// Always 2.
    #[serde(rename = "schemaVersion")]
    pub schema_version: u32,
    /// [`MANIFEST_MEDIA_TYPE`].
    #[serde(rename = "mediaType")]
    pub media_type: &'static str,
    /// What the artifact is.
    #[serde(rename = "artifactType")]
    pub artifact_type: &'static str,
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: &'a [Descriptor],
    /// The record it refers to, for a referrer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<Descriptor>,
    /// Its annotations.
    pub annotations: BTreeMap<&'static str, String>,
}

/// An image index as cestore writes it (a snapshot's parts, or the
/// referrers tag's index, whose entries may be another tool's).
#[derive(serde::Serialize)]
pub(super) struct ImageIndex<T> {
    /// Always 2.
    #[serde(rename = "schemaVersion")]
    pub schema_version: u32,
    /// [`INDEX_MEDIA_TYPE`].
    #[serde(rename = "mediaType")]
    pub media_type: &'static str,
    /// What the artifact is, for a snapshot's index.
    #[serde(rename = "artifactType", skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<&'static str>,
    /// The manifests it lists.
    pub manifests: Vec<T>,
    /// Its annotations, for a snapshot's index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<&'static str, String>>,
    /// Another tool's fields of a referrers index, kept after these.
    #[serde(flatten)]
    pub others: serde_json::Map<String, serde_json::Value>,
}

/// The artifact type of a format.
pub fn artifact_type(format: Format) -> &'static str {
    match format {
        Format::V1 => ARTIFACT_TYPE,
        Format::V2 => ARTIFACT_TYPE_V2,
    }
}

/// The layer descriptors of a snapshot: in format 1, one per distinct object
/// (content and exec bit) in manifest order of first use; in format 2, one
/// per pack, then one per raw content.
pub fn layers(outgoing: &Outgoing<'_>) -> Vec<Descriptor> {
    match outgoing.format {
        Format::V1 => layers_v1(outgoing),
        Format::V2 => layers_v2(outgoing),
    }
}

fn descriptor(
    media_type: &str,
    id: &ObjectId,
    size: u64,
    annotations: BTreeMap<String, String>,
) -> Descriptor {
    Descriptor {
        media_type: media_type.into(),
        artifact_type: None,
        digest: oci_digest(id),
        size,
        annotations,
    }
}

fn layers_v2(outgoing: &Outgoing<'_>) -> Vec<Descriptor> {
    let packs = outgoing.packs.iter().map(|p| {
        let index = BTreeMap::from([(PACK_ANNOTATION.into(), pack::format_slots(&p.slots))]);
        descriptor(PACK_MEDIA_TYPE, &p.digest, p.size, index)
    });
    let raw = outgoing.raw.iter().map(|r| {
        let title = BTreeMap::from([(TITLE_ANNOTATION.into(), r.path.clone())]);
        descriptor(LAYER_MEDIA_TYPE, &r.key.id, r.size, title)
    });
    packs.chain(raw).collect()
}

fn layers_v1(outgoing: &Outgoing<'_>) -> Vec<Descriptor> {
    outgoing
        .objects
        .iter()
        .map(|o| {
            let annotations = BTreeMap::from([
                (EXECUTABLE_ANNOTATION.into(), o.key.executable.to_string()),
                (TITLE_ANNOTATION.into(), o.path.clone()),
            ]);
            descriptor(LAYER_MEDIA_TYPE, &o.key.id, o.size, annotations)
        })
        .collect()
}

fn manifest_annotations(
    outgoing: &Outgoing<'_>,
    part: Option<(usize, usize)>,
) -> BTreeMap<&'static str, String> {
    let mut a = BTreeMap::from([
        (SNAPSHOT_ANNOTATION, outgoing.manifest.digest.to_hex()),
        (VERSION_ANNOTATION, outgoing.version.to_string()),
    ]);
    if let Some(origin) = &outgoing.origin {
        if let Ok(json) = serde_json::to_string(origin) {
            a.insert(ORIGIN_ANNOTATION, json);
        }
    }
    if let Some(created) = &outgoing.created {
        a.insert(CREATED_ANNOTATION, created.clone());
    }
    if let Some(record) = carried::newest_with_commit(&outgoing.sources) {
        a.insert(SOURCE_ANNOTATION, redact_url(&record.repository));
        if let Some(commit) = &record.commit {
            a.insert(REVISION_ANNOTATION, commit.clone());
        }
    }
    if let Some(json) = carried::to_json(&outgoing.sources) {
        a.insert(SOURCES_ANNOTATION, json);
    }
    if let Some((i, n)) = part {
        a.insert(PART_ANNOTATION, format!("{i}/{n}"));
    }
    a
}

/// An image manifest holding `layers`, whose config is the canonical manifest.
pub fn image_manifest(
    outgoing: &Outgoing<'_>,
    layers: &[Descriptor],
    part: Option<(usize, usize)>,
) -> Vec<u8> {
    let m = outgoing.manifest;
    to_json(&ImageManifest {
        schema_version: 2,
        media_type: MANIFEST_MEDIA_TYPE,
        artifact_type: artifact_type(outgoing.format),
        config: descriptor(
            CONFIG_MEDIA_TYPE,
            &ObjectId::from_bytes(*m.digest.as_bytes()),
            m.bytes.len() as u64,
            BTreeMap::new(),
        ),
        layers,
        subject: None,
        annotations: manifest_annotations(outgoing, part),
    })
}

/// An index of the image manifests `parts`.
pub fn index(outgoing: &Outgoing<'_>, parts: &[Vec<u8>]) -> Vec<u8> {
    let n = parts.len();
    let artifact_type = artifact_type(outgoing.format);
    let manifests = parts
        .iter()
        .enumerate()
        .map(|(i, p)| Descriptor {
            artifact_type: Some(artifact_type.into()),
            ..descriptor(
                MANIFEST_MEDIA_TYPE,
                &ObjectId::of(p),
                p.len() as u64,
                BTreeMap::from([(PART_ANNOTATION.into(), format!("{}/{n}", i + 1))]),
            )
        })
        .collect();
    to_json(&ImageIndex {
        schema_version: 2,
        media_type: INDEX_MEDIA_TYPE,
        artifact_type: Some(artifact_type),
        manifests,
        annotations: Some(manifest_annotations(outgoing, None)),
        others: serde_json::Map::new(),
    })
}

/// Decides between one image manifest and an index: one manifest when it
/// lists at most `max_layers` layers and stays within `max_bytes`, else an
/// index of manifests that each do.
pub fn plan(outgoing: &Outgoing<'_>, max_layers: usize, max_bytes: usize) -> Plan {
    let layers = layers(outgoing);
    let max_layers = max_layers.max(1);
    if layers.len() <= max_layers {
        let single = image_manifest(outgoing, &layers, None);
        if single.len() <= max_bytes {
            return Plan::Single(single, layers.len());
        }
    }
    // The part annotation is at most a few dozen bytes; 1 KiB of slack covers it.
    let overhead = image_manifest(outgoing, &[], None).len() + 1024;
    let mut groups: Vec<Vec<Descriptor>> = Vec::new();
    let mut current: Vec<Descriptor> = Vec::new();
    let mut bytes = overhead;
    for l in layers {
        let len = to_json(&l).len();
        if !current.is_empty() && (current.len() >= max_layers || bytes + len + 1 > max_bytes) {
            groups.push(std::mem::take(&mut current));
            bytes = overhead;
        }
        bytes += len + 1;
        current.push(l);
    }
    if !current.is_empty() || groups.is_empty() {
        groups.push(current);
    }
    let n = groups.len();
    let layer_count = groups.iter().map(Vec::len).sum();
    let parts: Vec<Vec<u8>> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| image_manifest(outgoing, g, Some((i + 1, n))))
        .collect();
    let index = index(outgoing, &parts);
    Plan::Index {
        parts,
        index,
        layers: layer_count,
    }
}

/// A descriptor, as read from a registry and as cestore writes it (in this
/// field order, without an absent artifact type or empty annotations).
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
pub struct Descriptor {
    /// Its media type.
    #[serde(rename = "mediaType", default)]
    pub media_type: String,
    /// The artifact type of the manifest it names, when it says (in an
    /// index, and in a list of referrers).
    #[serde(
        rename = "artifactType",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub artifact_type: Option<String>,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Its size.
    pub size: u64,
    /// Its annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An image manifest or an index, as read from a registry.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Document {
    /// Must be 2.
    #[serde(rename = "schemaVersion")]
    pub schema_version: u32,
    /// The media type, when the document names it.
    #[serde(rename = "mediaType", default)]
    pub media_type: Option<String>,
    /// The artifact type, when the document names it.
    #[serde(rename = "artifactType", default)]
    pub artifact_type: Option<String>,
    /// An image manifest's config.
    #[serde(default)]
    pub config: Option<Descriptor>,
    /// An image manifest's layers.
    #[serde(default)]
    pub layers: Vec<Descriptor>,
    /// An index's manifests.
    #[serde(default)]
    pub manifests: Option<Vec<Descriptor>>,
    /// The manifest this one refers to, when it is a referrer (an
    /// attestation beside a snapshot).
    #[serde(default)]
    pub subject: Option<Descriptor>,
    /// Its annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

impl Document {
    /// Where the snapshot was first ingested, when the document says; an
    /// annotation that does not parse says nothing.
    pub fn origin(&self) -> Option<crate::catalogue::Origin> {
        serde_json::from_str(self.annotations.get(ORIGIN_ANNOTATION)?).ok()
    }

    /// The source records the document carries, marked as come from a
    /// registry; none when it carries none.
    ///
    /// Unlike an unreadable origin, which is only left out, an unreadable
    /// records annotation refuses the pull: the records are what an auditor
    /// asks of a snapshot, and a registry that serves a list cestore never
    /// writes (too long, not records) has been tampered with or is not
    /// speaking cestore's mapping, so it is not trusted silently. A newer
    /// cestore's extra fields are no such thing: they are ignored.
    pub fn sources(&self) -> Result<Vec<SourceEntry>, AdoptError> {
        match self.annotations.get(SOURCES_ANNOTATION) {
            None => Ok(Vec::new()),
            Some(json) => carried::from_json(json.as_bytes(), Via::Registry).map_err(|source| {
                AdoptError::Sources {
                    carrier: format!("the registry's annotation {SOURCES_ANNOTATION}"),
                    source,
                }
            }),
        }
    }

    /// Parses a manifest or index, checking its schema version.
    pub fn parse(bytes: &[u8]) -> Result<Document, RecordError> {
        let doc: Document =
            serde_json::from_slice(bytes).map_err(|error| RecordError::NotJson { error })?;
        if doc.schema_version != 2 {
            return Err(RecordError::SchemaVersion {
                found: doc.schema_version,
            });
        }
        Ok(doc)
    }

    /// Whether this is an index.
    pub fn is_index(&self) -> bool {
        self.manifests.is_some() || self.media_type.as_deref() == Some(INDEX_MEDIA_TYPE)
    }
}

/// Parses `sha256:<hex>`.
pub fn parse_digest(s: &str) -> Result<ObjectId, RecordError> {
    ObjectId::from_prefixed(s)
        .ok()
        .ok_or_else(|| RecordError::NotDigest { text: s.into() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ce::manifest::{Entry, Manifest};

    fn manifest(n: usize) -> Manifest {
        let mut entries = vec![Entry {
            executable: false,
            path: crate::profile::ce::fixtures::MANIFEST_FILE.into(),
            sha256: ObjectId::of(b"{}"),
            size: 2,
        }];
        for i in 0..n {
            let body = format!("file {i}");
            entries.push(Entry {
                executable: i % 2 == 0,
                path: format!("skills/s/f{i:04}"),
                sha256: ObjectId::of(body.as_bytes()),
                size: body.len() as u64,
            });
        }
        Manifest::new(entries)
    }

    #[test]
    fn single_manifest_is_reproducible_and_parses() {
        let m = manifest(3);
        let mut out = Outgoing::new(&m, "1.0.0");
        out.format = Format::V1;
        let a = plan(&out, 1000, MAX_MANIFEST_BYTES);
        let b = plan(&out, 1000, MAX_MANIFEST_BYTES);
        assert_eq!(a, b);
        let Plan::Single(bytes, _) = a else {
            panic!("expected one manifest")
        };
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.starts_with("{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"artifactType\":\"application/vnd.cestore.snapshot.v1\",\"config\":{"));
        assert!(!text.contains("created"));
        let doc = Document::parse(&bytes).unwrap();
        assert!(!doc.is_index());
        let config = doc.config.unwrap();
        assert_eq!(
            parse_digest(&config.digest).unwrap().to_hex(),
            m.digest.to_hex()
        );
        assert_eq!(config.size, m.bytes.len() as u64);
        assert_eq!(doc.layers.len(), 4);
        assert_eq!(
            doc.layers[1].annotations[TITLE_ANNOTATION],
            "skills/s/f0000"
        );
        assert_eq!(doc.layers[1].annotations[EXECUTABLE_ANNOTATION], "true");
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["annotations"][SNAPSHOT_ANNOTATION], m.digest.to_hex());
    }

    fn record(at: &str, repository: &str, commit: Option<&str>) -> SourceEntry {
        SourceEntry {
            at: at.into(),
            via: Via::Ingest,
            record: crate::source::SourceRecord {
                read_from: crate::source::ReadFrom::WorkTree,
                path: "plugins/p".into(),
                ..crate::source::SourceRecord::of_commit(repository, commit)
            },
        }
    }

    #[test]
    fn the_standard_annotations_and_the_records_travel_without_credentials() {
        let m = manifest(3);
        let mut out = Outgoing::new(&m, "1.2.3");
        out.format = Format::V1;
        out.created = Some("2026-01-02T03:04:05.678Z".into());
        let commit = "c".repeat(40);
        out.sources = vec![
            // As an older store might have kept it, credentials and all.
            record(
                "2026-01-02T03:04:05.678Z",
                "https://user:token@example.invalid/o/r.git",
                Some(&commit),
            ),
            record("2026-01-01T00:00:00.000Z", "/old", Some(&"a".repeat(40))),
            record("2026-01-03T00:00:00.000Z", "/unborn", None),
        ];
        let Plan::Single(bytes, 4) = plan(&out, 1000, MAX_MANIFEST_BYTES) else {
            panic!("expected one manifest")
        };
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(!text.contains("token") && !text.contains("user:"), "{text}");
        let doc = Document::parse(&bytes).unwrap();
        let a = &doc.annotations;
        assert_eq!(a[VERSION_ANNOTATION], "1.2.3");
        assert_eq!(a[CREATED_ANNOTATION], "2026-01-02T03:04:05.678Z");
        assert_eq!(a[SOURCE_ANNOTATION], "https://example.invalid/o/r.git");
        assert_eq!(a[REVISION_ANNOTATION], commit);
        let back = doc.sources().unwrap();
        assert_eq!(back.len(), 3);
        assert!(back.iter().all(|e| e.via == Via::Registry));
        assert_eq!(back[0].record.repository, "/old");
        assert_eq!(back[1].record.repository, "https://example.invalid/o/r.git");
        // The same records, however this store came to hold them, publish
        // the same manifest.
        let mut again = out.clone();
        again.sources.reverse();
        again.sources[0].via = Via::Bundle;
        assert_eq!(
            plan(&again, 1000, MAX_MANIFEST_BYTES),
            Plan::Single(bytes, 4)
        );
        // An index carries them too, on every part and on the index.
        let Plan::Index { parts, index, .. } = plan(&out, 2, MAX_MANIFEST_BYTES) else {
            panic!("expected an index")
        };
        for d in parts.iter().chain([&index]) {
            let doc = Document::parse(d).unwrap();
            assert_eq!(doc.annotations[REVISION_ANNOTATION], commit);
            assert_eq!(doc.sources().unwrap().len(), 3);
        }
        // Without records: version and created, no source or revision.
        out.sources.clear();
        let Plan::Single(bytes, _) = plan(&out, 1000, MAX_MANIFEST_BYTES) else {
            panic!("expected one manifest")
        };
        let doc = Document::parse(&bytes).unwrap();
        let keys: Vec<&str> = doc.annotations.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [SNAPSHOT_ANNOTATION, CREATED_ANNOTATION, VERSION_ANNOTATION]
        );
        assert!(doc.sources().unwrap().is_empty());
    }

    #[test]
    fn an_unreadable_records_annotation_is_refused() {
        for bad in ["{}", "[{\"at\":1}]", "nonsense"] {
            let text = format!(
                "{{\"schemaVersion\":2,\"annotations\":{{\"{SOURCES_ANNOTATION}\":{}}}}}",
                serde_json::to_string(bad).unwrap()
            );
            let doc = Document::parse(text.as_bytes()).unwrap();
            let err = doc.sources().unwrap_err().to_string();
            assert!(
                err.starts_with("the registry's annotation dev.cestore.sources carries unreadable source records: it is not a list of source records"),
                "{err}"
            );
        }
    }

    #[test]
    fn format_2_lists_packs_with_their_index_then_raw_contents() {
        let mut m = manifest(3);
        m.entries.push(Entry {
            executable: false,
            path: "skills/z/big.bin".into(),
            sha256: ObjectId::of(b"big"),
            size: 300 * 1024,
        });
        let m = Manifest::new(m.entries);
        let mut out = Outgoing::new(&m, "1.0.0");
        let layout = pack::layout(&m);
        assert_eq!((layout.packs.len(), layout.raw.len()), (1, 1));
        let (slots, size) = pack::slots(layout.packs[0].iter().map(|o| (o.key.id, o.size)));
        out.packs.push(pack::PackRef {
            digest: ObjectId::of(b"pack"),
            size,
            slots: slots.clone(),
        });
        out.raw = layout.raw;
        let Plan::Single(bytes, 2) = plan(&out, 1000, MAX_MANIFEST_BYTES) else {
            panic!("expected one manifest of two layers")
        };
        let doc = Document::parse(&bytes).unwrap();
        assert_eq!(doc.artifact_type.as_deref(), Some(ARTIFACT_TYPE_V2));
        assert_eq!(doc.layers[0].media_type, PACK_MEDIA_TYPE);
        assert_eq!(doc.layers[0].size, size);
        let index = &doc.layers[0].annotations[PACK_ANNOTATION];
        assert_eq!(pack::parse_slots(index, 100).unwrap(), slots);
        assert_eq!(doc.layers[1].media_type, LAYER_MEDIA_TYPE);
        assert_eq!(
            doc.layers[1].annotations[TITLE_ANNOTATION],
            "skills/z/big.bin"
        );
        assert_eq!(
            parse_digest(&doc.layers[1].digest).unwrap(),
            ObjectId::of(b"big")
        );
    }

    #[test]
    fn falls_back_to_an_index_by_count_and_by_size() {
        let m = manifest(29);
        let mut out = Outgoing::new(&m, "1.0.0");
        out.format = Format::V1;
        let Plan::Index {
            parts,
            index,
            layers,
        } = plan(&out, 10, MAX_MANIFEST_BYTES)
        else {
            panic!("expected an index")
        };
        assert_eq!(parts.len(), 3);
        assert_eq!(layers, 30);
        let doc = Document::parse(&index).unwrap();
        assert!(doc.is_index());
        let listed = doc.manifests.unwrap();
        assert_eq!(listed.len(), 3);
        for (d, p) in listed.iter().zip(&parts) {
            assert_eq!(parse_digest(&d.digest).unwrap(), ObjectId::of(p));
            assert!(Document::parse(p).unwrap().layers.len() <= 10);
        }
        let Plan::Index { parts, .. } = plan(&out, 1000, 3000) else {
            panic!("expected an index")
        };
        assert!(parts.len() > 1);
        assert!(parts.iter().all(|p| p.len() <= 3000));
    }
}
