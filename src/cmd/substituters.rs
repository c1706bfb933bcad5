//! `cestore substituters`: the registries a snapshot the store lacks is
//! fetched from, as the store's file and the environment configure them
//! ([`crate::remote::substitute::config`]); the store is not opened.

use std::path::Path;

use crate::error::Result;
pub use crate::remote::substitute::Config;

/// The effective substituters configuration of the store at `root`.
pub fn substituters(root: &Path) -> Result<Config> {
    crate::remote::substitute::config(root)
}
