//! The library's error type, and the kind each error is of.
//!
//! A failure's kind decides both its exit code and the `kind` of its JSON
//! error object. [`ErrorKind`] (in [`kind`]) is the one table of both;
//! `cestore exit-codes` prints it, and `docs/exit-codes.md` (which says what
//! each code means) and the Python package's exceptions are checked against
//! it. [`Error::error_kind`] places each variant in it.
//!
//! A held stage (`stage --hold`) ended by SIGHUP, SIGINT or SIGTERM exits
//! 128 + the signal's number (129, 130, 143): not an error, but its release
//! report's code (the release report of `stage --hold`).
//!
//! Error types of the modules above this one (a remote's, the GitNexus
//! runtime's rules, an adoption's, a git source's) reach [`Error`] as a [`Classified`], which
//! carries them by the [`Classify`] trait: this module names none of their
//! types, so it sits below every module that returns an [`Error`].

use std::io;
use std::path::{Path, PathBuf};

use crate::digest::{ManifestDigest, ObjectId};
use crate::profile::ce::rules::Rejection;

pub mod ambiguity;
pub mod faults;
pub mod kind;
pub mod misuse;

pub use ambiguity::Candidate;
pub use faults::{Clash, Damage, Request};
pub use kind::{Classify, ErrorKind};
pub use misuse::{Misuse, RowField};

