//! `stage --hold` and termination signals, on the real binary.
//!
//! * `a_held_stage_killed_by_a_signal_discards_its_view`: SIGTERM, SIGINT and
//!   SIGHUP sent to the held process's group remove its view and its record,
//!   keep no spare, and exit 143, 130 and 129; the same through the shell
//!   pipeline a harness writes (`setsid bash -c "sleep 600 | cestore stage
//!   ... --hold"`, then `kill -TERM -- -PGID`).
//! * `a_signal_while_the_view_is_made_is_acted_on_once_it_is_made`: a signal
//!   that comes before the view exists (the stage waits for the store lock)
//!   still leaves no view.
//! * `a_second_signal_during_the_discard_changes_nothing`,
//!   `a_signal_during_a_release_lets_it_finish_as_asked`: what comes while the
//!   view is being discarded.

use std::ffi::OsStr;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use rustix::process::{Pid, Signal};
use serde_json::Value;

use crate::util::{assert_ok, bin, spares, TestEnv};

/// A store with one snapshot, and the path a held stage checks it out at.
struct Setup {
    env: TestEnv,
    digest: String,
    view: PathBuf,
}

fn setup() -> Setup {
    let (env, src) = crate::util::with_plugin("src", "1.0.0");
    write_empty(&src.join("skills/ce-work/empty.md"));
    let digest = env.ingest_digest(&src, "1.0.0");
    let view = env.path("V");
    Setup { env, digest, view }
}

fn write_empty(path: &Path) {
    fs::write(path, b"").expect("write an empty file");
}

/// The arguments of `stage --hold` for the setup's snapshot and view.
fn hold_args(s: &Setup) -> Vec<&OsStr> {
    let mut args: Vec<&OsStr> = "stage --json --arm ce_workflow --digest"
        .split(' ')
        .map(OsStr::new)
        .collect();
    args.extend([&s.digest, "--dest"].map(OsStr::new));
    args.extend([s.view.as_os_str(), OsStr::new("--hold")]);
    args
}

/// A `cestore stage --hold` process, the leader of its own process group,
/// its input a pipe kept open (as `sleep 600 |` keeps it).
struct Held {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    stderr: Receiver<String>,
}

impl Held {
    fn start(s: &Setup) -> Held {
        let mut child = s
            .env
            .cmd(hold_args(s))
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start cestore stage --hold");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let stderr = lines_of(child.stderr.take().expect("stderr"));
        Held {
            child,
            stdin,
            stdout,
            stderr,
        }
    }

    /// The next object the process prints.
    fn object(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read stdout");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not one object ({e}): {line:?}"))
    }

    /// Sends `signal` to the process's group, as `kill -SIG -- -PGID` does.
    fn signal_group(&self, signal: Signal) {
        let pgid = Pid::from_raw(self.child.id() as i32).expect("a pid");
        rustix::process::kill_process_group(pgid, signal).expect("signal the group");
    }

    /// Waits until the process says it waits for the store lock.
    fn waits_for_the_lock(&self) {
        loop {
            let line = self
                .stderr
                .recv_timeout(Duration::from_secs(60))
                .expect("the process says it waits for the lock");
            if line.contains("waiting for the store lock") {
                return;
            }
        }
    }

    /// Waits for the process to end; returns its exit code and the rest of
    /// its output, one object a line.
    fn finish(self) -> (i32, Vec<Value>) {
        let (status, objects) = self.end();
        let code = status.code();
        (
            code.unwrap_or_else(|| panic!("killed: {status:?}")),
            objects,
        )
    }

    /// Waits for the process to end; returns how it ended and the rest of
    /// its output, one object a line.
    fn end(mut self) -> (std::process::ExitStatus, Vec<Value>) {
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).expect("read stdout");
        let status = self.child.wait().expect("wait");
        drop(self.stdin.take());
        let objects = rest
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        (status, objects)
    }
}

/// The lines a stream gives, as they come, from a thread of their own.
fn lines_of(stream: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The store's lock, held exclusively (as `gc` holds it) until dropped.
fn lock_store(store: &Path) -> fs::File {
    let lock = fs::File::open(store.join(".lock")).expect("open the store's lock");
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).expect("flock");
    lock
}

