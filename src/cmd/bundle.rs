//! `cestore export` and `cestore import`: the bundle format lives in
//! [`crate::bundle`]; this module writes its reports.

use std::io::{self, Write};

use super::Report;
pub use crate::bundle::{
    export, import, BundleStats, ExportOptions, ExportReport, Format, ImportOptions, ImportReport,
};

impl Report for ExportReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "{}", self.file)?;
        writeln!(
            w,
            "{}: {} objects, {} bytes ({}), sha256 {}",
            self.manifest_digest,
            self.objects,
            self.bytes,
            match self.format {
                Format::Tar => "tar",
                Format::TarZstd => "tar+zstd",
            },
            self.sha256
        )
    }
}

impl Report for ImportReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        match &self.ingest {
            Some(ingest) => ingest.human(w),
            None => writeln!(
                w,
                "{}: a sound bundle of {} ({}); not imported",
                self.bundle.file,
                self.bundle.manifest_digest,
                super::counted(self.bundle.objects, "object", "objects")
            ),
        }
    }
}
