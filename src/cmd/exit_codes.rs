//! `cestore exit-codes`: the table of error kinds and their exit codes, as
//! this binary decides them ([`crate::error::kind::exit_codes`]).

pub use crate::error::kind::{exit_codes, ExitCode, ExitCodesReport};
