//! The seam between the log and where it is kept: one data file of redb in
//! the data directory ([`file`], the default), or a schema of a PostgreSQL
//! database ([`pg`]) that several frontends can share.
//!
//! ## Contract (both backends)
//! - **Durable when:** [`Store::commit`] returns `Ok` only after the batch's
//!   entries, their stored hashes and the new head are durable in one
//!   transaction: redb with `Durability::Immediate` (an fdatasync), or a
//!   PostgreSQL `COMMIT` with `synchronous_commit = on` (the WAL flushed, and
//!   on a synchronous standby too when one is configured). A crash leaves
//!   all of a batch or none of it.
//! - **How the head advances:** only through [`Store::commit`], which adds
//!   the rows for entries `head.size .. head.size + n` and sets the new head.
//!   The caller computes every value; a store writes what it is given.
//!   Nothing updates or removes an entry, a stored hash or a private part.
//!   PostgreSQL also refuses it itself (triggers, [`pg`]), and assigns an
//!   index only under a lock on its head row, refusing a batch whose first
//!   index is not the head's size ([`Error::HeadMoved`]).
//! - **Reads** are consistent snapshots ([`Snapshot`]): a redb read
//!   transaction, or a PostgreSQL `REPEATABLE READ` transaction. They never
//!   see a half-written batch.
//!
//! ## Where a data directory's log is
//! [`Location::of`]: a directory with a `storage` file ([`STORAGE_FILE`])
//! keeps its log in the PostgreSQL schema that file names; otherwise it is
//! `ledger.redb` beside it. A directory with neither has no log yet:
//! [`Store::open`] creates one in redb, or in a new schema of the database
//! `LEDGER_STORAGE` names when that variable holds a `postgres://` URL.

use crate::error::{storage, Corruption, CorruptionKind, Error};
use crate::hash::{Hash, EMPTY_ROOT, GENESIS_CHAIN};
use std::path::Path;

pub(crate) mod file;
pub mod pg;

pub(crate) use file::FORMAT_KEY;
pub use file::{
    disk_bytes, file_backend, BackendFactory, MakeBackend, AUX, DB_FILE, DERIVED_FILE, ENTRIES,
    ENTRY_BUNDLES, FORMAT_VERSION, HASHES, META, OLDEST_FORMAT, PRIVATE_PARTS, REDACTED_PARTS,
    SEGMENTS_DIR, SEGMENT_ENTRIES, V2_ENTRY_KEYS, V2_LEAF_INDEX,
};
pub use pg::{Location, STORAGE_ENV, STORAGE_FILE};

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

/// The tree's upper-level stored hashes, kept in memory once read. A proof
/// at 10M entries reads about 24 stored hashes, one per level; all but the
/// lowest few are shared by many proofs, so keeping them saves most of a
/// proof's B-tree lookups. A stored hash is written once and never changes,
/// so a kept one is always the one in the file.
///
/// Bounded: at most [`UPPER_CAP`] hashes of level `min_level` or above
/// (never level 0, the leaf hashes). When full, it is emptied and
/// `min_level` moves up one, so it settles on the levels that fit: all of
/// them above the leaves at 100k entries, level 7 and above at 10M.
#[derive(Debug)]
pub(crate) struct UpperHashes {
    kept: std::sync::RwLock<(u8, rustc_hash::FxHashMap<u64, [u8; 32]>)>,
}

/// The most hashes [`UpperHashes`] keeps (about 12 MB).
const UPPER_CAP: usize = 1 << 18;

impl UpperHashes {
    fn new() -> Self {
        UpperHashes {
            kept: std::sync::RwLock::new((1, rustc_hash::FxHashMap::default())),
        }
    }

    /// The kept hash at `index` (of tree level `level`), or whether it
    /// should be kept once read (`Err(true)`).
    fn get(&self, index: u64, level: u8) -> Result<[u8; 32], bool> {
        let kept = self.kept.read().unwrap_or_else(|p| p.into_inner());
        Self::lookup(&kept, index, level)
    }

