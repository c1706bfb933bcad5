//! `cestore show`: everything the store knows about one snapshot.

use std::io::{self, Write};
use std::path::Path;

use super::{resolve, Provenance, Report};
use crate::catalogue::ViewRow;
use crate::error::Result;
use crate::manifest::Entry;
use crate::store::{LockMode, Store};

/// What to show.
pub struct ShowOptions<'a> {
    /// A digest or unique prefix.
    pub digest: &'a str,
    /// Whether to list the files.
    pub files: bool,
}

/// The report of `cestore show`.
#[derive(Debug, serde::Serialize)]
pub struct ShowReport {
    /// The reference's provenance fields.
    pub provenance: Provenance,
    /// When the snapshot was first ingested.
    pub first_ingested_at: Option<String>,
    /// When it was last ingested.
    pub last_ingested_at: Option<String>,
    /// How many times it was ingested.
    pub ingest_count: i64,
    /// The views of it that are recorded.
    pub views: Vec<ViewRow>,
    /// The files in manifest order, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<Entry>>,
}

impl Report for ShowReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        self.provenance.human(w)?;
        let none = "-".to_string();
        writeln!(
            w,
            "first_ingested_at:       {}",
            self.first_ingested_at.as_ref().unwrap_or(&none)
        )?;
        writeln!(
            w,
            "last_ingested_at:        {}",
            self.last_ingested_at.as_ref().unwrap_or(&none)
        )?;
        writeln!(w, "ingest_count:            {}", self.ingest_count)?;
        writeln!(w, "views:                   {}", self.views.len())?;
        for v in &self.views {
            writeln!(
                w,
                "  {} ({}, {}, {})",
                v.path, v.kind, v.method, v.created_at
            )?;
        }
        if let Some(files) = &self.files {
            writeln!(w, "files:")?;
            for f in files {
                writeln!(
                    w,
                    "  {} {} {:>8} {}",
                    f.sha256,
                    if f.executable { "x" } else { "-" },
                    f.size,
                    f.path
                )?;
            }
        }
        Ok(())
    }
}

/// The canonical manifest bytes of a snapshot, as stored.
#[derive(Debug, serde::Serialize)]
pub struct ManifestReport {
    /// The manifest digest.
    pub manifest_digest: crate::digest::ManifestDigest,
    /// The canonical manifest, as text (it is ASCII).
    pub canonical_manifest: String,
    /// The bytes, for the raw form.
    #[serde(skip)]
    pub bytes: Vec<u8>,
}

impl Report for ManifestReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        w.write_all(&self.bytes)
    }
}

/// Gathers what the store knows about a snapshot.
pub fn show(store_root: &Path, opts: &ShowOptions<'_>) -> Result<ShowReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    let cat = store.catalogue();
    let digest = resolve(cat, opts.digest)?;
    let row = cat.snapshot(&digest)?;
    let (first, last, count) = cat.ingest_summary(&digest)?;
    Ok(ShowReport {
        provenance: Provenance::from(&row),
        first_ingested_at: first,
        last_ingested_at: last,
        ingest_count: count,
        views: cat.views(Some(&digest))?,
        files: if opts.files {
            Some(cat.files(&digest)?)
        } else {
            None
        },
    })
}

/// Reads a snapshot's canonical manifest bytes.
pub fn manifest(store_root: &Path, digest: &str) -> Result<ManifestReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    let digest = resolve(store.catalogue(), digest)?;
    let bytes = store.catalogue().manifest_bytes(&digest)?;
    Ok(ManifestReport {
        manifest_digest: digest,
        canonical_manifest: String::from_utf8_lossy(&bytes).into_owned(),
        bytes,
    })
}
