//! Signed snapshots: ed25519 keys, and attestations that vouch for a
//! snapshot's digest.
//!
//! An attestation is a DSSE envelope ([`dsse`]) around an in-toto
//! Statement v1 ([`statement`]) whose subject is the snapshot (its name
//! `PLUGIN@VERSION` and its manifest digest) and whose predicate is SLSA
//! Provenance v1 (the source record, the stager, the ingest time).
//!
//! ```text
//! key generate FILE ──► FILE (PKCS#8 PEM, 0600) + FILE.pub (SPKI PEM); keyid = sha256(DER)
//! sign DIGEST --key FILE ──► Statement(subject = DIGEST) ──► DSSE envelope, kept beside the manifest
//! --trusted-key PUB ──► verify: a signature by PUB over the envelope, then subject == DIGEST
//! ```
//!
//! Verifying checks the signature first and reads the statement only once a
//! trusted key has signed it; a statement about another digest is refused
//! even when the signature is good.

pub mod dsse;
pub mod key;
pub mod limits;
pub mod statement;

use std::path::PathBuf;

use crate::digest::{KeyId, ManifestDigest};
use crate::error::{Classified, Classify, Error, ErrorKind};

pub use dsse::{Envelope, IN_TOTO_PAYLOAD_TYPE};
pub use key::{generate, trusted_keys, GeneratedKey, PrivateKey, PublicKey};
pub use statement::{SnapshotFacts, Statement};

/// Why a key could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The system gave no random bytes.
    #[error("could not read random bytes for a new key: {source}")]
    Random {
        /// Why.
        source: std::io::Error,
    },
    /// A key file to be made exists already.
    #[error("could not write the key '{}': it exists; choose another name or remove it", .path.display())]
    KeyExists {
        /// The file.
        path: PathBuf,
    },
    /// A key file could not be written.
    #[error("could not write the key '{}': {source}", .path.display())]
    WriteKey {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A key could not be encoded.
    #[error("could not encode the key '{}': {reason}", .path.display())]
    Encode {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A key file could not be read.
    #[error("could not read the key '{}': {source}", .path.display())]
    ReadKey {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A private key file that its group or others may read or write.
    #[error("could not use the private key '{}': its mode {mode:04o} lets others read or write it; `chmod 600 '{}'` makes it its owner's alone", .path.display(), .path.display())]
    KeyTooOpen {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A private key file another user owns.
    #[error("could not use the private key '{}': it belongs to uid {owner}, not to this user; use a key of your own", .path.display())]
    KeyNotOwned {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
    },
    /// A key path that is not a regular file (followed through a symlink).
    #[error("could not read the key '{}': it is {what}; a key must be a regular file", .path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        what: &'static str,
    },
    /// A file that holds no key of the kind expected.
    #[error("could not read the key '{}': it is not {what}", .path.display())]
    NotAKey {
        /// The file.
        path: PathBuf,
        /// What it should hold.
        what: &'static str,
    },
}

impl Classify for SignError {
    fn kind(&self) -> ErrorKind {
        match self {
            SignError::Random { .. } | SignError::WriteKey { .. } | SignError::Encode { .. } => {
                ErrorKind::Io
            }
            SignError::KeyExists { .. } => ErrorKind::Conflict,
            SignError::ReadKey { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                ErrorKind::NotFound
            }
            SignError::ReadKey { .. }
            | SignError::KeyTooOpen { .. }
            | SignError::KeyNotOwned { .. }
            | SignError::NotRegular { .. }
            | SignError::NotAKey { .. } => ErrorKind::BadKey,
        }
    }

    fn path(&self) -> Option<&std::path::Path> {
        match self {
            SignError::Random { .. } => None,
            SignError::KeyExists { path }
            | SignError::WriteKey { path, .. }
            | SignError::Encode { path, .. }
            | SignError::ReadKey { path, .. }
            | SignError::KeyTooOpen { path, .. }
            | SignError::KeyNotOwned { path, .. }
            | SignError::NotRegular { path, .. }
            | SignError::NotAKey { path, .. } => Some(path),
        }
    }

    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }
}

impl From<SignError> for Error {
    fn from(e: SignError) -> Self {
        Error::Sign(Classified::new(e))
    }
}

/// Why an attestation does not vouch for a snapshot under the keys trusted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Distrust {
    /// The attestation is not a DSSE envelope.
    #[error("it is not a DSSE envelope: {0}")]
    Malformed(String),
    /// No trusted key signed it (or a signature does not verify: the
    /// envelope was changed).
    #[error("no trusted key signed it (it claims {})", claimed(.0))]
    Untrusted(Vec<KeyId>),
    /// A trusted key signed something other than an in-toto statement.
    #[error("it holds no in-toto statement v1 ({0})")]
    NotAStatement(String),
    /// A trusted key signed a statement about other digests.
    #[error("its subject is {}, not this snapshot", if .0.is_empty() { "no sha256 digest".to_string() } else { .0.join(", ") })]
    OtherSubject(Vec<String>),
}

