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
use crate::store::core::objects::{check_object, ObjectState};
use crate::store::core::objects::{set_staged_mode, StaleWorkDir, WorkDir};
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
/// the store's work directory, named `<64 hex>[.x]`, written as they are
/// read and hashed on the way, so that memory never holds more than a
/// buffer of any object.
pub struct Staging<'w> {
    work: &'w WorkDir,
    staged: Mutex<BTreeMap<ObjectKey, String>>,
    /// The work directories of adoptions that died, once
    /// [`Staging::resume_stale`] took them over: set only for a transfer
    /// that resumes, and leaves its own work directory to the next one if
    /// it fails.
    stale: OnceLock<Vec<StaleWorkDir>>,
}

/// The operation name of an adoption's work directory (`tmp/adopt-…`).
const WORK_OP: &str = "adopt";

/// The most bytes of an object read from a source per read call.
const STAGE_BUFFER: usize = 64 * 1024;

/// Objects of at least this many bytes are handed to the disk while the
/// transfer goes on ([`write_behind`]); smaller ones are left to the
/// `syncfs` (a large tree's many small objects hold few of its bytes).
const WRITE_BEHIND_MIN: u64 = 256 * 1024;

/// How many bytes of a large object are written before they are handed to
/// the disk.
const WRITE_BEHIND_STEP: u64 = 8 * 1024 * 1024;

