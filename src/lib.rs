//! cestore: a content-addressed snapshot store for pinned plugin releases.
//!
//! A release is validated once, exactly as the reference implementation
//! (`runtime_mounts.py`) validates it; each file is stored once under its
//! SHA-256; and the release is remembered by its manifest digest, the SHA-256
//! of a canonical manifest that is byte-identical to the reference's. Frozen
//! read-only views are then made by hard links.
//!
//! The modules, from the bottom up (docs/design.md draws the map):
//!
//! - [`digest`]: one type per kind of SHA-256 identity;
//! - [`secrets`]: what a file's bytes look like, a private key or a token
//!   (beyond the reference, read only);
//! - [`policy`]: the reference's rules, as pure functions;
//! - [`error`]: the library's error, and the one table of error kinds
//!   (which imports nothing), each with its exit code and JSON name;
//! - [`manifest`]: the canonical manifest encoding;
//! - [`pyjson`]: Python's `json.loads`, for the `plugin.json` check;
//! - [`fsutil`]: directory-handle helpers; [`pool`]: the worker pool;
//!   [`progress`]: progress lines on a terminal; [`interrupt`]: termination
//!   signals caught, for `stage --hold`, and a bus error turned into exit 7;
//! - [`source`]: the walk of a source tree through directory handles;
//! - [`gitnexus`]: the GitNexus runtime's mounts and the arm rule's;
//! - [`catalogue`]: the SQLite catalogue;
//! - [`store`]: the object store, its lock and work directories, and every
//!   operation on it; [`view`]: frozen views made by hard links (one layer
//!   with the store), and [`tree`]: auditing a tree;
//! - [`remote`]: pushing to and pulling from registries (OCI), and
//!   [`bundle`]: a snapshot as one file;
//! - [`audit`]: a results file's digests and rows against the store;
//! - [`cmd`]: one module per command, naming the library function it calls;
//! - [`cli`]: the command line.

pub mod audit;
pub mod bundle;
pub mod catalogue;
pub mod cli;
pub mod clock;
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
pub mod secrets;
pub mod sign;
pub mod source;
pub mod store;

pub use error::{Error, ErrorKind, Result};
