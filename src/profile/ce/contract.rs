//! What the CE profile decides, as bindings read it (`cestore rules`): the
//! plugin's constants, the bounds with the reference's names for them, the
//! exact-version rule as the reference's regular expression, and one
//! rejection of each rule to word its message from.

use std::io;
use std::path::PathBuf;

use super::manifest::{PLUGIN_JSON, SCHEMA_VERSION};
use super::rules::{self, Rejection};

/// The exact-version rule ([`rules::is_exact_version`]) as the reference's
/// regular expression (`_EXACT_VERSION`), to be matched against the whole
/// version: what a binding checks a version with before it starts a process.
pub const EXACT_VERSION_PATTERN: &str = concat!(
    r"(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)",
    r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?",
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
);

/// A plugin release's constants.
#[derive(Debug, serde::Serialize)]
pub struct PluginRules {
    /// The name `plugin.json` must carry.
    pub name: &'static str,
    /// The manifest's path inside the release.
    pub manifest: &'static str,
    /// The canonical manifest's schema version (`CE_PLUGIN_MANIFEST_SCHEMA_VERSION`).
    pub manifest_schema_version: u32,
    /// Where a CE arm's sandbox sees the plugin (`SANDBOX_CE_PLUGIN`).
    pub sandbox_dir: &'static str,
    /// The skills every release must hold, in the order they are checked.
    pub required_skills: Vec<&'static str>,
}

/// One bound of a release's walk.
#[derive(Debug, serde::Serialize)]
pub struct BoundRule {
    /// Its name in `cestore.Bounds`.
    pub field: &'static str,
    /// The flag that lowers it.
    pub flag: &'static str,
    /// The reference's constant.
    pub constant: &'static str,
    /// The reference's value: the default, and the highest the flag takes.
    pub limit: u64,
}

/// The exact-version rule.
#[derive(Debug, serde::Serialize)]
pub struct VersionRule {
    /// The rule in words.
    pub description: &'static str,
    /// The rule as a regular expression to match the whole version with
    /// ([`EXACT_VERSION_PATTERN`]).
    pub pattern: &'static str,
}

/// The plugin's constants; `sandbox_dir` is where a CE arm's sandbox sees it.
pub fn plugin(sandbox_dir: &'static str) -> PluginRules {
    PluginRules {
        name: rules::PLUGIN_NAME,
        manifest: PLUGIN_JSON,
        manifest_schema_version: SCHEMA_VERSION,
        sandbox_dir,
        required_skills: rules::REQUIRED_SKILLS.to_vec(),
    }
}

/// The arms that see the plugin, in the order messages list them.
pub fn ce_arms() -> Vec<&'static str> {
    rules::CE_ARMS.to_vec()
}

/// The four bounds of a release's walk, each with the reference's constant.
pub fn bounds() -> Vec<BoundRule> {
    let bound = |field, flag, constant, limit: u64| BoundRule {
        field,
        flag,
        constant,
        limit,
    };
    vec![
        bound(
            "files",
            "--max-files",
            "MAX_CE_PLUGIN_FILES",
            rules::MAX_FILES as u64,
        ),
        bound(
            "file_bytes",
            "--max-file-bytes",
            "MAX_CE_PLUGIN_FILE_BYTES",
            rules::MAX_FILE_BYTES,
        ),
        bound(
            "total_bytes",
            "--max-total-bytes",
            "MAX_CE_PLUGIN_TOTAL_BYTES",
            rules::MAX_TOTAL_BYTES,
        ),
        bound(
            "path_bytes",
            "--max-path-bytes",
            "MAX_CE_PLUGIN_PATH_BYTES",
            rules::MAX_PATH_BYTES as u64,
        ),
    ]
}

/// The exact-version rule, in words and as the reference's pattern.
pub fn exact_version() -> VersionRule {
    VersionRule {
        description: "MAJOR.MINOR.PATCH without leading zeros, with an optional \
                      -PRERELEASE and +BUILD of dot-separated ASCII letters, digits \
                      and hyphens (aliases and ranges are forbidden)",
        pattern: EXACT_VERSION_PATTERN,
    }
}

/// Numbers no real rejection carries, standing in for its varying counts
/// in a message, then replaced by their field's name.
pub const COUNTS: [(u64, &str); 4] = [
    (9_000_000_001, "{limit}"),
    (9_000_000_002, "{bytes}"),
    (9_000_000_003, "{line}"),
    (9_000_000_004, "{depth}"),
];

