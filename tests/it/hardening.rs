//! Hardening (issue 5, sections 1–6): concurrent processes, kills, races in
//! the source tree, hostile trees, bad requests and a tampered store.
//!
//! Every test here runs the real binary. The CI variant is always on; set
//! `CESTORE_STRESS=1` for the long one (more rounds, kills and racing
//! ingests). The tests that draw random numbers print their seed; set
//! `CESTORE_HARDENING_SEED=0x…` to replay one.
//!
//! * `concurrent_processes_lose_nothing` (§1): ten processes at once —
//!   ingests of one release, ingests of releases sharing most files,
//!   checkouts then discards, `path` on one digest, and a gc — per round;
//!   2 rounds (20 with `CESTORE_STRESS=1`).
//! * `killed_ingests_leave_a_consistent_store`,
//!   `killed_checkouts_never_leave_a_half_built_view` (§2): SIGKILL at a
//!   random moment (within 5/4 of how long the operation takes), 10 times
//!   each (50 with `CESTORE_STRESS=1`).
//! * `swapped_symlinks_never_leak_outside_bytes`,
//!   `files_changing_while_read_are_rejected` (§3).
//! * `hostile_special_files`, `hostile_names`, `hostile_shapes`,
//!   `hostile_plugin_json` (§4): what `rules.rs` does not already cover
//!   (it has the FIFO under `skills/`, a non-UTF-8 file name, the 1,024 /
//!   1,025-byte paths, 2,048 / 2,049 files, 2 MiB / 2 MiB + 1, 16 MiB /
//!   16 MiB + 1, 986 / 987 levels, plugin.json with a BOM, duplicate keys,
//!   NaN, huge integers, an array, not UTF-8, and the mode-000 file and
//!   directory as uid 65534). Each case is compared with the oracle where
//!   `../shared` is present, under a deadline, with no panic and no partial
//!   store.
//! * `symlinked_store_is_refused_and_untouched`,
//!   `corrupt_catalogue_is_refused_and_kept`,
//!   `newer_catalogue_is_refused_and_left_untouched`,
//!   `read_only_store_fails_clearly`, `full_disk_fails_clearly_and_loses_nothing`,
//!   `disk_full_at_any_point_of_an_ingest_loses_nothing`,
//!   `missing_version_is_a_usage_error`,
//!   `ambiguous_prefixes_and_bad_destinations_lose_nothing` (§5).
//! * `tampered_objects_are_never_handed_out_silently` (§6).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::gen::Rng;
use crate::util::{
    self, assert_exit, assert_ok, assert_sane, cestore, chmod, describe, digest_of, exists,
    fingerprint, finish, ingest_sharing_four_digits, minimal_plugin, mkfifo, mode_of, names_in,
    parse_json, problems, run_within, sha_hex, store_files, write, TestEnv,
};

const V: &str = "1.0.0";
const MIB: usize = 1024 * 1024;
/// How long one hostile-tree command may take before it counts as a hang.
const DEADLINE: Duration = Duration::from_secs(20);
/// How long any other command may take.
const LONG: Duration = Duration::from_secs(180);

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

/// Whether the long variants run (`CESTORE_STRESS=1`).
pub(crate) fn stress() -> bool {
    std::env::var_os("CESTORE_STRESS").is_some_and(|v| v == "1")
}

/// `ci` normally, `long` with `CESTORE_STRESS=1`.
pub(crate) fn scale(ci: usize, long: usize) -> usize {
    if stress() {
        long
    } else {
        ci
    }
}

/// A generator seeded from `CESTORE_HARDENING_SEED` or the clock; prints the
/// seed, so that a failing run can be replayed.
fn seeded_rng(test: &str) -> Rng {
    let seed = std::env::var("CESTORE_HARDENING_SEED")
        .ok()
        .and_then(|s| {
            let s = s.trim();
            match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => s.parse().ok(),
            }
        })
        .unwrap_or_else(|| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_nanos() as u64;
            t ^ u64::from(std::process::id()).rotate_left(32)
        });
    eprintln!("{test}: seed {seed:#x} (replay with CESTORE_HARDENING_SEED={seed:#x})");
    Rng::new(seed)
}

/// A test environment whose commands must finish within `LONG`, without a
/// panic or a death by signal.
fn hardened_env() -> TestEnv {
    TestEnv::new().within(LONG)
}

/// The paths of a snapshot's recorded views.
fn view_paths(env: &TestEnv, digest: &str) -> Vec<String> {
    env.views(digest)
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

/// Requests only the hardening tests make.
impl TestEnv {
    /// `verify --json` must be clean: exit 0 and no problem.
    fn verify_json_clean(&self, context: &str) {
        let (code, v) = self.verify(&[]);
        assert_eq!(code, 0, "verify is not clean ({context}):\n{v:#}");
        assert_eq!(problems(&v).len(), 0, "{v:#}");
    }

    fn gc(&self) -> Value {
        self.json(["gc", "--json"])
    }
}

/// Every regular file below `dir`, recursively (symlinks not followed).
fn files_below(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for entry in rd.flatten() {
        let path = entry.path();
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => files_below(&path, out),
            Ok(m) if m.is_file() => out.push(path),
            _ => {}
        }
    }
}

/// Writes `files` (relative path, bytes, mode) below `root`.
fn write_files(root: &Path, files: &[(String, Vec<u8>, u32)]) {
    for (rel, bytes, mode) in files {
        let path = root.join(rel);
        write(&path, bytes);
        chmod(&path, *mode);
    }
}

/// `n` files in 12 directories below `top/`, 300–3,300 bytes each, every
/// seventh executable, their bytes depending on `salt`.
fn bulk(top: &str, n: usize, salt: &str) -> Vec<(String, Vec<u8>, u32)> {
    (0..n)
        .map(|i| {
            let line = format!("{salt} file {i}: the quick brown fox jumps\n");
            let bytes = line.repeat(6 + (i * 7) % 60).into_bytes();
            let mode = if i % 7 == 0 { 0o755 } else { 0o644 };
            (format!("{top}/d{:02}/f{i:04}.md", i % 12), bytes, mode)
        })
        .collect()
}

/// A release: the minimal plugin at `version` plus `files`.
fn release_with(root: &Path, version: &str, files: &[(String, Vec<u8>, u32)]) {
    minimal_plugin(root, version);
    write_files(root, files);
}

// ---------------------------------------------------------------------------
// 1. Concurrency
// ---------------------------------------------------------------------------

/// Per round: ten cestore processes at once.
///
/// * three ingests of release A (one release, three processes);
/// * one ingest each of B and C, which share all but one file with A;
/// * two `path` of the base snapshot P;
/// * two threads, each a checkout of P then a discard of it;
/// * one gc, started at a random place in the order, with garbage to take:
///   a forgotten decoy holding half of the round's shared files, which the
///   ingests want to reuse while gc wants to remove them.
///
/// Afterwards every command exited 0, every digest has exactly one row,
/// the events are counted, and `verify` is clean without any further gc.
#[test]
fn concurrent_processes_lose_nothing() {
    let rounds = scale(2, 20);
    let mut rng = seeded_rng("concurrent_processes_lose_nothing");
    let env = hardened_env();
    let p_src = env.path("p");
    release_with(&p_src, "1.0.0", &bulk("skills/base", 150, "base"));
    let p = env.ingest_digest(&p_src, "1.0.0");
    let mut expected: BTreeSet<String> = BTreeSet::from([p.clone()]);
    let mut shared_created = 0;
    let mut processes_per_round = 0;

    for k in 0..rounds {
        let shared = bulk("skills/lib", 120, &format!("round {k}"));
        let mk = |name: &str, version: &str, own: &str| {
            let root = env.path(&format!("r{k}-{name}"));
            release_with(&root, version, &shared);
            write(&root.join("skills/own/own.md"), format!("own to {own}\n"));
            root
        };
        let a = (mk("a", &format!("2.{k}.0"), "a"), format!("2.{k}.0"));
        let b = (mk("b", &format!("2.{k}.1"), "b"), format!("2.{k}.1"));
        let c = (mk("c", &format!("2.{k}.2"), "c"), format!("2.{k}.2"));
        let decoy = env.path(&format!("r{k}-decoy"));
        release_with(&decoy, &format!("9.{k}.0"), &shared[..60]);
        let d = env.ingest_digest(&decoy, &format!("9.{k}.0"));
        env.json(["rm", d.as_str(), "--json"]);

        enum Job {
            Ingest(PathBuf, String),
            Path,
            Gc,
        }
        let mut jobs = vec![
            Job::Ingest(a.0.clone(), a.1.clone()),
            Job::Ingest(a.0.clone(), a.1.clone()),
            Job::Ingest(a.0.clone(), a.1.clone()),
            Job::Ingest(b.0.clone(), b.1.clone()),
            Job::Ingest(c.0.clone(), c.1.clone()),
            Job::Path,
            Job::Path,
            Job::Gc,
        ];
        rng.shuffle(&mut jobs);
        // The checkout-then-discard threads start first, so they overlap the rest.
        let co_threads: Vec<_> = (0..2)
            .map(|t| {
                let store = env.store.clone();
                let dest = env.path(&format!("co-{k}-{t}"));
                let p = p.clone();
                std::thread::spawn(move || {
                    let out = run_within(
                        cestore(
                            &store,
                            [OsStr::new("checkout"), OsStr::new(&p), dest.as_os_str()],
                        ),
                        LONG,
                        "checkout",
                    );
                    assert_ok(&out);
                    let out = run_within(
                        cestore(&store, [OsStr::new("discard"), dest.as_os_str()]),
                        LONG,
                        "discard",
                    );
                    assert_ok(&out);
                    assert!(!exists(&dest), "discard left {}", dest.display());
                })
            })
            .collect();
        let children: Vec<(String, Child)> = jobs
            .iter()
            .map(|job| {
                let (what, mut cmd) = match job {
                    Job::Ingest(dir, v) => {
                        (format!("ingest {v}"), env.cmd(util::ingest_args(dir, v)))
                    }
                    Job::Path => ("path".to_string(), env.cmd(["path", p.as_str(), "--json"])),
                    Job::Gc => ("gc".to_string(), env.cmd(["gc", "--json"])),
                };
                cmd.stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                (what, cmd.spawn().expect("spawn cestore"))
            })
            .collect();
        processes_per_round = children.len() + co_threads.len();
        let mut digests: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (what, child) in children {
            let out = finish(child, LONG, &what);
            assert_sane(&out, &what);
            assert!(
                out.status.success(),
                "round {k}: {what} failed: {}",
                describe(&out)
            );
            let v = parse_json(&out);
            assert_eq!(v["ok"], true, "{v}");
            if let Some(version) = what.strip_prefix("ingest ") {
                digests
                    .entry(version.to_string())
                    .or_default()
                    .push(digest_of(&v));
            } else if what == "path" {
                assert_eq!(v["manifest_digest"], p.as_str(), "{v}");
                assert_eq!(
                    Path::new(v["path"].as_str().expect("path")),
                    &env.store.join("views").join(&p),
                    "{v}"
                );
                if v["created"] == true {
                    shared_created += 1;
                }
            }
        }
        for t in co_threads {
            t.join().expect("checkout/discard thread");
        }

        let a_digests = &digests[&a.1];
        assert_eq!(a_digests.len(), 3);
        assert!(
            a_digests.iter().all(|d| *d == a_digests[0]),
            "one release, several digests: {a_digests:?}"
        );
        for ds in digests.values() {
            expected.insert(ds[0].clone());
        }
        let listed = env.listed();
        let unique: BTreeSet<String> = listed.iter().cloned().collect();
        assert_eq!(
            unique.len(),
            listed.len(),
            "a digest has several rows: {listed:?}"
        );
        assert_eq!(unique, expected, "round {k}");
        let show = env.json(["show", a_digests[0].as_str(), "--json"]);
        assert_eq!(show["ingest_count"], 3, "three ingest events for A: {show}");
        env.verify_json_clean(&format!("round {k}, no gc after the round"));
        assert_eq!(names_in(&env.store.join("tmp")), Vec::<String>::new());
        assert_eq!(names_in(&env.store.join("views")), vec![p.clone()]);
        assert_eq!(
            view_paths(&env, &p),
            vec![env
                .store
                .join("views")
                .join(&p)
                .to_string_lossy()
                .into_owned()]
        );
    }
    assert_eq!(shared_created, 1, "exactly one `path` made the shared view");
    // A round's snapshot comes back whole.
    let last = env
        .listed()
        .into_iter()
        .find(|d| *d != p)
        .expect("a snapshot");
    let view = env.path("final-view");
    assert_ok(&env.checkout(&last, &view, &[]));
    assert_eq!(env.verify_tree(&view, &last).0, 0);
    eprintln!(
        "concurrent_processes_lose_nothing: {processes_per_round} processes at once, {rounds} rounds"
    );
}

