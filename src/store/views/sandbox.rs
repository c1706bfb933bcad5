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
//! The runtime's mounts come from the store, not from the operator's
//! checkout: the checkout is checked by the revision's rules, ingested as a
//! runtime snapshot ([`crate::store::ingest::tree::ingest_runtime`]), and
//! its shared view, checked by the same rules, is what the seven mounts
//! point into. A runtime rebuilt or edited later cannot change what a run
//! staged before it sees. A runtime snapshot already stored can be named
//! instead ([`GitNexusRuntime::stored`]), and then nothing is read from a
//! checkout but the rules' checks.
//!
//! ```text
//! checkout/gitnexus/{dist,package.json,node_modules,vendor,hooks/claude}
//! checkout/gitnexus-shared/{dist,package.json}
//!        │ checked, ingested (one `tree` snapshot, its digest the runtime's)
//!        ▼
//! STORE/views/<digest>/gitnexus/…  gitnexus-shared/…   (frozen, shared)
//!        │ checked again; each mount's source
//!        ▼
//! /opt/gitnexus/dist …  /opt/gitnexus-shared/package.json  (in the sandbox)
//! ```
//!
//! A view given by path must be one cestore made ([`crate::store::views::recorded_view`])
//! unless the caller asks for none of that check.

use std::path::{Path, PathBuf};

use crate::catalogue::resolve;
use crate::catalogue::{Provenance, ViewKind};
use crate::digest::ManifestDigest;
use crate::error::IoContext;
use crate::error::Result;
use crate::gitnexus::{self, ce_plugin_dir_for_arm, ce_plugin_mounts_for_arm, ReadOnlyMount};
use crate::profile::ce::rules::{is_ce_arm, ArmRule, Rejection};
use crate::store::ingest::environment::{record_in, EnvironmentReport, Member};
use crate::store::ingest::tree::{
    ingest_runtime, RuntimeComponentReport, RuntimeReport, StoredCounts,
};
use crate::store::ingest::{open_source, undo_ingest, IngestOptions, IngestReport, IngestStats};
use crate::store::views::build::Method;
use crate::store::views::{
    effective_method, existing_shared_view, recorded_view, shared_view, take_back_run_view,
    take_back_shared_view, view_dir, view_for_run, Destination, PathReport, ViewOf,
};
use crate::store::{Need, Opener, Store};

/// The GitNexus runtime to mount, if any.
#[derive(Clone, Copy, Debug)]
pub struct GitNexusRuntime<'a> {
    /// The harness root holding `gitnexus/` and `gitnexus-shared/`, if any.
    pub root: Option<&'a Path>,
    /// The harness revision whose rules check the GitNexus runtime.
    pub revision: gitnexus::Revision,
    /// The version the seed's rules pin, when not the seed's own.
    pub version: Option<&'a str>,
    /// A runtime snapshot already in the store (a digest or unique prefix)
    /// to mount in place of the checkout's: the checkout, when given, is
    /// still checked by the rules, but not read.
    pub stored: Option<&'a str>,
}

impl GitNexusRuntime<'_> {
    /// The rules a runtime is mounted by, after checking the checkout, if
    /// one is given, by them; `None` when no runtime is asked for.
    fn check(&self) -> Result<Option<gitnexus::Rules>> {
        if self.root.is_none() && self.stored.is_none() {
            return Ok(None);
        }
        let rules = gitnexus::Rules::new(self.revision, self.version)?;
        if let Some(root) = self.root {
            gitnexus::runtime_mounts(root, &rules)?;
        }
        Ok(Some(rules))
    }

    /// Whether mounting the runtime ingests a checkout (and so may make
    /// the store).
    fn ingests(&self) -> bool {
        self.root.is_some() && self.stored.is_none()
    }
}

/// A runtime mounted from the store: its snapshot's shared view and what
/// made it, so that a command failing later can take both back.
struct StagedRuntime {
    /// The shared view the mounts point into.
    view: PathReport,
    /// The ingest of the checkout, when the snapshot was not named.
    ingested: Option<(RuntimeReport, IngestReport)>,
    /// The seven mounts, checked by the rules in the view.
    mounts: Vec<ReadOnlyMount>,
}

impl StagedRuntime {
    /// The report's fields: the runtime's digest, its view and what the
    /// ingest stored.
    fn report(&self) -> RuntimeStaged {
        RuntimeStaged {
            manifest_digest: Some(self.view.manifest_digest),
            view: Some(self.view.path.to_string_lossy().into_owned()),
            ingest: self.ingested.as_ref().map(|(r, _)| r.stored.clone()),
            components: self
                .ingested
                .as_ref()
                .map(|(r, _)| r.components.clone())
                .unwrap_or_default(),
        }
    }
}

