//! Hostile bundles and registries: refused quickly, in bounded memory, with a
//! documented exit code, and with the store unchanged.
//!
//! Each command is run under a small Python harness that spawns it and reaps
//! it with `wait4`, so the peak RSS reported is the cestore process's own.

use std::ffi::OsStr;
use std::fs;
use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use cestore::digest::ObjectId;
use cestore::profile::ce::manifest::{Entry, Manifest};
use sha2::Digest as _;

use crate::remote::{manifest_url, noise, registry, repo, salt};
use crate::util::*;

/// The most a refused import or pull may take, in seconds.
const MAX_SECS: f64 = 2.0;
/// The most resident memory a refused import or pull may use, in KiB.
const MAX_RSS_KIB: u64 = 64 * 1024;
const GIB: u64 = 1024 * 1024 * 1024;

/// Spawns argv[3:] with stdout and stderr to the files argv[1] and argv[2],
/// reaps it with wait4, and prints its exit code, peak RSS and wall time.
const HARNESS: &str = r#"
import json, os, sys, time
out, err, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
start = time.monotonic()
pid = os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=[
    (os.POSIX_SPAWN_OPEN, 1, out, flags, 0o644),
    (os.POSIX_SPAWN_OPEN, 2, err, flags, 0o644)])
_, status, usage = os.wait4(pid, 0)
secs = time.monotonic() - start
print(json.dumps({"code": os.waitstatus_to_exitcode(status), "maxrss_kib": usage.ru_maxrss, "secs": secs}))
"#;

/// What one measured run gave.
struct Measured {
    code: i64,
    maxrss_kib: u64,
    secs: f64,
    stderr: String,
}

/// Runs cestore with `args` against the env's store, measured.
fn measure(env: &TestEnv, args: &[&OsStr]) -> Measured {
    let (out, err) = (env.path("measured.out"), env.path("measured.err"));
    let output = Command::new("python3")
        .arg("-c")
        .arg(HARNESS)
        .arg(&out)
        .arg(&err)
        .arg(bin())
        .args(args)
        .arg("--store")
        .arg(&env.store)
        .env_remove("CESTORE_DIR")
        .output()
        .expect("run the measuring harness");
    assert_ok(&output);
    let report = parse_json(&output);
    let m = Measured {
        code: report["code"].as_i64().expect("exit code"),
        maxrss_kib: report["maxrss_kib"].as_u64().expect("maxrss"),
        secs: report["secs"].as_f64().expect("secs"),
        stderr: fs::read_to_string(&err).expect("stderr"),
    };
    eprintln!(
        "cestore {:?}: exit {}, {:.3} s, peak RSS {} KiB",
        args, m.code, m.secs, m.maxrss_kib
    );
    m
}

/// Asserts a refusal: the exit code, and within the time and memory bounds.
fn assert_refused(m: &Measured, code: i64, says: &str) {
    assert_eq!(m.code, code, "exit code; stderr: {}", m.stderr);
    assert!(
        m.stderr.contains(says),
        "stderr lacks '{says}': {}",
        m.stderr
    );
    assert!(
        m.secs < MAX_SECS,
        "took {:.2} s, more than {MAX_SECS} s",
        m.secs
    );
    assert!(
        m.maxrss_kib < MAX_RSS_KIB,
        "peak RSS {} KiB, more than {MAX_RSS_KIB} KiB",
        m.maxrss_kib
    );
}

/// A store that already holds one snapshot, with its state.
fn seeded_store() -> (TestEnv, StoreState) {
    let (env, src) = crate::util::with_plugin("seed-src", "0.9.0");
    env.ingest_digest(&src, "0.9.0");
    let state = store_state(&env.store);
    (env, state)
}

/// The ustar header `cestore export` writes.
fn export_header(name: &str, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_ustar();
    h.set_path(name).expect("name");
    h.set_size(size);
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_username("").expect("user");
    h.set_groupname("").expect("group");
    h.set_device_major(0).expect("major");
    h.set_device_minor(0).expect("minor");
    h.set_cksum();
    h
}

/// What follows an object's header in a hand-made bundle.
enum Data {
    Bytes(Vec<u8>),
    /// This many zero bytes, written in chunks.
    Zeros(u64),
    /// Nothing: the archive ends after the header.
    Nothing,
}

