//! Verification of a data directory, independent of [`crate::Ledger`].
//!
//! - [`verify_dir`] walks every entry. It recomputes each leaf hash, chain hash
//!   and stored tree hash and the head, and reports the first bad index and what
//!   is wrong there.
//! - [`verify_dir_from`] starts from a trusted `(size, root)`. It checks that
//!   the stored tree at `size` hashes to `root` (O(log n)), then walks only the
//!   entries after `size`. It does not re-hash entries before `size`: those are
//!   committed to by the trusted root, and are re-checked on every read and by a
//!   full walk. It takes the chain hash at `size - 1` from storage as the
//!   starting link.
//!
//! Neither needs the log to pass the open-time self-check, so both can locate
//! damage that makes [`crate::Ledger::open`] refuse.

use std::path::Path;

use crate::error::{Corruption, CorruptionKind, Error};
use crate::hash::{leaf_hash, Hash, GENESIS_CHAIN};
use crate::log::load_frontier;
use crate::merkle::{stored_hash_count, stored_hash_index, Frontier};
use crate::store::{Snapshot, Store, StoredEntry};

/// A log that verified.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verified {
    /// Entries in the log.
    pub size: u64,
    /// Its RFC 6962 root.
    pub root: Hash,
    /// Its last chain hash.
    pub chain: Hash,
    /// How many entries this run re-hashed.
    pub checked: u64,
}

/// How often the progress callback is called, in entries.
pub const PROGRESS_EVERY: u64 = 4096;

