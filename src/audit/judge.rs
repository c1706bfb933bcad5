//! Judging: each digest the scan tallied looked up in the store (and with
//! `--verify` re-hashed), and its rows' claims set against what the store
//! holds. With keys trusted, each digest is also asked for an attestation
//! that vouches for it ([`crate::store::trust::signed::signature`]): a signature
//! speaks for bytes, so `unsigned` comes after every status about the bytes
//! and their source.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::digest::{KeyId, ManifestDigest};
use crate::error::Result;
use crate::sign::PublicKey;
use crate::store::core::query::SourceSummary;
use crate::store::trust::provenance::{check_source, CheckStatus, SourceCheck};
use crate::store::trust::signed::{signature, Signature};
use crate::store::upkeep::verify::{verify_store, Severity, VerifyOptions};
use crate::store::Store;

use super::*;

/// A digest's standing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// In the store; every row claims its version (and, with `--verify`,
    /// every object re-hashes right).
    Ok,
    /// Not in the store, and the registry had no copy it could take.
    Unknown,
    /// A row claims a version other than the snapshot's.
    VersionMismatch,
    /// `--verify` found an object that fails its re-hash.
    Damaged,
    /// Unknown, then fetched from `--registry` and verified.
    Pulled,
    /// `--source-repo`: the commit its newest source record names has
    /// another tree, is not in the repository, or makes no snapshot.
    SourceMismatch,
    /// `--require-clean-source`: no source record of it is clean and names
    /// a commit.
    NoCleanSource,
    /// `--trusted-key`: no stored attestation vouches for it under a key
    /// trusted.
    Unsigned,
}

impl Status {
    /// The name as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Unknown => "unknown",
            Status::VersionMismatch => "version-mismatch",
            Status::Damaged => "damaged",
            Status::Pulled => "pulled",
            Status::SourceMismatch => "source-mismatch",
            Status::NoCleanSource => "no-clean-source",
            Status::Unsigned => "unsigned",
        }
    }

    /// Whether the digest passes.
    pub fn passes(self) -> bool {
        matches!(self, Status::Ok | Status::Pulled)
    }
}

/// A version or an arm the rows claim, with how many rows and the first.
#[derive(Debug, serde::Serialize)]
pub struct Claimed<'a> {
    /// The version or arm, [`cut`].
    pub value: &'a str,
    /// The rows that claim it.
    pub rows: u64,
    /// The first row that does.
    pub first: Place<'a>,
}

/// A damaged object of a snapshot, from `--verify`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DamagedObject {
    /// The problem's kind, as `verify` names it (`object-content`, …).
    pub kind: &'static str,
    /// The object's absolute path.
    pub path: String,
    /// What is wrong.
    pub detail: String,
}

/// Everything the audit says about one digest: a view, made when asked, of
/// what [`Digests`] holds compactly.
#[derive(Debug, serde::Serialize)]
pub struct DigestAudit<'a> {
    /// The manifest digest.
    pub manifest_digest: ManifestDigest,
    /// Its standing.
    pub status: Status,
    /// The snapshot's version, or null when it is not in the store.
    pub version: Option<&'a str>,
    /// The versions the rows claim (non-strings in parentheses), at most
    /// [`KEPT_VALUES`].
    pub claimed_versions: Vec<Claimed<'a>>,
    /// Rows claiming further versions.
    pub claimed_versions_unlisted: u64,
    /// The rows that name the digest.
    pub rows: u64,
    /// The arms of those rows, at most [`KEPT_VALUES`].
    pub arms: Vec<Claimed<'a>>,
    /// Rows of further arms.
    pub arms_unlisted: u64,
    /// The first row naming it.
    pub first: Place<'a>,
    /// The last row naming it.
    pub last: Place<'a>,
    /// With `--verify`, the objects that fail their re-hash.
    pub damaged: &'a [DamagedObject],
    /// Whether it was fetched from `--registry` by this audit.
    pub pulled: bool,
    /// With `--registry`, why the digest could not be pulled.
    pub pull_error: Option<&'a str>,
    /// Its newest source record in brief, or null when it has none (or is
    /// not in the store).
    pub source: Option<&'a SourceSummary>,
    /// With `--source-repo`, what re-deriving it from its recorded commit
    /// found; null otherwise, and for a digest not in the store.
    pub source_check: Option<&'a SourceCheck>,
    /// With `--trusted-key`, whether an attestation vouches for it under a
    /// key trusted (`unsigned` for a digest not in the store); null
    /// otherwise.
    pub signature: Option<&'a Signature>,
}

