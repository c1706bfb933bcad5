//! Every digest from the bytes read: changes that keep a file's metadata
//! (device, inode, size, mode, times) as it was are seen by the next
//! ingest, digest and stage, on the filesystems where that happens.
//!
//! * A FUSE passthrough that reports the change time as the modification
//!   time (as sshfs does), mounted below the source root, and an overlay
//!   over it at the root: a byte changed in the backing file, the old
//!   modification time set back.
//! * A `write(2)` whose copy stalls for seconds after the kernel stamped
//!   the file's times (its buffer is mmapped from a slow FUSE file), with an
//!   ingest during the stall.
//! * A write through a shared `mmap` on tmpfs, which sets no time at all.
//!
//! Each digest is checked against one computed here from the bytes on
//! disk (the canonical manifest of docs/format.md) and against the oracle
//! where `../shared` is present. `differential_rewrites_never_give_a_stale_digest`
//! rewrites files in all these ways and the ordinary ones, before, during
//! and between ingests; `CESTORE_EXACT_ROUNDS` (default 1) sets its rounds.
//! The mounts need root, `/dev/fuse`, and `python3-fusepy` (Debian's
//! packages `fuse3` and `python3-fusepy`, from `scripts/install-test-deps`);
//! without them a test skips with the reason.

use std::fs;
use std::io::{BufRead, BufReader, Write as _};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use crate::util::{
    assert_ok, digest_of, minimal_plugin, oracle_snapshot, parse_json, write, TestEnv,
};

/// The Python the mount helpers run with: Debian's, where `python3-fusepy` goes.
const PYTHON: &str = "/usr/bin/python3";

/// The helpers: a FUSE passthrough, a holder of shared mappings, a writer
/// whose buffer is mmapped from a slow file.
const HELPER: &str = r#"
import mmap, os, sys, time

def passthrough(backing, mountpoint, slow_name, slow_secs):
    try:
        import fusepy as fuse
    except ImportError:
        import fuse

    class Passthrough(fuse.Operations):
        def _p(self, path):
            return os.path.join(backing, path.lstrip("/"))

        def getattr(self, path, fh=None):
            st = os.lstat(self._p(path))
            d = {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_ino")}
            # As sshfs: the change time is the modification time.
            d["st_atime"] = st.st_atime
            d["st_mtime"] = st.st_mtime
            d["st_ctime"] = st.st_mtime
            return d

        def readdir(self, path, fh):
            return [".", ".."] + os.listdir(self._p(path))

        def open(self, path, flags):
            return os.open(self._p(path), flags)

        def read(self, path, size, offset, fh):
            if slow_name and os.path.basename(path) == slow_name:
                time.sleep(slow_secs)
            return os.pread(fh, size, offset)

        def release(self, path, fh):
            os.close(fh)
            return 0

    fuse.FUSE(Passthrough(), mountpoint, foreground=True, nothreads=False, use_ino=True, ro=True)

def mapper():
    # Lines "PATH BYTE": fill PATH through a MAP_SHARED mapping kept open.
    maps = {}
    for line in sys.stdin:
        path, byte = line.split()
        st = os.stat(path)
        held = maps.get(path)
        # The same mapping while the file is the same inode of the same size.
        if held is None or os.fstat(held[0].fileno())[1:2] + (len(held[1]),) != (st.st_ino, st.st_size):
            f = open(path, "r+b")
            maps[path] = (f, mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED))
        m = maps[path][1]
        m[:] = bytes([int(byte)]) * len(m)
        print("ok", flush=True)

def stallwrite(target, slow):
    # write(2) from a buffer mmapped from a slow file: the copy stalls.
    with open(slow, "rb") as s:
        buf = mmap.mmap(s.fileno(), 0, prot=mmap.PROT_READ)
        fd = os.open(target, os.O_WRONLY)
        print("writing", flush=True)
        n = os.write(fd, buf)
        os.close(fd)
        print("wrote", n, flush=True)

mode = sys.argv[1]
if mode == "passthrough":
    passthrough(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
elif mode == "mapper":
    mapper()
elif mode == "stallwrite":
    stallwrite(sys.argv[2], sys.argv[3])
"#;

/// Why the mount tests cannot run here, if they cannot.
fn cannot_mount() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("not root, so no mounts".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing".into());
    }
    let import = Command::new(PYTHON)
        .args([
            "-c",
            "try:\n import fusepy\nexcept ImportError:\n import fuse",
        ])
        .output();
    if !import.is_ok_and(|o| o.status.success()) {
        return Some(format!(
            "{PYTHON} cannot import fusepy (install fuse3 and python3-fusepy: scripts/install-test-deps)"
        ));
    }
    None
}

