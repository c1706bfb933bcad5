//! Objects: naming, staging in a work directory, and publishing without overwrite.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::digest::{ManifestDigest, ObjectKey};
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{publish_noreplace, Published};
pub use crate::store::unique_suffix;
use crate::store::{create_shards, Store, OBJECTS_DIR, TMP_DIR};

/// What is at an object's path.
#[derive(Debug, PartialEq, Eq)]
pub enum ObjectState {
    /// Nothing.
    Missing,
    /// A regular file with the expected size and mode.
    Intact,
    /// Something else: a wrong size, a wrong mode, or not a regular file.
    Damaged(String),
}

/// Checks cheaply (one `fstatat`) that an object has the expected size and mode.
pub fn check_object(store: &Store, key: &ObjectKey, size: u64) -> Result<ObjectState> {
    match rustix::fs::statat(
        store.objects(),
        key.rel_path().as_str(),
        AtFlags::SYMLINK_NOFOLLOW,
    ) {
        Ok(st) => Ok(judge(&st, key, size)),
        Err(Errno::NOENT) => Ok(ObjectState::Missing),
        Err(e) => Err(Error::io("examine an object", store.object_path(key), e)),
    }
}

/// Whether an object is a regular file of `size` bytes whose bytes hash to
/// its name, whatever its mode: a drifted mode can then be set back.
pub fn holds_its_bytes(
    objects: BorrowedFd<'_>,
    path: &Path,
    key: &ObjectKey,
    size: u64,
) -> Result<bool> {
    let fd = match rustix::fs::openat(
        objects,
        key.rel_path().as_str(),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT | Errno::LOOP | Errno::ACCESS | Errno::NXIO) => return Ok(false),
        Err(e) => return Err(Error::io("open an object", path, e)),
    };
    let st = rustix::fs::fstat(&fd).ctx("examine an object", path)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_size as u64 != size {
        return Ok(false);
    }
    let (id, read) =
        crate::digest::ObjectId::of_reader(std::fs::File::from(fd)).ctx("read an object", path)?;
    Ok(read == size && id == key.id)
}

/// Sets an object back to the mode its key gives it.
pub fn restore_mode(objects: BorrowedFd<'_>, path: &Path, key: &ObjectKey) -> Result<()> {
    rustix::fs::chmodat(
        objects,
        key.rel_path().as_str(),
        Mode::from_raw_mode(key.mode()),
        AtFlags::empty(),
    )
    .ctx("restore an object's mode", path)
}

/// Compares an object's `stat` with what the catalogue says it must be.
pub fn judge(st: &Stat, key: &ObjectKey, size: u64) -> ObjectState {
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return ObjectState::Damaged("is not a regular file".into());
    }
    let mode = st.st_mode & 0o7777;
    if mode != key.mode() {
        return ObjectState::Damaged(format!("has mode {mode:04o}, not {:04o}", key.mode()));
    }
    if st.st_size as u64 != size {
        return ObjectState::Damaged(format!("has {} bytes, not {size}", st.st_size));
    }
    ObjectState::Intact
}

/// A directory under `tmp/` where one operation stages its files, locked
/// exclusively while the operation lives and removed when it ends (or left,
/// unlocked, for a later operation to take over: [`WorkDir::leave`]).
pub struct WorkDir {
    path: PathBuf,
    name: String,
    fd: OwnedFd,
    tmp: OwnedFd,
    /// Whether dropping it removes it: false once [`WorkDir::leave`] ran.
    remove: bool,
    /// Syncs the filesystem ahead as objects are staged and published, once
    /// [`WorkDir::flush_ahead`] set it.
    flusher: Option<crate::fsutil::Flusher>,
}

impl Store {
    /// Creates a work directory under `tmp/` for one operation.
    pub fn work_dir(&self, op: &str) -> Result<WorkDir> {
        WorkDir::create(self, op)
    }
}

