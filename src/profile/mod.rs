//! Snapshot profiles: everything one kind of snapshot decides, in one place.
//!
//! A kind of snapshot (today the Compound Engineering plugin, [`ce`]) decides
//! which entries of a tree a walk keeps, leaves out (with why) or refuses, and
//! in which order; its bounds; its manifest's canonical bytes and so its
//! digest; how a view of it is laid out; and what `verify`, `recover` and
//! `adopt` (pull, import) re-check of a stored snapshot. The machinery that
//! reads trees (directory handles, git objects, the hashing beside the walk,
//! Python's name order) lives in [`crate::source`] and asks a [`Profile`]
//! at each of those points; the store asks it where a snapshot arrives
//! without a walk.
//!
//! # Why one trait, statically dispatched
//!
//! The questions are few and each is asked once per entry or once per
//! snapshot, never per byte: a trait whose methods answer them keeps every
//! decision of a kind beside the others, and a second kind is a second
//! `impl`. The walk is generic over `P: Profile + ?Sized`, so the CE walk is
//! compiled for [`ce::Ce`] with no virtual call, while the trait stays
//! object safe (`&dyn Profile`) for code that picks a profile at run time.
//! The fixed parts of a kind (its layout, its bounds) are plain data
//! ([`Layout`], [`Bounds`]) rather than code, so that the walk reads them
//! once. The walk's per-entry questions ([`Profile::left_out`],
//! [`Profile::step`], [`Profile::keeps_bytes`]) take borrowed names and
//! return small values, so the seam adds no allocation per entry (CE's
//! `left_out` lowercases each name, as the walk did before it).
//!
//! Rejections stay one type, [`Rejection`], with one rule id and exit code
//! per rule; the walk's refusals are worded as the reference words them for
//! the CE plugin, and a later profile adds the variants its own rules need.

pub mod ce;
pub mod tree;

use std::path::PathBuf;

use crate::profile::ce::manifest::{Entry, Manifest, ManifestError};
pub use ce::rules::{ManifestRuleError, Rejection};

/// The bounds a walk enforces: a profile's own, or lower ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// The most files one release may hold.
    pub files: usize,
    /// The most bytes one file may hold.
    pub file_bytes: u64,
    /// The most bytes all files together may hold.
    pub total_bytes: u64,
    /// The most bytes a file's relative path may hold, in UTF-8.
    pub path_bytes: usize,
}

impl Bounds {
    /// The reference's bounds: the CE profile's.
    pub const REFERENCE: Bounds = ce::BOUNDS;

    /// These bounds, none above the reference's.
    pub fn at_most_reference(self) -> Bounds {
        self.at_most(Bounds::REFERENCE)
    }

    /// These bounds, none above `ceiling`'s.
    pub fn at_most(self, ceiling: Bounds) -> Bounds {
        Bounds {
            files: self.files.min(ceiling.files),
            file_bytes: self.file_bytes.min(ceiling.file_bytes),
            total_bytes: self.total_bytes.min(ceiling.total_bytes),
            path_bytes: self.path_bytes.min(ceiling.path_bytes),
        }
    }
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds::REFERENCE
    }
}

/// Why a profile leaves an entry out of a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeftOut {
    /// A forbidden part: `.git`, `tests`, `docs`, `node_modules` and the like.
    ForbiddenPart,
    /// A name that may hold a secret: `.env`, `*.pem`, `*token*` and the like.
    Secret,
    /// Not in the profile's allowlist ([`Layout`]): at the root, anything but
    /// its files directory and the directories it walks; in the files
    /// directory, anything but the files it names.
    OutsideAllowlist,
}

/// What an entry of a tree is, as `lstat` sees it: no symlink followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Directory,
    /// A regular file.
    File,
    /// A symbolic link.
    Symlink,
    /// Anything else: a device, a FIFO, a socket.
    Other,
}

/// What one entry of a snapshot is, with its full mode: the vocabulary a
/// profile lays a view out in. The CE profile holds only regular files,
/// whose one mode bit that counts is the exec bit ([`Profile::entry_kind`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file, with the mode its view gives it.
    File {
        /// The permission bits.
        mode: u32,
    },
    /// A directory, with the mode its view gives it.
    Directory {
        /// The permission bits.
        mode: u32,
    },
    /// A symbolic link, with its target as stored.
    Symlink {
        /// Where it points.
        target: String,
    },
}

/// What a walk does with an entry it reached and did not leave out.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    /// Walk into it (a directory).
    Descend,
    /// Read it, check it and hand it over (a file).
    Read,
    /// Refuse the tree, with this rejection at the entry's path.
    Refuse(fn(PathBuf) -> Rejection),
}

