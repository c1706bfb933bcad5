//! Views: checking out a snapshot at a new path, the store's shared views,
//! and discarding. A view is published with one rename and recorded in the
//! catalogue; one that cannot be recorded is removed again.
//!
//! The views room: `mod.rs` checkout, the shared views, discard, and whether
//! a directory is a view cestore made; `build.rs` a frozen tree built from
//! the objects by hard links (or copies), published with one rename;
//! `spares.rs` discarded views kept whole for the next checkout;
//! `sandbox.rs` stage and mounts; `tree.rs` a directory against a snapshot.
//! It uses the ingest room (checkout of a source, stage), the core and the
//! [`Store`] handle.

pub mod build;
pub mod copies;
pub mod layout;
pub mod materialize;
pub mod sandbox;
pub(crate) mod spares;
pub(crate) mod tree;
pub mod writable;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;

use crate::catalogue::{resolve, SnapshotRow, ViewKind, ViewRow};
use crate::digest::ManifestDigest;
use crate::error::{Error, IoContext, Made, Misuse, Result};
use crate::fsutil::{publish_noreplace, remove_tree_at, Published};
use crate::source::Source;
use crate::store::core::objects::WorkDir;
use crate::store::ingest::{apply_ingest, plan_ingest, undo_ingest, IngestOptions, IngestReport};
use crate::store::views::build::{self as view, Built, Method};
use crate::store::views::spares::Claimed;
use crate::store::{Store, VIEWS_DIR};

/// What to check out, and where.
pub struct CheckoutOptions<'a> {
    /// A digest or unique prefix.
    pub digest: &'a str,
    /// The view's path, which must not exist.
    pub dest: &'a Path,
    /// How to make the files.
    pub method: Method,
    /// Fail instead of copying where a hard link is refused.
    pub require_hardlinks: bool,
}

/// The report of `cestore checkout`.
#[derive(Debug, serde::Serialize)]
pub struct CheckoutReport {
    /// The snapshot checked out.
    pub manifest_digest: ManifestDigest,
    /// The view's absolute path.
    pub view: String,
    /// The method asked for.
    pub requested_method: Method,
    /// What building the view did.
    #[serde(flatten)]
    pub built: Built,
    /// The snapshot's row, read when the view was recorded.
    #[serde(skip)]
    pub snapshot: SnapshotRow,
}

/// Where a new view goes: an existing parent directory and a name not yet
/// taken there, outside the store.
pub struct Destination {
    parent: PathBuf,
    name: PathBuf,
}

impl Destination {
    /// Checks a destination: its parent exists, nothing is at it yet, and it
    /// lies outside the store.
    pub fn check(store: &Store, dest: &Path) -> Result<Destination> {
        let (parent, name) = view::split_dest(dest)?;
        let dest = parent.join(&name);
        if rustix::fs::lstat(&dest).is_ok() {
            // A view cestore recorded there can be discarded; say whose it is.
            let view_of = match dest.to_str() {
                Some(path) => store.catalogue().view(path)?.map(|row| row.digest),
                None => None,
            };
            return Err(Error::Exists {
                made: Made::View,
                path: dest,
                view_of,
            });
        }
        let store_real =
            std::fs::canonicalize(store.root()).ctx("resolve the store path", store.root())?;
        if dest.starts_with(&store_real) {
            return Err(Error::InsideStore {
                path: dest,
                store: store_real,
            });
        }
        Ok(Destination { parent, name })
    }

    /// The destination's absolute path.
    pub fn path(&self) -> PathBuf {
        self.parent.join(&self.name)
    }
}

/// The method a checkout uses, given whether hard links are required.
pub fn effective_method(method: Method, require_hardlinks: bool) -> Result<Method> {
    match (method, require_hardlinks) {
        (Method::Auto | Method::Hardlink, true) => Ok(Method::Hardlink),
        (m @ (Method::Copy | Method::Reflink), true) => Err(Misuse::HardlinksWithMethod {
            method: if m == Method::Copy { "copy" } else { "reflink" },
        }
        .into()),
        (m, false) => Ok(m),
    }
}

/// Checks out a snapshot of an open store at a checked destination, and
/// records the view; a view that cannot be recorded is removed again.
pub fn checkout_into(
    store: &mut Store,
    digest: ManifestDigest,
    dest: &Destination,
    method: Method,
) -> Result<CheckoutReport> {
    checkout_with(store, digest, dest, method, None)
}

