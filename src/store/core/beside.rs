//! Files kept beside a snapshot's manifest: its source records and its
//! attestations, one file each, named by a SHA-256.
//!
//! ```text
//! STORE/sources/            source records (Kind::Sources)
//! └── ab/<64 hex>/          those of the snapshot with this digest
//!     └── <64 hex>.json     one record (a JSON line); its SHA-256 is the name
//! STORE/attestations/       attestations (Kind::Attestations)
//! └── ab/<64 hex>/          those of the snapshot with this digest
//!     └── <64 hex>.json     one attestation; the SHA-256 of its envelope is the name
//! ```
//!
//! As with manifests, the files are the store's own record and the
//! catalogue's tables (`sources`, `attestations`) their index: a file is made
//! durable by a `syncfs` before the catalogue records it, `rm` removes the
//! snapshot's directories (with its manifest) aside inside the transaction
//! that forgets the snapshot and removes them once it commits
//! ([`SetAside`]), `cestore recover` records again every file the
//! catalogue lacks and writes again every recorded one whose file is gone
//! (an attestation's file carries all its row holds: see
//! [`KeptAttestation`]), and gc keeps the files of a snapshot that is
//! recorded or whose manifest stays on disk ([`listed`]). No such file
//! enters the manifest: the snapshot's digest does not depend on it.
//!
//! What differs between the kinds is only the directory, the words of the
//! messages ([`Kind`]) and how a file's bytes read ([`Beside`]); every step
//! on disk is written once, here.

use std::borrow::Cow;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode};
use rustix::io::Errno;
use sha2::{Digest as _, Sha256};

use crate::catalogue::{Catalogue, KeptAttestation, KeptSource};
use crate::digest::{AttestationId, ManifestDigest, SourceId};
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{publish_noreplace, Published};
use crate::store::core::objects::WorkDir;
use crate::store::Store;

/// A kind of file kept beside a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Source records, under `sources/`.
    Sources,
    /// Attestations, under `attestations/`.
    Attestations,
}

/// The words a kind's messages use, each a whole operation so that errors
/// read "could not {operation} '{path}'".
struct Words {
    dir: &'static str,
    one: &'static str,
    staged_prefix: &'static str,
    max_bytes: u64,
    mkdir: &'static str,
    write: &'static str,
    open: &'static str,
    open_top: &'static str,
    publish: &'static str,
    remove: &'static str,
    remove_orphans: &'static str,
    list: &'static str,
    bad_name: &'static str,
    not_one: &'static str,
    mismatch: &'static str,
    orphans: &'static str,
}

/// The words of a kind: `$a` is the article before `$one` (`a`, `an`).
macro_rules! words {
    ($dir:literal, $a:literal, $one:literal, $many:literal, $named:literal, $max:expr) => {
        Words {
            dir: $dir,
            one: $one,
            staged_prefix: concat!($dir, "-"),
            max_bytes: $max,
            mkdir: concat!("create ", $a, " ", $many, " directory"),
            write: concat!("write ", $a, " ", $one),
            open: concat!("open ", $a, " ", $many, " directory"),
            open_top: concat!("open the ", $many, " directory"),
            publish: concat!("publish ", $a, " ", $one),
            remove: concat!("remove ", $a, " ", $one),
            remove_orphans: concat!("remove orphan ", $many),
            list: concat!("list ", $many),
            bad_name: concat!("its name is not ", $a, " ", $one, "'s"),
            not_one: concat!("it is not ", $a, " ", $one),
            mismatch: concat!("its ", $named, " not hash to its name"),
            orphans: concat!(
                $many,
                " of a snapshot neither recorded nor kept as a manifest"
            ),
        }
    };
}

/// A dirty record lists at most the reference's file count of paths, each
/// within `PATH_MAX`.
const SOURCE_WORDS: Words = words!(
    "sources",
    "a",
    "source record",
    "source records",
    "bytes do",
    64 << 20
);

