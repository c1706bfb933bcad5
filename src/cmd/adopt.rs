//! Adopting a snapshot that arrives as a manifest and blobs (a registry pull,
//! a bundle import) rather than as a source tree.
//!
//! The manifest must be canonical and pass the same rules as an ingest
//! ([`policy::check_manifest_entries`] and the `plugin.json` check); every blob
//! must hash to its key and have its recorded size. Only then does anything
//! enter the store, through the same staging, no-overwrite publishing and
//! single `syncfs` as an ingest.

use std::collections::BTreeMap;
use std::path::Path;

use super::ingest::{publish_and_record, IngestReport, Staged};
use crate::digest::{ManifestDigest, ObjectId};
use crate::error::{Error, Result};
use crate::manifest::Manifest;
use crate::policy::{self, Rejection};
use crate::pyjson::{self, Value};
use crate::store::objects::{check_object, ObjectState};
use crate::store::{LockMode, ObjectKey, Store};

/// Why received data cannot become a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    /// The manifest bytes hash to another digest than the one asked for.
    #[error("the manifest hashes to {found}, not to the digest asked for, {expected}")]
    DigestMismatch {
        /// The digest asked for.
        expected: ManifestDigest,
        /// What the bytes hash to.
        found: ManifestDigest,
    },
    /// The manifest is not a canonical manifest.
    #[error("the manifest is not canonical: {0}")]
    Manifest(#[from] crate::manifest::ManifestError),
    /// The manifest breaks one of the reference's rules.
    #[error("the manifest breaks a rule: {0}")]
    Rules(#[from] policy::ManifestRuleError),
    /// A blob does not hash to its key.
    #[error("blob for '{path}' hashes to {found}, not {expected}")]
    BlobHash {
        /// The file it was for.
        path: String,
        /// Its key.
        expected: ObjectId,
        /// What its bytes hash to.
        found: ObjectId,
    },
    /// A blob has another size than the manifest says.
    #[error("blob for '{path}' has {found} bytes, not {expected}")]
    BlobSize {
        /// The file it was for.
        path: String,
        /// The manifest's size.
        expected: u64,
        /// The blob's size.
        found: u64,
    },
    /// A blob the manifest needs was not delivered.
    #[error("blob {0} was not delivered")]
    BlobMissing(ObjectId),
    /// `plugin.json`'s version is not an exact semantic version.
    #[error("plugin.json carries no exact semantic version (found {0})")]
    NoVersion(String),
}

impl From<AdoptError> for Error {
    fn from(e: AdoptError) -> Self {
        Error::Integrity(e.to_string())
    }
}

/// One object the store lacks: its key, its size, and a path that uses it.
#[derive(Clone, Debug)]
pub struct Wanted {
    /// The object's key.
    pub key: ObjectKey,
    /// Its size.
    pub size: u64,
    /// A file of the manifest with this content.
    pub path: String,
}

/// Adopts a snapshot: checks `manifest_bytes` (against `expected` when
/// given), asks `fetch` for the objects the store lacks, checks every blob,
/// and records the snapshot with an ingest event whose source is `source`.
pub fn adopt<F>(
    store_root: &Path,
    manifest_bytes: &[u8],
    expected: Option<ManifestDigest>,
    source: &str,
    fetch: F,
) -> Result<IngestReport>
where
    F: FnOnce(&[Wanted]) -> Result<Vec<(ObjectKey, Vec<u8>)>>,
{
    let manifest = Manifest::parse(manifest_bytes).map_err(AdoptError::from)?;
    if let Some(expected) = expected {
        if manifest.digest != expected {
            return Err(AdoptError::DigestMismatch {
                expected,
                found: manifest.digest,
            }
            .into());
        }
    }
    policy::check_manifest_entries(&manifest.entries).map_err(AdoptError::from)?;
    let mut store = Store::open(store_root, LockMode::Shared, true)?;

    let mut needed: BTreeMap<ObjectKey, (u64, String)> = BTreeMap::new();
    for e in manifest.entries.iter().filter(|e| e.size > 0) {
        let key = ObjectKey {
            id: e.sha256,
            executable: e.executable,
        };
        needed.entry(key).or_insert((e.size, e.path.clone()));
    }
    let mut wanted = Vec::new();
    let mut reused = 0u64;
    for (key, (size, path)) in &needed {
        match check_object(&store, key, *size)? {
            ObjectState::Intact => reused += 1,
            ObjectState::Missing => wanted.push(Wanted {
                key: *key,
                size: *size,
                path: path.clone(),
            }),
            ObjectState::Damaged(why) => {
                return Err(Error::Integrity(format!(
                    "object '{}' {why}; run `cestore verify`",
                    store.object_path(key).display()
                )))
            }
        }
    }
    let blobs = if wanted.is_empty() {
        Vec::new()
    } else {
        fetch(&wanted)?
    };
    let mut delivered: BTreeMap<ObjectKey, Vec<u8>> = blobs.into_iter().collect();
    for w in &wanted {
        let data = delivered
            .get(&w.key)
            .ok_or(AdoptError::BlobMissing(w.key.id))?;
        if data.len() as u64 != w.size {
            return Err(AdoptError::BlobSize {
                path: w.path.clone(),
                expected: w.size,
                found: data.len() as u64,
            }
            .into());
        }
        let found = ObjectId::of(data);
        if found != w.key.id {
            return Err(AdoptError::BlobHash {
                path: w.path.clone(),
                expected: w.key.id,
                found,
            }
            .into());
        }
    }
    let version = check_plugin_json(Some(&store), &manifest, &delivered)?;

    let mut work = store.work_dir("adopt")?;
    let mut staged = Vec::new();
    let mut bytes = 0;
    for w in &wanted {
        if let Some(data) = delivered.remove(&w.key) {
            bytes += data.len() as u64;
            staged.push((work.stage(&w.key, &data)?, w.key));
        }
    }
    publish_and_record(
        &mut store,
        work,
        Staged {
            manifest: &manifest,
            version: &version,
            source,
            objects: staged,
            reused,
            bytes,
        },
    )
}

/// Checks `plugin.json` as an ingest does and returns its version; its
/// bytes come from `delivered`, else from the store when one is given.
pub(crate) fn check_plugin_json(
    store: Option<&Store>,
    manifest: &Manifest,
    delivered: &BTreeMap<ObjectKey, Vec<u8>>,
) -> Result<String> {
    let entry = &manifest.entries[0];
    let key = ObjectKey {
        id: entry.sha256,
        executable: entry.executable,
    };
    let bytes = match delivered.get(&key) {
        Some(b) => b.clone(),
        None if entry.size == 0 => Vec::new(),
        None => {
            let store = store.ok_or(AdoptError::BlobMissing(key.id))?;
            let path = store.object_path(&key);
            std::fs::read(&path).map_err(|e| Error::io("read an object", path, e))?
        }
    };
    let path = Path::new(".claude-plugin/plugin.json").to_path_buf();
    let value = pyjson::loads(&bytes).map_err(|e| Rejection::ManifestInvalid {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    let version = match value.get("version") {
        Some(Value::Str(s)) => s.as_str().map(str::to_string),
        _ => None,
    };
    let version = version
        .filter(|v| policy::is_exact_version(v))
        .ok_or_else(|| {
            AdoptError::NoVersion(value.get("version").map_or("None".into(), Value::py_repr))
        })?;
    pyjson::check_plugin_manifest(&bytes, &version)
        .map_err(|problem| Rejection::from_manifest_problem(problem, path))?;
    Ok(version)
}
