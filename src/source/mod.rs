//! Reading a release from a source: a directory, through directory
//! handles (`fs.rs`), or a git tree, through the repository's objects ([`git`]).
//!
//! [`Source::open`] checks a source directory as the reference's
//! `_validated_runtime_root` does, and [`Source::walk_as`] visits the release
//! in the order its profile's [`Layout`] gives (for the CE profile, the
//! reference's `_plugin_files` with `_build_ce_plugin_snapshot`, see
//! [`crate::profile::ce`]): first the named files of the layout's files
//! directory, then each of its directories depth first, every directory's
//! entries sorted by name as Python sorts `str` (code points). Every name
//! listed is first put to [`Profile::left_out`], and every entry kept to
//! [`Profile::step`].
//!
//! Each file is checked the moment it is reached: its path length, the file
//! count, its size, its identity while it is read, and the running total. So the
//! first rule broken is the one the reference reports.
//!
//! # One walk, two trees
//!
//! The walk asks a tree (the `Tree` trait) what the reference asks the filesystem: `lstat`,
//! `exists()`, a sorted listing, a bounded read. The filesystem answers for a
//! directory; a git tree answers for what a checkout of it would hold
//! ([`Source::open_git`]). Every rule, and the order they are asked in, lives
//! here once, so that both sources accept, refuse and digest alike.
//!
//! # Safer than the reference
//!
//! The filesystem backend opens every directory relative to its parent's
//! handle without following symlinks, and compares every handle with what the
//! walk saw (see `fs.rs`).
//!
//! # Limits
//!
//! The reference walks with path strings and Python recursion; cestore keeps
//! two of its side effects so that both refuse the same trees: a directory
//! nested more than [`Profile::max_depth`] levels below a walked directory
//! (for CE, Python's recursion limit, as measured through the oracle) and an
//! absolute path of `PATH_MAX` bytes or more (`ENAMETOOLONG`).

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::mpsc;

use rustix::io::Errno;

use crate::digest::ObjectId;
use crate::profile::ce::manifest::Entry;
use crate::profile::ce::CE;
use crate::profile::{Bounds, Kind, Layout, LeftOut, Profile, Rejection, Step, WalkEnd};

pub mod carried;
mod fs;
pub mod git;
pub mod record;
pub mod url;
pub mod worktree;

pub use git::{GitError, GitRequest};
pub use record::{Changes, ReadFrom, SourceEntry, SourceRecord, Via};
pub use worktree::{work_tree_record, NoCache, TreeDigests, TreeKey, WorkTreeFound};

/// Linux's `PATH_MAX`: a path of this many bytes or more fails with `ENAMETOOLONG`.
const PATH_MAX: usize = 4096;

/// One file of a release, handed to the walk's visitor as it is read.
pub struct SourceFile<'a> {
    /// The path relative to the plugin root.
    pub path: &'a str,
    /// Whether any execute bit is set.
    pub executable: bool,
    /// The file's size.
    pub size: u64,
    /// The file's bytes, as this walk read them.
    pub data: &'a [u8],
    /// The SHA-256 of those bytes.
    pub id: ObjectId,
}

/// What a complete walk found.
#[derive(Debug)]
pub struct Walked {
    /// The manifest entries, in manifest order.
    pub entries: Vec<Entry>,
    /// The bytes of all files together.
    pub total_bytes: u64,
    /// The entries the reference leaves out, with why, by their paths
    /// relative to the root (a directory left out counts once, whatever it
    /// holds). Sorted.
    pub left_out: Vec<(LeftOut, String)>,
}

/// An error from a walk: the tree broke a rule, the repository could not be
/// read, or the visitor failed.
#[derive(Debug)]
pub enum WalkError<E> {
    /// The tree broke one of the reference's rules.
    Rejected(Rejection),
    /// A git source's repository could not be read.
    Git(GitError),
    /// The visitor returned an error.
    Visitor(E),
}

impl<E> From<Rejection> for WalkError<E> {
    fn from(r: Rejection) -> Self {
        WalkError::Rejected(r)
    }
}

/// A release's source, validated and held open: a directory, or a tree of a
/// git repository.
pub struct Source {
    /// How the source is named in reports and ingest events.
    shown: String,
    tree: Backing,
}

enum Backing {
    Dir(fs::DirTree),
    Git(Box<git::GitTree>),
}

impl Source {
    /// Opens `path` as a release source: a real directory reached by no symlink hop.
    pub fn open(path: &Path) -> Result<Source, Rejection> {
        let dir = fs::DirTree::open(path)?;
        Ok(Source {
            shown: dir.root_path().display().to_string(),
            tree: Backing::Dir(dir),
        })
    }

