//! The misuse table: every request its options do not fit, with its message
//! as the library words it, as the command line words it (naming its flags),
//! and the hint the command line prints after it; and the flags the Python
//! package's keyword arguments stand for.
//!
//! The library speaks of options ([`Misuse`]'s `Display`); the command line
//! speaks of flags ([`Misuse::flagged`]), and a Python caller of keyword
//! arguments ([`FLAG_KEYWORDS`], which `cestore rules` prints). All three are
//! decided here, once.

use std::path::{Path, PathBuf};

use crate::digest::ManifestDigest;
use crate::error::ErrorKind;

/// A request its options do not fit: they cannot go together, hold a
/// malformed value, or lack the one the case calls for.
///
/// The messages speak of the options as the library knows them; the command
/// line words them with its flags ([`Misuse::flagged`]). Most are usage
/// errors; [`Misuse::kind`] gives each its place in the table.
#[derive(Debug, thiserror::Error)]
pub enum Misuse {
    /// The digest a bundle must hold is not a full digest.
    #[error("the digest the bundle must hold is not a full 64-hex digest: {reason}")]
    ExpectedDigest {
        /// What is wrong with it.
        reason: String,
    },
    /// Hard links were required of a method that makes copies.
    #[error("hard links cannot be required of the {method} method")]
    HardlinksWithMethod {
        /// The method's name.
        method: &'static str,
    },
    /// A GitNexus version was given with upstream's rules, which pin none.
    #[error(
        "a GitNexus version pins the seed's rules; upstream's rules accept any non-empty version"
    )]
    VersionWithUpstreamRules,
    /// A field of the results rows is empty, or has an empty key in its path.
    #[error("the {field} field '{path}': a field is a key or a dotted path of keys (ce_plugin.manifest_digest), with no empty key")]
    FieldWithEmptyKey {
        /// Which field.
        field: RowField,
        /// Its path as given.
        path: String,
    },
    /// A field of the results rows is, holds or lies inside another.
    #[error("the {field} field '{path}' is, holds or lies inside another field ({}); the three fields must be distinct and not nested in each other", fields(.others))]
    FieldsOverlap {
        /// Which field.
        field: RowField,
        /// Its path as given.
        path: String,
        /// The other two fields, with their paths.
        others: Vec<(RowField, String)>,
    },
    /// A digest field added to an audit's field table breaks its rule.
    #[error("the digest field '{spec}': {why}; {}", FIELD_SPEC_RULE)]
    FieldSpec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        why: String,
    },
    /// No store was named, and the environment names none.
    #[error("no store given: name one, or set CESTORE_DIR, XDG_DATA_HOME or HOME")]
    NoStoreGiven,
    /// A content to find is not named by a SHA-256 or a prefix of one.
    #[error("a content is named by its SHA-256 or a unique prefix of it: {reason}")]
    ObjectPrefix {
        /// What is wrong with the name.
        reason: String,
    },
    /// The registry an audit pulls from names a tag or digest, or no
    /// repository: the audit adds each digest's tag itself.
    #[error("the registry '{registry}' to pull from must be REGISTRY/REPOSITORY, without a tag or digest (audit pulls REGISTRY/REPOSITORY:sha256-DIGEST)")]
    RegistryNotRepository {
        /// The registry as given.
        registry: String,
    },
    /// The store is owned by another user or writable by others, and such
    /// stores were not to be trusted.
    #[error("the store '{}' {why}; whoever can write there decides what every view shows. If you trust it, trust any store or set CESTORE_TRUST_STORE=1", .path.display())]
    UntrustedStore {
        /// The directory refused (the store, or its objects directory).
        path: PathBuf,
        /// Who else owns or can write it, as a predicate: `is owned by …`.
        why: String,
    },
    /// A directory to discard is no recorded view, and no snapshot was named
    /// to check it against.
    #[error("'{}' is not a recorded view; to remove a tree that is exactly a snapshot, force the discard with the snapshot's digest", .path.display())]
    NotARecordedView {
        /// The directory, absolute.
        path: PathBuf,
    },
    /// A directory to mount is no view cestore recorded, and it was not to be
    /// mounted unchecked.
    #[error("'{}' is not a view cestore recorded; make one with `cestore checkout` or `cestore path`, or mount it unchecked to mount a tree cestore did not make", .path.display())]
    NotAView {
        /// The directory, absolute.
        path: PathBuf,
    },
    /// A view is of another snapshot than the one it was expected to be of.
    #[error("'{}' is a view of {digest}, not of {expected}, the snapshot expected", .path.display())]
    ViewOfAnother {
        /// The view.
        path: PathBuf,
        /// The snapshot it is a view of.
        digest: ManifestDigest,
        /// The snapshot it was expected to be of.
        expected: ManifestDigest,
    },
    /// A snapshot to forget has recorded views, and was not to be forgotten
    /// with them.
    #[error("{digest} has {} recorded {} ({}); discard {} first, or force the removal", .views.len(), if .views.len() == 1 { "view" } else { "views" }, .views.join(", "), if .views.len() == 1 { "it" } else { "them" })]
    SnapshotHasViews {
        /// The snapshot.
        digest: ManifestDigest,
        /// Its recorded views.
        views: Vec<String>,
    },
    /// A snapshot a recorded task or environment names is to be forgotten
    /// (a task's tree or dependency list, an environment's member): it
    /// would name what the store no longer holds.
    #[error("{digest} is named by {} recorded {} ({}); remove {} first", .tasks.len(), plural(.noun, .tasks.len()), tasks_list(.tasks), if .tasks.len() == 1 { "it" } else { "them" })]
    SnapshotNamedByTask {
        /// The snapshot.
        digest: ManifestDigest,
        /// The tasks (or environments) that name it.
        tasks: Vec<ManifestDigest>,
        /// What they are: `task`, `environment`, or `snapshot` when both.
        noun: &'static str,
    },
    /// A view of an environment was asked for: it holds no file, its
    /// members have views of their own.
    #[error("could not make a view of {digest}: an environment holds no file; make a view of each member it names (`cestore show {digest}` lists them)")]
    EnvironmentHasNoView {
        /// The environment.
        digest: ManifestDigest,
    },
}