/// What a stage or mount set says of the GitNexus runtime it mounts: every
/// field null (and no component) when it mounts none.
#[derive(Debug, Default, serde::Serialize)]
pub struct RuntimeStaged {
    /// The runtime snapshot's digest (`gitnexus_runtime_manifest_digest`).
    #[serde(rename = "gitnexus_runtime_manifest_digest")]
    pub manifest_digest: Option<ManifestDigest>,
    /// The snapshot's shared view, which the runtime's mounts point into.
    #[serde(rename = "gitnexus_runtime_view")]
    pub view: Option<String>,
    /// What ingesting the checkout stored; null for a snapshot named by digest.
    #[serde(rename = "gitnexus_runtime_ingest")]
    pub ingest: Option<StoredCounts>,
    /// Each component, in the mounts' order: its path in the snapshot and
    /// the host path it was read from (none for a snapshot named by digest).
    #[serde(rename = "gitnexus_runtime_components")]
    pub components: Vec<RuntimeComponentReport>,
}

/// Mounts the runtime from the store: ingests the checkout (or takes the
/// snapshot named), makes its shared view and checks the view by `rules`.
/// A failure takes back what this call made.
fn stage_runtime(
    store: &mut Store,
    runtime: &GitNexusRuntime<'_>,
    rules: &gitnexus::Rules,
    sign_with: Option<&crate::sign::PrivateKey>,
) -> Result<StagedRuntime> {
    let (ingested, digest) = match (runtime.stored, runtime.root) {
        (Some(d), _) => (None, resolve(store.catalogue(), d)?),
        (None, Some(root)) => {
            let (report, record) = ingest_runtime(store, root, rules, sign_with)?;
            let digest = report.manifest_digest;
            (Some((report, record)), digest)
        }
        (None, None) => {
            return Err(crate::error::Error::Integrity(
                "a runtime to mount names neither a checkout nor a snapshot".into(),
            ))
        }
    };
    let viewed = shared_view(store, digest).and_then(|view| match view_mounts(&view, rules) {
        Ok(mounts) => Ok((view, mounts)),
        Err(e) => {
            take_back_shared_view(store, &view)?;
            Err(e)
        }
    });
    match viewed {
        Ok((view, mounts)) => Ok(StagedRuntime {
            view,
            ingested,
            mounts,
        }),
        Err(e) => {
            if let Some((_, record)) = &ingested {
                undo_ingest(store, record)?;
            }
            Err(e)
        }
    }
}

/// The seven mounts of a runtime's view: the rules' checks made again in
/// the view, whose real path each mount's source then lies under.
fn view_mounts(view: &PathReport, rules: &gitnexus::Rules) -> Result<Vec<ReadOnlyMount>> {
    let real = std::fs::canonicalize(&view.path).ctx("resolve the runtime's view", &view.path)?;
    Ok(gitnexus::runtime_mounts(&real, rules)?)
}

/// Takes back a runtime this command mounted: its view, when this command
/// made it, then its ingest.
fn unstage_runtime(store: &mut Store, staged: &StagedRuntime) -> Result<()> {
    take_back_shared_view(store, &staged.view)?;
    if let Some((_, record)) = &staged.ingested {
        undo_ingest(store, record)?;
    }
    Ok(())
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
    /// Record an environment of what the stage mounts, if asked.
    pub environment: Option<EnvironmentRequest<'a>>,
}

/// The environment a stage records when asked: the release and the
/// GitNexus runtime it mounts (as `ce_plugin_manifest_digest` and
/// `gitnexus_runtime_manifest_digest`), and any other stored snapshot named.
#[derive(Clone, Copy, Debug)]
pub struct EnvironmentRequest<'a> {
    /// The environment's name.
    pub name: &'a str,
    /// Members beyond the stage's own (a task's snapshot, say).
    pub members: &'a [Member],
}

/// The role of the release a stage mounts in its environment.
const CE_ROLE: &str = "ce_plugin_manifest_digest";

/// The role of the GitNexus runtime a stage mounts in its environment.
const RUNTIME_ROLE: &str = "gitnexus_runtime_manifest_digest";

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
    /// The GitNexus runtime mounted, if any.
    #[serde(flatten)]
    pub gitnexus_runtime: RuntimeStaged,
    /// The environment recorded, when one was asked for.
    pub environment: Option<EnvironmentReport>,
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