/// A tree digest's standing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TreeStatus {
    /// In the store, a snapshot of the profile its field names.
    Ok,
    /// Not in the store.
    Unknown,
    /// In the store, but a snapshot of another profile than its field
    /// names (a `task_asset_manifest_digest` naming a task, say).
    ProfileMismatch,
    /// `--verify` found an object of its snapshot that fails its re-hash.
    Damaged,
    /// Unknown, then fetched from `--registry` and verified.
    Pulled,
    /// `--trusted-key`: no stored attestation vouches for it under a key
    /// trusted.
    Unsigned,
    /// An environment in the store, one of whose members fails: not in
    /// the store (or, for a task member, its tree or dependency list not),
    /// unsigned under `--trusted-key`, or damaged under `--verify`.
    MemberFailing,
}

impl TreeStatus {
    /// The name as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            TreeStatus::Ok => "ok",
            TreeStatus::Unknown => "unknown",
            TreeStatus::ProfileMismatch => "profile-mismatch",
            TreeStatus::Damaged => "damaged",
            TreeStatus::Pulled => "pulled",
            TreeStatus::Unsigned => "unsigned",
            TreeStatus::MemberFailing => "member-failing",
        }
    }
}

/// A place in the input, held: what [`Place`] says, the input's name
/// shared by every place in it.
#[derive(Debug)]
pub struct RowAt {
    /// The input: an absolute path, or `<stdin>`.
    pub file: std::sync::Arc<str>,
    /// The line, counted from 1.
    pub line: u64,
}

impl serde::Serialize for RowAt {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("RowAt", 2)?;
        st.serialize_field("file", &*self.file)?;
        st.serialize_field("line", &self.line)?;
        st.end()
    }
}

/// Everything the audit says about one digest of one field of the field
/// table ([`FieldTable`]).
#[derive(Debug, serde::Serialize)]
pub struct TreeDigestAudit {
    /// The row field that names it.
    pub field: String,
    /// What the field names.
    pub kind: DigestKind,
    /// The digest as the rows give it.
    pub digest: ManifestDigest,
    /// Its standing.
    pub status: TreeStatus,
    /// The profile the field names (`tree`, `dependencies`, `task` or `ce`).
    pub expected_profile: &'static str,
    /// The profile of the snapshot the store holds, or null when unknown.
    pub profile: Option<String>,
    /// The snapshot's manifest digest, or null when unknown: the digest
    /// itself, except for a content digest, whose dependency list it is.
    pub snapshot: Option<ManifestDigest>,
    /// The rows that name it.
    pub rows: u64,
    /// The first row naming it.
    pub first: RowAt,
    /// The last row naming it.
    pub last: RowAt,
    /// With `--verify`, the objects of its snapshot that fail their re-hash.
    pub damaged: Vec<DamagedObject>,
    /// Whether it was fetched from `--registry` by this audit.
    pub pulled: bool,
    /// With `--registry`, why the digest could not be pulled.
    pub pull_error: Option<String>,
    /// With `--trusted-key`, whether an attestation of its snapshot
    /// vouches for it under a key trusted; null otherwise.
    pub signature: Option<Signature>,
    /// For an environment in the store, each member that fails, by role
    /// and digest; absent otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failing_members: Vec<FailingMember>,
    /// For an environment in the store, its members and what a task
    /// member names (their snapshots are re-hashed with `--verify`).
    #[serde(skip)]
    pub member_snapshots: Vec<(String, ManifestDigest)>,
}

/// A member of an environment that fails its audit.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FailingMember {
    /// The role it fills.
    pub role: String,
    /// Its digest.
    pub digest: ManifestDigest,
    /// Why: `unknown` (not in the store), `incomplete` (a task whose tree or
    /// dependency list is not), `unsigned` (`--trusted-key`) or `damaged`
    /// (`--verify`).
    pub status: &'static str,
}

