//! RFC 6962 / RFC 9162 proof verification, and the stored-hash layout.
//!
//! Verification needs no storage: an auditor holding a root, a leaf hash and a
//! proof can call these functions directly. Proofs are lists of 32-byte hashes
//! in RFC order: an inclusion proof starts with the leaf's nearest sibling, and
//! a consistency proof follows the RFC 6962 §2.1.2 `SUBPROOF` order.
//!
//! The stored-hash layout is Go's `sumdb/tlog` (via the `tlog_tiles` crate):
//! every complete subtree hash gets one dense index, written once, when its last
//! leaf is appended. See `docs/FORMAT.md`.

use crate::hash::Hash;

/// Why a proof was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    /// The sizes or index make no proof possible (index ≥ size, old > new, …).
    #[error("invalid proof request: {0}")]
    InvalidRequest(&'static str),
    /// The proof does not lead to the claimed root(s).
    #[error("proof does not verify")]
    Mismatch,
    /// The proof has more hashes than any valid proof for these sizes.
    #[error("proof has {len} hashes; at most {max} are possible")]
    TooLong { len: usize, max: usize },
}

/// The most hashes a valid proof can have: two per level of a 2^64 tree.
const MAX_PROOF_LEN: usize = 128;

/// Checks that `proof` shows the leaf with hash `leaf_hash` at `index` is in
/// the tree of `size` leaves with root `root`.
pub fn verify_inclusion(
    leaf_hash: &Hash,
    index: u64,
    size: u64,
    proof: &[Hash],
    root: &Hash,
) -> Result<(), ProofError> {
    if index >= size {
        return Err(ProofError::InvalidRequest("index must be below size"));
    }
    if proof.len() > MAX_PROOF_LEN {
        return Err(ProofError::TooLong {
            len: proof.len(),
            max: MAX_PROOF_LEN,
        });
    }
    tlog_tiles::check_record(&proof.to_vec(), size, *root, index, *leaf_hash)
        .map_err(|_| ProofError::Mismatch)
}

/// Checks that `proof` shows the tree of `old_size` with `old_root` is a
/// prefix of the tree of `new_size` with `new_root`.
///
/// Per RFC 9162 §2.1.4.2: when `old_size` is 0 the proof must be empty and any
/// roots are consistent; when the sizes are equal the proof must be empty and
/// the roots equal.
pub fn verify_consistency(
    old_size: u64,
    old_root: &Hash,
    new_size: u64,
    new_root: &Hash,
    proof: &[Hash],
) -> Result<(), ProofError> {
    if old_size > new_size {
        return Err(ProofError::InvalidRequest(
            "old size must not exceed new size",
        ));
    }
    if proof.len() > MAX_PROOF_LEN {
        return Err(ProofError::TooLong {
            len: proof.len(),
            max: MAX_PROOF_LEN,
        });
    }
    if old_size == 0 {
        return if proof.is_empty() {
            Ok(())
        } else {
            Err(ProofError::Mismatch)
        };
    }
    if old_size == new_size {
        return if proof.is_empty() && old_root == new_root {
            Ok(())
        } else {
            Err(ProofError::Mismatch)
        };
    }
    tlog_tiles::check_tree(&proof.to_vec(), new_size, *new_root, old_size, *old_root)
        .map_err(|_| ProofError::Mismatch)
}

/// The dense storage index of the complete subtree at `level` whose position
/// within that level is `n` (level 0 holds the leaf hashes).
pub fn stored_hash_index(level: u8, n: u64) -> u64 {
    tlog_tiles::stored_hash_index(level, n)
}

/// The inverse of [`stored_hash_index`]: `(level, n)`.
pub fn split_stored_hash_index(index: u64) -> (u8, u64) {
    tlog_tiles::split_stored_hash_index(index)
}

/// How many stored hashes a tree of `size` leaves has.
pub fn stored_hash_count(size: u64) -> u64 {
    tlog_tiles::stored_hash_count(size)
}

/// The index of the last leaf under the stored hash at `index`: the leaf whose
/// append wrote it.
pub fn last_leaf_of_stored(index: u64) -> u64 {
    let (level, n) = split_stored_hash_index(index);
    ((n + 1) << level) - 1
}