/// The file in a work directory that lists the objects it is publishing.
pub const PUBLISHING_LIST: &str = "publishing";
/// The line of a publishing list that names the manifest being published.
const MANIFEST_LINE: &str = "manifest ";
/// The file in a work directory that names the temporary view it is building.
pub const TARGET_MARKER: &str = "target";
/// The most work directories of dead operations one operation takes over.
pub const MAX_TAKEN_OVER: usize = 32;

impl WorkDir {
    /// Creates a new locked work directory for the operation `op`. It is
    /// made and locked under a hidden name (`.op-…`), then renamed into
    /// place, so that no other process ever sees it under its name unlocked
    /// and takes it for one a dead operation left
    /// ([`WorkDir::take_over_stale`]).
    pub(super) fn create(store: &Store, op: &str) -> Result<WorkDir> {
        let tmp_path = store.root().join(TMP_DIR);
        let tmp = crate::fsutil::open_dir(store.dir(), TMP_DIR)
            .ctx("open the store's tmp directory", &tmp_path)?;
        let name = format!("{op}-{}", unique_suffix());
        let hidden = format!(".{name}");
        let path = tmp_path.join(&name);
        match rustix::fs::mkdirat(&tmp, hidden.as_str(), Mode::from_raw_mode(0o700)) {
            Ok(()) => {}
            // Every change goes through a work directory: a store that
            // refuses one is a store this user cannot write.
            Err(e @ (Errno::ACCESS | Errno::PERM | Errno::ROFS)) => {
                return Err(Error::StoreNotWritable {
                    path: store.root().to_path_buf(),
                    source: e.into(),
                })
            }
            Err(e) => return Err(Error::io("create a work directory", &path, e)),
        }
        let locked = crate::fsutil::open_dir(tmp.as_fd(), hidden.as_str())
            .ctx("open a work directory", &path)
            .and_then(|fd| {
                rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive)
                    .ctx("lock a work directory", &path)?;
                rustix::fs::renameat(&tmp, hidden.as_str(), &tmp, name.as_str())
                    .ctx("name a work directory", &path)?;
                Ok(fd)
            });
        let fd = match locked {
            Ok(fd) => fd,
            Err(e) => {
                let _ = rustix::fs::unlinkat(&tmp, hidden.as_str(), AtFlags::REMOVEDIR);
                return Err(e);
            }
        };
        Ok(WorkDir {
            path,
            name,
            fd,
            tmp,
            remove: true,
            flusher: None,
        })
    }

    /// Syncs the store's filesystem in the background every `step` bytes
    /// staged ([`WorkDir::staged`]) and while the staged objects are
    /// published ([`crate::fsutil::Flusher`]): for an operation that stages
    /// many bytes. Without a flusher (a handle that cannot be duplicated)
    /// the one `syncfs` does all the work, as it does for small operations.
    pub fn flush_ahead(&mut self, step: u64) {
        self.flusher = crate::fsutil::Flusher::new(self.fd.as_fd(), step).ok();
    }

    /// Tells the flusher, if there is one, that `bytes` more were staged.
    pub fn staged(&self, bytes: u64) {
        if let Some(f) = &self.flusher {
            f.wrote(bytes);
        }
    }

    /// Locks every work directory of the operation `op` (named `op-…`)
    /// whose operation died, leaving those another operation holds or has
    /// taken over, and those that name objects being published or a view
    /// being built (`gc` and `recover` read those): what each staged is
    /// this one's to reuse, file by file ([`WorkDir::take_from`]). At most
    /// [`MAX_TAKEN_OVER`], the oldest first; none when `tmp/` cannot be
    /// listed.
    pub fn take_over_stale(&self, op: &str) -> Vec<StaleWorkDir> {
        let prefix = format!("{op}-");
        let Ok(names) = crate::fsutil::list_names(self.tmp.as_fd()) else {
            return Vec::new();
        };
        let mut names: Vec<String> = names
            .into_iter()
            .filter_map(|n| String::from_utf8(n).ok())
            .filter(|n| n.starts_with(&prefix) && *n != self.name)
            .collect();
        names.sort();
        names
            .into_iter()
            .filter_map(|name| {
                let fd = crate::fsutil::open_dir(self.tmp.as_fd(), name.as_str()).ok()?;
                rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).ok()?;
                let held: std::collections::HashSet<String> = crate::fsutil::list_names(fd.as_fd())
                    .ok()?
                    .into_iter()
                    .filter_map(|n| String::from_utf8(n).ok())
                    .collect();
                if held.contains(PUBLISHING_LIST) || held.contains(TARGET_MARKER) {
                    return None;
                }
                let tmp = self.tmp.try_clone().ok()?;
                Some(StaleWorkDir {
                    fd,
                    tmp,
                    name,
                    held,
                })
            })
            .take(MAX_TAKEN_OVER)
            .collect()
    }

    /// Moves the file `name` of a stale work directory into this one,
    /// under the same name; tells whether it did.
    pub fn take_from(&self, stale: &StaleWorkDir, name: &str) -> bool {
        stale.held.contains(name)
            && rustix::fs::renameat_with(
                &stale.fd,
                name,
                &self.fd,
                name,
                rustix::fs::RenameFlags::NOREPLACE,
            )
            .is_ok()
    }

    /// Leaves the work directory under `tmp/` with what it staged, unlocked:
    /// for a transfer that failed, whose checked objects the next one takes
    /// over ([`WorkDir::take_over_stale`]); `gc` removes it otherwise, as
    /// any stale work directory.
    pub fn leave(mut self) {
        self.remove = false;
    }

    /// The work directory's absolute path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The work directory's handle.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Writes `data` to a new file in the work directory at the object's mode,
    /// and returns the file's name there.
    pub fn stage(&mut self, key: &ObjectKey, data: &[u8]) -> Result<String> {
        stage_at(self.fd.as_fd(), &self.path, "", key, data)
    }

    /// A subdirectory `s<i>` where one thread stages objects; staging on
    /// several threads into several directories spreads the filesystem's
    /// work over the cores.
    pub fn stager(&self, i: usize) -> Result<Stager> {
        let sub = format!("s{i}");
        let path = self.path.join(&sub);
        rustix::fs::mkdirat(&self.fd, sub.as_str(), Mode::from_raw_mode(0o700))
            .ctx("create a staging directory", &path)?;
        let fd = crate::fsutil::open_dir(self.fd.as_fd(), sub.as_str())
            .ctx("open a staging directory", &path)?;
        Ok(Stager {
            fd,
            prefix: format!("{sub}/"),
            path,
        })
    }

    /// Records, before they are published, the objects this operation is
    /// about to move into `objects/`: until its catalogue commit they are
    /// live only through this list, which `verify` and `gc --dry-run` read.
    pub fn note_publishing<'k>(
        &self,
        keys: impl Iterator<Item = &'k ObjectKey>,
        manifest: &ManifestDigest,
    ) -> Result<()> {
        let mut list = format!("{MANIFEST_LINE}{manifest}\n");
        for k in keys {
            list.push_str(&k.rel_path());
            list.push('\n');
        }
        std::fs::write(self.path.join(PUBLISHING_LIST), list)
            .ctx("write the list of objects in flight", &self.path)
    }

    /// Records the temporary view this operation builds (outside the work
    /// directory), so that gc can remove it if the operation dies.
    pub fn mark_target(&self, view: &Path) -> Result<()> {
        std::fs::write(
            self.path.join(TARGET_MARKER),
            view.as_os_str().as_encoded_bytes(),
        )
        .ctx("write a view marker", &self.path)
    }

    /// Moves a staged file over an object whose bytes changed: the store's
    /// path then holds the right bytes again (views keep the old inode).
    pub fn replace(&self, store: &Store, staged: &str, key: &ObjectKey) -> Result<()> {
        rustix::fs::renameat(&self.fd, staged, store.objects(), key.rel_path().as_str())
            .ctx("replace a damaged object", store.object_path(key))
    }

    /// Moves a staged file into `objects/` without overwriting. Returns
    /// `false` when the object was already stored (the staged copy is dropped).
    pub fn publish(&self, store: &Store, staged: &str, key: &ObjectKey) -> Result<bool> {
        self.publish_to(&Destination::of(store), staged, key)
    }

    /// Publishes every staged file of `staged` as [`WorkDir::publish`] does
    /// one, on up to `threads` threads: each is one rename of its own, and
    /// a large tree has thousands. Returns how many were new to the store
    /// (the others were stored already, their staged copies dropped). After
    /// the first failure no further one is started, and the failure of the
    /// first in list order among those tried is returned.
    pub fn publish_all(
        &self,
        store: &Store,
        staged: &[(String, ObjectKey)],
        threads: usize,
    ) -> Result<u64> {
        let to = Destination::of(store);
        // The renames change only directories: the staged bytes are synced
        // beside them, before the `syncfs` that follows the last one.
        if let Some(f) = &self.flusher {
            f.start();
        }
        if staged.len() < PUBLISH_SHARED_FROM || threads <= 1 {
            let mut created = 0;
            for (name, key) in staged {
                created += u64::from(self.publish_to(&to, name, key)?);
            }
            return Ok(created);
        }
        let created = crate::pool::map(
            staged,
            threads,
            || (),
            |(), (name, key)| self.publish_to(&to, name, key),
        )?;
        Ok(created.into_iter().filter(|c| *c).count() as u64)
    }

    fn publish_to(&self, to: &Destination<'_>, staged: &str, key: &ObjectKey) -> Result<bool> {
        let dest = key.rel_path();
        let publish = || publish_noreplace(self.fd.as_fd(), staged, to.objects, dest.as_str());
        let result = match publish() {
            Err(Errno::NOENT) => {
                // A shard directory removed by hand: recreate it and retry once.
                create_shards(to.dir, to.root)?;
                publish()
            }
            other => other,
        };
        match result {
            Ok(Published::Created) => Ok(true),
            Ok(Published::Existed) => {
                let _ = rustix::fs::unlinkat(&self.fd, staged, AtFlags::empty());
                Ok(false)
            }
            Err(e) => Err(Error::io(
                "publish an object",
                to.root.join(OBJECTS_DIR).join(&dest),
                e,
            )),
        }
    }
}

