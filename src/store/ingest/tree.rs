//! Ingesting the tree kinds: a `sandbox_copy` tree, a dependency list, a whole task.
//!
//! The capture ([`crate::profile::tree::capture`]) walks a repository as
//! the benchmark harness does, in its order and with its first rejection;
//! this module gives the walk a [`FileSink`], and hashing threads (one per
//! core) beside it. Each regular file takes one of three ways:
//!
//! ```text
//!   file of the walk ──┬─ ≥ COPIED_FILE, a stored file has its size ─▶ thread: read and hash the
//!                      │     (likely stored)                             source; copy it only if
//!                      │                                                 its object is missing
//!                      ├─ ≥ COPIED_FILE, no stored file has its size ─▶ thread: copy it by the
//!                      │     (surely missing)                            kernel into the work
//!                      │                                                 directory, hash the copy
//!                      └─ smaller (or a git blob) ────────────────────▶ walk reads it whole,
//!                                                                        thread hashes it and writes
//!                                                                        it only if missing
//! ```
//!
//! A file left to a thread ([`DeferredFile`]) is judged there as the walk
//! would judge it (grown, changed, over the total bound); the first such
//! refusal, in the walk's order, stands in place of the walk's result.
//! An object is always named by the bytes it holds: those hashed are the
//! ones written, or the copy is hashed again. A git blob over
//! [`BUFFERED_FILE`] bytes is hashed on the walk's thread and written as
//! it is read. What was written is then published, made durable with one
//! `syncfs` and recorded as a CE ingest is ([`publish_and_record`]): a
//! failed ingest records nothing and leaves no object.
//!
//! A task ingest records its `tree` and `dependencies` manifests, then its
//! `task` manifest; should a later record fail, the earlier ones are taken
//! back ([`undo_ingest`]).

use std::collections::HashMap;
use std::io::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Condvar, Mutex};

use rustix::fs::{AtFlags, Mode, OFlags};
use serde_json::{Map, Value};

use crate::digest::{ManifestDigest, ObjectHasher, ObjectId};
use crate::error::{Classified, Classify, Error, ErrorKind, Result};
use crate::profile::ce::manifest::Manifest;
use crate::profile::tree::capture::{
    capture_dependency_into, validate_runtime_symlinks, Budget, Builder, CaptureError,
    DeferredFault, DeferredFile, FileSink, Flavour, Limits, OsCause,
};
use crate::profile::tree::declare::{
    check_dependency_binding, copy_declarations, dependency_declarations, is_harness_copy,
    CopyDeclarations, DeclarationError, DependencyDeclaration,
};
use crate::profile::tree::stored::{index_dir, Stored, TaskRecord};
use crate::profile::tree::{
    dependency_digests, manifest_digest, Dependency, TreeEntry, DEPENDENCY_ROOT,
};
use crate::source::git::trees::{RevisionTrees, TreeGitError};
use crate::store::core::objects::WorkDir;
use crate::store::ingest::{
    publish_and_record, undo_ingest, Drifted, IngestReport, Pending, Staged,
};
use crate::store::{Need, ObjectKey, Opener, Store};

/// The largest file handed whole to a hashing thread; a larger one is
/// hashed on the walk's thread (see the module's documentation). A 1.26 GB
/// `node_modules` keeps two thirds of its bytes in files of 16 to 48 MB.
pub const BUFFERED_FILE: u64 = 64 * 1024 * 1024;

/// The most bytes the free buffers kept for reuse may hold together.
const FREE_BUFFER_BYTES: usize = 256 * 1024 * 1024;

/// The smallest file copied by the kernel into the work directory, and
/// hashed there, when no stored file has its size (see the module's
/// documentation).
pub const COPIED_FILE: u64 = 256 * 1024;

/// How much a hashing thread reads of a copied file at a time.
const HASH_CHUNK: usize = 1024 * 1024;

/// The most bytes of files waiting for, or in, the hashing threads.
const IN_FLIGHT_BYTES: u64 = 256 * 1024 * 1024;

/// What an ingest of a tree kind captures.
#[derive(Clone, Debug)]
pub enum TreeForm {
    /// `--profile tree`: the `sandbox_copy` paths given (none: every name at
    /// the repository's top level, in Python's sorted order).
    Tree {
        /// The paths, as `--copy` gave them.
        copies: Vec<String>,
    },
    /// `--profile dependency`: the dependency list, pairs in order.
    Dependency {
        /// `(source, target)` as `--source`/`--target` gave them.
        pairs: Vec<(String, String)>,
    },
    /// `--profile task`: the harness's whole `TaskAssetCache.prepare`.
    Task {
        /// The task JSON file: an object with `sandbox_copy` and
        /// `sandbox_dependencies`.
        task: PathBuf,
        /// The commit the task is bound to (with a git revision, its
        /// commit when not given).
        resolved_sha: Option<String>,
        /// Where `eval/workflow_bench/review_cases` paths are read from.
        harness_root: Option<PathBuf>,
        /// A task binding (JSON object) whose dependency digests the
        /// capture must give.
        expect_binding: Option<PathBuf>,
    },
    /// `--profile runtime`: the GitNexus runtime of a checkout, its seven
    /// components after the checks `rules` make, as one tree.
    Runtime {
        /// The harness revision's rules.
        rules: crate::gitnexus::Rules,
    },
}

/// What to ingest.
#[derive(Clone, Debug)]
pub struct TreeIngestOptions<'a> {
    /// The repository.
    pub repo: &'a Path,
    /// What to capture of it.
    pub form: TreeForm,
    /// The snapshot's name (else its kind).
    pub name: Option<&'a str>,
    /// The capture's bounds: the harness's, or lower.
    pub limits: Limits,
    /// The key each snapshot recorded is signed with, if any.
    pub sign_with: Option<&'a crate::sign::PrivateKey>,
    /// Read the repository's revision from its objects instead of its
    /// directory.
    pub git: Option<GitRevision<'a>>,
}

/// A revision of the repository whose trees are captured as a checkout of
/// it would hold them ([`RevisionTrees`]).
#[derive(Clone, Copy, Debug)]
pub struct GitRevision<'a> {
    /// The revision: a tag, a branch, a commit.
    pub rev: &'a str,
    /// The checkout path a task's `repo_identity` names (default: the
    /// repository's absolute path).
    pub repo_identity: Option<&'a Path>,
}

