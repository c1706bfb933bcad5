//! Ingesting a release: the walk, staging beside it, mending drifted objects,
//! and the common end of ingest and adopt (publish, `syncfs`, record).
//!
//! `adopt.rs`: a snapshot from a manifest and blobs (pull, import). The
//! ingest room uses the trust room (signing at ingest), the core and the
//! [`Store`] handle.

pub mod adopt;
pub mod environment;
pub mod tree;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{mpsc, Mutex};

use crate::catalogue::{
    Attached, IngestEvent, KeptAttestation, KeptSource, NewSnapshot, Origin, Provenance,
    RecordedIngest,
};
use crate::digest::ManifestDigest;
use crate::digest::ObjectId;
use crate::error::{Error, Result};
use crate::profile::ce::manifest::{Manifest, SCHEMA_VERSION};
use crate::profile::ce::rules::{self as ce_rules, LeftOut, Rejection};
use crate::profile::{ce::CE, Profile};
use crate::secrets::{self, SecretKind};
use crate::sign::PrivateKey;
use crate::source::git::PluginDir;
use crate::source::{work_tree_record, GitRequest, Source, SourceEntry, Via, WalkError, Walked};
use crate::store::core::beside::{SetAside, Written};
use crate::store::core::objects::WorkDir;
use crate::store::core::objects::{check_object, holds_its_bytes, restore_mode, ObjectState};
use crate::store::core::who::{host_name, user_name, TOOL_VERSION};
use crate::store::{Need, ObjectKey, Opener, Store};

/// What to ingest.
pub struct IngestOptions<'a> {
    /// The release's source directory; with [`IngestOptions::git`], the
    /// repository.
    pub source: &'a Path,
    /// Read the release from a revision of the git repository at `source`,
    /// not from a directory: the revision, and the plugin's directory in it.
    pub git: Option<(&'a str, PluginDir<'a>)>,
    /// The version the profile's manifest file must carry.
    pub version: &'a str,
    /// The bounds the walk enforces: the reference's, or lower.
    pub bounds: ce_rules::Bounds,
    /// Sign the snapshot with this key: an attestation kept and recorded
    /// with the ingest, in its own transaction.
    pub sign_with: Option<&'a PrivateKey>,
    /// Refuse a release a file of which looks like a secret by its content
    /// ([`crate::secrets`]); otherwise such files are reported only.
    pub refuse_secrets: bool,
}

/// What an ingest did.
#[derive(Debug, serde::Serialize)]
pub struct IngestStats {
    /// The source directory, absolute; a git source reads
    /// `git:REPO@COMMIT:PATH`.
    pub source: String,
    /// The store, absolute.
    pub store: String,
    /// Whether the snapshot was already recorded before this ingest.
    pub already_present: bool,
    /// Distinct objects written by this ingest.
    pub new_objects: u64,
    /// Distinct objects found already stored.
    pub reused_objects: u64,
    /// Bytes written to new objects.
    pub bytes_written: u64,
    /// Stored objects found drifted and repaired from the source.
    pub repaired: Vec<Repaired>,
    /// What the reference's filters left out of the snapshot (a directory
    /// counts once); the digest does not depend on it.
    pub left_out: Vec<LeftOutEntry>,
    /// The files kept (the reference's filters go by name only) whose
    /// content looks like a private key or a token, in walk order.
    pub secrets_by_content: Vec<SecretFound>,
    /// The source records kept with this ingest: the one it found (the git
    /// commit its source lies in), or those an adopted snapshot brought.
    pub sources: Vec<SourceEntry>,
    /// Why no source record was kept although the source lies in a git
    /// repository: the repository could not be read.
    pub source_unrecorded: Option<String>,
    /// The attestations kept with this ingest: the one `--sign-with` made,
    /// or those an adopted snapshot brought.
    pub attestations: Vec<KeptRef>,
    /// What the catalogue recorded, for taking the ingest back.
    #[serde(skip)]
    pub recorded: RecordedIngest,
}

/// An attestation an ingest kept, as its report names it.
#[derive(Debug, serde::Serialize)]
pub struct KeptRef {
    /// The attestation's id: the SHA-256 of its envelope.
    pub id: crate::digest::AttestationId,
    /// The key id its signature claims.
    pub keyid: String,
}

