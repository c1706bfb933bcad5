//! Writable copies of a snapshot (`checkout --writable`) and a task's
//! `sandbox_copy` materialized into a clone (`materialize`).
//!
//! Neither is a view: no file shares an inode with the store, so nothing
//! is recorded and nothing the store does later (rm, gc) touches them.
//! Both read the objects of a snapshot that passes the store's checks, and
//! bound their buffered copies by one [`FallbackBudget`].

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use crate::catalogue::resolve;
use crate::digest::ManifestDigest;
use crate::error::{Error, IoContext, Result};
use crate::profile::tree::stored::{Kind, Stored};
use crate::store::views::copies::{
    writable_copy, FallbackBudget, ObjectSource, Written, MAX_FALLBACK_BYTES,
};
use crate::store::views::layout::{self, kind_of};
use crate::store::views::materialize::materialize_tree;
use crate::store::views::Destination;
use crate::store::Store;

/// The report of `cestore checkout --writable`.
#[derive(Debug, serde::Serialize)]
pub struct WritableReport {
    /// The snapshot copied.
    pub manifest_digest: ManifestDigest,
    /// Its kind: `ce`, `tree`, `dependencies` or `task`.
    pub profile: &'static str,
    /// The copy's absolute path.
    pub path: String,
    /// Always true: the files are the copy's own.
    pub writable: bool,
    /// What making the copy did.
    #[serde(flatten)]
    pub written: Written,
    /// The bound on the bytes buffered copies could write.
    pub max_fallback_bytes: u64,
}

/// The report of `cestore materialize`.
#[derive(Debug, serde::Serialize)]
pub struct MaterializeReport {
    /// The task snapshot.
    pub digest: ManifestDigest,
    /// The clone, absolute.
    pub clone: PathBuf,
    /// The roots replaced, as the task declared them, in order.
    pub declarations: Vec<String>,
    /// What making the copies did.
    #[serde(flatten)]
    pub written: Written,
    /// The bound on the bytes buffered copies could write.
    pub max_fallback_bytes: u64,
}

/// A fallback bound as given: at most [`MAX_FALLBACK_BYTES`], the default.
pub fn fallback_budget(max: Option<u64>) -> Result<FallbackBudget> {
    match max {
        None => Ok(FallbackBudget::default()),
        Some(n) if n <= MAX_FALLBACK_BYTES => Ok(FallbackBudget::new(n)),
        Some(n) => Err(Error::Usage(format!(
            "the fallback bound {n} is above its ceiling of {MAX_FALLBACK_BYTES} bytes (2 GiB)"
        ))),
    }
}

fn objects_of(store: &Store) -> (PathBuf, std::os::fd::BorrowedFd<'_>) {
    (store.root().join("objects"), store.objects())
}

/// Makes a writable copy of a snapshot (a digest or unique prefix) at
/// `dest`, which must not exist: files at 0600 (reflinks of their objects,
/// or copies within `max_fallback_bytes`), directories at 0700, symlinks
/// recreated. A failure leaves nothing at `dest` or beside it.
pub fn checkout_writable(
    store: &Store,
    digest: &str,
    dest: &Path,
    max_fallback_bytes: Option<u64>,
) -> Result<WritableReport> {
    let mut budget = fallback_budget(max_fallback_bytes)?;
    let digest = resolve(store.catalogue(), digest)?;
    let dest = Destination::check(store, dest)?;
    let layout = layout::writable_layout(store, &digest)?;
    let path = dest.path();
    let parent_fd = crate::fsutil::open_dir(rustix::fs::CWD, &dest.parent)
        .ctx("open the destination's parent", &dest.parent)?;
    let work = store.work_dir("checkout")?;
    let (objects_path, objects) = objects_of(store);
    let written = writable_copy(
        ObjectSource {
            dir: objects,
            path: &objects_path,
        },
        &layout,
        parent_fd.as_fd(),
        dest.name.as_os_str(),
        &path,
        &mut budget,
        |tmp| work.mark_target(&dest.parent.join(tmp)),
    )?;
    drop(work);
    Ok(WritableReport {
        manifest_digest: digest,
        profile: kind_of(store, &digest).name(),
        path: path.to_string_lossy().into_owned(),
        writable: true,
        written,
        max_fallback_bytes: budget.limit(),
    })
}

/// Replaces each root a task snapshot (a digest or unique prefix)
/// declared in the clone at `clone` with its `sandbox_copy` tree, as the
/// harness's `TaskAssetSnapshot.materialize` does; a failure leaves the
/// clone as it was (see `store::views::materialize`).
pub fn materialize(
    store: &Store,
    digest: &str,
    clone: &Path,
    max_fallback_bytes: Option<u64>,
) -> Result<MaterializeReport> {
    let mut budget = fallback_budget(max_fallback_bytes)?;
    let digest = resolve(store.catalogue(), digest)?;
    let kind = kind_of(store, &digest);
    if kind != Kind::Task {
        return Err(Error::Usage(format!(
            "{digest} is a {} snapshot, not a task snapshot; materialize takes the digest a task ingest printed",
            kind.name()
        )));
    }
    let Stored::Task(record) = layout::stored_to_hand_out(store, &digest)? else {
        return Err(Error::Usage(format!("{digest} is not a task snapshot")));
    };
    let [tree_digest, _] = record.named();
    let entries = match layout::stored_to_hand_out(store, &tree_digest)? {
        Stored::Tree(entries) => entries,
        other => {
            return Err(crate::error::Damage::SnapshotBreaksRule {
                digest: tree_digest,
                rule: format!(
                    "a task names it as its tree manifest, but it is a {} manifest",
                    other.profile()
                ),
            }
            .into())
        }
    };
    let work = store.work_dir("materialize")?;
    let (objects_path, objects) = objects_of(store);
    let written = materialize_tree(
        ObjectSource {
            dir: objects,
            path: &objects_path,
        },
        &entries,
        &record.declarations,
        clone,
        &mut budget,
        |staging| work.mark_target(staging),
    )?;
    drop(work);
    Ok(MaterializeReport {
        digest,
        clone: crate::store::views::materialize::real_clone(clone)?,
        declarations: record.declarations,
        written,
        max_fallback_bytes: budget.limit(),
    })
}
