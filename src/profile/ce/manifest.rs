//! The canonical manifest: the exact bytes whose SHA-256 is a snapshot's identity.
//!
//! The bytes are what Python's
//! `json.dumps({"schema_version": 1, "files": entries}, sort_keys=True, separators=(",", ":"))`
//! writes for the reference implementation's entries, so that digests made by
//! the reference and by cestore agree byte for byte:
//!
//! ```text
//! {"files":[{"executable":false,"path":"...","sha256":"<64 hex>","size":N},...],"schema_version":1}
//! ```
//!
//! Keys are sorted; there is no white space; strings use Python's
//! `ensure_ascii` escaping (see [`write_json_string`]). Entries keep the order
//! of the reference's walk (see `docs/format.md`), which is not a sort by path.

use std::fmt;

use crate::digest::{ManifestDigest, ObjectId};
use crate::profile::tree::stored::{self, Kind, Stored, TaskRecord};
use crate::profile::tree::{Dependency, TreeEntry};

/// The plugin's own manifest, relative to the plugin's root: every release
/// has it, and every snapshot's manifest lists it first.
pub const PLUGIN_JSON: &str = ".claude-plugin/plugin.json";

/// The manifest schema version this crate writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// One file of a snapshot, as the canonical manifest lists it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Whether any execute bit was set on the source file.
    pub executable: bool,
    /// The path relative to the plugin root, `/`-separated.
    pub path: String,
    /// The SHA-256 of the file's bytes.
    pub sha256: ObjectId,
    /// The file's length in bytes.
    pub size: u64,
}

impl Entry {
    /// The entry of a file at `path` holding `data`.
    pub fn of(path: &str, data: &[u8], executable: bool) -> Entry {
        Entry {
            executable,
            path: path.into(),
            sha256: ObjectId::of(data),
            size: data.len() as u64,
        }
    }

    /// The key of the object that holds this file's bytes.
    pub fn key(&self) -> crate::digest::ObjectKey {
        crate::digest::ObjectKey {
            id: self.sha256,
            executable: self.executable,
        }
    }
}

pub use crate::pyjson::write_json_string;

/// Encodes entries as the canonical manifest bytes.
pub fn canonical_bytes(entries: &[Entry]) -> Vec<u8> {
    // 120 bytes covers the fixed part of one entry plus a short path.
    let mut out = Vec::with_capacity(32 + entries.len() * 120);
    out.extend_from_slice(b"{\"files\":[");
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"executable\":");
        out.extend_from_slice(if e.executable { b"true" } else { b"false" });
        out.extend_from_slice(b",\"path\":");
        write_json_string(&mut out, &e.path);
        out.extend_from_slice(b",\"sha256\":\"");
        out.extend_from_slice(e.sha256.to_hex().as_bytes());
        out.extend_from_slice(b"\",\"size\":");
        out.extend_from_slice(e.size.to_string().as_bytes());
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"schema_version\":");
    out.extend_from_slice(SCHEMA_VERSION.to_string().as_bytes());
    out.push(b'}');
    out
}

/// The most bytes a manifest within the reference's bounds can hold:
/// [`crate::profile::ce::rules::MAX_FILES`] entries of at most
/// [`crate::profile::ce::rules::MAX_PATH_BYTES`] bytes of path, each byte escaped to at
/// most six, stay below it.
pub const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;

/// The most bytes a stored manifest of a tree kind (`tree`, `dependencies`,
/// `task`) may hold where the store reads one whole (its manifest files, a
/// bundle's manifest, a registry's config): 100,000 entries of the
/// harness's bounds average far less than 2 KiB each. A CE manifest keeps
/// [`MAX_MANIFEST_BYTES`] ([`over_bound`]).
pub const MAX_TREE_MANIFEST_BYTES: u64 = 256 * 1024 * 1024;

