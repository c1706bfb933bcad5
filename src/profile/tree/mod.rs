//! Tree manifests: a task's assets and sandbox dependencies as the benchmark harness records them.
//!
//! The harness (GitNexus's `eval/workflow_bench/task_assets.py`) captures a
//! task's `sandbox_copy` roots and each of its `sandbox_dependencies` as a
//! list of entries, one per directory, file and symlink, and names them by
//! four SHA-256 digests: the manifest digest of the `sandbox_copy` entries,
//! the two dependency digests (content, and content with declarations), and
//! the snapshot digest over all of it with the task's declarations, the
//! repository and the commit. This module holds those entries
//! ([`TreeEntry`], [`Node`], [`Dependency`]), adds the one entry the
//! harness adds before hashing ([`add_vite_temp`]), and computes the
//! digests byte for byte as the harness does ([`digests`]), so that a
//! digest cestore gives is the one the harness's results rows carry.
//!
//! [`declare`] reads a task's declarations as the harness does before it
//! walks anything (pure functions, its rejections in its words);
//! [`capture`] makes the entries from a directory as the harness walks
//! it (through directory handles, within its bounds, refusing what it
//! refuses, in its words); everything else here is a pure function of its
//! arguments, and reads no file. `docs/format.md` ("Tree manifests and
//! digests") gives the encoding and the few lines of Python that recompute
//! each digest.

pub mod capture;
pub mod declare;
pub mod digests;
pub mod stored;

#[cfg(test)]
mod capture_tests;
#[cfg(test)]
mod declare_tests;
#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod stored_tests;
#[cfg(test)]
mod tests;

pub use digests::{
    dependency_content_bytes, dependency_digests, dependency_manifest_bytes, environment_bytes,
    manifest_bytes, manifest_digest, snapshot_bytes, snapshot_digest, DependencyDigests,
    EnvironmentMember, SnapshotIdentity, DEPENDENCY_SCHEMA_VERSION, ENVIRONMENT_SCHEMA_VERSION,
    MAX_ENVIRONMENT_MEMBERS, SNAPSHOT_SCHEMA_VERSION,
};

use crate::digest::ObjectId;

/// The name of the entry a dependency's own root is recorded at: every path
/// of a dependency's entry list is `payload` or starts with `payload/`.
pub const DEPENDENCY_ROOT: &str = "payload";

/// What one entry of a tree is, with what the harness records for its kind.
///
/// A directory records nothing but its path: size 0, an empty `sha256`,
/// mode 0 and an empty `link_target`. A symlink records its target, and as
/// its size and `sha256` those of the target's UTF-8 bytes, with mode 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// A directory.
    Directory,
    /// A regular file.
    File {
        /// The file's length in bytes.
        size: u64,
        /// The SHA-256 of the file's bytes.
        sha256: ObjectId,
        /// The permission bits as recorded: 0 for a `sandbox_copy` file, the
        /// full permission bits (`stat.S_IMODE`, so up to `0o7777`) for a
        /// dependency's file.
        mode: u32,
    },
    /// A symbolic link.
    Symlink {
        /// Where it points, as `readlink` gave it.
        target: String,
    },
}

/// One entry of a tree manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeEntry {
    /// The path relative to the tree's root, as `PurePosixPath.as_posix()`
    /// writes it: components joined by `/`, none empty, `.` or `..`.
    pub path: String,
    /// What the entry is.
    pub node: Node,
}

impl TreeEntry {
    /// A directory at `path`.
    pub fn directory(path: impl Into<String>) -> TreeEntry {
        TreeEntry {
            path: path.into(),
            node: Node::Directory,
        }
    }

    /// A file at `path` holding `data`, recorded at `mode`.
    pub fn file_of(path: impl Into<String>, data: &[u8], mode: u32) -> TreeEntry {
        TreeEntry {
            path: path.into(),
            node: Node::File {
                size: data.len() as u64,
                sha256: ObjectId::of(data),
                mode,
            },
        }
    }

    /// A symlink at `path` pointing at `target`.
    pub fn symlink(path: impl Into<String>, target: impl Into<String>) -> TreeEntry {
        TreeEntry {
            path: path.into(),
            node: Node::Symlink {
                target: target.into(),
            },
        }
    }

