//! Engine-neutral transfers: push a snapshot's blobs (its packs and raw
//! objects) then its record, and fetch the blobs a pull lacks, several at a
//! time, each streamed into the store's work directory as it arrives; and
//! [`pull`], a snapshot taken whole from a remote into the store.

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::PathBuf;

use super::pack::{self, PackRef};
use super::{
    Format, Mismatch, Outgoing, OutgoingError, PackDamage, Published, Remote, SnapshotRef,
};
use crate::digest::{ObjectHasher, ObjectId};
use crate::error::{Error, IoContext, Result};
use crate::progress::Progress;
use crate::store::ingest::adopt::{adopt, Arrival, Staging, Wanted};
use crate::store::ingest::IngestReport;
use crate::store::{Opener, Store};

/// Transfers in flight at once, unless the caller asks for another number.
pub const DEFAULT_JOBS: usize = 4;

/// The most bytes of buffers a push holds, in use or kept for the next
/// blobs, whatever the number of jobs: a blob read whole (a pack; an
/// object, to a remote that is not a registry, which gets its objects
/// streamed) waits until its bytes fit, one larger than this until it is
/// alone.
pub const PUSH_MEMORY: u64 = 64 * 1024 * 1024;

/// Memory for the blobs a push reads whole: buffers whose capacities, in
/// use or kept for the next blobs, add up to at most `total` (one larger
/// blob alone). Buffers are reused rather than freed, since the allocator
/// would keep freed ones anyway.
struct Budget {
    pool: std::sync::Mutex<Pool>,
    freed: std::sync::Condvar,
    total: u64,
}

/// A [`Budget`]'s state: the bytes no buffer holds, and the buffers kept.
struct Pool {
    free: u64,
    spare: Vec<Vec<u8>>,
}

/// A buffer taken from a [`Budget`], kept for the next blob when dropped.
struct Held<'b> {
    budget: &'b Budget,
    /// What it counts against the budget.
    charged: u64,
    buffer: Vec<u8>,
}

impl Budget {
    fn new(total: u64) -> Budget {
        Budget {
            pool: std::sync::Mutex::new(Pool {
                free: total,
                spare: Vec::new(),
            }),
            freed: std::sync::Condvar::new(),
            total,
        }
    }

    /// An empty buffer for `bytes`: the smallest kept one that holds them,
    /// else a new one once the budget has room (at most the whole budget
    /// for a larger blob), made by dropping kept ones if need be.
    fn take(&self, bytes: u64) -> Held<'_> {
        let want = bytes.min(self.total);
        let mut pool = self
            .pool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            let fit = (0..pool.spare.len())
                .filter(|&i| pool.spare[i].capacity() as u64 >= bytes)
                .min_by_key(|&i| pool.spare[i].capacity());
            if let Some(i) = fit {
                let buffer = pool.spare.swap_remove(i);
                return Held {
                    budget: self,
                    charged: buffer.capacity() as u64,
                    buffer,
                };
            }
            while pool.free < want {
                let Some(kept) = pool.spare.pop() else {
                    break;
                };
                pool.free += kept.capacity() as u64;
            }
            if pool.free >= want {
                pool.free -= want;
                return Held {
                    budget: self,
                    charged: want,
                    buffer: Vec::with_capacity(usize::try_from(bytes).unwrap_or(0)),
                };
            }
            pool = self
                .freed
                .wait(pool)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.clear();
        let mut pool = self
            .budget
            .pool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pool.free += self.charged;
        let kept = buffer.capacity() as u64;
        if kept > 0 && kept <= pool.free {
            pool.free -= kept;
            pool.spare.push(buffer);
        }
        self.budget.freed.notify_all();
    }
}

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
    /// Packs the snapshot is carried in (0 in format 1).
    pub packs_total: u64,
    /// Packs uploaded by this push.
    pub packs_uploaded: u64,
}

