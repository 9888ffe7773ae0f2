//! Behaviour of the log: format vectors, group commit, reopen, reads, errors.

use std::sync::Arc;

use ledger::merkle::{verify_consistency, verify_inclusion};
use ledger::{verify_dir, verify_dir_from, Config, Error, Hash, Ledger};
use serde_json::Value;

fn h(s: &str) -> Hash {
    Hash(hex::decode(s).expect("hex").try_into().expect("32 bytes"))
}

fn open(dir: &std::path::Path) -> Ledger {
    Ledger::open(dir, Config::default()).expect("open")
}

/// Submits every leaf before waiting for any, then waits for them all.
fn submit_all(log: &Ledger, leaves: &[Vec<u8>]) {
    let pending: Vec<_> = leaves
        .iter()
        .map(|l| log.submit(l.clone()).expect("submit"))
        .collect();
    for p in pending {
        p.wait().expect("append");
    }
}

#[test]
fn format_vectors_match_independent_python_implementation() {
    let v: Value =
        serde_json::from_str(include_str!("../testdata/format_vectors.json")).expect("json");
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path());
    for e in v["entries"].as_array().expect("entries") {
        let leaf = hex::decode(e["leaf_hex"].as_str().expect("leaf")).expect("hex");
        assert_eq!(
            ledger::content_digest(&leaf).to_vec(),
            hex::decode(e["content_digest_blake3"].as_str().expect("d")).expect("hex")
        );
        let a = log.append(leaf).expect("append");
        assert_eq!(a.index, e["index"].as_u64().expect("index"));
        assert_eq!(a.leaf_hash, h(e["leaf_hash"].as_str().expect("lh")));
        assert_eq!(a.chain_hash, h(e["chain_hash"].as_str().expect("ch")));
        assert_eq!(a.root, h(e["root_after"].as_str().expect("root")));
        assert_eq!(a.tree_size, a.index + 1);
    }
}

#[test]
fn concurrent_appends_are_dense_unique_batched_and_provable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(open(dir.path()));
    const THREADS: u64 = 8;
    const EACH: u64 = 300;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                (0..EACH)
                    .map(|i| {
                        let leaf = format!("writer {t} entry {i}").into_bytes();
                        let a = log.append(leaf.clone()).expect("append");
                        (a, leaf)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut acks: Vec<_> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("join"))
        .collect();
    acks.sort_by_key(|(a, _)| a.index);
    let n = THREADS * EACH;
    assert_eq!(acks.len() as u64, n);
    for (i, (a, leaf)) in acks.iter().enumerate() {
        assert_eq!(a.index, i as u64, "indices dense and unique");
        assert_eq!(&log.entry(a.index).expect("entry").leaf, leaf);
        // Each ack's proof verifies against the root it was acknowledged with.
        let p = log.inclusion_proof(a.index, a.tree_size).expect("proof");
        verify_inclusion(&a.leaf_hash, a.index, a.tree_size, &p, &a.root).expect("inclusion");
    }
    // Heads handed out only grow and are consistent with the final head.
    let head = log.head();
    for (a, _) in acks.iter().step_by(97) {
        let p = log
            .consistency_proof(a.tree_size, head.size)
            .expect("proof");
        verify_consistency(a.tree_size, &a.root, head.size, &head.root, &p).expect("consistent");
    }
    let stats = log.stats();
    let batches = stats.batches.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(stats.appends.load(std::sync::atomic::Ordering::Relaxed), n);
    assert!(
        batches < n,
        "group commit batched {n} appends into {batches} commits"
    );
    drop(log);
    let v = verify_dir(dir.path(), &mut |_, _| {}).expect("verify");
    assert_eq!(v.size, n);
}

#[test]
fn reopen_keeps_the_head_and_continues_the_chain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = {
        let log = open(dir.path());
        for i in 0..10u8 {
            log.append(vec![i]).expect("append");
        }
        log.head()
    };
    let log = open(dir.path());
    assert_eq!(log.head(), first);
    let a = log.append(b"after reopen".to_vec()).expect("append");
    assert_eq!(a.index, 10);
    assert_eq!(
        a.chain_hash,
        ledger::chain_hash(&first.chain, b"after reopen")
    );
    drop(log);
    verify_dir(dir.path(), &mut |_, _| {}).expect("verify");
}

