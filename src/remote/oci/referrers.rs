//! Attestations as OCI referrers: each one an artifact whose `subject` is
//! the snapshot's record, found again through the referrers API or, where a
//! registry has none, the referrers tag schema.
//!
//! An attestation is a DSSE envelope that cestore moves as opaque bytes. It
//! travels as an OCI image manifest of artifact type
//! [`ATTESTATION_ARTIFACT_TYPE`] with the empty config (`{}`), one layer,
//! the envelope ([`DSSE_MEDIA_TYPE`]), and a `subject` naming the record
//! that holds the snapshot (its image manifest, or its index). The bytes are
//! serialised from typed documents in a fixed order, so the same attestation beside the
//! same record always has the same digest, and a second push changes
//! nothing.
//!
//! A registry with the OCI 1.1 referrers API lists such a manifest among
//! the record's referrers by itself (its answer to the `PUT` names the
//! subject in `OCI-Subject`, and `GET /v2/<name>/referrers/<digest>`
//! answers `200`). A registry without it, as the CNCF distribution 2.x is,
//! gets the referrers tag schema: the tag `sha256-<hex of the record's
//! digest>` holds an image index listing every referrer, read, added to and
//! written back. That tag never names a snapshot: cestore's snapshot tag
//! is `sha256-<hex of the canonical manifest's digest>`, and the record's
//! bytes (OCI JSON that names that digest) are never the canonical
//! manifest's, so the two values differ unless SHA-256 collides.

use std::collections::{BTreeMap, BTreeSet};

use super::mapping::{self, oci_digest, to_json, Descriptor, Document, ImageIndex, ImageManifest};
use super::OciRemote;
use crate::digest::{ManifestDigest, ObjectId};
use crate::error::Result;
use crate::remote::{Mismatch, NotIndex, ReferrersError, RemoteError};
use crate::sign::limits;

/// The artifact type of an attestation beside a cestore snapshot.
///
/// Cosign's referrers carry Sigstore bundles (and its own artifact type),
/// which an envelope on its own is not; an attestation here is a bare DSSE
/// envelope, so cestore names the artifact in its own namespace and gives
/// the layer the DSSE media type, as cosign's attestation layers have.
pub const ATTESTATION_ARTIFACT_TYPE: &str = "application/vnd.dev.cestore.attestation.v1+json";
/// The media type of the layer that holds the envelope.
pub const DSSE_MEDIA_TYPE: &str = "application/vnd.dsse.envelope.v1+json";
/// The media type of the empty config an artifact has.
pub const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The empty config's bytes.
pub const EMPTY_CONFIG: &[u8] = b"{}";

/// The record a referrer refers to: its media type, digest and size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    /// An image manifest's or an index's media type.
    pub media_type: String,
    /// The record's digest.
    pub digest: ObjectId,
    /// The record's size in bytes.
    pub size: u64,
}

/// What a push of attestations did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attached {
    /// Artifact manifests this push put.
    pub pushed: u64,
    /// Artifact manifests the registry already held.
    pub present: u64,
}

/// The referrers tag of a record: `sha256-<hex of its digest>`.
pub fn referrers_tag(subject: &ObjectId) -> String {
    format!("sha256-{subject}")
}

/// The artifact manifest of one attestation (an envelope whose SHA-256 is
/// `envelope` and size `size`) beside the record `subject`, which holds
/// `snapshot`.
pub fn artifact_manifest(
    subject: &Subject,
    envelope: &ObjectId,
    size: u64,
    snapshot: &ManifestDigest,
) -> Vec<u8> {
    to_json(&ImageManifest {
        schema_version: 2,
        media_type: mapping::MANIFEST_MEDIA_TYPE,
        artifact_type: ATTESTATION_ARTIFACT_TYPE,
        config: descriptor(
            EMPTY_MEDIA_TYPE,
            &ObjectId::of(EMPTY_CONFIG),
            EMPTY_CONFIG.len() as u64,
        ),
        layers: &[descriptor(DSSE_MEDIA_TYPE, envelope, size)],
        subject: Some(descriptor(
            &subject.media_type,
            &subject.digest,
            subject.size,
        )),
        annotations: BTreeMap::from([(mapping::SNAPSHOT_ANNOTATION, snapshot.to_hex())]),
    })
}