/// The report of `cestore ingest`.
#[derive(Debug, serde::Serialize)]
pub struct IngestReport {
    /// The reference's provenance fields.
    pub provenance: Provenance,
    /// What the ingest did.
    pub ingest: IngestStats,
}

/// Where each distinct object of the release stands during an ingest.
pub(super) enum Pending {
    Reused,
    Staged(String),
    /// Stored, with its bytes intact but its mode drifted (a view made
    /// writable with `chmod -R` changes the object it links).
    ModeDrifted(String),
    /// Stored with other bytes: the source's are staged to replace them.
    Replacing(String, String),
}

/// Where a walk's distinct contents came to stand, sorted out: the objects
/// staged to publish, those found drifted with how each is mended (in key
/// order), and how many were stored already.
pub(super) struct Settled {
    pub(super) staged: Vec<(String, ObjectKey)>,
    pub(super) drifted: Vec<Drifted>,
    pub(super) reused: u64,
}

/// Sorts out where each distinct content of a walk stands ([`Settled`]).
pub(super) fn settle(pending: HashMap<ObjectKey, Pending>) -> Settled {
    let mut settled = Settled {
        staged: Vec::new(),
        drifted: Vec::new(),
        reused: 0,
    };
    for (key, state) in pending {
        match state {
            Pending::Reused => settled.reused += 1,
            Pending::Staged(name) => settled.staged.push((name, key)),
            Pending::ModeDrifted(was) => settled.drifted.push(Drifted {
                key,
                was,
                mend: Mend::Mode,
            }),
            Pending::Replacing(name, was) => settled.drifted.push(Drifted {
                key,
                was,
                mend: Mend::Bytes(name),
            }),
        }
    }
    settled.drifted.sort_by_key(|d| d.key);
    settled
}

/// How an ingest mends an object it found drifted.
#[derive(Debug)]
pub enum Mend {
    /// Its mode is set back.
    Mode,
    /// The source's bytes, staged under this name, are renamed over it.
    Bytes(String),
}

/// An object an ingest found drifted, and how it mends it.
#[derive(Debug)]
pub struct Drifted {
    /// The object.
    pub key: ObjectKey,
    /// What was wrong with it.
    pub was: String,
    /// How it is mended.
    pub mend: Mend,
}

/// An entry of the source the snapshot leaves out, and why.
#[derive(Debug, serde::Serialize)]
pub struct LeftOutEntry {
    /// Its path relative to the source.
    pub path: String,
    /// Which filter left it out.
    pub reason: LeftOut,
}

/// A file kept whose content looks like a secret ([`crate::secrets::scan`]).
#[derive(Clone, Debug, serde::Serialize)]
pub struct SecretFound {
    /// Its path relative to the source.
    pub path: String,
    /// What its content looks like.
    pub kind: SecretKind,
    /// The line it starts on, from 1.
    pub line: u64,
}

/// One object an ingest repaired, as reported.
#[derive(Debug, serde::Serialize)]
pub struct Repaired {
    /// The object's absolute path.
    pub object: String,
    /// `mode` (set back) or `bytes` (replaced by the source's).
    pub repair: &'static str,
    /// What was wrong with it.
    pub was: String,
}

/// How many files may wait for a staging thread: bounds the memory held
/// (each at most 2 MiB).
const STAGING_QUEUE: usize = 8;

