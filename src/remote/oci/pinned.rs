//! The exact bytes of every OCI JSON document a push writes, pinned: the
//! digests of the manifests a registry holds depend on them, so a change of
//! how they are built must not change one byte.

use super::mapping::{self, plan, Plan, MAX_MANIFEST_BYTES};
use super::referrers::{artifact_manifest, index_entry, merge_index, Subject, EMPTY_CONFIG};
use crate::digest::{ManifestDigest, ObjectId};
use crate::profile::ce::manifest::{Entry, Manifest};
use crate::remote::{pack, Format, Outgoing};
use crate::source::record::{SourceEntry, Via};

fn manifest() -> Manifest {
    Manifest::new(vec![
        Entry {
            executable: false,
            path: "a/one.md".into(),
            sha256: ObjectId::of(b"one"),
            size: 3,
        },
        Entry {
            executable: true,
            path: "b/run \"x\".sh".into(),
            sha256: ObjectId::of(b"run"),
            size: 3,
        },
        Entry {
            executable: false,
            path: "c/big.bin".into(),
            sha256: ObjectId::of(b"big"),
            size: 300 * 1024,
        },
    ])
}

fn outgoing(m: &Manifest) -> Outgoing<'_> {
    let mut out = Outgoing::new(m, "1.2.3");
    out.origin = Some(crate::catalogue::Origin {
        at: "2026-01-02T03:04:05.678Z".into(),
        host: "h".into(),
        user: "u".into(),
        source: "/src/p".into(),
        tool_version: "0.1.0".into(),
    });
    out.created = Some("2026-01-02T03:04:05.678Z".into());
    out.sources = vec![SourceEntry {
        at: "2026-01-02T03:04:05.678Z".into(),
        via: Via::Ingest,
        record: crate::source::SourceRecord {
            read_from: crate::source::ReadFrom::WorkTree,
            path: "plugins/p".into(),
            ..crate::source::SourceRecord::of_commit(
                "https://example.invalid/o/r.git",
                Some(&"c".repeat(40)),
            )
        },
    }];
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn check(what: &str, bytes: &[u8], expected: &str) {
    assert_eq!(text(bytes), expected, "{what}");
}

#[test]
fn the_json_documents_a_push_writes_keep_their_bytes() {
    let m = manifest();
    // The config: the canonical manifest, and the empty config of an artifact.
    check("config", &m.bytes, CONFIG);
    check("empty config", EMPTY_CONFIG, "{}");

    // Format 1, one image manifest.
    let mut v1 = outgoing(&m);
    v1.format = Format::V1;
    let Plan::Single(single_v1, 3) = plan(&v1, 1000, MAX_MANIFEST_BYTES) else {
        panic!("expected one manifest")
    };
    check("format 1 manifest", &single_v1, MANIFEST_V1);

    // Format 1, an index of two parts.
    let Plan::Index {
        parts,
        index,
        layers: 3,
    } = plan(&v1, 2, MAX_MANIFEST_BYTES)
    else {
        panic!("expected an index")
    };
    assert_eq!(parts.len(), 2);
    check("format 1 part 1", &parts[0], PART_1);
    check("format 1 part 2", &parts[1], PART_2);
    check("format 1 index", &index, INDEX_V1);

    // Format 2: a pack, then a raw content; no origin nor records.
    let mut v2 = Outgoing::new(&m, "1.0.0");
    let layout = pack::layout(&m);
    let (slots, size) = pack::slots(layout.packs[0].iter().map(|o| (o.key.id, o.size)));
    v2.packs.push(pack::PackRef {
        digest: ObjectId::of(b"pack"),
        size,
        slots,
    });
    v2.raw = layout.raw;
    let Plan::Single(single_v2, 2) = plan(&v2, 1000, MAX_MANIFEST_BYTES) else {
        panic!("expected one manifest")
    };
    check("format 2 manifest", &single_v2, MANIFEST_V2);

    // An attestation's artifact manifest, its descriptor, and the
    // referrers index, new and merged into another tool's.
    let subject = Subject {
        media_type: mapping::MANIFEST_MEDIA_TYPE.into(),
        digest: ObjectId::of(&single_v2),
        size: single_v2.len() as u64,
    };
    let envelope = br#"{"payloadType":"application/vnd.in-toto+json"}"#;
    let snapshot = ManifestDigest::of(&m.bytes);
    let artifact = artifact_manifest(
        &subject,
        &ObjectId::of(envelope),
        envelope.len() as u64,
        &snapshot,
    );
    check("artifact manifest", &artifact, ARTIFACT);
    let entry = index_entry(&artifact, &snapshot);
    check("index entry", &mapping::to_json(&entry), ENTRY);
    let entries = [(ObjectId::of(&artifact), entry)];
    let fresh = merge_index(None, &entries).unwrap().unwrap();
    check("referrers index", &fresh, REFERRERS);
    let foreign = format!(
        r#"{{"schemaVersion":2,"zeta":[1,{{"b":1,"a":2}}],"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{{"size":7,"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:{}","artifactType":"application/vnd.cncf.notary.signature"}}],"annotations":{{"k":"v"}}}}"#,
        ObjectId::of(b"sig")
    );
    let merged = merge_index(Some(foreign.as_bytes()), &entries)
        .unwrap()
        .unwrap();
    check("merged referrers index", &merged, MERGED);
}

