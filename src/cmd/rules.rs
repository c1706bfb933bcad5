//! `cestore rules`: the decisions bindings would otherwise copy, as this
//! binary makes them: the plugin's constants, the CE arms, the bounds, the
//! exact-version rule, the GitNexus pin, every rule of a release and of the
//! GitNexus runtime with its message, and the flags the Python API's keyword
//! arguments stand for.
//!
//! The Python package reads this answer instead of keeping its own copy
//! (`python/cestore/_contract.py`); its tests pin it against the seed's
//! module.

use std::io;
use std::path::PathBuf;

use crate::error::misuse::FLAG_KEYWORDS;
use crate::error::{Error, ErrorKind};
use crate::gitnexus::{self, GitNexusError, Kind, Root};
use crate::manifest;
use crate::policy::{self, Rejection};

/// The exact-version rule ([`policy::is_exact_version`]) as the reference's
/// regular expression (`_EXACT_VERSION`), to be matched against the whole
/// version: what a binding checks a version with before it starts a process.
pub const EXACT_VERSION_PATTERN: &str = concat!(
    r"(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)",
    r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?",
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
);

/// Everything `cestore rules` reports.
#[derive(Debug, serde::Serialize)]
pub struct RulesReport {
    /// The plugin release's constants.
    pub plugin: PluginRules,
    /// The arms that see the plugin (`CE_ARMS`), in the order messages list them.
    pub ce_arms: Vec<&'static str>,
    /// The four bounds of a release's walk, each the highest its flag takes.
    pub bounds: Vec<BoundRule>,
    /// Which versions are exact.
    pub exact_version: VersionRule,
    /// The GitNexus runtime's pin and mount points.
    pub gitnexus: GitNexusRules,
    /// Every rule of a release (`policy::Rejection`) and of the GitNexus
    /// runtime (`GitNexusError`), with the message that names it.
    pub rules: Vec<RuleEntry>,
    /// Each flag the Python API passes for a keyword argument, with that keyword.
    pub flags: Vec<FlagKeyword>,
}

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

/// The GitNexus runtime's constants.
#[derive(Debug, serde::Serialize)]
pub struct GitNexusRules {
    /// The version the seed's rules pin (`PINNED_GITNEXUS_VERSION`).
    pub pinned_version: &'static str,
    /// The harness revisions whose rules `--gitnexus-rules` applies.
    pub revisions: Vec<String>,
    /// Where the runtime is mounted (`SANDBOX_GITNEXUS`).
    pub sandbox_gitnexus: &'static str,
    /// Where the shared package is mounted (`SANDBOX_GITNEXUS_SHARED`).
    pub sandbox_gitnexus_shared: &'static str,
}

/// One rule: its id (the JSON error's `rule`), its kind and exit code, and
/// its message with a `{field}` for each part that varies.
#[derive(Debug, serde::Serialize)]
pub struct RuleEntry {
    /// The rule's id.
    pub rule: &'static str,
    /// The kind of its error (a rule's refusal of a directory named on the
    /// command line only because it does not exist is `not-found` instead).
    pub kind: &'static str,
    /// The exit code of that kind.
    pub code: u8,
    /// The message in the library's words (the JSON error's `message` names
    /// a flag where these name an option: the arm rules).
    pub message: String,
}

/// A flag and the Python keyword argument it stands for.
#[derive(Debug, serde::Serialize)]
pub struct FlagKeyword {
    /// The flag, `--plugin-dir`.
    pub flag: &'static str,
    /// The keyword, `plugin_dir` (or a `Bounds` field, `Bounds(files=...)`).
    pub keyword: &'static str,
}

