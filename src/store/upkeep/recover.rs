//! Recovery: the catalogue rebuilt from the manifests in the store.
//!
//! The manifests under `manifests/` are the store's own record of its
//! snapshots; the catalogue is their index. [`recover`], under the store's
//! exclusive lock:
//!
//! 1. sets aside a catalogue SQLite cannot use (renamed, never deleted) and
//!    starts a new one, salvaging what rows the old one still gives;
//! 2. records every manifest the catalogue lacks that passes the checks an
//!    import passes ([`check_for_recording`]: the reference's rules and
//!    bounds, every object present, the profile's content entry read from
//!    its object and checked against its hash), with a `recovered` event; a manifest that
//!    fails them is moved to `manifests-set-aside/` with the reason, never
//!    deleted, and its objects stay live there;
//! 3. rewrites the rows of a recorded snapshot that disagree with its manifest;
//! 4. writes the manifest of a recorded snapshot that has none on disk, and
//!    reconciles the files kept beside it (source records, attestations): a
//!    file the catalogue lacks is recorded, a recorded one whose file is gone
//!    is written again;
//! 5. records again the shared views and the salvaged views still on disk;
//! 6. makes it durable and folds the write-ahead log in.
//!
//! What cannot be recovered is reported.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use rustix::fs::FileType;

use crate::catalogue::{Catalogue, IngestEvent, KeptAttestation, KeptSource, NewSnapshot, ViewRow};
use crate::digest::{ManifestDigest, ObjectId};
use crate::error::{error_chain, Error, Result};
use crate::profile::ce::manifest::Manifest;
use crate::profile::ce::rules::ManifestRuleError;
use crate::profile::ce::CE;
use crate::profile::Profile;
use crate::store::core::beside::{Beside, Found};
use crate::store::core::manifests::FoundManifest;
use crate::store::core::objects::WorkDir;
use crate::store::core::objects::{check_object, ObjectState};
use crate::store::core::who::{host_name, user_name, TOOL_VERSION};
use crate::store::Store;

/// One thing recovery could not mend.
#[derive(Debug, serde::Serialize)]
pub struct Unrecovered {
    /// The path involved.
    pub path: String,
    /// Why.
    pub detail: String,
}

/// A manifest recovery refused to record and moved aside.
#[derive(Debug, serde::Serialize)]
pub struct SetAside {
    /// The snapshot its name claims.
    pub manifest_digest: ManifestDigest,
    /// Where it is now, under `manifests-set-aside/`.
    pub path: String,
    /// The check it failed, as a stable identifier.
    pub rule: &'static str,
    /// Why, in words.
    pub detail: String,
}

/// What `cestore recover` did.
#[derive(Debug, Default, serde::Serialize)]
pub struct Recovery {
    /// The store.
    pub store: String,
    /// Where an unusable catalogue was set aside, if it was.
    pub set_aside: Option<String>,
    /// Snapshots recorded again from their manifests.
    pub recovered: Vec<ManifestDigest>,
    /// Recorded snapshots whose rows were rewritten from their manifests.
    pub rewritten: Vec<ManifestDigest>,
    /// Manifests written to disk from the catalogue.
    pub manifests_written: Vec<ManifestDigest>,
    /// Manifests refused and moved to `manifests-set-aside/`.
    pub manifests_set_aside: Vec<SetAside>,
    /// Views recorded again.
    pub views_recorded: Vec<String>,
    /// Events salvaged from the set-aside catalogue.
    pub events_salvaged: u64,
    /// Source records recorded again from their files.
    pub sources_recorded: u64,
    /// Source record files written again from the catalogue.
    pub sources_written: u64,
    /// Attestations recorded again from their files.
    pub attestations_recorded: u64,
    /// Attestation files written again from the catalogue.
    pub attestations_written: u64,
    /// Snapshots recorded after recovery.
    pub snapshots: u64,
    /// What could not be mended.
    pub problems: Vec<Unrecovered>,
}

