//! Fuzzes the canonical manifest encoder.
//!
//! For any entries, the output must parse back as JSON with the same paths,
//! hashes, sizes and exec bits, and must be pure ASCII. When every path is
//! ASCII below DEL (0x7F), it must equal serde_json's compact output with
//! sorted keys. (Python's `ensure_ascii` escapes DEL as `\u007f`; serde_json
//! writes it raw, so DEL is checked on its own.)

#![no_main]

use cestore::digest::ObjectId;
use cestore::profile::ce::manifest::{canonical_bytes, Entry};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let entries: Vec<Entry> = text
        .split('\u{0}')
        .enumerate()
        .map(|(i, path)| Entry {
            executable: i % 2 == 1,
            path: path.to_string(),
            sha256: ObjectId::of(path.as_bytes()),
            size: (path.len() as u64) << (i % 40),
        })
        .collect();
    let bytes = canonical_bytes(&entries);
    assert!(bytes.is_ascii(), "canonical manifest is not ASCII");

    let parsed: serde_json::Value =
        serde_json::from_slice(&bytes).expect("canonical manifest parses as JSON");
    assert_eq!(parsed["schema_version"], 1);
    let files = parsed["files"].as_array().expect("files is an array");
    assert_eq!(files.len(), entries.len());
    for (f, e) in files.iter().zip(&entries) {
        assert_eq!(f["path"].as_str(), Some(e.path.as_str()));
        assert_eq!(f["sha256"].as_str(), Some(e.sha256.to_hex().as_str()));
        assert_eq!(f["size"].as_u64(), Some(e.size));
        assert_eq!(f["executable"].as_bool(), Some(e.executable));
    }

    if entries.iter().all(|e| e.path.bytes().all(|b| b < 0x7f)) {
        let compact = serde_json::to_vec(&parsed).expect("serialise");
        assert_eq!(
            compact, bytes,
            "differs from serde_json's compact sorted output"
        );
    }
    for e in &entries {
        let mut one = Vec::new();
        cestore::profile::ce::manifest::write_json_string(&mut one, &e.path);
        let dels = e.path.matches('\u{7f}').count();
        assert_eq!(
            String::from_utf8_lossy(&one).matches("\\u007f").count(),
            dels,
            "DEL must be escaped as \\u007f"
        );
    }
});
