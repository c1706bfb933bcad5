//! Manifests on disk: every snapshot's canonical manifest, as a file named by
//! its digest, beside the objects.
//!
//! ```text
//! STORE/manifests/
//! └── ab/
//!     └── <64 hex>     the canonical manifest bytes, whose SHA-256 is the
//!                      name, packed, or their delta against another manifest
//!                      here (`crate::catalogue::kept`), unfolded on every read
//! STORE/manifests-set-aside/
//! ├── <64 hex>.<n>     a manifest `cestore recover` refused to record
//! └── <64 hex>.<n>.why why it was refused, one line
//! ```
//!
//! The catalogue is an index; these files are the store's own record of what
//! it holds. A manifest is made durable (by the same `syncfs` as its objects)
//! before the catalogue records its snapshot, and removed only after the
//! catalogue has forgotten it. So gc, which marks live every object that a
//! manifest on disk names, never deletes an object of a snapshot that a lost
//! or damaged catalogue no longer lists, and `cestore recover` rebuilds the
//! catalogue's rows from these files.
//!
//! A manifest file that does not hash to its name is damaged: it is read
//! without being parsed ([`crate::profile::ce::manifest::object_ids_in`]), and every
//! object name left in it keeps that object live. A manifest `recover` will
//! not record (it breaks a rule, or its objects are missing) is moved to
//! `manifests-set-aside/`, never deleted: the objects it names stay live
//! there too, unless `gc --force` lets them go.

use std::collections::HashSet;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode};
use rustix::io::Errno;

use crate::catalogue::kept;
use crate::digest::ManifestDigest;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{publish_noreplace, Published};
use crate::profile::ce::manifest::Manifest;
use crate::profile::ce::manifest::{MAX_MANIFEST_BYTES, MAX_TREE_MANIFEST_BYTES};
use crate::store::core::objects::WorkDir;
use crate::store::{holds_data, ObjectKey, Store};

/// The manifests directory's name inside the store.
pub use crate::store::MANIFESTS_DIR;
/// Where `cestore recover` moves the manifests it refuses to record.
pub const SET_ASIDE_DIR: &str = "manifests-set-aside";
/// The suffix of the file beside a set-aside manifest that says why.
const WHY_SUFFIX: &str = ".why";

/// A manifest's path relative to `manifests/`: `ab/<64 hex>`.
pub fn rel_path(digest: &ManifestDigest) -> String {
    let hex = digest.to_hex();
    format!("{}/{hex}", &hex[..2])
}

/// The manifests on disk, sorted out (see [`Store::scan_manifests`]).
#[derive(Debug, Default)]
pub struct ManifestScan {
    /// Every object a manifest that stays names (a damaged one: every
    /// object name found in it, among the objects present).
    pub live_objects: HashSet<ObjectKey>,
    /// Every object a set-aside manifest names, among the objects present.
    pub set_aside_objects: HashSet<ObjectKey>,
    /// The manifests `cestore recover` set aside, and why.
    pub set_aside: Vec<(PathBuf, String)>,
    /// Manifests an operation that did not finish published and nothing
    /// records: garbage, with the objects only they name.
    pub abandoned: Vec<(ManifestDigest, PathBuf)>,
    /// Manifests nothing records or is recording: a row the catalogue lost,
    /// which `cestore recover` records again.
    pub unrecorded: Vec<(ManifestDigest, PathBuf)>,
    /// Manifests whose bytes are not what their name says, and why: gc
    /// refuses to sweep while there is one (see [`ManifestScan::unsafe_to_sweep`]).
    pub damaged: Vec<(ManifestDigest, PathBuf, String)>,
    /// Files whose names are not manifests' names.
    pub stray: Vec<PathBuf>,
    /// Recorded snapshots without a manifest file.
    pub missing: Vec<ManifestDigest>,
}

impl ManifestScan {
    /// What makes a sweep unsafe, as `(path, why)`: a damaged manifest may
    /// have named objects no byte of it names any more, and a recorded
    /// snapshot without its manifest file is known to the catalogue alone.
    pub fn unsafe_to_sweep(&self, store: &Store) -> Vec<(PathBuf, String)> {
        let damaged = self
            .damaged
            .iter()
            .map(|(_, path, why)| (path.clone(), format!("damaged: {why}")));
        let missing = self.missing.iter().map(|d| {
            (
                store.manifest_path(d),
                format!("missing: the recorded snapshot {d} has no manifest file"),
            )
        });
        damaged.chain(missing).collect()
    }
}

/// A manifest written into a work directory by [`Store::stage_manifest`],
/// not yet named in `manifests/`.
#[derive(Debug)]
pub struct StagedManifest {
    /// Its name in the work directory.
    name: String,
    /// The file, still open, to sync alone when nothing else is.
    file: std::fs::File,
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
    /// directory, never overwriting. Returns whether it was new. Its bytes
    /// are on the disk before it is named; the name is durable after the
    /// next [`Store::sync`].
    pub fn write_manifest(&self, work: &WorkDir, manifest: &Manifest) -> Result<bool> {
        self.write_manifest_as(work, manifest, None)
    }

