//! Views and writable copies of tree snapshots, with the real binary.
//!
//! Each accepted fixture of tests/data/task-assets is recorded in a store
//! from upstream's own answer (its `sandbox_copy` entries, dependency
//! lists and identity, the objects' bytes from the fixture's files): the
//! manifests and objects are laid in the store and `recover` records them,
//! so that the digests are upstream's. Then `path` of the task gives
//! upstream's frozen snapshot root (every path, kind, size, SHA-256 and
//! link target), `materialize` into the fixture's clone gives upstream's
//! materialized clone (kinds, modes, bytes) or its refusal word for word,
//! and `checkout --writable` a writable copy, reflinked on XFS.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use cestore::digest::ObjectId;
use cestore::profile::ce::manifest::Manifest;
use cestore::profile::tree::stored::TaskRecord;
use cestore::profile::tree::{dependency_digests, manifest_digest, Dependency, Node, TreeEntry};
use serde_json::{json, Value};

use crate::util::{self, assert_exit, assert_ok, parse_json, TestEnv};

fn data(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/task-assets")
        .join(name);
    serde_json::from_slice(&fs::read(&path).unwrap()).unwrap()
}

fn fixtures() -> BTreeMap<String, Value> {
    data("fixtures.json")["fixtures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap().to_string(), f.clone()))
        .collect()
}

fn answers() -> BTreeMap<String, Value> {
    serde_json::from_value(data("answers.json")["answers"].clone()).unwrap()
}

fn file_bytes(e: &Value) -> Vec<u8> {
    match (e.get("text"), e.get("hex")) {
        (Some(t), _) => t.as_str().unwrap().as_bytes().to_vec(),
        (_, Some(h)) => {
            let h = h.as_str().unwrap();
            (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Every file's bytes a fixture holds, by SHA-256.
fn contents(fixture: &Value) -> BTreeMap<ObjectId, Vec<u8>> {
    let mut out = BTreeMap::new();
    for tree in ["repo", "harness", "clone"] {
        for e in fixture[tree].as_array().into_iter().flatten() {
            if e["kind"] == "file" {
                let bytes = file_bytes(e);
                out.insert(ObjectId::of(&bytes), bytes);
            }
        }
    }
    out
}

fn tree_entries(list: &Value) -> Vec<TreeEntry> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| TreeEntry {
            path: e["path"].as_str().unwrap().to_string(),
            node: match e["kind"].as_str().unwrap() {
                "directory" => Node::Directory,
                "file" => Node::File {
                    size: e["size"].as_u64().unwrap(),
                    sha256: e["sha256"].as_str().unwrap().parse().unwrap(),
                    mode: e["mode"].as_u64().unwrap() as u32,
                },
                "symlink" => Node::Symlink {
                    target: e["link_target"].as_str().unwrap().to_string(),
                },
                other => panic!("{other}"),
            },
        })
        .collect()
}

/// The three digests a task snapshot recorded from an answer has.
pub(crate) struct Recorded {
    pub(crate) task: String,
    tree: String,
    dependencies: String,
}

/// Lays an accepted answer's manifests and objects in `env`'s store and
/// has `recover` record them.
fn record_answer(env: &TestEnv, fixture: &Value, answer: &Value) -> Recorded {
    let bytes = contents(fixture);
    let tree = tree_entries(&answer["entries"]);
    let deps: Vec<Dependency> = answer["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| Dependency {
            source: d["source"].as_str().unwrap().into(),
            target: d["target"].as_str().unwrap().into(),
            entries: tree_entries(&d["entries"]),
        })
        .collect();
    let record = TaskRecord {
        declarations: serde_json::from_value(answer["declarations"].clone()).unwrap(),
        repo_identity: answer["repo_identity"].as_str().unwrap().into(),
        resolved_sha: answer["resolved_sha"].as_str().unwrap().into(),
        harness_identity: answer["harness_identity"]
            .as_str()
            .filter(|h| !h.is_empty())
            .map(PathBuf::from),
        manifest_digest: manifest_digest(&tree),
        dependencies: dependency_digests(&deps),
    };
    let manifests = [
        Manifest::tree(tree),
        Manifest::dependencies(deps),
        Manifest::task(record),
    ];
    lay(env, &manifests, &bytes);
    let hex = |m: &Manifest| m.digest.to_hex();
    let recorded = Recorded {
        tree: hex(&manifests[0]),
        dependencies: hex(&manifests[1]),
        task: hex(&manifests[2]),
    };
    assert_eq!(recorded.tree, answer["manifest_digest"].as_str().unwrap());
    assert_eq!(
        recorded.dependencies,
        answer["dependency_manifest_digest"].as_str().unwrap()
    );
    assert_eq!(
        recorded.task,
        answer["digest"].as_str().unwrap(),
        "{}",
        fixture["name"]
    );
    recorded
}

/// Writes manifests and the objects they name into the store (made first
/// by an ingest of the minimal plugin) and records them by `recover`.
fn lay(env: &TestEnv, manifests: &[Manifest], bytes: &BTreeMap<ObjectId, Vec<u8>>) {
    if !env.store.join("objects").is_dir() {
        let src = env.plugin("plugin-src", "1.0.0");
        env.ingest_digest(&src, "1.0.0");
    }
    for m in manifests {
        for e in m.entries.iter().filter(|e| e.size > 0) {
            let key = e.key();
            let path = env.store.join("objects").join(key.rel_path());
            if !path.exists() {
                util::write(&path, &bytes[&e.sha256]);
                util::chmod(&path, key.mode());
            }
        }
        let hex = m.digest.to_hex();
        let path = env.store.join("manifests").join(&hex[..2]).join(&hex);
        util::write(&path, &m.bytes);
        util::chmod(&path, 0o444);
    }
    assert_ok(&env.run(["recover", "--json"]));
}

/// What is below `root`, as upstream's answers list it: `path`, `kind`,
/// `mode` (when `modes`), a file's `size` and `sha256`, a link's target.
fn listing(root: &Path, modes: bool) -> Vec<Value> {
    fn walk(dir: &Path, rel: &str, modes: bool, out: &mut Vec<Value>) {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let md = fs::symlink_metadata(&path).unwrap();
            let mut v = json!({"path": rel});
            if modes {
                v["mode"] = json!(md.permissions().mode() & 0o7777);
            }
            if md.file_type().is_symlink() {
                v["kind"] = json!("symlink");
                v["link_target"] = json!(fs::read_link(&path).unwrap().to_str().unwrap());
                out.push(v);
            } else if md.is_dir() {
                v["kind"] = json!("directory");
                out.push(v);
                walk(&path, &rel, modes, out);
            } else {
                v["kind"] = json!("file");
                let bytes = fs::read(&path).unwrap();
                v["size"] = json!(bytes.len());
                v["sha256"] = json!(util::sha_hex(&bytes));
                out.push(v);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, "", modes, &mut out);
    out.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    out
}

fn without_modes(list: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let mut e = e.clone();
            e.as_object_mut().unwrap().remove("mode");
            e
        })
        .collect();
    out.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    out
}

/// Builds a fixture's `clone` entries at `root` as the generator does:
/// parents 0755, entries in order, then modes (files first, then
/// directories deepest first); `{repo}` in a link target is the answer's
/// repository path.
fn build_clone(root: &Path, fixture: &Value, repo: &str) {
    fs::create_dir_all(root).unwrap();
    let mut modes = Vec::new();
    for e in fixture["clone"].as_array().into_iter().flatten() {
        let path = root.join(e["path"].as_str().unwrap());
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        match e["kind"].as_str().unwrap() {
            "file" => fs::write(&path, file_bytes(e)).unwrap(),
            "directory" => fs::create_dir_all(&path).unwrap(),
            "symlink" => {
                symlink(e["target"].as_str().unwrap().replace("{repo}", repo), &path).unwrap()
            }
            "fifo" => util::mkfifo(&path),
            other => panic!("{other}"),
        }
        if let Some(mode) = e["mode"].as_str() {
            modes.push((
                path,
                u32::from_str_radix(mode, 8).unwrap(),
                e["kind"] == "directory",
            ));
        }
    }
    modes.sort_by_key(|(p, _, dir)| (*dir, std::cmp::Reverse(p.components().count())));
    for (path, mode, _) in modes {
        util::chmod(&path, mode);
    }
}

/// The paths `dependency_mounts` makes in a clone (each target and its
/// parents), which upstream's `materialized` holds and `materialize` does not make.
fn mount_points(answer: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for d in answer["dependencies"].as_array().into_iter().flatten() {
        let target = d["target"].as_str().unwrap().trim_end_matches('/');
        let mut at = String::new();
        for part in target.split('/').filter(|p| !p.is_empty() && *p != ".") {
            if !at.is_empty() {
                at.push('/');
            }
            at.push_str(part);
            out.push(at.clone());
        }
    }
    out
}

fn same_inode(a: &Path, b: &Path) -> bool {
    let (a, b) = (fs::metadata(a).unwrap(), fs::metadata(b).unwrap());
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

/// Every accepted fixture: the task's shared view is upstream's frozen
/// snapshot root, path for path (kinds, sizes, SHA-256s, link targets;
/// files hard links to their objects, directories 0555); the tree's and
/// the dependency list's views hold the same below `sandbox-copy/` and
/// `dependencies/`; a checkout of the task is the same again.
#[test]
fn the_view_of_a_task_is_upstreams_snapshot_root() {
    let fixtures = fixtures();
    let mut seen = 0;
    for (name, answer) in answers() {
        if answer.get("digest").is_none() {
            continue;
        }
        seen += 1;
        let env = TestEnv::new();
        let r = record_answer(&env, &fixtures[&name], &answer);
        let v = env.json(["path", &r.task, "--json"]);
        let view = PathBuf::from(v["path"].as_str().unwrap());
        let frozen = without_modes(&answer["frozen"]);
        assert_eq!(listing(&view, false), frozen, "{name}");
        for e in listing(&view, true) {
            let path = view.join(e["path"].as_str().unwrap());
            match e["kind"].as_str().unwrap() {
                "directory" => assert_eq!(e["mode"], 0o555, "{name}: {e}"),
                "file" if e["size"] != 0 => {
                    let executable = e["mode"].as_u64().unwrap() & 0o111 != 0;
                    let object =
                        util::object_path(&env.store, e["sha256"].as_str().unwrap(), executable);
                    assert!(same_inode(&path, &object), "{name}: {e}");
                }
                _ => {}
            }
        }
        // The parts' own views.
        let tree = env.json(["path", &r.tree, "--json"]);
        let below = |prefix: &str| -> Vec<Value> {
            frozen
                .iter()
                .filter_map(|e| {
                    let p = e["path"].as_str().unwrap().strip_prefix(prefix)?;
                    let mut e = e.clone();
                    e["path"] = json!(p);
                    Some(e)
                })
                .collect()
        };
        let tree_view = PathBuf::from(tree["path"].as_str().unwrap());
        assert_eq!(listing(&tree_view, false), below("sandbox-copy/"), "{name}");
        let deps = env.json(["path", &r.dependencies, "--json"]);
        let deps_view = PathBuf::from(deps["path"].as_str().unwrap());
        assert_eq!(listing(&deps_view, false), below("dependencies/"), "{name}");
        // A checkout, recorded as a view.
        let dest = env.base.join("checked-out");
        let out = env.checkout_ok(&r.task, &dest, &[]);
        assert_eq!(listing(&dest, false), frozen, "{name}: {out}");
        assert_eq!(env.views(&r.task).len(), 2, "{name}");
        // Spares serve CE checkouts only: a tree-kind view is removed.
        let v = env.json(["discard", "--spare", dest.to_str().unwrap(), "--json"]);
        assert_eq!(
            (&v["removed"], &v["spare"]),
            (&json!(true), &json!(false)),
            "{name}"
        );
        assert!(util::spares(&env.store, &r.task).is_empty(), "{name}");
    }
    assert_eq!(seen, 13);
}

/// Every fixture `prepare` accepts, materialized into its clone (built as
/// the generator built it): the clone afterwards is upstream's
/// `materialized` (kinds, modes, bytes, link targets) less the mount
/// points only `dependency_mounts` makes, or, where upstream's
/// `materialize` refused, its message word for word, exit 3, and the
/// clone as it was; either way no staging directory is left beside it.
#[test]
fn materialize_gives_upstreams_clone_or_its_refusal() {
    let fixtures = fixtures();
    let mut seen = 0;
    for (name, answer) in answers() {
        if answer.get("digest").is_none() {
            continue;
        }
        let fixture = &fixtures[&name];
        let env = TestEnv::new();
        let r = record_answer(&env, fixture, &answer);
        let parent = env.base.join("work");
        let clone = parent.join("clone");
        build_clone(&clone, fixture, answer["paths"]["repo"].as_str().unwrap());
        let before = listing(&clone, true);
        let mut args = vec!["materialize".to_string(), r.task.clone()];
        args.push(clone.to_str().unwrap().into());
        args.push("--json".into());
        if let Some(n) = fixture["materialize"]["overrides"]["MAX_BUFFERED_FALLBACK_BYTES"].as_u64()
        {
            if fixture["materialize"]["reflink"] == false && reflinks(&parent) {
                util::skip(
                    "materialize_gives_upstreams_clone_or_its_refusal",
                    &format!(
                        "{name}: the temporary directory has reflinks, which the fixture turns off"
                    ),
                );
                continue;
            }
            args.push("--max-fallback-bytes".into());
            args.push(n.to_string());
        }
        seen += 1;
        let out = env.run(&args);
        let expected = listing_of_answer(&answer["materialized"]);
        if answer["phase"] == "materialize" {
            assert_exit(&out, 3);
            let v = parse_json(&out);
            assert_eq!(v["error"]["message"], answer["error"], "{name}: {v}");
            assert_eq!(listing(&clone, true), before, "{name}");
            assert_eq!(listing(&clone, true), expected, "{name}");
        } else {
            assert_ok(&out);
            let v = parse_json(&out);
            assert_eq!(v["digest"], r.task.as_str(), "{name}");
            let got = listing(&clone, true);
            let mounts = mount_points(&answer);
            let missing: Vec<&Value> = expected.iter().filter(|e| !got.contains(e)).collect();
            let extra: Vec<&Value> = got.iter().filter(|e| !expected.contains(e)).collect();
            assert!(extra.is_empty(), "{name}: more than upstream's: {extra:?}");
            for e in missing {
                // A mount point: a directory, or an empty file for a file
                // dependency.
                assert!(
                    mounts.contains(&e["path"].as_str().unwrap().to_string())
                        && (e["kind"] == "directory" || e["size"] == 0),
                    "{name}: upstream's clone has {e}, not made by a mount"
                );
            }
        }
        let siblings: Vec<String> = util::names_in(&parent);
        assert_eq!(siblings, ["clone"], "{name}");
    }
    assert_eq!(seen, 13);
}

fn keys(v: &Value) -> Vec<String> {
    let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    keys
}

fn listing_of_answer(list: &Value) -> Vec<Value> {
    let mut out = list.as_array().unwrap().clone();
    out.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    out
}

/// Whether the filesystem at `dir` has reflinks (`cp --reflink=always`).
pub fn reflinks(dir: &Path) -> bool {
    let (a, b) = (dir.join(".reflink-probe-a"), dir.join(".reflink-probe-b"));
    fs::create_dir_all(dir).unwrap();
    fs::write(&a, b"probe").unwrap();
    let ok = std::process::Command::new("cp")
        .arg("--reflink=always")
        .arg(&a)
        .arg(&b)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let _ = fs::remove_file(&a);
    let _ = fs::remove_file(&b);
    ok
}

/// A task with a bit of everything, recorded by hand: a tree with an empty
/// directory, an empty file and an executable; a directory dependency with
/// a symlink and a file dependency.
pub(crate) fn record_sample(env: &TestEnv) -> Recorded {
    let big = vec![b'x'; 100_000];
    let tree = vec![
        TreeEntry::directory("assets"),
        TreeEntry::file_of("assets/big.bin", &big, 0),
        TreeEntry::directory("assets/empty"),
        TreeEntry::file_of("assets/nothing", b"", 0),
        TreeEntry::file_of("top.txt", b"top\n", 0),
    ];
    let deps = vec![
        Dependency {
            source: "node_modules".into(),
            target: "node_modules".into(),
            entries: vec![
                TreeEntry::directory("payload"),
                TreeEntry::directory("payload/.bin"),
                TreeEntry::symlink("payload/.bin/tool", "../pkg/tool.js"),
                TreeEntry::directory("payload/.vite-temp"),
                TreeEntry::directory("payload/pkg"),
                TreeEntry::file_of("payload/pkg/tool.js", b"#!/usr/bin/env node\n", 0o755),
            ],
        },
        Dependency {
            source: "run.sh".into(),
            target: "run.sh".into(),
            entries: vec![TreeEntry::file_of("payload", b"#!/bin/sh\n", 0o700)],
        },
    ];
    let record = TaskRecord {
        declarations: vec!["assets".into(), "top.txt".into()],
        repo_identity: env.base.join("repo"),
        resolved_sha: "a".repeat(40),
        harness_identity: None,
        manifest_digest: manifest_digest(&tree),
        dependencies: dependency_digests(&deps),
    };
    let bytes: BTreeMap<ObjectId, Vec<u8>> = [
        big.clone(),
        b"top\n".to_vec(),
        b"#!/usr/bin/env node\n".to_vec(),
        b"#!/bin/sh\n".to_vec(),
    ]
    .into_iter()
    .map(|b| (ObjectId::of(&b), b))
    .collect();
    let manifests = [
        Manifest::tree(tree),
        Manifest::dependencies(deps),
        Manifest::task(record),
    ];
    lay(env, &manifests, &bytes);
    Recorded {
        tree: manifests[0].digest.to_hex(),
        dependencies: manifests[1].digest.to_hex(),
        task: manifests[2].digest.to_hex(),
    }
}

fn sample_copy_is_writable_and_whole(copy: &Path) {
    let got = listing(copy, true);
    let kinds: Vec<(String, String, u64)> = got
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_string(),
                e["kind"].as_str().unwrap().to_string(),
                e["mode"].as_u64().unwrap(),
            )
        })
        .collect();
    for (path, kind, mode) in &kinds {
        match kind.as_str() {
            "directory" => assert_eq!(*mode, 0o700, "{path}"),
            "file" => assert_eq!(*mode, 0o600, "{path}"),
            _ => {}
        }
    }
    let paths: Vec<&str> = kinds.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "dependencies",
            "dependencies/00000",
            "dependencies/00000/payload",
            "dependencies/00000/payload/.bin",
            "dependencies/00000/payload/.bin/tool",
            "dependencies/00000/payload/.vite-temp",
            "dependencies/00000/payload/pkg",
            "dependencies/00000/payload/pkg/tool.js",
            "dependencies/00001",
            "dependencies/00001/payload",
            "sandbox-copy",
            "sandbox-copy/assets",
            "sandbox-copy/assets/big.bin",
            "sandbox-copy/assets/empty",
            "sandbox-copy/assets/nothing",
            "sandbox-copy/top.txt",
        ]
    );
    assert_eq!(
        fs::read_link(copy.join("dependencies/00000/payload/.bin/tool")).unwrap(),
        Path::new("../pkg/tool.js")
    );
    assert_eq!(util::mode_of(copy), 0o700);
}

