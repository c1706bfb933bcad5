//! cestore: a content-addressed snapshot store for pinned plugin releases.
//!
//! A release is validated once, exactly as the reference implementation
//! (`runtime_mounts.py`) validates it; each file is stored once under its
//! SHA-256; and the release is remembered by its manifest digest, the SHA-256
//! of a canonical manifest that is byte-identical to the reference's. Frozen
//! read-only views are then made by hard links.
//!
//! The crate is a library core that thin commands call: `cli` parses,
//! each `cmd` function opens the store at most once and calls one library
//! function (mostly of `store`, `audit`, `bundle`, `remote`; also
//! `contract`, `sign`, `error::kind`), and the store's rooms rest on the
//! catalogue, the walk of a source and the snapshot profiles' rules. The module
//! map, one unit a line from the top down, is in docs/design.md; the
//! architecture test (tests/it/architecture.rs) holds the crate to it.

pub mod audit;
pub mod bundle;
pub mod catalogue;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod contract;
pub mod digest;
pub mod dirent;
pub mod error;
pub mod filecopy;
pub mod fsutil;
pub mod gitnexus;
pub mod interrupt;
pub mod pool;
pub mod profile;
pub mod progress;
pub mod pyjson;
pub mod remote;
pub mod secrets;
pub mod sign;
pub mod source;
pub mod store;

pub use error::{Error, ErrorKind, Result};
