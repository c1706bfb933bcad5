//! Releases read from git objects (`--git REPO --rev REV`): each test builds
//! a real repository with the `git` command, and checks that what cestore
//! reads from its objects is what it (and, where `../shared` is present, the
//! oracle) reads from a checkout of the same revision made with
//! `git worktree add`: the same digest, or the same refusal at the same path
//! relative to the plugin's root.
//!
//! Where a checkout would not hold a blob's bytes (attributes that convert
//! line endings, a `filter=` driver), cestore refuses, and the tests check
//! that the checkout indeed differs.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use serde_json::Value;

use crate::gen;
use crate::json::{SourceEntryOut, SourceRecordOut};
use crate::util::{self, assert_exit, chmod, minimal_plugin, os, parse_json, write, TestEnv};

const V: &str = "1.0.0";

/// Runs `git ARGS` in `dir`, which must succeed; returns its stdout.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_output(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        util::describe(&out)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Runs `git ARGS` in `dir` with a fixed identity and no signing.
fn git_output(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .args([
            "-c",
            "user.name=cestore",
            "-c",
            "user.email=cestore@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "tag.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "protocol.file.allow=always",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git")
}

/// A new repository at `dir` (made if missing).
pub(crate) fn init(dir: &Path) {
    fs::create_dir_all(dir).expect("create the repository");
    git(dir, &["init", "-q"]);
}

/// Commits everything in the work tree; returns the commit.
pub(crate) fn commit_all(repo: &Path, message: &str) -> String {
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "--allow-empty", "-m", message]);
    git(repo, &["rev-parse", "HEAD"])
}

/// A checkout of `rev` at a new directory beside the repository.
fn worktree(env: &TestEnv, repo: &Path, rev: &str) -> PathBuf {
    let n = fs::read_dir(&env.base).map(|d| d.count()).unwrap_or(0);
    let dest = env.path(&format!("checkout-{n}"));
    git(
        repo,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            dest.to_str().expect("utf-8 path"),
            rev,
        ],
    );
    dest
}

/// `cestore digest` of a directory, or of `--git REPO --rev REV EXTRA`.
fn digest(env: &TestEnv, args: &[&OsStr]) -> (Output, Value) {
    let mut all = vec![os("digest")];
    all.extend_from_slice(args);
    all.extend([os("--version"), os(V), os("--json")]);
    let out = env.run(&all);
    let json = parse_json(&out);
    (out, json)
}

fn digest_git(env: &TestEnv, repo: &Path, rev: &str, extra: &[&str]) -> (Output, Value) {
    let mut args = vec![os("--git"), repo.as_os_str(), os("--rev"), os(rev)];
    args.extend(extra.iter().map(|a| os(a)));
    digest(env, &args)
}

/// The answer of a digest: its manifest digest, or its rule and its path
/// relative to `root`.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Digest(String),
    Refused { rule: String, at: String },
}

fn answer(out: &Output, json: &Value, root: &Path) -> Answer {
    if out.status.success() {
        return Answer::Digest(util::digest_of(json));
    }
    let err = &json["error"];
    let path = err["path"].as_str().unwrap_or_default();
    let at = Path::new(path)
        .strip_prefix(root)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("outside the root: {path}"));
    Answer::Refused {
        rule: err["rule"].as_str().unwrap_or("none").to_string(),
        at,
    }
}

/// Checks that `--git REPO --rev REV EXTRA` answers as a checkout of `rev`
/// does (with its plugin at `sub`): as `cestore digest` of the checkout and,
/// where present, as the oracle. Returns the answer.
fn agrees(env: &TestEnv, repo: &Path, rev: &str, extra: &[&str], sub: &str) -> Answer {
    let checkout = worktree(env, repo, rev);
    let plugin = if sub.is_empty() {
        checkout.clone()
    } else {
        checkout.join(sub)
    };
    let (out, json) = digest_git(env, repo, rev, extra);
    let from_git = answer(&out, &json, &repo.join(sub));
    let (out, json) = digest(env, &[plugin.as_os_str()]);
    let from_checkout = answer(&out, &json, &plugin);
    assert_eq!(
        from_git, from_checkout,
        "--git {rev} {extra:?} differs from its checkout"
    );
    if let Answer::Digest(digest) = &from_checkout {
        let commit = git(repo, &["rev-parse", &format!("{rev}^{{commit}}")]);
        let record = ingested_record(env, &plugin, digest);
        assert_eq!(record.read_from, "work-tree");
        assert_eq!(record.commit.as_deref(), Some(commit.as_str()));
        assert_eq!(record.path, sub);
        assert!(record.clean, "a checkout of {rev} is clean: {record:?}");
    }
    match util::oracle_snapshot(&plugin, V) {
        None => util::skip(
            "git::agrees",
            "../shared/reference/oracle.py is not present beside this checkout",
        ),
        Some(o) if o["ok"] == true => assert_eq!(
            from_git,
            Answer::Digest(o["provenance"]["manifest_digest"].as_str().unwrap().into()),
            "the oracle: {o}"
        ),
        Some(o) => {
            let error = o["error"].as_str().unwrap_or_default();
            assert!(
                refuses_alike(error, &from_git),
                "oracle: {error}, cestore: {from_git:?}"
            );
        }
    }
    from_git
}

