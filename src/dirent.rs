//! A directory's names, read through its handle, and sorted as Python sorts
//! them: shared by the CE walk (`source/`), the tree capture
//! (`profile/tree/`) and the store (through `fsutil.rs`). Nothing of the
//! crate below it.

use std::os::fd::BorrowedFd;

use rustix::fs::FileType;
use rustix::io::Errno;

/// Lists a directory's names, without `.` and `..`, in no particular order.
///
/// It reads through the handle itself, not a re-open of ".", so that listing
/// needs read permission only, as the reference's `scandir` does.
pub fn list_names(dir: BorrowedFd<'_>) -> Result<Vec<Vec<u8>>, Errno> {
    Ok(list_entries(dir)?.into_iter().map(|(n, _)| n).collect())
}

/// Lists a directory's names with the type the listing gives each
/// (`FileType::Unknown` where the filesystem gives none), without `.` and `..`.
///
/// The listing starts from the top, so a handle listed before is listed
/// whole again; it reads with `getdents64` straight into one buffer.
pub fn list_entries(dir: BorrowedFd<'_>) -> Result<Vec<(Vec<u8>, FileType)>, Errno> {
    rustix::fs::seek(dir, rustix::fs::SeekFrom::Start(0))?;
    // Far more than the largest entry (a 255-byte name and its header).
    let mut buf = Vec::with_capacity(32 * 1024);
    let mut listing = rustix::fs::RawDir::new(dir, buf.spare_capacity_mut());
    let mut entries = Vec::new();
    while let Some(entry) = listing.next() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            entries.push((name.to_vec(), entry.file_type()));
        }
    }
    Ok(entries)
}

/// Sorts names as Python sorts `str`: by code point, each undecodable byte
/// taken as its `surrogateescape` code point.
pub fn sort_like_python(names: &mut [Vec<u8>]) {
    if names.iter().all(|n| std::str::from_utf8(n).is_ok()) {
        // For valid UTF-8, byte order is code point order.
        names.sort_unstable();
    } else {
        names.sort_by_cached_key(|n| python_code_points(n));
    }
}

/// The code points Python sees for a file name: UTF-8 decoded with
/// `surrogateescape`, so each undecodable byte `b` becomes `U+DC00 + b`.
pub fn python_code_points(name: &[u8]) -> Vec<u32> {
    let mut out = Vec::with_capacity(name.len());
    for chunk in name.utf8_chunks() {
        out.extend(chunk.valid().chars().map(u32::from));
        out.extend(chunk.invalid().iter().map(|b| 0xDC00 + u32::from(*b)));
    }
    out
}
