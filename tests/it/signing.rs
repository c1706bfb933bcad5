//! Signed snapshots on the real binary: keys made by `cestore key generate`,
//! snapshots signed by `cestore sign` and `ingest --sign-with`, and what
//! `audit --trusted-key`, `verify --trusted-key` and `show` say of them; a
//! private key others may read is refused, and no private key byte is ever
//! printed or kept in the store.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::util::{self, assert_exit, assert_ok, chmod, parse_json, s, write, TestEnv};

/// A key pair made by `cestore key generate`.
struct Key {
    private: PathBuf,
    public: PathBuf,
    keyid: String,
}

fn generate(env: &TestEnv, name: &str) -> Key {
    let private = env.path(name);
    let v = env.json([
        OsStr::new("key"),
        OsStr::new("generate"),
        private.as_os_str(),
        OsStr::new("--json"),
    ]);
    let keyid = v["keyid"].as_str().expect("keyid").to_string();
    assert_eq!(keyid.len(), 64, "{v}");
    Key {
        public: PathBuf::from(format!("{}.pub", private.display())),
        private,
        keyid,
    }
}

/// Ingests the minimal plugin at `version` (with `extra` arguments);
/// returns its digest.
fn ingest(env: &TestEnv, version: &str, extra: &[&OsStr]) -> String {
    let release = env.plugin(&format!("release-{version}"), version);
    let mut args = vec![
        OsStr::new("ingest"),
        release.as_os_str(),
        OsStr::new("--version"),
        OsStr::new(version),
        OsStr::new("--json"),
    ];
    args.extend_from_slice(extra);
    util::digest_of(&env.json(&args))
}

fn sign(env: &TestEnv, digest: &str, key: &Key) -> Value {
    env.json([
        OsStr::new("sign"),
        OsStr::new(digest),
        OsStr::new("--key"),
        key.private.as_os_str(),
        OsStr::new("--json"),
    ])
}

/// `--trusted-key PUB` for each key.
fn trusting<'a>(keys: &[&'a Key]) -> Vec<&'a OsStr> {
    keys.iter()
        .flat_map(|k| [OsStr::new("--trusted-key"), k.public.as_os_str()])
        .collect()
}

/// A results file with one `ce_workflow` row per (version, digest).
fn results(env: &TestEnv, rows: &[(&str, &str)]) -> PathBuf {
    let text: String = rows
        .iter()
        .map(|(version, digest)| {
            format!(
                "{}\n",
                serde_json::json!({
                    "arm": "ce_workflow",
                    "ce_plugin_version": version,
                    "ce_plugin_manifest_digest": digest,
                })
            )
        })
        .collect();
    let path = env.path("results.jsonl");
    write(&path, text);
    path
}

/// `audit FILE ARGS`: its output, which must exit `code`.
fn audit(env: &TestEnv, file: &Path, args: &[&OsStr], code: i32) -> Output {
    let mut all = vec![OsStr::new("audit"), file.as_os_str()];
    all.extend_from_slice(args);
    let out = env.run(&all);
    assert_exit(&out, code);
    out
}

/// The JSON entry of `digest` in an audit report.
fn entry<'a>(report: &'a Value, digest: &str) -> &'a Value {
    report["digests"]
        .as_array()
        .expect("digests")
        .iter()
        .find(|d| d["manifest_digest"] == digest)
        .unwrap_or_else(|| panic!("{digest} in {report}"))
}

/// `verify ARGS --json`: the exit code and the report.
fn verify(env: &TestEnv, args: &[&OsStr]) -> (i32, Value) {
    let mut all = vec![OsStr::new("verify"), OsStr::new("--json")];
    all.extend_from_slice(args);
    let out = env.run(&all);
    (out.status.code().expect("exit code"), parse_json(&out))
}

/// The problems of a verify report of `kind`.
fn problems_of<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    util::problems(report)
        .iter()
        .filter(|p| p["kind"] == kind)
        .collect()
}