/// Below this many objects, [`WorkDir::publish_all`] publishes on one
/// thread: starting others would cost more than it saves.
const PUBLISH_SHARED_FROM: usize = 256;

/// What publishing needs of a store, shareable among threads (the store's
/// handle, which holds the catalogue, is not).
struct Destination<'s> {
    dir: BorrowedFd<'s>,
    objects: BorrowedFd<'s>,
    root: &'s Path,
}

impl<'s> Destination<'s> {
    fn of(store: &'s Store) -> Destination<'s> {
        Destination {
            dir: store.dir(),
            objects: store.objects(),
            root: store.root(),
        }
    }
}

/// A work directory found under `tmp/`, and whether its operation still runs.
pub struct FoundWorkDir {
    /// Its name under `tmp/`.
    pub name: String,
    /// Whether its exclusive flock is still held (its operation is alive).
    pub live: bool,
    path: PathBuf,
}

impl FoundWorkDir {
    /// The temporary view its operation was building, if it names one.
    pub fn target(&self) -> Option<PathBuf> {
        let bytes = std::fs::read(self.path.join(TARGET_MARKER)).ok()?;
        Some(PathBuf::from(String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// The manifest its operation listed before publishing it.
    pub fn publishing_manifest(&self) -> Option<ManifestDigest> {
        let list = std::fs::read_to_string(self.path.join(PUBLISHING_LIST)).ok()?;
        list.lines()
            .find_map(|l| l.strip_prefix(MANIFEST_LINE)?.parse().ok())
    }

    /// The objects its operation listed before publishing them.
    pub fn publishing(&self) -> Vec<ObjectKey> {
        let Ok(list) = std::fs::read_to_string(self.path.join(PUBLISHING_LIST)) else {
            return Vec::new();
        };
        list.lines()
            .filter_map(|l| {
                let (shard, file) = l.split_once('/')?;
                ObjectKey::from_parts(shard, file)
            })
            .collect()
    }
}

/// Every work directory under `tmp/`, sorted by name, each with whether its
/// operation is alive: a live operation holds its directory's flock.
pub fn work_dirs(store: &Store) -> Result<Vec<FoundWorkDir>> {
    let tmp_path = store.root().join(TMP_DIR);
    let tmp =
        crate::fsutil::open_dir(store.dir(), TMP_DIR).ctx("open the tmp directory", &tmp_path)?;
    let mut names =
        crate::fsutil::list_names(tmp.as_fd()).ctx("list the tmp directory", &tmp_path)?;
    names.sort();
    Ok(names
        .into_iter()
        .map(|name| {
            let live = crate::fsutil::open_dir(tmp.as_fd(), name.as_slice()).is_ok_and(|fd| {
                rustix::fs::flock(&fd, FlockOperation::NonBlockingLockShared).is_err()
            });
            let name = String::from_utf8_lossy(&name).into_owned();
            FoundWorkDir {
                path: tmp_path.join(&name),
                name,
                live,
            }
        })
        .collect())
}

/// A staging subdirectory of a work directory, for one thread.
pub struct Stager {
    fd: OwnedFd,
    prefix: String,
    path: PathBuf,
}

impl Stager {
    /// Writes `data` to a new file at the object's mode; returns its name
    /// relative to the work directory, for [`WorkDir::publish`].
    pub fn stage(&self, key: &ObjectKey, data: &[u8]) -> Result<String> {
        stage_at(self.fd.as_fd(), &self.path, &self.prefix, key, data)
    }
}

/// Writes one staged object into `dir` and returns `prefix` + its name.
fn stage_at(
    dir: BorrowedFd<'_>,
    dir_path: &Path,
    prefix: &str,
    key: &ObjectKey,
    data: &[u8],
) -> Result<String> {
    let name = key.name();
    let fd = rustix::fs::openat(
        dir,
        name.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o400),
    )
    .map_err(|e| Error::io("create a staged object", dir_path.join(&name), e))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(data)
        .map_err(|e| Error::io("write a staged object", dir_path.join(&name), e))?;
    set_staged_mode(&file, key, &dir_path.join(&name))?;
    Ok(format!("{prefix}{name}"))
}

/// Sets a staged object's file, at `path`, to the object's mode, whatever
/// the umask it was created under.
pub fn set_staged_mode(file: &std::fs::File, key: &ObjectKey, path: &Path) -> Result<()> {
    rustix::fs::fchmod(file, Mode::from_raw_mode(key.mode()))
        .map_err(|e| Error::io("set a staged object's mode", path, e))
}

impl WorkDir {
    /// Leaves the work directory, and the marker in it, for gc: for an
    /// operation that could not remove what the marker names.
    pub fn abandon(mut self) {
        // Its flusher, if any, ends here: only the directory is left.
        drop(self.flusher.take());
        std::mem::forget(self);
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = crate::fsutil::remove_tree_at(self.tmp.as_fd(), &self.name);
        }
    }
}

/// The work directory of an operation that died, locked by a live one that
/// takes over what it staged ([`WorkDir::take_over_stale`]); unlocked when
/// dropped.
pub struct StaleWorkDir {
    fd: OwnedFd,
    tmp: OwnedFd,
    name: String,
    /// The names it held when it was taken over.
    held: std::collections::HashSet<String>,
}

impl StaleWorkDir {
    /// Removes it once nothing in it is an object another transfer could
    /// take (what remains is its own bookkeeping); else leaves it, unlocked.
    pub fn remove_if_spent(self) {
        let spent = crate::fsutil::list_names(self.fd.as_fd()).is_ok_and(|names| {
            !names
                .iter()
                .any(|n| std::str::from_utf8(n).is_ok_and(|n| ObjectKey::from_name(n).is_some()))
        });
        if spent {
            let _ = crate::fsutil::remove_tree_at(self.tmp.as_fd(), &self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::ObjectId;
    use crate::store::testutil::{mode, names, open};
    use std::os::unix::fs::PermissionsExt;

    fn key(data: &[u8], executable: bool) -> ObjectKey {
        ObjectKey {
            id: ObjectId::of(data),
            executable,
        }
    }

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn lstat(path: &Path) -> Stat {
        rustix::fs::lstat(path).unwrap()
    }

    /// Publishes `data` as an object and returns its key and path.
    fn publish(store: &Store, data: &[u8], executable: bool) -> (ObjectKey, PathBuf) {
        let k = key(data, executable);
        let mut work = store.work_dir("put").unwrap();
        let staged = work.stage(&k, data).unwrap();
        assert!(work.publish(store, &staged, &k).unwrap());
        (k, store.object_path(&k))
    }

    #[test]
    fn a_work_dir_is_private_locked_and_removed_on_drop() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let work = store.work_dir("ingest").unwrap();
        let path = work.path().to_path_buf();
        assert_eq!(path.parent().unwrap(), store.root().join(TMP_DIR));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("ingest-"), "{name}");
        assert_eq!(mode(&path), 0o700);
        let found = work_dirs(&store).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, name);
        assert!(found[0].live, "its operation holds the lock");
        let other = store.work_dir("ingest").unwrap();
        assert_ne!(other.path(), path);
        drop(other);
        drop(work);
        assert!(!path.exists());
        assert!(work_dirs(&store).unwrap().is_empty());
    }

