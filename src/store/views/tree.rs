//! Auditing a directory tree against a snapshot's manifest.
//!
//! [`scan`] reads every entry under a directory through directory handles
//! (never following a symlink) and hashes every regular file; [`compare`]
//! lists each way the tree differs from a manifest: a missing or extra file,
//! changed bytes, a flipped exec bit, a symlink or other non-file in place of a
//! file, and an extra directory. A tree-kind snapshot's view also holds
//! directories (empty ones too) and symlinks: [`compare_layout`] compares a
//! tree with its layout ([`super::layout::tree_layout`]), each directory,
//! symlink (with its target) and file, and [`differences`] picks the
//! comparison a snapshot's kind calls for.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::digest::ManifestDigest;
use crate::digest::{ObjectHasher, ObjectId};
use crate::error::{Error, IoContext, Result};
use crate::profile::ce::manifest::Entry;
use crate::profile::tree::{Node, TreeEntry};
use crate::store::Store;

/// What a scan found at one relative path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// A regular file.
    File {
        /// The SHA-256 of its bytes.
        sha256: ObjectId,
        /// Its length.
        size: u64,
        /// Whether any execute bit is set.
        executable: bool,
    },
    /// A directory.
    Directory,
    /// A symlink.
    Symlink {
        /// Its target's bytes.
        target: Vec<u8>,
    },
    /// A FIFO, socket or device.
    Other,
}

/// Every entry under a directory, by relative path.
pub type Scan = BTreeMap<String, Found>;

/// Reads and hashes everything under `root`.
pub fn scan(root: &Path) -> Result<Scan> {
    let fd = crate::fsutil::open_dir(rustix::fs::CWD, root).ctx("open the tree", root)?;
    let mut out = Scan::new();
    let mut buf = vec![0u8; 256 * 1024];
    scan_dir(fd.as_fd(), "", root, &mut out, &mut buf)?;
    Ok(out)
}

fn scan_dir(
    dir: BorrowedFd<'_>,
    prefix: &str,
    root: &Path,
    out: &mut Scan,
    buf: &mut [u8],
) -> Result<()> {
    let here = root.join(prefix);
    let mut names = crate::fsutil::list_names(dir).ctx("list a directory", &here)?;
    names.sort();
    for name in names {
        let text = String::from_utf8_lossy(&name);
        let rel = if prefix.is_empty() {
            text.into_owned()
        } else {
            format!("{prefix}/{text}")
        };
        let path = root.join(&rel);
        let name = OsStr::from_bytes(&name);
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .ctx("examine an entry", &path)?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {
                let sub = crate::fsutil::open_dir(dir, name).ctx("open a directory", &path)?;
                out.insert(rel.clone(), Found::Directory);
                scan_dir(sub.as_fd(), &rel, root, out, buf)?;
            }
            FileType::RegularFile => {
                let fd = rustix::fs::openat(
                    dir,
                    name,
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .ctx("open a file", &path)?;
                let (sha256, size) = hash_fd(&fd, buf).ctx("read a file", &path)?;
                out.insert(
                    rel,
                    Found::File {
                        sha256,
                        size,
                        executable: st.st_mode & 0o111 != 0,
                    },
                );
            }
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(dir, name, Vec::new())
                    .ctx("read a symlink", &path)?
                    .into_bytes();
                out.insert(rel, Found::Symlink { target });
            }
            _ => {
                out.insert(rel, Found::Other);
            }
        }
    }
    Ok(())
}

