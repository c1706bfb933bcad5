//! The decisions bindings would otherwise copy, as this binary makes them
//! (`cestore rules`): the plugin's constants, the CE arms, the bounds, the
//! exact-version rule, the GitNexus pin, every rule of a release and of the
//! GitNexus runtime with its message, every rule the tree profile refuses
//! with (capture, declarations, stored checks, writable copies and
//! materialize), and the flags the Python API's keyword arguments stand for.
//!
//! The Python package reads this answer instead of keeping its own copy
//! (`python/cestore/_contract.py`); its tests pin it against the seed's
//! module. Each part comes from the module that decides it: the CE profile
//! ([`crate::profile::ce::contract`]), [`crate::gitnexus`], the tree
//! profile's error types ([`crate::profile::tree`], the store's tree ingest
//! and its copies) and the misuse table ([`crate::error::misuse`]).

use std::path::PathBuf;

use crate::error::misuse::FLAG_KEYWORDS;
use crate::error::{Error, ErrorKind};
use crate::gitnexus::{self, GitNexusRules};
use crate::profile::ce::contract::{self as ce, BoundRule, PluginRules, VersionRule, COUNTS};
use crate::profile::tree::capture::{CaptureError, OsCause};
use crate::profile::tree::declare::DeclarationError;
use crate::profile::tree::stored::CheckError;
use crate::store::ingest::tree::TreeIngestError;
use crate::store::views::copies::{CopyError, CopyFault};

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
    /// Every rule the tree profile refuses with, once each: the harness's
    /// capture and declarations (`ingest --profile tree|dependency|task`),
    /// the checks of a stored tree-kind manifest, and writable copies and
    /// `materialize`.
    pub tree_rules: Vec<TreeRule>,
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

