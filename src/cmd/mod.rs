//! One module per command. Each takes typed options, calls one library
//! function, and returns its report: the report's type lives beside the
//! library function that makes it, and [`crate::cli`] writes it, for people
//! or as JSON.

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
pub mod verify;
