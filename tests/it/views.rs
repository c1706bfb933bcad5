//! Views: `checkout`, `discard` and `path` against the real filesystem.
//!
//! * `checkout_matches_reference_staging`: a view is the reference's staged
//!   snapshot (same entries, bytes, `st_mode & 0o7777`), checked against the
//!   reference's own `_build_ce_plugin_snapshot` when `../shared` is present.
//! * `views_share_inodes_across_releases`, `empty_files_are_fresh`: what a
//!   view links, and what it does not.
//! * `exdev_copies_across_filesystems`, `emlink_copies_at_the_link_limit`:
//!   real `EXDEV` and `EMLINK`, no simulation.
//! * `discard_*`, `tampered_*`, `concurrent_path_*`, `checkout_publishes_*`,
//!   `bad_requests`: the rest of the contract.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::gen;
use crate::util::{
    self, assert_exit, assert_ok, chmod, exists, ingest_sharing_four_digits, minimal_plugin,
    mode_of, object_path, parse_json, sha_hex, spares, write, FileRow, TestEnv,
};

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

/// Requests only the view tests make.
impl TestEnv {
    fn discard(&self, dest: &Path, force: Option<&str>) -> Output {
        let mut args: Vec<&OsStr> = vec![
            OsStr::new("discard"),
            dest.as_os_str(),
            OsStr::new("--json"),
        ];
        if let Some(d) = force {
            args.push(OsStr::new("--force"));
            args.push(OsStr::new(d));
        }
        self.run(args)
    }

    /// `cestore discard DEST --spare --json`.
    fn discard_spare(&self, dest: &Path) -> Output {
        self.run([
            OsStr::new("discard"),
            dest.as_os_str(),
            OsStr::new("--spare"),
            OsStr::new("--json"),
        ])
    }
}

/// What a walk found at one relative path (symlinks are never followed).
#[derive(Clone, PartialEq, Eq)]
enum Node {
    Dir { mode: u32 },
    File { mode: u32, bytes: Vec<u8> },
    Symlink,
    Other,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Node::Dir { mode } => write!(f, "dir {mode:04o}"),
            Node::File { mode, bytes } => write!(
                f,
                "file {mode:04o} {} bytes sha {}",
                bytes.len(),
                &sha_hex(bytes)[..12]
            ),
            Node::Symlink => write!(f, "symlink"),
            Node::Other => write!(f, "other"),
        }
    }
}

/// Every entry under `root` (the root itself as ""), by relative path.
fn entries_under(root: &Path) -> BTreeMap<String, Node> {
    fn inner(dir: &Path, prefix: &str, out: &mut BTreeMap<String, Node>) {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .map(|e| e.expect("dir entry").file_name())
            .collect();
        names.sort();
        for name in names {
            let text = name.to_str().expect("UTF-8 name in a view").to_string();
            let rel = if prefix.is_empty() {
                text
            } else {
                format!("{prefix}/{text}")
            };
            let path = dir.join(&name);
            let meta = fs::symlink_metadata(&path).expect("lstat");
            let mode = meta.mode() & 0o7777;
            let ft = meta.file_type();
            if ft.is_dir() {
                out.insert(rel.clone(), Node::Dir { mode });
                inner(&path, &rel, out);
            } else if ft.is_file() {
                let bytes =
                    fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
                out.insert(rel, Node::File { mode, bytes });
            } else if ft.is_symlink() {
                out.insert(rel, Node::Symlink);
            } else {
                out.insert(rel, Node::Other);
            }
        }
    }
    let mut out = BTreeMap::new();
    let meta =
        fs::symlink_metadata(root).unwrap_or_else(|e| panic!("lstat {}: {e}", root.display()));
    assert!(meta.is_dir(), "{} is not a directory", root.display());
    out.insert(
        String::new(),
        Node::Dir {
            mode: meta.mode() & 0o7777,
        },
    );
    inner(root, "", &mut out);
    out
}

fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

/// Asserts a view is exactly the snapshot `files` describe: those files with
/// those bytes, 0444/0555 files, 0555 directories (only the needed ones), no
/// symlinks. Returns the walk.
fn assert_view_is(view: &Path, files: &[FileRow]) -> BTreeMap<String, Node> {
    let tree = entries_under(view);
    let mut dirs: BTreeSet<&str> = BTreeSet::from([""]);
    for f in files {
        dirs.extend(ancestors(&f.path));
    }
    let wanted: BTreeSet<&str> = files
        .iter()
        .map(|f| f.path.as_str())
        .chain(dirs.iter().copied())
        .collect();
    let found: BTreeSet<&str> = tree.keys().map(String::as_str).collect();
    assert_eq!(
        found.difference(&wanted).collect::<Vec<_>>(),
        Vec::<&&str>::new(),
        "extra entries in view {}",
        view.display()
    );
    assert_eq!(
        wanted.difference(&found).collect::<Vec<_>>(),
        Vec::<&&str>::new(),
        "missing entries in view {}",
        view.display()
    );
    for d in &dirs {
        assert_eq!(
            tree[*d],
            Node::Dir { mode: 0o555 },
            "directory '{d}' of {}",
            view.display()
        );
    }
    for f in files {
        match &tree[&f.path] {
            Node::File { mode, bytes } => {
                let want = if f.executable { 0o555 } else { 0o444 };
                assert_eq!(*mode, want, "mode of '{}' in {}", f.path, view.display());
                assert_eq!(bytes.len() as u64, f.size, "size of '{}'", f.path);
                assert_eq!(sha_hex(bytes), f.sha256, "bytes of '{}'", f.path);
            }
            other => panic!(
                "'{}' in {} is {other:?}, not a file",
                f.path,
                view.display()
            ),
        }
    }
    tree
}

/// Names in `parent` that look like a checkout's temporary directory.
fn tmp_siblings(parent: &Path) -> Vec<String> {
    fs::read_dir(parent)
        .expect("read parent")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".cestore-tmp-"))
        .collect()
}

fn ino(path: &Path) -> u64 {
    fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("lstat {}: {e}", path.display()))
        .ino()
}

fn nlink(path: &Path) -> u64 {
    fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("lstat {}: {e}", path.display()))
        .nlink()
}

/// Gives the owner write permission on every directory under `root`
/// (`find ROOT -type d -exec chmod u+w {} +`), never touching a file.
fn chmod_dirs_writable(root: &Path) {
    let meta = fs::symlink_metadata(root).expect("lstat");
    if !meta.is_dir() {
        return;
    }
    chmod(root, (meta.mode() & 0o7777) | 0o200);
    for entry in fs::read_dir(root).expect("read dir") {
        chmod_dirs_writable(&entry.expect("entry").path());
    }
}

/// Checks every object in the store: mode 0444 (0555 for `.x`) and bytes
/// that hash to its name. Returns how many objects there are.
fn assert_objects_intact(store: &Path) -> usize {
    let mut n = 0;
    for shard in fs::read_dir(store.join("objects")).expect("read objects") {
        let shard = shard.expect("shard");
        let shard_name = shard.file_name().to_string_lossy().into_owned();
        for obj in fs::read_dir(shard.path()).expect("read shard") {
            let obj = obj.expect("object");
            let name = obj.file_name().to_string_lossy().into_owned();
            let (hex, exec) = match name.strip_suffix(".x") {
                Some(h) => (h.to_string(), true),
                None => (name.clone(), false),
            };
            let path = obj.path();
            let want = if exec { 0o555 } else { 0o444 };
            assert_eq!(mode_of(&path), want, "mode of object {}", path.display());
            let bytes = fs::read(&path).expect("read object");
            assert_eq!(
                sha_hex(&bytes),
                format!("{shard_name}{hex}"),
                "bytes of object {}",
                path.display()
            );
            n += 1;
        }
    }
    n
}

/// Writes a plugin tree: `(path, bytes, mode)`.
fn write_tree(root: &Path, files: &[(String, Vec<u8>, u32)]) {
    for (rel, bytes, mode) in files {
        let p = root.join(rel);
        write(&p, bytes);
        chmod(&p, *mode);
    }
}

fn plugin_json(version: &str) -> Vec<u8> {
    format!(r#"{{"name": "compound-engineering", "version": "{version}"}}"#).into_bytes()
}

fn random_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut rng = gen::Rng::new(seed);
    let mut buf = vec![0u8; n];
    rng.fill(&mut buf);
    buf
}

/// A file to write: its relative path, bytes and mode.
type TreeFile = (String, Vec<u8>, u32);

