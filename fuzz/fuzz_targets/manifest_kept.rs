//! Fuzzes the reading of a manifest kept as a delta (catalogue/kept.rs).
//!
//! Any bytes, read as kept bytes whose every base is a fixed manifest, must
//! unfold to at most the bound or be refused: never a panic, never more
//! bytes than the bound. A delta made of two manifests cut from the input
//! must unfold to the second.

#![no_main]

use cestore::catalogue::kept::{self, Unfold};
use cestore::digest::ManifestDigest;
use libfuzzer_sys::fuzz_target;

const BOUND: u64 = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let base = b"[{\"kind\":\"file\",\"path\":\"a\"}]".to_vec();
    let got: Result<Vec<u8>, Unfold<()>> =
        kept::unfold(data.to_vec(), BOUND, |_| Ok(base.clone()));
    if let Ok(bytes) = got {
        assert!(bytes.len() as u64 <= BOUND.max(data.len() as u64));
    }
    let cut = data.len() / 2;
    let (a, b) = data.split_at(cut);
    let digest = ManifestDigest::of(a);
    let delta = kept::delta(&digest, a, b);
    let back: Result<Vec<u8>, Unfold<()>> = kept::unfold(delta, BOUND, |d| {
        assert_eq!(*d, digest);
        Ok(a.to_vec())
    });
    match back {
        Ok(bytes) => assert_eq!(bytes, b),
        Err(e) => panic!("a delta did not unfold: {e:?}"),
    }
});
