//! Views: frozen read-only trees of a snapshot, made by hard links to objects.
//!
//! A view is built in a temporary directory beside its destination and
//! published with one `rename`, so no half-built view is ever visible. Each
//! file is a hard link to its object (the `.x` object when executable), or a
//! copy where a link cannot serve (`EXDEV`, `EMLINK`, `EPERM`); a zero-length
//! file is always a fresh file, never a link. Directories end at 0555, files
//! at 0444 or 0555, as the reference's staged snapshot.
//!
//! # Limits
//!
//! A hard link shares its inode with the store: a `chmod` or a write through a
//! view changes the object. Objects are checked (size and mode) before every
//! build, and a view is removed by giving write permission to its directories
//! only, never to its files.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::catalogue::{ViewKind, ViewRow};
use crate::digest::ManifestDigest;
use crate::error::{Clash, Damage, Error, IoContext, Request, Result};
use crate::fsutil::{publish_noreplace, Published};
use crate::profile::ce::manifest::Entry;
use crate::profile::tree::{Node, TreeEntry};
use crate::store::core::objects::{holds_its_bytes, judge, restore_mode, ObjectState};
use crate::store::{ObjectKey, Store};

/// How a view's files are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Hard links, with copies where a link is refused.
    Auto,
    /// Hard links only.
    Hardlink,
    /// Copies only.
    Copy,
    /// Reflinks (copy-on-write clones), with copies where the filesystem has none.
    Reflink,
}

/// What building a view did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Built {
    /// Files made by hard link.
    pub linked: u64,
    /// Files made by copy or reflink (zero-length files included).
    pub copied: u64,
    /// Why files were copied rather than linked, with counts.
    pub copy_reasons: BTreeMap<String, u64>,
    /// Objects whose mode had drifted while their bytes were intact, set
    /// back before they were handed out (with what was wrong).
    pub modes_restored: Vec<String>,
    /// Directories made.
    pub directories: u64,
    /// Whether the view is a spare a discard kept, checked and taken whole
    /// (see `store::views::spares`) rather than built file by file.
    pub spare: bool,
}

impl Built {
    /// A one-word summary of the method actually used.
    pub fn method(&self) -> &'static str {
        match (self.linked, self.copied) {
            (_, 0) => "hardlink",
            (0, _) => "copy",
            _ => "mixed",
        }
    }

    fn copied_because(&mut self, reason: &str) {
        self.copied += 1;
        *self.copy_reasons.entry(reason.to_string()).or_default() += 1;
    }
}

impl ViewRow {
    /// The record of a view just built at `path`: its method and counts, and
    /// its root's identity.
    pub fn of_built(path: &Path, digest: ManifestDigest, kind: ViewKind, built: &Built) -> ViewRow {
        ViewRow {
            path: path.to_string_lossy().into_owned(),
            digest,
            kind,
            method: built.method().into(),
            linked: built.linked as i64,
            copied: built.copied as i64,
            created_at: String::new(),
            root_id: root_id(path),
        }
    }
}

/// The objects directory, as the threads that build a view share it.
#[derive(Clone, Copy)]
struct Objects<'a> {
    fd: BorrowedFd<'a>,
    root: &'a Path,
}

