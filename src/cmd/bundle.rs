//! `cestore export` and `cestore import`: a snapshot as one portable file,
//! for machines without a registry.
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
//! objects/<64 hex>       one per non-executable object, by SHA-256 (0444)
//! objects/<64 hex>.x     one per executable object (0555)
//! ```
//!
//! Objects are sorted by name; zero-length files have no object. Every header
//! has uid, gid and mtime 0 and empty user and group names, so the same
//! snapshot always gives the same archive, byte for byte. Import reads the
//! bundle as a stream, checks that it is exactly the archive its own contents
//! give (so a damaged byte anywhere, padding included, is refused), and hands
//! the manifest and objects to [`adopt`](super::adopt), which checks
//! the rules and every hash before anything enters the store.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use super::adopt::{adopt, AdoptError};
use super::ingest::IngestReport;
use super::{resolve, Report};
use crate::digest::{ManifestDigest, ObjectHasher, ObjectId};
use crate::error::{Error, IoContext, Result};
use crate::manifest::Manifest;
use crate::store::{LockMode, ObjectKey, Store};

/// The canonical manifest's entry name.
pub const MANIFEST_ENTRY: &str = "manifest.json";
/// The digest entry's name.
pub const DIGEST_ENTRY: &str = "manifest.sha256";
/// The objects' directory inside a bundle.
pub const OBJECTS_PREFIX: &str = "objects/";
/// The zstd frame magic number, as it starts a compressed bundle.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The magic number of the zstd skippable frame that seals a compressed bundle.
const SEAL_MAGIC: [u8; 4] = [0x50, 0x2a, 0x4d, 0x18];
/// The seal frame's content: a tag and the SHA-256 of the compressed frame.
const SEAL_TAG: &[u8; 4] = b"CSTS";
/// The seal frame's length: magic, length, tag, digest.
const SEAL_LEN: usize = 4 + 4 + 4 + 32;
/// The largest compressed bundle import reads (a release is at most 16 MiB).
const MAX_COMPRESSED_BYTES: u64 = 64 * 1024 * 1024;

/// The zstd level export uses: zstd's default. On 16 MiB of text it takes a
/// fraction of a second; level 19 made the file a fifth smaller in 40 s.
const ZSTD_LEVEL: i32 = 3;
/// The largest manifest entry import reads.
const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;
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
}

impl Report for ExportReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "{}", self.file)?;
        writeln!(
            w,
            "{}: {}, {} ({}), sha256 {}",
            self.manifest_digest,
            super::counted(self.objects, "object", "objects"),
            super::counted(self.bytes, "byte", "bytes"),
            match self.format {
                Format::Tar => "tar",
                Format::TarZstd => "tar+zstd",
            },
            self.sha256
        )
    }
}

/// What to import.
pub struct ImportOptions<'a> {
    /// The bundle; `-` reads standard input.
    pub file: &'a Path,
    /// The digest the bundle must hold, when known.
    pub digest: Option<&'a str>,
    /// Only verify the bundle: open no store and record nothing.
    pub check: bool,
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
}

/// The report of `cestore import`.
#[derive(Debug, serde::Serialize)]
pub struct ImportReport {
    /// What entered the store; absent with `--check`, which stores nothing.
    #[serde(flatten)]
    pub ingest: Option<IngestReport>,
    /// What was read.
    pub bundle: BundleStats,
}

impl Report for ImportReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        match &self.ingest {
            Some(ingest) => ingest.human(w),
            None => writeln!(
                w,
                "{}: a sound bundle of {} ({}); not imported",
                self.bundle.file,
                self.bundle.manifest_digest,
                super::counted(self.bundle.objects, "object", "objects")
            ),
        }
    }
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