/// What a pull fetched.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FetchStats {
    /// Distinct blobs downloaded.
    pub blobs_fetched: u64,
    /// Bytes downloaded.
    pub bytes_fetched: u64,
    /// Packs downloaded (0 in format 1).
    pub packs_fetched: u64,
    /// Packs not downloaded: every object they carry was in the store, or
    /// came from an earlier pack.
    pub packs_skipped: u64,
}

/// Where a blob's bytes come from during a push.
enum Source<'a> {
    Memory(&'a [u8]),
    Object(PathBuf),
    /// A pack, built from the store's objects when its turn comes.
    Pack(&'a [pack::PackObject], Vec<PathBuf>),
}

struct BlobJob<'a> {
    id: ObjectId,
    size: u64,
    source: Source<'a>,
}

/// What one push job did: the blob's digest and size, and whether it was
/// uploaded.
struct Done {
    id: ObjectId,
    size: u64,
    uploaded: bool,
}

impl Sized64 for Done {
    fn bytes(&self) -> u64 {
        if self.uploaded {
            self.size
        } else {
            0
        }
    }
}

/// Pushes a snapshot: builds its packs (format 2), asks the remote for
/// every blob, uploads the missing ones (`jobs` at a time), then publishes
/// the snapshot's record last.
pub fn push(
    remote: &dyn Remote,
    store: &Store,
    outgoing: &Outgoing<'_>,
    jobs: usize,
    progress: bool,
) -> Result<(PushStats, Published)> {
    let layout = match outgoing.format {
        Format::V1 => pack::Layout::default(),
        Format::V2 => pack::layout(outgoing.manifest),
    };
    let list = blob_jobs(store, outgoing, &layout);
    let budget = Budget::new(PUSH_MEMORY);
    let done = parallel(&list, jobs, "push", progress, |job| {
        push_blob(remote, job, &budget)
    })?;
    let mut stats = PushStats {
        blobs_total: list.len() as u64,
        ..PushStats::default()
    };
    let mut outgoing = outgoing.clone();
    for (job, d) in list.iter().zip(&done) {
        if d.uploaded {
            stats.blobs_uploaded += 1;
            stats.bytes_uploaded += d.size;
        } else {
            stats.blobs_present += 1;
        }
        if let Source::Pack(objects, _) = &job.source {
            stats.packs_total += 1;
            stats.packs_uploaded += u64::from(d.uploaded);
            let (slots, size) = pack::slots(objects.iter().map(|o| (o.key.id, o.size)));
            outgoing.packs.push(PackRef {
                digest: d.id,
                size,
                slots,
            });
        }
    }
    outgoing.raw = layout.raw.clone();
    let published = remote.publish(&outgoing)?;
    Ok((stats, published))
}

/// The blobs a push offers, the canonical manifest (the config) first: in
/// format 1 each distinct object raw; in format 2 the packs of `layout`,
/// then its raw objects.
fn blob_jobs<'a>(
    store: &Store,
    outgoing: &Outgoing<'a>,
    layout: &'a pack::Layout,
) -> Vec<BlobJob<'a>> {
    let manifest = outgoing.manifest;
    let mut list = vec![BlobJob {
        id: ObjectId::from_bytes(*manifest.digest.as_bytes()),
        size: manifest.bytes.len() as u64,
        source: Source::Memory(&manifest.bytes),
    }];
    match outgoing.format {
        Format::V1 => {
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
        }
        Format::V2 => {
            for p in &layout.packs {
                let (_, size) = pack::slots(p.iter().map(|o| (o.key.id, o.size)));
                list.push(BlobJob {
                    // Known once the pack is built.
                    id: ObjectId::from_bytes([0; 32]),
                    size,
                    source: Source::Pack(p, p.iter().map(|o| store.object_path(&o.key)).collect()),
                });
            }
            for r in &layout.raw {
                list.push(BlobJob {
                    id: r.key.id,
                    size: r.size,
                    source: Source::Object(store.object_path(&r.key)),
                });
            }
        }
    }
    list
}

