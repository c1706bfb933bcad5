//! Spare views: a discarded checkout kept for the next checkout of its snapshot.
//!
//! ```text
//! STORE/spare/
//! └── <64 hex>/              one directory per snapshot, at most MAX_SPARES entries
//!     └── <unique>/          a view `discard --spare` moved here whole, root 0755
//! ```
//!
//! A harness checks one snapshot out and discards it once per run. Both cost
//! a system call or more per file; a spare turns them into a few renames:
//!
//! - **`discard --spare`** of a recorded checkout moves its root here with one
//!   `rename` (when the snapshot has fewer than [`MAX_SPARES`] spares and the
//!   view is on the store's filesystem), instead of removing every file. It is
//!   asked for explicitly: a process that still has its working directory, an
//!   open file or a mount in the old view would see the next view, so it is
//!   for a caller that knows the view is done with (the Python drop-in does,
//!   once the `with` block of a sweep has ended);
//! - **checkout** claims a spare by renaming it into its own work directory
//!   under `tmp/`, checks it there against the snapshot, and only then moves
//!   it to the temporary name beside its destination: every directory holds
//!   exactly the manifest's names, is `0555` and belongs to this user; every
//!   file is the very inode of its object as the store holds it now (so its
//!   bytes are the object's, checked by size and mode as a build checks them),
//!   or an empty file as a build makes it: the right mode, one link, and this
//!   user and the root's group as its owner (another owner could make it
//!   writable and fill it once it is handed out). Every directory belongs to
//!   the root's group too. A spare that fails the check
//!   never leaves the store: it is removed with the work directory (or by gc,
//!   should that fail), and the view is built as usual.
//!
//! So a spare never hands out anything a fresh build would not: a file added,
//! removed or replaced in a view while it was in use, an object repaired
//! since, or a mode, owner, group or link count changed through a view, all
//! fail the check. `rm` removes
//! a snapshot's spares, and gc those of snapshots the catalogue no longer
//! records.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode};
use rustix::io::Errno;

use crate::digest::ManifestDigest;
use crate::digest::ObjectKey;
use crate::error::Result;
use crate::fsutil::{list_names, open_dir, remove_tree_at};
use crate::profile::ce::manifest::Entry;
use crate::store::core::objects::{judge, unique_suffix, ObjectState, WorkDir};
use crate::store::views::build::Built;
use crate::store::Store;

/// The spare views' parent inside the store.
pub const SPARE_DIR: &str = "spare";

/// How many spares one snapshot keeps: one per sweep staging it at once.
pub const MAX_SPARES: usize = 4;

/// Moves the view `name` under `parent` into the snapshot's spares, if there
/// is room and it is on the store's filesystem. Returns whether it was kept;
/// when not, the view is where it was, as it was.
pub fn keep(store: &Store, digest: &ManifestDigest, parent: BorrowedFd<'_>, name: &Path) -> bool {
    let hex = digest.to_string();
    let Ok(spares) = open_or_make(store.dir(), &hex) else {
        return false;
    };
    if list_names(spares.as_fd()).map_or(true, |names| names.len() >= MAX_SPARES) {
        return false;
    }
    let Ok(st) = rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return false;
    };
    // Moving a directory to another parent rewrites its `..`: it needs write
    // permission on the directory itself.
    if rustix::fs::chmodat(parent, name, Mode::from_raw_mode(0o755), AtFlags::empty()).is_err() {
        return false;
    }
    let kept = rustix::fs::renameat(parent, name, &spares, unique_suffix().as_str()).is_ok();
    if !kept {
        let mode = Mode::from_raw_mode(st.st_mode & 0o7777);
        let _ = rustix::fs::chmodat(parent, name, mode, AtFlags::empty());
    }
    kept
}

/// Removes every spare of a snapshot (when `rm` forgets it).
pub fn forget(store: &Store, digest: &ManifestDigest) {
    if let Ok(spares) = open_dir(store.dir(), SPARE_DIR) {
        let _ = remove_tree_at(spares.as_fd(), digest.to_string());
    }
}

