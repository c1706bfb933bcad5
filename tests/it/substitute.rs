//! Substituters: a store configured with registries fetches a snapshot it
//! lacks, by its full digest, when checkout, path, stage or mounts need it.
//!
//! Two stores and one local registry: store A ingests and pushes, store B
//! names the registry in `STORE/substituters.json` (or
//! `CESTORE_SUBSTITUTERS`) and never runs `pull`. The tests need
//! `CESTORE_TEST_REGISTRY` (`scripts/registry start DIR`) and skip without it.

use std::fs;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::proxy::{Behaviour, Proxy};
use crate::remote::{registry, repo};
use crate::util::*;

/// Store A: a CE plugin (its `salt` in a file, so that each test has its
/// own digest) and a tree-kind snapshot, both pushed to the repository
/// `subst-<salt>` of `registry`; that target and their digests.
fn publish(registry: &str, salt: &str) -> (TestEnv, String, String, String) {
    let target = &repo(registry, &format!("subst-{salt}"));
    let a = TestEnv::new();
    let plugin = a.plugin("plugin", "1.0.0");
    write(&plugin.join("skills/ce-plan/salt.md"), format!("{salt}\n"));
    let ce = a.ingest_digest(&plugin, "1.0.0");
    let runtime = a.path("runtime");
    write(
        &runtime.join("gitnexus/dist/index.js"),
        format!("// {salt}\n"),
    );
    write(&runtime.join("gitnexus/package.json"), "{}\n");
    let tree = a.json([
        "--json",
        "ingest",
        "--profile",
        "tree",
        &s(&runtime),
        "--copy",
        "gitnexus",
        "--name",
        "runtime",
    ])["manifest_digest"]
        .as_str()
        .expect("tree digest")
        .to_string();
    for d in [&ce, &tree] {
        a.json(["push", d, target, "--plain-http", "--json"]);
    }
    (a, target.clone(), ce, tree)
}

/// A fresh store B whose substituters file is `config`.
fn configured(config: Value) -> TestEnv {
    let b = TestEnv::new();
    fs::create_dir_all(&b.store).expect("store dir");
    write(&b.store.join("substituters.json"), config.to_string());
    b
}

