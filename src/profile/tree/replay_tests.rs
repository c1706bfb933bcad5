//! The harness's committed answers (`tests/data/task-assets`) replayed through the capture walk.
//!
//! Every fixture of `fixtures.json` is built again at its fixed path (the
//! snapshot digest holds the repository's absolute path, and the harness
//! root's for review cases), and its task prepared as upstream's
//! `TaskAssetCache.prepare` prepares it: the declarations read first
//! ([`copy_declarations`], then [`dependency_declarations`], within the
//! fixture's path byte bound); then every `sandbox_copy` path as read, with
//! one builder, from the repository's root or, under
//! `eval/workflow_bench/review_cases`, from the harness root; then each
//! dependency with [`capture_dependency`] from its source as read, in
//! declaration order, all on one budget (the fixture's `overrides` set on
//! [`Limits`]); then, when the fixture gives an expected binding, the
//! dependency digests checked against it ([`check_dependency_binding`]).
//! The result is compared with `answers.json`: the declarations as
//! written, the entries of the `sandbox_copy` and of each dependency, each
//! dependency's total and the snapshot's `total_bytes`, and the four
//! digests (the snapshot's over the parsed declarations); for a rejection,
//! the error's text.
//!
//! The fixtures accepted by `prepare` and then refused by `materialize` or
//! `dependency_mounts` are replayed as accepted captures (their refusal is
//! not `prepare`'s).
//!
//! The trees live under `/tmp/cestore-task-assets`, where upstream's
//! generator (run by `python/tests/test_task_assets_data.py` when it is
//! present) builds them too: both hold an exclusive `flock` on
//! `/tmp/cestore-task-assets/.lock` while they build and read them.

use std::collections::BTreeSet;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::capture::{capture_dependency, Budget, Builder, Flavour, Limits};
use super::declare::{
    check_dependency_binding, copy_declarations, dependency_declarations, is_harness_copy,
    CopyDeclarations,
};
use super::digests::{dependency_digests, manifest_digest, snapshot_digest, SnapshotIdentity};
use super::{Dependency, TreeEntry};

const FIXTURES: &str = include_str!("../../../tests/data/task-assets/fixtures.json");
const ANSWERS: &str = include_str!("../../../tests/data/task-assets/answers.json");

