//! Envelope ids live in the log's key lookup (`lookup/`, keyspace
//! `entry_keys`), written once each batch commits and before its head is
//! published. A log without lookups, whose lookups stopped partway, or
//! whose lookups belong to another log, is indexed on open before any
//! write; a row that does not match the entry it names is never trusted.

use std::sync::Arc;

use events::model::*;
use events::{EventLog, ManualClock, RejectCode};
use testkit::world::*;
use testkit::RawLookups;

fn reopen(dir: &std::path::Path) -> EventLog {
    EventLog::open(
        dir,
        ledger::Config::default(),
        key("ledger"),
        Arc::new(ManualClock::new(T0)),
    )
    .expect("reopen")
}

/// A world with `n` scores, and the envelopes and indexes of all of them.
fn scored(n: usize) -> (World, Vec<(Vec<u8>, Payload, u64)>) {
    let mut w = World::new();
    let mut posted = Vec::new();
    for i in 0..n {
        let p = w.payload(
            "harness",
            Event::ScoreRecorded(score(&format!("case-{}", i % 3 + 1), 0.8)),
        );
        let env = w.with_disclosures(&events::sign_envelope(&key("harness"), &p));
        let r = w.append(&env).expect("score");
        posted.push((env, p, r.appended.index));
    }
    (w, posted)
}

/// Re-posting every envelope is acknowledged at its index and appends
/// nothing; a different envelope under a logged id is refused.
fn ids_hold(log: &EventLog, posted: &[(Vec<u8>, Payload, u64)]) {
    let size = log.ledger().head().size;
    for (env, p, index) in posted {
        let again = log.append(env).expect("re-post");
        assert!(again.existing, "entry {index} was appended twice");
        assert_eq!(again.appended.index, *index);
        assert_eq!(log.find_id(&p.id).expect("lookup"), Some(*index));
    }
    let (_, p, _) = &posted[0];
    let mut other = p.clone();
    other.event = Event::ScoreRecorded(score("case-1", 0.1));
    let disclosures = events::disclose::commit(&mut other).expect("randomness");
    let r = log.append(&events::envelope::write_body(
        &events::sign_envelope(&key("harness"), &other),
        &disclosures,
    ));
    assert_eq!(expect_code(r, RejectCode::EnvelopeIdReused).field, "id");
    assert_eq!(
        log.ledger().head().size,
        size,
        "a refused write was appended"
    );
}

#[test]
fn ids_are_indexed_as_entries_commit_and_survive_a_restart() {
    let (w, posted) = scored(5);
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let disk = RawLookups::open(&dir);
    for (env, p, index) in &posted {
        let (at, digest) = disk.entry_key(&p.id).expect("indexed at commit");
        assert_eq!(at, *index);
        let write = events::envelope::split_write(env).expect("write");
        let d = events::decode_envelope(write.envelope).expect("decode");
        assert_eq!(digest, d.payload_digest);
    }
    drop(disk);
    ids_hold(&reopen(&dir), &posted);
}

#[test]
fn log_without_lookups_is_indexed_on_open() {
    let (w, posted) = scored(5);
    let dir = w.dir.path().to_owned();
    drop(w.log);
    // A data directory restored from the data file alone.
    std::fs::remove_dir_all(dir.join(ledger::lookup::LOOKUP_DIR)).expect("remove");
    ids_hold(&reopen(&dir), &posted);
}

#[test]
fn lookups_that_stopped_partway_are_caught_up_from_there() {
    let (w, posted) = scored(6);
    let dir = w.dir.path().to_owned();
    let mid = posted[2].2;
    let root = w.log.ledger().root_at(mid).expect("root");
    drop(w.log);
    let disk = RawLookups::open(&dir);
    disk.rewind(mid, &root);
    assert!(disk.entry_key(&posted[4].1.id).is_none());
    drop(disk);
    let log = reopen(&dir);
    ids_hold(&log, &posted);
    drop(log);
    assert_eq!(
        RawLookups::open(&dir)
            .entry_key(&posted[4].1.id)
            .map(|(i, _)| i),
        Some(posted[4].2)
    );
}

