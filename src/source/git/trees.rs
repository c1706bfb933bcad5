//! A revision's trees for the tree kinds' captures: the declared paths of
//! `ingest --profile tree|dependency|task --git REPO --rev REV`, read from
//! the revision's objects as a checkout of that revision would hold them.
//!
//! The revision is opened as a release is (`GitTree::open`): every object
//! read is checked against its id, every tree of the revision judged as
//! `git checkout` judges it, every blob bounded from its header before it is
//! inflated, and a file whose checkout bytes would differ from its blob
//! (the repository's attributes and configuration) refused. The entries
//! are recorded by the capture's own [`Builder`], so the harness's bounds,
//! order, collisions and symlink checks are the ones a walk of a checkout
//! meets; what a checkout of the revision holds, and so what is recorded:
//!
//! - a blob of mode `100644` is a file of mode `0o644`, one of `100755` a
//!   file of mode `0o755` (a checkout under umask 022); a `sandbox_copy`
//!   tree records every file at mode 0, as the walk does;
//! - a symlink (`120000`) is a symlink: kept in a dependency and checked as
//!   the walk checks one there, refused in a `sandbox_copy` tree with the
//!   harness's message (`sandbox_copy must not traverse a symlink: PATH`);
//! - a submodule (`160000`) the capture reaches is refused
//!   ([`GitError::Submodule`], rule `git-submodule`): its checkout depends
//!   on whether it is initialised, so no one tree stands for it;
//! - a tree that holds no file, symlink or submodule, however deep, is
//!   written by no checkout: it is absent, as on a checkout's disk.
//!
//! Each file's blob is read whole (at most the capture's total bound, which
//! is checked from the blob's header before it is inflated).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gix::objs::tree::EntryKind;
use gix::ObjectId;
use rustix::io::Errno;

use super::objects::{self, Bad};
use super::{GitEntry, GitError, GitRequest, GitTree, OpenError, PluginDir};
use crate::dirent::sort_like_python;
use crate::error::Error;
use crate::profile::tree::capture::{
    finish_dependency, Budget, Builder, CaptureError, CapturedDependency, FileSink, Flavour,
    Limits, OsCause,
};
use crate::profile::tree::DEPENDENCY_ROOT;
use crate::source::Fault;

/// The mode a checkout under umask 022 gives a blob of mode `100644`.
pub const CHECKOUT_FILE_MODE: u32 = 0o644;
/// The mode a checkout under umask 022 gives a blob of mode `100755`.
pub const CHECKOUT_EXECUTABLE_MODE: u32 = 0o755;

/// Why a capture from a revision failed: the harness's rejection of what a
/// checkout holds, or the revision itself (its objects, its trees, a
/// submodule, a checkout conversion).
#[derive(Debug)]
pub enum TreeGitError {
    /// The harness's rejection, word for word.
    Capture(CaptureError),
    /// The repository or the revision.
    Revision(Error),
}

impl From<CaptureError> for TreeGitError {
    fn from(e: CaptureError) -> Self {
        TreeGitError::Capture(e)
    }
}

impl From<GitError> for TreeGitError {
    fn from(e: GitError) -> Self {
        TreeGitError::Revision(e.into())
    }
}

/// A refusal of the revision's reading, as a [`TreeGitError`].
fn fault(f: Fault) -> TreeGitError {
    TreeGitError::Revision(match f {
        Fault::Io(e) => Error::Integrity(format!("could not read the revision: {e}")),
        Fault::Rejected(r) => r.into(),
        Fault::Git(e) => e.into(),
    })
}

/// What a declared path names in the revision.
enum Found {
    /// A tree: its id and its path in the repository.
    Tree(ObjectId, Vec<u8>),
    /// A blob: its entry and its path in the repository.
    Blob(GitEntry, Vec<u8>),
}

/// A revision of a repository, opened and checked, to capture trees from.
pub struct RevisionTrees {
    tree: GitTree,
    /// Whether each tree met holds anything a checkout writes.
    written: RefCell<HashMap<ObjectId, bool>>,
}

