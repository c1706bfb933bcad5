//! Source records on disk: beside each snapshot's manifest, one file per
//! record, named by the SHA-256 of its bytes.
//!
//! ```text
//! STORE/sources/
//! └── ab/<64 hex>/       the records of the snapshot with this digest
//!     └── <64 hex>.json  one record (a JSON line); its SHA-256 is the name
//! ```
//!
//! As with manifests, the files are the store's own record and the
//! catalogue's `sources` table their index: a file is made durable by the
//! ingest's `syncfs` before the catalogue records it, `rm` removes the
//! snapshot's directory inside the transaction that forgets the snapshot,
//! and `cestore recover` records again every file the catalogue lacks and
//! writes again every record whose file is gone. A record never enters the
//! manifest: the snapshot's digest does not depend on it.

use std::os::fd::AsFd;
use std::path::PathBuf;

use rustix::fs::{AtFlags, Mode};
use rustix::io::Errno;

use super::{Store, WorkDir};
use crate::catalogue::KeptSource;
use crate::digest::{ManifestDigest, SourceId};
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{publish_noreplace, Published};

/// The source records' directory inside the store.
pub const SOURCES_DIR: &str = "sources";

/// A record file's name suffix.
const SUFFIX: &str = ".json";

/// The most bytes a record file may hold: a dirty record lists at most the
/// reference's file count of paths, each within `PATH_MAX`.
const MAX_RECORD_BYTES: u64 = 64 << 20;

/// A snapshot's records directory relative to the store: `sources/ab/<64 hex>`.
fn rel_dir(digest: &ManifestDigest) -> String {
    let hex = digest.to_hex();
    format!("{SOURCES_DIR}/{}/{hex}", &hex[..2])
}

/// A record file found on disk.
#[derive(Debug)]
pub enum FoundSource {
    /// A sound record: its bytes hash to its name.
    Sound(Box<KeptSource>),
    /// A file that is not a sound record, and why.
    Damaged(PathBuf, String),
}

impl Store {
    /// The directory of a snapshot's source records.
    pub fn sources_dir(&self, digest: &ManifestDigest) -> PathBuf {
        self.root().join(rel_dir(digest))
    }

    /// Writes a record of a snapshot through the work directory, never
    /// overwriting. Returns whether it was new. Durable only after the next
    /// [`Store::sync`].
    pub fn write_source(
        &self,
        work: &WorkDir,
        digest: &ManifestDigest,
        kept: &KeptSource,
    ) -> Result<bool> {
        let dir = self.sources_dir(digest);
        let rel = rel_dir(digest);
        let mut made = String::new();
        for part in rel.split('/') {
            if !made.is_empty() {
                made.push('/');
            }
            made.push_str(part);
            match rustix::fs::mkdirat(self.dir(), made.as_str(), Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(Error::io("create a source records directory", &dir, e)),
            }
        }
        let name = format!("{}{SUFFIX}", kept.id);
        let staged = format!("source-{}", kept.id);
        let staged_path = work.path().join(&staged);
        crate::fsutil::write_new_read_only(&staged_path, kept.json.as_bytes())
            .ctx("write a source record", &staged_path)?;
        let target = crate::fsutil::open_dir(self.dir(), rel.as_str())
            .ctx("open a source records directory", &dir)?;
        match publish_noreplace(work.fd(), staged.as_str(), target.as_fd(), name.as_str()) {
            Ok(Published::Created) => Ok(true),
            Ok(Published::Existed) => {
                let _ = rustix::fs::unlinkat(work.fd(), staged.as_str(), AtFlags::empty());
                Ok(false)
            }
            Err(e) => Err(Error::io("publish a source record", dir.join(name), e)),
        }
    }