// ---------------------------------------------------------------------------
// 2. Crashes
// ---------------------------------------------------------------------------

/// Spawns `cmd` and SIGKILLs it `delay` later, unless it finished first.
/// Returns whether the kill landed while it ran, and how long it took when
/// it finished first.
fn kill_after(mut cmd: Command, delay: Duration, what: &str) -> (bool, Option<Duration>) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let started = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            let took = started.elapsed();
            let out = finish(child, LONG, what);
            assert!(out.status.success(), "{what} failed: {}", describe(&out));
            return (false, Some(took));
        }
        if started.elapsed() >= delay {
            break;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    child.kill().expect("kill -9");
    let out = finish(child, LONG, what);
    match out.status.signal() {
        Some(9) => (true, None),
        _ => {
            assert!(out.status.success(), "{what} failed: {}", describe(&out));
            (false, None)
        }
    }
}

/// Every problem is garbage of one of `allowed` kinds; returns the kinds seen.
fn only_garbage(v: &Value, allowed: &[&str], context: &str) -> BTreeSet<String> {
    let mut kinds = BTreeSet::new();
    for p in problems(v) {
        assert_eq!(
            p["severity"], "garbage",
            "corruption after {context}:\n{v:#}"
        );
        let kind = p["kind"].as_str().expect("kind");
        assert!(
            allowed.contains(&kind),
            "unexpected problem {kind} after {context}:\n{v:#}"
        );
        kinds.insert(kind.to_string());
    }
    kinds
}

#[test]
fn killed_ingests_leave_a_consistent_store() {
    let kills = scale(10, 50);
    let mut rng = seeded_rng("killed_ingests_leave_a_consistent_store");
    let env = hardened_env();
    let keep = keep_snapshot(&env);
    let src = env.path("victim");
    release_with(&src, "3.0.0", &bulk("skills/many", 300, "victim"));
    // The digest and duration of an ingest nobody kills, in a store of its own.
    let reference = hardened_env();
    let started = Instant::now();
    let expected = reference.ingest_digest(&src, "3.0.0");
    // How long a cold ingest takes, re-measured at every re-ingest below:
    // each kill lands within 0..=5/4 of it.
    let mut took = started.elapsed().as_millis() as u64;
    let mut windows = Vec::new();

    let (mut mid, mut leftovers, mut orphans) = (0, 0, 0);
    for i in 0..kills {
        let window = (took * 5 / 4).max(5);
        windows.push(window);
        let delay = rng.below(window + 1);
        let context = format!("kill {i} after {delay} ms");
        let cmd = env.cmd([
            OsStr::new("ingest"),
            src.as_os_str(),
            OsStr::new("--version"),
            OsStr::new("3.0.0"),
        ]);
        if kill_after(cmd, Duration::from_millis(delay), "ingest").0 {
            mid += 1;
        }
        let (_, v) = env.verify(&[]);
        let kinds = only_garbage(
            &v,
            &["leftover-temporary", "leftover-manifest", "orphan-object"],
            &context,
        );
        leftovers += usize::from(kinds.contains("leftover-temporary"));
        orphans += usize::from(kinds.contains("orphan-object"));
        // Every leftover is a work directory under tmp/.
        for p in problems(&v)
            .iter()
            .filter(|p| p["kind"] == "leftover-temporary")
        {
            let path = p["path"].as_str().expect("path");
            assert!(
                path.starts_with(&*env.store.join("tmp").to_string_lossy()),
                "{context}: {p}"
            );
        }
        let gc = env.gc();
        assert_eq!(
            gc["temporary"].as_array().map_or(0, Vec::len),
            problems(&v)
                .iter()
                .filter(|p| p["kind"] == "leftover-temporary")
                .count(),
            "{context}: gc and verify disagree: {gc}\n{v:#}"
        );
        env.verify_json_clean(&format!("gc after {context}"));
        assert_eq!(names_in(&env.store.join("tmp")), Vec::<String>::new());
        // A fresh ingest gives the digest of an ingest nobody killed.
        let started = Instant::now();
        assert_eq!(env.ingest_digest(&src, "3.0.0"), expected, "{context}");
        took = started.elapsed().as_millis() as u64;
        // Cold again for the next kill.
        env.json(["rm", expected.as_str(), "--json"]);
        env.gc();
    }
    assert!(env.listed().contains(&keep));
    env.verify_json_clean("the end");
    let view = env.path("keep-view");
    assert_ok(&env.checkout(&keep, &view, &[]));
    assert_eq!(env.verify_tree(&view, &keep).0, 0);
    assert!(
        mid >= 1,
        "no kill landed while an ingest ran (windows {windows:?} ms): the test proved nothing"
    );
    eprintln!(
        "killed_ingests_leave_a_consistent_store: {kills} kills, {mid} mid-ingest \
         ({leftovers} left a work directory, {orphans} left orphan objects); \
         kill windows (ms, 5/4 of the last cold ingest): {windows:?}"
    );
}

