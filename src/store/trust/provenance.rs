//! Re-deriving a snapshot from the commit its source record names.
//!
//! A source record is a claim: these bytes are the tree of that commit at
//! that path. The claim is checked by reading the tree again from a local
//! clone, walking it with every ingest rule, and comparing the digest with
//! the snapshot's. Nothing is written: the walk keeps no object. `audit
//! --source-repo` checks every digest of a results file so, and `verify
//! --source` one snapshot.
//!
//! The newest record that names a commit is the one re-derived: it is what
//! `list` and `audit` show. A clone that lacks the commit, or a tree the
//! rules refuse, is a mismatch as surely as another digest: the snapshot
//! cannot be shown to come from the commit.

use std::path::Path;

use crate::catalogue::{resolve, KeptSource};
use crate::digest::ManifestDigest;
use crate::error::{Error, Result};
use crate::profile::ce::manifest::Manifest;
use crate::profile::ce::rules::Bounds;
use crate::source::git::PluginDir;
use crate::source::{GitError, GitRequest, Source, WalkError};
use crate::store::Store;

/// What re-deriving a snapshot from its source record found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckStatus {
    /// The commit's tree at the record's path has the snapshot's digest.
    Equal,
    /// It has another digest, or none (see [`Mismatch`]).
    SourceMismatch,
    /// The snapshot has no source record that names a commit.
    NoSourceRecord,
}

impl CheckStatus {
    /// The name as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Equal => "equal",
            CheckStatus::SourceMismatch => "source-mismatch",
            CheckStatus::NoSourceRecord => "no-source-record",
        }
    }
}

/// Why a snapshot does not re-derive from its recorded commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mismatch {
    /// The commit's tree has another digest.
    Digest,
    /// The repository has no such commit.
    MissingCommit,
    /// The commit's tree makes no snapshot: it breaks a rule, has no such
    /// directory, or cannot be read.
    Refused,
}

impl Mismatch {
    /// The name as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Mismatch::Digest => "digest",
            Mismatch::MissingCommit => "missing-commit",
            Mismatch::Refused => "refused",
        }
    }
}

/// A snapshot re-derived from the commit of its newest source record that
/// names one.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SourceCheck {
    /// What the re-derivation found.
    pub status: CheckStatus,
    /// Why it is a mismatch, or null.
    pub mismatch: Option<Mismatch>,
    /// The commit re-derived from, or null without a record.
    pub commit: Option<String>,
    /// The directory's path in the repository (empty at its root), or null
    /// without a record.
    pub path: Option<String>,
    /// The snapshot's digest.
    pub expected: ManifestDigest,
    /// The digest of the commit's tree, or null when it makes none.
    pub found: Option<ManifestDigest>,
    /// What git or the rules said, for a missing commit or a refused tree;
    /// or null.
    pub detail: Option<String>,
}

impl SourceCheck {
    /// Whether the snapshot re-derives from its commit.
    pub fn is_equal(&self) -> bool {
        self.status == CheckStatus::Equal
    }
}

/// Re-derives the snapshot `expected`, of version `version`, from the
/// commit of its newest record in `sources` that names one, read from the
/// repository `repo`.
///
/// A repository that cannot be opened is an error: no snapshot could be
/// checked against it.
pub fn check_source(
    repo: &Path,
    expected: &ManifestDigest,
    version: &str,
    sources: &[KeptSource],
) -> Result<SourceCheck> {
    let newest = crate::source::carried::newest_with_commit(sources.iter().map(|k| &k.entry))
        .and_then(|r| Some((r.commit.as_deref()?, r.path.as_str())));
    let Some((commit, path)) = newest else {
        return Ok(SourceCheck {
            status: CheckStatus::NoSourceRecord,
            mismatch: None,
            commit: None,
            path: None,
            expected: *expected,
            found: None,
            detail: None,
        });
    };
    let found = rederive(repo, commit, path, version)?;
    let (status, mismatch, found, detail) = match found {
        Ok(d) if d == *expected => (CheckStatus::Equal, None, Some(d), None),
        Ok(d) => (
            CheckStatus::SourceMismatch,
            Some(Mismatch::Digest),
            Some(d),
            None,
        ),
        Err((why, detail)) => (CheckStatus::SourceMismatch, Some(why), None, Some(detail)),
    };
    Ok(SourceCheck {
        status,
        mismatch,
        commit: Some(commit.to_string()),
        path: Some(path.to_string()),
        expected: *expected,
        found,
        detail,
    })
}