/// What the rows and the store say of one digest field.
#[derive(Debug, serde::Serialize)]
pub struct FieldCount {
    /// The row's field.
    pub field: String,
    /// What it names.
    pub kind: DigestKind,
    /// The rows that carry it, not null.
    pub rows: u64,
    /// The distinct digests they name.
    pub digests: u64,
    /// The rows naming a digest the store answers for (`ok`, or `pulled`).
    pub rows_answered: u64,
    /// The rows that carry it and are not answered for: a digest of
    /// another status, or a value that is no digest (`rows_malformed`).
    pub rows_unanswered: u64,
    /// Of those, the rows whose value is no digest (`malformed-digest`).
    pub rows_malformed: u64,
    /// The first row naming a digest the store does not answer for, or
    /// null when every digest is answered for.
    pub first_unanswered: Option<Unanswered>,
}

/// The first row of a field naming a digest the store does not answer for.
#[derive(Debug, serde::Serialize)]
pub struct Unanswered {
    /// The input: an absolute path, or `<stdin>`.
    pub file: String,
    /// The line, counted from 1.
    pub line: u64,
    /// The digest it names.
    pub digest: ManifestDigest,
    /// The digest's status.
    pub status: &'static str,
}

/// What the store knows of a held digest's source.
#[derive(Debug, Default)]
pub(super) struct DigestSource {
    /// The newest record in brief.
    newest: Option<SourceSummary>,
    /// Whether a record is clean and names a commit.
    clean: bool,
    /// With `--source-repo`, the re-derivation.
    check: Option<SourceCheck>,
}

/// Every distinct digest of the inputs, in digest order, held as the scan
/// tallied it; serialized (and printed) one [`DigestAudit`] at a time.
#[derive(Debug)]
pub struct Digests {
    pub(super) tallies: Vec<Tally>,
    pub(super) values: Values,
    pub(super) lines: Lines,
    damaged: BTreeMap<ManifestDigest, Vec<DamagedObject>>,
    pull_errors: BTreeMap<ManifestDigest, String>,
    sources: HashMap<ManifestDigest, DigestSource>,
    require_clean_source: bool,
    /// With `--trusted-key`, each digest's signature (every digest has one).
    signatures: Option<HashMap<ManifestDigest, Signature>>,
}

impl Digests {
    /// How many there are.
    pub fn len(&self) -> usize {
        self.tallies.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tallies.is_empty()
    }

    /// Each digest's audit, in digest order.
    pub fn iter(&self) -> impl Iterator<Item = DigestAudit<'_>> {
        self.tallies.iter().map(|t| self.audit(t))
    }

    fn status(&self, t: &Tally) -> Status {
        let Some(stored) = t.stored else {
            return Status::Unknown;
        };
        let source = self.sources.get(&t.digest);
        if self.damaged.contains_key(&t.digest) {
            Status::Damaged
        } else if t.versions.unlisted() > 0 || t.versions.iter().any(|c| c.value != stored) {
            Status::VersionMismatch
        } else if source
            .and_then(|s| s.check.as_ref())
            .is_some_and(|c| c.status == CheckStatus::SourceMismatch)
        {
            Status::SourceMismatch
        } else if self.require_clean_source && !source.is_some_and(|s| s.clean) {
            Status::NoCleanSource
        } else if self
            .signatures
            .as_ref()
            .is_some_and(|s| !matches!(s.get(&t.digest), Some(Signature::Signed { .. })))
        {
            Status::Unsigned
        } else if t.pulled {
            Status::Pulled
        } else {
            Status::Ok
        }
    }

    pub(super) fn audit<'a>(&'a self, t: &'a Tally) -> DigestAudit<'a> {
        DigestAudit {
            manifest_digest: t.digest,
            status: self.status(t),
            version: t.stored.map(|v| self.values.get(v)),
            claimed_versions: t.versions.report(&self.values, &self.lines),
            claimed_versions_unlisted: t.versions.unlisted(),
            rows: t.rows,
            arms: t.arms.report(&self.values, &self.lines),
            arms_unlisted: t.arms.unlisted(),
            first: self.lines.place(t.first),
            last: self.lines.place(t.last),
            damaged: self.damaged.get(&t.digest).map_or(&[], Vec::as_slice),
            pulled: t.pulled,
            pull_error: self.pull_errors.get(&t.digest).map(String::as_str),
            source: self.sources.get(&t.digest).and_then(|s| s.newest.as_ref()),
            source_check: self.sources.get(&t.digest).and_then(|s| s.check.as_ref()),
            signature: self.signatures.as_ref().and_then(|s| s.get(&t.digest)),
        }
    }
}

