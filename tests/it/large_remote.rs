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

/// The work directories pulls left under the store's `tmp/` (`adopt-…`).
fn left_dirs(env: &TestEnv) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(env.store.join("tmp")) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("adopt-"))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// The objects pulls left in their work directories, by path, with their
/// sizes: what the next pull takes over.
fn left_files(env: &TestEnv) -> Vec<(PathBuf, u64)> {
    let mut out: Vec<(PathBuf, u64)> = left_dirs(env)
        .iter()
        .filter_map(|d| fs::read_dir(d).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().len() >= 64)
        .map(|e| (e.path(), e.metadata().map(|m| m.len()).unwrap_or(0)))
        .collect();
    out.sort();
    out
}

/// The name of a file [`left_files`] lists.
fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .expect("a file name")
        .to_string_lossy()
        .into_owned()
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
/// every request, one download at a time, and kills the pull once its work
/// directory holds at least `kept` large objects. Returns what it left.
fn killed_pull(env: &TestEnv, reg: &str, reference: &str, kept: usize) -> Vec<(PathBuf, u64)> {
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
        left_files(env)
            .iter()
            .filter(|(_, size)| *size == LARGE as u64)
            .count()
            >= kept
    });
    left_files(env)
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
    let large: Vec<&(PathBuf, u64)> = kept.iter().filter(|(_, s)| *s == LARGE as u64).collect();
    assert!(
        (5..LARGE_FILES).contains(&large.len()),
        "not killed mid-way: {kept:?}"
    );
    // The killed pull recorded nothing.
    let list = b.json(["list", "--json"]);
    assert_eq!(list["snapshots"], serde_json::json!([]), "{list}");

    // A kept object whose bytes changed since is not trusted: it is fetched again.
    let damaged = &large[0].0;
    let mut bytes = fs::read(damaged).expect("read a kept object");
    bytes[7] ^= 1;
    chmod(damaged, 0o644);
    fs::write(damaged, &bytes).expect("damage a kept object");
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
    // Stored now, the snapshot leaves nothing of either pull behind.
    assert_eq!(left_dirs(&b), Vec::<PathBuf>::new());
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
    let Some(reg) = registry("gc_removes_left") else {
        return;
    };
    let (_a, _, reference) = pushed(&reg, "gc-removes-left");
    let b = TestEnv::new();
    let kept = killed_pull(&b, &reg, &reference, 2);
    assert!(!kept.is_empty());
    let gc = b.json(["gc", "--json"]);
    let temporary = gc["temporary"].as_array().expect("temporary");
    assert_eq!(left_dirs(&b), Vec::<PathBuf>::new(), "{gc}");
    assert!(
        temporary
            .iter()
            .any(|t| t.as_str().is_some_and(|t| t.contains("adopt-"))),
        "{gc}"
    );
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
    let kept: Vec<(PathBuf, u64)> = left_files(&b)
        .into_iter()
        .filter(|(_, s)| *s == LARGE as u64)
        .collect();
    assert!(!kept.is_empty(), "the failed pull kept nothing");
    assert!(
        !left_files(&b)
            .iter()
            .any(|(path, _)| file_name(path).starts_with(&sha)),
        "the bad blob was kept: {kept:?}"
    );

    let resumed = b.json(["pull", &reference, "--plain-http", "--json"]);
    let n = kept.len() as u64;
    assert_eq!(
        fetched(&resumed),
        (full_blobs - n, full_bytes - n * LARGE as u64),
        "{resumed}"
    );
    assert_eq!(left_dirs(&b), Vec::<PathBuf>::new());
}