/// A descriptor without artifact type or annotations.
fn descriptor(media_type: &str, id: &ObjectId, size: u64) -> Descriptor {
    Descriptor {
        media_type: media_type.into(),
        artifact_type: None,
        digest: oci_digest(id),
        size,
        annotations: BTreeMap::new(),
    }
}

/// The descriptor of an artifact manifest, as a referrers index lists it:
/// media type, artifact type, digest, size and the manifest's annotations.
pub fn index_entry(manifest: &[u8], snapshot: &ManifestDigest) -> Descriptor {
    Descriptor {
        artifact_type: Some(ATTESTATION_ARTIFACT_TYPE.into()),
        annotations: BTreeMap::from([(mapping::SNAPSHOT_ANNOTATION.into(), snapshot.to_hex())]),
        ..descriptor(
            mapping::MANIFEST_MEDIA_TYPE,
            &ObjectId::of(manifest),
            manifest.len() as u64,
        )
    }
}

/// An entry of a referrers index: one listed already, as another tool (or
/// cestore) wrote it, or one this push adds.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Listed<'a> {
    /// Already listed: written back as read (its keys sorted).
    Kept(serde_json::Value),
    /// Added.
    Added(&'a Descriptor),
}

/// Adds descriptors (each its manifest's digest and the descriptor
/// [`index_entry`] makes) to the referrers index `existing` holds, or
/// to an empty one: every descriptor already listed stays as it is, in its
/// place, and each new one is appended, once. Returns the new index, or
/// `None` when every descriptor was listed already (nothing to write).
///
/// An index another tool wrote keeps its other fields (its annotations, say)
/// after `schemaVersion`, `mediaType` and `manifests`.
pub fn merge_index(
    existing: Option<&[u8]>,
    entries: &[(ObjectId, Descriptor)],
) -> std::result::Result<Option<Vec<u8>>, RemoteError> {
    let not_index = |why: NotIndex| ReferrersError::NotIndex { why };
    let (listed, others) = match existing {
        None => (Vec::new(), serde_json::Map::new()),
        Some(bytes) => {
            let value: serde_json::Value =
                serde_json::from_slice(bytes).map_err(|e| not_index(NotIndex::Json(e)))?;
            let serde_json::Value::Object(mut map) = value else {
                return Err(not_index(NotIndex::NotObject).into());
            };
            if map.get("schemaVersion") != Some(&serde_json::Value::from(2)) {
                return Err(not_index(NotIndex::SchemaVersion).into());
            }
            if let Some(t) = map.get("mediaType") {
                if t.as_str() != Some(mapping::INDEX_MEDIA_TYPE) {
                    return Err(not_index(NotIndex::MediaType(t.clone())).into());
                }
            }
            let listed = match map.remove("manifests") {
                None => Vec::new(),
                Some(serde_json::Value::Array(list)) => list,
                Some(_) => return Err(not_index(NotIndex::ManifestsNotList).into()),
            };
            map.remove("schemaVersion");
            map.remove("mediaType");
            (listed, map)
        }
    };
    let mut known: BTreeSet<ObjectId> = BTreeSet::new();
    for d in &listed {
        let digest = d
            .get("digest")
            .and_then(|v| v.as_str())
            .ok_or_else(|| not_index(NotIndex::NoDigest))?;
        known.insert(mapping::parse_digest(digest)?);
    }
    let added: Vec<Listed<'_>> = entries
        .iter()
        .filter(|(id, _)| known.insert(*id))
        .map(|(_, d)| Listed::Added(d))
        .collect();
    if added.is_empty() {
        return Ok(None);
    }
    let out = to_json(&ImageIndex {
        schema_version: 2,
        media_type: mapping::INDEX_MEDIA_TYPE,
        artifact_type: None,
        manifests: listed.into_iter().map(Listed::Kept).chain(added).collect(),
        annotations: None,
        others,
    });
    if out.len() > mapping::MAX_MANIFEST_BYTES {
        return Err(ReferrersError::IndexTooLarge {
            bytes: out.len(),
            max: mapping::MAX_MANIFEST_BYTES,
        }
        .into());
    }
    Ok(Some(out))
}