impl serde::Serialize for Digests {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// The report of an audit.
#[derive(Debug, serde::Serialize)]
pub struct AuditReport {
    /// The fields read.
    pub fields: Fields,
    /// Each input as read.
    pub inputs: Vec<Input>,
    /// The rows, over all inputs.
    pub rows: u64,
    /// One entry per distinct digest, in digest order.
    pub digests: Digests,
    /// One entry per distinct digest of each field of the field table the
    /// rows carry ([`FieldTable`]), in field then digest order.
    pub tree_digests: Vec<TreeDigestAudit>,
    /// For the digest field, then each field of the table: how many rows
    /// carry it and how many of them the store answers for.
    pub field_counts: Vec<FieldCount>,
    /// How many rows break a rule.
    pub row_problem_count: u64,
    /// The first [`LISTED`] of them, in input order.
    pub row_problems: Vec<RowProblem>,
    /// How many lines are not rows, over all inputs: lines `json.loads`
    /// refuses, or reads as something other than an object. Any digest
    /// they hold was not audited, so one fails the audit unless
    /// `allow_malformed`.
    pub malformed_count: u64,
    /// Whether malformed lines were allowed (`--allow-malformed`): then
    /// they are listed and counted but fail nothing.
    pub allow_malformed: bool,
    /// The most row problems, and malformed lines per input, listed.
    pub listed_at_most: usize,
    /// Whether objects were re-hashed (`--verify`).
    pub verified: bool,
    /// The registry unknown digests were pulled from, or null.
    pub registry: Option<String>,
    /// Whether a digest without a clean source record fails
    /// (`--require-clean-source`).
    pub require_clean_source: bool,
    /// The clone digests were re-derived in (`--source-repo`), absolute; or
    /// null.
    pub source_repo: Option<String>,
    /// The ids of the keys trusted (`--trusted-key`, `--trusted-keys`);
    /// when any is given, a digest no attestation vouches for fails.
    pub trusted_keys: Vec<KeyId>,
    /// Whether everything passed.
    pub passed: bool,
    /// The one-line verdict.
    pub verdict: String,
}

/// How to judge the digests.
pub struct JudgeOptions<'a> {
    /// Re-hash every snapshot's objects.
    pub verify: bool,
    /// Fail every digest without a clean source record naming a commit.
    pub require_clean_source: bool,
    /// A local clone to re-derive each digest from its recorded commit in.
    pub source_repo: Option<&'a std::path::Path>,
    /// The keys trusted; when any is given, each digest must be signed by
    /// one of them.
    pub trusted: &'a [PublicKey],
    /// Whether a progress line may be drawn.
    pub progress: bool,
    /// Pass an audit with malformed lines when all else passes.
    pub allow_malformed: bool,
    /// The registry pulled from, if any.
    pub registry: Option<&'a str>,
    /// The digests pulled from it.
    pub pulled: &'a BTreeSet<ManifestDigest>,
    /// The digests it could not give, and why.
    pub pull_errors: &'a BTreeMap<ManifestDigest, String>,
}

/// Every snapshot of the store with its version, asked once rather than
/// once per digest of the inputs.
fn stored_versions(store: &Store) -> Result<HashMap<ManifestDigest, String>> {
    Ok(store
        .catalogue()
        .snapshots(None, None)?
        .into_iter()
        .map(|s| (s.digest, s.version))
        .collect())
}

/// The digests of `scan` the store does not hold: the table fields'
/// manifest digests first (a tree and a dependency list before a task,
/// which is taken only once both are held, then CE ones, then
/// environments, whose pull brings their members), then the CE
/// digests. A content
/// digest names no snapshot tag, and is not among them.
pub fn unknown(store: &Store, scan: &Scan) -> Result<Vec<ManifestDigest>> {
    let stored = stored_versions(store)?;
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for kind in [
        DigestKind::Tree,
        DigestKind::Dependencies,
        DigestKind::Task,
        DigestKind::Ce,
        DigestKind::Environment,
    ] {
        for &(i, d) in scan.tree.keys() {
            let field = scan.table.fields[i].kind;
            if field == kind && !stored.contains_key(&d) && seen.insert(d) {
                out.push(d);
            }
        }
    }
    for d in scan.digests() {
        if !stored.contains_key(&d) && seen.insert(d) {
            out.push(d);
        }
    }
    Ok(out)
}

