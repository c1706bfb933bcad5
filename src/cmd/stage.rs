//! `cestore stage`: the one call a harness makes per run.
//!
//! It replaces the reference's `validate_ce_plugin_inputs`,
//! `staged_ce_plugin_snapshot` and `ce_plugin_mounts_for_arm`: it applies the
//! reference's preflight to the arms, ingests the release (instant when it is
//! already stored) or takes a digest already in the store, materialises a
//! view, and answers with the provenance, the view and every arm's mounts.

use std::io::{self, Write};
use std::path::Path;

use super::checkout::{checkout, CheckoutOptions};
use super::ingest::{ingest, IngestOptions, IngestStats};
use super::mounts::{ce_plugin_dir_for_arm, ce_plugin_mounts_for_arm, is_ce_arm};
use super::{resolve, Provenance, Report};
use crate::error::Result;
use crate::gitnexus::{self, ReadOnlyMount};
use crate::policy::Rejection;
use crate::store::{LockMode, Store};
use crate::view::Method;

/// Which release a CE arm sees.
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
    /// The harness root holding the pinned GitNexus runtime, if any.
    pub gitnexus_root: Option<&'a Path>,
    /// The version the GitNexus runtime must carry.
    pub gitnexus_version: &'a str,
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
    pub view_kind: Option<&'static str>,
    /// What the ingest did, when a source directory was given.
    pub ingest: Option<IngestStats>,
    /// Every arm's mounts, in the order given.
    pub arms: Vec<ArmMounts>,
}

impl Report for StageReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        match (&self.provenance, &self.view) {
            (Some(p), Some(v)) => {
                writeln!(w, "{} {} {}", p.manifest_digest, p.name, p.version)?;
                writeln!(w, "view: {v}")?;
            }
            _ => writeln!(w, "no ce_* arm: nothing staged")?,
        }
        for a in &self.arms {
            writeln!(
                w,
                "{}: {}",
                a.arm,
                super::counted(a.mounts.len(), "mount", "mounts")
            )?;
            for m in &a.mounts {
                writeln!(w, "  {} -> {} (read-only)", m.source.display(), m.target)?;
            }
        }
        Ok(())
    }
}

/// Applies the reference's preflight, stages the release and computes every arm's mounts.
pub fn stage(store_root: &Path, opts: &StageOptions<'_>) -> Result<StageReport> {
    let has_ce_arm = opts.arms.iter().any(|a| is_ce_arm(a));
    let supplied = !matches!(opts.release, Release::None);
    if !has_ce_arm && supplied {
        return Err(Rejection::PluginInputsWithoutCeArm.into());
    }
    let mut report = StageReport {
        provenance: None,
        view: None,
        view_kind: None,
        ingest: None,
        arms: Vec::new(),
    };
    if has_ce_arm {
        let digest = match opts.release {
            Release::Source {
                dir: Some(dir),
                version: Some(version),
            } => {
                let done = ingest(
                    store_root,
                    &IngestOptions {
                        source: dir,
                        version,
                    },
                )?;
                report.ingest = Some(done.ingest);
                done.provenance.manifest_digest.to_hex()
            }
            Release::Digest(d) => d.to_string(),
            Release::None | Release::Source { .. } => {
                return Err(Rejection::CeArmWithoutPluginInputs.into())
            }
        };
        let (digest, view, kind) = match opts.dest {
            Some(dest) => {
                let done = checkout(
                    store_root,
                    &CheckoutOptions {
                        digest: &digest,
                        dest,
                        method: opts.method,
                        require_hardlinks: false,
                    },
                )?;
                (done.manifest_digest, done.view, "checkout")
            }
            None => {
                let done = super::path::path(store_root, &digest)?;
                (
                    done.manifest_digest,
                    done.path.to_string_lossy().into_owned(),
                    "shared",
                )
            }
        };
        let store = Store::open(store_root, LockMode::Shared, false)?;
        let row = store
            .catalogue()
            .snapshot(&resolve(store.catalogue(), &digest.to_hex())?)?;
        report.provenance = Some(Provenance::from(&row));
        report.view = Some(view);
        report.view_kind = Some(kind);
    }
    let gitnexus = match opts.gitnexus_root {
        Some(root) => gitnexus::trusted_runtime_mounts(root, opts.gitnexus_version)?,
        None => Vec::new(),
    };
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
