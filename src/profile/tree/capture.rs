//! Capturing a declared task input from a directory, entry for entry and rejection for rejection as the harness does.
//!
//! The harness's `_SnapshotBuilder.copy_descriptor` walks each declared
//! input through directory handles and copies it; this module walks it the
//! same way, in the same order, with the same checks, but copies nothing:
//! it gives the [`TreeEntry`] list (in the order of [`super::sort_entries`]),
//! the bytes counted against the bounds, and each file's SHA-256, read
//! once. Every directory and file is opened relative to its parent's handle
//! (`openat` with `O_NOFOLLOW`), its `fstat` compared with the `lstat` the
//! walk saw, and every change during the walk is detected as the harness
//! detects it: a directory or file whose device, inode, mode, size, mtime or
//! ctime (in nanoseconds) differ after it was read, a file that read to
//! another length than `fstat` said, a symlink whose `lstat` or target
//! changed.
//!
//! Two flavours: a `sandbox_copy` input ([`Flavour::SandboxCopy`]: symlinks
//! refused, modes recorded as 0, its parents recorded as directories) and a
//! sandbox dependency ([`Flavour::Dependency`], rooted at
//! [`super::DEPENDENCY_ROOT`]: symlinks kept when relative and bounded, the
//! full permission bits recorded), whose links are then checked as the
//! harness's `_validate_dependency_symlinks` checks them
//! ([`validate_dependency_symlinks`]). The bounds ([`Limits`]) are the
//! harness's constants by default and parameters here, and one [`Budget`]
//! is shared by every input of a snapshot, as `_SnapshotBudget` is.
//!
//! A rejection is a [`CaptureError`], whose text is the harness's
//! `SandboxError` message word for word.
//!
//! Where the answer is not the harness's, exactly:
//!
//! - a path that is not UTF-8 shows U+FFFD in a message where Python's
//!   text holds a lone surrogate (the rule and the path's place are the same);
//! - a directory that cannot be listed: Python's text ends with the
//!   descriptor's number (`[Errno 13] Permission denied: 7`), which is the
//!   harness process's own; here the text ends with the error;
//! - a system call the harness leaves unwrapped (the `lstat` of a listed
//!   name, an `fstat`, a `read`) raises a bare `OSError` there, not a
//!   `SandboxError`; here it is [`CaptureError::Os`], with `OSError`'s text
//!   (a name's `repr` escapes quotes, backslashes and ASCII control
//!   characters as Python does, not the other characters Python escapes);
//! - a dependency's symlink resolved above its payload's parent: see
//!   [`validate_dependency_symlinks`];
//! - the harness also writes a copy, and a failure of its own disk (full,
//!   read-only) refuses there what is accepted here.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::Read as _;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use sha2::{Digest as _, Sha256};

use super::{Node, TreeEntry, DEPENDENCY_MOUNT_BASENAME, DEPENDENCY_ROOT, VITE_TEMP_DIR};
use crate::digest::ObjectId;

/// The harness's `MAX_TASK_ASSET_ENTRIES`.
pub const MAX_TASK_ASSET_ENTRIES: u64 = 100_000;
/// The harness's `MAX_TASK_ASSET_PATH_BYTES`.
pub const MAX_TASK_ASSET_PATH_BYTES: u64 = 4_096;
/// The harness's `MAX_TASK_ASSET_BYTES`: 2 GiB.
pub const MAX_TASK_ASSET_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// The harness's `SANDBOX_WORKSPACE`, where a task's clone is mounted.
pub const SANDBOX_WORKSPACE: &str = "/workspace";
/// How much the walk reads at a time (the harness's `COPY_CHUNK_BYTES`).
const CHUNK_BYTES: usize = 1024 * 1024;

/// The bounds of one snapshot's capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most entries, all inputs together (`MAX_TASK_ASSET_ENTRIES`).
    pub max_entries: u64,
    /// The most UTF-8 bytes of an entry's path, and of a symlink's target
    /// (`MAX_TASK_ASSET_PATH_BYTES`).
    pub max_path_bytes: u64,
    /// The most bytes, all inputs together: files' lengths and symlinks'
    /// targets' lengths (`MAX_TASK_ASSET_BYTES`).
    pub max_total_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entries: MAX_TASK_ASSET_ENTRIES,
            max_path_bytes: MAX_TASK_ASSET_PATH_BYTES,
            max_total_bytes: MAX_TASK_ASSET_BYTES,
        }
    }
}

/// What a snapshot's inputs have used of [`Limits`] so far (`_SnapshotBudget`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    /// The entries recorded.
    pub entries: u64,
    /// The bytes counted: files' lengths and symlinks' targets' lengths.
    pub total_bytes: u64,
}

/// Which of the harness's two walks an input gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// A `sandbox_copy` root: a symlink anywhere is refused, and every file
    /// is recorded at mode 0.
    SandboxCopy,
    /// A sandbox dependency (`allow_symlinks`, `preserve_modes`): relative
    /// symlinks are kept, and files record their full permission bits.
    Dependency,
}

/// The system's error behind a rejection, as Python's `OSError` prints it:
/// `[Errno N] text`, then `: 'name'` when the call named a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OsCause {
    /// The error number.
    pub errno: i32,
    /// The name the failing call was given, if any.
    pub filename: Option<String>,
}

impl OsCause {
    /// The cause of `errno` from a call given `filename`.
    pub fn new(errno: Errno, filename: Option<&[u8]>) -> OsCause {
        OsCause {
            errno: errno.raw_os_error(),
            filename: filename.map(|n| String::from_utf8_lossy(n).into_owned()),
        }
    }

    fn of_io(e: &std::io::Error) -> OsCause {
        OsCause {
            errno: e.raw_os_error().unwrap_or(Errno::IO.raw_os_error()),
            filename: None,
        }
    }
}

impl fmt::Display for OsCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = std::io::Error::from_raw_os_error(self.errno).to_string();
        let suffix = format!(" (os error {})", self.errno);
        let text = text.strip_suffix(&suffix).unwrap_or(&text);
        write!(f, "[Errno {}] {text}", self.errno)?;
        if let Some(name) = &self.filename {
            write!(f, ": {}", python_repr(name))?;
        }
        Ok(())
    }
}

