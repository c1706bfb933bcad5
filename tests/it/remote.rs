//! Push, pull, export and import against a real registry.
//!
//! The registry tests need `CESTORE_TEST_REGISTRY` (`127.0.0.1:PORT` of a
//! registry started by `scripts/registry start DIR`), some also
//! `CESTORE_TEST_REGISTRY_DIR` (that DIR, to tamper with stored blobs) or
//! `CESTORE_TEST_ORAS_PY` (a Python with the `oras` package). `.ci/run` sets all
//! three; elsewhere these tests print why they skip.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

fn env_var(name: &str, test: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            // `.ci/run` sets these: in CI a missing one is a failure, not a skip.
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: {name} is not set, and CI must run the remote tests"
            );
            crate::util::skip(
                test,
                &format!("{name} is not set (scripts/registry start DIR, as .ci/run does)"),
            );
            None
        }
    }
}

pub(crate) fn registry(test: &str) -> Option<String> {
    env_var("CESTORE_TEST_REGISTRY", test)
}

/// A repository no other test (or earlier run) uses.
pub(crate) fn repo(registry: &str, test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{registry}/cestore-it/{}-{}-{nanos}",
        test.replace('_', "-"),
        std::process::id()
    )
}

/// Bytes that differ for every (salt, index).
pub(crate) fn noise(salt: u64, index: u64, len: usize) -> Vec<u8> {
    let mut x = salt
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(index.wrapping_mul(0xbf58_476d_1ce4_e5b9))
        | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A unique salt per call, so that tests never share blob contents by accident.
pub(crate) fn salt() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(7)
        ^ (u64::from(std::process::id()) << 32)
}

/// A release with `extra` generated files besides the minimal plugin: some
/// executable, some empty, some sharing a content, one content both
/// executable and not.
fn mixed_release(root: &Path, version: &str, extra: usize, salt: u64) {
    minimal_plugin(root, version);
    for i in 0..extra {
        let path = if i % 5 == 4 {
            root.join(format!("scripts/gen/tool{i:04}.sh"))
        } else {
            root.join(format!("skills/gen/file{i:04}.md"))
        };
        let data = match i % 7 {
            3 => Vec::new(),
            5 => b"shared content\n".to_vec(),
            _ => noise(salt, i as u64, 100 + i * 13),
        };
        write(&path, &data);
        if i % 5 == 4 {
            chmod(&path, 0o755);
        }
    }
    // The same bytes as a plain file and as an executable.
    write(&root.join("skills/gen/same.txt"), format!("same {salt}\n"));
    write(&root.join("scripts/same.sh"), format!("same {salt}\n"));
    chmod(&root.join("scripts/same.sh"), 0o755);
}

/// A release at the bounds: 2,048 files and a little under 16 MiB in all.
pub(crate) fn bounds_release(root: &Path, salt: u64) {
    minimal_plugin(root, "1.0.0");
    let small: u64 = 4 * 64;
    let files = 2048 - 4;
    let each = (16 * 1024 * 1024 - small) / files as u64 - 64;
    for i in 0..files {
        write(
            &root.join(format!("skills/bulk/d{:02}/f{i:04}.md", i % 32)),
            noise(salt, i as u64, each as usize),
        );
    }
}

