//! `cestore export` and `cestore import`: the bundle format lives in
//! [`crate::bundle`], which also does the work.

use std::path::Path;

use super::{open, Need};
pub use crate::bundle::{
    BundleStats, ExportOptions, ExportReport, Format, ImportOptions, ImportReport,
};
use crate::error::Result;

/// Writes a stored snapshot as one bundle file.
pub fn export(root: &Path, opts: &ExportOptions<'_>) -> Result<ExportReport> {
    let store = open(root, Need::Existing)?;
    crate::bundle::export(&store, opts)
}

/// Reads a bundle and adopts its snapshot; the store is opened once the
/// bundle's manifest passes (made when it is not there), and not at all with
/// `--check`.
pub fn import(root: &Path, opts: &ImportOptions<'_>) -> Result<ImportReport> {
    crate::bundle::import(&|need| open(root, need), opts)
}