/// Walks the release, checking every rule, and writes each content the
/// store lacks to the work directory on staging threads while the walk goes
/// on. Returns the walk, where each distinct object stands, and the bytes staged.
fn walk_and_stage(
    store: &Store,
    work: &WorkDir,
    source: &Source,
    opts: &IngestOptions<'_>,
) -> Result<Staging> {
    let (tx, rx) = mpsc::sync_channel::<(ObjectKey, Vec<u8>)>(STAGING_QUEUE);
    let rx = Mutex::new(rx);
    std::thread::scope(|s| {
        // Staging threads start with the first content the store lacks: a
        // warm ingest, which stages nothing, starts none.
        let mut workers = Vec::new();
        let mut start_staging = || {
            for i in 0..staging_threads() {
                let rx = &rx;
                workers.push(s.spawn(move || {
                    crate::pool::drain(rx, work.stager(i), |stager, (key, data)| {
                        Ok::<_, Error>((key, stager.stage(&key, &data)?))
                    })
                }));
            }
        };
        let mut started = false;
        let mut pending: HashMap<ObjectKey, Pending> = HashMap::new();
        let mut bytes_staged = 0u64;
        // Each content is read for secrets once, as it passes.
        let mut scanned: HashMap<ObjectId, Option<secrets::Found>> = HashMap::new();
        let mut found_secrets = Vec::new();
        let walked = source.walk(opts.version, opts.bounds, |file| -> Result<()> {
            let key = ObjectKey {
                id: file.id,
                executable: file.executable,
            };
            if file.size > 0 {
                let found = *scanned
                    .entry(file.id)
                    .or_insert_with(|| secrets::scan(file.data));
                if let Some(found) = found {
                    found_secrets.push(SecretFound {
                        path: file.path.to_string(),
                        kind: found.kind,
                        line: found.line,
                    });
                }
            }
            // A zero-length file is never an object: views make it fresh.
            if file.size == 0 || pending.contains_key(&key) {
                return Ok(());
            }
            let (data, size) = (file.data, file.size);
            let mut stage = || {
                if !started {
                    started = true;
                    start_staging();
                }
                bytes_staged += size;
                // A closed queue means a staging thread failed; its error is reported below.
                let _ = tx.send((key, data.to_vec()));
            };
            let state = pending_state(store, &key, size, &mut stage)?;
            pending.insert(key, state);
            Ok(())
        });
        drop(tx);
        let mut staged = Vec::new();
        for w in workers {
            staged.extend(
                w.join()
                    // A panic is a bug, not a case a caller handles.
                    .map_err(|_| Error::Integrity("a staging thread panicked".into()))??,
            );
        }
        let walked = walked.map_err(walk_error(source))?;
        for (key, name) in staged {
            let state = match pending.remove(&key) {
                Some(Pending::Replacing(_, why)) => Pending::Replacing(name, why),
                _ => Pending::Staged(name),
            };
            pending.insert(key, state);
        }
        Ok(Staging {
            walked,
            pending,
            bytes_staged,
            secrets: found_secrets,
        })
    })
}

/// How many staging threads an ingest starts. The walk itself keeps one
/// core busy reading and hashing; on two cores one staging thread beside it
/// measured as fast as two (ext4 serialises inode allocation), so stage on
/// the remaining cores, at most three.
fn staging_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get().saturating_sub(1))
        .clamp(1, 3)
}

/// Where one distinct content of the walk stands against the store: reused,
/// or staged (calling `stage`) to be published or to replace a damaged
/// object. The source is at hand: a drifted object is mended from it, at
/// publishing time, so that a rejected tree changes nothing.
pub(super) fn pending_state(
    store: &Store,
    key: &ObjectKey,
    size: u64,
    stage: &mut dyn FnMut(),
) -> Result<Pending> {
    Ok(match check_object(store, key, size)? {
        ObjectState::Intact => Pending::Reused,
        ObjectState::Missing => {
            stage();
            Pending::Staged(String::new())
        }
        ObjectState::Damaged(why)
            if holds_its_bytes(store.objects(), &store.object_path(key), key, size)? =>
        {
            Pending::ModeDrifted(why)
        }
        ObjectState::Damaged(why) => {
            stage();
            Pending::Replacing(String::new(), why)
        }
    })
}

/// What the walk staged.
struct Staging {
    walked: Walked,
    pending: HashMap<ObjectKey, Pending>,
    bytes_staged: u64,
    /// The files whose content looks like a secret.
    secrets: Vec<SecretFound>,
}

/// A walk's error of `source` as the library's: a rule the release breaks
/// and a repository that cannot be read name, for a git source, the
/// revision and the path inside it.
fn walk_error(source: &Source) -> impl Fn(WalkError<Error>) -> Error + '_ {
    move |e| match e {
        WalkError::Rejected(r) => source.in_revision(Error::Rejected(r)),
        WalkError::Git(e) => source.in_revision(e.into()),
        WalkError::Visitor(e) => e,
    }
}

