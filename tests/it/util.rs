//! Test harness: a fresh temporary directory per test, the real binary, and
//! helpers to build plugin trees and read JSON output.
//!
//! Every helper more than one module needs is defined here once: the
//! requests most tests make (`files`, `views`, `verify`, `checkout`), object
//! paths and hashes, a store's files, commands under a deadline, the oracle,
//! the ways a test skips, and two snapshots whose digests share a prefix;
//! then a minimal plugin written or ingested in one call (`plugin`,
//! `with_plugin`, `plugin_store`), the arguments of an ingest (`ingest_args`,
//! `git_ingest`, `ingest_out`), a report's arrays and strings (`array`,
//! `strs`, `str_of`, `field_strs`, `field_pairs`), a cestore run through
//! another command (`wrapped`, `spawn_piped`), a GitNexus harness, a JSON
//! Lines file, `python3` and `cp -a`.

#![allow(dead_code)]

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// A fresh temporary directory with a store inside it, removed on drop even
/// when views or tests left read-only directories in it.
pub struct TestEnv {
    /// The temporary directory itself.
    pub dir: tempfile::TempDir,
    /// The directory's canonical path.
    pub base: PathBuf,
    /// The store every command is given (`base/store` unless moved).
    pub store: PathBuf,
    /// When set, every command run through [`TestEnv::run`] must finish
    /// within it, without a panic or a death by signal (see [`run_within`]).
    pub deadline: Option<Duration>,
}

impl TestEnv {
    /// A fresh directory, its store not yet made.
    pub fn new() -> TestEnv {
        let dir = tempfile::Builder::new()
            .prefix("cestore-it-")
            .tempdir()
            .expect("create temp dir");
        let base = dir.path().canonicalize().expect("canonical temp dir");
        let store = base.join("store");
        TestEnv {
            dir,
            base,
            store,
            deadline: None,
        }
    }

    /// A fresh environment whose store lives at `store` (e.g. on a tmpfs).
    pub fn with_store(store: PathBuf) -> TestEnv {
        let mut env = TestEnv::new();
        env.store = store;
        env
    }

    /// This environment, its commands run under `limit` (see [`run_within`]).
    pub fn within(mut self, limit: Duration) -> TestEnv {
        self.deadline = Some(limit);
        self
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
        cestore(&self.store, args)
    }