/// Why a sound manifest found on disk is not recorded; one variant per check.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The entries break one of the reference's rules or bounds.
    #[error("it breaks a rule of the reference: {0}")]
    Rules(#[from] ManifestRuleError),
    /// An object the manifest needs is not in the store.
    #[error("the object of '{path}' ({id}) is not in the store")]
    MissingObject {
        /// The file it is for.
        path: String,
        /// Its SHA-256.
        id: ObjectId,
    },
    /// An object has another size or mode than the manifest says, or its
    /// bytes hash to another digest.
    #[error("the object of '{path}' ({id}) is damaged: {why}")]
    DamagedObject {
        /// The file it is for.
        path: String,
        /// Its SHA-256.
        id: ObjectId,
        /// What is wrong with it.
        why: String,
    },
    /// A tree-kind manifest holds what no capture records, or is a task
    /// whose tree or dependency list is not recorded.
    #[error("it breaks a rule of the tree profile: {0}")]
    Tree(#[from] crate::profile::tree::stored::CheckError),
    /// The bytes of the profile's content entry break its rules
    /// ([`Profile::check_content`]).
    #[error("its {file} is refused: {why}", file = CE.content_file())]
    Content {
        /// Why, as the error's chain reads.
        why: String,
    },
}

impl Refusal {
    /// A stable identifier of the check failed.
    pub fn rule(&self) -> &'static str {
        match self {
            Refusal::Rules(r) => r.rule(),
            Refusal::Tree(r) => r.rule(),
            Refusal::MissingObject { .. } => "missing-object",
            Refusal::DamagedObject { .. } => "damaged-object",
            Refusal::Content { .. } => CE.content_rule(),
        }
    }
}

/// Checks a manifest found on disk as an import checks what it receives:
/// the profile's rules and bounds ([`Profile::check_entries`]), every
/// object present with its size and mode, and the profile's content entry
/// ([`Profile::content_entry`]) read from its object, checked against its
/// hash, then as an ingest checks it ([`crate::store::ingest::adopt::content_version`]).
/// Returns the release's version. A damaged object of that entry is not a
/// refusal when `known_version` (from
/// a salvaged row) says the version: `verify --repair-from` mends objects.
pub fn check_for_recording(
    store: &Store,
    manifest: &Manifest,
    known_version: Option<&str>,
) -> std::result::Result<String, Refusal> {
    match &manifest.tree {
        None => CE.check_entries(&manifest.entries)?,
        Some(stored) => {
            let catalogue = store.catalogue();
            crate::profile::tree::stored::check(stored, &|d| catalogue.kind_of(d))?;
        }
    }
    for e in manifest.entries.iter().filter(|e| e.size > 0) {
        let state =
            check_object(store, &e.key(), e.size).map_err(|err| Refusal::DamagedObject {
                path: e.path.clone(),
                id: e.sha256,
                why: error_chain(&err),
            })?;
        match state {
            ObjectState::Intact => {}
            ObjectState::Missing => {
                return Err(Refusal::MissingObject {
                    path: e.path.clone(),
                    id: e.sha256,
                })
            }
            ObjectState::Damaged(why) => {
                return Err(Refusal::DamagedObject {
                    path: e.path.clone(),
                    id: e.sha256,
                    why,
                })
            }
        }
    }
    if manifest.tree.is_some() {
        // A tree kind has no manifest file and no version.
        return Ok(String::new());
    }
    let entry = CE.content_entry(&manifest.entries);
    let mut bytes = Vec::new();
    if entry.size > 0 {
        let path: PathBuf = store.object_path(&entry.key());
        // At most one file's bytes, and one more: a grown object is damaged.
        let read = std::fs::File::open(&path)
            .and_then(|f| f.take(CE.bounds().file_bytes + 1).read_to_end(&mut bytes));
        let damaged = match read {
            Err(e) => Some(format!("could not read '{}': {e}", path.display())),
            Ok(_) if ObjectId::of(&bytes) != entry.sha256 => {
                Some("its bytes hash to another digest".to_string())
            }
            Ok(_) => None,
        };
        if let Some(why) = damaged {
            return match known_version {
                Some(v) => Ok(v.to_string()),
                None => Err(Refusal::DamagedObject {
                    path: entry.path.clone(),
                    id: entry.sha256,
                    why,
                }),
            };
        }
    }
    crate::store::ingest::adopt::content_version(&bytes).map_err(|e| Refusal::Content {
        why: error_chain(&e),
    })
}