fn open_or_make(store_dir: BorrowedFd<'_>, hex: &str) -> Result<std::os::fd::OwnedFd, Errno> {
    let root = match open_dir(store_dir, SPARE_DIR) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => {
            match rustix::fs::mkdirat(store_dir, SPARE_DIR, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(e),
            }
            open_dir(store_dir, SPARE_DIR)?
        }
        Err(e) => return Err(e),
    };
    match rustix::fs::mkdirat(&root, hex, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e),
    }
    open_dir(root.as_fd(), hex)
}

/// The name a claimed spare has inside the checkout's work directory.
const CLAIMED: &str = "spare";

/// Takes a spare of the snapshot as the new directory `tmp` under `parent`,
/// checked against `entries` and frozen. Returns what a build would have
/// reported, or `None` when no sound spare was at hand (and nothing is at
/// `tmp`). A spare is checked inside `work`, so one that fails never shows
/// outside the store.
pub fn take(
    store: &Store,
    work: &WorkDir,
    digest: &ManifestDigest,
    entries: &[Entry],
    parent: BorrowedFd<'_>,
    tmp: &str,
) -> Option<Built> {
    if !crate::store::views::build::same_device(store.objects(), parent).ok()? {
        return None;
    }
    let (built, _) = claim_into(store.dir(), store.objects(), work, digest, entries)?;
    place(store.dir(), work, digest, parent, tmp).then_some(built)
}

/// A spare claimed and checked before its checkout, while the release that
/// names its snapshot is still being walked: it waits, inside its work
/// directory, for [`Claimed::place`] or [`Claimed::give_back`].
pub struct Claimed {
    work: WorkDir,
    digest: ManifestDigest,
    built: Built,
    linked: Vec<Linked>,
}

impl Claimed {
    /// Claims a spare of `digest` into `work` and checks it against the
    /// snapshot's manifest file, for a checkout under `parent`.
    pub fn claim(
        store_dir: BorrowedFd<'_>,
        objects: BorrowedFd<'_>,
        manifest: &Path,
        work: WorkDir,
        digest: ManifestDigest,
        parent: BorrowedFd<'_>,
    ) -> Option<Claimed> {
        if !crate::store::views::build::same_device(objects, parent).ok()? {
            return None;
        }
        let entries = crate::store::core::manifests::read_manifest_file(manifest, &digest)
            .ok()?
            .entries;
        let (built, linked) = claim_into(store_dir, objects, &work, &digest, &entries)?;
        Some(Claimed {
            work,
            digest,
            built,
            linked,
        })
    }

    /// The snapshot the spare is a view of.
    pub fn digest(&self) -> ManifestDigest {
        self.digest
    }

    /// Whether every object the spare links is still the intact inode the
    /// check found: an object repaired or damaged since makes it stale.
    pub fn still_sound(&self, objects: BorrowedFd<'_>) -> bool {
        self.linked.iter().all(|l| l.unchanged(objects))
    }

    /// Moves the spare to `tmp` under `parent`, frozen, and returns its work
    /// directory (which names `tmp` for gc) and what a build would have
    /// reported; `None` when it could not be placed (it went back to the
    /// spares, or away with the work directory).
    pub fn place(
        self,
        store_dir: BorrowedFd<'_>,
        tmp_path: &Path,
        parent: BorrowedFd<'_>,
        tmp: &str,
    ) -> Result<(WorkDir, Option<Built>)> {
        if let Err(e) = self.work.mark_target(tmp_path) {
            self.give_back(store_dir);
            return Err(e);
        }
        let placed = place(store_dir, &self.work, &self.digest, parent, tmp);
        Ok((self.work, placed.then_some(self.built)))
    }

    /// Puts the spare back among its snapshot's spares, for a checkout that
    /// will not use it (it goes with its work directory when they are full).
    pub fn give_back(self, store_dir: BorrowedFd<'_>) {
        give_back(store_dir, &self.work, &self.digest);
    }
}