/// Where a walk goes, in order, and what it must find there.
///
/// First the named files of [`Layout::files_dir`] (a directory at the
/// root, which must be a real directory), each looked up with Python's
/// `exists()`; then the directories [`Layout::dirs`] at the root, each
/// walked depth first, every directory's entries in Python's name order.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// The directory at the root that holds the named files.
    pub files_dir: &'static str,
    /// The files taken from it, in this order.
    pub files: &'static [&'static str],
    /// How many of `files`, from the first, must exist.
    pub required_files: usize,
    /// The directories walked, in this order.
    pub dirs: &'static [&'static str],
    /// How many of `dirs`, from the first, must exist: checked before any
    /// is walked.
    pub required_dirs: usize,
}

impl Layout {
    /// The names this layout allows in the directory at `rel` below the
    /// root (`""` for the root), when it names them: what is outside them
    /// is left out as [`LeftOut::OutsideAllowlist`].
    pub fn allowed_at(&self, rel: &str) -> Option<Vec<&'static str>> {
        if rel.is_empty() {
            let mut top = self.dirs.to_vec();
            top.push(self.files_dir);
            Some(top)
        } else if rel == self.files_dir {
            Some(self.files.to_vec())
        } else {
            None
        }
    }
}

/// What a walk read, as [`Profile::check_walked`] sees it once every entry
/// is read.
pub struct WalkEnd<'a> {
    /// What the caller says the tree is (CE: the release's version).
    pub expected: &'a str,
    /// The entries read, in the walk's order.
    pub entries: &'a [Entry],
    /// The files whose bytes [`Profile::keeps_bytes`] asked for: their
    /// relative path and bytes.
    pub kept: &'a [(String, Vec<u8>)],
    /// Makes a relative path the path a rejection names.
    pub full: &'a dyn Fn(&str) -> PathBuf,
}

/// Everything one kind of snapshot decides; see the module's documentation.
pub trait Profile: Sync {
    /// The kind's name in reports and in the catalogue's snapshot rows.
    fn name(&self) -> &'static str;

    // --- The walk -------------------------------------------------------

    /// Where a walk goes, in order, and what it must find.
    fn layout(&self) -> &'static Layout;

    /// The highest bounds the kind allows; a walk may be asked for lower ones.
    fn bounds(&self) -> Bounds;

    /// How many directories deep below a walked directory a walk may go.
    fn max_depth(&self) -> usize;

    /// Why an entry named `name` is left out of a snapshot, if it is: asked
    /// of every name a walked directory lists, before anything else of it.
    fn left_out(&self, name: &str) -> Option<LeftOut>;

    /// What the walk does with an entry of `kind` that is not left out.
    fn step(&self, kind: Kind) -> Step;

    /// Whether the walk keeps the bytes of the file at `rel` for
    /// [`Profile::check_walked`]; asked of every file read. None, unless a
    /// profile says otherwise.
    fn keeps_bytes(&self, rel: &[u8]) -> bool {
        let _ = rel;
        false
    }

    /// The checks once every entry is read ([`WalkEnd`]). Nothing, unless a
    /// profile says otherwise.
    fn check_walked(&self, walked: &WalkEnd<'_>) -> Result<(), Rejection> {
        let _ = walked;
        Ok(())
    }

    // --- The manifest ---------------------------------------------------

    /// The manifest of `entries`: its canonical bytes and their digest.
    fn manifest(&self, entries: Vec<Entry>) -> Manifest;

    /// Decodes manifest bytes, refusing any that are not canonical.
    fn parse_manifest(&self, bytes: &[u8]) -> Result<Manifest, ManifestError>;

    // --- Views ----------------------------------------------------------

    /// What an entry is in a view, with its mode: the mode of the object a
    /// view's hard link shares.
    fn entry_kind(&self, entry: &Entry) -> EntryKind;

    // --- Stored snapshots: verify, recover, adopt -------------------------

    /// The one check of a manifest's entries against the kind's rules and
    /// bounds, for a snapshot that did not come from a walk (pull, import,
    /// recover) and for every snapshot before a view of it is handed out.
    fn check_entries(&self, entries: &[Entry]) -> Result<(), ManifestRuleError>;

    /// The entry whose bytes [`Profile::check_content`] re-checks in a
    /// manifest that passed [`Profile::check_entries`].
    fn content_entry<'m>(&self, entries: &'m [Entry]) -> &'m Entry;

    /// The name of the file [`Profile::content_entry`] is, as refusals name it.
    fn content_file(&self) -> &'static str;

    /// The rule id of a refusal of that file's bytes in `recover`.
    fn content_rule(&self) -> &'static str;

    /// Re-checks the bytes of [`Profile::content_entry`] as the walk checks
    /// them, and returns the version the snapshot says it is.
    fn check_content(&self, bytes: &[u8]) -> Result<String, ContentError>;
}