/// Applies the reference's preflight, stages the release and the GitNexus
/// runtime and computes every arm's mounts.
///
/// Every input is checked before anything changes: the arms, the release
/// inputs, the GitNexus runtime and the destination. What fails after a
/// change takes that change back: a failed plugin view takes back its
/// ingest and the runtime staged before it, so a failed stage leaves no
/// view, record or event. The store is opened through `open` only for a CE
/// arm or a runtime: made when a release or a runtime is read from a
/// source, else only read.
pub fn stage(open: Opener<'_>, opts: &StageOptions<'_>) -> Result<StageReport> {
    let has_ce_arm = check_arms(opts)?;
    let rules = opts.gitnexus.check()?;
    let mut report = StageReport {
        provenance: None,
        view: None,
        view_kind: None,
        ingest: None,
        gitnexus_runtime: RuntimeStaged::default(),
        environment: None,
        arms: Vec::new(),
    };
    let source = if has_ce_arm {
        match opts.release {
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
        }
    } else {
        None
    };
    let mut runtime_mounts = Vec::new();
    if has_ce_arm || rules.is_some() || opts.environment.is_some() {
        let mut store = open(if source.is_some() || opts.gitnexus.ingests() {
            Need::Creating
        } else {
            Need::Existing
        })?;
        let dest = match opts.dest {
            Some(d) if has_ce_arm => Some(Destination::check(&store, d)?),
            _ => None,
        };
        let method = effective_method(opts.method, false)?;
        if let Some(asked) = opts.environment {
            // Every member named must be stored before anything changes.
            if let Some(m) = asked
                .members
                .iter()
                .find(|m| store.catalogue().kind_of(&m.digest).is_none())
            {
                return Err(crate::error::Error::UnknownDigest {
                    prefix: m.digest.to_hex(),
                });
            }
        }
        let runtime = rules
            .map(|rules| stage_runtime(&mut store, &opts.gitnexus, &rules, opts.sign_with))
            .transpose()?;
        let mut plugin = None;
        if has_ce_arm {
            let of = match (&source, opts.release) {
                (Some((source, ingest)), _) => ViewOf::Source(source, ingest),
                (None, Release::Digest(d)) => ViewOf::Digest(d),
                (None, _) => return Err(Rejection::CeArmWithoutPluginInputs.into()),
            };
            let made = match view_for_run(&mut store, of, dest.as_ref(), method) {
                Ok(made) => made,
                Err(e) => {
                    if let Some(runtime) = &runtime {
                        unstage_runtime(&mut store, runtime)?;
                    }
                    return Err(e);
                }
            };
            report.provenance = Some(Provenance::from(&made.snapshot));
            report.view = Some(made.path.clone());
            report.view_kind = Some(made.kind);
            plugin = Some(made);
        }
        if let Some(asked) = opts.environment {
            let mut members = asked.members.to_vec();
            members.extend(plugin.as_ref().map(|made| Member {
                role: CE_ROLE.into(),
                digest: made.snapshot.digest,
            }));
            members.extend(runtime.as_ref().map(|r| Member {
                role: RUNTIME_ROLE.into(),
                digest: r.view.manifest_digest,
            }));
            match record_in(&mut store, &members, Some(asked.name), opts.sign_with) {
                Ok((recorded, _)) => report.environment = Some(recorded),
                Err(e) => {
                    if let Some(made) = &plugin {
                        take_back_run_view(&mut store, made)?;
                    }
                    if let Some(runtime) = &runtime {
                        unstage_runtime(&mut store, runtime)?;
                    }
                    return Err(e);
                }
            }
        }
        report.ingest = plugin
            .and_then(|made| made.ingested)
            .map(|done| done.ingest);
        if let Some(runtime) = runtime {
            report.gitnexus_runtime = runtime.report();
            runtime_mounts = runtime.mounts;
        }
    }
    let view = report.view.as_deref().map(Path::new);
    for arm in opts.arms {
        let mut mounts = ce_plugin_mounts_for_arm(arm, view)?;
        mounts.extend(runtime_mounts.iter().cloned());
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
    /// Sign the runtime snapshot ingested with this key.
    pub sign_with: Option<&'a crate::sign::PrivateKey>,
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
    /// The GitNexus runtime mounted, if any.
    #[serde(flatten)]
    pub gitnexus_runtime: RuntimeStaged,
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
/// GitNexus runtime's, from its snapshot's shared view (the checkout
/// ingested first, unless a stored runtime is named). A runtime that fails
/// to mount takes back what this call made.
pub fn mounts(open: Opener<'_>, opts: &MountsOptions<'_>) -> Result<MountsReport> {
    opts.arm_rule.check([opts.arm])?;
    let rules = opts.gitnexus.check()?;
    let (view, manifest_digest) = find_view(open, opts.view)?;
    let plugin_dir = ce_plugin_dir_for_arm(opts.arm, view.as_deref())?;
    let mut mounts = ce_plugin_mounts_for_arm(opts.arm, view.as_deref())?;
    let gitnexus_runtime = match rules {
        Some(rules) => {
            let mut store = open(if opts.gitnexus.ingests() {
                Need::Creating
            } else {
                Need::Existing
            })?;
            let runtime = stage_runtime(&mut store, &opts.gitnexus, &rules, opts.sign_with)?;
            mounts.extend(runtime.mounts.iter().cloned());
            runtime.report()
        }
        None => RuntimeStaged::default(),
    };
    Ok(MountsReport {
        arm: opts.arm.to_owned(),
        plugin_dir,
        manifest_digest,
        gitnexus_runtime,
        mounts,
    })
}