    /// Opens the plugin directory of a revision of a git repository as a
    /// release source: what a checkout of that revision would hold, read
    /// from the repository's objects.
    pub fn open_git(request: &GitRequest<'_>) -> crate::error::Result<Source> {
        let tree = git::GitTree::open(request).map_err(|e| {
            let e = crate::error::Error::from(e);
            match e.rule() {
                // A refusal at the root of a marketplace names the revision
                // already.
                Some(_) if e.path().is_some_and(|p| p.ends_with(layout_file(&CE, 0))) => e,
                // A rule broken, or an object refused: where in the revision.
                Some(_) => e.in_revision(&absolute_like_python(request.repo), request.rev, None),
                None => e,
            }
        })?;
        Ok(Source {
            shown: tree.shown(),
            tree: Backing::Git(Box::new(tree)),
        })
    }

    /// The source's absolute path: for a git source, where a checkout at the
    /// repository's path would put it.
    pub fn root(&self) -> &Path {
        match &self.tree {
            Backing::Dir(t) => t.root_path(),
            Backing::Git(t) => t.root_path(),
        }
    }

    /// How reports and ingest events name the source: its absolute path, or
    /// `git:REPO@COMMIT:PATH` for a git source.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// `e`, an error of this source, naming for a git source the revision,
    /// its commit and the path inside it (see [`crate::Error::in_revision`]).
    pub fn in_revision(&self, e: crate::error::Error) -> crate::error::Error {
        match &self.tree {
            Backing::Dir(_) => e,
            Backing::Git(t) => e.in_revision(t.repo_path(), t.rev(), Some(t.commit().to_string())),
        }
    }

    /// Whether the source is a directory on this filesystem (not a git tree).
    pub fn is_directory(&self) -> bool {
        matches!(self.tree, Backing::Dir(_))
    }