/// A reader that hashes and counts what passes through it.
struct HashingReader<R> {
    inner: R,
    hasher: ObjectHasher,
    bytes: u64,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

/// The entry name of an object.
fn object_entry(key: &ObjectKey) -> String {
    format!(
        "{OBJECTS_PREFIX}{}{}",
        key.id,
        if key.executable { ".x" } else { "" }
    )
}

/// Parses an object's entry name.
fn parse_object_entry(name: &str) -> Option<ObjectKey> {
    let rest = name.strip_prefix(OBJECTS_PREFIX)?;
    let (hex, executable) = match rest.strip_suffix(".x") {
        Some(h) => (h, true),
        None => (rest, false),
    };
    if hex.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    Some(ObjectKey {
        id: hex.parse().ok()?,
        executable,
    })
}

fn digest_entry(digest: &ManifestDigest) -> Vec<u8> {
    format!("{digest}  {MANIFEST_ENTRY}\n").into_bytes()
}

/// Writes one entry: a ustar header with fixed fields, the data, the padding.
fn write_entry(w: &mut dyn Write, name: &str, mode: u32, data: &[u8]) -> io::Result<()> {
    let mut h = tar::Header::new_ustar();
    h.set_path(name)?;
    h.set_size(data.len() as u64);
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
    w.write_all(h.as_bytes())?;
    w.write_all(data)?;
    let pad = (BLOCK - data.len() % BLOCK) % BLOCK;
    w.write_all(&[0u8; BLOCK][..pad])
}

/// Writes the canonical archive of a manifest and its objects (sorted by key).
fn write_archive<'a>(
    w: &mut dyn Write,
    manifest: &Manifest,
    objects: impl Iterator<Item = Result<(ObjectKey, std::borrow::Cow<'a, [u8]>)>>,
) -> Result<u64> {
    let werr = |e| Error::io("write the bundle", "<bundle>", e);
    write_entry(w, MANIFEST_ENTRY, 0o444, &manifest.bytes).map_err(werr)?;
    write_entry(w, DIGEST_ENTRY, 0o444, &digest_entry(&manifest.digest)).map_err(werr)?;
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
        .map(|e| {
            (
                ObjectKey {
                    id: e.sha256,
                    executable: e.executable,
                },
                e.size,
            )
        })
        .collect()
}

/// Writes a snapshot's bundle.
pub fn export(store_root: &Path, opts: &ExportOptions<'_>) -> Result<ExportReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    let digest = resolve(store.catalogue(), opts.digest)?;
    let bytes = store.catalogue().manifest_bytes(&digest)?;
    let manifest = Manifest::parse(&bytes)
        .ok()
        .filter(|m| m.digest == digest)
        .ok_or_else(|| {
            Error::Integrity(format!(
                "the catalogue's manifest for {digest} is not its canonical manifest"
            ))
        })?;
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
        return Err(Error::Conflict(format!(
            "the bundle '{}' already exists",
            dest.display()
        )));
    }
    let name = dest
        .file_name()
        .map_or_else(|| "bundle".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dest.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = write_bundle(&store, &manifest, &tmp, format);
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
            return Err(Error::Conflict(format!(
                "the bundle '{}' already exists",
                dest.display()
            )))
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
    })
}

