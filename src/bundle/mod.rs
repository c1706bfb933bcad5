//! Bundles: a snapshot as one portable file, for machines without a
//! registry (`cestore export` and `cestore import`).
//!
//! A bundle is a POSIX ustar archive, optionally compressed as one zstd
//! frame (with its content checksum) followed by one zstd skippable frame
//! holding `CSTS` and the SHA-256 of the compressed frame (decoders skip it;
//! import requires it, so that a flipped byte that would still decompress to
//! the same archive is refused too). The archive holds, in this order:
//!
//! ```text
//! manifest.json          the canonical manifest bytes (mode 0444)
//! manifest.sha256        "<64 hex>  manifest.json\n", the snapshot's digest
//! origin.json            optional: where the snapshot was first ingested,
//!                        {at, host, user, source, tool_version} (0444)
//! sources.json           optional: the snapshot's source records, a JSON
//!                        list of {at, record} (0444; see source::carried)
//! attestations/<64 hex>.json
//!                        optional: one per attestation (a DSSE envelope,
//!                        its bytes as given), named by its SHA-256, sorted
//!                        by name (0444)
//! members/<64 hex>/manifest.json
//!                        optional: for a snapshot that names others (an
//!                        environment its members, a task its tree and
//!                        dependency list), each of them, in dependency
//!                        order (whatever one names comes before it) (0444)
//! members/<64 hex>/attestations/<64 hex>.json
//!                        optional: that member's attestations, as above
//! objects/<64 hex>       one per non-executable object, by SHA-256 (0444)
//! objects/<64 hex>.x     one per executable object (0555)
//! ```
//!
//! Objects are sorted by name, those of the members with the snapshot's,
//! each once; zero-length files have no object. Every header
//! has uid, gid and mtime 0 and empty user and group names, so the same
//! snapshot always gives the same archive, byte for byte. Import reads the
//! bundle as a stream: it checks the manifest and its bounds (through
//! [`adopt`](crate::store::ingest::adopt)) before it reads any object, checks that every
//! header, padding and the end are the bytes export writes (so a damaged byte
//! anywhere is refused), streams each object the store lacks into its work
//! directory while hashing it, and stops at the archive's end: it reads
//! nothing after the end blocks but one probe byte and, in a compressed
//! bundle, the seal.
//!
//! The optional entries came later than the others: a bundle without them
//! (as earlier cestores wrote) imports as before, and each is written only
//! when there is something to say, so a snapshot without source records
//! gives the same bundle as before they existed. Import offers the
//! attestations, with the snapshot's digest, to the caller's check before
//! it reads any object, so a refused bundle leaves the store as it was.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use crate::catalogue::Origin;
use crate::digest::{ManifestDigest, ObjectHasher, ObjectId};
use crate::error::{Error, IoContext, Made, Misuse, Result};
use crate::profile::ce::manifest::Manifest;
use crate::source::{carried, SourceEntry, Via};
use crate::store::ingest::adopt::{adopt, AdoptError, Arrival};
use crate::store::ingest::IngestReport;
use crate::store::{ObjectKey, Opener, Store};

/// The canonical manifest's entry name.
pub const MANIFEST_ENTRY: &str = "manifest.json";
/// The digest entry's name.
pub const DIGEST_ENTRY: &str = "manifest.sha256";
/// The optional entry that says where the snapshot was first ingested.
pub const ORIGIN_ENTRY: &str = "origin.json";
/// The most bytes the origin entry may declare.
const MAX_ORIGIN_BYTES: u64 = 64 * 1024;
/// The optional entry that holds the snapshot's source records.
pub const SOURCES_ENTRY: &str = "sources.json";
/// The directory of the optional attestation entries.
pub const ATTESTATIONS_PREFIX: &str = "attestations/";
/// The objects' directory inside a bundle.
pub const OBJECTS_PREFIX: &str = "objects/";
/// The directory of the optional member entries.
pub const MEMBERS_PREFIX: &str = "members/";
/// The zstd frame magic number, as it starts a compressed bundle.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The magic number of the zstd skippable frame that seals a compressed bundle.
const SEAL_MAGIC: [u8; 4] = [0x50, 0x2a, 0x4d, 0x18];
/// The seal frame's content: a tag and the SHA-256 of the compressed frame.
const SEAL_TAG: &[u8; 4] = b"CSTS";
/// The seal frame's length: magic, length, tag, digest.
const SEAL_LEN: usize = 4 + 4 + 4 + 32;
/// The most compressed bytes import reads (a release is at most 16 MiB, so
/// its archive at most about 18 MiB before compression).
const MAX_COMPRESSED_BYTES: u64 = 64 * 1024 * 1024;

/// The zstd level export uses: zstd's default. On 16 MiB of text it takes a
/// fraction of a second; level 19 made the file a fifth smaller in 40 s.
const ZSTD_LEVEL: i32 = 3;
/// The largest manifest entry import reads.
const MAX_MANIFEST_BYTES: u64 = crate::profile::ce::manifest::MAX_MANIFEST_BYTES;
const BLOCK: usize = 512;

/// The two forms of a bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Format {
    /// A plain tar archive.
    #[serde(rename = "tar")]
    Tar,
    /// A tar archive in one zstd frame.
    #[serde(rename = "tar+zstd")]
    TarZstd,
}

/// What to export.
pub struct ExportOptions<'a> {
    /// A digest or unique prefix.
    pub digest: &'a str,
    /// The bundle to write; it must not exist. Default: `<digest>.tar[.zst]`.
    pub output: Option<&'a Path>,
    /// Compress with zstd.
    pub zstd: bool,
}

/// The report of `cestore export`.
#[derive(Debug, serde::Serialize)]
pub struct ExportReport {
    /// The snapshot exported.
    pub manifest_digest: ManifestDigest,
    /// The bundle written, absolute.
    pub file: String,
    /// Its form.
    pub format: Format,
    /// The objects it holds.
    pub objects: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// The SHA-256 of the bundle file.
    pub sha256: ObjectId,
    /// The attestations it carries.
    pub attestations: u64,
    /// The snapshots it holds beside the one exported (the ones it names),
    /// in dependency order; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<ManifestDigest>,
}

