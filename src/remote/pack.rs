//! Packs: a snapshot's small objects carried as a few reproducible tar
//! archives, so that a release travels in a few dozen blobs rather than one
//! per file.
//!
//! The layout is a pure function of the canonical manifest (see
//! [`layout`]); a pack's bytes are a pure function of the objects it holds
//! (see [`PackWriter`]), so the same release always gives byte-identical
//! packs, and two releases that share an unchanged group of files share its
//! pack. `docs/remote.md` describes the format for other clients.

use std::collections::{BTreeMap, BTreeSet};

use crate::digest::{ObjectId, ObjectKey};
use crate::profile::ce::manifest::Manifest;
use crate::remote::{PackError, SlotsError};

/// A content of at least this many bytes travels as its own raw blob
/// ([`Scale::SMALL`]).
pub const RAW_MIN_BYTES: u64 = 256 * 1024;
/// A pack is closed before an object that would take it past this many
/// bytes (headers and padding included, end blocks excluded)
/// ([`Scale::SMALL`]).
pub const PACK_MAX_BYTES: u64 = 2 * 1024 * 1024;
/// A group of at least this many bytes gets packs of its own; smaller
/// groups share packs with their neighbours ([`Scale::SMALL`]).
pub const GROUP_OWN_BYTES: u64 = 1024 * 1024;
/// A shared pack of at least this many bytes closes after a group whose name
/// marks a boundary (see [`is_boundary`]) ([`Scale::SMALL`]).
pub const SHARED_MIN_BYTES: u64 = 512 * 1024;
/// A snapshot whose contents hold more than this many bytes is laid out at
/// [`Scale::LARGE`]: more than four times a CE release's bound, so no
/// release is.
pub const LARGE_TREE_BYTES: u64 = 64 * 1024 * 1024;

/// The sizes a layout cuts at, chosen by a snapshot's size alone.
///
/// A registry spends about as much on a request as on megabytes of data
/// (the CNCF registry: about 3 ms of CPU per blob served, as much as on
/// 6 MB of a blob's bytes; a hosted one, a round trip), so a gigabyte tree
/// in blobs of a release's sizes would cost more in requests than in
/// bytes. The large scale keeps the small one's proportions between pack
/// sizes, eight times over, and takes contents raw from sixteen times the
/// size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scale {
    /// A content of at least this many bytes is its own raw blob.
    pub raw_min: u64,
    /// A pack closes before an object that would take it past this.
    pub pack_max: u64,
    /// A group of at least this many bytes gets packs of its own.
    pub group_own: u64,
    /// A shared pack of at least this many bytes closes at a boundary.
    pub shared_min: u64,
}

impl Scale {
    /// The scale of every snapshot up to [`LARGE_TREE_BYTES`].
    pub const SMALL: Scale = Scale {
        raw_min: RAW_MIN_BYTES,
        pack_max: PACK_MAX_BYTES,
        group_own: GROUP_OWN_BYTES,
        shared_min: SHARED_MIN_BYTES,
    };

    /// The scale of a snapshot of more than [`LARGE_TREE_BYTES`].
    pub const LARGE: Scale = Scale {
        raw_min: 4 * 1024 * 1024,
        pack_max: 16 * 1024 * 1024,
        group_own: 8 * 1024 * 1024,
        shared_min: 4 * 1024 * 1024,
    };

    /// The scale a snapshot is laid out at: a step, so that a small edit
    /// of a large tree keeps its scale.
    pub fn of(manifest: &Manifest) -> Scale {
        if manifest.total_bytes() > LARGE_TREE_BYTES {
            Scale::LARGE
        } else {
            Scale::SMALL
        }
    }
}
/// The tar block size.
pub const BLOCK: u64 = 512;

/// One object of a pack: a distinct content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackObject {
    /// A key the store holds the content under (the first path's exec bit).
    pub key: ObjectKey,
    /// Its size, more than zero and less than its layout's
    /// [`Scale::raw_min`].
    pub size: u64,
    /// The first path in manifest order that uses it, for messages.
    pub path: String,
}

/// A raw object: a content of at least its layout's [`Scale::raw_min`],
/// its own blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawObject {
    /// A key the store holds the content under.
    pub key: ObjectKey,
    /// Its size.
    pub size: u64,
    /// The first path in manifest order that uses it.
    pub path: String,
}

