//! Signing snapshots and asking who vouches for them: `cestore sign`,
//! `ingest --sign-with`, `cestore attestations`, and the trust checks of
//! `pull`, `import`, `audit` and `verify` with `--trusted-key`.
//!
//! An attestation is made from what the store knows of the snapshot (its
//! name, version and digest, its newest source record, its first ingest
//! time, and who signs where) and kept beside its manifest
//! ([`crate::store::trust::attest::attach`]). Trust is decided in one place,
//! [`vouched_by`]: an attestation vouches for a snapshot under a key when
//! that key signed it and its statement's one subject is the snapshot's
//! digest.

use crate::catalogue::{resolve, KeptAttestation};
use crate::digest::{AttestationId, KeyId, ManifestDigest};
use crate::error::{Error, Result};
use crate::sign::{self, Distrust, PrivateKey, PublicKey, SnapshotFacts, Statement};
use crate::store::Store;

/// What `cestore sign` did.
#[derive(Debug, serde::Serialize)]
pub struct SignReport {
    /// The snapshot signed.
    pub manifest_digest: ManifestDigest,
    /// The signing key's id.
    pub keyid: KeyId,
    /// The attestation's id: the SHA-256 of its envelope.
    pub attestation: AttestationId,
    /// When it was made.
    pub at: String,
    /// Whether it was made now: false when the key had signed the snapshot
    /// already.
    pub new: bool,
    /// With an environment: each snapshot it names (its members, a task
    /// member's tree and dependency list), signed before it in dependency
    /// order; absent otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<SignReport>,
}

/// The attestation of a snapshot that `key` signs now: its statement names
/// the snapshot, its source record and who stages where.
pub fn attestation(key: &PrivateKey, what: &SnapshotFacts<'_>) -> Result<KeptAttestation> {
    let stager = format!(
        "{}@{}",
        crate::store::core::who::user_name(),
        crate::store::core::who::host_name()
    );
    let (bytes, keyid) = sign::attest(key, what, &stager);
    // The envelope is compact JSON on one line and the key id 64 hex
    // digits: what a kept attestation must be.
    KeptAttestation::new(
        String::from_utf8_lossy(&bytes),
        keyid.to_hex(),
        crate::clock::now(),
    )
    .ok_or_else(|| {
        crate::error::Damage::Attestation {
            digest: what.digest,
        }
        .into()
    })
}

/// The attestation among `kept` that already vouches for `digest` under
/// `key`: signing again would add nothing a verifier needs.
fn signed_by<'a>(
    kept: &'a [KeptAttestation],
    key: &PrivateKey,
    digest: &ManifestDigest,
) -> Option<&'a KeptAttestation> {
    let public = std::slice::from_ref(key.public());
    kept.iter()
        .find(|a| vouched_by(envelope_bytes(a), public, digest).is_ok())
}

/// What signing a snapshot with a key comes to.
pub enum Signing {
    /// The key had signed it already: the attestation it holds.
    Held(KeptAttestation),
    /// A new attestation, to keep beside it.
    New(KeptAttestation),
}

/// Signs the snapshot `digest` with `key` once: the attestation by `key`
/// that `cat` holds of it already, else a new one (see [`attestation`]).
/// Each warm stage of a sweep with `--sign-with` would otherwise add one
/// more attestation saying the same.
pub fn sign_once(
    cat: &crate::catalogue::Catalogue,
    key: &PrivateKey,
    what: &SnapshotFacts<'_>,
) -> Result<Signing> {
    let held = cat.attestations(&what.digest)?;
    if let Some(a) = signed_by(&held, key, &what.digest) {
        return Ok(Signing::Held(a.clone()));
    }
    attestation(key, what).map(Signing::New)
}

/// What an ingest of a snapshot with no source record keeps beside it
/// when asked to sign it with `key`: `key`'s new attestation of `name` at
/// `digest`, made now; none when the store holds one by `key` already, or
/// when no key is given.
pub fn sign_ingest(
    cat: &crate::catalogue::Catalogue,
    key: Option<&PrivateKey>,
    name: &str,
    digest: ManifestDigest,
) -> Result<Vec<KeptAttestation>> {
    let Some(key) = key else {
        return Ok(Vec::new());
    };
    let at = crate::clock::now();
    let what = SnapshotFacts {
        name,
        version: "",
        digest,
        source: None,
        ingested_at: &at,
    };
    Ok(match sign_once(cat, key, &what)? {
        Signing::New(kept) => vec![kept],
        Signing::Held(_) => Vec::new(),
    })
}

