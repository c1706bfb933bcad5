//! Typed errors of three kinds: a request refused ([`Request`], usage), the
//! store's content found damaged ([`Damage`], integrity), and a request that
//! would overwrite or orphan something ([`Clash`], conflict). Each names what
//! it concerns, so a caller can match it; its text is the message printed.
//! The paths they hold are not the JSON error's `path` (which they never
//! had): [`Error::path`](super::Error::path) gives none for them.

use std::io;
use std::path::PathBuf;

use crate::digest::ManifestDigest;

/// A request the argument parser lets through but the command refuses.
#[derive(Debug, thiserror::Error)]
pub enum Request {
    /// `-` named more than once among an audit's results files.
    #[error("standard input (-) can be named only once")]
    StdinTwice,
    /// `--format bwrap` or `bwrap0` with `--json`.
    #[error("--format bwrap and bwrap0 print bubblewrap arguments, not JSON; drop --json or use --format json")]
    BwrapWithJson,
    /// `audit --markdown` with `--json`.
    #[error("audit prints either --markdown or --json, not both")]
    MarkdownWithJson,
    /// `verify --trusted-key` with `--tree` or `--source`.
    #[error("verify --trusted-key checks the store's attestations; not with --tree or --source")]
    TrustedKeyWithTreeOrSource,
    /// `verify --tree DIR` or `--source REPO` with other than one digest.
    #[error("verify {option} takes exactly one DIGEST")]
    OneDigest {
        /// The option and its value's name: `--tree DIR`, `--source REPO`.
        option: &'static str,
    },
    /// A mount source JSON cannot carry.
    #[error("mount source '{}' is not UTF-8, which JSON cannot carry; use --format bwrap", .path.display())]
    NotUtf8 {
        /// The mount source.
        path: PathBuf,
    },
    /// A registry reference with a user part, a query or a fragment.
    #[error(
        "the registry reference '{redacted}' (shown without them) holds a user part, \
         a query or a fragment: write REGISTRY/REPOSITORY[:TAG] alone; credentials \
         come from CESTORE_REGISTRY_TOKEN, CESTORE_REGISTRY_USER and \
         CESTORE_REGISTRY_PASSWORD or a credential helper, never from the command \
         line (docs/remote.md)"
    )]
    CredentialsInReference {
        /// The reference, its credentials taken out.
        redacted: String,
    },
    /// `cestore help` of a command that does not exist.
    #[error("no command '{name}'; see `cestore help`")]
    NoCommand {
        /// The name asked for.
        name: String,
    },
    /// A destination with no last component to make.
    #[error("'{}' does not name a directory{}", .path.display(), if *.to_create { " to create" } else { "" })]
    NotADirectoryName {
        /// The destination as given.
        path: PathBuf,
        /// Whether it was to be created (the words say so).
        to_create: bool,
    },
    /// `@` with no version after it.
    #[error("'{text}' names no version: @VERSION takes a snapshot's version, such as @1.2.3")]
    NoVersion {
        /// The name as given.
        text: String,
    },
    /// A snapshot's name that is no digest, prefix or `@VERSION`.
    #[error("'{text}' is not a digest, a digest prefix or @VERSION: {reason}")]
    NotADigest {
        /// The name as given.
        text: String,
        /// Why it does not parse.
        reason: String,
    },
    /// A glob of `find --path` too large to compile.
    #[error("could not compile the glob '{pattern}': {reason}")]
    Glob {
        /// The glob as given.
        pattern: String,
        /// What the glob compiler said.
        reason: String,
    },
}

/// The store's content no longer matches its catalogue, or cannot be
/// handed out.
#[derive(Debug, thiserror::Error)]
pub enum Damage {
    /// An object a view needs is damaged or missing.
    #[error("object '{}' (for '{file}') {problem}; refusing to hand it out. Run `cestore verify` to see every affected snapshot", .object.display())]
    Object {
        /// The object's file.
        object: PathBuf,
        /// The snapshot's path it was to be for.
        file: String,
        /// What is wrong with it, as a predicate.
        problem: String,
    },
    /// An object present for an adoption is damaged.
    #[error("object '{}' {problem}; run `cestore verify`", .object.display())]
    AdoptedObject {
        /// The object's file.
        object: PathBuf,
        /// What is wrong with it, as a predicate.
        problem: String,
    },
    /// A view published whose record failed, and which could not be removed.
    #[error("{}; the unrecorded view '{}' could not be removed either ({source}); remove it by hand", super::error_chain(.cause.as_ref()), .path.display())]
    ViewLeftBehind {
        /// What stopped the record.
        cause: Box<super::Error>,
        /// The view.
        path: PathBuf,
        /// Why it could not be removed.
        source: io::Error,
    },
    /// An attestation just made is not what a kept one must be.
    #[error("could not keep the attestation of {digest}: it is not one JSON line")]
    Attestation {
        /// The snapshot.
        digest: ManifestDigest,
    },
    /// A recorded snapshot whose entries break a rule of the reference.
    #[error("the snapshot {digest} breaks a rule of the reference: {rule}; nothing of it is handed out (`cestore rm {digest}` forgets it)")]
    SnapshotBreaksRule {
        /// The snapshot.
        digest: ManifestDigest,
        /// The rule, in words.
        rule: String,
    },
    /// Every name a manifest could be set aside under is taken.
    #[error("could not set aside '{}': every name is taken", .path.display())]
    NoNameToSetAside {
        /// The manifest.
        path: PathBuf,
    },
    /// The catalogue's copy of a manifest does not parse.
    #[error("the catalogue's manifest of {digest} is damaged: {reason}; run `cestore verify`")]
    CatalogueManifest {
        /// The snapshot.
        digest: ManifestDigest,
        /// Why it does not parse.
        reason: String,
    },
    /// A shared view's path holds something other than a directory.
    #[error("'{}' is not a directory; run `cestore verify`", .path.display())]
    SharedViewNotADirectory {
        /// The shared view's path.
        path: PathBuf,
    },
    /// The catalogue holds an object id that is not one.
    #[error("the catalogue holds a malformed object id '{id}'{}", .file.as_ref().map(|f| format!(" for '{f}'")).unwrap_or_default())]
    MalformedObjectId {
        /// The id as held.
        id: String,
        /// The snapshot's path it is for, when the row names one.
        file: Option<String>,
    },
}

