//! RFC 6962 known answers, exhaustive proof checks for every tree size up to
//! 64, and a property test against the recursive definition. Every proof here
//! is produced by the stored-hash log on redb, not by an in-memory model.

use ledger::merkle::{verify_consistency, verify_inclusion, ProofError};
use ledger::{leaf_hash, Config, Hash, Ledger};
use proptest::prelude::*;
use serde_json::Value;

fn h(s: &str) -> Hash {
    let v = hex::decode(s).expect("hex");
    Hash(v.try_into().expect("32 bytes"))
}

fn hashes(v: &Value) -> Vec<Hash> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| h(x.as_str().expect("str")))
        .collect()
}

fn vectors() -> Value {
    serde_json::from_str(include_str!("../testdata/rfc6962_vectors.json")).expect("json")
}

fn log_with(leaves: &[Vec<u8>]) -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Ledger::open(dir.path(), Config::default()).expect("open");
    for l in leaves {
        log.append(l.clone()).expect("append");
    }
    (dir, log)
}

/// RFC 6962 §2.1 MTH, straight from the definition.
fn mth(leaves: &[Hash]) -> Hash {
    match leaves.len() {
        0 => ledger::hash::EMPTY_ROOT,
        1 => leaves[0],
        n => {
            let mut k = 1;
            while k * 2 < n {
                k *= 2;
            }
            ledger::hash::node_hash(mth(&leaves[..k]), mth(&leaves[k..]))
        }
    }
}

#[test]
fn rfc6962_leaf_hashes_roots_and_proofs_match_reference_vectors() {
    let v = vectors();
    let leaves: Vec<Vec<u8>> = v["leaves_hex"]
        .as_array()
        .expect("leaves")
        .iter()
        .map(|x| hex::decode(x.as_str().expect("str")).expect("hex"))
        .collect();
    for (leaf, want) in leaves.iter().zip(hashes(&v["leaf_hashes"])) {
        assert_eq!(leaf_hash(leaf), want);
    }
    let (_d, log) = log_with(&leaves);
    let roots = hashes(&v["roots_by_size"]);
    for (size, want) in roots.iter().enumerate() {
        assert_eq!(
            log.root_at(size as u64).expect("root"),
            *want,
            "root at {size}"
        );
    }
    for case in v["inclusion"].as_array().expect("inclusion") {
        let (i, n) = (
            case["index"].as_u64().expect("i"),
            case["size"].as_u64().expect("n"),
        );
        let want = hashes(&case["proof"]);
        assert_eq!(
            log.inclusion_proof(i, n).expect("prove"),
            want,
            "inclusion {i} in {n}"
        );
        verify_inclusion(
            &leaf_hash(&leaves[i as usize]),
            i,
            n,
            &want,
            &roots[n as usize],
        )
        .expect("verify");
    }
    for case in v["consistency"].as_array().expect("consistency") {
        let (m, n) = (
            case["old"].as_u64().expect("m"),
            case["new"].as_u64().expect("n"),
        );
        let want = hashes(&case["proof"]);
        assert_eq!(
            log.consistency_proof(m, n).expect("prove"),
            want,
            "consistency {m} -> {n}"
        );
        verify_consistency(m, &roots[m as usize], n, &roots[n as usize], &want).expect("verify");
    }
}

#[test]
fn rfc9162_edge_cases_for_empty_and_equal_trees() {
    let a = leaf_hash(b"a");
    let b = leaf_hash(b"b");
    assert_eq!(verify_consistency(0, &a, 0, &a, &[]), Ok(()));
    assert_eq!(verify_consistency(0, &a, 5, &b, &[]), Ok(()));
    assert_eq!(
        verify_consistency(0, &a, 5, &b, &[a]),
        Err(ProofError::Mismatch)
    );
    assert_eq!(verify_consistency(3, &a, 3, &a, &[]), Ok(()));
    assert_eq!(
        verify_consistency(3, &a, 3, &b, &[]),
        Err(ProofError::Mismatch)
    );
    assert_eq!(
        verify_consistency(3, &a, 3, &a, &[a]),
        Err(ProofError::Mismatch)
    );
    assert!(matches!(
        verify_consistency(4, &a, 3, &a, &[]),
        Err(ProofError::InvalidRequest(_))
    ));
    assert!(matches!(
        verify_inclusion(&a, 0, 0, &[], &a),
        Err(ProofError::InvalidRequest(_))
    ));
    assert!(matches!(
        verify_inclusion(&a, 2, 1, &[], &a),
        Err(ProofError::InvalidRequest(_))
    ));
}