/// Writes one entry: header, data, padding.
fn entry(w: &mut dyn Write, name: &str, mode: u32, size: u64, data: &Data) {
    w.write_all(export_header(name, mode, size).as_bytes())
        .expect("header");
    let written = match data {
        Data::Bytes(b) => {
            w.write_all(b).expect("data");
            b.len() as u64
        }
        Data::Zeros(n) => {
            let chunk = vec![0u8; 1 << 20];
            let mut left = *n;
            while left > 0 {
                let k = left.min(chunk.len() as u64);
                w.write_all(&chunk[..k as usize]).expect("zeros");
                left -= k;
            }
            *n
        }
        Data::Nothing => return,
    };
    let pad = (512 - written % 512) % 512;
    w.write_all(&vec![0u8; pad as usize]).expect("padding");
}

/// The entries of a small real snapshot (manifest and objects), from a
/// plain bundle `cestore export` wrote.
fn real_snapshot() -> (Manifest, Vec<(String, u32, Vec<u8>)>) {
    let (env, src) = crate::util::with_plugin("src", "1.0.0");
    write(&src.join("skills/extra/notes.md"), noise(salt(), 1, 3000));
    let digest = env.ingest_digest(&src, "1.0.0");
    let file = env.path("real.tar");
    env.json([
        OsStr::new("export"),
        OsStr::new(&digest),
        OsStr::new("-o"),
        file.as_os_str(),
        OsStr::new("--json"),
    ]);
    let mut archive = tar::Archive::new(fs::File::open(&file).expect("bundle"));
    let mut manifest = None;
    let mut objects = Vec::new();
    for e in archive.entries().expect("entries") {
        let mut e = e.expect("entry");
        let name = e.path().expect("path").to_string_lossy().into_owned();
        let mode = e.header().mode().expect("mode");
        let mut data = Vec::new();
        e.read_to_end(&mut data).expect("read entry");
        if name == "manifest.json" {
            manifest = Some(Manifest::parse(&data).expect("canonical manifest"));
        } else if name.starts_with("objects/") {
            objects.push((name, mode, data));
        }
    }
    (manifest.expect("manifest.json"), objects)
}

/// A manifest like `base` with one more file of `size` bytes whose content
/// is `id`, in the walk order the rules ask for.
fn with_big_file(base: &Manifest, size: u64, id: ObjectId) -> Manifest {
    let mut entries = base.entries.clone();
    entries.push(Entry {
        executable: false,
        path: "skills/zz-big/zero.bin".into(),
        sha256: id,
        size,
    });
    entries.sort_by(|a, b| {
        cestore::profile::ce::rules::walk_order_key(&a.path)
            .cmp(&cestore::profile::ce::rules::walk_order_key(&b.path))
    });
    Manifest::new(entries)
}

/// Writes a bundle's archive: the manifest, its digest, the real objects and
/// one big object (its header declaring `declared` bytes), sorted by name as
/// export sorts them, and the end blocks unless the big object has no data.
fn archive(
    w: &mut dyn Write,
    manifest: &Manifest,
    objects: &[(String, u32, Vec<u8>)],
    big: (ObjectId, u64, Data),
) {
    entry(
        w,
        "manifest.json",
        0o444,
        manifest.bytes.len() as u64,
        &Data::Bytes(manifest.bytes.clone()),
    );
    let digest = format!("{}  manifest.json\n", manifest.digest).into_bytes();
    entry(
        w,
        "manifest.sha256",
        0o444,
        digest.len() as u64,
        &Data::Bytes(digest),
    );
    let big_name = format!("objects/{}", big.0);
    let mut names: Vec<&str> = objects.iter().map(|o| o.0.as_str()).collect();
    names.push(&big_name);
    names.sort_unstable();
    for name in names {
        if name == big_name {
            entry(w, name, 0o444, big.1, &big.2);
            if matches!(big.2, Data::Nothing) {
                return;
            }
        } else if let Some((_, mode, data)) = objects.iter().find(|o| o.0 == name) {
            entry(
                w,
                name,
                *mode,
                data.len() as u64,
                &Data::Bytes(data.clone()),
            );
        }
    }
    w.write_all(&[0u8; 1024]).expect("end blocks");
}

