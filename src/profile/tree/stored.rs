//! The tree kinds of stored manifest: a tree, a dependency list, a task snapshot and an environment.
//!
//! Each harness digest is a store manifest whose bytes are exactly the
//! digest's preimage ([`super::digests`]): a `tree` manifest is the JSON
//! array of a `sandbox_copy`'s entries, a `dependencies` manifest the
//! schema 1 dependency object, a `task` manifest the schema 3 snapshot
//! identity, an `environment` manifest a named set of snapshot digests
//! ([`super::digests::environment_bytes`]). [`parse`] reads each back from its bytes and refuses bytes
//! that do not re-encode to themselves; [`check`] is what the store
//! re-checks of such a manifest when it did not come from a walk (adopt,
//! recover): the harness's bounds and the shape of the entry lists.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use crate::digest::{
    DependencyContentDigest, DependencyManifestDigest, ManifestDigest, ObjectId, TreeManifestDigest,
};
use crate::pyjson::{self, PyString, Value};

use super::capture::{MAX_TASK_ASSET_BYTES, MAX_TASK_ASSET_ENTRIES, MAX_TASK_ASSET_PATH_BYTES};
use super::digests::{
    dependency_content_bytes, dependency_manifest_bytes, environment_bytes, manifest_bytes,
    snapshot_bytes, DependencyDigests, EnvironmentMember, SnapshotIdentity,
    ENVIRONMENT_SCHEMA_VERSION, MAX_ENVIRONMENT_MEMBERS,
};
use super::{Dependency, Node, TreeEntry, DEPENDENCY_ROOT};

/// The parsed content of a tree-kind manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stored {
    /// A tree's entry list (`tree`): a task's `sandbox_copy` roots (modes
    /// 0, no symlink), or the GitNexus runtime's seven components
    /// (permission bits, relative symlinks).
    Tree(Vec<TreeEntry>),
    /// A dependency list (`dependencies`).
    Dependencies(Vec<Dependency>),
    /// A task snapshot's identity (`task`).
    Task(TaskRecord),
    /// A named set of stored snapshots (`environment`), in (role, digest)
    /// order ([`check_members`]).
    Environment(Vec<EnvironmentMember>),
}

/// A task snapshot's identity as its manifest holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRecord {
    /// The task's `sandbox_copy` strings, exactly as declared, in order.
    pub declarations: Vec<String>,
    /// The repository's path as the harness resolved it (raw bytes; a byte
    /// that is not UTF-8 is written `\udcXX` in the manifest).
    pub repo_identity: PathBuf,
    /// The commit the task was resolved to.
    pub resolved_sha: String,
    /// The harness checkout review cases were read from, if any.
    pub harness_identity: Option<PathBuf>,
    /// The `tree` manifest's digest (`manifest_digest`).
    pub manifest_digest: TreeManifestDigest,
    /// The dependency list's two digests.
    pub dependencies: DependencyDigests,
}

impl TaskRecord {
    /// The identity [`snapshot_bytes`] encodes.
    pub fn identity(&self) -> SnapshotIdentity<'_> {
        SnapshotIdentity {
            repo_identity: &self.repo_identity,
            resolved_sha: &self.resolved_sha,
            declarations: &self.declarations,
            manifest_digest: self.manifest_digest,
            dependencies: self.dependencies,
            harness_identity: self.harness_identity.as_deref(),
        }
    }

    /// The store digests of the two manifests the task names: its `tree`
    /// manifest and its `dependencies` manifest.
    pub fn named(&self) -> [ManifestDigest; 2] {
        [
            ManifestDigest::from_bytes(*self.manifest_digest.as_bytes()),
            ManifestDigest::from_bytes(*self.dependencies.manifest.as_bytes()),
        ]
    }
}

/// Which kind of manifest bytes are, read from their first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A CE plugin's manifest, `{"files":`.
    Ce,
    /// A tree, `[`.
    Tree,
    /// A dependency list, `{"dependencies":`.
    Dependencies,
    /// A task snapshot, `{"declarations":`.
    Task,
    /// An environment, `{"members":`.
    Environment,
}

