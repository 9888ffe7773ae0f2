//! Sealed segments: a log whose data file is sealed into a segment every
//! few entries reads, proves and verifies exactly as one that never seals,
//! across reopens; a seal cut short leaves the log whole; a missing
//! segment is a typed failure, never a shorter log. Derived state is kept
//! in a file of its own that no seal copies.

use ledger::merkle::{verify_consistency, verify_inclusion};
use ledger::store::{AUX, DB_FILE, DERIVED_FILE, HASHES, SEGMENTS_DIR};
use ledger::{verify_dir, Config, CorruptionKind, Error, Ledger};
use redb::{ReadableDatabase, ReadableTableMetadata};
use testkit::RawDisk;

const EVERY: u64 = 40;

/// A log kept in the redb data file whatever `LEDGER_STORAGE` says (a
/// log in PostgreSQL has no data file to seal).
fn open(dir: &std::path::Path, segment_entries: u64) -> Ledger {
    Ledger::open(
        dir,
        Config {
            segment_entries,
            ..testkit::file_config()
        },
    )
    .expect("open")
}

fn leaf(i: u64) -> Vec<u8> {
    format!("entry {i}").into_bytes()
}

/// Appends leaves `from..to` in batches of varied sizes (so that seals
/// fall inside bundles and at their edges).
fn grow(log: &Ledger, from: u64, to: u64) {
    let mut i = from;
    let mut batch = 1;
    while i < to {
        let end = (i + batch).min(to);
        let pending: Vec<_> = (i..end)
            .map(|j| log.submit(leaf(j)).expect("submit"))
            .collect();
        for p in pending {
            p.wait().expect("append");
        }
        i = end;
        batch = batch % 37 + 3;
    }
}

