//! The checks a stored snapshot passes before it leaves the store, by a
//! push or an export: it is whole and holds only what a view could, its
//! catalogue manifest is its canonical manifest, and its attestations fit
//! the bounds a pull and an import hold them to. One function makes them
//! for both, with one set of messages.

use std::path::PathBuf;

use crate::catalogue::resolve;
use crate::digest::ManifestDigest;
use crate::error::{Classified, Classify, Error, ErrorKind, Result};
use crate::manifest::{Manifest, ManifestError};
use crate::remote::{MAX_ATTESTATIONS, MAX_ATTESTATION_BYTES};
use crate::store::Store;

/// A stored snapshot, checked and ready to leave the store.
#[derive(Debug)]
pub struct Outbound {
    /// Its digest.
    pub digest: ManifestDigest,
    /// Its canonical manifest.
    pub manifest: Manifest,
    /// Its attestations (DSSE envelopes, as bytes), within the bounds.
    pub attestations: Vec<Vec<u8>>,
}

/// Checks the snapshot `name` (a digest, a unique prefix or `@VERSION`) of
/// `store` before a push or an export: its attestations fit the bounds
/// ([`check_attestations`]), its entries break no rule a view is held to,
/// and the catalogue's manifest for it is canonical and hashes to its digest.
pub fn preflight(store: &Store, name: &str) -> Result<Outbound> {
    let digest = resolve(store.catalogue(), name)?;
    let attestations = crate::store::signed::stored_envelopes(store, &digest)?;
    check_attestations(&attestations)?;
    // Whatever leaves the store holds only what a view could.
    store.entries_to_hand_out(&digest)?;
    let bytes = store.catalogue().manifest_bytes(&digest)?;
    let manifest =
        Manifest::parse(&bytes).map_err(|error| OutgoingError::NotCanonical { digest, error })?;
    if manifest.digest != digest {
        return Err(OutgoingError::HashesTo {
            digest,
            found: manifest.digest,
        }
        .into());
    }
    Ok(Outbound {
        digest,
        manifest,
        attestations,
    })
}

/// Checks the attestations a snapshot is to travel with against the bounds
/// a pull and an import hold them to: at most [`MAX_ATTESTATIONS`], each at
/// most [`MAX_ATTESTATION_BYTES`].
pub fn check_attestations(attestations: &[Vec<u8>]) -> Result<(), OutgoingError> {
    if attestations.len() > MAX_ATTESTATIONS {
        return Err(OutgoingError::TooManyAttestations {
            count: attestations.len(),
        });
    }
    if let Some(big) = attestations
        .iter()
        .find(|a| a.len() as u64 > MAX_ATTESTATION_BYTES)
    {
        return Err(OutgoingError::AttestationTooLarge { bytes: big.len() });
    }
    Ok(())
}

/// A stored snapshot that cannot leave the store as it is.
#[derive(Debug, thiserror::Error)]
pub enum OutgoingError {
    /// The catalogue's manifest for the snapshot does not parse as a
    /// canonical manifest.
    #[error("the catalogue's manifest for {digest} is not canonical: {error}")]
    NotCanonical {
        /// The snapshot.
        digest: ManifestDigest,
        /// Why it is not.
        error: ManifestError,
    },
    /// The catalogue's manifest for the snapshot hashes to another digest.
    #[error("the catalogue's manifest for {digest} hashes to {found}")]
    HashesTo {
        /// The snapshot.
        digest: ManifestDigest,
        /// What the manifest hashes to.
        found: ManifestDigest,
    },
    /// The snapshot has more attestations than one travels with.
    #[error("a snapshot travels with at most {MAX_ATTESTATIONS} attestations, not {count}")]
    TooManyAttestations {
        /// How many it has.
        count: usize,
    },
    /// An attestation is larger than a pull or an import takes.
    #[error("an attestation of {bytes} bytes is larger than the {MAX_ATTESTATION_BYTES} a pull or an import takes")]
    AttestationTooLarge {
        /// Its size.
        bytes: usize,
    },
    /// An object read to send no longer hashes to its key.
    #[error("object '{}' no longer matches its key; run `cestore verify`", .path.display())]
    ObjectChanged {
        /// The object's file in the store.
        path: PathBuf,
    },
}

impl Classify for OutgoingError {
    /// `usage` for attestations beyond the bounds, else `integrity`.
    fn kind(&self) -> ErrorKind {
        match self {
            OutgoingError::TooManyAttestations { .. }
            | OutgoingError::AttestationTooLarge { .. } => ErrorKind::Usage,
            OutgoingError::NotCanonical { .. }
            | OutgoingError::HashesTo { .. }
            | OutgoingError::ObjectChanged { .. } => ErrorKind::Integrity,
        }
    }

    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }
}

impl From<OutgoingError> for Error {
    fn from(e: OutgoingError) -> Self {
        Error::Transfer(Classified::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attestations_beyond_the_bounds_are_usage_errors_a_caller_can_match() {
        let many = vec![Vec::new(); MAX_ATTESTATIONS + 1];
        let e = check_attestations(&many).unwrap_err();
        assert!(matches!(
            e,
            OutgoingError::TooManyAttestations { count: 65 }
        ));
        let e = Error::from(e);
        assert_eq!(e.error_kind(), ErrorKind::Usage);
        assert_eq!(
            e.to_string(),
            "a snapshot travels with at most 64 attestations, not 65"
        );
        let big = vec![vec![0u8; MAX_ATTESTATION_BYTES as usize + 1]];
        let e = check_attestations(&big).unwrap_err();
        assert!(
            matches!(e, OutgoingError::AttestationTooLarge { bytes } if bytes == MAX_ATTESTATION_BYTES as usize + 1)
        );
        assert!(check_attestations(&vec![Vec::new(); MAX_ATTESTATIONS]).is_ok());
        let changed = Error::from(OutgoingError::ObjectChanged {
            path: "/s/objects/ab".into(),
        });
        assert_eq!(changed.error_kind(), ErrorKind::Integrity);
        assert_eq!(changed.path(), None);
        assert_eq!(
            changed.to_string(),
            "object '/s/objects/ab' no longer matches its key; run `cestore verify`"
        );
    }
}
