//! Format version 1 → 2 → 3. `ledger/golden/format-v1/ledger.redb` is a
//! 100-entry log of `sample_leaf(0..100)` written by the last build that
//! wrote format version 1 (commit 00ddab3): one row per entry in `entries`.
//! This build reads it as it is, and its writer migrates it to entry
//! bundles. `ledger/golden/format-v2/ledger.redb` is an event log written by
//! the last build of format 2, with the lookup tables inside the file; the
//! writer drops them and rebuilds the lookups beside it.

use std::path::{Path, PathBuf};

use ledger::entry_bundle::{bundle_of, EntryBundle};
use ledger::merkle::Frontier;
use ledger::store::{ENTRIES, ENTRY_BUNDLES, FORMAT_VERSION, META};
use ledger::{verify_dir, Config, Ledger};
use redb::{Database, ReadableDatabase, ReadableTable, TableHandle};
use testkit::{db_path, sample_leaf};

const N: u64 = 100;

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/format-v1/ledger.redb")
}

fn copy_of_golden() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(golden(), db_path(dir.path())).expect("copy golden");
    dir
}

fn expected_root(n: u64) -> ledger::Hash {
    let mut f = Frontier::new();
    for i in 0..n {
        f.push(ledger::leaf_hash(&sample_leaf(i)));
    }
    f.root()
}

fn format_of(dir: &Path) -> u32 {
    let db = Database::open(db_path(dir)).expect("raw open");
    let txn = db.begin_read().expect("read");
    let meta = txn.open_table(META).expect("meta");
    let v = meta.get("format_version").expect("get").expect("format");
    u32::from_be_bytes(v.value().try_into().expect("4 bytes"))
}

fn tables(dir: &Path) -> Vec<String> {
    let db = Database::open(db_path(dir)).expect("raw open");
    let txn = db.begin_read().expect("read");
    txn.list_tables()
        .expect("list")
        .map(|t| t.name().to_owned())
        .collect()
}

#[test]
fn a_version_1_log_verifies_without_being_migrated() {
    let dir = copy_of_golden();
    let v = verify_dir(dir.path(), &mut |_, _| {}).expect("version 1 verifies");
    assert_eq!((v.size, v.root, v.checked), (N, expected_root(N), N));
    assert_eq!(format_of(dir.path()), 1, "verify must not migrate");
    assert!(tables(dir.path()).contains(&"entries".to_owned()));
}

#[test]
fn opening_a_version_1_log_for_writing_migrates_it_and_keeps_every_entry_and_root() {
    let dir = copy_of_golden();
    {
        let log = Ledger::open(dir.path(), Config::default()).expect("open migrates");
        assert_eq!(log.head().size, N);
        assert_eq!(log.head().root, expected_root(N));
        for i in 0..N {
            assert_eq!(log.entry(i).expect("entry").leaf, sample_leaf(i));
        }
        // The log goes on from where version 1 stopped, in the bundle the
        // migration left partial (96..100).
        for i in N..N + 30 {
            log.submit(sample_leaf(i))
                .expect("submit")
                .wait()
                .expect("append");
        }
    }
    assert_eq!(format_of(dir.path()), FORMAT_VERSION);
    let names = tables(dir.path());
    assert!(!names.contains(&"entries".to_owned()), "{names:?}");
    assert!(names.contains(&"entry_bundles".to_owned()), "{names:?}");
    let v = verify_dir(dir.path(), &mut |_, _| {}).expect("verify after migration");
    assert_eq!((v.size, v.root), (N + 30, expected_root(N + 30)));
    let log = Ledger::open(dir.path(), Config::default()).expect("reopen");
    assert_eq!(log.entry(N + 29).expect("entry").leaf, sample_leaf(N + 29));
}

#[test]
fn an_interrupted_migration_reads_as_version_1_and_resumes() {
    // The state a crash leaves between two migration transactions: format 1,
    // every version-1 row still there, the first bundles written, and the
    // marker naming where the next transaction starts.
    let dir = copy_of_golden();
    {
        let db = Database::open(db_path(dir.path())).expect("raw open");
        let txn = db.begin_write().expect("write");
        {
            let entries = txn.open_table(ENTRIES).expect("entries");
            let mut bundles = txn.open_table(ENTRY_BUNDLES).expect("bundles");
            for key in 0..2 {
                let mut b = EntryBundle::empty(key);
                for item in entries.range(key * 16..key * 16 + 16).expect("range") {
                    let (k, v) = item.expect("row");
                    assert_eq!(bundle_of(k.value()), key);
                    b.push_record(k.value(), &[v.value()]);
                }
                // Stored raw, where a migration would compress a full
                // bundle: shows below that these are kept, not redone.
                let raw = b.encode_with(ledger::entry_bundle::CODEC_RAW);
                bundles
                    .insert(key, raw.expect("encode").as_slice())
                    .expect("insert");
            }
            let mut meta = txn.open_table(META).expect("meta");
            meta.insert("migrate_v2_next", 32u64.to_be_bytes().as_slice())
                .expect("marker");
        }
        txn.commit().expect("commit");
    }
    let v = verify_dir(dir.path(), &mut |_, _| {}).expect("reads as version 1");
    assert_eq!((v.size, v.root), (N, expected_root(N)));

    let log = Ledger::open(dir.path(), Config::default()).expect("open resumes");
    for i in 0..N {
        assert_eq!(log.entry(i).expect("entry").leaf, sample_leaf(i));
    }
    drop(log);
    assert_eq!(format_of(dir.path()), FORMAT_VERSION);
    let codec = |key: u64| {
        let db = Database::open(db_path(dir.path())).expect("raw open");
        let txn = db.begin_read().expect("read");
        let t = txn.open_table(ENTRY_BUNDLES).expect("bundles");
        let v = t.get(key).expect("get").expect("bundle");
        v.value()[0]
    };
    assert_eq!(codec(1), ledger::entry_bundle::CODEC_RAW, "bundle 1 redone");
    assert_eq!(codec(2), ledger::entry_bundle::CODEC_ZSTD);
    let v = verify_dir(dir.path(), &mut |_, _| {}).expect("verify after resuming");
    assert_eq!((v.size, v.root, v.checked), (N, expected_root(N), N));
}

