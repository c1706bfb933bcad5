//! The JSON contract (`docs/json.md`): every command's `--json` output parsed
//! into structs that refuse unknown fields, so that a field added, renamed or
//! dropped fails here first; and a table of failing invocations, each of which
//! must print exactly one JSON error object with the documented code and kind.

// Every field is declared to pin the schema, read or not.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::util::{
    self, assert_ok, minimal_plugin, minimal_store, object_path, os, sha_hex, write, TestEnv,
};

// ---------------------------------------------------------------------------
// The schema, as docs/json.md gives it
// ---------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Provenance {
    name: String,
    version: String,
    manifest_schema_version: i64,
    manifest_digest: String,
    file_count: u64,
    total_bytes: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IngestStats {
    source: String,
    store: String,
    already_present: bool,
    new_objects: u64,
    reused_objects: u64,
    bytes_written: u64,
    repaired: Vec<RepairedOut>,
    left_out: Vec<LeftOutOut>,
    secrets_by_content: Vec<SecretFoundOut>,
    sources: Vec<SourceEntryOut>,
    source_unrecorded: Option<String>,
    attestations: Vec<KeptRefOut>,
}

/// A file kept whose content looks like a secret.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretFoundOut {
    path: String,
    kind: String,
    line: u64,
}

/// An attestation an ingest kept.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeptRefOut {
    id: String,
    keyid: String,
}

/// A source record as kept, with when and how (docs/format.md).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SourceEntryOut {
    pub(crate) at: String,
    pub(crate) via: String,
    pub(crate) record: SourceRecordOut,
}

/// Where a snapshot's bytes came from.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SourceRecordOut {
    pub(crate) read_from: String,
    pub(crate) repository: String,
    pub(crate) commit: Option<String>,
    pub(crate) path: String,
    pub(crate) tree: Option<String>,
    pub(crate) tag: Option<String>,
    pub(crate) clean: bool,
    #[serde(default)]
    pub(crate) changes: Option<ChangesOut>,
    #[serde(default)]
    pub(crate) commit_refused: Option<String>,
}

