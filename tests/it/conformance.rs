//! Differential conformance against the Python reference (the seed).
//!
//! * `live_differential`: random trees from `gen.rs` through both the oracle
//!   (`../shared/reference/oracle.py`) and `cestore`; they must give the same
//!   accept/reject answer and, when both accept, the same provenance, file
//!   list and canonical manifest bytes. Skips when the oracle is absent.
//!   `CESTORE_CONFORMANCE_CASES` (default 200) and `CESTORE_CONFORMANCE_SEED`
//!   (decimal or 0x-hex) pick the seeds; `CESTORE_CONFORMANCE_ONLY=SEED`
//!   replays one seed; `CESTORE_CONFORMANCE_KEEP=1` keeps its tree;
//!   `CESTORE_CONFORMANCE_JOBS` sets the number of worker threads;
//!   `CESTORE_CONFORMANCE_VERBOSE=1` prints every seed's answer and tree.
//!   The oracle's `snapshot` runs in a few long-lived python3 processes that
//!   load oracle.py once (starting python3 costs more than most trees);
//!   `CESTORE_CONFORMANCE_ORACLE_PROCESS=1` runs `python3 oracle.py snapshot`
//!   once per tree instead, as `cargo run --example regenerate_table` always
//!   does.
//! * `pinned_table`: the oracle's answers for a fixed set of seeds (300 in a
//!   row plus one seed of each scenario those miss), committed
//!   in `tests/data/oracle-table.json`, checked against `cestore` everywhere.
//!   `cargo run --example regenerate_table` rewrites that table from the
//!   oracle (needed whenever `gen.rs` changes what a seed makes).
//! * `generator_is_deterministic`: the same seed makes the same tree twice.

use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::gen::{self, Case};
use crate::util;

const DEFAULT_CASES: u64 = 200;
const DEFAULT_SEED: u64 = 0x5EED_0000;
const TIMEOUT: Duration = Duration::from_secs(60);

/// Generator scenarios (`Case::broken`) where cestore deliberately answers
/// differently from the seed; their seeds are skipped with a note. Keep empty
/// unless a divergence is a decision, not a bug.
const ACCEPTED_DIVERGENCES: &[&str] = &[];

/// A private temporary directory holding the tree (`tree/`) and a store
/// (`store/`); removed on drop even when it holds read-only directories.
struct Scratch {
    dir: Option<tempfile::TempDir>,
    base: PathBuf,
    keep: bool,
}

impl Scratch {
    fn new() -> Scratch {
        // Canonical, so that no symlink hop sits above the tree (the seed
        // rejects a plugin directory whose path does not resolve to itself).
        let tmp = std::env::temp_dir()
            .canonicalize()
            .expect("canonical temp dir");
        let dir = tempfile::Builder::new()
            .prefix("cestore-conf-")
            .tempdir_in(tmp)
            .expect("create temp dir");
        let base = dir.path().to_path_buf();
        Scratch {
            dir: Some(dir),
            base,
            keep: false,
        }
    }

    fn root(&self) -> PathBuf {
        self.base.join("tree")
    }

    fn store(&self) -> PathBuf {
        self.base.join("store")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let dir = self.dir.take().expect("temp dir");
        if self.keep {
            eprintln!("kept {}", dir.keep().display());
            return;
        }
        util::remove_tree(&self.base);
        drop(dir);
    }
}

/// One finished process.
struct Run {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    timed_out: bool,
}

impl Run {
    fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.stdout).ok()
    }

    fn describe(&self) -> String {
        format!(
            "exit {}{}\n    stdout: {}\n    stderr: {}",
            self.code
                .map_or("none (signal)".to_string(), |c| c.to_string()),
            if self.timed_out {
                " (TIMED OUT, killed)"
            } else {
                ""
            },
            clip(&self.stdout),
            clip(&self.stderr)
        )
    }
}

fn clip(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end();
    if text.chars().count() > 4000 {
        let head: String = text.chars().take(4000).collect();
        format!("{head}… ({} bytes in all)", bytes.len())
    } else {
        text.to_string()
    }
}