/// Pushes one blob unless the remote has it: an object is asked for before
/// it is read; a pack is built first, since its digest is its bytes'. An
/// object goes to a registry streamed from its file, hashed as it is sent
/// (to another remote it is read whole first); a pack's bytes are taken
/// from `budget` before it is built.
fn push_blob(remote: &dyn Remote, job: &BlobJob<'_>, budget: &Budget) -> Result<Done> {
    match &job.source {
        Source::Memory(b) => send(remote, &job.id, b),
        Source::Object(path) => {
            if remote.has_blob(&job.id)? {
                return Ok(Done {
                    id: job.id,
                    size: job.size,
                    uploaded: false,
                });
            }
            if let Some(oci) = remote.as_oci() {
                let payload = super::oci::client::Payload::File {
                    path,
                    len: job.size,
                    id: &job.id,
                };
                if let Err(e) = oci.client().put_payload(&job.id, payload) {
                    // A file that changed under the push is named as such.
                    check_object_file(path, &job.id, job.size)?;
                    return Err(e.into());
                }
                return Ok(Done {
                    id: job.id,
                    size: job.size,
                    uploaded: true,
                });
            }
            let mut held = budget.take(job.size);
            read_object_into(path, &job.id, job.size, &mut held.buffer)?;
            remote.put_blob(&job.id, &held.buffer)?;
            Ok(Done {
                id: job.id,
                size: job.size,
                uploaded: true,
            })
        }
        Source::Pack(objects, paths) => {
            let mut held = budget.take(job.size);
            let mut w = pack::PackWriter::with_buffer(std::mem::take(&mut held.buffer));
            for (o, path) in objects.iter().zip(paths) {
                w.add_with(&o.key.id, o.size, |into| {
                    read_object_into(path, &o.key.id, o.size, into)
                })?;
            }
            held.buffer = w.finish();
            send(remote, &ObjectId::of(&held.buffer), &held.buffer)
        }
    }
}

/// Uploads `data` as the blob `id`, unless the remote has it.
fn send(remote: &dyn Remote, id: &ObjectId, data: &[u8]) -> Result<Done> {
    let uploaded = !remote.has_blob(id)?;
    if uploaded {
        remote.put_blob(id, data)?;
    }
    Ok(Done {
        id: *id,
        size: data.len() as u64,
        uploaded,
    })
}

/// Refuses an object file that no longer hashes to its key, reading it as
/// a stream.
fn check_object_file(path: &std::path::Path, id: &ObjectId, size: u64) -> Result<()> {
    let file = std::fs::File::open(path).ctx("read an object", path)?;
    let found =
        ObjectId::of_reader(file.take(size.saturating_add(1))).ctx("read an object", path)?;
    if found != (*id, size) {
        return Err(OutgoingError::ObjectChanged {
            path: path.to_path_buf(),
        }
        .into());
    }
    Ok(())
}

/// Appends an object from the store to `into`, refusing one that no longer
/// hashes to its key.
fn read_object_into(
    path: &std::path::Path,
    id: &ObjectId,
    size: u64,
    into: &mut Vec<u8>,
) -> Result<()> {
    let start = into.len();
    std::fs::File::open(path)
        .and_then(|f| f.take(size.saturating_add(1)).read_to_end(into))
        .ctx("read an object", path)?;
    let data = &into[start..];
    let mut h = ObjectHasher::default();
    h.update(data);
    if data.len() as u64 != size || h.finish() != *id {
        return Err(OutgoingError::ObjectChanged {
            path: path.to_path_buf(),
        }
        .into());
    }
    Ok(())
}

/// One download of a pull: a raw blob for the objects of one content, or a
/// pack with the objects to stage from it.
enum FetchJob<'w> {
    Raw(Vec<&'w Wanted>),
    Pack(&'w PackRef, BTreeMap<ObjectId, Vec<&'w Wanted>>),
}

