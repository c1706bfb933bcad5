//! Where a release read from a directory, or from a git revision, came from:
//! the source record of an ingest.
//!
//! An ingest of a directory inside a git work tree records the repository,
//! the commit at `HEAD`, the directory's path in it, a tag at that commit,
//! and whether the directory's snapshot is the snapshot of `HEAD`'s tree at
//! that path ([`work_tree_record`]). An ingest from a revision's objects is
//! that revision's snapshot by construction ([`Source::git_record`]).
//!
//! Deciding "clean" means digesting `HEAD`'s tree with the git backend, the
//! same walk and rules as any ingest. A tree id never changes meaning, so
//! the digest is a function of the tree and of what else decides a
//! checkout's bytes; the caller keeps it under a [`TreeKey`] and hands it
//! back through [`TreeDigests`], and a warm ingest pays only for finding the
//! repository, `HEAD`, the path and the tags.

use std::convert::Infallible;
use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use gix::bstr::ByteSlice;

use super::git::{self, GitError, GitRequest, GitTree, OpenError, PluginDir};
use super::record::{redact_url, Changes, ReadFrom, SourceRecord};
use super::{walk, Asked, Backing, Source, WalkError};
use crate::digest::ManifestDigest;
use crate::profile::ce::manifest::{Entry, Manifest};
use crate::profile::ce::rules as ce_rules;

/// What a [`TreeKey`] hashes first: the key's own format.
///
/// Format 2: digests learned since every git object read is checked against
/// its id; one kept under format 1 may have been learned from a tampered
/// object, and is not looked up.
const KEY_FORMAT: &str = "cestore tree key 2";

/// The key under which the digest of a git tree's snapshot is kept: the
/// SHA-256, as 64 lowercase hex digits, of everything that decides it.
///
/// That is the commit's root tree (attributes in parent directories and
/// symlinks anywhere in it count), the plugin directory's path in it, the
/// settings that convert line endings (`core.autocrlf`, `core.eol`), and the
/// rules (this cestore's version). The version asked for and the bounds are
/// not in it: they only decide whether a walk refuses, and a digest is kept
/// only for a walk that did not, so the same digest means the same files.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TreeKey(String);

impl TreeKey {
    /// The key of the directory `path` (`/`-separated, empty at the root) of
    /// the root tree `root_tree`, converted by the settings `config`.
    fn of(root_tree: gix::ObjectId, path: &[u8], config: &str) -> TreeKey {
        let root_tree = root_tree.to_string();
        let mut bytes = Vec::new();
        for field in [
            KEY_FORMAT.as_bytes(),
            env!("CARGO_PKG_VERSION").as_bytes(),
            root_tree.as_bytes(),
            path,
            config.as_bytes(),
        ] {
            bytes.extend_from_slice(&(field.len() as u64).to_le_bytes());
            bytes.extend_from_slice(field);
        }
        TreeKey(crate::digest::ObjectId::of(&bytes).to_hex())
    }

    /// A key as [`TreeKey::as_str`] wrote it: 64 lowercase hex digits.
    pub fn from_hex(hex: &str) -> Option<TreeKey> {
        crate::digest::ObjectId::from_lower_hex(hex).map(|_| TreeKey(hex.to_string()))
    }

    /// The key as 64 lowercase hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TreeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The digests of git trees' snapshots an ingest has learned before.
pub trait TreeDigests {
    /// The digest kept under `key`, if any.
    fn get(&self, key: &TreeKey) -> Option<ManifestDigest>;
}

/// No digest kept: every tree is walked.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCache;

impl TreeDigests for NoCache {
    fn get(&self, _key: &TreeKey) -> Option<ManifestDigest> {
        None
    }
}

/// What [`work_tree_record`] found: the record, and a digest to keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkTreeFound {
    /// The source record.
    pub record: SourceRecord,
    /// The digest of `HEAD`'s tree at the path, when this call walked it and
    /// the cache did not hold it: for the caller to keep under the key.
    pub learned: Option<(TreeKey, ManifestDigest)>,
}