/// Hashes everything readable from `fd`.
pub fn hash_fd<Fd: AsFd>(fd: Fd, buf: &mut [u8]) -> std::io::Result<(ObjectId, u64)> {
    let mut hasher = ObjectHasher::default();
    let mut size = 0u64;
    loop {
        match rustix::io::read(&fd, &mut *buf) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
                size += n as u64;
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok((hasher.finish(), size))
}

/// One way a tree differs from a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Difference {
    /// A file of the snapshot is absent.
    Missing {
        /// The relative path.
        path: String,
    },
    /// A file the snapshot does not have.
    ExtraFile {
        /// The relative path.
        path: String,
    },
    /// A directory the snapshot does not have (empty, or holding only extras).
    ExtraDirectory {
        /// The relative path.
        path: String,
    },
    /// A file's bytes differ.
    ContentChanged {
        /// The relative path.
        path: String,
        /// The snapshot's SHA-256.
        expected: ObjectId,
        /// The tree's SHA-256.
        found: ObjectId,
    },
    /// A file's exec bit differs.
    ExecChanged {
        /// The relative path.
        path: String,
        /// Whether the snapshot's file is executable.
        expected: bool,
    },
    /// A symlink where the snapshot has a file, or anywhere at all.
    Symlink {
        /// The relative path.
        path: String,
    },
    /// Something that is neither a file nor a directory, or a directory where
    /// the snapshot has a file.
    NotAFile {
        /// The relative path.
        path: String,
    },
    /// A directory of the snapshot (of a tree kind) is absent.
    MissingDirectory {
        /// The relative path.
        path: String,
    },
    /// Something other than a directory where the snapshot (of a tree
    /// kind) has one.
    NotADirectory {
        /// The relative path.
        path: String,
    },
    /// A symlink of the snapshot (of a tree kind) is absent.
    MissingSymlink {
        /// The relative path.
        path: String,
    },
    /// Something other than a symlink where the snapshot (of a tree kind)
    /// has one.
    NotASymlink {
        /// The relative path.
        path: String,
    },
    /// A symlink's target differs from the snapshot's.
    SymlinkChanged {
        /// The relative path.
        path: String,
        /// The snapshot's target.
        expected: String,
        /// The tree's target (bytes that are not UTF-8 shown as U+FFFD).
        found: String,
    },
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::Missing { path } => write!(f, "missing file: {path}"),
            Difference::ExtraFile { path } => write!(f, "extra file: {path}"),
            Difference::ExtraDirectory { path } => write!(f, "extra directory: {path}"),
            Difference::ContentChanged {
                path,
                expected,
                found,
            } => {
                write!(
                    f,
                    "content changed: {path} (expected {expected}, found {found})"
                )
            }
            Difference::ExecChanged { path, expected } => write!(
                f,
                "exec bit changed: {path} (expected {})",
                if *expected {
                    "executable"
                } else {
                    "not executable"
                }
            ),
            Difference::Symlink { path } => write!(f, "symlink: {path}"),
            Difference::NotAFile { path } => write!(f, "not a regular file: {path}"),
            Difference::MissingDirectory { path } => write!(f, "missing directory: {path}"),
            Difference::NotADirectory { path } => write!(f, "not a directory: {path}"),
            Difference::MissingSymlink { path } => write!(f, "missing symlink: {path}"),
            Difference::NotASymlink { path } => write!(f, "not a symlink: {path}"),
            Difference::SymlinkChanged {
                path,
                expected,
                found,
            } => write!(
                f,
                "symlink target changed: {path} (expected '{expected}', found '{found}')"
            ),
        }
    }
}

/// Lists every difference between a scanned tree and a manifest.
pub fn compare(scan: &Scan, entries: &[Entry]) -> Vec<Difference> {
    let mut diffs = Vec::new();
    let mut expected_dirs = BTreeSet::new();
    let mut expected_files = BTreeSet::new();
    for e in entries {
        expected_files.insert(e.path.as_str());
        parents(&e.path, &mut expected_dirs);
        let path = e.path.clone();
        match scan.get(&e.path) {
            None => diffs.push(Difference::Missing { path }),
            Some(found) => compare_file(found, path, &e.sha256, e.executable, &mut diffs),
        }
    }
    extras(scan, &expected_files, &expected_dirs, &mut diffs);
    diffs
}

