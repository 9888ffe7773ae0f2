//! Checked reads and proofs of the committed log: entries re-hashed
//! against their stored leaf hashes, lookups by leaf hash and envelope id,
//! roots at any size, and RFC 6962 inclusion and consistency proofs.

use crate::error::{Corruption, CorruptionKind, Error};
use crate::hash::{leaf_hash, Hash};
use crate::merkle::{stored_hash_index, Frontier, InclusionProver};
use crate::store::{Head, Reader, Snapshot};

use super::{Entry, Ledger, ProvenEntry, Sequencer};
use std::sync::Arc;

impl<S: Sequencer> Ledger<S> {
    /// The entry whose leaf hash is `leaf_hash`, if any (checked).
    pub fn find_leaf(&self, leaf_hash: &Hash) -> Result<Option<Entry>, Error> {
        crate::store::guarded("looking up a leaf hash", || {
            let lookups = self.shared.lookups_now()?;
            let size = self.head().size;
            let snap = self.shared.store()?.snapshot()?;
            match lookups.leaf(leaf_hash)? {
                Some(i) if i < size => {
                    let e = checked_entry(&snap, i)?;
                    Ok((e.leaf_hash == *leaf_hash).then_some(e))
                }
                _ => self
                    .shared
                    .lookups_cover(lookups.leaves_through(), size)
                    .map(|()| None),
            }
        })
    }

    /// The committed entry the key index names for `name`, with the digest
    /// recorded for it (checked read; the caller checks that the entry
    /// carries that key, see [`Sequencer::key_of`]).
    pub fn find_key(&self, name: &str) -> Result<Option<(Entry, [u8; 32])>, Error> {
        crate::store::guarded("looking up an envelope id", || {
            let lookups = self.shared.lookups_now()?;
            let size = self.head().size;
            let snap = self.shared.store()?.snapshot()?;
            match lookups.key(name)? {
                Some((i, digest)) if i < size => Ok(Some((checked_entry(&snap, i)?, digest))),
                _ => self
                    .shared
                    .lookups_cover(lookups.keys_through(), size)
                    .map(|()| None),
            }
        })
    }