#[test]
fn killed_checkouts_never_leave_a_half_built_view() {
    let kills = scale(10, 50);
    let mut rng = seeded_rng("killed_checkouts_never_leave_a_half_built_view");
    let env = hardened_env();
    let src = env.path("src");
    release_with(&src, "3.0.0", &bulk("skills/many", 1000, "checkout"));
    let d = env.ingest_digest(&src, "3.0.0");
    let out = env.path("out");
    fs::create_dir(&out).unwrap();
    let started = Instant::now();
    assert_ok(&env.checkout(&d, &out.join("probe"), &[]));
    // How long a checkout takes: measured once here, then again whenever
    // one finishes before its kill; each kill lands within 0..=5/4 of it.
    let mut took = started.elapsed().as_millis() as u64;
    assert_ok(&env.run([OsStr::new("discard"), out.join("probe").as_os_str()]));
    let mut windows = Vec::new();

    let (mut mid, mut whole, mut siblings_left, mut unrecorded) = (0, 0, 0, 0);
    for i in 0..kills {
        let window = (took * 5 / 4).max(5);
        windows.push(window);
        let delay = rng.below(window + 1);
        let context = format!("kill {i} after {delay} ms");
        let name = format!("v{i}");
        let dest = out.join(&name);
        let cmd = env.cmd([OsStr::new("checkout"), OsStr::new(&d), dest.as_os_str()]);
        match kill_after(cmd, Duration::from_millis(delay), "checkout") {
            (true, _) => mid += 1,
            (false, Some(t)) => took = t.as_millis() as u64,
            (false, None) => {}
        }
        // DEST is absent or whole.
        if exists(&dest) {
            whole += 1;
            let (code, diffs) = env.verify_tree(&dest, &d);
            assert_eq!(code, 0, "{context}: a half-built view at DEST:\n{diffs:#}");
            assert_eq!(mode_of(&dest), 0o555, "{context}");
        }
        let prefix = format!(".{name}.cestore-tmp-");
        let siblings: Vec<String> = names_in(&out)
            .into_iter()
            .filter(|n| n.starts_with(&prefix))
            .collect();
        assert!(siblings.len() <= 1, "{context}: {siblings:?}");
        let (_, v) = env.verify(&[]);
        only_garbage(&v, &["leftover-temporary"], &context);
        for s in &siblings {
            siblings_left += 1;
            let full = out.join(s).to_string_lossy().into_owned();
            assert!(
                problems(&v)
                    .iter()
                    .any(|p| p["kind"] == "leftover-temporary" && p["path"] == full.as_str()),
                "{context}: verify does not name the half-built view {full}:\n{v:#}"
            );
        }
        env.gc();
        let after: Vec<String> = names_in(&out)
            .into_iter()
            .filter(|n| n.contains(".cestore-tmp-"))
            .collect();
        assert_eq!(
            after,
            Vec::<String>::new(),
            "{context}: gc left a temporary view"
        );
        assert_eq!(
            names_in(&env.store.join("tmp")),
            Vec::<String>::new(),
            "{context}"
        );
        env.verify_json_clean(&format!("gc after {context}"));
        if exists(&dest) {
            let dest_text = dest.to_string_lossy().into_owned();
            let discard = if view_paths(&env, &d).contains(&dest_text) {
                env.run([OsStr::new("discard"), dest.as_os_str()])
            } else {
                // Published, killed before it was recorded: a complete,
                // unrecorded view, removed with --force.
                unrecorded += 1;
                env.run([
                    OsStr::new("discard"),
                    dest.as_os_str(),
                    OsStr::new("--force"),
                    OsStr::new(&d),
                ])
            };
            assert_ok(&discard);
            assert!(!exists(&dest));
        }
    }
    // A checkout nobody kills still works.
    let fresh = out.join("fresh");
    assert_ok(&env.checkout(&d, &fresh, &[]));
    assert_eq!(env.verify_tree(&fresh, &d).0, 0);
    env.verify_json_clean("the end");
    assert!(
        mid >= 1,
        "no kill landed while a checkout ran (windows {windows:?} ms)"
    );
    eprintln!(
        "killed_checkouts_never_leave_a_half_built_view: {kills} kills, {mid} mid-checkout; \
         DEST whole {whole} times (absent otherwise, {unrecorded} of them published but \
         unrecorded); {siblings_left} temporary siblings removed by gc; kill windows \
         (ms, 5/4 of the last checkout that finished): {windows:?}"
    );
}

// ---------------------------------------------------------------------------
// 3. Races in the source tree
// ---------------------------------------------------------------------------

/// Swaps two paths atomically with `renameat2(RENAME_EXCHANGE)`.
fn exchange(a: &Path, b: &Path) {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        a,
        rustix::fs::CWD,
        b,
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .unwrap_or_else(|e| panic!("exchange {} and {}: {e}", a.display(), b.display()));
}

/// Runs `body` in a thread until the returned guard is dropped; the guard
/// reports how many times it ran.
struct Racer {
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Racer {
    fn start(mut body: impl FnMut(u64) + Send + 'static) -> Racer {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let (s, c) = (stop.clone(), count.clone());
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                body(c.fetch_add(1, Ordering::Relaxed));
            }
        });
        Racer {
            stop,
            count,
            handle: Some(handle),
        }
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.join().expect("racer thread");
        }
        self.count.load(Ordering::Relaxed)
    }
}

