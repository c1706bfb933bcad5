//! Known hashes: the SHA-256 of the source files an ingest read, by inode
//! and change time, so that ingesting an unchanged release again reads
//! nothing but metadata (and `plugin.json`).
//!
//! ```text
//! STORE/known/<32 hex>       one file per (credentials, source directory):
//!                            the hash of "<euid> <egid> <groups>\0<source path>"
//! ```
//!
//! Each record is fixed-size: device, inode, size, mode, modification and
//! change times (seconds and nanoseconds), then the SHA-256. A file's hash is
//! taken from here only when every one of those fields is what the walk
//! finds now, and its object is intact in the store; otherwise the file is
//! read and hashed as usual.
//!
//! # Why this is safe
//!
//! Any write to a file, and any `chmod`, `chown`, `rename` into place or
//! `utimensat`, sets its change time to the current time; on Linux's native
//! filesystems no system call sets the change time itself. A file is recorded only when its
//! change time was already more than [`SETTLED`] in the past when the
//! ingest started, so a later change cannot carry the same change time (the
//! clock's granularity, or a write racing the read, is what git calls a
//! "racily clean" entry; such a file is simply not recorded). The device and
//! inode tell a replaced file from the original. Records are kept per set
//! of credentials (user, group, supplementary groups): whether a file may be
//! read depends only on those and on the file's owner, group and mode, so a
//! file this process may not read is read as usual, and refused as the
//! reference refuses it. Records are used only on local filesystems whose
//! metadata the kernel keeps (see `Source::on_local_filesystem`): not on NFS,
//! SMB or FUSE, where `stat` may answer from a cache. What remains is what no
//! stat-based tool (git, make, rsync) guards against: the system clock set
//! back, a security module's policy changed meanwhile, writes through a
//! shared `mmap` not yet flushed, or a filesystem edited underneath the
//! kernel.
//!
//! The record file is trusted only when this user owns it and no one else
//! can write it, so a store shared with `--trust-store` cannot be used to
//! make another user's ingest vouch for bytes it did not read.
//!
//! The file is a cache: a missing, short or damaged one is ignored, and it is
//! written, by rename, only after an ingest succeeds.

use std::collections::HashMap;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rustix::fs::Stat;

use super::Store;
use crate::digest::ObjectId;

/// The known hashes' directory inside the store.
pub const KNOWN_DIR: &str = "known";

/// How long a file's change time must lie before the start of an ingest for
/// its hash to be recorded.
pub const SETTLED: Duration = Duration::from_secs(2);

/// At most this many records are kept: the file bound of a release.
const MAX_RECORDS: usize = crate::policy::MAX_FILES;

/// At most this many sources are remembered; the least recently ingested
/// go first.
const MAX_SOURCES: usize = 256;

/// A record file left by a `save` that was killed is removed after this long.
const STALE_TEMPORARY: Duration = Duration::from_secs(3600);

const RECORD: usize = 8 * 8 + 32;

/// The metadata a record must match, field for field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Identity([u64; 8]);

impl Identity {
    fn of(st: &Stat) -> Identity {
        Identity([
            st.st_dev,
            st.st_ino,
            st.st_size as u64,
            u64::from(st.st_mode),
            st.st_mtime as u64,
            st.st_mtime_nsec as _,
            st.st_ctime as u64,
            st.st_ctime_nsec as _,
        ])
    }
}

/// The hashes an earlier ingest of one source directory recorded.
#[derive(Debug)]
pub struct KnownHashes {
    path: PathBuf,
    hashes: HashMap<Identity, ObjectId>,
    /// Files whose change time is before this were settled when the ingest began.
    settled_before: SystemTime,
    recorded: Vec<(Identity, ObjectId)>,
}

