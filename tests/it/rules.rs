//! The reference's rules, one test per rule: each tree breaks only that rule
//! (it starts from `minimal_plugin`), and each test checks the exit code, the
//! JSON `rule` and `path`, that the message names the path, that the store is
//! left exactly as it was, and, where `../shared` is present, that the oracle
//! (the reference's own code) gives the same verdict.
//!
//! Then the reference harness's own cases, the pinned digest of the shipped
//! example, and the `--json` provenance against the oracle's.
//!
//! Rules not covered here, because only a race can break them:
//! `component-unreadable` (the `lstat` of `skills/`, `scripts/` or `assets/`
//! failing right after `exists()` succeeded), `changed-during-validation` and
//! `changed-while-copying` (a file swapped or written while it is read).
//!
//! The permission cases run as `nobody` through `setpriv`, since root ignores
//! file modes; they skip with a printed reason when that is not possible.

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use cestore::digest::ManifestDigest;
use serde_json::Value;

use crate::util::{
    self, assert_exit, assert_ok, chmod, digest_of, mkfifo, parse_json, store_files, store_state,
    write, TestEnv,
};

const V: &str = "1.0.0";
const MIB: usize = 1024 * 1024;
/// Longer than any run here should take; a blocked walk (a FIFO opened for
/// reading) would otherwise hang the test binary.
const TIMEOUT: Duration = Duration::from_secs(60);
const NOBODY: [&str; 3] = ["--reuid=65534", "--regid=65534", "--clear-groups"];

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

/// Who runs cestore and the oracle.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum As {
    /// The test's own user (root in CI).
    Me,
    /// `nobody`, through `setpriv`, so that file modes bite.
    Nobody,
}

/// Runs a command to completion, killing it and failing after [`TIMEOUT`].
fn output_within(mut cmd: Command, what: &str) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    util::finish(child, TIMEOUT, what)
}

/// `cestore ingest DIR --version VERSION --json --store STORE`, run from the
/// test's directory.
fn ingest_as(env: &TestEnv, who: As, dir: &OsStr, version: &str) -> Output {
    let mut cmd = match who {
        As::Me => Command::new(util::bin()),
        As::Nobody => {
            let mut c = Command::new("setpriv");
            c.args(NOBODY).arg(util::bin());
            c
        }
    };
    cmd.arg("ingest")
        .arg(dir)
        .arg("--version")
        .arg(version)
        .arg("--json")
        .arg("--store")
        .arg(&env.store)
        .env_remove("CESTORE_DIR")
        .current_dir(env.dir.path());
    output_within(cmd, "cestore ingest")
}

/// The Python interpreter `nobody` can run (the usual `python3` may be a
/// shim under root's home), once probed.
fn nobody_python() -> Option<&'static str> {
    static PYTHON: OnceLock<Option<&'static str>> = OnceLock::new();
    *PYTHON.get_or_init(|| {
        ["/usr/bin/python3", "/usr/local/bin/python3", "python3"]
            .into_iter()
            .find(|py| {
                Command::new("setpriv")
                    .args(NOBODY)
                    .arg(py)
                    .args(["-c", "import sys; sys.exit(sys.version_info < (3, 10))"])
                    .current_dir("/")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            })
    })
}

