//! The Compound Engineering plugin: the first profile, and today the only one.
//!
//! Its rules are the reference's (`runtime_mounts.py`): [`rules`] holds them
//! as pure functions, [`manifest`] the canonical manifest whose SHA-256 is a
//! snapshot's digest, [`plugin_manifest`] the check of the plugin's own
//! manifest file. [`Ce`] hands them to the walk and to the store through
//! [`Profile`].
//!
//! The walk visits, in this order:
//!
//! 1. `.claude-plugin/plugin.json` (required), then `.claude-plugin/marketplace.json`;
//! 2. `skills/` (required), `scripts/`, `assets/`, each depth first, every
//!    directory's entries sorted by name as Python sorts `str` (code points);
//!
//! leaving out every name [`rules::left_out_reason`] gives a reason for,
//! refusing symlinks and anything but directories and regular files, and,
//! once every file is read, checking `plugin.json`'s name and version and
//! that every required skill's `SKILL.md` is there.

pub mod contract;
pub mod manifest;
pub mod plugin_manifest;
pub mod reference;
pub mod rules;

use super::{Bounds, EntryKind, Kind, Layout, LeftOut, Profile, Step, WalkEnd};
use crate::profile::ce::manifest::{Entry, Manifest, ManifestError, PLUGIN_JSON};
use rules::{ManifestRuleError, Rejection};

/// The CE profile's bounds: the reference's.
pub const BOUNDS: Bounds = Bounds {
    files: rules::MAX_FILES,
    file_bytes: rules::MAX_FILE_BYTES,
    total_bytes: rules::MAX_TOTAL_BYTES,
    path_bytes: rules::MAX_PATH_BYTES,
};

/// How deep below a top-level directory the reference can walk before
/// Python's recursion limit stops it (measured: 986 nested directories pass,
/// 987 raise `RecursionError`).
pub const MAX_WALK_DEPTH: usize = 986;

/// The name a snapshot of this profile carries in the catalogue and in reports.
pub const NAME: &str = rules::PLUGIN_NAME;

/// Where the CE walk goes: `.claude-plugin/`'s two manifests, the first
/// required; then `skills/` (required), `scripts/` and `assets/`.
pub static LAYOUT: Layout = Layout {
    files_dir: rules::MANIFEST_DIR,
    files: &rules::MANIFESTS,
    required_files: 1,
    dirs: &rules::PLUGIN_DIRS,
    required_dirs: 1,
};

/// The command line's help for the options the CE profile words.
pub mod help {
    /// `ingest --version`.
    pub const VERSION: &str = "The exact version its plugin.json must carry (X.Y.Z)";
    /// `stage --plugin-version`.
    pub const PLUGIN_VERSION: &str = "The exact version the release's plugin.json must carry";
}

/// The CE plugin profile.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ce;

/// The CE profile, for callers that hold no other.
pub const CE: Ce = Ce;