/// The attestation files kept of a snapshot.
fn attestation_files(store: &Path, digest: &str) -> Vec<PathBuf> {
    let dir = store.join("attestations").join(&digest[..2]).join(digest);
    let mut files: Vec<PathBuf> = match fs::read_dir(&dir) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

/// Three snapshots: one signed by A, one by B, one by nobody.
struct Signed {
    env: TestEnv,
    a: Key,
    b: Key,
    by_a: String,
    by_b: String,
    unsigned: String,
}

fn signed() -> Signed {
    let env = TestEnv::new();
    let (a, b) = (generate(&env, "a.key"), generate(&env, "b.key"));
    assert_ne!(a.keyid, b.keyid);
    let by_a = ingest(&env, "1.0.0", &[]);
    let by_b = ingest(&env, "1.1.0", &[]);
    let unsigned = ingest(&env, "1.2.0", &[]);
    let report = sign(&env, &by_a, &a);
    assert_eq!(report["keyid"], a.keyid.as_str(), "{report}");
    assert_eq!(report["manifest_digest"], by_a.as_str(), "{report}");
    sign(&env, &by_b, &b);
    Signed {
        env,
        a,
        b,
        by_a,
        by_b,
        unsigned,
    }
}

impl Signed {
    fn results(&self) -> PathBuf {
        results(
            &self.env,
            &[
                ("1.0.0", &self.by_a),
                ("1.1.0", &self.by_b),
                ("1.2.0", &self.unsigned),
            ],
        )
    }
}

#[test]
fn audit_names_the_key_that_signed_each_digest_and_fails_the_unsigned() {
    let r = signed();
    let file = r.results();
    let env = &r.env;

    // Without a key: no signature is asked for, and the audit passes.
    let plain = parse_json(&audit(env, &file, &[OsStr::new("--json")], 0));
    assert_eq!(plain["trusted_keys"], serde_json::json!([]), "{plain}");
    for d in [&r.by_a, &r.by_b, &r.unsigned] {
        assert_eq!(entry(&plain, d)["signature"], Value::Null, "{plain}");
        assert_eq!(entry(&plain, d)["status"], "ok", "{plain}");
    }

    // A alone: A's digest is signed, B's and the third are not.
    let mut args = trusting(&[&r.a]);
    args.push(OsStr::new("--json"));
    let v = parse_json(&audit(env, &file, &args, 1));
    assert_eq!(v["passed"], false);
    assert_eq!(v["trusted_keys"], serde_json::json!([r.a.keyid]), "{v}");
    let a = entry(&v, &r.by_a);
    assert_eq!(a["status"], "ok", "{v}");
    assert_eq!(
        a["signature"],
        serde_json::json!({"status": "signed", "keyid": r.a.keyid}),
        "{v}"
    );
    let b = entry(&v, &r.by_b);
    assert_eq!(b["status"], "unsigned", "{v}");
    assert_eq!(b["signature"]["status"], "unsigned", "{v}");
    let why = b["signature"]["why"].as_str().unwrap();
    assert!(
        why.contains(&r.b.keyid),
        "names the key that did sign: {why}"
    );
    let none = entry(&v, &r.unsigned);
    assert_eq!(none["status"], "unsigned", "{v}");
    assert!(
        crate::util::str_of(&none["signature"]["why"]).contains("no attestation"),
        "{v}"
    );
    assert!(
        crate::util::str_of(&v["verdict"]).starts_with("FAIL: 3 digests (1 ok, 2 unsigned)"),
        "{v}"
    );

    // The table: a `signed by` column naming A's key, and a note on the
    // unsigned ones.
    let human = String::from_utf8(audit(env, &file, &trusting(&[&r.a]), 1).stdout).unwrap();
    let lines: Vec<&str> = human.lines().collect();
    assert!(lines[0].trim_end().ends_with("signed by"), "{human}");
    let row = |d: &str| {
        *lines
            .iter()
            .find(|l| l.starts_with(d))
            .unwrap_or_else(|| panic!("{d} in {human}"))
    };
    assert!(row(&r.by_a).contains(" ok "), "{human}");
    assert!(row(&r.by_a).ends_with(&r.a.keyid), "{human}");
    assert!(row(&r.by_b).contains(" unsigned "), "{human}");
    assert!(row(&r.by_b).ends_with("unsigned"), "{human}");
    assert!(row(&r.unsigned).ends_with("unsigned"), "{human}");
    assert!(human.contains("  signature: "), "{human}");
    assert!(
        lines
            .last()
            .unwrap()
            .starts_with("FAIL: 3 digests (1 ok, 2 unsigned)"),
        "{human}"
    );

    // Both keys: B's digest is signed too; the third still fails.
    let both = trusting(&[&r.a, &r.b]);
    let mut args = both.clone();
    args.push(OsStr::new("--json"));
    let v = parse_json(&audit(env, &file, &args, 1));
    assert_eq!(entry(&v, &r.by_b)["status"], "ok", "{v}");
    assert_eq!(
        entry(&v, &r.by_b)["signature"]["keyid"],
        r.b.keyid.as_str(),
        "{v}"
    );
    assert_eq!(entry(&v, &r.unsigned)["status"], "unsigned", "{v}");

    // The same keys from one file, with a comment between them.
    let list = env.path("trusted-keys");
    write(
        &list,
        format!(
            "# staging\n{}# maintainers\n{}",
            fs::read_to_string(&r.a.public).unwrap(),
            fs::read_to_string(&r.b.public).unwrap()
        ),
    );
    let from_file = parse_json(&audit(
        env,
        &file,
        &[
            OsStr::new("--trusted-keys"),
            list.as_os_str(),
            OsStr::new("--json"),
        ],
        1,
    ));
    assert_eq!(from_file["digests"], v["digests"], "{from_file}");
    assert_eq!(from_file["trusted_keys"], v["trusted_keys"], "{from_file}");

    // Markdown says the same.
    let mut args = both.clone();
    args.push(OsStr::new("--markdown"));
    let md = String::from_utf8(audit(env, &file, &args, 1).stdout).unwrap();
    assert!(md.starts_with("| digest | status |"), "{md}");
    assert!(
        md.lines().next().unwrap().ends_with("| signed by |"),
        "{md}"
    );
    let md_row = |d: &str| {
        md.lines()
            .find(|l| l.contains(&format!("`{d}`")))
            .unwrap_or_else(|| panic!("{d} in {md}"))
            .to_string()
    };
    assert!(
        md_row(&r.by_a).ends_with(&format!("| {} |", r.a.keyid)),
        "{md}"
    );
    assert!(
        md_row(&r.by_b).ends_with(&format!("| {} |", r.b.keyid)),
        "{md}"
    );
    assert!(
        md_row(&r.unsigned).contains("| unsigned: signature: "),
        "{md}"
    );
    assert!(md_row(&r.unsigned).ends_with("| unsigned |"), "{md}");
    assert!(md.contains("**FAIL: 3 digests (2 ok, 1 unsigned)"), "{md}");

    // A digest the store does not hold stays `unknown`, and is not signed.
    let missing = "f".repeat(64);
    let file = results(env, &[("1.0.0", &r.by_a), ("9.9.9", &missing)]);
    let mut args = both;
    args.push(OsStr::new("--json"));
    let v = parse_json(&audit(env, &file, &args, 1));
    assert_eq!(entry(&v, &missing)["status"], "unknown", "{v}");
    assert_eq!(
        entry(&v, &missing)["signature"]["status"],
        "unsigned",
        "{v}"
    );
    assert_eq!(entry(&v, &r.by_a)["status"], "ok", "{v}");
}

#[test]
fn verify_checks_every_attestation_against_the_keys_trusted() {
    let r = signed();
    let env = &r.env;

    // Without a key: nothing about attestations, as before.
    let (code, plain) = verify(env, &[]);
    assert_eq!(code, 0, "{plain}");
    assert!(plain.get("attestations_checked").is_none(), "{plain}");
    assert!(plain.get("attestations_verified").is_none(), "{plain}");

    // A alone: B's attestation is a problem.
    let (code, v) = verify(env, &trusting(&[&r.a]));
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["attestations_checked"], 2, "{v}");
    assert_eq!(v["attestations_verified"], 1, "{v}");
    let found = problems_of(&v, "untrusted-attestation");
    assert_eq!(found.len(), 1, "{v}");
    let b_file = attestation_files(&env.store, &r.by_b);
    assert_eq!(b_file.len(), 1);
    assert_eq!(found[0]["path"], s(&b_file[0]), "{v}");
    assert_eq!(found[0]["severity"], "corruption", "{v}");
    assert_eq!(found[0]["snapshots"], serde_json::json!([r.by_b]), "{v}");
    assert!(
        found[0]["detail"].as_str().unwrap().contains(&r.b.keyid),
        "{v}"
    );

    // Of A's snapshot alone: nothing wrong.
    let mut args = trusting(&[&r.a]);
    args.push(OsStr::new(&r.by_a));
    let (code, v) = verify(env, &args);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["attestations_checked"], 1, "{v}");

    // Both keys: every attestation verifies; the human line counts them.
    let both = trusting(&[&r.a, &r.b]);
    let (code, v) = verify(env, &both);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["attestations_checked"], 2, "{v}");
    assert_eq!(v["attestations_verified"], 2, "{v}");
    let mut args = vec![OsStr::new("verify")];
    args.extend_from_slice(&both);
    let out = env.run(&args);
    assert_ok(&out);
    let human = String::from_utf8(out.stdout).unwrap();
    assert!(
        human.contains("2 attestations (2 signed by a key trusted): no problems"),
        "{human}"
    );

    // Not with --tree.
    let mut args = vec![
        OsStr::new("verify"),
        OsStr::new(&r.by_a),
        OsStr::new("--tree"),
        env.base.as_os_str(),
    ];
    args.extend_from_slice(&both);
    assert_exit(&env.run(&args), 2);
}