/// What to import.
pub struct ImportOptions<'a> {
    /// The bundle; `-` reads standard input.
    pub file: &'a Path,
    /// The digest the bundle must hold, when known.
    pub digest: Option<&'a str>,
    /// Only verify the bundle: open no store and record nothing.
    pub check: bool,
    /// The keys one of the bundle's attestations must vouch for its
    /// snapshot under, checked with `--check` too, before any object is
    /// read; none takes the bundle whatever its attestations say.
    pub trusted: &'a [crate::sign::PublicKey],
}

/// What an import read.
#[derive(Debug, serde::Serialize)]
pub struct BundleStats {
    /// The bundle read.
    pub file: String,
    /// Its form.
    pub format: Format,
    /// The objects it held.
    pub objects: u64,
    /// The snapshot it holds.
    pub manifest_digest: ManifestDigest,
    /// The attestations it carried.
    pub attestations: u64,
}

/// The report of `cestore import`.
#[derive(Debug, serde::Serialize)]
pub struct ImportReport {
    /// What entered the store; absent with `--check`, which stores nothing.
    #[serde(flatten)]
    pub ingest: Option<IngestReport>,
    /// What was read.
    pub bundle: BundleStats,
    /// The attestations the bundle carried (DSSE envelopes, as bytes), as
    /// the accept check saw them; not part of the report's JSON.
    #[serde(skip)]
    pub attestations: Vec<Vec<u8>>,
    /// The snapshots the bundle held beside its own (the ones it names),
    /// taken first, in dependency order; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberImported>,
}

/// A snapshot an import took because the bundle's snapshot names it.
#[derive(Debug, serde::Serialize)]
pub struct MemberImported {
    /// Its digest.
    pub manifest_digest: ManifestDigest,
    /// Whether the store held it already.
    pub already_present: bool,
    /// Objects written.
    pub new_objects: u64,
    /// Objects found already stored.
    pub reused_objects: u64,
}

/// One member a bundle carries: its manifest and attestations.
struct MemberEntry {
    manifest: Manifest,
    attestations: Vec<Vec<u8>>,
}

/// A writer that hashes and counts what passes through it.
struct HashingWriter<W> {
    inner: W,
    hasher: ObjectHasher,
    bytes: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The entry name of an object.
fn object_entry(key: &ObjectKey) -> String {
    format!("{OBJECTS_PREFIX}{}", key.name())
}

/// The entry name of an attestation whose SHA-256 is `id`.
fn member_manifest_entry(digest: &ManifestDigest) -> String {
    format!("{MEMBERS_PREFIX}{digest}/{MANIFEST_ENTRY}")
}

fn member_attestations_prefix(digest: &ManifestDigest) -> String {
    format!("{MEMBERS_PREFIX}{digest}/{ATTESTATIONS_PREFIX}")
}

fn attestation_entry(id: &ObjectId) -> String {
    format!("{ATTESTATIONS_PREFIX}{id}.json")
}

/// Attestations as a bundle carries them: each once, sorted by SHA-256.
fn sorted_attestations(attestations: &[Vec<u8>]) -> BTreeMap<ObjectId, &[u8]> {
    attestations
        .iter()
        .map(|a| (ObjectId::of(a), &a[..]))
        .collect()
}

fn digest_entry(digest: &ManifestDigest) -> Vec<u8> {
    format!("{digest}  {MANIFEST_ENTRY}\n").into_bytes()
}

/// The ustar header export writes for an entry: fixed fields but the name,
/// the mode and the size.
fn header(name: &str, mode: u32, size: u64) -> io::Result<tar::Header> {
    let mut h = tar::Header::new_ustar();
    h.set_path(name)?;
    h.set_size(size);
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_username("")?;
    h.set_groupname("")?;
    h.set_device_major(0)?;
    h.set_device_minor(0)?;
    h.set_cksum();
    Ok(h)
}

/// Writes one entry: a ustar header with fixed fields, the data, the padding.
fn write_entry(w: &mut dyn Write, name: &str, mode: u32, data: &[u8]) -> io::Result<()> {
    let h = header(name, mode, data.len() as u64)?;
    w.write_all(h.as_bytes())?;
    w.write_all(data)?;
    let pad = (BLOCK - data.len() % BLOCK) % BLOCK;
    w.write_all(&[0u8; BLOCK][..pad])
}

/// What a bundle says of its snapshot besides its bytes.
#[derive(Clone, Copy, Default)]
struct About<'a> {
    /// Where the snapshot was first ingested.
    origin: Option<&'a Origin>,
    /// Its source records, as they travel ([`carried::to_json`]).
    sources: Option<&'a str>,
    /// Its attestations.
    attestations: &'a [Vec<u8>],
}

/// Writes the canonical archive of a manifest and its objects (sorted by key).
#[cfg(test)]
fn write_archive<'a>(
    w: &mut dyn Write,
    manifest: &Manifest,
    about: About<'_>,
    objects: impl Iterator<Item = Result<(ObjectKey, std::borrow::Cow<'a, [u8]>)>>,
) -> Result<u64> {
    write_archive_with(w, manifest, about, &[], objects)
}