/// Anything a cestore command can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input broke one of the reference's rules.
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// The GitNexus runtime or the arm's mounts broke one of the reference's
    /// rules: a `GitNexusError`, from the `gitnexus` module.
    #[error(transparent)]
    GitNexus(Classified),
    /// A task's declarations or captured trees broke one of the benchmark
    /// harness's rules: a `TreeIngestError`, from the store's tree ingest;
    /// or a writable copy or a materialize was refused by them: a
    /// `CopyError`, from the store's views.
    #[error(transparent)]
    Tree(Classified),
    /// A release could not be read from git, besides the rules it breaks: a
    /// `GitError`, from the `source` module.
    #[error(transparent)]
    Git(Classified),
    /// A key could not be made or used: a `SignError`, from the `sign` module.
    #[error(transparent)]
    Sign(Classified),
    /// No attestation vouches for a snapshot under a key trusted.
    #[error("could not trust the snapshot {digest}: {why}")]
    Untrusted {
        /// The snapshot.
        digest: crate::digest::ManifestDigest,
        /// Why each attestation, or the lack of one, does not vouch for it.
        why: String,
    },
    /// The request is malformed in a way the argument parser cannot see.
    #[error("{0}")]
    Usage(String),
    /// A request the argument parser lets through but the command refuses.
    #[error(transparent)]
    Request(#[from] Request),
    /// The store's content is damaged or cannot be handed out.
    #[error(transparent)]
    Damage(#[from] Damage),
    /// The request would overwrite or orphan something.
    #[error(transparent)]
    Clash(#[from] Clash),
    /// No snapshot answers to the name: no digest starts with the prefix, or
    /// no snapshot has the `@VERSION`.
    #[error("no snapshot in the store matches '{prefix}'")]
    UnknownDigest {
        /// The name as given.
        prefix: String,
    },
    /// No snapshot has the version an `@VERSION` names.
    #[error("{}", ambiguity::versions_message(.version, .versions))]
    UnknownVersion {
        /// The version, without its `@`.
        version: String,
        /// Every version the store holds, oldest snapshot first, once each.
        versions: Vec<String>,
    },
    /// Several snapshots answer to the name: their digests start with the
    /// prefix, or they have the `@VERSION`.
    #[error("{}", ambiguity::snapshots_message(.name, .matches))]
    AmbiguousDigest {
        /// The name as given: a prefix or `@VERSION`.
        name: String,
        /// The snapshots it matches.
        matches: Vec<Candidate>,
    },
    /// Several stored contents' SHA-256s start with the prefix.
    #[error("{}", ambiguity::contents_message(.prefix, .matches))]
    AmbiguousObject {
        /// The prefix as given.
        prefix: String,
        /// The contents it matches.
        matches: Vec<ObjectId>,
    },
    /// The store directory does not exist (and the command does not create one).
    #[error("store not found: '{}'", .path.display())]
    StoreNotFound {
        /// The store directory looked for.
        path: PathBuf,
    },
    /// The store may be read but not written: the command must record
    /// something in it (an ingest, a view).
    #[error("could not write to the store '{}'", .path.display())]
    StoreNotWritable {
        /// The store directory.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// A tree to audit is not a directory.
    #[error("'{}' is not a directory; give the path of a view or tree", .path.display())]
    NotATree {
        /// The path given, absolute.
        path: PathBuf,
    },
    /// Something named on the command line does not exist.
    #[error("{what} not found: '{}'", .path.display())]
    NotFound {
        /// What kind of thing was looked for.
        what: &'static str,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A path named on the command line is not what the command needs: the
    /// message is a sentence naming it and the next step.
    #[error("{message}")]
    Absent {
        /// The path looked at.
        path: PathBuf,
        /// What is missing there, and what to do.
        message: String,
    },
    /// A request its options do not fit: they cannot go together, hold a
    /// malformed value, or lack the one the case calls for.
    #[error(transparent)]
    Misuse(#[from] Misuse),
    /// The request would overwrite or orphan something.
    #[error("{0}")]
    Conflict(String),
    /// Something is already at the path a view or a bundle was to be made at.
    #[error("{}", exists_message(*.made, .path))]
    Exists {
        /// What was to be made there.
        made: Made,
        /// The path, absolute.
        path: PathBuf,
        /// The snapshot whose recorded view is there, when it is one.
        view_of: Option<ManifestDigest>,
    },
    /// A view was to be made inside the store.
    #[error("the destination '{}' lies inside the store '{}'; use `cestore path` for a view inside the store", .path.display(), .store.display())]
    InsideStore {
        /// The view's destination.
        path: PathBuf,
        /// The store, resolved.
        store: PathBuf,
    },
    /// The store lies inside the release it was to store.
    #[error("the store '{}' lies inside the source '{}'; it would be ingested into itself", .path.display(), .source_dir.display())]
    StoreInsideSource {
        /// The store, resolved.
        path: PathBuf,
        /// The release's source directory.
        source_dir: PathBuf,
    },
    /// The store's content no longer matches its catalogue.
    #[error("{0}")]
    Integrity(String),
    /// A manifest file of the store is damaged: its bytes are not a
    /// manifest, or not the one its name says.
    #[error("the manifest '{}' {problem}", .path.display())]
    DamagedManifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong with it, as a predicate: `is damaged: …`, `hashes to …`.
        problem: String,
    },
    /// Received data (a pull, an import) cannot become a snapshot: an
    /// `AdoptError`, from the store's `adopt` module.
    #[error(transparent)]
    Adopt(Classified),
    /// A filesystem operation failed.
    #[error("could not {op} '{}'", .path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// A catalogue operation failed.
    #[error("could not {op} in the catalogue '{}'{}", .path.display(), recover_hint(.source))]
    Catalogue {
        /// What was being done.
        op: &'static str,
        /// The catalogue file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// The catalogue was written by a newer cestore.
    #[error("the catalogue '{}' has schema version {found}, newer than this cestore's {supported}; it is left untouched", .path.display())]
    CatalogueTooNew {
        /// The catalogue file.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// The newest this build knows.
        supported: i64,
    },
    /// The catalogue is missing, empty or unreadable, but the store holds
    /// objects or manifests: using it would forget what the store holds.
    #[error("the catalogue '{}' {reason}, but the store holds objects or manifests; nothing was changed. `cestore recover` rebuilds the catalogue from the manifests in the store", .path.display())]
    CatalogueLost {
        /// The catalogue file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A remote (registry) failed, refused, or answered something unusable:
    /// a `RemoteError`, from the `remote` module.
    #[error(transparent)]
    Remote(Classified),
    /// A stored snapshot cannot leave the store as it is (a push's or an
    /// export's checks: an `OutgoingError`, from `remote::preflight`), or a
    /// bundle is damaged or no bundle (a `BundleError`, from `bundle`).
    #[error(transparent)]
    Transfer(Classified),
    /// The store directory is not usable as a store.
    #[error("the store '{}' {reason}", .path.display())]
    BadStore {
        /// The store directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An error of a release read from git, with where in the repository it
    /// lies: its kind, rule and path are the error's own.
    #[error("{}; {at}", error_chain(.error))]
    InRevision {
        /// The error.
        error: Box<Error>,
        /// The revision, its commit and the path inside it, in words.
        at: String,
    },
}

/// For a catalogue SQLite finds damaged, the command that rebuilds it.
fn recover_hint(e: &rusqlite::Error) -> &'static str {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
            " (the catalogue is damaged; `cestore recover` rebuilds it from the manifests in the store)"
        }
        _ => "",
    }
}

/// A library result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The kind of this error: its place in the table, which gives its exit
    /// code and its JSON name.
    ///
    /// A rule's refusal of a directory named on the command line (a release
    /// source, a GitNexus harness root) only because it does not exist is
    /// [`ErrorKind::NotFound`], though the JSON still names the rule.
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            Error::Integrity(_)
            | Error::Damage(_)
            | Error::DamagedManifest { .. }
            | Error::Adopt(_) => ErrorKind::Integrity,
            Error::Misuse(m) => m.kind(),
            Error::Usage(_) | Error::NotATree { .. } | Error::Request(_) => ErrorKind::Usage,
            Error::Rejected(Rejection::SourceUnavailable { source, .. }) if is_missing(source) => {
                ErrorKind::NotFound
            }
            Error::Rejected(_) => ErrorKind::Rejected,
            Error::GitNexus(c)
            | Error::Tree(c)
            | Error::Remote(c)
            | Error::Transfer(c)
            | Error::Git(c)
            | Error::Sign(c) => c.kind(),
            Error::Untrusted { .. } => ErrorKind::Untrusted,
            Error::UnknownDigest { .. } | Error::UnknownVersion { .. } => ErrorKind::UnknownDigest,
            Error::NotFound { .. } | Error::Absent { .. } | Error::StoreNotFound { .. } => {
                ErrorKind::NotFound
            }
            Error::AmbiguousDigest { .. } | Error::AmbiguousObject { .. } => {
                ErrorKind::AmbiguousDigest
            }
            Error::Conflict(_)
            | Error::Clash(_)
            | Error::Exists { .. }
            | Error::InsideStore { .. }
            | Error::StoreInsideSource { .. } => ErrorKind::Conflict,
            Error::Io { .. } | Error::StoreNotWritable { .. } => ErrorKind::Io,
            Error::Catalogue { .. } => ErrorKind::Catalogue,
            Error::CatalogueTooNew { .. } => ErrorKind::CatalogueTooNew,
            Error::CatalogueLost { .. } => ErrorKind::CatalogueLost,
            Error::BadStore { .. } => ErrorKind::BadStore,
            Error::InRevision { error, .. } => error.error_kind(),
        }
    }

    /// This error of a release read from git at the revision `rev` (its
    /// commit `commit`, when known) of the repository at `repo`: its message
    /// then names them and the path inside the revision, which names the
    /// place a checkout at `repo` would give it (no file in a bare
    /// repository).
    pub fn in_revision(self, repo: &Path, rev: &str, commit: Option<String>) -> Error {
        if matches!(self, Error::InRevision { .. }) {
            return self;
        }
        let commit = commit.map(|c| format!(" (commit {c})")).unwrap_or_default();
        let inside = self
            .path()
            .and_then(|p| p.strip_prefix(repo).ok())
            .map(|rel| format!(", at '{}' inside it", rel.display()))
            .unwrap_or_default();
        let at = format!(
            "read from the revision '{rev}'{commit} of '{}'{inside}",
            repo.display()
        );
        Error::InRevision {
            error: Box::new(self),
            at,
        }
    }

    /// The process exit code for this error (see the module docs).
    pub fn exit_code(&self) -> u8 {
        self.error_kind().exit_code()
    }

    /// A stable name for the kind of error, for JSON output.
    pub fn kind(&self) -> &'static str {
        self.error_kind().name()
    }

    /// The stable identifier of the rule broken, when a rule was.
    pub fn rule(&self) -> Option<&'static str> {
        match self {
            Error::Rejected(r) => Some(r.rule()),
            Error::GitNexus(c)
            | Error::Tree(c)
            | Error::Remote(c)
            | Error::Transfer(c)
            | Error::Adopt(c)
            | Error::Git(c)
            | Error::Sign(c) => c.rule(),
            Error::InRevision { error, .. } => error.rule(),
            _ => None,
        }
    }

    /// The one path the error concerns, when there is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Error::Rejected(r) => r.path(),
            Error::GitNexus(c)
            | Error::Tree(c)
            | Error::Remote(c)
            | Error::Transfer(c)
            | Error::Adopt(c)
            | Error::Git(c)
            | Error::Sign(c) => c.path(),
            Error::Misuse(m) => m.path(),
            Error::Io { path, .. }
            | Error::NotFound { path, .. }
            | Error::Absent { path, .. }
            | Error::Exists { path, .. }
            | Error::InsideStore { path, .. }
            | Error::StoreInsideSource { path, .. }
            | Error::StoreNotFound { path }
            | Error::StoreNotWritable { path, .. }
            | Error::NotATree { path }
            | Error::DamagedManifest { path, .. }
            | Error::Catalogue { path, .. }
            | Error::CatalogueTooNew { path, .. }
            | Error::BadStore { path, .. } => Some(path),
            Error::InRevision { error, .. } => error.path(),
            _ => None,
        }
    }

    /// The error a bus error (SIGBUS) stands for: a memory-mapped file of the
    /// store at `store` that the filesystem could not back, as on a full disk.
    pub fn bus_error(store: PathBuf) -> Error {
        Error::io(
            "write a memory-mapped file (the system sent SIGBUS) of the store",
            store,
            io::Error::from(io::ErrorKind::StorageFull),
        )
    }

    /// Wraps an I/O error with the operation and path it came from.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: impl Into<io::Error>) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source: source.into(),
        }
    }
}

