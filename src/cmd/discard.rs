//! `cestore discard`: remove a view made by checkout, and forget it.

use std::io::{self, Write};
use std::path::Path;

use super::Report;
use crate::error::Result;
use crate::store::views::discard_view;
pub use crate::store::views::{DiscardOptions, DiscardReport};
use crate::store::{LockMode, Store};

impl Report for DiscardReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        match (self.manifest_digest, self.removed) {
            (Some(d), true) => writeln!(w, "removed {} ({d})", self.view),
            (Some(d), false) => writeln!(w, "forgot {} ({d}): already gone", self.view),
            (None, _) => writeln!(
                w,
                "nothing to discard at {}: no view is there or recorded (already gone)",
                self.view
            ),
        }
    }
}

/// Removes a view: directories get write permission, files are never chmod-ed.
pub fn discard(store_root: &Path, opts: &DiscardOptions<'_>) -> Result<DiscardReport> {
    let mut store = Store::open(store_root, LockMode::Shared, false)?;
    discard_view(&mut store, opts)
}