impl Profile for Ce {
    fn name(&self) -> &'static str {
        NAME
    }

    fn layout(&self) -> &'static Layout {
        &LAYOUT
    }

    fn bounds(&self) -> Bounds {
        BOUNDS
    }

    fn max_depth(&self) -> usize {
        MAX_WALK_DEPTH
    }

    fn left_out(&self, name: &str) -> Option<LeftOut> {
        rules::left_out_reason(name)
    }

    fn step(&self, kind: Kind) -> Step {
        match kind {
            Kind::Directory => Step::Descend,
            Kind::File => Step::Read,
            Kind::Symlink => Step::Refuse(|path| Rejection::Symlink { path }),
            Kind::Other => Step::Refuse(|path| Rejection::NotRegularEntry { path }),
        }
    }

    fn keeps_bytes(&self, rel: &[u8]) -> bool {
        rel == PLUGIN_JSON.as_bytes()
    }

    fn check_walked(&self, walked: &WalkEnd<'_>) -> Result<(), Rejection> {
        let WalkEnd {
            expected,
            entries,
            kept,
            full,
        } = *walked;
        let bytes = kept
            .iter()
            .find(|(rel, _)| rel == PLUGIN_JSON)
            .map(|(_, b)| b.as_slice())
            .unwrap_or_default();
        plugin_manifest::check_plugin_manifest(bytes, expected)
            .map_err(|problem| Rejection::from_manifest_problem(problem, full(PLUGIN_JSON)))?;
        for skill in rules::REQUIRED_SKILLS {
            let rel = format!("skills/{skill}/SKILL.md");
            if !entries.iter().any(|e| e.path == rel) {
                return Err(Rejection::MissingSkill {
                    skill,
                    path: full(&rel),
                });
            }
        }
        Ok(())
    }

    fn manifest(&self, entries: Vec<Entry>) -> Manifest {
        Manifest::new(entries)
    }

    fn parse_manifest(&self, bytes: &[u8]) -> Result<Manifest, ManifestError> {
        Manifest::parse(bytes)
    }

    fn entry_kind(&self, entry: &Entry) -> EntryKind {
        // A view hard-links the object, and so has its mode.
        EntryKind::File {
            mode: entry.key().mode(),
        }
    }

    fn check_entries(&self, entries: &[Entry]) -> Result<(), ManifestRuleError> {
        rules::check_manifest_entries(entries)
    }

    fn content_entry<'m>(&self, entries: &'m [Entry]) -> &'m Entry {
        // The rules put plugin.json first.
        &entries[0]
    }

    fn content_file(&self) -> &'static str {
        rules::MANIFESTS[0]
    }

    fn content_rule(&self) -> &'static str {
        "plugin-json"
    }

    fn check_content(&self, bytes: &[u8]) -> Result<String, super::ContentError> {
        plugin_version(bytes)
    }
}