/// Writes the canonical archive of a manifest, the members it carries and
/// all their objects (sorted by key).
fn write_archive_with<'a>(
    w: &mut dyn Write,
    manifest: &Manifest,
    about: About<'_>,
    members: &[MemberEntry],
    objects: impl Iterator<Item = Result<(ObjectKey, std::borrow::Cow<'a, [u8]>)>>,
) -> Result<u64> {
    let werr = |e| Error::io("write the bundle", "<bundle>", e);
    write_entry(w, MANIFEST_ENTRY, 0o444, &manifest.bytes).map_err(werr)?;
    write_entry(w, DIGEST_ENTRY, 0o444, &digest_entry(&manifest.digest)).map_err(werr)?;
    if let Some(origin) = about.origin {
        let json = serde_json::to_vec(origin).map_err(|e| werr(e.into()))?;
        write_entry(w, ORIGIN_ENTRY, 0o444, &json).map_err(werr)?;
    }
    if let Some(sources) = about.sources {
        write_entry(w, SOURCES_ENTRY, 0o444, sources.as_bytes()).map_err(werr)?;
    }
    for (id, data) in sorted_attestations(about.attestations) {
        write_entry(w, &attestation_entry(&id), 0o444, data).map_err(werr)?;
    }
    for m in members {
        let digest = m.manifest.digest;
        write_entry(w, &member_manifest_entry(&digest), 0o444, &m.manifest.bytes).map_err(werr)?;
        let prefix = member_attestations_prefix(&digest);
        for (id, data) in sorted_attestations(&m.attestations) {
            write_entry(w, &format!("{prefix}{id}.json"), 0o444, data).map_err(werr)?;
        }
    }
    let mut count = 0;
    for o in objects {
        let (key, data) = o?;
        write_entry(w, &object_entry(&key), key.mode(), &data).map_err(werr)?;
        count += 1;
    }
    w.write_all(&[0u8; 2 * BLOCK]).map_err(werr)?;
    Ok(count)
}

/// The distinct objects of a manifest, sorted by key, with their sizes.
fn objects_of(manifest: &Manifest) -> BTreeMap<ObjectKey, u64> {
    manifest
        .entries
        .iter()
        .filter(|e| e.size > 0)
        .map(|e| (e.key(), e.size))
        .collect()
}

