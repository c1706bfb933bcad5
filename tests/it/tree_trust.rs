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
/// digests and whether it verified.
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
/// attestation vouches for exactly the digest signed.
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
}