/// Compresses what `write` writes into one zstd frame (with its checksum)
/// and seals it as export does: a skippable frame holding `CSTS` and the
/// SHA-256 of the frame.
fn sealed_zstd(write: impl FnOnce(&mut dyn Write)) -> Vec<u8> {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).expect("encoder");
    enc.include_checksum(true).expect("checksum");
    write(&mut enc);
    let mut frame = enc.finish().expect("finish the frame");
    let sha = sha2::Sha256::digest(&frame);
    frame.extend_from_slice(&[0x50, 0x2a, 0x4d, 0x18]);
    frame.extend_from_slice(&36u32.to_le_bytes());
    frame.extend_from_slice(b"CSTS");
    frame.extend_from_slice(&sha);
    frame
}

/// Imports `bundle` into a seeded store, measured; returns the measurement
/// after checking that the store holds nothing new.
fn import_hostile(bundle: &[u8], name: &str) -> Measured {
    let (env, before) = seeded_store();
    let file = env.path(name);
    fs::write(&file, bundle).expect("write bundle");
    eprintln!("{name}: {} bytes", bundle.len());
    let m = measure(&env, &[OsStr::new("import"), file.as_os_str()]);
    assert_eq!(store_state(&env.store), before, "the store changed");
    m
}

fn big_bundle_declaring(size: u64) -> Vec<u8> {
    let (base, objects) = real_snapshot();
    // The content's hash does not matter: the bound is broken first.
    let id = ObjectId::of(b"a file declared far past the per-file bound");
    let manifest = with_big_file(&base, size, id);
    sealed_zstd(|w| archive(w, &manifest, &objects, (id, size, Data::Zeros(size))))
}

#[test]
fn a_bundle_declaring_a_1_gib_file_is_refused_fast_in_bounded_memory() {
    let bundle = big_bundle_declaring(GIB);
    let m = import_hostile(&bundle, "1gib.tar.zst");
    assert_refused(&m, 1, "exceeds the per-file limit");
    assert!(m.stderr.contains("skills/zz-big/zero.bin"), "{}", m.stderr);
}

#[test]
fn a_bundle_declaring_a_4_gib_file_is_refused_fast_in_bounded_memory() {
    let bundle = big_bundle_declaring(4 * GIB);
    let m = import_hostile(&bundle, "4gib.tar.zst");
    assert_refused(&m, 1, "exceeds the per-file limit");
}

#[test]
fn a_small_tar_declaring_40_gib_is_refused_fast_in_bounded_memory() {
    let (base, objects) = real_snapshot();
    let id = ObjectId::of(b"forty gibibytes");
    let manifest = with_big_file(&base, 40 * GIB, id);
    let mut tar = Vec::new();
    archive(&mut tar, &manifest, &objects, (id, 40 * GIB, Data::Nothing));
    assert!(tar.len() < 16 * 1024, "{} bytes", tar.len());
    let m = import_hostile(&tar, "40gib.tar");
    assert_refused(&m, 1, "exceeds the per-file limit");
}

#[test]
fn an_object_header_declaring_more_than_its_manifest_is_refused_before_its_data() {
    // The manifest is within the bounds; one object's header declares 40 GiB.
    let (manifest, objects) = real_snapshot();
    let mut tar = Vec::new();
    entry(
        &mut tar,
        "manifest.json",
        0o444,
        manifest.bytes.len() as u64,
        &Data::Bytes(manifest.bytes.clone()),
    );
    let digest = format!("{}  manifest.json\n", manifest.digest).into_bytes();
    entry(
        &mut tar,
        "manifest.sha256",
        0o444,
        digest.len() as u64,
        &Data::Bytes(digest),
    );
    let (name, mode, _) = &objects[0];
    entry(&mut tar, name, *mode, 40 * GIB, &Data::Nothing);
    let m = import_hostile(&tar, "header.tar");
    assert_refused(&m, 1, "is not the one `cestore export` writes");
}

#[test]
fn four_gib_of_data_after_the_archive_inside_the_zstd_frame_is_never_decompressed() {
    let (manifest, objects) = real_snapshot();
    let bundle = sealed_zstd(|w| {
        // The archive as export writes it, then 4 GiB of zeros in the same frame.
        let mut tar = Vec::new();
        archive_of(&mut tar, &manifest, &objects);
        w.write_all(&tar).expect("archive");
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..4096 {
            w.write_all(&chunk).expect("trailing zeros");
        }
    });
    let m = import_hostile(&bundle, "trailing.tar.zst");
    assert_refused(&m, 1, "after the archive's end");

    // The same archive without the trailing data imports: the refusal is
    // the trailing data's, not the archive's.
    let good = sealed_zstd(|w| {
        let mut tar = Vec::new();
        archive_of(&mut tar, &manifest, &objects);
        w.write_all(&tar).expect("archive");
    });
    let (env, _) = seeded_store();
    let file = env.path("good.tar.zst");
    fs::write(&file, good).expect("write bundle");
    let report = env.json([OsStr::new("import"), file.as_os_str(), OsStr::new("--json")]);
    assert_eq!(
        report["provenance"]["manifest_digest"],
        manifest.digest.to_string()
    );
}