/// Checks the version and opens the release's source (a directory, or a
/// revision of a git repository): what an ingest checks before it opens the
/// store.
pub fn open_source(opts: &IngestOptions<'_>) -> Result<Source> {
    if !ce_rules::is_exact_version(opts.version) {
        return Err(Rejection::VersionNotExact {
            version: opts.version.to_string(),
        }
        .into());
    }
    match opts.git {
        Some((rev, dir)) => Source::open_git(&GitRequest {
            repo: opts.source,
            rev,
            dir,
        }),
        None => Ok(Source::open(opts.source)?),
    }
}

/// What a release's walk gives without a store: its provenance and where it is.
#[derive(Debug, serde::Serialize)]
pub struct DigestReport {
    /// The reference's provenance fields.
    pub provenance: Provenance,
    /// The source directory, absolute; a git source reads
    /// `git:REPO@COMMIT:PATH`.
    pub source: String,
}

/// Walks the release at `opts.source` with every rule ingest checks, reading
/// and hashing each file and keeping none, and returns its provenance: no
/// object is written and no store or catalogue is opened or created.
pub fn digest_release(opts: &IngestOptions<'_>) -> Result<DigestReport> {
    let source = open_source(opts)?;
    let walked = source
        .walk(opts.version, opts.bounds, |_| Ok::<(), Error>(()))
        .map_err(walk_error(&source))?;
    let manifest = Manifest::new(walked.entries);
    Ok(DigestReport {
        provenance: Provenance {
            name: CE.name().to_string(),
            version: opts.version.to_string(),
            manifest_schema_version: i64::from(SCHEMA_VERSION),
            manifest_digest: manifest.digest,
            file_count: manifest.entries.len() as i64,
            total_bytes: manifest.total_bytes() as i64,
        },
        source: source.shown().to_string(),
    })
}

/// Validates a release and stores it in the store `open` opens once the
/// release's source is open (made when absent).
pub fn ingest(open: Opener<'_>, opts: &IngestOptions<'_>) -> Result<IngestReport> {
    let source = open_source(opts)?;
    let mut store = open(Need::Creating)?;
    ingest_into(&mut store, &source, opts)
}

/// Validates and stores a release in an open store.
pub fn ingest_into(
    store: &mut Store,
    source: &Source,
    opts: &IngestOptions<'_>,
) -> Result<IngestReport> {
    let plan = plan_ingest(store, source, opts)?;
    apply_ingest(store, plan)
}

/// A release walked and checked, its new contents staged in a work
/// directory: what [`apply_ingest`] publishes and records. Dropping it
/// changes nothing in the store.
pub struct IngestPlan {
    work: WorkDir,
    manifest: Manifest,
    version: String,
    source: String,
    staged: Vec<(String, ObjectKey)>,
    drifted: Vec<Drifted>,
    reused: u64,
    bytes_staged: u64,
    left_out: Vec<(LeftOut, String)>,
    secrets: Vec<SecretFound>,
    sources: Vec<SourceEntry>,
    attestations: Vec<KeptAttestation>,
    tree_digest: Option<(String, ManifestDigest)>,
    source_error: Option<String>,
}

impl IngestPlan {
    /// Adds attestations of the snapshot, kept and recorded with it by
    /// [`apply_ingest`], in its own transaction.
    #[cfg(test)]
    pub fn attest(&mut self, attestations: impl IntoIterator<Item = KeptAttestation>) {
        self.attestations.extend(attestations);
    }

    /// The snapshot the release makes.
    pub fn digest(&self) -> ManifestDigest {
        self.manifest.digest
    }

    /// Whether applying the plan changes any object: it adds one, or mends
    /// a drifted one.
    pub fn changes_objects(&self) -> bool {
        !self.staged.is_empty() || !self.drifted.is_empty()
    }
}

