//! The whole audit: read every results file, pull the digests the store
//! lacks from a registry when one is named (exactly as `cestore pull` takes
//! them), then judge each digest against the store.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{judge, scan, unknown, AuditReport, FieldTable, Fields, JudgeOptions, Source};
use crate::digest::ManifestDigest;
use crate::error::{Misuse, Result};
use crate::remote::{self, transfer, SnapshotRef};
use crate::store::{Need, Opener};

/// What to audit.
pub struct AuditOptions<'a> {
    /// The inputs.
    pub sources: &'a [Source],
    /// The fields read.
    pub fields: Fields,
    /// The digest fields added to the default table, or re-mapped in it
    /// (`NAME=KIND` each, as `--field` takes them).
    pub field_specs: &'a [String],
    /// Re-hash every snapshot's objects.
    pub verify: bool,
    /// Fail every digest without a clean source record naming a commit.
    pub require_clean_source: bool,
    /// A local clone to re-derive each digest from its recorded commit in.
    pub source_repo: Option<&'a Path>,
    /// The keys trusted: with any, a digest no attestation vouches for
    /// under one of them fails (`unsigned`).
    pub trusted: &'a [crate::sign::PublicKey],
    /// `REGISTRY/REPOSITORY` to pull unknown digests from.
    pub registry: Option<&'a str>,
    /// How to reach the registry.
    pub remote_options: crate::remote::Options,
    /// Whether to draw progress lines on a terminal.
    pub progress: bool,
    /// The store directory whose substituters (`STORE/substituters.json`,
    /// `CESTORE_SUBSTITUTERS`) supply the digests it lacks when no
    /// `registry` is named; `None` asks none.
    pub substitute_root: Option<&'a Path>,
    /// Pass an audit with malformed lines when all else passes
    /// (`--allow-malformed`); by default one fails it, since any digest in
    /// it was not audited.
    pub allow_malformed: bool,
}

/// Audits results files against the store.
/// The store is opened through `open`: to add snapshots (made when it is
/// not there) while digests are pulled with `--registry`, then to read.
pub fn audit(open: Opener<'_>, opts: &AuditOptions<'_>) -> Result<AuditReport> {
    if let Some(reg) = opts.registry {
        check_registry(reg)?;
    }
    let table = FieldTable::with_specs(opts.field_specs)?;
    let scan = scan(opts.sources, &opts.fields, &table, opts.progress)?;
    let (pulled, pull_errors) = match opts.registry {
        Some(reg) => {
            let missing = {
                let store = open(Need::Creating)?;
                unknown(&store, &scan)?
            };
            pull_unknown(open, reg, missing, opts)
        }
        None => match opts.substitute_root {
            Some(root) => substitute_unknown(open, root, &scan)?,
            None => Default::default(),
        },
    };
    let store = open(Need::Existing)?;
    judge(
        &store,
        scan,
        &JudgeOptions {
            verify: opts.verify,
            require_clean_source: opts.require_clean_source,
            source_repo: opts.source_repo,
            trusted: opts.trusted,
            progress: opts.progress,
            allow_malformed: opts.allow_malformed,
            registry: opts.registry,
            pulled: &pulled,
            pull_errors: &pull_errors,
        },
    )
}

/// Pulls each digest the store lacks from the repository `reg`, as
/// `cestore pull REG:sha256-DIGEST` would (with the audit's trusted keys, a
/// snapshot none of them vouches for is not taken): returns those pulled,
/// and why each other one was not.
fn pull_unknown(
    open: Opener<'_>,
    reg: &str,
    missing: Vec<ManifestDigest>,
    opts: &AuditOptions<'_>,
) -> (BTreeSet<ManifestDigest>, BTreeMap<ManifestDigest, String>) {
    let (mut pulled, mut pull_errors) = (BTreeSet::new(), BTreeMap::new());
    if missing.is_empty() {
        return (pulled, pull_errors);
    }
    let remote = match remote::open(reg, &opts.remote_options) {
        Ok((remote, _)) => remote,
        // A registry that cannot be reached fails every pull alike.
        Err(e) => {
            let why = crate::error::error_chain(&e);
            pull_errors.extend(missing.into_iter().map(|d| (d, why.clone())));
            return (pulled, pull_errors);
        }
    };
    for d in missing {
        let tag = SnapshotRef::Tag(remote::snapshot_tag(&d));
        match transfer::pull(
            open,
            remote.as_ref(),
            &tag,
            transfer::DEFAULT_JOBS,
            opts.progress,
            opts.trusted,
            transfer::Arrived::Pulled,
        ) {
            Ok(_) => {
                pulled.insert(d);
            }
            Err(e) => {
                pull_errors.insert(d, crate::error::error_chain(&e));
            }
        }
    }
    (pulled, pull_errors)
}

/// Fetches each digest the store lacks from the store's substituters
/// ([`remote::substitute::ensure_present`]), when it has any: returns those
/// fetched, and why each other one was not.
fn substitute_unknown(
    open: Opener<'_>,
    root: &Path,
    scan: &scan::Scan,
) -> Result<(BTreeSet<ManifestDigest>, BTreeMap<ManifestDigest, String>)> {
    let (mut pulled, mut pull_errors) = (BTreeSet::new(), BTreeMap::new());
    if remote::substitute::config(root)?.substituters.is_empty() {
        return Ok((pulled, pull_errors));
    }
    let missing = {
        let store = open(Need::Creating)?;
        unknown(&store, scan)?
    };
    for d in missing {
        match remote::substitute::ensure_present(root, open, &d.to_string()) {
            Ok(()) => {
                pulled.insert(d);
            }
            Err(e) => {
                pull_errors.insert(d, crate::error::error_chain(&e));
            }
        }
    }
    Ok((pulled, pull_errors))
}

/// The registry names a repository, not a tag or digest: audit adds the
/// digest tag itself.
fn check_registry(reg: &str) -> Result<()> {
    let last = reg.rsplit('/').next().unwrap_or(reg);
    if !reg.contains('/') || last.contains(':') || last.contains('@') || last.is_empty() {
        return Err(Misuse::RegistryNotRepository {
            registry: reg.to_string(),
        }
        .into());
    }
    Ok(())
}
