//! Trust for tree snapshots: `ingest --profile ... --sign-with`, `sign`
//! and `attestations` on the tree kinds, `audit` of the harness's tree
//! digest fields, and `ingest --help` pointing at `--profile`.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::util::*;

/// The four harness digests of one task, as `ingest --profile task`
/// reported them.
struct Task {
    snapshot: String,
    manifest: String,
    dependency_manifest: String,
    dependency_content: String,
}

/// A repository with a `sandbox_copy` root and a dependency, and its task
/// file; returns the repository, the task file and the commit.
fn task_repo(env: &TestEnv) -> (PathBuf, PathBuf, String) {
    let repo = env.path("repo");
    write(&repo.join("src/a.txt"), "alpha\n");
    write(&repo.join("deps/lib/x.js"), "module.exports = 1;\n");
    let task = env.path("task.json");
    write(
        &task,
        json!({
            "sandbox_copy": ["src"],
            "sandbox_dependencies": [{"source": "deps/lib", "target": "node_modules/lib"}],
        })
        .to_string(),
    );
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "task"]);
    let sha = git(&["rev-parse", "HEAD"]);
    (repo, task, sha)
}

/// Ingests the task (with `extra` flags) and returns its four digests.
fn ingest_task(env: &TestEnv, extra: &[&str]) -> Task {
    let (repo, task, sha) = task_repo(env);
    let mut args = vec![
        "--json".to_string(),
        "ingest".into(),
        "--profile".into(),
        "task".into(),
        s(&repo),
        "--task".into(),
        s(&task),
        "--resolved-sha".into(),
        sha,
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let out = env.run(&args);
    assert_exit(&out, 0);
    let r = parse_json(&out);
    let field = |k: &str| {
        r[k].as_str()
            .unwrap_or_else(|| panic!("{k}: {r}"))
            .to_string()
    };
    Task {
        snapshot: field("digest"),
        manifest: field("manifest_digest"),
        dependency_manifest: field("dependency_manifest_digest"),
        dependency_content: field("dependency_content_digest"),
    }
}

/// A key pair made by `key generate`: the private and the public key file.
fn key(env: &TestEnv) -> (String, String) {
    let file = env.path("signer.pem");
    let out = env.run(["key", "generate", &s(&file)]);
    assert_exit(&out, 0);
    (s(&file), format!("{}.pub", s(&file)))
}

/// The attestations of `digest` trusted under `public`: each one's subject
/// digests and whether it verified (each subject named by the snapshot's
/// kind, a tree kind having no version).
fn attested(env: &TestEnv, digest: &str, public: &str) -> Vec<(Vec<String>, bool)> {
    let r = env.json(["--json", "attestations", "--trusted-key", public, digest]);
    assert_eq!(r["manifest_digest"], digest, "{r}");
    r["attestations"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|a| {
            let payload = a["envelope"]["payload"].as_str().unwrap();
            let statement: Value = serde_json::from_slice(&base64_decode(payload)).unwrap();
            let subjects = statement["subject"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["digest"]["sha256"].as_str().unwrap().to_string())
                .collect();
            let name = a["subjects"].as_array().unwrap();
            assert!(
                name.iter()
                    .all(|n| ["tree", "dependencies", "task"].contains(&n.as_str().unwrap())),
                "{a}"
            );
            (subjects, a["verified"]["ok"] == true)
        })
        .collect()
}

/// Standard base64 (with padding), as DSSE envelopes carry payloads.
fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.bytes().filter(|&c| c != b'=') {
        let v = ALPHABET.iter().position(|&a| a == c).expect("base64") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// `ingest --profile task --sign-with KEY` signs the tree, the dependency
/// list and the task, each attestation naming the harness's digest of its
/// kind; `verify --trusted-key` checks them; a missing key refuses the
/// ingest before anything is stored.
#[test]
fn ingest_profile_signs_every_snapshot_it_records() {
    let env = TestEnv::new();
    let (private, public) = key(&env);
    let t = ingest_task(&env, &["--sign-with", &private]);
    for digest in [&t.snapshot, &t.manifest, &t.dependency_manifest] {
        assert_eq!(
            attested(&env, digest, &public),
            vec![(vec![digest.clone()], true)],
            "{digest}"
        );
    }
    let (code, report) = env.verify(&["--trusted-key", &public]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["attestations_verified"], 3, "{report}");

    let fresh = TestEnv::new();
    let (repo, _, _) = task_repo(&fresh);
    let missing = s(&fresh.path("absent.pem"));
    let out = fresh.run([
        "--json",
        "ingest",
        "--profile",
        "tree",
        &s(&repo),
        "--copy",
        "src",
        "--sign-with",
        &missing,
    ]);
    assert_exit(&out, 4);
    assert!(!exists(&fresh.store), "a refused ingest made the store");
}

/// `sign` and `attestations` take a tree, a dependency list (by its digest
/// or its content digest) and a task as they take a plugin snapshot: each
/// attestation vouches for exactly the digest signed, and `export` and
/// `import --trusted-key` carry it.
#[test]
fn sign_and_attestations_work_on_every_tree_kind() {
    let env = TestEnv::new();
    let (private, public) = key(&env);
    let t = ingest_task(&env, &[]);
    for digest in [&t.snapshot, &t.manifest, &t.dependency_manifest] {
        assert!(attested(&env, digest, &public).is_empty());
        let r = env.json(["--json", "sign", "--key", &private, digest]);
        assert_eq!(r["manifest_digest"], digest.as_str(), "{r}");
        assert_eq!(r["new"], true, "{r}");
        assert_eq!(
            attested(&env, digest, &public),
            vec![(vec![digest.clone()], true)]
        );
    }
    // The content digest finds the dependency list, already signed.
    let r = env.json(["--json", "sign", "--key", &private, &t.dependency_content]);
    assert_eq!(r["manifest_digest"], t.dependency_manifest.as_str(), "{r}");
    assert_eq!(r["new"], false, "{r}");

    // A bundle carries each kind's attestation to a store that trusts the
    // key, which takes it only so.
    let other = TestEnv::new();
    for (n, digest) in [&t.manifest, &t.dependency_manifest, &t.snapshot]
        .into_iter()
        .enumerate()
    {
        let bundle = s(&env.path(&format!("{n}.tar")));
        assert_exit(&env.run(["export", digest, "-o", &bundle]), 0);
        let out = other.run(["--json", "import", &bundle, "--trusted-key", &public]);
        assert_exit(&out, 0);
        assert_eq!(
            attested(&other, digest, &public),
            vec![(vec![digest.clone()], true)]
        );
    }
}

/// A results file of `rows` (one JSON object a line) at `rel`.
fn results(env: &TestEnv, rel: &str, rows: &[Value]) -> String {
    let file = env.path(rel);
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    write(&file, text);
    s(&file)
}

/// A row of a non-CE arm naming the task's four digests.
fn task_row(t: &Task) -> Value {
    json!({
        "arm": "baseline",
        "task_asset_snapshot_digest": t.snapshot,
        "task_asset_manifest_digest": t.manifest,
        "sandbox_dependency_manifest_digest": t.dependency_manifest,
        "sandbox_dependency_content_digest": t.dependency_content,
    })
}

/// `audit --json` of `file` (with `extra` flags): its exit code and report.
fn audit(env: &TestEnv, file: &str, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["--json", "audit", file];
    args.extend_from_slice(extra);
    let out = env.run(&args);
    (out.status.code().unwrap_or(-1), parse_json(&out))
}

/// Each tree digest audited: `(field, digest, status, profile)`.
fn tree_statuses(report: &Value) -> Vec<(String, String, String, Value)> {
    report["tree_digests"]
        .as_array()
        .unwrap_or_else(|| panic!("{report}"))
        .iter()
        .map(|d| {
            (
                d["field"].as_str().unwrap().to_string(),
                d["digest"].as_str().unwrap().to_string(),
                d["status"].as_str().unwrap().to_string(),
                d["profile"].clone(),
            )
        })
        .collect()
}

fn tree(
    field: &str,
    digest: &str,
    status: &str,
    profile: Value,
) -> (String, String, String, Value) {
    (field.into(), digest.into(), status.into(), profile)
}

/// Rows naming a task's real digests audit as known, each with its
/// profile (the content digest through the catalogue's content-digest
/// index, as `show` finds it), and pass; a forged digest is unknown, a
/// digest of another profile than its field names is a mismatch, a value
/// that is no digest is a row problem, and each fails the audit.
#[test]
fn audit_looks_every_tree_digest_of_a_row_up_in_the_store() {
    let env = TestEnv::new();
    let t = ingest_task(&env, &[]);
    let good = results(&env, "good.jsonl", &[task_row(&t)]);
    let (code, r) = audit(&env, &good, &[]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["passed"], true, "{r}");
    assert_eq!(
        tree_statuses(&r),
        vec![
            tree(
                "task_asset_snapshot_digest",
                &t.snapshot,
                "ok",
                json!("task")
            ),
            tree(
                "task_asset_manifest_digest",
                &t.manifest,
                "ok",
                json!("tree")
            ),
            tree(
                "sandbox_dependency_manifest_digest",
                &t.dependency_manifest,
                "ok",
                json!("dependencies")
            ),
            tree(
                "sandbox_dependency_content_digest",
                &t.dependency_content,
                "ok",
                json!("dependencies")
            ),
        ]
    );
    assert_eq!(
        r["tree_digests"][3]["snapshot"],
        t.dependency_manifest.as_str()
    );
    assert_eq!(r["tree_digests"][0]["first"]["line"], 1);

    let forged = "f".repeat(64);
    let bad = results(
        &env,
        "bad.jsonl",
        &[
            task_row(&t),
            json!({
                "arm": "baseline",
                "task_asset_snapshot_digest": forged,
                "task_asset_manifest_digest": t.snapshot,
                "sandbox_dependency_manifest_digest": null,
                "sandbox_dependency_content_digest": "not-a-digest",
            }),
        ],
    );
    let (code, r) = audit(&env, &bad, &[]);
    assert_eq!(code, 1, "{r}");
    assert_eq!(r["passed"], false, "{r}");
    let statuses = tree_statuses(&r);
    assert!(statuses.contains(&tree(
        "task_asset_snapshot_digest",
        &forged,
        "unknown",
        Value::Null
    )));
    assert!(statuses.contains(&tree(
        "task_asset_manifest_digest",
        &t.snapshot,
        "profile-mismatch",
        json!("task")
    )));
    assert_eq!(statuses.len(), 6, "{r}");
    assert_eq!(r["row_problem_count"], 1, "{r}");
    assert_eq!(r["row_problems"][0]["kind"], "malformed-digest", "{r}");
    assert_eq!(r["row_problems"][0]["line"], 2, "{r}");
    let verdict = r["verdict"].as_str().unwrap();
    assert!(
        verdict.contains("6 tree digests (4 ok, 1 unknown, 1 profile-mismatch)"),
        "{verdict}"
    );
    let text = env.run(["audit", &bad]);
    assert_exit(&text, 1);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("task_asset_snapshot_digest  {forged}  unknown")),
        "{text}"
    );
}

