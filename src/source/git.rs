//! The walk's git backend: a release read from a revision's tree, with no
//! checkout and no temporary file.
//!
//! The walk's rules are the reference's, applied to what `git checkout REV`
//! (or `git worktree add`) would put on disk, so that the digest, or the
//! refusal, is the one the reference gives on such a checkout:
//!
//! - a blob of mode `100755` is an executable file, any other blob a plain one;
//! - a symlink (`120000`) is a symlink: refused where the reference refuses
//!   one, followed inside the tree where the reference asks `exists()`, and
//!   never read where the reference never looks. One that leads out of the
//!   repository is refused ([`Rejection::SymlinkLeavesRepository`]): what a
//!   checkout finds there depends on the host;
//! - a submodule (`160000`) is an empty directory, as in a checkout that
//!   does not initialise it;
//! - a file whose checkout bytes would differ from its blob (the
//!   repository's attributes and configuration: `eol=crlf`, `text` with
//!   `core.autocrlf`, `ident`) is refused, and so is one a `filter=` driver or
//!   a `working-tree-encoding` would write ([`Rejection::CheckoutConverts`]).
//!
//! What git itself checks is checked first, as `git checkout` checks it
//! (see `git/revision.rs`, [`name`] and `git/objects.rs`):
//!
//! - every object read (the commit, any annotated tag on the way to it, every
//!   tree of the revision, the blobs of the plugin's files, symlink targets,
//!   `.gitattributes` files and `marketplace.json`) is checked against its
//!   id: a mismatch is refused ([`GitError::ObjectCorrupt`], rule
//!   `git-object-corrupt`), and so is an object the revision names but the
//!   repository lacks, where it is read (`git-object-missing`);
//! - every tree of the revision is checked as a checkout checks it: a tree
//!   git would not check out is refused ([`GitError::TreeInvalid`], rule
//!   `git-tree-invalid`; or `git-object-missing` for a blob it names that the
//!   repository lacks, except in a partial clone), and so is one `git fsck`
//!   calls broken in a way that leaves a checkout ill-defined (an empty name,
//!   a name with `/`, a name listed twice);
//! - every blob read for cestore's own use is bounded from its header before
//!   it is inflated: a plugin file by the per-file bound (`file-too-large`),
//!   `marketplace.json` by the same bound (`marketplace-invalid`), a symlink
//!   target by `PATH_MAX`, and an attributes file of 100 MiB or more is
//!   ignored, as git's `attr.c` ignores it (as are its lines of 2,048 bytes
//!   or more, and whatever follows a NUL); trees, commits and tags are
//!   bounded at 64 MiB (`git-object-too-large`).
//!
//! Of the blobs the walk never reads (files outside the plugin's directory)
//! only the header is read: their type, and that they are there.
//!
//! Paths in refusals read as a checkout at the repository's path would
//! name them: `REPO/<path in the repository>`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use gix::bstr::ByteSlice;
use gix::objs::tree::EntryKind;
use gix::ObjectId;
use rustix::io::Errno;

use super::{absolute_like_python, Fault, Kind, Node, Tree};
use crate::dirent::sort_like_python;
use crate::error::{Classified, Classify, Error, ErrorKind};
use crate::profile::ce::rules::{self as ce_rules, Rejection};

pub mod name;
mod objects;
mod revision;
pub mod trees;

use objects::Bad;
use revision::{bad_object, Revision};

/// How many symlinks a lookup follows before the system gives up (`ELOOP`).
const MAX_SYMLINK_HOPS: usize = 40;

/// Which directory of the revision holds the plugin.
#[derive(Clone, Copy, Debug)]
pub enum PluginDir<'a> {
    /// The repository's root.
    Root,
    /// This directory, relative to the repository's root.
    Subdir(&'a Path),
    /// The directory the revision's `.claude-plugin/marketplace.json` gives
    /// the plugin of this name, as Claude Code finds it when it installs
    /// from a marketplace.
    Plugin(&'a str),
}

/// A release to read from git: a repository, a revision, and where the plugin is.
#[derive(Clone, Copy, Debug)]
pub struct GitRequest<'a> {
    /// The repository: a work tree or a bare repository.
    pub repo: &'a Path,
    /// The revision: a tag, a branch, a commit, anything `git rev-parse` takes.
    pub rev: &'a str,
    /// The plugin's directory in it.
    pub dir: PluginDir<'a>,
}

