//! `cestore recover`: rebuild the catalogue from the manifests in the store.
//!
//! The manifests under `manifests/` are the store's own record of its
//! snapshots; the catalogue is their index. Recovery, under the store's
//! exclusive lock:
//!
//! 1. sets aside a catalogue SQLite cannot use (renamed, never deleted) and
//!    starts a new one, salvaging what rows the old one still gives;
//! 2. records every manifest the catalogue lacks, taking the version from the
//!    snapshot's `plugin.json` object (checked against its hash), with a
//!    `recovered` event;
//! 3. rewrites the rows of a recorded snapshot that disagree with its manifest;
//! 4. writes the manifest of a recorded snapshot that has none on disk;
//! 5. records again the shared views and the salvaged views still on disk;
//! 6. makes it durable and folds the write-ahead log in.
//!
//! Nothing is deleted. What cannot be recovered is reported, and exits 1.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use rustix::fs::FileType;

use super::Report;
use crate::catalogue::{Catalogue, IngestEvent, NewSnapshot, ViewRow};
use crate::digest::{ManifestDigest, ObjectId};
use crate::error::{Error, Result};
use crate::manifest::Manifest;
use crate::policy;
use crate::store::ingest::{host_name, user_name, TOOL_VERSION};
use crate::store::{Store, VIEWS_DIR};

/// One thing recovery could not mend.
#[derive(Debug, serde::Serialize)]
pub struct Unrecovered {
    /// The path involved.
    pub path: String,
    /// Why.
    pub detail: String,
}

/// The report of `cestore recover`.
#[derive(Debug, Default, serde::Serialize)]
pub struct RecoverReport {
    /// The store.
    pub store: String,
    /// Where an unusable catalogue was set aside, if it was.
    pub set_aside: Option<String>,
    /// Snapshots recorded again from their manifests.
    pub recovered: Vec<ManifestDigest>,
    /// Recorded snapshots whose rows were rewritten from their manifests.
    pub rewritten: Vec<ManifestDigest>,
    /// Manifests written to disk from the catalogue.
    pub manifests_written: Vec<ManifestDigest>,
    /// Views recorded again.
    pub views_recorded: Vec<String>,
    /// Events salvaged from the set-aside catalogue.
    pub events_salvaged: u64,
    /// Snapshots recorded after recovery.
    pub snapshots: u64,
    /// What could not be mended.
    pub problems: Vec<Unrecovered>,
}

impl Report for RecoverReport {
    fn exit_code(&self) -> u8 {
        u8::from(!self.problems.is_empty())
    }

    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        if let Some(a) = &self.set_aside {
            writeln!(w, "set the unusable catalogue aside as {a}")?;
        }
        for d in &self.recovered {
            writeln!(w, "recovered {d}")?;
        }
        for d in &self.rewritten {
            writeln!(w, "rewrote the catalogue rows of {d}")?;
        }
        for d in &self.manifests_written {
            writeln!(w, "wrote the manifest of {d}")?;
        }
        for v in &self.views_recorded {
            writeln!(w, "recorded the view {v}")?;
        }
        for p in &self.problems {
            writeln!(w, "not recovered: {}: {}", p.path, p.detail)?;
        }
        writeln!(
            w,
            "{} recorded; {} recovered, {} rewritten, {} written, {} recorded again, {} salvaged{}",
            super::counted(self.snapshots, "snapshot", "snapshots"),
            super::counted(self.recovered.len() as u64, "snapshot", "snapshots"),
            super::counted(self.rewritten.len() as u64, "snapshot", "snapshots"),
            super::counted(self.manifests_written.len() as u64, "manifest", "manifests"),
            super::counted(self.views_recorded.len() as u64, "view", "views"),
            super::counted(self.events_salvaged, "event", "events"),
            if self.problems.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} not recovered",
                    super::counted(self.problems.len() as u64, "problem", "problems")
                )
            }
        )
    }
}

/// Rebuilds the catalogue from the manifests in the store.
pub fn recover(store_root: &Path) -> Result<RecoverReport> {
    let (store, set_aside) = Store::open_for_recovery(store_root, false)?;
    let first_try = set_aside.is_none();
    match rebuild(store, set_aside) {
        // Damage the integrity check did not see: start from a new catalogue.
        Err(Error::Catalogue { .. }) if first_try => {
            let (store, set_aside) = Store::open_for_recovery(store_root, true)?;
            rebuild(store, set_aside)
        }
        done => done,
    }
}

