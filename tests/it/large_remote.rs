//! Transfers that die half-way: a pull killed mid-way is resumed by the
//! next one, which fetches only what the first had not fetched and checked;
//! a push killed mid-way is completed by the next one, which uploads only
//! what the registry lacks. Needs `CESTORE_TEST_REGISTRY` (and, for the
//! exact push count, `CESTORE_TEST_REGISTRY_DIR`), as `remote.rs`.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::proxy::{Behaviour, Proxy};
use crate::remote::{noise, registry, repo, salt};
use crate::util::*;

/// Each large file's size: over the 256 KiB from which a content travels
/// as its own blob.
const LARGE: usize = 400 * 1024;
/// How many large files the release holds.
const LARGE_FILES: usize = 12;

/// A store holding a release of the minimal plugin and [`LARGE_FILES`]
/// distinct files of [`LARGE`] bytes: the environment and the digest.
fn large_store() -> (TestEnv, String) {
    let env = TestEnv::new();
    let src = env.path("src");
    minimal_plugin(&src, "1.0.0");
    let s = salt();
    for i in 0..LARGE_FILES {
        write(
            &src.join(format!("skills/large/f{i:02}.bin")),
            noise(s, i as u64, LARGE),
        );
    }
    let digest = env.ingest_digest(&src, "1.0.0");
    (env, digest)
}

/// The files of the store's partial area, by name, with their sizes.
fn partial_files(env: &TestEnv) -> Vec<(String, u64)> {
    let dir = env.store.join("tmp/partial");
    let Ok(entries) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, u64)> = entries
        .filter_map(Result::ok)
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().map(|m| m.len()).unwrap_or(0),
            )
        })
        .collect();
    out.sort();
    out
}

/// Waits until `done` holds, then SIGKILLs `child`; panics when the child
/// ended first (nothing was killed mid-way) or after a minute.
fn kill_when(mut child: Child, what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            child.try_wait().expect("poll the child").is_none(),
            "the {what} ended before it could be killed mid-way"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the {what} made no progress in a minute"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("wait for the child");
    assert!(!status.success(), "the {what} finished before the kill");
}

/// Pulls `reference` into `env`'s store through a proxy that waits before
/// every request, one download at a time, and kills the pull once the
/// partial area keeps at least `kept` large objects. Returns what it keeps.
fn killed_pull(env: &TestEnv, reg: &str, reference: &str, kept: usize) -> Vec<(String, u64)> {
    let proxy = Proxy::start(
        reg,
        Behaviour {
            delay: Duration::from_millis(120),
            ..Behaviour::default()
        },
    );
    let through = format!(
        "{}/{}",
        proxy.address,
        reference.split_once('/').expect("/").1
    );
    let child = env
        .cmd(["pull", &through, "--plain-http", "--jobs", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the pull");
    kill_when(child, "pull", || {
        partial_files(env)
            .iter()
            .filter(|(_, size)| *size == LARGE as u64)
            .count()
            >= kept
    });
    partial_files(env)
}

/// Pushes `digest` of `env`'s store to a new repository `name` of the
/// registry; the reference a pull of it names.
fn push_to(env: &TestEnv, digest: &str, reg: &str, name: &str) -> String {
    let target = repo(reg, name);
    env.json(["push", digest, &target, "--plain-http", "--json"]);
    format!("{target}:sha256-{digest}")
}

/// [`large_store`], pushed to a new repository `name`: the store, the
/// digest and the reference a pull of it names.
fn pushed(reg: &str, name: &str) -> (TestEnv, String, String) {
    let (a, digest) = large_store();
    let reference = push_to(&a, &digest, reg, name);
    (a, digest, reference)
}

/// Each file of a stored snapshot, as `show --files` gives it: its path and
/// its sha256.
fn files_of(env: &TestEnv, digest: &str) -> Vec<(String, String)> {
    let show = env.json(["show", digest, "--files", "--json"]);
    show["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["path"].as_str().expect("path").to_string(),
                f["sha256"].as_str().expect("sha256").to_string(),
            )
        })
        .collect()
}

fn fetched(report: &serde_json::Value) -> (u64, u64) {
    let pull = &report["pull"];
    (
        pull["blobs_fetched"].as_u64().expect("blobs_fetched"),
        pull["bytes_fetched"].as_u64().expect("bytes_fetched"),
    )
}

