//! The store: a directory of content-addressed objects, a catalogue, and views.
//!
//! # Rooms
//!
//! This module is the [`Store`] handle: open (trust, lock, catalogue check,
//! layout, shards), open_for_recovery, sync, paths; [`locate`]; [`Need`]
//! and [`Opener`]. Every operation on the store lives in one of five
//! rooms, each of which may use only the rooms drawn below it, the core and
//! the handle (docs/design.md's module map, held by the architecture test):
//!
//! ```text
//! upkeep/   mod.rs the plan (one scan), gc.rs, verify.rs, recover.rs
//!   │
//! views/    mod.rs checkout, shared views, discard; build.rs the hard-linked
//!   │       tree; spares.rs; sandbox.rs stage and mounts; tree.rs
//! ingest/   mod.rs the walk, staging, publish and record; adopt.rs
//!   │
//! trust/    signed.rs, attest.rs, provenance.rs
//!   │
//! core/     objects.rs, manifests.rs, beside.rs, query.rs, who.rs
//!   ▼
//! mod.rs    the Store handle (this module)
//! ```
//!
//! Commands reach the rooms through their modules (`store::views::checkout`,
//! `store::upkeep::gc::gc`, ...), with a `&Store` or `&mut Store` opened
//! once by the command.
//!
//! # On-disk layout
//!
//! ```text
//! STORE/
//! ├── .lock                  flock: shared for writers, exclusive for gc and recover
//! ├── catalogue.sqlite       the catalogue (plus -wal and -shm), an index
//! ├── manifests/
//! │   └── ab/<64 hex>        every snapshot's manifest, by digest: its canonical
//! │                          bytes, packed, or their delta against another's
//! │                          (`crate::catalogue::kept`)
//! ├── sources/
//! │   └── ab/<64 hex>/       a snapshot's source records (`beside`)
//! ├── attestations/
//! │   └── ab/<64 hex>/       a snapshot's attestations (`beside`)
//! ├── objects/
//! │   ├── 00/ … ff/          256 shards, by the first byte of the SHA-256
//! │   │   ├── <62 hex>       a non-executable file's bytes, mode 0444
//! │   │   └── <62 hex>.x     an executable file's bytes, mode 0555
//! ├── tmp/
//! │   └── <op>-<pid>-<ns>-<n>/  one work directory per operation in flight,
//! │                          held with an exclusive flock while it lives
//! ├── spare/
//! │   └── <64 hex>/<unique>/ views discard kept for the next checkout (`spares`)
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
//! is never overwritten), the snapshot's manifest is written to `manifests/`,
//! both are made durable by one `syncfs`, and only then is the snapshot
//! recorded in the catalogue. A killed operation leaves at most its work
//! directory, objects no snapshot names, and a manifest `cestore recover`
//! records; `gc` removes the first two.
//!
//! The catalogue is an index of the manifests on disk. A store whose
//! catalogue is missing, empty or unreadable while `objects/` or `manifests/`
//! hold data is refused untouched (exit 7) until `cestore recover` rebuilds
//! the catalogue from the manifests; gc marks live every object a manifest on
//! disk names, whatever the catalogue says. After a command adds or removes a
//! snapshot, the write-ahead log is folded into `catalogue.sqlite`, so that a
//! copy of that file alone holds every snapshot.
//!
//! # Trust
//!
//! The store's root is made `0755`. As git does for repositories, a store
//! whose root or `objects/` is owned by another user, or writable by group or
//! others, is refused unless `--trust-store` or `CESTORE_TRUST_STORE=1` says
//! otherwise: whoever can write there decides what every view shows.
//!
//! # Concurrency
//!
//! Every command that writes objects or views holds a shared `flock` on
//! `.lock`; `gc` and `recover` hold an exclusive one, so nothing is
//! published between gc's mark and its sweep, nor while recover rebuilds. Work directories carry their own exclusive `flock`, so a
//! reader can tell a live one from one left by a killed process.
//!
//! # Limits
//!
//! The store must sit on a filesystem with hard links. `0444` does not stop
//! root, or the owner with `chmod`, from changing an object through a view;
//! `checkout` checks each object's size and mode cheaply, and `verify`
//! re-hashes everything.

