//! `cestore verify`: re-hash the store and check the catalogue against itself,
//! or audit a directory tree against a snapshot (`--tree`). The checks live
//! in [`crate::store::verify`]; this module writes their reports.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use super::Report;
use crate::error::Result;
use crate::store::verify::{audit_tree, verify_store, Severity};
pub use crate::store::verify::{Problem, StaleView, TreeReport, VerifyOptions, VerifyReport};
use crate::store::{LockMode, Store};

impl Report for VerifyReport {
    /// 1 for damage or inconsistency; leftovers for gc alone are no failure.
    fn exit_code(&self) -> u8 {
        u8::from(self.damage().next().is_some())
    }

    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for r in &self.repaired {
            writeln!(w, "repaired: {r}")?;
        }
        for v in &self.stale_views {
            writeln!(
                w,
                "the view {} still links damaged bytes; renew it: {}",
                v.view, v.renew
            )?;
        }
        for p in self.damage() {
            writeln!(w, "{} ({:?}): {}: {}", p.kind, p.severity, p.path, p.detail)?;
            for s in &p.snapshots {
                writeln!(w, "  affects snapshot {s}")?;
            }
            for v in &p.views {
                writeln!(w, "  affects view {v}")?;
            }
        }
        let damaged = self.damage().count();
        if damaged > 0 {
            writeln!(w, "{}", super::counted(damaged, "problem", "problems"))?;
        }
        let mut garbage: BTreeMap<&str, usize> = BTreeMap::new();
        for p in self
            .problems
            .iter()
            .filter(|p| p.severity == Severity::Garbage)
        {
            *garbage.entry(p.kind).or_default() += 1;
        }
        if !garbage.is_empty() {
            let kinds: Vec<String> = garbage
                .iter()
                .map(|(kind, n)| format!("{n} {kind}"))
                .collect();
            writeln!(
                w,
                "garbage for `cestore gc`: {} (`--json` lists them)",
                kinds.join(", ")
            )?;
        }
        Ok(())
    }
}

impl Report for TreeReport {
    fn exit_code(&self) -> u8 {
        u8::from(!self.differences.is_empty())
    }

    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for d in &self.differences {
            writeln!(w, "{d}")?;
        }
        if !self.differences.is_empty() {
            writeln!(
                w,
                "{} differs from {} in {}",
                self.tree,
                self.manifest_digest,
                super::counted(self.differences.len(), "way", "ways")
            )?;
        }
        Ok(())
    }
}

/// Verifies the store, or the named snapshots.
pub fn verify(store_root: &Path, opts: &VerifyOptions<'_>) -> Result<VerifyReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    verify_store(&store, opts)
}

/// Audits a directory against a snapshot.
pub fn verify_tree(store_root: &Path, dir: &Path, digest: &str) -> Result<TreeReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    audit_tree(&store, dir, digest)
}