#[test]
fn damage_in_a_version_1_log_is_named_at_the_same_index_after_migration() {
    let dir = copy_of_golden();
    {
        let db = Database::open(db_path(dir.path())).expect("raw open");
        let txn = db.begin_write().expect("write");
        {
            let mut entries = txn.open_table(ENTRIES).expect("entries");
            let rec = entries.get(41).expect("get").expect("41").value().to_vec();
            let mut forged = rec[..32].to_vec();
            forged.extend_from_slice(b"{\"entry\":41,\"score\":1.000}");
            entries.insert(41, forged.as_slice()).expect("insert");
        }
        txn.commit().expect("commit");
    }
    let before = match verify_dir(dir.path(), &mut |_, _| {}) {
        Err(ledger::Error::Corrupt(c)) => c,
        other => panic!("expected a corruption, got {other:?}"),
    };
    // The O(log n) open check does not read entry 41: the writer migrates.
    drop(Ledger::open(dir.path(), Config::default()).expect("open"));
    assert_eq!(format_of(dir.path()), FORMAT_VERSION);
    let after = match verify_dir(dir.path(), &mut |_, _| {}) {
        Err(ledger::Error::Corrupt(c)) => c,
        other => panic!("expected a corruption, got {other:?}"),
    };
    assert_eq!(
        (before.index, before.kind),
        (41, ledger::CorruptionKind::Leaf)
    );
    assert_eq!((after.index, after.kind), (before.index, before.kind));
}

/// `ledger/golden/format-v2/ledger.redb`: the event log `ledger demo`
/// wrote with the last build of format version 2 (commit 9b6aa9f), with
/// the two lookup tables in the file.
fn copy_of_golden_v2() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/format-v2/ledger.redb");
    std::fs::copy(golden, db_path(dir.path())).expect("copy golden");
    dir
}

/// A keyed sequencer that names entries as the event log does (it appends
/// nothing here).
struct EventKeys;

impl ledger::Sequencer for EventKeys {
    type Input = Vec<u8>;
    type Accepted = ();
    type Rejected = std::convert::Infallible;

    fn sequence(
        &mut self,
        leaf: Vec<u8>,
        _: u64,
        _: &ledger::LogView<'_>,
    ) -> ledger::Sequenced<(), Self::Rejected> {
        ledger::Sequenced::Append {
            leaf,
            accepted: (),
            key: None,
            private: Vec::new(),
            shred: Vec::new(),
        }
    }

    fn failed(&mut self, _: &ledger::LogView<'_>) {}

    const KEYED: bool = true;

    fn key_of(leaf: &[u8]) -> Option<ledger::EntryKey> {
        <events::EventSequencer as ledger::Sequencer>::key_of(leaf)
    }
}

#[test]
fn opening_a_version_2_log_drops_its_lookup_tables_and_rebuilds_the_lookups_beside_it() {
    let dir = copy_of_golden_v2();
    let before = verify_dir(dir.path(), &mut |_, _| {}).expect("version 2 verifies");
    assert_eq!(format_of(dir.path()), 2, "verify must not migrate");
    let names = tables(dir.path());
    assert!(names.contains(&"leaf_index".to_owned()), "{names:?}");
    assert!(names.contains(&"entry_keys".to_owned()), "{names:?}");
    let upgraded = Ledger::open_with(dir.path(), Config::default(), |_, _| Ok(EventKeys))
        .expect("open upgrades");
    upgraded
        .lookups()
        .expect("the lookups are rebuilt beside the data file");
    drop(upgraded);
    assert_eq!(format_of(dir.path()), FORMAT_VERSION);
    let names = tables(dir.path());
    assert!(!names.contains(&"leaf_index".to_owned()), "{names:?}");
    assert!(!names.contains(&"entry_keys".to_owned()), "{names:?}");
    let after = verify_dir(dir.path(), &mut |_, _| {}).expect("verify after upgrade");
    assert_eq!((after.size, after.root), (before.size, before.root));
    let lookups = ledger::verify_dir_indexes::<events::EventSequencer>(dir.path(), &mut |_, _| {})
        .expect("the rebuilt lookups check out");
    assert_eq!(
        (lookups.covered, lookups.keys_covered),
        (before.size, before.size)
    );
    assert_eq!(lookups.leaf_rows, before.size);
    assert_eq!(
        lookups.key_rows, before.size,
        "every event has its envelope id"
    );
}
