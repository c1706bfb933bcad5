//! The store: a directory of content-addressed objects, a catalogue, and views.
//!
//! # On-disk layout
//!
//! ```text
//! STORE/
//! ├── .lock                  flock: shared for writers, exclusive for gc
//! ├── catalogue.sqlite       the catalogue (plus -wal and -shm)
//! ├── objects/
//! │   ├── 00/ … ff/          256 shards, by the first byte of the SHA-256
//! │   │   ├── <62 hex>       a non-executable file's bytes, mode 0444
//! │   │   └── <62 hex>.x     an executable file's bytes, mode 0555
//! ├── tmp/
//! │   └── <op>-<pid>-<n>/    one work directory per operation in flight,
//! │                          held with an exclusive flock while it lives
//! └── views/
//!     └── <64 hex>/          the shared frozen view of a snapshot (`cestore path`)
//! ```
//!
//! The exec bit is part of an object's identity: a hard link shares its inode's
//! mode, so the same bytes executable and not are two objects.
//!
//! # Durability
//!
//! Objects are written to a work directory under `tmp/`, renamed into
//! `objects/` with `RENAME_NOREPLACE` (an existing object counts as stored and
//! is never overwritten), made durable by one `syncfs`, and only then recorded
//! in the catalogue. A killed operation leaves at most its work directory and
//! objects no snapshot names; `gc` removes both.
//!
//! # Concurrency
//!
//! Every command that writes objects or views holds a shared `flock` on
//! `.lock`; `gc` holds an exclusive one, so nothing is published between its
//! mark and its sweep. Work directories carry their own exclusive `flock`, so a
//! reader can tell a live one from one left by a killed process.
//!
//! # Limits
//!
//! The store must sit on a filesystem with hard links. `0444` does not stop
//! root, or the owner with `chmod`, from changing an object through a view;
//! `checkout` checks each object's size and mode cheaply, and `verify`
//! re-hashes everything.

pub mod objects;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use crate::catalogue::Catalogue;
use crate::error::{Error, IoContext, Result};

pub use objects::{ObjectKey, WorkDir};

/// The catalogue's file name inside the store.
pub const CATALOGUE_FILE: &str = "catalogue.sqlite";
/// The objects directory's name inside the store.
pub const OBJECTS_DIR: &str = "objects";
/// The work directories' parent inside the store.
pub const TMP_DIR: &str = "tmp";
/// The shared views' parent inside the store.
pub const VIEWS_DIR: &str = "views";
const LOCK_FILE: &str = ".lock";

/// How a command holds the store's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Ingest, checkout, path, discard, rm, verify, gc --dry-run.
    Shared,
    /// gc.
    Exclusive,
}

/// Where the store is, from `--store`, `$CESTORE_DIR`, `$XDG_DATA_HOME/cestore`
/// or `~/.local/share/cestore`, in that order.
pub fn locate(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let env = |k| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(p) = env("CESTORE_DIR") {
        return Ok(PathBuf::from(p));
    }
    if let Some(p) = env("XDG_DATA_HOME") {
        return Ok(PathBuf::from(p).join("cestore"));
    }
    if let Some(home) = env("HOME") {
        return Ok(PathBuf::from(home).join(".local/share/cestore"));
    }
    Err(Error::Usage(
        "no store given: pass --store, or set CESTORE_DIR, XDG_DATA_HOME or HOME".into(),
    ))
}

/// An open store, holding its lock for as long as it lives.
pub struct Store {
    root: PathBuf,
    dir: OwnedFd,
    objects: OwnedFd,
    _lock: OwnedFd,
    catalogue: Catalogue,
}

impl Store {
    /// Opens the store at `root`, creating it when `create` is set, and takes its lock.
    pub fn open(root: &Path, mode: LockMode, create: bool) -> Result<Store> {
        // Normalised, so that a trailing slash cannot make `lstat` follow a
        // symlinked store.
        let root: PathBuf = std::path::absolute(root)
            .ctx("resolve the store path", root)?
            .components()
            .collect();
        match rustix::fs::lstat(&root) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {}
                FileType::Symlink => {
                    return Err(Error::BadStore {
                        path: root,
                        reason: "is a symlink; name the real directory".into(),
                    })
                }
                _ => {
                    return Err(Error::BadStore {
                        path: root,
                        reason: "is not a directory".into(),
                    })
                }
            },
            Err(Errno::NOENT) if create => {
                std::fs::create_dir_all(&root).ctx("create the store directory", &root)?;
            }
            Err(Errno::NOENT) => {
                return Err(Error::NotFound {
                    what: "store",
                    path: root,
                })
            }
            Err(e) => return Err(Error::io("examine the store directory", &root, e)),
        }
        let dir = crate::source::open_dir(rustix::fs::CWD, &root)
            .ctx("open the store directory", &root)?;
        let lock = rustix::fs::openat(
            &dir,
            LOCK_FILE,
            OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o644),
        )
        .or_else(|e| {
            // A read-only store can still be read under a read-only lock file.
            if e == Errno::ROFS || e == Errno::ACCESS {
                rustix::fs::openat(
                    &dir,
                    LOCK_FILE,
                    OFlags::RDONLY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
            } else {
                Err(e)
            }
        })
        .ctx("open the store lock", root.join(LOCK_FILE))?;
        let op = match mode {
            LockMode::Shared => FlockOperation::LockShared,
            LockMode::Exclusive => FlockOperation::LockExclusive,
        };
        rustix::fs::flock(&lock, op).ctx("lock the store", root.join(LOCK_FILE))?;
        if create {
            for sub in [OBJECTS_DIR, TMP_DIR, VIEWS_DIR] {
                match rustix::fs::mkdirat(&dir, sub, Mode::from_raw_mode(0o755)) {
                    Ok(()) if sub == OBJECTS_DIR => objects::create_shards(dir.as_fd(), &root)?,
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(Error::io("create the store layout", root.join(sub), e)),
                }
            }
        }
        let objects = crate::source::open_dir(dir.as_fd(), OBJECTS_DIR)
            .ctx("open the objects directory", root.join(OBJECTS_DIR))?;
        let catalogue = Catalogue::open(&root.join(CATALOGUE_FILE))?;
        Ok(Store {
            root,
            dir,
            objects,
            _lock: lock,
            catalogue,
        })
    }

    /// The store's absolute path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The store directory's handle.
    pub fn dir(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// The objects directory's handle.
    pub fn objects(&self) -> BorrowedFd<'_> {
        self.objects.as_fd()
    }

    /// The catalogue.
    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    /// The catalogue, for writing.
    pub fn catalogue_mut(&mut self) -> &mut Catalogue {
        &mut self.catalogue
    }

    /// The absolute path of an object.
    pub fn object_path(&self, key: &ObjectKey) -> PathBuf {
        self.root.join(OBJECTS_DIR).join(key.rel_path())
    }

    /// Creates a work directory under `tmp/` for one operation.
    pub fn work_dir(&self, op: &str) -> Result<WorkDir> {
        WorkDir::create(self, op)
    }

    /// Makes everything written to the store's filesystem durable.
    pub fn sync(&self) -> Result<()> {
        rustix::fs::syncfs(&self.dir).ctx("sync the store's filesystem", &self.root)
    }
}