/// Writes a snapshot's bundle.
pub fn export(store: &Store, opts: &ExportOptions<'_>) -> Result<ExportReport> {
    // A bundle holds only what a view could.
    let crate::remote::preflight::Outbound {
        digest,
        manifest,
        attestations,
    } = crate::remote::preflight(store, opts.digest)?;
    // What it names goes with it, in dependency order.
    let named = store.named_closure(&digest)?;
    let members = named
        .iter()
        .map(|d| {
            let out = crate::remote::preflight(store, &d.to_hex())?;
            Ok(MemberEntry {
                manifest: out.manifest,
                attestations: out.attestations,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let format = if opts.zstd {
        Format::TarZstd
    } else {
        Format::Tar
    };
    let dest = match opts.output {
        Some(p) => p.to_path_buf(),
        None => PathBuf::from(format!(
            "{digest}.tar{}",
            if opts.zstd { ".zst" } else { "" }
        )),
    };
    let dest = std::path::absolute(&dest).ctx("resolve the bundle path", &dest)?;
    if dest.symlink_metadata().is_ok() {
        return Err(Error::Exists {
            made: Made::Bundle,
            path: dest,
            view_of: None,
        });
    }
    let name = dest
        .file_name()
        .map_or_else(|| "bundle".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dest.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = write_bundle(store, &manifest, &attestations, &members, &tmp, format);
    let (objects, bytes, sha256) = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    // A hard link never replaces an existing file: the bundle appears whole or not at all.
    let linked = std::fs::hard_link(&tmp, &dest);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(Error::Exists {
                made: Made::Bundle,
                path: dest,
                view_of: None,
            })
        }
        Err(e) => return Err(Error::io("publish the bundle", &dest, e)),
    }
    Ok(ExportReport {
        manifest_digest: digest,
        file: dest.display().to_string(),
        format,
        objects,
        bytes,
        sha256,
        attestations: sorted_attestations(&attestations).len() as u64,
        members: named,
    })
}

/// Writes the bundle to `tmp` and makes it durable; returns the object
/// count, the file's size and its SHA-256.
fn write_bundle(
    store: &Store,
    manifest: &Manifest,
    attestations: &[Vec<u8>],
    members: &[MemberEntry],
    tmp: &Path,
    format: Format,
) -> Result<(u64, u64, ObjectId)> {
    let origin = store.catalogue().origin(&manifest.digest)?;
    let sources: Vec<SourceEntry> = store
        .catalogue()
        .sources(&manifest.digest)?
        .into_iter()
        .map(|kept| kept.entry)
        .collect();
    let sources = carried::to_json(&sources);
    let about = About {
        origin: origin.as_ref(),
        sources: sources.as_deref(),
        attestations,
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .ctx("create the bundle", tmp)?;
    let mut out = HashingWriter {
        inner: io::BufWriter::new(file),
        hasher: ObjectHasher::default(),
        bytes: 0,
    };
    let mut all = objects_of(manifest);
    for m in members {
        all.extend(objects_of(&m.manifest));
    }
    let objects = all.into_iter().map(|(key, size)| {
        let path = store.object_path(&key);
        let data = std::fs::read(&path).ctx("read an object", &path)?;
        if data.len() as u64 != size || ObjectId::of(&data) != key.id {
            return Err(crate::remote::OutgoingError::ObjectChanged { path }.into());
        }
        Ok((key, std::borrow::Cow::Owned(data)))
    });
    let count = match format {
        Format::Tar => write_archive_with(&mut out, manifest, about, members, objects)?,
        Format::TarZstd => {
            let mut enc = zstd::stream::write::Encoder::new(&mut out, ZSTD_LEVEL)
                .ctx("start compressing the bundle", tmp)?;
            enc.include_checksum(true)
                .ctx("start compressing the bundle", tmp)?;
            let count = write_archive_with(&mut enc, manifest, about, members, objects)?;
            enc.finish().ctx("finish compressing the bundle", tmp)?;
            let sealed = out.hasher.clone().finish();
            let mut seal = Vec::with_capacity(SEAL_LEN);
            seal.extend_from_slice(&SEAL_MAGIC);
            seal.extend_from_slice(&((SEAL_LEN - 8) as u32).to_le_bytes());
            seal.extend_from_slice(SEAL_TAG);
            seal.extend_from_slice(sealed.as_bytes());
            out.write_all(&seal).ctx("seal the bundle", tmp)?;
            count
        }
    };
    out.flush().ctx("write the bundle", tmp)?;
    let HashingWriter {
        inner,
        hasher,
        bytes,
    } = out;
    let file = inner
        .into_inner()
        .map_err(|e| Error::io("write the bundle", tmp, e.into_error()))?;
    file.sync_all().ctx("sync the bundle", tmp)?;
    Ok((count, bytes, hasher.finish()))
}

/// A buffered reader that hashes exactly the bytes its consumer consumes:
/// the zstd decoder consumes its frame and nothing after it, so the hash is
/// the SHA-256 of the frame the seal records.
struct SealReader<R> {
    inner: BufReader<R>,
    hasher: ObjectHasher,
}

impl<R: Read> Read for SealReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = {
            let available = self.fill_buf()?;
            let n = available.len().min(buf.len());
            buf[..n].copy_from_slice(&available[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> io::BufRead for SealReader<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        let buffered = self.inner.buffer();
        self.hasher.update(&buffered[..amt.min(buffered.len())]);
        self.inner.consume(amt);
    }
}

/// The archive stream of a bundle: the file itself, or its zstd frame decoded.
enum Body<R: Read> {
    Tar(R),
    Zstd(zstd::stream::read::Decoder<'static, SealReader<R>>),
}

impl<R: Read> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Body::Tar(r) => r.read(buf),
            Body::Zstd(d) => d.read(buf),
        }
    }
}

impl<R: Read> Body<R> {
    /// Checks what follows the archive's end blocks without reading more
    /// than a few bytes: nothing in a plain tar; in a compressed bundle, the
    /// end of the zstd frame (its content checksum is checked there) and then
    /// exactly the seal, which must hold the SHA-256 of the frame.
    fn finish(self) -> Result<()> {
        match self {
            Body::Tar(mut r) => {
                let mut probe = [0u8; 1];
                if read_full(&mut r, &mut probe)? != 0 {
                    return Err(damaged(Damage::DataAfterEnd));
                }
                Ok(())
            }
            Body::Zstd(mut d) => {
                // One more byte from the decoder: the frame must end here.
                // The decoder produces at most one block to answer, so data
                // hidden after the archive is never decompressed in full.
                let mut probe = [0u8; 1];
                if read_full(&mut d, &mut probe)? != 0 {
                    return Err(damaged(Damage::FrameDataAfterEnd));
                }
                let mut rest = d.finish();
                let frame = rest.hasher.clone().finish();
                let mut seal = Vec::with_capacity(SEAL_LEN + 1);
                (&mut rest)
                    .take(SEAL_LEN as u64 + 1)
                    .read_to_end(&mut seal)
                    .map_err(unreadable)?;
                let expected_len = ((SEAL_LEN - 8) as u32).to_le_bytes();
                if seal.len() != SEAL_LEN
                    || seal[..4] != SEAL_MAGIC
                    || seal[4..8] != expected_len
                    || &seal[8..12] != SEAL_TAG
                {
                    return Err(damaged(Damage::Seal));
                }
                if seal[12..] != frame.as_bytes()[..] {
                    return Err(damaged(Damage::SealHash));
                }
                Ok(())
            }
        }
    }
}

/// A bundle that cannot be imported as it is.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The bundle is damaged: cut short, changed, or holding what no
    /// bundle holds.
    #[error("the bundle is damaged: {}", printable(.damage))]
    Damaged {
        /// How.
        damage: Damage,
    },
    /// The file is neither a tar archive nor zstd-compressed.
    #[error("'{label}' is not a bundle: it is neither a tar archive nor zstd-compressed; make one with `cestore export`")]
    NotABundle {
        /// The file, as the import names it.
        label: String,
    },
}

/// How a bundle is damaged.
#[derive(Debug, thiserror::Error)]
pub enum Damage {
    /// The archive could not be read; the reader's words (which may quote
    /// the bundle's bytes). Kept as words: a reader's failures are all
    /// acted on alike, by refusing the import.
    #[error("{0}")]
    Unreadable(String),
    /// Data follows the archive's end.
    #[error("it holds data after the archive's end")]
    DataAfterEnd,
    /// Data follows the archive's end inside the compressed frame.
    #[error("its compressed frame holds data after the archive's end")]
    FrameDataAfterEnd,
    /// The seal is missing or changed.
    #[error("its seal (the skippable frame right after the compressed frame, and the file's end) is missing or changed")]
    Seal,
    /// The compressed bytes do not hash to the seal.
    #[error("its compressed bytes do not hash to its seal")]
    SealHash,
    /// It ends before an entry it must hold.
    #[error("it ends before {what}")]
    EndsBefore {
        /// What it must hold next.
        what: String,
    },
    /// An entry's padding is not zero.
    #[error("the padding after '{name}' is changed")]
    Padding {
        /// The entry.
        name: String,
    },
    /// An entry's header is not the one export writes.
    #[error("the header of '{name}' is not the one `cestore export` writes (another name, size, mode or a changed byte)")]
    Header {
        /// The entry.
        name: String,
    },
    /// An entry's header holds no size.
    #[error("the header of '{name}' holds no size")]
    NoSize {
        /// The entry.
        name: String,
    },
    /// An entry is declared larger than it can be.
    #[error("'{name}' is declared as {size} bytes, more than the {max} it can be")]
    TooLarge {
        /// The entry.
        name: String,
        /// Its declared size.
        size: u64,
        /// The most it can be.
        max: u64,
    },
    /// An entry ends before its declared size.
    #[error("'{name}' is cut short")]
    CutShort {
        /// The entry.
        name: String,
    },
    /// An entry named by a SHA-256 hashes to another.
    #[error("'{name}' hashes to {found}")]
    HashesTo {
        /// The entry.
        name: String,
        /// What its bytes hash to.
        found: ObjectId,
    },
    /// The manifest hashes to another digest than the one recorded beside it.
    #[error("{MANIFEST_ENTRY} hashes to {found}, which {DIGEST_ENTRY} does not record")]
    DigestNotRecorded {
        /// What the manifest hashes to.
        found: ManifestDigest,
    },
    /// The origin entry is no origin.
    #[error("'{ORIGIN_ENTRY}' is not an origin: {error}")]
    Origin {
        /// What the parser said.
        error: serde_json::Error,
    },
    /// The sources entry holds no source records.
    #[error("'{SOURCES_ENTRY}' holds no source records: {error}")]
    Sources {
        /// What is wrong with them.
        error: crate::source::carried::CarriedError,
    },
    /// Its attestations break a bound attestations travel within.
    #[error("its attestations: {0}")]
    Attestations(crate::sign::limits::AttestationLimit),
    /// The attestations are not in the order export writes.
    #[error("'{name}' is out of order among the attestations")]
    AttestationOrder {
        /// The attestation's entry.
        name: String,
    },
    /// Its members are not exactly what its snapshot names, in dependency
    /// order.
    #[error("its members are not what its snapshot names, in dependency order ({found} held, {expected} named)")]
    Members {
        /// How many its snapshot names, directly or not.
        expected: usize,
        /// How many it holds.
        found: usize,
    },
    /// It does not end with two zero blocks.
    #[error("it does not end with the two zero blocks after its manifest's objects")]
    NoEndBlocks,
    /// An object's bytes hash to another digest than its entry's name.
    #[error("'{entry}' hashes to another digest")]
    ObjectHash {
        /// The object's entry.
        entry: String,
    },
}

impl crate::error::Classify for BundleError {
    fn kind(&self) -> crate::error::ErrorKind {
        crate::error::ErrorKind::Integrity
    }

    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }
}

impl From<BundleError> for Error {
    fn from(e: BundleError) -> Self {
        Error::Transfer(crate::error::Classified::new(e))
    }
}

fn damaged(damage: Damage) -> Error {
    BundleError::Damaged { damage }.into()
}

/// The error for an archive a reader could not read.
fn unreadable(said: impl std::fmt::Display) -> Error {
    damaged(Damage::Unreadable(said.to_string()))
}

/// A damage's words as one short line of printable text: a reader's
/// message, or an entry's name, may quote the bundle's bytes.
fn printable(damage: &Damage) -> String {
    crate::error::printable(&damage.to_string())
        .chars()
        .take(200)
        .collect()
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(unreadable(e)),
        }
    }
    Ok(got)
}