/// A stored snapshot's manifest file names no exact version.
#[derive(Debug, thiserror::Error)]
#[error("{file} carries no exact semantic version (found {found})")]
pub struct NoVersion {
    /// The file's name.
    pub file: &'static str,
    /// What it carries, as Python's `repr` shows it.
    pub found: String,
}

/// Why the bytes [`Profile::check_content`] re-checks are refused.
#[derive(Debug, thiserror::Error)]
pub enum ContentError {
    /// They break a rule the walk checks.
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// They name no exact version.
    #[error(transparent)]
    NoVersion(#[from] NoVersion),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Source, WalkError};

    /// A second profile, for the seam's sake: the CE profile's rules but
    /// another layout, symlinks left to refuse as CE does, and no last check.
    struct Other;

    static OTHER: Layout = Layout {
        files_dir: "meta",
        files: &["a.json", "b.json"],
        required_files: 1,
        dirs: &["data", "more"],
        required_dirs: 1,
    };

    impl Profile for Other {
        fn name(&self) -> &'static str {
            "other"
        }
        fn layout(&self) -> &'static Layout {
            &OTHER
        }
        fn bounds(&self) -> Bounds {
            Bounds {
                files: 4,
                ..ce::BOUNDS
            }
        }
        fn max_depth(&self) -> usize {
            1
        }
        fn left_out(&self, name: &str) -> Option<LeftOut> {
            (name == "skip").then_some(LeftOut::ForbiddenPart)
        }
        fn step(&self, kind: Kind) -> Step {
            ce::CE.step(kind)
        }
        // The CE profile's encoding and views: this one differs in its walk.
        fn manifest(&self, entries: Vec<Entry>) -> Manifest {
            ce::CE.manifest(entries)
        }
        fn parse_manifest(&self, bytes: &[u8]) -> Result<Manifest, ManifestError> {
            ce::CE.parse_manifest(bytes)
        }
        fn entry_kind(&self, entry: &Entry) -> EntryKind {
            ce::CE.entry_kind(entry)
        }
        fn check_entries(&self, _: &[Entry]) -> Result<(), ManifestRuleError> {
            Ok(())
        }
        fn content_entry<'m>(&self, entries: &'m [Entry]) -> &'m Entry {
            &entries[0]
        }
        fn content_file(&self) -> &'static str {
            "a.json"
        }
        fn content_rule(&self) -> &'static str {
            "a-json"
        }
        fn check_content(&self, _: &[u8]) -> Result<String, ContentError> {
            Ok(String::new())
        }
    }

    fn write(dir: &std::path::Path, rel: &str) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, rel).unwrap();
    }

    fn rule(source: &Source) -> Option<&'static str> {
        match source.walk_as(&Other, "", Bounds::REFERENCE, |_| Ok::<(), ()>(())) {
            Ok(_) => None,
            Err(WalkError::Rejected(r)) => Some(r.rule()),
            Err(_) => unreachable!(),
        }
    }

    #[test]
    fn the_walk_goes_where_the_profile_says_in_its_order_and_bounds() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        for rel in [
            "meta/a.json",
            "meta/c.json",
            "more/x",
            "data/b/y",
            "data/a",
            "data/skip/z",
            "skills/ce-plan/SKILL.md",
        ] {
            write(dir, rel);
        }
        let source = Source::open(dir).unwrap();
        let walked = source
            .walk_as(&Other, "", Bounds::REFERENCE, |_| Ok::<(), ()>(()))
            .unwrap_or_else(|_| panic!("walks"));
        let paths: Vec<&str> = walked.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["meta/a.json", "data/a", "data/b/y", "more/x"]);
        let left: Vec<(LeftOut, &str)> = walked
            .left_out
            .iter()
            .map(|(why, p)| (*why, p.as_str()))
            .collect();
        assert_eq!(
            left,
            [
                (LeftOut::ForbiddenPart, "data/skip"),
                (LeftOut::OutsideAllowlist, "meta/c.json"),
                (LeftOut::OutsideAllowlist, "skills"),
            ]
        );
        // Its bounds and depth, not CE's.
        write(dir, "more/w");
        assert_eq!(rule(&source), Some("too-many-files"));
        std::fs::remove_file(dir.join("more/w")).unwrap();
        write(dir, "data/b/c/deep");
        assert_eq!(rule(&source), Some("too-deep"));
        std::fs::remove_dir_all(dir.join("data/b/c")).unwrap();
        // Its required entries.
        std::fs::remove_file(dir.join("meta/a.json")).unwrap();
        assert_eq!(rule(&source), Some("manifest-missing"));
        write(dir, "meta/a.json");
        std::fs::remove_dir_all(dir.join("data")).unwrap();
        assert_eq!(rule(&source), Some("skills-missing"));
    }
}
