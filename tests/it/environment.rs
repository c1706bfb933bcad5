//! Environments: `ingest --profile environment`, a named set of stored
//! snapshots kept as one, shown, removed around, moved through bundles and
//! a registry, signed and audited as one unit.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::json::{run_typed, EnvironmentIngestOut};
use crate::util::*;

/// The snapshots of a sweep's environment, each stored in one store.
struct Members {
    ce: String,
    runtime: String,
    task: String,
    tree: String,
    deps: String,
}

impl Members {
    /// `(role, digest)` of each, as results rows name them.
    fn roles(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("ce_plugin_manifest_digest", &self.ce),
            ("gitnexus_runtime_manifest_digest", &self.runtime),
            ("task_asset_snapshot_digest", &self.task),
            ("task_asset_manifest_digest", &self.tree),
            ("sandbox_dependency_manifest_digest", &self.deps),
        ]
    }

    /// `(role, kind, digest)` of each.
    fn typed(&self) -> Vec<(&'static str, &'static str, &str)> {
        let kinds = ["ce", "tree", "task", "tree", "dependencies"];
        self.roles()
            .into_iter()
            .zip(kinds)
            .map(|((role, digest), kind)| (role, kind, digest))
            .collect()
    }
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
        .args(args)
        .current_dir(repo)
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn ingest_profile(env: &TestEnv, args: &[&str]) -> Value {
    let mut all = vec!["--json", "ingest", "--profile"];
    all.extend_from_slice(args);
    let out = env.run(&all);
    assert_exit(&out, 0);
    parse_json(&out)
}

/// Stores a CE plugin, a runtime-like tree (an executable, nested
/// directories) and a task with its tree and dependency list.
fn members(env: &TestEnv) -> Members {
    let plugin = env.plugin("plugin", "1.0.0");
    let ce = env.ingest_digest(&plugin, "1.0.0");
    let runtime = env.path("runtime");
    write(&runtime.join("gitnexus/dist/index.js"), "console.log(1);\n");
    write(&runtime.join("gitnexus/package.json"), "{}\n");
    let runtime_report = ingest_profile(
        env,
        &[
            "tree",
            &s(&runtime),
            "--copy",
            "gitnexus",
            "--name",
            "runtime",
        ],
    );
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
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "task"]);
    let sha = git(&repo, &["rev-parse", "HEAD"]);
    let t = ingest_profile(
        env,
        &[
            "task",
            &s(&repo),
            "--task",
            &s(&task),
            "--resolved-sha",
            &sha,
        ],
    );
    let field = |v: &Value, k: &str| {
        v[k].as_str()
            .unwrap_or_else(|| panic!("{k}: {v}"))
            .to_string()
    };
    Members {
        ce,
        runtime: field(&runtime_report, "manifest_digest"),
        task: field(&t, "digest"),
        tree: field(&t, "manifest_digest"),
        deps: field(&t, "dependency_manifest_digest"),
    }
}

/// `ingest --profile environment` of `members` (with `extra` flags).
fn record(env: &TestEnv, members: &[(&str, &str)], extra: &[&str]) -> EnvironmentIngestOut {
    let mut args: Vec<String> = vec!["ingest".into(), "--profile".into(), "environment".into()];
    for (role, digest) in members {
        args.push("--member".into());
        args.push(format!("{role}={digest}"));
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    run_typed(env, &args)
}

/// docs/format.md's `environment_digest` of `(role, kind, digest)` triples.
fn recomputed(members: &[(&str, &str, &str)]) -> String {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/format.md"))
        .unwrap();
    let section = &doc[doc
        .find("### An environment's digest")
        .expect("the section")..];
    let start = section.find("```python\n").expect("its script") + "```python\n".len();
    let script = &section[start..start + section[start..].find("```").unwrap()];
    let triples: Vec<Value> = members.iter().map(|(r, k, d)| json!([r, k, d])).collect();
    let out = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "{script}\nimport json, sys\nprint(environment_digest(json.loads(sys.argv[1])))"
        ))
        .arg(Value::from(triples).to_string())
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Every snapshot digest `list` gives, with its profile.
fn listed_profiles(env: &TestEnv) -> Vec<(String, String)> {
    let list = env.json(["--json", "list"]);
    let mut out = field_pairs(&list["snapshots"], "manifest_digest", "profile");
    out.sort();
    out
}

