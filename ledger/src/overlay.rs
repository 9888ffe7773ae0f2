//! A read-only view of the data file for serving reads while storage fails.
//!
//! redb latches after any I/O error: every later read and write on that
//! database answers `PreviousIo` until it is reopened, and a reopen cannot
//! succeed while the fault lasts (the reopen repairs the file, which writes).
//! To keep serving verified reads through a storage fault, the log opens a
//! second database over this backend:
//! - reads come from the data file as it is on disk;
//! - writes (redb's repair of an uncleanly closed file, its allocator
//!   bookkeeping) go to pages held in memory and never reach the file;
//! - `sync_data` does nothing, because nothing here is ever durable.
//!
//! The file is never written through this backend, so it cannot make a fault
//! worse or lose an acknowledged write. What it reads is the last durable
//! commit: redb's recovery picks the newest header whose checksum is valid,
//! exactly as a restart would.
//!
//! The log layer never commits log entries through a database opened this way
//! (see [`crate::store::Store::is_fallback`]); the in-memory pages are bounded
//! by what redb's repair writes (the header and the allocator state).

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use redb::StorageBackend;

const PAGE: u64 = 4096;

/// The bytes underneath the overlay.
#[derive(Debug)]
pub(crate) enum Base {
    /// The data file, opened read-only and without a lock: the failed
    /// database may still hold its lock while its last readers finish.
    File(File),
    /// A backend from a [`crate::store::BackendFactory`] (fault injection in
    /// tests); only its `len` and `read` are used.
    Backend(Box<dyn StorageBackend>),
}

impl Base {
    pub(crate) fn open_file(path: &Path) -> std::io::Result<Base> {
        Ok(Base::File(File::open(path)?))
    }

    fn len(&self) -> std::io::Result<u64> {
        match self {
            Base::File(f) => Ok(f.metadata()?.len()),
            Base::Backend(b) => b.len(),
        }
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        match self {
            Base::File(f) => read_at(f, offset, out),
            Base::Backend(b) => b.read(offset, out),
        }
    }
}

#[cfg(unix)]
fn read_at(f: &File, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, out, offset)
}

#[cfg(windows)]
fn read_at(f: &File, mut offset: u64, mut out: &mut [u8]) -> std::io::Result<()> {
    while !out.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_read(f, out, offset)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        out = &mut out[n..];
        offset += n as u64;
    }
    Ok(())
}

/// The file underneath, plus the pages written since open (in memory only).
#[derive(Debug)]
pub(crate) struct Overlay {
    base: Base,
    /// Bytes of `base` that exist; reads past it see zeros.
    base_len: u64,
    /// The length redb believes the file has.
    len: AtomicU64,
    pages: Mutex<HashMap<u64, Box<[u8]>>>,
}

impl Overlay {
    pub(crate) fn new(base: Base) -> std::io::Result<Overlay> {
        let base_len = base.len()?;
        Ok(Overlay {
            base,
            base_len,
            len: AtomicU64::new(base_len),
            pages: Mutex::new(HashMap::new()),
        })
    }

    /// Fills `out` from the file, with zeros past its end.
    fn read_base(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        let end = offset.saturating_add(out.len() as u64);
        let have = self.base_len.min(end).saturating_sub(offset);
        let (from_file, past_end) = out.split_at_mut(have as usize);
        if !from_file.is_empty() {
            self.base.read(offset, from_file)?;
        }
        past_end.fill(0);
        Ok(())
    }
}

/// The page-aligned pieces of `offset .. offset + len`: (page start, offset
/// within the page, offset within the range, length).
fn pieces(offset: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let end = offset + len as u64;
    let mut at = offset;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let page = at - at % PAGE;
        let n = (page + PAGE).min(end) - at;
        let piece = (
            page,
            (at - page) as usize,
            (at - offset) as usize,
            n as usize,
        );
        at += n;
        Some(piece)
    })
}

impl StorageBackend for Overlay {
    fn len(&self) -> Result<u64, std::io::Error> {
        Ok(self.len.load(Ordering::Acquire))
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.read_base(offset, out)?;
        let pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        if pages.is_empty() {
            return Ok(());
        }
        for (page, in_page, in_out, n) in pieces(offset, out.len()) {
            if let Some(p) = pages.get(&page) {
                out[in_out..in_out + n].copy_from_slice(&p[in_page..in_page + n]);
            }
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.len.store(len, Ordering::Release);
        Ok(())
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        for (page, in_page, in_data, n) in pieces(offset, data.len()) {
            let p = match pages.entry(page) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let mut fresh = vec![0u8; PAGE as usize].into_boxed_slice();
                    self.read_base(page, &mut fresh)?;
                    v.insert(fresh)
                }
            };
            p[in_page..in_page + n].copy_from_slice(&data[in_data..in_data + n]);
        }
        Ok(())
    }

    fn close(&self) -> Result<(), std::io::Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlay_on(bytes: &[u8]) -> (tempfile::TempDir, Overlay) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, bytes).expect("write");
        let o = Overlay::new(Base::open_file(&path).expect("open")).expect("overlay");
        (dir, o)
    }

    #[test]
    fn reads_see_the_file_and_then_the_overlay_writes() {
        let file: Vec<u8> = (0..3 * PAGE).map(|i| (i % 251) as u8).collect();
        let (dir, o) = overlay_on(&file);
        let mut out = vec![0u8; 100];
        o.read(4000, &mut out).expect("read");
        assert_eq!(out, file[4000..4100]);
        // A write straddling a page boundary.
        o.write(4090, &[0xAA; 20]).expect("write");
        o.read(4000, &mut out).expect("read");
        let mut want = file[4000..4100].to_vec();
        want[90..100].fill(0xAA);
        assert_eq!(out[..100], want[..]);
        let mut tail = vec![0u8; 10];
        o.read(4100, &mut tail).expect("read");
        assert_eq!(tail, [0xAA; 10]);
        // The file itself is untouched.
        assert_eq!(std::fs::read(dir.path().join("f")).expect("read"), file);
    }

    #[test]
    fn growing_past_the_file_reads_zeros_until_written() {
        let (_dir, o) = overlay_on(&[7u8; 10]);
        o.set_len(2 * PAGE).expect("set_len");
        assert_eq!(o.len().expect("len"), 2 * PAGE);
        let mut out = vec![1u8; 20];
        o.read(0, &mut out).expect("read");
        assert_eq!(&out[..10], &[7u8; 10]);
        assert_eq!(&out[10..], &[0u8; 10]);
        o.write(PAGE + 5, b"abc").expect("write");
        let mut got = [0u8; 3];
        o.read(PAGE + 5, &mut got).expect("read");
        assert_eq!(&got, b"abc");
        o.sync_data().expect("sync is a no-op");
    }
}