    /// Full verify of the committed log, in process (the running server's
    /// self-audit): every leaf, chain link, stored hash and the head.
    pub fn verify_full(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<crate::Verified, Error> {
        crate::store::guarded("verifying the log", || {
            let snap = self.shared.store()?.snapshot()?;
            crate::verify::verify_snapshot(&snap, progress)
        })
    }

    /// Incremental verify of the committed log from a trusted `(size,
    /// root)` ([`crate::verify::verify_snapshot_from`]): O(log n) stored
    /// hashes checked against `root`, then every entry after `size` walked
    /// as [`Ledger::verify_full`] walks them all.
    pub fn verify_from(
        &self,
        size: u64,
        root: &Hash,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<crate::Verified, Error> {
        crate::store::guarded("verifying the log", || {
            let snap = self.shared.store()?.snapshot()?;
            crate::verify::verify_snapshot_from(&snap, size, root, progress)
        })
    }

    /// The derived lookup tables checked against the committed entries
    /// ([`crate::verify::verify_indexes`]), in process.
    pub fn verify_indexes(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<crate::IndexesVerified, Error> {
        crate::store::guarded("checking the lookup tables", || {
            // The watermarks first: the committer writes a batch's lookups
            // after its redb commit, so watermarks read before the snapshot
            // never run ahead of it.
            let marks = self.shared.lookups()?.watermarks()?;
            let snap = self.shared.store()?.snapshot()?;
            let size = snap.head()?.size;
            crate::verify::verify_indexes(
                &snap,
                self.shared.lookups()?,
                &marks,
                size,
                &S::key_of,
                progress,
            )
        })
    }

    /// Saves derived state (for example a projection checkpoint) under
    /// `name`. It is not part of the log and is never hashed.
    pub fn put_aux(&self, name: &str, bytes: &[u8]) -> Result<(), Error> {
        crate::store::guarded("saving derived state", || {
            self.shared.store()?.put_aux(name, bytes)
        })
    }

    /// Saves several records of derived state at once: all of them or none
    /// (a record and the records that must not outlive it).
    pub fn put_aux_all(&self, records: &[(&str, &[u8])]) -> Result<(), Error> {
        crate::store::guarded("saving derived state", || {
            self.shared.store()?.put_aux_all(records)
        })
    }

    /// Derived state saved under `name`.
    pub fn get_aux(&self, name: &str) -> Result<Option<Vec<u8>>, Error> {
        crate::store::guarded("reading derived state", || {
            self.shared.store()?.get_aux(name)
        })
    }

    /// A read snapshot of the committed log.
    pub fn snapshot(&self) -> Result<Snapshot, Error> {
        self.shared.store()?.snapshot()
    }

    fn snapshot_below(&self, size: u64) -> Result<Snapshot, Error> {
        let head = self.head();
        if size > head.size {
            return Err(Error::InvalidSize {
                size,
                rule: "must not exceed the current tree size",
            });
        }
        self.shared.store()?.snapshot()
    }

    /// The entry at `index`, with its bytes checked against the stored leaf
    /// hash. A mismatch is [`Error::Corrupt`], never silently served.
    pub fn entry(&self, index: u64) -> Result<Entry, Error> {
        crate::store::guarded("reading an entry", || {
            let size = self.head().size;
            if index >= size {
                return Err(Error::IndexOutOfRange { index, size });
            }
            let snap = self.shared.store()?.snapshot()?;
            checked_entry(&snap, index)
        })
    }

    /// Entries `start..end` (clamped to the head), each checked.
    pub fn entries(&self, start: u64, end: u64) -> Result<Vec<Entry>, Error> {
        crate::store::guarded("reading entries", || {
            let size = self.head().size;
            let end = end.min(size);
            if start >= end {
                return Ok(Vec::new());
            }
            let snap = self.shared.store()?.snapshot()?;
            checked_entries(&snap, start, end)
        })
    }

    /// The stored RFC 6962 leaf hash of entry `index`.
    pub fn leaf_hash(&self, index: u64) -> Result<Hash, Error> {
        crate::store::guarded("reading a leaf hash", || {
            let size = self.head().size;
            if index >= size {
                return Err(Error::IndexOutOfRange { index, size });
            }
            let snap = self.shared.store()?.snapshot()?;
            Ok(snap.hashes_at(&[stored_hash_index(0, index)])?[0])
        })
    }

    /// The tree's right edge at `size` (at most the head): the complete
    /// subtrees covering the first `size` entries, O(log n) stored hashes.
    /// A replica extends it entry by entry to check a server's next entries
    /// against a signed root before it keeps them.
    pub fn frontier_at(&self, size: u64) -> Result<Frontier, Error> {
        crate::store::guarded("reading the right edge", || {
            let snap = self.snapshot_below(size)?;
            super::load_frontier(&snap, size)
        })
    }

    /// The RFC 6962 root of the tree of the first `size` entries.
    pub fn root_at(&self, size: u64) -> Result<Hash, Error> {
        crate::store::guarded("computing a root", || {
            let snap = self.snapshot_below(size)?;
            let r = Reader::new(&snap);
            tlog_tiles::tree_hash(size, &r).map_err(|e| r.take_err(e))
        })
    }

    /// The RFC 6962 inclusion proof of entry `index` in the tree of `size`
    /// entries, nearest sibling first.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, Error> {
        crate::store::guarded("building an inclusion proof", || {
            if index >= size {
                return Err(Error::IndexOutOfRange { index, size });
            }
            let snap = self.snapshot_below(size)?;
            let r = Reader::new(&snap);
            InclusionProver::new(size)
                .prove(index, &r)
                .map_err(|e| r.take_err(e))
        })
    }

    /// The RFC 6962 inclusion proofs of entries `indices` in the tree of
    /// `size` entries, from one read snapshot (a batch of writes answered at
    /// one checkpoint).
    pub fn inclusion_proofs(&self, indices: &[u64], size: u64) -> Result<Vec<Vec<Hash>>, Error> {
        self.each_proven(indices, size, false, |_, _, proof| Ok(proof))
    }

    /// `f(snapshot, index, proof)` for each of `indices`, with its RFC 6962
    /// inclusion proof in the tree of `size` entries, from one snapshot;
    /// with `keep`, the stored hashes the proofs read are kept for the next
    /// call that keeps them (a projection's evidence, asked again and
    /// again), rather than for this call alone (a batch's receipts, whose
    /// hashes at the tree's right edge no later call reads again).
    fn each_proven<T>(
        &self,
        indices: &[u64],
        size: u64,
        keep: bool,
        mut f: impl FnMut(&Snapshot, u64, Vec<Hash>) -> Result<T, Error>,
    ) -> Result<Vec<T>, Error> {
        crate::store::guarded("building inclusion proofs", || {
            if let Some(&index) = indices.iter().find(|&&i| i >= size) {
                return Err(Error::IndexOutOfRange { index, size });
            }
            let snap = self.snapshot_below(size)?;
            let r = if keep {
                Reader::kept(&snap, &self.shared.proof_hashes)
            } else if indices.len() > 1 {
                Reader::memoized(&snap)
            } else {
                Reader::new(&snap)
            };
            let mut prover = InclusionProver::new(size);
            indices
                .iter()
                .map(|&index| {
                    let proof = prover.prove(index, &r).map_err(|e| r.take_err(e))?;
                    f(&snap, index, proof)
                })
                .collect()
        })
    }

    /// What an inclusion-proof answer needs, from one read snapshot: the
    /// stored leaf hash of entry `index`, the root of the tree of `size`
    /// entries, and the RFC 6962 inclusion proof.
    pub fn inclusion_at(&self, index: u64, size: u64) -> Result<(Hash, Hash, Vec<Hash>), Error> {
        crate::store::guarded("building an inclusion proof", || {
            if index >= size {
                return Err(Error::IndexOutOfRange { index, size });
            }
            let head = self.head();
            let snap = self.snapshot_below(size)?;
            let r = Reader::new(&snap);
            let leaf = snap.hashes_at(&[stored_hash_index(0, index)])?[0];
            let root = root_in(&r, size, &head)?;
            let proof = InclusionProver::new(size)
                .prove(index, &r)
                .map_err(|e| r.take_err(e))?;
            Ok((leaf, root, proof))
        })
    }

    /// What a consistency-proof answer needs, from one read snapshot: the
    /// roots at `old_size` and `new_size` and the RFC 6962 consistency proof
    /// between them (empty when `old_size` is 0 or equals `new_size`).
    pub fn consistency_at(
        &self,
        old_size: u64,
        new_size: u64,
    ) -> Result<(Hash, Hash, Vec<Hash>), Error> {
        crate::store::guarded("building a consistency proof", || {
            if old_size > new_size {
                return Err(Error::InvalidSize {
                    size: old_size,
                    rule: "old size must not exceed new size",
                });
            }
            let head = self.head();
            let snap = self.snapshot_below(new_size)?;
            let r = Reader::new(&snap);
            let old_root = root_in(&r, old_size, &head)?;
            let new_root = root_in(&r, new_size, &head)?;
            let proof = if old_size == 0 || old_size == new_size {
                Vec::new()
            } else {
                tlog_tiles::prove_tree(new_size, old_size, &r).map_err(|e| r.take_err(e))?
            };
            Ok((old_root, new_root, proof))
        })
    }

    /// How many checked entries [`Ledger::entries_with_proofs`] keeps in
    /// memory at most (those unused longest are dropped first): about 8 MB
    /// of score entries.
    pub const PROVEN_ENTRIES: usize = 4096;

    /// How many checked entries [`Ledger::entries_with_proofs`] keeps now.
    pub fn kept_entries(&self) -> usize {
        self.shared.proven_entries.len()
    }

    /// How many stored hashes [`Ledger::entries_with_proofs`] keeps now.
    pub fn kept_proof_hashes(&self) -> usize {
        self.shared.proof_hashes.len()
    }

    /// Entries `indices`, each checked, with its RFC 6962 inclusion proof in
    /// the tree of `size` entries: one read snapshot for all of them (a
    /// projection's evidence).
    pub fn entries_with_proofs(
        &self,
        indices: &[u64],
        size: u64,
    ) -> Result<Vec<ProvenEntry>, Error> {
        // Evidence is read again with every answer, scattered over the
        // log (a bundle decoded for each entry): entries already checked
        // are kept, up to PROVEN_ENTRIES of them, and so are the stored
        // hashes their proofs read.
        let cache = &self.shared.proven_entries;
        self.each_proven(indices, size, true, |snap, index, proof| {
            let entry =
                cache.get_or_try_insert_with(index, || checked_entry(snap, index).map(Arc::new))?;
            Ok((entry, proof))
        })
    }

    /// The RFC 6962 consistency proof from the tree of `old_size` to the tree
    /// of `new_size` entries. Empty when `old_size` is 0 or equals `new_size`.
    pub fn consistency_proof(&self, old_size: u64, new_size: u64) -> Result<Vec<Hash>, Error> {
        crate::store::guarded("building a consistency proof", || {
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
        })
    }
}

/// The root of the tree of `size` entries: the committed head's root when
/// `size` is the head's size (a tree at a given size never changes), else
/// computed from the stored hashes `r` reads.
fn root_in(r: &Reader<'_>, size: u64, head: &Head) -> Result<Hash, Error> {
    if size == head.size {
        return Ok(head.root);
    }
    tlog_tiles::tree_hash(size, r).map_err(|e| r.take_err(e))
}

pub(crate) fn checked_entry(snap: &Snapshot, index: u64) -> Result<Entry, Error> {
    let stored = snap.entry(index)?.ok_or_else(|| missing_entry(index))?;
    let expected = snap.hashes_at(&[stored_hash_index(0, index)])?[0];
    checked(index, stored, expected)
}

/// Entries `start..end` of `snap`, each checked as [`checked_entry`] checks
/// one, read in one pass: each bundle decoded once, and the leaf hashes
/// read as one run of the hash table rather than one lookup each.
pub(crate) fn checked_entries(snap: &Snapshot, start: u64, end: u64) -> Result<Vec<Entry>, Error> {
    if start >= end {
        return Ok(Vec::new());
    }
    let wanted: Vec<u64> = (start..end).map(|i| stored_hash_index(0, i)).collect();
    let expected = snap.hashes_at(&wanted)?;
    let mut records = snap.records_from(start)?;
    (start..end)
        .zip(expected)
        .map(|(index, expected)| {
            let (at, rec) = records.next().ok_or_else(|| missing_entry(index))??;
            if at != index {
                return Err(missing_entry(index));
            }
            let stored = crate::store::StoredEntry::decode(index, &rec)?;
            checked(index, stored, expected)
        })
        .collect()
}

/// Entry `index` below the head is not in the store.
fn missing_entry(index: u64) -> Error {
    Corruption::new(
        index,
        CorruptionKind::MissingEntry,
        "entry below head is absent",
    )
    .into()
}

/// `stored` as entry `index`, once its bytes hash to `expected`, its stored
/// leaf hash.
fn checked(index: u64, stored: crate::store::StoredEntry, expected: Hash) -> Result<Entry, Error> {
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
