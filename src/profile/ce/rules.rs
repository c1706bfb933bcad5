//! The reference implementation's rules for a plugin release, as pure functions.
//!
//! Everything here decides; nothing here touches the filesystem. The walk in
//! [`crate::source`] asks them, through the CE profile ([`super::Ce`]), in the same order as the reference
//! (`runtime_mounts.py`) does, so that cestore accepts and rejects exactly the
//! trees the reference does, and reports the first broken rule the reference
//! would report.

use std::io;
use std::path::PathBuf;

pub use crate::profile::{Bounds, LeftOut};

/// The plugin name a release's `plugin.json` must carry.
pub const PLUGIN_NAME: &str = "compound-engineering";
/// The most files one release may hold.
pub const MAX_FILES: usize = 2_048;
/// The most bytes one file may hold.
pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// The most bytes all files together may hold.
pub const MAX_TOTAL_BYTES: u64 = 16 * 1024 * 1024;
/// The most bytes a file's relative path may hold, in UTF-8.
pub const MAX_PATH_BYTES: usize = 1_024;
/// The top-level directories walked, in this order; only `skills` is required.
pub const PLUGIN_DIRS: [&str; 3] = ["skills", "scripts", "assets"];
/// The manifest directory.
pub const MANIFEST_DIR: &str = ".claude-plugin";
/// The manifests taken from [`MANIFEST_DIR`], in this order; the first is required.
pub const MANIFESTS: [&str; 2] = ["plugin.json", "marketplace.json"];
/// The skills every release must hold, checked in this order.
pub const REQUIRED_SKILLS: [&str; 3] = ["ce-plan", "ce-work", "ce-code-review"];

const FORBIDDEN_PARTS: [&str; 10] = [
    ".git",
    ".github",
    ".ssh",
    ".aws",
    "test",
    "tests",
    "doc",
    "docs",
    "node_modules",
    "__pycache__",
];
const SECRET_EXACT_NAMES: [&str; 8] = [
    ".env",
    ".npmrc",
    ".netrc",
    ".pypirc",
    "credentials",
    "credentials.json",
    "secrets",
    "secrets.json",
];
const SECRET_NAME_MARKERS: [&str; 5] = [
    "secret",
    "credential",
    "private-key",
    "private_key",
    "token",
];
const SECRET_SUFFIXES: [&str; 5] = [".pem", ".key", ".p12", ".pfx", ".kdbx"];

/// Why the reference silently drops an entry with this name, if it does.
///
/// The reference tests every part of the relative path; a walk that never
/// descends into a dropped directory only needs to test each new name. The
/// name is lowercased with full Unicode case mapping, as Python's `str.lower`.
pub fn left_out_reason(name: &str) -> Option<LeftOut> {
    let lowered = name.to_lowercase();
    let lowered = lowered.as_str();
    if FORBIDDEN_PARTS.contains(&lowered) {
        return Some(LeftOut::ForbiddenPart);
    }
    let secret = SECRET_EXACT_NAMES.contains(&lowered)
        || lowered.starts_with(".env.")
        || lowered.starts_with(".npmrc.")
        || SECRET_SUFFIXES.iter().any(|s| lowered.ends_with(s))
        || SECRET_NAME_MARKERS.iter().any(|m| lowered.contains(m));
    secret.then_some(LeftOut::Secret)
}

/// Whether the reference silently drops an entry with this name.
pub fn is_forbidden_name(name: &str) -> bool {
    left_out_reason(name).is_some()
}

/// The arms that see the Compound Engineering plugin (`CE_ARMS`).
pub const CE_ARMS: [&str; 3] = ["ce_workflow", "ce_workflow_direct", "ce_review"];

/// Whether the reference exposes the plugin to this arm (exact match, as
/// `arm in CE_ARMS`): only these arms carry a plugin release.
pub fn is_ce_arm(arm: &str) -> bool {
    CE_ARMS.contains(&arm)
}

/// The CE arms as a message lists them: `ce_workflow, ce_workflow_direct, ce_review`.
pub fn ce_arms_listed() -> String {
    CE_ARMS.join(", ")
}

/// Which arms a run may name: with `strict`, every arm must be a CE arm or
/// one of `known`, so that a typo such as `ce_reviw` is refused instead of
/// silently getting no plugin (the reference's own rule accepts any arm).
/// Without `strict`, every arm passes, as in the reference, and
/// [`ArmRule::doubtful`] says which of them look mistaken.
#[derive(Clone, Copy, Debug, Default)]
pub struct ArmRule<'a> {
    /// Refuse an arm that is neither a CE arm nor known.
    pub strict: bool,
    /// The non-CE arms the run expects: `strict` accepts them, and, once
    /// any is given, every other arm is doubtful.
    pub known: &'a [String],
}