impl<'a> Objects<'a> {
    fn of(store: &'a Store) -> Objects<'a> {
        Objects {
            fd: store.objects(),
            root: store.root(),
        }
    }

    fn path(&self, key: &ObjectKey) -> PathBuf {
        self.root.join("objects").join(key.rel_path())
    }

    /// Checks one object's size and mode with one `fstatat`. An object
    /// whose mode drifted is set back after its bytes are re-hashed, and
    /// reported in `healed`; one whose bytes changed is refused.
    fn check(&self, e: &Entry, healed: &Mutex<Vec<String>>) -> Result<()> {
        let key = e.key();
        let problem =
            match rustix::fs::statat(self.fd, key.rel_path().as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => match judge(&st, &key, e.size) {
                    ObjectState::Intact => return Ok(()),
                    ObjectState::Missing => "is missing".to_string(),
                    ObjectState::Damaged(why)
                        if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
                            && st.st_size as u64 == e.size
                            && holds_its_bytes(self.fd, &self.path(&key), &key, e.size)? =>
                    {
                        restore_mode(self.fd, &self.path(&key), &key)?;
                        if let Ok(mut h) = healed.lock() {
                            h.push(format!("{} ({why})", self.path(&key).display()));
                        }
                        return Ok(());
                    }
                    ObjectState::Damaged(why) => why,
                },
                Err(Errno::NOENT) => "is missing".to_string(),
                Err(err) => return Err(Error::io("examine an object", self.path(&key), err)),
            };
        Err(Damage::Object {
            object: self.path(&key),
            file: e.path.clone(),
            problem,
        }
        .into())
    }
}

/// Below this many files a view is built on one thread.
const PARALLEL_FILES: usize = 256;

/// Builds a view of `entries` in the new directory `name` under `parent`, and
/// leaves every directory at 0555. The caller publishes it with a rename.
///
/// Directories are made first; then the files are linked (or copied) on all
/// cores, each object's size and mode checked just before its first use. A
/// damaged object fails the build, so it is never handed out.
pub fn build(
    store: &Store,
    entries: &[Entry],
    parent: BorrowedFd<'_>,
    name: &str,
    display: &Path,
    method: Method,
) -> Result<Built> {
    build_with(store, entries, &[], &[], parent, name, display, method)
}

/// Builds a view of a tree-kind snapshot's layout (see
/// `store::views::layout`) as [`build`] does: its files linked (or
/// copied) from their objects, and besides, every directory it lists made
/// (empty ones too) and every symlink recreated with its target.
pub fn build_tree(
    store: &Store,
    layout: &[TreeEntry],
    parent: BorrowedFd<'_>,
    name: &str,
    display: &Path,
    method: Method,
) -> Result<Built> {
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    let mut links = Vec::new();
    for e in layout {
        match &e.node {
            Node::Directory => dirs.push(e.path.clone()),
            Node::File { size, sha256, mode } => files.push(Entry {
                path: e.path.clone(),
                sha256: *sha256,
                size: *size,
                executable: mode & 0o111 != 0,
            }),
            Node::Symlink { target } => links.push((e.path.clone(), target.clone())),
        }
    }
    build_with(store, &files, &dirs, &links, parent, name, display, method)
}

/// [`build`], with directories (`extra_dirs`, made even when empty) and
/// symlinks (`links`: path and target) besides the files.
#[allow(clippy::too_many_arguments)]
fn build_with(
    store: &Store,
    entries: &[Entry],
    extra_dirs: &[String],
    links: &[(String, String)],
    parent: BorrowedFd<'_>,
    name: &str,
    display: &Path,
    method: Method,
) -> Result<Built> {
    rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o700))
        .ctx("create a view directory", display)?;
    let root = crate::fsutil::open_dir(parent, name).ctx("open a view directory", display)?;
    let mut dirs: Vec<String> = Vec::new();
    let mut made: HashSet<String> = HashSet::new();
    for d in extra_dirs {
        ensure_parents(
            root.as_fd(),
            &format!("{d}/"),
            &mut made,
            &mut dirs,
            display,
        )?;
    }
    for (path, _) in links {
        ensure_parents(root.as_fd(), path, &mut made, &mut dirs, display)?;
    }
    for e in entries {
        ensure_parents(root.as_fd(), &e.path, &mut made, &mut dirs, display)?;
    }
    for (path, target) in links {
        rustix::fs::symlinkat(target.as_str(), root.as_fd(), path.as_str())
            .ctx("create a symlink in the view", display.join(path))?;
    }
    let cross_device = method != Method::Copy && !same_device(store.objects(), root.as_fd())?;
    let healed = Mutex::new(Vec::new());
    let job = Job {
        objects: Objects::of(store),
        root: root.as_fd(),
        display,
        method,
        cross_device,
        healed: &healed,
    };
    let threads = if entries.len() < PARALLEL_FILES {
        1
    } else {
        crate::pool::cores(4)
    };
    let chunks: Vec<&[Entry]> = entries
        .chunks(entries.len().div_ceil(threads).max(1))
        .collect();
    let parts = crate::pool::map(&chunks, threads, || (), |(), part| job.run(part))?;
    let mut built = Built::default();
    for part in parts {
        built.linked += part.linked;
        built.copied += part.copied;
        for (why, n) in part.copy_reasons {
            *built.copy_reasons.entry(why).or_default() += n;
        }
    }
    built.directories = dirs.len() as u64 + 1;
    built.modes_restored = healed.into_inner().unwrap_or_default();
    built.modes_restored.sort();
    freeze(root.as_fd(), &mut dirs, display)?;
    Ok(built)
}

