//! Rewrites `tests/data/oracle-table.json`, the oracle's answers for the
//! generator's pinned seeds, which `conformance::pinned_table` checks cestore
//! against on machines without the oracle.
//!
//! Run it whenever `tests/it/gen.rs` changes what a seed makes:
//!
//! ```text
//! cargo run --example regenerate_table
//! ```
//!
//! It needs `../shared/reference/oracle.py` beside the checkout and
//! `python3`. Each seed's tree is written to a fresh temporary directory and
//! given to `python3 oracle.py snapshot DIR --version V` (one process per
//! tree, as a fresh process sees the tree exactly as the command line does).

#![allow(missing_docs)]

#[path = "../tests/it/gen.rs"]
mod gen;

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long the oracle may take for one tree.
const TIMEOUT: Duration = Duration::from_secs(60);

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let oracle = root.join("../shared/reference/oracle.py");
    if !oracle.is_file() {
        eprintln!("regenerate_table: needs the oracle at {}", oracle.display());
        return ExitCode::FAILURE;
    }
    let seeds = gen::table_seeds();
    let results = parallel(&seeds, |seed| entry(&oracle, seed));
    let lines: Vec<String> = match results.into_iter().collect() {
        Ok(lines) => lines,
        Err(e) => {
            eprintln!("regenerate_table: {e}");
            return ExitCode::FAILURE;
        }
    };
    let accepted = lines
        .iter()
        .filter(|l| !l.contains("\"digest\":null"))
        .count();
    let text = format!("[\n{}\n]\n", lines.join(",\n"));
    let path = root.join("tests/data/oracle-table.json");
    let tmp = path.with_extension("json.tmp");
    if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path)) {
        eprintln!(
            "regenerate_table: could not write '{}': {e}",
            path.display()
        );
        return ExitCode::FAILURE;
    }
    eprintln!(
        "regenerate_table: wrote {} entries ({accepted} accepted, {} rejected) to {}",
        lines.len(),
        lines.len() - accepted,
        path.display()
    );
    ExitCode::SUCCESS
}

/// The table's line for `seed`: the oracle's digest, file count and bytes,
/// or nulls where it rejects the tree.
fn entry(oracle: &Path, seed: u64) -> Result<String, String> {
    // Canonical, so that no symlink hop sits above the tree (the seed
    // rejects a plugin directory whose path does not resolve to itself).
    let tmp = std::env::temp_dir()
        .canonicalize()
        .map_err(|e| format!("could not resolve the temporary directory: {e}"))?;
    let scratch = tempfile::Builder::new()
        .prefix("cestore-table-")
        .tempdir_in(tmp)
        .map_err(|e| format!("could not create a temporary directory: {e}"))?;
    let case = gen::plugin_tree(seed, &scratch.path().join("tree"));
    let answer = snapshot(oracle, &case);
    remove_tree(scratch.path());
    let (code, stdout) = answer?;
    let ov: Value = serde_json::from_slice(&stdout)
        .ok()
        .filter(|v: &Value| v["ok"].is_boolean())
        .ok_or_else(|| {
            format!(
                "seed {seed}: the oracle did not answer (exit {code:?}): {}",
                String::from_utf8_lossy(&stdout)
            )
        })?;
    let version = serde_json::to_string(&case.version).map_err(|e| e.to_string())?;
    Ok(if ov["ok"] == Value::Bool(true) {
        let p = &ov["provenance"];
        format!(
            "{{\"seed\":{seed},\"version\":{version},\"digest\":{},\"file_count\":{},\"total_bytes\":{}}}",
            p["manifest_digest"], p["file_count"], p["total_bytes"]
        )
    } else {
        format!("{{\"seed\":{seed},\"version\":{version},\"digest\":null,\"file_count\":null,\"total_bytes\":null}}")
    })
}

/// `python3 oracle.py snapshot DIR --version V`: its exit code and stdout,
/// killed after `TIMEOUT`.
fn snapshot(oracle: &Path, case: &gen::Case) -> Result<(Option<i32>, Vec<u8>), String> {
    let mut child = Command::new("python3")
        .arg(oracle)
        .arg("snapshot")
        .arg(&case.dir)
        .arg("--version")
        .arg(&case.version)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("could not start python3: {e}"))?;
    let mut out = child.stdout.take().ok_or("no stdout pipe")?;
    let reader = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("seed {}: the oracle timed out", case.seed));
        }
        thread::sleep(Duration::from_millis(3));
    };
    let stdout = reader.join().map_err(|_| "the stdout reader panicked")?;
    Ok((status.code(), stdout))
}

/// Runs `f` for every seed on as many threads as there are cores, keeping
/// the seeds' order in the results.
fn parallel(
    seeds: &[u64],
    f: impl Fn(u64) -> Result<String, String> + Sync,
) -> Vec<Result<String, String>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<String, String>>>> =
        Mutex::new(seeds.iter().map(|_| None).collect());
    let workers = thread::available_parallelism().map_or(1, |n| n.get());
    thread::scope(|scope| {
        for _ in 0..workers.min(seeds.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(&seed) = seeds.get(i) else { break };
                let result = f(seed);
                results.lock().expect("results lock")[i] = Some(result);
            });
        }
    });
    results
        .into_inner()
        .expect("results lock")
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("a seed did not run".to_string())))
        .collect()
}

/// Removes a generated tree, first making every directory in it writable
/// and searchable (some seeds make directories of mode 000).
fn remove_tree(path: &Path) {
    let _ = Command::new("chmod")
        .arg("-R")
        .arg("u+rwX")
        .arg(path)
        .stderr(Stdio::null())
        .status();
    let _ = std::fs::remove_dir_all(path);
}