#[test]
fn a_tampered_or_misplaced_attestation_fails_verify() {
    let r = signed();
    let env = &r.env;
    let both = trusting(&[&r.a, &r.b]);

    // A's attestation of its snapshot, copied beside another snapshot: a
    // sound file (it hashes to its name), signed by a trusted key, but
    // about another digest.
    let a_file = attestation_files(&env.store, &r.by_a)[0].clone();
    let misplaced = env
        .store
        .join("attestations")
        .join(&r.unsigned[..2])
        .join(&r.unsigned)
        .join(a_file.file_name().unwrap());
    write(&misplaced, fs::read(&a_file).unwrap());
    chmod(&misplaced, 0o444);
    let (v, found) = the_one_problem(env, &both, "untrusted-attestation", &misplaced);
    assert!(
        crate::util::str_of(&found["detail"])
            .contains(&format!("its subject is {}, not this snapshot", r.by_a)),
        "{v}"
    );
    // Once recorded, it does not sign the snapshot it sits beside.
    env.json(["recover", "--json"]);
    let file = r.results();
    let mut args = both.clone();
    args.push(OsStr::new("--json"));
    let report = parse_json(&audit(env, &file, &args, 1));
    assert_eq!(
        entry(&report, &r.unsigned)["status"],
        "unsigned",
        "{report}"
    );
    assert!(
        entry(&report, &r.unsigned)["signature"]["why"]
            .as_str()
            .unwrap()
            .contains("its subject is"),
        "{report}"
    );
    assert_eq!(entry(&report, &r.by_a)["status"], "ok", "{report}");

    // One byte of the signature changed in B's file: it no longer hashes
    // to its name, so it is not the attestation recorded: a damaged file.
    let b_file = attestation_files(&env.store, &r.by_b)[0].clone();
    let text = fs::read_to_string(&b_file).unwrap();
    let at = text.find("\"sig\":\"").expect("a signature") + 7 + 10;
    let mut bytes = text.into_bytes();
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    chmod(&b_file, 0o644);
    fs::write(&b_file, &bytes).unwrap();
    chmod(&b_file, 0o444);
    let (v, damaged) = the_one_problem(env, &both, "damaged-attestation", &b_file);
    assert_eq!(damaged["severity"], "corruption", "{v}");
    assert!(
        crate::util::str_of(&damaged["detail"]).contains("do not hash to its name"),
        "{v}"
    );
    assert_eq!(v["attestations_checked"], 3, "{v}");
    assert_eq!(v["attestations_verified"], 1, "{v}");

    // Removed, `recover` writes the recorded one again, and it verifies.
    fs::remove_file(&b_file).unwrap();
    fs::remove_file(&misplaced).unwrap();
    env.json(["recover", "--json"]);
    let mut args = both.clone();
    args.push(OsStr::new(&r.by_b));
    let (code, v) = verify(env, &args);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["attestations_verified"], 1, "{v}");
}