/// The digest of `commit`'s tree at `path` in `repo`, walked with the
/// reference's rules and bounds as a release of `version`; or why it makes
/// none. The outer error is a repository that cannot be opened.
fn rederive(
    repo: &Path,
    commit: &str,
    path: &str,
    version: &str,
) -> Result<std::result::Result<ManifestDigest, (Mismatch, String)>> {
    let dir = if path.is_empty() {
        PluginDir::Root
    } else {
        PluginDir::Subdir(Path::new(path))
    };
    let source = match Source::open_git(&GitRequest {
        repo,
        rev: commit,
        dir,
    }) {
        Ok(source) => source,
        Err(e) => return refusal(e).map(Err),
    };
    match source.walk(version, Bounds::REFERENCE, |_| Ok::<(), Error>(())) {
        Ok(walked) => Ok(Ok(Manifest::new(walked.entries).digest)),
        Err(WalkError::Rejected(r)) => refusal(r.into()).map(Err),
        Err(WalkError::Git(e)) => refusal(e.into()).map(Err),
        Err(WalkError::Visitor(e)) => Err(e),
    }
}

/// Why a commit's tree makes no snapshot, from the error reading it; an
/// error that concerns the repository itself stays an error.
fn refusal(e: Error) -> Result<(Mismatch, String)> {
    let git = match &e {
        Error::Git(c) => c.downcast_ref::<GitError>(),
        _ => None,
    };
    match git {
        Some(GitError::Open { .. }) => Err(e),
        Some(GitError::Revision { .. }) => Ok((Mismatch::MissingCommit, e.to_string())),
        _ => Ok((Mismatch::Refused, e.to_string())),
    }
}

/// The report of `cestore verify --source REPO DIGEST`.
#[derive(Debug, serde::Serialize)]
pub struct SourceReport {
    /// The snapshot.
    pub manifest_digest: ManifestDigest,
    /// The repository read, absolute.
    pub repository: String,
    /// What re-deriving it found.
    #[serde(flatten)]
    pub check: SourceCheck,
}

/// Re-derives one snapshot from the commit of its newest source record
/// that names one, read from the local repository `repo`.
pub fn verify_source(store: &Store, repo: &Path, digest: &str) -> Result<SourceReport> {
    let cat = store.catalogue();
    let digest = resolve(cat, digest)?;
    let version = cat.snapshot(&digest)?.version;
    let repo = std::path::absolute(repo).unwrap_or_else(|_| repo.to_path_buf());
    let check = check_source(&repo, &digest, &version, &cat.sources(&digest)?)?;
    Ok(SourceReport {
        manifest_digest: digest,
        repository: repo.display().to_string(),
        check,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{ReadFrom, SourceEntry, SourceRecord, Via};

    fn kept(commit: Option<&str>, path: &str) -> KeptSource {
        KeptSource::new(SourceEntry {
            at: "2026-01-02T03:04:05.678Z".into(),
            via: Via::Ingest,
            record: SourceRecord {
                read_from: ReadFrom::WorkTree,
                path: path.into(),
                clean: false,
                ..SourceRecord::of_commit("/nowhere", commit)
            },
        })
    }

    #[test]
    fn a_snapshot_without_a_record_naming_a_commit_has_nothing_to_re_derive() {
        let expected: ManifestDigest = "a".repeat(64).parse().unwrap();
        // The repository is never opened: there is no commit to read.
        let check = check_source(
            Path::new("/nonexistent"),
            &expected,
            "1.0.0",
            &[kept(None, "")],
        )
        .unwrap();
        assert_eq!(check.status, CheckStatus::NoSourceRecord);
        assert_eq!((&check.commit, &check.found), (&None, &None));
        assert!(!SourceCheck {
            status: CheckStatus::SourceMismatch,
            ..check
        }
        .is_equal());
    }

    #[test]
    fn a_repository_that_cannot_be_opened_is_an_error_not_a_mismatch() {
        let expected: ManifestDigest = "a".repeat(64).parse().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let commit = "0".repeat(40);
        let err = check_source(
            dir.path(),
            &expected,
            "1.0.0",
            &[kept(Some(&commit), "plugins/p"), kept(None, "")],
        )
        .unwrap_err();
        assert!(err.to_string().contains("could not open"), "{err}");
    }
}
