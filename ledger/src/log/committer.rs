//! The committer: the single thread that turns queued inputs into durable
//! entries. Each batch is sequenced in queue order, its leaves are integrated
//! into the Merkle tree and the hash chain by a pure step ([`integrate`]),
//! everything is committed in one transaction, and only then is any request
//! answered. After a failed commit the store is reopened and the in-memory
//! head, the tree's right edge and the sequencer are rebuilt from disk.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};

use super::{
    self_check, AppendError, Appended, Config, EntryKey, LogView, Receipt, Reply, Request,
    Sequenced, Sequencer, Shared,
};
use crate::error::Error;
use crate::hash::{chain_hash, leaf_hash, Hash};
use crate::lookup::{LookupRow, Lookups};
use crate::merkle::{stored_hash_index, Frontier};
use crate::store::{Head, Hold, Row, Store};

/// The committer thread: gathers queued requests into batches of at most
/// `config.max_batch`, runs each batch, and recovers from storage failures.
/// `frontier` and `head` are the committed log's right edge and head.
pub(super) fn commit_loop<S: Sequencer>(
    shared: &Shared,
    rx: &Receiver<Request<S>>,
    config: &Config,
    mut frontier: Frontier,
    mut head: Head,
    sequencer: &std::sync::Mutex<S>,
) {
    let max_batch = config.max_batch.max(1);
    // Set after a storage panic whose recovery failed: the next batch
    // reloads the durable head before anything else.
    let mut must_recover = false;
    // A log others write too (PostgreSQL) is followed between batches: its
    // head is read every FOLLOW_EVERY while no write is queued, and what
    // others appended is folded in and published; a database that stopped
    // answering is reopened on the same beat, not only at the next write.
    let shared_log = matches!(
        crate::store::Location::of(&shared.dir),
        Ok(Some(crate::store::Location::Postgres(_)))
    );
    loop {
        let first = if shared_log {
            match rx.recv_timeout(FOLLOW_EVERY) {
                Ok(r) => r,
                Err(RecvTimeoutError::Timeout) => {
                    let mut guard = sequencer.lock().unwrap_or_else(|p| p.into_inner());
                    let stale = must_recover || shared.store().is_err();
                    let step = crate::store::guarded("following the log", || {
                        if stale {
                            recover(shared, &mut frontier, &mut head, &mut *guard)
                        } else {
                            follow(shared, &mut frontier, &mut head, &mut *guard)
                        }
                    });
                    match step {
                        Ok(()) => must_recover = false,
                        Err(e) => {
                            must_recover = stale;
                            tracing::warn!(error = %e, "cannot follow the log others write; tried again shortly");
                        }
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match rx.recv() {
                Ok(r) => r,
                Err(_) => break,
            }
        };
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
        // The first batch after a start waits for the lookups, which are
        // opened beside the rest of the start; if that failed, every write
        // is refused with why.
        let lookups = match shared.lookups() {
            Ok(l) => l,
            Err(e) => {
                for req in batch {
                    let _ = req.reply.send(Err(AppendError::Ledger(e.clone())));
                }
                continue;
            }
        };
        let degraded = must_recover
            || shared
                .store
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .is_none_or(|s| s.is_fallback());
        let recovered = if degraded {
            let mut guard = sequencer.lock().unwrap_or_else(|p| p.into_inner());
            crate::store::guarded("recovering", || {
                recover(shared, &mut frontier, &mut head, &mut *guard)
            })
        } else {
            Ok(())
        };
        if recovered.is_ok() {
            must_recover = false;
        }
        let mut guard = sequencer.lock().unwrap_or_else(|p| p.into_inner());
        // Hold the head for this batch (PostgreSQL: the head row's lock,
        // which every other writer waits for), fold in whatever others
        // appended, and only then read the log the batch is decided on.
        let prepared = recovered.and_then(|()| {
            crate::store::guarded("holding the head", || {
                let store = shared.store()?;
                let hold = store.hold_head()?;
                if let Some(at) = hold.shared_head() {
                    catch_up(shared, &mut frontier, &mut head, &mut *guard, at)?;
                }
                Ok((hold, store.writer_snapshot()?))
            })
        });
        let (hold, snap) = match prepared {
            Ok(p) => p,
            Err(e) => {
                for req in batch {
                    let _ = req.reply.send(Err(AppendError::Ledger(e.clone())));
                }
                continue;
            }
        };
        let (inputs, mut replies): (Vec<_>, Vec<_>) =
            batch.into_iter().map(|r| (r.input, Some(r.reply))).unzip();
        let before = (frontier.clone(), head);
        let ran = crate::store::guarded("appending", || {
            // Writing the lookups after a commit failed: catch them up
            // before the sequencer relies on them. Lookups that cannot be
            // caught up (a full disk) refuse the batch as storage that
            // cannot take writes, until a catch-up succeeds.
            if let Err(e) = catch_up_or_count::<S>(shared, lookups, &head) {
                for reply in replies.iter_mut().filter_map(Option::take) {
                    let _ = reply.send(Err(AppendError::Ledger(e.clone())));
                }
                return Ok(());
            }
            let read = |index: u64, only: Option<usize>| {
                super::read_private_parts(shared, &snap, index, only)
            };
            let view = LogView::new(&snap, head, lookups).with_private(&read);
            run_batch(
                shared,
                &view,
                inputs,
                &mut replies,
                &mut frontier,
                &mut head,
                &mut *guard,
                hold,
            );
            Ok(())
        });
        drop(snap);
        if let Err(e) = ran {
            // The storage engine panicked (a damaged page, say). Nothing of
            // the batch is acknowledged; the committer lives on, reloads the
            // durable head and rebuilds the sequencer from the committed log,
            // exactly as after a failed commit.
            tracing::error!(error = %e, batch = replies.len(), "the storage engine failed during a batch; batch not acknowledged");
            shared.stats.commit_failures.fetch_add(1, Ordering::Relaxed);
            // The in-memory edge may have moved (a panic after the commit
            // returned, or during a recovery); the durable head is read back
            // before anything builds on it, and until that succeeds every
            // batch tries again first.
            (frontier, head) = before;
            must_recover = crate::store::guarded("recovering", || {
                recover(shared, &mut frontier, &mut head, &mut *guard)
            })
            .is_err();
            for reply in replies.iter_mut().filter_map(Option::take) {
                let _ = reply.send(Err(AppendError::Ledger(e.clone())));
            }
        }
    }
}

/// How often a committer with no writes queued reads the head of a log
/// others write too.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// Between batches: catches up with what other writers of a shared log
/// committed, if they did.
fn follow<S: Sequencer>(
    shared: &Shared,
    frontier: &mut Frontier,
    head: &mut Head,
    sequencer: &mut S,
) -> Result<(), Error> {
    let Some(at) = shared.store()?.shared_head()? else {
        return Ok(());
    };
    catch_up(shared, frontier, head, sequencer, at)
}

/// Brings the committer to `to`, the head other writers of a shared log
/// committed: checks that it extends the head this committer had (the
/// tree's root at the old size and the old last chain hash unchanged, the
/// new head's stored hashes hashing to its root), catches the lookups up,
/// folds the new entries into the sequencer ([`Sequencer::caught_up`]), and
/// publishes the new head. Nothing to do when `to` is the head it has.
fn catch_up<S: Sequencer>(
    shared: &Shared,
    frontier: &mut Frontier,
    head: &mut Head,
    sequencer: &mut S,
    to: Head,
) -> Result<(), Error> {
    if to == *head {
        return Ok(());
    }
    let moved_back = |why: &str| -> Error {
        crate::error::Corruption::new(
            head.size.min(to.size),
            crate::error::CorruptionKind::Tree,
            format!(
                "the shared log's head (size {}) does not extend the one this writer had (size {}): {why}",
                to.size, head.size
            ),
        )
        .into()
    };
    if to.size <= head.size {
        return Err(moved_back("it is not longer"));
    }
    let store = shared.store()?;
    let snap = store.writer_snapshot()?;
    let now = snap.head()?;
    if now.size < to.size {
        return Err(moved_back("the log read after it is shorter"));
    }
    let to = now;
    let next = self_check(&snap, &to)?;
    if head.size > 0 {
        let view = LogView::without_lookups(&snap, to);
        if view.root_at(head.size)? != head.root {
            return Err(moved_back("the tree at the old size has another root"));
        }
        if view.entry(head.size - 1)?.chain_hash != head.chain {
            return Err(moved_back("the old last entry has another chain hash"));
        }
    }
    let lookups = shared.lookups()?;
    catch_up_or_count::<S>(shared, lookups, &to)?;
    let read =
        |index: u64, only: Option<usize>| super::read_private_parts(shared, &snap, index, only);
    let view = LogView::new(&snap, to, lookups).with_private(&read);
    let from = head.size;
    sequencer.caught_up(&view);
    (*frontier, *head) = (next, to);
    *shared.head.write().unwrap_or_else(|p| p.into_inner()) = to;
    shared.watch.send_replace(to);
    tracing::debug!(from, to = to.size, "caught up with other writers");
    Ok(())
}

/// What happens to one request once its batch is committed.
enum Outcome<A, R> {
    Appended { at: usize, accepted: A },
    Existing { index: u64, accepted: A },
    Rejected(R),
    RefusedRecorded { at: usize, rejected: R },
}

/// Type of the outcomes of one batch, in request order.
type Outcomes<S> = Vec<Outcome<<S as Sequencer>::Accepted, <S as Sequencer>::Rejected>>;

/// What the sequencer made of one batch: the leaves to append (with their
/// envelope keys) and every request's outcome, in queue order.
struct Decided<S: Sequencer> {
    leaves: Vec<Vec<u8>>,
    keys: Vec<Option<EntryKey>>,
    /// Per leaf, in order: its private parts.
    private: Vec<Vec<Vec<u8>>>,
    /// Parts of earlier entries to shred once the batch is durable.
    shred: Vec<(u64, usize)>,
    outcomes: Outcomes<S>,
}

/// Sequences one batch, integrates the leaves it appends, commits them in one
/// transaction and answers every request. The in-memory `frontier` and `head`
/// advance only when the commit succeeds; after a failed commit they are
/// reloaded from disk.
#[allow(clippy::too_many_arguments)]
fn run_batch<S: Sequencer>(
    shared: &Shared,
    view: &LogView<'_>,
    inputs: Vec<S::Input>,
    replies: &mut [Option<Reply<S>>],
    frontier: &mut Frontier,
    head: &mut Head,
    sequencer: &mut S,
    hold: Hold,
) {
    let first_index = frontier.size();
    let decided = decide(sequencer, inputs, first_index, view);
    let Integrated {
        acks,
        stored,
        frontier: next_frontier,
        head: next_head,
    } = integrate(frontier, head, &decided.leaves);
    let result = if decided.leaves.is_empty() {
        Ok(())
    } else {
        commit(
            shared,
            first_index,
            &decided,
            stored,
            &acks,
            &next_head,
            hold,
        )
        .map(|()| {
            // The in-memory edge and head move only once the batch is durable.
            (*frontier, *head) = (next_frontier, next_head);
        })
    };
    let replies = replies.iter_mut().filter_map(Option::take);
    match result {
        Ok(()) => {
            sequencer.committed();
            for &(index, part) in &decided.shred {
                // A crash before this leaves the key in place; the
                // sequencer's owner shreds again on open (idempotent).
                if let Err(e) = super::shred_part(shared, index, part) {
                    shared
                        .stats
                        .redaction_failures
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::error!(index, part, error = %e, "could not destroy a redacted part's key; the part reads as destroyed, and the next open destroys the key");
                }
            }
            let n = decided.leaves.len() as u64;
            if n > 0 {
                let indexed = index_batch(shared, first_index, &decided, &acks, head);
                shared.stats.read_only.store(!indexed, Ordering::Relaxed);
                *shared.head.write().unwrap_or_else(|p| p.into_inner()) = *head;
                shared.watch.send_replace(*head);
                shared.stats.appends.fetch_add(n, Ordering::Relaxed);
                shared.stats.batches.fetch_add(1, Ordering::Relaxed);
                shared.stats.last_batch_size.store(n, Ordering::Relaxed);
            }
            let appended_at = |at: usize| Appended {
                index: first_index + at as u64,
                leaf_hash: acks[at].0,
                chain_hash: acks[at].1,
                tree_size: head.size,
                root: head.root,
            };
            for (outcome, reply) in decided.outcomes.into_iter().zip(replies) {
                let msg = match outcome {
                    Outcome::Appended { at, accepted } => Ok(Receipt {
                        appended: appended_at(at),
                        accepted,
                        existing: false,
                    }),
                    Outcome::Existing { index, accepted } => {
                        existing_appended(view, index, first_index, &acks, head).map(|appended| {
                            Receipt {
                                appended,
                                accepted,
                                existing: true,
                            }
                        })
                    }
                    Outcome::Rejected(reason) => Err(AppendError::Rejected {
                        reason,
                        recorded: None,
                    }),
                    Outcome::RefusedRecorded { at, rejected } => Err(AppendError::Rejected {
                        reason: rejected,
                        recorded: Some(Box::new(appended_at(at))),
                    }),
                };
                let _ = reply.send(msg);
            }
        }
        Err(e) => {
            tracing::error!(error = %e, batch = decided.outcomes.len(), "commit failed; batch not acknowledged");
            shared.stats.commit_failures.fetch_add(1, Ordering::Relaxed);
            // On failure a read-only view serves reads; the next batch retries.
            let _ = recover(shared, frontier, head, sequencer);
            // Storage refused this write even if the file reopened (a full
            // disk reopens fine and still refuses): writes are refused
            // until one commits again.
            shared.stats.read_only.store(true, Ordering::Relaxed);
            for (outcome, reply) in decided.outcomes.into_iter().zip(replies) {
                let msg = match outcome {
                    // A refusal that needed no record stands regardless.
                    Outcome::Rejected(reason) => Err(AppendError::Rejected {
                        reason,
                        recorded: None,
                    }),
                    _ => Err(AppendError::Ledger(e.clone())),
                };
                let _ = reply.send(msg);
            }
        }
    }
}

/// Writes the lookup rows of a committed batch, before its head is
/// published: a reader that sees the head finds its entries by leaf hash and
/// key. Not durable by itself (see [`crate::lookup`]); a failure is logged
/// and the next batch catches the lookups up from the entries first.
fn index_batch<S: Sequencer>(
    shared: &Shared,
    first_index: u64,
    decided: &Decided<S>,
    acks: &[(Hash, Hash)],
    head: &Head,
) -> bool {
    // Open: the batch that got here waited for them.
    let Ok(lookups) = shared.lookups() else {
        return false;
    };
    let rows: Vec<LookupRow<'_>> = decided
        .keys
        .iter()
        .zip(acks)
        .enumerate()
        .map(|(at, (key, (leaf_hash, _)))| LookupRow {
            index: first_index + at as u64,
            leaf_hash,
            key: key.as_ref().map(|k| (k.name.as_str(), k.digest)),
        })
        .collect();
    match lookups.add(first_index, &rows, head.size, &head.root, S::KEYED, true) {
        Ok(()) => true,
        Err(e) => {
            shared.stats.lookup_failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %e, "writing the lookups of a committed batch failed; the next batch catches them up");
            false
        }
    }
}

/// Catches the lookups up to `head` when they are behind it (a failed
/// lookup write, or a batch that reported failure but persisted). A failure
/// is counted and logged, the store is reopened (after a failed write,
/// fjall refuses every later one until it is), and the storage error is
/// returned: until a later try succeeds, at most every [`LOOKUP_RETRY`],
/// writes are refused as storage that cannot take them, and lookups answer
/// an error, never "absent".
fn catch_up_or_count<S: Sequencer>(
    shared: &Shared,
    lookups: &Lookups,
    head: &Head,
) -> Result<(), Error> {
    let keys_behind = S::KEYED && lookups.keys_through() < head.size;
    if !keys_behind && lookups.leaves_through() >= head.size {
        return Ok(());
    }
    let mut retry = shared
        .lookup_retry
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if retry.is_some_and(|at| Instant::now() < at) {
        return Err(crate::lookup::lookup_err(
            "the lookups are behind the log after a failed write; writing them is tried again shortly",
        ));
    }
    match shared
        .store()
        .and_then(|s| super::catch_up_lookups::<S>(&s, lookups, head, &NOT_CLOSING))
    {
        Ok(()) => {
            *retry = None;
            shared.stats.read_only.store(false, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => {
            *retry = Some(Instant::now() + LOOKUP_RETRY);
            shared.stats.lookup_failures.fetch_add(1, Ordering::Relaxed);
            shared.stats.read_only.store(true, Ordering::Relaxed);
            tracing::error!(error = %e, "cannot catch the lookups up; writes are refused until they are");
            if let Err(r) = lookups.reopen() {
                tracing::error!(error = %r, "reopening the lookups failed; tried again with the next catch-up");
            }
            Err(e)
        }
    }
}

/// A catch-up between batches runs to the end: the log waits for the
/// committer when it closes.
static NOT_CLOSING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How long after a failed catch-up of the lookups the next is tried.
const LOOKUP_RETRY: Duration = Duration::from_secs(5);

/// Asks the sequencer about each input in queue order; input `i` is
/// decided knowing every earlier one, and a leaf it appends goes at index
/// `first_index` plus the leaves before it.
fn decide<S: Sequencer>(
    sequencer: &mut S,
    inputs: Vec<S::Input>,
    first_index: u64,
    view: &LogView<'_>,
) -> Decided<S> {
    let mut d = Decided {
        leaves: Vec::new(),
        keys: Vec::new(),
        private: Vec::new(),
        shred: Vec::new(),
        outcomes: Vec::with_capacity(inputs.len()),
    };
    for input in inputs {
        let next = first_index + d.leaves.len() as u64;
        let outcome = match sequencer.sequence(input, next, view) {
            Sequenced::Append {
                leaf,
                accepted,
                key,
                private,
                shred,
            } => {
                d.leaves.push(leaf);
                d.keys.push(key);
                d.private.push(private);
                d.shred.extend(shred);
                Outcome::Appended {
                    at: d.leaves.len() - 1,
                    accepted,
                }
            }
            Sequenced::Existing { index, accepted } => Outcome::Existing { index, accepted },
            Sequenced::Reject(r) => Outcome::Rejected(r),
            Sequenced::RefuseRecorded {
                leaf,
                rejected,
                key,
            } => {
                d.leaves.push(leaf);
                d.keys.push(key);
                d.private.push(Vec::new());
                Outcome::RefusedRecorded {
                    at: d.leaves.len() - 1,
                    rejected,
                }
            }
        };
        d.outcomes.push(outcome);
    }
    d
}

/// Writes the batch's rows (leaf, chain hash, stored tree hashes) and the
/// new head in one durable transaction.
fn commit<S: Sequencer>(
    shared: &Shared,
    first_index: u64,
    decided: &Decided<S>,
    stored: Vec<Vec<Hash>>,
    acks: &[(Hash, Hash)],
    next_head: &Head,
    hold: Hold,
) -> Result<(), Error> {
    let rows: Vec<Row<'_>> = decided
        .leaves
        .iter()
        .zip(stored)
        .zip(acks)
        .enumerate()
        .map(|(at, ((leaf, hashes), &(_, chain)))| {
            let index = first_index + at as u64;
            Row {
                index,
                leaf,
                chain,
                first_hash_index: stored_hash_index(0, index),
                hashes,
            }
        })
        .collect();
    let mut private = seal_private(shared, first_index, &decided.private)?;
    private.redacted = decided
        .shred
        .iter()
        .map(|&(index, part)| (index, part as u16))
        .collect();
    shared
        .store()
        .and_then(|s| s.commit_held(hold, &rows, &private, next_head))
}

/// Seals the batch's private parts, each under a fresh key, and makes the
/// keys durable before the transaction that refers to them: a committed
/// row never names a key that a crash lost. Keys written for a batch that
/// then fails to commit are never referred to.
fn seal_private(
    shared: &Shared,
    first_index: u64,
    private: &[Vec<Vec<u8>>],
) -> Result<crate::private::Batch, Error> {
    let count: usize = private.iter().map(Vec::len).sum();
    if count == 0 {
        return Ok(crate::private::Batch::default());
    }
    let keys = crate::private::fresh_keys(count)?;
    let mut first_slot = {
        let snap = shared.store()?.writer_snapshot()?;
        let mut file = super::key_file(shared, &snap)?;
        file.as_mut().map(|f| f.append(&keys)).unwrap_or(Ok(0))?
    };
    let mut rows = Vec::new();
    let mut used = 0;
    for (at, parts) in private.iter().enumerate() {
        if parts.is_empty() {
            continue;
        }
        let index = first_index + at as u64;
        let these = &keys[used..used + parts.len()];
        rows.push((
            index,
            crate::private::encode_record(index, parts, these, first_slot)?,
        ));
        used += parts.len();
        first_slot += parts.len() as u64;
    }
    Ok(crate::private::Batch {
        rows,
        next_slot: Some(first_slot),
        redacted: Vec::new(),
    })
}

/// What integrating a batch's leaves into the tree and the chain yields:
/// everything the store writes for them besides the leaves and their keys.
#[derive(Debug, Clone)]
pub(crate) struct Integrated {
    /// Per leaf, in order: its RFC 6962 leaf hash and its chain hash.
    pub(crate) acks: Vec<(Hash, Hash)>,
    /// Per leaf, in order: the stored hashes its append writes (its leaf
    /// hash, then each subtree it completes, bottom up), from
    /// `stored_hash_index(0, index)` on.
    pub(crate) stored: Vec<Vec<Hash>>,
    /// The tree's right edge after the batch.
    pub(crate) frontier: Frontier,
    /// The head after the batch: size, root and last chain hash.
    pub(crate) head: Head,
}

/// Integrates `leaves`, appended in order after the log whose right edge is
/// `frontier` and whose head is `head` (of the same size). Pure: it computes
/// what the commit writes and touches no storage. No leaves leave the edge
/// and the head as they are.
pub(crate) fn integrate(frontier: &Frontier, head: &Head, leaves: &[Vec<u8>]) -> Integrated {
    let mut frontier = frontier.clone();
    let mut chain = head.chain;
    let mut acks = Vec::with_capacity(leaves.len());
    let mut stored = Vec::with_capacity(leaves.len());
    for leaf in leaves {
        let lh = leaf_hash(leaf);
        stored.push(frontier.push(lh));
        chain = chain_hash(&chain, leaf);
        acks.push((lh, chain));
    }
    let head = if leaves.is_empty() {
        *head
    } else {
        Head {
            size: frontier.size(),
            root: frontier.root(),
            chain,
        }
    };
    Integrated {
        acks,
        stored,
        frontier,
        head,
    }
}

/// The acknowledgement of an entry already in the log: committed before this
/// batch, or earlier in it.
fn existing_appended<R>(
    view: &LogView<'_>,
    index: u64,
    first_index: u64,
    acks: &[(Hash, Hash)],
    head: &Head,
) -> Result<Appended, AppendError<R>> {
    let (leaf_hash, chain_hash) = if index >= first_index {
        acks.get((index - first_index) as usize)
            .copied()
            .ok_or(Error::IndexOutOfRange {
                index,
                size: head.size,
            })?
    } else {
        let e = view.entry(index)?;
        (e.leaf_hash, e.chain_hash)
    };
    Ok(Appended {
        index,
        leaf_hash,
        chain_hash,
        tree_size: head.size,
        root: head.root,
    })
}

/// Reopens the store after a failed commit (or while a read-only fallback
/// serves reads) and brings the committer's head and the sequencer in line
/// with what is on disk. If the reopen fails, a read-only view of the last
/// durable commit serves reads ([`Store::open_fallback`]), writes are refused
/// with the reopen's error, and the next batch tries again.
fn recover<S: Sequencer>(
    shared: &Shared,
    frontier: &mut Frontier,
    head: &mut Head,
    sequencer: &mut S,
) -> Result<(), Error> {
    match reopen(shared) {
        Ok((h, f)) => {
            if h != *head {
                tracing::warn!(
                    size = h.size,
                    "a batch that reported failure had persisted; the head includes it"
                );
                // It may have recorded a redaction: its key is destroyed
                // now, not at the next open.
                if let Err(e) = super::destroy_redacted_keys(shared) {
                    shared
                        .stats
                        .redaction_failures
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::error!(error = %e, "could not destroy the keys of redacted parts; they read as destroyed, and the next open tries again");
                }
            }
            (*frontier, *head) = (f, h);
            // A batch that reported failure may have persisted: its lookups
            // are written before the head that includes it is published.
            // Open: only a batch that waited for them gets here.
            let Ok(lookups) = shared.lookups() else {
                return Ok(());
            };
            let _ = catch_up_or_count::<S>(shared, lookups, &h);
            *shared.head.write().unwrap_or_else(|p| p.into_inner()) = h;
            shared.watch.send_replace(h);
            match shared.store().and_then(|s| s.snapshot()) {
                Ok(snap) => {
                    // With the private parts: the sequencer learns the
                    // values behind handles the log now holds.
                    let read = |index: u64, only: Option<usize>| {
                        super::read_private_parts(shared, &snap, index, only)
                    };
                    sequencer.failed(&LogView::new(&snap, h, lookups).with_private(&read))
                }
                Err(e) => tracing::error!(error = %e, "cannot read the reopened log"),
            }
            tracing::info!(size = h.size, "storage reopened after a failed commit");
            Ok(())
        }
        Err(e) => {
            tracing::error!(error = %e, "reopening storage failed; writes refused until it succeeds");
            Err(e)
        }
    }
}

/// How long a recovery waits for the readers of a read-only fallback view to
/// finish before it gives up for this batch (a full verify can hold one for
/// minutes; the next batch tries again).
const FALLBACK_DRAIN: Duration = Duration::from_secs(2);

/// After a failed commit: redb refuses every operation until reopened, so
/// drop the database, open it again, and reload the committed head from disk
/// (a batch that reported failure may have persisted). Returns the head, its
/// right edge, and a fresh snapshot for the sequencer to rebuild from.
///
/// When the reopen fails, a read-only fallback view is installed so that
/// verified reads go on. A fallback view's readers must be gone before the
/// real database is reopened: once writes resume, redb may reuse pages the
/// fallback's snapshots still read.
fn reopen(shared: &Shared) -> Result<(Head, Frontier), Error> {
    let old = shared
        .store
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    if let Some(old) = old {
        if old.is_fallback() {
            let deadline = Instant::now() + FALLBACK_DRAIN;
            while old.readers() > 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            if old.readers() > 0 {
                *shared.store.write().unwrap_or_else(|p| p.into_inner()) = Some(old);
                return Err(Error::Busy);
            }
        }
        drop(old);
    }
    // Never create a log here: a data directory that lost its log (its
    // data file or its `storage` file removed under a running server) must
    // not be reopened as a new, empty one.
    if crate::store::Location::of(&shared.dir)?.is_none() {
        return Err(crate::error::storage(redb::StorageError::Io(
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} no longer holds its log", shared.dir.display()),
            ),
        )));
    }
    let mut last = Error::Busy;
    // Readers may still hold the old database (and its file lock) briefly.
    for _ in 0..20 {
        match open_checked(&shared.dir, shared.backend.as_ref(), Store::open_with) {
            Ok((store, head, frontier)) => {
                store.set_segment_entries(shared.segment_entries);
                *shared.store.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(store));
                shared.stats.read_only.store(false, Ordering::Relaxed);
                return Ok((head, frontier));
            }
            Err(e) => {
                last = e;
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    match open_checked(&shared.dir, shared.backend.as_ref(), Store::open_fallback) {
        Ok((store, head, _)) => {
            tracing::warn!(
                size = head.size,
                "serving reads from a read-only view of the last durable commit"
            );
            // Reads are bounded by the head the committer last published; a
            // batch that reported failure but persisted shows up after the
            // real reopen, never before.
            *shared.store.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(store));
            shared.stats.read_only.store(true, Ordering::Relaxed);
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot open a read-only view either; reads refused");
            shared.stats.read_only.store(false, Ordering::Relaxed);
        }
    }
    Err(last)
}

type OpenFn = fn(&Path, Option<&crate::store::BackendFactory>) -> Result<Store, Error>;

/// Opens a store and runs the O(log n) self-check on its head.
fn open_checked(
    dir: &Path,
    backend: Option<&crate::store::BackendFactory>,
    open: OpenFn,
) -> Result<(Store, Head, Frontier), Error> {
    let store = open(dir, backend)?;
    let snap = store.snapshot()?;
    let head = snap.head()?;
    let frontier = self_check(&snap, &head)?;
    drop(snap);
    Ok((store, head, frontier))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::GENESIS_CHAIN;
    use crate::merkle::tests::reference_root;
    use crate::merkle::{last_leaf_of_stored, split_stored_hash_index, stored_hash_count};
    use proptest::collection::vec;
    use proptest::prelude::*;

    proptest! {
        /// Integrating leaves batch by batch, each batch from the edge and
        /// head the one before left, agrees with a computation from scratch
        /// over every leaf so far: leaf hashes, the chain folded link by
        /// link from genesis, every stored hash as the RFC 6962 root of the
        /// subtree its index names (written by that subtree's last leaf),
        /// and the head's root as the RFC 6962 root of all leaf hashes.
        #[test]
        fn integrate_agrees_with_the_tree_and_chain_from_scratch(
            batches in vec(vec(vec(any::<u8>(), 0..16), 0..40), 1..8),
        ) {
            let (mut frontier, mut head) = (Frontier::new(), Head::EMPTY);
            let mut leaves: Vec<Vec<u8>> = Vec::new();
            for batch in batches {
                let first = leaves.len() as u64;
                let got = integrate(&frontier, &head, &batch);
                leaves.extend(batch.iter().cloned());

                let hashes: Vec<Hash> = leaves.iter().map(|l| leaf_hash(l)).collect();
                let mut chains = Vec::with_capacity(leaves.len());
                let mut chain = GENESIS_CHAIN;
                for leaf in &leaves {
                    chain = chain_hash(&chain, leaf);
                    chains.push(chain);
                }

                prop_assert_eq!(got.acks.len(), batch.len());
                prop_assert_eq!(got.stored.len(), batch.len());
                for (at, (&(lh, ch), written)) in got.acks.iter().zip(&got.stored).enumerate() {
                    let index = first + at as u64;
                    prop_assert_eq!(lh, hashes[index as usize]);
                    prop_assert_eq!(ch, chains[index as usize]);
                    prop_assert_eq!(written[0], lh);
                    for (k, h) in written.iter().enumerate() {
                        let stored_index = stored_hash_index(0, index) + k as u64;
                        prop_assert_eq!(last_leaf_of_stored(stored_index), index);
                        let (level, n) = split_stored_hash_index(stored_index);
                        let span = (n << level) as usize..((n + 1) << level) as usize;
                        prop_assert_eq!(*h, reference_root(&hashes[span]));
                    }
                }
                let written: u64 = got.stored.iter().map(|s| s.len() as u64).sum();
                prop_assert_eq!(
                    written,
                    stored_hash_count(leaves.len() as u64) - stored_hash_count(first)
                );

                let want = Head {
                    size: leaves.len() as u64,
                    root: reference_root(&hashes),
                    chain: chains.last().copied().unwrap_or(GENESIS_CHAIN),
                };
                prop_assert_eq!(got.head, want);
                prop_assert_eq!(got.frontier.size(), want.size);
                prop_assert_eq!(got.frontier.root(), want.root);
                (frontier, head) = (got.frontier, got.head);
            }
        }
    }

    #[test]
    fn integrating_no_leaves_leaves_edge_and_head_as_they_are() {
        let mut frontier = Frontier::new();
        for i in 0..5u8 {
            frontier.push(leaf_hash(&[i]));
        }
        let head = Head {
            size: 5,
            root: frontier.root(),
            chain: Hash([7; 32]),
        };
        let got = integrate(&frontier, &head, &[]);
        assert!(got.acks.is_empty() && got.stored.is_empty());
        assert_eq!(got.head, head);
        assert_eq!(got.frontier.nodes(), frontier.nodes());
    }
}