/// An in-memory RFC 6962 right edge ("compact range" or frontier): the roots
/// of the complete subtrees covering `[0, size)`, largest first. Pushing a
/// leaf yields exactly the stored hashes that leaf's append writes, in storage
/// order, so a full verify can recompute every stored hash in one pass.
#[derive(Debug, Clone, Default)]
pub struct Frontier {
    size: u64,
    /// `(level, hash)`, levels strictly decreasing.
    nodes: Vec<(u8, Hash)>,
}

impl Frontier {
    pub fn new() -> Self {
        Self::default()
    }

    /// A frontier from its parts: `nodes` are `(level, hash)` of the complete
    /// subtrees covering `[0, size)`, left to right.
    pub fn from_parts(size: u64, nodes: Vec<(u8, Hash)>) -> Self {
        Frontier { size, nodes }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The `(level, hash)` of each complete subtree, largest first.
    pub fn nodes(&self) -> &[(u8, Hash)] {
        &self.nodes
    }

    /// Adds a leaf hash; returns the hashes to store for it (the leaf hash,
    /// then each subtree it completes, bottom up).
    pub fn push(&mut self, leaf: Hash) -> Vec<Hash> {
        let mut out = vec![leaf];
        let mut cur = (0u8, leaf);
        while let Some(&(level, left)) = self.nodes.last() {
            if level != cur.0 {
                break;
            }
            self.nodes.pop();
            let h = crate::hash::node_hash(left, cur.1);
            out.push(h);
            cur = (level + 1, h);
        }
        self.nodes.push(cur);
        self.size += 1;
        out
    }

    /// The RFC 6962 root of the leaves pushed so far.
    pub fn root(&self) -> Hash {
        let mut iter = self.nodes.iter().rev();
        let Some(&(_, mut h)) = iter.next() else {
            return crate::hash::EMPTY_ROOT;
        };
        for &(_, left) in iter {
            h = crate::hash::node_hash(left, h);
        }
        h
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::hash::{leaf_hash, node_hash, EMPTY_ROOT};

    /// RFC 6962 §2.1 MTH, written directly from the definition.
    pub(crate) fn reference_root(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => EMPTY_ROOT,
            1 => leaves[0],
            n => {
                let k = largest_pow2_below(n);
                node_hash(reference_root(&leaves[..k]), reference_root(&leaves[k..]))
            }
        }
    }

    fn largest_pow2_below(n: usize) -> usize {
        // largest power of two strictly less than n (n >= 2)
        let mut k = 1;
        while k * 2 < n {
            k *= 2;
        }
        k
    }

    #[test]
    fn frontier_matches_reference_root_for_every_size_to_130() {
        let leaves: Vec<Hash> = (0..130u32).map(|i| leaf_hash(&i.to_be_bytes())).collect();
        let mut f = Frontier::new();
        assert_eq!(f.root(), EMPTY_ROOT);
        let mut stored = 0u64;
        for (i, l) in leaves.iter().enumerate() {
            let written = f.push(*l);
            stored += written.len() as u64;
            assert_eq!(stored, stored_hash_count(i as u64 + 1));
            assert_eq!(f.root(), reference_root(&leaves[..=i]), "size {}", i + 1);
        }
    }

    #[test]
    fn last_leaf_of_stored_names_the_completing_leaf() {
        let mut f = Frontier::new();
        let mut idx = 0u64;
        for i in 0..100u64 {
            for _ in f.push(leaf_hash(&i.to_be_bytes())) {
                assert_eq!(last_leaf_of_stored(idx), i);
                idx += 1;
            }
        }
    }

    #[test]
    fn oversized_proofs_are_refused_before_hashing() {
        let h = leaf_hash(b"x");
        let long = vec![h; MAX_PROOF_LEN + 1];
        assert!(matches!(
            verify_inclusion(&h, 0, 2, &long, &h),
            Err(ProofError::TooLong { .. })
        ));
        assert!(matches!(
            verify_consistency(1, &h, 2, &h, &long),
            Err(ProofError::TooLong { .. })
        ));
    }
}
