//! Every refusal tells the next step, and the small things a newcomer meets on
//! a first day answer as they would expect.
//!
//! A hint is printed after the error, as `hint: ...` on stderr and as the
//! error object's `hint` in JSON; the error's message itself stays the one
//! the reference gives, so that the drop-in's messages do not change.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;
use std::process::Command;

use crate::util::*;

/// The error object of a failed `--json` command, after checking its exit code.
fn error_of(out: &std::process::Output, code: i32) -> serde_json::Value {
    assert_exit(out, code);
    let json = parse_json(out);
    assert_eq!(json["ok"], false, "{json}");
    json["error"].clone()
}

/// The line of stderr that starts with `hint: `, which must be there.
fn hint_line(stderr: &str) -> String {
    stderr
        .lines()
        .find(|l| l.starts_with("hint: "))
        .unwrap_or_else(|| panic!("no hint line in stderr:\n{stderr}"))
        .to_string()
}

#[test]
fn checkout_onto_a_recorded_view_says_to_discard_it() {
    let (env, _, d) = crate::util::plugin_store("src", "1.0.0");
    let view = env.path("view");
    env.checkout_ok(&d, &view, &[]);

    let out = env.run([os("checkout"), os(&d), view.as_os_str()]);
    let stderr = assert_exit(&out, 6);
    let hint = hint_line(&stderr);
    assert!(hint.contains("cestore discard"), "{hint}");
    assert!(hint.contains(&view.display().to_string()), "{hint}");
    assert!(hint.contains(&d), "{hint}");

    let out = env.run([os("checkout"), os(&d), view.as_os_str(), os("--json")]);
    let error = error_of(&out, 6);
    assert_eq!(error["kind"], "conflict");
    assert_eq!(error["path"], view.display().to_string());
    assert!(error["hint"].as_str().unwrap().contains("cestore discard"));

    // A directory that is no view: no word of discard, which would not take it.
    let mine = env.path("mine");
    fs::create_dir(&mine).unwrap();
    let out = env.run([os("checkout"), os(&d), mine.as_os_str(), os("--json")]);
    let error = error_of(&out, 6);
    assert_eq!(error["path"], mine.display().to_string());
    assert!(!error.to_string().contains("discard"), "{error}");
}

#[test]
fn a_missing_store_names_where_a_store_comes_from() {
    let env = TestEnv::new();
    for args in [vec!["list"], vec!["show", "b6d4"], vec!["log"]] {
        let out = env.run(&args);
        let stderr = assert_exit(&out, 4);
        let hint = hint_line(&stderr);
        for word in ["--store", "CESTORE_DIR", "cestore ingest"] {
            assert!(hint.contains(word), "{args:?}: {hint}");
        }
        let mut json_args = args.clone();
        json_args.push("--json");
        let error = error_of(&env.run(&json_args), 4);
        assert_eq!(error["path"], env.store.display().to_string());
        assert!(error["hint"].as_str().unwrap().contains("CESTORE_DIR"));
    }
}

#[test]
fn a_directory_that_is_not_the_plugins_root_is_told_so() {
    let env = TestEnv::new();
    let parent = env.path("parent");
    minimal_plugin(&parent.join("plugin"), "1.0.0");
    let manifest_only = env.path("manifest-dir-only");
    fs::create_dir_all(manifest_only.join(".claude-plugin")).unwrap();
    for (dir, rule) in [
        (&parent, "manifest-dir-unavailable"),
        (&manifest_only, "manifest-missing"),
    ] {
        for cmd in ["ingest", "digest"] {
            let out = env.run([os(cmd), dir.as_os_str(), os("--version"), os("1.0.0")]);
            let hint = hint_line(&assert_exit(&out, 3));
            assert!(hint.contains("plugin's root"), "{hint}");
            assert!(hint.contains(".claude-plugin/plugin.json"), "{hint}");
            let out = env.run([
                os(cmd),
                dir.as_os_str(),
                os("--version"),
                os("1.0.0"),
                os("--json"),
            ]);
            let error = error_of(&out, 3);
            assert_eq!(error["rule"], rule);
            // The reference's own words stay the message.
            assert!(!error["message"].as_str().unwrap().contains("plugin's root"));
            assert!(error["hint"].as_str().unwrap().contains("plugin's root"));
        }
    }
    // A release refused for another reason gets no such hint.
    let src = env.plugin("src", "1.0.0");
    fs::remove_dir_all(src.join("skills/ce-work")).unwrap();
    let out = env.run([os("ingest"), src.as_os_str(), os("--version"), os("1.0.0")]);
    assert!(!assert_exit(&out, 3).contains("plugin's root"));
}

