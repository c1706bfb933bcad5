//! Manifests on disk: every snapshot's canonical manifest, as a file named by
//! its digest, beside the objects.
//!
//! ```text
//! STORE/manifests/
//! └── ab/
//!     └── <64 hex>     the canonical manifest bytes; their SHA-256 is the name
//! ```
//!
//! The catalogue is an index; these files are the store's own record of what
//! it holds. A manifest is made durable (by the same `syncfs` as its objects)
//! before the catalogue records its snapshot, and removed only after the
//! catalogue has forgotten it. So gc, which marks live every object that a
//! manifest on disk names, never deletes an object of a snapshot that a lost
//! or damaged catalogue no longer lists, and `cestore recover` rebuilds the
//! catalogue's rows from these files.

use std::collections::HashSet;
use std::os::fd::AsFd;
use std::path::PathBuf;

use rustix::fs::{AtFlags, Mode, RenameFlags};
use rustix::io::Errno;

use super::{ObjectKey, Store, WorkDir};
use crate::digest::ManifestDigest;
use crate::error::{Error, IoContext, Result};
use crate::manifest::Manifest;

/// The manifests directory's name inside the store.
pub const MANIFESTS_DIR: &str = "manifests";

/// A manifest's path relative to `manifests/`: `ab/<64 hex>`.
pub fn rel_path(digest: &ManifestDigest) -> String {
    let hex = digest.to_hex();
    format!("{}/{hex}", &hex[..2])
}

/// The manifests on disk, sorted out (see [`Store::scan_manifests`]).
#[derive(Debug, Default)]
pub struct ManifestScan {
    /// Every object a manifest that stays names.
    pub live_objects: HashSet<ObjectKey>,
    /// Manifests an operation that did not finish published and nothing
    /// records: garbage, with the objects only they name.
    pub abandoned: Vec<(ManifestDigest, PathBuf)>,
    /// Manifests nothing records or is recording: a row the catalogue lost,
    /// which `cestore recover` records again.
    pub unrecorded: Vec<(ManifestDigest, PathBuf)>,
    /// Manifests whose bytes are not what their name says, and why.
    pub damaged: Vec<(ManifestDigest, PathBuf, String)>,
    /// Files whose names are not manifests' names.
    pub stray: Vec<PathBuf>,
    /// Recorded snapshots without a manifest file.
    pub missing: Vec<ManifestDigest>,
}

/// A manifest file found under `manifests/`.
#[derive(Debug)]
pub struct FoundManifest {
    /// Its absolute path.
    pub path: PathBuf,
    /// The digest its name claims, when the name is one.
    pub digest: Option<ManifestDigest>,
}

impl Store {
    /// The absolute path of a snapshot's manifest file.
    pub fn manifest_path(&self, digest: &ManifestDigest) -> PathBuf {
        self.root().join(MANIFESTS_DIR).join(rel_path(digest))
    }

