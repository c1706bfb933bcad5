//! `cestore ingest`: validate a release as the reference does, store each file
//! once, and record the snapshot.

use std::io::{self, Write};
use std::path::Path;

use super::Report;
use crate::error::Result;
use crate::policy::LeftOut;
use crate::store::ingest::{ingest_into, open_source};
pub use crate::store::ingest::{IngestOptions, IngestReport, IngestStats};
use crate::store::{LockMode, Store};

impl Report for IngestReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        let p = &self.provenance;
        let s = &self.ingest;
        writeln!(w, "{}", p.manifest_digest)?;
        writeln!(
            w,
            "{} {}: {}, {}; {}: {} ({}), {} reused",
            p.name,
            p.version,
            super::counted(p.file_count, "file", "files"),
            super::counted(p.total_bytes, "byte", "bytes"),
            if s.already_present {
                "already stored"
            } else {
                "stored"
            },
            super::counted(s.new_objects, "new object", "new objects"),
            super::counted(s.bytes_written, "byte", "bytes"),
            s.reused_objects
        )?;
        if !s.left_out.is_empty() {
            let count = |why| s.left_out.iter().filter(|e| e.reason == why).count();
            writeln!(
                w,
                "left out: {}, {}, {} (the reference's filters; `--json` lists them)",
                super::counted(
                    count(LeftOut::Secret),
                    "possible secret",
                    "possible secrets"
                ),
                super::counted(
                    count(LeftOut::ForbiddenPart),
                    "forbidden part",
                    "forbidden parts"
                ),
                super::counted(
                    count(LeftOut::OutsideAllowlist),
                    "entry outside the allowlist",
                    "entries outside the allowlist"
                ),
            )?;
        }
        for r in &s.repaired {
            let how = match r.repair {
                "mode" => "its mode was set back",
                _ => "its bytes were replaced by the source's",
            };
            writeln!(w, "repaired {}: it {}; {how}", r.object, r.was)?;
        }
        Ok(())
    }
}

/// Validates and stores a release.
pub fn ingest(store_root: &Path, opts: &IngestOptions<'_>) -> Result<IngestReport> {
    let source = open_source(opts)?;
    let mut store = Store::open(store_root, LockMode::Shared, true)?;
    ingest_into(&mut store, &source, opts)
}