#[test]
fn an_environment_names_its_members_and_its_digest_is_docs_formats_recomputation() {
    let env = TestEnv::new();
    let m = members(&env);
    let r = record(&env, &m.roles(), &["--name", "sweep-1"]);
    assert!(r.ok && r.stored, "{r:?}");
    assert_eq!(
        (r.profile.as_str(), r.name.as_str()),
        ("environment", "sweep-1")
    );
    assert_eq!(r.store, s(&env.store));
    assert_eq!(r.manifest_digest, recomputed(&m.typed()));
    // The members, sorted by (role, digest), each with its kind.
    let mut expected: Vec<(String, String, String)> = m
        .typed()
        .iter()
        .map(|(r, k, d)| (r.to_string(), k.to_string(), d.to_string()))
        .collect();
    expected.sort();
    let got: Vec<(String, String, String)> = r
        .members
        .iter()
        .map(|x| (x.role.clone(), x.kind.clone(), x.digest.clone()))
        .collect();
    assert_eq!(got, expected);
    // The stored manifest is the documented encoding.
    let bytes = env.run(["show", "--manifest", &r.manifest_digest]).stdout;
    assert!(
        bytes.starts_with(b"{\"members\":[{\"digest\":\""),
        "{bytes:?}"
    );
    assert_eq!(sha_hex(&bytes), r.manifest_digest);
    // show lists the members, with their names; a member says which
    // environment names it.
    let shown = env.json(["--json", "show", &r.manifest_digest]);
    assert_eq!(shown["profile"], "environment", "{shown}");
    assert_eq!(
        shown["harness_digests"]["environment_digest"],
        r.manifest_digest.as_str()
    );
    let members = shown["members"].as_array().unwrap();
    assert_eq!(members.len(), 5, "{shown}");
    let runtime = members
        .iter()
        .find(|x| x["role"] == "gitnexus_runtime_manifest_digest")
        .unwrap();
    assert_eq!(
        (&runtime["kind"], &runtime["digest"], &runtime["name"]),
        (&json!("tree"), &json!(m.runtime), &json!("runtime"))
    );
    let text = String::from_utf8(env.run(["show", &r.manifest_digest]).stdout).unwrap();
    assert!(text.contains("members:                 5"), "{text}");
    assert!(
        text.contains(&format!("  ce_plugin_manifest_digest: ce {}", m.ce)),
        "{text}"
    );
    let member = env.json(["--json", "show", &m.ce]);
    assert_eq!(
        member["environments"],
        json!([r.manifest_digest]),
        "{member}"
    );
    // The same members in another order, one given twice: the same
    // environment, nothing new stored.
    let mut again = m.roles();
    again.reverse();
    again.push(again[0]);
    let r2 = record(&env, &again, &[]);
    assert_eq!(r2.manifest_digest, r.manifest_digest);
    assert!(!r2.stored, "{r2:?}");
    // list gives its profile.
    assert!(listed_profiles(&env).contains(&(r.manifest_digest.clone(), "environment".into())));
    // It holds no file: no view of it is made, and the refusal says where
    // the members are.
    let dest = env.path("env-view");
    for args in [
        vec!["--json", "path", r.manifest_digest.as_str()],
        vec![
            "--json",
            "checkout",
            r.manifest_digest.as_str(),
            s(&dest).as_str(),
        ],
        vec![
            "--json",
            "checkout",
            "--writable",
            r.manifest_digest.as_str(),
            s(&dest).as_str(),
        ],
    ] {
        let out = env.run(&args);
        assert_exit(&out, 2);
        let message = parse_json(&out)["error"]["message"].clone();
        assert!(
            message
                .as_str()
                .unwrap()
                .contains("an environment holds no file"),
            "{message}"
        );
        assert!(!dest.exists());
    }
    assert_eq!(
        std::fs::read_dir(env.store.join("views")).map_or(0, |d| d.count()),
        0
    );
    // A member it names is not forgotten while it is recorded.
    for digest in [&m.ce, &m.runtime, &m.task] {
        let out = env.run(["rm", digest]);
        let err = assert_exit(&out, 6);
        assert!(err.contains(&r.manifest_digest), "{err}");
        assert!(err.contains("recorded environment"), "{err}");
    }
    let out = env.run(["--json", "rm", &m.deps]);
    assert_exit(&out, 6);
    // Once it is gone, its members may go.
    assert_exit(&env.run(["rm", &r.manifest_digest]), 0);
    assert_exit(&env.run(["rm", &m.ce]), 0);
    let (code, v) = env.verify(&[]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn a_member_spec_is_refused_by_its_rule_and_nothing_is_recorded() {
    let env = TestEnv::new();
    let m = members(&env);
    let before = listed_profiles(&env);
    let unknown = "ab".repeat(32);
    let cases: Vec<(Vec<String>, i32, String)> = vec![
        (
            vec![format!("ce_plugin_manifest_digest{}", m.ce)],
            2,
            "expected ROLE=DIGEST".into(),
        ),
        (vec![format!("CE={}", m.ce)], 2, format!("CE={}", m.ce)),
        (vec![format!("a-b={}", m.ce)], 2, "a-b=".into()),
        (
            vec![format!("{}={}", "r".repeat(65), m.ce)],
            2,
            "the role".into(),
        ),
        (vec!["ce=abc".into()], 2, "ce=abc".into()),
        (
            vec![format!("ce={}", m.ce), format!("x={unknown}")],
            4,
            unknown.clone(),
        ),
        (vec![], 2, "".into()),
    ];
    for (specs, code, named) in cases {
        let mut args: Vec<String> = vec![
            "--json".into(),
            "ingest".into(),
            "--profile".into(),
            "environment".into(),
        ];
        for spec in &specs {
            args.push("--member".into());
            args.push(spec.clone());
        }
        let out = env.run(&args);
        assert_exit(&out, code);
        let v = parse_json(&out);
        assert_eq!(v["ok"], false, "{specs:?}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&named), "{specs:?} names {named:?}: {v}");
    }
    // A flag of another profile, or a repository, is refused too.
    let out = env.run([
        "ingest",
        "--profile",
        "environment",
        "--member",
        &format!("ce={}", m.ce),
        "--copy",
        "x",
    ]);
    assert_exit(&out, 2);
    // An environment is no member.
    let e = record(&env, &[("ce_plugin_manifest_digest", &m.ce)], &[]);
    let out = env.run([
        "ingest",
        "--profile",
        "environment",
        "--member",
        &format!("nested={}", e.manifest_digest),
    ]);
    let err = assert_exit(&out, 2);
    assert!(err.contains("environments do not nest"), "{err}");
    let mut after = listed_profiles(&env);
    after.retain(|(d, _)| *d != e.manifest_digest);
    assert_eq!(after, before);
}

/// A store whose snapshots are exactly `env`'s: same digests and profiles.
fn same_snapshots(from: &TestEnv, to: &TestEnv) {
    assert_eq!(listed_profiles(to), listed_profiles(from));
    let (code, v) = to.verify(&[]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn an_environment_travels_whole_through_a_bundle() {
    let env = TestEnv::new();
    let m = members(&env);
    let r = record(&env, &m.roles(), &[]);
    for zstd in [false, true] {
        let bundle = env.path(if zstd { "env.tar.zst" } else { "env.tar" });
        let mut args = vec!["--json", "export", &r.manifest_digest, "-o"];
        let file = s(&bundle);
        args.push(&file);
        if zstd {
            args.push("--zstd");
        }
        let out = env.run(&args);
        assert_exit(&out, 0);
        let exported = parse_json(&out);
        assert_eq!(
            exported["members"].as_array().unwrap().len(),
            5,
            "{exported}"
        );
        // The task's tree and dependency list come before the task.
        let order: Vec<&str> = exported["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap())
            .collect();
        let at = |d: &str| order.iter().position(|o| *o == d).unwrap();
        assert!(
            at(&m.tree) < at(&m.task) && at(&m.deps) < at(&m.task),
            "{order:?}"
        );
        let other = TestEnv::new();
        let checked = other.run(["--json", "import", &file, "--check"]);
        assert_exit(&checked, 0);
        assert!(
            !other.store.join("catalogue.sqlite").exists() || listed_profiles(&other).is_empty()
        );
        let out = other.run(["--json", "import", &file]);
        assert_exit(&out, 0);
        let imported = parse_json(&out);
        assert_eq!(
            imported["provenance"]["manifest_digest"],
            r.manifest_digest.as_str(),
            "{imported}"
        );
        assert_eq!(
            imported["members"].as_array().unwrap().len(),
            5,
            "{imported}"
        );
        same_snapshots(&env, &other);
        // Again: nothing new.
        let out = other.run(["--json", "import", &file]);
        assert_exit(&out, 0);
        assert_eq!(parse_json(&out)["ingest"]["already_present"], true);
    }
}

/// A key pair made by `cestore key generate`: the private and public files.
fn key(env: &TestEnv, name: &str) -> (PathBuf, PathBuf) {
    let private = env.path(name);
    let out = env.run(["key", "generate", &s(&private)]);
    assert_exit(&out, 0);
    let public = PathBuf::from(format!("{}.pub", private.display()));
    (private, public)
}

/// Every snapshot's digest in the store.
fn stored(env: &TestEnv) -> Vec<String> {
    if !env.store.join("catalogue.sqlite").exists() {
        return Vec::new();
    }
    listed_profiles(env).into_iter().map(|(d, _)| d).collect()
}

#[test]
fn a_bundle_with_an_unsigned_member_is_refused_whole_under_a_trusted_key() {
    let env = TestEnv::new();
    let m = members(&env);
    let (private, public) = key(&env, "k.key");
    // The environment alone is signed: its ingest signs only its manifest.
    let r = record(&env, &m.roles(), &["--sign-with", &s(&private)]);
    let unsigned = env.path("unsigned.tar");
    assert_exit(
        &env.run(["export", &r.manifest_digest, "-o", &s(&unsigned)]),
        0,
    );
    let other = TestEnv::new();
    let out = other.run([
        "--json",
        "import",
        &s(&unsigned),
        "--trusted-key",
        &s(&public),
    ]);
    assert_exit(&out, 9);
    let said = parse_json(&out)["error"]["message"].to_string();
    let members = [&m.ce, &m.runtime, &m.task, &m.tree, &m.deps];
    assert!(members.iter().any(|d| said.contains(d.as_str())), "{said}");
    assert!(
        !said.contains(&format!("could not trust {}", r.manifest_digest)),
        "{said}"
    );
    assert!(stored(&other).is_empty(), "{:?}", stored(&other));
    // `sign ENV` signs every member, once.
    let signed = env.json(["--json", "sign", &r.manifest_digest, "--key", &s(&private)]);
    assert_eq!(signed["new"], false, "{signed}");
    assert_eq!(signed["members"].as_array().unwrap().len(), 5, "{signed}");
    assert!(signed["members"]
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x["new"] == true));
    let again = env.json(["--json", "sign", &r.manifest_digest, "--key", &s(&private)]);
    assert!(
        again["members"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["new"] == false),
        "{again}"
    );
    let whole = env.path("signed.tar");
    assert_exit(
        &env.run(["export", &r.manifest_digest, "-o", &s(&whole)]),
        0,
    );
    let out = other.run(["--json", "import", &s(&whole), "--trusted-key", &s(&public)]);
    assert_exit(&out, 0);
    same_snapshots(&env, &other);
}

#[test]
fn an_environment_travels_whole_through_a_registry_and_is_trusted_whole() {
    let Some(reg) = crate::remote::registry(
        "an_environment_travels_whole_through_a_registry_and_is_trusted_whole",
    ) else {
        return;
    };
    let env = TestEnv::new();
    let m = members(&env);
    let (private, public) = key(&env, "k.key");
    let r = record(&env, &m.roles(), &["--sign-with", &s(&private)]);
    let repo = crate::remote::repo(&reg, "environment");
    let out = env.run([
        "--json",
        "push",
        &r.manifest_digest,
        &format!("{repo}:sweep"),
        "--plain-http",
    ]);
    assert_exit(&out, 0);
    let pushed = parse_json(&out);
    assert_eq!(pushed["members"].as_array().unwrap().len(), 5, "{pushed}");
    // Unsigned members: refused before anything enters the store.
    let other = TestEnv::new();
    let out = other.run([
        "--json",
        "pull",
        &format!("{repo}:sweep"),
        "--plain-http",
        "--trusted-key",
        &s(&public),
    ]);
    assert_exit(&out, 9);
    let said = parse_json(&out)["error"]["message"].to_string();
    let members = [&m.ce, &m.runtime, &m.task, &m.tree, &m.deps];
    assert!(members.iter().any(|d| said.contains(d.as_str())), "{said}");
    assert!(stored(&other).is_empty(), "{:?}", stored(&other));
    // A store holding a member unsigned: it is not trusted there either.
    let holding = TestEnv::new();
    let unsigned = env.path("runtime-unsigned.tar");
    assert_exit(&env.run(["export", &m.runtime, "-o", &s(&unsigned)]), 0);
    assert_exit(&holding.run(["import", &s(&unsigned)]), 0);
    // Signed whole and pushed again: taken whole into an empty store.
    assert_exit(
        &env.run(["sign", &r.manifest_digest, "--key", &s(&private)]),
        0,
    );
    assert_exit(
        &env.run(["push", &r.manifest_digest, &repo, "--plain-http"]),
        0,
    );
    let out = other.run([
        "--json",
        "pull",
        &format!("{repo}:sweep"),
        "--plain-http",
        "--trusted-key",
        &s(&public),
    ]);
    assert_exit(&out, 0);
    let pulled = parse_json(&out);
    assert_eq!(pulled["members"].as_array().unwrap().len(), 5, "{pulled}");
    assert_eq!(
        pulled["provenance"]["manifest_digest"],
        r.manifest_digest.as_str(),
        "{pulled}"
    );
    same_snapshots(&env, &other);
    let out = holding.run([
        "--json",
        "pull",
        &format!("{repo}:sweep"),
        "--plain-http",
        "--trusted-key",
        &s(&public),
    ]);
    assert_exit(&out, 9);
    let said = parse_json(&out)["error"]["message"].to_string();
    assert!(said.contains(&m.runtime), "{said}");
    assert_eq!(stored(&holding), vec![m.runtime.clone()]);
    // Without keys too, into a third store.
    let third = TestEnv::new();
    let out = third.run([
        "pull",
        &format!("{repo}@sha256:{}", r.manifest_digest),
        "--plain-http",
    ]);
    assert_exit(&out, 0);
    same_snapshots(&env, &third);
}

/// `audit --json` of rows in `rel` (with `extra` flags): code and report.
fn audit(env: &TestEnv, rel: &str, rows: &[Value], extra: &[&str]) -> (i32, Value) {
    let file = env.path(rel);
    write(
        &file,
        rows.iter().map(|r| format!("{r}\n")).collect::<String>(),
    );
    let file = s(&file);
    let mut args = vec!["--json", "audit", &file];
    args.extend_from_slice(extra);
    let out = env.run(&args);
    (out.status.code().unwrap_or(-1), parse_json(&out))
}

/// The `environment_digest` field's counts of an audit report.
fn environment_field(r: &Value) -> &Value {
    r["field_counts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "environment_digest")
        .unwrap_or_else(|| panic!("{r}"))
}

#[test]
fn audit_answers_for_an_environment_only_when_every_member_is_stored() {
    let env = TestEnv::new();
    let m = members(&env);
    let (private, public) = key(&env, "k.key");
    let r = record(&env, &m.roles(), &["--sign-with", &s(&private)]);
    let rows = [
        json!({"arm": "baseline", "environment_digest": r.manifest_digest}),
        json!({"arm": "ce", "environment_digest": r.manifest_digest}),
    ];
    let (code, report) = audit(&env, "rows.jsonl", &rows, &[]);
    assert_eq!(code, 0, "{report}");
    let f = environment_field(&report);
    assert_eq!(
        (f["kind"].as_str(), f["rows_answered"].as_u64()),
        (Some("environment"), Some(2)),
        "{f}"
    );
    let (code, report) = audit(&env, "rows.jsonl", &rows, &["--verify"]);
    assert_eq!(code, 0, "{report}");
    // Signed alone: its members are not, under a trusted key.
    let (code, report) = audit(&env, "rows.jsonl", &rows, &["--trusted-key", &s(&public)]);
    assert_eq!(code, 1, "{report}");
    let d = &report["tree_digests"][0];
    assert_eq!(d["status"], "member-failing", "{report}");
    assert_eq!(
        d["failing_members"].as_array().unwrap().len(),
        5,
        "{report}"
    );
    assert_exit(
        &env.run(["sign", &r.manifest_digest, "--key", &s(&private)]),
        0,
    );
    let (code, report) = audit(&env, "rows.jsonl", &rows, &["--trusted-key", &s(&public)]);
    assert_eq!(code, 0, "{report}");
    // A member's object damaged: --verify fails the field at row 1,
    // naming the member by role and digest.
    let files = env.files(&m.runtime);
    let object = env.object(&files[0]);
    chmod(&object, 0o644);
    write(&object, "changed\n");
    let (code, report) = audit(&env, "rows.jsonl", &rows, &["--verify"]);
    assert_eq!(code, 1, "{report}");
    let f = environment_field(&report);
    assert_eq!(f["first_unanswered"]["line"], 1, "{f}");
    assert_eq!(f["first_unanswered"]["status"], "member-failing", "{f}");
    let failing = &report["tree_digests"][0]["failing_members"];
    assert!(
        failing
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["role"] == "gitnexus_runtime_manifest_digest"
                && x["digest"] == m.runtime.as_str()
                && x["status"] == "damaged"),
        "{report}"
    );
    let text = String::from_utf8(
        env.run(["audit", &s(&env.path("rows.jsonl")), "--verify"])
            .stdout,
    )
    .unwrap();
    assert!(text.contains("FAIL environment_digest"), "{text}");
    assert!(
        text.contains(&format!(
            "member gitnexus_runtime_manifest_digest {}: damaged",
            m.runtime
        )),
        "{text}"
    );
    // A member the store no longer records (its row gone behind the
    // store's back): unknown, without --verify.
    let db = rusqlite::Connection::open(env.store.join("catalogue.sqlite")).unwrap();
    db.execute("DELETE FROM snapshots WHERE digest = ?1", [&m.ce])
        .unwrap();
    drop(db);
    let (code, report) = audit(&env, "rows.jsonl", &rows, &[]);
    assert_eq!(code, 1, "{report}");
    let failing = &report["tree_digests"][0]["failing_members"];
    assert_eq!(
        failing,
        &json!([{"role": "ce_plugin_manifest_digest", "digest": m.ce, "status": "unknown"}]),
        "{report}"
    );
}

/// Sends `DELETE /v2/REPOSITORY/manifests/DIGEST` to the registry at
/// `reg` (plain HTTP): the manifest, and the tags naming it, are gone.
fn delete_manifest(reg: &str, repository: &str, digest: &str) {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(reg).expect("connect to the registry");
    write!(
        conn,
        "DELETE /v2/{repository}/manifests/{digest} HTTP/1.1\r\nHost: {reg}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
}

#[test]
fn a_pull_missing_a_member_on_the_registry_records_no_environment() {
    let Some(reg) =
        crate::remote::registry("a_pull_missing_a_member_on_the_registry_records_no_environment")
    else {
        return;
    };
    let env = TestEnv::new();
    let m = members(&env);
    let r = record(&env, &m.roles(), &[]);
    let repo = crate::remote::repo(&reg, "environment-gone");
    // A reference the push refuses pushes no member either.
    let out = env.run([
        "push",
        &r.manifest_digest,
        &format!("{repo}:sha256-{}", m.ce),
        "--plain-http",
    ]);
    assert_ne!(out.status.code(), Some(0));
    let other = TestEnv::new();
    let out = other.run(["pull", &format!("{repo}:sha256-{}", m.ce), "--plain-http"]);
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    let out = env.run(["--json", "push", &r.manifest_digest, &repo, "--plain-http"]);
    assert_exit(&out, 0);
    let pushed = parse_json(&out);
    // The runtime's record is removed from the registry.
    let runtime = pushed["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["manifest_digest"] == m.runtime.as_str())
        .unwrap_or_else(|| panic!("{pushed}"));
    let repository = repo.split_once('/').unwrap().1;
    delete_manifest(&reg, repository, runtime["remote_digest"].as_str().unwrap());
    let other = TestEnv::new();
    let out = other.run([
        "--json",
        "pull",
        &format!("{repo}:sha256-{}", r.manifest_digest),
        "--plain-http",
    ]);
    let code = out.status.code();
    assert!(code != Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let said = parse_json(&out)["error"]["message"].to_string();
    assert!(said.contains(&m.runtime), "{said}");
    // Nothing entered the store: the members are resolved before any is taken.
    assert!(stored(&other).is_empty(), "{:?}", stored(&other));
    // With the runtime in the store already, the rest comes and the
    // environment last.
    let bundle = env.path("runtime.tar");
    assert_exit(&env.run(["export", &m.runtime, "-o", &s(&bundle)]), 0);
    assert_exit(&other.run(["import", &s(&bundle)]), 0);
    let out = other.run([
        "--json",
        "pull",
        &format!("{repo}:sha256-{}", r.manifest_digest),
        "--plain-http",
    ]);
    assert_exit(&out, 0);
    assert_eq!(parse_json(&out)["members"].as_array().unwrap().len(), 4);
    same_snapshots(&env, &other);
}

#[test]
fn recover_rebuilds_an_environment_after_its_members() {
    let env = TestEnv::new();
    let m = members(&env);
    let r = record(&env, &m.roles(), &["--name", "sweep"]);
    let before = listed_profiles(&env);
    for name in std::fs::read_dir(&env.store).unwrap() {
        let path = name.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("catalogue")
        {
            std::fs::remove_file(&path).unwrap();
        }
    }
    let out = env.run(["--json", "recover"]);
    assert_exit(&out, 0);
    assert_eq!(listed_profiles(&env), before);
    // Its members are named again: rm of one is refused.
    let err = assert_exit(&env.run(["rm", &m.runtime]), 6);
    assert!(err.contains(&r.manifest_digest), "{err}");
    let (code, v) = env.verify(&[]);
    assert_eq!(code, 0, "{v}");
}

/// `bundle` with its snapshot's manifest replaced by `manifest` (and its
/// digest entry with it), every other entry as it was.
fn with_manifest(bundle: &Path, manifest: &[u8], to: &Path) {
    let mut archive = tar::Archive::new(std::fs::File::open(bundle).unwrap());
    let mut out = tar::Builder::new(Vec::new());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
        let data = match name.as_str() {
            "manifest.json" => manifest.to_vec(),
            "manifest.sha256" => format!("{}  manifest.json\n", sha_hex(manifest)).into_bytes(),
            _ => data,
        };
        let mut header = entry.header().clone();
        header.set_size(data.len() as u64);
        header.set_cksum();
        out.append(&header, &data[..]).unwrap();
    }
    write(to, out.into_inner().unwrap());
}

#[test]
fn an_environment_recording_a_members_kind_wrongly_is_not_imported() {
    let env = TestEnv::new();
    let m = members(&env);
    let r = record(&env, &m.roles(), &[]);
    let bundle = env.path("env.tar");
    assert_exit(
        &env.run(["export", &r.manifest_digest, "-o", &s(&bundle)]),
        0,
    );
    let bytes = env.run(["show", "--manifest", &r.manifest_digest]).stdout;
    let claimed = String::from_utf8(bytes).unwrap().replacen(
        &format!("{{\"digest\":\"{}\",\"kind\":\"ce\"", m.ce),
        &format!("{{\"digest\":\"{}\",\"kind\":\"tree\"", m.ce),
        1,
    );
    assert!(
        claimed.contains("\"kind\":\"tree\",\"role\":\"ce_plugin"),
        "{claimed}"
    );
    let forged = env.path("forged.tar");
    with_manifest(&bundle, claimed.as_bytes(), &forged);
    let other = TestEnv::new();
    let out = other.run(["--json", "import", &s(&forged)]);
    assert_exit(&out, 1);
    let message = parse_json(&out)["error"]["message"].to_string();
    assert!(
        message.contains(&format!(
            "its member ce_plugin_manifest_digest={} is recorded as tree, but the store holds a ce snapshot",
            m.ce
        )),
        "{message}"
    );
    // No environment is recorded; the members taken before it stay, each whole.
    let held = stored(&other);
    assert!(!held.contains(&sha_hex(claimed.as_bytes())), "{held:?}");
    assert!(!held.contains(&r.manifest_digest), "{held:?}");
    assert_eq!(held.len(), 5, "{held:?}");
    let (code, v) = other.verify(&[]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn a_stage_records_the_environment_it_mounts_and_a_failed_one_records_nothing() {
    let env = TestEnv::new();
    let m = members(&env);
    let plugin = env.path("plugin");
    let harness = env.path("harness");
    gitnexus_harness(&harness, "1.6.9");
    let task = format!("task_asset_snapshot_digest={}", m.task);
    let staged = env.json([
        "--json",
        "stage",
        "--arm",
        "ce_review",
        "--plugin-dir",
        &s(&plugin),
        "--plugin-version",
        "1.0.0",
        "--gitnexus-root",
        &s(&harness),
        "--environment",
        "sweep-2",
        "--member",
        &task,
    ]);
    let recorded = &staged["environment"];
    assert_eq!(recorded["name"], "sweep-2", "{staged}");
    let runtime = staged["gitnexus_runtime_manifest_digest"].as_str().unwrap();
    let mut got = field_pairs(&recorded["members"], "role", "digest");
    got.sort();
    assert_eq!(
        got,
        vec![
            ("ce_plugin_manifest_digest".to_string(), m.ce.clone()),
            (
                "gitnexus_runtime_manifest_digest".to_string(),
                runtime.to_string()
            ),
            ("task_asset_snapshot_digest".to_string(), m.task.clone()),
        ]
    );
    let digest = recorded["manifest_digest"].as_str().unwrap();
    let shown = env.json(["--json", "show", digest]);
    assert_eq!(shown["profile"], "environment", "{shown}");

    // A member the store lacks: refused before anything changes.
    let before = env.json(["--json", "log"]);
    let views = std::fs::read_dir(env.store.join("views")).unwrap().count();
    let missing = format!("task_asset_snapshot_digest={}", "ab".repeat(32));
    let dest = env.path("run-view");
    let out = env.run([
        "--json",
        "stage",
        "--arm",
        "ce_review",
        "--plugin-dir",
        &s(&plugin),
        "--plugin-version",
        "1.0.0",
        "--dest",
        &s(&dest),
        "--gitnexus-root",
        &s(&harness),
        "--environment",
        "sweep-3",
        "--member",
        &missing,
    ]);
    assert_exit(&out, 4);
    assert!(!dest.exists());
    assert_eq!(env.json(["--json", "log"]), before);
    assert_eq!(
        std::fs::read_dir(env.store.join("views")).unwrap().count(),
        views
    );
    // The environment's record refused by the catalogue after the views
    // were made: the stage takes back its views, its ingests and their
    // events, new runtime and release alike.
    let other = env.plugin("other-plugin", "2.0.0");
    write(&harness.join("gitnexus/vendor/new.js"), "changed\n");
    let trigger = "CREATE TRIGGER refuse_environments BEFORE INSERT ON snapshots \
                   WHEN NEW.profile = 'environment' \
                   BEGIN SELECT RAISE(FAIL, 'environments refused'); END;";
    let done = Command::new("python3")
        .arg("-c")
        .arg("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.close()")
        .arg(env.store.join("catalogue.sqlite"))
        .arg(trigger)
        .output()
        .unwrap();
    assert!(done.status.success(), "{done:?}");
    let listed = env.json(["--json", "list"]);
    for shared in [false, true] {
        let mut args = vec![
            "--json".to_string(),
            "stage".into(),
            "--arm".into(),
            "ce_review".into(),
            "--plugin-dir".into(),
            s(&other),
            "--plugin-version".into(),
            "2.0.0".into(),
            "--gitnexus-root".into(),
            s(&harness),
            "--environment".into(),
            "sweep-4".into(),
        ];
        if !shared {
            args.extend(["--dest".into(), s(&dest)]);
        }
        let out = env.run(&args);
        assert_exit(&out, 7);
        let message = parse_json(&out)["error"]["message"].to_string();
        assert!(message.contains("environments refused"), "{message}");
        assert!(!dest.exists());
        assert_eq!(env.json(["--json", "log"]), before, "shared: {shared}");
        assert_eq!(env.json(["--json", "list"]), listed, "shared: {shared}");
        assert_eq!(
            std::fs::read_dir(env.store.join("views")).unwrap().count(),
            views,
            "shared: {shared}"
        );
    }
    // A bad member spec is a usage error; --member needs --environment.
    let out = env.run([
        "stage",
        "--arm",
        "baseline",
        "--environment",
        "e",
        "--member",
        "x",
    ]);
    assert_exit(&out, 2);
    let out = env.run(["stage", "--arm", "baseline", "--member", &task]);
    assert_exit(&out, 2);
}