/// Checks `plugin.json`'s bytes as an ingest does and returns its version.
fn plugin_version(bytes: &[u8]) -> Result<String, super::ContentError> {
    use crate::pyjson::{self, Value};
    let path = std::path::Path::new(PLUGIN_JSON).to_path_buf();
    let value = pyjson::loads(bytes).map_err(|e| Rejection::ManifestInvalid {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    let version = match value.get("version") {
        Some(Value::Str(s)) => s.as_str().map(str::to_string),
        _ => None,
    };
    let version = version
        .filter(|v| rules::is_exact_version(v))
        .ok_or_else(|| super::NoVersion {
            file: rules::MANIFESTS[0],
            found: value.get("version").map_or("None".into(), Value::py_repr),
        })?;
    plugin_manifest::check_plugin_manifest(bytes, &version)
        .map_err(|problem| Rejection::from_manifest_problem(problem, path))?;
    Ok(version)
}

/// CE trees for the unit tests of every module: the profile's fixtures.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::path::Path;

    /// The profile's manifest file, relative to the root.
    pub(crate) const MANIFEST_FILE: &str = crate::profile::ce::manifest::PLUGIN_JSON;
    /// Its directory.
    pub(crate) const MANIFEST_DIR: &str = super::rules::MANIFEST_DIR;
    /// Its name in that directory.
    pub(crate) const MANIFEST_NAME: &str = super::rules::MANIFESTS[0];

    /// The `SKILL.md` of every required skill, in the order the walk checks them.
    pub(crate) fn required_skill_files() -> Vec<String> {
        super::rules::REQUIRED_SKILLS
            .iter()
            .map(|s| format!("skills/{s}/SKILL.md"))
            .collect()
    }

    /// A minimal tree in `dir`: the manifest file holding `manifest` and
    /// every required skill's `SKILL.md` holding `skill`.
    pub(crate) fn minimal(dir: &Path, manifest: &str, skill: &str) -> std::io::Result<()> {
        std::fs::create_dir_all(dir.join(MANIFEST_DIR))?;
        std::fs::write(dir.join(MANIFEST_FILE), manifest)?;
        for file in required_skill_files() {
            let path = dir.join(file);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, skill)?;
        }
        Ok(())
    }

    /// A minimal release at version 1.2.3 with one 100-byte asset,
    /// `assets/big.bin`.
    pub(crate) fn release(dir: &Path) {
        minimal(
            dir,
            r#"{"name": "compound-engineering", "version": "1.2.3"}"#,
            "# skill\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("assets")).unwrap();
        std::fs::write(dir.join("assets/big.bin"), [b'x'; 100]).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{release, MANIFEST_FILE};
    use super::*;
    use crate::profile::ContentError;
    use crate::source::Source;

    #[test]
    fn the_layout_is_the_references_and_its_allowlist_follows_from_it() {
        assert_eq!(LAYOUT.files_dir, ".claude-plugin");
        assert_eq!(LAYOUT.files, ["plugin.json", "marketplace.json"]);
        assert_eq!(LAYOUT.dirs, ["skills", "scripts", "assets"]);
        assert_eq!((LAYOUT.required_files, LAYOUT.required_dirs), (1, 1));
        assert_eq!(
            LAYOUT.allowed_at(""),
            Some(vec!["skills", "scripts", "assets", ".claude-plugin"])
        );
        assert_eq!(
            LAYOUT.allowed_at(".claude-plugin"),
            Some(vec!["plugin.json", "marketplace.json"])
        );
        assert_eq!(LAYOUT.allowed_at("skills"), None);
        assert_eq!(Bounds::REFERENCE, CE.bounds());
        assert_eq!(CE.name(), "compound-engineering");
        assert!(CE.keeps_bytes(MANIFEST_FILE.as_bytes()));
        assert!(!CE.keeps_bytes(b"skills/ce-plan/SKILL.md"));
    }

    #[test]
    fn a_views_file_has_its_objects_mode() {
        for executable in [false, true] {
            let entry = Entry::of("scripts/x", b"x", executable);
            assert_eq!(
                CE.entry_kind(&entry),
                EntryKind::File {
                    mode: entry.key().mode()
                }
            );
        }
        let plain = Entry::of("scripts/x", b"x", false);
        assert_eq!(CE.entry_kind(&plain), EntryKind::File { mode: 0o444 });
    }

    #[test]
    fn the_walk_through_a_dyn_profile_is_the_walk_through_ce() {
        let dir = tempfile::tempdir().unwrap();
        release(dir.path());
        let source = Source::open(dir.path()).unwrap();
        let ok = |_: &crate::source::SourceFile<'_>| Ok::<(), ()>(());
        let fixed = source
            .walk("1.2.3", Bounds::REFERENCE, ok)
            .unwrap_or_else(|_| panic!("walks"));
        let dynamic: &dyn Profile = &CE;
        let chosen = source
            .walk_as(dynamic, "1.2.3", Bounds::REFERENCE, ok)
            .unwrap_or_else(|_| panic!("walks"));
        assert_eq!(fixed.entries, chosen.entries);
        assert_eq!(fixed.left_out, chosen.left_out);
        assert_eq!(
            CE.manifest(fixed.entries.clone()).digest,
            Manifest::new(chosen.entries).digest
        );
    }

    #[test]
    fn stored_content_is_checked_as_the_walk_checks_it() {
        let version = CE.check_content(br#"{"name": "compound-engineering", "version": "1.2.3"}"#);
        assert_eq!(version.ok().as_deref(), Some("1.2.3"));
        let other = CE.check_content(br#"{"name": "x", "version": "1.2.3"}"#);
        assert!(
            matches!(&other, Err(ContentError::Rejected(r)) if r.rule() == "not-compound-engineering"),
            "{other:?}"
        );
        let loose = CE.check_content(br#"{"name": "compound-engineering", "version": "1.2"}"#);
        match loose {
            Err(ContentError::NoVersion(v)) => assert_eq!(
                v.to_string(),
                "plugin.json carries no exact semantic version (found '1.2')"
            ),
            other => panic!("{other:?}"),
        }
        let m = Manifest::new(vec![
            Entry::of(MANIFEST_FILE, b"{}", false),
            Entry::of("skills/ce-plan/SKILL.md", b"x", false),
        ]);
        assert_eq!(CE.content_entry(&m.entries).path, MANIFEST_FILE);
        assert_eq!(CE.content_rule(), "plugin-json");
    }
}