/// A command that runs `cestore` as the unprivileged user `nobody` when the
/// tests run as root (where permission bits do not bind), else as this user.
fn unprivileged(env: &TestEnv, args: &[&OsStr]) -> Option<Command> {
    let root = rustix::process::geteuid().is_root();
    if !root {
        let mut cmd = env.cmd(args);
        cmd.arg("--trust-store");
        return Some(cmd);
    }
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(setpriv) = setpriv else {
        skip(
            "next_step::a_store_without_write_access_says_checkouts_need_it",
            "setpriv (util-linux) is not installed",
        );
        return None;
    };
    let mut cmd = Command::new(setpriv);
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(bin())
        .args(args)
        .arg("--store")
        .arg(&env.store)
        .arg("--trust-store")
        .env_remove("CESTORE_DIR");
    Some(cmd)
}

#[test]
fn a_store_without_write_access_says_checkouts_need_it() {
    let (env, _, d) = crate::util::plugin_store("src", "1.0.0");
    chmod(&env.base, 0o755);
    let dests = env.path("dests");
    fs::create_dir(&dests).unwrap();
    chmod(&dests, 0o777);
    // The store readable by all and writable by none.
    let walk = Command::new("chmod")
        .args(["-R", "a+rX,a-w"])
        .arg(&env.store)
        .status()
        .unwrap();
    assert!(walk.success());
    let dest = dests.join("view");
    let args = [os("checkout"), os(&d), dest.as_os_str()];
    let Some(mut cmd) = unprivileged(&env, &args) else {
        return;
    };
    let out = cmd.output().unwrap();
    let stderr = assert_exit(&out, 7);
    let work = env.store.join("tmp").display().to_string();
    assert!(
        !stderr.contains(&work),
        "an internal path is named:\n{stderr}"
    );
    assert!(
        stderr.contains(&env.store.display().to_string()),
        "{stderr}"
    );
    let hint = hint_line(&stderr);
    assert!(hint.contains("write access"), "{hint}");
    assert!(hint.contains("records"), "{hint}");
    assert!(!dest.exists());

    let mut json_args = args.to_vec();
    json_args.push(os("--json"));
    let mut cmd = unprivileged(&env, &json_args).unwrap();
    let out = cmd.output().unwrap();
    let error = error_of(&out, 7);
    assert_eq!(error["path"], env.store.display().to_string());
    assert!(error["hint"].as_str().unwrap().contains("write access"));
    Command::new("chmod")
        .args(["-R", "u+w"])
        .arg(&env.store)
        .status()
        .unwrap();
}

#[test]
fn every_error_about_one_path_carries_it() {
    let (env, _, d) = crate::util::plugin_store("src", "1.0.0");

    // A destination that exists.
    let taken = env.path("taken");
    fs::create_dir(&taken).unwrap();
    let out = env.run([os("checkout"), os(&d), taken.as_os_str(), os("--json")]);
    assert_eq!(error_of(&out, 6)["path"], taken.display().to_string());

    // A destination inside the store.
    let inside = env.store.join("mine");
    let out = env.run([os("checkout"), os(&d), inside.as_os_str(), os("--json")]);
    let error = error_of(&out, 6);
    assert_eq!(error["path"], inside.display().to_string());
    assert!(error["message"]
        .as_str()
        .unwrap()
        .contains("inside the store"));

    // A source that holds the store.
    let holder = env.plugin("holder", "1.0.0");
    let out = Command::new(bin())
        .args([
            os("ingest"),
            holder.as_os_str(),
            os("--version"),
            os("1.0.0"),
        ])
        .arg("--store")
        .arg(holder.join("store"))
        .arg("--json")
        .env_remove("CESTORE_DIR")
        .output()
        .unwrap();
    let error = error_of(&out, 6);
    assert_eq!(error["path"], holder.join("store").display().to_string());

    // `verify --tree` of a file.
    let file = env.path("file.txt");
    write(&file, "x\n");
    let out = env.run([
        os("verify"),
        os("--tree"),
        file.as_os_str(),
        os(&d),
        os("--json"),
    ]);
    let error = error_of(&out, 2);
    assert_eq!(error["path"], file.display().to_string());
}

