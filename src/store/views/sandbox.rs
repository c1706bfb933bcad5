//! What a benchmark run's sandboxes get: `stage` (the release stored, its
//! view made) and `mounts` (one arm's read-only mounts).
//!
//! `stage` replaces the reference's `validate_ce_plugin_inputs`,
//! `staged_ce_plugin_snapshot` and `ce_plugin_mounts_for_arm`: it applies the
//! reference's preflight to the arms, ingests the release (instant when it is
//! already stored) or takes a digest already in the store, materialises a
//! view, and answers with the provenance, the view and every arm's mounts.
//!
//! The arm rule is the reference's ([`crate::gitnexus::ce_plugin_mounts_for_arm`]):
//! a CE arm gets the plugin view, any other arm none. With a GitNexus harness
//! root, the seven GitNexus runtime mounts ([`crate::gitnexus::runtime_mounts`])
//! follow, for every arm: the harness's `trusted_gitnexus_runtime_mounts`
//! takes no arm, so the runtime is the same for all of them.
//!
//! A view given by path must be one cestore made ([`crate::store::views::recorded_view`])
//! unless the caller asks for none of that check.

use std::path::{Path, PathBuf};

use crate::catalogue::{Provenance, ViewKind};
use crate::digest::ManifestDigest;
use crate::error::Result;
use crate::gitnexus::{self, ce_plugin_dir_for_arm, ce_plugin_mounts_for_arm, ReadOnlyMount};
use crate::profile::ce::rules::{is_ce_arm, ArmRule, Rejection};
use crate::store::ingest::{open_source, IngestOptions, IngestStats};
use crate::store::views::build::Method;
use crate::store::views::{
    effective_method, existing_shared_view, recorded_view, view_dir, view_for_run, Destination,
    ViewOf,
};
use crate::store::{Need, Opener};

/// The GitNexus runtime to mount, if any.
#[derive(Clone, Copy, Debug)]
pub struct GitNexusRuntime<'a> {
    /// The harness root holding `gitnexus/` and `gitnexus-shared/`, if any.
    pub root: Option<&'a Path>,
    /// The harness revision whose rules check the GitNexus runtime.
    pub revision: gitnexus::Revision,
    /// The version the seed's rules pin, when not the seed's own.
    pub version: Option<&'a str>,
}

impl GitNexusRuntime<'_> {
    /// The runtime's seven mounts, checked by the revision's rules; none
    /// without a harness root.
    pub fn mounts(&self) -> Result<Vec<ReadOnlyMount>> {
        match self.root {
            Some(root) => {
                let rules = gitnexus::Rules::new(self.revision, self.version)?;
                Ok(gitnexus::runtime_mounts(root, &rules)?)
            }
            None => Ok(Vec::new()),
        }
    }
}

/// Which release a CE arm sees.
#[derive(Clone, Copy)]
pub enum Release<'a> {
    /// No release was named.
    None,
    /// A source directory and the exact version it must carry.
    Source {
        /// The source directory; `None` when only a version was given.
        dir: Option<&'a Path>,
        /// The version; `None` when only a directory was given.
        version: Option<&'a str>,
    },
    /// A snapshot already in the store.
    Digest(&'a str),
}

/// What to stage.
pub struct StageOptions<'a> {
    /// The benchmark's arms.
    pub arms: &'a [String],
    /// The release CE arms see.
    pub release: Release<'a>,
    /// Where to check the view out; the store's shared view when `None`.
    pub dest: Option<&'a Path>,
    /// How to make the view's files.
    pub method: Method,
    /// The GitNexus runtime every arm gets.
    pub gitnexus: GitNexusRuntime<'a>,
    /// Which arms may be named.
    pub arm_rule: ArmRule<'a>,
    /// The bounds the release's walk enforces.
    pub bounds: crate::profile::ce::rules::Bounds,
    /// Sign the snapshot ingested with this key.
    pub sign_with: Option<&'a crate::sign::PrivateKey>,
    /// Refuse a source a file of which looks like a secret by its content.
    pub refuse_secrets: bool,
}

/// One arm's sandbox inputs.
#[derive(Debug, serde::Serialize)]
pub struct ArmMounts {
    /// The arm.
    pub arm: String,
    /// Claude's plugin directory in the sandbox, for CE arms only.
    pub plugin_dir: Option<&'static str>,
    /// The read-only mounts.
    pub mounts: Vec<ReadOnlyMount>,
}

/// The report of `cestore stage`.
#[derive(Debug, serde::Serialize)]
pub struct StageReport {
    /// The reference's provenance fields, when a CE arm is staged.
    pub provenance: Option<Provenance>,
    /// The view's absolute path.
    pub view: Option<String>,
    /// `checkout` (a view at `--dest`) or `shared` (the store's shared view).
    pub view_kind: Option<ViewKind>,
    /// What the ingest did, when a source directory was given.
    pub ingest: Option<IngestStats>,
    /// Every arm's mounts, in the order given.
    pub arms: Vec<ArmMounts>,
}

/// The reference's preflight of the arms: release inputs only with a CE
/// arm, and no arm the arm rule refuses.
fn check_arms(opts: &StageOptions<'_>) -> Result<bool> {
    let has_ce_arm = opts.arms.iter().any(|a| is_ce_arm(a));
    let supplied = !matches!(opts.release, Release::None);
    if !has_ce_arm && supplied {
        return Err(Rejection::PluginInputsWithoutCeArm.into());
    }
    opts.arm_rule.check(opts.arms.iter().map(String::as_str))?;
    Ok(has_ce_arm)
}