/// Why a tree-kind ingest is refused before anything is stored.
#[derive(Debug, thiserror::Error)]
pub enum TreeIngestError {
    /// A declaration breaks one of the harness's rules (its words).
    #[error("{0}")]
    Declaration(#[from] DeclarationError),
    /// The capture refused a tree (the harness's words).
    #[error("{0}")]
    Capture(#[from] CaptureError),
    /// The repository or the harness root is not a real directory (the
    /// harness's words).
    #[error("{message}")]
    NotRealDirectory {
        /// The path as made absolute.
        path: PathBuf,
        /// The harness's message.
        message: String,
    },
    /// The task or binding file cannot be read as a JSON object.
    #[error("could not read the {what} '{}': {reason}", .path.display())]
    Input {
        /// `task` or `binding`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The manifest would be longer than the store reads a tree kind's.
    #[error("could not record the {kind} manifest: {size} bytes, more than {max}")]
    ManifestTooLarge {
        /// Its kind.
        kind: &'static str,
        /// Its length.
        size: u64,
        /// The bound, [`crate::profile::ce::manifest::MAX_TREE_MANIFEST_BYTES`].
        max: u64,
    },
    /// A review-case path is declared and no harness root was given.
    #[error("sandbox_copy path '{0}' is read from the harness root: pass --harness-root")]
    NoHarnessRoot(String),
}

impl Classify for TreeIngestError {
    /// `rejected` for the harness's rules, `usage` for unreadable input.
    fn kind(&self) -> ErrorKind {
        match self {
            TreeIngestError::Declaration(_)
            | TreeIngestError::Capture(_)
            | TreeIngestError::NotRealDirectory { .. }
            | TreeIngestError::ManifestTooLarge { .. } => ErrorKind::Rejected,
            TreeIngestError::Input { .. } | TreeIngestError::NoHarnessRoot(_) => ErrorKind::Usage,
        }
    }

    fn rule(&self) -> Option<&'static str> {
        match self {
            TreeIngestError::Declaration(e) => Some(e.rule()),
            TreeIngestError::Capture(e) => Some(e.rule()),
            TreeIngestError::NotRealDirectory { .. } => Some("task-asset-real-directory"),
            TreeIngestError::ManifestTooLarge { .. } => Some("tree-manifest-too-large"),
            TreeIngestError::Input { .. } | TreeIngestError::NoHarnessRoot(_) => None,
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            TreeIngestError::NotRealDirectory { path, .. }
            | TreeIngestError::Input { path, .. } => Some(path),
            _ => None,
        }
    }

    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }
}

impl From<TreeIngestError> for Error {
    fn from(e: TreeIngestError) -> Self {
        Error::Tree(Classified::new(e))
    }
}

fn rejected(e: impl Into<TreeIngestError>) -> Error {
    Error::from(e.into())
}

/// One entry as the harness's `TaskAssetSnapshot` lists it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct EntryReport {
    /// The path.
    pub path: String,
    /// `directory`, `file` or `symlink`.
    pub kind: &'static str,
    /// A file's length, a symlink target's; 0 for a directory.
    pub size: u64,
    /// The SHA-256 of a file's bytes or a symlink's target, `""` for a directory.
    pub sha256: String,
    /// The recorded mode.
    pub mode: u32,
    /// A symlink's target, `""` otherwise.
    pub link_target: String,
}

impl From<&TreeEntry> for EntryReport {
    fn from(e: &TreeEntry) -> Self {
        EntryReport {
            path: e.path.clone(),
            kind: e.kind(),
            size: e.size(),
            sha256: e.sha256().map(|s| s.to_hex()).unwrap_or_default(),
            mode: e.mode(),
            link_target: e.link_target().to_string(),
        }
    }
}

/// One dependency as the harness's `DependencySnapshot` lists it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DependencyReport {
    /// The source as declared.
    pub source: String,
    /// The target as declared.
    pub target: String,
    /// Where its payload lies in the task's view: `dependencies/<index>/payload`.
    pub snapshot_path: String,
    /// The payload's kind.
    pub kind: &'static str,
    /// Its entries.
    pub entries: Vec<EntryReport>,
    /// The bytes counted: files' and symlink targets' lengths.
    pub total_bytes: u64,
}

/// What storing did, for every form.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StoredCounts {
    /// Whether the snapshot (a task's: the task) was already recorded.
    pub already_present: bool,
    /// Distinct objects written.
    pub new_objects: u64,
    /// Distinct objects found already stored.
    pub reused_objects: u64,
    /// Bytes written to new objects.
    pub bytes_written: u64,
    /// The repository, absolute.
    pub source: String,
    /// The store, absolute.
    pub store: String,
}

/// The report of `ingest --profile tree`.
#[derive(Debug, serde::Serialize)]
pub struct TreeReport {
    /// `tree`.
    pub profile: &'static str,
    /// The snapshot's name.
    pub name: String,
    /// The store's digest of the snapshot: `task_asset_manifest_digest`.
    pub manifest_digest: ManifestDigest,
    /// The declarations as captured.
    pub declarations: Vec<String>,
    /// How many entries (directories, files) the tree holds.
    pub entries: usize,
    /// The bytes of its files.
    pub total_bytes: u64,
    /// What storing did.
    #[serde(flatten)]
    pub stored: StoredCounts,
}

/// The report of `ingest --profile runtime`.
#[derive(Debug, serde::Serialize)]
pub struct RuntimeReport {
    /// `tree`: the runtime is a tree snapshot.
    pub profile: &'static str,
    /// The snapshot's name.
    pub name: String,
    /// The runtime's digest: its tree manifest's, over the seven
    /// components (`gitnexus_runtime_manifest_digest`).
    pub manifest_digest: ManifestDigest,
    /// The rules the runtime was checked by: `seed` or `upstream`.
    pub rules: &'static str,
    /// Each component as recorded (`gitnexus/dist`, …) and the host path
    /// it was read from.
    pub components: Vec<RuntimeComponentReport>,
    /// How many entries (directories, files, symlinks) the tree holds.
    pub entries: usize,
    /// The bytes of its files and its symlinks' targets.
    pub total_bytes: u64,
    /// What storing did.
    #[serde(flatten)]
    pub stored: StoredCounts,
}

/// One component of a runtime snapshot.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RuntimeComponentReport {
    /// Its path in the snapshot.
    pub path: String,
    /// The host path it was read from.
    pub source: PathBuf,
}

/// The report of `ingest --profile dependency`.
#[derive(Debug, serde::Serialize)]
pub struct DependenciesReport {
    /// `dependencies`.
    pub profile: &'static str,
    /// The snapshot's name.
    pub name: String,
    /// The store's digest of the snapshot: `sandbox_dependency_manifest_digest`.
    pub digest: ManifestDigest,
    /// `sandbox_dependency_content_digest`.
    pub dependency_content_digest: String,
    /// Each dependency.
    pub dependencies: Vec<DependencyReport>,
    /// How many entries all dependencies hold.
    pub entries: usize,
    /// The bytes counted.
    pub total_bytes: u64,
    /// What storing did.
    #[serde(flatten)]
    pub stored: StoredCounts,
}

/// The report of `ingest --profile task`: everything upstream's
/// `TaskAssetSnapshot` holds, and what storing did.
#[derive(Debug, serde::Serialize)]
pub struct TaskReport {
    /// `task`.
    pub profile: &'static str,
    /// The snapshot's name.
    pub name: String,
    /// The store's digest of the task: `task_asset_snapshot_digest`.
    pub digest: ManifestDigest,
    /// The `tree` snapshot's digest: `task_asset_manifest_digest`.
    pub manifest_digest: ManifestDigest,
    /// The repository's resolved path.
    pub repo_identity: String,
    /// The harness root review cases were read from, `""` when none.
    pub harness_identity: String,
    /// The commit.
    pub resolved_sha: String,
    /// The `sandbox_copy` declarations as written.
    pub declarations: Vec<String>,
    /// The `sandbox_copy` entries.
    pub entries: Vec<EntryReport>,
    /// The dependency declarations as written, `[source, target]`.
    pub dependency_declarations: Vec<[String; 2]>,
    /// Each dependency.
    pub dependencies: Vec<DependencyReport>,
    /// `sandbox_dependency_content_digest`.
    pub dependency_content_digest: String,
    /// The `dependencies` snapshot's digest: `sandbox_dependency_manifest_digest`.
    pub dependency_manifest_digest: ManifestDigest,
    /// The bytes counted, all inputs together.
    pub total_bytes: u64,
    /// What storing did (all three snapshots together).
    #[serde(flatten)]
    pub stored: StoredCounts,
}

/// The report of a tree-kind ingest, by form.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum TreeIngestReport {
    /// `--profile tree`.
    Tree(TreeReport),
    /// `--profile dependency`.
    Dependencies(DependenciesReport),
    /// `--profile task`.
    Task(TaskReport),
    /// `--profile runtime`.
    Runtime(RuntimeReport),
}