impl Drop for Racer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Whether `hay` contains `needle`.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A directory, a file and `.claude-plugin` keep being swapped for symlinks
/// to outside copies holding a marker; no ingest may store a byte of them.
#[test]
fn swapped_symlinks_never_leak_outside_bytes() {
    let attempts = scale(50, 500);
    let env = hardened_env();
    let marker = format!(
        "OUTSIDE-THE-TREE-{:016x}",
        seeded_rng("swapped_symlinks").next_u64()
    );
    let tree = env.plugin("tree", V);
    let real: Vec<(String, Vec<u8>, u32)> = vec![
        ("skills/swap/a.md".into(), b"real a\n".to_vec(), 0o644),
        ("skills/swap/b.md".into(), b"real b\n".to_vec(), 0o644),
        (
            "skills/ce-plan/notes.md".into(),
            b"real notes\n".to_vec(),
            0o644,
        ),
    ];
    write_files(&tree, &real);
    // The outside: the same names, marked content.
    let outside = env.path("outside");
    write(&outside.join("dir/a.md"), format!("{marker} a\n"));
    write(&outside.join("dir/b.md"), format!("{marker} b\n"));
    write(&outside.join("file.md"), format!("{marker} file\n"));
    write(
        &outside.join("claude/plugin.json"),
        format!(r#"{{"name": "compound-engineering", "version": "{V}", "x": "{marker}"}}"#),
    );
    symlink(outside.join("dir"), outside.join("alt-dir")).unwrap();
    symlink(outside.join("file.md"), outside.join("alt-file")).unwrap();
    symlink(outside.join("claude"), outside.join("alt-claude")).unwrap();
    // What a faithful ingest of the tree stores.
    let mut expected: BTreeMap<String, String> = BTreeMap::new();
    let mut all = Vec::new();
    files_below(&tree, &mut all);
    for f in &all {
        let rel = f
            .strip_prefix(&tree)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        expected.insert(rel, sha_hex(&fs::read(f).unwrap()));
    }
    assert_eq!(expected.len(), 7);

    let pairs = [
        (tree.join("skills/swap"), outside.join("alt-dir")),
        (
            tree.join("skills/ce-plan/notes.md"),
            outside.join("alt-file"),
        ),
        (tree.join(".claude-plugin"), outside.join("alt-claude")),
    ];
    let racer = Racer::start(move |n| {
        let (a, b) = &pairs[(n % 3) as usize];
        exchange(a, b);
        std::thread::yield_now();
    });
    let tree_text = tree.to_string_lossy().into_owned();
    let mut accepted = 0;
    let mut rejected: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..attempts {
        let out = env.ingest_out(&tree, V, &[]);
        let v = parse_json(&out);
        match out.status.code() {
            Some(0) => {
                accepted += 1;
                let files: BTreeMap<String, String> = env
                    .files(&digest_of(&v))
                    .into_iter()
                    .map(|f| (f.path, f.sha256))
                    .collect();
                assert_eq!(files, expected, "ingest {i} stored something else");
            }
            Some(3) => {
                let err = &v["error"];
                let rule = err["rule"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no rule: {v}"));
                let path = err["path"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no path: {v}"));
                assert!(path.starts_with(&tree_text), "{v}");
                assert!(err["message"].as_str().unwrap().contains(path), "{v}");
                assert!(String::from_utf8_lossy(&out.stderr).contains(path), "{v}");
                *rejected.entry(rule.to_string()).or_default() += 1;
            }
            _ => panic!("ingest {i}: {}", describe(&out)),
        }
    }
    let swaps = racer.stop();
    // No byte from outside anywhere in the store.
    let mut stored = Vec::new();
    files_below(&env.store, &mut stored);
    for f in &stored {
        let bytes = fs::read(f).unwrap();
        assert!(
            !contains(&bytes, marker.as_bytes()),
            "{} holds bytes from outside the tree",
            f.display()
        );
    }
    env.verify_json_clean("after the races");
    let total_rejected: usize = rejected.values().sum();
    assert!(
        swaps > attempts as u64,
        "the swapper barely ran ({swaps} swaps)"
    );
    assert!(
        total_rejected >= 1,
        "no ingest met a swapped entry: the race did not happen"
    );
    eprintln!(
        "swapped_symlinks_never_leak_outside_bytes: {attempts} ingests during {swaps} swaps: \
         {accepted} stored exactly the tree, rejected {rejected:?}; {} store files scanned",
        stored.len()
    );
}

const GROW_BASE: usize = 3 * MIB / 2;
const GROW_CHUNK: usize = 16 * 1024;
const GROW_CHUNKS: usize = 16;

fn grow_chunk(generation: u64, i: usize) -> Vec<u8> {
    let mut v = format!("g{generation:010}c{i:04}|")
        .into_bytes()
        .repeat(GROW_CHUNK / 16 + 1);
    v.truncate(GROW_CHUNK);
    v
}

/// Whether `data` is one state the writer left the file in: the base, then
/// chunks 0..j of one generation.
fn consistent_growth(data: &[u8], base: &[u8]) -> bool {
    if data.len() < GROW_BASE || data[..GROW_BASE] != *base {
        return false;
    }
    let rest = &data[GROW_BASE..];
    if !rest.len().is_multiple_of(GROW_CHUNK) || rest.len() / GROW_CHUNK > GROW_CHUNKS {
        return false;
    }
    if rest.is_empty() {
        return true;
    }
    let Some(generation) = std::str::from_utf8(&rest[1..11])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return false;
    };
    rest.chunks(GROW_CHUNK)
        .enumerate()
        .all(|(i, c)| c == grow_chunk(generation, i).as_slice())
}

/// A 1.5 MiB file keeps being truncated back and appended to; ingests must
/// reject it as changing, or store one consistent state of it.
#[test]
fn files_changing_while_read_are_rejected() {
    let attempts = scale(30, 300);
    let env = hardened_env();
    let tree = env.plugin("tree", V);
    let grow = tree.join("assets/grow.bin");
    let base: Vec<u8> = (0..GROW_BASE).map(|i| (i % 251) as u8).collect();
    write(&grow, &base);
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(&grow)
        .expect("open for appending");
    let generation = Arc::new(AtomicU64::new(0));
    let g = generation.clone();
    let racer = Racer::start(move |_| {
        let n = g.fetch_add(1, Ordering::Relaxed);
        file.set_len(GROW_BASE as u64).expect("truncate");
        for i in 0..GROW_CHUNKS {
            file.write_all(&grow_chunk(n, i)).expect("append");
        }
    });
    let grow_text = grow.to_string_lossy().into_owned();
    let mut accepted = 0;
    let mut rejected: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..attempts {
        let out = env.ingest_out(&tree, V, &[]);
        let v = parse_json(&out);
        match out.status.code() {
            Some(0) => {
                accepted += 1;
                let row = env
                    .files(&digest_of(&v))
                    .into_iter()
                    .find(|f| f.path == "assets/grow.bin")
                    .expect("grow.bin stored");
                let data = fs::read(env.object(&row)).expect("read object");
                assert_eq!(sha_hex(&data), row.sha256);
                assert!(
                    consistent_growth(&data, &base),
                    "ingest {i} stored a torn read of a changing file ({} bytes)",
                    data.len()
                );
            }
            Some(3) => {
                let rule = v["error"]["rule"].as_str().expect("rule").to_string();
                assert!(
                    rule == "changed-while-copying" || rule == "changed-during-validation",
                    "ingest {i}: {v}"
                );
                assert_eq!(v["error"]["path"], grow_text.as_str(), "{v}");
                if rule == "changed-while-copying" {
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    assert!(stderr.contains("changed while being copied"), "{stderr}");
                }
                *rejected.entry(rule).or_default() += 1;
            }
            _ => panic!("ingest {i}: {}", describe(&out)),
        }
    }
    let writes = racer.stop();
    let total_rejected: usize = rejected.values().sum();
    assert!(
        total_rejected >= 1,
        "no ingest saw the file change ({accepted} accepted, {writes} rewrites)"
    );
    env.gc();
    env.verify_json_clean("after the growing file");
    eprintln!(
        "files_changing_while_read_are_rejected: {attempts} ingests during {writes} rewrites: \
         {accepted} stored one consistent state, rejected {rejected:?}"
    );
}

// ---------------------------------------------------------------------------
// 4. Hostile trees
// ---------------------------------------------------------------------------

/// What a hostile tree must get.
enum Expect {
    /// Accepted, with the oracle's provenance, files and manifest bytes
    /// where it is present, and a view that audits clean.
    Accept,
    /// Rejected under this rule, naming this path (relative to the tree).
    Reject(&'static str, Vec<u8>),
}

/// Starts the oracle on a tree; `None` without `../shared`.
fn spawn_oracle(dir: &Path, version: &str) -> Option<Child> {
    let script = util::oracle()?;
    Some(
        Command::new(util::python3())
            .arg(script)
            .arg("snapshot")
            .arg(dir)
            .arg("--version")
            .arg(version)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the oracle"),
    )
}

/// Hostile cases of one test, all against one store that already holds a
/// snapshot, so that "no partial store" means "objects/ and tmp/ exactly as
/// before the rejected ingest".
struct Hostile {
    test: &'static str,
    env: TestEnv,
    cases: Vec<(String, Expect, PathBuf)>,
}

impl Hostile {
    fn new(test: &'static str) -> Hostile {
        let env = hardened_env();
        let seed = env.path("seed");
        release_with(&seed, "0.0.1", &bulk("skills/seed", 8, "seed"));
        env.ingest_digest(&seed, "0.0.1");
        Hostile {
            test,
            env,
            cases: Vec::new(),
        }
    }

    /// Adds a case: a minimal plugin changed by `build`.
    fn case(&mut self, name: &str, expect: Expect, build: impl FnOnce(&Path)) {
        let tree = self.env.path(&format!("case-{}", self.cases.len()));
        minimal_plugin(&tree, V);
        build(&tree);
        self.cases.push((name.to_string(), expect, tree));
    }

    /// Runs every case: the oracles all at once, then cestore case by case.
    fn run(self) {
        let Hostile { test, env, cases } = self;
        let oracles: Vec<Option<Child>> = cases
            .iter()
            .map(|(_, _, tree)| spawn_oracle(tree, V))
            .collect();
        let n = cases.len();
        for (i, ((name, expect, tree), oracle)) in cases.into_iter().zip(oracles).enumerate() {
            let before = store_files(&env.store);
            let out = run_within(
                cestore(
                    &env.store,
                    [
                        OsStr::new("ingest"),
                        tree.as_os_str(),
                        OsStr::new("--version"),
                        OsStr::new(V),
                        OsStr::new("--json"),
                    ],
                ),
                DEADLINE,
                &format!("ingest of the hostile tree '{name}'"),
            );
            let oracle: Option<Value> = oracle.map(|child| {
                let o = finish(child, DEADLINE, "the oracle");
                serde_json::from_slice(&o.stdout)
                    .unwrap_or_else(|e| panic!("oracle output is not JSON ({e}): {}", describe(&o)))
            });
            let v = parse_json(&out);
            let context = format!(
                "{test}, case '{name}': {}\noracle: {oracle:?}",
                describe(&out)
            );
            match expect {
                Expect::Accept => {
                    assert_eq!(out.status.code(), Some(0), "{context}");
                    let digest = digest_of(&v);
                    if let Some(o) = &oracle {
                        assert_eq!(o["ok"], true, "the oracle rejects: {context}");
                        assert_eq!(v["provenance"], o["provenance"], "{context}");
                        let files = env.json(["show", digest.as_str(), "--files", "--json"])
                            ["files"]
                            .clone();
                        assert_eq!(files, o["files"], "{context}");
                        let manifest = env.run(["show", digest.as_str(), "--manifest"]);
                        assert_ok(&manifest);
                        assert_eq!(
                            manifest.stdout,
                            o["canonical_manifest"]
                                .as_str()
                                .expect("canonical_manifest")
                                .as_bytes(),
                            "{context}"
                        );
                    }
                    // The view gives the same tree back.
                    let view = env.path(&format!("view-{i}"));
                    assert_ok(&env.checkout(&digest, &view, &[]));
                    let (code, diffs) = env.verify_tree(&view, &digest);
                    assert_eq!(code, 0, "{context}\n{diffs:#}");
                }
                Expect::Reject(rule, rel) => {
                    assert_eq!(out.status.code(), Some(3), "{context}");
                    assert_eq!(v["ok"], false, "{context}");
                    assert_eq!(v["error"]["rule"], rule, "{context}");
                    let at = tree.join(OsStr::from_bytes(&rel));
                    let shown = at.to_string_lossy();
                    assert_eq!(v["error"]["path"].as_str(), Some(&*shown), "{context}");
                    assert!(
                        String::from_utf8_lossy(&out.stderr).contains(&*shown),
                        "stderr does not name {shown}: {context}"
                    );
                    if let Some(o) = &oracle {
                        assert_eq!(o["ok"], false, "the oracle accepts: {context}");
                    }
                    let after = store_files(&env.store);
                    assert_eq!(
                        after, before,
                        "a rejected ingest changed the store: {context}"
                    );
                }
            }
        }
        env.verify_json_clean(test);
        eprintln!(
            "{test}: {n} hostile cases{}",
            if util::oracle().is_some() {
                ", each compared with the oracle"
            } else {
                " (no oracle beside this checkout: checked against the expected answers only)"
            }
        );
    }
}

fn mknod(path: &Path, kind: &str, major: u32, minor: u32) {
    let status = Command::new("mknod")
        .arg(path)
        .arg(kind)
        .arg(major.to_string())
        .arg(minor.to_string())
        .status()
        .expect("run mknod");
    assert!(status.success(), "mknod {}", path.display());
}

fn bind_socket(path: &Path) {
    let listener = std::os::unix::net::UnixListener::bind(path).expect("bind a socket");
    // The socket file outlives the listener; nobody needs to accept.
    drop(listener);
}

#[test]
fn hostile_special_files() {
    let mut h = Hostile::new("hostile_special_files");
    h.case(
        "UNIX socket under skills/",
        Expect::Reject("not-regular-file", b"skills/ce-plan/sock".to_vec()),
        |t| bind_socket(&t.join("skills/ce-plan/sock")),
    );
    h.case(
        "FIFO under assets/ (walked last)",
        Expect::Reject("not-regular-file", b"assets/pipe".to_vec()),
        |t| {
            fs::create_dir_all(t.join("assets")).unwrap();
            mkfifo(&t.join("assets/pipe"));
        },
    );
    h.case(
        "socket as .claude-plugin/marketplace.json",
        Expect::Reject(
            "file-not-regular",
            b".claude-plugin/marketplace.json".to_vec(),
        ),
        |t| bind_socket(&t.join(".claude-plugin/marketplace.json")),
    );
    if rustix::process::geteuid().is_root() {
        for (what, kind, major, minor, rel) in [
            (
                "character device 1:3 (null) under skills/",
                "c",
                1,
                3,
                "skills/ce-plan/null",
            ),
            (
                "character device 1:5 (zero, endless) under skills/",
                "c",
                1,
                5,
                "skills/ce-work/zero",
            ),
            ("block device 7:0 under scripts/", "b", 7, 0, "scripts/loop"),
        ] {
            h.case(
                what,
                Expect::Reject("not-regular-file", rel.as_bytes().to_vec()),
                |t| {
                    fs::create_dir_all(t.join(rel).parent().unwrap()).unwrap();
                    mknod(&t.join(rel), kind, major, minor);
                },
            );
        }
    } else {
        crate::util::skip(
            "hostile_special_files (the device nodes)",
            "mknod needs root",
        );
    }
    h.run();
}

#[test]
fn hostile_names() {
    let mut h = Hostile::new("hostile_names");
    let cases: [(&str, &[&[u8]]); 9] = [
        (
            "a newline",
            &[b"skills/ce-plan/line\nbreak.md", b"skills/new\nline/x.md"],
        ),
        ("a tab", &[b"skills/ce-plan/tab\there.md"]),
        (
            "a backslash",
            &[b"skills/ce-plan/back\\slash.md", b"skills/ce-plan/\\"],
        ),
        (
            "quotes",
            &[b"skills/ce-plan/\"quoted\".md", b"skills/ce-plan/it's.md"],
        ),
        (
            "control characters and DEL",
            &[
                b"skills/ce-plan/\x01ctl.md",
                b"skills/ce-plan/del\x7f.md",
                b"skills/ce-plan/\x1b[31mred",
            ],
        ),
        (
            "U+2028, U+FFFD, an emoji and a private-use character",
            &[
                "skills/ce-plan/\u{2028}sep.md".as_bytes(),
                "skills/ce-plan/\u{fffd}.md".as_bytes(),
                "skills/ce-plan/emoji-\u{1f600}.md".as_bytes(),
                "skills/ce-plan/\u{e000}.md".as_bytes(),
            ],
        ),
        (
            "non-NFC and NFC spellings of one name (both kept)",
            &[
                "skills/ce-plan/e\u{301}.md".as_bytes(),
                "skills/ce-plan/\u{e9}.md".as_bytes(),
            ],
        ),
        (
            "names differing only in case (all kept)",
            &[
                b"skills/ce-plan/Readme.md",
                b"skills/ce-plan/README.md",
                b"skills/ce-plan/readme.md",
            ],
        ),
        (
            "a Kelvin sign that lowercases into a secret marker (dropped)",
            &[
                "skills/ce-plan/to\u{212a}en.md".as_bytes(),
                b"skills/ce-plan/kept.md",
            ],
        ),
    ];
    for (what, rels) in cases {
        h.case(&format!("names with {what}"), Expect::Accept, |t| {
            for rel in rels {
                write(&t.join(OsStr::from_bytes(rel)), b"odd name\n");
            }
        });
    }
    h.case(
        "a file in a directory whose name is not UTF-8",
        Expect::Reject("path-not-utf8", b"skills/caf\xe9/x.md".to_vec()),
        |t| write(&t.join(OsStr::from_bytes(b"skills/caf\xe9/x.md")), b"x\n"),
    );
    h.case(
        "a non-UTF-8 name inside a dropped directory",
        Expect::Accept,
        |t| {
            write(
                &t.join(OsStr::from_bytes(b"skills/ce-plan/node_modules/\xff.js")),
                b"x\n",
            )
        },
    );
    h.case(
        "a non-UTF-8 name carrying a secret marker (dropped)",
        Expect::Accept,
        |t| {
            write(
                &t.join(OsStr::from_bytes(b"skills/ce-plan/\xffsecret.md")),
                b"x\n",
            )
        },
    );
    // Python orders the undecodable byte as U+DCFF, before U+E000; byte
    // order would put the FIFO first.
    h.case(
        "walk order: a surrogate-escaped name before a FIFO named U+E000",
        Expect::Reject("path-not-utf8", b"skills/ce-plan/\xff".to_vec()),
        |t| {
            write(&t.join(OsStr::from_bytes(b"skills/ce-plan/\xff")), b"x\n");
            mkfifo(&t.join("skills/ce-plan/\u{e000}"));
        },
    );
    h.case("a 255-byte file name", Expect::Accept, |t| {
        write(
            &t.join("skills/ce-plan").join("n".repeat(255)),
            b"long name\n",
        )
    });
    h.run();
}

#[test]
fn hostile_shapes() {
    let mut h = Hostile::new("hostile_shapes");
    h.case(
        "nesting 500 levels deep, a file at the bottom",
        Expect::Accept,
        |t| {
            let deep = t.join("skills").join(["d"; 500].join("/"));
            fs::create_dir_all(&deep).unwrap();
            write(&deep.join("f.md"), b"at the bottom\n");
        },
    );
    h.case("two hard links to one file", Expect::Accept, |t| {
        write(&t.join("skills/ce-plan/one.md"), b"one inode\n");
        fs::hard_link(
            t.join("skills/ce-plan/one.md"),
            t.join("skills/ce-work/two.md"),
        )
        .unwrap();
    });
    h.case(
        "odd modes: setuid, group-exec only, other-exec only, 000",
        Expect::Accept,
        |t| {
            for (name, mode) in [
                ("suid.sh", 0o4755),
                ("g.sh", 0o610),
                ("o.sh", 0o601),
                ("none", 0o000),
            ] {
                let p = t.join("scripts").join(name);
                write(&p, format!("#!/bin/sh\n# {name}\n"));
                chmod(&p, mode);
            }
        },
    );
    let sparse = |len: u64| {
        move |t: &Path| {
            let p = t.join("assets/sparse.bin");
            write(&p, b"");
            fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .unwrap()
                .set_len(len)
                .unwrap();
        }
    };
    h.case(
        "a sparse 2 MiB file",
        Expect::Accept,
        sparse(2 * MIB as u64),
    );
    h.case(
        "a sparse file of 2 MiB + 1",
        Expect::Reject("file-too-large", b"assets/sparse.bin".to_vec()),
        sparse(2 * MIB as u64 + 1),
    );
    h.case(
        "2,048 empty directories beside the files",
        Expect::Accept,
        |t| {
            for i in 0..2048 {
                fs::create_dir_all(t.join(format!("skills/empty/e{i:04}"))).unwrap();
            }
        },
    );
    h.run();
}

#[test]
fn hostile_plugin_json() {
    let mut h = Hostile::new("hostile_plugin_json");
    let manifest = b".claude-plugin/plugin.json".to_vec();
    let ok = |extra: &str| {
        format!(r#"{{"name": "compound-engineering", "version": "{V}"{extra}}}"#).into_bytes()
    };
    let utf16: Vec<u8> = {
        let s = String::from_utf8(ok("")).unwrap();
        let mut v = vec![0xff, 0xfe];
        for u in s.encode_utf16() {
            v.extend_from_slice(&u.to_le_bytes());
        }
        v
    };
    let reject = || Expect::Reject("manifest-invalid", manifest.clone());
    let cases: Vec<(&str, Expect, Vec<u8>)> = vec![
        ("UTF-16LE with a BOM", reject(), utf16),
        (
            "arrays nested 100,000 deep",
            reject(),
            ok(&format!(
                r#", "x": {}{}"#,
                "[".repeat(100_000),
                "]".repeat(100_000)
            )),
        ),
        (
            "objects nested 100,000 deep",
            reject(),
            ok(&format!(
                r#", "x": {}1{}"#,
                "{\"a\":".repeat(100_000),
                "}".repeat(100_000)
            )),
        ),
        (
            "arrays nested 100 deep",
            Expect::Accept,
            ok(&format!(r#", "x": {}{}"#, "[".repeat(100), "]".repeat(100))),
        ),
        (
            "a lone surrogate escape",
            Expect::Accept,
            ok(", \"x\": \"\\ud800\""),
        ),
        (
            "escaped keys and values",
            Expect::Accept,
            br#"{"\u006eame": "compound\u002dengineering", "\u0076ersion": "1.0.0"}"#.to_vec(),
        ),
        (
            "a version of exactly 4,300 digits",
            Expect::Reject("version-mismatch", manifest.clone()),
            format!(
                r#"{{"name": "compound-engineering", "version": {}}}"#,
                "7".repeat(4300)
            )
            .into_bytes(),
        ),
        (
            "a version of 4,301 digits",
            reject(),
            format!(
                r#"{{"name": "compound-engineering", "version": {}}}"#,
                "7".repeat(4301)
            )
            .into_bytes(),
        ),
        ("trailing garbage", reject(), {
            let mut v = ok("");
            v.extend_from_slice(b" x");
            v
        }),
        ("trailing whitespace", Expect::Accept, {
            let mut v = ok("");
            v.extend_from_slice(b" \n\t\r\n");
            v
        }),
        ("empty", reject(), Vec::new()),
        (
            "a bare NaN",
            Expect::Reject("not-compound-engineering", manifest.clone()),
            b"NaN".to_vec(),
        ),
        ("a NUL byte inside", reject(), {
            let mut v = ok("");
            v.insert(1, 0);
            v
        }),
        ("exactly 2 MiB", Expect::Accept, {
            let mut v = ok(", \"pad\": \"\"");
            let pad = 2 * MIB - v.len();
            let at = v.len() - 2;
            v.splice(at..at, std::iter::repeat_n(b'p', pad));
            assert_eq!(v.len(), 2 * MIB);
            v
        }),
    ];
    for (what, expect, bytes) in cases {
        h.case(&format!("plugin.json: {what}"), expect, |t| {
            write(&t.join(".claude-plugin/plugin.json"), &bytes)
        });
    }
    h.run();
}

// ---------------------------------------------------------------------------
// 5. Bad requests
// ---------------------------------------------------------------------------

/// A tmpfs mounted for one test, unmounted on drop (also on panic).
pub(crate) struct Tmpfs {
    pub(crate) at: PathBuf,
}

impl Tmpfs {
    pub(crate) fn mount(at: &Path, opts: &str) -> Result<Tmpfs, String> {
        fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
            .arg(at)
            .output()
            .map_err(|e| format!("run mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(Tmpfs {
            at: at.to_path_buf(),
        })
    }

    fn remount(&self, opts: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(&self.at)
            .output()
            .expect("run mount");
        assert!(out.status.success(), "remount {opts}: {}", describe(&out));
    }

    /// Free bytes for an unprivileged writer.
    /// Replaces `filler` (on this tmpfs) with a file of `byte`s that leaves
    /// about `leave` bytes free, or as big as fits.
    pub(crate) fn fill(&self, filler: &Path, leave: u64, byte: u8) {
        let _ = fs::remove_file(filler);
        let fill = self.free().saturating_sub(leave);
        let mut f = fs::File::create(filler).unwrap();
        let chunk = vec![byte; 64 * 1024];
        let mut left = fill;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            if f.write_all(&chunk[..n]).is_err() {
                break;
            }
            left -= n as u64;
        }
    }

    pub(crate) fn free(&self) -> u64 {
        let st = rustix::fs::statvfs(&self.at).expect("statvfs");
        st.f_bavail * st.f_frsize
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.at)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.at).status();
        }
    }
}

/// Every command, for the tests where each must refuse the same way.
fn every_command(d: &str, src: &Path, dest: &Path) -> Vec<Vec<std::ffi::OsString>> {
    let os = |s: &str| std::ffi::OsString::from(s);
    vec![
        vec![os("list")],
        vec![os("log")],
        vec![os("show"), os(d)],
        vec![os("show"), os(d), os("--files")],
        vec![os("find"), os("--path"), os("skills/ce-plan/SKILL.md")],
        vec![os("verify")],
        vec![os("verify"), os("--tree"), src.into(), os(d)],
        vec![os("diff"), os(d), os(d)],
        vec![os("gc"), os("--dry-run")],
        vec![os("gc")],
        vec![os("ingest"), src.into(), os("--version"), os("7.7.7")],
        vec![os("checkout"), os(d), dest.into()],
        vec![os("path"), os(d)],
        vec![os("discard"), dest.into(), os("--force"), os(d)],
        vec![os("rm"), os(d)],
    ]
}

#[test]
fn symlinked_store_is_refused_and_untouched() {
    let env = hardened_env();
    let src = env.plugin("src", V);
    let d = env.ingest_digest(&src, V);
    let other = env.plugin("other", "7.7.7");
    let before = fingerprint(&env.store);
    let link = env.path("store-link");
    symlink(&env.store, &link).unwrap();
    let dest = env.path("dest");
    let mut refused = 0;
    let spellings: Vec<(&str, PathBuf)> = vec![
        ("--store LINK", link.clone()),
        (
            "--store LINK/",
            PathBuf::from(format!("{}/", link.display())),
        ),
        ("--store LINK/.", link.join(".")),
    ];
    for (how, store) in &spellings {
        for args in every_command(&d, &other, &dest) {
            let mut cmd = cestore(store, &args);
            cmd.arg("--json");
            let what = format!("{how}: cestore {args:?}");
            let out = run_within(cmd, LONG, &what);
            let stderr = assert_exit(&out, 7);
            let v = parse_json(&out);
            assert_eq!(v["error"]["kind"], "bad-store", "{what}: {v}");
            assert!(stderr.contains("symlink"), "{what}: {stderr}");
            assert!(
                stderr.contains(&*link.to_string_lossy()),
                "{what}: {stderr}"
            );
            refused += 1;
        }
    }
    // Through the environment too.
    for (var, value) in [
        ("CESTORE_DIR", link.clone()),
        ("XDG_DATA_HOME", env.path("xdg")),
    ] {
        if var == "XDG_DATA_HOME" {
            fs::create_dir(env.path("xdg")).unwrap();
            symlink(&env.store, env.path("xdg/cestore")).unwrap();
        }
        let out = Command::new(util::bin())
            .args(["list", "--json"])
            .env_remove("CESTORE_DIR")
            .env(var, &value)
            .output()
            .unwrap();
        assert_exit(&out, 7);
        refused += 1;
    }
    assert!(!exists(&dest));
    assert_eq!(
        fingerprint(&env.store),
        before,
        "a refused command touched the store"
    );
    assert!(env.listed().contains(&d));
    env.verify_json_clean("after the refusals");
    eprintln!("symlinked_store_is_refused_and_untouched: {refused} commands refused");
}

fn catalogue(store: &Path) -> PathBuf {
    store.join("catalogue.sqlite")
}

/// Runs Python's sqlite3 on the catalogue: `script` gets `c`, the connection.
fn python_sqlite(store: &Path, script: &str) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\n{script}\nc.close()\n"
        ))
        .arg(catalogue(store))
        .output()
        .expect("run python3");
    assert_ok(&out);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Saves the catalogue's files (main, -wal, -shm) to restore them later.