/// Why a release could not be read from git, besides the rules the release
/// itself breaks.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The repository cannot be opened.
    #[error("could not open the git repository '{}': {reason}", .path.display())]
    Open {
        /// The repository, absolute.
        path: PathBuf,
        /// What git said.
        reason: String,
    },
    /// The revision names no commit.
    #[error("could not resolve the revision '{rev}' to a commit in '{}': {reason}", .repo.display())]
    Revision {
        /// The repository, absolute.
        repo: PathBuf,
        /// The revision as given.
        rev: String,
        /// What git said.
        reason: String,
    },
    /// An object of the repository cannot be read.
    #[error("could not read the git object {what} of '{}': {reason}", .repo.display())]
    Read {
        /// The repository, absolute.
        repo: PathBuf,
        /// Which object, and where it is in the tree.
        what: String,
        /// What git said.
        reason: String,
    },
    /// The repository's attributes or configuration cannot be read.
    #[error("could not read the attributes of '{}': {reason}", .repo.display())]
    Attributes {
        /// The repository, absolute.
        repo: PathBuf,
        /// What git said.
        reason: String,
    },
    /// The plugin's directory was not given as a plain relative path.
    #[error("the plugin directory '{subdir}' is not a relative path inside the repository: give one such as plugins/NAME, with no '..'")]
    Subdir {
        /// The directory as given.
        subdir: String,
    },
    /// The revision has no marketplace to find the plugin in.
    #[error("could not find the marketplace '{}' at the revision '{rev}'", .path.display())]
    NoMarketplace {
        /// Where a checkout would hold it.
        path: PathBuf,
        /// The revision as given.
        rev: String,
    },
    /// The marketplace is not what Claude Code reads.
    #[error("the marketplace '{}' is invalid: {reason}", .path.display())]
    MarketplaceInvalid {
        /// Where a checkout would hold it.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The marketplace lists no plugin of the name.
    #[error("the marketplace '{}' at the revision '{rev}' lists no plugin named '{name}'; {}", .path.display(), listing(.listed))]
    PluginNotListed {
        /// Where a checkout would hold it.
        path: PathBuf,
        /// The revision as given.
        rev: String,
        /// The plugin's name.
        name: String,
        /// The names it lists.
        listed: Vec<String>,
    },
    /// The revision's root is no plugin, but a marketplace of plugins: the
    /// reference's `manifest-missing`, with what to ask for instead.
    #[error("the revision '{rev}' (commit {commit}) has no plugin at its root: '{}' is missing; {} (give --plugin NAME), or give --subdir PATH for a plugin elsewhere", .path.display(), listing(.listed))]
    MarketplaceRoot {
        /// Where a checkout would hold the profile's missing manifest file.
        path: PathBuf,
        /// The revision as given.
        rev: String,
        /// Its commit.
        commit: ObjectId,
        /// The plugins its marketplace lists.
        listed: Vec<String>,
    },
    /// The marketplace gives the plugin a source outside the repository.
    #[error("the marketplace '{}' gives the plugin '{name}' the source {source_given}, which is not a directory inside the repository; only a relative path such as ./plugins/{name} is read from git", .path.display())]
    PluginSourceOutside {
        /// Where a checkout would hold it.
        path: PathBuf,
        /// The plugin's name.
        name: String,
        /// The source, as JSON.
        source_given: String,
    },
    /// An object of the revision is not what its id names: its bytes hash to
    /// another id, or they are not an object of its type.
    #[error("could not trust the git object {id} at '{}': {reason}", .path.display())]
    ObjectCorrupt {
        /// Where a checkout would write what the object holds (the
        /// repository itself for a commit or a tag).
        path: PathBuf,
        /// The object's id.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An object the revision names, and cestore must read, is not in the
    /// repository.
    #[error("could not find the git object {id} at '{}' in the repository, so no checkout can write it", .path.display())]
    ObjectMissing {
        /// Where a checkout would write it.
        path: PathBuf,
        /// The object's id.
        id: String,
    },
    /// A tree, commit or tag object is larger than cestore reads.
    #[error("could not read the git object {id} at '{}': it holds {size} bytes, more than the {limit} read of a tree, commit or tag", .path.display())]
    ObjectTooLarge {
        /// Where a checkout would write it.
        path: PathBuf,
        /// The object's id.
        id: String,
        /// Its size, from its header.
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// A tree capture reaches a submodule: what a checkout holds there
    /// depends on whether it is initialised.
    #[error("could not capture '{}': it is a submodule (git mode 160000), whose checkout holds what its own repository does or nothing; declare paths that hold no submodule", .path.display())]
    Submodule {
        /// Where a checkout would put it.
        path: PathBuf,
    },
    /// The revision holds a path git would not check out, or a tree `git
    /// fsck` calls broken in a way that leaves a checkout ill-defined.
    #[error("could not check out '{}' as git would: {reason}", .path.display())]
    TreeInvalid {
        /// Where a checkout would write the path (for an empty name, the
        /// tree that lists it).
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// What a marketplace lists, in words: `it lists the plugins a, b`.
fn listing(listed: &[String]) -> String {
    if listed.is_empty() {
        "its marketplace lists no plugin".into()
    } else {
        format!("its marketplace lists the plugins {}", listed.join(", "))
    }
}

impl Classify for GitError {
    fn kind(&self) -> ErrorKind {
        match self {
            GitError::Open { .. }
            | GitError::Revision { .. }
            | GitError::NoMarketplace { .. }
            | GitError::PluginNotListed { .. } => ErrorKind::NotFound,
            GitError::Read { .. } | GitError::Attributes { .. } => ErrorKind::Io,
            GitError::Subdir { .. } => ErrorKind::Usage,
            GitError::MarketplaceInvalid { .. }
            | GitError::PluginSourceOutside { .. }
            | GitError::MarketplaceRoot { .. }
            | GitError::ObjectCorrupt { .. }
            | GitError::ObjectMissing { .. }
            | GitError::ObjectTooLarge { .. }
            | GitError::Submodule { .. }
            | GitError::TreeInvalid { .. } => ErrorKind::Rejected,
        }
    }

    fn rule(&self) -> Option<&'static str> {
        match self {
            GitError::MarketplaceInvalid { .. } => Some("marketplace-invalid"),
            GitError::PluginSourceOutside { .. } => Some("plugin-source-outside"),
            GitError::MarketplaceRoot { .. } => Some("manifest-missing"),
            GitError::ObjectCorrupt { .. } => Some("git-object-corrupt"),
            GitError::ObjectMissing { .. } => Some("git-object-missing"),
            GitError::ObjectTooLarge { .. } => Some("git-object-too-large"),
            GitError::TreeInvalid { .. } => Some("git-tree-invalid"),
            GitError::Submodule { .. } => Some("git-submodule"),
            _ => None,
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            GitError::Open { path, .. }
            | GitError::NoMarketplace { path, .. }
            | GitError::MarketplaceInvalid { path, .. }
            | GitError::PluginNotListed { path, .. }
            | GitError::MarketplaceRoot { path, .. }
            | GitError::PluginSourceOutside { path, .. }
            | GitError::ObjectCorrupt { path, .. }
            | GitError::ObjectMissing { path, .. }
            | GitError::ObjectTooLarge { path, .. }
            | GitError::Submodule { path }
            | GitError::TreeInvalid { path, .. } => Some(path),
            GitError::Revision { repo, .. }
            | GitError::Read { repo, .. }
            | GitError::Attributes { repo, .. } => Some(repo),
            GitError::Subdir { .. } => None,
        }
    }

    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }
}

impl From<GitError> for Error {
    fn from(e: GitError) -> Self {
        Error::Git(Classified::new(e))
    }
}

/// One entry of a tree.
#[derive(Clone, Debug)]
pub(super) struct GitEntry {
    name: Vec<u8>,
    kind: EntryKind,
    id: ObjectId,
}

/// A directory of the revision: its path in the repository and its entries,
/// sorted by name. A submodule is a directory with no entries.
pub(super) struct GitDir {
    rel: Vec<u8>,
    entries: Vec<GitEntry>,
}

impl GitDir {
    fn find(&self, name: &[u8]) -> Option<&GitEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// The path in the repository of `name` in this directory.
    fn child(&self, name: &[u8]) -> Vec<u8> {
        let mut rel = self.rel.clone();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(name);
        rel
    }
}

/// The attribute lookups and the checkout conversion of one revision.
struct Checkout {
    stack: gix::worktree::Stack,
    outcome: gix::attrs::search::Outcome,
    pipeline: gix::filter::plumbing::Pipeline,
    /// The settings that convert line endings when no attribute says so.
    config: String,
}

/// The attributes whose settings a refusal names.
const CONVERTING: [&str; 6] = [
    "text",
    "eol",
    "crlf",
    "ident",
    "filter",
    "working-tree-encoding",
];

/// A plugin directory of a revision, read from the repository's objects.
pub(super) struct GitTree {
    repo: gix::Repository,
    /// The repository as given, absolute: the checkout's root in paths.
    repo_path: PathBuf,
    /// The plugin directory, where a checkout would put it.
    root: PathBuf,
    /// The plugin directory's path in the repository (empty at the root).
    prefix: Vec<u8>,
    commit: ObjectId,
    root_tree: ObjectId,
    /// The plugin directory's tree; `None` for a submodule.
    dir_tree: Option<ObjectId>,
    root_dir: GitDir,
    /// Every tree and symlink of the revision, read and checked.
    revision: Revision,
    checkout: RefCell<Checkout>,
    /// The revision as given.
    rev: String,
    /// The attribute files read so far, checked.
    attributes_kept: RefCell<HashMap<ObjectId, Vec<u8>>>,
    /// The first attribute file that could not be read, and why.
    attributes_fault: RefCell<Option<(ObjectId, Bad)>>,
}

/// Why a revision's plugin directory could not be opened: it breaks a rule,
/// or the repository could not be read.
pub(super) enum OpenError {
    /// The directory breaks one of the reference's rules.
    Rejected(Rejection),
    /// The repository could not be read, or the request names nothing in it.
    Git(GitError),
}

impl From<Rejection> for OpenError {
    fn from(r: Rejection) -> Self {
        OpenError::Rejected(r)
    }
}

impl From<GitError> for OpenError {
    fn from(e: GitError) -> Self {
        OpenError::Git(e)
    }
}

impl From<OpenError> for Error {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Rejected(r) => r.into(),
            OpenError::Git(e) => e.into(),
        }
    }
}