/// A stand-in id for a file still being hashed: 24 bytes 0xff, then its
/// number. No SHA-256 is expected to start so.
fn ticket(n: u64) -> ObjectId {
    let mut bytes = [0xffu8; 32];
    bytes[24..].copy_from_slice(&n.to_be_bytes());
    ObjectId::from_bytes(bytes)
}

fn ticket_number(id: &ObjectId) -> Option<u64> {
    let bytes = id.as_bytes();
    if bytes[..24].iter().all(|&b| b == 0xff) {
        let mut n = [0u8; 8];
        n.copy_from_slice(&bytes[24..]);
        Some(u64::from_be_bytes(n))
    } else {
        None
    }
}

/// What the hashing threads and the walk share.
struct Shared<'s> {
    /// The store's `objects/` directory, and its path.
    objects: std::os::fd::BorrowedFd<'s>,
    objects_path: PathBuf,
    /// Where each distinct object stands; the first file of a content
    /// claims it.
    pending: Mutex<HashMap<ObjectKey, Pending>>,
    /// The id of each file handed to a hashing thread, by its number.
    ids: Mutex<HashMap<u64, ObjectId>>,
    in_flight: Mutex<u64>,
    freed: Condvar,
    /// The first failure to write into the work directory.
    failed: Mutex<Option<Error>>,
    /// The refusal of the first file, in the walk's order, that the walk
    /// left to a hashing thread and found changed.
    refused: Mutex<Option<(u64, CaptureError)>>,
    bytes_staged: AtomicU64,
    /// Buffers handed back by the hashing threads, for the walk to reuse:
    /// a fresh large allocation would be mapped, faulted in and unmapped
    /// for every file.
    buffers: Mutex<Vec<Vec<u8>>>,
}

impl Shared<'_> {
    /// An empty buffer that holds `size` bytes, reused when one is free.
    fn buffer(&self, size: usize) -> Vec<u8> {
        let reused = self.buffers.lock().ok().and_then(|mut free| {
            // The smallest that fits, so that a large one stays for a large file.
            let (at, _) = free
                .iter()
                .enumerate()
                .filter(|(_, b)| b.capacity() >= size)
                .min_by_key(|(_, b)| b.capacity())?;
            Some(free.swap_remove(at))
        });
        let mut buf = reused.unwrap_or_else(|| Vec::with_capacity(size.max(64 * 1024)));
        buf.clear();
        buf
    }

    /// Keeps a buffer for [`Shared::buffer`]: up to 256, holding at most
    /// [`FREE_BUFFER_BYTES`] together.
    fn give_back(&self, buf: Vec<u8>) {
        if let Ok(mut free) = self.buffers.lock() {
            let held: usize = free.iter().map(Vec::capacity).sum();
            if free.len() < 256 && held + buf.capacity() <= FREE_BUFFER_BYTES {
                free.push(buf);
            }
        }
    }

    /// Records the id of file `number`, handed to a hashing thread.
    fn identify(&self, number: u64, id: ObjectId) {
        if let Ok(mut ids) = self.ids.lock() {
            ids.insert(number, id);
        }
    }

    /// Records the walk's refusal of file `number`, which it left to a
    /// hashing thread: the first in the walk's order stands.
    fn refuse(&self, number: u64, e: CaptureError) {
        if let Ok(mut refused) = self.refused.lock() {
            if refused.as_ref().is_none_or(|(n, _)| number < *n) {
                *refused = Some((number, e));
            }
        }
    }

    fn fail(&self, e: Error) {
        if let Ok(mut failed) = self.failed.lock() {
            failed.get_or_insert(e);
        }
    }

    fn has_failed(&self) -> bool {
        self.failed.lock().map_or(true, |f| f.is_some())
    }

    /// Claims `key` for the caller; false when another file of the same
    /// content did.
    fn claim(&self, key: ObjectKey) -> bool {
        match self.pending.lock() {
            Ok(mut pending) => {
                if pending.contains_key(&key) {
                    return false;
                }
                pending.insert(key, Pending::Reused);
                true
            }
            Err(_) => false,
        }
    }

    fn settle(&self, key: ObjectKey, state: Pending) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(key, state);
        }
    }

    fn release(&self, bytes: u64) {
        if let Ok(mut n) = self.in_flight.lock() {
            *n = n.saturating_sub(bytes);
        }
        self.freed.notify_all();
    }

    fn reserve(&self, bytes: u64) {
        let Ok(mut n) = self.in_flight.lock() else {
            return;
        };
        while *n > 0 && n.saturating_add(bytes) > IN_FLIGHT_BYTES {
            n = match self.freed.wait(n) {
                Ok(n) => n,
                Err(_) => return,
            };
        }
        *n += bytes;
    }

    /// Where a content the walk has read stands against the store: reused,
    /// or written (by `write`) to be published or to replace a damaged
    /// object.
    fn place(
        &self,
        key: &ObjectKey,
        size: u64,
        write: &mut dyn FnMut() -> Result<String>,
    ) -> Result<Pending> {
        let mut written: Option<Result<String>> = None;
        let state = object_pending(self.objects, &self.objects_path, key, size, &mut || {
            written = Some(write())
        })?;
        let name = written.transpose()?;
        if name.is_some() {
            self.bytes_staged.fetch_add(size, Ordering::Relaxed);
        }
        Ok(match (state, name) {
            (Pending::Staged(_), Some(name)) => Pending::Staged(name),
            (Pending::Replacing(_, why), Some(name)) => Pending::Replacing(name, why),
            (state, _) => state,
        })
    }
}

/// Where one distinct content stands against the store, as
/// [`crate::store::ingest`]'s `pending_state` judges it, from the objects
/// directory alone (which threads share): reused, written (calling
/// `stage`) to be published or to replace a damaged object, or a drifted
/// mode to set back.
fn object_pending(
    objects: std::os::fd::BorrowedFd<'_>,
    objects_path: &Path,
    key: &ObjectKey,
    size: u64,
    stage: &mut dyn FnMut(),
) -> Result<Pending> {
    use crate::store::core::objects::{holds_its_bytes, judge, ObjectState};
    let rel = key.rel_path();
    let path = objects_path.join(&rel);
    let state = match rustix::fs::statat(objects, rel.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => judge(&st, key, size),
        Err(rustix::io::Errno::NOENT) => ObjectState::Missing,
        Err(e) => return Err(Error::io("examine an object", path, e)),
    };
    Ok(match state {
        ObjectState::Intact => Pending::Reused,
        ObjectState::Missing => {
            stage();
            Pending::Staged(String::new())
        }
        ObjectState::Damaged(why) if holds_its_bytes(objects, &path, key, size)? => {
            Pending::ModeDrifted(why)
        }
        ObjectState::Damaged(why) => {
            stage();
            Pending::Replacing(String::new(), why)
        }
    })
}

/// A file handed to a hashing thread.
enum Job {
    /// Its bytes, read whole.
    Bytes {
        number: u64,
        executable: bool,
        data: Vec<u8>,
    },
    /// Its source, to hash (and copy, should the store lack it).
    Hashed {
        number: u64,
        executable: bool,
        source: Box<DeferredFile>,
    },
    /// Its source, to copy into `staged` (named `name` in the work
    /// directory) and hash there.
    Copied {
        number: u64,
        executable: bool,
        name: String,
        staged: std::fs::File,
        source: Box<DeferredFile>,
    },
}