/// The decisions, as this binary makes them.
pub fn rules() -> RulesReport {
    let bound = |field, flag, constant, limit: u64| BoundRule {
        field,
        flag,
        constant,
        limit,
    };
    RulesReport {
        plugin: PluginRules {
            name: policy::PLUGIN_NAME,
            manifest: manifest::PLUGIN_JSON,
            manifest_schema_version: manifest::SCHEMA_VERSION,
            sandbox_dir: gitnexus::SANDBOX_CE_PLUGIN,
            required_skills: policy::REQUIRED_SKILLS.to_vec(),
        },
        ce_arms: policy::CE_ARMS.to_vec(),
        bounds: vec![
            bound(
                "files",
                "--max-files",
                "MAX_CE_PLUGIN_FILES",
                policy::MAX_FILES as u64,
            ),
            bound(
                "file_bytes",
                "--max-file-bytes",
                "MAX_CE_PLUGIN_FILE_BYTES",
                policy::MAX_FILE_BYTES,
            ),
            bound(
                "total_bytes",
                "--max-total-bytes",
                "MAX_CE_PLUGIN_TOTAL_BYTES",
                policy::MAX_TOTAL_BYTES,
            ),
            bound(
                "path_bytes",
                "--max-path-bytes",
                "MAX_CE_PLUGIN_PATH_BYTES",
                policy::MAX_PATH_BYTES as u64,
            ),
        ],
        exact_version: VersionRule {
            description: "MAJOR.MINOR.PATCH without leading zeros, with an optional \
                          -PRERELEASE and +BUILD of dot-separated ASCII letters, digits \
                          and hyphens (aliases and ranges are forbidden)",
            pattern: EXACT_VERSION_PATTERN,
        },
        gitnexus: GitNexusRules {
            pinned_version: gitnexus::PINNED_VERSION,
            revisions: <gitnexus::Revision as clap::ValueEnum>::value_variants()
                .iter()
                .filter_map(clap::ValueEnum::to_possible_value)
                .map(|v| v.get_name().to_owned())
                .collect(),
            sandbox_gitnexus: gitnexus::SANDBOX_GITNEXUS,
            sandbox_gitnexus_shared: gitnexus::SANDBOX_GITNEXUS_SHARED,
        },
        rules: rule_entries(),
        flags: FLAG_KEYWORDS
            .iter()
            .map(|&(flag, keyword)| FlagKeyword { flag, keyword })
            .collect(),
    }
}

/// Numbers no real rejection carries, standing in for its varying counts
/// in a message, then replaced by their field's name.
const COUNTS: [(u64, &str); 4] = [
    (9_000_000_001, "{limit}"),
    (9_000_000_002, "{bytes}"),
    (9_000_000_003, "{line}"),
    (9_000_000_004, "{depth}"),
];

