//! Small filesystem helpers on directory handles, shared by the walk, the
//! store and views.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

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

/// Lists a directory's names, without `.` and `..`, in no particular order.
///
/// It reads through the handle itself, not a re-open of ".", so that listing
/// needs read permission only, as the reference's `scandir` does.
pub fn list_names(dir: BorrowedFd<'_>) -> Result<Vec<Vec<u8>>, Errno> {
    Ok(list_entries(dir)?.into_iter().map(|(n, _)| n).collect())
}

/// Lists a directory's names with the type the listing gives each
/// (`FileType::Unknown` where the filesystem gives none), without `.` and `..`.
///
/// The listing starts from the top, so a handle listed before is listed
/// whole again; it reads with `getdents64` straight into one buffer.
pub fn list_entries(dir: BorrowedFd<'_>) -> Result<Vec<(Vec<u8>, FileType)>, Errno> {
    rustix::fs::seek(dir, rustix::fs::SeekFrom::Start(0))?;
    // Far more than the largest entry (a 255-byte name and its header).
    let mut buf = Vec::with_capacity(32 * 1024);
    let mut listing = rustix::fs::RawDir::new(dir, buf.spare_capacity_mut());
    let mut entries = Vec::new();
    while let Some(entry) = listing.next() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            entries.push((name.to_vec(), entry.file_type()));
        }
    }
    Ok(entries)
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