/// Hashes each file it is handed, and writes those the store lacks.
fn hash_and_stage(
    shared: &Shared<'_>,
    work: &WorkDir,
    stager: &crate::store::core::objects::Stager,
    job: Job,
) {
    match job {
        Job::Bytes {
            number,
            executable,
            data,
        } => {
            let size = data.len() as u64;
            let key = ObjectKey {
                id: ObjectId::of(&data),
                executable,
            };
            shared.identify(number, key.id);
            if !shared.has_failed() && shared.claim(key) {
                match shared.place(&key, size, &mut || stager.stage(&key, &data)) {
                    Ok(state) => shared.settle(key, state),
                    Err(e) => shared.fail(e),
                }
            }
            shared.give_back(data);
            shared.release(size);
        }
        Job::Hashed {
            number,
            executable,
            source,
        } => {
            if let Err(e) = hash_source(shared, work, number, executable, &source) {
                shared.fail(e);
            }
        }
        Job::Copied {
            number,
            executable,
            name,
            staged,
            source,
        } => {
            // Once the ingest has failed, a copy is only wasted writing.
            let copied = if shared.has_failed() {
                Err(DeferredFault::Write(rustix::io::Errno::CANCELED))
            } else {
                source.copy_into(staged.as_fd())
            };
            let failed = copied.is_err();
            let hashed = match copied {
                Ok(()) => hash_copied(shared, work, number, executable, &name, staged.as_fd()),
                Err(DeferredFault::Capture(e)) => {
                    shared.refuse(number, e);
                    Ok(())
                }
                Err(DeferredFault::Write(e)) => Err(Error::io(
                    "write a staged object",
                    work.path().join(&name),
                    e,
                )),
            };
            if failed || hashed.is_err() {
                let _ = rustix::fs::unlinkat(work.fd(), name.as_str(), AtFlags::empty());
            }
            if let Err(e) = hashed {
                shared.fail(e);
            }
        }
    }
}

/// Hashes a file from its source and, should the store lack its object,
/// copies it into the work directory ([`copy_checked`]).
fn hash_source(
    shared: &Shared<'_>,
    work: &WorkDir,
    number: u64,
    executable: bool,
    source: &DeferredFile,
) -> Result<()> {
    let mut buf = shared.buffer(HASH_CHUNK);
    buf.resize(HASH_CHUNK, 0);
    let mut hasher = ObjectHasher::default();
    let read = source.read_into(&mut buf, &mut |data| hasher.update(data));
    shared.give_back(buf);
    if let Err(e) = read {
        shared.refuse(number, e);
        return Ok(());
    }
    let key = ObjectKey {
        id: hasher.finish(),
        executable,
    };
    shared.identify(number, key.id);
    if !shared.has_failed() && shared.claim(key) {
        let state = shared.place(&key, source.size(), &mut || {
            copy_checked(work, source, &key)
        })?;
        shared.settle(key, state);
    }
    Ok(())
}

/// Copies a file read once already into the work directory, for the
/// object `key` its first read named, and checks that the copy holds
/// those bytes (the source may have changed since).
fn copy_checked(work: &WorkDir, source: &DeferredFile, key: &ObjectKey) -> Result<String> {
    let name = format!("again-{}", key.name());
    let path = work.path().join(&name);
    let fd = rustix::fs::openat(
        work.fd(),
        name.as_str(),
        OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| Error::io("create a staged object", &path, e))?;
    let size = source.size();
    let copied =
        crate::filecopy::copy_prefix(source.fd(), fd.as_fd(), size.saturating_add(1), HASH_CHUNK)
            .map_err(|e| match e {
            crate::filecopy::CopyFailure::Read(e) => {
                Error::io("read a file again", source.relative(), e)
            }
            crate::filecopy::CopyFailure::Write(e) => Error::io("write a staged object", &path, e),
        })?;
    let (held, id) = hash_file(fd.as_fd(), &path, &mut vec![0u8; HASH_CHUNK])?;
    if copied != size || held != size || id != key.id {
        return Err(Error::Integrity(format!(
            "a file of {size} bytes ({}) changed between its two reads; capture it again",
            key.id
        )));
    }
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(key.mode()))
        .map_err(|e| Error::io("set a staged object's mode", &path, e))?;
    Ok(name)
}