fn save_catalogue(store: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    [
        "catalogue.sqlite",
        "catalogue.sqlite-wal",
        "catalogue.sqlite-shm",
    ]
    .iter()
    .map(|n| store.join(n))
    .filter(|p| p.exists())
    .map(|p| {
        let b = fs::read(&p).unwrap();
        (p, b)
    })
    .collect()
}

#[test]
fn corrupt_catalogue_is_refused_and_kept() {
    let env = hardened_env();
    let src = env.path("src");
    release_with(&src, V, &bulk("skills/x", 20, "cat"));
    let d = env.ingest_digest(&src, V);
    env.plugin("other", "7.7.7");
    let dest = env.path("dest");
    // Everything into the main file first: a corrupt catalogue.sqlite beside
    // a WAL that still holds page 1 would not even be read.
    python_sqlite(&env.store, "c.execute('PRAGMA wal_checkpoint(TRUNCATE)')");
    let wal = env.store.join("catalogue.sqlite-wal");
    assert!(
        fs::metadata(&wal).map_or(0, |m| m.len()) == 0,
        "the WAL still holds pages"
    );
    let saved = save_catalogue(&env.store);
    let objects = store_files(&env.store);
    let mut rng = Rng::new(0x5eed);
    let garbage: Vec<u8> = (0..8192).map(|_| rng.next_u64() as u8).collect();
    fs::write(catalogue(&env.store), &garbage).unwrap();
    let mut refused = 0;
    for args in every_command(&d, &src, &dest) {
        let mut cmd = env.cmd(&args);
        cmd.arg("--json");
        let what = format!("cestore {args:?} on a corrupt catalogue");
        let out = run_within(cmd, LONG, &what);
        let stderr = assert_exit(&out, 7);
        let v = parse_json(&out);
        assert_eq!(v["error"]["kind"], "catalogue-lost", "{what}: {v}");
        assert!(
            stderr.contains(&*catalogue(&env.store).to_string_lossy()),
            "{what}: {stderr}"
        );
        assert_eq!(
            fs::read(catalogue(&env.store)).expect("the catalogue still exists"),
            garbage,
            "{what} changed the corrupt catalogue"
        );
        refused += 1;
    }
    assert!(!exists(&dest));
    assert_eq!(store_files(&env.store), objects, "objects changed");
    // Put back, nothing is lost.
    for (p, b) in &saved {
        fs::write(p, b).unwrap();
    }
    assert_eq!(env.listed(), vec![d.clone()]);
    env.verify_json_clean("the restored catalogue");
    eprintln!("corrupt_catalogue_is_refused_and_kept: {refused} commands refused");
}

