//! The command line's contract beyond JSON: `find`'s patterns, `digest`,
//! `import --check`, `push REG/REPO:TAG`, `--help` and `--version` beside
//! usage errors, and messages that name the thing and the next step.

use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::util::{
    self, assert_exit, assert_ok, minimal_store, os, parse_json, sha_hex, write, TestEnv,
};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `(digest, path)` pairs `find` reports.
fn found(env: &TestEnv, args: &[&str]) -> Vec<(String, String)> {
    util::find_matches(env, args)
        .iter()
        .map(|m| {
            (
                m["manifest_digest"].as_str().unwrap().to_string(),
                m["path"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn find_takes_object_prefixes_directories_and_globs() {
    let (env, a_src) = util::with_plugin("a", "1.0.0");
    write(&a_src.join("skills/ce-plan/notes/deep.md"), "deep\n");
    write(&a_src.join("skills/ce-plan-extra/SKILL.md"), "# extra\n");
    let a = env.ingest_digest(&a_src, "1.0.0");
    let b_src = env.plugin("b", "1.1.0");
    let b = env.ingest_digest(&b_src, "1.1.0");

    // A unique prefix of a content's SHA-256, as docs/audit.md shows.
    let sha = sha_hex;
    let deep = sha(b"deep\n");
    assert_eq!(
        found(&env, &["--object", &deep[..8]]),
        [(a.clone(), "skills/ce-plan/notes/deep.md".into())]
    );
    assert_eq!(
        found(&env, &["--object", &deep.to_uppercase()]),
        found(&env, &["--object", &deep])
    );
    // A prefix several contents share is ambiguous, like any digest prefix:
    // two contents whose SHA-256s share four hex digits, in a store of their own.
    let out = env.run(["find", "--object", "", "--json"]);
    assert_exit(&out, 2);
    let mut seen = std::collections::HashMap::new();
    let (one, two) = (0u32..)
        .find_map(|n| {
            let content = format!("{n}\n");
            let hex = sha(content.as_bytes());
            seen.insert(hex[..4].to_string(), content.clone())
                .map(|other| (other, content))
        })
        .unwrap();
    let (shared, src) = util::with_plugin("src", "1.0.0");
    write(&src.join("skills/ce-plan/one.md"), &one);
    write(&src.join("skills/ce-plan/two.md"), &two);
    shared.ingest_digest(&src, "1.0.0");
    let prefix = &sha(one.as_bytes())[..4];
    let out = shared.run(["find", "--object", prefix, "--json"]);
    assert_exit(&out, 5);
    let error = &parse_json(&out)["error"];
    assert_eq!(error["kind"], "ambiguous-digest");
    let mut listed: Vec<&str> = crate::util::array(&error["matches"])
        .iter()
        .map(|m| m["sha256"].as_str().unwrap())
        .collect();
    listed.sort_unstable();
    let mut both = [sha(one.as_bytes()), sha(two.as_bytes())];
    both.sort_unstable();
    assert_eq!(listed, both);
    // Fewer than four hex digits are refused, as for a snapshot's digest.
    let out = shared.run(["find", "--object", &prefix[..3], "--json"]);
    assert_exit(&out, 2);
    assert!(parse_json(&out)["error"]["message"]
        .as_str()
        .unwrap()
        .contains("at least 4"));
    assert!(found(&env, &["--object", &sha(b"in no release")[..12]]).is_empty());
    let out = env.run(["find", "--object", "xyz", "--json"]);
    assert_exit(&out, 2);

    // An exact path, in both snapshots.
    let plan = "skills/ce-plan/SKILL.md";
    assert_eq!(
        found(&env, &["--path", plan]),
        [(a.clone(), plan.into()), (b.clone(), plan.into())]
    );
    // A directory, with or without its slash: every file below it, and
    // nothing from a sibling whose name merely starts the same.
    let under = [
        (a.clone(), plan.to_string()),
        (a.clone(), "skills/ce-plan/notes/deep.md".to_string()),
        (b.clone(), plan.to_string()),
    ];
    let mut got = found(&env, &["--path", "skills/ce-plan"]);
    got.sort();
    let mut want = under.to_vec();
    want.sort();
    assert_eq!(got, want);
    let mut got = found(&env, &["--path", "skills/ce-plan/"]);
    got.sort();
    assert_eq!(got, want);
    // A glob: `*` stays within one component, `**` spans several.
    let skills: Vec<String> = found(&env, &["--path", "skills/*/SKILL.md"])
        .into_iter()
        .filter(|(d, _)| *d == a)
        .map(|(_, p)| p)
        .collect();
    assert_eq!(
        skills,
        [
            "skills/ce-code-review/SKILL.md",
            "skills/ce-plan/SKILL.md",
            "skills/ce-plan-extra/SKILL.md",
            "skills/ce-work/SKILL.md"
        ]
    );
    assert_eq!(
        found(&env, &["--path", "skills/**/*.md"])
            .iter()
            .filter(|(d, _)| *d == a)
            .count(),
        5
    );
    assert_eq!(
        found(&env, &["--path", "skills/ce-pla?/notes/*"]),
        [(a.clone(), "skills/ce-plan/notes/deep.md".into())]
    );
    assert!(found(&env, &["--path", "skills/nowhere"]).is_empty());
}

#[test]
fn digest_validates_like_ingest_and_stores_nothing() {
    let (env, src) = util::with_plugin("src", "1.0.0");
    let out = env.run([os("digest"), src.as_os_str(), os("--version"), os("1.0.0")]);
    assert_ok(&out);
    let printed = stdout(&out);
    assert!(!env.store.exists(), "digest made the store");
    let report = env.json([
        os("digest"),
        src.as_os_str(),
        os("--version"),
        os("1.0.0"),
        os("--json"),
    ]);
    let ingested = env.ingest(&src, "1.0.0");
    assert_eq!(printed.trim(), ingested["provenance"]["manifest_digest"]);
    assert_eq!(report["provenance"], ingested["provenance"]);
    assert_eq!(report["source"], json!(src));

    // The same rules as ingest, under the same names.
    let out = env.run([
        os("digest"),
        src.as_os_str(),
        os("--version"),
        os("2.0.0"),
        os("--json"),
    ]);
    assert_exit(&out, 3);
    assert_eq!(parse_json(&out)["error"]["rule"], "version-mismatch");
    // No store is opened, even one that is not a store.
    let out = Command::new(util::bin())
        .args([os("digest"), src.as_os_str(), os("--version"), os("1.0.0")])
        .args(["--store", "/dev/null"])
        .output()
        .unwrap();
    assert_ok(&out);
}

#[test]
fn import_check_verifies_a_bundle_and_stores_nothing() {
    let (env, d) = minimal_store();
    let bundle = env.path("b.tar");
    assert_ok(&env.run([os("export"), os(&d), os("-o"), bundle.as_os_str()]));

    let other = TestEnv::new();
    let out = other.run([os("import"), os("--check"), bundle.as_os_str()]);
    assert_ok(&out);
    let text = stdout(&out);
    assert!(text.contains(&d) && text.contains("not imported"), "{text}");
    assert!(!other.store.exists(), "import --check made a store");
    let report = other.json([
        os("import"),
        os("--check"),
        bundle.as_os_str(),
        os("--digest"),
        os(&d),
        os("--json"),
    ]);
    assert_eq!(report["bundle"]["manifest_digest"], d.as_str());
    // Another expected digest is refused, as import refuses it.
    let out = other.run([
        os("import"),
        os("--check"),
        bundle.as_os_str(),
        os("--digest"),
        os(&"1".repeat(64)),
    ]);
    assert_exit(&out, 1);
    assert!(!other.store.exists());

    // A file that is not a bundle: one line, none of its contents.
    let notes = env.path("notes.txt");
    write(&notes, "SECRET-LINE-ONE\nSECRET-LINE-TWO\n");
    for check in [true, false] {
        let mut args = vec![os("import"), notes.as_os_str()];
        if check {
            args.push(os("--check"));
        }
        let out = other.run(&args);
        let stderr = assert_exit(&out, 1);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("is not a bundle"), "{stderr}");
        assert!(stderr.contains(notes.to_str().unwrap()), "{stderr}");
        assert!(!stderr.contains("SECRET"), "{stderr}");
    }
    // Random bytes after a valid-looking start print no raw bytes either.
    let mut bytes = fs::read(&bundle).unwrap();
    for b in bytes.iter_mut().skip(512 + 20).take(400) {
        *b = 0xff;
    }
    let broken = env.path("broken.tar");
    fs::write(&broken, &bytes).unwrap();
    let out = other.run([os("import"), os("--check"), broken.as_os_str()]);
    let stderr = assert_exit(&out, 1);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!stderr.contains('\u{fffd}'), "{stderr}");
}

#[test]
fn help_and_version_still_work_with_json() {
    let env = TestEnv::new();
    for args in [
        vec!["--help"],
        vec!["ingest", "--help", "--json"],
        vec!["--json", "--version"],
    ] {
        let out = env.run(&args);
        assert_ok(&out);
        let text = stdout(&out);
        assert!(
            text.contains("Usage:") || text.starts_with("cestore "),
            "{args:?}: {text}"
        );
        assert!(serde_json::from_str::<Value>(&text).is_err(), "{args:?}");
    }
    // Without --json a usage error prints nothing on stdout.
    let out = env.run(["ingest", "src"]);
    let stderr = assert_exit(&out, 2);
    assert!(out.stdout.is_empty());
    assert!(stderr.contains("--version <X.Y.Z>"), "{stderr}");
}

/// `cestore --help` names every exit code of docs/exit-codes.md, and no other.
#[test]
fn help_lists_the_documented_exit_codes() {
    let doc = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/exit-codes.md"))
        .unwrap();
    let documented: Vec<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(' ').next())
        .filter(|c| c.parse::<u8>().is_ok())
        .map(String::from)
        .collect();
    assert_eq!(
        documented,
        ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]
    );
    let out = Command::new(util::bin()).arg("--help").output().unwrap();
    assert_ok(&out);
    let help = stdout(&out).replace('\n', " ");
    let line = &help[help.find("Exit codes:").expect("exit codes in --help")..];
    let listed: Vec<String> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| w.len() == 1)
        .map(String::from)
        .collect();
    assert_eq!(listed, documented, "{line}");
}

