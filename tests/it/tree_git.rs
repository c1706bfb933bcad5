//! `ingest --profile tree|dependency|task --git REPO --rev REV`: a
//! revision's trees read from its objects give exactly what capturing a
//! fresh checkout of that revision gives, and refuse what it refuses.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::git::{commit_all, commit_tree, git, init, raw, raw_tree, tamper, write_object};
use crate::util::*;

/// A committed repository with nested directories, an executable, and a
/// `node_modules` whose `.bin` holds a symlink to it; its work tree then
/// changed after the commit (what `--git` must not read). Returns the
/// repository and the commit.
fn committed(env: &TestEnv) -> (PathBuf, String) {
    let repo = env.path("repo");
    init(&repo);
    write(&repo.join("assets/a.txt"), "alpha\n");
    write(&repo.join("assets/nested/deep/b.json"), "{}\n");
    write(&repo.join("assets/tool.sh"), "#!/bin/sh\necho tool\n");
    chmod(&repo.join("assets/tool.sh"), 0o755);
    write(&repo.join("README.md"), "readme\n");
    let nm = repo.join("node_modules");
    write(&nm.join("pkg/cli.js"), "#!/usr/bin/env node\n");
    chmod(&nm.join("pkg/cli.js"), 0o755);
    write(&nm.join("pkg/index.js"), "module.exports = 1;\n");
    std::fs::create_dir_all(nm.join(".bin")).unwrap();
    std::os::unix::fs::symlink("../pkg/cli.js", nm.join(".bin/cli")).unwrap();
    let commit = commit_all(&repo, "trees");
    // The work tree moves on; the revision does not.
    write(&repo.join("assets/a.txt"), "changed after the commit\n");
    write(&repo.join("node_modules/pkg/new.js"), "new\n");
    (repo, commit)
}

/// A fresh `git clone` of `repo` checked out at `commit`, made under umask 022.
fn fresh_clone(env: &TestEnv, repo: &Path, commit: &str) -> PathBuf {
    fresh_clone_at(env, repo, commit, "clone")
}

/// [`fresh_clone`] at `name` in the test's directory.
fn fresh_clone_at(env: &TestEnv, repo: &Path, commit: &str, name: &str) -> PathBuf {
    let clone = env.path(name);
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"umask 022 && git clone -q "$1" "$2" && cd "$2" && git -c advice.detachedHead=false checkout -q "$3""#)
        .args(["sh", &s(repo), &s(&clone), commit])
        .output()
        .expect("run git clone");
    assert!(out.status.success(), "{}", describe(&out));
    clone
}

fn ingest(env: &TestEnv, args: &[&str]) -> Value {
    let mut all = vec!["--json", "ingest", "--profile"];
    all.extend_from_slice(args);
    let out = env.run(&all);
    assert_exit(&out, 0);
    parse_json(&out)
}

/// The store holds no snapshot, object or event.
fn nothing_recorded(env: &TestEnv) {
    if !env.store.exists() {
        return;
    }
    let list = env.json(["--json", "list"]);
    assert_eq!(
        list["snapshots"].as_array().map_or(0, Vec::len),
        0,
        "{list}"
    );
    assert!(object_sizes(&env.store).is_empty());
    let log = env.json(["--json", "log"]);
    assert_eq!(log["events"].as_array().map_or(0, Vec::len), 0, "{log}");
}

