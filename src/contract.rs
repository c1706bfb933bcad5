//! The decisions bindings would otherwise copy, as this binary makes them
//! (`cestore rules`): the plugin's constants, the CE arms, the bounds, the
//! exact-version rule, the GitNexus pin, every rule of a release and of the
//! GitNexus runtime with its message, and the flags the Python API's keyword
//! arguments stand for.
//!
//! The Python package reads this answer instead of keeping its own copy
//! (`python/cestore/_contract.py`); its tests pin it against the seed's
//! module. Each part comes from the module that decides it: the CE profile
//! ([`crate::profile::ce::contract`]), [`crate::gitnexus`] and the misuse
//! table ([`crate::error::misuse`]).

use crate::error::misuse::FLAG_KEYWORDS;
use crate::error::{Error, ErrorKind};
use crate::gitnexus::{self, GitNexusRules};
use crate::profile::ce::contract::{self as ce, BoundRule, PluginRules, VersionRule, COUNTS};

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
    /// Every rule of a release (`Rejection`) and of the GitNexus
    /// runtime (`GitNexusError`), with the message that names it.
    pub rules: Vec<RuleEntry>,
    /// Each flag the Python API passes for a keyword argument, with that keyword.
    pub flags: Vec<FlagKeyword>,
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
    RulesReport {
        plugin: ce::plugin(gitnexus::SANDBOX_CE_PLUGIN),
        ce_arms: ce::ce_arms(),
        bounds: ce::bounds(),
        exact_version: ce::exact_version(),
        gitnexus: gitnexus::contract_rules(),
        rules: rule_entries(),
        flags: FLAG_KEYWORDS
            .iter()
            .map(|&(flag, keyword)| FlagKeyword { flag, keyword })
            .collect(),
    }
}

/// Every rule, each from one sample error whose varying parts are named.
fn rule_entries() -> Vec<RuleEntry> {
    ce::rejection_samples()
        .into_iter()
        .map(Error::from)
        .chain(gitnexus::rule_samples().into_iter().map(Error::from))
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