/// The digests of the attestation manifests a referrers list names (pages
/// of the referrers API, or the referrers tag's index), each once, in
/// order. Referrers of other kinds (signatures, SBOMs, …) are left out.
pub fn listed_attestations(pages: &[Vec<u8>]) -> std::result::Result<Vec<ObjectId>, RemoteError> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for page in pages {
        let doc = Document::parse(page).map_err(|error| ReferrersError::List { error })?;
        for d in doc.manifests.unwrap_or_default() {
            if d.artifact_type.as_deref() != Some(ATTESTATION_ARTIFACT_TYPE) {
                continue;
            }
            let id = mapping::parse_digest(&d.digest)?;
            if seen.insert(id) {
                out.push(id);
            }
        }
    }
    limits::check_count(out.len()).map_err(ReferrersError::Listed)?;
    Ok(out)
}

impl OciRemote {
    /// Publishes attestations beside the record `subject`, which holds
    /// `snapshot`: the empty config and each envelope as blobs, then each
    /// artifact manifest by its digest (unless the registry holds it), then,
    /// where the registry has no referrers API, the referrers tag's index.
    pub(super) fn attach(
        &self,
        subject: &Subject,
        snapshot: &ManifestDigest,
        attestations: &[Vec<u8>],
    ) -> Result<Attached> {
        let mut attached = Attached::default();
        if attestations.is_empty() {
            return Ok(attached);
        }
        crate::sign::limits::check(attestations)?;
        let client = &self.client;
        let empty = ObjectId::of(EMPTY_CONFIG);
        if !client.has_blob(&empty)? {
            client.put_blob(&empty, EMPTY_CONFIG)?;
        }
        let mut entries: Vec<(ObjectId, Descriptor)> = Vec::with_capacity(attestations.len());
        let mut registered = false;
        let subject_digest = format!("sha256:{}", subject.digest);
        for envelope in attestations {
            let id = ObjectId::of(envelope);
            let manifest = artifact_manifest(subject, &id, envelope.len() as u64, snapshot);
            let manifest_id = ObjectId::of(&manifest);
            if entries.iter().any(|(known, _)| *known == manifest_id) {
                continue;
            }
            let reference = format!("sha256:{manifest_id}");
            if client.has_manifest(&reference)? {
                attached.present += 1;
            } else {
                if !client.has_blob(&id)? {
                    client.put_blob(&id, envelope)?;
                }
                let answer = client.put_manifest_answer(
                    &reference,
                    mapping::MANIFEST_MEDIA_TYPE,
                    &manifest,
                )?;
                registered |= answer.as_deref() == Some(subject_digest.as_str());
                attached.pushed += 1;
            }
            entries.push((manifest_id, index_entry(&manifest, snapshot)));
        }
        if registered
            || client
                .get_referrers(&subject.digest, mapping::MAX_MANIFEST_BYTES)?
                .is_some()
        {
            return Ok(attached);
        }
        let tag = referrers_tag(&subject.digest);
        let existing = client.get_manifest(&tag, mapping::MAX_MANIFEST_BYTES)?;
        if let Some(index) = merge_index(existing.as_deref(), &entries)? {
            client.put_manifest(&tag, mapping::INDEX_MEDIA_TYPE, &index)?;
        }
        Ok(attached)
    }

