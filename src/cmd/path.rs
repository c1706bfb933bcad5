//! `cestore path`: the one shared frozen view of a snapshot, inside the store
//! ([`crate::store::views::shared_view_of`]).

pub use crate::store::views::{shared_view_of as path, PathReport};