impl Kind {
    /// The kind the bytes announce; [`Kind::Ce`] for anything else, so that
    /// bytes of no kind are refused as a CE manifest always refused them.
    pub fn of(bytes: &[u8]) -> Kind {
        if bytes.starts_with(b"[") {
            Kind::Tree
        } else if bytes.starts_with(b"{\"dependencies\":") {
            Kind::Dependencies
        } else if bytes.starts_with(b"{\"declarations\":") {
            Kind::Task
        } else if bytes.starts_with(b"{\"members\":") {
            Kind::Environment
        } else {
            Kind::Ce
        }
    }

    /// The profile name: `ce`, `tree`, `dependencies`, `task` or
    /// `environment`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Ce => "ce",
            Kind::Tree => "tree",
            Kind::Dependencies => "dependencies",
            Kind::Task => "task",
            Kind::Environment => "environment",
        }
    }

    /// The kind a profile name names, if any.
    pub fn from_name(name: &str) -> Option<Kind> {
        [
            Kind::Ce,
            Kind::Tree,
            Kind::Dependencies,
            Kind::Task,
            Kind::Environment,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// The profile names a snapshot row may carry, `ce` first.
pub const PROFILES: [&str; 5] = ["ce", "tree", "dependencies", "task", "environment"];

impl Stored {
    /// The profile name of this kind.
    pub fn profile(&self) -> &'static str {
        self.kind().name()
    }

    /// The kind of this manifest.
    pub fn kind(&self) -> Kind {
        match self {
            Stored::Tree(_) => Kind::Tree,
            Stored::Dependencies(_) => Kind::Dependencies,
            Stored::Task(_) => Kind::Task,
            Stored::Environment(_) => Kind::Environment,
        }
    }

    /// The canonical bytes: exactly what the harness hashes.
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            Stored::Tree(entries) => manifest_bytes(entries),
            Stored::Dependencies(deps) => dependency_manifest_bytes(deps),
            Stored::Task(record) => snapshot_bytes(&record.identity()),
            Stored::Environment(members) => environment_bytes(members),
        }
    }

    /// The file objects the manifest names, as the store's entries: a tree's
    /// files; every dependency's files at `<index, 5 digits>/payload/...`;
    /// none for a task or an environment. A file is executable when any execute bit of its
    /// recorded mode is set.
    pub fn files(&self) -> Vec<crate::profile::ce::manifest::Entry> {
        fn file(path: String, e: &TreeEntry) -> Option<crate::profile::ce::manifest::Entry> {
            match e.node {
                Node::File { size, sha256, mode } => Some(crate::profile::ce::manifest::Entry {
                    executable: mode & 0o111 != 0,
                    path,
                    sha256,
                    size,
                }),
                Node::Directory | Node::Symlink { .. } => None,
            }
        }
        match self {
            Stored::Tree(entries) => entries
                .iter()
                .filter_map(|e| file(e.path.clone(), e))
                .collect(),
            Stored::Dependencies(deps) => deps
                .iter()
                .enumerate()
                .flat_map(|(i, d)| {
                    d.entries
                        .iter()
                        .filter_map(move |e| file(format!("{}/{}", index_dir(i), e.path), e))
                })
                .collect(),
            Stored::Task(_) | Stored::Environment(_) => Vec::new(),
        }
    }

    /// A dependency list's `sandbox_dependency_content_digest`.
    pub fn content_digest(&self) -> Option<DependencyContentDigest> {
        match self {
            Stored::Dependencies(deps) => {
                Some(DependencyContentDigest::of(&dependency_content_bytes(deps)))
            }
            Stored::Tree(_) | Stored::Task(_) | Stored::Environment(_) => None,
        }
    }

    /// The manifests this one names by digest (a task's two, an
    /// environment's members), none otherwise.
    pub fn named(&self) -> Vec<ManifestDigest> {
        match self {
            Stored::Task(record) => record.named().to_vec(),
            Stored::Environment(members) => members.iter().map(|m| m.digest).collect(),
            Stored::Tree(_) | Stored::Dependencies(_) => Vec::new(),
        }
    }

    /// How many entries the manifest lists, all lists together.
    pub fn entry_count(&self) -> usize {
        match self {
            Stored::Tree(entries) => entries.len(),
            Stored::Dependencies(deps) => deps.iter().map(|d| d.entries.len()).sum(),
            Stored::Task(_) | Stored::Environment(_) => 0,
        }
    }

    /// The harness's `total_bytes` of the lists: file sizes and symlink
    /// target lengths. Saturates rather than wrapping: sizes a manifest
    /// declares never add up to less than one of them.
    pub fn total_bytes(&self) -> u64 {
        let sum = |entries: &[TreeEntry]| {
            entries
                .iter()
                .map(TreeEntry::size)
                .fold(0, u64::saturating_add)
        };
        match self {
            Stored::Tree(entries) => sum(entries),
            Stored::Dependencies(deps) => deps
                .iter()
                .map(|d| sum(&d.entries))
                .fold(0, u64::saturating_add),
            Stored::Task(_) | Stored::Environment(_) => 0,
        }
    }
}