/// Walks the release, checking every rule, and stages what the store lacks;
/// changes nothing the store's readers see.
pub fn plan_ingest(store: &Store, source: &Source, opts: &IngestOptions<'_>) -> Result<IngestPlan> {
    // A git source reads objects, not the work tree the store may lie in.
    if let Ok(real) = std::fs::canonicalize(store.root()) {
        if source.is_directory() && real.starts_with(source.root()) {
            return Err(Error::StoreInsideSource {
                path: real,
                source_dir: source.root().to_path_buf(),
            });
        }
    }
    let work = store.work_dir("ingest")?;
    let Staging {
        mut walked,
        pending,
        bytes_staged,
        secrets,
    } = walk_and_stage(store, &work, source, opts)?;
    // Every rule of the reference first, as a release it refuses is
    // refused for that: only then a secret, the first in walk order.
    if let (true, Some(first)) = (opts.refuse_secrets, secrets.first()) {
        return Err(Rejection::SecretContent {
            path: source.root().join(&first.path),
            kind: first.kind,
            line: first.line,
        }
        .into());
    }

    let manifest = Manifest::new(std::mem::take(&mut walked.entries));
    let found = find_source(store, source, &manifest, opts);
    let Settled {
        staged,
        drifted,
        reused,
    } = settle(pending);
    let attestations = match opts.sign_with {
        Some(key) => {
            let at = found
                .record
                .as_ref()
                .map_or_else(crate::clock::now, |e| e.at.clone());
            let what = crate::sign::SnapshotFacts {
                name: CE.name(),
                version: opts.version,
                digest: manifest.digest,
                source: found.record.as_ref().map(|e| &e.record),
                ingested_at: &at,
            };
            match crate::store::trust::signed::sign_once(store.catalogue(), key, &what)? {
                crate::store::trust::signed::Signing::New(kept) => vec![kept],
                crate::store::trust::signed::Signing::Held(_) => Vec::new(),
            }
        }
        None => Vec::new(),
    };
    Ok(IngestPlan {
        work,
        manifest,
        version: opts.version.to_string(),
        source: source.shown().to_string(),
        staged,
        drifted,
        reused,
        bytes_staged,
        left_out: walked.left_out,
        secrets,
        sources: found.record.into_iter().collect(),
        attestations,
        tree_digest: found.learned,
        source_error: found.error,
    })
}

/// What an ingest found of its source's provenance.
#[derive(Default)]
struct FoundSource {
    record: Option<SourceEntry>,
    learned: Option<(String, ManifestDigest)>,
    error: Option<String>,
}

/// The source record of a release just walked into `manifest`: a git
/// source's, or that of the git work tree a directory lies in, if any. A
/// repository that cannot be read records nothing and says why: the ingest
/// itself does not depend on it.
fn find_source(
    store: &Store,
    source: &Source,
    manifest: &Manifest,
    opts: &IngestOptions<'_>,
) -> FoundSource {
    let entry = |record| SourceEntry {
        at: crate::clock::now(),
        via: Via::Ingest,
        record,
    };
    if let Some((record, key)) = source.git_record() {
        return FoundSource {
            record: Some(entry(record)),
            learned: Some((key.as_str().to_string(), manifest.digest)),
            error: None,
        };
    }
    match work_tree_record(
        source.root(),
        manifest,
        opts.version,
        opts.bounds,
        store.catalogue(),
    ) {
        Ok(Some(found)) => FoundSource {
            record: Some(entry(found.record)),
            learned: found
                .learned
                .map(|(key, digest)| (key.as_str().to_string(), digest)),
            error: None,
        },
        Ok(None) => FoundSource::default(),
        Err(e) => FoundSource {
            error: Some(crate::error::error_chain(&e)),
            ..FoundSource::default()
        },
    }
}

/// Publishes and records what [`plan_ingest`] staged.
pub fn apply_ingest(store: &mut Store, plan: IngestPlan) -> Result<IngestReport> {
    let source_unrecorded = plan.source_error;
    let mut report = publish_and_record(
        store,
        plan.work,
        Staged {
            manifest: &plan.manifest,
            name: None,
            version: &plan.version,
            event: "ingest",
            source: &plan.source,
            origin: None,
            sources: plan.sources,
            attestations: plan.attestations,
            tree_digest: plan.tree_digest,
            objects: plan.staged,
            drifted: plan.drifted,
            reused: plan.reused,
            bytes: plan.bytes_staged,
            left_out: plan.left_out,
            secrets: plan.secrets,
        },
    )?;
    report.ingest.source_unrecorded = source_unrecorded;
    Ok(report)
}