/// Ingests the directory `dir` (which must make `digest`) and returns the
/// source record the ingest kept.
pub(crate) fn ingested_record(env: &TestEnv, dir: &Path, digest: &str) -> SourceRecordOut {
    ingested_record_of(env, dir, V, digest)
}

/// [`ingested_record`] of a release of `version`.
fn ingested_record_of(env: &TestEnv, dir: &Path, version: &str, digest: &str) -> SourceRecordOut {
    let out = env.run([
        os("ingest"),
        dir.as_os_str(),
        os("--version"),
        os(version),
        os("--json"),
    ]);
    let json = parse_json(&out);
    assert!(out.status.success(), "{}", util::describe(&out));
    assert_eq!(util::digest_of(&json), digest);
    let mut sources: Vec<SourceEntryOut> =
        serde_json::from_value(json["ingest"]["sources"].clone()).expect("the ingest's sources");
    assert_eq!(sources.len(), 1, "one record per ingest: {json}");
    let entry = sources.remove(0);
    assert_eq!(entry.via, "ingest");
    entry.record
}

/// Whether the oracle's refusal `error` is cestore's `answer`: it names the
/// same path (a missing skill, by its name).
fn refuses_alike(error: &str, answer: &Answer) -> bool {
    let Answer::Refused { rule, at } = answer else {
        return false;
    };
    if rule == "missing-skill" {
        let skill = at.split('/').nth(1).unwrap_or_default();
        return error.contains(&format!("missing required skill: {skill}"));
    }
    error.contains(at.as_str())
}

/// A release at the root of a new repository, committed.
pub(crate) fn plugin_repo(env: &TestEnv) -> PathBuf {
    let repo = env.path("repo");
    init(&repo);
    minimal_plugin(&repo, V);
    repo
}

#[test]
fn exec_bits_nested_directories_and_left_out_entries_digest_as_a_checkout() {
    let env = TestEnv::new();
    let repo = plugin_repo(&env);
    write(&repo.join("scripts/run.sh"), "#!/bin/sh\necho hi\n");
    chmod(&repo.join("scripts/run.sh"), 0o755);
    write(&repo.join("scripts/plain.sh"), "echo plain\n");
    write(&repo.join("assets/a/b/c/deep.txt"), "deep\n");
    write(&repo.join("assets/a/b/other.txt"), "other\n");
    write(&repo.join("skills/ce-plan/tests/x.md"), "left out\n");
    write(&repo.join("skills/ce-plan/api-token.txt"), "left out\n");
    write(&repo.join("README.md"), "outside the allowlist\n");
    write(&repo.join(".claude-plugin/other.json"), "{}\n");
    let commit = commit_all(&repo, "release");
    assert!(matches!(
        agrees(&env, &repo, "HEAD", &[], ""),
        Answer::Digest(_)
    ));
    // The ingest stores it, names its source and records the exec bit.
    let out = env.run([
        os("ingest"),
        os("--git"),
        repo.as_os_str(),
        os("--rev"),
        os(&commit),
        os("--version"),
        os(V),
        os("--json"),
    ]);
    util::assert_ok(&out);
    let report = parse_json(&out);
    assert_eq!(
        report["ingest"]["source"],
        format!("git:{}@{commit}:", repo.display())
    );
    let left_out: Vec<&str> = report["ingest"]["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    for p in [
        ".claude-plugin/other.json",
        "README.md",
        "skills/ce-plan/api-token.txt",
        "skills/ce-plan/tests",
    ] {
        assert!(left_out.contains(&p), "{p} in {left_out:?}");
    }
    let files = env.files(&util::digest_of(&report));
    let exec: Vec<(&str, bool)> = files
        .iter()
        .filter(|f| f.path.starts_with("scripts/"))
        .map(|f| (f.path.as_str(), f.executable))
        .collect();
    assert_eq!(
        exec,
        vec![("scripts/plain.sh", false), ("scripts/run.sh", true)]
    );
    // A repository inside the work tree is no store inside the source: the
    // objects are read, not the work tree.
    let inside = TestEnv::with_store(repo.join("store"));
    let out = inside.run([
        os("ingest"),
        os("--git"),
        repo.as_os_str(),
        os("--rev"),
        os("HEAD"),
        os("--version"),
        os(V),
        os("--json"),
    ]);
    util::assert_ok(&out);
}