    /// Walks the release as the CE profile says (see [`Source::walk_as`]).
    ///
    /// `version` is the version the profile's manifest file must carry; it
    /// must already have passed [`crate::profile::ce::rules::is_exact_version`].
    pub fn walk<E, F>(
        &self,
        version: &str,
        bounds: Bounds,
        visit: F,
    ) -> Result<Walked, WalkError<E>>
    where
        F: FnMut(&SourceFile<'_>) -> Result<(), E>,
    {
        self.walk_as(&CE, version, bounds, visit)
    }

    /// Walks the release as `profile` says, checking every rule within
    /// `bounds` (at most the profile's), and hands each file to `visit`.
    ///
    /// `expected` is what the caller says the release is, for
    /// [`Profile::check_walked`].
    pub fn walk_as<P, E, F>(
        &self,
        profile: &P,
        expected: &str,
        bounds: Bounds,
        visit: F,
    ) -> Result<Walked, WalkError<E>>
    where
        P: Profile + ?Sized,
        F: FnMut(&SourceFile<'_>) -> Result<(), E>,
    {
        match &self.tree {
            Backing::Dir(t) => walk(t, Asked::new(profile, expected, bounds), visit),
            Backing::Git(t) => walk(&**t, Asked::new(profile, expected, bounds), visit),
        }
    }
}

/// The `i`th named file of `profile`'s layout, relative to the root.
pub(crate) fn layout_file<P: Profile + ?Sized>(profile: &P, i: usize) -> String {
    let layout = profile.layout();
    format!("{}/{}", layout.files_dir, layout.files[i])
}

/// What a tree tells of one entry, and what it needs to find it again.
#[derive(Clone)]
struct Node<R> {
    kind: Kind,
    /// A file's size.
    size: u64,
    /// Whether any execute bit is set.
    executable: bool,
    raw: R,
}

/// Why a tree could not answer a question of the walk.
enum Fault {
    /// What the system said: the walk names the rule it breaks there.
    Io(io::Error),
    /// The answer is itself a refusal, with its path.
    Rejected(Rejection),
    /// The repository could not be read.
    Git(GitError),
}

impl From<io::Error> for Fault {
    fn from(e: io::Error) -> Self {
        Fault::Io(e)
    }
}

impl From<Errno> for Fault {
    fn from(e: Errno) -> Self {
        Fault::Io(e.into())
    }
}

impl From<Rejection> for Fault {
    fn from(r: Rejection) -> Self {
        Fault::Rejected(r)
    }
}

impl From<GitError> for Fault {
    fn from(e: GitError) -> Self {
        Fault::Git(e)
    }
}

impl Fault {
    /// The walk's error for this fault, naming the rule `io` gives for what
    /// the system said.
    fn at<E>(self, io: impl FnOnce(io::Error) -> Rejection) -> WalkError<E> {
        match self {
            Fault::Io(e) => WalkError::Rejected(io(e)),
            Fault::Rejected(r) => WalkError::Rejected(r),
            Fault::Git(e) => WalkError::Git(e),
        }
    }
}

/// What the walk asks of a source: the questions the reference asks the
/// filesystem, answered by a directory or by a git tree.
trait Tree {
    /// An open directory.
    type Dir;
    /// What the tree keeps of an entry to find it again.
    type Raw: Clone;

    /// The source's absolute path, which every rejection's path starts with.
    fn root_path(&self) -> &Path;

    /// The source directory itself.
    fn root_dir(&self) -> &Self::Dir;

    /// `lstat` of `name` in `dir`.
    fn lstat(&self, dir: &Self::Dir, name: &[u8]) -> Result<Node<Self::Raw>, Fault>;

    /// Python's `Path.exists()` of `name` in `dir`: follows symlinks, is
    /// false for `ENOENT`, `ENOTDIR`, `EBADF` and `ELOOP`, and fails for any
    /// other error.
    fn exists(&self, dir: &Self::Dir, name: &[u8]) -> Result<bool, Fault>;

    /// Opens directory `name` of `parent`, which `lstat` found to be `seen`,
    /// to list it (`listing`) or to look names up in it; `path` is its path
    /// for a refusal. An I/O fault is the open's.
    fn open_dir(
        &self,
        parent: &Self::Dir,
        name: &[u8],
        seen: &Node<Self::Raw>,
        listing: bool,
        path: &Path,
    ) -> Result<Self::Dir, Fault>;

    /// The names in `dir` (without `.` and `..`), in Python's `str` order.
    fn list(&self, dir: &Self::Dir) -> Result<Vec<Vec<u8>>, Fault>;

    /// Reads file `name` of `dir` (at `rel` below the root), which `lstat`
    /// found to be `seen` and within `max` bytes, into `buf`: the rest of
    /// the reference's `_bounded_plugin_bytes`. Refuses with `path()`.
    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        dir: &Self::Dir,
        name: &[u8],
        rel: &[u8],
        seen: &Node<Self::Raw>,
        max: u64,
        buf: &mut Vec<u8>,
        path: &dyn Fn() -> PathBuf,
    ) -> Result<(), Fault>;

    /// The names in the directory at `rel` below the root, in no order;
    /// none when it cannot be listed. Best effort: only for what the
    /// allowlist leaves out, which the reference never lists.
    fn names_at(&self, rel: &str) -> Vec<Vec<u8>>;
}

/// What a walk is asked: the profile it walks as, what the caller says the
/// tree is, and the bounds it asks for (at most the profile's).
struct Asked<'a, P: ?Sized> {
    profile: &'a P,
    expected: &'a str,
    bounds: Bounds,
}

impl<'a, P: Profile + ?Sized> Asked<'a, P> {
    fn new(profile: &'a P, expected: &'a str, bounds: Bounds) -> Self {
        let bounds = bounds.at_most(profile.bounds());
        Asked {
            profile,
            expected,
            bounds,
        }
    }
}

