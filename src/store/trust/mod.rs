//! Trust: who vouches for a snapshot, and whether it is what its source gives.
//!
//! - `signed.rs`: sign, attestations, and trust: whether an attestation
//!   vouches for a snapshot under the keys trusted;
//! - `attest.rs`: attestations added to a recorded snapshot (attach);
//! - `provenance.rs`: a snapshot re-derived from its recorded commit.
//!
//! Trust uses only the store's core and the [`Store`](crate::store::Store)
//! handle: the lowest room above the core.

pub mod attest;
pub mod provenance;
pub mod signed;