    /// [`Store::write_manifest`], keeping the manifest as `delta` (its
    /// delta against a stored manifest, from [`Store::delta_for`]) when
    /// given.
    pub fn write_manifest_as(
        &self,
        work: &WorkDir,
        manifest: &Manifest,
        delta: Option<&(ManifestDigest, Vec<u8>)>,
    ) -> Result<bool> {
        let Some(staged) = self.stage_manifest(work, manifest, delta)? else {
            return Ok(false);
        };
        staged
            .file
            .sync_data()
            .ctx("write a manifest", work.path().join(&staged.name))?;
        self.publish_manifest(work, manifest, staged)
    }

    /// Writes a snapshot's manifest (as `delta` when given) into the work
    /// directory, to be named by [`Store::publish_manifest`] once its bytes
    /// are durable; `None` when the store holds it intact already.
    pub fn stage_manifest(
        &self,
        work: &WorkDir,
        manifest: &Manifest,
        delta: Option<&(ManifestDigest, Vec<u8>)>,
    ) -> Result<Option<StagedManifest>> {
        // A stored snapshot's manifest is usually there already, intact.
        if read_bounded(&self.manifest_path(&manifest.digest)).is_ok_and(|b| b == manifest.bytes) {
            return Ok(None);
        }
        let name = format!("manifest-{}", manifest.digest.to_hex());
        let kept = match delta {
            Some((_, delta)) => std::borrow::Cow::Borrowed(delta),
            None => std::borrow::Cow::Owned(kept::keep_whole(&manifest.bytes)),
        };
        let path = work.path().join(&name);
        let file = crate::fsutil::write_new(&path, &kept, 0o444).ctx("write a manifest", &path)?;
        Ok(Some(StagedManifest { name, file }))
    }

    /// Names a manifest [`Store::stage_manifest`] wrote, never
    /// overwriting; returns whether it was new. One found there already is
    /// healed ([`Store::heal_manifest`]) when damaged.
    pub fn publish_manifest(
        &self,
        work: &WorkDir,
        manifest: &Manifest,
        staged: StagedManifest,
    ) -> Result<bool> {
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
        let rel = rel_path(&manifest.digest);
        let manifests = crate::fsutil::open_dir(self.dir(), MANIFESTS_DIR).ctx(
            "open the manifests directory",
            self.root().join(MANIFESTS_DIR),
        )?;
        let name = staged.name.as_str();
        match publish_noreplace(work.fd(), name, manifests.as_fd(), rel.as_str()) {
            Ok(Published::Created) => Ok(true),
            Ok(Published::Existed) => {
                let _ = rustix::fs::unlinkat(work.fd(), name, AtFlags::empty());
                self.heal_manifest(manifest)?;
                Ok(false)
            }
            Err(e) => Err(Error::io("publish a manifest", dest, e)),
        }
    }

    /// The delta a new manifest of `name` is best kept as, against the
    /// manifest of that name and profile recorded last (catalogue/kept.rs),
    /// with that manifest's digest; `None` when there is none, its file is
    /// not on disk, or the delta would not take less than half the bytes.
    pub fn delta_for(&self, manifest: &Manifest, name: &str) -> Option<(ManifestDigest, Vec<u8>)> {
        // Tasks and environments are kept whole: `recover` reads their kind
        // from their first bytes, to record them after what they name.
        if manifest.bytes.len() < kept::MIN_KEPT_BYTES
            || matches!(manifest.profile(), "task" | "environment")
        {
            return None;
        }
        let cat = self.catalogue();
        let base = cat.delta_base(name, manifest.profile()).ok()??;
        // The chain on disk may be longer than the catalogue's (whose rows
        // `recover` may have kept whole): both stay within the bound.
        if base == manifest.digest
            || !self.manifest_path(&base).exists()
            || self.kept_depth(&base) >= kept::MAX_DEPTH as usize
        {
            return None;
        }
        let bytes = cat.manifest_bytes(&base).ok()?;
        if ManifestDigest::of(&bytes) != base {
            return None;
        }
        let delta = kept::delta(&base, &bytes, &manifest.bytes);
        (delta.len() * 2 < manifest.bytes.len()).then_some((base, delta))
    }

    /// How many deltas a manifest file is from a whole one, read from the
    /// headers of its chain on disk (a chain that circles or runs past any
    /// cestore writes counts as its bound).
    pub fn kept_depth(&self, digest: &ManifestDigest) -> usize {
        let mut depth = 0;
        let mut at = *digest;
        while let Some(base) = header_base(&self.manifest_path(&at)) {
            depth += 1;
            at = base;
            if depth > kept::MAX_UNFOLD {
                break;
            }
        }
        depth
    }

    /// The manifest file of `digest` as it keeps it, with its base, when it
    /// is a delta: what `recover` records in the catalogue as it is.
    pub fn kept_delta(&self, digest: &ManifestDigest) -> Option<(ManifestDigest, Vec<u8>)> {
        let raw = read_raw(&self.manifest_path(digest)).ok()?;
        match kept::form(&raw) {
            Ok(kept::Form::Delta { base, .. }) => Some((base, raw)),
            _ => None,
        }
    }

