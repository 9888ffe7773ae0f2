//! The log in a redb data file (`ledger.redb`) and the sealed segments it
//! continues (`segments/`): their tables, and the only code in the
//! workspace that touches them.
//!
//! ## Contract
//! - **Durable when:** [`FileStore::commit`] returns `Ok` only after redb has
//!   committed the transaction with [`Durability::Immediate`] (an fdatasync of
//!   the data file). Rows and the new head are in that one transaction, so a
//!   crash leaves either all of a batch or none of it.
//! - **How the head advances:** only through [`FileStore::commit`], which writes
//!   the rows for entries `head.size .. head.size + n`, their stored hashes,
//!   and the new head record. The caller (the log's single committer thread)
//!   computes every value; the store writes what it is given. Nothing here
//!   updates or removes an existing entry or stored hash.
//! - **Missing log:** [`FileStore::open`] creates the data directory and an empty
//!   log (size 0, the empty root, the genesis chain) when there is none.
//!   [`FileStore::open_existing`] refuses a directory without a log.
//! - **Reads** are MVCC snapshots ([`FileSnapshot`]). They never block the writer
//!   and never see a half-written batch.
//! - **Sealed segments:** once the data file holds
//!   [`crate::Config::segment_entries`] entries, the commit that reaches
//!   that count also seals it ([`FileStore::seal`]): a new data file carries
//!   on with the head, `meta`, the redactions and the bundle the head is
//!   in; the old file is linked into `segments/` and no commit writes it
//!   again.
//! - **Derived state** (the `aux` table) is kept in a redb file of its own,
//!   [`DERIVED_FILE`], with its own transactions: a save never holds a
//!   commit up, and a seal never copies it.
//!   A snapshot reads each row from the file whose bounds hold it
//!   ([`Files::segment`]); docs/FORMAT.md §4 gives the layout.
//!
//! ## Tables (format version 4)
//! | table | key | value |
//! |---|---|---|
//! | `entry_bundles` | entry index / 16 (u64) | [`EntryBundle`]: up to 16 records of index ‖ length ‖ chain hash ‖ leaf bytes; zstd-compressed once full |
//! | `hashes` | stored hash index (u64) | SHA-256 tree hash (32 bytes) |
//! | `meta` | `"format_version"` | u32, big-endian |
//! | `meta` | `"head"` | size (u64 BE) ‖ root (32) ‖ chain (32) |
//! | `meta` | `"segments"` | the sizes the segments were sealed at (u64 BE each) |
//! | `aux` | a name | empty but for records that stay in the data file ([`stays_in_data_file`]); derived state is in [`DERIVED_FILE`]'s `aux` |
//!
//! The stored hash index is Go `sumdb/tlog`'s dense layout
//! ([`crate::merkle::stored_hash_index`]).
//!
//! The lookups by leaf hash and by entry key are not in this file: they
//! live beside it, off the commit path ([`crate::lookup`]).
//!
//! Format version 1 kept one row per entry in `entries` (index → chain hash
//! ‖ leaf bytes). Snapshots and verify read it as they read bundles; the
//! writer's open ([`FileStore::open_with`]) migrates it to bundles, resumably,
//! before it appends. Format version 2 also held the two lookups, as the
//! tables `leaf_index` and `entry_keys` (with `meta/keys_through`), written
//! in every commit; the writer's open drops them (docs/UPGRADES.md). Format
//! version 3 had no segments; the writer's open records format 4.

use std::path::{Path, PathBuf};

use redb::{
    Database, Durability, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable,
    ReadableTableMetadata, TableDefinition,
};

use std::sync::{Arc, Mutex, OnceLock};

use super::{guarded, missing_hash, sync_dir, Head, Row, StoredEntry, UpperHashes};
use crate::entry_bundle::{bundle_of, EntryBundle, BUNDLE_SIZE};
use crate::error::{storage, Corruption, CorruptionKind, Error};
use crate::hash::Hash;

/// Format version 1's entries: `index → chain hash ‖ leaf bytes`. Read, and
/// migrated to [`ENTRY_BUNDLES`] by the writer.
pub const ENTRIES: TableDefinition<u64, &[u8]> = TableDefinition::new("entries");
/// `index / 16 → entry bundle` ([`crate::entry_bundle`]).
pub const ENTRY_BUNDLES: TableDefinition<u64, &[u8]> = TableDefinition::new("entry_bundles");
/// `stored hash index → hash`.
pub const HASHES: TableDefinition<u64, [u8; 32]> = TableDefinition::new("hashes");
/// Metadata: `format_version`, `head`.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// Format version 2's `leaf hash → first index` lookup, dropped by the
/// upgrade to 3 ([`crate::lookup`] holds it now).
pub const V2_LEAF_INDEX: TableDefinition<[u8; 32], u64> = TableDefinition::new("leaf_index");
/// Format version 2's `entry key → (first index, digest)` lookup, dropped by
/// the upgrade to 3 ([`crate::lookup`] holds it now).
pub const V2_ENTRY_KEYS: TableDefinition<&str, (u64, [u8; 32])> =
    TableDefinition::new("entry_keys");
/// Derived state saved by layers above the log (projection checkpoints,
/// the event state). Never hashed, never part of the log; always
/// rebuildable from it. Kept in [`DERIVED_FILE`]; the data file keeps the
/// table, empty (builds before the derived file kept the records there, and
/// a writer's open moves them).
pub const AUX: TableDefinition<&str, &[u8]> = TableDefinition::new("aux");
/// Private parts of entries, sealed ([`crate::private`]): index → row.
pub const PRIVATE_PARTS: TableDefinition<u64, &[u8]> = TableDefinition::new("private_parts");
/// Redacted private parts: (entry index, part) → 0. A part listed here is
/// destroyed, whatever the key file holds.
pub const REDACTED_PARTS: TableDefinition<(u64, u16), u8> = TableDefinition::new("redacted_parts");
/// `meta` key: how many key slots the rows of `private_parts` refer to (u64 BE).
pub(crate) const PRIVATE_NEXT_SLOT_KEY: &str = "private_next_slot";

/// The data file inside the data directory.
pub const DB_FILE: &str = "ledger.redb";
/// The redb database beside the data file that holds derived state
/// ([`AUX`]): written in its own transactions, so saving it never holds up
/// a commit of the log, and never copied by a seal.
pub const DERIVED_FILE: &str = "derived.redb";
/// The directory beside the data file that holds sealed segments.
pub const SEGMENTS_DIR: &str = "segments";
/// The next data file while a seal builds it; renamed over [`DB_FILE`].
const NEXT_FILE: &str = "ledger.redb.next";
/// Entries the data file takes before it is sealed into a segment and a new
/// one started ([`crate::Config::segment_entries`]).
pub const SEGMENT_ENTRIES: u64 = 1 << 20;
/// `meta` key: the log sizes at which segments were sealed (u64 BE each,
/// increasing); absent when none was.
const SEGMENTS_KEY: &str = "segments";
/// The page cache of each sealed segment: reads there are of old entries
/// and proofs' lower levels; the OS page cache serves the rest.
const SEGMENT_CACHE: usize = 4 << 20;
/// The on-disk format this build writes and reads.
pub const FORMAT_VERSION: u32 = 4;
/// The oldest on-disk format this build reads (and migrates).
pub const OLDEST_FORMAT: u32 = 1;

pub(crate) const HEAD_KEY: &str = "head";
pub(crate) const FORMAT_KEY: &str = "format_version";
/// While a version-1 log is migrated: the first version-1 index not yet
/// copied into bundles (u64 BE).
const MIGRATE_KEY: &str = "migrate_v2_next";
/// Version-1 entries copied per migration transaction.
const MIGRATE_CHUNK: u64 = 16_384;
/// Format version 2's watermark of `entry_keys`, dropped by the upgrade to 3.
const V2_KEYS_THROUGH_KEY: &str = "keys_through";

/// Opens a storage backend for the data file at the given path.
pub type MakeBackend =
    dyn Fn(&Path) -> std::io::Result<Box<dyn redb::StorageBackend>> + Send + Sync;

/// Makes the storage backend for a data file: the seam where tests inject
/// faults (failed fsync, failed write, ENOSPC). Production uses the file.
#[derive(Clone)]
pub struct BackendFactory(pub std::sync::Arc<MakeBackend>);

impl BackendFactory {
    /// The plain data file, no fault injected: a log configured with it is
    /// kept in the redb file whatever `LEDGER_STORAGE` says (a restore
    /// writes one; tests that attack the file's layout use one).
    pub fn file() -> BackendFactory {
        BackendFactory(Arc::new(|path: &Path| {
            Ok(Box::new(file_backend(path)?) as Box<dyn redb::StorageBackend>)
        }))
    }
}

/// The data file at `path` as redb's own file backend (created if absent),
/// for [`BackendFactory::file`] and for a fault-injecting backend to wrap.
pub fn file_backend(path: &Path) -> std::io::Result<redb::backends::FileBackend> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    redb::backends::FileBackend::new(file).map_err(|e| std::io::Error::other(e.to_string()))
}

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

