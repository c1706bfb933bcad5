//! Tree snapshots in the store: `ingest --profile tree|dependency|task`, and
//! the store's commands (show, list, verify, gc, rm, recover, export,
//! import) on the tree kinds.

use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::*;

const FIXTURES: &str = include_str!("../data/task-assets/fixtures.json");
const ANSWERS: &str = include_str!("../data/task-assets/answers.json");

/// A repository with nested and empty directories and a `node_modules`
/// whose `.bin` holds symlinks to executables.
fn repo(env: &TestEnv) -> PathBuf {
    let repo = env.path("repo");
    write(&repo.join("assets/a.txt"), "alpha\n");
    write(&repo.join("assets/nested/deep/b.json"), "{}\n");
    std::fs::create_dir_all(repo.join("assets/empty")).unwrap();
    std::fs::create_dir_all(repo.join("assets/nested/hollow")).unwrap();
    write(&repo.join("README.md"), "readme\n");
    let nm = repo.join("node_modules");
    write(&nm.join("pkg/cli.js"), "#!/usr/bin/env node\n");
    chmod(&nm.join("pkg/cli.js"), 0o755);
    write(&nm.join("pkg/index.js"), "module.exports = 1;\n");
    std::fs::create_dir_all(nm.join(".bin")).unwrap();
    std::os::unix::fs::symlink("../pkg/cli.js", nm.join(".bin/cli")).unwrap();
    repo
}

fn ingest_json(env: &TestEnv, args: &[&str]) -> Value {
    let mut all = vec!["--json", "ingest", "--profile"];
    all.extend_from_slice(args);
    let out = env.run(&all);
    assert_exit(&out, 0);
    parse_json(&out)
}

/// `ingest --profile dependency` of REPO's `node_modules`, mounted at
/// `node_modules`: its JSON report.
fn ingest_node_modules(env: &TestEnv, repo: &Path) -> Value {
    let repo = s(repo);
    let args = [
        "dependency",
        &repo,
        "--source",
        "node_modules",
        "--target",
        "node_modules",
    ];
    ingest_json(env, &args)
}

/// The digest's manifest bytes as stored.
fn manifest_bytes(env: &TestEnv, digest: &str) -> Vec<u8> {
    let out = env.run(["show", "--manifest", digest]);
    assert_exit(&out, 0);
    out.stdout
}

