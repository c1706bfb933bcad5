//! Materializing a task's `sandbox_copy` tree into a clone, as the harness's
//! `TaskAssetSnapshot.materialize` does, and undoing it all on failure.
//!
//! The tree's entries are first written as a writable copy
//! ([`super::copies::write_tree`]: reflinks, or copies within the
//! fallback budget) into a staging directory beside the clone. Then every
//! declared root is checked in the clone as the harness checks it
//! (`_preflight_exact_root`: a symlink at or above a root, or a root that
//! is neither a file nor a directory, is refused in the harness's words),
//! and only then replaced, root by root: missing parents are made at 0700,
//! a regular file where a parent directory belongs is replaced, and what
//! was at the root is replaced whole (a stale child symlink is moved, never
//! followed).
//!
//! Unlike the harness, nothing is deleted until every root is in place:
//! what stood in the way is moved aside into the staging directory, and a
//! failure at any step moves each thing back in reverse order, so a failed
//! materialize leaves the clone as it was. A special file anywhere inside
//! a root to be replaced is refused before anything changes (the harness
//! refuses it while it deletes).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rustix::fs::{AtFlags, FileType, Mode};
use rustix::io::Errno;

use super::copies::{write_tree, CopyError, FallbackBudget, ObjectSource, Written};
use crate::profile::tree::capture::OsCause;
use crate::profile::tree::TreeEntry;

/// The clone as the harness's `real_directory` accepts it: an absolute
/// path to a directory that passes through no symlink.
pub fn real_clone(clone: &Path) -> Result<PathBuf, CopyError> {
    let lexical = std::path::absolute(clone)
        .map_err(|e| CopyError::io("resolve the clone's path", clone, e))?;
    let cause = |e: &std::io::Error| OsCause {
        errno: e.raw_os_error().unwrap_or(libc::EIO),
        filename: Some(lexical.to_string_lossy().into_owned()),
    };
    let st = match std::fs::symlink_metadata(&lexical) {
        Ok(st) => st,
        Err(e) => {
            return Err(CopyError::CloneNotADirectory {
                cause: Some(cause(&e)),
                path: lexical,
            })
        }
    };
    if !st.file_type().is_dir() {
        return Err(CopyError::CloneNotADirectory {
            path: lexical,
            cause: None,
        });
    }
    match std::fs::canonicalize(&lexical) {
        Ok(real) if real == lexical => Ok(lexical),
        Ok(_) => Err(CopyError::CloneTraversesSymlink { path: lexical }),
        Err(e) => Err(CopyError::CloneNotADirectory {
            cause: Some(cause(&e)),
            path: lexical,
        }),
    }
}

/// The parts of a declared root, as `PurePosixPath(root).parts` gives them.
fn parts(root: &str) -> Vec<&str> {
    root.split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect()
}

fn open_dir_at(dir: BorrowedFd<'_>, name: &str, display: &Path) -> Result<OwnedFd, CopyError> {
    crate::fsutil::open_dir(dir, name).map_err(|e| CopyError::io("open a directory", display, e))
}

fn kind_at(dir: BorrowedFd<'_>, name: &str, display: &Path) -> Result<Option<FileType>, CopyError> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(FileType::from_raw_mode(st.st_mode))),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(CopyError::io("examine a path in the clone", display, e)),
    }
}

/// Checks one declared root in the clone, as the harness's
/// `_preflight_exact_root` does; besides, a directory at the root may hold
/// nothing but files, directories and symlinks, as its removal needs.
fn preflight(clone: BorrowedFd<'_>, clone_path: &Path, root: &str) -> Result<(), CopyError> {
    let parts = parts(root);
    let mut current: Option<OwnedFd> = None;
    let mut display = clone_path.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        let dir = current.as_ref().map_or(clone, |fd| fd.as_fd());
        display.push(part);
        let last = i + 1 == parts.len();
        let Some(kind) = kind_at(dir, part, &display)? else {
            return Ok(());
        };
        if kind == FileType::Symlink {
            return Err(if last {
                CopyError::TargetSymlink(root.to_string(), display.clone())
            } else {
                CopyError::TargetSymlinkParent(root.to_string(), clone_path.join(root))
            });
        }
        if last {
            return match kind {
                FileType::RegularFile => Ok(()),
                FileType::Directory => {
                    let fd = open_dir_at(dir, part, &display)?;
                    only_removable(fd.as_fd(), &parts.join("/"), &display)
                }
                _ => Err(CopyError::TargetUnsupported(
                    root.to_string(),
                    display.clone(),
                )),
            };
        }
        match kind {
            FileType::RegularFile => return Ok(()),
            FileType::Directory => current = Some(open_dir_at(dir, part, &display)?),
            _ => {
                return Err(CopyError::TargetParentUnsupported(
                    root.to_string(),
                    display.clone(),
                ))
            }
        }
    }
    Ok(())
}

