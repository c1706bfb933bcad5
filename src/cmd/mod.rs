//! One module per command. Each takes options, returns a report, and leaves
//! the choice between human and JSON output to the caller.

pub mod adopt;
pub mod bundle;
pub mod checkout;
pub mod diff;
pub mod digest;
pub mod discard;
pub mod gc;
pub mod ingest;
pub mod list;
pub mod mounts;
pub mod path;
pub mod pull;
pub mod push;
pub mod recover;
pub mod show;
pub mod stage;
pub mod verify;

use std::io::{self, Write};

use crate::catalogue::{Catalogue, SnapshotRow};
use crate::digest::{DigestPrefix, ManifestDigest};
use crate::error::{Error, Result};

/// A command's result, printable for people or as JSON.
pub trait Report: serde::Serialize {
    /// Writes the report for a person to read.
    fn human(&self, w: &mut dyn Write) -> io::Result<()>;

    /// The exit code the report calls for: 0 unless it found problems.
    fn exit_code(&self) -> u8 {
        0
    }
}

/// The reference's six provenance fields, exactly as it names them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Provenance {
    /// The plugin name.
    pub name: String,
    /// The release version.
    pub version: String,
    /// The manifest schema version.
    pub manifest_schema_version: i64,
    /// The manifest digest.
    pub manifest_digest: ManifestDigest,
    /// The number of files.
    pub file_count: i64,
    /// The bytes of all files together.
    pub total_bytes: i64,
}

impl From<&SnapshotRow> for Provenance {
    fn from(row: &SnapshotRow) -> Self {
        Provenance {
            name: row.name.clone(),
            version: row.version.clone(),
            manifest_schema_version: row.schema_version,
            manifest_digest: row.digest,
            file_count: row.file_count,
            total_bytes: row.total_bytes,
        }
    }
}

impl Provenance {
    /// Writes the six fields, one per line.
    pub fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "name:                    {}", self.name)?;
        writeln!(w, "version:                 {}", self.version)?;
        writeln!(
            w,
            "manifest_schema_version: {}",
            self.manifest_schema_version
        )?;
        writeln!(w, "manifest_digest:         {}", self.manifest_digest)?;
        writeln!(w, "file_count:              {}", self.file_count)?;
        writeln!(w, "total_bytes:             {}", self.total_bytes)
    }
}

/// Resolves a digest or unique prefix typed by a user.
pub fn resolve(cat: &Catalogue, text: &str) -> Result<ManifestDigest> {
    let prefix: DigestPrefix = text
        .parse()
        .map_err(|e| Error::Usage(format!("'{text}' is not a digest or digest prefix: {e}")))?;
    cat.resolve(&prefix)
}

/// A count and its noun in the number the count calls for: `1 file`, `2 files`.
pub fn counted(n: impl std::fmt::Display, one: &str, many: &str) -> String {
    let n = n.to_string();
    let noun = if n == "1" { one } else { many };
    format!("{n} {noun}")
}

/// The host name, for ingest events.
pub fn host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// The user name, for ingest events: `$USER`, `$LOGNAME`, the name
/// `/etc/passwd` gives the uid, else the uid.
pub fn user_name() -> String {
    let uid = rustix::process::getuid().as_raw();
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| passwd_name(uid))
        .unwrap_or_else(|| format!("uid {uid}"))
}

fn passwd_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?;
        (id.parse::<u32>().ok()? == uid).then(|| name.to_string())
    })
}

/// This build's version, for ingest events.
pub const TOOL_VERSION: &str = concat!("cestore ", env!("CARGO_PKG_VERSION"));