pub mod core;
pub mod ingest;
#[cfg(test)]
pub(crate) mod testutil;
pub mod trust;
pub mod upkeep;
pub mod views;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::fs::{FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use crate::catalogue::Catalogue;
use crate::digest::ManifestDigest;
use crate::error::{Error, IoContext, Misuse, Result};

pub use crate::digest::ObjectKey;
pub use crate::fsutil::read_names;

/// The catalogue's file name inside the store.
pub const CATALOGUE_FILE: &str = "catalogue.sqlite";
/// The manifests directory's name inside the store.
pub const MANIFESTS_DIR: &str = "manifests";
/// The objects directory's name inside the store.
pub const OBJECTS_DIR: &str = "objects";
/// The work directories' parent inside the store.
pub const TMP_DIR: &str = "tmp";
/// The shared views' parent inside the store.
pub const VIEWS_DIR: &str = "views";
const LOCK_FILE: &str = ".lock";

/// Whether this process trusts stores that other users own or can write.
static TRUST_ANY_STORE: AtomicBool = AtomicBool::new(false);

/// Trusts, for the rest of this process, stores owned by another user or
/// writable by group or others (`--trust-store`).
pub fn trust_any_store() {
    TRUST_ANY_STORE.store(true, Ordering::Relaxed);
}

fn trusts_any_store() -> bool {
    TRUST_ANY_STORE.load(Ordering::Relaxed)
        || std::env::var_os("CESTORE_TRUST_STORE").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Refuses a store directory that another user owns or others can write.
fn check_trust(st: &rustix::fs::Stat, path: &Path) -> Result<()> {
    if trusts_any_store() {
        return Ok(());
    }
    let me = rustix::process::geteuid().as_raw();
    let why = if st.st_uid != me {
        format!("is owned by uid {}, not by this user (uid {me})", st.st_uid)
    } else if st.st_mode & 0o022 != 0 {
        format!(
            "is writable by {} (mode {:04o})",
            if st.st_mode & 0o020 != 0 {
                "its group"
            } else {
                "others"
            },
            st.st_mode & 0o7777
        )
    } else {
        return Ok(());
    };
    Err(Misuse::UntrustedStore {
        path: path.to_path_buf(),
        why,
    }
    .into())
}

/// Takes the store's lock, saying on stderr after a second of waiting who
/// holds it.
fn take_lock(lock: &OwnedFd, mode: LockMode, path: &Path) -> Result<()> {
    let (blocking, polling) = match mode {
        LockMode::Shared => (
            FlockOperation::LockShared,
            FlockOperation::NonBlockingLockShared,
        ),
        LockMode::Exclusive => (
            FlockOperation::LockExclusive,
            FlockOperation::NonBlockingLockExclusive,
        ),
    };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        match rustix::fs::flock(lock, polling) {
            Ok(()) => return Ok(()),
            Err(Errno::WOULDBLOCK) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(Error::io("lock the store", path, e)),
        }
    }
    let holders = lock_holders(lock);
    eprintln!(
        "cestore: waiting for the store lock held by {}",
        if holders.is_empty() {
            "another process".to_string()
        } else {
            let pids: Vec<String> = holders.iter().map(u32::to_string).collect();
            format!(
                "{} {}",
                if pids.len() == 1 { "pid" } else { "pids" },
                pids.join(", ")
            )
        }
    );
    rustix::fs::flock(lock, blocking).ctx("lock the store", path)
}

/// The processes holding a lock on the lock file's inode, from `/proc/locks`.
fn lock_holders(lock: &OwnedFd) -> Vec<u32> {
    let (Ok(st), Ok(locks)) = (
        rustix::fs::fstat(lock),
        std::fs::read_to_string("/proc/locks"),
    ) else {
        return Vec::new();
    };
    let dev = rustix::fs::major(st.st_dev);
    let minor = rustix::fs::minor(st.st_dev);
    let want = format!(":{:02x}:{}", minor, st.st_ino);
    let mut pids: Vec<u32> = locks
        .lines()
        .filter(|l| !l.contains("->"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
            let (pid, id) = (f.get(4)?, f.get(5)?);
            let (maj, rest) = id.split_once(':')?;
            (u32::from_str_radix(maj, 16).ok()? == dev && format!(":{rest}") == want)
                .then(|| pid.parse().ok())
                .flatten()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids.retain(|p| *p != std::process::id());
    pids
}

/// How a command holds the store's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Ingest, checkout, path, discard, rm, verify, gc --dry-run.
    Shared,
    /// gc and recover.
    Exclusive,
}

/// What a command's work needs of the store: how it is opened is decided
/// from this in one place (`cmd::open`), the only map from work to a
/// [`LockMode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// To read the store or add to it: it must exist (shared lock).
    Existing,
    /// To add a snapshot, making the store when it is not there (shared lock).
    Creating,
    /// gc's sweep: nothing may be published between its mark and its sweep
    /// (exclusive lock); with `dry_run` it only reads (shared lock).
    Sweep {
        /// Whether gc only says what it would remove.
        dry_run: bool,
    },
}

/// Opens the store when a library function finds its work needs it: given
/// by the command, which alone says how a [`Need`] is met.
pub type Opener<'a> = &'a dyn Fn(Need) -> Result<Store>;

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
    Err(Misuse::NoStoreGiven.into())
}