#[test]
fn a_pull_killed_mid_way_resumes_and_fetches_only_what_it_lacked() {
    let Some(reg) = registry("killed_pull_resumes") else {
        return;
    };
    let (_a, digest, reference) = pushed(&reg, "killed-pull-resumes");

    // What a whole pull fetches, into an empty store.
    let whole = TestEnv::new();
    let full = whole.json(["pull", &reference, "--plain-http", "--json"]);
    let (full_blobs, full_bytes) = fetched(&full);
    assert!(full_blobs > LARGE_FILES as u64, "{full}");

    let b = TestEnv::new();
    let kept = killed_pull(&b, &reg, &reference, 5);
    let large: Vec<&(String, u64)> = kept.iter().filter(|(_, s)| *s == LARGE as u64).collect();
    assert!(
        (5..LARGE_FILES).contains(&large.len()),
        "not killed mid-way: {kept:?}"
    );
    // The killed pull recorded nothing.
    let list = b.json(["list", "--json"]);
    assert_eq!(list["snapshots"], serde_json::json!([]), "{list}");

    // A kept object whose bytes changed since is not trusted: it is fetched again.
    let damaged = b.store.join("tmp/partial").join(&large[0].0);
    let mut bytes = fs::read(&damaged).expect("read a kept object");
    bytes[7] ^= 1;
    chmod(&damaged, 0o644);
    fs::write(&damaged, &bytes).expect("damage a kept object");
    let trusted = large.len() as u64 - 1;

    let resumed = b.json(["pull", &reference, "--plain-http", "--json"]);
    assert_eq!(
        fetched(&resumed),
        (full_blobs - trusted, full_bytes - trusted * LARGE as u64),
        "the resumed pull fetched again what the killed one had kept: {resumed}"
    );
    assert_eq!(
        resumed["ingest"]["new_objects"], full["ingest"]["new_objects"],
        "{resumed}"
    );
    // Stored now, the snapshot leaves no partial area behind.
    assert!(
        !b.store.join("tmp/partial").exists(),
        "{:?}",
        partial_files(&b)
    );
    let view = b.path("view");
    b.json(["checkout", &digest, view.to_str().expect("utf-8"), "--json"]);
    let (code, differences) = b.verify_tree(&view, &digest);
    assert_eq!(
        (code, &differences),
        (0, &serde_json::json!([])),
        "{differences}"
    );
    let verify = b.run(["verify", "--json"]);
    assert_exit(&verify, 0);
}

#[test]
fn gc_removes_what_a_killed_pull_kept() {
    let Some(reg) = registry("gc_removes_partial") else {
        return;
    };
    let (_a, _, reference) = pushed(&reg, "gc-removes-partial");
    let b = TestEnv::new();
    let kept = killed_pull(&b, &reg, &reference, 2);
    assert!(!kept.is_empty());
    let gc = b.json(["gc", "--json"]);
    let temporary = gc["temporary"].as_array().expect("temporary");
    assert!(
        temporary
            .iter()
            .any(|t| t.as_str().is_some_and(|t| t.ends_with("partial"))),
        "{gc}"
    );
    assert!(!b.store.join("tmp/partial").exists(), "{gc}");
    assert!(b.store.join("tmp").is_dir());
}

/// The blobs the registry links into `repository`, when its storage is known.
fn linked_blobs(repository: &str) -> Option<usize> {
    let storage = PathBuf::from(std::env::var("CESTORE_TEST_REGISTRY_DIR").ok()?);
    let layers = storage.join(format!(
        "docker/registry/v2/repositories/{repository}/_layers/sha256"
    ));
    Some(fs::read_dir(layers).map(Iterator::count).unwrap_or(0))
}