/// Skips `test`, saying why, when a FUSE mount cannot be made here.
fn skip_unless_mountable(test: &str) -> bool {
    match cannot_mount() {
        Some(why) => {
            crate::util::skip(test, &why.to_string());
            true
        }
        None => false,
    }
}

fn helper(env: &TestEnv) -> PathBuf {
    let path = env.path("helper.py");
    if !path.exists() {
        write(&path, HELPER);
    }
    path
}

fn is_mount_point(path: &Path) -> bool {
    let Ok(text) = fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = path.to_string_lossy();
    text.lines()
        .any(|l| l.split(' ').nth(4).is_some_and(|mp| mp == want))
}

/// A mount, unmounted (and its helper process ended) on drop.
struct Mount {
    point: PathBuf,
    helper: Option<Child>,
}

impl Mount {
    /// The FUSE passthrough of `backing` at `point`; reads of files named
    /// `slow` sleep `secs` seconds.
    fn fuse(env: &TestEnv, backing: &Path, point: &Path, slow: &str, secs: f64) -> Mount {
        fs::create_dir_all(point).expect("mount point");
        let child = Command::new(PYTHON)
            .arg(helper(env))
            .arg("passthrough")
            .arg(backing)
            .arg(point)
            .arg(slow)
            .arg(secs.to_string())
            .stdout(Stdio::null())
            .spawn()
            .expect("start the FUSE passthrough");
        let mount = Mount {
            point: point.to_path_buf(),
            helper: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !is_mount_point(point) {
            assert!(
                Instant::now() < deadline,
                "the FUSE passthrough did not mount"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        mount
    }

    /// `mount -t TYPE -o OPTIONS none POINT`, or why not.
    fn other(kind: &str, options: &str, point: &Path) -> Result<Mount, String> {
        fs::create_dir_all(point).expect("mount point");
        let out = Command::new("mount")
            .args(["-t", kind, "-o", options, "none"])
            .arg(point)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(Mount {
            point: point.to_path_buf(),
            helper: None,
        })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.point).output();
        if is_mount_point(&self.point) {
            let _ = Command::new("umount").arg("-l").arg(&self.point).output();
        }
        if let Some(mut child) = self.helper.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The manifest digest of the tree at `root` as docs/format.md defines it,
/// computed here from the bytes on disk (trees of plain names only).
fn expected_digest(root: &Path) -> String {
    fn files(dir: &Path, rel: &str, out: &mut Vec<(String, PathBuf)>) {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("read dir")
            .map(|e| {
                e.expect("entry")
                    .file_name()
                    .into_string()
                    .expect("plain name")
            })
            .collect();
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let rel = format!("{rel}/{name}");
            if fs::symlink_metadata(&path).expect("lstat").is_dir() {
                files(&path, &rel, out);
            } else {
                out.push((rel, path));
            }
        }
    }
    let mut list = vec![(
        ".claude-plugin/plugin.json".to_string(),
        root.join(".claude-plugin/plugin.json"),
    )];
    let market = root.join(".claude-plugin/marketplace.json");
    if market.exists() {
        list.push((".claude-plugin/marketplace.json".into(), market));
    }
    for top in ["skills", "scripts", "assets"] {
        if root.join(top).is_dir() {
            files(&root.join(top), top, &mut list);
        }
    }
    let entries: Vec<String> = list
        .iter()
        .map(|(rel, path)| {
            assert!(
                rel.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b)),
                "{rel}"
            );
            let bytes = fs::read(path).expect("read");
            let mode = fs::metadata(path).expect("stat").permissions().mode();
            format!(
                r#"{{"executable":{},"path":"{rel}","sha256":"{:x}","size":{}}}"#,
                mode & 0o111 != 0,
                Sha256::digest(&bytes),
                bytes.len()
            )
        })
        .collect();
    let manifest = format!(r#"{{"files":[{}],"schema_version":1}}"#, entries.join(","));
    format!("{:x}", Sha256::digest(manifest.as_bytes()))
}

/// What `ingest`, `digest` and `stage` report for `src` now; each must be
/// the digest of the bytes on disk (and the oracle's, where present).
/// Returns that digest.
fn every_command_reads(env: &TestEnv, src: &Path, what: &str) -> String {
    let want = expected_digest(src);
    let s = src.to_str().unwrap();
    let ingest = env.json(["ingest", s, "--version", "1.0.0", "--json"]);
    assert_eq!(digest_of(&ingest), want, "{what}: ingest {ingest}");
    let digest = env.json(["digest", s, "--version", "1.0.0", "--json"]);
    assert_eq!(digest_of(&digest), want, "{what}: digest {digest}");
    let view = env.path("view");
    let stage = env.json([
        "stage",
        "--json",
        "--arm",
        "ce_review",
        "--plugin-dir",
        s,
        "--plugin-version",
        "1.0.0",
        "--dest",
        view.to_str().unwrap(),
    ]);
    assert_eq!(digest_of(&stage), want, "{what}: stage {stage}");
    assert_ok(&env.run(["discard", view.to_str().unwrap(), "--spare"]));
    if let Some(o) = oracle_snapshot(src, "1.0.0") {
        assert_eq!(digest_of(&o), want, "{what}: the oracle's digest");
    }
    want
}

/// Sets `path`'s modification time to `mtime` (`touch -d @SECONDS.NANOS`).
fn touch_back(path: &Path, mtime: &fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    let at = format!("@{}.{:09}", mtime.mtime(), mtime.mtime_nsec());
    let out = Command::new("touch")
        .args(["-m", "-d", &at])
        .arg(path)
        .output()
        .expect("touch");
    assert!(out.status.success(), "touch -d: {out:?}");
}

/// Flips the first byte of `path`, keeping its size, then sets its old
/// modification time back.
fn flip_and_touch_back(path: &Path) {
    let before = fs::metadata(path).expect("stat");
    let mut bytes = fs::read(path).expect("read");
    bytes[0] ^= 0x20;
    fs::write(path, &bytes).expect("write");
    touch_back(path, &before);
}

/// `verify` is clean, and `verify --tree` finds the source equal to
/// `now` and different from `before`.
fn verify_is_honest(env: &TestEnv, src: &Path, now: &str, before: &str) {
    assert_ok(&env.run(["verify"]));
    let s = src.to_str().unwrap();
    assert_ok(&env.run(["verify", "--tree", s, now]));
    let old = env.run(["verify", "--tree", s, before]);
    assert!(
        !old.status.success(),
        "verify --tree against the old digest"
    );
}

/// Ingests `src`, whose `backing` file a mount shows, twice once settled (any
/// cache by metadata would hold it then), changes one byte of `backing` and
/// sets its time back, and checks that every command then gives the new
/// bytes' digest and that `verify` tells the two apart.
fn flip_below_a_mount(env: &TestEnv, src: &Path, backing: &Path, what: &str) {
    std::thread::sleep(Duration::from_millis(2200));
    let d0 = every_command_reads(env, src, "first");
    assert_eq!(every_command_reads(env, src, "again"), d0);
    flip_and_touch_back(backing);
    // The attributes FUSE reported are cached up to a second: let them expire.
    std::thread::sleep(Duration::from_millis(1100));
    let d1 = every_command_reads(env, src, what);
    assert_ne!(d1, d0);
    verify_is_honest(env, src, &d1, &d0);
}

#[test]
fn a_fuse_mount_below_the_root_that_keeps_the_times_gives_the_new_bytes_digest() {
    if skip_unless_mountable(
        "a_fuse_mount_below_the_root_that_keeps_the_times_gives_the_new_bytes_digest",
    ) {
        return;
    }
    let (env, src) = crate::util::with_plugin("src", "1.0.0");
    let backing = env.path("backing");
    write(&backing.join("notes.md"), "remote notes, first version\n");
    write(&backing.join("deep/more.md"), "more\n");
    let _mount = Mount::fuse(&env, &backing, &src.join("skills/remote"), "", 0.0);
    flip_below_a_mount(
        &env,
        &src,
        &backing.join("notes.md"),
        "one byte changed, its time set back",
    );
}

#[test]
fn an_overlay_over_fuse_at_the_root_gives_the_new_bytes_digest() {
    let test = "an_overlay_over_fuse_at_the_root_gives_the_new_bytes_digest";
    if skip_unless_mountable(test) {
        return;
    }
    let (env, backing) = crate::util::with_plugin("backing", "1.0.0");
    write(&backing.join("assets/data.bin"), "overlay data, first\n");
    let lower = env.path("lower");
    let _fuse = Mount::fuse(&env, &backing, &lower, "", 0.0);
    let (upper, work, src) = (env.path("upper"), env.path("work"), env.path("src"));
    fs::create_dir_all(&upper).unwrap();
    fs::create_dir_all(&work).unwrap();
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    );
    let _overlay = match Mount::other("overlay", &options, &src) {
        Ok(m) => m,
        Err(why) => {
            crate::util::skip(
                test,
                &format!("overlayfs over FUSE does not mount here ({why})"),
            );
            return;
        }
    };
    flip_below_a_mount(
        &env,
        &src,
        &backing.join("assets/data.bin"),
        "one byte changed below the overlay",
    );
}

/// A writer whose `write(2)` copies from a buffer mmapped from a slow file.
struct StalledWrite {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl StalledWrite {
    /// Starts writing `slow`'s bytes over `target`; returns once the write
    /// has begun.
    fn start(env: &TestEnv, target: &Path, slow: &Path) -> StalledWrite {
        let mut child = Command::new(PYTHON)
            .arg(helper(env))
            .arg("stallwrite")
            .arg(target)
            .arg(slow)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the writer");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).expect("writer");
        assert_eq!(line.trim(), "writing");
        StalledWrite { child, out }
    }

