//! The log: open with a self-check, group-committed appends, checked reads and
//! proofs.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, TrySendError};
use tokio::sync::oneshot;

use crate::error::{Corruption, CorruptionKind, Error};
use crate::hash::{chain_hash, leaf_hash, Hash};
use crate::merkle::{stored_hash_index, Frontier};
pub use crate::store::Head;
use crate::store::{Reader, Row, Snapshot, Store};

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
    /// The largest leaf accepted, in bytes.
    pub max_entry_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_batch: 1024,
            max_wait: Duration::ZERO,
            queue_capacity: 16 * 1024,
            max_entry_bytes: 1 << 20,
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
    pub last_batch_size: AtomicU64,
}

type Reply = oneshot::Sender<Result<Appended, Error>>;

struct Request {
    leaf: Vec<u8>,
    reply: Reply,
}

struct Shared {
    store: Store,
    head: RwLock<Head>,
    stats: Stats,
}

/// An append log on one data directory. Cheap to share behind an `Arc`; all
/// methods take `&self`.
pub struct Ledger {
    shared: Arc<Shared>,
    tx: Option<Sender<Request>>,
    committer: Option<JoinHandle<()>>,
    config: Config,
}

/// An append that has been queued; wait on it for the acknowledgement.
#[derive(Debug)]
pub struct PendingAppend(oneshot::Receiver<Result<Appended, Error>>);

impl PendingAppend {
    /// Blocks until the entry is durable (or failed). Do not call from inside
    /// an async runtime; use [`PendingAppend::wait_async`] there.
    pub fn wait(self) -> Result<Appended, Error> {
        self.0.blocking_recv().unwrap_or(Err(Error::Closed))
    }

    /// Waits until the entry is durable (or failed).
    pub async fn wait_async(self) -> Result<Appended, Error> {
        self.0.await.unwrap_or(Err(Error::Closed))
    }
}

impl Ledger {
    /// Opens (or creates) the log in `dir` and checks it before returning.
    ///
    /// The self-check reads O(log n) hashes: the stored right edge of the tree
    /// must hash to the head's root, the last entry must match its stored leaf
    /// hash and the head's chain hash, and nothing may exist past the head.
    /// Any disagreement is [`Error::Corrupt`]; run `ledger verify` to locate
    /// damage elsewhere. Opening never rebuilds the tree.
    pub fn open(dir: &Path, config: Config) -> Result<Ledger, Error> {
        let store = Store::open(dir)?;
        let snap = store.snapshot()?;
        let head = snap.head()?;
        let frontier = self_check(&snap, &head)?;
        drop(snap);
        tracing::info!(size = head.size, root = %hex32(&head.root), "ledger opened");

        let shared = Arc::new(Shared {
            store,
            head: RwLock::new(head),
            stats: Stats::default(),
        });
        let (tx, rx) = crossbeam_channel::bounded(config.queue_capacity.max(1));
        let committer = {
            let shared = Arc::clone(&shared);
            let config = config.clone();
            std::thread::Builder::new()
                .name("ledger-committer".into())
                .spawn(move || commit_loop(&shared, &rx, &config, frontier, head))
                .map_err(|e| crate::error::storage(redb::StorageError::Io(e)))?
        };
        Ok(Ledger {
            shared,
            tx: Some(tx),
            committer: Some(committer),
            config,
        })
    }

    /// Appends one leaf and blocks until it is durable.
    pub fn append(&self, leaf: Vec<u8>) -> Result<Appended, Error> {
        let (req, pending) = self.request(leaf)?;
        self.sender()?.send(req).map_err(|_| Error::Closed)?;
        pending.wait()
    }

    /// Queues one leaf without blocking; [`Error::Busy`] when the queue is
    /// full.
    pub fn submit(&self, leaf: Vec<u8>) -> Result<PendingAppend, Error> {
        let (req, pending) = self.request(leaf)?;
        match self.sender()?.try_send(req) {
            Ok(()) => Ok(pending),
            Err(TrySendError::Full(_)) => Err(Error::Busy),
            Err(TrySendError::Disconnected(_)) => Err(Error::Closed),
        }
    }

    fn request(&self, leaf: Vec<u8>) -> Result<(Request, PendingAppend), Error> {
        if leaf.len() > self.config.max_entry_bytes {
            return Err(Error::EntryTooLarge {
                len: leaf.len(),
                max: self.config.max_entry_bytes,
            });
        }
        let (reply, rx) = oneshot::channel();
        Ok((Request { leaf, reply }, PendingAppend(rx)))
    }

    fn sender(&self) -> Result<&Sender<Request>, Error> {
        self.tx.as_ref().ok_or(Error::Closed)
    }

