//! `cestore verify`: re-hash the store and check the catalogue against itself,
//! or audit a directory tree against a snapshot (`--tree`).
//!
//! Problems come in two severities: `corruption` (a snapshot can no longer be
//! handed out exactly: a missing, changed or re-moded object, disagreeing
//! catalogue rows, a damaged database) and `garbage` (leftovers that lose
//! nothing: orphan objects, stale temporary files, stale view records).
//! Either makes the command exit 1.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::catalogue::KeptAttestation;
use crate::catalogue::{resolve, ViewKind};
use crate::digest::AttestationId;
use crate::digest::{ManifestDigest, ObjectId};
use crate::error::{IoContext, Result};
use crate::profile::ce::manifest::{Entry, Manifest};
use crate::progress::Progress;
use crate::sign::PublicKey;
use crate::store::core::beside::Found;
use crate::store::core::objects::{judge, ObjectState};
use crate::store::trust::signed;
use crate::store::upkeep::{Item, Plan};
use crate::store::views::tree::{self, Difference};
use crate::store::{ObjectKey, Store};

/// How bad a problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A snapshot can no longer be handed out exactly.
    Corruption,
    /// A leftover that loses nothing; `gc` removes it.
    Garbage,
}

/// One problem `verify` found.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Problem {
    /// What kind of problem, e.g. `object-content`, `orphan-object`.
    pub kind: &'static str,
    /// How bad it is.
    pub severity: Severity,
    /// The path involved.
    pub path: String,
    /// What is wrong.
    pub detail: String,
    /// The snapshots affected.
    pub snapshots: Vec<ManifestDigest>,
    /// The recorded views affected.
    pub views: Vec<String>,
}

/// The report of `cestore verify`.
#[derive(Debug, Default, serde::Serialize)]
pub struct VerifyReport {
    /// Snapshots checked.
    pub snapshots_checked: u64,
    /// Objects re-hashed.
    pub objects_checked: u64,
    /// Bytes re-hashed.
    pub bytes_hashed: u64,
    /// Objects restored from `--repair-from`.
    pub repaired: Vec<String>,
    /// Recorded views that still link the damaged bytes of an object
    /// `--repair-from` restored (a hard link keeps the old inode).
    pub stale_views: Vec<StaleView>,
    /// Everything found: damage (`corruption`) and leftovers for gc
    /// (`garbage`).
    pub problems: Vec<Problem>,
    /// With `--trusted-key`, the stored attestations checked; absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attestations_checked: Option<u64>,
    /// With `--trusted-key`, those signed by a key trusted and about their
    /// own snapshot's digest; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attestations_verified: Option<u64>,
}

/// A view that still links damaged bytes after a repair, and how to renew it.
#[derive(Debug, serde::Serialize)]
pub struct StaleView {
    /// The view.
    pub view: String,
    /// The snapshot it shows.
    pub manifest_digest: ManifestDigest,
    /// The commands that renew it.
    pub renew: String,
}

impl VerifyReport {
    /// The problems that are damage or inconsistency, not garbage.
    pub fn damage(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Corruption)
    }
}

/// What to verify.
pub struct VerifyOptions<'a> {
    /// The snapshots to check; all when empty.
    pub digests: &'a [String],
    /// A source tree to restore damaged objects from.
    pub repair_from: Option<&'a Path>,
    /// The keys every stored attestation of the snapshots must be signed
    /// by; none are checked when empty.
    pub trusted: &'a [crate::sign::PublicKey],
    /// Whether a progress line may be drawn.
    pub progress: bool,
}