/// Whether bytes read as a whole manifest are longer than their kind may
/// be: [`MAX_MANIFEST_BYTES`] for a CE manifest (and bytes of no kind),
/// [`MAX_TREE_MANIFEST_BYTES`] for a tree kind.
pub fn over_bound(bytes: &[u8]) -> bool {
    let max = match Kind::of(bytes) {
        Kind::Ce => MAX_MANIFEST_BYTES,
        Kind::Tree | Kind::Dependencies | Kind::Task | Kind::Environment => MAX_TREE_MANIFEST_BYTES,
    };
    bytes.len() as u64 > max
}

/// The longest run of hex digits whose every 64-digit window is taken for a
/// name by [`object_ids_in`]; a longer run gives only its first and last 64.
pub const LONGEST_SCANNED_RUN: usize = 128;

/// Every object name that bytes meant to be a manifest still hold, found
/// without parsing them: each run of 64 hexadecimal digits (either case).
///
/// This is how the store reads a manifest that is damaged (cut short, a
/// digit changed, other bytes written over it, not JSON at all): whatever
/// names are left in it keep their objects from gc. A run longer than 64
/// digits (a digit was inserted, or two names lost the bytes between them)
/// gives each of its 64-digit windows, up to [`LONGEST_SCANNED_RUN`] digits;
/// past that, its first and last 64. The names are in the order found and
/// may repeat.
pub fn object_ids_in(bytes: &[u8]) -> Vec<ObjectId> {
    let mut out = Vec::new();
    let mut take = |window: &[u8]| {
        let hex = String::from_utf8_lossy(window).to_ascii_lowercase();
        if let Ok(id) = hex.parse::<ObjectId>() {
            out.push(id);
        }
    };
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_hexdigit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_hexdigit() {
            i += 1;
        }
        let run = &bytes[start..i];
        if run.len() < 64 {
            continue;
        }
        if run.len() <= LONGEST_SCANNED_RUN {
            run.windows(64).for_each(&mut take);
        } else {
            take(&run[..64]);
            take(&run[run.len() - 64..]);
        }
    }
    out
}

/// A decoded canonical manifest together with its bytes and digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The files, in manifest order.
    pub entries: Vec<Entry>,
    /// The canonical bytes.
    pub bytes: Vec<u8>,
    /// The SHA-256 of `bytes`.
    pub digest: ManifestDigest,
    /// What a tree-kind manifest holds (`tree`, `dependencies`, `task`;
    /// `docs/format.md`); `None` for a CE plugin's manifest.
    pub tree: Option<Stored>,
}

/// Why bytes are not a canonical manifest.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The bytes are not JSON of the manifest's shape.
    #[error("not a manifest: {0}")]
    Shape(#[from] serde_json::Error),
    /// The schema version is not one this crate reads.
    #[error("manifest schema version {0} is not supported (this cestore reads {SCHEMA_VERSION})")]
    Schema(u64),
    /// The bytes parse but are not the canonical encoding of what they hold.
    #[error("manifest bytes are not in canonical form")]
    NotCanonical,
    /// The bytes announce a tree kind but are not JSON of its shape.
    #[error("{0}")]
    TreeShape(String),
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    files: Vec<Entry>,
    schema_version: u64,
}

impl Manifest {
    /// Builds the manifest of `entries`.
    pub fn new(entries: Vec<Entry>) -> Manifest {
        let bytes = canonical_bytes(&entries);
        let digest = ManifestDigest::of(&bytes);
        Manifest {
            entries,
            bytes,
            digest,
            tree: None,
        }
    }

    /// Builds the manifest of a tree-kind snapshot: its bytes are exactly
    /// what the harness hashes, its entries the file objects it names.
    pub fn stored(stored: Stored) -> Manifest {
        let bytes = stored.bytes();
        let digest = ManifestDigest::of(&bytes);
        Manifest {
            entries: stored.files(),
            bytes,
            digest,
            tree: Some(stored),
        }
    }