/// A string as Python's `repr` writes it (printable characters kept).
fn python_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Why the harness refuses an input; the text is its `SandboxError`'s, word for word.
///
/// Paths are the harness's: a `sandbox_copy` entry's path from the
/// repository's root, a dependency's from `payload`. A path that is not
/// UTF-8 is shown with U+FFFD where the harness's text holds Python's
/// lone surrogates.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CaptureError {
    /// A directory could not be listed.
    #[error("sandbox_copy directory is unreadable: {path}: {cause}")]
    DirectoryUnreadable {
        /// The directory.
        path: String,
        /// The system's error.
        cause: OsCause,
    },
    /// A symlink inside a `sandbox_copy` input, or on the way to any input.
    #[error("sandbox_copy must not traverse a symlink: {0}")]
    Symlink(String),
    /// The `lstat` of a declared path's component failed.
    #[error("sandbox_copy path is unavailable: {path}: {cause}")]
    PathUnavailable {
        /// The path up to the component.
        path: String,
        /// The system's error.
        cause: OsCause,
    },
    /// A declared path's parent component is not a directory.
    #[error("sandbox_copy parent must be a directory: {0}")]
    ParentNotDirectory(String),
    /// An entry is neither a regular file nor a directory (nor, in a
    /// dependency, a symlink): a FIFO, a socket, a device.
    #[error("sandbox_copy accepts only regular files and directories: {0}")]
    NotFileOrDirectory(String),
    /// Opening an entry failed.
    #[error("sandbox_copy path changed or is unreadable: {path}: {cause}")]
    Unopenable {
        /// The entry.
        path: String,
        /// The system's error.
        cause: OsCause,
    },
    /// What was opened is not what `lstat` saw (device, inode or type).
    #[error("sandbox_copy path changed while opening: {0}")]
    ChangedWhileOpening(String),
    /// A directory changed while it was walked.
    #[error("sandbox_copy directory changed while snapshotting: {0}")]
    DirectoryChanged(String),
    /// A file changed while it was read.
    #[error("sandbox_copy file changed while snapshotting: {0}")]
    FileChanged(String),
    /// The inputs together hold more bytes than [`Limits::max_total_bytes`].
    #[error("sandbox_copy exceeds the total byte limit")]
    TotalBytes,
    /// The inputs together hold more entries than [`Limits::max_entries`].
    #[error("sandbox_copy exceeds the entry limit")]
    Entries,
    /// An entry's path is longer than [`Limits::max_path_bytes`].
    #[error("sandbox_copy exceeds the path byte limit")]
    PathBytes,
    /// An entry's path is not UTF-8.
    #[error("sandbox_copy path is not valid UTF-8: {0}")]
    PathNotUtf8(String),
    /// Two entries of different kinds at one path.
    #[error("sandbox_copy paths collide at {0}")]
    Collide(String),
    /// A dependency's symlink could not be read, or its target is not UTF-8.
    #[error("dependency symlink is unreadable or not UTF-8: {0}")]
    SymlinkUnreadable(String),
    /// A dependency's symlink is empty, absolute or holds a NUL.
    #[error("dependency symlink must be a bounded relative link: {0}")]
    SymlinkNotRelative(String),
    /// A dependency's symlink's target is longer than [`Limits::max_path_bytes`].
    #[error("dependency symlink target exceeds the path limit: {0}")]
    SymlinkTooLong(String),
    /// A dependency's symlink changed while it was read.
    #[error("dependency symlink changed while snapshotting: {0}")]
    SymlinkChanged(String),
    /// A dependency's symlink, read from its mount target, leaves the sandbox
    /// workspace.
    #[error("dependency symlink escapes the sandbox workspace: {0}")]
    SymlinkEscapesWorkspace(String),
    /// A dependency's symlink points into its payload (as written) but
    /// resolves to nothing there.
    #[error("dependency symlink is dangling or escapes its snapshot: {0}")]
    SymlinkDangling(String),
    /// A runtime's symlink whose target, read from its own place, leaves
    /// the runtime's snapshot: what it shows would be bytes the snapshot
    /// does not name.
    #[error("GitNexus runtime symlink leaves the runtime's snapshot: {0}")]
    SymlinkEscapesRuntime(String),
    /// A system call the harness does not wrap failed (an `lstat` of a
    /// listed name, an `fstat`, a `read`): Python's `OSError` as it prints.
    #[error("{0}")]
    Os(OsCause),
}

impl CaptureError {
    /// The rule the rejection breaks, one id per variant.
    pub fn rule(&self) -> &'static str {
        use CaptureError::*;
        match self {
            DirectoryUnreadable { .. } => "task-asset-directory-unreadable",
            Symlink(_) => "task-asset-symlink",
            PathUnavailable { .. } => "task-asset-path-unavailable",
            ParentNotDirectory(_) => "task-asset-parent-not-directory",
            NotFileOrDirectory(_) => "task-asset-not-file-or-directory",
            Unopenable { .. } => "task-asset-unopenable",
            ChangedWhileOpening(_) => "task-asset-changed-while-opening",
            DirectoryChanged(_) => "task-asset-directory-changed",
            FileChanged(_) => "task-asset-file-changed",
            TotalBytes => "task-asset-total-bytes",
            Entries => "task-asset-entries",
            PathBytes => "task-asset-path-bytes",
            PathNotUtf8(_) => "task-asset-path-not-utf8",
            Collide(_) => "task-asset-paths-collide",
            SymlinkUnreadable(_) => "dependency-symlink-unreadable",
            SymlinkNotRelative(_) => "dependency-symlink-not-relative",
            SymlinkTooLong(_) => "dependency-symlink-too-long",
            SymlinkChanged(_) => "dependency-symlink-changed",
            SymlinkEscapesWorkspace(_) => "dependency-symlink-escapes-workspace",
            SymlinkDangling(_) => "dependency-symlink-dangling",
            SymlinkEscapesRuntime(_) => "runtime-symlink-escapes",
            Os(_) => "task-asset-io",
        }
    }
}