/// Whether uid 65534 can read the oracle's script (checked once).
fn nobody_reads(py: &str, script: &Path) -> bool {
    static READS: OnceLock<bool> = OnceLock::new();
    *READS.get_or_init(|| {
        Command::new("setpriv")
            .args(NOBODY)
            .arg(py)
            .args(["-c", "import sys; open(sys.argv[1], 'rb').close()"])
            .arg(script)
            .current_dir("/")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// The oracle's verdict on a tree, or `None` when it cannot be asked.
fn oracle_verdict(env: &TestEnv, who: As, dir: &OsStr, version: &str) -> Option<Value> {
    let script = util::oracle()?;
    let mut cmd = match who {
        As::Me => Command::new(util::python3()),
        As::Nobody => {
            let Some(py) = nobody_python() else {
                eprintln!("not asking the oracle: no Python 3.10+ that uid 65534 can run");
                return None;
            };
            if !nobody_reads(py, &script) {
                eprintln!(
                    "not asking the oracle: uid 65534 cannot read {} (a parent directory is private)",
                    script.display()
                );
                return None;
            }
            let mut c = Command::new("setpriv");
            c.args(NOBODY).arg(py);
            c
        }
    };
    cmd.arg(script)
        .arg("snapshot")
        .arg(dir)
        .arg("--version")
        .arg(version)
        .current_dir(env.dir.path());
    Some(util::oracle_answer(&output_within(cmd, "the oracle")))
}

/// The verdicts on a rejected tree.
struct Rejected {
    /// The `error` object of cestore's JSON.
    err: Value,
    /// The oracle's answer, when it was asked.
    oracle: Option<Value>,
}

impl Rejected {
    fn message(&self) -> &str {
        self.err["message"].as_str().expect("message")
    }

    /// The oracle's error text, when it was asked.
    fn oracle_error(&self) -> Option<&str> {
        self.oracle
            .as_ref()
            .map(|o| o["error"].as_str().expect("oracle error"))
    }

    /// cestore's message starts with the oracle's error, when it was asked.
    fn assert_message_starts_with_the_oracles(&self) {
        if let Some(e) = self.oracle_error() {
            assert!(
                self.message().starts_with(e),
                "cestore: {}\noracle: {e}",
                self.message()
            );
        }
    }
}

fn rejects(env: &TestEnv, tree: &Path, version: &str, rule: &str, at: Option<&Path>) -> Rejected {
    rejects_as(env, As::Me, tree.as_os_str(), version, rule, at)
}

/// Ingests `dir` expecting rejection under `rule`, naming `at` when given;
/// checks that the store is unchanged and that the oracle rejects too.
fn rejects_as(
    env: &TestEnv,
    who: As,
    dir: &OsStr,
    version: &str,
    rule: &str,
    at: Option<&Path>,
) -> Rejected {
    let before = store_state(&env.store);
    // A source that does not exist is not-found (4), still under its rule.
    let (code, kind) = if rule == "source-unavailable" && !Path::new(dir).exists() {
        (4, "not-found")
    } else {
        (3, "rejected")
    };
    let out = ingest_as(env, who, dir, version);
    let stderr = assert_exit(&out, code);
    let json = parse_json(&out);
    let err = json["error"].clone();
    let context = format!("tree {dir:?} at {version:?}: {json}\nstderr: {stderr}");
    assert_eq!(json["ok"], Value::Bool(false), "{context}");
    assert_eq!(err["code"], code, "{context}");
    assert_eq!(err["kind"], kind, "{context}");
    assert_eq!(err["rule"], rule, "{context}");
    assert!(stderr.starts_with("cestore: error: "), "{context}");
    let message = err["message"].as_str().expect("message");
    match at {
        Some(path) => {
            let shown = path.to_string_lossy();
            assert_eq!(err["path"].as_str(), Some(&*shown), "{context}");
            assert!(
                message.contains(&*shown),
                "message does not name {shown}: {context}"
            );
            assert!(
                stderr.contains(&*shown),
                "stderr does not name {shown}: {context}"
            );
        }
        None => assert!(err.get("path").is_none(), "{context}"),
    }
    let after = store_state(&env.store);
    assert_eq!(
        after, before,
        "a rejected ingest changed the store: {context}"
    );
    assert!(
        after.files.tmp.is_empty(),
        "work directories left behind: {context}"
    );
    // The store may be owned by uid 65534, which made it.
    let show = env.run(["show", &"0".repeat(64), "--trust-store"]);
    assert_exit(&show, 4);
    let oracle = oracle_verdict(env, who, dir, version);
    if let Some(o) = &oracle {
        assert_eq!(
            o["ok"],
            Value::Bool(false),
            "the oracle accepts what cestore rejects: {context}\noracle: {o}"
        );
    }
    Rejected { err, oracle }
}

fn accepts(env: &TestEnv, tree: &Path, version: &str) -> Value {
    accepts_as(env, As::Me, tree.as_os_str(), version)
}

/// Ingests `dir` expecting success; where the oracle is present, the
/// provenance must equal the oracle's and (when run as ourselves) the stored
/// file list must equal the oracle's, entry for entry and in order.
fn accepts_as(env: &TestEnv, who: As, dir: &OsStr, version: &str) -> Value {
    let oracle = oracle_verdict(env, who, dir, version);
    if let Some(o) = &oracle {
        assert_eq!(
            o["ok"],
            Value::Bool(true),
            "the oracle rejects {dir:?} at {version}: {o}"
        );
    }
    let out = ingest_as(env, who, dir, version);
    assert!(
        out.status.success(),
        "cestore rejects {dir:?} at {version} (exit {:?}), the reference {}:\n{}{}",
        out.status.code(),
        if oracle.is_some() {
            "accepts it"
        } else {
            "was not asked"
        },
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report = parse_json(&out);
    assert_eq!(report["ok"], Value::Bool(true));
    if let Some(o) = &oracle {
        assert_eq!(
            report["provenance"], o["provenance"],
            "provenance differs from the oracle's"
        );
        if who == As::Me {
            assert_eq!(
                shown_files(env, &digest_of(&report)),
                o["files"],
                "files differ from the oracle's"
            );
        }
    }
    report
}

/// `show DIGEST --files --json`'s file list.
fn shown_files(env: &TestEnv, digest: &str) -> Value {
    env.json(["show", digest, "--files", "--json"])["files"].clone()
}

fn file_paths(env: &TestEnv, digest: &str) -> Vec<String> {
    shown_files(env, digest)
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].as_str().expect("path").to_string())
        .collect()
}

/// A minimal plugin at `ENV/name`, version [`V`].
fn minimal_at(env: &TestEnv, name: &str) -> PathBuf {
    env.plugin(name, V)
}

fn set_plugin_json(root: &Path, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = root.join(".claude-plugin/plugin.json");
    write(&path, contents);
    path
}

/// A relative path of exactly `len` bytes under `skills/long/`, in
/// components of at most 200 bytes.
fn rel_of_len(len: usize) -> String {
    let mut rel = String::from("skills/long");
    while rel.len() < len {
        let room = len - rel.len() - 1;
        let mut take = room.min(200);
        if room - take == 1 {
            take -= 1;
        }
        rel.push('/');
        rel.push_str(&"p".repeat(take));
    }
    assert_eq!(rel.len(), len);
    rel
}

/// Sets up a test that runs as `nobody`: an environment whose directory
/// `nobody` may write. `None`, with the reason printed, when that cannot be.
fn nobody_env(test: &str) -> Option<TestEnv> {
    if !rustix::process::geteuid().is_root() {
        crate::util::skip(test, "not running as root, so cannot switch to uid 65534");
        return None;
    }
    let works = Command::new("setpriv")
        .args(NOBODY)
        .arg(util::bin())
        .arg("--version")
        .current_dir("/")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        eprintln!(
            "skipping {test}: `setpriv` is unavailable or uid 65534 cannot run {}",
            util::bin()
        );
        return None;
    }
    let env = TestEnv::new();
    chmod(env.dir.path(), 0o777);
    Some(env)
}

// ---------------------------------------------------------------------------
// --version
// ---------------------------------------------------------------------------

#[test]
fn version_must_be_exact_semver() {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    for bad in [
        "1.0",
        "1",
        "v1.0.0",
        "01.0.0",
        "1.00.0",
        "1.0.0-",
        "1.0.0+",
        "1.0.0-a..b",
        "^1.0.0",
        "~1.0.0",
        "1.0.x",
        "latest",
        "1.0.0 ",
        "1.0.0\n",
        "1.0.0+a+b",
        "\u{ff11}.0.0",
    ] {
        let r = rejects(&env, &tree, bad, "version-not-exact", None);
        assert!(r.message().contains(bad), "{bad:?}: {}", r.message());
        assert!(!env.store.exists(), "a bad --version created the store");
    }
}

#[test]
fn prerelease_and_build_versions_are_exact() {
    let env = TestEnv::new();
    for version in ["1.0.0-rc.1+build.5", "0.0.0", "2.0.0--"] {
        let tree = env.plugin(version, version);
        let report = accepts(&env, &tree, version);
        assert_eq!(report["provenance"]["version"], version);
    }
}

// ---------------------------------------------------------------------------
// The source directory
// ---------------------------------------------------------------------------

#[test]
fn source_missing_is_unavailable() {
    let env = TestEnv::new();
    let missing = env.path("nowhere");
    rejects(&env, &missing, V, "source-unavailable", Some(&missing));
}

#[test]
fn source_symlink_is_not_a_real_directory() {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    let link = env.path("link");
    symlink(&tree, &link).unwrap();
    rejects(&env, &link, V, "source-not-real-directory", Some(&link));
}

#[test]
fn source_file_is_not_a_real_directory() {
    let env = TestEnv::new();
    let file = env.path("file");
    write(&file, "not a directory");
    rejects(&env, &file, V, "source-not-real-directory", Some(&file));
}

#[test]
fn source_reached_through_a_symlinked_parent_is_not_a_real_directory() {
    let env = TestEnv::new();
    minimal_at(&env, "real/p");
    symlink(env.path("real"), env.path("parent")).unwrap();
    let through = env.path("parent/p");
    rejects(
        &env,
        &through,
        V,
        "source-not-real-directory",
        Some(&through),
    );
}

#[test]
fn source_spelt_with_dotdot_is_not_a_real_directory() {
    // pathlib's absolute() keeps `..`, so the resolved path differs.
    let env = TestEnv::new();
    minimal_at(&env, "p");
    let r = rejects_as(
        &env,
        As::Me,
        OsStr::new("p/../p"),
        V,
        "source-not-real-directory",
        Some(&env.path("p/../p")),
    );
    assert!(r.message().contains("/../"), "{}", r.message());
}

// ---------------------------------------------------------------------------
// .claude-plugin and its manifests
// ---------------------------------------------------------------------------

#[test]
fn manifest_dir_missing_is_unavailable() {
    rejects_changed(".claude-plugin", "manifest-dir-unavailable", |_, _, dir| {
        fs::remove_dir_all(dir).unwrap();
    });
}

#[test]
fn manifest_dir_symlink_is_not_real() {
    rejects_changed(".claude-plugin", "manifest-dir-not-real", |env, _, dir| {
        fs::rename(dir, env.path("elsewhere")).unwrap();
        symlink(env.path("elsewhere"), dir).unwrap();
    });
}

#[test]
fn manifest_dir_file_is_not_real() {
    rejects_changed(".claude-plugin", "manifest-dir-not-real", |_, _, dir| {
        fs::remove_dir_all(dir).unwrap();
        write(dir, "{}");
    });
}

#[test]
fn plugin_json_missing() {
    rejects_changed(PLUGIN_JSON, "manifest-missing", |_, _, manifest| {
        fs::remove_file(manifest).unwrap();
    });
}

#[test]
fn plugin_json_dangling_symlink_is_missing() {
    // `exists()` follows the link, so the reference says "missing".
    rejects_changed(PLUGIN_JSON, "manifest-missing", |_, _, manifest| {
        fs::remove_file(manifest).unwrap();
        symlink("gone.json", manifest).unwrap();
    });
}

#[test]
fn plugin_json_symlink_to_a_real_file_is_not_regular() {
    rejects_changed(PLUGIN_JSON, "file-not-regular", |_, tree, manifest| {
        fs::rename(manifest, tree.join(".claude-plugin/real.json")).unwrap();
        symlink("real.json", manifest).unwrap();
    });
}

#[test]
fn plugin_json_directory_is_not_regular() {
    rejects_changed(PLUGIN_JSON, "file-not-regular", |_, _, manifest| {
        fs::remove_file(manifest).unwrap();
        fs::create_dir(manifest).unwrap();
    });
}

#[test]
fn plugin_json_fifo_is_not_regular_and_does_not_block() {
    rejects_changed(PLUGIN_JSON, "file-not-regular", |_, _, manifest| {
        fs::remove_file(manifest).unwrap();
        mkfifo(manifest);
    });
}

#[test]
fn marketplace_json_is_optional_and_listed_second() {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    write(
        &tree.join(".claude-plugin/marketplace.json"),
        r#"{"plugins": []}"#,
    );
    let report = accepts(&env, &tree, V);
    let paths = file_paths(&env, &digest_of(&report));
    assert_eq!(
        paths[..2],
        [
            ".claude-plugin/plugin.json",
            ".claude-plugin/marketplace.json"
        ]
    );
    assert_eq!(paths.len(), 5);
}

#[test]
fn marketplace_json_dangling_symlink_is_skipped() {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    symlink("gone.json", tree.join(".claude-plugin/marketplace.json")).unwrap();
    let report = accepts(&env, &tree, V);
    let paths = file_paths(&env, &digest_of(&report));
    assert!(
        !paths.iter().any(|p| p.contains("marketplace")),
        "{paths:?}"
    );
    assert_eq!(paths.len(), 4);
}

#[test]
fn marketplace_json_symlink_to_a_real_file_is_not_regular() {
    let link = ".claude-plugin/marketplace.json";
    rejects_changed(link, "file-not-regular", |_, tree, link| {
        write(&tree.join(".claude-plugin/real.json"), "{}");
        symlink("real.json", link).unwrap();
    });
}

// ---------------------------------------------------------------------------
// skills/, scripts/, assets/
// ---------------------------------------------------------------------------

#[test]
fn skills_missing() {
    rejects_changed("skills", "skills-missing", |_, _, skills| {
        fs::remove_dir_all(skills).unwrap();
    });
}

#[test]
fn skills_dangling_symlink_is_missing() {
    rejects_changed("skills", "skills-missing", |_, _, skills| {
        fs::remove_dir_all(skills).unwrap();
        symlink("gone", skills).unwrap();
    });
}

#[test]
fn skills_symlink_is_not_a_real_directory() {
    rejects_changed(
        "skills",
        "component-not-real-directory",
        |env, _, skills| {
            fs::rename(skills, env.path("real-skills")).unwrap();
            symlink(env.path("real-skills"), skills).unwrap();
        },
    );
}

#[test]
fn skills_file_is_not_a_real_directory() {
    rejects_changed("skills", "component-not-real-directory", |_, _, skills| {
        fs::remove_dir_all(skills).unwrap();
        write(skills, "no");
    });
}

#[test]
fn scripts_and_assets_files_are_not_real_directories() {
    let env = TestEnv::new();
    for name in ["scripts", "assets"] {
        let tree = minimal_at(&env, &format!("file-{name}"));
        let component = tree.join(name);
        write(&component, "#!/bin/sh\n");
        rejects(
            &env,
            &tree,
            V,
            "component-not-real-directory",
            Some(&component),
        );
    }
}

#[test]
fn scripts_and_assets_symlinks_are_not_real_directories() {
    let env = TestEnv::new();
    for name in ["scripts", "assets"] {
        let tree = minimal_at(&env, &format!("link-{name}"));
        write(&env.path(&format!("real-{name}/x.sh")), "#!/bin/sh\n");
        let component = tree.join(name);
        symlink(env.path(&format!("real-{name}")), &component).unwrap();
        rejects(
            &env,
            &tree,
            V,
            "component-not-real-directory",
            Some(&component),
        );
    }
}

#[test]
fn dangling_scripts_and_assets_symlinks_are_skipped() {
    // `exists()` follows links: a dangling one counts as absent.
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    symlink("gone", tree.join("scripts")).unwrap();
    symlink("/nonexistent/assets", tree.join("assets")).unwrap();
    let report = accepts(&env, &tree, V);
    assert_eq!(report["provenance"]["file_count"], 4);
}

// ---------------------------------------------------------------------------
// Entries under the components
// ---------------------------------------------------------------------------

#[test]
fn forbidden_and_secret_names_are_skipped_silently() {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    let noise = [
        "skills/ce-plan/tests/test_plan.py",
        "skills/ce-plan/.env.local",
        "skills/ce-plan/api-token.txt",
        "skills/ce-plan/KEY.PEM",
        "skills/ce-plan/my_Secret.md",
        "skills/ce-plan/Credentials.json",
        "skills/ce-plan/TO\u{212a}EN.md",
        "skills/node_modules/left-pad/index.js",
        "skills/ce-work/__pycache__/x.pyc",
        "skills/.github/workflows/ci.yml",
        "skills/ce-work/DOCS/guide.md",
        "skills/ce-work/.npmrc.bak",
        "scripts/test/run.sh",
        "scripts/.netrc",
        "assets/.git/config",
        "assets/id.p12",
        "assets/private_key.txt",
    ];
    for rel in noise {
        write(&tree.join(rel), "noise\n");
    }
    // Names are dropped before they are examined: even a symlink or a FIFO.
    symlink("/etc", tree.join("skills/ce-plan/secrets")).unwrap();
    mkfifo(&tree.join("skills/ce-work/deploy.key"));
    // Near misses are kept.
    let kept = [
        "skills/ce-plan/testing.md",
        "skills/ce-plan/doc.md",
        "skills/ce-plan/.envrc",
        "assets/keys",
        "scripts/tok-en.sh",
    ];
    for rel in kept {
        write(&tree.join(rel), "kept\n");
    }
    let report = accepts(&env, &tree, V);
    let paths = file_paths(&env, &digest_of(&report));
    for rel in noise {
        assert!(
            !paths.iter().any(|p| p == rel),
            "{rel} was stored: {paths:?}"
        );
    }
    for rel in kept {
        assert!(
            paths.iter().any(|p| p == rel),
            "{rel} was dropped: {paths:?}"
        );
    }
    assert_eq!(paths.len(), 4 + kept.len(), "{paths:?}");
}

#[test]
fn symlinks_under_skills_are_rejected() {
    let env = TestEnv::new();
    write(&env.path("outside/file.md"), "outside\n");
    let cases: [(&str, PathBuf); 5] = [
        ("file-inside", PathBuf::from("SKILL.md")),
        ("dir-inside", PathBuf::from("../ce-work")),
        ("file-outside", env.path("outside/file.md")),
        ("dir-outside", env.path("outside")),
        ("dangling", PathBuf::from("nothing-here")),
    ];
    for (name, target) in cases {
        let tree = minimal_at(&env, name);
        let link = tree.join("skills/ce-plan/link");
        symlink(&target, &link).unwrap();
        rejects(&env, &tree, V, "symlink", Some(&link));
    }
}

#[test]
fn fifo_under_skills_is_not_a_regular_file_and_does_not_block() {
    rejects_changed("skills/ce-plan/pipe", "not-regular-file", |_, _, fifo| {
        mkfifo(fifo);
    });
}

#[test]
fn non_utf8_file_name_is_rejected() {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    let bad = tree
        .join("skills/ce-plan")
        .join(OsStr::from_bytes(b"caf\xe9.md"));
    write(&bad, "latin-1 name\n");
    rejects(&env, &tree, V, "path-not-utf8", Some(&bad));
}

#[test]
fn non_utf8_empty_directory_name_is_accepted() {
    // No file below it, so the reference never encodes its name.
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    fs::create_dir(
        tree.join("skills/ce-plan")
            .join(OsStr::from_bytes(b"caf\xe9")),
    )
    .unwrap();
    let report = accepts(&env, &tree, V);
    assert_eq!(report["provenance"]["file_count"], 4);
}

// ---------------------------------------------------------------------------
// Bounds
// ---------------------------------------------------------------------------

#[test]
fn path_of_1024_bytes_is_accepted_and_1025_rejected() {
    // One store: the refused ingest must leave the first snapshot's store as it was.
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    let rel = rel_of_len(1024);
    write(&tree.join(&rel), "deep\n");
    let report = accepts(&env, &tree, V);
    assert!(file_paths(&env, &digest_of(&report)).contains(&rel));

    fs::remove_dir_all(tree.join("skills/long")).unwrap();
    let rel = rel_of_len(1025);
    write(&tree.join(&rel), "deep\n");
    let r = rejects(&env, &tree, V, "path-too-long", Some(&tree.join(&rel)));
    if let Some(e) = r.oracle_error() {
        assert!(e.contains(&rel), "oracle: {e}");
    }
}

/// A plugin with `extra` empty files in `skills/zz-bulk/`, walked last.
fn bulk_plugin(env: &TestEnv, extra: usize) -> PathBuf {
    let tree = minimal_at(env, "p");
    let bulk = tree.join("skills/zz-bulk");
    fs::create_dir_all(&bulk).unwrap();
    for i in 0..extra {
        fs::write(bulk.join(format!("f{i:04}")), b"").unwrap();
    }
    tree
}

#[test]
fn file_count_of_2048_is_accepted_and_2049_rejected() {
    let env = TestEnv::new();
    let tree = bulk_plugin(&env, 2048 - 4);
    let report = accepts(&env, &tree, V);
    assert_eq!(report["provenance"]["file_count"], 2048);

    let last = tree.join("skills/zz-bulk/f2044");
    write(&last, "");
    rejects(&env, &tree, V, "too-many-files", Some(&last));
}

#[test]
fn file_of_2_mib_is_accepted_and_one_byte_more_rejected() {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    let big = tree.join("assets/big.bin");
    write(&big, vec![7u8; 2 * MIB]);
    let report = accepts(&env, &tree, V);
    assert_eq!(report["provenance"]["total_bytes"], 2 * MIB as u64 + 89);

    write(&big, vec![7u8; 2 * MIB + 1]);
    rejects(&env, &tree, V, "file-too-large", Some(&big));
}

/// A plugin of exactly 16 MiB: eight files in `skills/zz-big/`, the last
/// one (returned) short by the manifest's and skills' bytes.
fn plugin_of_16_mib(env: &TestEnv) -> (PathBuf, PathBuf) {
    let tree = minimal_at(env, "p");
    let base: u64 = [
        ".claude-plugin/plugin.json",
        "skills/ce-plan/SKILL.md",
        "skills/ce-work/SKILL.md",
        "skills/ce-code-review/SKILL.md",
    ]
    .iter()
    .map(|rel| fs::metadata(tree.join(rel)).unwrap().len())
    .sum();
    let full = vec![b'a'; 2 * MIB];
    for i in 0..7 {
        write(&tree.join(format!("skills/zz-big/b{i}")), &full);
    }
    let last = tree.join("skills/zz-big/b7");
    write(&last, &full[..2 * MIB - base as usize]);
    (tree, last)
}

#[test]
fn total_of_16_mib_is_accepted_and_one_byte_more_rejected() {
    let env = TestEnv::new();
    let (tree, last) = plugin_of_16_mib(&env);
    let report = accepts(&env, &tree, V);
    assert_eq!(report["provenance"]["total_bytes"], 16 * MIB as u64);
    assert_eq!(report["provenance"]["file_count"], 12);

    fs::OpenOptions::new()
        .append(true)
        .open(&last)
        .unwrap()
        .write_all(b"+")
        .unwrap();
    rejects(&env, &tree, V, "too-many-bytes", Some(&last));
}

#[test]
fn nesting_of_986_directories_is_accepted_and_987_too_deep() {
    // The reference recurses once per level and hits Python's recursion limit.
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    let deepest = tree.join("skills").join(["d"; 987].join("/"));
    fs::create_dir_all(deepest.parent().unwrap()).unwrap();
    accepts(&env, &tree, V);

    fs::create_dir(&deepest).unwrap();
    let r = rejects(&env, &tree, V, "too-deep", Some(&deepest));
    if let Some(o) = &r.oracle {
        assert_eq!(o["error_kind"], "RecursionError", "{o}");
    }
}

#[test]
fn entry_past_path_max_is_unreadable() {
    // Every name is short enough, but an absolute path reaches PATH_MAX
    // (4,096 bytes), so the reference's lstat of that entry fails.
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    let name = "n".repeat(250);
    let parts = vec![name.as_str(); 17];
    let mut first_too_long = None;
    let mut dir = tree.join("skills");
    for part in &parts {
        dir.push(part);
        if first_too_long.is_none() && dir.as_os_str().len() >= 4096 {
            first_too_long = Some(dir.clone());
        }
    }
    // No single call can take the whole path: make it in two relative steps.
    let half = tree.join("skills").join(parts[..8].join("/"));
    fs::create_dir_all(&half).unwrap();
    let status = Command::new("mkdir")
        .arg("-p")
        .arg(parts[8..].join("/"))
        .current_dir(&half)
        .status()
        .expect("run mkdir -p");
    assert!(status.success());
    let at = first_too_long.expect("a path past PATH_MAX");
    let r = rejects(&env, &tree, V, "entry-unreadable", Some(&at));
    if let Some(e) = r.oracle_error() {
        assert!(e.contains("entry is unreadable"), "oracle: {e}");
        assert!(e.contains(&*at.to_string_lossy()), "oracle: {e}");
    }
}

// ---------------------------------------------------------------------------
// plugin.json's content
// ---------------------------------------------------------------------------

#[test]
fn plugin_json_invalid_json() {
    rejects_plugin_json(
        r#"{"name": "compound-engineering", "version": "1.0.0",}"#,
        "manifest-invalid",
    );
}

#[test]
fn plugin_json_with_a_bom_is_invalid() {
    rejects_plugin_json(
        "\u{feff}{\"name\": \"compound-engineering\", \"version\": \"1.0.0\"}",
        "manifest-invalid",
    );
}

#[test]
fn plugin_json_not_utf8_is_invalid() {
    rejects_plugin_json(
        b"{\"name\": \"compound-engineering\", \"version\": \"1.0.0\", \"by\": \"Jos\xe9\"}",
        "manifest-invalid",
    );
}

#[test]
fn plugin_json_array_is_not_compound_engineering() {
    rejects_plugin_json(
        r#"[{"name": "compound-engineering", "version": "1.0.0"}]"#,
        "not-compound-engineering",
    );
}

#[test]
fn plugin_json_wrong_name_is_not_compound_engineering() {
    rejects_plugin_json(
        r#"{"name": "Compound-Engineering", "version": "1.0.0"}"#,
        "not-compound-engineering",
    );
}

#[test]
fn plugin_json_version_drift_is_a_mismatch() {
    let (env, tree) = util::with_plugin("p", "1.0.1");
    let manifest = tree.join(".claude-plugin/plugin.json");
    let r = rejects(&env, &tree, V, "version-mismatch", Some(&manifest));
    assert!(
        r.message().contains("expected 1.0.0, got '1.0.1'"),
        "{}",
        r.message()
    );
    r.assert_message_starts_with_the_oracles();
}

#[test]
fn plugin_json_integer_versions() {
    let env = TestEnv::new();
    // A big integer is a number, not the version: a mismatch, shown as Python shows it.
    let tree = minimal_at(&env, "big");
    let big = "123456789012345678901234567890";
    let manifest = set_plugin_json(
        &tree,
        format!(r#"{{"name": "compound-engineering", "version": {big}}}"#),
    );
    let r = rejects(&env, &tree, V, "version-mismatch", Some(&manifest));
    assert!(
        r.message().contains(&format!("got {big}:")),
        "{}",
        r.message()
    );
    r.assert_message_starts_with_the_oracles();
    // Past CPython's 4,300-digit limit, json.loads itself fails.
    let tree = minimal_at(&env, "huge");
    let huge = "9".repeat(5000);
    let manifest = set_plugin_json(
        &tree,
        format!(r#"{{"name": "compound-engineering", "version": {huge}}}"#),
    );
    let r = rejects(&env, &tree, V, "manifest-invalid", Some(&manifest));
    assert!(r.message().contains("4300 digits"), "{}", r.message());
}

#[test]
fn plugin_json_with_nan_is_accepted_like_the_reference() {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    set_plugin_json(
        &tree,
        r#"{"name": "compound-engineering", "version": "1.0.0", "weight": NaN, "limits": [Infinity, -Infinity, 1e400]}"#,
    );
    accepts(&env, &tree, V);
}

#[test]
fn plugin_json_duplicate_keys_last_wins() {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "last-right");
    set_plugin_json(
        &tree,
        r#"{"name": "other", "version": "0.9.0", "name": "compound-engineering", "version": "1.0.0"}"#,
    );
    accepts(&env, &tree, V);

    let tree = minimal_at(&env, "last-wrong");
    let manifest = set_plugin_json(
        &tree,
        r#"{"name": "compound-engineering", "version": "1.0.0", "version": "0.9.0"}"#,
    );
    let r = rejects(&env, &tree, V, "version-mismatch", Some(&manifest));
    assert!(r.message().contains("got '0.9.0'"), "{}", r.message());

    let tree = minimal_at(&env, "name-wrong");
    let manifest = set_plugin_json(
        &tree,
        r#"{"name": "compound-engineering", "version": "1.0.0", "name": "other"}"#,
    );
    rejects(&env, &tree, V, "not-compound-engineering", Some(&manifest));
}

#[test]
fn each_required_skill_must_be_present() {
    let env = TestEnv::new();
    for skill in ["ce-plan", "ce-work", "ce-code-review"] {
        let tree = minimal_at(&env, skill);
        let skill_md = tree.join(format!("skills/{skill}/SKILL.md"));
        fs::remove_file(&skill_md).unwrap();
        let r = rejects(&env, &tree, V, "missing-skill", Some(&skill_md));
        assert!(r.message().contains(skill), "{}", r.message());
    }
    // A directory named SKILL.md does not count.
    let tree = minimal_at(&env, "dir");
    let skill_md = tree.join("skills/ce-work/SKILL.md");
    fs::remove_file(&skill_md).unwrap();
    fs::create_dir(&skill_md).unwrap();
    rejects(&env, &tree, V, "missing-skill", Some(&skill_md));
}

// ---------------------------------------------------------------------------
// Modes: run as nobody, since root ignores them
// ---------------------------------------------------------------------------

#[test]
fn unreadable_file_is_rejected() {
    let Some(env) = nobody_env("unreadable_file_is_rejected") else {
        return;
    };
    let tree = minimal_at(&env, "p");
    let file = tree.join("skills/ce-plan/notes.md");
    write(&file, "secret-free\n");
    chmod(&file, 0o000);
    rejects_as(
        &env,
        As::Nobody,
        tree.as_os_str(),
        V,
        "file-unreadable",
        Some(&file),
    );
}

#[test]
fn unreadable_directory_is_rejected() {
    let Some(env) = nobody_env("unreadable_directory_is_rejected") else {
        return;
    };
    let tree = minimal_at(&env, "p");
    let dir = tree.join("skills/extra");
    write(&dir.join("x.md"), "x\n");
    chmod(&dir, 0o000);
    let r = rejects_as(
        &env,
        As::Nobody,
        tree.as_os_str(),
        V,
        "directory-unreadable",
        Some(&dir),
    );
    if let Some(e) = r.oracle_error() {
        assert!(e.contains("directory is unreadable"), "oracle: {e}");
    }
}

#[test]
fn unsearchable_manifest_dir_leaves_existence_unknown() {
    // Readable but not searchable: plugin.json's existence cannot be checked.
    let Some(env) = nobody_env("unsearchable_manifest_dir_leaves_existence_unknown") else {
        return;
    };
    let tree = minimal_at(&env, "p");
    chmod(&tree.join(".claude-plugin"), 0o444);
    let manifest = tree.join(".claude-plugin/plugin.json");
    let r = rejects_as(
        &env,
        As::Nobody,
        tree.as_os_str(),
        V,
        "entry-unavailable",
        Some(&manifest),
    );
    if let Some(o) = &r.oracle {
        assert_eq!(o["error_kind"], "PermissionError", "{o}");
    }
}

/// A tree whose `rel` directory has mode 0111 (searchable, unreadable), as
/// `nobody`: the reference reaches everything in it by path and never lists
/// it, so it accepts.
fn search_only_is_accepted(test: &str, rel: &str) {
    let Some(env) = nobody_env(test) else { return };
    let tree = minimal_at(&env, "p");
    chmod(&tree.join(rel), 0o111);
    accepts_as(&env, As::Nobody, tree.as_os_str(), V);
}

/// A source directory of mode 0111 is accepted, as the reference accepts
/// it: the source is opened for lookups only (`O_PATH`), which needs search
/// permission and not read permission, so it is not `source-unavailable`.
#[test]
fn search_only_source_is_accepted_like_the_reference() {
    search_only_is_accepted("search_only_source_is_accepted_like_the_reference", "");
}

/// A `.claude-plugin` of mode 0111 is accepted, as the reference accepts it:
/// the walk opens it for lookups only (`O_PATH`), so it is not
/// `manifest-dir-unavailable`.
#[test]
fn search_only_manifest_dir_is_accepted_like_the_reference() {
    search_only_is_accepted(
        "search_only_manifest_dir_is_accepted_like_the_reference",
        ".claude-plugin",
    );
}

/// A directory of mode 0444 (readable, not searchable) is listed, as the
/// reference's `scandir` lists it with read permission alone, and the
/// rejection is `entry-unreadable` at the entry inside, where the reference
/// reports it, not `directory-unreadable` at the directory.
#[test]
fn readable_unsearchable_directory_fails_at_its_entry_like_the_reference() {
    let test = "readable_unsearchable_directory_fails_at_its_entry_like_the_reference";
    let Some(env) = nobody_env(test) else { return };
    let tree = minimal_at(&env, "p");
    let dir = tree.join("skills/extra");
    write(&dir.join("x.md"), "x\n");
    chmod(&dir, 0o444);
    let r = rejects_as(
        &env,
        As::Nobody,
        tree.as_os_str(),
        V,
        "entry-unreadable",
        Some(&dir.join("x.md")),
    );
    if let Some(e) = r.oracle_error() {
        assert!(e.contains("entry is unreadable"), "oracle: {e}");
    }
}

/// An empty directory of mode 0444 lists as empty without search
/// permission, so the tree is accepted, as the reference accepts it.
#[test]
fn readable_unsearchable_empty_directory_is_accepted_like_the_reference() {
    let test = "readable_unsearchable_empty_directory_is_accepted_like_the_reference";
    let Some(env) = nobody_env(test) else { return };
    let tree = minimal_at(&env, "p");
    fs::create_dir(tree.join("skills/extra")).unwrap();
    chmod(&tree.join("skills/extra"), 0o444);
    accepts_as(&env, As::Nobody, tree.as_os_str(), V);
}

// ---------------------------------------------------------------------------
// The reference harness's own cases
// ---------------------------------------------------------------------------

#[test]
fn harness_noise_tree_keeps_exactly_the_six_runtime_files() {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    write(
        &tree.join(".claude-plugin/marketplace.json"),
        r#"{"name": "ce-marketplace", "plugins": [{"name": "compound-engineering"}]}"#,
    );
    write(&tree.join("scripts/bootstrap.sh"), "#!/bin/sh\necho ok\n");
    chmod(&tree.join("scripts/bootstrap.sh"), 0o755);
    for rel in [
        ".claude-plugin/CHANGELOG.md",
        ".git/HEAD",
        ".git/config",
        "tests/test_plugin.py",
        "docs/index.md",
        "src/main.ts",
        ".env",
        ".npmrc",
        "skills/ce-plan/api-token.txt",
        "README.md",
    ] {
        write(&tree.join(rel), "noise\n");
    }
    let report = accepts(&env, &tree, V);
    assert_eq!(report["provenance"]["file_count"], 6);
    assert_eq!(
        file_paths(&env, &digest_of(&report)),
        [
            ".claude-plugin/plugin.json",
            ".claude-plugin/marketplace.json",
            "skills/ce-code-review/SKILL.md",
            "skills/ce-plan/SKILL.md",
            "skills/ce-work/SKILL.md",
            "scripts/bootstrap.sh",
        ]
    );
    let script = &shown_files(&env, &digest_of(&report))[5];
    assert_eq!(script["executable"], true);
}

#[test]
fn harness_version_drift_is_rejected() {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    let manifest = tree.join(".claude-plugin/plugin.json");
    rejects(&env, &tree, "1.0.1", "version-mismatch", Some(&manifest));
}

#[test]
fn harness_symlink_under_skills_is_rejected() {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    let link = tree.join("skills/ce-plan/linked.md");
    symlink(tree.join("skills/ce-work/SKILL.md"), &link).unwrap();
    rejects(&env, &tree, V, "symlink", Some(&link));
}

#[test]
fn harness_total_byte_bound_holds() {
    // Nine files each within the per-file bound add up past the total one,
    // and no object of the refused release is kept.
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    let chunk = vec![b'z'; 2 * MIB];
    for i in 0..9 {
        write(&tree.join(format!("assets/chunk-{i}.bin")), &chunk);
    }
    // 8 x 2 MiB plus the manifest and skills passes 16 MiB at the eighth.
    let ninth = tree.join("assets/chunk-7.bin");
    rejects(&env, &tree, V, "too-many-bytes", Some(&ninth));
}

#[test]
fn ingesting_twice_gives_the_same_digest_and_writes_nothing() {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    write(&tree.join("scripts/run.sh"), "#!/bin/sh\n");
    chmod(&tree.join("scripts/run.sh"), 0o755);
    let first = accepts(&env, &tree, V);
    assert_eq!(first["ingest"]["already_present"], false);
    assert_eq!(first["ingest"]["new_objects"], 5);
    let before = store_files(&env.store).objects;
    assert_eq!(before.len(), 5, "{before:?}");
    assert!(
        before.keys().any(|k| k.ends_with(".x")),
        "the executable object: {before:?}"
    );

    let second = env.ingest(&tree, V);
    assert_eq!(second["provenance"], first["provenance"]);
    assert_eq!(second["ingest"]["already_present"], true);
    assert_eq!(second["ingest"]["new_objects"], 0);
    assert_eq!(second["ingest"]["reused_objects"], 5);
    assert_eq!(second["ingest"]["bytes_written"], 0);
    assert_eq!(
        store_files(&env.store).objects,
        before,
        "the second ingest touched the objects"
    );
    let snapshots = store_state(&env.store).snapshots;
    assert_eq!(
        snapshots
            .iter()
            .map(|row| row["manifest_digest"].as_str().expect("digest"))
            .collect::<Vec<_>>(),
        [digest_of(&first)]
    );
}

// ---------------------------------------------------------------------------
// The shipped example and the provenance
// ---------------------------------------------------------------------------

const EXAMPLE_DIGEST: &str = "b6d4a715700e4339938995864a004d5541fd8e210ea48d158e0bbca677dd028b";

#[test]
fn example_release_has_the_pinned_digest() {
    let env = TestEnv::new();
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/ce-plugin-1.0.0")
        .canonicalize()
        .expect("examples/ce-plugin-1.0.0");
    let report = accepts(&env, &example, "1.0.0");
    let p = &report["provenance"];
    assert_eq!(p["manifest_digest"], EXAMPLE_DIGEST);
    assert_eq!(p["file_count"], 5);
    assert_eq!(p["total_bytes"], 313);
    assert_eq!(p["name"], "compound-engineering");
    assert_eq!(p["manifest_schema_version"], 1);

    let out = env.run(["show", EXAMPLE_DIGEST, "--manifest"]);
    assert_ok(&out);
    assert_eq!(ManifestDigest::of(&out.stdout).to_hex(), EXAMPLE_DIGEST);
    let saved = env.path("manifest.json");
    fs::write(&saved, &out.stdout).unwrap();
    match Command::new("sha256sum").arg(&saved).output() {
        Ok(sum) if sum.status.success() => {
            let text = String::from_utf8(sum.stdout).unwrap();
            assert_eq!(text.split_whitespace().next(), Some(EXAMPLE_DIGEST));
        }
        _ => eprintln!("sha256sum is unavailable; checked with ManifestDigest::of only"),
    }
    if let Some(o) = oracle_verdict(&env, As::Me, example.as_os_str(), "1.0.0") {
        assert_eq!(
            o["canonical_manifest"].as_str().unwrap().as_bytes(),
            &out.stdout[..]
        );
    }
}

#[test]
fn json_provenance_equals_the_oracles() {
    if util::skip_without_oracle("json_provenance_equals_the_oracles") {
        return;
    }
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    write(
        &tree.join(".claude-plugin/marketplace.json"),
        "{\"plugins\": []}\n",
    );
    let files_in = [
        ("skills/ce-plan/references/\u{e9}tude.md", 0o644),
        ("skills/ce-plan/Zeta.md", 0o644),
        ("skills/ce-plan/alpha.md", 0o600),
        ("skills/ce-plan/\u{10000}.md", 0o644),
        ("skills/ce-plan/\u{e000}.md", 0o644),
        ("skills/ce-work/name with spaces.md", 0o644),
        ("skills/ce-work/q\"uote\\back.md", 0o644),
        ("skills/ce-work/tab\there.md", 0o644),
        ("skills/ce-work/owner-exec.sh", 0o744),
        ("skills/ce-work/other-exec.sh", 0o601),
        ("skills/ce-work/a/b/c/deep.md", 0o644),
        ("scripts/run.sh", 0o755),
        ("scripts/lib/util.sh", 0o700),
        ("assets/empty.txt", 0o644),
        ("assets/logo.svg", 0o444),
    ];
    for (rel, mode) in files_in {
        write(&tree.join(rel), format!("contents of {rel}\n"));
        chmod(&tree.join(rel), mode);
    }
    write(&tree.join("assets/empty.txt"), "");
    fs::create_dir_all(tree.join("assets/empty-dir")).unwrap();
    // accepts() compares the provenance and the file list with the oracle's.
    let report = accepts(&env, &tree, V);
    assert_eq!(report["provenance"]["file_count"], 5 + files_in.len());
}

const PLUGIN_JSON: &str = ".claude-plugin/plugin.json";

/// A minimal plugin at `ENV/p` changed by `change` (given the environment,
/// the tree, and the path `rel` in it), which must be rejected under `rule`
/// naming that path.
fn rejects_changed(rel: &str, rule: &str, change: impl FnOnce(&TestEnv, &Path, &Path)) -> Rejected {
    let env = TestEnv::new();
    let tree = minimal_at(&env, "p");
    let at = tree.join(rel);
    change(&env, &tree, &at);
    rejects(&env, &tree, V, rule, Some(&at))
}

/// A minimal plugin whose `plugin.json` holds `contents`, which must be
/// rejected under `rule` naming that file.
fn rejects_plugin_json(contents: impl AsRef<[u8]>, rule: &str) -> Rejected {
    rejects_changed(PLUGIN_JSON, rule, |_, tree, _| {
        set_plugin_json(tree, contents);
    })
}