/// One rule of the tree profile: its id, kind, exit code and message (as
/// [`RuleEntry`]), and which refusals carry it.
#[derive(Debug, serde::Serialize)]
pub struct TreeRule {
    /// The rule's id (the JSON error's `rule`; for `stored`, the rule a
    /// `recover` report names).
    pub rule: &'static str,
    /// The kind of its error (`integrity` for a stored manifest's: the
    /// store's content breaks it; `materialize`'s refusal of a clone that
    /// does not exist is `not-found` instead).
    pub kind: &'static str,
    /// The exit code of that kind.
    pub code: u8,
    /// The message with a `{field}` for each part that varies.
    pub message: String,
    /// Where it is refused: `capture` and `declarations` (the harness's
    /// rules, at `ingest --profile`), `ingest` (the repository or harness
    /// root), `stored` (a tree-kind manifest read from the store, a pull,
    /// an import or `recover`), `copies` (a writable copy's files, made by
    /// `checkout --writable` and `materialize`), `materialize` (the clone
    /// and the roots declared in it).
    pub from: Vec<&'static str>,
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
        tree_rules: tree_rules(),
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

/// The text an `OsCause` sample shows, named.
const OS_ERROR: &str = "{os error}";

/// A number standing for a count in a sample, named in its message.
const COUNT: u64 = 9_000_001;

/// The cause each sample carries where the system's error is shown.
fn os_cause() -> OsCause {
    OsCause {
        errno: libc::EIO,
        filename: None,
    }
}

/// One sample of every [`CaptureError`], its varying parts named.
pub fn capture_samples() -> Vec<CaptureError> {
    use CaptureError::*;
    let path = || "{path}".to_string();
    vec![
        DirectoryUnreadable {
            path: path(),
            cause: os_cause(),
        },
        Symlink(path()),
        PathUnavailable {
            path: path(),
            cause: os_cause(),
        },
        ParentNotDirectory(path()),
        NotFileOrDirectory(path()),
        Unopenable {
            path: path(),
            cause: os_cause(),
        },
        ChangedWhileOpening(path()),
        DirectoryChanged(path()),
        FileChanged(path()),
        TotalBytes,
        Entries,
        PathBytes,
        PathNotUtf8(path()),
        Collide(path()),
        SymlinkUnreadable(path()),
        SymlinkNotRelative(path()),
        SymlinkTooLong(path()),
        SymlinkChanged(path()),
        SymlinkEscapesWorkspace(path()),
        SymlinkDangling(path()),
        SymlinkEscapesRuntime(path()),
        Os(os_cause()),
    ]
}

/// One sample of every [`DeclarationError`], its varying parts named.
pub fn declaration_samples() -> Vec<DeclarationError> {
    use DeclarationError::*;
    let text = |t: &str| t.to_string();
    vec![
        CopyNotAList,
        CopyNotRelative(text("{declaration}")),
        PathBytes,
        CopyOverlap(text("{path}"), text("{other}")),
        DependenciesNotAList,
        DependencyShape,
        SourceOutside(text("{path}")),
        TargetOutside(text("{path}")),
        TargetsOverlap(text("{path}"), text("{other}")),
        BindingChanged,
    ]
}

/// One sample of every [`TreeIngestError`] that is not a capture's or a
/// declaration's, its varying parts named.
pub fn ingest_samples() -> Vec<TreeIngestError> {
    vec![
        TreeIngestError::NotRealDirectory {
            path: PathBuf::from("{path}"),
            message: "{label} must be a real directory: {path}".into(),
        },
        TreeIngestError::Input {
            what: "task",
            path: PathBuf::from("{path}"),
            reason: "{reason}".into(),
        },
        TreeIngestError::ManifestTooLarge {
            kind: "{kind}",
            size: COUNT,
            max: crate::profile::ce::manifest::MAX_TREE_MANIFEST_BYTES,
        },
        TreeIngestError::NoHarnessRoot("{path}".into()),
    ]
}

/// One sample of every [`CheckError`], its varying parts named.
pub fn check_samples() -> Vec<CheckError> {
    vec![
        CheckError::TooManyEntries {
            kind: "{kind}",
            count: COUNT,
        },
        CheckError::TooManyBytes {
            kind: "{kind}",
            total: COUNT,
        },
        CheckError::Path {
            path: "{path}".into(),
            rule: "{rule}",
        },
        CheckError::Missing(crate::digest::ManifestDigest::from_bytes([0; 32])),
        CheckError::MemberMissing {
            role: "{role}".into(),
            digest: crate::digest::ManifestDigest::from_bytes([0; 32]),
        },
        CheckError::MemberKind {
            role: "{role}".into(),
            digest: crate::digest::ManifestDigest::from_bytes([0; 32]),
            recorded: "{kind}",
            found: "{other}",
        },
    ]
}

/// One sample of every [`CopyError`], its varying parts named.
pub fn copy_samples() -> Vec<CopyError> {
    use CopyError::*;
    let path = || PathBuf::from("{path}");
    let root = || "{root}".to_string();
    vec![
        FallbackLimit {
            path: path(),
            fault: CopyFault::OverBudget {
                size: COUNT,
                remaining: COUNT,
                limit: COUNT,
            },
        },
        InvalidReflink {
            relative: "{path}".into(),
            path: path(),
        },
        ObjectChanged {
            relative: "{path}".into(),
            path: path(),
        },
        ChangedWhileCopying {
            relative: "{path}".into(),
            path: path(),
        },
        CloneNotADirectory {
            path: path(),
            cause: None,
        },
        CloneTraversesSymlink { path: path() },
        TargetSymlink(root(), path()),
        TargetSymlinkParent(root(), path()),
        TargetUnsupported(root(), path()),
        TargetParentUnsupported(root(), path()),
        TargetTraversesSymlink(root(), path()),
        Io {
            op: "{operation}",
            path: path(),
            source: std::io::Error::other(OS_ERROR),
        },
    ]
}

/// Where a [`CopyError`] is refused: `materialize` for a clone or a
/// declared root in it, `copies` for a writable copy's files (which
/// `materialize` makes too).
pub fn copy_from(e: &CopyError) -> &'static str {
    use CopyError::*;
    match e {
        CloneNotADirectory { .. }
        | CloneTraversesSymlink { .. }
        | TargetSymlink(..)
        | TargetSymlinkParent(..)
        | TargetUnsupported(..)
        | TargetParentUnsupported(..)
        | TargetTraversesSymlink(..) => "materialize",
        FallbackLimit { .. }
        | InvalidReflink { .. }
        | ObjectChanged { .. }
        | ChangedWhileCopying { .. }
        | Io { .. } => "copies",
    }
}

/// A sample's message with its varying parts named.
fn named(message: String) -> String {
    message
        .replace(&os_cause().to_string(), OS_ERROR)
        .replace(&COUNT.to_string(), "{count}")
        .replace(
            &crate::digest::ManifestDigest::from_bytes([0; 32]).to_string(),
            "{digest}",
        )
}