/// With `--trusted-key`, a tree digest no trusted attestation vouches for
/// is `unsigned` and fails; once signed (the content digest through its
/// dependency list), the same rows pass.
#[test]
fn audit_with_a_trusted_key_asks_every_tree_digest_for_a_signature() {
    let env = TestEnv::new();
    let (private, public) = key(&env);
    let t = ingest_task(&env, &[]);
    let file = results(&env, "r.jsonl", &[task_row(&t)]);
    let (code, r) = audit(&env, &file, &["--trusted-key", &public]);
    assert_eq!(code, 1, "{r}");
    assert!(
        tree_statuses(&r).iter().all(|(_, _, s, _)| s == "unsigned"),
        "{r}"
    );
    for digest in [&t.snapshot, &t.manifest, &t.dependency_manifest] {
        assert_exit(&env.run(["sign", "--key", &private, digest]), 0);
    }
    let (code, r) = audit(&env, &file, &["--trusted-key", &public]);
    assert_eq!(code, 0, "{r}");
    assert!(
        tree_statuses(&r).iter().all(|(_, _, s, _)| s == "ok"),
        "{r}"
    );
    assert_eq!(r["tree_digests"][3]["signature"]["status"], "signed", "{r}");
}

/// A CE row's audit is the same whether or not the row also carries the
/// tree digest fields: the CE digests, statuses and verdict's CE part do
/// not change, and a results file without them has an empty
/// `tree_digests`.
#[test]
fn audit_of_ce_digests_is_unchanged_by_tree_fields() {
    let env = TestEnv::new();
    let src = env.plugin("plugin", "1.0.0");
    let ce = env.ingest_digest(&src, "1.0.0");
    let t = ingest_task(&env, &[]);
    let ce_row = json!({
        "arm": "ce_workflow",
        "ce_plugin_manifest_digest": ce,
        "ce_plugin_version": "1.0.0",
    });
    let mut both = task_row(&t);
    for (k, v) in ce_row.as_object().unwrap() {
        both[k] = v.clone();
    }
    let plain = results(&env, "plain.jsonl", &[ce_row]);
    let with = results(&env, "with.jsonl", &[both]);
    let (code, p) = audit(&env, &plain, &[]);
    assert_eq!(code, 0, "{p}");
    assert_eq!(p["tree_digests"], json!([]), "{p}");
    assert_eq!(
        p["verdict"],
        "PASS: 1 digest (1 ok), 0 row problems, 0 malformed lines in 1 row"
    );
    let (code, w) = audit(&env, &with, &[]);
    assert_eq!(code, 0, "{w}");
    let strip = |mut d: Value| {
        for at in ["first", "last"] {
            d[at]["file"] = Value::Null;
        }
        for a in d["arms"].as_array_mut().unwrap() {
            a["first"]["file"] = Value::Null;
        }
        for v in d["claimed_versions"].as_array_mut().unwrap() {
            v["first"]["file"] = Value::Null;
        }
        d
    };
    assert_eq!(
        strip(p["digests"][0].clone()),
        strip(w["digests"][0].clone())
    );
    assert_eq!(tree_statuses(&w).len(), 4, "{w}");
}

