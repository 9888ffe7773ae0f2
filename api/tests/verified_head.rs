//! What a start walks before it is ready, and what is walked after: the
//! verified head (a checkpoint signed with the log key, kept in the data
//! file) lets a start walk only the entries that came after it, bound to
//! the signed root so that an edited or forged marker skips nothing; the
//! whole log is walked again in the background, and damage found there
//! withholds numbers, proofs and writes.

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

/// Replaces the verified head with `note`.
fn put_marker(dir: &Path, note: &[u8]) {
    testkit::RawDisk::open(dir).put_aux(VERIFIED_HEAD_AUX, note);
}

/// An attacker edits entry 5's bytes (its stored leaf hash untouched).
fn damage_entry_5(dir: &Path) {
    testkit::RawDisk::open(dir).set_leaf(5, b"{\"forged\":true}");
}

#[test]
fn a_clean_restart_walks_nothing_before_it_is_ready() {
    let (dir, size) = stopped_log();
    let marker = testkit::RawDisk::open(dir.path())
        .aux(VERIFIED_HEAD_AUX)
        .expect("the stop recorded a verified head");
    let cp = anchors::open_checkpoint(&marker, log_key(dir.path()).verifier_key())
        .expect("signed with the log key");
    assert_eq!(cp.size, size);
    let state = open_state(dir.path());
    let walk = verifying::verify_at_start(&state).expect("verified");
    assert_eq!((walk.from, walk.size, walk.walked), (Some(size), size, 0));
}

#[test]
fn a_start_walks_every_entry_after_its_verified_head() {
    let (dir, size) = stopped_log();
    let key = log_key(dir.path());
    let note = key
        .sign_checkpoint(3, &root_at(dir.path(), 3))
        .expect("note");
    put_marker(dir.path(), note.as_bytes());
    damage_entry_5(dir.path());
    let state = open_state(dir.path());
    let err = verifying::verify_at_start(&state).expect_err("entry 5 is after the head");
    assert!(err.contains("index 5"), "{err}");
    assert!(err.contains("since its verified head at 3"), "{err}");
    drop(state);
    // Undamaged, the same start walks exactly the entries after 3.
    let (dir, _) = stopped_log();
    let size2 = {
        let key = log_key(dir.path());
        let note = key
            .sign_checkpoint(3, &root_at(dir.path(), 3))
            .expect("note");
        put_marker(dir.path(), note.as_bytes());
        let state = open_state(dir.path());
        let walk = verifying::verify_at_start(&state).expect("verified");
        assert_eq!(walk.from, Some(3));
        assert_eq!(walk.walked, walk.size - 3);
        walk.size
    };
    assert_eq!(size2, size);
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
}

#[test]
fn a_verified_head_with_a_flipped_byte_is_refused_and_the_whole_log_walked() {
    let (dir, _) = stopped_log();
    let marker = testkit::RawDisk::open(dir.path())
        .aux(VERIFIED_HEAD_AUX)
        .expect("marker");
    // "origin\nSIZE\nroot\n\n— signature": the size made 1.
    let text = String::from_utf8(marker).expect("utf-8");
    let mut lines: Vec<&str> = text.split('\n').collect();
    lines[1] = "1";
    let marker = lines.join("\n");
    put_marker(dir.path(), marker.as_bytes());
    damage_entry_5(dir.path());
    let state = open_state(dir.path());
    let err = verifying::verify_at_start(&state).expect_err("the whole log is walked");
    assert!(err.contains("index 5"), "{err}");
    let text = state.metrics.render(&state.metrics_snapshot());
    assert!(
        text.contains("ledger_derived_state_mismatches_total 1"),
        "the refused marker is counted:\n{text}"
    );
}

#[test]
fn a_verified_head_signed_by_another_key_is_refused() {
    let (dir, size) = stopped_log();
    let other = anchors::LogKey::generate(log_key(dir.path()).origin()).expect("key");
    let note = other
        .sign_checkpoint(size, &root_at(dir.path(), size))
        .expect("note");
    put_marker(dir.path(), note.as_bytes());
    let state = open_state(dir.path());
    let walk = verifying::verify_at_start(&state).expect("verified");
    assert_eq!(walk.from, None, "walked from a head this log never signed");
    assert_eq!(walk.walked, size);
}

#[test]
fn a_verified_head_beyond_the_log_fails_the_start() {
    let (dir, size) = stopped_log();
    let note = log_key(dir.path())
        .sign_checkpoint(size + 5, &Hash([7; 32]))
        .expect("note");
    put_marker(dir.path(), note.as_bytes());
    let state = open_state(dir.path());
    let err = verifying::verify_at_start(&state).expect_err("the log lost entries");
    assert!(err.contains("fewer than the trusted size"), "{err}");
}

#[test]
fn a_verified_head_whose_root_the_log_does_not_have_fails_the_start() {
    let (dir, _) = stopped_log();
    let note = log_key(dir.path())
        .sign_checkpoint(3, &Hash([7; 32]))
        .expect("note");
    put_marker(dir.path(), note.as_bytes());
    let state = open_state(dir.path());
    let err = verifying::verify_at_start(&state).expect_err("another tree");
    assert!(err.contains("does not hash to the trusted root"), "{err}");
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