/// Fetches the objects `wanted` (`jobs` downloads at a time), streaming each
/// one into `staging`, which checks its size and hash as it arrives.
///
/// A content carried raw is fetched as its blob. Any other is taken from the
/// first pack (in the record's order) that carries it; a pack none of whose
/// objects is wanted is not fetched. `carriers` must have passed
/// [`pack::check`].
pub fn fetch(
    remote: &dyn Remote,
    wanted: &[Wanted],
    carriers: &pack::Carriers,
    jobs: usize,
    progress: bool,
    staging: &Staging<'_>,
) -> Result<FetchStats> {
    // The same content wanted executable and not is fetched once. What an
    // earlier pull fetched, checked and left is not fetched again.
    staging.resume_stale();
    let mut by_id: BTreeMap<ObjectId, Vec<&Wanted>> = BTreeMap::new();
    for w in wanted {
        by_id.entry(w.key.id).or_default().push(w);
    }
    // Each kept object is hashed again before it is taken: `jobs` at a time.
    let groups: Vec<(&ObjectId, &Vec<&Wanted>)> = by_id.iter().collect();
    let resumed = crate::pool::map(
        &groups,
        jobs.max(1),
        || (),
        |(), (id, ws)| {
            let mut from = None;
            for w in ws.iter() {
                if staging.resume(w)? {
                    from = Some(w.key);
                    break;
                }
            }
            let Some(from) = from else {
                return Ok::<_, Error>(None);
            };
            for other in ws.iter() {
                if other.key != from && !staging.resume(other)? {
                    staging.copy(&from, other)?;
                }
            }
            Ok(Some(**id))
        },
    )?;
    for id in resumed.into_iter().flatten() {
        by_id.remove(&id);
    }
    let mut in_pack: BTreeMap<ObjectId, usize> = BTreeMap::new();
    for (i, p) in carriers.packs.iter().enumerate() {
        for s in &p.slots {
            in_pack.entry(s.id).or_insert(i);
        }
    }
    let mut list: Vec<FetchJob<'_>> = Vec::new();
    let mut assigned: BTreeMap<usize, BTreeMap<ObjectId, Vec<&Wanted>>> = BTreeMap::new();
    for (id, ws) in by_id {
        if carriers.raw.contains(&id) {
            list.push(FetchJob::Raw(ws));
        } else if let Some(&i) = in_pack.get(&id) {
            assigned.entry(i).or_default().insert(id, ws);
        } else {
            return Err(crate::store::ingest::adopt::AdoptError::BlobMissing(id).into());
        }
    }
    let packs_fetched = assigned.len() as u64;
    for (i, objects) in assigned {
        list.push(FetchJob::Pack(&carriers.packs[i], objects));
    }
    // The largest first: the jobs then end together, with no large blob
    // left to one thread at the end.
    list.sort_by_key(|job| {
        std::cmp::Reverse(match job {
            FetchJob::Raw(ws) => ws[0].size,
            FetchJob::Pack(p, _) => p.size,
        })
    });
    let sizes = parallel(&list, jobs, "pull", progress, |job| match job {
        FetchJob::Raw(ws) => {
            let w = ws[0];
            let mut body = remote.open_blob(&w.key.id)?;
            staging.stage(w, &mut body, &super::read_error)?;
            for other in &ws[1..] {
                staging.copy(&w.key, other)?;
            }
            Ok(Some(w.size))
        }
        FetchJob::Pack(p, objects) => {
            let body = remote.open_blob(&p.digest)?;
            extract(body, p, &|slot, data| match objects.get(&slot.id) {
                Some(ws) => {
                    let w = ws[0];
                    staging.stage(w, data, &super::read_error)?;
                    for other in &ws[1..] {
                        staging.copy(&w.key, other)?;
                    }
                    Ok(true)
                }
                None => Ok(false),
            })?;
            Ok(Some(p.size))
        }
    })?;
    let mut stats = FetchStats {
        packs_fetched,
        packs_skipped: carriers.packs.len() as u64 - packs_fetched,
        ..FetchStats::default()
    };
    for size in sizes {
        stats.blobs_fetched += 1;
        stats.bytes_fetched += size.unwrap_or(0);
    }
    Ok(stats)
}