/// A request that would overwrite or orphan something.
#[derive(Debug, thiserror::Error)]
pub enum Clash {
    /// Hard links were required and the system refused one.
    #[error("could not hard-link '{}' to '{}' ({why}); hard links were required", .path.display(), .object.display())]
    HardLinksRequired {
        /// The view's file.
        path: PathBuf,
        /// The object.
        object: PathBuf,
        /// The system's refusal, in words.
        why: &'static str,
    },
    /// Something appeared at a view's destination while it was built.
    #[error("'{}' already exists", .path.display())]
    Taken {
        /// The destination.
        path: PathBuf,
    },
    /// `discard` of a shared view.
    #[error("'{}' is a shared view of the store, which running sandboxes may have mounted; \
             discard never removes one: `cestore rm {}` forgets its snapshot, then `cestore gc` removes it", .path.display(), .digest.as_deref().unwrap_or("DIGEST"))]
    SharedView {
        /// The view.
        path: PathBuf,
        /// Its snapshot's digest, when known.
        digest: Option<String>,
    },
    /// `discard` of a recorded view whose root directory was replaced.
    #[error("'{}' is no longer the view checkout made (its root directory was replaced); not removed. \
             Check it with `cestore verify --tree {} {digest}`", .path.display(), .path.display())]
    DiscardReplaced {
        /// The view.
        path: PathBuf,
        /// The snapshot it was recorded as a view of.
        digest: ManifestDigest,
    },
    /// `discard` of a directory no view records that differs from the snapshot.
    #[error("'{}' is not a recorded view and differs from {digest} in {} (first: {first}); not removed", .path.display(), super::counted(*.ways, "way", "ways"))]
    NotAViewAndDiffers {
        /// The directory.
        path: PathBuf,
        /// The snapshot named.
        digest: ManifestDigest,
        /// In how many ways it differs.
        ways: usize,
        /// The first difference, in words.
        first: String,
    },
    /// A recorded view whose root directory was replaced since.
    #[error("'{}' was recorded as a view of {digest}, but its root directory has been replaced since; \
             check it with `cestore verify --tree {} {digest}`, or make a new view", .path.display(), .path.display())]
    ViewReplaced {
        /// The view.
        path: PathBuf,
        /// The snapshot it was recorded as a view of.
        digest: ManifestDigest,
    },
    /// A snapshot removed while a view of it was being made.
    #[error("{digest} was removed from the store while the view '{view}' was being made; the view was not kept")]
    SnapshotRemoved {
        /// The snapshot.
        digest: ManifestDigest,
        /// The view's path.
        view: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Each kind keeps its exit code, and the text the `format!` it
    /// replaced wrote.
    #[test]
    fn typed_errors_keep_their_kind_and_words() {
        let digest = ManifestDigest::of(b"x");
        let cases: Vec<(Error, u8, String)> = vec![
            (
                Request::NotADirectoryName { path: "/a".into(), to_create: true }.into(),
                2,
                "'/a' does not name a directory to create".into(),
            ),
            (
                Request::NotADirectoryName { path: "/".into(), to_create: false }.into(),
                2,
                "'/' does not name a directory".into(),
            ),
            (
                Request::OneDigest { option: "--tree DIR" }.into(),
                2,
                "verify --tree DIR takes exactly one DIGEST".into(),
            ),
            (
                Damage::MalformedObjectId { id: "zz".into(), file: Some("a.md".into()) }.into(),
                1,
                "the catalogue holds a malformed object id 'zz' for 'a.md'".into(),
            ),
            (
                Damage::MalformedObjectId { id: "zz".into(), file: None }.into(),
                1,
                "the catalogue holds a malformed object id 'zz'".into(),
            ),
            (
                Damage::ViewLeftBehind {
                    cause: Box::new(Clash::Taken { path: "/v".into() }.into()),
                    path: "/v".into(),
                    source: io::Error::from(io::ErrorKind::PermissionDenied),
                }
                .into(),
                1,
                format!(
                    "'/v' already exists; the unrecorded view '/v' could not be removed either ({}); remove it by hand",
                    io::Error::from(io::ErrorKind::PermissionDenied)
                ),
            ),
            (
                Clash::NotAViewAndDiffers { path: "/v".into(), digest, ways: 1, first: "x".into() }
                    .into(),
                6,
                format!("'/v' is not a recorded view and differs from {digest} in 1 way (first: x); not removed"),
            ),
            (
                Clash::SharedView { path: "/s".into(), digest: None }.into(),
                6,
                "'/s' is a shared view of the store, which running sandboxes may have mounted; \
                 discard never removes one: `cestore rm DIGEST` forgets its snapshot, then `cestore gc` removes it"
                    .into(),
            ),
        ];
        for (err, code, text) in cases {
            assert_eq!(err.to_string(), text);
            assert_eq!(err.exit_code(), code, "{text}");
            assert_eq!(err.path(), None, "{text}");
        }
    }
}
