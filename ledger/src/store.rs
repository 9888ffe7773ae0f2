//! The redb tables, and the only code in the workspace that touches them.
//!
//! ## Contract
//! - **Durable when:** [`Store::commit`] returns `Ok` only after redb has
//!   committed the transaction with [`Durability::Immediate`] (an fdatasync of
//!   the data file). Rows and the new head are in that one transaction, so a
//!   crash leaves either all of a batch or none of it.
//! - **How the head advances:** only through [`Store::commit`], which writes
//!   the rows for entries `head.size .. head.size + n`, their stored hashes,
//!   and the new head record. The caller (the log's single committer thread)
//!   computes every value; the store writes what it is given. Nothing here
//!   updates or removes an existing entry or stored hash.
//! - **Missing log:** [`Store::open`] creates the data directory and an empty
//!   log (size 0, the empty root, the genesis chain) when there is none.
//!   [`Store::open_existing`] refuses a directory without a log.
//! - **Reads** are MVCC snapshots ([`Snapshot`]). They never block the writer
//!   and never see a half-written batch.
//!
//! ## Tables (format version 1)
//! | table | key | value |
//! |---|---|---|
//! | `entries` | entry index (u64) | chain hash (32 bytes) ‖ leaf bytes |
//! | `hashes` | stored hash index (u64) | SHA-256 tree hash (32 bytes) |
//! | `meta` | `"format_version"` | u32, big-endian |
//! | `meta` | `"head"` | size (u64 BE) ‖ root (32) ‖ chain (32) |
//! | `leaf_index` | leaf hash (32) | first index with that leaf hash (derived, checked on use) |
//! | `aux` | a name | derived state (projection checkpoints); rebuildable, never hashed |
//!
//! The stored hash index is Go `sumdb/tlog`'s dense layout
//! ([`crate::merkle::stored_hash_index`]).

use std::path::{Path, PathBuf};

use redb::{
    Database, Durability, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable,
    TableDefinition,
};

use crate::error::{storage, Corruption, CorruptionKind, Error};
use crate::hash::{Hash, EMPTY_ROOT, GENESIS_CHAIN};

/// `index → chain hash ‖ leaf bytes`.
pub const ENTRIES: TableDefinition<u64, &[u8]> = TableDefinition::new("entries");
/// `stored hash index → hash`.
pub const HASHES: TableDefinition<u64, [u8; 32]> = TableDefinition::new("hashes");
/// Metadata: `format_version`, `head`.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// `leaf hash → first index with that leaf hash`: a derived lookup for
/// proofs by leaf hash. Not trusted: every answer is checked against the
/// entry it names.
pub const LEAF_INDEX: TableDefinition<[u8; 32], u64> = TableDefinition::new("leaf_index");
/// Derived state saved by layers above the log (projection checkpoints).
/// Never hashed, never part of the log; always rebuildable from it.
pub const AUX: TableDefinition<&str, &[u8]> = TableDefinition::new("aux");

/// The data file inside the data directory.
pub const DB_FILE: &str = "ledger.redb";
/// The on-disk format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

pub(crate) const HEAD_KEY: &str = "head";
pub(crate) const FORMAT_KEY: &str = "format_version";
const HEAD_LEN: usize = 8 + 32 + 32;

/// The committed head of the log: its size, RFC 6962 root and last chain hash.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Head {
    pub size: u64,
    pub root: Hash,
    pub chain: Hash,
}

impl Head {
    /// The head of the empty log.
    pub const EMPTY: Head = Head {
        size: 0,
        root: EMPTY_ROOT,
        chain: GENESIS_CHAIN,
    };

    /// The 72-byte head record.
    pub fn encode(&self) -> [u8; HEAD_LEN] {
        let mut out = [0u8; HEAD_LEN];
        out[..8].copy_from_slice(&self.size.to_be_bytes());
        out[8..40].copy_from_slice(&self.root.0);
        out[40..].copy_from_slice(&self.chain.0);
        out
    }