#[test]
fn symlinks_are_refused_where_the_seed_refuses_them_and_ignored_elsewhere() {
    let env = TestEnv::new();
    let repo = plugin_repo(&env);
    // Outside the allowlisted directories, and under a name left out.
    symlink("skills", repo.join("README.link")).unwrap();
    symlink("/etc/passwd", repo.join("skills/ce-plan/.env")).unwrap();
    symlink("nowhere", repo.join(".claude-plugin/marketplace.json")).unwrap();
    commit_all(&repo, "accepted");
    assert!(matches!(
        agrees(&env, &repo, "HEAD", &[], ""),
        Answer::Digest(_)
    ));

    // A symlink inside skills/.
    symlink("SKILL.md", repo.join("skills/ce-plan/alias.md")).unwrap();
    commit_all(&repo, "link in skills");
    assert_eq!(
        agrees(&env, &repo, "HEAD", &[], ""),
        Answer::Refused {
            rule: "symlink".into(),
            at: "skills/ce-plan/alias.md".into()
        }
    );
    fs::remove_file(repo.join("skills/ce-plan/alias.md")).unwrap();

    // A marketplace.json that leads to a file: followed by exists(), refused.
    fs::remove_file(repo.join(".claude-plugin/marketplace.json")).unwrap();
    write(&repo.join("market.json"), "{}\n");
    symlink(
        "../market.json",
        repo.join(".claude-plugin/marketplace.json"),
    )
    .unwrap();
    commit_all(&repo, "marketplace link");
    assert_eq!(
        agrees(&env, &repo, "HEAD", &[], ""),
        Answer::Refused {
            rule: "file-not-regular".into(),
            at: ".claude-plugin/marketplace.json".into()
        }
    );
    fs::remove_file(repo.join(".claude-plugin/marketplace.json")).unwrap();

    // scripts/ as a symlink to a directory, through a chain of two.
    symlink("assets-link", repo.join("scripts")).unwrap();
    symlink("skills", repo.join("assets-link")).unwrap();
    commit_all(&repo, "scripts link");
    assert_eq!(
        agrees(&env, &repo, "HEAD", &[], ""),
        Answer::Refused {
            rule: "component-not-real-directory".into(),
            at: "scripts".into()
        }
    );
    fs::remove_file(repo.join("scripts")).unwrap();

    // One that leaves the repository cannot be judged from it.
    symlink("../../elsewhere", repo.join("scripts")).unwrap();
    commit_all(&repo, "scripts leaves");
    let (out, json) = digest_git(&env, &repo, "HEAD", &[]);
    assert_exit(&out, 3);
    assert_eq!(json["error"]["rule"], "symlink-leaves-repository", "{json}");
    assert_eq!(json["error"]["path"], util::s(&repo.join("scripts")));
}

#[test]
fn a_submodule_is_an_empty_directory() {
    let env = TestEnv::new();
    let sub = env.path("sub");
    init(&sub);
    write(&sub.join("SKILL.md"), "# from the submodule\n");
    commit_all(&sub, "sub");
    let repo = plugin_repo(&env);
    commit_all(&repo, "release");
    let url = sub.to_str().unwrap();
    git(&repo, &["submodule", "add", "-q", url, "assets/vendor"]);
    commit_all(&repo, "vendor");
    assert!(matches!(
        agrees(&env, &repo, "HEAD", &[], ""),
        Answer::Digest(_)
    ));
    // A required skill that is a submodule is missing from the checkout.
    git(&repo, &["rm", "-q", "-r", "skills/ce-work"]);
    git(&repo, &["submodule", "add", "-q", url, "skills/ce-work"]);
    commit_all(&repo, "ce-work as a submodule");
    assert_eq!(
        agrees(&env, &repo, "HEAD", &[], ""),
        Answer::Refused {
            rule: "missing-skill".into(),
            at: "skills/ce-work/SKILL.md".into()
        }
    );
}