/// What opens a store for recovery: with `true`, its catalogue is set aside
/// whatever it holds ([`Store::open_for_recovery`]).
pub type RecoveryOpener<'a> = &'a dyn Fn(bool) -> Result<(Store, Option<PathBuf>)>;

/// Rebuilds the catalogue from the manifests in the store `open` opens.
pub fn recover(open: RecoveryOpener<'_>) -> Result<Recovery> {
    let (store, set_aside) = open(false)?;
    let first_try = set_aside.is_none();
    match rebuild(store, set_aside) {
        // Damage the integrity check did not see: start from a new catalogue.
        Err(Error::Catalogue { .. }) if first_try => {
            let (store, set_aside) = open(true)?;
            rebuild(store, set_aside)
        }
        done => done,
    }
}

/// What a salvaged catalogue said of each snapshot: its version and when it
/// was first ingested.
type Salvaged = BTreeMap<ManifestDigest, (String, String, String)>;

fn rebuild(mut store: Store, set_aside: Option<PathBuf>) -> Result<Recovery> {
    let mut report = Recovery {
        store: store.root().display().to_string(),
        set_aside: set_aside.as_ref().map(|p| p.display().to_string()),
        ..Recovery::default()
    };
    let salvage = set_aside
        .as_deref()
        .map(Catalogue::salvage)
        .unwrap_or_default();
    let versions: Salvaged = salvage
        .snapshots
        .iter()
        .map(|s| {
            let at = s.first_ingested_at.clone();
            (s.digest, (s.version.clone(), at, s.name.clone()))
        })
        .collect();

    let work = store.work_dir("recover")?;
    let mut seen = BTreeSet::new();
    // A task is recorded only after the tree and dependency list it names,
    // an environment after its members (tasks among them): manifests of the
    // other kinds first, then tasks, then environments (a kind is in its
    // first bytes).
    let mut found_manifests = store.list_manifests()?;
    found_manifests.sort_by_cached_key(|found| {
        use crate::profile::tree::stored::Kind;
        // A delta (catalogue/kept.rs) reads as a CE manifest here: no task
        // or environment is kept as one.
        let kind = found.digest.and_then(|d| {
            std::fs::File::open(store.manifest_path(&d))
                .and_then(|mut f| {
                    let mut head = [0u8; 16];
                    f.read_exact(&mut head).map(|()| head)
                })
                .ok()
                .map(|head| Kind::of(&head))
        });
        let order = match kind {
            Some(Kind::Task) => 1u8,
            Some(Kind::Environment) => 2,
            _ => 0,
        };
        // Within a kind, each manifest after the one it is kept against, so
        // that the catalogue keeps it as the same delta.
        (order, found.digest.map_or(0, |d| store.kept_depth(&d)))
    });
    for found in &found_manifests {
        let Some(digest) = found.digest else {
            report.problems.push(Unrecovered {
                path: found.path.display().to_string(),
                detail: "not a manifest's name; left as it is".into(),
            });
            continue;
        };
        seen.insert(digest);
        recover_manifest(&mut store, &work, found, digest, &versions, &mut report)?;
    }
    write_missing_manifests(&store, &work, &seen, &mut report)?;
    (report.sources_recorded, report.sources_written) =
        reconcile::<KeptSource>(&store, &work, &mut report.problems)?;
    (report.attestations_recorded, report.attestations_written) =
        reconcile::<KeptAttestation>(&store, &work, &mut report.problems)?;
    for event in &salvage.ingests {
        store.catalogue().add_event(event)?;
        report.events_salvaged += 1;
    }
    record_views(&mut store, salvage.views, &mut report)?;

    drop(work);
    store.sync()?;
    store
        .catalogue()
        .checkpoint_after(crate::catalogue::Work::Rebuilt)?;
    report.snapshots = store.catalogue().snapshots(None, None)?.len() as u64;
    Ok(report)
}