/// An envelope holds one signed statement about one snapshot.
const ATTESTATION_WORDS: Words = words!(
    "attestations",
    "an",
    "attestation",
    "attestations",
    "envelope's bytes do",
    16 << 20
);

impl Kind {
    /// Every kind, in the order recover and gc treat them.
    pub const ALL: [Kind; 2] = [Kind::Sources, Kind::Attestations];

    fn words(self) -> &'static Words {
        match self {
            Kind::Sources => &SOURCE_WORDS,
            Kind::Attestations => &ATTESTATION_WORDS,
        }
    }

    /// The kind's directory inside the store: `sources` or `attestations`.
    pub fn dir(self) -> &'static str {
        self.words().dir
    }

    /// One file of this kind, in words: `source record`, `attestation`.
    pub fn one(self) -> &'static str {
        self.words().one
    }

    /// What gc says of a snapshot's files it removes.
    pub fn orphans(self) -> &'static str {
        self.words().orphans
    }

    /// A snapshot's directory of this kind relative to the store:
    /// `<dir>/ab/<64 hex>`.
    fn rel_dir(self, digest: &ManifestDigest) -> String {
        let hex = digest.to_hex();
        format!("{}/{}/{hex}", self.dir(), &hex[..2])
    }
}

/// What is kept in a file beside a snapshot.
pub trait Beside: Sized {
    /// The SHA-256 that names its file.
    type Id: Copy + Ord + std::fmt::Display;
    /// Its kind.
    const KIND: Kind;
    /// The SHA-256 that names its file.
    fn id(&self) -> Self::Id;
    /// Its file's bytes.
    fn file(&self) -> Cow<'_, str>;
    /// The bytes of a file whose SHA-256 is its name; `None` when the file
    /// cannot be one of this kind.
    fn named_bytes(file: &[u8]) -> Option<Cow<'_, [u8]>>;
    /// Reads one back from its file's bytes; `None` when they are not one.
    fn parse_file(file: &str) -> Option<Self>;
    /// Those the catalogue records of a snapshot, oldest first.
    fn recorded(cat: &Catalogue, digest: &ManifestDigest) -> Result<Vec<Self>>;
    /// Records one of a recorded snapshot unless it is there already;
    /// returns whether it was added.
    fn record(&self, cat: &Catalogue, digest: &ManifestDigest) -> Result<bool>;
}

impl Beside for KeptSource {
    type Id = SourceId;
    const KIND: Kind = Kind::Sources;
    fn id(&self) -> SourceId {
        self.id
    }
    fn file(&self) -> Cow<'_, str> {
        Cow::Borrowed(&self.json)
    }
    fn named_bytes(file: &[u8]) -> Option<Cow<'_, [u8]>> {
        Some(Cow::Borrowed(file))
    }
    fn parse_file(file: &str) -> Option<Self> {
        KeptSource::parse(file)
    }
    fn recorded(cat: &Catalogue, digest: &ManifestDigest) -> Result<Vec<Self>> {
        cat.sources(digest)
    }
    fn record(&self, cat: &Catalogue, digest: &ManifestDigest) -> Result<bool> {
        cat.add_source(digest, self)
    }
}

impl Beside for KeptAttestation {
    type Id = AttestationId;
    const KIND: Kind = Kind::Attestations;
    fn id(&self) -> AttestationId {
        self.id
    }
    fn file(&self) -> Cow<'_, str> {
        Cow::Owned(self.file())
    }
    fn named_bytes(file: &[u8]) -> Option<Cow<'_, [u8]>> {
        let kept = KeptAttestation::parse(std::str::from_utf8(file).ok()?)?;
        Some(Cow::Owned(kept.json.into_bytes()))
    }
    fn parse_file(file: &str) -> Option<Self> {
        KeptAttestation::parse(file)
    }
    fn recorded(cat: &Catalogue, digest: &ManifestDigest) -> Result<Vec<Self>> {
        cat.attestations(digest)
    }
    fn record(&self, cat: &Catalogue, digest: &ManifestDigest) -> Result<bool> {
        cat.add_attestation(digest, self)
    }
}