/// The recorded views of the snapshot, by path.
fn recorded_views(s: &Setup) -> Vec<String> {
    let show = s.env.json(["show", s.digest.as_str(), "--json"]);
    show["views"]
        .as_array()
        .expect("views")
        .iter()
        .map(|v| v["path"].as_str().expect("path").to_string())
        .collect()
}

/// The view exists and is recorded: the stage's object said so and it is.
fn assert_held(s: &Setup, staged: &Value) {
    assert_eq!(staged["ok"], true, "{staged}");
    assert_eq!(staged["view"], s.view.to_str().unwrap(), "{staged}");
    assert!(s.view.join(".claude-plugin/plugin.json").is_file());
    assert_eq!(recorded_views(s), vec![s.view.display().to_string()]);
}

/// Nothing of the view is left: no directory, no record, nothing beside
/// it, and the store verifies clean.
fn assert_view_gone(s: &Setup) {
    assert!(fs::symlink_metadata(&s.view).is_err(), "the view is left");
    assert!(recorded_views(s).is_empty(), "the view is still recorded");
    let beside: Vec<_> = fs::read_dir(&s.env.base)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "src" && n != "store")
        .collect();
    assert!(beside.is_empty(), "left beside the view: {beside:?}");
    assert_ok(&s.env.run(["verify"]));
}

/// The release object of a held stage ended by `signal`.
fn assert_signalled(released: &Value, s: &Setup, signal: &str, spare: bool) {
    assert_eq!(released["ok"], false, "{released}");
    assert_eq!(released["signal"], signal, "{released}");
    assert_eq!(released["view"], s.view.to_str().unwrap(), "{released}");
    assert_eq!(released["manifest_digest"], s.digest.as_str(), "{released}");
    assert_eq!(
        (
            &released["recorded"],
            &released["removed"],
            &released["spare"]
        ),
        (&Value::Bool(true), &Value::Bool(true), &Value::Bool(spare)),
        "{released}"
    );
}

