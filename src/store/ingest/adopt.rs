//! Adopting a snapshot that arrives as a manifest and blobs (a registry pull,
//! a bundle import) rather than as a source tree.
//!
//! The manifest must be canonical and pass the same rules as an ingest (its
//! profile's [`Profile::check_entries`] and [`Profile::check_content`]); every blob
//! must hash to its key and have its recorded size. The manifest and its
//! bounds are checked before any object is read; each object is then streamed
//! into a file of the store's work directory and hashed on the way, so memory
//! stays bounded by a buffer, never by what a source declares. Only then does
//! anything enter the store, through the same no-overwrite publishing and
//! single `syncfs` as an ingest.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use rustix::fs::{AtFlags, Mode, OFlags};

use crate::catalogue::Origin;
use crate::digest::{ManifestDigest, ObjectHasher, ObjectId};
use crate::error::{Classified, Classify, Error, ErrorKind, IoContext, Result};
use crate::profile::ce::manifest::Manifest;
use crate::profile::ce::rules as ce_rules;
use crate::profile::ce::CE;
use crate::profile::{ContentError, Profile};
use crate::source::SourceEntry;
use crate::store::core::objects::WorkDir;
use crate::store::core::objects::{check_object, ObjectState};
use crate::store::ingest::{publish_and_record, IngestReport, Staged};
use crate::store::{Need, ObjectKey, Opener, Store};