/// How a snapshot's objects are laid out in blobs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// The packs, in the order they are listed.
    pub packs: Vec<Vec<PackObject>>,
    /// The raw objects, in manifest order of first use.
    pub raw: Vec<RawObject>,
}

/// The group of a path: its top-level directory and first subdirectory, as
/// far as it has them (`skills/ce-plan/`, `scripts/`), or `""` for a file at
/// the top level.
pub fn group_of(path: &str) -> &str {
    let mut slashes = path.match_indices('/').map(|(i, _)| i);
    match (slashes.next(), slashes.next()) {
        (Some(_), Some(second)) => &path[..=second],
        (Some(first), None) => &path[..=first],
        _ => "",
    }
}

/// Whether a shared pack may close after this group: one group name in four
/// (by the first byte of its SHA-256), so that cut points depend on names,
/// not on sizes, and an edit moves none of them.
pub fn is_boundary(group: &str) -> bool {
    ObjectId::of(group.as_bytes()).as_bytes()[0] < 64
}

/// The bytes an object takes in a pack: its header and its padded data.
pub fn entry_bytes(size: u64) -> u64 {
    BLOCK + size.div_ceil(BLOCK) * BLOCK
}

/// Lays out a snapshot's objects at its [`Scale`]: contents of
/// [`Scale::raw_min`] or more raw, in manifest order of first use; the
/// others in packs, by group.
///
/// Groups are taken in manifest order of first appearance, each with its
/// distinct contents in manifest order. A group of [`Scale::group_own`] or
/// more gets packs of its own, cut before an object that would take a pack
/// past [`Scale::pack_max`]. Smaller groups are appended, whole, to the
/// current shared pack (skipping contents it already holds), which closes
/// before a group that would take it past [`Scale::pack_max`], and after a
/// group that [`is_boundary`] once it holds [`Scale::shared_min`]. Packs
/// are listed in the order they close; the last shared pack closes last.
pub fn layout(manifest: &Manifest) -> Layout {
    let scale = Scale::of(manifest);
    let mut raw_seen = BTreeSet::new();
    let mut raw = Vec::new();
    let mut groups: Vec<(&str, Vec<PackObject>)> = Vec::new();
    let mut group_index: BTreeMap<&str, (usize, BTreeSet<ObjectId>)> = BTreeMap::new();
    for e in manifest.entries.iter().filter(|e| e.size > 0) {
        if e.size >= scale.raw_min {
            if raw_seen.insert(e.sha256) {
                raw.push(RawObject {
                    key: e.key(),
                    size: e.size,
                    path: e.path.clone(),
                });
            }
            continue;
        }
        let g = group_of(&e.path);
        let (i, seen) = group_index.entry(g).or_insert_with(|| {
            groups.push((g, Vec::new()));
            (groups.len() - 1, BTreeSet::new())
        });
        if seen.insert(e.sha256) {
            groups[*i].1.push(PackObject {
                key: e.key(),
                size: e.size,
                path: e.path.clone(),
            });
        }
    }
    let mut packs = Vec::new();
    let mut shared: Vec<PackObject> = Vec::new();
    let mut shared_ids = BTreeSet::new();
    let mut shared_bytes = 0u64;
    for (name, objects) in groups {
        let bytes: u64 = objects.iter().map(|o| entry_bytes(o.size)).sum();
        if bytes >= scale.group_own {
            let mut current = Vec::new();
            let mut current_bytes = 0;
            for o in objects {
                let b = entry_bytes(o.size);
                if !current.is_empty() && current_bytes + b > scale.pack_max {
                    packs.push(std::mem::take(&mut current));
                    current_bytes = 0;
                }
                current_bytes += b;
                current.push(o);
            }
            packs.push(current);
            continue;
        }
        if !shared.is_empty() && shared_bytes + bytes > scale.pack_max {
            packs.push(std::mem::take(&mut shared));
            shared_ids.clear();
            shared_bytes = 0;
        }
        for o in objects {
            if shared_ids.insert(o.key.id) {
                shared_bytes += entry_bytes(o.size);
                shared.push(o);
            }
        }
        if shared_bytes >= scale.shared_min && is_boundary(name) {
            packs.push(std::mem::take(&mut shared));
            shared_ids.clear();
            shared_bytes = 0;
        }
    }
    if !shared.is_empty() {
        packs.push(shared);
    }
    Layout { packs, raw }
}