#[test]
fn attributes_that_change_a_checkout_are_refused() {
    let env = TestEnv::new();
    let repo = plugin_repo(&env);
    write(&repo.join("scripts/run.sh"), "echo lf\n");
    write(&repo.join(".gitattributes"), "*.sh text eol=lf\n");
    commit_all(&repo, "harmless attributes");
    assert!(matches!(
        agrees(&env, &repo, "HEAD", &[], ""),
        Answer::Digest(_)
    ));

    write(&repo.join(".gitattributes"), "*.md text eol=crlf\n");
    commit_all(&repo, "crlf");
    let (out, json) = digest_git(&env, &repo, "HEAD", &[]);
    assert_exit(&out, 3);
    let err = &json["error"];
    assert_eq!(err["rule"], "checkout-converts", "{json}");
    let first = repo.join("skills/ce-code-review/SKILL.md");
    assert_eq!(err["path"], util::s(&first), "{json}");
    assert!(
        err["message"].as_str().unwrap().contains("eol=crlf"),
        "{json}"
    );
    // It is right to: the checkout holds other bytes than the blob.
    let checkout = worktree(&env, &repo, "HEAD");
    let bytes = fs::read(checkout.join("skills/ce-code-review/SKILL.md")).unwrap();
    assert!(bytes.ends_with(b"\r\n"), "{bytes:?}");

    write(
        &repo.join(".gitattributes"),
        "*.bin filter=lfs diff=lfs merge=lfs -text\n",
    );
    write(
        &repo.join("assets/model.bin"),
        "version https://git-lfs.github.com/spec/v1\n",
    );
    commit_all(&repo, "lfs");
    let (out, json) = digest_git(&env, &repo, "HEAD", &[]);
    assert_exit(&out, 3);
    let err = &json["error"];
    assert_eq!(err["rule"], "checkout-converts", "{json}");
    assert_eq!(
        err["path"],
        util::s(&repo.join("assets/model.bin")),
        "{json}"
    );
    assert!(
        err["message"].as_str().unwrap().contains("filter=lfs"),
        "{json}"
    );
}

/// A marketplace listing the plugin with `source`.
fn marketplace(source: &Value) -> String {
    serde_json::json!({
        "name": "market",
        "plugins": [
            {"name": "other", "source": "./plugins/other"},
            {"name": "compound-engineering", "source": source},
        ]
    })
    .to_string()
}

#[test]
fn plugin_finds_the_directory_the_marketplace_gives() {
    let env = TestEnv::new();
    let repo = env.path("repo");
    init(&repo);
    let plugin = repo.join("plugins/compound-engineering");
    minimal_plugin(&plugin, V);
    write(&plugin.join("scripts/x.sh"), "x\n");
    write(
        &repo.join(".claude-plugin/marketplace.json"),
        marketplace(&"./plugins/compound-engineering".into()),
    );
    commit_all(&repo, "nested");
    let nested = agrees(
        &env,
        &repo,
        "HEAD",
        &["--plugin", "compound-engineering"],
        "plugins/compound-engineering",
    );
    assert!(matches!(nested, Answer::Digest(_)));
    // --subdir names the same directory.
    let (out, json) = digest_git(
        &env,
        &repo,
        "HEAD",
        &["--subdir", "plugins/compound-engineering"],
    );
    assert_eq!(answer(&out, &json, &plugin), nested);

    // Outside the repository, or not a path: refused.
    for source in [
        Value::from("../elsewhere"),
        Value::from("/abs/path"),
        Value::from("https://github.com/o/r.git"),
        serde_json::json!({"source": "github", "repo": "o/r"}),
    ] {
        write(
            &repo.join(".claude-plugin/marketplace.json"),
            marketplace(&source),
        );
        commit_all(&repo, "outside");
        let (out, json) = digest_git(&env, &repo, "HEAD", &["--plugin", "compound-engineering"]);
        assert_exit(&out, 3);
        assert_eq!(json["error"]["rule"], "plugin-source-outside", "{json}");
        let message = json["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("not a directory inside the repository"),
            "{message}"
        );
    }
    let (out, json) = digest_git(&env, &repo, "HEAD", &["--plugin", "nobody"]);
    assert_exit(&out, 4);
    assert!(json["error"]["message"]
        .as_str()
        .unwrap()
        .contains("'nobody'"));
    let (out, _) = digest_git(&env, &repo, "HEAD", &["--subdir", "../x"]);
    assert_exit(&out, 2);
}

#[test]
fn plugin_at_the_root_of_its_marketplace() {
    let env = TestEnv::new();
    let repo = plugin_repo(&env);
    write(
        &repo.join(".claude-plugin/marketplace.json"),
        marketplace(&"./".into()),
    );
    write(&repo.join("docs/index.md"), "left out\n");
    commit_all(&repo, "root");
    assert!(matches!(
        agrees(
            &env,
            &repo,
            "HEAD",
            &["--plugin", "compound-engineering"],
            ""
        ),
        Answer::Digest(_)
    ));
}