impl GitTree {
    /// Opens the repository, resolves the revision and finds the plugin's
    /// directory in its tree.
    pub(super) fn open(request: &GitRequest<'_>) -> Result<GitTree, OpenError> {
        let repo_path = absolute_like_python(request.repo);
        let repo = gix::open(&repo_path).map_err(|e| GitError::Open {
            path: repo_path.clone(),
            reason: reason(&e),
        })?;
        let revision = |e: gix::Error| GitError::Revision {
            repo: repo_path.clone(),
            rev: request.rev.to_string(),
            reason: reason(&e),
        };
        let named = repo
            .rev_parse_single(request.rev)
            .map_err(revision)?
            .detach();
        let (commit_id, root_tree) =
            objects::peel_to_commit(&repo, named).map_err(|(at, bad)| match bad {
                Bad::Kind { found, .. } => GitError::Revision {
                    repo: repo_path.clone(),
                    rev: request.rev.to_string(),
                    reason: format!("it names a {found}, not a commit"),
                },
                Bad::Missing => GitError::Revision {
                    repo: repo_path.clone(),
                    rev: request.rev.to_string(),
                    reason: format!("the object {at} is not in the repository"),
                },
                other => bad_object(&repo_path, b"", at, other),
            })?;
        GitTree::at_commit(repo, repo_path, commit_id, root_tree, request)
    }