/// A path's bytes as the harness's messages show it.
fn shown(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

/// The parts of a path as `PurePosixPath(path).parts` gives them for a
/// relative path: empty and `.` components dropped.
fn parts(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.split(|&b| b == b'/')
        .filter(|p| !p.is_empty() && *p != b".")
}

/// `PurePosixPath(path).as_posix()` for a relative path (`.` when empty).
fn posix(path: &[u8]) -> Vec<u8> {
    let joined = parts(path).collect::<Vec<_>>().join(&b'/');
    if joined.is_empty() {
        b".".to_vec()
    } else {
        joined
    }
}

fn join(parent: &[u8], name: &[u8]) -> Vec<u8> {
    if parent == b"." {
        return name.to_vec();
    }
    let mut out = Vec::with_capacity(parent.len() + 1 + name.len());
    out.extend_from_slice(parent);
    out.push(b'/');
    out.extend_from_slice(name);
    out
}

/// `PurePosixPath(path).parent` for a normalised relative path.
fn parent_of(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(at) => &path[..at],
        None => b".",
    }
}

/// What `_mutation_identity` compares: device, inode, mode, size, mtime
/// and ctime in nanoseconds.
fn mutation_identity(s: &Stat) -> (u64, u64, u32, i64, i128, i128) {
    let ns = |sec: i64, nsec: i64| i128::from(sec) * 1_000_000_000 + i128::from(nsec);
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    (
        s.st_dev as u64,
        s.st_ino as u64,
        s.st_mode as u32,
        s.st_size as i64,
        ns(s.st_mtime as i64, s.st_mtime_nsec as i64),
        ns(s.st_ctime as i64, s.st_ctime_nsec as i64),
    )
}

fn file_type(s: &Stat) -> FileType {
    FileType::from_raw_mode(s.st_mode)
}

fn lstat_at(dir: BorrowedFd<'_>, name: &[u8]) -> Result<Stat, Errno> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
}

fn fstat(fd: BorrowedFd<'_>) -> Result<Stat, CaptureError> {
    rustix::fs::fstat(fd).map_err(|e| CaptureError::Os(OsCause::new(e, None)))
}

/// A directory's names, without `.` and `..`, sorted as Python sorts
/// `os.listdir`'s strings (by code point, undecodable bytes as surrogates).
fn list_sorted(dir: BorrowedFd<'_>) -> Result<Vec<Vec<u8>>, Errno> {
    let mut names = crate::dirent::list_names(dir)?;
    crate::dirent::sort_like_python(&mut names);
    Ok(names)
}

/// Opens `name` in `parent` as the harness's `_open_child` does: `lstat`,
/// refuse a symlink, a non-directory where a directory is needed, and
/// anything but a directory or regular file; open with `O_NOFOLLOW`
/// (`O_DIRECTORY` or `O_NONBLOCK`); refuse what opened if its device,
/// inode or type differ from what `lstat` saw.
fn open_child(
    parent: BorrowedFd<'_>,
    name: &[u8],
    relative: &[u8],
    require_directory: bool,
) -> Result<OwnedFd, CaptureError> {
    let meta = lstat_at(parent, name).map_err(|e| CaptureError::PathUnavailable {
        path: shown(relative),
        cause: OsCause::new(e, Some(name)),
    })?;
    let kind = file_type(&meta);
    if kind == FileType::Symlink {
        return Err(CaptureError::Symlink(shown(relative)));
    }
    if require_directory && kind != FileType::Directory {
        return Err(CaptureError::ParentNotDirectory(shown(relative)));
    }
    if kind != FileType::Directory && kind != FileType::RegularFile {
        return Err(CaptureError::NotFileOrDirectory(shown(relative)));
    }
    let mut flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    flags |= if kind == FileType::Directory {
        OFlags::DIRECTORY
    } else {
        OFlags::NONBLOCK
    };
    let fd = rustix::fs::openat(parent, name, flags, Mode::empty()).map_err(|e| {
        CaptureError::Unopenable {
            path: shown(relative),
            cause: OsCause::new(e, Some(name)),
        }
    })?;
    let opened = fstat(fd.as_fd())?;
    let opened_kind = file_type(&opened);
    if opened_kind != FileType::Directory && opened_kind != FileType::RegularFile {
        return Err(CaptureError::NotFileOrDirectory(shown(relative)));
    }
    if (opened.st_dev, opened.st_ino, opened_kind) != (meta.st_dev, meta.st_ino, kind) {
        return Err(CaptureError::ChangedWhileOpening(shown(relative)));
    }
    Ok(fd)
}

/// Opens a declared path below `root` as the harness's `_open_relative`
/// does: component by component, each refused when `lstat` finds a
/// symlink, a non-directory where a directory is needed, or anything but a
/// directory or regular file, and when what opened (with `O_NOFOLLOW`) is
/// not what `lstat` saw; every component but the last a directory. `relative` is a declaration the
/// caller has already validated (relative, no `..`).
///
/// # Errors
///
/// The [`CaptureError`] the harness raises for the first component refused.
pub fn open_relative(root: BorrowedFd<'_>, relative: &str) -> Result<OwnedFd, CaptureError> {
    let all: Vec<&[u8]> = parts(relative.as_bytes()).collect();
    let mut current = rustix::io::dup(root).map_err(|e| CaptureError::Os(OsCause::new(e, None)))?;
    let mut so_far = Vec::new();
    for (index, part) in all.iter().enumerate() {
        so_far = if so_far.is_empty() {
            part.to_vec()
        } else {
            join(&so_far, part)
        };
        current = open_child(current.as_fd(), part, &so_far, index + 1 != all.len())?;
    }
    Ok(current)
}

