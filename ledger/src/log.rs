//! The log: open with a self-check, and appends admitted to the committer
//! (`log/committer.rs`). Checked reads and proofs are in `log/reads.rs`.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, TrySendError};
use tokio::sync::oneshot;

use crate::error::Error;
use crate::hash::Hash;
use crate::lookup::Lookups;
pub use crate::store::Head;
use crate::store::{Snapshot, Store};

mod committer;
mod opening;
mod reads;
mod view;

pub use view::LogView;

pub(crate) use reads::{checked_entries, checked_entry};

use committer::commit_loop;
pub(crate) use committer::integrate;
pub use opening::LookupsState;
pub(crate) use opening::{catch_up_lookups, load_frontier, self_check};
use opening::{open_lookups_beside, LookupsSlot};

/// Group-commit and admission settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The most entries committed in one transaction (one fdatasync).
    pub max_batch: usize,
    /// How long the committer waits for more entries after the first one of a
    /// batch. Zero (the default) commits whatever has queued up while the
    /// previous commit ran: this keeps latency at one fdatasync under light load
    /// and still batches under heavy load.
    pub max_wait: Duration,
    /// Appends queued beyond this are refused with [`Error::Busy`] by
    /// [`Ledger::submit`] (and wait in [`Ledger::append`]).
    pub queue_capacity: usize,
    /// The largest leaf accepted, in bytes; never more than
    /// [`crate::tiles::MAX_ENTRY_BYTES`], which is what a C2SP entry bundle
    /// can hold.
    pub max_entry_bytes: usize,
    /// The storage backend (fault injection in tests); `None` is the file.
    pub backend: Option<crate::store::BackendFactory>,
    /// Entries the redb data file takes before it is sealed into a segment
    /// and a new one started, so that the file each commit writes (and the
    /// allocator state redb saves with it) stays bounded as the log grows;
    /// 0 never seals. A PostgreSQL log ignores it.
    pub segment_entries: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_batch: 1024,
            max_wait: Duration::ZERO,
            queue_capacity: 16 * 1024,
            max_entry_bytes: crate::tiles::MAX_ENTRY_BYTES,
            backend: None,
            segment_entries: crate::store::SEGMENT_ENTRIES,
        }
    }
}

/// What an acknowledged append returns. When it is returned the entry is
/// durable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Appended {
    /// The entry's 0-based index.
    pub index: u64,
    /// Its RFC 6962 leaf hash.
    pub leaf_hash: Hash,
    /// Its chain hash.
    pub chain_hash: Hash,
    /// The tree size after the batch that holds it was committed.
    pub tree_size: u64,
    /// The RFC 6962 root at `tree_size`.
    pub root: Hash,
}

/// A checked entry, shared with the log's memory of the entries it read,
/// with its RFC 6962 inclusion proof ([`Ledger::entries_with_proofs`]).
pub type ProvenEntry = (std::sync::Arc<Entry>, Vec<Hash>);

/// A read entry whose bytes were checked against the stored leaf hash.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub index: u64,
    pub leaf: Vec<u8>,
    pub leaf_hash: Hash,
    pub chain_hash: Hash,
}

/// Counters for metrics.
#[derive(Debug, Default)]
pub struct Stats {
    /// Keys of redacted parts that could not be destroyed when asked
    /// (the parts read as destroyed regardless; the next open retries).
    pub redaction_failures: AtomicU64,
    pub appends: AtomicU64,
    pub batches: AtomicU64,
    pub commit_failures: AtomicU64,
    /// Failed writes of the lookups (after a commit, or catching them up):
    /// until one succeeds, writes that need them are refused.
    pub lookup_failures: AtomicU64,
    pub last_batch_size: AtomicU64,
    /// Set while storage has failed and reads come from a read-only view of
    /// the last durable commit; writes are refused until it clears.
    pub read_only: std::sync::atomic::AtomicBool,
}