/// Every kind read from a revision gives the digests of a fresh clone's
/// checkout of it: the tree (files at mode 0), the dependency (0644 and
/// 0755 as a checkout under umask 022 gives, the `.bin` symlink kept), and
/// the task (its repo_identity the clone's path, given by --repo-identity).
#[test]
fn a_revision_gives_the_digests_of_its_checkout() {
    let env = TestEnv::new();
    let (repo, commit) = committed(&env);
    let clone = fresh_clone(&env, &repo, &commit);

    let copies = ["--copy", "assets", "--copy", "README.md"];
    let mut from_clone = vec!["tree", clone.to_str().unwrap()];
    from_clone.extend_from_slice(&copies);
    let mut from_git = vec!["tree", "--git", repo.to_str().unwrap(), "--rev", &commit];
    from_git.extend_from_slice(&copies);
    let checkout = ingest(&env, &from_clone);
    let read = ingest(&env, &from_git);
    assert_eq!(
        read["manifest_digest"], checkout["manifest_digest"],
        "{read}"
    );
    assert_eq!(read["entries"], checkout["entries"]);
    assert_eq!(read["entries"], 7, "{read}");
    // The work tree's later bytes are not what was read.
    assert_eq!(read["total_bytes"], checkout["total_bytes"]);

    let dep = ["--source", "node_modules", "--target", "node_modules"];
    let mut from_clone = vec!["dependency", clone.to_str().unwrap()];
    from_clone.extend_from_slice(&dep);
    let mut from_git = vec![
        "dependency",
        "--git",
        repo.to_str().unwrap(),
        "--rev",
        "HEAD",
    ];
    from_git.extend_from_slice(&dep);
    let checkout = ingest(&env, &from_clone);
    let read = ingest(&env, &from_git);
    assert_eq!(read["digest"], checkout["digest"], "{read}\n{checkout}");
    assert_eq!(
        read["dependency_content_digest"],
        checkout["dependency_content_digest"]
    );
    let entries = read["dependencies"][0]["entries"].as_array().unwrap();
    let mode = |path: &str| {
        entries
            .iter()
            .find(|e| e["path"] == path)
            .unwrap_or_else(|| panic!("{path}: {read}"))["mode"]
            .clone()
    };
    assert_eq!(mode("payload/pkg/cli.js"), 0o755);
    assert_eq!(mode("payload/pkg/index.js"), 0o644);
    assert!(entries
        .iter()
        .any(|e| e["path"] == "payload/.bin/cli" && e["link_target"] == "../pkg/cli.js"));
    assert!(entries.iter().all(|e| e["path"] != "payload/pkg/new.js"));

    let task = env.path("task.json");
    write(
        &task,
        r#"{"sandbox_copy": ["assets", "README.md"],
            "sandbox_dependencies": [{"source": "node_modules", "target": "node_modules"}]}"#,
    );
    let checkout = ingest(
        &env,
        &[
            "task",
            &s(&clone),
            "--task",
            &s(&task),
            "--resolved-sha",
            &commit,
        ],
    );
    let read = ingest(
        &env,
        &[
            "task",
            "--git",
            &s(&repo),
            "--rev",
            &commit,
            "--task",
            &s(&task),
            "--repo-identity",
            &s(&clone),
        ],
    );
    for field in [
        "digest",
        "manifest_digest",
        "dependency_manifest_digest",
        "dependency_content_digest",
        "repo_identity",
        "resolved_sha",
    ] {
        assert_eq!(read[field], checkout[field], "{field}: {read}");
    }
    // Without --repo-identity the identity is the repository's path.
    let default = ingest(
        &env,
        &[
            "task",
            "--git",
            &s(&repo),
            "--rev",
            &commit,
            "--task",
            &s(&task),
        ],
    );
    assert_eq!(default["repo_identity"], s(&repo).as_str());
    assert_eq!(default["resolved_sha"], commit.as_str());
    assert_eq!(default["manifest_digest"], checkout["manifest_digest"]);
    let (code, report) = env.verify(&[]);
    assert_eq!(code, 0, "{report}");
}