#[test]
fn show_lists_who_signed_oldest_first() {
    let r = signed();
    let env = &r.env;
    let later = sign(env, &r.by_a, &r.b);
    let v = env.json(["show", &r.by_a, "--json"]);
    let listed = v["attestations"].as_array().expect("attestations");
    assert_eq!(listed.len(), 2, "{v}");
    assert_eq!(listed[0]["keyid"], r.a.keyid.as_str(), "{v}");
    assert_eq!(listed[1]["keyid"], r.b.keyid.as_str(), "{v}");
    assert_eq!(listed[1]["id"], later["attestation"], "{v}");
    assert_eq!(listed[1]["at"], later["at"], "{v}");
    let none = env.json(["show", &r.unsigned, "--json"]);
    assert_eq!(none["attestations"], serde_json::json!([]), "{none}");

    let out = env.run(["show", &r.by_a]);
    assert_ok(&out);
    let human = String::from_utf8(out.stdout).unwrap();
    assert!(human.contains("signed by:               2\n"), "{human}");
    for (key, at) in [
        (&r.a.keyid, &listed[0]["at"]),
        (&r.b.keyid, &listed[1]["at"]),
    ] {
        assert!(
            human.contains(&format!("  key {key} at {}", at.as_str().unwrap())),
            "{human}"
        );
    }
}