/// A file found beside a snapshot.
#[derive(Debug)]
pub enum Found<K> {
    /// A sound file: its bytes read as one of its kind, and hash to its name.
    Sound(Box<K>),
    /// A file that is not sound, and why.
    Damaged(PathBuf, String),
}

impl Store {
    /// The directory of a snapshot's files of one kind.
    pub fn beside_dir(&self, kind: Kind, digest: &ManifestDigest) -> PathBuf {
        self.root().join(kind.rel_dir(digest))
    }

    /// Writes a file beside a snapshot through the work directory, never
    /// overwriting. Returns whether it was new. Its bytes are on the disk
    /// before it is named; the name is durable after the next
    /// [`Store::sync`].
    pub fn write_beside<K: Beside>(
        &self,
        work: &WorkDir,
        digest: &ManifestDigest,
        kept: &K,
    ) -> Result<bool> {
        let Some(staged) = self.stage_beside(work, digest, kept)? else {
            return Ok(false);
        };
        staged
            .file
            .sync_data()
            .ctx(staged.kind.words().write, work.path().join(&staged.name))?;
        self.publish_beside(work, digest, &staged)
    }

    /// Writes a file to keep beside `digest` into the work directory, to be
    /// named by [`Store::publish_beside`] once its bytes are durable; `None`
    /// when the file is there already (its name is its bytes' hash).
    pub fn stage_beside<K: Beside>(
        &self,
        work: &WorkDir,
        digest: &ManifestDigest,
        kept: &K,
    ) -> Result<Option<StagedBeside>> {
        let w = K::KIND.words();
        let id = kept.id().to_string();
        let there = self
            .beside_dir(K::KIND, digest)
            .join(format!("{id}{SUFFIX}"));
        if rustix::fs::stat(&there).is_ok() {
            return Ok(None);
        }
        let name = format!("{}{id}", w.staged_prefix);
        let path = work.path().join(&name);
        let file =
            crate::fsutil::write_new(&path, kept.file().as_bytes(), 0o444).ctx(w.write, &path)?;
        Ok(Some(StagedBeside {
            kind: K::KIND,
            id,
            name,
            file,
        }))
    }

    /// Names a file [`Store::stage_beside`] wrote, beside `digest`, never
    /// overwriting; returns whether it was new.
    pub fn publish_beside(
        &self,
        work: &WorkDir,
        digest: &ManifestDigest,
        staged: &StagedBeside,
    ) -> Result<bool> {
        let w = staged.kind.words();
        let dir = self.beside_dir(staged.kind, digest);
        let rel = staged.kind.rel_dir(digest);
        let mut made = String::new();
        for part in rel.split('/') {
            if !made.is_empty() {
                made.push('/');
            }
            made.push_str(part);
            match rustix::fs::mkdirat(self.dir(), made.as_str(), Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(Error::io(w.mkdir, &dir, e)),
            }
        }
        let name = format!("{}{SUFFIX}", staged.id);
        let target = crate::fsutil::open_dir(self.dir(), rel.as_str()).ctx(w.open, &dir)?;
        match publish_noreplace(
            work.fd(),
            staged.name.as_str(),
            target.as_fd(),
            name.as_str(),
        ) {
            Ok(Published::Created) => Ok(true),
            Ok(Published::Existed) => {
                let _ = rustix::fs::unlinkat(work.fd(), staged.name.as_str(), AtFlags::empty());
                Ok(false)
            }
            Err(e) => Err(Error::io(w.publish, dir.join(name), e)),
        }
    }