    /// [`UpperHashes::get`] for each of `indexes`, under one lock.
    fn get_many(&self, indexes: &[u64]) -> Vec<Result<[u8; 32], bool>> {
        let kept = self.kept.read().unwrap_or_else(|p| p.into_inner());
        indexes
            .iter()
            .map(|&i| Self::lookup(&kept, i, crate::merkle::split_stored_hash_index(i).0))
            .collect()
    }

    fn lookup(
        kept: &(u8, rustc_hash::FxHashMap<u64, [u8; 32]>),
        index: u64,
        level: u8,
    ) -> Result<[u8; 32], bool> {
        if level == 0 || level < kept.0 {
            return Err(false);
        }
        kept.1.get(&index).copied().ok_or(true)
    }

    fn keep(&self, index: u64, level: u8, hash: [u8; 32]) {
        self.keep_many(&[(index, level, hash)]);
    }

    /// Keeps each `(index, level, hash)`, under one lock.
    fn keep_many(&self, hashes: &[(u64, u8, [u8; 32])]) {
        let mut kept = self.kept.write().unwrap_or_else(|p| p.into_inner());
        for &(index, level, hash) in hashes {
            if level < kept.0 {
                continue;
            }
            if kept.1.len() >= UPPER_CAP {
                kept.1.clear();
                kept.0 = kept.0.saturating_add(1);
                if level < kept.0 {
                    continue;
                }
            }
            kept.1.insert(index, hash);
        }
    }
}

/// Makes the directory entries in `dir` durable (a file created or renamed
/// there).
pub fn sync_dir(dir: &Path) -> Result<(), Error> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| storage(redb::StorageError::Io(e)))
}

/// The message a panic carried, if it carried one.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_owned())
}

/// Runs `f`, turning a panic inside the storage engine into a typed
/// [`Error::Corrupt`]. redb panics on some malformed files (for example
/// "Malformed allocator state") instead of returning an error; a tampered
/// data file is attacker input, and must be refused, never crash the process.
pub fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = panic_message(&*p);
            Err(Corruption::new(
                0,
                CorruptionKind::Malformed,
                format!("the storage engine rejected the data file while {what}: {msg}"),
            )
            .into())
        }
    }
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

/// A stored hash below the head that is not there.
pub(crate) fn missing_hash(i: u64) -> Error {
    Corruption::new(
        crate::merkle::last_leaf_of_stored(i),
        CorruptionKind::MissingEntry,
        format!("stored hash {i} missing"),
    )
    .into()
}

/// Adapts a snapshot to `tlog_tiles`' reader, keeping the real error.
pub(crate) struct Reader<'a> {
    pub snap: &'a Snapshot,
    pub err: std::cell::RefCell<Option<Error>>,
    cache: ReaderCache<'a>,
}

/// Where a [`Reader`] looks before the store.
enum ReaderCache<'a> {
    /// Nowhere: every hash is read from the snapshot.
    None,
    /// Hashes this reader has read, for a reader that serves many proofs
    /// in one tree: proofs of nearby entries share most of their upper
    /// nodes and the whole right edge of the tree.
    Memo(std::cell::RefCell<rustc_hash::FxHashMap<u64, Hash>>),
    /// Hashes kept across readers ([`Reader::kept`]).
    Kept(&'a KeptHashes),
}

/// Stored hashes kept in memory across reads, by stored-hash index: a
/// stored hash never changes once committed, so a hash read from any
/// committed snapshot holds for every later one.
pub(crate) type KeptHashes = crate::kept::Kept<u64, Hash>;

/// How many stored hashes [`KeptHashes`] keeps at most (about 3 MB): the
/// proofs of a projection's evidence over 1,000 held-out cases at 10M
/// entries read about 15,000 distinct ones.
pub(crate) const KEPT_HASHES: usize = 1 << 16;

impl<'a> Reader<'a> {
    pub fn new(snap: &'a Snapshot) -> Self {
        Reader {
            snap,
            err: std::cell::RefCell::new(None),
            cache: ReaderCache::None,
        }
    }

    /// A reader of `snap` that looks in `kept` before the store and keeps
    /// what it reads there: the proofs of one projection's evidence, asked
    /// again with every answer at a slightly larger tree, share nearly all
    /// their stored hashes with the answer before.
    pub fn kept(snap: &'a Snapshot, kept: &'a KeptHashes) -> Self {
        Reader {
            cache: ReaderCache::Kept(kept),
            ..Reader::new(snap)
        }
    }