/// The left/right decisions of the RFC 6962 §2.1.1 audit path of leaf `m` in a
/// tree of `n` leaves, bottom up (`true`: the sibling is on the right). Two
/// sizes with the same shape run the verifier through the same computation, so
/// an inclusion proof cannot tell them apart: the size is bound by the signed
/// checkpoint that carries the root, not by the proof.
fn path_shape(m: u64, n: u64) -> Vec<bool> {
    if n <= 1 {
        return Vec::new();
    }
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    let mut s = if m < k {
        path_shape(m, k)
    } else {
        path_shape(m - k, n - k)
    };
    s.push(m < k);
    s
}

/// The decisions of RFC 6962 §2.1.2 `SUBPROOF(m, D[n], b)`, bottom up: `'E'`
/// for a subtree hash at the point where the trees meet, `'R'`/`'L'` for a
/// right/left sibling. Same shape, same verifier computation (see
/// [`path_shape`]).
fn subproof_shape(m: u64, n: u64, b: bool) -> Vec<char> {
    if m == n {
        return if b { Vec::new() } else { vec!['E'] };
    }
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    let mut s = if m <= k {
        let mut s = subproof_shape(m, k, b);
        s.push('R');
        s
    } else {
        let mut s = subproof_shape(m - k, n - k, false);
        s.push('L');
        s
    };
    s.shrink_to_fit();
    s
}

fn consistency_shape(m: u64, n: u64) -> Option<Vec<char>> {
    (m >= 1 && m <= n).then(|| subproof_shape(m, n, true))
}

fn flip(h: &Hash, bit: usize) -> Hash {
    let mut x = *h;
    x.0[bit / 8] ^= 1 << (bit % 8);
    x
}