/// Walks the release in `tree` as asked, checking every rule within the
/// bounds, and hands each file to `visit`.
fn walk<T: Tree, P: Profile + ?Sized, E>(
    tree: &T,
    asked: Asked<'_, P>,
    visit: impl FnMut(&SourceFile<'_>) -> Result<(), E>,
) -> Result<Walked, WalkError<E>> {
    let Asked {
        profile,
        expected,
        bounds,
    } = asked;
    let layout = profile.layout();
    std::thread::scope(|scope| {
        let mut walker = Walker {
            tree,
            profile,
            layout,
            max_depth: profile.max_depth(),
            entries: Vec::new(),
            left_out: Vec::new(),
            total_bytes: 0,
            kept: Vec::new(),
            bounds,
            hashing: Hashing::start(scope),
            visited: 0,
            visit,
        };
        let root = tree.root_dir();
        let walked = walker.files(root).and_then(|()| walker.dirs(root));
        // Every file read is handed over before the walk ends, as it
        // would have been had it been hashed on the spot: a visitor's
        // error comes before a rule a later file broke.
        walker.hand_over(0)?;
        walked?;
        walker.check_release(expected)?;
        let mut left_out = walker.left_out;
        left_out.extend(outside_allowlist(tree, layout));
        left_out.sort();
        Ok(Walked {
            entries: walker.entries,
            total_bytes: walker.total_bytes,
            left_out,
        })
    })
}

/// The entries at the root and in the layout's files directory that the
/// allowlist leaves out. Best effort: the reference never lists these
/// directories, so one that cannot be listed gives nothing.
fn outside_allowlist<T: Tree>(tree: &T, layout: &Layout) -> Vec<(LeftOut, String)> {
    let mut out = Vec::new();
    let mut names_in = |rel: &str| {
        let Some(allowed) = layout.allowed_at(rel) else {
            return;
        };
        for name in tree.names_at(rel) {
            let name = String::from_utf8_lossy(&name).into_owned();
            if !allowed.contains(&name.as_str()) {
                let path = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                out.push((LeftOut::OutsideAllowlist, path));
            }
        }
    };
    names_in("");
    names_in(layout.files_dir);
    out
}

/// How many files read may wait for their hash at once, and how many bytes
/// their buffers take (one file may always wait, whatever its size): what
/// the hashing beside the walk holds in memory.
const HASH_QUEUE_FILES: usize = 1024;
const HASH_QUEUE_BYTES: usize = 4 << 20;

/// Files go to the hashing thread in batches of this many, or of this many
/// bytes: one wake-up per batch, not per file.
const HASH_BATCH_FILES: usize = 64;
const HASH_BATCH_BYTES: usize = 256 << 10;

/// Buffers of at most this capacity are used again; larger ones are freed.
const REUSED_BUFFER: usize = 64 << 10;

/// A file's bytes and their hash.
type Hashed = (Vec<u8>, ObjectId);

/// Each buffer of a batch with its SHA-256, in order.
fn hash_all(batch: Vec<Vec<u8>>) -> impl Iterator<Item = Hashed> {
    batch.into_iter().map(|buf| {
        let id = ObjectId::of(&buf);
        (buf, id)
    })
}

/// SHA-256 on a thread of its own beside the walk, which meanwhile opens,
/// checks and reads the next files: the walk then costs about the longer
/// of its system calls and its hashing, not their sum. Files go in
/// batches and come back in the order they were sent, with their hashes.
/// With one core, files are hashed on the walk's thread.
struct Hashing {
    /// To the hashing thread; `None` with one core.
    to: Option<mpsc::SyncSender<Vec<Vec<u8>>>>,
    /// From it.
    back: Option<mpsc::Receiver<Vec<Hashed>>>,
    /// Batches sent and not yet back.
    sent: usize,
    /// The batch being filled.
    batch: Vec<Vec<u8>>,
    batch_bytes: usize,
    /// Files hashed, not yet handed over, oldest first.
    ready: std::collections::VecDeque<Hashed>,
    /// Files read and not yet handed over, and their buffers' capacity.
    waiting: usize,
    waiting_bytes: usize,
    /// Buffers handed over, for the next files.
    free: Vec<Vec<u8>>,
}

impl Hashing {
    fn start<'s>(scope: &'s std::thread::Scope<'s, '_>) -> Hashing {
        let mut hashing = Hashing {
            to: None,
            back: None,
            sent: 0,
            batch: Vec::new(),
            batch_bytes: 0,
            ready: std::collections::VecDeque::new(),
            waiting: 0,
            waiting_bytes: 0,
            free: Vec::new(),
        };
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            return hashing;
        }
        let (to, batches) = mpsc::sync_channel::<Vec<Vec<u8>>>(4);
        let (done, back) = mpsc::channel();
        // It stops when the walk drops its sender. A panic here is raised
        // again by the scope.
        scope.spawn(move || {
            for batch in batches {
                if done.send(hash_all(batch).collect()).is_err() {
                    break;
                }
            }
        });
        hashing.to = Some(to);
        hashing.back = Some(back);
        hashing
    }

    /// An empty buffer for the next file.
    fn buffer(&mut self) -> Vec<u8> {
        let mut buf = self.free.pop().unwrap_or_default();
        buf.clear();
        buf
    }

    /// Hands a file's bytes to be hashed.
    fn send(&mut self, buf: Vec<u8>) {
        self.waiting += 1;
        self.waiting_bytes += buf.capacity();
        self.batch_bytes += buf.len();
        self.batch.push(buf);
        if self.batch.len() >= HASH_BATCH_FILES || self.batch_bytes >= HASH_BATCH_BYTES {
            self.flush();
        }
    }

    /// Sends the batch being filled.
    fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        self.batch_bytes = 0;
        let batch = match &self.to {
            Some(to) => match to.send(batch) {
                Ok(()) => {
                    self.sent += 1;
                    return;
                }
                // The thread is gone (it panicked, which the scope raises
                // again): hash here.
                Err(mpsc::SendError(batch)) => batch,
            },
            None => batch,
        };
        self.ready.extend(hash_all(batch));
    }

    /// Whether more than `files` files wait, or more than one and their
    /// buffers take more than the queue's bound.
    fn over(&self, files: usize) -> bool {
        self.waiting > files || (self.waiting > 1 && self.waiting_bytes > HASH_QUEUE_BYTES)
    }

    /// The oldest file read, with its hash; `None` when none waits, or the
    /// hashing thread is gone (its panic is raised by the scope).
    fn next(&mut self) -> Option<Hashed> {
        if self.waiting == 0 {
            return None;
        }
        if self.ready.is_empty() {
            if self.sent == 0 {
                self.flush();
            }
            if self.ready.is_empty() {
                let hashed = self.back.as_ref()?.recv().ok()?;
                self.sent -= 1;
                self.ready.extend(hashed);
            }
        }
        let (buf, id) = self.ready.pop_front()?;
        self.waiting -= 1;
        self.waiting_bytes -= buf.capacity();
        Some((buf, id))
    }

    /// Keeps a buffer handed over for the next files, when small.
    fn reuse(&mut self, buf: Vec<u8>) {
        if buf.capacity() <= REUSED_BUFFER {
            self.free.push(buf);
        }
    }
}