/// The source record of a directory inside a git work tree, or `None` when
/// it lies in none.
///
/// `dir` is the absolute release directory just walked into `snapshot`, at
/// `version` within `bounds`. The repository is the nearest one above
/// `dir`, as git finds it; a bare repository, or a directory inside a
/// repository's git directory, is in no work tree. `clean` compares
/// `snapshot` with the snapshot of `HEAD`'s tree at `dir`'s path, taken
/// from `cache` when it holds it and walked otherwise; a walk's digest comes
/// back in [`WorkTreeFound::learned`].
///
/// Fails only when the repository, once found, cannot be read, or holds an
/// object (HEAD's commit, a tree, or anything the walk of `HEAD` reads)
/// whose bytes do not hash to its name: no record is made from it. A
/// commit whose tree git would not check out is dirty, `commit_refused`
/// saying why.
pub fn work_tree_record(
    dir: &Path,
    snapshot: &Manifest,
    version: &str,
    bounds: ce_rules::Bounds,
    cache: &dyn TreeDigests,
) -> Result<Option<WorkTreeFound>, GitError> {
    let Some(WorkTree { repo, root, path }) = find_work_tree(dir) else {
        return Ok(None);
    };
    let read = |what: String, e: gix::Error| GitError::Read {
        repo: root.clone(),
        what,
        reason: git::reason(&e),
    };
    let mut record = SourceRecord {
        read_from: ReadFrom::WorkTree,
        repository: repository_name(&repo),
        commit: None,
        path: String::from_utf8_lossy(&path).into_owned(),
        tree: None,
        tag: None,
        clean: false,
        changes: Changes::default(),
        commit_refused: None,
    };
    let all_added = || Changes {
        added: Changes::between(&[], &snapshot.entries).added,
        ..Changes::default()
    };
    let found = |record| {
        Ok(Some(WorkTreeFound {
            record,
            learned: None,
        }))
    };

    let (commit, root_tree) = {
        let head = repo.head().map_err(|e| read("HEAD".into(), e))?;
        if head.is_unborn() {
            record.changes = all_added();
            return found(record);
        }
        let Some(id) = head.id() else {
            return Err(GitError::Read {
                repo: root.clone(),
                what: "HEAD".into(),
                reason: "HEAD names no object".into(),
            });
        };
        git::commit_and_tree(&repo, &root, id.detach())?
    };
    record.commit = Some(commit.to_string());
    record.tag = tag_at(&repo, commit);
    let dir_tree = match git::tree_at(&repo, &root, root_tree, &path) {
        Ok(dir_tree) => dir_tree,
        Err(e @ GitError::TreeInvalid { .. }) => {
            record.commit_refused = Some(e.to_string());
            record.changes = all_added();
            return found(record);
        }
        Err(e) => return Err(e),
    };
    let Some(dir_tree) = dir_tree else {
        record.commit_refused = Some(format!("the commit has no directory '{}'", record.path));
        record.changes = all_added();
        return found(record);
    };
    record.tree = Some(dir_tree.to_string());

    let key = TreeKey::of(root_tree, &path, &git::conversion_config(&repo));
    let cached = cache.get(&key);
    if cached == Some(snapshot.digest) {
        record.clean = true;
        return found(record);
    }
    let rev = commit.to_string();
    let request = GitRequest {
        repo: &root,
        rev: &rev,
        dir: if path.is_empty() {
            PluginDir::Root
        } else {
            PluginDir::Subdir(Path::new(OsStr::from_bytes(&path)))
        },
    };
    let head = match head_entries(repo, &request, commit, root_tree, version, bounds)? {
        Ok(entries) => Manifest::new(entries),
        Err(refused) => {
            record.commit_refused = Some(refused);
            record.changes = all_added();
            return found(record);
        }
    };
    if head.digest == snapshot.digest {
        record.clean = true;
    } else {
        record.changes = Changes::between(&head.entries, &snapshot.entries);
    }
    let learned = (cached != Some(head.digest)).then_some((key, head.digest));
    Ok(Some(WorkTreeFound { record, learned }))
}