#[test]
fn out_of_range_reads_and_proofs_are_typed_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path());
    log.append(b"one".to_vec()).expect("append");
    assert!(matches!(
        log.entry(1),
        Err(Error::IndexOutOfRange { index: 1, size: 1 })
    ));
    assert!(matches!(
        log.inclusion_proof(0, 2),
        Err(Error::InvalidSize { size: 2, .. })
    ));
    assert!(matches!(
        log.inclusion_proof(3, 2),
        Err(Error::IndexOutOfRange { .. })
    ));
    assert!(matches!(
        log.consistency_proof(2, 1),
        Err(Error::InvalidSize { .. })
    ));
    assert!(matches!(
        log.root_at(u64::MAX),
        Err(Error::InvalidSize { .. })
    ));
    assert!(log.entries(5, 2).expect("empty range").is_empty());
    assert_eq!(log.entries(0, u64::MAX).expect("clamped").len(), 1);
}

#[test]
fn oversized_entries_are_refused_before_queueing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Ledger::open(
        dir.path(),
        Config {
            max_entry_bytes: 16,
            ..Config::default()
        },
    )
    .expect("open");
    assert!(matches!(
        log.append(vec![0; 17]),
        Err(Error::EntryTooLarge { len: 17, max: 16 })
    ));
    assert_eq!(log.head().size, 0);
}

#[test]
fn submit_then_wait_acknowledges_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path());
    let pending: Vec<_> = (0..100u32)
        .map(|i| log.submit(i.to_be_bytes().to_vec()).expect("submit"))
        .collect();
    for (i, p) in pending.into_iter().enumerate() {
        assert_eq!(p.wait().expect("ack").index, i as u64);
    }
}

#[test]
fn incremental_verify_checks_from_a_trusted_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path());
    for i in 0..100u32 {
        log.append(i.to_be_bytes().to_vec()).expect("append");
    }
    let trusted = (40u64, log.root_at(40).expect("root"));
    drop(log);
    let v = verify_dir_from(dir.path(), trusted.0, &trusted.1, &mut |_, _| {}).expect("verify");
    assert_eq!((v.size, v.checked), (100, 60));
    let wrong = ledger::leaf_hash(b"not the root");
    let err = verify_dir_from(dir.path(), 40, &wrong, &mut |_, _| {}).expect_err("wrong root");
    assert!(
        matches!(err, Error::Corrupt(c) if c.index == 40 && c.kind == ledger::CorruptionKind::Tree)
    );
    let err = verify_dir_from(dir.path(), 101, &wrong, &mut |_, _| {}).expect_err("beyond");
    assert!(matches!(err, Error::Corrupt(c) if c.kind == ledger::CorruptionKind::MissingEntry));
}

#[test]
fn verify_reports_progress_to_the_total() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path());
    for i in 0..10_000u32 {
        log.submit(i.to_be_bytes().to_vec()).expect("submit");
    }
    log.append(b"last".to_vec()).expect("append");
    drop(log);
    let mut calls = Vec::new();
    verify_dir(dir.path(), &mut |d, t| calls.push((d, t))).expect("verify");
    assert_eq!(calls.last(), Some(&(10_001, 10_001)));
    assert!(calls.len() >= 3);
}

#[test]
fn verify_of_a_missing_directory_is_an_error_not_an_empty_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = verify_dir(&dir.path().join("nope"), &mut |_, _| {}).expect_err("missing");
    assert!(err.to_string().contains("no ledger"), "{err}");
}

/// Evidence read back with its proofs: the stored hashes those proofs read
/// are kept across calls, and a proof built from kept hashes is the one the
/// store gives, at a grown tree and again at the smaller trees before it.
#[test]
fn evidence_proofs_from_kept_hashes_equal_the_stored_ones_as_the_log_grows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path());
    let evidence = [0u64, 3, 8, 13, 21, 34];
    let mut sizes = Vec::new();
    for round in 0..4u64 {
        for i in 0..(35 + round * 9) {
            log.append(format!("leaf {round} {i}").into_bytes())
                .expect("append");
        }
        sizes.push(log.head().size);
        for &size in sizes.iter().rev() {
            let proven = log.entries_with_proofs(&evidence, size).expect("evidence");
            let root = log.root_at(size).expect("root");
            for (&index, (entry, proof)) in evidence.iter().zip(&proven) {
                assert_eq!(entry.index, index);
                assert_eq!(*proof, log.inclusion_proof(index, size).expect("proof"));
                verify_inclusion(&entry.leaf_hash, index, size, proof, &root).expect("verifies");
            }
        }
        assert!(log.kept_proof_hashes() > 0, "the proofs' hashes are kept");
    }
    assert_eq!(log.kept_entries(), evidence.len());
}

