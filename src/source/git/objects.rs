//! Objects read from a repository, each checked against its id before it
//! is used, and within a bound read from its header before it is inflated.
//!
//! Git names an object by the SHA-1 of `"<type> <size>\0<data>"`; nothing in
//! the object database stops a loose object file, or a pack entry, from
//! holding other bytes than its name says (`git fsck`: "hash-path
//! mismatch"), and git's own checkout writes such bytes without a word. Every
//! object cestore reads goes through [`read`], which recomputes the id and
//! refuses a mismatch ([`Bad::Mismatch`]).

use std::cell::RefCell;
use std::collections::HashMap;

use gix::objs::Kind;
use gix::ObjectId;

/// The most bytes a tree, commit or tag object may hold: far above any
/// real one (a tree of about a million entries), and a bound on what one
/// object can make cestore hold in memory.
pub(super) const MAX_META_BYTES: u64 = 64 << 20;

/// Git ignores an attributes file of this many bytes or more
/// (`ATTR_MAX_FILE_SIZE` in git's `attr.c`).
pub(super) const ATTR_MAX_FILE_SIZE: u64 = 100 << 20;

/// Git ignores an attributes line of this many bytes or more
/// (`ATTR_MAX_LINE_LENGTH` in git's `attr.c`).
const ATTR_MAX_LINE_LENGTH: usize = 2048;

/// Attribute files up to this size are kept once read and checked.
const ATTR_KEPT_BYTES: usize = 64 << 10;

/// Why an object could not be read as what its id names.
#[derive(Debug)]
pub(super) enum Bad {
    /// The repository does not hold it.
    Missing,
    /// It is of another type than the one that names it says.
    Kind {
        /// The type expected.
        want: Kind,
        /// The type found.
        found: Kind,
    },
    /// Its header gives more bytes than the bound.
    TooLarge {
        /// The size its header gives.
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// Its bytes hash to another id.
    Mismatch(ObjectId),
    /// Its bytes are not an object of its type, or its file is damaged.
    Corrupt(String),
    /// It could not be read (an I/O error, not damage).
    Unreadable(String),
}

impl Bad {
    /// A failure of gix to read an object: damage, or a failed read.
    fn of(e: &gix::Error) -> Bad {
        let reason = super::reason(e);
        match e.dominant_class() {
            Some(gix::error::Class::Corruption | gix::error::Class::Validation) => {
                Bad::Corrupt(reason)
            }
            _ => Bad::Unreadable(reason),
        }
    }
}

/// The type and size the header of object `id` gives, read without
/// inflating the object.
pub(super) fn header(repo: &gix::Repository, id: ObjectId) -> Result<(Kind, u64), Bad> {
    match repo.try_find_header(id) {
        Ok(Some(h)) => Ok((h.kind(), h.size())),
        Ok(None) => Err(Bad::Missing),
        Err(e) => Err(Bad::of(&e)),
    }
}

/// The type and bytes of object `id`, of at most `limit` bytes (checked
/// from its header before it is inflated, and again once read), which must
/// hash to `id`.
pub(super) fn read_any(
    repo: &gix::Repository,
    id: ObjectId,
    limit: u64,
) -> Result<(Kind, Vec<u8>), Bad> {
    let (_, size) = header(repo, id)?;
    if size > limit {
        return Err(Bad::TooLarge { size, limit });
    }
    let object = match repo.try_find_object(id) {
        Ok(Some(object)) => object,
        Ok(None) => return Err(Bad::Missing),
        Err(e) => return Err(Bad::of(&e)),
    };
    let kind = object.kind;
    let data = object.detach().data;
    if data.len() as u64 > limit {
        return Err(Bad::TooLarge {
            size: data.len() as u64,
            limit,
        });
    }
    match gix::objs::compute_hash(repo.object_hash(), kind, &data) {
        Ok(actual) if actual == id => Ok((kind, data)),
        Ok(actual) => Err(Bad::Mismatch(actual)),
        Err(e) => Err(Bad::Corrupt(super::reason(&e))),
    }
}

/// Why object `id`, whose header gives the type `found`, is no `want`: the
/// object is read (within [`MAX_META_BYTES`]) and, when its bytes do not
/// hash to `id`, it is a mismatch, not the tree's mistake.
pub(super) fn wrong_kind(repo: &gix::Repository, id: ObjectId, want: Kind, found: Kind) -> Bad {
    match read_any(repo, id, MAX_META_BYTES) {
        Err(bad @ (Bad::Mismatch(_) | Bad::Corrupt(_))) => bad,
        _ => Bad::Kind { want, found },
    }
}

/// The bytes of object `id`, which must be a `want`, read with
/// [`read_any`]: an object of another type is refused once it is known to
/// be what its id names, and one that hashes to another id as such.
pub(super) fn read(
    repo: &gix::Repository,
    id: ObjectId,
    want: Kind,
    limit: u64,
) -> Result<Vec<u8>, Bad> {
    let (found, data) = read_any(repo, id, limit)?;
    if found != want {
        return Err(Bad::Kind { want, found });
    }
    Ok(data)
}

/// How many annotated tags a revision may pass through to its commit.
const MAX_TAG_HOPS: usize = 32;

/// The commit object `id` names, through annotated tags, and its root tree:
/// every object on the way read with [`read`]. On failure, the object that
/// failed and why.
pub(super) fn peel_to_commit(
    repo: &gix::Repository,
    id: ObjectId,
) -> Result<(ObjectId, ObjectId), (ObjectId, Bad)> {
    let hash = repo.object_hash();
    let mut at = id;
    for _ in 0..=MAX_TAG_HOPS {
        let (kind, data) = read_any(repo, at, MAX_META_BYTES).map_err(|bad| (at, bad))?;
        if !matches!(kind, Kind::Tag | Kind::Commit) {
            let bad = Bad::Kind {
                want: Kind::Commit,
                found: kind,
            };
            return Err((at, bad));
        }
        let corrupt = |e: gix::Error| (at, Bad::Corrupt(super::reason(&e)));
        if kind == Kind::Commit {
            let tree = gix::objs::CommitRefIter::from_bytes(&data, hash)
                .tree_id()
                .map_err(corrupt)?;
            return Ok((at, tree));
        }
        at = gix::objs::TagRefIter::from_bytes(&data, hash)
            .target_id()
            .map_err(corrupt)?;
    }
    Err((
        at,
        Bad::Corrupt(format!(
            "more than {MAX_TAG_HOPS} annotated tags lead to no commit"
        )),
    ))
}

/// The attribute files of a revision, as the attribute lookups read them:
/// each checked with [`read`]; one of [`ATTR_MAX_FILE_SIZE`] bytes or more
/// read as empty, unread, as git ignores it; and each as git's `attr.c`
/// parses it (see [`as_git_reads_attributes`]).
pub(super) struct AttributeFiles<'a> {
    pub(super) repo: &'a gix::Repository,
    /// Files already read and checked, by id.
    pub(super) kept: &'a RefCell<HashMap<ObjectId, Vec<u8>>>,
    /// The first file that could not be read, and why.
    pub(super) fault: &'a RefCell<Option<(ObjectId, Bad)>>,
}

