//! `cestore list`, `cestore log` and `cestore find`: catalogue queries for
//! auditors, which live in [`crate::store::query`].

pub use crate::store::query::{
    find, glob_matches, list, log, FindHit, FindQuery, FindReport, ListReport, ListedSnapshot,
    LogReport, LoggedEvent, SourceSummary,
};
