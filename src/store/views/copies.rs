//! Writable copies: files cloned from objects (`FICLONE`), or copied within a bound.
//!
//! A writable copy shares no inode with the store: each file is a reflink
//! of its object where the filesystem has them (a copy-on-write clone,
//! instant and taking no space), and a buffered copy where it has not
//! (`EXDEV`, `EINVAL`, `ENOTTY`, `EOPNOTSUPP`, `ENOSYS`, as the harness
//! reads them). The buffered copies of one command are bounded together by
//! a [`FallbackBudget`] (2 GiB by default, the harness's
//! `MAX_BUFFERED_FALLBACK_BYTES`): a copy that would pass it is refused
//! before a byte of it is written.
//!
//! [`write_tree`] lays a tree's entries out in an empty directory: files
//! at 0600, directories at 0700, symlinks recreated with their targets,
//! empty directories made. [`writable_copy`] builds such a tree in a
//! temporary directory beside its destination and publishes it with one
//! rename, so a failure leaves nothing behind.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::digest::{ObjectId, ObjectKey};
use crate::error::{Classified, Classify, Error, ErrorKind};
use crate::fsutil::{publish_noreplace, remove_tree_at, Published};
use crate::profile::tree::{Node, TreeEntry};

/// The harness's bound on the bytes one command may copy where the
/// filesystem cannot reflink: `MAX_BUFFERED_FALLBACK_BYTES`, 2 GiB.
pub const MAX_FALLBACK_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// The size of one read of a buffered copy.
const COPY_CHUNK_BYTES: usize = 1024 * 1024;

/// How many bytes buffered copies may still write: one budget for a whole
/// command, however many files it copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FallbackBudget {
    limit: u64,
    used: u64,
}

impl FallbackBudget {
    /// A budget of `limit` bytes, none used yet.
    pub fn new(limit: u64) -> FallbackBudget {
        FallbackBudget { limit, used: 0 }
    }

    /// The bound.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The bytes copied so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// The bytes that may still be copied.
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }
}

impl Default for FallbackBudget {
    fn default() -> Self {
        FallbackBudget::new(MAX_FALLBACK_BYTES)
    }
}

/// How one file was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cloned {
    /// A reflink: the file shares its object's extents.
    Reflinked,
    /// A buffered copy of this many bytes.
    Copied(u64),
}

/// Why one file could not be cloned or copied (the caller names the file).
#[derive(Debug, thiserror::Error)]
pub enum CopyFault {
    /// The filesystem cannot reflink, and the copy would pass the budget.
    #[error("the filesystem cannot reflink it and its {size} bytes would pass the buffered fallback's bound ({remaining} of {limit} bytes left)")]
    OverBudget {
        /// The file's length.
        size: u64,
        /// What the budget has left.
        remaining: u64,
        /// The budget's bound.
        limit: u64,
    },
    /// The clone's length is not the source's.
    #[error("its clone holds {found} bytes, not {size}")]
    BadClone {
        /// The length expected.
        size: u64,
        /// The clone's length.
        found: u64,
    },
    /// The source held more or fewer bytes than expected.
    #[error("its source held {found} bytes where {size} were expected")]
    Changed {
        /// The length expected.
        size: u64,
        /// What was read (at most one byte past `size`).
        found: u64,
    },
    /// A system call failed.
    #[error("{op}: {source}")]
    Os {
        /// The call, in words.
        op: &'static str,
        /// What the system said.
        source: std::io::Error,
    },
}

/// Whether a failed `FICLONE` means the filesystem has no reflink for this
/// pair of files (so a buffered copy serves), as the harness reads it.
fn reflink_unavailable(e: Errno) -> bool {
    matches!(
        e,
        Errno::XDEV | Errno::INVAL | Errno::NOTTY | Errno::OPNOTSUPP | Errno::NOSYS
    )
}