/// Streams a pack, checking it against its index as it goes: every header
/// is byte for byte the one a cestore pack has for the next slot's object,
/// every object hashes to its slot's SHA-256 (the wanted ones are staged,
/// the others hashed and dropped), every padding and the two end blocks
/// are zero, and nothing follows. Every byte of the pack is then the one
/// its index implies, so the pack is not hashed whole as well: its digest
/// only names what to fetch. Reads at most the pack's listed size and one
/// byte more. `stage` is offered each object's data (exactly its slot's
/// size at most) and says whether it took it (staging checks size and
/// hash); the others are hashed here.
fn extract(
    body: impl Read,
    p: &PackRef,
    stage: &dyn Fn(&pack::Slot, &mut dyn Read) -> Result<bool>,
) -> Result<()> {
    let damaged = |problem: PackDamage| -> Error {
        Mismatch::Pack {
            pack: p.digest,
            problem,
        }
        .into()
    };
    let mut r = body.take(p.size.saturating_add(1));
    let mut block = [0u8; pack::BLOCK as usize];
    for s in &p.slots {
        read_exact(&mut r, &mut block).map_err(|e| match e {
            ReadFail::Short => damaged(PackDamage::TruncatedBefore(s.id)),
            ReadFail::Io(e) => super::read_error(e),
        })?;
        if block != pack::header(&s.id, s.size) {
            return Err(damaged(PackDamage::NoHeader {
                object: s.id,
                offset: s.offset - pack::BLOCK,
            }));
        }
        if !stage(s, &mut (&mut r).take(s.size))? {
            let (id, n) = ObjectId::of_reader((&mut r).take(s.size)).map_err(super::read_error)?;
            if n != s.size {
                return Err(damaged(PackDamage::TruncatedIn(s.id)));
            }
            if id != s.id {
                return Err(damaged(PackDamage::Object {
                    object: s.id,
                    found: id,
                }));
            }
        }
        let pad = (s.size.div_ceil(pack::BLOCK) * pack::BLOCK - s.size) as usize;
        read_exact(&mut r, &mut block[..pad]).map_err(|e| match e {
            ReadFail::Short => damaged(PackDamage::TruncatedAfter(s.id)),
            ReadFail::Io(e) => super::read_error(e),
        })?;
        if block[..pad].iter().any(|&b| b != 0) {
            return Err(damaged(PackDamage::Padding(s.id)));
        }
    }
    for _ in 0..2 {
        read_exact(&mut r, &mut block).map_err(|e| match e {
            ReadFail::Short => damaged(PackDamage::TruncatedEnd),
            ReadFail::Io(e) => super::read_error(e),
        })?;
        if block.iter().any(|&b| b != 0) {
            return Err(damaged(PackDamage::EndBlocks));
        }
    }
    let mut one = [0u8; 1];
    match read_exact(&mut r, &mut one) {
        Err(ReadFail::Short) => Ok(()),
        Ok(()) => Err(damaged(PackDamage::Longer(p.size))),
        Err(ReadFail::Io(e)) => Err(super::read_error(e)),
    }
}

enum ReadFail {
    Short,
    Io(std::io::Error),
}

/// Fills `buf`, or tells that the stream ended first.
fn read_exact(r: &mut dyn Read, buf: &mut [u8]) -> std::result::Result<(), ReadFail> {
    let mut at = 0;
    while at < buf.len() {
        match r.read(&mut buf[at..]) {
            Ok(0) => return Err(ReadFail::Short),
            Ok(n) => at += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadFail::Io(e)),
        }
    }
    Ok(())
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

/// Where a pull came from and what it fetched.
#[derive(Debug, serde::Serialize)]
pub struct PullStats {
    /// The remote record pulled, as `oci://REGISTRY/REPOSITORY@sha256:<hex>`.
    pub source: String,
    /// The digest of the remote record (image manifest or index).
    pub remote_digest: String,
    /// The record's media type.
    pub media_type: String,
    /// How many image manifests the record has.
    pub manifests: usize,
    /// The record's format: 1 (one layer per file) or 2 (packs).
    pub format: u8,
    /// Attestations fetched from beside the record.
    pub attestations_fetched: u64,
    /// What was downloaded.
    #[serde(flatten)]
    pub fetched: FetchStats,
    /// The requests sent and the bytes they carried.
    pub requests: super::oci::client::Traffic,
}