#[test]
fn ingest_sign_with_is_signed_in_an_audit() {
    let env = TestEnv::new();
    let key = generate(&env, "stager.key");
    let d = ingest(
        &env,
        "2.0.0",
        &[OsStr::new("--sign-with"), key.private.as_os_str()],
    );
    let file = results(&env, &[("2.0.0", &d)]);
    let mut args = trusting(&[&key]);
    args.push(OsStr::new("--json"));
    let v = parse_json(&audit(&env, &file, &args, 0));
    assert_eq!(v["passed"], true, "{v}");
    assert_eq!(
        entry(&v, &d)["signature"],
        serde_json::json!({"status": "signed", "keyid": key.keyid}),
        "{v}"
    );
}

/// The base64 lines of a PEM file: the key's bytes.
fn pem_body(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("-----") && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// Every regular file under `dir`, read whole.
fn every_file(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let ty = e.file_type().unwrap();
        if ty.is_dir() {
            every_file(&e.path(), out);
        } else if ty.is_file() {
            out.push((e.path(), fs::read(e.path()).unwrap()));
        }
    }
}

#[test]
fn an_open_private_key_is_refused_and_no_private_byte_leaves_its_file() {
    let r = signed();
    let env = &r.env;
    let body = pem_body(&r.a.private);
    assert!(!body.is_empty());

    // A private key others may read: exit 9, bad-key, the file and the fix
    // named, and the store as it was.
    chmod(&r.a.private, 0o644);
    let before = (
        util::store_state(&env.store),
        attestation_files(&env.store, &r.unsigned),
    );
    let out = env.run([
        OsStr::new("sign"),
        OsStr::new(&r.unsigned),
        OsStr::new("--key"),
        r.a.private.as_os_str(),
    ]);
    let stderr = assert_exit(&out, 9);
    assert!(stderr.contains(&s(&r.a.private)), "{stderr}");
    assert!(stderr.contains("chmod 600"), "{stderr}");
    let out = env.run([
        OsStr::new("sign"),
        OsStr::new(&r.unsigned),
        OsStr::new("--key"),
        r.a.private.as_os_str(),
        OsStr::new("--json"),
    ]);
    assert_exit(&out, 9);
    let err = parse_json(&out);
    assert_eq!(err["error"]["kind"], "bad-key", "{err}");
    assert_eq!(err["error"]["path"], s(&r.a.private), "{err}");
    let after = (
        util::store_state(&env.store),
        attestation_files(&env.store, &r.unsigned),
    );
    assert_eq!(before, after);
    assert!(after.1.is_empty());
    chmod(&r.a.private, 0o600);

    // Every output of signing, and every file of the store, is free of the
    // private key's bytes.
    let mut outputs = vec![
        env.run(["key", "generate", &s(&env.path("c.key"))]),
        env.run([
            OsStr::new("sign"),
            OsStr::new(&r.unsigned),
            OsStr::new("--key"),
            r.a.private.as_os_str(),
        ]),
        env.run(["show", &r.unsigned]),
        env.run(["attestations", &r.unsigned, "--json"]),
        env.run(["attestations", &r.by_a]),
    ];
    let file = r.results();
    outputs.push(audit(env, &file, &trusting(&[&r.a]), 1));
    let mut secrets = body;
    secrets.extend(pem_body(&env.path("c.key")));
    for out in &outputs {
        assert_ok_or_audit(out);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for line in &secrets {
            assert!(
                !text.contains(line.as_str()),
                "a private key line in {text}"
            );
        }
    }
    let mut files = Vec::new();
    every_file(&env.store, &mut files);
    assert!(files
        .iter()
        .any(|(p, _)| p.starts_with(env.store.join("attestations"))));
    for (path, bytes) in &files {
        for line in &secrets {
            assert!(
                !bytes.windows(line.len()).any(|w| w == line.as_bytes()),
                "a private key line in {}",
                path.display()
            );
        }
    }
}

/// Every command but the failing audit succeeds.
fn assert_ok_or_audit(out: &Output) {
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(1),
        "{}",
        util::describe(out)
    );
}

/// `verify --json ARGS`, which must exit 1 with exactly one problem of
/// `kind`, at `path`: the report and that problem.
fn the_one_problem(env: &TestEnv, args: &[&OsStr], kind: &str, path: &Path) -> (Value, Value) {
    let (code, v) = verify(env, args);
    assert_eq!(code, 1, "{v}");
    let found = problems_of(&v, kind);
    assert_eq!(found.len(), 1, "{v}");
    assert_eq!(found[0]["path"], s(path), "{v}");
    let problem = found[0].clone();
    (v, problem)
}