/// Signs a recorded snapshot with the private key at `key_file`, and keeps
/// the attestation beside it; a snapshot this key has signed already keeps
/// the attestation it has (`new` is false). The key is checked before the
/// store is opened.
///
/// An environment is signed as one unit: every snapshot it names (its
/// members, and a task member's tree and dependency list) first, each the
/// key has not signed yet, then the environment.
pub fn sign_snapshot(store: &mut Store, digest: &str, key: &PrivateKey) -> Result<SignReport> {
    let digest = resolve(store.catalogue(), digest)?;
    let mut members = Vec::new();
    if store.catalogue().kind_of(&digest) == Some(crate::profile::tree::stored::Kind::Environment) {
        let named = store.named_closure(&digest)?;
        for d in named {
            members.push(sign_one(store, d, key)?);
        }
    }
    let mut report = sign_one(store, digest, key)?;
    report.members = members;
    Ok(report)
}

/// Signs one recorded snapshot (see [`sign_snapshot`]).
fn sign_one(store: &mut Store, digest: ManifestDigest, key: &PrivateKey) -> Result<SignReport> {
    let row = store.catalogue().snapshot(&digest)?;
    let sources = store.catalogue().sources(&digest)?;
    let what = SnapshotFacts {
        name: &row.name,
        version: &row.version,
        digest,
        source: sources.last().map(|k| &k.entry.record),
        ingested_at: &row.first_ingested_at,
    };
    let (kept, new) = match sign_once(store.catalogue(), key, &what)? {
        Signing::Held(kept) => (kept, false),
        Signing::New(kept) => {
            crate::store::trust::attest::attach(store, &digest, std::slice::from_ref(&kept))?;
            (kept, true)
        }
    };
    Ok(SignReport {
        manifest_digest: digest,
        keyid: key.public().id(),
        attestation: kept.id,
        at: kept.at,
        new,
        members: Vec::new(),
    })
}

/// The key among `trusted` under which an attestation vouches for
/// `digest`, or why it does not.
pub fn vouched_by(
    envelope: &[u8],
    trusted: &[PublicKey],
    digest: &ManifestDigest,
) -> std::result::Result<KeyId, Distrust> {
    sign::verify_attestation(envelope, trusted, digest)
}

/// The first of `attestations` that vouches for `digest` under a key of
/// `trusted`, and that key; else the error that says why none does.
pub fn require_trusted<'a>(
    attestations: impl IntoIterator<Item = &'a [u8]>,
    trusted: &[PublicKey],
    digest: &ManifestDigest,
) -> Result<KeyId> {
    let mut why = Vec::new();
    for (i, envelope) in attestations.into_iter().enumerate() {
        match vouched_by(envelope, trusted, digest) {
            Ok(key) => return Ok(key),
            Err(d) => why.push(format!("attestation {}: {d}", i + 1)),
        }
    }
    let why = if why.is_empty() {
        "it has no attestation; a key trusted must sign it (`cestore sign`)".to_string()
    } else {
        format!(
            "no attestation vouches for it under a key trusted ({})",
            why.join("; ")
        )
    };
    Err(Error::Untrusted {
        digest: *digest,
        why,
    })
}

/// The check `pull` and `import` give their carrier's attestations: with no
/// key trusted, any (or none) will do; else one must vouch for the snapshot
/// under a key trusted, or nothing enters the store.
pub fn trust_check(
    trusted: &[PublicKey],
) -> impl Fn(&[Vec<u8>], &ManifestDigest) -> Result<()> + '_ {
    move |attestations, digest| {
        if trusted.is_empty() {
            return Ok(());
        }
        require_trusted(attestations.iter().map(Vec::as_slice), trusted, digest).map(drop)
    }
}