/// Makes `dst` (a new, empty file open for writing) hold the `size` bytes
/// of `src`: a reflink where the filesystem has one, else a buffered copy
/// charged to `budget`, refused before a byte is written when `size` is
/// more than the budget has left.
pub fn clone_or_copy(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    size: u64,
    budget: &mut FallbackBudget,
) -> Result<Cloned, CopyFault> {
    let os = |op: &'static str| {
        move |e: Errno| CopyFault::Os {
            op,
            source: e.into(),
        }
    };
    match rustix::fs::ioctl_ficlone(dst, src) {
        Ok(()) => {
            let found = rustix::fs::fstat(dst)
                .map_err(os("examine the clone"))?
                .st_size as u64;
            if found != size {
                return Err(CopyFault::BadClone { size, found });
            }
            return Ok(Cloned::Reflinked);
        }
        Err(e) if reflink_unavailable(e) => {}
        Err(e) => return Err(os("clone the file")(e)),
    }
    if size > budget.remaining() {
        return Err(CopyFault::OverBudget {
            size,
            remaining: budget.remaining(),
            limit: budget.limit,
        });
    }
    // `dst` is new and a refused clone writes nothing, so it is empty; it
    // is emptied only should it not be. (On ext4 a truncation to nothing
    // also makes the file's close start writing it back, file by file.)
    if rustix::fs::fstat(dst)
        .map_err(os("examine the copy"))?
        .st_size
        != 0
    {
        rustix::fs::ftruncate(dst, 0).map_err(os("empty the copy"))?;
    }
    let copied = copy_bounded(src, dst, size)?;
    budget.used += copied;
    Ok(Cloned::Copied(copied))
}

/// Copies exactly `size` bytes from the start of `src` to the start of
/// `dst` ([`crate::filecopy::copy_prefix`], by 1 MiB at a time), and checks
/// that `src` holds no more.
fn copy_bounded(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, size: u64) -> Result<u64, CopyFault> {
    let os = |op: &'static str| {
        move |e: Errno| CopyFault::Os {
            op,
            source: e.into(),
        }
    };
    let done =
        crate::filecopy::copy_prefix(src, dst, size, COPY_CHUNK_BYTES).map_err(|e| match e {
            crate::filecopy::CopyFailure::Read(e) => os("read the file")(e),
            crate::filecopy::CopyFailure::Write(e) => os("write the copy")(e),
        })?;
    // One byte past the end tells a source that grew from one that did not.
    let mut probe = [0u8; 1];
    let more = loop {
        match rustix::io::pread(src, &mut probe, size) {
            Ok(n) => break n as u64,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(os("read the file")(e)),
        }
    };
    if done != size || more != 0 {
        return Err(CopyFault::Changed {
            size,
            found: done + more,
        });
    }
    Ok(done)
}

/// Why a writable copy or a materialization failed: the harness's
/// `SandboxError`s in its words, the store's damage, or a system call.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// A buffered copy would pass the command's fallback budget.
    #[error("task asset filesystem cannot reflink the snapshot and the buffered fallback limit would be exceeded")]
    FallbackLimit {
        /// The file that would pass it.
        path: PathBuf,
        /// What was wrong, in detail.
        fault: CopyFault,
    },
    /// A reflink gave a file of the wrong length.
    #[error("task asset reflink produced an invalid file: {relative}")]
    InvalidReflink {
        /// The file's path in the tree.
        relative: String,
        /// Where it was being made.
        path: PathBuf,
    },
    /// An object is not the file its entry names (its length or type differ).
    #[error("task asset snapshot file changed: {relative}")]
    ObjectChanged {
        /// The file's path in the tree.
        relative: String,
        /// The object.
        path: PathBuf,
    },
    /// An object's length changed while it was copied.
    #[error("task asset snapshot file changed while materializing: {relative}")]
    ChangedWhileCopying {
        /// The file's path in the tree.
        relative: String,
        /// The object.
        path: PathBuf,
    },
    /// The clone is not a real directory (absent, not a directory, a symlink).
    #[error("asset-staging clone must be a real directory: {}{}", .path.display(), .cause.as_ref().map(|c| format!(": {c}")).unwrap_or_default())]
    CloneNotADirectory {
        /// The clone's path, absolute.
        path: PathBuf,
        /// The system's error, when the `lstat` failed.
        cause: Option<crate::profile::tree::capture::OsCause>,
    },
    /// The clone's path passes through a symlink.
    #[error("asset-staging clone must not traverse symlinks: {}", .path.display())]
    CloneTraversesSymlink {
        /// The clone's path, absolute.
        path: PathBuf,
    },
    /// A declared root is a symlink in the clone (the root as declared,
    /// and its path in the clone, as each `Target*` variant carries them).
    #[error("sandbox_copy target cannot be a symlink: {0}")]
    TargetSymlink(String, PathBuf),
    /// A declared root lies below a symlink in the clone.
    #[error("sandbox_copy target has a symlink parent: {0}")]
    TargetSymlinkParent(String, PathBuf),
    /// A declared root (or something inside it) is neither a file, a
    /// directory nor a symlink in the clone.
    #[error("sandbox_copy target has an unsupported type: {0}")]
    TargetUnsupported(String, PathBuf),
    /// A declared root's parent is neither a file nor a directory.
    #[error("sandbox_copy target parent has an unsupported type: {0}")]
    TargetParentUnsupported(String, PathBuf),
    /// A declared root's parent became a symlink after the checks.
    #[error("sandbox_copy target cannot traverse a symlink: {0}")]
    TargetTraversesSymlink(String, PathBuf),
    /// A filesystem operation failed.
    #[error("could not {op} '{}': {source}", .path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

