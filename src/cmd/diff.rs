//! `cestore diff`: what changed between two snapshots; the comparison lives
//! in [`crate::store::core::query`].

pub use crate::store::core::query::{changes, diff, Change, DiffReport};