/// Whether an I/O error says a path does not exist.
fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// An error of a module above this one, carried by what [`Classify`] tells
/// of it: its kind, its rule and its path. [`Classified::downcast_ref`] gives
/// back its own type.
#[derive(Debug)]
pub struct Classified(Box<dyn Classify>);

impl Classified {
    /// Carries an error.
    pub fn new(err: impl Classify) -> Classified {
        Classified(Box::new(err))
    }

    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind()
    }

    /// The rule it breaks, when it breaks one.
    pub fn rule(&self) -> Option<&'static str> {
        self.0.rule()
    }

    /// The one path it concerns, when there is one.
    pub fn path(&self) -> Option<&Path> {
        self.0.path()
    }

    /// The error as its own type, when it is a `T`.
    pub fn downcast_ref<T: Classify>(&self) -> Option<&T> {
        self.0.as_error().downcast_ref()
    }
}

impl std::fmt::Display for Classified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Classified {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// What a command was making at a path it found taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Made {
    /// A view (checkout, stage).
    View,
    /// A bundle (export).
    Bundle,
}

fn exists_message(made: Made, path: &Path) -> String {
    match made {
        Made::View => format!(
            "the destination '{}' already exists; a view is only made at a new path",
            path.display()
        ),
        Made::Bundle => format!("the bundle '{}' already exists", path.display()),
    }
}