/// Reads one 512-byte header block, which must be there.
fn read_header(r: &mut dyn Read, what: &str) -> Result<[u8; BLOCK]> {
    let mut block = [0u8; BLOCK];
    if read_full(r, &mut block)? != BLOCK {
        return Err(damaged(Damage::EndsBefore {
            what: what.to_string(),
        }));
    }
    Ok(block)
}

/// Reads and checks the zero padding after an entry of `size` bytes.
fn read_padding(r: &mut dyn Read, size: u64, name: &str) -> Result<()> {
    let pad = (BLOCK - (size % BLOCK as u64) as usize) % BLOCK;
    let mut block = [0u8; BLOCK];
    if read_full(r, &mut block[..pad])? != pad || block[..pad].iter().any(|&b| b != 0) {
        return Err(damaged(Damage::Padding { name: name.into() }));
    }
    Ok(())
}

/// Checks a header block against the one export writes for this entry.
fn check_header(block: &[u8; BLOCK], name: &str, mode: u32, size: u64) -> Result<()> {
    let canonical = header(name, mode, size).map_err(unreadable)?;
    if block[..] != canonical.as_bytes()[..] {
        return Err(damaged(Damage::Header { name: name.into() }));
    }
    Ok(())
}

/// Reads a small entry (the manifest, the digest): its header, its data
/// (at most `max` bytes, checked before anything is read) and its padding.
fn read_small_entry(r: &mut dyn Read, name: &str, max: u64) -> Result<Vec<u8>> {
    let block = read_header(r, name)?;
    read_small_entry_after(r, &block, name, max)
}

/// The name a header block gives, as far as it is text.
fn entry_name_of(block: &[u8; BLOCK]) -> String {
    let field = |bytes: &[u8]| {
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        String::from_utf8_lossy(&bytes[..end]).into_owned()
    };
    let name = field(&block[..100]);
    // A name longer than 100 bytes (a member's attestation) keeps its
    // first part in the ustar prefix field.
    let prefix = if &block[257..262] == b"ustar" {
        field(&block[345..500])
    } else {
        String::new()
    };
    if prefix.is_empty() {
        name
    } else {
        format!("{prefix}/{name}")
    }
}

/// Reads the data of a small entry whose header block is already read.
fn read_small_entry_after(
    r: &mut dyn Read,
    block: &[u8; BLOCK],
    name: &str,
    max: u64,
) -> Result<Vec<u8>> {
    let block = *block;
    let size = tar::Header::from_byte_slice(&block)
        .entry_size()
        .map_err(|_| damaged(Damage::NoSize { name: name.into() }))?;
    if size > max {
        return Err(damaged(Damage::TooLarge {
            name: name.into(),
            size,
            max,
        }));
    }
    check_header(&block, name, 0o444, size)?;
    let mut data = vec![0u8; usize::try_from(size).map_err(unreadable)?];
    if read_full(r, &mut data)? != data.len() {
        return Err(damaged(Damage::CutShort { name: name.into() }));
    }
    read_padding(r, size, name)?;
    Ok(data)
}

/// Reads an object the store already holds: hashes it without keeping it.
fn check_object_entry(r: &mut dyn Read, key: &ObjectKey, size: u64, name: &str) -> Result<()> {
    let mut out = HashingWriter {
        inner: io::sink(),
        hasher: ObjectHasher::default(),
        bytes: 0,
    };
    io::copy(&mut r.take(size), &mut out).map_err(unreadable)?;
    if out.bytes != size {
        return Err(damaged(Damage::CutShort { name: name.into() }));
    }
    let found = out.hasher.finish();
    if found != key.id {
        return Err(damaged(Damage::HashesTo {
            name: name.into(),
            found,
        }));
    }
    Ok(())
}

