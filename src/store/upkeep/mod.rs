//! Upkeep: one scan of the store for everything gc may remove, as a typed
//! [`Plan`] that `verify` reports and `gc` applies.
//!
//! ```text
//!            scan (shared lock: verify, gc --dry-run; exclusive: gc)
//!   objects/ ──┐
//!   tmp/     ──┤     ┌─ verify: one `garbage` finding per item
//!   views/   ──┼──► Plan ─┼─ gc --dry-run: the same items, as "would remove"
//!   manifests/─┤     └─ gc: applies every item, reporting each failure
//!   catalogue ─┘
//! ```
//!
//! Because both commands read the same plan, what `verify` calls garbage is
//! exactly what `gc` removes, and nothing else.
//!
//! Live are the objects the catalogue's rows name, those every manifest file
//! names (a damaged one: every object name left in its bytes), those
//! operations in flight publish, and those set-aside manifests name (unless
//! forced). While a manifest is damaged or a recorded snapshot lacks its
//! manifest file, the plan is unsafe and [`Plan::apply`] refuses it unless
//! forced: what such a manifest named is no longer known.
//!
//! The upkeep room: `mod.rs` the plan, `gc.rs` rm and gc applying it,
//! `verify.rs` re-hashing objects, checking rows, manifests and attestations,
//! `recover.rs` the catalogue rebuilt from the manifests. It is the top room:
//! it may use views, ingest, trust, the core and the [`Store`] handle.

pub mod gc;
pub mod recover;
pub mod verify;

use std::collections::HashSet;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;

use crate::digest::ManifestDigest;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{read_names, remove_tree_at};
use crate::store::core::beside::{self, Kind};
use crate::store::core::manifests::ManifestScan;
use crate::store::core::objects::{work_dirs, FoundWorkDir};
use crate::store::{ObjectKey, Store, OBJECTS_DIR, TMP_DIR, VIEWS_DIR};

/// One thing gc removes (or forgets), and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A file under `objects/` that no snapshot and no operation in flight
    /// uses (or that is not an object's name at all).
    Object {
        /// Its path.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// Its key, when its name is an object's.
        key: Option<ObjectKey>,
    },
    /// A work directory whose operation died.
    WorkDir {
        /// Its name under `tmp/`.
        name: String,
    },
    /// A half-built view a dead checkout or `path` left, named by its marker.
    HalfBuiltView {
        /// Its path.
        path: PathBuf,
    },
    /// A manifest a dead operation published and nothing records.
    Manifest {
        /// Its path.
        path: PathBuf,
    },
    /// Something under `views/` that is not the directory of a recorded
    /// snapshot's shared view.
    SharedView {
        /// Its name under `views/`.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The spare views of a snapshot the catalogue does not record (or
    /// something under `spare/` that is not a snapshot's spares).
    Spare {
        /// Its name under `spare/`.
        name: String,
    },
    /// The record of a view whose directory is gone.
    ViewRecord {
        /// The view's path.
        path: String,
    },
    /// The source records or attestations of a snapshot that is neither
    /// recorded nor has a manifest on disk (or something under `sources/` or
    /// `attestations/` that is not a snapshot's directory).
    Beside {
        /// Which files.
        kind: Kind,
        /// Its path.
        path: PathBuf,
    },
}

