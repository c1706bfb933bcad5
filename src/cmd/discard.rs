//! `cestore discard`: remove a view made by checkout, and forget it.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::Path;

use super::{resolve, Report};
use crate::digest::ManifestDigest;
use crate::error::{Error, IoContext, Result};
use crate::store::{objects::remove_tree_at, LockMode, Store};
use crate::view;

/// What to discard.
pub struct DiscardOptions<'a> {
    /// The view's path.
    pub dest: &'a Path,
    /// Remove a path that is not a recorded view, if it matches this snapshot exactly.
    pub force_digest: Option<&'a str>,
}

/// The report of `cestore discard`.
#[derive(Debug, serde::Serialize)]
pub struct DiscardReport {
    /// The view's absolute path.
    pub view: String,
    /// The snapshot it showed.
    pub manifest_digest: ManifestDigest,
    /// Whether it was a recorded view (else it was forced).
    pub recorded: bool,
    /// Whether the directory was still there to remove.
    pub removed: bool,
}

impl Report for DiscardReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        let what = if self.removed {
            "removed"
        } else {
            "forgot (already gone)"
        };
        writeln!(w, "{what} {} ({})", self.view, self.manifest_digest)
    }
}

/// Removes a view: directories get write permission, files are never chmod-ed.
pub fn discard(store_root: &Path, opts: &DiscardOptions<'_>) -> Result<DiscardReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    let (parent, name) = view::split_dest(opts.dest)?;
    let dest = parent.join(&name);
    let dest_text = dest.to_string_lossy().into_owned();
    let row = store.catalogue().view(&dest_text)?;
    let exists = rustix::fs::lstat(&dest).is_ok();
    let (digest, recorded) = match (&row, opts.force_digest) {
        (Some(row), _) if exists && row.root_id.is_some() && view::root_id(&dest) != row.root_id => {
            return Err(Error::Conflict(format!(
                "'{}' is no longer the view checkout made (its root directory was replaced); not removed. \
                 Check it with `cestore verify --tree {} {}`",
                dest.display(),
                dest.display(),
                row.digest
            )))
        }
        (Some(row), _) => (row.digest, true),
        (None, None) => {
            return Err(Error::Absent {
                message: format!(
                    "'{}' is not a recorded view; to remove a tree that is exactly a snapshot, pass --force DIGEST",
                    dest.display()
                ),
                path: dest,
            })
        }
        (None, Some(d)) => {
            let digest = resolve(store.catalogue(), d)?;
            let entries = store.catalogue().files(&digest)?;
            let diffs = crate::tree::matches(&dest, &entries)?;
            if !diffs.is_empty() {
                return Err(Error::Conflict(format!(
                    "'{}' is not a recorded view and differs from {digest} in {} (first: {}); not removed",
                    dest.display(),
                    super::counted(diffs.len(), "way", "ways"),
                    diffs[0]
                )));
            }
            (digest, false)
        }
    };
    if exists {
        let parent_fd = crate::source::open_dir(rustix::fs::CWD, &parent)
            .ctx("open the view's parent", &parent)?;
        let name = name
            .to_str()
            .ok_or_else(|| Error::Usage(format!("'{}' is not a UTF-8 path", dest.display())))?;
        remove_tree_at(parent_fd.as_fd(), name).ctx("remove the view", &dest)?;
    }
    if recorded {
        store.catalogue().remove_view(&dest_text)?;
    }
    Ok(DiscardReport {
        view: dest_text,
        manifest_digest: digest,
        recorded,
        removed: exists,
    })
}