/// Where a walk hands each file's bytes as it reads them, when the caller
/// wants them (to store them) and hashes them itself, elsewhere.
///
/// The walk still reads each file once, in its order, with every check;
/// for each regular file it calls [`FileSink::start`], then
/// [`FileSink::bytes`] for each chunk read, then [`FileSink::finish`] once
/// the file is read whole and found unchanged, or [`FileSink::abandon`]
/// when it is refused. The id `finish` returns is recorded as the file's
/// `sha256`: the sink may return a stand-in it replaces once it has hashed
/// the bytes.
pub trait FileSink {
    /// A file of `size` bytes (as `fstat` said), open as `fd` (`None` for
    /// bytes read from elsewhere, a git blob), starts; `executable`: the
    /// mode recorded for it has an execute bit.
    fn start(&mut self, size: u64, executable: bool, fd: Option<BorrowedFd<'_>>);
    /// The file's next bytes.
    fn bytes(&mut self, data: &[u8]);
    /// The file was read whole and is unchanged: the id to record.
    fn finish(&mut self) -> ObjectId;
    /// The file was refused: what was handed of it is dropped.
    fn abandon(&mut self);
    /// Where the walk may read the current file's bytes straight into
    /// (appending), instead of handing them to [`FileSink::bytes`]: a sink
    /// that keeps the file whole. `None` by default.
    fn buffer(&mut self) -> Option<&mut Vec<u8>> {
        None
    }
    /// Takes the current file, started and not yet read, to copy, judge
    /// and hash off the walk's thread ([`DeferredFile`]), and returns the
    /// stand-in id to record; or hands it back to be read by the walk, as
    /// it does by default. A sink that takes files reports the failure of
    /// the first of them, in the walk's order, in place of the walk's own
    /// result, which assumed each unchanged.
    fn defer(&mut self, file: Box<DeferredFile>) -> Result<ObjectId, Box<DeferredFile>> {
        Err(file)
    }
}

/// A file whose bytes the walk leaves to its sink to copy off the walk's
/// thread ([`FileSink::defer`]), with what the walk's read would judge
/// them by.
#[derive(Debug)]
pub struct DeferredFile {
    fd: OwnedFd,
    relative: String,
    before: Stat,
    size: u64,
    /// The bytes counted against the total bound before this file's.
    counted_before: u64,
    max_total_bytes: u64,
}

/// Why a [`DeferredFile`]'s copy failed.
#[derive(Debug)]
pub enum DeferredFault {
    /// The walk's refusal, had it read the file itself.
    Capture(CaptureError),
    /// Writing the copy.
    Write(Errno),
}

impl DeferredFile {
    /// The file's length, as `fstat` said before it was read.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The open file.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Its path in the walk's terms (`assets/sub/a.txt`).
    pub fn relative(&self) -> &str {
        &self.relative
    }

    /// Reads the file to its end into `each`, a chunk of `chunk`'s length
    /// at a time, and judges it as the walk's own read does: refused once
    /// the bytes counted pass the total bound, or when it changed.
    pub fn read_into(
        &self,
        chunk: &mut [u8],
        each: &mut dyn FnMut(&[u8]),
    ) -> Result<(), CaptureError> {
        let counted = self.count_from(0, chunk, each)?;
        self.judge(counted)
    }

    /// Copies the file into `dst` ([`crate::filecopy::copy_prefix`]), and
    /// judges it as [`DeferredFile::read_into`] does; a file that grew is
    /// counted on, a chunk at a time, for the refusal.
    pub fn copy_into(&self, dst: BorrowedFd<'_>) -> Result<(), DeferredFault> {
        use crate::filecopy::{copy_prefix, CopyFailure};
        let limit = self.size.saturating_add(1);
        let copied = match copy_prefix(self.fd.as_fd(), dst, limit, CHUNK_BYTES) {
            Ok(n) => n,
            Err(CopyFailure::Read(e)) => {
                return Err(DeferredFault::Capture(CaptureError::Os(OsCause::new(
                    e, None,
                ))))
            }
            Err(CopyFailure::Write(e)) => {
                // The walk's refusal, had it read the file, comes first.
                let mut chunk = vec![0u8; CHUNK_BYTES];
                let counted = self.count_from(0, &mut chunk, &mut |_| {});
                return Err(match counted.and_then(|n| self.judge(n)) {
                    Err(refused) => DeferredFault::Capture(refused),
                    Ok(()) => DeferredFault::Write(e),
                });
            }
        };
        if self.over(copied) {
            return Err(DeferredFault::Capture(CaptureError::TotalBytes));
        }
        let counted = if copied == limit {
            let mut chunk = vec![0u8; CHUNK_BYTES];
            self.count_from(copied, &mut chunk, &mut |_| {})
                .map_err(DeferredFault::Capture)?
        } else {
            copied
        };
        self.judge(counted).map_err(DeferredFault::Capture)
    }

    fn over(&self, counted: u64) -> bool {
        self.counted_before.saturating_add(counted) > self.max_total_bytes
    }

    /// Reads on from byte `at` to the end, as the walk's chunked read
    /// does; returns the bytes counted in all.
    fn count_from(
        &self,
        mut at: u64,
        chunk: &mut [u8],
        each: &mut dyn FnMut(&[u8]),
    ) -> Result<u64, CaptureError> {
        loop {
            let n = match rustix::io::pread(&self.fd, &mut *chunk, at) {
                Ok(0) => return Ok(at),
                Ok(n) => n,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(CaptureError::Os(OsCause::new(e, None))),
            };
            at += n as u64;
            if self.over(at) {
                return Err(CaptureError::TotalBytes);
            }
            each(&chunk[..n]);
        }
    }

    /// The walk's judgement once a file is read: `counted` bytes, its
    /// `fstat` unchanged.
    fn judge(&self, counted: u64) -> Result<(), CaptureError> {
        let after = fstat(self.fd.as_fd())?;
        if counted != self.size || mutation_identity(&self.before) != mutation_identity(&after) {
            return Err(CaptureError::FileChanged(self.relative.clone()));
        }
        Ok(())
    }
}

/// One walk's entries, as the harness's `_SnapshotBuilder` records them.
pub struct Builder<'b> {
    flavour: Flavour,
    limits: Limits,
    budget: &'b mut Budget,
    /// Where files' bytes go instead of the builder's own hasher.
    sink: Option<&'b mut dyn FileSink>,
    entries: BTreeMap<String, TreeEntry>,
    total_bytes: u64,
    /// The read buffer, made at the first file and kept for every other.
    chunk: Vec<u8>,
    /// Whether this builder captures a GitNexus runtime ([`Builder::runtime`]).
    runtime: bool,
    /// Run once, after the walk's first read of a file's bytes or of a
    /// symlink's target: how tests change a tree mid-walk, as upstream's
    /// tests patch its chunk reader.
    #[cfg(test)]
    pub(super) after_first_read: Option<Box<dyn FnOnce()>>,
}

impl fmt::Debug for Builder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("flavour", &self.flavour)
            .field("limits", &self.limits)
            .field("budget", &self.budget)
            .field("entries", &self.entries)
            .field("total_bytes", &self.total_bytes)
            .finish_non_exhaustive()
    }
}