/// Ingests a release and checks its view out at a checked destination.
///
/// While the release is walked, a second thread claims and checks a spare
/// of the snapshot this source made last time: a warm stage then costs the
/// longer of the two, not their sum. The spare serves only when the walk
/// gives that very snapshot, the ingest changes no object, and every object
/// the spare links is still the inode its check found; otherwise it goes
/// back to the spares (or away, when stale). A view that fails takes the
/// ingest back, so a failure leaves no view, record or event.
pub fn ingest_and_checkout(
    store: &mut Store,
    source: &Source,
    opts: &IngestOptions<'_>,
    dest: &Destination,
    method: Method,
) -> Result<(IngestReport, CheckoutReport)> {
    let ahead = match method {
        Method::Auto | Method::Hardlink => claim_ahead(store, source, dest),
        Method::Copy | Method::Reflink => None,
    };
    let (plan, claimed) = std::thread::scope(|s| {
        let claiming = ahead.map(|ahead| {
            let (dir, objects) = (store.dir(), store.objects());
            s.spawn(move || ahead.claim(dir, objects))
        });
        let plan = plan_ingest(store, source, opts);
        (plan, claiming.and_then(|h| h.join().ok().flatten()))
    });
    let claimed = match (claimed, &plan) {
        (Some(c), Ok(p)) if c.digest() == p.digest() && !p.changes_objects() => {
            // An object it links was repaired or damaged since its check:
            // the stale spare goes with its work directory.
            c.still_sound(store.objects()).then_some(c)
        }
        (Some(c), _) => {
            c.give_back(store.dir());
            None
        }
        (None, _) => None,
    };
    let ingested = match plan.and_then(|plan| apply_ingest(store, plan)) {
        Ok(done) => done,
        Err(e) => {
            if let Some(c) = claimed {
                c.give_back(store.dir());
            }
            return Err(e);
        }
    };
    let digest = ingested.provenance.manifest_digest;
    match checkout_with(store, digest, dest, method, claimed) {
        Ok(view) => Ok((ingested, view)),
        Err(e) => {
            undo_ingest(store, &ingested)?;
            Err(e)
        }
    }
}

