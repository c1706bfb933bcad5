//! One module per command. Each takes options, returns a report, and leaves
//! the choice between human and JSON output to the caller.

pub mod audit;
pub mod bundle;
pub mod checkout;
pub mod diff;
pub mod digest;
pub mod discard;
pub mod exit_codes;
pub mod gc;
pub mod ingest;
pub mod list;
pub mod mounts;
pub mod path;
pub mod pull;
pub mod push;
pub mod recover;
pub mod show;
pub mod stage;
pub mod verify;

use std::io::{self, Write};

pub use crate::catalogue::Provenance;

/// A command's result, printable for people or as JSON.
pub trait Report: serde::Serialize {
    /// Writes the report for a person to read.
    fn human(&self, w: &mut dyn Write) -> io::Result<()>;

    /// The exit code the report calls for: 0 unless it found problems.
    fn exit_code(&self) -> u8 {
        0
    }
}

impl Provenance {
    /// Writes the six fields, one per line.
    pub fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "name:                    {}", self.name)?;
        writeln!(w, "version:                 {}", self.version)?;
        writeln!(
            w,
            "manifest_schema_version: {}",
            self.manifest_schema_version
        )?;
        writeln!(w, "manifest_digest:         {}", self.manifest_digest)?;
        writeln!(w, "file_count:              {}", self.file_count)?;
        writeln!(w, "total_bytes:             {}", self.total_bytes)
    }
}

pub use crate::catalogue::resolve;

pub use crate::error::counted;