/// Takes back an ingest whose command then failed (see
/// [`crate::catalogue::Catalogue::undo_ingest`]), with the snapshot's
/// manifest, source records and attestations when the snapshot goes too.
pub fn undo_ingest(store: &mut Store, report: &IngestReport) -> Result<()> {
    let digest = report.provenance.manifest_digest;
    let mut aside = SetAside::new(store, &digest)?;
    let forgotten =
        match store
            .catalogue_mut()
            .undo_ingest(&digest, &report.ingest.recorded, || aside.take())
        {
            Ok(forgotten) => forgotten,
            Err(e) => return Err(aside.put_back(e)),
        };
    drop(aside);
    if forgotten {
        store
            .catalogue()
            .checkpoint_after(crate::catalogue::Work::Committed)?;
    }
    Ok(())
}

/// Makes what was published durable and records the snapshot and its
/// event; returns whether the snapshot was already recorded.
fn record(
    store: &mut Store,
    s: &Staged<'_>,
    kept: &[KeptSource],
    sync: bool,
    (new_objects, reused): (u64, u64),
    repaired: &[Repaired],
    delta: Option<&(ManifestDigest, Vec<u8>)>,
) -> Result<(bool, RecordedIngest)> {
    if sync {
        store.sync()?;
    }
    let digest = s.manifest.digest;
    let already_present = store.catalogue().has_snapshot(&digest)?;
    // The event's time is its source record's, so that each names the other.
    let at = s
        .sources
        .iter()
        .find(|e| e.via == Via::Ingest)
        .map(|e| e.at.clone())
        .unwrap_or_default();
    let event = |event: &str, source: String, new_objects: u64, reused: u64| IngestEvent {
        digest,
        event: event.into(),
        at: if event == "repair" {
            String::new()
        } else {
            at.clone()
        },
        source,
        host: host_name(),
        user: user_name(),
        tool_version: TOOL_VERSION.to_string(),
        new_objects: new_objects as i64,
        reused_objects: reused as i64,
    };
    let repairs: Vec<IngestEvent> = repaired
        .iter()
        .map(|r| {
            let source = format!("{} ({}; {} from {})", r.object, r.was, r.repair, s.source);
            event("repair", source, 0, 0)
        })
        .collect();
    let recorded = store.catalogue_mut().record_ingest(
        &NewSnapshot {
            name: s.snapshot_name(),
            version: s.version,
            digest,
            manifest: &s.manifest.bytes,
            entries: &s.manifest.entries,
            first_ingested_at: None,
            tree: s.manifest.tree.as_ref(),
            delta: delta.map(|(base, kept)| crate::catalogue::Delta { base: *base, kept }),
        },
        s.origin.map(|o| o.event(digest)).as_ref(),
        &event(s.event, s.source.to_string(), new_objects, reused),
        &repairs,
        Attached {
            sources: kept,
            attestations: &s.attestations,
            tree_digest: s.tree_digest.as_ref().map(|(k, d)| (k.as_str(), *d)),
        },
    )?;
    Ok((already_present, recorded))
}

/// The name a snapshot row of `manifest` carries unless one is given: the
/// CE plugin's for a CE manifest, the kind (`tree`, `dependencies`,
/// `task`) for a tree-kind one.
pub fn snapshot_name(manifest: &Manifest) -> &'static str {
    match manifest.tree {
        None => CE.name(),
        Some(_) => manifest.profile(),
    }
}

/// What an ingest (or an adoption) has staged, ready to become a snapshot.
pub struct Staged<'a> {
    /// The snapshot's manifest.
    pub manifest: &'a Manifest,
    /// The snapshot's name when given (`ingest --name`); else the profile's
    /// ([`snapshot_name`]).
    pub name: Option<&'a str>,
    /// The release version.
    pub version: &'a str,
    /// What the event is: `ingest`, `pull` or `import`.
    pub event: &'static str,
    /// Where it came from, for the event.
    pub source: &'a str,
    /// Where an adopted snapshot was first ingested, when its carrier says.
    pub origin: Option<&'a Origin>,
    /// The source records to keep with the snapshot: the one this ingest
    /// found, or those an adopted snapshot's carrier brought.
    pub sources: Vec<SourceEntry>,
    /// The attestations to keep with the snapshot.
    pub attestations: Vec<KeptAttestation>,
    /// The digest of the git tree the source record names, learned by this
    /// ingest, by its key.
    pub tree_digest: Option<(String, ManifestDigest)>,
    /// The staged objects: their names in the work directory, and keys.
    pub objects: Vec<(String, ObjectKey)>,
    /// Stored objects found drifted, to mend before recording.
    pub drifted: Vec<Drifted>,
    /// What the source's filters left out.
    pub left_out: Vec<(LeftOut, String)>,
    /// The files kept whose content looks like a secret.
    pub secrets: Vec<SecretFound>,
    /// Distinct objects found already stored.
    pub reused: u64,
    /// The bytes of the staged objects.
    pub bytes: u64,
}