/// Full verify of the log in `dir`. `progress(done, total)` is called every
/// [`PROGRESS_EVERY`] entries and at the end.
pub fn verify_dir(dir: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<Verified, Error> {
    let store = Store::open_existing(dir)?;
    let snap = store.snapshot()?;
    verify_snapshot(&snap, progress)
}

/// Full verify of one consistent snapshot.
pub fn verify_snapshot(
    snap: &Snapshot,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Verified, Error> {
    let head = snap.head()?;
    walk(
        snap,
        head.size,
        head.root,
        head.chain,
        0,
        Frontier::new(),
        GENESIS_CHAIN,
        progress,
    )
}

/// What [`verify_indexes`] checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexesVerified {
    /// The entries the leaf-hash lookup covers (its watermark, at most the
    /// log's size); the rest are indexed by the next open or batch.
    pub covered: u64,
    /// The entries the key lookup covers, the same way.
    pub keys_covered: u64,
    /// Rows of the leaf-hash lookup naming a covered entry (one per
    /// distinct leaf hash).
    pub leaf_rows: u64,
    /// Rows of the entry-key (envelope id) lookup naming a covered entry.
    pub key_rows: u64,
}

/// Checks the lookups ([`crate::lookup`]) against the first `size` entries,
/// which a full verify has already proven. Below each lookup's watermark:
/// - the watermark's root is the log's root at its size (the lookups are
///   this log's);
/// - every entry's leaf hash has a row naming it, or an earlier entry with
///   the same leaf hash, and no other row names a covered entry;
/// - every entry that carries a key (`key_of`: an envelope id and payload
///   digest) has a row naming that entry and digest, and no other row names
///   a covered entry.
///
/// A disagreement is [`CorruptionKind::Index`] at the first entry it
/// concerns (or at a watermark, for a surplus row or a foreign watermark).
/// Lookups answer "which entry has this id or leaf hash?"; a wrong answer
/// would make an existing entry look absent (answered 404, or appended a
/// second time) or a new one look taken. A row naming an entry at or past
/// the watermark is not checked: the lookups are rebuilt from there.
pub fn verify_indexes(
    snap: &Snapshot,
    lookups: &crate::lookup::Lookups,
    marks: &[Option<(u64, Hash)>; 2],
    size: u64,
    key_of: &dyn Fn(&[u8]) -> Option<crate::EntryKey>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<IndexesVerified, Error> {
    let bad = |index: u64, what: String| -> Error {
        Corruption::new(index, CorruptionKind::Index, what).into()
    };
    if let Some(why) = lookups.not_this_logs(snap, size, marks)? {
        let at = marks.iter().flatten().map(|m| m.0).min().unwrap_or(0);
        return Err(bad(
            at.min(size),
            format!("the lookups are not this log's: {why}"),
        ));
    }
    let [covered, keys_covered] = marks.map(|m| m.map_or(0, |(s, _)| s));
    let last = covered.max(keys_covered);
    let (mut distinct, mut keyed) = (0u64, 0u64);
    let mut next = 0u64;
    for rec in snap.records_from(0)? {
        let (index, rec) = rec?;
        if index >= last {
            break;
        }
        if index != next {
            return Err(Corruption::new(next, CorruptionKind::MissingEntry, "entry absent").into());
        }
        next += 1;
        let entry = StoredEntry::decode(index, &rec)?;
        let lh = leaf_hash(&entry.leaf);
        match lookups.leaf(&lh)? {
            _ if index >= covered => {}
            None => return Err(bad(index, "no leaf-hash lookup row for this entry".into())),
            Some(i) if i == index => distinct += 1,
            Some(i) if i < index => {
                let earlier = snap.hashes_at(&[stored_hash_index(0, i)])?[0];
                if earlier != lh {
                    return Err(bad(
                        index,
                        format!("the leaf-hash lookup names entry {i}, which has another leaf"),
                    ));
                }
            }
            Some(i) => {
                return Err(bad(
                    index,
                    format!("the leaf-hash lookup names the later entry {i}"),
                ))
            }
        }
        if let Some(k) = key_of(&entry.leaf).filter(|_| index < keys_covered) {
            match lookups.key(&k.name)? {
                Some((i, digest)) if i == index && digest == k.digest => keyed += 1,
                Some((i, _)) if i != index => {
                    return Err(bad(
                        index,
                        format!("the id lookup names entry {i} for this entry's id"),
                    ))
                }
                Some(_) => {
                    return Err(bad(
                        index,
                        "the id lookup holds another payload digest for this entry".into(),
                    ))
                }
                None => return Err(bad(index, "no id lookup row for this entry".into())),
            }
        }
        if index % PROGRESS_EVERY == 0 {
            progress(index, last);
        }
    }
    if next < last {
        return Err(Corruption::new(next, CorruptionKind::MissingEntry, "entry absent").into());
    }
    let (leaf_rows, key_rows) = lookups.rows_below(covered, keys_covered)?;
    if leaf_rows != distinct {
        return Err(bad(
            covered,
            format!("the leaf-hash lookup has {leaf_rows} rows for {distinct} distinct leaves"),
        ));
    }
    if key_rows != keyed {
        return Err(bad(
            keys_covered,
            format!("the id lookup has {key_rows} rows for {keyed} entries with ids"),
        ));
    }
    progress(last, last);
    Ok(IndexesVerified {
        covered,
        keys_covered,
        leaf_rows,
        key_rows,
    })
}

/// [`verify_indexes`] of the log in `dir`, with the keys its sequencer `S`
/// gives entries (run it after [`verify_dir`] has passed). A directory
/// without lookups covers nothing (the next open builds them), and none are
/// created; opening existing ones takes their lock and replays their
/// journal, as any open does.
pub fn verify_dir_indexes<S: crate::Sequencer>(
    dir: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<IndexesVerified, Error> {
    let store = Store::open_existing(dir)?;
    let snap = store.snapshot()?;
    let size = snap.head()?.size;
    if !dir.join(crate::lookup::LOOKUP_DIR).is_dir() {
        return Ok(IndexesVerified {
            covered: 0,
            keys_covered: 0,
            leaf_rows: 0,
            key_rows: 0,
        });
    }
    let lookups = crate::lookup::Lookups::open(dir)?;
    let marks = lookups.watermarks()?;
    crate::store::guarded("checking the lookups", || {
        verify_indexes(&snap, &lookups, &marks, size, &S::key_of, progress)
    })
}

/// Incremental verify from a trusted `(size, root)`.
pub fn verify_dir_from(
    dir: &Path,
    trusted_size: u64,
    trusted_root: &Hash,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Verified, Error> {
    let store = Store::open_existing(dir)?;
    let snap = store.snapshot()?;
    verify_snapshot_from(&snap, trusted_size, trusted_root, progress)
}

/// Incremental verify of one consistent snapshot from a trusted
/// `(size, root)`: the stored tree at `trusted_size` must hash to
/// `trusted_root` (O(log n) stored hashes), then every entry after it is
/// walked as [`verify_snapshot`] walks them all. A log shorter than
/// `trusted_size` is [`CorruptionKind::MissingEntry`]; a tree that does not
/// hash to the trusted root is [`CorruptionKind::Tree`].
pub fn verify_snapshot_from(
    snap: &Snapshot,
    trusted_size: u64,
    trusted_root: &Hash,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Verified, Error> {
    let head = snap.head()?;
    if trusted_size > head.size {
        return Err(Corruption::new(
            head.size,
            CorruptionKind::MissingEntry,
            format!(
                "log has {} entries, fewer than the trusted size {trusted_size}",
                head.size
            ),
        )
        .into());
    }
    let frontier = load_frontier(snap, trusted_size)?;
    if frontier.root() != *trusted_root {
        return Err(Corruption::new(
            trusted_size,
            CorruptionKind::Tree,
            "stored tree at the trusted size does not hash to the trusted root",
        )
        .into());
    }
    let chain = if trusted_size == 0 {
        GENESIS_CHAIN
    } else {
        snap.entry(trusted_size - 1)?
            .ok_or_else(|| {
                Corruption::new(
                    trusted_size - 1,
                    CorruptionKind::MissingEntry,
                    "entry absent",
                )
            })?
            .chain
    };
    walk(
        snap,
        head.size,
        head.root,
        head.chain,
        trusted_size,
        frontier,
        chain,
        progress,
    )
}

/// Entries per chunk of the verify pipeline.
const CHUNK: usize = 512;
/// Chunks in flight between two stages of the pipeline.
const IN_FLIGHT: usize = 8;
/// Hashing workers. The leaf hashes (SHA-256 and BLAKE3 over every leaf's
/// bytes) are most of a walk's work; two workers let it use both cores of
/// the machine the targets are set for, with the reader and the in-order
/// check beside them.
const HASHERS: usize = 2;

/// One entry as the hashing stage hands it on: its index and, when its
/// record decodes, its stored chain hash, its RFC 6962 leaf hash and its
/// BLAKE3 content digest.
type HashedEntry = (u64, Result<(Hash, Hash, [u8; 32]), Corruption>);

/// A chunk of raw entry records (index, stored record) read in order, or
/// the storage error that ended the read.
type RawChunk = Result<Vec<(u64, Vec<u8>)>, Error>;

/// Reads the entries from `start` in chunks and deals them to the hashing
/// workers in turn (chunk `k` to worker `k mod n`); stops at the first
/// storage error (sent, in turn, as the last item) or when a receiver is
/// gone.
fn read_stage(snap: &Snapshot, start: u64, txs: Vec<crossbeam_channel::Sender<RawChunk>>) {
    let mut turn = 0;
    let mut send = |item: RawChunk| {
        let sent = txs[turn % txs.len()].send(item).is_ok();
        turn += 1;
        sent
    };
    let records = match snap.records_from(start) {
        Ok(r) => r,
        Err(e) => {
            send(Err(e));
            return;
        }
    };
    let mut chunk = Vec::with_capacity(CHUNK);
    for item in records {
        match item {
            Ok(record) => chunk.push(record),
            Err(e) => {
                if send(Ok(std::mem::take(&mut chunk))) {
                    send(Err(e));
                }
                return;
            }
        }
        if chunk.len() == CHUNK
            && !send(Ok(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK))))
        {
            return;
        }
    }
    send(Ok(chunk));
}

/// Hashes each entry's leaf (the work that depends on nothing but the leaf)
/// and sends the results on, in order.
fn hash_stage(
    rx: crossbeam_channel::Receiver<RawChunk>,
    tx: crossbeam_channel::Sender<Result<Vec<HashedEntry>, Error>>,
) {
    for chunk in rx {
        let out = chunk.map(|entries| {
            entries
                .into_iter()
                .map(|(index, rec)| {
                    let hashed = StoredEntry::decode(index, &rec).map(|e| {
                        (
                            e.chain,
                            leaf_hash(&e.leaf),
                            crate::hash::content_digest(&e.leaf),
                        )
                    });
                    (index, hashed)
                })
                .collect()
        });
        if tx.send(out).is_err() {
            return;
        }
    }
}

/// Walks every entry from `start`: a reader and [`HASHERS`] hashing threads
/// run ahead of this one, which checks, in index order, the index sequence, every
/// stored hash the entry's append wrote, and the chain; the first failure is
/// the one reported, as in a sequential walk. Returns once the last entry is
/// checked or at the first failure (dropping its receiver stops the other
/// stages).
#[allow(clippy::too_many_arguments)]
fn walk(
    snap: &Snapshot,
    size: u64,
    head_root: Hash,
    head_chain: Hash,
    start: u64,
    frontier: Frontier,
    chain: Hash,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Verified, Error> {
    std::thread::scope(|s| {
        let mut to_hash = Vec::with_capacity(HASHERS);
        let mut hashed = Vec::with_capacity(HASHERS);
        for _ in 0..HASHERS {
            let (read_tx, read_rx) = crossbeam_channel::bounded(IN_FLIGHT);
            let (hash_tx, hash_rx) = crossbeam_channel::bounded(IN_FLIGHT);
            s.spawn(move || hash_stage(read_rx, hash_tx));
            to_hash.push(read_tx);
            hashed.push(hash_rx);
        }
        s.spawn(move || read_stage(snap, start, to_hash));
        // Collect from the workers in the order the chunks were dealt; the
        // walk ends when the worker whose turn it is has nothing more.
        let mut turn = 0;
        let in_order = std::iter::from_fn(move || {
            let next = hashed[turn % HASHERS].recv().ok();
            turn += 1;
            next
        });
        check_stage(
            snap, in_order, size, head_root, head_chain, start, frontier, chain, progress,
        )
    })
}

#[allow(clippy::too_many_arguments)]
fn check_stage(
    snap: &Snapshot,
    hashed: impl Iterator<Item = Result<Vec<HashedEntry>, Error>>,
    size: u64,
    head_root: Hash,
    head_chain: Hash,
    start: u64,
    mut frontier: Frontier,
    mut chain: Hash,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Verified, Error> {
    let total = size - start;
    let mut hashes = snap.hashes_from(stored_hash_index(0, start))?;
    let mut next_hash_index = stored_hash_index(0, start);
    let mut expected = start;

    for chunk in hashed {
        for (index, decoded) in chunk? {
            if index != expected {
                let (at, kind) = if expected >= size {
                    (index, CorruptionKind::ExtraEntry)
                } else {
                    (expected, CorruptionKind::MissingEntry)
                };
                return Err(Corruption::new(at, kind, "entry index sequence broken").into());
            }
            if index >= size {
                return Err(Corruption::new(
                    index,
                    CorruptionKind::ExtraEntry,
                    "entry beyond the head",
                )
                .into());
            }
            let (stored_chain, lh, digest) = decoded?;
            let recomputed = frontier.push(lh);
            for (k, want) in recomputed.iter().enumerate() {
                let got = match hashes.next() {
                    Some(item) => {
                        let (hk, hv) = item?;
                        if hk != next_hash_index {
                            return Err(Corruption::new(
                                index,
                                CorruptionKind::MissingEntry,
                                format!("stored hash {next_hash_index} missing"),
                            )
                            .into());
                        }
                        hv
                    }
                    None => {
                        return Err(Corruption::new(
                            index,
                            CorruptionKind::MissingEntry,
                            format!("stored hash {next_hash_index} missing"),
                        )
                        .into())
                    }
                };
                if got != *want {
                    let (kind, what) = if k == 0 {
                        (
                            CorruptionKind::Leaf,
                            "entry bytes do not match the stored leaf hash".to_string(),
                        )
                    } else {
                        (
                            CorruptionKind::Tree,
                            format!("stored hash {next_hash_index} (level {k}) differs"),
                        )
                    };
                    return Err(Corruption::new(index, kind, what).into());
                }
                next_hash_index += 1;
            }
            chain = crate::hash::chain_hash_from_digest(&chain, &digest);
            if chain != stored_chain {
                return Err(Corruption::new(
                    index,
                    CorruptionKind::Chain,
                    "stored chain hash differs",
                )
                .into());
            }
            expected += 1;
            if (expected - start).is_multiple_of(PROGRESS_EVERY) {
                progress(expected - start, total);
            }
        }
    }
    if expected < size {
        return Err(Corruption::new(
            expected,
            CorruptionKind::MissingEntry,
            "log ends before the head's size",
        )
        .into());
    }
    if let Some(item) = hashes.next() {
        let (hk, _) = item?;
        return Err(Corruption::new(
            size,
            CorruptionKind::ExtraEntry,
            format!("stored hash {hk} beyond the head"),
        )
        .into());
    }
    debug_assert_eq!(next_hash_index, stored_hash_count(size));
    if frontier.root() != head_root {
        return Err(Corruption::new(
            size,
            CorruptionKind::Tree,
            "head root differs from the recomputed root",
        )
        .into());
    }
    if chain != head_chain {
        return Err(Corruption::new(
            size,
            CorruptionKind::Chain,
            "head chain differs from the recomputed chain",
        )
        .into());
    }
    progress(total, total);
    Ok(Verified {
        size,
        root: head_root,
        chain,
        checked: total,
    })
}
