//! cestore: a content-addressed snapshot store for pinned plugin releases.
//!
//! A release is validated once, exactly as the reference implementation
//! (`runtime_mounts.py`) validates it; each file is stored once under its
//! SHA-256; and the release is remembered by its manifest digest, the SHA-256
//! of a canonical manifest that is byte-identical to the reference's. Frozen
//! read-only views are then made by hard links.
//!
//! The modules, from the bottom up:
//!
//! - [`digest`]: one type per kind of SHA-256 identity;
//! - [`manifest`]: the canonical manifest encoding;
//! - [`policy`]: the reference's rules, as pure functions;
//! - [`pyjson`]: Python's `json.loads`, for the `plugin.json` check;
//! - [`fsutil`]: directory-handle helpers;
//! - [`source`]: the walk of a source tree through directory handles;
//! - [`store`]: the object store, its lock and work directories;
//! - [`catalogue`]: the SQLite catalogue;
//! - [`view`]: frozen views made by hard links, and [`tree`]: auditing a tree;
//! - [`remote`]: pushing to and pulling from registries (OCI), and
//!   [`bundle`]: a snapshot as one file;
//! - [`audit`]: a results file's digests and rows against the store;
//! - [`interrupt`]: termination signals caught, for `stage --hold`;
//! - [`cmd`]: one module per command;
//! - [`cli`]: the command line.

pub mod audit;
pub mod bundle;
pub mod catalogue;
pub mod cli;
pub mod cmd;
pub mod digest;
pub mod error;
pub mod fsutil;
pub mod gitnexus;
pub mod interrupt;
pub mod manifest;
pub mod policy;
pub mod pool;
pub mod progress;
pub mod pyjson;
pub mod remote;
pub mod source;
pub mod store;
pub mod tree;
pub mod view;

pub use error::{Error, ErrorKind, Result};