/// Every inclusion and consistency proof of every tree up to 64 leaves
/// verifies; flipping any single bit of any proof hash, of the root(s), of the
/// leaf hash, or of any of the low 8 bits of the index or sizes is rejected.
#[test]
fn exhaustive_proofs_and_single_bit_corruptions_for_sizes_1_to_64() {
    const N: u64 = 64;
    let leaves: Vec<Vec<u8>> = (0..N).map(|i| format!("leaf {i}").into_bytes()).collect();
    let (_d, log) = log_with(&leaves);
    let lh: Vec<Hash> = leaves.iter().map(|l| leaf_hash(l)).collect();
    let roots: Vec<Hash> = (0..=N).map(|n| log.root_at(n).expect("root")).collect();
    for n in 0..=N {
        assert_eq!(roots[n as usize], mth(&lh[..n as usize]), "root {n}");
    }
    let mut rejected = 0u64;
    for n in 1..=N {
        for i in 0..n {
            let p = log.inclusion_proof(i, n).expect("prove");
            let root = roots[n as usize];
            verify_inclusion(&lh[i as usize], i, n, &p, &root).expect("valid inclusion");
            for (k, _) in p.iter().enumerate() {
                for bit in 0..256 {
                    let mut q = p.clone();
                    q[k] = flip(&q[k], bit);
                    assert!(verify_inclusion(&lh[i as usize], i, n, &q, &root).is_err());
                    rejected += 1;
                }
            }
            for bit in 0..256 {
                assert!(verify_inclusion(&lh[i as usize], i, n, &p, &flip(&root, bit)).is_err());
                assert!(verify_inclusion(&flip(&lh[i as usize], bit), i, n, &p, &root).is_err());
                rejected += 2;
            }
            for bit in 0..8 {
                let i2 = i ^ (1 << bit);
                if i2 != i {
                    assert!(
                        verify_inclusion(&lh[i as usize], i2, n, &p, &root).is_err(),
                        "index {i}->{i2} size {n}"
                    );
                }
                let n2 = n ^ (1 << bit);
                let accepted = verify_inclusion(&lh[i as usize], i, n2, &p, &root).is_ok();
                if i < n2 && path_shape(i, n2) == path_shape(i, n) {
                    // Same computation, so the same answer; see path_shape.
                    assert!(accepted, "size {n}->{n2} index {i}: same shape must verify");
                } else {
                    assert!(!accepted, "size {n}->{n2} index {i}");
                    rejected += 1;
                }
                rejected += 1;
            }
            // trailing and preceding garbage
            let mut t = p.clone();
            t.push(root);
            assert!(verify_inclusion(&lh[i as usize], i, n, &t, &root).is_err());
            let mut pre = vec![root];
            pre.extend_from_slice(&p);
            assert!(verify_inclusion(&lh[i as usize], i, n, &pre, &root).is_err());
        }
        for m in 1..=n {
            let p = log.consistency_proof(m, n).expect("prove");
            let (r1, r2) = (roots[m as usize], roots[n as usize]);
            verify_consistency(m, &r1, n, &r2, &p).expect("valid consistency");
            for (k, _) in p.iter().enumerate() {
                for bit in 0..256 {
                    let mut q = p.clone();
                    q[k] = flip(&q[k], bit);
                    assert!(verify_consistency(m, &r1, n, &r2, &q).is_err());
                    rejected += 1;
                }
            }
            for bit in 0..256 {
                assert!(verify_consistency(m, &flip(&r1, bit), n, &r2, &p).is_err());
                assert!(verify_consistency(m, &r1, n, &flip(&r2, bit), &p).is_err());
                rejected += 2;
            }
            for bit in 0..8 {
                let shape = consistency_shape(m, n);
                let m2 = m ^ (1 << bit);
                let n2 = n ^ (1 << bit);
                for (a, b) in [(m2, n), (m, n2)] {
                    if a == 0 {
                        // RFC 9162: the empty tree is a prefix of every tree.
                        continue;
                    }
                    let accepted = verify_consistency(a, &r1, b, &r2, &p).is_ok();
                    if consistency_shape(a, b) == shape {
                        assert!(accepted, "{m}->{n} as {a}->{b}: same shape must verify");
                    } else {
                        assert!(!accepted, "{m}->{n} as {a}->{b}");
                        rejected += 1;
                    }
                }
            }
            if m != n {
                let mut t = p.clone();
                t.push(r2);
                assert!(verify_consistency(m, &r1, n, &r2, &t).is_err());
            }
        }
    }
    assert!(rejected > 1_000_000, "only {rejected} corruptions tried");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The stored-hash tree agrees with a direct recursive RFC 6962
    /// computation, for every prefix, and its proofs verify against it.
    #[test]
    fn stored_hash_tree_agrees_with_recursive_definition(
        leaves in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..200),
        probe in any::<u64>(),
    ) {
        let (_d, log) = log_with(&leaves);
        let lh: Vec<Hash> = leaves.iter().map(|l| leaf_hash(l)).collect();
        let n = leaves.len() as u64;
        prop_assert_eq!(log.head().root, mth(&lh));
        let size = 1 + probe % n;
        let root = mth(&lh[..size as usize]);
        prop_assert_eq!(log.root_at(size).expect("root"), root);
        let i = (probe >> 20) % size;
        let p = log.inclusion_proof(i, size).expect("prove");
        prop_assert!(verify_inclusion(&lh[i as usize], i, size, &p, &root).is_ok());
        let c = log.consistency_proof(size, n).expect("prove");
        prop_assert!(verify_consistency(size, &root, n, &mth(&lh), &c).is_ok());
    }
}