    /// Removes one file of `kind` beside a snapshot, by its id (64 hex);
    /// one already gone is no error.
    pub fn remove_beside(&self, kind: Kind, digest: &ManifestDigest, id: &str) -> Result<()> {
        let path = self.beside_dir(kind, digest).join(format!("{id}{SUFFIX}"));
        match rustix::fs::unlink(&path) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(Error::io(kind.words().remove, path, e)),
        }
    }

    /// Every file of one kind beside a snapshot, sorted by name.
    pub fn read_beside<K: Beside>(&self, digest: &ManifestDigest) -> Result<Vec<Found<K>>> {
        let w = K::KIND.words();
        let dir = self.beside_dir(K::KIND, digest);
        let fd = match crate::fsutil::open_dir(self.dir(), K::KIND.rel_dir(digest).as_str()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(w.open, dir, e)),
        };
        let mut names = crate::fsutil::list_names(fd.as_fd()).ctx(w.list, &dir)?;
        names.sort();
        Ok(names
            .into_iter()
            .map(|name| read_one(&dir.join(String::from_utf8_lossy(&name).as_ref())))
            .collect())
    }
}

/// A file's name suffix.
const SUFFIX: &str = ".json";

/// A file written into a work directory by [`Store::stage_beside`], not
/// yet named beside its snapshot.
#[derive(Debug)]
pub struct StagedBeside {
    kind: Kind,
    /// Its id (64 hex): its name beside the snapshot, less the suffix.
    id: String,
    /// Its name in the work directory.
    name: String,
    /// The file, still open, to sync alone when nothing else is.
    file: std::fs::File,
}

/// Files written beside one snapshot by an operation that has not recorded
/// them yet: staged in a work directory, then named once their bytes are
/// durable ([`Written::publish`]), and taken back should the operation fail.
#[derive(Debug)]
pub struct Written {
    digest: ManifestDigest,
    staged: Vec<StagedBeside>,
    files: Vec<(Kind, String)>,
}

impl Written {
    /// Nothing written yet beside `digest`.
    pub fn new(digest: ManifestDigest) -> Written {
        Written {
            digest,
            staged: Vec::new(),
            files: Vec::new(),
        }
    }

    /// Writes `kept` into the work directory ([`Store::stage_beside`]), to
    /// publish with the others.
    pub fn stage<K: Beside>(&mut self, store: &Store, work: &WorkDir, kept: &K) -> Result<()> {
        // Two items of one id are one file (a registry may send an
        // attestation twice, differing only in its JSON's spacing).
        let id = kept.id().to_string();
        if self.staged.iter().any(|s| s.kind == K::KIND && s.id == id) {
            return Ok(());
        }
        self.staged
            .extend(store.stage_beside(work, &self.digest, kept)?);
        Ok(())
    }

    /// Whether any file waits to be published.
    pub fn staged_any(&self) -> bool {
        !self.staged.is_empty()
    }

    /// Names every staged file beside the snapshot ([`Store::publish_beside`]),
    /// remembering those that were new. Their bytes must be durable first.
    pub fn publish(&mut self, store: &Store, work: &WorkDir) -> Result<()> {
        for staged in std::mem::take(&mut self.staged) {
            if store.publish_beside(work, &self.digest, &staged)? {
                self.files.push((staged.kind, staged.id));
            }
        }
        Ok(())
    }

    /// Whether any file published was new.
    pub fn any(&self) -> bool {
        !self.files.is_empty()
    }

    /// Removes every new file again. Best effort: a file left behind is one
    /// gc or `recover` deals with.
    pub fn take_back(&self, store: &Store) {
        for (kind, id) in &self.files {
            let _ = store.remove_beside(*kind, &self.digest, id);
        }
        // A directory made for a file that was then not written goes too,
        // when nothing else is in it.
        for kind in Kind::ALL {
            let _ = rustix::fs::unlinkat(
                store.dir(),
                kind.rel_dir(&self.digest).as_str(),
                AtFlags::REMOVEDIR,
            );
        }
    }
}

