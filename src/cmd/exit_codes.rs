//! `cestore exit-codes`: the table of error kinds and their exit codes, as
//! this binary decides them, for scripts and bindings to check their copies
//! against.

use std::io::{self, Write};

use super::Report;
use crate::error::ErrorKind;

/// One row of the table: a JSON error kind and its exit code.
#[derive(Debug, serde::Serialize)]
pub struct ExitCode {
    /// The `kind` of a JSON error object.
    pub kind: &'static str,
    /// The process exit code of an error of that kind.
    pub code: u8,
    /// What the code stands for, in a word or two.
    #[serde(skip)]
    pub summary: &'static str,
}

/// The report of `cestore exit-codes`.
#[derive(Debug, serde::Serialize)]
pub struct ExitCodesReport {
    /// Every error kind, in the order of their codes.
    pub exit_codes: Vec<ExitCode>,
}

impl Report for ExitCodesReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "code  kind               meaning")?;
        writeln!(w, "{:>4}  {:<17}  success", crate::error::kind::SUCCESS, "")?;
        for e in &self.exit_codes {
            writeln!(w, "{:>4}  {:<17}  {}", e.code, e.kind, e.summary)?;
        }
        Ok(())
    }
}

/// The table of [`ErrorKind`].
pub fn exit_codes() -> ExitCodesReport {
    ExitCodesReport {
        exit_codes: ErrorKind::ALL
            .into_iter()
            .map(|k| ExitCode {
                kind: k.name(),
                code: k.exit_code(),
                summary: k.summary(),
            })
            .collect(),
    }
}