#[test]
fn a_raw_opener_indexes_leaf_hashes_only_and_the_event_log_catches_the_ids_up() {
    // A CLI tool opens the directory as a raw log after the lookups were
    // lost: it indexes leaf hashes, cannot index envelope ids, and must not
    // make the event log believe they are indexed.
    let (w, posted) = scored(4);
    let dir = w.dir.path().to_owned();
    let size = w.log.ledger().head().size;
    drop(w.log);
    std::fs::remove_dir_all(dir.join(ledger::lookup::LOOKUP_DIR)).expect("remove");
    let raw = ledger::Ledger::open(&dir, ledger::Config::default()).expect("raw open");
    raw.lookups().expect("the raw opener rebuilds the lookups");
    drop(raw);
    let marks = RawLookups::open(&dir).watermarks();
    assert_eq!(marks.map(|m| m.map(|(s, _)| s)), [Some(size), None]);
    ids_hold(&reopen(&dir), &posted);
}

#[test]
fn attack_lookups_of_another_log_are_rebuilt_not_trusted() {
    // The data file is swapped for another log's (or restored from an older
    // copy) while the lookups stay: their rows would make this log's ids
    // look absent, and a reused id would be appended. Their watermark's
    // root is not this log's, so they are rebuilt from the entries.
    let (w, posted) = scored(4);
    let dir = w.dir.path().to_owned();
    let size = w.log.ledger().head().size;
    drop(w.log);
    let disk = RawLookups::open(&dir);
    // Another log of the same size: every id row gone, a foreign root.
    for (_, p, _) in &posted {
        disk.delete_entry_key(&p.id);
    }
    disk.set_watermark(size, &ledger::Hash([3; 32]));
    drop(disk);
    ids_hold(&reopen(&dir), &posted);
}

#[test]
fn attack_lookup_rows_without_a_watermark_are_rebuilt_not_trusted() {
    // Rows planted (or left by a deletion cut short) with no watermark: an
    // open would index from 0 and keep the first row it finds for each
    // key, so a planted row could hide an id. They are rebuilt instead.
    let (w, posted) = scored(3);
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let disk = RawLookups::open(&dir);
    let (_, digest) = disk.entry_key(&posted[0].1.id).expect("indexed");
    disk.put_entry_key(&posted[0].1.id, posted[1].2, digest);
    disk.delete_entry_key(&posted[2].1.id);
    disk.remove_watermarks();
    drop(disk);
    ids_hold(&reopen(&dir), &posted);
}

#[test]
fn lookups_the_store_cannot_read_are_rebuilt_and_the_log_opens() {
    // A stray folder in the lookup store (a copy an operator made beside a
    // table) makes the store panic on open. The lookups are derived: they
    // are rebuilt, and the log opens.
    let (w, posted) = scored(3);
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let stray = dir
        .join(ledger::lookup::LOOKUP_DIR)
        .join("keyspaces")
        .join("1.bak");
    std::fs::create_dir_all(&stray).expect("mkdir");
    ids_hold(&reopen(&dir), &posted);
    assert!(!stray.exists());
}

#[test]
fn attack_lookups_claiming_more_than_the_log_are_rebuilt_not_trusted() {
    // The data file is restored from an older copy: the lookups cover
    // entries the log no longer has, whose indexes the next writes reuse.
    let (w, posted) = scored(4);
    let dir = w.dir.path().to_owned();
    let size = w.log.ledger().head().size;
    drop(w.log);
    let disk = RawLookups::open(&dir);
    let (_, root) = disk.watermarks()[1].expect("watermark");
    disk.set_watermark(size + 10, &root);
    drop(disk);
    let log = reopen(&dir);
    ids_hold(&log, &posted);
    drop(log);
    assert_eq!(
        RawLookups::open(&dir)
            .watermarks()
            .map(|m| m.map(|(s, _)| s)),
        [Some(size), Some(size)]
    );
}

#[test]
fn attack_forged_id_index_row_is_refused_not_trusted() {
    // Someone with write access to the data file points a logged id at a
    // different entry, hoping the ledger acknowledges a re-post there.
    let (w, posted) = scored(3);
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let disk = RawLookups::open(&dir);
    let (_, digest) = disk.entry_key(&posted[0].1.id).expect("indexed");
    disk.put_entry_key(&posted[0].1.id, posted[1].2, digest);
    drop(disk);
    let log = reopen(&dir);
    let size = log.ledger().head().size;
    let r = log.append(&posted[0].0);
    expect_code(r, RejectCode::LedgerUnavailable);
    assert_eq!(log.ledger().head().size, size, "nothing may be appended");
    assert_eq!(log.find_id(&posted[0].1.id).expect("lookup"), None);
}