    /// Parses a head record; `None` when it is not 72 bytes.
    pub fn decode(b: &[u8]) -> Option<Head> {
        if b.len() != HEAD_LEN {
            return None;
        }
        let size = u64::from_be_bytes(b[..8].try_into().ok()?);
        Some(Head {
            size,
            root: Hash(b[8..40].try_into().ok()?),
            chain: Hash(b[40..].try_into().ok()?),
        })
    }
}

/// One entry's row, computed by the committer.
pub(crate) struct Row<'a> {
    pub index: u64,
    pub leaf: &'a [u8],
    pub chain: Hash,
    /// The stored hashes this append writes, from `stored_hash_index(0, index)`.
    pub first_hash_index: u64,
    pub hashes: Vec<Hash>,
}

/// Opens a storage backend for the data file at the given path.
pub type MakeBackend =
    dyn Fn(&Path) -> std::io::Result<Box<dyn redb::StorageBackend>> + Send + Sync;

/// Makes the storage backend for a data file: the seam where tests inject
/// faults (failed fsync, failed write, ENOSPC). Production uses the file.
#[derive(Clone)]
pub struct BackendFactory(pub std::sync::Arc<MakeBackend>);

impl std::fmt::Debug for BackendFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BackendFactory")
    }
}

#[derive(Debug)]
struct BoxedBackend(Box<dyn redb::StorageBackend>);

impl redb::StorageBackend for BoxedBackend {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.0.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        self.0.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.0.write(offset, data)
    }
    fn close(&self) -> Result<(), std::io::Error> {
        self.0.close()
    }
}

/// The log's storage: one redb database in the data directory.
pub struct Store {
    db: Database,
    path: PathBuf,
    /// Opened read-only over [`crate::overlay::Overlay`] while storage fails.
    fallback: bool,
    /// Held by every [`Snapshot`]: how the log knows when the last reader of
    /// a fallback view is gone (see [`Store::readers`]).
    lease: std::sync::Arc<()>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Opens the log in `dir`, creating the directory and an empty log if
    /// there is none.
    pub fn open(dir: &Path) -> Result<Store, Error> {
        Store::open_with(dir, None)
    }

    /// Like [`Store::open`], on the storage backend `backend` makes (for
    /// fault injection); `None` is the plain file.
    pub fn open_with(dir: &Path, backend: Option<&BackendFactory>) -> Result<Store, Error> {
        std::fs::create_dir_all(dir).map_err(|e| storage(redb::StorageError::Io(e)))?;
        let path = dir.join(DB_FILE);
        guarded("opening", || {
            let db = match backend {
                None => builder().create(&path).map_err(storage)?,
                Some(f) => {
                    let b = (f.0)(&path).map_err(|e| storage(redb::StorageError::Io(e)))?;
                    builder()
                        .create_with_backend(BoxedBackend(b))
                        .map_err(storage)?
                }
            };
            let store = Store::new(db, path.clone(), false);
            store.init()?;
            Ok(store)
        })
    }

    /// Opens a read-only view of the log in `dir` that never writes the data
    /// file, for serving reads while storage fails ([`crate::overlay`]). It
    /// sees the last durable commit. Log entries are never committed through
    /// it; [`Store::put_aux`] refuses.
    pub fn open_fallback(dir: &Path, backend: Option<&BackendFactory>) -> Result<Store, Error> {
        let path = dir.join(DB_FILE);
        let io = |e| storage(redb::StorageError::Io(e));
        let base = match backend {
            None => crate::overlay::Base::open_file(&path).map_err(io)?,
            Some(f) => crate::overlay::Base::Backend((f.0)(&path).map_err(io)?),
        };
        let overlay = crate::overlay::Overlay::new(base).map_err(io)?;
        guarded("opening a read-only view", || {
            let db = builder().create_with_backend(overlay).map_err(storage)?;
            let store = Store::new(db, path.clone(), true);
            store.init()?;
            Ok(store)
        })
    }

    fn new(db: Database, path: PathBuf, fallback: bool) -> Store {
        Store {
            db,
            path,
            fallback,
            lease: std::sync::Arc::new(()),
        }
    }