/// The log's storage: one redb database in the data directory, and the
/// sealed segments it continues.
pub struct FileStore {
    files: std::sync::RwLock<Arc<Files>>,
    path: PathBuf,
    /// The storage backend the data file is opened on (fault injection).
    backend: Option<BackendFactory>,
    /// Entries the data file takes before it is sealed; 0 never seals.
    seal_every: std::sync::atomic::AtomicU64,
    /// After a seal failed: the size of the log at which to try again.
    seal_retry_at: std::sync::atomic::AtomicU64,
    /// Held by every write to the data file (a commit and the seal it may
    /// make, a record that stays in the data file, derived state where
    /// [`DERIVED_FILE`] is not open), so that a seal copies what it carries
    /// over with no write in between. Saves to [`DERIVED_FILE`] do not take
    /// it.
    writing: Mutex<()>,
    /// Set when a save to [`DERIVED_FILE`] failed: the next one opens it
    /// again first ([`FileStore::reopen_derived`]).
    derived_failed: std::sync::atomic::AtomicBool,
    /// Opened read-only over [`crate::overlay::Overlay`] while storage fails.
    fallback: bool,
    /// Held by every [`FileSnapshot`]: how the log knows when the last reader of
    /// a fallback view is gone (see [`FileStore::readers`]).
    lease: std::sync::Arc<()>,
    /// Upper-level tree hashes already read, shared by every snapshot.
    upper: Arc<UpperHashes>,
}

impl std::fmt::Debug for FileStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStore")
            .field("path", &self.path)
            .finish()
    }
}

impl FileStore {
    /// Opens the log in `dir`, creating the directory and an empty log if
    /// there is none.
    pub fn open(dir: &Path) -> Result<FileStore, Error> {
        FileStore::open_with(dir, None)
    }

    /// Like [`FileStore::open`], on the storage backend `backend` makes (for
    /// fault injection); `None` is the plain file.
    pub fn open_with(dir: &Path, backend: Option<&BackendFactory>) -> Result<FileStore, Error> {
        std::fs::create_dir_all(dir).map_err(|e| storage(redb::StorageError::Io(e)))?;
        let path = dir.join(DB_FILE);
        let store = guarded("opening", || {
            let db = match backend {
                None => builder().create(&path).map_err(storage)?,
                Some(f) => {
                    let b = (f.0)(&path).map_err(|e| storage(redb::StorageError::Io(e)))?;
                    builder()
                        .create_with_backend(BoxedBackend(b))
                        .map_err(storage)?
                }
            };
            let mut store = FileStore::new(db, path.clone(), false, backend.cloned());
            store.init()?;
            if store.format()? < 2 {
                store.migrate_v1()?;
            }
            if store.format()? < 3 {
                store.migrate_v2()?;
            }
            if store.format()? < 4 {
                store.migrate_v3()?;
            }
            store.load_segments(true)?;
            store.open_derived(true)?;
            Ok(store)
        })?;
        // The file's name must be as durable as the commits made to it:
        // fsync the directory that holds it (POSIX makes no promise for a
        // new name otherwise), at every open, not only the one that
        // created it: a seal's rename whose fsync failed is made durable
        // here before anything is committed to the file it named.
        sync_dir(dir)?;
        Ok(store)
    }

    /// Opens a read-only view of the log in `dir` that never writes the data
    /// file, for serving reads while storage fails ([`crate::overlay`]). It
    /// sees the last durable commit. Log entries are never committed through
    /// it; [`FileStore::put_aux`] refuses.
    pub fn open_fallback(dir: &Path, backend: Option<&BackendFactory>) -> Result<FileStore, Error> {
        let path = dir.join(DB_FILE);
        let io = |e| storage(redb::StorageError::Io(e));
        let base = match backend {
            None => crate::overlay::Base::open_file(&path).map_err(io)?,
            Some(f) => crate::overlay::Base::Backend((f.0)(&path).map_err(io)?),
        };
        let overlay = crate::overlay::Overlay::new(base).map_err(io)?;
        guarded("opening a read-only view", || {
            let db = builder().create_with_backend(overlay).map_err(storage)?;
            let mut store = FileStore::new(db, path.clone(), true, None);
            store.init()?;
            store.load_segments(false)?;
            Ok(store)
        })
    }

    fn new(
        db: Database,
        path: PathBuf,
        fallback: bool,
        backend: Option<BackendFactory>,
    ) -> FileStore {
        FileStore {
            files: std::sync::RwLock::new(Arc::new(Files {
                live: Arc::new(ClosingDb::new(db)),
                derived: None,
                sealed: Vec::new(),
                live_from: Bounds::default(),
            })),
            path,
            backend,
            seal_every: std::sync::atomic::AtomicU64::new(SEGMENT_ENTRIES),
            seal_retry_at: std::sync::atomic::AtomicU64::new(0),
            writing: Mutex::new(()),
            derived_failed: std::sync::atomic::AtomicBool::new(false),
            fallback,
            lease: std::sync::Arc::new(()),
            upper: Arc::new(UpperHashes::new()),
        }
    }

    /// Whether this is a read-only view opened while storage fails.
    pub fn is_fallback(&self) -> bool {
        self.fallback
    }

