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

/// A primary checkout (`primary`, one empty commit) and a linked worktree
/// of it (`worktree`, by `git worktree add`) in `env`.
pub(crate) fn primary_and_linked_worktree(env: &TestEnv) -> (PathBuf, PathBuf) {
    let primary = env.path("primary");
    std::fs::create_dir(&primary).unwrap();
    git(&primary, &["init", "-q"]);
    git(&primary, &["commit", "-q", "--allow-empty", "-m", "base"]);
    let worktree = env.path("worktree");
    git(
        &primary,
        &["worktree", "add", "-q", worktree.to_str().unwrap()],
    );
    (primary, worktree)
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
    let out = env.run(util::git_ingest(&repo, &commit, V, &["--json"]));
    util::assert_ok(&out);
    let report = parse_json(&out);
    assert_eq!(
        report["ingest"]["source"],
        format!("git:{}@{commit}:", repo.display())
    );
    let left_out = crate::util::field_strs(&report["ingest"]["left_out"], "path");
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
    let out = inside.run(util::git_ingest(&repo, "HEAD", V, &["--json"]));
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
        refused("symlink", "skills/ce-plan/alias.md")
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
        refused("file-not-regular", ".claude-plugin/marketplace.json")
    );
    fs::remove_file(repo.join(".claude-plugin/marketplace.json")).unwrap();

    // scripts/ as a symlink to a directory, through a chain of two.
    symlink("assets-link", repo.join("scripts")).unwrap();
    symlink("skills", repo.join("assets-link")).unwrap();
    commit_all(&repo, "scripts link");
    assert_eq!(
        agrees(&env, &repo, "HEAD", &[], ""),
        refused("component-not-real-directory", "scripts")
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
        refused("missing-skill", "skills/ce-work/SKILL.md")
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
    let (env, repo) = new_repo();
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
    let other = env.plugin("other", "2.0.0");
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
    let src = env.plugin("plain", V);
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

// Trees and objects git itself would refuse, or check out only by accident,
// written object by object (`git mktree` and `git add` refuse to make
// them), and objects whose bytes are not what their names say.

/// Writes a loose object of type `kind` holding `data` into the repository
/// at `repo`, as git writes one; returns its id.
pub(crate) fn write_object(repo: &Path, kind: &str, data: &[u8]) -> String {
    write_object_streamed(repo, kind, data.len() as u64, &mut |out| {
        out(data);
    })
}

/// Where [`write_object_streamed`]'s filler puts each piece of an object.
type PutBytes<'a> = &'a mut dyn FnMut(&[u8]);

/// Writes a loose object of type `kind` and `size` bytes, which `fill`
/// hands to its argument piece by piece, without holding it whole; returns
/// its id.
fn write_object_streamed(
    repo: &Path,
    kind: &str,
    size: u64,
    fill: &mut dyn FnMut(PutBytes<'_>),
) -> String {
    use std::io::Write;
    let header = format!("{kind} {size}\0");
    let tmp = repo.join(".git/objects/tmp-object");
    let file = fs::File::create(&tmp).expect("create the object file");
    let mut deflate = gix::zlib::stream::deflate::Write::new(file, gix::zlib::Compression::DEFAULT);
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    let mut written = 0u64;
    let mut put = |bytes: &[u8]| {
        hasher.update(bytes);
        deflate.write_all(bytes).expect("deflate");
        written += bytes.len() as u64;
    };
    put(header.as_bytes());
    fill(&mut put);
    assert_eq!(written, header.len() as u64 + size, "the object's size");
    deflate.flush().expect("finish the zlib stream");
    let id = hasher.try_finalize().expect("hash").to_string();
    let dir = repo.join(".git/objects").join(&id[..2]);
    fs::create_dir_all(&dir).expect("create the object's directory");
    fs::rename(&tmp, dir.join(&id[2..])).expect("name the object");
    id
}

/// A tree entry as a tree object spells it: mode, name, object id.
pub(crate) type RawEntry = (String, Vec<u8>, String);

pub(crate) fn raw(mode: &str, name: impl AsRef<[u8]>, id: &str) -> RawEntry {
    (mode.into(), name.as_ref().to_vec(), id.into())
}

/// Writes a tree object listing `entries` as given: in this order, twice
/// if twice, whatever their names; returns its id.
pub(crate) fn raw_tree(repo: &Path, entries: &[RawEntry]) -> String {
    let mut data = Vec::new();
    for (mode, name, id) in entries {
        data.extend_from_slice(mode.as_bytes());
        data.push(b' ');
        data.extend_from_slice(name);
        data.push(0);
        let hash = gix::ObjectId::from_hex(id.as_bytes()).expect("a hex object id");
        data.extend_from_slice(hash.as_bytes());
    }
    write_object(repo, "tree", &data)
}

/// A commit of `tree`.
pub(crate) fn commit_tree(repo: &Path, tree: &str) -> String {
    git(repo, &["commit-tree", tree, "-m", "raw"])
}

/// A commit, in the repository at `repo`, of the smallest release (version
/// [`V`]) with `in_plan` added to `skills/ce-plan/` and `at_root` to the
/// root, every tree written as given.
fn raw_release(repo: &Path, in_plan: &[RawEntry], at_root: &[RawEntry]) -> String {
    let blob = |data: &str| write_object(repo, "blob", data.as_bytes());
    let manifest = raw_tree(
        repo,
        &[raw(
            "100644",
            "plugin.json",
            &blob(&format!(
                r#"{{"name": "compound-engineering", "version": "{V}"}}"#
            )),
        )],
    );
    let mut skills = Vec::new();
    for skill in ["ce-code-review", "ce-plan", "ce-work"] {
        let mut entries = vec![raw("100644", "SKILL.md", &blob(&format!("# {skill}\n")))];
        if skill == "ce-plan" {
            entries.extend_from_slice(in_plan);
        }
        skills.push(raw("40000", skill, &raw_tree(repo, &entries)));
    }
    let mut root = vec![
        raw("40000", ".claude-plugin", &manifest),
        raw("40000", "skills", &raw_tree(repo, &skills)),
    ];
    root.extend_from_slice(at_root);
    commit_tree(repo, &raw_tree(repo, &root))
}

/// `git worktree add` of `rev` at a new directory: the checkout, or `None`
/// when git refuses it (and leaves nothing there).
fn try_worktree(env: &TestEnv, repo: &Path, rev: &str) -> Option<PathBuf> {
    let n = fs::read_dir(&env.base).map(|d| d.count()).unwrap_or(0);
    let dest = env.path(&format!("checkout-{n}"));
    let out = git_output(
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
    if out.status.success() {
        Some(dest)
    } else {
        assert!(!dest.exists(), "a refused checkout left {}", dest.display());
        None
    }
}

/// What a refused ingest must leave as it was: the store's objects, work
/// directories and snapshots, its manifest and source record files, and the
/// git tree digests it keeps.
#[derive(Debug, PartialEq, Eq)]
struct StoreSeen {
    state: util::StoreState,
    manifests: std::collections::BTreeMap<PathBuf, util::Seen>,
    sources: std::collections::BTreeMap<PathBuf, util::Seen>,
    tree_digests: Vec<(String, String)>,
}

fn store_seen(env: &TestEnv) -> StoreSeen {
    let under = |dir: &str| {
        let path = env.store.join(dir);
        if path.exists() {
            util::fingerprint(&path)
        } else {
            Default::default()
        }
    };
    StoreSeen {
        state: util::store_state(&env.store),
        manifests: under("manifests"),
        sources: under("sources"),
        tree_digests: tree_digests(&env.store),
    }
}

/// The rows of the catalogue's `git_tree_digests`, sorted.
fn tree_digests(store: &Path) -> Vec<(String, String)> {
    let path = store.join("catalogue.sqlite");
    if !path.exists() {
        return Vec::new();
    }
    let conn =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open the catalogue");
    let mut stmt = conn
        .prepare("SELECT key, digest FROM git_tree_digests ORDER BY key")
        .expect("query the tree digests");
    stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("read the tree digests")
        .map(|r| r.expect("a row"))
        .collect()
}

/// A store holding one snapshot read from git, so that it has manifests,
/// source records and a tree digest to leave alone.
fn store_with_a_git_snapshot(env: &TestEnv) {
    let repo = env.path("first");
    init(&repo);
    minimal_plugin(&repo, V);
    write(&repo.join("skills/ce-plan/first.md"), "first\n");
    commit_all(&repo, "first");
    let out = ingest_git(env, &repo, "HEAD", &[]);
    util::assert_ok(&out);
    assert_eq!(tree_digests(&env.store).len(), 1);
}

/// `cestore ingest --git REPO --rev REV EXTRA --version V --json`.
fn ingest_git(env: &TestEnv, repo: &Path, rev: &str, extra: &[&str]) -> Output {
    let mut args = util::git_ingest(repo, rev, V, extra);
    args.push(os("--json"));
    env.run(&args)
}

/// Ingests `--git REPO --rev REV`, which must be refused with exit 3 and
/// `rule` at `path`, leaving the store as it was; returns the error.
fn refused_unchanged(env: &TestEnv, repo: &Path, rev: &str, rule: &str, path: &Path) -> Value {
    let before = store_seen(env);
    let out = ingest_git(env, repo, rev, &[]);
    assert_exit(&out, 3);
    let json = parse_json(&out);
    let err = json["error"].clone();
    assert_eq!(err["rule"], rule, "{json}");
    assert_eq!(err["kind"], "rejected", "{json}");
    assert_eq!(err["path"], util::s(path), "{json}");
    assert_eq!(
        store_seen(env),
        before,
        "a refused ingest changed the store"
    );
    err
}

/// Makes a commit in a repository.
type MakeCommit = dyn Fn(&Path) -> String;

/// Trees git's `fsck` calls broken, with an empty name, a name listed
/// twice, or a blob and a tree of one name, are refused (exit 3,
/// `git-tree-invalid`, the path named) and nothing is recorded: git itself
/// refuses the first, and checks the others out only by picking one entry.
#[test]
fn malformed_trees_are_refused_and_record_nothing() {
    let env = TestEnv::new();
    store_with_a_git_snapshot(&env);
    let cases: [(&str, &MakeCommit, &str, bool); 4] = [
        (
            "empty-name",
            &|repo| {
                let blob = write_object(repo, "blob", b"x\n");
                raw_release(repo, &[raw("100644", "", &blob)], &[])
            },
            "skills/ce-plan",
            false,
        ),
        (
            "twice",
            &|repo| {
                let blob = write_object(repo, "blob", b"# other\n");
                raw_release(repo, &[raw("100644", "SKILL.md", &blob)], &[])
            },
            "skills/ce-plan/SKILL.md",
            true,
        ),
        (
            "file-and-directory",
            &|repo| {
                let blob = write_object(repo, "blob", b"x\n");
                let tree = raw_tree(repo, &[raw("100644", "SKILL.md", &blob)]);
                raw_release(
                    repo,
                    &[],
                    &[raw("40000", "docs", &tree), raw("100644", "docs", &blob)],
                )
            },
            "docs",
            true,
        ),
        (
            "twice-unsorted",
            &|repo| {
                let blob = write_object(repo, "blob", b"a\n");
                let other = write_object(repo, "blob", b"b\n");
                raw_release(
                    repo,
                    &[
                        raw("100644", "z.md", &blob),
                        raw("100644", "a.md", &blob),
                        raw("100755", "z.md", &other),
                    ],
                    &[],
                )
            },
            "skills/ce-plan/z.md",
            true,
        ),
    ];
    for (name, make, at, git_checks_out) in cases {
        let repo = env.path(name);
        init(&repo);
        let commit = make(&repo);
        assert_eq!(
            try_worktree(&env, &repo, &commit).is_some(),
            git_checks_out,
            "{name}: git's own checkout"
        );
        let err = refused_unchanged(&env, &repo, &commit, "git-tree-invalid", &repo.join(at));
        assert!(
            err["message"].as_str().unwrap().contains("git would"),
            "{name}: {err}"
        );
        let (out, json) = digest_git(&env, &repo, &commit, &[]);
        assert_exit(&out, 3);
        assert_eq!(json["error"]["rule"], "git-tree-invalid", "{name}: {json}");
    }
}

/// Entry names git's checkout refuses (`..`, `.git` in any case and its
/// NTFS aliases, a symlink `.gitmodules`), or that hold `/`, are refused by
/// rule (exit 3, `git-tree-invalid`), not as a store failure; wherever they
/// are in the revision, as a checkout refuses the whole revision.
#[test]
fn hostile_entry_names_are_refused_by_rule() {
    let env = TestEnv::new();
    store_with_a_git_snapshot(&env);
    let cases: [(&str, &str, &str); 8] = [
        ("dotdot", "..", "skills/ce-plan/../f"),
        ("dotgit", ".git", "skills/ce-plan/.git/f"),
        ("dotgit-upper", ".GIT", "skills/ce-plan/.GIT/f"),
        ("ntfs-short", "git~1", "skills/ce-plan/git~1/f"),
        (
            "ntfs-stream",
            ".git::$INDEX_ALLOCATION",
            "skills/ce-plan/.git::$INDEX_ALLOCATION/f",
        ),
        ("ntfs-dots", ".git. .", "skills/ce-plan/.git. ./f"),
        ("slash", "a/b", "skills/ce-plan/a/b"),
        ("dot", ".", "skills/ce-plan/./f"),
    ];
    for (name, entry, at) in cases {
        let repo = env.path(name);
        init(&repo);
        let blob = write_object(&repo, "blob", b"x\n");
        let inside = raw_tree(&repo, &[raw("100644", "f", &blob)]);
        let hostile = if entry.contains('/') {
            raw("100644", entry, &blob)
        } else {
            raw("40000", entry, &inside)
        };
        let commit = raw_release(&repo, &[hostile], &[]);
        let err = refused_unchanged(&env, &repo, &commit, "git-tree-invalid", &repo.join(at));
        assert_ne!(err["kind"], "io", "{name}: {err}");
        if !entry.contains('/') {
            assert!(try_worktree(&env, &repo, &commit).is_none(), "{name}");
        }
    }
    // Outside the plugin's directory too: a checkout writes every path.
    let repo = env.path("outside");
    init(&repo);
    let blob = write_object(&repo, "blob", b"x\n");
    let docs = raw_tree(&repo, &[raw("100644", ".git", &blob)]);
    let commit = raw_release(&repo, &[], &[raw("40000", "docs", &docs)]);
    refused_unchanged(
        &env,
        &repo,
        &commit,
        "git-tree-invalid",
        &repo.join("docs/.git"),
    );
    // A symlink named .gitmodules.
    let repo = env.path("gitmodules-link");
    init(&repo);
    let target = write_object(&repo, "blob", b"elsewhere");
    let commit = raw_release(&repo, &[], &[raw("120000", ".gitmodules", &target)]);
    assert!(try_worktree(&env, &repo, &commit).is_none());
    refused_unchanged(
        &env,
        &repo,
        &commit,
        "git-tree-invalid",
        &repo.join(".gitmodules"),
    );
}

/// Replaces the loose object `id` of the repository at `repo` with the file
/// of the loose object `by`: the object database then answers `id` with
/// `by`'s bytes, as `git fsck` says ("hash-path mismatch").
pub(crate) fn tamper(repo: &Path, id: &str, by: &str) {
    let file = |id: &str| repo.join(".git/objects").join(&id[..2]).join(&id[2..]);
    let target = file(id);
    assert!(target.exists(), "{id} is not loose in {}", repo.display());
    fs::remove_file(&target).expect("remove the object file");
    fs::copy(file(by), &target).expect("copy the object file");
    let fsck = git_output(repo, &["fsck", "--no-dangling"]);
    assert!(
        String::from_utf8_lossy(&fsck.stderr).contains("hash-path mismatch"),
        "{}",
        util::describe(&fsck)
    );
}

/// The source records an ingest of the directory `dir` kept (at most one).
fn ingest_dir_records(env: &TestEnv, dir: &Path) -> (String, Option<SourceRecordOut>, Value) {
    let json = env.ingest(dir, V);
    let mut sources: Vec<SourceEntryOut> =
        serde_json::from_value(json["ingest"]["sources"].clone()).expect("the ingest's sources");
    assert!(sources.len() <= 1, "{json}");
    let record = sources.pop().map(|s| s.record);
    (util::digest_of(&json), record, json)
}

/// A loose object whose bytes are another object's (a blob, a tree or the
/// commit itself) is refused (exit 3, `git-object-corrupt`, naming the
/// object and the path), and nothing is recorded: not the snapshot, not a
/// tree digest. A genuine clone's work tree edited to the forged bytes is
/// then recorded dirty, not clean; the tampered repository's own work tree
/// keeps no record; `verify --source` against it finds a mismatch.
#[test]
fn a_tampered_object_is_refused_and_never_vouches_for_a_snapshot() {
    let env = TestEnv::new();
    store_with_a_git_snapshot(&env);
    let repo = plugin_repo(&env);
    let commit = commit_all(&repo, "genuine");
    let genuine = env.path("genuine");
    git(
        &env.base,
        &[
            "clone",
            "-q",
            "--no-hardlinks",
            repo.to_str().unwrap(),
            genuine.to_str().unwrap(),
        ],
    );
    let skill = "skills/ce-plan/SKILL.md";
    let blob = git(&repo, &["rev-parse", &format!("HEAD:{skill}")]);
    let forged_bytes = "# forged\n";
    let forged = write_object(&repo, "blob", forged_bytes.as_bytes());
    tamper(&repo, &blob, &forged);

    // The ingest from the tampered objects is refused, and records nothing.
    let err = refused_unchanged(
        &env,
        &repo,
        &commit,
        "git-object-corrupt",
        &repo.join(skill),
    );
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains(&blob) && message.contains(&forged),
        "{err}"
    );
    let (out, json) = digest_git(&env, &repo, &commit, &[]);
    assert_exit(&out, 3);
    assert_eq!(json["error"]["rule"], "git-object-corrupt", "{json}");

    // A genuine clone edited to the forged bytes is dirty.
    write(&genuine.join(skill), forged_bytes);
    let (forged_digest, record, _) = ingest_dir_records(&env, &genuine);
    let record = record.expect("a work tree's record");
    assert_eq!(record.commit.as_deref(), Some(commit.as_str()));
    assert!(!record.clean, "the forged bytes recorded clean: {record:?}");
    assert_eq!(record.changes.expect("what differs").changed, [skill]);

    // The tampered repository's own work tree, holding the forged bytes,
    // keeps no record: its commit cannot be read.
    write(&repo.join(skill), forged_bytes);
    let (digest, record, json) = ingest_dir_records(&env, &repo);
    assert_eq!(digest, forged_digest);
    assert!(record.is_none(), "{json}");
    let why = json["ingest"]["source_unrecorded"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("could not trust"), "{json}");

    // Re-derived from the tampered repository, the snapshot is no match.
    let out = env.run([
        os("verify"),
        os("--source"),
        repo.as_os_str(),
        os(&forged_digest),
        os("--json"),
    ]);
    assert_exit(&out, 1);
    let report = parse_json(&out);
    assert_eq!(report["status"], "source-mismatch", "{report}");
    assert_eq!(report["mismatch"], "refused", "{report}");
    assert!(
        report["detail"]
            .as_str()
            .unwrap()
            .contains("could not trust"),
        "{report}"
    );
    // And so it is to an audit re-deriving a results file's digests.
    let results = env.path("results.jsonl");
    let row = serde_json::json!({"arm": "ce_workflow", "ce_plugin_version": V,
        "ce_plugin_manifest_digest": forged_digest});
    write(&results, format!("{row}\n"));
    let out = env.run([
        os("audit"),
        results.as_os_str(),
        os("--source-repo"),
        repo.as_os_str(),
        os("--json"),
    ]);
    assert_exit(&out, 1);
    let report = parse_json(&out);
    let check = &report["digests"][0]["source_check"];
    assert_eq!(check["status"], "source-mismatch", "{report}");
    assert_eq!(check["mismatch"], "refused", "{report}");

    // A tree and the commit replaced by others of their kind, and a blob
    // by a tree.
    let replaced = [
        ("tree", "skills/ce-plan"),
        ("commit", ""),
        ("blob-by-a-tree", "skills/ce-work/SKILL.md"),
    ];
    for (what, at) in replaced {
        let repo = env.path(&format!("tampered-{what}"));
        init(&repo);
        minimal_plugin(&repo, V);
        let commit = commit_all(&repo, "genuine");
        let id = if at.is_empty() {
            commit.clone()
        } else {
            git(&repo, &["rev-parse", &format!("HEAD:{at}")])
        };
        let forged = match what {
            "commit" => {
                let tree = git(&repo, &["rev-parse", "HEAD^{tree}"]);
                git(&repo, &["commit-tree", &tree, "-m", "forged"])
            }
            _ => {
                let blob = write_object(&repo, "blob", forged_bytes.as_bytes());
                raw_tree(&repo, &[raw("100644", "SKILL.md", &blob)])
            }
        };
        tamper(&repo, &id, &forged);
        let path = if at.is_empty() {
            repo.clone()
        } else {
            repo.join(at)
        };
        let err = refused_unchanged(&env, &repo, "HEAD", "git-object-corrupt", &path);
        assert!(err["message"].as_str().unwrap().contains(&id), "{err}");
    }
}

/// A blob of `size` bytes: `head`, then lines of `#` (comments, to git's
/// attributes) up to the size.
fn padded_blob(repo: &Path, head: &[u8], size: u64) -> String {
    write_object_streamed(repo, "blob", size, &mut |out| {
        out(head);
        let mut left = size - head.len() as u64;
        let mut line = vec![b'#'; 1023];
        line.push(b'\n');
        while left > 0 {
            let n = left.min(line.len() as u64) as usize;
            // The last piece ends with a newline too, when it can.
            if n < line.len() {
                let mut last = vec![b'#'; n];
                last[n - 1] = b'\n';
                out(&last);
            } else {
                out(&line);
            }
            left -= n as u64;
        }
    })
}

/// Runs `cestore ARGS --store STORE` with its address space limited to
/// `limit_kib` KiB (`ulimit -v`): a command that inflated a large object
/// whole fails.
fn run_limited(env: &TestEnv, limit_kib: u64, args: &[&OsStr]) -> Output {
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!("ulimit -v {limit_kib} && exec \"$0\" \"$@\""));
    util::wrapped(sh, &env.store, args)
        .output()
        .expect("run cestore under ulimit")
}

/// A small object that inflates to 1 GiB is never inflated: as
/// `.gitattributes` it is ignored, as git ignores an attributes file of
/// 100 MiB or more; as `marketplace.json` or a plugin's file it is refused
/// from its header, and so is a tree of more than 64 MiB. Each run keeps
/// within a 512 MiB address space.
#[test]
fn an_object_that_inflates_to_a_gibibyte_is_never_inflated() {
    let (env, repo) = new_repo();
    let gib = 1u64 << 30;
    let zeros = vec![0u8; 1 << 20];
    let huge = write_object_streamed(&repo, "blob", gib, &mut |out| {
        for _ in 0..1024 {
            out(&zeros);
        }
    });
    let file = repo.join(".git/objects").join(&huge[..2]).join(&huge[2..]);
    let stored = fs::metadata(&file).unwrap().len();
    assert!(stored < 2 << 20, "{stored} bytes stored");
    let limit = 512 * 1024;
    let plain = raw_release(&repo, &[], &[]);
    let run = |commit: &str, extra: &[&str]| {
        let mut args = util::git_ingest(&repo, commit, V, extra);
        args.push(os("--json"));
        let out = run_limited(&env, limit, &args);
        (parse_json(&out), out)
    };
    let (expected, out) = run(&plain, &[]);
    util::assert_ok(&out);

    let attributes = raw_release(&repo, &[], &[raw("100644", ".gitattributes", &huge)]);
    let (json, out) = run(&attributes, &[]);
    util::assert_ok(&out);
    assert_eq!(util::digest_of(&json), util::digest_of(&expected));

    let plugin_json = git(
        &repo,
        &["rev-parse", &format!("{plain}:.claude-plugin/plugin.json")],
    );
    let claude = raw_tree(
        &repo,
        &[
            raw("100644", "marketplace.json", &huge),
            raw("100644", "plugin.json", &plugin_json),
        ],
    );
    let skills = git(&repo, &["rev-parse", &format!("{plain}:skills")]);
    let root = raw_tree(
        &repo,
        &[
            raw("40000", ".claude-plugin", &claude),
            raw("40000", "skills", &skills),
        ],
    );
    let commit = commit_tree(&repo, &root);
    let (json, out) = run(&commit, &["--plugin", "compound-engineering"]);
    assert_exit(&out, 3);
    assert_eq!(json["error"]["rule"], "marketplace-invalid", "{json}");
    assert_eq!(
        json["error"]["path"],
        util::s(&repo.join(".claude-plugin/marketplace.json")),
        "{json}"
    );

    let assets = raw_tree(&repo, &[raw("100644", "big.bin", &huge)]);
    let commit = raw_release(&repo, &[], &[raw("40000", "assets", &assets)]);
    let (json, out) = run(&commit, &[]);
    assert_exit(&out, 3);
    assert_eq!(json["error"]["rule"], "file-too-large", "{json}");
    assert_eq!(
        json["error"]["path"],
        util::s(&repo.join("assets/big.bin")),
        "{json}"
    );

    // A tree of more than 64 MiB, outside the plugin: refused from its
    // header, unread.
    let big_tree = write_object_streamed(&repo, "tree", (64 << 20) + 1, &mut |out| {
        for _ in 0..64 {
            out(&zeros);
        }
        out(&[0]);
    });
    let commit = raw_release(&repo, &[], &[raw("40000", "docs", &big_tree)]);
    let (json, out) = run(&commit, &[]);
    assert_exit(&out, 3);
    assert_eq!(json["error"]["rule"], "git-object-too-large", "{json}");
    assert_eq!(json["error"]["path"], util::s(&repo.join("docs")), "{json}");
}

/// Attribute files as git's `attr.c` reads them, compared with real
/// checkouts: one of 100 MiB is ignored whole, one a byte shorter applies;
/// a line of 2,048 bytes or more is ignored, and so is whatever follows a
/// NUL; a byte-order mark is part of the first pattern; an executable
/// `.gitattributes`, or a symlink one (its target read as its text),
/// applies.
#[test]
fn attribute_files_are_read_as_git_reads_them() {
    let (env, repo) = new_repo();
    let crlf = b"*.md text eol=crlf\n";
    let limit = 100u64 << 20;
    let ignored = padded_blob(&repo, crlf, limit);
    let applied = padded_blob(&repo, crlf, limit - 1);
    let mut long = b"*.md text eol=crlf".to_vec();
    long.resize(2048, b' ');
    long.push(b'\n');
    let mut under = b"*.md text eol=crlf".to_vec();
    under.resize(2047, b' ');
    under.push(b'\n');
    let blob = |data: &[u8]| write_object(&repo, "blob", data);
    let cases: Vec<(&str, RawEntry, bool)> = vec![
        ("100 MiB", raw("100644", ".gitattributes", &ignored), false),
        (
            "100 MiB less a byte",
            raw("100644", ".gitattributes", &applied),
            true,
        ),
        (
            "a 2048-byte line",
            raw("100644", ".gitattributes", &blob(&long)),
            false,
        ),
        (
            "a 2047-byte line",
            raw("100644", ".gitattributes", &blob(&under)),
            true,
        ),
        (
            "after a NUL",
            raw(
                "100644",
                ".gitattributes",
                &blob(b"#\0\n*.md text eol=crlf\n"),
            ),
            false,
        ),
        (
            "a byte-order mark, part of the first pattern",
            raw(
                "100644",
                ".gitattributes",
                &blob(b"\xef\xbb\xbf*.md text eol=crlf\n"),
            ),
            false,
        ),
        (
            "executable",
            raw("100755", ".gitattributes", &blob(crlf)),
            true,
        ),
        (
            "a symlink",
            raw("120000", ".gitattributes", &blob(b"*.md text eol=crlf")),
            true,
        ),
    ];
    for (what, entry, converts) in cases {
        let commit = raw_release(&repo, &[], &[entry]);
        if converts {
            converts_as_its_checkout(&env, &repo, &commit, what);
        } else {
            assert!(
                matches!(agrees(&env, &repo, &commit, &[], ""), Answer::Digest(_)),
                "{what}"
            );
        }
    }
}

/// `--git REPO --rev REV` is refused with `checkout-converts` at a file,
/// and a checkout of `rev` holds other bytes there than the blob.
fn converts_as_its_checkout(env: &TestEnv, repo: &Path, rev: &str, what: &str) {
    let (out, json) = digest_git(env, repo, rev, &[]);
    assert_exit(&out, 3);
    assert_eq!(json["error"]["rule"], "checkout-converts", "{what}: {json}");
    let path = json["error"]["path"].as_str().unwrap();
    let rel = Path::new(path)
        .strip_prefix(repo)
        .unwrap()
        .to_str()
        .unwrap();
    let checkout = try_worktree(env, repo, rev).expect("git checks it out");
    let on_disk = fs::read(checkout.join(rel)).unwrap();
    let blob = git_output(repo, &["cat-file", "blob", &format!("{rev}:{rel}")]).stdout;
    assert_ne!(
        on_disk, blob,
        "{what}: the checkout holds the blob at {rel}"
    );
}

/// Makes, in a repository, the entries of one hostile case.
type MakeEntries = Box<dyn Fn(&Path) -> Vec<RawEntry>>;

/// Entries that git refuses to check out, checks out only by accident, or
/// checks out fine although they look hostile.
fn hostile_entries() -> Vec<(&'static str, MakeEntries)> {
    fn blob(repo: &Path, data: &[u8]) -> String {
        write_object(repo, "blob", data)
    }
    fn holding_f(repo: &Path) -> String {
        let f = blob(repo, b"f\n");
        raw_tree(repo, &[raw("100644", "f", &f)])
    }
    /// A directory named `name`, holding a file.
    fn dir(name: &'static str) -> MakeEntries {
        Box::new(move |r| vec![raw("40000", name, &holding_f(r))])
    }
    fn make(f: fn(&Path) -> Vec<RawEntry>) -> MakeEntries {
        Box::new(f)
    }
    vec![
        (
            "an empty name",
            make(|r| vec![raw("100644", "", &blob(r, b"x\n"))]),
        ),
        (
            "a name twice",
            make(|r| {
                vec![
                    raw("100644", "x.md", &blob(r, b"one\n")),
                    raw("100644", "x.md", &blob(r, b"two\n")),
                ]
            }),
        ),
        (
            "a blob and a tree of one name",
            make(|r| {
                vec![
                    raw("40000", "d", &holding_f(r)),
                    raw("100644", "d", &blob(r, b"x\n")),
                ]
            }),
        ),
        (
            "a name with a slash",
            make(|r| vec![raw("100644", "a/b", &blob(r, b"x\n"))]),
        ),
        ("'.'", dir(".")),
        ("'..'", dir("..")),
        ("'.git'", dir(".git")),
        (
            "'.Git' as a file",
            make(|r| vec![raw("100644", ".Git", &blob(r, b"x\n"))]),
        ),
        ("'git~1'", dir("git~1")),
        ("'.git. '", dir(".git. ")),
        ("'.git::$INDEX_ALLOCATION'", dir(".git::$INDEX_ALLOCATION")),
        ("'a\\.git'", dir("a\\.git")),
        ("'\\.git'", dir("\\.git")),
        ("an HFS+ alias of '.git'", dir(".g\u{200c}it")),
        (
            "a symlink '.gitmodules'",
            make(|r| vec![raw("120000", ".gitmodules", &blob(r, b"elsewhere"))]),
        ),
        (
            "a symlink 'gitmod~1'",
            make(|r| vec![raw("120000", "gitmod~1", &blob(r, b"elsewhere"))]),
        ),
        (
            "a file '.gitmodules'",
            make(|r| vec![raw("100644", ".gitmodules", &blob(r, b"# none\n"))]),
        ),
        (
            "a 256-byte name",
            make(|r| vec![raw("100644", "n".repeat(256), &blob(r, b"x\n"))]),
        ),
        (
            "a 255-byte name",
            make(|r| vec![raw("100644", "n".repeat(255), &blob(r, b"x\n"))]),
        ),
        (
            "an empty tree named '..'",
            make(|r| vec![raw("40000", "..", &raw_tree(r, &[]))]),
        ),
        (
            "mode 100664",
            make(|r| vec![raw("100664", "m.md", &blob(r, b"x\n"))]),
        ),
        (
            "mode 100744",
            make(|r| vec![raw("100744", "m.sh", &blob(r, b"x\n"))]),
        ),
        (
            "mode 100600",
            make(|r| vec![raw("100600", "m.md", &blob(r, b"x\n"))]),
        ),
        ("mode 0", make(|r| vec![raw("0", "m", &blob(r, b"x\n"))])),
        (
            "mode 40755",
            make(|r| vec![raw("40755", "m", &holding_f(r))]),
        ),
        (
            "a submodule",
            make(|_| vec![raw("160000", "vendor", &"2".repeat(40))]),
        ),
        (
            "a submodule '.git'",
            make(|_| vec![raw("160000", ".git", &"2".repeat(40))]),
        ),
        (
            "entries out of order",
            make(|r| {
                vec![
                    raw("100644", "z.md", &blob(r, b"z\n")),
                    raw("100644", "a.md", &blob(r, b"a\n")),
                ]
            }),
        ),
        (
            "a symlink with an empty target",
            make(|r| vec![raw("120000", "link", &blob(r, b""))]),
        ),
        (
            "a symlink whose target starts with NUL",
            make(|r| vec![raw("120000", "link", &blob(r, b"\0skills"))]),
        ),
        (
            "a symlink of 4096 bytes",
            make(|r| {
                vec![raw(
                    "120000",
                    "link",
                    &blob(r, "a/".repeat(2048).as_bytes()),
                )]
            }),
        ),
        (
            "a symlink of 4095 bytes",
            make(|r| {
                let mut target = "a/".repeat(2047);
                target.push('a');
                vec![raw("120000", "link", &blob(r, target.as_bytes()))]
            }),
        ),
        (
            "'scripts' a symlink to skills, cut at a NUL",
            make(|r| vec![raw("120000", "scripts", &blob(r, b"skills\0junk"))]),
        ),
        (
            "a file naming a tree",
            make(|r| vec![raw("100644", "t.md", &holding_f(r))]),
        ),
        (
            "a directory naming a blob",
            make(|r| vec![raw("40000", "d", &blob(r, b"x\n"))]),
        ),
        (
            "a symlink naming a tree",
            make(|r| vec![raw("120000", "link", &holding_f(r))]),
        ),
        (
            "a file the repository lacks",
            make(|_| vec![raw("100644", "gone.md", &"1".repeat(40))]),
        ),
        (
            "attributes that convert",
            make(|r| {
                vec![raw(
                    "100644",
                    ".gitattributes",
                    &blob(r, b"*.md text eol=crlf\n"),
                )]
            }),
        ),
    ]
}

/// How `--git` answered a revision a checkout of which git refused, or
/// made.
#[derive(Debug, Default)]
struct Tally {
    git_refused: usize,
    agreed: usize,
    stricter: Vec<String>,
}

/// Checks one hostile revision: where git refuses to check it out, cestore
/// refuses it (exit 3, a `git-*` rule) and the store is unchanged; where git
/// checks it out, `--git` answers as the checkout does (see [`agrees`]),
/// or refuses it where cestore is stricter than git's checkout, leaving the
/// store unchanged: a tree `git fsck` reports, an object whose bytes are
/// not its name's, a file the checkout converts.
fn answers_as_git(env: &TestEnv, repo: &Path, commit: &str, what: &str, tally: &mut Tally) {
    let checkout = try_worktree(env, repo, commit);
    let before = store_seen(env);
    let out = ingest_git(env, repo, commit, &[]);
    let json = parse_json(&out);
    let rule = json["error"]["rule"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let refused = !out.status.success();
    if refused {
        assert_eq!(
            store_seen(env),
            before,
            "{what}: a refused ingest changed the store"
        );
    }
    let Some(_checkout) = checkout else {
        assert_exit(&out, 3);
        assert!(
            rule.starts_with("git-"),
            "{what}: git refuses, cestore: {json}"
        );
        tally.git_refused += 1;
        return;
    };
    if refused && (rule.starts_with("git-") || rule == "checkout-converts") {
        assert_exit(&out, 3);
        let fsck = git_output(repo, &["fsck", "--no-dangling"]);
        let fsck = String::from_utf8_lossy(&fsck.stderr).into_owned();
        match rule.as_str() {
            "git-tree-invalid" => assert!(fsck.contains("in tree"), "{what}: {json}\n{fsck}"),
            "git-object-corrupt" => {
                assert!(
                    fsck.contains("hash-path mismatch"),
                    "{what}: {json}\n{fsck}"
                )
            }
            "checkout-converts" => converts_as_its_checkout(env, repo, commit, what),
            _ => panic!("{what}: git checks it out, cestore: {json}"),
        }
        tally.stricter.push(format!("{what}: {rule}"));
        return;
    }
    let answer = agrees(env, repo, commit, &[], "");
    if let Answer::Digest(digest) = &answer {
        assert_eq!(util::digest_of(&json), *digest, "{what}");
    }
    tally.agreed += 1;
}

/// Generated hostile trees: every entry of [`hostile_entries`], inside the
/// plugin's `skills/ce-plan/` and at the repository's root (outside what
/// the plugin's walk reads, but not outside what a checkout writes), and
/// objects replaced by others (a blob, a tree, an attributes file, a
/// symlink, a file outside the plugin) answer as git's checkout of them
/// (see [`answers_as_git`]).
#[test]
fn hostile_trees_answer_as_their_checkouts() {
    let env = TestEnv::new();
    store_with_a_git_snapshot(&env);
    let mut tally = Tally::default();
    for (i, (what, entries)) in hostile_entries().into_iter().enumerate() {
        for inside in [true, false] {
            let repo = env.path(&format!("h{i}-{}", if inside { "in" } else { "root" }));
            init(&repo);
            let made = entries(&repo);
            let commit = if inside {
                raw_release(&repo, &made, &[])
            } else {
                raw_release(&repo, &[], &made)
            };
            let at = if inside {
                "in skills/ce-plan"
            } else {
                "at the root"
            };
            answers_as_git(&env, &repo, &commit, &format!("{what} {at}"), &mut tally);
        }
    }
    // Objects replaced by others of their kind.
    let tampered: [(&str, &str, &[u8], &str); 6] = [
        (
            "a plugin file",
            "skills/ce-plan/SKILL.md",
            b"# forged\n",
            "blob",
        ),
        (
            "a file outside the plugin",
            "docs/x.md",
            b"forged\n",
            "blob",
        ),
        (
            "an attributes file",
            ".gitattributes",
            b"*.md text eol=crlf\n",
            "blob",
        ),
        ("a symlink", "README", b"skills", "blob"),
        ("a tree", "skills/ce-work", b"# forged\n", "tree"),
        (
            "a plugin file, by a tree",
            "skills/ce-work/SKILL.md",
            b"# forged\n",
            "tree",
        ),
    ];
    for (i, (what, at, forged, kind)) in tampered.into_iter().enumerate() {
        let repo = env.path(&format!("t{i}"));
        init(&repo);
        minimal_plugin(&repo, V);
        write(&repo.join("docs/x.md"), "genuine\n");
        write(&repo.join(".gitattributes"), "*.sh text eol=lf\n");
        symlink("skills/ce-plan", repo.join("README")).unwrap();
        let commit = commit_all(&repo, "genuine");
        let id = git(&repo, &["rev-parse", &format!("HEAD:{at}")]);
        let blob = write_object(&repo, "blob", forged);
        let by = match kind {
            "tree" => raw_tree(&repo, &[raw("100644", "SKILL.md", &blob)]),
            _ => blob,
        };
        tamper(&repo, &id, &by);
        answers_as_git(
            &env,
            &repo,
            &commit,
            &format!("{what} replaced"),
            &mut tally,
        );
    }
    eprintln!(
        "{} hostile revisions: {} refused by git and by cestore, {} answered as their checkout, {} refused by cestore alone: {:#?}",
        tally.git_refused + tally.agreed + tally.stricter.len(),
        tally.git_refused,
        tally.agreed,
        tally.stricter.len(),
        tally.stricter
    );
    assert!(tally.git_refused >= 30, "{tally:?}");
    assert!(tally.agreed >= 20, "{tally:?}");
}

/// Trees that name each other many times over (25 levels of two names for
/// one tree: 2^25 paths from 26 small trees) are refused by rule once the
/// walk passes its bound of paths, in bounded time, and nothing is recorded.
#[test]
fn trees_that_name_each_other_many_times_over_are_refused_in_bounded_time() {
    let env = TestEnv::new();
    store_with_a_git_snapshot(&env);
    let repo = env.path("bomb");
    init(&repo);
    let blob = write_object(&repo, "blob", b"x\n");
    let mut tree = raw_tree(&repo, &[raw("100644", "f", &blob)]);
    for _ in 0..25 {
        tree = raw_tree(&repo, &[raw("40000", "a", &tree), raw("40000", "b", &tree)]);
    }
    let commit = raw_release(&repo, &[], &[raw("40000", "bomb", &tree)]);
    let before = store_seen(&env);
    let started = std::time::Instant::now();
    let out = ingest_git(&env, &repo, &commit, &[]);
    let took = started.elapsed();
    assert_exit(&out, 3);
    let json = parse_json(&out);
    assert_eq!(json["error"]["rule"], "git-tree-invalid", "{json}");
    assert!(
        json["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("paths; none of it is read")),
        "{json}"
    );
    assert!(took < std::time::Duration::from_secs(120), "took {took:?}");
    assert_eq!(
        store_seen(&env),
        before,
        "a refused ingest changed the store"
    );
}

/// A revision asked for by tag records that tag, even where another tag
/// of the same commit comes first by name; asked for otherwise, the first
/// by name.
#[test]
fn a_tag_asked_for_is_the_tag_recorded() {
    let env = TestEnv::new();
    let repo = plugin_repo(&env);
    commit_all(&repo, "one");
    git(&repo, &["tag", "a-cli-v1"]);
    git(
        &repo,
        &["tag", "-a", "z-plugin-v1", "-m", "the plugin's release"],
    );
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    for (rev, tag) in [
        ("z-plugin-v1", "z-plugin-v1"),
        ("tags/z-plugin-v1", "z-plugin-v1"),
        ("refs/tags/z-plugin-v1", "z-plugin-v1"),
        ("a-cli-v1", "a-cli-v1"),
        (commit.as_str(), "a-cli-v1"),
        ("HEAD", "a-cli-v1"),
    ] {
        let out = ingest_git(&env, &repo, rev, &[]);
        util::assert_ok(&out);
        let digest = util::digest_of(&parse_json(&out));
        let show = env.json(["show", &digest, "--json"]);
        let tags: Vec<&str> = show["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .filter_map(|s| s["record"]["tag"].as_str())
            .collect();
        assert_eq!(tags.last(), Some(&tag), "--rev {rev}: {show}");
    }
}

/// Without `--plugin` or `--subdir`, a revision whose root is a marketplace
/// is refused as the reference refuses it (`manifest-missing`, the same
/// path), naming the revision, its commit and the plugins listed, and the
/// flags that find one; `--plugin` of a name not listed lists the names.
#[test]
fn a_marketplace_root_names_its_plugins_and_the_flags_that_find_one() {
    let (env, repo) = new_repo();
    minimal_plugin(&repo.join("plugins/compound-engineering"), V);
    write(
        &repo.join(".claude-plugin/marketplace.json"),
        marketplace(&"./plugins/compound-engineering".into()),
    );
    let commit = commit_all(&repo, "market");
    git(&repo, &["tag", "market-v1"]);
    let (out, json) = digest_git(&env, &repo, "market-v1", &[]);
    assert_exit(&out, 3);
    let err = &json["error"];
    assert_eq!(err["rule"], "manifest-missing", "{json}");
    assert_eq!(
        err["path"],
        util::s(&repo.join(".claude-plugin/plugin.json")),
        "{json}"
    );
    let message = err["message"].as_str().unwrap();
    for part in [
        "'market-v1'",
        commit.as_str(),
        "other, compound-engineering",
        "--plugin NAME",
        "--subdir PATH",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    let (out, json) = digest_git(&env, &repo, "market-v1", &["--plugin", "nope"]);
    assert_exit(&out, 4);
    let message = json["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("'nope'") && message.contains("other, compound-engineering"),
        "{message}"
    );
    // The hint leads somewhere: the plugin it names is ingested.
    let (out, _) = digest_git(
        &env,
        &repo,
        "market-v1",
        &["--plugin", "compound-engineering"],
    );
    util::assert_ok(&out);
}

/// A release read from a bare repository breaks a rule: the refusal names
/// the revision as given, its commit and the path inside it (no file of a
/// bare repository), and keeps its kind, rule and path.
#[test]
fn a_refusal_from_git_names_the_revision_its_commit_and_the_path_inside_it() {
    let env = TestEnv::new();
    let repo = plugin_repo(&env);
    let commit = commit_all(&repo, "one");
    git(&repo, &["tag", "v-one"]);
    let bare = env.path("bare.git");
    git(
        &env.base,
        &["clone", "-q", "--bare", &util::s(&repo), &util::s(&bare)],
    );
    let out = env.run(util::git_ingest(&bare, "v-one", "9.9.9", &["--json"]));
    assert_exit(&out, 3);
    let json = parse_json(&out);
    let err = &json["error"];
    assert_eq!(err["rule"], "version-mismatch", "{json}");
    assert_eq!(
        err["path"],
        util::s(&bare.join(".claude-plugin/plugin.json")),
        "{json}"
    );
    let message = err["message"].as_str().unwrap();
    for part in [
        "the revision 'v-one'".to_string(),
        format!("(commit {commit})"),
        "at '.claude-plugin/plugin.json' inside it".to_string(),
    ] {
        assert!(message.contains(&part), "{part}: {message}");
    }
}

/// A fresh environment and an empty git repository at `repo` in it.
fn new_repo() -> (TestEnv, PathBuf) {
    let env = TestEnv::new();
    let repo = env.path("repo");
    init(&repo);
    (env, repo)
}

/// The answer of a digest refused under `rule` at `at`.
fn refused(rule: &str, at: &str) -> Answer {
    Answer::Refused {
        rule: rule.into(),
        at: at.into(),
    }
}