/// Every rule, each from one rejection whose varying parts are named.
fn rule_entries() -> Vec<RuleEntry> {
    let path = || PathBuf::from("{path}");
    let os = || io::Error::other("{os error}");
    let text = |t: &str| t.to_owned();
    let [limit, bytes, line, depth] = COUNTS.map(|(n, _)| n);
    let rejections = vec![
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
    ];
    let gitnexus = vec![
        GitNexusError::CeArmWithoutPlugin { arm: text("{arm}") },
        GitNexusError::RootUnavailable {
            root: Root::Runtime,
            path: path(),
            source: os(),
        },
        GitNexusError::RootNotRealDirectory {
            root: Root::Runtime,
            path: path(),
        },
        GitNexusError::CheckoutUnavailable {
            path: path(),
            source: os(),
        },
        GitNexusError::CheckoutNotRealDirectory { path: path() },
        GitNexusError::SymlinkOutsidePrimary { path: path() },
        GitNexusError::VersionMissing { path: path() },
        GitNexusError::ComponentUnavailable {
            path: path(),
            source: os(),
        },
        GitNexusError::ComponentNotReal {
            path: path(),
            kind: Kind::Directory,
        },
        GitNexusError::EntrypointUnavailable {
            path: path(),
            source: os(),
        },
        GitNexusError::RuntimeMetadataInvalid {
            path: path(),
            reason: text("{reason}"),
        },
        GitNexusError::EntrypointNotRegular { path: path() },
        GitNexusError::VersionDrifted {
            expected: text("{expected}"),
            got: text("{got}"),
        },
        GitNexusError::SharedLinkNotSymlink { path: path() },
        GitNexusError::SharedLinkUnresolvable {
            path: path(),
            source: os(),
        },
        GitNexusError::SharedLinkElsewhere {
            path: path(),
            resolved: PathBuf::from("{resolved}"),
            expected: PathBuf::from("{expected}"),
        },
        GitNexusError::SharedMetadataInvalid {
            path: path(),
            reason: text("{reason}"),
        },
        GitNexusError::SharedIdentity { got: text("{got}") },
    ];
    rejections
        .into_iter()
        .map(Error::from)
        .chain(gitnexus.into_iter().map(Error::from))
        .filter_map(|e| {
            let kind: ErrorKind = e.error_kind();
            let mut message = crate::error::error_chain(&e);
            for (n, name) in COUNTS {
                message = message.replace(&n.to_string(), name);
            }
            Some(RuleEntry {
                rule: e.rule()?,
                kind: kind.name(),
                code: kind.exit_code(),
                message,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Names every rejection, so that a new one fails to compile until
    /// `rule_entries` lists it too.
    #[allow(dead_code)]
    fn every_rule_is_listed(r: &Rejection, g: &GitNexusError) {
        use GitNexusError as G;
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
        match g {
            G::CeArmWithoutPlugin { .. }
            | G::RootUnavailable { .. }
            | G::RootNotRealDirectory { .. }
            | G::CheckoutUnavailable { .. }
            | G::CheckoutNotRealDirectory { .. }
            | G::SymlinkOutsidePrimary { .. }
            | G::VersionMissing { .. }
            | G::ComponentUnavailable { .. }
            | G::ComponentNotReal { .. }
            | G::EntrypointUnavailable { .. }
            | G::RuntimeMetadataInvalid { .. }
            | G::EntrypointNotRegular { .. }
            | G::VersionDrifted { .. }
            | G::SharedLinkNotSymlink { .. }
            | G::SharedLinkUnresolvable { .. }
            | G::SharedLinkElsewhere { .. }
            | G::SharedMetadataInvalid { .. }
            | G::SharedIdentity { .. } => {}
        }
    }

    /// Every long flag of every command and subcommand.
    fn long_flags(cmd: &clap::Command, into: &mut std::collections::BTreeSet<String>) {
        into.extend(
            cmd.get_arguments()
                .filter_map(|a| a.get_long().map(|l| format!("--{l}"))),
        );
        for sub in cmd.get_subcommands() {
            long_flags(sub, into);
        }
    }

    /// Each flag the table gives a keyword is one the command line takes,
    /// named once; so is each bound's.
    #[test]
    fn each_flag_of_the_table_is_the_command_lines() {
        let mut flags = std::collections::BTreeSet::new();
        long_flags(&crate::cli::args::Cli::command(), &mut flags);
        let report = rules();
        let mut seen = std::collections::BTreeSet::new();
        for f in &report.flags {
            assert!(flags.contains(f.flag), "{} is no flag of cestore", f.flag);
            assert!(seen.insert(f.flag), "{} listed twice", f.flag);
        }
        for b in &report.bounds {
            assert!(flags.contains(b.flag), "{}", b.flag);
            assert!(seen.contains(b.flag), "{} has no keyword", b.flag);
        }
        assert_eq!(report.gitnexus.revisions, ["seed", "upstream"]);
    }

    /// Every rule is listed once, with its message's varying parts named.
    #[test]
    fn each_rule_is_listed_once_with_its_message() {
        let report = rules();
        let mut seen = std::collections::BTreeSet::new();
        for r in &report.rules {
            assert!(seen.insert(r.rule), "{} listed twice", r.rule);
            assert!(!r.message.contains("9000000"), "{}: {}", r.rule, r.message);
        }
        assert_eq!(report.rules.len(), 34 + 18);
        let symlink = report.rules.iter().find(|r| r.rule == "symlink");
        assert_eq!(
            symlink.map(|r| (r.kind, r.code, r.message.as_str())),
            Some((
                "rejected",
                3,
                "Compound Engineering plugin entries must not be symlinks: {path}"
            ))
        );
        let too_long = report.rules.iter().find(|r| r.rule == "path-too-long");
        assert_eq!(
            too_long.map(|r| r.message.as_str()),
            Some(
                "Compound Engineering plugin path exceeds the byte limit \
                 ({limit} bytes, this one has {bytes}): {path}"
            )
        );
    }
}