    /// Builds the `tree` manifest of a `sandbox_copy`'s entries (in the
    /// order of `sort_entries`); its digest is `task_asset_manifest_digest`.
    pub fn tree(entries: Vec<TreeEntry>) -> Manifest {
        Manifest::stored(Stored::Tree(entries))
    }

    /// Builds the `dependencies` manifest of a dependency list (in declared
    /// order); its digest is `sandbox_dependency_manifest_digest`.
    pub fn dependencies(dependencies: Vec<Dependency>) -> Manifest {
        Manifest::stored(Stored::Dependencies(dependencies))
    }

    /// Builds the `task` manifest of a snapshot identity; its digest is
    /// `task_asset_snapshot_digest`.
    pub fn task(record: TaskRecord) -> Manifest {
        Manifest::stored(Stored::Task(record))
    }

    /// The profile of the manifest: `ce`, `tree`, `dependencies` or `task`.
    pub fn profile(&self) -> &'static str {
        match &self.tree {
            None => "ce",
            Some(stored) => stored.profile(),
        }
    }

    /// Decodes manifest bytes of any kind (read from their first bytes:
    /// `{"files":` CE, `[` tree, `{"dependencies":` dependency list,
    /// `{"declarations":` task), refusing any that are not canonical.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let kind = Kind::of(bytes);
        if kind != Kind::Ce {
            let stored = stored::parse(kind, bytes).map_err(|e| match e {
                stored::ParseError::NotCanonical => ManifestError::NotCanonical,
                shape @ stored::ParseError::Shape { .. } => {
                    ManifestError::TreeShape(shape.to_string())
                }
            })?;
            let digest = ManifestDigest::of(bytes);
            return Ok(Manifest {
                entries: stored.files(),
                bytes: bytes.to_vec(),
                digest,
                tree: Some(stored),
            });
        }
        let wire: Wire = serde_json::from_slice(bytes)?;
        if wire.schema_version != u64::from(SCHEMA_VERSION) {
            return Err(ManifestError::Schema(wire.schema_version));
        }
        let manifest = Manifest::new(wire.files);
        if manifest.bytes != bytes {
            return Err(ManifestError::NotCanonical);
        }
        Ok(manifest)
    }

    /// The number of bytes in all files together (saturating: sizes a
    /// received manifest declares never wrap around).
    pub fn total_bytes(&self) -> u64 {
        self.entries
            .iter()
            .map(|e| e.size)
            .fold(0, u64::saturating_add)
    }
}

