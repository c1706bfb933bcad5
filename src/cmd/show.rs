//! `cestore show`: everything the store knows about one snapshot; the query
//! lives in [`crate::store::query`].

pub use crate::store::query::{manifest, show, ManifestReport, ShowOptions, ShowReport};
