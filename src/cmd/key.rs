//! `cestore key generate FILE`: a new ed25519 key pair
//! ([`crate::sign::generate`]).

use std::path::Path;

pub use crate::sign::GeneratedKey;

/// Writes a new key pair: FILE and FILE.pub.
pub fn generate(file: &Path) -> crate::error::Result<GeneratedKey> {
    Ok(crate::sign::generate(file)?)
}