/// Moves the spare claimed in `work` back among the snapshot's spares, when
/// there is room; otherwise it stays, to go with the work directory.
fn give_back(store_dir: BorrowedFd<'_>, work: &WorkDir, digest: &ManifestDigest) {
    if let Ok(spares) = open_or_make(store_dir, &digest.to_string()) {
        if list_names(spares.as_fd()).is_ok_and(|names| names.len() < MAX_SPARES) {
            let _ = rustix::fs::renameat(work.fd(), CLAIMED, &spares, unique_suffix().as_str());
        }
    }
}

/// Claims a spare of the snapshot into `work` and checks it; `None` when no
/// sound spare was at hand (the ones that failed are removed).
fn claim_into(
    store_dir: BorrowedFd<'_>,
    objects: BorrowedFd<'_>,
    work: &WorkDir,
    digest: &ManifestDigest,
    entries: &[Entry],
) -> Option<(Built, Vec<Linked>)> {
    let spares = open_dir(store_dir, format!("{SPARE_DIR}/{digest}").as_str()).ok()?;
    for name in list_names(spares.as_fd()).ok()? {
        match rustix::fs::renameat(&spares, name.as_slice(), work.fd(), CLAIMED) {
            Ok(()) => {}
            // Another checkout took it first.
            Err(Errno::NOENT) => continue,
            // One that cannot be moved serves no checkout: drop it.
            Err(_) => {
                let _ = remove_tree_at(spares.as_fd(), std::ffi::OsStr::from_bytes(&name));
                continue;
            }
        }
        match check(objects, entries, work.fd(), CLAIMED) {
            Some(checked) => return Some(checked),
            None => {
                let _ = remove_tree_at(work.fd(), CLAIMED);
            }
        }
    }
    None
}

/// Moves the spare claimed in `work` to `tmp` under `parent` and freezes
/// it. Returns whether it is there; when not, nothing is at `tmp`.
fn place(
    store_dir: BorrowedFd<'_>,
    work: &WorkDir,
    digest: &ManifestDigest,
    parent: BorrowedFd<'_>,
    tmp: &str,
) -> bool {
    if rustix::fs::renameat(work.fd(), CLAIMED, parent, tmp).is_err() {
        // Another mount of the same filesystem (EXDEV): keep it for another checkout.
        give_back(store_dir, work, digest);
        let _ = remove_tree_at(work.fd(), CLAIMED);
        return false;
    }
    let frozen = rustix::fs::chmodat(parent, tmp, Mode::from_raw_mode(0o555), AtFlags::empty());
    if frozen.is_err() {
        let _ = remove_tree_at(parent, tmp);
        return false;
    }
    true
}

/// What a sound spare must hold: each directory's names, as the manifest
/// gives them.
fn expected_tree(entries: &[Entry]) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut dirs: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    dirs.insert("", BTreeSet::new());
    for e in entries {
        let mut child = e.path.as_str();
        while let Some(i) = child.rfind('/') {
            let (dir, name) = (&child[..i], &child[i + 1..]);
            let names = dirs.entry(dir).or_default();
            let fresh = names.is_empty();
            names.insert(name);
            if !fresh {
                break;
            }
            child = dir;
        }
        if !child.contains('/') {
            dirs.entry("").or_default().insert(child);
        }
    }
    dirs
}

/// Checks a spare at `name` under `dir` against the snapshot; see the
/// module's documentation for what it must be. (On one thread: checking on
/// two measured slower, the directories' locks being shared.)
fn check(
    objects: BorrowedFd<'_>,
    entries: &[Entry],
    dir: BorrowedFd<'_>,
    name: &str,
) -> Option<(Built, Vec<Linked>)> {
    let root = open_dir(dir, name).ok()?;
    let root = root.as_fd();
    let made = Made {
        uid: rustix::process::geteuid().as_raw(),
        gid: rustix::fs::fstat(root).ok()?.st_gid,
        dev: rustix::fs::fstat(objects).ok()?.st_dev,
    };
    let tree = expected_tree(entries);
    if !tree
        .iter()
        .all(|(dir, names)| sound_dir(root, dir, names, &made))
    {
        return None;
    }
    let mut objects_linked = Vec::with_capacity(entries.len());
    for e in entries {
        objects_linked.extend(sound_file(root, objects, e, &made)?);
    }
    let linked = objects_linked.len() as u64;
    let mut built = Built {
        linked,
        copied: entries.len() as u64 - linked,
        directories: tree.len() as u64,
        spare: true,
        ..Built::default()
    };
    if built.copied > 0 {
        built.copy_reasons.insert("empty file".into(), built.copied);
    }
    Some((built, objects_linked))
}

