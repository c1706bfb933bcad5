//! `cestore rm` and `cestore gc`: forget snapshots, then sweep what nothing uses.
//!
//! gc is a mark and sweep from the catalogue, never from link counts. Live are
//! the objects of every recorded snapshot (which includes every snapshot with
//! a recorded view, since `rm` refuses those unless forced) and the shared
//! views of recorded snapshots. Ingests and checkouts in flight hold the
//! store's shared lock and gc its exclusive one, so nothing is published
//! between the mark and the sweep. `--dry-run` plans under the shared lock.
//!
//! While a manifest file is damaged or a recorded snapshot lacks one, gc
//! refuses to sweep (exit 6, removing nothing) unless `--force`: the
//! objects such a manifest named are no longer all known.

use std::io::{self, Write};
use std::path::Path;

use super::{resolve, Report};
use crate::digest::ManifestDigest;
use crate::error::Result;
use crate::progress::Progress;
use crate::store::upkeep::{Item, Plan};
use crate::store::{LockMode, Store};

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
    // Its spares go too (what this misses, gc removes).
    crate::store::spares::forget(&store, &digest);
    Ok(RmReport {
        manifest_digest: digest,
        views_forgotten: views,
    })
}

/// One reason a sweep is unsafe: a damaged or missing manifest.
#[derive(Debug, serde::Serialize)]
pub struct UnsafeManifest {
    /// The manifest file.
    pub path: String,
    /// What is wrong with it.
    pub detail: String,
}

/// What gc removes (or, with `--dry-run` or when it refuses, would remove).
#[derive(Debug, Default, serde::Serialize)]
pub struct GcReport {
    /// Whether this was only a plan.
    pub dry_run: bool,
    /// Whether `--force` was given.
    pub force: bool,
    /// The damaged and missing manifests that make a sweep unsafe.
    #[serde(rename = "unsafe")]
    pub unsafe_manifests: Vec<UnsafeManifest>,
    /// Whether gc refused to sweep because of them (nothing was removed).
    pub refused: bool,
    /// Objects that no snapshot uses.
    pub objects: Vec<String>,
    /// Their bytes.
    pub bytes_freed: u64,
    /// Stale work directories and half-built views.
    pub temporary: Vec<String>,
    /// Shared views of snapshots no longer recorded, and anything else
    /// than a directory where a shared view belongs.
    pub shared_views: Vec<String>,
    /// Spare views kept for snapshots no longer recorded.
    pub spares: Vec<String>,
    /// Records of views whose directory no longer exists.
    pub stale_view_records: Vec<String>,
    /// Manifests an operation that did not finish published and nothing
    /// records.
    pub manifests: Vec<String>,
    /// Objects kept.
    pub objects_kept: u64,
}

impl Report for GcReport {
    fn exit_code(&self) -> u8 {
        if self.refused {
            crate::error::ErrorKind::Conflict.exit_code()
        } else {
            0
        }
    }

    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for u in &self.unsafe_manifests {
            writeln!(w, "unsafe to sweep: {}: {}", u.path, u.detail)?;
        }
        if self.refused {
            writeln!(
                w,
                "refused to sweep while {}: nothing was removed. \
                 `cestore recover` mends what the catalogue still knows; \
                 `cestore gc --force` sweeps anyway, still keeping every object \
                 the damaged manifests name",
                super::counted(
                    self.unsafe_manifests.len(),
                    "manifest is damaged or missing",
                    "manifests are damaged or missing"
                )
            )?;
        }
        let verb = if self.dry_run || self.refused {
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
        for v in &self.spares {
            writeln!(w, "{verb} the spare views {v}")?;
        }
        let forget = if self.dry_run || self.refused {
            "would forget"
        } else {
            "forgot"
        };
        for v in &self.stale_view_records {
            writeln!(w, "{forget} the record of the vanished view {v}")?;
        }
        for m in &self.manifests {
            writeln!(w, "{verb} unrecorded manifest {m}")?;
        }
        writeln!(
            w,
            "{verb} {} ({}), {}, {}, {}; {forget} {}; kept {}",
            super::counted(self.objects.len(), "object", "objects"),
            super::counted(self.bytes_freed, "byte", "bytes"),
            super::counted(self.temporary.len(), "temporary entry", "temporary entries"),
            super::counted(
                self.manifests.len(),
                "unrecorded manifest",
                "unrecorded manifests"
            ),
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

/// Removes everything no snapshot uses: objects, stale temporary files and
/// shared views of forgotten snapshots, as the one upkeep [`Plan`] says.
/// Refuses (and reports what it would remove) while the plan is unsafe,
/// unless `force`.
pub fn gc(store_root: &Path, dry_run: bool, force: bool, progress: bool) -> Result<GcReport> {
    let mode = if dry_run {
        LockMode::Shared
    } else {
        LockMode::Exclusive
    };
    let store = Store::open(store_root, mode, false)?;
    let plan = Plan::scan(&store, force)?;
    let mut report = GcReport {
        dry_run,
        force,
        unsafe_manifests: plan
            .unsafe_because
            .iter()
            .map(|(path, detail)| UnsafeManifest {
                path: path.to_string_lossy().into_owned(),
                detail: detail.clone(),
            })
            .collect(),
        refused: !dry_run && plan.refusal().is_some(),
        objects_kept: plan.objects_kept,
        ..GcReport::default()
    };
    for item in &plan.items {
        let path = item.path(&store).to_string_lossy().into_owned();
        match item {
            Item::Object { size, .. } => {
                report.objects.push(path);
                report.bytes_freed += size;
            }
            Item::WorkDir { .. } | Item::HalfBuiltView { .. } => report.temporary.push(path),
            Item::Manifest { .. } => report.manifests.push(path),
            Item::SharedView { .. } => report.shared_views.push(path),
            Item::Spare { .. } => report.spares.push(path),
            Item::ViewRecord { .. } => report.stale_view_records.push(path),
        }
    }
    if dry_run || report.refused {
        return Ok(report);
    }
    let objects = report.objects.len() as u64;
    let mut bar = Progress::new("gc", objects, progress);
    plan.apply(&store, |size| bar.add(1, size))?;
    Ok(report)
}