impl CopyError {
    /// Wraps a system error with what was being done and to which path.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, e: impl Into<std::io::Error>) -> Self {
        CopyError::Io {
            op,
            path: path.into(),
            source: e.into(),
        }
    }

    /// The rule the refusal breaks, one id per variant.
    pub fn rule_id(&self) -> &'static str {
        use CopyError::*;
        match self {
            FallbackLimit { .. } => "task-asset-fallback-limit",
            InvalidReflink { .. } => "task-asset-invalid-reflink",
            ObjectChanged { .. } => "task-asset-snapshot-changed",
            ChangedWhileCopying { .. } => "task-asset-changed-while-materializing",
            CloneNotADirectory { .. } => "asset-staging-clone-not-a-directory",
            CloneTraversesSymlink { .. } => "asset-staging-clone-traverses-symlink",
            TargetSymlink(..) => "sandbox-copy-target-symlink",
            TargetSymlinkParent(..) => "sandbox-copy-target-symlink-parent",
            TargetUnsupported(..) => "sandbox-copy-target-unsupported-type",
            TargetParentUnsupported(..) => "sandbox-copy-target-parent-unsupported-type",
            TargetTraversesSymlink(..) => "sandbox-copy-target-traverses-symlink",
            Io { .. } => "task-asset-io",
        }
    }
}

impl Classify for CopyError {
    fn kind(&self) -> ErrorKind {
        match self {
            CopyError::Io { .. } => ErrorKind::Io,
            CopyError::InvalidReflink { .. }
            | CopyError::ObjectChanged { .. }
            | CopyError::ChangedWhileCopying { .. } => ErrorKind::Integrity,
            CopyError::CloneNotADirectory { cause: Some(c), .. } if c.errno == libc::ENOENT => {
                ErrorKind::NotFound
            }
            _ => ErrorKind::Rejected,
        }
    }

    fn rule(&self) -> Option<&'static str> {
        match self {
            CopyError::Io { .. } => None,
            other => Some(other.rule_id()),
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            CopyError::FallbackLimit { path, .. }
            | CopyError::InvalidReflink { path, .. }
            | CopyError::ObjectChanged { path, .. }
            | CopyError::ChangedWhileCopying { path, .. }
            | CopyError::CloneNotADirectory { path, .. }
            | CopyError::CloneTraversesSymlink { path }
            | CopyError::Io { path, .. } => Some(path),
            CopyError::TargetSymlink(_, p)
            | CopyError::TargetSymlinkParent(_, p)
            | CopyError::TargetUnsupported(_, p)
            | CopyError::TargetParentUnsupported(_, p)
            | CopyError::TargetTraversesSymlink(_, p) => Some(p),
        }
    }

    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }
}

impl From<CopyError> for Error {
    fn from(e: CopyError) -> Self {
        Error::Tree(Classified::new(e))
    }
}

/// The store's objects, as a writable copy reads them.
#[derive(Clone, Copy)]
pub struct ObjectSource<'a> {
    /// The `objects/` directory.
    pub dir: BorrowedFd<'a>,
    /// Its path, for messages.
    pub path: &'a Path,
}