/// The report of a pull: the ingest report and the transfer.
#[derive(Debug, serde::Serialize)]
pub struct PullReport {
    /// What entered the store.
    #[serde(flatten)]
    pub ingest: IngestReport,
    /// What was transferred.
    pub pull: PullStats,
    /// The attestations that came with the snapshot (DSSE envelopes, as
    /// bytes), as the trust check saw them; not part of the report's JSON.
    #[serde(skip)]
    pub attestations: Vec<Vec<u8>>,
    /// The snapshots it names (an environment's members, a task's tree and
    /// dependency list) that the store lacked and took first, in the order
    /// taken; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberPulled>,
}

/// A snapshot a pull took because the one pulled names it.
#[derive(Debug, serde::Serialize)]
pub struct MemberPulled {
    /// Its digest.
    pub manifest_digest: crate::digest::ManifestDigest,
    /// Where it came from, as `oci://REGISTRY/REPOSITORY@sha256:<hex>`.
    pub source: String,
    /// Objects written.
    pub new_objects: u64,
    /// Objects found already stored.
    pub reused_objects: u64,
}

/// How a pull records each snapshot it takes in the ingest log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrived {
    /// `pull`: asked for, by `cestore pull` or an audit's `--registry`.
    Pulled,
    /// `substitute`: fetched from a substituter because a command needed
    /// it ([`super::substitute`]); `cestore show` says `substituted`.
    Substituted,
}

impl Arrived {
    /// The event's name in the ingest log.
    pub fn event(self) -> &'static str {
        match self {
            Arrived::Pulled => "pull",
            Arrived::Substituted => crate::catalogue::SUBSTITUTE_EVENT,
        }
    }
}

/// Takes the snapshot `reference` names on `remote` into the store at
/// `open` gives (made when it is not there, once the snapshot is known),
/// `jobs` downloads at a time.
///
/// The remote's record is fetched, its config (the canonical manifest) must
/// hash to the snapshot digest the record and the reference name, and
/// [`adopt`] then checks the manifest against the ingest rules and every
/// fetched blob against its hash before anything enters the store. Only the
/// objects the store lacks are fetched: a pack none of whose objects is
/// wanted is skipped. Any attestations beside the record come along and are
/// kept with the snapshot; with keys `trusted`, a snapshot none of them
/// vouches for is refused before any object is fetched or anything enters
/// the store ([`crate::store::trust::signed::trust_check`]).
///
/// A snapshot that names others (an environment its members, a task its
/// tree and dependency list) comes with them: each the store lacks is
/// resolved on the same repository by its digest tag and trust-checked
/// before any is taken, then each is taken in dependency order (resolved
/// again as it is taken, and checked again: memory holds one member's
/// manifest at a time, however many are named), and the snapshot named by
/// `reference` last: a pull that fails leaves it unrecorded (the members
/// taken before stay: each is a whole snapshot).
pub fn pull(
    open: Opener<'_>,
    remote: &dyn Remote,
    reference: &SnapshotRef,
    jobs: usize,
    progress: bool,
    trusted: &[crate::sign::PublicKey],
    arrived: Arrived,
) -> Result<PullReport> {
    let incoming = remote.resolve(reference)?;
    let check = crate::store::trust::signed::trust_check(trusted);
    check(&incoming.attestations, &incoming.snapshot)?;
    let members = incoming_members(open, remote, &incoming, trusted)?;
    for (digest, attestations) in &members {
        check(attestations, digest)?;
    }
    let mut pulled = Vec::new();
    for (digest, _) in members {
        let m = remote.resolve(&SnapshotRef::Tag(super::snapshot_tag(&digest)))?;
        check(&m.attestations, &m.snapshot)?;
        let r = adopt_incoming(open, remote, m, jobs, progress, trusted, arrived)?;
        pulled.push(MemberPulled {
            manifest_digest: r.ingest.provenance.manifest_digest,
            source: r.pull.source,
            new_objects: r.ingest.ingest.new_objects,
            reused_objects: r.ingest.ingest.reused_objects,
        });
    }
    let mut report = adopt_incoming(open, remote, incoming, jobs, progress, trusted, arrived)?;
    report.members = pulled;
    Ok(report)
}