    /// A reader that remembers every hash it reads, for many proofs from one
    /// snapshot (a snapshot never changes, so neither does a stored hash).
    pub fn memoized(snap: &'a Snapshot) -> Self {
        Reader {
            cache: ReaderCache::Memo(Default::default()),
            ..Reader::new(snap)
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
        let read = match &self.cache {
            ReaderCache::None => self.snap.hashes_at(indexes),
            ReaderCache::Memo(memo) => read_through(
                self.snap,
                indexes,
                |is| {
                    let m = memo.borrow();
                    is.iter().map(|i| m.get(i).copied()).collect()
                },
                |read| memo.borrow_mut().extend(read.iter().copied()),
            ),
            // Not locked while the store is read: answers in parallel
            // share it.
            ReaderCache::Kept(kept) => read_through(
                self.snap,
                indexes,
                |is| kept.get_many(is),
                |read| kept.extend(read.iter().copied()),
            ),
        };
        read.map_err(|e| {
            *self.err.borrow_mut() = Some(e);
            tlog_tiles::Error::IndexesNotInTree
        })
    }
}

/// `indexes` from `get` where it has them, the rest from `snap` in one
/// read, then given to `keep`.
fn read_through(
    snap: &Snapshot,
    indexes: &[u64],
    get: impl FnOnce(&[u64]) -> Vec<Option<Hash>>,
    keep: impl FnOnce(&[(u64, Hash)]),
) -> Result<Vec<Hash>, Error> {
    let mut out = get(indexes);
    let missing: Vec<u64> = indexes
        .iter()
        .zip(&out)
        .filter(|(_, h)| h.is_none())
        .map(|(&i, _)| i)
        .collect();
    if !missing.is_empty() {
        let read = snap.hashes_at(&missing)?;
        let slots = out.iter_mut().filter(|h| h.is_none());
        for (slot, &h) in slots.zip(&read) {
            *slot = Some(h);
        }
        let read: Vec<(u64, Hash)> = missing.into_iter().zip(read).collect();
        keep(&read);
    }
    Ok(out.into_iter().flatten().collect())
}

/// The log's storage: a redb file, or a PostgreSQL schema.
// One value per open or read, moved rarely: boxing the larger variant
// would add an allocation to every read of the default backend.
#[allow(clippy::large_enum_variant)]
pub enum Store {
    File(file::FileStore),
    Postgres(pg::PgStore),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::File(s) => s.fmt(f),
            Store::Postgres(s) => s.fmt(f),
        }
    }
}

impl Store {
    /// Opens the log of the data directory `dir`, creating the directory and
    /// an empty log if there is none (see the module's "Where a data
    /// directory's log is").
    pub fn open(dir: &Path) -> Result<Store, Error> {
        Store::open_with(dir, None)
    }

    /// Like [`Store::open`]; a redb log is opened on the storage backend
    /// `backend` makes (fault injection), `None` being the plain file. A
    /// backend always means redb.
    pub fn open_with(dir: &Path, backend: Option<&BackendFactory>) -> Result<Store, Error> {
        if backend.is_none() {
            match Location::of(dir)? {
                Some(Location::Postgres(at)) => {
                    return Ok(Store::Postgres(pg::off_runtime(|| pg::PgStore::open(&at))?))
                }
                Some(Location::File) => {}
                None => {
                    if let Some(url) = pg::storage_from_env() {
                        return pg::off_runtime(|| {
                            let at = pg::PgStore::create_for(dir, &url)?;
                            Ok(Store::Postgres(pg::PgStore::open(&at)?))
                        });
                    }
                }
            }
        }
        Ok(Store::File(file::FileStore::open_with(dir, backend)?))
    }

    /// A read-only view of the last durable commit while storage fails. Only
    /// the redb file has one ([`crate::overlay`]); a PostgreSQL log is
    /// served again once the database answers.
    pub fn open_fallback(dir: &Path, backend: Option<&BackendFactory>) -> Result<Store, Error> {
        match Location::of(dir)? {
            Some(Location::Postgres(at)) if backend.is_none() => Err(pg::unreachable(&at)),
            _ => Ok(Store::File(file::FileStore::open_fallback(dir, backend)?)),
        }
    }

