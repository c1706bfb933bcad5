//! Helpers the store's unit tests share.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::{LockMode, Store};
use crate::catalogue::{IngestEvent, NewSnapshot};
use crate::profile::ce::manifest::Manifest;

/// A new store at `tmp/store`.
pub fn open(tmp: &Path) -> Store {
    Store::open(&tmp.join("store"), LockMode::Shared, true).unwrap()
}

/// A file's permission bits.
pub fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// The names in a directory, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Records `m` as an ingested snapshot.
pub fn record(store: &mut Store, m: &Manifest) {
    let event = IngestEvent {
        digest: m.digest,
        event: "ingest".into(),
        at: String::new(),
        source: "/src".into(),
        host: "h".into(),
        user: "u".into(),
        tool_version: "0".into(),
        new_objects: 0,
        reused_objects: 0,
    };
    let snap = NewSnapshot {
        name: "p",
        version: "1",
        digest: m.digest,
        manifest: &m.bytes,
        entries: &m.entries,
        first_ingested_at: None,
        tree: m.tree.as_ref(),
        delta: None,
    };
    store
        .catalogue_mut()
        .record_ingest(&snap, None, &event, &[], Default::default())
        .unwrap();
}

/// A minimal release at version 1.2.3 with one 100-byte asset,
/// `assets/big.bin`: the CE profile's fixture.
pub(crate) use crate::profile::ce::fixtures::release;
