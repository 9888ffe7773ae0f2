//! The server stands behind every number it serves and signs. Derived
//! state in the data file (the projection checkpoint) is a starting point,
//! never a source: edited without the key it is refused by its seal,
//! re-sealed with the key it is refused by the state commitment the ledger
//! recorded in the log where it was saved, and either way the numbers
//! served and signed are the log's. Storage that panics, a log key nobody
//! enrolled, and a log whose startup check failed are refused with typed
//! answers.

mod common;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use common::{metric, seed, within_30s, TestServer};
use events::model::{Event, PromotionRequested};
use testkit::world::TASK_CLASS;
use verifier::client::Client;

/// The held-out mean the server serves for the task class.
fn served_mean(c: &Client) -> f64 {
    let r = c
        .get(&format!("/v1/task-classes/{TASK_CLASS}"))
        .expect("projection");
    assert_eq!(r.status, 200, "{}", r.text());
    let v: serde_json::Value = r.json().expect("json");
    v["view"]["held_out"]["mean"].as_f64().expect("a mean")
}

/// Replaces the first stored 0.95 score in the saved projection checkpoint
/// with 0.10, as someone with the data file would; with `key`, re-seals the
/// record as someone who also holds the log key would.
fn forge_checkpoint(dir: &std::path::Path, key: Option<&anchors::LogKey>) {
    let log = ledger::Ledger::open(dir, ledger::Config::default()).expect("open");
    let mut rec = log
        .get_aux(projections::driver::AUX_KEY)
        .expect("read")
        .expect("the server saved its projection checkpoint on shutdown");
    let header = ledger::sealed::HEADER;
    let needle = 0.95f64.to_le_bytes();
    let at = rec[header..]
        .windows(8)
        .position(|w| w == needle)
        .expect("a stored score")
        + header;
    rec[at..at + 8].copy_from_slice(&0.10f64.to_le_bytes());
    if let Some(key) = key {
        let parts = ledger::sealed::split(&rec).expect("a sealed record");
        rec = ledger::sealed::seal(
            &projections::driver::seal_key(&key.event_signing_key()),
            &parts.magic,
            parts.size,
            &parts.root,
            parts.body,
        );
    }
    log.put_aux(projections::driver::AUX_KEY, &rec)
        .expect("write");
}

fn log_key(s: &TestServer) -> anchors::LogKey {
    anchors::LogKey::from_private(&std::fs::read_to_string(s.path().join("log.key")).expect("key"))
        .expect("key")
}

/// Asks for a recommendation and returns the recommended tier and the
/// mean it was computed from.
fn recommend(s: &TestServer, c: &Client) -> (String, f64) {
    let env = s.poster(c).envelope(
        "promotion-gate",
        Event::PromotionRequested(PromotionRequested {
            task_class: TASK_CLASS.into(),
        }),
    );
    let r = c
        .post_json("/v1/recommendations", &env)
        .expect("recommendation");
    assert!(r.status == 201 || r.status == 200, "{}", r.text());
    let v: serde_json::Value = r.json().expect("json");
    let view = &v["projection"]["view"];
    (
        view["recommendation"]["recommended_tier"]
            .as_str()
            .expect("tier")
            .to_owned(),
        view["held_out"]["mean"].as_f64().expect("mean"),
    )
}

#[test]
fn attack_projection_checkpoint_edited_on_disk_is_refused_and_rebuilt() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    s.wait_verified();
    let honest = served_mean(&c);
    let s = s.restart(|dir| forge_checkpoint(dir, None));
    s.wait_verified();
    let c = s.client();
    assert_eq!(served_mean(&c), honest, "an edited checkpoint was served");
    assert_eq!(metric(&c, "ledger_derived_state_mismatches_total"), 1.0);
    let (_, signed_mean) = recommend(&s, &c);
    assert_eq!(signed_mean, honest, "an edited checkpoint was signed");
}

#[test]
fn attack_projection_checkpoint_resealed_with_the_key_is_refused_by_its_state_commitment() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    s.wait_verified();
    let honest = served_mean(&c);
    let (honest_tier, _) = recommend(&s, &c);
    let key = log_key(&s);
    let s = s.restart(|dir| forge_checkpoint(dir, Some(&key)));
    s.wait_verified();
    let c = s.client();
    assert_eq!(served_mean(&c), honest, "a re-sealed forgery was served");
    assert_eq!(metric(&c, "ledger_derived_state_mismatches_total"), 1.0);
    let (tier, signed_mean) = recommend(&s, &c);
    assert_eq!((tier, signed_mean), (honest_tier, honest));
}