/// Recovers one manifest found on disk: reads it (or writes it again from
/// the catalogue's sound copy), then mends the rows of a recorded snapshot,
/// or records one that passes the checks, or sets it aside.
fn recover_manifest(
    store: &mut Store,
    work: &WorkDir,
    found: &FoundManifest,
    digest: ManifestDigest,
    versions: &Salvaged,
    report: &mut Recovery,
) -> Result<()> {
    let recorded = store.catalogue().has_snapshot(&digest).unwrap_or(false);
    let manifest = match store.read_manifest(&digest) {
        Ok(m) => m,
        // A recorded snapshot's catalogue copy may still be sound.
        Err(e) => match recorded_manifest(store.catalogue(), &digest) {
            Some(m) => {
                store.write_manifest(work, &m)?;
                report.manifests_written.push(digest);
                m
            }
            None => {
                report.problems.push(Unrecovered {
                    path: found.path.display().to_string(),
                    detail: format!(
                        "{}; it still keeps from gc every object named in it, and gc \
                         refuses to sweep until it is mended or `cestore gc --force`",
                        error_chain(&e)
                    ),
                });
                return Ok(());
            }
        },
    };
    if recorded {
        return mend_recorded(store, found, &manifest, report);
    }
    let salvaged = versions.get(&digest);
    let version = match check_for_recording(store, &manifest, salvaged.map(|(v, _, _)| v.as_str()))
    {
        Ok(v) => v,
        Err(refusal) => {
            let detail = format!("not recorded: {refusal}");
            let path = store.set_aside_manifest(&digest, &detail)?;
            report.manifests_set_aside.push(SetAside {
                manifest_digest: digest,
                path: path.display().to_string(),
                rule: refusal.rule(),
                detail,
            });
            return Ok(());
        }
    };
    let first = salvaged
        .map(|(_, at, _)| at.clone())
        .or_else(|| modified_at(&found.path));
    // A tree kind's row keeps the name its ingest was given, when the
    // set-aside catalogue still says it; a CE row's name is the plugin's.
    let name = match (&manifest.tree, salvaged) {
        (Some(_), Some((_, _, name))) => name.clone(),
        _ => crate::store::ingest::snapshot_name(&manifest).to_string(),
    };
    record_recovered(store, found, &manifest, &name, &version, first.as_deref())?;
    report.recovered.push(digest);
    Ok(())
}

/// Rewrites a recorded snapshot's rows when they disagree with its manifest,
/// and reports a snapshot that breaks a rule of the reference.
fn mend_recorded(
    store: &mut Store,
    found: &FoundManifest,
    manifest: &Manifest,
    report: &mut Recovery,
) -> Result<()> {
    let digest = manifest.digest;
    if !store.catalogue().rows_match(manifest) {
        store.catalogue_mut().rewrite_rows(manifest)?;
        report.rewritten.push(digest);
    }
    let broken = match &manifest.tree {
        None => CE
            .check_entries(&manifest.entries)
            .err()
            .map(|r| r.to_string()),
        Some(stored) => crate::profile::tree::stored::check_alone(stored)
            .err()
            .map(|r| r.to_string()),
    };
    if let Some(rule) = broken {
        report.problems.push(Unrecovered {
            path: found.path.display().to_string(),
            detail: format!(
                "the recorded snapshot breaks a rule of the reference: {rule}; \
                 no view of it is handed out; `cestore rm {digest}` forgets it"
            ),
        });
    }
    Ok(())
}

/// Records a snapshot found on disk, with a `recovered` event.
fn record_recovered(
    store: &mut Store,
    found: &FoundManifest,
    manifest: &Manifest,
    name: &str,
    version: &str,
    first_ingested_at: Option<&str>,
) -> Result<()> {
    let digest = manifest.digest;
    // Kept in the catalogue as on disk: as the same delta, when its base is
    // recorded (else whole).
    let kept = store.kept_delta(&digest);
    let snapshot = NewSnapshot {
        name,
        version,
        digest,
        manifest: &manifest.bytes,
        entries: &manifest.entries,
        first_ingested_at,
        tree: manifest.tree.as_ref(),
        delta: kept
            .as_ref()
            .map(|(base, kept)| crate::catalogue::Delta { base: *base, kept }),
    };
    let event = IngestEvent {
        digest,
        event: "recovered".into(),
        at: String::new(),
        source: found.path.display().to_string(),
        host: host_name(),
        user: user_name(),
        tool_version: TOOL_VERSION.to_string(),
        new_objects: 0,
        reused_objects: 0,
    };
    store
        .catalogue_mut()
        .record_ingest(&snapshot, None, &event, &[], Default::default())?;
    Ok(())
}