    /// Replaces a manifest file whose bytes no longer unfold to its canonical
    /// bytes with those bytes, whole (published beside it, then renamed over it).
    pub fn heal_manifest(&self, manifest: &Manifest) -> Result<()> {
        let path = self.manifest_path(&manifest.digest);
        if read_bounded(&path).is_ok_and(|b| b == manifest.bytes) {
            return Ok(());
        }
        let tmp = path.with_extension("repair");
        let _ = std::fs::remove_file(&tmp);
        // The bytes are on the disk before they replace the damaged file.
        write_read_only_synced(
            &tmp,
            &kept::keep_whole(&manifest.bytes),
            "flush a repaired manifest",
        )?;
        std::fs::rename(&tmp, &path).ctx("replace a damaged manifest", &path)?;
        // The new name is durable before the catalogue records anything.
        match path.parent() {
            Some(shard) => std::fs::File::open(shard)
                .and_then(|d| d.sync_all())
                .ctx("sync a manifest shard", shard),
            None => Ok(()),
        }
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
        read_manifest_file(&self.manifest_path(digest), digest)
    }

    /// Every stored snapshot `digest` names, directly or through another,
    /// each once, in dependency order ([`crate::profile::tree::stored::closure`]),
    /// read from the stored manifests.
    pub fn named_closure(&self, digest: &ManifestDigest) -> Result<Vec<ManifestDigest>> {
        crate::profile::tree::stored::closure(digest, &mut |d| {
            Ok(self
                .read_manifest(d)?
                .tree
                .map(|t| t.named())
                .unwrap_or_default())
        })
    }