/// Attestations a carrier brought, as the store keeps them, received now:
/// each DSSE envelope as compact JSON on one line (a signature covers the
/// payload and its type, not the envelope's layout), under the key among
/// `trusted` that signed it, else the key id its first signature claims.
/// Whatever vouched for the snapshot under a key trusted is kept; an
/// envelope that is none, or names no signer, is not.
pub fn received(attestations: &[Vec<u8>], trusted: &[PublicKey]) -> Vec<KeptAttestation> {
    let at = crate::clock::now();
    attestations
        .iter()
        .filter_map(|bytes| {
            let envelope: sign::Envelope = serde_json::from_slice(bytes).ok()?;
            let keyid = envelope
                .signed_by(trusted)
                .map(PublicKey::id)
                .or_else(|| envelope.claimed_keyids().into_iter().next())?;
            let json = serde_json::to_string(&envelope).ok()?;
            KeptAttestation::new(json, keyid.to_hex(), at.clone())
        })
        .collect()
}

/// The envelopes of a snapshot's stored attestations, as push and export
/// carry them.
pub fn stored_envelopes(store: &Store, digest: &ManifestDigest) -> Result<Vec<Vec<u8>>> {
    Ok(store
        .catalogue()
        .attestations(digest)?
        .iter()
        .map(|a| envelope_bytes(a).to_vec())
        .collect())
}

/// Whether a snapshot is signed under the keys trusted: what `audit
/// --trusted-key` says of each digest.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum Signature {
    /// An attestation vouches for it under this key.
    Signed {
        /// The key's id.
        keyid: KeyId,
    },
    /// None does.
    Unsigned {
        /// Why, in words.
        why: String,
    },
}

/// Whether the stored attestations of `digest` vouch for it under a key of
/// `trusted`.
pub fn signature(
    attestations: &[KeptAttestation],
    trusted: &[PublicKey],
    digest: &ManifestDigest,
) -> Signature {
    let envelopes = attestations.iter().map(envelope_bytes);
    match require_trusted(envelopes, trusted, digest) {
        Ok(keyid) => Signature::Signed { keyid },
        Err(Error::Untrusted { why, .. }) => Signature::Unsigned { why },
        Err(e) => Signature::Unsigned { why: e.to_string() },
    }
}

/// An attestation's envelope bytes, without the line's end.
pub fn envelope_bytes(kept: &KeptAttestation) -> &[u8] {
    kept.json.trim_end_matches('\n').as_bytes()
}

/// One stored attestation, as `cestore attestations` lists it.
#[derive(Debug, serde::Serialize)]
pub struct AttestationInfo {
    /// Its id: the SHA-256 of its envelope.
    pub id: AttestationId,
    /// The key id its signature claims (checked only with `--trusted-key`).
    pub keyid: String,
    /// When it was made or received.
    pub at: String,
    /// The subjects its statement names (`PLUGIN@VERSION`).
    pub subjects: Vec<String>,
    /// Who staged the snapshot, as its provenance says.
    pub builder: Option<String>,
    /// With `--trusted-key`: whether it vouches for the snapshot, and why not.
    pub verified: Option<Verified>,
    /// The envelope, verbatim (a DSSE JSON object).
    pub envelope: serde_json::Value,
}

/// The verdict on one attestation under the keys trusted.
#[derive(Debug, serde::Serialize)]
pub struct Verified {
    /// Whether it vouches for the snapshot.
    pub ok: bool,
    /// The trusted key that signed it, when it does.
    pub keyid: Option<KeyId>,
    /// Why not, when it does not.
    pub why: Option<String>,
}

/// The report of `cestore attestations`.
#[derive(Debug, serde::Serialize)]
pub struct AttestationsReport {
    /// The snapshot.
    pub manifest_digest: ManifestDigest,
    /// Its attestations, oldest first.
    pub attestations: Vec<AttestationInfo>,
}

/// Lists a snapshot's attestations; with `trusted` keys, says of each
/// whether it vouches for the snapshot.
pub fn list_attestations(
    store: &Store,
    digest: &str,
    trusted: &[PublicKey],
) -> Result<AttestationsReport> {
    let digest = resolve(store.catalogue(), digest)?;
    let attestations = store
        .catalogue()
        .attestations(&digest)?
        .iter()
        .map(|kept| describe(kept, trusted, &digest))
        .collect();
    Ok(AttestationsReport {
        manifest_digest: digest,
        attestations,
    })
}