    /// Opens an existing log; refuses a directory without one.
    pub fn open_existing(dir: &Path) -> Result<Store, Error> {
        match Location::of(dir)? {
            Some(Location::Postgres(at)) => Ok(Store::Postgres(pg::off_runtime(|| {
                pg::PgStore::open_existing(&at)
            })?)),
            _ => Ok(Store::File(file::FileStore::open_existing(dir)?)),
        }
    }

    /// Whether this is a read-only view opened while storage fails.
    pub fn is_fallback(&self) -> bool {
        match self {
            Store::File(s) => s.is_fallback(),
            Store::Postgres(_) => false,
        }
    }

    /// How many entries a redb data file takes before it is sealed into a
    /// segment ([`crate::Config::segment_entries`]); a PostgreSQL log has
    /// no data file to seal.
    pub fn set_segment_entries(&self, n: u64) {
        if let Store::File(s) = self {
            s.set_segment_entries(n);
        }
    }

    /// How many [`Snapshot`]s of this store are alive.
    pub fn readers(&self) -> usize {
        match self {
            Store::File(s) => s.readers(),
            Store::Postgres(s) => s.readers(),
        }
    }

    /// Where the log is, for messages: the data file's path, or the
    /// database and schema (never a password).
    pub fn describe(&self) -> String {
        match self {
            Store::File(s) => s.path().display().to_string(),
            Store::Postgres(s) => s.describe(),
        }
    }

    /// Saves derived state under `name`, durably.
    pub fn put_aux(&self, name: &str, bytes: &[u8]) -> Result<(), Error> {
        self.put_aux_all(&[(name, bytes)])
    }

    /// Saves several records of derived state, durably and atomically.
    pub fn put_aux_all(&self, records: &[(&str, &[u8])]) -> Result<(), Error> {
        match self {
            Store::File(s) => s.put_aux_all(records),
            Store::Postgres(s) => pg::off_runtime(|| s.put_aux_all(records)),
        }
    }

    /// Derived state saved under `name`, if any.
    pub fn get_aux(&self, name: &str) -> Result<Option<Vec<u8>>, Error> {
        match self {
            Store::File(s) => s.get_aux(name),
            Store::Postgres(s) => pg::off_runtime(|| s.get_aux(name)),
        }
    }

    /// A consistent read snapshot.
    pub fn snapshot(&self) -> Result<Snapshot, Error> {
        Ok(match self {
            Store::File(s) => Snapshot::File(s.snapshot()?),
            Store::Postgres(s) => Snapshot::Postgres(pg::off_runtime(|| s.snapshot())?),
        })
    }

    /// A snapshot for the writer: in PostgreSQL, on one of the connections
    /// kept for it, so that readers holding every read connection never
    /// hold up a batch.
    pub(crate) fn writer_snapshot(&self) -> Result<Snapshot, Error> {
        Ok(match self {
            Store::File(s) => Snapshot::File(s.snapshot()?),
            Store::Postgres(s) => Snapshot::Postgres(pg::off_runtime(|| s.writer_snapshot())?),
        })
    }