/// Resolves, checks (creating when asked) and locks the store directory.
fn open_locked(root: &Path, mode: LockMode, create: bool) -> Result<(PathBuf, OwnedFd, OwnedFd)> {
    // Normalised, so that a trailing slash cannot make `lstat` follow a
    // symlinked store.
    let root: PathBuf = std::path::absolute(root)
        .ctx("resolve the store path", root)?
        .components()
        .collect();
    match rustix::fs::lstat(&root) {
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => check_trust(&st, &root)?,
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
            // Whatever the umask: a store others can write is a store they control.
            rustix::fs::chmod(&root, Mode::from_raw_mode(0o755))
                .ctx("set the store directory's mode", &root)?;
        }
        Err(Errno::NOENT) => return Err(Error::StoreNotFound { path: root }),
        Err(e) => return Err(Error::io("examine the store directory", &root, e)),
    }
    let dir =
        crate::fsutil::open_dir(rustix::fs::CWD, &root).ctx("open the store directory", &root)?;
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
    take_lock(&lock, mode, &root.join(LOCK_FILE))?;
    Ok((root, dir, lock))
}

/// Creates the 256 shard directories of a new objects directory.
fn create_shards(store: BorrowedFd<'_>, root: &Path) -> Result<()> {
    for b in 0..=255u8 {
        let shard = format!("{OBJECTS_DIR}/{b:02x}");
        match rustix::fs::mkdirat(store, shard.as_str(), Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(Error::io("create an object shard", root.join(&shard), e)),
        }
    }
    Ok(())
}

/// A suffix no other name made by this machine's processes shares:
/// `<pid>-<nanoseconds>-<counter>`.
pub fn unique_suffix() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{}-{nanos:09}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether the store directory's `objects/` or `manifests/` holds any file.
fn holds_data(store: std::os::fd::BorrowedFd<'_>, root: &std::path::Path) -> Result<bool> {
    for top in [OBJECTS_DIR, MANIFESTS_DIR] {
        let dir = match crate::fsutil::open_dir(store, top) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(Error::io("open a store directory", root.join(top), e)),
        };
        for shard in
            crate::fsutil::list_names(dir.as_fd()).ctx("list a store directory", root.join(top))?
        {
            match crate::fsutil::open_dir(dir.as_fd(), shard.as_slice()) {
                Ok(fd) => {
                    if !crate::fsutil::list_names(fd.as_fd())
                        .ctx("list a store directory", root.join(top))?
                        .is_empty()
                    {
                        return Ok(true);
                    }
                }
                // Anything else than a directory in there is data too.
                Err(_) => return Ok(true),
            }
        }
    }
    Ok(false)
}