/// The length and id of the bytes of a file in the work directory.
fn hash_file(
    fd: std::os::fd::BorrowedFd<'_>,
    path: &Path,
    buf: &mut [u8],
) -> Result<(u64, ObjectId)> {
    let mut hasher = ObjectHasher::default();
    let mut at = 0u64;
    loop {
        match rustix::io::pread(fd, &mut *buf, at) {
            Ok(0) => return Ok((at, hasher.finish())),
            Ok(n) => {
                hasher.update(&buf[..n]);
                at += n as u64;
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(Error::io("read a staged object", path, e)),
        }
    }
}

/// Hashes a file the walk copied into the work directory, and keeps the
/// copy as its object's when the store lacks it (else removes it).
///
/// The object is named by the bytes it holds: those of the copy, which
/// only this ingest writes.
fn hash_copied(
    shared: &Shared<'_>,
    work: &WorkDir,
    number: u64,
    executable: bool,
    name: &str,
    staged: std::os::fd::BorrowedFd<'_>,
) -> Result<()> {
    let path = work.path().join(name);
    let mut buf = shared.buffer(HASH_CHUNK);
    buf.resize(HASH_CHUNK, 0);
    let hashed = hash_file(staged, &path, &mut buf);
    shared.give_back(buf);
    let (size, id) = hashed?;
    let key = ObjectKey { id, executable };
    shared.identify(number, key.id);
    let mut kept = false;
    if !shared.has_failed() && shared.claim(key) {
        let state = shared.place(&key, size, &mut || {
            rustix::fs::fchmod(staged, Mode::from_raw_mode(key.mode()))
                .map_err(|e| Error::io("set a staged object's mode", &path, e))?;
            kept = true;
            Ok(name.to_owned())
        })?;
        shared.settle(key, state);
    }
    if !kept {
        let _ = rustix::fs::unlinkat(work.fd(), name, AtFlags::empty());
    }
    Ok(())
}

/// A large file being written into the work directory as it is read.
struct Large {
    name: String,
    file: Option<std::fs::File>,
    hasher: ObjectHasher,
    executable: bool,
    size: u64,
}

/// A file to be copied into the work directory (`file`, named `name`) and
/// hashed there, off the walk's thread ([`FileSink::defer`]).
struct Copied {
    name: String,
    file: std::fs::File,
    executable: bool,
}

enum Current {
    None,
    Empty,
    /// To be hashed off the walk's thread ([`FileSink::defer`]).
    Hashed {
        executable: bool,
    },
    Copied(Copied),
    Buffered {
        data: Vec<u8>,
        executable: bool,
        reserved: u64,
    },
    Large(Large),
}

/// The walk's [`FileSink`]: buffers small files for the hashing threads,
/// hashes and writes large ones itself.
struct ObjectSink<'a, 's> {
    shared: &'a Shared<'s>,
    /// What the store records, asked (on the walk's thread) whether a file
    /// of a large file's size is stored.
    catalogue: &'a crate::catalogue::Catalogue,
    work: &'a WorkDir,
    jobs: mpsc::SyncSender<Job>,
    current: Current,
    next: u64,
    large: u64,
}

impl ObjectSink<'_, '_> {
    fn unlink(&self, name: &str) {
        let _ = rustix::fs::unlinkat(self.work.fd(), name, AtFlags::empty());
    }

    fn open_large(&mut self) -> Result<(String, std::fs::File)> {
        self.large += 1;
        let name = format!("large{}", self.large);
        let fd = rustix::fs::openat(
            self.work.fd(),
            name.as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| Error::io("create a staged object", self.work.path().join(&name), e))?;
        Ok((name, std::fs::File::from(fd)))
    }

    fn finish_large(&mut self, large: Large) -> ObjectId {
        let id = large.hasher.finish();
        let key = ObjectKey {
            id,
            executable: large.executable,
        };
        let Some(file) = large.file else {
            self.unlink(&large.name);
            return id;
        };
        let mut kept = false;
        if !self.shared.has_failed() && self.shared.claim(key) {
            let path = self.work.path().join(&large.name);
            let name = large.name.clone();
            let placed = self.shared.place(&key, large.size, &mut || {
                rustix::fs::fchmod(&file, Mode::from_raw_mode(key.mode()))
                    .map_err(|e| Error::io("set a staged object's mode", &path, e))?;
                kept = true;
                Ok(name.clone())
            });
            match placed {
                Ok(state) => self.shared.settle(key, state),
                Err(e) => self.shared.fail(e),
            }
        }
        if !kept {
            self.unlink(&large.name);
        }
        id
    }
}

impl FileSink for ObjectSink<'_, '_> {
    fn start(&mut self, size: u64, executable: bool, fd: Option<std::os::fd::BorrowedFd<'_>>) {
        let unstored = |sink: &Self| !sink.catalogue.has_file_of_size(size).unwrap_or(true);
        self.current = if size == 0 {
            Current::Empty
        } else if size >= COPIED_FILE && fd.is_some() && !unstored(self) {
            // Likely stored already: hashed off the walk's thread, and
            // copied only should its object be missing after all.
            Current::Hashed { executable }
        } else if size >= COPIED_FILE && fd.is_some() {
            // No stored file has its size: its object is missing, and the
            // kernel copies it off the walk's thread, to be hashed there.
            match self.open_large() {
                Ok((name, file)) => Current::Copied(Copied {
                    name,
                    file,
                    executable,
                }),
                Err(e) => {
                    self.shared.fail(e);
                    Current::None
                }
            }
        } else if size <= BUFFERED_FILE {
            self.shared.reserve(size);
            Current::Buffered {
                // `size` is bounded by BUFFERED_FILE.
                data: self.shared.buffer(usize::try_from(size).unwrap_or(0)),
                executable,
                reserved: size,
            }
        } else {
            // Bytes with no file to copy from (a git blob): written as they
            // are read.
            let file = match self.open_large() {
                Ok((name, file)) => (name, Some(file)),
                Err(e) => {
                    self.shared.fail(e);
                    (String::new(), None)
                }
            };
            Current::Large(Large {
                name: file.0,
                file: file.1,
                hasher: ObjectHasher::default(),
                executable,
                size,
            })
        };
    }

    fn bytes(&mut self, data: &[u8]) {
        match &mut self.current {
            // A copied file that grew: the walk refuses it.
            Current::None | Current::Hashed { .. } | Current::Copied(_) => {}
            // The file grew while read: the walk refuses it.
            Current::Empty => self.current = Current::None,
            Current::Buffered { data: buf, .. } => buf.extend_from_slice(data),
            Current::Large(large) => {
                large.hasher.update(data);
                if let Some(file) = &mut large.file {
                    if let Err(e) = file.write_all(data) {
                        let path = self.work.path().join(&large.name);
                        large.file = None;
                        self.shared
                            .fail(Error::io("write a staged object", path, e));
                    }
                }
            }
        }
    }

    fn finish(&mut self) -> ObjectId {
        match std::mem::replace(&mut self.current, Current::None) {
            Current::None | Current::Empty => ObjectId::of(b""),
            Current::Buffered {
                data, executable, ..
            } => {
                let number = self.next;
                self.next += 1;
                // The threads outlive the walk: a closed queue is a bug.
                let _ = self.jobs.send(Job::Bytes {
                    number,
                    executable,
                    data,
                });
                ticket(number)
            }
            // `defer` takes these: a file the walk read instead would have
            // no id, and the ingest fails rather than record one.
            finished @ (Current::Hashed { .. } | Current::Copied(_)) => {
                if let Current::Copied(copied) = &finished {
                    self.unlink(&copied.name);
                }
                self.shared.fail(Error::Integrity(
                    "a file left to the hashing threads was read by the walk".into(),
                ));
                ObjectId::of(b"")
            }
            Current::Large(large) => self.finish_large(large),
        }
    }

    fn buffer(&mut self) -> Option<&mut Vec<u8>> {
        match &mut self.current {
            Current::Buffered { data, .. } => Some(data),
            Current::None
            | Current::Empty
            | Current::Hashed { .. }
            | Current::Copied(_)
            | Current::Large(_) => None,
        }
    }

    fn defer(
        &mut self,
        file: Box<DeferredFile>,
    ) -> std::result::Result<ObjectId, Box<DeferredFile>> {
        let job = match std::mem::replace(&mut self.current, Current::None) {
            Current::Hashed { executable } => Job::Hashed {
                number: self.next,
                executable,
                source: file,
            },
            Current::Copied(copied) => Job::Copied {
                number: self.next,
                executable: copied.executable,
                name: copied.name,
                staged: copied.file,
                source: file,
            },
            other => {
                self.current = other;
                return Err(file);
            }
        };
        self.next += 1;
        // The threads outlive the walk: a closed queue is a bug.
        let _ = self.jobs.send(job);
        Ok(ticket(self.next - 1))
    }

    fn abandon(&mut self) {
        match std::mem::replace(&mut self.current, Current::None) {
            Current::Buffered { reserved, .. } => self.shared.release(reserved),
            Current::Large(large) => self.unlink(&large.name),
            Current::Copied(copied) => self.unlink(&copied.name),
            Current::None | Current::Empty | Current::Hashed { .. } => {}
        }
    }
}

/// Python's `real_directory(path, label=...)`: absolute, a directory reached
/// by no symlink.
fn real_directory(path: &Path, label: &str) -> Result<PathBuf> {
    let lexical = crate::source::absolute_like_python(path);
    let refuse = |message: String| {
        rejected(TreeIngestError::NotRealDirectory {
            path: lexical.clone(),
            message,
        })
    };
    let cause = |e: &std::io::Error| {
        use std::os::unix::ffi::OsStrExt;
        OsCause::new(
            rustix::io::Errno::from_raw_os_error(e.raw_os_error().unwrap_or(5)),
            Some(lexical.as_os_str().as_bytes()),
        )
    };
    let shown = lexical.display();
    let meta = std::fs::symlink_metadata(&lexical).map_err(|e| {
        refuse(format!(
            "{label} must be a real directory: {shown}: {}",
            cause(&e)
        ))
    })?;
    if !meta.file_type().is_dir() {
        return Err(refuse(format!("{label} must be a real directory: {shown}")));
    }
    let resolved = std::fs::canonicalize(&lexical).map_err(|e| {
        refuse(format!(
            "{label} must be a real directory: {shown}: {}",
            cause(&e)
        ))
    })?;
    if resolved != lexical {
        return Err(refuse(format!(
            "{label} must not traverse symlinks: {shown}"
        )));
    }
    Ok(lexical)
}

fn open_directory(path: &Path) -> Result<OwnedFd> {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Error::io("open the directory", path, e))
}

/// A JSON file holding an object.
fn json_object(what: &'static str, path: &Path) -> Result<Map<String, Value>> {
    let input = |reason: String| {
        rejected(TreeIngestError::Input {
            what,
            path: path.to_path_buf(),
            reason,
        })
    };
    let bytes = std::fs::read(path).map_err(|e| input(e.to_string()))?;
    match serde_json::from_slice::<Value>(&bytes).map_err(|e| input(e.to_string()))? {
        Value::Object(map) => Ok(map),
        _ => Err(input("not a JSON object".into())),
    }
}

/// The names at a directory's top level, in Python's sorted order.
fn top_level_names(repo: &OwnedFd) -> Result<Vec<String>> {
    let mut names = crate::dirent::list_names(repo.as_fd()).map_err(|e| {
        rejected(CaptureError::DirectoryUnreadable {
            path: ".".into(),
            cause: OsCause::new(e, None),
        })
    })?;
    crate::dirent::sort_like_python(&mut names);
    names
        .into_iter()
        .map(|n| {
            String::from_utf8(n).map_err(|n| {
                rejected(CaptureError::PathNotUtf8(
                    String::from_utf8_lossy(n.as_bytes()).into_owned(),
                ))
            })
        })
        .collect()
}

