//! How a manifest is kept, in the catalogue and on disk: whole, packed, or
//! as a zstd delta against another stored manifest.
//!
//! ```text
//! whole:  the canonical manifest bytes, as ever (`{"files":…`, `[…`, `{…`)
//! packed: "cestore-zstd 1\n" <one zstd frame of the canonical bytes>
//! delta:  "cestore-delta 1 " <base digest, 64 hex> "\n" <one zstd frame>
//!                              │                          │
//!                              └ a stored manifest        └ compressed with the
//!                                kept any of these ways     base's canonical bytes
//!                                                           as its prefix
//! ```
//!
//! Both frames carry zstd's content checksum. A snapshot that differs from
//! the one before it in a few files is kept in a few kilobytes (`zstd
//! --patch-from`'s encoding), where its canonical bytes take megabytes for a
//! runtime tree. A chain of deltas is at most [`MAX_DEPTH`] long: the next
//! is kept packed, so that reading a manifest unfolds a bounded number of
//! frames. What a delta unfolds to is hashed against the digest it is read
//! for, every time, by the reader ([`unfold`]'s callers).
//!
//! The bytes are the same in both places: the catalogue's `manifests` row
//! and the file `manifests/ab/<digest>` of one snapshot hold one kept form
//! (each place may keep it whole after a base is forgotten: [`keep_whole`]).
//! Manifests under [`MIN_KEPT_BYTES`], and every task's and environment's
//! (whose kind `recover` reads from their first bytes), are kept whole.

use std::io::Read;

use crate::digest::ManifestDigest;

/// The first bytes of every kept form but the whole one; no canonical
/// manifest starts so.
pub const KEPT_PREFIX: &[u8] = b"cestore-";

/// The first bytes of a delta.
pub const DELTA_MAGIC: &[u8] = b"cestore-delta 1 ";

/// The first bytes of a packed manifest.
pub const PACK_MAGIC: &[u8] = b"cestore-zstd 1\n";

/// The longest chain of deltas: a manifest whose base is this deep is kept
/// packed.
pub const MAX_DEPTH: i64 = 16;

/// The shortest manifest kept packed or as a delta: below it, the bytes
/// saved are not worth the unfolding.
pub const MIN_KEPT_BYTES: usize = 16 * 1024;

/// The longest chain a reader follows before calling the bytes damaged:
/// twice [`MAX_DEPTH`], for a chain on disk whose catalogue rows were kept
/// whole meanwhile (`recover`), never more, so that crafted bytes cost at
/// most this many unfoldings.
pub const MAX_UNFOLD: usize = 2 * MAX_DEPTH as usize;

/// The zstd level of a delta: what `zstd --patch-from` uses by default.
const LEVEL: i32 = 3;

/// What kept bytes hold.
#[derive(Debug, PartialEq, Eq)]
pub enum Form<'a> {
    /// The canonical bytes themselves.
    Whole(&'a [u8]),
    /// A zstd frame of the canonical bytes.
    Packed(&'a [u8]),
    /// A zstd frame to unfold against `base`'s canonical bytes.
    Delta {
        /// The manifest whose canonical bytes are the frame's prefix.
        base: ManifestDigest,
        /// The frame.
        frame: &'a [u8],
    },
}

/// Why kept bytes cannot be unfolded.
#[derive(Debug, thiserror::Error)]
pub enum KeptError {
    /// The header of a delta does not name a digest.
    #[error("its delta header does not name a base manifest")]
    Header,
    /// A packed manifest's frame does not decompress within its bound.
    #[error("its packed frame does not decompress: {0}")]
    Packed(String),
    /// The frame does not decompress against its base.
    #[error("its delta against {base} does not decompress: {why}")]
    Frame {
        /// The base.
        base: ManifestDigest,
        /// zstd's words.
        why: String,
    },
    /// The frame unfolds to more than `bound` bytes.
    #[error("its delta against {base} unfolds to more than {bound} bytes")]
    TooLong {
        /// The base.
        base: ManifestDigest,
        /// The bound.
        bound: u64,
    },
    /// The chain of bases is longer than any cestore writes, or circles.
    #[error("its chain of deltas is longer than {MAX_UNFOLD} or comes back to {0}")]
    Chain(ManifestDigest),
}

/// Reads what kept bytes hold.
pub fn form(kept: &[u8]) -> Result<Form<'_>, KeptError> {
    if let Some(frame) = kept.strip_prefix(PACK_MAGIC) {
        return Ok(Form::Packed(frame));
    }
    let Some(rest) = kept.strip_prefix(DELTA_MAGIC) else {
        return Ok(Form::Whole(kept));
    };
    let (hex, frame) = (rest.get(..64), rest.get(65..));
    let base = hex
        .filter(|_| rest.get(64) == Some(&b'\n'))
        .and_then(|h| std::str::from_utf8(h).ok())
        .and_then(|h| h.parse::<ManifestDigest>().ok())
        .ok_or(KeptError::Header)?;
    Ok(Form::Delta {
        base,
        frame: frame.unwrap_or_default(),
    })
}