/// Writes the manifest of each recorded snapshot that has none on disk
/// (not in `seen`), from the catalogue's sound copy.
fn write_missing_manifests(
    store: &Store,
    work: &WorkDir,
    seen: &BTreeSet<ManifestDigest>,
    report: &mut Recovery,
) -> Result<()> {
    for row in store.catalogue().snapshots(None, None)? {
        if seen.contains(&row.digest) {
            continue;
        }
        match recorded_manifest(store.catalogue(), &row.digest) {
            Some(m) => {
                store.write_manifest(work, &m)?;
                report.manifests_written.push(row.digest);
            }
            None => report.problems.push(Unrecovered {
                path: store.catalogue().path().display().to_string(),
                detail: format!(
                    "the catalogue's manifest of {} is damaged and no manifest file holds it",
                    row.digest
                ),
            }),
        }
    }
    Ok(())
}

/// Records every sound file of kind `K` beside a recorded snapshot that the
/// catalogue lacks, and writes again every one the catalogue holds whose
/// file is gone; a damaged file is reported and left as it is. Returns how
/// many were recorded and written.
fn reconcile<K: Beside>(
    store: &Store,
    work: &WorkDir,
    problems: &mut Vec<Unrecovered>,
) -> Result<(u64, u64)> {
    let (mut recorded, mut written) = (0, 0);
    let what = K::KIND.one();
    for row in store.catalogue().snapshots(None, None)? {
        let digest = row.digest;
        let mut on_disk = BTreeSet::new();
        for found in store.read_beside::<K>(&digest)? {
            match found {
                Found::Sound(kept) => {
                    on_disk.insert(kept.id());
                    if kept.record(store.catalogue(), &digest)? {
                        recorded += 1;
                    }
                }
                Found::Damaged(path, why) => problems.push(Unrecovered {
                    path: path.display().to_string(),
                    detail: format!("not a sound {what} ({why}); left as it is"),
                }),
            }
        }
        for kept in K::recorded(store.catalogue(), &digest)? {
            if !on_disk.contains(&kept.id()) && store.write_beside(work, &digest, &kept)? {
                written += 1;
            }
        }
    }
    Ok((recorded, written))
}

/// Records again the salvaged views and every snapshot's shared view that
/// are still directories on disk, of snapshots still recorded.
fn record_views(store: &mut Store, salvaged: Vec<ViewRow>, report: &mut Recovery) -> Result<()> {
    let mut views = salvaged;
    for row in store.catalogue().snapshots(None, None)? {
        let path = store.shared_view_dir(&row.digest);
        let root_id = crate::store::views::build::root_id(&path);
        views.push(ViewRow::found_shared(
            path.to_string_lossy().into_owned(),
            row.digest,
            root_id,
        ));
    }
    for view in views {
        let is_dir = rustix::fs::lstat(view.path.as_str())
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory);
        if !is_dir
            || store.catalogue().view(&view.path)?.is_some()
            || !store.catalogue().has_snapshot(&view.digest)?
        {
            continue;
        }
        store.catalogue_mut().add_view(&view)?;
        report.views_recorded.push(view.path);
    }
    Ok(())
}

/// The catalogue's copy of a snapshot's manifest, when it is sound.
fn recorded_manifest(cat: &Catalogue, digest: &ManifestDigest) -> Option<Manifest> {
    let bytes = cat.manifest_bytes(digest).ok()?;
    Manifest::parse(&bytes).ok().filter(|m| m.digest == *digest)
}

/// A file's modification time as RFC 3339 UTC with milliseconds.
fn modified_at(path: &Path) -> Option<String> {
    let st = rustix::fs::stat(path).ok()?;
    Some(crate::clock::rfc3339(
        st.st_mtime,
        (st.st_mtime_nsec / 1_000_000) as i64,
    ))
}