/// Decides, in log order and inside the single committer thread, what each
/// queued input becomes. This is where a domain layer validates against
/// everything already in the log: the committer calls [`Sequencer::sequence`]
/// for each input in queue order, so decisions see every earlier entry,
/// including earlier entries of the same batch.
///
/// Contract: state changes made in `sequence` are provisional until
/// [`Sequencer::committed`]. If the batch's commit fails,
/// [`Sequencer::failed`] is called instead and must restore the state to match
/// the log as committed (given as `log`).
pub trait Sequencer: Send + 'static {
    /// What callers submit.
    type Input: Send + 'static;
    /// What an accepted input reports back, besides its [`Appended`].
    type Accepted: Send + 'static;
    /// Why an input was refused.
    type Rejected: Send + 'static;

    /// Decides what `input` becomes; `next_index` is the index it would get.
    fn sequence(
        &mut self,
        input: Self::Input,
        next_index: u64,
        log: &LogView<'_>,
    ) -> Sequenced<Self::Accepted, Self::Rejected>;

    /// Every decision since the last call is now durable.
    fn committed(&mut self) {}

    /// The batch was not committed; restore state to match `log`.
    fn failed(&mut self, log: &LogView<'_>);

    /// Other writers appended entries after those this sequencer has seen
    /// (a log in PostgreSQL that several processes write): fold them in, so
    /// that the next batch is decided against exactly the log it follows.
    /// `log` is a view at the new head, its private parts readable. The
    /// default rebuilds, as after a failed batch.
    fn caught_up(&mut self, log: &LogView<'_>) {
        self.failed(log);
    }

    /// Whether this sequencer names entries by key ([`EntryKey`]). Only a
    /// keyed ledger writes the key lookup and moves its watermark; opening
    /// a directory whose key lookup is behind (a raw opener appended, or
    /// the lookups were lost) first indexes the missing entries with
    /// [`Sequencer::key_of`]. A keyed sequencer must look up every key it
    /// appends ([`LogView::entry_key`], and its own batch) and append it
    /// only when absent: the committer writes its keys without looking them
    /// up again.
    const KEYED: bool = false;

    /// The key of a committed leaf, as [`Sequenced::Append`] gave it: how
    /// the lookups ([`crate::lookup`]) index entries they find behind them
    /// on open.
    fn key_of(_leaf: &[u8]) -> Option<EntryKey> {
        None
    }
}

/// A name a sequencer gives an entry (the event log: its envelope id) and a
/// digest of its content, recorded in the key lookup ([`crate::lookup`])
/// once the entry is committed, before its head is published. The lookup
/// is derived data: a reader checks each answer against the entry it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryKey {
    pub name: String,
    pub digest: [u8; 32],
}

/// A [`Sequencer`]'s decision for one input.
pub enum Sequenced<A, R> {
    /// Append `leaf` as the next entry, indexed under `key` if any, with
    /// `private` kept beside it, each part sealed under a key of its own
    /// ([`crate::private`]; empty for most entries).
    Append {
        leaf: Vec<u8>,
        accepted: A,
        key: Option<EntryKey>,
        private: Vec<Vec<u8>>,
        /// Private parts of earlier entries (index, part) whose keys are
        /// destroyed once this entry is durable ([`Ledger::shred_private_part`]).
        shred: Vec<(u64, usize)>,
    },
    /// Already in the log at `index`: acknowledge it again, append nothing.
    Existing { index: u64, accepted: A },
    /// Refuse it, appending nothing.
    Reject(R),
    /// Refuse it, and append `leaf` as the durable record of the refusal. The
    /// refusal is returned only after that record is committed.
    RefuseRecorded {
        leaf: Vec<u8>,
        rejected: R,
        key: Option<EntryKey>,
    },
}

/// The pass-through sequencer: every input is a leaf, appended as is.
#[derive(Debug, Default, Clone, Copy)]
pub struct Raw;

