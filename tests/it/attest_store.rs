//! Attestations kept beside a snapshot: planted as files in the form the
//! store keeps them, `recover` records them and writes back a lost one,
//! `rm` removes them with their snapshot and `gc` sweeps those of no
//! snapshot.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{self, assert_exit, parse_json, s, sha_hex, write, TestEnv};

/// An attestation as its file holds it, and where that file goes.
struct Planted {
    id: String,
    keyid: String,
    at: String,
    envelope: String,
    file: String,
}

/// An attestation of `n` in the kept form: the envelope's line (its SHA-256
/// names the file) inside a wrapper carrying the key id and the time.
fn planted(n: u32) -> Planted {
    let envelope = format!(
        "{{\"payload\":\"{}\",\"payloadType\":\"application/vnd.in-toto+json\",\"signatures\":[{{\"keyid\":\"\",\"sig\":\"c2lnbmF0dXJl\"}}]}}\n",
        n
    );
    let keyid = format!("{n:x}").repeat(64)[..64].to_string();
    let at = format!("2026-01-02T03:04:0{n}.000Z");
    let file = format!(
        "{{\"keyid\":\"{keyid}\",\"at\":\"{at}\",\"envelope\":{}}}\n",
        envelope.trim_end()
    );
    Planted {
        id: sha_hex(envelope.as_bytes()),
        keyid,
        at,
        envelope,
        file,
    }
}

/// The attestations directory of a snapshot.
fn dir_of(store: &Path, digest: &str) -> PathBuf {
    store.join("attestations").join(&digest[..2]).join(digest)
}

/// Writes `a`'s file beside the snapshot `digest`; returns its path.
fn plant(store: &Path, digest: &str, a: &Planted) -> PathBuf {
    let path = dir_of(store, digest).join(format!("{}.json", a.id));
    write(&path, &a.file);
    path
}