/// Runs a command with no stdin, capturing both streams, killing it after `TIMEOUT`.
fn run(cmd: &mut Command) -> Run {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let mut out = child.stdout.take().expect("stdout pipe");
    let mut err = child.stderr.take().expect("stderr pipe");
    let out_reader = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let err_reader = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err.read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + TIMEOUT;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for child") {
            break status;
        }
        if Instant::now() > deadline {
            timed_out = true;
            let _ = child.kill();
            break child.wait().expect("wait for killed child");
        }
        thread::sleep(Duration::from_millis(3));
    };
    Run {
        code: status.code(),
        stdout: out_reader.join().expect("stdout reader"),
        stderr: err_reader.join().expect("stderr reader"),
        timed_out,
    }
}

/// `python3 oracle.py snapshot DIR --version V`: one process for one tree.
fn oracle_process(script: &Path, case: &Case) -> Run {
    run(Command::new("python3")
        .arg(script)
        .arg("snapshot")
        .arg(&case.dir)
        .arg("--version")
        .arg(&case.version))
}

/// Loads oracle.py once and answers one `{"dir","version"}` line per tree with
/// `{"code","stdout","timed_out"}`: what `python3 oracle.py snapshot DIR
/// --version V` would have exited with and printed. (Starting python3 costs
/// more than most trees.)
const ORACLE_DRIVER: &str = r#"
import contextlib, importlib.util, io, json, signal, sys

class OracleTimeout(BaseException):
    pass

def _alarm(signum, frame):
    raise OracleTimeout()

signal.signal(signal.SIGALRM, _alarm)
spec = importlib.util.spec_from_file_location("cestore_conformance_oracle", sys.argv[1])
oracle = importlib.util.module_from_spec(spec)
spec.loader.exec_module(oracle)
for line in sys.stdin:
    request = json.loads(line)
    captured = io.StringIO()
    code, timed_out = None, False
    signal.alarm(60)
    try:
        with contextlib.redirect_stdout(captured):
            code = oracle.snapshot(request["dir"], request["version"])
    except OracleTimeout:
        timed_out = True
    finally:
        signal.alarm(0)
    sys.stdout.write(json.dumps({"code": code, "stdout": captured.getvalue(), "timed_out": timed_out}) + "\n")
    sys.stdout.flush()
"#;

/// One long-lived python3 running `ORACLE_DRIVER`.
struct Driver {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Driver {
    fn spawn(script: &Path) -> std::io::Result<Driver> {
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(ORACLE_DRIVER)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take();
        let stdout = std::io::BufReader::new(child.stdout.take().expect("driver stdout"));
        Ok(Driver {
            child,
            stdin,
            stdout,
        })
    }