    /// Writes `rows`, the private parts and `new_head` in one durable
    /// transaction. The rows are contiguous from the current head.
    pub(crate) fn commit(
        &self,
        rows: &[Row<'_>],
        private: &crate::private::Batch,
        new_head: &Head,
    ) -> Result<(), Error> {
        match self {
            Store::File(s) => s.commit(rows, private, new_head),
            Store::Postgres(s) => pg::off_runtime(|| s.commit(rows, private, new_head)),
        }
    }

    /// Whether other processes may write this log too (PostgreSQL): the
    /// committer then holds the head for each batch ([`Store::hold_head`])
    /// and follows what others commit.
    pub fn is_shared(&self) -> bool {
        matches!(self, Store::Postgres(_))
    }

    /// Holds the log's head for one batch: nothing for the redb file (one
    /// process writes it, by its file lock), the head row's lock in
    /// PostgreSQL, with the head committed when it was taken.
    pub(crate) fn hold_head(&self) -> Result<Hold, Error> {
        match self {
            Store::File(_) => Ok(Hold::File),
            Store::Postgres(s) => Ok(Hold::Postgres(Box::new(pg::off_runtime(|| s.lock_head())?))),
        }
    }

    /// The head other writers may have moved: `None` for the redb file.
    pub(crate) fn shared_head(&self) -> Result<Option<Head>, Error> {
        match self {
            Store::File(_) => Ok(None),
            Store::Postgres(s) => Ok(Some(pg::off_runtime(|| s.committed_head())?)),
        }
    }

    /// [`Store::commit`] under a hold from [`Store::hold_head`], which it
    /// releases.
    pub(crate) fn commit_held(
        &self,
        hold: Hold,
        rows: &[Row<'_>],
        private: &crate::private::Batch,
        new_head: &Head,
    ) -> Result<(), Error> {
        match hold {
            Hold::File => self.commit(rows, private, new_head),
            Hold::Postgres(lock) => pg::off_runtime(|| (*lock).commit(rows, private, new_head)),
        }
    }

    /// The keys of private parts: `private.keys` in the data directory
    /// beside a redb file, held to the number of slots the file refers to;
    /// the table `private_keys` of a PostgreSQL schema.
    pub(crate) fn open_keys(
        &self,
        dir: &Path,
        snap: &Snapshot,
    ) -> Result<crate::private::KeyFile, Error> {
        match self {
            Store::File(_) => crate::private::KeyFile::open(dir, snap.private_next_slot()?),
            Store::Postgres(s) => Ok(crate::private::KeyFile::in_database(s.keys())),
        }
    }
}

/// A writer's hold on the head for one batch ([`Store::hold_head`]).
#[derive(Debug)]
pub(crate) enum Hold {
    File,
    Postgres(Box<pg::HeadLock>),
}

impl Hold {
    /// The committed head when the hold was taken, where other writers may
    /// have moved it (PostgreSQL).
    pub(crate) fn shared_head(&self) -> Option<Head> {
        match self {
            Hold::File => None,
            Hold::Postgres(l) => Some(l.head),
        }
    }
}

/// A consistent, read-only view of the log.
// One value per open or read, moved rarely: boxing the larger variant
// would add an allocation to every read of the default backend.
#[allow(clippy::large_enum_variant)]
pub enum Snapshot {
    File(file::FileSnapshot),
    Postgres(pg::PgSnapshot),
}

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            Snapshot::File($s) => $e,
            Snapshot::Postgres($s) => pg::off_runtime(|| $e),
        }
    };
}

impl Snapshot {
    /// The committed head record.
    pub fn head(&self) -> Result<Head, Error> {
        each!(self, s => s.head())
    }

    /// The stored entry at `index`, if any. Not verified: see
    /// [`crate::Ledger::entry`] for the checked read.
    pub fn entry(&self, index: u64) -> Result<Option<StoredEntry>, Error> {
        each!(self, s => s.entry(index))
    }

    /// Every stored record from entry `start` on, in index order: (index,
    /// chain hash ‖ leaf bytes). A read error ends the iteration with it.
    pub fn records_from(&self, start: u64) -> Result<Records, Error> {
        Ok(match self {
            Snapshot::File(s) => Records::File(s.records_from(start)?),
            Snapshot::Postgres(s) => Records::Postgres(s.records_from(start)?),
        })
    }

    /// Every stored hash from stored hash index `start` on, in index order.
    pub fn hashes_from(&self, start: u64) -> Result<HashRecords, Error> {
        Ok(match self {
            Snapshot::File(s) => HashRecords::File(s.hashes_from(start)?),
            Snapshot::Postgres(s) => HashRecords::Postgres(s.hashes_from(start)?),
        })
    }

    /// The stored hash at a stored hash index, if any.
    pub fn hash(&self, stored_index: u64) -> Result<Option<Hash>, Error> {
        each!(self, s => s.hash(stored_index))
    }

    /// The largest entry index present, if any.
    pub fn last_entry_index(&self) -> Result<Option<u64>, Error> {
        each!(self, s => s.last_entry_index())
    }

    /// The largest stored hash index present, if any.
    pub fn last_hash_index(&self) -> Result<Option<u64>, Error> {
        each!(self, s => s.last_hash_index())
    }