fn segments(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join(SEGMENTS_DIR))
        .map(|list| {
            list.map(|f| f.expect("entry").file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Every read of `a` equals the same read of `b`.
fn same_log(a: &Ledger, b: &Ledger) {
    let size = a.head().size;
    assert_eq!(a.head(), b.head());
    for i in 0..size {
        let (x, y) = (a.entry(i).expect("entry"), b.entry(i).expect("entry"));
        assert_eq!(x.leaf, leaf(i), "entry {i}");
        assert_eq!(x.leaf_hash, y.leaf_hash, "entry {i}");
        assert_eq!(x.chain_hash, y.chain_hash, "entry {i}");
    }
    let all = a.entries(0, size).expect("entries");
    assert_eq!(all.len() as u64, size);
    assert!(all.iter().enumerate().all(|(i, e)| e.index == i as u64));
    for start in [0, 15, 16, 39, 40, 41, size.saturating_sub(3)] {
        let end = (start + 90).min(size);
        let x = a.entries(start, end).expect("range");
        let y = b.entries(start, end).expect("range");
        assert_eq!(
            x.iter().map(|e| e.chain_hash).collect::<Vec<_>>(),
            y.iter().map(|e| e.chain_hash).collect::<Vec<_>>(),
            "entries {start}..{end}"
        );
    }
    for at in [1, 17, EVERY, EVERY + 1, 3 * EVERY + 7, size / 2, size] {
        let root = a.root_at(at).expect("root");
        assert_eq!(root, b.root_at(at).expect("root"), "root at {at}");
        for index in [0, at / 3, at - 1] {
            let p = a.inclusion_proof(index, at).expect("inclusion");
            assert_eq!(p, b.inclusion_proof(index, at).expect("inclusion"));
            let leaf_hash = a.leaf_hash(index).expect("leaf hash");
            verify_inclusion(&leaf_hash, index, at, &p, &root).expect("inclusion verifies");
        }
        let c = a.consistency_proof(at, size).expect("consistency");
        assert_eq!(c, b.consistency_proof(at, size).expect("consistency"));
        verify_consistency(at, &root, size, &a.head().root, &c).expect("consistency verifies");
    }
    let evidence: Vec<u64> = (0..size).step_by(7).collect();
    let proven = a.entries_with_proofs(&evidence, size).expect("evidence");
    for (&index, (entry, proof)) in evidence.iter().zip(&proven) {
        assert_eq!(entry.index, index);
        assert_eq!(*proof, b.inclusion_proof(index, size).expect("proof"));
    }
    for i in [0, size / 2, size - 1] {
        let found = a.find_leaf(&a.leaf_hash(i).expect("hash")).expect("find");
        assert_eq!(found.map(|e| e.index), Some(i));
    }
    a.verify_full(&mut |_, _| {}).expect("full verify");
}

#[test]
fn a_log_sealed_into_segments_reads_proves_and_verifies_as_one_data_file() {
    let sealed = tempfile::tempdir().expect("tempdir");
    let whole = tempfile::tempdir().expect("tempdir");
    let (a, b) = (open(sealed.path(), EVERY), open(whole.path(), 0));
    a.put_aux("derived", b"before").expect("aux");
    grow(&a, 0, 333);
    grow(&b, 0, 333);
    let made = segments(sealed.path());
    assert!(made.len() >= 7, "{made:?}");
    assert!(segments(whole.path()).is_empty());
    // Derived state saved before a seal is still read after it; one saved
    // after replaces it.
    assert_eq!(a.get_aux("derived").expect("aux"), Some(b"before".to_vec()));
    same_log(&a, &b);
    a.put_aux("derived", b"after").expect("aux");
    // Reopened, the log continues where it was, and keeps sealing.
    drop(a);
    let a = open(sealed.path(), EVERY);
    assert_eq!(a.get_aux("derived").expect("aux"), Some(b"after".to_vec()));
    same_log(&a, &b);
    grow(&a, 333, 400);
    grow(&b, 333, 400);
    same_log(&a, &b);
    assert!(segments(sealed.path()).len() > made.len());
    drop(a);
    let v = verify_dir(sealed.path(), &mut |_, _| {}).expect("verify");
    assert_eq!(v.size, 400);
    // A build that never seals reads the sealed log as it is.
    let a = open(sealed.path(), 0);
    same_log(&a, &b);
    drop((a, b));
    // The data file holds only what came after the last seal: far fewer
    // stored hashes than the one that never sealed. (Rows, not bytes: redb
    // grows a file in steps that depend on how commits happened to group.)
    let hashes = |d: &std::path::Path| rows(&d.join(DB_FILE), HASHES);
    assert!(
        hashes(sealed.path()) * 4 < hashes(whole.path()),
        "{} stored hashes against {}",
        hashes(sealed.path()),
        hashes(whole.path())
    );
}

/// How many records of derived state the redb file at `path` holds in its
/// own `aux` table (0 when it has none).
fn aux_records(path: &std::path::Path) -> u64 {
    rows(path, AUX)
}

/// How many rows `table` of the redb file at `path` holds (0 when it has
/// no such table).
fn rows<K: redb::Key + 'static, V: redb::Value + 'static>(
    path: &std::path::Path,
    table: redb::TableDefinition<K, V>,
) -> u64 {
    let db = redb::Database::builder()
        .open_read_only(path)
        .expect("open");
    let txn = db.begin_read().expect("read");
    match txn.open_table(table) {
        Ok(t) => t.len().expect("len"),
        Err(redb::TableError::TableDoesNotExist(_)) => 0,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn derived_state_is_kept_in_its_own_file_which_a_seal_never_copies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path(), EVERY);
    let big = vec![7u8; 1 << 20];
    log.put_aux("derived", &big).expect("aux");
    // What a restore records is not derived: it stays with the log.
    let not_kept = 12u64.to_be_bytes();
    log.put_aux(ledger::private::NOT_KEPT_AUX, &not_kept)
        .expect("aux");
    grow(&log, 0, 4 * EVERY + 5);
    assert_eq!(log.get_aux("derived").expect("aux"), Some(big.clone()));
    drop(log);
    let made = segments(dir.path());
    assert!(made.len() >= 3, "{made:?}");
    // Neither the data file nor any segment holds the derived record: no
    // seal copied it. Each holds the restore's record, carried over.
    assert_eq!(aux_records(&dir.path().join(DB_FILE)), 1);
    for s in &made {
        assert_eq!(
            aux_records(&dir.path().join(SEGMENTS_DIR).join(s)),
            1,
            "{s}"
        );
    }
    assert_eq!(aux_records(&dir.path().join(DERIVED_FILE)), 1);
    // Nor as pages a removal left behind: the data file holds no run of
    // the derived record's bytes. (Not its length: redb grows a file in
    // steps that depend on how commits happened to group, up to about the
    // record's size here.)
    let run = |p: &std::path::Path| {
        let bytes = std::fs::read(p).expect("read");
        bytes.split(|b| *b != 7).map(<[u8]>::len).max().unwrap_or(0)
    };
    let in_data = run(&dir.path().join(DB_FILE));
    assert!(
        in_data < 1024,
        "{in_data} bytes of the derived record in the data file"
    );
    assert!(run(&dir.path().join(DERIVED_FILE)) >= big.len());
    let log = open(dir.path(), EVERY);
    assert_eq!(log.get_aux("derived").expect("aux"), Some(big));
    assert_eq!(
        log.get_aux(ledger::private::NOT_KEPT_AUX).expect("aux"),
        Some(not_kept.to_vec())
    );
}

#[test]
fn a_damaged_derived_state_file_is_moved_aside_and_the_log_opens_without_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path(), 0);
    grow(&log, 0, 10);
    log.put_aux("derived", b"saved").expect("aux");
    drop(log);
    std::fs::write(dir.path().join(DERIVED_FILE), vec![0xA5; 8192]).expect("damage");
    let log = open(dir.path(), 0);
    assert_eq!(log.head().size, 10);
    assert_eq!(log.get_aux("derived").expect("aux"), None);
    assert!(dir.path().join(format!("{DERIVED_FILE}.damaged")).is_file());
    log.put_aux("derived", b"again").expect("aux");
    grow(&log, 10, 12);
    drop(log);
    let log = open(dir.path(), 0);
    assert_eq!(
        log.get_aux("derived").expect("aux"),
        Some(b"again".to_vec())
    );
}

#[test]
fn derived_state_an_earlier_build_kept_in_the_data_file_is_read_there_then_moved_to_its_own_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path(), 0);
    grow(&log, 0, 20);
    log.put_aux("a", b"older").expect("aux");
    log.put_aux("c", b"older").expect("aux");
    drop(log);
    // What a build before the derived file leaves (run after this one, so
    // a derived file is there too, with older records): the records in
    // the data file's own table.
    {
        let db = redb::Database::open(dir.path().join(DB_FILE)).expect("open");
        let txn = db.begin_write().expect("write");
        {
            let mut t = txn.open_table(AUX).expect("table");
            t.insert("a", b"first".as_slice()).expect("insert");
            t.insert("b", b"second".as_slice()).expect("insert");
        }
        txn.commit().expect("commit");
    }
    // A read-only open reads them where they are, and moves nothing.
    let store = ledger::store::Store::open_existing(dir.path()).expect("open");
    assert_eq!(
        store.snapshot().expect("snapshot").aux("a").expect("aux"),
        Some(b"first".to_vec())
    );
    drop(store);
    assert_eq!(aux_records(&dir.path().join(DB_FILE)), 2);
    // The writer's open moves them in place of the derived file's older
    // records: read from the derived file, gone from the data file, and
    // still there after another open.
    let log = open(dir.path(), 0);
    assert_eq!(log.get_aux("b").expect("aux"), Some(b"second".to_vec()));
    assert_eq!(log.get_aux("c").expect("aux"), None);
    drop(log);
    assert_eq!(aux_records(&dir.path().join(DB_FILE)), 0);
    assert_eq!(aux_records(&dir.path().join(DERIVED_FILE)), 2);
    let log = open(dir.path(), 0);
    assert_eq!(log.get_aux("a").expect("aux"), Some(b"first".to_vec()));
    assert_eq!(log.head().size, 20);
}