/// A substituters file naming `targets` in order, with `extra` fields.
fn config_of(targets: &[&str], extra: Value) -> Value {
    let mut c = json!({
        "substituters": targets.iter().map(|t| json!({"registry": t})).collect::<Vec<_>>(),
    });
    if let (Some(c), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    c
}

/// The digests store `env` lists.
fn listed(env: &TestEnv) -> Vec<String> {
    let v = env.json(["list", "--json"]);
    v["snapshots"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    r["manifest_digest"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The message of a JSON error object; empty when it has none.
fn message(err: &Value) -> &str {
    err["message"].as_str().unwrap_or_default()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `path`, `checkout` and `stage --digest` of snapshots store B lacks
/// fetch them from its substituter; without a substituter, the same
/// commands answer as before (unknown digest).
#[test]
fn missing_snapshots_are_substituted_without_a_pull() {
    let Some(reg) = registry("missing_snapshots_are_substituted_without_a_pull") else {
        return;
    };
    let (a, target, ce, tree) = publish(&reg, "basic");

    // Without configuration: today's answer.
    let plain = TestEnv::new();
    let other = plain.plugin("other", "2.0.0");
    plain.ingest_digest(&other, "2.0.0");
    let out = plain.run(["path", &ce, "--json"]);
    assert_exit(&out, 4);
    assert_eq!(parse_json(&out)["error"]["kind"], "unknown-digest");

    // path: the shared view, the same files as A's. A lock file whose
    // record was cut short (a full disk, say) is no failure to report.
    let b = configured(config_of(&[&target], json!({})));
    write(
        &b.store.join(format!("locks/substitute-{ce}")),
        b"{\"at_ms\":99999999999999,\"kind\":\"remote\",\"message\":\"\xe2\x82",
    );
    let v = b.json(["path", &ce, "--json"]);
    let view = Path::new(v["path"].as_str().expect("path"));
    assert_eq!(
        fs::read(view.join("skills/ce-plan/salt.md")).expect("view file"),
        b"basic\n"
    );
    let a_view = a.json(["path", &ce, "--json"]);
    assert_eq!(
        names_in(view),
        names_in(Path::new(a_view["path"].as_str().expect("path")))
    );
    // checkout of a tree-kind snapshot.
    let dest = b.path("tree-view");
    b.json([os("checkout"), os(&tree), dest.as_os_str(), os("--json")]);
    assert!(dest.join("gitnexus/dist/index.js").is_file());
    let (code, report) = b.verify(&[]);
    assert_eq!(code, 0, "{report}");
    // checkout --writable too, in a store of its own.
    let w = configured(config_of(&[&target], json!({})));
    let copy = w.path("copy");
    w.json([
        os("checkout"),
        os("--writable"),
        os(&tree),
        copy.as_os_str(),
        os("--json"),
    ]);
    assert!(copy.join("gitnexus/dist/index.js").is_file());
    assert_eq!(listed(&w), [tree.as_str()]);
    // show says where each came from.
    let shown = b.json(["show", &ce, "--json"]);
    assert_eq!(shown["came_from"]["how"], "substituted", "{shown}");
    let source = shown["came_from"]["source"].as_str().unwrap_or_default();
    assert!(
        source.starts_with(&format!("oci://{target}@sha256:")),
        "{shown}"
    );
    let text = String::from_utf8_lossy(&b.run(["show", &ce]).stdout).into_owned();
    assert!(
        text.lines()
            .any(|l| l.starts_with("came_from:")
                && l.contains(&format!("substituted oci://{target}@"))),
        "{text}"
    );
    let shown_a = a.json(["show", &ce, "--json"]);
    assert_eq!(shown_a["came_from"]["how"], "ingested", "{shown_a}");
    // A pull by hand is a pull.
    let p = TestEnv::new();
    p.json([
        "pull",
        &format!("{target}:sha256-{ce}"),
        "--plain-http",
        "--json",
    ]);
    assert_eq!(
        p.json(["show", &ce, "--json"])["came_from"]["how"],
        "pulled"
    );

    // stage --digest in another store, configured by the environment alone.
    let c = TestEnv::new();
    let out = c
        .cmd(["stage", "--arm", "ce_review", "--digest", &ce, "--json"])
        .env("CESTORE_SUBSTITUTERS", &target)
        .output()
        .expect("run cestore");
    assert_ok(&out);
    let staged = parse_json(&out);
    assert_eq!(
        staged["provenance"]["manifest_digest"],
        ce.as_str(),
        "{staged}"
    );
    assert_eq!(listed(&c), [ce.as_str()]);
    // An empty list is none: a miss is today's unknown digest.
    write(
        &c.store.join("substituters.json"),
        config_of(&[&target], json!({})).to_string(),
    );
    let out = c
        .cmd(["path", &tree, "--json"])
        .env("CESTORE_SUBSTITUTERS", "")
        .output()
        .expect("run cestore");
    assert_exit(&out, 4);
    assert_eq!(listed(&c), [ce.as_str()]);
}

/// A prefix is never substituted, and the error's hint says so; a digest
/// no substituter has is an unknown digest naming them.
#[test]
fn a_prefix_is_never_substituted() {
    let Some(reg) = registry("a_prefix_is_never_substituted") else {
        return;
    };
    let (_a, target, ce, _) = publish(&reg, "prefix");
    let b = configured(config_of(&[&target], json!({})));
    let absent = "ab".repeat(32);
    let out = b.run(["path", &absent, "--json"]);
    assert_exit(&out, 4);
    let err = &parse_json(&out)["error"];
    assert!(message(err).contains(&target), "{err}");
    let out = b.run(["path", &ce[..12], "--json"]);
    assert_exit(&out, 4);
    let err = &parse_json(&out)["error"];
    assert_eq!(err["kind"], "unknown-digest", "{err}");
    assert!(
        err["hint"]
            .as_str()
            .unwrap_or_default()
            .contains("prefix is never fetched"),
        "{err}"
    );
    assert!(listed(&b).is_empty());
}

/// With trusted keys configured, an unsigned snapshot is refused (exit 9)
/// and nothing enters the store; signed by the key, it is taken.
#[test]
fn untrusted_substitutes_are_refused() {
    let Some(reg) = registry("untrusted_substitutes_are_refused") else {
        return;
    };
    let (a, target, ce, tree) = publish(&reg, "trust");
    let key = a.path("k");
    assert_ok(&a.run(["key", "generate", &s(&key)]));
    let public = format!("{}.pub", s(&key));
    // The tree is signed and pushed again, with its attestation.
    assert_ok(&a.run(["sign", &tree, "--key", &s(&key)]));
    a.json(["push", &tree, &target, "--plain-http", "--json"]);

    let b = configured(config_of(&[&target], json!({"trusted_keys": [public]})));
    let before = store_state(&b.store);
    let out = b.run(["path", &ce, "--json"]);
    assert_exit(&out, 9);
    let err = &parse_json(&out)["error"];
    assert_eq!(err["kind"], "untrusted", "{err}");
    assert!(listed(&b).is_empty());
    let after = store_state(&b.store);
    assert_eq!(before.snapshots, after.snapshots);
    assert_eq!(before.files, after.files);

    let dest = b.path("view");
    b.json([os("checkout"), os(&tree), dest.as_os_str(), os("--json")]);
    assert_eq!(listed(&b), [tree.as_str()]);
}

/// A port nothing listens on.
/// `n` concurrent `stage --arm ce_review --digest DIGEST --json` of `env`'s
/// store, started at once.
fn stages(env: &TestEnv, digest: &str, n: usize) -> Vec<std::process::Child> {
    (0..n)
        .map(|_| {
            env.cmd(["stage", "--arm", "ce_review", "--digest", digest, "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn cestore")
        })
        .collect()
}

fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    drop(l);
    port
}

/// A substituter that is down costs at most its timeout, for each of 16
/// concurrent stages: exit 8, a message naming it; with a second
/// substituter that has the snapshot, the stage succeeds.
#[test]
fn a_down_substituter_fails_in_bounded_time() {
    let Some(reg) = registry("a_down_substituter_fails_in_bounded_time") else {
        return;
    };
    let (_a, target, ce, _) = publish(&reg, "down");
    let down = format!("127.0.0.1:{}/bench/envs", closed_port());
    let timeout = 2;
    let b = configured(config_of(&[&down], json!({"timeout": timeout})));
    let start = Instant::now();
    let children = stages(&b, &ce, 16);
    let limit = Duration::from_secs(timeout + 2);
    let mut slowest = Duration::ZERO;
    for child in children {
        let out = finish(child, Duration::from_secs(60), "stage");
        let took = start.elapsed();
        slowest = slowest.max(took);
        assert!(took < limit, "took {took:?}");
        assert_exit(&out, 8);
        let err = &parse_json(&out)["error"];
        assert_eq!(err["kind"], "remote", "{err}");
        assert!(message(err).contains(&down), "{err}");
    }
    eprintln!(
        "16 stages against a closed port (timeout {timeout} s): the last ended after {slowest:?}"
    );
    assert!(listed(&b).is_empty());

    // The next substituter is asked.
    let c = configured(config_of(&[&down, &target], json!({"timeout": timeout})));
    let out = c.run(["stage", "--arm", "ce_review", "--digest", &ce, "--json"]);
    assert_ok(&out);
    assert_eq!(listed(&c), [ce]);
}

/// A process that finds another holding a digest's substitution lock
/// waits at most `wait` seconds, then fails as `remote` naming the
/// registries and, as its `path`, the lock it waited on. Needs no registry:
/// nothing is asked of the substituter.
#[test]
fn a_wait_on_another_substitution_is_bounded_and_names_its_lock() {
    let digest = "ab".repeat(32);
    let down = format!("127.0.0.1:{}/bench/envs", closed_port());
    let b = configured(config_of(&[&down], json!({"wait": 1})));
    let locks = b.store.join("locks");
    fs::create_dir_all(&locks).expect("lock dir");
    let lock = locks.join(format!("substitute-{digest}"));
    let held = fs::File::create(&lock).expect("lock file");
    held.lock().expect("hold the lock");
    let start = Instant::now();
    let out = b.run(["path", &digest, "--json"]);
    let took = start.elapsed();
    drop(held);
    assert!(took >= Duration::from_secs(1), "did not wait: {took:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_exit(&out, 8);
    let err = &parse_json(&out)["error"];
    assert_eq!(err["kind"], "remote", "{err}");
    assert_eq!(err["path"], s(&lock), "{err}");
    let said = message(err);
    assert!(said.contains(&down), "{err}");
    assert!(said.contains("another process"), "{err}");
    assert!(listed(&b).is_empty());
}

/// 16 concurrent `stage --digest D` against an empty store download D once:
/// the registry (behind a counting proxy) sees exactly the requests of one
/// substitution, every stage gets the one shared view, and verify is clean.
#[test]
fn sixteen_concurrent_stages_download_once() {
    let Some(reg) = registry("sixteen_concurrent_stages_download_once") else {
        return;
    };
    let proxy = Proxy::start(&reg, Behaviour::default());
    let (_a, target, ce, _) = publish(&proxy.address, "once");

    // What one substitution asks of the registry.
    let one = configured(config_of(&[&target], json!({})));
    proxy.reset();
    one.json(["path", &ce, "--json"]);
    let single = proxy.counts();
    assert!(single.get("GET").copied().unwrap_or(0) > 0, "{single:?}");

    let b = configured(config_of(&[&target], json!({})));
    proxy.reset();
    let start = Instant::now();
    let children = stages(&b, &ce, 16);
    let mut views = std::collections::BTreeSet::new();
    for child in children {
        let out = finish(child, Duration::from_secs(120), "stage");
        assert_ok(&out);
        let v = parse_json(&out);
        assert_eq!(v["provenance"]["manifest_digest"], ce.as_str(), "{v}");
        views.insert(v["view"].as_str().expect("view").to_string());
    }
    eprintln!(
        "16 concurrent stages: {:?}; requests {:?}, one substitution's {single:?}",
        start.elapsed(),
        proxy.counts()
    );
    assert_eq!(proxy.counts(), single, "{}", stdout_note(&b));
    assert_eq!(views.len(), 1, "{views:?}");
    let view = Path::new(views.iter().next().expect("one view"));
    assert_eq!(
        fs::read(view.join("skills/ce-plan/salt.md")).expect("view file"),
        b"once\n"
    );
    let (code, report) = b.verify(&[]);
    assert_eq!(code, 0, "{report}");
}

fn stdout_note(env: &TestEnv) -> String {
    stdout(&env.run(["list"]))
}

/// The configuration is printed as it takes effect, and a file breaking a
/// rule is refused as a usage error naming the file and the rule.
#[test]
fn the_configuration_is_printed_and_checked() {
    let b = configured(json!({
        "substituters": [{"registry": "127.0.0.1:5000/bench/envs"},
                         {"registry": "registry.example/bench/envs"}],
        "trusted_keys": ["keys/k.pub"],
        "timeout": 7
    }));
    let v = b.json(["substituters", "--json"]);
    assert_eq!(
        v["substituters"],
        json!([{"registry": "127.0.0.1:5000/bench/envs", "plain_http": true},
               {"registry": "registry.example/bench/envs", "plain_http": false}])
    );
    assert_eq!(v["substituters_from"], "file");
    assert_eq!(v["trusted_keys"], json!([s(&b.store.join("keys/k.pub"))]));
    assert_eq!(
        (v["timeout"].as_u64(), v["wait"].as_u64()),
        (Some(7), Some(600))
    );
    let out = b
        .cmd(["substituters", "--json"])
        .env("CESTORE_SUBSTITUTERS", "localhost:1/a")
        .output()
        .expect("run cestore");
    let v = parse_json(&out);
    assert_eq!(v["substituters_from"], "environment");
    assert_eq!(
        v["substituters"],
        json!([{"registry": "localhost:1/a", "plain_http": true}])
    );

    let bad = configured(json!({"substituters": [{"registry": "r.example/a:tag"}]}));
    for args in [
        vec!["substituters", "--json"],
        vec!["path", &"ab".repeat(32), "--json"],
    ] {
        let out = bad.run(&args);
        assert_exit(&out, 2);
        let err = &parse_json(&out)["error"];
        assert_eq!(err["rule"], "substituter-registry", "{err}");
        assert_eq!(
            err["path"],
            s(&bad.store.join("substituters.json")).as_str(),
            "{err}"
        );
    }
    // A snapshot the store holds needs no substituter: the broken file is
    // reported only when one would be asked, by digest as by version.
    let held = bad.plugin("held", "1.0.0");
    let digest = bad.ingest_digest(&held, "1.0.0");
    for name in [digest.as_str(), &digest[..12], "@1.0.0"] {
        let v = bad.json(["path", name, "--json"]);
        assert!(v["path"].is_string(), "{name}: {v}");
    }

    // A credential in a refused address is never shown, from the file or
    // from the environment.
    let secret = configured(json!({"substituters": [{"registry": "user:s3cret@r.example/a"}]}));
    let out = secret.run(["substituters", "--json"]);
    assert_exit(&out, 2);
    assert!(!describe(&out).contains("s3cret"), "{}", describe(&out));
    let out = secret
        .cmd(["path", &"cd".repeat(32), "--json"])
        .env("CESTORE_SUBSTITUTERS", "alice:hunter2@r.example/a")
        .output()
        .expect("run cestore");
    assert_exit(&out, 2);
    assert!(!describe(&out).contains("hunter2"), "{}", describe(&out));
    // `substituters --json` with a variable set to bytes that are not UTF-8.
    let with_bytes = |var: &str, bytes: &[u8]| {
        b.cmd(["substituters", "--json"])
            .env(
                var,
                <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(bytes),
            )
            .output()
            .expect("run cestore")
    };
    // A variable set but not UTF-8 is refused, never taken for unset.
    let out = with_bytes("CESTORE_SUBSTITUTERS", b"127.0.0.1:1/x\xff");
    assert_exit(&out, 2);
    assert_eq!(parse_json(&out)["error"]["rule"], "substituter-registry");
    // A key path that is not UTF-8 is kept, and reported as one JSON object.
    let out = with_bytes("CESTORE_SUBSTITUTER_TRUSTED_KEYS", b"/k\xff.pub");
    assert_exit(&out, 0);
    let v = parse_json(&out);
    assert_eq!(v["trusted_keys"], json!(["/k\u{fffd}.pub"]), "{v}");
    assert_eq!(v["trusted_keys_from"], "environment");

    // A FIFO in the file's place is refused at once, never opened to wait
    // on a writer.
    let fifo = TestEnv::new().within(Duration::from_secs(20));
    fs::create_dir_all(&fifo.store).expect("store dir");
    mkfifo(&fifo.store.join("substituters.json"));
    let out = fifo.run(["substituters", "--json"]);
    assert_exit(&out, 7);
    let err = &parse_json(&out)["error"];
    assert!(message(err).contains("a FIFO"), "{err}");
    assert_eq!(
        err["path"],
        s(&fifo.store.join("substituters.json")).as_str()
    );
}

/// `mounts --digest` and `audit` (digests of rows the store lacks, an
/// environment's with its members) are substituted too, and verify is
/// clean after.
#[test]
fn mounts_and_audit_substitute_too() {
    let Some(reg) = registry("mounts_and_audit_substitute_too") else {
        return;
    };
    let (a, target, ce, tree) = publish(&reg, "audit");
    let environment = a.json([
        "--json",
        "ingest",
        "--profile",
        "environment",
        "--member",
        &format!("ce_plugin_manifest_digest={ce}"),
        "--member",
        &format!("gitnexus_runtime_manifest_digest={tree}"),
    ])["manifest_digest"]
        .as_str()
        .expect("environment digest")
        .to_string();
    a.json(["push", &environment, &target, "--plain-http", "--json"]);

    // mounts --digest fetches the snapshot on the miss; its shared view is
    // still `path`'s to make, as for a snapshot stored by hand.
    let m = configured(config_of(&[&target], json!({})));
    let out = m.run(["mounts", "--arm", "ce_review", "--digest", &ce, "--json"]);
    assert_exit(&out, 4);
    let err = &parse_json(&out)["error"];
    assert!(message(err).contains("has no shared view"), "{err}");
    assert_eq!(listed(&m), [ce.as_str()]);
    m.json(["path", &ce, "--json"]);
    let v = m.json(["mounts", "--arm", "ce_review", "--digest", &ce, "--json"]);
    assert_eq!(v["manifest_digest"], ce.as_str(), "{v}");
    // --gitnexus-runtime D: fetched before its rules are asked.
    let out = m.run([
        "mounts",
        "--arm",
        "baseline",
        "--gitnexus-runtime",
        &tree,
        "--json",
    ]);
    // The test's tree is no whole runtime: past the store, its rules refuse
    // it (without the substitution, the digest would be unknown).
    assert_exit(&out, 4);
    assert_eq!(
        parse_json(&out)["error"]["rule"],
        "gitnexus-root-unavailable",
        "{}",
        stdout(&out)
    );
    let mut held = listed(&m);
    held.sort();
    let mut want = vec![ce.clone(), tree.clone()];
    want.sort();
    assert_eq!(held, want);

    // audit: the environment a row names, and its members.
    let b = configured(config_of(&[&target], json!({})));
    let file = b.path("results.jsonl");
    write_lines(
        &file,
        &[json!({
            "task_id": "task-001",
            "arm": "ce_review",
            "run": 1,
            "ce_plugin_version": "1.0.0",
            "ce_plugin_manifest_digest": ce,
            "environment_digest": environment,
        })],
    );
    let out = b.run([os("audit"), file.as_os_str(), os("--verify"), os("--json")]);
    let v = parse_json(&out);
    for d in array(&v["digests"]) {
        assert!(d["status"] == "pulled" || d["status"] == "ok", "{d} in {v}");
        assert_eq!(d["pull_error"], Value::Null, "{d}");
    }
    let mut all = listed(&b);
    all.sort();
    let mut want = vec![ce.clone(), tree.clone(), environment.clone()];
    want.sort();
    assert_eq!(all, want);
    // Each came by substitution, members included, with one event each.
    for d in [&ce, &tree, &environment] {
        let shown = b.json(["show", d, "--json"]);
        assert_eq!(shown["came_from"]["how"], "substituted", "{d}: {shown}");
        let log = b.json(["log", d, "--json"]);
        let events: Vec<&str> = array(&log["ingests"])
            .iter()
            .filter_map(|e| e["event"].as_str())
            .filter(|e| *e != "origin")
            .collect();
        assert_eq!(events, ["substitute"], "{d}: {log}");
    }
    let (code, report) = b.verify(&[]);
    assert_eq!(code, 0, "{report}");
}

/// A substituter that never answers costs the timeout (exit 8, naming
/// it); one that serves another snapshot's bytes under the digest's tag is
/// refused (exit 1, naming it) and nothing of it enters the store; with a
/// sound substituter after either, the snapshot comes from that one.
#[test]
fn slow_and_lying_substituters_are_bounded_and_passed_over() {
    let Some(reg) = registry("slow_and_lying_substituters_are_bounded_and_passed_over") else {
        return;
    };
    let (_a, target, ce, tree) = publish(&reg, "liar");

    // A server that takes connections and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let slow = format!("{}/bench/envs", silent.local_addr().expect("addr"));
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in silent.incoming() {
            held.push(c);
        }
    });
    let b = configured(config_of(&[&slow], json!({"timeout": 2})));
    let start = Instant::now();
    let out = b.run(["path", &ce, "--json"]);
    let took = start.elapsed();
    eprintln!("a silent substituter (timeout 2 s): {took:?}");
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert_exit(&out, 8);
    let err = &parse_json(&out)["error"];
    assert!(message(err).contains(&slow), "{err}");

    // The liar's tag for CE names the tree's image manifest.
    let liar = repo(&reg, "subst-liar-lies");
    let (host, path) = target.split_once('/').expect("registry/repository");
    let (_, liar_path) = liar.split_once('/').expect("registry/repository");
    let agent = crate::remote::raw_agent();
    let media = crate::remote::IMAGE_MANIFEST;
    let bytes = crate::remote::image_manifest(&agent, &target, &format!("sha256-{tree}"));
    // The blobs the manifest names, mounted into the liar's repository.
    let doc: Value = serde_json::from_slice(&bytes).expect("manifest JSON");
    let mut blobs = vec![doc["config"]["digest"]
        .as_str()
        .expect("config")
        .to_string()];
    blobs.extend(
        array(&doc["layers"])
            .iter()
            .map(|l| l["digest"].as_str().expect("layer").to_string()),
    );
    for d in &blobs {
        let r = agent
            .post(&format!(
                "http://{host}/v2/{liar_path}/blobs/uploads/?mount={d}&from={path}"
            ))
            .send_empty()
            .expect("mount a blob");
        assert_eq!(r.status().as_u16(), 201, "mount {d}");
    }
    let put = agent
        .put(&format!(
            "http://{host}/v2/{liar_path}/manifests/sha256-{ce}"
        ))
        .header("Content-Type", media)
        .send(&bytes[..])
        .expect("PUT manifest");
    assert_eq!(put.status().as_u16(), 201);

    let c = configured(config_of(&[&liar], json!({"timeout": 5})));
    let out = c.run(["path", &ce, "--json"]);
    assert_exit(&out, 1);
    let err = &parse_json(&out)["error"];
    assert_eq!(err["kind"], "integrity", "{err}");
    assert!(message(err).contains(&liar), "{err}");
    assert!(listed(&c).is_empty());

    // Each is passed over for the next.
    let d = configured(config_of(&[&slow, &liar, &target], json!({"timeout": 2})));
    d.json(["path", &ce, "--json"]);
    assert_eq!(listed(&d), [ce.as_str()]);
    let (code, report) = d.verify(&[]);
    assert_eq!(code, 0, "{report}");
}
