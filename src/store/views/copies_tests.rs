//! Writable copies on the filesystem at hand (one without reflinks: ext4 or
//! tmpfs) and on a loop-mounted XFS made with `reflink=1`, where root may
//! mount one.

use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::digest::ObjectId;

fn open_rw(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .unwrap()
}

fn reflinks_here(dir: &Path) -> bool {
    let a = dir.join(".probe-a");
    let b = dir.join(".probe-b");
    std::fs::write(&a, b"probe").unwrap();
    let out = open_rw(&b);
    let src = std::fs::File::open(&a).unwrap();
    let ok = rustix::fs::ioctl_ficlone(&out, &src).is_ok();
    std::fs::remove_file(&a).unwrap();
    std::fs::remove_file(&b).unwrap();
    ok
}

/// A store-like `objects/` directory holding `files` (bytes, executable).
fn objects_with(dir: &Path, files: &[(&[u8], bool)]) -> PathBuf {
    let objects = dir.join("objects");
    for (data, exec) in files {
        let key = ObjectKey {
            id: ObjectId::of(data),
            executable: *exec,
        };
        let path = objects.join(key.rel_path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, data).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(key.mode())).unwrap();
    }
    std::fs::create_dir_all(&objects).unwrap();
    objects
}

fn sample_entries() -> Vec<TreeEntry> {
    let mut entries = vec![
        TreeEntry::directory("a"),
        TreeEntry::file_of("a/big.bin", &[7u8; 3000], 0),
        TreeEntry::directory("a/empty"),
        TreeEntry::file_of("a/nothing", b"", 0),
        TreeEntry::directory("a/sub"),
        TreeEntry::file_of("a/sub/run.sh", b"#!/bin/sh\n", 0o755),
        TreeEntry::symlink("a/sub/link", "../big.bin"),
        TreeEntry::file_of("top.txt", b"top\n", 0),
    ];
    crate::profile::tree::sort_entries(&mut entries);
    entries
}

fn sample_objects(dir: &Path) -> PathBuf {
    objects_with(
        dir,
        &[
            (&[7u8; 3000], false),
            (b"#!/bin/sh\n", true),
            (b"top\n", false),
        ],
    )
}