#[test]
fn a_tree_over_64_mib_travels_in_fewer_larger_blobs_and_pulls_back_equal() {
    let Some(reg) = registry("large_scale_layout") else {
        return;
    };
    const MIB: usize = 1024 * 1024;
    let a = TestEnv::new();
    let h = a.path("checkout");
    crate::util::gitnexus_harness(&h, "1.6.9");
    let nm = h.join("gitnexus/node_modules");
    let s = salt();
    // 20 files of 3.5 MiB (packed at this scale, raw at a release's), two
    // of 5 MiB (raw) and 300 small ones: 77 MiB in all.
    for i in 0..20u64 {
        write(
            &nm.join(format!("mid/m{i:02}.bin")),
            noise(s, i, 7 * MIB / 2),
        );
    }
    for i in 0..2u64 {
        write(
            &nm.join(format!("big/b{i}.wasm")),
            noise(s, 100 + i, 5 * MIB),
        );
    }
    for i in 0..300u64 {
        write(
            &nm.join(format!("p{:02}/lib/f{i:03}.js", i % 30)),
            noise(s, 1000 + i, 700 + i as usize),
        );
    }
    let ingest = a.json([
        "ingest",
        "--profile",
        "runtime",
        h.to_str().expect("utf-8"),
        "--json",
    ]);
    let digest = ingest["manifest_digest"]
        .as_str()
        .expect("digest")
        .to_string();
    let target = repo(&reg, "large-scale-layout");
    let pushed = a.json(["push", &digest, &target, "--plain-http", "--json"]);

    let doc: serde_json::Value = serde_json::from_slice(&crate::remote::image_manifest(
        &crate::remote::raw_agent(),
        &target,
        &format!("sha256-{digest}"),
    ))
    .expect("an image manifest");
    let layers = doc["layers"].as_array().expect("layers");
    let (packs, raw): (Vec<&serde_json::Value>, Vec<&serde_json::Value>) = layers
        .iter()
        .partition(|l| l["mediaType"] == "application/vnd.cestore.pack.v1.tar");
    // Only the contents of 4 MiB or more are raw; every pack holds at most
    // 16 MiB of objects (and its end blocks), and most hold more than 8.
    assert_eq!(raw.len(), 2, "{doc}");
    assert!(raw.iter().all(|l| l["size"] == 5 * MIB), "{doc}");
    let sizes: Vec<u64> = packs
        .iter()
        .map(|l| l["size"].as_u64().expect("size"))
        .collect();
    assert!(
        sizes.iter().all(|&b| b <= 16 * MIB as u64 + 1024),
        "{sizes:?}"
    );
    assert!(
        (5..=8).contains(&sizes.len()),
        "70 MiB of packed objects in {} packs: {sizes:?}",
        sizes.len()
    );
    assert_eq!(pushed["layers"], layers.len(), "{pushed}");

    let b = TestEnv::new();
    let pulled = b.json([
        "pull",
        &format!("{target}:sha256-{digest}"),
        "--plain-http",
        "--json",
    ]);
    assert_eq!(
        fetched(&pulled).0,
        layers.len() as u64,
        "one download per layer: {pulled}"
    );
    assert_eq!(files_of(&b, &digest), files_of(&a, &digest));
    let verify = b.run(["verify", "--json"]);
    assert_exit(&verify, 0);
    let view = b.json(["path", &digest, "--json"]);
    let view = PathBuf::from(view["path"].as_str().expect("a view"));
    assert_eq!(
        fs::read(view.join("gitnexus/node_modules/mid/m07.bin")).expect("a packed file"),
        noise(s, 7, 7 * MIB / 2)
    );
    assert_eq!(left_dirs(&b), Vec::<PathBuf>::new());
}

#[test]
fn a_pull_under_umask_077_stores_its_objects_at_their_modes() {
    let Some(reg) = registry("pull_under_umask") else {
        return;
    };
    let (a, digest, reference) = pushed(&reg, "pull-under-umask");
    let b = TestEnv::new();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("umask 077; exec \"$0\" --store \"$1\" pull \"$2\" --plain-http --json")
        .arg(crate::util::bin())
        .arg(&b.store)
        .arg(&reference)
        .env_remove("CESTORE_DIR")
        .output()
        .expect("run the pull");
    assert_exit(&out, 0);
    let verify = b.run(["verify", "--json"]);
    assert_exit(&verify, 0);
    // Every plain file's object is 0444 whatever the umask (`verify` also
    // checks each object's mode).
    let mut checked = 0;
    for (_, sha) in files_of(&a, &digest) {
        let object = b.store.join("objects").join(&sha[..2]).join(&sha[2..]);
        if let Ok(meta) = fs::metadata(&object) {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                meta.permissions().mode() & 0o777,
                0o444,
                "{}",
                object.display()
            );
            checked += 1;
        }
    }
    assert!(checked >= LARGE_FILES, "{checked} objects checked");
}