/// The canonical archive of a real snapshot.
fn archive_of(w: &mut Vec<u8>, manifest: &Manifest, objects: &[(String, u32, Vec<u8>)]) {
    entry(
        w,
        "manifest.json",
        0o444,
        manifest.bytes.len() as u64,
        &Data::Bytes(manifest.bytes.clone()),
    );
    let digest = format!("{}  manifest.json\n", manifest.digest).into_bytes();
    entry(
        w,
        "manifest.sha256",
        0o444,
        digest.len() as u64,
        &Data::Bytes(digest),
    );
    let mut sorted = objects.to_vec();
    sorted.sort();
    for (name, mode, data) in &sorted {
        entry(
            w,
            name,
            *mode,
            data.len() as u64,
            &Data::Bytes(data.clone()),
        );
    }
    w.extend_from_slice(&[0u8; 1024]);
}

/// A raw HTTP agent for putting hand-made documents into the registry.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

const INDEX: &str = "application/vnd.oci.image.index.v1+json";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// Puts an index listing `listed` (digest, size) under `tag`.
fn put_index(target: &str, tag: &str, listed: &[(String, usize)], snapshot: &str) {
    let manifests: Vec<serde_json::Value> = listed
        .iter()
        .map(|(d, size)| serde_json::json!({"mediaType": MANIFEST, "digest": d, "size": size}))
        .collect();
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": manifests,
        "annotations": {"dev.cestore.snapshot": snapshot},
    });
    let put = agent()
        .put(&manifest_url(target, tag))
        .header("Content-Type", INDEX)
        .send(&serde_json::to_vec(&index).expect("index")[..])
        .expect("PUT index");
    assert_eq!(put.status().as_u16(), 201);
}

#[test]
fn an_index_listing_one_manifest_300_times_is_pulled_once_in_bounded_memory() {
    let Some(reg) = registry("index_300") else {
        return;
    };
    let (a, src) = crate::util::with_plugin("src", "1.0.0");
    crate::remote::many_files(&src, 40, |_| 20_000);
    let digest = a.ingest_digest(&src, "1.0.0");
    let target = repo(&reg, "index-300");
    a.json(["push", &digest, &target, "--plain-http", "--json"]);
    let bytes = agent()
        .get(&manifest_url(&target, &format!("sha256-{digest}")))
        .header("Accept", MANIFEST)
        .call()
        .expect("GET manifest")
        .body_mut()
        .read_to_vec()
        .expect("read manifest");
    let listed = vec![(format!("sha256:{}", ObjectId::of(&bytes)), bytes.len()); 300];
    put_index(&target, "dup300", &listed, &digest);

    let (b, _) = seeded_store();
    let reference = format!("{target}:dup300");
    let m = measure(
        &b,
        &[
            OsStr::new("pull"),
            OsStr::new(&reference),
            OsStr::new("--plain-http"),
            OsStr::new("--json"),
        ],
    );
    assert_eq!(m.code, 0, "{}", m.stderr);
    assert!(m.secs < 5.0, "took {:.2} s", m.secs);
    assert!(m.maxrss_kib < MAX_RSS_KIB, "peak RSS {} KiB", m.maxrss_kib);
    let pulled: serde_json::Value =
        serde_json::from_slice(&fs::read(b.path("measured.out")).expect("report"))
            .expect("JSON report");
    assert_eq!(pulled["pull"]["manifests"], 1);
    assert_eq!(pulled["provenance"]["manifest_digest"], digest.as_str());

    // Past the most manifests a snapshot can need, the index is refused.
    let many = vec![listed[0].clone(); 2049];
    put_index(&target, "dup2049", &many, &digest);
    let (c, before) = seeded_store();
    let reference = format!("{target}:dup2049");
    let m = measure(
        &c,
        &[
            OsStr::new("pull"),
            OsStr::new(&reference),
            OsStr::new("--plain-http"),
        ],
    );
    assert_refused(&m, 8, "2049 manifests");
    assert_eq!(store_state(&c.store), before);
}