    /// How many [`FileSnapshot`]s of this store are alive.
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
    pub fn open_existing(dir: &Path) -> Result<FileStore, Error> {
        let path = dir.join(DB_FILE);
        if !path.is_file() {
            return Err(storage(redb::StorageError::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no ledger at {}", path.display()),
            ))));
        }
        guarded("opening", || {
            let db = builder().open(&path).map_err(storage)?;
            let mut store = FileStore::new(db, path.clone(), false, None);
            store.check_format()?;
            store.load_segments(false)?;
            store.open_derived(false)?;
            Ok(store)
        })
    }

    /// The path of the data file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn init(&self) -> Result<(), Error> {
        // A complete file is opened without a write transaction: a page
        // damaged so that redb panics inside one can make the transaction's
        // own clean-up panic again, which aborts the process instead of
        // becoming an error (a read transaction has no such clean-up).
        if self.is_complete()? {
            return self.check_format();
        }
        let txn = self.begin_durable()?;
        let fresh;
        {
            let mut meta = txn.open_table(META).map_err(storage)?;
            fresh = meta.get(FORMAT_KEY).map_err(storage)?.is_none();
            if fresh {
                meta.insert(FORMAT_KEY, FORMAT_VERSION.to_be_bytes().as_slice())
                    .map_err(storage)?;
                meta.insert(HEAD_KEY, Head::EMPTY.encode().as_slice())
                    .map_err(storage)?;
                txn.open_table(ENTRY_BUNDLES).map_err(storage)?;
            }
            txn.open_table(HASHES).map_err(storage)?;
            txn.open_table(AUX).map_err(storage)?;
        }
        if fresh || self.needs_aux()? {
            txn.commit().map_err(storage)?;
        } else {
            txn.abort().map_err(storage)?;
        }
        self.check_format()
    }

    /// The format version recorded in the data file.
    pub fn format(&self) -> Result<u32, Error> {
        let txn = self.live().begin_read().map_err(storage)?;
        let meta = txn.open_table(META).map_err(storage)?;
        read_format(&meta)
    }

    /// Moves a version-1 log's entries into bundles: [`MIGRATE_CHUNK`]
    /// entries per durable transaction, recording in `meta` where the next
    /// transaction starts, so a crash resumes where it stopped. Readers of
    /// the file keep seeing version 1 (format 1, `entries` untouched) until
    /// the last transaction drops `entries` and records format 2, so every
    /// state a crash can leave is a readable log. Head and stored hashes are
    /// not touched: the tree does not change. Entries are copied as found,
    /// each record keeping its index, so damage to a version-1 log is
    /// reported at the same index after migration.
    fn migrate_v1(&mut self) -> Result<(), Error> {
        let total = {
            let txn = self.live().begin_read().map_err(storage)?;
            let t = txn.open_table(ENTRIES).map_err(storage)?;
            t.len().map_err(storage)?
        };
        tracing::info!(
            entries = total,
            "migrating the data file from format 1 to 2 (entry bundles)"
        );
        let started = std::time::Instant::now();
        loop {
            let txn = self.begin_durable()?;
            let done;
            {
                let mut meta = txn.open_table(META).map_err(storage)?;
                let next = match meta.get(MIGRATE_KEY).map_err(storage)? {
                    Some(v) => u64::from_be_bytes(v.value().try_into().map_err(|_| {
                        Corruption::new(0, CorruptionKind::Malformed, "migration marker")
                    })?),
                    None => 0,
                };
                let entries = txn.open_table(ENTRIES).map_err(storage)?;
                let mut bundles = txn.open_table(ENTRY_BUNDLES).map_err(storage)?;
                // Whole bundles only: a transaction stops at a bundle
                // boundary, so no bundle is split across two of them.
                let mut writer = BundleWriter::default();
                let mut resume = None;
                for (copied, item) in entries.range(next..).map_err(storage)?.enumerate() {
                    let (k, v) = item.map_err(storage)?;
                    let index = k.value();
                    let key = bundle_of(index);
                    if copied as u64 >= MIGRATE_CHUNK && writer.key().is_some_and(|k| k != key) {
                        resume = Some(key * BUNDLE_SIZE);
                        break;
                    }
                    writer
                        .bundle(&mut bundles, key, |_| Ok(EntryBundle::empty(key)))?
                        .push_record(index, &[v.value()]);
                }
                writer.finish(&mut bundles)?;
                done = resume.is_none();
                drop(entries);
                if done {
                    meta.remove(MIGRATE_KEY).map_err(storage)?;
                    meta.insert(FORMAT_KEY, 2u32.to_be_bytes().as_slice())
                        .map_err(storage)?;
                } else if let Some(resume) = resume {
                    meta.insert(MIGRATE_KEY, resume.to_be_bytes().as_slice())
                        .map_err(storage)?;
                    tracing::info!(next = resume, of = total, "migrating");
                }
            }
            if done {
                txn.delete_table(ENTRIES).map_err(storage)?;
            }
            txn.commit().map_err(storage)?;
            if done {
                break;
            }
        }
        // Give the old rows' pages back to the file system (the file is
        // not shared yet: nothing else holds it while the store opens).
        let compacted = match Arc::get_mut(self.files.get_mut().unwrap_or_else(|p| p.into_inner()))
            .and_then(|f| Arc::get_mut(&mut f.live))
        {
            Some(db) => db.compact().map_err(storage)?,
            None => false,
        };
        tracing::info!(
            seconds = started.elapsed().as_secs_f64(),
            compacted,
            "migrated the data file to format 2"
        );
        Ok(())
    }

    /// Whether the file has its format record and every table.
    fn is_complete(&self) -> Result<bool, Error> {
        let txn = self.live().begin_read().map_err(storage)?;
        let has_format = match txn.open_table(META) {
            Ok(meta) => meta.get(FORMAT_KEY).map_err(storage)?.is_some(),
            Err(_) => false,
        };
        Ok(has_format && txn.open_table(HASHES).is_ok() && !self.needs_aux()?)
    }

    /// Drops format version 2's two lookup tables and their watermark, and
    /// records format 3, in one durable transaction: the lookups now live
    /// beside the file ([`crate::lookup`]) and are rebuilt there from the
    /// entries. Nothing hashed changes. The freed pages are reused by later
    /// commits.
    fn migrate_v2(&mut self) -> Result<(), Error> {
        let started = std::time::Instant::now();
        let txn = self.begin_durable()?;
        {
            let mut meta = txn.open_table(META).map_err(storage)?;
            meta.remove(V2_KEYS_THROUGH_KEY).map_err(storage)?;
            meta.insert(FORMAT_KEY, 3u32.to_be_bytes().as_slice())
                .map_err(storage)?;
        }
        txn.delete_table(V2_LEAF_INDEX).map_err(storage)?;
        txn.delete_table(V2_ENTRY_KEYS).map_err(storage)?;
        txn.commit().map_err(storage)?;
        tracing::info!(
            seconds = started.elapsed().as_secs_f64(),
            "upgraded the data file to format 3 (lookups kept beside it)"
        );
        Ok(())
    }

    /// Records format 4: nothing in the file changes, but from now on the
    /// log may continue past it in sealed segments (see
    /// [`FileStore::seal`]), which a build that reads format 3 would not
    /// see: it must refuse the file rather than read a shorter log.
    fn migrate_v3(&mut self) -> Result<(), Error> {
        let txn = self.begin_durable()?;
        {
            let mut meta = txn.open_table(META).map_err(storage)?;
            meta.insert(FORMAT_KEY, 4u32.to_be_bytes().as_slice())
                .map_err(storage)?;
        }
        txn.commit().map_err(storage)?;
        tracing::info!("upgraded the data file to format 4 (it may continue in sealed segments)");
        Ok(())
    }

    fn needs_aux(&self) -> Result<bool, Error> {
        let txn = self.live().begin_read().map_err(storage)?;
        Ok(txn.open_table(AUX).is_err())
    }

    /// A write transaction that commits durably ([`Durability::Immediate`])
    /// and with quick repair: every commit saves the allocator state, so a
    /// process that ends without closing the file (killed, or exiting while
    /// a background check still holds it) is reopened without redb's full
    /// repair, which reads the whole file. redb uses quick repair only when
    /// the last commit before the unclean end had it, so every write path
    /// takes its transaction here.
    fn begin_durable(&self) -> Result<redb::WriteTransaction, Error> {
        begin_durable(&self.live())
    }

    /// Saves derived state under `name`, durably, in its own transaction.
    pub fn put_aux(&self, name: &str, bytes: &[u8]) -> Result<(), Error> {
        self.put_aux_all(&[(name, bytes)])
    }

    /// Saves several records of derived state, durably, in one transaction:
    /// all of them or none. They go to [`DERIVED_FILE`], whose transactions
    /// are its own: a commit of the log never waits for a save. (A record
    /// that stays in the data file, [`stays_in_data_file`], goes there in
    /// a transaction of its own.)
    pub fn put_aux_all(&self, records: &[(&str, &[u8])]) -> Result<(), Error> {
        self.refuse_if_fallback()?;
        let (kept, derived): (Vec<_>, Vec<_>) = records
            .iter()
            .partition(|(name, _)| stays_in_data_file(name));
        if !kept.is_empty() {
            let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
            put_all(&self.live(), &kept)?;
        }
        if derived.is_empty() {
            return Ok(());
        }
        if self
            .derived_failed
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            self.reopen_derived();
        }
        // Only the derived file is held through the save: a commit that
        // fails meanwhile can reopen the data file.
        let Some(db) = self.files().derived.clone() else {
            let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
            return put_all(&self.live(), &derived);
        };
        let saved = put_all(&db, &derived);
        if saved.is_err() {
            // redb refuses every later write to a file after a failed one:
            // the next save opens it again.
            self.derived_failed
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        saved
    }

    /// After a failed save: opens [`DERIVED_FILE`] again, once every
    /// reader of the failed handle is done (until then saves go on failing
    /// and the next one tries again).
    fn reopen_derived(&self) {
        let mut files = self.files.write().unwrap_or_else(|p| p.into_inner());
        let Some(old) = files.derived.clone() else {
            return;
        };
        let (live, sealed, live_from) = (
            Arc::clone(&files.live),
            files.sealed.clone(),
            files.live_from,
        );
        let with = |derived| {
            Arc::new(Files {
                live: Arc::clone(&live),
                derived,
                sealed: sealed.clone(),
                live_from,
            })
        };
        *files = with(None);
        let weak = Arc::downgrade(&old);
        drop(old);
        let derived = match open_derived_file(&self.path.with_file_name(DERIVED_FILE)) {
            Ok(db) => {
                self.derived_failed
                    .store(false, std::sync::atomic::Ordering::Relaxed);
                tracing::info!(file = DERIVED_FILE, "reopened after a failed save");
                Some(Arc::new(ClosingDb::new(db)))
            }
            Err(e) => {
                tracing::warn!(error = %e, file = DERIVED_FILE, "cannot reopen after a failed save yet; the next save tries again");
                weak.upgrade()
            }
        };
        *files = with(derived);
    }

    /// Derived state saved under `name`, if any.
    pub fn get_aux(&self, name: &str) -> Result<Option<Vec<u8>>, Error> {
        let files = self.files();
        let txn = if stays_in_data_file(name) {
            files.live.begin_read().map_err(storage)?
        } else {
            files.derived_read()?
        };
        let t = match txn.open_table(AUX) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(storage(e)),
        };
        Ok(t.get(name).map_err(storage)?.map(|v| v.value().to_vec()))
    }

    /// Opens [`DERIVED_FILE`]. The writer's open (`create`) creates it and
    /// moves into it the records an earlier build kept in the data file's
    /// own [`AUX`] table ([`FileStore::move_derived`]); a read-only open
    /// uses it only where that table holds none (a writer of this build has
    /// moved them), and reads the data file's table otherwise, or when the
    /// file cannot be opened.
    fn open_derived(&mut self, create: bool) -> Result<(), Error> {
        let path = self.path.with_file_name(DERIVED_FILE);
        let in_data_file = {
            let txn = self.live().begin_read().map_err(storage)?;
            match txn.open_table(AUX) {
                Ok(t) => t
                    .iter()
                    .map_err(storage)?
                    .any(|kv| kv.is_ok_and(|(k, _)| !stays_in_data_file(k.value()))),
                Err(redb::TableError::TableDoesNotExist(_)) => false,
                Err(e) => return Err(storage(e)),
            }
        };
        let db = if create {
            let db = open_derived_file(&path)?;
            // Its name is durable before anything is moved into it.
            sync_dir(path.parent().unwrap_or(Path::new(".")))?;
            db
        } else if !in_data_file && path.is_file() {
            match guarded("opening derived state", || {
                derived_builder().open(&path).map_err(storage)
            }) {
                Ok(db) => db,
                Err(e) => {
                    tracing::warn!(error = %e, file = %path.display(), "cannot open the saved derived state; reading none");
                    return Ok(());
                }
            }
        } else {
            return Ok(());
        };
        let db = ClosingDb::new(db);
        if in_data_file {
            self.move_derived(&db)?;
        }
        self.files_mut()?.derived = Some(Arc::new(db));
        Ok(())
    }

    /// Moves the derived state an earlier build kept in the data file into
    /// `derived`, in place of what `derived` holds (only an earlier build
    /// writes the data file's table, so its records are the newer ones):
    /// copied, then removed from the data file, each step durable. A move
    /// cut short between the two is made again at the next open. Records
    /// that stay in the data file ([`stays_in_data_file`]) are left there.
    fn move_derived(&self, derived: &Database) -> Result<(), Error> {
        let live = self.live();
        let read = live.begin_read().map_err(storage)?;
        let from = read.open_table(AUX).map_err(storage)?;
        let write = begin_durable(derived)?;
        let mut moved = 0usize;
        write.delete_table(AUX).map_err(storage)?;
        {
            let mut to = write.open_table(AUX).map_err(storage)?;
            for kv in from.iter().map_err(storage)? {
                let (k, v) = kv.map_err(storage)?;
                if !stays_in_data_file(k.value()) {
                    to.insert(k.value(), v.value()).map_err(storage)?;
                    moved += 1;
                }
            }
        }
        write.commit().map_err(storage)?;
        drop(from);
        drop(read);
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let txn = begin_durable(&live)?;
        txn.open_table(AUX)
            .map_err(storage)?
            .retain(|k, _| stays_in_data_file(k))
            .map_err(storage)?;
        txn.commit().map_err(storage)?;
        tracing::info!(
            records = moved,
            file = DERIVED_FILE,
            "moved the saved derived state out of the data file"
        );
        Ok(())
    }

    fn check_format(&self) -> Result<(), Error> {
        let found = self.format()?;
        if found > FORMAT_VERSION {
            return Err(Error::NewerFormat {
                found,
                supported: FORMAT_VERSION,
            });
        }
        if found < OLDEST_FORMAT {
            return Err(Corruption::new(
                0,
                CorruptionKind::Malformed,
                format!("format_version {found} was never written by any build"),
            )
            .into());
        }
        Ok(())
    }

    /// A consistent read snapshot.
    pub fn snapshot(&self) -> Result<FileSnapshot, Error> {
        let files = self.files();
        let txn = files.live.begin_read().map_err(storage)?;
        FileSnapshot::new(
            txn,
            std::sync::Arc::clone(&self.lease),
            Arc::clone(&self.upper),
            files,
        )
    }

    /// Writes `rows` and `new_head` in one durable transaction. The caller
    /// guarantees the rows are contiguous from the current head. The bundle
    /// the head is in is read, extended and rewritten; every bundle the batch
    /// fills is stored compressed.
    pub(crate) fn commit(
        &self,
        rows: &[Row<'_>],
        private: &crate::private::Batch,
        new_head: &Head,
    ) -> Result<(), Error> {
        self.refuse_if_fallback()?;
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let txn = self.begin_durable()?;
        if !private.rows.is_empty() {
            let mut t = txn.open_table(PRIVATE_PARTS).map_err(storage)?;
            for (index, row) in &private.rows {
                t.insert(*index, row.as_slice()).map_err(storage)?;
            }
        }
        if !private.redacted.is_empty() {
            let mut t = txn.open_table(REDACTED_PARTS).map_err(storage)?;
            for &(index, part) in &private.redacted {
                t.insert((index, part), 0u8).map_err(storage)?;
            }
        }
        if let Some(next) = private.next_slot {
            let mut meta = txn.open_table(META).map_err(storage)?;
            meta.insert(PRIVATE_NEXT_SLOT_KEY, next.to_be_bytes().as_slice())
                .map_err(storage)?;
        }
        {
            let mut bundles = txn.open_table(ENTRY_BUNDLES).map_err(storage)?;
            let mut hashes = txn.open_table(HASHES).map_err(storage)?;
            let mut meta = txn.open_table(META).map_err(storage)?;
            let mut writer = BundleWriter::default();
            for row in rows {
                let key = bundle_of(row.index);
                writer
                    .bundle(&mut bundles, key, |t| {
                        if row.index % BUNDLE_SIZE == 0 {
                            return Ok(EntryBundle::empty(key));
                        }
                        // The head is inside this bundle: extend what is stored.
                        let v = t.get(key).map_err(storage)?.ok_or_else(|| {
                            Corruption::new(
                                key * BUNDLE_SIZE,
                                CorruptionKind::MissingEntry,
                                "the bundle the head is in is absent",
                            )
                        })?;
                        Ok(EntryBundle::decode(key, v.value())?)
                    })?
                    .push(row.index, &row.chain.0, row.leaf);
                for (k, h) in row.hashes.iter().enumerate() {
                    hashes
                        .insert(row.first_hash_index + k as u64, h.0)
                        .map_err(storage)?;
                }
            }
            writer.finish(&mut bundles)?;
            meta.insert(HEAD_KEY, new_head.encode().as_slice())
                .map_err(storage)?;
        }
        txn.commit().map_err(storage)?;
        self.seal_if_due(new_head)
    }
}