/// `checkout --writable` of every kind: files 0600 that share no inode
/// with the store, directories 0700, symlinks and empty directories made;
/// nothing recorded; writing the copy leaves the store as it was.
#[test]
fn a_writable_checkout_is_the_copys_own() {
    let env = TestEnv::new();
    let r = record_sample(&env);
    let copy = env.base.join("copy");
    let out = env.run([
        "checkout",
        "--writable",
        &r.task,
        copy.to_str().unwrap(),
        "--json",
    ]);
    assert_ok(&out);
    let v = parse_json(&out);
    assert_eq!(
        keys(&v),
        [
            "bytes_copied",
            "copied",
            "directories",
            "manifest_digest",
            "max_fallback_bytes",
            "ok",
            "path",
            "profile",
            "reflinked",
            "symlinks",
            "writable"
        ],
        "docs/json.md's fields"
    );
    assert_eq!(v["writable"], true);
    assert_eq!(v["profile"], "task");
    assert_eq!(v["path"], copy.to_str().unwrap());
    assert_eq!(
        v["reflinked"].as_u64().unwrap() + v["copied"].as_u64().unwrap(),
        5
    );
    assert_eq!(v["symlinks"], 1);
    assert_eq!(v["max_fallback_bytes"], 2u64 << 30);
    sample_copy_is_writable_and_whole(&copy);
    assert!(env.views(&r.task).is_empty(), "a writable copy is no view");
    let object = util::object_path(&env.store, &util::sha_hex(b"top\n"), false);
    assert!(!same_inode(&copy.join("sandbox-copy/top.txt"), &object));
    fs::write(copy.join("sandbox-copy/top.txt"), "changed").unwrap();
    assert_eq!(fs::read(&object).unwrap(), b"top\n");
    let (code, report) = env.verify(&[]);
    assert_eq!(code, 0, "{report}");
    // The tree's and the dependency list's copies, and a CE snapshot's.
    for (digest, first) in [(&r.tree, "assets"), (&r.dependencies, "00000")] {
        let dest = env.base.join(format!("copy-{first}"));
        assert_ok(&env.run(["checkout", "--writable", digest, dest.to_str().unwrap()]));
        assert_eq!(util::mode_of(&dest.join(first)), 0o700);
    }
    let ce = env.ingest_digest(&env.plugin("plugin-2", "2.0.0"), "2.0.0");
    let dest = env.base.join("copy-ce");
    assert_ok(&env.run(["checkout", "--writable", &ce, dest.to_str().unwrap()]));
    assert_eq!(
        util::mode_of(&dest.join(".claude-plugin/plugin.json")),
        0o600
    );
}