/// The directory of dependency `index` in a `dependencies` view and in the
/// store's entry paths: five digits, as upstream names `dependencies/00000`.
pub fn index_dir(index: usize) -> String {
    format!("{index:05}")
}

/// Why bytes are not a tree-kind manifest.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The bytes are not JSON of the kind's shape.
    #[error("not a {kind} manifest: {reason}")]
    Shape {
        /// The kind the bytes announced.
        kind: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The bytes parse but are not the canonical encoding of what they hold.
    #[error("manifest bytes are not in canonical form")]
    NotCanonical,
}

fn shape(kind: Kind, reason: impl Into<String>) -> ParseError {
    ParseError::Shape {
        kind: kind.name(),
        reason: reason.into(),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WireEntry {
    kind: String,
    link_target: String,
    mode: u32,
    path: String,
    sha256: String,
    size: u64,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WireContent {
    entries: Vec<WireEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WireDependency {
    content: WireContent,
    source: String,
    target: String,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WireDependencies {
    dependencies: Vec<WireDependency>,
    schema_version: u64,
}

/// One entry from its six fields; whether they agree with each other (a
/// directory's empty fields, a symlink's digest of its target) is left to
/// the re-encoding.
fn entry(kind: Kind, w: WireEntry) -> Result<TreeEntry, ParseError> {
    let node = match w.kind.as_str() {
        "directory" => Node::Directory,
        "symlink" => Node::Symlink {
            target: w.link_target,
        },
        "file" => Node::File {
            size: w.size,
            sha256: ObjectId::from_lower_hex(&w.sha256)
                .ok_or_else(|| shape(kind, format!("'{}': sha256 is not a digest", w.path)))?,
            mode: w.mode,
        },
        other => return Err(shape(kind, format!("'{}': unknown kind '{other}'", w.path))),
    };
    Ok(TreeEntry { path: w.path, node })
}

fn entries(kind: Kind, wire: Vec<WireEntry>) -> Result<Vec<TreeEntry>, ParseError> {
    wire.into_iter().map(|w| entry(kind, w)).collect()
}

/// Decodes the bytes of a tree-kind manifest (`kind` as [`Kind::of`] read
/// it), refusing bytes that are not the canonical encoding of what they
/// hold. [`Kind::Ce`] is not decoded here.
///
/// # Errors
///
/// [`ParseError::Shape`] when the bytes are not JSON of the kind's shape;
/// [`ParseError::NotCanonical`] when they are but re-encode otherwise.
pub fn parse(kind: Kind, bytes: &[u8]) -> Result<Stored, ParseError> {
    let stored = match kind {
        Kind::Ce => return Err(shape(kind, "a CE manifest")),
        Kind::Tree => {
            let wire: Vec<WireEntry> =
                serde_json::from_slice(bytes).map_err(|e| shape(kind, e.to_string()))?;
            Stored::Tree(entries(kind, wire)?)
        }
        Kind::Dependencies => {
            let wire: WireDependencies =
                serde_json::from_slice(bytes).map_err(|e| shape(kind, e.to_string()))?;
            if wire.schema_version != u64::from(super::DEPENDENCY_SCHEMA_VERSION) {
                return Err(shape(
                    kind,
                    format!("schema version {} is not supported", wire.schema_version),
                ));
            }
            let deps = wire
                .dependencies
                .into_iter()
                .map(|d| {
                    Ok(Dependency {
                        source: d.source,
                        target: d.target,
                        entries: entries(kind, d.content.entries)?,
                    })
                })
                .collect::<Result<Vec<_>, ParseError>>()?;
            Stored::Dependencies(deps)
        }
        Kind::Task => Stored::Task(task(bytes)?),
        Kind::Environment => Stored::Environment(environment(bytes)?),
    };
    if stored.bytes() != bytes {
        return Err(ParseError::NotCanonical);
    }
    Ok(stored)
}

/// Reads a snapshot identity; its two paths may hold Python's
/// `surrogateescape` escapes, so it is read as Python reads JSON.
fn task(bytes: &[u8]) -> Result<TaskRecord, ParseError> {
    let kind = Kind::Task;
    let value = pyjson::loads(bytes).map_err(|e| shape(kind, e.to_string()))?;
    let Value::Object(fields) = &value else {
        return Err(shape(kind, "not an object"));
    };
    let known = [
        "declarations",
        "dependency_content_digest",
        "dependency_manifest_digest",
        "harness_identity",
        "manifest_digest",
        "repo_identity",
        "resolved_sha",
        "schema_version",
    ];
    if let Some((key, _)) = fields
        .iter()
        .find(|(k, _)| !known.iter().any(|n| k.eq_str(n)))
    {
        return Err(shape(kind, format!("unknown field {}", key.py_repr())));
    }
    let field = |name: &str| {
        value
            .get(name)
            .ok_or_else(|| shape(kind, format!("missing field '{name}'")))
    };
    let text = |name: &str| -> Result<String, ParseError> {
        match field(name)? {
            Value::Str(s) => s
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| shape(kind, format!("'{name}' holds a lone surrogate"))),
            _ => Err(shape(kind, format!("'{name}' is not a string"))),
        }
    };
    let path = |name: &str| -> Result<PathBuf, ParseError> {
        match field(name)? {
            Value::Str(s) => {
                path_of(s).ok_or_else(|| shape(kind, format!("'{name}' is not a path")))
            }
            _ => Err(shape(kind, format!("'{name}' is not a string"))),
        }
    };
    fn digest<T: std::str::FromStr>(kind: Kind, name: &str, text: &str) -> Result<T, ParseError> {
        text.parse()
            .map_err(|_| shape(kind, format!("'{name}' is not a digest")))
    }
    let declarations = match field("declarations")? {
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Str(s) => s
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| shape(kind, "a declaration holds a lone surrogate")),
                _ => Err(shape(kind, "a declaration is not a string")),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(shape(kind, "'declarations' is not a list")),
    };
    match field("schema_version")? {
        Value::Int(n) if n == &super::SNAPSHOT_SCHEMA_VERSION.to_string() => {}
        _ => return Err(shape(kind, "schema version is not supported")),
    }
    let harness = path("harness_identity")?;
    let content: DependencyContentDigest = digest(
        kind,
        "dependency_content_digest",
        &text("dependency_content_digest")?,
    )?;
    let manifest: DependencyManifestDigest = digest(
        kind,
        "dependency_manifest_digest",
        &text("dependency_manifest_digest")?,
    )?;
    Ok(TaskRecord {
        declarations,
        repo_identity: path("repo_identity")?,
        resolved_sha: text("resolved_sha")?,
        harness_identity: (!harness.as_os_str().is_empty()).then_some(harness),
        manifest_digest: digest(kind, "manifest_digest", &text("manifest_digest")?)?,
        dependencies: DependencyDigests { content, manifest },
    })
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WireMember {
    digest: String,
    kind: String,
    role: String,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WireEnvironment {
    members: Vec<WireMember>,
    schema_version: u64,
}

/// Reads an environment's members, refusing any that break
/// [`check_members`].
fn environment(bytes: &[u8]) -> Result<Vec<EnvironmentMember>, ParseError> {
    let kind = Kind::Environment;
    let wire: WireEnvironment =
        serde_json::from_slice(bytes).map_err(|e| shape(kind, e.to_string()))?;
    if wire.schema_version != u64::from(ENVIRONMENT_SCHEMA_VERSION) {
        return Err(shape(
            kind,
            format!("schema version {} is not supported", wire.schema_version),
        ));
    }
    let members = wire
        .members
        .into_iter()
        .map(|m| {
            let digest = m
                .digest
                .parse()
                .map_err(|_| shape(kind, format!("member '{}': not a digest", m.role)))?;
            let member_kind = Kind::from_name(&m.kind)
                .filter(|k| *k != Kind::Environment)
                .ok_or_else(|| {
                    shape(
                        kind,
                        format!("member '{}': unknown kind '{}'", m.role, m.kind),
                    )
                })?;
            Ok(EnvironmentMember {
                role: m.role,
                digest,
                kind: member_kind,
            })
        })
        .collect::<Result<Vec<_>, ParseError>>()?;
    check_members(&members).map_err(|e| shape(kind, e.to_string()))?;
    Ok(members)
}

/// Why a set of members is no environment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberError {
    /// No member at all.
    #[error("an environment names at least one member")]
    Empty,
    /// More members than [`MAX_ENVIRONMENT_MEMBERS`].
    #[error("{0} members, more than {MAX_ENVIRONMENT_MEMBERS}")]
    TooMany(usize),
    /// A role that is not a results-row field name.
    #[error("the role '{0}' is not 1 to 64 of a-z, 0-9 and _")]
    Role(String),
    /// A member whose kind cannot be a member.
    #[error("the member {role}={digest} is an environment; environments do not nest")]
    Nested {
        /// The member's role.
        role: String,
        /// The member's digest.
        digest: ManifestDigest,
    },
    /// The same (role, digest) twice.
    #[error("the member {role}={digest} is named twice")]
    Duplicate {
        /// The member's role.
        role: String,
        /// The member's digest.
        digest: ManifestDigest,
    },
    /// Members out of (role, digest) order.
    #[error("the members are not in (role, digest) order at '{0}'")]
    Unsorted(String),
}

/// Whether `role` is a results-row field name: 1 to 64 of `a-z`, `0-9`, `_`.
pub fn valid_role(role: &str) -> bool {
    (1..=64).contains(&role.len())
        && role
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Checks an environment's members: 1 to [`MAX_ENVIRONMENT_MEMBERS`], each
/// role a results-row field name, no environment among them, in (role,
/// digest) order with no (role, digest) pair twice.
///
/// # Errors
///
/// The first [`MemberError`] found.
pub fn check_members(members: &[EnvironmentMember]) -> Result<(), MemberError> {
    if members.is_empty() {
        return Err(MemberError::Empty);
    }
    if members.len() > MAX_ENVIRONMENT_MEMBERS {
        return Err(MemberError::TooMany(members.len()));
    }
    let mut previous: Option<(&str, ManifestDigest)> = None;
    for m in members {
        if !valid_role(&m.role) {
            return Err(MemberError::Role(m.role.clone()));
        }
        if m.kind == Kind::Environment {
            return Err(MemberError::Nested {
                role: m.role.clone(),
                digest: m.digest,
            });
        }
        let key = (m.role.as_str(), m.digest);
        if let Some(before) = previous {
            if before == key {
                return Err(MemberError::Duplicate {
                    role: m.role.clone(),
                    digest: m.digest,
                });
            }
            if (before.0, before.1.as_bytes()) > (key.0, key.1.as_bytes()) {
                return Err(MemberError::Unsorted(m.role.clone()));
            }
        }
        previous = Some(key);
    }
    Ok(())
}

/// Sorts members into (role, digest) order and drops a (role, digest) pair
/// given twice, as an environment records them.
pub fn sort_members(members: &mut Vec<EnvironmentMember>) {
    members.sort_by(|a, b| {
        (a.role.as_str(), a.digest.as_bytes()).cmp(&(b.role.as_str(), b.digest.as_bytes()))
    });
    members.dedup_by(|a, b| a.role == b.role && a.digest == b.digest);
}

/// The raw path a Python `str` of a path stands for: U+DC80..U+DCFF are the
/// bytes `surrogateescape` put there; any other lone surrogate is no path.
fn path_of(s: &PyString) -> Option<PathBuf> {
    if let Some(text) = s.as_str() {
        return Some(PathBuf::from(text));
    }
    let mut raw = Vec::new();
    for point in s.code_points() {
        if (0xdc80..=0xdcff).contains(&point) {
            raw.push((point & 0xff) as u8);
        } else {
            let c = char::from_u32(point)?;
            let mut buf = [0u8; 4];
            raw.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    Some(PathBuf::from(OsString::from_vec(raw)))
}

/// Why a stored tree-kind manifest is refused by [`check`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// More entries than the harness captures.
    #[error(
        "could not accept the {kind} manifest: {count} entries, more than {MAX_TASK_ASSET_ENTRIES}"
    )]
    TooManyEntries {
        /// The manifest's kind.
        kind: &'static str,
        /// How many entries it lists.
        count: u64,
    },
    /// More bytes than the harness captures.
    #[error(
        "could not accept the {kind} manifest: {total} bytes, more than {MAX_TASK_ASSET_BYTES}"
    )]
    TooManyBytes {
        /// The manifest's kind.
        kind: &'static str,
        /// The entries' total.
        total: u64,
    },
    /// An entry's path breaks a rule.
    #[error("could not accept the entry '{path}': {rule}")]
    Path {
        /// The entry's path (with its dependency's index for a dependency).
        path: String,
        /// The rule, in words.
        rule: &'static str,
    },
    /// A task names a manifest the store does not hold.
    #[error("could not accept the task: it names the manifest {0}, which is not in the store")]
    Missing(ManifestDigest),
    /// An environment names a member the store does not hold.
    #[error("could not accept the environment: its member {role}={digest} is not in the store")]
    MemberMissing {
        /// The member's role.
        role: String,
        /// The member's digest.
        digest: ManifestDigest,
    },
    /// An environment records a member's kind other than the store's.
    #[error("could not accept the environment: its member {role}={digest} is recorded as {recorded}, but the store holds a {found} snapshot")]
    MemberKind {
        /// The member's role.
        role: String,
        /// The member's digest.
        digest: ManifestDigest,
        /// The kind the environment records.
        recorded: &'static str,
        /// The kind the store holds.
        found: &'static str,
    },
}

impl CheckError {
    /// The rule id.
    pub fn rule(&self) -> &'static str {
        match self {
            CheckError::TooManyEntries { .. } => "tree-manifest-entries",
            CheckError::TooManyBytes { .. } => "tree-manifest-bytes",
            CheckError::Path { .. } => "tree-manifest-entry",
            CheckError::Missing(_) => "tree-task-names-missing",
            CheckError::MemberMissing { .. } => "environment-member-missing",
            CheckError::MemberKind { .. } => "environment-member-kind",
        }
    }
}

/// Checks one entry list: paths relative with no empty, `.` or `..` part,
/// at most the harness's path bytes, in [`super::sort_entries`] order with
/// no duplicate, every parent a directory entry of the list (`root` set:
/// every path is `root` or under it); symlinks only where `links` allows,
/// relative, non-empty, within the path bytes, no NUL; a `sandbox_copy`
/// file's mode 0 (`zero_modes`), a dependency file's at most `0o7777`.
fn check_entries(
    entries: &[TreeEntry],
    prefix: &str,
    root: Option<&str>,
    links: bool,
    zero_modes: bool,
) -> Result<(), CheckError> {
    let refuse = |path: &str, rule: &'static str| CheckError::Path {
        path: format!("{prefix}{path}"),
        rule,
    };
    let mut previous: Option<&str> = None;
    let mut directories = std::collections::HashSet::new();
    for e in entries {
        let path = e.path.as_str();
        if path.len() as u64 > MAX_TASK_ASSET_PATH_BYTES {
            return Err(refuse(path, "the path is longer than 4096 bytes"));
        }
        if path.contains('\0')
            || path
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..")
        {
            return Err(refuse(path, "the path is not relative with plain parts"));
        }
        if let Some(root) = root {
            if path != root && !path.starts_with(&format!("{root}/")) {
                return Err(refuse(path, "the path is not under the dependency's root"));
            }
        }
        if let Some(before) = previous {
            if before.as_bytes() >= path.as_bytes() {
                return Err(refuse(
                    path,
                    "the entries are not sorted without duplicates",
                ));
            }
        }
        previous = Some(path);
        if let Some((parent, _)) = path.rsplit_once('/') {
            if !directories.contains(parent) {
                return Err(refuse(path, "its parent is not a directory entry"));
            }
        }
        match &e.node {
            Node::Directory => {
                directories.insert(path);
            }
            Node::File { mode, .. } => {
                if (zero_modes && *mode != 0) || *mode > 0o7777 {
                    return Err(refuse(
                        path,
                        "the file's mode is not one the capture records",
                    ));
                }
            }
            Node::Symlink { target } => {
                if !links {
                    return Err(refuse(path, "a symlink outside a dependency"));
                }
                if target.is_empty()
                    || target.starts_with('/')
                    || target.contains('\0')
                    || target.len() as u64 > MAX_TASK_ASSET_PATH_BYTES
                {
                    return Err(refuse(path, "the symlink's target is not a relative path"));
                }
            }
        }
    }
    Ok(())
}