/// An adoption that stages more bytes than this syncs the filesystem in the
/// background every this many bytes, and while its objects are published
/// ([`WorkDir::flush_ahead`]): the `syncfs` before the catalogue records
/// the snapshot then finds them on the disk, even where the device keeps
/// what [`write_behind`] hands it until a flush.
const FLUSH_AHEAD_STEP: u64 = 64 * 1024 * 1024;

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
    /// directory, hashing as it goes, then sets the object's mode. Reads at most
    /// one byte more than the manifest's size, and refuses a blob of
    /// another size or hash, removing what it wrote. A failed read becomes
    /// the error `read_error` makes of it.
    pub fn stage(
        &self,
        w: &Wanted,
        src: &mut dyn Read,
        read_error: &dyn Fn(io::Error) -> Error,
    ) -> Result<()> {
        let name = w.key.name();
        let fd = rustix::fs::openat(
            self.work.fd(),
            name.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o400),
        );
        let path = self.work.path().join(&name);
        let file = std::fs::File::from(fd.ctx("create a staged object", &path)?);
        let written = Self::write_checked(w, &file, &path, src, read_error)
            .and_then(|()| set_staged_mode(&file, &w.key, &path));
        match written {
            Ok(()) => {
                self.work.staged(w.size);
                self.note(w.key, name)
            }
            Err(e) => {
                // Nothing unchecked stays for a later transfer to look at.
                let _ = rustix::fs::unlinkat(self.work.fd(), name.as_str(), AtFlags::empty());
                Err(e)
            }
        }
    }

    /// Writes `src` into `file`, checking its size and hash (see
    /// [`Staging::stage`]).
    fn write_checked(
        w: &Wanted,
        mut file: &std::fs::File,
        path: &std::path::Path,
        src: &mut dyn Read,
        read_error: &dyn Fn(io::Error) -> Error,
    ) -> Result<()> {
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
                .ctx("write a staged object", path)?;
            if w.size >= WRITE_BEHIND_MIN && found - handed >= WRITE_BEHIND_STEP {
                write_behind(file, handed, found - handed);
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
            write_behind(file, handed, found - handed);
        }
        Ok(())
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

    /// Takes over the work directories of adoptions that died (killed, or
    /// failed after [`Staging::resume_stale`]), so that [`Staging::resume`]
    /// reuses the objects they checked; and makes this adoption's own work
    /// directory one the next takes over if this one fails too.
    pub fn resume_stale(&self) {
        let _ = self.stale.set(self.work.take_over_stale(WORK_OP));
    }

    /// Stages `w` from a work directory taken over when an adoption that
    /// died left it there and it still has its size and hash; tells whether
    /// it did. One that does not is removed, and must be fetched.
    pub fn resume(&self, w: &Wanted) -> Result<bool> {
        let Some(stale) = self.stale.get() else {
            return Ok(false);
        };
        let name = w.key.name();
        for from in stale {
            if !self.work.take_from(from, &name) {
                continue;
            }
            let intact = rustix::fs::openat(
                self.work.fd(),
                name.as_str(),
                // Never waiting on a FIFO put in a regular file's place.
                OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
                Mode::empty(),
            )
            .ok()
            .map(std::fs::File::from)
            .filter(|f| {
                f.metadata().is_ok_and(|m| m.is_file() && m.len() == w.size)
                    && ObjectId::of_reader(f).is_ok_and(|(id, _)| id == w.key.id)
            });
            let Some(file) = intact else {
                let _ = rustix::fs::unlinkat(self.work.fd(), name.as_str(), AtFlags::empty());
                continue;
            };
            set_staged_mode(&file, &w.key, &self.work.path().join(&name))?;
            self.note(w.key, name)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Stages `to` as a copy of the object staged under `from` (the same
    /// content with the other exec bit), hashing the copy again.
    pub fn copy(&self, from: &ObjectKey, to: &Wanted) -> Result<()> {
        let staged = self.name(from).ok_or(AdoptError::BlobMissing(from.id))?;
        let path = self.work.path().join(staged);
        let mut file = std::fs::File::open(&path).ctx("read a staged object", &path)?;
        self.stage(to, &mut file, &|e| {
            Error::io("read a staged object", &path, e)
        })
    }

    /// The name in the work directory of a staged object.
    fn name(&self, key: &ObjectKey) -> Option<String> {
        self.staged.lock().ok()?.get(key).cloned()
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

/// Checks a manifest received from elsewhere (parsed from its bytes, so
/// canonical) before anything else of the snapshot is read: hashing to
/// `expected` when given, and within the profile's rules and bounds
/// ([`Profile::check_entries`]).
pub fn check_received(
    manifest: &Manifest,
    expected: Option<ManifestDigest>,
) -> std::result::Result<(), AdoptError> {
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
    Ok(())
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

/// Adopts a snapshot: checks `manifest` (against `expected` when given) and
/// the bounds before anything else, then lets `fetch` stream the
/// objects the store lacks into a work directory (it is called even when
/// none is wanted, so that a bundle is read to its end), and records the
/// snapshot with an event as `arrival` says. The store is opened through
/// `open` once the manifest passes, and made when it is not there.
pub fn adopt<F>(
    open: Opener<'_>,
    manifest: &Manifest,
    expected: Option<ManifestDigest>,
    arrival: &Arrival<'_>,
    fetch: F,
) -> Result<IngestReport>
where
    F: FnOnce(&[Wanted], &Staging<'_>) -> Result<()>,
{
    check_received(manifest, expected)?;
    let mut store = open(Need::Creating)?;
    check_named(&store, manifest)?;

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
    let mut work = store.work_dir(WORK_OP)?;
    if wanted.iter().map(|w| w.size).fold(0, u64::saturating_add) > FLUSH_AHEAD_STEP {
        work.flush_ahead(FLUSH_AHEAD_STEP);
    }
    let mut staging = Staging {
        work: &work,
        staged: Mutex::new(BTreeMap::new()),
        stale: OnceLock::new(),
    };
    let fetched = fetch(&wanted, &staging).and_then(|()| {
        let mut staged = Vec::with_capacity(wanted.len());
        let mut bytes = 0;
        for w in &wanted {
            let name = staging
                .name(&w.key)
                .ok_or(AdoptError::BlobMissing(w.key.id))?;
            bytes += w.size;
            staged.push((name, w.key));
        }
        Ok((staged, bytes, check_content(&store, manifest, &staging)?))
    });
    // Set only for a transfer that resumes (see `Staging::resume_stale`).
    let stale = staging.stale.take();
    let resumable = stale.is_some();
    let stale = stale.unwrap_or_default();
    let kept_any = staging.staged.lock().is_ok_and(|s| !s.is_empty());
    drop(staging);
    let (staged, bytes, version) = match fetched {
        Ok(done) => done,
        Err(e) => {
            // A transfer that resumes leaves what it checked to the next one.
            for s in stale {
                s.remove_if_spent();
            }
            if resumable && kept_any {
                work.leave();
            }
            return Err(e);
        }
    };
    let report = publish_and_record(
        &mut store,
        work,
        Staged {
            manifest,
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
    // Stored now: a directory taken over that holds nothing more for
    // another transfer goes.
    for s in stale {
        s.remove_if_spent();
    }
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
    use std::os::unix::fs::PermissionsExt;

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
            stale: OnceLock::new(),
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
        assert!(
            !work.path().join(other.name()).exists(),
            "a refused object stays staged"
        );
    }

    /// What an adoption that failed left is taken over by the next one,
    /// object by object, each hashed again; an object whose bytes changed
    /// meanwhile is removed, and a work directory still locked by a live
    /// adoption is not touched.
    #[test]
    fn a_later_adoption_takes_over_what_a_failed_one_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let store = crate::store::testutil::open(tmp.path());
        let read_error = |e: io::Error| Error::io("read", "/src", e);
        let objects: Vec<(Wanted, Vec<u8>)> = (0..3u8)
            .map(|i| {
                let data = varied(1000 + usize::from(i));
                let w = Wanted {
                    key: ObjectKey {
                        id: ObjectId::of(&data),
                        executable: i == 2,
                    },
                    size: data.len() as u64,
                    path: format!("f{i}"),
                };
                (w, data)
            })
            .collect();
        let first = store.work_dir(WORK_OP).unwrap();
        {
            let staging = staging(&first);
            staging.resume_stale();
            for (w, data) in &objects {
                staging.stage(w, &mut &data[..], &read_error).unwrap();
            }
        }
        let first_path = first.path().to_path_buf();
        first.leave();
        // The second object's bytes change while nobody holds them.
        let changed = first_path.join(objects[1].0.key.name());
        std::fs::set_permissions(&changed, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(
            &changed,
            varied(1001).iter().map(|b| b ^ 1).collect::<Vec<u8>>(),
        )
        .unwrap();
        // A live adoption's work directory is never taken over, nor a dead
        // one's that was publishing (gc and recover read its list).
        let live = store.work_dir(WORK_OP).unwrap();
        std::fs::write(live.path().join(objects[0].0.key.name()), &objects[0].1).unwrap();
        let publishing = store.work_dir(WORK_OP).unwrap();
        std::fs::write(
            publishing.path().join(objects[1].0.key.name()),
            &objects[1].1,
        )
        .unwrap();
        std::fs::write(
            publishing
                .path()
                .join(crate::store::core::objects::PUBLISHING_LIST),
            "manifest x\n",
        )
        .unwrap();
        let publishing_path = publishing.path().to_path_buf();
        publishing.leave();

        let second = store.work_dir(WORK_OP).unwrap();
        let staging = staging(&second);
        staging.resume_stale();
        assert!(staging.resume(&objects[0].0).unwrap());
        assert!(!staging.resume(&objects[1].0).unwrap());
        assert!(staging.resume(&objects[2].0).unwrap());
        assert!(live.path().join(objects[0].0.key.name()).exists());
        assert!(publishing_path.join(objects[1].0.key.name()).exists());
        for i in [0, 2] {
            let staged = second.path().join(staging.name(&objects[i].0.key).unwrap());
            assert_eq!(std::fs::read(&staged).unwrap(), objects[i].1);
            assert_eq!(
                crate::store::testutil::mode(&staged),
                objects[i].0.key.mode()
            );
        }
        assert!(
            !changed.exists(),
            "a changed object stays to be tried again"
        );
        assert!(!second.path().join(objects[1].0.key.name()).exists());
        // Spent, the directory taken over goes once the adoption succeeds.
        for s in staging.stale.into_inner().unwrap() {
            s.remove_if_spent();
        }
        assert!(!first_path.exists());
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