/// The profile `list --json` gives each snapshot.
fn profiles(env: &TestEnv) -> BTreeSet<(String, String)> {
    let list = env.json(["--json", "list"]);
    list["snapshots"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|s| {
            (
                s["manifest_digest"].as_str().unwrap().to_string(),
                s["profile"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A tree with nested and empty directories is stored as the harness
/// records it: its digest is the SHA-256 of the manifest stored, which
/// lists the directories (the empty ones too) and files (mode 0); list
/// names its profile; verify finds nothing wrong; gc keeps its objects.
#[test]
fn a_tree_is_stored_listed_verified_and_kept_by_gc() {
    let env = TestEnv::new();
    let repo = repo(&env);
    let r = ingest_json(&env, &["tree", &s(&repo), "--copy", "assets"]);
    let digest = r["manifest_digest"].as_str().unwrap().to_string();
    assert_eq!(r["profile"], "tree");
    assert_eq!(r["entries"], 7, "{r}");
    assert_eq!(r["total_bytes"], 9, "{r}");
    assert_eq!(r["new_objects"], 2, "{r}");
    let bytes = manifest_bytes(&env, &digest);
    assert_eq!(sha_hex(&bytes), digest);
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.starts_with(r#"[{"kind":"directory","link_target":"","mode":0,"path":"assets","sha256":"","size":0}"#), "{text}");
    assert!(text.contains(r#""path":"assets/empty""#), "{text}");
    assert!(text.contains(r#""path":"assets/nested/hollow""#), "{text}");
    assert!(profiles(&env).contains(&(digest.clone(), "tree".into())));

    let (code, report) = env.verify(&[]);
    assert_eq!(code, 0, "{report}");
    let out = env.run(["gc"]);
    assert_exit(&out, 0);
    for f in env.files(&digest) {
        assert!(exists(&env.object(&f)), "{}", f.path);
    }
    // A second capture of the same bytes writes nothing.
    let again = ingest_json(&env, &["tree", &s(&repo), "--copy", "assets"]);
    assert_eq!(again["manifest_digest"], digest.as_str());
    assert_eq!(again["already_present"], true);
    assert_eq!(again["new_objects"], 0);
    assert_eq!(again["bytes_written"], 0);
    // --name names the row; without it the row is named by its kind.
    let named = ingest_json(
        &env,
        &["tree", &s(&repo), "--copy", "README.md", "--name", "docs"],
    );
    assert_eq!(named["name"], "docs");
    let list = env.json(["--json", "list"]);
    let names: BTreeSet<(&str, &str)> = list["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["version"].as_str().unwrap()))
        .collect();
    assert_eq!(names, BTreeSet::from([("tree", ""), ("docs", "")]));
}

/// A dependency's `.bin` symlinks are kept with their targets and its
/// executables stored as executable objects; its two digests are reported,
/// its files listed under `00000/payload`.
#[test]
fn a_dependency_keeps_its_symlinks_and_executables() {
    let env = TestEnv::new();
    let repo = repo(&env);
    let r = ingest_node_modules(&env, &repo);
    let digest = r["digest"].as_str().unwrap().to_string();
    assert_eq!(r["profile"], "dependencies");
    let bytes = manifest_bytes(&env, &digest);
    assert_eq!(sha_hex(&bytes), digest);
    let text = String::from_utf8(bytes).unwrap();
    assert!(
        text.starts_with(r#"{"dependencies":[{"content":{"entries":["#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"{"kind":"symlink","link_target":"../pkg/cli.js","mode":0,"path":"payload/.bin/cli""#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#""mode":493,"path":"payload/pkg/cli.js""#),
        "{text}"
    );
    // The harness adds the empty directory vite writes into.
    assert!(text.contains(r#""path":"payload/.vite-temp""#), "{text}");
    let content = r["dependency_content_digest"].as_str().unwrap();
    assert_eq!(content.len(), 64);
    assert_eq!(
        r["dependencies"][0]["snapshot_path"],
        "dependencies/00000/payload"
    );
    let files = env.files(&digest);
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["00000/payload/pkg/cli.js", "00000/payload/pkg/index.js"]
    );
    let cli = &files[0];
    assert!(cli.executable);
    assert!(exists(&object_path(&env.store, &cli.sha256, true)));
    assert_eq!(
        mode_of(&object_path(&env.store, &cli.sha256, true)) & 0o111,
        0o111
    );
    let (code, report) = env.verify(&[]);
    assert_eq!(code, 0, "{report}");
}

/// A failed ingest changes nothing: a symlink in a `sandbox_copy` is
/// refused with the harness's words and rule, exit 3, and the store holds
/// no snapshot, no object and no event after it.
#[test]
fn a_refused_capture_changes_nothing() {
    let env = TestEnv::new();
    let repo = repo(&env);
    std::os::unix::fs::symlink("a.txt", repo.join("assets/link")).unwrap();
    let out = env.run([
        "--json",
        "ingest",
        "--profile",
        "tree",
        &s(&repo),
        "--copy",
        "assets",
    ]);
    assert_exit(&out, 3);
    let e = parse_json(&out);
    assert_eq!(
        e["error"]["message"],
        "sandbox_copy must not traverse a symlink: assets/link"
    );
    assert_eq!(e["error"]["rule"], "task-asset-symlink", "{e}");
    if env.store.exists() {
        assert!(profiles(&env).is_empty());
        assert!(object_sizes(&env.store).is_empty());
        let log = env.json(["--json", "log"]);
        assert_eq!(log["events"].as_array().map_or(0, Vec::len), 0, "{log}");
    }
    // A bound above the harness's is a usage error.
    let out = env.run([
        "ingest",
        "--profile",
        "tree",
        &s(&repo),
        "--max-bytes",
        "3000000000",
    ]);
    assert_exit(&out, 2);
}

/// Holds `/tmp/cestore-task-assets/.lock` while the fixtures are built there.
struct Lock(#[allow(dead_code)] OwnedFd);

fn lock(root: &str) -> Lock {
    std::fs::create_dir_all(root).unwrap();
    let fd = rustix::fs::open(
        Path::new(root).join(".lock"),
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CREATE | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
    rustix::fs::flock(&fd, rustix::fs::FlockOperation::LockExclusive).unwrap();
    Lock(fd)
}

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

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Builds a fixture's tree as the data's README says: parents not listed
/// are 0755 directories, entries in order, then modes (files, then
/// directories deepest first).
fn build(root: &Path, entries: &[Value], repo: &str) {
    std::fs::create_dir_all(root).unwrap();
    set_mode(root, 0o755);
    let mode = |e: &Value| u32::from_str_radix(e["mode"].as_str().unwrap(), 8).unwrap();
    let mut files = Vec::new();
    let mut dirs: BTreeSet<(usize, PathBuf, u32)> = BTreeSet::new();
    let mut listed = Vec::new();
    for e in entries {
        let path = root.join(e["path"].as_str().unwrap());
        let mut parent = path.parent();
        while let Some(p) = parent.filter(|p| *p != root) {
            dirs.insert((p.components().count(), p.to_path_buf(), 0o755));
            parent = p.parent();
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        match e["kind"].as_str().unwrap() {
            "file" => {
                let data = match e.get("hex") {
                    Some(hex) => unhex(hex.as_str().unwrap()),
                    None => e["text"].as_str().unwrap().as_bytes().to_vec(),
                };
                std::fs::write(&path, data).unwrap();
                files.push((path, mode(e)));
            }
            "directory" => {
                std::fs::create_dir_all(&path).unwrap();
                listed.push((path.components().count(), path.clone(), mode(e)));
            }
            "symlink" => {
                let target = e["target"].as_str().unwrap();
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
                    rustix::fs::Mode::from_raw_mode(mode(e)),
                    0,
                )
                .unwrap();
                files.push((path, mode(e)));
            }
            other => panic!("{other}: not a kind these tests build"),
        }
    }
    for (path, mode) in &files {
        set_mode(path, *mode);
    }
    let named: BTreeSet<PathBuf> = listed.iter().map(|(_, p, _)| p.clone()).collect();
    let mut all: Vec<(usize, PathBuf, u32)> = dirs
        .into_iter()
        .filter(|(_, p, _)| !named.contains(p))
        .chain(listed)
        .collect();
    all.sort();
    for (_, path, mode) in all.iter().rev() {
        set_mode(path, *mode);
    }
}

/// A fixture built at its fixed path, removed on drop.
struct Built {
    base: PathBuf,
    repo: String,
    harness: String,
    _lock: Lock,
}

impl Drop for Built {
    fn drop(&mut self) {
        remove_tree(&self.base);
    }
}

fn fixture(name: &str) -> (Built, Value, Value) {
    let fixtures: Value = serde_json::from_str(FIXTURES).unwrap();
    let answers: Value = serde_json::from_str(ANSWERS).unwrap();
    let lock = lock(fixtures["root"].as_str().unwrap());
    let f = fixtures["fixtures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap()
        .clone();
    let base = Path::new(fixtures["root"].as_str().unwrap()).join(name);
    remove_tree(&base);
    let repo = layout(&fixtures, name, "repo");
    let harness = layout(&fixtures, name, "harness");
    build(Path::new(&repo), f["repo"].as_array().unwrap(), &repo);
    if let Some(tree) = f.get("harness").and_then(Value::as_array) {
        build(Path::new(&harness), tree, &repo);
    }
    let answer = answers["answers"][name].clone();
    (
        Built {
            base,
            repo,
            harness,
            _lock: lock,
        },
        f,
        answer,
    )
}

/// Runs `ingest --profile task` on a fixture's task, with its bounds and
/// its expected binding.
fn run_task(env: &TestEnv, built: &Built, f: &Value, answer: &Value) -> std::process::Output {
    let task = env.path(&format!("{}.task.json", f["name"].as_str().unwrap()));
    write(&task, serde_json::to_vec(&f["task"]).unwrap());
    let answers: Value = serde_json::from_str(ANSWERS).unwrap();
    let sha = answer["resolved_sha"]
        .as_str()
        .or(answers["resolved_sha"].as_str())
        .unwrap();
    let mut args = vec![
        "--json".to_string(),
        "ingest".into(),
        "--profile".into(),
        "task".into(),
        built.repo.clone(),
        "--task".into(),
        s(&task),
        "--resolved-sha".into(),
        sha.into(),
    ];
    if f.get("harness").is_some() {
        args.extend(["--harness-root".into(), built.harness.clone()]);
    }
    if let Some(binding) = f.get("expected_dependency_binding") {
        let file = env.path(&format!("{}.binding.json", f["name"].as_str().unwrap()));
        write(&file, serde_json::to_vec(binding).unwrap());
        args.extend(["--expect-binding".into(), s(&file)]);
    }
    for (name, value) in f
        .get("overrides")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let flag = match name.as_str() {
            "MAX_TASK_ASSET_ENTRIES" => "--max-entries",
            "MAX_TASK_ASSET_PATH_BYTES" => "--max-path-bytes",
            "MAX_TASK_ASSET_BYTES" => "--max-bytes",
            other => panic!("unknown override {other}"),
        };
        args.extend([flag.into(), value.to_string()]);
    }
    env.run(&args)
}

/// Ingests a fixture's task, which must be accepted; returns the report.
fn ingest_task(env: &TestEnv, built: &Built, f: &Value, answer: &Value) -> Value {
    let out = run_task(env, built, f, answer);
    assert_exit(&out, 0);
    parse_json(&out)
}

const DIGESTS: [(&str, &str); 4] = [
    ("digest", "digest"),
    ("manifest_digest", "manifest_digest"),
    ("dependency_manifest_digest", "dependency_manifest_digest"),
    ("dependency_content_digest", "dependency_content_digest"),
];

/// Tasks of the committed fixtures, one with a dependency (`.bin`
/// symlinks, executables, `.vite-temp`) and one reading review cases from
/// a harness root, give upstream's four digests, entries and totals, and
/// each digest names a snapshot of its kind.
#[test]
fn fixture_tasks_give_the_harness_digests() {
    for name in ["deps-node-modules", "combined", "empty-task"] {
        let env = TestEnv::new();
        let (built, f, answer) = fixture(name);
        let r = ingest_task(&env, &built, &f, &answer);
        for (ours, theirs) in DIGESTS {
            assert_eq!(r[ours], answer[theirs], "{name}: {ours}");
        }
        assert_eq!(
            r["entries"].as_array().unwrap().len(),
            answer["entries"].as_array().unwrap().len(),
            "{name}"
        );
        assert_eq!(r["total_bytes"], answer["total_bytes"], "{name}");
        assert_eq!(r["declarations"], answer["declarations"], "{name}");
        assert_eq!(r["repo_identity"], answer["repo_identity"], "{name}");
        let kinds = profiles(&env);
        for (field, kind) in [
            ("digest", "task"),
            ("manifest_digest", "tree"),
            ("dependency_manifest_digest", "dependencies"),
        ] {
            let digest = answer[field].as_str().unwrap().to_string();
            assert!(
                kinds.contains(&(digest.clone(), kind.into())),
                "{name}: {kinds:?}"
            );
            assert_eq!(sha_hex(&manifest_bytes(&env, &digest)), digest, "{name}");
        }
        let (code, report) = env.verify(&[]);
        assert_eq!(code, 0, "{name}: {report}");
    }
}

/// Every committed fixture's task, through the binary (its files hashed
/// on the hashing threads and stored as read), is accepted with the
/// harness's four digests and totals, or refused with its message word for
/// word (exit 3), the store then holding no snapshot.
#[test]
fn every_fixture_task_gets_the_harness_answer_through_the_store() {
    let fixtures: Value = serde_json::from_str(FIXTURES).unwrap();
    let (mut accepted, mut rejected) = (0, 0);
    for f in fixtures["fixtures"].as_array().unwrap() {
        let name = f["name"].as_str().unwrap();
        let env = TestEnv::new();
        let (built, f, answer) = fixture(name);
        let out = run_task(&env, &built, &f, &answer);
        if answer["outcome"] == "rejected" {
            assert_exit(&out, 3);
            let mut want = answer["error"].as_str().unwrap().to_string();
            for key in ["repo", "harness", "cache", "clone"] {
                want = want.replace(&format!("{{{key}}}"), &layout(&fixtures, name, key));
            }
            let e = parse_json(&out);
            assert_eq!(e["error"]["message"], want.as_str(), "{name}");
            assert!(e["error"]["rule"].is_string(), "{name}: {e}");
            if env.store.exists() {
                assert!(profiles(&env).is_empty(), "{name}");
            }
            rejected += 1;
        } else {
            assert_exit(&out, 0);
            let r = parse_json(&out);
            for (ours, theirs) in DIGESTS {
                assert_eq!(r[ours], answer[theirs], "{name}: {ours}");
            }
            assert_eq!(r["total_bytes"], answer["total_bytes"], "{name}");
            accepted += 1;
        }
    }
    assert_eq!((accepted, rejected), (13, 38));
}

/// rm refuses (exit 6, naming the task) to forget a tree or dependency
/// list a recorded task names, and forgets them once the task is gone.
#[test]
fn rm_refuses_what_a_task_names() {
    let env = TestEnv::new();
    let (built, f, answer) = fixture("deps-node-modules");
    ingest_task(&env, &built, &f, &answer);
    let task = answer["digest"].as_str().unwrap();
    for part in ["manifest_digest", "dependency_manifest_digest"] {
        let digest = answer[part].as_str().unwrap();
        let out = env.run(["--json", "rm", digest]);
        assert_exit(&out, 6);
        let e = parse_json(&out);
        let message = e["error"]["message"].as_str().unwrap();
        assert!(message.contains(task), "{message}");
    }
    assert_exit(&env.run(["rm", task]), 0);
    for part in ["manifest_digest", "dependency_manifest_digest"] {
        assert_exit(&env.run(["rm", answer[part].as_str().unwrap()]), 0);
    }
}

/// recover rebuilds the rows of every kind (CE, tree, dependencies, task)
/// from the manifests on disk; export then import into an empty store
/// gives the same digests of every kind.
#[test]
fn recover_and_export_import_keep_every_kind() {
    let env = TestEnv::new();
    let plugin = env.plugin("plugin", "1.0.0");
    let ce = env.ingest_digest(&plugin, "1.0.0");
    let (built, f, answer) = fixture("deps-node-modules");
    ingest_task(&env, &built, &f, &answer);
    let before = profiles(&env);
    assert_eq!(before.len(), 4, "{before:?}");
    assert!(before.contains(&(ce.clone(), "ce".into())));

    for name in std::fs::read_dir(&env.store).unwrap() {
        let path = name.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("catalogue")
        {
            std::fs::remove_file(&path).unwrap();
        }
    }
    let out = env.run(["--json", "recover"]);
    assert_exit(&out, 0);
    assert_eq!(profiles(&env), before);

    let other = TestEnv::new();
    for field in ["manifest_digest", "dependency_manifest_digest", "digest"] {
        let digest = answer[field].as_str().unwrap();
        let bundle = env.path(&format!("{field}.tar"));
        assert_exit(&env.run(["export", digest, "-o", &s(&bundle)]), 0);
        let out = other.run(["--json", "import", &s(&bundle)]);
        assert_exit(&out, 0);
    }
    let imported = profiles(&other);
    let want: BTreeSet<_> = before.into_iter().filter(|(_, p)| p != "ce").collect();
    assert_eq!(imported, want);
    let (code, report) = other.verify(&[]);
    assert_eq!(code, 0, "{report}");
}

/// A task whose tree and dependency list the store lacks is not imported
/// on its own: its bundle is refused and nothing is recorded.
#[test]
fn a_task_is_not_imported_without_its_parts() {
    let env = TestEnv::new();
    let (built, f, answer) = fixture("deps-node-modules");
    ingest_task(&env, &built, &f, &answer);
    let bundle = env.path("task.tar");
    let task = answer["digest"].as_str().unwrap();
    let exported = env.json(["--json", "export", task, "-o", &s(&bundle)]);
    // The bundle carries the task's tree and dependency list, before it.
    let parts = [
        answer["dependency_manifest_digest"].as_str().unwrap(),
        answer["manifest_digest"].as_str().unwrap(),
    ];
    let mut members: Vec<&str> = exported["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    members.sort_unstable();
    let mut want = parts.to_vec();
    want.sort_unstable();
    assert_eq!(members, want, "{exported}");
    // A bundle of the task alone, as earlier cestores wrote: its member
    // entries and their objects (a task has none of its own) left out,
    // every other entry as it was.
    let alone = env.path("alone.tar");
    let mut archive = tar::Archive::new(std::fs::File::open(&bundle).unwrap());
    let mut out = tar::Builder::new(Vec::new());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        if name.starts_with("members/") || name.starts_with("objects/") {
            continue;
        }
        let header = entry.header().clone();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
        out.append(&header, &data[..]).unwrap();
    }
    write(&alone, out.into_inner().unwrap());
    let other = TestEnv::new();
    let out = other.run(["--json", "import", &s(&alone)]);
    assert_exit(&out, 1);
    let e = parse_json(&out);
    let message = e["error"]["message"].as_str().unwrap();
    assert!(message.contains("it names the manifest"), "{e}");
    assert!(parts.iter().any(|p| message.contains(p)), "{e}");
    if other.store.exists() {
        assert!(profiles(&other).is_empty());
    }
    // The whole bundle brings the parts first.
    let out = other.run(["--json", "import", &s(&bundle)]);
    assert_exit(&out, 0);
    assert_eq!(profiles(&other), profiles(&env));
    // The task alone is taken once the store holds its parts.
    let third = TestEnv::new();
    for part in parts {
        let b = env.path(&format!("{part}.tar"));
        assert_exit(&env.run(["export", part, "-o", &s(&b)]), 0);
        assert_exit(&third.run(["import", &s(&b)]), 0);
    }
    assert_exit(&third.run(["import", &s(&alone)]), 0);
    assert_eq!(profiles(&third), profiles(&env));
}

/// A file in a CE plugin and the same bytes in a tree are one object.
#[test]
fn a_file_in_a_plugin_and_in_a_tree_is_stored_once() {
    let env = TestEnv::new();
    let plugin = env.plugin("plugin", "1.0.0");
    env.ingest_digest(&plugin, "1.0.0");
    let objects = object_sizes(&env.store).len();
    let r = ingest_json(&env, &["tree", &s(&plugin), "--copy", "skills"]);
    assert!(r["reused_objects"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["new_objects"], 0, "{r}");
    assert_eq!(object_sizes(&env.store).len(), objects);
}

/// show names a tree kind's profile and its harness digests (a task's
/// four), and finds a dependency list by its content digest too; diff and
/// find read a tree's files as they read a plugin's.
#[test]
fn show_diff_and_find_read_the_tree_kinds() {
    let env = TestEnv::new();
    let (built, f, answer) = fixture("deps-node-modules");
    ingest_task(&env, &built, &f, &answer);
    let task = answer["digest"].as_str().unwrap();
    let shown = env.json(["--json", "show", task]);
    assert_eq!(shown["profile"], "task");
    let h = &shown["harness_digests"];
    assert_eq!(h["task_asset_snapshot_digest"], answer["digest"]);
    assert_eq!(h["task_asset_manifest_digest"], answer["manifest_digest"]);
    assert_eq!(
        h["sandbox_dependency_manifest_digest"],
        answer["dependency_manifest_digest"]
    );
    assert_eq!(
        h["sandbox_dependency_content_digest"],
        answer["dependency_content_digest"]
    );
    let text = String::from_utf8(env.run(["show", task]).stdout).unwrap();
    assert!(text.contains("profile:                 task"), "{text}");
    let content = answer["dependency_content_digest"].as_str().unwrap();
    let by_content = env.json(["--json", "show", content]);
    assert_eq!(
        by_content["provenance"]["manifest_digest"],
        answer["dependency_manifest_digest"]
    );
    assert_eq!(by_content["profile"], "dependencies");

    let repo = repo(&env);
    let a = ingest_json(&env, &["tree", &s(&repo), "--copy", "assets"]);
    write(&repo.join("assets/a.txt"), "beta\n");
    let b = ingest_json(&env, &["tree", &s(&repo), "--copy", "assets"]);
    let (a, b) = (
        a["manifest_digest"].as_str().unwrap(),
        b["manifest_digest"].as_str().unwrap(),
    );
    let diff = env.json(["--json", "diff", a, b]);
    let changes = diff["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{diff}");
    assert_eq!(changes[0]["path"], "assets/a.txt");
    let found = find_matches(&env, &["--object", &sha_hex(b"beta\n")]);
    assert!(found.iter().any(|m| m["manifest_digest"] == b), "{found:?}");
}

/// A capture that would walk the store itself is refused (exit 6, as a CE
/// ingest of a source holding its store is), and records nothing.
#[test]
fn a_store_inside_a_walked_path_is_refused() {
    let base = TestEnv::new();
    let repo = repo(&base);
    let env = TestEnv::with_store(repo.join("assets/store"));
    let out = env.run([
        "--json",
        "ingest",
        "--profile",
        "tree",
        &s(&repo),
        "--copy",
        "assets",
    ]);
    assert_exit(&out, 6);
    let e = parse_json(&out);
    assert_eq!(e["error"]["kind"], "conflict", "{e}");
    assert!(profiles(&env).is_empty());
    // A path beside the store is captured.
    let r = ingest_json(&env, &["tree", &s(&repo), "--copy", "README.md"]);
    assert_eq!(r["profile"], "tree");
}

/// push then pull into an empty store gives the same snapshots of every
/// tree kind (the task after its parts), and a task pulled before its
/// parts is refused, the store left empty.
#[test]
fn push_then_pull_keeps_every_tree_kind() {
    let Some(reg) = crate::remote::registry("push_then_pull_keeps_every_tree_kind") else {
        return;
    };
    let env = TestEnv::new();
    let (built, f, answer) = fixture("deps-node-modules");
    ingest_task(&env, &built, &f, &answer);
    let target = crate::remote::repo(&reg, "tree-kinds");
    let fields = ["manifest_digest", "dependency_manifest_digest", "digest"];
    for field in fields {
        let digest = answer[field].as_str().unwrap();
        env.json(["push", digest, &target, "--plain-http", "--json"]);
    }
    // The task pulled alone brings its tree and dependency list first.
    let early = TestEnv::new();
    let task = answer["digest"].as_str().unwrap();
    let pulled = early.json([
        "--json",
        "pull",
        &format!("{target}:sha256-{task}"),
        "--plain-http",
    ]);
    assert_eq!(pulled["members"].as_array().unwrap().len(), 2, "{pulled}");
    assert_eq!(profiles(&early), profiles(&env));
    let other = TestEnv::new();
    for field in fields {
        let digest = answer[field].as_str().unwrap();
        let pulled = other.json([
            "pull",
            &format!("{target}:sha256-{digest}"),
            "--plain-http",
            "--json",
        ]);
        assert_eq!(pulled["provenance"]["manifest_digest"], digest, "{pulled}");
    }
    let want: BTreeSet<_> = profiles(&env);
    assert_eq!(profiles(&other), want);
    let (code, report) = other.verify(&[]);
    assert_eq!(code, 0, "{report}");
}

/// A tree whose manifest is longer than a CE manifest may be (16 MiB) is
/// stored, read back whole (verify clean, gc sweeps), and exported and
/// imported with the same digest.
#[test]
fn a_manifest_longer_than_a_plugins_is_read_back_whole() {
    let env = TestEnv::new();
    let repo = env.path("big");
    let dir = repo.join(format!(
        "{}/{}/{}",
        "a".repeat(200),
        "b".repeat(200),
        "c".repeat(200)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..20_000 {
        std::fs::File::create(dir.join(format!("{i:05}{}", "f".repeat(200)))).unwrap();
    }
    write(&repo.join("x.txt"), "x\n");
    let r = ingest_json(&env, &["tree", &s(&repo)]);
    let digest = r["manifest_digest"].as_str().unwrap().to_string();
    let bytes = manifest_bytes(&env, &digest);
    assert!(bytes.len() > 16 * 1024 * 1024, "{}", bytes.len());
    let (code, report) = env.verify(&[]);
    assert_eq!(code, 0, "{report}");
    assert_exit(&env.run(["gc"]), 0);
    let bundle = env.path("big.tar");
    assert_exit(&env.run(["export", &digest, "-o", &s(&bundle)]), 0);
    let other = TestEnv::new();
    let out = other.run(["--json", "import", &s(&bundle)]);
    assert_exit(&out, 0);
    assert!(profiles(&other).contains(&(digest, "tree".into())));
}

/// A file too large to hand whole to a hashing thread (over 64 MiB) is
/// stored once: written as read when no stored file has its size; when one
/// has, hashed only, and read again to be written when its object is
/// missing after all (same size, other bytes); verify finds each object's
/// bytes.
#[test]
fn a_large_file_is_stored_whether_or_not_its_size_is_known() {
    let env = TestEnv::new();
    let repo = env.path("large");
    let size = 65 * 1024 * 1024;
    let big = repo.join("big/a.bin");
    write(&big, vec![b'a'; size]);
    let first = ingest_json(&env, &["tree", &s(&repo), "--copy", "big"]);
    assert_eq!(first["new_objects"], 1, "{first}");
    assert_eq!(first["bytes_written"], size as u64, "{first}");
    let again = ingest_json(&env, &["tree", &s(&repo), "--copy", "big"]);
    assert_eq!(again["new_objects"], 0, "{again}");
    assert_eq!(again["bytes_written"], 0, "{again}");
    write(&big, vec![b'b'; size]);
    let other = ingest_json(&env, &["tree", &s(&repo), "--copy", "big"]);
    assert_eq!(other["new_objects"], 1, "{other}");
    assert_eq!(other["bytes_written"], size as u64, "{other}");
    let digest = other["manifest_digest"].as_str().unwrap();
    let files = env.files(digest);
    assert_eq!(files[0].sha256, sha_hex(&vec![b'b'; size]));
    assert!(exists(&env.object(&files[0])));
    let (code, report) = env.verify(&[]);
    assert_eq!(code, 0, "{report}");
}

/// Files copied by the kernel (no stored file has their length), files
/// hashed from their source (one has), and small ones read whole, side by
/// side: each content is stored once per mode, holding its own bytes, and
/// a length already stored with other bytes is copied after all.
#[test]
fn each_way_a_file_is_stored_keeps_its_bytes_once() {
    let env = TestEnv::new();
    let repo = env.path("ways");
    let nm = repo.join("node_modules");
    let big = |seed: u8| -> Vec<u8> { (0..300 * 1024).map(|i| (i % 251) as u8 ^ seed).collect() };
    write(&nm.join("a/one.bin"), big(1));
    write(&nm.join("a/same.bin"), big(1));
    write(&nm.join("b/run.bin"), big(1));
    set_mode(&nm.join("b/run.bin"), 0o755);
    write(&nm.join("b/small.txt"), b"small\n");
    let first = ingest_node_modules(&env, &repo);
    // big(1) twice (plain and executable) and the small file.
    assert_eq!(first["new_objects"], 3, "{first}");
    assert_eq!(first["bytes_written"], 2 * 300 * 1024 + 6, "{first}");
    let again = ingest_node_modules(&env, &repo);
    assert_eq!(
        (&again["new_objects"], &again["bytes_written"]),
        (&0.into(), &0.into()),
        "{again}"
    );
    // A length the store knows, with other bytes: hashed, then copied.
    write(&nm.join("a/same.bin"), big(2));
    let other = ingest_node_modules(&env, &repo);
    assert_eq!(other["new_objects"], 1, "{other}");
    assert_eq!(other["bytes_written"], 300 * 1024, "{other}");
    let digest = other["digest"].as_str().unwrap();
    let view = env.path("view");
    assert_exit(&env.run(["checkout", digest, &s(&view)]), 0);
    let payload = view.join("00000/payload");
    assert_eq!(std::fs::read(payload.join("a/one.bin")).unwrap(), big(1));
    assert_eq!(std::fs::read(payload.join("a/same.bin")).unwrap(), big(2));
    assert_eq!(std::fs::read(payload.join("b/run.bin")).unwrap(), big(1));
    assert_eq!(
        std::fs::read(payload.join("b/small.txt")).unwrap(),
        b"small\n"
    );
    let (code, report) = env.verify(&[]);
    assert_eq!(code, 0, "{report}");
}