impl Sequencer for Raw {
    type Input = Vec<u8>;
    type Accepted = ();
    type Rejected = std::convert::Infallible;

    fn sequence(
        &mut self,
        leaf: Vec<u8>,
        _: u64,
        _: &LogView<'_>,
    ) -> Sequenced<(), Self::Rejected> {
        Sequenced::Append {
            leaf,
            accepted: (),
            key: None,
            private: Vec::new(),
            shred: Vec::new(),
        }
    }

    fn failed(&mut self, _: &LogView<'_>) {}
}

/// The pass-through sequencer for a log with private parts (a restore):
/// each input is a leaf, appended as is, with its private parts and the
/// parts of earlier entries it redacts; a part given as `None` is kept with
/// its key destroyed (it was redacted).
#[derive(Debug, Default, Clone, Copy)]
pub struct RawPrivate;

/// A leaf to restore, its private parts, and the (index, part) pairs of
/// earlier entries it redacts.
pub type RestoredLeaf = (Vec<u8>, Vec<Option<Vec<u8>>>, Vec<(u64, usize)>);

impl Sequencer for RawPrivate {
    type Input = RestoredLeaf;
    type Accepted = ();
    type Rejected = std::convert::Infallible;

    fn sequence(
        &mut self,
        (leaf, parts, redacts): Self::Input,
        next: u64,
        _: &LogView<'_>,
    ) -> Sequenced<(), Self::Rejected> {
        let shred = parts
            .iter()
            .enumerate()
            .filter(|(_, p)| p.is_none())
            .map(|(i, _)| (next, i))
            .chain(redacts)
            .collect();
        Sequenced::Append {
            leaf,
            accepted: (),
            key: None,
            private: parts.into_iter().map(Option::unwrap_or_default).collect(),
            shred,
        }
    }

    fn failed(&mut self, _: &LogView<'_>) {}
}

/// An accepted input's acknowledgement.
#[derive(Debug, Clone)]
pub struct Receipt<A> {
    pub appended: Appended,
    pub accepted: A,
    /// True when the input was already in the log and nothing was appended.
    pub existing: bool,
}

/// Why a submitted input was not acknowledged.
#[derive(Debug, Clone)]
pub enum AppendError<R> {
    /// The sequencer refused it. `recorded` names the entry that records the
    /// refusal, when one was appended.
    Rejected {
        reason: R,
        recorded: Option<Box<Appended>>,
    },
    /// The log failed (storage, shutdown, pushback).
    Ledger(Error),
}

impl<R> From<Error> for AppendError<R> {
    fn from(e: Error) -> Self {
        AppendError::Ledger(e)
    }
}

/// What a submitted input finally gets.
pub type ReceiptResult<S> =
    Result<Receipt<<S as Sequencer>::Accepted>, AppendError<<S as Sequencer>::Rejected>>;

type Reply<S> = oneshot::Sender<ReceiptResult<S>>;

struct Request<S: Sequencer> {
    input: S::Input,
    reply: Reply<S>,
}

struct Shared {
    /// `None` only while the committer reopens the database after an I/O
    /// failure (redb refuses every operation after one until reopened).
    store: RwLock<Option<Arc<Store>>>,
    dir: std::path::PathBuf,
    file: std::path::PathBuf,
    backend: Option<crate::store::BackendFactory>,
    segment_entries: u64,
    head: RwLock<Head>,
    stats: Stats,
    watch: tokio::sync::watch::Sender<Head>,
    /// Lookups by leaf hash and entry key, once opened: complete below the
    /// published head unless writing them failed (then every batch catches
    /// them up first, and a lookup that could miss an entry is an error).
    lookups: LookupsSlot,
    /// After a failed catch-up of the lookups, when the next may be tried
    /// (a store that refuses every write would otherwise cost every batch
    /// a read of up to 65,536 entries).
    lookup_retry: std::sync::Mutex<Option<Instant>>,
    /// The private parts' key file, opened when first needed.
    keys: std::sync::Mutex<Option<crate::private::KeyFile>>,
    /// Entries read back with their proofs ([`Ledger::entries_with_proofs`]),
    /// each checked against its stored leaf hash when first read: a
    /// projection's evidence is read again with every answer, and an entry
    /// never changes once committed.
    proven_entries: crate::kept::Kept<u64, std::sync::Arc<Entry>>,
    /// The stored hashes the proofs of those entries read, kept across
    /// answers.
    proof_hashes: crate::store::KeptHashes,
}

/// Destroys the key of part `part` of committed entry `index` in place;
/// `Ok(false)` when the entry has no such part.
fn shred_part(shared: &Shared, index: u64, part: usize) -> Result<bool, Error> {
    let snap = shared.store()?.snapshot()?;
    let Some(row) = snap.private_row(index)? else {
        return Ok(false);
    };
    let sealed = crate::private::decode_record(index, &row)?;
    let Some(p) = sealed.get(part) else {
        return Ok(false);
    };
    let mut file = key_file(shared, &snap)?;
    match file.as_mut() {
        Some(f) => f.shred(p.slot),
        None => Ok(false),
    }
}

/// The key file, opened the first time it is needed, held to the number of
/// slots the data file refers to ([`crate::private::KeyFile::open`]).
fn key_file<'a>(
    shared: &'a Shared,
    snap: &Snapshot,
) -> Result<std::sync::MutexGuard<'a, Option<crate::private::KeyFile>>, Error> {
    let mut file = shared.keys.lock().unwrap_or_else(|p| p.into_inner());
    if file.is_none() {
        *file = Some(shared.store()?.open_keys(&shared.dir, snap)?);
    }
    Ok(file)
}