impl<'b> Builder<'b> {
    /// A builder of one flavour, counting against `budget` (shared by all
    /// the builders of one snapshot) within `limits`.
    pub fn new(flavour: Flavour, limits: Limits, budget: &'b mut Budget) -> Builder<'b> {
        Builder {
            flavour,
            limits,
            budget,
            entries: BTreeMap::new(),
            total_bytes: 0,
            chunk: Vec::new(),
            runtime: false,
            sink: None,
            #[cfg(test)]
            after_first_read: None,
        }
    }

    /// This builder, handing each file's bytes to `sink` ([`FileSink`]).
    pub fn with_sink(mut self, sink: &'b mut dyn FileSink) -> Builder<'b> {
        self.sink = Some(sink);
        self
    }

    /// Makes this (dependency-flavoured) builder capture a GitNexus runtime:
    /// an absolute symlink leaves the runtime's snapshot
    /// ([`CaptureError::SymlinkEscapesRuntime`]), and
    /// [`RUNTIME_SHARED_LINK`], whose place the mount rules have checked,
    /// is recorded as [`RUNTIME_SHARED_LINK_TARGET`] whatever the checkout's
    /// link says (that link is still read, and must not change meanwhile).
    pub fn runtime(mut self) -> Builder<'b> {
        self.runtime = true;
        self
    }

    /// The bytes this builder counted: its files' and symlinks' targets'
    /// lengths (`_SnapshotBuilder.total_bytes`).
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// The entries recorded so far, in the order of [`super::sort_entries`]
    /// (`finished_entries`).
    pub fn finished_entries(&self) -> Vec<TreeEntry> {
        self.entries.values().cloned().collect()
    }

    /// The entry at `path`, if one is recorded.
    pub fn entry(&self, path: &str) -> Option<&TreeEntry> {
        self.entries.get(path)
    }

    /// Opens `relative` below `root` ([`open_relative`]) and records it
    /// with all it holds at `relative`: a `sandbox_copy` declaration's walk.
    ///
    /// # Errors
    ///
    /// The harness's rejection of the input ([`CaptureError`]).
    pub fn capture(&mut self, root: BorrowedFd<'_>, relative: &str) -> Result<(), CaptureError> {
        let fd = open_relative(root, relative)?;
        self.copy_descriptor(fd.as_fd(), relative.as_bytes())
    }

    /// Records what `fd` (an open directory or regular file) holds at
    /// `relative`, as `copy_descriptor` does.
    ///
    /// # Errors
    ///
    /// The harness's rejection of the input ([`CaptureError`]).
    pub fn copy_descriptor(
        &mut self,
        fd: BorrowedFd<'_>,
        relative: &[u8],
    ) -> Result<(), CaptureError> {
        let relative = posix(relative);
        self.copy_at(fd, &relative)
    }

    fn copy_at(&mut self, fd: BorrowedFd<'_>, relative: &[u8]) -> Result<(), CaptureError> {
        let before = fstat(fd)?;
        let kind = file_type(&before);
        if kind == FileType::Directory {
            self.record_directory(relative)?;
            let names = list_sorted(fd).map_err(|e| CaptureError::DirectoryUnreadable {
                path: shown(relative),
                cause: OsCause::new(e, None),
            })?;
            for name in names {
                let child_relative = join(relative, &name);
                let child_meta = lstat_at(fd, &name)
                    .map_err(|e| CaptureError::Os(OsCause::new(e, Some(&name))))?;
                if file_type(&child_meta) == FileType::Symlink {
                    if self.flavour == Flavour::SandboxCopy {
                        return Err(CaptureError::Symlink(shown(&child_relative)));
                    }
                    self.copy_symlink(fd, &name, &child_relative, &child_meta)?;
                    continue;
                }
                let child = open_child(fd, &name, &child_relative, false)?;
                self.copy_at(child.as_fd(), &child_relative)?;
            }
            let after = fstat(fd)?;
            if mutation_identity(&before) != mutation_identity(&after) {
                return Err(CaptureError::DirectoryChanged(shown(relative)));
            }
            return Ok(());
        }
        if kind != FileType::RegularFile {
            return Err(CaptureError::NotFileOrDirectory(shown(relative)));
        }
        self.copy_file(fd, relative, &before)
    }

    fn copy_file(
        &mut self,
        fd: BorrowedFd<'_>,
        relative: &[u8],
        before: &Stat,
    ) -> Result<(), CaptureError> {
        self.ensure_parents(parent_of(relative))?;
        let size = u64::try_from(before.st_size).unwrap_or(0);
        if self.budget.total_bytes.saturating_add(size) > self.limits.max_total_bytes {
            return Err(CaptureError::TotalBytes);
        }
        let mut file = std::fs::File::from(
            fd.try_clone_to_owned()
                .map_err(|e| CaptureError::Os(OsCause::of_io(&e)))?,
        );
        let mode = match self.flavour {
            Flavour::Dependency => before.st_mode & 0o7777,
            Flavour::SandboxCopy => 0,
        };
        if let Some(sink) = self.sink.as_mut() {
            sink.start(size, mode & 0o111 != 0, Some(fd));
            #[cfg(test)]
            let direct = self.after_first_read.is_none();
            #[cfg(not(test))]
            let direct = true;
            if direct {
                let deferred = Box::new(DeferredFile {
                    fd: file.into(),
                    relative: shown(relative),
                    before: *before,
                    size,
                    counted_before: self.budget.total_bytes,
                    max_total_bytes: self.limits.max_total_bytes,
                });
                match sink.defer(deferred) {
                    Ok(sha256) => {
                        self.total_bytes += size;
                        self.budget.total_bytes += size;
                        return self.record(relative, Node::File { size, sha256, mode });
                    }
                    Err(back) => file = std::fs::File::from(back.fd),
                }
            }
        }
        let mut hasher = Sha256::new();
        let mut chunk = std::mem::take(&mut self.chunk);
        chunk.resize(CHUNK_BYTES, 0);
        let read = self.hash_file(&mut file, size, &mut chunk, &mut hasher);
        self.chunk = chunk;
        let checked = read.and_then(|copied| {
            let after = fstat(fd)?;
            if copied != size || mutation_identity(before) != mutation_identity(&after) {
                return Err(CaptureError::FileChanged(shown(relative)));
            }
            Ok(copied)
        });
        let copied = match checked {
            Ok(copied) => copied,
            Err(e) => {
                if let Some(sink) = self.sink.as_mut() {
                    sink.abandon();
                }
                return Err(e);
            }
        };
        let sha256 = match self.sink.as_mut() {
            Some(sink) => sink.finish(),
            None => ObjectId::from_bytes(hasher.finalize().into()),
        };
        self.total_bytes += copied;
        self.budget.total_bytes += copied;
        self.record(
            relative,
            Node::File {
                size: copied,
                sha256,
                mode,
            },
        )
    }

    /// Reads `file` to its end into `hasher`, a chunk at a time, refusing
    /// once the bytes counted would pass the total bound; returns the
    /// bytes read.
    ///
    /// A sink that keeps the file whole ([`FileSink::buffer`]) has the
    /// bytes read straight into its buffer, at most one more than `size`;
    /// only a file that grew is read on, a chunk at a time. The bytes
    /// counted, and so the refusals, are the chunked read's.
    fn hash_file(
        &mut self,
        file: &mut std::fs::File,
        size: u64,
        chunk: &mut [u8],
        hasher: &mut Sha256,
    ) -> Result<u64, CaptureError> {
        let mut copied: u64 = 0;
        #[cfg(test)]
        let direct = self.after_first_read.is_none();
        #[cfg(not(test))]
        let direct = true;
        let limit = size.saturating_add(1);
        if let Some(buf) = self
            .sink
            .as_mut()
            .and_then(|s| s.buffer())
            .filter(|_| direct)
        {
            let n = (&mut *file)
                .take(limit)
                .read_to_end(buf)
                .map_err(|e| CaptureError::Os(OsCause::of_io(&e)))?;
            copied = n as u64;
            if self.budget.total_bytes.saturating_add(copied) > self.limits.max_total_bytes {
                return Err(CaptureError::TotalBytes);
            }
            if copied < limit {
                return Ok(copied);
            }
        }
        loop {
            let n = match file.read(chunk) {
                Ok(0) => return Ok(copied),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(CaptureError::Os(OsCause::of_io(&e))),
            };
            #[cfg(test)]
            if let Some(hook) = self.after_first_read.take() {
                hook();
            }
            copied += n as u64;
            if self.budget.total_bytes.saturating_add(copied) > self.limits.max_total_bytes {
                return Err(CaptureError::TotalBytes);
            }
            match self.sink.as_mut() {
                Some(sink) => sink.bytes(&chunk[..n]),
                None => hasher.update(&chunk[..n]),
            }
        }
    }

    fn copy_symlink(
        &mut self,
        parent: BorrowedFd<'_>,
        name: &[u8],
        relative: &[u8],
        before: &Stat,
    ) -> Result<(), CaptureError> {
        let unreadable = || CaptureError::SymlinkUnreadable(shown(relative));
        let raw = rustix::fs::readlinkat(parent, name, Vec::new()).map_err(|_| unreadable())?;
        #[cfg(test)]
        if let Some(hook) = self.after_first_read.take() {
            hook();
        }
        let raw = raw.into_bytes();
        let target = if self.runtime && relative == RUNTIME_SHARED_LINK.as_bytes() {
            self.checked_target(relative, RUNTIME_SHARED_LINK_TARGET.as_bytes().to_vec())?
        } else {
            self.checked_target(relative, raw.clone())?
        };
        let length = target.len() as u64;
        let after =
            lstat_at(parent, name).map_err(|e| CaptureError::Os(OsCause::new(e, Some(name))))?;
        let again = rustix::fs::readlinkat(parent, name, Vec::new())
            .map_err(|e| CaptureError::Os(OsCause::new(e, Some(name))))?;
        if mutation_identity(before) != mutation_identity(&after) || again.as_bytes() != raw {
            return Err(CaptureError::SymlinkChanged(shown(relative)));
        }
        self.total_bytes += length;
        self.budget.total_bytes += length;
        self.record(relative, Node::Symlink { target })
    }

    /// A dependency's symlink target as the harness's `_copy_symlink` checks
    /// it: UTF-8, relative, non-empty, no NUL, within the path bound, and
    /// within the total bound once counted.
    fn checked_target(&self, relative: &[u8], raw: Vec<u8>) -> Result<String, CaptureError> {
        let target =
            String::from_utf8(raw).map_err(|_| CaptureError::SymlinkUnreadable(shown(relative)))?;
        if self.runtime && target.starts_with('/') {
            return Err(CaptureError::SymlinkEscapesRuntime(shown(relative)));
        }
        if target.is_empty() || target.starts_with('/') || target.contains('\0') {
            return Err(CaptureError::SymlinkNotRelative(shown(relative)));
        }
        let length = target.len() as u64;
        if length > self.limits.max_path_bytes {
            return Err(CaptureError::SymlinkTooLong(shown(relative)));
        }
        if self.budget.total_bytes.saturating_add(length) > self.limits.max_total_bytes {
            return Err(CaptureError::TotalBytes);
        }
        Ok(target)
    }

    /// Records the directory `relative` (and its parents) of a tree read
    /// from elsewhere than a directory handle, as the walk records one it
    /// opened.
    ///
    /// # Errors
    ///
    /// The bounds' rejections, and [`CaptureError::Collide`].
    pub fn add_directory(&mut self, relative: &[u8]) -> Result<(), CaptureError> {
        self.record_directory(&posix(relative))
    }

    /// Checks, before a file of `size` bytes at `relative` is read from
    /// elsewhere than a directory handle, what the walk checks before it
    /// reads one: its parents recorded, and the total bound.
    ///
    /// # Errors
    ///
    /// The bounds' rejections, and [`CaptureError::Collide`].
    pub fn prepare_file(&mut self, relative: &[u8], size: u64) -> Result<(), CaptureError> {
        self.ensure_parents(parent_of(&posix(relative)))?;
        if self.budget.total_bytes.saturating_add(size) > self.limits.max_total_bytes {
            return Err(CaptureError::TotalBytes);
        }
        Ok(())
    }

    /// Records a file at `relative` holding `data`, read from elsewhere than
    /// a directory handle (a git blob), with the mode `mode` its checkout
    /// gives it: recorded as a walked file is (its parents, the bounds, mode
    /// 0 in a `sandbox_copy` tree), its bytes handed to the sink if any.
    ///
    /// # Errors
    ///
    /// The bounds' rejections, and [`CaptureError::Collide`].
    pub fn add_file(
        &mut self,
        relative: &[u8],
        mode: u32,
        data: &[u8],
    ) -> Result<(), CaptureError> {
        let relative = posix(relative);
        let size = data.len() as u64;
        self.prepare_file(&relative, size)?;
        let mode = match self.flavour {
            Flavour::Dependency => mode & 0o7777,
            Flavour::SandboxCopy => 0,
        };
        let sha256 = match self.sink.as_mut() {
            Some(sink) => {
                sink.start(size, mode & 0o111 != 0, None);
                if !data.is_empty() {
                    match sink.buffer() {
                        Some(buf) => buf.extend_from_slice(data),
                        None => sink.bytes(data),
                    }
                }
                sink.finish()
            }
            None => ObjectId::from_bytes(Sha256::digest(data).into()),
        };
        self.total_bytes += size;
        self.budget.total_bytes += size;
        self.record(&relative, Node::File { size, sha256, mode })
    }

    /// Records a symlink at `relative` whose target is `raw`, read from
    /// elsewhere than a directory handle: refused in a `sandbox_copy` tree
    /// as the walk refuses one, checked in a dependency as the walk checks
    /// one.
    ///
    /// # Errors
    ///
    /// [`CaptureError::Symlink`] in a `sandbox_copy` tree; the target's
    /// checks; the bounds' rejections.
    pub fn add_symlink(&mut self, relative: &[u8], raw: &[u8]) -> Result<(), CaptureError> {
        let relative = posix(relative);
        if self.flavour == Flavour::SandboxCopy {
            return Err(CaptureError::Symlink(shown(&relative)));
        }
        let target = self.checked_target(&relative, raw.to_vec())?;
        let length = target.len() as u64;
        self.total_bytes += length;
        self.budget.total_bytes += length;
        self.record(&relative, Node::Symlink { target })
    }

    /// Records the directory `relative` and its parents (`_record_directory`,
    /// `ensure_directory`): how the harness adds `payload/.vite-temp`.
    ///
    /// # Errors
    ///
    /// [`CaptureError::Collide`] where another kind is recorded at the path or
    /// a parent, and the bounds' rejections.
    pub fn ensure_directory(&mut self, relative: &str) -> Result<(), CaptureError> {
        self.record_directory(&posix(relative.as_bytes()))
    }

    fn record_directory(&mut self, relative: &[u8]) -> Result<(), CaptureError> {
        self.ensure_parents(parent_of(relative))?;
        self.record(relative, Node::Directory)
    }

    fn ensure_parents(&mut self, parent: &[u8]) -> Result<(), CaptureError> {
        let mut current: Vec<u8> = Vec::new();
        for part in parts(parent) {
            current = if current.is_empty() {
                part.to_vec()
            } else {
                join(&current, part)
            };
            if let Some(existing) = std::str::from_utf8(&current)
                .ok()
                .and_then(|p| self.entries.get(p))
            {
                if existing.node != Node::Directory {
                    return Err(CaptureError::Collide(shown(&current)));
                }
                continue;
            }
            self.record(&current, Node::Directory)?;
        }
        Ok(())
    }

    fn record(&mut self, path: &[u8], node: Node) -> Result<(), CaptureError> {
        let Ok(path) = std::str::from_utf8(path) else {
            return Err(CaptureError::PathNotUtf8(shown(path)));
        };
        if path.len() as u64 > self.limits.max_path_bytes {
            return Err(CaptureError::PathBytes);
        }
        if let Some(existing) = self.entries.get(path) {
            if existing.node != node {
                return Err(CaptureError::Collide(path.to_string()));
            }
            return Ok(());
        }
        if self.budget.entries >= self.limits.max_entries {
            return Err(CaptureError::Entries);
        }
        self.entries.insert(
            path.to_string(),
            TreeEntry {
                path: path.to_string(),
                node,
            },
        );
        self.budget.entries += 1;
        Ok(())
    }
}

/// One captured sandbox dependency.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedDependency {
    /// The entries, rooted at [`DEPENDENCY_ROOT`], sorted, with
    /// `payload/.vite-temp` where the harness adds it.
    pub entries: Vec<TreeEntry>,
    /// The bytes counted: files' and symlinks' targets' lengths.
    pub total_bytes: u64,
}