    /// Finds the plugin's directory in the tree of `commit` (whose root tree
    /// is `root_tree`) of an open repository at `repo_path`, absolute; only
    /// `request.dir` and, in messages, `request.rev` are read of `request`.
    pub(super) fn at_commit(
        repo: gix::Repository,
        repo_path: PathBuf,
        commit: ObjectId,
        root_tree: ObjectId,
        request: &GitRequest<'_>,
    ) -> Result<GitTree, OpenError> {
        let fold = repo
            .config_snapshot()
            .boolean("core.ignoreCase")
            .unwrap_or(false);
        let revision = Revision::read(&repo, &repo_path, root_tree, protect(&repo), fold)?;
        let checkout = checkout(&repo, &repo_path, revision.attributes())?;
        let mut tree = GitTree {
            repo,
            root: repo_path.clone(),
            repo_path,
            prefix: Vec::new(),
            commit,
            root_tree,
            dir_tree: Some(root_tree),
            root_dir: GitDir {
                rel: Vec::new(),
                entries: Vec::new(),
            },
            revision,
            checkout: RefCell::new(checkout),
            rev: request.rev.to_string(),
            attributes_kept: RefCell::new(HashMap::new()),
            attributes_fault: RefCell::new(None),
        };
        let parts = match request.dir {
            PluginDir::Root => {
                tree.check_root_is_a_plugin(request.rev)?;
                Vec::new()
            }
            PluginDir::Subdir(dir) => {
                plain_parts(dir.as_os_str().as_bytes()).ok_or_else(|| GitError::Subdir {
                    subdir: dir.display().to_string(),
                })?
            }
            PluginDir::Plugin(name) => tree.plugin_parts(name, request.rev)?,
        };
        tree.prefix = parts.join(&b'/');
        tree.root = tree.checkout_path(&tree.prefix);
        let (dir, dir_tree) = tree.plugin_dir(&parts)?;
        tree.root_dir = dir;
        tree.dir_tree = dir_tree;
        Ok(tree)
    }

    /// The open repository.
    pub(super) fn repo(&self) -> &gix::Repository {
        &self.repo
    }

    /// The repository as given, absolute.
    pub(super) fn repo_path(&self) -> &Path {
        &self.repo_path
    }

    /// The revision as given.
    pub(super) fn rev(&self) -> &str {
        &self.rev
    }

    /// The revision's commit.
    pub(super) fn commit(&self) -> ObjectId {
        self.commit
    }

    /// The revision's root tree.
    pub(super) fn root_tree(&self) -> ObjectId {
        self.root_tree
    }

    /// The plugin directory's tree; `None` when it is a submodule.
    pub(super) fn dir_tree(&self) -> Option<ObjectId> {
        self.dir_tree
    }

    /// The plugin directory's path in the repository, `/`-separated (empty
    /// at the root).
    pub(super) fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// How reports name the source: `git:REPO@COMMIT:PATH`.
    pub(super) fn shown(&self) -> String {
        format!(
            "git:{}@{}:{}",
            self.repo_path.display(),
            self.commit,
            String::from_utf8_lossy(&self.prefix)
        )
    }