/// What a build by this process gives every directory and empty file of a
/// view: its owner, its group, and (for directories) its filesystem.
struct Made {
    /// This user: no other can change the mode of what it owns, and so
    /// none can make a file or directory of the view writable.
    uid: u32,
    /// The group of the view's root, which a build gives everything it
    /// creates below it (this process's, or that of a setgid parent).
    gid: u32,
    /// The filesystem of the objects.
    dev: u64,
}

impl Made {
    /// Whether `st` belongs to the user and group a build gives.
    fn owns(&self, st: &rustix::fs::Stat) -> bool {
        st.st_uid == self.uid && st.st_gid == self.gid
    }
}

/// Whether a spare's directory (`""` for its root) holds exactly `names`,
/// belongs to this user and the root's group, and has the mode a view's
/// has (the root `0755` while it is a spare).
fn sound_dir(root: BorrowedFd<'_>, dir: &str, names: &BTreeSet<&str>, made: &Made) -> bool {
    let fd = if dir.is_empty() {
        rustix::io::dup(root)
    } else {
        open_dir(root, dir)
    };
    let Ok(fd) = fd else { return false };
    let Ok(st) = rustix::fs::fstat(&fd) else {
        return false;
    };
    let want = if dir.is_empty() { 0o755 } else { 0o555 };
    if st.st_mode & 0o7777 != want || st.st_dev != made.dev || !made.owns(&st) {
        return false;
    }
    list_names(fd.as_fd()).is_ok_and(|found| {
        found.len() == names.len()
            && found
                .iter()
                .all(|n| std::str::from_utf8(n).is_ok_and(|n| names.contains(n)))
    })
}

/// An object a checked spare links, as the check found it.
struct Linked {
    key: ObjectKey,
    size: u64,
    id: (u64, u64),
}

impl Linked {
    /// Whether the object is still the intact inode the check found.
    fn unchanged(&self, objects: BorrowedFd<'_>) -> bool {
        object_is(objects, &self.key, self.size, self.id)
    }
}

