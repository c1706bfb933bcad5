//! The walk's filesystem backend: a source directory read through handles.
//!
//! Every directory is opened with `openat(O_DIRECTORY | O_NOFOLLOW)` relative
//! to its parent's handle, and every file with `openat(O_NOFOLLOW | O_NONBLOCK)`;
//! the open handle is then `fstat`ed and compared with what the walk saw. A
//! component swapped for a symlink mid-walk therefore fails the walk instead of
//! leading it outside the tree, and a FIFO can never block it.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use super::{absolute_like_python, Fault, Kind, Node, Tree};
use crate::dirent::sort_like_python;
use crate::fsutil::{list_names, open_dir};
use crate::profile::ce::rules::Rejection;

/// A validated source directory, held open.
pub(super) struct DirTree {
    root: PathBuf,
    fd: OwnedFd,
}

impl DirTree {
    /// Opens `path` as a release source: a real directory reached by no symlink hop.
    pub(super) fn open(path: &Path) -> Result<DirTree, Rejection> {
        let root = absolute_like_python(path);
        let unavailable = |source| Rejection::SourceUnavailable {
            path: root.clone(),
            source,
        };
        let lstat = rustix::fs::lstat(&root).map_err(|e| unavailable(e.into()))?;
        let resolved = std::fs::canonicalize(&root).map_err(unavailable)?;
        // POSIX keeps exactly two leading slashes as a root of their own, and
        // so does Python's pathlib; `resolve()` then drops one, so the
        // reference finds the path changed and refuses it.
        let raw = path.as_os_str().as_bytes();
        if raw.starts_with(b"//") && !raw.starts_with(b"///") {
            let mut shown = std::ffi::OsString::from("/");
            shown.push(root.as_os_str());
            return Err(Rejection::SourceNotRealDirectory { path: shown.into() });
        }
        if FileType::from_raw_mode(lstat.st_mode) != FileType::Directory || resolved != root {
            return Err(Rejection::SourceNotRealDirectory { path: root });
        }
        let fd = open_path_dir(rustix::fs::CWD, &root).map_err(|e| unavailable(e.into()))?;
        let opened = rustix::fs::fstat(&fd).map_err(|e| unavailable(e.into()))?;
        if !same_inode(&opened, &lstat) {
            return Err(Rejection::SourceNotRealDirectory { path: root });
        }
        Ok(DirTree { root, fd })
    }
}

fn node(meta: Stat) -> Node<Stat> {
    let kind = match FileType::from_raw_mode(meta.st_mode) {
        FileType::Directory => Kind::Directory,
        FileType::RegularFile => Kind::File,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    };
    Node {
        kind,
        size: meta.st_size as u64,
        executable: meta.st_mode & 0o111 != 0,
        raw: meta,
    }
}

impl Tree for DirTree {
    type Dir = OwnedFd;
    type Raw = Stat;

    fn root_path(&self) -> &Path {
        &self.root
    }

    fn root_dir(&self) -> &OwnedFd {
        &self.fd
    }

    fn lstat(&self, dir: &OwnedFd, name: &[u8]) -> Result<Node<Stat>, Fault> {
        Ok(node(rustix::fs::statat(
            dir,
            name,
            AtFlags::SYMLINK_NOFOLLOW,
        )?))
    }

    fn exists(&self, dir: &OwnedFd, name: &[u8]) -> Result<bool, Fault> {
        match rustix::fs::statat(dir, name, AtFlags::empty()) {
            Ok(_) => Ok(true),
            Err(Errno::NOENT | Errno::NOTDIR | Errno::BADF | Errno::LOOP) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn open_dir(
        &self,
        parent: &OwnedFd,
        name: &[u8],
        seen: &Node<Stat>,
        listing: bool,
        path: &Path,
    ) -> Result<OwnedFd, Fault> {
        let dir = if listing {
            open_dir(parent.as_fd(), name)?
        } else {
            open_path_dir(parent.as_fd(), name)?
        };
        check_same_dir(&dir, &seen.raw, path)?;
        Ok(dir)
    }

    fn list(&self, dir: &OwnedFd) -> Result<Vec<Vec<u8>>, Fault> {
        Ok(list_sorted(dir.as_fd())?)
    }

    fn read(
        &self,
        dir: &OwnedFd,
        name: &[u8],
        _rel: &[u8],
        before: &Node<Stat>,
        max: u64,
        buf: &mut Vec<u8>,
        path: &dyn Fn() -> PathBuf,
    ) -> Result<(), Fault> {
        let unreadable = |e: io::Error| Rejection::FileUnreadable {
            path: path(),
            source: e,
        };
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
        )
        .map_err(|e| unreadable(e.into()))?;
        let opened = rustix::fs::fstat(&fd).map_err(|e| unreadable(e.into()))?;
        if !same_inode(&opened, &before.raw)
            || FileType::from_raw_mode(opened.st_mode) != FileType::RegularFile
        {
            return Err(Rejection::ChangedDuringValidation { path: path() }.into());
        }
        let file = std::fs::File::from(fd);
        read_up_to(&file, buf, opened.st_size as u64, max + 1).map_err(unreadable)?;
        let after = rustix::fs::fstat(&file).map_err(|e| unreadable(e.into()))?;
        if buf.len() as u64 > max {
            return Err(Rejection::FileTooLarge {
                path: path(),
                limit: max,
            }
            .into());
        }
        if identity(&opened) != identity(&after) || buf.len() as u64 != after.st_size as u64 {
            return Err(Rejection::ChangedWhileCopying { path: path() }.into());
        }
        Ok(())
    }

    fn names_at(&self, rel: &str) -> Vec<Vec<u8>> {
        let Ok(dir) = open_dir(rustix::fs::CWD, self.root.join(rel)) else {
            return Vec::new();
        };
        list_names(dir.as_fd()).unwrap_or_default()
    }
}

/// Opens a directory for lookups only (`O_PATH`): like the reference's path
/// lookups, it needs search permission on the directory, not read permission.
fn open_path_dir<P: rustix::path::Arg>(dir: BorrowedFd<'_>, path: P) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        dir,
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn check_same_dir(dir: &OwnedFd, seen: &Stat, path: &Path) -> Result<(), Rejection> {
    let opened = rustix::fs::fstat(dir).map_err(|e| Rejection::DirectoryUnreadable {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    if !same_inode(&opened, seen) {
        return Err(Rejection::ChangedDuringValidation {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

fn same_inode(a: &Stat, b: &Stat) -> bool {
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

fn identity(s: &Stat) -> (u64, u64, i64, i128) {
    let mtime_ns = i128::from(s.st_mtime) * 1_000_000_000 + s.st_mtime_nsec as i128;
    (s.st_dev, s.st_ino, s.st_size, mtime_ns)
}

/// Reads until end of file or until `limit` bytes into `buf`, which
/// holds them all once done. Room is made for `size` (what `fstat` said)
/// and one byte more, so that a file that did not grow is read in one call
/// and its end found in a second.
fn read_up_to(file: &std::fs::File, buf: &mut Vec<u8>, size: u64, limit: u64) -> io::Result<()> {
    use std::io::Read as _;
    buf.reserve(size.saturating_add(1).min(limit) as usize);
    file.take(limit).read_to_end(buf)?;
    Ok(())
}

/// Lists a directory's names (without `.` and `..`) in Python's `str` order.
pub(super) fn list_sorted(dir: BorrowedFd<'_>) -> Result<Vec<Vec<u8>>, Errno> {
    let mut names = list_names(dir)?;
    sort_like_python(&mut names);
    Ok(names)
}
