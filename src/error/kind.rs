//! The table of error kinds: each kind's JSON name and exit code, decided once.
//!
//! The binary reports a failure twice, as an exit code and (with `--json`) as
//! the `kind` of its error object; the `--help` text, `cestore exit-codes` and
//! the Python package's exceptions repeat the same table. All of them read it
//! from [`ErrorKind`], so that the two numbers of a failure cannot drift
//! apart. This module imports nothing from the rest of the crate: every other
//! module may use it, and error types defined above [`crate::error`] place
//! themselves in the table through [`Classify`] without [`crate::error`]
//! naming them.

use std::path::Path;

/// The exit code of success.
pub const SUCCESS: u8 = 0;

/// The kind of a failure: what its JSON error object's `kind` says and which
/// exit code the process ends with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Damage or a mismatch: stored bytes, a bundle or a view are not what they should be.
    Integrity,
    /// The command line is wrong.
    Usage,
    /// The input breaks one of the reference's rules.
    Rejected,
    /// Something named does not exist.
    NotFound,
    /// No snapshot answers to the digest, prefix or `@VERSION` given.
    UnknownDigest,
    /// A digest prefix or `@VERSION` matches several snapshots (or a prefix
    /// several stored contents).
    AmbiguousDigest,
    /// The request would overwrite or orphan something.
    Conflict,
    /// A filesystem operation failed.
    Io,
    /// A catalogue operation failed.
    Catalogue,
    /// The catalogue is missing, empty or unreadable beside a store that holds data.
    CatalogueLost,
    /// The catalogue was written by a newer cestore.
    CatalogueTooNew,
    /// The store directory is not usable as a store.
    BadStore,
    /// A registry could not be reached, refused, or answered something unusable.
    Remote,
    /// No attestation vouches for a snapshot under a key trusted.
    Untrusted,
    /// A key file is not a key, or a private key file is not its owner's alone.
    BadKey,
}

impl ErrorKind {
    /// Every kind, in the order of their exit codes (the order `cestore exit-codes` lists).
    pub const ALL: [ErrorKind; 15] = [
        ErrorKind::Integrity,
        ErrorKind::Usage,
        ErrorKind::Rejected,
        ErrorKind::NotFound,
        ErrorKind::UnknownDigest,
        ErrorKind::AmbiguousDigest,
        ErrorKind::Conflict,
        ErrorKind::Io,
        ErrorKind::Catalogue,
        ErrorKind::CatalogueLost,
        ErrorKind::CatalogueTooNew,
        ErrorKind::BadStore,
        ErrorKind::Remote,
        ErrorKind::Untrusted,
        ErrorKind::BadKey,
    ];

    /// The process exit code of a failure of this kind.
    pub fn exit_code(self) -> u8 {
        use ErrorKind::*;
        match self {
            Integrity => 1,
            Usage => 2,
            Rejected => 3,
            NotFound | UnknownDigest => 4,
            AmbiguousDigest => 5,
            Conflict => 6,
            Io | Catalogue | CatalogueLost | CatalogueTooNew | BadStore => 7,
            Remote => 8,
            Untrusted | BadKey => 9,
        }
    }

