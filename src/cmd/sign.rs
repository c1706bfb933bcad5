//! `cestore sign DIGEST --key FILE` and `cestore attestations DIGEST`
//! ([`crate::store::trust::signed`]).

use std::path::Path;

use super::{open, Need};
use crate::error::Result;
use crate::sign::{PrivateKey, PublicKey};
use crate::store::trust::signed;
pub use crate::store::trust::signed::{AttestationInfo, AttestationsReport, SignReport, Verified};

/// Signs a snapshot with the key in `key_file`, read before the store is
/// opened.
pub fn sign(root: &Path, digest: &str, key_file: &Path) -> Result<SignReport> {
    let key = PrivateKey::load(key_file)?;
    let mut store = open(root, Need::Existing)?;
    signed::sign_snapshot(&mut store, digest, &key)
}

/// The attestations kept of a snapshot, each judged under the keys `trusted`.
pub fn attestations(
    root: &Path,
    digest: &str,
    trusted: &[PublicKey],
) -> Result<AttestationsReport> {
    let store = open(root, Need::Existing)?;
    signed::list_attestations(&store, digest, trusted)
}