/// Refuses a special file anywhere below `dir` (the root `relative`), in
/// the words the harness's removal of it uses.
fn only_removable(dir: BorrowedFd<'_>, relative: &str, display: &Path) -> Result<(), CopyError> {
    let mut names = crate::fsutil::list_names(dir)
        .map_err(|e| CopyError::io("list a directory in the clone", display, e))?;
    names.sort();
    for name in names {
        let text = String::from_utf8_lossy(&name).into_owned();
        let child = format!("{relative}/{text}");
        let path = display.join(&text);
        let st = match rustix::fs::statat(dir, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(CopyError::io("examine a path in the clone", &path, e)),
        };
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile | FileType::Symlink => {}
            FileType::Directory => {
                let fd = crate::fsutil::open_dir(dir, name.as_slice())
                    .map_err(|e| CopyError::io("open a directory", &path, e))?;
                only_removable(fd.as_fd(), &child, &path)?;
            }
            _ => return Err(CopyError::TargetUnsupported(child, path)),
        }
    }
    Ok(())
}

/// One change made to the clone, and how to take it back.
enum Step {
    /// A missing parent directory was made.
    Made { parent: Rc<OwnedFd>, name: String },
    /// What stood at `name` was moved into the asides directory as `aside`.
    SetAside {
        parent: Rc<OwnedFd>,
        name: String,
        aside: String,
    },
    /// A staged root was moved into the clone.
    Placed {
        parent: Rc<OwnedFd>,
        name: String,
        staged: Rc<OwnedFd>,
    },
}

/// The changes made so far, to take back on failure.
struct Journal<'a> {
    asides: BorrowedFd<'a>,
    asides_path: &'a Path,
    steps: Vec<Step>,
}

impl Journal<'_> {
    /// Moves what is at `name` in `parent` aside.
    fn set_aside(
        &mut self,
        parent: &Rc<OwnedFd>,
        name: &str,
        display: &Path,
    ) -> Result<(), CopyError> {
        let aside = self.steps.len().to_string();
        rustix::fs::renameat(parent.as_fd(), name, self.asides, aside.as_str())
            .map_err(|e| CopyError::io("move a path of the clone aside", display, e))?;
        self.steps.push(Step::SetAside {
            parent: Rc::clone(parent),
            name: name.to_string(),
            aside,
        });
        Ok(())
    }

    /// Takes every change back, latest first; on the first that cannot
    /// be taken back, says where what was set aside is kept.
    fn undo(&mut self) -> Result<(), CopyError> {
        while let Some(step) = self.steps.pop() {
            let done = match &step {
                Step::Made { parent, name } => {
                    rustix::fs::unlinkat(parent.as_fd(), name.as_str(), AtFlags::REMOVEDIR)
                }
                Step::SetAside {
                    parent,
                    name,
                    aside,
                } => {
                    rustix::fs::renameat(self.asides, aside.as_str(), parent.as_fd(), name.as_str())
                }
                Step::Placed {
                    parent,
                    name,
                    staged,
                } => rustix::fs::renameat(
                    parent.as_fd(),
                    name.as_str(),
                    staged.as_fd(),
                    name.as_str(),
                ),
            };
            if let Err(e) = done {
                return Err(CopyError::io(
                    "put the clone back as it was (what was moved aside is kept in)",
                    self.asides_path,
                    e,
                ));
            }
        }
        Ok(())
    }
}

