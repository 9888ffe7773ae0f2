//! What a start walks before it is ready, and what is walked after: the
//! verified head (a record sealed with a key derived from the ledger's key,
//! kept in the data directory) lets a start walk only the entries that came
//! after it, bound to the stored tree's root so that an edited, replayed or
//! forged record skips nothing; the whole log is walked again in the
//! background, and damage found there withholds numbers, proofs and writes
//! and makes the next start walk everything.

mod common;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use api::config::ServeConfig;
use api::server::verifying::{self, VERIFIED_HEAD_AUX};
use api::server::{AppState, VERIFY_FAILED};
use common::{metric, seed, within_30s, TestServer};
use ledger::Hash;

/// A seeded log, served once and stopped cleanly (the stop records the
/// head as verified); returns the directory and its size.
fn stopped_log() -> (tempfile::TempDir, u64) {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    s.wait_verified();
    let dir = s.stop();
    let size = testkit::RawDisk::open(dir.path()).head().size;
    (dir, size)
}

fn log_key(dir: &Path) -> anchors::LogKey {
    anchors::LogKey::from_private(&std::fs::read_to_string(dir.join("log.key")).expect("key"))
        .expect("log key")
}

/// The server's state over `dir`, opened as a start opens it, with nothing
/// started.
fn open_state(dir: &Path) -> AppState {
    let config = ServeConfig {
        data_dir: dir.to_path_buf(),
        ..ServeConfig::default()
    };
    AppState::open(config, log_key(dir), Arc::new(events::SystemClock)).expect("state")
}

/// The log's root at `size`.
fn root_at(dir: &Path, size: u64) -> Hash {
    let log = ledger::Ledger::open(dir, ledger::Config::default()).expect("open");
    log.root_at(size).expect("root")
}

/// Replaces the verified head with `rec`.
fn put_marker(dir: &Path, rec: &[u8]) {
    std::fs::write(dir.join(VERIFIED_HEAD_AUX), rec).expect("write the verified head");
}

/// A verified head for `(size, root)` sealed as the server seals it (with
/// `key`'s ledger event key).
fn sealed_head(key: &anchors::LogKey, size: u64, root: &Hash) -> Vec<u8> {
    verifying::seal_head(&verifying::seal_key(&key.event_signing_key()), size, root)
}

/// An attacker edits entry 5's bytes (its stored leaf hash untouched).
fn damage_entry_5(dir: &Path) {
    testkit::RawDisk::open(dir).set_leaf(5, b"{\"forged\":true}");
}

#[test]
fn a_clean_restart_walks_nothing_before_it_is_ready() {
    let (dir, size) = stopped_log();
    let state = open_state(dir.path());
    let walk = verifying::verify_at_start(&state).expect("verified");
    assert_eq!((walk.from, walk.size, walk.walked), (Some(size), size, 0));
}

#[test]
fn a_start_walks_every_entry_after_its_verified_head() {
    let (dir, size) = stopped_log();
    let key = log_key(dir.path());
    put_marker(dir.path(), &sealed_head(&key, 3, &root_at(dir.path(), 3)));
    let state = open_state(dir.path());
    let walk = verifying::verify_at_start(&state).expect("verified");
    assert_eq!((walk.from, walk.size), (Some(3), size));
    assert_eq!(walk.walked, size - 3);
    drop(state);
    damage_entry_5(dir.path());
    let state = open_state(dir.path());
    let err = verifying::verify_at_start(&state).expect_err("entry 5 is after the head");
    assert!(err.contains("index 5"), "{err}");
    assert!(err.contains("since its verified head at 3"), "{err}");
}

/// Every checkpoint the server publishes is signed with the log key (its
/// anchors, `/checkpoint`, the tiles directory's, the ones inside
/// `anchor.published` entries). None of them may stand in for the verified
/// head: a start would skip entries it never walked.
#[test]
fn attack_a_published_checkpoint_passed_off_as_the_verified_head_skips_nothing() {
    let (dir, size) = stopped_log();
    let key = log_key(dir.path());
    let note = key
        .sign_checkpoint(size, &root_at(dir.path(), size))
        .expect("a checkpoint the server could have published");
    put_marker(dir.path(), note.as_bytes());
    damage_entry_5(dir.path());
    let state = open_state(dir.path());
    let err = verifying::verify_at_start(&state).expect_err("the whole log is walked");
    assert!(err.contains("index 5"), "{err}");
}

