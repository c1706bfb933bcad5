//! The pinned GitNexus runtime's read-only mounts, checked as the harness checks them.
//!
//! The harness's rules depend on its revision ([`Rules`]): the seed's, which
//! pin the runtime's version, or upstream's current ones, which accept any
//! version and a linked git worktree that borrows the primary checkout's
//! `node_modules` ([`upstream_runtime_mounts`]).
//!
//! [`trusted_runtime_mounts`] reproduces the seed's
//! `trusted_gitnexus_runtime_mounts` (`runtime_mounts.py`) for a harness root
//! holding `gitnexus/` and `gitnexus-shared/`:
//!
//! 1. both roots are real directories reached by no symlink hop
//!    (`_validated_runtime_root`: `expanduser().absolute()`, `lstat`, and
//!    `resolve(strict=True)` must give the same path back);
//! 2. the seven [`COMPONENTS`], in the reference's order, are each a real file
//!    or directory reached by no symlink hop (`_validated_runtime_component`);
//! 3. `dist/cli/index.js` is a regular file, not a symlink;
//! 4. the runtime's `package.json` (read as Python's `read_text()` then
//!    `json.loads` read it) carries the pinned `version`;
//! 5. `node_modules/gitnexus-shared` is a symlink that resolves to the shared root;
//! 6. the shared `package.json` is named `gitnexus-shared`.
//!
//! The first broken rule is the one reported, as in the reference. The
//! reference raises a `SandboxError` for each; a few of its failures escape as
//! other exceptions (an `AttributeError` when `package.json` is not an object,
//! a `FileNotFoundError` for a dangling `gitnexus-shared` link); cestore
//! refuses the same layouts, each with its own [`GitNexusError`] variant.
//!
//! [`GitNexusError`] also carries the one arm rule the reference enforces
//! while preparing mounts ([`GitNexusError::CeArmWithoutPlugin`]), so that
//! every refused mount set exits with the same code.

use std::fmt;
use std::fs::FileType;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Classified, Classify, Error, ErrorKind, Misuse};
use crate::pyjson::{self, Value};
use crate::source::absolute_like_python;

/// The GitNexus version the reference pins (`PINNED_GITNEXUS_VERSION`).
pub const PINNED_VERSION: &str = "1.6.9";
/// Where the runtime is mounted in the sandbox (`SANDBOX_GITNEXUS`).
pub const SANDBOX_GITNEXUS: &str = "/opt/gitnexus";
/// Where the shared package is mounted in the sandbox (`SANDBOX_GITNEXUS_SHARED`).
pub const SANDBOX_GITNEXUS_SHARED: &str = "/opt/gitnexus-shared";
/// The runtime's directory inside the harness root.
pub const RUNTIME_DIR: &str = "gitnexus";
/// The shared package's directory inside the harness root.
pub const SHARED_DIR: &str = "gitnexus-shared";
/// The name the shared package's `package.json` must carry.
pub const SHARED_PACKAGE_NAME: &str = "gitnexus-shared";

/// Which revision of the harness's GitNexus runtime rules apply
/// (`--gitnexus-rules`; the drop-in's `bind(..., revision=...)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Revision {
    /// The seed's: the runtime's `package.json` carries the pinned version.
    #[default]
    Seed,
    /// Upstream's current revision: any non-empty version, the checkout
    /// itself checked, and a linked git worktree may borrow the primary
    /// checkout's `gitnexus/node_modules` and `gitnexus-shared`.
    Upstream,
}

/// The rules one check applies: a revision and, for the seed's, its pin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rules {
    /// The seed's rules, with the version `package.json` must carry.
    Seed {
        /// The pinned version ([`PINNED_VERSION`] unless told otherwise).
        version: String,
    },
    /// Upstream's current rules ([`upstream_runtime_mounts`]).
    Upstream,
}

impl Default for Rules {
    fn default() -> Self {
        Rules::Seed {
            version: PINNED_VERSION.to_owned(),
        }
    }
}

impl Rules {
    /// The rules of `revision`; `version` overrides the seed's pin and is
    /// refused (a usage error) with upstream's rules, which pin nothing.
    pub fn new(revision: Revision, version: Option<&str>) -> crate::error::Result<Rules> {
        match (revision, version) {
            (Revision::Seed, v) => Ok(Rules::Seed {
                version: v.unwrap_or(PINNED_VERSION).to_owned(),
            }),
            (Revision::Upstream, None) => Ok(Rules::Upstream),
            (Revision::Upstream, Some(_)) => Err(Misuse::VersionWithUpstreamRules.into()),
        }
    }
}

