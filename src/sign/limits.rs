//! The bounds on the attestations a snapshot travels with, and their one
//! check: push and export hold a snapshot's attestations to them before
//! anything is sent, pull (a registry's referrers) and import (a bundle's
//! entries) before anything enters the store.
//!
//! Each caller places a breach among its own errors: push and export refuse
//! the request (exit 2), a bundle that breaks them is damaged (exit 6), and
//! a registry that lists too many answers something unusable.

use crate::error::{Classified, Classify, Error, ErrorKind};

/// The most bytes one attestation (a DSSE envelope) may have: a pull or an
/// import refuses a larger one, and a push or an export does not send one.
pub const MAX_ATTESTATION_BYTES: u64 = 1024 * 1024;
/// The most attestations one snapshot may travel with.
pub const MAX_ATTESTATIONS: usize = 64;

/// A bound on attestations broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttestationLimit {
    /// More attestations than a snapshot travels with.
    #[error("{count} attestations are more than the {MAX_ATTESTATIONS} a snapshot travels with")]
    TooMany {
        /// How many there are (or, read one by one, at least).
        count: usize,
    },
    /// An attestation larger than one may be.
    #[error(
        "an attestation of {size} bytes is larger than the {MAX_ATTESTATION_BYTES} one may have"
    )]
    TooLarge {
        /// Its size in bytes.
        size: u64,
    },
}

/// Checks a count of attestations against [`MAX_ATTESTATIONS`].
pub fn check_count(count: usize) -> Result<(), AttestationLimit> {
    if count > MAX_ATTESTATIONS {
        return Err(AttestationLimit::TooMany { count });
    }
    Ok(())
}

/// Checks one attestation's size against [`MAX_ATTESTATION_BYTES`].
pub fn check_size(size: u64) -> Result<(), AttestationLimit> {
    if size > MAX_ATTESTATION_BYTES {
        return Err(AttestationLimit::TooLarge { size });
    }
    Ok(())
}

/// Checks the attestations a snapshot is to travel with: their count, then
/// each one's size.
pub fn check(attestations: &[Vec<u8>]) -> Result<(), AttestationLimit> {
    check_count(attestations.len())?;
    attestations
        .iter()
        .try_for_each(|a| check_size(a.len() as u64))
}

/// A breach as a command's own error: a request (push, export) refused.
impl Classify for AttestationLimit {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Usage
    }

    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }
}

impl From<AttestationLimit> for Error {
    fn from(e: AttestationLimit) -> Self {
        Error::Sign(Classified::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_inclusive() {
        let at_most = vec![vec![0u8; MAX_ATTESTATION_BYTES as usize]; MAX_ATTESTATIONS];
        assert_eq!(check(&at_most), Ok(()));
        let too_many = vec![Vec::new(); MAX_ATTESTATIONS + 1];
        assert_eq!(
            check(&too_many),
            Err(AttestationLimit::TooMany {
                count: MAX_ATTESTATIONS + 1
            })
        );
        let too_large = vec![vec![0u8; MAX_ATTESTATION_BYTES as usize + 1]];
        assert_eq!(
            check(&too_large),
            Err(AttestationLimit::TooLarge {
                size: MAX_ATTESTATION_BYTES + 1
            })
        );
        assert_eq!(
            Error::from(AttestationLimit::TooMany { count: 65 }).exit_code(),
            2
        );
    }
}