/// `ingest --help` (and `help ingest`, and the command list of `help`)
/// says that `--profile tree|dependency|task|runtime` exists and how to get its own
/// help; that help, reached through `ingest --profile tree --help`, lists
/// the profile's flags, `--sign-with` among them.
#[test]
fn ingest_help_points_at_the_profile_forms() {
    let env = TestEnv::new();
    let text = |args: &[&str]| {
        let out = env.run(args);
        assert_exit(&out, 0);
        String::from_utf8(out.stdout).unwrap()
    };
    for help in [text(&["ingest", "--help"]), text(&["ingest", "-h"])] {
        assert!(
            help.contains("`cestore ingest --profile tree|dependency|task|runtime REPO ...`"),
            "{help}"
        );
        assert!(
            help.contains("`cestore ingest --profile tree --help`"),
            "{help}"
        );
    }
    let json = env.json(["--json", "help", "ingest"]);
    assert!(
        json["help"]
            .as_str()
            .unwrap()
            .contains("cestore ingest --profile tree --help"),
        "{json}"
    );
    let list = text(&["help"]);
    let line = list
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("ingest "))
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        line.contains("--profile") && line.contains("tree|dependency|task|runtime"),
        "{list}"
    );
    for profile in ["tree", "dependency", "task", "runtime"] {
        let own = text(&["ingest", "--profile", profile, "--help"]);
        assert!(
            own.contains("Usage: cestore ingest --profile <tree|dependency|task|runtime> <REPO>"),
            "{own}"
        );
        for flag in [
            "--copy",
            "--source",
            "--task",
            "--resolved-sha",
            "--sign-with",
        ] {
            assert!(own.contains(flag), "{flag}: {own}");
        }
    }
}