/// Replaces one declared root of the clone with its staged tree, as the
/// harness's `_publish_exact_root` does, recording each change.
fn publish(
    staged_root: BorrowedFd<'_>,
    staged_path: &Path,
    clone: &Rc<OwnedFd>,
    clone_path: &Path,
    root: &str,
    journal: &mut Journal<'_>,
) -> Result<(), CopyError> {
    let parts = parts(root);
    let Some((name, parents)) = parts.split_last() else {
        return Ok(());
    };
    let parent_text = parents.join("/");
    // The staged parent.
    let mut staged = None::<OwnedFd>;
    let mut staged_display = staged_path.to_path_buf();
    for part in parents {
        staged_display.push(part);
        let dir = staged.as_ref().map_or(staged_root, |fd| fd.as_fd());
        staged = Some(open_dir_at(dir, part, &staged_display)?);
    }
    let staged = Rc::new(match staged {
        Some(fd) => fd,
        None => rustix::io::dup(staged_root)
            .map_err(|e| CopyError::io("open a directory", staged_path, e))?,
    });
    // The clone's parent, made where missing.
    let mut current = Rc::clone(clone);
    let mut display = clone_path.to_path_buf();
    for part in parents {
        display.push(part);
        let mut kind = kind_at(current.as_fd(), part, &display)?;
        match kind {
            Some(FileType::Symlink) => {
                return Err(CopyError::TargetTraversesSymlink(
                    parent_text.clone(),
                    display.clone(),
                ))
            }
            Some(FileType::RegularFile) => {
                journal.set_aside(&current, part, &display)?;
                kind = None;
            }
            Some(FileType::Directory) | None => {}
            Some(_) => {
                return Err(CopyError::TargetParentUnsupported(
                    parent_text.clone(),
                    display.clone(),
                ))
            }
        }
        if kind.is_none() {
            rustix::fs::mkdirat(current.as_fd(), *part, Mode::from_raw_mode(0o700))
                .map_err(|e| CopyError::io("create a directory in the clone", &display, e))?;
            journal.steps.push(Step::Made {
                parent: Rc::clone(&current),
                name: part.to_string(),
            });
        }
        current = Rc::new(open_dir_at(current.as_fd(), part, &display)?);
    }
    display.push(name);
    match kind_at(current.as_fd(), name, &display)? {
        None => {}
        Some(FileType::RegularFile | FileType::Symlink | FileType::Directory) => {
            journal.set_aside(&current, name, &display)?;
        }
        Some(_) => {
            return Err(CopyError::TargetUnsupported(
                root.to_string(),
                display.clone(),
            ))
        }
    }
    rustix::fs::renameat(staged.as_fd(), *name, current.as_fd(), *name)
        .map_err(|e| CopyError::io("move a staged root into the clone", &display, e))?;
    journal.steps.push(Step::Placed {
        parent: current,
        name: name.to_string(),
        staged,
    });
    Ok(())
}

/// Replaces each declared root (`declarations`, in order) of the clone
/// at `clone` with the tree `entries` hold there, made from the store's
/// objects as a writable copy within `budget`. The staging directory goes
/// beside the clone, under a name `mark` is told first (so that whoever
/// cleans up after a crash can find it); it is removed at the end.
///
/// A failure changes nothing in the clone (see the module's docs).
pub fn materialize_tree(
    objects: ObjectSource<'_>,
    entries: &[TreeEntry],
    declarations: &[String],
    clone: &Path,
    budget: &mut FallbackBudget,
    mark: impl FnOnce(&Path) -> crate::error::Result<()>,
) -> crate::error::Result<Written> {
    let clone = real_clone(clone)?;
    let (Some(parent), Some(name)) = (clone.parent(), clone.file_name()) else {
        return Err(CopyError::CloneNotADirectory {
            path: clone,
            cause: None,
        }
        .into());
    };
    let parent_fd = crate::fsutil::open_dir(rustix::fs::CWD, parent)
        .map_err(|e| CopyError::io("open the clone's parent", parent, e))?;
    let staging_name = crate::store::views::build::temp_name(name);
    let staging = parent.join(&staging_name);
    mark(&staging)?;
    rustix::fs::mkdirat(
        &parent_fd,
        staging_name.as_str(),
        Mode::from_raw_mode(0o700),
    )
    .map_err(|e| CopyError::io("create a staging directory", &staging, e))?;
    let mut keep_staging = false;
    let result = (|| -> crate::error::Result<Written> {
        let staging_fd = open_dir_at(parent_fd.as_fd(), &staging_name, &staging)?;
        let (tree, asides) = (staging.join("tree"), staging.join("asides"));
        for dir in ["tree", "asides"] {
            rustix::fs::mkdirat(&staging_fd, dir, Mode::from_raw_mode(0o700))
                .map_err(|e| CopyError::io("create a staging directory", staging.join(dir), e))?;
        }
        let tree_fd = open_dir_at(staging_fd.as_fd(), "tree", &tree)?;
        let asides_fd = open_dir_at(staging_fd.as_fd(), "asides", &asides)?;
        let written = write_tree(objects, entries, tree_fd.as_fd(), &tree, budget)?;
        let clone_fd = Rc::new(
            crate::fsutil::open_dir(rustix::fs::CWD, &clone)
                .map_err(|e| CopyError::io("open the clone", &clone, e))?,
        );
        for root in declarations {
            preflight(clone_fd.as_fd(), &clone, root)?;
        }
        let mut journal = Journal {
            asides: asides_fd.as_fd(),
            asides_path: &asides,
            steps: Vec::new(),
        };
        for root in declarations {
            if let Err(e) = publish(
                tree_fd.as_fd(),
                &tree,
                &clone_fd,
                &clone,
                root,
                &mut journal,
            ) {
                if let Err(undo) = journal.undo() {
                    keep_staging = true;
                    return Err(undo.into());
                }
                return Err(e.into());
            }
        }
        Ok(written)
    })();
    if !keep_staging {
        let _ = crate::fsutil::remove_tree_at(parent_fd.as_fd(), &staging_name);
    }
    result
}

#[cfg(test)]
#[path = "materialize_tests.rs"]
mod tests;
