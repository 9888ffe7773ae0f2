//! What an open checks and prepares before the committer runs: the O(log n)
//! self-check of the tree ([`self_check`]), and the lookups by leaf hash
//! and entry key, opened on a thread of their own beside the rest of the
//! open ([`open_lookups_beside`]) and caught up from the entries
//! ([`catch_up_lookups`]).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::{Corruption, CorruptionKind, Error};
use crate::hash::leaf_hash;
use crate::lookup::{LookupRow, Lookups};
use crate::merkle::Frontier;
use crate::store::{Head, Snapshot, Store};

use super::{checked_entry, Sequencer, Shared};

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
    pub(super) cell: std::sync::OnceLock<Result<Lookups, Error>>,
    /// Wakes the lookups that wait a bounded time ([`Shared::lookups_now`]).
    opened: (std::sync::Mutex<()>, std::sync::Condvar),
    /// Set when the log is closing: the opener stops at its next chunk.
    pub(super) closing: std::sync::atomic::AtomicBool,
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
pub(super) fn open_lookups_beside<S: Sequencer>(shared: &Shared, head: Head) {
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
    pub(super) fn lookups(&self) -> Result<&Lookups, Error> {
        self.lookups.cell.wait().as_ref().map_err(Error::clone)
    }

    /// The lookups, waiting a few seconds at most while the start opens
    /// them ([`LOOKUP_OPEN_WAIT`]); an error past that.
    pub(super) fn lookups_now(&self) -> Result<&Lookups, Error> {
        match self.lookups.within(LOOKUP_OPEN_WAIT) {
            Some(Ok(l)) => Ok(l),
            Some(Err(e)) => Err(e.clone()),
            None => Err(crate::lookup::lookup_err(
                "still being opened after a start (or rebuilt from the entries, when they were not this log's); retry shortly",
            )),
        }
    }
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