impl Staged<'_> {
    /// The name the snapshot's row carries: the one given, else
    /// [`snapshot_name`]'s.
    fn snapshot_name(&self) -> &str {
        self.name.unwrap_or(snapshot_name(self.manifest))
    }
}

/// The most threads that publish one snapshot's objects.
const PUBLISH_THREADS: usize = 4;

/// The common end of ingest and adopt: writes the manifest, source records
/// and attestations into the work directory beside the staged objects,
/// makes every byte staged durable with one `syncfs` before any of it is
/// named (so a crash never leaves a named file short of its bytes), lists
/// the staged objects as in flight, publishes them without overwriting,
/// publishes the rest, makes the names durable with a second `syncfs`, and
/// records the snapshot, its ingest event, source records and attestations
/// in one transaction.
pub fn publish_and_record(store: &mut Store, work: WorkDir, s: Staged<'_>) -> Result<IngestReport> {
    let digest = s.manifest.digest;
    // A new snapshot's manifest is kept as its delta against the last of
    // its name, when that saves bytes (catalogue/kept.rs).
    let delta = match store.catalogue().has_snapshot(&digest)? {
        true => None,
        false => store.delta_for(s.manifest, s.snapshot_name()),
    };
    let staged_manifest = store.stage_manifest(&work, s.manifest, delta.as_ref())?;
    let kept: Vec<KeptSource> = s.sources.iter().cloned().map(KeptSource::new).collect();
    let mut written = Written::new(digest);
    kept.iter()
        .try_for_each(|k| written.stage(store, &work, k))
        .and_then(|()| {
            s.attestations
                .iter()
                .try_for_each(|a| written.stage(store, &work, a))
        })?;
    if !s.objects.is_empty()
        || !s.drifted.is_empty()
        || staged_manifest.is_some()
        || written.staged_any()
    {
        store.sync()?;
    }
    work.note_publishing(s.objects.iter().map(|(_, key)| key), &digest)?;
    let new_objects = work.publish_all(store, &s.objects, crate::pool::cores(PUBLISH_THREADS))?;
    let reused = s.reused + (s.objects.len() as u64 - new_objects);
    let repaired = mend_drifted(store, &work, &s.drifted)?;
    let new_manifest = match staged_manifest {
        Some(staged) => store.publish_manifest(&work, s.manifest, staged)?,
        None => false,
    };
    let recorded = written.publish(store, &work).and_then(|()| {
        let sync = new_objects > 0 || new_manifest || !repaired.is_empty() || written.any();
        record(
            store,
            &s,
            &kept,
            sync,
            (new_objects, reused),
            &repaired,
            delta.as_ref(),
        )
    });
    let (already_present, recorded) = match recorded {
        Ok(r) => r,
        Err(e) => {
            // A failed command leaves no manifest, source record or
            // attestation for `recover` to revive, unless another ingest of
            // the same snapshot recorded it meanwhile. Best effort: what is
            // left is a sound snapshot.
            written.take_back(store);
            if new_manifest {
                let _ = store.forget_unrecorded_manifest(&digest);
            }
            return Err(e);
        }
    };
    // Another ingest of the same snapshot that failed may have taken the
    // manifest back just before this one recorded it: a look suffices, the
    // bytes were checked above.
    if !store.manifest_path(&digest).exists() && store.write_manifest(&work, s.manifest)? {
        store.sync()?;
    }
    // The manifest its delta was made against may have been forgotten
    // meanwhile (the catalogue then kept this one whole): so is its file.
    if delta.is_some_and(|(base, _)| !store.manifest_path(&base).exists()) {
        store.heal_manifest(s.manifest)?;
        store.sync()?;
    }
    drop(work);
    if !already_present {
        // The command has succeeded; a log still held by a reader is folded
        // in by a later command.
        store
            .catalogue()
            .checkpoint_after(crate::catalogue::Work::Committed)?;
    }
    Ok(IngestReport {
        provenance: Provenance {
            name: s.snapshot_name().to_string(),
            version: s.version.to_string(),
            manifest_schema_version: i64::from(SCHEMA_VERSION),
            manifest_digest: digest,
            file_count: s.manifest.entries.len() as i64,
            total_bytes: s.manifest.total_bytes() as i64,
        },
        ingest: IngestStats {
            source: s.source.to_string(),
            store: store.root().display().to_string(),
            already_present,
            new_objects,
            reused_objects: reused,
            bytes_written: if new_objects > 0 { s.bytes } else { 0 },
            repaired,
            left_out: s
                .left_out
                .into_iter()
                .map(|(reason, path)| LeftOutEntry { path, reason })
                .collect(),
            secrets_by_content: s.secrets,
            sources: s.sources,
            source_unrecorded: None,
            attestations: s
                .attestations
                .iter()
                .map(|a| KeptRef {
                    id: a.id,
                    keyid: a.keyid.clone(),
                })
                .collect(),
            recorded,
        },
    })
}