    /// Where a checkout at the repository's path would put `rel`.
    fn checkout_path(&self, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            self.repo_path.clone()
        } else {
            self.repo_path.join(std::ffi::OsStr::from_bytes(rel))
        }
    }

    /// The error for object `id` at `rel` that could not be read.
    fn bad(&self, rel: &[u8], id: ObjectId, bad: Bad) -> GitError {
        bad_object(&self.repo_path, rel, id, bad)
    }

    /// The entries of tree `id` (at `rel`), sorted by name: read and checked
    /// with the revision's.
    fn entries(&self, id: ObjectId, rel: &[u8]) -> Result<Vec<GitEntry>, GitError> {
        match self.revision.tree(id) {
            Some(entries) => Ok(entries.to_vec()),
            // Every tree the walk reaches is the revision's; one that is
            // not is read and checked alike.
            None => Ok(revision::read_tree(&self.repo, &self.repo_path, id, rel)?.to_vec()),
        }
    }

    /// The entry `name` of tree `id` (at `rel`).
    fn entry(&self, id: ObjectId, rel: &[u8], name: &[u8]) -> Result<Option<GitEntry>, GitError> {
        let entries = self.entries(id, rel)?;
        Ok(entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| entries[i].clone()))
    }

    /// The target of symlink `id` (at `rel`), as a checkout writes it.
    fn link_target(&self, id: ObjectId, rel: &[u8]) -> Result<Vec<u8>, GitError> {
        if let Some(target) = self.revision.link(id) {
            return Ok(target.to_vec());
        }
        revision::link_target(&self.repo, &self.repo_path, id, rel)?
            .ok_or_else(|| self.bad(rel, id, Bad::Missing))
    }

    /// The revision's marketplace (`.claude-plugin/marketplace.json`):
    /// where a checkout would hold it, and its list of plugins; `None` when
    /// the revision has none.
    fn marketplace(&self) -> Result<Option<(PathBuf, Vec<serde_json::Value>)>, OpenError> {
        let rel = format!("{}/marketplace.json", ce_rules::MANIFEST_DIR);
        let path = self.checkout_path(rel.as_bytes());
        let manifest_dir = self.entry(self.root_tree, b"", ce_rules::MANIFEST_DIR.as_bytes())?;
        let file = match manifest_dir {
            Some(GitEntry {
                kind: EntryKind::Tree,
                id,
                ..
            }) => self.entry(id, ce_rules::MANIFEST_DIR.as_bytes(), b"marketplace.json")?,
            _ => None,
        };
        let Some(GitEntry {
            kind: EntryKind::Blob | EntryKind::BlobExecutable,
            id,
            ..
        }) = file
        else {
            return Ok(None);
        };
        let invalid = |reason: String| GitError::MarketplaceInvalid {
            path: path.clone(),
            reason,
        };
        let bytes = match objects::read(&self.repo, id, gix::objs::Kind::Blob, MARKETPLACE_BYTES) {
            Ok(bytes) => bytes,
            Err(Bad::TooLarge { size, limit }) => {
                return Err(invalid(format!(
                    "it holds {size} bytes, more than the {limit} a plugin's file may hold"
                ))
                .into())
            }
            Err(bad) => return Err(self.bad(rel.as_bytes(), id, bad).into()),
        };
        let json: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
        let plugins = json
            .get("plugins")
            .and_then(|p| p.as_array())
            .ok_or_else(|| invalid("it has no \"plugins\" list".into()))?;
        Ok(Some((path, plugins.clone())))
    }

    /// The names a marketplace's plugins list gives, in its order.
    fn names(plugins: &[serde_json::Value]) -> Vec<String> {
        plugins
            .iter()
            .filter_map(|p| p.get("name").and_then(|n| n.as_str()))
            .map(str::to_string)
            .collect()
    }

    /// Refuses a revision whose root holds no manifest file but a
    /// marketplace, naming its plugins: the reference's `manifest-missing`
    /// (same rule, same path), with the flags that find a plugin instead.
    fn check_root_is_a_plugin(&self, rev: &str) -> Result<(), OpenError> {
        let rel = super::layout_file(&crate::profile::ce::CE, 0);
        let has_manifest =
            match self.entry(self.root_tree, b"", ce_rules::MANIFEST_DIR.as_bytes())? {
                Some(GitEntry {
                    kind: EntryKind::Tree,
                    id,
                    ..
                }) => self
                    .entry(
                        id,
                        ce_rules::MANIFEST_DIR.as_bytes(),
                        ce_rules::MANIFESTS[0].as_bytes(),
                    )?
                    .is_some(),
                _ => false,
            };
        if has_manifest {
            return Ok(());
        }
        let Ok(Some((_, plugins))) = self.marketplace() else {
            return Ok(());
        };
        Err(GitError::MarketplaceRoot {
            path: self.checkout_path(rel.as_bytes()),
            rev: rev.to_string(),
            commit: self.commit,
            listed: Self::names(&plugins),
        }
        .into())
    }

    /// The plugin directory's path in the repository, from the revision's
    /// marketplace.
    fn plugin_parts(&self, name: &str, rev: &str) -> Result<Vec<Vec<u8>>, OpenError> {
        let Some((path, plugins)) = self.marketplace()? else {
            let rel = format!("{}/marketplace.json", ce_rules::MANIFEST_DIR);
            return Err(GitError::NoMarketplace {
                path: self.checkout_path(rel.as_bytes()),
                rev: rev.to_string(),
            }
            .into());
        };
        let invalid = |reason: String| GitError::MarketplaceInvalid {
            path: path.clone(),
            reason,
        };
        let plugin = plugins
            .iter()
            .find(|p| p.get("name").and_then(|n| n.as_str()) == Some(name))
            .ok_or_else(|| GitError::PluginNotListed {
                path: path.clone(),
                rev: rev.to_string(),
                name: name.to_string(),
                listed: Self::names(&plugins),
            })?;
        let source = plugin
            .get("source")
            .ok_or_else(|| invalid(format!("the plugin '{name}' has no \"source\"")))?;
        let outside = || GitError::PluginSourceOutside {
            path: path.clone(),
            name: name.to_string(),
            source_given: source.to_string(),
        };
        let text = source.as_str().ok_or_else(outside)?;
        if text.contains("://") || text.starts_with("git@") {
            return Err(outside().into());
        }
        Ok(plain_parts(text.as_bytes()).ok_or_else(outside)?)
    }

    /// The plugin directory at `parts`, checked as the reference checks a
    /// source directory: there, a directory, reached by no symlink; and its
    /// tree (`None` for a submodule).
    fn plugin_dir(&self, parts: &[Vec<u8>]) -> Result<(GitDir, Option<ObjectId>), OpenError> {
        let unavailable = |errno: Errno| Rejection::SourceUnavailable {
            path: self.root.clone(),
            source: errno.into(),
        };
        let mut dir = GitDir {
            rel: Vec::new(),
            entries: self.entries(self.root_tree, b"")?,
        };
        let mut tree = Some(self.root_tree);
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            let entry = dir.find(part).cloned();
            let rel = dir.child(part);
            dir = match entry {
                None => return Err(unavailable(Errno::NOENT).into()),
                Some(e) => match e.kind {
                    EntryKind::Tree => {
                        tree = Some(e.id);
                        GitDir {
                            entries: self.entries(e.id, &rel)?,
                            rel,
                        }
                    }
                    EntryKind::Commit => {
                        tree = None;
                        GitDir {
                            rel,
                            entries: Vec::new(),
                        }
                    }
                    EntryKind::Blob | EntryKind::BlobExecutable if !last => {
                        return Err(unavailable(Errno::NOTDIR).into())
                    }
                    EntryKind::Blob | EntryKind::BlobExecutable | EntryKind::Link => {
                        return Err(Rejection::SourceNotRealDirectory {
                            path: self.root.clone(),
                        }
                        .into())
                    }
                },
            };
        }
        Ok((dir, tree))
    }

    /// Python's `exists()` of the symlink `link` in `dir`: follows it, and
    /// every symlink after it, inside the revision's tree.
    fn link_exists(&self, dir: &GitDir, link: &GitEntry) -> Result<bool, Fault> {
        let link_rel = dir.child(&link.name);
        let leaves = |target: &[u8]| Rejection::SymlinkLeavesRepository {
            path: self.checkout_path(&link_rel),
            target: String::from_utf8_lossy(target).into_owned(),
        };
        // The trees from the root to where the lookup stands; `None` is a
        // submodule, an empty directory.
        let mut at: Vec<(Vec<u8>, Option<ObjectId>)> = vec![(Vec::new(), Some(self.root_tree))];
        let mut tree = self.root_tree;
        for part in dir.rel.split(|b| *b == b'/').filter(|p| !p.is_empty()) {
            let rel = at.last().map(|(r, _)| r.clone()).unwrap_or_default();
            let next = self.entry(tree, &rel, part)?;
            let child = join(&rel, part);
            match next {
                Some(GitEntry {
                    kind: EntryKind::Tree,
                    id,
                    ..
                }) => {
                    tree = id;
                    at.push((child, Some(id)));
                }
                // The walk reached `dir` through trees only; a submodule
                // above it would have been empty.
                _ => return Ok(false),
            }
        }
        let mut pending: std::collections::VecDeque<Vec<u8>> = std::collections::VecDeque::new();
        let mut hops = 0;
        let mut next_link = Some(link.id);
        let mut first_target = None;
        loop {
            if let Some(id) = next_link.take() {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Ok(false);
                }
                let target = self.link_target(id, &link_rel)?;
                if target.is_empty() {
                    return Ok(false);
                }
                let shown = first_target.get_or_insert_with(|| target.clone());
                if target.starts_with(b"/") {
                    return Err(leaves(shown).into());
                }
                for part in target.split(|b| *b == b'/').rev() {
                    pending.push_front(part.to_vec());
                }
            }
            let Some(part) = pending.pop_front() else {
                return Ok(true);
            };
            match part.as_slice() {
                b"" | b"." => continue,
                b".." if at.len() == 1 => {
                    let shown = first_target.as_deref().unwrap_or_default();
                    return Err(leaves(shown).into());
                }
                b".." => {
                    at.pop();
                    continue;
                }
                _ => {}
            }
            let Some((rel, Some(tree))) = at.last().cloned() else {
                // Inside a submodule: nothing is there.
                return Ok(false);
            };
            let child = join(&rel, &part);
            match self.entry(tree, &rel, &part)? {
                None => return Ok(false),
                Some(e) => match e.kind {
                    EntryKind::Tree => at.push((child, Some(e.id))),
                    EntryKind::Commit => at.push((child, None)),
                    EntryKind::Blob | EntryKind::BlobExecutable => return Ok(pending.is_empty()),
                    EntryKind::Link => next_link = Some(e.id),
                },
            }
        }
    }

    /// The error for attributes that could not be read for `rel`: an
    /// attribute file that failed its checks, or what gix said.
    fn attributes_error(&self, rel: &[u8], e: io::Error) -> GitError {
        if let Some((id, bad)) = self.attributes_fault.borrow_mut().take() {
            let at = self
                .revision
                .attributes()
                .iter()
                .find(|(_, a)| *a == id)
                .map(|(path, _)| path.as_slice())
                .unwrap_or(b".gitattributes");
            return self.bad(at, id, bad);
        }
        GitError::Attributes {
            repo: self.repo_path.clone(),
            reason: format!("{}: {e}", String::from_utf8_lossy(rel)),
        }
    }

    /// Refuses a file whose checkout would not hold its blob unchanged.
    fn check_checkout(
        &self,
        rel: &[u8],
        data: &[u8],
        path: &dyn Fn() -> PathBuf,
    ) -> Result<(), Fault> {
        use gix::attrs::StateRef;
        use gix::filter::plumbing::pipeline::convert::{to_worktree, ToWorktreeOutcome};
        let mut checkout = self.checkout.borrow_mut();
        let Checkout {
            stack,
            outcome,
            pipeline,
            config,
        } = &mut *checkout;
        let files = objects::AttributeFiles {
            repo: &self.repo,
            kept: &self.attributes_kept,
            fault: &self.attributes_fault,
        };
        let platform = stack
            .at_entry(rel.as_bstr(), Some(gix::index::entry::Mode::FILE), &files)
            .map_err(|e| self.attributes_error(rel, e))?;
        platform.matching_attributes(outcome);
        let mut named = Vec::new();
        let mut driven = None;
        for m in outcome.iter_selected() {
            let name = m.assignment.name.as_str();
            match m.assignment.state {
                StateRef::Unspecified => {}
                StateRef::Set => named.push(name.to_string()),
                StateRef::Unset => named.push(format!("-{name}")),
                StateRef::Value(v) => {
                    let setting = format!("{name}={}", v.as_bstr());
                    if matches!(name, "filter" | "working-tree-encoding") {
                        driven.get_or_insert_with(|| setting.clone());
                    }
                    named.push(setting);
                }
            }
        }
        if let Some(attribute) = driven {
            return Err(Rejection::CheckoutConverts {
                path: path(),
                attribute,
            }
            .into());
        }
        let converted = pipeline.convert_to_worktree(
            data,
            rel.as_bstr(),
            &mut |_, out| {
                platform.matching_attributes(out);
            },
            to_worktree::Options {
                can_delay: gix::filter::plumbing::driver::apply::Delay::Forbid,
                unknown_encoding: to_worktree::UnknownEncoding::Fail,
            },
        );
        let unchanged = match converted {
            Ok(ToWorktreeOutcome::Unchanged(_)) => true,
            Ok(ToWorktreeOutcome::Buffer(bytes)) => bytes == data,
            Ok(ToWorktreeOutcome::Process(_)) | Err(_) => false,
        };
        if unchanged {
            return Ok(());
        }
        if !config.is_empty() {
            named.push(config.clone());
        }
        Err(Rejection::CheckoutConverts {
            path: path(),
            attribute: named.join(" "),
        }
        .into())
    }
}