/// `audit --verify` re-hashes the tree snapshots the rows name with the CE
/// ones: an object of the tree changed in place makes its
/// `task_asset_manifest_digest` `damaged`, naming the object, and fails the
/// audit; the untouched dependency list stays `ok`.
#[test]
fn audit_verify_rehashes_the_tree_snapshots_the_rows_name() {
    let env = TestEnv::new();
    let t = ingest_task(&env, &[]);
    let file = results(&env, "r.jsonl", &[task_row(&t)]);
    let (code, r) = audit(&env, &file, &["--verify"]);
    assert_eq!(code, 0, "{r}");
    let object = object_path(&env.store, &sha_hex(b"alpha\n"), false);
    chmod(&object, 0o644);
    write(&object, "alphA\n");
    chmod(&object, 0o444);
    let (code, r) = audit(&env, &file, &["--verify"]);
    assert_eq!(code, 1, "{r}");
    let by_field = |f: &str| {
        r["tree_digests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["field"] == f)
            .unwrap_or_else(|| panic!("{f}: {r}"))
            .clone()
    };
    let tree = by_field("task_asset_manifest_digest");
    assert_eq!(tree["status"], "damaged", "{r}");
    assert_eq!(tree["damaged"][0]["path"], s(&object), "{r}");
    assert_eq!(
        by_field("sandbox_dependency_manifest_digest")["status"],
        "ok",
        "{r}"
    );
    let (code, r) = audit(&env, &file, &[]);
    assert_eq!(code, 0, "without --verify nothing is re-hashed: {r}");
}

/// `audit --registry` pulls the tree snapshots a results file names and the
/// store lacks, as `pull` takes them (the tree and the dependency list
/// before the task that names them): each is then `pulled` with its
/// profile, and the content digest, whose list came with them, `ok`; a
/// forged digest stays `unknown`, with why.
#[test]
fn audit_registry_pulls_the_tree_snapshots_the_store_lacks() {
    let test = "audit_registry_pulls_the_tree_snapshots_the_store_lacks";
    let Some(registry) = crate::remote::registry(test) else {
        return;
    };
    let repo = crate::remote::repo(&registry, "audit-trees");
    let publisher = TestEnv::new();
    let t = ingest_task(&publisher, &[]);
    for digest in [&t.manifest, &t.dependency_manifest, &t.snapshot] {
        let out = publisher.run(["--json", "push", digest, &repo, "--plain-http"]);
        assert_exit(&out, 0);
    }
    let env = TestEnv::new();
    let forged = "e".repeat(64);
    let mut row = task_row(&t);
    let file = results(&env, "r.jsonl", &[row.clone()]);
    row["task_asset_snapshot_digest"] = json!(forged);
    let bad = results(&env, "bad.jsonl", &[row]);
    let (code, r) = audit(&env, &file, &["--registry", &repo, "--plain-http"]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(
        tree_statuses(&r),
        vec![
            tree(
                "task_asset_snapshot_digest",
                &t.snapshot,
                "pulled",
                json!("task")
            ),
            tree(
                "task_asset_manifest_digest",
                &t.manifest,
                "pulled",
                json!("tree")
            ),
            tree(
                "sandbox_dependency_manifest_digest",
                &t.dependency_manifest,
                "pulled",
                json!("dependencies")
            ),
            tree(
                "sandbox_dependency_content_digest",
                &t.dependency_content,
                "ok",
                json!("dependencies")
            ),
        ]
    );
    assert_eq!(r["tree_digests"][0]["pulled"], true, "{r}");
    let (code, r) = audit(&env, &bad, &["--registry", &repo, "--plain-http"]);
    assert_eq!(code, 1, "{r}");
    let first = &r["tree_digests"][0];
    assert_eq!(
        (&first["digest"], &first["status"]),
        (&json!(forged), &json!("unknown")),
        "{r}"
    );
    assert!(first["pull_error"].is_string(), "{r}");
    assert_eq!(r["tree_digests"][1]["status"], "ok", "now held: {r}");
}

/// A `ce_review` row of the plugin at `ce` (version 1.0.0) naming the
/// task's four digests and, as `gitnexus_runtime_manifest_digest`, `runtime`.
fn six_field_row(ce: &str, t: &Task, runtime: &str) -> Value {
    let mut row = task_row(t);
    row["arm"] = json!("ce_review");
    row["ce_plugin_version"] = json!("1.0.0");
    row["ce_plugin_manifest_digest"] = json!(ce);
    row["gitnexus_runtime_manifest_digest"] = json!(runtime);
    row
}

/// Each digest field's counts: `(field, kind, [rows, digests, answered,
/// unanswered])`.
fn field_counts(report: &Value) -> Vec<(String, String, [u64; 4])> {
    report["field_counts"]
        .as_array()
        .unwrap_or_else(|| panic!("{report}"))
        .iter()
        .map(|f| {
            let n = |k: &str| f[k].as_u64().unwrap();
            (
                f["field"].as_str().unwrap().to_string(),
                f["kind"].as_str().unwrap().to_string(),
                [
                    n("rows"),
                    n("digests"),
                    n("rows_answered"),
                    n("rows_unanswered"),
                ],
            )
        })
        .collect()
}

/// Rows carrying all six digest fields of the default table (the CE
/// digest, the task's four, the GitNexus runtime's tree) pass when the
/// store holds every snapshot, and each field's rows are counted as
/// answered for; when the store lacks the runtime's snapshot, the audit
/// fails and names the field and the first row naming it, in every form.
#[test]
fn audit_checks_all_six_digest_fields_and_names_the_field_and_row_of_one_missing() {
    let (env, _src, ce) = plugin_store("src", "1.0.0");
    let t = ingest_task(&env, &[]);
    // The runtime's snapshot: a tree-profile snapshot of its own.
    let runtime_dir = env.path("runtime");
    write(&runtime_dir.join("runtime/bin/gitnexus"), "#!/bin/sh\n");
    let runtime = env.json([
        "--json",
        "ingest",
        "--profile",
        "tree",
        &s(&runtime_dir),
        "--copy",
        "runtime",
    ])["manifest_digest"]
        .as_str()
        .unwrap()
        .to_string();
    let row = six_field_row(&ce, &t, &runtime);
    let good = results(&env, "good.jsonl", &[row.clone(), row.clone()]);
    let (code, r) = audit(&env, &good, &[]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["passed"], true, "{r}");
    let all = |n: u64| [n, 1, n, 0];
    let want: Vec<(String, String, [u64; 4])> = [
        ("ce_plugin_manifest_digest", "ce"),
        ("task_asset_snapshot_digest", "task"),
        ("task_asset_manifest_digest", "tree"),
        ("sandbox_dependency_manifest_digest", "dependencies"),
        ("sandbox_dependency_content_digest", "dependencies-content"),
        ("gitnexus_runtime_manifest_digest", "tree"),
    ]
    .iter()
    .map(|(f, k)| (f.to_string(), k.to_string(), all(2)))
    .chain([(
        "environment_digest".to_string(),
        "environment".to_string(),
        [0; 4],
    )])
    .collect();
    assert_eq!(field_counts(&r), want, "{r}");
    assert!(r["field_counts"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["first_unanswered"].is_null()));
    let text = env.run(["audit", &good]);
    assert_exit(&text, 0);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("field gitnexus_runtime_manifest_digest (tree): 2 rows, 1 digest, 2 answered for, 0 not"),
        "{text}"
    );

    // The runtime's snapshot missing from the second row on: FAIL, naming
    // the field and the row.
    let forged = "e".repeat(64);
    let bad = results(
        &env,
        "bad.jsonl",
        &[
            row.clone(),
            six_field_row(&ce, &t, &forged),
            six_field_row(&ce, &t, &forged),
        ],
    );
    let (code, r) = audit(&env, &bad, &[]);
    assert_eq!(code, 1, "{r}");
    assert_eq!(r["passed"], false, "{r}");
    let counts = field_counts(&r);
    assert_eq!(
        counts[5],
        (
            "gitnexus_runtime_manifest_digest".to_string(),
            "tree".to_string(),
            [3, 2, 1, 2]
        ),
        "{r}"
    );
    assert!(
        counts[..5].iter().all(|(_, _, c)| *c == [3, 1, 3, 0]),
        "{r}"
    );
    let first = &r["field_counts"][5]["first_unanswered"];
    assert_eq!(first["line"], 2, "{r}");
    assert_eq!(first["file"], bad.as_str(), "{r}");
    assert_eq!(first["digest"], forged.as_str(), "{r}");
    assert_eq!(first["status"], "unknown", "{r}");
    let named =
        format!("FAIL gitnexus_runtime_manifest_digest: {bad} line 2 names {forged} (unknown)");
    let text = env.run(["audit", &bad]);
    assert_exit(&text, 1);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(&named), "{text}");
    assert!(text.lines().last().unwrap().starts_with("FAIL: "), "{text}");
    let md = env.run(["audit", &bad, "--markdown"]);
    assert_exit(&md, 1);
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(
        md.contains(&format!(
            "| gitnexus_runtime_manifest_digest | tree | 3 | 2 | 1 | 2 | {bad} line 2: `{forged}` unknown |"
        )),
        "{md}"
    );
}

