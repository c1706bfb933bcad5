//! `ingest --profile runtime`: the GitNexus runtime of a checkout named by
//! every byte of its seven mounted components, its digest recomputed by
//! docs/format.md's own Python.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::git::primary_and_linked_worktree;
use crate::util::{assert_exit, gitnexus_harness, parse_json, write, TestEnv};

/// A checkout with the reference's GitNexus layout at 1.6.9 and a fuller
/// `node_modules`: nested packages, an executable, a `.bin` link, an empty
/// directory; and files outside the seven components.
fn checkout(env: &TestEnv, name: &str) -> PathBuf {
    let h = env.path(name);
    gitnexus_harness(&h, "1.6.9");
    let nm = h.join("gitnexus/node_modules");
    write(&nm.join("pkg/package.json"), r#"{"name": "pkg"}"#);
    write(&nm.join("pkg/bin/cli.js"), "#!/usr/bin/env node\n");
    fs::set_permissions(nm.join("pkg/bin/cli.js"), fs::Permissions::from_mode(0o755)).unwrap();
    write(
        &nm.join("pkg/node_modules/inner/index.js"),
        "module.exports = 1;\n",
    );
    fs::create_dir_all(nm.join(".bin")).unwrap();
    symlink("../pkg/bin/cli.js", nm.join(".bin/cli")).unwrap();
    fs::create_dir_all(nm.join("pkg/empty")).unwrap();
    write(&h.join("gitnexus/dist/cli/índex.map"), "{}\n");
    write(&h.join("gitnexus/src/main.ts"), "outside\n");
    write(&h.join("README.md"), "outside\n");
    h
}

/// `ingest --profile runtime CHECKOUT ARGS --json`: its exit code and report.
fn ingest(env: &TestEnv, checkout: &Path, args: &[&str]) -> (i32, Value) {
    let mut all = vec![
        "--json",
        "ingest",
        "--profile",
        "runtime",
        checkout.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let out = env.run(&all);
    (out.status.code().unwrap_or(-1), parse_json(&out))
}

fn digest_of(env: &TestEnv, checkout: &Path, args: &[&str]) -> String {
    let (code, report) = ingest(env, checkout, args);
    assert_eq!(code, 0, "{report}");
    report["manifest_digest"].as_str().unwrap().to_string()
}

/// docs/format.md's `runtime_digest` of `checkout`, `bases` mapping a
/// component to where it is read from.
fn recomputed(checkout: &Path, bases: &Value) -> String {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/format.md")).unwrap();
    let section = &doc[doc
        .find("### The GitNexus runtime's digest")
        .expect("the section")..];
    let start = section.find("```python\n").expect("its script") + "```python\n".len();
    let script = &section[start..start + section[start..].find("```").unwrap()];
    let out = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "{script}\nimport json, sys\nprint(runtime_digest(sys.argv[1], json.loads(sys.argv[2])))"
        ))
        .arg(checkout)
        .arg(bases.to_string())
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn the_runtime_digest_is_docs_formats_recomputation() {
    let env = TestEnv::new();
    let h = checkout(&env, "checkout");
    let (code, report) = ingest(&env, &h, &[]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["profile"], "tree");
    assert_eq!(report["rules"], "seed");
    assert_eq!(report["name"], "gitnexus-runtime");
    let paths: Vec<&str> = report["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "gitnexus/dist",
            "gitnexus/package.json",
            "gitnexus/node_modules",
            "gitnexus/vendor",
            "gitnexus-shared/dist",
            "gitnexus-shared/package.json",
            "gitnexus/hooks/claude"
        ]
    );
    let digest = report["manifest_digest"].as_str().unwrap();
    assert_eq!(digest, recomputed(&h, &serde_json::json!({})));
    // The stored snapshot holds the runtime: its links, modes and files.
    let view = env.path("view");
    assert_exit(&env.run(["checkout", digest, view.to_str().unwrap()]), 0);
    assert_eq!(
        fs::read_link(view.join("gitnexus/node_modules/gitnexus-shared")).unwrap(),
        Path::new("../../gitnexus-shared")
    );
    assert_eq!(
        fs::read_link(view.join("gitnexus/node_modules/.bin/cli")).unwrap(),
        Path::new("../pkg/bin/cli.js")
    );
    let mode = fs::metadata(view.join("gitnexus/node_modules/pkg/bin/cli.js"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o111, 0, "{mode:o}");
    assert!(view.join("gitnexus/node_modules/pkg/empty").is_dir());
    assert!(!view.join("gitnexus/src").exists());
    let (code, verified) = env.verify(&[]);
    assert_eq!(code, 0, "{verified}");
    // The same bytes again: the same digest, nothing written.
    let (code, again) = ingest(&env, &h, &[]);
    assert_eq!(
        (code, &again["manifest_digest"], &again["new_objects"]),
        (0, &report["manifest_digest"], &0.into())
    );
}

/// A change to a checkout, with what it changes.
type Change = (&'static str, fn(&Path));

#[test]
fn one_byte_in_a_component_changes_the_digest_and_none_outside_does() {
    let env = TestEnv::new();
    let h = checkout(&env, "checkout");
    let first = digest_of(&env, &h, &[]);
    // Outside the seven components: the same digest.
    write(&h.join("gitnexus/src/main.ts"), "outside, changed\n");
    write(&h.join("README.md"), "changed\n");
    write(&h.join("gitnexus/hooks/other.sh"), "not claude's\n");
    assert_eq!(digest_of(&env, &h, &[]), first);
    let mut seen = vec![first];
    let changes: [Change; 9] = [
        ("gitnexus/dist", |h| {
            write(
                &h.join("gitnexus/dist/cli/index.js"),
                "#!/usr/bin/env node\n\n",
            )
        }),
        ("gitnexus/package.json", |h| {
            write(
                &h.join("gitnexus/package.json"),
                r#"{"name": "gitnexus", "version": "1.6.9" }"#,
            )
        }),
        ("gitnexus/node_modules", |h| {
            write(
                &h.join("gitnexus/node_modules/pkg/node_modules/inner/index.js"),
                "module.exports = 2;\n",
            )
        }),
        ("a mode", |h| {
            fs::set_permissions(
                h.join("gitnexus/node_modules/pkg/package.json"),
                fs::Permissions::from_mode(0o600),
            )
            .unwrap()
        }),
        ("a link", |h| {
            fs::remove_file(h.join("gitnexus/node_modules/.bin/cli")).unwrap();
            symlink(
                "../pkg/bin/./cli.js",
                h.join("gitnexus/node_modules/.bin/cli"),
            )
            .unwrap();
        }),
        ("gitnexus/vendor", |h| {
            write(&h.join("gitnexus/vendor/README"), "x")
        }),
        ("gitnexus-shared/dist", |h| {
            write(&h.join("gitnexus-shared/dist/index.js"), "x")
        }),
        ("gitnexus-shared/package.json", |h| {
            write(
                &h.join("gitnexus-shared/package.json"),
                r#"{"name": "gitnexus-shared", "version": "1.6.9" }"#,
            )
        }),
        ("gitnexus/hooks/claude", |h| {
            write(&h.join("gitnexus/hooks/claude/hook.sh"), "x")
        }),
    ];
    for (what, change) in changes {
        change(&h);
        let digest = digest_of(&env, &h, &[]);
        assert!(!seen.contains(&digest), "{what}: the digest did not change");
        assert_eq!(digest, recomputed(&h, &serde_json::json!({})), "{what}");
        seen.push(digest);
    }
}

#[test]
fn a_linked_worktree_records_the_node_modules_it_borrows() {
    let env = TestEnv::new();
    let (primary, worktree) = primary_and_linked_worktree(&env);
    gitnexus_harness(&primary, "2.0.0");
    gitnexus_harness(&worktree, "2.0.0");
    write(
        &primary.join("gitnexus/node_modules/only-primary/index.js"),
        "primary's\n",
    );
    fs::remove_dir_all(worktree.join("gitnexus/node_modules")).unwrap();
    symlink(
        primary.join("gitnexus/node_modules"),
        worktree.join("gitnexus/node_modules"),
    )
    .unwrap();
    // The seed's rules refuse the link (and 2.0.0).
    let (code, refused) = ingest(&env, &worktree, &[]);
    assert_eq!(code, 3, "{refused}");
    let (code, report) = ingest(&env, &worktree, &["--gitnexus-rules", "upstream"]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["rules"], "upstream");
    let sources: serde_json::Map<String, Value> = report["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["path"].as_str().unwrap().to_string(), c["source"].clone()))
        .collect();
    assert_eq!(
        sources["gitnexus/node_modules"],
        primary.join("gitnexus/node_modules").to_str().unwrap()
    );
    assert_eq!(
        sources["gitnexus/dist"],
        worktree.join("gitnexus/dist").to_str().unwrap()
    );
    // docs/format.md's recomputation, reading each component where the
    // report says (the primary's node_modules, recorded as a directory).
    let bases: serde_json::Map<String, Value> = sources
        .iter()
        .map(|(path, source)| {
            let source = Path::new(source.as_str().unwrap());
            let base = source
                .ancestors()
                .nth(Path::new(path).components().count())
                .unwrap();
            (path.clone(), Value::from(base.to_str().unwrap()))
        })
        .collect();
    let digest = report["manifest_digest"].as_str().unwrap();
    assert_eq!(digest, recomputed(&worktree, &Value::Object(bases)));
    let view = env.path("view");
    assert_exit(&env.run(["checkout", digest, view.to_str().unwrap()]), 0);
    assert!(fs::symlink_metadata(view.join("gitnexus/node_modules"))
        .unwrap()
        .is_dir());
    assert_eq!(
        fs::read(view.join("gitnexus/node_modules/only-primary/index.js")).unwrap(),
        b"primary's\n"
    );
}

#[test]
fn a_runtime_is_refused_by_its_rules_and_for_a_link_out_of_it() {
    let env = TestEnv::new();
    let h = checkout(&env, "checkout");
    // The seed's pin.
    let (code, report) = ingest(&env, &h, &["--gitnexus-version", "9.9.9"]);
    assert_eq!(code, 3, "{report}");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .contains("version drifted"),
        "{report}"
    );
    // A link that leaves the runtime's tree, relative or absolute (even one
    // naming a file inside): refused, naming the link.
    let refused_for = |link: &str| {
        let (code, report) = ingest(&env, &h, &[]);
        assert_eq!(code, 3, "{report}");
        assert_eq!(
            report["error"]["rule"], "runtime-symlink-escapes",
            "{report}"
        );
        let message = report["error"]["message"].as_str().unwrap();
        assert!(message.contains(link), "{report}");
    };
    symlink("../../../README.md", h.join("gitnexus/node_modules/escape")).unwrap();
    refused_for("gitnexus/node_modules/escape");
    fs::remove_file(h.join("gitnexus/node_modules/escape")).unwrap();
    symlink(
        h.join("gitnexus/package.json"),
        h.join("gitnexus/node_modules/absolute"),
    )
    .unwrap();
    refused_for("gitnexus/node_modules/absolute");
    // Nothing was recorded.
    let list = env.json(["list", "--json"]);
    assert_eq!(
        list["snapshots"].as_array().map_or(0, Vec::len),
        0,
        "{list}"
    );
    // --gitnexus-* only with runtime, and upstream's rules pin nothing.
    let out = env.run([
        "ingest",
        "--profile",
        "tree",
        h.to_str().unwrap(),
        "--gitnexus-rules",
        "upstream",
    ]);
    assert_exit(&out, 2);
    let out = env.run([
        "ingest",
        "--profile",
        "runtime",
        h.to_str().unwrap(),
        "--gitnexus-rules",
        "upstream",
        "--gitnexus-version",
        "1.6.9",
    ]);
    assert_exit(&out, 2);
}

#[test]
fn the_shared_link_is_recorded_as_the_sandbox_resolves_it() {
    let env = TestEnv::new();
    let h = checkout(&env, "checkout");
    let relative = digest_of(&env, &h, &[]);
    // The same runtime whose `node_modules/gitnexus-shared` is absolute:
    // the rules accept it, and the snapshot records the relative link.
    let link = h.join("gitnexus/node_modules/gitnexus-shared");
    fs::remove_file(&link).unwrap();
    symlink(h.join("gitnexus-shared"), &link).unwrap();
    assert_eq!(digest_of(&env, &h, &[]), relative);
    assert_eq!(recomputed(&h, &serde_json::json!({})), relative);
    let view = env.json(["path", "--json", relative.as_str()]);
    let shown = PathBuf::from(view["path"].as_str().unwrap());
    assert_eq!(
        fs::read_link(shown.join("gitnexus/node_modules/gitnexus-shared")).unwrap(),
        PathBuf::from("../../gitnexus-shared")
    );
}

/// `stage --arm baseline --gitnexus-root CHECKOUT --json`.
fn stage(env: &TestEnv, checkout: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "stage",
        "--json",
        "--arm",
        "baseline",
        "--gitnexus-root",
        checkout.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    env.json(&args)
}

/// The host path mounted at `target` in a stage's only arm.
fn mounted(report: &Value, target: &str) -> PathBuf {
    let mounts = report["arms"][0]["mounts"].as_array().unwrap();
    let m = mounts.iter().find(|m| m["target"] == target).expect(target);
    PathBuf::from(m["source"].as_str().unwrap())
}

#[test]
fn a_run_staged_before_a_runtime_changes_keeps_its_bytes() {
    let env = TestEnv::new();
    let h = checkout(&env, "checkout");
    let first = stage(&env, &h, &[]);
    let digest = first["gitnexus_runtime_manifest_digest"].as_str().unwrap();
    assert_eq!(digest, digest_of(&env, &h, &[]));
    let node_modules = mounted(&first, "/opt/gitnexus/node_modules");
    let view = PathBuf::from(first["gitnexus_runtime_view"].as_str().unwrap());
    assert!(node_modules.starts_with(fs::canonicalize(&view).unwrap()));
    let before = fs::read(node_modules.join("pkg/package.json")).unwrap();

    // The operator rebuilds a package in place.
    write(
        &h.join("gitnexus/node_modules/pkg/package.json"),
        r#"{"name": "pkg", "version": "2"}"#,
    );
    assert_eq!(
        fs::read(node_modules.join("pkg/package.json")).unwrap(),
        before,
        "a staged run saw the operator's edit"
    );
    let second = stage(&env, &h, &[]);
    let changed = second["gitnexus_runtime_manifest_digest"].as_str().unwrap();
    assert_ne!(changed, digest);
    assert_eq!(changed, recomputed(&h, &serde_json::json!({})));
    let now = mounted(&second, "/opt/gitnexus/node_modules");
    assert_eq!(
        fs::read_to_string(now.join("pkg/package.json")).unwrap(),
        r#"{"name": "pkg", "version": "2"}"#
    );
    // Both views stay, each its snapshot's bytes.
    assert_eq!(
        fs::read(node_modules.join("pkg/package.json")).unwrap(),
        before
    );
    let verify = env.run(["verify"]);
    assert_eq!(verify.status.code(), Some(0), "{verify:?}");

    // A stored runtime named by digest mounts the first bytes again, with
    // the checkout still checked by the rules and not read.
    let again = stage(&env, &h, &["--gitnexus-runtime", digest]);
    assert_eq!(again["gitnexus_runtime_manifest_digest"], digest);
    assert_eq!(again["gitnexus_runtime_ingest"], Value::Null);
    assert_eq!(mounted(&again, "/opt/gitnexus/node_modules"), node_modules);
    write(&h.join("gitnexus/package.json"), r#"{"version": "1.7.0"}"#);
    let out = env.run([
        "stage",
        "--json",
        "--arm",
        "baseline",
        "--gitnexus-root",
        h.to_str().unwrap(),
        "--gitnexus-runtime",
        digest,
    ]);
    assert_exit(&out, 3);
    // With no checkout at all, the stored runtime is checked in its view.
    let alone = env.json([
        "mounts",
        "--json",
        "--arm",
        "baseline",
        "--gitnexus-runtime",
        digest,
    ]);
    assert_eq!(alone["gitnexus_runtime_manifest_digest"], digest);
    assert_eq!(alone["mounts"].as_array().unwrap().len(), 7);
}