/// The seven read-only mounts of the GitNexus runtime under `root`, checked
/// by `rules`.
pub fn runtime_mounts(root: &Path, rules: &Rules) -> Result<Vec<ReadOnlyMount>, GitNexusError> {
    match rules {
        Rules::Seed { version } => trusted_runtime_mounts(root, version),
        Rules::Upstream => upstream_runtime_mounts(root),
    }
}

/// One component of the runtime as its snapshot records it: the host
/// directory it is read below, and its path there, which is also its path
/// in the snapshot (`gitnexus/dist`, `gitnexus-shared/package.json`, …).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeComponent {
    /// The checkout the component is read below (under upstream's rules, a
    /// linked worktree's borrowed `node_modules` and `gitnexus-shared` are
    /// read below the primary checkout).
    pub base: PathBuf,
    /// Its path below `base`, `/`-separated.
    pub relative: String,
}

/// The seven components of the runtime under `root`, after every check
/// `rules` make ([`runtime_mounts`]), in the reference's order, each where
/// its mount's source lies.
///
/// # Errors
///
/// The rules' rejection ([`GitNexusError`]).
pub fn runtime_components(
    root: &Path,
    rules: &Rules,
) -> Result<Vec<RuntimeComponent>, GitNexusError> {
    let mounts = runtime_mounts(root, rules)?;
    Ok(mounts
        .into_iter()
        .zip(COMPONENTS)
        .map(|(mount, (root, relative, _))| {
            let relative = format!("{}/{relative}", root.dir_name());
            // Every mount's source ends with its component's path (the
            // checks above made it so): the base is what lies above.
            let depth = Path::new(&relative).components().count();
            let base = mount
                .source
                .ancestors()
                .nth(depth)
                .map_or_else(PathBuf::new, Path::to_path_buf);
            RuntimeComponent { base, relative }
        })
        .collect())
}

/// One of the two runtime roots inside the harness root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Root {
    /// `HARNESS/gitnexus`, mounted at [`SANDBOX_GITNEXUS`].
    Runtime,
    /// `HARNESS/gitnexus-shared`, mounted at [`SANDBOX_GITNEXUS_SHARED`].
    Shared,
}

impl Root {
    /// The root's directory name inside the harness root.
    pub fn dir_name(self) -> &'static str {
        match self {
            Root::Runtime => RUNTIME_DIR,
            Root::Shared => SHARED_DIR,
        }
    }

    /// Where the root's components are mounted in the sandbox.
    pub fn sandbox_path(self) -> &'static str {
        match self {
            Root::Runtime => SANDBOX_GITNEXUS,
            Root::Shared => SANDBOX_GITNEXUS_SHARED,
        }
    }
}

/// The reference's label for a root, as its messages spell it.
impl fmt::Display for Root {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Root::Runtime => "pinned GitNexus runtime",
            Root::Shared => "pinned GitNexus shared runtime",
        })
    }
}

/// What a component must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A real directory.
    Directory,
    /// A real regular file.
    File,
}

/// The word the reference's messages use for a kind.
impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Directory => "directory",
            Kind::File => "file",
        })
    }
}

/// The components mounted, in the reference's order: the root each lives
/// in, its path relative to that root (and to the root's sandbox path), and
/// what it must be.
pub const COMPONENTS: [(Root, &str, Kind); 7] = [
    (Root::Runtime, "dist", Kind::Directory),
    (Root::Runtime, "package.json", Kind::File),
    (Root::Runtime, "node_modules", Kind::Directory),
    (Root::Runtime, "vendor", Kind::Directory),
    (Root::Shared, "dist", Kind::Directory),
    (Root::Shared, "package.json", Kind::File),
    (Root::Runtime, "hooks/claude", Kind::Directory),
];

/// One read-only bind mount: a host path shown at a sandbox path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOnlyMount {
    /// The host path.
    pub source: PathBuf,
    /// The path inside the sandbox.
    pub target: String,
}

/// Serialized as `{"source", "target", "read_only": true}`; fails for a
/// source that is not UTF-8, as `Path` does.
impl serde::Serialize for ReadOnlyMount {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut m = s.serialize_struct("ReadOnlyMount", 3)?;
        m.serialize_field("source", &self.source)?;
        m.serialize_field("target", &self.target)?;
        m.serialize_field("read_only", &true)?;
        m.end()
    }
}

