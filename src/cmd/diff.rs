//! `cestore diff`: what changed between two snapshots; the comparison lives
//! in [`crate::store::query`].

pub use crate::store::query::{changes, diff, Change, DiffReport};