    /// Runs `cestore ARGS --store STORE` (under the deadline, if one is set)
    /// and returns its output.
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        match self.deadline {
            Some(limit) => run_within(self.cmd(args), limit, "cestore"),
            None => self.cmd(args).output().expect("run cestore"),
        }
    }

    /// Runs a command that must succeed and parses its stdout as JSON; a
    /// report's `ok` must then be true.
    pub fn json<I, S>(&self, args: I) -> Value
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let out = self.run(args);
        assert_ok(&out);
        let v = parse_json(&out);
        if let Some(ok) = v.get("ok") {
            assert_eq!(ok, true, "{v}");
        }
        v
    }

    /// Ingests `dir` at `version` and returns the JSON report (must succeed).
    pub fn ingest(&self, dir: &Path, version: &str) -> serde_json::Value {
        self.json(ingest_args(dir, version))
    }

    /// Ingests and returns the manifest digest.
    pub fn ingest_digest(&self, dir: &Path, version: &str) -> String {
        digest_of(&self.ingest(dir, version))
    }

    /// The snapshot's files, from `show --files --json`.
    pub fn files(&self, digest: &str) -> Vec<FileRow> {
        self.json(["show", digest, "--files", "--json"])["files"]
            .as_array()
            .expect("files array")
            .iter()
            .map(|f| FileRow {
                path: f["path"].as_str().expect("path").to_string(),
                sha256: f["sha256"].as_str().expect("sha256").to_string(),
                size: f["size"].as_u64().expect("size"),
                executable: f["executable"].as_bool().expect("executable"),
            })
            .collect()
    }

    /// The store object that holds a file's bytes.
    pub fn object(&self, f: &FileRow) -> PathBuf {
        object_path(&self.store, &f.sha256, f.executable)
    }

    /// The manifest digests `list --json` lists, in its order.
    pub fn listed(&self) -> Vec<String> {
        self.json(["list", "--json"])["snapshots"]
            .as_array()
            .expect("snapshots array")
            .iter()
            .map(|s| s["manifest_digest"].as_str().expect("digest").to_string())
            .collect()
    }

    /// The recorded views of a snapshot, `(path, kind)`, from `show --json`.
    pub fn views(&self, digest: &str) -> Vec<(String, String)> {
        self.json(["show", digest, "--json"])["views"]
            .as_array()
            .expect("views array")
            .iter()
            .map(|v| {
                (
                    v["path"].as_str().expect("view path").to_string(),
                    v["kind"].as_str().expect("view kind").to_string(),
                )
            })
            .collect()
    }

    /// `cestore checkout DIGEST DEST --json EXTRA...`.
    pub fn checkout(&self, digest: &str, dest: &Path, extra: &[&str]) -> Output {
        let mut args: Vec<&OsStr> = vec![
            OsStr::new("checkout"),
            OsStr::new(digest),
            dest.as_os_str(),
            OsStr::new("--json"),
        ];
        args.extend(extra.iter().map(OsStr::new));
        self.run(args)
    }

    /// A checkout that must succeed; returns its JSON report.
    pub fn checkout_ok(&self, digest: &str, dest: &Path, extra: &[&str]) -> Value {
        let out = self.checkout(digest, dest, extra);
        assert_ok(&out);
        let report = parse_json(&out);
        assert_eq!(report["ok"], true, "{report}");
        report
    }

    /// `verify --json EXTRA...`: the exit code (0 or 1) and the report.
    pub fn verify(&self, extra: &[&str]) -> (i32, Value) {
        let mut args = vec!["verify", "--json"];
        args.extend_from_slice(extra);
        let out = self.run(&args);
        let code = out.status.code().expect("exit code");
        assert!(code == 0 || code == 1, "verify: {}", describe(&out));
        let v = parse_json(&out);
        assert_eq!(v["ok"], code == 0, "{v}");
        (code, v)
    }

    /// `verify --tree DIR DIGEST --json`: the exit code and the differences;
    /// the report names the whole digest `digest` starts.
    pub fn verify_tree(&self, dir: &Path, digest: &str) -> (i32, Value) {
        let out = self.run([
            OsStr::new("verify"),
            OsStr::new("--tree"),
            dir.as_os_str(),
            OsStr::new(digest),
            OsStr::new("--json"),
        ]);
        let code = out.status.code().expect("exit code");
        assert!(code == 0 || code == 1, "verify --tree: {}", describe(&out));
        let v = parse_json(&out);
        assert_eq!(v["ok"], code == 0, "{v}");
        let full = v["manifest_digest"].as_str().expect("manifest_digest");
        assert!(full.len() == 64 && full.starts_with(digest), "{v}");
        (code, v["differences"].clone())
    }
}

/// One file of a snapshot as `show --files --json` lists it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileRow {
    /// The path relative to the plugin root.
    pub path: String,
    /// The content's SHA-256, in hex.
    pub sha256: String,
    /// The content's length in bytes.
    pub size: u64,
    /// Whether the file is recorded as executable.
    pub executable: bool,
}

impl FileRow {
    /// The object key, `(sha256, executable)`.
    pub fn key(&self) -> (String, bool) {
        (self.sha256.clone(), self.executable)
    }
}

/// The path of the store object for content `sha256`, with the `.x` suffix
/// when it is the executable variant.
pub fn object_path(store: &Path, sha256: &str, executable: bool) -> PathBuf {
    let name = format!("{}{}", &sha256[2..], if executable { ".x" } else { "" });
    store.join("objects").join(&sha256[..2]).join(name)
}

/// A path as text (lossily), as JSON reports give paths.
pub fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The lower-case hex SHA-256 of `data`.
pub fn sha_hex(data: &[u8]) -> String {
    format!("{:x}", Sha256::digest(data))
}

/// The manifest digest of an ingest (or other provenance) report.
pub fn digest_of(report: &Value) -> String {
    report["provenance"]["manifest_digest"]
        .as_str()
        .unwrap_or_else(|| panic!("no digest in {report}"))
        .to_string()
}

/// A `verify` report's problems.
pub fn problems(report: &Value) -> &Vec<Value> {
    report["problems"].as_array().expect("problems array")
}

/// Whether anything (even a dangling symlink) is at `path`.
pub fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// The permission bits (`st_mode & 0o7777`) of `path`, not following a symlink.
pub fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("lstat {}: {e}", path.display()))
        .mode()
        & 0o7777
}