    /// A recorded snapshot's entries, once they pass the reference's rules
    /// and bounds (the profile's [`crate::profile::Profile::check_entries`]): what a view
    /// or a bundle of it may hold. A snapshot that breaks them (recorded by
    /// an older cestore's `recover`, or by hand) is refused, exit 1.
    pub fn entries_to_hand_out(
        &self,
        digest: &ManifestDigest,
    ) -> Result<Vec<crate::profile::ce::manifest::Entry>> {
        let entries = self.catalogue().files(digest)?;
        if entries.is_empty() {
            // No rows at all: the snapshot was forgotten since its name was
            // resolved (an `rm` racing this command), not damaged.
            self.catalogue().snapshot(digest)?;
        }
        let breaks = |rule: String| crate::error::Damage::SnapshotBreaksRule {
            digest: *digest,
            rule,
        };
        if self.catalogue().snapshot(digest)?.profile != "ce" {
            // A tree kind: its manifest holds what the rows do not (its
            // directories and symlinks), and its own checks.
            let bytes = self.catalogue().manifest_bytes(digest)?;
            let manifest = Manifest::parse(&bytes).map_err(|e| breaks(e.to_string()))?;
            if let Some(stored) = &manifest.tree {
                crate::profile::tree::stored::check_alone(stored)
                    .map_err(|e| breaks(e.to_string()))?;
            }
            return Ok(entries);
        }
        crate::profile::Profile::check_entries(&crate::profile::ce::CE, &entries)
            .map_err(|rule| breaks(rule.to_string()))?;
        Ok(entries)
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
        for shard in crate::store::read_names(dir.as_fd(), &root)? {
            let shard_path = root.join(&shard);
            let Ok(fd) = crate::fsutil::open_dir(dir.as_fd(), shard.as_str()) else {
                out.push(FoundManifest {
                    path: shard_path,
                    digest: None,
                });
                continue;
            };
            for name in crate::store::read_names(fd.as_fd(), &shard_path)? {
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
    /// keeps live every object name found in it (among `present`, the
    /// objects on disk), and so does a set-aside manifest: deleting is the
    /// one thing that cannot be undone.
    pub fn scan_manifests(
        &self,
        recorded: &HashSet<ManifestDigest>,
        present: &HashSet<ObjectKey>,
    ) -> Result<ManifestScan> {
        let mut in_flight = HashSet::new();
        let mut left_by_dead = HashSet::new();
        for w in crate::store::core::objects::work_dirs(self)? {
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
        let (named, stray): (Vec<_>, Vec<_>) = self
            .list_manifests()?
            .into_iter()
            .partition(|f| f.digest.is_some());
        scan.stray.extend(stray.into_iter().map(|f| f.path));
        let mut unfolder = Unfolder::new(named);
        while let Some((found, digest, read)) = unfolder.next() {
            on_disk.insert(digest);
            let known = recorded.contains(&digest) || in_flight.contains(&digest);
            // A manifest another file is kept against stays, whoever left it.
            if !known && left_by_dead.contains(&digest) && !unfolder.is_base(&digest) {
                scan.abandoned.push((digest, found.path));
                continue;
            }
            match read {
                ManifestFile::Sound(manifest) => scan.live_objects.extend(
                    manifest
                        .entries
                        .iter()
                        .filter(|e| e.size > 0)
                        .map(|e| e.key()),
                ),
                ManifestFile::Damaged(d) => {
                    let (e, bytes) = *d;
                    scan.damaged
                        .push((digest, found.path.clone(), crate::error::error_chain(&e)));
                    mark_named(&bytes, present, &mut scan.live_objects);
                }
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
        let manifests = self.root().join(MANIFESTS_DIR);
        for (path, why) in self.list_set_aside()? {
            match read_bounded_in(&path, &manifests) {
                Ok(bytes) => mark_named(&bytes, present, &mut scan.set_aside_objects),
                // A delta that no longer unfolds names nothing readable: what
                // it named may be anywhere, so no sweep while it stays.
                Err(e) if header_base(&path).is_some() => {
                    if let Some(d) = set_aside_digest(&path) {
                        scan.damaged
                            .push((d, path.clone(), crate::error::error_chain(&e)));
                    }
                }
                Err(_) => {}
            }
            scan.set_aside.push((path, why));
        }
        Ok(scan)
    }

    /// The manifests under `manifests-set-aside/`, sorted by path, each with
    /// what its `.why` file says.
    pub fn list_set_aside(&self) -> Result<Vec<(PathBuf, String)>> {
        let root = self.root().join(SET_ASIDE_DIR);
        let dir = match crate::fsutil::open_dir(self.dir(), SET_ASIDE_DIR) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("open the set-aside manifests", root, e)),
        };
        let mut out = Vec::new();
        for name in crate::store::read_names(dir.as_fd(), &root)? {
            if name.ends_with(WHY_SUFFIX) {
                continue;
            }
            let why = std::fs::read(root.join(format!("{name}{WHY_SUFFIX}")))
                .map(|b| {
                    let cut = b.len().min(4096);
                    String::from_utf8_lossy(&b[..cut]).trim_end().to_string()
                })
                .unwrap_or_else(|_| "the reason was not kept".into());
            out.push((root.join(name), why));
        }
        Ok(out)
    }

    /// Moves the manifest file of `digest` to `manifests-set-aside/`, beside
    /// a file that says `why`, never overwriting. The move is durable after
    /// the next [`Store::sync`]. Returns the new path.
    pub fn set_aside_manifest(&self, digest: &ManifestDigest, why: &str) -> Result<PathBuf> {
        let from = self.manifest_path(digest);
        let root = self.root().join(SET_ASIDE_DIR);
        match rustix::fs::mkdirat(self.dir(), SET_ASIDE_DIR, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(Error::io("create the set-aside manifests", root, e)),
        }
        let dir = crate::fsutil::open_dir(self.dir(), SET_ASIDE_DIR)
            .ctx("open the set-aside manifests", &root)?;
        let manifests = crate::fsutil::open_dir(self.dir(), MANIFESTS_DIR).ctx(
            "open the manifests directory",
            self.root().join(MANIFESTS_DIR),
        )?;
        let hex = digest.to_hex();
        // A delta is set aside whole when it unfolds, so that what it names
        // stays readable whatever becomes of its base.
        let whole = match header_base(&from) {
            Some(_) => read_bounded(&from)
                .ok()
                .filter(|b| ManifestDigest::of(b) == *digest),
            None => None,
        };
        for n in 1u32.. {
            let name = format!("{hex}.{n}");
            let why_path = root.join(format!("{name}{WHY_SUFFIX}"));
            if rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok() {
                continue;
            }
            // The reason first: a crash in between leaves a reason without
            // its manifest, never a manifest lost.
            let _ = rustix::fs::unlinkat(
                &dir,
                format!("{name}{WHY_SUFFIX}").as_str(),
                AtFlags::empty(),
            );
            write_read_only(&why_path, format!("{why}\n").as_bytes())?;
            if let Some(bytes) = &whole {
                let to = root.join(&name);
                write_read_only_synced(&to, bytes, "flush a manifest set aside")?;
                remove_file(&from)?;
                return Ok(to);
            }
            match publish_noreplace(
                manifests.as_fd(),
                rel_path(digest).as_str(),
                dir.as_fd(),
                name.as_str(),
            ) {
                Ok(Published::Created) => return Ok(root.join(name)),
                Ok(Published::Existed) => continue,
                Err(e) => return Err(Error::io("set a manifest aside", &from, e)),
            }
        }
        Err(crate::error::Damage::NoNameToSetAside { path: from }.into())
    }

    /// Whether `objects/` or `manifests/` holds anything: a store that has
    /// held snapshots, whatever its catalogue says.
    pub fn holds_data(&self) -> Result<bool> {
        holds_data(self.dir(), self.root())
    }
}

/// Reads the manifest file at `path` and checks that its bytes are the
/// canonical manifest of `digest`.
pub fn read_manifest_file(path: &Path, digest: &ManifestDigest) -> Result<Manifest> {
    match read_checked(path, digest) {
        ManifestFile::Sound(m) => Ok(*m),
        ManifestFile::Damaged(d) => Err(d.0),
    }
}

/// Reads the canonical bytes a manifest file under `manifests/ab/` keeps
/// ([`read_bounded_in`]).
fn read_bounded(path: &Path) -> Result<Vec<u8>> {
    read_bounded_in(path, path.parent().and_then(Path::parent).unwrap_or(path))
}

/// Reads the canonical bytes a manifest file keeps ([`read_raw`]), a delta
/// unfolded through the files of its bases in `manifests` (the store's
/// `manifests/`; catalogue/kept.rs); what comes out is checked by the
/// caller. A chain read while an `rm` rewrites part of it whole may find a
/// base gone: it is read once more before it is called damaged.
fn read_bounded_in(path: &Path, manifests: &Path) -> Result<Vec<u8>> {
    unfold_file(path, manifests).or_else(|_| unfold_file(path, manifests))
}

fn unfold_file(path: &Path, manifests: &Path) -> Result<Vec<u8>> {
    let raw = read_raw(path)?;
    if !raw.starts_with(kept::KEPT_PREFIX) {
        return Ok(raw);
    }
    kept::unfold(raw, MAX_TREE_MANIFEST_BYTES, |base| {
        read_raw(&base_file(manifests, base))
    })
    .map_err(|e| Error::DamagedManifest {
        path: path.to_path_buf(),
        problem: match e {
            kept::Unfold::Kept(why) => format!("is damaged: {why}"),
            kept::Unfold::Fetch(e) => format!(
                "is damaged: a manifest it is kept against cannot be read: {}",
                crate::error::error_chain(&e)
            ),
        },
    })
}

/// The file of the manifest a delta is kept against: in `manifests`, or,
/// when it is not there, set aside beside it (`manifests-set-aside/<hex>.<n>`).
fn base_file(manifests: &Path, base: &ManifestDigest) -> PathBuf {
    let beside = manifests.join(rel_path(base));
    if beside.exists() {
        return beside;
    }
    let aside = manifests
        .parent()
        .map(|root| root.join(SET_ASIDE_DIR))
        .unwrap_or_default();
    let mut found: Vec<PathBuf> = std::fs::read_dir(&aside)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| set_aside_digest(p) == Some(*base))
        .collect();
    found.sort();
    found.into_iter().next().unwrap_or(beside)
}

/// The digest a set-aside manifest's name (`<64 hex>.<n>`) claims; `None`
/// for its `.why` file and any other name.
fn set_aside_digest(path: &Path) -> Option<ManifestDigest> {
    path.file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.ends_with(WHY_SUFFIX))
        .and_then(|n| n.split_once('.'))
        .and_then(|(hex, _)| hex.parse().ok())
}

/// Reads at most one byte more than the longest manifest of its kind from
/// `path` (a CE manifest's bound, or a tree kind's, read from its first
/// bytes), as the file holds it.
fn read_raw(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_TREE_MANIFEST_BYTES + 1).read_to_end(&mut bytes))
        .ctx("read a manifest", path)?;
    let cut = (MAX_MANIFEST_BYTES + 1) as usize;
    if !bytes.starts_with(kept::KEPT_PREFIX)
        && crate::profile::tree::stored::Kind::of(&bytes) == crate::profile::tree::stored::Kind::Ce
        && bytes.len() > cut
    {
        // As a CE manifest file was always read: cut one byte past its bound.
        bytes.truncate(cut);
    }
    Ok(bytes)
}