/// A hand-made tree covering non-ASCII names, exec bits, empty files, deep
/// directories, scripts/ and assets/, shared bytes, and noise the seed filters.
/// Returns the files and the set of paths the snapshot must hold.
fn rich_tree(version: &str, salt: u64) -> (Vec<TreeFile>, BTreeSet<String>) {
    let script = b"#!/bin/sh\necho hello\n".to_vec();
    let skill = b"# ce-plan\n".to_vec();
    let mut keep: Vec<(&str, Vec<u8>, u32)> = vec![
        (".claude-plugin/plugin.json", plugin_json(version), 0o644),
        (
            ".claude-plugin/marketplace.json",
            b"{\"plugins\": []}\n".to_vec(),
            0o600,
        ),
        ("skills/ce-plan/SKILL.md", skill.clone(), 0o644),
        ("skills/ce-work/SKILL.md", b"# ce-work\n".to_vec(), 0o644),
        (
            "skills/ce-code-review/SKILL.md",
            b"# ce-code-review\n".to_vec(),
            0o444,
        ),
        (
            "skills/ce-plan/références/çà-日本語.md",
            "Ünïcødé ✓\n".as_bytes().to_vec(),
            0o644,
        ),
        (
            "skills/ce-work/emoji-🦀.txt",
            "🦀\n".as_bytes().to_vec(),
            0o644,
        ),
        (
            "skills/ce-work/name with spaces.md",
            b"spaces\n".to_vec(),
            0o644,
        ),
        ("skills/ce-work/empty.md", Vec::new(), 0o644),
        (
            "skills/ce-work/deep/a/b/c/d/e/f/leaf.txt",
            b"leaf\n".to_vec(),
            0o644,
        ),
        (
            "skills/ce-work/deep/a/sibling.txt",
            b"sibling\n".to_vec(),
            0o600,
        ),
        ("scripts/run.sh", script.clone(), 0o755),
        ("scripts/plain-copy-of-run.sh", script.clone(), 0o644),
        ("scripts/owner-only", b"owner x\n".to_vec(), 0o700),
        ("scripts/other-x", b"other x\n".to_vec(), 0o641),
        ("scripts/group-x", b"group x\n".to_vec(), 0o654),
        ("scripts/setuid", b"setuid\n".to_vec(), 0o4755),
        ("scripts/readonly", b"ro\n".to_vec(), 0o400),
        ("scripts/empty-exec", Vec::new(), 0o755),
        ("scripts/sub dir/ŝcript.py", b"print('x')\n".to_vec(), 0o750),
        ("assets/logo.bin", random_bytes(salt, 100_000), 0o644),
        ("assets/Ωmega/ñ/data.json", b"{\"a\": 1}\n".to_vec(), 0o644),
        ("assets/dup-of-skill.md", skill, 0o644),
        ("assets/.hidden", b"hidden but allowed\n".to_vec(), 0o644),
    ];
    let salt_text = format!("salt {salt}\n").into_bytes();
    keep.push(("assets/salt.txt", salt_text, 0o644));
    let noise: Vec<(&str, Vec<u8>, u32)> = vec![
        ("README.md", b"top level, not allowed\n".to_vec(), 0o644),
        ("docs/index.md", b"docs\n".to_vec(), 0o644),
        ("src/main.rs", b"fn main() {}\n".to_vec(), 0o644),
        (".github/workflows/ci.yml", b"on: push\n".to_vec(), 0o644),
        (
            ".claude-plugin/notes.txt",
            b"not an allowed manifest\n".to_vec(),
            0o644,
        ),
        ("skills/ce-work/tests/test_x.py", b"noise\n".to_vec(), 0o644),
        ("skills/ce-work/Docs/readme.md", b"noise\n".to_vec(), 0o644),
        ("skills/ce-work/.env", b"SECRET=1\n".to_vec(), 0o600),
        ("skills/ce-work/.env.local", b"SECRET=1\n".to_vec(), 0o600),
        ("skills/ce-work/api-token.txt", b"t\n".to_vec(), 0o600),
        ("skills/ce-work/server.PEM", b"k\n".to_vec(), 0o600),
        ("skills/ce-work/__pycache__/x.pyc", b"\0\0".to_vec(), 0o644),
        (
            "skills/ce-work/node_modules/pkg/index.js",
            b"x\n".to_vec(),
            0o644,
        ),
        (
            "skills/.git/HEAD",
            b"ref: refs/heads/main\n".to_vec(),
            0o644,
        ),
        (
            "skills/ce-work/only-noise/.npmrc",
            b"token\n".to_vec(),
            0o600,
        ),
        ("scripts/credentials.json", b"{}\n".to_vec(), 0o600),
        ("assets/my-secret.bin", b"s\n".to_vec(), 0o644),
        ("assets/test/fixture.txt", b"noise\n".to_vec(), 0o644),
    ];
    let expected = keep.iter().map(|(p, _, _)| p.to_string()).collect();
    let files = keep
        .into_iter()
        .chain(noise)
        .map(|(p, b, m)| (p.to_string(), b, m))
        .collect();
    (files, expected)
}

/// A small tree: the minimal plugin plus `extra` files.
fn small_tree(root: &Path, version: &str, extra: &[(&str, &[u8], u32)]) {
    minimal_plugin(root, version);
    for (rel, bytes, mode) in extra {
        let p = root.join(rel);
        write(&p, bytes);
        chmod(&p, *mode);
    }
}

/// The reference package directory beside the repository, when present.
fn reference_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference");
    dir.join("workflow_bench/runtime_mounts.py")
        .is_file()
        .then_some(dir)
}

/// Runs the reference's own staging (`_build_ce_plugin_snapshot`) on `src`
/// under `parent`; returns the staged root and the reference's digest.
fn reference_stage(
    reference: &Path,
    src: &Path,
    version: &str,
    parent: &Path,
) -> (PathBuf, String) {
    const CODE: &str = "\
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from workflow_bench import runtime_mounts as rm
cfg = rm.validate_ce_plugin_inputs(('ce_workflow',), Path(sys.argv[2]), sys.argv[3])
snap = rm._build_ce_plugin_snapshot(cfg, Path(sys.argv[4]))
print(snap.root)
print(snap.manifest_digest)
";
    fs::create_dir_all(parent).expect("create reference parent");
    let out = Command::new("python3")
        .arg("-B")
        .arg("-c")
        .arg(CODE)
        .arg(reference)
        .arg(src)
        .arg(version)
        .arg(parent)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "reference staging failed for {}:\n{}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8 reference output");
    let mut lines = text.lines();
    let root = PathBuf::from(lines.next().expect("staged root"));
    let digest = lines.next().expect("reference digest").to_string();
    (root, digest)
}

/// Asserts a view matches the source tree: every file's bytes, and 0555
/// exactly when the source had any exec bit.
fn assert_view_matches_source(view: &BTreeMap<String, Node>, src: &Path) {
    for (rel, node) in view {
        if let Node::File { mode, bytes } = node {
            let sp = src.join(rel);
            let src_bytes =
                fs::read(&sp).unwrap_or_else(|e| panic!("read source {}: {e}", sp.display()));
            assert!(
                src_bytes == *bytes,
                "bytes of '{rel}' differ from the source"
            );
            let exec = mode_of(&sp) & 0o111 != 0;
            assert_eq!(
                *mode,
                if exec { 0o555 } else { 0o444 },
                "mode of '{rel}' (source {:04o})",
                mode_of(&sp)
            );
        }
    }
}

/// A filesystem other than the one holding `base`: `/dev/shm` when it is one,
/// else a tmpfs mounted on `base/mnt` when root. `None` (with the reason) when
/// neither is possible.
enum OtherFs {
    Shm(tempfile::TempDir),
    Mounted(PathBuf),
}

impl OtherFs {
    fn find(base: &Path) -> Result<OtherFs, String> {
        let dev = fs::metadata(base).expect("stat base").dev();
        let shm = Path::new("/dev/shm");
        if let Ok(meta) = fs::metadata(shm) {
            if meta.is_dir() && meta.dev() != dev {
                if let Ok(dir) = tempfile::Builder::new()
                    .prefix("cestore-it-xdev-")
                    .tempdir_in(shm)
                {
                    return Ok(OtherFs::Shm(dir));
                }
            }
        }
        if !rustix::process::geteuid().is_root() {
            return Err(
                "/dev/shm is unusable or on the same filesystem, and mounting a tmpfs needs root"
                    .into(),
            );
        }
        let mnt = base.join("mnt");
        fs::create_dir_all(&mnt).expect("create mount point");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64m", "tmpfs"])
            .arg(&mnt)
            .output();
        match out {
            Ok(o) if o.status.success() => {
                if fs::metadata(&mnt).expect("stat mount").dev() == dev {
                    return Err(
                        "mount -t tmpfs succeeded but the mount point has the same st_dev".into(),
                    );
                }
                Ok(OtherFs::Mounted(mnt))
            }
            Ok(o) => Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Err(format!("cannot run mount: {e}")),
        }
    }

    fn dir(&self) -> PathBuf {
        match self {
            OtherFs::Shm(d) => d.path().canonicalize().expect("canonical shm dir"),
            OtherFs::Mounted(p) => p.clone(),
        }
    }
}

impl Drop for OtherFs {
    fn drop(&mut self) {
        match self {
            OtherFs::Shm(d) => util::remove_tree(d.path()),
            OtherFs::Mounted(p) => {
                let _ = Command::new("umount").arg(&*p).status();
            }
        }
    }
}

// ---------------------------------------------------------------------------
// 1. A checkout is the reference's staged snapshot
// ---------------------------------------------------------------------------