/// Checks a stored tree-kind manifest that did not come from a walk against
/// the harness's bounds and the shape of its entry lists; for a task, that
/// the two manifests it names are recorded; for an environment, that every
/// member is recorded with the kind it names. `recorded` gives the kind the
/// store records for a digest, `None` when it records none.
///
/// # Errors
///
/// The first [`CheckError`] found.
pub fn check(
    stored: &Stored,
    recorded: &dyn Fn(&ManifestDigest) -> Option<Kind>,
) -> Result<(), CheckError> {
    check_alone(stored)?;
    match stored {
        Stored::Task(record) => match record.named().into_iter().find(|d| recorded(d).is_none()) {
            Some(missing) => Err(CheckError::Missing(missing)),
            None => Ok(()),
        },
        Stored::Environment(members) => {
            members.iter().try_for_each(|m| match recorded(&m.digest) {
                None => Err(CheckError::MemberMissing {
                    role: m.role.clone(),
                    digest: m.digest,
                }),
                Some(found) if found != m.kind => Err(CheckError::MemberKind {
                    role: m.role.clone(),
                    digest: m.digest,
                    recorded: m.kind.name(),
                    found: found.name(),
                }),
                Some(_) => Ok(()),
            })
        }
        Stored::Tree(_) | Stored::Dependencies(_) => Ok(()),
    }
}