    /// Whether this is a read-only view opened while storage fails.
    pub fn is_fallback(&self) -> bool {
        self.fallback
    }

    /// How many [`Snapshot`]s of this store are alive.
    pub fn readers(&self) -> usize {
        std::sync::Arc::strong_count(&self.lease) - 1
    }

    fn refuse_if_fallback(&self) -> Result<(), Error> {
        if self.fallback {
            return Err(storage(redb::StorageError::Io(std::io::Error::new(
                std::io::ErrorKind::ReadOnlyFilesystem,
                "storage failed; the log is read-only until it can be reopened",
            ))));
        }
        Ok(())
    }

    /// Opens an existing log; refuses a directory without one.
    pub fn open_existing(dir: &Path) -> Result<Store, Error> {
        let path = dir.join(DB_FILE);
        if !path.is_file() {
            return Err(storage(redb::StorageError::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no ledger at {}", path.display()),
            ))));
        }
        guarded("opening", || {
            let db = builder().open(&path).map_err(storage)?;
            let store = Store::new(db, path.clone(), false);
            store.check_format()?;
            Ok(store)
        })
    }

    /// The path of the data file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn init(&self) -> Result<(), Error> {
        let txn = self.db.begin_write().map_err(storage)?;
        let fresh;
        {
            let mut meta = txn.open_table(META).map_err(storage)?;
            fresh = meta.get(FORMAT_KEY).map_err(storage)?.is_none();
            if fresh {
                meta.insert(FORMAT_KEY, FORMAT_VERSION.to_be_bytes().as_slice())
                    .map_err(storage)?;
                meta.insert(HEAD_KEY, Head::EMPTY.encode().as_slice())
                    .map_err(storage)?;
            }
            txn.open_table(ENTRIES).map_err(storage)?;
            txn.open_table(HASHES).map_err(storage)?;
            txn.open_table(AUX).map_err(storage)?;
            txn.open_table(LEAF_INDEX).map_err(storage)?;
        }
        if fresh || self.needs_aux()? {
            txn.commit().map_err(storage)?;
        } else {
            txn.abort().map_err(storage)?;
        }
        self.check_format()
    }

    fn needs_aux(&self) -> Result<bool, Error> {
        let txn = self.db.begin_read().map_err(storage)?;
        Ok(txn.open_table(AUX).is_err() || txn.open_table(LEAF_INDEX).is_err())
    }

    /// Saves derived state under `name`, durably, in its own transaction.
    pub fn put_aux(&self, name: &str, bytes: &[u8]) -> Result<(), Error> {
        self.refuse_if_fallback()?;
        let mut txn = self.db.begin_write().map_err(storage)?;
        txn.set_durability(Durability::Immediate).map_err(storage)?;
        {
            let mut t = txn.open_table(AUX).map_err(storage)?;
            t.insert(name, bytes).map_err(storage)?;
        }
        txn.commit().map_err(storage)
    }

    /// Derived state saved under `name`, if any.
    pub fn get_aux(&self, name: &str) -> Result<Option<Vec<u8>>, Error> {
        let txn = self.db.begin_read().map_err(storage)?;
        let t = match txn.open_table(AUX) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(storage(e)),
        };
        Ok(t.get(name).map_err(storage)?.map(|v| v.value().to_vec()))
    }

    fn check_format(&self) -> Result<(), Error> {
        let snap = self.snapshot()?;
        let v =
            snap.meta.get(FORMAT_KEY).map_err(storage)?.ok_or_else(|| {
                Corruption::new(0, CorruptionKind::Malformed, "no format_version")
            })?;
        let bytes: [u8; 4] = v
            .value()
            .try_into()
            .map_err(|_| Corruption::new(0, CorruptionKind::Malformed, "format_version"))?;
        let found = u32::from_be_bytes(bytes);
        if found > FORMAT_VERSION {
            return Err(Error::NewerFormat {
                found,
                supported: FORMAT_VERSION,
            });
        }
        Ok(())
    }

    /// A consistent read snapshot.
    pub fn snapshot(&self) -> Result<Snapshot, Error> {
        let txn = self.db.begin_read().map_err(storage)?;
        Snapshot::new(txn, std::sync::Arc::clone(&self.lease))
    }

    /// Writes `rows` and `new_head` in one durable transaction. The caller
    /// guarantees the rows are contiguous from the current head.
    pub(crate) fn commit(&self, rows: &[Row<'_>], new_head: &Head) -> Result<(), Error> {
        self.refuse_if_fallback()?;
        let mut txn = self.db.begin_write().map_err(storage)?;
        txn.set_durability(Durability::Immediate).map_err(storage)?;
        txn.set_quick_repair(true);
        {
            let mut entries = txn.open_table(ENTRIES).map_err(storage)?;
            let mut hashes = txn.open_table(HASHES).map_err(storage)?;
            let mut meta = txn.open_table(META).map_err(storage)?;
            let mut by_leaf = txn.open_table(LEAF_INDEX).map_err(storage)?;
            let mut rec = Vec::new();
            for row in rows {
                if let Some(leaf_hash) = row.hashes.first() {
                    if by_leaf.get(leaf_hash.0).map_err(storage)?.is_none() {
                        by_leaf.insert(leaf_hash.0, row.index).map_err(storage)?;
                    }
                }
                rec.clear();
                rec.extend_from_slice(&row.chain.0);
                rec.extend_from_slice(row.leaf);
                entries.insert(row.index, rec.as_slice()).map_err(storage)?;
                for (k, h) in row.hashes.iter().enumerate() {
                    hashes
                        .insert(row.first_hash_index + k as u64, h.0)
                        .map_err(storage)?;
                }
            }
            meta.insert(HEAD_KEY, new_head.encode().as_slice())
                .map_err(storage)?;
        }
        txn.commit().map_err(storage)
    }
}

