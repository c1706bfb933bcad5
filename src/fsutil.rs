//! Small filesystem helpers on directory handles, shared by the walk, the
//! store and views.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

pub use crate::dirent::{list_entries, list_names};
use crate::error::{IoContext, Result};

/// Opens a directory without following a symlink in its last component.
pub fn open_dir<P: rustix::path::Arg>(dir: BorrowedFd<'_>, path: P) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        dir,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Syncs a filesystem in the background while an operation writes to it:
/// a head start for the one `syncfs` that must come after the last write.
///
/// Handing written pages to the disk as they are written
/// (`POSIX_FADV_DONTNEED`) is not enough where the device itself keeps them
/// until a flush: a loop device on a file, a disk with a volatile cache
/// behind a virtual machine. Every `step` bytes that [`Flusher::wrote`] is
/// told of, it starts one `syncfs` on a thread of its own, unless one is
/// still running, so that the device writes while the CPU hashes.
/// [`Flusher::start`] starts one at once (while renames run, say). It only
/// ever adds durability: nothing waits on it, a failure is ignored, and
/// the `syncfs` that decides still runs after the last write. Dropping it
/// waits for the one running.
pub struct Flusher {
    fd: std::sync::Arc<OwnedFd>,
    step: u64,
    written: std::sync::atomic::AtomicU64,
    running: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    #[cfg(test)]
    started: std::sync::atomic::AtomicU64,
}

impl Flusher {
    /// A flusher of the filesystem `dir` is on, every `step` bytes written.
    pub fn new(dir: BorrowedFd<'_>, step: u64) -> std::io::Result<Flusher> {
        Ok(Flusher {
            fd: std::sync::Arc::new(rustix::io::fcntl_dupfd_cloexec(dir, 0)?),
            step: step.max(1),
            written: std::sync::atomic::AtomicU64::new(0),
            running: std::sync::Mutex::new(None),
            #[cfg(test)]
            started: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Counts `bytes` more written, and starts a `syncfs` when they cross a
    /// multiple of the step.
    pub fn wrote(&self, bytes: u64) {
        use std::sync::atomic::Ordering;
        let before = self.written.fetch_add(bytes, Ordering::Relaxed);
        if before / self.step != before.saturating_add(bytes) / self.step {
            self.start();
        }
    }

    /// Starts a `syncfs` now, unless one is running. Never blocks on
    /// another writer: a thread that finds the handle busy leaves it.
    pub fn start(&self) {
        let Ok(mut running) = self.running.try_lock() else {
            return;
        };
        if running.as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        if let Some(done) = running.take() {
            let _ = done.join();
        }
        let fd = std::sync::Arc::clone(&self.fd);
        let spawned = std::thread::Builder::new()
            .name("syncfs".into())
            .spawn(move || {
                let _ = rustix::fs::syncfs(fd.as_fd());
            });
        if let Ok(handle) = spawned {
            #[cfg(test)]
            self.started
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            *running = Some(handle);
        }
    }
}

#[cfg(test)]
impl Flusher {
    /// How many `syncfs` it started.
    pub(crate) fn started(&self) -> u64 {
        self.started.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits for the `syncfs` running, if any.
    fn settle(&self) {
        if let Some(h) = self.running.lock().unwrap().take() {
            h.join().unwrap();
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        let running = match self.running.get_mut() {
            Ok(r) => r.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(handle) = running {
            let _ = handle.join();
        }
    }
}

/// The names in a directory, sorted, without `.` and `..`.
pub fn read_names(dir: BorrowedFd<'_>, path: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> = crate::fsutil::list_names(dir)
        .ctx("list a directory", path)?
        .into_iter()
        .map(|n| String::from_utf8_lossy(&n).into_owned())
        .collect();
    names.sort();
    Ok(names)
}

/// What publishing a name found: it made the name, or the name was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Published {
    /// The entry now stands at the name; the source name is gone.
    Created,
    /// Something already stood at the name and was left alone; the source is
    /// still in place, for the caller to drop or keep.
    Existed,
}

/// Moves the file or directory `from` (in `from_dir`) to `to` (in `to_dir`),
/// never replacing what stands at `to`.
///
/// This is the store's one way of publishing: objects, manifests and views
/// are built under a temporary name and appear whole under their own, or not
/// at all. `renameat2(RENAME_NOREPLACE)` does it atomically. Where the
/// filesystem lacks it (`EINVAL`, `ENOSYS`):
///
/// - a file is hard-linked to `to`, which never replaces anything either, and
///   its old name is then unlinked; an unlink that fails is an error, the
///   file then standing under both names (a caller moving a file out of the
///   store's own names, as setting a manifest aside does, must not take it
///   as moved);
/// - a directory cannot be hard-linked, so `to` is looked up and the
///   directory renamed only when nothing is there. The race this leaves is
///   narrow and safe for what the store publishes: `rename(2)` itself refuses
///   to replace a non-empty directory or a file, so the only thing a rename
///   that loses the race can replace is an empty directory made in between,
///   and a published view is never empty.
///
/// Errors are the system's (`ENOENT` for a missing parent, say), for the
/// caller to put in context.
pub fn publish_noreplace<P: rustix::path::Arg + Copy, Q: rustix::path::Arg + Copy>(
    from_dir: BorrowedFd<'_>,
    from: P,
    to_dir: BorrowedFd<'_>,
    to: Q,
) -> Result<Published, Errno> {
    let taken = |r: Result<(), Errno>| match r {
        Ok(()) => Ok(Published::Created),
        Err(Errno::EXIST | Errno::NOTEMPTY) => Ok(Published::Existed),
        Err(e) => Err(e),
    };
    match rustix::fs::renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE) {
        Err(Errno::INVAL | Errno::NOSYS) => {}
        other => return taken(other),
    }
    let st = rustix::fs::statat(from_dir, from, AtFlags::SYMLINK_NOFOLLOW)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        let linked = taken(rustix::fs::linkat(
            from_dir,
            from,
            to_dir,
            to,
            AtFlags::empty(),
        ))?;
        if linked == Published::Created {
            rustix::fs::unlinkat(from_dir, from, AtFlags::empty())?;
        }
        return Ok(linked);
    }
    match rustix::fs::statat(to_dir, to, AtFlags::SYMLINK_NOFOLLOW) {
        Err(Errno::NOENT) => taken(rustix::fs::renameat(from_dir, from, to_dir, to)),
        Ok(_) => Ok(Published::Existed),
        Err(e) => Err(e),
    }
}

/// Why [`open_regular`] opened nothing.
#[derive(Debug)]
pub enum NotOpened {
    /// The path could not be looked at or opened.
    Io(std::io::Error),
    /// The path (through a symlink) is something else than a regular file:
    /// what it is, in words (`a FIFO`, `a directory`, …).
    NotRegular(&'static str),
}

/// What a file that is not a regular file is, as a refusal names it.
pub fn kind_of(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Opens a file to read, refusing anything but a regular file before any
/// open that could block: the path is looked at first (through a
/// symlink), opened without blocking (`O_NONBLOCK`: a FIFO that no one
/// writes, or a device, never holds the command up), and what was opened
/// must be that same regular file (its device and inode).
pub fn open_regular(path: &Path) -> std::result::Result<std::fs::File, NotOpened> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let looked = std::fs::metadata(path).map_err(NotOpened::Io)?;
    if !looked.is_file() {
        return Err(NotOpened::NotRegular(kind_of(looked.file_type())));
    }
    let flags = OFlags::NONBLOCK | OFlags::NOCTTY;
    let file = std::fs::OpenOptions::new()
        .read(true)
        // The flags' bits, as open(2) takes them.
        .custom_flags(flags.bits() as i32)
        .open(path)
        .map_err(NotOpened::Io)?;
    let opened = file.metadata().map_err(NotOpened::Io)?;
    if !opened.is_file() {
        return Err(NotOpened::NotRegular(kind_of(opened.file_type())));
    }
    if (opened.dev(), opened.ino()) != (looked.dev(), looked.ino()) {
        return Err(NotOpened::NotRegular(
            "another file than the one looked at: it was replaced",
        ));
    }
    Ok(file)
}

/// The first `n` bytes of the file at `path`, fewer when it is shorter or
/// cannot be read to its end; none when it cannot be opened.
pub fn read_head(path: &Path, n: usize) -> Vec<u8> {
    use std::io::Read;
    let mut head = Vec::with_capacity(n);
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.take(n as u64).read_to_end(&mut head);
    }
    head
}

/// Writes a new file at `mode` (less the umask), refusing to replace one;
/// returns it, still open.
pub fn write_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<std::fs::File> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    file.write_all(bytes)?;
    Ok(file)
}

/// Writes a new file at mode 0444 (refusing to replace one): what the store
/// writes once and never changes.
pub fn write_new_read_only(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_new(path, bytes, 0o444).map(drop)
}

/// Removes the tree at `path` as [`remove_tree_at`] does; a parent already
/// gone is no error (nothing is left to remove).
pub fn remove_tree_path(path: &Path) -> std::io::Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(());
    };
    match open_dir(rustix::fs::CWD, parent) {
        Ok(fd) => remove_tree_at(fd.as_fd(), name).map(|_| ()),
        Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Removes a directory tree relative to `parent`, giving write permission to
/// its directories only: files are never chmod-ed, since a file may be a hard
/// link that shares its mode with an object and every other view. Returns
/// whether this call removed `name` itself (another process removing the same
/// tree at once may have got there first).
pub fn remove_tree_at(
    parent: BorrowedFd<'_>,
    name: impl AsRef<std::ffi::OsStr>,
) -> std::io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(name.as_ref().as_bytes()).map_err(std::io::Error::other)?;
    remove_tree_inner(parent, &name, FileType::Unknown)
}

fn remove_tree_inner(
    parent: BorrowedFd<'_>,
    name: &std::ffi::CStr,
    listed: FileType,
) -> std::io::Result<bool> {
    // Another process removing the same tree at once is not an error: what
    // it removed first is simply gone.
    let gone = |r: rustix::io::Result<()>| match r {
        Ok(()) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(std::io::Error::from(e)),
    };
    // A file the listing already typed needs no `stat`, as `rm -rf` does;
    // one that has become a directory meanwhile takes the path below.
    if !matches!(listed, FileType::Directory | FileType::Unknown) {
        match rustix::fs::unlinkat(parent, name, AtFlags::empty()) {
            Err(Errno::ISDIR | Errno::PERM) => {}
            other => return gone(other),
        }
    }
    let st = match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return gone(rustix::fs::unlinkat(parent, name, AtFlags::empty()));
    }
    if st.st_mode & 0o700 != 0o700 {
        gone(rustix::fs::chmodat(
            parent,
            name,
            Mode::from_raw_mode(0o700),
            AtFlags::empty(),
        ))?;
    }
    let dir = match crate::fsutil::open_dir(parent, name) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let entries = match list_entries(dir.as_fd()) {
        Ok(entries) => entries,
        Err(Errno::NOENT) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    for (n, kind) in entries {
        let n = std::ffi::CString::new(n).map_err(std::io::Error::other)?;
        remove_tree_inner(dir.as_fd(), &n, kind)?;
    }
    gone(rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flusher starts one `syncfs` each time the bytes it is told of
    /// cross a multiple of its step (one for several steps crossed at
    /// once), none in between, and one when asked.
    #[test]
    fn a_flusher_syncs_as_the_bytes_written_cross_each_step() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = open_dir(rustix::fs::CWD, tmp.path()).unwrap();
        let f = Flusher::new(dir.as_fd(), 100).unwrap();
        f.wrote(99);
        assert_eq!(f.started(), 0);
        f.wrote(1);
        assert_eq!(f.started(), 1);
        f.settle();
        f.wrote(99);
        assert_eq!(f.started(), 1, "no step was crossed");
        f.wrote(250);
        assert_eq!(f.started(), 2, "three steps crossed at once");
        f.settle();
        f.start();
        assert_eq!(f.started(), 3);
        // Dropping it waits for the one running.
        drop(f);
    }

    #[test]
    fn publishing_never_replaces_a_file_or_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = open_dir(rustix::fs::CWD, tmp.path()).unwrap();
        std::fs::write(tmp.path().join("a"), b"new").unwrap();
        assert_eq!(
            publish_noreplace(dir.as_fd(), "a", dir.as_fd(), "b").unwrap(),
            Published::Created
        );
        assert!(!tmp.path().join("a").exists());
        std::fs::write(tmp.path().join("a"), b"other").unwrap();
        assert_eq!(
            publish_noreplace(dir.as_fd(), "a", dir.as_fd(), "b").unwrap(),
            Published::Existed
        );
        assert_eq!(std::fs::read(tmp.path().join("b")).unwrap(), b"new");
        assert!(tmp.path().join("a").exists(), "the source stays");

        std::fs::create_dir_all(tmp.path().join("d/x")).unwrap();
        std::fs::create_dir_all(tmp.path().join("e/y")).unwrap();
        assert_eq!(
            publish_noreplace(dir.as_fd(), "d", dir.as_fd(), "e").unwrap(),
            Published::Existed
        );
        assert!(tmp.path().join("e/y").is_dir() && tmp.path().join("d/x").is_dir());
        assert_eq!(
            publish_noreplace(dir.as_fd(), "d", dir.as_fd(), "f").unwrap(),
            Published::Created
        );
        assert!(tmp.path().join("f/x").is_dir());
        assert_eq!(
            publish_noreplace(dir.as_fd(), "gone", dir.as_fd(), "g"),
            Err(Errno::NOENT)
        );
    }
}