impl Item {
    /// The finding's kind, as `verify` names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Item::Object { .. } => "orphan-object",
            Item::WorkDir { .. } | Item::HalfBuiltView { .. } => "leftover-temporary",
            Item::Manifest { .. } => "leftover-manifest",
            Item::SharedView { .. } => "orphan-shared-view",
            Item::Spare { .. } => "orphan-spare",
            Item::ViewRecord { .. } => "stale-view-record",
            Item::Beside {
                kind: Kind::Sources,
                ..
            } => "orphan-source-records",
            Item::Beside {
                kind: Kind::Attestations,
                ..
            } => "orphan-attestations",
        }
    }

    /// The path the finding concerns.
    pub fn path(&self, store: &Store) -> PathBuf {
        match self {
            Item::Object { path, .. }
            | Item::HalfBuiltView { path }
            | Item::Manifest { path }
            | Item::Beside { path, .. } => path.clone(),
            Item::WorkDir { name } => store.root().join(TMP_DIR).join(name),
            Item::SharedView { name, .. } => store.views_dir().join(name),
            Item::Spare { name } => crate::store::views::spares::path(store, name),
            Item::ViewRecord { path } => PathBuf::from(path),
        }
    }

    /// What is wrong, in words.
    pub fn detail(&self) -> String {
        match self {
            Item::Object { key: Some(_), .. } => "no snapshot uses this object".into(),
            Item::Object { key: None, .. } => "not an object name".into(),
            Item::WorkDir { .. } => "left by an operation that did not finish".into(),
            Item::HalfBuiltView { .. } => {
                "a half-built view left by a checkout that did not finish".into()
            }
            Item::Manifest { .. } => {
                "published by an operation that did not finish, and never recorded".into()
            }
            Item::SharedView { why, .. } => (*why).into(),
            Item::Spare { .. } => {
                "spare views kept for a snapshot the catalogue no longer records".into()
            }
            Item::ViewRecord { .. } => {
                "the recorded view no longer exists; `cestore discard` or `cestore gc` forgets it"
                    .into()
            }
            Item::Beside { kind, .. } => kind.orphans().into(),
        }
    }
}

/// What one scan found: what gc removes, what it keeps, and what the
/// manifests on disk say.
#[derive(Debug)]
pub struct Plan {
    /// Everything gc removes or forgets, in the order it does so.
    pub items: Vec<Item>,
    /// Objects kept.
    pub objects_kept: u64,
    /// The manifests on disk, sorted out against the catalogue.
    pub manifests: ManifestScan,
    /// Why sweeping is unsafe, as `(path, why)`: damaged and missing
    /// manifests. Empty when it is safe.
    pub unsafe_because: Vec<(PathBuf, String)>,
    /// Whether the plan was made to be applied even so (`gc --force`): it
    /// then also lets go of the objects only set-aside manifests name.
    pub forced: bool,
}

/// Why gc would not sweep.
#[derive(Debug, thiserror::Error)]
#[error("gc would not sweep while {} (recovering the store mends what the catalogue still knows; a forced plan sweeps anyway)", describe(.0))]
pub struct Unsafe(pub Vec<(PathBuf, String)>);