/// A write transaction on `db` that commits durably
/// ([`Durability::Immediate`]) and with quick repair (see
/// [`FileStore::begin_durable`]).
fn begin_durable(db: &Database) -> Result<redb::WriteTransaction, Error> {
    let mut txn = db.begin_write().map_err(storage)?;
    txn.set_durability(Durability::Immediate).map_err(storage)?;
    txn.set_quick_repair(true);
    Ok(txn)
}

/// Where each kind of row of a log of `size` entries ends: a segment sealed
/// at that size holds the rows below these bounds, the files after it the
/// rows from them on.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Bounds {
    /// Entries, to the last whole bundle: the bundle the head is in
    /// continues in the next file.
    entries: u64,
    /// Stored hashes: every one the first `size` leaves wrote.
    hashes: u64,
    /// Private parts (rows keyed by entry index).
    private: u64,
}

impl Bounds {
    fn at(size: u64) -> Bounds {
        Bounds {
            entries: size / BUNDLE_SIZE * BUNDLE_SIZE,
            hashes: crate::merkle::stored_hash_count(size),
            private: size,
        }
    }
}

/// A sealed segment: a former data file no commit writes again, holding the
/// rows between two bounds.
struct Segment {
    /// The log's size when it was sealed.
    sealed_at: u64,
    from: Bounds,
    to: Bounds,
    path: PathBuf,
    /// Opened on first read.
    db: OnceLock<Arc<ClosingDb>>,
    /// In the process that sealed it: the data file's own handle, read
    /// through while it is open (snapshots from before the seal hold it),
    /// and the signal that it has closed.
    handover: Mutex<Option<(std::sync::Weak<ClosingDb>, Arc<CloseSignal>)>>,
}

impl Segment {
    fn new(sealed_at: u64, from: Bounds, path: PathBuf) -> Segment {
        Segment {
            sealed_at,
            from,
            to: Bounds::at(sealed_at),
            path,
            db: OnceLock::new(),
            handover: Mutex::new(None),
        }
    }

    /// The segment's database. In the process that sealed it, the data
    /// file's handle while that is still open; otherwise (and once it has
    /// closed) the file opened read-only, over [`crate::overlay::Overlay`],
    /// so that nothing (not even redb's repair of a file whose process was
    /// killed) writes it, and checked to hold the log up to the size the
    /// data file says it was sealed at.
    fn db(&self) -> Result<Arc<ClosingDb>, Error> {
        if let Some(db) = self.db.get() {
            return Ok(Arc::clone(db));
        }
        {
            let mut handover = self.handover.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((handle, closed)) = handover.as_ref() {
                if let Some(db) = handle.upgrade() {
                    return Ok(db);
                }
                closed.wait();
                *handover = None;
            }
        }
        opened(&self.db, || {
            let io = |e| storage(redb::StorageError::Io(e));
            let base = crate::overlay::Base::open_file(&self.path).map_err(io)?;
            let overlay = crate::overlay::Overlay::new(base).map_err(io)?;
            let db = guarded("opening a sealed segment", || {
                let mut b = Database::builder();
                b.set_cache_size(SEGMENT_CACHE);
                let db = b.create_with_backend(overlay).map_err(storage)?;
                Ok(Arc::new(ClosingDb::new(db)))
            })?;
            let txn = db.begin_read().map_err(storage)?;
            let meta = txn.open_table(META).map_err(storage)?;
            let size = meta
                .get(HEAD_KEY)
                .map_err(storage)?
                .and_then(|v| Head::decode(v.value()))
                .map(|h| h.size);
            if size != Some(self.sealed_at) {
                return Err(Corruption::new(
                    self.from.entries,
                    CorruptionKind::Malformed,
                    format!(
                        "the sealed segment {} holds a log of size {size:?}, not the {} it was sealed at",
                        self.path.display(),
                        self.sealed_at
                    ),
                )
                .into());
            }
            drop(meta);
            drop(txn);
            Ok(db)
        })
        .map(Arc::clone)
    }
}

/// The data file and the segments it continues, as one snapshot sees them.
struct Files {
    live: Arc<ClosingDb>,
    /// [`DERIVED_FILE`]; `None` where it is not opened (a read-only open of
    /// a directory a writer of this build has not opened yet, or a view
    /// while storage fails): derived state is then read from the data
    /// file's own [`AUX`] table.
    derived: Option<Arc<ClosingDb>>,
    /// In order; each one's `from` is the previous one's `to`.
    sealed: Vec<Arc<Segment>>,
    /// Where the data file's rows start: the last segment's `to`.
    live_from: Bounds,
}

impl Files {
    /// A read transaction on where derived state is kept: [`DERIVED_FILE`],
    /// or the data file where that is not open.
    fn derived_read(&self) -> Result<ReadTransaction, Error> {
        match &self.derived {
            Some(db) => db.begin_read(),
            None => self.live.begin_read(),
        }
        .map_err(storage)
    }

    /// The sealed segment that holds the row `index` of the kind `of`
    /// picks, or `None` for the data file.
    fn segment(&self, index: u64, of: fn(&Bounds) -> u64) -> Option<usize> {
        if index >= of(&self.live_from) {
            return None;
        }
        Some(self.sealed.partition_point(|s| of(&s.to) <= index))
    }
}

