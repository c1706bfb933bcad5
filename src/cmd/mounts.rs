//! `cestore mounts`: the read-only mounts one benchmark arm's sandbox gets.
//!
//! The arm rules are the reference's `ce_plugin_mounts_for_arm` and
//! `ce_plugin_dir_for_arm` (`runtime_mounts.py`):
//!
//! - the arms in [`CE_ARMS`] (an exact set: `ce_other` is not one of them) get
//!   one read-only mount of the staged plugin view at [`SANDBOX_CE_PLUGIN`],
//!   and that path as their plugin directory; without a view they are refused;
//! - every other arm gets no plugin mount and no plugin directory (a view
//!   given for it is still checked, then ignored).
//!
//! A view given with `--view` must be one cestore made: a view recorded by
//! `checkout` or `stage`, or a snapshot's shared view; its manifest digest is
//! reported, and checked against `--digest` when both are given. `--unchecked`
//! mounts any directory, with no digest.
//!
//! With a GitNexus harness root, the seven GitNexus runtime mounts
//! ([`crate::gitnexus::runtime_mounts`], by the seed's rules or upstream's
//! current ones, `--gitnexus-rules`) follow, for every arm: the harness's
//! `trusted_gitnexus_runtime_mounts` takes no arm, so the runtime is the
//! same for all of them.

use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::Report;
use crate::digest::ManifestDigest;
use crate::error::{Error, Result};
use crate::gitnexus::{self, GitNexusError, ReadOnlyMount};
use crate::source::absolute_like_python;
use crate::store::{LockMode, Store};

pub use crate::policy::{is_ce_arm, CE_ARMS};
/// Where the plugin is mounted, and Claude's plugin directory (`SANDBOX_CE_PLUGIN`).
pub const SANDBOX_CE_PLUGIN: &str = "/opt/compound-engineering-plugin";

/// How the mounts are printed (`--format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The mount report as one JSON object (what `--json` prints).
    Json,
    /// bubblewrap arguments: `--ro-bind SOURCE TARGET` per mount, on one
    /// line, each word quoted for a POSIX shell.
    Bwrap,
    /// bubblewrap arguments, each followed by a NUL byte, for `bwrap --args FD`.
    Bwrap0,
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

impl<'a> ViewSource<'a> {
    /// From `--view`, `--digest` and `--unchecked` (the parser keeps
    /// `--unchecked` from `--digest` and requires `--view` with it).
    pub fn from_args(
        view: Option<&'a Path>,
        digest: Option<&'a str>,
        unchecked: bool,
    ) -> ViewSource<'a> {
        match (view, digest) {
            (Some(p), _) if unchecked => ViewSource::Unchecked(p),
            (Some(path), expect) => ViewSource::Recorded { path, expect },
            (None, Some(d)) => ViewSource::Digest(d),
            (None, None) => ViewSource::None,
        }
    }
}

/// What to compute.
pub struct MountsOptions<'a> {
    /// The benchmark arm.
    pub arm: &'a str,
    /// The plugin view, if any.
    pub view: ViewSource<'a>,
    /// The harness root holding `gitnexus/` and `gitnexus-shared/`, if any.
    pub gitnexus_root: Option<&'a Path>,
    /// The harness revision whose rules check the GitNexus runtime.
    pub gitnexus_revision: gitnexus::Revision,
    /// The version the seed's rules pin, when not the seed's own.
    pub gitnexus_version: Option<&'a str>,
    /// `--format`, if given.
    pub format: Option<Format>,
    /// The global `--json`.
    pub json: bool,
}

/// How the report is written, from `--format` and `--json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Text for people.
    Text,
    /// The JSON report.
    Json,
    /// bubblewrap arguments, shell-quoted on one line.
    Bwrap,
    /// bubblewrap arguments, NUL-terminated.
    Bwrap0,
}

impl Output {
    /// `--format` wins; without it `--json` picks JSON and otherwise text.
    /// `--format bwrap --json` (or `bwrap0`) asks for two forms at once and is refused.
    pub fn choose(format: Option<Format>, json: bool) -> Result<Output> {
        match (format, json) {
            (Some(Format::Bwrap | Format::Bwrap0), true) => Err(Error::Usage(
                "--format bwrap and bwrap0 print bubblewrap arguments, not JSON; drop --json or use --format json".into(),
            )),
            (Some(Format::Bwrap), false) => Ok(Output::Bwrap),
            (Some(Format::Bwrap0), false) => Ok(Output::Bwrap0),
            (Some(Format::Json), _) | (None, true) => Ok(Output::Json),
            (None, false) => Ok(Output::Text),
        }
    }
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
    /// How the report is to be written.
    #[serde(skip)]
    pub output: Output,
}

impl MountsReport {
    /// Whether the report is to be written as JSON.
    pub fn is_json(&self) -> bool {
        self.output == Output::Json
    }