/// Captures the dependency declared as `source` (below `root`), to be
/// mounted at `target`, as the harness's `prepare` does: the walk at
/// `payload`, then `payload/.vite-temp` when the payload is a directory
/// and `target`'s name is `node_modules`, then
/// [`validate_dependency_symlinks`]. `source` and `target` are
/// declarations the caller has already validated.
///
/// # Errors
///
/// The harness's rejection ([`CaptureError`]); the budget then holds what
/// was counted before it, as the harness's does (the snapshot is dropped).
pub fn capture_dependency(
    root: BorrowedFd<'_>,
    source: &str,
    target: &str,
    limits: Limits,
    budget: &mut Budget,
) -> Result<CapturedDependency, CaptureError> {
    capture_dependency_into(root, source, target, limits, budget, None)
}

/// [`capture_dependency`], handing each file's bytes to `sink` when given.
///
/// # Errors
///
/// As [`capture_dependency`].
pub fn capture_dependency_into(
    root: BorrowedFd<'_>,
    source: &str,
    target: &str,
    limits: Limits,
    budget: &mut Budget,
    sink: Option<&mut dyn FileSink>,
) -> Result<CapturedDependency, CaptureError> {
    let mut builder = Builder::new(Flavour::Dependency, limits, budget);
    if let Some(sink) = sink {
        builder = builder.with_sink(sink);
    }
    let fd = open_relative(root, source)?;
    builder.copy_descriptor(fd.as_fd(), DEPENDENCY_ROOT.as_bytes())?;
    drop(fd);
    finish_dependency(builder, target)
}

