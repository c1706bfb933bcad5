//! The whole tree of a revision, read once and checked as `git checkout`
//! checks it before anything of it is used.
//!
//! A checkout writes every path of the revision, or refuses the whole of it:
//! so every tree from the root down is read (each checked against its id)
//! and every entry judged, not only the plugin's directory. A revision is
//! refused ([`GitError::TreeInvalid`]) when
//!
//! - a tree lists an empty name, a name with `/`, or one name twice (a blob
//!   and a tree of one name included): [`name::check_entries`];
//! - the path of a file, symlink or submodule fails git's `verify_path()`
//!   (`.`, `..`, `.git` in any case, its NTFS aliases under
//!   `core.protectNTFS`, its HFS+ aliases under `core.protectHFS`, a
//!   symlink `.gitmodules`): [`name::verify_path`];
//! - the filesystem cannot hold such a path ([`name::check_lengths`]);
//! - a symlink's target is one no symlink can hold: empty (or starting with
//!   NUL, which ends it), or of `PATH_MAX` bytes or more;
//! - a file or symlink names an object of another type
//!   ([`GitError::TreeInvalid`]), or one the repository lacks
//!   ([`GitError::ObjectMissing`]); but in a partial clone
//!   (`extensions.partialClone`), whose checkout fetches what is missing,
//!   only the objects the walk reads must be there.
//!
//! An empty directory is written by no checkout, so the names inside one
//! are only checked by [`name::check_entries`], as git does.
//!
//! The walk stops at [`MAX_PATHS`] paths: trees that name each other many
//! times over (each is read once, but walked at every path) would otherwise
//! make a few kilobytes of objects take hours.

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use gix::objs::tree::EntryKind;
use gix::objs::Kind;
use gix::ObjectId;

use super::name::{self, Protect};
use super::objects::{self, Bad};
use super::{join, GitEntry, GitError};

/// The most paths (files, symlinks, submodules and directories) a revision
/// may hold: more than the largest repositories' checkouts, and a bound on
/// the walk's time where trees name each other many times over.
pub(super) const MAX_PATHS: usize = 1 << 20;

/// A revision's trees and symlinks, read and checked.
#[derive(Default)]
pub(super) struct Revision {
    /// Every tree of the revision, by id: its entries, sorted by name.
    trees: HashMap<ObjectId, Rc<[GitEntry]>>,
    /// Every symlink's target the repository holds, by id, as a checkout
    /// writes it: up to its first NUL.
    links: HashMap<ObjectId, Vec<u8>>,
    /// The blobs named `.gitattributes`, by path in the repository.
    attributes: Vec<(Vec<u8>, ObjectId)>,
}

impl Revision {
    /// Reads and checks the tree `root` of `repo` (at `repo_path`, for
    /// paths in refusals) with the protections `protect`; `fold` compares
    /// names case-insensitively (`core.ignoreCase`) when finding
    /// `.gitattributes`.
    pub(super) fn read(
        repo: &gix::Repository,
        repo_path: &Path,
        root: ObjectId,
        protect: Protect,
        fold: bool,
    ) -> Result<Revision, GitError> {
        let partial = repo
            .config_snapshot()
            .string("extensions.partialClone")
            .is_some();
        let invalid = |rel: &[u8], reason: String| GitError::TreeInvalid {
            path: checkout_path(repo_path, rel),
            reason,
        };
        let mut revision = Revision::default();
        let mut pending: Vec<(ObjectId, Vec<u8>)> = vec![(root, Vec::new())];
        let mut paths = 0usize;
        while let Some((id, rel)) = pending.pop() {
            let entries = match revision.trees.get(&id) {
                Some(entries) => Rc::clone(entries),
                None => {
                    let entries = read_tree(repo, repo_path, id, &rel)?;
                    revision.trees.insert(id, Rc::clone(&entries));
                    entries
                }
            };
            for entry in entries.iter() {
                let path = join(&rel, &entry.name);
                // One tree named from many places is walked at each: a few
                // small trees can name more paths than any checkout holds.
                paths += 1;
                if paths > MAX_PATHS {
                    return Err(invalid(
                        &path,
                        format!(
                            "the revision holds more than {MAX_PATHS} paths; none of it is read"
                        ),
                    ));
                }
                if entry.kind == EntryKind::Tree {
                    pending.push((entry.id, path));
                    continue;
                }
                let symlink = entry.kind == EntryKind::Link;
                if let Err(problem) = name::verify_path(&path, symlink, protect) {
                    return Err(invalid(
                        &path,
                        format!("git refuses the path: {}", problem.describe()),
                    ));
                }
                if let Err(problem) = name::check_lengths(&path) {
                    return Err(invalid(
                        &path,
                        format!("no filesystem holds the path: {}", problem.describe()),
                    ));
                }
                match entry.kind {
                    EntryKind::Link if !revision.links.contains_key(&entry.id) => {
                        match link_target(repo, repo_path, entry.id, &path)? {
                            Some(target) => {
                                revision.links.insert(entry.id, target);
                            }
                            None if partial => {}
                            None => {
                                return Err(bad_object(repo_path, &path, entry.id, Bad::Missing))
                            }
                        }
                    }
                    EntryKind::Blob | EntryKind::BlobExecutable => {
                        match objects::header(repo, entry.id) {
                            Ok((Kind::Blob, _)) => {}
                            Ok((found, _)) => {
                                let bad = objects::wrong_kind(repo, entry.id, Kind::Blob, found);
                                return Err(bad_object(repo_path, &path, entry.id, bad));
                            }
                            Err(Bad::Missing) if partial => {}
                            Err(bad) => return Err(bad_object(repo_path, &path, entry.id, bad)),
                        }
                    }
                    _ => {}
                }
                let is_attributes = if fold {
                    entry.name.eq_ignore_ascii_case(b".gitattributes")
                } else {
                    entry.name == b".gitattributes"
                };
                if is_attributes && entry.kind != EntryKind::Commit {
                    revision.attributes.push((path, entry.id));
                }
            }
        }
        Ok(revision)
    }

