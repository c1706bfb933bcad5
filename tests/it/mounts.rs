//! `cestore mounts`: the arm rules, the GitNexus runtime check (against the
//! reference oracle where it is present), the output forms, and a real
//! bubblewrap sandbox over the printed arguments.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::git::primary_and_linked_worktree;
use crate::util::{self, assert_exit, assert_ok, os, write, TestEnv};

const CE_ARMS: [&str; 3] = ["ce_workflow", "ce_workflow_direct", "ce_review"];
/// Arms the reference gives no plugin: `CE_ARMS` is an exact set.
const OTHER_ARMS: [&str; 5] = [
    "baseline",
    "gitnexus",
    "ce_other",
    "CE_REVIEW",
    "ce_review ",
];
const PLUGIN_TARGET: &str = "/opt/compound-engineering-plugin";

/// The seven targets, in the reference's order.
const GITNEXUS_TARGETS: [&str; 7] = [
    "/opt/gitnexus/dist",
    "/opt/gitnexus/package.json",
    "/opt/gitnexus/node_modules",
    "/opt/gitnexus/vendor",
    "/opt/gitnexus-shared/dist",
    "/opt/gitnexus-shared/package.json",
    "/opt/gitnexus/hooks/claude",
];

/// `cestore mounts ARGS --json`, which must succeed.
fn mounts_json(env: &TestEnv, args: &[&OsStr]) -> Value {
    let mut all = vec![os("mounts")];
    all.extend_from_slice(args);
    all.push(os("--json"));
    env.json(all)
}

/// The `(source, target)` pairs of a report's mounts, checking `read_only`.
fn pairs(report: &Value) -> Vec<(String, String)> {
    report["mounts"]
        .as_array()
        .expect("mounts array")
        .iter()
        .map(|m| {
            assert_eq!(m["read_only"], json!(true), "{m}");
            (
                m["source"].as_str().expect("source").to_string(),
                m["target"].as_str().expect("target").to_string(),
            )
        })
        .collect()
}