/// The snapshots `incoming` names, directly or not, that the store (when
/// there is one) lacks, in dependency order, each with the attestations
/// `remote` holds for it: each is resolved by its digest tag to read what
/// it names in turn, and only its digest and attestations are kept. With
/// keys `trusted`, one the store holds already must be signed by one of
/// them there.
fn incoming_members(
    open: Opener<'_>,
    remote: &dyn Remote,
    incoming: &super::Incoming,
    trusted: &[crate::sign::PublicKey],
) -> Result<Vec<(crate::digest::ManifestDigest, Vec<Vec<u8>>)>> {
    let named = |m: &crate::profile::ce::manifest::Manifest| {
        m.tree.as_ref().map(|t| t.named()).unwrap_or_default()
    };
    let first = named(&incoming.manifest);
    if first.is_empty() {
        return Ok(Vec::new());
    }
    // Only a store that is there may hold some already; none is made here.
    let store = open(crate::store::Need::Existing).ok();
    let present = |d: &crate::digest::ManifestDigest| {
        store
            .as_ref()
            .is_some_and(|s| s.catalogue().has_snapshot(d).unwrap_or(false))
    };
    let mut resolved: BTreeMap<crate::digest::ManifestDigest, Vec<Vec<u8>>> = BTreeMap::new();
    let order = crate::profile::tree::stored::closure(&incoming.snapshot, &mut |d| {
        if *d == incoming.snapshot {
            return Ok(first.clone());
        }
        if present(d) {
            if let (false, Some(store)) = (trusted.is_empty(), store.as_ref()) {
                let held = crate::store::trust::signed::stored_envelopes(store, d)?;
                crate::store::trust::signed::require_trusted(
                    held.iter().map(Vec::as_slice),
                    trusted,
                    d,
                )?;
            }
            return Ok(Vec::new());
        }
        // The tag promises the digest; resolve checks the record keeps it.
        let member = remote.resolve(&SnapshotRef::Tag(super::snapshot_tag(d)))?;
        let next = named(&member.manifest);
        resolved.insert(*d, member.attestations);
        Ok::<_, Error>(next)
    })?;
    drop(store);
    Ok(order
        .into_iter()
        .filter_map(|d| resolved.remove(&d).map(|a| (d, a)))
        .collect())
}

