//! The log: open with a self-check, and appends admitted to the committer
//! (`log/committer.rs`). Checked reads and proofs are in `log/reads.rs`.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, TrySendError};
use tokio::sync::oneshot;

use crate::error::{Corruption, CorruptionKind, Error};
use crate::hash::{leaf_hash, Hash};
use crate::lookup::{LookupRow, Lookups};
use crate::merkle::Frontier;
pub use crate::store::Head;
use crate::store::{Snapshot, Store};

mod committer;
mod reads;
mod view;

pub use view::LogView;

pub(crate) use reads::checked_entry;

use committer::commit_loop;

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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_batch: 1024,
            max_wait: Duration::ZERO,
            queue_capacity: 16 * 1024,
            max_entry_bytes: crate::tiles::MAX_ENTRY_BYTES,
            backend: None,
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
    /// Append `leaf` as the next entry, indexed under `key` if any.
    Append {
        leaf: Vec<u8>,
        accepted: A,
        key: Option<EntryKey>,
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
            head: RwLock::new(head),
            stats: Stats::default(),
            watch,
            lookups: LookupsSlot::default(),
            lookup_retry: std::sync::Mutex::new(None),
        });
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

/// Where the lookups are while a start opens them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupsState {
    /// Still opening (replaying the store's journal, or rebuilding or
    /// catching up the lookups from the entries).
    Opening,
    /// Open and caught up with the log as it was opened.
    Open,
    /// Opening them failed; writes and lookups are refused until restart.
    Failed(String),
}

/// The lookups, opened on a thread of their own beside the rest of a start
/// ([`open_lookups_beside`]): the store replays its journal (up to about
/// 64 MB, a second at most on this kind of machine) and a log that is not
/// this one's is rebuilt from the entries, neither of which should hold up
/// the reads that do not need them.
#[derive(Default)]
pub(crate) struct LookupsSlot {
    cell: std::sync::OnceLock<Result<Lookups, Error>>,
    /// Wakes the lookups that wait a bounded time ([`Shared::lookups_now`]).
    opened: (std::sync::Mutex<()>, std::sync::Condvar),
    /// Set when the log is closing: the opener stops at its next chunk.
    closing: std::sync::atomic::AtomicBool,
}

impl LookupsSlot {
    fn publish(&self, opened: Result<Lookups, Error>) {
        let _ = self.cell.set(opened);
        let _held = self.opened.0.lock().unwrap_or_else(|p| p.into_inner());
        self.opened.1.notify_all();
    }

    /// The outcome of the open, waiting at most `limit` for it.
    fn within(&self, limit: Duration) -> Option<&Result<Lookups, Error>> {
        if let Some(o) = self.cell.get() {
            return Some(o);
        }
        let held = self.opened.0.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self
            .opened
            .1
            .wait_timeout_while(held, limit, |_| self.cell.get().is_none());
        self.cell.get()
    }
}

/// How long a lookup by leaf hash or key waits while a start opens the
/// lookups (the journal's replay takes about a second at most); past it,
/// while they are rebuilt from the entries, say, it is refused at once.
const LOOKUP_OPEN_WAIT: Duration = Duration::from_secs(3);

/// Opens the lookups of `shared`'s directory, checks they are this log's
/// (rebuilding them when not), catches them up to `head`, and publishes
/// them (or why that failed). The committer does not run a batch until
/// they are published, so the head cannot move meanwhile.
fn open_lookups_beside<S: Sequencer>(shared: &Shared, head: Head) {
    let started = Instant::now();
    let closing = &shared.lookups.closing;
    let opened = crate::store::guarded("opening the lookups", || {
        let store = shared.store()?;
        let lookups = {
            let snap = store.snapshot()?;
            open_lookups(&shared.dir, &snap, &head)?
        };
        // Behind the log after a failed catch-up, they are published all
        // the same: every batch tries again ([`committer`]), and until one
        // succeeds a lookup that could miss an entry is an error.
        let caught_up = catch_up_lookups::<S>(&store, &lookups, &head, closing);
        Ok((lookups, caught_up))
    });
    let opened = match opened {
        Ok((_, Err(e))) if closing.load(Ordering::SeqCst) => {
            tracing::info!(reason = %e, "the log closed before its lookups were caught up");
            Err(e)
        }
        Ok((lookups, Err(e))) => {
            shared.stats.lookup_failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %e, "cannot catch the lookups up at open; the committer tries again before each batch, and writes that need them are refused until then");
            Ok(lookups)
        }
        Ok((lookups, Ok(()))) => {
            tracing::info!(
                elapsed_ms = started.elapsed().as_millis() as u64,
                "lookups open"
            );
            Ok(lookups)
        }
        Err(e) => {
            shared.stats.lookup_failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %e, "cannot open the lookups by leaf hash and entry key; writes and lookups are refused until restart");
            Err(e)
        }
    };
    shared.lookups.publish(opened);
}

impl Shared {
    /// The lookups, waiting while the start opens them.
    fn lookups(&self) -> Result<&Lookups, Error> {
        self.lookups.cell.wait().as_ref().map_err(Error::clone)
    }

