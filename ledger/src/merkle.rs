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

/// RFC 6962 inclusion proofs of many leaves in one tree of `size` leaves,
/// from its stored hashes: the same proofs as `tlog_tiles::prove_record`
/// (a property test holds them equal), built without its per-level copies
/// of the hashes still to use. A proof needs at most one subtree that is
/// not complete (the sibling where the leaf's path leaves the tree's right
/// edge, `[lo, size)`); its hash is computed once per prover and reused by
/// every later proof that needs it, and its stored hashes are not read
/// again. A projection's evidence asks for a thousand proofs at one size.
#[derive(Debug)]
pub struct InclusionProver {
    size: u64,
    /// `(lo, hash of [lo, size))` for the incomplete subtrees hashed so far
    /// (at most one per level).
    edges: Vec<(u64, Hash)>,
}

/// One hash of a proof, root side first, as the walk down finds it.
enum Step {
    /// The next stored hash read.
    Stored,
    /// An incomplete subtree already hashed.
    Known(Hash),
    /// The incomplete subtree `[lo, size)`, from the next `count` stored
    /// hashes read (its complete subtrees, left to right).
    Edge { lo: u64, count: usize },
}

impl InclusionProver {
    pub fn new(size: u64) -> Self {
        InclusionProver {
            size,
            edges: Vec::new(),
        }
    }

    /// The tree size the proofs are for.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The inclusion proof of leaf `index`, nearest sibling first, reading
    /// the stored hashes it needs from `r` in one call.
    pub fn prove<R: tlog_tiles::HashReader>(
        &mut self,
        index: u64,
        r: &R,
    ) -> Result<Vec<Hash>, tlog_tiles::Error> {
        if index >= self.size {
            return Err(tlog_tiles::Error::InvalidInput("index >= size".into()));
        }
        let mut need: Vec<u64> = Vec::with_capacity(64);
        let mut steps: Vec<Step> = Vec::with_capacity(64);
        let (mut lo, mut hi) = (0u64, self.size);
        while hi - lo > 1 {
            // The largest power of two below the width: RFC 6962's split.
            let k = 1u64 << (63 - (hi - lo - 1).leading_zeros());
            if index < lo + k {
                steps.push(self.sibling(lo + k, hi, &mut need));
                hi = lo + k;
            } else {
                steps.push(self.sibling(lo, lo + k, &mut need));
                lo += k;
            }
        }
        let hashes = if need.is_empty() {
            Vec::new()
        } else {
            r.read_hashes(&need)?
        };
        if hashes.len() != need.len() {
            return Err(tlog_tiles::Error::BadMath);
        }
        let mut proof = Vec::with_capacity(steps.len());
        let mut next = hashes.iter();
        for step in steps {
            let h = match step {
                Step::Stored => *next.next().ok_or(tlog_tiles::Error::BadMath)?,
                Step::Known(h) => h,
                Step::Edge { lo, count } => {
                    let part = next
                        .as_slice()
                        .get(..count)
                        .ok_or(tlog_tiles::Error::BadMath)?;
                    let (last, rest) = part.split_last().ok_or(tlog_tiles::Error::BadMath)?;
                    let h = rest
                        .iter()
                        .rev()
                        .fold(*last, |acc, &left| crate::hash::node_hash(left, acc));
                    next.nth(count - 1);
                    self.edges.push((lo, h));
                    h
                }
            };
            proof.push(h);
        }
        proof.reverse();
        Ok(proof)
    }

    /// The step for the sibling subtree `[lo, hi)`, pushing the stored
    /// hashes it needs onto `need`.
    fn sibling(&self, lo: u64, hi: u64, need: &mut Vec<u64>) -> Step {
        let width = hi - lo;
        if width.is_power_of_two() {
            let level = width.trailing_zeros() as u8;
            need.push(stored_hash_index(level, lo >> level));
            return Step::Stored;
        }
        // Not complete: it ends at the tree's right edge.
        if let Some(&(_, h)) = self.edges.iter().find(|(l, _)| *l == lo) {
            return Step::Known(h);
        }
        let before = need.len();
        let mut at = lo;
        while at < hi {
            let level = (63 - (hi - at).leading_zeros()) as u8;
            need.push(stored_hash_index(level, at >> level));
            at += 1 << level;
        }
        Step::Edge {
            lo,
            count: need.len() - before,
        }
    }
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

    /// Stored hashes that are arbitrary but fixed by their index: proof
    /// building only reads and combines them, so two builders agree on a
    /// tree of any size without one being grown.
    struct FakeStored;

    impl tlog_tiles::HashReader for FakeStored {
        fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
            Ok(indexes
                .iter()
                .map(|i| leaf_hash(&i.to_be_bytes()))
                .collect())
        }
    }

    proptest::proptest! {
        #[test]
        fn the_prover_builds_tlog_tiles_proofs(
            size in 1u64..(1 << 40),
            picks in proptest::collection::vec(proptest::num::u64::ANY, 1..40),
        ) {
            let mut prover = InclusionProver::new(size);
            for p in picks {
                // Half near the right edge, where the incomplete subtrees are.
                let index = if p % 2 == 0 { p % size } else { size - 1 - (p >> 1) % size.min(4096) };
                let ours = prover.prove(index, &FakeStored).expect("ok");
                let theirs = tlog_tiles::prove_record(size, index, &FakeStored).expect("ok");
                proptest::prop_assert_eq!(ours, theirs, "size {} index {}", size, index);
            }
        }
    }

    #[test]
    fn the_provers_proofs_verify_against_the_reference_root_for_every_size_to_70() {
        let leaves: Vec<Hash> = (0..70u32).map(|i| leaf_hash(&i.to_be_bytes())).collect();
        let mut stored = Vec::new();
        let mut f = Frontier::new();
        for (n, l) in leaves.iter().enumerate() {
            stored.extend(f.push(*l));
            let size = n as u64 + 1;
            let reader = |indexes: &[u64]| {
                indexes
                    .iter()
                    .map(|&i| stored[i as usize])
                    .collect::<Vec<_>>()
            };
            struct R<'a>(&'a dyn Fn(&[u64]) -> Vec<Hash>);
            impl tlog_tiles::HashReader for R<'_> {
                fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
                    Ok((self.0)(indexes))
                }
            }
            let root = reference_root(&leaves[..=n]);
            let mut prover = InclusionProver::new(size);
            for i in (0..size).rev() {
                let proof = prover.prove(i, &R(&reader)).expect("ok");
                verify_inclusion(&leaves[i as usize], i, size, &proof, &root).expect("ok");
            }
            assert!(prover.prove(size, &R(&reader)).is_err());
        }
    }
}