    /// The bubblewrap arguments: `--ro-bind SOURCE TARGET` per mount.
    pub fn bwrap_args(&self) -> Vec<&[u8]> {
        self.mounts
            .iter()
            .flat_map(|m| {
                [
                    &b"--ro-bind"[..],
                    m.source.as_os_str().as_bytes(),
                    m.target.as_bytes(),
                ]
            })
            .collect()
    }
}

impl Report for MountsReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        match self.output {
            Output::Bwrap => {
                let words: Vec<Vec<u8>> = self.bwrap_args().into_iter().map(shell_quote).collect();
                w.write_all(&words.join(&b' '))?;
                return writeln!(w);
            }
            Output::Bwrap0 => {
                for arg in self.bwrap_args() {
                    w.write_all(arg)?;
                    w.write_all(b"\0")?;
                }
                return Ok(());
            }
            Output::Text | Output::Json => {}
        }
        writeln!(w, "arm:        {}", self.arm)?;
        writeln!(w, "plugin_dir: {}", self.plugin_dir.unwrap_or("-"))?;
        match &self.manifest_digest {
            Some(d) => writeln!(w, "digest:     {d}")?,
            None => writeln!(w, "digest:     -")?,
        }
        writeln!(w, "mounts:     {}", self.mounts.len())?;
        for m in &self.mounts {
            writeln!(w, "  {} -> {} (read-only)", m.source.display(), m.target)?;
        }
        Ok(())
    }
}

/// The plugin mounts for an arm (`ce_plugin_mounts_for_arm`): the view for a
/// CE arm, none for any other; a CE arm without a view is refused.
pub fn ce_plugin_mounts_for_arm(
    arm: &str,
    view: Option<&Path>,
) -> Result<Vec<ReadOnlyMount>, GitNexusError> {
    if !is_ce_arm(arm) {
        return Ok(Vec::new());
    }
    let view = view.ok_or_else(|| GitNexusError::CeArmWithoutPlugin {
        arm: arm.to_owned(),
    })?;
    Ok(vec![ReadOnlyMount {
        source: view.to_path_buf(),
        target: SANDBOX_CE_PLUGIN.to_owned(),
    }])
}

/// Claude's plugin directory for an arm (`ce_plugin_dir_for_arm`).
pub fn ce_plugin_dir_for_arm(
    arm: &str,
    view: Option<&Path>,
) -> Result<Option<&'static str>, GitNexusError> {
    ce_plugin_mounts_for_arm(arm, view)?;
    Ok(is_ce_arm(arm).then_some(SANDBOX_CE_PLUGIN))
}

/// Computes an arm's mounts.
pub fn mounts(store_root: &Path, opts: &MountsOptions<'_>) -> Result<MountsReport> {
    let output = Output::choose(opts.format, opts.json)?;
    let (view, manifest_digest) = match opts.view {
        ViewSource::None => (None, None),
        ViewSource::Unchecked(p) => (Some(view_dir(p)?), None),
        ViewSource::Recorded { .. } | ViewSource::Digest(_) => {
            let shown = match opts.view {
                ViewSource::Recorded { path, .. } => Some(view_dir(path)?),
                _ => None,
            };
            let store = Store::open(store_root, LockMode::Shared, false)?;
            let (path, digest) = match (opts.view, shown) {
                (ViewSource::Recorded { expect, .. }, Some(shown)) => {
                    recorded_view(&store, &shown, expect)?
                }
                (ViewSource::Digest(d), _) => shared_view(&store, d)?,
                _ => unreachable!("only a recorded view or a digest opens the store"),
            };
            (Some(path), Some(digest))
        }
    };
    let plugin_dir = ce_plugin_dir_for_arm(opts.arm, view.as_deref())?;
    let mut mounts = ce_plugin_mounts_for_arm(opts.arm, view.as_deref())?;
    if let Some(root) = opts.gitnexus_root {
        let rules = gitnexus::Rules::new(opts.gitnexus_revision, opts.gitnexus_version)?;
        mounts.extend(gitnexus::runtime_mounts(root, &rules)?);
    }
    if output == Output::Json {
        if let Some(m) = mounts.iter().find(|m| m.source.to_str().is_none()) {
            return Err(Error::Usage(format!(
                "mount source '{}' is not UTF-8, which JSON cannot carry; use --format bwrap",
                m.source.display()
            )));
        }
    }
    Ok(MountsReport {
        arm: opts.arm.to_owned(),
        plugin_dir,
        manifest_digest,
        mounts,
        output,
    })
}

/// A view directory given by path: made absolute, and it must be a directory.
fn view_dir(path: &Path) -> Result<PathBuf> {
    let path = absolute_like_python(path);
    if !path.is_dir() {
        return Err(Error::Absent {
            message: format!("no view directory at '{}'", path.display()),
            path,
        });
    }
    Ok(path)
}