#[test]
fn messages_name_the_thing_and_the_next_step() {
    let (env, src, d) = util::plugin_store("src", "1.0.0");

    // discard of a directory that is not a recorded view.
    let out = env.run([os("discard"), src.as_os_str()]);
    let stderr = assert_exit(&out, 4);
    assert!(
        stderr.contains(&format!("'{}' is not a recorded view", src.display()))
            && stderr.contains("--force DIGEST"),
        "{stderr}"
    );
    // A shared view that does not exist yet.
    let out = env.run(["mounts", "--arm", "ce_review", "--digest", &d]);
    let stderr = assert_exit(&out, 4);
    assert!(
        stderr.contains("has no shared view") && stderr.contains(&format!("cestore path {d}")),
        "{stderr}"
    );
    // verify --tree on a file that exists is not "not found".
    let file = src.join(".claude-plugin/plugin.json");
    let out = env.run([os("verify"), os("--tree"), file.as_os_str(), os(&d)]);
    let stderr = assert_exit(&out, 2);
    assert!(
        stderr.contains("is not a directory") && !stderr.contains("not found"),
        "{stderr}"
    );
    // stage's version flag is --plugin-version: the message names no other.
    let out = env.run([
        os("stage"),
        os("--arm"),
        os("ce_review"),
        os("--plugin-dir"),
        src.as_os_str(),
        os("--plugin-version"),
        os("1.x"),
    ]);
    let stderr = assert_exit(&out, 3);
    assert!(
        stderr.contains("'1.x' is not an exact semantic version") && !stderr.contains("--version"),
        "{stderr}"
    );
}