/// What differs from the commit's snapshot.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChangesOut {
    pub(crate) added: Vec<String>,
    pub(crate) changed: Vec<String>,
    pub(crate) removed: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RepairedOut {
    object: String,
    repair: String,
    was: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LeftOutOut {
    path: String,
    reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IngestOut {
    ok: bool,
    provenance: Provenance,
    ingest: IngestStats,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DigestOut {
    ok: bool,
    provenance: Provenance,
    source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ViewOut {
    path: String,
    manifest_digest: String,
    kind: String,
    method: String,
    linked: u64,
    copied: u64,
    created_at: String,
    on_disk: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileOut {
    path: String,
    sha256: String,
    size: u64,
    executable: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShowOut {
    ok: bool,
    provenance: Provenance,
    profile: String,
    harness_digests: Option<BTreeMap<String, String>>,
    first_ingested_at: Option<String>,
    last_ingested_at: Option<String>,
    ingest_count: u64,
    views: Vec<ViewOut>,
    sources: Vec<SourceEntryOut>,
    attestations: Vec<ShownAttestationOut>,
    files: Option<Vec<FileOut>>,
    #[serde(default)]
    members: Option<Vec<ShownMemberOut>>,
    #[serde(default)]
    environments: Vec<String>,
    came_from: Option<CameFromOut>,
}

/// `show`'s `came_from` (docs/json.md).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CameFromOut {
    how: String,
    source: String,
    at: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShownMemberOut {
    pub(crate) role: String,
    pub(crate) kind: String,
    pub(crate) digest: String,
    pub(crate) name: Option<String>,
}

/// The report of `ingest --profile environment` (docs/json.md).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EnvironmentIngestOut {
    pub(crate) ok: bool,
    pub(crate) profile: String,
    pub(crate) name: String,
    pub(crate) manifest_digest: String,
    pub(crate) members: Vec<EnvironmentMemberOut>,
    pub(crate) stored: bool,
    pub(crate) store: String,
}

/// One member in [`EnvironmentIngestOut`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EnvironmentMemberOut {
    pub(crate) role: String,
    pub(crate) kind: String,
    pub(crate) digest: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShownAttestationOut {
    id: String,
    keyid: String,
    at: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestOut {
    ok: bool,
    manifest_digest: String,
    canonical_manifest: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckoutOut {
    ok: bool,
    manifest_digest: String,
    view: String,
    requested_method: String,
    linked: u64,
    copied: u64,
    copy_reasons: BTreeMap<String, u64>,
    directories: u64,
    modes_restored: Vec<String>,
    spare: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PathOut {
    ok: bool,
    manifest_digest: String,
    path: String,
    created: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotOut {
    manifest_digest: String,
    name: String,
    version: String,
    manifest_schema_version: i64,
    file_count: u64,
    total_bytes: u64,
    first_ingested_at: String,
    profile: String,
    source: Option<SourceSummaryOut>,
}

/// A snapshot's newest source record in brief (`list`, `audit`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SourceSummaryOut {
    pub(crate) commit: Option<String>,
    pub(crate) tag: Option<String>,
    pub(crate) clean: bool,
    pub(crate) read_from: String,
    pub(crate) via: String,
}

/// A snapshot re-derived from its recorded commit (`audit --source-repo`,
/// `verify --source`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SourceCheckOut {
    pub(crate) status: String,
    pub(crate) mismatch: Option<String>,
    pub(crate) commit: Option<String>,
    pub(crate) path: Option<String>,
    pub(crate) expected: String,
    pub(crate) found: Option<String>,
    pub(crate) detail: Option<String>,
}

/// `verify --source REPO DIGEST`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct VerifySourceOut {
    pub(crate) ok: bool,
    pub(crate) manifest_digest: String,
    pub(crate) repository: String,
    pub(crate) status: String,
    pub(crate) mismatch: Option<String>,
    pub(crate) commit: Option<String>,
    pub(crate) path: Option<String>,
    pub(crate) expected: String,
    pub(crate) found: Option<String>,
    pub(crate) detail: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListOut {
    ok: bool,
    snapshots: Vec<SnapshotOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventOut {
    manifest_digest: String,
    event: String,
    at: String,
    source: String,
    host: String,
    user: String,
    tool_version: String,
    new_objects: u64,
    reused_objects: u64,
    source_record: Option<SourceRecordOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LogOut {
    ok: bool,
    ingests: Vec<EventOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HitOut {
    manifest_digest: String,
    version: String,
    path: String,
    sha256: String,
    size: u64,
    executable: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FindOut {
    ok: bool,
    matches: Vec<HitOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, tag = "change", rename_all = "kebab-case")]
enum ChangeOut {
    Added {
        path: String,
        sha256: String,
    },
    Removed {
        path: String,
        sha256: String,
    },
    Content {
        path: String,
        from: String,
        to: String,
        exec_changed: bool,
    },
    Exec {
        path: String,
        executable: bool,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiffOut {
    ok: bool,
    from: String,
    to: String,
    changes: Vec<ChangeOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProblemOut {
    kind: String,
    severity: String,
    path: String,
    detail: String,
    snapshots: Vec<String>,
    views: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifyOut {
    ok: bool,
    snapshots_checked: u64,
    objects_checked: u64,
    bytes_hashed: u64,
    repaired: Vec<String>,
    stale_views: Vec<StaleViewOut>,
    problems: Vec<ProblemOut>,
    /// Only with `--trusted-key`.
    #[serde(default)]
    attestations_checked: Option<u64>,
    /// Only with `--trusted-key`.
    #[serde(default)]
    attestations_verified: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "kebab-case")]
enum DifferenceOut {
    Missing {
        path: String,
    },
    ExtraFile {
        path: String,
    },
    ExtraDirectory {
        path: String,
    },
    ContentChanged {
        path: String,
        expected: String,
        found: String,
    },
    ExecChanged {
        path: String,
        expected: bool,
    },
    Symlink {
        path: String,
    },
    NotAFile {
        path: String,
    },
    MissingDirectory {
        path: String,
    },
    NotADirectory {
        path: String,
    },
    MissingSymlink {
        path: String,
    },
    NotASymlink {
        path: String,
    },
    SymlinkChanged {
        path: String,
        expected: String,
        found: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TreeOut {
    ok: bool,
    tree: String,
    manifest_digest: String,
    differences: Vec<DifferenceOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MountOut {
    source: String,
    target: String,
    read_only: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MountsOut {
    ok: bool,
    arm: String,
    plugin_dir: Option<String>,
    manifest_digest: Option<String>,
    gitnexus_runtime_manifest_digest: Option<String>,
    gitnexus_runtime_view: Option<String>,
    gitnexus_runtime_ingest: Option<StoredOut>,
    gitnexus_runtime_components: Vec<RuntimeComponentOut>,
    mounts: Vec<MountOut>,
}

/// What storing a tree-kind snapshot did, as a runtime staged reports it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredOut {
    already_present: bool,
    new_objects: u64,
    reused_objects: u64,
    bytes_written: u64,
    source: String,
    store: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ArmOut {
    arm: String,
    plugin_dir: Option<String>,
    mounts: Vec<MountOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StageOut {
    ok: bool,
    provenance: Option<Provenance>,
    view: Option<String>,
    view_kind: Option<String>,
    ingest: Option<IngestStats>,
    gitnexus_runtime_manifest_digest: Option<String>,
    gitnexus_runtime_view: Option<String>,
    gitnexus_runtime_ingest: Option<StoredOut>,
    gitnexus_runtime_components: Vec<RuntimeComponentOut>,
    environment: Option<StagedEnvironmentOut>,
    arms: Vec<ArmOut>,
}

/// The environment `stage --environment` records: `ingest --profile
/// environment`'s report without `ok`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StagedEnvironmentOut {
    profile: String,
    name: String,
    manifest_digest: String,
    members: Vec<EnvironmentMemberOut>,
    stored: bool,
    store: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportOut {
    ok: bool,
    manifest_digest: String,
    file: String,
    format: String,
    objects: u64,
    bytes: u64,
    sha256: String,
    attestations: u64,
    #[serde(default)]
    members: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BundleOut {
    file: String,
    format: String,
    objects: u64,
    manifest_digest: String,
    attestations: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportOut {
    ok: bool,
    provenance: Option<Provenance>,
    ingest: Option<IngestStats>,
    bundle: BundleOut,
    #[serde(default)]
    members: Vec<ImportedMemberOut>,
}

/// A member an import took first (a bundle of an environment or a task).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportedMemberOut {
    manifest_digest: String,
    already_present: bool,
    new_objects: u64,
    reused_objects: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiscardOut {
    ok: bool,
    view: String,
    manifest_digest: Option<String>,
    recorded: bool,
    removed: bool,
    spare: bool,
}

/// The release object of `stage --hold`: the discard's, with `signal`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseOut {
    ok: bool,
    view: String,
    manifest_digest: Option<String>,
    recorded: bool,
    removed: bool,
    spare: bool,
    signal: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GcOut {
    ok: bool,
    dry_run: bool,
    force: bool,
    #[serde(rename = "unsafe")]
    unsafe_manifests: Vec<UnrecoveredOut>,
    refused: bool,
    objects: Vec<String>,
    bytes_freed: u64,
    temporary: Vec<String>,
    shared_views: Vec<String>,
    spares: Vec<String>,
    stale_view_records: Vec<String>,
    source_records: Vec<String>,
    attestations: Vec<String>,
    manifests: Vec<String>,
    objects_kept: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecoverOut {
    ok: bool,
    store: String,
    set_aside: Option<String>,
    recovered: Vec<String>,
    rewritten: Vec<String>,
    manifests_written: Vec<String>,
    manifests_set_aside: Vec<SetAsideOut>,
    views_recorded: Vec<String>,
    events_salvaged: u64,
    sources_recorded: u64,
    sources_written: u64,
    attestations_recorded: u64,
    attestations_written: u64,
    snapshots: u64,
    problems: Vec<UnrecoveredOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetAsideOut {
    manifest_digest: String,
    path: String,
    rule: String,
    detail: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UnrecoveredOut {
    path: String,
    detail: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StaleViewOut {
    view: String,
    manifest_digest: String,
    renew: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RmOut {
    ok: bool,
    manifest_digest: String,
    views_forgotten: Vec<String>,
    shared_views: Vec<String>,
}

/// One entry as upstream's `TaskAssetSnapshot` lists it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TreeEntryOut {
    path: String,
    kind: String,
    size: u64,
    sha256: String,
    mode: u32,
    link_target: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DependencyOut {
    source: String,
    target: String,
    snapshot_path: String,
    kind: String,
    entries: Vec<TreeEntryOut>,
    total_bytes: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IngestTreeOut {
    ok: bool,
    profile: String,
    name: String,
    manifest_digest: String,
    declarations: Vec<String>,
    entries: u64,
    total_bytes: u64,
    already_present: bool,
    new_objects: u64,
    reused_objects: u64,
    bytes_written: u64,
    source: String,
    store: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IngestRuntimeOut {
    ok: bool,
    profile: String,
    name: String,
    manifest_digest: String,
    rules: String,
    components: Vec<RuntimeComponentOut>,
    entries: u64,
    total_bytes: u64,
    already_present: bool,
    new_objects: u64,
    reused_objects: u64,
    bytes_written: u64,
    source: String,
    store: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeComponentOut {
    path: String,
    source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IngestDependencyOut {
    ok: bool,
    profile: String,
    name: String,
    digest: String,
    dependency_content_digest: String,
    dependencies: Vec<DependencyOut>,
    entries: u64,
    total_bytes: u64,
    already_present: bool,
    new_objects: u64,
    reused_objects: u64,
    bytes_written: u64,
    source: String,
    store: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IngestTaskOut {
    ok: bool,
    profile: String,
    name: String,
    digest: String,
    manifest_digest: String,
    repo_identity: String,
    harness_identity: String,
    resolved_sha: String,
    declarations: Vec<String>,
    entries: Vec<TreeEntryOut>,
    dependency_declarations: Vec<(String, String)>,
    dependencies: Vec<DependencyOut>,
    dependency_content_digest: String,
    dependency_manifest_digest: String,
    total_bytes: u64,
    already_present: bool,
    new_objects: u64,
    reused_objects: u64,
    bytes_written: u64,
    source: String,
    store: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WritableOut {
    ok: bool,
    manifest_digest: String,
    profile: String,
    path: String,
    writable: bool,
    reflinked: u64,
    copied: u64,
    bytes_copied: u64,
    directories: u64,
    symlinks: u64,
    max_fallback_bytes: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MaterializeOut {
    ok: bool,
    digest: String,
    clone: String,
    declarations: Vec<String>,
    reflinked: u64,
    copied: u64,
    bytes_copied: u64,
    directories: u64,
    symlinks: u64,
    max_fallback_bytes: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExitCodeOut {
    kind: String,
    code: u8,
    meaning: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExitCodesOut {
    ok: bool,
    exit_codes: Vec<ExitCodeOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorBody {
    code: u8,
    kind: String,
    message: String,
    rule: Option<String>,
    reference_message: Option<String>,
    path: Option<String>,
    hint: Option<String>,
    matches: Option<Vec<MatchOut>>,
    versions: Option<Vec<String>>,
}

/// One thing an ambiguous name matches: a snapshot, or (`find --object`) a
/// stored content.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum MatchOut {
    Snapshot(SnapshotMatch),
    Content(ContentMatch),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotMatch {
    manifest_digest: String,
    version: String,
    ingested_at: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ContentMatch {
    sha256: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorOut {
    ok: bool,
    error: ErrorBody,
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Stdout as exactly one JSON object, then as `T`.
pub(crate) fn one_object<T: DeserializeOwned>(out: &Output, what: &str) -> T {
    let mut values =
        serde_json::Deserializer::from_slice(&out.stdout).into_iter::<serde_json::Value>();
    let first = match values.next() {
        Some(Ok(v)) => v,
        other => panic!(
            "{what}: stdout is not one JSON object ({other:?}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    };
    assert!(
        values.next().is_none(),
        "{what}: more than one JSON value on stdout:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(first.is_object(), "{what}: not an object: {first}");
    serde_json::from_value(first.clone())
        .unwrap_or_else(|e| panic!("{what}: does not fit the documented schema ({e}): {first}"))
}

/// Runs a command that must succeed with `--json` and parses it as `T`.
pub(crate) fn run_typed<T: DeserializeOwned>(env: &TestEnv, args: &[&OsStr]) -> T {
    let mut all = args.to_vec();
    all.push(os("--json"));
    let out = env.run(&all);
    assert_ok(&out);
    one_object(&out, &format!("{args:?}"))
}

fn absolute(path: &str) {
    assert!(Path::new(path).is_absolute(), "not absolute: {path}");
}

fn is_digest(s: &str) {
    assert!(
        s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "not a digest: {s}"
    );
}

// ---------------------------------------------------------------------------
// Every command's output fits its schema
// ---------------------------------------------------------------------------

#[test]
fn every_command_fits_the_documented_schema() {
    let (env, src) = util::with_plugin("src", "1.0.0");
    write(&src.join("scripts/run.sh"), "#!/bin/sh\n");
    util::chmod(&src.join("scripts/run.sh"), 0o755);

    let ingest: IngestOut = run_typed(
        &env,
        &[os("ingest"), src.as_os_str(), os("--version"), os("1.0.0")],
    );
    assert!(ingest.ok && !ingest.ingest.already_present);
    absolute(&ingest.ingest.source);
    absolute(&ingest.ingest.store);
    let d = ingest.provenance.manifest_digest.clone();
    is_digest(&d);
    assert_eq!(ingest.provenance.name, "compound-engineering");
    assert_eq!(ingest.provenance.manifest_schema_version, 1);
    assert_eq!(ingest.provenance.file_count, 5);
    assert!(ingest.ingest.new_objects + ingest.ingest.reused_objects > 0);
    assert!(ingest.ingest.bytes_written > 0 && ingest.provenance.total_bytes > 0);

    // digest: the same provenance, and nothing stored.
    let no_store = env.path("no-store");
    let out = Command::new(util::bin())
        .args([
            os("digest"),
            src.as_os_str(),
            os("--version"),
            os("1.0.0"),
            os("--json"),
        ])
        .arg("--store")
        .arg(&no_store)
        .output()
        .unwrap();
    assert_ok(&out);
    let digest: DigestOut = one_object(&out, "digest");
    assert!(digest.ok);
    assert_eq!(digest.provenance.manifest_digest, d);
    assert_eq!(digest.provenance.version, ingest.provenance.version);
    assert_eq!(digest.provenance.file_count, ingest.provenance.file_count);
    assert_eq!(digest.provenance.total_bytes, ingest.provenance.total_bytes);
    absolute(&digest.source);
    assert!(!no_store.exists(), "digest made a store");

    let view = env.path("view");
    let checkout: CheckoutOut = run_typed(&env, &[os("checkout"), os(&d), view.as_os_str()]);
    assert!(checkout.ok);
    assert_eq!(checkout.manifest_digest, d);
    absolute(&checkout.view);
    assert_eq!(checkout.requested_method, "auto");
    assert_eq!(checkout.linked + checkout.copied, 5);
    assert!(checkout.directories > 0 && checkout.copy_reasons.values().all(|n| *n > 0));

    let path: PathOut = run_typed(&env, &[os("path"), os(&d[..12])]);
    assert!(path.ok && path.created);
    absolute(&path.path);
    assert_eq!(path.manifest_digest, d);

    let show: ShowOut = run_typed(&env, &[os("show"), os(&d), os("--files")]);
    assert!(show.ok && show.ingest_count == 1);
    assert_eq!(show.provenance.manifest_digest, d);
    assert!(show.first_ingested_at.is_some() && show.last_ingested_at.is_some());
    assert_eq!(show.views.len(), 2);
    for v in &show.views {
        absolute(&v.path);
        assert_eq!(v.manifest_digest, d);
        assert!(["checkout", "shared"].contains(&v.kind.as_str()), "{v:?}");
        assert!(!v.method.is_empty() && !v.created_at.is_empty() && v.linked + v.copied == 5);
        assert!(v.on_disk, "{v:?}");
    }
    let files = show.files.expect("--files lists the files");
    assert_eq!(files.len(), 5);
    assert!(files
        .iter()
        .any(|f| f.executable && f.path == "scripts/run.sh"));
    assert!(files.iter().all(|f| f.sha256.len() == 64 && f.size > 0));
    let show: ShowOut = run_typed(&env, &[os("show"), os(&d)]);
    assert!(show.files.is_none());

    let manifest: ManifestOut = run_typed(&env, &[os("show"), os(&d), os("--manifest")]);
    assert!(manifest.ok && manifest.canonical_manifest.starts_with("{\"files\":["));
    assert_eq!(manifest.manifest_digest, d);

    let list: ListOut = run_typed(&env, &[os("list")]);
    assert!(list.ok);
    let [s] = list.snapshots.as_slice() else {
        panic!("{list:?}")
    };
    assert_eq!(
        (
            s.manifest_digest.as_str(),
            s.name.as_str(),
            s.version.as_str()
        ),
        (d.as_str(), "compound-engineering", "1.0.0")
    );
    assert_eq!((s.manifest_schema_version, s.file_count), (1, 5));
    assert!(s.total_bytes > 0 && !s.first_ingested_at.is_empty());

    let log: LogOut = run_typed(&env, &[os("log"), os(&d[..8])]);
    let [e] = log.ingests.as_slice() else {
        panic!("{log:?}")
    };
    assert!(log.ok);
    assert_eq!(e.manifest_digest, d);
    absolute(&e.source);
    assert!(!e.at.is_empty() && !e.host.is_empty() && !e.user.is_empty());
    assert!(e.tool_version.starts_with("cestore ") && e.new_objects + e.reused_objects > 0);

    let find: FindOut = run_typed(&env, &[os("find"), os("--path"), os("scripts/")]);
    assert!(find.ok);
    let [h] = find.matches.as_slice() else {
        panic!("{find:?}")
    };
    assert_eq!(
        (h.manifest_digest.as_str(), h.version.as_str()),
        (d.as_str(), "1.0.0")
    );
    assert_eq!(h.path, "scripts/run.sh");
    assert!(h.executable && h.size == 10 && h.sha256.len() == 64);

    // A second release, for diff.
    let src2 = env.plugin("src2", "1.1.0");
    write(&src2.join("scripts/run.sh"), "#!/bin/sh\n");
    write(&src2.join("skills/ce-plan/SKILL.md"), "# changed\n");
    write(&src2.join("assets/new.txt"), "new\n");
    let d2 = env.ingest_digest(&src2, "1.1.0");
    let diff: DiffOut = run_typed(&env, &[os("diff"), os(&d), os(&d2)]);
    assert!(diff.ok && diff.from == d && diff.to == d2);
    let kinds: Vec<&str> = diff
        .changes
        .iter()
        .map(|c| match c {
            ChangeOut::Added { .. } => "added",
            ChangeOut::Removed { .. } => "removed",
            ChangeOut::Content { .. } => "content",
            ChangeOut::Exec { .. } => "exec",
        })
        .collect();
    for k in ["added", "content", "exec"] {
        assert!(kinds.contains(&k), "{k} missing from {diff:?}");
    }

    let tree: TreeOut = run_typed(
        &env,
        &[os("verify"), os("--tree"), view.as_os_str(), os(&d)],
    );
    assert!(tree.ok && tree.differences.is_empty() && tree.manifest_digest == d);
    absolute(&tree.tree);
    // A relative --tree is reported absolute, with its differences.
    let out = env
        .cmd(["verify", "--tree", "view", &d2, "--json"])
        .current_dir(&env.base)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let tree: TreeOut = one_object(&out, "verify --tree view D2");
    assert!(!tree.ok && !tree.differences.is_empty());
    assert_eq!(Path::new(&tree.tree), view);
    assert!(tree
        .differences
        .iter()
        .any(|d| matches!(d, DifferenceOut::ContentChanged { .. })));

    let verify: VerifyOut = run_typed(&env, &[os("verify")]);
    assert!(verify.ok && verify.problems.is_empty() && verify.repaired.is_empty());
    assert!(verify.attestations_checked.is_none() && verify.attestations_verified.is_none());
    assert_eq!(verify.snapshots_checked, 2);
    assert!(verify.objects_checked > 0 && verify.bytes_hashed > 0);

    let mounts: MountsOut = run_typed(
        &env,
        &[
            os("mounts"),
            os("--arm"),
            os("ce_review"),
            os("--view"),
            view.as_os_str(),
        ],
    );
    assert!(mounts.ok && mounts.arm == "ce_review");
    assert_eq!(mounts.manifest_digest.as_deref(), Some(d.as_str()));
    assert_eq!(
        mounts.plugin_dir.as_deref(),
        Some("/opt/compound-engineering-plugin")
    );
    let [m] = mounts.mounts.as_slice() else {
        panic!("{mounts:?}")
    };
    absolute(&m.source);
    assert!(m.read_only && m.target == "/opt/compound-engineering-plugin");
    let mounts: MountsOut = run_typed(&env, &[os("mounts"), os("--arm"), os("baseline")]);
    assert!(
        mounts.plugin_dir.is_none() && mounts.manifest_digest.is_none() && mounts.mounts.is_empty()
    );

    let stage: StageOut = run_typed(
        &env,
        &[
            os("stage"),
            os("--arm"),
            os("ce_review"),
            os("--arm"),
            os("baseline"),
            os("--digest"),
            os(&d),
        ],
    );
    assert!(stage.ok);
    assert_eq!(
        stage
            .provenance
            .as_ref()
            .map(|p| p.manifest_digest.as_str()),
        Some(d.as_str())
    );
    absolute(stage.view.as_deref().expect("a view"));
    assert_eq!(stage.view_kind.as_deref(), Some("shared"));
    assert!(stage.ingest.is_none());
    assert_eq!(stage.arms.len(), 2);
    for a in &stage.arms {
        for m in &a.mounts {
            absolute(&m.source);
        }
        assert_eq!(a.plugin_dir.is_some(), a.arm == "ce_review", "{a:?}");
    }
    let dest = env.path("staged");
    let stage: StageOut = run_typed(
        &env,
        &[
            os("stage"),
            os("--arm"),
            os("ce_workflow"),
            os("--plugin-dir"),
            src.as_os_str(),
            os("--plugin-version"),
            os("1.0.0"),
            os("--dest"),
            dest.as_os_str(),
        ],
    );
    let stats = stage
        .ingest
        .expect("stage from a source reports its ingest");
    absolute(&stats.source);
    assert!(stats.already_present);
    assert_eq!(stage.view_kind.as_deref(), Some("checkout"));
    assert!(stage.gitnexus_runtime_manifest_digest.is_none());
    assert!(stage.gitnexus_runtime_view.is_none() && stage.gitnexus_runtime_ingest.is_none());
    assert!(stage.gitnexus_runtime_components.is_empty());
    assert!(stage.environment.is_none());

    // With a GitNexus runtime: its snapshot, view, ingest and components,
    // and the environment of what it mounts.
    let harness = env.path("harness");
    crate::util::gitnexus_harness(&harness, "1.6.9");
    let stage: StageOut = run_typed(
        &env,
        &[
            os("stage"),
            os("--arm"),
            os("baseline"),
            os("--gitnexus-root"),
            harness.as_os_str(),
            os("--environment"),
            os("sweep"),
        ],
    );
    let recorded = stage.environment.as_ref().expect("the environment");
    assert_eq!(
        (recorded.profile.as_str(), recorded.name.as_str()),
        ("environment", "sweep")
    );
    assert!(recorded.stored);
    is_digest(&recorded.manifest_digest);
    absolute(&recorded.store);
    let [member] = recorded.members.as_slice() else {
        panic!("{recorded:?}")
    };
    assert_eq!(
        (member.role.as_str(), member.kind.as_str()),
        ("gitnexus_runtime_manifest_digest", "tree")
    );
    let runtime = stage
        .gitnexus_runtime_manifest_digest
        .as_deref()
        .expect("a runtime digest");
    let runtime_view = stage.gitnexus_runtime_view.as_deref().expect("its view");
    absolute(runtime_view);
    assert!(runtime_view.ends_with(runtime));
    let stored = stage.gitnexus_runtime_ingest.expect("its ingest");
    assert!(!stored.already_present && stored.new_objects > 0);
    absolute(&stored.source);
    absolute(&stored.store);
    assert_eq!(stage.gitnexus_runtime_components.len(), 7);
    assert_eq!(stage.arms[0].mounts.len(), 7);
    for (m, c) in stage.arms[0]
        .mounts
        .iter()
        .zip(&stage.gitnexus_runtime_components)
    {
        assert_eq!(m.source, format!("{runtime_view}/{}", c.path));
        absolute(&c.source);
    }
    let mounts: MountsOut = run_typed(
        &env,
        &[
            os("mounts"),
            os("--arm"),
            os("baseline"),
            os("--gitnexus-runtime"),
            os(runtime),
        ],
    );
    assert_eq!(
        mounts.gitnexus_runtime_manifest_digest.as_deref(),
        Some(runtime)
    );
    assert!(mounts.gitnexus_runtime_ingest.is_none());
    assert!(mounts.gitnexus_runtime_components.is_empty());
    assert_eq!(mounts.gitnexus_runtime_view.as_deref(), Some(runtime_view));
    assert_eq!(mounts.mounts.len(), 7);

    // `--hold`: one object per phase, the stage's and then the discard's.
    let held = env.path("held");
    let mut hold = env
        .cmd([
            os("stage"),
            os("--json"),
            os("--hold"),
            os("--arm"),
            os("ce_review"),
            os("--digest"),
            os(&d),
            os("--dest"),
            held.as_os_str(),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start stage --hold");
    {
        use std::io::Write;
        let mut stdin = hold.stdin.take().expect("stdin");
        stdin.write_all(b"discard --spare\n").expect("release");
    }
    let out = hold.wait_with_output().expect("stage --hold");
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let staged: StageOut = serde_json::from_str(lines[0]).expect("the stage's object");
    assert!(staged.ok && staged.view.as_deref() == held.to_str());
    assert_eq!(staged.view_kind.as_deref(), Some("checkout"));
    let released: ReleaseOut = serde_json::from_str(lines[1]).expect("the discard's object");
    assert!(released.ok && released.removed && released.spare && released.recorded);
    assert_eq!(released.signal, None);
    assert_eq!(released.manifest_digest.as_deref(), Some(d.as_str()));
    assert_eq!(released.view, staged.view.expect("a view"));

    let bundle = env.path("b.tar.zst");
    let export: ExportOut = run_typed(
        &env,
        &[
            os("export"),
            os(&d),
            os("-o"),
            bundle.as_os_str(),
            os("--zstd"),
        ],
    );
    assert!(export.ok && export.manifest_digest == d && export.format == "tar+zstd");
    absolute(&export.file);
    assert!(export.objects == 5 && export.bytes > 0 && export.sha256.len() == 64);
    assert_eq!(export.attestations, 0);

    let check: ImportOut = run_typed(&env, &[os("import"), os("--check"), bundle.as_os_str()]);
    assert!(check.ok && check.provenance.is_none() && check.ingest.is_none());
    assert_eq!(check.bundle.manifest_digest, d);
    assert_eq!(
        (check.bundle.format.as_str(), check.bundle.objects),
        ("tar+zstd", 5)
    );
    absolute(&check.bundle.file);
    assert_eq!(check.bundle.attestations, 0);
    let import: ImportOut = run_typed(&env, &[os("import"), bundle.as_os_str()]);
    assert!(import.ok);
    assert_eq!(import.provenance.expect("provenance").manifest_digest, d);
    assert!(import.ingest.expect("ingest").already_present);

    let discard: DiscardOut = run_typed(&env, &[os("discard"), view.as_os_str()]);
    assert!(discard.ok && discard.recorded && discard.removed);
    assert_eq!(discard.manifest_digest.as_deref(), Some(d.as_str()));
    absolute(&discard.view);
    // A second discard finds it gone: exit 0, nothing removed.
    let again: DiscardOut = run_typed(&env, &[os("discard"), view.as_os_str()]);
    assert!(again.ok && !again.recorded && !again.removed && again.manifest_digest.is_none());

    let rm: RmOut = run_typed(&env, &[os("rm"), os(&d), os("--force")]);
    assert!(rm.ok && rm.manifest_digest == d);
    assert!(!rm.views_forgotten.is_empty());
    rm.views_forgotten.iter().for_each(|p| absolute(p));

    let gc: GcOut = run_typed(&env, &[os("gc"), os("--dry-run")]);
    assert!(gc.ok && gc.dry_run && !gc.objects.is_empty() && gc.bytes_freed > 0);
    assert!(!gc.force && !gc.refused && gc.unsafe_manifests.is_empty());
    gc.objects
        .iter()
        .chain(&gc.shared_views)
        .chain(&gc.spares)
        .chain(&gc.temporary)
        .for_each(|p| absolute(p));
    let gc: GcOut = run_typed(&env, &[os("gc")]);
    assert!(gc.ok && !gc.dry_run && gc.objects_kept > 0);
    gc.stale_view_records
        .iter()
        .chain(&gc.manifests)
        .for_each(|p| absolute(p));

    let recover: RecoverOut = run_typed(&env, &[os("recover")]);
    assert!(recover.ok && recover.problems.is_empty() && recover.set_aside.is_none());
    absolute(&recover.store);
    assert!(recover.recovered.is_empty() && recover.rewritten.is_empty());
    assert_eq!(recover.events_salvaged, 0);
    assert!(recover.snapshots >= 1);
    recover.views_recorded.iter().for_each(|p| absolute(p));
    recover.manifests_written.iter().for_each(|d| is_digest(d));
    assert!(recover.manifests_set_aside.is_empty());
}

#[test]
fn a_report_with_problems_fits_its_schema() {
    let (env, d) = minimal_store();
    let view = env.path("view");
    assert_ok(&env.run([os("checkout"), os(&d), view.as_os_str()]));
    // A chmod through the view changes the shared inode's mode.
    util::chmod(&view.join("skills/ce-plan/SKILL.md"), 0o644);
    let out = env.run(["verify", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let verify: VerifyOut = one_object(&out, "verify");
    assert!(!verify.ok);
    let p = verify.problems.first().expect("a problem");
    absolute(&p.path);
    assert!(!p.kind.is_empty() && !p.severity.is_empty() && !p.detail.is_empty());
    assert_eq!(p.snapshots, [d]);
    assert_eq!(p.views, [view.to_str().unwrap()]);
    util::chmod(&view.join("skills/ce-plan/SKILL.md"), 0o444);
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditFieldsOut {
    digest: String,
    version: String,
    arm: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MalformedOut {
    line: u64,
    reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditInputOut {
    file: String,
    format: String,
    bytes: u64,
    lines: u64,
    rows: u64,
    malformed_count: u64,
    malformed: Vec<MalformedOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlaceOut {
    file: String,
    line: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimedOut {
    value: String,
    rows: u64,
    first: PlaceOut,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DamagedOut {
    kind: String,
    path: String,
    detail: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditDigestOut {
    manifest_digest: String,
    status: String,
    version: Option<String>,
    claimed_versions: Vec<ClaimedOut>,
    claimed_versions_unlisted: u64,
    rows: u64,
    arms: Vec<ClaimedOut>,
    arms_unlisted: u64,
    first: PlaceOut,
    last: PlaceOut,
    damaged: Vec<DamagedOut>,
    pulled: bool,
    pull_error: Option<String>,
    source: Option<SourceSummaryOut>,
    source_check: Option<SourceCheckOut>,
    signature: Option<SignatureOut>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, tag = "status", rename_all = "kebab-case")]
enum SignatureOut {
    Signed { keyid: String },
    Unsigned { why: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RowProblemOut {
    file: String,
    line: u64,
    kind: String,
    arm: Option<String>,
    detail: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditTreeDigestOut {
    field: String,
    kind: String,
    digest: String,
    status: String,
    expected_profile: String,
    profile: Option<String>,
    snapshot: Option<String>,
    rows: u64,
    first: PlaceOut,
    last: PlaceOut,
    damaged: Vec<DamagedOut>,
    pulled: bool,
    pull_error: Option<String>,
    signature: Option<SignatureOut>,
    #[serde(default)]
    failing_members: Vec<FailingMemberOut>,
}

/// A failing member of an environment in an audit's tree digest.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FailingMemberOut {
    pub(crate) role: String,
    pub(crate) digest: String,
    pub(crate) status: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditUnansweredOut {
    file: String,
    line: u64,
    digest: String,
    status: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditFieldCountOut {
    field: String,
    kind: String,
    rows: u64,
    digests: u64,
    rows_answered: u64,
    rows_unanswered: u64,
    rows_malformed: u64,
    first_unanswered: Option<AuditUnansweredOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditOut {
    ok: bool,
    fields: AuditFieldsOut,
    inputs: Vec<AuditInputOut>,
    rows: u64,
    digests: Vec<AuditDigestOut>,
    tree_digests: Vec<AuditTreeDigestOut>,
    field_counts: Vec<AuditFieldCountOut>,
    row_problem_count: u64,
    row_problems: Vec<RowProblemOut>,
    malformed_count: u64,
    allow_malformed: bool,
    listed_at_most: u64,
    verified: bool,
    registry: Option<String>,
    require_clean_source: bool,
    source_repo: Option<String>,
    trusted_keys: Vec<String>,
    passed: bool,
    verdict: String,
}

#[test]
fn audit_fits_the_documented_schema() {
    let (env, src, d) = util::plugin_store("src", "1.0.0");
    let results = env.path("results.jsonl");
    let unknown = "e".repeat(64);
    write(
        &results,
        format!(
            "{}\n{}\n{}\n{}\nnot json\n",
            serde_json::json!({"arm": "ce_review", "run": 1, "ce_plugin_version": "1.0.0", "ce_plugin_manifest_digest": d, "task_asset_manifest_digest": "f".repeat(64)}),
            serde_json::json!({"arm": "ce_workflow", "run": 2, "ce_plugin_version": "0.9.0", "ce_plugin_manifest_digest": unknown}),
            serde_json::json!({"arm": "baseline", "run": 3, "ce_plugin_version": null, "ce_plugin_manifest_digest": "abc"}),
            serde_json::json!({"arm": 7, "ce_plugin_version": null, "ce_plugin_manifest_digest": null}),
        ),
    );
    // A damaged object, for `damaged`.
    let object = object_holding(&env.store, &src.join("skills/ce-plan/SKILL.md"));
    util::chmod(&object, 0o644);
    fs::write(&object, "damaged\n").unwrap();
    util::chmod(&object, 0o444);
    let out = env.run([
        os("audit"),
        results.as_os_str(),
        os("--verify"),
        os("--json"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let audit: AuditOut = one_object(&out, "audit");
    assert!(!audit.ok && !audit.passed && audit.verified);
    assert!(audit.registry.is_none());
    assert_eq!(audit.rows, 4);
    assert_eq!(audit.malformed_count, 1);
    assert!(!audit.allow_malformed);
    assert_eq!(audit.listed_at_most, 1000);
    absolute(&audit.inputs[0].file);
    assert_eq!(audit.inputs[0].format, "plain");
    assert_eq!(audit.inputs[0].malformed[0].line, 5);
    assert_eq!(audit.fields.digest, "ce_plugin_manifest_digest");
    let statuses: Vec<(&str, &str)> = audit
        .digests
        .iter()
        .map(|x| (x.manifest_digest.as_str(), x.status.as_str()))
        .collect();
    let mut want = vec![(d.as_str(), "damaged"), (unknown.as_str(), "unknown")];
    want.sort();
    assert_eq!(statuses, want);
    for x in &audit.digests {
        is_digest(&x.manifest_digest);
        absolute(&x.first.file);
        assert!(!x.pulled && x.pull_error.is_none());
    }
    let damaged = &audit
        .digests
        .iter()
        .find(|x| x.manifest_digest == d)
        .unwrap()
        .damaged;
    assert_eq!(damaged[0].kind, "object-size");
    absolute(&damaged[0].path);
    // baseline with a digest (arm-mismatch and malformed-digest), and a
    // row whose arm is not a string.
    let kinds: Vec<(u64, &str, Option<&str>)> = audit
        .row_problems
        .iter()
        .map(|p| (p.line, p.kind.as_str(), p.arm.as_deref()))
        .collect();
    assert_eq!(
        kinds,
        [
            (3, "arm-mismatch", Some("baseline")),
            (3, "malformed-digest", Some("baseline")),
        ]
    );
    assert_eq!(audit.row_problem_count, 2);
    assert!(
        audit.verdict.starts_with("FAIL: 2 digests"),
        "{}",
        audit.verdict
    );
    assert!(audit.trusted_keys.is_empty());
    assert!(audit.digests.iter().all(|x| x.signature.is_none()));
    // A tree digest field, looked up whatever the arm.
    let [t] = &audit.tree_digests[..] else {
        panic!("{:?}", audit.tree_digests)
    };
    assert_eq!(
        (
            t.field.as_str(),
            t.status.as_str(),
            t.expected_profile.as_str()
        ),
        ("task_asset_manifest_digest", "unknown", "tree")
    );
    is_digest(&t.digest);
    assert!(t.profile.is_none() && t.snapshot.is_none() && t.signature.is_none());
    assert!(t.damaged.is_empty() && !t.pulled && t.pull_error.is_none());
    assert_eq!((t.rows, t.first.line, t.last.line), (1, 1, 1));
    absolute(&t.first.file);
    assert_eq!(t.kind, "tree");
    // The counts of each digest field: the CE digest's, then the table's.
    let counts: Vec<(&str, &str, [u64; 5])> = audit
        .field_counts
        .iter()
        .map(|f| {
            (
                f.field.as_str(),
                f.kind.as_str(),
                [
                    f.rows,
                    f.digests,
                    f.rows_answered,
                    f.rows_unanswered,
                    f.rows_malformed,
                ],
            )
        })
        .collect();
    assert_eq!(
        counts,
        [
            ("ce_plugin_manifest_digest", "ce", [3, 2, 0, 3, 1]),
            ("task_asset_snapshot_digest", "task", [0; 5]),
            ("task_asset_manifest_digest", "tree", [1, 1, 0, 1, 0]),
            ("sandbox_dependency_manifest_digest", "dependencies", [0; 5]),
            (
                "sandbox_dependency_content_digest",
                "dependencies-content",
                [0; 5]
            ),
            ("gitnexus_runtime_manifest_digest", "tree", [0; 5]),
            ("environment_digest", "environment", [0; 5]),
        ]
    );
    let firsts: Vec<Option<(u64, &str, &str)>> = audit
        .field_counts
        .iter()
        .map(|f| {
            f.first_unanswered
                .as_ref()
                .map(|u| (u.line, u.status.as_str(), u.digest.as_str()))
        })
        .collect();
    let tree_digest = "f".repeat(64);
    assert_eq!(
        firsts,
        [
            Some((1, "damaged", d.as_str())),
            None,
            Some((1, "unknown", tree_digest.as_str())),
            None,
            None,
            None,
            None,
        ]
    );
    for f in &audit.field_counts {
        if let Some(u) = &f.first_unanswered {
            absolute(&u.file);
            is_digest(&u.digest);
        }
    }

    // With a key trusted: every digest says whether it is signed.
    let key = env.path("key");
    let generated = env.json([os("key"), os("generate"), key.as_os_str(), os("--json")]);
    let keyid = generated["keyid"].as_str().unwrap().to_string();
    assert_ok(&env.run([os("sign"), os(&d), os("--key"), key.as_os_str()]));
    let public = env.path("key.pub");
    let out = env.run([
        os("audit"),
        results.as_os_str(),
        os("--trusted-key"),
        public.as_os_str(),
        os("--json"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let audit: AuditOut = one_object(&out, "audit --trusted-key");
    assert_eq!(audit.trusted_keys, std::slice::from_ref(&keyid));
    for x in &audit.digests {
        match &x.signature {
            Some(SignatureOut::Signed { keyid: k }) => {
                assert_eq!((x.manifest_digest.as_str(), k), (d.as_str(), &keyid));
            }
            Some(SignatureOut::Unsigned { why }) => {
                assert_eq!(x.manifest_digest, unknown, "{why}");
                assert_eq!(x.status, "unknown");
            }
            None => panic!("no signature for {}", x.manifest_digest),
        }
    }

    let verify: VerifyOut = one_object(
        &env.run([
            os("verify"),
            os("--trusted-key"),
            public.as_os_str(),
            os("--json"),
        ]),
        "verify --trusted-key",
    );
    assert_eq!(verify.attestations_checked, Some(1));
    assert_eq!(verify.attestations_verified, Some(1));
    let show: ShowOut = run_typed(&env, &[os("show"), os(&d)]);
    assert_eq!(show.attestations.len(), 1);
    assert_eq!(show.attestations[0].keyid, keyid);
    is_digest(&show.attestations[0].id);
    assert!(!show.attestations[0].at.is_empty());
}

// ---------------------------------------------------------------------------
// Every failure answers with one JSON error object
// ---------------------------------------------------------------------------

/// One failing invocation: its arguments (with `--store`), and the code,
/// kind and rule it must report.
struct Case {
    name: &'static str,
    args: Vec<OsString>,
    code: u8,
    kind: &'static str,
    rule: Option<&'static str>,
}

fn case(name: &'static str, code: u8, kind: &'static str, args: &[&OsStr]) -> Case {
    Case {
        name,
        args: args.iter().map(|a| a.to_os_string()).collect(),
        code,
        kind,
        rule: None,
    }
}

fn ruled(mut c: Case, rule: &'static str) -> Case {
    c.rule = Some(rule);
    c
}

#[test]
fn every_failure_prints_one_json_error_object() {
    let env = TestEnv::new();
    let store = env.store.clone();
    let src = env.plugin("src", "1.0.0");
    let d = env.ingest_digest(&src, "1.0.0");
    let other_src = env.plugin("other", "2.0.0");
    let other = env.ingest_digest(&other_src, "2.0.0");
    let (amb, _, _) = util::ingest_sharing_four_digits(&env, "9.0.0", "9.0.1");
    let view = env.path("view");
    assert_ok(&env.run([os("checkout"), os(&d), view.as_os_str()]));
    let replaced = env.path("replaced");
    assert_ok(&env.run([os("checkout"), os(&d), replaced.as_os_str()]));
    // Moved aside, so that the new directory cannot reuse its inode.
    fs::rename(&replaced, env.path("moved-aside")).unwrap();
    fs::create_dir(&replaced).unwrap();

    let missing = env.path("missing");
    let text = env.path("notes.txt");
    write(&text, "not a bundle\n");
    let link = env.path("link");
    symlink(&src, &link).unwrap();
    let no_skills = env.path("no-skills");
    write(
        &no_skills.join(".claude-plugin/plugin.json"),
        r#"{"name": "compound-engineering", "version": "1.0.0"}"#,
    );
    let empty_harness = env.path("harness");
    fs::create_dir(&empty_harness).unwrap();
    let bundle = env.path("bundle.tar");
    assert_ok(&env.run([os("export"), os(&d), os("-o"), bundle.as_os_str()]));
    let tampered = env.path("tampered.tar");
    let mut bytes = fs::read(&bundle).unwrap();
    // Flip a byte of one object's data.
    let at = bytes
        .windows(10)
        .position(|w| w == b"# ce-plan\n")
        .expect("the object's bytes in the bundle");
    bytes[at + 2] ^= 0x20;
    fs::write(&tampered, &bytes).unwrap();
    let trusted = env.path("trusted");
    assert_ok(&env.run([os("key"), os("generate"), trusted.as_os_str()]));
    let trusted_pub = env.path("trusted.pub");
    let store_file = env.path("store-file");
    write(&store_file, "x");
    let inside = src.join("nested-store");
    let bad_zst = env.path("results.jsonl.zst");
    write(&bad_zst, "not zstd\n");
    let open_key = env.path("open.key");
    assert_ok(&env.run([os("key"), os("generate"), open_key.as_os_str()]));
    util::chmod(&open_key, 0o644);

    let mut cases = vec![
        // usage (2): the parser's refusals and the requests it cannot see.
        case(
            "unknown flag",
            2,
            "usage",
            &[os("stage"), os("--arm"), os("ce_review"), os("--bogus")],
        ),
        case(
            "missing --version",
            2,
            "usage",
            &[os("ingest"), src.as_os_str()],
        ),
        case(
            "prefix of three hex digits",
            2,
            "usage",
            &[os("show"), os(&d[..3])],
        ),
        case(
            "conflicting flags",
            2,
            "usage",
            &[os("show"), os(&d), os("--files"), os("--manifest")],
        ),
        case(
            "bad value",
            2,
            "usage",
            &[
                os("checkout"),
                os(&d),
                missing.as_os_str(),
                os("--method"),
                os("teleport"),
            ],
        ),
        case(
            "out of range",
            2,
            "usage",
            &[
                os("push"),
                os(&d),
                os("127.0.0.1:1/r"),
                os("--jobs"),
                os("0"),
            ],
        ),
        case("no command", 2, "usage", &[]),
        case("unknown command", 2, "usage", &[os("frobnicate")]),
        case("malformed digest", 2, "usage", &[os("show"), os("xyz!")]),
        case(
            "--tree without a digest",
            2,
            "usage",
            &[os("verify"), os("--tree"), view.as_os_str()],
        ),
        case(
            "bwrap and json",
            2,
            "usage",
            &[
                os("mounts"),
                os("--arm"),
                os("baseline"),
                os("--format"),
                os("bwrap"),
            ],
        ),
        case(
            "--unchecked without --view",
            2,
            "usage",
            &[
                os("mounts"),
                os("--arm"),
                os("ce_review"),
                os("--unchecked"),
            ],
        ),
        case(
            "--tree on a file",
            2,
            "usage",
            &[os("verify"), os("--tree"), text.as_os_str(), os(&d)],
        ),
        // rejected (3): a rule of the reference.
        ruled(
            case(
                "inexact version",
                3,
                "rejected",
                &[os("ingest"), src.as_os_str(), os("--version"), os("1.x")],
            ),
            "version-not-exact",
        ),
        ruled(
            case(
                "symlinked source",
                3,
                "rejected",
                &[os("ingest"), link.as_os_str(), os("--version"), os("1.0.0")],
            ),
            "source-not-real-directory",
        ),
        ruled(
            case(
                "no skills",
                3,
                "rejected",
                &[
                    os("ingest"),
                    no_skills.as_os_str(),
                    os("--version"),
                    os("1.0.0"),
                ],
            ),
            "skills-missing",
        ),
        ruled(
            case(
                "ce arm without a view",
                3,
                "rejected",
                &[os("mounts"), os("--arm"), os("ce_review")],
            ),
            "ce-arm-without-plugin",
        ),
        ruled(
            case(
                "plugin inputs without a ce arm",
                3,
                "rejected",
                &[
                    os("stage"),
                    os("--arm"),
                    os("baseline"),
                    os("--plugin-dir"),
                    src.as_os_str(),
                    os("--plugin-version"),
                    os("1.0.0"),
                ],
            ),
            "plugin-inputs-without-ce-arm",
        ),
        ruled(
            case(
                "harness without a runtime",
                3,
                "rejected",
                &[
                    os("mounts"),
                    os("--arm"),
                    os("baseline"),
                    os("--gitnexus-root"),
                    empty_harness.as_os_str(),
                ],
            ),
            "gitnexus-root-unavailable",
        ),
        // not found (4).
        ruled(
            case(
                "missing source",
                4,
                "not-found",
                &[
                    os("ingest"),
                    missing.as_os_str(),
                    os("--version"),
                    os("1.0.0"),
                ],
            ),
            "source-unavailable",
        ),
        ruled(
            case(
                "missing digest source",
                4,
                "not-found",
                &[
                    os("digest"),
                    missing.as_os_str(),
                    os("--version"),
                    os("1.0.0"),
                ],
            ),
            "source-unavailable",
        ),
        ruled(
            case(
                "missing harness root",
                4,
                "not-found",
                &[
                    os("mounts"),
                    os("--arm"),
                    os("baseline"),
                    os("--gitnexus-root"),
                    missing.as_os_str(),
                ],
            ),
            "gitnexus-root-unavailable",
        ),
        case(
            "unknown digest",
            4,
            "unknown-digest",
            &[os("show"), os(&"0".repeat(64))],
        ),
        case(
            "unknown prefix",
            4,
            "unknown-digest",
            &[os("checkout"), os("0000000000"), missing.as_os_str()],
        ),
        case(
            "unknown version",
            4,
            "unknown-digest",
            &[os("show"), os("@9.9.9")],
        ),
        case(
            "missing store",
            4,
            "not-found",
            &[os("list"), os("--store"), missing.as_os_str()],
        ),
        case(
            "not a recorded view",
            4,
            "not-found",
            &[os("discard"), src.as_os_str()],
        ),
        case(
            "mounts of /etc",
            4,
            "not-found",
            &[
                os("mounts"),
                os("--arm"),
                os("ce_review"),
                os("--view"),
                os("/etc"),
            ],
        ),
        case(
            "no shared view",
            4,
            "not-found",
            &[
                os("mounts"),
                os("--arm"),
                os("ce_review"),
                os("--digest"),
                os(&other),
            ],
        ),
        case(
            "missing tree",
            4,
            "not-found",
            &[os("verify"), os("--tree"), missing.as_os_str(), os(&d)],
        ),
        case(
            "missing bundle",
            4,
            "not-found",
            &[os("import"), missing.as_os_str()],
        ),
        case(
            "missing dest parent",
            4,
            "not-found",
            &[os("checkout"), os(&d), missing.join("x").as_os_str()],
        ),
        // ambiguous (5).
        case(
            "ambiguous show",
            5,
            "ambiguous-digest",
            &[os("show"), os(&amb)],
        ),
        case(
            "ambiguous checkout",
            5,
            "ambiguous-digest",
            &[os("checkout"), os(&amb), missing.as_os_str()],
        ),
        case("ambiguous rm", 5, "ambiguous-digest", &[os("rm"), os(&amb)]),
        case(
            "ambiguous log",
            5,
            "ambiguous-digest",
            &[os("log"), os(&amb)],
        ),
        case(
            "ambiguous diff",
            5,
            "ambiguous-digest",
            &[os("diff"), os(&amb), os(&d)],
        ),
        // conflict (6).
        case(
            "dest exists",
            6,
            "conflict",
            &[os("checkout"), os(&d), view.as_os_str()],
        ),
        case("views recorded", 6, "conflict", &[os("rm"), os(&d)]),
        case(
            "store inside the source",
            6,
            "conflict",
            &[
                os("ingest"),
                src.as_os_str(),
                os("--version"),
                os("1.0.0"),
                os("--store"),
                inside.as_os_str(),
            ],
        ),
        case(
            "replaced view",
            6,
            "conflict",
            &[
                os("mounts"),
                os("--arm"),
                os("ce_review"),
                os("--view"),
                replaced.as_os_str(),
            ],
        ),
        // integrity (1): damage, and a view of another snapshot.
        case(
            "view of another snapshot",
            1,
            "integrity",
            &[
                os("mounts"),
                os("--arm"),
                os("ce_review"),
                os("--view"),
                view.as_os_str(),
                os("--digest"),
                os(&other),
            ],
        ),
        case(
            "not a bundle",
            1,
            "integrity",
            &[os("import"), text.as_os_str()],
        ),
        case(
            "tampered bundle",
            1,
            "integrity",
            &[os("import"), tampered.as_os_str()],
        ),
        case(
            "tampered bundle, checked",
            1,
            "integrity",
            &[os("import"), os("--check"), tampered.as_os_str()],
        ),
        // trust failures (9): a bundle nothing signed, under a key trusted.
        case(
            "unsigned bundle under a trusted key",
            9,
            "untrusted",
            &[
                os("import"),
                bundle.as_os_str(),
                os("--trusted-key"),
                trusted_pub.as_os_str(),
            ],
        ),
        // store failures (7).
        case(
            "store is a file",
            7,
            "bad-store",
            &[os("list"), os("--store"), store_file.as_os_str()],
        ),
        case(
            "unwritable destination",
            7,
            "io",
            &[os("checkout"), os(&d), os("/sys/cestore-view")],
        ),
        // remote failures (8): nothing listens on port 1.
        case(
            "unreachable registry (push)",
            8,
            "remote",
            &[
                os("push"),
                os(&d),
                os("127.0.0.1:1/cestore/ce"),
                os("--plain-http"),
            ],
        ),
        case(
            "missing results file",
            4,
            "not-found",
            &[os("audit"), missing.as_os_str()],
        ),
        case(
            "overlapping audit fields",
            2,
            "usage",
            &[
                os("audit"),
                text.as_os_str(),
                os("--digest-field"),
                os("ce_plugin"),
                os("--version-field"),
                os("ce_plugin.version"),
            ],
        ),
        case(
            "audit --markdown with --json",
            2,
            "usage",
            &[os("audit"), text.as_os_str(), os("--markdown")],
        ),
        case(
            "undecodable results file",
            7,
            "io",
            &[os("audit"), bad_zst.as_os_str()],
        ),
        case(
            "a private key others may read (sign)",
            9,
            "bad-key",
            &[os("sign"), os(&d), os("--key"), open_key.as_os_str()],
        ),
        case(
            "unreachable registry (pull)",
            8,
            "remote",
            &[
                os("pull"),
                os("127.0.0.1:1/cestore/ce:1.0.0"),
                os("--plain-http"),
            ],
        ),
    ];
    // `--store` given twice is refused; cases that name their own store get only theirs.
    for c in &mut cases {
        if !c.args.iter().any(|a| a == "--store") {
            c.args.push("--store".into());
            c.args.push(store.clone().into_os_string());
        }
    }
    assert!(cases.len() >= 30, "{} cases", cases.len());
    // Every (code, kind) of docs/exit-codes.md is exercised, and no other.
    let mut covered: std::collections::BTreeSet<(u8, String)> =
        cases.iter().map(|c| (c.code, c.kind.to_string())).collect();
    covered.extend([
        (7, "catalogue".to_string()),
        (7, "catalogue-too-new".to_string()),
        (7, "catalogue-lost".to_string()),
    ]);
    assert_eq!(covered, documented_kinds());
    let before = util_state(&env);
    for c in &cases {
        check_json_case(c, &["--json"]);
        // `--json` anywhere on the line, first included.
        check_json_case(c, &[]);
    }
    assert_eq!(
        util_state(&env),
        before,
        "a failed command changed the store"
    );

    // A damaged object and a corrupt or too-new catalogue, last: they spoil the store.
    let object = object_holding(&env.store, &src.join("skills/ce-plan/SKILL.md"));
    util::chmod(&object, 0o644);
    fs::write(&object, "damaged\n").unwrap();
    util::chmod(&object, 0o444);
    let dest = env.path("dest");
    check_json_case(
        &case(
            "damaged object",
            1,
            "integrity",
            &[
                os("checkout"),
                os(&d),
                dest.as_os_str(),
                os("--store"),
                store.as_os_str(),
            ],
        ),
        &["--json"],
    );
    assert!(!dest.exists());

    let too_new = rusqlite::Connection::open(env.store.join("catalogue.sqlite")).unwrap();
    too_new.pragma_update(None, "user_version", 99).unwrap();
    drop(too_new);
    check_json_case(
        &case(
            "catalogue too new",
            7,
            "catalogue-too-new",
            &[os("list"), os("--store"), store.as_os_str()],
        ),
        &["--json"],
    );
    for suffix in ["", "-wal", "-shm"] {
        let _ = fs::remove_file(env.store.join(format!("catalogue.sqlite{suffix}")));
    }
    write(&env.store.join("catalogue.sqlite"), vec![0x5a; 8192]);
    check_json_case(
        &case(
            "corrupt catalogue beside objects",
            7,
            "catalogue-lost",
            &[os("list"), os("--store"), store.as_os_str()],
        ),
        &["--json"],
    );
    // A store that holds nothing: its unreadable catalogue is a plain
    // catalogue error.
    let bare = env.path("bare");
    write(&bare.join("catalogue.sqlite"), vec![0x5a; 8192]);
    check_json_case(
        &case(
            "corrupt catalogue of an empty store",
            7,
            "catalogue",
            &[os("list"), os("--store"), bare.as_os_str()],
        ),
        &["--json"],
    );
}

/// Runs one case with `--json` placed first (`lead`) or last, and checks the
/// one JSON object, the exit code and stderr.
fn check_json_case(c: &Case, lead: &[&str]) {
    let mut cmd = Command::new(util::bin());
    cmd.env_remove("CESTORE_DIR");
    if lead.is_empty() {
        cmd.args(&c.args).arg("--json");
    } else {
        cmd.args(lead).args(&c.args);
    }
    let out = cmd.output().expect("run cestore");
    let what = format!("{} ({:?})", c.name, c.args);
    assert_eq!(
        out.status.code(),
        Some(i32::from(c.code)),
        "{what}: exit status\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let err: ErrorOut = one_object(&out, &what);
    assert!(!err.ok, "{what}");
    assert_eq!(err.error.code, c.code, "{what}");
    assert_eq!(err.error.kind, c.kind, "{what}: {err:?}");
    assert!(
        !err.error.message.is_empty() && !err.error.message.contains('\n'),
        "{what}: {err:?}"
    );
    if let Some(rule) = c.rule {
        assert_eq!(err.error.rule.as_deref(), Some(rule), "{what}");
    }
    if let Some(p) = &err.error.path {
        absolute(p);
    }
    // An ambiguity lists what it matches; no other error has `matches`.
    let matches = err.error.matches.as_deref().unwrap_or_default();
    assert_eq!(
        matches.len() >= 2,
        c.kind == "ambiguous-digest",
        "{what}: {err:?}"
    );
    for m in matches {
        match m {
            MatchOut::Snapshot(m) => {
                is_digest(&m.manifest_digest);
                assert!(!m.version.is_empty(), "{what}: {err:?}");
                assert!(m.ingested_at.ends_with('Z'), "{what}: {err:?}");
                assert!(err.error.message.contains(&m.manifest_digest), "{what}");
            }
            MatchOut::Content(m) => is_digest(&m.sha256),
        }
    }
    // An unknown @VERSION lists the versions the store holds, each named in
    // the message; no other error has `versions`.
    let version_named = c.args.iter().any(|a| a.to_string_lossy().starts_with('@'));
    assert_eq!(
        err.error.versions.is_some(),
        version_named && c.kind == "unknown-digest",
        "{what}: {err:?}"
    );
    for v in err.error.versions.iter().flatten() {
        assert!(err.error.message.contains(v.as_str()), "{what}: {err:?}");
    }
    assert!(!out.stderr.is_empty(), "{what}: nothing on stderr");
}

/// The store's object files, and what `list`, `log` and `show` report.
fn util_state(env: &TestEnv) -> (Vec<PathBuf>, String, String, Vec<String>) {
    let mut files = Vec::new();
    let mut stack = vec![env.store.join("objects")];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                files.push(e.path());
            }
        }
    }
    files.sort();
    let text = |args: &[&str]| String::from_utf8(env.run(args).stdout).unwrap();
    let list = text(&["list", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&list).unwrap();
    let shown = crate::util::array(&listed["snapshots"])
        .iter()
        .map(|s| text(&["show", s["manifest_digest"].as_str().unwrap(), "--json"]))
        .collect();
    (files, list, text(&["log", "--json"]), shown)
}

/// The store object holding `file`'s content (not executable).
fn object_holding(store: &Path, file: &Path) -> PathBuf {
    object_path(store, &sha_hex(&fs::read(file).unwrap()), false)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PushOut {
    ok: bool,
    requests: RequestsOut,
    manifest_digest: String,
    reference: String,
    tag_reference: Option<String>,
    remote_digest: String,
    media_type: String,
    manifests: u64,
    layers: u64,
    format: u8,
    blobs_total: u64,
    blobs_uploaded: u64,
    blobs_present: u64,
    bytes_uploaded: u64,
    packs_total: u64,
    packs_uploaded: u64,
    attestations_pushed: u64,
    attestations_present: u64,
    #[serde(default)]
    members: Vec<PushedMemberOut>,
}

/// A snapshot a push published first because the one pushed names it: a
/// push report without `ok` or members of its own.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PushedMemberOut {
    requests: RequestsOut,
    manifest_digest: String,
    reference: String,
    tag_reference: Option<String>,
    remote_digest: String,
    media_type: String,
    manifests: u64,
    layers: u64,
    format: u8,
    blobs_total: u64,
    blobs_uploaded: u64,
    blobs_present: u64,
    bytes_uploaded: u64,
    packs_total: u64,
    packs_uploaded: u64,
    attestations_pushed: u64,
    attestations_present: u64,
}

/// The `requests` object of push and pull reports.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestsOut {
    total: u64,
    head: u64,
    get: u64,
    post: u64,
    put: u64,
    token: u64,
    retried: u64,
    mounted: u64,
    bytes_sent: u64,
    bytes_received: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PullStatsOut {
    source: String,
    requests: RequestsOut,
    remote_digest: String,
    media_type: String,
    manifests: u64,
    format: u8,
    attestations_fetched: u64,
    blobs_fetched: u64,
    bytes_fetched: u64,
    packs_fetched: u64,
    packs_skipped: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PullOut {
    ok: bool,
    provenance: Provenance,
    ingest: IngestStats,
    pull: PullStatsOut,
    #[serde(default)]
    members: Vec<PulledMemberOut>,
}

/// A snapshot a pull took first because the one pulled names it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PulledMemberOut {
    manifest_digest: String,
    source: String,
    new_objects: u64,
    reused_objects: u64,
}

/// Needs a registry (`CESTORE_TEST_REGISTRY`, as `.ci/run` starts one).
#[test]
fn push_and_pull_fit_the_documented_schema() {
    let Some(reg) = crate::remote::registry("push_and_pull_fit_the_documented_schema") else {
        return;
    };
    let (env, d) = minimal_store();
    let repo = crate::remote::repo(&reg, "json");
    let target = format!("{repo}:1.0.0");
    let push: PushOut = run_typed(&env, &[os("push"), os(&d), os(&target), os("--plain-http")]);
    let r = &push.requests;
    assert_eq!(r.total, r.head + r.get + r.post + r.put + r.token);
    assert!(r.head >= push.blobs_total && r.put >= 1 && r.bytes_sent >= push.bytes_uploaded);
    assert!(r.token == 0 && r.retried == 0 && r.mounted == 0 && r.bytes_received == 0);
    assert!(push.ok && push.manifest_digest == d);
    assert_eq!(push.reference, format!("{repo}:sha256-{d}"));
    assert_eq!(push.tag_reference.as_deref(), Some(target.as_str()));
    assert!(push.remote_digest.starts_with("sha256:") && !push.media_type.is_empty());
    assert!(push.manifests == 1 && push.layers > 0 && push.format == 2);
    assert_eq!(push.blobs_uploaded + push.blobs_present, push.blobs_total);
    assert!(push.bytes_uploaded > 0);
    assert!(push.packs_total == 1 && push.packs_uploaded == 1);
    assert_eq!(
        (push.attestations_pushed, push.attestations_present),
        (0, 0)
    );

    let other = TestEnv::new();
    let pull: PullOut = run_typed(&other, &[os("pull"), os(&target), os("--plain-http")]);
    let r = &pull.pull.requests;
    assert_eq!(r.total, r.get);
    assert!(r.get > pull.pull.blobs_fetched && r.bytes_received > pull.pull.bytes_fetched);
    assert!(r.head + r.post + r.put + r.token + r.retried + r.mounted + r.bytes_sent == 0);
    assert!(pull.ok && pull.provenance.manifest_digest == d);
    assert!(pull.ingest.source.starts_with("oci://"));
    absolute(&pull.ingest.store);
    assert_eq!(pull.pull.remote_digest, push.remote_digest);
    assert!(pull.pull.source.starts_with("oci://") && pull.pull.manifests == 1);
    assert!(
        pull.pull.blobs_fetched > 0
            && pull.pull.bytes_fetched > 0
            && !pull.pull.media_type.is_empty()
    );
    assert_eq!(pull.pull.format, 2);
    assert_eq!((pull.pull.packs_fetched, pull.pull.packs_skipped), (1, 0));
    assert_eq!(pull.pull.attestations_fetched, 0);
}

/// The `(code, kind)` pairs the table of docs/exit-codes.md lists.
fn documented_kinds() -> std::collections::BTreeSet<(u8, String)> {
    let doc = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/exit-codes.md"))
        .expect("docs/exit-codes.md");
    let mut kinds = std::collections::BTreeSet::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(code), Some(kind)) = (cells.get(1), cells.get(2)) else {
            continue;
        };
        let Ok(code) = code.parse::<u8>() else {
            continue;
        };
        for k in kind
            .split(',')
            .map(|k| k.trim().trim_matches('`'))
            .filter(|k| !k.is_empty())
        {
            kinds.insert((code, k.to_string()));
        }
    }
    // A registry's missing tag is not-found too; the table row 4 lists it once.
    kinds
}

#[test]
fn exit_codes_lists_the_documented_table() {
    // No store is needed, nor opened.
    let mut cmd = Command::new(util::bin());
    cmd.env_remove("CESTORE_DIR").args([
        "exit-codes",
        "--json",
        "--store",
        "/nonexistent/cestore-store",
    ]);
    let out = cmd.output().expect("run cestore");
    assert_ok(&out);
    let table: ExitCodesOut = one_object(&out, "exit-codes");
    assert!(table.ok);
    let listed: std::collections::BTreeSet<(u8, String)> = table
        .exit_codes
        .iter()
        .map(|e| (e.code, e.kind.clone()))
        .collect();
    assert_eq!(listed.len(), table.exit_codes.len(), "a kind listed twice");
    assert_eq!(listed, documented_kinds());
    let codes: Vec<u8> = table.exit_codes.iter().map(|e| e.code).collect();
    assert!(codes.windows(2).all(|w| w[0] <= w[1]), "{codes:?}");

    // The human table: a header, success, then one line per kind.
    let out = Command::new(util::bin())
        .arg("exit-codes")
        .output()
        .unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 2 + table.exit_codes.len(), "{text}");
    for e in &table.exit_codes {
        assert!(
            text.lines().any(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                words.len() >= 2 && words[0] == e.code.to_string() && words[1] == e.kind
            }),
            "{} {} missing:\n{text}",
            e.code,
            e.kind
        );
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesOut {
    ok: bool,
    plugin: RulesPluginOut,
    ce_arms: Vec<String>,
    bounds: Vec<RulesBoundOut>,
    exact_version: RulesVersionOut,
    gitnexus: RulesGitNexusOut,
    rules: Vec<RulesRuleOut>,
    tree_rules: Vec<RulesTreeRuleOut>,
    flags: Vec<RulesFlagOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesTreeRuleOut {
    rule: String,
    kind: String,
    code: u8,
    message: String,
    from: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesRuleOut {
    rule: String,
    kind: String,
    code: u8,
    message: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesPluginOut {
    name: String,
    manifest: String,
    manifest_schema_version: u32,
    sandbox_dir: String,
    required_skills: Vec<String>,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct RulesBoundOut {
    field: String,
    flag: String,
    constant: String,
    limit: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesVersionOut {
    description: String,
    pattern: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesGitNexusOut {
    pinned_version: String,
    revisions: Vec<String>,
    sandbox_gitnexus: String,
    sandbox_gitnexus_shared: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFlagOut {
    flag: String,
    keyword: String,
}

/// `rules` prints the decisions the Python package reads, the seed's
/// values among them, with no store; its text names each of them.
#[test]
fn rules_prints_the_decisions_bindings_read() {
    let mut cmd = Command::new(util::bin());
    cmd.env_remove("CESTORE_DIR").args([
        "rules",
        "--json",
        "--store",
        "/nonexistent/cestore-store",
    ]);
    let out = cmd.output().expect("run cestore");
    assert_ok(&out);
    let rules: RulesOut = one_object(&out, "rules");
    assert!(rules.ok);
    assert_eq!(rules.plugin.name, "compound-engineering");
    assert_eq!(rules.plugin.manifest, ".claude-plugin/plugin.json");
    assert_eq!(rules.plugin.manifest_schema_version, 1);
    assert_eq!(rules.plugin.sandbox_dir, "/opt/compound-engineering-plugin");
    assert_eq!(
        rules.plugin.required_skills,
        ["ce-plan", "ce-work", "ce-code-review"]
    );
    assert_eq!(
        rules.ce_arms,
        ["ce_workflow", "ce_workflow_direct", "ce_review"]
    );
    let bound = |field: &str, flag: &str, constant: &str, limit: u64| RulesBoundOut {
        field: field.into(),
        flag: flag.into(),
        constant: constant.into(),
        limit,
    };
    assert_eq!(
        rules.bounds,
        [
            bound("files", "--max-files", "MAX_CE_PLUGIN_FILES", 2_048),
            bound(
                "file_bytes",
                "--max-file-bytes",
                "MAX_CE_PLUGIN_FILE_BYTES",
                2 * 1024 * 1024
            ),
            bound(
                "total_bytes",
                "--max-total-bytes",
                "MAX_CE_PLUGIN_TOTAL_BYTES",
                16 * 1024 * 1024
            ),
            bound(
                "path_bytes",
                "--max-path-bytes",
                "MAX_CE_PLUGIN_PATH_BYTES",
                1_024
            ),
        ]
    );
    assert!(rules
        .exact_version
        .pattern
        .starts_with("(?:0|[1-9][0-9]*)\\."));
    assert!(rules
        .exact_version
        .description
        .contains("MAJOR.MINOR.PATCH"));
    assert_eq!(rules.gitnexus.pinned_version, "1.6.9");
    assert_eq!(rules.gitnexus.revisions, ["seed", "upstream"]);
    assert_eq!(rules.gitnexus.sandbox_gitnexus, "/opt/gitnexus");
    assert_eq!(
        rules.gitnexus.sandbox_gitnexus_shared,
        "/opt/gitnexus-shared"
    );
    let keyword = |flag: &str| {
        rules
            .flags
            .iter()
            .find(|f| f.flag == flag)
            .map(|f| f.keyword.as_str())
    };
    assert_eq!(keyword("--plugin-dir"), Some("plugin_dir"));
    assert_eq!(keyword("--trusted-key"), Some("trusted_keys"));
    assert_eq!(keyword("--max-files"), Some("Bounds(files=...)"));
    // Each rule is the one a rejection names, with its message.
    let rule = |id: &str| rules.rules.iter().find(|r| r.rule == id);
    let mismatch = rule("version-mismatch").expect("version-mismatch");
    assert_eq!((mismatch.code, mismatch.kind.as_str()), (3, "rejected"));
    assert_eq!(
        mismatch.message,
        "Compound Engineering plugin version mismatch: expected {expected}, got {got}: {path}"
    );
    assert!(rule("gitnexus-version-drifted").is_some());
    assert!(rule("unknown-arm").is_some());

    let out = Command::new(util::bin()).arg("rules").output().unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "compound-engineering",
        "ce_workflow_direct",
        "MAX_CE_PLUGIN_TOTAL_BYTES",
        "1.6.9",
        rules.exact_version.pattern.as_str(),
        "--plugin-dir",
        "gitnexus-shared-identity",
    ] {
        assert!(text.contains(word), "{word} missing:\n{text}");
    }
}

/// A rejection carries the reference's own words as `reference_message`,
/// so that the manifest's three rules are told apart, with what the manifest
/// held, from the error alone; a rule the reference words with Python's own
/// exception text carries none.
#[test]
fn a_rejection_carries_the_references_words() {
    let env = TestEnv::new();
    let cases: [(&str, &str, &str, Option<&str>); 5] = [
        (
            "{",
            "1.0.0",
            "manifest-invalid",
            Some(
                "Compound Engineering plugin manifest is invalid: \
                 Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            ),
        ),
        (
            r#"{"name": "other", "version": "1.0.0"}"#,
            "1.0.0",
            "not-compound-engineering",
            Some("CE comparator requires the compound-engineering plugin manifest"),
        ),
        (
            r#"{"name": "compound-engineering", "version": 2}"#,
            "1.0.0",
            "version-mismatch",
            Some("Compound Engineering plugin version mismatch: expected 1.0.0, got 2"),
        ),
        (
            r#"{"name": "compound-engineering"}"#,
            "1.0.0",
            "version-mismatch",
            Some("Compound Engineering plugin version mismatch: expected 1.0.0, got None"),
        ),
        (
            r#"{"name": "compound-engineering", "version": "1.0"}"#,
            "1.0",
            "version-not-exact",
            Some(
                "--ce-plugin-version must be an exact semantic version \
                 (aliases and ranges are forbidden)",
            ),
        ),
    ];
    for (i, (manifest, version, rule, words)) in cases.into_iter().enumerate() {
        let src = env.path(&format!("src{i}"));
        minimal_plugin(&src, "1.0.0");
        write(&src.join(".claude-plugin/plugin.json"), manifest);
        let out = env
            .cmd(["digest", "--json", "--version", version])
            .arg(&src)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{rule}");
        let err: ErrorOut = one_object(&out, rule);
        assert_eq!(err.error.rule.as_deref(), Some(rule));
        assert_eq!(err.error.reference_message.as_deref(), words, "{rule}");
    }
    let src = env.path("gone");
    let out = env
        .cmd(["digest", "--json", "--version", "1.0.0"])
        .arg(&src)
        .output()
        .unwrap();
    let err: ErrorOut = one_object(&out, "source-unavailable");
    assert_eq!(err.error.rule.as_deref(), Some("source-unavailable"));
    assert_eq!(err.error.reference_message, None);
}

#[test]
fn a_conflict_at_one_path_carries_it() {
    let (env, _, d) = util::plugin_store("src", "1.0.0");
    let view = env.path("view");
    env.checkout_ok(&d, &view, &[]);
    let bundle = env.path("bundle.tar");
    write(&bundle, "taken\n");
    let inside = env.store.join("inside");
    let store_real = fs::canonicalize(&env.store).unwrap();
    let cases: [(&str, Vec<&OsStr>, PathBuf, &str); 3] = [
        (
            "dest exists",
            vec![os("checkout"), os(&d), view.as_os_str()],
            fs::canonicalize(env.path("")).unwrap().join("view"),
            "a view is only made at a new path",
        ),
        (
            "dest inside the store",
            vec![os("checkout"), os(&d), inside.as_os_str()],
            store_real.join("inside"),
            "lies inside the store",
        ),
        (
            "bundle exists",
            vec![os("export"), os(&d), os("--output"), bundle.as_os_str()],
            bundle.clone(),
            "already exists",
        ),
    ];
    for (what, args, path, words) in cases {
        let mut all = args.clone();
        all.push(os("--json"));
        let out = env.run(&all);
        assert_eq!(out.status.code(), Some(6), "{what}: {out:?}");
        let err: ErrorOut = one_object(&out, what);
        assert_eq!(err.error.kind, "conflict", "{what}");
        assert_eq!(
            err.error.path.as_deref(),
            Some(&*path.to_string_lossy()),
            "{what}: {err:?}"
        );
        assert!(err.error.message.contains(words), "{what}: {err:?}");
    }
}

#[test]
fn source_fields_fit_the_documented_schema() {
    let env = TestEnv::new();
    let (repo, commit) = crate::provenance::subdir_repo(&env, "repo");
    let human = crate::provenance::ingest_git(&env, &repo, "HEAD", &["--subdir", "plugins/p"]);
    let d = human.lines().next().unwrap().to_string();

    let show: ShowOut = run_typed(&env, &[os("show"), os(&d)]);
    assert_eq!(show.sources.len(), 1);
    assert_eq!(
        show.sources[0].record.commit.as_deref(),
        Some(commit.as_str())
    );
    assert_eq!(show.sources[0].record.path, "plugins/p");
    let list: ListOut = run_typed(&env, &[os("list")]);
    let brief = list.snapshots[0].source.as_ref().expect("a source");
    assert_eq!(brief.commit.as_deref(), Some(commit.as_str()));
    assert!(brief.clean);
    let log: LogOut = run_typed(&env, &[os("log")]);
    let record = log.ingests[0].source_record.as_ref().expect("a record");
    assert_eq!(record.read_from, "git");

    let results = env.path("results.jsonl");
    crate::util::write_lines(
        &results,
        &[
            serde_json::json!({"arm": "ce_review", "ce_plugin_version": "1.0.0", "ce_plugin_manifest_digest": d}),
        ],
    );
    let audit: AuditOut = run_typed(
        &env,
        &[
            os("audit"),
            results.as_os_str(),
            os("--require-clean-source"),
            os("--source-repo"),
            repo.as_os_str(),
        ],
    );
    assert!(audit.passed && audit.require_clean_source);
    absolute(audit.source_repo.as_deref().unwrap());
    let check = audit.digests[0].source_check.as_ref().expect("a check");
    assert_eq!(check.status, "equal");
    assert_eq!(check.found.as_deref(), Some(d.as_str()));
    assert!(audit.digests[0].source.is_some());

    let verify: VerifySourceOut = run_typed(
        &env,
        &[os("verify"), os("--source"), repo.as_os_str(), os(&d)],
    );
    assert!(verify.ok);
    absolute(&verify.repository);
    assert_eq!(verify.status, "equal");
    assert_eq!(verify.expected, d);
}

/// `rules` lists, with the real binary, every rule id each error of the
/// tree profile can carry (one sample of every variant, from the library),
/// with its error's exit code and where it is refused; its text names them.
#[test]
fn rules_lists_every_rule_of_the_tree_profile() {
    use cestore::contract::{
        capture_samples, check_samples, copy_from, copy_samples, declaration_samples,
        ingest_samples,
    };
    use cestore::error::Error;
    use cestore::store::ingest::tree::TreeIngestError;

    let out = Command::new(util::bin())
        .env_remove("CESTORE_DIR")
        .args(["rules", "--json", "--store", "/nonexistent/cestore-store"])
        .output()
        .unwrap();
    assert_ok(&out);
    let rules: RulesOut = one_object(&out, "rules");
    let listed = |id: &str, from: &str| {
        let r = rules
            .tree_rules
            .iter()
            .find(|r| r.rule == id)
            .unwrap_or_else(|| panic!("{id} is not listed"));
        assert!(r.from.iter().any(|f| f == from), "{id}: {:?}", r.from);
        (r.code, r.kind.clone())
    };
    let mut errors: Vec<(&str, Error)> = Vec::new();
    errors.extend(
        capture_samples()
            .into_iter()
            .map(|e| ("capture", TreeIngestError::Capture(e).into())),
    );
    errors.extend(
        declaration_samples()
            .into_iter()
            .map(|e| ("declarations", TreeIngestError::Declaration(e).into())),
    );
    errors.extend(ingest_samples().into_iter().map(|e| ("ingest", e.into())));
    errors.extend(
        copy_samples()
            .into_iter()
            .map(|e| (copy_from(&e), e.into())),
    );
    let mut ids = std::collections::BTreeSet::new();
    for (from, e) in &errors {
        if let Some(id) = e.rule() {
            ids.insert(id);
            let kind = e.error_kind();
            assert_eq!(
                listed(id, from),
                (kind.exit_code(), kind.name().to_string()),
                "{id}"
            );
        }
    }
    for e in check_samples() {
        ids.insert(e.rule());
        assert_eq!(listed(e.rule(), "stored"), (1, "integrity".to_string()));
    }
    assert_eq!(ids.len(), rules.tree_rules.len(), "no rule listed twice");
    assert!(ids.contains("task-asset-symlink") && ids.contains("sandbox-copy-target-symlink"));

    // docs/exit-codes.md lists each, with its code, kind and where refused.
    let doc = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/exit-codes.md"))
        .expect("docs/exit-codes.md");
    for r in &rules.tree_rules {
        let row = format!(
            "| `{}` | {} | `{}` | {} | ",
            r.rule,
            r.code,
            r.kind,
            r.from.join(", ")
        );
        assert!(
            doc.lines().any(|l| l.starts_with(&row)),
            "docs/exit-codes.md lacks {row}"
        );
    }

    let out = Command::new(util::bin()).arg("rules").output().unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    for id in &ids {
        assert!(
            text.lines()
                .any(|l| l.starts_with("tree rule") && l.contains(&format!(" {id} ("))),
            "{id} missing:\n{text}"
        );
    }
}

/// The reports of `ingest --profile tree|dependency|task`, `checkout
/// --writable` and `materialize` fit their documented schema.
#[test]
fn tree_reports_fit_the_documented_schema() {
    let env = TestEnv::new();
    let repo = env.path("repo");
    write(&repo.join("assets/a.txt"), "alpha\n");
    fs::create_dir_all(repo.join("assets/empty")).unwrap();
    write(&repo.join("node_modules/pkg/cli.js"), "#!/bin/sh\n");
    util::chmod(&repo.join("node_modules/pkg/cli.js"), 0o755);
    fs::create_dir_all(repo.join("node_modules/.bin")).unwrap();
    symlink("../pkg/cli.js", repo.join("node_modules/.bin/cli")).unwrap();
    let task = env.path("task.json");
    write(
        &task,
        r#"{"sandbox_copy": ["assets"], "sandbox_dependencies": [{"source": "node_modules", "target": "node_modules"}]}"#,
    );

    let harness = env.path("harness");
    util::gitnexus_harness(&harness, "1.6.9");
    let runtime: IngestRuntimeOut = run_typed(
        &env,
        &[
            os("ingest"),
            os("--profile"),
            os("runtime"),
            harness.as_os_str(),
        ],
    );
    assert!(runtime.ok && !runtime.already_present && runtime.new_objects > 0);
    assert_eq!(
        (
            runtime.profile.as_str(),
            runtime.name.as_str(),
            runtime.rules.as_str()
        ),
        ("tree", "gitnexus-runtime", "seed")
    );
    assert_eq!(runtime.components.len(), 7);
    assert_eq!(
        (
            runtime.components[2].path.as_str(),
            runtime.components[2].source.as_str()
        ),
        (
            "gitnexus/node_modules",
            harness.join("gitnexus/node_modules").to_str().unwrap()
        )
    );
    assert_eq!(runtime.manifest_digest.len(), 64);
    assert!(runtime.entries >= 14 && runtime.total_bytes > 0 && runtime.bytes_written > 0);
    assert!(
        runtime.reused_objects == 0
            && runtime.source.ends_with("harness")
            && !runtime.store.is_empty()
    );

    let tree: IngestTreeOut = run_typed(
        &env,
        &[
            os("ingest"),
            os("--profile"),
            os("tree"),
            repo.as_os_str(),
            os("--copy"),
            os("assets"),
        ],
    );
    assert!(tree.ok && !tree.already_present);
    assert_eq!(
        (tree.profile.as_str(), tree.name.as_str()),
        ("tree", "tree")
    );
    is_digest(&tree.manifest_digest);
    assert_eq!(tree.declarations, ["assets"]);
    assert_eq!((tree.entries, tree.total_bytes), (3, 6));
    absolute(&tree.source);
    absolute(&tree.store);

    let deps: IngestDependencyOut = run_typed(
        &env,
        &[
            os("ingest"),
            os("--profile"),
            os("dependency"),
            repo.as_os_str(),
            os("--source"),
            os("node_modules"),
            os("--target"),
            os("node_modules"),
        ],
    );
    assert!(deps.ok);
    assert_eq!(deps.profile, "dependencies");
    is_digest(&deps.digest);
    is_digest(&deps.dependency_content_digest);
    let dep = &deps.dependencies[0];
    assert_eq!(dep.snapshot_path, "dependencies/00000/payload");
    assert_eq!(dep.kind, "directory");
    let link = dep.entries.iter().find(|e| e.kind == "symlink").unwrap();
    assert_eq!(
        (link.path.as_str(), link.link_target.as_str()),
        ("payload/.bin/cli", "../pkg/cli.js")
    );
    assert_eq!(deps.entries, dep.entries.len() as u64);

    let sha = "b".repeat(40);
    let task: IngestTaskOut = run_typed(
        &env,
        &[
            os("ingest"),
            os("--profile"),
            os("task"),
            repo.as_os_str(),
            os("--task"),
            task.as_os_str(),
            os("--resolved-sha"),
            os(&sha),
        ],
    );
    assert!(task.ok && task.profile == "task");
    is_digest(&task.digest);
    assert_eq!(task.manifest_digest, tree.manifest_digest);
    assert_eq!(task.dependency_manifest_digest, deps.digest);
    assert_eq!(
        task.dependency_content_digest,
        deps.dependency_content_digest
    );
    assert_eq!(task.resolved_sha, sha);
    assert_eq!(task.harness_identity, "");
    assert_eq!(
        task.dependency_declarations,
        [("node_modules".to_string(), "node_modules".to_string())]
    );
    let file = task.entries.iter().find(|e| e.kind == "file").unwrap();
    assert_eq!(
        (file.path.as_str(), file.size, file.mode),
        ("assets/a.txt", 6, 0)
    );
    assert_eq!(file.sha256, sha_hex(b"alpha\n"));
    absolute(&task.repo_identity);

    let copy = env.path("copy");
    let writable: WritableOut = run_typed(
        &env,
        &[
            os("checkout"),
            os("--writable"),
            os(&task.digest),
            copy.as_os_str(),
        ],
    );
    assert!(writable.ok && writable.writable);
    assert_eq!(writable.manifest_digest, task.digest);
    assert_eq!(writable.profile, "task");
    assert_eq!(writable.path, copy.to_str().unwrap());
    assert_eq!(writable.reflinked + writable.copied, 2);
    assert_eq!(writable.symlinks, 1);
    assert_eq!(writable.max_fallback_bytes, 2 << 30);

    let clone = env.path("clone");
    fs::create_dir_all(&clone).unwrap();
    let materialized: MaterializeOut = run_typed(
        &env,
        &[os("materialize"), os(&task.digest), clone.as_os_str()],
    );
    assert!(materialized.ok);
    assert_eq!(materialized.digest, task.digest);
    assert_eq!(materialized.clone, clone.to_str().unwrap());
    assert_eq!(materialized.declarations, ["assets"]);
    assert_eq!(
        (
            materialized.reflinked + materialized.copied,
            materialized.directories,
            materialized.symlinks
        ),
        (1, 2, 0)
    );
    assert!(materialized.bytes_copied <= 6);

    // verify --tree of the task's view: clean, then a changed link named.
    let view: PathOut = run_typed(&env, &[os("path"), os(&task.digest)]);
    let tree_out: TreeOut = run_typed(
        &env,
        &[os("verify"), os("--tree"), os(&view.path), os(&task.digest)],
    );
    assert!(tree_out.ok && tree_out.differences.is_empty());
}

/// A refusal of `ingest --profile`, `checkout --writable` and `materialize`
/// prints one JSON error object with its code, kind and rule, and changes
/// nothing in the store.
#[test]
fn tree_failures_print_one_json_error_object() {
    let env = TestEnv::new();
    let repo = env.path("repo");
    write(&repo.join("assets/a.txt"), "alpha\n");
    let task = env.path("task.json");
    write(&task, r#"{"sandbox_copy": ["assets"]}"#);
    let sha = "c".repeat(40);
    let ingest_task = |task: &Path, repo: &Path| -> Vec<OsString> {
        [
            os("ingest"),
            os("--profile"),
            os("task"),
            repo.as_os_str(),
            os("--task"),
            task.as_os_str(),
            os("--resolved-sha"),
            os(&sha),
        ]
        .iter()
        .map(|a| a.to_os_string())
        .collect()
    };
    let args = ingest_task(&task, &repo);
    let ingested: IngestTaskOut = run_typed(
        &env,
        &args.iter().map(OsString::as_os_str).collect::<Vec<_>>(),
    );
    let d = ingested.digest;

    let linked = env.path("linked");
    write(&linked.join("real/a.txt"), "a\n");
    symlink("real", linked.join("assets")).unwrap();
    let bad_task = env.path("bad-task.json");
    write(&bad_task, r#"{"sandbox_copy": 7}"#);
    let clone = env.path("clone");
    fs::create_dir_all(&clone).unwrap();
    symlink("elsewhere", clone.join("assets")).unwrap();
    let missing = env.path("missing-clone");
    let from = |name, code, kind, args: Vec<OsString>| Case {
        name,
        args,
        code,
        kind,
        rule: None,
    };
    let mut cases = vec![
        ruled(
            case(
                "a symlink in a declared path (ingest --profile tree)",
                3,
                "rejected",
                &[
                    os("ingest"),
                    os("--profile"),
                    os("tree"),
                    linked.as_os_str(),
                    os("--copy"),
                    os("assets"),
                ],
            ),
            "task-asset-symlink",
        ),
        ruled(
            from(
                "sandbox_copy not a list (ingest --profile task)",
                3,
                "rejected",
                ingest_task(&bad_task, &repo),
            ),
            "task-copy-not-a-list",
        ),
        ruled(
            from(
                "no repository (ingest --profile task)",
                3,
                "rejected",
                ingest_task(&task, &env.path("no-repo")),
            ),
            "task-asset-real-directory",
        ),
        case(
            "a bound above the harness's (ingest --profile tree)",
            2,
            "usage",
            &[
                os("ingest"),
                os("--profile"),
                os("tree"),
                repo.as_os_str(),
                os("--max-entries"),
                os("100001"),
            ],
        ),
        ruled(
            case(
                "a declared root that is a symlink in the clone (materialize)",
                3,
                "rejected",
                &[os("materialize"), os(&d), clone.as_os_str()],
            ),
            "sandbox-copy-target-symlink",
        ),
        ruled(
            case(
                "no clone (materialize)",
                4,
                "not-found",
                &[os("materialize"), os(&d), missing.as_os_str()],
            ),
            "asset-staging-clone-not-a-directory",
        ),
        case(
            "a fallback bound above 2 GiB (checkout --writable)",
            2,
            "usage",
            &[
                os("checkout"),
                os("--writable"),
                os(&d),
                env.path("copy").as_os_str(),
                os("--max-fallback-bytes"),
                os("2147483649"),
            ],
        ),
    ];
    for c in &mut cases {
        c.args.push("--store".into());
        c.args.push(env.store.clone().into_os_string());
    }
    let before = util_state(&env);
    for c in &cases {
        check_json_case(c, &["--json"]);
        check_json_case(c, &[]);
    }
    assert_eq!(
        util_state(&env),
        before,
        "a failed command changed the store"
    );
    assert_eq!(
        fs::read_link(clone.join("assets")).unwrap(),
        Path::new("elsewhere")
    );
    assert!(!missing.exists() && !env.path("copy").exists());
}

/// An environment's export, import, push and pull reports fit their
/// documented schema, each member listed (the push and pull need a
/// registry, `CESTORE_TEST_REGISTRY`).
#[test]
fn an_environments_transfers_fit_the_documented_schema() {
    let env = TestEnv::new();
    let src = env.plugin("src", "1.0.0");
    let ce = env.ingest_digest(&src, "1.0.0");
    let member = format!("ce_plugin_manifest_digest={ce}");
    let e: EnvironmentIngestOut = run_typed(
        &env,
        &[
            os("ingest"),
            os("--profile"),
            os("environment"),
            os("--member"),
            os(&member),
        ],
    );
    let d = e.manifest_digest.clone();
    let bundle = env.path("env.tar");
    let exported: ExportOut =
        run_typed(&env, &[os("export"), os(&d), os("-o"), bundle.as_os_str()]);
    assert!(exported.ok);
    assert_eq!(exported.members, std::slice::from_ref(&ce));
    let other = TestEnv::new();
    let imported: ImportOut = run_typed(&other, &[os("import"), bundle.as_os_str()]);
    assert!(imported.ok);
    assert_eq!(imported.members.len(), 1);
    assert_eq!(imported.members[0].manifest_digest, ce);
    assert!(!imported.members[0].already_present);
    assert!(imported.members[0].new_objects > 0);
    assert_eq!(imported.members[0].reused_objects, 0);
    let Some(reg) = crate::remote::registry("an_environments_transfers_fit_the_documented_schema")
    else {
        return;
    };
    let repo = crate::remote::repo(&reg, "environment-schema");
    let pushed: PushOut = run_typed(&env, &[os("push"), os(&d), os(&repo), os("--plain-http")]);
    assert_eq!(pushed.members.len(), 1);
    assert_eq!(pushed.members[0].manifest_digest, ce);
    assert_eq!(pushed.members[0].reference, format!("{repo}:sha256-{ce}"));
    assert!(pushed.members[0].tag_reference.is_none());
    let third = TestEnv::new();
    let pulled: PullOut = run_typed(
        &third,
        &[
            os("pull"),
            os(&format!("{repo}:sha256-{d}")),
            os("--plain-http"),
        ],
    );
    assert_eq!(pulled.provenance.manifest_digest, d);
    assert_eq!(pulled.members.len(), 1);
    assert_eq!(pulled.members[0].manifest_digest, ce);
    assert!(
        pulled.members[0]
            .source
            .starts_with(&format!("oci://{repo}@sha256:")),
        "{}",
        pulled.members[0].source
    );
}