#[test]
fn annotated_and_lightweight_tags_name_their_commits() {
    let env = TestEnv::new();
    let repo = plugin_repo(&env);
    commit_all(&repo, "one");
    git(&repo, &["tag", "-a", "v-annotated", "-m", "release one"]);
    write(&repo.join("skills/ce-plan/notes.md"), "two\n");
    commit_all(&repo, "two");
    git(&repo, &["tag", "v-light"]);
    write(&repo.join("skills/ce-plan/notes.md"), "three\n");
    commit_all(&repo, "three");
    let one = agrees(&env, &repo, "v-annotated", &[], "");
    let two = agrees(&env, &repo, "v-light", &[], "");
    let three = agrees(&env, &repo, "HEAD", &[], "");
    assert!(matches!(one, Answer::Digest(_)));
    assert_ne!(one, two);
    assert_ne!(two, three);
    let (out, json) = digest_git(&env, &repo, "no-such-tag", &[]);
    assert_exit(&out, 4);
    assert_eq!(json["error"]["kind"], "not-found", "{json}");
}

/// A work tree's ingest records its commit, tag, tree and origin (without
/// credentials); a changed byte, an added and a removed file make it dirty,
/// each named; the records survive a lost catalogue and go with `rm`.
#[test]
fn a_work_tree_records_its_commit_and_what_differs() {
    let env = TestEnv::new();
    let repo = plugin_repo(&env);
    write(&repo.join("skills/ce-plan/notes.md"), "notes\n");
    let commit = commit_all(&repo, "one");
    git(&repo, &["tag", "-a", "v1", "-m", "release one"]);
    let secret = "s3cr3t-t0ken";
    let origin = format!("https://bob:{secret}@example.com/o/r.git");
    git(&repo, &["remote", "add", "origin", &origin]);
    let clean_digest = env.ingest_digest(&repo, V);

    let record = ingested_record(&env, &repo, &clean_digest);
    assert!(record.clean);
    assert_eq!(record.commit.as_deref(), Some(commit.as_str()));
    assert_eq!(record.tag.as_deref(), Some("v1"));
    assert_eq!(record.path, "");
    assert_eq!(record.tree, Some(git(&repo, &["rev-parse", "HEAD^{tree}"])));
    assert_eq!(record.repository, "https://example.com/o/r.git");
    assert!(record.changes.is_none());

    // One changed byte.
    let skill = repo.join("skills/ce-plan/SKILL.md");
    let mut bytes = fs::read(&skill).unwrap();
    bytes[0] ^= 1;
    fs::write(&skill, &bytes).unwrap();
    let dirty = env.ingest_digest(&repo, V);
    assert_ne!(dirty, clean_digest);
    let record = ingested_record(&env, &repo, &dirty);
    assert!(!record.clean);
    let changes = record.changes.expect("what differs");
    assert_eq!(changes.changed, ["skills/ce-plan/SKILL.md"]);
    assert!(changes.added.is_empty() && changes.removed.is_empty());

    // An added and a removed file, besides.
    write(&repo.join("skills/ce-work/more.md"), "more\n");
    fs::remove_file(repo.join("skills/ce-plan/notes.md")).unwrap();
    let digest = env.ingest_digest(&repo, V);
    let changes = ingested_record(&env, &repo, &digest)
        .changes
        .expect("what differs");
    assert_eq!(changes.added, ["skills/ce-work/more.md"]);
    assert_eq!(changes.changed, ["skills/ce-plan/SKILL.md"]);
    assert_eq!(changes.removed, ["skills/ce-plan/notes.md"]);

    // No credential anywhere in the store, or in what ingest prints.
    let out = env.run([os("ingest"), repo.as_os_str(), os("--version"), os(V)]);
    assert!(out.status.success(), "{}", util::describe(&out));
    assert!(!util::describe(&out).contains(secret));
    let leaked = Command::new("grep")
        .args(["-rl", secret])
        .arg(&env.store)
        .output()
        .expect("run grep");
    assert!(leaked.stdout.is_empty(), "{}", util::describe(&leaked));

    // A lost catalogue: recover records every record file again.
    for name in [
        "catalogue.sqlite",
        "catalogue.sqlite-wal",
        "catalogue.sqlite-shm",
    ] {
        let _ = fs::remove_file(env.store.join(name));
    }
    let recovered = env.json(["recover", "--json"]);
    assert_eq!(recovered["sources_recorded"], 7, "{recovered}");
    let again = env.json(["recover", "--json"]);
    assert_eq!(again["sources_recorded"], 0, "{again}");
    assert_eq!(again["sources_written"], 0, "{again}");

    // A lost record file: recover writes it again from the catalogue.
    let lost = record_files(&env.store, &dirty).remove(0);
    let _ = Command::new("chmod")
        .arg("u+w")
        .arg(lost.parent().unwrap())
        .status();
    fs::remove_file(&lost).unwrap();
    let rewritten = env.json(["recover", "--json"]);
    assert_eq!(rewritten["sources_written"], 1, "{rewritten}");
    assert!(lost.exists());

    // rm takes a snapshot's records with it.
    let records = record_files(&env.store, &clean_digest);
    assert_eq!(records.len(), 2, "{records:?}");
    let out = env.run(["rm", clean_digest.as_str()]);
    assert!(out.status.success(), "{}", util::describe(&out));
    assert!(record_files(&env.store, &clean_digest).is_empty());
    assert_eq!(record_files(&env.store, &dirty).len(), 2);
}