#[test]
fn newer_catalogue_is_refused_and_left_untouched() {
    let mut refused = 0;
    for journal in ["wal", "delete"] {
        let env = hardened_env();
        let src = env.path("src");
        release_with(&src, V, &bulk("skills/x", 20, "newer"));
        let d = env.ingest_digest(&src, V);
        env.plugin("other", "7.7.7");
        let dest = env.path("dest");
        let current = python_sqlite(
            &env.store,
            "print(c.execute('PRAGMA user_version').fetchone()[0])",
        );
        python_sqlite(
            &env.store,
            &format!(
                "c.execute('PRAGMA journal_mode={journal}')\nc.execute('PRAGMA user_version = 99')"
            ),
        );
        let bytes = fs::read(catalogue(&env.store)).unwrap();
        let objects = store_files(&env.store);
        for args in every_command(&d, &src, &dest) {
            let mut cmd = env.cmd(&args);
            cmd.arg("--json");
            let what = format!("cestore {args:?} on a schema-99 catalogue ({journal} journal)");
            let out = run_within(cmd, LONG, &what);
            let stderr = assert_exit(&out, 7);
            let v = parse_json(&out);
            assert_eq!(v["error"]["kind"], "catalogue-too-new", "{what}: {v}");
            assert!(stderr.contains("99"), "{what}: {stderr}");
            assert!(
                fs::read(catalogue(&env.store)).expect("the catalogue still exists") == bytes,
                "{what} changed the newer catalogue's bytes"
            );
            refused += 1;
        }
        assert!(!exists(&dest));
        assert_eq!(store_files(&env.store), objects);
        python_sqlite(
            &env.store,
            &format!("c.execute('PRAGMA user_version = {current}')"),
        );
        assert_eq!(env.listed(), vec![d.clone()]);
        env.verify_json_clean("the catalogue back at its version");
    }
    eprintln!("newer_catalogue_is_refused_and_left_untouched: {refused} commands refused");
}

/// Mounts a tmpfs for a test, or prints why the test skips.
pub(crate) fn tmpfs_or_skip(test: &str, at: &Path, opts: &str) -> Option<Tmpfs> {
    match Tmpfs::mount(at, opts) {
        Ok(m) => Some(m),
        Err(e) => {
            crate::util::skip(test, &format!("cannot mount a tmpfs ({e})"));
            None
        }
    }
}

/// A store on a tmpfs of `opts` mounted at `name` in `probe`'s directory,
/// its commands run as [`hardened_env`] runs them; `None` (the test skips)
/// where no tmpfs can be mounted.
fn store_on_tmpfs(test: &str, probe: &TestEnv, name: &str, opts: &str) -> Option<(Tmpfs, TestEnv)> {
    let mnt = tmpfs_or_skip(test, &probe.path(name), opts)?;
    let env = TestEnv::with_store(mnt.at.join("store")).within(LONG);
    Some((mnt, env))
}

/// Ingests a release of 20 files at version 0.1.0, the snapshot a failing
/// operation must not cost; returns its digest.
fn keep_snapshot(env: &TestEnv) -> String {
    let keep_src = env.path("keep");
    release_with(&keep_src, "0.1.0", &bulk("skills/keep", 20, "keep"));
    env.ingest_digest(&keep_src, "0.1.0")
}

