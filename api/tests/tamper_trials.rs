//! Random bit rot and tampering: 200 trials, each flipping random bits in
//! pages of the data file that hold data (not free space), with a fixed
//! seed so a failure can be replayed. Each trial opens the file the way
//! `ledger serve` does (`AppState::open` and its startup check: the walk
//! from the verified head, the anchors and the projection loaded from its
//! sealed checkpoint; then the background check: the whole log walked
//! again, the lookup tables, and the projection checked against a rebuild
//! from the log), and
//! must end in one of:
//! - open fails with a typed error (the server does not start);
//! - the startup check fails (numbers are withheld: 503, no numbers);
//! - the projection served is byte-identical to the original.
//!
//! A served wrong number fails the test.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{seed, TestServer};
use rand::{Rng, SeedableRng};

const TRIALS: usize = 200;
/// The trials' seed: the same flips on every run.
const SEED: u64 = 0x5eed_0f7a_3be2;
/// redb's page size.
const PAGE: usize = 4096;

/// The view `serve` answers once ready, and the one after its background
/// check of derived state (or why that check failed). `Err` when the file
/// does not open or the ready check fails.
type Served = (Vec<u8>, Result<Vec<u8>, String>);

fn view_json(state: &api::server::AppState, now: i64) -> Result<Vec<u8>, String> {
    let view = state
        .projector
        .lock()
        .map_err(|_| "poisoned".to_owned())?
        .view_at_head(state.events.ledger(), testkit::world::TASK_CLASS, now)
        .map_err(|e| format!("view: {e}"))?;
    Ok(serde_json::to_vec(&view).expect("json"))
}

fn projection_json(
    dir: &std::path::Path,
    key: &anchors::LogKey,
    now: i64,
) -> Result<Served, String> {
    let config = api::config::ServeConfig {
        data_dir: dir.to_path_buf(),
        ..api::config::ServeConfig::default()
    };
    let state = api::server::AppState::open(
        config,
        anchors::LogKey::from_private(&key.private_key()).map_err(|e| format!("key: {e}"))?,
        Arc::new(events::ManualClock::new(now)),
    )
    .map_err(|e| format!("open: {e}"))?;
    let detail = |state: &api::server::AppState| {
        state
            .verify_detail
            .lock()
            .map(|d| d.clone())
            .unwrap_or_default()
    };
    if !api::server::ready_check(&state) {
        return Err(format!("verify: {}", detail(&state)));
    }
    let ready = view_json(&state, now)?;
    api::server::deep_check(&state);
    let checked = if state.derived_checked.load(Ordering::SeqCst) == api::server::VERIFY_OK {
        view_json(&state, now)
    } else {
        Err(format!("deep: {}", detail(&state)))
    };
    Ok((ready, checked))
}

/// The pages of `file` that hold anything but zeros.
fn used_pages(file: &[u8]) -> Vec<usize> {
    file.chunks(PAGE)
        .enumerate()
        .filter(|(_, p)| p.iter().any(|&b| b != 0))
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn two_hundred_random_tamper_trials_never_serve_a_wrong_number() {
    let s = TestServer::start_file(|_| {});
    let c = s.client();
    seed(&s, &c);
    let key = anchors::LogKey::from_private(
        &std::fs::read_to_string(s.path().join("log.key")).expect("key"),
    )
    .expect("key");
    let pristine = s.stop();
    let now = 1_800_000_000_000_000;
    let (original, checked) =
        projection_json(pristine.path(), &key, now).expect("the pristine log projects");
    assert_eq!(
        checked.as_ref(),
        Ok(&original),
        "the pristine log checks out"
    );
    let file = std::fs::read(testkit::db_path(pristine.path())).expect("data file");
    let mut rng = rand::rngs::StdRng::seed_from_u64(SEED);
    let pages = used_pages(&file);
    assert!(pages.len() > 4, "the data file holds data");
    let (mut refused_open, mut caught, mut harmless) = (0, 0, 0);
    for trial in 0..TRIALS {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut bytes = file.clone();
        for _ in 0..rng.random_range(1..=8) {
            let page = pages[rng.random_range(0..pages.len())];
            let i = (page * PAGE + rng.random_range(0..PAGE)).min(bytes.len() - 1);
            bytes[i] ^= 1 << rng.random_range(0..8);
        }
        std::fs::write(testkit::db_path(dir.path()), &bytes).expect("write");
        match projection_json(dir.path(), &key, now) {
            Err(e) if e.starts_with("open") || e.starts_with("replay") => refused_open += 1,
            Err(e) if e.starts_with("verify") => {
                assert!(
                    e.len() > "verify: ".len(),
                    "trial {trial}: the startup check failed without saying why"
                );
                caught += 1;
            }
            Err(e) => caught += usize::from(!e.is_empty()),
            Ok((ready, checked)) => {
                assert_eq!(
                    ready, original,
                    "trial {trial}: a tampered log served different numbers once ready"
                );
                match checked {
                    Ok(json) => {
                        assert_eq!(
                            json, original,
                            "trial {trial}: a tampered log served different numbers after its check"
                        );
                        harmless += 1;
                    }
                    Err(e) => {
                        assert!(e.len() > "deep: ".len(), "trial {trial}: no reason given");
                        caught += 1;
                    }
                }
            }
        }
    }
    eprintln!("tamper trials (seed {SEED:#x}, used pages only): {TRIALS}: {refused_open} refused at open, {caught} caught by the startup check, {harmless} with an identical projection, 0 wrong numbers");
    assert_eq!(refused_open + caught + harmless, TRIALS);
}
