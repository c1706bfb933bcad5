//! `cestore digest`: validate a release as ingest does and print its manifest
//! digest, storing nothing: no object is written and no store or catalogue is
//! opened or created.

pub use crate::store::ingest::{digest_release as digest, DigestReport};