/// What a run's view is made from.
pub enum ViewOf<'a> {
    /// A release's source directory, ingested first.
    Source(&'a Source, &'a IngestOptions<'a>),
    /// A snapshot already in the store, by digest or unique prefix.
    Digest(&'a str),
}

/// A run's view, made by [`view_for_run`].
pub struct RunView {
    /// The snapshot's row.
    pub snapshot: SnapshotRow,
    /// The view's absolute path.
    pub path: String,
    /// A checkout (a view at a destination) or the store's shared view.
    pub kind: ViewKind,
    /// What the ingest did, for a source.
    pub ingested: Option<IngestReport>,
    /// Whether this call made the view (a shared view may have been there).
    pub created: bool,
}

/// Takes back a run's view that a command then failing made
/// ([`view_for_run`]): a checkout is discarded, a shared view this call made
/// removed, and the ingest before it undone.
pub fn take_back_run_view(store: &mut Store, made: &RunView) -> Result<()> {
    match made.kind {
        ViewKind::Checkout => {
            discard_view(
                store,
                &DiscardOptions {
                    dest: Path::new(&made.path),
                    force_digest: None,
                    spare: false,
                },
            )?;
        }
        ViewKind::Shared if made.created => {
            unshare(store, made.snapshot.digest, Path::new(&made.path))?;
        }
        ViewKind::Shared => {}
    }
    match &made.ingested {
        Some(done) => undo_ingest(store, done),
        None => Ok(()),
    }
}

/// Makes a run's view: ingests a source first, then checks the snapshot
/// out at `dest`, or takes the store's shared view without one. A view that
/// fails takes the ingest back, so a failure leaves no view, record or event.
pub fn view_for_run(
    store: &mut Store,
    of: ViewOf<'_>,
    dest: Option<&Destination>,
    method: Method,
) -> Result<RunView> {
    let (ingested, digest) = match (of, dest) {
        (ViewOf::Source(source, opts), Some(dest)) => {
            let (done, view) = ingest_and_checkout(store, source, opts, dest, method)?;
            return Ok(RunView {
                snapshot: view.snapshot,
                path: view.view,
                kind: ViewKind::Checkout,
                ingested: Some(done),
                created: true,
            });
        }
        (ViewOf::Source(source, opts), None) => {
            let done = crate::store::ingest::ingest_into(store, source, opts)?;
            let digest = done.provenance.manifest_digest;
            (Some(done), digest)
        }
        (ViewOf::Digest(d), _) => (None, resolve(store.catalogue(), d)?),
    };
    let viewed = match dest {
        Some(dest) => checkout_into(store, digest, dest, method).map(|done| RunView {
            snapshot: done.snapshot,
            path: done.view,
            kind: ViewKind::Checkout,
            ingested: None,
            created: true,
        }),
        None => shared_view(store, digest).map(|done| RunView {
            snapshot: done.snapshot,
            path: done.path.to_string_lossy().into_owned(),
            kind: ViewKind::Shared,
            ingested: None,
            created: done.created,
        }),
    };
    match viewed {
        Ok(view) => Ok(RunView { ingested, ..view }),
        Err(e) => {
            if let Some(done) = &ingested {
                undo_ingest(store, done)?;
            }
            Err(e)
        }
    }
}

/// A spare claim to run beside the walk: what it needs besides the store's
/// handles, which the walk shares.
struct ClaimAhead {
    work: WorkDir,
    digest: ManifestDigest,
    manifest: PathBuf,
    parent: OwnedFd,
}

impl ClaimAhead {
    fn claim(self, dir: BorrowedFd<'_>, objects: BorrowedFd<'_>) -> Option<Claimed> {
        let parent = self.parent.as_fd();
        Claimed::claim(dir, objects, &self.manifest, self.work, self.digest, parent)
    }
}

/// The spare claim for a checkout at `dest` of what `source` gives: a spare
/// of the snapshot it gave last; `None` when it gave none yet.
fn claim_ahead(store: &Store, source: &Source, dest: &Destination) -> Option<ClaimAhead> {
    let source = source.shown().to_string();
    let digest = store.catalogue().last_ingested_from(&source).ok()??;
    Some(ClaimAhead {
        parent: crate::fsutil::open_dir(rustix::fs::CWD, &dest.parent).ok()?,
        work: store.work_dir("checkout").ok()?,
        manifest: store.manifest_path(&digest),
        digest,
    })
}

/// [`checkout_into`], with a spare of `digest` claimed ahead when there is one.
fn checkout_with(
    store: &mut Store,
    digest: ManifestDigest,
    dest: &Destination,
    method: Method,
    claimed: Option<Claimed>,
) -> Result<CheckoutReport> {
    let (parent, name) = (&dest.parent, &dest.name);
    let dest = dest.path();
    let parent_fd = crate::fsutil::open_dir(rustix::fs::CWD, parent)
        .ctx("open the destination's parent", parent)?;
    let tmp = view::temp_name(name.as_os_str());
    let tmp_path = parent.join(&tmp);
    // A marker in the store names the temporary view, so that gc can remove
    // it if this process dies before publishing.
    let (work, spare) = match claimed {
        Some(c) => c.place(store.dir(), &tmp_path, parent_fd.as_fd(), &tmp)?,
        None => {
            let work = store.work_dir("checkout")?;
            work.mark_target(&tmp_path)?;
            (work, None)
        }
    };
    let built = match spare {
        Some(built) => Ok(built),
        None => match layout::tree_layout(store, &digest) {
            Err(e) => Err(e),
            Ok(Some(layout)) => {
                view::build_tree(store, &layout, parent_fd.as_fd(), &tmp, &dest, method)
            }
            Ok(None) => {
                let entries = store.entries_to_hand_out(&digest)?;
                // A hard-linked view can be a spare that a discard kept.
                let spare = match method {
                    Method::Auto | Method::Hardlink => crate::store::views::spares::take(
                        store,
                        &work,
                        &digest,
                        &entries,
                        parent_fd.as_fd(),
                        &tmp,
                    ),
                    Method::Copy | Method::Reflink => None,
                };
                match spare {
                    Some(built) => Ok(built),
                    None => view::build(store, &entries, parent_fd.as_fd(), &tmp, &dest, method),
                }
            }
        },
    }
    .and_then(|built| {
        view::publish(parent_fd.as_fd(), &tmp, name.as_os_str(), &dest)?;
        Ok(built)
    });
    let built = match built {
        Ok(b) => b,
        Err(e) => {
            if remove_tree_at(parent_fd.as_fd(), &tmp).is_err() {
                // Leave the marker: gc removes what this could not.
                work.abandon();
            }
            return Err(e);
        }
    };
    let row = ViewRow::of_built(&dest, digest, ViewKind::Checkout, &built);
    let snapshot = match store.catalogue_mut().add_view(&row) {
        Ok(s) => s,
        // A spare taken goes back to the spares, as it was: a failed
        // checkout changes nothing.
        Err(e)
            if built.spare
                && crate::store::views::spares::keep(store, &digest, parent_fd.as_fd(), name) =>
        {
            return Err(e)
        }
        Err(e) => {
            return Err(view::unpublish(
                parent_fd.as_fd(),
                name.as_os_str(),
                &dest,
                e,
            ))
        }
    };
    drop(work);
    Ok(CheckoutReport {
        manifest_digest: digest,
        view: row.path,
        requested_method: method,
        built,
        snapshot,
    })
}

/// The report of `cestore path`.
#[derive(Debug, serde::Serialize)]
pub struct PathReport {
    /// The snapshot.
    pub manifest_digest: ManifestDigest,
    /// The shared view's absolute path.
    pub path: PathBuf,
    /// Whether this call made the view.
    pub created: bool,
    /// The snapshot's row.
    #[serde(skip)]
    pub snapshot: SnapshotRow,
}

/// Returns the shared view of a snapshot of an open store, making it once
/// if it is absent.
pub fn shared_view(store: &mut Store, digest: ManifestDigest) -> Result<PathReport> {
    let hex = digest.to_hex();
    let path = store.shared_view_dir(&digest);
    let views = crate::fsutil::open_dir(store.dir(), VIEWS_DIR)
        .ctx("open the views directory", path.parent().unwrap_or(&path))?;
    match rustix::fs::statat(&views, hex.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
            // A process killed between publishing and recording leaves an
            // unrecorded view: record it now, so that rm and gc respect it.
            let text = path.to_string_lossy();
            let snapshot = if store.catalogue().view(&text)?.is_none() {
                let root_id = Some((st.st_dev, st.st_ino));
                let row = ViewRow::found_shared(text.into_owned(), digest, root_id);
                store.catalogue_mut().add_view(&row)?
            } else {
                store.catalogue().snapshot(&digest)?
            };
            return Ok(PathReport {
                manifest_digest: digest,
                path,
                created: false,
                snapshot,
            });
        }
        Ok(_) => return Err(crate::error::Damage::SharedViewNotADirectory { path }.into()),
        Err(Errno::NOENT) => {}
        Err(e) => return Err(Error::io("examine the shared view", &path, e)),
    }
    let layout = layout::tree_layout(store, &digest)?;
    let entries = match layout {
        Some(_) => Vec::new(),
        None => store.entries_to_hand_out(&digest)?,
    };
    // Build beside the final name, so that the rename keeps the parent (a
    // directory moved to another parent needs write permission on itself,
    // which a frozen view no longer has). A marker in the store names the
    // temporary view, so that gc can remove it if this process dies.
    let tmp = view::temp_name(std::ffi::OsStr::new(&hex));
    let work = store.work_dir("path")?;
    work.mark_target(&path.with_file_name(&tmp))?;
    let built = match &layout {
        Some(layout) => view::build_tree(store, layout, views.as_fd(), &tmp, &path, Method::Auto),
        None => view::build(store, &entries, views.as_fd(), &tmp, &path, Method::Auto),
    };
    let built = match built {
        Ok(b) => b,
        Err(e) => {
            let _ = remove_tree_at(views.as_fd(), &tmp);
            return Err(e);
        }
    };
    let created = match publish_noreplace(views.as_fd(), tmp.as_str(), views.as_fd(), hex.as_str())
    {
        Ok(Published::Created) => true,
        // Another process published it first: theirs is the view.
        Ok(Published::Existed) => {
            remove_tree_at(views.as_fd(), &tmp)
                .ctx("remove a redundant view", path.with_file_name(&tmp))?;
            false
        }
        Err(e) => {
            let _ = remove_tree_at(views.as_fd(), &tmp);
            return Err(Error::io("publish the shared view", &path, e));
        }
    };
    let snapshot = if created {
        let row = ViewRow::of_built(&path, digest, ViewKind::Shared, &built);
        match store.catalogue_mut().add_view(&row) {
            Ok(snapshot) => snapshot,
            Err(e) => return Err(view::unpublish(views.as_fd(), hex.as_ref(), &path, e)),
        }
    } else {
        store.catalogue().snapshot(&digest)?
    };
    drop(work);
    Ok(PathReport {
        manifest_digest: digest,
        path,
        created,
        snapshot,
    })
}

