//! `cestore diff`: what changed between two snapshots.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use super::{resolve, Report};
use crate::digest::{ManifestDigest, ObjectId};
use crate::error::Result;
use crate::manifest::Entry;
use crate::store::{LockMode, Store};

/// One file that differs between two snapshots.
#[derive(Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "change", rename_all = "kebab-case")]
pub enum Change {
    /// In B only.
    Added {
        /// The path.
        path: String,
        /// Its SHA-256 in B.
        sha256: ObjectId,
    },
    /// In A only.
    Removed {
        /// The path.
        path: String,
        /// Its SHA-256 in A.
        sha256: ObjectId,
    },
    /// In both, with other bytes (and possibly another exec bit).
    Content {
        /// The path.
        path: String,
        /// Its SHA-256 in A.
        from: ObjectId,
        /// Its SHA-256 in B.
        to: ObjectId,
        /// Whether the exec bit changed too.
        exec_changed: bool,
    },
    /// In both, with the same bytes and another exec bit.
    Exec {
        /// The path.
        path: String,
        /// Whether it is executable in B.
        executable: bool,
    },
}

/// The report of `cestore diff`.
#[derive(Debug, serde::Serialize)]
pub struct DiffReport {
    /// The first snapshot.
    pub from: ManifestDigest,
    /// The second snapshot.
    pub to: ManifestDigest,
    /// The changes, by path.
    pub changes: Vec<Change>,
}

impl Report for DiffReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for c in &self.changes {
            match c {
                Change::Added { path, .. } => writeln!(w, "A  {path}")?,
                Change::Removed { path, .. } => writeln!(w, "D  {path}")?,
                Change::Content {
                    path, exec_changed, ..
                } => writeln!(w, "M{} {path}", if *exec_changed { "x" } else { " " })?,
                Change::Exec { path, executable } => {
                    writeln!(w, "X  {path} ({})", if *executable { "+x" } else { "-x" })?
                }
            }
        }
        Ok(())
    }
}

/// Lists the changes between the files of two manifests.
pub fn changes(a: &[Entry], b: &[Entry]) -> Vec<Change> {
    let a: BTreeMap<&str, &Entry> = a.iter().map(|e| (e.path.as_str(), e)).collect();
    let b: BTreeMap<&str, &Entry> = b.iter().map(|e| (e.path.as_str(), e)).collect();
    let mut out = Vec::new();
    for (path, ea) in &a {
        match b.get(path) {
            None => out.push(Change::Removed {
                path: path.to_string(),
                sha256: ea.sha256,
            }),
            Some(eb) if ea.sha256 != eb.sha256 => out.push(Change::Content {
                path: path.to_string(),
                from: ea.sha256,
                to: eb.sha256,
                exec_changed: ea.executable != eb.executable,
            }),
            Some(eb) if ea.executable != eb.executable => out.push(Change::Exec {
                path: path.to_string(),
                executable: eb.executable,
            }),
            Some(_) => {}
        }
    }
    for (path, eb) in &b {
        if !a.contains_key(path) {
            out.push(Change::Added {
                path: path.to_string(),
                sha256: eb.sha256,
            });
        }
    }
    out.sort_by(|x, y| change_path(x).cmp(change_path(y)));
    out
}

fn change_path(c: &Change) -> &str {
    match c {
        Change::Added { path, .. }
        | Change::Removed { path, .. }
        | Change::Content { path, .. }
        | Change::Exec { path, .. } => path,
    }
}

/// Compares two snapshots.
pub fn diff(store_root: &Path, a: &str, b: &str) -> Result<DiffReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    let cat = store.catalogue();
    let from = resolve(cat, a)?;
    let to = resolve(cat, b)?;
    Ok(DiffReport {
        from,
        to,
        changes: changes(&cat.files(&from)?, &cat.files(&to)?),
    })
}