/// Reads a bundle as a stream, checks it, and adopts its snapshot into the
/// store. The manifest and its bounds are checked before any object is read;
/// each object the store lacks is streamed into its work directory and
/// hashed on the way; every header, padding and the end must be the bytes
/// `cestore export` writes, and reading stops at the archive's end.
pub fn import(open: Opener<'_>, opts: &ImportOptions<'_>) -> Result<ImportReport> {
    let expected = match opts.digest {
        Some(d) => Some(
            d.parse::<ManifestDigest>()
                .map_err(|e| Misuse::ExpectedDigest {
                    reason: e.to_string(),
                })?,
        ),
        None => None,
    };
    let (label, raw) = open_bundle(opts.file)?;
    let (format, mut body) = archive_of(&label, raw)?;
    let Head {
        manifest,
        origin,
        sources,
        attestations,
        members,
        pending,
    } = read_head(&mut body)?;
    let mut objects = objects_of(&manifest);
    for m in &members {
        objects.extend(objects_of(&m.manifest));
    }
    let bundle = BundleStats {
        file: label,
        format,
        objects: objects.len() as u64,
        manifest_digest: manifest.digest,
        attestations: attestations.len() as u64,
    };
    // The digest is the hash of the manifest bytes read, so the check sees
    // the snapshot that would be adopted.
    let check = crate::store::trust::signed::trust_check(opts.trusted);
    check(&attestations, &manifest.digest)?;
    for m in &members {
        check(&m.attestations, &m.manifest.digest)?;
    }
    let rest = Rest {
        body,
        pending,
        objects,
    };
    if !members.is_empty() {
        return import_with_members(
            open,
            opts,
            expected,
            Carried {
                manifest,
                origin,
                sources,
                attestations,
                members,
            },
            bundle,
            rest,
        );
    }
    if opts.check {
        check_only(&manifest, expected, rest)?;
        return Ok(ImportReport {
            ingest: None,
            bundle,
            attestations,
            members: Vec::new(),
        });
    }
    // `adopt` checks the manifest and its bounds before it asks for objects.
    let ingest = adopt(
        open,
        &manifest,
        expected,
        &Arrival {
            event: "import",
            source: &format!("bundle:{}", bundle.file),
            origin: origin.as_ref(),
            sources,
            attestations: crate::store::trust::signed::received(&attestations, opts.trusted),
        },
        |wanted, staging| {
            let wanted: BTreeMap<ObjectKey, &crate::store::ingest::adopt::Wanted> =
                wanted.iter().map(|w| (w.key, w)).collect();
            rest.read_objects(&mut |key, data| match wanted.get(key) {
                Some(w) => staging.stage(w, data, &|e| unreadable(e)).map(|()| true),
                None => Ok(false),
            })
        },
    )?;
    Ok(ImportReport {
        ingest: Some(ingest),
        bundle,
        attestations,
        members: Vec::new(),
    })
}

/// What a bundle with members carries before its objects.
struct Carried {
    manifest: Manifest,
    origin: Option<Origin>,
    sources: Vec<SourceEntry>,
    attestations: Vec<Vec<u8>>,
    members: Vec<MemberEntry>,
}

/// Imports a bundle that carries members: every manifest is checked before
/// any object is read; the objects (each checked against its name) are then
/// spooled into a work directory of the store, and each member is adopted
/// from there in dependency order, the bundle's snapshot last. With
/// `--check`, the objects are only read and checked.
fn import_with_members(
    open: Opener<'_>,
    opts: &ImportOptions<'_>,
    expected: Option<ManifestDigest>,
    carried: Carried,
    bundle: BundleStats,
    rest: Rest,
) -> Result<ImportReport> {
    crate::store::ingest::adopt::check_received(&carried.manifest, expected)?;
    for m in &carried.members {
        crate::store::ingest::adopt::check_received(&m.manifest, Some(m.manifest.digest))?;
    }
    if opts.check {
        rest.read_objects(&mut |_, _| Ok(false))?;
        return Ok(ImportReport {
            ingest: None,
            bundle,
            attestations: carried.attestations,
            members: Vec::new(),
        });
    }
    let store = open(crate::store::Need::Creating)?;
    let spool = store.work_dir("import")?;
    rest.read_objects(&mut |key, data| {
        let path = spool.path().join(key.file_name());
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .ctx("spool an object", &path)?;
        let mut hashing = HashingWriter {
            inner: io::BufWriter::new(file),
            hasher: ObjectHasher::default(),
            bytes: 0,
        };
        io::copy(data, &mut hashing).map_err(unreadable)?;
        hashing.flush().ctx("spool an object", &path)?;
        if hashing.hasher.finish() != key.id {
            return Err(damaged(Damage::ObjectHash {
                entry: object_entry(key),
            }));
        }
        Ok(true)
    })?;
    let source = format!("bundle:{}", bundle.file);
    let take = |manifest: &Manifest,
                origin: Option<&Origin>,
                sources: Vec<SourceEntry>,
                attestations: &[Vec<u8>]| {
        adopt(
            open,
            manifest,
            Some(manifest.digest),
            &Arrival {
                event: "import",
                source: &source,
                origin,
                sources,
                attestations: crate::store::trust::signed::received(attestations, opts.trusted),
            },
            |wanted, staging| {
                for w in wanted {
                    let path = spool.path().join(w.key.file_name());
                    let mut file = File::open(&path).ctx("read a spooled object", &path)?;
                    staging.stage(w, &mut file, &|e| unreadable(e))?;
                }
                Ok(())
            },
        )
    };
    let mut members = Vec::new();
    for m in &carried.members {
        let r = take(&m.manifest, None, Vec::new(), &m.attestations)?;
        members.push(MemberImported {
            manifest_digest: m.manifest.digest,
            already_present: r.ingest.already_present,
            new_objects: r.ingest.new_objects,
            reused_objects: r.ingest.reused_objects,
        });
    }
    let ingest = take(
        &carried.manifest,
        carried.origin.as_ref(),
        carried.sources,
        &carried.attestations,
    )?;
    drop(spool);
    drop(store);
    Ok(ImportReport {
        ingest: Some(ingest),
        bundle,
        attestations: carried.attestations,
        members,
    })
}

