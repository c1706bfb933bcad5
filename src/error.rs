//! The library's error type and the exit code each kind of error maps to.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | integrity: damage or a mismatch (a damaged object or bundle, a file that is not a bundle, a view of another snapshot); `verify` or `audit` found a problem |
//! | 2 | usage: the command line is wrong |
//! | 3 | rejected input: the tree, version, arms or GitNexus runtime break a rule |
//! | 4 | not found: no such snapshot, view, store or path; a directory named on the command line that does not exist, even where a rule checks it |
//! | 5 | ambiguous: a digest prefix names several snapshots (or contents) |
//! | 6 | conflict: the destination exists, or views still use a snapshot |
//! | 7 | store failure: I/O, the catalogue, or the store's own layout |
//! | 8 | remote failure: a registry could not be reached, refused the credentials, or answered something unusable |
//!
//! A held stage (`stage --hold`) ended by SIGHUP, SIGINT or SIGTERM exits
//! 128 + the signal's number (129, 130, 143): not an error, but its release
//! report's code (`cmd::stage::ReleaseReport`).
//!
//! The table is repeated in `docs/exit-codes.md`.

use std::io;
use std::path::PathBuf;

use crate::policy::Rejection;

/// Anything a cestore command can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input broke one of the reference's rules.
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// The GitNexus runtime or the arm's mounts broke one of the reference's rules.
    #[error(transparent)]
    GitNexus(#[from] crate::gitnexus::GitNexusError),
    /// The request is malformed in a way the argument parser cannot see.
    #[error("{0}")]
    Usage(String),
    /// No snapshot's digest starts with the prefix.
    #[error("no snapshot in the store matches '{prefix}'")]
    UnknownDigest {
        /// The prefix as given.
        prefix: String,
    },
    /// Several snapshots' digests (or stored contents' SHA-256s) start with the prefix.
    #[error("'{prefix}' is ambiguous: it matches {} digests ({}); give more of the digest", .matches.len(), .matches.join(", "))]
    AmbiguousDigest {
        /// The prefix as given.
        prefix: String,
        /// The digests it matches.
        matches: Vec<String>,
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
    /// The request would overwrite or orphan something.
    #[error("{0}")]
    Conflict(String),
    /// The store's content no longer matches its catalogue.
    #[error("{0}")]
    Integrity(String),
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
    /// A remote (registry) failed, refused, or answered something unusable.
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    /// The store directory is not usable as a store.
    #[error("the store '{}' {reason}", .path.display())]
    BadStore {
        /// The store directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
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
    /// The process exit code for this error (see the module docs).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Integrity(_) => 1,
            Error::Usage(_) => 2,
            _ if self.is_missing_named_path() => 4,
            Error::Rejected(_) | Error::GitNexus(_) => 3,
            Error::UnknownDigest { .. } | Error::NotFound { .. } | Error::Absent { .. } => 4,
            Error::AmbiguousDigest { .. } => 5,
            Error::Conflict(_) => 6,
            Error::Io { .. }
            | Error::Catalogue { .. }
            | Error::CatalogueTooNew { .. }
            | Error::CatalogueLost { .. }
            | Error::BadStore { .. } => 7,
            Error::Remote(r) => r.exit_code(),
        }
    }

    /// A stable name for the kind of error, for JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Integrity(_) => "integrity",
            Error::Usage(_) => "usage",
            _ if self.is_missing_named_path() => "not-found",
            Error::Rejected(_) | Error::GitNexus(_) => "rejected",
            Error::UnknownDigest { .. } => "unknown-digest",
            Error::NotFound { .. } | Error::Absent { .. } => "not-found",
            Error::AmbiguousDigest { .. } => "ambiguous-digest",
            Error::Conflict(_) => "conflict",
            Error::Io { .. } => "io",
            Error::Catalogue { .. } => "catalogue",
            Error::CatalogueTooNew { .. } => "catalogue-too-new",
            Error::CatalogueLost { .. } => "catalogue-lost",
            Error::BadStore { .. } => "bad-store",
            Error::Remote(r) => r.kind(),
        }
    }

    /// Whether this is a rule's refusal of a directory named on the command
    /// line (a release source, a GitNexus harness root) only because it does
    /// not exist: that is `not-found`, though the JSON still names the rule.
    pub fn is_missing_named_path(&self) -> bool {
        let missing = |e: &io::Error| {
            matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            )
        };
        match self {
            Error::Rejected(Rejection::SourceUnavailable { source, .. }) => missing(source),
            // `ROOT/gitnexus` is missing: not-found when ROOT itself is.
            Error::GitNexus(crate::gitnexus::GitNexusError::RootUnavailable {
                source,
                path,
                ..
            }) => missing(source) && path.parent().is_some_and(|root| !root.exists()),
            // Upstream's rules check ROOT itself first.
            Error::GitNexus(crate::gitnexus::GitNexusError::CheckoutUnavailable {
                source, ..
            }) => missing(source),
            _ => false,
        }
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

/// A count and its noun in the number the count calls for: `1 file`, `2 files`.
pub fn counted(n: impl std::fmt::Display, one: &str, many: &str) -> String {
    let n = n.to_string();
    let noun = if n == "1" { one } else { many };
    format!("{n} {noun}")
}
