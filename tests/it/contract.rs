//! The CLI's contract with a harness: a failed `stage` leaves nothing, stale
//! view records can be cleared, shared views are not discarded, drifted
//! objects are mended from their source, and `verify` tells damage from
//! garbage.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use sha2::Digest as _;

use crate::util::{
    self, assert_exit, assert_ok, chmod, mode_of, parse_json, remove_tree, store_files, write,
    TestEnv,
};

/// A harness root holding a GitNexus runtime at `version`.
fn harness(h: &Path, version: &str) {
    util::gitnexus_harness(h, version);
}

fn events(env: &TestEnv) -> Vec<Value> {
    if !env.store.exists() {
        return Vec::new();
    }
    env.json(["log", "--json"])["ingests"]
        .as_array()
        .unwrap()
        .clone()
}

fn stage(env: &TestEnv, release: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "stage",
        "--json",
        "--arm",
        "ce_review",
        "--plugin-dir",
        release.to_str().unwrap(),
        "--plugin-version",
        "1.0.0",
    ];
    args.extend_from_slice(extra);
    env.run(args)
}

fn views_dir_entries(env: &TestEnv) -> Vec<String> {
    fs::read_dir(env.store.join("views"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_failed_stage_leaves_no_view_no_record_and_no_event() {
    let (env, release) = util::with_plugin("release", "1.0.0");
    let wrong = env.path("wrong-harness");
    harness(&wrong, "0.0.1");
    fs::create_dir(env.path("run9")).unwrap();
    let dest = env.path("run9/ce");
    let dest_s = dest.to_str().unwrap().to_string();

    // A GitNexus runtime at another version: refused before anything changes.
    let gn = wrong.to_str().unwrap();
    let out = stage(&env, &release, &["--dest", &dest_s, "--gitnexus-root", gn]);
    assert_exit(&out, 3);
    assert_eq!(parse_json(&out)["error"]["kind"], "rejected");
    assert!(!dest.exists(), "a refused stage made its view");
    let out = stage(&env, &release, &["--gitnexus-root", gn]);
    assert_exit(&out, 3);
    assert_eq!(views_dir_entries(&env), Vec::<String>::new());
    assert_eq!(events(&env), Vec::<Value>::new());

    // A destination whose parent is missing, and one that exists.
    let orphan = env.path("nowhere/ce");
    let out = stage(&env, &release, &["--dest", orphan.to_str().unwrap()]);
    assert_exit(&out, 4);
    fs::create_dir(env.path("taken")).unwrap();
    let out = stage(
        &env,
        &release,
        &["--dest", env.path("taken").to_str().unwrap()],
    );
    assert_exit(&out, 6);
    assert_eq!(
        events(&env),
        Vec::<Value>::new(),
        "a failed stage recorded an event"
    );

    // A release the rules refuse, beside a runtime they accept: the
    // runtime, staged first, is taken back with its view.
    let good = env.path("harness");
    harness(&good, "1.6.9");
    let gn = good.to_str().unwrap();
    let link = release.join("skills/ce-plan/escape.md");
    std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
    let out = stage(&env, &release, &["--dest", &dest_s, "--gitnexus-root", gn]);
    assert_exit(&out, 3);
    assert!(!dest.exists(), "a refused stage made its view");
    assert_eq!(views_dir_entries(&env), Vec::<String>::new());
    assert_eq!(events(&env), Vec::<Value>::new());
    let listed = env.json(["list", "--json"]);
    assert_eq!(listed["snapshots"], serde_json::json!([]), "{listed}");
    fs::remove_file(&link).unwrap();

    // The retry, with everything right, works at once: the runtime is
    // recorded and viewed beside the release.
    let out = stage(&env, &release, &["--dest", &dest_s, "--gitnexus-root", gn]);
    assert_ok(&out);
    let v = parse_json(&out);
    assert_eq!(v["view"], dest_s.as_str());
    assert_eq!(events(&env).len(), 2);
    let runtime = v["gitnexus_runtime_manifest_digest"].as_str().unwrap();
    assert_eq!(views_dir_entries(&env), vec![runtime.to_string()]);
}

#[test]
fn a_stage_whose_view_fails_takes_its_ingest_back() {
    let (env, release) = util::with_plugin("release", "1.0.0");
    // The store exists (so that the catalogue can refuse view rows) but
    // does not hold the release yet.
    let other = env.plugin("other", "2.0.0");
    env.ingest(&other, "2.0.0");
    let trigger = "CREATE TRIGGER refuse_views BEFORE INSERT ON views \
                   BEGIN SELECT RAISE(FAIL, 'views refused'); END;";
    let out = Command::new("python3")
        .arg("-c")
        .arg("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.close()")
        .arg(env.store.join("catalogue.sqlite"))
        .arg(trigger)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let before = events(&env);
    let dest = env.path("view");
    let out = stage(&env, &release, &["--dest", dest.to_str().unwrap()]);
    assert_exit(&out, 7);
    assert!(!dest.exists());
    assert_eq!(
        events(&env),
        before,
        "the failed stage's ingest event stayed"
    );
    // The runtime's view refused: its ingest is taken back too, and the
    // release is not staged.
    let gn = env.path("harness");
    harness(&gn, "1.6.9");
    let out = stage(
        &env,
        &release,
        &[
            "--dest",
            dest.to_str().unwrap(),
            "--gitnexus-root",
            gn.to_str().unwrap(),
        ],
    );
    assert_exit(&out, 7);
    assert!(!dest.exists());
    assert_eq!(views_dir_entries(&env), Vec::<String>::new());
    assert_eq!(
        events(&env),
        before,
        "the failed stage's runtime event stayed"
    );
    let list = env.json(["list", "--json"]);
    assert_eq!(list["snapshots"].as_array().unwrap().len(), 1, "{list}");
    // gc takes what the taken-back ingest stored; the other release stays.
    assert_ok(&env.run(["gc"]));
    assert_ok(&env.run(["verify"]));
}

#[test]
fn a_stale_view_record_is_forgotten_by_discard_or_gc_whatever_happened_to_its_parents() {
    let (env, _, d) = util::plugin_store("release", "1.0.0");
    for (round, clear) in ["discard", "gc"].iter().enumerate() {
        let run = env.path(&format!("runs/r{round}"));
        fs::create_dir_all(&run).unwrap();
        let view = run.join("ce-plugin");
        assert_ok(&env.run(["checkout", d.as_str(), view.to_str().unwrap()]));
        remove_tree(&run);
        let v = env.run(["verify", "--json"]);
        assert_ok(&v);
        let report = parse_json(&v);
        assert!(
            crate::util::problems(&report)
                .iter()
                .any(|p| p["kind"] == "stale-view-record" && p["severity"] == "garbage"),
            "{report}"
        );
        assert_exit(&env.run(["rm", d.as_str()]), 6);
        match *clear {
            "discard" => {
                let out = env.run(["discard", view.to_str().unwrap(), "--json"]);
                assert_ok(&out);
                let v = parse_json(&out);
                assert_eq!(v["recorded"], true, "{v}");
                assert_eq!(v["removed"], false, "{v}");
            }
            _ => {
                let out = env.run(["gc", "--json"]);
                assert_ok(&out);
                let v = parse_json(&out);
                assert_eq!(
                    v["stale_view_records"],
                    serde_json::json!([view.to_str().unwrap()]),
                    "{v}"
                );
            }
        }
        let shown = env.json(["show", d.as_str(), "--json"]);
        assert_eq!(shown["views"], serde_json::json!([]), "{clear}");
    }
    assert_ok(&env.run(["rm", d.as_str()]));
}

#[test]
fn discard_refuses_the_shared_view() {
    let (env, _, d) = util::plugin_store("release", "1.0.0");
    let shared = env.json(["path", d.as_str(), "--json"])["path"]
        .as_str()
        .unwrap()
        .to_string();
    let out = env.run(["discard", shared.as_str(), "--json"]);
    let stderr = assert_exit(&out, 6);
    assert!(stderr.contains("cestore gc"), "{stderr}");
    assert!(Path::new(&shared).join("skills/ce-plan/SKILL.md").is_file());
    let out = env.run(["discard", shared.as_str(), "--force", d.as_str()]);
    assert_exit(&out, 6);
    assert!(Path::new(&shared).is_dir());
}

#[test]
fn strict_arms_refuse_a_typo_that_the_reference_lets_through() {
    let (env, release) = util::with_plugin("release", "1.0.0");
    let base = [
        "stage",
        "--json",
        "--plugin-dir",
        release.to_str().unwrap(),
        "--plugin-version",
        "1.0.0",
        "--arm",
        "ce_review",
        "--arm",
        "ce_reviw",
    ];
    // The reference's default: an unknown arm gets no plugin.
    let out = env.run(base);
    assert_ok(&out);
    let v = parse_json(&out);
    assert_eq!(v["arms"][1]["mounts"], serde_json::json!([]));
    let mut strict = base.to_vec();
    strict.push("--strict-arms");
    let out = env.run(&strict);
    assert_exit(&out, 3);
    let v = parse_json(&out);
    assert_eq!(v["error"]["rule"], "unknown-arm", "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("ce_reviw"));
    strict.extend(["--known-arm", "ce_reviw"]);
    assert_ok(&env.run(&strict));
}

/// Gives every directory and file of a tree write permission, as `chmod -R
/// u+w` does: through a view's hard links, that changes the objects.
fn chmod_r_u_w(path: &Path) {
    let status = Command::new("chmod")
        .arg("-R")
        .arg("u+w")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// The object a view's file `rel` is a hard link of, found by inode: its
/// bytes may have drifted from the object's name.
fn linked_object(env: &TestEnv, view: &Path, rel: &str) -> PathBuf {
    let ino = fs::metadata(view.join(rel)).unwrap().ino();
    let (name, _) = store_files(&env.store)
        .objects
        .into_iter()
        .find(|(_, (i, _))| *i == ino)
        .expect("an object linked to the view's file");
    env.store.join("objects").join(name)
}

#[test]
fn ingest_mends_objects_a_writable_view_let_drift() {
    let (env, release, d) = util::plugin_store("release", "1.0.0");
    let (view, skill) = view_and_skill_object(&env, &d);
    chmod_r_u_w(&view);
    assert_eq!(
        mode_of(&skill),
        0o644,
        "chmod -R through the view reached the object"
    );

    // Re-ingesting the source mends every mode, and says so.
    let report = env.ingest(&release, "1.0.0");
    let repaired = report["ingest"]["repaired"].as_array().unwrap();
    assert_eq!(repaired.len(), 4, "{report}");
    assert!(repaired.iter().all(|r| r["repair"] == "mode"), "{report}");
    assert_eq!(mode_of(&skill), 0o444);
    let log = env.json(["log", d.as_str(), "--json"]);
    let repairs = crate::util::array(&log["ingests"])
        .iter()
        .filter(|e| e["event"] == "repair")
        .count();
    assert_eq!(repairs, 4, "{log}");

    // Bytes changed through the (again writable) view are replaced from the source.
    chmod_r_u_w(&view);
    fs::write(view.join("skills/ce-plan/SKILL.md"), "# tampered\n").unwrap();
    let report = env.ingest(&release, "1.0.0");
    let repaired = report["ingest"]["repaired"].as_array().unwrap();
    assert!(
        repaired
            .iter()
            .any(|r| r["repair"] == "bytes" && r["object"] == skill.to_str().unwrap()),
        "{report}"
    );
    assert_eq!(fs::read(&skill).unwrap(), b"# ce-plan\n");
    assert_eq!(mode_of(&skill), 0o444);
    assert_ok(&env.run(["verify"]));
}

#[test]
fn checkout_sets_a_drifted_mode_back_and_refuses_changed_bytes() {
    let (env, _, d) = util::plugin_store("release", "1.0.0");
    let (view, skill) = view_and_skill_object(&env, &d);
    fs::set_permissions(
        view.join("skills/ce-plan/SKILL.md"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let second = env.path("second");
    let out = env.run(["checkout", d.as_str(), second.to_str().unwrap(), "--json"]);
    assert_ok(&out);
    let v = parse_json(&out);
    let restored = v["modes_restored"].as_array().unwrap();
    assert_eq!(restored.len(), 1, "{v}");
    assert!(restored[0]
        .as_str()
        .unwrap()
        .starts_with(skill.to_str().unwrap()));
    assert_eq!(mode_of(&skill), 0o444);

    // Same size, other bytes: refused, never handed out.
    fs::set_permissions(
        view.join("skills/ce-plan/SKILL.md"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    fs::write(view.join("skills/ce-plan/SKILL.md"), "# ce-PLAN\n").unwrap();
    let third = env.path("third");
    let out = env.run(["checkout", d.as_str(), third.to_str().unwrap(), "--json"]);
    assert_exit(&out, 1);
    assert!(!third.exists());
}

#[test]
fn verify_tells_damage_from_garbage_and_names_views_to_renew() {
    let (env, release) = util::with_plugin("release", "1.0.0");
    let other = env.plugin("other", "2.0.0");
    write(&other.join("skills/only-here.md"), "only in 2.0.0\n");
    let d = env.ingest_digest(&release, "1.0.0");
    let d2 = env.ingest_digest(&other, "2.0.0");

    // Garbage alone: one summary line, exit 0.
    assert_ok(&env.run(["rm", d2.as_str()]));
    let out = env.run(["verify"]);
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("garbage for `cestore gc`: "), "{text}");
    assert!(text.contains("orphan-object"), "{text}");
    assert_ok(&env.run(["gc"]));

    // Damage: exit 1; after --repair-from, the view that still links the
    // damaged inode is named, with the commands that renew it.
    let view = env.path("view");
    assert_ok(&env.run(["checkout", d.as_str(), view.to_str().unwrap()]));
    let object = linked_object(&env, &view, "skills/ce-plan/SKILL.md");
    fs::set_permissions(&object, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&object, "# ce-PLAN\n").unwrap();
    fs::set_permissions(&object, fs::Permissions::from_mode(0o444)).unwrap();
    assert_exit(&env.run(["verify"]), 1);
    let out = env.run([
        "verify",
        "--repair-from",
        release.to_str().unwrap(),
        "--json",
    ]);
    assert_ok(&out);
    let v = parse_json(&out);
    let stale = v["stale_views"].as_array().unwrap();
    assert_eq!(stale.len(), 1, "{v}");
    assert_eq!(stale[0]["view"], view.to_str().unwrap());
    let renew = stale[0]["renew"].as_str().unwrap();
    assert!(
        renew.contains("cestore discard") && renew.contains("cestore checkout"),
        "{renew}"
    );
}

#[test]
fn ingest_reports_what_the_filters_left_out_and_the_digest_does_not_change() {
    let (env, _, d) = util::plugin_store("plain", "1.0.0");
    let busy = env.plugin("busy", "1.0.0");
    write(&busy.join("skills/ce-plan/.env"), "KEY=1\n");
    write(&busy.join("skills/ce-plan/tests/t.md"), "t\n");
    write(&busy.join("skills/ce-plan/api-token.txt"), "t\n");
    write(&busy.join("README.md"), "readme\n");
    write(&busy.join("docs/guide.md"), "guide\n");
    write(&busy.join(".claude-plugin/extra.json"), "{}\n");
    let report = env.ingest(&busy, "1.0.0");
    assert_eq!(report["provenance"]["manifest_digest"], d.as_str());
    let left = crate::util::field_pairs(&report["ingest"]["left_out"], "reason", "path");
    let want: Vec<(String, String)> = [
        ("forbidden-part", "skills/ce-plan/tests"),
        ("secret", "skills/ce-plan/.env"),
        ("secret", "skills/ce-plan/api-token.txt"),
        ("outside-allowlist", ".claude-plugin/extra.json"),
        ("outside-allowlist", "README.md"),
        ("outside-allowlist", "docs"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    let mut want = want;
    want.sort();
    let mut left = left;
    left.sort();
    assert_eq!(left, want);
    let out = env.run(["ingest", busy.to_str().unwrap(), "--version", "1.0.0"]);
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "left out: 2 possible secrets, 1 forbidden part, 3 entries outside the allowlist"
        ),
        "{text}"
    );
}

/// The events of one snapshot, as (event, at, host, source) tuples.
fn history(env: &TestEnv, d: &str) -> Vec<(String, String, String, String)> {
    env.json(["log", d, "--json"])["ingests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let f = |k: &str| e[k].as_str().unwrap().to_string();
            (f("event"), f("at"), f("host"), f("source"))
        })
        .collect()
}

#[test]
fn an_imported_or_pulled_snapshot_keeps_where_it_was_first_ingested() {
    let (first, _, d) = util::plugin_store("release", "1.0.0");
    let original = history(&first, &d);
    assert_eq!(original.len(), 1);
    assert_eq!(original[0].0, "ingest");
    // Two events: the origin as first ingested, then `event` from `source`.
    let kept_origin = |got: &[(String, String, String, String)], event: &str, source: &str| {
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, "origin");
        assert_eq!(got[0].1, original[0].1);
        assert_eq!(got[0].2, original[0].2);
        assert_eq!(got[0].3, original[0].3);
        assert_eq!(got[1].0, event);
        assert!(got[1].3.starts_with(source), "{got:?}");
    };

    // Through a bundle, plain and compressed.
    for (n, zstd) in [(0, false), (1, true)] {
        let bundle = first.path(&format!("b{n}.tar"));
        let mut args = vec!["export", d.as_str(), "-o", bundle.to_str().unwrap()];
        if zstd {
            args.push("--zstd");
        }
        assert_ok(&first.run(&args));
        let second = TestEnv::new();
        assert_ok(&second.run(["import", bundle.to_str().unwrap()]));
        kept_origin(&history(&second, &d), "import", "bundle:");
        // Importing again adds an import event, not another origin.
        assert_ok(&second.run(["import", bundle.to_str().unwrap()]));
        assert_eq!(history(&second, &d).len(), 3);
        assert_ok(&second.run(["import", "--check", bundle.to_str().unwrap()]));
    }

    // Through a registry.
    let Some(registry) =
        crate::remote::registry("an_imported_or_pulled_snapshot_keeps_where_it_was_first_ingested")
    else {
        return;
    };
    let repo = crate::remote::repo(&registry, "origin");
    assert_ok(&first.run(["push", d.as_str(), repo.as_str(), "--plain-http"]));
    let third = TestEnv::new();
    let reference = format!("{repo}:sha256-{d}");
    assert_ok(&third.run(["pull", reference.as_str(), "--plain-http"]));
    kept_origin(&history(&third, &d), "pull", "oci://");
}

/// Sets a file's modification time to `reference`'s (`touch -r`).
fn touch_like(path: &Path, reference: &Path) {
    let out = Command::new("touch")
        .arg("-r")
        .arg(reference)
        .arg(path)
        .output()
        .expect("run touch");
    assert!(out.status.success(), "touch -r: {out:?}");
}

#[test]
fn every_ingest_reads_the_bytes_and_a_change_that_keeps_the_metadata_is_seen() {
    let (env, src) = util::with_plugin("src", "1.0.0");
    write(&src.join("assets/a.txt"), "alpha\n");
    write(&src.join("assets/b.txt"), "bravo\n");
    write(&src.join("skills/ce-work/empty.md"), "");
    let ingest = |what: &str| -> Value {
        let v = env.ingest(&src, "1.0.0");
        assert_eq!(v["ok"], true, "{what}: {v}");
        v
    };
    let digest_of_tree = || -> String {
        let v = env.json([
            "digest",
            src.to_str().unwrap(),
            "--version",
            "1.0.0",
            "--json",
        ]);
        v["provenance"]["manifest_digest"]
            .as_str()
            .expect("digest")
            .to_string()
    };
    // The report has no count of files taken on trust: there are none.
    let first = ingest("first");
    assert!(first["ingest"].get("hashes_known").is_none(), "{first}");
    let d0 = ingest("again")["provenance"]["manifest_digest"].clone();
    assert_eq!(d0, first["provenance"]["manifest_digest"]);

    // Same size, same modification time, other bytes: the digest is the
    // new bytes'.
    let a = src.join("assets/a.txt");
    let stamp = env.path("stamp");
    write(&stamp, "");
    touch_like(&stamp, &a);
    write(&a, "ALPHA\n");
    touch_like(&a, &stamp);
    let changed = ingest("changed");
    assert_ne!(changed["provenance"]["manifest_digest"], d0, "{changed}");
    assert_eq!(
        changed["provenance"]["manifest_digest"],
        digest_of_tree().as_str()
    );
    // And back: the old bytes give the old digest again.
    write(&a, "alpha\n");
    touch_like(&a, &stamp);
    assert_eq!(ingest("back")["provenance"]["manifest_digest"], d0);
    // A mode change is seen too (the exec bit is part of the digest).
    chmod(&src.join("assets/b.txt"), 0o755);
    let exec = ingest("exec");
    assert_eq!(
        exec["provenance"]["manifest_digest"],
        digest_of_tree().as_str()
    );
    assert_ne!(exec["provenance"]["manifest_digest"], d0);

    // A damaged object is mended from the file the ingest read.
    let object = env
        .store
        .join("objects")
        .join(&format!("{:x}", sha2::Sha256::digest(b"bravo\n"))[..2]);
    let object = fs::read_dir(&object)
        .expect("shard")
        .map(|e| e.expect("entry").path())
        .find(|p| p.to_string_lossy().ends_with(".x"))
        .expect("the object of assets/b.txt");
    chmod(&object, 0o644);
    let mended = ingest("mended");
    assert_eq!(
        mended["ingest"]["repaired"].as_array().map(Vec::len),
        Some(1),
        "{mended}"
    );
    assert_ok(&env.run(["verify"]));
}

#[test]
fn lowered_bounds_refuse_as_the_reference_does_on_ingest_digest_and_stage() {
    let (env, src) = util::with_plugin("src", "1.0.0");
    write(&src.join("assets/big.bin"), vec![7u8; 100]);
    write(&src.join("assets/a-rather-long-file-name.txt"), "x");
    // 6 files, at most 100 bytes each; the longest path is
    // `assets/a-rather-long-file-name.txt`, of 34 bytes.
    fn total(dir: &Path) -> u64 {
        fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").path())
            .map(|p| {
                if p.is_dir() {
                    total(&p)
                } else {
                    fs::metadata(&p).expect("stat").len()
                }
            })
            .sum()
    }
    let total = total(&src);
    let (below, at) = ((total - 1).to_string(), total.to_string());
    let cases = [
        ("--max-files", "5", "6", "too-many-files"),
        ("--max-file-bytes", "99", "100", "file-too-large"),
        (
            "--max-total-bytes",
            below.as_str(),
            at.as_str(),
            "too-many-bytes",
        ),
        ("--max-path-bytes", "33", "34", "path-too-long"),
    ];
    let src_arg = src.to_str().unwrap();
    for (flag, value, at, rule) in cases {
        let runs: [Vec<&str>; 3] = [
            vec!["ingest", src_arg, "--version", "1.0.0"],
            vec!["digest", src_arg, "--version", "1.0.0"],
            vec![
                "stage",
                "--arm",
                "ce_review",
                "--plugin-dir",
                src_arg,
                "--plugin-version",
                "1.0.0",
            ],
        ];
        for mut args in runs {
            let what = format!("{} {flag} {value}", args[0]);
            args.extend([flag, value, "--json"]);
            let out = env.run(&args);
            assert_exit(&out, 3);
            let v = parse_json(&out);
            assert_eq!(v["error"]["rule"], rule, "{what}: {v}");
            assert!(
                v["error"]["path"]
                    .as_str()
                    .is_some_and(|p| p.starts_with(src_arg)),
                "{what}: {v}"
            );
        }
        // Exactly at the release's count or size, it passes.
        let out = env.run(["digest", src_arg, "--version", "1.0.0", flag, at]);
        assert_ok(&out);
        // Above the reference's bound is a usage error: the bounds only go down.
        let out = env.run(["ingest", src_arg, "--version", "1.0.0", flag, "99999999999"]);
        assert_exit(&out, 2);
    }
    // Nothing was recorded by the refused ingests and stages.
    let list = env.json(["list", "--json"]);
    assert_eq!(
        list["snapshots"].as_array().map(Vec::len),
        Some(0),
        "{list}"
    );
}

#[test]
fn a_file_this_user_can_no_longer_read_is_refused_after_ingests_that_read_it() {
    let Some((env, src)) = util::root_env_with_plugin(
        "a_file_this_user_can_no_longer_read_is_refused_after_ingests_that_read_it",
    ) else {
        return;
    };
    let secret = src.join("skills/ce-plan/notes.md");
    write(&secret, "for group 1234 only\n");
    util::chown(&["-R"], "65534:65534", &env.base);
    util::chown(&[], "0:1234", &secret);
    chmod(&secret, 0o640);
    let as_nobody = |groups: &str, args: &[&str]| {
        let mut setpriv = Command::new("setpriv");
        setpriv
            .args(["--reuid=65534", "--regid=65534"])
            .args(if groups.is_empty() {
                vec!["--clear-groups".to_string()]
            } else {
                vec![format!("--groups={groups}")]
            });
        util::wrapped(setpriv, &env.store, args)
            .arg("--json")
            .output()
            .expect("run setpriv")
    };
    let src_arg = src.to_str().unwrap();
    let ingest = ["ingest", src_arg, "--version", "1.0.0"];
    for _ in 0..2 {
        assert_ok(&as_nobody("1234", &ingest));
    }
    let known = parse_json(&as_nobody("1234", &ingest));
    assert_eq!(known["ingest"]["already_present"], true, "{known}");
    // Without the group, the reference cannot read the file: nor can cestore.
    let out = as_nobody("", &ingest);
    assert_exit(&out, 3);
    let v = parse_json(&out);
    assert_eq!(v["error"]["rule"], "file-unreadable", "{v}");
    assert_eq!(v["error"]["path"], secret.to_str().unwrap(), "{v}");

    // A spare works for an unprivileged user too: the frozen root moves to
    // another parent and back.
    let d = known["provenance"]["manifest_digest"]
        .as_str()
        .unwrap()
        .to_string();
    let views = env.path("views");
    fs::create_dir(&views).unwrap();
    util::chown(&[], "65534:65534", &views);
    let first = views.join("first");
    let second = views.join("second");
    assert_ok(&as_nobody("", &["checkout", &d, first.to_str().unwrap()]));
    let out = as_nobody("", &["discard", first.to_str().unwrap(), "--spare"]);
    assert_ok(&out);
    assert_eq!(parse_json(&out)["spare"], true);
    let out = as_nobody("", &["checkout", &d, second.to_str().unwrap()]);
    assert_ok(&out);
    assert_eq!(parse_json(&out)["spare"], true);
    assert_eq!(
        fs::metadata(&second).unwrap().permissions().mode() & 0o7777,
        0o555
    );
    assert_ok(&as_nobody(
        "",
        &["verify", "--tree", second.to_str().unwrap(), &d],
    ));
}

/// A view of `d` checked out at `ENV/view`, and the object its
/// `skills/ce-plan/SKILL.md` is linked to.
fn view_and_skill_object(env: &TestEnv, d: &str) -> (PathBuf, PathBuf) {
    let view = env.path("view");
    assert_ok(&env.run(["checkout", d, view.to_str().unwrap()]));
    let skill = linked_object(env, &view, "skills/ce-plan/SKILL.md");
    (view, skill)
}
