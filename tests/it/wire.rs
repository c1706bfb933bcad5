//! What push and pull send over the wire: request counts through the test
//! proxy (tests/it/proxy.rs), `429` retries, one token per scope, monolithic
//! uploads, cross-repository mounts, and credential helpers against a real
//! registry that wants a password.
//!
//! Like the other registry tests these need `CESTORE_TEST_REGISTRY`; the
//! credential-helper test starts its own registry with `docker-registry`.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::proxy::{Behaviour, Proxy, Script, Scripted};
use crate::remote::{bounds_release, noise, registry, repo, salt};
use crate::util::*;

/// A release of `extra` generated files besides the minimal plugin, spread
/// over a few directories, a few of them executable.
fn spread_release(root: &Path, extra: usize, salt: u64) {
    minimal_plugin(root, "1.0.0");
    for i in 0..extra {
        let path = root.join(format!("skills/gen{}/file{i:04}.md", i % 3));
        write(&path, noise(salt, i as u64, 200 + i * 7));
        if i % 4 == 3 {
            chmod(&path, 0o755);
        }
    }
}

/// A fresh store holding a [`spread_release`] of `extra` files, and its digest.
fn ingested_release(extra: usize) -> (TestEnv, String) {
    let env = TestEnv::new();
    let src = env.path("src");
    spread_release(&src, extra, salt());
    let digest = env.ingest_digest(&src, "1.0.0");
    (env, digest)
}

fn push_args<'a>(digest: &'a str, target: &'a str) -> Vec<&'a str> {
    vec!["push", digest, target, "--plain-http", "--json"]
}

fn count(counts: &std::collections::BTreeMap<String, u64>, method: &str) -> u64 {
    counts.get(method).copied().unwrap_or(0)
}

#[test]
fn a_throttled_registry_is_retried_and_the_transfer_completes() {
    let Some(reg) = registry("throttled") else {
        return;
    };
    let proxy = proxy_with(&reg, |b| b.throttle_first = 5);
    let (a, digest) = ingested_release(12);
    let target = repo(&proxy.address, "throttled");
    let report = a.json(push_args(&digest, &target));
    assert_eq!(proxy.throttled(), 5);
    assert_eq!(report["requests"]["retried"], 5, "{report}");
    assert_eq!(report["requests"]["total"], proxy.total(), "{report}");
    assert_eq!(report["blobs_present"], 0, "{report}");

    // A pull through the same proxy, throttled again, gets the same tree.
    let throttling = proxy_with(&reg, |b| b.throttle_first = 3);
    let b = TestEnv::new();
    let reference = format!(
        "{}:sha256-{digest}",
        target.replacen(&proxy.address, &throttling.address, 1)
    );
    let pulled = b.json(["pull", &reference, "--plain-http", "--json"]);
    assert_eq!(pulled["pull"]["requests"]["retried"], 3, "{pulled}");
    assert_eq!(pulled["provenance"]["manifest_digest"], digest.as_str());
    b.json(["verify", &digest, "--json"]);
}

#[test]
fn a_registry_that_keeps_throttling_is_given_up_on_with_a_clear_error() {
    let Some(reg) = registry("throttled_forever") else {
        return;
    };
    let proxy = proxy_with(&reg, |b| b.throttle_first = u64::MAX);
    let (a, digest) = ingested_release(2);
    let target = repo(&proxy.address, "throttled-forever");
    let out = a.run(push_args(&digest, &target));
    let stderr = assert_exit(&out, 8);
    assert!(stderr.contains("429"), "{stderr}");
    assert_eq!(parse_json(&out)["error"]["kind"], "remote");
    // Six attempts per request at most, and the first request failed the push.
    assert!(proxy.total() <= 6 * 8, "{:?}", proxy.counts());
}