/// Where the filesystem cannot reflink, the copies are bounded: a bound
/// below the bytes to copy is refused (exit 3, the harness's message, the
/// rule) and leaves nothing at the destination or beside it; a bound above
/// the 2 GiB ceiling, or with a view's options, is a usage error.
#[test]
fn a_writable_checkout_over_its_fallback_bound_is_refused_and_leaves_nothing() {
    let env = TestEnv::new();
    let r = record_sample(&env);
    let parent = env.base.join("out");
    fs::create_dir(&parent).unwrap();
    if reflinks(&parent) {
        util::skip(
            "a_writable_checkout_over_its_fallback_bound_is_refused_and_leaves_nothing",
            "the temporary directory has reflinks: no buffered copy to bound",
        );
        return;
    }
    let copy = parent.join("copy");
    let total = 100_000 + 4 + 20 + 10;
    let out = env.run([
        "checkout",
        "--writable",
        &r.task,
        copy.to_str().unwrap(),
        "--max-fallback-bytes",
        &(total - 1).to_string(),
        "--json",
    ]);
    assert_exit(&out, 3);
    let v = parse_json(&out);
    assert_eq!(
        v["error"]["message"],
        "task asset filesystem cannot reflink the snapshot and the buffered fallback limit would be exceeded"
    );
    assert_eq!(v["error"]["rule"], "task-asset-fallback-limit");
    assert!(
        util::names_in(&parent).is_empty(),
        "{:?}",
        util::names_in(&parent)
    );
    let out = env.run([
        "checkout",
        "--writable",
        &r.task,
        copy.to_str().unwrap(),
        "--max-fallback-bytes",
        &total.to_string(),
        "--json",
    ]);
    assert_ok(&out);
    let v = parse_json(&out);
    assert_eq!(v["bytes_copied"], total);
    assert_eq!(v["reflinked"], 0);
    sample_copy_is_writable_and_whole(&copy);
    for extra in [
        vec!["--max-fallback-bytes", "2147483649"],
        vec!["--method", "copy"],
        vec!["--require-hardlinks"],
    ] {
        let dest = parent.join("other");
        let mut args = vec!["checkout", "--writable", &r.task, dest.to_str().unwrap()];
        args.extend(extra.iter().copied());
        assert_exit(&env.run(&args), 2);
        assert!(!dest.exists());
    }
    // Without --writable the bound means nothing.
    let dest = parent.join("view");
    let args = [
        "checkout",
        &r.task,
        dest.to_str().unwrap(),
        "--max-fallback-bytes",
        "5",
    ];
    assert_exit(&env.run(args), 2);
}