#[test]
fn an_untouched_checkpoint_resumes_without_a_mismatch() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    s.wait_verified();
    let honest = served_mean(&c);
    let s = s.restart(|_| {});
    s.wait_verified();
    let c = s.client();
    assert_eq!(served_mean(&c), honest);
    assert_eq!(metric(&c, "ledger_derived_state_mismatches_total"), 0.0);
}

#[test]
fn attack_log_key_that_genesis_did_not_enrol_is_refused_at_start() {
    let s = TestServer::start(|_| {});
    let dir = s.stop();
    let stranger = anchors::LogKey::generate("test.example/log").expect("key");
    match api::server::AppState::open(
        api::config::ServeConfig {
            data_dir: dir.path().to_path_buf(),
            ..api::config::ServeConfig::default()
        },
        stranger,
        Arc::new(events::SystemClock),
    ) {
        Err(e) => assert!(e.to_string().contains("not enrolled"), "{e}"),
        Ok(_) => panic!("a log key nobody enrolled was accepted"),
    }
}

#[test]
fn a_world_readable_log_key_is_warned_about() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    api::init::init(dir.path(), "test.example/log", "operator@test", None, None).expect("init");
    let key = dir.path().join("log.key");
    assert!(
        !api::server::warn_if_exposed(&key),
        "`ledger init` writes the key for its owner only"
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    assert!(api::server::warn_if_exposed(&key));
}

#[test]
fn attack_storage_engine_panic_is_a_typed_answer_and_writes_resume() {
    let armed = Arc::new(AtomicU8::new(testkit::faults::CALM));
    let backend = testkit::faults::panicky(&armed);
    let s = TestServer::start_with_storage(backend);
    let c = s.client();
    seed(&s, &c);
    s.wait_verified();
    let size = s.state.events.ledger().head().size;
    let env = s.poster(&c).envelope(
        "harness",
        Event::RunStarted(testkit::world::run(
            "run-2",
            events::model::Isolation::Microvm,
        )),
    );
    armed.store(testkit::faults::PANIC_WRITE, Ordering::SeqCst);
    let r = c
        .post_json("/v1/events", &env)
        .expect("an answer, not a closed connection");
    assert_eq!(r.status, 503, "a write during the fault: {}", r.text());
    assert_eq!(r.code().as_deref(), Some("log_corrupt"), "{}", r.text());
    // Reads go on meanwhile.
    for i in 0..size {
        assert_eq!(
            c.get(&format!("/v1/entries/{i}")).expect("entry").status,
            200
        );
    }
    armed.store(testkit::faults::CALM, Ordering::SeqCst);
    // The committer lives on: writes resume, and the server stays ready.
    assert!(
        within_30s(|| {
            c.post_json("/v1/events", &env)
                .map(|r| r.status == 201 || r.status == 200)
                .unwrap_or(false)
        }),
        "writes never resumed after the storage engine panicked"
    );
    assert!(s.state.events.ledger().committer_running());
    assert_eq!(c.get("/readyz").expect("ready").status, 200);
    for i in 0..size {
        assert_eq!(
            c.get(&format!("/v1/entries/{i}")).expect("entry").status,
            200
        );
    }
}

#[test]
fn a_log_that_failed_its_startup_check_serves_no_proof_checkpoint_or_write() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    s.wait_verified();
    // A stored interior hash is changed on disk: the open-time check (the
    // right edge) does not see it, the full verify does.
    let s = s.restart(|dir| {
        let disk = testkit::RawDisk::open(dir);
        let h = disk.hash(0).expect("a stored hash");
        let mut bad = h;
        bad.0[0] ^= 1;
        disk.set_hash(0, bad);
    });
    let c = s.client();
    assert!(
        within_30s(|| c
            .get("/readyz")
            .map(|r| r.text().contains("log_unverified"))
            .unwrap_or(false)),
        "the damaged log was never found out"
    );
    for path in [
        "/v1/proofs/inclusion?index=1",
        "/v1/proofs/consistency?first=1",
        "/checkpoint",
    ] {
        let r = c.get(path).expect("answer");
        assert_eq!(r.status, 503, "{path}: {}", r.text());
        assert!(r.text().contains("log_unverified"), "{path}: {}", r.text());
    }
    let env = s.poster(&c).envelope(
        "harness",
        Event::RunStarted(testkit::world::run(
            "run-2",
            events::model::Isolation::Microvm,
        )),
    );
    let r = c.post_json("/v1/events", &env).expect("answer");
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("log_unverified"));
}