impl Source {
    /// The source record of a git source, with the key its snapshot's
    /// digest is kept under; `None` for a directory.
    ///
    /// The record is clean by construction: the snapshot is the revision's.
    /// The key is the one [`work_tree_record`] looks up for the same
    /// commit's tree at the same path, so that an ingest of a checkout of
    /// the revision need not walk it again.
    pub fn git_record(&self) -> Option<(SourceRecord, TreeKey)> {
        let Backing::Git(tree) = &self.tree else {
            return None;
        };
        let repo = tree.repo();
        let record = SourceRecord {
            read_from: ReadFrom::Git,
            repository: repository_name(repo),
            commit: Some(tree.commit().to_string()),
            path: String::from_utf8_lossy(tree.prefix()).into_owned(),
            tree: tree.dir_tree().map(|id| id.to_string()),
            tag: tag_asked(repo, tree.rev(), tree.commit()).or_else(|| tag_at(repo, tree.commit())),
            clean: true,
            changes: Changes::default(),
            commit_refused: None,
        };
        let key = TreeKey::of(
            tree.root_tree(),
            tree.prefix(),
            &git::conversion_config(repo),
        );
        Some((record, key))
    }
}

/// A directory's place in a git work tree.
struct WorkTree {
    repo: gix::Repository,
    /// The work tree's root, canonical.
    root: PathBuf,
    /// The directory's path below `root`, `/`-separated (empty at the root).
    path: Vec<u8>,
}

/// The work tree `dir` lies in, as git finds it searching upward; `None`
/// for no repository, a bare one, or a directory inside a git directory.
fn find_work_tree(dir: &Path) -> Option<WorkTree> {
    let repo = gix::discover(dir).ok()?;
    let root = std::fs::canonicalize(repo.workdir()?).ok()?;
    let dir = std::fs::canonicalize(dir).ok()?;
    for git_dir in [repo.git_dir(), repo.common_dir()] {
        if std::fs::canonicalize(git_dir).is_ok_and(|g| dir.starts_with(g)) {
            return None;
        }
    }
    let mut path = Vec::new();
    for part in dir.strip_prefix(&root).ok()?.components() {
        match part {
            Component::Normal(name) if name != ".git" => {
                if !path.is_empty() {
                    path.push(b'/');
                }
                path.extend_from_slice(name.as_bytes());
            }
            _ => return None,
        }
    }
    Some(WorkTree { repo, root, path })
}