fn describe(why: &[(PathBuf, String)]) -> String {
    why.iter()
        .map(|(path, why)| format!("'{}' is {why}", path.display()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What stands under `views/` that is not the directory of a recorded
/// snapshot's shared view (a view being built is left be: a marker under
/// `tmp/` names it).
fn stray_shared_views(store: &Store, recorded: &HashSet<ManifestDigest>) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    let views_path = store.views_dir();
    let views = crate::fsutil::open_dir(store.dir(), VIEWS_DIR)
        .ctx("open the views directory", &views_path)?;
    for name in read_names(views.as_fd(), &views_path)? {
        if is_temp_view(&name) {
            continue;
        }
        let known = name
            .parse::<ManifestDigest>()
            .is_ok_and(|d| recorded.contains(&d));
        let is_dir = rustix::fs::statat(&views, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory);
        let why = match (known, is_dir) {
            (true, true) => continue,
            (false, _) => "no snapshot in the catalogue has this shared view",
            (true, false) => "not a directory where a shared view belongs",
        };
        items.push(Item::SharedView { name, why });
    }
    Ok(items)
}

impl Plan {
    /// Scans the store. Objects are listed first, then what operations in
    /// flight publish, then the catalogue and the manifests: an object
    /// published meanwhile is found in one or the other. With `force`, the
    /// objects only set-aside manifests name are not kept.
    pub fn scan(store: &Store, force: bool) -> Result<Plan> {
        let listed = list_objects(store)?;
        let present: HashSet<ObjectKey> = listed.iter().filter_map(|(_, k)| *k).collect();
        let dirs = work_dirs(store)?;
        let in_flight: HashSet<ObjectKey> = dirs
            .iter()
            .filter(|w| w.live)
            .flat_map(FoundWorkDir::publishing)
            .collect();
        let cat = store.catalogue();
        let recorded: HashSet<ManifestDigest> = cat
            .snapshots(None, None)?
            .into_iter()
            .map(|s| s.digest)
            .collect();
        let mut live = cat.live_objects()?;
        let manifests = store.scan_manifests(&recorded, &present)?;
        live.extend(manifests.live_objects.iter().copied());
        if !force {
            live.extend(manifests.set_aside_objects.iter().copied());
        }
        let unsafe_because = manifests.unsafe_to_sweep(store);

        let mut items = Vec::new();
        // Abandoned manifests first: a crash later leaves objects nothing
        // names (garbage), never a manifest whose objects are gone.
        items.extend(
            manifests
                .abandoned
                .iter()
                .map(|(_, path)| Item::Manifest { path: path.clone() }),
        );
        let mut objects_kept = 0;
        for (path, key) in listed {
            if key.is_some_and(|k| live.contains(&k) || in_flight.contains(&k)) {
                objects_kept += 1;
                continue;
            }
            let size = rustix::fs::lstat(&path).map_or(0, |s| s.st_size as u64);
            items.push(Item::Object { path, size, key });
        }
        for w in dirs.into_iter().filter(|w| !w.live) {
            if let Some(path) = w.target().filter(|t| is_half_built_view(t)) {
                items.push(Item::HalfBuiltView { path });
            }
            items.push(Item::WorkDir { name: w.name });
        }
        items.extend(stray_shared_views(store, &recorded)?);
        for name in crate::store::views::spares::listed(store) {
            if !name
                .parse::<ManifestDigest>()
                .is_ok_and(|d| recorded.contains(&d))
            {
                items.push(Item::Spare { name });
            }
        }
        for v in cat.views(None)? {
            if rustix::fs::lstat(v.path.as_str()).is_err_and(|e| e == Errno::NOENT) {
                items.push(Item::ViewRecord { path: v.path });
            }
        }
        // Source records and attestations stay while `recover` may still
        // record their snapshot: it is recorded, or its manifest stays on disk.
        let abandoned: HashSet<ManifestDigest> =
            manifests.abandoned.iter().map(|(d, _)| *d).collect();
        for kind in Kind::ALL {
            for (digest, path) in beside::listed(store, kind)? {
                let kept = digest.is_some_and(|d| {
                    recorded.contains(&d)
                        || (!abandoned.contains(&d)
                            && rustix::fs::lstat(store.manifest_path(&d)).is_ok())
                });
                if !kept {
                    items.push(Item::Beside { kind, path });
                }
            }
        }
        Ok(Plan {
            items,
            objects_kept,
            manifests,
            unsafe_because,
            forced: force,
        })
    }

    /// Whether the plan may be applied: it is safe, or it was forced.
    pub fn refusal(&self) -> Option<Unsafe> {
        (!self.forced && !self.unsafe_because.is_empty())
            .then(|| Unsafe(self.unsafe_because.clone()))
    }

    /// Applies the plan, under the exclusive lock: removes or forgets every
    /// item, and fails on the first that cannot be. Refuses an unsafe plan
    /// that was not forced, changing nothing.
    pub fn apply(&self, store: &Store, mut progress: impl FnMut(u64)) -> Result<()> {
        if let Some(refused) = self.refusal() {
            // Callers read the refusal from `refusal()` before applying;
            // this only stops an unforced apply, with its words.
            return Err(Error::Conflict(refused.to_string()));
        }
        let tmp_path = store.root().join(TMP_DIR);
        let tmp = crate::fsutil::open_dir(store.dir(), TMP_DIR)
            .ctx("open the tmp directory", &tmp_path)?;
        let views_path = store.views_dir();
        let views = crate::fsutil::open_dir(store.dir(), VIEWS_DIR)
            .ctx("open the views directory", &views_path)?;
        for item in &self.items {
            match item {
                Item::Manifest { path } => crate::store::core::manifests::remove_file(path)?,
                Item::Object { path, size, .. } => {
                    match rustix::fs::unlink(path) {
                        Ok(()) | Err(Errno::NOENT) => {}
                        // A stray directory under objects/ is removed as a tree.
                        Err(Errno::ISDIR) => {
                            std::fs::remove_dir_all(path).ctx("remove a stray directory", path)?
                        }
                        Err(e) => return Err(Error::io("remove an object", path, e)),
                    }
                    progress(*size);
                }
                Item::HalfBuiltView { path } => remove_half_built_view(path)?,
                Item::WorkDir { name } => {
                    remove_tree_at(tmp.as_fd(), name)
                        .ctx("remove a temporary directory", tmp_path.join(name))?;
                }
                Item::SharedView { name, .. } => {
                    store
                        .catalogue()
                        .remove_view(&views_path.join(name).to_string_lossy())?;
                    remove_tree_at(views.as_fd(), name)
                        .ctx("remove a shared view", views_path.join(name))?;
                }
                Item::Spare { name } => {
                    let spares = crate::store::views::spares::path(store, "");
                    let fd = crate::fsutil::open_dir(
                        store.dir(),
                        crate::store::views::spares::SPARE_DIR,
                    )
                    .ctx("open the spares directory", &spares)?;
                    remove_tree_at(fd.as_fd(), name)
                        .ctx("remove spare views", spares.join(name))?;
                }
                Item::ViewRecord { path } => {
                    store.catalogue().remove_view(path)?;
                }
                Item::Beside { kind, path } => beside::remove_listed(*kind, path)?,
            }
        }
        Ok(())
    }
}

/// Every file under `objects/`, with its key when its name is one.
pub fn list_objects(store: &Store) -> Result<Vec<(PathBuf, Option<ObjectKey>)>> {
    let mut out = Vec::new();
    let root = store.root().join(OBJECTS_DIR);
    for shard in read_names(store.objects(), &root)? {
        let shard_path = root.join(&shard);
        let fd = match crate::fsutil::open_dir(store.objects(), shard.as_str()) {
            Ok(fd) => fd,
            Err(_) => {
                out.push((shard_path, None));
                continue;
            }
        };
        for name in read_names(fd.as_fd(), &shard_path)? {
            let key = ObjectKey::from_parts(&shard, &name);
            out.push((shard_path.join(&name), key));
        }
    }
    Ok(out)
}

/// Whether a name is that of a view still being built (see `view::temp_name`).
pub fn is_temp_view(name: &str) -> bool {
    name.starts_with('.') && name.contains(".cestore-tmp-")
}

/// Whether a marker's target is a half-built view still on disk, with a name
/// only checkout and `path` make.
fn is_half_built_view(target: &Path) -> bool {
    target
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_temp_view)
        && rustix::fs::lstat(target).is_ok()
}

/// Removes a half-built view named by a marker.
fn remove_half_built_view(target: &Path) -> Result<()> {
    crate::fsutil::remove_tree_path(target).ctx("remove a half-built view", target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::ViewRow;
    use crate::profile::ce::manifest::{Entry, Manifest};
    use crate::store::core::objects::WorkDir;
    use crate::store::testutil::record;
    use crate::store::LockMode;

    fn entry(path: &str, data: &[u8], executable: bool) -> Entry {
        Entry::of(path, data, executable)
    }

    /// Publishes each file's bytes as an object, and returns the manifest.
    fn publish(store: &Store, files: &[(&str, &[u8], bool)]) -> Manifest {
        let mut work = store.work_dir("put").unwrap();
        let mut entries = Vec::new();
        for (path, data, executable) in files {
            let e = entry(path, data, *executable);
            let staged = work.stage(&e.key(), data).unwrap();
            work.publish(store, &staged, &e.key()).unwrap();
            entries.push(e);
        }
        Manifest::new(entries)
    }

    fn write_manifest(store: &Store, m: &Manifest) {
        let work = store.work_dir("put").unwrap();
        assert!(store.write_manifest(&work, m).unwrap());
    }

    fn add_view(store: &mut Store, path: &Path, digest: ManifestDigest) {
        store
            .catalogue_mut()
            .add_view(&ViewRow {
                path: path.to_string_lossy().into_owned(),
                digest,
                kind: crate::catalogue::ViewKind::Checkout,
                method: "hardlink".into(),
                linked: 1,
                copied: 0,
                created_at: String::new(),
                root_id: None,
            })
            .unwrap();
    }

    /// Leaves an unlocked work directory holding `files`, as a killed
    /// operation would.
    fn dead_work_dir(store: &Store, name: &str, files: &[(&str, String)]) {
        let dir = store.root().join(TMP_DIR).join(name);
        std::fs::create_dir(&dir).unwrap();
        for (file, text) in files {
            std::fs::write(dir.join(file), text).unwrap();
        }
    }

    fn size(path: &Path) -> u64 {
        std::fs::symlink_metadata(path).unwrap().len()
    }

    /// A store with what a scan keeps and one piece of each kind of garbage.
    struct Yard {
        kept: Manifest,
        unrecorded: Manifest,
        busy: WorkDir,
        flying: ObjectKey,
        orphan: Manifest,
        orphan_path: PathBuf,
        stray: PathBuf,
        stray_dir: PathBuf,
        abandoned: Manifest,
        abandoned_object: PathBuf,
        half: PathBuf,
        unknown: String,
        building: PathBuf,
        gone: PathBuf,
        here: PathBuf,
    }

    fn lay_out_yard(tmp: &Path, store: &mut Store) -> Yard {
        let objects = store.root().join(OBJECTS_DIR);
        let views = store.views_dir();
        // Kept: a recorded snapshot's objects, an unrecorded manifest's
        // (recover records it again), and what a live operation publishes.
        let kept = publish(
            store,
            &[("a.md", b"kept a\n", false), ("run", b"kept run\n", true)],
        );
        write_manifest(store, &kept);
        record(store, &kept);
        let unrecorded = publish(store, &[("u.md", b"unrecorded\n", false)]);
        write_manifest(store, &unrecorded);
        let busy = store.work_dir("ingest").unwrap();
        let flying = entry("f.md", b"in flight\n", false).key();
        busy.note_publishing(std::iter::once(&flying), &ManifestDigest::of(b"x"))
            .unwrap();
        publish(store, &[("f.md", b"in flight\n", false)]);

        // Garbage: an orphan object, a name that is no object's, and a
        // stray directory.
        let orphan = publish(store, &[("o.md", b"nobody's\n", false)]);
        let orphan_path = store.object_path(&orphan.entries[0].key());
        let stray = objects.join("ab").join("not-an-object");
        std::fs::write(&stray, "?\n").unwrap();
        let stray_dir = objects.join("cd").join("a-directory");
        std::fs::create_dir_all(stray_dir.join("inside")).unwrap();
        // A manifest a dead ingest published, and the object only it names.
        let abandoned = publish(store, &[("x.md", b"abandoned\n", false)]);
        let abandoned_object = store.object_path(&abandoned.entries[0].key());
        write_manifest(store, &abandoned);
        dead_work_dir(
            store,
            "ingest-999999-2",
            &[("publishing", format!("manifest {}\n", abandoned.digest))],
        );
        // A dead checkout and the half-built view it names.
        let half = tmp.join(".view.cestore-tmp-1-2-3");
        std::fs::create_dir_all(half.join("skills")).unwrap();
        std::fs::write(half.join("skills/x.md"), "half\n").unwrap();
        dead_work_dir(
            store,
            "checkout-999999-1",
            &[("target", half.to_string_lossy().into_owned())],
        );
        // A shared view nothing records, and a file where a recorded
        // snapshot's shared view belongs; a view being built is left be.
        let unknown = "e".repeat(64);
        std::fs::create_dir_all(views.join(&unknown).join("skills")).unwrap();
        std::fs::write(views.join(kept.digest.to_hex()), "not a directory\n").unwrap();
        let building = views.join(".v.cestore-tmp-5");
        std::fs::create_dir(&building).unwrap();
        // A view record whose directory is gone, and one whose is there.
        let gone = tmp.join("gone");
        let here = tmp.join("here");
        std::fs::create_dir(&here).unwrap();
        add_view(store, &gone, kept.digest);
        add_view(store, &here, kept.digest);
        Yard {
            kept,
            unrecorded,
            busy,
            flying,
            orphan,
            orphan_path,
            stray,
            stray_dir,
            abandoned,
            abandoned_object,
            half,
            unknown,
            building,
            gone,
            here,
        }
    }

    /// What a scan of the yard must plan, the abandoned manifest first.
    fn yard_garbage(store: &Store, y: &Yard) -> Vec<Item> {
        let object = |path: &Path, key| Item::Object {
            path: path.to_path_buf(),
            size: size(path),
            key,
        };
        vec![
            Item::Manifest {
                path: store.manifest_path(&y.abandoned.digest),
            },
            object(&y.orphan_path, Some(y.orphan.entries[0].key())),
            object(&y.stray, None),
            object(&y.stray_dir, None),
            object(&y.abandoned_object, Some(y.abandoned.entries[0].key())),
            Item::HalfBuiltView {
                path: y.half.clone(),
            },
            Item::WorkDir {
                name: "checkout-999999-1".into(),
            },
            Item::WorkDir {
                name: "ingest-999999-2".into(),
            },
            Item::SharedView {
                name: y.unknown.clone(),
                why: "no snapshot in the catalogue has this shared view",
            },
            Item::SharedView {
                name: y.kept.digest.to_hex(),
                why: "not a directory where a shared view belongs",
            },
            Item::ViewRecord {
                path: y.gone.to_string_lossy().into_owned(),
            },
        ]
    }

    #[test]
    fn a_scan_finds_each_kind_of_garbage_and_apply_removes_exactly_that() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(&tmp.path().join("store"), LockMode::Shared, true).unwrap();
        let y = lay_out_yard(tmp.path(), &mut store);
        let dir_size = size(&y.stray_dir);
        let plan = Plan::scan(&store, false).unwrap();
        let want = yard_garbage(&store, &y);
        assert_eq!(plan.items.len(), want.len(), "{:#?}", plan.items);
        for item in &want {
            assert!(plan.items.contains(item), "not planned: {item:?}");
        }
        assert_eq!(plan.items[0], want[0], "abandoned manifests go first");
        assert_eq!(
            plan.objects_kept, 4,
            "two kept, one unrecorded, one in flight"
        );
        let kinds: Vec<&str> = plan.items.iter().map(Item::kind).collect();
        for kind in [
            "orphan-object",
            "leftover-temporary",
            "leftover-manifest",
            "orphan-shared-view",
            "stale-view-record",
        ] {
            assert!(kinds.contains(&kind), "{kind}");
        }
        assert_eq!(
            plan.manifests
                .unrecorded
                .iter()
                .map(|(d, _)| *d)
                .collect::<Vec<_>>(),
            [y.unrecorded.digest]
        );

        let mut freed = Vec::new();
        plan.apply(&store, |n| freed.push(n)).unwrap();
        freed.sort_unstable();
        let mut want_freed = vec![
            "nobody's\n".len() as u64,
            2,
            dir_size,
            "abandoned\n".len() as u64,
        ];
        want_freed.sort_unstable();
        assert_eq!(freed, want_freed);
        for path in yard_garbage_paths(&store, &y) {
            assert!(
                rustix::fs::lstat(&path).is_err(),
                "left: {}",
                path.display()
            );
        }
        assert_yard_kept(&store, &y);

        // Scanned again through the same handles: each listing starts from
        // the top of its directory.
        let again = Plan::scan(&store, false).unwrap();
        assert!(again.items.is_empty(), "{:#?}", again.items);
        assert_eq!(again.objects_kept, 4);
    }

    /// Where the yard's garbage stands.
    fn yard_garbage_paths(store: &Store, y: &Yard) -> Vec<PathBuf> {
        let views = store.views_dir();
        vec![
            store.manifest_path(&y.abandoned.digest),
            y.orphan_path.clone(),
            y.stray.clone(),
            y.stray_dir.clone(),
            y.abandoned_object.clone(),
            y.half.clone(),
            store.root().join(TMP_DIR).join("checkout-999999-1"),
            store.root().join(TMP_DIR).join("ingest-999999-2"),
            views.join(&y.unknown),
            views.join(y.kept.digest.to_hex()),
        ]
    }

    /// What the yard keeps is still there after the garbage went.
    fn assert_yard_kept(store: &Store, y: &Yard) {
        let recorded: Vec<String> = store
            .catalogue()
            .views(None)
            .unwrap()
            .into_iter()
            .map(|v| v.path)
            .collect();
        assert_eq!(recorded, [y.here.to_string_lossy().into_owned()]);
        for e in y.kept.entries.iter().chain(&y.unrecorded.entries) {
            assert!(store.object_path(&e.key()).exists(), "{}", e.path);
        }
        assert!(store.object_path(&y.flying).exists());
        assert!(store.manifest_path(&y.kept.digest).exists());
        assert!(store.manifest_path(&y.unrecorded.digest).exists());
        assert!(y.busy.path().exists());
        assert!(y.building.exists());
        assert!(y.here.exists());
    }

    #[test]
    fn a_damaged_manifest_keeps_its_names_and_makes_the_plan_unsafe_until_forced() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(&tmp.path().join("store"), LockMode::Shared, true).unwrap();
        let kept = publish(&store, &[("a.md", b"a\n", false), ("b.md", b"b\n", true)]);
        write_manifest(&store, &kept);
        record(&mut store, &kept);
        let orphan = publish(&store, &[("o.md", b"nobody's\n", false)]);
        let orphan_path = store.object_path(&orphan.entries[0].key());
        // Catalogue rows gone, manifest cut short after its first name.
        store
            .catalogue_mut()
            .remove_snapshot(&kept.digest, true, || Ok(()))
            .unwrap();
        let path = store.manifest_path(&kept.digest);
        let hex = kept.entries[1].sha256.to_hex();
        let cut = find(&kept.bytes, &hex) + 10;
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        std::fs::write(&path, &kept.bytes[..cut]).unwrap();

        let plan = Plan::scan(&store, false).unwrap();
        assert_eq!(plan.unsafe_because.len(), 1, "{:?}", plan.unsafe_because);
        assert_eq!(plan.unsafe_because[0].0, path);
        assert!(plan.refusal().is_some());
        let planned: Vec<&Item> = plan.items.iter().collect();
        let b_path = store.object_path(&kept.entries[1].key());
        assert!(
            planned
                .iter()
                .any(|i| matches!(i, Item::Object { path, .. } if *path == b_path)),
            "a name cut off is no longer known: {planned:?}"
        );
        assert!(!planned.iter().any(|i| matches!(i, Item::Object { path, .. } if *path == store.object_path(&kept.entries[0].key()))),
            "the name left in the bytes keeps its object");
        let err = plan
            .apply(&store, |_| panic!("nothing is removed"))
            .unwrap_err();
        assert!(
            matches!(err, Error::Conflict(ref m) if m.contains(&*path.to_string_lossy())),
            "{err}"
        );
        assert!(orphan_path.exists() && b_path.exists());

        let forced = Plan::scan(&store, true).unwrap();
        assert!(forced.refusal().is_none());
        forced.apply(&store, |_| {}).unwrap();
        assert!(!orphan_path.exists() && !b_path.exists());
        assert!(store.object_path(&kept.entries[0].key()).exists());
        assert!(path.exists(), "a damaged manifest is never removed");
    }

    fn find(haystack: &[u8], needle: &str) -> usize {
        haystack
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
            .unwrap()
    }

    #[test]
    fn a_set_aside_manifest_keeps_its_objects_unless_forced() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("store"), LockMode::Shared, true).unwrap();
        let aside = publish(&store, &[("s.md", b"aside\n", false)]);
        write_manifest(&store, &aside);
        let moved = store
            .set_aside_manifest(&aside.digest, "not recorded: a test")
            .unwrap();
        assert!(!store.manifest_path(&aside.digest).exists());
        assert_eq!(std::fs::read(&moved).unwrap(), aside.bytes);
        let listed = store.list_set_aside().unwrap();
        assert_eq!(
            listed,
            [(moved.clone(), "not recorded: a test".to_string())]
        );
        // A second one of the same digest gets the next name.
        write_manifest(&store, &aside);
        let again = store.set_aside_manifest(&aside.digest, "again").unwrap();
        assert_ne!(again, moved);

        let plan = Plan::scan(&store, false).unwrap();
        assert!(plan.items.is_empty(), "{:?}", plan.items);
        assert!(
            plan.refusal().is_none(),
            "a set-aside manifest blocks nothing"
        );
        let forced = Plan::scan(&store, true).unwrap();
        let object = store.object_path(&aside.entries[0].key());
        assert!(forced
            .items
            .iter()
            .any(|i| matches!(i, Item::Object { path, .. } if *path == object)));
        forced.apply(&store, |_| {}).unwrap();
        assert!(!object.exists() && moved.exists() && again.exists());
    }

    #[test]
    fn a_clean_store_plans_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("store"), LockMode::Shared, true).unwrap();
        let plan = Plan::scan(&store, false).unwrap();
        assert!(plan.items.is_empty());
        assert_eq!(plan.objects_kept, 0);
        plan.apply(&store, |_| panic!("nothing to free")).unwrap();
    }

    #[test]
    fn temp_view_names() {
        assert!(is_temp_view(".name.cestore-tmp-1-2-3"));
        assert!(!is_temp_view("name.cestore-tmp-1"), "not hidden");
        assert!(!is_temp_view(".name"));
        assert!(!is_temp_view(&"e".repeat(64)));
    }
}
