//! Engine-neutral transfers: push a snapshot's blobs then its record, and
//! fetch the blobs a pull lacks, several at a time, each streamed into the
//! store's work directory as it arrives.

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::PathBuf;

use super::{Outgoing, Published, Remote};
use crate::digest::{ObjectHasher, ObjectId};
use crate::error::{Error, IoContext, Result};
use crate::progress::Progress;
use crate::store::adopt::{Staging, Wanted};
use crate::store::Store;

/// What a push transferred.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PushStats {
    /// Distinct blobs the snapshot needs on the remote: its objects (by
    /// content) and the canonical manifest.
    pub blobs_total: u64,
    /// Blobs uploaded by this push.
    pub blobs_uploaded: u64,
    /// Blobs the remote already held.
    pub blobs_present: u64,
    /// Bytes uploaded.
    pub bytes_uploaded: u64,
}

/// What a pull fetched.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FetchStats {
    /// Distinct blobs downloaded.
    pub blobs_fetched: u64,
    /// Bytes downloaded.
    pub bytes_fetched: u64,
}

/// Where a blob's bytes come from during a push.
enum Source<'a> {
    Memory(&'a [u8]),
    Object(PathBuf),
}

struct BlobJob<'a> {
    id: ObjectId,
    size: u64,
    source: Source<'a>,
}

/// Pushes a snapshot: asks the remote for every blob, uploads the missing
/// ones (`jobs` at a time), then publishes the snapshot's record last.
pub fn push(
    remote: &dyn Remote,
    store: &Store,
    outgoing: &Outgoing<'_>,
    jobs: usize,
    progress: bool,
) -> Result<(PushStats, Published)> {
    let manifest = outgoing.manifest;
    let mut list = vec![BlobJob {
        id: ObjectId::from_bytes(*manifest.digest.as_bytes()),
        size: manifest.bytes.len() as u64,
        source: Source::Memory(&manifest.bytes),
    }];
    let mut seen = HashSet::new();
    for o in &outgoing.objects {
        if seen.insert(o.key.id) {
            list.push(BlobJob {
                id: o.key.id,
                size: o.size,
                source: if o.size == 0 {
                    Source::Memory(&[])
                } else {
                    Source::Object(store.object_path(&o.key))
                },
            });
        }
    }
    let uploaded = parallel(&list, jobs, "push", progress, |job| {
        if remote.has_blob(&job.id)? {
            return Ok(None);
        }
        let owned;
        let data = match &job.source {
            Source::Memory(b) => *b,
            Source::Object(path) => {
                owned = read_object(path, &job.id, job.size)?;
                &owned[..]
            }
        };
        remote.put_blob(&job.id, data)?;
        Ok(Some(data.len() as u64))
    })?;
    let mut stats = PushStats {
        blobs_total: list.len() as u64,
        ..PushStats::default()
    };
    for u in uploaded {
        match u {
            Some(bytes) => {
                stats.blobs_uploaded += 1;
                stats.bytes_uploaded += bytes;
            }
            None => stats.blobs_present += 1,
        }
    }
    let published = remote.publish(outgoing)?;
    Ok((stats, published))
}

/// Reads an object from the store, refusing one that no longer hashes to its key.
fn read_object(path: &std::path::Path, id: &ObjectId, size: u64) -> Result<Vec<u8>> {
    let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    std::fs::File::open(path)
        .and_then(|f| f.take(size.saturating_add(1)).read_to_end(&mut data))
        .ctx("read an object", path)?;
    let mut h = ObjectHasher::default();
    h.update(&data);
    if data.len() as u64 != size || h.finish() != *id {
        return Err(Error::Integrity(format!(
            "object '{}' no longer matches its key; run `cestore verify`",
            path.display()
        )));
    }
    Ok(data)
}

/// Fetches the blobs for `wanted` (`jobs` at a time), streaming each one
/// into `staging`, which checks its size and hash as it arrives.
pub fn fetch(
    remote: &dyn Remote,
    wanted: &[Wanted],
    jobs: usize,
    progress: bool,
    staging: &Staging<'_>,
) -> Result<FetchStats> {
    // The same content wanted executable and not is fetched once.
    let mut by_id: BTreeMap<ObjectId, Vec<&Wanted>> = BTreeMap::new();
    for w in wanted {
        by_id.entry(w.key.id).or_default().push(w);
    }
    let list: Vec<&Vec<&Wanted>> = by_id.values().collect();
    let sizes = parallel(&list, jobs, "pull", progress, |ws| {
        let w = ws[0];
        let mut body = remote.open_blob(&w.key.id)?;
        staging.stage(w, &mut body, &super::read_error)?;
        for other in &ws[1..] {
            staging.copy(&w.key, other)?;
        }
        Ok(Some(w.size))
    })?;
    let mut stats = FetchStats::default();
    for size in sizes {
        stats.blobs_fetched += 1;
        stats.bytes_fetched += size.unwrap_or(0);
    }
    Ok(stats)
}

/// Something a job can report the size of, for the progress line.
trait Sized64 {
    fn bytes(&self) -> u64;
}

impl Sized64 for Option<u64> {
    fn bytes(&self) -> u64 {
        self.unwrap_or(0)
    }
}

/// Runs `work` on every item, at most `jobs` at a time, on the shared pool,
/// and returns the results in order; the first error stops the workers.
fn parallel<T, R, F>(
    items: &[T],
    jobs: usize,
    label: &'static str,
    progress: bool,
    work: F,
) -> Result<Vec<R>>
where
    T: Sync,
    R: Send + Sized64,
    F: Fn(&T) -> Result<R> + Sync,
{
    let bar = std::sync::Mutex::new(Progress::new(label, items.len() as u64, progress));
    crate::pool::map(
        items,
        jobs,
        || (),
        |(), item| {
            let r = work(item)?;
            if let Ok(mut bar) = bar.lock() {
                bar.add(1, r.bytes());
            }
            Ok(r)
        },
    )
}
