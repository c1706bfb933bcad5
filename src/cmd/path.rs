//! `cestore path`: the one shared frozen view of a snapshot, inside the store.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, RenameFlags};
use rustix::io::Errno;

use super::{resolve, Report};
use crate::catalogue::ViewRow;
use crate::digest::ManifestDigest;
use crate::error::{Error, IoContext, Result};
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
}

impl Report for PathReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "{}", self.path.display())
    }
}

/// Returns the shared view of a snapshot, making it once if it is absent.
pub fn path(store_root: &Path, digest: &str) -> Result<PathReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    let digest = resolve(store.catalogue(), digest)?;
    let hex = digest.to_hex();
    let path = store.root().join(VIEWS_DIR).join(&hex);
    let views = crate::source::open_dir(store.dir(), VIEWS_DIR)
        .ctx("open the views directory", path.parent().unwrap_or(&path))?;
    match rustix::fs::statat(&views, hex.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
            return Ok(PathReport {
                manifest_digest: digest,
                path,
                created: false,
            })
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
    view::check_objects(&store, &entries)?;
    let work = store.work_dir("path")?;
    let built = view::build(&store, &entries, work.fd(), "view", &path, Method::Auto)?;
    let created = match rustix::fs::renameat_with(
        work.fd(),
        "view",
        &views,
        hex.as_str(),
        RenameFlags::NOREPLACE,
    ) {
        Ok(()) => true,
        // Another process published it first: theirs is the view.
        Err(Errno::EXIST | Errno::NOTEMPTY) => false,
        Err(e) => return Err(Error::io("publish the shared view", &path, e)),
    };
    if created {
        store.catalogue().add_view(&ViewRow {
            path: path.to_string_lossy().into_owned(),
            digest,
            kind: "shared".into(),
            method: built.method().into(),
            linked: built.linked as i64,
            copied: built.copied as i64,
            created_at: String::new(),
        })?;
    }
    drop(work);
    Ok(PathReport {
        manifest_digest: digest,
        path,
        created,
    })
}