    /// The entries of tree `id`, if it is one of the revision's.
    pub(super) fn tree(&self, id: ObjectId) -> Option<&[GitEntry]> {
        self.trees.get(&id).map(|e| &e[..])
    }

    /// The target of symlink `id`, if the repository holds it.
    pub(super) fn link(&self, id: ObjectId) -> Option<&[u8]> {
        self.links.get(&id).map(Vec::as_slice)
    }

    /// The blobs named `.gitattributes`, by path in the repository.
    pub(super) fn attributes(&self) -> &[(Vec<u8>, ObjectId)] {
        &self.attributes
    }
}

/// Where a checkout at `repo_path` writes `rel`.
fn checkout_path(repo_path: &Path, rel: &[u8]) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    if rel.is_empty() {
        repo_path.to_path_buf()
    } else {
        repo_path.join(std::ffi::OsStr::from_bytes(rel))
    }
}

/// The error for object `id` at `rel` that could not be read as a `want`.
pub(super) fn bad_object(repo_path: &Path, rel: &[u8], id: ObjectId, bad: Bad) -> GitError {
    let path = checkout_path(repo_path, rel);
    let id_text = id.to_string();
    match bad {
        Bad::Missing => GitError::ObjectMissing { path, id: id_text },
        Bad::Kind { want, found } => GitError::TreeInvalid {
            path,
            reason: format!("the object {id} it names is a {found}, not a {want}"),
        },
        Bad::TooLarge { size, limit } => GitError::ObjectTooLarge {
            path,
            id: id_text,
            size,
            limit,
        },
        Bad::Mismatch(actual) => GitError::ObjectCorrupt {
            path,
            id: id_text,
            reason: format!(
                "its bytes hash to {actual}, not to its name (git fsck: hash-path mismatch)"
            ),
        },
        Bad::Corrupt(reason) => GitError::ObjectCorrupt {
            path,
            id: id_text,
            reason,
        },
        Bad::Unreadable(reason) => GitError::Read {
            repo: repo_path.to_path_buf(),
            what: format!("{id} ('{}')", String::from_utf8_lossy(rel)),
            reason,
        },
    }
}

/// The entries of tree `id` (at `rel`), checked against its id and as
/// `git fsck` checks a tree's names, sorted by name.
pub(super) fn read_tree(
    repo: &gix::Repository,
    repo_path: &Path,
    id: ObjectId,
    rel: &[u8],
) -> Result<Rc<[GitEntry]>, GitError> {
    let data = objects::read(repo, id, Kind::Tree, objects::MAX_META_BYTES)
        .map_err(|bad| bad_object(repo_path, rel, id, bad))?;
    let decoded = gix::objs::TreeRef::from_bytes(&data, repo.object_hash()).map_err(|e| {
        bad_object(
            repo_path,
            rel,
            id,
            Bad::Corrupt(format!("it is not a tree: {}", super::reason(&e))),
        )
    })?;
    let mut entries: Vec<GitEntry> = decoded
        .entries
        .iter()
        .map(|e| GitEntry {
            name: e.filename.to_vec(),
            kind: e.mode.kind(),
            id: e.oid.to_owned(),
        })
        .collect();
    if let Err((i, problem)) = name::check_entries(
        entries
            .iter()
            .map(|e| (e.name.as_slice(), e.kind == EntryKind::Tree)),
    ) {
        let at = match problem {
            name::TreeProblem::EmptyName => rel.to_vec(),
            _ => join(rel, &entries[i].name),
        };
        return Err(GitError::TreeInvalid {
            path: checkout_path(repo_path, &at),
            reason: format!(
                "{} (git fsck calls the tree {id} broken)",
                problem.describe()
            ),
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries.into())
}

/// The target of symlink `id` (at `rel`) as a checkout writes it, or `None`
/// when the repository lacks it; refused when no symlink can hold it, or
/// when it is no blob.
pub(super) fn link_target(
    repo: &gix::Repository,
    repo_path: &Path,
    id: ObjectId,
    rel: &[u8],
) -> Result<Option<Vec<u8>>, GitError> {
    let cannot = |reason: String| GitError::TreeInvalid {
        path: checkout_path(repo_path, rel),
        reason: format!("no symlink can hold its target: {reason}"),
    };
    let limit = name::PATH_MAX as u64 - 1;
    let mut target = match objects::read(repo, id, Kind::Blob, limit) {
        Ok(target) => target,
        Err(Bad::Missing) => return Ok(None),
        Err(Bad::TooLarge { size, .. }) => {
            return Err(cannot(format!(
                "it holds {size} bytes, and a symlink at most {limit}"
            )))
        }
        Err(bad) => return Err(bad_object(repo_path, rel, id, bad)),
    };
    if let Some(nul) = target.iter().position(|b| *b == 0) {
        target.truncate(nul);
    }
    if target.is_empty() {
        return Err(cannot("it is empty".into()));
    }
    Ok(Some(target))
}