/// The bytes of the data file at `data_file`, of the sealed segments
/// beside it and of [`DERIVED_FILE`]; `None` when there is no data file.
pub fn disk_bytes(data_file: &Path) -> Option<u64> {
    let live = std::fs::metadata(data_file).ok()?.len()
        + std::fs::metadata(data_file.with_file_name(DERIVED_FILE)).map_or(0, |m| m.len());
    let dir = data_file
        .parent()
        .unwrap_or(Path::new("."))
        .join(SEGMENTS_DIR);
    let sealed: u64 = std::fs::read_dir(dir)
        .map(|list| {
            list.filter_map(|f| f.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    Some(live + sealed)
}

fn segment_name(sealed_at: u64) -> String {
    format!("{sealed_at:020}.redb")
}

fn encode_segments(sizes: &[u64]) -> Vec<u8> {
    sizes.iter().flat_map(|s| s.to_be_bytes()).collect()
}

fn decode_segments(bytes: &[u8], head: u64) -> Result<Vec<u64>, Error> {
    let bad = || -> Error {
        Corruption::new(0, CorruptionKind::Malformed, "the list of sealed segments").into()
    };
    if !bytes.len().is_multiple_of(8) {
        return Err(bad());
    }
    let sizes: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|c| u64::from_be_bytes(c.try_into().unwrap_or_default()))
        .collect();
    let increasing = sizes.windows(2).all(|w| w[0] < w[1]);
    if !increasing || sizes.first() == Some(&0) || sizes.last().is_some_and(|&l| l > head) {
        return Err(bad());
    }
    Ok(sizes)
}

/// Whether `a` and `b` name one file (a hard link of it): the only kind of
/// file a seal leaves in `segments/` unlisted.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

fn io_error(e: std::io::Error) -> Error {
    storage(redb::StorageError::Io(e))
}

impl FileStore {
    fn files(&self) -> Arc<Files> {
        Arc::clone(&self.files.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The files, while opening: no snapshot shares them yet.
    fn files_mut(&mut self) -> Result<&mut Files, Error> {
        Arc::get_mut(self.files.get_mut().unwrap_or_else(|p| p.into_inner())).ok_or_else(|| {
            Corruption::new(
                0,
                CorruptionKind::Malformed,
                "the data file is already shared",
            )
            .into()
        })
    }

    fn live(&self) -> Arc<ClosingDb> {
        Arc::clone(&self.files().live)
    }

    /// How many entries the data file takes before it is sealed into a
    /// segment and a new one started; 0 never seals.
    pub fn set_segment_entries(&self, n: u64) {
        self.seal_every
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Reads the list of sealed segments from the data file and checks that
    /// each is there. `tidy` (the writer's open) also removes what a seal
    /// that did not finish left: a next data file never renamed, a
    /// segment the data file does not list.
    fn load_segments(&mut self, tidy: bool) -> Result<(), Error> {
        let dir = self.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let sizes = {
            let txn = self.live().begin_read().map_err(storage)?;
            let meta = txn.open_table(META).map_err(storage)?;
            let head = meta
                .get(HEAD_KEY)
                .map_err(storage)?
                .and_then(|v| Head::decode(v.value()))
                .ok_or_else(|| Corruption::new(0, CorruptionKind::Malformed, "head record"))?;
            match meta.get(SEGMENTS_KEY).map_err(storage)? {
                Some(v) => decode_segments(v.value(), head.size)?,
                None => Vec::new(),
            }
        };
        let segdir = dir.join(SEGMENTS_DIR);
        if tidy {
            match std::fs::remove_file(dir.join(NEXT_FILE)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_error(e)),
                _ => {}
            }
            if let Ok(list) = std::fs::read_dir(&segdir) {
                let listed: std::collections::HashSet<String> =
                    sizes.iter().map(|&s| segment_name(s)).collect();
                for f in list {
                    let f = f.map_err(io_error)?;
                    let name = f.file_name().to_string_lossy().into_owned();
                    if listed.contains(&name) {
                        continue;
                    }
                    // A seal cut short before its rename leaves the data
                    // file linked here; anything else unlisted may hold
                    // entries (a data file restored from an older copy, a
                    // list changed by hand) and is never removed.
                    if !same_file(&f.path(), &self.path) {
                        return Err(Corruption::new(
                            0,
                            CorruptionKind::Malformed,
                            format!(
                                "{} is not a segment the data file lists: move it away only if it does not belong to this log",
                                f.path().display()
                            ),
                        )
                        .into());
                    }
                    tracing::warn!(file = %f.path().display(), "removing the link a seal cut short left");
                    std::fs::remove_file(f.path()).map_err(io_error)?;
                }
            }
        }
        let mut sealed = Vec::with_capacity(sizes.len());
        let mut from = Bounds::default();
        for size in sizes {
            let to = Bounds::at(size);
            let path = segdir.join(segment_name(size));
            if !path.is_file() {
                return Err(Corruption::new(
                    from.entries,
                    CorruptionKind::MissingEntry,
                    format!("the sealed segment {} is missing", path.display()),
                )
                .into());
            }
            sealed.push(Arc::new(Segment::new(size, from, path)));
            from = to;
        }
        let files = self.files_mut()?;
        files.sealed = sealed;
        files.live_from = from;
        Ok(())
    }

    /// Seals the data file into a segment once it holds the configured
    /// number of entries (after `head`'s commit). A seal that fails before
    /// the new data file takes the old one's name changes nothing and is
    /// tried again later; one that fails after it is a storage failure.
    fn seal_if_due(&self, head: &Head) -> Result<(), Error> {
        use std::sync::atomic::Ordering;
        let every = self.seal_every.load(Ordering::Relaxed);
        if every == 0 || self.fallback {
            return Ok(());
        }
        let files = self.files();
        if head.size - files.live_from.private < every
            || head.size < self.seal_retry_at.load(Ordering::Relaxed)
        {
            return Ok(());
        }
        let started = std::time::Instant::now();
        match self.seal(&files, head) {
            Ok(()) => {
                tracing::info!(
                    size = head.size,
                    segments = files.sealed.len() + 1,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "sealed the data file into a segment; a new data file continues the log"
                );
                Ok(())
            }
            Err(SealError::Before(e)) => {
                self.seal_retry_at
                    .store(head.size + every / 16 + 1, Ordering::Relaxed);
                tracing::error!(error = %e, size = head.size, "could not seal the data file; it keeps taking entries and the seal is tried again");
                Ok(())
            }
            Err(SealError::After(e)) => Err(e),
        }
    }

    /// Seals the data file at `head`: a new data file gets what the log
    /// carries on with (the head and the rest of `meta`, the bundle the
    /// head is in, the list of redactions, and the list of
    /// segments with this one added); the old file is linked into
    /// [`SEGMENTS_DIR`]; the new one is renamed over it. Until that rename
    /// the old file is the log (a crash leaves it, and the writer's open
    /// removes the rest); from it on, the new one is.
    fn seal(&self, files: &Arc<Files>, head: &Head) -> Result<(), SealError> {
        let dir = self.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let next = dir.join(NEXT_FILE);
        let segdir = dir.join(SEGMENTS_DIR);
        let linked = segdir.join(segment_name(head.size));
        // Until the rename, a failure changes nothing the log reads: what
        // was made for the seal is removed (it would hold tens of MB, or
        // count the data file twice) and the seal is tried again later.
        let undo = |e: Error| {
            let _ = std::fs::remove_file(&next);
            if same_file(&linked, &self.path) {
                let _ = std::fs::remove_file(&linked);
            }
            SealError::Before(e)
        };
        let db = (|| {
            match std::fs::remove_file(&next) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_error(e)),
                _ => {}
            }
            let db = match &self.backend {
                None => builder().create(&next).map_err(storage)?,
                Some(f) => builder()
                    .create_with_backend(BoxedBackend((f.0)(&next).map_err(io_error)?))
                    .map_err(storage)?,
            };
            self.carry_over(&files.live, &db, files, head)?;
            if !segdir.is_dir() {
                std::fs::create_dir_all(&segdir).map_err(io_error)?;
                sync_dir(&dir)?;
            }
            if same_file(&linked, &self.path) {
                std::fs::remove_file(&linked).map_err(io_error)?;
            }
            std::fs::hard_link(&self.path, &linked).map_err(io_error)?;
            sync_dir(&segdir)?;
            Ok(db)
        })()
        .map_err(undo)?;
        let renamed = std::fs::rename(&next, &self.path).map_err(io_error);
        // A rename that reports an error may still have happened (a network
        // file system that lost the reply): the new file is the log if it
        // is no longer under its old name.
        if let Err(e) = renamed {
            if next.exists() {
                return Err(undo(e));
            }
        }
        // From here on the new file is the log: nothing may be written to
        // the old one, whatever happens next.
        let mut sealed = files.sealed.clone();
        let segment = Segment::new(head.size, files.live_from, linked);
        *segment.handover.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((Arc::downgrade(&files.live), Arc::clone(&files.live.1)));
        sealed.push(Arc::new(segment));
        *self.files.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Files {
            live: Arc::new(ClosingDb::new(db)),
            derived: files.derived.clone(),
            sealed,
            live_from: Bounds::at(head.size),
        });
        sync_dir(&dir).map_err(SealError::After)
    }

    /// Writes into `next`, in one durable transaction, what the log carries
    /// on with from `live` at `head` (see [`FileStore::seal`]).
    fn carry_over(
        &self,
        live: &Database,
        next: &Database,
        files: &Files,
        head: &Head,
    ) -> Result<(), Error> {
        let read = live.begin_read().map_err(storage)?;
        let write = begin_durable(next)?;
        {
            let from = read.open_table(META).map_err(storage)?;
            let mut to = write.open_table(META).map_err(storage)?;
            for kv in from.iter().map_err(storage)? {
                let (k, v) = kv.map_err(storage)?;
                to.insert(k.value(), v.value()).map_err(storage)?;
            }
            let mut sizes: Vec<u64> = files.sealed.iter().map(|s| s.sealed_at).collect();
            sizes.push(head.size);
            to.insert(SEGMENTS_KEY, encode_segments(&sizes).as_slice())
                .map_err(storage)?;
            to.insert(FORMAT_KEY, FORMAT_VERSION.to_be_bytes().as_slice())
                .map_err(storage)?;
            let stored = to
                .get(HEAD_KEY)
                .map_err(storage)?
                .and_then(|v| Head::decode(v.value()));
            if stored.as_ref() != Some(head) {
                return Err(Corruption::new(
                    head.size,
                    CorruptionKind::Malformed,
                    "the head changed while the data file was sealed",
                )
                .into());
            }
        }
        {
            let mut to = write.open_table(ENTRY_BUNDLES).map_err(storage)?;
            if !head.size.is_multiple_of(BUNDLE_SIZE) {
                let key = bundle_of(head.size);
                let from = read.open_table(ENTRY_BUNDLES).map_err(storage)?;
                let v = from.get(key).map_err(storage)?.ok_or_else(|| {
                    Corruption::new(
                        key * BUNDLE_SIZE,
                        CorruptionKind::MissingEntry,
                        "the bundle the head is in is absent",
                    )
                })?;
                to.insert(key, v.value()).map_err(storage)?;
            }
        }
        write.open_table(HASHES).map_err(storage)?;
        // Derived state is in its own file, which a seal leaves alone; the
        // data file's table holds only what stays in it.
        {
            let mut to = write.open_table(AUX).map_err(storage)?;
            if let Ok(from) = read.open_table(AUX) {
                for kv in from.iter().map_err(storage)? {
                    let (k, v) = kv.map_err(storage)?;
                    to.insert(k.value(), v.value()).map_err(storage)?;
                }
            }
        }
        match read.open_table(REDACTED_PARTS) {
            Ok(from) => {
                let mut to = write.open_table(REDACTED_PARTS).map_err(storage)?;
                for kv in from.iter().map_err(storage)? {
                    let (k, v) = kv.map_err(storage)?;
                    to.insert(k.value(), v.value()).map_err(storage)?;
                }
            }
            Err(redb::TableError::TableDoesNotExist(_)) => {}
            Err(e) => return Err(storage(e)),
        }
        write.commit().map_err(storage)
    }
}

/// Where a seal failed: before the new data file took the old one's name
/// (nothing changed), or after (the new file is the log).
enum SealError {
    Before(Error),
    After(Error),
}

type BundleTable<'t> = redb::Table<'t, u64, &'static [u8]>;

/// Gathers records into bundles in index order and writes each bundle
/// once, when a record for the next bundle arrives or at the end: the step
/// the commit and the migration share.
#[derive(Default)]
struct BundleWriter {
    current: Option<EntryBundle>,
}

impl BundleWriter {
    /// The key of the bundle being gathered, if any.
    fn key(&self) -> Option<u64> {
        self.current.as_ref().map(|b| b.key())
    }

    /// The bundle `key` to add records to. When it is not the one being
    /// gathered, that one is written and `start` makes the new one.
    fn bundle(
        &mut self,
        t: &mut BundleTable<'_>,
        key: u64,
        start: impl FnOnce(&BundleTable<'_>) -> Result<EntryBundle, Error>,
    ) -> Result<&mut EntryBundle, Error> {
        if self.key() != Some(key) {
            self.finish(t)?;
            self.current = Some(start(t)?);
        }
        Ok(self.current.get_or_insert_with(|| EntryBundle::empty(key)))
    }

    /// Writes the bundle being gathered, if any.
    fn finish(&mut self, t: &mut BundleTable<'_>) -> Result<(), Error> {
        if let Some(b) = self.current.take() {
            let value = b.encode().map_err(|e| storage(redb::StorageError::Io(e)))?;
            t.insert(b.key(), value.as_slice()).map_err(storage)?;
        }
        Ok(())
    }
}

fn read_format(meta: &impl ReadableTable<&'static str, &'static [u8]>) -> Result<u32, Error> {
    let v = meta
        .get(FORMAT_KEY)
        .map_err(storage)?
        .ok_or_else(|| Corruption::new(0, CorruptionKind::Malformed, "no format_version"))?;
    let bytes: [u8; 4] = v
        .value()
        .try_into()
        .map_err(|_| Corruption::new(0, CorruptionKind::Malformed, "format_version"))?;
    Ok(u32::from_be_bytes(bytes))
}

/// The database, closed under [`guarded`]'s rule: redb's `Drop` commits
/// its allocator state, and on a tampered file that can panic ("index out
/// of bounds" in the page bitmap, found by `api/tests/tamper_trials.rs`).
/// A tampered data file must never crash the process, so the close is
/// caught and logged.
struct ClosingDb(Option<Database>, Arc<CloseSignal>);

impl ClosingDb {
    fn new(db: Database) -> ClosingDb {
        ClosingDb(Some(db), Arc::default())
    }
}

/// Set once a [`ClosingDb`] has closed its file: redb's close writes the
/// file (its allocator state, a trim of free pages at the end, the header),
/// so a sealed file is opened again only after it.
#[derive(Default)]
struct CloseSignal {
    closed: Mutex<bool>,
    wake: std::sync::Condvar,
}

impl CloseSignal {
    fn set(&self) {
        *self.closed.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.wake.notify_all();
    }

    fn wait(&self) {
        let mut closed = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        while !*closed {
            closed = self.wake.wait(closed).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl std::ops::Deref for ClosingDb {
    type Target = Database;
    fn deref(&self) -> &Database {
        match &self.0 {
            Some(db) => db,
            // Taken only in `drop`.
            None => unreachable!("database used after close"),
        }
    }
}

impl std::ops::DerefMut for ClosingDb {
    fn deref_mut(&mut self) -> &mut Database {
        match &mut self.0 {
            Some(db) => db,
            None => unreachable!("database used after close"),
        }
    }
}

impl Drop for ClosingDb {
    fn drop(&mut self) {
        let db = self.0.take();
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(db))).is_err() {
            tracing::error!("the storage engine panicked while closing the data file; it is likely damaged (run `ledger verify`)");
        }
        self.1.set();
    }
}

fn builder() -> redb::Builder {
    let mut b = Database::builder();
    // Enough cache for the hot right edge of the tree and recent entries; the
    // OS page cache serves the rest.
    b.set_cache_size(64 << 20);
    b
}

/// [`DERIVED_FILE`]'s settings: its records are read once per start and
/// written whole, so a small page cache is enough.
fn derived_builder() -> redb::Builder {
    let mut b = Database::builder();
    b.set_cache_size(4 << 20);
    b
}

type AuxTable = ReadOnlyTable<&'static str, &'static [u8]>;

/// Whether the record `name` of the [`AUX`] table stays in the data file
/// rather than in [`DERIVED_FILE`]: a fact about the directory that no
/// replay of the log gives back, which a seal carries over and a restore
/// moves with the data file ([`crate::private::NOT_KEPT_AUX`]).
pub(crate) fn stays_in_data_file(name: &str) -> bool {
    name == crate::private::NOT_KEPT_AUX
}

/// Writes `records` into the [`AUX`] table of `db` in one durable
/// transaction.
fn put_all(db: &Database, records: &[&(&str, &[u8])]) -> Result<(), Error> {
    let txn = begin_durable(db)?;
    {
        let mut t = txn.open_table(AUX).map_err(storage)?;
        for (name, bytes) in records {
            t.insert(*name, *bytes).map_err(storage)?;
        }
    }
    txn.commit().map_err(storage)
}

/// Opens (or creates) [`DERIVED_FILE`] at `path` for writing. One that
/// redb finds damaged is moved aside (to `derived.redb.damaged`) and a new
/// one created: derived state is rebuilt from the log and never needed to
/// open it. Any other failure (its lock held, an I/O error) is returned.
fn open_derived_file(path: &Path) -> Result<Database, Error> {
    let damaged = match guarded("opening derived state", || {
        Ok(derived_builder().create(path))
    }) {
        Ok(Ok(db)) => return Ok(db),
        Ok(Err(
            e @ (redb::DatabaseError::Storage(redb::StorageError::Corrupted(_))
            | redb::DatabaseError::UpgradeRequired(_)
            | redb::DatabaseError::RepairAborted),
        )) => storage(e),
        // Not a redb file at all (its header overwritten).
        Ok(Err(redb::DatabaseError::Storage(redb::StorageError::Io(e))))
            if e.kind() == std::io::ErrorKind::InvalidData =>
        {
            storage(redb::StorageError::Io(e))
        }
        Ok(Err(e)) => return Err(storage(e)),
        Err(panicked) => panicked,
    };
    let aside = path.with_file_name(format!("{DERIVED_FILE}.damaged"));
    tracing::error!(error = %damaged, moved_to = %aside.display(), "the saved derived state is damaged; moved aside, and rebuilt from the log");
    std::fs::rename(path, &aside).map_err(io_error)?;
    guarded("opening derived state", || {
        derived_builder().create(path).map_err(storage)
    })
}

/// A consistent, read-only view of the log.
pub struct FileSnapshot {
    txn: ReadTransaction,
    /// `entry_bundles` (format 2) or `entries` (format 1, before migration).
    /// Opened on first use, as are the other tables but `meta` and
    /// `hashes`: a proof needs only those two.
    entries: OnceLock<ReadOnlyTable<u64, &'static [u8]>>,
    /// Whether `entries` holds bundles.
    bundled: bool,
    /// The last bundle decoded, so that reading entries in order decodes
    /// each bundle once.
    recent: Mutex<Option<Arc<EntryBundle>>>,
    hashes: ReadOnlyTable<u64, [u8; 32]>,
    meta: ReadOnlyTable<&'static str, &'static [u8]>,
    /// Derived state's table, in a read transaction of its own (see
    /// [`Files::derived_read`]) opened on first use; `None` when there is no
    /// such table.
    aux: OnceLock<Option<(AuxTable, ReadTransaction)>>,
    upper: Arc<UpperHashes>,
    /// The data file and the sealed segments as of this snapshot.
    files: Arc<Files>,
    /// Each sealed segment's tables, opened on first read.
    segments: Vec<OnceLock<SegmentTables>>,
    _lease: std::sync::Arc<()>,
}

/// A read transaction on a sealed segment and the tables it holds.
struct SegmentTables {
    bundles: ReadOnlyTable<u64, &'static [u8]>,
    hashes: ReadOnlyTable<u64, [u8; 32]>,
    private: Option<ReadOnlyTable<u64, &'static [u8]>>,
    _txn: ReadTransaction,
    /// Dropped last.
    _db: Arc<ClosingDb>,
}

/// The value in `cell`, opening it with `open` the first time.
fn opened<T>(cell: &OnceLock<T>, open: impl FnOnce() -> Result<T, Error>) -> Result<&T, Error> {
    if let Some(t) = cell.get() {
        return Ok(t);
    }
    let t = open()?;
    Ok(cell.get_or_init(|| t))
}

impl FileSnapshot {
    fn new(
        txn: ReadTransaction,
        lease: std::sync::Arc<()>,
        upper: Arc<UpperHashes>,
        files: Arc<Files>,
    ) -> Result<FileSnapshot, Error> {
        let meta = txn.open_table(META).map_err(storage)?;
        let bundled = read_format(&meta)? >= 2;
        Ok(FileSnapshot {
            segments: files.sealed.iter().map(|_| OnceLock::new()).collect(),
            files,
            _lease: lease,
            entries: OnceLock::new(),
            bundled,
            recent: Mutex::new(None),
            hashes: txn.open_table(HASHES).map_err(storage)?,
            meta,
            aux: OnceLock::new(),
            upper,
            txn,
        })
    }

    /// The tables of sealed segment `i`.
    fn segment(&self, i: usize) -> Result<&SegmentTables, Error> {
        opened(&self.segments[i], || {
            let db = self.files.sealed[i].db()?;
            let txn = db.begin_read().map_err(storage)?;
            let private = match txn.open_table(PRIVATE_PARTS) {
                Ok(t) => Some(t),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(storage(e)),
            };
            Ok(SegmentTables {
                bundles: txn.open_table(ENTRY_BUNDLES).map_err(storage)?,
                hashes: txn.open_table(HASHES).map_err(storage)?,
                private,
                _txn: txn,
                _db: db,
            })
        })
    }

    /// The table that holds entry `index`'s bundle.
    fn bundles_for(&self, index: u64) -> Result<&ReadOnlyTable<u64, &'static [u8]>, Error> {
        match self.files.segment(index, |b| b.entries) {
            None => self.entries(),
            Some(i) => Ok(&self.segment(i)?.bundles),
        }
    }

    /// The table that holds the stored hash `index`.
    fn hashes_for(&self, index: u64) -> Result<&ReadOnlyTable<u64, [u8; 32]>, Error> {
        match self.files.segment(index, |b| b.hashes) {
            None => Ok(&self.hashes),
            Some(i) => Ok(&self.segment(i)?.hashes),
        }
    }

    fn entries(&self) -> Result<&ReadOnlyTable<u64, &'static [u8]>, Error> {
        opened(&self.entries, || {
            if self.bundled {
                self.txn.open_table(ENTRY_BUNDLES)
            } else {
                self.txn.open_table(ENTRIES)
            }
            .map_err(storage)
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
        if !self.bundled {
            return match self.entries()?.get(index).map_err(storage)? {
                None => Ok(None),
                Some(v) => Ok(Some(StoredEntry::decode(index, v.value())?)),
            };
        }
        let Some(bundle) = self.bundle(bundle_of(index))? else {
            return Ok(None);
        };
        match bundle.record(index) {
            None => Ok(None),
            Some(rec) => Ok(Some(StoredEntry::decode(index, rec)?)),
        }
    }

    /// The decoded bundle under `key`, if any (from the one-bundle cache
    /// when it was the last one read).
    fn bundle(&self, key: u64) -> Result<Option<Arc<EntryBundle>>, Error> {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = recent.as_ref().filter(|b| b.key() == key) {
            return Ok(Some(Arc::clone(b)));
        }
        let Some(v) = self
            .bundles_for(key * BUNDLE_SIZE)?
            .get(key)
            .map_err(storage)?
        else {
            return Ok(None);
        };
        let b = Arc::new(EntryBundle::decode(key, v.value())?);
        *recent = Some(Arc::clone(&b));
        Ok(Some(b))
    }

    /// Every stored record from entry `start` on, in index order: (index,
    /// chain hash ‖ leaf bytes). Each bundle is decoded once. A read error
    /// or a bundle that does not decode ends the iteration with its error.
    pub fn records_from(&self, start: u64) -> Result<FileRecords, Error> {
        let mut ranges = std::collections::VecDeque::new();
        if !self.bundled {
            ranges.push_back(self.entries()?.range(start..).map_err(storage)?);
        } else {
            let first = bundle_of(start);
            for (i, seg) in self.files.sealed.iter().enumerate() {
                let (lo, hi) = (seg.from.entries / BUNDLE_SIZE, seg.to.entries / BUNDLE_SIZE);
                if hi > first && hi > lo {
                    let t = &self.segment(i)?.bundles;
                    ranges.push_back(t.range(first.max(lo)..hi).map_err(storage)?);
                }
            }
            let lo = self.files.live_from.entries / BUNDLE_SIZE;
            ranges.push_back(self.entries()?.range(first.max(lo)..).map_err(storage)?);
        }
        Ok(FileRecords {
            ranges,
            bundled: self.bundled,
            start,
            pending: Vec::new().into_iter(),
            failed: false,
        })
    }

    /// Every stored hash from stored hash index `start` on, in index order.
    pub fn hashes_from(&self, start: u64) -> Result<FileHashes, Error> {
        let mut ranges = std::collections::VecDeque::new();
        for (i, seg) in self.files.sealed.iter().enumerate() {
            let (lo, hi) = (seg.from.hashes, seg.to.hashes);
            if hi > start && hi > lo {
                let t = &self.segment(i)?.hashes;
                ranges.push_back(t.range(start.max(lo)..hi).map_err(storage)?);
            }
        }
        let lo = self.files.live_from.hashes;
        ranges.push_back(self.hashes.range(start.max(lo)..).map_err(storage)?);
        Ok(FileHashes(ranges))
    }

    /// The stored hash at a stored hash index, if any.
    pub fn hash(&self, stored_index: u64) -> Result<Option<Hash>, Error> {
        let (level, _) = crate::merkle::split_stored_hash_index(stored_index);
        let keep = match self.upper.get(stored_index, level) {
            Ok(h) => return Ok(Some(Hash(h))),
            Err(keep) => keep,
        };
        let found = self
            .hashes_for(stored_index)?
            .get(stored_index)
            .map_err(storage)?
            .map(|v| v.value());
        if let (true, Some(h)) = (keep, found) {
            self.upper.keep(stored_index, level, h);
        }
        Ok(found.map(Hash))
    }

    /// The largest entry index present, if any.
    pub fn last_entry_index(&self) -> Result<Option<u64>, Error> {
        if let Some((k, v)) = self.entries()?.last().map_err(storage)? {
            if !self.bundled {
                return Ok(Some(k.value()));
            }
            return Ok(EntryBundle::decode(k.value(), v.value())?.last_index());
        }
        for i in (0..self.files.sealed.len()).rev() {
            let seg = &self.files.sealed[i];
            let t = &self.segment(i)?.bundles;
            let range = seg.from.entries / BUNDLE_SIZE..seg.to.entries / BUNDLE_SIZE;
            if let Some(kv) = t.range(range).map_err(storage)?.next_back() {
                let (k, v) = kv.map_err(storage)?;
                return Ok(EntryBundle::decode(k.value(), v.value())?.last_index());
            }
        }
        Ok(None)
    }

    /// The largest stored hash index present, if any.
    pub fn last_hash_index(&self) -> Result<Option<u64>, Error> {
        if let Some((k, _)) = self.hashes.last().map_err(storage)? {
            return Ok(Some(k.value()));
        }
        for i in (0..self.files.sealed.len()).rev() {
            let seg = &self.files.sealed[i];
            let t = &self.segment(i)?.hashes;
            if let Some(kv) = t
                .range(seg.from.hashes..seg.to.hashes)
                .map_err(storage)?
                .next_back()
            {
                return Ok(Some(kv.map_err(storage)?.0.value()));
            }
        }
        Ok(None)
    }

    /// How many key slots the rows of `private_parts` refer to.
    pub fn private_next_slot(&self) -> Result<u64, Error> {
        let meta = self.txn.open_table(META).map_err(storage)?;
        let v = meta.get(PRIVATE_NEXT_SLOT_KEY).map_err(storage)?;
        Ok(match v {
            Some(v) => {
                u64::from_be_bytes(v.value().try_into().map_err(|_| {
                    Corruption::new(0, CorruptionKind::Malformed, "private_next_slot")
                })?)
            }
            None => 0,
        })
    }

    /// Every redacted private part: (entry index, part).
    pub fn redacted_parts(&self) -> Result<Vec<(u64, u16)>, Error> {
        match self.txn.open_table(REDACTED_PARTS) {
            Ok(t) => t
                .iter()
                .map_err(storage)?
                .map(|r| r.map(|(k, _)| k.value()).map_err(storage))
                .collect(),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(Vec::new()),
            Err(e) => Err(storage(e)),
        }
    }

    /// Whether part `part` of entry `index` is redacted.
    pub fn is_redacted(&self, index: u64, part: u16) -> Result<bool, Error> {
        match self.txn.open_table(REDACTED_PARTS) {
            Ok(t) => Ok(t.get((index, part)).map_err(storage)?.is_some()),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(false),
            Err(e) => Err(storage(e)),
        }
    }

    /// The row of entry `index` in `private_parts`, if it has one
    /// ([`crate::private`]).
    pub fn private_row(&self, index: u64) -> Result<Option<Vec<u8>>, Error> {
        if let Some(i) = self.files.segment(index, |b| b.private) {
            return match &self.segment(i)?.private {
                Some(t) => Ok(t.get(index).map_err(storage)?.map(|v| v.value().to_vec())),
                None => Ok(None),
            };
        }
        match self.txn.open_table(PRIVATE_PARTS) {
            Ok(t) => Ok(t.get(index).map_err(storage)?.map(|v| v.value().to_vec())),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(storage(e)),
        }
    }

    /// Derived state's table as of this snapshot's first read of it.
    fn aux_table(&self) -> Result<Option<&AuxTable>, Error> {
        Ok(opened(&self.aux, || {
            let txn = self.files.derived_read()?;
            match txn.open_table(AUX) {
                Ok(t) => Ok(Some((t, txn))),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
                Err(e) => Err(storage(e)),
            }
        })?
        .as_ref()
        .map(|(t, _)| t))
    }

    /// Every record of derived state, by name (with those that stay in the
    /// data file).
    pub fn aux_all(&self) -> Result<Vec<(String, Vec<u8>)>, Error> {
        let mut all = Vec::new();
        let kept = match self.txn.open_table(AUX) {
            Ok(t) => Some(t),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(storage(e)),
        };
        for t in kept.as_ref().into_iter().chain(self.aux_table()?) {
            for r in t.iter().map_err(storage)? {
                let (k, v) = r.map_err(storage)?;
                if !all.iter().any(|(n, _): &(String, Vec<u8>)| n == k.value()) {
                    all.push((k.value().to_owned(), v.value().to_vec()));
                }
            }
        }
        all.sort();
        Ok(all)
    }

    /// Derived state saved under `name` (see [`FileStore::put_aux`]), as of
    /// this snapshot's first read of derived state (a record that stays in
    /// the data file: as of this snapshot).
    pub fn aux(&self, name: &str) -> Result<Option<Vec<u8>>, Error> {
        if stays_in_data_file(name) {
            return match self.txn.open_table(AUX) {
                Ok(t) => Ok(t.get(name).map_err(storage)?.map(|v| v.value().to_vec())),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
                Err(e) => Err(storage(e)),
            };
        }
        let Some(t) = self.aux_table()? else {
            return Ok(None);
        };
        Ok(t.get(name).map_err(storage)?.map(|v| v.value().to_vec()))
    }

    /// Reads the stored hashes at `indexes`; a missing one is
    /// [`CorruptionKind::MissingEntry`] naming the leaf that wrote it.
    pub fn hashes_at(&self, indexes: &[u64]) -> Result<Vec<Hash>, Error> {
        if let Some(run) = self.hashes_in_run(indexes)? {
            return Ok(run);
        }
        let mut keep = Vec::new();
        let read = indexes
            .iter()
            .zip(self.upper.get_many(indexes))
            .map(|(&i, kept)| {
                let worth_keeping = match kept {
                    Ok(h) => return Ok(Hash(h)),
                    Err(k) => k,
                };
                let h = self
                    .hashes_for(i)?
                    .get(i)
                    .map_err(storage)?
                    .map(|v| v.value())
                    .ok_or_else(|| missing_hash(i))?;
                if worth_keeping {
                    keep.push((i, crate::merkle::split_stored_hash_index(i).0, h));
                }
                Ok(Hash(h))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        if !keep.is_empty() {
            self.upper.keep_many(&keep);
        }
        Ok(read)
    }
}

impl FileSnapshot {
    /// The hashes at `indexes` read as one range of the table, when they
    /// are many and lie close together (a tile of leaf hashes: 256 leaves
    /// span 511 stored hashes): one walk down the tree instead of one per
    /// hash. `None` when a range would read much more than was asked.
    fn hashes_in_run(&self, indexes: &[u64]) -> Result<Option<Vec<Hash>>, Error> {
        const MIN_RUN: usize = 16;
        if indexes.len() < MIN_RUN {
            return Ok(None);
        }
        let (Some(&lo), Some(&hi)) = (indexes.iter().min(), indexes.iter().max()) else {
            return Ok(None);
        };
        let span = hi - lo + 1;
        if span > 4 * indexes.len() as u64 {
            return Ok(None);
        }
        let of = |b: &Bounds| b.hashes;
        if self.files.segment(lo, of) != self.files.segment(hi, of) {
            return Ok(None);
        }
        let mut window: Vec<Option<[u8; 32]>> = vec![None; span as usize];
        for kv in self.hashes_for(lo)?.range(lo..=hi).map_err(storage)? {
            let (k, v) = kv.map_err(storage)?;
            window[(k.value() - lo) as usize] = Some(v.value());
        }
        indexes
            .iter()
            .map(|&i| {
                window[(i - lo) as usize]
                    .map(Hash)
                    .ok_or_else(|| missing_hash(i))
            })
            .collect::<Result<Vec<_>, Error>>()
            .map(Some)
    }
}

/// Stored hashes in index order ([`FileSnapshot::hashes_from`]): the
/// sealed segments' ranges, then the data file's.
pub struct FileHashes(std::collections::VecDeque<redb::Range<'static, u64, [u8; 32]>>);

impl Iterator for FileHashes {
    type Item = Result<(u64, Hash), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let range = self.0.front_mut()?;
            match range.next() {
                Some(r) => {
                    return Some(
                        r.map(|(k, v)| (k.value(), Hash(v.value())))
                            .map_err(storage),
                    )
                }
                None => {
                    self.0.pop_front();
                }
            }
        }
    }
}

/// Stored records in index order ([`FileSnapshot::records_from`]).
pub struct FileRecords {
    /// The sealed segments' ranges, then the data file's.
    ranges: std::collections::VecDeque<redb::Range<'static, u64, &'static [u8]>>,
    bundled: bool,
    start: u64,
    pending: std::vec::IntoIter<(u64, Vec<u8>)>,
    failed: bool,
}

impl Iterator for FileRecords {
    type Item = Result<(u64, Vec<u8>), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.pending.next() {
                return Some(Ok(r));
            }
            if self.failed {
                return None;
            }
            let next = loop {
                let range = self.ranges.front_mut()?;
                match range.next() {
                    Some(r) => break r,
                    None => {
                        self.ranges.pop_front();
                    }
                }
            };
            let (k, v) = match next {
                Ok(kv) => kv,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(storage(e)));
                }
            };
            if !self.bundled {
                return Some(Ok((k.value(), v.value().to_vec())));
            }
            match EntryBundle::decode(k.value(), v.value()) {
                Ok(b) => {
                    let start = self.start;
                    self.pending = b
                        .records()
                        .filter(|(i, _)| *i >= start)
                        .map(|(i, r)| (i, r.to_vec()))
                        .collect::<Vec<_>>()
                        .into_iter();
                }
                Err(c) => {
                    self.failed = true;
                    return Some(Err(c.into()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_segments_round_trips_and_a_malformed_one_is_refused() {
        let sizes = [40, 81, 1 << 40];
        assert_eq!(
            decode_segments(&encode_segments(&sizes), 1 << 41).expect("decodes"),
            sizes
        );
        assert_eq!(decode_segments(&[], 0).expect("none"), Vec::<u64>::new());
        for (bytes, head) in [
            (vec![0u8; 7], 100),                // not whole sizes
            (encode_segments(&[40, 40]), 100),  // not increasing
            (encode_segments(&[81, 40]), 100),  // decreasing
            (encode_segments(&[0, 40]), 100),   // a segment of nothing
            (encode_segments(&[40, 101]), 100), // beyond the head
        ] {
            let err = decode_segments(&bytes, head).expect_err("refused");
            assert!(
                matches!(&err, Error::Corrupt(c) if c.kind == CorruptionKind::Malformed),
                "{err}"
            );
        }
    }

    #[test]
    fn each_row_is_found_in_the_segment_whose_bounds_hold_it() {
        let seg = |from: u64, to: u64| Arc::new(Segment::new(to, Bounds::at(from), PathBuf::new()));
        // Two seals inside one bundle (at 20 and 25) leave a segment with no
        // whole bundle of its own.
        let files = Files {
            live: Arc::new(ClosingDb(None, Arc::default())),
            derived: None,
            sealed: vec![seg(0, 20), seg(20, 25), seg(25, 70)],
            live_from: Bounds::at(70),
        };
        let entries = |b: &Bounds| b.entries;
        assert_eq!(files.segment(0, entries), Some(0));
        assert_eq!(files.segment(15, entries), Some(0));
        // Entries 16..31 are the bundle the head was in at 20 and at 25:
        // the segment sealed at 70 holds it whole.
        assert_eq!(files.segment(16, entries), Some(2));
        assert_eq!(files.segment(63, entries), Some(2));
        assert_eq!(files.segment(64, entries), None);
        let private = |b: &Bounds| b.private;
        assert_eq!(files.segment(19, private), Some(0));
        assert_eq!(files.segment(20, private), Some(1));
        assert_eq!(files.segment(24, private), Some(1));
        assert_eq!(files.segment(69, private), Some(2));
        assert_eq!(files.segment(70, private), None);
        let hashes = |b: &Bounds| b.hashes;
        let last_sealed = crate::merkle::stored_hash_count(70);
        assert_eq!(files.segment(last_sealed - 1, hashes), Some(2));
        assert_eq!(files.segment(last_sealed, hashes), None);
        assert_eq!(files.segment(0, hashes), Some(0));
    }
}