/// `materialize` of a snapshot that is no task is a usage error; of a
/// clone that is no real directory, the harness's refusal.
#[test]
fn materialize_takes_a_task_and_a_real_clone() {
    let env = TestEnv::new();
    let r = record_sample(&env);
    let clone = env.base.join("clone");
    fs::create_dir(&clone).unwrap();
    let out = env.run(["materialize", &r.tree, clone.to_str().unwrap(), "--json"]);
    assert_exit(&out, 2);
    let link = env.base.join("link");
    symlink(&clone, &link).unwrap();
    let out = env.run(["materialize", &r.task, link.to_str().unwrap(), "--json"]);
    assert_exit(&out, 3);
    assert_eq!(
        parse_json(&out)["error"]["message"],
        format!(
            "asset-staging clone must be a real directory: {}",
            link.display()
        )
    );
    assert!(util::names_in(&clone).is_empty());
    let out = env.run(["materialize", &r.task, clone.to_str().unwrap(), "--json"]);
    assert_ok(&out);
    let v = parse_json(&out);
    assert_eq!(
        keys(&v),
        [
            "bytes_copied",
            "clone",
            "copied",
            "declarations",
            "digest",
            "directories",
            "max_fallback_bytes",
            "ok",
            "reflinked",
            "symlinks"
        ],
        "docs/json.md's fields"
    );
    assert_eq!(v["clone"], clone.to_str().unwrap());
    assert_eq!(v["declarations"], json!(["assets", "top.txt"]));
    assert_eq!(
        util::names_in(&clone),
        ["assets".to_string(), "top.txt".to_string()]
    );
    assert_eq!(util::mode_of(&clone.join("assets/empty")), 0o700);
}