/// Renames a catalogue and its log files aside, as `catalogue.sqlite.damaged-<suffix>`.
fn set_aside(catalogue: &Path) -> Result<PathBuf> {
    let mut aside = catalogue.as_os_str().to_owned();
    aside.push(format!(".damaged-{}", unique_suffix()));
    let aside = PathBuf::from(aside);
    for ext in ["", "-wal", "-shm"] {
        let mut from = catalogue.as_os_str().to_owned();
        from.push(ext);
        let mut to = aside.as_os_str().to_owned();
        to.push(ext);
        match std::fs::rename(&from, &to) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("set the damaged catalogue aside", from, e)),
        }
    }
    Ok(aside)
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
        let (root, dir, lock) = open_locked(root, mode, create)?;
        let catalogue_path = root.join(CATALOGUE_FILE);
        let catalogue = Catalogue::open(&catalogue_path, || holds_data(dir.as_fd(), &root))?;
        Store::assemble(root, dir, lock, catalogue, create)
    }

    /// Opens the store for `cestore recover`, under the exclusive lock. A
    /// catalogue SQLite cannot use or finds damaged, or any catalogue when
    /// `set_aside_anyway`, is set aside (renamed, never deleted) and replaced
    /// by a new one; the set-aside file's path is returned.
    pub fn open_for_recovery(
        root: &Path,
        set_aside_anyway: bool,
    ) -> Result<(Store, Option<PathBuf>)> {
        let (root, dir, lock) = open_locked(root, LockMode::Exclusive, false)?;
        let catalogue_path = root.join(CATALOGUE_FILE);
        let sound = !set_aside_anyway
            && Catalogue::open(&catalogue_path, || Ok(false))
                .and_then(|c| c.integrity_problems())
                .is_ok_and(|problems| problems.is_empty());
        let aside = if sound {
            None
        } else {
            Some(set_aside(&catalogue_path)?)
        };
        let catalogue = Catalogue::open(&catalogue_path, || Ok(false))?;
        Ok((Store::assemble(root, dir, lock, catalogue, true)?, aside))
    }

    fn assemble(
        root: PathBuf,
        dir: OwnedFd,
        lock: OwnedFd,
        catalogue: Catalogue,
        create: bool,
    ) -> Result<Store> {
        if create {
            for sub in [OBJECTS_DIR, MANIFESTS_DIR, TMP_DIR, VIEWS_DIR] {
                match rustix::fs::mkdirat(&dir, sub, Mode::from_raw_mode(0o755)) {
                    Ok(()) if sub == OBJECTS_DIR => create_shards(dir.as_fd(), &root)?,
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(Error::io("create the store layout", root.join(sub), e)),
                }
            }
        }
        let objects = crate::fsutil::open_dir(dir.as_fd(), OBJECTS_DIR)
            .ctx("open the objects directory", root.join(OBJECTS_DIR))?;
        let st = rustix::fs::fstat(&objects)
            .ctx("examine the objects directory", root.join(OBJECTS_DIR))?;
        check_trust(&st, &root.join(OBJECTS_DIR))?;
        let store = Store {
            root,
            dir,
            objects,
            _lock: lock,
            catalogue,
        };
        store.backfill_manifests()?;
        Ok(store)
    }

    /// Writes the manifest of every recorded snapshot into a store made
    /// before manifests were kept on disk (one without `manifests/`).
    fn backfill_manifests(&self) -> Result<()> {
        match rustix::fs::mkdirat(&self.dir, MANIFESTS_DIR, Mode::from_raw_mode(0o755)) {
            Err(Errno::EXIST) => return Ok(()),
            // A read-only store cannot change; it is read as it is.
            Err(Errno::ROFS | Errno::ACCESS | Errno::PERM) => return Ok(()),
            Err(e) => {
                return Err(Error::io(
                    "create the manifests directory",
                    self.root.join(MANIFESTS_DIR),
                    e,
                ))
            }
            Ok(()) => {}
        }
        let snapshots = self.catalogue.snapshots(None, None)?;
        if snapshots.is_empty() {
            return Ok(());
        }
        let work = self.work_dir("backfill")?;
        for s in &snapshots {
            let bytes = self.catalogue.manifest_bytes(&s.digest)?;
            let manifest = crate::profile::ce::manifest::Manifest::parse(&bytes).map_err(|e| {
                crate::error::Damage::CatalogueManifest {
                    digest: s.digest,
                    reason: e.to_string(),
                }
            })?;
            self.write_manifest(&work, &manifest)?;
        }
        self.sync()
    }

    /// The store's absolute path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of the shared views (`STORE/views`).
    pub fn views_dir(&self) -> PathBuf {
        self.root.join(VIEWS_DIR)
    }

    /// Where a snapshot's shared view stands (`STORE/views/<digest>`): the
    /// one place that names it.
    pub fn shared_view_dir(&self, digest: &ManifestDigest) -> PathBuf {
        self.views_dir().join(digest.to_hex())
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

    /// Makes everything written to the store's filesystem durable.
    pub fn sync(&self) -> Result<()> {
        rustix::fs::syncfs(&self.dir).ctx("sync the store's filesystem", &self.root)
    }
}