struct Walker<'r, T, P: ?Sized, F> {
    tree: &'r T,
    /// What the walk keeps, leaves out and refuses.
    profile: &'r P,
    /// Where it goes.
    layout: &'static Layout,
    /// How deep below a walked directory it may go.
    max_depth: usize,
    entries: Vec<Entry>,
    left_out: Vec<(LeftOut, String)>,
    total_bytes: u64,
    /// The bytes of the files the profile keeps for its last checks.
    kept: Vec<(String, Vec<u8>)>,
    /// The bounds this walk enforces.
    bounds: Bounds,
    /// The files read, being hashed.
    hashing: Hashing,
    /// How many entries, from the first, are hashed and handed to `visit`.
    visited: usize,
    visit: F,
}

impl<T, P, F, E> Walker<'_, T, P, F>
where
    T: Tree,
    P: Profile + ?Sized,
    F: FnMut(&SourceFile<'_>) -> Result<(), E>,
{
    fn full(&self, rel: &[u8]) -> PathBuf {
        self.tree.root_path().join(OsStr::from_bytes(rel))
    }

    /// The length of the absolute path of `rel`, as the reference would build it.
    fn abs_len(&self, rel: &[u8]) -> usize {
        self.tree.root_path().as_os_str().len() + 1 + rel.len()
    }

    /// `lstat` of `name` in `dir`, failing as the reference's path-based
    /// call would for a path (`rel`) of `PATH_MAX` bytes or more.
    fn lstat(&self, dir: &T::Dir, name: &[u8], rel: &[u8]) -> Result<Node<T::Raw>, Fault> {
        if self.abs_len(rel) >= PATH_MAX {
            return Err(Errno::NAMETOOLONG.into());
        }
        self.tree.lstat(dir, name)
    }

    /// Python's `Path.exists()` of `name` in `dir`, with the same bound.
    fn exists(&self, dir: &T::Dir, name: &[u8], rel: &[u8]) -> Result<bool, Fault> {
        if self.abs_len(rel) >= PATH_MAX {
            return Err(Errno::NAMETOOLONG.into());
        }
        self.tree.exists(dir, name)
    }

    /// The layout's named files, in its files directory, in order.
    fn files(&mut self, root: &T::Dir) -> Result<(), WalkError<E>> {
        let layout = self.layout;
        let dir_rel = layout.files_dir.as_bytes();
        let dir_path = self.full(dir_rel);
        let unavailable = |source: io::Error| Rejection::ManifestDirUnavailable {
            path: dir_path.clone(),
            source,
        };
        let meta = self
            .lstat(root, dir_rel, dir_rel)
            .map_err(|f| f.at(unavailable))?;
        if meta.kind != Kind::Directory {
            return Err(Rejection::ManifestDirNotReal { path: dir_path }.into());
        }
        let dir = self
            .tree
            .open_dir(root, dir_rel, &meta, false, &dir_path)
            .map_err(|f| f.at(unavailable))?;
        for (i, name) in layout.files.iter().enumerate() {
            let rel = format!("{}/{}", layout.files_dir, name);
            let exists = self
                .exists(&dir, name.as_bytes(), rel.as_bytes())
                .map_err(|f| {
                    f.at(|source| Rejection::ExistenceUnknown {
                        path: self.full(rel.as_bytes()),
                        source,
                    })
                })?;
            if !exists {
                if i < layout.required_files {
                    return Err(Rejection::ManifestMissing {
                        path: self.full(rel.as_bytes()),
                    }
                    .into());
                }
                continue;
            }
            self.file(&dir, name.as_bytes(), rel.as_bytes(), None)?;
        }
        Ok(())
    }

    /// The layout's directories, each depth first, once the required ones
    /// are found to exist.
    fn dirs(&mut self, root: &T::Dir) -> Result<(), WalkError<E>> {
        let layout = self.layout;
        for name in &layout.dirs[..layout.required_dirs] {
            let rel = name.as_bytes();
            let exists = self.exists(root, rel, rel).map_err(|f| {
                f.at(|source| Rejection::ExistenceUnknown {
                    path: self.full(rel),
                    source,
                })
            })?;
            if !exists {
                return Err(Rejection::SkillsMissing {
                    path: self.full(rel),
                }
                .into());
            }
        }
        for name in layout.dirs {
            let rel = name.as_bytes();
            let path = self.full(rel);
            let exists = self.exists(root, rel, rel).map_err(|f| {
                f.at(|source| Rejection::ExistenceUnknown {
                    path: path.clone(),
                    source,
                })
            })?;
            if !exists {
                continue;
            }
            let meta = self.lstat(root, rel, rel).map_err(|f| {
                f.at(|source| Rejection::ComponentUnreadable {
                    path: path.clone(),
                    source,
                })
            })?;
            if meta.kind != Kind::Directory {
                return Err(Rejection::ComponentNotRealDirectory { path }.into());
            }
            self.directory(root, rel, rel, &meta, 0)?;
        }
        Ok(())
    }

    /// Opens and walks one directory whose `lstat` the caller already has.
    fn directory(
        &mut self,
        parent: &T::Dir,
        name: &[u8],
        rel: &[u8],
        meta: &Node<T::Raw>,
        depth: usize,
    ) -> Result<(), WalkError<E>> {
        if depth > self.max_depth {
            return Err(Rejection::TooDeep {
                path: self.full(rel),
                depth,
            }
            .into());
        }
        let unreadable = |source: io::Error| Rejection::DirectoryUnreadable {
            path: self.full(rel),
            source,
        };
        if self.abs_len(rel) >= PATH_MAX {
            return Err(unreadable(Errno::NAMETOOLONG.into()).into());
        }
        let dir = self
            .tree
            .open_dir(parent, name, meta, true, &self.full(rel))
            .map_err(|f| f.at(unreadable))?;
        let names = self.tree.list(&dir).map_err(|f| f.at(unreadable))?;
        let mut child_rel = rel.to_vec();
        for child in names {
            if let Some(why) = self.profile.left_out(&String::from_utf8_lossy(&child)) {
                let mut path = String::from_utf8_lossy(rel).into_owned();
                path.push('/');
                path.push_str(&String::from_utf8_lossy(&child));
                self.left_out.push((why, path));
                continue;
            }
            child_rel.truncate(rel.len());
            child_rel.push(b'/');
            child_rel.extend_from_slice(&child);
            let meta = self.lstat(&dir, &child, &child_rel).map_err(|f| {
                f.at(|source| Rejection::EntryUnreadable {
                    path: self.full(&child_rel),
                    source,
                })
            })?;
            match self.profile.step(meta.kind) {
                Step::Refuse(rejection) => return Err(rejection(self.full(&child_rel)).into()),
                Step::Descend => self.directory(&dir, &child, &child_rel, &meta, depth + 1)?,
                Step::Read => self.file(&dir, &child, &child_rel, Some(meta))?,
            }
        }
        Ok(())
    }

    /// Checks, reads, hashes and hands over one file, in the reference's order.
    fn file(
        &mut self,
        dir: &T::Dir,
        name: &[u8],
        rel: &[u8],
        seen: Option<Node<T::Raw>>,
    ) -> Result<(), WalkError<E>> {
        let path_text = std::str::from_utf8(rel).map_err(|_| Rejection::PathNotUtf8 {
            path: self.full(rel),
        })?;
        if rel.len() > self.bounds.path_bytes {
            return Err(Rejection::PathTooLong {
                path: self.full(rel),
                bytes: rel.len(),
                limit: self.bounds.path_bytes,
            }
            .into());
        }
        if self.entries.len() >= self.bounds.files {
            return Err(Rejection::TooManyFiles {
                path: self.full(rel),
                limit: self.bounds.files,
            }
            .into());
        }
        let before = self.regular_file(dir, name, rel, seen)?;
        let executable = before.executable;
        let mut buf = self.hashing.buffer();
        let path = || self.full(rel);
        self.tree
            .read(
                dir,
                name,
                rel,
                &before,
                self.bounds.file_bytes,
                &mut buf,
                &path,
            )
            .map_err(|f| {
                f.at(|source| Rejection::FileUnreadable {
                    path: path(),
                    source,
                })
            })?;
        let size = buf.len() as u64;
        self.total_bytes += size;
        if self.total_bytes > self.bounds.total_bytes {
            return Err(Rejection::TooManyBytes {
                path: self.full(rel),
                limit: self.bounds.total_bytes,
            }
            .into());
        }
        if self.profile.keeps_bytes(rel) {
            self.kept.push((path_text.to_string(), buf.clone()));
        }
        // Its hash is filled in when it comes back.
        self.entries.push(Entry {
            executable,
            path: path_text.to_string(),
            sha256: ObjectId::from_bytes([0; 32]),
            size,
        });
        self.hashing.send(buf);
        self.hand_over(HASH_QUEUE_FILES)
    }

    /// Hands the files read to `visit`, in walk order, once hashed, until
    /// at most `left` wait (within the queue's bounds).
    fn hand_over(&mut self, left: usize) -> Result<(), WalkError<E>> {
        while self.hashing.over(left) {
            let Some((buf, id)) = self.hashing.next() else {
                break;
            };
            let entry = &mut self.entries[self.visited];
            entry.sha256 = id;
            self.visited += 1;
            let file = SourceFile {
                path: &entry.path,
                executable: entry.executable,
                size: entry.size,
                data: &buf,
                id,
            };
            (self.visit)(&file).map_err(WalkError::Visitor)?;
            self.hashing.reuse(buf);
        }
        Ok(())
    }

    /// Finds a regular file within the size bound: the checks of the
    /// reference's `_bounded_plugin_bytes` made before it opens the file.
    fn regular_file(
        &self,
        dir: &T::Dir,
        name: &[u8],
        rel: &[u8],
        seen: Option<Node<T::Raw>>,
    ) -> Result<Node<T::Raw>, WalkError<E>> {
        let path = || self.full(rel);
        let before = match seen {
            Some(meta) => meta,
            None => self.lstat(dir, name, rel).map_err(|f| {
                f.at(|source| Rejection::FileUnreadable {
                    path: path(),
                    source,
                })
            })?,
        };
        if before.kind != Kind::File {
            return Err(Rejection::FileNotRegular { path: path() }.into());
        }
        if before.size > self.bounds.file_bytes {
            return Err(Rejection::FileTooLarge {
                path: path(),
                limit: self.bounds.file_bytes,
            }
            .into());
        }
        Ok(before)
    }

    /// The checks the profile makes once every file is read.
    fn check_release(&self, expected: &str) -> Result<(), Rejection> {
        let full = |rel: &str| self.full(rel.as_bytes());
        self.profile.check_walked(&WalkEnd {
            expected,
            entries: &self.entries,
            kept: &self.kept,
            full: &full,
        })
    }
}

/// `Path.expanduser().absolute()` as Python's pathlib spells it: `~` expanded
/// from `$HOME`, made absolute against the working directory, `.` and empty
/// components dropped, `..` kept.
pub(crate) fn absolute_like_python(path: &Path) -> PathBuf {
    let mut expanded = PathBuf::new();
    let bytes = path.as_os_str().as_bytes();
    if bytes == b"~" || bytes.starts_with(b"~/") {
        if let Some(home) = std::env::var_os("HOME") {
            expanded.push(home);
            expanded.push(OsStr::from_bytes(
                bytes[1..].trim_ascii_start_matches_slash(),
            ));
        } else {
            expanded.push(path);
        }
    } else {
        expanded.push(path);
    }
    let absolute = if expanded.is_absolute() {
        expanded
    } else {
        std::env::current_dir().unwrap_or_default().join(expanded)
    };
    let mut out = PathBuf::new();
    for c in absolute.components() {
        match c {
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

trait TrimSlash {
    fn trim_ascii_start_matches_slash(&self) -> &[u8];
}

impl TrimSlash for [u8] {
    fn trim_ascii_start_matches_slash(&self) -> &[u8] {
        let n = self.iter().take_while(|b| **b == b'/').count();
        &self[n..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::profile::ce::fixtures::{release, required_skill_files, MANIFEST_FILE};

    fn rejection(source: &Source, bounds: Bounds) -> Option<Rejection> {
        match source.walk("1.2.3", bounds, |_| Ok::<(), ()>(())) {
            Ok(_) => None,
            Err(WalkError::Rejected(r)) => Some(r),
            Err(WalkError::Visitor(()) | WalkError::Git(_)) => unreachable!(),
        }
    }

    #[test]
    fn lower_bounds_reject_at_the_first_file_past_them() {
        let last_skill = required_skill_files()[2].clone();
        let dir = tempfile::tempdir().unwrap();
        release(dir.path());
        let source = Source::open(dir.path()).unwrap();
        let reference = Bounds::REFERENCE;
        assert!(rejection(&source, reference).is_none());
        let cases = [
            (
                Bounds {
                    files: 2,
                    ..reference
                },
                "too-many-files",
                "skills/ce-plan/SKILL.md",
            ),
            (
                Bounds {
                    file_bytes: 60,
                    ..reference
                },
                "file-too-large",
                "assets/big.bin",
            ),
            (
                Bounds {
                    total_bytes: 1,
                    ..reference
                },
                "too-many-bytes",
                MANIFEST_FILE,
            ),
            (
                Bounds {
                    path_bytes: 26,
                    ..reference
                },
                "path-too-long",
                last_skill.as_str(),
            ),
        ];
        for (bounds, rule, at) in cases {
            let r = rejection(&source, bounds).expect(rule);
            assert_eq!(r.rule(), rule);
            assert_eq!(r.path(), Some(dir.path().join(at).as_path()), "{rule}");
        }
        // A bound above the reference's is the reference's.
        let above = Bounds {
            files: usize::MAX,
            ..reference
        };
        assert_eq!(above.at_most_reference(), reference);
    }

    #[test]
    fn files_are_handed_over_in_walk_order_with_their_hashes_before_a_later_rejection() {
        let dir = tempfile::tempdir().unwrap();
        release(dir.path());
        for i in 0..300 {
            let p = dir.path().join(format!("assets/many/f{i:03}"));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, format!("file {i}\n").repeat(i)).unwrap();
        }
        let source = Source::open(dir.path()).unwrap();
        let mut seen = Vec::new();
        let walked = source
            .walk("1.2.3", Bounds::REFERENCE, |f| {
                assert_eq!(f.id, ObjectId::of(f.data), "{}", f.path);
                assert_eq!(f.size, f.data.len() as u64);
                seen.push(f.path.to_string());
                Ok::<(), ()>(())
            })
            .unwrap_or_else(|_| panic!("the release walks"));
        let paths: Vec<String> = walked.entries.iter().map(|e| e.path.clone()).collect();
        assert_eq!(seen, paths);
        for e in &walked.entries {
            let bytes = std::fs::read(dir.path().join(&e.path)).unwrap();
            assert_eq!(e.sha256, ObjectId::of(&bytes), "{}", e.path);
        }
        // A visitor's error comes before a rule a later file breaks, as it
        // would had each file been hashed on the spot.
        let fail_at = &paths[100];
        let bounds = Bounds {
            files: 200,
            ..Bounds::REFERENCE
        };
        let mut visited = 0;
        let out = source.walk("1.2.3", bounds, |f| {
            visited += 1;
            if f.path == fail_at.as_str() {
                Err(f.path.to_string())
            } else {
                Ok(())
            }
        });
        assert!(matches!(out, Err(WalkError::Visitor(p)) if &p == fail_at));
        assert_eq!(visited, 101);
        // And without it, the rule the 201st file breaks.
        let r = rejection(&source, bounds).expect("too many files");
        assert_eq!(r.rule(), "too-many-files");
        assert_eq!(r.path(), Some(dir.path().join(&paths[200]).as_path()));
    }

    #[test]
    fn python_order_puts_surrogates_among_bmp() {
        let mut names: Vec<Vec<u8>> = vec![
            b"\xff".to_vec(),
            "\u{e000}".into(),
            b"a".to_vec(),
            "\u{10000}".into(),
        ];
        names.sort_by_cached_key(|n| crate::dirent::python_code_points(n));
        assert_eq!(
            names,
            vec![
                b"a".to_vec(),
                b"\xff".to_vec(),
                "\u{e000}".into(),
                "\u{10000}".into()
            ]
        );
    }

    #[test]
    fn absolute_drops_dot_keeps_dotdot() {
        assert_eq!(
            absolute_like_python(Path::new("/a/./b//c/")),
            PathBuf::from("/a/b/c")
        );
        assert_eq!(
            absolute_like_python(Path::new("/a/../b")),
            PathBuf::from("/a/../b")
        );
    }
}

#[cfg(test)]
mod proptests;