/// On a loop-mounted XFS made with `reflink=1` holding the store, every
/// file of a writable checkout and of a materialize is a reflink of its
/// object (`filefrag -v` reports its extents shared), no byte is copied,
/// and a fallback bound of 0 is no obstacle.
#[test]
fn on_xfs_writable_copies_are_reflinks() {
    const TEST: &str = "on_xfs_writable_copies_are_reflinks";
    if util::skip_unless_root(TEST, "loop-mounting an XFS image needs root") {
        return;
    }
    let xfs = match Xfs::mount() {
        Ok(x) => x,
        Err(why) => {
            util::skip(
                TEST,
                &format!("no XFS with reflinks could be mounted: {why}"),
            );
            return;
        }
    };
    let env = TestEnv::with_store(xfs.path().join("store"));
    let r = record_sample(&env);
    let copy = xfs.path().join("copy");
    let out = env.run([
        "checkout",
        "--writable",
        &r.task,
        copy.to_str().unwrap(),
        "--max-fallback-bytes",
        "0",
        "--json",
    ]);
    assert_ok(&out);
    let v = parse_json(&out);
    assert_eq!(v["reflinked"], 4, "{v}");
    assert_eq!(v["copied"], 1, "the empty file, which has no object: {v}");
    assert_eq!(v["bytes_copied"], 0);
    sample_copy_is_writable_and_whole(&copy);
    assert!(extents_shared(&copy.join("sandbox-copy/assets/big.bin")));
    let clone = xfs.path().join("work/clone");
    fs::create_dir_all(&clone).unwrap();
    let out = env.run([
        "materialize",
        &r.task,
        clone.to_str().unwrap(),
        "--max-fallback-bytes",
        "0",
        "--json",
    ]);
    assert_ok(&out);
    let v = parse_json(&out);
    assert_eq!(
        (v["reflinked"].as_u64(), v["bytes_copied"].as_u64()),
        (Some(2), Some(0))
    );
    assert!(extents_shared(&clone.join("assets/big.bin")));
    assert_eq!(
        fs::read(clone.join("assets/big.bin")).unwrap(),
        vec![b'x'; 100_000]
    );
    drop(env);
}