/// Runs `f`, turning a panic inside the storage engine into a typed
/// [`Error::Corrupt`]. redb panics on some malformed files (for example
/// "Malformed allocator state") instead of returning an error; a tampered
/// data file is attacker input, and must be refused, never crash the process.
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_owned());
            Err(Corruption::new(
                0,
                CorruptionKind::Malformed,
                format!("the storage engine rejected the data file while {what}: {msg}"),
            )
            .into())
        }
    }
}

fn builder() -> redb::Builder {
    let mut b = Database::builder();
    // Enough cache for the hot right edge of the tree and recent entries; the
    // OS page cache serves the rest.
    b.set_cache_size(64 << 20);
    b
}

/// A consistent, read-only view of the log.
pub struct Snapshot {
    pub(crate) entries: ReadOnlyTable<u64, &'static [u8]>,
    pub(crate) hashes: ReadOnlyTable<u64, [u8; 32]>,
    pub(crate) meta: ReadOnlyTable<&'static str, &'static [u8]>,
    pub(crate) leaf_index: ReadOnlyTable<[u8; 32], u64>,
    pub(crate) aux: ReadOnlyTable<&'static str, &'static [u8]>,
    _lease: std::sync::Arc<()>,
}

/// An entry as stored: its chain hash and its leaf bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEntry {
    pub chain: Hash,
    pub leaf: Vec<u8>,
}

impl StoredEntry {
    pub(crate) fn decode(index: u64, rec: &[u8]) -> Result<StoredEntry, Corruption> {
        if rec.len() < 32 {
            return Err(Corruption::new(
                index,
                CorruptionKind::Malformed,
                format!("entry record of {} bytes is shorter than 32", rec.len()),
            ));
        }
        let mut chain = [0u8; 32];
        chain.copy_from_slice(&rec[..32]);
        Ok(StoredEntry {
            chain: Hash(chain),
            leaf: rec[32..].to_vec(),
        })
    }
}

impl Snapshot {
    fn new(txn: ReadTransaction, lease: std::sync::Arc<()>) -> Result<Snapshot, Error> {
        Ok(Snapshot {
            _lease: lease,
            entries: txn.open_table(ENTRIES).map_err(storage)?,
            hashes: txn.open_table(HASHES).map_err(storage)?,
            meta: txn.open_table(META).map_err(storage)?,
            leaf_index: txn.open_table(LEAF_INDEX).map_err(storage)?,
            aux: txn.open_table(AUX).map_err(storage)?,
        })
    }