/// Why a mount set was refused; one variant per rule, messages as the reference's.
#[derive(Debug, thiserror::Error)]
pub enum GitNexusError {
    /// A CE arm was asked for without a staged plugin view.
    #[error("ce_* arm has no staged Compound Engineering plugin: {arm}")]
    CeArmWithoutPlugin {
        /// The arm.
        arm: String,
    },
    /// A runtime root cannot be examined.
    #[error("{root} is unavailable: {path}: {source}", path = .path.display())]
    RootUnavailable {
        /// Which root.
        root: Root,
        /// Its absolute path.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// A runtime root is a symlink, not a directory, or reached through a symlink.
    #[error("{root} must be a real directory: {}", .path.display())]
    RootNotRealDirectory {
        /// Which root.
        root: Root,
        /// Its absolute path.
        path: PathBuf,
    },
    /// The checkout (upstream's rules) cannot be examined.
    #[error("pinned GitNexus checkout is unavailable: {path}: {source}", path = .path.display())]
    CheckoutUnavailable {
        /// Its absolute path.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The checkout (upstream's rules) is a symlink, not a directory, or reached through one.
    #[error("pinned GitNexus checkout must be a real directory: {}", .path.display())]
    CheckoutNotRealDirectory {
        /// Its absolute path.
        path: PathBuf,
    },
    /// `gitnexus/node_modules` is a symlink, but not to the same directory
    /// of the primary checkout of a linked worktree (upstream's rules).
    #[error("pinned GitNexus runtime component symlink must point at the primary checkout: {}", .path.display())]
    SymlinkOutsidePrimary {
        /// The symlink.
        path: PathBuf,
    },
    /// The runtime's `package.json` has no non-empty string `version` (upstream's rules).
    #[error("pinned GitNexus runtime package.json has no version")]
    VersionMissing {
        /// The `package.json`.
        path: PathBuf,
    },
    /// A component cannot be examined.
    #[error("pinned GitNexus runtime component is unavailable: {path}: {source}", path = .path.display())]
    ComponentUnavailable {
        /// The component.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// A component is a symlink, of the wrong kind, or reached through a symlink.
    #[error("pinned GitNexus runtime component must be a real {kind}: {}", .path.display())]
    ComponentNotReal {
        /// The component.
        path: PathBuf,
        /// What it must be.
        kind: Kind,
    },
    /// `dist/cli/index.js` cannot be examined.
    #[error("pinned GitNexus runtime metadata is invalid: {path}: {source}", path = .path.display())]
    EntrypointUnavailable {
        /// The entrypoint.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The runtime's `package.json` cannot be read, is not JSON, or is not an object.
    #[error("pinned GitNexus runtime metadata is invalid: {path}: {reason}", path = .path.display())]
    RuntimeMetadataInvalid {
        /// The `package.json`.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// `dist/cli/index.js` is a symlink or not a regular file.
    #[error("pinned GitNexus runtime entrypoint must be regular and non-symlink: {}", .path.display())]
    EntrypointNotRegular {
        /// The entrypoint.
        path: PathBuf,
    },
    /// The runtime's `package.json` carries another version.
    #[error("pinned GitNexus runtime version drifted: expected {expected}, got {got}")]
    VersionDrifted {
        /// The pinned version.
        expected: String,
        /// Python `repr()` of the `version` value, or "None" when absent.
        got: String,
    },
    /// `node_modules/gitnexus-shared` is not a symlink.
    #[error("pinned GitNexus runtime has an unexpected gitnexus-shared dependency: {} is not a symlink", .path.display())]
    SharedLinkNotSymlink {
        /// The link's path.
        path: PathBuf,
    },
    /// `node_modules/gitnexus-shared` cannot be examined or resolved (dangling, a loop).
    #[error("pinned GitNexus runtime has an unexpected gitnexus-shared dependency: {path}: {source}", path = .path.display())]
    SharedLinkUnresolvable {
        /// The link's path.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// `node_modules/gitnexus-shared` resolves somewhere other than the shared root.
    #[error(
        "pinned GitNexus runtime has an unexpected gitnexus-shared dependency: {} resolves to {}, not {}",
        .path.display(), .resolved.display(), .expected.display()
    )]
    SharedLinkElsewhere {
        /// The link's path.
        path: PathBuf,
        /// Where it resolves.
        resolved: PathBuf,
        /// The shared root.
        expected: PathBuf,
    },
    /// The shared `package.json` cannot be read, is not JSON, or is not an object.
    #[error("pinned GitNexus shared runtime metadata is invalid: {path}: {reason}", path = .path.display())]
    SharedMetadataInvalid {
        /// The `package.json`.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The shared `package.json` is not named `gitnexus-shared`.
    #[error("pinned GitNexus shared runtime has an unexpected package identity: expected name 'gitnexus-shared', got {got}")]
    SharedIdentity {
        /// Python `repr()` of the `name` value, or "None" when absent.
        got: String,
    },
}

impl GitNexusError {
    /// The path the broken rule is about, when there is one.
    pub fn path(&self) -> Option<&Path> {
        use GitNexusError::*;
        match self {
            CeArmWithoutPlugin { .. } | VersionDrifted { .. } | SharedIdentity { .. } => None,
            RootUnavailable { path, .. }
            | RootNotRealDirectory { path, .. }
            | CheckoutUnavailable { path, .. }
            | CheckoutNotRealDirectory { path }
            | SymlinkOutsidePrimary { path }
            | VersionMissing { path }
            | ComponentUnavailable { path, .. }
            | ComponentNotReal { path, .. }
            | EntrypointUnavailable { path, .. }
            | RuntimeMetadataInvalid { path, .. }
            | EntrypointNotRegular { path }
            | SharedLinkNotSymlink { path }
            | SharedLinkUnresolvable { path, .. }
            | SharedLinkElsewhere { path, .. }
            | SharedMetadataInvalid { path, .. } => Some(path),
        }
    }

    /// A stable identifier of the rule broken, for scripts.
    pub fn rule(&self) -> &'static str {
        use GitNexusError::*;
        match self {
            CeArmWithoutPlugin { .. } => "ce-arm-without-plugin",
            RootUnavailable { .. } => "gitnexus-root-unavailable",
            RootNotRealDirectory { .. } => "gitnexus-root-not-real-directory",
            CheckoutUnavailable { .. } => "gitnexus-checkout-unavailable",
            CheckoutNotRealDirectory { .. } => "gitnexus-checkout-not-real-directory",
            SymlinkOutsidePrimary { .. } => "gitnexus-symlink-outside-primary",
            VersionMissing { .. } => "gitnexus-version-missing",
            ComponentUnavailable { .. } => "gitnexus-component-unavailable",
            ComponentNotReal { .. } => "gitnexus-component-not-real",
            EntrypointUnavailable { .. } => "gitnexus-entrypoint-unavailable",
            RuntimeMetadataInvalid { .. } => "gitnexus-metadata-invalid",
            EntrypointNotRegular { .. } => "gitnexus-entrypoint-not-regular",
            VersionDrifted { .. } => "gitnexus-version-drifted",
            SharedLinkNotSymlink { .. } => "gitnexus-shared-link-not-symlink",
            SharedLinkUnresolvable { .. } => "gitnexus-shared-link-unresolvable",
            SharedLinkElsewhere { .. } => "gitnexus-shared-link-elsewhere",
            SharedMetadataInvalid { .. } => "gitnexus-shared-metadata-invalid",
            SharedIdentity { .. } => "gitnexus-shared-identity",
        }
    }
}

impl Classify for GitNexusError {
    /// `rejected`, except where the refusal is only that a directory named
    /// on the command line does not exist: that is `not-found`.
    fn kind(&self) -> ErrorKind {
        let missing = |e: &io::Error| {
            matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            )
        };
        let not_found = match self {
            // `ROOT/gitnexus` is missing: not-found when ROOT itself is.
            GitNexusError::RootUnavailable { source, path, .. } => {
                missing(source) && path.parent().is_some_and(|root| !root.exists())
            }
            // Upstream's rules check ROOT itself first.
            GitNexusError::CheckoutUnavailable { source, .. } => missing(source),
            _ => false,
        };
        if not_found {
            ErrorKind::NotFound
        } else {
            ErrorKind::Rejected
        }
    }

    fn rule(&self) -> Option<&'static str> {
        Some(GitNexusError::rule(self))
    }

    fn path(&self) -> Option<&Path> {
        GitNexusError::path(self)
    }

    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }
}

impl From<GitNexusError> for Error {
    fn from(e: GitNexusError) -> Self {
        Error::GitNexus(Classified::new(e))
    }
}

/// The seven read-only mounts of the pinned GitNexus runtime under
/// `harness_root`, in the reference's order, after every check the
/// reference makes (see the module docs). `pinned_version` is the version the
/// runtime's `package.json` must carry (the reference pins [`PINNED_VERSION`]).
pub fn trusted_runtime_mounts(
    harness_root: &Path,
    pinned_version: &str,
) -> Result<Vec<ReadOnlyMount>, GitNexusError> {
    let harness = absolute_like_python(harness_root);
    let runtime = validated_root(&harness, Root::Runtime)?;
    let shared = validated_root(&harness, Root::Shared)?;
    let mounts = COMPONENTS
        .iter()
        .map(|&(root, relative, kind)| {
            let base = if root == Root::Runtime {
                &runtime
            } else {
                &shared
            };
            validated_component(
                base,
                relative,
                &format!("{}/{relative}", root.sandbox_path()),
                kind,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    check_metadata(&mounts, &[shared], |version| {
        if is_str(version, pinned_version) {
            Ok(())
        } else {
            Err(GitNexusError::VersionDrifted {
                expected: pinned_version.to_owned(),
                got: py_repr(version),
            })
        }
    })?;
    Ok(mounts)
}

/// The seven read-only mounts of the GitNexus runtime in `checkout`, checked
/// as upstream's current harness checks them (`trusted_gitnexus_runtime_mounts(root=...)`):
///
/// 1. the checkout, `gitnexus/` and `gitnexus-shared/` are real directories
///    reached by no symlink hop;
/// 2. `gitnexus/node_modules` is a real directory, or, when the checkout is
///    a linked git worktree ([`primary_checkout_root`]), a symlink to the
///    primary checkout's own real `gitnexus/node_modules`, which is then
///    mounted in its place; any other symlink is refused;
/// 3. when the primary checkout's `gitnexus-shared` is a real directory and
///    the `node_modules` mounted is the primary's, or its `gitnexus-shared`
///    link resolves there, that `gitnexus-shared` is mounted instead of the
///    checkout's, so the link means the same inside the sandbox;
/// 4. the other components, the entrypoint and the shared identity are
///    checked as the seed checks them, in the same order;
/// 5. `package.json` carries a non-empty string `version` (any version);
/// 6. `node_modules/gitnexus-shared` resolves to the shared root mounted,
///    or to the primary checkout's.
pub fn upstream_runtime_mounts(checkout: &Path) -> Result<Vec<ReadOnlyMount>, GitNexusError> {
    let checkout = absolute_like_python(checkout);
    let (file_type, resolved) =
        lstat_and_resolve(&checkout).map_err(|source| GitNexusError::CheckoutUnavailable {
            path: checkout.clone(),
            source,
        })?;
    if !file_type.is_dir() || resolved != checkout {
        return Err(GitNexusError::CheckoutNotRealDirectory { path: checkout });
    }
    let runtime = validated_root(&checkout, Root::Runtime)?;
    let mut shared = validated_root(&checkout, Root::Shared)?;
    let node_modules = node_modules_mount(&runtime, &checkout)?;
    let primary = primary_checkout_root(&checkout);
    // A primary checkout whose gitnexus-shared is unusable leaves the
    // checkout's own in place.
    let primary_shared = primary
        .as_deref()
        .and_then(|p| real_directory(&p.join(SHARED_DIR)));
    if let (Some(primary), Some(primary_shared)) = (&primary, &primary_shared) {
        let linked = node_modules.source.join(SHARED_PACKAGE_NAME);
        let reuse = node_modules.source == primary.join(RUNTIME_DIR).join("node_modules")
            || (std::fs::symlink_metadata(&linked).is_ok_and(|m| m.file_type().is_symlink())
                && std::fs::canonicalize(&linked).is_ok_and(|r| &r == primary_shared));
        if reuse {
            shared = primary_shared.clone();
        }
    }
    let component = |base: &Path, relative: &str, root: Root, kind: Kind| {
        validated_component(
            base,
            relative,
            &format!("{}/{relative}", root.sandbox_path()),
            kind,
        )
    };
    let mounts = vec![
        component(&runtime, "dist", Root::Runtime, Kind::Directory)?,
        component(&runtime, "package.json", Root::Runtime, Kind::File)?,
        node_modules,
        component(&runtime, "vendor", Root::Runtime, Kind::Directory)?,
        component(&shared, "dist", Root::Shared, Kind::Directory)?,
        component(&shared, "package.json", Root::Shared, Kind::File)?,
        component(&runtime, "hooks/claude", Root::Runtime, Kind::Directory)?,
    ];
    let allowed: Vec<PathBuf> = std::iter::once(shared).chain(primary_shared).collect();
    check_metadata(&mounts, &allowed, |version| match version {
        Some(Value::Str(s)) if !s.eq_str("") => Ok(()),
        _ => Err(GitNexusError::VersionMissing {
            path: mounts[1].source.clone(),
        }),
    })?;
    Ok(mounts)
}

/// The checks both revisions make after the components, in the harness's
/// order: the entrypoint is a regular file and `package.json` an object
/// whose `version` passes `version_rule`, `node_modules/gitnexus-shared` is
/// a symlink resolving to one of `allowed_shared`, and the shared
/// `package.json` names `gitnexus-shared`.
fn check_metadata(
    mounts: &[ReadOnlyMount],
    allowed_shared: &[PathBuf],
    version_rule: impl FnOnce(Option<&Value>) -> Result<(), GitNexusError>,
) -> Result<(), GitNexusError> {
    let [dist, package, node_modules, _, _, shared_package, _] = component_sources(mounts);

    // The harness lstats the entrypoint and loads package.json in one `try`.
    let entrypoint = dist.join("cli").join("index.js");
    let entry_type = std::fs::symlink_metadata(&entrypoint)
        .map_err(|source| GitNexusError::EntrypointUnavailable {
            path: entrypoint.clone(),
            source,
        })?
        .file_type();
    let package_json =
        read_json_object(package).map_err(|reason| GitNexusError::RuntimeMetadataInvalid {
            path: package.to_path_buf(),
            reason,
        })?;
    if !entry_type.is_file() {
        return Err(GitNexusError::EntrypointNotRegular { path: entrypoint });
    }
    version_rule(package_json.get("version"))?;

    check_shared_link(&node_modules.join(SHARED_PACKAGE_NAME), allowed_shared)?;

    let shared_json = read_json_object(shared_package).map_err(|reason| {
        GitNexusError::SharedMetadataInvalid {
            path: shared_package.to_path_buf(),
            reason,
        }
    })?;
    if !is_str(shared_json.get("name"), SHARED_PACKAGE_NAME) {
        return Err(GitNexusError::SharedIdentity {
            got: py_repr(shared_json.get("name")),
        });
    }
    Ok(())
}

/// `gitnexus/node_modules` under upstream's rules: a real directory, or a
/// symlink to the primary checkout's real `gitnexus/node_modules`, which is
/// then the mount's source.
fn node_modules_mount(runtime: &Path, checkout: &Path) -> Result<ReadOnlyMount, GitNexusError> {
    let source = runtime.join("node_modules");
    let target = format!("{SANDBOX_GITNEXUS}/node_modules");
    let (file_type, resolved) =
        lstat_and_resolve(&source).map_err(|e| GitNexusError::ComponentUnavailable {
            path: source.clone(),
            source: e,
        })?;
    if !file_type.is_symlink() {
        if !file_type.is_dir() || resolved != source {
            return Err(GitNexusError::ComponentNotReal {
                path: source,
                kind: Kind::Directory,
            });
        }
        return Ok(ReadOnlyMount { source, target });
    }
    let Some(primary) = primary_checkout_root(checkout) else {
        return Err(GitNexusError::ComponentNotReal {
            path: source,
            kind: Kind::Directory,
        });
    };
    let expected = primary.join(RUNTIME_DIR).join("node_modules");
    match lstat_and_resolve(&expected) {
        Ok((t, r)) if t.is_dir() && r == expected && resolved == r => {
            Ok(ReadOnlyMount { source: r, target })
        }
        _ => Err(GitNexusError::SymlinkOutsidePrimary { path: source }),
    }
}

/// The most bytes of a worktree's `.git` file that are read.
const GIT_FILE_MAX_BYTES: u64 = 4096;

/// The primary checkout of `checkout` when it is a linked git worktree
/// (upstream's `_primary_checkout_root`), resolved; `None` otherwise.
///
/// A linked worktree has a regular `.git` file (at most 4096 bytes, not a
/// symlink) reading `gitdir: <primary>/.git/worktrees/<name>` (relative to
/// the checkout when not absolute), and `<primary>/.git` must be a real
/// directory; a primary that resolves to the checkout itself is none.
pub fn primary_checkout_root(checkout: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let git_file = checkout.join(".git");
    let meta = std::fs::symlink_metadata(&git_file).ok()?;
    if !meta.file_type().is_file() || meta.len() > GIT_FILE_MAX_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::open(&git_file)
        .ok()?
        .take(GIT_FILE_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    // Python's read_text(): UTF-8, universal newlines.
    let text = String::from_utf8(bytes)
        .ok()?
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    let raw = py_strip(py_strip(&text).strip_prefix("gitdir:")?);
    if raw.is_empty() {
        return None;
    }
    let gitdir: PathBuf = checkout.join(raw).components().collect();
    let worktrees = gitdir.parent()?;
    let dot_git = worktrees.parent()?;
    if worktrees.file_name()? != "worktrees" || dot_git.file_name()? != ".git" {
        return None;
    }
    let primary = dot_git.parent()?;
    let primary_git = std::fs::symlink_metadata(primary.join(".git")).ok()?;
    if !primary_git.file_type().is_dir() {
        return None;
    }
    let resolved = std::fs::canonicalize(primary).ok()?;
    let own = std::fs::canonicalize(checkout).unwrap_or_else(|_| checkout.to_path_buf());
    (resolved != own).then_some(resolved)
}

/// Python's `str.strip()`: without whitespace (as `str.isspace`) at either end.
fn py_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// `path` when it is a real directory reached by no symlink hop.
fn real_directory(path: &Path) -> Option<PathBuf> {
    let path = absolute_like_python(path);
    match lstat_and_resolve(&path) {
        Ok((t, r)) if t.is_dir() && r == path => Some(path),
        _ => None,
    }
}

/// The sources of the seven mounts, by position.
fn component_sources(mounts: &[ReadOnlyMount]) -> [&Path; 7] {
    std::array::from_fn(|i| mounts[i].source.as_path())
}

/// `_validated_runtime_root`: `HARNESS/<dir>` must be a real directory reached
/// by no symlink hop.
fn validated_root(harness: &Path, root: Root) -> Result<PathBuf, GitNexusError> {
    let path = absolute_like_python(&harness.join(root.dir_name()));
    let (file_type, resolved) =
        lstat_and_resolve(&path).map_err(|source| GitNexusError::RootUnavailable {
            root,
            path: path.clone(),
            source,
        })?;
    if !file_type.is_dir() || resolved != path {
        return Err(GitNexusError::RootNotRealDirectory { root, path });
    }
    Ok(path)
}

/// `_validated_runtime_component`: `root/relative` must be a real `kind`
/// reached by no symlink hop.
fn validated_component(
    root: &Path,
    relative: &str,
    target: &str,
    kind: Kind,
) -> Result<ReadOnlyMount, GitNexusError> {
    let source = root.join(relative);
    let (file_type, resolved) =
        lstat_and_resolve(&source).map_err(|e| GitNexusError::ComponentUnavailable {
            path: source.clone(),
            source: e,
        })?;
    let expected_type = match kind {
        Kind::Directory => file_type.is_dir(),
        Kind::File => file_type.is_file(),
    };
    if !expected_type || resolved != source {
        return Err(GitNexusError::ComponentNotReal { path: source, kind });
    }
    Ok(ReadOnlyMount {
        source,
        target: target.to_owned(),
    })
}

/// The path's own type (`lstat`, so a symlink is a symlink) and where it
/// resolves (`resolve(strict=True)`), or the first error of the two.
fn lstat_and_resolve(path: &Path) -> io::Result<(FileType, PathBuf)> {
    let file_type = std::fs::symlink_metadata(path)?.file_type();
    Ok((file_type, std::fs::canonicalize(path)?))
}

/// `node_modules/gitnexus-shared` must be a symlink resolving to one of
/// `allowed` (the shared root mounted first).
fn check_shared_link(link: &Path, allowed: &[PathBuf]) -> Result<(), GitNexusError> {
    // Python's `is_symlink()` is false when lstat fails with ENOENT, ENOTDIR,
    // EBADF or ELOOP, and raises for any other error.
    let is_symlink = match std::fs::symlink_metadata(link) {
        Ok(meta) => meta.file_type().is_symlink(),
        Err(e) if is_python_ignored(&e) => false,
        Err(source) => {
            return Err(GitNexusError::SharedLinkUnresolvable {
                path: link.to_path_buf(),
                source,
            })
        }
    };
    if !is_symlink {
        return Err(GitNexusError::SharedLinkNotSymlink {
            path: link.to_path_buf(),
        });
    }
    let resolved =
        std::fs::canonicalize(link).map_err(|source| GitNexusError::SharedLinkUnresolvable {
            path: link.to_path_buf(),
            source,
        })?;
    if !allowed.contains(&resolved) {
        return Err(GitNexusError::SharedLinkElsewhere {
            path: link.to_path_buf(),
            resolved,
            expected: allowed.first().cloned().unwrap_or_default(),
        });
    }
    Ok(())
}

/// The errors Python's `Path.is_symlink()` and `exists()` treat as "no".
fn is_python_ignored(e: &io::Error) -> bool {
    use rustix::io::Errno;
    matches!(
        e.raw_os_error().map(Errno::from_raw_os_error),
        Some(Errno::NOENT | Errno::NOTDIR | Errno::BADF | Errno::LOOP)
    )
}

/// Reads a JSON file as the reference does (`json.loads(path.read_text())`)
/// and requires an object (the reference then calls `.get` on it). The error
/// is the reason, for the caller's message.
fn read_json_object(path: &Path) -> Result<Value, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let value = loads_read_text(&bytes).map_err(|e| e.to_string())?;
    match value {
        Value::Object(_) => Ok(value),
        // The reference fails with AttributeError: '<type>' object has no attribute 'get'.
        _ => Err("the top level is not a JSON object".to_owned()),
    }
}

/// `json.loads(text)` where `text` is what `Path.read_text()` returns: UTF-8
/// decoded, then `\r\n` and lone `\r` turned into `\n` (universal newlines).
/// Bytes that are not UTF-8 go to [`pyjson::loads`] untouched, so its decode
/// error names the position in the file.
fn loads_read_text(bytes: &[u8]) -> Result<Value, pyjson::LoadError> {
    if std::str::from_utf8(bytes).is_err() {
        return pyjson::loads(bytes);
    }
    let mut text = Vec::with_capacity(bytes.len());
    let mut rest = bytes.iter().peekable();
    while let Some(&b) = rest.next() {
        if b == b'\r' {
            rest.next_if_eq(&&b'\n');
            text.push(b'\n');
        } else {
            text.push(b);
        }
    }
    pyjson::loads(&text)
}

/// Whether a JSON value is the string `expected` (Python `==`).
fn is_str(value: Option<&Value>, expected: &str) -> bool {
    matches!(value, Some(Value::Str(s)) if s.eq_str(expected))
}

/// Python's `repr()` of `dict.get`'s result.
fn py_repr(value: Option<&Value>) -> String {
    value.map_or_else(|| "None".to_owned(), Value::py_repr)
}

/// Where the plugin is mounted, and Claude's plugin directory (`SANDBOX_CE_PLUGIN`).
pub const SANDBOX_CE_PLUGIN: &str = "/opt/compound-engineering-plugin";

/// The plugin mounts for an arm (`ce_plugin_mounts_for_arm`): the view for a
/// CE arm ([`crate::profile::ce::rules::CE_ARMS`], an exact set: `ce_other` is not one of
/// them), none for any other; a CE arm without a view is refused.
pub fn ce_plugin_mounts_for_arm(
    arm: &str,
    view: Option<&Path>,
) -> Result<Vec<ReadOnlyMount>, GitNexusError> {
    if !crate::profile::ce::rules::is_ce_arm(arm) {
        return Ok(Vec::new());
    }
    let view = view.ok_or_else(|| GitNexusError::CeArmWithoutPlugin {
        arm: arm.to_owned(),
    })?;
    Ok(vec![ReadOnlyMount {
        source: view.to_path_buf(),
        target: SANDBOX_CE_PLUGIN.to_owned(),
    }])
}

/// Claude's plugin directory for an arm (`ce_plugin_dir_for_arm`):
/// [`SANDBOX_CE_PLUGIN`] for a CE arm, none for any other; a CE arm without
/// a view is refused, as its mounts are.
pub fn ce_plugin_dir_for_arm(
    arm: &str,
    view: Option<&Path>,
) -> Result<Option<&'static str>, GitNexusError> {
    ce_plugin_mounts_for_arm(arm, view)?;
    Ok(crate::profile::ce::rules::is_ce_arm(arm).then_some(SANDBOX_CE_PLUGIN))
}

#[cfg(test)]
mod arm_tests {
    use super::*;
    use crate::profile::ce::rules::CE_ARMS;

    #[test]
    fn arm_rules_follow_the_exact_set() {
        let view = Path::new("/v");
        for arm in CE_ARMS {
            assert_eq!(
                ce_plugin_dir_for_arm(arm, Some(view)).ok(),
                Some(Some(SANDBOX_CE_PLUGIN))
            );
            assert!(ce_plugin_mounts_for_arm(arm, None).is_err());
        }
        for arm in ["baseline", "gitnexus", "ce_other", "CE_REVIEW", ""] {
            assert_eq!(ce_plugin_dir_for_arm(arm, None).ok(), Some(None));
            assert!(ce_plugin_mounts_for_arm(arm, Some(view)).is_ok_and(|m| m.is_empty()));
        }
    }
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

/// The runtime's constants, as bindings read them (`cestore rules`).
pub fn contract_rules() -> GitNexusRules {
    GitNexusRules {
        pinned_version: PINNED_VERSION,
        revisions: <Revision as clap::ValueEnum>::value_variants()
            .iter()
            .filter_map(clap::ValueEnum::to_possible_value)
            .map(|v| v.get_name().to_owned())
            .collect(),
        sandbox_gitnexus: SANDBOX_GITNEXUS,
        sandbox_gitnexus_shared: SANDBOX_GITNEXUS_SHARED,
    }
}

/// One error of every rule of the runtime, its varying parts named
/// (`{path}`), to word each rule's message from.
pub fn rule_samples() -> Vec<GitNexusError> {
    let path = || PathBuf::from("{path}");
    let os = || std::io::Error::other("{os error}");
    let text = |t: &str| t.to_owned();
    vec![
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
    ]
}

/// Names every rule, so that a new one fails to compile until
/// [`rule_samples`] lists it too.
#[cfg(test)]
#[allow(dead_code)]
fn every_rule_is_sampled(g: &GitNexusError) {
    use GitNexusError as G;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_text_translates_newlines_before_parsing() {
        let err = loads_read_text(b"{\r\n\r\n  x").unwrap_err().to_string();
        assert_eq!(
            err,
            "Expecting property name enclosed in double quotes: line 3 column 3 (char 5)"
        );
        let err = loads_read_text(b"{\"a\": 1,\r\xff}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("position 9"), "{err}");
    }

    #[test]
    fn components_are_in_reference_order() {
        let targets: Vec<String> = COMPONENTS
            .iter()
            .map(|(root, rel, _)| format!("{}/{rel}", root.sandbox_path()))
            .collect();
        assert_eq!(
            targets,
            [
                "/opt/gitnexus/dist",
                "/opt/gitnexus/package.json",
                "/opt/gitnexus/node_modules",
                "/opt/gitnexus/vendor",
                "/opt/gitnexus-shared/dist",
                "/opt/gitnexus-shared/package.json",
                "/opt/gitnexus/hooks/claude",
            ]
        );
    }
}