fn copy_sample(
    dir: &Path,
    objects: &Path,
    budget: &mut FallbackBudget,
) -> crate::error::Result<Written> {
    let objects_fd = crate::fsutil::open_dir(rustix::fs::CWD, objects).unwrap();
    let parent = crate::fsutil::open_dir(rustix::fs::CWD, dir).unwrap();
    writable_copy(
        ObjectSource {
            dir: objects_fd.as_fd(),
            path: objects,
        },
        &sample_entries(),
        parent.as_fd(),
        OsStr::new("copy"),
        &dir.join("copy"),
        budget,
        |_| Ok(()),
    )
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn a_filesystem_without_reflinks_copies_within_the_budget() {
    let tmp = tempfile::tempdir().unwrap();
    if reflinks_here(tmp.path()) {
        eprintln!("skipped: the temporary directory's filesystem has reflinks");
        return;
    }
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    std::fs::write(&src, vec![1u8; 5000]).unwrap();
    let out = open_rw(&dst);
    let mut budget = FallbackBudget::new(6000);
    let src_fd = std::fs::File::open(&src).unwrap();
    let got = clone_or_copy(src_fd.as_fd(), out.as_fd(), 5000, &mut budget).unwrap();
    assert_eq!(got, Cloned::Copied(5000));
    assert_eq!(budget.used(), 5000);
    assert_eq!(std::fs::read(&dst).unwrap(), vec![1u8; 5000]);
    // The next 5000 bytes would pass the bound: refused before writing.
    let dst2 = tmp.path().join("dst2");
    let out2 = open_rw(&dst2);
    match clone_or_copy(src_fd.as_fd(), out2.as_fd(), 5000, &mut budget) {
        Err(CopyFault::OverBudget {
            size: 5000,
            remaining: 1000,
            limit: 6000,
        }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::metadata(&dst2).unwrap().len(), 0);
    assert_eq!(budget.used(), 5000);
}

#[test]
fn a_source_longer_or_shorter_than_its_entry_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    if reflinks_here(tmp.path()) {
        eprintln!("skipped: the temporary directory's filesystem has reflinks");
        return;
    }
    let src = tmp.path().join("src");
    std::fs::write(&src, b"0123456789").unwrap();
    let src_fd = std::fs::File::open(&src).unwrap();
    for (i, size) in [4u64, 20].into_iter().enumerate() {
        let out = open_rw(&tmp.path().join(format!("d{i}")));
        let mut budget = FallbackBudget::default();
        match clone_or_copy(src_fd.as_fd(), out.as_fd(), size, &mut budget) {
            Err(CopyFault::Changed { .. }) => {}
            other => panic!("{size}: {other:?}"),
        }
    }
}

#[test]
fn a_writable_copy_has_every_kind_of_entry_at_its_modes() {
    let tmp = tempfile::tempdir().unwrap();
    let objects = sample_objects(tmp.path());
    let mut budget = FallbackBudget::default();
    let written = copy_sample(tmp.path(), &objects, &mut budget).unwrap();
    let copy = tmp.path().join("copy");
    assert_eq!(written.reflinked + written.copied, 4);
    assert_eq!(written.directories, 3);
    assert_eq!(written.symlinks, 1);
    assert_eq!(mode_of(&copy), 0o700);
    for dir in ["a", "a/empty", "a/sub"] {
        assert_eq!(mode_of(&copy.join(dir)), 0o700, "{dir}");
    }
    assert_eq!(std::fs::read_dir(copy.join("a/empty")).unwrap().count(), 0);
    for file in ["a/big.bin", "a/nothing", "a/sub/run.sh", "top.txt"] {
        assert_eq!(mode_of(&copy.join(file)), 0o600, "{file}");
    }
    assert_eq!(std::fs::read(copy.join("a/big.bin")).unwrap(), [7u8; 3000]);
    assert_eq!(
        std::fs::read(copy.join("a/sub/run.sh")).unwrap(),
        b"#!/bin/sh\n"
    );
    assert_eq!(std::fs::read(copy.join("a/nothing")).unwrap(), b"");
    assert_eq!(
        std::fs::read_link(copy.join("a/sub/link")).unwrap(),
        Path::new("../big.bin")
    );
    // A writable copy shares no inode with the objects.
    let object = std::fs::metadata(
        objects.join(
            ObjectKey {
                id: ObjectId::of(&[7u8; 3000]),
                executable: false,
            }
            .rel_path(),
        ),
    )
    .unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_ne!(
        std::fs::metadata(copy.join("a/big.bin")).unwrap().ino(),
        object.ino()
    );
    std::fs::write(copy.join("a/big.bin"), b"changed").unwrap();
    assert_eq!(object.len(), 3000);
    // Nothing but the copy is left beside it.
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

/// The temporary directory's filesystem, and tmpfs (`/dev/shm`) where there is one.
fn places_without_reflinks() -> Vec<tempfile::TempDir> {
    let mut out = vec![tempfile::tempdir().unwrap()];
    if let Ok(shm) = tempfile::tempdir_in("/dev/shm") {
        out.push(shm);
    }
    out.retain(|d| {
        let has = reflinks_here(d.path());
        if has {
            eprintln!(
                "skipped {}: its filesystem has reflinks",
                d.path().display()
            );
        }
        !has
    });
    out
}

#[test]
fn a_copy_over_its_budget_is_refused_and_leaves_nothing() {
    for tmp in places_without_reflinks() {
        over_budget_in(&tmp);
    }
}

fn over_budget_in(tmp: &tempfile::TempDir) {
    let objects = sample_objects(tmp.path());
    let mut budget = FallbackBudget::new(3000 + 10 + 3);
    let err = copy_sample(tmp.path(), &objects, &mut budget).unwrap_err();
    assert_eq!(
        err.to_string(),
        "task asset filesystem cannot reflink the snapshot and the buffered fallback limit would be exceeded"
    );
    assert_eq!(err.rule(), Some("task-asset-fallback-limit"));
    assert_eq!(err.exit_code(), 3);
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["objects"], "nothing is left beside the objects");
    // The exact sum passes.
    let mut budget = FallbackBudget::new(3000 + 10 + 4);
    let written = copy_sample(tmp.path(), &objects, &mut budget).unwrap();
    assert_eq!(written.bytes_copied, 3014);
    assert_eq!(budget.remaining(), 0);
}

#[test]
fn a_missing_or_wrong_object_is_refused_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let objects = objects_with(tmp.path(), &[(&[7u8; 3000], false), (b"top\n", false)]);
    let err = copy_sample(tmp.path(), &objects, &mut FallbackBudget::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "task asset snapshot file changed: a/sub/run.sh"
    );
    assert_eq!(err.exit_code(), 1);
    assert!(!tmp.path().join("copy").exists());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
}

/// A loop-mounted XFS with reflinks, unmounted (and its image removed) on drop.
pub(crate) struct Xfs {
    dir: tempfile::TempDir,
}