/// Takes back a shared view that [`shared_view`] made in this command
/// (`made.created`), for a command that then failed: the view is set aside
/// (a rename within the views directory), its record forgotten (the view
/// goes back when that fails), and then removed. A view this command found
/// already made is left as it is.
pub fn take_back_shared_view(store: &mut Store, made: &PathReport) -> Result<()> {
    if !made.created {
        return Ok(());
    }
    unshare(store, made.manifest_digest, &made.path)
}

/// Removes the shared view of `digest` at `path` and its record, the view
/// set aside first and put back when its record cannot be forgotten.
fn unshare(store: &mut Store, digest: ManifestDigest, path: &Path) -> Result<()> {
    let hex = digest.to_hex();
    let views = crate::fsutil::open_dir(store.dir(), VIEWS_DIR)
        .ctx("open the views directory", store.views_dir())?;
    let aside = view::temp_name(std::ffi::OsStr::new(&hex));
    rustix::fs::renameat(&views, hex.as_str(), &views, aside.as_str())
        .ctx("set the shared view aside", path)?;
    if let Err(e) = store.catalogue_mut().remove_view(&path.to_string_lossy()) {
        let _ = rustix::fs::renameat(&views, aside.as_str(), &views, hex.as_str());
        return Err(e);
    }
    remove_tree_at(views.as_fd(), Path::new(&aside)).ctx("remove the shared view", path)?;
    Ok(())
}

