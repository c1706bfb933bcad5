//! `cestore path`: the one shared frozen view of a snapshot, inside the store.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use std::os::fd::AsFd;

use rustix::fs::{AtFlags, FileType, RenameFlags};
use rustix::io::Errno;

use super::{resolve, Report};
use crate::catalogue::{SnapshotRow, ViewRow};
use crate::digest::ManifestDigest;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::remove_tree_at;
use crate::store::{LockMode, Store, VIEWS_DIR};
use crate::view::{self, Method};

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

impl Report for PathReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "{}", self.path.display())
    }
}

/// Returns the shared view of a snapshot, making it once if it is absent.
pub fn path(store_root: &Path, digest: &str) -> Result<PathReport> {
    let mut store = Store::open(store_root, LockMode::Shared, false)?;
    let digest = resolve(store.catalogue(), digest)?;
    shared_view(&mut store, digest)
}

/// Returns the shared view of a snapshot of an open store, making it once
/// if it is absent.
pub fn shared_view(store: &mut Store, digest: ManifestDigest) -> Result<PathReport> {
    let hex = digest.to_hex();
    let path = store.root().join(VIEWS_DIR).join(&hex);
    let views = crate::fsutil::open_dir(store.dir(), VIEWS_DIR)
        .ctx("open the views directory", path.parent().unwrap_or(&path))?;
    match rustix::fs::statat(&views, hex.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
            // A process killed between publishing and recording leaves an
            // unrecorded view: record it now, so that rm and gc respect it.
            let text = path.to_string_lossy();
            let snapshot = if store.catalogue().view(&text)?.is_none() {
                store.catalogue_mut().add_view(&ViewRow {
                    path: text.into_owned(),
                    digest,
                    kind: "shared".into(),
                    method: "unknown".into(),
                    linked: 0,
                    copied: 0,
                    created_at: String::new(),
                    root_id: Some((st.st_dev, st.st_ino)),
                })?
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
        Ok(_) => {
            return Err(Error::Integrity(format!(
                "'{}' is not a directory; run `cestore verify`",
                path.display()
            )))
        }
        Err(Errno::NOENT) => {}
        Err(e) => return Err(Error::io("examine the shared view", &path, e)),
    }
    let entries = store.catalogue().files(&digest)?;
    // Build beside the final name, so that the rename keeps the parent (a
    // directory moved to another parent needs write permission on itself,
    // which a frozen view no longer has). A marker in the store names the
    // temporary view, so that gc can remove it if this process dies.
    let tmp = view::temp_name(std::ffi::OsStr::new(&hex));
    let work = store.work_dir("path")?;
    work.mark_target(&path.with_file_name(&tmp))?;
    let built = match view::build(store, &entries, views.as_fd(), &tmp, &path, Method::Auto) {
        Ok(b) => b,
        Err(e) => {
            let _ = remove_tree_at(views.as_fd(), &tmp);
            return Err(e);
        }
    };
    let created = match rustix::fs::renameat_with(
        &views,
        tmp.as_str(),
        &views,
        hex.as_str(),
        RenameFlags::NOREPLACE,
    ) {
        Ok(()) => true,
        // Another process published it first: theirs is the view.
        Err(Errno::EXIST | Errno::NOTEMPTY) => {
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
        let row = ViewRow::of_built(&path, digest, "shared", &built);
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