/// A snapshot's own files (its manifest, source records and attestations),
/// moved aside while the catalogue forgets it: removed with the work
/// directory that holds them once the forgetting commits, or put back where
/// they were when it does not.
///
/// So a command that forgets a snapshot and fails (a full disk refusing the
/// commit, say) changes nothing: only making the work directory needs room,
/// and it comes first; a move and its way back need none. The moves happen
/// inside the transaction, so that no command records the snapshot's files
/// in between.
pub struct SetAside {
    work: WorkDir,
    /// Each file or directory to move: where it is in the store, and its
    /// name in the work directory.
    places: Vec<(PathBuf, &'static str)>,
    /// How many of `places` were moved.
    moved: usize,
    /// The snapshot.
    digest: ManifestDigest,
    /// The store's `manifests/`.
    manifests: PathBuf,
}

impl SetAside {
    /// Makes the work directory for the files of `digest`, moving nothing yet.
    pub fn new(store: &Store, digest: &ManifestDigest) -> Result<SetAside> {
        let mut places = vec![(store.manifest_path(digest), "manifest")];
        for kind in Kind::ALL {
            places.push((store.beside_dir(kind, digest), kind.dir()));
        }
        Ok(SetAside {
            work: store.work_dir("forget")?,
            places,
            moved: 0,
            digest: *digest,
            manifests: store.root().join(crate::store::MANIFESTS_DIR),
        })
    }

    /// Moves each file into the work directory; one that is not there is
    /// skipped. The manifests kept as deltas against the snapshot's are
    /// first rewritten whole, durably, so that each still unfolds.
    pub fn take(&mut self) -> Result<()> {
        if self.moved == 0 {
            crate::store::core::manifests::keep_dependents_whole(
                &self.manifests,
                &self.digest,
                &self.work,
            )?;
        }
        for (from, name) in &self.places[self.moved..] {
            match rustix::fs::rename(from, self.work.path().join(name)) {
                Ok(()) | Err(Errno::NOENT) => self.moved += 1,
                Err(e) => return Err(Error::io("set aside", from, e)),
            }
        }
        Ok(())
    }

    /// Moves back what [`SetAside::take`] moved, and returns `e`. Anything
    /// that cannot go back stays in the work directory, which is then left
    /// for gc (and the snapshot's files for `cestore recover` to write again).
    pub fn put_back(self, e: Error) -> Error {
        let mut all_back = true;
        for (to, name) in &self.places[..self.moved] {
            match rustix::fs::rename(self.work.path().join(name), to) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(_) => all_back = false,
            }
        }
        if !all_back {
            self.work.abandon();
        }
        e
    }
}

/// Every entry under `<kind's dir>/<shard>/`, with the digest its name gives
/// (an entry whose name is not a digest, or a shard that is not a directory,
/// is listed with `None`).
pub fn listed(store: &Store, kind: Kind) -> Result<Vec<(Option<ManifestDigest>, PathBuf)>> {
    let root = store.root().join(kind.dir());
    let top = match crate::fsutil::open_dir(store.dir(), kind.dir()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(kind.words().open_top, root, e)),
    };
    let mut out = Vec::new();
    for shard in crate::fsutil::read_names(top.as_fd(), &root)? {
        let shard_path = root.join(&shard);
        let fd = match crate::fsutil::open_dir(top.as_fd(), shard.as_str()) {
            Ok(fd) => fd,
            Err(_) => {
                out.push((None, shard_path));
                continue;
            }
        };
        for name in crate::fsutil::read_names(fd.as_fd(), &shard_path)? {
            let digest = ManifestDigest::from_lower_hex(&name).filter(|d| d.to_hex()[..2] == shard);
            out.push((digest, shard_path.join(name)));
        }
    }
    Ok(out)
}

/// Removes an entry [`listed`] gave: a directory as a tree, else a file.
pub fn remove_listed(kind: Kind, path: &Path) -> Result<()> {
    crate::fsutil::remove_tree_path(path).ctx(kind.words().remove_orphans, path)
}