/// The names in `dir`, sorted; none when it cannot be read.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| {
                e.expect("dir entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

/// What a store holds on disk besides its catalogue.
#[derive(Debug, PartialEq, Eq)]
pub struct StoreFiles {
    /// Object files (relative to `objects/`) with their inode and size.
    pub objects: std::collections::BTreeMap<String, (u64, u64)>,
    /// The entries of `tmp/`.
    pub tmp: Vec<String>,
}

/// The object files and work directories of the store at `store`.
pub fn store_files(store: &Path) -> StoreFiles {
    let mut objects = std::collections::BTreeMap::new();
    let dir = store.join("objects");
    for shard in names_in(&dir) {
        for name in names_in(&dir.join(&shard)) {
            let m = fs::symlink_metadata(dir.join(&shard).join(&name)).expect("stat object");
            objects.insert(format!("{shard}/{name}"), (m.ino(), m.size()));
        }
    }
    StoreFiles {
        objects,
        tmp: names_in(&store.join("tmp")),
    }
}

/// The size of every object file of the store at `store` (relative to
/// `objects/`): what two stores must agree on when their inodes differ.
pub fn object_sizes(store: &Path) -> std::collections::BTreeMap<String, u64> {
    store_files(store)
        .objects
        .into_iter()
        .map(|(name, (_, size))| (name, size))
        .collect()
}

/// What a store holds: its object files and work directories, and its
/// snapshots.
#[derive(Debug, PartialEq, Eq)]
pub struct StoreState {
    /// The object files and the entries of `tmp/`.
    pub files: StoreFiles,
    /// The catalogue's snapshots as `list --json` gives them, oldest first;
    /// none when there is no catalogue.
    pub snapshots: Vec<Value>,
}

/// What the store at `store` holds, read without the binary, so that
/// looking changes nothing (and works whoever owns the store).
pub fn store_state(store: &Path) -> StoreState {
    let catalogue = store.join("catalogue.sqlite");
    let snapshots = if catalogue.exists() {
        cestore::catalogue::Catalogue::open(&catalogue, || Ok(false))
            .expect("open the catalogue")
            .snapshots(None, None)
            .expect("list snapshots")
            .iter()
            .map(|row| serde_json::to_value(row).expect("a snapshot as JSON"))
            .collect()
    } else {
        Vec::new()
    };
    StoreState {
        files: store_files(store),
        snapshots,
    }
}

/// The spare views the store at `store` keeps of snapshot `digest`: the
/// directories `discard` kept whole.
pub fn spares(store: &Path, digest: &str) -> Vec<PathBuf> {
    match fs::read_dir(store.join("spare").join(digest)) {
        Ok(entries) => entries.map(|e| e.expect("entry").path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// What a test can see of one entry of a tree without following symlinks.
#[derive(Debug, PartialEq, Eq)]
pub struct Seen {
    /// The type, permission bits and contents, one line: `file 644 12 bytes
    /// <hash>`, `dir 755`, `symlink -> "<base>/x"`, `fifo 644`, `socket
    /// 644` or `other 644`, with the tree's base written `<base>` in a
    /// symlink's target.
    pub what: String,
    /// The whole `st_mode`: type and permission bits.
    pub mode: u32,
    /// The size `lstat` gives.
    pub size: u64,
    /// The modification time: seconds and nanoseconds.
    pub mtime: (i64, i64),
}

/// Every entry below `base` (not `base` itself), by path relative to it:
/// type, mode, size, a hash of a file's bytes, a symlink's target and the
/// modification time. A tree left untouched keeps all of these; two trees
/// made alike agree on every [`Seen::what`].
pub fn fingerprint(base: &Path) -> std::collections::BTreeMap<PathBuf, Seen> {
    use std::collections::BTreeMap;
    use std::hash::{DefaultHasher, Hasher};
    use std::os::unix::fs::FileTypeExt;
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Seen>) {
        for entry in fs::read_dir(dir).expect("read dir") {
            let path = entry.expect("dir entry").path();
            let meta = fs::symlink_metadata(&path).expect("lstat");
            let bits = meta.mode() & 0o7777;
            let ft = meta.file_type();
            let what = if ft.is_symlink() {
                let target = fs::read_link(&path).expect("readlink");
                let target = target
                    .to_string_lossy()
                    .replace(&*base.to_string_lossy(), "<base>");
                format!("symlink -> {target:?}")
            } else if ft.is_dir() {
                format!("dir {bits:o}")
            } else if ft.is_file() {
                let mut hasher = DefaultHasher::new();
                hasher.write(&fs::read(&path).expect("read"));
                format!(
                    "file {bits:o} {} bytes {:016x}",
                    meta.len(),
                    hasher.finish()
                )
            } else if ft.is_fifo() {
                format!("fifo {bits:o}")
            } else if ft.is_socket() {
                format!("socket {bits:o}")
            } else {
                format!("other {bits:o}")
            };
            let rel = path.strip_prefix(base).expect("under base").to_path_buf();
            let seen = Seen {
                what,
                mode: meta.mode(),
                size: meta.size(),
                mtime: (meta.mtime(), meta.mtime_nsec()),
            };
            out.insert(rel, seen);
            if ft.is_dir() {
                walk(base, &path, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(base, base, &mut out);
    out
}

/// Makes a FIFO of mode 0644 at `path`.
pub fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
}

/// A `&str` as an `&OsStr`, for argument lists that mix text and paths.
pub fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// A command's exit code and both streams, for failure messages.
pub fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Waits for a spawned child with piped streams, killing it and failing
/// after `limit`: a hang is a failure, never a stuck test binary.
pub fn finish(mut child: Child, limit: Duration, what: &str) -> Output {
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for a child") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// Runs a command under a deadline and checks that it neither panicked nor
/// died by a signal.
pub fn run_within(mut cmd: Command, limit: Duration, what: &str) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let out = finish(child, limit, what);
    assert_sane(&out, what);
    out
}

/// No panic message, no death by signal (a stack overflow aborts).
pub fn assert_sane(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{what} panicked:\n{stderr}");
    assert!(
        out.status.code().is_some(),
        "{what} died by signal {:?}:\n{stderr}",
        out.status.signal()
    );
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

/// A `cestore ARGS --store STORE` command, with `$CESTORE_DIR` removed.
pub fn cestore<I, S>(store: &Path, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .arg("--store")
        .arg(store)
        .env_remove("CESTORE_DIR");
    cmd
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

/// A fresh environment whose store holds the minimal plugin (written at
/// `src`, version 1.0.0), and that snapshot's digest.
pub fn minimal_store() -> (TestEnv, String) {
    let env = TestEnv::new();
    let src = env.plugin("src", "1.0.0");
    let digest = env.ingest_digest(&src, "1.0.0");
    (env, digest)
}

/// The oracle script beside the repository, when this checkout has one.
pub fn oracle() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference/oracle.py");
    path.is_file().then_some(path)
}

/// Runs `python3 oracle.py ARGS...` and parses its answer; `None` when the
/// oracle is absent.
pub fn oracle_json<I, S>(args: I) -> Option<Value>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let oracle = oracle()?;
    let out = Command::new("python3")
        .arg(oracle)
        .args(args)
        .output()
        .expect("run python3 oracle");
    Some(oracle_answer(&out))
}

/// The oracle's stdout as JSON; panics with both its streams when it is not.
pub fn oracle_answer(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "oracle output is not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Runs the oracle's `snapshot` on a tree; `None` when the oracle is absent.
pub fn oracle_snapshot(dir: &Path, version: &str) -> Option<Value> {
    oracle_json([
        OsStr::new("snapshot"),
        dir.as_os_str(),
        OsStr::new("--version"),
        OsStr::new(version),
    ])
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

/// Records why a test that must run as root is skipping (see [`skip`]);
/// true when it skips.
pub fn skip_unless_root(test: &str, why: &str) -> bool {
    if rustix::process::geteuid().is_root() {
        return false;
    }
    skip(test, why);
    true
}

/// Runs `chown ARGS... OWNER PATH`, which must succeed.
pub fn chown(args: &[&str], owner: &str, path: &Path) {
    let status = Command::new("chown")
        .args(args)
        .arg(owner)
        .arg(path)
        .status()
        .expect("run chown");
    assert!(status.success(), "chown {owner} {}", path.display());
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

/// The matches of `cestore find ARGS --json`, checking its exit code: 0
/// with matches, 1 (as `grep`) with none.
pub fn find_matches(env: &TestEnv, args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["find"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = env.run(&all);
    let json = parse_json(&out);
    let matches = json["matches"].as_array().expect("matches").clone();
    assert_exit(&out, i32::from(matches.is_empty()));
    assert_eq!(json["ok"], !matches.is_empty(), "{json}");
    matches
}

/// A release at `version` with one note that `n` words, at `cand-VERSION-N`.
pub fn candidate(env: &TestEnv, version: &str, n: u32) -> PathBuf {
    let src = env.path(&format!("cand-{version}-{n}"));
    if !src.exists() {
        minimal_plugin(&src, version);
        write(&src.join("skills/ce-plan/notes.md"), format!("{n}\n"));
    }
    src
}

/// Two releases, at versions `a` and `b` (which differ), whose digests share their first
/// four hex digits: searched among releases that differ in one note, with
/// `cestore digest`, which stores nothing. Returns each one's source and
/// digest. The first four hex digits of either are a prefix both match.
pub fn sharing_four_digits(env: &TestEnv, a: &str, b: &str) -> [(PathBuf, String); 2] {
    let mut seen: HashMap<String, (usize, u32, String)> = HashMap::new();
    let versions = [a, b];
    for n in 0..5000u32 {
        for (side, version) in versions.into_iter().enumerate() {
            let src = candidate(env, version, n);
            let out = env.run([
                os("digest"),
                src.as_os_str(),
                os("--version"),
                os(version),
                os("--json"),
            ]);
            assert_ok(&out);
            let digest = parse_json(&out)["provenance"]["manifest_digest"]
                .as_str()
                .unwrap()
                .to_string();
            remove_tree(&src);
            match seen.get(&digest[..4]) {
                Some((other_side, m, other)) if *other_side != side => {
                    let mut pair = [
                        (candidate(env, versions[*other_side], *m), other.clone()),
                        (candidate(env, version, n), digest),
                    ];
                    if side == 0 {
                        pair.swap(0, 1);
                    }
                    return pair;
                }
                _ => {
                    seen.insert(digest[..4].to_string(), (side, n, digest));
                }
            }
        }
    }
    panic!("no two of 10,000 digests share four hex digits")
}

/// Ingests the two releases of [`sharing_four_digits`]; returns the prefix of
/// four hex digits both digests start with, and the two digests.
pub fn ingest_sharing_four_digits(env: &TestEnv, a: &str, b: &str) -> (String, String, String) {
    let [(a_src, one), (b_src, two)] = sharing_four_digits(env, a, b);
    assert_eq!(env.ingest_digest(&a_src, a), one);
    assert_eq!(env.ingest_digest(&b_src, b), two);
    (one[..4].to_string(), one, two)
}

impl TestEnv {
    /// Writes the minimal plugin at `rel` inside the test's directory, at
    /// `version`, and returns its path.
    pub fn plugin(&self, rel: &str, version: &str) -> PathBuf {
        let root = self.path(rel);
        minimal_plugin(&root, version);
        root
    }
}

/// A fresh environment with the minimal plugin written at `rel`, at
/// `version`, and the plugin's path.
pub fn with_plugin(rel: &str, version: &str) -> (TestEnv, PathBuf) {
    let env = TestEnv::new();
    let root = env.plugin(rel, version);
    (env, root)
}

/// A fresh environment with the minimal plugin written at `rel` and ingested
/// at `version`: the environment, the plugin's path and the digest.
pub fn plugin_store(rel: &str, version: &str) -> (TestEnv, PathBuf, String) {
    let (env, root) = with_plugin(rel, version);
    let digest = env.ingest_digest(&root, version);
    (env, root, digest)
}

/// The string `field` of each object in the array `list`.
pub fn field_strs<'a>(list: &'a Value, field: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| e[field].as_str().unwrap())
        .collect()
}

/// The strings `a` and `b` of each object in the array `list`.
pub fn field_pairs(list: &Value, a: &str, b: &str) -> Vec<(String, String)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e[a].as_str().unwrap().to_string(),
                e[b].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `ingest --git REPO --rev REV --version VERSION`, then `extra`.
pub fn git_ingest<'a>(
    repo: &'a Path,
    rev: &'a str,
    version: &'a str,
    extra: &[&'a str],
) -> Vec<&'a OsStr> {
    let mut args = vec![
        os("ingest"),
        os("--git"),
        repo.as_os_str(),
        os("--rev"),
        os(rev),
        os("--version"),
        os(version),
    ];
    args.extend(extra.iter().map(|a| os(a)));
    args
}

impl TestEnv {
    /// Runs `ingest DIR --version VERSION EXTRA --json`, whatever its exit.
    pub fn ingest_out(&self, dir: &Path, version: &str, extra: &[&str]) -> Output {
        let mut args = vec![os("ingest"), dir.as_os_str(), os("--version"), os(version)];
        args.extend(extra.iter().map(|a| os(a)));
        args.push(os("--json"));
        self.run(args)
    }
}

/// Writes a harness root holding a GitNexus runtime at `version` (a layout
/// the reference accepts) at `h`.
pub fn gitnexus_harness(h: &Path, version: &str) {
    let rt = h.join("gitnexus");
    let sh = h.join("gitnexus-shared");
    write(&rt.join("dist/cli/index.js"), "#!/usr/bin/env node\n");
    write(
        &rt.join("package.json"),
        format!(r#"{{"name": "gitnexus", "version": "{version}"}}"#),
    );
    write(&rt.join("node_modules/other/index.js"), "");
    write(&rt.join("vendor/README"), "");
    write(&rt.join("hooks/claude/hook.sh"), "");
    write(&sh.join("dist/index.js"), "");
    write(
        &sh.join("package.json"),
        format!(r#"{{"name": "gitnexus-shared", "version": "{version}"}}"#),
    );
    std::os::unix::fs::symlink(
        "../../gitnexus-shared",
        rt.join("node_modules/gitnexus-shared"),
    )
    .expect("link gitnexus-shared");
}

/// A `cestore ARGS --store STORE` command run through `wrapper` (a shell,
/// `setpriv` ...), with `$CESTORE_DIR` removed.
pub fn wrapped<I, S>(mut wrapper: Command, store: &Path, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    wrapper
        .arg(bin())
        .args(args)
        .arg("--store")
        .arg(store)
        .env_remove("CESTORE_DIR");
    wrapper
}

/// Writes `lines` to `path`, each ending in a newline (a JSON Lines file).
pub fn write_lines<T: std::fmt::Display>(path: &Path, lines: &[T]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    write(path, text);
}

/// The interpreter behind `python3`, found once: a version manager's shim
/// costs a dozen shell processes per call.
pub fn python3() -> &'static OsStr {
    static PYTHON: std::sync::OnceLock<std::ffi::OsString> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| {
        Command::new("python3")
            .args(["-c", "import sys; sys.stdout.write(sys.executable)"])
            .output()
            .ok()
            .filter(|out| out.status.success() && !out.stdout.is_empty())
            .map_or_else(
                || "python3".into(),
                |out| std::os::unix::ffi::OsStringExt::from_vec(out.stdout),
            )
    })
}

/// Copies a tree keeping its modes (`cp -a`).
pub fn cp_a(from: &Path, to: &Path) {
    let out = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .output()
        .expect("run cp");
    assert_ok(&out);
}

/// The array `v` (which must be one).
pub fn array(v: &Value) -> &Vec<Value> {
    v.as_array().expect("an array")
}

/// The strings of the array `v` (which must hold only strings).
pub fn strs(v: &Value) -> Vec<&str> {
    array(v)
        .iter()
        .map(|x| x.as_str().expect("a string"))
        .collect()
}

/// `ingest DIR --version VERSION --json`.
pub fn ingest_args<'a>(dir: &'a Path, version: &'a str) -> [&'a OsStr; 5] {
    [
        os("ingest"),
        dir.as_os_str(),
        os("--version"),
        os(version),
        os("--json"),
    ]
}

/// Starts `cmd` with its stdout and stderr piped.
pub fn spawn_piped(cmd: &mut Command, what: &str) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// The string `v` (which must be one).
pub fn str_of(v: &Value) -> &str {
    v.as_str().expect("a string")
}

/// For a test that drops to uid 65534 itself: as root, a fresh environment
/// others may enter, with the minimal plugin at `src`; else `None`, the
/// skip printed.
pub fn root_env_with_plugin(test: &str) -> Option<(TestEnv, PathBuf)> {
    if skip_unless_root(test, "run as root (it drops privileges itself)") {
        return None;
    }
    let env = TestEnv::new();
    chmod(&env.base, 0o755);
    let src = env.plugin("src", "1.0.0");
    Some((env, src))
}