#[test]
fn a_snapshot_is_named_by_version_and_a_short_prefix_is_refused() {
    let (env, _, d1) = crate::util::plugin_store("one", "1.0.0");
    let two = env.plugin("two", "2.0.0");
    let d2 = env.ingest_digest(&two, "2.0.0");

    // `@VERSION` wherever a digest is taken.
    let shown = env.json(["show", "@1.0.0", "--json"]);
    assert_eq!(shown["provenance"]["manifest_digest"], d1.as_str());
    let view = env.path("view");
    let out = env.run([os("checkout"), os("@2.0.0"), view.as_os_str(), os("--json")]);
    assert_ok(&out);
    assert_eq!(parse_json(&out)["manifest_digest"], d2.as_str());
    let diff = env.json(["diff", "@1.0.0", "@2.0.0", "--json"]);
    assert_eq!(diff["from"], d1.as_str());
    assert_eq!(diff["to"], d2.as_str());
    assert_ok(&env.run(["verify", "@1.0.0"]));
    let path = env.json(["path", "@1.0.0", "--json"]);
    assert_eq!(path["manifest_digest"], d1.as_str());
    let bundle = env.path("one.tar");
    assert_ok(&env.run([os("export"), os("@1.0.0"), os("-o"), bundle.as_os_str()]));

    // A version no snapshot has.
    let error = error_of(&env.run(["show", "@9.9.9", "--json"]), 4);
    assert_eq!(error["kind"], "unknown-digest");
    assert!(error["message"].as_str().unwrap().contains("9.9.9"));

    // Fewer than four hex digits, as git refuses them.
    for short in ["b", "b6", "b6d", &d1[..3]] {
        let error = error_of(&env.run(["show", short, "--json"]), 2);
        assert_eq!(error["kind"], "usage");
        assert!(error["message"].as_str().unwrap().contains("4"), "{error}");
    }
    assert_ok(&env.run(["show", &d1[..4]]));
}

#[test]
fn an_ambiguous_name_lists_each_snapshot_with_its_version_and_time() {
    let env = TestEnv::new();
    let [(a_src, a), (b_src, b)] = sharing_four_digits(&env, "3.0.0", "3.1.0");
    assert_eq!(env.ingest_digest(&a_src, "3.0.0"), a);
    assert_eq!(env.ingest_digest(&b_src, "3.1.0"), b);
    let prefix = &a[..4];
    let out = env.run(["show", prefix]);
    let stderr = assert_exit(&out, 5);
    for word in [&a, &b, "3.0.0", "3.1.0"] {
        assert!(stderr.contains(word), "{word}: {stderr}");
    }
    let error = error_of(&env.run(["show", prefix, "--json"]), 5);
    assert_eq!(error["kind"], "ambiguous-digest");
    let matches = error["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 2, "{error}");
    for m in matches {
        assert!(m["manifest_digest"] == a.as_str() || m["manifest_digest"] == b.as_str());
        assert!(m["version"] == "3.0.0" || m["version"] == "3.1.0");
        assert!(m["ingested_at"].as_str().unwrap().ends_with('Z'));
    }

    // Two snapshots of one version: `@VERSION` is ambiguous the same way.
    let again = env.plugin("again", "3.0.0");
    write(&again.join("skills/ce-work/extra.md"), "extra\n");
    let c = env.ingest_digest(&again, "3.0.0");
    let out = env.run(["checkout", "@3.0.0", env.path("v").to_str().unwrap()]);
    let stderr = assert_exit(&out, 5);
    assert!(stderr.contains(&a) && stderr.contains(&c), "{stderr}");
    assert!(!env.path("v").exists());
}

#[test]
fn find_shows_both_forms_and_a_search_that_finds_nothing_exits_1() {
    let (env, src) = crate::util::with_plugin("src", "1.0.0");
    env.ingest_digest(&src, "1.0.0");

    let out = env.run(["find"]);
    let stderr = assert_exit(&out, 2);
    assert!(
        stderr.contains("--object") && stderr.contains("--path"),
        "{stderr}"
    );

    let out = env.run(["find", "--path", "skills/no-such/SKILL.md", "--json"]);
    assert_exit(&out, 1);
    let json = parse_json(&out);
    assert_eq!(json["matches"], serde_json::json!([]));
    let out = env.run(["find", "--object", "0000000000000000", "--json"]);
    assert_exit(&out, 1);
    assert_eq!(parse_json(&out)["matches"], serde_json::json!([]));
    let out = env.run(["find", "--path", "skills/ce-plan/SKILL.md"]);
    assert_ok(&out);
}

#[test]
fn help_of_help_prints_help() {
    let env = TestEnv::new();
    for args in [
        vec!["help", "--help"],
        vec!["help", "-h"],
        vec!["help", "help"],
    ] {
        let out = env.run(&args);
        assert_ok(&out);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("Usage: cestore"), "{args:?}: {stdout}");
    }
}