/// The commit object `id` names (through annotated tags) in the repository
/// at `repo_path`, and its root tree: each object on the way checked
/// against its id.
pub(super) fn commit_and_tree(
    repo: &gix::Repository,
    repo_path: &Path,
    id: ObjectId,
) -> Result<(ObjectId, ObjectId), GitError> {
    objects::peel_to_commit(repo, id).map_err(|(at, bad)| bad_object(repo_path, b"", at, bad))
}

/// The commit a tag's target `id` leads to, each object on the way checked
/// against its id; `None` when one cannot be read or trusted.
pub(super) fn tagged_commit(repo: &gix::Repository, id: ObjectId) -> Option<ObjectId> {
    objects::peel_to_commit(repo, id)
        .ok()
        .map(|(commit, _)| commit)
}

/// The tree at `path` (`/`-separated, empty for the root) of the root tree
/// `root_tree`, each tree on the way read and checked as the revision's
/// are; `None` when nothing, or no tree, is there.
pub(super) fn tree_at(
    repo: &gix::Repository,
    repo_path: &Path,
    root_tree: ObjectId,
    path: &[u8],
) -> Result<Option<ObjectId>, GitError> {
    let mut tree = root_tree;
    let mut rel = Vec::new();
    for part in path.split(|b| *b == b'/').filter(|p| !p.is_empty()) {
        let entries = revision::read_tree(repo, repo_path, tree, &rel)?;
        match entries.iter().find(|e| e.name == part) {
            Some(e) if e.kind == EntryKind::Tree => tree = e.id,
            _ => return Ok(None),
        }
        rel = join(&rel, part);
    }
    Ok(Some(tree))
}