/// An arm a run names that looks mistaken, and the known arm it may stand for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoubtfulArm {
    /// The arm as given.
    pub arm: String,
    /// The known arm closest to it, when one is close.
    pub closest: Option<String>,
}

/// How many single-character edits apart an arm may be from a known one
/// and still be taken for a slip of it.
const ARM_SLIP: usize = 3;

impl ArmRule<'_> {
    /// Refuses the first arm the rule does not accept.
    pub fn check<'s>(&self, arms: impl IntoIterator<Item = &'s str>) -> Result<(), Rejection> {
        if !self.strict {
            return Ok(());
        }
        match arms.into_iter().find(|a| !self.is_known(a)) {
            Some(arm) => Err(Rejection::UnknownArm {
                arm: arm.into(),
                closest: self.closest(arm),
            }),
            None => Ok(()),
        }
    }

    /// Whether the arm is a CE arm or one of `known`.
    pub fn is_known(&self, arm: &str) -> bool {
        is_ce_arm(arm) || self.known.iter().any(|k| k == arm)
    }

    /// Every arm the rule knows: the CE arms, then `known`.
    pub fn known_arms(&self) -> Vec<&str> {
        CE_ARMS
            .iter()
            .copied()
            .chain(self.known.iter().map(String::as_str))
            .collect()
    }

    /// The arms of a run that look mistaken, in the order given, each once.
    /// Such an arm gets no plugin, as the reference gives it none; an arm
    /// is doubtful when it is not known and, with no `known` arms given,
    /// looks like a slip: close to a CE arm, spelt `ce_…` (or `CE…`), or
    /// not a name at all (empty, or holding anything but ASCII letters,
    /// digits, `_`, `-` and `.`). Once the run names its other arms with
    /// `known`, every arm outside them is doubtful.
    pub fn doubtful<'s>(&self, arms: impl IntoIterator<Item = &'s str>) -> Vec<DoubtfulArm> {
        let mut doubts: Vec<DoubtfulArm> = Vec::new();
        for arm in arms {
            if self.is_known(arm) || doubts.iter().any(|d| d.arm == arm) {
                continue;
            }
            let lowered = arm.to_ascii_lowercase();
            let slip = !self.known.is_empty()
                || arm.is_empty()
                || !arm
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
                || lowered.starts_with("ce_")
                || lowered.starts_with("ce-")
                || lowered.starts_with("ce.")
                || CE_ARMS
                    .iter()
                    .any(|ce| edit_distance(&lowered, ce) <= ARM_SLIP);
            if slip {
                doubts.push(DoubtfulArm {
                    arm: arm.to_string(),
                    closest: self.closest(arm),
                });
            }
        }
        doubts
    }

    /// The known arm closest to `arm` (letter case aside), when it is at
    /// most three edits away; the first of equals.
    pub fn closest(&self, arm: &str) -> Option<String> {
        let lowered = arm.to_lowercase();
        self.known_arms()
            .into_iter()
            .map(|k| (edit_distance(&lowered, &k.to_lowercase()), k))
            .filter(|(d, _)| *d <= ARM_SLIP)
            .min_by_key(|(d, _)| *d)
            .map(|(_, k)| k.to_string())
    }
}

