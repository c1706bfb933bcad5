//! Manifests kept as deltas (catalogue/kept.rs): a snapshot that differs
//! from the last of its name in a few files keeps its manifest, on disk and
//! in the catalogue, as a zstd delta against that one's; every command
//! reads its canonical bytes; forgetting a base keeps what names it whole;
//! a lost catalogue is rebuilt from the deltas.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::util::*;

/// Files enough for a manifest worth a delta (well over 16 KiB).
const FILES: usize = 300;

/// A tree of [`FILES`] packages, `changed` of them rewritten by `round`.
fn tree(env: &TestEnv, round: usize, changed: &[usize]) -> PathBuf {
    let root = env.path("tree");
    for i in 0..FILES {
        let body = if changed.contains(&i) {
            format!("module.exports = {i}; // round {round}\n")
        } else {
            format!("module.exports = {i};\n")
        };
        write(&root.join(format!("node_modules/pkg-{i}/index.js")), &body);
    }
    root
}

fn ingest(env: &TestEnv, root: &Path) -> String {
    let v = env.json([
        "ingest",
        "--profile",
        "tree",
        &s(root),
        "--name",
        "deps",
        "--json",
    ]);
    v["manifest_digest"].as_str().unwrap().to_string()
}

fn manifest_file(env: &TestEnv, digest: &str) -> PathBuf {
    env.store.join("manifests").join(&digest[..2]).join(digest)
}

/// The canonical bytes `show --manifest` prints, checked against the digest.
fn shown(env: &TestEnv, digest: &str) -> Vec<u8> {
    let out = env.run(["show", "--manifest", digest]);
    assert_exit(&out, 0);
    assert_eq!(hex(&Sha256::digest(&out.stdout)), digest);
    out.stdout
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn verify_clean(env: &TestEnv) {
    let (code, v) = env.verify(&[]);
    assert_eq!(code, 0, "{v:#}");
    assert!(problems(&v).is_empty(), "{v:#}");
}

/// Three snapshots of one name, each two files from the one before.
fn three(env: &TestEnv) -> [String; 3] {
    let d1 = ingest(env, &tree(env, 0, &[]));
    let d2 = ingest(env, &tree(env, 1, &[3, 200]));
    let d3 = ingest(env, &tree(env, 2, &[3, 200, 150, 299]));
    [d1, d2, d3]
}

#[test]
fn a_near_copy_is_kept_as_a_delta_and_every_command_reads_its_bytes() {
    let env = TestEnv::new();
    let [d1, d2, d3] = three(&env);
    let first = std::fs::read(manifest_file(&env, &d1)).unwrap();
    assert!(
        first.starts_with(b"cestore-zstd 1\n"),
        "the first is kept packed"
    );
    assert!(first.len() * 3 < shown(&env, &d1).len());
    for (d, base) in [(&d2, &d1), (&d3, &d2)] {
        let kept = std::fs::read(manifest_file(&env, d)).unwrap();
        let header = format!("cestore-delta 1 {base}\n");
        assert!(
            kept.starts_with(header.as_bytes()),
            "{d} is a delta against {base}"
        );
        let bytes = shown(&env, d);
        assert!(
            kept.len() * 10 < bytes.len(),
            "{} of {}",
            kept.len(),
            bytes.len()
        );
    }
    // Views, find and verify read the canonical bytes.
    let view = env.run(["path", &d3]);
    assert_exit(&view, 0);
    let view = PathBuf::from(String::from_utf8(view.stdout).unwrap().trim());
    assert_eq!(
        std::fs::read_to_string(view.join("node_modules/pkg-299/index.js")).unwrap(),
        "module.exports = 299; // round 2\n"
    );
    let found = env.json(["find", "--path", "node_modules/pkg-3/index.js", "--json"]);
    assert_eq!(
        found["matches"].as_array().map(Vec::len),
        Some(3),
        "{found:#}"
    );
    verify_clean(&env);
}

/// docs/format.md's reading of a kept manifest: the bytes after a packed
/// one's 15-byte header are one zstd frame that `zstd -d` reads; after a
/// delta's 81-byte header, one that `zstd -d --patch-from BASE` unfolds.
#[test]
fn a_kept_manifest_unfolds_with_the_zstd_command_as_documented() {
    let Ok(zstd) = which("zstd") else {
        return skip(
            "kept::a_kept_manifest_unfolds_with_the_zstd_command_as_documented",
            "zstd is not on PATH",
        );
    };
    let env = TestEnv::new();
    let [d1, d2, _] = three(&env);
    let kept = std::fs::read(manifest_file(&env, &d2)).unwrap();
    let frame = env.path("frame.zst");
    std::fs::write(&frame, &kept[81..]).unwrap();
    let base = env.path("base");
    std::fs::write(&base, shown(&env, &d1)).unwrap();
    let out = std::process::Command::new(&zstd)
        .args(["-d", "-q", "-c", "--patch-from"])
        .arg(&base)
        .arg(&frame)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, shown(&env, &d2));
    let packed = std::fs::read(manifest_file(&env, &d1)).unwrap();
    std::fs::write(&frame, &packed[15..]).unwrap();
    let out = std::process::Command::new(&zstd)
        .args(["-d", "-q", "-c"])
        .arg(&frame)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, shown(&env, &d1));
}

/// The path of `program` on PATH.
fn which(program: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or(())
}