    /// The committed head.
    pub fn head(&self) -> Head {
        *self.shared.head.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Append and batch counters.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// The path of the data file.
    pub fn path(&self) -> &Path {
        self.shared.store.path()
    }

    fn snapshot_below(&self, size: u64) -> Result<Snapshot, Error> {
        let head = self.head();
        if size > head.size {
            return Err(Error::InvalidSize {
                size,
                rule: "must not exceed the current tree size",
            });
        }
        self.shared.store.snapshot()
    }

    /// The entry at `index`, with its bytes checked against the stored leaf
    /// hash. A mismatch is [`Error::Corrupt`], never silently served.
    pub fn entry(&self, index: u64) -> Result<Entry, Error> {
        let size = self.head().size;
        if index >= size {
            return Err(Error::IndexOutOfRange { index, size });
        }
        let snap = self.shared.store.snapshot()?;
        checked_entry(&snap, index)
    }

    /// Entries `start..end` (clamped to the head), each checked.
    pub fn entries(&self, start: u64, end: u64) -> Result<Vec<Entry>, Error> {
        let size = self.head().size;
        let end = end.min(size);
        if start >= end {
            return Ok(Vec::new());
        }
        let snap = self.shared.store.snapshot()?;
        (start..end).map(|i| checked_entry(&snap, i)).collect()
    }

    /// The stored RFC 6962 leaf hash of entry `index`.
    pub fn leaf_hash(&self, index: u64) -> Result<Hash, Error> {
        let size = self.head().size;
        if index >= size {
            return Err(Error::IndexOutOfRange { index, size });
        }
        let snap = self.shared.store.snapshot()?;
        Ok(snap.hashes_at(&[stored_hash_index(0, index)])?[0])
    }

    /// The RFC 6962 root of the tree of the first `size` entries.
    pub fn root_at(&self, size: u64) -> Result<Hash, Error> {
        let snap = self.snapshot_below(size)?;
        let r = Reader::new(&snap);
        tlog_tiles::tree_hash(size, &r).map_err(|e| r.take_err(e))
    }

    /// The RFC 6962 inclusion proof of entry `index` in the tree of `size`
    /// entries, nearest sibling first.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, Error> {
        if index >= size {
            return Err(Error::IndexOutOfRange { index, size });
        }
        let snap = self.snapshot_below(size)?;
        let r = Reader::new(&snap);
        tlog_tiles::prove_record(size, index, &r).map_err(|e| r.take_err(e))
    }

    /// The RFC 6962 consistency proof from the tree of `old_size` to the tree
    /// of `new_size` entries. Empty when `old_size` is 0 or equals `new_size`.
    pub fn consistency_proof(&self, old_size: u64, new_size: u64) -> Result<Vec<Hash>, Error> {
        if old_size > new_size {
            return Err(Error::InvalidSize {
                size: old_size,
                rule: "old size must not exceed new size",
            });
        }
        let snap = self.snapshot_below(new_size)?;
        if old_size == 0 || old_size == new_size {
            return Ok(Vec::new());
        }
        let r = Reader::new(&snap);
        tlog_tiles::prove_tree(new_size, old_size, &r).map_err(|e| r.take_err(e))
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        // Closing the channel lets the committer finish queued work and exit.
        self.tx.take();
        if let Some(h) = self.committer.take() {
            let _ = h.join();
        }
    }
}

fn checked_entry(snap: &Snapshot, index: u64) -> Result<Entry, Error> {
    let stored = snap.entry(index)?.ok_or_else(|| {
        Corruption::new(
            index,
            CorruptionKind::MissingEntry,
            "entry below head is absent",
        )
    })?;
    let expected = snap.hashes_at(&[stored_hash_index(0, index)])?[0];
    let got = leaf_hash(&stored.leaf);
    if got != expected {
        return Err(Corruption::new(
            index,
            CorruptionKind::Leaf,
            "entry bytes do not match the stored leaf hash",
        )
        .into());
    }
    Ok(Entry {
        index,
        leaf: stored.leaf,
        leaf_hash: got,
        chain_hash: stored.chain,
    })
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

fn commit_loop(
    shared: &Shared,
    rx: &Receiver<Request>,
    config: &Config,
    mut frontier: Frontier,
    mut head: Head,
) {
    let max_batch = config.max_batch.max(1);
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        let deadline = Instant::now() + config.max_wait;
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => {
                    if config.max_wait.is_zero() {
                        break;
                    }
                    match rx.recv_deadline(deadline) {
                        Ok(r) => batch.push(r),
                        Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
                    }
                }
            }
        }

        let saved = (frontier.clone(), head);
        let mut rows = Vec::with_capacity(batch.len());
        let mut acks = Vec::with_capacity(batch.len());
        let mut chain = head.chain;
        for req in &batch {
            let index = frontier.size();
            let lh = leaf_hash(&req.leaf);
            let hashes = frontier.push(lh);
            chain = chain_hash(&chain, &req.leaf);
            rows.push(Row {
                index,
                leaf: &req.leaf,
                chain,
                first_hash_index: stored_hash_index(0, index),
                hashes,
            });
            acks.push((index, lh, chain));
        }
        let new_head = Head {
            size: frontier.size(),
            root: frontier.root(),
            chain,
        };
        let result = shared.store.commit(&rows, &new_head);
        drop(rows);
        match result {
            Ok(()) => {
                head = new_head;
                *shared.head.write().unwrap_or_else(|p| p.into_inner()) = new_head;
                let n = batch.len() as u64;
                shared.stats.appends.fetch_add(n, Ordering::Relaxed);
                shared.stats.batches.fetch_add(1, Ordering::Relaxed);
                shared.stats.last_batch_size.store(n, Ordering::Relaxed);
                for (req, (index, leaf_hash, chain_hash)) in batch.into_iter().zip(acks) {
                    let _ = req.reply.send(Ok(Appended {
                        index,
                        leaf_hash,
                        chain_hash,
                        tree_size: new_head.size,
                        root: new_head.root,
                    }));
                }
            }
            Err(e) => {
                tracing::error!(error = %e, batch = batch.len(), "commit failed; batch not acknowledged");
                shared.stats.commit_failures.fetch_add(1, Ordering::Relaxed);
                (frontier, head) = saved;
                for req in batch {
                    let _ = req.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

pub(crate) fn hex32(h: &Hash) -> String {
    h.0.iter().map(|b| format!("{b:02x}")).collect()
}
