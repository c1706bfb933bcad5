//! Fuzzes the `plugin.json` check (Python's `json.loads` dialect).
//!
//! It must never panic or hang on any bytes. Where serde_json (a strict
//! RFC 8259 parser, which accepts a subset of what Python accepts) reads the
//! bytes and no integer literal is longer than Python's 4,300-digit limit, the
//! check must accept the JSON too, and agree on the name and version verdict.

#![no_main]

use cestore::profile::ce::plugin_manifest::{check_plugin_manifest, ManifestProblem};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let verdict = check_plugin_manifest(data, "1.0.0");
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    if has_long_digit_run(data) {
        return;
    }
    // serde_json's own limit (128) is below Python's; deeper input never reaches here.
    let expected_ok = value.as_object().is_some_and(|o| {
        o.get("name").and_then(|n| n.as_str()) == Some("compound-engineering")
            && o.get("version").and_then(|v| v.as_str()) == Some("1.0.0")
    });
    match (&verdict, expected_ok) {
        (Ok(()), true) => {}
        (Err(ManifestProblem::Invalid(e)), _) => {
            panic!("serde_json accepts what the check calls invalid: {e}")
        }
        (Ok(()), false) => panic!("the check accepts a manifest with the wrong name or version"),
        (Err(p), true) => panic!("the check refuses a good manifest: {p}"),
        (Err(_), false) => {}
    }
});

fn has_long_digit_run(data: &[u8]) -> bool {
    data.split(|b| !b.is_ascii_digit())
        .any(|run| run.len() > 4300)
}