/// Where an object lies in a pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Its SHA-256.
    pub id: ObjectId,
    /// The offset of its first data byte in the pack (after its header).
    pub offset: u64,
    /// Its size.
    pub size: u64,
}

/// The slots of objects of these sizes, in order, and the pack's size.
pub fn slots(objects: impl IntoIterator<Item = (ObjectId, u64)>) -> (Vec<Slot>, u64) {
    let mut out = Vec::new();
    let mut at = 0u64;
    for (id, size) in objects {
        out.push(Slot {
            id,
            offset: at + BLOCK,
            size,
        });
        at += entry_bytes(size);
    }
    (out, at + 2 * BLOCK)
}

/// The header a pack carries before an object: a ustar header named by the
/// object's SHA-256 in hex, mode 0444, uid, gid and mtime 0, no owner names.
pub fn header(id: &ObjectId, size: u64) -> [u8; 512] {
    let mut h = tar::Header::new_ustar();
    // A 64-character name and these fields always fit a ustar header.
    let _ = h.set_path(id.to_hex());
    h.set_size(size);
    h.set_mode(0o444);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_entry_type(tar::EntryType::Regular);
    let _ = h.set_username("");
    let _ = h.set_groupname("");
    let _ = h.set_device_major(0);
    let _ = h.set_device_minor(0);
    h.set_cksum();
    let mut out = [0u8; 512];
    out.copy_from_slice(h.as_bytes());
    out
}

/// Writes a pack into memory, one object at a time.
#[derive(Default)]
pub struct PackWriter {
    bytes: Vec<u8>,
}

impl PackWriter {
    /// A writer that writes into `buffer`, emptied first.
    pub fn with_buffer(mut buffer: Vec<u8>) -> PackWriter {
        buffer.clear();
        PackWriter { bytes: buffer }
    }

    /// Appends one object of `size` bytes that `fill` appends to the pack's
    /// bytes (read in place, never held twice): its header, its data, zero
    /// padding. What `fill` fails with is returned.
    pub fn add_with<E>(
        &mut self,
        id: &ObjectId,
        size: u64,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.bytes.extend_from_slice(&header(id, size));
        let start = self.bytes.len();
        fill(&mut self.bytes)?;
        // Padded after what was appended, whatever `fill` did.
        let appended = (self.bytes.len() - start) as u64;
        let padded = appended.div_ceil(BLOCK) * BLOCK;
        self.bytes
            .resize(self.bytes.len() + (padded - appended) as usize, 0);
        Ok(())
    }

    /// Appends one object: its header, its data, zero padding.
    #[cfg(test)]
    pub fn add(&mut self, id: &ObjectId, data: &[u8]) {
        let added: Result<(), std::convert::Infallible> =
            self.add_with(id, data.len() as u64, |bytes| {
                bytes.extend_from_slice(data);
                Ok(())
            });
        let Ok(()) = added;
    }

    /// The pack: the objects and two zero blocks.
    pub fn finish(mut self) -> Vec<u8> {
        self.bytes.resize(self.bytes.len() + 2 * BLOCK as usize, 0);
        self.bytes
    }
}

/// Formats a pack's slots as its `dev.cestore.pack` annotation:
/// `<hex>:<offset>:<size>`, comma-separated, in pack order.
pub fn format_slots(slots: &[Slot]) -> String {
    let mut out = String::with_capacity(slots.len() * 90);
    for (i, s) in slots.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&s.id.to_hex());
        out.push(':');
        out.push_str(&s.offset.to_string());
        out.push(':');
        out.push_str(&s.size.to_string());
    }
    out
}