/// A symlink committed in a `sandbox_copy` tree is refused with the
/// harness's message and rule, exit 3, and nothing is recorded; in a
/// dependency it is kept.
#[test]
fn a_committed_symlink_in_sandbox_copy_is_refused() {
    let env = TestEnv::new();
    let (repo, _) = committed(&env);
    std::os::unix::fs::symlink("a.txt", repo.join("assets/link")).unwrap();
    let commit = commit_all(&repo, "a link");
    let out = env.run([
        "--json",
        "ingest",
        "--profile",
        "tree",
        "--git",
        &s(&repo),
        "--rev",
        &commit,
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
    nothing_recorded(&env);
    // --git needs --rev; --repo-identity is a task's, with --git; a
    // directory and --git are one or the other.
    let repo_s = s(&repo);
    for args in [
        vec!["tree", "--git", &repo_s],
        vec![
            "tree",
            "--git",
            &repo_s,
            "--rev",
            &commit,
            "--repo-identity",
            "/x",
        ],
        vec!["tree", &repo_s, "--git", &repo_s, "--rev", &commit],
        vec!["tree", &repo_s, "--rev", &commit],
    ] {
        let mut all = vec!["--json", "ingest", "--profile"];
        all.extend_from_slice(&args);
        let out = env.run(&all);
        assert_exit(&out, 2);
    }
    nothing_recorded(&env);
}

/// A revision whose tree git would not check out (one name listed twice)
/// is refused by the revision's rule and records nothing; so is a
/// submodule the capture reaches.
#[test]
fn a_malformed_tree_or_a_submodule_is_refused_and_records_nothing() {
    let env = TestEnv::new();
    let repo = env.path("hostile");
    init(&repo);
    let blob = write_object(&repo, "blob", b"x\n");
    let twice = raw_tree(
        &repo,
        &[raw("100644", "f", &blob), raw("100644", "f", &blob)],
    );
    let root = raw_tree(&repo, &[raw("40000", "assets", &twice)]);
    let commit = commit_tree(&repo, &root);
    // `ingest --profile tree --copy assets` of revision `rev`, refused: its error.
    let refused = |rev: &str| {
        let out = env.run([
            "--json",
            "ingest",
            "--profile",
            "tree",
            "--git",
            &s(&repo),
            "--rev",
            rev,
            "--copy",
            "assets",
        ]);
        assert_exit(&out, 3);
        parse_json(&out)
    };
    let e = refused(&commit);
    assert_eq!(e["error"]["rule"], "git-tree-invalid", "{e}");
    nothing_recorded(&env);

    // An empty tree, however deep, is written by no checkout.
    let empty = raw_tree(&repo, &[]);
    let hollow = raw_tree(&repo, &[raw("40000", "deeper", &empty)]);
    let inner = raw_tree(
        &repo,
        &[raw("100644", "f", &blob), raw("40000", "hollow", &hollow)],
    );
    let sub = raw_tree(
        &repo,
        &[
            raw("100644", "a", &blob),
            raw("160000", "vendored", &commit),
        ],
    );
    let root = raw_tree(
        &repo,
        &[raw("40000", "assets", &sub), raw("40000", "other", &inner)],
    );
    let with_submodule = commit_tree(&repo, &root);
    let e = refused(&with_submodule);
    assert_eq!(e["error"]["rule"], "git-submodule", "{e}");
    nothing_recorded(&env);
    // A path holding none is read.
    let ok = ingest(
        &env,
        &[
            "tree",
            "--git",
            &s(&repo),
            "--rev",
            &with_submodule,
            "--copy",
            "other",
        ],
    );
    assert_eq!(ok["entries"], 2, "{ok}");
    let out = env.run([
        "--json",
        "ingest",
        "--profile",
        "tree",
        "--git",
        &s(&repo),
        "--rev",
        &with_submodule,
        "--copy",
        "other/hollow",
    ]);
    assert_exit(&out, 3);
    let e = parse_json(&out);
    assert_eq!(e["error"]["rule"], "task-asset-path-unavailable", "{e}");
}

/// A blob whose bytes are another's (a loose object replaced) is refused
/// (`git-object-corrupt`), and so is a file whose checkout would convert
/// its bytes (`eol=crlf`); each records nothing.
#[test]
fn a_tampered_blob_or_a_converting_checkout_is_refused_and_records_nothing() {
    let env = TestEnv::new();
    let repo = env.path("tampered");
    init(&repo);
    let good = write_object(&repo, "blob", b"good\n");
    let other = write_object(&repo, "blob", b"other\n");
    let payload = raw_tree(&repo, &[raw("100644", "index.js", &good)]);
    let root = raw_tree(
        &repo,
        &[
            raw("40000", "node_modules", &payload),
            raw("100644", "other", &other),
        ],
    );
    let commit = commit_tree(&repo, &root);
    tamper(&repo, &good, &other);
    let out = env.run([
        "--json",
        "ingest",
        "--profile",
        "dependency",
        "--git",
        &s(&repo),
        "--rev",
        &commit,
        "--source",
        "node_modules",
        "--target",
        "node_modules",
    ]);
    assert_exit(&out, 3);
    let e = parse_json(&out);
    assert_eq!(e["error"]["rule"], "git-object-corrupt", "{e}");
    nothing_recorded(&env);

    let repo = env.path("crlf");
    init(&repo);
    write(&repo.join(".gitattributes"), "*.txt eol=crlf\n");
    write(&repo.join("docs/a.txt"), "line\n");
    let commit = commit_all(&repo, "crlf");
    let out = env.run([
        "--json",
        "ingest",
        "--profile",
        "tree",
        "--git",
        &s(&repo),
        "--rev",
        &commit,
        "--copy",
        "docs",
    ]);
    assert_exit(&out, 3);
    let e = parse_json(&out);
    assert_eq!(e["error"]["rule"], "checkout-converts", "{e}");
    nothing_recorded(&env);
}

/// A dependency's committed symlink is judged as in a checkout: dangling,
/// leaving the workspace, or absolute, the refusal (exit 3, message and
/// rule) is the one capturing a fresh clone gives; nothing is recorded.
#[test]
fn a_dependency_symlink_is_judged_as_in_its_checkout() {
    let env = TestEnv::new();
    let (repo, _) = committed(&env);
    git(&repo, &["checkout", "-q", "--", "."]);
    git(&repo, &["clean", "-qfd"]);
    let cases = [
        ("dangling", "../pkg/nope.js", "dependency-symlink-dangling"),
        (
            "escaping",
            "../../../../../../outside",
            "dependency-symlink-escapes-workspace",
        ),
        (
            "absolute",
            "/etc/hostname",
            "dependency-symlink-not-relative",
        ),
    ];
    for (name, target, rule) in cases {
        let link = repo.join("node_modules/.bin/bad");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(target, &link).unwrap();
        let commit = commit_all(&repo, name);
        let clone = fresh_clone_at(&env, &repo, &commit, name);
        let dep = ["--source", "node_modules", "--target", "node_modules"];
        let run = |from: &[&str]| {
            let mut all = vec!["--json", "ingest", "--profile", "dependency"];
            all.extend_from_slice(from);
            all.extend_from_slice(&dep);
            let out = env.run(&all);
            assert_exit(&out, 3);
            parse_json(&out)["error"].clone()
        };
        let checkout = run(&[&s(&clone)]);
        let read = run(&["--git", &s(&repo), "--rev", &commit]);
        assert_eq!(read["rule"], rule, "{name}: {read}");
        assert_eq!(read["message"], checkout["message"], "{name}");
        assert_eq!(read["rule"], checkout["rule"], "{name}");
        nothing_recorded(&env);
    }
}