#[test]
fn counts_agree_in_number() {
    let (env, d) = minimal_store();

    // One recorded view.
    let view = env.path("view");
    assert_ok(&env.run([os("checkout"), os(&d), view.as_os_str()]));
    let out = env.run(["rm", &d]);
    let stderr = assert_exit(&out, 6);
    assert!(stderr.contains("has 1 recorded view ("), "{stderr}");
    // One mount.
    let out = env.run(["stage", "--arm", "ce_review", "--digest", &d]);
    assert_ok(&out);
    assert!(
        stdout(&out).contains("ce_review: 1 mount\n"),
        "{}",
        stdout(&out)
    );
    // One problem, and one way a tree differs.
    util::chmod(&view.join("skills/ce-plan/SKILL.md"), 0o644);
    let out = env.run(["verify"]);
    assert_exit(&out, 1);
    assert!(stdout(&out).ends_with(": 1 problem\n"), "{}", stdout(&out));
    assert!(!stdout(&out).contains("1 problems"), "{}", stdout(&out));
    util::chmod(&view.join("skills/ce-plan/SKILL.md"), 0o444);
    let extra = env.path("extra");
    assert_ok(&env.run([
        os("checkout"),
        os(&d),
        extra.as_os_str(),
        os("--method"),
        os("copy"),
    ]));
    util::chmod(&extra, 0o755);
    write(&extra.join("stray.txt"), "x");
    let out = env.run([os("verify"), os("--tree"), extra.as_os_str(), os(&d)]);
    assert_exit(&out, 1);
    assert!(stdout(&out).contains("in 1 way\n"), "{}", stdout(&out));
}