/// `rel/part`, or `part` at the root.
fn join(rel: &[u8], part: &[u8]) -> Vec<u8> {
    let mut out = rel.to_vec();
    if !out.is_empty() {
        out.push(b'/');
    }
    out.extend_from_slice(part);
    out
}

/// The parts of a plain relative path (`./` and empty parts dropped); `None`
/// for an absolute path or one with `..`.
fn plain_parts(path: &[u8]) -> Option<Vec<Vec<u8>>> {
    if path.starts_with(b"/") {
        return None;
    }
    let mut parts = Vec::new();
    for part in path.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => return None,
            _ => parts.push(part.to_vec()),
        }
    }
    Some(parts)
}

/// The attribute stack and the checkout conversion of the revision whose
/// root tree is `tree`: attributes from its `.gitattributes` blobs and the
/// repository's own files, conversions from its configuration, and no
/// filter driver, so that nothing outside runs.
fn checkout(
    repo: &gix::Repository,
    repo_path: &Path,
    attribute_files: &[(Vec<u8>, ObjectId)],
) -> Result<Checkout, GitError> {
    let failed = |e: gix::Error| GitError::Attributes {
        repo: repo_path.to_path_buf(),
        reason: reason(&e),
    };
    // An index of the attribute files alone: the lookups find them in it.
    // Git reads one whatever its mode (executable, or a symlink whose
    // target is read as its text); the lookups read only regular files, so
    // each is listed as one.
    let mut index = gix::index::State::new(repo.object_hash());
    for (path, id) in attribute_files {
        index.dangerously_push_entry(
            gix::index::entry::Stat::default(),
            *id,
            gix::index::entry::Flags::empty(),
            gix::index::entry::Mode::FILE,
            path.as_bstr(),
        );
    }
    index.sort_entries();
    let stack = repo
        .attributes_only(
            &index,
            gix::worktree::stack::state::attributes::Source::IdMapping,
        )
        .map_err(failed)?
        .detach();
    let outcome = stack.selected_attribute_matches(CONVERTING);
    let mut options = gix::filter::Pipeline::options(repo).map_err(failed)?;
    options.drivers.clear();
    let pipeline = gix::filter::plumbing::Pipeline::new(
        repo.command_context().map_err(failed)?,
        repo.object_hash(),
        options,
    );
    Ok(Checkout {
        stack,
        outcome,
        pipeline,
        config: conversion_config(repo),
    })
}

