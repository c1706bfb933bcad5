//! `cestore rm` and `cestore gc`: forget snapshots, then sweep what nothing
//! uses; [`crate::store::gc`] does both.

pub use crate::store::gc::{gc, rm, GcReport, RmReport, UnsafeManifest};