    /// Writes a snapshot's manifest into `manifests/` through the work
    /// directory, never overwriting. Returns whether it was new. Durable only
    /// after the next [`Store::sync`].
    pub fn write_manifest(&self, work: &WorkDir, manifest: &Manifest) -> Result<bool> {
        let hex = manifest.digest.to_hex();
        let dest = self.manifest_path(&manifest.digest);
        match rustix::fs::mkdirat(
            self.dir(),
            format!("{MANIFESTS_DIR}/{}", &hex[..2]).as_str(),
            Mode::from_raw_mode(0o755),
        ) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(Error::io("create a manifest shard", dest, e)),
        }
        let staged = format!("manifest-{hex}");
        write_read_only(&work.path().join(&staged), &manifest.bytes)?;
        let rel = rel_path(&manifest.digest);
        let manifests = crate::fsutil::open_dir(self.dir(), MANIFESTS_DIR).ctx(
            "open the manifests directory",
            self.root().join(MANIFESTS_DIR),
        )?;
        match rustix::fs::renameat_with(
            work.fd(),
            staged.as_str(),
            &manifests,
            rel.as_str(),
            RenameFlags::NOREPLACE,
        ) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => {
                let _ = rustix::fs::unlinkat(work.fd(), staged.as_str(), AtFlags::empty());
                self.heal_manifest(manifest)?;
                Ok(false)
            }
            Err(Errno::INVAL | Errno::NOSYS) => {
                match rustix::fs::linkat(
                    work.fd(),
                    staged.as_str(),
                    &manifests,
                    rel.as_str(),
                    AtFlags::empty(),
                ) {
                    Ok(()) | Err(Errno::EXIST) => Ok(true),
                    Err(e) => Err(Error::io("publish a manifest", dest, e)),
                }
            }
            Err(e) => Err(Error::io("publish a manifest", dest, e)),
        }
    }

    /// Replaces a manifest file whose bytes no longer hash to its name with
    /// the right bytes (published beside it, then renamed over it).
    fn heal_manifest(&self, manifest: &Manifest) -> Result<()> {
        let path = self.manifest_path(&manifest.digest);
        if std::fs::read(&path).is_ok_and(|b| b == manifest.bytes) {
            return Ok(());
        }
        let tmp = path.with_extension("repair");
        let _ = std::fs::remove_file(&tmp);
        write_read_only(&tmp, &manifest.bytes)?;
        std::fs::rename(&tmp, &path).ctx("replace a damaged manifest", &path)
    }

    /// Removes a snapshot's manifest unless the catalogue records the
    /// snapshot, deciding under the catalogue's write lock so that no ingest
    /// records it in between. Returns whether it was removed.
    pub fn forget_unrecorded_manifest(&mut self, digest: &ManifestDigest) -> Result<bool> {
        let path = self.manifest_path(digest);
        self.catalogue_mut()
            .while_unrecorded(digest, || remove_file(&path))
            .map(|done| done.is_some())
    }

    /// Reads a snapshot's manifest file and checks that its bytes are the
    /// canonical manifest of that digest.
    pub fn read_manifest(&self, digest: &ManifestDigest) -> Result<Manifest> {
        let path = self.manifest_path(digest);
        let bytes = std::fs::read(&path).ctx("read a manifest", &path)?;
        let manifest = Manifest::parse(&bytes).map_err(|e| {
            Error::Integrity(format!("the manifest '{}' is damaged: {e}", path.display()))
        })?;
        if manifest.digest != *digest {
            return Err(Error::Integrity(format!(
                "the manifest '{}' hashes to {}, not to its name",
                path.display(),
                manifest.digest
            )));
        }
        Ok(manifest)
    }

    /// Every file under `manifests/`, sorted by path.
    pub fn list_manifests(&self) -> Result<Vec<FoundManifest>> {
        let root = self.root().join(MANIFESTS_DIR);
        let dir = match crate::fsutil::open_dir(self.dir(), MANIFESTS_DIR) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("open the manifests directory", root, e)),
        };
        let mut out = Vec::new();
        for shard in super::read_names(dir.as_fd(), &root)? {
            let shard_path = root.join(&shard);
            let Ok(fd) = crate::fsutil::open_dir(dir.as_fd(), shard.as_str()) else {
                out.push(FoundManifest {
                    path: shard_path,
                    digest: None,
                });
                continue;
            };
            for name in super::read_names(fd.as_fd(), &shard_path)? {
                let digest = name
                    .parse::<ManifestDigest>()
                    .ok()
                    .filter(|d| d.to_hex()[..2] == shard);
                out.push(FoundManifest {
                    path: shard_path.join(&name),
                    digest,
                });
            }
        }
        Ok(out)
    }

    /// Reads every manifest on disk and sorts it out against `recorded`
    /// (the snapshots the catalogue records) and the work directories:
    /// which keep objects live, which a killed operation left, which the
    /// catalogue lost. A manifest whose bytes no longer match its name still
    /// keeps what it names live, as far as it can be read: deleting is the
    /// one thing that cannot be undone.
    pub fn scan_manifests(&self, recorded: &HashSet<ManifestDigest>) -> Result<ManifestScan> {
        let mut in_flight = HashSet::new();
        let mut left_by_dead = HashSet::new();
        for w in super::objects::work_dirs(self)? {
            if let Some(d) = w.publishing_manifest() {
                if w.live {
                    in_flight.insert(d);
                } else {
                    left_by_dead.insert(d);
                }
            }
        }
        let mut scan = ManifestScan::default();
        let mut on_disk = HashSet::new();
        for found in self.list_manifests()? {
            let Some(digest) = found.digest else {
                scan.stray.push(found.path);
                continue;
            };
            on_disk.insert(digest);
            let known = recorded.contains(&digest) || in_flight.contains(&digest);
            if !known && left_by_dead.contains(&digest) {
                scan.abandoned.push((digest, found.path));
                continue;
            }
            if let Err(e) = self.read_manifest(&digest) {
                scan.damaged
                    .push((digest, found.path.clone(), crate::error::error_chain(&e)));
            }
            if let Ok(entries) = std::fs::read(&found.path)
                .map_err(|_| ())
                .and_then(|b| Manifest::parse_entries_leniently(&b).map_err(|_| ()))
            {
                scan.live_objects
                    .extend(entries.iter().filter(|e| e.size > 0).map(|e| e.key()));
            }
            if !known {
                scan.unrecorded.push((digest, found.path));
            }
        }
        let mut missing: Vec<ManifestDigest> = recorded
            .iter()
            .filter(|d| !on_disk.contains(d))
            .copied()
            .collect();
        missing.sort();
        scan.missing = missing;
        Ok(scan)
    }

    /// Whether `objects/` or `manifests/` holds anything: a store that has
    /// held snapshots, whatever its catalogue says.
    pub fn holds_data(&self) -> Result<bool> {
        holds_data(self.dir(), self.root())
    }
}

/// Removes a manifest file; one already gone is no error. Callers decide,
/// under the catalogue's write lock, that nothing records its snapshot.
pub fn remove_file(path: &std::path::Path) -> Result<()> {
    match rustix::fs::unlink(path) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(Error::io("remove a manifest", path, e)),
    }
}

/// Writes a new file at mode 0444, as objects are: a manifest never changes.
fn write_read_only(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .ctx("write a manifest", path)
}

/// Whether the store directory's `objects/` or `manifests/` holds any file.
pub(super) fn holds_data(
    store: std::os::fd::BorrowedFd<'_>,
    root: &std::path::Path,
) -> Result<bool> {
    for top in [super::OBJECTS_DIR, MANIFESTS_DIR] {
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
