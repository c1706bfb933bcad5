//! Secrets by content, beyond the reference: a file the reference keeps
//! (its filters go by name only) whose bytes look like a private key or a
//! token draws a warning from `ingest` and `stage`, is listed in their JSON
//! report, and with `--refuse-secrets` is refused (exit 3, rule
//! `secret-content`), nothing recorded. The scan only reads: the digest is
//! the reference's.

use std::path::Path;

use serde_json::{json, Value};

use crate::util::*;

/// A PEM private key's text, made here so that no header stands whole in
/// this file: an OpenSSH header, a body of base64 lines, its footer.
fn pem_key() -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let body: Vec<String> = (0..5)
        .map(|row| {
            (0..70)
                .map(|i| alphabet[(row * 70 + i * 7) % 64] as char)
                .collect()
        })
        .collect();
    let label = ["OPENSSH", "PRIVATE", "KEY"].join(" ");
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        body.join("\n")
    )
}

/// The minimal plugin with `skills/x/id_rsa` holding a PEM key: a name the
/// reference keeps.
fn release_with_a_key(root: &Path) {
    minimal_plugin(root, "1.0.0");
    write(&root.join("skills/x/id_rsa"), pem_key());
}

/// That release's digest, as the reference gives it (the oracle agrees,
/// where it is present).
const DIGEST_WITH_KEY: &str = "8e4f0dd2443256e6bf2576993e46635ff1b13b35ffb6618cb050ae8668490ff3";

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_key_the_reference_keeps_is_flagged_by_its_content() {
    let env = TestEnv::new();
    let src = env.path("src");
    release_with_a_key(&src);

    let out = env.ingest_out(&src, "1.0.0", &[]);
    assert_ok(&out);
    let v = parse_json(&out);
    assert_eq!(
        v["ingest"]["secrets_by_content"],
        json!([{"path": "skills/x/id_rsa", "kind": "private-key", "line": 1}])
    );
    let warned = stderr(&out);
    assert_eq!(
        warned,
        "cestore: warning: kept 'skills/x/id_rsa', which looks like a private key by its \
         content (line 1): the reference's filters go by name only (--refuse-secrets \
         refuses such a release)\n"
    );
    // Kept, and digested as the reference digests it.
    let d = digest_of(&v);
    assert_eq!(d, DIGEST_WITH_KEY);
    assert!(env.files(&d).iter().any(|f| f.path == "skills/x/id_rsa"));
    let digest = env.json([
        "digest",
        src.to_str().unwrap(),
        "--version",
        "1.0.0",
        "--json",
    ]);
    assert_eq!(digest_of(&digest), d);
    match oracle_snapshot(&src, "1.0.0") {
        Some(o) => assert_eq!(o["provenance"]["manifest_digest"], d.as_str()),
        None => skip(
            "secrets::a_key_the_reference_keeps_is_flagged_by_its_content (the oracle's digest)",
            "../shared/reference/oracle.py is not present; the committed digest is checked",
        ),
    }
    // In text too, the warning goes to stderr and the report is unchanged.
    let out = env.run(["ingest", src.to_str().unwrap(), "--version", "1.0.0"]);
    assert_ok(&out);
    assert!(stderr(&out).contains("kept 'skills/x/id_rsa'"));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&d));
}

#[test]
fn refuse_secrets_refuses_the_release_and_records_nothing() {
    let env = TestEnv::new();
    let src = env.path("src");
    release_with_a_key(&src);
    let dest = env.path("view");
    let (src_arg, dest_arg) = (src.to_str().unwrap(), dest.to_str().unwrap());
    let stage = ["stage", "--arm", "ce_review", "--plugin-dir", src_arg];
    let stage = [&stage[..], &["--plugin-version", "1.0.0"]].concat();
    let stage_to_dest = [&stage[..], &["--dest", dest_arg]].concat();
    for args in [
        vec!["ingest", src_arg, "--version", "1.0.0"],
        stage_to_dest.clone(),
        stage,
    ] {
        let mut refused = args.clone();
        refused.extend(["--refuse-secrets", "--json"]);
        let out = env.run(&refused);
        assert_exit(&out, 3);
        let v = parse_json(&out);
        assert_eq!(v["ok"], false);
        let e = &v["error"];
        assert_eq!(
            (&e["kind"], &e["rule"]),
            (&json!("rejected"), &json!("secret-content"))
        );
        let path = src.join("skills/x/id_rsa").display().to_string();
        assert_eq!(e["path"], path.as_str());
        let message = e["message"].as_str().unwrap();
        assert!(
            message.contains("looks like a private key")
                && message.contains("--refuse-secrets")
                && message.ends_with(&path),
            "{message}"
        );
        // Nothing recorded: no snapshot, no object, no view.
        assert_eq!(env.json(["list", "--json"])["snapshots"], json!([]));
        assert!(store_files(&env.store).objects.is_empty());
        assert!(!dest.exists());
    }

    // stage without it: kept, warned, reported in its ingest.
    let out = env.run([&stage_to_dest[..], &["--json"]].concat());
    assert_ok(&out);
    let v = parse_json(&out);
    assert_eq!(
        v["ingest"]["secrets_by_content"][0]["path"],
        "skills/x/id_rsa"
    );
    assert!(stderr(&out).contains("kept 'skills/x/id_rsa', which looks like a private key"));
    assert!(dest.join("skills/x/id_rsa").is_file());
}

#[test]
fn tokens_are_flagged_at_every_path_and_the_reference_rules_come_first() {
    let (env, src) = crate::util::with_plugin("src", "1.0.0");
    let token = format!("export GH=ghp_{}\n", "x1".repeat(18));
    write(
        &src.join("scripts/deploy.sh"),
        format!("#!/bin/sh\n\n{token}"),
    );
    // The same content at a second path: flagged there too.
    write(
        &src.join("assets/deploy.sh.bak"),
        format!("#!/bin/sh\n\n{token}"),
    );
    write(
        &src.join("skills/ce-work/notes.md"),
        "A token looks like ghp_ and forty characters; none here.\n",
    );
    let v = env.ingest(&src, "1.0.0");
    let found: &Value = &v["ingest"]["secrets_by_content"];
    assert_eq!(
        found,
        &json!([
            {"path": "scripts/deploy.sh", "kind": "github-token", "line": 3},
            {"path": "assets/deploy.sh.bak", "kind": "github-token", "line": 3},
        ])
    );

    // A release that breaks a rule of the reference is refused for that
    // rule, secrets or not.
    let out = env.ingest_out(&src, "2.0.0", &["--refuse-secrets"]);
    assert_exit(&out, 3);
    assert_eq!(parse_json(&out)["error"]["rule"], "version-mismatch");
}