#[test]
fn an_index_whose_config_breaks_the_bounds_is_refused_before_any_part() {
    let Some(reg) = registry("index_config_bounds") else {
        return;
    };
    let (base, _) = real_snapshot();
    let manifest = with_big_file(&base, GIB, ObjectId::of(b"never fetched"));
    let target = repo(&reg, "index-config");
    // A real snapshot's image manifest, which the index will list: fetched,
    // it would be refused for naming another config than the index's.
    let (a, real) = minimal_store();
    a.json(["push", &real, &target, "--plain-http", "--json"]);
    let part = agent()
        .get(&manifest_url(&target, &format!("sha256-{real}")))
        .header("Accept", MANIFEST)
        .call()
        .expect("GET manifest")
        .body_mut()
        .read_to_vec()
        .expect("read manifest");
    // The config blob, uploaded by raw HTTP: POST for a session, then PUT.
    let (registry_host, repository) = target.split_once('/').expect("registry/repo");
    let post = agent()
        .post(&format!(
            "http://{registry_host}/v2/{repository}/blobs/uploads/"
        ))
        .send(&[][..])
        .expect("POST upload");
    assert_eq!(post.status().as_u16(), 202);
    let location = post
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .expect("Location")
        .to_string();
    let location = if location.starts_with('/') {
        format!("http://{registry_host}{location}")
    } else {
        location
    };
    let sep = if location.contains('?') { '&' } else { '?' };
    let put = agent()
        .put(&format!(
            "{location}{sep}digest=sha256%3A{}",
            manifest.digest
        ))
        .header("Content-Type", "application/octet-stream")
        .send(&manifest.bytes[..])
        .expect("PUT blob");
    assert_eq!(put.status().as_u16(), 201);
    let digest = manifest.digest.to_string();
    let listed = (format!("sha256:{}", ObjectId::of(&part)), part.len());
    put_index(&target, &format!("sha256-{digest}"), &[listed], &digest);

    let (env, before) = seeded_store();
    let reference = format!("{target}:sha256-{digest}");
    let m = measure(
        &env,
        &[
            OsStr::new("pull"),
            OsStr::new(&reference),
            OsStr::new("--plain-http"),
        ],
    );
    assert_refused(&m, 1, "exceeds the per-file limit");
    assert!(!m.stderr.contains("names another config"), "{}", m.stderr);
    assert_eq!(store_state(&env.store), before);
}

/// A listener that accepts connections and never answers, for as long as
/// the test runs.
fn silent_listener() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            match conn {
                Ok(c) => held.push(c),
                Err(_) => break,
            }
        }
    });
    address
}

#[test]
fn a_registry_that_never_answers_times_out_with_exit_8_naming_it() {
    let address = silent_listener();
    let (env, before) = seeded_store();
    let reference = format!("{address}/cestore/silent:sha256-{}", "ab".repeat(32));
    let start = Instant::now();
    let out = env.run([
        "pull",
        &reference,
        "--plain-http",
        "--timeout",
        "1",
        "--json",
    ]);
    let took = start.elapsed();
    let stderr = assert_exit(&out, 8);
    assert!(stderr.contains(&address), "{stderr}");
    assert!(stderr.contains("did not answer in time"), "{stderr}");
    assert_eq!(parse_json(&out)["error"]["kind"], "remote");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(store_state(&env.store), before);

    // A push to it gives up the same way.
    let digest = before.snapshots[0]["manifest_digest"]
        .as_str()
        .expect("a snapshot's digest")
        .to_string();
    let start = Instant::now();
    let out = env.run([
        "push",
        &digest,
        &format!("{address}/cestore/silent"),
        "--plain-http",
        "--timeout",
        "1",
    ]);
    let stderr = assert_exit(&out, 8);
    assert!(stderr.contains(&address), "{stderr}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// `--timeout` is on push and pull, and documented in their help.
#[test]
fn the_timeout_flag_is_documented() {
    let env = TestEnv::new();
    for cmd in ["push", "pull"] {
        let out = env.run([cmd, "--help"]);
        assert_ok(&out);
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("--timeout <SECS>"), "{cmd}: {help}");
    }
    let out = env.run(["pull", "x/y:z", "--timeout", "0"]);
    assert_exit(&out, 2);
}