/// The declarations and roots a capture reads.
#[derive(Default)]
struct Plan {
    copies: Option<CopyDeclarations>,
    /// The GitNexus runtime's components (`--profile runtime`).
    runtime: Option<Vec<crate::gitnexus::RuntimeComponent>>,
    dependencies: Option<Vec<DependencyDeclaration>>,
    /// The repository: a real directory, or (with a revision) the
    /// repository's absolute path.
    repo: PathBuf,
    /// The task's `repo_identity`.
    identity: PathBuf,
    /// How the ingest event names the source.
    source: String,
    harness: Option<PathBuf>,
    binding: Option<Map<String, Value>>,
    resolved_sha: String,
}

/// Reads the declarations as the harness's `prepare` does, before anything
/// is walked.
fn plan(opts: &TreeIngestOptions<'_>, revision: Option<&RevisionTrees>) -> Result<Plan> {
    let max = opts.limits.max_path_bytes;
    let repo_root = || match revision {
        Some(r) => Ok(r.repo_path().to_path_buf()),
        None => real_directory(opts.repo, "task asset repository"),
    };
    let mut plan = plan_forms(opts, revision, max, repo_root)?;
    plan.identity = match (revision, opts.git.and_then(|g| g.repo_identity)) {
        (Some(_), Some(identity)) => crate::source::absolute_like_python(identity),
        _ => plan.repo.clone(),
    };
    plan.source = match revision {
        Some(r) => format!("git:{}@{}", r.repo_path().display(), r.commit()),
        None => plan.repo.display().to_string(),
    };
    Ok(plan)
}

/// [`plan`] for each form; `repo_root` finds the repository.
fn plan_forms(
    opts: &TreeIngestOptions<'_>,
    revision: Option<&RevisionTrees>,
    max: u64,
    repo_root: impl Fn() -> Result<PathBuf>,
) -> Result<Plan> {
    match &opts.form {
        TreeForm::Tree { copies } => {
            let repo = repo_root()?;
            let copies = if !copies.is_empty() {
                copies.clone()
            } else if let Some(revision) = revision {
                revision
                    .top_level_names()
                    .map_err(|e| revision_error(revision, e))?
            } else {
                top_level_names(&open_directory(&repo)?)?
            };
            let mut task = Map::new();
            task.insert("sandbox_copy".into(), copies.into());
            Ok(Plan {
                copies: Some(copy_declarations(&task, max).map_err(rejected)?),
                repo,
                ..Plan::default()
            })
        }
        TreeForm::Dependency { pairs } => {
            let repo = repo_root()?;
            let list: Vec<Value> = pairs
                .iter()
                .map(|(source, target)| serde_json::json!({"source": source, "target": target}))
                .collect();
            let mut task = Map::new();
            task.insert("sandbox_dependencies".into(), list.into());
            Ok(Plan {
                dependencies: Some(dependency_declarations(&task, max).map_err(rejected)?),
                repo,
                ..Plan::default()
            })
        }
        TreeForm::Task {
            task,
            resolved_sha,
            harness_root,
            expect_binding,
        } => {
            let object = json_object("task", task)?;
            let binding = expect_binding
                .as_deref()
                .map(|p| json_object("binding", p))
                .transpose()?;
            let repo = repo_root()?;
            let copies = copy_declarations(&object, max).map_err(rejected)?;
            let dependencies = dependency_declarations(&object, max).map_err(rejected)?;
            let harness = match copies.paths.iter().find(|p| is_harness_copy(p)) {
                None => None,
                Some(path) => {
                    let root = harness_root
                        .as_deref()
                        .ok_or_else(|| rejected(TreeIngestError::NoHarnessRoot(path.clone())))?;
                    Some(real_directory(root, "harness sandbox_copy root")?)
                }
            };
            let resolved_sha = match (resolved_sha, revision) {
                (Some(sha), _) => sha.clone(),
                (None, Some(revision)) => revision.commit(),
                (None, None) => {
                    return Err(Error::Usage(
                        "ingest --profile task: needs --resolved-sha".into(),
                    ))
                }
            };
            Ok(Plan {
                copies: Some(copies),
                dependencies: Some(dependencies),
                repo,
                harness,
                binding,
                resolved_sha,
                ..Plan::default()
            })
        }
        TreeForm::Runtime { rules } => {
            let repo = repo_root()?;
            let components = crate::gitnexus::runtime_components(&repo, rules)?;
            Ok(Plan {
                runtime: Some(components),
                repo,
                ..Plan::default()
            })
        }
    }
}

/// Refuses a capture that would walk the store itself: the store lies at
/// or below a declared path of the repository (or of the harness root).
fn refuse_store_inside(store: &Store, plan: &Plan, from_git: bool) -> Result<()> {
    let Ok(real) = std::fs::canonicalize(store.root()) else {
        return Ok(());
    };
    let mut walked: Vec<PathBuf> = Vec::new();
    if let Some(copies) = &plan.copies {
        for path in &copies.paths {
            match (&plan.harness, is_harness_copy(path)) {
                (Some(harness), true) => walked.push(harness.join(path)),
                // A revision's trees are read from its objects.
                _ if from_git => {}
                _ => walked.push(plan.repo.join(path)),
            }
        }
    }
    for d in plan.dependencies.iter().flatten().filter(|_| !from_git) {
        walked.push(plan.repo.join(&d.source_path));
    }
    for c in plan.runtime.iter().flatten() {
        walked.push(c.base.join(&c.relative));
    }
    match walked.into_iter().find(|w| real.starts_with(w)) {
        Some(source_dir) => Err(Error::StoreInsideSource {
            path: real,
            source_dir,
        }),
        None => Ok(()),
    }
}

/// What a capture gave.
struct Captured {
    copy: Vec<TreeEntry>,
    dependencies: Vec<(Dependency, u64)>,
    total_bytes: u64,
}

/// Walks what `plan` declares, in the harness's order, handing files to
/// `sink` when given.
fn capture(
    plan: &Plan,
    revision: Option<&RevisionTrees>,
    limits: Limits,
    mut sink: Option<&mut dyn FileSink>,
) -> Result<Captured> {
    let repo_fd = match revision {
        Some(_) => None,
        None => Some(open_directory(&plan.repo)?),
    };
    let harness_fd = plan.harness.as_deref().map(open_directory).transpose()?;
    let mut budget = Budget::default();
    let mut copy = Vec::new();
    let mut total_bytes = 0;
    if let Some(copies) = &plan.copies {
        let mut builder = Builder::new(Flavour::SandboxCopy, limits, &mut budget);
        if let Some(sink) = sink.as_mut() {
            builder = builder.with_sink(&mut **sink);
        }
        for path in &copies.paths {
            match (&harness_fd, is_harness_copy(path), revision, &repo_fd) {
                (Some(harness), true, _, _) | (_, _, None, Some(harness)) => {
                    builder.capture(harness.as_fd(), path).map_err(rejected)?
                }
                (_, _, Some(revision), _) => revision
                    .capture(&mut builder, path)
                    .map_err(|e| revision_error(revision, e))?,
                (_, _, None, None) => unreachable_root()?,
            }
        }
        copy = builder.finished_entries();
        total_bytes += builder.total_bytes();
    }
    if let Some(components) = &plan.runtime {
        let mut builder = Builder::new(Flavour::Dependency, limits, &mut budget).runtime();
        if let Some(sink) = sink.as_mut() {
            builder = builder.with_sink(&mut **sink);
        }
        for c in components {
            let base = open_directory(&c.base)?;
            builder
                .capture(base.as_fd(), &c.relative)
                .map_err(rejected)?;
        }
        copy = builder.finished_entries();
        total_bytes += builder.total_bytes();
        validate_runtime_symlinks(&copy).map_err(rejected)?;
    }
    let mut dependencies = Vec::new();
    for declaration in plan.dependencies.iter().flatten() {
        let sink = sink.as_mut().map(|s| &mut **s as &mut dyn FileSink);
        let captured = match (revision, &repo_fd) {
            (Some(revision), _) => revision
                .capture_dependency(
                    &declaration.source_path,
                    &declaration.target_path,
                    limits,
                    &mut budget,
                    sink,
                )
                .map_err(|e| revision_error(revision, e))?,
            (None, Some(repo_fd)) => capture_dependency_into(
                repo_fd.as_fd(),
                &declaration.source_path,
                &declaration.target_path,
                limits,
                &mut budget,
                sink,
            )
            .map_err(rejected)?,
            (None, None) => unreachable_root()?,
        };
        total_bytes += captured.total_bytes;
        dependencies.push((
            Dependency {
                source: declaration.source.clone(),
                target: declaration.target.clone(),
                entries: captured.entries,
            },
            captured.total_bytes,
        ));
    }
    Ok(Captured {
        copy,
        dependencies,
        total_bytes,
    })
}