#[test]
fn checkout_matches_reference_staging() {
    let env = TestEnv::new();
    let reference = reference_dir();
    if reference.is_none() {
        eprintln!(
            "checkout_matches_reference_staging: ../shared/reference/workflow_bench is not present; \
             skipping the comparison with the reference's staged tree (checking against the source only)"
        );
    }

    // (source dir, version, expected file set when known)
    let mut cases: Vec<(PathBuf, String, Option<BTreeSet<String>>)> = Vec::new();
    for (i, version) in ["2.3.4-rc.1+build.5", "0.0.1"].iter().enumerate() {
        let src = env.path(&format!("rich-{i}"));
        let (files, expected) = rich_tree(version, 77 + i as u64);
        write_tree(&src, &files);
        // An empty directory is not part of a snapshot.
        fs::create_dir_all(src.join("skills/ce-work/empty-dir")).expect("mkdir");
        fs::create_dir_all(src.join("assets/empty/nested")).expect("mkdir");
        cases.push((src, version.to_string(), Some(expected)));
    }
    // A few of the generator's accepted trees, kept small.
    let mut seed = 0x7715_0000u64;
    let mut picked = 0;
    while picked < 3 && seed < 0x7715_0000 + 60 {
        let root = env.path(&format!("gen-{seed:x}/tree"));
        let case = gen::plugin_tree(seed, &root);
        seed += 1;
        if case.broken.is_none()
            && case.dir == root
            && case.files <= 300
            && case.bytes <= 4 * gen::MIB
        {
            eprintln!(
                "checkout_matches_reference_staging: seed {:#x}: {}",
                case.seed, case.description
            );
            cases.push((root, case.version.clone(), None));
            picked += 1;
        }
    }
    assert!(picked > 0, "no small accepted generator tree in 60 seeds");

    for (i, (src, version, expected)) in cases.iter().enumerate() {
        let digest = env.ingest_digest(src, version);
        let dest = env.path(&format!("view-{i}"));
        let report = env.checkout_ok(&digest, &dest, &[]);
        let files = env.files(&digest);
        let tree = assert_view_is(&dest, &files);
        assert!(!tree
            .values()
            .any(|n| matches!(n, Node::Symlink | Node::Other)));
        assert_view_matches_source(&tree, src);

        // The report adds up.
        let empties = files.iter().filter(|f| f.size == 0).count() as u64;
        let dirs = tree
            .values()
            .filter(|n| matches!(n, Node::Dir { .. }))
            .count() as u64;
        assert_eq!(report["manifest_digest"], digest.as_str());
        assert_eq!(report["view"], dest.to_str().unwrap());
        assert_eq!(report["requested_method"], "auto");
        assert_eq!(report["linked"], files.len() as u64 - empties, "{report}");
        assert_eq!(report["copied"], empties, "{report}");
        assert_eq!(report["directories"], dirs, "{report}");
        if empties > 0 {
            assert_eq!(report["copy_reasons"]["empty file"], empties, "{report}");
        }
        assert_eq!(
            report["copy_reasons"].as_object().unwrap().len(),
            usize::from(empties > 0),
            "{report}"
        );

        if let Some(expected) = expected {
            let got: BTreeSet<String> = files.iter().map(|f| f.path.clone()).collect();
            assert_eq!(&got, expected, "file set of {}", src.display());
        }

        if let Some(reference) = &reference {
            let (staged, ref_digest) =
                reference_stage(reference, src, version, &env.path(&format!("ref-{i}")));
            assert_eq!(
                ref_digest,
                digest,
                "the reference's digest for {}",
                src.display()
            );
            let ref_tree = entries_under(&staged);
            let view_keys: Vec<&String> = tree.keys().collect();
            let ref_keys: Vec<&String> = ref_tree.keys().collect();
            assert_eq!(
                view_keys,
                ref_keys,
                "entries of the view vs the reference's staged tree ({})",
                src.display()
            );
            for (rel, node) in &tree {
                assert_eq!(
                    node, &ref_tree[rel],
                    "'{rel}' in the view vs the reference's staged tree"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// 2. Releases share inodes; the exec bit is part of an object's identity
// ---------------------------------------------------------------------------

#[test]
fn views_share_inodes_across_releases() {
    let env = TestEnv::new();
    let same: &[u8] = b"same bytes, two modes\n";
    let extra: &[(&str, &[u8], u32)] = &[
        ("scripts/tool.sh", same, 0o755),
        ("assets/tool.txt", same, 0o644),
        ("assets/common.bin", b"common to both releases\n", 0o644),
        ("skills/ce-work/nested/deeper/note.md", b"note\n", 0o600),
    ];
    let (a, b) = (env.path("rel-a"), env.path("rel-b"));
    small_tree(&a, "1.0.0", extra);
    small_tree(&b, "1.0.1", extra);
    let da = env.ingest_digest(&a, "1.0.0");
    let db = env.ingest_digest(&b, "1.0.1");
    assert_ne!(da, db);
    let (va, vb) = (env.path("view-a"), env.path("view-b"));
    env.checkout_ok(&da, &va, &[]);
    env.checkout_ok(&db, &vb, &[]);
    let files_a = env.files(&da);
    let files_b = env.files(&db);
    assert_view_is(&va, &files_a);
    assert_view_is(&vb, &files_b);

    let by_path_b: BTreeMap<&str, &FileRow> =
        files_b.iter().map(|f| (f.path.as_str(), f)).collect();
    let mut common = 0;
    for f in &files_a {
        let g = by_path_b[f.path.as_str()];
        let (ia, ib) = (ino(&va.join(&f.path)), ino(&vb.join(&f.path)));
        if f.path == ".claude-plugin/plugin.json" {
            assert_ne!(f.sha256, g.sha256);
            assert_ne!(ia, ib, "the differing file must not share an inode");
            assert_eq!(ia, ino(&object_path(&env.store, &f.sha256, false)));
            assert_eq!(ib, ino(&object_path(&env.store, &g.sha256, false)));
            continue;
        }
        assert_eq!(f.sha256, g.sha256);
        assert_eq!(
            ia, ib,
            "'{}' must share its inode across the two views",
            f.path
        );
        assert_eq!(
            ia,
            ino(&object_path(&env.store, &f.sha256, f.executable)),
            "'{}' must be its object",
            f.path
        );
        common += 1;
    }
    assert_eq!(common, files_a.len() - 1);

    // The same bytes, executable and not: two objects, two inodes, two modes.
    let tool_sh = files_a
        .iter()
        .find(|f| f.path == "scripts/tool.sh")
        .unwrap();
    let tool_txt = files_a
        .iter()
        .find(|f| f.path == "assets/tool.txt")
        .unwrap();
    assert_eq!(tool_sh.sha256, tool_txt.sha256);
    assert!(tool_sh.executable && !tool_txt.executable);
    let (ox, o) = (
        object_path(&env.store, &tool_sh.sha256, true),
        object_path(&env.store, &tool_sh.sha256, false),
    );
    assert!(ox.to_string_lossy().ends_with(".x"));
    assert_ne!(ino(&ox), ino(&o));
    assert_eq!(mode_of(&ox), 0o555);
    assert_eq!(mode_of(&o), 0o444);
    assert_eq!(mode_of(&va.join("scripts/tool.sh")), 0o555);
    assert_eq!(mode_of(&va.join("assets/tool.txt")), 0o444);
    assert_eq!(ino(&va.join("scripts/tool.sh")), ino(&ox));
    assert_eq!(ino(&va.join("assets/tool.txt")), ino(&o));
    // The object plus one link from each view.
    assert_eq!(nlink(&ox), 3);
    assert_eq!(nlink(&o), 3);
}

// ---------------------------------------------------------------------------
// 3. A zero-length file is a fresh file
// ---------------------------------------------------------------------------

#[test]
fn empty_files_are_fresh() {
    let env = TestEnv::new();
    let d = small_store(
        &env,
        &[
            ("skills/ce-work/empty.md", b"", 0o644),
            ("scripts/empty.sh", b"", 0o755),
        ],
    );
    let (v1, v2) = (env.path("v1"), env.path("v2"));
    let r1 = env.checkout_ok(&d, &v1, &[]);
    env.checkout_ok(&d, &v2, &[]);
    assert_eq!(r1["copy_reasons"]["empty file"], 2, "{r1}");
    for (rel, mode) in [
        ("skills/ce-work/empty.md", 0o444),
        ("scripts/empty.sh", 0o555),
    ] {
        let (a, b) = (v1.join(rel), v2.join(rel));
        assert_ne!(
            ino(&a),
            ino(&b),
            "'{rel}' must be a fresh file in each view"
        );
        assert_eq!(nlink(&a), 1, "'{rel}'");
        assert_eq!(nlink(&b), 1, "'{rel}'");
        assert_eq!(mode_of(&a), mode);
        assert_eq!(mode_of(&b), mode);
        assert_eq!(fs::metadata(&a).unwrap().len(), 0);
    }
    // The non-empty files are still links.
    assert_eq!(
        ino(&v1.join("skills/ce-plan/SKILL.md")),
        ino(&v2.join("skills/ce-plan/SKILL.md"))
    );
}

// ---------------------------------------------------------------------------
// 4. EXDEV for real
// ---------------------------------------------------------------------------

#[test]
fn exdev_copies_across_filesystems() {
    let env = TestEnv::new();
    let other = match OtherFs::find(&env.base) {
        Ok(o) => o,
        Err(why) => {
            crate::util::skip("exdev_copies_across_filesystems", &why.to_string());
            return;
        }
    };
    let parent = other.dir();
    let d = small_store(
        &env,
        &[
            ("scripts/run.sh", b"#!/bin/sh\n", 0o755),
            ("assets/blob.bin", &random_bytes(4, 50_000), 0o644),
            ("skills/ce-work/empty.md", b"", 0o644),
        ],
    );
    let files = env.files(&d);
    let nonempty = files.iter().filter(|f| f.size > 0).count() as u64;

    let dest = parent.join("view");
    let report = env.checkout_ok(&d, &dest, &["--method", "auto"]);
    assert_eq!(report["linked"], 0, "{report}");
    assert_eq!(report["copied"], files.len() as u64, "{report}");
    let reasons = report["copy_reasons"].as_object().unwrap();
    let exdev: Vec<_> = reasons
        .iter()
        .filter(|(k, _)| k.contains("EXDEV"))
        .collect();
    assert_eq!(exdev.len(), 1, "{report}");
    assert_eq!(exdev[0].1, nonempty, "{report}");
    assert_eq!(reasons["empty file"], 1, "{report}");
    assert_view_is(&dest, &files);
    for f in &files {
        assert_eq!(nlink(&dest.join(&f.path)), 1, "'{}' is a copy", f.path);
    }
    assert!(tmp_siblings(&parent).is_empty());

    for extra in [&["--require-hardlinks"][..], &["--method", "hardlink"][..]] {
        let dest2 = parent.join("view-hl");
        let out = env.checkout(&d, &dest2, extra);
        let err = assert_exit(&out, 6);
        assert!(err.contains("EXDEV"), "{err}");
        assert!(!exists(&dest2), "a failed checkout must leave no DEST");
        assert_eq!(
            tmp_siblings(&parent),
            Vec::<String>::new(),
            "no temporary sibling may remain"
        );
    }
    // Only the successful checkout is recorded.
    let views = env.views(&d);
    assert_eq!(
        views,
        vec![(dest.to_string_lossy().into_owned(), "checkout".to_string())]
    );
    assert_ok(&env.discard(&dest, None));
    assert!(!exists(&dest));
    assert_objects_intact(&env.store);
}

// ---------------------------------------------------------------------------
// 5. EMLINK for real
// ---------------------------------------------------------------------------

#[test]
fn emlink_copies_at_the_link_limit() {
    let env = TestEnv::new();
    let fstype = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(&env.base)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    if fstype.contains("tmpfs")
        || fstype.contains("btrfs")
        || fstype.contains("overlay")
        || fstype.contains("xfs")
    {
        crate::util::skip(
            "emlink_copies_at_the_link_limit",
            &format!("the temp dir is on {fstype}, with no reachable link limit"),
        );
        return;
    }
    let src = env.path("src");
    let hot: &[u8] = b"the object that reaches its link limit\n";
    small_tree(
        &src,
        "1.0.0",
        &[
            ("assets/hot.txt", hot, 0o644),
            ("assets/cold.txt", b"cold\n", 0o644),
        ],
    );
    let d = env.ingest_digest(&src, "1.0.0");
    let files = env.files(&d);
    let object = object_path(&env.store, &sha_hex(hot), false);
    assert!(object.is_file());

    let start = Instant::now();
    let scratch = env.path("links");
    fs::create_dir(&scratch).expect("mkdir scratch");
    let mut hit = None;
    for i in 0..70_000u32 {
        match fs::hard_link(&object, scratch.join(i.to_string())) {
            Ok(()) => {}
            Err(e) if rustix::io::Errno::from_io_error(&e) == Some(rustix::io::Errno::MLINK) => {
                hit = Some(i);
                break;
            }
            Err(e) => {
                fs::remove_dir_all(&scratch).expect("remove scratch links");
                crate::util::skip(
                    "emlink_copies_at_the_link_limit",
                    &format!("link() failed with {e} after {i} links ({fstype})"),
                );
                return;
            }
        }
    }
    let Some(made) = hit else {
        fs::remove_dir_all(&scratch).expect("remove scratch links");
        crate::util::skip(
            "emlink_copies_at_the_link_limit",
            &format!("no link limit within 70,000 links ({fstype})"),
        );
        return;
    };
    let limit = nlink(&object);
    eprintln!(
        "emlink: {made} scratch links, nlink {limit} ({fstype}), {:?}",
        start.elapsed()
    );

    let dest = env.path("view");
    let report = env.checkout_ok(&d, &dest, &["--method", "auto"]);
    let reasons = report["copy_reasons"].as_object().unwrap();
    let emlink: Vec<_> = reasons
        .iter()
        .filter(|(k, _)| k.contains("EMLINK"))
        .collect();
    assert_eq!(emlink.len(), 1, "{report}");
    assert_eq!(emlink[0].1, 1, "{report}");
    assert_eq!(report["copied"], 1, "{report}");
    assert_eq!(report["linked"], files.len() as u64 - 1, "{report}");
    assert_view_is(&dest, &files);
    assert_ne!(ino(&dest.join("assets/hot.txt")), ino(&object));
    assert_eq!(nlink(&dest.join("assets/hot.txt")), 1);
    assert_eq!(
        ino(&dest.join("assets/cold.txt")),
        ino(&object_path(&env.store, &sha_hex(b"cold\n"), false))
    );

    let dest2 = env.path("view-hl");
    let err = assert_exit(&env.checkout(&d, &dest2, &["--require-hardlinks"]), 6);
    assert!(err.contains("EMLINK"), "{err}");
    assert!(!exists(&dest2));
    assert_eq!(tmp_siblings(&env.base), Vec::<String>::new());

    fs::remove_dir_all(&scratch).expect("remove scratch links");
    // Below the limit again: the file is linked.
    let dest3 = env.path("view-after");
    let report = env.checkout_ok(&d, &dest3, &["--require-hardlinks"]);
    assert_eq!(report["copied"], 0, "{report}");
    assert_eq!(ino(&dest3.join("assets/hot.txt")), ino(&object));
    assert_objects_intact(&env.store);
    eprintln!("emlink: done in {:?}", start.elapsed());
}

// ---------------------------------------------------------------------------
// 6. Discard
// ---------------------------------------------------------------------------

#[test]
fn discard_leaves_objects_unchanged() {
    let env = TestEnv::new();
    let src = env.path("src");
    let same: &[u8] = b"shared bytes\n";
    small_tree(
        &src,
        "1.0.0",
        &[
            ("scripts/a.sh", same, 0o755),
            ("assets/a.txt", same, 0o644),
            ("assets/deep/er/b.bin", &random_bytes(6, 10_000), 0o644),
            ("skills/ce-work/empty.md", b"", 0o644),
        ],
    );
    let d = env.ingest_digest(&src, "1.0.0");
    let files = env.files(&d);
    let view = env.path("view");
    env.checkout_ok(&d, &view, &[]);
    assert_view_is(&view, &files);
    assert_eq!(env.views(&d).len(), 1);

    chmod_dirs_writable(&view);
    let out = env.discard(&view, None);
    assert_ok(&out);
    let report = parse_json(&out);
    assert_eq!(report["recorded"], true, "{report}");
    assert_eq!(report["removed"], true, "{report}");
    assert_eq!(report["manifest_digest"], d.as_str());
    assert!(!exists(&view));
    assert!(
        env.views(&d).is_empty(),
        "a discarded view must not be listed"
    );
    let n = assert_objects_intact(&env.store);
    assert!(n >= files.iter().filter(|f| f.size > 0).count() - 1);
    // The store still serves the snapshot.
    let again = env.path("again");
    env.checkout_ok(&d, &again, &[]);
    assert_view_is(&again, &files);
}

#[test]
fn discard_refuses_unrecorded_paths() {
    let env = TestEnv::new();
    let src = env.path("src");
    small_tree(&src, "1.0.0", &[("scripts/a.sh", b"#!/bin/sh\n", 0o755)]);
    let d = env.ingest_digest(&src, "1.0.0");
    let files = env.files(&d);

    // Not a recorded view: refused, left alone.
    let plain = env.path("plain");
    write(&plain.join("keep.txt"), "keep me\n");
    let err = assert_exit(&env.discard(&plain, None), 4);
    assert!(err.contains("--force"), "{err}");
    assert_eq!(fs::read(plain.join("keep.txt")).unwrap(), b"keep me\n");
    // Forced, but the tree is not the snapshot: refused too.
    assert_exit(&env.discard(&plain, Some(&d)), 6);
    assert!(plain.join("keep.txt").is_file());

    let view = env.path("view");
    env.checkout_ok(&d, &view, &[]);

    // An exact copy of a view: removed with --force.
    let copy = env.path("copy");
    util::cp_a(&view, &copy);
    assert_view_is(&copy, &files);
    let err = assert_exit(&env.discard(&copy, None), 4);
    assert!(!err.is_empty());
    assert!(exists(&copy));
    let out = env.discard(&copy, Some(&d[..12]));
    assert_ok(&out);
    let report = parse_json(&out);
    assert_eq!(report["recorded"], false, "{report}");
    assert_eq!(report["removed"], true, "{report}");
    assert!(!exists(&copy));

    // A copy with one byte changed (same size, same mode): refused.
    let copy2 = env.path("copy2");
    util::cp_a(&view, &copy2);
    let victim = copy2.join("skills/ce-plan/SKILL.md");
    assert_ne!(ino(&victim), ino(&view.join("skills/ce-plan/SKILL.md")));
    let mut bytes = fs::read(&victim).unwrap();
    chmod(&victim, 0o644);
    bytes[0] ^= 0x01;
    fs::write(&victim, &bytes).unwrap();
    chmod(&victim, 0o444);
    let err = assert_exit(&env.discard(&copy2, Some(&d)), 6);
    assert!(err.contains("skills/ce-plan/SKILL.md"), "{err}");
    assert!(victim.is_file(), "a refused discard must leave the tree");
    assert_eq!(fs::read(&victim).unwrap(), bytes);

    // The recorded view is untouched by all of this.
    assert_view_is(&view, &files);
    assert_eq!(env.views(&d).len(), 1);
    assert_objects_intact(&env.store);
}

// ---------------------------------------------------------------------------
// 7. A tampered object is never handed out
// ---------------------------------------------------------------------------

#[test]
fn tampered_objects_are_refused() {
    let env = TestEnv::new();
    let src = env.path("src");
    let data: &[u8] = b"data that will be tampered with\n";
    let script: &[u8] = b"#!/bin/sh\necho tampered later\n";
    small_tree(
        &src,
        "1.0.0",
        &[
            ("assets/data.txt", data, 0o644),
            ("scripts/run.sh", script, 0o755),
        ],
    );
    let d = env.ingest_digest(&src, "1.0.0");
    let a = env.path("a");
    env.checkout_ok(&d, &a, &[]);
    let data_obj = object_path(&env.store, &sha_hex(data), false);
    let script_obj = object_path(&env.store, &sha_hex(script), true);

    // A chmod through the view changes the shared object's mode.
    let through = a.join("assets/data.txt");
    chmod(&through, mode_of(&through) | 0o200);
    assert_eq!(
        mode_of(&data_obj),
        0o644,
        "the object shares the view file's inode"
    );
    // Its bytes still hash right: a checkout re-hashes it, sets its mode
    // back, says so, and hands it out.
    let b = env.path("b");
    let restored = env.checkout_ok(&d, &b, &[])["modes_restored"].clone();
    assert!(
        restored.as_array().unwrap().iter().any(|r| r
            .as_str()
            .unwrap()
            .starts_with(&data_obj.display().to_string())),
        "{restored}"
    );
    assert_eq!(mode_of(&data_obj), 0o444);
    assert_eq!(tmp_siblings(&env.base), Vec::<String>::new());
    // So does the shared view.
    chmod(&through, 0o644);
    assert_ok(&env.run(["path", d.as_str()]));
    assert_eq!(mode_of(&data_obj), 0o444);

    // Truncation through the view (made writable first, then read-only again).
    let through = a.join("scripts/run.sh");
    chmod(&through, 0o755);
    fs::OpenOptions::new()
        .write(true)
        .open(&through)
        .unwrap()
        .set_len(3)
        .unwrap();
    chmod(&through, 0o555);
    assert_eq!(fs::metadata(&script_obj).unwrap().len(), 3);
    let c = env.path("c");
    let err = assert_exit(&env.checkout(&d, &c, &[]), 1);
    assert!(
        err.contains(&script_obj.display().to_string()),
        "message must name the object: {err}"
    );
    assert!(err.contains("cestore verify"), "{err}");
    assert!(!exists(&c));
    assert_eq!(tmp_siblings(&env.base), Vec::<String>::new());
    // --json carries the same verdict.
    let out = env.checkout(&d, &c, &[]);
    assert_exit(&out, 1);
    let v = parse_json(&out);
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["kind"], "integrity", "{v}");
    assert!(!exists(&c));
}

// ---------------------------------------------------------------------------
// 8. Concurrent `cestore path`
// ---------------------------------------------------------------------------

#[test]
fn concurrent_path_makes_one_view() {
    let env = TestEnv::new();
    let src = env.path("src");
    let mut extra: Vec<(String, Vec<u8>, u32)> = Vec::new();
    for i in 0..60 {
        extra.push((
            format!("assets/d{}/f{i}.txt", i % 7),
            format!("file {i}\n").into_bytes(),
            0o644,
        ));
    }
    minimal_plugin(&src, "1.0.0");
    write_tree(&src, &extra);
    let d = env.ingest_digest(&src, "1.0.0");
    let files = env.files(&d);

    let children: Vec<_> = (0..8)
        .map(|_| {
            env.cmd(["path", d.as_str(), "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn cestore path")
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect();
    let mut paths = BTreeSet::new();
    let mut created = 0;
    for out in &outs {
        assert_ok(out);
        let v = parse_json(out);
        assert_eq!(v["ok"], true);
        assert_eq!(v["manifest_digest"], d.as_str());
        paths.insert(v["path"].as_str().unwrap().to_string());
        if v["created"] == true {
            created += 1;
        } else {
            assert_eq!(v["created"], false, "{v}");
        }
    }
    assert_eq!(paths.len(), 1, "all must print the same path: {paths:?}");
    assert_eq!(created, 1, "exactly one call makes the view");
    let path = PathBuf::from(paths.into_iter().next().unwrap());
    let views_dir = env.store.join("views");
    assert_eq!(
        path.canonicalize().unwrap(),
        views_dir.join(&d).canonicalize().unwrap()
    );
    let entries: Vec<String> = fs::read_dir(&views_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, vec![d.clone()]);
    let tmp: Vec<String> = fs::read_dir(env.store.join("tmp"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(tmp, Vec::<String>::new(), "tmp/ must be empty afterwards");
    let views = env.views(&d);
    assert_eq!(views.len(), 1, "{views:?}");
    assert_eq!(views[0].1, "shared");
    assert_view_is(&path, &files);
    // A later call finds it.
    let v = env.json(["path", d.as_str(), "--json"]);
    assert_eq!(v["created"], false);
    assert_eq!(env.views(&d).len(), 1);
}

// ---------------------------------------------------------------------------
// 9. Atomic publication
// ---------------------------------------------------------------------------

#[test]
fn checkout_publishes_atomically() {
    let (env, src) = util::with_plugin("src", "1.0.0");
    let mut extra: Vec<(String, Vec<u8>, u32)> = Vec::new();
    for i in 0..1200 {
        extra.push((
            format!("assets/g{}/h{}/f{i}.txt", i % 13, i % 5),
            format!("file number {i}\n").into_bytes(),
            if i % 9 == 0 { 0o755 } else { 0o644 },
        ));
    }
    write_tree(&src, &extra);
    let d = env.ingest_digest(&src, "1.0.0");
    let files = env.files(&d);
    let parent = env.path("out");
    fs::create_dir(&parent).unwrap();

    // While a checkout runs, DEST is either absent or complete.
    let dest = parent.join("view");
    let mut child = env
        .cmd(["checkout", d.as_str()])
        .arg(&dest)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn checkout");
    let mut saw_tmp = false;
    let mut saw_dest_running = false;
    let mut checked = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let done = child.try_wait().expect("try_wait").is_some();
        if !tmp_siblings(&parent).is_empty() {
            saw_tmp = true;
        }
        if !checked && exists(&dest) {
            // The first sight of DEST: it must already be whole and frozen.
            checked = true;
            saw_dest_running = !done;
            assert_eq!(mode_of(&dest), 0o555, "a published view is already frozen");
            let n = entries_under(&dest)
                .values()
                .filter(|n| matches!(n, Node::File { .. }))
                .count();
            assert_eq!(n, files.len(), "a published view is complete");
        }
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "checkout did not finish");
        std::thread::sleep(Duration::from_micros(200));
    }
    let out = child.wait_with_output().unwrap();
    assert_ok(&out);
    eprintln!("checkout_publishes_atomically: saw the temporary sibling: {saw_tmp}; saw DEST before exit: {saw_dest_running}");
    assert_view_is(&dest, &files);
    assert_eq!(
        tmp_siblings(&parent),
        Vec::<String>::new(),
        "no temporary sibling after success"
    );

    // A checkout refused for integrity leaves neither DEST nor a sibling.
    let victim = files.iter().find(|f| f.size > 0 && !f.executable).unwrap();
    let obj = object_path(&env.store, &victim.sha256, false);
    let good = fs::read(&obj).unwrap();
    chmod(&obj, 0o644);
    fs::write(&obj, &good[..good.len() - 1]).unwrap();
    chmod(&obj, 0o444);
    let dest2 = parent.join("view2");
    assert_exit(&env.checkout(&d, &dest2, &[]), 1);
    assert!(!exists(&dest2));
    assert_eq!(tmp_siblings(&parent), Vec::<String>::new());
    chmod(&obj, 0o644);
    fs::write(&obj, &good).unwrap();
    chmod(&obj, 0o444);

    // A checkout that fails half-way (a hard link refused across filesystems)
    // removes its temporary tree.
    if let Ok(other) = OtherFs::find(&env.base) {
        let p = other.dir();
        let dest3 = p.join("view3");
        assert_exit(&env.checkout(&d, &dest3, &["--method", "hardlink"]), 6);
        assert!(!exists(&dest3));
        assert_eq!(tmp_siblings(&p), Vec::<String>::new());
    }
    // A checkout to an existing DEST leaves the other tree alone.
    let err = assert_exit(&env.checkout(&d, &dest, &[]), 6);
    assert!(err.contains("exists"), "{err}");
    assert_eq!(tmp_siblings(&parent), Vec::<String>::new());
    assert_eq!(env.views(&d).len(), 1);

    // Four checkouts racing for one DEST: exactly one wins, the others are
    // refused (exit 6) and leave nothing behind.
    let race = parent.join("race");
    let children: Vec<_> = (0..4)
        .map(|_| {
            let mut checkout = env.cmd(["checkout", d.as_str()]);
            checkout.arg(&race).arg("--json");
            util::spawn_piped(&mut checkout, "spawn checkout")
        })
        .collect();
    let codes: Vec<Option<i32>> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait").status.code())
        .collect();
    assert_eq!(
        codes.iter().filter(|c| **c == Some(0)).count(),
        1,
        "{codes:?}"
    );
    assert_eq!(
        codes.iter().filter(|c| **c == Some(6)).count(),
        3,
        "{codes:?}"
    );
    assert_view_is(&race, &files);
    assert_eq!(tmp_siblings(&parent), Vec::<String>::new());
    let recorded: Vec<_> = env
        .views(&d)
        .into_iter()
        .filter(|(p, _)| p.ends_with("/race"))
        .collect();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    // No checkout marker is left in the store either.
    assert_eq!(fs::read_dir(env.store.join("tmp")).unwrap().count(), 0);
}

// ---------------------------------------------------------------------------
// 10. Bad requests
// ---------------------------------------------------------------------------

#[test]
fn bad_requests() {
    let (env, _, d) = util::plugin_store("src", "1.0.0");

    // DEST exists: a directory, a file, a dangling symlink.
    let dir = env.path("exists-dir");
    write(&dir.join("mine.txt"), "mine\n");
    let err = assert_exit(&env.checkout(&d, &dir, &[]), 6);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(fs::read(dir.join("mine.txt")).unwrap(), b"mine\n");
    let file = env.path("exists-file");
    write(&file, "x");
    assert_exit(&env.checkout(&d, &file, &[]), 6);
    assert_eq!(fs::read(&file).unwrap(), b"x");
    let link = env.path("exists-link");
    std::os::unix::fs::symlink(env.path("nowhere"), &link).unwrap();
    assert_exit(&env.checkout(&d, &link, &[]), 6);
    assert!(!exists(&env.path("nowhere")));

    // DEST inside the store, directly or through a symlinked parent.
    for inside in [
        env.store.join("my-view"),
        env.store.join("views/my-view"),
        env.store.join("objects/ab/v"),
    ] {
        let err = assert_exit(&env.checkout(&d, &inside, &[]), 6);
        assert!(err.contains("inside the store"), "{err}");
        assert!(!exists(&inside));
    }
    let store_link = env.path("store-link");
    std::os::unix::fs::symlink(&env.store, &store_link).unwrap();
    assert_exit(&env.checkout(&d, &store_link.join("sneaky"), &[]), 6);
    assert!(!exists(&env.store.join("sneaky")));

    // Unknown digest, and a prefix nothing matches.
    let unknown = if d.starts_with('0') {
        "1".repeat(64)
    } else {
        "0".repeat(64)
    };
    let err = assert_exit(&env.checkout(&unknown, &env.path("u1"), &[]), 4);
    assert!(err.contains(&unknown), "{err}");
    assert!(!exists(&env.path("u1")));
    assert_exit(&env.checkout(&unknown[..6], &env.path("u2"), &[]), 4);
    // Not a digest at all.
    assert_exit(&env.checkout("not-hex", &env.path("u3"), &[]), 2);
    // DEST's parent does not exist.
    assert_exit(&env.checkout(&d, &env.path("no/such/parent/v"), &[]), 4);

    // An ambiguous prefix: two digests that share their first four hex digits.
    let (prefix, one, two) = ingest_sharing_four_digits(&env, "1.0.1", "1.0.2");
    let dest = env.path("ambiguous");
    let err = assert_exit(&env.checkout(&prefix, &dest, &[]), 5);
    assert!(err.contains(&one) && err.contains(&two), "{err}");
    assert!(!exists(&dest));
    // A longer prefix that tells them apart works.
    let n = (1..64).find(|&n| one[..n] != two[..n]).unwrap();
    env.checkout_ok(&one[..n], &dest, &[]);
    assert_eq!(tmp_siblings(&env.base), Vec::<String>::new());
}

// ---------------------------------------------------------------------------
// Unprivileged `cestore path`
// ---------------------------------------------------------------------------

/// `cestore path` as an ordinary user. Runs only as root (it drops to uid
/// 65534 with `setpriv`).
#[test]
fn path_works_for_an_unprivileged_user() {
    let Some((env, src)) = util::root_env_with_plugin("path_works_for_an_unprivileged_user") else {
        return;
    };
    util::chown(&["-R"], "65534:65534", &env.base);
    let as_nobody = |args: &[&OsStr]| -> Output {
        let mut setpriv = Command::new("setpriv");
        setpriv.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        util::wrapped(setpriv, &env.store, args)
            .output()
            .expect("run setpriv")
    };
    let out = as_nobody(&[
        OsStr::new("ingest"),
        src.as_os_str(),
        OsStr::new("--version"),
        OsStr::new("1.0.0"),
        OsStr::new("--json"),
    ]);
    assert_ok(&out);
    let d = parse_json(&out)["provenance"]["manifest_digest"]
        .as_str()
        .unwrap()
        .to_string();
    let out = as_nobody(&[OsStr::new("path"), OsStr::new(&d), OsStr::new("--json")]);
    assert_ok(&out);
    assert_eq!(parse_json(&out)["created"], true);
}

/// A release's files beside the minimal plugin: nested, and executable.
const SPARE_FILES: &[(&str, &[u8], u32)] = &[
    ("assets/a.txt", b"alpha\n", 0o644),
    ("assets/deep/b.txt", b"bravo\n", 0o644),
    ("scripts/c.sh", b"#!/bin/sh\n", 0o755),
];

#[test]
fn a_discarded_view_serves_the_next_checkout_whole() {
    let env = TestEnv::new();
    let d = small_store(
        &env,
        &[
            ("scripts/a.sh", b"#!/bin/sh\n", 0o755),
            ("assets/deep/er/b.bin", &random_bytes(7, 10_000), 0o644),
            ("skills/ce-work/empty.md", b"", 0o644),
        ],
    );
    let files = env.files(&d);
    // A plain discard deletes the view's files: only --spare keeps it.
    let plain = env.path("plain");
    env.checkout_ok(&d, &plain, &[]);
    let report = parse_json(&env.discard(&plain, None));
    assert_eq!(report["spare"], false, "{report}");
    assert!(!exists(&plain) && spares(&env.store, &d).is_empty());

    let first = env.path("first");
    let report = env.checkout_ok(&d, &first, &[]);
    assert_eq!(report["spare"], false, "{report}");
    let root_ino = ino(&first);

    let out = env.discard_spare(&first);
    assert_ok(&out);
    let report = parse_json(&out);
    assert_eq!(
        (report["removed"].clone(), report["spare"].clone()),
        (true.into(), true.into()),
        "{report}"
    );
    assert!(!exists(&first) && env.views(&d).is_empty());
    assert_eq!(spares(&env.store, &d).len(), 1);

    let second = env.path("second");
    let report = env.checkout_ok(&d, &second, &[]);
    assert_eq!(report["spare"], true, "{report}");
    assert_eq!(
        report["linked"].as_u64(),
        Some(files.iter().filter(|f| f.size > 0).count() as u64)
    );
    assert_eq!(ino(&second), root_ino, "the spare's root is the view's");
    assert_view_is(&second, &files);
    for f in files.iter().filter(|f| f.size > 0) {
        assert_eq!(
            ino(&second.join(&f.path)),
            ino(&object_path(&env.store, &f.sha256, f.executable))
        );
    }
    assert!(spares(&env.store, &d).is_empty(), "the spare was taken");
    assert_eq!(
        env.views(&d),
        vec![(second.display().to_string(), "checkout".into())]
    );
    let out = env.run(["verify", "--tree", second.to_str().unwrap(), &d]);
    assert_ok(&out);

    // Copies are never kept: a spare is hard links or nothing.
    let copy = env.path("copy");
    env.checkout_ok(&d, &copy, &["--method", "copy"]);
    let report = parse_json(&env.discard_spare(&copy));
    assert_eq!(report["spare"], false, "{report}");
    assert!(!exists(&copy));
}

#[test]
fn a_spare_changed_while_it_was_a_view_is_never_handed_out() {
    let env = TestEnv::new();
    let src = env.path("src");
    let empty: &[(&str, &[u8], u32)] = &[("skills/ce-work/empty.md", b"", 0o644)];
    small_tree(&src, "1.0.0", &[SPARE_FILES, empty].concat());
    let d = env.ingest_digest(&src, "1.0.0");
    let files = env.files(&d);
    type Tamper = fn(&Path, &Path);
    let tampers: &[(&str, Tamper)] = &[
        ("a file added", |v, _| {
            chmod(&v.join("assets"), 0o755);
            write(&v.join("assets/extra.txt"), "extra");
            chmod(&v.join("assets"), 0o555);
        }),
        ("a file removed", |v, _| {
            chmod(&v.join("assets/deep"), 0o755);
            fs::remove_file(v.join("assets/deep/b.txt")).unwrap();
            chmod(&v.join("assets/deep"), 0o555);
        }),
        ("a file replaced by other bytes of its size", |v, _| {
            chmod(&v.join("assets"), 0o755);
            fs::remove_file(v.join("assets/a.txt")).unwrap();
            write(&v.join("assets/a.txt"), "ALPHA\n");
            chmod(&v.join("assets/a.txt"), 0o444);
            chmod(&v.join("assets"), 0o555);
        }),
        ("an empty file written", |v, _| {
            chmod(&v.join("skills/ce-work/empty.md"), 0o644);
            write(&v.join("skills/ce-work/empty.md"), "now full");
            chmod(&v.join("skills/ce-work/empty.md"), 0o444);
        }),
        ("an empty file left writable", |v, _| {
            chmod(&v.join("skills/ce-work/empty.md"), 0o644)
        }),
        ("an empty file linked from outside the view", |v, _| {
            let outside =
                v.with_file_name(format!("{}-link", v.file_name().unwrap().to_string_lossy()));
            fs::hard_link(v.join("skills/ce-work/empty.md"), outside).unwrap();
        }),
        ("a directory left writable", |v, _| {
            chmod(&v.join("assets/deep"), 0o755)
        }),
        ("a file swapped for a symlink", |v, _| {
            chmod(&v.join("scripts"), 0o755);
            fs::remove_file(v.join("scripts/c.sh")).unwrap();
            std::os::unix::fs::symlink("/bin/sh", v.join("scripts/c.sh")).unwrap();
            chmod(&v.join("scripts"), 0o555);
        }),
        (
            "its object replaced since (a repair gives a new inode)",
            |_, store| {
                let object = store.join("objects");
                let path = fs::read_dir(&object)
                    .unwrap()
                    .flat_map(|s| fs::read_dir(s.unwrap().path()).unwrap())
                    .map(|e| e.unwrap().path())
                    .find(|p| fs::read(p).is_ok_and(|b| b == b"alpha\n"))
                    .expect("the object of assets/a.txt");
                let bytes = fs::read(&path).unwrap();
                let shard = path.parent().unwrap();
                chmod(shard, 0o755);
                fs::remove_file(&path).unwrap();
                write(&path, bytes);
                chmod(&path, 0o444);
            },
        ),
    ];
    for (i, (what, tamper)) in tampers.iter().enumerate() {
        let view = env.path(&format!("view{i}"));
        env.checkout_ok(&d, &view, &[]);
        tamper(&view, &env.store);
        let report = parse_json(&env.discard_spare(&view));
        assert_eq!(report["removed"], true, "{what}: {report}");
        let next = env.path(&format!("next{i}"));
        let report = env.checkout_ok(&d, &next, &[]);
        assert_eq!(
            report["spare"], false,
            "{what}: a changed spare was handed out: {report}"
        );
        assert_view_is(&next, &files);
        assert!(
            spares(&env.store, &d).is_empty(),
            "{what}: the changed spare is removed"
        );
        assert!(
            tmp_siblings(&env.base).is_empty(),
            "{what}: nothing left beside the view"
        );
        assert_ok(&env.discard_spare(&next));
        // The sound spare the last discard kept serves the next checkout.
        let again = env.path(&format!("again{i}"));
        assert_eq!(env.checkout_ok(&d, &again, &[])["spare"], true, "{what}");
        assert_view_is(&again, &files);
        assert_ok(&env.discard_spare(&again));
    }
    assert_ok(&env.run(["verify"]));
}

#[test]
fn a_spare_whose_empty_file_or_directory_changed_owner_is_never_handed_out() {
    if util::skip_unless_root(
        "a_spare_whose_empty_file_or_directory_changed_owner_is_never_handed_out",
        "giving a view's files to another user needs root",
    ) {
        return;
    }
    let env = TestEnv::new();
    let src = env.path("src");
    let empty: &[(&str, &[u8], u32)] = &[
        ("skills/ce-work/empty.md", b"", 0o644),
        ("scripts/empty.sh", b"", 0o755),
    ];
    small_tree(&src, "1.0.0", &[SPARE_FILES, empty].concat());
    let d = env.ingest_digest(&src, "1.0.0");
    let files = env.files(&d);
    let me = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    let chown = |path: &Path, uid: Option<u32>, gid: Option<u32>| {
        std::os::unix::fs::lchown(path, uid, gid).expect("chown");
    };
    type Tamper<'a> = &'a dyn Fn(&Path);
    let tampers: &[(&str, Tamper)] = &[
        // `chown nobody`: another user could then make the file writable
        // and fill it in every run the spare is handed to.
        ("an empty file given to another user", &|v| {
            chown(&v.join("skills/ce-work/empty.md"), Some(65534), None)
        }),
        ("an executable empty file given to another user", &|v| {
            chown(&v.join("scripts/empty.sh"), Some(65534), None)
        }),
        ("an empty file given to another group", &|v| {
            chown(&v.join("skills/ce-work/empty.md"), None, Some(65534))
        }),
        ("a directory given to another group", &|v| {
            chown(&v.join("assets/deep"), None, Some(65534))
        }),
        ("a directory given to another user", &|v| {
            chown(&v.join("skills"), Some(65534), None)
        }),
    ];
    for (i, (what, tamper)) in tampers.iter().enumerate() {
        let view = env.path(&format!("view{i}"));
        env.checkout_ok(&d, &view, &[]);
        tamper(&view);
        let report = parse_json(&env.discard_spare(&view));
        assert_eq!(report["removed"], true, "{what}: {report}");
        assert_eq!(
            spares(&env.store, &d).len(),
            1,
            "{what}: kept, to be checked"
        );
        let next = env.path(&format!("next{i}"));
        let report = env.checkout_ok(&d, &next, &[]);
        assert_eq!(report["spare"], false, "{what}: handed out: {report}");
        assert!(spares(&env.store, &d).is_empty(), "{what}: not removed");
        assert_view_is(&next, &files);
        // The fresh view's empty files and directories are the store user's.
        for rel in [
            "skills/ce-work/empty.md",
            "scripts/empty.sh",
            "skills",
            "assets/deep",
        ] {
            let st = fs::symlink_metadata(next.join(rel)).unwrap();
            assert_eq!((st.uid(), st.gid()), me, "{what}: owner of {rel}");
        }
        assert_eq!(nlink(&next.join("skills/ce-work/empty.md")), 1);
        assert!(tmp_siblings(&env.base).is_empty(), "{what}");
        // A sound spare still serves.
        assert_eq!(parse_json(&env.discard_spare(&next))["spare"], true);
        let again = env.path(&format!("again{i}"));
        assert_eq!(env.checkout_ok(&d, &again, &[])["spare"], true, "{what}");
        assert_ok(&env.discard(&again, None));
    }
    assert_ok(&env.run(["verify"]));
}

#[test]
fn rm_and_gc_remove_the_spares_of_a_forgotten_snapshot() {
    let env = TestEnv::new();
    let src = env.path("src");
    small_tree(&src, "1.0.0", &[("assets/a.txt", b"alpha\n", 0o644)]);
    let d = env.ingest_digest(&src, "1.0.0");
    let view = env.path("view");
    env.checkout_ok(&d, &view, &[]);
    assert_eq!(parse_json(&env.discard_spare(&view))["spare"], true);
    let kinds = |verify: &Value| -> Vec<String> {
        verify["problems"]
            .as_array()
            .expect("problems")
            .iter()
            .map(|p| p["kind"].as_str().expect("kind").to_string())
            .collect()
    };
    // A recorded snapshot's spares are not garbage.
    let verify = env.json(["verify", "--json"]);
    assert!(kinds(&verify).is_empty(), "{verify}");
    let spare_dir = env.store.join("spare").join(&d);
    assert!(exists(&spare_dir));
    // rm takes the snapshot's spares with it.
    assert_ok(&env.run(["rm", &d]));
    assert!(!exists(&spare_dir));
    // What rm could not take (a crash between its commit and the removal)
    // is garbage that gc removes.
    let kept = env.path("kept");
    let d = env.ingest_digest(&src, "1.0.0");
    env.checkout_ok(&d, &kept, &[]);
    assert_eq!(parse_json(&env.discard_spare(&kept))["spare"], true);
    let aside = env.path("aside");
    fs::rename(&spare_dir, &aside).unwrap();
    assert_ok(&env.run(["rm", &d]));
    fs::rename(&aside, &spare_dir).unwrap();
    let verify = env.json(["verify", "--json"]);
    assert!(
        kinds(&verify).contains(&"orphan-spare".to_string()),
        "{verify}"
    );
    let gc = env.json(["gc", "--json"]);
    assert_eq!(
        gc["spares"],
        serde_json::json!([spare_dir.display().to_string()]),
        "{gc}"
    );
    assert!(!exists(&spare_dir));
    let verify = env.json(["verify", "--json"]);
    assert!(kinds(&verify).is_empty(), "{verify}");
}

/// `cestore stage --json ARGS` for a source, checked out at `dest`.
fn stage_args<'a>(src: &'a Path, version: &'a str, dest: &'a Path) -> Vec<&'a OsStr> {
    let mut args: Vec<&OsStr> = "stage --json --arm ce_review --plugin-dir"
        .split(' ')
        .map(OsStr::new)
        .collect();
    args.extend([src.as_os_str(), OsStr::new("--plugin-version")]);
    args.extend([OsStr::new(version), OsStr::new("--dest"), dest.as_os_str()]);
    args
}

/// The names under the store's `tmp/`: work directories left behind.
fn store_tmp(store: &Path) -> Vec<String> {
    fs::read_dir(store.join("tmp"))
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_stage_takes_the_spare_of_its_sources_last_snapshot_only_when_the_walk_gives_it() {
    let env = TestEnv::new();
    let src = env.path("src");
    small_tree(&src, "1.0.0", SPARE_FILES);
    let stage = |dest: &Path| -> Value {
        let out = env.run(stage_args(&src, "1.0.0", dest));
        assert_ok(&out);
        parse_json(&out)
    };
    let first = env.path("first");
    let d1 = stage(&first)["provenance"]["manifest_digest"]
        .as_str()
        .unwrap()
        .to_string();
    let root = ino(&first);
    assert_eq!(parse_json(&env.discard_spare(&first))["spare"], true);

    // Unchanged source: the spare claimed beside the walk is the view.
    let second = env.path("second");
    assert_eq!(stage(&second)["provenance"]["manifest_digest"], d1.as_str());
    assert_eq!(ino(&second), root, "the spare served the stage");
    assert_view_is(&second, &env.files(&d1));
    assert!(spares(&env.store, &d1).is_empty());
    assert_ok(&env.run(["verify", "--tree", second.to_str().unwrap(), &d1]));
    assert_eq!(parse_json(&env.discard_spare(&second))["spare"], true);

    // A changed source gives another snapshot: the claimed spare goes back.
    chmod(&src.join("assets"), 0o755);
    write(&src.join("assets/a.txt"), "ALPHA, changed\n");
    let third = env.path("third");
    let d2 = stage(&third)["provenance"]["manifest_digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(d1, d2);
    assert_view_is(&third, &env.files(&d2));
    assert_ne!(ino(&third), root);
    let kept = spares(&env.store, &d1);
    assert_eq!(kept.len(), 1, "the spare of {d1} went back");
    assert_eq!(ino(&kept[0]), root);
    assert_eq!(parse_json(&env.discard_spare(&third))["spare"], true);
    let d2_spare = ino(&spares(&env.store, &d2)[0]);

    // A rejected source changes nothing: the spare claimed for it goes back.
    std::os::unix::fs::symlink("/etc/passwd", src.join("assets/link")).unwrap();
    let fourth = env.path("fourth");
    let out = env.run(stage_args(&src, "1.0.0", &fourth));
    assert_exit(&out, 3);
    assert_eq!(parse_json(&out)["error"]["rule"], "symlink");
    assert!(!exists(&fourth) && tmp_siblings(&env.base).is_empty());
    let back = spares(&env.store, &d2);
    assert_eq!(back.len(), 1, "the spare of {d2} went back");
    assert_eq!(ino(&back[0]), d2_spare);
    assert_eq!(spares(&env.store, &d1).len(), 1);
    assert!(
        store_tmp(&env.store).is_empty(),
        "{:?}",
        store_tmp(&env.store)
    );
    assert_ok(&env.run(["verify"]));
}

/// Starts `cestore stage --hold` and reads its first object.
fn held(env: &TestEnv, src: &Path, dest: &Path) -> (std::process::Child, Value) {
    use std::io::BufRead;
    let mut args = stage_args(src, "1.0.0", dest);
    args.push(OsStr::new("--hold"));
    let mut child = env
        .cmd(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start cestore stage --hold");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let staged: Value = serde_json::from_str(&line).expect("the stage's object");
    (child, staged)
}

/// Ends a held stage with `line` (none: the caller's end of input) and
/// returns its exit code and second object.
fn release_held(mut child: std::process::Child, line: Option<&str>) -> (i32, Value) {
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    if let Some(line) = line {
        stdin.write_all(line.as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines().count(),
        1,
        "one object after the release: {text}"
    );
    (
        out.status.code().unwrap(),
        serde_json::from_str(&text).unwrap(),
    )
}

#[test]
fn a_held_stage_discards_its_view_when_released_or_when_its_caller_goes() {
    let env = TestEnv::new();
    let src = env.path("src");
    small_tree(&src, "1.0.0", &[("assets/a.txt", b"alpha\n", 0o644)]);
    let view = env.path("view");

    let (child, staged) = held(&env, &src, &view);
    assert_eq!(staged["ok"], true, "{staged}");
    let d = staged["provenance"]["manifest_digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert_view_is(&view, &env.files(&d));
    assert_eq!(env.views(&d).len(), 1);
    // Nothing of the store is held while waiting: gc runs meanwhile.
    assert_ok(&env.run(["gc", "--json"]));
    assert!(exists(&view));
    let (code, discarded) = release_held(child, Some("discard --spare\n"));
    assert_eq!(code, 0);
    assert_eq!(
        (&discarded["removed"], &discarded["spare"]),
        (&Value::Bool(true), &Value::Bool(true)),
        "{discarded}"
    );
    assert!(!exists(&view) && env.views(&d).is_empty());
    assert_eq!(spares(&env.store, &d).len(), 1);

    // The caller's input ends without a line (it died): the view is removed,
    // not kept, since its sandboxes may still be running.
    let (child, _) = held(&env, &src, &view);
    assert!(exists(&view));
    let (code, discarded) = release_held(child, None);
    assert_eq!(code, 0);
    assert_eq!(
        (&discarded["removed"], &discarded["spare"]),
        (&Value::Bool(true), &Value::Bool(false)),
        "{discarded}"
    );
    assert!(!exists(&view) && env.views(&d).is_empty());
    assert!(
        spares(&env.store, &d).is_empty(),
        "the spare was used, none kept"
    );

    // The caller goes before it reads the report: the report cannot be
    // written, so the process removes the view without waiting for a line.
    let mut args = stage_args(&src, "1.0.0", &view);
    args.push(OsStr::new("--hold"));
    let mut child = env
        .cmd(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!exists(&view) && env.views(&d).is_empty());
    assert!(spares(&env.store, &d).is_empty());

    // A rejected release: one error object, nothing held or made.
    std::os::unix::fs::symlink("/etc/passwd", src.join("assets/link")).unwrap();
    let mut args = stage_args(&src, "1.0.0", &view);
    args.push(OsStr::new("--hold"));
    let out = env.cmd(args).stdin(Stdio::null()).output().unwrap();
    assert_exit(&out, 3);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    assert!(!exists(&view) && tmp_siblings(&env.base).is_empty());
    // --hold needs a view of its own to discard.
    let out = env.run([
        "stage",
        "--json",
        "--hold",
        "--arm",
        "ce_review",
        "--digest",
        &d,
    ]);
    assert_exit(&out, 2);
    assert_eq!(parse_json(&out)["error"]["kind"], "usage");
    assert!(store_tmp(&env.store).is_empty());
    assert_ok(&env.run(["verify"]));
}

#[test]
fn a_warm_stage_beside_a_spare_reads_every_file_and_mends_a_damaged_object() {
    let env = TestEnv::new();
    let src = env.path("src");
    small_tree(&src, "1.0.0", SPARE_FILES);
    let stage = |dest: &Path| -> Value {
        let out = env.run(stage_args(&src, "1.0.0", dest));
        assert_ok(&out);
        parse_json(&out)
    };
    let digest = |v: &Value| {
        v["provenance"]["manifest_digest"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let first = env.path("first");
    let d1 = digest(&stage(&first));
    assert_ok(&env.discard_spare(&first));
    let second = env.path("second");
    let warm = stage(&second);
    assert_eq!(digest(&warm), d1, "{warm}");
    assert_eq!(warm["ingest"]["new_objects"], 0, "{warm}");
    assert_ok(&env.discard_spare(&second));
    assert_eq!(spares(&env.store, &d1).len(), 1);
    let damage = |data: &[u8], executable: bool| {
        let object = object_path(&env.store, &sha_hex(data), executable);
        chmod(&object, 0o644);
    };
    // A stage that met a damaged object: it mended that one object, its
    // view is the snapshot, and the spare that linked the object is gone.
    let mended = |report: &Value, view: &Path, d: &str, spare_of: &str| {
        assert_eq!(
            report["ingest"]["repaired"].as_array().map(Vec::len),
            Some(1),
            "{report}"
        );
        assert_view_is(view, &env.files(d));
        assert!(
            spares(&env.store, spare_of).is_empty(),
            "the unsound spare is gone"
        );
    };

    // Another snapshot from the source, and an object damaged meanwhile:
    // the spare linking it fails its check, and the object is mended from
    // the file the stage read.
    chmod(&src.join("assets"), 0o755);
    write(&src.join("assets/a.txt"), "ALPHA, changed\n");
    damage(b"bravo\n", false);
    let third = env.path("third");
    let changed = stage(&third);
    let d2 = digest(&changed);
    assert_ne!(d1, d2);
    mended(&changed, &third, &d2, &d1);
    assert_ok(&env.discard_spare(&third));

    // The same snapshot, its spare linking an object damaged since: the
    // spare fails its check, and the object is mended from the source.
    damage(b"#!/bin/sh\n", true);
    let fourth = env.path("fourth");
    let same = stage(&fourth);
    assert_eq!(digest(&same), d2);
    mended(&same, &fourth, &d2, &d2);
    assert_ok(&env.run(["verify"]));
    assert_ok(&env.run(["verify", "--tree", fourth.to_str().unwrap(), &d2]));
}

/// A [`small_tree`] at `ENV/src`, version 1.0.0, ingested: its digest.
fn small_store(env: &TestEnv, extra: &[(&str, &[u8], u32)]) -> String {
    let src = env.path("src");
    small_tree(&src, "1.0.0", extra);
    env.ingest_digest(&src, "1.0.0")
}
