//! `cestore rm` and `cestore gc`: forget snapshots, then sweep what nothing uses.
//!
//! gc is a mark and sweep from the catalogue, never from link counts. Live are
//! the objects of every recorded snapshot (which includes every snapshot with
//! a recorded view, since `rm` refuses those unless forced) and the shared
//! views of recorded snapshots. Ingests and checkouts in flight hold the
//! store's shared lock and gc its exclusive one, so nothing is published
//! between the mark and the sweep. `--dry-run` plans under the shared lock.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;

use super::verify::{in_flight_objects, is_temp_view, list_objects, read_names};
use super::{resolve, Report};
use crate::digest::ManifestDigest;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::remove_tree_at;
use crate::progress::Progress;
use crate::store::objects::work_dirs;
use crate::store::{LockMode, Store, TMP_DIR, VIEWS_DIR};

/// The report of `cestore rm`.
#[derive(Debug, serde::Serialize)]
pub struct RmReport {
    /// The snapshot forgotten.
    pub manifest_digest: ManifestDigest,
    /// The view records dropped with it (only with `--force`).
    pub views_forgotten: Vec<String>,
}

impl Report for RmReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(
            w,
            "forgot {}; `cestore gc` frees its objects",
            self.manifest_digest
        )?;
        for v in &self.views_forgotten {
            writeln!(w, "  view no longer recorded (left on disk): {v}")?;
        }
        Ok(())
    }
}

/// Forgets a snapshot; refuses while views of it are recorded unless `force`.
pub fn rm(store_root: &Path, digest: &str, force: bool) -> Result<RmReport> {
    let mut store = Store::open(store_root, LockMode::Shared, false)?;
    let digest = resolve(store.catalogue(), digest)?;
    let manifest = store.manifest_path(&digest);
    // The manifest goes inside the transaction that forgets the row, so
    // that no ingest of the same snapshot records it in between; a crash
    // before the commit leaves a recorded snapshot whose manifest
    // `cestore recover` writes again.
    let views = store.catalogue_mut().remove_snapshot(&digest, force, || {
        crate::store::manifests::remove_file(&manifest)
    })?;
    let _ = store.catalogue().checkpoint();
    Ok(RmReport {
        manifest_digest: digest,
        views_forgotten: views,
    })
}

/// What gc removes (or, with `--dry-run`, would remove).
#[derive(Debug, Default, serde::Serialize)]
pub struct GcReport {
    /// Whether this was only a plan.
    pub dry_run: bool,
    /// Objects that no snapshot uses.
    pub objects: Vec<String>,
    /// Their bytes.
    pub bytes_freed: u64,
    /// Stale work directories and half-built views.
    pub temporary: Vec<String>,
    /// Shared views of snapshots no longer recorded, and anything else
    /// than a directory where a shared view belongs.
    pub shared_views: Vec<String>,
    /// Records of views whose directory no longer exists.
    pub stale_view_records: Vec<String>,
    /// Objects kept.
    pub objects_kept: u64,
}

impl Report for GcReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        let verb = if self.dry_run {
            "would remove"
        } else {
            "removed"
        };
        for o in &self.objects {
            writeln!(w, "{verb} object {o}")?;
        }
        for t in &self.temporary {
            writeln!(w, "{verb} temporary {t}")?;
        }
        for v in &self.shared_views {
            writeln!(w, "{verb} shared view {v}")?;
        }
        let forget = if self.dry_run {
            "would forget"
        } else {
            "forgot"
        };
        for v in &self.stale_view_records {
            writeln!(w, "{forget} the record of the vanished view {v}")?;
        }
        writeln!(
            w,
            "{verb} {} ({}), {}, {}; {forget} {}; kept {}",
            super::counted(self.objects.len(), "object", "objects"),
            super::counted(self.bytes_freed, "byte", "bytes"),
            super::counted(self.temporary.len(), "temporary entry", "temporary entries"),
            super::counted(self.shared_views.len(), "shared view", "shared views"),
            super::counted(
                self.stale_view_records.len(),
                "stale view record",
                "stale view records"
            ),
            super::counted(self.objects_kept, "object", "objects")
        )
    }
}

/// The mark: what is live, and what the sweep would remove.
struct GcPlan {
    objects: Vec<(PathBuf, u64)>,
    work_dirs: Vec<(String, Option<PathBuf>)>,
    shared_views: Vec<String>,
    stale_views: Vec<String>,
    manifests: Vec<PathBuf>,
    kept: u64,
}