/// The private parts of committed entry `index` as of `snap`
/// ([`Ledger::private_parts`]).
/// The private parts of entry `index`: every one, or only part `only`.
fn read_private_parts(
    shared: &Shared,
    snap: &Snapshot,
    index: u64,
    only: Option<usize>,
) -> Result<Vec<crate::private::Part>, Error> {
    let Some(row) = snap.private_row(index)? else {
        return Ok(Vec::new());
    };
    let sealed = crate::private::decode_record(index, &row)?;
    let file = key_file(shared, snap)?;
    let Some(file) = file.as_ref() else {
        return Ok(Vec::new());
    };
    sealed
        .iter()
        .enumerate()
        .filter(|(i, _)| only.is_none_or(|p| p == *i))
        .map(|(i, part)| {
            if snap.is_redacted(index, i as u16)? {
                return Ok(crate::private::Part::Shredded);
            }
            let key = file.get(part.slot)?;
            match key {
                Some(k) => Ok(crate::private::Part::Open(crate::private::open_part(
                    index,
                    i as u16,
                    &k,
                    &part.ciphertext,
                )?)),
                None if file.written(part.slot)? => Ok(crate::private::Part::Shredded),
                None => Err(crate::error::Corruption::new(
                    index,
                    crate::error::CorruptionKind::Malformed,
                    format!(
                        "private part {i} names key slot {}, which {} does not hold",
                        part.slot,
                        file.describe()
                    ),
                )
                .into()),
            }
        })
        .collect()
}

/// Destroys the key of every redacted part whose key is still there: the
/// committer destroys it right after the redaction is durable, and a crash
/// or an I/O error in between leaves it until this runs (at every open).
/// Until then the part reads as destroyed anyway (`redacted_parts`).
fn destroy_redacted_keys(shared: &Shared) -> Result<usize, Error> {
    let snap = shared.store()?.snapshot()?;
    let redacted = snap.redacted_parts()?;
    let mut destroyed = 0;
    for (index, part) in redacted {
        if shred_part(shared, index, part as usize)? {
            destroyed += 1;
        }
    }
    Ok(destroyed)
}