/// What one stored attestation says, read without trusting it.
fn describe(
    kept: &KeptAttestation,
    trusted: &[PublicKey],
    digest: &ManifestDigest,
) -> AttestationInfo {
    let bytes = envelope_bytes(kept);
    let envelope: serde_json::Value = serde_json::from_slice(bytes).unwrap_or_default();
    let statement: Option<Statement> = serde_json::from_value::<sign::Envelope>(envelope.clone())
        .ok()
        .and_then(|e| e.payload_bytes())
        .and_then(|p| serde_json::from_slice(&p).ok());
    let verified = (!trusted.is_empty()).then(|| match vouched_by(bytes, trusted, digest) {
        Ok(keyid) => Verified {
            ok: true,
            keyid: Some(keyid),
            why: None,
        },
        Err(d) => Verified {
            ok: false,
            keyid: None,
            why: Some(d.to_string()),
        },
    });
    AttestationInfo {
        id: kept.id,
        keyid: kept.keyid.clone(),
        at: kept.at.clone(),
        subjects: statement
            .as_ref()
            .map(|s| s.subject.iter().map(|x| x.name.clone()).collect())
            .unwrap_or_default(),
        builder: statement
            .as_ref()
            .and_then(|s| s.builder().map(str::to_string)),
        verified,
        envelope,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ce::manifest::{Entry, Manifest};
    use crate::store::testutil::record;
    use crate::store::upkeep::verify::{check_attestations, VerifyReport};
    use crate::store::LockMode;
    use std::path::Path;

    fn key(dir: &Path, name: &str) -> PrivateKey {
        sign::generate(&dir.join(name)).unwrap();
        PrivateKey::load(&dir.join(name)).unwrap()
    }

    #[test]
    fn only_a_trusted_key_over_exactly_the_digest_signs_a_snapshot() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(&tmp.path().join("store"), LockMode::Shared, true).unwrap();
        let (a, b) = (key(tmp.path(), "a"), key(tmp.path(), "b"));
        let one = Manifest::new(vec![Entry::of("a.md", b"a\n", false)]);
        let two = Manifest::new(vec![Entry::of("b.md", b"b\n", false)]);
        record(&mut store, &one);
        record(&mut store, &two);
        let by_a = attestation(
            &a,
            &SnapshotFacts {
                name: "p",
                version: "1.0.0",
                digest: one.digest,
                source: None,
                ingested_at: "t",
            },
        )
        .unwrap();
        crate::store::trust::attest::attach(&mut store, &one.digest, std::slice::from_ref(&by_a))
            .unwrap();
        let kept = store.catalogue().attestations(&one.digest).unwrap();
        let (pa, pb) = (a.public().clone(), b.public().clone());
        assert_eq!(
            signature(&kept, &[pb.clone(), pa.clone()], &one.digest),
            Signature::Signed { keyid: pa.id() }
        );
        assert!(matches!(
            signature(&kept, std::slice::from_ref(&pb), &one.digest),
            Signature::Unsigned { .. }
        ));
        assert!(matches!(
            signature(&[], std::slice::from_ref(&pa), &one.digest),
            Signature::Unsigned { .. }
        ));

        // A's attestation of one, kept beside two: checked, not verified.
        crate::store::trust::attest::attach(&mut store, &two.digest, std::slice::from_ref(&by_a))
            .unwrap();
        let mut report = VerifyReport::default();
        for d in [one.digest, two.digest] {
            check_attestations(&store, &d, std::slice::from_ref(&pa), &mut report).unwrap();
        }
        assert_eq!(report.attestations_checked, Some(2));
        assert_eq!(report.attestations_verified, Some(1));
        let [problem] = &report.problems[..] else {
            panic!("{:?}", report.problems)
        };
        assert_eq!(problem.kind, "untrusted-attestation");
        assert_eq!(problem.snapshots, [two.digest]);
        assert!(
            problem.path.ends_with(&format!("{}.json", by_a.id)),
            "{problem:?}"
        );
        assert!(problem.detail.contains("its subject is"), "{problem:?}");
    }
}
