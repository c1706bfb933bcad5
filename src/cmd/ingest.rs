//! `cestore ingest`: validate a release as the reference does, store each file
//! once, and record the snapshot ([`crate::store::ingest::ingest`]).

pub use crate::store::ingest::{ingest, IngestOptions, IngestReport, IngestStats};