/// Looks every digest up in the store and decides its status.
pub fn judge(store: &Store, scan: Scan, opts: &JudgeOptions<'_>) -> Result<AuditReport> {
    let Scan {
        fields,
        inputs,
        lines,
        mut tallies,
        index: _,
        mut values,
        problems,
        problem_count,
        with_fields,
        table,
        tree,
        carried,
    } = scan;
    let stored = stored_versions(store)?;
    let source_repo = opts
        .source_repo
        .map(|r| std::path::absolute(r).unwrap_or_else(|_| r.to_path_buf()));
    let mut held: Vec<ManifestDigest> = Vec::new();
    let mut sources = HashMap::new();
    for t in &mut tallies {
        if let Some(v) = stored.get(&t.digest) {
            held.push(t.digest);
            sources.insert(
                t.digest,
                digest_source(store, &t.digest, v, source_repo.as_deref())?,
            );
            // No id left for the version is no version known: unknown.
            t.stored = values.id(v);
        }
        t.pulled = opts.pulled.contains(&t.digest);
    }
    let signatures = (!opts.trusted.is_empty())
        .then(|| signatures(store, &tallies, &stored, opts.trusted))
        .transpose()?;
    drop(stored);
    let mut tree_digests = tree_digests(store, &table, &tree, &lines, opts)?;
    // With --verify, the tree snapshots found are re-hashed with the rest.
    let mut hashed = held;
    if opts.verify {
        hashed.extend(tree_digests.iter().filter_map(|d| d.snapshot));
        hashed.extend(
            tree_digests
                .iter()
                .flat_map(|d| d.member_snapshots.iter().map(|(_, m)| *m)),
        );
        hashed.sort_unstable();
        hashed.dedup();
    }
    let damaged = if opts.verify && !hashed.is_empty() {
        damaged_objects(store, &hashed, opts.progress)?
    } else {
        BTreeMap::new()
    };
    for d in &mut tree_digests {
        if let Some(objects) = d.snapshot.and_then(|s| damaged.get(&s)) {
            d.damaged = objects.clone();
            if matches!(
                d.status,
                TreeStatus::Ok | TreeStatus::Unsigned | TreeStatus::Pulled
            ) {
                d.status = TreeStatus::Damaged;
            }
        }
        let broken: Vec<FailingMember> = d
            .member_snapshots
            .iter()
            .filter(|(_, m)| damaged.contains_key(m))
            .map(|(role, m)| FailingMember {
                role: role.clone(),
                digest: *m,
                status: "damaged",
            })
            .collect();
        if !broken.is_empty() {
            d.failing_members.extend(broken);
            if matches!(d.status, TreeStatus::Ok | TreeStatus::Pulled) {
                d.status = TreeStatus::MemberFailing;
            }
        }
    }
    let row_problems: Vec<RowProblem> = problems
        .into_iter()
        .map(|(at, kind, arm, detail)| {
            let place = lines.place(at);
            RowProblem {
                file: place.file.to_string(),
                line: place.line,
                kind,
                arm,
                detail,
            }
        })
        .collect();
    let digests = Digests {
        tallies,
        values,
        lines,
        damaged,
        pull_errors: opts.pull_errors.clone(),
        sources,
        require_clean_source: opts.require_clean_source,
        signatures,
    };
    let field_counts = field_counts(
        (&fields, &table, &carried),
        &digests,
        (&tree, &tree_digests),
        &digests.lines,
    );
    let malformed_count = inputs.iter().map(|i| i.malformed_count).sum();
    let rows = inputs.iter().map(|i| i.rows).sum();
    let mut by: BTreeMap<Status, usize> = BTreeMap::new();
    for d in digests.iter() {
        *by.entry(d.status).or_default() += 1;
    }
    let empty = nothing_audited(&fields, rows, with_fields);
    let mut trees: BTreeMap<TreeStatus, usize> = BTreeMap::new();
    for d in &tree_digests {
        *trees.entry(d.status).or_default() += 1;
    }
    let passed = by.keys().all(|s| s.passes())
        && trees
            .keys()
            .all(|s| matches!(s, TreeStatus::Ok | TreeStatus::Pulled))
        && problem_count == 0
        && empty.is_none()
        && (malformed_count == 0 || opts.allow_malformed);
    let verdict = verdict(
        (&by, &trees),
        digests.len(),
        problem_count,
        (malformed_count, opts.allow_malformed),
        rows,
        empty.as_deref(),
        passed,
    );
    Ok(AuditReport {
        fields,
        inputs,
        rows,
        digests,
        tree_digests,
        field_counts,
        row_problem_count: problem_count,
        row_problems,
        malformed_count,
        allow_malformed: opts.allow_malformed,
        listed_at_most: LISTED,
        verified: opts.verify,
        registry: opts.registry.map(str::to_string),
        require_clean_source: opts.require_clean_source,
        source_repo: source_repo.map(|r| r.display().to_string()),
        trusted_keys: opts.trusted.iter().map(PublicKey::id).collect(),
        passed,
        verdict,
    })
}