/// A view directory that cestore made: a recorded view whose root is still
/// the directory recorded, or a snapshot's shared view. Returns its path as
/// recorded and its snapshot, which must be `expect` when that is given.
fn recorded_view(
    store: &Store,
    shown: &Path,
    expect: Option<&str>,
) -> Result<(PathBuf, ManifestDigest)> {
    let (parent, name) = crate::view::split_dest(shown)?;
    let dest = parent.join(&name);
    let row = store.catalogue().view(&dest.to_string_lossy())?;
    let digest = match row {
        Some(row) => {
            if row.root_id.is_some() && crate::view::root_id(&dest) != row.root_id {
                return Err(Error::Conflict(format!(
                    "'{}' was recorded as a view of {}, but its root directory has been replaced since; \
                     check it with `cestore verify --tree {} {}`, or make a new view",
                    dest.display(),
                    row.digest,
                    dest.display(),
                    row.digest
                )));
            }
            row.digest
        }
        None => {
            // A shared view that was published but not yet recorded.
            let views = std::fs::canonicalize(store.views_dir()).ok();
            let shared = name
                .to_str()
                .and_then(|n| n.parse::<ManifestDigest>().ok())
                .filter(|_| views.as_deref() == Some(parent.as_path()));
            match shared {
                Some(d) if store.catalogue().has_snapshot(&d)? => d,
                _ => {
                    return Err(Error::Absent {
                        message: format!(
                            "'{}' is not a view cestore recorded; make one with `cestore checkout` \
                             or `cestore path`, or pass --unchecked to mount a tree cestore did not make",
                            dest.display()
                        ),
                        path: dest,
                    })
                }
            }
        }
    };
    if let Some(expect) = expect {
        let expected = super::resolve(store.catalogue(), expect)?;
        if expected != digest {
            return Err(Error::Integrity(format!(
                "'{}' is a view of {digest}, not of {expected} as --digest expects",
                dest.display()
            )));
        }
    }
    Ok((dest, digest))
}

/// A snapshot's shared view in the store (`STORE/views/<digest>`), which
/// `cestore path` makes; it must already exist.
fn shared_view(store: &Store, digest: &str) -> Result<(PathBuf, ManifestDigest)> {
    let digest = super::resolve(store.catalogue(), digest)?;
    let path = store.shared_view_dir(&digest);
    if !path.is_dir() {
        return Err(Error::Absent {
            message: format!(
                "{digest} has no shared view at '{}' yet; make it with `cestore path {digest}`",
                path.display()
            ),
            path,
        });
    }
    Ok((path, digest))
}

/// One word quoted for a POSIX shell: left bare when it holds only
/// characters no shell treats specially, else in single quotes.
fn shell_quote(word: &[u8]) -> Vec<u8> {
    let bare = |b: &u8| b.is_ascii_alphanumeric() || b"@%+=:,./_-".contains(b);
    if !word.is_empty() && word.iter().all(bare) {
        return word.to_vec();
    }
    let mut out = vec![b'\''];
    for &b in word {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_rules_follow_the_exact_set() {
        let view = Path::new("/v");
        for arm in CE_ARMS {
            assert_eq!(
                ce_plugin_dir_for_arm(arm, Some(view)).ok(),
                Some(Some(SANDBOX_CE_PLUGIN))
            );
            assert!(ce_plugin_mounts_for_arm(arm, None).is_err());
        }
        for arm in ["baseline", "gitnexus", "ce_other", "CE_REVIEW", ""] {
            assert_eq!(ce_plugin_dir_for_arm(arm, None).ok(), Some(None));
            assert!(ce_plugin_mounts_for_arm(arm, Some(view)).is_ok_and(|m| m.is_empty()));
        }
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote(b"/opt/x-1.2_3"), b"/opt/x-1.2_3");
        assert_eq!(shell_quote(b""), b"''");
        assert_eq!(shell_quote(b"a b"), b"'a b'");
        assert_eq!(shell_quote(b"it's"), b"'it'\\''s'");
    }

    #[test]
    fn format_and_json() {
        assert_eq!(Output::choose(None, false).ok(), Some(Output::Text));
        assert_eq!(Output::choose(None, true).ok(), Some(Output::Json));
        assert_eq!(
            Output::choose(Some(Format::Json), false).ok(),
            Some(Output::Json)
        );
        assert_eq!(
            Output::choose(Some(Format::Json), true).ok(),
            Some(Output::Json)
        );
        assert_eq!(
            Output::choose(Some(Format::Bwrap), false).ok(),
            Some(Output::Bwrap)
        );
        assert!(Output::choose(Some(Format::Bwrap), true).is_err());
        assert_eq!(
            Output::choose(Some(Format::Bwrap0), false).ok(),
            Some(Output::Bwrap0)
        );
        assert!(Output::choose(Some(Format::Bwrap0), true).is_err());
    }
}