/// Rewrites whole, each by a rename over it, every manifest file kept as a
/// delta against `digest`'s, under `manifests/` and set aside, and makes
/// them durable, before that file goes (`rm`, an ingest taken back): each
/// still unfolds without it. Each whole file is written in `work` and
/// flushed before its rename, so a full disk or a kill leaves the old file
/// in place. A file that cannot be read (rather than one read and found
/// damaged) stops the forgetting.
pub fn keep_dependents_whole(
    manifests: &Path,
    digest: &ManifestDigest,
    work: &WorkDir,
) -> Result<()> {
    let mut files: Vec<(PathBuf, ManifestDigest)> = Vec::new();
    for shard in std::fs::read_dir(manifests).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(shard.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = file.path();
            let named = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse::<ManifestDigest>().ok());
            files.extend(named.map(|d| (path, d)));
        }
    }
    let aside = manifests.parent().map(|root| root.join(SET_ASIDE_DIR));
    for file in aside.iter().flat_map(std::fs::read_dir).flatten().flatten() {
        let path = file.path();
        files.extend(set_aside_digest(&path).map(|d| (path, d)));
    }
    let mut rewrote = false;
    for (path, named) in files {
        if header_base(&path) != Some(*digest) {
            continue;
        }
        let bytes = match read_bounded_in(&path, manifests) {
            Ok(b) if ManifestDigest::of(&b) == named => b,
            // Damaged already: left as it is, for verify to report.
            Ok(_) | Err(Error::DamagedManifest { .. }) => continue,
            Err(e) => return Err(e),
        };
        let staged = work.path().join(format!("whole-{}", named.to_hex()));
        let _ = std::fs::remove_file(&staged);
        write_read_only_synced(
            &staged,
            &kept::keep_whole(&bytes),
            "flush a manifest kept whole",
        )?;
        std::fs::rename(&staged, &path).ctx("keep a manifest whole", &path)?;
        rewrote = true;
    }
    if rewrote {
        rustix::fs::syncfs(work.fd()).ctx("make the manifests durable", manifests)?;
    }
    Ok(())
}

/// What a manifest file holds: the canonical manifest of its name, or, when
/// damaged, why and the bytes read (none when it could not be read), for
/// [`mark_named`].
enum ManifestFile {
    Sound(Box<Manifest>),
    Damaged(Box<(Error, Vec<u8>)>),
}

/// Reads a manifest file and checks it against the digest of its name.
fn read_checked(path: &Path, digest: &ManifestDigest) -> ManifestFile {
    check(path, digest, read_bounded(path))
}

