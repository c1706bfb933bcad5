//! The first bytes of one open file copied to another: by the kernel
//! where it can, else by reads and writes that tell a failed read from a
//! failed write. Shared by the tree capture (`profile/tree/`) and the
//! store's writable copies (`store/views/copies.rs`). Nothing of the crate
//! below it.

use std::os::fd::BorrowedFd;

use rustix::io::Errno;

/// Which side of a [`copy_prefix`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyFailure {
    /// Reading the source.
    Read(Errno),
    /// Writing the copy.
    Write(Errno),
}

/// Copies the first bytes of `src`, up to `limit`, to the same offsets of
/// `dst`; returns how many it copied (fewer than `limit` at the source's
/// end).
///
/// The kernel copies (`copy_file_range`: one copy between page caches, or
/// a reflink where the filesystem shares extents); should it fail, for
/// any reason, the rest is copied by reads and writes of `chunk` bytes,
/// which tell a failed read from a failed write.
pub fn copy_prefix(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    limit: u64,
    chunk: usize,
) -> Result<u64, CopyFailure> {
    let mut done = 0u64;
    let mut in_kernel = true;
    let mut buf = Vec::new();
    while done < limit {
        let want = usize::try_from(limit - done).map_or(chunk, |left| left.min(chunk));
        if in_kernel {
            let (mut from, mut to) = (done, done);
            match rustix::fs::copy_file_range(src, Some(&mut from), dst, Some(&mut to), want) {
                // Some filesystems report 0 before the end: a read says.
                Ok(0) => in_kernel = false,
                Ok(n) => {
                    done += n as u64;
                    continue;
                }
                Err(Errno::INTR) => continue,
                Err(_) => in_kernel = false,
            }
        }
        if buf.is_empty() {
            buf = vec![0u8; chunk];
        }
        let n = match rustix::io::pread(src, &mut buf[..want], done) {
            Ok(0) => break,
            Ok(n) => n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(CopyFailure::Read(e)),
        };
        let mut written = 0;
        while written < n {
            match rustix::io::pwrite(dst, &buf[written..n], done + written as u64) {
                Ok(0) => return Err(CopyFailure::Write(Errno::IO)),
                Ok(w) => written += w,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(CopyFailure::Write(e)),
            }
        }
        done += n as u64;
    }
    Ok(done)
}
