//! The event-state snapshot: a start replays only the entries after it, and
//! a snapshot that does not check out is never trusted.

use std::sync::Arc;

use events::model::*;
use events::sequencer::{state_delta_aux, STATE_AUX};
use events::{EventLog, ManualClock};
use testkit::world::*;

fn reopen(dir: &std::path::Path, ledger_key: &str) -> EventLog {
    EventLog::open(
        dir,
        ledger::Config::default(),
        key(ledger_key),
        Arc::new(ManualClock::new(T0)),
    )
    .expect("reopen")
}

/// The sealed state snapshot the world saved.
fn saved_snapshot(w: &World) -> Vec<u8> {
    w.log
        .ledger()
        .get_aux(STATE_AUX)
        .expect("read")
        .expect("saved")
}

/// The sealed record saved under `name`, if any.
fn aux(w: &World, name: &str) -> Option<Vec<u8>> {
    w.log.ledger().get_aux(name).expect("read")
}

/// The size the saved whole snapshot was taken at.
fn snapshot_size(w: &World) -> u64 {
    ledger::sealed::split(&saved_snapshot(w))
        .expect("a sealed record")
        .size
}

/// A world saved whole at `a`, then as two deltas at `b` and `c`, with
/// events after the last save: the deltas carry a new case, a retired
/// case (a changed key), a new run and scores.
fn world_with_deltas() -> (World, [u64; 3]) {
    let (mut w, a) = world_with_snapshot();
    let b = w.log.save_state().expect("save").expect("taken");
    assert_eq!(b, w.size());
    w.post(
        "harness",
        Event::RunStarted(run("run-2", Isolation::Microvm)),
    )
    .expect("run");
    let r = w.retire("case-2");
    w.post("curator-a", Event::CaseRetired(r)).expect("retire");
    let b_case = w.case_added("case-10", "held-out");
    let added = w
        .post("curator-a", Event::CaseAdded(b_case))
        .expect("case")
        .appended
        .index;
    // A redaction: the set of redactions only grows, and a delta holds
    // what it gained.
    let r = w.redaction(
        added,
        "provenance.source_ref",
        ("maintainer-a", "maintainer-b"),
    );
    w.post("maintainer-a", Event::FieldRedacted(r))
        .expect("redacted");
    assert_eq!(w.log.state().redactions.len(), 1);
    let c = w.log.save_state().expect("save").expect("taken");
    assert_eq!(c, w.size());
    w.post("harness", Event::ScoreRecorded(score("case-10", 0.7)))
        .expect("score");
    assert_eq!(
        snapshot_size(&w),
        a,
        "a delta was saved as a whole snapshot"
    );
    (w, [a, b, c])
}

#[test]
fn deltas_after_a_snapshot_rebuild_the_same_state_as_a_full_replay() {
    let (w, [_, _, c]) = world_with_deltas();
    assert!(aux(&w, &state_delta_aux(0)).is_some_and(|d| !d.is_empty()));
    assert!(aux(&w, &state_delta_aux(1)).is_some_and(|d| !d.is_empty()));
    assert_eq!(aux(&w, &state_delta_aux(2)), None);
    let live = w.log.state();
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let log = reopen(&dir, "ledger");
    assert_eq!(log.restored_from(), Some(c), "resumed after the last delta");
    assert_eq!(log.snapshot_refused(), None);
    assert_eq!(log.state().redactions.len(), 1, "the redaction was lost");
    assert_eq!(log.check_snapshot(), Ok(Some(c)));
    assert_eq!(log.state(), live);
    assert_eq!(log.replay_state().expect("replay"), live);
    // The reopened state goes on saving deltas where the chain ended.
    assert!(log.save_state().expect("save").is_some());
    assert!(log
        .ledger()
        .get_aux(&state_delta_aux(2))
        .expect("read")
        .is_some_and(|d| !d.is_empty()));
    drop(log);
    let log = reopen(&dir, "ledger");
    assert_eq!(log.state(), live);
}