    #[test]
    fn a_dead_work_dir_tells_what_it_was_doing() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let work = store.work_dir("checkout").unwrap();
        let keys = [key(b"one", false), key(b"two", true)];
        let digest = ManifestDigest::of(b"manifest");
        work.note_publishing(keys.iter(), &digest).unwrap();
        let view = tmp.path().join(".v.cestore-tmp-1");
        work.mark_target(&view).unwrap();
        // Copied aside, unlocked: what a killed operation leaves.
        let dead = store.root().join(TMP_DIR).join("checkout-dead");
        std::fs::create_dir(&dead).unwrap();
        for f in [PUBLISHING_LIST, TARGET_MARKER] {
            std::fs::copy(work.path().join(f), dead.join(f)).unwrap();
        }
        let found = work_dirs(&store).unwrap();
        let dead = found.iter().find(|w| w.name == "checkout-dead").unwrap();
        let live = found.iter().find(|w| w.name != "checkout-dead").unwrap();
        assert!(!dead.live);
        assert!(live.live);
        for w in [dead, live] {
            assert_eq!(w.publishing(), keys);
            assert_eq!(w.publishing_manifest(), Some(digest));
            assert_eq!(w.target(), Some(view.clone()));
        }
        drop(work);
        let bare = store.root().join(TMP_DIR).join("bare");
        std::fs::create_dir(&bare).unwrap();
        let found = work_dirs(&store).unwrap();
        let bare = found.iter().find(|w| w.name == "bare").unwrap();
        assert!(bare.publishing().is_empty());
        assert_eq!(bare.publishing_manifest(), None);
        assert_eq!(bare.target(), None);
    }

