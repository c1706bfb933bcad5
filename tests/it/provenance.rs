//! Where a snapshot came from, answered: the ingest's report, `show`,
//! `list` and `log` name each snapshot's source record, and `verify
//! --source` re-derives a snapshot from the commit its record names.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::git::{commit_all, git, init, plugin_repo};
use crate::json::{one_object, SourceEntryOut, SourceRecordOut, SourceSummaryOut, VerifySourceOut};
use crate::util::{self, assert_exit, minimal_plugin, os, parse_json, TestEnv};

const V: &str = "1.0.0";

/// `ingest --git REPO --rev REV EXTRA`, which must succeed: its output.
pub(crate) fn ingest_git(env: &TestEnv, repo: &Path, rev: &str, extra: &[&str]) -> String {
    let mut args = util::git_ingest(repo, rev, V, &[]);
    args.extend(extra.iter().map(|a| os(a)));
    let out = env.run(&args);
    util::assert_ok(&out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository holding the release under `plugins/p`, committed: the
/// repository and the commit.
pub(crate) fn subdir_repo(env: &TestEnv, name: &str) -> (PathBuf, String) {
    let repo = env.path(name);
    init(&repo);
    minimal_plugin(&repo.join("plugins/p"), V);
    let commit = commit_all(&repo, "release");
    (repo, commit)
}

/// A clone of `repo` whose configuration makes a checkout convert line
/// ends: every tree read from it is refused.
pub(crate) fn converting_clone(env: &TestEnv, repo: &Path) -> PathBuf {
    let clone = env.path("converting-clone");
    git(
        &env.base,
        &[
            "clone",
            "-q",
            repo.to_str().expect("utf-8 path"),
            clone.to_str().expect("utf-8 path"),
        ],
    );
    git(&clone, &["config", "core.autocrlf", "true"]);
    clone
}

/// An unrelated repository with one commit of its own.
pub(crate) fn other_repo(env: &TestEnv) -> PathBuf {
    let repo = env.path("other");
    init(&repo);
    util::write(&repo.join("README"), "another project\n");
    commit_all(&repo, "unrelated");
    repo
}

fn text(env: &TestEnv, args: &[&str]) -> String {
    let out = env.run(args.iter().map(OsStr::new));
    util::assert_ok(&out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn ingest_show_list_and_log_name_a_git_source() {
    let env = TestEnv::new();
    let repo = plugin_repo(&env);
    let commit = commit_all(&repo, "release");
    let short = &commit[..12];

    // The ingest's own report names the commit on one line.
    let human = ingest_git(&env, &repo, &commit, &[]);
    let line = human
        .lines()
        .find(|l| l.starts_with("source: "))
        .unwrap_or_else(|| panic!("no source line in:\n{human}"));
    assert!(
        line.starts_with(&format!("source: git {short} at the root of ")),
        "{line}"
    );
    assert!(line.ends_with(", clean"), "{line}");
    let digest = human.lines().next().unwrap().to_string();

    // A directory ingest keeps no record: its rows say null.
    let dir = env.plugin("dir", "2.0.0");
    let plain = env.ingest_digest(&dir, "2.0.0");

    // show: every record, oldest first.
    let show = env.json(["show", digest.as_str(), "--json"]);
    let sources: Vec<SourceEntryOut> = serde_json::from_value(show["sources"].clone()).unwrap();
    assert_eq!(sources.len(), 1, "{show}");
    assert_eq!(sources[0].via, "ingest");
    assert_eq!(sources[0].record.read_from, "git");
    assert_eq!(sources[0].record.commit.as_deref(), Some(commit.as_str()));
    assert_eq!(sources[0].record.path, "");
    assert!(sources[0].record.clean);
    assert_eq!(
        env.json(["show", plain.as_str(), "--json"])["sources"],
        Value::Array(vec![])
    );
    let shown = text(&env, &["show", &digest]);
    assert!(
        shown.lines().any(|l| l == "sources:                 1"),
        "{shown}"
    );
    let want = format!("  {} ingest: git {short} at the root of ", sources[0].at);
    assert!(shown.lines().any(|l| l.starts_with(&want)), "{shown}");

    // list: the newest record in brief, or null.
    let list = env.json(["list", "--json"]);
    let rows = list["snapshots"].as_array().unwrap();
    let row = |d: &str| {
        rows.iter()
            .find(|r| r["manifest_digest"] == d)
            .unwrap_or_else(|| panic!("{d} not listed: {list}"))
    };
    let brief: SourceSummaryOut = serde_json::from_value(row(&digest)["source"].clone()).unwrap();
    assert_eq!(brief.commit.as_deref(), Some(commit.as_str()));
    assert!(brief.clean);
    assert_eq!(
        (brief.read_from.as_str(), brief.via.as_str()),
        ("git", "ingest")
    );
    assert_eq!(row(&plain)["source"], Value::Null);
    let listed = text(&env, &["list"]);
    let listed_line = |d: &str| listed.lines().find(|l| l.starts_with(d)).unwrap();
    assert!(
        listed_line(&digest).ends_with(&format!("  source {short} clean")),
        "{listed}"
    );
    assert!(!listed_line(&plain).contains("source"), "{listed}");

    // log: each event with the record it kept, matched by digest and time.
    let log = env.json(["log", "--json"]);
    let events = log["ingests"].as_array().unwrap();
    let by_digest = |d: &str| events.iter().find(|e| e["manifest_digest"] == d).unwrap();
    let event = by_digest(&digest);
    let record: SourceRecordOut = serde_json::from_value(event["source_record"].clone()).unwrap();
    assert_eq!(record.commit.as_deref(), Some(commit.as_str()));
    assert_eq!(event["at"], sources[0].at.as_str());
    let other = by_digest(&plain);
    assert_eq!(other["source_record"], Value::Null);
    let logged = text(&env, &["log"]);
    let logged_line = |d: &str| logged.lines().find(|l| l.contains(d)).unwrap();
    assert!(
        logged_line(&digest).contains(&format!("  source git {short} at the root of ")),
        "{logged}"
    );
    assert!(!logged_line(&plain).contains("  source "), "{logged}");

    // A second ingest of the same commit keeps a second record; its report
    // lists the one it kept.
    let again = parse_json(&env.run(util::git_ingest(&repo, "HEAD", V, &["--json"])));
    assert_eq!(again["ingest"]["sources"].as_array().unwrap().len(), 1);
    let show = env.json(["show", digest.as_str(), "--json"]);
    let sources: Vec<SourceEntryOut> = serde_json::from_value(show["sources"].clone()).unwrap();
    assert_eq!(sources.len(), 2, "{show}");
    assert!(sources[0].at <= sources[1].at, "oldest first: {show}");
}

/// `verify --source REPO DIGEST --json`: the exit code and the report.
fn verify_source(env: &TestEnv, repo: &Path, digest: &str) -> (i32, VerifySourceOut) {
    let out = env.run([
        os("verify"),
        os("--source"),
        repo.as_os_str(),
        os(digest),
        os("--json"),
    ]);
    let code = out.status.code().expect("exit code");
    (code, one_object(&out, "verify --source"))
}

#[test]
fn verify_source_re_derives_one_snapshot_from_its_commit() {
    let env = TestEnv::new();
    let (repo, commit) = subdir_repo(&env, "repo");
    let human = ingest_git(&env, &repo, "HEAD", &["--subdir", "plugins/p"]);
    assert!(
        human
            .lines()
            .any(|l| l.starts_with(&format!("source: git {} at plugins/p of ", &commit[..12]))),
        "{human}"
    );
    let digest = human.lines().next().unwrap().to_string();

    // The same repository gives the same digest: exit 0.
    let (code, report) = verify_source(&env, &repo, &digest);
    assert_eq!(code, 0, "{report:?}");
    assert!(report.ok);
    assert_eq!(report.status, "equal");
    assert_eq!(report.mismatch, None);
    assert_eq!(report.commit.as_deref(), Some(commit.as_str()));
    assert_eq!(report.path.as_deref(), Some("plugins/p"));
    assert_eq!(report.expected, digest);
    assert_eq!(report.found.as_deref(), Some(digest.as_str()));
    assert_eq!(report.repository, util::s(&repo));
    let out = env.run([os("verify"), os("--source"), repo.as_os_str(), os(&digest)]);
    assert_exit(&out, 0);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        said.trim_end(),
        format!(
            "{digest} re-derives from commit {commit} at plugins/p of {}",
            repo.display()
        )
    );

    // A repository without the commit: source-mismatch, exit 1.
    let other = other_repo(&env);
    let (code, report) = verify_source(&env, &other, &digest);
    assert_eq!(code, 1, "{report:?}");
    assert!(!report.ok);
    assert_eq!(report.status, "source-mismatch");
    assert_eq!(report.mismatch.as_deref(), Some("missing-commit"));
    assert_eq!(report.found, None);
    assert!(
        report.detail.as_deref().unwrap().contains(&commit),
        "{report:?}"
    );
    let out = env.run([os("verify"), os("--source"), other.as_os_str(), os(&digest)]);
    assert_exit(&out, 1);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with(&format!(
            "{digest}: source-mismatch: from commit {} at plugins/p: missing-commit: ",
            &commit[..12]
        )),
        "{said}"
    );

    // A clone whose checkout would convert the files: refused, exit 1.
    let converting = converting_clone(&env, &repo);
    let (code, report) = verify_source(&env, &converting, &digest);
    assert_eq!(code, 1, "{report:?}");
    assert_eq!(report.status, "source-mismatch");
    assert_eq!(report.mismatch.as_deref(), Some("refused"));
    assert!(
        report.detail.as_deref().unwrap().contains("core.autocrlf"),
        "{report:?}"
    );

    // A snapshot with no record naming a commit: nothing to re-derive, exit 1.
    let dir = env.plugin("dir", "2.0.0");
    let plain = env.ingest_digest(&dir, "2.0.0");
    let (code, report) = verify_source(&env, &repo, &plain);
    assert_eq!(code, 1, "{report:?}");
    assert_eq!(report.status, "no-source-record");
    assert_eq!((report.commit, report.found), (None, None));

    // One digest exactly; a path that is no repository is an error.
    let out = env.run([
        os("verify"),
        os("--source"),
        repo.as_os_str(),
        os(&digest),
        os(&plain),
    ]);
    assert_exit(&out, 2);
    let out = env.run([os("verify"), os("--source"), dir.as_os_str(), os(&digest)]);
    assert_exit(&out, 4);
    let out = env.run([
        os("verify"),
        os("--source"),
        repo.as_os_str(),
        os("--tree"),
        dir.as_os_str(),
        os(&digest),
    ]);
    assert_exit(&out, 2);
}