impl std::fmt::Debug for RevisionTrees {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevisionTrees")
            .field("repo", &self.tree.repo_path())
            .field("commit", &self.tree.commit())
            .finish_non_exhaustive()
    }
}

impl RevisionTrees {
    /// Opens `repo` (a work tree or a bare repository) at `rev`: the
    /// revision resolved to a commit, and its whole tree read and checked
    /// as `git checkout` checks it.
    ///
    /// # Errors
    ///
    /// [`GitError`]s, naming the revision and its commit where a rule is
    /// broken.
    pub fn open(repo: &Path, rev: &str) -> Result<RevisionTrees, Error> {
        let request = GitRequest {
            repo,
            rev,
            dir: PluginDir::Subdir(Path::new("")),
        };
        let tree = GitTree::open(&request).map_err(|e| {
            let e = match e {
                OpenError::Rejected(r) => Error::from(r),
                OpenError::Git(e) => Error::from(e),
            };
            match e.rule() {
                Some(_) => e.in_revision(&super::absolute_like_python(repo), rev, None),
                None => e,
            }
        })?;
        Ok(RevisionTrees {
            tree,
            written: RefCell::new(HashMap::new()),
        })
    }

    /// The repository, absolute: where a checkout's paths are shown.
    pub fn repo_path(&self) -> &Path {
        self.tree.repo_path()
    }

    /// The revision's commit, in hex.
    pub fn commit(&self) -> String {
        self.tree.commit().to_string()
    }

    /// `e`, naming the revision, its commit and the path inside it.
    pub fn in_revision(&self, e: Error) -> Error {
        e.in_revision(self.tree.repo_path(), self.tree.rev(), Some(self.commit()))
    }

    /// Where a checkout at the repository's path would put `rel`.
    fn checkout_path(&self, rel: &[u8]) -> PathBuf {
        self.tree.checkout_path(rel)
    }

    /// Whether a checkout writes anything for `entry` (at `rel`): a tree
    /// holding no file, symlink or submodule, however deep, it does not.
    /// Depth first with a stack of its own: a chain of empty trees may be
    /// as deep as the revision has paths.
    fn is_written(&self, entry: &GitEntry, rel: &[u8]) -> Result<bool, TreeGitError> {
        if entry.kind != EntryKind::Tree {
            return Ok(true);
        }
        if let Some(known) = self.written.borrow().get(&entry.id) {
            return Ok(*known);
        }
        // Each tree being looked into: its id, its path, its entries, and
        // how many of them are looked at.
        let mut stack = vec![(
            entry.id,
            rel.to_vec(),
            self.tree.entries(entry.id, rel)?,
            0usize,
        )];
        while let Some((id, at, entries, next)) = stack.last_mut() {
            let Some(child) = entries.get(*next).cloned() else {
                self.written.borrow_mut().insert(*id, false);
                stack.pop();
                continue;
            };
            *next += 1;
            let known = match child.kind {
                EntryKind::Tree => self.written.borrow().get(&child.id).copied(),
                _ => Some(true),
            };
            match known {
                Some(false) => {}
                Some(true) => {
                    let mut written = self.written.borrow_mut();
                    for (id, ..) in &stack {
                        written.insert(*id, true);
                    }
                    return Ok(true);
                }
                None => {
                    let child_rel = super::join(at, &child.name);
                    let entries = self.tree.entries(child.id, &child_rel)?;
                    stack.push((child.id, child_rel, entries, 0));
                }
            }
        }
        Ok(false)
    }