    /// The lookups, waiting a few seconds at most while the start opens
    /// them ([`LOOKUP_OPEN_WAIT`]); an error past that.
    fn lookups_now(&self) -> Result<&Lookups, Error> {
        match self.lookups.within(LOOKUP_OPEN_WAIT) {
            Some(Ok(l)) => Ok(l),
            Some(Err(e)) => Err(e.clone()),
            None => Err(crate::lookup::lookup_err(
                "still being opened after a start (or rebuilt from the entries, when they were not this log's); retry shortly",
            )),
        }
    }

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

/// The O(log n) check run on open. Returns the tree's right edge.
pub(crate) fn self_check(snap: &Snapshot, head: &Head) -> Result<Frontier, Error> {
    let frontier = load_frontier(snap, head.size)?;
    if frontier.root() != head.root {
        return Err(Corruption::new(
            head.size,
            CorruptionKind::Tree,
            "stored tree hashes do not hash to the head's root",
        )
        .into());
    }
    if head.size > 0 {
        let last = checked_entry(snap, head.size - 1)?;
        if last.chain_hash != head.chain {
            return Err(Corruption::new(
                head.size - 1,
                CorruptionKind::Chain,
                "last entry's chain hash differs from the head's",
            )
            .into());
        }
    } else if head.chain != crate::hash::GENESIS_CHAIN {
        return Err(Corruption::new(
            0,
            CorruptionKind::Chain,
            "empty log with a non-genesis chain",
        )
        .into());
    }
    if let Some(last) = snap.last_entry_index()? {
        if last >= head.size {
            return Err(
                Corruption::new(last, CorruptionKind::ExtraEntry, "entry beyond the head").into(),
            );
        }
    }
    if let Some(last) = snap.last_hash_index()? {
        if last >= crate::merkle::stored_hash_count(head.size) {
            return Err(Corruption::new(
                head.size,
                CorruptionKind::ExtraEntry,
                format!("stored hash {last} beyond the head"),
            )
            .into());
        }
    }
    Ok(frontier)
}

/// Reads the complete subtrees covering `[0, size)` from stored hashes.
pub(crate) fn load_frontier(snap: &Snapshot, size: u64) -> Result<Frontier, Error> {
    let indexes = tlog_tiles::sub_tree_index(0, size, Vec::new());
    let hashes = snap.hashes_at(&indexes)?;
    let nodes = indexes
        .iter()
        .zip(hashes)
        .map(|(&i, h)| (crate::merkle::split_stored_hash_index(i).0, h))
        .collect();
    Ok(Frontier::from_parts(size, nodes))
}

/// Entries indexed per lookup batch when catching the lookups up.
const LOOKUP_CHUNK: u64 = 65_536;

/// Opens the lookups of `dir` and checks that they belong to this log
/// ([`Lookups::not_this_logs`]); lookups that do not, or cannot be opened,
/// are removed and rebuilt from the entries.
fn open_lookups(dir: &Path, snap: &Snapshot, head: &Head) -> Result<Lookups, Error> {
    let why = match Lookups::try_open(dir)? {
        Ok(l) => match l.watermarks() {
            Ok(marks) => match l.not_this_logs(snap, head.size, &marks)? {
                None => return Ok(l),
                Some(why) => why,
            },
            Err(e) => e.to_string(),
        },
        Err(why) => why,
    };
    tracing::warn!(reason = %why, "the lookups by leaf hash and entry key do not belong to this log; rebuilding them from the entries");
    Lookups::remove(dir)?;
    Lookups::open(dir)
}

/// Catches the lookups up to `head` from where they stop, reading stored
/// records in order: [`LOOKUP_CHUNK`] entries per lookup batch, so a crash
/// resumes where it stopped.
pub(crate) fn catch_up_lookups<S: Sequencer>(
    store: &Store,
    lookups: &Lookups,
    head: &Head,
    closing: &std::sync::atomic::AtomicBool,
) -> Result<(), Error> {
    let started = Instant::now();
    let mut from = lookups.leaves_through();
    if S::KEYED {
        from = from.min(lookups.keys_through());
    }
    let large = head.size - from.min(head.size) > LOOKUP_CHUNK;
    if large {
        tracing::info!(
            from,
            to = head.size,
            "indexing entries by leaf hash and entry key"
        );
    }
    while from < head.size {
        if closing.load(Ordering::SeqCst) {
            return Err(crate::lookup::lookup_err("the log is closing"));
        }
        let to = (from + LOOKUP_CHUNK).min(head.size);
        let snap = store.snapshot()?;
        let mut found = Vec::with_capacity((to - from) as usize);
        for rec in snap.records_from(from)? {
            let (index, rec) = rec?;
            if index >= to {
                break;
            }
            let entry = crate::store::StoredEntry::decode(index, &rec)?;
            found.push((index, leaf_hash(&entry.leaf), S::key_of(&entry.leaf)));
        }
        if found.len() as u64 != to - from {
            return Err(Corruption::new(
                from + found.len() as u64,
                CorruptionKind::MissingEntry,
                "entry absent",
            )
            .into());
        }
        let rows: Vec<LookupRow<'_>> = found
            .iter()
            .map(|(index, lh, key)| LookupRow {
                index: *index,
                leaf_hash: lh,
                key: key.as_ref().map(|k| (k.name.as_str(), k.digest)),
            })
            .collect();
        let r = crate::store::Reader::new(&snap);
        let root = tlog_tiles::tree_hash(to, &r).map_err(|e| r.take_err(e))?;
        lookups.add(from, &rows, to, &root, S::KEYED, false)?;
        if large {
            tracing::info!(through = to, of = head.size, "indexed");
        }
        from = to;
    }
    if large {
        tracing::info!(
            seconds = started.elapsed().as_secs_f64(),
            "lookups complete"
        );
    }
    Ok(())
}