/// `noun`, with an `s` unless `n` is 1.
fn plural(noun: &str, n: usize) -> String {
    if n == 1 {
        noun.to_string()
    } else {
        format!("{noun}s")
    }
}

/// Digests as a comma-separated list.
fn tasks_list(tasks: &[ManifestDigest]) -> String {
    tasks
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Misuse {
    /// The kind of this misuse: a usage error, unless the request named
    /// something that is not there, or not what was expected, or that stands
    /// in the way.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Misuse::NotARecordedView { .. } | Misuse::NotAView { .. } => ErrorKind::NotFound,
            Misuse::ViewOfAnother { .. } => ErrorKind::Integrity,
            Misuse::SnapshotHasViews { .. } | Misuse::SnapshotNamedByTask { .. } => {
                ErrorKind::Conflict
            }
            Misuse::UntrustedStore { .. } => ErrorKind::BadStore,
            Misuse::ExpectedDigest { .. }
            | Misuse::HardlinksWithMethod { .. }
            | Misuse::VersionWithUpstreamRules
            | Misuse::FieldWithEmptyKey { .. }
            | Misuse::FieldsOverlap { .. }
            | Misuse::FieldSpec { .. }
            | Misuse::NoStoreGiven
            | Misuse::ObjectPrefix { .. }
            | Misuse::RegistryNotRepository { .. }
            | Misuse::EnvironmentHasNoView { .. } => ErrorKind::Usage,
        }
    }

    /// The one path the misuse concerns, when the error reports one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Misuse::NotARecordedView { path }
            | Misuse::NotAView { path }
            | Misuse::UntrustedStore { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// What a digest field added to an audit's field table must be.
pub const FIELD_SPEC_RULE: &str = "a digest field is NAME=KIND, NAME a key or a dotted path of \
     keys with no empty key, KIND one of ce, tree, dependencies, task, dependencies-content";

/// A field of the results rows an audit reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowField {
    /// The snapshot's digest.
    Digest,
    /// The plugin's version.
    Version,
    /// The arm.
    Arm,
}

impl std::fmt::Display for RowField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RowField::Digest => "digest",
            RowField::Version => "version",
            RowField::Arm => "arm",
        })
    }
}