/// Checks the canonical bytes read from a manifest file against the digest
/// of its name.
fn check(path: &Path, digest: &ManifestDigest, read: Result<Vec<u8>>) -> ManifestFile {
    let damaged = |e: Error, bytes: Vec<u8>| ManifestFile::Damaged(Box::new((e, bytes)));
    let bytes = match read {
        Ok(b) => b,
        Err(e) => return damaged(e, Vec::new()),
    };
    if crate::profile::ce::manifest::over_bound(&bytes) {
        let tree = crate::profile::tree::stored::Kind::of(&bytes)
            != crate::profile::tree::stored::Kind::Ce;
        let e = Error::DamagedManifest {
            path: path.to_path_buf(),
            problem: format!(
                "is damaged: it is longer than any manifest ({} bytes)",
                if tree {
                    crate::profile::ce::manifest::MAX_TREE_MANIFEST_BYTES
                } else {
                    crate::profile::ce::manifest::MAX_MANIFEST_BYTES
                }
            ),
        };
        return damaged(e, bytes);
    }
    let manifest = match Manifest::parse(&bytes) {
        Ok(m) => m,
        Err(e) => {
            let e = Error::DamagedManifest {
                path: path.to_path_buf(),
                problem: format!("is damaged: {e}"),
            };
            return damaged(e, bytes);
        }
    };
    if manifest.digest != *digest {
        let e = Error::DamagedManifest {
            path: path.to_path_buf(),
            problem: format!("hashes to {}, not to its name", manifest.digest),
        };
        return damaged(e, bytes);
    }
    ManifestFile::Sound(Box::new(manifest))
}

/// Every manifest file of a scan read once, bases before what is kept
/// against them, each delta unfolded against its base's bytes, kept only
/// while a delta still needs them: a chain of deltas costs one unfolding
/// a file, not one a file and base.
struct Unfolder {
    /// The files still to read, in reverse: the next is last.
    order: Vec<FoundManifest>,
    /// Each file's base, as its header names it.
    bases: std::collections::HashMap<ManifestDigest, ManifestDigest>,
    /// The sound canonical bytes of files with deltas still to read, and
    /// how many.
    kept: std::collections::HashMap<ManifestDigest, (Vec<u8>, usize)>,
    /// How many files name each as their base.
    children: std::collections::HashMap<ManifestDigest, usize>,
}

impl Unfolder {
    /// Orders the files whose names are digests (others are skipped).
    fn new(found: Vec<FoundManifest>) -> Unfolder {
        let mut bases = std::collections::HashMap::new();
        for f in &found {
            if let (Some(d), Some(b)) = (f.digest, header_base(&f.path)) {
                bases.insert(d, b);
            }
        }
        let mut children = std::collections::HashMap::new();
        for b in bases.values() {
            *children.entry(*b).or_insert(0usize) += 1;
        }
        // Depth first from each whole file (or one whose base is not
        // here), bases before what is kept against them, so that a base's
        // bytes are kept only while its chain is read; a file on a circle
        // comes last, read as it is (and found damaged).
        let mut below: std::collections::HashMap<ManifestDigest, Vec<usize>> =
            std::collections::HashMap::new();
        let here: HashSet<ManifestDigest> = found.iter().filter_map(|f| f.digest).collect();
        let mut roots = Vec::new();
        for (i, f) in found.iter().enumerate() {
            match f
                .digest
                .and_then(|d| bases.get(&d))
                .filter(|b| here.contains(b))
            {
                Some(base) => below.entry(*base).or_default().push(i),
                None => roots.push(i),
            }
        }
        let mut seen = vec![false; found.len()];
        let mut preorder = Vec::with_capacity(found.len());
        let mut stack: Vec<usize> = roots.into_iter().rev().collect();
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            preorder.push(i);
            if let Some(kids) = found[i].digest.and_then(|d| below.get(&d)) {
                stack.extend(kids.iter().rev());
            }
        }
        preorder.extend((0..found.len()).filter(|i| !seen[*i]));
        let mut slots: Vec<Option<FoundManifest>> = found.into_iter().map(Some).collect();
        let order: Vec<FoundManifest> = preorder
            .into_iter()
            .rev()
            .filter_map(|i| slots[i].take())
            .collect();
        Unfolder {
            order,
            bases,
            kept: std::collections::HashMap::new(),
            children,
        }
    }

    /// Whether some manifest file is kept as a delta against `digest`'s.
    fn is_base(&self, digest: &ManifestDigest) -> bool {
        self.children.contains_key(digest)
    }

    /// The next file, its digest and what it holds.
    fn next(&mut self) -> Option<(FoundManifest, ManifestDigest, ManifestFile)> {
        let (found, digest) = loop {
            let found = self.order.pop()?;
            if let Some(digest) = found.digest {
                break (found, digest);
            }
        };
        let from_base = self.bases.get(&digest).and_then(|base| {
            let (bytes, left) = self.kept.get_mut(base)?;
            *left -= 1;
            let raw = read_raw(&found.path);
            let unfolded = raw.and_then(|raw| match kept::form(&raw) {
                Ok(kept::Form::Delta { frame, .. }) => {
                    kept::apply(base, bytes, frame, MAX_TREE_MANIFEST_BYTES).map_err(|why| {
                        Error::DamagedManifest {
                            path: found.path.clone(),
                            problem: format!("is damaged: {why}"),
                        }
                    })
                }
                _ => read_bounded(&found.path),
            });
            if *left == 0 {
                self.kept.remove(base);
            }
            Some(unfolded)
        });
        let read = check(
            &found.path,
            &digest,
            from_base.unwrap_or_else(|| read_bounded(&found.path)),
        );
        if let (ManifestFile::Sound(m), Some(&n)) = (&read, self.children.get(&digest)) {
            self.kept.insert(digest, (m.bytes.clone(), n));
        }
        Some((found, digest, read))
    }
}