/// What every thread building a view shares.
#[derive(Clone, Copy)]
struct Job<'a> {
    objects: Objects<'a>,
    root: BorrowedFd<'a>,
    display: &'a Path,
    method: Method,
    cross_device: bool,
    healed: &'a Mutex<Vec<String>>,
}

impl Job<'_> {
    /// Makes the files of `entries`, whose directories exist.
    fn run(&self, entries: &[Entry]) -> Result<Built> {
        let mut built = Built::default();
        let mut checked = HashSet::new();
        for e in entries {
            let key = e.key();
            let target = self.display.join(&e.path);
            if e.size == 0 {
                create_empty(self.root, &e.path, key.mode())
                    .ctx("create an empty file", &target)?;
                built.copied_because("empty file");
                continue;
            }
            if checked.insert(key) {
                self.objects.check(e, self.healed)?;
            }
            let src = key.rel_path();
            let copy = |clone| {
                copy_object(
                    self.objects,
                    &src,
                    self.root,
                    &e.path,
                    key.mode(),
                    clone,
                    &target,
                )
            };
            match self.method {
                Method::Copy => {
                    copy(false)?;
                    built.copied_because("copy requested");
                }
                Method::Reflink => {
                    let cloned = copy(true)?;
                    built.copied_because(if cloned {
                        "reflink"
                    } else {
                        "reflink unsupported"
                    });
                }
                Method::Hardlink | Method::Auto => {
                    let linked = if self.cross_device {
                        Err(Errno::XDEV)
                    } else {
                        rustix::fs::linkat(
                            self.objects.fd,
                            src.as_str(),
                            self.root,
                            e.path.as_str(),
                            AtFlags::empty(),
                        )
                    };
                    match linked {
                        Ok(()) => built.linked += 1,
                        Err(err @ (Errno::XDEV | Errno::MLINK | Errno::PERM))
                            if self.method == Method::Auto =>
                        {
                            copy(false)?;
                            built.copied_because(link_refusal(err));
                        }
                        Err(err @ (Errno::XDEV | Errno::MLINK | Errno::PERM)) => {
                            return Err(Clash::HardLinksRequired {
                                path: target.to_path_buf(),
                                object: self.objects.path(&key),
                                why: link_refusal(err),
                            }
                            .into())
                        }
                        Err(err) => {
                            return Err(Error::io("hard-link a file into the view", target, err))
                        }
                    }
                }
            }
        }
        Ok(built)
    }
}

fn link_refusal(err: Errno) -> &'static str {
    match err {
        Errno::XDEV => "EXDEV: the view is on another filesystem",
        Errno::MLINK => "EMLINK: the object has too many links",
        _ => "EPERM: the filesystem refused the link",
    }
}

/// Whether two directories lie on the same device, as hard links need.
pub(crate) fn same_device(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> Result<bool> {
    let sa = rustix::fs::fstat(a).ctx("examine the objects directory", "objects")?;
    let sb = rustix::fs::fstat(b).ctx("examine the view directory", "view")?;
    Ok(sa.st_dev == sb.st_dev)
}

fn ensure_parents(
    root: BorrowedFd<'_>,
    path: &str,
    made: &mut HashSet<String>,
    dirs: &mut Vec<String>,
    display: &Path,
) -> Result<()> {
    let mut end = 0;
    while let Some(i) = path[end..].find('/') {
        end += i;
        let dir = &path[..end];
        if !made.contains(dir) {
            rustix::fs::mkdirat(root, dir, Mode::from_raw_mode(0o755))
                .ctx("create a view directory", display.join(dir))?;
            made.insert(dir.to_string());
            dirs.push(dir.to_string());
        }
        end += 1;
    }
    Ok(())
}

fn create_empty(root: BorrowedFd<'_>, path: &str, mode: u32) -> std::io::Result<()> {
    let fd = rustix::fs::openat(
        root,
        path,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o400),
    )?;
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
    Ok(())
}