/// Whether `filefrag -v` reports a file's extents as shared.
fn extents_shared(path: &Path) -> bool {
    let out = std::process::Command::new("filefrag")
        .arg("-v")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("shared")
}

/// A loop-mounted XFS with reflinks, unmounted on drop.
struct Xfs {
    dir: tempfile::TempDir,
}

impl Xfs {
    fn mount() -> Result<Xfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let image = dir.path().join("x.img");
        let run = |cmd: &mut std::process::Command| -> Result<(), String> {
            match cmd.output() {
                Ok(out) if out.status.success() => Ok(()),
                Ok(out) => Err(format!(
                    "{cmd:?}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
                Err(e) => Err(format!("{cmd:?}: {e} (is xfsprogs installed?)")),
            }
        };
        fs::File::create(&image)
            .and_then(|f| f.set_len(300 << 20))
            .map_err(|e| e.to_string())?;
        run(std::process::Command::new("mkfs.xfs")
            .args(["-q", "-m", "reflink=1"])
            .arg(&image))?;
        fs::create_dir(dir.path().join("mnt")).map_err(|e| e.to_string())?;
        run(std::process::Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(dir.path().join("mnt")))?;
        Ok(Xfs { dir })
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for Xfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.path())
            .status();
    }
}

/// The path the harness's drop-in takes, with the real capture: `ingest
/// --profile task` of a repository; the task's shared view (the snapshot
/// root) and the dependency list's, whose `<i>/payload` is a mount source;
/// `materialize` into a clone with a stale root; `checkout --writable`.
#[test]
fn an_ingested_task_is_viewed_materialized_and_copied() {
    let env = TestEnv::new();
    let repo = env.path("repo");
    util::write(&repo.join("assets/a.txt"), "alpha\n");
    fs::create_dir_all(repo.join("assets/empty")).unwrap();
    util::write(&repo.join("docs/guide.md"), "guide\n");
    util::write(
        &repo.join("node_modules/pkg/cli.js"),
        "#!/usr/bin/env node\n",
    );
    util::chmod(&repo.join("node_modules/pkg/cli.js"), 0o755);
    fs::create_dir_all(repo.join("node_modules/.bin")).unwrap();
    symlink("../pkg/cli.js", repo.join("node_modules/.bin/cli")).unwrap();
    let task = env.path("task.json");
    util::write(
        &task,
        json!({
            "sandbox_copy": ["assets", "docs/guide.md"],
            "sandbox_dependencies": [{"source": "node_modules", "target": "node_modules"}],
        })
        .to_string(),
    );
    let sha = "a".repeat(40);
    let r = env.json([
        "--json",
        "ingest",
        "--profile",
        "task",
        repo.to_str().unwrap(),
        "--task",
        task.to_str().unwrap(),
        "--resolved-sha",
        &sha,
    ]);
    let digest = r["digest"].as_str().unwrap().to_string();
    let deps = r["dependency_manifest_digest"]
        .as_str()
        .unwrap()
        .to_string();

    let view = PathBuf::from(
        env.json(["path", &digest, "--json"])["path"]
            .as_str()
            .unwrap(),
    );
    let a = view.join("sandbox-copy/assets/a.txt");
    assert!(same_inode(
        &a,
        &util::object_path(&env.store, &util::sha_hex(b"alpha\n"), false)
    ));
    assert!(view.join("sandbox-copy/assets/empty").is_dir());
    assert_eq!(
        fs::read(view.join("sandbox-copy/docs/guide.md")).unwrap(),
        b"guide\n"
    );
    let payload = view.join("dependencies/00000/payload");
    assert_eq!(
        fs::read_link(payload.join(".bin/cli")).unwrap(),
        Path::new("../pkg/cli.js")
    );
    assert!(payload.join(".vite-temp").is_dir());
    assert_eq!(util::mode_of(&payload.join("pkg/cli.js")), 0o555);
    assert_eq!(util::mode_of(&view), 0o555);
    let mount = PathBuf::from(
        env.json(["path", &deps, "--json"])["path"]
            .as_str()
            .unwrap(),
    )
    .join("00000/payload");
    assert_eq!(
        fs::read(mount.join(".bin/cli")).unwrap(),
        b"#!/usr/bin/env node\n",
        "the link resolves inside the mount source"
    );

    let clone = env.path("work/clone");
    util::write(&clone.join("assets/stale"), "stale\n");
    util::write(&clone.join("keep.txt"), "kept\n");
    let out = env.run(["materialize", &digest, clone.to_str().unwrap(), "--json"]);
    assert_ok(&out);
    let got: Vec<(String, String)> = listing(&clone, true)
        .iter()
        .map(|e| (e["path"].as_str().unwrap().into(), format!("{}", e["mode"])))
        .collect();
    let want: Vec<(String, String)> = [
        ("assets", 0o700),
        ("assets/a.txt", 0o600),
        ("assets/empty", 0o700),
        ("docs", 0o700),
        ("docs/guide.md", 0o600),
        ("keep.txt", 0o644),
    ]
    .into_iter()
    .map(|(p, m)| (p.to_string(), m.to_string()))
    .collect();
    assert_eq!(got, want);
    assert_eq!(util::names_in(&env.path("work")), ["clone"]);

    let copy = env.path("copy");
    assert_ok(&env.run(["checkout", "--writable", &digest, copy.to_str().unwrap()]));
    assert_eq!(
        fs::read(copy.join("sandbox-copy/assets/a.txt")).unwrap(),
        b"alpha\n"
    );
    assert_eq!(
        util::mode_of(&copy.join("dependencies/00000/payload/pkg/cli.js")),
        0o600
    );
}