/// `push D REG/REPO:TAG` publishes under both tags; pull takes either.
#[test]
fn push_publishes_a_human_tag_beside_the_digest_tag() {
    let Some(reg) = crate::remote::registry("push_publishes_a_human_tag_beside_the_digest_tag")
    else {
        return;
    };
    let (env, _, d) = util::plugin_store("src", "3.23.1");
    let repo = crate::remote::repo(&reg, "human-tag");
    let pushed = env.json([
        "push",
        &d,
        &format!("{repo}:3.23.1"),
        "--plain-http",
        "--json",
    ]);
    assert_eq!(pushed["reference"], format!("{repo}:sha256-{d}"));
    assert_eq!(pushed["tag_reference"], format!("{repo}:3.23.1"));
    for tag in ["3.23.1".to_string(), format!("sha256-{d}")] {
        let other = TestEnv::new();
        let pulled = other.json(["pull", &format!("{repo}:{tag}"), "--plain-http", "--json"]);
        assert_eq!(pulled["provenance"]["manifest_digest"], d.as_str(), "{tag}");
    }
    // Without a tag, only the digest tag.
    let pushed = env.json(["push", &d, &repo, "--plain-http", "--json"]);
    assert_eq!(pushed["tag_reference"], Value::Null);
    // A digest tag naming another snapshot is refused before any upload.
    let out = env.run([
        "push",
        &d,
        &format!("{repo}:sha256-{}", "1".repeat(64)),
        "--plain-http",
        "--json",
    ]);
    assert_exit(&out, 2);
    assert!(Path::new(&env.store).exists());
}