fn plan(store: &Store) -> Result<GcPlan> {
    let cat = store.catalogue();
    // Objects first, then what operations in flight publish, then the
    // catalogue: an object published meanwhile is found in one or the other.
    // (Under gc's exclusive lock nothing is in flight; `--dry-run` shares.)
    let listed = list_objects(store)?;
    let in_flight = in_flight_objects(store)?;
    let mut live = cat.live_objects()?;
    let recorded = cat
        .snapshots(None, None)?
        .into_iter()
        .map(|s| s.digest)
        .collect();
    let scan = store.scan_manifests(&recorded)?;
    live.extend(scan.live_objects);
    let mut objects = Vec::new();
    let mut kept = 0;
    for (path, key) in listed {
        if key.is_some_and(|k| live.contains(&k) || in_flight.contains(&k)) {
            kept += 1;
            continue;
        }
        let size = rustix::fs::lstat(&path)
            .map(|s| s.st_size as u64)
            .unwrap_or(0);
        objects.push((path, size));
    }
    let work_dirs = work_dirs(store)?
        .into_iter()
        .filter(|w| !w.live)
        .map(|w| {
            let target = w.target();
            (w.name, target)
        })
        .collect();
    let views_path = store.root().join(VIEWS_DIR);
    let views = crate::fsutil::open_dir(store.dir(), VIEWS_DIR)
        .ctx("open the views directory", &views_path)?;
    let mut shared_views = Vec::new();
    for name in read_names(views.as_fd(), &views_path)? {
        if is_temp_view(&name) {
            // A view being built; a marker under tmp/ names it.
            continue;
        }
        let known = match name.parse::<ManifestDigest>() {
            Ok(d) => cat.has_snapshot(&d)?,
            Err(_) => false,
        };
        let is_dir = rustix::fs::statat(&views, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory);
        if !known || !is_dir {
            shared_views.push(name);
        }
    }
    let stale_views = cat
        .views(None)?
        .into_iter()
        .filter(|v| rustix::fs::lstat(v.path.as_str()).is_err_and(|e| e == Errno::NOENT))
        .map(|v| v.path)
        .collect();
    Ok(GcPlan {
        objects,
        work_dirs,
        shared_views,
        stale_views,
        manifests: scan.abandoned.into_iter().map(|(_, p)| p).collect(),
        kept,
    })
}

/// Removes everything no snapshot uses: objects, stale temporary files and
/// shared views of forgotten snapshots.
pub fn gc(store_root: &Path, dry_run: bool, progress: bool) -> Result<GcReport> {
    let mode = if dry_run {
        LockMode::Shared
    } else {
        LockMode::Exclusive
    };
    let store = Store::open(store_root, mode, false)?;
    let plan = plan(&store)?;
    let mut report = GcReport {
        dry_run,
        objects_kept: plan.kept,
        ..GcReport::default()
    };
    let tmp_path = store.root().join(TMP_DIR);
    for (name, target) in &plan.work_dirs {
        report
            .temporary
            .push(tmp_path.join(name).to_string_lossy().into_owned());
        if let Some(t) = target.as_ref().filter(|t| rustix::fs::lstat(*t).is_ok()) {
            report.temporary.push(t.to_string_lossy().into_owned());
        }
    }
    report.temporary.extend(
        plan.manifests
            .iter()
            .map(|p| p.to_string_lossy().into_owned()),
    );
    let views_path = store.root().join(VIEWS_DIR);
    report.shared_views = plan
        .shared_views
        .iter()
        .map(|n| views_path.join(n).to_string_lossy().into_owned())
        .collect();
    report.stale_view_records = plan.stale_views.clone();
    report.bytes_freed = plan.objects.iter().map(|(_, s)| s).sum();
    report.objects = plan
        .objects
        .iter()
        .map(|(p, _)| p.to_string_lossy().into_owned())
        .collect();
    if dry_run {
        return Ok(report);
    }
    apply(&store, &plan, progress)?;
    Ok(report)
}

/// The sweep, under the exclusive lock.
fn apply(store: &Store, plan: &GcPlan, progress: bool) -> Result<()> {
    // Abandoned manifests first: a crash later leaves objects nothing names
    // (garbage), never a manifest whose objects are gone.
    for path in &plan.manifests {
        crate::store::manifests::remove_file(path)?;
    }
    let mut bar = Progress::new("gc", plan.objects.len() as u64, progress);
    for (path, size) in &plan.objects {
        match rustix::fs::unlink(path) {
            Ok(()) | Err(Errno::NOENT) => {}
            // A stray directory under objects/ is removed as a tree.
            Err(Errno::ISDIR) => {
                std::fs::remove_dir_all(path).ctx("remove a stray directory", path)?
            }
            Err(e) => return Err(Error::io("remove an object", path, e)),
        }
        bar.add(1, *size);
    }
    let tmp_path = store.root().join(TMP_DIR);
    let tmp =
        crate::fsutil::open_dir(store.dir(), TMP_DIR).ctx("open the tmp directory", &tmp_path)?;
    for (name, target) in &plan.work_dirs {
        if let Some(t) = target {
            remove_checkout_leftover(t)?;
        }
        remove_tree_at(tmp.as_fd(), name)
            .ctx("remove a temporary directory", tmp_path.join(name))?;
    }
    let views_path = store.root().join(VIEWS_DIR);
    let views = crate::fsutil::open_dir(store.dir(), VIEWS_DIR)
        .ctx("open the views directory", &views_path)?;
    for name in &plan.shared_views {
        store
            .catalogue()
            .remove_view(&views_path.join(name).to_string_lossy())?;
        remove_tree_at(views.as_fd(), name).ctx("remove a shared view", views_path.join(name))?;
    }
    for path in &plan.stale_views {
        store.catalogue().remove_view(path)?;
    }
    Ok(())
}

/// Removes a half-built view named by a checkout marker, only if its name
/// is one checkout makes.
fn remove_checkout_leftover(target: &Path) -> Result<()> {
    let (Some(parent), Some(name)) = (target.parent(), target.file_name().and_then(|n| n.to_str()))
    else {
        return Ok(());
    };
    if !is_temp_view(name) {
        return Ok(());
    }
    let Ok(parent_fd) = crate::fsutil::open_dir(rustix::fs::CWD, parent) else {
        return Ok(());
    };
    if rustix::fs::statat(&parent_fd, name, AtFlags::SYMLINK_NOFOLLOW).is_err() {
        return Ok(());
    }
    remove_tree_at(parent_fd.as_fd(), name)
        .map(|_| ())
        .ctx("remove a half-built view", target)
}