    /// The attestations beside the record `subject`: its referrers of the
    /// attestation type (through the referrers API, else the referrers
    /// tag; none when neither lists any), each manifest checked against its
    /// digest and its envelope against its descriptor (at most
    /// [`MAX_ATTESTATION_BYTES`](limits::MAX_ATTESTATION_BYTES)). A referrer that names another subject is
    /// not one of this record's and is left out; each envelope comes once.
    pub(super) fn attestations_of(&self, subject: &ObjectId) -> Result<Vec<Vec<u8>>> {
        let client = &self.client;
        let pages = match client.get_referrers(subject, mapping::MAX_MANIFEST_BYTES)? {
            Some(pages) => pages,
            None => client
                .get_manifest(&referrers_tag(subject), mapping::MAX_MANIFEST_BYTES)?
                .into_iter()
                .collect(),
        };
        let mut envelopes = Vec::new();
        let mut seen = BTreeSet::new();
        for id in listed_attestations(&pages)? {
            let bytes = client
                .get_manifest(&format!("sha256:{id}"), mapping::MAX_MANIFEST_BYTES)?
                .ok_or(ReferrersError::Missing {
                    subject: *subject,
                    attestation: id,
                })?;
            if ObjectId::of(&bytes) != id {
                return Err(Mismatch::Attestation {
                    attestation: id,
                    found: ObjectId::of(&bytes),
                }
                .into());
            }
            let doc = Document::parse(&bytes)?;
            let ours = doc
                .subject
                .as_ref()
                .is_some_and(|s| mapping::parse_digest(&s.digest).ok() == Some(*subject));
            if !ours || doc.artifact_type.as_deref() != Some(ATTESTATION_ARTIFACT_TYPE) {
                continue;
            }
            let [layer] = &doc.layers[..] else {
                return Err(ReferrersError::Layers {
                    attestation: id,
                    layers: doc.layers.len(),
                }
                .into());
            };
            if layer.media_type != DSSE_MEDIA_TYPE {
                return Err(ReferrersError::LayerMediaType {
                    attestation: id,
                    media_type: layer.media_type.clone(),
                }
                .into());
            }
            limits::check_size(layer.size).map_err(|limit| ReferrersError::Envelope {
                attestation: id,
                limit,
            })?;
            let blob = mapping::parse_digest(&layer.digest)?;
            if !seen.insert(blob) {
                continue;
            }
            let envelope = client.get_blob(&blob, layer.size)?;
            if envelope.len() as u64 != layer.size || ObjectId::of(&envelope) != blob {
                return Err(Mismatch::Envelope {
                    envelope: blob,
                    attestation: id,
                }
                .into());
            }
            envelopes.push(envelope);
        }
        Ok(envelopes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject() -> Subject {
        Subject {
            media_type: mapping::MANIFEST_MEDIA_TYPE.into(),
            digest: ObjectId::of(b"record"),
            size: 1234,
        }
    }

    fn entry(envelope: &[u8]) -> (ObjectId, Descriptor) {
        let snapshot = ManifestDigest::of(b"manifest");
        let m = artifact_manifest(
            &subject(),
            &ObjectId::of(envelope),
            envelope.len() as u64,
            &snapshot,
        );
        (ObjectId::of(&m), index_entry(&m, &snapshot))
    }

    #[test]
    fn an_attestation_is_an_artifact_with_the_empty_config_one_envelope_and_a_subject() {
        let snapshot = ManifestDigest::of(b"manifest");
        let envelope = br#"{"payloadType":"application/vnd.in-toto+json"}"#;
        let m = artifact_manifest(
            &subject(),
            &ObjectId::of(envelope),
            envelope.len() as u64,
            &snapshot,
        );
        assert_eq!(
            m,
            artifact_manifest(
                &subject(),
                &ObjectId::of(envelope),
                envelope.len() as u64,
                &snapshot
            ),
            "the same attestation gives the same bytes"
        );
        let v: serde_json::Value = serde_json::from_slice(&m).unwrap();
        assert_eq!(v["artifactType"], ATTESTATION_ARTIFACT_TYPE);
        assert_eq!(v["config"]["mediaType"], EMPTY_MEDIA_TYPE);
        assert_eq!(
            v["config"]["digest"],
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(v["config"]["size"], 2);
        assert_eq!(v["layers"][0]["mediaType"], DSSE_MEDIA_TYPE);
        assert_eq!(
            v["layers"][0]["digest"],
            format!("sha256:{}", ObjectId::of(envelope))
        );
        assert_eq!(
            v["subject"]["digest"],
            format!("sha256:{}", subject().digest)
        );
        assert_eq!(v["subject"]["size"], 1234);
        assert_eq!(
            v["annotations"][mapping::SNAPSHOT_ANNOTATION],
            snapshot.to_hex()
        );
        let doc = Document::parse(&m).unwrap();
        assert_eq!(doc.layers.len(), 1);
        assert!(doc.subject.is_some());
        let e = serde_json::to_value(index_entry(&m, &snapshot)).unwrap();
        assert_eq!(e["digest"], format!("sha256:{}", ObjectId::of(&m)));
        assert_eq!(e["size"], m.len());
        assert_eq!(e["artifactType"], ATTESTATION_ARTIFACT_TYPE);
        assert_ne!(
            referrers_tag(&subject().digest),
            crate::remote::snapshot_tag(&snapshot)
        );
    }

    #[test]
    fn merging_adds_each_referrer_once_and_keeps_the_others() {
        let (a, b) = (entry(b"one"), entry(b"two"));
        assert_eq!(merge_index(None, &[]).unwrap(), None);
        let first = merge_index(None, &[a.clone(), b.clone(), a.clone()])
            .unwrap()
            .unwrap();
        let listed = listed_attestations(std::slice::from_ref(&first)).unwrap();
        assert_eq!(listed, [a.0, b.0]);
        assert!(first.starts_with(
            b"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":["
        ));
        // Again: nothing to write.
        assert_eq!(
            merge_index(Some(&first), &[b.clone(), a.clone()]).unwrap(),
            None
        );
        // Another tool's referrer and fields stay, in their place.
        let foreign = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.cncf.notary.signature","digest":"sha256:{}","size":7}}],"annotations":{{"k":"v"}}}}"#,
            ObjectId::of(b"sig")
        );
        let merged = merge_index(Some(foreign.as_bytes()), std::slice::from_ref(&a))
            .unwrap()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&merged).unwrap();
        let manifests = v["manifests"].as_array().unwrap();
        assert_eq!(manifests.len(), 2);
        assert_eq!(
            manifests[0]["artifactType"],
            "application/vnd.cncf.notary.signature"
        );
        assert_eq!(manifests[1]["digest"], format!("sha256:{}", a.0));
        assert_eq!(v["annotations"]["k"], "v");
        assert_eq!(
            listed_attestations(std::slice::from_ref(&merged)).unwrap(),
            [a.0]
        );
        assert_eq!(merge_index(Some(&merged), &[a]).unwrap(), None);
        // A tag that holds something else is not taken for an index.
        for bad in [
            &b"not json"[..],
            br#"[1]"#,
            br#"{"schemaVersion":1,"manifests":[]}"#,
            br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}"#,
            br#"{"schemaVersion":2,"manifests":{}}"#,
            br#"{"schemaVersion":2,"manifests":[{"size":1}]}"#,
        ] {
            assert!(merge_index(Some(bad), std::slice::from_ref(&b)).is_err());
        }
        // An empty index gains its first referrer.
        let empty = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
        let one = merge_index(Some(empty), std::slice::from_ref(&b))
            .unwrap()
            .unwrap();
        assert_eq!(listed_attestations(&[one]).unwrap(), [b.0]);
    }

    #[test]
    fn too_many_attestations_are_refused() {
        let entries: Vec<_> = (0..=limits::MAX_ATTESTATIONS)
            .map(|i| entry(format!("e{i}").as_bytes()))
            .collect();
        let index = merge_index(None, &entries).unwrap().unwrap();
        assert!(listed_attestations(&[index]).is_err());
    }
}
