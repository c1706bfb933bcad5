//! Forgetting snapshots (`rm`), then sweeping what nothing uses (`gc`).
//!
//! gc is a mark and sweep from the catalogue, never from link counts. Live are
//! the objects of every recorded snapshot (which includes every snapshot with
//! a recorded view, since `rm` forgets a snapshot's view records with it) and
//! the shared views of recorded snapshots. Ingests and checkouts in flight hold the
//! store's shared lock and gc its exclusive one, so nothing is published
//! between the mark and the sweep. `--dry-run` plans under the shared lock.
//!
//! While a manifest file is damaged or a recorded snapshot lacks one, gc
//! refuses to sweep (exit 6, removing nothing) unless `--force`: the
//! objects such a manifest named are no longer all known.

use crate::catalogue::{resolve, ViewKind};
use crate::digest::ManifestDigest;
use crate::error::Result;
use crate::progress::Progress;
use crate::store::core::beside::{Kind, SetAside};
use crate::store::upkeep::{Item, Plan};
use crate::store::Store;

/// The report of `cestore rm`.
#[derive(Debug, serde::Serialize)]
pub struct RmReport {
    /// The snapshot forgotten.
    pub manifest_digest: ManifestDigest,
    /// The view records dropped with it: its shared views always, its
    /// other views only with `--force` (their directories stay on disk).
    pub views_forgotten: Vec<String>,
    /// The store's shared views among them, which `cestore gc` removes.
    pub shared_views: Vec<String>,
}

/// Forgets a snapshot with its shared views' records (gc removes those
/// views); refuses while other views of it are recorded unless `force`.
///
/// A failed `rm` changes nothing, on a full disk too: the snapshot's files
/// are set aside inside the transaction that forgets its rows and removed
/// only once it commits (`beside::SetAside`). A crash between the two leaves a
/// recorded snapshot whose files `cestore recover` writes again (gc refuses
/// to sweep until then).
pub fn rm(store: &mut Store, digest: &str, force: bool) -> Result<RmReport> {
    let digest = resolve(store.catalogue(), digest)?;
    let mut aside = SetAside::new(store, &digest)?;
    let forgotten = store
        .catalogue_mut()
        .remove_snapshot(&digest, force, || aside.take());
    let views = match forgotten {
        Ok(views) => views,
        Err(e) => return Err(aside.put_back(e)),
    };
    drop(aside);
    store
        .catalogue()
        .checkpoint_after(crate::catalogue::Work::Committed)?;
    // Its spares go too (what this misses, gc removes).
    crate::store::views::spares::forget(store, &digest);
    Ok(RmReport {
        manifest_digest: digest,
        shared_views: views
            .iter()
            .filter(|(_, kind)| *kind == ViewKind::Shared)
            .map(|(path, _)| path.clone())
            .collect(),
        views_forgotten: views.into_iter().map(|(path, _)| path).collect(),
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
    /// Source records of snapshots neither recorded nor kept as a manifest.
    pub source_records: Vec<String>,
    /// Attestations of snapshots neither recorded nor kept as a manifest.
    pub attestations: Vec<String>,
    /// Objects kept.
    pub objects_kept: u64,
}

/// Removes everything no snapshot uses: objects, stale temporary files and
/// shared views of forgotten snapshots, as the one upkeep [`Plan`] says.
/// Refuses (and reports what it would remove) while the plan is unsafe,
/// unless `force`.
pub fn gc(store: &Store, dry_run: bool, force: bool, progress: bool) -> Result<GcReport> {
    let plan = Plan::scan(store, force)?;
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
        let path = item.path(store).to_string_lossy().into_owned();
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
            Item::Beside {
                kind: Kind::Sources,
                ..
            } => report.source_records.push(path),
            Item::Beside {
                kind: Kind::Attestations,
                ..
            } => report.attestations.push(path),
        }
    }
    if dry_run || report.refused {
        return Ok(report);
    }
    let objects = report.objects.len() as u64;
    let mut bar = Progress::new("gc", objects, progress);
    plan.apply(store, |size| bar.add(1, size))?;
    Ok(report)
}