/// Why received data cannot become a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    /// The manifest bytes hash to another digest than the one asked for.
    #[error("the manifest hashes to {found}, not to the digest asked for, {expected}")]
    DigestMismatch {
        /// The digest asked for.
        expected: ManifestDigest,
        /// What the bytes hash to.
        found: ManifestDigest,
    },
    /// The manifest is not a canonical manifest.
    #[error("the manifest is not canonical: {0}")]
    Manifest(#[from] crate::profile::ce::manifest::ManifestError),
    /// The manifest breaks one of the reference's rules.
    #[error("the manifest breaks a rule: {0}")]
    Rules(#[from] ce_rules::ManifestRuleError),
    /// A tree-kind manifest holds what no capture records, or is a task
    /// whose tree or dependency list the store does not hold.
    #[error("the manifest breaks a rule: {0}")]
    Tree(#[from] crate::profile::tree::stored::CheckError),
    /// A blob does not hash to its key.
    #[error("blob for '{path}' hashes to {found}, not {expected}")]
    BlobHash {
        /// The file it was for.
        path: String,
        /// Its key.
        expected: ObjectId,
        /// What its bytes hash to.
        found: ObjectId,
    },
    /// A blob has another size than the manifest says.
    #[error("blob for '{path}' has {found} bytes, not {expected}")]
    BlobSize {
        /// The file it was for.
        path: String,
        /// The manifest's size.
        expected: u64,
        /// The blob's size.
        found: u64,
    },
    /// A blob the manifest needs was not delivered.
    #[error("blob {0} was not delivered")]
    BlobMissing(ObjectId),
    /// The profile's manifest file carries no exact semantic version.
    #[error(transparent)]
    NoVersion(#[from] crate::profile::NoVersion),
    /// The source records that came with the snapshot cannot be read.
    #[error("{carrier} carries unreadable source records: {source}")]
    Sources {
        /// What carried them, e.g. a registry's annotation.
        carrier: String,
        /// Why they cannot be read.
        #[source]
        source: crate::source::carried::CarriedError,
    },
}

impl Classify for AdoptError {
    /// `integrity`: what arrived is not what it should be.
    fn kind(&self) -> ErrorKind {
        ErrorKind::Integrity
    }

    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }
}

impl From<AdoptError> for Error {
    fn from(e: AdoptError) -> Self {
        Error::Adopt(Classified::new(e))
    }
}

/// One object the store lacks: its key, its size, and a path that uses it.
#[derive(Clone, Debug)]
pub struct Wanted {
    /// The object's key.
    pub key: ObjectKey,
    /// Its size.
    pub size: u64,
    /// A file of the manifest with this content.
    pub path: String,
}

/// Where the objects of an adoption are staged while they arrive: files in
/// the store's work directory, written as they are read and hashed on the
/// way, so that memory never holds more than a buffer of any object.
pub struct Staging<'w> {
    work: &'w WorkDir,
    staged: Mutex<BTreeMap<ObjectKey, String>>,
    /// The store's partial area, once [`Staging::keep_partial`] opened it.
    partial: OnceLock<Partial>,
}

/// The store's partial area, open.
struct Partial {
    fd: OwnedFd,
    path: PathBuf,
    /// The names it held when it was opened: only those are looked for.
    held: std::collections::HashSet<String>,
}

/// The directory under the store's `tmp/` where a pull keeps every object
/// it fetched and checked, named `<64 hex>[.x]`, so that a pull that dies
/// (killed, a lost connection) is resumed by the next one without
/// fetching them again. Its files are not synced: each is hashed again
/// before it is reused. A pull that succeeds removes what it took from it;
/// gc removes it whole (it holds no flock, so it is a stale temporary
/// directory to gc and `verify`), and nothing in it is ever an object of
/// the store until a pull stages it again and publishes it.
pub const PARTIAL_DIR: &str = "partial";

/// The most bytes of an object read from a source per read call.
const STAGE_BUFFER: usize = 64 * 1024;

/// Objects of at least this many bytes are handed to the disk while the
/// transfer goes on ([`write_behind`]); smaller ones are left to the
/// `syncfs` (a large tree's many small objects hold few of its bytes).
const WRITE_BEHIND_MIN: u64 = 256 * 1024;

/// How many bytes of a large object are written before they are handed to
/// the disk.
const WRITE_BEHIND_STEP: u64 = 8 * 1024 * 1024;

/// Starts writing `len` bytes of `file` from `offset` to the disk, without
/// waiting for them: `POSIX_FADV_DONTNEED` starts the write-back of the
/// range's dirty pages (and drops those already clean). The single `syncfs`
/// before the catalogue records the snapshot still makes them durable; it
/// then finds most of a large transfer already written, instead of writing
/// all of it after the transfer. Only a hint: a failure changes nothing.
fn write_behind(file: &std::fs::File, offset: u64, len: u64) {
    if let Some(len) = std::num::NonZeroU64::new(len) {
        let _ = rustix::fs::fadvise(file, offset, Some(len), rustix::fs::Advice::DontNeed);
    }
}

impl Staging<'_> {
    /// Streams one wanted object from `src` into a new file in the work
    /// directory, hashing as it goes. Reads at most one byte more than the
    /// manifest's size, and refuses a blob of another size or hash. A failed
    /// read becomes the error `read_error` makes of it.
    pub fn stage(
        &self,
        w: &Wanted,
        src: &mut dyn Read,
        read_error: &dyn Fn(io::Error) -> Error,
    ) -> Result<()> {
        let name = w.key.file_name();
        let path = self.work.path().join(&name);
        let fd = rustix::fs::openat(
            self.work.fd(),
            name.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o400),
        )
        .map_err(|e| Error::io("create a staged object", &path, e))?;
        let mut file = std::fs::File::from(fd);
        let mut hasher = ObjectHasher::default();
        let mut buf = vec![0u8; STAGE_BUFFER];
        let mut src = src.take(w.size.saturating_add(1));
        let mut found = 0u64;
        let mut handed = 0u64;
        loop {
            let n = match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_error(e)),
            };
            found += n as u64;
            if found > w.size {
                break;
            }
            hasher.update(&buf[..n]);
            file.write_all(&buf[..n])
                .ctx("write a staged object", &path)?;
            if w.size >= WRITE_BEHIND_MIN && found - handed >= WRITE_BEHIND_STEP {
                write_behind(&file, handed, found - handed);
                handed = found;
            }
        }
        if found != w.size {
            return Err(AdoptError::BlobSize {
                path: w.path.clone(),
                expected: w.size,
                found,
            }
            .into());
        }
        let id = hasher.finish();
        if id != w.key.id {
            return Err(AdoptError::BlobHash {
                path: w.path.clone(),
                expected: w.key.id,
                found: id,
            }
            .into());
        }
        if w.size >= WRITE_BEHIND_MIN {
            write_behind(&file, handed, found - handed);
        }
        rustix::fs::fchmod(&file, Mode::from_raw_mode(w.key.mode()))
            .map_err(|e| Error::io("set a staged object's mode", &path, e))?;
        // Kept for a resumed pull: a link, so no byte is written twice. A
        // link that cannot be made costs only a fetch again.
        if let Some(partial) = self.partial.get() {
            let _ = rustix::fs::linkat(
                self.work.fd(),
                name.as_str(),
                &partial.fd,
                w.key.name().as_str(),
                AtFlags::empty(),
            );
        }
        self.note(w.key, name)
    }

    /// Records that `key` is staged under `name` in the work directory.
    fn note(&self, key: ObjectKey, name: String) -> Result<()> {
        let mut staged = self
            .staged
            .lock()
            // A poisoned lock follows a panic: a bug, not a case a caller handles.
            .map_err(|_| Error::Integrity("a staging thread panicked".into()))?;
        staged.insert(key, name);
        Ok(())
    }

    /// Opens the store's partial area ([`PARTIAL_DIR`]), made when it is
    /// not there: from then on every object staged is also kept there, and
    /// [`Staging::resume`] takes objects from it. A store where it cannot
    /// be made keeps nothing; the transfer goes on as before.
    pub fn keep_partial(&self) {
        if self.partial.get().is_some() {
            return;
        }
        let Some(tmp) = self.work.path().parent() else {
            return;
        };
        let dir = tmp.join(PARTIAL_DIR);
        match rustix::fs::mkdir(&dir, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(_) => return,
        }
        if let Ok(fd) = crate::fsutil::open_dir(rustix::fs::CWD, &dir) {
            let held = crate::fsutil::list_names(fd.as_fd())
                .unwrap_or_default()
                .into_iter()
                .filter_map(|n| String::from_utf8(n).ok())
                .collect();
            let _ = self.partial.set(Partial {
                fd,
                path: dir,
                held,
            });
        }
    }

    /// Stages `w` from the partial area when an earlier transfer left it
    /// there and it still has its size and hash; tells whether it did. One
    /// that does not is removed from the partial area and must be fetched.
    pub fn resume(&self, w: &Wanted) -> Result<bool> {
        let Some(Partial {
            fd: partial, held, ..
        }) = self.partial.get()
        else {
            return Ok(false);
        };
        let kept = w.key.name();
        if !held.contains(&kept) {
            return Ok(false);
        }
        let name = w.key.file_name();
        if rustix::fs::linkat(
            partial,
            kept.as_str(),
            self.work.fd(),
            name.as_str(),
            AtFlags::empty(),
        )
        .is_err()
        {
            return Ok(false);
        }
        let path = self.work.path().join(&name);
        let intact = rustix::fs::openat(
            self.work.fd(),
            name.as_str(),
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .ok()
        .map(std::fs::File::from)
        .filter(|f| {
            f.metadata().is_ok_and(|m| m.is_file() && m.len() == w.size) && hashes_to(f, &w.key.id)
        });
        let Some(file) = intact else {
            let _ = rustix::fs::unlinkat(partial, kept.as_str(), AtFlags::empty());
            let _ = rustix::fs::unlinkat(self.work.fd(), name.as_str(), AtFlags::empty());
            return Ok(false);
        };
        rustix::fs::fchmod(&file, Mode::from_raw_mode(w.key.mode()))
            .map_err(|e| Error::io("set a staged object's mode", &path, e))?;
        self.note(w.key, name)?;
        Ok(true)
    }

    /// Stages `to` as a copy of the object staged under `from` (the same
    /// content with the other exec bit), hashing the copy again.
    pub fn copy(&self, from: &ObjectKey, to: &Wanted) -> Result<()> {
        let path = self.work.path().join(from.file_name());
        let mut file = std::fs::File::open(&path).ctx("read a staged object", &path)?;
        self.stage(to, &mut file, &|e| {
            Error::io("read a staged object", &path, e)
        })
    }

    /// Removes from the partial area the objects of a snapshot now stored
    /// (on two threads: a large tree's are many), and the area itself once
    /// it is empty.
    fn forget_partial(partial: Option<Partial>, keys: &[Wanted]) {
        if let Some(partial) = partial {
            let _ = crate::pool::map(
                keys,
                2,
                || (),
                |(), w| {
                    let _ = rustix::fs::unlinkat(
                        partial.fd.as_fd(),
                        w.key.name().as_str(),
                        AtFlags::empty(),
                    );
                    Ok::<(), ()>(())
                },
            );
            // Refused while it holds what another transfer kept.
            let _ = rustix::fs::rmdir(&partial.path);
        }
    }

    /// The name in the work directory of a staged object.
    fn name(&self, key: &ObjectKey) -> Option<String> {
        self.staged.lock().ok()?.get(key).cloned()
    }
}