/// Opens the bundle at `file` (`-` for standard input), with the name its
/// messages give it.
fn open_bundle(file: &Path) -> Result<(String, Box<dyn Read>)> {
    if file == Path::new("-") {
        return Ok(("<stdin>".into(), Box::new(io::stdin().lock())));
    }
    let abs = std::path::absolute(file).ctx("resolve the bundle path", file)?;
    let opened = File::open(&abs).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            Error::NotFound {
                what: "bundle",
                path: abs.clone(),
            }
        } else {
            Error::io("open the bundle", &abs, e)
        }
    })?;
    Ok((abs.display().to_string(), Box::new(BufReader::new(opened))))
}

/// The archive a bundle holds: the first block tells a tar (its ustar
/// magic) from a zstd frame, which is then decoded as it is read.
fn archive_of(label: &str, mut raw: Box<dyn Read>) -> Result<(Format, Body<Box<dyn Read>>)> {
    let mut magic = Vec::with_capacity(BLOCK);
    (&mut raw)
        .take(BLOCK as u64)
        .read_to_end(&mut magic)
        .ctx("read the bundle", label)?;
    let format = if magic.starts_with(&ZSTD_MAGIC) {
        Format::TarZstd
    } else if magic.get(257..262) == Some(b"ustar") {
        Format::Tar
    } else {
        return Err(BundleError::NotABundle {
            label: label.to_string(),
        }
        .into());
    };
    let chained = io::Cursor::new(magic).chain(raw);
    let body = match format {
        Format::Tar => Body::Tar(Box::new(chained) as Box<dyn Read>),
        Format::TarZstd => {
            let sealed = SealReader {
                inner: BufReader::new(Box::new(chained.take(MAX_COMPRESSED_BYTES)) as Box<dyn Read>),
                hasher: ObjectHasher::default(),
            };
            Body::Zstd(
                zstd::stream::read::Decoder::with_buffer(sealed)
                    .ctx("start decompressing the bundle", label)?
                    .single_frame(),
            )
        }
    };
    Ok((format, body))
}

/// What a bundle holds before its objects.
struct Head {
    manifest: Manifest,
    origin: Option<Origin>,
    /// Its source records, marked as come from a bundle.
    sources: Vec<SourceEntry>,
    /// Its attestations, in the bundle's order.
    attestations: Vec<Vec<u8>>,
    /// The members it carries, in the bundle's (dependency) order.
    members: Vec<MemberEntry>,
    /// The header after them: the first object's (read to tell), or the
    /// first end block.
    pending: Option<[u8; BLOCK]>,
}

/// Reads the manifest, its digest, and the optional origin and sources
/// entries.
///
/// An unreadable sources entry refuses the bundle, as an unreadable origin
/// does: export never writes one, so the bundle was changed.
fn read_head(body: &mut dyn Read) -> Result<Head> {
    // A tree kind's manifest may be longer than a CE manifest: the bound
    // is its kind's, read from its first bytes.
    let block = read_header(body, MANIFEST_ENTRY)?;
    let size = tar::Header::from_byte_slice(&block).entry_size().ok();
    let tree_max = crate::profile::ce::manifest::MAX_TREE_MANIFEST_BYTES;
    let max = match size {
        Some(size) if size > MAX_MANIFEST_BYTES && size <= tree_max => tree_max,
        _ => MAX_MANIFEST_BYTES,
    };
    let bytes = read_small_entry_after(body, &block, MANIFEST_ENTRY, max)?;
    if crate::profile::ce::manifest::over_bound(&bytes) {
        return Err(damaged(Damage::TooLarge {
            name: MANIFEST_ENTRY.into(),
            size: bytes.len() as u64,
            max: MAX_MANIFEST_BYTES,
        }));
    }
    let manifest = Manifest::parse(&bytes).map_err(AdoptError::from)?;
    let recorded = read_small_entry(body, DIGEST_ENTRY, 256)?;
    if recorded != digest_entry(&manifest.digest) {
        return Err(damaged(Damage::DigestNotRecorded {
            found: manifest.digest,
        }));
    }
    // The next header is an optional entry's, in their order, or the first
    // object's.
    let mut next = read_header(body, "its objects")?;
    let mut origin = None;
    if entry_name_of(&next) == ORIGIN_ENTRY {
        let data = read_small_entry_after(body, &next, ORIGIN_ENTRY, MAX_ORIGIN_BYTES)?;
        origin =
            Some(serde_json::from_slice(&data).map_err(|error| damaged(Damage::Origin { error }))?);
        next = read_header(body, "its objects")?;
    }
    let mut sources = Vec::new();
    if entry_name_of(&next) == SOURCES_ENTRY {
        let data = read_small_entry_after(
            body,
            &next,
            SOURCES_ENTRY,
            carried::MAX_CARRIED_BYTES as u64,
        )?;
        sources = carried::from_json(&data, Via::Bundle)
            .map_err(|error| damaged(Damage::Sources { error }))?;
        next = read_header(body, "its objects")?;
    }
    let attestations = read_attestations(body, &mut next, ATTESTATIONS_PREFIX)?;
    let members = read_members(body, &mut next, &manifest)?;
    Ok(Head {
        manifest,
        origin,
        sources,
        attestations,
        members,
        pending: Some(next),
    })
}