/// Verifies the store, or the named snapshots.
pub fn verify_store(store: &Store, opts: &VerifyOptions<'_>) -> Result<VerifyReport> {
    let cat = store.catalogue();
    let mut report = VerifyReport::default();
    let all = opts.digests.is_empty();

    let integrity = cat.integrity_problems()?;
    if !integrity.is_empty() {
        report.problems.push(problem(
            "catalogue-integrity",
            Severity::Corruption,
            cat.path(),
            integrity.join("; "),
        ));
    }

    let digests: Vec<ManifestDigest> = if all {
        cat.snapshots(None, None)?
            .into_iter()
            .map(|s| s.digest)
            .collect()
    } else {
        opts.digests
            .iter()
            .map(|d| resolve(cat, d))
            .collect::<Result<_>>()?
    };
    if !opts.trusted.is_empty() {
        report.attestations_checked = Some(0);
        report.attestations_verified = Some(0);
    }
    let views = cat.views(None)?;
    let mut views_of: HashMap<ManifestDigest, Vec<String>> = HashMap::new();
    for v in &views {
        views_of.entry(v.digest).or_default().push(v.path.clone());
    }

    // Which snapshots use each object, and the size it must have.
    let mut users: BTreeMap<ObjectKey, (u64, BTreeSet<ManifestDigest>, String)> = BTreeMap::new();
    for digest in &digests {
        let entries = cat.files(digest)?;
        check_rows(store, digest, &entries, &mut report)?;
        if !opts.trusted.is_empty() {
            check_attestations(store, digest, opts.trusted, &mut report)?;
        }
        for e in entries.iter().filter(|e| e.size > 0) {
            let key = e.key();
            let slot = users
                .entry(key)
                .or_insert_with(|| (e.size, BTreeSet::new(), e.path.clone()));
            slot.1.insert(*digest);
        }
        report.snapshots_checked += 1;
    }

    let damaged = check_objects(store, &users, opts.progress, &mut report);
    let broken: Vec<ObjectKey> = damaged.iter().map(|(key, _, _)| *key).collect();
    for (key, kind, detail) in damaged {
        let (_, snaps, _) = &users[&key];
        report.problems.push(Problem {
            kind,
            severity: Severity::Corruption,
            path: store.object_path(&key).to_string_lossy().into_owned(),
            detail,
            snapshots: snaps.iter().copied().collect(),
            views: snaps
                .iter()
                .flat_map(|d| views_of.get(d).cloned().unwrap_or_default())
                .collect(),
        });
    }

    if let Some(dir) = opts.repair_from {
        repair(store, dir, &broken, &mut report)?;
    }

    report_garbage(store, all, &views, &mut report)?;
    Ok(report)
}

/// Reports the garbage, which is what the one upkeep plan says gc removes,
/// item for item, and with `all` the manifests' problems; orphans and
/// manifests are whole-store findings, left out of a check of some
/// snapshots.
fn report_garbage(
    store: &Store,
    all: bool,
    views: &[crate::catalogue::ViewRow],
    report: &mut VerifyReport,
) -> Result<()> {
    let plan = Plan::scan(store, false)?;
    if all {
        check_manifests(&plan.manifests, store, report);
    }
    for item in &plan.items {
        if !all && matches!(item, Item::Object { .. } | Item::Manifest { .. }) {
            continue;
        }
        let mut found = problem(
            item.kind(),
            Severity::Garbage,
            &item.path(store),
            item.detail(),
        );
        if let Item::ViewRecord { path } = item {
            if let Some(v) = views.iter().find(|v| &v.path == path) {
                found.snapshots = vec![v.digest];
                found.views = vec![v.path.clone()];
            }
        }
        report.problems.push(found);
    }
    Ok(())
}

fn problem(kind: &'static str, severity: Severity, path: &Path, detail: String) -> Problem {
    Problem {
        kind,
        severity,
        path: path.to_string_lossy().into_owned(),
        detail,
        snapshots: Vec::new(),
        views: Vec::new(),
    }
}