/// The fixed path of one part (`repo`, `harness`, `cache`, `clone`) of a fixture.
fn layout(fixtures: &Value, name: &str, key: &str) -> String {
    fixtures["layout"][key]
        .as_str()
        .unwrap()
        .replace("{root}", fixtures["root"].as_str().unwrap())
        .replace("{name}", name)
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn mode_of(entry: &Value) -> u32 {
    u32::from_str_radix(entry["mode"].as_str().unwrap(), 8).unwrap()
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Builds a fixture's tree at `root` as the data's README says: parents not
/// listed are `0755` directories, entries in order, then the modes (files
/// first, then directories deepest first).
fn build(root: &Path, entries: &[Value], repo: &str) {
    std::fs::create_dir_all(root).unwrap();
    set_mode(root, 0o755);
    let mut files = Vec::new();
    let mut dirs: BTreeSet<(usize, PathBuf, u32)> = BTreeSet::new();
    let mut listed_dirs = BTreeSet::new();
    for entry in entries {
        let relative = entry["path"].as_str().unwrap();
        let path = root.join(relative);
        let mut parent = path.parent();
        while let Some(p) = parent {
            if p == root {
                break;
            }
            dirs.insert((p.components().count(), p.to_path_buf(), 0o755));
            parent = p.parent();
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        match entry["kind"].as_str().unwrap() {
            "file" => {
                let data = match entry.get("hex") {
                    Some(hex) => unhex(hex.as_str().unwrap()),
                    None => entry["text"].as_str().unwrap().as_bytes().to_vec(),
                };
                std::fs::write(&path, data).unwrap();
                files.push((path, mode_of(entry)));
            }
            "directory" => {
                std::fs::create_dir_all(&path).unwrap();
                listed_dirs.insert((path.components().count(), path.clone(), mode_of(entry)));
            }
            "symlink" => {
                let target = entry["target"].as_str().unwrap();
                let target = match target.strip_prefix("{repo}") {
                    Some(rest) => format!("{repo}{rest}"),
                    None => target.to_string(),
                };
                std::os::unix::fs::symlink(target, &path).unwrap();
            }
            "fifo" => {
                rustix::fs::mknodat(
                    rustix::fs::CWD,
                    &path,
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::from_raw_mode(mode_of(entry)),
                    0,
                )
                .unwrap();
                files.push((path, mode_of(entry)));
            }
            other => panic!("{relative}: kind {other}"),
        }
    }
    for (path, mode) in &files {
        set_mode(path, *mode);
    }
    // A directory both implied and listed takes its listed mode.
    let listed: BTreeSet<&PathBuf> = listed_dirs.iter().map(|(_, p, _)| p).collect();
    let mut all: Vec<(usize, PathBuf, u32)> = dirs
        .into_iter()
        .filter(|(_, p, _)| !listed.contains(p))
        .chain(listed_dirs.iter().cloned())
        .collect();
    all.sort();
    for (_, path, mode) in all.iter().rev() {
        set_mode(path, *mode);
    }
}

/// Removes a fixture's directory, whatever modes its tree was left with.
fn remove(path: &Path) {
    fn writable(path: &Path) {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        if meta.is_dir() {
            set_mode(path, 0o700);
            for child in std::fs::read_dir(path).unwrap() {
                writable(&child.unwrap().path());
            }
        }
    }
    writable(path);
    match std::fs::remove_dir_all(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("could not remove '{}': {e}", path.display()),
    }
}

fn open_directory(path: &str) -> OwnedFd {
    rustix::fs::open(
        path,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::NOFOLLOW,
        rustix::fs::Mode::empty(),
    )
    .unwrap()
}

/// The six fields the harness records for an entry, as JSON.
fn fields(e: &TreeEntry) -> Value {
    serde_json::json!({
        "kind": e.kind(),
        "link_target": e.link_target(),
        "mode": e.mode(),
        "path": e.path,
        "sha256": e.sha256().map(|s| s.to_string()).unwrap_or_default(),
        "size": e.size(),
    })
}

fn listed(entries: &[TreeEntry]) -> Value {
    Value::Array(entries.iter().map(fields).collect())
}

/// What a replay gave: the declarations, the `sandbox_copy` entries, the
/// builder's total, and each dependency with its total.
struct Captured {
    declarations: CopyDeclarations,
    copy: Vec<TreeEntry>,
    copy_total: u64,
    dependencies: Vec<(Dependency, u64)>,
}

/// Why a replay refused: the declarations, the capture or the binding.
fn refused(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Prepares a fixture's task as `prepare` does.
fn replay(fixture: &Value, repo: &str, harness: &str, limits: Limits) -> Result<Captured, String> {
    let repo_fd = open_directory(repo);
    let task = fixture["task"].as_object().unwrap();
    let declarations = copy_declarations(task, limits.max_path_bytes).map_err(refused)?;
    let dependency_list = dependency_declarations(task, limits.max_path_bytes).map_err(refused)?;
    let harness_fd = Path::new(harness).is_dir().then(|| open_directory(harness));
    let mut budget = Budget::default();
    let mut builder = Builder::new(Flavour::SandboxCopy, limits, &mut budget);
    for path in &declarations.paths {
        let root = if is_harness_copy(path) {
            harness_fd
                .as_ref()
                .expect("a review case needs the harness tree")
        } else {
            &repo_fd
        };
        builder.capture(root.as_fd(), path).map_err(refused)?;
    }
    let copy = builder.finished_entries();
    let copy_total = builder.total_bytes();
    let mut dependencies = Vec::new();
    for declaration in dependency_list {
        let captured = capture_dependency(
            repo_fd.as_fd(),
            &declaration.source_path,
            &declaration.target_path,
            limits,
            &mut budget,
        )
        .map_err(refused)?;
        dependencies.push((
            Dependency {
                source: declaration.source,
                target: declaration.target,
                entries: captured.entries,
            },
            captured.total_bytes,
        ));
    }
    if let Some(binding) = fixture
        .get("expected_dependency_binding")
        .and_then(Value::as_object)
    {
        let captured: Vec<Dependency> = dependencies.iter().map(|(d, _)| d.clone()).collect();
        check_dependency_binding(binding, &dependency_digests(&captured)).map_err(refused)?;
    }
    Ok(Captured {
        declarations,
        copy,
        copy_total,
        dependencies,
    })
}

fn limits_of(fixture: &Value) -> Limits {
    let mut limits = Limits::default();
    if let Some(overrides) = fixture.get("overrides").and_then(Value::as_object) {
        for (name, value) in overrides {
            let value = value.as_u64().unwrap();
            match name.as_str() {
                "MAX_TASK_ASSET_ENTRIES" => limits.max_entries = value,
                "MAX_TASK_ASSET_PATH_BYTES" => limits.max_path_bytes = value,
                "MAX_TASK_ASSET_BYTES" => limits.max_total_bytes = value,
                other => panic!("{}: unknown override {other}", fixture["name"]),
            }
        }
    }
    limits
}

/// Checks one accepted fixture's capture against its answer.
fn check_accepted(name: &str, answer: &Value, captured: Captured, repo: &str, harness: &str) {
    let Captured {
        declarations,
        copy,
        copy_total,
        dependencies,
    } = captured;
    assert_eq!(
        Value::from(declarations.declarations.clone()),
        answer["declarations"],
        "{name}: declarations"
    );
    assert_eq!(
        listed(&copy),
        answer["entries"],
        "{name}: sandbox_copy entries"
    );
    let recorded = answer["dependencies"].as_array().unwrap();
    assert_eq!(dependencies.len(), recorded.len(), "{name}: dependencies");
    let mut total = copy_total;
    for ((dependency, bytes), want) in dependencies.iter().zip(recorded) {
        let source = &dependency.source;
        assert_eq!(dependency.source, want["source"], "{name}: {source}");
        assert_eq!(dependency.target, want["target"], "{name}: {source}");
        assert_eq!(
            listed(&dependency.entries),
            want["entries"],
            "{name}: {source} entries"
        );
        assert_eq!(*bytes, want["total_bytes"], "{name}: {source} total_bytes");
        total += bytes;
    }
    assert_eq!(total, answer["total_bytes"], "{name}: total_bytes");

    let manifest = manifest_digest(&copy);
    assert_eq!(
        manifest.to_string(),
        answer["manifest_digest"],
        "{name}: manifest"
    );
    let dependencies: Vec<Dependency> = dependencies.into_iter().map(|(d, _)| d).collect();
    let deps = dependency_digests(&dependencies);
    assert_eq!(
        deps.content.to_string(),
        answer["dependency_content_digest"],
        "{name}"
    );
    assert_eq!(
        deps.manifest.to_string(),
        answer["dependency_manifest_digest"],
        "{name}"
    );
    let reviewed = declarations.reads_harness();
    assert_eq!(answer["repo_identity"], repo, "{name}: repo_identity");
    assert_eq!(
        answer["harness_identity"],
        if reviewed { harness } else { "" },
        "{name}: harness_identity"
    );
    let snapshot = snapshot_digest(&SnapshotIdentity {
        repo_identity: Path::new(repo),
        resolved_sha: answer["resolved_sha"].as_str().unwrap(),
        declarations: &declarations.declarations,
        manifest_digest: manifest,
        dependencies: deps,
        harness_identity: reviewed.then(|| Path::new(harness)),
    });
    assert_eq!(
        snapshot.to_string(),
        answer["digest"],
        "{name}: snapshot digest"
    );
}

/// Holds `/tmp/cestore-task-assets/.lock` exclusively while it lives.
struct TreesLock {
    _fd: OwnedFd,
}

fn lock_trees(root: &str) -> TreesLock {
    std::fs::create_dir_all(root).unwrap();
    let fd = rustix::fs::open(
        Path::new(root).join(".lock"),
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CREATE | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
    rustix::fs::flock(&fd, rustix::fs::FlockOperation::LockExclusive).unwrap();
    TreesLock { _fd: fd }
}

/// Builds a fixture's trees at their fixed paths, prepares its task, and
/// removes the trees: the repository's and the harness's paths, and what
/// the replay gave.
fn built_and_replayed(
    fixtures: &Value,
    fixture: &Value,
) -> (String, String, Result<Captured, String>) {
    let name = fixture["name"].as_str().unwrap();
    let base = Path::new(fixtures["root"].as_str().unwrap()).join(name);
    remove(&base);
    let repo = layout(fixtures, name, "repo");
    let harness = layout(fixtures, name, "harness");
    build(Path::new(&repo), fixture["repo"].as_array().unwrap(), &repo);
    if let Some(tree) = fixture.get("harness").and_then(Value::as_array) {
        build(Path::new(&harness), tree, &repo);
    }
    let got = replay(fixture, &repo, &harness, limits_of(fixture));
    remove(&base);
    (repo, harness, got)
}

/// Every fixture, built at its fixed path and prepared again (declarations,
/// capture, binding), gives the harness's declarations, entries, totals and
/// digests, or its rejection word for word.
#[test]
fn the_harness_answers_replay_through_the_capture() {
    let fixtures: Value = serde_json::from_str(FIXTURES).unwrap();
    let answers: Value = serde_json::from_str(ANSWERS).unwrap();
    let root = fixtures["root"].as_str().unwrap();
    let _lock = lock_trees(root);
    let mut accepted = 0;
    let mut rejected = 0;
    for fixture in fixtures["fixtures"].as_array().unwrap() {
        let name = fixture["name"].as_str().unwrap();
        let answer = &answers["answers"][name];
        let (repo, harness, got) = built_and_replayed(&fixtures, fixture);
        match (answer["outcome"].as_str().unwrap(), got) {
            ("rejected", Err(e)) => {
                let mut message = answer["error"].as_str().unwrap().to_string();
                for key in ["repo", "harness", "cache", "clone"] {
                    message = message.replace(&format!("{{{key}}}"), &layout(&fixtures, name, key));
                }
                assert_eq!(e.to_string(), message, "{name}");
                rejected += 1;
            }
            ("rejected", Ok(_)) => {
                panic!("{name}: accepted; the harness refused: {}", answer["error"])
            }
            (_, Err(e)) => panic!("{name}: refused ({e}); the harness accepted it"),
            (_, Ok(captured)) => {
                check_accepted(name, answer, captured, &repo, &harness);
                accepted += 1;
            }
        }
    }
    // 8 accepted throughout, 5 accepted then refused by materialize or
    // dependency_mounts; 19 rejections raised by the capture, 18 by the
    // declarations, 1 by the task binding.
    assert_eq!((accepted, rejected), (13, 38));
}

/// Declarations written unlike their paths (`./assets/`, a doubled and a
/// trailing slash) are walked by the paths as read and kept as written in
/// the digests: `deps-node-modules`'s tree, with its task so written,
/// gives its entries, manifest and content digests, and the dependency
/// manifest and snapshot digests upstream's `prepare` gave for that task
/// at that path (run outside the repository).
#[test]
fn declarations_are_walked_as_read_and_digested_as_written() {
    let fixtures: Value = serde_json::from_str(FIXTURES).unwrap();
    let answers: Value = serde_json::from_str(ANSWERS).unwrap();
    let _lock = lock_trees(fixtures["root"].as_str().unwrap());
    let mut fixture = fixtures["fixtures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "deps-node-modules")
        .unwrap()
        .clone();
    let name = "declared-as-written";
    fixture["name"] = name.into();
    fixture["task"] = serde_json::json!({
        "sandbox_copy": ["./assets/"],
        "sandbox_dependencies": [
            {"source": "./gitnexus//node_modules/", "target": "gitnexus/node_modules/"}
        ],
    });
    let mut answer = answers["answers"]["deps-node-modules"].clone();
    answer["declarations"] = serde_json::json!(["./assets/"]);
    answer["dependencies"][0]["source"] = "./gitnexus//node_modules/".into();
    answer["dependencies"][0]["target"] = "gitnexus/node_modules/".into();
    answer["dependency_manifest_digest"] =
        "1fd1296002ad9c5653c6ed0af61c43e3fac3f02c657dab6b9ab40ee67d206bbe".into();
    answer["digest"] = "5977d1bfac85b42bec49f18a857c8a969a13926636ed83e853d3270962af3bd2".into();
    answer["repo_identity"] = layout(&fixtures, name, "repo").into();
    let (repo, harness, got) = built_and_replayed(&fixtures, &fixture);
    let captured = got.unwrap_or_else(|e| panic!("{name}: refused ({e}); the harness accepted it"));
    check_accepted(name, &answer, captured, &repo, &harness);
}
