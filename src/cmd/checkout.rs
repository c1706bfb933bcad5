//! `cestore checkout`: materialise a frozen view of a snapshot at a new path
//! ([`crate::store::views::checkout`]).

pub use crate::store::views::{checkout, CheckoutOptions, CheckoutReport};