/// Options the library refuses are named by the command line's flags, on
/// stderr and in the JSON error alike.
#[test]
fn refused_options_are_named_by_their_flags() {
    let (env, _, d) = util::plugin_store("src", "1.0.0");
    let view = env.path("view");
    let results = env.path("results.jsonl");
    std::fs::write(&results, "{}\n").unwrap();
    let plain = env.path("plain");
    std::fs::create_dir(&plain).unwrap();
    let plain = std::fs::canonicalize(&plain).unwrap();
    let recorded = env.path("recorded");
    assert_ok(&env.run([os("checkout"), os(&d), recorded.as_os_str()]));
    let recorded = std::fs::canonicalize(&recorded).unwrap();
    let cases: [(Vec<&std::ffi::OsStr>, u8, &str, String); 11] = [
        (
            vec![
                os("checkout"),
                os(&d),
                view.as_os_str(),
                os("--method"),
                os("copy"),
                os("--require-hardlinks"),
            ],
            2,
            "usage",
            "--require-hardlinks cannot be met with --method copy".into(),
        ),
        (
            vec![os("import"), os("-"), os("--digest"), os("abc")],
            2,
            "usage",
            "--digest takes a full 64-hex digest: ".into(),
        ),
        (
            vec![
                os("audit"),
                results.as_os_str(),
                os("--registry"),
                os("127.0.0.1:1/repo:tag"),
            ],
            2,
            "usage",
            "--registry '127.0.0.1:1/repo:tag': give REGISTRY/REPOSITORY, without a tag or digest"
                .into(),
        ),
        (
            vec![os("find"), os("--object"), os("xyz")],
            2,
            "usage",
            "--object takes a SHA-256 or a unique prefix: ".into(),
        ),
        (
            vec![
                os("audit"),
                results.as_os_str(),
                os("--digest-field"),
                os("ce_plugin"),
                os("--version-field"),
                os("ce_plugin.version"),
            ],
            2,
            "usage",
            "--version-field 'ce_plugin.version' is, holds or lies inside another field \
             (--digest-field 'ce_plugin', --arm-field 'arm'); \
             the three fields must be distinct and not nested in each other"
                .into(),
        ),
        (
            vec![
                os("audit"),
                results.as_os_str(),
                os("--arm-field"),
                os("a..b"),
            ],
            2,
            "usage",
            "--arm-field 'a..b': a field is a key or a dotted path of keys".into(),
        ),
        (
            vec![
                os("stage"),
                os("--arm"),
                os("baseline"),
                os("--digest"),
                os(&d),
            ],
            3,
            "rejected",
            "--plugin-dir, --plugin-version and --digest require at least one ce_* arm".into(),
        ),
        (
            vec![os("stage"), os("--arm"), os("ce_review")],
            3,
            "rejected",
            "ce_* arms require both --plugin-dir and --plugin-version, \
             or a --digest already in the store"
                .into(),
        ),
        (
            vec![os("stage"), os("--arm"), os("mystery"), os("--strict-arms")],
            3,
            "rejected",
            "unknown arm 'mystery': it is neither a ce_* arm \
             (ce_workflow, ce_workflow_direct, ce_review) nor one given with --known-arm"
                .into(),
        ),
        (
            vec![os("discard"), plain.as_os_str()],
            4,
            "not-found",
            format!(
                "'{}' is not a recorded view; to remove a tree that is exactly a snapshot, \
                 pass --force DIGEST",
                plain.display()
            ),
        ),
        (
            vec![os("rm"), os(&d)],
            6,
            "conflict",
            format!(
                "{d} has 1 recorded view ({}); discard it first, or pass --force",
                recorded.display()
            ),
        ),
    ];
    for (args, code, kind, says) in cases {
        let out = env.run(&args);
        let stderr = assert_exit(&out, code.into());
        assert!(
            stderr.contains(&format!("cestore: error: {says}")),
            "{stderr}"
        );
        let mut json = args.clone();
        json.push(os("--json"));
        let v = parse_json(&env.run(&json));
        assert_eq!(v["error"]["kind"], kind, "{v}");
        assert_eq!(v["error"]["code"], code, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().starts_with(&says),
            "{v}"
        );
    }
    assert!(!view.exists());
}