    /// Removes one record file of a snapshot; one already gone is no error.
    pub fn remove_source(&self, digest: &ManifestDigest, id: &SourceId) -> Result<()> {
        let path = self.sources_dir(digest).join(format!("{id}{SUFFIX}"));
        match rustix::fs::unlink(&path) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(Error::io("remove a source record", path, e)),
        }
    }

    /// Every record file of a snapshot, sorted by name.
    pub fn read_sources(&self, digest: &ManifestDigest) -> Result<Vec<FoundSource>> {
        let dir = self.sources_dir(digest);
        let fd = match crate::fsutil::open_dir(self.dir(), rel_dir(digest).as_str()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("open a source records directory", dir, e)),
        };
        let mut names = crate::fsutil::list_names(fd.as_fd()).ctx("list source records", &dir)?;
        names.sort();
        Ok(names
            .into_iter()
            .map(|name| read_one(&dir.join(String::from_utf8_lossy(&name).as_ref())))
            .collect())
    }
}

/// A snapshot's records directory, to remove while the store is borrowed
/// elsewhere (inside the catalogue's transaction that forgets the snapshot).
pub struct SourceFiles {
    shard: std::result::Result<std::os::fd::OwnedFd, Errno>,
    dir: PathBuf,
    name: String,
}

impl SourceFiles {
    /// The records directory of `digest` in `store`.
    pub fn of(store: &Store, digest: ManifestDigest) -> SourceFiles {
        let hex = digest.to_hex();
        let shard = format!("{SOURCES_DIR}/{}", &hex[..2]);
        SourceFiles {
            shard: crate::fsutil::open_dir(store.dir(), shard.as_str()),
            dir: store.sources_dir(&digest),
            name: hex,
        }
    }

    /// Removes every record file, and the directory; one already gone is
    /// no error.
    pub fn remove(&self) -> Result<()> {
        match &self.shard {
            Ok(fd) => crate::fsutil::remove_tree_at(fd.as_fd(), &self.name)
                .map(|_| ())
                .ctx("remove a snapshot's source records", &self.dir),
            Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(Error::io("open a source records directory", &self.dir, *e)),
        }
    }
}

/// Every entry under `sources/<shard>/`, with the digest its name gives (an
/// entry whose name is not a digest, or a shard that is not a directory, is
/// listed with `None`).
pub fn listed(store: &Store) -> Result<Vec<(Option<ManifestDigest>, PathBuf)>> {
    let root = store.root().join(SOURCES_DIR);
    let top = match crate::fsutil::open_dir(store.dir(), SOURCES_DIR) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("open the source records directory", root, e)),
    };
    let mut out = Vec::new();
    for shard in crate::fsutil::read_names(top.as_fd(), &root)? {
        let shard_path = root.join(&shard);
        let fd = match crate::fsutil::open_dir(top.as_fd(), shard.as_str()) {
            Ok(fd) => fd,
            Err(_) => {
                out.push((None, shard_path));
                continue;
            }
        };
        for name in crate::fsutil::read_names(fd.as_fd(), &shard_path)? {
            let digest = ManifestDigest::from_lower_hex(&name).filter(|d| d.to_hex()[..2] == shard);
            out.push((digest, shard_path.join(name)));
        }
    }
    Ok(out)
}

/// Removes an entry [`listed`] gave: a directory as a tree, else a file.
pub fn remove_listed(path: &std::path::Path) -> Result<()> {
    crate::fsutil::remove_tree_path(path).ctx("remove orphan source records", path)
}

/// Reads one record file and checks its bytes against its name.
fn read_one(path: &std::path::Path) -> FoundSource {
    let damaged = |why: String| FoundSource::Damaged(path.to_path_buf(), why);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Some(id) = name.strip_suffix(SUFFIX).and_then(SourceId::from_lower_hex) else {
        return damaged("its name is not a source record's".into());
    };
    let mut bytes = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| {
        use std::io::Read;
        f.take(MAX_RECORD_BYTES).read_to_end(&mut bytes)
    });
    if let Err(e) = read {
        return damaged(format!("it cannot be read: {e}"));
    }
    if SourceId::of(&bytes) != id {
        return damaged("its bytes do not hash to its name".into());
    }
    match std::str::from_utf8(&bytes).ok().and_then(KeptSource::parse) {
        Some(kept) => FoundSource::Sound(Box::new(kept)),
        None => damaged("it is not a source record".into()),
    }
}
