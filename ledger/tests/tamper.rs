//! Tamper tests. Each edits a closed data directory's log directly, as an
//! attacker with disk access would (through redb for the data file; as a
//! database superuser with the schema's triggers off for a log in
//! PostgreSQL, when `LEDGER_STORAGE` names one), and expects one typed
//! failure: `verify` names the exact index and kind, and `open` refuses
//! where its O(log n) self-check can see the damage. The attacks on the
//! data file's own layout (entry bundles, a short record, a cut file) run
//! on redb whatever the variable says.

use ledger::merkle::{split_stored_hash_index, stored_hash_index};
use ledger::{
    verify_dir, verify_dir_from, Config, Corruption, CorruptionKind, Error, Hash, Ledger,
};
use testkit::{build_file_log, build_log, sample_leaf, RawDisk};

const N: u64 = 100;

fn fresh() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    build_log(dir.path(), N);
    dir
}

/// A log in the redb data file, for the attacks on its layout.
fn fresh_file() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    build_file_log(dir.path(), N);
    dir
}

fn verify_err(dir: &std::path::Path) -> Corruption {
    match verify_dir(dir, &mut |_, _| {}) {
        Err(Error::Corrupt(c)) => c,
        other => panic!("expected a corruption, got {other:?}"),
    }
}

fn open_err(dir: &std::path::Path) -> Corruption {
    match Ledger::open(dir, Config::default()) {
        Err(Error::Corrupt(c)) => c,
        Err(e) => panic!("expected a corruption, got {e}"),
        Ok(_) => panic!("open accepted a tampered log"),
    }
}

/// Cuts the last 4 bytes off bundle `key`'s stored value (its zstd frame).
fn cut_bundle_short(dir: &std::path::Path, key: u64) {
    let raw = RawDisk::open(dir);
    let mut value = raw.bundle(key).expect("bundle").encode().expect("encode");
    value.truncate(value.len() - 4);
    raw.put_bundle_value(key, &value);
}

fn flipped(h: Hash) -> Hash {
    let mut x = h;
    x.0[0] ^= 1;
    x
}

#[test]
fn changed_entry_bytes_in_the_middle_are_named_by_verify_and_refused_on_read() {
    let dir = fresh();
    RawDisk::open(dir.path()).set_leaf(37, b"{\"entry\":37,\"score\":1.000}");
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (37, CorruptionKind::Leaf));
    // The O(log n) self-check cannot see the middle, but a read can.
    let log = Ledger::open(dir.path(), Config::default()).expect("open");
    match log.entry(37) {
        Err(Error::Corrupt(c)) => assert_eq!((c.index, c.kind), (37, CorruptionKind::Leaf)),
        other => panic!("tampered entry served: {other:?}"),
    }
}

#[test]
fn changed_last_entry_is_refused_on_open() {
    let dir = fresh();
    RawDisk::open(dir.path()).set_leaf(N - 1, b"forged");
    let c = open_err(dir.path());
    assert_eq!((c.index, c.kind), (N - 1, CorruptionKind::Leaf));
    assert_eq!(verify_err(dir.path()).index, N - 1);
}

#[test]
fn changed_stored_leaf_hash_is_named_by_verify() {
    let dir = fresh();
    let raw = RawDisk::open(dir.path());
    let i = stored_hash_index(0, 12);
    raw.set_hash(i, flipped(raw.hash(i).expect("hash")));
    drop(raw);
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (12, CorruptionKind::Leaf));
}

#[test]
fn changed_interior_tree_hash_is_named_at_the_leaf_that_completed_it() {
    let dir = fresh();
    let raw = RawDisk::open(dir.path());
    // Level-2 node over leaves 4..8, written by leaf 7's append.
    let i = stored_hash_index(2, 1);
    assert_eq!(split_stored_hash_index(i), (2, 1));
    raw.set_hash(i, flipped(raw.hash(i).expect("hash")));
    drop(raw);
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (7, CorruptionKind::Tree));
}

#[test]
fn changed_hash_on_the_right_edge_is_refused_on_open() {
    let dir = fresh();
    let raw = RawDisk::open(dir.path());
    // The 64-leaf subtree is part of every root from 64 on.
    let i = stored_hash_index(6, 0);
    raw.set_hash(i, flipped(raw.hash(i).expect("hash")));
    drop(raw);
    let c = open_err(dir.path());
    assert_eq!(c.kind, CorruptionKind::Tree);
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (63, CorruptionKind::Tree));
}

#[test]
fn changed_chain_value_is_named_by_verify() {
    let dir = fresh();
    RawDisk::open(dir.path()).set_chain(50, Hash([7; 32]));
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (50, CorruptionKind::Chain));
}

#[test]
fn changed_last_chain_value_is_refused_on_open() {
    let dir = fresh();
    RawDisk::open(dir.path()).set_chain(N - 1, Hash([7; 32]));
    let c = open_err(dir.path());
    assert_eq!((c.index, c.kind), (N - 1, CorruptionKind::Chain));
}

#[test]
fn deleted_entry_is_named_by_verify_and_refused_on_read() {
    let dir = fresh();
    RawDisk::open(dir.path()).delete_entry(20);
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (20, CorruptionKind::MissingEntry));
    let log = Ledger::open(dir.path(), Config::default()).expect("open");
    assert!(
        matches!(log.entry(20), Err(Error::Corrupt(c)) if c.kind == CorruptionKind::MissingEntry)
    );
}

