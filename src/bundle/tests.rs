//! The bundle format's unit tests: writing, reading and refusing bundles.

use super::*;
use crate::profile::ce::fixtures::MANIFEST_FILE;
use crate::profile::ce::manifest::Entry;

fn manifest() -> (Manifest, Vec<(ObjectKey, Vec<u8>)>) {
    let files: Vec<(&str, &[u8], bool)> = vec![
        (MANIFEST_FILE, br#"{"version": "1.0.0"}"#, false),
        ("skills/a/SKILL.md", b"# a\n", false),
        ("scripts/run.sh", b"#!/bin/sh\n", true),
    ];
    let entries: Vec<Entry> = files
        .iter()
        .map(|(path, data, executable)| Entry {
            executable: *executable,
            path: path.to_string(),
            sha256: ObjectId::of(data),
            size: data.len() as u64,
        })
        .collect();
    let mut objects: Vec<(ObjectKey, Vec<u8>)> = files
        .iter()
        .zip(&entries)
        .map(|((_, data, _), e)| (e.key(), data.to_vec()))
        .collect();
    objects.sort_by_key(|(k, _)| *k);
    (Manifest::new(entries), objects)
}

fn archive(origin: Option<&Origin>) -> Vec<u8> {
    archive_about(About {
        origin,
        sources: None,
        attestations: &[],
    })
}

fn archive_about(about: About<'_>) -> Vec<u8> {
    let (m, objects) = manifest();
    let mut out = Vec::new();
    let n = write_archive(
        &mut out,
        &m,
        about,
        objects
            .iter()
            .map(|(k, d)| Ok((*k, std::borrow::Cow::Borrowed(&d[..])))),
    )
    .unwrap();
    assert_eq!(n, 3);
    out
}

fn names(bytes: &[u8]) -> Vec<String> {
    let mut a = tar::Archive::new(bytes);
    a.entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_same_snapshot_gives_the_same_archive_in_export_order() {
    assert_eq!(archive(None), archive(None));
    let (m, objects) = manifest();
    let mut want = vec![MANIFEST_ENTRY.to_string(), DIGEST_ENTRY.to_string()];
    want.extend(objects.iter().map(|(k, _)| object_entry(k)));
    assert_eq!(names(&archive(None)), want);
    assert!(object_entry(&objects[0].0).starts_with("objects/"));
    assert_eq!(
        digest_entry(&m.digest),
        format!("{}  manifest.json\n", m.digest).into_bytes()
    );
    let origin = Origin {
        at: "2026-01-01T00:00:00.000Z".into(),
        host: "h".into(),
        user: "u".into(),
        source: "/src".into(),
        tool_version: "cestore 0".into(),
    };
    let with = archive(Some(&origin));
    assert_eq!(names(&with)[2], ORIGIN_ENTRY);
    assert_eq!(with.len() % BLOCK, 0);
}

fn origin() -> Origin {
    Origin {
        at: "2026-01-01T00:00:00.000Z".into(),
        host: "h".into(),
        user: "u".into(),
        source: "/src".into(),
        tool_version: "cestore 0".into(),
    }
}

fn sources_json() -> String {
    let entry = SourceEntry {
        at: "2026-01-02T00:00:00.000Z".into(),
        via: Via::Ingest,
        record: crate::source::SourceRecord::of_commit(
            "https://example.invalid/o/r.git",
            Some(&"c".repeat(40)),
        ),
    };
    carried::to_json(&[entry]).unwrap()
}

#[test]
fn the_optional_entries_read_back_in_their_order_each_with_or_without_the_other() {
    let origin = origin();
    let json = sources_json();
    for (with_origin, with_sources) in [(false, false), (true, false), (false, true), (true, true)]
    {
        let bytes = archive_about(About {
            origin: with_origin.then_some(&origin),
            sources: with_sources.then_some(json.as_str()),
            attestations: &[],
        });
        let mut want = vec![MANIFEST_ENTRY, DIGEST_ENTRY];
        if with_origin {
            want.push(ORIGIN_ENTRY);
        }
        if with_sources {
            want.push(SOURCES_ENTRY);
        }
        assert_eq!(names(&bytes)[..want.len()], want);
        let mut r = io::Cursor::new(bytes);
        let head = read_head(&mut r).unwrap();
        assert_eq!(head.origin.is_some(), with_origin);
        assert_eq!(head.sources.len(), usize::from(with_sources));
        assert!(head.sources.iter().all(|e| e.via == Via::Bundle));
        assert_eq!(
            head.sources.first().and_then(|e| e.record.commit.clone()),
            with_sources.then(|| "c".repeat(40))
        );
        let objects = objects_of(&head.manifest);
        let rest = Rest {
            body: Body::Tar(Box::new(r) as Box<dyn Read>),
            pending: head.pending,
            objects,
        };
        let mut seen = 0;
        rest.read_objects(&mut |_, _| {
            seen += 1;
            Ok(false)
        })
        .unwrap();
        assert_eq!(seen, 3, "every object is offered, then the end is read");
    }
    // A sources entry export would never write is refused.
    let bytes = archive_about(About {
        origin: None,
        sources: Some("{\"not\":\"a list\"}"),
        attestations: &[],
    });
    let Err(err) = read_head(&mut &bytes[..]) else {
        panic!("an unreadable sources entry was taken")
    };
    assert!(
        err.to_string().starts_with(
            "the bundle is damaged: 'sources.json' holds no source records: it is not a list"
        ),
        "{err}"
    );
}

#[test]
fn attestations_follow_the_sources_each_once_by_hash_and_read_back() {
    let json = sources_json();
    let envelopes = vec![
        br#"{"payloadType":"application/vnd.in-toto+json","payload":"b25l","signatures":[]}"#
            .to_vec(),
        br#"{"payloadType":"application/vnd.in-toto+json","payload":"dHdv","signatures":[]}"#
            .to_vec(),
    ];
    let mut twice = envelopes.clone();
    twice.push(envelopes[0].clone());
    let bytes = archive_about(About {
        origin: None,
        sources: Some(&json),
        attestations: &twice,
    });
    let mut sorted: Vec<(ObjectId, Vec<u8>)> = envelopes
        .iter()
        .map(|e| (ObjectId::of(e), e.clone()))
        .collect();
    sorted.sort();
    let got = names(&bytes);
    assert_eq!(got[2], SOURCES_ENTRY);
    assert_eq!(got[3], attestation_entry(&sorted[0].0));
    assert_eq!(got[4], attestation_entry(&sorted[1].0));
    assert!(got[5].starts_with(OBJECTS_PREFIX));
    let mut r = io::Cursor::new(bytes.clone());
    let head = read_head(&mut r).unwrap();
    assert_eq!(
        head.attestations,
        sorted.iter().map(|(_, e)| e.clone()).collect::<Vec<_>>()
    );
    let rest = Rest {
        body: Body::Tar(Box::new(r) as Box<dyn Read>),
        pending: head.pending,
        objects: objects_of(&head.manifest),
    };
    rest.read_objects(&mut |_, _| Ok(false)).unwrap();
    // None: the archive is the one written before attestations existed.
    let without = archive_about(About {
        origin: None,
        sources: Some(&json),
        attestations: &[],
    });
    assert!(!names(&without)
        .iter()
        .any(|n| n.starts_with(ATTESTATIONS_PREFIX)));
    assert!(read_head(&mut &without[..])
        .unwrap()
        .attestations
        .is_empty());

    // An entry whose name is not its hash, or out of order, is refused.
    let (m, objects) = manifest();
    let write = |entries: &[(String, &[u8])]| {
        let mut out = Vec::new();
        write_entry(&mut out, MANIFEST_ENTRY, 0o444, &m.bytes).unwrap();
        write_entry(&mut out, DIGEST_ENTRY, 0o444, &digest_entry(&m.digest)).unwrap();
        for (name, data) in entries {
            write_entry(&mut out, name, 0o444, data).unwrap();
        }
        let (k, d) = &objects[0];
        write_entry(&mut out, &object_entry(k), k.mode(), d).unwrap();
        out
    };
    let misnamed = write(&[(attestation_entry(&sorted[0].0), &sorted[1].1)]);
    let Err(err) = read_head(&mut &misnamed[..]) else {
        panic!("a misnamed attestation was taken")
    };
    assert!(err.to_string().contains("hashes to"), "{err}");
    let reversed = write(&[
        (attestation_entry(&sorted[1].0), &sorted[1].1),
        (attestation_entry(&sorted[0].0), &sorted[0].1),
    ]);
    let Err(err) = read_head(&mut &reversed[..]) else {
        panic!("attestations out of order were taken")
    };
    assert!(err.to_string().contains("out of order"), "{err}");
}

#[test]
fn entries_read_back_and_headers_are_checked_byte_for_byte() {
    let bytes = archive(None);
    let (m, _) = manifest();
    let mut r: &[u8] = &bytes;
    let read = read_small_entry(&mut r, MANIFEST_ENTRY, MAX_MANIFEST_BYTES).unwrap();
    assert_eq!(read, m.bytes);
    let mut r: &[u8] = &bytes;
    // A declared size over the limit is refused before the data is read.
    let err = read_small_entry(&mut r, MANIFEST_ENTRY, 3).unwrap_err();
    assert!(err.to_string().contains("more than the 3"), "{err}");
    let mut block = [0u8; BLOCK];
    block.copy_from_slice(&bytes[..BLOCK]);
    assert_eq!(entry_name_of(&block), MANIFEST_ENTRY);
    check_header(&block, MANIFEST_ENTRY, 0o444, m.bytes.len() as u64).unwrap();
    assert!(check_header(&block, MANIFEST_ENTRY, 0o555, m.bytes.len() as u64).is_err());
    assert!(check_header(&block, MANIFEST_ENTRY, 0o444, 1).is_err());
    block[200] ^= 1;
    assert!(check_header(&block, MANIFEST_ENTRY, 0o444, m.bytes.len() as u64).is_err());
}

#[test]
fn object_entries_are_hashed_and_padding_must_be_zero() {
    let data = b"some bytes\n";
    let key = ObjectKey {
        id: ObjectId::of(data),
        executable: false,
    };
    let mut r: &[u8] = data;
    check_object_entry(&mut r, &key, data.len() as u64, "x").unwrap();
    let mut r: &[u8] = b"other byte\n";
    let err = check_object_entry(&mut r, &key, data.len() as u64, "x").unwrap_err();
    assert!(err.to_string().contains("hashes to"), "{err}");
    let mut r: &[u8] = b"short";
    assert!(check_object_entry(&mut r, &key, data.len() as u64, "x").is_err());
    let zeros = vec![0u8; BLOCK - 11];
    read_padding(&mut &zeros[..], 11, "x").unwrap();
    let mut bad = zeros.clone();
    bad[3] = 1;
    assert!(read_padding(&mut &bad[..], 11, "x").is_err());
}

#[test]
fn damage_messages_stay_one_short_printable_line() {
    let e = unreadable(format!("a\nb\u{0}c{}", "x".repeat(500)));
    let text = e.to_string();
    assert!(!text.contains('\n') && !text.contains('\u{0}'), "{text}");
    assert!(text.len() < 260, "{}", text.len());
}