/// Fields with their paths, as a list: `the version field 'v', the arm field 'a'`.
fn fields(named: &[(RowField, String)]) -> String {
    named
        .iter()
        .map(|(f, p)| format!("the {f} field '{p}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Misuse {
    /// The misuse's message as the command line gives it: the options named
    /// by their flags.
    pub fn flagged(&self) -> String {
        match self {
            Misuse::ExpectedDigest { reason } => {
                format!("--digest takes a full 64-hex digest: {reason}")
            }
            Misuse::HardlinksWithMethod { method } => {
                format!("--require-hardlinks cannot be met with --method {method}")
            }
            Misuse::ObjectPrefix { reason } => {
                format!("--object takes a SHA-256 or a unique prefix: {reason}")
            }
            Misuse::RegistryNotRepository { registry } => format!(
                "--registry '{registry}': give REGISTRY/REPOSITORY, without a tag or digest \
                 (audit pulls REGISTRY/REPOSITORY:sha256-DIGEST)"
            ),
            Misuse::VersionWithUpstreamRules => "--gitnexus-version pins the seed's rules; \
                 --gitnexus-rules upstream accepts any non-empty version"
                .into(),
            Misuse::FieldWithEmptyKey { field, path } => format!(
                "{} '{path}': a field is a key or a dotted path of keys \
                 (ce_plugin.manifest_digest), with no empty key",
                field.flag()
            ),
            Misuse::FieldsOverlap {
                field,
                path,
                others,
            } => {
                let others: Vec<String> = others
                    .iter()
                    .map(|(f, p)| format!("{} '{p}'", f.flag()))
                    .collect();
                format!(
                    "{} '{path}' is, holds or lies inside another field ({}); \
                     the three fields must be distinct and not nested in each other",
                    field.flag(),
                    others.join(", ")
                )
            }
            Misuse::FieldSpec { spec, why } => {
                format!("--field '{spec}': {why}; {}", FIELD_SPEC_RULE)
            }
            Misuse::NoStoreGiven => {
                "no store given: pass --store, or set CESTORE_DIR, XDG_DATA_HOME or HOME".into()
            }
            Misuse::UntrustedStore { path, why } => format!(
                "the store '{}' {why}; whoever can write there decides what every view shows. \
                 If you trust it, pass --trust-store or set CESTORE_TRUST_STORE=1",
                path.display()
            ),
            Misuse::NotARecordedView { path } => format!(
                "'{}' is not a recorded view; to remove a tree that is exactly a snapshot, \
                 pass --force DIGEST",
                path.display()
            ),
            Misuse::NotAView { path } => format!(
                "'{}' is not a view cestore recorded; make one with `cestore checkout` \
                 or `cestore path`, or pass --unchecked to mount a tree cestore did not make",
                path.display()
            ),
            Misuse::ViewOfAnother {
                path,
                digest,
                expected,
            } => format!(
                "'{}' is a view of {digest}, not of {expected} as --digest expects",
                path.display()
            ),
            Misuse::SnapshotHasViews { digest, views } => {
                let (noun, them) = if views.len() == 1 {
                    ("view", "it")
                } else {
                    ("views", "them")
                };
                format!(
                    "{digest} has {} recorded {noun} ({}); discard {them} first, or pass --force",
                    views.len(),
                    views.join(", ")
                )
            }
            named @ (Misuse::SnapshotNamedByTask { .. } | Misuse::EnvironmentHasNoView { .. }) => {
                named.to_string()
            }
        }
    }

    /// The next step the command line prints after the misuse (`hint: ...`,
    /// and the JSON error's `hint`), when it knows one; `shell_word` quotes
    /// a path as a word of a shell command.
    pub fn hint(&self, shell_word: fn(&str) -> String) -> Option<String> {
        match self {
            Misuse::SnapshotHasViews { digest, views } => {
                let discards: Vec<String> = views
                    .iter()
                    .map(|v| format!("`cestore discard {}`", shell_word(v)))
                    .collect();
                let (verb, them) = if views.len() == 1 {
                    ("removes", "it")
                } else {
                    ("remove", "them")
                };
                Some(format!(
                    "{} {verb} {them}; then `cestore rm {digest}` forgets the snapshot \
                     (its shared view, if any, goes with it, and `cestore gc` removes that)",
                    discards.join(" and ")
                ))
            }
            Misuse::SnapshotNamedByTask { tasks, noun, .. } => Some(format!(
                "`cestore rm {}` forgets the {} first",
                tasks_list(tasks).replace(", ", " "),
                plural(noun, tasks.len())
            )),
            _ => None,
        }
    }
}

impl RowField {
    /// The flag that names this field of the results rows `audit` reads.
    pub fn flag(self) -> &'static str {
        match self {
            RowField::Digest => "--digest-field",
            RowField::Version => "--version-field",
            RowField::Arm => "--arm-field",
        }
    }
}

/// Each flag the Python package passes for a keyword argument of its API
/// (`cestore.Store`), with the keyword (or `Bounds` field) a message about
/// the flag names it by for a Python caller. `cestore rules` prints it.
pub const FLAG_KEYWORDS: [(&str, &str); 23] = [
    ("--arm", "arms"),
    ("--plugin-dir", "plugin_dir"),
    ("--plugin-version", "plugin_version"),
    ("--digest", "digest"),
    ("--dest", "dest"),
    ("--gitnexus-root", "gitnexus_root"),
    ("--gitnexus-rules", "gitnexus_rules"),
    ("--strict-arms", "strict_arms"),
    ("--version", "version"),
    ("--method", "method"),
    ("--tree", "tree"),
    ("--spare", "spare"),
    ("--git", "git"),
    ("--rev", "rev"),
    ("--plugin", "plugin"),
    ("--subdir", "subdir"),
    ("--sign-with", "sign_with"),
    ("--key", "key"),
    ("--trusted-key", "trusted_keys"),
    ("--max-files", "Bounds(files=...)"),
    ("--max-file-bytes", "Bounds(file_bytes=...)"),
    ("--max-total-bytes", "Bounds(total_bytes=...)"),
    ("--max-path-bytes", "Bounds(path_bytes=...)"),
];
