//! Test harness: a fresh temporary directory per test, the real binary, and
//! helpers to build plugin trees and read JSON output.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh temporary directory with a store inside it, removed on drop even
/// when views or tests left read-only directories in it.
pub struct TestEnv {
    pub dir: tempfile::TempDir,
    /// The directory's canonical path.
    pub base: PathBuf,
    pub store: PathBuf,
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let dir = tempfile::Builder::new()
            .prefix("cestore-it-")
            .tempdir()
            .expect("create temp dir");
        let base = dir.path().canonicalize().expect("canonical temp dir");
        let store = base.join("store");
        TestEnv { dir, base, store }
    }

    /// A path inside the test's directory.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    /// A `cestore` command with `--store` set to this test's store.
    pub fn cmd<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(bin());
        cmd.args(args).arg("--store").arg(&self.store);
        cmd.env_remove("CESTORE_DIR");
        cmd
    }

    /// Runs `cestore ARGS --store STORE` and returns its output.
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd(args).output().expect("run cestore")
    }

    /// Runs a command that must succeed and parses its stdout as JSON.
    pub fn json<I, S>(&self, args: I) -> serde_json::Value
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let out = self.run(args);
        assert_ok(&out);
        parse_json(&out)
    }

    /// Ingests `dir` at `version` and returns the JSON report (must succeed).
    pub fn ingest(&self, dir: &Path, version: &str) -> serde_json::Value {
        self.json([
            OsStr::new("ingest"),
            dir.as_os_str(),
            OsStr::new("--version"),
            OsStr::new(version),
            OsStr::new("--json"),
        ])
    }

    /// Ingests and returns the manifest digest.
    pub fn ingest_digest(&self, dir: &Path, version: &str) -> String {
        let report = self.ingest(dir, version);
        report["provenance"]["manifest_digest"]
            .as_str()
            .expect("digest in report")
            .to_string()
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        remove_tree(&self.base);
    }
}

/// The path of the `cestore` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_cestore")
}

/// Panics with both streams when the command failed.
pub fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "command failed with {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Asserts the exit code and returns stderr as text.
pub fn assert_exit(out: &Output, code: i32) -> String {
    assert_eq!(
        out.status.code(),
        Some(code),
        "unexpected exit status\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Parses stdout as one JSON value.
pub fn parse_json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Writes a file, creating parent directories.
pub fn write(path: &Path, contents: impl AsRef<[u8]>) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("create parent");
    }
    fs::write(path, contents).expect("write file");
}

/// Sets a file's permission bits.
pub fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Writes the smallest plugin tree the seed accepts, at `version`.
pub fn minimal_plugin(root: &Path, version: &str) {
    write(
        &root.join(".claude-plugin/plugin.json"),
        format!(r#"{{"name": "compound-engineering", "version": "{version}"}}"#),
    );
    for skill in ["ce-plan", "ce-work", "ce-code-review"] {
        write(
            &root.join(format!("skills/{skill}/SKILL.md")),
            format!("# {skill}\n"),
        );
    }
}

/// The oracle script beside the repository, when this checkout has one.
pub fn oracle() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference/oracle.py");
    path.is_file().then_some(path)
}

/// Runs the oracle's `snapshot` on a tree; `None` when the oracle is absent.
pub fn oracle_snapshot(dir: &Path, version: &str) -> Option<serde_json::Value> {
    let oracle = oracle()?;
    let out = Command::new("python3")
        .arg(oracle)
        .arg("snapshot")
        .arg(dir)
        .arg("--version")
        .arg(version)
        .output()
        .expect("run python3 oracle");
    Some(serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "oracle output is not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }))
}

/// Records that `test` skips a check, and why: prints `skipping TEST: REASON`
/// and, when `CESTORE_SKIP_LOG` names a file (scripts/test sets it), appends
/// that line to it, so that the run can list every skipped check at its end.
pub fn skip(test: &str, reason: &str) {
    let line = format!("skipping {test}: {reason}");
    eprintln!("{line}");
    if let Some(log) = std::env::var_os("CESTORE_SKIP_LOG") {
        use std::io::Write;
        // One write per line, in append mode: lines of parallel tests do not interleave.
        let appended = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if let Err(e) = appended {
            panic!("could not append to '{}': {e}", Path::new(&log).display());
        }
    }
}

/// Records why a test that needs the oracle is skipping (see [`skip`]).
pub fn skip_without_oracle(test: &str) -> bool {
    if oracle().is_none() {
        skip(
            test,
            "../shared/reference/oracle.py is not present beside this checkout",
        );
        return true;
    }
    false
}

/// Removes a tree that may hold read-only or unsearchable directories,
/// first giving its directories (never its files) write permission.
pub fn remove_tree(path: &Path) {
    fn unlock(path: &Path) {
        let Ok(meta) = fs::symlink_metadata(path) else {
            return;
        };
        if meta.is_dir() {
            let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o700));
            if let Ok(entries) = fs::read_dir(path) {
                for entry in entries.flatten() {
                    unlock(&entry.path());
                }
            }
        }
    }
    unlock(path);
    let _ = fs::remove_dir_all(path);
}
