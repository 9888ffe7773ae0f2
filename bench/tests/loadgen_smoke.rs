//! The load generator at small scale, as CI's smoke test: correctness of
//! what it checks, no timing thresholds.

use std::process::Command;

#[test]
fn loadgen_runs_briefly_and_every_receipt_verifies() {
    smoke(&["--clients", "4", "--seconds", "1"]);
}

/// The same through `POST /v1/events/batch`: every envelope of every batch
/// must come back with a receipt for itself.
#[test]
fn loadgen_in_batches_runs_briefly_and_every_receipt_verifies() {
    smoke(&["--clients", "4", "--seconds", "1", "--batch", "16"]);
}

fn smoke(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .expect("loadgen");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let acked: u64 = text
        .split(" acknowledged")
        .next()
        .and_then(|n| n.trim().parse().ok())
        .expect("count");
    assert!(acked > 0, "{text}");
    assert!(
        text.contains(&format!("{acked} proofs and checkpoints verified")),
        "{text}"
    );
    assert!(text.contains("errors {}"), "{text}");
}
