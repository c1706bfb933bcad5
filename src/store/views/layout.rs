//! What a view of a tree-kind snapshot holds: every directory, file and
//! symlink, at its path in the view.
//!
//! A `tree` snapshot's view is its entries as they are. A `dependencies`
//! snapshot's view holds dependency `i` at `<i, 5 digits>/payload`. A
//! `task` snapshot's view is the harness's snapshot root: the task's
//! `tree` at `sandbox-copy/` and its dependency list at
//! `dependencies/<i, 5 digits>/payload` (both directories present when
//! empty). A CE snapshot has no such layout: its views are made from the
//! catalogue's files, as ever.

use crate::digest::ManifestDigest;
use crate::error::{Damage, Result};
use crate::profile::ce::manifest::Entry;
use crate::profile::tree::stored::{check, index_dir, Kind, Stored};
use crate::profile::tree::{Dependency, Node, TreeEntry};
use crate::store::Store;

/// The directory of a task view holding its `sandbox_copy` tree.
pub const SANDBOX_COPY_DIR: &str = "sandbox-copy";

/// The directory of a task view holding its dependencies.
pub const DEPENDENCIES_DIR: &str = "dependencies";

/// The kind of a recorded snapshot, read from the first bytes of its
/// manifest file (from its catalogue row, when the file is kept packed or
/// as a delta); a manifest that cannot be read is taken for a CE plugin's,
/// whose views are made from the catalogue as ever, unless it is kept so: a
/// tree's view then fails on its manifest rather than come out a plugin's.
pub fn kind_of(store: &Store, digest: &ManifestDigest) -> Kind {
    let head = crate::fsutil::read_head(&store.manifest_path(digest), 16);
    if head.starts_with(crate::catalogue::kept::KEPT_PREFIX) {
        // A packed manifest's or a delta's first bytes name no kind: the
        // catalogue's row does, else the bytes it unfolds to.
        return store.catalogue().kind_of(digest).unwrap_or_else(|| {
            store
                .read_manifest(digest)
                .map_or(Kind::Tree, |m| Kind::of(&m.bytes))
        });
    }
    Kind::of(&head)
}

/// Entries placed under `prefix/` (none when `prefix` is empty).
fn placed(prefix: &str, entries: &[TreeEntry], out: &mut Vec<TreeEntry>) {
    for e in entries {
        out.push(TreeEntry {
            path: if prefix.is_empty() {
                e.path.clone()
            } else {
                format!("{prefix}/{}", e.path)
            },
            node: e.node.clone(),
        });
    }
}

/// The layout of a dependency list's view below `prefix` (`""` for the
/// view's root): `<i>` directories holding each dependency's `payload`.
pub fn dependencies_layout(prefix: &str, deps: &[Dependency]) -> Vec<TreeEntry> {
    let mut out = Vec::new();
    for (i, d) in deps.iter().enumerate() {
        let dir = if prefix.is_empty() {
            index_dir(i)
        } else {
            format!("{prefix}/{}", index_dir(i))
        };
        out.push(TreeEntry::directory(dir.clone()));
        placed(&dir, &d.entries, &mut out);
    }
    out
}

/// The layout of a task's view: the harness's snapshot root.
pub fn task_layout(tree: &[TreeEntry], deps: &[Dependency]) -> Vec<TreeEntry> {
    let mut out = vec![TreeEntry::directory(DEPENDENCIES_DIR)];
    out.extend(dependencies_layout(DEPENDENCIES_DIR, deps));
    out.push(TreeEntry::directory(SANDBOX_COPY_DIR));
    placed(SANDBOX_COPY_DIR, tree, &mut out);
    out
}

/// A CE snapshot's files as tree entries (executable ones at 0755), for
/// a writable copy; their directories are made as parents.
pub fn ce_layout(entries: &[Entry]) -> Vec<TreeEntry> {
    entries
        .iter()
        .map(|e| TreeEntry {
            path: e.path.clone(),
            node: Node::File {
                size: e.size,
                sha256: e.sha256,
                mode: if e.executable { 0o755 } else { 0o644 },
            },
        })
        .collect()
}