    #[test]
    fn staging_then_publishing_moves_the_file_into_place() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        for executable in [false, true] {
            let data = format!("content {executable}\n");
            let k = key(data.as_bytes(), executable);
            let mut work = store.work_dir("put").unwrap();
            assert_eq!(
                check_object(&store, &k, data.len() as u64).unwrap(),
                ObjectState::Missing
            );
            let staged = work.stage(&k, data.as_bytes()).unwrap();
            assert_eq!(staged, k.name());
            let staged_path = work.path().join(&staged);
            assert_eq!(std::fs::read(&staged_path).unwrap(), data.as_bytes());
            assert_eq!(mode(&staged_path), k.mode());
            // Staging the same object twice in one directory is refused.
            assert!(matches!(
                work.stage(&k, data.as_bytes()),
                Err(Error::Io { .. })
            ));

            assert!(work.publish(&store, &staged, &k).unwrap());
            let dest = store.object_path(&k);
            assert_eq!(dest, store.root().join("objects").join(k.rel_path()));
            assert_eq!(std::fs::read(&dest).unwrap(), data.as_bytes());
            assert_eq!(mode(&dest), k.mode());
            assert!(names(work.path()).is_empty());
            assert_eq!(
                check_object(&store, &k, data.len() as u64).unwrap(),
                ObjectState::Intact
            );

            // Publishing again never overwrites; the second copy is dropped.
            let inode = lstat(&dest).st_ino;
            let again = work.stage(&k, data.as_bytes()).unwrap();
            assert!(!work.publish(&store, &again, &k).unwrap());
            assert_eq!(lstat(&dest).st_ino, inode);
            assert!(names(work.path()).is_empty());
        }
    }