fn rebuild(mut store: Store, set_aside: Option<PathBuf>) -> Result<RecoverReport> {
    let mut report = RecoverReport {
        store: store.root().display().to_string(),
        set_aside: set_aside.as_ref().map(|p| p.display().to_string()),
        ..RecoverReport::default()
    };
    let salvage = set_aside
        .as_deref()
        .map(Catalogue::salvage)
        .unwrap_or_default();
    let versions: BTreeMap<ManifestDigest, (String, String)> = salvage
        .snapshots
        .iter()
        .map(|s| (s.digest, (s.version.clone(), s.first_ingested_at.clone())))
        .collect();

    let work = store.work_dir("recover")?;
    let on_disk = store.list_manifests()?;
    let mut seen = std::collections::BTreeSet::new();
    for found in &on_disk {
        let Some(digest) = found.digest else {
            report.problems.push(Unrecovered {
                path: found.path.display().to_string(),
                detail: "not a manifest's name; left as it is".into(),
            });
            continue;
        };
        seen.insert(digest);
        let recorded = store.catalogue().has_snapshot(&digest).unwrap_or(false);
        let manifest = match store.read_manifest(&digest) {
            Ok(m) => m,
            Err(e) => {
                // A recorded snapshot's catalogue copy may still be sound.
                match recorded_manifest(store.catalogue(), &digest) {
                    Some(m) => {
                        store.write_manifest(&work, &m)?;
                        report.manifests_written.push(digest);
                        m
                    }
                    None => {
                        report.problems.push(Unrecovered {
                            path: found.path.display().to_string(),
                            detail: format!(
                                "{}; it still keeps its objects from gc",
                                crate::error::error_chain(&e)
                            ),
                        });
                        continue;
                    }
                }
            }
        };
        if recorded {
            if !store.catalogue().rows_match(&manifest) {
                store.catalogue_mut().rewrite_rows(&manifest)?;
                report.rewritten.push(digest);
            }
            continue;
        }
        let salvaged = versions.get(&digest);
        let version = match plugin_version(&store, &manifest) {
            Ok(v) => v,
            Err(why) => match salvaged {
                Some((v, _)) => v.clone(),
                None => {
                    report.problems.push(Unrecovered {
                        path: found.path.display().to_string(),
                        detail: format!(
                            "its version cannot be told: {why}; it still keeps its objects from gc"
                        ),
                    });
                    continue;
                }
            },
        };
        let first = salvaged
            .map(|(_, at)| at.clone())
            .or_else(|| modified_at(&found.path));
        store.catalogue_mut().record_ingest(
            &NewSnapshot {
                name: policy::PLUGIN_NAME,
                version: &version,
                digest,
                manifest: &manifest.bytes,
                entries: &manifest.entries,
                first_ingested_at: first.as_deref(),
            },
            None,
            &IngestEvent {
                digest,
                event: "recovered".into(),
                at: String::new(),
                source: found.path.display().to_string(),
                host: host_name(),
                user: user_name(),
                tool_version: TOOL_VERSION.to_string(),
                new_objects: 0,
                reused_objects: 0,
            },
            &[],
        )?;
        report.recovered.push(digest);
    }

    for row in store.catalogue().snapshots(None, None)? {
        if seen.contains(&row.digest) {
            continue;
        }
        match recorded_manifest(store.catalogue(), &row.digest) {
            Some(m) => {
                store.write_manifest(&work, &m)?;
                report.manifests_written.push(row.digest);
            }
            None => report.problems.push(Unrecovered {
                path: store.catalogue().path().display().to_string(),
                detail: format!(
                    "the catalogue's manifest of {} is damaged and no manifest file holds it",
                    row.digest
                ),
            }),
        }
    }

    for event in &salvage.ingests {
        store.catalogue().add_event(event)?;
        report.events_salvaged += 1;
    }
    let views_dir = store.root().join(VIEWS_DIR);
    let mut views: Vec<ViewRow> = salvage.views;
    for row in store.catalogue().snapshots(None, None)? {
        let path = views_dir.join(row.digest.to_hex());
        views.push(ViewRow {
            path: path.to_string_lossy().into_owned(),
            digest: row.digest,
            kind: "shared".into(),
            method: "unknown".into(),
            linked: 0,
            copied: 0,
            created_at: String::new(),
            root_id: crate::view::root_id(&path),
        });
    }
    for view in views {
        let is_dir = rustix::fs::lstat(view.path.as_str())
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory);
        if !is_dir
            || store.catalogue().view(&view.path)?.is_some()
            || !store.catalogue().has_snapshot(&view.digest)?
        {
            continue;
        }
        store.catalogue_mut().add_view(&view)?;
        report.views_recorded.push(view.path);
    }

    drop(work);
    store.sync()?;
    store.catalogue().checkpoint()?;
    report.snapshots = store.catalogue().snapshots(None, None)?.len() as u64;
    Ok(report)
}

/// The catalogue's copy of a snapshot's manifest, when it is sound.
fn recorded_manifest(cat: &Catalogue, digest: &ManifestDigest) -> Option<Manifest> {
    let bytes = cat.manifest_bytes(digest).ok()?;
    Manifest::parse(&bytes).ok().filter(|m| m.digest == *digest)
}

/// The version in a snapshot's `plugin.json`, read from its object and
/// checked against the object's hash.
fn plugin_version(store: &Store, manifest: &Manifest) -> std::result::Result<String, String> {
    let entry = manifest
        .entries
        .first()
        .filter(|e| e.path == ".claude-plugin/plugin.json")
        .ok_or("the manifest does not start with .claude-plugin/plugin.json")?;
    let path: PathBuf = store.object_path(&entry.key());
    // At most one file's bytes, and one more: a grown object is damaged.
    let mut bytes = Vec::new();
    std::fs::File::open(&path)
        .and_then(|f| {
            f.take(crate::policy::MAX_FILE_BYTES + 1)
                .read_to_end(&mut bytes)
        })
        .map_err(|e| format!("'{}': {e}", path.display()))?;
    if ObjectId::of(&bytes) != entry.sha256 {
        return Err(format!("the object '{}' is damaged", path.display()));
    }
    crate::store::adopt::plugin_version(&bytes).map_err(|e| crate::error::error_chain(&e))
}

/// A file's modification time as RFC 3339 UTC with milliseconds.
fn modified_at(path: &Path) -> Option<String> {
    let st = rustix::fs::stat(path).ok()?;
    let secs = st.st_mtime;
    let millis = st.st_mtime_nsec / 1_000_000;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    Some(format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    ))
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::civil_from_days;

    #[test]
    fn days_become_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_422), (2025, 11, 30));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }
}