#[test]
fn damage_below_the_verified_head_is_found_by_the_background_walk() {
    let (dir, size) = stopped_log();
    damage_entry_5(dir.path());
    let state = open_state(dir.path());
    // Before ready: only what came after the verified head (nothing).
    let walk = verifying::verify_at_start(&state).expect("the tail is sound");
    assert_eq!(walk.from, Some(size));
    state
        .verify_status
        .store(api::server::VERIFY_OK, Ordering::SeqCst);
    // After: the whole log, which withholds everything for good.
    let err = verifying::reverify(&state).expect_err("entry 5 is damaged");
    assert!(err.contains("index 5"), "{err}");
    assert_eq!(state.verify_status.load(Ordering::SeqCst), VERIFY_FAILED);
    let text = state.metrics.render(&state.metrics_snapshot());
    assert!(
        text.contains("ledger_verify_failures_total 1"),
        "the failure is counted:\n{text}"
    );
    // Nothing is saved over a log that failed (no state commitment is
    // appended, nothing re-sealed), even once derived state is checked.
    state
        .derived_checked
        .store(api::server::VERIFY_OK, Ordering::SeqCst);
    let head = state.events.ledger().head().size;
    assert!(
        !state.save_derived(),
        "derived state saved over a failed log"
    );
    assert_eq!(state.events.ledger().head().size, head);
    drop(state);
    // The data file says so: the derived state is due a replay too.
    assert_eq!(
        std::fs::read(dir.path().join(verifying::DERIVED_CHECKED_AUX))
            .ok()
            .as_deref(),
        Some(&b"failed"[..])
    );
    // The next start does not resume from the head walked before the
    // damage was found: it walks the whole log, and fails before ready.
    let state = open_state(dir.path());
    let err = verifying::verify_at_start(&state).expect_err("the whole log is walked");
    assert!(err.contains("index 5"), "{err}");
}

/// A head is recorded as verified only once the log has also passed its
/// anchor check: a log rebuilt so that it walks cleanly, but which no
/// longer extends an anchor, gets no verified head sealed over it.
#[test]
fn a_start_whose_anchor_check_fails_records_no_verified_head() {
    let (dir, size) = stopped_log();
    let key = log_key(dir.path());
    let at_3 = sealed_head(&key, 3, &root_at(dir.path(), 3));
    put_marker(dir.path(), &at_3);
    // An anchor of a longer log than this one: the log was truncated.
    let anchors = dir.path().join("anchors");
    std::fs::create_dir_all(&anchors).expect("anchors dir");
    let note = key
        .sign_checkpoint(size + 10, &Hash([9; 32]))
        .expect("note");
    std::fs::write(
        anchors.join(format!("2026-11-25T000000Z-{:012}.checkpoint", size + 10)),
        note,
    )
    .expect("anchor");
    let state = open_state(dir.path());
    assert!(!api::server::ready_check(&state), "the anchor check passed");
    let detail = state.verify_detail.lock().expect("detail").clone();
    assert!(detail.starts_with("anchors:"), "{detail}");
    drop(state);
    assert_eq!(
        std::fs::read(dir.path().join(VERIFIED_HEAD_AUX)).ok(),
        Some(at_3),
        "a head was recorded as verified over a log that failed its anchor check"
    );
}

#[test]
fn a_verified_head_with_a_flipped_byte_is_refused_and_the_whole_log_walked() {
    let (dir, _) = stopped_log();
    let mut rec = std::fs::read(dir.path().join(VERIFIED_HEAD_AUX))
        .expect("the stop recorded a verified head");
    rec[16 + 7] ^= 1; // the size's last byte
    put_marker(dir.path(), &rec);
    damage_entry_5(dir.path());
    let state = open_state(dir.path());
    let err = verifying::verify_at_start(&state).expect_err("the whole log is walked");
    assert!(err.contains("index 5"), "{err}");
    let text = state.metrics.render(&state.metrics_snapshot());
    assert!(
        text.contains("ledger_derived_state_mismatches_total 1"),
        "the refused record is counted:\n{text}"
    );
}

#[test]
fn a_verified_head_sealed_under_another_key_is_not_used() {
    let (dir, size) = stopped_log();
    let other = anchors::LogKey::generate(log_key(dir.path()).origin()).expect("key");
    put_marker(
        dir.path(),
        &sealed_head(&other, size, &root_at(dir.path(), size)),
    );
    let state = open_state(dir.path());
    let walk = verifying::verify_at_start(&state).expect("verified");
    assert_eq!(
        walk.from, None,
        "walked from a head this ledger never sealed"
    );
    assert_eq!(walk.walked, size);
}

#[test]
fn a_verified_head_beyond_the_log_fails_the_start() {
    let (dir, size) = stopped_log();
    let key = log_key(dir.path());
    put_marker(dir.path(), &sealed_head(&key, size + 5, &Hash([7; 32])));
    let state = open_state(dir.path());
    let err = verifying::verify_at_start(&state).expect_err("the log lost entries");
    assert!(err.contains("entries were lost"), "{err}");
}

#[test]
fn a_verified_head_whose_root_the_log_does_not_have_fails_the_start() {
    let (dir, _) = stopped_log();
    let key = log_key(dir.path());
    put_marker(dir.path(), &sealed_head(&key, 3, &Hash([7; 32])));
    let state = open_state(dir.path());
    let err = verifying::verify_at_start(&state).expect_err("another tree");
    assert!(err.contains("the tree changed"), "{err}");
}

#[test]
fn the_verified_head_follows_the_log_while_it_is_served() {
    let s = TestServer::start(|c| c.verify_tail_secs = 1);
    let c = s.client();
    s.wait_verified();
    seed(&s, &c);
    let size = s.state.events.ledger().head().size;
    assert!(
        within_30s(|| metric(&c, "ledger_verified_size") >= size as f64),
        "the verified head never reached {size}"
    );
    assert!(metric(&c, "ledger_last_full_verify_timestamp_seconds") > 0.0);
}