/// Finishes a dependency whose payload `builder` (a [`Flavour::Dependency`]
/// builder) has recorded at [`DEPENDENCY_ROOT`], to be mounted at `target`:
/// `payload/.vite-temp` when the payload is a directory and `target`'s name
/// is `node_modules`, then [`validate_dependency_symlinks`].
///
/// # Errors
///
/// The harness's rejection ([`CaptureError`]).
pub fn finish_dependency(
    mut builder: Builder<'_>,
    target: &str,
) -> Result<CapturedDependency, CaptureError> {
    let payload_is_directory = builder
        .entry(DEPENDENCY_ROOT)
        .is_some_and(|e| e.node == Node::Directory);
    let name = parts(target.as_bytes()).last().unwrap_or(b"");
    if payload_is_directory && name == DEPENDENCY_MOUNT_BASENAME.as_bytes() {
        builder.ensure_directory(&format!("{DEPENDENCY_ROOT}/{VITE_TEMP_DIR}"))?;
    }
    let entries = builder.finished_entries();
    validate_dependency_symlinks(&entries, target)?;
    Ok(CapturedDependency {
        entries,
        total_bytes: builder.total_bytes(),
    })
}

/// `posixpath.normpath` over components; `absolute` drops a `..` at the root.
fn normpath<'a>(components: impl Iterator<Item = &'a str>, absolute: bool) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for c in components {
        match c {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|l| *l != "..") {
                    out.pop();
                } else if !absolute {
                    out.push("..");
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// Checks a dependency's symlinks as the harness's
/// `_validate_dependency_symlinks` does, over its sorted `entries` and its
/// declared mount `target`. For each symlink, in order:
///
/// - read from where it is mounted (`/workspace/<target>/…`), its target,
///   normalised as `posixpath.normpath` does, must stay in `/workspace`;
/// - when, normalised from its own place, its target stays in `payload`
///   (as written, with no symlink followed), it must resolve, following every
///   symlink of the payload as `Path.resolve(strict=True)` does, to an entry
///   of the payload. A target that leaves the payload as written is not
///   resolved.
///
/// The harness resolves on its copy, whose payload lies in a scratch
/// directory of its own: a resolution that climbs above the payload's
/// parent meets that directory, and this check calls it escaping, as the
/// harness does unless the climb finds its way back through the scratch
/// directory's own names.
///
/// # Errors
///
/// [`CaptureError::SymlinkEscapesWorkspace`] or
/// [`CaptureError::SymlinkDangling`] for the first symlink refused.
pub fn validate_dependency_symlinks(
    entries: &[TreeEntry],
    target: &str,
) -> Result<(), CaptureError> {
    let by_path: HashMap<&str, &Node> =
        entries.iter().map(|e| (e.path.as_str(), &e.node)).collect();
    let mount: Vec<&str> = target
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let workspace = SANDBOX_WORKSPACE.trim_start_matches('/');
    for entry in entries {
        let Node::Symlink { target: link } = &entry.node else {
            continue;
        };
        let own: Vec<&str> = entry.path.split('/').collect();
        let parent = &own[..own.len() - 1];
        let inside_payload = &parent[1.min(parent.len())..];
        let sandbox = normpath(
            std::iter::once(workspace)
                .chain(mount.iter().copied())
                .chain(inside_payload.iter().copied())
                .chain(link.split('/')),
            true,
        );
        if sandbox.first() != Some(&workspace) {
            return Err(CaptureError::SymlinkEscapesWorkspace(entry.path.clone()));
        }
        let manifest = normpath(parent.iter().copied().chain(link.split('/')), false);
        if manifest.first() != Some(&DEPENDENCY_ROOT) {
            continue;
        }
        let mut seen = HashMap::new();
        let resolved = resolve(&by_path, Vec::new(), &entry.path, &mut seen);
        match resolved {
            Some(path) if path.first().map(String::as_str) == Some(DEPENDENCY_ROOT) => {}
            _ => return Err(CaptureError::SymlinkDangling(entry.path.clone())),
        }
    }
    Ok(())
}

/// A GitNexus runtime's link to its shared package, which the mount rules
/// check resolves to the `gitnexus-shared` mounted.
pub const RUNTIME_SHARED_LINK: &str = "gitnexus/node_modules/gitnexus-shared";

/// What a runtime snapshot records [`RUNTIME_SHARED_LINK`] as: the shared
/// package the snapshot holds, as the sandbox resolves it
/// (`/opt/gitnexus/node_modules/gitnexus-shared` to `/opt/gitnexus-shared`).
pub const RUNTIME_SHARED_LINK_TARGET: &str = "../../gitnexus-shared";

/// Checks a GitNexus runtime's symlinks: each target, normalised from the
/// link's own place as `posixpath.normpath` does, stays within the tree
/// (its first part is not `..`), so that the snapshot names every byte the
/// runtime's mounts show. A link may dangle, as it would in the checkout.
///
/// # Errors
///
/// [`CaptureError::SymlinkEscapesRuntime`] for the first symlink refused.
pub fn validate_runtime_symlinks(entries: &[TreeEntry]) -> Result<(), CaptureError> {
    for entry in entries {
        let Node::Symlink { target } = &entry.node else {
            continue;
        };
        let parent = entry.path.rsplit_once('/').map_or("", |(p, _)| p);
        let resolved = normpath(parent.split('/').chain(target.split('/')), false);
        if resolved.is_empty() || resolved.first() == Some(&"..") {
            return Err(CaptureError::SymlinkEscapesRuntime(entry.path.clone()));
        }
    }
    Ok(())
}

/// Python's `posixpath._joinrealpath(path, rest, strict=True, seen)` over the
/// entries of one dependency's container (which holds only `payload`):
/// `None` where Python raises (a missing entry, a loop) or where the walk
/// climbs out of the container.
fn resolve(
    entries: &HashMap<&str, &Node>,
    mut path: Vec<String>,
    rest: &str,
    seen: &mut HashMap<Vec<String>, Option<Vec<String>>>,
) -> Option<Vec<String>> {
    if rest.starts_with('/') {
        return None;
    }
    for name in rest.split('/') {
        match name {
            "" | "." => continue,
            ".." => {
                path.pop()?;
                continue;
            }
            _ => {}
        }
        let mut newpath = path.clone();
        newpath.push(name.to_string());
        let node = entries.get(newpath.join("/").as_str())?;
        let Node::Symlink { target } = node else {
            path = newpath;
            continue;
        };
        if let Some(done) = seen.get(&newpath) {
            path = done.clone()?;
            continue;
        }
        seen.insert(newpath.clone(), None);
        path = resolve(entries, path, target, seen)?;
        seen.insert(newpath, Some(path.clone()));
    }
    Some(path)
}
