//! What an ambiguous name could mean, listed so that the user can pick one.
//!
//! A digest prefix or `@VERSION` may name several snapshots, and a content
//! prefix (`find --object`) several stored contents. The refusal lists each
//! with what tells them apart to a person: a snapshot's version and when it
//! was first ingested, since digests alone say nothing about which release
//! is which.

use crate::digest::{ManifestDigest, ObjectId};

/// One snapshot an ambiguous name could mean.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Candidate {
    /// Its manifest digest.
    pub manifest_digest: ManifestDigest,
    /// Its release version.
    pub version: String,
    /// When it was first ingested (UTC, RFC 3339).
    pub ingested_at: String,
}

/// The message of a name that several snapshots answer to: each one's digest,
/// version and ingest time, then how to name one.
pub(super) fn snapshots_message(name: &str, matches: &[Candidate]) -> String {
    let listed: Vec<String> = matches
        .iter()
        .map(|c| {
            format!(
                "{} ({}, ingested {})",
                c.manifest_digest, c.version, c.ingested_at
            )
        })
        .collect();
    let next = if name.starts_with('@') {
        "name one by its digest"
    } else {
        "give more of the digest"
    };
    format!(
        "'{name}' is ambiguous: it matches {} snapshots: {}; {next}",
        matches.len(),
        listed.join(", ")
    )
}

/// How many versions a refusal of an unknown `@VERSION` lists at most.
pub const VERSIONS_LISTED: usize = 20;

/// The message of an `@VERSION` that no snapshot has: the versions the
/// store holds (at most [`VERSIONS_LISTED`]), so that the user can pick one.
pub(super) fn versions_message(version: &str, versions: &[String]) -> String {
    let head = format!("no snapshot in the store has the version '{version}' (@{version})");
    if versions.is_empty() {
        return format!("{head}: the store holds no snapshot");
    }
    let mut listed = versions
        .iter()
        .take(VERSIONS_LISTED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if versions.len() > VERSIONS_LISTED {
        listed.push_str(&format!(
            ", and {} more (`cestore list`)",
            versions.len() - VERSIONS_LISTED
        ));
    }
    format!("{head}; the versions it holds: {listed}; @VERSION takes one of them exactly")
}

/// The message of a content prefix that several stored contents share.
pub(super) fn contents_message(prefix: &str, matches: &[ObjectId]) -> String {
    let listed: Vec<String> = matches.iter().map(ObjectId::to_hex).collect();
    format!(
        "'{prefix}' is ambiguous: it matches {} stored contents ({}); give more of the SHA-256",
        matches.len(),
        listed.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_snapshot_is_listed_with_its_version_and_time() {
        let one = Candidate {
            manifest_digest: ManifestDigest::of(b"one"),
            version: "1.0.0".into(),
            ingested_at: "2026-01-02T03:04:05.000Z".into(),
        };
        let two = Candidate {
            manifest_digest: ManifestDigest::of(b"two"),
            version: "1.0.0".into(),
            ingested_at: "2026-01-03T03:04:05.000Z".into(),
        };
        let text = snapshots_message("@1.0.0", &[one.clone(), two.clone()]);
        for part in [
            one.manifest_digest.to_hex(),
            two.manifest_digest.to_hex(),
            one.ingested_at.clone(),
            two.ingested_at.clone(),
        ] {
            assert!(text.contains(&part), "{text}");
        }
        assert!(text.contains("2 snapshots") && text.ends_with("by its digest"));
        let text = snapshots_message("abcd", &[one, two]);
        assert!(text.ends_with("give more of the digest"), "{text}");
    }
}
