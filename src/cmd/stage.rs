//! `cestore stage`: the one call a harness makes per run.
//!
//! It replaces the reference's `validate_ce_plugin_inputs`,
//! `staged_ce_plugin_snapshot` and `ce_plugin_mounts_for_arm`: it applies the
//! reference's preflight to the arms, ingests the release (instant when it is
//! already stored) or takes a digest already in the store, materialises a
//! view, and answers with the provenance, the view and every arm's mounts.

use std::io::{self, Write};
use std::os::fd::BorrowedFd;
use std::path::Path;

use super::mounts::{ce_plugin_dir_for_arm, ce_plugin_mounts_for_arm, is_ce_arm};
use super::{Provenance, Report};
use crate::error::Result;
use crate::gitnexus::{self, ReadOnlyMount};
use crate::interrupt::{Interrupts, Signal, Waited};
use crate::policy::Rejection;
use crate::store::ingest::{open_source, IngestOptions, IngestStats};
use crate::store::views::{
    effective_method, view_for_run, Destination, DiscardOptions, DiscardReport, ViewOf,
};
use crate::store::{LockMode, Store};
use crate::view::Method;

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
    /// The harness root holding the pinned GitNexus runtime, if any.
    pub gitnexus_root: Option<&'a Path>,
    /// The harness revision whose rules check the GitNexus runtime.
    pub gitnexus_revision: gitnexus::Revision,
    /// The version the seed's rules pin, when not the seed's own.
    pub gitnexus_version: Option<&'a str>,
    /// Refuse an arm that is neither a CE arm nor in `known_arms`.
    pub strict_arms: bool,
    /// The non-CE arms `strict_arms` accepts.
    pub known_arms: &'a [String],
    /// The bounds the release's walk enforces.
    pub bounds: crate::policy::Bounds,
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
///
/// Every input is checked before anything changes: the arms, the release
/// inputs, the GitNexus runtime and the destination. What fails after a
/// change takes that change back: a failed view takes back the ingest that
/// preceded it, so a failed stage leaves no view, record or event.
pub fn stage(store_root: &Path, opts: &StageOptions<'_>) -> Result<StageReport> {
    let has_ce_arm = opts.arms.iter().any(|a| is_ce_arm(a));
    let supplied = !matches!(opts.release, Release::None);
    if !has_ce_arm && supplied {
        return Err(Rejection::PluginInputsWithoutCeArm.into());
    }
    if opts.strict_arms {
        if let Some(arm) = opts
            .arms
            .iter()
            .find(|a| !is_ce_arm(a) && !opts.known_arms.contains(a))
        {
            return Err(Rejection::UnknownArm { arm: arm.clone() }.into());
        }
    }
    let gitnexus = match opts.gitnexus_root {
        Some(root) => {
            let rules = gitnexus::Rules::new(opts.gitnexus_revision, opts.gitnexus_version)?;
            gitnexus::runtime_mounts(root, &rules)?
        }
        None => Vec::new(),
    };
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
                    version,
                    bounds: opts.bounds,
                };
                Some((open_source(&ingest)?, ingest))
            }
            Release::Digest(_) => None,
            Release::None | Release::Source { .. } => {
                return Err(Rejection::CeArmWithoutPluginInputs.into())
            }
        };
        let mut store = Store::open(store_root, LockMode::Shared, source.is_some())?;
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

/// How a held stage (`--hold`) ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Its caller released it: with `discard --spare` (`spare`), with
    /// `discard` or any other line, or by the end of its input (it died).
    Released {
        /// Keep the view as a spare.
        spare: bool,
    },
    /// A termination signal came first.
    Signalled(Signal),
}

/// Catches the termination signals for a held stage, from before it makes
/// its view: one that comes while the view is made is acted on once it is
/// made, so that no signal leaves a view behind.
pub fn catch_signals() -> Result<Interrupts> {
    Interrupts::catch()
        .map_err(|e| crate::Error::io("catch the termination signals", "<signals>", e))
}

/// Waits for what ends a held stage: the line that releases it, the end of
/// its input, or a termination signal, whichever comes first. Only
/// `discard --spare` keeps the view as a spare; any other line, a read
/// error or the end of input (the caller died) remove it, as a signal does.
/// At most a short line is read.
pub fn wait_for_release(input: BorrowedFd<'_>, interrupts: &mut Interrupts) -> Ending {
    match interrupts.read_line(input, 64) {
        Waited::Line(line) => Ending::Released {
            spare: line.trim() == "discard --spare",
        },
        Waited::Signal(signal) => Ending::Signalled(signal),
    }
}

/// The report of a held stage's end: the discard's, and the signal that
/// ended it, if one did.
#[derive(Debug, serde::Serialize)]
pub struct ReleaseReport {
    /// What the discard did.
    #[serde(flatten)]
    pub discard: DiscardReport,
    /// The termination signal that ended the stage, or one that came while
    /// its release was under way; `None` without one.
    pub signal: Option<Signal>,
}

impl Report for ReleaseReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        self.discard.human(w)?;
        if let Some(signal) = self.signal {
            writeln!(w, "stopped by {}", signal.name())?;
        }
        Ok(())
    }

    fn exit_code(&self) -> u8 {
        self.signal.map_or(0, Signal::exit_code)
    }
}

/// Ends a held stage: discards its view, keeping it as a spare only when
/// its caller asked for that. A signal that comes meanwhile does not stop
/// the discard; it is reported, with its exit code, once the view is gone.
pub fn release(
    store_root: &Path,
    view: &Path,
    ending: Ending,
    interrupts: &mut Interrupts,
) -> Result<ReleaseReport> {
    let spare = matches!(ending, Ending::Released { spare: true });
    let discard = super::discard::discard(
        store_root,
        &DiscardOptions {
            dest: view,
            force_digest: None,
            spare,
        },
    )?;
    let signal = match ending {
        Ending::Signalled(signal) => Some(signal),
        Ending::Released { .. } => interrupts.caught(),
    };
    Ok(ReleaseReport { discard, signal })
}