/// Every rule of the tree profile, once each, in the order of the samples:
/// the capture's, the declarations', the ingest's own, the stored checks',
/// the copies'.
fn tree_rules() -> Vec<TreeRule> {
    let refusals = capture_samples()
        .into_iter()
        .map(|e| ("capture", Error::from(TreeIngestError::Capture(e))))
        .chain(
            declaration_samples()
                .into_iter()
                .map(|e| ("declarations", Error::from(TreeIngestError::Declaration(e)))),
        )
        .chain(
            ingest_samples()
                .into_iter()
                .map(|e| ("ingest", Error::from(e))),
        )
        .chain(
            copy_samples()
                .into_iter()
                .map(|e| (copy_from(&e), Error::from(e))),
        )
        .filter_map(|(from, e)| {
            let kind = e.error_kind();
            Some(TreeRule {
                rule: e.rule()?,
                kind: kind.name(),
                code: kind.exit_code(),
                message: named(crate::error::error_chain(&e)),
                from: vec![from],
            })
        });
    let stored = check_samples().into_iter().map(|e| TreeRule {
        rule: e.rule(),
        kind: ErrorKind::Integrity.name(),
        code: ErrorKind::Integrity.exit_code(),
        message: named(e.to_string()),
        from: vec!["stored"],
    });
    let mut out: Vec<TreeRule> = Vec::new();
    for r in refusals.chain(stored) {
        match out.iter_mut().find(|o| o.rule == r.rule) {
            Some(o) => {
                for from in r.from {
                    if !o.from.contains(&from) {
                        o.from.push(from);
                    }
                }
            }
            None => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each capture refusal's place among the samples: naming every
    /// variant, so that a new one fails to compile until it has a place,
    /// and [`capture_samples`] lists it there.
    fn capture_place(e: &CaptureError) -> usize {
        use CaptureError::*;
        match e {
            DirectoryUnreadable { .. } => 0,
            Symlink(_) => 1,
            PathUnavailable { .. } => 2,
            ParentNotDirectory(_) => 3,
            NotFileOrDirectory(_) => 4,
            Unopenable { .. } => 5,
            ChangedWhileOpening(_) => 6,
            DirectoryChanged(_) => 7,
            FileChanged(_) => 8,
            TotalBytes => 9,
            Entries => 10,
            PathBytes => 11,
            PathNotUtf8(_) => 12,
            Collide(_) => 13,
            SymlinkUnreadable(_) => 14,
            SymlinkNotRelative(_) => 15,
            SymlinkTooLong(_) => 16,
            SymlinkChanged(_) => 17,
            SymlinkEscapesWorkspace(_) => 18,
            SymlinkDangling(_) => 19,
            SymlinkEscapesRuntime(_) => 20,
            Os(_) => 21,
        }
    }

    /// Each declaration refusal's place among the samples.
    fn declaration_place(e: &DeclarationError) -> usize {
        use DeclarationError::*;
        match e {
            CopyNotAList => 0,
            CopyNotRelative(_) => 1,
            PathBytes => 2,
            CopyOverlap(..) => 3,
            DependenciesNotAList => 4,
            DependencyShape => 5,
            SourceOutside(_) => 6,
            TargetOutside(_) => 7,
            TargetsOverlap(..) => 8,
            BindingChanged => 9,
        }
    }

    /// Each tree ingest refusal's place: a capture's and a declaration's
    /// are sampled by their own lists.
    fn ingest_place(e: &TreeIngestError) -> Option<usize> {
        match e {
            TreeIngestError::Declaration(_) | TreeIngestError::Capture(_) => None,
            TreeIngestError::NotRealDirectory { .. } => Some(0),
            TreeIngestError::Input { .. } => Some(1),
            TreeIngestError::ManifestTooLarge { .. } => Some(2),
            TreeIngestError::NoHarnessRoot(_) => Some(3),
        }
    }

    /// Each stored check's place among the samples.
    fn check_place(e: &CheckError) -> usize {
        match e {
            CheckError::TooManyEntries { .. } => 0,
            CheckError::TooManyBytes { .. } => 1,
            CheckError::Path { .. } => 2,
            CheckError::Missing(_) => 3,
            CheckError::MemberMissing { .. } => 4,
            CheckError::MemberKind { .. } => 5,
        }
    }

    /// Each copy refusal's place among the samples.
    fn copy_place(e: &CopyError) -> usize {
        use CopyError::*;
        match e {
            FallbackLimit { .. } => 0,
            InvalidReflink { .. } => 1,
            ObjectChanged { .. } => 2,
            ChangedWhileCopying { .. } => 3,
            CloneNotADirectory { .. } => 4,
            CloneTraversesSymlink { .. } => 5,
            TargetSymlink(..) => 6,
            TargetSymlinkParent(..) => 7,
            TargetUnsupported(..) => 8,
            TargetParentUnsupported(..) => 9,
            TargetTraversesSymlink(..) => 10,
            Io { .. } => 11,
        }
    }

    /// The places of a sample list, which must be 0, 1, 2, ...: one sample
    /// a variant, in order.
    fn in_place<T>(samples: &[T], place: impl Fn(&T) -> Option<usize>) {
        let places: Vec<Option<usize>> = samples.iter().map(place).collect();
        let want: Vec<Option<usize>> = (0..samples.len()).map(Some).collect();
        assert_eq!(places, want);
    }

    /// The listed rule `id`, which must carry `from`.
    fn listed<'a>(report: &'a RulesReport, id: &str, from: &str) -> &'a TreeRule {
        let r = report
            .tree_rules
            .iter()
            .find(|r| r.rule == id)
            .unwrap_or_else(|| panic!("{id} ({from}) is not listed"));
        assert!(r.from.contains(&from), "{id}: {:?} lacks {from}", r.from);
        r
    }

    /// Every variant of every error the tree profile refuses with has a
    /// sample, and every rule id a sample carries is listed once, with the
    /// kind and exit code its error has.
    #[test]
    fn every_rule_of_the_tree_profile_is_listed_with_its_code() {
        let report = rules();
        let mut seen = std::collections::BTreeSet::new();
        for r in &report.tree_rules {
            assert!(seen.insert(r.rule), "{} listed twice", r.rule);
            for part in ["9000001", "[Errno", "Input/output"] {
                assert!(!r.message.contains(part), "{}: {}", r.rule, r.message);
            }
        }
        let check = |from: &str, e: Error| {
            let Some(id) = e.rule() else { return };
            let r = listed(&report, id, from);
            let kind = e.error_kind();
            assert_eq!((r.kind, r.code), (kind.name(), kind.exit_code()), "{id}");
        };
        let capture = capture_samples();
        in_place(&capture, |e| Some(capture_place(e)));
        for e in capture {
            check("capture", TreeIngestError::Capture(e).into());
        }
        let declarations = declaration_samples();
        in_place(&declarations, |e| Some(declaration_place(e)));
        for e in declarations {
            check("declarations", TreeIngestError::Declaration(e).into());
        }
        let ingest = ingest_samples();
        in_place(&ingest, ingest_place);
        for e in ingest {
            check("ingest", e.into());
        }
        let copies = copy_samples();
        in_place(&copies, |e| Some(copy_place(e)));
        for e in copies {
            check(copy_from(&e), e.into());
        }
        let stored = check_samples();
        in_place(&stored, |e| Some(check_place(e)));
        for e in stored {
            let r = listed(&report, e.rule(), "stored");
            assert_eq!((r.kind, r.code), ("integrity", 1), "{}", r.rule);
        }
    }

    /// A few rules as the harness and the store refuse them.
    #[test]
    fn tree_rules_carry_their_words_and_codes() {
        let report = rules();
        let get = |id: &str| {
            report
                .tree_rules
                .iter()
                .find(|r| r.rule == id)
                .map(|r| (r.kind, r.code, r.message.as_str(), r.from.clone()))
        };
        assert_eq!(
            get("task-asset-symlink"),
            Some((
                "rejected",
                3,
                "sandbox_copy must not traverse a symlink: {path}",
                vec!["capture"]
            ))
        );
        assert_eq!(
            get("task-asset-path-bytes").map(|r| r.3),
            Some(vec!["capture", "declarations"])
        );
        assert_eq!(
            get("task-asset-directory-unreadable").map(|r| r.2),
            Some("sandbox_copy directory is unreadable: {path}: {os error}")
        );
        assert_eq!(
            get("task-asset-snapshot-changed").map(|r| (r.0, r.1)),
            Some(("integrity", 1))
        );
        assert_eq!(
            get("task-asset-fallback-limit").map(|r| (r.1, r.2)),
            Some((
                3,
                "task asset filesystem cannot reflink the snapshot and the buffered fallback limit would be exceeded"
            ))
        );
        assert_eq!(
            get("tree-manifest-entries").map(|r| r.2),
            Some("could not accept the {kind} manifest: {count} entries, more than 100000")
        );
        // The store's own failures carry no rule: not listed.
        assert_eq!(get("task-asset-io").map(|r| r.3), Some(vec!["capture"]));
        assert_eq!(
            report.rules.len(),
            34 + 18,
            "the CE and GitNexus rules as they were"
        );
    }
}