    /// The entries of tree `id` (at `rel`) a checkout writes, in Python's
    /// sorted order of their names.
    fn listing(&self, id: ObjectId, rel: &[u8]) -> Result<Vec<GitEntry>, TreeGitError> {
        let mut kept = Vec::new();
        for e in self.tree.entries(id, rel)? {
            if self.is_written(&e, &super::join(rel, &e.name))? {
                kept.push(e);
            }
        }
        let mut names: Vec<Vec<u8>> = kept.iter().map(|e| e.name.clone()).collect();
        sort_like_python(&mut names);
        let mut by_name: HashMap<Vec<u8>, GitEntry> =
            kept.into_iter().map(|e| (e.name.clone(), e)).collect();
        Ok(names
            .into_iter()
            .filter_map(|n| by_name.remove(&n))
            .collect())
    }

    /// The names at the revision's top level a checkout writes, in Python's
    /// sorted order: the `sandbox_copy` paths when none is declared.
    ///
    /// # Errors
    ///
    /// [`CaptureError::PathNotUtf8`] for a name that is not UTF-8; the
    /// revision's errors.
    pub fn top_level_names(&self) -> Result<Vec<String>, TreeGitError> {
        self.listing(self.tree.root_tree(), b"")?
            .into_iter()
            .map(|e| {
                String::from_utf8(e.name).map_err(|n| {
                    CaptureError::PathNotUtf8(String::from_utf8_lossy(n.as_bytes()).into_owned())
                        .into()
                })
            })
            .collect()
    }

    /// The refusal of the submodule at `rel`.
    fn submodule(&self, rel: &[u8]) -> TreeGitError {
        GitError::Submodule {
            path: self.checkout_path(rel),
        }
        .into()
    }

    /// Finds the declared path `relative` as the walk's `open_relative`
    /// opens it on a checkout, component by component, with its refusals.
    fn open_relative(&self, relative: &str) -> Result<Found, TreeGitError> {
        let parts: Vec<&[u8]> = relative
            .as_bytes()
            .split(|b| *b == b'/')
            .filter(|p| !p.is_empty() && *p != b".")
            .collect();
        let mut tree = self.tree.root_tree();
        let mut rel: Vec<u8> = Vec::new();
        let mut found = Found::Tree(tree, Vec::new());
        for (index, part) in parts.iter().enumerate() {
            let last = index + 1 == parts.len();
            let child = super::join(&rel, part);
            let shown = String::from_utf8_lossy(&child).into_owned();
            let entry = self
                .listing(tree, &rel)?
                .into_iter()
                .find(|e| e.name == *part);
            let Some(entry) = entry else {
                return Err(CaptureError::PathUnavailable {
                    path: shown,
                    cause: OsCause::new(Errno::NOENT, Some(part)),
                }
                .into());
            };
            match entry.kind {
                EntryKind::Link => return Err(CaptureError::Symlink(shown).into()),
                EntryKind::Commit => return Err(self.submodule(&child)),
                EntryKind::Blob | EntryKind::BlobExecutable if !last => {
                    return Err(CaptureError::ParentNotDirectory(shown).into())
                }
                EntryKind::Blob | EntryKind::BlobExecutable => {
                    found = Found::Blob(entry, child.clone());
                }
                EntryKind::Tree => {
                    tree = entry.id;
                    found = Found::Tree(entry.id, child.clone());
                }
            }
            rel = child;
        }
        Ok(found)
    }

    /// Records what `found` holds at `relative`, as the walk's
    /// `copy_descriptor` records what it opened.
    fn copy(
        &self,
        builder: &mut Builder<'_>,
        found: Found,
        relative: &[u8],
    ) -> Result<(), TreeGitError> {
        match found {
            Found::Blob(entry, rel) => self.copy_file(builder, &entry, &rel, relative),
            Found::Tree(id, rel) => {
                builder.add_directory(relative)?;
                for entry in self.listing(id, &rel)? {
                    let child_rel = super::join(&rel, &entry.name);
                    let child = join_relative(relative, &entry.name);
                    match entry.kind {
                        EntryKind::Tree => {
                            self.copy(builder, Found::Tree(entry.id, child_rel), &child)?
                        }
                        EntryKind::Blob | EntryKind::BlobExecutable => {
                            self.copy_file(builder, &entry, &child_rel, &child)?
                        }
                        EntryKind::Link => {
                            let target = self.tree.link_target(entry.id, &child_rel)?;
                            builder.add_symlink(&child, &target)?;
                        }
                        EntryKind::Commit => return Err(self.submodule(&child_rel)),
                    }
                }
                Ok(())
            }
        }
    }

