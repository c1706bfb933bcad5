//! DSSE envelopes (Dead Simple Signing Envelope, v1): a payload, its type,
//! and signatures over both by their pre-authentication encoding.
//!
//! ```text
//! {"payload": base64(statement), "payloadType": "application/vnd.in-toto+json",
//!  "signatures": [{"keyid": "<64 hex>", "sig": base64(ed25519 over PAE)}]}
//!
//! PAE = "DSSEv1" SP len(type) SP type SP len(payload) SP payload
//! ```
//!
//! Any DSSE implementation verifies these envelopes (securesystemslib's
//! `Envelope.verify`, with the public key's id as cestore gives it).

use base64::Engine;

use super::key::{PrivateKey, PublicKey};
use crate::digest::KeyId;

/// The payload type of an in-toto statement.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// A DSSE envelope.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Envelope {
    /// The payload, base64 (standard alphabet, padded).
    pub payload: String,
    /// The payload's type.
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// The signatures over the envelope's pre-authentication encoding.
    pub signatures: Vec<EnvelopeSignature>,
}

/// One signature of an envelope.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EnvelopeSignature {
    /// The id of the key that made it.
    pub keyid: String,
    /// The signature, base64.
    pub sig: String,
}

/// DSSE's pre-authentication encoding of a payload and its type.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

impl Envelope {
    /// An envelope of `payload`, signed by `key`.
    pub fn sign(key: &PrivateKey, payload_type: &str, payload: &[u8]) -> Envelope {
        let b64 = base64::engine::general_purpose::STANDARD;
        let sig = key.sign(&pae(payload_type, payload));
        Envelope {
            payload: b64.encode(payload),
            payload_type: payload_type.to_string(),
            signatures: vec![EnvelopeSignature {
                keyid: key.public().id().to_hex(),
                sig: b64.encode(sig),
            }],
        }
    }

    /// The payload's bytes, if it is valid base64.
    pub fn payload_bytes(&self) -> Option<Vec<u8>> {
        base64::engine::general_purpose::STANDARD
            .decode(&self.payload)
            .ok()
    }

    /// The first of `keys` that signed this envelope, by a signature that
    /// verifies over its payload and type. Each signature is checked against
    /// every key, whatever key id it claims: the id is a hint, not a trust.
    pub fn signed_by<'k>(&self, keys: &'k [PublicKey]) -> Option<&'k PublicKey> {
        let payload = self.payload_bytes()?;
        let message = pae(&self.payload_type, &payload);
        let b64 = base64::engine::general_purpose::STANDARD;
        let sigs: Vec<Vec<u8>> = self
            .signatures
            .iter()
            .filter_map(|s| b64.decode(&s.sig).ok())
            .collect();
        keys.iter()
            .find(|k| sigs.iter().any(|sig| k.verifies(&message, sig)))
    }

    /// The key ids the envelope's signatures claim.
    pub fn claimed_keyids(&self) -> Vec<KeyId> {
        self.signatures
            .iter()
            .filter_map(|s| KeyId::from_lower_hex(&s.keyid))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sign::key::generate;

    #[test]
    fn pae_is_dsse_v1() {
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
    }

    #[test]
    fn an_envelope_verifies_under_its_key_only_and_not_once_changed() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        generate(&a).unwrap();
        generate(&b).unwrap();
        let key = PrivateKey::load(&a).unwrap();
        let other = PrivateKey::load(&b).unwrap();
        let env = Envelope::sign(&key, IN_TOTO_PAYLOAD_TYPE, b"{\"x\":1}");
        let keys = [other.public().clone(), key.public().clone()];
        assert_eq!(env.signed_by(&keys), Some(key.public()));
        assert_eq!(env.signed_by(&keys[..1]), None);
        assert_eq!(env.claimed_keyids(), [key.public().id()]);

        let mut changed = env.clone();
        changed.payload = base64::engine::general_purpose::STANDARD.encode(b"{\"x\":2}");
        assert_eq!(changed.signed_by(&keys), None);
        let mut retyped = env.clone();
        retyped.payload_type = "text/plain".into();
        assert_eq!(retyped.signed_by(&keys), None);
        let mut flipped = env.clone();
        let mut sig = base64::engine::general_purpose::STANDARD
            .decode(&flipped.signatures[0].sig)
            .unwrap();
        sig[10] ^= 1;
        flipped.signatures[0].sig = base64::engine::general_purpose::STANDARD.encode(sig);
        assert_eq!(flipped.signed_by(&keys), None);
    }
}