    /// Waits for the write to return.
    fn finish(mut self) {
        let mut line = String::new();
        self.out.read_line(&mut line).expect("writer");
        assert!(line.starts_with("wrote"), "{line}");
        assert!(self.child.wait().expect("wait").success());
    }
}

#[test]
fn a_write_whose_copy_stalls_gives_the_final_bytes_digest_once_it_returns() {
    if skip_unless_mountable(
        "a_write_whose_copy_stalls_gives_the_final_bytes_digest_once_it_returns",
    ) {
        return;
    }
    let (env, src) = crate::util::with_plugin("src", "1.0.0");
    let target = src.join("assets/target.bin");
    write(&target, vec![b'o'; 8192]);
    let backing = env.path("backing");
    write(&backing.join("slow.bin"), vec![b'n'; 8192]);
    let slow_dir = env.path("slow");
    let stall = Duration::from_secs(4);
    let _mount = Mount::fuse(&env, &backing, &slow_dir, "slow.bin", stall.as_secs_f64());
    std::thread::sleep(Duration::from_millis(2200));
    let old = every_command_reads(&env, &src, "before the write");
    let writer = StalledWrite::start(&env, &target, &slow_dir.join("slow.bin"));
    let started = Instant::now();
    // The kernel stamps the times, then the copy waits for the slow file:
    // an ingest now, more than two seconds after the stamp, reads the old bytes.
    std::thread::sleep(Duration::from_millis(2300));
    let during = env.ingest(&src, "1.0.0");
    if started.elapsed() < stall {
        assert_eq!(digest_of(&during), old, "{during}");
    } else {
        eprintln!("the ingest during the stall ended after it (a loaded machine): not compared");
    }
    writer.finish();
    assert_eq!(fs::read(&target).unwrap(), vec![b'n'; 8192]);
    let new = every_command_reads(&env, &src, "after the write returned");
    assert_ne!(new, old);
    assert_eq!(every_command_reads(&env, &src, "again"), new);
    verify_is_honest(&env, &src, &new, &old);
}

/// A process holding shared mappings, writing through them on request.
struct Mapper {
    child: Child,
    input: ChildStdin,
    out: BufReader<ChildStdout>,
}

impl Mapper {
    fn start(env: &TestEnv) -> Mapper {
        let mut child = Command::new(PYTHON)
            .arg(helper(env))
            .arg("mapper")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the mapper");
        let input = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Mapper { child, input, out }
    }

