//! `cestore checkout`: materialise a frozen view of a snapshot at a new path.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use super::{resolve, Report};
use crate::catalogue::{SnapshotRow, ViewRow};
use crate::digest::ManifestDigest;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::remove_tree_at;
use crate::store::{LockMode, Store};
use crate::view::{self, Built, Method};

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

impl Report for CheckoutReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "{}", self.view)?;
        writeln!(
            w,
            "{}: {} linked, {} copied, {}",
            self.manifest_digest,
            self.built.linked,
            self.built.copied,
            super::counted(self.built.directories, "directory", "directories")
        )?;
        for (why, n) in &self.built.copy_reasons {
            writeln!(w, "  copied {n}: {why}")?;
        }
        Ok(())
    }
}

/// Checks out a snapshot as a new frozen view and records it.
pub fn checkout(store_root: &Path, opts: &CheckoutOptions<'_>) -> Result<CheckoutReport> {
    let mut store = Store::open(store_root, LockMode::Shared, false)?;
    let digest = resolve(store.catalogue(), opts.digest)?;
    let dest = Destination::check(&store, opts.dest)?;
    let method = effective_method(opts.method, opts.require_hardlinks)?;
    let mut report = checkout_into(&mut store, digest, &dest, method)?;
    report.requested_method = opts.method;
    Ok(report)
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
            return Err(Error::Conflict(format!(
                "the destination '{}' already exists; a view is only made at a new path",
                dest.display()
            )));
        }
        let store_real =
            std::fs::canonicalize(store.root()).ctx("resolve the store path", store.root())?;
        if dest.starts_with(&store_real) {
            return Err(Error::Conflict(format!(
                "the destination '{}' lies inside the store '{}'; use `cestore path` for a view inside the store",
                dest.display(),
                store_real.display()
            )));
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
        (m @ (Method::Copy | Method::Reflink), true) => Err(Error::Usage(format!(
            "--require-hardlinks cannot be met with --method {}",
            if m == Method::Copy { "copy" } else { "reflink" }
        ))),
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
    let entries = store.catalogue().files(&digest)?;
    let (parent, name) = (&dest.parent, &dest.name);
    let dest = dest.path();
    let parent_fd = crate::fsutil::open_dir(rustix::fs::CWD, parent)
        .ctx("open the destination's parent", parent)?;
    let tmp = view::temp_name(name.as_os_str());
    let tmp_path = parent.join(&tmp);
    // A marker in the store names the temporary view, so that gc can remove
    // it if this process dies before publishing.
    let work = store.work_dir("checkout")?;
    work.mark_target(&tmp_path)?;
    let built =
        view::build(store, &entries, parent_fd.as_fd(), &tmp, &dest, method).and_then(|built| {
            view::publish(parent_fd.as_fd(), &tmp, name.as_os_str(), &dest)?;
            Ok(built)
        });
    let built = match built {
        Ok(b) => b,
        Err(e) => {
            let _ = remove_tree_at(parent_fd.as_fd(), &tmp);
            return Err(e);
        }
    };
    let row = ViewRow::of_built(&dest, digest, "checkout", &built);
    let snapshot = match store.catalogue_mut().add_view(&row) {
        Ok(s) => s,
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