/// [`check`] without asking the store about the manifests a task or an
/// environment names: the bounds and the shape of the entry lists only.
///
/// # Errors
///
/// The first [`CheckError`] found.
pub fn check_alone(stored: &Stored) -> Result<(), CheckError> {
    let kind = stored.profile();
    let count = stored.entry_count() as u64;
    if count > MAX_TASK_ASSET_ENTRIES {
        return Err(CheckError::TooManyEntries { kind, count });
    }
    let total = stored.total_bytes();
    if total > MAX_TASK_ASSET_BYTES {
        return Err(CheckError::TooManyBytes { kind, total });
    }
    match stored {
        // A `sandbox_copy` tree (modes 0, no symlink) or a runtime's
        // (permission bits, relative symlinks): one check admits both.
        Stored::Tree(entries) => check_entries(entries, "", None, true, false),
        Stored::Dependencies(deps) => deps.iter().enumerate().try_for_each(|(i, d)| {
            let prefix = format!("{}/", index_dir(i));
            check_entries(&d.entries, &prefix, Some(DEPENDENCY_ROOT), true, false)
        }),
        Stored::Task(_) | Stored::Environment(_) => Ok(()),
    }
}

/// Every manifest `root` names, directly or through another (an
/// environment's members, a task member's tree and dependency list), each
/// once, in dependency order: whatever a manifest names comes before it.
/// `root` itself is not listed. `named_of` gives what one manifest names.
///
/// # Errors
///
/// The first error `named_of` gives.
pub fn closure<E>(
    root: &ManifestDigest,
    named_of: &mut dyn FnMut(&ManifestDigest) -> Result<Vec<ManifestDigest>, E>,
) -> Result<Vec<ManifestDigest>, E> {
    fn visit<E>(
        digest: &ManifestDigest,
        named_of: &mut dyn FnMut(&ManifestDigest) -> Result<Vec<ManifestDigest>, E>,
        seen: &mut std::collections::HashSet<ManifestDigest>,
        out: &mut Vec<ManifestDigest>,
    ) -> Result<(), E> {
        for named in named_of(digest)? {
            if seen.insert(named) {
                visit(&named, named_of, seen, out)?;
                out.push(named);
            }
        }
        Ok(())
    }
    let mut seen = std::collections::HashSet::from([*root]);
    let mut out = Vec::new();
    visit(root, named_of, &mut seen, &mut out)?;
    Ok(out)
}