    /// Fills `path` with `byte` through its mapping; returns once done.
    fn fill(&mut self, path: &Path, byte: u8) {
        writeln!(self.input, "{} {byte}", path.display()).expect("mapper");
        let mut line = String::new();
        self.out.read_line(&mut line).expect("mapper");
        assert_eq!(line.trim(), "ok");
    }
}

impl Drop for Mapper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_shared_mmap_write_on_tmpfs_gives_the_new_bytes_digest() {
    let test = "a_shared_mmap_write_on_tmpfs_gives_the_new_bytes_digest";
    if !rustix::process::geteuid().is_root() {
        crate::util::skip(test, "not root, so no tmpfs mount");
        return;
    }
    let env = TestEnv::new();
    let src = env.path("src");
    let _tmpfs = match Mount::other("tmpfs", "size=16m", &src) {
        Ok(m) => m,
        Err(why) => {
            crate::util::skip(test, &format!("tmpfs does not mount here ({why})"));
            return;
        }
    };
    minimal_plugin(&src, "1.0.0");
    let mapped = src.join("assets/mapped.bin");
    write(&mapped, vec![0u8; 4096]);
    let mut mapper = Mapper::start(&env);
    mapper.fill(&mapped, b'A');
    std::thread::sleep(Duration::from_millis(2200));
    let a = every_command_reads(&env, &src, "'A' written through the mapping");
    assert_eq!(every_command_reads(&env, &src, "again"), a);
    let before = fs::metadata(&mapped).unwrap();
    mapper.fill(&mapped, b'B');
    assert_eq!(fs::read(&mapped).unwrap(), vec![b'B'; 4096]);
    let b = every_command_reads(&env, &src, "'B' written through the mapping");
    assert_ne!(b, a);
    // tmpfs set no time for it: only the bytes tell.
    let after = fs::metadata(&mapped).unwrap();
    eprintln!(
        "{test}: times {} the write through the mapping",
        if before.modified().ok() == after.modified().ok() {
            "unchanged by"
        } else {
            "changed by"
        }
    );
    verify_is_honest(&env, &src, &b, &a);
}

/// The number of rounds `differential_rewrites_never_give_a_stale_digest` runs.
fn rounds() -> usize {
    std::env::var("CESTORE_EXACT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// An ingest of `src` while its bytes change: it gives a digest or is
/// refused as `rejected`, nothing else.
fn ingest_while_writing(env: &TestEnv, src: &Path, what: &str) {
    let out = env.ingest_out(src, "1.0.0", &[]);
    let v = parse_json(&out);
    assert!(
        out.status.success() || v["error"]["kind"] == "rejected",
        "{what}: {v}"
    );
}

#[test]
fn differential_rewrites_never_give_a_stale_digest() {
    let test = "differential_rewrites_never_give_a_stale_digest";
    let (env, src) = crate::util::with_plugin("src", "1.0.0");
    let local: Vec<PathBuf> = (0..6)
        .map(|i| src.join(format!("skills/local/f{i}.md")))
        .collect();
    for (i, f) in local.iter().enumerate() {
        write(f, format!("local file {i}, first bytes\n"));
    }
    // Where mounts can be made: a FUSE passthrough below the root (its
    // change time is its modification time), a tmpfs below the root
    // written through shared mappings, and a slow FUSE file for stalled
    // writes.
    let mounts = cannot_mount();
    let mut held = Vec::new();
    let (mut remote, mut shm, mut slow) = (Vec::new(), Vec::new(), None);
    if let Some(why) = &mounts {
        eprintln!("{test}: only the ordinary rewrites: {why}");
    } else {
        let backing = env.path("backing");
        for i in 0..3 {
            write(
                &backing.join(format!("r{i}.md")),
                format!("remote {i}, first\n"),
            );
        }
        held.push(Mount::fuse(
            &env,
            &backing,
            &src.join("skills/remote"),
            "",
            0.0,
        ));
        remote = (0..3).map(|i| backing.join(format!("r{i}.md"))).collect();
        match Mount::other("tmpfs", "size=4m", &src.join("assets/shm")) {
            Ok(m) => {
                held.push(m);
                for i in 0..2 {
                    let f = src.join(format!("assets/shm/m{i}.bin"));
                    write(&f, vec![b'0'; 4096]);
                    shm.push(f);
                }
            }
            Err(why) => eprintln!("{test}: no tmpfs ({why})"),
        }
        let slow_backing = env.path("slow-backing");
        let slow_dir = env.path("slow");
        write(&slow_backing.join("slow.bin"), vec![b's'; 1024]);
        held.push(Mount::fuse(&env, &slow_backing, &slow_dir, "slow.bin", 2.5));
        slow = Some(slow_dir.join("slow.bin"));
    }
    let mut mapper = Mapper::start(&env);
    let stamp = env.path("stamp");
    write(&stamp, "");
    let mut checked = 0;
    let mut rewrites = 0;
    let mut during = 0;
    let check = |what: &str, checked: &mut usize| {
        every_command_reads(&env, &src, what);
        *checked += 1;
    };
    check("first", &mut checked);
    for round in 0..rounds() {
        let n = |i: usize| format!("round {round}, rewrite {i}\n");
        // Same size, the old modification time set back (touch -d).
        let f = &local[round % local.len()];
        let before = fs::metadata(f).unwrap();
        let mut bytes = fs::read(f).unwrap();
        bytes[0] ^= 0x01;
        fs::write(f, &bytes).unwrap();
        touch_back(f, &before);
        rewrites += 1;
        check("same size, touch -d", &mut checked);
        // Same size, touch -r a reference file.
        let f = &local[(round + 1) % local.len()];
        let out = Command::new("touch")
            .arg("-r")
            .arg(f)
            .arg(&stamp)
            .output()
            .unwrap();
        assert!(out.status.success());
        let mut bytes = fs::read(f).unwrap();
        bytes[1] ^= 0x01;
        fs::write(f, &bytes).unwrap();
        let out = Command::new("touch")
            .arg("-r")
            .arg(&stamp)
            .arg(f)
            .output()
            .unwrap();
        assert!(out.status.success());
        rewrites += 1;
        check("same size, touch -r", &mut checked);
        // Truncate, then rewrite.
        let f = &local[(round + 2) % local.len()];
        fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(f)
            .unwrap();
        fs::write(f, n(2)).unwrap();
        rewrites += 1;
        check("truncate and rewrite", &mut checked);
        // Rename over.
        let f = &local[(round + 3) % local.len()];
        let tmp = src.join("skills/local/.tmp-rename");
        fs::write(&tmp, n(3)).unwrap();
        fs::rename(&tmp, f).unwrap();
        rewrites += 1;
        check("rename over", &mut checked);
        // A shared mapping of a local file, then an ingest, then more bytes through it.
        let f = &local[(round + 4) % local.len()];
        mapper.fill(f, b'a' + (round % 26) as u8);
        check("mmap write (local)", &mut checked);
        mapper.fill(f, b'A' + (round % 26) as u8);
        rewrites += 2;
        check("mmap write again (local)", &mut checked);
        // A writer running during ingests: each finished ingest is
        // either digest or refused, and the one after it returns is exact.
        let f = local[(round + 5) % local.len()].clone();
        let writer = std::thread::spawn(move || {
            for i in 0..200 {
                fs::write(&f, format!("writing {i:04}\n").repeat(1 + i % 7)).unwrap();
            }
        });
        for _ in 0..3 {
            ingest_while_writing(&env, &src, "an ingest beside a writer");
            during += 1;
        }
        writer.join().unwrap();
        rewrites += 200;
        check("after a writer", &mut checked);
        // Below the FUSE mount: a byte changed, the old time set back.
        for (i, f) in remote.iter().enumerate() {
            if i % 2 == round % 2 || remote.len() == 1 {
                flip_and_touch_back(f);
                rewrites += 1;
            }
        }
        if !remote.is_empty() {
            std::thread::sleep(Duration::from_millis(1100));
            check("FUSE below the root, touch -d", &mut checked);
        }
        // tmpfs written through shared mappings.
        for (i, f) in shm.iter().enumerate() {
            mapper.fill(f, b'a' + ((round + i) % 26) as u8);
            check("tmpfs mmap write", &mut checked);
            rewrites += 1;
        }
        // A write stalled on a slow buffer, an ingest during the stall.
        if let Some(slow) = &slow {
            let target = &local[round % local.len()];
            let mut bytes = fs::read(target).unwrap();
            bytes.resize(1024, b'x');
            fs::write(target, &bytes).unwrap();
            check("before a stalled write", &mut checked);
            let writer = StalledWrite::start(&env, target, slow);
            std::thread::sleep(Duration::from_millis(2100));
            ingest_while_writing(&env, &src, "an ingest during a stalled write");
            during += 1;
            writer.finish();
            rewrites += 1;
            check("after the stalled write returned", &mut checked);
        }
    }
    assert_ok(&env.run(["verify"]));
    eprintln!(
        "{test}: {} rounds, {rewrites} rewrites, {during} ingests during writes, {checked} checks of ingest, digest and stage{}",
        rounds(),
        if oracle_snapshot(&src, "1.0.0").is_some() {
            " (each also against the oracle)"
        } else {
            ""
        }
    );
}
