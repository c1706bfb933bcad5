//! `cestore recover`: rebuild the catalogue from the manifests in the store
//! ([`crate::store::recover`] says how), and report what was done.
//!
//! Nothing is deleted. A manifest that fails the checks an import passes is
//! moved to `manifests-set-aside/` and reported; what cannot be recovered is
//! reported too, and either exits 1.

use std::io::{self, Write};
use std::path::Path;

use super::Report;
use crate::error::Result;
pub use crate::store::recover::{Recovery as RecoverReport, SetAside, Unrecovered};

impl Report for RecoverReport {
    fn exit_code(&self) -> u8 {
        u8::from(!self.problems.is_empty() || !self.manifests_set_aside.is_empty())
    }

    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        if let Some(a) = &self.set_aside {
            writeln!(w, "set the unusable catalogue aside as {a}")?;
        }
        for d in &self.recovered {
            writeln!(w, "recovered {d}")?;
        }
        for d in &self.rewritten {
            writeln!(w, "rewrote the catalogue rows of {d}")?;
        }
        for d in &self.manifests_written {
            writeln!(w, "wrote the manifest of {d}")?;
        }
        for m in &self.manifests_set_aside {
            writeln!(
                w,
                "set the manifest of {} aside as {}: {} (gc keeps its objects unless --force)",
                m.manifest_digest, m.path, m.detail
            )?;
        }
        for v in &self.views_recorded {
            writeln!(w, "recorded the view {v}")?;
        }
        for p in &self.problems {
            writeln!(w, "not recovered: {}: {}", p.path, p.detail)?;
        }
        writeln!(
            w,
            "{} recorded; {} recovered, {} rewritten, {} written, {} set aside, {} recorded again, {} salvaged{}",
            super::counted(self.snapshots, "snapshot", "snapshots"),
            super::counted(self.recovered.len() as u64, "snapshot", "snapshots"),
            super::counted(self.rewritten.len() as u64, "snapshot", "snapshots"),
            super::counted(self.manifests_written.len() as u64, "manifest", "manifests"),
            super::counted(
                self.manifests_set_aside.len() as u64,
                "manifest",
                "manifests"
            ),
            super::counted(self.views_recorded.len() as u64, "view", "views"),
            super::counted(self.events_salvaged, "event", "events"),
            if self.problems.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} not recovered",
                    super::counted(self.problems.len() as u64, "problem", "problems")
                )
            }
        )
    }
}

/// Rebuilds the catalogue from the manifests in the store.
pub fn recover(store_root: &Path) -> Result<RecoverReport> {
    crate::store::recover::recover(store_root)
}