/// Reads one file and checks its bytes against its name.
fn read_one<K: Beside>(path: &Path) -> Found<K> {
    let w = K::KIND.words();
    let damaged = |why: &str| Found::Damaged(path.to_path_buf(), why.to_string());
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Some(stem) = name.strip_suffix(SUFFIX).filter(|s| is_lower_hex64(s)) else {
        return damaged(w.bad_name);
    };
    let mut bytes = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| {
        use std::io::Read;
        f.take(w.max_bytes).read_to_end(&mut bytes)
    });
    if let Err(e) = read {
        return damaged(&format!("it cannot be read: {e}"));
    }
    let Some(named) = K::named_bytes(&bytes) else {
        return damaged(w.not_one);
    };
    let mut hex = String::with_capacity(64);
    crate::digest::encode_hex(&Sha256::digest(&named), &mut hex);
    if hex != stem {
        return damaged(w.mismatch);
    }
    match std::str::from_utf8(&bytes).ok().and_then(K::parse_file) {
        Some(kept) => Found::Sound(Box::new(kept)),
        None => damaged(w.not_one),
    }
}

/// Whether `s` is 64 lowercase hex characters, as cestore names a file.
fn is_lower_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{SourceEntry, SourceRecord, Via};
    use crate::store::LockMode;

    fn envelope(n: u8) -> String {
        format!(
            "{{\"payload\":\"{}\",\"payloadType\":\"application/vnd.in-toto+json\",\"signatures\":[{{\"keyid\":\"k\",\"sig\":\"s\"}}]}}\n",
            n
        )
    }

    fn attestation(n: u8) -> KeptAttestation {
        KeptAttestation::new(envelope(n), "b".repeat(64), "2026-01-02T03:04:05.000Z").unwrap()
    }

    fn source() -> KeptSource {
        KeptSource::new(SourceEntry {
            at: "2026-01-02T03:04:05.000Z".into(),
            via: Via::Ingest,
            record: SourceRecord::of_commit("/nowhere", None),
        })
    }

    fn open(tmp: &Path) -> Store {
        Store::open(&tmp.join("store"), LockMode::Shared, true).unwrap()
    }

    #[test]
    fn a_file_is_written_once_read_back_and_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let work = store.work_dir("test").unwrap();
        let digest = ManifestDigest::of(b"snapshot");
        let a = attestation(1);
        let s = source();
        assert!(store.write_beside(&work, &digest, &a).unwrap());
        assert!(
            !store.write_beside(&work, &digest, &a).unwrap(),
            "never twice"
        );
        assert!(store.write_beside(&work, &digest, &s).unwrap());

        let path = store
            .beside_dir(Kind::Attestations, &digest)
            .join(format!("{}.json", a.id));
        let hex = digest.to_hex();
        assert!(path.ends_with(format!("attestations/{}/{hex}/{}.json", &hex[..2], a.id)));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), a.file());
        let found = store.read_beside::<KeptAttestation>(&digest).unwrap();
        assert!(
            matches!(&found[..], [Found::Sound(k)] if **k == a),
            "{found:?}"
        );
        let found = store.read_beside::<KeptSource>(&digest).unwrap();
        assert!(
            matches!(&found[..], [Found::Sound(k)] if **k == s),
            "{found:?}"
        );

        let id = a.id.to_hex();
        store
            .remove_beside(Kind::Attestations, &digest, &id)
            .unwrap();
        store
            .remove_beside(Kind::Attestations, &digest, &id)
            .unwrap();
        assert!(store
            .read_beside::<KeptAttestation>(&digest)
            .unwrap()
            .is_empty());
        assert_eq!(store.read_beside::<KeptSource>(&digest).unwrap().len(), 1);
    }

    #[test]
    fn damaged_files_are_found_and_said_why() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let digest = ManifestDigest::of(b"snapshot");
        let dir = store.beside_dir(Kind::Attestations, &digest);
        std::fs::create_dir_all(&dir).unwrap();
        let a = attestation(1);
        let b = attestation(2);
        // Another attestation's bytes under a's name; a name that is none;
        // a file that is no wrapper; a sound one.
        std::fs::write(dir.join(format!("{}.json", a.id)), b.file()).unwrap();
        std::fs::write(dir.join("x.json"), "{}\n").unwrap();
        let bare = AttestationId::of(envelope(3).as_bytes());
        std::fs::write(dir.join(format!("{bare}.json")), envelope(3)).unwrap();
        let c = attestation(4);
        std::fs::write(dir.join(format!("{}.json", c.id)), c.file()).unwrap();
        let mut why: Vec<String> = store
            .read_beside::<KeptAttestation>(&digest)
            .unwrap()
            .into_iter()
            .filter_map(|f| match f {
                Found::Damaged(_, why) => Some(why),
                Found::Sound(k) => {
                    assert_eq!(*k, c);
                    None
                }
            })
            .collect();
        why.sort();
        assert_eq!(
            why,
            [
                "it is not an attestation",
                "its envelope's bytes do not hash to its name",
                "its name is not an attestation's",
            ]
        );

        let sdir = store.beside_dir(Kind::Sources, &digest);
        std::fs::create_dir_all(&sdir).unwrap();
        let s = source();
        std::fs::write(sdir.join(format!("{}.json", s.id)), "{}\n").unwrap();
        let found = store.read_beside::<KeptSource>(&digest).unwrap();
        assert!(
            matches!(&found[..], [Found::Damaged(_, why)] if why == "its bytes do not hash to its name"),
            "{found:?}"
        );
    }

    #[test]
    fn taken_back_files_and_removed_dirs_are_gone() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let work = store.work_dir("test").unwrap();
        let digest = ManifestDigest::of(b"snapshot");
        let old = attestation(1);
        assert!(store.write_beside(&work, &digest, &old).unwrap());
        let mut written = Written::new(digest);
        written.stage(&store, &work, &old).unwrap();
        assert!(!written.staged_any(), "a file there already is not staged");
        written.publish(&store, &work).unwrap();
        assert!(!written.any(), "nor new");
        let new = attestation(2);
        written.stage(&store, &work, &new).unwrap();
        written.stage(&store, &work, &new).unwrap();
        written.stage(&store, &work, &source()).unwrap();
        written.stage(&store, &work, &source()).unwrap();
        assert!(
            store.read_beside::<KeptSource>(&digest).unwrap().is_empty(),
            "a staged file is not named before it is published"
        );
        assert!(written.staged_any());
        written.publish(&store, &work).unwrap();
        assert!(!written.staged_any());
        assert!(written.any());
        assert_eq!(store.read_beside::<KeptSource>(&digest).unwrap().len(), 1);
        written.take_back(&store);
        let left = store.read_beside::<KeptAttestation>(&digest).unwrap();
        assert!(
            matches!(&left[..], [Found::Sound(k)] if **k == old),
            "{left:?}"
        );
        assert!(store.read_beside::<KeptSource>(&digest).unwrap().is_empty());

        assert!(store.write_beside(&work, &digest, &source()).unwrap());
        let listed_a = listed(&store, Kind::Attestations).unwrap();
        assert_eq!(
            listed_a,
            [(Some(digest), store.beside_dir(Kind::Attestations, &digest))]
        );
        // Set aside and put back: every file where it was.
        let mut aside = SetAside::new(&store, &digest).unwrap();
        aside.take().unwrap();
        for kind in Kind::ALL {
            assert!(!store.beside_dir(kind, &digest).exists(), "{kind:?}");
        }
        let e = aside.put_back(Error::Usage("refused".into()));
        assert_eq!(e.to_string(), "refused");
        assert_eq!(listed(&store, Kind::Attestations).unwrap(), listed_a);
        assert_eq!(
            std::fs::read_dir(store.beside_dir(Kind::Sources, &digest))
                .unwrap()
                .count(),
            1
        );
        // Set aside and dropped: gone, and nothing left under tmp/.
        let mut aside = SetAside::new(&store, &digest).unwrap();
        aside.take().unwrap();
        drop(aside);
        for kind in Kind::ALL {
            assert!(!store.beside_dir(kind, &digest).exists(), "{kind:?}");
        }
        let mut none = SetAside::new(&store, &ManifestDigest::of(b"none")).unwrap();
        assert!(none.take().is_ok());
    }
}