/// Adds "could not {op} '{path}'" context to I/O results.
pub trait IoContext<T> {
    /// Maps the error to [`Error::Io`].
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T, E: Into<io::Error>> IoContext<T> for std::result::Result<T, E> {
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|e| Error::io(op, path, e))
    }
}

/// An error and its sources, joined by ": ".
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut s = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !s.ends_with(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = e.source();
    }
    s
}

/// Text from outside (a registry's answer, a bundle's bytes) as a message
/// may quote it: every control character and every byte that was not
/// UTF-8 shown as `?`, so that it stays on one line and writes no escape
/// sequence to a terminal.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || c == '\u{fffd}' {
                '?'
            } else {
                c
            }
        })
        .collect()
}

/// A count and its noun in the number the count calls for: `1 file`, `2 files`.
pub fn counted(n: impl std::fmt::Display, one: &str, many: &str) -> String {
    let n = n.to_string();
    let noun = if n == "1" { one } else { many };
    format!("{n} {noun}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library speaks of options, not of the command line's flags.
    #[test]
    fn a_misuse_names_no_flag() {
        for m in [
            Misuse::ExpectedDigest {
                reason: "too short".into(),
            },
            Misuse::HardlinksWithMethod { method: "copy" },
            Misuse::VersionWithUpstreamRules,
            Misuse::FieldWithEmptyKey {
                field: RowField::Version,
                path: "a..b".into(),
            },
            Misuse::FieldsOverlap {
                field: RowField::Digest,
                path: "a".into(),
                others: vec![
                    (RowField::Version, "a.b".into()),
                    (RowField::Arm, "c".into()),
                ],
            },
            Misuse::FieldSpec {
                spec: "x".into(),
                why: "it has no '='".into(),
            },
            Misuse::NoStoreGiven,
            Misuse::RegistryNotRepository {
                registry: "r.example/repo:tag".into(),
            },
            Misuse::ObjectPrefix {
                reason: "'xyz' is not hexadecimal".into(),
            },
        ] {
            let e = Error::from(m);
            assert!(!e.to_string().contains("--"), "{e}");
            assert_eq!(e.error_kind(), ErrorKind::Usage);
            assert_eq!(e.path(), None);
        }
        let digest: ManifestDigest = "ab".repeat(32).parse().unwrap();
        let expected: ManifestDigest = "cd".repeat(32).parse().unwrap();
        for (m, kind, path) in [
            (
                Misuse::NotARecordedView { path: "/v".into() },
                ErrorKind::NotFound,
                Some("/v"),
            ),
            (
                Misuse::NotAView { path: "/v".into() },
                ErrorKind::NotFound,
                Some("/v"),
            ),
            (
                Misuse::UntrustedStore {
                    path: "/s".into(),
                    why: "is writable by others (mode 0777)".into(),
                },
                ErrorKind::BadStore,
                Some("/s"),
            ),
            (
                Misuse::ViewOfAnother {
                    path: "/v".into(),
                    digest,
                    expected,
                },
                ErrorKind::Integrity,
                None,
            ),
            (
                Misuse::SnapshotHasViews {
                    digest,
                    views: vec!["/v".into()],
                },
                ErrorKind::Conflict,
                None,
            ),
        ] {
            let e = Error::from(m);
            assert!(!e.to_string().contains("--"), "{e}");
            assert_eq!(e.error_kind(), kind, "{e}");
            assert_eq!(e.path(), path.map(Path::new), "{e}");
        }
    }

    /// Nor do the rules that refuse a stage's arms and plugin inputs.
    #[test]
    fn an_arm_rule_names_no_flag() {
        for r in [
            Rejection::PluginInputsWithoutCeArm,
            Rejection::UnknownArm {
                arm: "x".into(),
                closest: Some("ce_review".into()),
            },
            Rejection::CeArmWithoutPluginInputs,
        ] {
            let e = Error::from(r);
            assert!(!e.to_string().contains("--"), "{e}");
            assert_eq!(e.error_kind(), ErrorKind::Rejected);
        }
    }

    #[test]
    fn a_conflict_at_one_path_names_it() {
        let e = Error::Exists {
            made: Made::Bundle,
            path: "/b.tar".into(),
            view_of: None,
        };
        assert_eq!(e.to_string(), "the bundle '/b.tar' already exists");
        assert_eq!(e.path(), Some(Path::new("/b.tar")));
        assert_eq!(e.exit_code(), 6);
    }
}