/// The catalogue's attestation rows of a snapshot: id, keyid, at, envelope.
fn rows(store: &Path, digest: &str) -> Vec<(String, String, String, String)> {
    let conn = rusqlite::Connection::open_with_flags(
        store.join("catalogue.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT a.id, a.keyid, a.at, a.envelope FROM attestations a
             JOIN snapshots s ON s.id = a.snapshot_id WHERE s.digest = ?1 ORDER BY a.at",
        )
        .unwrap();
    stmt.query_map([digest], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

fn row(a: &Planted) -> (String, String, String, String) {
    (
        a.id.clone(),
        a.keyid.clone(),
        a.at.clone(),
        a.envelope.clone(),
    )
}

fn recover(env: &TestEnv) -> Value {
    env.json(["recover", "--json"])
}

fn ingested(env: &TestEnv, version: &str) -> String {
    let release = env.plugin(&format!("release-{version}"), version);
    env.ingest_digest(&release, version)
}

#[test]
fn recover_records_planted_attestations_and_writes_back_a_lost_one() {
    let env = TestEnv::new();
    let d = ingested(&env, "1.0.0");
    let (one, two) = (planted(1), planted(2));
    plant(&env.store, &d, &two);
    let lost = plant(&env.store, &d, &one);

    let recovered = recover(&env);
    assert_eq!(recovered["attestations_recorded"], 2, "{recovered}");
    assert_eq!(recovered["attestations_written"], 0, "{recovered}");
    assert_eq!(rows(&env.store, &d), [row(&one), row(&two)]);
    let again = recover(&env);
    assert_eq!(again["attestations_recorded"], 0, "{again}");
    assert_eq!(again["attestations_written"], 0, "{again}");

    // A lost file is written again from its row, byte for byte, read-only.
    fs::remove_file(&lost).unwrap();
    let rewritten = recover(&env);
    assert_eq!(rewritten["attestations_written"], 1, "{rewritten}");
    assert_eq!(fs::read_to_string(&lost).unwrap(), one.file);
    assert_eq!(util::mode_of(&lost), 0o444);

    // A lost catalogue: both are recorded again from their files alone.
    for name in [
        "catalogue.sqlite",
        "catalogue.sqlite-wal",
        "catalogue.sqlite-shm",
    ] {
        let _ = fs::remove_file(env.store.join(name));
    }
    let out = env.run(["recover"]);
    util::assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("attestations: 2 recorded again, 0 written again"),
        "{text}"
    );
    assert_eq!(rows(&env.store, &d), [row(&one), row(&two)]);
}

#[test]
fn a_damaged_attestation_file_is_reported_and_left_as_it_is() {
    let env = TestEnv::new();
    let d = ingested(&env, "1.0.0");
    let (one, two) = (planted(1), planted(2));
    // Another attestation's bytes under its name, and a wrapper whose
    // envelope was reformatted.
    let swapped = dir_of(&env.store, &d).join(format!("{}.json", one.id));
    write(&swapped, &two.file);
    let spaced = plant(&env.store, &d, &planted(3));
    let text = fs::read_to_string(&spaced)
        .unwrap()
        .replace("\"envelope\":", "\"envelope\": ");
    write(&spaced, text);

    let out = env.run(["recover", "--json"]);
    assert_exit(&out, 1);
    let report = parse_json(&out);
    let mut problems = crate::util::field_pairs(&report["problems"], "path", "detail");
    problems.sort();
    let mut want = vec![
        (
            s(&swapped),
            "not a sound attestation (its envelope's bytes do not hash to its name); \
             left as it is"
                .to_string(),
        ),
        (
            s(&spaced),
            "not a sound attestation (it is not an attestation); left as it is".to_string(),
        ),
    ];
    want.sort();
    assert_eq!(problems, want, "{report}");
    assert_eq!(report["attestations_recorded"], 0, "{report}");
    assert!(rows(&env.store, &d).is_empty());
    assert_eq!(fs::read_to_string(&swapped).unwrap(), two.file);
}

#[test]
fn rm_takes_a_snapshots_attestations_and_gc_sweeps_those_of_no_snapshot() {
    let env = TestEnv::new();
    let gone = ingested(&env, "1.0.0");
    let kept = ingested(&env, "2.0.0");
    plant(&env.store, &gone, &planted(1));
    plant(&env.store, &kept, &planted(2));
    recover(&env);
    assert_eq!(rows(&env.store, &gone).len(), 1);

    let out = env.run(["rm", gone.as_str()]);
    util::assert_ok(&out);
    assert!(!dir_of(&env.store, &gone).exists());
    assert!(dir_of(&env.store, &kept).exists());
    assert_eq!(rows(&env.store, &kept), [row(&planted(2))]);

    // Those of a snapshot nothing records, and a stray name, are garbage
    // (as are the objects only the removed snapshot used); those of a
    // recorded snapshot are kept.
    let orphan = "a".repeat(64);
    plant(&env.store, &orphan, &planted(3));
    let stray = env.store.join("attestations/zz");
    write(&stray, "?\n");
    let verify = env.run(["verify", "--json"]);
    let verify = parse_json(&verify);
    let garbage: Vec<(String, String)> = crate::util::problems(&verify)
        .iter()
        .filter(|p| p["severity"] == "garbage" && p["kind"] != "orphan-object")
        .map(|p| {
            (
                p["kind"].as_str().unwrap().to_string(),
                p["path"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let orphan_dir = dir_of(&env.store, &orphan);
    let want = vec![
        ("orphan-attestations".to_string(), s(&orphan_dir)),
        ("orphan-attestations".to_string(), s(&stray)),
    ];
    let mut garbage = garbage;
    garbage.sort();
    assert_eq!(garbage, want, "{verify:#}");

    let gc = env.json(["gc", "--json"]);
    let mut swept: Vec<String> = crate::util::array(&gc["attestations"])
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    swept.sort();
    assert_eq!(swept, [s(&orphan_dir), s(&stray)], "{gc}");
    assert!(!orphan_dir.exists() && !stray.exists());
    assert!(dir_of(&env.store, &kept).exists());
}