/// The Levenshtein distance between two strings, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb {
                diagonal
            } else {
                1 + diagonal.min(above).min(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Whether `version` is an exact semantic version: `MAJOR.MINOR.PATCH`, with
/// an optional `-prerelease` and `+build`, as the reference's pattern says.
///
/// The numbers have no leading zeros; pre-release and build identifiers are
/// non-empty runs of ASCII letters, digits and `-`, separated by dots.
pub fn is_exact_version(version: &str) -> bool {
    let (head, build) = match version.split_once('+') {
        Some((head, build)) => (head, Some(build)),
        None => (version, None),
    };
    let (core, pre) = match head.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (head, None),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    numbers.len() == 3
        && numbers.iter().all(|n| is_numeric_identifier(n))
        && pre.is_none_or(is_dotted_identifiers)
        && build.is_none_or(is_dotted_identifiers)
}

fn is_numeric_identifier(n: &str) -> bool {
    match n.as_bytes() {
        [b'0'] => true,
        [first, rest @ ..] => (b'1'..=b'9').contains(first) && rest.iter().all(u8::is_ascii_digit),
        [] => false,
    }
}

fn is_dotted_identifiers(s: &str) -> bool {
    s.split('.')
        .all(|id| !id.is_empty() && id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'))
}

/// A reason the reference would refuse a plugin release; one variant per rule.
///
/// Each message reads as the reference's does and names the path involved.
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    /// The version asked for (`--version`, `--plugin-version`) is not an exact semantic version.
    #[error("the version '{version}' is not an exact semantic version: give MAJOR.MINOR.PATCH, with an optional -PRERELEASE and +BUILD (aliases and ranges are forbidden)")]
    VersionNotExact {
        /// The version as given.
        version: String,
    },
    /// The source directory cannot be examined.
    #[error("Compound Engineering plugin source is unavailable: {path}: {source}", path = .path.display())]
    SourceUnavailable {
        /// The source as given, made absolute.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The source is a symlink, not a directory, or reached through a symlink.
    #[error("Compound Engineering plugin source must be a real directory: {}", .path.display())]
    SourceNotRealDirectory {
        /// The source as given, made absolute.
        path: PathBuf,
    },
    /// `.claude-plugin` cannot be examined.
    #[error("Compound Engineering plugin manifest directory is unavailable: {path}: {source}", path = .path.display())]
    ManifestDirUnavailable {
        /// The manifest directory.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// `.claude-plugin` is a symlink or not a directory.
    #[error("Compound Engineering plugin manifest directory must be real: {}", .path.display())]
    ManifestDirNotReal {
        /// The manifest directory.
        path: PathBuf,
    },
    /// `.claude-plugin/plugin.json` does not exist.
    #[error("Compound Engineering plugin manifest is missing: {}", .path.display())]
    ManifestMissing {
        /// Where the manifest should be.
        path: PathBuf,
    },
    /// `skills/` does not exist.
    #[error("Compound Engineering plugin skills directory is missing: {}", .path.display())]
    SkillsMissing {
        /// Where the skills directory should be.
        path: PathBuf,
    },
    /// An entry's existence could not be checked.
    #[error("Compound Engineering plugin entry is unavailable: {path}: {source}", path = .path.display())]
    ExistenceUnknown {
        /// The entry.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// `skills/`, `scripts/` or `assets/` cannot be examined.
    #[error("Compound Engineering plugin component is unreadable: {path}: {source}", path = .path.display())]
    ComponentUnreadable {
        /// The component directory.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// `skills/`, `scripts/` or `assets/` is a symlink or not a directory.
    #[error("Compound Engineering plugin component must be a real directory: {}", .path.display())]
    ComponentNotRealDirectory {
        /// The component directory.
        path: PathBuf,
    },
    /// A directory in the tree cannot be listed.
    #[error("Compound Engineering plugin directory is unreadable: {path}: {source}", path = .path.display())]
    DirectoryUnreadable {
        /// The directory.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// An entry in the tree cannot be examined.
    #[error("Compound Engineering plugin entry is unreadable: {path}: {source}", path = .path.display())]
    EntryUnreadable {
        /// The entry.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// An entry in the tree is a symlink.
    #[error("Compound Engineering plugin entries must not be symlinks: {}", .path.display())]
    Symlink {
        /// The symlink.
        path: PathBuf,
    },
    /// An entry in the tree is neither a directory nor a regular file.
    #[error("Compound Engineering plugin entries must be regular files: {}", .path.display())]
    NotRegularEntry {
        /// The entry.
        path: PathBuf,
    },
    /// A relative path is not valid UTF-8.
    #[error("Compound Engineering plugin path is not valid UTF-8: {}", .path.display())]
    PathNotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// A relative path is longer than the path bound ([`MAX_PATH_BYTES`]).
    #[error("Compound Engineering plugin path exceeds the byte limit ({limit} bytes, this one has {bytes}): {}", .path.display())]
    PathTooLong {
        /// The file.
        path: PathBuf,
        /// Its relative path's length in bytes.
        bytes: usize,
        /// The bound.
        limit: usize,
    },
    /// The tree holds more files than the file bound ([`MAX_FILES`]).
    #[error("Compound Engineering plugin exceeds the file-count limit ({limit} files) at: {}", .path.display())]
    TooManyFiles {
        /// The first file past the limit.
        path: PathBuf,
        /// The bound.
        limit: usize,
    },
    /// A file cannot be examined or opened.
    #[error("Compound Engineering plugin file is unreadable: {path}: {source}", path = .path.display())]
    FileUnreadable {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// A manifest file is a symlink or not a regular file.
    #[error("Compound Engineering plugin file must be regular and non-symlink: {}", .path.display())]
    FileNotRegular {
        /// The file.
        path: PathBuf,
    },
    /// A file is larger than the per-file bound ([`MAX_FILE_BYTES`]).
    #[error("Compound Engineering plugin file exceeds the per-file limit ({limit} bytes): {}", .path.display())]
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// The bound.
        limit: u64,
    },
    /// The file opened is not the file examined.
    #[error("Compound Engineering plugin file changed during validation: {}", .path.display())]
    ChangedDuringValidation {
        /// The file.
        path: PathBuf,
    },
    /// The file changed while it was read.
    #[error("Compound Engineering plugin file changed while being copied: {}", .path.display())]
    ChangedWhileCopying {
        /// The file.
        path: PathBuf,
    },
    /// The files together are larger than the total bound ([`MAX_TOTAL_BYTES`]).
    #[error("Compound Engineering plugin exceeds the total byte limit ({limit} bytes) at: {}", .path.display())]
    TooManyBytes {
        /// The first file past the limit.
        path: PathBuf,
        /// The bound.
        limit: u64,
    },
    /// `plugin.json` is not valid JSON (as Python's `json.loads` reads it).
    #[error("Compound Engineering plugin manifest is invalid: {path}: {reason}", path = .path.display())]
    ManifestInvalid {
        /// The manifest.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// `plugin.json` is not an object named `compound-engineering`.
    #[error("CE comparator requires the compound-engineering plugin manifest: {}", .path.display())]
    NotCompoundEngineering {
        /// The manifest.
        path: PathBuf,
    },
    /// `plugin.json`'s version is not the one asked for.
    #[error("Compound Engineering plugin version mismatch: expected {expected}, got {got}: {path}", path = .path.display())]
    VersionMismatch {
        /// The manifest.
        path: PathBuf,
        /// The version asked for.
        expected: String,
        /// The manifest's version, as Python's `repr` shows it.
        got: String,
    },
    /// A required skill's `SKILL.md` is not among the files.
    #[error("Compound Engineering plugin is missing required skill: {skill}: {}", .path.display())]
    MissingSkill {
        /// The skill's name.
        skill: &'static str,
        /// Where its `SKILL.md` should be.
        path: PathBuf,
    },
    /// Plugin inputs were given but no arm sees the plugin.
    #[error(
        "a plugin directory, version or digest requires at least one ce_* arm ({})",
        ce_arms_listed()
    )]
    PluginInputsWithoutCeArm,
    /// With `--strict-arms`, an arm that is neither a CE arm nor a known one.
    #[error("unknown arm '{arm}': it is neither a ce_* arm ({}) nor one of the known arms{}", ce_arms_listed(), did_you_mean(.closest))]
    UnknownArm {
        /// The arm as given.
        arm: String,
        /// The known arm closest to it, when one is close.
        closest: Option<String>,
    },
    /// With `--refuse-secrets`, a file the reference keeps (its name is
    /// no secret's) whose content looks like a private key or a token.
    #[error("Compound Engineering plugin file looks like {} by its content (line {line}), and a release holding one was to be refused: {}", .kind.describe(), .path.display())]
    SecretContent {
        /// The file.
        path: PathBuf,
        /// What its content looks like.
        kind: crate::secrets::SecretKind,
        /// The line it starts on.
        line: u64,
    },
    /// A CE arm was selected without saying which release it sees.
    #[error("ce_* arms require both a plugin directory and its version, or the digest of a snapshot already in the store")]
    CeArmWithoutPluginInputs,
    /// The tree nests deeper than the reference can walk.
    #[error("Compound Engineering plugin nests too deep ({depth} directories): {}", .path.display())]
    TooDeep {
        /// The directory past the limit.
        path: PathBuf,
        /// Its depth.
        depth: usize,
    },
    /// Ingesting from git: a checkout would not hold a file's blob as it is
    /// stored, because the repository's attributes or configuration convert
    /// it (`eol=crlf`, `text` with `core.autocrlf`, `ident`, `filter=`,
    /// `working-tree-encoding`).
    #[error("a checkout would not hold this file's git blob unchanged ({attribute}); only files a checkout copies byte for byte are ingested from git: {}", .path.display())]
    CheckoutConverts {
        /// The file, where a checkout at the repository's path would put it.
        path: PathBuf,
        /// The attributes or settings that convert it, as `.gitattributes` spells them.
        attribute: String,
    },
    /// Ingesting from git: a symlink the reference follows points outside
    /// the repository, so what a checkout holds there depends on the host.
    #[error("Compound Engineering plugin symlink points outside the git repository ('{target}'), so the release cannot be judged from the repository alone: {}", .path.display())]
    SymlinkLeavesRepository {
        /// The symlink, where a checkout at the repository's path would put it.
        path: PathBuf,
        /// Its target, as stored.
        target: String,
    },
}

/// `; did you mean 'ARM'?` for the known arm closest to a mistaken one, if any.
pub fn did_you_mean(closest: &Option<String>) -> String {
    closest
        .as_deref()
        .map(|c| format!("; did you mean '{c}'?"))
        .unwrap_or_default()
}

impl Rejection {
    /// The rejection for a `plugin.json` (at `path`) that fails the check.
    pub fn from_manifest_problem(
        problem: super::plugin_manifest::ManifestProblem,
        path: PathBuf,
    ) -> Rejection {
        use super::plugin_manifest::ManifestProblem;
        match problem {
            ManifestProblem::Invalid(err) => Rejection::ManifestInvalid {
                path,
                reason: err.to_string(),
            },
            ManifestProblem::NotCompoundEngineering => Rejection::NotCompoundEngineering { path },
            ManifestProblem::VersionMismatch { expected, got } => Rejection::VersionMismatch {
                path,
                expected,
                got,
            },
        }
    }

    /// A stable identifier of the rule broken, for JSON output and scripts.
    pub fn rule(&self) -> &'static str {
        use Rejection::*;
        match self {
            VersionNotExact { .. } => "version-not-exact",
            SourceUnavailable { .. } => "source-unavailable",
            SourceNotRealDirectory { .. } => "source-not-real-directory",
            ManifestDirUnavailable { .. } => "manifest-dir-unavailable",
            ManifestDirNotReal { .. } => "manifest-dir-not-real",
            ManifestMissing { .. } => "manifest-missing",
            SkillsMissing { .. } => "skills-missing",
            ExistenceUnknown { .. } => "entry-unavailable",
            ComponentUnreadable { .. } => "component-unreadable",
            ComponentNotRealDirectory { .. } => "component-not-real-directory",
            DirectoryUnreadable { .. } => "directory-unreadable",
            EntryUnreadable { .. } => "entry-unreadable",
            Symlink { .. } => "symlink",
            NotRegularEntry { .. } => "not-regular-file",
            PathNotUtf8 { .. } => "path-not-utf8",
            PathTooLong { .. } => "path-too-long",
            TooManyFiles { .. } => "too-many-files",
            FileUnreadable { .. } => "file-unreadable",
            FileNotRegular { .. } => "file-not-regular",
            FileTooLarge { .. } => "file-too-large",
            ChangedDuringValidation { .. } => "changed-during-validation",
            ChangedWhileCopying { .. } => "changed-while-copying",
            TooManyBytes { .. } => "too-many-bytes",
            ManifestInvalid { .. } => "manifest-invalid",
            NotCompoundEngineering { .. } => "not-compound-engineering",
            VersionMismatch { .. } => "version-mismatch",
            MissingSkill { .. } => "missing-skill",
            TooDeep { .. } => "too-deep",
            CheckoutConverts { .. } => "checkout-converts",
            SymlinkLeavesRepository { .. } => "symlink-leaves-repository",
            PluginInputsWithoutCeArm => "plugin-inputs-without-ce-arm",
            CeArmWithoutPluginInputs => "ce-arm-without-plugin-inputs",
            UnknownArm { .. } => "unknown-arm",
            SecretContent { .. } => "secret-content",
        }
    }

    /// The path the rule was broken at, where there is one.
    pub fn path(&self) -> Option<&std::path::Path> {
        use Rejection::*;
        match self {
            VersionNotExact { .. }
            | PluginInputsWithoutCeArm
            | CeArmWithoutPluginInputs
            | UnknownArm { .. } => None,
            SourceUnavailable { path, .. }
            | SourceNotRealDirectory { path }
            | ManifestDirUnavailable { path, .. }
            | ManifestDirNotReal { path }
            | ManifestMissing { path }
            | SkillsMissing { path }
            | ExistenceUnknown { path, .. }
            | ComponentUnreadable { path, .. }
            | ComponentNotRealDirectory { path }
            | DirectoryUnreadable { path, .. }
            | EntryUnreadable { path, .. }
            | Symlink { path }
            | NotRegularEntry { path }
            | PathNotUtf8 { path }
            | PathTooLong { path, .. }
            | TooManyFiles { path, .. }
            | FileUnreadable { path, .. }
            | FileNotRegular { path }
            | FileTooLarge { path, .. }
            | ChangedDuringValidation { path }
            | ChangedWhileCopying { path }
            | TooManyBytes { path, .. }
            | ManifestInvalid { path, .. }
            | NotCompoundEngineering { path }
            | VersionMismatch { path, .. }
            | MissingSkill { path, .. }
            | TooDeep { path, .. }
            | CheckoutConverts { path, .. }
            | SymlinkLeavesRepository { path, .. }
            | SecretContent { path, .. } => Some(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arms_that_look_mistaken_are_doubted_and_matched_to_the_closest() {
        let none = ArmRule::default();
        let doubted = |rule: &ArmRule<'_>, arms: &[&str]| -> Vec<(String, Option<String>)> {
            rule.doubtful(arms.iter().copied())
                .into_iter()
                .map(|d| (d.arm, d.closest))
                .collect()
        };
        let pair = |a: &str, c: Option<&str>| (a.to_string(), c.map(str::to_string));
        // The CE arms and plausible other arms pass without a word.
        assert!(doubted(&none, &["ce_review", "ce_workflow", "baseline", "gitnexus"]).is_empty());
        assert_eq!(
            doubted(
                &none,
                &[
                    "ce_reviw",
                    "bad arm!",
                    "",
                    "CE_REVIEW",
                    "ce_other",
                    "review",
                    "ce_reviw"
                ]
            ),
            [
                pair("ce_reviw", Some("ce_review")),
                pair("bad arm!", None),
                pair("", None),
                pair("CE_REVIEW", Some("ce_review")),
                pair("ce_other", None),
                pair("review", Some("ce_review")),
            ]
        );
        // Once the run names its other arms, every arm outside them is doubted.
        let known = ["baseline".to_string()];
        let rule = ArmRule {
            strict: false,
            known: &known,
        };
        assert_eq!(
            doubted(&rule, &["baseline", "baselin", "gitnexus", "ce_review"]),
            [pair("baselin", Some("baseline")), pair("gitnexus", None)]
        );
        assert_eq!(
            rule.known_arms(),
            ["ce_workflow", "ce_workflow_direct", "ce_review", "baseline"]
        );
        // The strict rule refuses what it doubts, and names the closest arm.
        let strict = ArmRule {
            strict: true,
            known: &known,
        };
        let refused = strict.check(["ce_review", "baselin"]);
        assert!(
            matches!(&refused, Err(Rejection::UnknownArm { arm, closest })
                if arm == "baselin" && closest.as_deref() == Some("baseline")),
            "{refused:?}"
        );
        assert!(strict.check(["ce_review", "baseline"]).is_ok());
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn exact_versions() {
        for ok in [
            "0.0.0",
            "1.2.3",
            "10.20.30",
            "1.0.0-alpha",
            "1.0.0-a.b-c.01",
            "1.0.0+build.7",
            "1.0.0-rc.1+x",
            "1.0.0--",
            "2.0.0-0",
        ] {
            assert!(is_exact_version(ok), "{ok}");
        }
        for bad in [
            "",
            "1",
            "1.0",
            "v1.0.0",
            "01.0.0",
            "1.00.0",
            "1.0.0-",
            "1.0.0+",
            "1.0.0-a..b",
            "1.0.0 ",
            " 1.0.0",
            "^1.0.0",
            "~1.0.0",
            "1.0.x",
            "1.0.0+a+b",
            "1.0.0-é",
            "１.0.0",
            "1.0.0\n",
        ] {
            assert!(!is_exact_version(bad), "{bad:?}");
        }
    }

    #[test]
    fn each_broken_manifest_rule_has_its_own_error() {
        use crate::profile::ce::manifest::Entry;
        let release = |extra: &[&str]| -> Vec<Entry> {
            let mut paths = vec![".claude-plugin/plugin.json"];
            paths.extend(REQUIRED_SKILLS.iter().map(|s| match *s {
                "ce-plan" => "skills/ce-plan/SKILL.md",
                "ce-work" => "skills/ce-work/SKILL.md",
                _ => "skills/ce-code-review/SKILL.md",
            }));
            paths.extend_from_slice(extra);
            paths.iter().map(|p| Entry::of(p, b"x", false)).collect()
        };
        let mut ok = release(&["scripts/run.sh"]);
        ok.sort_by(|a, b| walk_order_key(&a.path).cmp(&walk_order_key(&b.path)));
        check_manifest_entries(&ok).unwrap();
        let rule = |entries: &[Entry]| check_manifest_entries(entries).unwrap_err().rule();
        let sorted = |mut v: Vec<Entry>| {
            v.sort_by(|a, b| walk_order_key(&a.path).cmp(&walk_order_key(&b.path)));
            v
        };
        assert_eq!(
            rule(&sorted(release(&["skills/ce-code-review/.env"]))),
            "forbidden-name"
        );
        assert_eq!(rule(&sorted(release(&["/etc/passwd"]))), "absolute-path");
        assert_eq!(rule(&sorted(release(&["skills/../x"]))), "dot-component");
        assert_eq!(rule(&sorted(release(&["skills//x"]))), "empty-component");
        assert_eq!(rule(&sorted(release(&[""]))), "empty-path");
        assert_eq!(rule(&sorted(release(&["skills/a\0b"]))), "nul-character");
        assert_eq!(rule(&sorted(release(&["README.md"]))), "outside-allowlist");
        assert_eq!(
            rule(&sorted(release(&["scripts/x", "scripts/x"]))),
            "duplicate-path"
        );
        let mut dup_apart = ok.clone();
        dup_apart.push(ok[1].clone());
        assert_eq!(rule(&dup_apart), "duplicate-path");
        let mut reversed = ok.clone();
        reversed.swap(1, 2);
        assert_eq!(rule(&reversed), "entry-order");
        assert_eq!(
            rule(&sorted(release(&["scripts/x", "scripts/x/y"]))),
            "file-and-directory"
        );
        let long = format!("scripts/{}", "a".repeat(MAX_PATH_BYTES));
        assert_eq!(rule(&sorted(release(&[long.as_str()]))), "path-too-long");
        let mut big = ok.clone();
        big[1].size = MAX_FILE_BYTES + 1;
        assert_eq!(rule(&big), "file-too-large");
        let mut heavy = ok.clone();
        for e in &mut heavy {
            e.size = MAX_FILE_BYTES;
        }
        let many: Vec<String> = (0..8).map(|i| format!("scripts/f{i}")).collect();
        let mut heavy = sorted(
            heavy
                .into_iter()
                .chain(many.iter().map(|p| Entry {
                    size: MAX_FILE_BYTES,
                    ..Entry::of(p, b"", false)
                }))
                .collect(),
        );
        assert_eq!(rule(&heavy), "too-many-bytes");
        heavy.truncate(1);
        assert_eq!(rule(&heavy), "missing-skill");
        assert_eq!(rule(&ok[1..]), "no-plugin-json");
        let lots: Vec<Entry> = (0..=MAX_FILES)
            .map(|i| Entry::of(&format!("scripts/{i}"), b"", false))
            .collect();
        assert_eq!(rule(&lots), "too-many-files");
    }

    #[test]
    fn forbidden_names() {
        for name in [
            "tests",
            "TEST",
            "docs",
            ".git",
            "node_modules",
            ".env",
            ".env.local",
            ".NPMRC.bak",
            "api-token.txt",
            "KEY.PEM",
            "my_secret.md",
            "Credentials.json",
            "id.p12",
            "private_key.txt",
            "x.kdbx",
            "TO\u{212a}EN",
        ] {
            assert!(is_forbidden_name(name), "{name}");
        }
        for name in [
            "SKILL.md", "testing", "doc.md", ".envrc", "env", "keys", "pem", "tok-en",
        ] {
            assert!(!is_forbidden_name(name), "{name}");
        }
    }
}

/// Why a manifest could not have come from a tree the reference accepts;
/// one variant per rule.
///
/// A manifest reaches the store from a walk (which applies the rules as it
/// goes), or from elsewhere: a registry, a bundle, a file found under
/// `manifests/` by `cestore recover`. Those are checked by
/// [`check_manifest_entries`], and so is every snapshot before a view of it
/// is handed out.
#[derive(Debug, thiserror::Error)]
pub enum ManifestRuleError {
    /// A path is empty.
    #[error("manifest path '' is empty")]
    EmptyPath,
    /// A path starts with `/`.
    #[error("manifest path '{0}' is absolute")]
    AbsolutePath(String),
    /// A path has an empty component (`a//b`, a trailing `/`).
    #[error("manifest path '{0}' has an empty component")]
    EmptyComponent(String),
    /// A path has a `.` or `..` component.
    #[error("manifest path '{0}' has a '.' or '..' component")]
    DotComponent(String),
    /// A path holds a NUL character, which no file name can.
    #[error("manifest path '{0}' holds a NUL character")]
    NulCharacter(String),
    /// A path lies outside `.claude-plugin/{plugin,marketplace}.json`, `skills/`, `scripts/` and `assets/`.
    #[error("manifest path '{0}' is outside the files the reference keeps")]
    NotKept(String),
    /// A path has a component the reference's filter drops (`.env`, `tests`, `*.pem`, …).
    #[error("manifest path '{0}' has a component the reference drops")]
    Forbidden(String),
    /// A path is longer than [`MAX_PATH_BYTES`].
    #[error("manifest path '{0}' exceeds the byte limit ({MAX_PATH_BYTES} bytes)")]
    PathTooLong(String),
    /// More than [`MAX_FILES`] entries.
    #[error("manifest lists {0} files, more than {MAX_FILES}")]
    TooManyFiles(usize),
    /// A file larger than [`MAX_FILE_BYTES`].
    #[error("manifest file '{0}' exceeds the per-file limit ({MAX_FILE_BYTES} bytes)")]
    FileTooLarge(String),
    /// All files together larger than [`MAX_TOTAL_BYTES`].
    #[error("manifest files exceed the total byte limit ({MAX_TOTAL_BYTES} bytes)")]
    TooManyBytes,
    /// A path is listed twice.
    #[error("manifest path '{0}' is listed twice")]
    DuplicatePath(String),
    /// The entries are not in the reference's walk order.
    #[error("manifest entries are not in the reference's order at '{0}'")]
    Order(String),
    /// A path is both a file and a directory.
    #[error("manifest path '{0}' is both a file and a directory")]
    FileAndDirectory(String),
    /// `plugin.json` is not the first entry.
    #[error("manifest does not start with .claude-plugin/plugin.json")]
    NoPluginJson,
    /// A required skill is missing.
    #[error("manifest is missing required skill: {0}")]
    MissingSkill(&'static str),
}

impl ManifestRuleError {
    /// A stable identifier of the rule broken, for JSON output and scripts.
    pub fn rule(&self) -> &'static str {
        use ManifestRuleError::*;
        match self {
            EmptyPath => "empty-path",
            AbsolutePath(_) => "absolute-path",
            EmptyComponent(_) => "empty-component",
            DotComponent(_) => "dot-component",
            NulCharacter(_) => "nul-character",
            NotKept(_) => "outside-allowlist",
            Forbidden(_) => "forbidden-name",
            PathTooLong(_) => "path-too-long",
            TooManyFiles(_) => "too-many-files",
            FileTooLarge(_) => "file-too-large",
            TooManyBytes => "too-many-bytes",
            DuplicatePath(_) => "duplicate-path",
            Order(_) => "entry-order",
            FileAndDirectory(_) => "file-and-directory",
            NoPluginJson => "no-plugin-json",
            MissingSkill(_) => "missing-skill",
        }
    }
}

/// The key that orders entries as the reference's walk does: the manifests
/// first, then `skills`, `scripts`, `assets`, then component by component.
pub fn walk_order_key(path: &str) -> (u8, usize, Vec<&str>) {
    if let Some(i) = MANIFESTS.iter().position(|m| {
        path.strip_prefix(MANIFEST_DIR)
            .and_then(|r| r.strip_prefix('/'))
            == Some(m)
    }) {
        return (0, i, Vec::new());
    }
    let mut parts = path.split('/');
    let top = parts.next().unwrap_or_default();
    let i = PLUGIN_DIRS
        .iter()
        .position(|d| *d == top)
        .unwrap_or(usize::MAX);
    (1, i, parts.collect())
}

/// The one check of a manifest's entries against the reference's rules and
/// bounds: plain kept paths, no dropped names, the bounds, the walk order
/// with no path twice, `plugin.json` first and the required skills present.
///
/// Every manifest that does not come from a walk passes here before it is
/// recorded (`pull`, `import`, `recover`) and every snapshot before a view
/// of it is handed out (`checkout`, `path`) or written to a bundle. What
/// needs bytes is checked beside it by its callers: `plugin.json`'s content
/// ([`crate::store::ingest::adopt::content_version`], the profile's `check_content`) and the objects themselves.
pub fn check_manifest_entries(
    entries: &[crate::profile::ce::manifest::Entry],
) -> Result<(), ManifestRuleError> {
    use ManifestRuleError as E;
    if entries.len() > MAX_FILES {
        return Err(E::TooManyFiles(entries.len()));
    }
    let mut total = 0u64;
    let mut seen = std::collections::HashSet::with_capacity(entries.len());
    for e in entries {
        let p = e.path.as_str();
        if !seen.insert(p) {
            return Err(E::DuplicatePath(p.into()));
        }
        if p.is_empty() {
            return Err(E::EmptyPath);
        }
        if p.starts_with('/') {
            return Err(E::AbsolutePath(p.into()));
        }
        if p.contains('\0') {
            return Err(E::NulCharacter(p.into()));
        }
        if p.split('/').any(str::is_empty) {
            return Err(E::EmptyComponent(p.into()));
        }
        if p.split('/').any(|c| c == "." || c == "..") {
            return Err(E::DotComponent(p.into()));
        }
        let (class, top, rest) = walk_order_key(p);
        if class == 1 && (top == usize::MAX || rest.is_empty()) {
            return Err(E::NotKept(p.into()));
        }
        if class == 1 && rest.iter().any(|c| is_forbidden_name(c)) {
            return Err(E::Forbidden(p.into()));
        }
        if p.len() > MAX_PATH_BYTES {
            return Err(E::PathTooLong(p.into()));
        }
        if e.size > MAX_FILE_BYTES {
            return Err(E::FileTooLarge(p.into()));
        }
        total += e.size;
    }
    if total > MAX_TOTAL_BYTES {
        return Err(E::TooManyBytes);
    }
    for pair in entries.windows(2) {
        let (a, b) = (&pair[0].path, &pair[1].path);
        if walk_order_key(a) >= walk_order_key(b) {
            return Err(E::Order(b.clone()));
        }
        if b.starts_with(a.as_str()) && b.as_bytes().get(a.len()) == Some(&b'/') {
            return Err(E::FileAndDirectory(a.clone()));
        }
    }
    if entries.first().map(|e| e.path.as_str()) != Some(crate::profile::ce::manifest::PLUGIN_JSON) {
        return Err(E::NoPluginJson);
    }
    for skill in REQUIRED_SKILLS {
        let want = format!("skills/{skill}/SKILL.md");
        if !entries.iter().any(|e| e.path == want) {
            return Err(E::MissingSkill(skill));
        }
    }
    Ok(())
}