#[test]
fn a_repush_sends_no_blob_uploads() {
    let Some(reg) = registry("repush_wire") else {
        return;
    };
    let proxy = Proxy::start(&reg, Behaviour::default());
    let (a, digest) = ingested_release(20);
    let target = repo(&proxy.address, "repush-wire");
    a.json(push_args(&digest, &target));
    proxy.reset();
    let report = a.json(push_args(&digest, &target));
    let counts = proxy.counts();
    assert_eq!(count(&counts, "POST"), 0, "{counts:?}");
    // The one PUT is the image manifest.
    assert_eq!(count(&counts, "PUT"), 1, "{counts:?}");
    assert_eq!(report["blobs_uploaded"], 0, "{report}");
    assert_eq!(report["requests"]["post"], 0, "{report}");
    assert_eq!(
        report["requests"]["bytes_sent"].as_u64(),
        Some({
            // Only the manifest's bytes.
            let url = crate::remote::manifest_url(
                &format!("{reg}/{}", target.split_once('/').expect("repo").1),
                &format!("sha256-{digest}"),
            );
            let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
            let mut resp = agent
                .get(&url)
                .header("Accept", "application/vnd.oci.image.manifest.v1+json")
                .call()
                .expect("GET the manifest");
            resp.body_mut().read_to_vec().expect("manifest body").len() as u64
        }),
        "{report}"
    );
}

#[test]
fn one_token_serves_every_request_of_a_scope() {
    let Some(reg) = registry("one_token") else {
        return;
    };
    let proxy = proxy_with(&reg, |b| b.bearer = true);
    let a = TestEnv::new();
    let src = a.path("src");
    spread_release(&src, 10, salt());
    // Contents of 256 KiB and more travel as blobs of their own in either
    // format: more blobs than threads.
    let s = salt();
    for i in 0..16 {
        write(
            &src.join(format!("assets/big{i:02}.bin")),
            noise(s, 1000 + i, 256 * 1024 + i as usize),
        );
    }
    let digest = a.ingest_digest(&src, "1.0.0");
    let target = repo(&proxy.address, "one-token");
    let report = a.json([
        "push",
        &digest,
        &target,
        "--plain-http",
        "--json",
        "--jobs",
        "8",
    ]);
    let counts = proxy.counts();
    assert_eq!(count(&counts, "TOKEN"), 1, "{counts:?}");
    assert_eq!(report["requests"]["token"], 1, "{report}");
    let repository = target.split_once('/').expect("repo").1;
    assert_eq!(
        proxy.token_scopes(),
        vec![format!(
            "repository:{repository}:pull,push repository:any:pull"
        )]
    );
    // Twice as many blobs as threads, each asked for and uploaded: most
    // requests carried the token without asking.
    assert!(count(&counts, "HEAD") >= 16, "{counts:?}");
    assert!(count(&counts, "PUT") >= 16, "{counts:?}");

    proxy.reset();
    let b = TestEnv::new();
    let pulled = b.json([
        "pull",
        &format!("{target}:sha256-{digest}"),
        "--plain-http",
        "--json",
        "--jobs",
        "8",
    ]);
    assert_eq!(count(&proxy.counts(), "TOKEN"), 1, "{:?}", proxy.counts());
    assert_eq!(pulled["pull"]["requests"]["token"], 1, "{pulled}");
}

#[test]
fn a_registry_that_takes_one_post_per_blob_gets_one_post_per_blob() {
    let Some(reg) = registry("monolithic") else {
        return;
    };
    let proxy = proxy_with(&reg, |b| b.monolithic = true);
    let (a, digest) = ingested_release(10);
    let target = repo(&proxy.address, "monolithic");
    let report = a.json(push_args(&digest, &target));
    let uploaded = report["blobs_uploaded"].as_u64().expect("uploaded");
    let counts = proxy.counts();
    // One POST per blob, plus the one that asked (with the empty blob) whether
    // the registry takes them; the only PUT is the manifest.
    assert_eq!(count(&counts, "POST"), uploaded + 1, "{counts:?}");
    assert_eq!(count(&counts, "PUT"), 1, "{counts:?}");
    let b = TestEnv::new();
    let pulled = b.json([
        "pull",
        &format!("{target}:sha256-{digest}"),
        "--plain-http",
        "--json",
    ]);
    assert_eq!(pulled["provenance"]["manifest_digest"], digest.as_str());
    b.json(["verify", &digest, "--json"]);

    // The CNCF registry opens a session instead (202): that session takes the
    // first blob, so asking costs no request there.
    let (direct, digest) = ingested_release(10);
    let report = direct.json(push_args(&digest, &repo(&reg, "not-monolithic")));
    let uploaded = report["blobs_uploaded"].as_u64().expect("uploaded");
    assert_eq!(
        report["requests"]["post"].as_u64(),
        Some(uploaded),
        "{report}"
    );
    assert_eq!(
        report["requests"]["put"].as_u64(),
        Some(uploaded + 1),
        "{report}"
    );
}