/// An ingest that cannot keep its source record fails and changes nothing:
/// no snapshot, no event, no manifest; nor does a refused one leave a record.
#[test]
fn an_ingest_that_cannot_keep_its_record_changes_nothing() {
    let env = TestEnv::new();
    let repo = plugin_repo(&env);
    commit_all(&repo, "one");
    // A first snapshot, so that the store exists and holds something.
    let other = env.path("other");
    minimal_plugin(&other, "2.0.0");
    env.ingest_digest(&other, "2.0.0");
    let manifests = || {
        let root = env.store.join("manifests");
        util::names_in(&root)
            .iter()
            .flat_map(|shard| util::names_in(&root.join(shard)))
            .collect::<Vec<_>>()
    };
    let before = manifests();
    write(&env.store.join("sources"), "not a directory\n");
    let out = env.run([
        os("ingest"),
        repo.as_os_str(),
        os("--version"),
        os(V),
        os("--json"),
    ]);
    assert!(!out.status.success(), "{}", util::describe(&out));
    let error = parse_json(&out);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sources"),
        "{error}"
    );
    assert_eq!(env.listed().len(), 1, "no snapshot recorded");
    let log = env.json(["log", "--json"]);
    assert_eq!(log["ingests"].as_array().unwrap().len(), 1, "{log}");
    assert_eq!(manifests(), before, "no manifest left behind");
    fs::remove_file(env.store.join("sources")).unwrap();

    // A tree the rules refuse keeps no record either.
    fs::remove_file(repo.join("skills/ce-plan/SKILL.md")).unwrap();
    let out = env.run([os("ingest"), repo.as_os_str(), os("--version"), os(V)]);
    assert_exit(&out, 3);
    assert!(!env.store.join("sources").exists());
}

/// A directory outside any work tree keeps no record.
#[test]
fn a_directory_outside_git_keeps_no_record() {
    let env = TestEnv::new();
    let src = env.path("plain");
    minimal_plugin(&src, V);
    let json = env.ingest(&src, V);
    assert_eq!(json["ingest"]["sources"], serde_json::json!([]), "{json}");
    assert_eq!(json["ingest"]["source_unrecorded"], Value::Null, "{json}");
}

/// The source record files of a snapshot in `store`.
fn record_files(store: &Path, digest: &str) -> Vec<PathBuf> {
    let dir = store.join("sources").join(&digest[..2]).join(digest);
    match fs::read_dir(dir) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// Generated trees (see `gen`), committed: `--git` answers as the checkout.
/// What git cannot hold (FIFOs, empty directories) is not committed, and a
/// symlink that leaves the repository is refused by `--git` alone.
#[test]
fn generated_trees_answer_as_their_checkouts() {
    let env = TestEnv::new();
    let mut compared = 0;
    for seed in 0..40u64 {
        let root = env.path(&format!("gen-{seed}/repo"));
        let case = gen::plugin_tree(seed, &root);
        if case.dir != root || !git_output(&root, &["init", "-q"]).status.success() {
            continue;
        }
        if !git_output(&root, &["add", "-A"]).status.success()
            || !git_output(&root, &["commit", "-q", "--allow-empty", "-m", "gen"])
                .status
                .success()
        {
            continue;
        }
        let checkout = worktree(&env, &root, "HEAD");
        let version = case.version.as_str();
        let run = |args: &[&OsStr]| {
            let mut all = vec![os("digest")];
            all.extend_from_slice(args);
            all.extend([os("--version"), os(version), os("--json")]);
            let out = env.run(&all);
            let json = parse_json(&out);
            (out, json)
        };
        let (out, json) = run(&[os("--git"), root.as_os_str(), os("--rev"), os("HEAD")]);
        let from_git = answer(&out, &json, &root);
        if matches!(&from_git, Answer::Refused { rule, .. } if rule == "symlink-leaves-repository")
        {
            continue;
        }
        let (out, json) = run(&[checkout.as_os_str()]);
        let from_checkout = answer(&out, &json, &checkout);
        assert_eq!(from_git, from_checkout, "seed {seed}: {}", case.description);
        compared += 1;
    }
    eprintln!("{compared} generated trees compared");
    assert!(compared >= 20, "only {compared} trees compared");
}

/// The committed answers for [`every_tag`]: the oracle's, per tag.
fn every_tag_table_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/every-tag.json")
}

