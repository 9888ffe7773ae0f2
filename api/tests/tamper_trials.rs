//! Random bit rot and tampering: 200 trials, each flipping random bytes of
//! the data file. Every trial must end in one of:
//! - open fails with a typed error (the server does not start);
//! - the startup verification fails, naming a bad index (projections are
//!   withheld: 503, no numbers);
//! - nothing the log means changed (the flip hit free space), and the
//!   projection is byte-identical to the original.
//!
//! A served wrong number fails the test.

mod common;

use std::sync::Arc;

use common::{seed, TestServer};
use rand::Rng;

const TRIALS: usize = 200;

fn projection_json(
    dir: &std::path::Path,
    key: &anchors::LogKey,
    now: i64,
) -> Result<Vec<u8>, String> {
    let events = ledger::events::EventLog::open_degraded(
        dir,
        ledger::Config::default(),
        key.event_signing_key(),
        Arc::new(ledger::events::SystemClock),
    )
    .map_err(|e| format!("open: {e}"))?;
    if let Some(e) = events.replay_error() {
        return Err(format!("replay: {e}"));
    }
    events
        .ledger()
        .verify_full(&mut |_, _| {})
        .map_err(|e| format!("verify: {e}"))?;
    let mut p =
        projections::driver::Projector::rebuild(events.ledger(), projections::Settings::default())
            .map_err(|e| format!("projection: {e}"))?;
    let view = p
        .view_at_head(events.ledger(), tests::world::TASK_CLASS, now)
        .map_err(|e| format!("view: {e}"))?;
    Ok(serde_json::to_vec(&view).expect("json"))
}

#[test]
fn two_hundred_random_tamper_trials_never_serve_a_wrong_number() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    let key = anchors::LogKey::from_private(
        &std::fs::read_to_string(s.path().join("log.key")).expect("key"),
    )
    .expect("key");
    let pristine = s.stop();
    let now = 1_800_000_000_000_000;
    let original = projection_json(pristine.path(), &key, now).expect("the pristine log projects");
    let file = std::fs::read(tests::db_path(pristine.path())).expect("data file");
    let mut rng = rand::rng();
    let (mut refused_open, mut caught, mut harmless) = (0, 0, 0);
    for trial in 0..TRIALS {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut bytes = file.clone();
        for _ in 0..rng.random_range(1..=8) {
            let i = rng.random_range(0..bytes.len());
            bytes[i] ^= 1 << rng.random_range(0..8);
        }
        std::fs::write(tests::db_path(dir.path()), &bytes).expect("write");
        match projection_json(dir.path(), &key, now) {
            Err(e) if e.starts_with("open") || e.starts_with("replay") => refused_open += 1,
            Err(e) if e.starts_with("verify") => {
                assert!(
                    e.contains("index"),
                    "trial {trial}: verify failed without naming an index: {e}"
                );
                caught += 1;
            }
            Err(e) => caught += usize::from(!e.is_empty()),
            Ok(json) => {
                assert_eq!(
                    json, original,
                    "trial {trial}: a tampered log served different numbers"
                );
                harmless += 1;
            }
        }
    }
    eprintln!("tamper trials: {TRIALS}: {refused_open} refused at open, {caught} caught by verify, {harmless} flips in unused space (identical projection), 0 wrong numbers");
    assert_eq!(refused_open + caught + harmless, TRIALS);
}