#[test]
fn delta_left_by_an_earlier_chain_ends_the_chain_unread() {
    let (w, [_, _, c]) = world_with_deltas();
    let live = w.log.state();
    // Sealed with the key at a size the log has, but continuing from
    // another size (an earlier chain's), in a layout this build does not
    // read: not this chain's, so neither used nor reported.
    let mut body = 3u64.to_be_bytes().to_vec();
    body.extend_from_slice(br#"{"an":"older layout"}"#);
    reseal_delta(
        &w,
        2,
        &events::sequencer::snapshot_seal_key(&key("ledger")),
        &body,
    );
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let log = reopen(&dir, "ledger");
    assert_eq!(log.snapshot_refused(), None);
    assert_eq!(log.restored_from(), Some(c));
    assert_eq!(log.state(), live);
}

#[test]
fn attack_altered_state_delta_is_refused_and_the_start_resumes_before_it() {
    let (w, [_, b, _]) = world_with_deltas();
    let live = w.log.state();
    let mut rec = aux(&w, &state_delta_aux(1)).expect("saved");
    let last = rec.len() - 1;
    rec[last] ^= 1;
    w.log
        .ledger()
        .put_aux(&state_delta_aux(1), &rec)
        .expect("write");
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let log = reopen(&dir, "ledger");
    let why = log
        .snapshot_refused()
        .expect("an altered delta is reported");
    assert!(why.contains("delta 1") && why.contains("seal"), "{why}");
    assert_eq!(log.restored_from(), Some(b), "the altered delta was used");
    assert_eq!(log.check_snapshot(), Ok(Some(b)));
    assert_eq!(log.state(), live);
}

/// Seals `body` as delta `n` of `w`'s chain under `seal_key`, at the size
/// and root delta 1 was sealed at.
fn reseal_delta(w: &World, n: usize, seal_key: &[u8; 32], body: &[u8]) {
    let rec = aux(w, &state_delta_aux(1)).expect("saved");
    let parts = ledger::sealed::split(&rec).expect("a sealed record");
    let sealed = ledger::sealed::seal(seal_key, &parts.magic, parts.size, &parts.root, body);
    w.log
        .ledger()
        .put_aux(&state_delta_aux(n), &sealed)
        .expect("write");
}

#[test]
fn attack_state_delta_that_does_not_decode_is_refused() {
    let (w, [_, b, _]) = world_with_deltas();
    let live = w.log.state();
    // Sealed with the key, continuing where delta 0 ends, but not changes.
    let mut body = b.to_be_bytes().to_vec();
    body.extend_from_slice(b"{\"size\":");
    reseal_delta(
        &w,
        1,
        &events::sequencer::snapshot_seal_key(&key("ledger")),
        &body,
    );
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let log = reopen(&dir, "ledger");
    let why = log.snapshot_refused().expect("reported");
    assert!(why.contains("delta 1 does not decode"), "{why}");
    assert_eq!(log.restored_from(), Some(b));
    assert_eq!(log.state(), live);
}

#[test]
fn attack_first_state_delta_under_another_key_is_refused() {
    let (w, [a, _, _]) = world_with_deltas();
    let live = w.log.state();
    // Every whole save empties delta 0 in its own transaction: a delta 0
    // under another key than the snapshot's was put there.
    let rec = aux(&w, &state_delta_aux(0)).expect("saved");
    let body = ledger::sealed::split(&rec).expect("sealed").body.to_vec();
    let other = events::sequencer::snapshot_seal_key(&key("another-ledger-key"));
    let parts = ledger::sealed::split(&rec).expect("sealed");
    let forged = ledger::sealed::seal(&other, &parts.magic, parts.size, &parts.root, &body);
    w.log
        .ledger()
        .put_aux(&state_delta_aux(0), &forged)
        .expect("write");
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let log = reopen(&dir, "ledger");
    let why = log.snapshot_refused().expect("reported");
    assert!(
        why.contains("delta 0") && why.contains("another key"),
        "{why}"
    );
    assert_eq!(log.restored_from(), Some(a));
    assert_eq!(log.state(), live);
}

#[test]
fn attack_state_delta_resealed_with_the_key_is_caught_by_a_replay() {
    let (w, [_, b, c]) = world_with_deltas();
    // Someone who holds the ledger's key forges the second delta: a
    // maintainer drops out of the record, and the delta is sealed again.
    let rec = aux(&w, &state_delta_aux(1)).expect("saved");
    let parts = ledger::sealed::split(&rec).expect("a sealed record");
    let mut forged = events::StateDelta::decode(parts.body).expect("decode");
    assert_eq!((forged.from, forged.size), (b, c));
    let maintainer = events::key_id(&key("maintainer-b").verifying_key());
    forged.principals.insert(maintainer.clone(), None);
    let resealed = ledger::sealed::seal(
        &events::sequencer::snapshot_seal_key(&key("ledger")),
        &parts.magic,
        c,
        &parts.root,
        &forged.encode(),
    );
    w.log
        .ledger()
        .put_aux(&state_delta_aux(1), &resealed)
        .expect("write");
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let log = reopen(&dir, "ledger");
    assert_eq!(
        log.restored_from(),
        Some(c),
        "the seal verifies: it has the key"
    );
    assert!(!log.state().principals.contains_key(&maintainer));
    // The replayed state is saved whole in its place and the chain of
    // deltas ended.
    caught_by_the_replay_and_repaired(log, &dir, c, &maintainer);
}

#[test]
fn state_is_saved_whole_again_once_its_deltas_reach_half_of_it() {
    let (mut w, a) = world_with_snapshot();
    let mut deltas = 0;
    for i in 0..200 {
        let c = w.case_added(&format!("case-many-{i}"), "held-out");
        w.post("curator-a", Event::CaseAdded(c)).expect("case");
        let at = w.log.save_state().expect("save").expect("taken");
        if snapshot_size(&w) == a {
            deltas += 1;
            assert!(aux(&w, &state_delta_aux(deltas - 1)).is_some_and(|d| !d.is_empty()));
            continue;
        }
        assert_eq!(snapshot_size(&w), at);
        assert!(deltas > 1, "saved whole after {deltas} deltas");
        assert_eq!(
            aux(&w, &state_delta_aux(0)),
            Some(Vec::new()),
            "a whole snapshot ends the chain"
        );
        let live = w.log.state();
        let dir = w.dir.path().to_owned();
        drop(w.log);
        let log = reopen(&dir, "ledger");
        assert_eq!(log.restored_from(), Some(at));
        assert_eq!(log.state(), live);
        return;
    }
    panic!("never saved whole again after {deltas} deltas");
}

/// A commit that fails rebuilds the state from the saved snapshot and
/// deltas (the deltas' end, at or before where the next delta starts): the
/// next delta still holds every change, and a start from the chain gets the
/// state a full replay gets.
#[test]
fn deltas_saved_around_a_failed_commit_rebuild_the_same_state() {
    use std::sync::atomic::{AtomicU8, Ordering};
    let armed = Arc::new(AtomicU8::new(testkit::faults::CALM));
    let mut w = World::new_with(ledger::Config {
        backend: Some(testkit::faults::panicky(&armed)),
        ..ledger::Config::default()
    });
    let a = w.log.save_state().expect("save").expect("taken");
    w.post("harness", Event::ScoreRecorded(score("case-1", 0.8)))
        .expect("score");
    let b = w.log.save_state().expect("save").expect("taken");
    let c = w.case_added("case-11", "held-out");
    w.post("curator-a", Event::CaseAdded(c)).expect("case");
    armed.store(testkit::faults::PANIC_WRITE, Ordering::SeqCst);
    let c = w.case_added("case-12", "held-out");
    assert!(w.post("curator-a", Event::CaseAdded(c)).is_err());
    armed.store(testkit::faults::CALM, Ordering::SeqCst);
    let mut posted = false;
    for _ in 0..100 {
        let c = w.case_added("case-12", "held-out");
        if w.post("curator-a", Event::CaseAdded(c)).is_ok() {
            posted = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(posted, "writes never resumed");
    // Not case-11: its addition before the failed commit must reach the
    // next delta through the rebuilt state's notes alone.
    let r = w.retire("case-3");
    w.post("curator-a", Event::CaseRetired(r)).expect("retire");
    let d = w.log.save_state().expect("save").expect("taken");
    assert!(a < b && b < d);
    assert_eq!(snapshot_size(&w), a, "saved whole after the failed commit");
    assert!(aux(&w, &state_delta_aux(1)).is_some_and(|d| !d.is_empty()));
    let live = w.log.state();
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let log = reopen(&dir, "ledger");
    assert_eq!(log.restored_from(), Some(d));
    assert_eq!(log.check_snapshot(), Ok(Some(d)));
    assert_eq!(log.state(), live);
    assert_eq!(log.replay_state().expect("replay"), live);
}

/// A world with a snapshot taken partway, and more events after it.
fn world_with_snapshot() -> (World, u64) {
    let mut w = World::new();
    for i in 0..5 {
        w.post(
            "harness",
            Event::ScoreRecorded(score(&format!("case-{}", i % 3 + 1), 0.8)),
        )
        .expect("score");
    }
    let at = w.log.save_state().expect("save").expect("taken");
    assert_eq!(at, w.size());
    let c = w.case_added("case-9", "held-out");
    w.post("curator-a", Event::CaseAdded(c)).expect("case");
    w.post("harness", Event::ScoreRecorded(score("case-9", 0.6)))
        .expect("score");
    (w, at)
}

#[test]
fn snapshot_and_tail_rebuild_the_same_state_as_a_full_replay() {
    let (w, at) = world_with_snapshot();
    let live = w.log.state();
    // An envelope logged before the snapshot was taken.
    let early = w.log.ledger().entry(at - 1).expect("entry");
    let (decoded, _) = events::decode_leaf(&early.leaf).expect("leaf");
    let early_body = w.with_disclosures(&events::canonical::encode(&decoded.envelope_value()));
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let log = reopen(&dir, "ledger");
    assert_eq!(log.restored_from(), Some(at));
    assert_eq!(
        log.check_snapshot(),
        Ok(Some(at)),
        "an honest snapshot agrees"
    );
    assert_eq!(log.state(), live);
    assert_eq!(log.replay_state().expect("replay"), live);
    // Idempotence survives the snapshot: re-posting an envelope logged
    // before it is acknowledged at its index, and nothing is appended.
    let size = log.ledger().head().size;
    let again = log.append(&early_body).expect("re-post");
    assert!(again.existing);
    assert_eq!(again.appended.index, at - 1);
    assert_eq!(log.ledger().head().size, size);
}

#[test]
fn altered_state_snapshot_is_ignored_and_the_whole_log_replays() {
    let (w, _) = world_with_snapshot();
    let live = w.log.state();
    let mut rec = saved_snapshot(&w);
    // Flip one byte of the state (past the header): for example a
    // retired case marked active would pass a check it must fail.
    let last = rec.len() - 1;
    rec[last] ^= 1;
    w.log.ledger().put_aux(STATE_AUX, &rec).expect("write");
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let log = reopen(&dir, "ledger");
    assert_eq!(log.restored_from(), None, "an altered snapshot was trusted");
    assert_eq!(log.state(), live);
}

#[test]
fn state_snapshot_sealed_under_another_key_is_ignored() {
    let (w, _) = world_with_snapshot();
    let live = w.log.state();
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let log = reopen(&dir, "another-ledger-key");
    assert_eq!(log.restored_from(), None);
    assert_eq!(log.state(), live);
}

#[test]
fn state_snapshot_round_trips_every_map() {
    let (w, _) = world_with_snapshot();
    let s = w.log.state();
    assert!(!s.principals.is_empty() && !s.cases.is_empty() && !s.runs.is_empty());
    let back = events::State::decode_snapshot(&s.encode_snapshot()).expect("decode");
    assert_eq!(back, s);
    let bytes = s.encode_snapshot();
    assert!(events::State::decode_snapshot(&bytes[..bytes.len() - 1]).is_none());
}

#[test]
fn attack_state_snapshot_resealed_with_the_key_is_caught_by_a_replay() {
    let (w, at) = world_with_snapshot();
    let mut rec = saved_snapshot(&w);
    // Someone who holds the ledger's key forges the snapshot: a maintainer
    // drops out of the record (nothing after the snapshot needs them, so
    // the tail replays), and the snapshot is sealed again.
    let parts = ledger::sealed::split(&rec).expect("a sealed record");
    let mut forged = events::State::decode_snapshot(parts.body).expect("decode");
    let curator = events::key_id(&key("maintainer-b").verifying_key());
    assert!(forged.principals.remove(&curator).is_some());
    let root = parts.root;
    rec = ledger::sealed::seal(
        &events::sequencer::snapshot_seal_key(&key("ledger")),
        &parts.magic,
        at,
        &root,
        &forged.encode_snapshot(),
    );
    w.log.ledger().put_aux(STATE_AUX, &rec).expect("write");
    let dir = w.dir.path().to_owned();
    drop(w.log);
    let log = reopen(&dir, "ledger");
    assert_eq!(
        log.restored_from(),
        Some(at),
        "the seal verifies: it has the key"
    );
    caught_by_the_replay_and_repaired(log, &dir, at, &curator);
}

/// `log` resumed from saved state forged with the key at `at`, which
/// dropped `principal`: the replay disagrees, the distrusted state is not
/// saved, and the replayed state saved in its place makes the next start
/// right.
fn caught_by_the_replay_and_repaired(
    log: EventLog,
    dir: &std::path::Path,
    at: u64,
    principal: &str,
) {
    let err = log.check_snapshot().expect_err("the replay must disagree");
    assert!(err.contains("disagrees"), "{err}");
    assert_eq!(
        log.save_state().expect("save"),
        None,
        "the distrusted state was saved"
    );
    drop(log);
    let log = reopen(dir, "ledger");
    assert_eq!(log.restored_from(), Some(at));
    assert_eq!(log.check_snapshot(), Ok(Some(at)));
    assert!(log.state().principals.contains_key(principal));
}

/// Someone with write access to the data file but no key appends an entry
/// (here, a real score's payload under a signature of another payload),
/// recomputing every hash through the log layer: the log verifies and
/// extends every earlier checkpoint, and its rules replay. Catching up the
/// state does not check signatures; the tail's signature check does, and
/// names the entry.
#[test]
fn attack_entry_appended_to_the_data_file_without_a_valid_signature_is_caught() {
    let mut w = World::new();
    let real = w.bare_envelope("harness", Event::ScoreRecorded(score("case-1", 0.99)));
    let other = w.bare_envelope("harness", Event::ScoreRecorded(score("case-2", 0.10)));
    let sig = |env: &[u8]| {
        let v: serde_json::Value = serde_json::from_slice(env).expect("json");
        v["signatures"][0]["sig"].as_str().expect("sig").to_owned()
    };
    let d = events::envelope::decode_envelope(&real).expect("decode");
    let leaf = String::from_utf8(d.leaf_bytes(T0 + 1)).expect("utf8");
    let forged = leaf.replace(&sig(&real), &sig(&other));
    assert_ne!(forged, leaf);
    let World { dir, log, .. } = w;
    let at = log.ledger().head().size;
    drop(log);
    let raw = ledger::Ledger::open(dir.path(), ledger::Config::default()).expect("raw");
    raw.append(forged.into_bytes())
        .expect("appended behind the door");
    drop(raw);

    let log = reopen(dir.path(), "ledger");
    assert!(!log.catching_up(), "the rules replay");
    let err = log.check_tail_signatures().expect_err("caught");
    assert!(err.starts_with(&format!("entry {at}:")), "{err}");
    assert!(err.contains("signature"), "{err}");
}