/// Whether the whole of `file` hashes to `id`.
fn hashes_to(mut file: &std::fs::File, id: &ObjectId) -> bool {
    let mut hasher = ObjectHasher::default();
    let mut buf = vec![0u8; STAGE_BUFFER];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return hasher.finish() == *id,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// How a snapshot arrives: the event it is recorded with, and where it was
/// first ingested when its carrier says.
pub struct Arrival<'a> {
    /// `pull` or `import`.
    pub event: &'static str,
    /// Where it came from, e.g. `oci://…` or `bundle:/…`.
    pub source: &'a str,
    /// Its first ingest, recorded before the arrival when the store did not
    /// hold the snapshot yet.
    pub origin: Option<&'a Origin>,
    /// The source records its carrier brought, each marked as it came.
    pub sources: Vec<SourceEntry>,
    /// The attestations its carrier brought, kept and recorded with it.
    pub attestations: Vec<crate::catalogue::KeptAttestation>,
}

/// Checks manifest bytes received from elsewhere before anything else of the
/// snapshot is read: canonical, hashing to `expected` when given, and within
/// the profile's rules and bounds ([`Profile::check_entries`]).
pub fn check_received(
    bytes: &[u8],
    expected: Option<ManifestDigest>,
) -> std::result::Result<Manifest, AdoptError> {
    let manifest = CE.parse_manifest(bytes)?;
    if let Some(expected) = expected.filter(|e| *e != manifest.digest) {
        return Err(AdoptError::DigestMismatch {
            expected,
            found: manifest.digest,
        });
    }
    match &manifest.tree {
        None => CE.check_entries(&manifest.entries)?,
        // Whether a task's parts are recorded is asked once the store is open.
        Some(stored) => crate::profile::tree::stored::check_alone(stored)?,
    }
    Ok(manifest)
}