/// The most bytes of a `marketplace.json` read: the reference's bound on a
/// plugin's file.
const MARKETPLACE_BYTES: u64 = ce_rules::MAX_FILE_BYTES;

/// The protections of the repository's checkouts: `core.protectNTFS` and
/// `core.protectHFS`, as git reads them (git's defaults on this platform).
fn protect(repo: &gix::Repository) -> name::Protect {
    let config = repo.config_snapshot();
    name::Protect {
        ntfs: config
            .boolean("core.protectNTFS")
            .unwrap_or(name::Protect::DEFAULT.ntfs),
        hfs: config
            .boolean("core.protectHFS")
            .unwrap_or(name::Protect::DEFAULT.hfs),
    }
}

/// The repository's settings that convert line endings when no attribute
/// says so, as refusals name them: `core.autocrlf=… core.eol=…`, each only
/// when set; empty when neither is.
pub(super) fn conversion_config(repo: &gix::Repository) -> String {
    let snapshot = repo.config_snapshot();
    ["core.autocrlf", "core.eol"]
        .iter()
        .filter_map(|key| snapshot.string(*key).map(|v| format!("{key}={v}")))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Tree for GitTree {
    type Dir = GitDir;
    type Raw = GitEntry;

    fn root_path(&self) -> &Path {
        &self.root
    }

    fn root_dir(&self) -> &GitDir {
        &self.root_dir
    }

    fn lstat(&self, dir: &GitDir, name: &[u8]) -> Result<Node<GitEntry>, Fault> {
        let Some(entry) = dir.find(name) else {
            return Err(Errno::NOENT.into());
        };
        let (kind, executable) = match entry.kind {
            EntryKind::Tree | EntryKind::Commit => (Kind::Directory, false),
            EntryKind::Blob => (Kind::File, false),
            EntryKind::BlobExecutable => (Kind::File, true),
            EntryKind::Link => (Kind::Symlink, false),
        };
        let size = if kind == Kind::File {
            let rel = dir.child(name);
            match objects::header(&self.repo, entry.id) {
                Ok((gix::objs::Kind::Blob, size)) => size,
                Ok((found, _)) => {
                    let bad =
                        objects::wrong_kind(&self.repo, entry.id, gix::objs::Kind::Blob, found);
                    return Err(self.bad(&rel, entry.id, bad).into());
                }
                Err(bad) => return Err(self.bad(&rel, entry.id, bad).into()),
            }
        } else {
            0
        };
        Ok(Node {
            kind,
            size,
            executable,
            raw: entry.clone(),
        })
    }

    fn exists(&self, dir: &GitDir, name: &[u8]) -> Result<bool, Fault> {
        match dir.find(name) {
            None => Ok(false),
            Some(e) if e.kind == EntryKind::Link => self.link_exists(dir, e),
            Some(_) => Ok(true),
        }
    }

    fn open_dir(
        &self,
        parent: &GitDir,
        name: &[u8],
        seen: &Node<GitEntry>,
        _listing: bool,
        _path: &Path,
    ) -> Result<GitDir, Fault> {
        let rel = parent.child(name);
        let entries = match seen.raw.kind {
            EntryKind::Tree => self.entries(seen.raw.id, &rel)?,
            _ => Vec::new(),
        };
        Ok(GitDir { rel, entries })
    }

    fn list(&self, dir: &GitDir) -> Result<Vec<Vec<u8>>, Fault> {
        let mut names: Vec<Vec<u8>> = dir.entries.iter().map(|e| e.name.clone()).collect();
        sort_like_python(&mut names);
        Ok(names)
    }

    fn read(
        &self,
        dir: &GitDir,
        name: &[u8],
        _rel: &[u8],
        seen: &Node<GitEntry>,
        max: u64,
        buf: &mut Vec<u8>,
        path: &dyn Fn() -> PathBuf,
    ) -> Result<(), Fault> {
        let rel = dir.child(name);
        let too_large = || Rejection::FileTooLarge {
            path: path(),
            limit: max,
        };
        // The header's size, which lstat gave, is checked before the blob
        // is inflated; the blob, once read, against its id.
        if seen.size > max {
            return Err(too_large().into());
        }
        let data = match objects::read(&self.repo, seen.raw.id, gix::objs::Kind::Blob, max) {
            Ok(data) => data,
            Err(Bad::TooLarge { .. }) => return Err(too_large().into()),
            Err(bad) => return Err(self.bad(&rel, seen.raw.id, bad).into()),
        };
        self.check_checkout(&rel, &data, path)?;
        buf.extend_from_slice(&data);
        Ok(())
    }

    fn names_at(&self, rel: &str) -> Vec<Vec<u8>> {
        if rel.is_empty() {
            return self
                .root_dir
                .entries
                .iter()
                .map(|e| e.name.clone())
                .collect();
        }
        match self.root_dir.find(rel.as_bytes()) {
            Some(GitEntry {
                kind: EntryKind::Tree,
                id,
                ..
            }) => self
                .entries(*id, &self.root_dir.child(rel.as_bytes()))
                .map(|entries| entries.into_iter().map(|e| e.name).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }
}

/// What git said, on one line: the error and its causes.
pub(super) fn reason(e: &gix::Error) -> String {
    crate::error::error_chain(e).replace('\n', " ")
}