/// The delta of `bytes` against `base` (whose digest is `base_digest`).
pub fn delta(base_digest: &ManifestDigest, base: &[u8], bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(DELTA_MAGIC.len() + 65 + bytes.len() / 64);
    out.extend_from_slice(DELTA_MAGIC);
    out.extend_from_slice(base_digest.to_hex().as_bytes());
    out.push(b'\n');
    match compress(base, bytes, &mut out) {
        Ok(()) => out,
        // zstd refuses only what it cannot hold in memory: keep it whole.
        Err(_) => bytes.to_vec(),
    }
}

/// How a manifest with no base is kept: packed when it is
/// [`MIN_KEPT_BYTES`] or longer and neither a task's nor an environment's,
/// else its canonical bytes.
pub fn keep_whole(bytes: &[u8]) -> Vec<u8> {
    use crate::profile::tree::stored::Kind;
    if bytes.len() < MIN_KEPT_BYTES || matches!(Kind::of(bytes), Kind::Task | Kind::Environment) {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(PACK_MAGIC.len() + bytes.len() / 4);
    out.extend_from_slice(PACK_MAGIC);
    match compress(&[], bytes, &mut out) {
        Ok(()) => out,
        Err(_) => bytes.to_vec(),
    }
}

/// A window that reaches from the end of `bytes` back over all of `base`.
fn window_log(base: &[u8], bytes: &[u8]) -> u32 {
    let span = (base.len() + bytes.len()).max(1 << 10) as u64;
    (64 - (span - 1).leading_zeros()).clamp(10, 30)
}

fn compress(base: &[u8], bytes: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
    use zstd::stream::raw::CParameter;
    let mut enc = zstd::stream::write::Encoder::with_ref_prefix(&mut *out, LEVEL, base)?;
    enc.set_parameter(CParameter::WindowLog(window_log(base, bytes)))?;
    enc.set_parameter(CParameter::EnableLongDistanceMatching(true))?;
    enc.include_checksum(true)?;
    enc.set_pledged_src_size(Some(bytes.len() as u64))?;
    std::io::Write::write_all(&mut enc, bytes)?;
    enc.finish()?;
    Ok(())
}

/// The canonical bytes of a packed manifest's frame, at most `bound`.
fn unpack(frame: &[u8], bound: u64) -> Result<Vec<u8>, KeptError> {
    let mut out = Vec::new();
    let why = |e: std::io::Error| KeptError::Packed(e.to_string());
    let mut dec = zstd::stream::read::Decoder::new(frame).map_err(why)?;
    dec.set_parameter(zstd::stream::raw::DParameter::WindowLogMax(window_for(
        0, bound,
    )))
    .map_err(why)?;
    dec.take(bound + 1).read_to_end(&mut out).map_err(why)?;
    if out.len() as u64 > bound {
        return Err(KeptError::Packed(format!(
            "it unfolds to more than {bound} bytes"
        )));
    }
    Ok(out)
}

/// The largest window a frame of at most `bound` bytes over a `base` of
/// `base_len` needs: a frame asking for more is refused rather than given
/// the memory.
fn window_for(base_len: usize, bound: u64) -> u32 {
    let span = (base_len as u64).saturating_add(bound).max(1 << 10);
    (64 - (span - 1).leading_zeros()).clamp(10, 30)
}

/// Unfolds a delta's frame against its base's canonical bytes, reading at
/// most `bound` bytes.
pub fn apply(
    base_digest: &ManifestDigest,
    base: &[u8],
    frame: &[u8],
    bound: u64,
) -> Result<Vec<u8>, KeptError> {
    use zstd::stream::raw::DParameter;
    let why = |e: std::io::Error| KeptError::Frame {
        base: *base_digest,
        why: e.to_string(),
    };
    let mut dec = zstd::stream::read::Decoder::with_ref_prefix(frame, base).map_err(why)?;
    dec.set_parameter(DParameter::WindowLogMax(window_for(base.len(), bound)))
        .map_err(why)?;
    let mut out = Vec::new();
    dec.take(bound + 1).read_to_end(&mut out).map_err(why)?;
    if out.len() as u64 > bound {
        return Err(KeptError::TooLong {
            base: *base_digest,
            bound,
        });
    }
    Ok(out)
}

/// Why kept bytes did not unfold: their own fault, or reading a base's.
#[derive(Debug)]
pub enum Unfold<E> {
    /// The kept bytes (or a base's) are damaged.
    Kept(KeptError),
    /// A base could not be read.
    Fetch(E),
}

impl<E> From<KeptError> for Unfold<E> {
    fn from(e: KeptError) -> Self {
        Unfold::Kept(e)
    }
}

/// Unfolds kept bytes to canonical bytes, reading each base's kept bytes
/// through `fetch`, following at most [`MAX_UNFOLD`] bases. What comes out
/// is not checked here: the caller hashes it against the digest it asked
/// for.
pub fn unfold<E>(
    kept: Vec<u8>,
    bound: u64,
    mut fetch: impl FnMut(&ManifestDigest) -> Result<Vec<u8>, E>,
) -> Result<Vec<u8>, Unfold<E>> {
    // The chain, newest first: each delta's kept bytes and its base.
    let mut chain: Vec<(Vec<u8>, ManifestDigest)> = Vec::new();
    let mut next = kept;
    let whole = loop {
        let base = match form(&next)? {
            Form::Whole(_) => break next,
            Form::Packed(frame) => break unpack(frame, bound)?,
            Form::Delta { base, .. } => base,
        };
        if chain.len() >= MAX_UNFOLD || chain.iter().any(|(_, b)| *b == base) {
            return Err(KeptError::Chain(base).into());
        }
        let fetched = fetch(&base).map_err(Unfold::Fetch)?;
        chain.push((next, base));
        next = fetched;
    };
    let mut bytes = whole;
    for (kept, base) in chain.into_iter().rev() {
        let Form::Delta { frame, .. } = form(&kept)? else {
            return Err(KeptError::Header.into());
        };
        bytes = apply(&base, &bytes, frame, bound)?;
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(n: usize, changed: &[usize]) -> Vec<u8> {
        (0..n)
            .map(|i| {
                let tag = if changed.contains(&i) { "changed" } else { "same" };
                format!("{{\"path\":\"node_modules/p{i}/index.js\",\"sha256\":\"{:064x}\",\"tag\":\"{tag}\"}}\n", i * 7919)
            })
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn a_delta_unfolds_to_the_bytes_and_is_small() {
        let base = lines(5000, &[]);
        let next = lines(5000, &[3, 1000, 4999]);
        let base_digest = ManifestDigest::of(&base);
        let kept = delta(&base_digest, &base, &next);
        assert!(kept.len() < 2000, "{} bytes", kept.len());
        assert_eq!(
            form(&kept).unwrap(),
            Form::Delta {
                base: base_digest,
                frame: &kept[DELTA_MAGIC.len() + 65..]
            }
        );
        let out: Result<Vec<u8>, Unfold<()>> = unfold(kept, 1 << 30, |d| {
            assert_eq!(*d, base_digest);
            Ok(base.clone())
        });
        assert_eq!(out.ok(), Some(next));
    }

    #[test]
    fn a_large_manifest_is_packed_and_a_small_task_or_environment_one_is_whole() {
        let big = lines(2000, &[]);
        let packed = keep_whole(&big);
        assert!(packed.starts_with(PACK_MAGIC) && packed.len() * 4 < big.len());
        assert!(matches!(form(&packed), Ok(Form::Packed(_))));
        let none = |_: &ManifestDigest| -> Result<Vec<u8>, ()> { Err(()) };
        assert_eq!(
            unfold(packed.clone(), 1 << 30, none).ok(),
            Some(big.clone())
        );
        assert!(matches!(
            unfold(packed, 100, none),
            Err(Unfold::Kept(KeptError::Packed(_)))
        ));
        let small = lines(10, &[]);
        assert_eq!(keep_whole(&small), small);
        for head in [&b"{\"declarations\":"[..], b"{\"members\":"] {
            let mut task = head.to_vec();
            task.extend(std::iter::repeat_n(b' ', MIN_KEPT_BYTES));
            assert_eq!(keep_whole(&task), task);
        }
    }

    #[test]
    fn canonical_bytes_are_whole() {
        for bytes in [&b"{\"files\":[]}"[..], b"[]", b""] {
            assert_eq!(form(bytes).unwrap(), Form::Whole(bytes));
        }
    }

    #[test]
    fn a_chain_unfolds_newest_last_and_a_circle_is_refused() {
        let v: Vec<Vec<u8>> = (0..4).map(|i| lines(300, &[i * 10])).collect();
        let d: Vec<ManifestDigest> = v.iter().map(|b| ManifestDigest::of(b)).collect();
        let kept: Vec<Vec<u8>> = (0..4)
            .map(|i| {
                if i == 0 {
                    v[0].clone()
                } else {
                    delta(&d[i - 1], &v[i - 1], &v[i])
                }
            })
            .collect();
        let fetch = |x: &ManifestDigest| -> Result<Vec<u8>, ()> {
            Ok(kept[d.iter().position(|y| y == x).unwrap()].clone())
        };
        assert_eq!(
            unfold(kept[3].clone(), 1 << 30, fetch).ok(),
            Some(v[3].clone())
        );
        // A base that names its own dependent: a circle.
        let circle = |_: &ManifestDigest| -> Result<Vec<u8>, ()> { Ok(delta(&d[3], &v[3], &v[0])) };
        assert!(matches!(
            unfold(kept[3].clone(), 1 << 30, circle),
            Err(Unfold::Kept(KeptError::Chain(_)))
        ));
    }

    #[test]
    fn a_damaged_frame_or_header_or_bound_is_refused() {
        let base = lines(200, &[]);
        let next = lines(200, &[5]);
        let bd = ManifestDigest::of(&base);
        let mut kept = delta(&bd, &base, &next);
        let fetch = |_: &ManifestDigest| -> Result<Vec<u8>, ()> { Ok(base.clone()) };
        assert!(matches!(
            unfold(kept.clone(), 100, fetch),
            Err(Unfold::Kept(KeptError::TooLong { .. }))
        ));
        let last = kept.len() - 1;
        kept[last] ^= 1;
        assert!(matches!(
            unfold(kept, 1 << 30, fetch),
            Err(Unfold::Kept(KeptError::Frame { .. }))
        ));
        let mut bad = DELTA_MAGIC.to_vec();
        bad.extend_from_slice(b"not hex\n");
        assert!(matches!(form(&bad), Err(KeptError::Header)));
    }
}