/// Copies (or clones) an object into a view. Returns whether it was cloned.
fn copy_object(
    objects: Objects<'_>,
    src: &str,
    root: BorrowedFd<'_>,
    path: &str,
    mode: u32,
    try_clone: bool,
    target: &Path,
) -> Result<bool> {
    let object = rustix::fs::openat(
        objects.fd,
        src,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )
    .ctx("open an object", objects.root.join("objects").join(src))?;
    let dest: OwnedFd = rustix::fs::openat(
        root,
        path,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o600),
    )
    .ctx("create a file in the view", target)?;
    let cloned = try_clone && rustix::fs::ioctl_ficlone(&dest, &object).is_ok();
    if !cloned {
        let mut from = std::fs::File::from(object);
        let mut to = std::fs::File::from(dest.try_clone().ctx("duplicate a file handle", target)?);
        std::io::copy(&mut from, &mut to).ctx("copy an object into the view", target)?;
    }
    rustix::fs::fchmod(&dest, Mode::from_raw_mode(mode)).ctx("set a view file's mode", target)?;
    Ok(cloned)
}

/// Sets every directory of a view to 0555, deepest first, then the root.
fn freeze(root: BorrowedFd<'_>, dirs: &mut [String], display: &Path) -> Result<()> {
    dirs.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
    for d in dirs.iter() {
        rustix::fs::chmodat(
            root,
            d.as_str(),
            Mode::from_raw_mode(0o555),
            AtFlags::empty(),
        )
        .ctx("freeze a view directory", display.join(d))?;
    }
    rustix::fs::fchmod(root, Mode::from_raw_mode(0o555)).ctx("freeze a view", display)
}

/// Moves a built view from `tmp` to `dest` in the same directory, refusing to
/// replace anything at `dest`.
pub fn publish(parent: BorrowedFd<'_>, tmp: &str, dest: &OsStr, display: &Path) -> Result<()> {
    match publish_noreplace(parent, tmp, parent, dest) {
        Ok(Published::Created) => Ok(()),
        Ok(Published::Existed) => Err(Clash::Taken {
            path: display.to_path_buf(),
        }
        .into()),
        Err(e) => Err(Error::io("publish the view", display, e)),
    }
}

/// Splits a destination into its absolute parent and name lexically, without
/// resolving anything: for naming a view whose parent no longer exists.
pub fn lexical_dest(dest: &Path) -> Result<(PathBuf, PathBuf)> {
    let abs: PathBuf = std::path::absolute(dest)
        .ctx("resolve the destination", dest)?
        .components()
        .collect();
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => Ok((parent.to_path_buf(), PathBuf::from(name))),
        _ => Err(Request::NotADirectoryName {
            path: dest.to_path_buf(),
            to_create: false,
        }
        .into()),
    }
}

/// Removes a view just published whose record could not be made, and
/// returns the error that stopped it; a view nothing records is one gc could
/// strip of its objects.
pub fn unpublish(parent: BorrowedFd<'_>, name: &OsStr, dest: &Path, cause: Error) -> Error {
    match crate::fsutil::remove_tree_at(parent, name) {
        Ok(_) => cause,
        Err(source) => Damage::ViewLeftBehind {
            cause: Box::new(cause),
            path: dest.to_path_buf(),
            source,
        }
        .into(),
    }
}

/// The device and inode of the directory at `path`, without following a symlink.
pub fn root_id(path: &Path) -> Option<(u64, u64)> {
    rustix::fs::lstat(path)
        .ok()
        .map(|st| (st.st_dev, st.st_ino))
}

/// Splits a destination into its (existing) parent directory and final name,
/// both absolute, without resolving the final component.
pub fn split_dest(dest: &Path) -> Result<(PathBuf, PathBuf)> {
    let abs = std::path::absolute(dest).ctx("resolve the destination", dest)?;
    let name = abs
        .file_name()
        .filter(|n| *n != OsStr::new("..") && *n != OsStr::new("."))
        .ok_or_else(|| Request::NotADirectoryName {
            path: dest.to_path_buf(),
            to_create: true,
        })?
        .to_owned();
    let parent = abs.parent().unwrap_or(Path::new("/"));
    let parent = std::fs::canonicalize(parent).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::NotFound {
            what: "destination's parent directory",
            path: parent.to_path_buf(),
        },
        _ => Error::io("resolve the destination's parent", parent, e),
    })?;
    Ok((parent, PathBuf::from(name)))
}

/// A unique temporary name for building `name` beside it.
pub fn temp_name(name: &OsStr) -> String {
    let short: String = String::from_utf8_lossy(name.as_bytes())
        .chars()
        .take(40)
        .collect();
    format!(
        ".{short}.cestore-tmp-{}",
        crate::store::core::objects::unique_suffix()
    )
}