#[test]
fn a_push_to_another_repository_mounts_what_the_registry_already_holds() {
    let Some(reg) = registry("mount") else {
        return;
    };
    let (a, digest) = ingested_release(15);
    let first = repo(&reg, "mount-from");
    let pushed = a.json(push_args(&digest, &first));
    let blobs = pushed["blobs_total"].as_u64().expect("blobs");
    assert_eq!(pushed["requests"]["mounted"], 0, "{pushed}");

    let second = repo(&reg, "mount-to");
    let report = a.json(push_args(&digest, &second));
    assert_eq!(
        report["requests"]["mounted"].as_u64(),
        Some(blobs),
        "{report}"
    );
    // No blob bytes went up: one POST per blob (the mount) and the manifest.
    assert_eq!(report["requests"]["put"], 1, "{report}");
    assert_eq!(report["requests"]["post"].as_u64(), Some(blobs), "{report}");

    let b = TestEnv::new();
    b.json([
        "pull",
        &format!("{second}:sha256-{digest}"),
        "--plain-http",
        "--json",
    ]);
    b.json(["verify", &digest, "--json"]);

    // Another registry is another namespace: nothing is mounted there.
    let proxy = Proxy::start(&reg, Behaviour::default());
    let elsewhere = repo(&proxy.address, "mount-elsewhere");
    let report = a.json(push_args(&digest, &elsewhere));
    assert_eq!(report["requests"]["mounted"], 0, "{report}");
}

/// Cold push and cold pull of a release at the bounds through a proxy 25 ms
/// away: each within 150 requests.
#[test]
fn a_release_at_the_bounds_moves_in_at_most_150_requests_each_way() {
    let Some(reg) = registry("bounds_requests") else {
        return;
    };
    let proxy = proxy_with(&reg, |b| b.delay = Duration::from_millis(25));
    let a = TestEnv::new();
    let src = a.path("src");
    bounds_release(&src, salt());
    let digest = a.ingest_digest(&src, "1.0.0");
    let target = repo(&proxy.address, "bounds-requests");
    let start = Instant::now();
    let report = a.json(push_args(&digest, &target));
    let push_secs = start.elapsed().as_secs_f64();
    let pushed = proxy.total();
    proxy.reset();
    let b = TestEnv::new();
    let start = Instant::now();
    let pulled = b.json([
        "pull",
        &format!("{target}:sha256-{digest}"),
        "--plain-http",
        "--json",
    ]);
    let pull_secs = start.elapsed().as_secs_f64();
    let fetched = proxy.total();
    eprintln!(
        "at the bounds, 25 ms away: push {pushed} requests in {push_secs:.1} s, pull {fetched} requests in {pull_secs:.1} s"
    );
    assert_eq!(report["requests"]["total"], pushed, "{report}");
    assert_eq!(pulled["pull"]["requests"]["total"], fetched, "{pulled}");
    assert!(pushed <= 150, "a cold push sent {pushed} requests");
    assert!(fetched <= 150, "a cold pull sent {fetched} requests");
}

/// A throwaway CNCF registry that wants a user and password (htpasswd,
/// bcrypt), stopped when dropped.
struct PasswordRegistry {
    child: Child,
    address: String,
    _dir: tempfile::TempDir,
}

/// The one user of [`PasswordRegistry`] and its password.
const USER: &str = "helper-user";
const PASSWORD: &str = "s3cret";
/// bcrypt (cost 4, to keep every request cheap) of [`PASSWORD`].
const PASSWORD_HASH: &str = "$2b$04$KX18lUwcx137gRFbfawGC.RZpw5FWdKHUTVBsGzYWFM8lH3XLL4h2";