#[test]
fn a_push_killed_mid_way_uploads_only_what_the_registry_lacks() {
    let Some(reg) = registry("killed_push_resumes") else {
        return;
    };
    let (a, digest) = large_store();
    let target = repo(&reg, "killed-push-resumes");
    let repository = target.split_once('/').expect("/").1.to_string();
    let proxy = Proxy::start(
        &reg,
        Behaviour {
            delay: Duration::from_millis(120),
            ..Behaviour::default()
        },
    );
    let through = format!("{}/{repository}", proxy.address);
    let child = a
        .cmd(["push", &digest, &through, "--plain-http", "--jobs", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the push");
    // One upload at a time: once the fifth PUT arrives, four blobs are in.
    kill_when(child, "push", || {
        proxy.counts().get("PUT").copied().unwrap_or(0) >= 5
    });
    // The proxy forwards a request it already took: let it land first.
    drop(proxy);
    std::thread::sleep(Duration::from_secs(1));
    let held = linked_blobs(&repository);

    let done = a.json(["push", &digest, &target, "--plain-http", "--json"]);
    let total = done["blobs_total"].as_u64().expect("blobs_total");
    let present = done["blobs_present"].as_u64().expect("blobs_present");
    let uploaded = done["blobs_uploaded"].as_u64().expect("blobs_uploaded");
    assert_eq!(present + uploaded, total, "{done}");
    assert!(present >= 4 && uploaded >= 1, "{done}");
    if let Some(held) = held {
        // Exactly what the registry held was skipped; the rest went up.
        assert_eq!(present, held as u64, "{done}");
    }
    let bytes = done["bytes_uploaded"].as_u64().expect("bytes_uploaded");
    assert!(
        bytes <= (LARGE_FILES as u64 - 3) * LARGE as u64 + 64 * 1024,
        "the second push uploaded again what the first had: {done}"
    );
    // A third push has nothing left to upload.
    let again = a.json(["push", &digest, &target, "--plain-http", "--json"]);
    assert_eq!(again["blobs_uploaded"], 0, "{again}");
}

/// The status a registry answers `HEAD` of one blob with.
fn blob_status(target: &str, sha256: &str) -> u16 {
    let (registry, repository) = target.split_once('/').expect("registry/repository");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    agent
        .head(format!(
            "http://{registry}/v2/{repository}/blobs/sha256:{sha256}"
        ))
        .call()
        .expect("HEAD the registry")
        .status()
        .as_u16()
}

#[test]
fn a_push_streaming_an_object_changed_in_place_is_refused_and_the_registry_never_holds_it() {
    let Some(reg) = registry("changed_object_push") else {
        return;
    };
    let (a, digest) = large_store();
    let files = files_of(&a, &digest);
    let sha_of = |wanted: &str| {
        files
            .iter()
            .find(|(path, _)| path == wanted)
            .map(|(_, sha)| sha.clone())
            .expect("the large file's sha256")
    };
    let sha = sha_of("skills/large/f03.bin");
    // The same size, one byte changed: only hashing it finds the change.
    let object = a.store.join("objects").join(&sha[..2]).join(&sha[2..]);
    let mut bytes = fs::read(&object).expect("read the object");
    bytes[LARGE / 2] ^= 1;
    chmod(&object, 0o644);
    fs::write(&object, &bytes).expect("change the object");
    chmod(&object, 0o444);

    let target = repo(&reg, "changed-object-push");
    let out = a.run(["push", &digest, &target, "--plain-http", "--jobs", "1"]);
    let stderr = assert_exit(&out, 1);
    assert!(
        stderr.contains("no longer matches its key") && stderr.contains(&sha[2..]),
        "{stderr}"
    );
    assert_eq!(
        blob_status(&target, &sha),
        404,
        "the changed bytes reached the registry"
    );
    // The unchanged objects went up as blobs of their own, streamed.
    let other = sha_of("skills/large/f00.bin");
    assert_eq!(blob_status(&target, &other), 200);
}

#[test]
fn a_pull_that_failed_on_a_bad_blob_fetches_only_the_rest_once_the_registry_is_mended() {
    let Some(reg) = registry("failed_pull_resumes") else {
        return;
    };
    let Ok(storage) = std::env::var("CESTORE_TEST_REGISTRY_DIR") else {
        crate::util::skip(
            "failed_pull_resumes",
            "CESTORE_TEST_REGISTRY_DIR is not set (the test damages a stored blob)",
        );
        return;
    };
    let (a, digest) = large_store();
    // Raw blobs are fetched in the order of their digests: the last one is bad.
    let sha = files_of(&a, &digest)
        .into_iter()
        .filter(|(path, _)| path.starts_with("skills/large/"))
        .map(|(_, sha)| sha)
        .max()
        .expect("sha256");
    let reference = push_to(&a, &digest, &reg, "failed-pull-resumes");
    let whole = TestEnv::new();
    let (full_blobs, full_bytes) =
        fetched(&whole.json(["pull", &reference, "--plain-http", "--json"]));

    // The registry serves one raw blob with a byte changed: the pull fails.
    let data = PathBuf::from(&storage).join(format!(
        "docker/registry/v2/blobs/sha256/{}/{sha}/data",
        &sha[..2]
    ));
    let good = fs::read(&data).expect("read the stored blob");
    let mut bad = good.clone();
    bad[100] ^= 1;
    fs::write(&data, &bad).expect("damage the stored blob");
    let b = TestEnv::new();
    let out = b.run(["pull", &reference, "--plain-http", "--jobs", "1"]);
    fs::write(&data, &good).expect("mend the stored blob");
    let stderr = assert_exit(&out, 1);
    assert!(stderr.contains(&sha), "{stderr}");
    let list = b.json(["list", "--json"]);
    assert_eq!(list["snapshots"], serde_json::json!([]), "{list}");
    let kept: Vec<(String, u64)> = partial_files(&b)
        .into_iter()
        .filter(|(_, s)| *s == LARGE as u64)
        .collect();
    assert!(!kept.is_empty(), "the failed pull kept nothing");
    assert!(
        !kept.iter().any(|(name, _)| name.starts_with(&sha)),
        "the bad blob was kept: {kept:?}"
    );

    let resumed = b.json(["pull", &reference, "--plain-http", "--json"]);
    let n = kept.len() as u64;
    assert_eq!(
        fetched(&resumed),
        (full_blobs - n, full_bytes - n * LARGE as u64),
        "{resumed}"
    );
    assert!(!b.store.join("tmp/partial").exists());
}
