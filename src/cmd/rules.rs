//! `cestore rules`: the decisions bindings would otherwise copy, as this
//! binary makes them: the plugin's constants, the CE arms, the bounds, the
//! exact-version rule, the GitNexus pin, and the flags the Python API's
//! keyword arguments stand for.
//!
//! The Python package reads this answer instead of keeping its own copy
//! (`python/cestore/_contract.py`); its tests pin it against the seed's
//! module.

use crate::error::misuse::FLAG_KEYWORDS;
use crate::gitnexus;
use crate::manifest;
use crate::policy;

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
        flags: FLAG_KEYWORDS
            .iter()
            .map(|&(flag, keyword)| FlagKeyword { flag, keyword })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

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
}