    /// The stable name of the kind: the `kind` of a JSON error object.
    pub fn name(self) -> &'static str {
        use ErrorKind::*;
        match self {
            Integrity => "integrity",
            Usage => "usage",
            Rejected => "rejected",
            NotFound => "not-found",
            UnknownDigest => "unknown-digest",
            AmbiguousDigest => "ambiguous-digest",
            Conflict => "conflict",
            Io => "io",
            Catalogue => "catalogue",
            CatalogueLost => "catalogue-lost",
            CatalogueTooNew => "catalogue-too-new",
            BadStore => "bad-store",
            Remote => "remote",
            Untrusted => "untrusted",
            BadKey => "bad-key",
        }
    }

    /// What the kind's exit code stands for, in a word or two (the words of
    /// the `--help` text, shared by the kinds of one code).
    pub fn summary(self) -> &'static str {
        use ErrorKind::*;
        match self {
            Integrity => "integrity",
            Usage => "usage",
            Rejected => "rejected",
            NotFound | UnknownDigest => "not found",
            AmbiguousDigest => "ambiguous",
            Conflict => "conflict",
            Io | Catalogue | CatalogueLost | CatalogueTooNew | BadStore => "store failure",
            Remote => "remote failure",
            Untrusted | BadKey => "untrusted",
        }
    }

    /// What a failure of this kind is, in words: the `meaning` column of
    /// `cestore exit-codes`, one for each kind (never its name again), short
    /// enough that the table fits 80 columns.
    pub fn meaning(self) -> &'static str {
        use ErrorKind::*;
        match self {
            Integrity => "bytes, a bundle or a view are not what they should be",
            Usage => "the command line is wrong",
            Rejected => "the input breaks a rule (tree, version, arms, runtime)",
            NotFound => "a path, view or registry tag named does not exist",
            UnknownDigest => "no snapshot has the digest, prefix or @VERSION given",
            AmbiguousDigest => "a prefix or @VERSION names several snapshots",
            Conflict => "the request would overwrite or orphan something",
            Io => "a filesystem operation failed",
            Catalogue => "a catalogue operation failed",
            CatalogueLost => "no readable catalogue beside a store holding data",
            CatalogueTooNew => "the catalogue was written by a newer cestore",
            BadStore => "the store directory is unusable or not to be trusted",
            Remote => "a registry was unreachable, refused, or answered badly",
            Untrusted => "no attestation by a trusted key vouches for it",
            BadKey => "a key file is not a key, or not its owner's alone",
        }
    }

    /// The kind of this name, if any.
    pub fn from_name(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The exit codes with their summaries, one entry per code in rising
    /// order, starting with success: `0 success, 1 integrity, …, 4 not found, …`.
    pub fn code_summaries() -> String {
        let mut parts = vec![format!("{SUCCESS} success")];
        let mut last = None;
        for kind in ErrorKind::ALL {
            if last == Some((kind.exit_code(), kind.summary())) {
                continue;
            }
            last = Some((kind.exit_code(), kind.summary()));
            parts.push(format!("{} {}", kind.exit_code(), kind.summary()));
        }
        parts.join(", ")
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An error that places itself in the table: its kind and, when it breaks a
/// named rule or concerns one path, those too.
///
/// The error types of modules that sit above [`crate::error`] (a remote's,
/// the GitNexus runtime's rules) implement it, so that [`crate::Error`]
/// carries them without naming their types.
pub trait Classify: std::error::Error + Send + Sync + 'static {
    /// The kind of the failure.
    fn kind(&self) -> ErrorKind;

    /// The stable identifier of the rule broken, when there is one.
    fn rule(&self) -> Option<&'static str> {
        None
    }

    /// The one path the failure concerns, when there is one.
    fn path(&self) -> Option<&Path> {
        None
    }

    /// The error as a plain [`std::error::Error`], to downcast it to its type.
    fn as_error(&self) -> &(dyn std::error::Error + 'static);
}

/// One row of the table: a JSON error kind and its exit code.
#[derive(Debug, serde::Serialize)]
pub struct ExitCode {
    /// The `kind` of a JSON error object.
    pub kind: &'static str,
    /// The process exit code of an error of that kind.
    pub code: u8,
    /// What the code stands for, in a word or two.
    #[serde(skip)]
    pub summary: &'static str,
    /// What a failure of this kind is, in words ([`ErrorKind::meaning`]).
    pub meaning: &'static str,
}

/// The table of every [`ErrorKind`], as `cestore exit-codes` reports it.
#[derive(Debug, serde::Serialize)]
pub struct ExitCodesReport {
    /// Every error kind, in the order of their codes.
    pub exit_codes: Vec<ExitCode>,
}

/// The table of [`ErrorKind`], for scripts and bindings to check their copies against.
pub fn exit_codes() -> ExitCodesReport {
    ExitCodesReport {
        exit_codes: ErrorKind::ALL
            .into_iter()
            .map(|k| ExitCode {
                kind: k.name(),
                code: k.exit_code(),
                summary: k.summary(),
                meaning: k.meaning(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found_again() {
        for kind in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_name(kind.name()), Some(kind));
        }
        let names: std::collections::BTreeSet<_> =
            ErrorKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), ErrorKind::ALL.len());
    }

    #[test]
    fn each_kind_has_its_own_meaning_in_words() {
        let meanings: std::collections::BTreeSet<_> =
            ErrorKind::ALL.iter().map(|k| k.meaning()).collect();
        assert_eq!(meanings.len(), ErrorKind::ALL.len());
        for kind in ErrorKind::ALL {
            assert_ne!(kind.meaning(), kind.name().replace('-', " "), "{kind}");
            assert_ne!(kind.meaning(), kind.summary(), "{kind}");
            assert!(
                kind.meaning().len() <= 55,
                "{kind}: too long for 80 columns"
            );
        }
    }

    #[test]
    fn codes_rise_through_the_table() {
        let codes: Vec<u8> = ErrorKind::ALL.iter().map(|k| k.exit_code()).collect();
        assert!(codes.windows(2).all(|w| w[0] <= w[1]), "{codes:?}");
        assert_eq!(
            ErrorKind::code_summaries(),
            "0 success, 1 integrity, 2 usage, 3 rejected, 4 not found, 5 ambiguous, \
             6 conflict, 7 store failure, 8 remote failure, 9 untrusted"
        );
    }
}