#[test]
fn a_held_stage_killed_by_a_signal_discards_its_view() {
    let s = setup();
    for (signal, name, code) in [
        (Signal::TERM, "SIGTERM", 143),
        (Signal::INT, "SIGINT", 130),
        (Signal::HUP, "SIGHUP", 129),
    ] {
        let mut held = Held::start(&s);
        assert_held(&s, &held.object());
        held.signal_group(signal);
        let (status, objects) = held.finish();
        assert_eq!(status, code, "{name}: {objects:?}");
        assert_eq!(objects.len(), 1, "{name}: one object for the release");
        assert_signalled(&objects[0], &s, name, false);
        assert_view_gone(&s);
        assert_eq!(
            spares(&s.env.store, &s.digest).len(),
            0,
            "{name}: a signal keeps no spare"
        );
    }

    // As a harness's shell runs it: the whole session's group is signalled.
    let mut line = format!("sleep 600 | exec '{}'", bin());
    for arg in hold_args(&s) {
        line.push_str(&format!(" '{}'", arg.to_str().unwrap()));
    }
    line.push_str(&format!(" --store '{}'", s.env.store.display()));
    let mut shell = Command::new("setsid")
        .args(["bash", "-c", &line])
        .env_remove("CESTORE_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run setsid bash");
    let mut stdout = BufReader::new(shell.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert_held(
        &s,
        &serde_json::from_str(&first).expect("the stage's object"),
    );
    let pgid = rustix::process::getpgid(Pid::from_raw(shell.id() as i32))
        .expect("the shell's group")
        .as_raw_nonzero()
        .get();
    assert_eq!(pgid as u32, shell.id(), "setsid leads a group of its own");
    let kill = Command::new("kill")
        .args(["-TERM", "--", &format!("-{pgid}")])
        .status()
        .expect("run kill");
    assert!(kill.success());
    // The output ends once every process of the group has.
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let _ = shell.wait();
    let released: Value = serde_json::from_str(rest.trim()).expect("the release's object");
    assert_signalled(&released, &s, "SIGTERM", false);
    assert_view_gone(&s);
}

#[test]
fn a_signal_while_the_view_is_made_is_acted_on_once_it_is_made() {
    let s = setup();
    let lock = lock_store(&s.env.store);
    let mut held = Held::start(&s);
    // Caught from the start: the process lives on, waiting for the store.
    held.waits_for_the_lock();
    held.signal_group(Signal::INT);
    std::thread::sleep(Duration::from_millis(200));
    assert!(held.child.try_wait().unwrap().is_none(), "ended early");
    assert!(fs::symlink_metadata(&s.view).is_err());
    drop(lock);
    // The view is made and reported, then discarded at once, unasked.
    let staged = held.object();
    assert_eq!(staged["ok"], true, "{staged}");
    let (status, objects) = held.finish();
    assert_eq!(status, 130, "{objects:?}");
    assert_eq!(objects.len(), 1, "{objects:?}");
    assert_signalled(&objects[0], &s, "SIGINT", false);
    assert_view_gone(&s);

    // Before the store is even opened: the process takes its view back too.
    let mut held = Held::start(&s);
    held.signal_group(Signal::TERM);
    let mut first = String::new();
    held.stdout.read_line(&mut first).unwrap();
    let (status, objects) = held.end();
    // Either the signal came before the handlers, when nothing is made yet
    // (the process ends by it, saying nothing), or after (one object per
    // phase, and the code of the signal).
    if first.is_empty() {
        assert_eq!(status.code(), None, "{status:?}");
        assert!(objects.is_empty());
    } else {
        assert_eq!(status.code(), Some(143), "{first}{objects:?}");
        assert_signalled(&objects[0], &s, "SIGTERM", false);
    }
    assert_view_gone(&s);
}

#[test]
fn a_second_signal_during_the_discard_changes_nothing() {
    let s = setup();
    let mut held = Held::start(&s);
    assert_held(&s, &held.object());
    let lock = lock_store(&s.env.store);
    held.signal_group(Signal::HUP);
    // The discard waits for the store: a second signal, and a third, are
    // noted and change nothing.
    held.waits_for_the_lock();
    held.signal_group(Signal::TERM);
    held.signal_group(Signal::INT);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        held.child.try_wait().unwrap().is_none(),
        "ended mid-discard"
    );
    assert!(s.view.is_dir());
    drop(lock);
    let (status, objects) = held.finish();
    assert_eq!(status, 129, "the first signal's code: {objects:?}");
    assert_eq!(objects.len(), 1, "{objects:?}");
    assert_signalled(&objects[0], &s, "SIGHUP", false);
    assert_view_gone(&s);
}

#[test]
fn a_signal_during_a_release_lets_it_finish_as_asked() {
    let s = setup();
    let mut held = Held::start(&s);
    assert_held(&s, &held.object());
    let lock = lock_store(&s.env.store);
    let mut stdin = held.stdin.take().unwrap();
    stdin.write_all(b"discard --spare\n").unwrap();
    held.waits_for_the_lock();
    held.signal_group(Signal::TERM);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        held.child.try_wait().unwrap().is_none(),
        "ended mid-release"
    );
    drop(lock);
    let (status, objects) = held.finish();
    assert_eq!(status, 143, "{objects:?}");
    assert_eq!(objects.len(), 1, "{objects:?}");
    // The release was under way: it kept the spare it was asked to keep.
    assert_signalled(&objects[0], &s, "SIGTERM", true);
    assert_eq!(spares(&s.env.store, &s.digest).len(), 1);
    assert_view_gone(&s);
    // And a plain release, with no signal, says so.
    let mut held = Held::start(&s);
    assert_held(&s, &held.object());
    held.stdin.take().unwrap().write_all(b"discard\n").unwrap();
    let (status, objects) = held.finish();
    assert_eq!(status, 0);
    assert_eq!(objects[0]["ok"], true, "{}", objects[0]);
    assert_eq!(objects[0]["signal"], Value::Null, "{}", objects[0]);
    assert_view_gone(&s);
}