#[test]
fn same_envelope_twice_in_one_batch_is_appended_once() {
    let mut w = World::new();
    let env = w.envelope("harness", Event::ScoreRecorded(score("case-1", 0.8)));
    let size = w.size();
    // Queued back to back, both are usually sequenced in one batch, before
    // the first is in the key index: the batch's own ids must be consulted.
    let a = w.log.submit(&env).expect("submit");
    let b = w.log.submit(&env).expect("submit");
    let (a, b) = (a.wait().expect("first"), b.wait().expect("second"));
    assert_eq!(a.appended.index, b.appended.index);
    assert!(a.existing != b.existing);
    assert_eq!(w.size(), size + 1);
}

/// `verify`'s check of the lookup tables on a copy of `dir` damaged by
/// `damage`.
fn indexes_after(
    dir: &std::path::Path,
    damage: impl FnOnce(&RawLookups),
) -> Result<ledger::IndexesVerified, ledger::Error> {
    let copy = tempfile::tempdir().expect("tempdir");
    testkit::copy_data_dir(dir, copy.path());
    damage(&RawLookups::open(copy.path()));
    ledger::verify_dir_indexes::<events::EventSequencer>(copy.path(), &mut |_, _| {})
}

fn lookup_damage_at(r: Result<ledger::IndexesVerified, ledger::Error>) -> u64 {
    match r {
        Err(ledger::Error::Corrupt(c)) => {
            assert_eq!(c.kind, ledger::CorruptionKind::Index, "{c}");
            c.index
        }
        other => panic!("lookup-table damage was not found: {other:?}"),
    }
}

#[test]
fn attack_lookup_table_rows_removed_redirected_or_smuggled_are_found_by_verify() {
    let (w, posted) = scored(4);
    let dir = w.dir.path().to_owned();
    let size = w.log.ledger().head().size;
    let leaf_of = |i: u64| w.log.ledger().entry(i).expect("entry").leaf_hash;
    let (l1, l2) = (leaf_of(posted[1].2), leaf_of(posted[2].2));
    drop(w.log);
    let ok = indexes_after(&dir, |_| {}).expect("an untouched log's lookups check out");
    assert_eq!(ok.covered, size);
    assert_eq!(ok.leaf_rows, size);
    assert!(ok.key_rows >= posted.len() as u64);
    // An id's row removed: the entry would answer 404, or be appended again.
    let (id1, at1) = (posted[1].1.id.clone(), posted[1].2);
    assert_eq!(
        lookup_damage_at(indexes_after(&dir, |d| d.delete_entry_key(&id1))),
        at1
    );
    // An id's row pointed at another entry.
    assert_eq!(
        lookup_damage_at(indexes_after(&dir, |d| {
            let (_, digest) = d.entry_key(&id1).expect("row");
            d.put_entry_key(&id1, posted[2].2, digest);
        })),
        at1
    );
    // A row for an id nothing in the log carries.
    assert_eq!(
        lookup_damage_at(indexes_after(&dir, |d| d.put_entry_key("ghost", 0, [0; 32]))),
        size
    );
    // A leaf hash's row removed, or pointed at another entry.
    assert_eq!(
        lookup_damage_at(indexes_after(&dir, |d| d.set_leaf_index(&l1, None))),
        posted[1].2
    );
    assert_eq!(
        lookup_damage_at(indexes_after(&dir, |d| d.set_leaf_index(&l2, Some(posted[1].2)))),
        posted[2].2
    );
    // A row for a leaf the log does not hold.
    assert_eq!(
        lookup_damage_at(indexes_after(&dir, |d| d.set_leaf_index(&ledger::Hash([7; 32]), Some(0)))),
        size
    );
    // Another log's lookups: the watermark's root is not this log's.
    assert_eq!(
        lookup_damage_at(indexes_after(&dir, |d| d.set_watermark(size, &ledger::Hash([7; 32])))),
        size
    );
}
