//! One module per command. Each takes typed options, opens the store once
//! through [`open`] with what its work needs (a [`Need`]), calls one library
//! function with the `&Store` or `&mut Store`, and returns its report: the
//! report's type lives beside the library function that makes it, and
//! [`crate::cli`] writes it, for people or as JSON.
//!
//! [`open`] is the one place that maps work to a lock mode and to whether
//! the store is made, and [`open_for_recovery`] the one that opens it for
//! `recover`. Where the library opens the store only once earlier work
//! passes, or not at all (ingest, stage, mounts, audit, pull, import,
//! recover), the command hands it an opener that calls one of them.

pub mod audit;
pub mod bundle;
pub mod checkout;
pub mod diff;
pub mod digest;
pub mod discard;
pub mod exit_codes;
pub mod gc;
pub mod ingest;
pub mod key;
pub mod list;
pub mod mounts;
pub mod path;
pub mod pull;
pub mod push;
pub mod recover;
pub mod rules;
pub mod show;
pub mod sign;
pub mod stage;
pub mod substituters;
pub mod verify;

use std::path::{Path, PathBuf};

use crate::error::Result;
pub use crate::store::Need;
use crate::store::{LockMode, Store};

/// Opens the store at `root` as the work says it needs: the one place that
/// maps work to a lock mode, and to whether the store is made.
pub fn open(root: &Path, need: Need) -> Result<Store> {
    let (mode, create) = match need {
        Need::Existing => (LockMode::Shared, false),
        Need::Creating => (LockMode::Shared, true),
        Need::Sweep { dry_run: true } => (LockMode::Shared, false),
        Need::Sweep { dry_run: false } => (LockMode::Exclusive, false),
    };
    Store::open(root, mode, create)
}

/// Opens the store at `root` for `cestore recover`, under the exclusive
/// lock, setting its catalogue aside when it is damaged, or anyway when
/// `set_aside_anyway` ([`Store::open_for_recovery`]).
pub fn open_for_recovery(root: &Path, set_aside_anyway: bool) -> Result<(Store, Option<PathBuf>)> {
    Store::open_for_recovery(root, set_aside_anyway)
}
