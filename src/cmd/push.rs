//! `cestore push`: publish a stored snapshot to a remote (an OCI registry);
//! [`crate::remote::publish::push_snapshot`] says how.

pub use crate::remote::publish::{push_snapshot as push, PushOptions, PushReport};