/// What to discard.
pub struct DiscardOptions<'a> {
    /// The view's path.
    pub dest: &'a Path,
    /// Remove a path that is not a recorded view, if it matches this snapshot exactly.
    pub force_digest: Option<&'a str>,
    /// Keep a recorded checkout whole as a spare for the next checkout of
    /// its snapshot (see `store::views::spares`), when nothing uses it any more.
    pub spare: bool,
}

/// The report of `cestore discard`.
#[derive(Debug, serde::Serialize)]
pub struct DiscardReport {
    /// The view's absolute path.
    pub view: String,
    /// The snapshot it showed; `null` when nothing was there to discard.
    pub manifest_digest: Option<ManifestDigest>,
    /// Whether it was a recorded view (else it was forced, or gone).
    pub recorded: bool,
    /// Whether this call removed it (else it was already gone).
    pub removed: bool,
    /// Whether the store kept it as a spare for the next checkout of its
    /// snapshot (see `store::views::spares`) rather than deleting its files.
    pub spare: bool,
}

/// Removes a view: directories get write permission, files are never chmod-ed.
///
/// A recorded view whose directory is already gone, by another discard or by
/// the removal of its parents, is forgotten. The store's shared views are
/// refused: sandboxes may have them mounted, and only gc removes them.
pub fn discard_view(store: &mut Store, opts: &DiscardOptions<'_>) -> Result<DiscardReport> {
    let (parent, name) = match view::split_dest(opts.dest) {
        Ok(split) => split,
        // The parent is gone: a record can still name the path.
        Err(Error::NotFound { .. }) => view::lexical_dest(opts.dest)?,
        Err(e) => return Err(e),
    };
    let dest = parent.join(&name);
    let dest_text = dest.to_string_lossy().into_owned();
    let row = store.catalogue().view(&dest_text)?;
    let found = view::root_id(&dest);
    let shared_dir = store.views_dir();
    if row.as_ref().is_some_and(|r| r.kind == ViewKind::Shared) || dest.starts_with(&shared_dir) {
        // A shared view is named by its snapshot's digest.
        let digest = row.as_ref().map(|r| r.digest.to_hex()).or_else(|| {
            let name = dest.strip_prefix(&shared_dir).ok()?.iter().next()?;
            let name = name.to_str()?;
            name.parse::<ManifestDigest>().ok().map(|d| d.to_hex())
        });
        return Err(crate::error::Clash::SharedView {
            path: dest.to_path_buf(),
            digest,
        }
        .into());
    }
    let (digest, recorded) = match (&row, opts.force_digest) {
        (Some(row), _) if found.is_some() && row.root_id.is_some() && found != row.root_id => {
            return Err(crate::error::Clash::DiscardReplaced {
                path: dest.to_path_buf(),
                digest: row.digest,
            }
            .into())
        }
        (Some(row), _) => (row.digest, true),
        // Nothing there and nothing recorded: another discard got there
        // first, or it never was. Discarding is idempotent.
        (None, None) if found.is_none() => {
            return Ok(DiscardReport {
                view: dest_text,
                manifest_digest: None,
                recorded: false,
                removed: false,
                spare: false,
            })
        }
        (None, None) => return Err(Misuse::NotARecordedView { path: dest }.into()),
        (None, Some(d)) => (exactly_a_snapshot(store, &dest, found.is_some(), d)?, false),
    };
    // Of two discards of one view, the one whose move takes the view's root
    // removes it; the other finds it already gone. The record is forgotten
    // once, by whichever gets there first.
    //
    // A failed discard changes nothing, on a full disk too: the view is
    // moved aside (a rename within its parent) before its record is
    // forgotten, and goes back when forgetting fails; only then is it kept
    // as a spare or removed.
    let mut spare = false;
    let mut forgotten = false;
    let removed = match found {
        Some(_) => {
            let parent_fd = crate::fsutil::open_dir(rustix::fs::CWD, &parent)
                .ctx("open the view's parent", &parent)?;
            let aside = view::temp_name(name.as_os_str());
            match rustix::fs::renameat(&parent_fd, &name, &parent_fd, aside.as_str()) {
                Ok(()) => {}
                // Another discard moved it first.
                Err(rustix::io::Errno::NOENT) => {
                    return discarded(store, dest_text, digest, recorded)
                }
                Err(e) => return Err(Error::io("set the view aside", &dest, e)),
            }
            if recorded {
                if let Err(e) = store.catalogue_mut().remove_view(&dest_text) {
                    let _ = rustix::fs::renameat(&parent_fd, aside.as_str(), &parent_fd, &name);
                    return Err(e);
                }
                forgotten = true;
            }
            // A checkout made of hard links (and fresh empty files) can serve
            // the next checkout of its snapshot: keep it whole instead of
            // deleting it. Taking it checks every file's inode, so a view
            // with copies in it is never handed out.
            // Spares serve CE checkouts only: a tree-kind view is never taken.
            spare = opts.spare
                && row.as_ref().is_some_and(|r| r.method != "copy")
                && layout::kind_of(store, &digest) == crate::profile::tree::stored::Kind::Ce
                && crate::store::views::spares::keep(
                    store,
                    &digest,
                    parent_fd.as_fd(),
                    Path::new(&aside),
                );
            spare
                || remove_tree_at(parent_fd.as_fd(), Path::new(&aside))
                    .ctx("remove the view", &dest)?
        }
        None => false,
    };
    if recorded && !forgotten {
        store.catalogue_mut().remove_view(&dest_text)?;
    }
    Ok(DiscardReport {
        view: dest_text,
        manifest_digest: Some(digest),
        recorded,
        removed,
        spare,
    })
}