#[test]
fn forgetting_a_base_keeps_what_names_it_whole_and_loses_nothing() {
    let env = TestEnv::new();
    let [d1, d2, d3] = three(&env);
    let before = shown(&env, &d3);
    assert_exit(&env.run(["rm", &d2]), 0);
    let kept = std::fs::read(manifest_file(&env, &d3)).unwrap();
    assert!(
        kept.starts_with(b"cestore-zstd 1\n"),
        "d3 is kept packed, with no base, once its base is forgotten"
    );
    assert!(!manifest_file(&env, &d2).exists());
    assert_exit(&env.run(["gc"]), 0);
    verify_clean(&env);
    assert_eq!(shown(&env, &d3), before);
    // The next snapshot of the name is kept against the last one.
    let d4 = ingest(&env, &tree(&env, 3, &[7]));
    let header = format!("cestore-delta 1 {d3}\n");
    assert!(std::fs::read(manifest_file(&env, &d4))
        .unwrap()
        .starts_with(header.as_bytes()));
    assert_exit(&env.run(["rm", &d1]), 0);
    assert_exit(&env.run(["gc"]), 0);
    verify_clean(&env);
    shown(&env, &d4);
}

#[test]
fn a_lost_catalogue_is_rebuilt_from_the_deltas() {
    let env = TestEnv::new();
    let digests = three(&env);
    lose_catalogue(&env);
    let r = env.json(["recover", "--json"]);
    assert_eq!(r["snapshots"], 3, "{r:#}");
    for d in &digests {
        shown(&env, d);
    }
    // The catalogue keeps each as the disk does: the same deltas.
    let db = rusqlite::Connection::open(env.store.join("catalogue.sqlite")).unwrap();
    let base = |d: &str| -> Option<String> {
        db.query_row(
            "SELECT m.base FROM manifests m JOIN snapshots s ON s.id = m.snapshot_id
             WHERE s.digest = ?1",
            [d],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(base(&digests[0]), None);
    assert_eq!(base(&digests[1]).as_deref(), Some(digests[0].as_str()));
    assert_eq!(base(&digests[2]).as_deref(), Some(digests[1].as_str()));
    verify_clean(&env);
    assert_exit(&env.run(["gc"]), 0);
    verify_clean(&env);
}

#[test]
fn a_delta_whose_base_is_lost_is_damaged_and_gc_keeps_every_object() {
    let env = TestEnv::new();
    let [d1, d2, d3] = three(&env);
    std::fs::remove_file(manifest_file(&env, &d1)).unwrap();
    let (code, v) = env.verify(&[]);
    assert_eq!(code, 1, "{v:#}");
    // Both that were kept against it, one through the other.
    let damaged: std::collections::BTreeSet<&str> = problems(&v)
        .iter()
        .filter(|p| p["kind"] == "damaged-manifest")
        .filter_map(|p| p["path"].as_str())
        .collect();
    let expected = [s(&manifest_file(&env, &d2)), s(&manifest_file(&env, &d3))];
    assert_eq!(
        damaged,
        expected.iter().map(String::as_str).collect(),
        "{v:#}"
    );
    // Its view is refused, never made as another kind's.
    let out = env.run(["path", &d3]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(!env.store.join("views").join(&d3).exists());
    let objects = |env: &TestEnv| walk_files(&env.store.join("objects")).len();
    let before = objects(&env);
    let out = env.run(["gc", "--json"]);
    assert_ne!(out.status.code(), Some(0), "gc refuses to sweep: {out:?}");
    assert_eq!(objects(&env), before);
    // `recover` writes the lost manifest from the catalogue, and all is well.
    env.json(["recover", "--json"]);
    verify_clean(&env);
}

/// A manifest `recover` sets aside is set aside whole, so that what it names
/// stays readable, and kept by gc, once the manifest it was kept against is
/// forgotten.
#[test]
fn a_delta_set_aside_is_kept_whole_and_its_objects_with_it() {
    let env = TestEnv::new();
    let [d1, d2, d3] = three(&env);
    // An object only the third names goes, and the catalogue with it.
    let object = |body: &str| {
        let hex = hex(&Sha256::digest(body.as_bytes()));
        env.store.join("objects").join(&hex[..2]).join(&hex[2..])
    };
    let gone = object("module.exports = 150; // round 2\n");
    let kept = object("module.exports = 299; // round 2\n");
    assert!(gone.exists() && kept.exists());
    std::fs::remove_file(&gone).unwrap();
    lose_catalogue(&env);
    let out = env.run(["recover", "--json"]);
    assert_exit(&out, 1);
    let aside = env
        .store
        .join("manifests-set-aside")
        .join(format!("{d3}.1"));
    assert!(
        std::fs::read(&aside).unwrap().starts_with(b"["),
        "set aside whole"
    );
    assert_exit(&env.run(["rm", &d2]), 0);
    assert_exit(&env.run(["rm", &d1]), 0);
    assert_exit(&env.run(["gc"]), 0);
    assert!(kept.exists(), "gc keeps what a set-aside manifest names");
}

/// Removes the store's catalogue, its log and its shared memory.
fn lose_catalogue(env: &TestEnv) {
    for name in [
        "catalogue.sqlite",
        "catalogue.sqlite-wal",
        "catalogue.sqlite-shm",
    ] {
        let _ = std::fs::remove_file(env.store.join(name));
    }
}

/// Every file under `dir`.
fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}