/// Applies the reference's preflight, stages the release and computes every arm's mounts.
///
/// Every input is checked before anything changes: the arms, the release
/// inputs, the GitNexus runtime and the destination. What fails after a
/// change takes that change back: a failed view takes back the ingest that
/// preceded it, so a failed stage leaves no view, record or event.
/// The store is opened through `open` only for a CE arm: to add the
/// release when it is given as a source (made when it is not there), else
/// to read it.
pub fn stage(open: Opener<'_>, opts: &StageOptions<'_>) -> Result<StageReport> {
    let has_ce_arm = check_arms(opts)?;
    let gitnexus = opts.gitnexus.mounts()?;
    let mut report = StageReport {
        provenance: None,
        view: None,
        view_kind: None,
        ingest: None,
        arms: Vec::new(),
    };
    if has_ce_arm {
        let source = match opts.release {
            Release::Source {
                dir: Some(dir),
                version: Some(version),
            } => {
                let ingest = IngestOptions {
                    source: dir,
                    git: None,
                    version,
                    bounds: opts.bounds,
                    sign_with: opts.sign_with,
                    refuse_secrets: opts.refuse_secrets,
                };
                Some((open_source(&ingest)?, ingest))
            }
            Release::Digest(_) => None,
            Release::None | Release::Source { .. } => {
                return Err(Rejection::CeArmWithoutPluginInputs.into())
            }
        };
        let mut store = open(if source.is_some() {
            Need::Creating
        } else {
            Need::Existing
        })?;
        let dest = opts
            .dest
            .map(|d| Destination::check(&store, d))
            .transpose()?;
        let method = effective_method(opts.method, false)?;
        let of = match (&source, opts.release) {
            (Some((source, ingest)), _) => ViewOf::Source(source, ingest),
            (None, Release::Digest(d)) => ViewOf::Digest(d),
            (None, _) => return Err(Rejection::CeArmWithoutPluginInputs.into()),
        };
        let made = view_for_run(&mut store, of, dest.as_ref(), method)?;
        report.provenance = Some(Provenance::from(&made.snapshot));
        report.view = Some(made.path);
        report.view_kind = Some(made.kind);
        report.ingest = made.ingested.map(|done| done.ingest);
    }
    let view = report.view.as_deref().map(Path::new);
    for arm in opts.arms {
        let mut mounts = ce_plugin_mounts_for_arm(arm, view)?;
        mounts.extend(gitnexus.iter().cloned());
        report.arms.push(ArmMounts {
            arm: arm.clone(),
            plugin_dir: ce_plugin_dir_for_arm(arm, view)?,
            mounts,
        });
    }
    Ok(report)
}

/// Where the plugin view comes from.
#[derive(Clone, Copy, Debug)]
pub enum ViewSource<'a> {
    /// No view was given.
    None,
    /// A view directory cestore made, optionally checked against an expected
    /// snapshot (a digest or unique prefix).
    Recorded {
        /// The view directory.
        path: &'a Path,
        /// The snapshot it must show, if given.
        expect: Option<&'a str>,
    },
    /// Any directory, taken as it is: no check and no digest.
    Unchecked(&'a Path),
    /// A snapshot digest or unique prefix: its shared view in the store.
    Digest(&'a str),
}

/// What `mounts` computes.
pub struct MountsOptions<'a> {
    /// The benchmark arm.
    pub arm: &'a str,
    /// The plugin view, if any.
    pub view: ViewSource<'a>,
    /// The GitNexus runtime every arm gets.
    pub gitnexus: GitNexusRuntime<'a>,
    /// Which arms may be named.
    pub arm_rule: ArmRule<'a>,
}

/// The report of `cestore mounts`.
#[derive(Debug, serde::Serialize)]
pub struct MountsReport {
    /// The arm.
    pub arm: String,
    /// Claude's plugin directory in the sandbox, for CE arms only.
    pub plugin_dir: Option<&'static str>,
    /// The snapshot the view shows; null without a view or with `--unchecked`.
    pub manifest_digest: Option<ManifestDigest>,
    /// The mounts, plugin first, then the GitNexus runtime's.
    pub mounts: Vec<ReadOnlyMount>,
}

/// The view a mount set shows and its snapshot: the store is opened only
/// for a view cestore must have made, or a snapshot's shared view.
fn find_view(
    open: Opener<'_>,
    source: ViewSource<'_>,
) -> Result<(Option<PathBuf>, Option<ManifestDigest>)> {
    let (path, digest) = match source {
        ViewSource::None => return Ok((None, None)),
        ViewSource::Unchecked(p) => return Ok((Some(view_dir(p)?), None)),
        ViewSource::Recorded { path, expect } => {
            let shown = view_dir(path)?;
            let store = open(Need::Existing)?;
            recorded_view(&store, &shown, expect)?
        }
        ViewSource::Digest(d) => {
            let store = open(Need::Existing)?;
            existing_shared_view(&store, d)?
        }
    };
    Ok((Some(path), Some(digest)))
}

/// Computes an arm's mounts: the plugin view's for a CE arm, then the
/// GitNexus runtime's.
pub fn mounts(open: Opener<'_>, opts: &MountsOptions<'_>) -> Result<MountsReport> {
    opts.arm_rule.check([opts.arm])?;
    let (view, manifest_digest) = find_view(open, opts.view)?;
    let plugin_dir = ce_plugin_dir_for_arm(opts.arm, view.as_deref())?;
    let mut mounts = ce_plugin_mounts_for_arm(opts.arm, view.as_deref())?;
    mounts.extend(opts.gitnexus.mounts()?);
    Ok(MountsReport {
        arm: opts.arm.to_owned(),
        plugin_dir,
        manifest_digest,
        mounts,
    })
}