    /// The `kind` field: `directory`, `file` or `symlink`.
    pub fn kind(&self) -> &'static str {
        match self.node {
            Node::Directory => "directory",
            Node::File { .. } => "file",
            Node::Symlink { .. } => "symlink",
        }
    }

    /// The `size` field: a file's length, a symlink target's length in
    /// UTF-8 bytes, 0 for a directory.
    pub fn size(&self) -> u64 {
        match &self.node {
            Node::Directory => 0,
            Node::File { size, .. } => *size,
            Node::Symlink { target } => target.len() as u64,
        }
    }

    /// The SHA-256 behind the `sha256` field: a file's bytes', a symlink
    /// target's UTF-8 bytes'; none for a directory (the field is then `""`).
    pub fn sha256(&self) -> Option<ObjectId> {
        match &self.node {
            Node::Directory => None,
            Node::File { sha256, .. } => Some(*sha256),
            Node::Symlink { target } => Some(ObjectId::of(target.as_bytes())),
        }
    }

    /// The `mode` field: a file's recorded mode, 0 for the other kinds.
    pub fn mode(&self) -> u32 {
        match self.node {
            Node::File { mode, .. } => mode,
            Node::Directory | Node::Symlink { .. } => 0,
        }
    }

    /// The `link_target` field: a symlink's target, `""` for the other kinds.
    pub fn link_target(&self) -> &str {
        match &self.node {
            Node::Symlink { target } => target,
            Node::Directory | Node::File { .. } => "",
        }
    }
}

/// Puts entries in the order the harness lists them: by path as a string
/// (`sorted(..., key=lambda e: e.path.as_posix())`), which for UTF-8 is
/// the order of the paths' bytes. It is not the order of path components:
/// `a-b` and `a.txt` come before `a/b`.
pub fn sort_entries(entries: &mut [TreeEntry]) {
    entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
}

/// The last component of a dependency target that gets [`VITE_TEMP_DIR`].
pub const DEPENDENCY_MOUNT_BASENAME: &str = "node_modules";

/// The empty directory the harness adds inside a `node_modules` dependency,
/// where vite writes its compiled configuration.
pub const VITE_TEMP_DIR: &str = ".vite-temp";

/// Why an entry list cannot take an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    /// The path is taken by an entry of another kind.
    #[error("could not record the directory '{0}': an entry of another kind is at that path")]
    Collides(String),
}

/// Adds the entry the harness adds to a dependency before its digests are
/// taken: when the dependency's root (`payload`) is a directory and its
/// declared `target`'s last component (as `PurePosixPath(target).name`
/// reads it) is `node_modules`, an empty directory `payload/.vite-temp`,
/// at its place in the order of [`sort_entries`]. A directory already
/// there is kept as it is; nothing changes for any other dependency.
///
/// # Errors
///
/// [`TreeError::Collides`] when a file or symlink is at `payload/.vite-temp`,
/// which the harness refuses too.
pub fn add_vite_temp(entries: &mut Vec<TreeEntry>, target: &str) -> Result<(), TreeError> {
    let name = target
        .split('/')
        .rfind(|part| !part.is_empty() && *part != ".")
        .unwrap_or("");
    let root_is_directory = entries
        .iter()
        .any(|e| e.path == DEPENDENCY_ROOT && e.node == Node::Directory);
    if name != DEPENDENCY_MOUNT_BASENAME || !root_is_directory {
        return Ok(());
    }
    let path = format!("{DEPENDENCY_ROOT}/{VITE_TEMP_DIR}");
    match entries.iter().find(|e| e.path == path) {
        Some(e) if e.node == Node::Directory => Ok(()),
        Some(_) => Err(TreeError::Collides(path)),
        None => {
            let at = entries.partition_point(|e| e.path.as_bytes() < path.as_bytes());
            entries.insert(at, TreeEntry::directory(path));
            Ok(())
        }
    }
}

/// One declared sandbox dependency with the entries captured from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dependency {
    /// The declaration's `source`, exactly as the task wrote it.
    pub source: String,
    /// The declaration's `target`, exactly as the task wrote it.
    pub target: String,
    /// The entries, rooted at [`DEPENDENCY_ROOT`], in the order of
    /// [`sort_entries`].
    pub entries: Vec<TreeEntry>,
}