/// An append log on one data directory. Cheap to share behind an `Arc`; all
/// methods take `&self`.
pub struct Ledger<S: Sequencer = Raw> {
    shared: Arc<Shared>,
    sequencer: Arc<std::sync::Mutex<S>>,
    tx: Option<Sender<Request<S>>>,
    committer: Option<JoinHandle<()>>,
    /// The thread that opens the lookups ([`open_lookups_beside`]).
    opener: Option<JoinHandle<()>>,
    config: Config,
}

/// An input that has been queued; wait on it for the acknowledgement.
pub struct PendingReceipt<S: Sequencer>(oneshot::Receiver<ReceiptResult<S>>);

impl<S: Sequencer> PendingReceipt<S> {
    /// Blocks until the input is durable, refused, or failed. Do not call
    /// from inside an async runtime; use [`PendingReceipt::wait_async`] there.
    pub fn wait(self) -> ReceiptResult<S> {
        self.0
            .blocking_recv()
            .unwrap_or(Err(AppendError::Ledger(Error::Closed)))
    }

    /// Waits until the input is durable, refused, or failed.
    pub async fn wait_async(self) -> ReceiptResult<S> {
        self.0
            .await
            .unwrap_or(Err(AppendError::Ledger(Error::Closed)))
    }
}

/// A raw leaf that has been queued; wait on it for the acknowledgement.
pub struct PendingAppend(PendingReceipt<Raw>);

impl std::fmt::Debug for PendingAppend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingAppend")
    }
}

impl PendingAppend {
    /// Blocks until the entry is durable (or failed). Do not call from inside
    /// an async runtime; use [`PendingAppend::wait_async`] there.
    pub fn wait(self) -> Result<Appended, Error> {
        raw_result(self.0.wait())
    }

    /// Waits until the entry is durable (or failed).
    pub async fn wait_async(self) -> Result<Appended, Error> {
        raw_result(self.0.wait_async().await)
    }
}

fn raw_result(
    r: Result<Receipt<()>, AppendError<std::convert::Infallible>>,
) -> Result<Appended, Error> {
    match r {
        Ok(receipt) => Ok(receipt.appended),
        Err(AppendError::Ledger(e)) => Err(e),
        Err(AppendError::Rejected { reason, .. }) => match reason {},
    }
}

impl Ledger<Raw> {
    /// Opens (or creates) a raw log in `dir`; see [`Ledger::open_with`].
    pub fn open(dir: &Path, config: Config) -> Result<Ledger<Raw>, Error> {
        Ledger::open_with(dir, config, |_, _| Ok(Raw))
    }

    /// Appends one leaf and blocks until it is durable.
    pub fn append(&self, leaf: Vec<u8>) -> Result<Appended, Error> {
        self.check_size(&leaf)?;
        raw_result(self.append_input(leaf))
    }

    /// Queues one leaf without blocking; [`Error::Busy`] when the queue is
    /// full.
    pub fn submit(&self, leaf: Vec<u8>) -> Result<PendingAppend, Error> {
        self.check_size(&leaf)?;
        Ok(PendingAppend(self.submit_input(leaf)?))
    }

    fn check_size(&self, leaf: &[u8]) -> Result<(), Error> {
        let max = self
            .config
            .max_entry_bytes
            .min(crate::tiles::MAX_ENTRY_BYTES);
        if leaf.len() > max {
            return Err(Error::EntryTooLarge {
                len: leaf.len(),
                max,
            });
        }
        Ok(())
    }
}

