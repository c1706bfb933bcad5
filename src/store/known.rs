//! Known hashes: the SHA-256 of the source files an ingest read, by inode
//! and change time, so that ingesting an unchanged release again reads
//! nothing but metadata (and `plugin.json`).
//!
//! ```text
//! STORE/known/<32 hex>       one file per (user, source directory): the
//!                            hash of "<euid>\0<absolute source path>"
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
//! `utimensat`, sets its change time to the current time; the change time
//! itself cannot be set by any system call. A file is recorded only when its
//! change time was already more than [`SETTLED`] in the past when the
//! ingest started, so a later change cannot carry the same change time (the
//! clock's granularity, or a write racing the read, is what git calls a
//! "racily clean" entry; such a file is simply not recorded). The device and
//! inode tell a replaced file from the original. What remains is what no
//! stat-based tool (git, make, rsync) guards against: the system clock set
//! back, or a filesystem edited underneath the kernel.
//!
//! The file is a cache: a missing, short or damaged one is ignored, and it is
//! written, by rename, only after an ingest succeeds.

use std::collections::HashMap;
use std::io::Write as _;
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

/// At most this many records are read: the file bound of a release.
const MAX_RECORDS: usize = 1 << 16;

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
        if let Ok(bytes) = std::fs::read(&path) {
            if bytes.len() % RECORD == 0 {
                for record in bytes.chunks_exact(RECORD).take(MAX_RECORDS) {
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
        let written = std::fs::File::create(&tmp).and_then(|mut f| f.write_all(&bytes));
        if written.is_err() || std::fs::rename(&tmp, &self.path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// The record file's name for a source directory, as this user sees it.
fn file_name(source: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut key = rustix::process::geteuid().as_raw().to_string().into_bytes();
    key.push(0);
    key.extend_from_slice(source.as_os_str().as_bytes());
    ObjectId::of(&key).to_hex()[..32].to_string()
}