/// Takes one resolved snapshot into the store (see [`pull`]).
fn adopt_incoming(
    open: Opener<'_>,
    remote: &dyn Remote,
    incoming: super::Incoming,
    jobs: usize,
    progress: bool,
    trusted: &[crate::sign::PublicKey],
    arrived: Arrived,
) -> Result<PullReport> {
    let mut fetched = FetchStats::default();
    let ingest = adopt(
        open,
        &incoming.manifest,
        Some(incoming.snapshot),
        &Arrival {
            event: arrived.event(),
            source: &incoming.source,
            origin: incoming.origin.as_ref(),
            sources: incoming.sources.clone(),
            attestations: crate::store::trust::signed::received(&incoming.attestations, trusted),
        },
        |wanted, staging| {
            fetched = fetch(remote, wanted, &incoming.carriers, jobs, progress, staging)?;
            Ok(())
        },
    )?;
    Ok(PullReport {
        ingest,
        pull: PullStats {
            source: incoming.source,
            remote_digest: incoming.remote_digest,
            media_type: incoming.media_type,
            manifests: incoming.manifests,
            format: incoming.format,
            attestations_fetched: incoming.attestations.len() as u64,
            fetched,
            requests: remote
                .as_oci()
                .map(|o| o.client().traffic())
                .unwrap_or_default(),
        },
        attestations: incoming.attestations,
        members: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack_of(objects: &[&[u8]]) -> (PackRef, Vec<u8>) {
        let mut w = pack::PackWriter::default();
        for o in objects {
            w.add(&ObjectId::of(o), o);
        }
        let bytes = w.finish();
        let (slots, size) = pack::slots(objects.iter().map(|o| (ObjectId::of(o), o.len() as u64)));
        assert_eq!(size, bytes.len() as u64);
        (
            PackRef {
                digest: ObjectId::of(&bytes),
                size,
                slots,
            },
            bytes,
        )
    }

    /// The bytes a budget counts: what is held and what is kept.
    fn counted(b: &Budget) -> (u64, Vec<usize>) {
        let pool = b.pool.lock().unwrap();
        let mut kept: Vec<usize> = pool.spare.iter().map(Vec::capacity).collect();
        kept.sort_unstable();
        (b.total - pool.free, kept)
    }

    #[test]
    fn a_budget_reuses_buffers_and_never_counts_more_than_its_total() {
        let b = Budget::new(100);
        let first = b.take(60);
        let second = b.take(30);
        assert_eq!(counted(&b), (90, vec![]));
        let reused = first.buffer.as_ptr();
        drop(first);
        assert_eq!(counted(&b), (90, vec![60]));
        // The smallest kept buffer that holds the bytes, its memory counted once.
        let third = b.take(50);
        assert_eq!(third.buffer.as_ptr(), reused);
        assert_eq!(counted(&b), (90, vec![]));
        drop((second, third));
        assert_eq!(counted(&b), (90, vec![30, 60]));
        // No kept buffer holds 70: kept ones go until a new one fits.
        let big = b.take(70);
        assert_eq!(counted(&b), (100, vec![30]));
        drop(big);
        assert_eq!(counted(&b), (100, vec![30, 70]));
        // A blob larger than the budget takes all of it, alone, and is not kept.
        let larger = b.take(200);
        assert_eq!(counted(&b), (100, vec![]));
        drop(larger);
        assert_eq!(counted(&b), (0, vec![]));
    }

    fn skip(_: &pack::Slot, _: &mut dyn Read) -> Result<bool> {
        Ok(false)
    }

    #[test]
    fn extract_takes_a_whole_pack_and_refuses_any_change() {
        let objects: [&[u8]; 3] = [b"one", &[5u8; 700], b"three"];
        let (p, bytes) = pack_of(&objects);
        extract(&bytes[..], &p, &skip).unwrap();
        // The objects offered are exactly the slots' bytes.
        let seen = std::sync::Mutex::new(Vec::new());
        extract(&bytes[..], &p, &|s, data| {
            let mut v = Vec::new();
            data.read_to_end(&mut v).unwrap();
            assert_eq!(v.len() as u64, s.size);
            seen.lock().unwrap().push(v);
            Ok(true)
        })
        .unwrap();
        assert_eq!(seen.into_inner().unwrap(), objects.map(<[u8]>::to_vec));

        let refuse = |bytes: &[u8], why: &str| {
            let err = extract(bytes, &p, &skip).unwrap_err().to_string();
            assert!(err.contains(why), "{why}: {err}");
        };
        refuse(&bytes[..bytes.len() - 1], "truncated in its end blocks");
        refuse(&bytes[..514], "truncated in object");
        refuse(&bytes[..600], "truncated after object");
        refuse(&bytes[..512], "truncated in object");
        refuse(&bytes[..100], "truncated before object");
        let mut longer = bytes.clone();
        longer.push(0);
        refuse(&longer, "is longer than");
        let mut changed = bytes.clone();
        changed[512] ^= 1;
        refuse(&changed, "whose bytes hash to");
        let mut changed = bytes.clone();
        changed[515] = 1;
        refuse(&changed, "changed padding");
        let mut changed = bytes.clone();
        changed[3] ^= 1;
        refuse(&changed, "has no header");
        let mut changed = bytes.clone();
        let end = changed.len() - 10;
        changed[end] = 1;
        refuse(&changed, "changed end blocks");
        // Every byte class is checked above, so bytes that pass are the
        // pack the index describes: the digest it is fetched by adds nothing.
        let other = PackRef {
            digest: ObjectId::of(b"another"),
            ..p.clone()
        };
        extract(&bytes[..], &other, &skip).unwrap();
    }
}