#[test]
fn a_seal_cut_short_before_the_new_data_file_takes_the_name_leaves_the_old_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path(), EVERY);
    grow(&log, 0, 100);
    let head = log.head();
    drop(log);
    let listed = segments(dir.path());
    // What a seal leaves when cut short before the rename: a next data file
    // (here not even a database) and the data file linked as a segment no
    // data file lists yet.
    std::fs::write(dir.path().join("ledger.redb.next"), b"half-written").expect("next");
    let stray = dir
        .path()
        .join(SEGMENTS_DIR)
        .join("00000000000000000100.redb");
    std::fs::hard_link(dir.path().join(DB_FILE), &stray).expect("link");
    let log = open(dir.path(), EVERY);
    assert_eq!(log.head(), head);
    assert!(!dir.path().join("ledger.redb.next").exists());
    assert_eq!(
        segments(dir.path()),
        listed,
        "the unlisted segment is removed"
    );
    log.verify_full(&mut |_, _| {}).expect("verify");
    grow(&log, 100, 130);
    assert_eq!(log.entry(129).expect("entry").leaf, leaf(129));
}

#[test]
fn an_unlisted_segment_that_is_not_the_data_file_is_refused_and_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path(), EVERY);
    grow(&log, 0, 100);
    drop(log);
    // A file the data file does not list, but not a link a seal left: a
    // data file restored from an older copy would see its later segments
    // this way. It may hold entries: never removed.
    let stranger = dir
        .path()
        .join(SEGMENTS_DIR)
        .join("00000000000000000999.redb");
    std::fs::write(&stranger, b"entries of some other copy").expect("write");
    let Err(err) = Ledger::open(dir.path(), testkit::file_config()) else {
        panic!("opened beside an unlisted segment");
    };
    assert!(
        matches!(&err, Error::Corrupt(c) if c.kind == CorruptionKind::Malformed)
            && err
                .to_string()
                .contains("not a segment the data file lists"),
        "{err}"
    );
    assert!(stranger.exists());
}