/// The one-snapshot proof reads (what the proof endpoints serve) give exactly
/// what the separate reads give, at every size, including the head's size
/// (whose root comes from the head) and sizes below it (computed).
#[test]
fn one_snapshot_proof_reads_equal_the_separate_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path());
    for i in 0..37u64 {
        log.append(format!("leaf {i}").into_bytes())
            .expect("append");
    }
    for size in 1..=37u64 {
        for index in 0..size {
            let (leaf, root, proof) = log.inclusion_at(index, size).expect("inclusion");
            assert_eq!(leaf, log.leaf_hash(index).expect("leaf"));
            assert_eq!(root, log.root_at(size).expect("root"));
            assert_eq!(proof, log.inclusion_proof(index, size).expect("proof"));
            verify_inclusion(&leaf, index, size, &proof, &root).expect("verifies");
        }
        let all: Vec<u64> = (0..size).rev().collect();
        let proofs = log.inclusion_proofs(&all, size).expect("proofs");
        for (index, proof) in all.iter().zip(proofs) {
            assert_eq!(proof, log.inclusion_proof(*index, size).expect("proof"));
        }
        for old in 0..=size {
            let (r1, r2, proof) = log.consistency_at(old, size).expect("consistency");
            assert_eq!(r1, log.root_at(old).expect("old root"));
            assert_eq!(r2, log.root_at(size).expect("new root"));
            assert_eq!(proof, log.consistency_proof(old, size).expect("proof"));
        }
    }
    assert!(matches!(
        log.inclusion_at(5, 5),
        Err(Error::IndexOutOfRange { index: 5, size: 5 })
    ));
    assert!(matches!(
        log.inclusion_proofs(&[0, 5, 1], 5),
        Err(Error::IndexOutOfRange { index: 5, size: 5 })
    ));
    assert!(matches!(
        log.consistency_at(6, 5),
        Err(Error::InvalidSize { .. })
    ));
    assert!(matches!(
        log.inclusion_at(0, 38),
        Err(Error::InvalidSize { .. })
    ));
}

#[test]
fn find_leaf_names_the_first_entry_with_that_leaf_within_and_across_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let leaves: Vec<Vec<u8>> = ["a", "b", "a", "c", "b"]
        .iter()
        .map(|s| format!("leaf {s}").into_bytes())
        .collect();
    {
        let log = open(dir.path());
        // Submitted before any is waited for: the committer takes them as
        // one batch when it can, so repeats fall inside one commit.
        submit_all(&log, &leaves);
        log.append(leaves[0].clone()).expect("append again");
        log.append(leaves[3].clone()).expect("append again");
    }
    let log = open(dir.path());
    for (leaf, first) in [(&leaves[0], 0), (&leaves[1], 1), (&leaves[3], 3)] {
        let e = log
            .find_leaf(&ledger::leaf_hash(leaf))
            .expect("lookup")
            .expect("found");
        assert_eq!(e.index, first);
        assert_eq!(&e.leaf, leaf);
    }
    assert!(log
        .find_leaf(&ledger::leaf_hash(b"leaf d"))
        .expect("lookup")
        .is_none());
}

/// The lookups are opened (here: rebuilt, having been lost) on a thread of
/// their own beside the rest of the open. Logs closed right after opening
/// (however far their rebuild got) leave lookups the next open completes;
/// a lookup made while they open waits for them rather than answering
/// "absent".
#[test]
fn a_log_closed_while_its_lookups_are_rebuilt_finishes_them_at_the_next_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let leaves: Vec<Vec<u8>> = (0..300).map(|i| format!("leaf {i}").into_bytes()).collect();
    submit_all(&open(dir.path()), &leaves);
    std::fs::remove_dir_all(dir.path().join(ledger::lookup::LOOKUP_DIR)).expect("remove");
    for _ in 0..3 {
        drop(open(dir.path()));
    }
    let log = open(dir.path());
    let e = log
        .find_leaf(&ledger::leaf_hash(&leaves[299]))
        .expect("lookup")
        .expect("found");
    assert_eq!(e.index, 299);
    assert_eq!(log.lookups_state(), ledger::LookupsState::Open);
    let l = log.lookups().expect("open");
    assert_eq!((l.leaves_through(), l.keys_through()), (300, 0));
}