/// The `(source, target)` pairs of `holder`'s mounts, each runtime mount's
/// source replaced by the host path its component was read from, after
/// checking that the mount points into the runtime's view in the store
/// (`report` carries the runtime's view and components).
fn read_from(report: &Value, holder: &Value) -> Vec<(String, String)> {
    let view = report["gitnexus_runtime_view"].as_str().unwrap_or_default();
    let components = report["gitnexus_runtime_components"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut next = components.iter();
    pairs(holder)
        .into_iter()
        .map(|(source, target)| {
            if !target.starts_with("/opt/gitnexus") {
                return (source, target);
            }
            let c = next.next().expect("a component per runtime mount");
            let path = c["path"].as_str().unwrap();
            assert_eq!(source, format!("{view}/{path}"), "{report}");
            (c["source"].as_str().unwrap().to_string(), target)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The arm rules
// ---------------------------------------------------------------------------

#[test]
fn ce_arms_get_the_view_at_the_plugin_dir() {
    let env = TestEnv::new();
    let view = env.path("view");
    fs::create_dir(&view).unwrap();
    for arm in CE_ARMS {
        let report = mounts_json(
            &env,
            &[
                os("--arm"),
                os(arm),
                os("--view"),
                view.as_os_str(),
                os("--unchecked"),
            ],
        );
        assert_eq!(report["ok"], json!(true));
        assert_eq!(report["arm"], json!(arm));
        assert_eq!(report["plugin_dir"], json!(PLUGIN_TARGET));
        assert_eq!(
            pairs(&report),
            [(
                view.to_str().unwrap().to_string(),
                PLUGIN_TARGET.to_string()
            )]
        );
    }
}

#[test]
fn ce_arms_without_a_view_are_rejected() {
    let env = TestEnv::new();
    for arm in CE_ARMS {
        let out = env.run(["mounts", "--arm", arm]);
        let stderr = assert_exit(&out, 3);
        assert!(
            stderr.contains("ce_* arm has no staged Compound Engineering plugin"),
            "{stderr}"
        );
        let out = env.run(["mounts", "--arm", arm, "--json"]);
        assert_exit(&out, 3);
        let err = util::parse_json(&out);
        assert_eq!(err["ok"], json!(false));
        assert_eq!(err["error"]["kind"], json!("rejected"));
    }
}

#[test]
fn other_arms_get_nothing_with_or_without_a_view() {
    let env = TestEnv::new();
    let view = env.path("view");
    fs::create_dir(&view).unwrap();
    for arm in OTHER_ARMS {
        for with_view in [false, true] {
            let mut args = vec![os("--arm"), os(arm)];
            if with_view {
                args.extend([os("--view"), view.as_os_str(), os("--unchecked")]);
            }
            let report = mounts_json(&env, &args);
            assert_eq!(report["arm"], json!(arm));
            assert_eq!(report["plugin_dir"], Value::Null, "{arm}");
            assert_eq!(report["mounts"], json!([]), "{arm}");
        }
    }
}

#[test]
fn a_missing_view_is_not_found() {
    let env = TestEnv::new();
    let missing = env.path("no-such-view");
    let out = env.run([
        os("mounts"),
        os("--arm"),
        os("ce_review"),
        os("--view"),
        missing.as_os_str(),
    ]);
    assert_exit(&out, 4);
    let file = env.path("a-file");
    write(&file, "x");
    let out = env.run([
        os("mounts"),
        os("--arm"),
        os("ce_review"),
        os("--view"),
        file.as_os_str(),
    ]);
    assert_exit(&out, 4);
}

#[test]
fn a_relative_view_is_made_absolute() {
    let env = TestEnv::new();
    fs::create_dir(env.path("view")).unwrap();
    let out = env
        .cmd([
            "mounts",
            "--arm",
            "ce_workflow",
            "--view",
            "./view/",
            "--unchecked",
            "--json",
        ])
        .current_dir(env.dir.path())
        .output()
        .unwrap();
    assert_ok(&out);
    let report = util::parse_json(&out);
    assert_eq!(pairs(&report)[0].0, env.path("view").to_str().unwrap());
}

#[test]
fn digest_names_the_shared_view_made_by_path() {
    let (env, _, digest) = util::plugin_store("plugin", "1.0.0");
    let prefix = &digest[..12];

    // Before `cestore path` there is no shared view.
    let out = env.run(["mounts", "--arm", "ce_review", "--digest", prefix]);
    let stderr = assert_exit(&out, 4);
    assert!(stderr.contains("cestore path"), "{stderr}");

    assert_ok(&env.run(["path", &digest]));
    let report = mounts_json(
        &env,
        &[os("--arm"), os("ce_review"), os("--digest"), os(prefix)],
    );
    let store = fs::canonicalize(&env.store).unwrap();
    let expected = store.join("views").join(&digest);
    assert_eq!(
        pairs(&report),
        [(
            expected.to_str().unwrap().to_string(),
            PLUGIN_TARGET.to_string()
        )]
    );

    let out = env.run(["mounts", "--arm", "ce_review", "--digest", "ffffffffffff"]);
    assert_exit(&out, 4);
}

#[test]
fn unchecked_excludes_digest_and_needs_a_view() {
    let env = TestEnv::new();
    let out = env.run([
        "mounts",
        "--arm",
        "ce_review",
        "--view",
        "/",
        "--digest",
        "ab",
        "--unchecked",
    ]);
    assert_exit(&out, 2);
    let out = env.run(["mounts", "--arm", "ce_review", "--unchecked"]);
    assert_exit(&out, 2);
}

// ---------------------------------------------------------------------------
// Output forms
// ---------------------------------------------------------------------------

#[test]
fn format_json_is_the_json_report_with_or_without_json() {
    let env = TestEnv::new();
    let view = env.path("view");
    fs::create_dir(&view).unwrap();
    let h = env.path("harness");
    good_harness(&h);
    let base = [
        os("mounts"),
        os("--arm"),
        os("ce_review"),
        os("--view"),
        view.as_os_str(),
        os("--unchecked"),
        os("--gitnexus-root"),
        h.as_os_str(),
    ];
    let run = |extra: &[&str]| {
        let out = env.run(base.iter().copied().chain(extra.iter().map(|s| os(s))));
        assert_ok(&out);
        String::from_utf8(out.stdout).unwrap()
    };
    // The first run stores the runtime; the later ones find it stored.
    run(&["--json"]);
    let with_json = run(&["--json"]);
    assert_eq!(run(&["--format", "json"]), with_json);
    assert_eq!(run(&["--format", "json", "--json"]), with_json);
    let report: Value = serde_json::from_str(&with_json).unwrap();
    assert_eq!(report.as_object().unwrap().len(), 9, "{report}");
    assert_eq!(report["manifest_digest"], Value::Null, "{report}");

    let text = run(&[]);
    assert!(
        text.contains("plugin_dir: /opt/compound-engineering-plugin"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{} -> {PLUGIN_TARGET} (read-only)",
            view.display()
        )),
        "{text}"
    );

    let bwrap = run(&["--format", "bwrap"]);
    let words: Vec<&str> = bwrap.split_whitespace().collect();
    assert_eq!(words.len(), 3 * 8, "{bwrap}");
    assert_eq!(bwrap.lines().count(), 1);
    assert_eq!(
        &words[..3],
        ["--ro-bind", view.to_str().unwrap(), PLUGIN_TARGET]
    );
    for (triple, target) in words[3..].chunks(3).zip(GITNEXUS_TARGETS) {
        assert_eq!(triple[0], "--ro-bind");
        assert_eq!(triple[2], target);
    }

    let out = env.run(
        base.iter()
            .copied()
            .chain([os("--format"), os("bwrap"), os("--json")]),
    );
    assert_exit(&out, 2);
}

#[test]
fn bwrap_words_are_shell_quoted() {
    let env = TestEnv::new();
    let view = env.path("a view's dir");
    fs::create_dir(&view).unwrap();
    let out = env.run([
        os("mounts"),
        os("--arm"),
        os("ce_review"),
        os("--view"),
        view.as_os_str(),
        os("--unchecked"),
        os("--format"),
        os("bwrap"),
    ]);
    assert_ok(&out);
    let line = String::from_utf8(out.stdout).unwrap();
    // Read back by a real shell, the words are the original arguments.
    let echoed = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "for w in {}; do printf '%s\\n' \"$w\"; done",
            line.trim_end()
        ))
        .output()
        .unwrap();
    assert_ok(&echoed);
    let words: Vec<String> = String::from_utf8(echoed.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(words, ["--ro-bind", view.to_str().unwrap(), PLUGIN_TARGET]);
}

#[test]
fn no_mounts_print_an_empty_bwrap_line() {
    let env = TestEnv::new();
    let out = env.run(["mounts", "--arm", "baseline", "--format", "bwrap"]);
    assert_ok(&out);
    assert_eq!(out.stdout, b"\n");
}

// ---------------------------------------------------------------------------
// The GitNexus runtime, against the oracle
// ---------------------------------------------------------------------------

/// A harness root holding a GitNexus layout the reference accepts.
fn good_harness(h: &Path) {
    util::gitnexus_harness(h, "1.6.9");
}

/// Moves `path` aside and puts a symlink to it in its place.
fn replace_with_symlink(path: &Path) {
    let aside = path.with_extension("real");
    fs::rename(path, &aside).unwrap();
    symlink(&aside, path).unwrap();
}

/// What cestore must answer for a layout: accept, or reject saying this.
#[derive(Debug)]
enum Expect {
    Accept,
    Reject(&'static str),
    /// The reference accepts, and its checks pass, but the runtime's
    /// snapshot refuses the layout, saying this.
    Beyond(&'static str),
}

/// A layout: a name, how to break the good one, and the committed answer.
type Case = (&'static str, fn(&Path), Expect);

fn cases() -> Vec<Case> {
    use Expect::{Accept, Beyond, Reject};
    vec![
        ("good", |_| {}, Accept),
        (
            "missing vendor",
            |h| fs::remove_dir_all(h.join("gitnexus/vendor")).unwrap(),
            Reject("pinned GitNexus runtime component is unavailable"),
        ),
        (
            "missing hooks/claude",
            |h| fs::remove_dir_all(h.join("gitnexus/hooks")).unwrap(),
            Reject("pinned GitNexus runtime component is unavailable"),
        ),
        (
            "missing shared dist",
            |h| fs::remove_dir_all(h.join("gitnexus-shared/dist")).unwrap(),
            Reject("pinned GitNexus runtime component is unavailable"),
        ),
        (
            "symlinked vendor",
            |h| replace_with_symlink(&h.join("gitnexus/vendor")),
            Reject("pinned GitNexus runtime component must be a real directory"),
        ),
        (
            "symlinked package.json",
            |h| replace_with_symlink(&h.join("gitnexus/package.json")),
            Reject("pinned GitNexus runtime component must be a real file"),
        ),
        (
            "symlinked hooks parent",
            |h| replace_with_symlink(&h.join("gitnexus/hooks")),
            Reject("pinned GitNexus runtime component must be a real directory"),
        ),
        (
            "package.json is a directory",
            |h| {
                fs::remove_file(h.join("gitnexus-shared/package.json")).unwrap();
                fs::create_dir(h.join("gitnexus-shared/package.json")).unwrap();
            },
            Reject("pinned GitNexus runtime component must be a real file"),
        ),
        (
            "symlinked runtime root",
            |h| replace_with_symlink(&h.join("gitnexus")),
            Reject("pinned GitNexus runtime must be a real directory"),
        ),
        (
            "symlinked shared root",
            |h| replace_with_symlink(&h.join("gitnexus-shared")),
            Reject("pinned GitNexus shared runtime must be a real directory"),
        ),
        (
            "missing runtime root",
            |h| fs::remove_dir_all(h.join("gitnexus")).unwrap(),
            Reject("pinned GitNexus runtime is unavailable"),
        ),
        (
            "version drift",
            |h| write(&h.join("gitnexus/package.json"), r#"{"version": "1.7.0"}"#),
            Reject("pinned GitNexus runtime version drifted: expected 1.6.9, got '1.7.0'"),
        ),
        (
            "version missing",
            |h| write(&h.join("gitnexus/package.json"), "{}"),
            Reject("expected 1.6.9, got None"),
        ),
        (
            "version a number",
            |h| write(&h.join("gitnexus/package.json"), r#"{"version": 1.69}"#),
            Reject("expected 1.6.9, got 1.69"),
        ),
        (
            "duplicate version key, last wins",
            |h| {
                write(
                    &h.join("gitnexus/package.json"),
                    r#"{"version": "1.7.0", "version": "1.6.9"}"#,
                )
            },
            Accept,
        ),
        (
            "CRLF package.json",
            |h| {
                write(
                    &h.join("gitnexus/package.json"),
                    "{\r\n\"version\": \"1.6.9\"\r\n}\r\n",
                )
            },
            Accept,
        ),
        (
            "invalid package.json",
            |h| write(&h.join("gitnexus/package.json"), r#"{"version": "1.6.9""#),
            Reject("pinned GitNexus runtime metadata is invalid"),
        ),
        (
            "package.json not UTF-8",
            |h| {
                write(
                    &h.join("gitnexus/package.json"),
                    b"{\"version\": \"1.6.9\xff\"}",
                )
            },
            Reject("pinned GitNexus runtime metadata is invalid"),
        ),
        (
            "package.json with a BOM",
            |h| {
                write(
                    &h.join("gitnexus/package.json"),
                    b"\xef\xbb\xbf{\"version\": \"1.6.9\"}",
                )
            },
            Reject("pinned GitNexus runtime metadata is invalid"),
        ),
        (
            "package.json not an object",
            |h| write(&h.join("gitnexus/package.json"), r#"["1.6.9"]"#),
            Reject("pinned GitNexus runtime metadata is invalid"),
        ),
        (
            "missing gitnexus-shared link",
            |h| fs::remove_file(h.join("gitnexus/node_modules/gitnexus-shared")).unwrap(),
            Reject("pinned GitNexus runtime has an unexpected gitnexus-shared dependency"),
        ),
        (
            "gitnexus-shared link elsewhere",
            |h| {
                let link = h.join("gitnexus/node_modules/gitnexus-shared");
                fs::remove_file(&link).unwrap();
                fs::create_dir(h.join("impostor")).unwrap();
                symlink("../../impostor", &link).unwrap();
            },
            Reject("pinned GitNexus runtime has an unexpected gitnexus-shared dependency"),
        ),
        (
            "gitnexus-shared link to the shared dist",
            |h| {
                let link = h.join("gitnexus/node_modules/gitnexus-shared");
                fs::remove_file(&link).unwrap();
                symlink("../../gitnexus-shared/dist", &link).unwrap();
            },
            Reject("pinned GitNexus runtime has an unexpected gitnexus-shared dependency"),
        ),
        (
            "gitnexus-shared absolute link",
            |h| {
                let link = h.join("gitnexus/node_modules/gitnexus-shared");
                fs::remove_file(&link).unwrap();
                symlink(h.join("gitnexus-shared"), &link).unwrap();
            },
            Accept,
        ),
        (
            "gitnexus-shared link dangling",
            |h| {
                let link = h.join("gitnexus/node_modules/gitnexus-shared");
                fs::remove_file(&link).unwrap();
                symlink("../../nowhere", &link).unwrap();
            },
            Reject("pinned GitNexus runtime has an unexpected gitnexus-shared dependency"),
        ),
        (
            "gitnexus-shared a real directory",
            |h| {
                let link = h.join("gitnexus/node_modules/gitnexus-shared");
                fs::remove_file(&link).unwrap();
                write(&link.join("package.json"), r#"{"name": "gitnexus-shared"}"#);
            },
            Reject("pinned GitNexus runtime has an unexpected gitnexus-shared dependency"),
        ),
        (
            "wrong shared package name",
            |h| {
                write(
                    &h.join("gitnexus-shared/package.json"),
                    r#"{"name": "gitnexus-shared-fork"}"#,
                )
            },
            Reject("pinned GitNexus shared runtime has an unexpected package identity"),
        ),
        (
            "shared package name missing",
            |h| write(&h.join("gitnexus-shared/package.json"), "{}"),
            Reject("pinned GitNexus shared runtime has an unexpected package identity"),
        ),
        (
            "invalid shared package.json",
            |h| write(&h.join("gitnexus-shared/package.json"), "nope"),
            Reject("pinned GitNexus shared runtime metadata is invalid"),
        ),
        (
            "missing entrypoint",
            |h| fs::remove_file(h.join("gitnexus/dist/cli/index.js")).unwrap(),
            Reject("pinned GitNexus runtime metadata is invalid"),
        ),
        (
            "symlinked entrypoint",
            |h| replace_with_symlink(&h.join("gitnexus/dist/cli/index.js")),
            Reject("pinned GitNexus runtime entrypoint must be regular and non-symlink"),
        ),
        (
            "entrypoint a directory",
            |h| {
                fs::remove_file(h.join("gitnexus/dist/cli/index.js")).unwrap();
                fs::create_dir(h.join("gitnexus/dist/cli/index.js")).unwrap();
            },
            Reject("pinned GitNexus runtime entrypoint must be regular and non-symlink"),
        ),
        // The reference lstats dist/cli/index.js by path, so a symlinked
        // dist/cli on the way is followed and accepted. cestore's checks
        // agree, but the runtime's snapshot refuses the absolute link: the
        // mounts would show bytes it does not name.
        (
            "symlinked dist/cli",
            |h| replace_with_symlink(&h.join("gitnexus/dist/cli")),
            Beyond("GitNexus runtime symlink leaves the runtime's snapshot: gitnexus/dist/cli"),
        ),
        // Checks run in the reference's order: the first broken rule is reported.
        (
            "version drift and wrong shared name",
            |h| {
                write(&h.join("gitnexus/package.json"), r#"{"version": "1.7.0"}"#);
                write(&h.join("gitnexus-shared/package.json"), "{}");
            },
            Reject("version drifted"),
        ),
        (
            "missing entrypoint and invalid package.json",
            |h| {
                fs::remove_file(h.join("gitnexus/dist/cli/index.js")).unwrap();
                write(&h.join("gitnexus/package.json"), "{");
            },
            Reject("index.js"),
        ),
    ]
}

/// The oracle's answer for a harness root; `None` when it is absent.
fn oracle_gitnexus(harness: &Path) -> Option<Value> {
    util::oracle_json([OsStr::new("gitnexus-mounts"), harness.as_os_str()])
}

/// cestore's answer: the mounts, or the exit code and stderr.
fn cestore_gitnexus(
    env: &TestEnv,
    harness: &Path,
    extra: &[&str],
) -> Result<Vec<(String, String)>, (i32, String)> {
    let mut args = vec![
        os("mounts"),
        os("--arm"),
        os("baseline"),
        os("--gitnexus-root"),
        harness.as_os_str(),
        os("--json"),
    ];
    args.extend(extra.iter().map(|s| os(s)));
    let out = env.run(args);
    match out.status.code() {
        Some(0) => {
            let report = util::parse_json(&out);
            Ok(read_from(&report, &report))
        }
        code => Err((
            code.unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )),
    }
}

/// Builds one case's layout in a fresh directory, checks cestore's committed
/// answer, and compares with the oracle when it is present. Returns whether
/// the oracle was consulted.
fn check_harness_case(name: &str, mutate: fn(&Path), expect: &Expect) -> bool {
    let env = TestEnv::new();
    let h = env.path("harness");
    good_harness(&h);
    mutate(&h);
    let ours = cestore_gitnexus(&env, &h, &[]);
    match (expect, &ours) {
        (Expect::Accept, Ok(mounts)) => {
            let expected: Vec<(String, String)> = GITNEXUS_TARGETS
                .iter()
                .map(|t| {
                    let (root, rel) = t.strip_prefix("/opt/").unwrap().split_once('/').unwrap();
                    (
                        h.join(root).join(rel).to_str().unwrap().to_string(),
                        t.to_string(),
                    )
                })
                .collect();
            assert_eq!(mounts, &expected, "{name}");
        }
        (Expect::Reject(text) | Expect::Beyond(text), Err((code, stderr))) => {
            assert_eq!(*code, 3, "{name}: {stderr}");
            assert!(
                stderr.contains(text),
                "{name}: expected {text:?} in {stderr}"
            );
        }
        _ => panic!("{name}: expected {expect:?}, cestore said {ours:?}"),
    }
    let Some(oracle) = oracle_gitnexus(&h) else {
        return false;
    };
    if let Expect::Beyond(_) = expect {
        assert_eq!(oracle["ok"], json!(true), "{name}: the oracle accepts");
    } else if oracle["ok"] == json!(true) {
        let theirs = crate::util::field_pairs(&oracle["mounts"], "source", "target");
        assert_eq!(
            ours.as_ref().ok(),
            Some(&theirs),
            "{name}: the oracle accepts"
        );
    } else {
        assert!(
            ours.is_err(),
            "{name}: the oracle rejects with {oracle}, cestore accepts"
        );
    }
    true
}

#[test]
fn gitnexus_layouts_agree_with_the_reference() {
    let mut consulted = 0;
    let cases = cases();
    for (name, mutate, expect) in &cases {
        consulted += usize::from(check_harness_case(name, *mutate, expect));
    }
    if consulted == 0 {
        util::skip(
            "gitnexus_layouts_agree_with_the_reference (the oracle's answers)",
            "../shared/reference/oracle.py is absent; checked cestore's committed answers only",
        );
    } else {
        assert_eq!(consulted, cases.len());
    }
}

#[test]
fn gitnexus_harness_root_reached_through_a_symlink_is_rejected() {
    let env = TestEnv::new();
    let real = env.path("real-harness");
    good_harness(&real);
    let link = env.path("harness-link");
    symlink(&real, &link).unwrap();
    let stderr = cestore_gitnexus(&env, &link, &[]).expect_err("a symlinked harness root");
    assert_eq!(stderr.0, 3);
    assert!(
        stderr
            .1
            .contains("pinned GitNexus runtime must be a real directory"),
        "{}",
        stderr.1
    );
    if let Some(oracle) = oracle_gitnexus(&link) {
        assert_eq!(oracle["ok"], json!(false), "{oracle}");
    }
}

#[test]
fn gitnexus_pinned_version_can_be_changed() {
    let env = TestEnv::new();
    let h = env.path("harness");
    good_harness(&h);
    write(&h.join("gitnexus/package.json"), r#"{"version": "1.7.0"}"#);
    assert_eq!(
        cestore_gitnexus(&env, &h, &["--gitnexus-version", "1.7.0"]).map(|m| m.len()),
        Ok(7)
    );
    let err = cestore_gitnexus(&env, &h, &[]).expect_err("drifted");
    assert!(err.1.contains("expected 1.6.9, got '1.7.0'"), "{}", err.1);
    // --gitnexus-version means nothing without --gitnexus-root.
    assert_exit(
        &env.run(["mounts", "--arm", "baseline", "--gitnexus-version", "1.7.0"]),
        2,
    );
}

#[test]
fn gitnexus_mounts_follow_the_plugin_mount_for_every_arm() {
    let env = TestEnv::new();
    let h = env.path("harness");
    good_harness(&h);
    let view = env.path("view");
    fs::create_dir(&view).unwrap();
    for arm in CE_ARMS.iter().chain(&OTHER_ARMS) {
        let report = mounts_json(
            &env,
            &[
                os("--arm"),
                os(arm),
                os("--view"),
                view.as_os_str(),
                os("--unchecked"),
                os("--gitnexus-root"),
                h.as_os_str(),
            ],
        );
        let targets: Vec<String> = pairs(&report).into_iter().map(|(_, t)| t).collect();
        let gitnexus: Vec<String> = GITNEXUS_TARGETS.iter().map(|t| t.to_string()).collect();
        if CE_ARMS.contains(arm) {
            assert_eq!(targets[0], PLUGIN_TARGET);
            assert_eq!(targets[1..], gitnexus[..], "{arm}");
        } else {
            assert_eq!(targets, gitnexus, "{arm}");
        }
    }
}

// ---------------------------------------------------------------------------
// A real sandbox
// ---------------------------------------------------------------------------

/// The file the stand-in view holds, and its content.
const VIEW_FILE: (&str, &str) = ("skills/ce-plan/SKILL.md", "# ce-plan\nplan the work\n");

/// Ingests a small release and checks out a real view of it: the directory
/// the sandbox mounts.
fn sandbox_view(env: &TestEnv) -> PathBuf {
    let src = env.plugin("src", "1.0.0");
    write(&src.join(VIEW_FILE.0), VIEW_FILE.1);
    let digest = env.ingest_digest(&src, "1.0.0");
    let view = env.path("view");
    assert_ok(&env.run([os("checkout"), os(&digest), view.as_os_str()]));
    view
}

/// Whether bubblewrap is installed and can make a sandbox here.
fn bwrap_works() -> Result<(), String> {
    match Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "true"])
        .output()
    {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "`bwrap --ro-bind / / true` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("bwrap is not runnable: {e}")),
    }
}

#[test]
fn bwrap_sandbox_sees_the_view_read_only() {
    if let Err(reason) = bwrap_works() {
        util::skip("bwrap_sandbox_sees_the_view_read_only", &reason);
        return;
    }
    let env = TestEnv::new();
    let view = sandbox_view(&env);
    let out = env.run([
        os("mounts"),
        os("--arm"),
        os("ce_review"),
        os("--view"),
        view.as_os_str(),
        os("--format"),
        os("bwrap"),
    ]);
    assert_ok(&out);
    let printed = String::from_utf8(out.stdout).unwrap();
    let args: Vec<&str> = printed.split_whitespace().collect();
    assert_eq!(args.len(), 3);

    let sandbox = |cmd: &[&str]| {
        Command::new("bwrap")
            .args(["--ro-bind", "/", "/", "--tmpfs", "/opt"])
            .args(&args)
            .args(["--dev", "/dev", "--proc", "/proc"])
            .args(cmd)
            .output()
            .expect("run bwrap")
    };
    let file = format!("{PLUGIN_TARGET}/{}", VIEW_FILE.0);
    let read = sandbox(&["cat", &file]);
    assert_ok(&read);
    assert_eq!(String::from_utf8_lossy(&read.stdout), VIEW_FILE.1);

    let create = sandbox(&["sh", "-c", &format!("echo x > {PLUGIN_TARGET}/new")]);
    assert!(
        !create.status.success(),
        "creating a file in the view succeeded"
    );
    let overwrite = sandbox(&["sh", "-c", &format!("echo x > {file}")]);
    assert!(
        !overwrite.status.success(),
        "overwriting a view file succeeded"
    );
    assert!(!view.join("new").exists());
    assert_eq!(
        fs::read_to_string(view.join(VIEW_FILE.0)).unwrap(),
        VIEW_FILE.1
    );
    assert_ok(&env.run([os("discard"), view.as_os_str()]));
}

/// Ingests a small release at `version` from `src` and checks out a view of
/// it at `view`; returns the digest.
fn checked_out(env: &TestEnv, src: &Path, version: &str, view: &Path) -> String {
    util::minimal_plugin(src, version);
    write(&src.join(VIEW_FILE.0), VIEW_FILE.1);
    let digest = env.ingest_digest(src, version);
    assert_ok(&env.run([os("checkout"), os(&digest), view.as_os_str()]));
    digest
}

#[test]
fn bwrap0_arguments_survive_a_space_and_a_quote() {
    if let Err(reason) = bwrap_works() {
        util::skip("bwrap0_arguments_survive_a_space_and_a_quote", &reason);
        return;
    }
    let env = TestEnv::new();
    let view = env.path("run 1/it's the \"view\"");
    fs::create_dir(env.path("run 1")).unwrap();
    checked_out(&env, &env.path("src"), "1.0.0", &view);
    let out = env.run([
        os("mounts"),
        os("--arm"),
        os("ce_review"),
        os("--view"),
        view.as_os_str(),
        os("--format"),
        os("bwrap0"),
    ]);
    assert_ok(&out);
    let args_file = env.path("bwrap-args");
    fs::write(&args_file, &out.stdout).unwrap();
    let words: Vec<&[u8]> = out.stdout.split(|b| *b == 0).collect();
    assert_eq!(
        words,
        [
            &b"--ro-bind"[..],
            view.to_str().unwrap().as_bytes(),
            PLUGIN_TARGET.as_bytes(),
            b""
        ]
    );

    // `bwrap --args 3` reads the arguments from descriptor 3.
    let sandbox = |cmd: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "exec bwrap --ro-bind / / --tmpfs /opt --args 3 --dev /dev --proc /proc {cmd} 3<\"$1\""
            ))
            .arg("sh")
            .arg(&args_file)
            .output()
            .expect("run bwrap")
    };
    let file = format!("{PLUGIN_TARGET}/{}", VIEW_FILE.0);
    let read = sandbox(&format!("cat {file}"));
    assert_ok(&read);
    assert_eq!(String::from_utf8_lossy(&read.stdout), VIEW_FILE.1);
    let write_new = sandbox(&format!("sh -c 'echo x > {PLUGIN_TARGET}/new'"));
    assert!(
        !write_new.status.success(),
        "creating a file in the view succeeded"
    );
    let overwrite = sandbox(&format!("sh -c 'echo x > {file}'"));
    assert!(
        !overwrite.status.success(),
        "overwriting a view file succeeded"
    );
    assert!(!view.join("new").exists());
    assert_eq!(
        fs::read_to_string(view.join(VIEW_FILE.0)).unwrap(),
        VIEW_FILE.1
    );
}

#[test]
fn no_mounts_print_no_bwrap0_arguments() {
    let env = TestEnv::new();
    let out = env.run(["mounts", "--arm", "baseline", "--format", "bwrap0"]);
    assert_ok(&out);
    assert!(out.stdout.is_empty(), "{:?}", out.stdout);
    let out = env.run([
        "mounts", "--arm", "baseline", "--format", "bwrap0", "--json",
    ]);
    assert_exit(&out, 2);
    assert_eq!(util::parse_json(&out)["error"]["kind"], "usage");
}

#[test]
fn a_view_must_be_one_cestore_recorded() {
    let env = TestEnv::new();
    let src = env.path("src");
    let view = env.path("view");
    let digest = checked_out(&env, &src, "1.0.0", &view);
    let mounts = |extra: &[&OsStr]| {
        let mut args = vec![os("mounts"), os("--arm"), os("ce_review")];
        args.extend_from_slice(extra);
        args.push(os("--json"));
        env.run(args)
    };

    // A recorded view: its digest is reported.
    let out = mounts(&[os("--view"), view.as_os_str()]);
    assert_ok(&out);
    let report = util::parse_json(&out);
    assert_eq!(report["manifest_digest"], json!(digest), "{report}");
    assert_eq!(
        pairs(&report),
        [(view.to_str().unwrap().into(), PLUGIN_TARGET.into())]
    );

    // A directory cestore did not make: /etc, and the unfiltered release.
    for dir in [Path::new("/etc"), src.as_path()] {
        let out = mounts(&[os("--view"), dir.as_os_str()]);
        let stderr = assert_exit(&out, 4);
        let err = util::parse_json(&out);
        assert_eq!(err["error"]["kind"], "not-found", "{err}");
        assert_eq!(err["error"]["path"], json!(dir), "{err}");
        assert!(stderr.contains("--unchecked"), "{stderr}");
        // --unchecked takes it as it is, with no digest.
        let out = mounts(&[os("--view"), dir.as_os_str(), os("--unchecked")]);
        assert_ok(&out);
        assert_eq!(util::parse_json(&out)["manifest_digest"], Value::Null);
    }

    // --digest checks the view against an expected snapshot (a prefix works).
    let out = mounts(&[
        os("--view"),
        view.as_os_str(),
        os("--digest"),
        os(&digest[..10]),
    ]);
    assert_ok(&out);
    let other_src = env.plugin("other", "2.0.0");
    let other = env.ingest_digest(&other_src, "2.0.0");
    let out = mounts(&[os("--view"), view.as_os_str(), os("--digest"), os(&other)]);
    let stderr = assert_exit(&out, 1);
    let err = util::parse_json(&out);
    assert_eq!(err["error"]["kind"], "integrity", "{err}");
    assert!(
        stderr.contains(&digest) && stderr.contains(&other),
        "{stderr}"
    );

    // A shared view is one cestore made.
    let shared = env.json(["path", &other, "--json"]);
    let shared = shared["path"].as_str().unwrap().to_string();
    let out = mounts(&[os("--view"), os(&shared)]);
    assert_ok(&out);
    assert_eq!(util::parse_json(&out)["manifest_digest"], json!(other));

    // A view whose root directory was replaced is no longer that view.
    // Moved aside, so that the new directory cannot reuse its inode.
    fs::rename(&view, env.path("moved-aside")).unwrap();
    fs::create_dir(&view).unwrap();
    let out = mounts(&[os("--view"), view.as_os_str()]);
    assert_exit(&out, 6);
}

// ---------------------------------------------------------------------------
// The GitNexus runtime by upstream's current rules (--gitnexus-rules upstream)
// ---------------------------------------------------------------------------

/// A primary checkout and a linked worktree of it (`git worktree add`),
/// each with a GitNexus layout whose version upstream's tests use.
fn primary_and_worktree(env: &TestEnv) -> (PathBuf, PathBuf) {
    let (primary, worktree) = primary_and_linked_worktree(env);
    for root in [&primary, &worktree] {
        good_harness(root);
        write(
            &root.join("gitnexus/package.json"),
            r#"{"version": "9.9.9-test"}"#,
        );
    }
    (primary, worktree)
}

/// Replaces `HARNESS/gitnexus/node_modules` with a symlink to `target`.
fn link_node_modules(harness: &Path, target: &Path) {
    let node_modules = harness.join("gitnexus/node_modules");
    fs::remove_dir_all(&node_modules).unwrap();
    symlink(target, &node_modules).unwrap();
}

/// The source mounted at `target`.
fn source_at(mounts: &[(String, String)], target: &str) -> PathBuf {
    let (source, _) = mounts.iter().find(|(_, t)| t == target).expect(target);
    PathBuf::from(source)
}

const UPSTREAM: &[&str] = &["--gitnexus-rules", "upstream"];

#[test]
fn upstream_rules_accept_any_non_empty_version_and_the_seed_keeps_its_pin() {
    let env = TestEnv::new();
    let h = env.path("harness");
    good_harness(&h);
    write(
        &h.join("gitnexus/package.json"),
        r#"{"version": "9.9.9-test"}"#,
    );
    let mounts = cestore_gitnexus(&env, &h, UPSTREAM).expect("upstream accepts 9.9.9-test");
    let targets: Vec<&str> = mounts.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(targets, GITNEXUS_TARGETS);
    assert_eq!(
        source_at(&mounts, "/opt/gitnexus/dist"),
        h.join("gitnexus/dist")
    );
    // The default and `seed` are the seed's rules: the pin holds.
    for extra in [&[][..], &["--gitnexus-rules", "seed"][..]] {
        let (code, stderr) = cestore_gitnexus(&env, &h, extra).expect_err("the seed pins 1.6.9");
        assert_eq!(code, 3, "{stderr}");
        assert!(
            stderr.contains("version drifted: expected 1.6.9, got '9.9.9-test'"),
            "{stderr}"
        );
    }
    for bad in [
        r#"{}"#,
        r#"{"version": ""}"#,
        r#"{"version": 9}"#,
        r#"{"version": null}"#,
    ] {
        write(&h.join("gitnexus/package.json"), bad);
        let out = env.run(
            [
                os("mounts"),
                os("--arm"),
                os("baseline"),
                os("--gitnexus-root"),
                h.as_os_str(),
            ]
            .into_iter()
            .chain(UPSTREAM.iter().map(|s| os(s)))
            .chain([os("--json")]),
        );
        assert_exit(&out, 3);
        let err = util::parse_json(&out);
        assert_eq!(
            err["error"]["rule"],
            json!("gitnexus-version-missing"),
            "{bad}"
        );
        assert_eq!(
            err["error"]["message"],
            json!("pinned GitNexus runtime package.json has no version"),
            "{bad}"
        );
    }
}

#[test]
fn upstream_rules_let_a_worktree_borrow_the_primary_node_modules_and_shared() {
    let env = TestEnv::new();
    let (primary, worktree) = primary_and_worktree(&env);
    let primary = fs::canonicalize(primary).unwrap();
    link_node_modules(&worktree, &primary.join("gitnexus/node_modules"));
    let mounts = cestore_gitnexus(&env, &worktree, UPSTREAM).expect("a borrowed node_modules");
    assert_eq!(
        source_at(&mounts, "/opt/gitnexus/node_modules"),
        primary.join("gitnexus/node_modules")
    );
    assert_eq!(
        source_at(&mounts, "/opt/gitnexus-shared/package.json"),
        primary.join("gitnexus-shared/package.json")
    );
    assert_eq!(
        source_at(&mounts, "/opt/gitnexus/dist"),
        worktree.join("gitnexus/dist")
    );
    // The seed's rules refuse every symlinked component.
    let (code, stderr) = cestore_gitnexus(&env, &worktree, &["--gitnexus-version", "9.9.9-test"])
        .expect_err("the seed refuses the symlink");
    assert_eq!(code, 3);
    assert!(
        stderr.contains("component must be a real directory"),
        "{stderr}"
    );
}

#[test]
fn upstream_rules_mount_the_primary_shared_when_only_the_inner_link_points_there() {
    let env = TestEnv::new();
    let (primary, worktree) = primary_and_worktree(&env);
    let primary = fs::canonicalize(primary).unwrap();
    let linked = worktree.join("gitnexus/node_modules/gitnexus-shared");
    fs::remove_file(&linked).unwrap();
    symlink(primary.join("gitnexus-shared"), &linked).unwrap();
    let mounts = cestore_gitnexus(&env, &worktree, UPSTREAM).expect("an inner link to the primary");
    assert_eq!(
        source_at(&mounts, "/opt/gitnexus/node_modules"),
        worktree.join("gitnexus/node_modules")
    );
    assert_eq!(
        source_at(&mounts, "/opt/gitnexus-shared/dist"),
        primary.join("gitnexus-shared/dist")
    );
}

#[test]
fn upstream_rules_refuse_a_node_modules_symlink_anywhere_else() {
    let env = TestEnv::new();
    let (_primary, worktree) = primary_and_worktree(&env);
    let outsider = env.path("outsider");
    good_harness(&outsider);
    link_node_modules(&worktree, &outsider.join("gitnexus/node_modules"));
    let (code, stderr) = cestore_gitnexus(&env, &worktree, UPSTREAM).expect_err("an outsider");
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "pinned GitNexus runtime component symlink must point at the primary checkout: {}",
            worktree.join("gitnexus/node_modules").display()
        )),
        "{stderr}"
    );
    // In a checkout that is no linked worktree, any such symlink is refused.
    let checkout = env.path("checkout");
    good_harness(&checkout);
    fs::create_dir(checkout.join(".git")).unwrap();
    link_node_modules(&checkout, &outsider.join("gitnexus/node_modules"));
    let (code, stderr) = cestore_gitnexus(&env, &checkout, UPSTREAM).expect_err("a plain checkout");
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("component must be a real directory"),
        "{stderr}"
    );
    // Upstream's rules check the checkout itself: a symlinked one is refused.
    let link = env.path("checkout-link");
    symlink(&outsider, &link).unwrap();
    let (code, stderr) = cestore_gitnexus(&env, &link, UPSTREAM).expect_err("a symlinked checkout");
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("pinned GitNexus checkout must be a real directory"),
        "{stderr}"
    );
    // A root that does not exist is not-found, and names the rule and the path.
    let absent = env.path("absent");
    let out = env.run([
        os("mounts"),
        os("--arm"),
        os("baseline"),
        os("--gitnexus-root"),
        absent.as_os_str(),
        os("--gitnexus-rules"),
        os("upstream"),
        os("--json"),
    ]);
    assert_exit(&out, 4);
    let err = util::parse_json(&out);
    assert_eq!(err["error"]["rule"], json!("gitnexus-checkout-unavailable"));
    assert_eq!(err["error"]["path"], json!(absent.to_str().unwrap()));
}

#[test]
fn upstream_rules_refuse_a_pin_and_stage_offers_the_same_choice() {
    let env = TestEnv::new();
    let (primary, worktree) = primary_and_worktree(&env);
    let primary = fs::canonicalize(primary).unwrap();
    link_node_modules(&worktree, &primary.join("gitnexus/node_modules"));
    let mut args = UPSTREAM.to_vec();
    args.extend(["--gitnexus-version", "9.9.9-test"]);
    let (code, stderr) = cestore_gitnexus(&env, &worktree, &args).expect_err("a pin with upstream");
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--gitnexus-version pins the seed's rules"),
        "{stderr}"
    );

    let staged = env.json([
        os("stage"),
        os("--arm"),
        os("baseline"),
        os("--gitnexus-root"),
        worktree.as_os_str(),
        os("--gitnexus-rules"),
        os("upstream"),
        os("--json"),
    ]);
    let arm = &staged["arms"][0];
    assert_eq!(arm["arm"], json!("baseline"));
    assert_eq!(
        read_from(&staged, arm)
            .iter()
            .map(|(s, _)| PathBuf::from(s))
            .nth(2),
        Some(primary.join("gitnexus/node_modules"))
    );
    let out = env.run([
        os("stage"),
        os("--arm"),
        os("baseline"),
        os("--gitnexus-root"),
        worktree.as_os_str(),
    ]);
    let stderr = assert_exit(&out, 3);
    assert!(stderr.contains("must be a real directory"), "{stderr}");
}