/// Reads the member entries, from the header `next` on, and leaves in
/// `next` the header after them. Each manifest must hash to the digest its
/// entry is named by, and the members, when there are any, must be exactly
/// what `manifest` names, directly or through another, in dependency order
/// (as export writes them).
fn read_members(
    body: &mut dyn Read,
    next: &mut [u8; BLOCK],
    manifest: &Manifest,
) -> Result<Vec<MemberEntry>> {
    let mut out: Vec<MemberEntry> = Vec::new();
    loop {
        let name = entry_name_of(next);
        if !name.starts_with(MEMBERS_PREFIX) {
            break;
        }
        let digest = name
            .strip_prefix(MEMBERS_PREFIX)
            .and_then(|rest| rest.strip_suffix(&format!("/{MANIFEST_ENTRY}")))
            .and_then(|hex| hex.parse::<ManifestDigest>().ok())
            .ok_or_else(|| damaged(Damage::Header { name: name.clone() }))?;
        let bytes = read_small_entry_after(
            body,
            next,
            &name,
            crate::profile::ce::manifest::MAX_TREE_MANIFEST_BYTES,
        )?;
        if crate::profile::ce::manifest::over_bound(&bytes) {
            return Err(damaged(Damage::TooLarge {
                name,
                size: bytes.len() as u64,
                max: MAX_MANIFEST_BYTES,
            }));
        }
        let member = Manifest::parse(&bytes).map_err(AdoptError::from)?;
        if member.digest != digest {
            return Err(damaged(Damage::HashesTo {
                name,
                found: ObjectId::from_bytes(*member.digest.as_bytes()),
            }));
        }
        *next = read_header(body, "its objects")?;
        let attestations = read_attestations(body, next, &member_attestations_prefix(&digest))?;
        out.push(MemberEntry {
            manifest: member,
            attestations,
        });
    }
    // A bundle with no member at all is one as earlier cestores wrote: its
    // snapshot is taken alone, once the store holds what it names.
    if out.is_empty() {
        return Ok(out);
    }
    let named_of = |d: &ManifestDigest| -> Vec<ManifestDigest> {
        let m = if *d == manifest.digest {
            Some(manifest)
        } else {
            out.iter().map(|e| &e.manifest).find(|m| m.digest == *d)
        };
        m.and_then(|m| m.tree.as_ref())
            .map(|t| t.named())
            .unwrap_or_default()
    };
    let expected = crate::profile::tree::stored::closure(&manifest.digest, &mut |d| {
        Ok::<_, Error>(named_of(d))
    })?;
    let found: Vec<ManifestDigest> = out.iter().map(|e| e.manifest.digest).collect();
    if found != expected {
        return Err(damaged(Damage::Members {
            expected: expected.len(),
            found: found.len(),
        }));
    }
    Ok(out)
}

/// Reads the attestation entries (named under `prefix`), from the header
/// `next` on, and leaves in `next` the header after them. Each must be named by its bytes' SHA-256,
/// in increasing order (so each comes once), and there are at most
/// [`MAX_ATTESTATIONS`](crate::sign::limits::MAX_ATTESTATIONS), each at most
/// [`MAX_ATTESTATION_BYTES`](crate::sign::limits::MAX_ATTESTATION_BYTES).
fn read_attestations(
    body: &mut dyn Read,
    next: &mut [u8; BLOCK],
    prefix: &str,
) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut last: Option<ObjectId> = None;
    loop {
        let name = entry_name_of(next);
        if !name.starts_with(prefix) {
            return Ok(out);
        }
        crate::sign::limits::check_count(out.len() + 1)
            .map_err(|e| damaged(Damage::Attestations(e)))?;
        let data = read_small_entry_after(
            body,
            next,
            &name,
            crate::sign::limits::MAX_ATTESTATION_BYTES,
        )?;
        let id = ObjectId::of(&data);
        if name != format!("{prefix}{id}.json") {
            return Err(damaged(Damage::HashesTo {
                name: name.clone(),
                found: id,
            }));
        }
        if last.is_some_and(|l| l >= id) {
            return Err(damaged(Damage::AttestationOrder { name: name.clone() }));
        }
        last = Some(id);
        out.push(data);
        *next = read_header(body, "its objects")?;
    }
}

/// The rest of a bundle once its manifest is read: its objects, in the
/// archive's order, and its end.
struct Rest {
    body: Body<Box<dyn Read>>,
    /// A header already read: the first object's.
    pending: Option<[u8; BLOCK]>,
    objects: BTreeMap<ObjectKey, u64>,
}

impl Rest {
    /// Reads the objects and the end: `take` gets each object whose bytes
    /// the caller keeps (and says so), the others are hashed and checked.
    fn read_objects(
        mut self,
        take: &mut dyn FnMut(&ObjectKey, &mut dyn Read) -> Result<bool>,
    ) -> Result<()> {
        let body = &mut self.body;
        for (key, size) in &self.objects {
            let name = object_entry(key);
            let block = match self.pending.take() {
                Some(block) => block,
                None => read_header(body, &name)?,
            };
            check_header(&block, &name, key.mode(), *size)?;
            if !take(key, &mut body.take(*size))? {
                check_object_entry(body, key, *size, &name)?;
            }
            read_padding(body, *size, &name)?;
        }
        let mut end = [0u8; 2 * BLOCK];
        let start = match self.pending.take() {
            Some(block) => {
                end[..BLOCK].copy_from_slice(&block);
                BLOCK
            }
            None => 0,
        };
        if start + read_full(body, &mut end[start..])? != end.len() || end.iter().any(|&b| b != 0) {
            return Err(damaged(Damage::NoEndBlocks));
        }
        self.body.finish()
    }
}

/// What an import checks before it stores anything, with no store: the
/// manifest, every object's bytes, and the profile's content entry as an
/// ingest checks it.
fn check_only(manifest: &Manifest, expected: Option<ManifestDigest>, rest: Rest) -> Result<()> {
    use crate::profile::Profile;
    crate::store::ingest::adopt::check_received(manifest, expected)?;
    let content = crate::profile::ce::CE
        .content_entry(&manifest.entries)
        .key();
    let mut content_bytes = Vec::new();
    rest.read_objects(&mut |key, data| {
        if *key != content {
            return Ok(false);
        }
        let mut hashing = HashingWriter {
            inner: &mut content_bytes,
            hasher: ObjectHasher::default(),
            bytes: 0,
        };
        io::copy(data, &mut hashing).map_err(unreadable)?;
        if hashing.hasher.finish() != key.id {
            return Err(damaged(Damage::ObjectHash {
                entry: object_entry(key),
            }));
        }
        Ok(true)
    })?;
    crate::store::ingest::adopt::content_version(&content_bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests;