    fn ask(&mut self, dir: &str, version: &str) -> Result<Run, String> {
        use std::io::{BufRead, Write};
        let request = serde_json::json!({ "dir": dir, "version": version });
        let stdin = self.stdin.as_mut().expect("driver stdin");
        writeln!(stdin, "{request}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("write to the oracle driver: {e}"))?;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| format!("read from the oracle driver: {e}"))?;
        let reply: Value =
            serde_json::from_str(&line).map_err(|e| format!("oracle driver said {line:?}: {e}"))?;
        Ok(Run {
            code: reply["code"].as_i64().map(|c| c as i32),
            stdout: reply["stdout"].as_str().unwrap_or("").as_bytes().to_vec(),
            stderr: Vec::new(),
            timed_out: reply["timed_out"] == Value::Bool(true),
        })
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// The oracle, run through a pool of drivers (or, with
/// `CESTORE_CONFORMANCE_ORACLE_PROCESS=1`, one python3 process per tree).
struct Oracle {
    script: PathBuf,
    per_process: bool,
    pool: Mutex<Vec<Driver>>,
}

impl Oracle {
    fn new(script: PathBuf, per_process: bool) -> Oracle {
        Oracle {
            script,
            per_process,
            pool: Mutex::new(Vec::new()),
        }
    }

    fn run(&self, case: &Case) -> Run {
        let Some(dir) = case.dir.to_str().filter(|_| !self.per_process) else {
            return oracle_process(&self.script, case);
        };
        let taken = self.pool.lock().unwrap().pop();
        let mut driver = match taken.map(Ok).unwrap_or_else(|| Driver::spawn(&self.script)) {
            Ok(driver) => driver,
            Err(e) => {
                eprintln!("cannot start the oracle driver ({e}); running one process per tree");
                return oracle_process(&self.script, case);
            }
        };
        match driver.ask(dir, &case.version) {
            Ok(run) => {
                self.pool.lock().unwrap().push(driver);
                run
            }
            Err(e) => {
                eprintln!(
                    "oracle driver failed ({e}); seed {} runs in its own process",
                    case.seed
                );
                let _ = driver.child.kill();
                oracle_process(&self.script, case)
            }
        }
    }
}

/// Ingests the case's tree into `store` with `--json`.
fn ingest_case(store: &Path, case: &Case) -> Run {
    run(&mut util::cestore(
        store,
        [
            OsStr::new("ingest"),
            case.dir.as_os_str(),
            OsStr::new("--version"),
            OsStr::new(&case.version),
            OsStr::new("--json"),
        ],
    ))
}

fn env_u64(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|e| panic!("{name}={text:?} is not a number: {e}")))
}

fn workers() -> usize {
    env_u64("CESTORE_CONFORMANCE_JOBS")
        .map(|n| n.max(1) as usize)
        .unwrap_or_else(|| {
            thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
                .clamp(2, 8)
        })
}

/// Runs `f` for every seed on a few threads; results come back in seed order,
/// a panic becomes an `Err` naming the seed.
fn parallel<T: Send>(
    seeds: &[u64],
    f: impl Fn(u64) -> Result<T, String> + Sync,
) -> Vec<Result<T, String>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<T, String>>>> =
        Mutex::new((0..seeds.len()).map(|_| None).collect());
    thread::scope(|scope| {
        for _ in 0..workers().min(seeds.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= seeds.len() {
                    break;
                }
                let seed = seeds[i];
                let result = catch_unwind(AssertUnwindSafe(|| f(seed))).unwrap_or_else(|panic| {
                    let msg = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "non-string panic".to_string());
                    Err(format!("seed {seed}: panicked: {msg}"))
                });
                results.lock().unwrap()[i] = Some(result);
            });
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every seed ran"))
        .collect()
}

/// The lines that name a case in a failure: its seed, how to replay it,
/// its tree, version and directory.
fn case_header(case: &Case) -> String {
    format!(
        "seed {} (replay: CESTORE_CONFORMANCE_ONLY={} CESTORE_CONFORMANCE_KEEP=1 cargo test --test it live_differential)\n  tree: {}\n  version: {:?}\n  dir: {}",
        case.seed,
        case.seed,
        case.description,
        case.version,
        case.dir.display()
    )
}

/// What one live case showed.
struct Outcome {
    accepted: bool,
    /// A seed of an `ACCEPTED_DIVERGENCES` scenario, not compared.
    skipped: bool,
    description: String,
    /// Where the oracle's answer differs from what the generator meant to make.
    intent: Option<String>,
}

/// One seed through the oracle and cestore.
fn differential(seed: u64, oracle: &Oracle, keep: bool) -> Result<Outcome, String> {
    let mut scratch = Scratch::new();
    scratch.keep = keep;
    let case = gen::plugin_tree(seed, &scratch.root());
    if let Some(rule) = case
        .broken
        .as_deref()
        .filter(|r| ACCEPTED_DIVERGENCES.contains(r))
    {
        return Ok(Outcome {
            accepted: false,
            skipped: true,
            description: format!("skipped (accepted divergence {rule}): {}", case.description),
            intent: None,
        });
    }
    let store = scratch.store();
    let fail =
        |what: &str, details: String| Err(format!("{what}\n  {}\n  {details}", case_header(&case)));

    let o = oracle.run(&case);
    let Some(ov) = o.json().filter(|v| v["ok"].is_boolean()) else {
        return fail(
            "the oracle did not answer",
            format!("oracle: {}", o.describe()),
        );
    };
    let oracle_ok = ov["ok"] == Value::Bool(true);
    if !oracle_ok
        && ov["error"]
            .as_str()
            .unwrap_or("")
            .contains("could not reproduce")
    {
        return fail(
            "the oracle could not reproduce the seed's order",
            format!("oracle: {}", o.describe()),
        );
    }

    let c = ingest_case(&store, &case);
    let both = || {
        format!(
            "oracle: {}\n  cestore ingest: {}",
            o.describe(),
            c.describe()
        )
    };
    if c.timed_out {
        return fail("cestore ingest hung", both());
    }
    let Some(cv) = c.json() else {
        return fail("cestore ingest did not print one JSON value", both());
    };
    let cestore_ok = c.code == Some(0) && cv["ok"] == Value::Bool(true);
    let cestore_rejected = refused_by_rule(c.code, &cv);

    let intent = match (&case.broken, oracle_ok) {
        (None, false) => Some(format!(
            "meant to be accepted, oracle rejected: {}",
            ov["error"]
        )),
        (Some(rule), true) => Some(format!("meant to break {rule}, oracle accepted")),
        (None, true)
            if ov["provenance"]["file_count"] != case.files
                || ov["provenance"]["total_bytes"] != case.bytes =>
        {
            Some(format!(
                "generator counted {} files / {} bytes, oracle {} / {}",
                case.files,
                case.bytes,
                ov["provenance"]["file_count"],
                ov["provenance"]["total_bytes"]
            ))
        }
        _ => None,
    };
    let intent = intent.map(|i| format!("seed {seed}: {i}\n  tree: {}", case.description));

    if !oracle_ok {
        if cestore_rejected {
            return Ok(Outcome {
                accepted: false,
                skipped: false,
                description: case.description.clone(),
                intent,
            });
        }
        if cestore_ok {
            return fail("DISAGREE: the oracle rejects, cestore accepts", both());
        }
        return fail("DISAGREE: the oracle rejects, cestore neither accepts nor rejects (exit 3, kind \"rejected\", or exit 4 for a missing source)", both());
    }
    if !cestore_ok {
        if cestore_rejected {
            return fail("DISAGREE: the oracle accepts, cestore rejects", both());
        }
        return fail("DISAGREE: the oracle accepts, cestore fails", both());
    }
    if cv["provenance"] != ov["provenance"] {
        return fail(
            "DISAGREE: provenance differs",
            format!(
                "oracle provenance:  {}\n  cestore provenance: {}\n  {}",
                ov["provenance"],
                cv["provenance"],
                both()
            ),
        );
    }
    let digest = ov["provenance"]["manifest_digest"]
        .as_str()
        .expect("oracle digest")
        .to_string();

    let s = run(&mut util::cestore(
        &store,
        ["show", &digest, "--files", "--json"],
    ));
    let Some(sv) = s.json().filter(|_| s.code == Some(0)) else {
        return fail(
            "cestore show --files --json failed",
            format!("show: {}\n  {}", s.describe(), both()),
        );
    };
    if sv["files"] != ov["files"] {
        let (of, cf) = (ov["files"].as_array(), sv["files"].as_array());
        let first = match (of, cf) {
            (Some(of), Some(cf)) => (0..of.len().max(cf.len()))
                .find(|&i| of.get(i) != cf.get(i))
                .map(|i| {
                    format!(
                        "first difference at #{i}: oracle {} / cestore {}",
                        of.get(i).unwrap_or(&Value::Null),
                        cf.get(i).unwrap_or(&Value::Null)
                    )
                })
                .unwrap_or_default(),
            _ => "cestore's files is not a list".to_string(),
        };
        return fail(
            "DISAGREE: file lists differ",
            format!("{first}\n  show: {}\n  {}", s.describe(), both()),
        );
    }

    let m = run(&mut util::cestore(&store, ["show", &digest, "--manifest"]));
    let canonical = ov["canonical_manifest"]
        .as_str()
        .expect("oracle canonical manifest");
    if m.code != Some(0) || m.stdout != canonical.as_bytes() {
        let hint = if m.stdout.strip_suffix(b"\n") == Some(canonical.as_bytes()) {
            " (cestore adds a trailing newline)"
        } else {
            ""
        };
        return fail(
            &format!(
                "DISAGREE: show --manifest bytes differ from the oracle's canonical_manifest{hint}"
            ),
            format!(
                "oracle canonical: {}\n  show --manifest: {}\n  {}",
                clip(canonical.as_bytes()),
                m.describe(),
                both()
            ),
        );
    }
    Ok(Outcome {
        accepted: true,
        skipped: false,
        description: case.description.clone(),
        intent,
    })
}

#[test]
fn live_differential() {
    if util::skip_without_oracle("live_differential") {
        return;
    }
    let per_process = std::env::var("CESTORE_CONFORMANCE_ORACLE_PROCESS").as_deref() == Ok("1");
    let oracle = Oracle::new(util::oracle().expect("oracle"), per_process);
    let (seeds, keep): (Vec<u64>, bool) = match env_u64("CESTORE_CONFORMANCE_ONLY") {
        Some(seed) => (
            vec![seed],
            std::env::var("CESTORE_CONFORMANCE_KEEP").as_deref() == Ok("1"),
        ),
        None => {
            let base = env_u64("CESTORE_CONFORMANCE_SEED").unwrap_or(DEFAULT_SEED);
            let n = env_u64("CESTORE_CONFORMANCE_CASES").unwrap_or(DEFAULT_CASES);
            ((0..n).map(|i| base.wrapping_add(i)).collect(), false)
        }
    };
    let started = Instant::now();
    let verbose = std::env::var("CESTORE_CONFORMANCE_VERBOSE").as_deref() == Ok("1");
    let results = parallel(&seeds, |seed| {
        let started = Instant::now();
        let result = differential(seed, &oracle, keep);
        if verbose {
            let (answer, description) = match &result {
                Ok(o) => (
                    if o.accepted { "accept" } else { "reject" },
                    o.description.as_str(),
                ),
                Err(_) => ("FAIL", ""),
            };
            eprintln!(
                "seed {seed}: {answer} in {:.2}s: {description}",
                started.elapsed().as_secs_f64()
            );
        }
        result
    });
    let elapsed = started.elapsed();

    let (mut accepted, mut rejected, mut skipped) = (0, 0, 0);
    let mut failures = Vec::new();
    let mut intents = Vec::new();
    for result in results {
        match result {
            Ok(outcome) => {
                if outcome.skipped {
                    skipped += 1;
                } else if outcome.accepted {
                    accepted += 1;
                } else {
                    rejected += 1;
                }
                intents.extend(outcome.intent);
            }
            Err(failure) => failures.push(failure),
        }
    }
    eprintln!(
        "live_differential: {} seeds from {:#x} in {:.1}s ({} workers, oracle {}): {accepted} accepted by both, {rejected} rejected by both, {skipped} skipped (accepted divergences), {} failures",
        seeds.len(),
        seeds[0],
        elapsed.as_secs_f64(),
        workers(),
        if per_process { "one process per tree" } else { "in long-lived processes" },
        failures.len()
    );
    if !intents.is_empty() {
        // The generator's own expectations are only a sanity check of gen.rs.
        eprintln!(
            "note: {} trees came out other than gen.rs meant (not a cestore failure):",
            intents.len()
        );
        for intent in intents.iter().take(10) {
            eprintln!("  {intent}");
        }
    }
    if !failures.is_empty() {
        for failure in failures.iter().take(20) {
            eprintln!("\n{failure}");
        }
        panic!(
            "{} of {} seeds: cestore and the oracle disagree (or a run failed); details above",
            failures.len(),
            seeds.len()
        );
    }
}

/// Whether cestore refused the tree under one of the reference's rules:
/// exit 3 (`rejected`), or exit 4 (`not-found`) for a source directory that
/// does not exist, which still names its rule (docs/exit-codes.md).
fn refused_by_rule(code: Option<i32>, v: &Value) -> bool {
    v["ok"] == Value::Bool(false)
        && match code {
            Some(3) => v["error"]["kind"] == "rejected",
            Some(4) => v["error"]["kind"] == "not-found" && v["error"]["rule"].is_string(),
            _ => false,
        }
}

fn table_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/oracle-table.json")
}

