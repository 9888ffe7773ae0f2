//! A storage engine that panics on demand: redb panics on some damaged
//! pages instead of returning an error, and every path above it must turn
//! that into a typed answer.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use ledger::store::BackendFactory;
use redb::StorageBackend;

/// Never panic.
pub const CALM: u8 = 0;
/// Panic on every read.
pub const PANIC_READ: u8 = 1;
/// Panic on every write.
pub const PANIC_WRITE: u8 = 2;

/// The data file, panicking on reads or writes as `armed` says.
#[derive(Debug)]
pub struct Panicky {
    inner: redb::backends::FileBackend,
    armed: Arc<AtomicU8>,
}

impl StorageBackend for Panicky {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        assert!(
            self.armed.load(Ordering::SeqCst) != PANIC_READ,
            "injected: a damaged page"
        );
        self.inner.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        self.inner.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        assert!(
            self.armed.load(Ordering::SeqCst) != PANIC_WRITE,
            "injected: a damaged page"
        );
        self.inner.write(offset, data)
    }
    fn close(&self) -> Result<(), std::io::Error> {
        self.inner.close()
    }
}

/// The data file at `path` as redb's own file backend (created if absent),
/// for a fault-injecting backend to wrap.
pub use ledger::store::file_backend;

/// A backend factory whose data files panic as `armed` says.
pub fn panicky(armed: &Arc<AtomicU8>) -> BackendFactory {
    let armed = Arc::clone(armed);
    BackendFactory(Arc::new(move |path: &std::path::Path| {
        let inner = file_backend(path)?;
        Ok(Box::new(Panicky {
            inner,
            armed: Arc::clone(&armed),
        }) as Box<dyn StorageBackend>)
    }))
}

/// A backend factory for the plain data file, no fault injected: pins a
/// log to redb ([`crate::file_config`]).
pub fn plain_file() -> BackendFactory {
    BackendFactory::file()
}