    /// Records the blob `entry` (at `rel` in the repository) at `relative`:
    /// its size from its header checked against the total bound before it
    /// is inflated, its bytes checked against its id and against what a
    /// checkout would write.
    fn copy_file(
        &self,
        builder: &mut Builder<'_>,
        entry: &GitEntry,
        rel: &[u8],
        relative: &[u8],
    ) -> Result<(), TreeGitError> {
        let repo = self.tree.repo();
        let size = match objects::header(repo, entry.id) {
            Ok((gix::objs::Kind::Blob, size)) => size,
            Ok((found, _)) => {
                let bad = objects::wrong_kind(repo, entry.id, gix::objs::Kind::Blob, found);
                return Err(self.tree.bad(rel, entry.id, bad).into());
            }
            Err(bad) => return Err(self.tree.bad(rel, entry.id, bad).into()),
        };
        builder.prepare_file(relative, size)?;
        let data = match objects::read(repo, entry.id, gix::objs::Kind::Blob, size) {
            Ok(data) => data,
            Err(Bad::TooLarge { .. }) => return Err(CaptureError::TotalBytes.into()),
            Err(bad) => return Err(self.tree.bad(rel, entry.id, bad).into()),
        };
        let path = || self.checkout_path(rel);
        self.tree.check_checkout(rel, &data, &path).map_err(fault)?;
        let mode = if entry.kind == EntryKind::BlobExecutable {
            CHECKOUT_EXECUTABLE_MODE
        } else {
            CHECKOUT_FILE_MODE
        };
        builder.add_file(relative, mode, &data)?;
        Ok(())
    }

    /// Records the declared `sandbox_copy` path `relative` with all it holds,
    /// as [`Builder::capture`] records it from a checkout.
    ///
    /// # Errors
    ///
    /// The harness's rejection ([`TreeGitError::Capture`]) or the
    /// revision's ([`TreeGitError::Revision`]).
    pub fn capture(&self, builder: &mut Builder<'_>, relative: &str) -> Result<(), TreeGitError> {
        let found = self.open_relative(relative)?;
        self.copy(builder, found, &posix(relative.as_bytes()))
    }

    /// Captures the dependency declared as `source`, to be mounted at
    /// `target`, as [`crate::profile::tree::capture::capture_dependency_into`]
    /// captures it from a checkout.
    ///
    /// # Errors
    ///
    /// As [`RevisionTrees::capture`].
    pub fn capture_dependency(
        &self,
        source: &str,
        target: &str,
        limits: Limits,
        budget: &mut Budget,
        sink: Option<&mut dyn FileSink>,
    ) -> Result<CapturedDependency, TreeGitError> {
        let mut builder = Builder::new(Flavour::Dependency, limits, budget);
        if let Some(sink) = sink {
            builder = builder.with_sink(sink);
        }
        let found = self.open_relative(source)?;
        self.copy(&mut builder, found, DEPENDENCY_ROOT.as_bytes())?;
        Ok(finish_dependency(builder, target)?)
    }
}

/// `PurePosixPath(path).as_posix()` for a relative path (`.` when empty).
fn posix(path: &[u8]) -> Vec<u8> {
    let joined = path
        .split(|b| *b == b'/')
        .filter(|p| !p.is_empty() && *p != b".")
        .collect::<Vec<_>>()
        .join(&b'/');
    if joined.is_empty() {
        b".".to_vec()
    } else {
        joined
    }
}

/// `relative/name`, or `name` under `.`.
fn join_relative(relative: &[u8], name: &[u8]) -> Vec<u8> {
    if relative == b"." {
        name.to_vec()
    } else {
        super::join(relative, name)
    }
}
