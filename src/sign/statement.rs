//! The in-toto Statement v1 an attestation signs: its subject is the
//! snapshot, its predicate SLSA Provenance v1.
//!
//! ```text
//! _type          https://in-toto.io/Statement/v1
//! subject        [{name: "compound-engineering@1.2.3", digest: {sha256: <manifest digest>}}]
//! predicateType  https://slsa.dev/provenance/v1
//! predicate
//! ├── buildDefinition
//! │   ├── buildType             urn:cestore:buildtype:ingest:v1
//! │   ├── externalParameters    {version, source: the source record, or null}
//! │   ├── internalParameters    {manifest_schema_version}
//! │   └── resolvedDependencies  [{uri: git+REPOSITORY, digest: {gitCommit}, name: PATH,
//! │                               annotations: {tag, tree, clean}}], when a record names a commit
//! └── runDetails
//!     ├── builder   {id: urn:cestore:stager:USER@HOST, version: {cestore}}
//!     └── metadata  {startedOn: when the snapshot was ingested}
//! ```

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::digest::ManifestDigest;
use crate::source::SourceRecord;

/// The statement type in-toto v1 gives.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The predicate type of SLSA Provenance v1.
pub const SLSA_PROVENANCE: &str = "https://slsa.dev/provenance/v1";
/// What cestore's provenance describes: a snapshot made by an ingest.
pub const BUILD_TYPE: &str = "urn:cestore:buildtype:ingest:v1";

/// An in-toto statement.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Statement {
    /// The statement's type.
    #[serde(rename = "_type")]
    pub statement_type: String,
    /// What the statement is about.
    pub subject: Vec<Subject>,
    /// The predicate's type.
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    /// What it says of them.
    pub predicate: Value,
}

/// One subject of a statement: a name and its digests.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Subject {
    /// The subject's name.
    pub name: String,
    /// Its digests, by algorithm.
    pub digest: BTreeMap<String, String>,
}

/// What an attestation of a snapshot says of it, besides who signs where:
/// what the store knows of a snapshot to sign.
#[derive(Clone, Copy, Debug)]
pub struct SnapshotFacts<'a> {
    /// The plugin's name.
    pub name: &'a str,
    /// The release's version.
    pub version: &'a str,
    /// The manifest digest.
    pub digest: ManifestDigest,
    /// The snapshot's newest source record, if any.
    pub source: Option<&'a SourceRecord>,
    /// When the snapshot was ingested (RFC 3339).
    pub ingested_at: &'a str,
}

impl Statement {
    /// The statement of a snapshot: its subject, and its provenance, staged
    /// by `stager` (`USER@HOST`).
    pub fn of_snapshot(facts: &SnapshotFacts<'_>, stager: &str) -> Statement {
        let mut dependencies = Vec::new();
        if let Some(record) = facts.source {
            if let Some(commit) = &record.commit {
                dependencies.push(json!({
                    "uri": format!("git+{}", record.repository),
                    "digest": {"gitCommit": commit},
                    "name": record.path,
                    "annotations": {"tag": record.tag, "tree": record.tree, "clean": record.clean},
                }));
            }
        }
        Statement {
            statement_type: STATEMENT_TYPE.into(),
            subject: vec![Subject {
                name: subject_name(facts.name, facts.version),
                digest: BTreeMap::from([("sha256".to_string(), facts.digest.to_hex())]),
            }],
            predicate_type: SLSA_PROVENANCE.into(),
            predicate: json!({
                "buildDefinition": {
                    "buildType": BUILD_TYPE,
                    "externalParameters": {"version": facts.version, "source": facts.source},
                    "internalParameters": {
                        "manifest_schema_version": crate::profile::ce::manifest::SCHEMA_VERSION,
                    },
                    "resolvedDependencies": dependencies,
                },
                "runDetails": {
                    "builder": {
                        "id": format!("urn:cestore:stager:{stager}"),
                        "version": {"cestore": env!("CARGO_PKG_VERSION")},
                    },
                    "metadata": {"startedOn": facts.ingested_at},
                },
            }),
        }
    }

    /// The SHA-256 digests of the statement's subjects.
    pub fn subject_digests(&self) -> Vec<&str> {
        self.subject
            .iter()
            .filter_map(|s| s.digest.get("sha256").map(String::as_str))
            .collect()
    }

    /// Who made the snapshot, as the provenance's builder names it.
    pub fn builder(&self) -> Option<&str> {
        self.predicate
            .pointer("/runDetails/builder/id")
            .and_then(Value::as_str)
    }
}

/// A subject's name: `NAME@VERSION`, or the name alone for a snapshot
/// without a version (a tree kind: `tree`, `dependencies`, `task`).
fn subject_name(name: &str, version: &str) -> String {
    if version.is_empty() {
        name.to_string()
    } else {
        format!("{name}@{version}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_statement_names_it_and_its_commit() {
        let digest = ManifestDigest::of(b"m");
        let record = SourceRecord {
            read_from: crate::source::ReadFrom::Git,
            repository: "https://example.com/o/r.git".into(),
            commit: Some("c".repeat(40)),
            path: "plugins/p".into(),
            tree: Some("t".repeat(40)),
            tag: Some("v1".into()),
            clean: true,
            changes: Default::default(),
            commit_refused: None,
        };
        let s = Statement::of_snapshot(
            &SnapshotFacts {
                name: "compound-engineering",
                version: "1.2.3",
                digest,
                source: Some(&record),
                ingested_at: "2026-01-01T00:00:00.000Z",
            },
            "me@host",
        );
        assert_eq!(s.subject[0].name, "compound-engineering@1.2.3");
        assert_eq!(s.subject_digests(), [digest.to_hex()]);
        assert_eq!(s.builder(), Some("urn:cestore:stager:me@host"));
        let dep = &s.predicate["buildDefinition"]["resolvedDependencies"][0];
        assert_eq!(dep["uri"], "git+https://example.com/o/r.git");
        assert_eq!(dep["digest"]["gitCommit"], "c".repeat(40));
        let json = serde_json::to_string(&s).unwrap();
        let back: Statement = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
        assert!(
            json.starts_with(r#"{"_type":"https://in-toto.io/Statement/v1","#),
            "{json}"
        );
    }
}