/// A revision's refusal as this command reports it: the harness's words for
/// what a checkout holds, the revision named for its own refusals.
fn revision_error(revision: &RevisionTrees, e: TreeGitError) -> Error {
    match e {
        TreeGitError::Capture(e) => rejected(e),
        TreeGitError::Revision(e) if e.rule().is_some() => revision.in_revision(e),
        TreeGitError::Revision(e) => e,
    }
}

/// A capture with neither a directory nor a revision to read (not reached:
/// one of them is always open).
fn unreachable_root<T>() -> Result<T> {
    Err(Error::Integrity(
        "a capture has no repository to read".into(),
    ))
}

/// Replaces every stand-in id by the id its file hashed to.
fn resolve_tickets(entries: &mut [TreeEntry], ids: &HashMap<u64, ObjectId>) -> Result<()> {
    for e in entries {
        if let crate::profile::tree::Node::File { sha256, .. } = &mut e.node {
            if let Some(n) = ticket_number(sha256) {
                *sha256 = *ids
                    .get(&n)
                    .ok_or_else(|| Error::Integrity(format!("'{}' was not hashed", e.path)))?;
            }
        }
    }
    Ok(())
}

/// What the walk stored in the work directory.
struct Written {
    captured: Captured,
    pending: HashMap<ObjectKey, Pending>,
    bytes_staged: u64,
}

/// How many hashing threads an ingest runs: one per core, the walk's
/// thread reading beside them.
fn hashing_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 8))
}

/// Captures `plan` with the hashing threads, writing what the store lacks
/// into `work`.
fn capture_and_stage(
    store: &Store,
    work: &WorkDir,
    plan: &Plan,
    revision: Option<&RevisionTrees>,
    limits: Limits,
) -> Result<Written> {
    let shared = Shared {
        objects: store.objects(),
        objects_path: store.root().join(crate::store::OBJECTS_DIR),
        pending: Mutex::new(HashMap::new()),
        ids: Mutex::new(HashMap::new()),
        in_flight: Mutex::new(0),
        freed: Condvar::new(),
        failed: Mutex::new(None),
        refused: Mutex::new(None),
        bytes_staged: AtomicU64::new(0),
        buffers: Mutex::new(Vec::new()),
    };
    let stagers = (0..hashing_threads())
        .map(|i| work.stager(i))
        .collect::<Result<Vec<_>>>()?;
    let (tx, rx) = mpsc::sync_channel::<Job>(64);
    let rx = Mutex::new(rx);
    let captured = std::thread::scope(|s| {
        for stager in &stagers {
            let (shared, rx) = (&shared, &rx);
            s.spawn(move || loop {
                let job = match rx.lock() {
                    Ok(rx) => rx.recv(),
                    Err(_) => return,
                };
                match job {
                    Ok(job) => hash_and_stage(shared, work, stager, job),
                    Err(_) => return,
                }
            });
        }
        let mut sink = ObjectSink {
            shared: &shared,
            catalogue: store.catalogue(),
            work,
            jobs: tx,
            current: Current::None,
            next: 0,
            large: 0,
        };
        let captured = capture(plan, revision, limits, Some(&mut sink));
        // Closing the queue ends the threads once it is drained.
        drop(sink);
        captured
    });
    // Every file left to the threads comes before any the walk refused.
    if let Some((_, e)) = shared.refused.into_inner().ok().flatten() {
        return Err(rejected(e));
    }
    let captured = captured?;
    if let Some(e) = shared.failed.into_inner().ok().flatten() {
        return Err(e);
    }
    let ids = shared.ids.into_inner().unwrap_or_default();
    let mut captured = captured;
    resolve_tickets(&mut captured.copy, &ids)?;
    for (d, _) in &mut captured.dependencies {
        resolve_tickets(&mut d.entries, &ids)?;
    }
    Ok(Written {
        captured,
        pending: shared.pending.into_inner().unwrap_or_default(),
        bytes_staged: shared.bytes_staged.into_inner(),
    })
}

fn dependency_reports(deps: &[(Dependency, u64)]) -> Vec<DependencyReport> {
    deps.iter()
        .enumerate()
        .map(|(i, (d, total))| DependencyReport {
            source: d.source.clone(),
            target: d.target.clone(),
            snapshot_path: format!("dependencies/{}/{DEPENDENCY_ROOT}", index_dir(i)),
            kind: d
                .entries
                .iter()
                .find(|e| e.path == DEPENDENCY_ROOT)
                .map_or("directory", TreeEntry::kind),
            entries: d.entries.iter().map(EntryReport::from).collect(),
            total_bytes: *total,
        })
        .collect()
}

/// Ingests a tree kind: captures, stores what the store lacks, records.
pub fn ingest_tree(open: Opener<'_>, opts: &TreeIngestOptions<'_>) -> Result<TreeIngestReport> {
    let revision = opts
        .git
        .map(|g| RevisionTrees::open(opts.repo, g.rev))
        .transpose()?;
    let plan = plan(opts, revision.as_ref())?;
    let mut store = open(Need::Creating)?;
    ingest_planned(&mut store, opts, &plan, revision.as_ref()).map(|(report, _)| report)
}

/// Ingests the GitNexus runtime of `checkout`, checked by `rules`, into an
/// open store as [`ingest_tree`] does with [`TreeForm::Runtime`], and
/// returns the record too, so that a command failing later can take it back
/// ([`super::undo_ingest`]).
pub fn ingest_runtime(
    store: &mut Store,
    checkout: &Path,
    rules: &crate::gitnexus::Rules,
    sign_with: Option<&crate::sign::PrivateKey>,
) -> Result<(RuntimeReport, IngestReport)> {
    let opts = TreeIngestOptions {
        repo: checkout,
        form: TreeForm::Runtime {
            rules: rules.clone(),
        },
        name: None,
        limits: Limits::default(),
        sign_with,
        git: None,
    };
    let plan = plan(&opts, None)?;
    match ingest_planned(store, &opts, &plan, None)? {
        (TreeIngestReport::Runtime(report), Some(record)) => Ok((report, record)),
        _ => Err(Error::Integrity(
            "a runtime's ingest gave another kind of report".into(),
        )),
    }
}