/// Parses a `dev.cestore.pack` annotation, reading at most `max` slots.
pub fn parse_slots(text: &str, max: usize) -> Result<Vec<Slot>, SlotsError> {
    let mut out = Vec::new();
    for item in text.split(',') {
        if out.len() >= max {
            return Err(SlotsError::TooMany { max });
        }
        let mut parts = item.split(':');
        let (Some(hex), Some(offset), Some(size), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(SlotsError::NotSlot { item: clip(item) });
        };
        let number = |s: &str| {
            if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse::<u64>().ok()
        };
        let (Ok(id), Some(offset), Some(size)) =
            (hex.parse::<ObjectId>(), number(offset), number(size))
        else {
            return Err(SlotsError::NotSlot { item: clip(item) });
        };
        if hex.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(SlotsError::NotLowercase { item: clip(item) });
        }
        out.push(Slot { id, offset, size });
    }
    Ok(out)
}

fn clip(s: &str) -> String {
    s.chars().take(100).collect()
}

/// A pack as a remote lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackRef {
    /// The pack blob's SHA-256.
    pub digest: ObjectId,
    /// Its size, as listed.
    pub size: u64,
    /// Its objects, in pack order.
    pub slots: Vec<Slot>,
}

/// What a snapshot's record lists: raw blobs and packs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Carriers {
    /// The raw blobs (one object each), by SHA-256.
    pub raw: BTreeSet<ObjectId>,
    /// The packs, in the order listed (the first distinct listing of a digest).
    pub packs: Vec<PackRef>,
}

/// Checks what a record lists against the snapshot's canonical manifest,
/// before anything is fetched: every pack's slots are exactly the layout a
/// cestore pack has (the first data at 512, each next one after the
/// previous padded data and a header, the size the slots imply), name
/// distinct contents of the snapshot with their manifest sizes; every raw
/// blob is a content of the snapshot; and every non-empty content is
/// carried by a raw blob or a pack.
pub fn check(manifest: &Manifest, carriers: &Carriers) -> Result<(), PackError> {
    let sizes: BTreeMap<ObjectId, u64> = manifest
        .entries
        .iter()
        .map(|e| (e.sha256, e.size))
        .collect();
    let path_of = |id: &ObjectId| {
        manifest
            .entries
            .iter()
            .find(|e| e.sha256 == *id)
            .map_or_else(String::new, |e| e.path.clone())
    };
    let mut carried = BTreeSet::new();
    for id in &carriers.raw {
        if !sizes.contains_key(id) {
            return Err(PackError::ForeignLayer { layer: *id });
        }
        carried.insert(*id);
    }
    for p in &carriers.packs {
        carried.extend(check_pack(p, &sizes, &path_of)?);
    }
    if let Some(e) = manifest
        .entries
        .iter()
        .find(|e| e.size > 0 && !carried.contains(&e.sha256))
    {
        return Err(PackError::NotCarried {
            path: e.path.clone(),
            content: e.sha256,
        });
    }
    Ok(())
}

