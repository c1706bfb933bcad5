//! `cestore show`: everything the store knows about one snapshot; the query
//! lives in [`crate::store::core::query`].

pub use crate::store::core::query::{manifest, show, ManifestReport, ShowOptions, ShowReport};