#[test]
fn pinned_table() {
    let path = table_path();
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let entries: Vec<Value> = serde_json::from_str(&text).expect("oracle table is a JSON list");
    assert!(!entries.is_empty(), "empty oracle table");
    let seeds: Vec<u64> = entries
        .iter()
        .map(|e| e["seed"].as_u64().expect("seed in table entry"))
        .collect();
    let by_seed: std::collections::BTreeMap<u64, &Value> =
        seeds.iter().copied().zip(entries.iter()).collect();
    let started = Instant::now();
    let results = parallel(&seeds, |seed| {
        let entry = by_seed[&seed];
        let scratch = Scratch::new();
        let case = gen::plugin_tree(seed, &scratch.root());
        if case
            .broken
            .as_deref()
            .is_some_and(|r| ACCEPTED_DIVERGENCES.contains(&r))
        {
            return Ok(entry["digest"].is_string());
        }
        if entry["version"] != case.version.as_str() {
            return Err(format!(
                "seed {seed}: gen.rs now makes version {:?}, the table says {}: gen.rs changed, regenerate the table (cargo run --example regenerate_table)",
                case.version, entry["version"]
            ));
        }
        let c = ingest_case(&scratch.store(), &case);
        let cv = c.json().unwrap_or(Value::Null);
        let context = || {
            format!(
                "{}\n  table: {entry}\n  cestore ingest: {}",
                case_header(&case),
                c.describe()
            )
        };
        match entry["digest"].as_str() {
            None => {
                if refused_by_rule(c.code, &cv) {
                    Ok(false)
                } else {
                    Err(format!(
                        "DISAGREE: the oracle rejected this tree, cestore did not\n  {}",
                        context()
                    ))
                }
            }
            Some(digest) => {
                let p = &cv["provenance"];
                if c.code == Some(0)
                    && cv["ok"] == Value::Bool(true)
                    && p["manifest_digest"] == digest
                    && p["file_count"] == entry["file_count"]
                    && p["total_bytes"] == entry["total_bytes"]
                    && p["version"] == entry["version"]
                {
                    Ok(true)
                } else {
                    Err(format!(
                        "DISAGREE: cestore does not match the oracle's accepted snapshot\n  {}",
                        context()
                    ))
                }
            }
        }
    });
    let accepted = results.iter().filter(|r| matches!(r, Ok(true))).count();
    let rejected = results.iter().filter(|r| matches!(r, Ok(false))).count();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    let table_accepts = entries.iter().filter(|e| e["digest"].is_string()).count();
    eprintln!(
        "pinned_table: {} entries ({table_accepts} accepted / {} rejected by the oracle) in {:.1}s: {} failures",
        entries.len(),
        entries.len() - table_accepts,
        started.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(
        table_accepts > 0 && table_accepts < entries.len(),
        "the table must hold both accepted and rejected trees"
    );
    if !failures.is_empty() {
        for failure in failures.iter().take(20) {
            eprintln!("\n{failure}");
        }
        panic!(
            "{} of {} pinned seeds disagree; details above",
            failures.len(),
            entries.len()
        );
    }
    assert_eq!(accepted + rejected, entries.len());
}

/// Everything about the files under `base` that the seed or cestore could
/// see, one line per entry in byte order of the paths; `base` itself is
/// written `<base>` inside symlink targets. Times are left out: two trees
/// made alike are made at different times.
fn tree_lines(base: &Path) -> Vec<String> {
    util::fingerprint(base)
        .into_iter()
        .map(|(rel, seen)| format!("{rel:?}: {}", seen.what))
        .collect()
}

/// The same seed makes the same tree (names, bytes, modes, symlinks, FIFOs,
/// sockets) in two different places.
#[test]
fn generator_is_deterministic() {
    let seeds: Vec<u64> = (0..120).map(|i| DEFAULT_SEED + i).collect();
    let results = parallel(&seeds, |seed| {
        let (a, b) = (Scratch::new(), Scratch::new());
        let (ca, cb) = (
            gen::plugin_tree(seed, &a.root()),
            gen::plugin_tree(seed, &b.root()),
        );
        let (fa, fb) = (tree_lines(&a.base), tree_lines(&b.base));
        let same_case = (&ca.version, &ca.description, &ca.broken, ca.files, ca.bytes)
            == (&cb.version, &cb.description, &cb.broken, cb.files, cb.bytes)
            && ca.dir.strip_prefix(&a.base).ok() == cb.dir.strip_prefix(&b.base).ok()
            && ca.dir.as_os_str().len() - a.base.as_os_str().len()
                == cb.dir.as_os_str().len() - b.base.as_os_str().len();
        if !same_case {
            return Err(format!(
                "seed {seed}: two runs describe different cases:\n  {ca:?}\n  {cb:?}"
            ));
        }
        if fa != fb {
            let i = (0..fa.len().max(fb.len()))
                .find(|&i| fa.get(i) != fb.get(i))
                .unwrap_or(0);
            return Err(format!(
                "seed {seed}: two runs made different trees; first difference: {:?} vs {:?}",
                fa.get(i),
                fb.get(i)
            ));
        }
        let special = fa
            .iter()
            .filter(|l| l.contains(": symlink") || l.contains(": fifo") || l.contains(": socket"))
            .count();
        Ok(special)
    });
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failures.is_empty(),
        "{}",
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    let with_special = results
        .iter()
        .filter(|r| matches!(r, Ok(n) if *n > 0))
        .count();
    assert!(
        with_special > 0,
        "no tree among these seeds holds a symlink, FIFO or socket"
    );
}