fn claimed(ids: &[KeyId]) -> String {
    if ids.is_empty() {
        return "no key id".into();
    }
    ids.iter()
        .map(|id| format!("key {id}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The key, among `trusted`, under which the attestation `bytes` vouches
/// for the snapshot `digest`: a DSSE envelope of an in-toto statement whose
/// subject is exactly that digest, signed by that key.
pub fn verify_attestation(
    bytes: &[u8],
    trusted: &[PublicKey],
    digest: &ManifestDigest,
) -> Result<KeyId, Distrust> {
    let envelope: Envelope =
        serde_json::from_slice(bytes).map_err(|e| Distrust::Malformed(e.to_string()))?;
    let key = envelope
        .signed_by(trusted)
        .ok_or_else(|| Distrust::Untrusted(envelope.claimed_keyids()))?;
    if envelope.payload_type != IN_TOTO_PAYLOAD_TYPE {
        return Err(Distrust::NotAStatement(format!(
            "payload type {}",
            envelope.payload_type
        )));
    }
    let payload = envelope
        .payload_bytes()
        .ok_or_else(|| Distrust::Malformed("its payload is not base64".into()))?;
    let statement: Statement =
        serde_json::from_slice(&payload).map_err(|e| Distrust::NotAStatement(e.to_string()))?;
    if statement.statement_type != statement::STATEMENT_TYPE {
        return Err(Distrust::NotAStatement(format!(
            "type {}",
            statement.statement_type
        )));
    }
    let subjects = statement.subject_digests();
    let hex = digest.to_hex();
    if subjects.len() != 1 || subjects[0] != hex {
        return Err(Distrust::OtherSubject(
            subjects.into_iter().map(str::to_string).collect(),
        ));
    }
    Ok(key.id())
}

/// An attestation of a snapshot staged by `stager` (`USER@HOST`), signed
/// by `key`: the envelope's bytes (compact JSON) and the signing key's id.
pub fn attest(key: &PrivateKey, facts: &SnapshotFacts<'_>, stager: &str) -> (Vec<u8>, KeyId) {
    let statement = Statement::of_snapshot(facts, stager);
    // Cannot fail: the statement is strings, numbers, bools and lists.
    let payload = serde_json::to_vec(&statement).unwrap_or_default();
    let envelope = Envelope::sign(key, IN_TOTO_PAYLOAD_TYPE, &payload);
    (
        serde_json::to_vec(&envelope).unwrap_or_default(),
        key.public().id(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn facts(digest: ManifestDigest) -> SnapshotFacts<'static> {
        SnapshotFacts {
            name: "compound-engineering",
            version: "1.2.3",
            digest,
            source: None,
            ingested_at: "2026-01-01T00:00:00.000Z",
        }
    }

    #[test]
    fn an_attestation_vouches_for_its_digest_under_its_key_only() {
        let dir = tempfile::tempdir().unwrap();
        generate(&dir.path().join("a")).unwrap();
        generate(&dir.path().join("b")).unwrap();
        let a = PrivateKey::load(&dir.path().join("a")).unwrap();
        let b = PrivateKey::load(&dir.path().join("b")).unwrap();
        let digest = ManifestDigest::of(b"one");
        let (bytes, id) = attest(&a, &facts(digest), "me@host");
        assert_eq!(id, a.public().id());
        let trusted = [b.public().clone(), a.public().clone()];
        assert_eq!(verify_attestation(&bytes, &trusted, &digest), Ok(id));
        assert_eq!(
            verify_attestation(&bytes, &trusted[..1], &digest),
            Err(Distrust::Untrusted(vec![id]))
        );
        let other = ManifestDigest::of(b"two");
        assert_eq!(
            verify_attestation(&bytes, &trusted, &other),
            Err(Distrust::OtherSubject(vec![digest.to_hex()]))
        );
        assert!(matches!(
            verify_attestation(b"{}", &trusted, &digest),
            Err(Distrust::Malformed(_))
        ));
        // One byte of the payload changed: no longer signed.
        let mut env: Envelope = serde_json::from_slice(&bytes).unwrap();
        let mut payload = env.payload_bytes().unwrap();
        let at = payload.len() / 2;
        payload[at] ^= 1;
        env.payload = base64::engine::general_purpose::STANDARD.encode(payload);
        let changed = serde_json::to_vec(&env).unwrap();
        assert!(matches!(
            verify_attestation(&changed, &trusted, &digest),
            Err(Distrust::Untrusted(_))
        ));
    }
}