impl ObjectSource<'_> {
    /// Opens the object of a file of `size` bytes holding `sha256`
    /// (`executable`: the `.x` object), checking that it is a regular file
    /// of that length.
    fn open(
        &self,
        sha256: &ObjectId,
        executable: bool,
        size: u64,
        relative: &str,
    ) -> Result<OwnedFd, CopyError> {
        let key = ObjectKey {
            id: *sha256,
            executable,
        };
        let rel = key.rel_path();
        let path = self.path.join(&rel);
        let changed = || CopyError::ObjectChanged {
            relative: relative.to_string(),
            path: path.clone(),
        };
        let fd = match rustix::fs::openat(
            self.dir,
            rel.as_str(),
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::LOOP) => return Err(changed()),
            Err(e) => return Err(CopyError::io("open an object", &path, e)),
        };
        let st =
            rustix::fs::fstat(&fd).map_err(|e| CopyError::io("examine an object", &path, e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_size as u64 != size
        {
            return Err(changed());
        }
        Ok(fd)
    }
}

/// What writing a tree did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Written {
    /// Files made by reflink.
    pub reflinked: u64,
    /// Files made by a buffered copy (empty files included: they have no object).
    pub copied: u64,
    /// The bytes the buffered copies wrote.
    pub bytes_copied: u64,
    /// Directories made, the root not counted.
    pub directories: u64,
    /// Symlinks made.
    pub symlinks: u64,
}

/// Lays `entries` out below the empty directory `root` (shown as
/// `display`): directories at 0700 (parents made as needed), files at 0600
/// cloned or copied from their objects, symlinks with their targets.
/// Entries come parents first, as [`crate::profile::tree::sort_entries`]
/// puts them.
///
/// Directories and symlinks are made first, in order; the files are then
/// cloned or copied by one thread per core when their bytes together fit in
/// what `budget` has left (so that no order of the copies can pass it), and
/// in order otherwise. Either way the error returned is the one the first
/// failing entry, in the entries' order, gives, as when each entry is made
/// in turn.
pub fn write_tree(
    objects: ObjectSource<'_>,
    entries: &[TreeEntry],
    root: BorrowedFd<'_>,
    display: &Path,
    budget: &mut FallbackBudget,
) -> Result<Written, CopyError> {
    let mut written = Written::default();
    let mut made = std::collections::HashSet::new();
    // The structure: every directory and symlink, up to the first failure.
    let mut failed: Option<(usize, CopyError)> = None;
    for (i, e) in entries.iter().enumerate() {
        if let Err(err) = make_structure(root, e, &mut made, display, &mut written) {
            failed = Some((i, err));
            break;
        }
    }
    let stop = failed.as_ref().map_or(entries.len(), |(i, _)| *i);
    let files: Vec<usize> = (0..stop)
        .filter(|&i| matches!(entries[i].node, Node::File { .. }))
        .collect();
    let total: u64 = files
        .iter()
        .map(|&i| match entries[i].node {
            Node::File { size, .. } => size,
            _ => 0,
        })
        .fold(0u64, u64::saturating_add);
    let threads = copy_threads().min(files.len());
    let (file_written, file_failed) = if threads > 1 && total <= budget.remaining() {
        copy_files_parallel(objects, entries, &files, root, display, budget, threads)
    } else {
        copy_files_in_order(objects, entries, &files, root, display, budget)
    };
    written.reflinked += file_written.reflinked;
    written.copied += file_written.copied;
    written.bytes_copied += file_written.bytes_copied;
    // The first failure in the entries' order wins.
    match (file_failed, failed) {
        (Some((_, err)), _) | (None, Some((_, err))) => Err(err),
        (None, None) => Ok(written),
    }
}

/// How many threads copy a tree's files: one per core, at most 8.
fn copy_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 8))
}