impl PasswordRegistry {
    fn start() -> Option<PasswordRegistry> {
        if Command::new("docker-registry")
            .arg("--version")
            .output()
            .is_err()
        {
            crate::util::skip(
                "the password-protected registry tests",
                "docker-registry is not installed",
            );
            return None;
        }
        let dir = tempfile::tempdir().expect("registry dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let root = dir.path();
        write(&root.join("htpasswd"), format!("{USER}:{PASSWORD_HASH}\n"));
        write(
            &root.join("config.yml"),
            format!(
                "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {root}\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: cestore-wire-test\nauth:\n  htpasswd:\n    realm: cestore-test\n    path: {root}/htpasswd\n",
                root = root.display()
            ),
        );
        let mut child = Command::new("docker-registry")
            .arg("serve")
            .arg(root.join("config.yml"))
            .stdout(Stdio::null())
            .stderr(fs::File::create(root.join("log")).expect("log"))
            .spawn()
            .expect("start docker-registry");
        let address = format!("127.0.0.1:{port}");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(r) = agent.get(&format!("http://{address}/v2/")).call() {
                let running = PasswordRegistry {
                    child,
                    address,
                    _dir: dir,
                };
                assert_eq!(r.status(), 401, "the registry must want a password");
                return Some(running);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "the password registry did not start: {}",
            fs::read_to_string(root.join("log")).unwrap_or_default()
        );
    }
}

impl Drop for PasswordRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `docker-credential-test` into `bin`: it logs each registry it is
/// asked about to `calls` and answers with `USER` and `PASSWORD`, or as
/// `mode` says.
fn credential_helper(bin: &Path, calls: &Path, mode: &str) {
    let answer = match mode {
        "good" => format!(
            r#"printf '{{"ServerURL":"%s","Username":"{USER}","Secret":"{PASSWORD}"}}' "$host""#
        ),
        "wrong" => {
            format!(r#"printf '{{"ServerURL":"%s","Username":"{USER}","Secret":"nope"}}' "$host""#)
        }
        "identity" => {
            r#"printf '{"ServerURL":"%s","Username":"<token>","Secret":"refresh"}' "$host""#
                .to_string()
        }
        "missing" => "echo 'credentials not found in native keychain'; exit 1".to_string(),
        _ => "echo 'the keychain is locked' >&2; exit 3".to_string(),
    };
    let log = format!("echo \"$host\" >> '{}'", calls.display());
    scripted_helper(bin, "test", &format!("{log}\n{answer}"));
}

/// Runs cestore with a Docker config and `bin` first on `PATH`, and no other credentials.
fn run_with_helper(
    env: &TestEnv,
    args: &[&str],
    config: &Path,
    bin: &Path,
) -> std::process::Output {
    let mut cmd = env.cmd(args);
    for k in [
        "CESTORE_REGISTRY_TOKEN",
        "CESTORE_REGISTRY_USER",
        "CESTORE_REGISTRY_PASSWORD",
    ] {
        cmd.env_remove(k);
    }
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.env("PATH", format!("{}:{path}", bin.display()))
        .env("HOME", env.path("home"))
        .env("DOCKER_CONFIG", config);
    cmd.output().expect("run cestore")
}

/// `cestore pull REFERENCE --plain-http EXTRA... --json`, run as
/// [`run_with_helper`] runs it.
fn pull_with_helper(
    env: &TestEnv,
    reference: &str,
    extra: &[&str],
    config: &Path,
    bin: &Path,
) -> std::process::Output {
    let mut args = vec!["pull", reference, "--plain-http"];
    args.extend_from_slice(extra);
    args.push("--json");
    run_with_helper(env, &args, config, bin)
}

#[test]
fn a_credential_helper_answers_a_registry_that_wants_a_password() {
    let Some(registry) = PasswordRegistry::start() else {
        return;
    };
    let (a, digest) = ingested_release(6);
    let bin = a.path("bin");
    fs::create_dir_all(&bin).expect("bin");
    let calls = a.path("calls");
    let target = format!("{}/cestore-it/helper", registry.address);
    let reference = format!("{target}:sha256-{digest}");

    // credHelpers names the helper for this registry.
    let per_registry = a.path("docker-helpers");
    write(
        &per_registry.join("config.json"),
        format!(
            r#"{{"credHelpers":{{"{}":"test"}},"credsStore":"absent"}}"#,
            registry.address
        ),
    );
    credential_helper(&bin, &calls, "good");
    let out = run_with_helper(&a, &push_args(&digest, &target), &per_registry, &bin);
    assert_ok(&out);
    assert_eq!(parse_json(&out)["blobs_present"], 0);
    // Asked once, with the registry's host, for all the push's requests.
    assert_eq!(
        fs::read_to_string(&calls).expect("calls"),
        format!("{}\n", registry.address)
    );

    // credsStore is the helper for every registry credHelpers does not name.
    let store_wide = a.path("docker-store");
    write(
        &store_wide.join("config.json"),
        r#"{"credsStore":"test","credHelpers":{"elsewhere.example":"absent"}}"#,
    );
    let b = TestEnv::new();
    let out = pull_with_helper(&b, &reference, &[], &store_wide, &bin);
    assert_ok(&out);
    assert_eq!(
        parse_json(&out)["provenance"]["manifest_digest"],
        digest.as_str()
    );

    // Wrong, absent, failing and unusable answers: exit 8, naming the helper
    // where it failed, and nothing enters the store.
    for (mode, says) in [
        ("wrong", "401"),
        ("missing", "no credentials"),
        ("failing", "docker-credential-test failed"),
        ("identity", "identity token"),
    ] {
        credential_helper(&bin, &calls, mode);
        let c = TestEnv::new();
        let out = pull_with_helper(&c, &reference, &[], &store_wide, &bin);
        let stderr = assert_exit(&out, 8);
        assert!(stderr.contains(says), "{mode}: {stderr}");
        assert!(stderr.contains("authentication"), "{mode}: {stderr}");
        assert_eq!(parse_json(&out)["error"]["kind"], "remote", "{mode}");
        let listed = c.run(["list", "--json"]);
        if listed.status.success() {
            assert_eq!(
                parse_json(&listed)["snapshots"],
                serde_json::json!([]),
                "{mode}"
            );
        }
    }

    // A helper that is not on PATH is named.
    let nowhere = a.path("docker-nowhere");
    write(&nowhere.join("config.json"), r#"{"credsStore":"nowhere"}"#);
    let out = run_with_helper(&b, &push_args(&digest, &target), &nowhere, &bin);
    let stderr = assert_exit(&out, 8);
    assert!(stderr.contains("docker-credential-nowhere"), "{stderr}");
}

/// A registry that answers as `script` says, and the reference of a
/// snapshot in its repository `cestore/NAME`.
fn scripted_registry(script: Script, name: &str) -> (Scripted, String) {
    let registry = Scripted::start(script);
    let reference = format!(
        "{}/cestore/{name}:sha256-{}",
        registry.address,
        "ab".repeat(32)
    );
    (registry, reference)
}

/// A registry that asks for user `u` and password `pw`, and the reference of
/// a snapshot it does not hold.
fn locked_registry() -> (Scripted, String) {
    scripted_registry(
        Script::Locked {
            user: "u".into(),
            password: "pw".into(),
        },
        "locked",
    )
}

/// Writes `docker-credential-NAME` into `bin`: a shell script that checks
/// its argument, reads the registry from stdin, then runs `body`.
fn scripted_helper(bin: &Path, name: &str, body: &str) {
    let path = bin.join(format!("docker-credential-{name}"));
    write(
        &path,
        format!("#!/bin/sh\n[ \"$1\" = get ] || exit 2\nread host\n{body}\n"),
    );
    chmod(&path, 0o755);
}

/// A Docker config naming the helper `name` for every registry.
fn helper_config(env: &TestEnv, name: &str) -> std::path::PathBuf {
    let dir = env.path(&format!("docker-{name}"));
    write(
        &dir.join("config.json"),
        format!(r#"{{"credsStore":"{name}"}}"#),
    );
    dir
}

/// Whether the process `pid` is still running (a zombie is not).
fn running(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().chars().next())
        })
        .flatten()
        .is_some_and(|state| state != 'Z')
}

/// Waits (at most `within`) for the pid file a helper's child writes, and
/// returns that pid.
fn child_pid(file: &Path, within: Duration) -> u32 {
    let deadline = Instant::now() + within;
    loop {
        if let Some(pid) = fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", file.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Asserts that `pid` is gone within `within`, killing it if not.
fn assert_process_gone(pid: u32, within: Duration) {
    let deadline = Instant::now() + within;
    while running(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if running(pid) {
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        panic!("the helper's child {pid} was left running");
    }
}

/// A shell line that starts a child in the helper's process group, holding
/// the helper's stdout open for 60 s, and waits until it wrote its pid.
fn lingering_child(pid_file: &Path) -> String {
    format!(
        "sh -c 'echo $$ > {f}.tmp && mv {f}.tmp {f}; exec sleep 60' &\nwhile [ ! -s {f} ]; do sleep 0.01; done",
        f = pid_file.display()
    )
}

#[test]
fn a_credential_helper_whose_child_keeps_its_stdout_open_does_not_hold_the_pull() {
    let (registry, reference) = locked_registry();
    let env = TestEnv::new();
    let bin = env.path("bin");
    let pid_file = env.path("child.pid");
    scripted_helper(
        &bin,
        "lingering",
        &format!(
            "{}\nprintf '{{\"ServerURL\":\"%s\",\"Username\":\"u\",\"Secret\":\"pw\"}}' \"$host\"\nexit 0",
            lingering_child(&pid_file)
        ),
    );
    let config = helper_config(&env, "lingering");
    let start = Instant::now();
    let out = pull_with_helper(&env, &reference, &["--timeout", "5"], &config, &bin);
    let took = start.elapsed();
    eprintln!("a helper whose child holds its stdout, pull --timeout 5: done after {took:?}");
    // The helper's answer got in: the registry saw its credentials, and
    // answered that it holds no such tag.
    let stderr = assert_exit(&out, 4);
    assert!(stderr.contains("not found"), "{stderr}");
    assert!(
        registry
            .authorizations()
            .iter()
            .any(|a| a == "Basic dTpwdw=="),
        "{:?}",
        registry.authorizations()
    );
    assert!(took < Duration::from_secs(4), "the pull took {took:?}");
    assert_process_gone(
        child_pid(&pid_file, Duration::from_secs(1)),
        Duration::from_secs(2),
    );
}

#[test]
fn a_credential_helper_killed_at_the_limit_leaves_no_process_behind() {
    let (registry, reference) = locked_registry();
    let env = TestEnv::new();
    let bin = env.path("bin");
    let pid_file = env.path("child.pid");
    scripted_helper(
        &bin,
        "stuck",
        &format!("{}\nexec sleep 60", lingering_child(&pid_file)),
    );
    let config = helper_config(&env, "stuck");
    let start = Instant::now();
    let out = pull_with_helper(&env, &reference, &["--timeout", "2"], &config, &bin);
    let took = start.elapsed();
    eprintln!("a helper that never answers, pull --timeout 2: exit 8 after {took:?}");
    let stderr = assert_exit(&out, 8);
    // The limit is --timeout, shorter than the helpers' own 30 s.
    assert!(
        stderr.contains("docker-credential-stuck did not finish within 2 s"),
        "{stderr}"
    );
    assert!(stderr.contains(&registry.address), "{stderr}");
    assert_eq!(parse_json(&out)["error"]["kind"], "remote");
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(took < Duration::from_secs(5), "the pull took {took:?}");
    assert_process_gone(
        child_pid(&pid_file, Duration::from_secs(1)),
        Duration::from_secs(2),
    );
}

#[test]
fn a_credential_helpers_output_is_never_quoted_in_an_error() {
    const SECRET: &str = "TOPSECRET123";
    let (registry, reference) = locked_registry();
    let env = TestEnv::new();
    let bin = env.path("bin");
    let answer = format!(r#"{{"Username":"u","Secret":"{SECRET}"}}"#);
    for (name, body, says) in [
        (
            "exits3",
            format!("printf '%s' '{answer}'; echo '{SECRET}' >&2; exit 3"),
            "failed with exit status 3",
        ),
        (
            "cut",
            format!("printf '%s' '{{\"Username\":\"u\",\"Secret\":\"{SECRET}'"),
            "not JSON (at line 1, column",
        ),
        (
            "garbled",
            format!("printf '%s' '{{\"Username\":\"u\",\"Secret\":\"{SECRET}\\q\"}}'"),
            "not JSON (at line 1, column",
        ),
        (
            "typed",
            format!("printf '%s' '{{\"Username\":\"u\",\"Secret\":[\"{SECRET}\"]}}'"),
            "printed no Secret",
        ),
        (
            "bare",
            format!("printf '\"{SECRET}\"'"),
            "printed no Secret",
        ),
        (
            "signalled",
            format!("printf '%s' '{answer}'; echo '{SECRET}' >&2; kill -9 $$"),
            "was killed by signal 9",
        ),
        (
            "flood",
            format!("yes '{SECRET}' | head -c 200000; exit 1"),
            "printed more than 65536 bytes",
        ),
    ] {
        scripted_helper(&bin, name, &body);
        let config = helper_config(&env, name);
        let out = pull_with_helper(&env, &reference, &[], &config, &bin);
        let stderr = assert_exit(&out, 8);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stderr.contains(SECRET), "{name}: {stderr}");
        assert!(!stdout.contains(SECRET), "{name}: {stdout}");
        let message = parse_json(&out)["error"]["message"]
            .as_str()
            .expect("message")
            .to_string();
        for part in [
            format!("docker-credential-{name}"),
            says.to_string(),
            registry.address.clone(),
        ] {
            assert!(message.contains(&part), "{name}: {part} not in {message}");
        }
    }
    // The secret was never sent either: no request carried credentials.
    assert!(
        registry.authorizations().iter().all(String::is_empty),
        "{:?}",
        registry.authorizations()
    );
}

#[test]
fn a_registry_that_drips_its_answer_is_given_up_on_within_the_timeout() {
    let env = TestEnv::new();
    // The floor is documented beside --timeout wherever a registry is spoken to.
    for cmd in ["push", "pull", "audit"] {
        let out = env.run([cmd, "--help"]);
        assert_ok(&out);
        let help = String::from_utf8_lossy(&out.stdout);
        let at = help
            .find("--min-speed <BYTES>")
            .expect("--min-speed in the help");
        assert!(help[..at].contains("--timeout <SECS>"), "{cmd}: {help}");
    }
    let every = Duration::from_millis(300);
    for (script, says) in [
        (
            Script::DripBody(every),
            "fewer than 1024 bytes a second over 2 s; --min-speed BYTES and --timeout SECS",
        ),
        (Script::DripHead(every), "did not answer in time"),
    ] {
        let (registry, reference) = scripted_registry(script.clone(), "drip");
        let start = Instant::now();
        let out = env.run([
            "pull",
            &reference,
            "--plain-http",
            "--timeout",
            "2",
            "--json",
        ]);
        let took = start.elapsed();
        eprintln!("{script:?}, pull --timeout 2: exit 8 after {took:?}");
        let stderr = assert_exit(&out, 8);
        assert!(stderr.contains(says), "{script:?}: {stderr}");
        assert!(stderr.contains(&registry.address), "{script:?}: {stderr}");
        assert_eq!(parse_json(&out)["error"]["kind"], "remote");
        assert!(
            took < Duration::from_secs(5),
            "{script:?}: the pull took {took:?}"
        );
    }

    // The floor and its period are the command's.
    let (_registry, reference) = scripted_registry(Script::DripBody(every), "drip");
    let start = Instant::now();
    let out = env.run([
        "pull",
        &reference,
        "--plain-http",
        "--timeout",
        "1",
        "--min-speed",
        "5",
        "--json",
    ]);
    let stderr = assert_exit(&out, 8);
    assert!(
        stderr.contains("fewer than 5 bytes a second over 1 s"),
        "{stderr}"
    );
    assert!(start.elapsed() < Duration::from_secs(4));

    // A push meets the same bounds: its first request's answer drips.
    let src = env.path("src");
    spread_release(&src, 1, salt());
    let digest = env.ingest_digest(&src, "1.0.0");
    let registry = Scripted::start(Script::DripHead(every));
    let start = Instant::now();
    let out = env.run([
        "push",
        &digest,
        &format!("{}/cestore/drip", registry.address),
        "--plain-http",
        "--timeout",
        "2",
        "--json",
    ]);
    let stderr = assert_exit(&out, 8);
    assert!(stderr.contains("did not answer in time"), "{stderr}");
    assert!(start.elapsed() < Duration::from_secs(5));

    // An upload of N bytes may take SECS + N/BYTES: 2 MiB to a registry
    // that reads 10 KiB a second, with a floor of 1 MB a second over 1 s,
    // is given up on after about 3 s.
    let big = env.path("big");
    spread_release(&big, 1, salt());
    write(&big.join("assets/big.bin"), noise(salt(), 7, 2 << 20));
    let digest = env.ingest_digest(&big, "1.0.0");
    let registry = Scripted::start(Script::SlowReader(Duration::from_millis(100)));
    let start = Instant::now();
    let out = env.run([
        "push",
        &digest,
        &format!("{}/cestore/slow", registry.address),
        "--plain-http",
        "--timeout",
        "1",
        "--min-speed",
        "1000000",
        "--json",
    ]);
    let took = start.elapsed();
    eprintln!("a registry reading 10 KiB/s, push of 2 MiB --timeout 1 --min-speed 1000000: exit 8 after {took:?}");
    let stderr = assert_exit(&out, 8);
    assert!(
        stderr
            .contains("bytes not sent and answered within 3 s, at 1000000 bytes a second plus 1 s"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(8), "the push took {took:?}");

    // So does `audit --registry`, for a digest the store lacks.
    let registry = Scripted::start(Script::DripBody(every));
    let missing = "ab".repeat(32);
    let results = env.path("results.jsonl");
    crate::util::write_lines(
        &results,
        &[
            serde_json::json!({"arm": "ce_review", "ce_plugin_version": "1.0.0", "ce_plugin_manifest_digest": missing}),
        ],
    );
    let start = Instant::now();
    let out = env.run([
        "audit",
        results.to_str().expect("path"),
        "--registry",
        &format!("{}/cestore/drip", registry.address),
        "--plain-http",
        "--timeout",
        "2",
        "--json",
    ]);
    let took = start.elapsed();
    let report = parse_json(&out);
    let pulled = &report["digests"][0];
    assert_eq!(pulled["manifest_digest"], missing.as_str(), "{report}");
    assert_eq!(pulled["status"], "unknown", "{report}");
    let why = pulled["pull_error"].as_str().expect("a pull error");
    assert!(
        why.contains("fewer than 1024 bytes a second over 2 s"),
        "{why}"
    );
    assert!(took < Duration::from_secs(5), "the audit took {took:?}");
}

/// A proxy in front of `reg` whose behaviour `set` changed from the default.
fn proxy_with(reg: &str, set: impl FnOnce(&mut Behaviour)) -> Proxy {
    let mut behaviour = Behaviour::default();
    set(&mut behaviour);
    Proxy::start(reg, behaviour)
}

/// A Docker client configuration that is a FIFO is never opened to wait on
/// a writer: the pull goes on without its credentials and fails on the
/// closed port (exit 8), at once.
#[test]
fn a_docker_config_that_is_a_fifo_is_never_waited_on() {
    let env = TestEnv::new();
    let docker = env.path("docker");
    fs::create_dir_all(&docker).expect("docker dir");
    mkfifo(&docker.join("config.json"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut cmd = env.cmd([
        "pull",
        &format!("127.0.0.1:{port}/cestore-it/fifo:latest"),
        "--plain-http",
        "--json",
    ]);
    cmd.env("DOCKER_CONFIG", &docker)
        .env_remove("CESTORE_REGISTRY_TOKEN")
        .env_remove("CESTORE_REGISTRY_USER");
    let out = run_within(
        cmd,
        Duration::from_secs(20),
        "a pull with a FIFO for its Docker config",
    );
    assert_exit(&out, 8);
}
