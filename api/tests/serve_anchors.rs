//! `ledger serve` proves its log against every anchor before it is ready,
//! and publishes anchors on its schedule. Each case starts the real binary
//! on a data directory changed the way an attacker with the disk would:
//! truncated, rewritten, forked, or with an anchor file edited.

mod common;

use std::path::Path;

use common::{
    metric, run_ledger as run, run_ledger_file, spawn_ledger, spawn_ledger_live,
    stop_ledger as stop, within_30s,
};
use verifier::client::Client;

/// Enrols a fresh harness key through the server: one more entry.
fn write_one(base: &str, data: &Path, identity: &str) {
    let key = ed25519_dalek::SigningKey::from_bytes(&rand::random());
    let out = run(&[
        "enrol",
        "--server",
        base,
        "--operator-key",
        data.join("operator.key").to_str().expect("utf8"),
        "--public-key",
        &events::envelope::public_key_b64(&key.verifying_key()),
        "--identity",
        identity,
        "--role",
        "harness",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Serves `data` (anchors in `anchors`) and expects it never to become
/// ready: the anchor check fails, is counted, and numbers are withheld.
fn refused(data: &Path, anchors: &Path, case: &str) {
    let (child, base) = spawn_ledger_live(&[
        "--data-dir",
        data.to_str().expect("utf8"),
        "--anchors-dir",
        anchors.to_str().expect("utf8"),
    ]);
    let c = Client::new(&base, None);
    let found = within_30s(|| {
        c.get("/readyz")
            .map(|r| r.status == 503 && r.text().contains("log_unverified"))
            .unwrap_or(false)
    });
    let failures = metric(&c, "ledger_anchor_failures_total");
    let ready = c.get("/readyz").map(|r| r.status).unwrap_or(0);
    let numbers = c.get("/v1/task-classes").map(|r| r.status).unwrap_or(0);
    stop(child);
    assert!(found, "{case}: the server went ready (status {ready})");
    assert_eq!(
        failures, 1.0,
        "{case}: the failed anchor check was not counted"
    );
    assert_eq!(numbers, 503, "{case}: numbers were served");
}

/// Puts `from`'s data file in `to`, as someone swapping the data file
/// would, with the records that would name the swap before the anchors
/// do (the verified head: a truncated log is already refused there)
/// removed: this suite is about the anchor check.
fn copy_db(from: &Path, to: &Path) {
    std::fs::copy(testkit::db_path(from), testkit::db_path(to)).expect("copy the data file");
    for name in [
        api::server::verifying::VERIFIED_HEAD_AUX,
        api::server::verifying::DERIVED_CHECKED_AUX,
    ] {
        let _ = std::fs::remove_file(to.join(name));
    }
}

#[test]
fn serve_is_not_ready_when_its_log_disagrees_with_an_anchor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let d = data.to_str().expect("utf8");
    let anchors = data.join("anchors");
    // The data file is copied below: keep the log in it.
    assert!(
        run_ledger_file(&["init", "--data-dir", d, "--origin", "anchors.test/log"])
            .status
            .success()
    );
    // The log as it was before the anchors: two genesis entries.
    let early = dir.path().join("early");
    std::fs::create_dir_all(&early).expect("mkdir");
    copy_db(&data, &early);
    // Two anchors: at size 2, then at size 3 (the first one's own entry).
    for _ in 0..2 {
        assert!(run(&["anchor", "publish", "--data-dir", d])
            .status
            .success());
    }
    let good = dir.path().join("good");
    std::fs::create_dir_all(&good).expect("mkdir");
    copy_db(&data, &good);

    // The honest log is ready, and says when it was last anchored.
    let (child, base) = spawn_ledger(&["--data-dir", d]);
    let c = Client::new(&base, None);
    assert!(metric(&c, "ledger_last_anchor_timestamp_seconds") > 0.0);
    assert_eq!(metric(&c, "ledger_anchor_failures_total"), 0.0);
    stop(child);

    // Truncation: the log from before the second anchor.
    copy_db(&early, &data);
    refused(&data, &anchors, "truncated");

    // Rewrite at the anchored size, and a fork past it: the early log
    // grown with other entries, by someone who holds the same key.
    let elsewhere = dir.path().join("no-anchors");
    let (child, base) = spawn_ledger(&[
        "--data-dir",
        d,
        "--anchors-dir",
        elsewhere.to_str().expect("utf8"),
    ]);
    write_one(&base, &data, "rewriter");
    stop(child);
    refused(&data, &anchors, "rewritten at the anchored size");
    let (child, base) = spawn_ledger(&[
        "--data-dir",
        d,
        "--anchors-dir",
        elsewhere.to_str().expect("utf8"),
    ]);
    write_one(&base, &data, "forker");
    stop(child);
    refused(&data, &anchors, "forked after the anchor");

    // A tampered anchor file, over the honest log.
    copy_db(&good, &data);
    let newest = anchors::anchor::read_dir(&anchors)
        .expect("anchors")
        .pop()
        .expect("an anchor");
    let path = anchors.join(&newest.name);
    let mut note = std::fs::read(&path).expect("read");
    let at = note.len() - 10;
    note[at] = if note[at] == b'A' { b'B' } else { b'A' };
    std::fs::write(&path, &note).expect("write");
    refused(&data, &anchors, "anchor file edited");
}

#[test]
fn serve_publishes_anchors_on_its_schedule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let d = data.to_str().expect("utf8");
    let anchors = data.join("anchors");
    assert!(
        run(&["init", "--data-dir", d, "--origin", "schedule.test/log"])
            .status
            .success()
    );
    let (child, base) = spawn_ledger(&["--data-dir", d, "--anchor-interval-secs", "1"]);
    let c = Client::new(&base, None);
    let published = within_30s(|| {
        anchors::anchor::read_dir(&anchors)
            .map(|a| !a.is_empty())
            .unwrap_or(false)
    });
    let stamped = within_30s(|| metric(&c, "ledger_last_anchor_timestamp_seconds") > 0.0);
    // An idle log is anchored once, not once a second.
    let size = c.get_json::<serde_json::Value>("/v1/log").expect("log")["tree_size"]
        .as_u64()
        .expect("size");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let later = c.get_json::<serde_json::Value>("/v1/log").expect("log")["tree_size"]
        .as_u64()
        .expect("size");
    stop(child);
    assert!(published, "no anchor was published in 30 s");
    assert!(stamped, "ledger_last_anchor_timestamp_seconds stayed 0");
    assert_eq!(size, later, "an idle log kept being anchored");
    assert_eq!(
        anchors::anchor::read_dir(&anchors).expect("anchors").len(),
        1
    );
    let out = run(&[
        "verify",
        "--quiet",
        "--data-dir",
        d,
        "--anchors",
        anchors.to_str().expect("utf8"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
