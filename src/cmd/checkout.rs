//! `cestore checkout`: materialise a frozen view of a snapshot at a new path.

use std::io::{self, Write};
use std::path::Path;

use super::{resolve, Report};
use crate::error::Result;
use crate::store::views::{checkout_into, effective_method, Destination};
pub use crate::store::views::{CheckoutOptions, CheckoutReport};
use crate::store::{LockMode, Store};

impl Report for CheckoutReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "{}", self.view)?;
        writeln!(
            w,
            "{}: {} linked, {} copied, {}",
            self.manifest_digest,
            self.built.linked,
            self.built.copied,
            super::counted(self.built.directories, "directory", "directories")
        )?;
        for (why, n) in &self.built.copy_reasons {
            writeln!(w, "  copied {n}: {why}")?;
        }
        Ok(())
    }
}

/// Checks out a snapshot as a new frozen view and records it.
pub fn checkout(store_root: &Path, opts: &CheckoutOptions<'_>) -> Result<CheckoutReport> {
    let mut store = Store::open(store_root, LockMode::Shared, false)?;
    let digest = resolve(store.catalogue(), opts.digest)?;
    let dest = Destination::check(&store, opts.dest)?;
    let method = effective_method(opts.method, opts.require_hardlinks)?;
    let mut report = checkout_into(&mut store, digest, &dest, method)?;
    report.requested_method = opts.method;
    Ok(report)
}