/// The oracle's answer for one tag as [`every_tag`] keeps it: the tag's
/// commit and the digest, or the refusal's message with the plugin's root
/// written `{root}`.
fn tag_entry(tag: &str, commit: &str, oracle: &Value, plugin: &Path) -> Value {
    let (digest, error) = if oracle["ok"] == true {
        (oracle["provenance"]["manifest_digest"].clone(), Value::Null)
    } else {
        let error = oracle["error"].as_str().unwrap_or_default();
        let root = plugin.to_string_lossy();
        (Value::Null, Value::from(error.replace(&*root, "{root}")))
    };
    serde_json::json!({"tag": tag, "commit": commit, "digest": digest, "error": error})
}

/// Whether cestore's `answer` is the one `expected` (a [`tag_entry`]) gives.
fn answers_as(expected: &Value, answer: &Answer, plugin: &Path) -> bool {
    match (expected["digest"].as_str(), answer) {
        (Some(d), Answer::Digest(found)) => d == found,
        (None, Answer::Refused { .. }) => {
            let error = expected["error"].as_str().unwrap_or_default();
            refuses_alike(&error.replace("{root}", &plugin.to_string_lossy()), answer)
        }
        _ => false,
    }
}

/// Every `compound-engineering-v*` tag of the plugin's repository, with
/// `--plugin compound-engineering`: read from git objects, it gives what
/// cestore gives for a checkout of the tag, what the oracle gives for that
/// checkout (where `../shared` is present), and the oracle's answer kept in
/// `tests/data/every-tag.json` (for every tag the table has, at the commit it
/// names); each checkout is recorded clean at its tag's commit. Opt-in: set
/// `CESTORE_GIT_TAGS_REPO` to a clone (bare or not) and run
/// `cargo test --test it git::every_tag -- --ignored --nocapture`. With the
/// oracle present, `CESTORE_REGEN_EVERY_TAG=1` rewrites the table from it.
#[test]
#[ignore = "needs CESTORE_GIT_TAGS_REPO, a clone of EveryInc/compound-engineering-plugin"]
fn every_tag() {
    let Some(repo) = std::env::var_os("CESTORE_GIT_TAGS_REPO").map(PathBuf::from) else {
        util::skip("git::every_tag", "CESTORE_GIT_TAGS_REPO is not set");
        return;
    };
    let regen = std::env::var_os("CESTORE_REGEN_EVERY_TAG").is_some_and(|v| v == "1");
    let have_oracle = util::oracle().is_some();
    assert!(
        have_oracle || !regen,
        "CESTORE_REGEN_EVERY_TAG=1 needs ../shared/reference/oracle.py beside the checkout"
    );
    if !have_oracle {
        util::skip(
            "git::every_tag (against the oracle)",
            "../shared/reference/oracle.py is not present beside this checkout: \
             each tag is compared with tests/data/every-tag.json and with a checkout instead",
        );
    }
    let table_path = every_tag_table_path();
    let table: Vec<Value> = serde_json::from_str(
        &fs::read_to_string(&table_path)
            .unwrap_or_else(|e| panic!("read {}: {e}", table_path.display())),
    )
    .expect("every-tag.json is a JSON list");
    let table: std::collections::BTreeMap<&str, &Value> = table
        .iter()
        .map(|e| (e["tag"].as_str().expect("a tag in the table"), e))
        .collect();
    let env = TestEnv::new();
    let clone = env.path("clone");
    git(
        &env.base,
        &[
            "clone",
            "-q",
            "--shared",
            "--no-checkout",
            repo.to_str().expect("utf-8 path"),
            clone.to_str().expect("utf-8 path"),
        ],
    );
    let tags = git(&repo, &["tag", "-l", "compound-engineering-v*"]);
    let (mut agreed, mut accepted, mut refused, mut clean, mut tabled) = (0, 0, 0, 0, 0);
    let (mut git_time, mut oracle_time) = (0.0, 0.0);
    let mut regenerated = Vec::new();
    let tags: Vec<&str> = tags.lines().collect();
    assert!(
        !tags.is_empty(),
        "no compound-engineering-v* tag in {}",
        repo.display()
    );
    for tag in &tags {
        let version = tag.trim_start_matches("compound-engineering-v");
        git(&clone, &["checkout", "-q", "--detach", "--force", tag]);
        let commit = git(&clone, &["rev-parse", "HEAD"]);
        let market: Value = serde_json::from_slice(
            &fs::read(clone.join(".claude-plugin/marketplace.json")).expect("marketplace"),
        )
        .expect("marketplace JSON");
        let source = market["plugins"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["name"] == "compound-engineering"))
            .and_then(|p| p["source"].as_str())
            .expect("the plugin's source");
        let sub = source.trim_start_matches("./").trim_end_matches('/');
        let plugin = if sub.is_empty() {
            clone.clone()
        } else {
            clone.join(sub)
        };
        let started = Instant::now();
        let out = env.run([
            os("digest"),
            os("--git"),
            repo.as_os_str(),
            os("--rev"),
            os(tag),
            os("--plugin"),
            os("compound-engineering"),
            os("--version"),
            os(version),
            os("--json"),
        ]);
        git_time += started.elapsed().as_secs_f64();
        let json = parse_json(&out);
        let root = if sub.is_empty() {
            repo.clone()
        } else {
            repo.join(sub)
        };
        let from_git = answer(&out, &json, &root);
        match from_git {
            Answer::Digest(_) => accepted += 1,
            Answer::Refused { .. } => refused += 1,
        }
        let mut why_not = Vec::new();
        // cestore on a checkout of the tag.
        let out = env.run([
            os("digest"),
            plugin.as_os_str(),
            os("--version"),
            os(version),
            os("--json"),
        ]);
        let from_checkout = answer(&out, &parse_json(&out), &plugin);
        if from_checkout != from_git {
            why_not.push(format!("its checkout gives {from_checkout:?}"));
        }
        // The oracle on that checkout, where present.
        let started = Instant::now();
        let oracle = util::oracle_snapshot(&plugin, version);
        oracle_time += started.elapsed().as_secs_f64();
        if let Some(o) = &oracle {
            let expected = tag_entry(tag, &commit, o, &plugin);
            if !answers_as(&expected, &from_git, &plugin) {
                why_not.push(format!("the oracle gives {o}"));
            }
            regenerated.push(expected);
        }
        // The oracle's answer as the table keeps it.
        match table.get(*tag) {
            _ if regen => {}
            Some(entry) if entry["commit"] != commit.as_str() => {
                why_not.push(format!(
                    "the table names commit {}, the tag is at {commit}: \
                     regenerate it (CESTORE_REGEN_EVERY_TAG=1, with the oracle)",
                    entry["commit"]
                ));
            }
            Some(entry) => {
                tabled += 1;
                if !answers_as(entry, &from_git, &plugin) {
                    why_not.push(format!("the table says {entry}"));
                }
            }
            None => eprintln!("{tag}: not in {}", table_path.display()),
        }
        if why_not.is_empty() {
            agreed += 1;
        } else {
            eprintln!(
                "{tag}: --git gives {from_git:?}, but {}",
                why_not.join("; ")
            );
        }
        // The checkout, ingested from its work tree, records the tag's
        // commit, clean.
        if let Answer::Digest(d) = &from_git {
            let record = ingested_record_of(&env, &plugin, version, d);
            if record.clean
                && record.commit.as_deref() == Some(commit.as_str())
                && record.path == sub
            {
                clean += 1;
            } else {
                eprintln!("{tag}: the checkout's record {record:?}");
            }
        }
    }
    if regen {
        let lines: Vec<String> = regenerated.iter().map(Value::to_string).collect();
        fs::write(&table_path, format!("[\n{}\n]\n", lines.join(",\n")))
            .unwrap_or_else(|e| panic!("write {}: {e}", table_path.display()));
        eprintln!("wrote {} tags to {}", lines.len(), table_path.display());
    }
    eprintln!(
        "{agreed} of {} tags agree ({accepted} accepted, {refused} refused; \
         {tabled} checked against the table{}), \
         {clean} checkouts recorded clean at their tag's commit; \
         --git took {git_time:.1} s in all, the oracle {oracle_time:.1} s",
        tags.len(),
        if have_oracle {
            " and all against the oracle"
        } else {
            ", none against the oracle"
        },
    );
    assert_eq!(agreed, tags.len());
    assert_eq!(clean, accepted);
    assert_eq!(accepted + refused, tags.len());
    assert!(
        regen || tabled > 0,
        "no tag of {} is in {}: is it a clone of EveryInc/compound-engineering-plugin?",
        repo.display(),
        table_path.display()
    );
}