/// The last field of an audit report's `field_counts`.
fn last_field_count(report: &Value) -> Value {
    report["field_counts"]
        .as_array()
        .and_then(|counts| counts.last())
        .cloned()
        .expect("a field count")
}

/// `--field NAME=KIND` audits a field of the rows the default table does
/// not name (or re-maps one it does) for this run only.
#[test]
fn audit_field_adds_a_custom_digest_field() {
    let env = TestEnv::new();
    let t = ingest_task(&env, &[]);
    let file = results(
        &env,
        "r.jsonl",
        &[
            json!({"arm": "baseline", "my_tree": t.manifest, "task_asset_manifest_digest": t.manifest}),
        ],
    );
    // Unnamed, the custom field is not read.
    let (code, r) = audit(&env, &file, &[]);
    assert_eq!(code, 0, "{r}");
    assert!(
        !tree_statuses(&r).iter().any(|(f, ..)| f == "my_tree"),
        "{r}"
    );

    let (code, r) = audit(&env, &file, &["--field", "my_tree=tree"]);
    assert_eq!(code, 0, "{r}");
    assert!(
        tree_statuses(&r).contains(&tree("my_tree", &t.manifest, "ok", json!("tree"))),
        "{r}"
    );
    let last = last_field_count(&r);
    assert_eq!(last["field"], "my_tree", "{r}");
    assert_eq!(last["kind"], "tree", "{r}");
    assert_eq!(last["rows_answered"], 1, "{r}");

    // Named as another kind, the same digest is a profile mismatch, and
    // the failure names the field and the row.
    let (code, r) = audit(&env, &file, &["--field", "my_tree=task"]);
    assert_eq!(code, 1, "{r}");
    assert!(
        tree_statuses(&r).contains(&tree(
            "my_tree",
            &t.manifest,
            "profile-mismatch",
            json!("tree")
        )),
        "{r}"
    );
    let last = last_field_count(&r);
    assert_eq!(last["first_unanswered"]["line"], 1, "{r}");
    assert_eq!(
        last["first_unanswered"]["status"], "profile-mismatch",
        "{r}"
    );

    // A default field re-mapped: the table keeps its place.
    let (code, r) = audit(
        &env,
        &file,
        &["--field", "task_asset_manifest_digest=dependencies"],
    );
    assert_eq!(code, 1, "{r}");
    assert_eq!(
        r["field_counts"][2]["field"], "task_asset_manifest_digest",
        "{r}"
    );
    assert_eq!(r["field_counts"][2]["kind"], "dependencies", "{r}");
    assert_eq!(r["field_counts"].as_array().unwrap().len(), 7, "{r}");
    // A nested field, by its dotted path.
    let nested = results(
        &env,
        "n.jsonl",
        &[json!({"arm": "baseline", "runtime": {"manifest": t.manifest}})],
    );
    let (code, r) = audit(&env, &nested, &["--field", "runtime.manifest=tree"]);
    assert_eq!(code, 0, "{r}");
    assert!(
        tree_statuses(&r).contains(&tree("runtime.manifest", &t.manifest, "ok", json!("tree"))),
        "{r}"
    );
}