/// Every file under `root`, by relative path.
fn files_under(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn go(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in fs::read_dir(dir).expect("read dir") {
            let e = e.expect("dir entry");
            let p = e.path();
            if e.file_type().expect("file type").is_dir() {
                go(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).expect("under root");
                out.insert(
                    rel.to_string_lossy().into_owned(),
                    fs::read(&p).expect("read file"),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    go(root, root, &mut out);
    out
}

fn push(env: &TestEnv, digest: &str, target: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["push", digest, target, "--plain-http", "--json"];
    args.extend_from_slice(extra);
    env.json(args)
}

fn pull(env: &TestEnv, reference: &str) -> serde_json::Value {
    env.json(["pull", reference, "--plain-http", "--json"])
}

/// Checks out `digest` and audits the view against the snapshot; returns the view.
fn checkout_and_verify(env: &TestEnv, digest: &str) -> PathBuf {
    let view = env.path("view");
    env.json([
        OsStr::new("checkout"),
        OsStr::new(digest),
        view.as_os_str(),
        OsStr::new("--json"),
    ]);
    let (code, differences) = env.verify_tree(&view, digest);
    assert_eq!(
        (code, &differences),
        (0, &serde_json::json!([])),
        "{differences}"
    );
    view
}

/// Asserts that the store holds no snapshot and no object.
fn assert_store_empty(env: &TestEnv) {
    if !env.store.exists() {
        return;
    }
    let list = env.json(["list", "--json"]);
    assert_eq!(
        list["snapshots"].as_array().map(Vec::len),
        Some(0),
        "the store holds a snapshot: {list}"
    );
    let objects = env.store.join("objects");
    if objects.exists() {
        for shard in fs::read_dir(&objects).expect("read objects") {
            let shard = shard.expect("shard").path();
            let n = fs::read_dir(&shard).expect("read shard").count();
            assert_eq!(n, 0, "objects were published in {}", shard.display());
        }
    }
}

fn distinct_contents(env: &TestEnv, digest: &str) -> BTreeSet<String> {
    let show = env.json(["show", digest, "--files", "--json"]);
    show["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["sha256"].as_str().expect("sha256").to_string())
        .collect()
}

fn head_status(url: &str) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    agent
        .head(url)
        .header(
            "Accept",
            "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json",
        )
        .call()
        .expect("HEAD the registry")
        .status()
        .as_u16()
}

pub(crate) fn manifest_url(target: &str, reference: &str) -> String {
    let (registry, repository) = target.split_once('/').expect("registry/repository");
    format!("http://{registry}/v2/{repository}/manifests/{reference}")
}

/// The OCI image manifest's media type.
pub(crate) const IMAGE_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// A client that answers every status rather than failing on one, for raw
/// requests to a registry.
pub(crate) fn raw_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// The image manifest bytes `target` (`registry/repository`) holds under
/// `reference`, by raw HTTP.
pub(crate) fn image_manifest(agent: &ureq::Agent, target: &str, reference: &str) -> Vec<u8> {
    agent
        .get(&manifest_url(target, reference))
        .header("Accept", IMAGE_MANIFEST)
        .call()
        .expect("GET manifest")
        .body_mut()
        .read_to_vec()
        .expect("read manifest")
}

#[test]
fn push_then_pull_into_an_empty_store_checks_out_the_same_tree() {
    let Some(reg) = registry("push_then_pull") else {
        return;
    };
    let (a, src, digest) = mixed_store("1.2.3", 40);
    let target = repo(&reg, "round-trip");

    let pushed = push(&a, &digest, &target, &[]);
    assert_eq!(pushed["manifest_digest"], digest.as_str());
    assert_eq!(pushed["reference"], format!("{target}:sha256-{digest}"));
    assert_eq!(
        pushed["media_type"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(pushed["format"], 2);
    assert_eq!(pushed["blobs_uploaded"], pushed["blobs_total"]);
    assert_eq!(pushed["blobs_present"], 0);
    // A small release: its files in one pack, plus the canonical manifest.
    assert_eq!(pushed["packs_total"], 1, "{pushed}");
    assert_eq!(pushed["blobs_total"], 2);
    assert_eq!(pushed["layers"], 1);

    let b = TestEnv::new();
    let pulled = pull(&b, &format!("{target}:sha256-{digest}"));
    assert_eq!(pulled["provenance"]["manifest_digest"], digest.as_str());
    assert_eq!(pulled["provenance"]["version"], "1.2.3");
    assert_eq!(pulled["ingest"]["already_present"], false);
    let remote_digest = pushed["remote_digest"].as_str().expect("remote digest");
    let source = format!("oci://{target}@{remote_digest}");
    assert_eq!(pulled["ingest"]["source"], source.as_str());
    assert_eq!(pulled["pull"]["format"], 2);
    assert_eq!(pulled["pull"]["blobs_fetched"], 1);
    assert_eq!(pulled["pull"]["packs_fetched"], 1);
    assert_eq!(pulled["pull"]["packs_skipped"], 0);
    let files = b.json(["show", &digest, "--files", "--json"]);
    let nonempty: BTreeSet<(&str, bool)> = files["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter(|f| f["size"] != 0)
        .filter_map(|f| Some((f["sha256"].as_str()?, f["executable"].as_bool()?)))
        .collect();
    assert_eq!(pulled["ingest"]["new_objects"], nonempty.len() as u64);
    let log = b.json(["log", "--json"]);
    assert!(log.to_string().contains(&source), "{log}");

    let view = checkout_and_verify(&b, &digest);
    assert_eq!(
        files_under(&view),
        files_under(&src),
        "the view differs from the release"
    );

    // A second pull fetches nothing; the other reference forms name the same snapshot.
    let again = pull(&b, &format!("{target}@sha256:{digest}"));
    assert_eq!(again["pull"]["blobs_fetched"], 0);
    assert_eq!(again["pull"]["packs_skipped"], 1);
    assert_eq!(again["ingest"]["already_present"], true);
    let c = TestEnv::new();
    let by_manifest = pull(&c, &format!("{target}@{remote_digest}"));
    assert_eq!(
        by_manifest["provenance"]["manifest_digest"],
        digest.as_str()
    );
}

#[test]
fn a_repush_uploads_nothing_and_publishes_the_same_manifest() {
    let Some(reg) = registry("repush") else {
        return;
    };
    let (env, _, digest) = mixed_store("1.0.0", 25);
    let target = repo(&reg, "repush");
    let first = push(&env, &digest, &target, &[]);
    assert!(first["blobs_uploaded"].as_u64() > Some(0));
    let second = push(&env, &digest, &target, &["--jobs", "8"]);
    assert_eq!(second["blobs_uploaded"], 0, "{second}");
    assert_eq!(second["packs_uploaded"], 0, "{second}");
    assert_eq!(second["bytes_uploaded"], 0);
    assert_eq!(second["blobs_present"], first["blobs_total"]);
    assert_eq!(second["remote_digest"], first["remote_digest"]);
}

#[test]
fn two_releases_sharing_files_upload_the_shared_blobs_once() {
    let Some(reg) = registry("shared_blobs") else {
        return;
    };
    let env = TestEnv::new();
    let s = salt();
    let one = env.path("one");
    let two = env.path("two");
    mixed_release(&one, "1.0.0", 30, s);
    mixed_release(&two, "1.0.1", 30, s);
    write(&two.join("skills/gen/new-in-two.md"), noise(s, 999, 500));
    write(&two.join("skills/gen/file0000.md"), noise(s, 1000, 300));
    let d1 = env.ingest_digest(&one, "1.0.0");
    let d2 = env.ingest_digest(&two, "1.0.1");
    let c1 = distinct_contents(&env, &d1);
    let c2 = distinct_contents(&env, &d2);
    let target = repo(&reg, "shared");
    // Format 1: one blob per distinct content.
    let p1 = push(&env, &d1, &target, &["--format", "1"]);
    assert_eq!(p1["blobs_uploaded"], c1.len() as u64 + 1);
    let p2 = push(&env, &d2, &target, &["--format", "1"]);
    let only_two = c2.difference(&c1).count() as u64;
    let shared = c2.intersection(&c1).count() as u64;
    assert!(
        only_two >= 3 && shared > 10,
        "{only_two} new, {shared} shared"
    );
    // The new contents and the second release's own manifest.
    assert_eq!(p2["blobs_uploaded"], only_two + 1, "{p2}");
    assert_eq!(p2["blobs_present"], shared, "{p2}");
}

#[test]
fn a_tampered_blob_is_refused_and_nothing_enters_the_store() {
    let Some(reg) = registry("tampered_blob") else {
        return;
    };
    let Some(dir) = env_var("CESTORE_TEST_REGISTRY_DIR", "tampered_blob") else {
        return;
    };
    let (a, src) = mixed_plugin("1.0.0", 10);
    let victim = noise(salt(), 4242, 4000);
    write(&src.join("skills/gen/victim.md"), &victim);
    let digest = a.ingest_digest(&src, "1.0.0");
    let target = repo(&reg, "tampered");
    // Format 1, where the file is its own blob.
    push(&a, &digest, &target, &["--format", "1"]);

    let hex = {
        use sha2::Digest as _;
        let h = sha2::Sha256::digest(&victim);
        h.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let blob = Path::new(&dir).join(format!(
        "docker/registry/v2/blobs/sha256/{}/{hex}/data",
        &hex[..2]
    ));
    let mut bad = fs::read(&blob).expect("read the stored blob");
    assert_eq!(bad, victim);
    bad[1234] ^= 0x01;
    fs::write(&blob, &bad).expect("tamper with the blob");

    let reference = format!("{target}:sha256-{digest}");
    pull_refused(&reference, 1, "integrity", &["victim.md", "hashes to"], "");
}

#[test]
fn a_tag_that_names_another_snapshot_is_refused() {
    let Some(reg) = registry("lying_tag") else {
        return;
    };
    let (a, _, digest) = mixed_store("1.0.0", 5);
    let target = repo(&reg, "lying");
    push(&a, &digest, &target, &[]);
    // Copy the manifest under the tag of a snapshot it is not, by raw HTTP.
    let agent = raw_agent();
    let media = IMAGE_MANIFEST;
    let bytes = image_manifest(&agent, &target, &format!("sha256-{digest}"));
    let fake = "ab".repeat(32);
    let put = agent
        .put(&manifest_url(&target, &format!("sha256-{fake}")))
        .header("Content-Type", media)
        .send(&bytes[..])
        .expect("PUT manifest");
    assert_eq!(put.status().as_u16(), 201);
    let b = TestEnv::new();
    let out = b.run(["pull", &format!("{target}:sha256-{fake}"), "--plain-http"]);
    let stderr = assert_exit(&out, 1);
    assert!(stderr.contains(&fake), "{stderr}");
    assert_store_empty(&b);
}

#[test]
fn a_killed_push_leaves_no_visible_tag() {
    let Some(reg) = registry("killed_push") else {
        return;
    };
    let storage = std::env::var("CESTORE_TEST_REGISTRY_DIR").ok();
    let (env, _, digest) = mixed_store("1.0.0", 400);
    let mut killed_mid_push = 0;
    for attempt in 0..3 {
        let target = repo(&reg, &format!("killed-{attempt}"));
        let repository = target.split_once('/').expect("repository").1;
        let mut child = env
            .cmd([
                "push",
                &digest,
                &target,
                "--plain-http",
                "--jobs",
                "1",
                "--format",
                "1",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn push");
        // Kill once the registry has linked a first blob into the repository
        // (or after a short delay, without access to its storage).
        let layers = storage.as_ref().map(|d| {
            Path::new(d).join(format!(
                "docker/registry/v2/repositories/{repository}/_layers/sha256"
            ))
        });
        let start = Instant::now();
        loop {
            if child.try_wait().expect("poll push").is_some() {
                break;
            }
            let seen = match &layers {
                Some(l) => fs::read_dir(l).is_ok_and(|mut d| d.next().is_some()),
                None => start.elapsed() > Duration::from_millis(150 * (attempt + 1)),
            };
            if seen || start.elapsed() > Duration::from_secs(30) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let finished = child.try_wait().expect("poll push");
        if finished.is_none() {
            child.kill().expect("SIGKILL the push");
            killed_mid_push += 1;
        }
        let status = child.wait().expect("wait for push");
        let tag = manifest_url(&target, &format!("sha256-{digest}"));
        let visible = head_status(&tag);
        if status.success() {
            assert_eq!(visible, 200);
        } else {
            assert_eq!(visible, 404, "a killed push left its tag visible");
            // A later push completes, reusing what the killed one uploaded.
            let done = push(&env, &digest, &target, &["--format", "1"]);
            assert_eq!(head_status(&tag), 200);
            assert_eq!(
                done["blobs_present"].as_u64().unwrap_or(0)
                    + done["blobs_uploaded"].as_u64().unwrap_or(0),
                done["blobs_total"].as_u64().unwrap_or(1)
            );
        }
    }
    assert!(killed_mid_push > 0, "no push was killed mid-way");
}

#[test]
fn many_files_fall_back_to_an_index_and_pull_back_equal() {
    let Some(reg) = registry("index_fallback") else {
        return;
    };
    let (a, src) = crate::util::with_plugin("src", "2.0.0");
    many_files(&src, 26, |i| 64 + i as usize);
    let digest = a.ingest_digest(&src, "2.0.0");
    let target = repo(&reg, "index");
    let pushed = push(
        &a,
        &digest,
        &target,
        &["--max-layers", "10", "--format", "1"],
    );
    assert_eq!(
        pushed["media_type"],
        "application/vnd.oci.image.index.v1+json"
    );
    assert_eq!(pushed["layers"], 30);
    assert_eq!(pushed["manifests"], 3);

    let b = TestEnv::new();
    let pulled = pull(&b, &format!("{target}:sha256-{digest}"));
    assert_eq!(pulled["pull"]["manifests"], 3);
    assert_eq!(pulled["pull"]["format"], 1);
    assert_eq!(pulled["pull"]["blobs_fetched"], 30);
    let view = checkout_and_verify(&b, &digest);
    assert_eq!(files_under(&view), files_under(&src));

    // The index's own digest is a reference too.
    let c = TestEnv::new();
    let remote_digest = pushed["remote_digest"].as_str().expect("remote digest");
    let again = pull(&c, &format!("{target}@{remote_digest}"));
    assert_eq!(again["provenance"]["manifest_digest"], digest.as_str());
}

#[test]
fn oras_pulls_what_cestore_pushed() {
    let Some(reg) = registry("oras_interop") else {
        return;
    };
    let Some(python) = env_var("CESTORE_TEST_ORAS_PY", "oras_interop") else {
        return;
    };
    let (env, src) = mixed_plugin("3.1.4", 20);
    // A content of 256 KiB or more travels raw, under its path.
    write(&src.join("assets/model.bin"), noise(salt(), 77, 300 * 1024));
    let digest = env.ingest_digest(&src, "3.1.4");
    let target = repo(&reg, "oras");
    let pushed = push(&env, &digest, &target, &[]);
    assert_eq!(pushed["layers"], 2, "{pushed}");
    let out_dir = env.path("oras-out");
    let script = r#"
import sys, oras.client
host, target, outdir = sys.argv[1:4]
client = oras.client.OrasClient(hostname=host, insecure=True)
for path in client.pull(target=target, outdir=outdir):
    print(path)
"#;
    let out = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(&reg)
        .arg(format!("{target}:sha256-{digest}"))
        .arg(&out_dir)
        .output()
        .expect("run oras-py");
    assert_ok(&out);
    let pulled = files_under(&out_dir);
    let release = files_under(&src);
    // One file per layer: a raw content under its title, equal to the
    // release's file; a pack under its digest, a tar any tar reads, whose
    // entries are named by their contents' SHA-256.
    assert_eq!(pulled.len() as u64, pushed["layers"].as_u64().unwrap_or(0));
    assert_eq!(pushed["packs_total"], 1, "{pushed}");
    let mut contents = BTreeSet::new();
    for (path, data) in &pulled {
        if path.starts_with("sha256:") {
            let mut archive = tar::Archive::new(&data[..]);
            for entry in archive.entries().expect("read the pack") {
                let mut entry = entry.expect("a pack entry");
                let name = entry
                    .path()
                    .expect("entry name")
                    .to_string_lossy()
                    .into_owned();
                let mut body = Vec::new();
                std::io::Read::read_to_end(&mut entry, &mut body).expect("read an entry");
                assert_eq!(name, sha_hex(&body));
                contents.insert(body);
            }
        } else {
            assert_eq!(
                release.get(path),
                Some(data),
                "oras wrote '{path}' unlike the release"
            );
            contents.insert(data.clone());
        }
    }
    // Every distinct non-empty content of the release arrived.
    let release_contents: BTreeSet<Vec<u8>> = release
        .values()
        .filter(|d| !d.is_empty())
        .cloned()
        .collect();
    assert_eq!(contents, release_contents);
}

#[test]
fn pulling_a_missing_tag_or_over_the_wrong_protocol_fails_clearly() {
    let Some(reg) = registry("pull_errors") else {
        return;
    };
    let env = TestEnv::new();
    let target = repo(&reg, "missing");
    let out = env.run([
        "pull",
        &format!("{target}:sha256-{}", "0".repeat(64)),
        "--plain-http",
        "--json",
    ]);
    assert_exit(&out, 4);
    assert_eq!(parse_json(&out)["error"]["kind"], "not-found");
    // HTTPS to a plain-HTTP registry: a remote error, exit 8.
    let out = env.run(["pull", &format!("{target}:latest"), "--json"]);
    assert_exit(&out, 8);
    assert_eq!(parse_json(&out)["error"]["kind"], "remote");
    // A pull needs a tag or digest; a push takes none.
    assert_exit(&env.run(["pull", &target, "--plain-http"]), 2);
    assert_store_empty(&env);
}

fn export(env: &TestEnv, digest: &str, file: &Path, zstd: bool) -> serde_json::Value {
    let mut args = vec![
        OsStr::new("export"),
        OsStr::new(digest),
        OsStr::new("-o"),
        file.as_os_str(),
        OsStr::new("--json"),
    ];
    if zstd {
        args.push(OsStr::new("--zstd"));
    }
    env.json(args)
}

#[test]
fn export_then_import_round_trips_plain_and_zstd() {
    let (a, src, digest) = mixed_store("1.0.0", 30);
    for zstd in [false, true] {
        let file = a.path(if zstd { "b.tar.zst" } else { "b.tar" });
        let report = export(&a, &digest, &file, zstd);
        assert_eq!(report["format"], if zstd { "tar+zstd" } else { "tar" });
        // The same snapshot gives the same bundle, byte for byte.
        let twin = a.path(if zstd { "twin.tar.zst" } else { "twin.tar" });
        export(&a, &digest, &twin, zstd);
        assert_eq!(
            fs::read(&file).expect("bundle"),
            fs::read(&twin).expect("twin")
        );
        // An existing file is never overwritten.
        let out = a.run([
            OsStr::new("export"),
            OsStr::new(&digest),
            OsStr::new("-o"),
            file.as_os_str(),
        ]);
        assert_exit(&out, 6);

        let b = TestEnv::new();
        let imported = b.json([
            OsStr::new("import"),
            file.as_os_str(),
            OsStr::new("--digest"),
            OsStr::new(&digest),
            OsStr::new("--json"),
        ]);
        assert_eq!(imported["provenance"]["manifest_digest"], digest.as_str());
        assert_eq!(imported["bundle"]["format"], report["format"]);
        assert!(imported["ingest"]["source"]
            .as_str()
            .is_some_and(|s| s.starts_with("bundle:")));
        let view = checkout_and_verify(&b, &digest);
        assert_eq!(files_under(&view), files_under(&src));
    }
    // A plain tar is a tar any tool reads.
    let listing = Command::new("tar")
        .arg("tf")
        .arg(a.path("b.tar"))
        .output()
        .expect("run tar");
    assert_ok(&listing);
    let names = String::from_utf8_lossy(&listing.stdout).into_owned();
    let mut lines = names.lines();
    assert_eq!(lines.next(), Some("manifest.json"));
    assert_eq!(lines.next(), Some("manifest.sha256"));
    // Where the snapshot was first ingested, then the objects.
    assert_eq!(lines.next(), Some("origin.json"));
    assert!(lines.all(|l| l.starts_with("objects/")));
}

#[test]
fn a_bundle_with_one_flipped_byte_is_refused_and_the_store_stays_empty() {
    let (a, _, digest) = mixed_store("1.0.0", 8);
    for zstd in [false, true] {
        let file = a.path(if zstd { "b.tar.zst" } else { "b.tar" });
        export(&a, &digest, &file, zstd);
        let good = fs::read(&file).expect("bundle");
        // Positions spread over the whole file: headers, data, padding, end blocks.
        let mut positions: BTreeSet<usize> = (0..good.len()).step_by(good.len() / 50 + 1).collect();
        positions.extend([
            0,
            3,
            100,
            148,
            257,
            512,
            600,
            good.len() / 2,
            good.len() - 1,
        ]);
        for pos in positions {
            let mut bad = good.clone();
            bad[pos] ^= 0x20;
            let damaged = a.path("damaged");
            fs::write(&damaged, &bad).expect("write damaged bundle");
            let b = TestEnv::new();
            let out = b.run([
                OsStr::new("import"),
                damaged.as_os_str(),
                OsStr::new("--json"),
            ]);
            assert_eq!(
                out.status.code(),
                Some(1),
                "flipping byte {pos} of the {} bundle: {}",
                if zstd { "zstd" } else { "tar" },
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(parse_json(&out)["error"]["kind"], "integrity");
            assert_store_empty(&b);
        }
    }
}

/// Push and pull times of a release at the bounds (2,048 files, 16 MiB), cold
/// and warm. Run with the release build:
/// `cargo test --release --test it -- --ignored --nocapture at_the_bounds`.
#[test]
#[ignore = "a measurement, not a check: run it by name"]
fn push_and_pull_times_at_the_bounds() {
    let Some(reg) = registry("at_the_bounds") else {
        return;
    };
    let a = TestEnv::new();
    let src = a.path("src");
    bounds_release(&src, salt());
    let digest = a.ingest_digest(&src, "1.0.0");
    let target = repo(&reg, "bounds");
    let b = TestEnv::new();
    let timed = |what: &str, env: &TestEnv, args: &[&str]| {
        let start = Instant::now();
        let report = env.json(args);
        let secs = start.elapsed().as_secs_f64();
        eprintln!("{what}: {secs:.2} s  {report}");
    };
    let reference = format!("{target}:sha256-{digest}");
    timed(
        "push cold",
        &a,
        &["push", &digest, &target, "--plain-http", "--json"],
    );
    timed(
        "push warm",
        &a,
        &["push", &digest, &target, "--plain-http", "--json"],
    );
    timed(
        "pull cold",
        &b,
        &["pull", &reference, "--plain-http", "--json"],
    );
    timed(
        "pull warm",
        &b,
        &["pull", &reference, "--plain-http", "--json"],
    );
}

/// A stub in front of the registry that demands credentials: `basic` asks for
/// Basic authentication; `bearer` sends clients to its token endpoint, which
/// wants Basic authentication and hands out a token the proxy then requires.
const AUTH_PROXY: &str = r#"
import base64, http.client, http.server, itertools, json, sys, threading
mode, upstream = sys.argv[1], sys.argv[2]
GOOD = "Basic " + base64.b64encode(b"alice:s3cret").decode()
tokens, counter = set(), itertools.count()

class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def reply(self, status, headers=(), body=b""):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    def handle_one(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        auth = self.headers.get("Authorization", "")
        host = self.headers.get("Host")
        if self.path.startswith("/token"):
            if auth != GOOD:
                return self.reply(401, body=b'{"details":"bad credentials"}')
            t = "tok-%d" % next(counter)
            tokens.add(t)
            return self.reply(200, [("Content-Type", "application/json")], json.dumps({"token": t}).encode())
        if mode == "basic":
            ok = auth == GOOD
            challenge = 'Basic realm="stub"'
        else:
            ok = auth.startswith("Bearer ") and auth[7:] in tokens
            challenge = 'Bearer realm="http://%s/token",service="stub",scope="repository:x:pull"' % host
        if not ok:
            return self.reply(401, [("WWW-Authenticate", challenge), ("Content-Type", "application/json")],
                              b'{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}')
        conn = http.client.HTTPConnection(upstream)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("authorization", "content-length")}
        headers["Content-Length"] = str(len(body))
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        keep = [(k, v) for k, v in resp.getheaders() if k.lower() not in ("content-length", "transfer-encoding", "connection")]
        if self.command == "HEAD":
            self.send_response(resp.status)
            for k, v in keep:
                self.send_header(k, v)
            self.send_header("Content-Length", resp.getheader("Content-Length") or "0")
            self.end_headers()
        else:
            self.reply(resp.status, keep, data)
        conn.close()
    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = handle_one

class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    def handle_error(self, request, client_address):
        pass  # a client closing its kept-alive connection is not news

server = Server(("127.0.0.1", 0), Proxy)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// The stub proxy, killed when dropped.
struct AuthProxy {
    child: std::process::Child,
    address: String,
}

impl AuthProxy {
    fn start(mode: &str, upstream: &str) -> AuthProxy {
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(AUTH_PROXY)
            .arg(mode)
            .arg(upstream)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the auth proxy");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("proxy stdout");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
            .expect("read the proxy's port");
        AuthProxy {
            child,
            address: format!("127.0.0.1:{}", line.trim()),
        }
    }
}

impl Drop for AuthProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs cestore with only the credentials given (no ambient ones).
fn run_with(env: &TestEnv, args: &[&str], vars: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = env.cmd(args);
    for k in [
        "CESTORE_REGISTRY_TOKEN",
        "CESTORE_REGISTRY_USER",
        "CESTORE_REGISTRY_PASSWORD",
    ] {
        cmd.env_remove(k);
    }
    cmd.env("HOME", env.path("home"));
    cmd.env("DOCKER_CONFIG", env.path("no-docker-config"));
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().expect("run cestore")
}

#[test]
fn credentials_answer_basic_and_bearer_challenges() {
    let Some(reg) = registry("registry_auth") else {
        return;
    };
    let (a, _, digest) = mixed_store("1.0.0", 6);
    for mode in ["basic", "bearer"] {
        let proxy = AuthProxy::start(mode, &reg);
        let target = repo(&proxy.address, &format!("auth-{mode}"));
        let push_args = ["push", &digest, &target, "--plain-http", "--json"];

        // No credentials, then wrong ones: refused, exit 8.
        let out = run_with(&a, &push_args, &[]);
        let stderr = assert_exit(&out, 8);
        assert!(stderr.contains("authentication"), "{mode}: {stderr}");
        assert_eq!(parse_json(&out)["error"]["kind"], "remote");
        let wrong = [
            ("CESTORE_REGISTRY_USER", "alice"),
            ("CESTORE_REGISTRY_PASSWORD", "wrong"),
        ];
        assert_exit(&run_with(&a, &push_args, &wrong), 8);

        // The environment's user and password.
        let good = [
            ("CESTORE_REGISTRY_USER", "alice"),
            ("CESTORE_REGISTRY_PASSWORD", "s3cret"),
        ];
        let out = run_with(&a, &push_args, &good);
        assert_ok(&out);
        assert_eq!(parse_json(&out)["blobs_present"], 0);

        // A Docker config file's auths entry.
        let b = TestEnv::new();
        let config_dir = b.path("docker");
        let auth = {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode("alice:s3cret")
        };
        write(
            &config_dir.join("config.json"),
            format!(
                r#"{{"auths":{{"http://{}":{{"auth":"{auth}"}}}}}}"#,
                proxy.address
            ),
        );
        let reference = format!("{target}:sha256-{digest}");
        let config = config_dir.to_string_lossy().into_owned();
        let out = run_with(
            &b,
            &["pull", &reference, "--plain-http", "--json"],
            &[("DOCKER_CONFIG", &config)],
        );
        assert_ok(&out);
        assert_eq!(
            parse_json(&out)["provenance"]["manifest_digest"],
            digest.as_str()
        );
    }
}

/// The image manifest a tag names, by raw HTTP.
pub(crate) fn get_manifest(target: &str, reference: &str) -> serde_json::Value {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let bytes = agent
        .get(&manifest_url(target, reference))
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .call()
        .expect("GET manifest")
        .body_mut()
        .read_to_vec()
        .expect("read manifest");
    serde_json::from_slice(&bytes).expect("manifest JSON")
}

/// Publishes `manifest` under `tag`, by raw HTTP.
pub(crate) fn put_manifest(target: &str, tag: &str, manifest: &serde_json::Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let put = agent
        .put(&manifest_url(target, tag))
        .header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        .send(&serde_json::to_vec(manifest).expect("serialise")[..])
        .expect("PUT manifest");
    assert_eq!(put.status().as_u16(), 201);
}

/// The packs' layer descriptors of a manifest.
fn pack_layers(manifest: &serde_json::Value) -> Vec<serde_json::Value> {
    manifest["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .filter(|l| l["mediaType"] == "application/vnd.cestore.pack.v1.tar")
        .cloned()
        .collect()
}

/// Where the local registry keeps a blob's bytes.
fn blob_file(dir: &str, digest: &str) -> PathBuf {
    let hex = digest.strip_prefix("sha256:").expect("sha256 digest");
    Path::new(dir).join(format!(
        "docker/registry/v2/blobs/sha256/{}/{hex}/data",
        &hex[..2]
    ))
}

/// A release with several packs and a raw content: a group big enough for
/// packs of its own, small groups sharing a pack, and a 300 KiB file.
fn packed_plugin(root: &Path, version: &str, salt: u64) {
    mixed_release(root, version, 30, salt);
    for i in 0..6 {
        write(
            &root.join(format!("skills/big/part{i}.md")),
            noise(salt, 500 + i, 200 * 1024),
        );
    }
    write(&root.join("assets/model.bin"), noise(salt, 600, 300 * 1024));
}

#[test]
fn both_formats_round_trip_and_pull_reads_each() {
    let Some(reg) = registry("both_formats") else {
        return;
    };
    let a = TestEnv::new();
    let src = a.path("src");
    packed_plugin(&src, "4.0.0", salt());
    let digest = a.ingest_digest(&src, "4.0.0");
    let contents = distinct_contents(&a, &digest);
    for (format, parts) in [("1", "1000"), ("2", "1000"), ("2", "1")] {
        let target = repo(&reg, &format!("format-{format}-{parts}"));
        let pushed = push(
            &a,
            &digest,
            &target,
            &["--format", format, "--max-layers", parts],
        );
        assert_eq!(pushed["format"], format.parse::<u64>().expect("number"));
        match (format, parts) {
            ("1", _) => {
                // One layer per distinct object, no pack.
                let manifest = get_manifest(&target, &format!("sha256-{digest}"));
                assert!(pack_layers(&manifest).is_empty());
                assert_eq!(
                    manifest["artifactType"],
                    "application/vnd.cestore.snapshot.v1"
                );
                assert_eq!(pushed["blobs_total"], contents.len() as u64 + 1);
            }
            (_, "1000") => {
                // The big group's pack, the shared pack, the raw file.
                let manifest = get_manifest(&target, &format!("sha256-{digest}"));
                assert_eq!(
                    manifest["artifactType"],
                    "application/vnd.cestore.snapshot.v2"
                );
                assert_eq!(pack_layers(&manifest).len(), 2, "{manifest}");
                assert_eq!(pushed["layers"], 3);
                assert_eq!(pushed["blobs_total"], 4);
            }
            _ => {
                // Format 2 under an index of one-layer manifests.
                assert_eq!(pushed["manifests"], 3, "{pushed}");
                assert_eq!(pushed["layers"], 3);
                assert_eq!(
                    pushed["media_type"],
                    "application/vnd.oci.image.index.v1+json"
                );
            }
        }
        let b = TestEnv::new();
        let pulled = pull(&b, &format!("{target}:sha256-{digest}"));
        assert_eq!(pulled["pull"]["format"], pushed["format"]);
        assert_eq!(pulled["pull"]["manifests"], pushed["manifests"]);
        assert_eq!(pulled["provenance"]["manifest_digest"], digest.as_str());
        let view = checkout_and_verify(&b, &digest);
        assert_eq!(files_under(&view), files_under(&src), "format {format}");
    }
}

#[test]
fn a_release_that_changes_one_file_moves_one_pack_each_way() {
    let Some(reg) = registry("one_pack") else {
        return;
    };
    let a = TestEnv::new();
    let s = salt();
    let one = a.path("one");
    let two = a.path("two");
    packed_plugin(&one, "5.0.0", s);
    packed_plugin(&two, "5.0.1", s);
    // The same size, other bytes: one file of one small group.
    let victim = two.join("skills/gen/file0002.md");
    let len = fs::metadata(&victim).expect("stat").len() as usize;
    write(&victim, noise(s, 4242, len));
    let d1 = a.ingest_digest(&one, "5.0.0");
    let d2 = a.ingest_digest(&two, "5.0.1");
    let target = repo(&reg, "one-pack");

    let p1 = push(&a, &d1, &target, &[]);
    assert_eq!(p1["packs_total"], 2, "{p1}");
    assert_eq!(p1["blobs_uploaded"], p1["blobs_total"]);
    // The same release again: nothing uploaded.
    let again = push(&a, &d1, &target, &[]);
    assert_eq!(again["blobs_uploaded"], 0, "{again}");
    assert_eq!(again["bytes_uploaded"], 0);
    // The next release: one pack and its canonical manifest (the image
    // manifest is published beside them).
    let p2 = push(&a, &d2, &target, &[]);
    assert_eq!(p2["packs_total"], 2, "{p2}");
    assert_eq!(p2["packs_uploaded"], 1, "{p2}");
    assert_eq!(p2["blobs_uploaded"], 2, "{p2}");
    assert_eq!(p2["blobs_present"], 2, "{p2}");
    let m1 = get_manifest(&target, &format!("sha256-{d1}"));
    let m2 = get_manifest(&target, &format!("sha256-{d2}"));
    let (k1, k2) = (pack_layers(&m1), pack_layers(&m2));
    let shared: Vec<_> = k2.iter().filter(|l| k1.contains(l)).collect();
    assert_eq!(shared.len(), 1, "the unchanged group's pack is shared");

    // A store that holds the first release fetches the one changed pack.
    let b = TestEnv::new();
    let first = pull(&b, &format!("{target}:sha256-{d1}"));
    assert_eq!(first["pull"]["packs_fetched"], 2);
    assert_eq!(first["pull"]["blobs_fetched"], 3);
    let second = pull(&b, &format!("{target}:sha256-{d2}"));
    assert_eq!(second["pull"]["packs_fetched"], 1, "{second}");
    assert_eq!(second["pull"]["packs_skipped"], 1, "{second}");
    assert_eq!(second["pull"]["blobs_fetched"], 1, "{second}");
    // The changed file and plugin.json (its version).
    assert_eq!(second["ingest"]["new_objects"], 2, "{second}");
    let view = checkout_and_verify(&b, &d2);
    assert_eq!(files_under(&view), files_under(&two));
}

/// Pushes a packed release and returns (store, digest, target, its packs).
fn pushed_packs(reg: &str, name: &str) -> (TestEnv, String, String, Vec<serde_json::Value>) {
    let a = TestEnv::new();
    let src = a.path("src");
    packed_plugin(&src, "6.0.0", salt());
    let digest = a.ingest_digest(&src, "6.0.0");
    let target = repo(reg, name);
    push(&a, &digest, &target, &[]);
    let packs = pack_layers(&get_manifest(&target, &format!("sha256-{digest}")));
    assert_eq!(packs.len(), 2);
    (a, digest, target, packs)
}

#[test]
fn a_tampered_or_truncated_pack_is_refused_and_nothing_enters_the_store() {
    let Some(reg) = registry("tampered_pack") else {
        return;
    };
    let Some(dir) = env_var("CESTORE_TEST_REGISTRY_DIR", "tampered_pack") else {
        return;
    };
    for (case, expect) in [
        ("data", "hashes to"),
        ("header", "has no header"),
        ("truncated", ""),
    ] {
        let (_a, digest, target, packs) = pushed_packs(&reg, &format!("bad-pack-{case}"));
        let pack_digest = packs[0]["digest"].as_str().expect("digest");
        let pack_hex = pack_digest.trim_start_matches("sha256:").to_string();
        let blob = blob_file(&dir, pack_digest);
        let mut bytes = fs::read(&blob).expect("read the stored pack");
        assert_eq!(bytes.len() as u64, packs[0]["size"].as_u64().expect("size"));
        match case {
            // A byte of the second object's data.
            "data" => {
                let slots = packs[0]["annotations"]["dev.cestore.pack"]
                    .as_str()
                    .expect("index");
                let second = slots.split(',').nth(1).expect("two objects");
                let offset: usize = second
                    .split(':')
                    .nth(1)
                    .expect("offset")
                    .parse()
                    .expect("n");
                bytes[offset + 3] ^= 0x20;
            }
            // A byte of the first header (in its name).
            "header" => bytes[40] ^= 0x01,
            _ => bytes.truncate(bytes.len() / 2),
        }
        fs::write(&blob, &bytes).expect("tamper with the pack");
        let (code, kind, expect) = if case == "truncated" {
            // The registry still announces the whole size and the body ends
            // short: the download fails (exit 8), naming the pack.
            (8, "remote", pack_hex.as_str())
        } else {
            (1, "integrity", expect)
        };
        let reference = format!("{target}:sha256-{digest}");
        pull_refused(&reference, code, kind, &[expect], case);
    }
}

#[test]
fn a_pack_index_that_points_outside_its_pack_is_refused_before_any_fetch() {
    let Some(reg) = registry("bad_index") else {
        return;
    };
    let (_a, digest, target, _) = pushed_packs(&reg, "bad-index");
    let good = get_manifest(&target, &format!("sha256-{digest}"));
    let edit = |f: &dyn Fn(&mut Vec<String>, &mut serde_json::Value)| {
        let mut m = good.clone();
        let layer = m["layers"]
            .as_array_mut()
            .expect("layers")
            .iter_mut()
            .find(|l| l["mediaType"] == "application/vnd.cestore.pack.v1.tar")
            .expect("a pack");
        let mut slots: Vec<String> = layer["annotations"]["dev.cestore.pack"]
            .as_str()
            .expect("index")
            .split(',')
            .map(str::to_string)
            .collect();
        f(&mut slots, layer);
        layer["annotations"]["dev.cestore.pack"] = slots.join(",").into();
        m
    };
    let field = |slot: &str, i: usize| -> u64 {
        slot.split(':')
            .nth(i)
            .expect("field")
            .parse()
            .expect("number")
    };
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        (
            "outside",
            edit(&|slots, layer| {
                let size = layer["size"].as_u64().expect("size");
                let last = slots.last_mut().expect("a slot");
                let hex = last.split(':').next().expect("hex").to_string();
                *last = format!("{hex}:{size}:{}", field(last, 2));
            }),
            "points outside",
        ),
        (
            "misplaced",
            edit(&|slots, _| {
                let first = &mut slots[0];
                let hex = first.split(':').next().expect("hex").to_string();
                *first = format!("{hex}:1024:{}", field(first, 2));
            }),
            "not where",
        ),
        (
            "unknown",
            edit(&|slots, _| {
                let first = &mut slots[0];
                let rest = first.split_once(':').expect("hex").1.to_string();
                *first = format!("{}:{rest}", "ab".repeat(32));
            }),
            "no content of the snapshot",
        ),
        (
            "missing",
            edit(&|slots, layer| {
                slots.pop();
                let _ = layer;
            }),
            "is listed with",
        ),
    ];
    for (name, manifest, expect) in cases {
        put_manifest(&target, name, &manifest);
        pull_refused(&format!("{target}:{name}"), 8, "remote", &[expect], name);
    }
}

#[test]
fn adversarial_releases_at_the_bounds_travel_in_fewer_than_100_layers() {
    let Some(reg) = registry("adversarial_bounds") else {
        return;
    };
    const FILES: usize = 2048 - 4;
    const TOTAL: u64 = 16 * 1024 * 1024 - 4096;
    let s = salt();
    // Every file its own group; then as many raw files as fit beside tiny
    // files in groups of their own (the most layers the layout can give).
    for (shape, raw) in [("own-groups", 0usize), ("raw-and-tiny", 63)] {
        let (a, src) = crate::util::with_plugin("src", "7.0.0");
        let tiny = (TOTAL - raw as u64 * 256 * 1024) / (FILES - raw) as u64;
        for i in 0..FILES {
            let (path, len) = if i < raw {
                (format!("assets/raw/r{i:02}.bin"), 256 * 1024)
            } else {
                (format!("skills/g{i:04}/f.md"), tiny)
            };
            write(&src.join(path), noise(s, i as u64, len as usize));
        }
        let digest = a.ingest_digest(&src, "7.0.0");
        let target = repo(&reg, shape);
        let pushed = push(&a, &digest, &target, &["--jobs", "8"]);
        let layers = pushed["layers"].as_u64().expect("layers");
        assert!(layers < 100, "{shape}: {pushed}");
        assert_eq!(pushed["manifests"], 1);
        assert_eq!(
            layers,
            pushed["packs_total"].as_u64().expect("packs") + raw as u64
        );
        let b = TestEnv::new();
        let pulled = pull(&b, &format!("{target}:sha256-{digest}"));
        assert_eq!(pulled["pull"]["blobs_fetched"], layers, "{shape}");
        let view = checkout_and_verify(&b, &digest);
        assert_eq!(files_under(&view).len(), 2048);
        eprintln!("{shape}: {layers} layers");
    }
}

/// The annotation that carries a snapshot's source records.
const SOURCES_ANNOTATION: &str = "dev.cestore.sources";

/// A release committed in a new repository whose `origin` remote carries
/// credentials, ingested from its commit with `--git`: returns the digest,
/// the commit and the record the ingest kept.
fn git_ingest(env: &TestEnv) -> (String, String, crate::json::SourceEntryOut) {
    let repo = crate::git::plugin_repo(env);
    crate::git::git(
        &repo,
        &[
            "remote",
            "add",
            "origin",
            "https://user:token@example.invalid/o/r.git",
        ],
    );
    let commit = crate::git::commit_all(&repo, "release");
    let report = env.json(crate::util::git_ingest(
        &repo,
        &commit,
        "1.0.0",
        &["--json"],
    ));
    let mut sources = source_entries(&report);
    assert_eq!(sources.len(), 1, "{report}");
    let entry = sources.remove(0);
    assert_eq!(entry.via, "ingest");
    assert_eq!(entry.record.commit.as_deref(), Some(commit.as_str()));
    assert_eq!(entry.record.repository, "https://example.invalid/o/r.git");
    (digest_of(&report), commit, entry)
}

/// The source records an ingest, pull or import report lists.
fn source_entries(report: &serde_json::Value) -> Vec<crate::json::SourceEntryOut> {
    serde_json::from_value(report["ingest"]["sources"].clone()).expect("ingest.sources")
}

/// The records kept on disk beside a snapshot.
fn kept_entries(env: &TestEnv, digest: &str) -> Vec<crate::json::SourceEntryOut> {
    let dir = env.store.join("sources").join(&digest[..2]).join(digest);
    let Ok(files) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    files
        .map(|f| {
            let bytes = fs::read(f.expect("record file").path()).expect("read a record");
            serde_json::from_slice(&bytes).expect("a record")
        })
        .collect()
}

/// Whether `s` is a time as cestore writes it: RFC 3339, UTC, milliseconds.
fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 24
        && b[4] == b'-'
        && b[10] == b'T'
        && b[19] == b'.'
        && b[23] == b'Z'
        && s[..4].parse::<u32>().is_ok()
}

#[test]
fn source_records_travel_through_a_registry_beside_the_standard_annotations() {
    let Some(reg) = registry("records_through_a_registry") else {
        return;
    };
    let a = TestEnv::new();
    let (digest, commit, ingested) = git_ingest(&a);
    let target = repo(&reg, "records");
    let pushed = push(&a, &digest, &target, &[]);

    // The manifest says where the bytes came from, in the standard terms.
    let tag = format!("sha256-{digest}");
    let manifest = get_manifest(&target, &tag);
    let annotations = &manifest["annotations"];
    assert_eq!(
        annotations["org.opencontainers.image.source"],
        ingested.record.repository.as_str(),
        "{manifest}"
    );
    assert_eq!(
        annotations["org.opencontainers.image.revision"],
        commit.as_str()
    );
    assert_eq!(annotations["org.opencontainers.image.version"], "1.0.0");
    let first = a.json(["show", &digest, "--json"])["first_ingested_at"].clone();
    assert_eq!(annotations["org.opencontainers.image.created"], first);
    assert!(is_rfc3339(first.as_str().unwrap()), "{first}");
    // The full records, without how this store came to hold them.
    let carried: serde_json::Value =
        serde_json::from_str(annotations[SOURCES_ANNOTATION].as_str().expect("records"))
            .expect("a JSON list");
    let carried = carried.as_array().expect("a list");
    assert_eq!(carried.len(), 1);
    assert_eq!(carried[0]["at"], ingested.at.as_str());
    assert_eq!(carried[0]["record"]["commit"], commit.as_str());
    assert!(carried[0].get("via").is_none(), "{}", carried[0]);
    // No credential of the repository's remote, anywhere.
    let text = manifest.to_string();
    assert!(!text.contains("token") && !text.contains("user:"), "{text}");

    // A pull brings the records back, marked as come from a registry, and
    // keeps them beside the snapshot.
    let b = TestEnv::new();
    let pulled = pull(&b, &format!("{target}:{tag}"));
    for entries in [source_entries(&pulled), kept_entries(&b, &digest)] {
        assert_eq!(entries.len(), 1, "{pulled}");
        let e = &entries[0];
        assert_eq!(e.via, "registry");
        assert_eq!(e.at, ingested.at);
        assert_eq!(e.record.commit.as_deref(), Some(commit.as_str()));
        assert_eq!(e.record.repository, ingested.record.repository);
        assert_eq!(e.record.read_from, "git");
        assert!(e.record.clean);
    }

    // A repush publishes the same manifest, and so does a push from the
    // store that pulled it: the records travel without their `via`.
    for env in [&a, &b] {
        let again = push(env, &digest, &target, &[]);
        assert_eq!(again["remote_digest"], pushed["remote_digest"], "{again}");
        assert_eq!(again["blobs_uploaded"], 0, "{again}");
    }

    // A bundle of the pulled snapshot carries them on, marked as come from
    // a bundle.
    let file = b.path("b.tar.zst");
    export(&b, &digest, &file, true);
    let c = TestEnv::new();
    let imported = c.json([os("import"), file.as_os_str(), os("--json")]);
    let entries = source_entries(&imported);
    assert_eq!(entries.len(), 1, "{imported}");
    assert_eq!(entries[0].via, "bundle");
    assert_eq!(entries[0].at, ingested.at);
    assert_eq!(entries[0].record.commit.as_deref(), Some(commit.as_str()));
    assert_eq!(kept_entries(&c, &digest).len(), 1);
}

#[test]
fn a_snapshot_without_records_is_published_with_its_version_and_creation_only() {
    let Some(reg) = registry("no_records") else {
        return;
    };
    let (a, _, digest) = mixed_store("2.0.0", 5);
    let target = repo(&reg, "no-records");
    let pushed = push(&a, &digest, &target, &[]);
    let manifest = get_manifest(&target, &format!("sha256-{digest}"));
    let annotations = manifest["annotations"].as_object().expect("annotations");
    for absent in [
        "org.opencontainers.image.source",
        "org.opencontainers.image.revision",
        SOURCES_ANNOTATION,
    ] {
        assert!(!annotations.contains_key(absent), "{absent}: {manifest}");
    }
    assert_eq!(annotations["org.opencontainers.image.version"], "2.0.0");
    let first = a.json(["show", &digest, "--json"])["first_ingested_at"].clone();
    assert_eq!(annotations["org.opencontainers.image.created"], first);
    assert_eq!(
        push(&a, &digest, &target, &[])["remote_digest"],
        pushed["remote_digest"]
    );
    let b = TestEnv::new();
    let pulled = pull(&b, &format!("{target}:sha256-{digest}"));
    assert!(source_entries(&pulled).is_empty(), "{pulled}");
    assert!(kept_entries(&b, &digest).is_empty());
}

#[test]
fn a_registry_that_serves_unreadable_records_is_refused_and_nothing_enters_the_store() {
    let Some(reg) = registry("unreadable_records") else {
        return;
    };
    let a = TestEnv::new();
    let (digest, _, _) = git_ingest(&a);
    let target = repo(&reg, "unreadable-records");
    push(&a, &digest, &target, &[]);
    let mut manifest = get_manifest(&target, &format!("sha256-{digest}"));
    for (tag, bad) in [
        (
            "not-a-list",
            r#"{"at":"2026-01-01T00:00:00.000Z"}"#.to_string(),
        ),
        (
            "no-record",
            r#"[{"at":"2026-01-01T00:00:00.000Z"}]"#.to_string(),
        ),
        ("too-long", format!("[{}]", " ".repeat(300 * 1024))),
    ] {
        manifest["annotations"][SOURCES_ANNOTATION] = bad.into();
        put_manifest(&target, tag, &manifest);
        let b = TestEnv::new();
        let out = b.run(["pull", &format!("{target}:{tag}"), "--plain-http", "--json"]);
        assert_exit(&out, 1);
        let err = &parse_json(&out)["error"];
        assert_eq!(err["kind"], "integrity", "{tag}: {err}");
        assert!(
            err["message"].as_str().is_some_and(
                |m| m.contains("dev.cestore.sources carries unreadable source records")
            ),
            "{tag}: {err}"
        );
        assert_store_empty(&b);
    }
}

#[test]
fn source_records_travel_in_a_bundle_and_a_bundle_without_them_imports_as_before() {
    let a = TestEnv::new();
    let (digest, commit, ingested) = git_ingest(&a);
    for zstd in [false, true] {
        let file = a.path(if zstd { "b.tar.zst" } else { "b.tar" });
        export(&a, &digest, &file, zstd);
        let b = TestEnv::new();
        let imported = b.json([
            os("import"),
            file.as_os_str(),
            os("--digest"),
            os(&digest),
            os("--json"),
        ]);
        for entries in [source_entries(&imported), kept_entries(&b, &digest)] {
            assert_eq!(entries.len(), 1, "{imported}");
            assert_eq!(entries[0].via, "bundle");
            assert_eq!(entries[0].at, ingested.at);
            assert_eq!(entries[0].record.commit.as_deref(), Some(commit.as_str()));
            assert_eq!(entries[0].record.repository, ingested.record.repository);
        }
        // The importing store exports the same bundle: the records travel
        // without their `via`.
        let twin = b.path("twin");
        export(&b, &digest, &twin, zstd);
        assert_eq!(
            fs::read(&file).expect("bundle"),
            fs::read(&twin).expect("twin")
        );
        // `--check` reads the records too.
        b.json([os("import"), file.as_os_str(), os("--check"), os("--json")]);
    }
    let listing = Command::new("tar")
        .arg("tf")
        .arg(a.path("b.tar"))
        .output()
        .expect("run tar");
    assert_ok(&listing);
    let names = String::from_utf8_lossy(&listing.stdout).into_owned();
    let names: Vec<&str> = names.lines().take(4).collect();
    assert_eq!(
        names,
        [
            "manifest.json",
            "manifest.sha256",
            "origin.json",
            "sources.json"
        ]
    );
    let bundle = fs::read(a.path("b.tar")).expect("bundle");
    let text = String::from_utf8_lossy(&bundle);
    assert!(!text.contains("token") && !text.contains("user:"));

    // A bundle without records (a snapshot ingested from a directory, as
    // earlier cestores wrote every bundle) imports with none.
    let src = a.path("plain");
    mixed_release(&src, "3.0.0", 4, salt());
    let plain = a.ingest_digest(&src, "3.0.0");
    let file = a.path("plain.tar");
    export(&a, &plain, &file, false);
    let c = TestEnv::new();
    let imported = c.json([os("import"), file.as_os_str(), os("--json")]);
    assert!(source_entries(&imported).is_empty(), "{imported}");
}

/// Two stand-ins for DSSE envelopes, signed by no one: without a key
/// trusted, any envelope travels as it is.
fn fake_envelopes(salt: u64) -> Vec<Vec<u8>> {
    (0..2u64)
        .map(|i| {
            let keyid = format!("{:064x}", salt.wrapping_mul(2).wrapping_add(i));
            format!(
                r#"{{"payload":"e30=","payloadType":"application/vnd.in-toto+json","signatures":[{{"keyid":"{keyid}","sig":"AAAA"}}]}}"#
            )
            .into_bytes()
        })
        .collect()
}

/// Keeps `attestations` beside the snapshot `digest` in `env`'s store, as a
/// pull or an import of them would.
fn keep_attestations(env: &TestEnv, digest: &str, attestations: &[Vec<u8>]) {
    let mut store =
        cestore::store::Store::open(&env.store, cestore::store::LockMode::Shared, false)
            .expect("open the store");
    let digest: cestore::digest::ManifestDigest = digest.parse().expect("a digest");
    let kept = cestore::store::trust::signed::received(attestations, &[]);
    assert_eq!(kept.len(), attestations.len());
    cestore::store::trust::attest::attach(&mut store, &digest, &kept)
        .expect("keep the attestations");
}

/// Keeps `attestations` with `digest`, then pushes it (with every
/// attestation it has) to `target`, through the library.
fn push_attested(
    env: &TestEnv,
    digest: &str,
    target: &str,
    attestations: &[Vec<u8>],
) -> cestore::remote::publish::PushReport {
    keep_attestations(env, digest, attestations);
    cestore::cmd::push::push(
        &env.store,
        &cestore::remote::publish::PushOptions {
            digest,
            remote: target,
            remote_options: cestore::remote::Options {
                plain_http: true,
                ..cestore::remote::Options::default()
            },
            jobs: 4,
            format: cestore::remote::Format::V2,
            progress: false,
        },
    )
    .expect("push with attestations")
}

/// Pulls `reference` into `env`'s store through the library, trusting the
/// keys `trusted` (none: any snapshot is taken).
fn pull_attested(
    env: &TestEnv,
    reference: &str,
    trusted: &[cestore::sign::PublicKey],
) -> cestore::error::Result<cestore::remote::transfer::PullReport> {
    let options = cestore::remote::Options {
        plain_http: true,
        ..cestore::remote::Options::default()
    };
    let (remote, named) = cestore::remote::open(reference, &options)?;
    cestore::remote::transfer::pull(
        &|need| cestore::cmd::open(&env.store, need),
        remote.as_ref(),
        &named.expect("a tag or digest"),
        4,
        false,
        trusted,
        cestore::remote::transfer::Arrived::Pulled,
    )
}

/// The bytes a tag or digest names, by raw HTTP, or `None` for a `404`.
fn raw_manifest(target: &str, reference: &str) -> Option<Vec<u8>> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = agent
        .get(&manifest_url(target, reference))
        .header(
            "Accept",
            "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json",
        )
        .call()
        .expect("GET manifest");
    match resp.status().as_u16() {
        404 => None,
        200 => Some(resp.body_mut().read_to_vec().expect("read manifest")),
        other => panic!("GET {reference} answered {other}"),
    }
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

#[test]
fn attestations_travel_as_referrers_under_the_tag_schema_and_a_refusing_check_adopts_nothing() {
    let Some(reg) = registry("attestations") else {
        return;
    };
    let a = TestEnv::new();
    let src = a.path("src");
    let s = salt();
    mixed_release(&src, "1.0.0", 12, s);
    let digest = a.ingest_digest(&src, "1.0.0");
    let target = repo(&reg, "attestations");
    let envelopes = fake_envelopes(s);

    let pushed = push_attested(&a, &digest, &target, &envelopes);
    assert_eq!(pushed.published.attestations_pushed, 2);
    assert_eq!(pushed.published.attestations_present, 0);
    let record = raw_manifest(&target, &format!("sha256-{digest}")).expect("the snapshot's tag");
    let record_hex = sha_hex(&record);
    assert_eq!(
        pushed.published.remote_digest,
        format!("sha256:{record_hex}")
    );
    // The referrers tag names the record's digest, not the snapshot's.
    assert_ne!(record_hex, digest);
    let index_bytes = raw_manifest(&target, &format!("sha256-{record_hex}"))
        .expect("the referrers tag: the registry has no referrers API");
    let index: serde_json::Value = serde_json::from_slice(&index_bytes).expect("index JSON");
    assert_eq!(
        index["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let listed = index["manifests"].as_array().expect("manifests");
    assert_eq!(listed.len(), 2, "{index}");
    let mut carried = Vec::new();
    for d in listed {
        assert_eq!(
            d["artifactType"],
            "application/vnd.dev.cestore.attestation.v1+json"
        );
        assert_eq!(d["annotations"]["dev.cestore.snapshot"], digest.as_str());
        let reference = d["digest"].as_str().expect("digest");
        let bytes = raw_manifest(&target, reference).expect("the referrer");
        assert_eq!(format!("sha256:{}", sha_hex(&bytes)), reference);
        assert_eq!(d["size"], bytes.len());
        let m: serde_json::Value = serde_json::from_slice(&bytes).expect("referrer JSON");
        assert_eq!(m["subject"]["digest"], format!("sha256:{record_hex}"));
        assert_eq!(m["subject"]["size"], record.len());
        assert_eq!(
            m["subject"]["mediaType"],
            "application/vnd.oci.image.manifest.v1+json"
        );
        assert_eq!(
            m["config"]["mediaType"],
            "application/vnd.oci.empty.v1+json"
        );
        assert_eq!(m["config"]["size"], 2);
        let layers = m["layers"].as_array().expect("layers");
        assert_eq!(layers.len(), 1);
        assert_eq!(
            layers[0]["mediaType"],
            "application/vnd.dsse.envelope.v1+json"
        );
        carried.push(layers[0]["digest"].as_str().expect("digest").to_string());
    }
    carried.sort();
    let mut want: Vec<String> = envelopes
        .iter()
        .map(|e| format!("sha256:{}", sha_hex(e)))
        .collect();
    want.sort();
    assert_eq!(carried, want);

    // A repush changes nothing: the same artifacts, the same index.
    let again = push_attested(&a, &digest, &target, &envelopes);
    assert_eq!(
        (
            again.published.attestations_pushed,
            again.published.attestations_present
        ),
        (0, 2)
    );
    assert_eq!(
        again.published.remote_digest,
        pushed.published.remote_digest
    );
    assert_eq!(
        raw_manifest(&target, &format!("sha256-{record_hex}")).as_deref(),
        Some(&index_bytes[..])
    );
    // So does a push without them, through the command.
    let plain = push(&a, &digest, &target, &[]);
    assert_eq!(plain["attestations_pushed"], 0, "{plain}");
    assert_eq!(
        raw_manifest(&target, &format!("sha256-{record_hex}")).as_deref(),
        Some(&index_bytes[..])
    );

    // A pull into an empty store brings both envelopes, byte for byte, and
    // keeps them with the snapshot.
    let b = TestEnv::new();
    let reference = format!("{target}:sha256-{digest}");
    let report = pull_attested(&b, &reference, &[]).expect("pull");
    assert_eq!(report.pull.attestations_fetched, 2);
    assert_eq!(
        sorted(report.attestations.clone()),
        sorted(envelopes.clone())
    );
    assert_eq!(b.listed(), std::slice::from_ref(&digest));
    let kept = b.json(["attestations", digest.as_str(), "--json"]);
    assert_eq!(
        kept["attestations"].as_array().map(Vec::len),
        Some(2),
        "{kept}"
    );
    // The command says how many came.
    let by_cli = pull(&b, &reference);
    assert_eq!(by_cli["pull"]["attestations_fetched"], 2, "{by_cli}");
    // The record's digest still names the snapshot, though its digest tag
    // now holds the referrers; that tag itself is no snapshot.
    let c = TestEnv::new();
    let by_record = pull(&c, &format!("{target}@sha256:{record_hex}"));
    assert_eq!(by_record["provenance"]["manifest_digest"], digest.as_str());
    let out = c.run([
        "pull",
        &format!("{target}:sha256-{record_hex}"),
        "--plain-http",
    ]);
    let stderr = assert_exit(&out, 8);
    assert!(stderr.contains("referrers"), "{stderr}");

    // Under a key none of them is signed by, the pull is refused and leaves
    // the store as it was.
    let d = TestEnv::new();
    let other = d.path("other");
    mixed_release(&other, "2.0.0", 3, salt());
    d.ingest_digest(&other, "2.0.0");
    assert_ok(&d.run([os("key"), os("generate"), d.path("stranger").as_os_str()]));
    let stranger = cestore::sign::PublicKey::load(&d.path("stranger.pub")).expect("a key");
    let before = store_state(&d.store);
    let Err(err) = pull_attested(&d, &reference, std::slice::from_ref(&stranger)) else {
        panic!("a refused snapshot was adopted")
    };
    assert_eq!(err.kind(), "untrusted", "{err}");
    assert_eq!(store_state(&d.store), before, "the store changed");
}

#[test]
fn attestations_travel_in_a_bundle_and_a_bundle_without_them_is_unchanged() {
    let a = TestEnv::new();
    let src = a.path("src");
    let s = salt();
    mixed_release(&src, "1.0.0", 8, s);
    let digest = a.ingest_digest(&src, "1.0.0");
    let envelopes = fake_envelopes(s);
    keep_attestations(&a, &digest, &envelopes);
    // A key no envelope is signed by.
    let stranger = a.path("stranger");
    assert_ok(&a.run([os("key"), os("generate"), stranger.as_os_str()]));
    let stranger =
        cestore::sign::PublicKey::load(&a.path("stranger.pub")).expect("the stranger's key");
    for zstd in [false, true] {
        let name = if zstd { "a.tar.zst" } else { "a.tar" };
        let file = a.path(name);
        let exported = cestore::cmd::bundle::export(
            &a.store,
            &cestore::bundle::ExportOptions {
                digest: &digest,
                output: Some(&file),
                zstd,
            },
        )
        .expect("export with attestations");
        assert_eq!(exported.attestations, 2);

        let import = |env: &TestEnv, check: bool, trusted: &[cestore::sign::PublicKey]| {
            cestore::cmd::bundle::import(
                &env.store,
                &cestore::bundle::ImportOptions {
                    file: &file,
                    digest: None,
                    check,
                    trusted,
                },
            )
        };
        // Under a key none of them is signed by: nothing stored, with
        // --check too.
        let b = TestEnv::new();
        let other = b.path("other");
        mixed_release(&other, "2.0.0", 3, salt());
        b.ingest_digest(&other, "2.0.0");
        let before = store_state(&b.store);
        for check in [false, true] {
            let Err(err) = import(&b, check, std::slice::from_ref(&stranger)) else {
                panic!("a refused bundle was taken")
            };
            assert_eq!(err.kind(), "untrusted", "{err}");
            assert!(err.to_string().contains(&digest), "{err}");
        }
        assert_eq!(store_state(&b.store), before, "the store changed");

        // Taken: the envelopes come back byte for byte.
        let imported = import(&b, false, &[]).expect("import");
        assert_eq!(imported.bundle.attestations, 2);
        assert_eq!(sorted(imported.attestations), sorted(envelopes.clone()));
        assert!(b.listed().contains(&digest));
    }
    // The entries sit after the manifest's, named by their hashes.
    let listing = Command::new("tar")
        .arg("tf")
        .arg(a.path("a.tar"))
        .output()
        .expect("run tar");
    assert_ok(&listing);
    let names = String::from_utf8_lossy(&listing.stdout).into_owned();
    let names: Vec<&str> = names.lines().take(5).collect();
    let mut want: Vec<String> = envelopes
        .iter()
        .map(|e| format!("attestations/{}.json", sha_hex(e)))
        .collect();
    want.sort();
    assert_eq!(names[..2], ["manifest.json", "manifest.sha256"]);
    assert_eq!(names[3..5], [want[0].as_str(), want[1].as_str()]);

    // A snapshot without attestations makes a bundle with no attestation
    // entry, which imports as before.
    let unsigned = TestEnv::new();
    assert_eq!(unsigned.ingest_digest(&src, "1.0.0"), digest);
    let plain = a.path("plain.tar");
    export(&unsigned, &digest, &plain, false);
    let plain_bytes = fs::read(&plain).expect("bundle");
    assert!(!String::from_utf8_lossy(&plain_bytes).contains("attestations/"));
    let c = TestEnv::new();
    let imported = c.json([os("import"), plain.as_os_str(), os("--json")]);
    assert_eq!(imported["bundle"]["attestations"], 0, "{imported}");
    assert_eq!(c.listed(), std::slice::from_ref(&digest));
    // Under a key trusted, such a bundle is refused: nothing vouches for it.
    let d = TestEnv::new();
    let Err(err) = cestore::cmd::bundle::import(
        &d.store,
        &cestore::bundle::ImportOptions {
            file: &plain,
            digest: Some(&digest),
            check: false,
            trusted: std::slice::from_ref(&stranger),
        },
    ) else {
        panic!("an unsigned bundle was taken under a key trusted")
    };
    assert!(err.to_string().contains("it has no attestation"), "{err}");
}

#[test]
fn attestations_of_an_index_keep_another_tools_referrers_in_their_place() {
    let Some(reg) = registry("attestations_index") else {
        return;
    };
    let a = TestEnv::new();
    let src = a.path("src");
    let s = salt();
    minimal_plugin(&src, "1.0.0");
    for i in 0..3 {
        write(&src.join(format!("skills/gen/f{i}.md")), noise(s, i, 300));
    }
    let digest = a.ingest_digest(&src, "1.0.0");
    let target = repo(&reg, "attestations-index");
    let envelopes = fake_envelopes(s);
    // One layer per manifest: the record is an index.
    let push_index = |attestations: &[Vec<u8>]| {
        keep_attestations(&a, &digest, attestations);
        push_format_1_index(&a, &digest, &target)
    };
    let pushed = push_index(&envelopes[..1]);
    assert_eq!(
        pushed.published.media_type,
        "application/vnd.oci.image.index.v1+json"
    );
    assert_eq!(pushed.published.attestations_pushed, 1);
    let record_hex = pushed
        .published
        .remote_digest
        .strip_prefix("sha256:")
        .expect("digest")
        .to_string();
    let tag = format!("sha256-{record_hex}");
    let first: serde_json::Value =
        serde_json::from_slice(&raw_manifest(&target, &tag).expect("referrers index"))
            .expect("index JSON");

    // Another tool attaches its own artifact to the same record, listed
    // first in the index.
    let empty = serde_json::json!({
        "mediaType": "application/vnd.oci.empty.v1+json",
        "digest": format!("sha256:{}", sha_hex(b"{}")),
        "size": 2
    });
    let foreign = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.example.sbom",
        "config": empty,
        "layers": [empty],
        "subject": {
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "digest": format!("sha256:{record_hex}"),
            "size": raw_manifest(&target, &format!("sha256-{digest}")).expect("record").len()
        }
    });
    let foreign_bytes = serde_json::to_vec(&foreign).expect("serialise");
    let foreign_digest = format!("sha256:{}", sha_hex(&foreign_bytes));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let put = |reference: &str, media: &str, bytes: &[u8]| {
        let resp = agent
            .put(&manifest_url(&target, reference))
            .header("Content-Type", media)
            .send(bytes)
            .expect("PUT");
        assert_eq!(resp.status().as_u16(), 201, "PUT {reference}");
    };
    put(
        &foreign_digest,
        "application/vnd.oci.image.manifest.v1+json",
        &foreign_bytes,
    );
    let mut listed = vec![serde_json::json!({
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.example.sbom",
        "digest": foreign_digest,
        "size": foreign_bytes.len()
    })];
    listed.extend(first["manifests"].as_array().expect("manifests").clone());
    let by_hand = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": listed
    });
    put(
        &tag,
        "application/vnd.oci.image.index.v1+json",
        &serde_json::to_vec(&by_hand).expect("serialise"),
    );

    // cestore adds the second attestation after both, keeping the first.
    let again = push_index(&envelopes);
    assert_eq!(
        (
            again.published.attestations_pushed,
            again.published.attestations_present
        ),
        (1, 1)
    );
    let merged: serde_json::Value =
        serde_json::from_slice(&raw_manifest(&target, &tag).expect("referrers index"))
            .expect("index JSON");
    let entries = merged["manifests"].as_array().expect("manifests");
    assert_eq!(entries.len(), 3, "{merged}");
    assert_eq!(entries[0]["artifactType"], "application/vnd.example.sbom");
    assert_eq!(entries[1], first["manifests"][0]);

    // A pull by the index's digest takes the snapshot, not the referrers
    // that tag now holds, and brings back only cestore's attestations.
    let b = TestEnv::new();
    let report = pull_attested(&b, &format!("{target}@sha256:{record_hex}"), &[]).expect("pull");
    assert_eq!(report.pull.manifests, pushed.published.manifests);
    assert!(report.pull.manifests > 1);
    assert_eq!(report.pull.attestations_fetched, 2);
    assert_eq!(sorted(report.attestations), sorted(envelopes));
}

#[test]
fn a_registry_with_the_referrers_api_lists_attestations_itself_and_gets_no_referrers_tag() {
    let Some(reg) = registry("attestations_api") else {
        return;
    };
    let proxy = crate::proxy::Proxy::start(
        &reg,
        crate::proxy::Behaviour {
            referrers_api: true,
            ..crate::proxy::Behaviour::default()
        },
    );
    let a = TestEnv::new();
    let src = a.path("src");
    let s = salt();
    mixed_release(&src, "1.0.0", 5, s);
    let digest = a.ingest_digest(&src, "1.0.0");
    let name = repo("", "attestations-api");
    let target = format!("{}{name}", proxy.address);
    let envelopes = fake_envelopes(s);

    let pushed = push_attested(&a, &digest, &target, &envelopes);
    assert_eq!(pushed.published.attestations_pushed, 2);
    let record_hex = pushed
        .published
        .remote_digest
        .strip_prefix("sha256:")
        .expect("digest")
        .to_string();
    let tag = format!("sha256-{record_hex}");
    assert_eq!(
        raw_manifest(&target, &tag),
        None,
        "a referrers tag was written"
    );
    let again = push_attested(&a, &digest, &target, &envelopes);
    assert_eq!(
        (
            again.published.attestations_pushed,
            again.published.attestations_present
        ),
        (0, 2)
    );
    assert_eq!(
        raw_manifest(&target, &tag),
        None,
        "a referrers tag was written"
    );

    // Through the API, both come back; the registry itself, without it and
    // without the tag, lists none.
    let b = TestEnv::new();
    let reference = format!("{target}:sha256-{digest}");
    let report = pull_attested(&b, &reference, &[]).expect("pull");
    assert_eq!(sorted(report.attestations), sorted(envelopes));
    let c = TestEnv::new();
    let direct = format!("{reg}{name}:sha256-{digest}");
    let report = pull_attested(&c, &direct, &[]).expect("pull");
    assert_eq!(report.pull.attestations_fetched, 0);
}

#[test]
fn a_tampered_attestation_is_refused_and_nothing_enters_the_store() {
    let Some(reg) = registry("tampered_attestation") else {
        return;
    };
    let Some(dir) = env_var("CESTORE_TEST_REGISTRY_DIR", "tampered_attestation") else {
        return;
    };
    let a = TestEnv::new();
    let src = a.path("src");
    let s = salt();
    mixed_release(&src, "1.0.0", 4, s);
    let digest = a.ingest_digest(&src, "1.0.0");
    let target = repo(&reg, "tampered-attestation");
    let envelopes = fake_envelopes(s);
    push_attested(&a, &digest, &target, &envelopes);
    let hex = sha_hex(&envelopes[1]);
    let blob = Path::new(&dir).join(format!(
        "docker/registry/v2/blobs/sha256/{}/{hex}/data",
        &hex[..2]
    ));
    let mut bad = fs::read(&blob).expect("read the stored envelope");
    assert_eq!(bad, envelopes[1]);
    bad[10] ^= 0x01;
    fs::write(&blob, &bad).expect("tamper with the envelope");

    let b = TestEnv::new();
    let other = b.path("other");
    mixed_release(&other, "2.0.0", 3, salt());
    b.ingest_digest(&other, "2.0.0");
    let before = store_state(&b.store);
    let out = b.run([
        "pull",
        &format!("{target}:sha256-{digest}"),
        "--plain-http",
        "--json",
    ]);
    let stderr = assert_exit(&out, 1);
    assert!(stderr.contains(&hex), "{stderr}");
    assert_eq!(parse_json(&out)["error"]["kind"], "integrity");
    assert_eq!(store_state(&b.store), before, "the store changed");
}

/// Pushes `digest` to `target` in format 1 with one layer per manifest, so
/// that its record is an index, through the library.
fn push_format_1_index(
    env: &TestEnv,
    digest: &str,
    target: &str,
) -> cestore::remote::publish::PushReport {
    cestore::cmd::push::push(
        &env.store,
        &cestore::remote::publish::PushOptions {
            digest,
            remote: target,
            remote_options: cestore::remote::Options {
                plain_http: true,
                max_layers: 1,
                ..cestore::remote::Options::default()
            },
            jobs: 4,
            format: cestore::remote::Format::V1,
            progress: false,
        },
    )
    .expect("push format 1, one layer per manifest")
}

/// The envelopes of a snapshot's stored attestations, as bytes.
fn stored_envelopes(env: &TestEnv, digest: &str) -> Vec<Vec<u8>> {
    let listed = env.json(["attestations", digest, "--json"]);
    listed["attestations"]
        .as_array()
        .expect("attestations")
        .iter()
        .map(|a| serde_json::to_vec(&a["envelope"]).expect("an envelope"))
        .collect()
}

/// An envelope with one byte of its payload (or of its signature) changed.
fn tampered(envelope: &[u8], field: &str) -> Vec<u8> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut e: serde_json::Value = serde_json::from_slice(envelope).expect("an envelope");
    let slot = match field {
        "payload" => &mut e["payload"],
        _ => &mut e["signatures"][0]["sig"],
    };
    let mut bytes = b64.decode(slot.as_str().expect("base64")).expect("base64");
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    *slot = serde_json::Value::String(b64.encode(bytes));
    serde_json::to_vec(&e).expect("JSON")
}

/// A pull under `--trusted-key KEY` that must be refused, exit 9, leaving
/// `env`'s store as it was; returns the message.
fn refused_pull(env: &TestEnv, reference: &str, key: &Path) -> String {
    let before = store_state(&env.store);
    let out = env.run([
        os("pull"),
        os(reference),
        os("--plain-http"),
        os("--trusted-key"),
        key.as_os_str(),
        os("--json"),
    ]);
    assert_exit(&out, 9);
    let error = parse_json(&out);
    assert_eq!(error["error"]["kind"], "untrusted", "{error}");
    assert_eq!(store_state(&env.store), before, "the store changed");
    error["error"]["message"]
        .as_str()
        .expect("a message")
        .to_string()
}

#[test]
fn a_pull_under_a_trusted_key_adopts_only_what_that_key_vouches_for() {
    let Some(reg) = registry("trusted_pull") else {
        return;
    };
    let a = TestEnv::new();
    for name in ["signer", "stranger"] {
        assert_ok(&a.run([os("key"), os("generate"), a.path(name).as_os_str()]));
    }
    let (signer, stranger) = (a.path("signer.pub"), a.path("stranger.pub"));
    let src = a.path("src");
    mixed_release(&src, "1.0.0", 6, salt());
    let digest = a.ingest_digest(&src, "1.0.0");
    let signed = a.json([
        os("sign"),
        os(&digest),
        os("--key"),
        a.path("signer").as_os_str(),
        os("--json"),
    ]);
    let target = repo(&reg, "trusted");
    let pushed = push(&a, &digest, &target, &[]);
    assert_eq!(pushed["attestations_pushed"], 1, "{pushed}");
    let reference = format!("{target}:sha256-{digest}");

    // Under the signer's key: adopted, with the attestation, which still
    // vouches for it in the new store.
    let b = TestEnv::new();
    let out = b.run([
        os("pull"),
        os(&reference),
        os("--plain-http"),
        os("--trusted-key"),
        signer.as_os_str(),
        os("--json"),
    ]);
    assert_ok(&out);
    assert_eq!(b.listed(), std::slice::from_ref(&digest));
    let listed = b.json([
        os("attestations"),
        os(&digest),
        os("--trusted-key"),
        signer.as_os_str(),
        os("--json"),
    ]);
    let kept = &listed["attestations"][0];
    assert_eq!(kept["id"], signed["attestation"], "{listed}");
    assert_eq!(kept["verified"]["ok"], true, "{listed}");
    assert_eq!(kept["verified"]["keyid"], signed["keyid"], "{listed}");

    // Under another key: refused, the store unchanged.
    let c = TestEnv::new();
    let other = c.path("other");
    mixed_release(&other, "2.0.0", 3, salt());
    c.ingest_digest(&other, "2.0.0");
    let why = refused_pull(&c, &reference, &stranger);
    assert!(why.contains("no trusted key signed it"), "{why}");

    // One byte of the payload, or of the signature, changed: refused.
    let honest = stored_envelopes(&a, &digest).remove(0);
    for (field, name) in [("payload", "tampered-payload"), ("sig", "tampered-sig")] {
        let t = TestEnv::new();
        assert_eq!(t.ingest_digest(&src, "1.0.0"), digest);
        keep_attestations(&t, &digest, &[tampered(&honest, field)]);
        let target = repo(&reg, name);
        push(&t, &digest, &target, &[]);
        let why = refused_pull(&c, &format!("{target}:sha256-{digest}"), &signer);
        assert!(why.contains("no trusted key signed it"), "{field}: {why}");
    }

    // An envelope that names no key id (DSSE allows an empty one), laid out
    // over several lines: under the signer's key it vouches, and the store
    // that pulls it keeps it, under that key.
    let t = TestEnv::new();
    assert_eq!(t.ingest_digest(&src, "1.0.0"), digest);
    let mut anonymous: serde_json::Value = serde_json::from_slice(&honest).expect("an envelope");
    anonymous["signatures"][0]["keyid"] = serde_json::Value::String(String::new());
    let pretty = serde_json::to_string_pretty(&anonymous).expect("JSON");
    {
        let mut store =
            cestore::store::Store::open(&t.store, cestore::store::LockMode::Shared, false)
                .expect("open the store");
        let kept = cestore::catalogue::KeptAttestation::new(
            serde_json::to_string(&anonymous).expect("JSON"),
            signed["keyid"].as_str().expect("a key id"),
            "2026-01-01T00:00:00.000Z",
        )
        .expect("a kept attestation");
        cestore::store::trust::attest::attach(
            &mut store,
            &digest.parse().expect("a digest"),
            &[kept],
        )
        .expect("keep it");
    }
    let target = repo(&reg, "anonymous");
    push(&t, &digest, &target, &[]);
    let e = TestEnv::new();
    let out = e.run([
        os("pull"),
        os(&format!("{target}:sha256-{digest}")),
        os("--plain-http"),
        os("--trusted-key"),
        signer.as_os_str(),
    ]);
    assert_ok(&out);
    let listed = e.json([
        os("attestations"),
        os(&digest),
        os("--trusted-key"),
        signer.as_os_str(),
        os("--json"),
    ]);
    assert_eq!(
        listed["attestations"][0]["verified"]["ok"], true,
        "{listed}"
    );
    assert_eq!(
        listed["attestations"][0]["keyid"], signed["keyid"],
        "{listed}"
    );
    // The same envelope over several lines is kept as one.
    let kept = cestore::store::trust::signed::received(
        &[pretty.into_bytes()],
        &[cestore::sign::PublicKey::load(&signer).expect("the signer's key")],
    );
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].keyid, signed["keyid"].as_str().expect("a key id"));

    // The signer's attestation of this snapshot, kept with another one:
    // refused, for its subject is not that snapshot.
    let (o, _, other_digest) = mixed_store("3.0.0", 4);
    keep_attestations(&o, &other_digest, std::slice::from_ref(&honest));
    let target = repo(&reg, "other-subject");
    push(&o, &other_digest, &target, &[]);
    let why = refused_pull(&c, &format!("{target}:sha256-{other_digest}"), &signer);
    assert!(
        why.contains("its subject is") && why.contains(&digest),
        "{why}"
    );
}

/// Format 1 writes one layer per object, a content and its exec bit: an
/// index of one layer per manifest, for a release holding the same bytes
/// executable and not, lists one manifest more than the release has
/// contents, and pulls whole.
#[test]
fn a_format_1_index_of_the_same_bytes_executable_and_not_pulls_whole() {
    let Some(reg) = registry("format1_exec_twice") else {
        return;
    };
    let (a, src) = crate::util::with_plugin("src", "1.0.0");
    let s = salt();
    let same = noise(s, 1, 500);
    write(&src.join("scripts/run.sh"), &same);
    chmod(&src.join("scripts/run.sh"), 0o755);
    write(&src.join("skills/ce-plan/run.txt"), &same);
    let digest = a.ingest_digest(&src, "1.0.0");
    let target = repo(&reg, "format1-exec-twice");
    let pushed = push_format_1_index(&a, &digest, &target);
    assert_eq!(
        pushed.published.media_type,
        "application/vnd.oci.image.index.v1+json"
    );
    let b = TestEnv::new();
    let pulled = pull(&b, &format!("{target}:sha256-{digest}"));
    assert_eq!(pulled["provenance"]["manifest_digest"], digest.as_str());
    checkout_and_verify(&b, &digest);
}

/// Push and export check a snapshot before it leaves the store with one
/// preflight: a catalogue manifest that is not the snapshot's canonical
/// manifest refuses both, with the same message (exit 1, `integrity`),
/// before any registry is asked and without writing a bundle.
#[test]
fn push_and_export_refuse_a_damaged_catalogue_manifest_alike() {
    let (env, digest) = minimal_store();
    let catalogue = env.store.join("catalogue.sqlite");
    let set_manifest = |bytes: &[u8]| {
        let db = rusqlite::Connection::open(&catalogue).unwrap();
        db.execute(
            "UPDATE manifests SET kept = ?1
             WHERE snapshot_id = (SELECT id FROM snapshots WHERE digest = ?2)",
            rusqlite::params![bytes, digest],
        )
        .unwrap();
    };
    let other = br#"{"files":[],"schema_version":1}"#;
    for (damage, bytes, says) in [
        ("not JSON", &b"not a manifest"[..], "is not canonical: "),
        ("another snapshot's", &other[..], "hashes to "),
    ] {
        set_manifest(bytes);
        let bundle = env.path("b.tar");
        let pushed = env.run([
            "push",
            &digest,
            "127.0.0.1:9/cestore/preflight",
            "--plain-http",
            "--json",
        ]);
        let exported = env.run([
            OsStr::new("export"),
            OsStr::new(&digest),
            OsStr::new("-o"),
            bundle.as_os_str(),
            OsStr::new("--json"),
        ]);
        let mut messages = Vec::new();
        for (what, out) in [("push", &pushed), ("export", &exported)] {
            assert_exit(out, 1);
            let error = &parse_json(out)["error"];
            assert_eq!(error["kind"], "integrity", "{what} of {damage}: {error}");
            let message = error["message"].as_str().unwrap_or_default().to_string();
            assert!(
                message.starts_with(&format!("the catalogue's manifest for {digest} {says}")),
                "{what} of {damage}: {message}"
            );
            messages.push(message);
        }
        assert_eq!(messages[0], messages[1], "{damage}");
        assert!(!exists(&bundle), "{damage}");
    }
}

/// Writes `count` files of noise under `src/skills/many/`, the `i`th of
/// `len(i)` bytes.
pub(crate) fn many_files(src: &Path, count: u64, len: impl Fn(u64) -> usize) {
    let s = salt();
    for i in 0..count {
        write(
            &src.join(format!("skills/many/f{i:02}.md")),
            noise(s, i, len(i)),
        );
    }
}

/// `pull REFERENCE --plain-http --json` into a fresh store, which must fail
/// with exit `code` and error kind `kind`, its stderr naming each of
/// `expect` (`case` names the case on failure); the store stays empty.
fn pull_refused(reference: &str, code: i32, kind: &str, expect: &[&str], case: &str) {
    let b = TestEnv::new();
    let out = b.run(["pull", reference, "--plain-http", "--json"]);
    let stderr = assert_exit(&out, code);
    for part in expect {
        assert!(stderr.contains(part), "{case}: {stderr}");
    }
    assert_eq!(parse_json(&out)["error"]["kind"], kind, "{case}");
    assert_store_empty(&b);
}

/// A fresh store holding a mixed release (see [`mixed_release`]) written at
/// `src` with `extra` files: the environment, the release and its digest.
fn mixed_store(version: &str, extra: usize) -> (TestEnv, PathBuf, String) {
    let (env, src) = mixed_plugin(version, extra);
    let digest = env.ingest_digest(&src, version);
    (env, src, digest)
}

/// A fresh environment with a mixed release (see [`mixed_release`]) written
/// at `src` with `extra` files, and its path.
fn mixed_plugin(version: &str, extra: usize) -> (TestEnv, PathBuf) {
    let env = TestEnv::new();
    let src = env.path("src");
    mixed_release(&src, version, extra, salt());
    (env, src)
}
