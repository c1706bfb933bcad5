//! `cestore exit-codes`: the table of error kinds and their exit codes, as
//! this binary decides them ([`crate::error::kind::exit_codes`]).

pub use crate::error::kind::{ExitCode, ExitCodesReport};

/// The table of error kinds, each with its exit code, JSON name and meaning.
pub fn exit_codes() -> ExitCodesReport {
    crate::error::kind::exit_codes()
}
