//! The checks a stored snapshot passes before it leaves the store, by a
//! push or an export: it is whole and holds only what a view could, its
//! catalogue manifest is its canonical manifest, and its attestations fit
//! the bounds a pull and an import hold them to. One function makes them
//! for both, with one set of messages.

use std::path::PathBuf;

use crate::catalogue::resolve;
use crate::digest::ManifestDigest;
use crate::error::{Classified, Classify, Error, ErrorKind, Result};
use crate::profile::ce::manifest::{Manifest, ManifestError};
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
/// ([`crate::sign::limits::check`]), its entries break no rule a view is held to,
/// and the catalogue's manifest for it is canonical and hashes to its digest.
pub fn preflight(store: &Store, name: &str) -> Result<Outbound> {
    let digest = resolve(store.catalogue(), name)?;
    let attestations = crate::store::trust::signed::stored_envelopes(store, &digest)?;
    crate::sign::limits::check(&attestations)?;
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
    /// An object read to send no longer hashes to its key.
    #[error("object '{}' no longer matches its key; run `cestore verify`", .path.display())]
    ObjectChanged {
        /// The object's file in the store.
        path: PathBuf,
    },
}

impl Classify for OutgoingError {
    /// Always `integrity`: the store holds something other than it recorded.
    fn kind(&self) -> ErrorKind {
        ErrorKind::Integrity
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
    fn an_object_changed_is_an_integrity_error_a_caller_can_match() {
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