#[test]
fn attack_a_segment_swapped_for_another_is_refused_when_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path(), EVERY);
    grow(&log, 0, 200);
    drop(log);
    let names = segments(dir.path());
    let seg = |n: &str| dir.path().join(SEGMENTS_DIR).join(n);
    std::fs::copy(seg(&names[2]), seg(&names[1])).expect("copy");
    let err = verify_dir(dir.path(), &mut |_, _| {}).expect_err("refused");
    assert!(
        matches!(&err, Error::Corrupt(c) if c.kind == CorruptionKind::Malformed)
            && err.to_string().contains("it was sealed at"),
        "{err}"
    );
}

#[test]
fn a_missing_segment_is_a_missing_entry_not_a_shorter_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path(), EVERY);
    grow(&log, 0, 100);
    drop(log);
    let first = segments(dir.path()).remove(0);
    std::fs::remove_file(dir.path().join(SEGMENTS_DIR).join(&first)).expect("remove");
    let Err(err) = Ledger::open(dir.path(), testkit::file_config()) else {
        panic!("a log missing a segment opened");
    };
    assert!(
        matches!(&err, Error::Corrupt(c) if c.kind == CorruptionKind::MissingEntry),
        "{err}"
    );
    let err = verify_dir(dir.path(), &mut |_, _| {}).expect_err("refused");
    assert!(
        matches!(&err, Error::Corrupt(c) if c.kind == CorruptionKind::MissingEntry),
        "{err}"
    );
}

#[test]
fn attack_an_entry_rewritten_in_a_sealed_segment_is_named_by_verify_and_refused_on_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path(), EVERY);
    grow(&log, 0, 200);
    drop(log);
    let first = segments(dir.path()).remove(0);
    RawDisk::open_file(&dir.path().join(SEGMENTS_DIR).join(first)).set_leaf(5, b"forged");
    let err = verify_dir(dir.path(), &mut |_, _| {}).expect_err("caught");
    assert!(
        matches!(&err, Error::Corrupt(c) if (c.index, c.kind) == (5, CorruptionKind::Leaf)),
        "{err}"
    );
    let log = open(dir.path(), EVERY);
    match log.entry(5) {
        Err(Error::Corrupt(c)) => assert_eq!((c.index, c.kind), (5, CorruptionKind::Leaf)),
        other => panic!("tampered entry served: {other:?}"),
    }
}