/// Writes the bundle to `tmp` and makes it durable; returns the object
/// count, the file's size and its SHA-256.
fn write_bundle(
    store: &Store,
    manifest: &Manifest,
    tmp: &Path,
    format: Format,
) -> Result<(u64, u64, ObjectId)> {
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
    let objects = objects_of(manifest).into_iter().map(|(key, size)| {
        let path = store.object_path(&key);
        let data = std::fs::read(&path).ctx("read an object", &path)?;
        if data.len() as u64 != size || ObjectId::of(&data) != key.id {
            return Err(Error::Integrity(format!(
                "object '{}' no longer matches its key; run `cestore verify`",
                path.display()
            )));
        }
        Ok((key, std::borrow::Cow::Owned(data)))
    });
    let count = match format {
        Format::Tar => write_archive(&mut out, manifest, objects)?,
        Format::TarZstd => {
            let mut enc = zstd::stream::write::Encoder::new(&mut out, ZSTD_LEVEL)
                .ctx("start compressing the bundle", tmp)?;
            enc.include_checksum(true)
                .ctx("start compressing the bundle", tmp)?;
            let count = write_archive(&mut enc, manifest, objects)?;
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

/// Reads a compressed bundle whole, checks its seal, and returns the
/// compressed frame without the seal.
fn unseal<R: Read>(raw: R, label: &str) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    raw.take(MAX_COMPRESSED_BYTES + 1)
        .read_to_end(&mut data)
        .ctx("read the bundle", label)?;
    if data.len() as u64 > MAX_COMPRESSED_BYTES {
        return Err(damaged(format!(
            "it is larger than {MAX_COMPRESSED_BYTES} bytes"
        )));
    }
    let Some(cut) = data.len().checked_sub(SEAL_LEN) else {
        return Err(damaged("it is too short to hold its seal"));
    };
    let seal = &data[cut..];
    let expected_len = ((SEAL_LEN - 8) as u32).to_le_bytes();
    if seal[..4] != SEAL_MAGIC || seal[4..8] != expected_len || &seal[8..12] != SEAL_TAG {
        return Err(damaged(
            "its seal (the trailing skippable frame) is missing or changed",
        ));
    }
    if ObjectId::of(&data[..cut]).as_bytes()[..] != seal[12..] {
        return Err(damaged("its compressed bytes do not hash to its seal"));
    }
    data.truncate(cut);
    Ok(data)
}

fn damaged(why: impl std::fmt::Display) -> Error {
    // A reader's message may quote the bundle's bytes: keep one short line
    // of printable text.
    let why: String = why
        .to_string()
        .chars()
        .map(|c| {
            if c.is_control() || c == '\u{fffd}' {
                '?'
            } else {
                c
            }
        })
        .take(200)
        .collect();
    Error::Integrity(format!("the bundle is damaged: {why}"))
}

/// Reads one entry's data, refusing more than `max` bytes.
fn read_entry<R: Read>(entry: &mut tar::Entry<'_, R>, max: u64) -> Result<Vec<u8>> {
    let size = entry.header().size().map_err(damaged)?;
    if size > max {
        return Err(damaged(format!(
            "entry is {size} bytes, more than the {max} expected"
        )));
    }
    let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    entry.read_to_end(&mut data).map_err(damaged)?;
    if data.len() as u64 != size {
        return Err(damaged("an entry is cut short"));
    }
    Ok(data)
}

fn entry_name<R: Read>(entry: &tar::Entry<'_, R>) -> Result<String> {
    if entry.header().entry_type() != tar::EntryType::Regular {
        return Err(damaged("an entry is not a regular file"));
    }
    let path = entry.path().map_err(damaged)?;
    Ok(path.to_string_lossy().into_owned())
}

/// Reads a bundle, checks it, and adopts its snapshot into the store.
pub fn import(store_root: &Path, opts: &ImportOptions<'_>) -> Result<ImportReport> {
    let expected = match opts.digest {
        Some(d) => Some(
            d.parse::<ManifestDigest>()
                .map_err(|e| Error::Usage(format!("--digest takes a full 64-hex digest: {e}")))?,
        ),
        None => None,
    };
    let stdin = opts.file == Path::new("-");
    let (label, mut raw): (String, Box<dyn Read>) = if stdin {
        ("<stdin>".into(), Box::new(io::stdin().lock()))
    } else {
        let abs = std::path::absolute(opts.file).ctx("resolve the bundle path", opts.file)?;
        let file = File::open(&abs).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                Error::NotFound {
                    what: "bundle",
                    path: abs.clone(),
                }
            } else {
                Error::io("open the bundle", &abs, e)
            }
        })?;
        (abs.display().to_string(), Box::new(BufReader::new(file)))
    };
    // The first block tells a tar (its ustar magic) from a zstd frame.
    let mut magic = Vec::with_capacity(512);
    (&mut raw)
        .take(512)
        .read_to_end(&mut magic)
        .ctx("read the bundle", &label)?;
    let format = if magic.starts_with(&ZSTD_MAGIC) {
        Format::TarZstd
    } else if magic.get(257..262) == Some(b"ustar") {
        Format::Tar
    } else {
        return Err(Error::Integrity(format!(
            "'{label}' is not a bundle: it is neither a tar archive nor zstd-compressed; make one with `cestore export`"
        )));
    };
    let chained = io::Cursor::new(magic).chain(raw);
    let tar_stream: Box<dyn Read> = match format {
        Format::Tar => Box::new(chained),
        Format::TarZstd => {
            let frame = unseal(chained, &label)?;
            Box::new(
                zstd::stream::read::Decoder::new(io::Cursor::new(frame))
                    .ctx("start decompressing the bundle", &label)?,
            )
        }
    };
    let mut reader = HashingReader {
        inner: tar_stream,
        hasher: ObjectHasher::default(),
        bytes: 0,
    };
    let (manifest, objects) = read_archive(&mut reader, expected)?;
    // The rest of the stream (the end blocks, anything after them) counts too.
    io::copy(&mut reader, &mut io::sink()).map_err(damaged)?;
    let HashingReader { hasher, bytes, .. } = reader;
    let mut canonical = HashingWriter {
        inner: io::sink(),
        hasher: ObjectHasher::default(),
        bytes: 0,
    };
    write_archive(
        &mut canonical,
        &manifest,
        objects
            .iter()
            .map(|(k, d)| Ok((*k, std::borrow::Cow::Borrowed(&d[..])))),
    )?;
    if canonical.bytes != bytes || canonical.hasher.finish() != hasher.finish() {
        return Err(damaged(
            "it is not the archive `cestore export` writes for its own contents (a changed byte in a header, the padding or the end)",
        ));
    }
    let count = objects.len() as u64;
    let bundle = BundleStats {
        file: label,
        format,
        objects: count,
        manifest_digest: manifest.digest,
    };
    if opts.check {
        // What an import checks before it stores anything, with no store.
        crate::policy::check_manifest_entries(&manifest.entries)
            .map_err(super::adopt::AdoptError::from)?;
        if let Some(key) = objects_of(&manifest)
            .keys()
            .find(|k| !objects.contains_key(k))
        {
            return Err(super::adopt::AdoptError::BlobMissing(key.id).into());
        }
        super::adopt::check_plugin_json(None, &manifest, &objects)?;
        return Ok(ImportReport {
            ingest: None,
            bundle,
        });
    }
    let mut objects = objects;
    let ingest = adopt(
        store_root,
        &manifest.bytes,
        expected,
        &format!("bundle:{}", bundle.file),
        |wanted| {
            Ok(wanted
                .iter()
                .filter_map(|w| objects.remove(&w.key).map(|d| (w.key, d)))
                .collect())
        },
    )?;
    Ok(ImportReport {
        ingest: Some(ingest),
        bundle,
    })
}

