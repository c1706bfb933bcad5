//! `cestore discard`: remove a view made by checkout, and forget it.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::Path;

use super::{resolve, Report};
use crate::digest::ManifestDigest;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::remove_tree_at;
use crate::store::{LockMode, Store};
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
    /// The snapshot it showed; `null` when nothing was there to discard.
    pub manifest_digest: Option<ManifestDigest>,
    /// Whether it was a recorded view (else it was forced, or gone).
    pub recorded: bool,
    /// Whether this call removed it (else it was already gone).
    pub removed: bool,
}

impl Report for DiscardReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        match (self.manifest_digest, self.removed) {
            (Some(d), true) => writeln!(w, "removed {} ({d})", self.view),
            (Some(d), false) => writeln!(w, "forgot {} ({d}): already gone", self.view),
            (None, _) => writeln!(
                w,
                "nothing to discard at {}: no view is there or recorded (already gone)",
                self.view
            ),
        }
    }
}

/// Removes a view: directories get write permission, files are never chmod-ed.
///
/// A recorded view whose directory is already gone, by another discard or by
/// the removal of its parents, is forgotten. The store's shared views are
/// refused: sandboxes may have them mounted, and only gc removes them.
pub fn discard(store_root: &Path, opts: &DiscardOptions<'_>) -> Result<DiscardReport> {
    let mut store = Store::open(store_root, LockMode::Shared, false)?;
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
    let shared_dir = store.root().join(crate::store::VIEWS_DIR);
    if row.as_ref().is_some_and(|r| r.kind == "shared") || dest.starts_with(&shared_dir) {
        return Err(Error::Conflict(format!(
            "'{}' is a shared view of the store, which running sandboxes may have mounted; \
             discard never removes one: `cestore gc` does, once `cestore rm` has forgotten its snapshot",
            dest.display()
        )));
    }
    let (digest, recorded) = match (&row, opts.force_digest) {
        (Some(row), _) if found.is_some() && row.root_id.is_some() && found != row.root_id => {
            return Err(Error::Conflict(format!(
                "'{}' is no longer the view checkout made (its root directory was replaced); not removed. \
                 Check it with `cestore verify --tree {} {}`",
                dest.display(),
                dest.display(),
                row.digest
            )))
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
            })
        }
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
            if found.is_none() {
                return Err(Error::NotFound {
                    what: "directory",
                    path: dest,
                });
            }
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
    // Of two discards of one view, the one whose removal takes the view's
    // root removed it; the other finds it already gone. The record is
    // forgotten once, by whichever gets there first.
    let removed = match found {
        Some(_) => {
            let parent_fd = crate::fsutil::open_dir(rustix::fs::CWD, &parent)
                .ctx("open the view's parent", &parent)?;
            remove_tree_at(parent_fd.as_fd(), &name).ctx("remove the view", &dest)?
        }
        None => false,
    };
    if recorded {
        store.catalogue_mut().remove_view(&dest_text)?;
    }
    Ok(DiscardReport {
        view: dest_text,
        manifest_digest: Some(digest),
        recorded,
        removed,
    })
}