#[test]
fn read_only_store_fails_clearly() {
    let test = "read_only_store_fails_clearly";
    let probe = hardened_env();
    let Some((mnt, env)) = store_on_tmpfs(test, &probe, "ro", "size=64m") else {
        return;
    };
    let src = env.path("src");
    release_with(&src, V, &bulk("skills/x", 40, "ro"));
    let d = env.ingest_digest(&src, V);
    let shared = env.json(["path", d.as_str(), "--json"]);
    let view = env.path("view");
    assert_ok(&env.checkout(&d, &view, &[]));
    let other = env.plugin("other", "7.7.7");
    mnt.remount("ro");

    // Reads work, or fail clearly with 7; a read that works tells the truth.
    let mut worked = Vec::new();
    let mut failed = Vec::new();
    let reads: Vec<Vec<std::ffi::OsString>> = vec![
        vec!["list".into()],
        vec!["show".into(), d.clone().into()],
        vec!["show".into(), d.clone().into(), "--files".into()],
        vec!["log".into()],
        vec![
            "find".into(),
            "--path".into(),
            "skills/ce-plan/SKILL.md".into(),
        ],
        vec!["verify".into()],
        vec![
            "verify".into(),
            "--tree".into(),
            view.clone().into(),
            d.clone().into(),
        ],
        vec!["diff".into(), d.clone().into(), d.clone().into()],
        vec!["path".into(), d.clone().into()],
        vec!["gc".into(), "--dry-run".into()],
    ];
    for args in reads {
        let mut cmd = env.cmd(&args);
        cmd.arg("--json");
        let what = format!("cestore {args:?} on a read-only store");
        let out = run_within(cmd, LONG, &what);
        match out.status.code() {
            Some(0) => {
                let v = parse_json(&out);
                let s = v.to_string();
                if args[0] == "verify" && args.len() == 1 {
                    assert_eq!(v["snapshots_checked"], 1, "{what}: {v}");
                } else if args[0] != "log" && args[0] != "gc" {
                    assert!(s.contains(&d), "{what} works but does not see {d}: {v}");
                }
                if args[0] == "path" {
                    assert_eq!(v["path"], shared["path"], "{v}");
                }
                if args[0] == "verify" {
                    assert_eq!(v["ok"], true, "{v}");
                }
                worked.push(format!("{:?}", args[0]));
            }
            Some(7) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(stderr.starts_with("cestore: error: "), "{what}: {stderr}");
                failed.push(format!("{:?}: {}", args[0], stderr.trim()));
            }
            _ => panic!("{what}: {}", describe(&out)),
        }
    }
    // Writes fail with 7, naming the problem, and change nothing.
    let before = fingerprint(&env.store);
    let out = env.ingest_out(&other, "7.7.7", &[]);
    let stderr = assert_exit(&out, 7);
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    let dest = env.path("dest");
    let out = env.checkout(&d, &dest, &[]);
    let stderr = assert_exit(&out, 7);
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert!(!exists(&dest));
    assert_eq!(
        names_in(&env.base)
            .iter()
            .filter(|n| n.contains("cestore-tmp"))
            .count(),
        0
    );
    for args in [vec!["rm", d.as_str(), "--force"], vec!["gc"]] {
        let out = env.run(&args);
        let code = out.status.code();
        assert!(
            code == Some(7) || code == Some(0),
            "{args:?}: {}",
            describe(&out)
        );
        if code == Some(7) {
            failed.push(format!(
                "{:?}: {}",
                args[0],
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        } else {
            worked.push(format!("{:?}", args[0]));
        }
    }
    assert_eq!(fingerprint(&env.store), before);
    mnt.remount("rw");
    assert_eq!(
        env.listed(),
        vec![d.clone()],
        "rm on a read-only store forgot the snapshot"
    );
    env.verify_json_clean("back to read-write");
    assert_eq!(env.verify_tree(&view, &d).0, 0);
    eprintln!("{test}: worked read-only: {worked:?}; refused with 7: {failed:#?}");
    drop(env);
    drop(mnt);
}

#[test]
fn full_disk_fails_clearly_and_loses_nothing() {
    let test = "full_disk_fails_clearly_and_loses_nothing";
    let probe = hardened_env();
    let Some((mnt, env)) = store_on_tmpfs(test, &probe, "full", "size=2m") else {
        return;
    };
    let keep = keep_snapshot(&env);
    let big = env.path("big");
    let mut rng = Rng::new(0xb16);
    let files: Vec<(String, Vec<u8>, u32)> = (0..3)
        .map(|i| {
            let bytes: Vec<u8> = (0..MIB).map(|_| rng.next_u64() as u8).collect();
            (format!("assets/big{i}.bin"), bytes, 0o644)
        })
        .collect();
    release_with(&big, V, &files);
    let out = env.ingest_out(&big, V, &[]);
    let stderr = assert_exit(&out, 7);
    assert!(stderr.contains("No space left on device"), "{stderr}");
    let v = parse_json(&out);
    assert!(
        v["error"]["kind"] == "io" || v["error"]["kind"] == "catalogue",
        "{v}"
    );
    // Nothing half-done: no work directory, no new object, the old snapshot whole.
    assert_eq!(names_in(&env.store.join("tmp")), Vec::<String>::new());
    env.verify_json_clean("after the failed ingest on a full disk");
    assert_eq!(env.listed(), vec![keep.clone()]);
    // Room again: the same ingest succeeds.
    mnt.remount("size=64m");
    let d = env.ingest_digest(&big, V);
    env.verify_json_clean("after the retry");
    let view = env.path("view");
    assert_ok(&env.checkout(&d, &view, &[]));
    assert_eq!(env.verify_tree(&view, &d).0, 0);
    drop(env);
    drop(mnt);
}

/// The disk fills at every point of an ingest in turn: staging, publishing,
/// the catalogue's commit. Each attempt succeeds or fails with 7, and never
/// costs a snapshot.
#[test]
fn disk_full_at_any_point_of_an_ingest_loses_nothing() {
    let test = "disk_full_at_any_point_of_an_ingest_loses_nothing";
    let probe = hardened_env();
    let Some((mnt, env)) = store_on_tmpfs(test, &probe, "fill", "size=16m") else {
        return;
    };
    let keep = keep_snapshot(&env);
    let src = env.path("src");
    let files: Vec<(String, Vec<u8>, u32)> = (0..40)
        .map(|i| {
            (
                format!("skills/f/x{i:02}.md"),
                format!("{i}\n").repeat(1000 + i * 50).into_bytes(),
                0o644,
            )
        })
        .collect();
    release_with(&src, V, &files);
    let page = 4096u64;
    let need: u64 = files
        .iter()
        .map(|f| (f.1.len() as u64).div_ceil(page))
        .sum::<u64>()
        + 1;
    let filler = mnt.at.join("filler");
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    // Coarse steps through staging, then page by page where the objects fit
    // and the catalogue's commit does not (every page with CESTORE_STRESS=1).
    let (coarse, dense) = if stress() { (1, 48) } else { (16, 12) };
    let mut free_pages: Vec<u64> = (0..need + 64).step_by(coarse).collect();
    free_pages.extend(need.saturating_sub(2)..need + dense);
    free_pages.sort_unstable();
    free_pages.dedup();
    for want in &free_pages {
        mnt.fill(&filler, want * page, 0xa5);
        let context = format!("{want} pages free ({need} needed by the objects)");
        let out = env.ingest_out(&src, V, &[]);
        let outcome = match out.status.code() {
            Some(0) => "stored".to_string(),
            Some(7) => {
                let v = parse_json(&out);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(
                    stderr.contains("No space left on device") || stderr.contains("full"),
                    "{context}: {stderr}"
                );
                format!("refused ({})", v["error"]["kind"].as_str().unwrap_or("?"))
            }
            _ => panic!("{context}: {}", describe(&out)),
        };
        let (_, v) = env.verify(&[]);
        only_garbage(&v, &["orphan-object"], &context);
        assert!(env.listed().contains(&keep), "{context}");
        fs::remove_file(&filler).unwrap();
        env.gc();
        env.verify_json_clean(&context);
        // With room again, the release goes in (or is there already).
        let d = env.ingest_digest(&src, V);
        env.json(["rm", d.as_str(), "--json"]);
        env.gc();
        *outcomes.entry(outcome).or_default() += 1;
    }
    assert!(
        outcomes.keys().any(|k| k.starts_with("refused")),
        "the disk never filled: {outcomes:?}"
    );
    eprintln!("{test}: {} attempts: {outcomes:?}", free_pages.len());
    drop(env);
    drop(mnt);
}

#[test]
fn missing_version_is_a_usage_error() {
    let env = hardened_env();
    let src = env.plugin("src", V);
    let d = env.ingest_digest(&src, V);
    let before = store_files(&env.store);
    let out = env.run([OsStr::new("ingest"), src.as_os_str(), OsStr::new("--json")]);
    let stderr = assert_exit(&out, 2);
    assert!(stderr.contains("--version"), "{stderr}");
    let out = env.run([
        OsStr::new("ingest"),
        src.as_os_str(),
        OsStr::new("--version"),
    ]);
    assert_exit(&out, 2);
    assert_eq!(store_files(&env.store), before);
    assert_eq!(env.listed(), vec![d]);
    env.verify_json_clean("after the usage errors");
}

/// An ambiguous prefix refuses every command that takes a digest (exit 5,
/// `rm` forgets nothing); an existing DEST or one inside the store is
/// refused (exit 6) and left alone.
#[test]
fn ambiguous_prefixes_and_bad_destinations_lose_nothing() {
    let env = hardened_env();
    let (prefix, one, two) = ingest_sharing_four_digits(&env, "1.0.0", "1.0.1");
    let all = env.listed();
    let before = store_files(&env.store);
    let dest = env.path("dest");
    let mut refused = 0;
    for args in [
        vec!["show", &prefix],
        vec!["log", &prefix],
        vec!["verify", &prefix],
        vec!["diff", &prefix, &one],
        vec!["rm", &prefix],
        vec!["rm", &prefix, "--force"],
        vec!["path", &prefix],
        vec!["checkout", &prefix, dest.to_str().unwrap()],
    ] {
        let out = env.run(&args);
        let stderr = assert_exit(&out, 5);
        assert!(
            stderr.contains(&one) && stderr.contains(&two),
            "{args:?}: {stderr}"
        );
        refused += 1;
    }
    assert!(!exists(&dest));
    assert_eq!(env.listed(), all, "an ambiguous rm forgot something");
    assert_eq!(store_files(&env.store), before);
    assert_eq!(names_in(&env.store.join("views")), Vec::<String>::new());

    // DEST exists (with someone's file in it), or lies inside the store
    // (through `..` or a symlinked parent).
    write(&dest.join("mine.txt"), b"mine\n");
    let inside_link = env.path("inside");
    symlink(env.store.join("tmp"), &inside_link).unwrap();
    for target in [
        dest.clone(),
        env.path("x/../store/view"),
        inside_link.join("view"),
        env.store.to_path_buf(),
    ] {
        if let Some(parent) = target.parent() {
            let _ = fs::create_dir_all(parent);
        }
        let out = env.checkout(&one, &target, &[]);
        let stderr = assert_exit(&out, 6);
        assert!(
            stderr.contains("exists") || stderr.contains("inside the store"),
            "{}: {stderr}",
            target.display()
        );
        refused += 1;
    }
    assert_eq!(fs::read(dest.join("mine.txt")).unwrap(), b"mine\n");
    assert_eq!(names_in(&dest), vec!["mine.txt".to_string()]);
    assert!(!exists(&env.store.join("view")));
    assert_eq!(store_files(&env.store), before);
    env.verify_json_clean("after the bad requests");
    eprintln!("ambiguous_prefixes_and_bad_destinations_lose_nothing: {refused} requests refused");
}

// ---------------------------------------------------------------------------
// 6. A tampered store
// ---------------------------------------------------------------------------

/// Writes `bytes` into a view's file in place (same inode: the object).
fn write_through(path: &Path, bytes: &[u8]) {
    let mode = mode_of(path);
    chmod(path, mode | 0o200);
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
    chmod(path, mode);
}

#[test]
fn tampered_objects_are_never_handed_out_silently() {
    let env = hardened_env();
    let shared_text: &[u8] = b"shared by both releases, tampered through a view\n";
    let script: &[u8] = b"#!/bin/sh\necho shared script\n";
    let mk = |name: &str, version: &str| {
        let root = env.path(name);
        release_with(
            &root,
            version,
            &[
                ("skills/lib/shared.md".into(), shared_text.to_vec(), 0o644),
                ("scripts/run.sh".into(), script.to_vec(), 0o755),
                (
                    "skills/lib/own.md".into(),
                    format!("own to {name}\n").into_bytes(),
                    0o644,
                ),
            ],
        );
        root
    };
    let a_src = mk("a", "1.0.0");
    let b_src = mk("b", "1.0.1");
    let a = env.ingest_digest(&a_src, "1.0.0");
    let b = env.ingest_digest(&b_src, "1.0.1");
    let va = env.path("view-a");
    let vb = env.path("view-b");
    assert_ok(&env.checkout(&a, &va, &[]));
    assert_ok(&env.checkout(&b, &vb, &[]));
    let shared_view = PathBuf::from(
        env.json(["path", b.as_str(), "--json"])["path"]
            .as_str()
            .unwrap(),
    );
    env.verify_json_clean("before tampering");
    let row = env
        .files(&a)
        .into_iter()
        .find(|f| f.path == "skills/lib/shared.md")
        .unwrap();
    let object = env.object(&row);
    let s = |p: &Path| p.to_string_lossy().into_owned();

    // 1. Same size, same mode, other bytes, written through view A.
    let mut evil = shared_text.to_vec();
    evil[0] ^= 0x20;
    write_through(&va.join("skills/lib/shared.md"), &evil);
    assert_eq!(
        fs::read(&object).unwrap(),
        evil,
        "the view's file is the object"
    );
    assert_eq!(mode_of(&object), 0o444);
    // The cheap check of a checkout cannot see it; verify must.
    let vc = env.path("view-c");
    let co = env.checkout(&a, &vc, &[]);
    let cheap_check_saw_it = co.status.code() == Some(1);
    assert!(matches!(co.status.code(), Some(0 | 1)), "{}", describe(&co));
    let (code, v) = env.verify(&[]);
    assert_eq!(code, 1, "verify misses a same-size change:\n{v:#}");
    let found: Vec<&Value> = problems(&v)
        .iter()
        .filter(|p| p["kind"] == "object-content")
        .collect();
    assert_eq!(found.len(), 1, "{v:#}");
    let p = found[0];
    assert_eq!(p["severity"], "corruption");
    assert_eq!(p["path"], s(&object).as_str());
    let snaps: BTreeSet<&str> = crate::util::strs(&p["snapshots"]).into_iter().collect();
    assert_eq!(snaps, BTreeSet::from([a.as_str(), b.as_str()]), "{p}");
    let views: BTreeSet<String> = crate::util::array(&p["views"])
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect();
    let mut want: BTreeSet<String> = [s(&va), s(&vb), s(&shared_view)].into();
    if !cheap_check_saw_it {
        want.insert(s(&vc));
    }
    assert_eq!(views, want, "{p}");
    let human = env.run(["verify"]);
    assert_exit(&human, 1);
    let h = String::from_utf8_lossy(&human.stdout);
    for needle in [
        format!("affects snapshot {a}"),
        format!("affects snapshot {b}"),
        format!("affects view {}", va.display()),
    ] {
        assert!(h.contains(&needle), "{needle} missing from:\n{h}");
    }
    write_through(&va.join("skills/lib/shared.md"), shared_text);
    env.verify_json_clean("bytes put back");

    // 2. A chmod through view B, the bytes intact: a checkout re-hashes the
    // object and sets its mode back before it hands it out, and says so.
    let through = vb.join("scripts/run.sh");
    let script_row = env
        .files(&b)
        .into_iter()
        .find(|f| f.path == "scripts/run.sh")
        .unwrap();
    let script_obj = env.object(&script_row);
    chmod(&through, 0o755);
    assert_eq!(mode_of(&script_obj), 0o755);
    let (code, v) = env.verify(&[]);
    assert_eq!(code, 1);
    let p = problems(&v)
        .iter()
        .find(|p| p["kind"] == "object-mode")
        .expect("object-mode");
    assert_eq!(p["path"], s(&script_obj).as_str());
    assert_eq!(p["snapshots"].as_array().unwrap().len(), 2, "{p}");
    assert!(
        crate::util::array(&p["views"])
            .iter()
            .any(|x| x == s(&vb).as_str()),
        "{p}"
    );
    let vd = env.path("view-d");
    let restored = env.checkout_ok(&a, &vd, &[])["modes_restored"].clone();
    assert!(
        restored
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().starts_with(&s(&script_obj))),
        "{restored}"
    );
    assert_eq!(mode_of(&script_obj), 0o555);
    env.verify_json_clean("mode set back by a checkout");
    assert_eq!(env.verify_tree(&vd, &a).0, 0);

    // 2b. A chmod and other bytes: never handed out, by checkout, path or stage.
    chmod(&through, 0o755);
    let mut evil = fs::read(&through).unwrap();
    evil[0] ^= 0x20;
    write_through(&through, &evil);
    let vf = env.path("view-f");
    for digest in [&a, &b] {
        let err = assert_exit(&env.checkout(digest, &vf, &[]), 1);
        assert!(err.contains(&s(&script_obj)), "{err}");
        assert!(!exists(&vf));
    }
    // The shared view of A is not made from it either; B's exists already and is served as is.
    let err = assert_exit(&env.run(["path", a.as_str()]), 1);
    assert!(err.contains("cestore verify"), "{err}");
    assert!(!exists(&env.store.join("views").join(&a)));
    // An ingest of the source replaces the object's bytes from the source.
    let out = env.ingest_out(&a_src, "1.0.0", &[]);
    assert_ok(&out);
    let repaired = parse_json(&out)["ingest"]["repaired"].clone();
    assert!(
        repaired
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["object"] == s(&script_obj).as_str() && r["repair"] == "bytes"),
        "{repaired}"
    );
    assert_eq!(mode_of(&script_obj), 0o555);
    // View B still links the damaged inode: it differs from its snapshot.
    assert_eq!(env.verify_tree(&vb, &b).0, 1);
    env.verify_json_clean("object replaced by an ingest");
    assert_ok(&env.checkout(&a, &vf, &[]));
    assert_eq!(env.verify_tree(&vf, &a).0, 0);

    // 3. An object swapped for a symlink to a file of the same size: never
    // followed, never handed out.
    let own = env
        .files(&a)
        .into_iter()
        .find(|f| f.path == "skills/lib/own.md")
        .unwrap();
    let own_obj = env.object(&own);
    let decoy = env.path("decoy.md");
    write(&decoy, vec![b'z'; own.size as usize]);
    chmod(&decoy, 0o444);
    let moved = env.path("moved-object");
    fs::rename(&own_obj, &moved).unwrap();
    symlink(&decoy, &own_obj).unwrap();
    let ve = env.path("view-e");
    let err = assert_exit(&env.checkout(&a, &ve, &[]), 1);
    assert!(err.contains(&s(&own_obj)), "{err}");
    assert!(!exists(&ve));
    let (code, v) = env.verify(&[]);
    assert_eq!(code, 1);
    let p = problems(&v)
        .iter()
        .find(|p| p["path"] == s(&own_obj).as_str())
        .unwrap_or_else(|| panic!("verify does not name {}:\n{v:#}", own_obj.display()));
    assert_eq!(p["severity"], "corruption", "{p}");
    assert_eq!(p["snapshots"], serde_json::json!([a]), "{p}");
    fs::remove_file(&own_obj).unwrap();
    fs::rename(&moved, &own_obj).unwrap();
    env.verify_json_clean("object put back");
    eprintln!(
        "tampered_objects_are_never_handed_out_silently: a same-size change was {} by checkout's cheap check and found by verify",
        if cheap_check_saw_it { "caught" } else { "not caught" }
    );
}