impl Xfs {
    /// Mounts one, or says why it cannot.
    pub(crate) fn mount() -> Result<Xfs, String> {
        if !rustix::process::geteuid().is_root() {
            return Err("mounting needs root".into());
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let image = dir.path().join("x.img");
        let run = |cmd: &mut Command| -> Result<(), String> {
            match cmd.output() {
                Ok(out) if out.status.success() => Ok(()),
                Ok(out) => Err(format!(
                    "{cmd:?}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
                Err(e) => Err(format!("{cmd:?}: {e}")),
            }
        };
        run(Command::new("truncate").arg("-s").arg("300M").arg(&image))?;
        run(Command::new("mkfs.xfs")
            .args(["-q", "-m", "reflink=1"])
            .arg(&image))?;
        std::fs::create_dir(dir.path().join("mnt")).map_err(|e| e.to_string())?;
        run(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(dir.path().join("mnt")))?;
        Ok(Xfs { dir })
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for Xfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.path()).status();
    }
}

/// Whether `filefrag -v` reports a file's extents as shared.
pub(crate) fn extents_shared(path: &Path) -> bool {
    let out = Command::new("filefrag")
        .arg("-v")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("shared")
}

#[test]
fn on_xfs_every_file_is_a_reflink_sharing_its_object_s_extents() {
    let xfs = match Xfs::mount() {
        Ok(x) => x,
        Err(why) => {
            eprintln!("skipped: no XFS with reflinks could be mounted: {why}");
            return;
        }
    };
    let root = xfs.path();
    let objects = sample_objects(&root);
    // Even a budget of nothing serves: no byte is copied.
    let mut budget = FallbackBudget::new(0);
    let written = copy_sample(&root, &objects, &mut budget).unwrap();
    assert_eq!(written.reflinked, 3, "{written:?}");
    assert_eq!(written.copied, 1, "the empty file: {written:?}");
    assert_eq!(written.bytes_copied, 0);
    let copy = root.join("copy");
    assert!(extents_shared(&copy.join("a/big.bin")));
    assert_eq!(std::fs::read(copy.join("a/big.bin")).unwrap(), [7u8; 3000]);
    assert_eq!(mode_of(&copy.join("a/big.bin")), 0o600);
    // Writing the copy leaves the object as it was.
    std::fs::write(copy.join("a/big.bin"), b"changed").unwrap();
    let object = objects.join(
        ObjectKey {
            id: ObjectId::of(&[7u8; 3000]),
            executable: false,
        }
        .rel_path(),
    );
    assert_eq!(std::fs::read(object).unwrap(), [7u8; 3000]);
}

#[test]
fn of_many_failing_files_the_first_in_order_is_named_every_time() {
    // Files are copied by several threads; the refusal must still name the
    // first failing file in the entries' order, as a copy in turn would.
    let tmp = tempfile::tempdir().unwrap();
    let datas: Vec<Vec<u8>> = (0..300u32)
        .map(|i| {
            format!("file {i}\n")
                .repeat(1 + (i as usize % 7) * 50)
                .into_bytes()
        })
        .collect();
    let missing = [97usize, 150, 151, 299];
    let present: Vec<(&[u8], bool)> = datas
        .iter()
        .enumerate()
        .filter(|(i, _)| !missing.contains(i))
        .map(|(_, d)| (d.as_slice(), false))
        .collect();
    let objects = objects_with(tmp.path(), &present);
    let mut entries = vec![TreeEntry::directory("d")];
    entries.extend(
        datas
            .iter()
            .enumerate()
            .map(|(i, d)| TreeEntry::file_of(format!("d/f{i:03}"), d, 0)),
    );
    crate::profile::tree::sort_entries(&mut entries);
    let objects_fd = crate::fsutil::open_dir(rustix::fs::CWD, &objects).unwrap();
    let parent = crate::fsutil::open_dir(rustix::fs::CWD, tmp.path()).unwrap();
    for round in 0..20 {
        let mut budget = FallbackBudget::default();
        let err = writable_copy(
            ObjectSource {
                dir: objects_fd.as_fd(),
                path: &objects,
            },
            &entries,
            parent.as_fd(),
            OsStr::new("copy"),
            &tmp.path().join("copy"),
            &mut budget,
            |_| Ok(()),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "task asset snapshot file changed: d/f097",
            "round {round}"
        );
        assert!(!tmp.path().join("copy").exists());
    }
    // With every object present, the copy holds every file's bytes.
    let all: Vec<(&[u8], bool)> = datas.iter().map(|d| (d.as_slice(), false)).collect();
    let objects = objects_with(tmp.path(), &all);
    let mut budget = FallbackBudget::default();
    let written = writable_copy(
        ObjectSource {
            dir: objects_fd.as_fd(),
            path: &objects,
        },
        &entries,
        parent.as_fd(),
        OsStr::new("copy"),
        &tmp.path().join("copy"),
        &mut budget,
        |_| Ok(()),
    )
    .unwrap();
    assert_eq!(written.reflinked + written.copied, 300);
    assert_eq!(budget.used(), written.bytes_copied);
    for (i, d) in datas.iter().enumerate() {
        let got = std::fs::read(tmp.path().join(format!("copy/d/f{i:03}"))).unwrap();
        assert_eq!(&got, d);
        assert_eq!(mode_of(&tmp.path().join(format!("copy/d/f{i:03}"))), 0o600);
    }
}
