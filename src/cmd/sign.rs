//! `cestore sign DIGEST --key FILE` and `cestore attestations DIGEST`
//! ([`crate::store::trust::signed`]).

pub use crate::store::trust::signed::{
    list_attestations as attestations, sign_snapshot as sign, AttestationInfo, AttestationsReport,
    SignReport, Verified,
};