/// Whether the object of `key` is intact, `size` bytes long, and the file
/// `id` (device and inode).
fn object_is(objects: BorrowedFd<'_>, key: &ObjectKey, size: u64, id: (u64, u64)) -> bool {
    rustix::fs::statat(objects, key.rel_path().as_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok_and(
        |object| {
            matches!(judge(&object, key, size), ObjectState::Intact)
                && (object.st_dev, object.st_ino) == id
        },
    )
}

/// Whether a spare's file is the very inode of its intact object (then
/// `Some(Some(that object))`), or an empty file as a build makes it
/// (`Some(None)`): its one link, owned by this user and the root's group,
/// so that no one else can make it writable and fill it; either with the
/// mode a view's has. `None` when it is neither.
fn sound_file(
    root: BorrowedFd<'_>,
    objects: BorrowedFd<'_>,
    e: &Entry,
    made: &Made,
) -> Option<Option<Linked>> {
    let key = e.key();
    let st = rustix::fs::statat(root, e.path.as_str(), AtFlags::SYMLINK_NOFOLLOW).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
        || st.st_mode & 0o7777 != key.mode()
        || st.st_size as u64 != e.size
    {
        return None;
    }
    if e.size == 0 {
        return (st.st_nlink == 1 && made.owns(&st)).then_some(None);
    }
    let id = (st.st_dev, st.st_ino);
    object_is(objects, &key, e.size, id).then_some(Some(Linked {
        key,
        size: e.size,
        id,
    }))
}

/// The snapshots that have spares, by the names of their directories.
pub fn listed(store: &Store) -> Vec<String> {
    match open_dir(store.dir(), SPARE_DIR) {
        Ok(fd) => list_names(fd.as_fd())
            .unwrap_or_default()
            .into_iter()
            .map(|n| String::from_utf8_lossy(&n).into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The path of a snapshot's spares directory, by its name under `spare/`.
pub fn path(store: &Store, name: &str) -> std::path::PathBuf {
    store.root().join(SPARE_DIR).join(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::ObjectId;
    use crate::profile::ce::fixtures::{MANIFEST_DIR, MANIFEST_FILE, MANIFEST_NAME};

    fn entry(path: &str) -> Entry {
        Entry {
            executable: false,
            path: path.into(),
            sha256: ObjectId::of(path.as_bytes()),
            size: 1,
        }
    }

    #[test]
    fn a_claimed_spare_is_stale_once_an_object_it_links_is_replaced() {
        use crate::store::ingest::{ingest_into, IngestOptions};
        use crate::store::views::{checkout_into, discard_view, Destination, DiscardOptions};
        use std::os::unix::fs::PermissionsExt;

        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        crate::store::testutil::release(&src);
        let mut store = crate::store::testutil::open(tmp.path());
        let source = crate::source::Source::open(&src).unwrap();
        let opts = IngestOptions {
            source: &src,
            git: None,
            version: "1.2.3",
            bounds: crate::profile::ce::rules::Bounds::REFERENCE,
            sign_with: None,
            refuse_secrets: false,
        };
        let digest = ingest_into(&mut store, &source, &opts)
            .unwrap()
            .provenance
            .manifest_digest;
        let view = tmp.path().join("view");
        let dest = Destination::check(&store, &view).unwrap();
        checkout_into(
            &mut store,
            digest,
            &dest,
            crate::store::views::build::Method::Auto,
        )
        .unwrap();
        let discard = DiscardOptions {
            dest: &view,
            force_digest: None,
            spare: true,
        };
        assert!(discard_view(&mut store, &discard).unwrap().spare);

        let parent = open_dir(rustix::fs::CWD, tmp.path()).unwrap();
        let claim = |store: &Store| {
            Claimed::claim(
                store.dir(),
                store.objects(),
                &store.manifest_path(&digest),
                store.work_dir("checkout").unwrap(),
                digest,
                parent.as_fd(),
            )
        };
        let claimed = claim(&store).expect("the spare is claimed");
        assert!(claimed.still_sound(store.objects()));
        // A repair puts the same bytes at the object's path, as a new inode.
        let entry = store.catalogue().files(&digest).unwrap();
        let entry = entry.iter().find(|e| e.path == "assets/big.bin").unwrap();
        let object = store.object_path(&entry.key());
        let shard = object.parent().unwrap();
        std::fs::set_permissions(shard, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_file(&object).unwrap();
        std::fs::write(&object, [b'x'; 100]).unwrap();
        std::fs::set_permissions(&object, std::fs::Permissions::from_mode(0o444)).unwrap();
        assert!(
            !claimed.still_sound(store.objects()),
            "stale after the repair"
        );
        // Given back, it fails the next claim's check and is dropped.
        claimed.give_back(store.dir());
        assert!(claim(&store).is_none());
        assert!(listed(&store)
            .iter()
            .all(|d| { std::fs::read_dir(path(&store, d)).unwrap().next().is_none() }));
    }

    #[test]
    fn expected_tree_lists_every_directory_with_its_names() {
        let entries: Vec<Entry> = [
            MANIFEST_FILE,
            "skills/a/SKILL.md",
            "skills/a/x/y.md",
            "skills/b/SKILL.md",
            "top.md",
        ]
        .into_iter()
        .map(entry)
        .collect();
        let tree = expected_tree(&entries);
        let show: Vec<(String, Vec<&str>)> = tree
            .iter()
            .map(|(d, n)| (d.to_string(), n.iter().copied().collect()))
            .collect();
        assert_eq!(
            show,
            vec![
                ("".into(), vec![".claude-plugin", "skills", "top.md"]),
                (MANIFEST_DIR.into(), vec![MANIFEST_NAME]),
                ("skills".into(), vec!["a", "b"]),
                ("skills/a".into(), vec!["SKILL.md", "x"]),
                ("skills/a/x".into(), vec!["y.md"]),
                ("skills/b".into(), vec!["SKILL.md"]),
            ]
        );
    }
}
