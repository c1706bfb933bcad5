//! The store's core: what every room of the store reads and writes through.
//!
//! - `objects.rs`: object checks, work directories, publishing objects;
//! - `manifests.rs`: manifests on disk: write, read, scan against the catalogue;
//! - `beside.rs`: files kept beside the manifests, source records and
//!   attestations (write, read, take back, rm, gc's listing);
//! - `query.rs`: list, log, find, show, diff: reads of what the store holds;
//! - `who.rs`: who and what made a catalogue event (host, user, this build).
//!
//! The core uses only the [`Store`](crate::store::Store) handle, never
//! another room.

pub(crate) mod beside;
pub(crate) mod manifests;
pub(crate) mod objects;
pub mod query;
pub(crate) mod who;