    #[test]
    fn a_stager_stages_in_its_own_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let work = store.work_dir("put").unwrap();
        let stager = work.stager(3).unwrap();
        let k = key(b"threaded", false);
        let staged = stager.stage(&k, b"threaded").unwrap();
        assert_eq!(staged, format!("s3/{}", k.name()));
        assert!(work.publish(&store, &staged, &k).unwrap());
        assert_eq!(std::fs::read(store.object_path(&k)).unwrap(), b"threaded");
        assert!(names(&work.path().join("s3")).is_empty());
    }

    /// A work directory syncs ahead only once asked to, and then also as
    /// its objects are published, each published at its mode.
    #[test]
    fn a_work_dir_that_flushes_ahead_syncs_as_it_stages_and_as_it_publishes() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let mut work = store.work_dir("put").unwrap();
        let started = |w: &WorkDir| w.flusher.as_ref().map_or(0, |f| f.started());
        work.stage(&key(b"before", false), b"before").unwrap();
        work.staged(6);
        assert_eq!(started(&work), 0, "no flusher until one is asked for");
        work.flush_ahead(1 << 40);
        let staged: Vec<(String, ObjectKey)> = (0..3)
            .map(|i| {
                let d = format!("object {i}\n").into_bytes();
                let k = key(&d, false);
                let name = work.stage(&k, &d).unwrap();
                work.staged(d.len() as u64);
                (name, k)
            })
            .collect();
        assert_eq!(started(&work), 0, "no step crossed");
        assert_eq!(work.publish_all(&store, &staged, 1).unwrap(), 3);
        assert_eq!(started(&work), 1, "one beside the renames");
        for (_, k) in &staged {
            assert_eq!(mode(&store.object_path(k)), 0o444);
        }
    }

    #[test]
    fn publishing_many_on_threads_counts_each_once_and_never_overwrites() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let data: Vec<Vec<u8>> = (0..PUBLISH_SHARED_FROM + 44)
            .map(|i| format!("object {i}\n").into_bytes())
            .collect();
        // Every tenth is stored already, by another operation.
        let stored: Vec<(ObjectKey, u64)> = data
            .iter()
            .step_by(10)
            .map(|d| {
                let (k, path) = publish(&store, d, false);
                (k, lstat(&path).st_ino)
            })
            .collect();
        let mut work = store.work_dir("put").unwrap();
        let staged: Vec<(String, ObjectKey)> = data
            .iter()
            .map(|d| {
                let k = key(d, false);
                (work.stage(&k, d).unwrap(), k)
            })
            .collect();
        let created = work.publish_all(&store, &staged, 4).unwrap();
        assert_eq!(created, (data.len() - stored.len()) as u64);
        for d in &data {
            let k = key(d, false);
            assert_eq!(std::fs::read(store.object_path(&k)).unwrap(), *d);
            assert_eq!(mode(&store.object_path(&k)), 0o444);
        }
        for (k, inode) in &stored {
            assert_eq!(
                lstat(&store.object_path(k)).st_ino,
                *inode,
                "never replaced"
            );
        }
        assert!(
            names(work.path()).is_empty(),
            "every staged copy moved or dropped"
        );

        // A staged file that is not there fails the whole, naming the object.
        let k = key(b"never staged", false);
        let mut missing: Vec<(String, ObjectKey)> = (0..PUBLISH_SHARED_FROM)
            .map(|i| {
                let d = format!("more {i}\n").into_bytes();
                let k = key(&d, false);
                (work.stage(&k, &d).unwrap(), k)
            })
            .collect();
        missing.insert(7, (k.name(), k));
        let err = work.publish_all(&store, &missing, 4).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "could not publish an object '{}'",
                store.object_path(&k).display()
            )
        );
    }

    #[test]
    fn publishing_recreates_a_missing_shard() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let k = key(b"sharded", false);
        let shard = store.object_path(&k).parent().unwrap().to_path_buf();
        std::fs::remove_dir(&shard).unwrap();
        let mut work = store.work_dir("put").unwrap();
        let staged = work.stage(&k, b"sharded").unwrap();
        assert!(work.publish(&store, &staged, &k).unwrap());
        assert_eq!(std::fs::read(store.object_path(&k)).unwrap(), b"sharded");
    }

    #[test]
    fn holds_its_bytes_checks_content_and_size_but_not_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let data = b"the right bytes\n";
        let size = data.len() as u64;
        let (k, path) = publish(&store, data, false);
        let holds = |size| holds_its_bytes(store.objects(), &path, &k, size).unwrap();
        assert!(holds(size));
        assert!(!holds(size + 1), "a wrong expected size");

        chmod(&path, 0o644);
        assert!(holds(size), "a drifted mode keeps the bytes");
        assert_eq!(
            check_object(&store, &k, size).unwrap(),
            ObjectState::Damaged("has mode 0644, not 0444".into())
        );
        restore_mode(store.objects(), &path, &k).unwrap();
        assert_eq!(mode(&path), 0o444);
        assert_eq!(check_object(&store, &k, size).unwrap(), ObjectState::Intact);

        chmod(&path, 0o644);
        std::fs::write(&path, b"the wrong bytes\n").unwrap();
        chmod(&path, 0o444);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        assert!(!holds(size), "same size, other bytes");
        assert_eq!(check_object(&store, &k, size).unwrap(), ObjectState::Intact);

        std::fs::remove_file(&path).unwrap();
        assert!(!holds(size), "a missing object");
        std::os::unix::fs::symlink("/etc/hostname", &path).unwrap();
        assert!(!holds(size), "a symlink is never followed");
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(!holds(size), "a directory");
    }

    #[test]
    fn judge_names_what_is_wrong() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, b"12345").unwrap();
        let plain = key(b"12345", false);
        let exec = key(b"12345", true);

        chmod(&file, 0o444);
        let st = lstat(&file);
        assert_eq!(judge(&st, &plain, 5), ObjectState::Intact);
        assert_eq!(
            judge(&st, &exec, 5),
            ObjectState::Damaged("has mode 0444, not 0555".into())
        );
        assert_eq!(
            judge(&st, &plain, 6),
            ObjectState::Damaged("has 5 bytes, not 6".into())
        );
        chmod(&file, 0o555);
        assert_eq!(judge(&lstat(&file), &exec, 5), ObjectState::Intact);
        chmod(&file, 0o4555);
        assert_eq!(
            judge(&lstat(&file), &exec, 5),
            ObjectState::Damaged("has mode 4555, not 0555".into())
        );
        assert_eq!(
            judge(&lstat(tmp.path()), &plain, 5),
            ObjectState::Damaged("is not a regular file".into())
        );
        let link = tmp.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(
            judge(&lstat(&link), &exec, 5),
            ObjectState::Damaged("is not a regular file".into())
        );
    }

    #[test]
    fn replace_puts_the_right_bytes_back() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let data = b"original\n";
        let (k, path) = publish(&store, data, true);
        chmod(&path, 0o644);
        std::fs::write(&path, b"changed!\n").unwrap();
        let mut work = store.work_dir("repair").unwrap();
        let staged = work.stage(&k, data).unwrap();
        work.replace(&store, &staged, &k).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), data);
        assert_eq!(mode(&path), 0o555);
        assert!(holds_its_bytes(store.objects(), &path, &k, data.len() as u64).unwrap());
    }

    #[test]
    fn unique_suffixes_differ() {
        let a = unique_suffix();
        let b = unique_suffix();
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("{}-", std::process::id())), "{a}");
    }
}