/// What the store's source records say of a held digest, re-derived from
/// its recorded commit in `source_repo` when one is given.
fn digest_source(
    store: &Store,
    digest: &ManifestDigest,
    version: &str,
    source_repo: Option<&std::path::Path>,
) -> Result<DigestSource> {
    let kept = store.catalogue().sources(digest)?;
    let check = source_repo
        .map(|repo| check_source(repo, digest, version, &kept))
        .transpose()?;
    Ok(DigestSource {
        newest: kept.last().map(|k| SourceSummary::from(&k.entry)),
        clean: kept
            .iter()
            .any(|k| k.entry.record.clean && k.entry.record.commit.is_some()),
        check,
    })
}

/// Whether each digest of `tallies` is signed under a key of `trusted`: an
/// attestation the store keeps of it vouches for exactly its digest. A
/// digest the store does not hold is unsigned.
fn signatures(
    store: &Store,
    tallies: &[Tally],
    stored: &HashMap<ManifestDigest, String>,
    trusted: &[PublicKey],
) -> Result<HashMap<ManifestDigest, Signature>> {
    let mut out = HashMap::with_capacity(tallies.len());
    for t in tallies {
        let sig = if stored.contains_key(&t.digest) {
            signature(
                &store.catalogue().attestations(&t.digest)?,
                trusted,
                &t.digest,
            )
        } else {
            Signature::Unsigned {
                why: "it is not in the store".into(),
            }
        };
        out.insert(t.digest, sig);
    }
    Ok(out)
}

/// Looks each tree field's digest up in the store: a manifest digest by
/// itself, a content digest through the catalogue's content-digest index;
/// with keys trusted, asks for an attestation of the snapshot found.
fn tree_digests(
    store: &Store,
    table: &FieldTable,
    tree: &BTreeMap<(usize, ManifestDigest), TreeTally>,
    lines: &Lines,
    opts: &JudgeOptions<'_>,
) -> Result<Vec<TreeDigestAudit>> {
    let (trusted, pulled, pull_errors) = (opts.trusted, opts.pulled, opts.pull_errors);
    let cat = store.catalogue();
    let names: Vec<std::sync::Arc<str>> = lines.names.iter().map(|n| n.as_str().into()).collect();
    let mut out = Vec::with_capacity(tree.len());
    for (&(i, digest), t) in tree {
        let field = &table.fields[i];
        let snapshot = if field.kind.content() {
            cat.by_content_digest(&digest.to_hex())?
        } else {
            cat.has_snapshot(&digest)?.then_some(digest)
        };
        let profile = snapshot
            .map(|d| cat.snapshot(&d).map(|row| row.profile))
            .transpose()?;
        let signature = match (trusted.is_empty(), snapshot) {
            (true, _) => None,
            (false, Some(d)) => Some(signature(&cat.attestations(&d)?, trusted, &d)),
            (false, None) => Some(Signature::Unsigned {
                why: "it is not in the store".into(),
            }),
        };
        let (member_snapshots, failing_members) = match (&profile, snapshot) {
            (Some(p), Some(d)) if p == "environment" && field.kind == DigestKind::Environment => {
                environment_members(store, &d, trusted)?
            }
            _ => (Vec::new(), Vec::new()),
        };
        let status = match &profile {
            None => TreeStatus::Unknown,
            Some(p) if p != field.kind.profile() => TreeStatus::ProfileMismatch,
            Some(_) if matches!(signature, Some(Signature::Unsigned { .. })) => {
                TreeStatus::Unsigned
            }
            Some(_) if !failing_members.is_empty() => TreeStatus::MemberFailing,
            Some(_) if pulled.contains(&digest) => TreeStatus::Pulled,
            Some(_) => TreeStatus::Ok,
        };
        let place = |at| {
            let p = lines.place(at);
            let input = names.iter().find(|n| ***n == *p.file);
            RowAt {
                file: input.cloned().unwrap_or_else(|| p.file.into()),
                line: p.line,
            }
        };
        out.push(TreeDigestAudit {
            field: field.name.clone(),
            kind: field.kind,
            digest,
            status,
            expected_profile: field.kind.profile(),
            profile,
            snapshot,
            rows: t.rows,
            first: place(t.first),
            last: place(t.last),
            damaged: Vec::new(),
            pulled: pulled.contains(&digest),
            pull_error: pull_errors.get(&digest).cloned(),
            signature,
            failing_members,
            member_snapshots,
        });
    }
    Ok(out)
}