/// The differences of what was found where the snapshot has a file.
fn compare_file(
    found: &Found,
    path: String,
    sha: &ObjectId,
    exec: bool,
    diffs: &mut Vec<Difference>,
) {
    match found {
        Found::Symlink { .. } => diffs.push(Difference::Symlink { path }),
        Found::Directory | Found::Other => diffs.push(Difference::NotAFile { path }),
        Found::File {
            sha256,
            size: _,
            executable,
        } => {
            if sha256 != sha {
                diffs.push(Difference::ContentChanged {
                    path: path.clone(),
                    expected: *sha,
                    found: *sha256,
                });
            }
            if *executable != exec {
                diffs.push(Difference::ExecChanged {
                    path,
                    expected: exec,
                });
            }
        }
    }
}

/// Everything found that is neither `expected` nor one of `dirs` (the
/// directories holding what is expected).
fn extras(
    scan: &Scan,
    expected: &BTreeSet<&str>,
    dirs: &BTreeSet<&str>,
    diffs: &mut Vec<Difference>,
) {
    for (path, found) in scan {
        if expected.contains(path.as_str()) {
            continue;
        }
        let path = path.clone();
        match found {
            Found::Directory if dirs.contains(path.as_str()) => {}
            Found::Directory => diffs.push(Difference::ExtraDirectory { path }),
            Found::File { .. } => diffs.push(Difference::ExtraFile { path }),
            Found::Symlink { .. } => diffs.push(Difference::Symlink { path }),
            Found::Other => diffs.push(Difference::NotAFile { path }),
        }
    }
}

/// Every directory holding `path` (`a` and `a/b` for `a/b/c`).
fn parents<'a>(path: &'a str, into: &mut BTreeSet<&'a str>) {
    let mut end = 0;
    while let Some(i) = path[end..].find('/') {
        end += i;
        into.insert(&path[..end]);
        end += 1;
    }
}

/// Lists every difference between a scanned tree and the layout of a
/// tree-kind snapshot's view: a directory (empty or not), symlink or file
/// of the layout that is absent or of another kind, a symlink whose target
/// differs, a file whose bytes or exec bit differ, and anything the layout
/// does not have.
pub fn compare_layout(scan: &Scan, layout: &[TreeEntry]) -> Vec<Difference> {
    let mut diffs = Vec::new();
    let mut expected = BTreeSet::new();
    let mut holding = BTreeSet::new();
    for e in layout {
        expected.insert(e.path.as_str());
        parents(&e.path, &mut holding);
        let path = e.path.clone();
        let found = scan.get(&e.path);
        match &e.node {
            Node::Directory => match found {
                None => diffs.push(Difference::MissingDirectory { path }),
                Some(Found::Directory) => {}
                Some(_) => diffs.push(Difference::NotADirectory { path }),
            },
            Node::Symlink { target } => match found {
                None => diffs.push(Difference::MissingSymlink { path }),
                Some(Found::Symlink { target: t }) if t == target.as_bytes() => {}
                Some(Found::Symlink { target: t }) => diffs.push(Difference::SymlinkChanged {
                    path,
                    expected: target.clone(),
                    found: String::from_utf8_lossy(t).into_owned(),
                }),
                Some(_) => diffs.push(Difference::NotASymlink { path }),
            },
            Node::File { sha256, mode, .. } => match found {
                None => diffs.push(Difference::Missing { path }),
                Some(found) => compare_file(found, path, sha256, mode & 0o111 != 0, &mut diffs),
            },
        }
    }
    extras(scan, &expected, &holding, &mut diffs);
    diffs
}

/// Checks that `root` is exactly the snapshot `entries` describe.
pub fn matches(root: &Path, entries: &[Entry]) -> Result<Vec<Difference>> {
    Ok(compare(&scan_tree(root)?, entries))
}

/// Every difference between the tree at `root` and the snapshot `digest`:
/// a CE snapshot's files as the catalogue lists them, a tree kind's view
/// as its layout holds it (directories, symlinks and files).
pub fn differences(store: &Store, digest: &ManifestDigest, root: &Path) -> Result<Vec<Difference>> {
    match super::layout::tree_layout(store, digest)? {
        Some(layout) => Ok(compare_layout(&scan_tree(root)?, &layout)),
        None => matches(root, &store.catalogue().files(digest)?),
    }
}