/// How a record names a repository: its `origin` remote's URL as
/// configured (never rewritten by `insteadOf`), without credentials; else
/// the absolute path of its work tree, or of a bare repository itself.
fn repository_name(repo: &gix::Repository) -> String {
    if let Some(url) = repo.config_snapshot().string("remote.origin.url") {
        if !url.is_empty() {
            return redact_url(&url.to_str_lossy());
        }
    }
    let path = repo.workdir().unwrap_or_else(|| repo.git_dir());
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// The tag `rev` names, when it was asked by tag (`TAG`, `tags/TAG` or
/// `refs/tags/TAG`, as `git rev-parse` reads them: a tag before a branch of
/// the same name) and the tag points at `commit`, checked as [`tag_at`]
/// checks it.
fn tag_asked(repo: &gix::Repository, rev: &str, commit: gix::ObjectId) -> Option<String> {
    let name = rev
        .strip_prefix("refs/tags/")
        .or_else(|| rev.strip_prefix("tags/"))
        .unwrap_or(rev);
    let reference = repo
        .try_find_reference(format!("refs/tags/{name}").as_str())
        .ok()??;
    let id = reference.try_id()?.detach();
    (git::tagged_commit(repo, id) == Some(commit)).then(|| name.to_string())
}

/// The first by name of the tags, lightweight or annotated, that point at
/// `commit`, each annotated tag checked against its id; a tag that cannot
/// be read or trusted is passed over.
fn tag_at(repo: &gix::Repository, commit: gix::ObjectId) -> Option<String> {
    let references = repo.references().ok()?;
    let tags = references.tags().ok()?;
    tags.filter_map(Result::ok)
        .filter(|r| {
            r.try_id()
                .is_some_and(|id| git::tagged_commit(repo, id.detach()) == Some(commit))
        })
        .map(|r| r.name().shorten().to_str_lossy().into_owned())
        .min()
}

/// The entries of the snapshot of `commit`'s tree at `request.dir`, or why
/// it makes none: the rule it breaks, or a tree git would not check out.
fn head_entries(
    repo: gix::Repository,
    request: &GitRequest<'_>,
    commit: gix::ObjectId,
    root_tree: gix::ObjectId,
    version: &str,
    bounds: ce_rules::Bounds,
) -> Result<Result<Vec<Entry>, String>, GitError> {
    let refused = |e: GitError| match e {
        GitError::TreeInvalid { .. } => Ok(Err(e.to_string())),
        e => Err(e),
    };
    let repo_path = request.repo.to_path_buf();
    let tree = match GitTree::at_commit(repo, repo_path, commit, root_tree, request) {
        Ok(tree) => tree,
        Err(OpenError::Rejected(r)) => return Ok(Err(r.to_string())),
        Err(OpenError::Git(e)) => return refused(e),
    };
    match walk(
        &tree,
        Asked::new(&crate::profile::ce::CE, version, bounds),
        |_| Ok::<(), Infallible>(()),
    ) {
        Ok(walked) => Ok(Ok(walked.entries)),
        Err(WalkError::Rejected(r)) => Ok(Err(r.to_string())),
        Err(WalkError::Git(e)) => refused(e),
        Err(WalkError::Visitor(never)) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::fs;
    use std::process::Command;

    use super::*;
    use crate::profile::ce::fixtures::{release, MANIFEST_FILE};

    const V: &str = "1.2.3";
    const ORIGIN: &str = "https://user:tok@example.com/o/r.git";

    /// Runs `git ARGS` in `dir`, which must succeed, with no user or system
    /// configuration; returns its stdout, trimmed.
    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=cestore",
                "-c",
                "user.email=cestore@example.invalid",
                "-c",
                "commit.gpgsign=false",
                "-c",
                "tag.gpgsign=false",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A repository at `repo` with a release at `sub` (empty: the root),
    /// committed, tagged `v1.2.3` (annotated) and `a-light`, with an origin
    /// that carries credentials.
    fn repository(repo: &Path, sub: &str) -> PathBuf {
        let dir = if sub.is_empty() {
            repo.to_path_buf()
        } else {
            repo.join(sub)
        };
        fs::create_dir_all(&dir).unwrap();
        git(repo, &["init", "-q"]);
        release(&dir);
        fs::write(repo.join("README"), "not in the release\n").unwrap();
        git(repo, &["add", "-A"]);
        git(repo, &["commit", "-q", "-m", "release"]);
        git(repo, &["tag", "-a", "-m", "release", "v1.2.3"]);
        git(repo, &["tag", "a-light"]);
        git(repo, &["remote", "add", "origin", ORIGIN]);
        dir
    }

    /// The snapshot of the directory `dir`.
    fn snapshot(dir: &Path) -> Manifest {
        let source = Source::open(dir).unwrap();
        let walked = source
            .walk(V, ce_rules::Bounds::REFERENCE, |_| Ok::<(), Infallible>(()))
            .unwrap_or_else(|_| panic!("walk {}", dir.display()));
        Manifest::new(walked.entries)
    }

    /// The record of `dir` with no cache.
    fn found(dir: &Path) -> WorkTreeFound {
        work_tree_record(
            dir,
            &snapshot(dir),
            V,
            ce_rules::Bounds::REFERENCE,
            &NoCache,
        )
        .unwrap()
        .expect("a work tree")
    }

    /// Digests kept in memory.
    #[derive(Default)]
    struct Kept(RefCell<HashMap<TreeKey, ManifestDigest>>);

    impl TreeDigests for Kept {
        fn get(&self, key: &TreeKey) -> Option<ManifestDigest> {
            self.0.borrow().get(key).copied()
        }
    }

    /// A cache that holds the same digest under every key.
    struct Always(ManifestDigest);

    impl TreeDigests for Always {
        fn get(&self, _key: &TreeKey) -> Option<ManifestDigest> {
            Some(self.0)
        }
    }

    #[test]
    fn a_directory_in_no_work_tree_has_no_record() {
        let tmp = tempfile::tempdir().unwrap();
        release(tmp.path());
        let snap = snapshot(tmp.path());
        let out =
            work_tree_record(tmp.path(), &snap, V, ce_rules::Bounds::REFERENCE, &NoCache).unwrap();
        assert_eq!(out, None);
    }

    #[test]
    fn a_directory_inside_a_git_directory_or_a_bare_repository_has_no_record() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        repository(&repo, "");
        let inside = repo.join(".git/objects/info");
        fs::create_dir_all(&inside).unwrap();
        let snap = snapshot(&repo);
        let bounds = ce_rules::Bounds::REFERENCE;
        assert_eq!(
            work_tree_record(&inside, &snap, V, bounds, &NoCache).unwrap(),
            None
        );
        let bare = tmp.path().join("bare.git");
        git(
            tmp.path(),
            &["clone", "-q", "--bare", "r", bare.to_str().unwrap()],
        );
        assert_eq!(
            work_tree_record(&bare, &snap, V, bounds, &NoCache).unwrap(),
            None
        );
    }

    #[test]
    fn a_clean_checkout_names_its_commit_tag_and_tree_without_credentials() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        let dir = repository(&repo, "");
        let out = found(&dir);
        let record = &out.record;
        assert_eq!(record.read_from, ReadFrom::WorkTree);
        assert!(record.clean, "{record:?}");
        assert!(record.changes.is_empty());
        assert_eq!(record.commit_refused, None);
        assert_eq!(
            record.commit.as_deref(),
            Some(&*git(&repo, &["rev-parse", "HEAD"]))
        );
        assert_eq!(
            record.tree.as_deref(),
            Some(&*git(&repo, &["rev-parse", "HEAD^{tree}"]))
        );
        assert_eq!(record.path, "");
        assert_eq!(record.tag.as_deref(), Some("a-light"));
        assert_eq!(record.repository, "https://example.com/o/r.git");
        let json = serde_json::to_string(&out.record).unwrap();
        assert!(!json.contains("tok"), "{json}");
        let (key, digest) = out.learned.clone().expect("a walk's digest");
        assert_eq!(digest, snapshot(&dir).digest);
        assert_eq!(TreeKey::from_hex(key.as_str()), Some(key.clone()));

        // Kept, the digest spares the walk.
        let kept = Kept::default();
        kept.0.borrow_mut().insert(key, digest);
        let warm = work_tree_record(&dir, &snapshot(&dir), V, ce_rules::Bounds::REFERENCE, &kept)
            .unwrap()
            .unwrap();
        assert_eq!(warm.record, out.record);
        assert_eq!(warm.learned, None);
    }

    #[test]
    fn the_first_tag_by_name_is_recorded_annotated_or_not() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        let dir = repository(&repo, "");
        git(&repo, &["tag", "-d", "a-light"]);
        assert_eq!(found(&dir).record.tag.as_deref(), Some("v1.2.3"));
        // Packed, an annotated tag is peeled all the same.
        git(&repo, &["pack-refs", "--all"]);
        assert_eq!(found(&dir).record.tag.as_deref(), Some("v1.2.3"));
        git(&repo, &["commit", "-q", "--allow-empty", "-m", "next"]);
        git(&repo, &["tag", "0-next"]);
        assert_eq!(found(&dir).record.tag.as_deref(), Some("0-next"));
        git(&repo, &["commit", "-q", "--allow-empty", "-m", "untagged"]);
        assert_eq!(found(&dir).record.tag, None);
    }

    #[test]
    fn a_kept_digest_decides_without_a_walk() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        let dir = repository(&repo, "");
        fs::write(dir.join("assets/big.bin"), b"other").unwrap();
        let snap = snapshot(&dir);
        // The cache vouches for the edited snapshot: no walk contradicts it.
        let out = work_tree_record(
            &dir,
            &snap,
            V,
            ce_rules::Bounds::REFERENCE,
            &Always(snap.digest),
        )
        .unwrap()
        .unwrap();
        assert!(out.record.clean);
        assert_eq!(out.learned, None);
    }

    #[test]
    fn one_changed_byte_is_dirty_and_named() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        let dir = repository(&repo, "");
        let clean = found(&dir);
        let file = dir.join("skills/ce-plan/SKILL.md");
        let mut bytes = fs::read(&file).unwrap();
        bytes[0] ^= 1;
        fs::write(&file, bytes).unwrap();
        let out = found(&dir);
        assert!(!out.record.clean);
        assert_eq!(out.record.changes.changed, ["skills/ce-plan/SKILL.md"]);
        assert!(out.record.changes.added.is_empty());
        assert!(out.record.changes.removed.is_empty());
        assert_eq!(out.record.commit_refused, None);
        // What is learned is the commit's digest, whatever the snapshot.
        assert_eq!(out.learned, clean.learned);
    }

    #[test]
    fn added_and_removed_files_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        let dir = repository(&repo, "");
        fs::write(dir.join("assets/new.txt"), b"new").unwrap();
        fs::remove_file(dir.join("assets/big.bin")).unwrap();
        let out = found(&dir);
        assert!(!out.record.clean);
        assert_eq!(out.record.changes.added, ["assets/new.txt"]);
        assert_eq!(out.record.changes.removed, ["assets/big.bin"]);
        assert!(out.record.changes.changed.is_empty());
    }

    #[test]
    fn a_plugin_in_a_subdirectory_has_its_path_and_the_git_sources_key() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        let dir = repository(&repo, "plugins/x");
        let out = found(&dir);
        assert!(out.record.clean, "{:?}", out.record);
        assert_eq!(out.record.path, "plugins/x");
        assert_eq!(
            out.record.tree.as_deref(),
            Some(&*git(&repo, &["rev-parse", "HEAD:plugins/x"]))
        );

        let source = Source::open_git(&GitRequest {
            repo: &repo,
            rev: "v1.2.3",
            dir: PluginDir::Subdir(Path::new("plugins/x")),
        })
        .unwrap();
        let (record, key) = source.git_record().unwrap();
        assert_eq!(Some(key), out.learned.map(|(k, _)| k));
        assert_eq!(record.read_from, ReadFrom::Git);
        assert!(record.clean);
        assert_eq!(record.commit, out.record.commit);
        assert_eq!(record.tree, out.record.tree);
        assert_eq!(record.path, "plugins/x");
        // Asked for by tag, the tag asked for; a work tree's record names
        // the first by name.
        assert_eq!(record.tag.as_deref(), Some("v1.2.3"));
        assert_eq!(out.record.tag.as_deref(), Some("a-light"));
        assert_eq!(record.repository, "https://example.com/o/r.git");
        assert!(Source::open(&dir).unwrap().git_record().is_none());
    }

    #[test]
    fn without_an_origin_the_repository_is_its_path() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        let dir = repository(&repo, "plugins/x");
        git(&repo, &["remote", "remove", "origin"]);
        let canonical = fs::canonicalize(&repo).unwrap();
        assert_eq!(
            found(&dir).record.repository,
            canonical.display().to_string()
        );
    }

    #[test]
    fn a_directory_the_commit_lacks_is_refused_and_all_added() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        repository(&repo, "plugins/x");
        let dir = repo.join("plugins/y");
        release(&dir);
        let out = found(&dir);
        assert!(!out.record.clean);
        assert!(out.record.commit.is_some());
        assert_eq!(out.record.tree, None);
        assert_eq!(
            out.record.commit_refused.as_deref(),
            Some("the commit has no directory 'plugins/y'")
        );
        let all: Vec<_> = snapshot(&dir).entries.into_iter().map(|e| e.path).collect();
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(out.record.changes.added, sorted);
        assert_eq!(out.learned, None);
    }

    #[test]
    fn a_commit_the_rules_refuse_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        let dir = repository(&repo, "");
        // The commit carries another version than the one ingested.
        let plugin = dir.join(MANIFEST_FILE);
        let text = fs::read_to_string(&plugin).unwrap();
        fs::write(&plugin, text.replace("1.2.3", "9.9.9")).unwrap();
        git(&repo, &["commit", "-q", "-am", "other version"]);
        fs::write(&plugin, text).unwrap();
        let out = found(&dir);
        assert!(!out.record.clean);
        let refused = out.record.commit_refused.expect("refused");
        assert!(refused.contains("9.9.9"), "{refused}");
        assert!(out.record.changes.added.contains(&manifest_file()));
        assert_eq!(out.learned, None);
    }

    fn manifest_file() -> String {
        MANIFEST_FILE.to_string()
    }

    #[test]
    fn an_unborn_head_has_no_commit() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q"]);
        release(&repo);
        let out = found(&repo);
        assert_eq!(out.record.commit, None);
        assert_eq!(out.record.tree, None);
        assert!(!out.record.clean);
        assert_eq!(
            out.record.changes.added.len(),
            snapshot(&repo).entries.len()
        );
        assert_eq!(out.learned, None);
    }

    #[test]
    fn a_linked_worktree_is_a_work_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        repository(&repo, "plugins/x");
        let linked = tmp.path().join("linked");
        git(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "--detach",
                linked.to_str().unwrap(),
            ],
        );
        let main = found(&repo.join("plugins/x"));
        let out = found(&linked.join("plugins/x"));
        assert!(out.record.clean, "{:?}", out.record);
        assert_eq!(out.record.path, "plugins/x");
        assert_eq!(out.record.commit, main.record.commit);
        assert_eq!(out.record.repository, "https://example.com/o/r.git");
        assert_eq!(out.learned, main.learned);
    }

    #[test]
    fn a_tampered_object_makes_no_record_and_learns_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        let dir = repository(&repo, "");
        let rel = "skills/ce-plan/SKILL.md";
        let blob = git(&repo, &["rev-parse", &format!("HEAD:{rel}")]);
        let forged_file = tmp.path().join("forged");
        fs::write(&forged_file, b"# forged\n").unwrap();
        let forged = git(&repo, &["hash-object", "-w", forged_file.to_str().unwrap()]);
        let object = |id: &str| repo.join(".git/objects").join(&id[..2]).join(&id[2..]);
        fs::remove_file(object(&blob)).unwrap();
        fs::copy(object(&forged), object(&blob)).unwrap();
        // The work tree holds the forged bytes: what the tampered commit claims.
        fs::copy(&forged_file, dir.join(rel)).unwrap();
        // No record, so no digest learned either.
        let err = work_tree_record(
            &dir,
            &snapshot(&dir),
            V,
            ce_rules::Bounds::REFERENCE,
            &NoCache,
        )
        .unwrap_err();
        assert!(
            matches!(&err, GitError::ObjectCorrupt { id, .. } if *id == blob),
            "{err}"
        );
    }

    #[test]
    fn a_key_reads_back_only_from_its_hex() {
        assert_eq!(TreeKey::from_hex("ab"), None);
        assert_eq!(TreeKey::from_hex(&"A".repeat(64)), None);
        let key = TreeKey::from_hex(&"a".repeat(64)).unwrap();
        assert_eq!(key.as_str(), "a".repeat(64));
        assert_eq!(key.to_string(), "a".repeat(64));
    }
}
