//! The load generator at small scale, as CI's smoke test: correctness of
//! what it checks, no timing thresholds.

use std::process::Command;

#[test]
fn loadgen_runs_briefly_and_every_receipt_verifies() {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["--clients", "4", "--seconds", "1"])
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