impl<S: Sequencer> Ledger<S> {
    /// Opens (or creates) the log in `dir`, checks it, and starts the
    /// committer with the sequencer `make` builds from the committed log.
    ///
    /// The self-check reads O(log n) hashes: the stored right edge of the tree
    /// must hash to the head's root, the last entry must match its stored leaf
    /// hash and the head's chain hash, and nothing may exist past the head.
    /// Any disagreement is [`Error::Corrupt`]; run `ledger verify` to locate
    /// damage elsewhere. Opening never rebuilds the tree.
    pub fn open_with(
        dir: &Path,
        config: Config,
        make: impl FnOnce(&Snapshot, Head) -> Result<S, Error>,
    ) -> Result<Ledger<S>, Error> {
        let store = Arc::new(Store::open_with(dir, config.backend.as_ref())?);
        store.set_segment_entries(config.segment_entries);
        let (head, frontier, sequencer) = crate::store::guarded("checking the log", || {
            let snap = store.snapshot()?;
            let head = snap.head()?;
            let frontier = self_check(&snap, &head)?;
            let sequencer = make(&snap, head)?;
            Ok((head, frontier, sequencer))
        })?;
        tracing::info!(size = head.size, root = %crate::hash::to_hex(&head.root), "ledger opened");

        let (watch, _) = tokio::sync::watch::channel(head);
        let shared = Arc::new(Shared {
            store: RwLock::new(Some(store)),
            dir: dir.to_path_buf(),
            file: dir.join(crate::store::DB_FILE),
            backend: config.backend.clone(),
            segment_entries: config.segment_entries,
            head: RwLock::new(head),
            stats: Stats::default(),
            watch,
            lookups: LookupsSlot::default(),
            lookup_retry: std::sync::Mutex::new(None),
            keys: std::sync::Mutex::new(None),
            proven_entries: crate::kept::Kept::new(Ledger::<S>::PROVEN_ENTRIES),
            proof_hashes: crate::kept::Kept::new(crate::store::KEPT_HASHES),
        });
        if let Err(e) = destroy_redacted_keys(&shared) {
            shared
                .stats
                .redaction_failures
                .fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %e, "could not destroy the keys of redacted parts; they read as destroyed, and the next open tries again");
        }
        let opener = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("ledger-lookups".into())
                .spawn(move || open_lookups_beside::<S>(&shared, head))
                .map_err(|e| crate::error::storage(redb::StorageError::Io(e)))?
        };
        let sequencer = Arc::new(std::sync::Mutex::new(sequencer));
        let (tx, rx) = crossbeam_channel::bounded(config.queue_capacity.max(1));
        let spawned = {
            let shared = Arc::clone(&shared);
            let config = config.clone();
            let sequencer = Arc::clone(&sequencer);
            std::thread::Builder::new()
                .name("ledger-committer".into())
                .spawn(move || {
                    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        commit_loop(&shared, &rx, &config, frontier, head, &sequencer)
                    }));
                    if ran.is_err() {
                        // Never expected (a batch's storage work is caught in
                        // the loop), but if it happens the halt is counted and
                        // said, and `committer_running` turns false.
                        shared.stats.commit_failures.fetch_add(1, Ordering::Relaxed);
                        tracing::error!(
                            "the committer thread panicked; writes are halted until restart"
                        );
                    }
                })
        };
        let committer = match spawned {
            Ok(c) => c,
            Err(e) => {
                // The opener holds the store and the lookups until it stops.
                shared.lookups.closing.store(true, Ordering::SeqCst);
                let _ = opener.join();
                return Err(crate::error::storage(redb::StorageError::Io(e)));
            }
        };
        Ok(Ledger {
            shared,
            sequencer,
            tx: Some(tx),
            committer: Some(committer),
            opener: Some(opener),
            config,
        })
    }

    /// Submits one input and blocks until it is durable, refused or failed.
    pub fn append_input(&self, input: S::Input) -> ReceiptResult<S> {
        let (reply, rx) = oneshot::channel();
        self.sender()?
            .send(Request { input, reply })
            .map_err(|_| Error::Closed)?;
        PendingReceipt::<S>(rx).wait()
    }

    /// Queues one input without blocking; [`Error::Busy`] when the queue is
    /// full.
    pub fn submit_input(&self, input: S::Input) -> Result<PendingReceipt<S>, Error> {
        let (reply, rx) = oneshot::channel();
        match self.sender()?.try_send(Request { input, reply }) {
            Ok(()) => Ok(PendingReceipt(rx)),
            Err(TrySendError::Full(_)) => Err(Error::Busy),
            Err(TrySendError::Disconnected(_)) => Err(Error::Closed),
        }
    }

    fn sender(&self) -> Result<&Sender<Request<S>>, Error> {
        self.tx.as_ref().ok_or(Error::Closed)
    }

    /// Runs `f` on the sequencer between batches: it sees only committed
    /// decisions. Keep `f` short; it holds up the committer.
    pub fn inspect<R>(&self, f: impl FnOnce(&S) -> R) -> R {
        f(&self.sequencer.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Runs `f` on the sequencer between batches, with leave to change it
    /// (install state loaded after open). Keep `f` short; it holds up the
    /// committer.
    pub fn inspect_mut<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        f(&mut self.sequencer.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The private parts of committed entry `index`, in the order its
    /// sequencer gave them ([`crate::private`]); empty when it has none. A
    /// part whose key was shredded reads as [`crate::private::Part::Shredded`];
    /// a key the key file lacks, or a ciphertext that does not authenticate,
    /// is [`Error::Corrupt`].
    pub fn private_parts(&self, index: u64) -> Result<Vec<crate::private::Part>, Error> {
        let snap = self.snapshot()?;
        read_private_parts(&self.shared, &snap, index, None)
    }

    /// Part `part` of committed entry `index` alone, as
    /// [`Ledger::private_parts`] reads it: `None` when there is no such part.
    pub fn private_part(
        &self,
        index: u64,
        part: usize,
    ) -> Result<Option<crate::private::Part>, Error> {
        let snap = self.snapshot()?;
        Ok(read_private_parts(&self.shared, &snap, index, Some(part))?
            .into_iter()
            .next())
    }

    /// Runs `f` on a view of one snapshot of the log at its head, for a
    /// replay that also reads private parts (the values behind handles):
    /// entries in order, no lookups by key (a start need not wait for
    /// them, [`LogView::without_lookups`]).
    pub fn with_replay_view<R>(&self, f: impl FnOnce(&LogView<'_>) -> R) -> Result<R, Error> {
        // The head first: a snapshot taken after it holds at least as much.
        let head = self.head();
        let snap = self.snapshot()?;
        let read =
            |index: u64, only: Option<usize>| read_private_parts(&self.shared, &snap, index, only);
        Ok(f(&LogView::without_lookups(&snap, head).with_private(&read)))
    }

    /// [`Ledger::with_replay_view`] as of the log's first `size` entries
    /// (at most its head's): the private parts are read as they are now
    /// (a part redacted since reads as gone).
    pub fn with_replay_view_at<R>(
        &self,
        size: u64,
        f: impl FnOnce(&LogView<'_>) -> R,
    ) -> Result<R, Error> {
        let snap = self.snapshot()?;
        let chain = if size == 0 {
            crate::GENESIS_CHAIN
        } else {
            self.entry(size - 1)?.chain_hash
        };
        let head = Head {
            size,
            root: self.root_at(size)?,
            chain,
        };
        let read =
            |index: u64, only: Option<usize>| read_private_parts(&self.shared, &snap, index, only);
        Ok(f(&LogView::without_lookups(&snap, head).with_private(&read)))
    }

    /// Whether the key of part `part` of entry `index` is gone from the key
    /// file (its slot zeros), whatever `redacted_parts` says: `None` when
    /// the entry has no such part. What `ledger verify` holds a recorded
    /// redaction to.
    pub fn private_key_destroyed(&self, index: u64, part: usize) -> Result<Option<bool>, Error> {
        let snap = self.snapshot()?;
        let Some(row) = snap.private_row(index)? else {
            return Ok(None);
        };
        let sealed = crate::private::decode_record(index, &row)?;
        let Some(p) = sealed.get(part) else {
            return Ok(None);
        };
        let file = key_file(&self.shared, &snap)?;
        match file.as_ref() {
            Some(f) => Ok(Some(f.get(p.slot)?.is_none())),
            None => Ok(None),
        }
    }

    /// Destroys the key of part `part` of entry `index`, in place and
    /// durably: that part can never be read again. The entry, its leaf and
    /// every proof are unchanged. `Ok(false)` when the entry has no such
    /// part. A redaction goes through [`Sequenced::Append`]'s `shred`,
    /// which records it in the data file first.
    pub fn shred_private_part(&self, index: u64, part: usize) -> Result<bool, Error> {
        shred_part(&self.shared, index, part)
    }

    /// Whether other processes may append to this log too (it is kept in
    /// PostgreSQL): the committer follows what they commit, and decides
    /// each batch under the head row's lock.
    pub fn is_shared(&self) -> bool {
        self.shared.store().is_ok_and(|s| s.is_shared())
    }

    /// A receiver that sees every new committed head.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Head> {
        self.shared.watch.subscribe()
    }

    /// The committed head.
    pub fn head(&self) -> Head {
        *self.shared.head.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Append and batch counters.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// Whether the committer thread is still running. It stops only when
    /// the log is dropped, or (never expected) when it panicked outside a
    /// batch; a server that sees `false` is not ready and refuses writes.
    pub fn committer_running(&self) -> bool {
        self.committer.as_ref().is_some_and(|h| !h.is_finished())
    }

    /// The path of the data file.
    pub fn path(&self) -> &Path {
        self.shared.path()
    }

    /// The lookups by leaf hash and entry key ([`crate::lookup`]): waits
    /// while a start is still opening them (or rebuilding them, when they
    /// were not this log's); an error when that failed.
    pub fn lookups(&self) -> Result<&Lookups, Error> {
        self.shared.lookups()
    }

    /// The lookups if they are open, without waiting.
    pub fn lookups_if_open(&self) -> Option<&Lookups> {
        self.shared.lookups.cell.get().and_then(|l| l.as_ref().ok())
    }

    /// Whether the start has finished opening the lookups, and why it
    /// failed if it did.
    pub fn lookups_state(&self) -> LookupsState {
        match self.shared.lookups.cell.get() {
            None => LookupsState::Opening,
            Some(Ok(_)) => LookupsState::Open,
            Some(Err(why)) => LookupsState::Failed(why.to_string()),
        }
    }
}

impl Shared {
    /// The open store, or [`Error::Busy`] while it is being reopened.
    fn store(&self) -> Result<Arc<Store>, Error> {
        self.store
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or(Error::Busy)
    }

    fn path(&self) -> &Path {
        self.file.as_path()
    }

    /// `Ok` when a lookup complete below `through` covers the first `size`
    /// entries, so that a miss means absent; an error otherwise (writing it
    /// failed and has not been caught up yet, or a raw opener cannot index
    /// keys).
    fn lookups_cover(&self, through: u64, size: u64) -> Result<(), Error> {
        if through >= size {
            return Ok(());
        }
        Err(crate::lookup::lookup_err(format_args!(
            "the lookup covers {through} of {size} entries; it is caught up before the next write"
        )))
    }
}

impl<S: Sequencer> Drop for Ledger<S> {
    fn drop(&mut self) {
        // Closing the channel lets the committer finish queued work and exit;
        // but a start still opening the lookups stops at its next chunk, and
        // then the writes queued behind them are refused ("the log is
        // closing") and the committer exits.
        self.tx.take();
        self.shared.lookups.closing.store(true, Ordering::SeqCst);
        if let Some(h) = self.committer.take() {
            let _ = h.join();
        }
        if let Some(h) = self.opener.take() {
            let _ = h.join();
        }
    }
}