/// Reads the manifest, the digest and the objects from the archive stream.
fn read_archive<R: Read>(
    reader: R,
    expected: Option<ManifestDigest>,
) -> Result<(Manifest, BTreeMap<ObjectKey, Vec<u8>>)> {
    let mut archive = tar::Archive::new(reader);
    let mut entries = archive.entries().map_err(damaged)?;
    let mut next =
        || -> Result<Option<tar::Entry<'_, R>>> { entries.next().transpose().map_err(damaged) };
    let mut first = next()?.ok_or_else(|| damaged("it holds no entries"))?;
    if entry_name(&first)? != MANIFEST_ENTRY {
        return Err(damaged(format!("its first entry is not {MANIFEST_ENTRY}")));
    }
    let bytes = read_entry(&mut first, MAX_MANIFEST_BYTES)?;
    drop(first);
    let manifest = Manifest::parse(&bytes).map_err(AdoptError::from)?;
    let mut second = next()?.ok_or_else(|| damaged(format!("{DIGEST_ENTRY} is missing")))?;
    if entry_name(&second)? != DIGEST_ENTRY {
        return Err(damaged(format!("its second entry is not {DIGEST_ENTRY}")));
    }
    let recorded = read_entry(&mut second, 256)?;
    drop(second);
    if recorded != digest_entry(&manifest.digest) {
        return Err(damaged(format!(
            "{MANIFEST_ENTRY} hashes to {}, which {DIGEST_ENTRY} does not record",
            manifest.digest
        )));
    }
    if let Some(expected) = expected {
        if manifest.digest != expected {
            return Err(AdoptError::DigestMismatch {
                expected,
                found: manifest.digest,
            }
            .into());
        }
    }
    let sizes = objects_of(&manifest);
    let mut objects = BTreeMap::new();
    while let Some(mut entry) = next()? {
        let name = entry_name(&entry)?;
        let key = parse_object_entry(&name)
            .ok_or_else(|| damaged(format!("unexpected entry '{name}'")))?;
        let size = *sizes
            .get(&key)
            .ok_or_else(|| damaged(format!("'{name}' is not an object of its manifest")))?;
        let data = read_entry(&mut entry, size)?;
        if data.len() as u64 != size {
            return Err(damaged(format!(
                "'{name}' has {} bytes, not {size}",
                data.len()
            )));
        }
        let found = ObjectId::of(&data);
        if found != key.id {
            return Err(damaged(format!("'{name}' hashes to {found}")));
        }
        if objects.insert(key, data).is_some() {
            return Err(damaged(format!("'{name}' appears twice")));
        }
    }
    Ok((manifest, objects))
}
