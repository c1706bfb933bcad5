//! `cestore export` and `cestore import`: the bundle format lives in
//! [`crate::bundle`], which also does the work.

pub use crate::bundle::{
    export, import, BundleStats, ExportOptions, ExportReport, Format, ImportOptions, ImportReport,
};