    /// The committed head record.
    pub fn head(&self) -> Result<Head, Error> {
        let v = self
            .meta
            .get(HEAD_KEY)
            .map_err(storage)?
            .ok_or_else(|| Corruption::new(0, CorruptionKind::Malformed, "no head record"))?;
        Head::decode(v.value())
            .ok_or_else(|| Corruption::new(0, CorruptionKind::Malformed, "head record").into())
    }

    /// The stored entry at `index`, if any. Not verified: see
    /// [`crate::Ledger::entry`] for the checked read.
    pub fn entry(&self, index: u64) -> Result<Option<StoredEntry>, Error> {
        match self.entries.get(index).map_err(storage)? {
            None => Ok(None),
            Some(v) => Ok(Some(StoredEntry::decode(index, v.value())?)),
        }
    }

    /// The stored hash at a stored hash index, if any.
    pub fn hash(&self, stored_index: u64) -> Result<Option<Hash>, Error> {
        Ok(self
            .hashes
            .get(stored_index)
            .map_err(storage)?
            .map(|v| Hash(v.value())))
    }

    /// The largest entry index present, if any.
    pub fn last_entry_index(&self) -> Result<Option<u64>, Error> {
        Ok(self
            .entries
            .last()
            .map_err(storage)?
            .map(|(k, _)| k.value()))
    }

    /// The largest stored hash index present, if any.
    pub fn last_hash_index(&self) -> Result<Option<u64>, Error> {
        Ok(self.hashes.last().map_err(storage)?.map(|(k, _)| k.value()))
    }

    /// Derived state saved under `name` (see [`Store::put_aux`]), as of this
    /// snapshot.
    pub fn aux(&self, name: &str) -> Result<Option<Vec<u8>>, Error> {
        Ok(self
            .aux
            .get(name)
            .map_err(storage)?
            .map(|v| v.value().to_vec()))
    }

    /// The first index recorded for `leaf_hash` in the derived lookup.
    pub fn index_of_leaf(&self, leaf_hash: &Hash) -> Result<Option<u64>, Error> {
        Ok(self
            .leaf_index
            .get(leaf_hash.0)
            .map_err(storage)?
            .map(|v| v.value()))
    }

    /// Reads the stored hashes at `indexes`; a missing one is
    /// [`CorruptionKind::MissingEntry`] naming the leaf that wrote it.
    pub fn hashes_at(&self, indexes: &[u64]) -> Result<Vec<Hash>, Error> {
        indexes
            .iter()
            .map(|&i| {
                self.hash(i)?.ok_or_else(|| {
                    Corruption::new(
                        crate::merkle::last_leaf_of_stored(i),
                        CorruptionKind::MissingEntry,
                        format!("stored hash {i} missing"),
                    )
                    .into()
                })
            })
            .collect()
    }
}

/// Adapts a snapshot to `tlog_tiles`' reader, keeping the real error.
pub(crate) struct Reader<'a> {
    pub snap: &'a Snapshot,
    pub err: std::cell::RefCell<Option<Error>>,
}

impl<'a> Reader<'a> {
    pub fn new(snap: &'a Snapshot) -> Self {
        Reader {
            snap,
            err: std::cell::RefCell::new(None),
        }
    }

    /// Converts a `tlog_tiles` error into ours, preferring the stored one.
    pub fn take_err(&self, e: tlog_tiles::Error) -> Error {
        self.err.borrow_mut().take().unwrap_or_else(|| {
            Corruption::new(0, CorruptionKind::Tree, format!("tree computation: {e}")).into()
        })
    }
}

impl tlog_tiles::HashReader for Reader<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        self.snap.hashes_at(indexes).map_err(|e| {
            *self.err.borrow_mut() = Some(e);
            tlog_tiles::Error::IndexesNotInTree
        })
    }
}
