//! What a newcomer meets answers straight: a refusal names commands that
//! succeed when run as written, one snapshot has one ingest time whichever
//! command prints it, a report says what was done, a mistyped arm is
//! flagged, an unknown `@VERSION` lists the versions there are, and the
//! table of exit codes says what each kind means.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::util::*;

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The `cestore …` commands a text names between backticks, in order, as
/// their words (without `cestore`).
fn commands_in(text: &str) -> Vec<Vec<String>> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|quoted| quoted.strip_prefix("cestore "))
        .map(|command| command.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// Runs a command and, when it fails, every command its error and hint
/// name, literally, in order, each followed the same way: a refusal that
/// names no command is a dead end. Returns every command run.
fn follow(env: &TestEnv, args: &[String], depth: usize, ran: &mut Vec<String>) {
    assert!(depth < 8, "the hints go round in circles: {ran:#?}");
    let out = env.run(args);
    ran.push(format!("{} -> {:?}", args.join(" "), out.status.code()));
    if out.status.success() {
        return;
    }
    let said = stderr(&out);
    let next = commands_in(&said);
    assert!(
        !next.is_empty(),
        "a dead end: `cestore {}` refused and names no command to run:\n{said}\nso far: {ran:#?}",
        args.join(" ")
    );
    for command in next {
        follow(env, &command, depth + 1, ran);
    }
}

fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

#[test]
fn the_hints_of_rm_and_discard_lead_to_commands_that_succeed() {
    // rm of a snapshot with a shared view and a checkout, and discard of the
    // shared view, each followed hint by hint until nothing is left.
    for start in ["rm", "discard-shared"] {
        let (env, d) = minimal_store();
        let view = env.path("view");
        env.checkout_ok(&d, &view, &[]);
        let shared = env.json(["path", d.as_str(), "--json"])["path"]
            .as_str()
            .unwrap()
            .to_string();
        let first = match start {
            "rm" => words(&["rm", &d]),
            _ => words(&["discard", &shared]),
        };
        let mut ran = Vec::new();
        follow(&env, &first, 0, &mut ran);
        // The snapshot is forgotten, both views are gone, and so are its
        // objects once gc ran (one of the hints names it).
        assert_exit(&env.run(["show", d.as_str()]), 4);
        assert!(!exists(&view), "{start}: {ran:#?}");
        assert!(!exists(Path::new(&shared)), "{start}: {ran:#?}");
        let gc = env.json(["gc", "--dry-run", "--json"]);
        assert_eq!(gc["objects"], serde_json::json!([]), "{start}: {ran:#?}");
        assert!(ran.iter().any(|r| r.starts_with("gc ")), "{ran:#?}");
    }
}

#[test]
fn rm_forgets_a_snapshot_whose_only_view_is_the_shared_one() {
    let (env, d) = minimal_store();
    let shared = env.json(["path", d.as_str(), "--json"])["path"]
        .as_str()
        .unwrap()
        .to_string();
    let v = env.json(["rm", d.as_str(), "--json"]);
    assert_eq!(v["views_forgotten"], serde_json::json!([shared]));
    assert_eq!(v["shared_views"], serde_json::json!([shared]));
    // The shared view stays until gc removes it with the objects.
    assert!(Path::new(&shared).is_dir());
    let gc = env.json(["gc", "--json"]);
    assert_eq!(gc["shared_views"], serde_json::json!([shared]));
    assert!(!exists(Path::new(&shared)));
    let (code, report) = env.verify(&[]);
    assert_eq!(code, 0, "{report}");

    // The text says who removes it.
    let (env, d) = minimal_store();
    assert_ok(&env.run(["path", d.as_str()]));
    let out = env.run(["rm", d.as_str()]);
    assert_ok(&out);
    assert!(
        stdout(&out).contains("shared view no longer recorded (`cestore gc` removes it)"),
        "{}",
        stdout(&out)
    );
}

/// The `first_ingested_at` of `list`, `show` and the earliest `at` of `log`
/// for one snapshot, in JSON, after checking that the text forms print it too.
fn first_times(env: &TestEnv, d: &str) -> (String, String, String) {
    let list = env.json(["list", "--json"]);
    let listed = crate::util::array(&list["snapshots"])
        .iter()
        .find(|s| s["manifest_digest"] == d)
        .expect("listed")["first_ingested_at"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = env.json(["show", d, "--json"])["first_ingested_at"]
        .as_str()
        .unwrap()
        .to_string();
    let log = env.json(["log", d, "--json"]);
    let logged = crate::util::array(&log["ingests"])
        .iter()
        .map(|e| e["at"].as_str().unwrap().to_string())
        .min()
        .expect("an event");
    let text = |args: &[&str]| {
        let out = env.run(args);
        assert_ok(&out);
        stdout(&out)
    };
    let list_line = text(&["list"])
        .lines()
        .find(|l| l.starts_with(d))
        .expect("a list line")
        .to_string();
    assert!(list_line.contains(&listed), "{list_line} / {listed}");
    assert!(
        text(&["show", d])
            .lines()
            .any(|l| l.starts_with("first_ingested_at:") && l.ends_with(&shown)),
        "show's text gives {shown}"
    );
    assert!(
        text(&["log", d]).lines().any(|l| l.starts_with(&logged)),
        "log's text gives {logged}"
    );
    (listed, shown, logged)
}

#[test]
fn one_snapshot_has_one_first_ingest_time_in_every_command() {
    let (env, src) = crate::util::with_plugin("src", "1.0.0");
    // Enough files that the ingest takes a while between its event's time
    // and its commit.
    for i in 0..300 {
        write(
            &src.join(format!("skills/ce-plan/f{i:03}.md")),
            format!("{i}\n"),
        );
    }
    let d = env.ingest_digest(&src, "1.0.0");
    let (listed, shown, logged) = first_times(&env, &d);
    assert_eq!((&listed, &shown), (&logged, &logged));

    // Imported elsewhere, the snapshot keeps the time it was first
    // ingested (its origin), in every command there too.
    let bundle = env.path("b.cestore");
    assert_ok(&env.run(["export", d.as_str(), "-o", bundle.to_str().unwrap()]));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let other = TestEnv::new();
    assert_ok(&other.run(["import", bundle.to_str().unwrap()]));
    let there = first_times(&other, &d);
    assert_eq!(there, (logged.clone(), logged.clone(), logged.clone()));

    // Forgotten and ingested again, it was still first ingested then: the
    // log keeps the history.
    assert_ok(&env.run(["rm", d.as_str()]));
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(env.ingest_digest(&src, "1.0.0"), d);
    let again = first_times(&env, &d);
    assert_eq!(again, (logged.clone(), logged.clone(), logged));
}

#[test]
fn discard_spare_says_it_kept_a_spare() {
    let (env, d) = minimal_store();
    let view = env.path("view");
    env.checkout_ok(&d, &view, &[]);
    let out = env.run(["discard", "--spare", view.to_str().unwrap()]);
    assert_ok(&out);
    let text = stdout(&out);
    assert_eq!(
        text,
        format!(
            "kept {} ({d}) as a spare: moved whole into the store for the next checkout \
             of its snapshot\n",
            view.display()
        )
    );
    assert!(!text.contains("removed"), "{text}");
    assert_eq!(spares(&env.store, &d).len(), 1);

    // JSON: gone from its path (`removed`), and kept (`spare`).
    let again = env.path("again");
    env.checkout_ok(&d, &again, &[]);
    let v = env.json(["discard", "--spare", again.to_str().unwrap(), "--json"]);
    assert_eq!(
        (&v["removed"], &v["spare"]),
        (&Value::Bool(true), &Value::Bool(true))
    );
    assert!(!exists(&again));

    // A plain discard removes, and says so.
    let plain = env.path("plain");
    env.checkout_ok(&d, &plain, &[]);
    let out = env.run(["discard", plain.to_str().unwrap()]);
    assert_ok(&out);
    assert!(stdout(&out).starts_with("removed "), "{}", stdout(&out));
}

#[test]
fn a_mistyped_arm_draws_a_warning_and_strict_arms_refuse_it() {
    let (env, d) = minimal_store();
    let view = env.path("view");
    env.checkout_ok(&d, &view, &[]);
    let ce = "ce_workflow, ce_workflow_direct, ce_review";

    // mounts: the reference's answer (no mounts), and a warning naming the
    // arm, the known ones and the closest.
    let out = env.run([
        "mounts",
        "--arm",
        "ce_reviw",
        "--view",
        view.to_str().unwrap(),
        "--json",
    ]);
    assert_ok(&out);
    assert_eq!(parse_json(&out)["mounts"], serde_json::json!([]));
    let warned = stderr(&out);
    assert_eq!(warned.lines().count(), 1, "{warned}");
    assert!(
        warned.starts_with("cestore: warning: arm 'ce_reviw' is not a known arm (")
            && warned.contains(ce)
            && warned.contains("did you mean 'ce_review'?")
            && warned.contains("--strict-arms"),
        "{warned}"
    );

    // stage: an arm that is no name at all, with no close arm.
    let out = env.run(["stage", "--arm", "bad arm!", "--json"]);
    assert_ok(&out);
    let v = parse_json(&out);
    assert_eq!(v["arms"][0]["mounts"], serde_json::json!([]));
    let warned = stderr(&out);
    assert!(
        warned.contains("arm 'bad arm!' is not a known arm")
            && warned.contains("--known-arm 'bad arm!'")
            && !warned.contains("did you mean"),
        "{warned}"
    );

    // A plausible other arm passes in silence, as the harness's do.
    for args in [
        vec!["stage", "--arm", "baseline", "--arm", "gitnexus"],
        vec![
            "stage",
            "--arm",
            "ce_review",
            "--arm",
            "baseline",
            "--digest",
            d.as_str(),
        ],
    ] {
        let out = env.run(&args);
        assert_ok(&out);
        assert_eq!(stderr(&out), "", "{args:?}");
    }
    // Once the run names its other arms, a slip of one of them is flagged.
    let out = env.run(["stage", "--arm", "baselin", "--known-arm", "baseline"]);
    assert_ok(&out);
    let warned = stderr(&out);
    assert!(
        warned.contains("arm 'baselin' is not a known arm")
            && warned.contains(&format!("({ce}, baseline)"))
            && warned.contains("did you mean 'baseline'?"),
        "{warned}"
    );
    let out = env.run(["stage", "--arm", "baseline", "--known-arm", "baseline"]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "");

    // --strict-arms: refused, one JSON object, the closest arm named.
    for args in [
        vec!["stage", "--arm", "ce_reviw", "--strict-arms", "--json"],
        vec![
            "mounts",
            "--arm",
            "ce_reviw",
            "--view",
            view.to_str().unwrap(),
            "--strict-arms",
            "--json",
        ],
    ] {
        let out = env.run(&args);
        assert_exit(&out, 3);
        let v = parse_json(&out);
        assert_eq!(v["ok"], false);
        assert_eq!(v["error"]["kind"], "rejected");
        assert_eq!(v["error"]["rule"], "unknown-arm");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("'ce_reviw'")
                && message.contains(ce)
                && message.ends_with("did you mean 'ce_review'?"),
            "{message}"
        );
        assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    }
}

#[test]
fn an_unknown_version_lists_the_versions_there_are() {
    // A store that holds no snapshot (its only one forgotten).
    let (env, d) = minimal_store();
    assert_ok(&env.run(["rm", d.as_str()]));
    let out = env.run(["show", "@latest", "--json"]);
    assert_exit(&out, 4);
    let v = parse_json(&out);
    assert_eq!(v["error"]["versions"], serde_json::json!([]));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("the store holds no snapshot"),
        "{v}"
    );
    for version in ["1.0.0", "2.0.0", "1.1.0"] {
        let src = env.plugin(version, version);
        env.ingest(&src, version);
    }
    for args in [
        vec!["show", "@latest"],
        vec!["checkout", "@1.0", "x"],
        vec!["rm", "@2.0.0-rc.1"],
    ] {
        let out = env.run(&args);
        let said = assert_exit(&out, 4);
        let name = args[1];
        assert!(
            said.contains(&format!(
                "no snapshot in the store has the version '{}' ({name}); \
                 the versions it holds: 1.0.0, 2.0.0, 1.1.0",
                &name[1..]
            )),
            "{said}"
        );
        let mut json = args.clone();
        json.push("--json");
        let v = parse_json(&env.run(&json));
        assert_eq!(v["error"]["kind"], "unknown-digest");
        assert_eq!(
            v["error"]["versions"],
            serde_json::json!(["1.0.0", "2.0.0", "1.1.0"])
        );
    }
    // A version there is still names its snapshot.
    assert_ok(&env.run(["show", "@1.1.0"]));
}

#[test]
fn exit_codes_say_what_each_kind_means_in_words() {
    let (env, _) = minimal_store();
    let table = env.json(["exit-codes", "--json"]);
    let out = env.run(["exit-codes"]);
    assert_ok(&out);
    let text = stdout(&out);
    let mut meanings = BTreeSet::new();
    for e in table["exit_codes"].as_array().unwrap() {
        let (kind, code) = (e["kind"].as_str().unwrap(), e["code"].as_u64().unwrap());
        let meaning = e["meaning"].as_str().unwrap();
        // Words of its own: not the kind again, nor another kind's.
        assert_ne!(meaning, kind.replace('-', " "), "{kind}");
        assert!(meaning.split_whitespace().count() >= 4, "{kind}: {meaning}");
        assert!(
            meanings.insert(meaning.to_string()),
            "{kind}: {meaning} twice"
        );
        let line = text
            .lines()
            .find(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() > 2 && w[0] == code.to_string() && w[1] == kind
            })
            .unwrap_or_else(|| panic!("{kind} missing:\n{text}"));
        assert!(line.trim_end().ends_with(meaning), "{line}");
    }
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}