/// Makes what entry `e` needs besides its bytes: its missing parents, and
/// the entry itself when it is a directory or a symlink.
fn make_structure(
    root: BorrowedFd<'_>,
    e: &TreeEntry,
    made: &mut std::collections::HashSet<String>,
    display: &Path,
    written: &mut Written,
) -> Result<(), CopyError> {
    if let Some((parent, _)) = e.path.rsplit_once('/') {
        make_parents(root, parent, made, display, written)?;
    }
    match &e.node {
        Node::Directory => {
            if made.insert(e.path.clone()) {
                make_dir(root, &e.path, &display.join(&e.path))?;
                written.directories += 1;
            }
        }
        Node::Symlink { target: to } => {
            rustix::fs::symlinkat(to.as_str(), root, e.path.as_str())
                .map_err(|err| CopyError::io("create a symlink", display.join(&e.path), err))?;
            written.symlinks += 1;
        }
        Node::File { .. } => {}
    }
    Ok(())
}

/// Makes the files `files` (indices into `entries`) one after another,
/// stopping at the first failure: the index and error of that failure.
fn copy_files_in_order(
    objects: ObjectSource<'_>,
    entries: &[TreeEntry],
    files: &[usize],
    root: BorrowedFd<'_>,
    display: &Path,
    budget: &mut FallbackBudget,
) -> (Written, Option<(usize, CopyError)>) {
    let mut written = Written::default();
    for &i in files {
        if let Err(err) = make_file(objects, &entries[i], root, display, budget, &mut written) {
            return (written, Some((i, err)));
        }
    }
    (written, None)
}

/// Makes the files `files` (indices into `entries`, in order) on `threads`
/// threads, which take them in order; once a file fails, no file after it
/// is begun, and of the failures the first in order is returned. The
/// caller has checked that all their bytes fit in `budget`.
fn copy_files_parallel(
    objects: ObjectSource<'_>,
    entries: &[TreeEntry],
    files: &[usize],
    root: BorrowedFd<'_>,
    display: &Path,
    budget: &mut FallbackBudget,
    threads: usize,
) -> (Written, Option<(usize, CopyError)>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    // The position (in `files`) of the first failure known so far.
    let first_failure = AtomicUsize::new(usize::MAX);
    let failure: Mutex<Option<(usize, CopyError)>> = Mutex::new(None);
    let start = *budget;
    let results: Vec<(Written, u64)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut written = Written::default();
                    // Each thread's own share: all of it fits, as checked.
                    let mut mine = FallbackBudget::new(start.remaining());
                    loop {
                        let k = next.fetch_add(1, Ordering::SeqCst);
                        if k >= files.len() || k > first_failure.load(Ordering::SeqCst) {
                            break;
                        }
                        let i = files[k];
                        let made =
                            make_file(objects, &entries[i], root, display, &mut mine, &mut written);
                        if let Err(err) = made {
                            first_failure.fetch_min(k, Ordering::SeqCst);
                            let mut slot = failure.lock().unwrap_or_else(|p| p.into_inner());
                            if slot.as_ref().is_none_or(|(j, _)| i < *j) {
                                *slot = Some((i, err));
                            }
                        }
                    }
                    (written, mine.used())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut written = Written::default();
    for (w, used) in results {
        written.reflinked += w.reflinked;
        written.copied += w.copied;
        written.bytes_copied += w.bytes_copied;
        budget.used = budget.used.saturating_add(used);
    }
    let failed = failure.into_inner().unwrap_or_else(|p| p.into_inner());
    (written, failed)
}