/// A `--field` spec that breaks the rule is a usage error (exit 2) naming
/// the spec and the rule, with nothing read.
#[test]
fn audit_refuses_a_bad_field_spec() {
    let env = TestEnv::new();
    let file = results(&env, "r.jsonl", &[json!({"arm": "baseline"})]);
    for spec in [
        "my_tree",
        "my_tree=blob",
        "=tree",
        "a..b=tree",
        "arm=tree",
        "arm.x=ce",
    ] {
        let out = env.run(["--json", "audit", &file, "--field", spec]);
        assert_exit(&out, 2);
        let v = parse_json(&out);
        assert_eq!(v["error"]["kind"], "usage", "{spec}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("--field '{spec}'")),
            "{spec}: {message}"
        );
        assert!(
            message.contains("KIND one of ce, tree, dependencies, task, dependencies-content"),
            "{spec}: {message}"
        );
        let text = env.run(["audit", &file, "--field", spec]);
        assert_exit(&text, 2);
    }
    // The same field given twice as two kinds.
    let out = env.run([
        "--json", "audit", &file, "--field", "x=tree", "--field", "x=task",
    ]);
    assert_exit(&out, 2);
    // More fields than a row holds slots for.
    let mut args: Vec<String> = vec!["--json".into(), "audit".into(), file.clone()];
    for i in 0..12 {
        args.push("--field".into());
        args.push(format!("f{i}=tree"));
    }
    let out = env.run(&args);
    assert_exit(&out, 2);
    assert!(
        parse_json(&out)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 16 digest fields"),
        "{out:?}"
    );
}
