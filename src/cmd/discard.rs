//! `cestore discard`: remove a view made by checkout, and forget it
//! ([`crate::store::views::discard`]).

pub use crate::store::views::{discard, DiscardOptions, DiscardReport};