/// Checks that a snapshot's rows agree with each other and with its manifest.
fn check_rows(
    store: &Store,
    digest: &ManifestDigest,
    entries: &[Entry],
    report: &mut VerifyReport,
) -> Result<()> {
    let cat = store.catalogue();
    let row = cat.snapshot(digest)?;
    let bytes = cat.manifest_bytes(digest)?;
    let mut wrong = Vec::new();
    match Manifest::parse(&bytes) {
        Err(e) => wrong.push(format!("the stored manifest does not parse: {e}")),
        Ok(m) => {
            if m.digest != *digest {
                wrong.push(format!(
                    "the stored manifest hashes to {}, not to its digest",
                    m.digest
                ));
            }
            if m.entries != entries {
                wrong.push("the file rows differ from the stored manifest".to_string());
            }
        }
    }
    if row.file_count != entries.len() as i64 {
        wrong.push(format!(
            "file_count is {} but {} file rows exist",
            row.file_count,
            entries.len()
        ));
    }
    let total: u64 = entries.iter().map(|e| e.size).sum();
    if row.total_bytes != total as i64 {
        wrong.push(format!(
            "total_bytes is {} but the files add up to {total}",
            row.total_bytes
        ));
    }
    for w in wrong {
        report.problems.push(Problem {
            kind: "catalogue-mismatch",
            severity: Severity::Corruption,
            path: cat.path().to_string_lossy().into_owned(),
            detail: w,
            snapshots: vec![*digest],
            views: Vec::new(),
        });
    }
    Ok(())
}