/// Captures and records what `plan` names in an open store; the record of
/// a single-snapshot form comes back beside the report.
fn ingest_planned(
    store: &mut Store,
    opts: &TreeIngestOptions<'_>,
    plan: &Plan,
    revision: Option<&RevisionTrees>,
) -> Result<(TreeIngestReport, Option<IngestReport>)> {
    refuse_store_inside(store, plan, revision.is_some())?;
    let work = store.work_dir("ingest")?;
    let Written {
        captured,
        pending,
        bytes_staged,
    } = capture_and_stage(store, &work, plan, revision, opts.limits)?;
    let deps: Vec<Dependency> = captured
        .dependencies
        .iter()
        .map(|(d, _)| d.clone())
        .collect();
    let digests = dependency_digests(&deps);
    if let Some(binding) = &plan.binding {
        check_dependency_binding(binding, &digests).map_err(rejected)?;
    }
    let super::Settled {
        staged: mut objects,
        drifted,
        reused,
    } = super::settle(pending);
    objects.sort_by_key(|(_, key)| *key);
    let source = plan.source.clone();
    let first = Objects {
        objects,
        drifted,
        reused,
        bytes: bytes_staged,
    };
    let stored = |store: &Store, r: &IngestReport, last: &IngestReport| StoredCounts {
        already_present: last.ingest.already_present,
        new_objects: r.ingest.new_objects,
        reused_objects: r.ingest.reused_objects,
        bytes_written: r.ingest.bytes_written,
        source: source.clone(),
        store: store.root().display().to_string(),
    };
    match &opts.form {
        TreeForm::Tree { .. } => {
            let manifest = Manifest::tree(captured.copy.clone());
            let r = record(store, work, &manifest, opts, opts.name, &source, first)?;
            let report = TreeIngestReport::Tree(TreeReport {
                profile: "tree",
                name: r.provenance.name.clone(),
                manifest_digest: manifest.digest,
                declarations: plan
                    .copies
                    .as_ref()
                    .map(|c| c.declarations.clone())
                    .unwrap_or_default(),
                entries: captured.copy.len(),
                total_bytes: captured.total_bytes,
                stored: stored(store, &r, &r),
            });
            Ok((report, Some(r)))
        }
        TreeForm::Runtime { rules } => {
            let manifest = Manifest::tree(captured.copy.clone());
            let name = Some(opts.name.unwrap_or("gitnexus-runtime"));
            let r = record(store, work, &manifest, opts, name, &source, first)?;
            let report = TreeIngestReport::Runtime(RuntimeReport {
                profile: "tree",
                name: r.provenance.name.clone(),
                manifest_digest: manifest.digest,
                rules: match rules {
                    crate::gitnexus::Rules::Seed { .. } => "seed",
                    crate::gitnexus::Rules::Upstream => "upstream",
                },
                components: plan
                    .runtime
                    .iter()
                    .flatten()
                    .map(|c| RuntimeComponentReport {
                        path: c.relative.clone(),
                        source: c.base.join(&c.relative),
                    })
                    .collect(),
                entries: captured.copy.len(),
                total_bytes: captured.total_bytes,
                stored: stored(store, &r, &r),
            });
            Ok((report, Some(r)))
        }
        TreeForm::Dependency { .. } => {
            let manifest = Manifest::dependencies(deps);
            let r = record(store, work, &manifest, opts, opts.name, &source, first)?;
            let report = TreeIngestReport::Dependencies(DependenciesReport {
                profile: "dependencies",
                name: r.provenance.name.clone(),
                digest: manifest.digest,
                dependency_content_digest: digests.content.to_hex(),
                dependencies: dependency_reports(&captured.dependencies),
                entries: manifest.tree.as_ref().map_or(0, Stored::entry_count),
                total_bytes: captured.total_bytes,
                stored: stored(store, &r, &r),
            });
            Ok((report, Some(r)))
        }
        TreeForm::Task { .. } => {
            let copies = plan.copies.clone().unwrap_or(CopyDeclarations {
                declarations: Vec::new(),
                paths: Vec::new(),
            });
            let tree = Manifest::tree(captured.copy.clone());
            let list = Manifest::dependencies(deps);
            let record_task = TaskRecord {
                declarations: copies.declarations.clone(),
                repo_identity: plan.identity.clone(),
                resolved_sha: plan.resolved_sha.clone(),
                harness_identity: plan.harness.clone(),
                manifest_digest: manifest_digest(&captured.copy),
                dependencies: digests,
            };
            let task = Manifest::task(record_task);
            let r_tree = record(store, work, &tree, opts, None, &source, first)?;
            let rest = (|| {
                let work = store.work_dir("ingest")?;
                let r_list = record(store, work, &list, opts, None, &source, Objects::default())?;
                let work = store.work_dir("ingest")?;
                match record(
                    store,
                    work,
                    &task,
                    opts,
                    opts.name,
                    &source,
                    Objects::default(),
                ) {
                    Ok(r_task) => Ok((r_list, r_task)),
                    Err(e) => {
                        let _ = undo_ingest(store, &r_list);
                        Err(e)
                    }
                }
            })();
            let (r_list, r_task) = match rest {
                Ok(r) => r,
                Err(e) => {
                    let _ = undo_ingest(store, &r_tree);
                    return Err(e);
                }
            };
            let _ = r_list;
            let report = TreeIngestReport::Task(TaskReport {
                profile: "task",
                name: r_task.provenance.name.clone(),
                digest: task.digest,
                manifest_digest: tree.digest,
                repo_identity: plan.identity.to_string_lossy().into_owned(),
                harness_identity: plan
                    .harness
                    .as_ref()
                    .map(|h| h.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                resolved_sha: plan.resolved_sha.clone(),
                declarations: copies.declarations,
                entries: captured.copy.iter().map(EntryReport::from).collect(),
                dependency_declarations: captured
                    .dependencies
                    .iter()
                    .map(|(d, _)| [d.source.clone(), d.target.clone()])
                    .collect(),
                dependencies: dependency_reports(&captured.dependencies),
                dependency_content_digest: digests.content.to_hex(),
                dependency_manifest_digest: list.digest,
                total_bytes: captured.total_bytes,
                stored: stored(store, &r_tree, &r_task),
            });
            Ok((report, None))
        }
    }
}

/// The objects one record publishes.
#[derive(Default)]
struct Objects {
    objects: Vec<(String, ObjectKey)>,
    drifted: Vec<Drifted>,
    reused: u64,
    bytes: u64,
}

/// Publishes `objects` and records `manifest` as one ingest, signed with
/// `opts.sign_with`'s key when one is given: the attestation names the
/// manifest's digest, which is the harness's digest of its kind.
fn record(
    store: &mut Store,
    work: WorkDir,
    manifest: &Manifest,
    opts: &TreeIngestOptions<'_>,
    name: Option<&str>,
    source: &str,
    objects: Objects,
) -> Result<IngestReport> {
    if crate::profile::ce::manifest::over_bound(&manifest.bytes) {
        return Err(rejected(TreeIngestError::ManifestTooLarge {
            kind: manifest.profile(),
            size: manifest.bytes.len() as u64,
            max: crate::profile::ce::manifest::MAX_TREE_MANIFEST_BYTES,
        }));
    }
    let attestations = crate::store::trust::signed::sign_ingest(
        store.catalogue(),
        opts.sign_with,
        name.unwrap_or(manifest.profile()),
        manifest.digest,
    )?;
    publish_and_record(
        store,
        work,
        Staged {
            manifest,
            name,
            version: "",
            event: "ingest",
            source,
            origin: None,
            sources: Vec::new(),
            attestations,
            tree_digest: None,
            objects: objects.objects,
            drifted: objects.drifted,
            left_out: Vec::new(),
            secrets: Vec::new(),
            reused: objects.reused,
            bytes: objects.bytes,
        },
    )
}