/// The report of a discard that found its view already moved by another:
/// the record, if any is left, is forgotten here.
fn discarded(
    store: &mut Store,
    view: String,
    digest: ManifestDigest,
    recorded: bool,
) -> Result<DiscardReport> {
    if recorded {
        store.catalogue_mut().remove_view(&view)?;
    }
    Ok(DiscardReport {
        view,
        manifest_digest: Some(digest),
        recorded,
        removed: false,
        spare: false,
    })
}

/// The snapshot `d` names, when the tree at `dest`, which no record names,
/// is exactly that snapshot: what `discard --force DIGEST` may remove.
fn exactly_a_snapshot(store: &Store, dest: &Path, found: bool, d: &str) -> Result<ManifestDigest> {
    let digest = resolve(store.catalogue(), d)?;
    if !found {
        return Err(Error::NotFound {
            what: "directory",
            path: dest.to_path_buf(),
        });
    }
    let diffs = crate::store::views::tree::differences(store, &digest, dest)?;
    if !diffs.is_empty() {
        return Err(crate::error::Clash::NotAViewAndDiffers {
            path: dest.to_path_buf(),
            digest,
            ways: diffs.len(),
            first: diffs[0].to_string(),
        }
        .into());
    }
    Ok(digest)
}

/// Checks out a snapshot (a digest or unique prefix) as a new frozen view
/// at `opts.dest` in the store at `store_root`, and records it.
pub fn checkout(store: &mut Store, opts: &CheckoutOptions<'_>) -> Result<CheckoutReport> {
    let digest = resolve(store.catalogue(), opts.digest)?;
    let dest = Destination::check(store, opts.dest)?;
    let method = effective_method(opts.method, opts.require_hardlinks)?;
    let mut report = checkout_into(store, digest, &dest, method)?;
    report.requested_method = opts.method;
    Ok(report)
}