/// An environment's members and what a task member names (what
/// `--verify` re-hashes), by role.
type MemberSnapshots = Vec<(String, ManifestDigest)>;

/// The members of a stored environment and those that fail: not in the
/// store (or not of the kind it records), a task whose tree or dependency
/// list is not, or, with keys `trusted`, not signed by one.
fn environment_members(
    store: &Store,
    digest: &ManifestDigest,
    trusted: &[PublicKey],
) -> Result<(MemberSnapshots, Vec<FailingMember>)> {
    use crate::profile::tree::stored::Stored;
    let cat = store.catalogue();
    let parsed = |d: &ManifestDigest| -> Result<Option<Stored>> {
        Ok(
            crate::profile::ce::manifest::Manifest::parse(&cat.manifest_bytes(d)?)
                .ok()
                .and_then(|m| m.tree),
        )
    };
    let Some(Stored::Environment(members)) = parsed(digest)? else {
        return Ok((Vec::new(), Vec::new()));
    };
    let mut held = Vec::new();
    let mut failing = Vec::new();
    for m in members {
        let fail = |status| FailingMember {
            role: m.role.clone(),
            digest: m.digest,
            status,
        };
        if cat.kind_of(&m.digest) != Some(m.kind) {
            failing.push(fail("unknown"));
            continue;
        }
        let named = parsed(&m.digest)?.map(|t| t.named()).unwrap_or_default();
        if named.iter().any(|n| !cat.has_snapshot(n).unwrap_or(false)) {
            failing.push(fail("incomplete"));
        } else if !trusted.is_empty()
            && matches!(
                signature(&cat.attestations(&m.digest)?, trusted, &m.digest),
                Signature::Unsigned { .. }
            )
        {
            failing.push(fail("unsigned"));
        }
        held.push((m.role.clone(), m.digest));
        held.extend(named.into_iter().map(|n| (m.role.clone(), n)));
    }
    Ok((held, failing))
}