#[test]
fn mounts_takes_strict_arms_as_stage_does() {
    let env = TestEnv::new();
    let view = env.path("view");
    fs::create_dir(&view).unwrap();
    let base = |arm: &str| {
        vec![
            "mounts".to_string(),
            "--arm".into(),
            arm.into(),
            "--view".into(),
            view.display().to_string(),
            "--unchecked".into(),
        ]
    };
    // A typo of a CE arm: no plugin without --strict-arms, refused with it.
    assert_ok(&env.run(base("ce_reviw")));
    let mut strict = base("ce_reviw");
    strict.extend(["--strict-arms".into(), "--json".into()]);
    let error = error_of(&env.run(&strict), 3);
    assert_eq!(error["rule"], "unknown-arm");
    // The same refusal as stage's.
    let stage = env.run(["stage", "--arm", "ce_reviw", "--strict-arms", "--json"]);
    let stage_error = error_of(&stage, 3);
    assert_eq!(stage_error["message"], error["message"]);
    // A known non-CE arm passes, with --known-arm as with stage.
    let mut known = base("baseline");
    known.extend([
        "--strict-arms".into(),
        "--known-arm".into(),
        "baseline".into(),
    ]);
    assert_ok(&env.run(&known));
    let mut unknown = base("baseline");
    unknown.push("--strict-arms".into());
    assert_exit(&env.run(&unknown), 3);
    let mut ce = base("ce_review");
    ce.push("--strict-arms".into());
    assert_ok(&env.run(&ce));
}

#[test]
fn log_shows_each_events_kind() {
    let (env, _, d) = crate::util::plugin_store("src", "1.0.0");
    let bundle = env.path("b.tar");
    assert_ok(&env.run([os("export"), os(&d), os("-o"), bundle.as_os_str()]));
    let other = env.path("other-store");
    let in_other = |args: &[&OsStr]| {
        Command::new(bin())
            .args(args)
            .arg("--store")
            .arg(&other)
            .env_remove("CESTORE_DIR")
            .output()
            .unwrap()
    };
    assert_ok(&in_other(&[os("import"), bundle.as_os_str()]));
    fs::remove_file(other.join("catalogue.sqlite")).unwrap();
    assert_ok(&in_other(&[os("recover")]));

    let out = env.run(["log"]);
    assert_ok(&out);
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(log.lines().all(|l| l.contains(" ingest ")), "{log}");
    let out = in_other(&[os("log")]);
    assert_ok(&out);
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(log.contains(" recovered "), "{log}");
    let out = in_other(&[os("log"), os("--json")]);
    assert_ok(&out);
    let json = parse_json(&out);
    let kinds = crate::util::field_strs(&json["ingests"], "event");
    assert!(!kinds.is_empty());
    for kind in kinds {
        assert!(log.contains(&format!(" {kind} ")), "{kind}: {log}");
    }
}

#[test]
fn verify_and_diff_end_with_a_summary_line() {
    let (env, _, d1) = crate::util::plugin_store("one", "1.0.0");
    let two = env.plugin("two", "1.1.0");
    write(&two.join("skills/ce-plan/more.md"), "more\n");
    write(&two.join("skills/ce-work/SKILL.md"), "# changed\n");
    let d2 = env.ingest_digest(&two, "1.1.0");

    let last_line = |args: &[&str]| {
        let out = env.run(args);
        assert_ok(&out);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        stdout.lines().last().unwrap_or_default().to_string()
    };
    let verified = last_line(&["verify"]);
    assert!(verified.contains("2 snapshots"), "{verified}");
    assert!(verified.contains("no problems"), "{verified}");
    let verified = last_line(&["verify", &d1]);
    assert!(verified.contains("1 snapshot"), "{verified}");
    let diffed = last_line(&["diff", &d1, &d2]);
    for part in ["1 added", "0 removed", "2 changed"] {
        assert!(diffed.contains(part), "{part}: {diffed}");
    }
    let same = last_line(&["diff", &d1, &d1]);
    assert!(same.contains("no differences"), "{same}");
}

#[test]
fn show_marks_a_view_gone_from_disk() {
    let (env, _, d) = crate::util::plugin_store("src", "1.0.0");
    let kept = env.path("kept");
    let gone = env.path("gone");
    env.checkout_ok(&d, &kept, &[]);
    env.checkout_ok(&d, &gone, &[]);
    remove_tree(&gone);

    let out = env.run(["show", &d]);
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let line_of = |p: &Path| {
        stdout
            .lines()
            .find(|l| l.contains(&p.display().to_string()))
            .unwrap_or_else(|| panic!("{} not shown:\n{stdout}", p.display()))
            .to_string()
    };
    assert!(line_of(&gone).contains("gone from disk"), "{stdout}");
    assert!(!line_of(&kept).contains("gone"), "{stdout}");
    let json = env.json(["show", &d, "--json"]);
    for view in json["views"].as_array().unwrap() {
        let on_disk = view["path"] != gone.display().to_string();
        assert_eq!(view["on_disk"], on_disk, "{view}");
    }
}