/// Checks one pack's slots against the snapshot's contents (`sizes`, by
/// content; `path_of` names a content's file) and the layout a cestore pack
/// has; returns the contents it carries.
fn check_pack(
    p: &PackRef,
    sizes: &BTreeMap<ObjectId, u64>,
    path_of: &dyn Fn(&ObjectId) -> String,
) -> Result<BTreeSet<ObjectId>, PackError> {
    let pack = p.digest;
    if p.slots.is_empty() {
        return Err(PackError::Empty { pack });
    }
    let mut in_pack = BTreeSet::new();
    for s in &p.slots {
        match sizes.get(&s.id) {
            None => return Err(PackError::ForeignObject { pack, object: s.id }),
            Some(&size) if size != s.size || size == 0 => {
                return Err(PackError::ObjectSize {
                    pack,
                    object: s.id,
                    listed: s.size,
                    path: path_of(&s.id),
                    size,
                })
            }
            Some(_) => {}
        }
        if !in_pack.insert(s.id) {
            return Err(PackError::ObjectTwice { pack, object: s.id });
        }
    }
    if let Some(s) = p
        .slots
        .iter()
        .find(|s| s.offset.checked_add(s.size).is_none_or(|end| end > p.size))
    {
        return Err(PackError::Outside {
            pack,
            pack_size: p.size,
            object: s.id,
            offset: s.offset,
            size: s.size,
        });
    }
    let (expected, size) = slots(p.slots.iter().map(|s| (s.id, s.size)));
    if let Some((s, _)) = p.slots.iter().zip(&expected).find(|(s, e)| s != e) {
        return Err(PackError::Misplaced {
            pack,
            object: s.id,
            offset: s.offset,
        });
    }
    if size != p.size {
        return Err(PackError::Size {
            pack,
            listed: p.size,
            size,
        });
    }
    Ok(in_pack)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ce::fixtures::{MANIFEST_DIR, MANIFEST_FILE};
    use crate::profile::ce::manifest::Entry;
    use crate::profile::ce::rules::{MAX_FILES, MAX_FILE_BYTES, MAX_TOTAL_BYTES};

    fn id(i: u64) -> ObjectId {
        ObjectId::of(&i.to_le_bytes())
    }

    fn manifest(files: &[(String, u64)]) -> Manifest {
        let mut entries: Vec<Entry> = files
            .iter()
            .enumerate()
            .map(|(i, (path, size))| Entry {
                executable: false,
                path: path.clone(),
                sha256: if *size == 0 {
                    ObjectId::of(b"")
                } else {
                    id(i as u64)
                },
                size: *size,
            })
            .collect();
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Manifest::new(entries)
    }

    fn layers(m: &Manifest) -> usize {
        let l = layout(m);
        l.packs.len() + l.raw.len()
    }

    /// A snapshot of more than 64 MiB is laid out at the large scale, and
    /// one of 64 MiB or less, as every release is, at the small one.
    #[test]
    fn a_tree_over_64_mib_is_laid_out_in_larger_blobs() {
        const MIB: u64 = 1024 * 1024;
        let files = |mid: u64| -> Vec<(String, u64)> {
            let mut f: Vec<(String, u64)> = (0..mid)
                .map(|i| (format!("nm/mid/m{i:03}.bin"), 3 * MIB))
                .collect();
            f.push(("nm/big/a.wasm".into(), 4 * MIB));
            f.push(("nm/big/b.wasm".into(), 4 * MIB - 1));
            f.extend((0..400).map(|i| (format!("nm/p{:02}/f{i:03}.js", i % 40), 900)));
            f
        };
        // 20 × 3 MiB + 8 MiB + 0.4 MB: over 64 MiB.
        let large = manifest(&files(20));
        assert_eq!(Scale::of(&large), Scale::LARGE);
        let l = layout(&large);
        assert_eq!(l.raw.len(), 1);
        assert_eq!(l.raw[0].size, 4 * MIB);
        for p in &l.packs {
            let bytes: u64 = p.iter().map(|o| entry_bytes(o.size)).sum();
            assert!(bytes <= Scale::LARGE.pack_max, "{bytes}");
            assert!(p.iter().all(|o| o.size < Scale::LARGE.raw_min));
        }
        // The 20 of 3 MiB in packs of their own group, five to a pack; the
        // rest shared.
        assert_eq!(
            l.packs.len(),
            6,
            "{:?}",
            l.packs.iter().map(Vec::len).collect::<Vec<_>>()
        );
        // A small edit keeps the scale and the cuts.
        let mut edited = files(20);
        edited[3].1 += 100;
        let edited = layout(&manifest(&edited));
        assert_eq!(edited.packs.len(), l.packs.len());
        assert_eq!(edited.raw, l.raw);

        // 18 × 3 MiB + 8 MiB + 0.4 MB: 62.4 MiB, the small scale.
        let small = manifest(&files(18));
        assert_eq!(Scale::of(&small), Scale::SMALL);
        assert_eq!(layout(&small).raw.len(), 20);
    }

    #[test]
    fn groups_are_the_first_two_directories() {
        assert_eq!(group_of("skills/ce-plan/SKILL.md"), "skills/ce-plan/");
        assert_eq!(group_of("skills/ce-plan/refs/a.md"), "skills/ce-plan/");
        assert_eq!(group_of("scripts/x.sh"), "scripts/");
        assert_eq!(group_of(MANIFEST_FILE), format!("{MANIFEST_DIR}/"));
        assert_eq!(group_of("README.md"), "");
    }

    #[test]
    fn headers_and_slots_agree_with_the_written_pack() {
        let data: Vec<Vec<u8>> = vec![b"a".to_vec(), vec![7u8; 512], vec![9u8; 1000], Vec::new()];
        let ids: Vec<ObjectId> = data.iter().map(|d| ObjectId::of(d)).collect();
        let mut w = PackWriter::default();
        for (i, d) in ids.iter().zip(&data) {
            w.add(i, d);
        }
        let bytes = w.finish();
        let (s, size) = slots(ids.iter().copied().zip(data.iter().map(|d| d.len() as u64)));
        assert_eq!(size, bytes.len() as u64);
        for (slot, d) in s.iter().zip(&data) {
            let at = slot.offset as usize;
            assert_eq!(&bytes[at..at + d.len()], &d[..]);
            assert_eq!(&bytes[at - 512..at], &header(&slot.id, slot.size)[..]);
        }
        // Any tar reads it back: one entry per object, named by its hash.
        let mut archive = tar::Archive::new(&bytes[..]);
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ids.iter().map(ObjectId::to_hex).collect::<Vec<_>>());
        let text = format_slots(&s);
        assert_eq!(parse_slots(&text, 10).unwrap(), s);
        assert!(parse_slots(&text, 3).is_err());
        for bad in [
            "",
            "abc:1:2",
            &format!("{}:1", ids[0]),
            &format!("{}:1:2:3", ids[0]),
            &format!("{}:-1:2", ids[0]),
            &format!("{}:+1:2", ids[0]),
        ] {
            assert!(parse_slots(bad, 10).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_layout_is_stable_and_an_edit_changes_one_pack() {
        let mut files: Vec<(String, u64)> = Vec::new();
        files.push((MANIFEST_FILE.into(), 200));
        for s in 0..60 {
            for f in 0..7 {
                files.push((format!("skills/s{s:02}/f{f}.md"), 3000 + (s * 7 + f) * 37));
            }
        }
        files.push(("skills/big/huge.bin".into(), 300 * 1024));
        for f in 0..12 {
            files.push((format!("skills/large/f{f:02}.md"), 200 * 1024));
        }
        let m = manifest(&files);
        let a = layout(&m);
        assert_eq!(a, layout(&m));
        assert_eq!(a.raw.len(), 1);
        assert!(a.packs.len() >= 3, "{}", a.packs.len());
        for p in &a.packs {
            let bytes: u64 = p.iter().map(|o| entry_bytes(o.size)).sum();
            assert!(bytes <= PACK_MAX_BYTES);
        }
        // Grow one file of one small group: only the pack holding it changes.
        let mut edited = files.clone();
        edited[100].1 += 5000;
        let mut entries = m.entries.clone();
        let changed = entries
            .iter_mut()
            .find(|e| e.path == edited[100].0)
            .unwrap();
        changed.size += 5000;
        changed.sha256 = id(99_999);
        let b = layout(&Manifest::new(entries));
        assert_eq!(a.packs.len(), b.packs.len());
        let differ = a.packs.iter().zip(&b.packs).filter(|(x, y)| x != y).count();
        assert_eq!(differ, 1);
    }

    #[test]
    fn adversarial_trees_within_the_bounds_need_fewer_than_100_layers() {
        for (name, files) in adversarial_shapes() {
            let total: u64 = files.iter().map(|f| f.1).sum();
            assert!(
                files.len() <= MAX_FILES && total <= MAX_TOTAL_BYTES,
                "{name}"
            );
            let count = layers(&manifest(&files));
            eprintln!("{name}: {count} layers");
            assert!(count < 100, "{name}: {count} layers");
        }
    }

    /// Trees within the bounds shaped to need many layers.
    fn adversarial_shapes() -> Vec<(&'static str, Vec<(String, u64)>)> {
        let n = MAX_FILES as u64;
        let mut shapes: Vec<(&str, Vec<(String, u64)>)> = Vec::new();
        // Every file its own group, the bytes spread evenly.
        shapes.push((
            "own groups",
            (0..n)
                .map(|i| (format!("d{i:04}/f"), MAX_TOTAL_BYTES / n))
                .collect(),
        ));
        // Every file its own group in a two-level tree.
        shapes.push((
            "own subgroups",
            (0..n)
                .map(|i| (format!("skills/s{i:04}/f"), MAX_TOTAL_BYTES / n))
                .collect(),
        ));
        // As many raw files as fit, the rest tiny files in their own groups.
        let raw = MAX_TOTAL_BYTES / RAW_MIN_BYTES - 1;
        shapes.push((
            "raw and tiny",
            (0..n)
                .map(|i| {
                    if i < raw {
                        (format!("raw/r{i:04}"), RAW_MIN_BYTES)
                    } else {
                        (format!("t{i:04}/f"), (RAW_MIN_BYTES - 1) / n)
                    }
                })
                .collect(),
        ));
        // Groups just big enough to have their own packs.
        let per = GROUP_OWN_BYTES / (RAW_MIN_BYTES - BLOCK) + 1;
        shapes.push((
            "own-pack groups",
            (0..n)
                .map(|i| (format!("g/{:04}/f{i:04}", i / per), RAW_MIN_BYTES - BLOCK))
                .take((MAX_TOTAL_BYTES / (RAW_MIN_BYTES - BLOCK)) as usize)
                .collect(),
        ));
        // Groups just under the own-pack size, and objects that just miss a pack.
        shapes.push((
            "shared misfits",
            (0..n)
                .map(|i| (format!("h{:04}/f{i:04}", i / 4), MAX_TOTAL_BYTES / n))
                .collect(),
        ));
        shapes.push((
            "max files",
            (0..8)
                .map(|i| (format!("m/f{i}"), MAX_FILE_BYTES))
                .collect(),
        ));
        shapes
    }

    #[test]
    fn uniform_trees_within_the_bounds_need_fewer_than_100_layers() {
        let n = MAX_FILES as u64;
        let mut most = 0;
        for size in [
            1,
            511,
            4096,
            8191,
            60_000,
            200_000,
            RAW_MIN_BYTES - 1,
            RAW_MIN_BYTES,
        ] {
            for width in [1u64, 2, 3, 5, 17, 64, 2048] {
                let count = n.min(MAX_TOTAL_BYTES / size);
                let files: Vec<(String, u64)> = (0..count)
                    .map(|i| (format!("a/{:04}/f{i:04}", i / width), size))
                    .collect();
                let layers = layers(&manifest(&files));
                most = most.max(layers);
                assert!(layers < 100, "size {size}, width {width}: {layers} layers");
            }
        }
        eprintln!("uniform sweep: at most {most} layers");
    }

    #[test]
    fn check_refuses_indexes_that_do_not_describe_their_pack() {
        let files: Vec<(String, u64)> =
            (0..5).map(|i| (format!("s/f{i}"), 100 * (i + 1))).collect();
        let m = manifest(&files);
        let l = layout(&m);
        assert_eq!(l.packs.len(), 1);
        let (s, size) = slots(l.packs[0].iter().map(|o| (o.key.id, o.size)));
        let good = Carriers {
            raw: BTreeSet::new(),
            packs: vec![PackRef {
                digest: id(1),
                size,
                slots: s.clone(),
            }],
        };
        check(&m, &good).unwrap();
        let mut cases: Vec<(&str, Carriers)> = Vec::new();
        let mut c = good.clone();
        c.packs[0].size += 512;
        cases.push(("listed with", c));
        let mut c = good.clone();
        c.packs[0].slots[4].offset = size;
        cases.push(("points outside", c));
        let mut c = good.clone();
        c.packs[0].slots[4].offset = u64::MAX;
        cases.push(("points outside", c));
        let mut c = good.clone();
        c.packs[0].slots[2].offset += 512;
        cases.push(("places object", c));
        let mut c = good.clone();
        c.packs[0].slots[4].size = 10_000;
        cases.push(("with 10000 bytes", c));
        let mut c = good.clone();
        c.packs[0].slots[1].id = id(77);
        cases.push(("no content", c));
        let mut c = good.clone();
        c.packs[0].slots.pop();
        c.packs[0].size = slots(c.packs[0].slots.iter().map(|s| (s.id, s.size))).1;
        cases.push(("carries", c));
        let mut c = good.clone();
        let first = c.packs[0].slots[0];
        c.packs[0].slots.push(first);
        cases.push(("twice", c));
        let mut c = good.clone();
        c.raw.insert(id(55));
        cases.push(("no content", c));
        for (why, c) in cases {
            let err = check(&m, &c).unwrap_err().to_string();
            assert!(err.contains(why), "{why}: {err}");
        }
    }
}