/// The base a manifest file's header names, when it is a delta.
fn header_base(path: &Path) -> Option<ManifestDigest> {
    match kept::form(&crate::fsutil::read_head(
        path,
        kept::DELTA_MAGIC.len() + 65,
    )) {
        Ok(kept::Form::Delta { base, .. }) => Some(base),
        _ => None,
    }
}

/// Adds to `live` every object among `present` that `bytes` name, read
/// without parsing them: executable or not, since the name alone does not
/// say.
fn mark_named(bytes: &[u8], present: &HashSet<ObjectKey>, live: &mut HashSet<ObjectKey>) {
    for id in crate::profile::ce::manifest::object_ids_in(bytes) {
        for executable in [false, true] {
            let key = ObjectKey { id, executable };
            if present.contains(&key) {
                live.insert(key);
            }
        }
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
    crate::fsutil::write_new_read_only(path, bytes).ctx("write a manifest", path)
}

/// Writes a new read-only manifest file as [`write_read_only`] does and
/// syncs it, so that its bytes are on the disk before a rename names it;
/// `flush` is the sync's operation in an error.
fn write_read_only_synced(path: &std::path::Path, bytes: &[u8], flush: &'static str) -> Result<()> {
    let file = crate::fsutil::write_new(path, bytes, 0o444).ctx("write a manifest", path)?;
    file.sync_all().ctx(flush, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ce::manifest::Entry;
    use crate::store::testutil::{mode, names, open};
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn entry(path: &str, data: &[u8]) -> Entry {
        Entry::of(path, data, false)
    }

    fn manifest(tag: &str) -> Manifest {
        Manifest::new(vec![
            entry(&format!("{tag}.md"), tag.as_bytes()),
            entry("empty", b""),
        ])
    }

    /// Overwrites a read-only file, whoever runs the test.
    fn overwrite(path: &Path, bytes: &[u8]) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(path, bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444)).unwrap();
    }

    /// Leaves a work directory as a killed operation would: unlocked, with
    /// a publishing list naming `digest`.
    fn dead_work_dir(store: &Store, name: &str, digest: &ManifestDigest) {
        let dir = store.root().join(crate::store::TMP_DIR).join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(
            dir.join(crate::store::core::objects::PUBLISHING_LIST),
            format!("manifest {digest}\n"),
        )
        .unwrap();
    }

    #[test]
    fn a_written_manifest_reads_back_read_only_and_is_written_once() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let work = store.work_dir("test").unwrap();
        let m = manifest("a");
        let path = store.manifest_path(&m.digest);
        let hex = m.digest.to_hex();
        assert_eq!(
            path,
            store.root().join("manifests").join(&hex[..2]).join(&hex)
        );
        assert!(store.write_manifest(&work, &m).unwrap());
        assert_eq!(store.read_manifest(&m.digest).unwrap(), m);
        assert_eq!(std::fs::read(&path).unwrap(), m.bytes);
        assert_eq!(mode(&path), 0o444);
        assert!(names(work.path()).is_empty(), "the staged copy moved");

        assert!(!store.write_manifest(&work, &m).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), m.bytes);
        assert!(names(work.path()).is_empty(), "the second copy is dropped");
        assert!(store.holds_data().unwrap());
    }

    #[test]
    fn reading_a_missing_or_wrong_manifest_fails() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let work = store.work_dir("test").unwrap();
        let m = manifest("a");
        assert!(matches!(
            store.read_manifest(&m.digest),
            Err(Error::Io { .. })
        ));
        store.write_manifest(&work, &m).unwrap();
        let other = manifest("b");
        overwrite(&store.manifest_path(&m.digest), &other.bytes);
        let err = store.read_manifest(&m.digest).unwrap_err();
        assert!(
            matches!(err, Error::DamagedManifest { ref problem, .. } if problem.contains("not to its name")),
            "{err}"
        );
        overwrite(&store.manifest_path(&m.digest), b"{}");
        let err = store.read_manifest(&m.digest).unwrap_err();
        assert!(
            matches!(err, Error::DamagedManifest { ref problem, .. } if problem.starts_with("is damaged")),
            "{err}"
        );
    }

    #[test]
    fn writing_a_manifest_over_a_damaged_one_heals_it() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let work = store.work_dir("test").unwrap();
        let m = manifest("a");
        store.write_manifest(&work, &m).unwrap();
        let path = store.manifest_path(&m.digest);
        overwrite(&path, b"damaged");
        assert!(store.read_manifest(&m.digest).is_err());

        assert!(!store.write_manifest(&work, &m).unwrap());
        assert_eq!(store.read_manifest(&m.digest).unwrap(), m);
        assert_eq!(mode(&path), 0o444);
        assert_eq!(names(path.parent().unwrap()), [m.digest.to_hex()]);
        assert!(names(work.path()).is_empty());
    }

    #[test]
    fn a_scan_sorts_every_manifest_out() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let work = store.work_dir("test").unwrap();
        let [recorded, unrecorded, abandoned, in_flight, damaged, missing] = [
            "recorded",
            "unrecorded",
            "abandoned",
            "in-flight",
            "damaged",
            "missing",
        ]
        .map(manifest);
        for m in [&recorded, &unrecorded, &abandoned, &in_flight, &damaged] {
            assert!(store.write_manifest(&work, m).unwrap());
        }
        dead_work_dir(&store, "ingest-dead-1", &abandoned.digest);
        let live = store.work_dir("ingest").unwrap();
        live.note_publishing(std::iter::empty(), &in_flight.digest)
            .unwrap();
        // Still a manifest's entries, but not in canonical form.
        let spaced = String::from_utf8(damaged.bytes.clone())
            .unwrap()
            .replacen(':', ": ", 1);
        overwrite(&store.manifest_path(&damaged.digest), spaced.as_bytes());
        let root = store.root().join(MANIFESTS_DIR);
        let stray_name = root.join(&recorded.digest.to_hex()[..2]).join("notes.txt");
        std::fs::write(&stray_name, "?").unwrap();
        let wrong_shard = if recorded.digest.to_hex().starts_with("00") {
            "01"
        } else {
            "00"
        };
        std::fs::create_dir_all(root.join(wrong_shard)).unwrap();
        let misplaced = root.join(wrong_shard).join(recorded.digest.to_hex());
        std::fs::write(&misplaced, &recorded.bytes).unwrap();
        let not_shard = root.join("zz");
        std::fs::write(&not_shard, "?").unwrap();

        let known: HashSet<ManifestDigest> = [recorded.digest, damaged.digest, missing.digest]
            .into_iter()
            .collect();
        let present: HashSet<ObjectKey> =
            [&recorded, &unrecorded, &abandoned, &in_flight, &damaged]
                .iter()
                .flat_map(|m| m.entries.iter().filter(|e| e.size > 0).map(Entry::key))
                .collect();
        let scan = store.scan_manifests(&known, &present).unwrap();

        let digests = |v: &[(ManifestDigest, PathBuf)]| -> Vec<ManifestDigest> {
            v.iter().map(|(d, _)| *d).collect()
        };
        assert_eq!(digests(&scan.unrecorded), [unrecorded.digest]);
        assert_eq!(
            scan.unrecorded[0].1,
            store.manifest_path(&unrecorded.digest)
        );
        assert_eq!(digests(&scan.abandoned), [abandoned.digest]);
        assert_eq!(scan.abandoned[0].1, store.manifest_path(&abandoned.digest));
        assert_eq!(scan.damaged.len(), 1, "{:?}", scan.damaged);
        assert_eq!(scan.damaged[0].0, damaged.digest);
        assert!(
            scan.damaged[0].2.contains("damaged"),
            "{}",
            scan.damaged[0].2
        );
        let mut stray = scan.stray.clone();
        stray.sort();
        let mut want = vec![stray_name, misplaced, not_shard];
        want.sort();
        assert_eq!(stray, want);
        assert_eq!(scan.missing, [missing.digest]);

        let key = |m: &Manifest| m.entries[0].key();
        for m in [&recorded, &unrecorded, &in_flight, &damaged] {
            assert!(scan.live_objects.contains(&key(m)), "{}", m.entries[0].path);
        }
        assert!(!scan.live_objects.contains(&key(&abandoned)));
        assert!(!scan.live_objects.contains(&key(&missing)));
        assert!(
            !scan.live_objects.contains(&recorded.entries[1].key()),
            "an empty file uses no object"
        );
        assert_eq!(scan.live_objects.len(), 4);
        drop(live);

        // A work directory removed as its operation ends no longer vouches
        // for the manifest it was publishing.
        let scan = store.scan_manifests(&known, &present).unwrap();
        let mut now = digests(&scan.unrecorded);
        now.sort();
        let mut want = vec![unrecorded.digest, in_flight.digest];
        want.sort();
        assert_eq!(now, want);
    }

    #[test]
    fn only_an_unrecorded_manifest_is_forgotten() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = open(tmp.path());
        let work = store.work_dir("test").unwrap();
        let m = manifest("a");
        store.write_manifest(&work, &m).unwrap();
        crate::store::testutil::record(&mut store, &m);
        assert!(!store.forget_unrecorded_manifest(&m.digest).unwrap());
        assert!(store.manifest_path(&m.digest).exists());

        let u = manifest("b");
        store.write_manifest(&work, &u).unwrap();
        assert!(store.forget_unrecorded_manifest(&u.digest).unwrap());
        assert!(!store.manifest_path(&u.digest).exists());
    }

    #[test]
    fn remove_file_tolerates_a_missing_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("m");
        std::fs::write(&path, "x").unwrap();
        remove_file(&path).unwrap();
        assert!(!path.exists());
        remove_file(&path).unwrap();
        let err = remove_file(tmp.path()).unwrap_err();
        assert!(matches!(err, Error::Io { ref path, .. } if path == tmp.path()));
    }

    #[test]
    fn an_empty_store_holds_no_data() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        assert!(!store.holds_data().unwrap());
        assert!(store.list_manifests().unwrap().is_empty());
    }
}
