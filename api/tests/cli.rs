//! The `ledger` program as a user runs it.

use std::process::Command;

fn ledger() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ledger"))
}

#[test]
fn demo_builds_a_log_that_verify_accepts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("demo");
    let out = ledger()
        .args(["demo", "--entries", "2500", "--data-dir"])
        .arg(&data)
        .output()
        .expect("run demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("inclusion proof for entry 1250"), "{text}");
    assert!(text.contains("full verify: OK (2500 entries)"), "{text}");

    let out = ledger()
        .args(["verify", "--quiet", "--data-dir"])
        .arg(&data)
        .output()
        .expect("verify");
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("OK: 2500 entries"));

    // A second demo into the same directory is refused rather than mixed in.
    let out = ledger()
        .args(["demo", "--data-dir"])
        .arg(&data)
        .output()
        .expect("demo again");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn verify_exits_1_and_names_the_first_bad_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    tests::build_log(dir.path(), 300);
    tests::RawDisk::open(dir.path()).set_leaf(123, b"rewritten");
    let out = ledger()
        .args(["verify", "--quiet", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("verify");
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("first bad index 123: leaf hash mismatch"),
        "{text}"
    );
}

#[test]
fn incremental_verify_from_a_wrong_root_fails_and_a_bad_root_argument_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    tests::build_log(dir.path(), 50);
    let out = ledger()
        .args([
            "verify",
            "--quiet",
            "--trusted-size",
            "10",
            "--trusted-root",
        ])
        .arg("00".repeat(32))
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .expect("verify");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("first bad index 10: tree hash mismatch"));

    let out = ledger()
        .args([
            "verify",
            "--trusted-size",
            "10",
            "--trusted-root",
            "xyz",
            "--data-dir",
        ])
        .arg(dir.path())
        .output()
        .expect("verify");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--trusted-root must be hex"));
}

#[test]
fn verify_of_a_directory_without_a_log_is_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = ledger()
        .args(["verify", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("verify");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no ledger"));
}

#[test]
fn every_command_has_help() {
    for args in [
        vec!["--help"],
        vec!["verify", "--help"],
        vec!["demo", "--help"],
    ] {
        let out = ledger().args(&args).output().expect("help");
        assert!(out.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage:"));
    }
}
