//! `cestore rm` and `cestore gc`: forget snapshots, then sweep what nothing
//! uses; [`crate::store::upkeep::gc`] does both.

pub use crate::store::upkeep::gc::{gc, rm, GcReport, RmReport, UnsafeManifest};