/// Makes one file entry (its parents exist): created at 0600, its bytes
/// cloned or copied from its object.
fn make_file(
    objects: ObjectSource<'_>,
    e: &TreeEntry,
    root: BorrowedFd<'_>,
    display: &Path,
    budget: &mut FallbackBudget,
    written: &mut Written,
) -> Result<(), CopyError> {
    let Node::File { size, sha256, mode } = &e.node else {
        return Ok(());
    };
    let target = display.join(&e.path);
    let dst = rustix::fs::openat(
        root,
        e.path.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|err| CopyError::io("create a file", &target, err))?;
    if *size > 0 {
        let src = objects.open(sha256, mode & 0o111 != 0, *size, &e.path)?;
        let object = || {
            objects.path.join(
                ObjectKey {
                    id: *sha256,
                    executable: mode & 0o111 != 0,
                }
                .rel_path(),
            )
        };
        match clone_or_copy(src.as_fd(), dst.as_fd(), *size, budget) {
            Ok(Cloned::Reflinked) => written.reflinked += 1,
            Ok(Cloned::Copied(n)) => {
                written.copied += 1;
                written.bytes_copied += n;
            }
            Err(fault @ CopyFault::OverBudget { .. }) => {
                return Err(CopyError::FallbackLimit {
                    path: target,
                    fault,
                })
            }
            Err(CopyFault::BadClone { .. }) => {
                return Err(CopyError::InvalidReflink {
                    relative: e.path.clone(),
                    path: target,
                })
            }
            Err(CopyFault::Changed { .. }) => {
                return Err(CopyError::ChangedWhileCopying {
                    relative: e.path.clone(),
                    path: object(),
                })
            }
            Err(CopyFault::Os { op, source }) => {
                return Err(CopyError::Io {
                    op,
                    path: target,
                    source,
                })
            }
        }
    } else {
        written.copied += 1;
    }
    rustix::fs::fchmod(&dst, Mode::from_raw_mode(0o600))
        .map_err(|err| CopyError::io("set a file's mode", &target, err))
}

/// Makes each missing directory of `dir` (a path below the root) at 0700.
fn make_parents(
    root: BorrowedFd<'_>,
    dir: &str,
    made: &mut std::collections::HashSet<String>,
    display: &Path,
    written: &mut Written,
) -> Result<(), CopyError> {
    if made.contains(dir) {
        return Ok(());
    }
    let mut end = 0;
    loop {
        let next = dir[end..].find('/').map(|i| end + i).unwrap_or(dir.len());
        let part = &dir[..next];
        if made.insert(part.to_string()) {
            make_dir(root, part, &display.join(part))?;
            written.directories += 1;
        }
        if next == dir.len() {
            return Ok(());
        }
        end = next + 1;
    }
}

/// Makes one directory at exactly 0700, whatever the umask.
fn make_dir(root: BorrowedFd<'_>, path: &str, display: &Path) -> Result<(), CopyError> {
    rustix::fs::mkdirat(root, path, Mode::from_raw_mode(0o700))
        .map_err(|e| CopyError::io("create a directory", display, e))?;
    rustix::fs::chmodat(root, path, Mode::from_raw_mode(0o700), AtFlags::empty())
        .map_err(|e| CopyError::io("set a directory's mode", display, e))
}

/// Makes a writable copy of `entries` at `name` in `parent` (which must
/// not exist): built in a temporary directory beside it (whose name
/// `mark` is told first, so that whoever cleans up after a crash can
/// find it), published with one rename that refuses to replace
/// anything, and removed again on any failure.
pub fn writable_copy(
    objects: ObjectSource<'_>,
    entries: &[TreeEntry],
    parent: BorrowedFd<'_>,
    name: &OsStr,
    display: &Path,
    budget: &mut FallbackBudget,
    mark: impl FnOnce(&str) -> crate::error::Result<()>,
) -> crate::error::Result<Written> {
    let tmp = crate::store::views::build::temp_name(name);
    mark(&tmp)?;
    let tmp_display = display.with_file_name(&tmp);
    rustix::fs::mkdirat(parent, tmp.as_str(), Mode::from_raw_mode(0o700))
        .map_err(|e| CopyError::io("create a directory", &tmp_display, e))?;
    let result = (|| -> crate::error::Result<Written> {
        let root = crate::fsutil::open_dir(parent, tmp.as_str())
            .map_err(|e| CopyError::io("open a directory", &tmp_display, e))?;
        let written = write_tree(objects, entries, root.as_fd(), display, budget)?;
        rustix::fs::fchmod(&root, Mode::from_raw_mode(0o700))
            .map_err(|e| CopyError::io("set a directory's mode", display, e))?;
        match publish_noreplace(parent, tmp.as_str(), parent, name) {
            Ok(Published::Created) => Ok(written),
            Ok(Published::Existed) => Err(Error::from(crate::error::Clash::Taken {
                path: display.to_path_buf(),
            })),
            Err(e) => Err(CopyError::io("publish the copy", display, e).into()),
        }
    })();
    if result.is_err() {
        let _ = remove_tree_at(parent, &tmp);
    }
    result
}

#[cfg(test)]
#[path = "copies_tests.rs"]
mod tests;