/// A recorded tree-kind manifest, once it passes the store's checks
/// (the harness's bounds and the shape of its lists): what a view of it
/// may hold.
pub fn stored_to_hand_out(store: &Store, digest: &ManifestDigest) -> Result<Stored> {
    let manifest = store.read_manifest(digest)?;
    let Some(stored) = manifest.tree else {
        return Err(Damage::SnapshotBreaksRule {
            digest: *digest,
            rule: "its manifest changed kind since its first bytes were read".into(),
        }
        .into());
    };
    let present = |d: &ManifestDigest| store.catalogue().kind_of(d);
    check(&stored, &present).map_err(|e| Damage::SnapshotBreaksRule {
        digest: *digest,
        rule: e.to_string(),
    })?;
    Ok(stored)
}

/// The layout of a tree-kind snapshot's view; `None` for a CE snapshot.
pub fn tree_layout(store: &Store, digest: &ManifestDigest) -> Result<Option<Vec<TreeEntry>>> {
    if kind_of(store, digest) == Kind::Ce {
        return Ok(None);
    }
    Ok(Some(match stored_to_hand_out(store, digest)? {
        Stored::Tree(entries) => entries,
        Stored::Dependencies(deps) => dependencies_layout("", &deps),
        Stored::Task(record) => {
            let [tree, deps] = record.named();
            let tree = match stored_to_hand_out(store, &tree)? {
                Stored::Tree(entries) => entries,
                other => return Err(wrong_kind(&tree, "tree", other.profile())),
            };
            let deps = match stored_to_hand_out(store, &deps)? {
                Stored::Dependencies(deps) => deps,
                other => return Err(wrong_kind(&deps, "dependencies", other.profile())),
            };
            task_layout(&tree, &deps)
        }
        // An environment holds no file: its members have views of their own.
        Stored::Environment(_) => {
            return Err(crate::error::Misuse::EnvironmentHasNoView { digest: *digest }.into())
        }
    }))
}

/// The layout of any snapshot's writable copy: a tree kind's view, or a
/// CE snapshot's files.
pub fn writable_layout(store: &Store, digest: &ManifestDigest) -> Result<Vec<TreeEntry>> {
    match tree_layout(store, digest)? {
        Some(layout) => Ok(layout),
        None => Ok(ce_layout(&store.entries_to_hand_out(digest)?)),
    }
}

fn wrong_kind(digest: &ManifestDigest, want: &str, found: &str) -> crate::error::Error {
    Damage::SnapshotBreaksRule {
        digest: *digest,
        rule: format!("a task names it as its {want} manifest, but it is a {found} manifest"),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_view_is_the_harness_s_snapshot_root() {
        let tree = vec![
            TreeEntry::directory("assets"),
            TreeEntry::file_of("assets/a.txt", b"a\n", 0),
        ];
        let deps = vec![
            Dependency {
                source: "node_modules".into(),
                target: "node_modules".into(),
                entries: vec![
                    TreeEntry::directory("payload"),
                    TreeEntry::symlink("payload/link", "x"),
                ],
            },
            Dependency {
                source: "run.sh".into(),
                target: "run.sh".into(),
                entries: vec![TreeEntry::file_of("payload", b"#!", 0o755)],
            },
        ];
        let paths: Vec<String> = task_layout(&tree, &deps)
            .into_iter()
            .map(|e| format!("{} {}", e.kind(), e.path))
            .collect();
        assert_eq!(
            paths,
            [
                "directory dependencies",
                "directory dependencies/00000",
                "directory dependencies/00000/payload",
                "symlink dependencies/00000/payload/link",
                "directory dependencies/00001",
                "file dependencies/00001/payload",
                "directory sandbox-copy",
                "directory sandbox-copy/assets",
                "file sandbox-copy/assets/a.txt",
            ]
        );
        // Nothing declared: both directories, empty.
        let empty: Vec<String> = task_layout(&[], &[]).into_iter().map(|e| e.path).collect();
        assert_eq!(empty, ["dependencies", "sandbox-copy"]);
    }

    #[test]
    fn a_dependency_list_s_view_holds_each_at_its_index() {
        let deps = vec![Dependency {
            source: "a".into(),
            target: "b".into(),
            entries: vec![TreeEntry::file_of("payload", b"x", 0o644)],
        }];
        let paths: Vec<String> = dependencies_layout("", &deps)
            .into_iter()
            .map(|e| e.path)
            .collect();
        assert_eq!(paths, ["00000", "00000/payload"]);
    }
}