impl fmt::Display for Manifest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc(s: &str) -> String {
        let mut out = Vec::new();
        write_json_string(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_like_python_ensure_ascii() {
        assert_eq!(esc("a b"), r#""a b""#);
        assert_eq!(esc("q\"b\\"), r#""q\"b\\""#);
        assert_eq!(esc("\n\r\t\u{8}\u{c}"), r#""\n\r\t\b\f""#);
        assert_eq!(esc("\u{1}\u{1f}\u{7f}"), r#""\u0001\u001f\u007f""#);
        assert_eq!(esc("é"), r#""\u00e9""#);
        assert_eq!(esc("\u{fffd}"), r#""\ufffd""#);
        assert_eq!(esc("𝄞"), r#""\ud834\udd1e""#);
        assert_eq!(esc("/"), r#""/""#);
    }

    #[test]
    fn encodes_sorted_compact() {
        let e = Entry {
            executable: true,
            path: "skills/a b/x".into(),
            sha256: ObjectId::of(b""),
            size: 0,
        };
        let bytes = canonical_bytes(&[e]);
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\"files\":[{\"executable\":true,\"path\":\"skills/a b/x\",\"sha256\":\
             \"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"size\":0}],\
             \"schema_version\":1}"
        );
    }

    #[test]
    fn every_name_left_in_damaged_bytes_is_found() {
        let a = ObjectId::of(b"a");
        let b = ObjectId::of(b"b");
        let m = Manifest::new(vec![
            Entry::of(".claude-plugin/plugin.json", b"a", false),
            Entry::of("skills/x", b"b", true),
        ]);
        assert_eq!(object_ids_in(&m.bytes), [a, b]);
        // Cut short: the names before the cut are still there.
        let cut = &m.bytes[..m.bytes.len() - 1];
        assert_eq!(object_ids_in(cut), [a, b]);
        let cut = &m.bytes[..m.bytes.len() - 40];
        assert_eq!(object_ids_in(cut), [a]);
        // Upper case, a digit inserted (every window), two names glued.
        let upper = a.to_hex().to_ascii_uppercase();
        assert_eq!(object_ids_in(upper.as_bytes()), [a]);
        let grown = format!("{}0", a.to_hex());
        let found = object_ids_in(grown.as_bytes());
        assert_eq!(found.len(), 2);
        assert_eq!(found[0], a);
        let glued = format!("{}{}{}", a.to_hex(), "f".repeat(70), b.to_hex());
        assert_eq!(object_ids_in(glued.as_bytes()), [a, b]);
        assert!(object_ids_in(b"not a manifest").is_empty());
        assert!(object_ids_in(&a.to_hex().as_bytes()[..63]).is_empty());
    }

    #[test]
    fn parse_round_trips_and_refuses_non_canonical() {
        let m = Manifest::new(vec![Entry {
            executable: false,
            path: "skills/é/\"x\"".into(),
            sha256: ObjectId::of(b"x"),
            size: 1,
        }]);
        assert_eq!(Manifest::parse(&m.bytes).unwrap(), m);
        let spaced = String::from_utf8(m.bytes.clone())
            .unwrap()
            .replace(",", ", ");
        assert!(matches!(
            Manifest::parse(spaced.as_bytes()),
            Err(ManifestError::NotCanonical)
        ));
    }
}

#[cfg(test)]
mod proptests {
    use proptest::prelude::*;

    use super::*;

    /// Characters with their own escapes or at the edges of the ranges:
    /// quotes, backslashes, control characters, DEL, the BMP's edges, astral.
    const SPECIAL: &str = concat!(
        "\"\\/\0\n\r\t\u{8}\u{c}\u{1f}\u{7f}",
        "\u{80}\u{2028}\u{d7ff}\u{e000}\u{fffd}\u{ffff}",
        "\u{10000}\u{1d11e}\u{10ffff}",
    );

    /// A path character, often one of [`SPECIAL`] or astral.
    fn path_char() -> impl Strategy<Value = char> {
        prop_oneof![
            any::<char>(),
            prop::sample::select(SPECIAL.chars().collect::<Vec<_>>()),
            prop::char::range('\0', '\u{7f}'),
            prop::char::range('\u{10000}', '\u{10ffff}'),
        ]
    }

    fn entry() -> impl Strategy<Value = Entry> {
        (
            any::<bool>(),
            prop::collection::vec(path_char(), 0..24),
            any::<[u8; 32]>(),
            any::<u64>(),
        )
            .prop_map(|(executable, path, sha256, size)| Entry {
                executable,
                path: path.into_iter().collect(),
                sha256: ObjectId::from_bytes(sha256),
                size,
            })
    }

    proptest! {
        #[test]
        fn encoding_round_trips(entries in prop::collection::vec(entry(), 0..8)) {
            let m = Manifest::new(entries.clone());
            prop_assert!(m.bytes.is_ascii(), "not ASCII: {}", String::from_utf8_lossy(&m.bytes));
            let parsed = Manifest::parse(&m.bytes)
                .map_err(|e| TestCaseError::fail(format!("{e}: {m}")))?;
            prop_assert_eq!(&parsed.entries, &entries);
            prop_assert_eq!(parsed.digest, m.digest);
            prop_assert_eq!(parsed.bytes, m.bytes);
        }
    }
}
