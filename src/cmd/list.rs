//! `cestore list`, `cestore log` and `cestore find`: catalogue queries for
//! auditors, which live in [`crate::store::core::query`].

pub use crate::store::core::query::{
    find, glob_matches, list, log, FindHit, FindQuery, FindReport, ListReport, ListedSnapshot,
    LogReport, LoggedEvent, SourceSummary,
};