type Damage = (ObjectKey, &'static str, String);

/// Re-hashes every object in `users` on all cores; returns the damaged ones.
fn check_objects(
    store: &Store,
    users: &BTreeMap<ObjectKey, (u64, BTreeSet<ManifestDigest>, String)>,
    progress: bool,
    report: &mut VerifyReport,
) -> Vec<Damage> {
    let work: Vec<(ObjectKey, u64)> = users.iter().map(|(k, (size, _, _))| (*k, *size)).collect();
    let bar = Mutex::new(Progress::new("verify", work.len() as u64, progress));
    let objects = store.objects();
    let found = crate::pool::map(
        &work,
        crate::pool::cores(8),
        || vec![0u8; 256 * 1024],
        |buf, (key, size)| -> Result<Option<Damage>, std::convert::Infallible> {
            let found = check_one(objects, key, *size, buf);
            if let Ok(mut b) = bar.lock() {
                b.add(1, *size);
            }
            Ok(found.map(|(kind, detail)| (*key, kind, detail)))
        },
    );
    let damaged: Vec<Damage> = match found {
        Ok(found) => found.into_iter().flatten().collect(),
        Err(never) => match never {},
    };
    report.objects_checked = work.len() as u64;
    report.bytes_hashed = work.iter().map(|(_, size)| size).sum();
    damaged
}

fn check_one(
    objects: std::os::fd::BorrowedFd<'_>,
    key: &ObjectKey,
    size: u64,
    buf: &mut [u8],
) -> Option<(&'static str, String)> {
    let rel = key.rel_path();
    let fd = match rustix::fs::openat(
        objects,
        rel.as_str(),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => {
            return Some(("missing-object", "the object is missing".into()))
        }
        Err(e) => return Some(("unreadable-object", format!("cannot be opened: {e}"))),
    };
    let st = match rustix::fs::fstat(&fd) {
        Ok(st) => st,
        Err(e) => return Some(("unreadable-object", format!("cannot be examined: {e}"))),
    };
    if let ObjectState::Damaged(why) = judge(&st, key, size) {
        let kind = if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
            && st.st_mode & 0o7777 != key.mode()
        {
            "object-mode"
        } else {
            "object-size"
        };
        return Some((kind, format!("the object {why}")));
    }
    match tree::hash_fd(&fd, buf) {
        Ok((id, _)) if id == key.id => None,
        Ok((id, _)) => Some(("object-content", format!("the object's bytes hash to {id}"))),
        Err(e) => Some(("unreadable-object", format!("cannot be read: {e}"))),
    }
}

/// Restores damaged or missing objects from files in `dir` that hash right.
fn repair(
    store: &Store,
    dir: &Path,
    broken: &[ObjectKey],
    report: &mut VerifyReport,
) -> Result<()> {
    if broken.is_empty() {
        return Ok(());
    }
    let scan = tree::scan(dir)?;
    let mut by_id: HashMap<ObjectId, PathBuf> = HashMap::new();
    for (rel, found) in &scan {
        if let tree::Found::File { sha256, .. } = found {
            by_id.entry(*sha256).or_insert_with(|| dir.join(rel));
        }
    }
    let mut work = store.work_dir("repair")?;
    let mut old_inodes: HashMap<(u64, u64), ObjectKey> = HashMap::new();
    let mut staged_all = Vec::new();
    for key in broken.iter().copied() {
        let Some(src) = by_id.get(&key.id) else {
            continue;
        };
        let data = std::fs::read(src).ctx("read a repair source", src)?;
        if ObjectId::of(&data) != key.id {
            continue;
        }
        staged_all.push((key, work.stage(&key, &data)?, src));
    }
    // Every repaired byte is on the disk before it replaces a damaged
    // object; the names are, before the command reports them.
    if !staged_all.is_empty() {
        store.sync()?;
    }
    for (key, staged, src) in staged_all {
        // Replacing the damaged object is intended here: views that still
        // link the damaged inode keep it, and are named for renewal.
        let old = rustix::fs::statat(
            store.objects(),
            key.rel_path().as_str(),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .ok()
        .map(|st| (st.st_dev, st.st_ino));
        old_inodes.extend(old.map(|id| (id, key)));
        let dest = key.rel_path();
        rustix::fs::renameat(work.fd(), staged.as_str(), store.objects(), dest.as_str())
            .ctx("restore an object", store.object_path(&key))?;
        let path = store.object_path(&key).to_string_lossy().into_owned();
        report.problems.retain(|p| p.path != path);
        report
            .repaired
            .push(format!("{path} from {}", src.display()));
    }
    store.sync()?;
    report.stale_views = stale_views(store, &old_inodes)?;
    Ok(())
}

/// The recorded views with a file that is still one of `old_inodes`.
fn stale_views(
    store: &Store,
    old_inodes: &HashMap<(u64, u64), ObjectKey>,
) -> Result<Vec<StaleView>> {
    if old_inodes.is_empty() {
        return Ok(Vec::new());
    }
    let keys: BTreeSet<ObjectKey> = old_inodes.values().copied().collect();
    let mut stale = Vec::new();
    for view in store.catalogue().views(None)? {
        let entries = store.catalogue().files(&view.digest)?;
        let holds_old = entries.iter().filter(|e| keys.contains(&e.key())).any(|e| {
            rustix::fs::lstat(Path::new(&view.path).join(&e.path))
                .is_ok_and(|st| old_inodes.contains_key(&(st.st_dev, st.st_ino)))
        });
        if holds_old {
            let renew = if view.kind == ViewKind::Shared {
                format!(
                    "`cestore rm --force {d}`, `cestore gc`, then ingest the release again and `cestore path {d}`",
                    d = view.digest
                )
            } else {
                format!(
                    "`cestore discard {v}` then `cestore checkout {d} {v}`",
                    v = view.path,
                    d = view.digest
                )
            };
            stale.push(StaleView {
                view: view.path,
                manifest_digest: view.digest,
                renew,
            });
        }
    }
    Ok(stale)
}

/// Checks the manifests on disk against the catalogue: each recorded
/// snapshot has its manifest, intact, and each manifest is recorded (or being
/// recorded by an operation in flight).
fn check_manifests(
    scan: &crate::store::core::manifests::ManifestScan,
    store: &Store,
    report: &mut VerifyReport,
) {
    let mut found: Vec<(&'static str, &Path, String, Option<&ManifestDigest>)> = Vec::new();
    for path in &scan.stray {
        found.push((
            "stray-manifest",
            path,
            "not a manifest's name; nothing reads it: remove it by hand".into(),
            None,
        ));
    }
    for (digest, path, why) in &scan.damaged {
        found.push(("damaged-manifest", path, format!("{why}; gc keeps every object name left in it and refuses to sweep until `cestore recover` rewrites it from the catalogue (when the catalogue records it) or `cestore gc --force`"), Some(digest)));
    }
    for (digest, path) in &scan.unrecorded {
        found.push(("unrecorded-manifest", path, "the catalogue does not record this snapshot; `cestore recover` records it again (gc keeps its objects)".into(), Some(digest)));
    }
    for (path, why) in &scan.set_aside {
        found.push(("set-aside-manifest", path, format!("`cestore recover` set this manifest aside: {why}; gc keeps the objects it names unless `cestore gc --force`; remove the file to let them go"), None));
    }
    let missing: Vec<_> = scan
        .missing
        .iter()
        .map(|d| (d, store.manifest_path(d)))
        .collect();
    for (digest, path) in &missing {
        found.push(("missing-manifest", path, "the snapshot's manifest file is missing; gc refuses to sweep until `cestore recover` writes it from the catalogue".into(), Some(digest)));
    }
    for (kind, path, detail, digest) in found {
        let mut p = problem(kind, Severity::Corruption, path, detail);
        p.snapshots.extend(digest.copied());
        report.problems.push(p);
    }
}

/// The report of `cestore verify --tree`.
#[derive(Debug, serde::Serialize)]
pub struct TreeReport {
    /// The tree audited.
    pub tree: String,
    /// The snapshot it was compared with.
    pub manifest_digest: ManifestDigest,
    /// Every difference; none means the tree is exactly the snapshot.
    pub differences: Vec<Difference>,
}

/// Audits a directory against a snapshot: its files, and for a tree kind
/// its directories and symlinks too.
pub fn audit_tree(store: &Store, dir: &Path, digest: &str) -> Result<TreeReport> {
    let digest = resolve(store.catalogue(), digest)?;
    let differences = tree::differences(store, &digest, dir)?;
    Ok(TreeReport {
        tree: std::path::absolute(dir)
            .unwrap_or_else(|_| dir.to_path_buf())
            .to_string_lossy()
            .into_owned(),
        manifest_digest: digest,
        differences,
    })
}

/// Checks every attestation kept of `digest` under the keys `trusted`, as
/// `verify --trusted-key` does: each file beside the snapshot must hash to
/// its name (`damaged-attestation` when not) and vouch for the snapshot
/// under a key trusted (`untrusted-attestation` when not: no trusted key
/// signed it, its signature no longer verifies, or its subject is another
/// digest). A recorded attestation whose file is gone is checked from the
/// catalogue's copy. Counts each in the report.
pub fn check_attestations(
    store: &Store,
    digest: &ManifestDigest,
    trusted: &[PublicKey],
    report: &mut VerifyReport,
) -> Result<()> {
    let dir = store.beside_dir(crate::store::core::beside::Kind::Attestations, digest);
    let mut on_disk = BTreeSet::new();
    let mut found = Vec::new();
    for file in store.read_beside::<KeptAttestation>(digest)? {
        match file {
            Found::Sound(kept) => {
                on_disk.insert(kept.id);
                let path = dir.join(format!("{}.json", kept.id));
                found.push((path, Ok(*kept)));
            }
            Found::Damaged(path, why) => {
                if let Some(id) = path
                    .file_stem()
                    .and_then(|s| AttestationId::from_lower_hex(&s.to_string_lossy()))
                {
                    on_disk.insert(id);
                }
                found.push((path, Err(why)));
            }
        }
    }
    for kept in store.catalogue().attestations(digest)? {
        if !on_disk.contains(&kept.id) {
            found.push((dir.join(format!("{}.json", kept.id)), Ok(kept)));
        }
    }
    for (path, file) in found {
        *report.attestations_checked.get_or_insert(0) += 1;
        let (kind, detail) = match file {
            Err(why) => (
                "damaged-attestation",
                format!(
                    "{why}: it is not the attestation signed; remove it and `cestore recover` writes the recorded one again"
                ),
            ),
            Ok(kept) => match signed::vouched_by(signed::envelope_bytes(&kept), trusted, digest) {
                Ok(_) => {
                    *report.attestations_verified.get_or_insert(0) += 1;
                    continue;
                }
                Err(d) => ("untrusted-attestation", format!("it does not vouch for its snapshot: {d}")),
            },
        };
        report.problems.push(Problem {
            kind,
            severity: Severity::Corruption,
            path: path.to_string_lossy().into_owned(),
            detail,
            snapshots: vec![*digest],
            views: Vec::new(),
        });
    }
    Ok(())
}