/// Checks that the store records the manifests a task names (its tree and
/// its dependency list): a task is recorded only after both.
pub fn check_named(store: &Store, manifest: &Manifest) -> Result<()> {
    if let Some(stored) = &manifest.tree {
        let catalogue = store.catalogue();
        crate::profile::tree::stored::check(stored, &|d| catalogue.kind_of(d))
            .map_err(AdoptError::from)?;
    }
    Ok(())
}

/// Adopts a snapshot: checks `manifest_bytes` (against `expected` when
/// given) and the bounds before anything else, then lets `fetch` stream the
/// objects the store lacks into a work directory (it is called even when
/// none is wanted, so that a bundle is read to its end), and records the
/// snapshot with an event as `arrival` says. The store is opened through
/// `open` once the manifest passes, and made when it is not there.
pub fn adopt<F>(
    open: Opener<'_>,
    manifest_bytes: &[u8],
    expected: Option<ManifestDigest>,
    arrival: &Arrival<'_>,
    fetch: F,
) -> Result<IngestReport>
where
    F: FnOnce(&[Wanted], &Staging<'_>) -> Result<()>,
{
    let manifest = check_received(manifest_bytes, expected)?;
    let mut store = open(Need::Creating)?;
    check_named(&store, &manifest)?;

    let mut needed: BTreeMap<ObjectKey, (u64, String)> = BTreeMap::new();
    for e in manifest.entries.iter().filter(|e| e.size > 0) {
        let key = e.key();
        needed.entry(key).or_insert((e.size, e.path.clone()));
    }
    let mut wanted = Vec::new();
    let mut reused = 0u64;
    for (key, (size, path)) in &needed {
        match check_object(&store, key, *size)? {
            ObjectState::Intact => reused += 1,
            ObjectState::Missing => wanted.push(Wanted {
                key: *key,
                size: *size,
                path: path.clone(),
            }),
            ObjectState::Damaged(why) => {
                return Err(crate::error::Damage::AdoptedObject {
                    object: store.object_path(key),
                    problem: why,
                }
                .into())
            }
        }
    }
    let work = store.work_dir("adopt")?;
    let mut staging = Staging {
        work: &work,
        staged: Mutex::new(BTreeMap::new()),
        partial: OnceLock::new(),
    };
    fetch(&wanted, &staging)?;
    let mut staged = Vec::with_capacity(wanted.len());
    let mut bytes = 0;
    for w in &wanted {
        let name = staging
            .name(&w.key)
            .ok_or(AdoptError::BlobMissing(w.key.id))?;
        bytes += w.size;
        staged.push((name, w.key));
    }
    let version = check_content(&store, &manifest, &staging)?;
    let partial = staging.partial.take();
    drop(staging);
    let report = publish_and_record(
        &mut store,
        work,
        Staged {
            manifest: &manifest,
            name: None,
            version: &version,
            event: arrival.event,
            source: arrival.source,
            origin: arrival.origin,
            sources: arrival.sources.clone(),
            attestations: arrival.attestations.clone(),
            tree_digest: None,
            objects: staged,
            drifted: Vec::new(),
            left_out: Vec::new(),
            secrets: Vec::new(),
            reused,
            bytes,
        },
    )?;
    // Stored now: what an earlier transfer kept of it is no longer needed.
    Staging::forget_partial(partial, &wanted);
    Ok(report)
}

/// Checks the profile's content entry ([`Profile::content_entry`]) as an
/// ingest does and returns its version.
fn check_content(store: &Store, manifest: &Manifest, staging: &Staging<'_>) -> Result<String> {
    if manifest.tree.is_some() {
        // A tree kind has no manifest file and no version.
        return Ok(String::new());
    }
    let entry = CE.content_entry(&manifest.entries);
    let key = entry.key();
    let path = match staging.name(&key) {
        Some(name) => Some(staging.work.path().join(name)),
        None if entry.size == 0 => None,
        None => Some(store.object_path(&key)),
    };
    let mut bytes = Vec::new();
    if let Some(path) = path {
        // The manifest's bounds hold for it: at most one file's bytes, and one more.
        std::fs::File::open(&path)
            .and_then(|f| f.take(CE.bounds().file_bytes + 1).read_to_end(&mut bytes))
            .ctx("read an object", &path)?;
    }
    content_version(&bytes)
}

/// Checks the bytes of the profile's content entry as an ingest does
/// ([`Profile::check_content`]) and returns the version they carry.
pub fn content_version(bytes: &[u8]) -> Result<String> {
    CE.check_content(bytes).map_err(|e| match e {
        ContentError::Rejected(r) => Error::from(r),
        ContentError::NoVersion(v) => AdoptError::from(v).into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::ObjectId;
    use crate::error::error_chain;

    /// Bytes that repeat nowhere, `len` of them.
    fn varied(len: usize) -> Vec<u8> {
        let mut data = Vec::with_capacity(len + 32);
        let mut block = *ObjectId::of(b"seed").as_bytes();
        while data.len() < len {
            block = *ObjectId::of(&block).as_bytes();
            data.extend_from_slice(&block);
        }
        data.truncate(len);
        data
    }

    fn staging(work: &WorkDir) -> Staging<'_> {
        Staging {
            work,
            staged: Mutex::new(BTreeMap::new()),
            partial: OnceLock::new(),
        }
    }

    /// A large object is handed to the disk in steps as it is written:
    /// every byte is staged, and checked, as with a small one.
    #[test]
    fn a_large_object_staged_while_it_is_written_back_keeps_every_byte() {
        let tmp = tempfile::tempdir().unwrap();
        let store = crate::store::testutil::open(tmp.path());
        let work = store.work_dir("adopt").unwrap();
        let staging = staging(&work);
        let len = 2 * WRITE_BEHIND_STEP as usize + 12_345;
        let data = varied(len);
        let key = ObjectKey {
            id: ObjectId::of(&data),
            executable: true,
        };
        let wanted = |key: ObjectKey| Wanted {
            key,
            size: len as u64,
            path: "gitnexus/vendor/big.wasm".into(),
        };
        let read_error = |e: io::Error| Error::io("read", "/src", e);
        staging
            .stage(&wanted(key), &mut &data[..], &read_error)
            .unwrap();
        let name = staging.name(&key).unwrap();
        let path = work.path().join(&name);
        assert_eq!(std::fs::read(&path).unwrap(), data);
        assert_eq!(crate::store::testutil::mode(&path), 0o555);

        // The same size with one byte changed is refused once all is written.
        let mut changed = data.clone();
        changed[len - 1] ^= 1;
        let other = ObjectKey {
            executable: false,
            ..key
        };
        let err = staging
            .stage(&wanted(other), &mut &changed[..], &read_error)
            .unwrap_err();
        assert!(
            matches!(&err, Error::Adopt(a) if matches!(a.downcast_ref::<AdoptError>(), Some(AdoptError::BlobHash { .. }))),
            "{err}"
        );
        assert_eq!(staging.name(&other), None);
    }

    /// An adoption's error keeps its type and its sources, and is `integrity`.
    #[test]
    fn an_adoption_error_stays_typed() {
        let err = Error::from(AdoptError::Rules(ce_rules::ManifestRuleError::EmptyPath));
        assert_eq!(err.error_kind(), ErrorKind::Integrity);
        assert_eq!(err.exit_code(), 1);
        assert_eq!(
            error_chain(&err),
            "the manifest breaks a rule: manifest path '' is empty"
        );
        let Error::Adopt(adopt) = &err else {
            panic!("{err:?}");
        };
        assert!(matches!(
            adopt.downcast_ref::<AdoptError>(),
            Some(AdoptError::Rules(ce_rules::ManifestRuleError::EmptyPath))
        ));
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("manifest path '' is empty"));
    }
}