impl KnownHashes {
    /// Loads what is recorded for `source` in the store; empty on any problem.
    pub fn load(store: &Store, source: &Path) -> KnownHashes {
        let path = store.root().join(KNOWN_DIR).join(file_name(source));
        let mut hashes = HashMap::new();
        if let Some(bytes) = read_records(&path) {
            for record in bytes.chunks_exact(RECORD) {
                let mut fields = [0u64; 8];
                for (i, f) in fields.iter_mut().enumerate() {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&record[i * 8..i * 8 + 8]);
                    *f = u64::from_le_bytes(b);
                }
                let mut id = [0u8; 32];
                id.copy_from_slice(&record[64..]);
                hashes.insert(Identity(fields), ObjectId::from_bytes(id));
            }
        }
        KnownHashes {
            path,
            hashes,
            settled_before: SystemTime::now()
                .checked_sub(SETTLED)
                .unwrap_or(SystemTime::UNIX_EPOCH),
            recorded: Vec::new(),
        }
    }

    /// The hash recorded for a file with exactly this metadata.
    pub fn get(&self, st: &Stat) -> Option<ObjectId> {
        self.hashes.get(&Identity::of(st)).copied()
    }

    /// Notes a file the walk met, to be recorded if it was settled.
    pub fn note(&mut self, st: &Stat, id: ObjectId) {
        if self.recorded.len() >= MAX_RECORDS {
            return;
        }
        let changed = SystemTime::UNIX_EPOCH
            + Duration::new(st.st_ctime.max(0) as u64, st.st_ctime_nsec as u32);
        if changed < self.settled_before {
            self.recorded.push((Identity::of(st), id));
        }
    }

    /// Writes what was noted in place of what was loaded, by rename; a
    /// failure only costs the next ingest a read.
    pub fn save(self) {
        let unchanged = self.recorded.len() == self.hashes.len()
            && self
                .recorded
                .iter()
                .all(|(identity, id)| self.hashes.get(identity) == Some(id));
        if unchanged {
            return;
        }
        let Some(dir) = self.path.parent() else {
            return;
        };
        let _ = std::fs::create_dir(dir);
        let mut bytes = Vec::with_capacity(self.recorded.len() * RECORD);
        for (identity, id) in &self.recorded {
            for f in identity.0 {
                bytes.extend_from_slice(&f.to_le_bytes());
            }
            bytes.extend_from_slice(id.as_bytes());
        }
        let tmp = self
            .path
            .with_extension(format!("tmp-{}", super::objects::unique_suffix()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&bytes));
        if written.is_err() || std::fs::rename(&tmp, &self.path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        prune(dir);
    }
}

/// Reads a record file that this user wrote: a regular file, owned by this
/// user, that no one else can write, of whole records within the bound.
/// Anything else (a symlink, a FIFO, another user's file) is ignored, and
/// nothing beyond the bound is read.
fn read_records(path: &Path) -> Option<Vec<u8>> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read as _;
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    let size = st.st_size as u64;
    let sound = rustix::fs::FileType::from_raw_mode(st.st_mode)
        == rustix::fs::FileType::RegularFile
        && st.st_uid == rustix::process::geteuid().as_raw()
        && st.st_mode & 0o022 == 0
        && size % RECORD as u64 == 0
        && size <= (MAX_RECORDS * RECORD) as u64;
    if !sound {
        return None;
    }
    let mut bytes = Vec::with_capacity(size as usize);
    std::fs::File::from(fd)
        .take(size)
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() as u64 == size).then_some(bytes)
}

/// Removes the record files of the least recently ingested sources beyond
/// [`MAX_SOURCES`], and temporary files a killed `save` left.
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    let mut records = Vec::new();
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        if entry.file_name().to_string_lossy().contains(".tmp-") {
            if now
                .duration_since(modified)
                .is_ok_and(|age| age > STALE_TEMPORARY)
            {
                let _ = std::fs::remove_file(entry.path());
            }
        } else {
            records.push((modified, entry.path()));
        }
    }
    if records.len() > MAX_SOURCES {
        records.sort();
        for (_, path) in &records[..records.len() - MAX_SOURCES] {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The record file's name for a source directory, as this process's
/// credentials see it: its user, group and supplementary groups. Whether a
/// file may be read depends on them and on the file's owner, group and mode
/// (which its change time covers), so a process with other credentials finds
/// no records, reads every file, and is refused what it may not read.
fn file_name(source: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut groups: Vec<u32> = rustix::process::getgroups()
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.as_raw())
        .collect();
    groups.sort_unstable();
    let mut key = format!(
        "{} {} {:?}",
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
        groups
    )
    .into_bytes();
    key.push(0);
    key.extend_from_slice(source.as_os_str().as_bytes());
    ObjectId::of(&key).to_hex()[..32].to_string()
}