const CONFIG: &str = r##"{"files":[{"executable":false,"path":"a/one.md","sha256":"7692c3ad3540bb803c020b3aee66cd8887123234ea0c6e7143c0add73ff431ed","size":3},{"executable":true,"path":"b/run \"x\".sh","sha256":"acba25512100f80b56fc3ccd14c65be55d94800cda77585c5f41a887e398f9be","size":3},{"executable":false,"path":"c/big.bin","sha256":"2a21fe6d592a19b7de898b50eb53c429608de1a66f3e9f62da19714a770553d1","size":307200}],"schema_version":1}"##;
const MANIFEST_V1: &str = r##"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.cestore.snapshot.v1","config":{"mediaType":"application/vnd.cestore.manifest.v1+json","digest":"sha256:265979c5f56ab93e5333635da0d521082b0e421717ea94256b06983d2c40ae79","size":413},"layers":[{"mediaType":"application/vnd.cestore.file.v1","digest":"sha256:7692c3ad3540bb803c020b3aee66cd8887123234ea0c6e7143c0add73ff431ed","size":3,"annotations":{"dev.cestore.executable":"false","org.opencontainers.image.title":"a/one.md"}},{"mediaType":"application/vnd.cestore.file.v1","digest":"sha256:acba25512100f80b56fc3ccd14c65be55d94800cda77585c5f41a887e398f9be","size":3,"annotations":{"dev.cestore.executable":"true","org.opencontainers.image.title":"b/run \"x\".sh"}},{"mediaType":"application/vnd.cestore.file.v1","digest":"sha256:2a21fe6d592a19b7de898b50eb53c429608de1a66f3e9f62da19714a770553d1","size":307200,"annotations":{"dev.cestore.executable":"false","org.opencontainers.image.title":"c/big.bin"}}],"annotations":{"dev.cestore.origin":"{\"at\":\"2026-01-02T03:04:05.678Z\",\"host\":\"h\",\"user\":\"u\",\"source\":\"/src/p\",\"tool_version\":\"0.1.0\"}","dev.cestore.snapshot":"265979c5f56ab93e5333635da0d521082b0e421717ea94256b06983d2c40ae79","dev.cestore.sources":"[{\"at\":\"2026-01-02T03:04:05.678Z\",\"record\":{\"read_from\":\"work-tree\",\"repository\":\"https://example.invalid/o/r.git\",\"commit\":\"cccccccccccccccccccccccccccccccccccccccc\",\"path\":\"plugins/p\",\"tree\":null,\"tag\":null,\"clean\":true}}]","org.opencontainers.image.created":"2026-01-02T03:04:05.678Z","org.opencontainers.image.revision":"cccccccccccccccccccccccccccccccccccccccc","org.opencontainers.image.source":"https://example.invalid/o/r.git","org.opencontainers.image.version":"1.2.3"}}"##;
const PART_1: &str = r##"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.cestore.snapshot.v1","config":{"mediaType":"application/vnd.cestore.manifest.v1+json","digest":"sha256:265979c5f56ab93e5333635da0d521082b0e421717ea94256b06983d2c40ae79","size":413},"layers":[{"mediaType":"application/vnd.cestore.file.v1","digest":"sha256:7692c3ad3540bb803c020b3aee66cd8887123234ea0c6e7143c0add73ff431ed","size":3,"annotations":{"dev.cestore.executable":"false","org.opencontainers.image.title":"a/one.md"}},{"mediaType":"application/vnd.cestore.file.v1","digest":"sha256:acba25512100f80b56fc3ccd14c65be55d94800cda77585c5f41a887e398f9be","size":3,"annotations":{"dev.cestore.executable":"true","org.opencontainers.image.title":"b/run \"x\".sh"}}],"annotations":{"dev.cestore.origin":"{\"at\":\"2026-01-02T03:04:05.678Z\",\"host\":\"h\",\"user\":\"u\",\"source\":\"/src/p\",\"tool_version\":\"0.1.0\"}","dev.cestore.part":"1/2","dev.cestore.snapshot":"265979c5f56ab93e5333635da0d521082b0e421717ea94256b06983d2c40ae79","dev.cestore.sources":"[{\"at\":\"2026-01-02T03:04:05.678Z\",\"record\":{\"read_from\":\"work-tree\",\"repository\":\"https://example.invalid/o/r.git\",\"commit\":\"cccccccccccccccccccccccccccccccccccccccc\",\"path\":\"plugins/p\",\"tree\":null,\"tag\":null,\"clean\":true}}]","org.opencontainers.image.created":"2026-01-02T03:04:05.678Z","org.opencontainers.image.revision":"cccccccccccccccccccccccccccccccccccccccc","org.opencontainers.image.source":"https://example.invalid/o/r.git","org.opencontainers.image.version":"1.2.3"}}"##;
const PART_2: &str = r##"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.cestore.snapshot.v1","config":{"mediaType":"application/vnd.cestore.manifest.v1+json","digest":"sha256:265979c5f56ab93e5333635da0d521082b0e421717ea94256b06983d2c40ae79","size":413},"layers":[{"mediaType":"application/vnd.cestore.file.v1","digest":"sha256:2a21fe6d592a19b7de898b50eb53c429608de1a66f3e9f62da19714a770553d1","size":307200,"annotations":{"dev.cestore.executable":"false","org.opencontainers.image.title":"c/big.bin"}}],"annotations":{"dev.cestore.origin":"{\"at\":\"2026-01-02T03:04:05.678Z\",\"host\":\"h\",\"user\":\"u\",\"source\":\"/src/p\",\"tool_version\":\"0.1.0\"}","dev.cestore.part":"2/2","dev.cestore.snapshot":"265979c5f56ab93e5333635da0d521082b0e421717ea94256b06983d2c40ae79","dev.cestore.sources":"[{\"at\":\"2026-01-02T03:04:05.678Z\",\"record\":{\"read_from\":\"work-tree\",\"repository\":\"https://example.invalid/o/r.git\",\"commit\":\"cccccccccccccccccccccccccccccccccccccccc\",\"path\":\"plugins/p\",\"tree\":null,\"tag\":null,\"clean\":true}}]","org.opencontainers.image.created":"2026-01-02T03:04:05.678Z","org.opencontainers.image.revision":"cccccccccccccccccccccccccccccccccccccccc","org.opencontainers.image.source":"https://example.invalid/o/r.git","org.opencontainers.image.version":"1.2.3"}}"##;
const INDEX_V1: &str = r##"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","artifactType":"application/vnd.cestore.snapshot.v1","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.cestore.snapshot.v1","digest":"sha256:e3da80e03417cc87678302de2e03ef4b86746a636a1a669d2809d9bcc4dd5409","size":1571,"annotations":{"dev.cestore.part":"1/2"}},{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.cestore.snapshot.v1","digest":"sha256:b33fcfacead5f5da49825bee3544de9faeda637743bc8269eef9e4ac778d514b","size":1339,"annotations":{"dev.cestore.part":"2/2"}}],"annotations":{"dev.cestore.origin":"{\"at\":\"2026-01-02T03:04:05.678Z\",\"host\":\"h\",\"user\":\"u\",\"source\":\"/src/p\",\"tool_version\":\"0.1.0\"}","dev.cestore.snapshot":"265979c5f56ab93e5333635da0d521082b0e421717ea94256b06983d2c40ae79","dev.cestore.sources":"[{\"at\":\"2026-01-02T03:04:05.678Z\",\"record\":{\"read_from\":\"work-tree\",\"repository\":\"https://example.invalid/o/r.git\",\"commit\":\"cccccccccccccccccccccccccccccccccccccccc\",\"path\":\"plugins/p\",\"tree\":null,\"tag\":null,\"clean\":true}}]","org.opencontainers.image.created":"2026-01-02T03:04:05.678Z","org.opencontainers.image.revision":"cccccccccccccccccccccccccccccccccccccccc","org.opencontainers.image.source":"https://example.invalid/o/r.git","org.opencontainers.image.version":"1.2.3"}}"##;
const MANIFEST_V2: &str = r##"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.cestore.snapshot.v2","config":{"mediaType":"application/vnd.cestore.manifest.v1+json","digest":"sha256:265979c5f56ab93e5333635da0d521082b0e421717ea94256b06983d2c40ae79","size":413},"layers":[{"mediaType":"application/vnd.cestore.pack.v1.tar","digest":"sha256:4862f447f2c7f272fa2f4aaf89dadb3b1ac09105bd5864f8d1a0c9452bb0a226","size":3072,"annotations":{"dev.cestore.pack":"7692c3ad3540bb803c020b3aee66cd8887123234ea0c6e7143c0add73ff431ed:512:3,acba25512100f80b56fc3ccd14c65be55d94800cda77585c5f41a887e398f9be:1536:3"}},{"mediaType":"application/vnd.cestore.file.v1","digest":"sha256:2a21fe6d592a19b7de898b50eb53c429608de1a66f3e9f62da19714a770553d1","size":307200,"annotations":{"org.opencontainers.image.title":"c/big.bin"}}],"annotations":{"dev.cestore.snapshot":"265979c5f56ab93e5333635da0d521082b0e421717ea94256b06983d2c40ae79","org.opencontainers.image.version":"1.0.0"}}"##;
const ARTIFACT: &str = r##"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.dev.cestore.attestation.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[{"mediaType":"application/vnd.dsse.envelope.v1+json","digest":"sha256:40b7d0eff53756f8089fedbec20fa9a80984e5d06ce83d7437dd649545470368","size":46}],"subject":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:a3cc41a2b22ac7bd64035b5e66aed96eda18a6fdddf0c28344a195b7b9dfecc4","size":982},"annotations":{"dev.cestore.snapshot":"265979c5f56ab93e5333635da0d521082b0e421717ea94256b06983d2c40ae79"}}"##;
const ENTRY: &str = r##"{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.dev.cestore.attestation.v1+json","digest":"sha256:204a26b89e663af484881f0a5aac9c14eb2a0b9016df208d68a8d804f3d606f4","size":719,"annotations":{"dev.cestore.snapshot":"265979c5f56ab93e5333635da0d521082b0e421717ea94256b06983d2c40ae79"}}"##;
const REFERRERS: &str = r##"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.dev.cestore.attestation.v1+json","digest":"sha256:204a26b89e663af484881f0a5aac9c14eb2a0b9016df208d68a8d804f3d606f4","size":719,"annotations":{"dev.cestore.snapshot":"265979c5f56ab93e5333635da0d521082b0e421717ea94256b06983d2c40ae79"}}]}"##;
const MERGED: &str = r##"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"artifactType":"application/vnd.cncf.notary.signature","digest":"sha256:a543997d84f12798350c09bdef2cdb171bf41ed3e4a5f808af2feb0c56263009","mediaType":"application/vnd.oci.image.manifest.v1+json","size":7},{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.dev.cestore.attestation.v1+json","digest":"sha256:204a26b89e663af484881f0a5aac9c14eb2a0b9016df208d68a8d804f3d606f4","size":719,"annotations":{"dev.cestore.snapshot":"265979c5f56ab93e5333635da0d521082b0e421717ea94256b06983d2c40ae79"}}],"annotations":{"k":"v"},"zeta":[1,{"a":2,"b":1}]}"##;
