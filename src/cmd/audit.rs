//! `cestore audit`: every digest of a results file against the store, and
//! every row against the reference's arm rule ([`crate::audit::audit`]).

pub use crate::audit::{audit, AuditOptions, AuditReport, Fields, Source};