/// Mends the stored objects an ingest found drifted: their mode set back,
/// or the source's bytes renamed over them.
fn mend_drifted(store: &Store, work: &WorkDir, drifted: &[Drifted]) -> Result<Vec<Repaired>> {
    let mut repaired = Vec::new();
    for d in drifted {
        match &d.mend {
            Mend::Mode => restore_mode(store.objects(), &store.object_path(&d.key), &d.key)?,
            Mend::Bytes(name) => work.replace(store, name, &d.key)?,
        }
        repaired.push(Repaired {
            object: store.object_path(&d.key).display().to_string(),
            repair: match d.mend {
                Mend::Mode => "mode",
                Mend::Bytes(_) => "bytes",
            },
            was: d.was.clone(),
        });
    }
    Ok(repaired)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::core::beside::{Found, Kind};
    use crate::store::testutil;

    fn attestation() -> KeptAttestation {
        KeptAttestation::new(
            r#"{"payload":"e30=","payloadType":"application/vnd.in-toto+json","signatures":[]}"#,
            "a".repeat(64),
            "2026-01-02T03:04:05.000Z",
        )
        .unwrap()
    }

    /// Plans the ingest of a minimal release with one attestation.
    fn planned(store: &Store, src: &Path) -> IngestPlan {
        testutil::release(src);
        let source = Source::open(src).unwrap();
        let opts = IngestOptions {
            source: src,
            git: None,
            version: "1.2.3",
            bounds: ce_rules::Bounds::REFERENCE,
            sign_with: None,
            refuse_secrets: false,
        };
        let mut plan = plan_ingest(store, &source, &opts).unwrap();
        plan.attest([attestation()]);
        plan
    }

    #[test]
    fn an_ingest_keeps_and_records_its_attestations_and_its_undoing_takes_them() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = testutil::open(tmp.path());
        let plan = planned(&store, &tmp.path().join("src"));
        let digest = plan.digest();
        let report = apply_ingest(&mut store, plan).unwrap();
        assert_eq!(
            store.catalogue().attestations(&digest).unwrap(),
            [attestation()]
        );
        let found = store.read_beside::<KeptAttestation>(&digest).unwrap();
        assert!(
            matches!(&found[..], [Found::Sound(k)] if **k == attestation()),
            "{found:?}"
        );

        undo_ingest(&mut store, &report).unwrap();
        assert!(!store.catalogue().has_snapshot(&digest).unwrap());
        assert!(!store.beside_dir(Kind::Attestations, &digest).exists());
    }

    #[test]
    fn an_ingest_that_cannot_keep_its_attestations_changes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = testutil::open(tmp.path());
        let plan = planned(&store, &tmp.path().join("src"));
        let digest = plan.digest();
        std::fs::write(store.root().join("attestations"), "not a directory\n").unwrap();
        let err = apply_ingest(&mut store, plan).unwrap_err();
        assert!(err.to_string().contains("attestations"), "{err}");
        assert!(!store.catalogue().has_snapshot(&digest).unwrap());
        assert!(!store.manifest_path(&digest).exists());
    }
}