/// The counts of each digest field: the digest field's from its digests'
/// tallies, each table field's from its own; a row is answered for when
/// the digest it names passes (`ok` or `pulled`). The first row not
/// answered for is the earliest first row of the digests that fail.
fn field_counts(
    (fields, table, carried): (&Fields, &FieldTable, &[(u64, u64)]),
    digests: &Digests,
    (tree, audits): (
        &BTreeMap<(usize, ManifestDigest), TreeTally>,
        &[TreeDigestAudit],
    ),
    lines: &Lines,
) -> Vec<FieldCount> {
    let count =
        |field: String,
         kind: DigestKind,
         (rows, malformed): (u64, u64),
         each: &mut dyn Iterator<Item = (u64, At, ManifestDigest, &'static str, bool)>| {
            let (mut digests, mut answered) = (0u64, 0u64);
            let mut first: Option<(At, ManifestDigest, &'static str)> = None;
            for (n, at, digest, status, passes) in each {
                digests += 1;
                if passes {
                    answered += n;
                } else if first.is_none_or(|(f, ..)| at.0 < f.0) {
                    first = Some((at, digest, status));
                }
            }
            FieldCount {
                field,
                kind,
                rows,
                digests,
                rows_answered: answered,
                rows_unanswered: rows.saturating_sub(answered),
                rows_malformed: malformed,
                first_unanswered: first.map(|(at, digest, status)| {
                    let p = lines.place(at);
                    Unanswered {
                        file: p.file.to_string(),
                        line: p.line,
                        digest,
                        status,
                    }
                }),
            }
        };
    let mut out = Vec::with_capacity(1 + table.len());
    out.push(count(
        fields.digest.clone(),
        DigestKind::Ce,
        carried.first().copied().unwrap_or_default(),
        &mut digests.tallies.iter().map(|t| {
            let status = digests.status(t);
            (t.rows, t.first, t.digest, status.as_str(), status.passes())
        }),
    ));
    for (i, field) in table.fields.iter().enumerate() {
        out.push(count(
            field.name.clone(),
            field.kind,
            carried.get(1 + i).copied().unwrap_or_default(),
            &mut tree
                .iter()
                .zip(audits)
                .filter(|(((f, _), _), _)| *f == i)
                .map(|((_, t), a)| {
                    let passes = matches!(a.status, TreeStatus::Ok | TreeStatus::Pulled);
                    (t.rows, t.first, a.digest, a.status.as_str(), passes)
                }),
        ));
    }
    out
}

/// Re-hashes the snapshots the store holds of `held` and gathers, by
/// snapshot, what corruption `verify` finds.
fn damaged_objects(
    store: &Store,
    held: &[ManifestDigest],
    progress: bool,
) -> Result<BTreeMap<ManifestDigest, Vec<DamagedObject>>> {
    let hexes: Vec<String> = held.iter().map(ManifestDigest::to_hex).collect();
    let report = verify_store(
        store,
        &VerifyOptions {
            digests: &hexes,
            repair_from: None,
            trusted: &[],
            progress,
        },
    )?;
    let mut damaged: BTreeMap<ManifestDigest, Vec<DamagedObject>> = BTreeMap::new();
    for p in report
        .problems
        .iter()
        .filter(|p| p.severity == Severity::Corruption)
    {
        // A problem of the catalogue itself touches every snapshot.
        let hit: &[ManifestDigest] = if p.snapshots.is_empty() {
            held
        } else {
            &p.snapshots
        };
        for d in hit {
            damaged.entry(*d).or_default().push(DamagedObject {
                kind: p.kind,
                path: p.path.clone(),
                detail: p.detail.clone(),
            });
        }
    }
    Ok(damaged)
}

/// Why nothing was audited, if so: inputs with no row, or whose rows carry
/// none of the fields, are not results files of these fields. (Malformed
/// lines fail the audit on their own, unless allowed.)
fn nothing_audited(fields: &Fields, rows: u64, with_fields: u64) -> Option<String> {
    if rows == 0 {
        Some("no line is a row (a JSON object)".to_string())
    } else if with_fields == 0 {
        Some(format!(
            "no row carries {}, {} or {} (see --digest-field, --version-field, --arm-field)",
            fields.digest, fields.version, fields.arm
        ))
    } else {
        None
    }
}

/// The one-line verdict: PASS or FAIL, why nothing was audited when so,
/// the counts (the tree digests' after the digests', when there are any),
/// and, when lines could not be read, that any digest in them was not
/// audited (and whether `--allow-malformed` let that pass).
fn verdict(
    (by, trees): (&BTreeMap<Status, usize>, &BTreeMap<TreeStatus, usize>),
    digests: usize,
    problems: u64,
    (malformed, allowed): (u64, bool),
    rows: u64,
    empty: Option<&str>,
    passed: bool,
) -> String {
    let statuses: Vec<String> = by
        .iter()
        .map(|(s, n)| format!("{n} {}", s.as_str()))
        .collect();
    let mut parts = vec![format!(
        "{} ({})",
        crate::error::counted(digests, "digest", "digests"),
        if statuses.is_empty() {
            "none".to_string()
        } else {
            statuses.join(", ")
        }
    )];
    if !trees.is_empty() {
        let statuses: Vec<String> = trees
            .iter()
            .map(|(s, n)| format!("{n} {}", s.as_str()))
            .collect();
        parts.push(format!(
            "{} ({})",
            crate::error::counted(trees.values().sum::<usize>(), "tree digest", "tree digests"),
            statuses.join(", ")
        ));
    }
    parts.push(crate::error::counted(
        problems,
        "row problem",
        "row problems",
    ));
    parts.push(crate::error::counted(
        malformed,
        "malformed line",
        "malformed lines",
    ));
    let unread = match (malformed, allowed) {
        (0, _) => String::new(),
        (n, allowed) => format!(
            "; {} could not be read, so any digest in {} was not audited{}",
            crate::error::counted(n, "line", "lines"),
            if n == 1 { "it" } else { "them" },
            if allowed {
                " (allowed: --allow-malformed)"
            } else {
                ""
            }
        ),
    };
    format!(
        "{}: {}{} in {}{unread}",
        if passed { "PASS" } else { "FAIL" },
        empty.map(|e| format!("{e}: ")).unwrap_or_default(),
        parts.join(", "),
        crate::error::counted(rows, "row", "rows")
    )
}