/// The shared view of a snapshot (a digest or unique prefix) in the store
/// at `store_root`, made once if it is absent.
pub fn shared_view_of(store: &mut Store, digest: &str) -> Result<PathReport> {
    let digest = resolve(store.catalogue(), digest)?;
    shared_view(store, digest)
}

/// Removes a view from the store at `store_root`, as [`discard_view`] does.
pub fn discard(store: &mut Store, opts: &DiscardOptions<'_>) -> Result<DiscardReport> {
    discard_view(store, opts)
}

/// A view directory given by path: made absolute, and it must be a directory.
pub fn view_dir(path: &Path) -> Result<PathBuf> {
    let path = crate::source::absolute_like_python(path);
    if !path.is_dir() {
        return Err(Error::Absent {
            message: format!("no view directory at '{}'", path.display()),
            path,
        });
    }
    Ok(path)
}

/// Whether `shown` is a view directory that cestore made: a recorded view
/// whose root is still the directory recorded, or a snapshot's shared view.
/// Returns its path as recorded and its snapshot, which must be `expect` (a
/// digest or unique prefix) when that is given.
pub fn recorded_view(
    store: &Store,
    shown: &Path,
    expect: Option<&str>,
) -> Result<(PathBuf, ManifestDigest)> {
    let (parent, name) = view::split_dest(shown)?;
    let dest = parent.join(&name);
    let row = store.catalogue().view(&dest.to_string_lossy())?;
    let digest = match row {
        Some(row) => {
            if row.root_id.is_some() && view::root_id(&dest) != row.root_id {
                return Err(crate::error::Clash::ViewReplaced {
                    path: dest,
                    digest: row.digest,
                }
                .into());
            }
            row.digest
        }
        None => {
            // A shared view that was published but not yet recorded.
            let views = std::fs::canonicalize(store.views_dir()).ok();
            let shared = name
                .to_str()
                .and_then(|n| n.parse::<ManifestDigest>().ok())
                .filter(|_| views.as_deref() == Some(parent.as_path()));
            match shared {
                Some(d) if store.catalogue().has_snapshot(&d)? => d,
                _ => return Err(Misuse::NotAView { path: dest }.into()),
            }
        }
    };
    if let Some(expect) = expect {
        let expected = resolve(store.catalogue(), expect)?;
        if expected != digest {
            return Err(Misuse::ViewOfAnother {
                path: dest,
                digest,
                expected,
            }
            .into());
        }
    }
    Ok((dest, digest))
}

/// A snapshot's shared view in the store (`STORE/views/<digest>`), which
/// [`shared_view`] makes; unlike that, this one must already exist.
pub fn existing_shared_view(store: &Store, digest: &str) -> Result<(PathBuf, ManifestDigest)> {
    let digest = resolve(store.catalogue(), digest)?;
    let path = store.shared_view_dir(&digest);
    if !path.is_dir() {
        return Err(Error::Absent {
            message: format!(
                "{digest} has no shared view at '{}' yet; make it with `cestore path {digest}`",
                path.display()
            ),
            path,
        });
    }
    Ok((path, digest))
}