    /// How many key slots the rows of `private_parts` refer to (the redb
    /// file; a PostgreSQL schema counts them in its own table).
    pub fn private_next_slot(&self) -> Result<u64, Error> {
        each!(self, s => s.private_next_slot())
    }

    /// Every redacted private part: (entry index, part).
    pub fn redacted_parts(&self) -> Result<Vec<(u64, u16)>, Error> {
        each!(self, s => s.redacted_parts())
    }

    /// Whether part `part` of entry `index` is redacted.
    pub fn is_redacted(&self, index: u64, part: u16) -> Result<bool, Error> {
        each!(self, s => s.is_redacted(index, part))
    }

    /// The row of entry `index` in `private_parts`, if it has one
    /// ([`crate::private`]).
    pub fn private_row(&self, index: u64) -> Result<Option<Vec<u8>>, Error> {
        each!(self, s => s.private_row(index))
    }

    /// Derived state saved under `name` (see [`Store::put_aux`]): in a
    /// redb log, as of this snapshot's first read of derived state (it is
    /// kept in a file of its own, `derived.redb`); in PostgreSQL, as of
    /// this snapshot. Each record is checked against the log by whoever
    /// reads it, never trusted for being here.
    pub fn aux(&self, name: &str) -> Result<Option<Vec<u8>>, Error> {
        each!(self, s => s.aux(name))
    }

    /// Every record of derived state, by name.
    pub fn aux_all(&self) -> Result<Vec<(String, Vec<u8>)>, Error> {
        each!(self, s => s.aux_all())
    }

    /// Reads the stored hashes at `indexes`; a missing one is
    /// [`CorruptionKind::MissingEntry`] naming the leaf that wrote it.
    pub fn hashes_at(&self, indexes: &[u64]) -> Result<Vec<Hash>, Error> {
        each!(self, s => s.hashes_at(indexes))
    }
}

/// Stored hashes in index order ([`Snapshot::hashes_from`]).
// One value per open or read, moved rarely: boxing the larger variant
// would add an allocation to every read of the default backend.
#[allow(clippy::large_enum_variant)]
pub enum HashRecords {
    File(file::FileHashes),
    Postgres(pg::PgHashes),
}

impl Iterator for HashRecords {
    type Item = Result<(u64, Hash), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            HashRecords::File(r) => r.next(),
            HashRecords::Postgres(r) => pg::off_runtime(|| r.next()),
        }
    }
}

/// Stored records in index order ([`Snapshot::records_from`]).
// One value per open or read, moved rarely: boxing the larger variant
// would add an allocation to every read of the default backend.
#[allow(clippy::large_enum_variant)]
pub enum Records {
    File(file::FileRecords),
    Postgres(pg::PgRecords),
}

impl Iterator for Records {
    type Item = Result<(u64, Vec<u8>), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Records::File(r) => r.next(),
            Records::Postgres(r) => pg::off_runtime(|| r.next()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_hashes_never_keep_leaf_hashes_and_move_up_a_level_when_full() {
        let upper = UpperHashes::new();
        let level_1 = |n: u64| crate::merkle::stored_hash_index(1, n);
        assert_eq!(
            upper.get(crate::merkle::stored_hash_index(0, 5), 0),
            Err(false)
        );
        assert_eq!(upper.get(level_1(5), 1), Err(true));
        for n in 0..UPPER_CAP as u64 {
            upper.keep(level_1(n), 1, [n as u8; 32]);
        }
        assert_eq!(upper.get(level_1(7), 1), Ok([7; 32]));
        // Full: the next one empties it and raises the lowest kept level.
        upper.keep(crate::merkle::stored_hash_index(2, 0), 2, [9; 32]);
        assert_eq!(upper.get(level_1(7), 1), Err(false));
        assert_eq!(
            upper.get(crate::merkle::stored_hash_index(2, 0), 2),
            Ok([9; 32])
        );
        upper.keep(level_1(8), 1, [8; 32]);
        assert_eq!(upper.get(level_1(8), 1), Err(false));
        assert!(upper.kept.read().map(|k| k.1.len() == 1).unwrap_or(false));
    }
}