impl gix::objs::Find for AttributeFiles<'_> {
    fn try_find<'b>(
        &self,
        id: &gix::oid,
        buffer: &'b mut Vec<u8>,
    ) -> gix::Result<Option<gix::objs::Data<'b>>> {
        let id = id.to_owned();
        buffer.clear();
        let kept = self.kept.borrow().get(&id).cloned();
        if let Some(kept) = kept {
            *buffer = kept;
        } else {
            match read(self.repo, id, Kind::Blob, ATTR_MAX_FILE_SIZE - 1) {
                Ok(bytes) => {
                    let parsed = as_git_reads_attributes(&bytes);
                    if parsed.len() <= ATTR_KEPT_BYTES {
                        self.kept.borrow_mut().insert(id, parsed.clone());
                    }
                    *buffer = parsed;
                }
                Err(Bad::TooLarge { .. }) => {}
                Err(bad) => {
                    let message = format!("the attributes file {id} cannot be read: {bad:?}");
                    self.fault.borrow_mut().get_or_insert((id, bad));
                    return Err(gix::error::corruption(message).corrupted_error());
                }
            }
        }
        Ok(Some(gix::objs::Data::new(
            buffer,
            Kind::Blob,
            self.repo.object_hash(),
        )))
    }
}

/// The UTF-8 byte-order mark.
const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";

/// An attributes file as the attribute lookups must parse it to read what
/// git's `attr.c` reads of it: the bytes before the first NUL, with every
/// line of [`ATTR_MAX_LINE_LENGTH`] bytes or more (not counting its `\n`)
/// left empty, as git ignores it. Git reads a byte-order mark from a blob
/// as part of the first line, and the lookups drop one from the start: so
/// one is put before the text, for them to drop.
pub(super) fn as_git_reads_attributes(bytes: &[u8]) -> Vec<u8> {
    let text = match bytes.iter().position(|b| *b == 0) {
        Some(nul) => &bytes[..nul],
        None => bytes,
    };
    let mut out = Vec::with_capacity(UTF8_BOM.len() + text.len());
    out.extend_from_slice(UTF8_BOM);
    for (i, line) in text.split(|b| *b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        if line.len() < ATTR_MAX_LINE_LENGTH {
            out.extend_from_slice(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(text: &[u8]) -> Vec<u8> {
        [UTF8_BOM, text].concat()
    }

    #[test]
    fn attribute_files_are_cut_at_nul_and_long_lines_dropped() {
        assert_eq!(
            as_git_reads_attributes(b"*.md text\n"),
            marked(b"*.md text\n")
        );
        assert_eq!(
            as_git_reads_attributes(b"#\0\n*.md eol=crlf\n"),
            marked(b"#")
        );
        let mut long = b"*.md eol=crlf".to_vec();
        long.resize(2047, b' ');
        let mut text = long.clone();
        text.extend_from_slice(b"\r\n*.sh text\n");
        // 2047 bytes and a `\r`: 2048, ignored.
        assert_eq!(as_git_reads_attributes(&text), marked(b"\n*.sh text\n"));
        let mut kept = long.clone();
        kept.push(b'\n');
        assert_eq!(as_git_reads_attributes(&kept), marked(&kept));
        // A byte-order mark stays part of the first line.
        let bom = marked(b"*.md eol=crlf\n");
        assert_eq!(as_git_reads_attributes(&bom), marked(&bom));
    }
}