/// One rejection of every rule, its varying parts named (`{path}`) or
/// standing in as one of [`COUNTS`].
pub fn rejection_samples() -> Vec<Rejection> {
    let path = || PathBuf::from("{path}");
    let os = || io::Error::other("{os error}");
    let text = |t: &str| t.to_owned();
    let [limit, bytes, line, depth] = COUNTS.map(|(n, _)| n);
    vec![
        Rejection::VersionNotExact {
            version: text("{version}"),
        },
        Rejection::SourceUnavailable {
            path: path(),
            source: os(),
        },
        Rejection::SourceNotRealDirectory { path: path() },
        Rejection::ManifestDirUnavailable {
            path: path(),
            source: os(),
        },
        Rejection::ManifestDirNotReal { path: path() },
        Rejection::ManifestMissing { path: path() },
        Rejection::SkillsMissing { path: path() },
        Rejection::ExistenceUnknown {
            path: path(),
            source: os(),
        },
        Rejection::ComponentUnreadable {
            path: path(),
            source: os(),
        },
        Rejection::ComponentNotRealDirectory { path: path() },
        Rejection::DirectoryUnreadable {
            path: path(),
            source: os(),
        },
        Rejection::EntryUnreadable {
            path: path(),
            source: os(),
        },
        Rejection::Symlink { path: path() },
        Rejection::NotRegularEntry { path: path() },
        Rejection::PathNotUtf8 { path: path() },
        Rejection::PathTooLong {
            path: path(),
            bytes: bytes as usize,
            limit: limit as usize,
        },
        Rejection::TooManyFiles {
            path: path(),
            limit: limit as usize,
        },
        Rejection::FileUnreadable {
            path: path(),
            source: os(),
        },
        Rejection::FileNotRegular { path: path() },
        Rejection::FileTooLarge {
            path: path(),
            limit,
        },
        Rejection::ChangedDuringValidation { path: path() },
        Rejection::ChangedWhileCopying { path: path() },
        Rejection::TooManyBytes {
            path: path(),
            limit,
        },
        Rejection::ManifestInvalid {
            path: path(),
            reason: text("{reason}"),
        },
        Rejection::NotCompoundEngineering { path: path() },
        Rejection::VersionMismatch {
            path: path(),
            expected: text("{expected}"),
            got: text("{got}"),
        },
        Rejection::MissingSkill {
            skill: "{skill}",
            path: path(),
        },
        Rejection::PluginInputsWithoutCeArm,
        Rejection::UnknownArm {
            arm: text("{arm}"),
            closest: None,
        },
        Rejection::SecretContent {
            path: path(),
            kind: crate::secrets::SecretKind::PrivateKey,
            line,
        },
        Rejection::CeArmWithoutPluginInputs,
        Rejection::TooDeep {
            path: path(),
            depth: depth as usize,
        },
        Rejection::CheckoutConverts {
            path: path(),
            attribute: text("{attribute}"),
        },
        Rejection::SymlinkLeavesRepository {
            path: path(),
            target: text("{target}"),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names every rejection, so that a new one fails to compile until
    /// [`rejection_samples`] lists it too.
    #[allow(dead_code)]
    fn every_rule_is_listed(r: &Rejection) {
        use Rejection as R;
        match r {
            R::VersionNotExact { .. }
            | R::SourceUnavailable { .. }
            | R::SourceNotRealDirectory { .. }
            | R::ManifestDirUnavailable { .. }
            | R::ManifestDirNotReal { .. }
            | R::ManifestMissing { .. }
            | R::SkillsMissing { .. }
            | R::ExistenceUnknown { .. }
            | R::ComponentUnreadable { .. }
            | R::ComponentNotRealDirectory { .. }
            | R::DirectoryUnreadable { .. }
            | R::EntryUnreadable { .. }
            | R::Symlink { .. }
            | R::NotRegularEntry { .. }
            | R::PathNotUtf8 { .. }
            | R::PathTooLong { .. }
            | R::TooManyFiles { .. }
            | R::FileUnreadable { .. }
            | R::FileNotRegular { .. }
            | R::FileTooLarge { .. }
            | R::ChangedDuringValidation { .. }
            | R::ChangedWhileCopying { .. }
            | R::TooManyBytes { .. }
            | R::ManifestInvalid { .. }
            | R::NotCompoundEngineering { .. }
            | R::VersionMismatch { .. }
            | R::MissingSkill { .. }
            | R::PluginInputsWithoutCeArm
            | R::UnknownArm { .. }
            | R::SecretContent { .. }
            | R::CeArmWithoutPluginInputs
            | R::TooDeep { .. }
            | R::CheckoutConverts { .. }
            | R::SymlinkLeavesRepository { .. } => {}
        }
    }

    /// Each sample is a rule of its own.
    #[test]
    fn one_sample_a_rule() {
        let samples = rejection_samples();
        let ids: std::collections::BTreeSet<_> = samples.iter().map(Rejection::rule).collect();
        assert_eq!(ids.len(), samples.len());
    }
}