#[test]
fn truncated_log_under_an_unchanged_head_is_refused() {
    let dir = fresh();
    RawDisk::open(dir.path()).truncate_from(60);
    let c = open_err(dir.path());
    assert_eq!(c.kind, CorruptionKind::MissingEntry);
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (60, CorruptionKind::MissingEntry));
}

#[test]
fn consistently_truncated_log_is_caught_only_from_a_trusted_root() {
    // The attacker also rewrites the head. Nothing on this disk can tell: the
    // result is a valid 60-entry log. A trusted (size, root) held elsewhere
    // (an anchor) is what catches it.
    let dir = fresh();
    let trusted_root = {
        let log = Ledger::open(dir.path(), Config::default()).expect("open");
        log.head().root
    };
    let raw = RawDisk::open(dir.path());
    let chain59 = Hash(
        raw.entry_record(59).expect("entry")[..32]
            .try_into()
            .expect("32"),
    );
    let root60 = {
        let mut f = ledger::merkle::Frontier::new();
        for i in 0..60 {
            f.push(ledger::leaf_hash(&sample_leaf(i)));
        }
        f.root()
    };
    raw.truncate_from(60);
    raw.set_head(&ledger::Head {
        size: 60,
        root: root60,
        chain: chain59,
    });
    drop(raw);
    verify_dir(dir.path(), &mut |_, _| {}).expect("self-consistent truncation verifies locally");
    match verify_dir_from(dir.path(), N, &trusted_root, &mut |_, _| {}) {
        Err(Error::Corrupt(c)) => assert_eq!((c.index, c.kind), (60, CorruptionKind::MissingEntry)),
        other => panic!("truncation below a trusted size not caught: {other:?}"),
    }
}

#[test]
fn extra_entry_beyond_the_head_is_refused() {
    let dir = fresh();
    let raw = RawDisk::open(dir.path());
    let mut rec = vec![0u8; 32];
    rec.extend_from_slice(b"smuggled");
    raw.put_entry_record(N, &rec);
    drop(raw);
    let c = open_err(dir.path());
    assert_eq!((c.index, c.kind), (N, CorruptionKind::ExtraEntry));
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (N, CorruptionKind::ExtraEntry));
}

#[test]
fn swapped_entries_are_named_at_the_lower_index() {
    let dir = fresh();
    let raw = RawDisk::open(dir.path());
    let a = raw.entry_record(30).expect("30");
    let b = raw.entry_record(31).expect("31");
    raw.put_entry_record(30, &b);
    raw.put_entry_record(31, &a);
    drop(raw);
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (30, CorruptionKind::Leaf));
}

#[test]
fn short_entry_record_is_malformed() {
    let dir = fresh_file();
    RawDisk::open(dir.path()).put_entry_record(5, &[1, 2, 3]);
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (5, CorruptionKind::Malformed));
}

#[test]
fn truncated_data_file_is_a_typed_error_not_a_panic() {
    let dir = fresh_file();
    let path = testkit::db_path(dir.path());
    let len = std::fs::metadata(&path).expect("meta").len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open file");
    f.set_len(len / 3).expect("truncate");
    drop(f);
    assert!(Ledger::open(dir.path(), Config::default()).is_err());
    assert!(verify_dir(dir.path(), &mut |_, _| {}).is_err());
}

#[test]
fn garbled_entry_bundle_is_malformed_at_its_first_index() {
    let dir = fresh_file();
    // Bundle 2 holds entries 32..48; its compressed frame is cut short.
    cut_bundle_short(dir.path(), 2);
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (32, CorruptionKind::Malformed));
    let log = Ledger::open(dir.path(), Config::default()).expect("open");
    assert!(
        matches!(log.entry(40), Err(Error::Corrupt(c)) if (c.index, c.kind) == (32, CorruptionKind::Malformed))
    );
}

#[test]
fn entry_bundle_claiming_a_huge_decoded_size_is_refused_before_allocating() {
    let dir = fresh_file();
    let raw = RawDisk::open(dir.path());
    let value = raw.bundle(1).expect("bundle 1").encode().expect("encode");
    let mut bomb = vec![ledger::entry_bundle::CODEC_ZSTD];
    bomb.extend_from_slice(&u32::MAX.to_be_bytes());
    bomb.extend_from_slice(&value[5..]);
    raw.put_bundle_value(1, &bomb);
    drop(raw);
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (16, CorruptionKind::Malformed));
}

/// The full walk hashes chunks of 512 entries on two threads (chunks dealt
/// in turn). Damage in a later chunk handled by the other thread must not be
/// reported before earlier damage, and a storage error (a garbled bundle)
/// in a later chunk must not hide an earlier changed entry.
#[test]
fn damage_in_several_chunks_of_the_parallel_walk_is_named_at_the_lowest_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    build_file_log(dir.path(), 1_300);
    let raw = RawDisk::open(dir.path());
    // Chunk 2 (entries 1024..1300, first hasher): a changed entry.
    raw.set_leaf(1_100, b"{\"entry\":1100,\"score\":1.000}");
    drop(raw);
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (1_100, CorruptionKind::Leaf));
    // Chunk 1 (512..1024, second hasher): a changed entry, named first.
    RawDisk::open(dir.path()).set_leaf(700, b"{\"entry\":700,\"score\":1.000}");
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (700, CorruptionKind::Leaf));
    // A garbled bundle in chunk 2 (entries 1040..1056) stops the reader;
    // the changed entry at 700 is still the one named.
    cut_bundle_short(dir.path(), 65);
    let c = verify_err(dir.path());
    assert_eq!((c.index, c.kind), (700, CorruptionKind::Leaf));
}