/// Scans the directory at `root`, refusing a path that is no directory.
fn scan_tree(root: &Path) -> Result<Scan> {
    if !root.is_dir() {
        let path = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
        if root.exists() {
            return Err(Error::NotATree { path });
        }
        return Err(Error::Absent {
            message: format!(
                "no directory at '{}'; give the path of a view or tree",
                path.display()
            ),
            path,
        });
    }
    scan(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(data: &[u8], executable: bool) -> Found {
        Found::File {
            sha256: ObjectId::of(data),
            size: data.len() as u64,
            executable,
        }
    }

    fn link(target: &[u8]) -> Found {
        Found::Symlink {
            target: target.to_vec(),
        }
    }

    fn layout() -> Vec<TreeEntry> {
        vec![
            TreeEntry::directory("d"),
            TreeEntry::directory("d/empty"),
            TreeEntry::file_of("d/run", b"#!", 0o755),
            TreeEntry::symlink("d/link", "run"),
        ]
    }

    fn exact() -> Scan {
        Scan::from([
            ("d".to_string(), Found::Directory),
            ("d/empty".to_string(), Found::Directory),
            ("d/run".to_string(), file(b"#!", true)),
            ("d/link".to_string(), link(b"run")),
        ])
    }

    #[test]
    fn a_tree_that_is_its_layout_has_no_difference() {
        assert_eq!(compare_layout(&exact(), &layout()), []);
        // The file comparison alone counts the directory and the link.
        let files: Vec<Entry> = vec![Entry {
            path: "d/run".into(),
            sha256: ObjectId::of(b"#!"),
            size: 2,
            executable: true,
        }];
        assert_eq!(compare(&exact(), &files).len(), 2);
    }

    #[test]
    fn each_way_a_tree_differs_from_its_layout_is_named() {
        let path = |p: &str| p.to_string();
        type Tamper = fn(&mut Scan);
        let cases: Vec<(Tamper, Difference)> = vec![
            (
                |s| {
                    s.remove("d/empty");
                },
                Difference::MissingDirectory {
                    path: path("d/empty"),
                },
            ),
            (
                |s| {
                    s.insert("d/empty".into(), file(b"", false));
                },
                Difference::NotADirectory {
                    path: path("d/empty"),
                },
            ),
            (
                |s| {
                    s.remove("d/link");
                },
                Difference::MissingSymlink {
                    path: path("d/link"),
                },
            ),
            (
                |s| {
                    s.insert("d/link".into(), Found::Directory);
                },
                Difference::NotASymlink {
                    path: path("d/link"),
                },
            ),
            (
                |s| {
                    s.insert("d/link".into(), link(b"r\xffn"));
                },
                Difference::SymlinkChanged {
                    path: path("d/link"),
                    expected: "run".into(),
                    found: "r\u{fffd}n".into(),
                },
            ),
            (
                |s| {
                    s.insert("d/run".into(), file(b"#!", false));
                },
                Difference::ExecChanged {
                    path: path("d/run"),
                    expected: true,
                },
            ),
            (
                |s| {
                    s.insert("d/run".into(), link(b"run"));
                },
                Difference::Symlink {
                    path: path("d/run"),
                },
            ),
            (
                |s| {
                    s.insert("d/empty/x".into(), Found::Other);
                },
                Difference::NotAFile {
                    path: path("d/empty/x"),
                },
            ),
            (
                |s| {
                    s.insert("e".into(), Found::Directory);
                },
                Difference::ExtraDirectory { path: path("e") },
            ),
        ];
        for (tamper, want) in cases {
            let mut scan = exact();
            tamper(&mut scan);
            assert_eq!(compare_layout(&scan, &layout()), [want]);
        }
    }
}
