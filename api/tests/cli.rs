//! The `ledger` program as a user runs it.

mod common;

use std::process::Command;

fn ledger() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ledger"))
}

use common::run_ledger as run;

/// The `verifier key:` line that `ledger init` and `ledger keygen` print.
fn verifier_key(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("verifier key:"))
        .expect("verifier key")
        .trim()
        .to_owned()
}

#[test]
fn demo_loads_a_bench_and_every_proof_verifies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("demo");
    let out = ledger()
        .args(["demo", "--exit", "--data-dir"])
        .arg(&data)
        .output()
        .expect("demo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("refused a poisoned score (422): case_digest_mismatch"),
        "{text}"
    );
    assert!(
        text.contains("refused a banned breakdown key (422): breakdown_key_banned"),
        "{text}"
    );
    assert!(text.contains("-> recommend silver"), "{text}");
    assert!(text.contains("all verify"), "{text}");
    let out = ledger()
        .args(["verify", "--quiet", "--data-dir"])
        .arg(&data)
        .output()
        .expect("verify");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn verify_exits_1_and_names_the_first_bad_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    testkit::build_log(dir.path(), 300);
    testkit::RawDisk::open(dir.path()).set_leaf(123, b"rewritten");
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
    testkit::build_log(dir.path(), 50);
    let d = dir.path().to_str().expect("utf8");
    let zero = "00".repeat(32);
    let out = run(&[
        "verify",
        "--quiet",
        "--trusted-size",
        "10",
        "--trusted-root",
        &zero,
        "--data-dir",
        d,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("first bad index 10: tree hash mismatch"));
    let out = run(&[
        "verify",
        "--trusted-size",
        "10",
        "--trusted-root",
        "xyz",
        "--data-dir",
        d,
    ]);
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
    for cmd in [
        "",
        "serve",
        "init",
        "keygen",
        "verify",
        "proof",
        "checkpoint",
        "export",
        "demo",
        "audit",
        "anchor",
        "bundle",
        "verify-bundle",
        "enrol",
        "revoke",
        "post",
        "state",
    ] {
        let args: Vec<&str> = if cmd.is_empty() {
            vec!["--help"]
        } else {
            vec![cmd, "--help"]
        };
        let out = run(&args);
        assert!(out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage:"),
            "{args:?}"
        );
    }
}

#[test]
fn init_serve_and_the_auditor_commands_work_end_to_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let d = data.to_str().expect("utf8");
    let out = run(&["init", "--data-dir", d, "--origin", "cli.test/log"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let vkey = verifier_key(&out);
    assert!(
        run(&["init", "--data-dir", d]).status.code() == Some(2),
        "re-init is refused"
    );
    let keyfile = dir.path().join("harness.key");
    let out = run(&[
        "keygen",
        "--name",
        "harness",
        "--out",
        keyfile.to_str().expect("utf8"),
    ]);
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("key id:"));

    let (mut server, base) = spawn_server(&["--data-dir", d]);
    let checkpoint_file = dir.path().join("trusted.checkpoint");
    let out = run(&["checkpoint", "--server", &base, "--key", &vkey]);
    assert!(out.status.success());
    std::fs::write(&checkpoint_file, &out.stdout).expect("save checkpoint");
    let out = run(&[
        "verify",
        "--quiet",
        "--server",
        &base,
        "--key",
        &vkey,
        "--trusted",
        checkpoint_file.to_str().expect("utf8"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["proof", "--server", &base, "--key", &vkey, "--index", "1"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["proof", "--server", &base, "--key", &vkey, "--first", "1"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other = anchors::LogKey::generate("cli.test/log").expect("key");
    let out = run(&[
        "proof",
        "--server",
        &base,
        "--key",
        other.verifier_key(),
        "--index",
        "1",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a checkpoint signed by another key is a failed check"
    );
    let out = run(&["export", "--server", &base]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        2,
        "genesis has two entries"
    );
    // A stop saves the projection only once the derived state has been
    // checked against the log, which finishes after `/readyz`.
    let client = verifier::client::Client::new(&base, None);
    assert!(
        common::within_30s(|| common::metric(&client, "ledger_derived_check_status") == 1.0),
        "the derived state was never checked"
    );
    let _ = Command::new("kill").arg(server.id().to_string()).status();
    let _ = server.wait();
    let out = run(&["verify", "--quiet", "--data-dir", d]);
    assert_eq!(out.status.code(), Some(0));
    let out = run(&["export", "--data-dir", d]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        3,
        "the stop saved the projection at a state commitment"
    );
}

fn spawn_server(args: &[&str]) -> (std::process::Child, String) {
    common::spawn_ledger(args)
}

use common::stop_ledger as stop;

fn field(out: &std::process::Output, prefix: &str) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix(prefix).map(|v| v.trim().to_owned()))
        .unwrap_or_else(|| panic!("no `{prefix}` in {}", String::from_utf8_lossy(&out.stdout)))
}

/// ops/runbooks/rotate-log-key.md, step by step.
#[test]
fn rotate_log_key_runbook() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let d = data.to_str().expect("utf8");
    let anchors = data.join("anchors");
    let a = anchors.to_str().expect("utf8");
    let out = run(&["init", "--data-dir", d, "--origin", "rotate.test/log"]);
    let old_vkey = field(&out, "verifier key:");
    let operator_key = data.join("operator.key");
    let op = operator_key.to_str().expect("utf8");
    assert!(
        run(&["anchor", "publish", "--data-dir", d])
            .status
            .success(),
        "an anchor under the old key"
    );

    let (server, base) = spawn_server(&["--data-dir", d]);
    let new_key = dir.path().join("new-log.key");
    let out = run(&[
        "keygen",
        "--name",
        "rotate.test/log",
        "--out",
        new_key.to_str().expect("utf8"),
    ]);
    let new_vkey = field(&out, "verifier key:");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let b64 = text
        .split("(public key ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .expect("event public key")
        .to_owned();
    let out = run(&[
        "enrol",
        "--server",
        &base,
        "--operator-key",
        op,
        "--public-key",
        &b64,
        "--identity",
        "ledger-2",
        "--role",
        "ledger",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stop(server);

    assert!(run(&["anchor", "publish", "--data-dir", d])
        .status
        .success());
    std::fs::rename(data.join("log.key"), data.join("log.key.retired")).expect("retire");
    std::fs::rename(&new_key, data.join("log.key")).expect("install");
    let before = std::fs::read_dir(&anchors).expect("anchors").count();
    assert_eq!(
        run(&["anchor", "publish", "--data-dir", d]).status.code(),
        Some(1),
        "the old anchors cannot be checked without the old key: nothing is signed"
    );
    assert_eq!(
        std::fs::read_dir(&anchors).expect("anchors").count(),
        before
    );
    assert!(
        run(&[
            "anchor",
            "publish",
            "--data-dir",
            d,
            "--anchor-key",
            &old_vkey
        ])
        .status
        .success(),
        "an anchor under the new key"
    );

    let out = run(&[
        "verify",
        "--quiet",
        "--data-dir",
        d,
        "--anchors",
        a,
        "--anchor-key",
        &old_vkey,
        "--anchor-key",
        &new_vkey,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("consistent with 3 anchors"));
    let out = run(&[
        "verify",
        "--quiet",
        "--data-dir",
        d,
        "--anchors",
        a,
        "--anchor-key",
        &new_vkey,
    ]);
    assert_eq!(out.status.code(), Some(1), "old anchors need the old key");

    let (server, base) = spawn_server(&["--data-dir", d, "--anchor-key", &old_vkey]);
    let out = run(&["checkpoint", "--server", &base, "--key", &new_vkey]);
    assert!(
        out.status.success(),
        "checkpoints are now signed by the new key"
    );
    stop(server);
}

/// ops/runbooks/generate-keys.md and ops/runbooks/revoke-principal.md.
#[test]
fn generate_keys_and_revoke_runbooks() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let d = data.to_str().expect("utf8");
    assert!(run(&[
        "init",
        "--data-dir",
        d,
        "--origin",
        "keys.test/log",
        "--operator-identity",
        "ops@example.org"
    ])
    .status
    .success());
    for f in ["log.key", "operator.key"] {
        let mode = std::fs::metadata(data.join(f))
            .expect("key file")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{f} must be 0600");
    }
    let hk = dir.path().join("harness-ci.key");
    let out = run(&[
        "keygen",
        "--name",
        "harness-ci",
        "--out",
        hk.to_str().expect("utf8"),
    ]);
    let key_id = field(&out, "key id:");
    let public = field(&out, "public key:");
    assert_eq!(
        std::fs::metadata(&hk).expect("key").permissions().mode() & 0o777,
        0o600
    );
    let (server, base) = spawn_server(&["--data-dir", d]);
    let op = data.join("operator.key");
    let op = op.to_str().expect("utf8");
    let out = run(&[
        "enrol",
        "--server",
        &base,
        "--operator-key",
        op,
        "--public-key",
        &public,
        "--identity",
        "harness-ci@example.org",
        "--role",
        "harness",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&[
        "revoke",
        "--server",
        &base,
        "--operator-key",
        op,
        "--key-id",
        &key_id,
        "--reason",
        "laptop stolen",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The revoked key now writes nothing.
    let key = verifier::keys::read_signing_key(&hk).expect("key");
    let client = verifier::client::Client::new(&base, None);
    let vkey = client
        .get("/v1/log/key")
        .expect("key")
        .text()
        .trim()
        .to_owned();
    let mut p = api::demo::Poster::new(&client, vkey, key.clone());
    let r = p
        .post_refused(
            "operator",
            events::Event::RunFinished(events::model::RunFinished { run_id: "x".into() }),
        )
        .expect("refused");
    assert_eq!(r.code().as_deref(), Some("signer_revoked"));
    let out = run(&[
        "revoke",
        "--server",
        &base,
        "--operator-key",
        op,
        "--key-id",
        &key_id,
        "--reason",
        "again",
    ]);
    assert!(!out.status.success(), "a key is revoked once");
    stop(server);
}

/// ops/runbooks/verify-fails.md on a tampered directory.
#[test]
fn verify_fails_runbook() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let d = data.to_str().expect("utf8");
    assert!(run(&["init", "--data-dir", d, "--origin", "vf.test/log"])
        .status
        .success());
    let anchors = data.join("anchors");
    let a = anchors.to_str().expect("utf8");
    let (server, base) = spawn_server(&["--data-dir", d]);
    let backup = dir.path().join("latest.backup");
    assert!(run(&[
        "backup",
        "--server",
        &base,
        "--out",
        backup.to_str().expect("utf8")
    ])
    .status
    .success());
    stop(server);
    // Two anchors: the second covers the first's anchor.published entry, one past the backup.
    assert!(run(&["anchor", "publish", "--data-dir", d])
        .status
        .success());
    assert!(run(&["anchor", "publish", "--data-dir", d])
        .status
        .success());
    // Someone edits an entry on disk.
    testkit::RawDisk::open(&data).set_leaf(1, b"{\"forged\":true}");
    // 1. verify names the first bad index.
    let out = run(&["verify", "--quiet", "--data-dir", d, "--anchors", a]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("first bad index 1: leaf hash mismatch"));
    // 2. preserve, 3. restore the backup (it is behind the anchor published since, by one entry).
    let damaged = dir.path().join("data.damaged");
    std::fs::rename(&data, &damaged).expect("preserve");
    let restored = dir.path().join("data.restored");
    let key = damaged.join("log.key");
    let anchors = damaged.join("anchors");
    let args = [
        "restore",
        "--backup",
        backup.to_str().expect("utf8"),
        "--data-dir",
        restored.to_str().expect("utf8"),
        "--key-file",
        key.to_str().expect("utf8"),
        "--anchors",
        anchors.to_str().expect("utf8"),
    ];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(2), "behind the anchor: refused");
    assert!(String::from_utf8_lossy(&out.stderr).contains("behind anchor"));
    let mut allowed = args.to_vec();
    allowed.push("--allow-behind-anchor");
    let out = run(&allowed);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("WARNING: behind anchor"));
    let out = run(&[
        "verify",
        "--quiet",
        "--data-dir",
        restored.to_str().expect("utf8"),
    ]);
    assert_eq!(out.status.code(), Some(0));
}

/// docs/UPGRADES.md: a data directory in a newer format is refused, not misread.
#[test]
fn a_newer_data_format_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    testkit::build_file_log(dir.path(), 3);
    let newer = ledger::store::FORMAT_VERSION + 1;
    {
        let db = redb::Database::open(testkit::db_path(dir.path())).expect("raw");
        let txn = db.begin_write().expect("write");
        {
            let mut meta = txn.open_table(ledger::store::META).expect("meta");
            meta.insert("format_version", newer.to_be_bytes().as_slice())
                .expect("insert");
        }
        txn.commit().expect("commit");
    }
    let out = ledger()
        .args(["verify", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("verify");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("format version {newer}"))
            && err.contains(&format!("reads up to {}", ledger::store::FORMAT_VERSION)),
        "{err}"
    );
}

/// A data directory made by `ledger init`, served: the directory, the log's
/// verifier key, the operator's key, the server and its base URL.
fn initialised_server() -> (
    tempfile::TempDir,
    String,
    ed25519_dalek::SigningKey,
    std::process::Child,
    String,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let d = data.to_str().expect("utf8");
    let out = run(&["init", "--data-dir", d]);
    assert!(out.status.success());
    let vkey = verifier_key(&out);
    let operator =
        verifier::keys::read_signing_key(&data.join("operator.key")).expect("operator key");
    let (server, base) = spawn_server(&["--data-dir", d]);
    (dir, vkey, operator, server, base)
}

/// `ledger post`: envelopes from a file of lines and from a JSON array, in
/// batches; every receipt checked against the trusted key, refusals listed
/// with code and field, exit 1 when any envelope is refused, and a re-run
/// acknowledges what is already in the log.
#[test]
fn post_sends_envelopes_in_batches_and_checks_every_receipt() {
    use events::model::Event;
    let (dir, vkey, operator, mut server, base) = initialised_server();
    let client = verifier::client::Client::new(&base, None);
    let mut p = api::demo::Poster::new(&client, vkey.clone(), operator);
    let good: Vec<Vec<u8>> = (0..5)
        .map(|i| {
            p.envelope(
                "operator",
                Event::TaskClassRegistered(testkit::world::task_class(&format!("cli-post-{i}"))),
            )
        })
        .collect();
    let text = |e: &[u8]| String::from_utf8(e.to_vec()).expect("utf8");
    let lines = dir.path().join("envelopes.jsonl");
    std::fs::write(
        &lines,
        format!(
            "{}\n\n{}\n{{\"payload\": 1}}\n{}\n",
            text(&good[0]),
            text(&good[1]),
            text(&good[2])
        ),
    )
    .expect("write");
    let lines = lines.to_str().expect("utf8");
    let out = run(&[
        "post", "--server", &base, "--key", &vkey, "--batch", "2", lines,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("{lines}:4: refused 400 malformed_envelope")),
        "{stdout}"
    );
    assert!(
        stdout.contains("4 envelopes: 3 appended, 0 already in the log, 1 refused"),
        "{stdout}"
    );

    let array = dir.path().join("envelopes.json");
    std::fs::write(
        &array,
        format!(
            "[{}]",
            good.iter().map(|e| text(e)).collect::<Vec<_>>().join(",")
        ),
    )
    .expect("write");
    let out = run(&[
        "post",
        "--server",
        &base,
        "--key",
        &vkey,
        array.to_str().expect("utf8"),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("5 envelopes: 2 appended, 3 already in the log, 0 refused"),
        "{stdout}"
    );

    // --json: one receipt per line, in order, each one that checks out
    // against the envelope given; the summary goes to standard error.
    let out = run(&[
        "post",
        "--server",
        &base,
        "--key",
        &vkey,
        "--json",
        array.to_str().expect("utf8"),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let receipts: Vec<verifier::wire::WriteReceipt> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a receipt per line"))
        .collect();
    assert_eq!(receipts.len(), good.len());
    let mut checker = verifier::check::ReceiptChecker::new(&vkey);
    for (rc, env) in receipts.iter().zip(&good) {
        assert!(rc.existing);
        checker
            .check(rc, Some(env))
            .expect("the printed receipt verifies");
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("5 envelopes: 0 appended, 5 already"));

    // Receipts checked against another log's key do not verify: exit 1.
    let other_key = dir.path().join("other.key");
    let out = run(&[
        "keygen",
        "--name",
        "other.example/log",
        "--out",
        other_key.to_str().expect("utf8"),
    ]);
    let other = verifier_key(&out);
    let out = run(&[
        "post",
        "--server",
        &base,
        "--key",
        &other,
        array.to_str().expect("utf8"),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("the receipt does not verify"), "{stdout}");
    let _ = server.kill();
    let _ = server.wait();
}

/// A proxy in front of a server that is briefly unavailable: the first
/// batch is answered 503 with `Retry-After: 0`, and in the second answer
/// the first envelope's result is replaced by a 503 (it was in fact
/// appended). Everything else passes through.
async fn stutter(
    axum::extract::State((upstream, posts)): axum::extract::State<(
        String,
        std::sync::Arc<std::sync::atomic::AtomicUsize>,
    )>,
    req: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let post = req.method() == axum::http::Method::POST;
    let body = axum::body::to_bytes(req.into_body(), 1 << 24)
        .await
        .unwrap_or_default();
    let n = if post {
        posts.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    } else {
        usize::MAX
    };
    if n == 0 {
        let problem = serde_json::json!({"type": "urn:evidence-ledger:problem:ledger_unavailable",
            "title": "Service Unavailable", "status": 503, "code": "ledger_unavailable",
            "detail": "catching up the event state"});
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            [
                ("retry-after", "0"),
                ("content-type", "application/problem+json"),
            ],
            problem.to_string(),
        )
            .into_response();
    }
    let (status, bytes) = tokio::task::spawn_blocking(move || {
        let c = verifier::client::Client::new(&upstream, None);
        let r = if post {
            c.post_json(&path, &body)
        } else {
            c.get(&path)
        }
        .expect("upstream");
        let mut bytes = r.body;
        if n == 1 {
            let mut answer: serde_json::Value = serde_json::from_slice(&bytes).expect("batch");
            answer["results"][0] = serde_json::json!({"status": 503, "problem": {
                "type": "urn:evidence-ledger:problem:ledger_unavailable",
                "title": "Service Unavailable", "status": 503, "code": "ledger_unavailable",
                "detail": "catching up the event state"}});
            bytes = serde_json::to_vec(&answer).expect("json");
        }
        (r.status, bytes)
    })
    .await
    .expect("proxy");
    (
        axum::http::StatusCode::from_u16(status).expect("status"),
        [("content-type", "application/json")],
        bytes,
    )
        .into_response()
}

/// `ledger post` posts again what a starting or busy server answered 503
/// for, after its `Retry-After`: a whole batch, and one envelope of a
/// batch; with `--retries 0` the 503 is the answer.
#[test]
fn post_retries_what_the_server_answered_503_for() {
    use events::model::Event;
    let (dir, vkey, operator, server, base) = initialised_server();
    let client = verifier::client::Client::new(&base, None);
    let mut p = api::demo::Poster::new(&client, vkey.clone(), operator);
    let envelopes: Vec<String> = (0..3)
        .map(|i| {
            String::from_utf8(p.envelope(
                "operator",
                Event::TaskClassRegistered(testkit::world::task_class(&format!("retry-{i}"))),
            ))
            .expect("utf8")
        })
        .collect();
    let file = dir.path().join("envelopes.json");
    std::fs::write(&file, format!("[{}]", envelopes.join(","))).expect("write");
    let file = file.to_str().expect("utf8");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("rt");
    let proxy = |upstream: &str| {
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = axum::Router::new()
            .fallback(stutter)
            .with_state((upstream.to_owned(), std::sync::Arc::default()));
        rt.spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    };

    let out = run(&[
        "post",
        "--server",
        &proxy(&base),
        "--key",
        &vkey,
        "--retries",
        "0",
        file,
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("503"));

    let out = run(&["post", "--server", &proxy(&base), "--key", &vkey, file]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("3 envelopes: 2 appended, 1 already in the log, 0 refused"),
        "{stdout}"
    );
    stop(server);
}

/// `ledger enrol` prints the identity's handle (docs/PRIVACY.md,
/// "Handles"); a second key of the same person under a new handle is
/// refused, naming the handle to use, and is enrolled under that one.
#[test]
fn enrol_prints_the_identity_handle_and_another_key_of_one_person_names_it() {
    let (dir, vkey, _operator, server, base) = initialised_server();
    let op = dir.path().join("data").join("operator.key");
    let op = op.to_str().expect("utf8");
    let enrol = |seed: u8, handle: Option<&str>| {
        let key = ed25519_dalek::SigningKey::from_bytes(&[seed; 32]);
        let public = events::envelope::public_key_b64(&key.verifying_key());
        let mut args = vec![
            "enrol",
            "--server",
            &base,
            "--key",
            &vkey,
            "--operator-key",
            op,
            "--public-key",
            &public,
            "--identity",
            "alice@example.org",
            "--role",
            "curator",
        ];
        if let Some(h) = handle {
            args.extend(["--identity-handle", h]);
        }
        run(&args)
    };
    let out = enrol(1, None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let handle = field(&out, "identity handle:");
    assert_eq!(handle.len(), 43, "a digest: {handle}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("alice"));
    let out = enrol(2, None);
    assert!(!out.status.success(), "a second handle for alice");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("handle_value_bound") && err.contains(&handle),
        "{err}"
    );
    let out = enrol(2, Some(&handle));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(field(&out, "identity handle:"), handle);
    stop(server);
}

/// `ledger init --storage` keeps the log in a new PostgreSQL schema and
/// points the data directory at it; `ledger serve` serves it (a checkpoint
/// checked with the log's key); `ledger verify` follows the pointer; a URL
/// that is not PostgreSQL's is refused by init.
#[test]
fn init_keeps_the_log_in_postgres_and_serve_and_verify_follow_it() {
    let url = testkit::pg::url();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let d = data.to_str().expect("utf8");
    let schema = ledger::store::pg::new_schema_name().expect("name");
    let out = ledger()
        .args(["init", "--data-dir", d])
        .args(["--storage", &url, "--schema", &schema])
        .env_remove("LEDGER_STORAGE")
        .output()
        .expect("init");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("PostgreSQL") && stdout.contains(&format!("schema {schema}")),
        "{stdout}"
    );
    let vkey = verifier_key(&out);
    assert!(data.join(ledger::store::STORAGE_FILE).exists());
    assert!(!data.join(ledger::store::DB_FILE).exists());
    let (mut server, base) = spawn_server(&["--data-dir", d]);
    let out = run(&["checkpoint", "--server", &base, "--key", &vkey]);
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with(api::init::DEFAULT_ORIGIN),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = ledger()
        .args(["verify", "--data-dir", d])
        .output()
        .expect("verify");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = ledger()
        .args(["init", "--data-dir"])
        .arg(dir.path().join("other"))
        .args(["--storage", "mysql://db/x"])
        .output()
        .expect("init");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a postgres:// or postgresql:// URL"));
}

/// What `ledger verify --quiet` says of a data directory: size, root,
/// chain, disclosures and lookups.
fn verified(data: &std::path::Path) -> String {
    let out = ledger()
        .args(["verify", "--quiet", "--data-dir"])
        .arg(data)
        .output()
        .expect("verify");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Everything but the first line, which says how long it took.
    stdout.lines().skip(1).collect::<Vec<_>>().join("\n")
}

/// `ledger migrate` moves the demo's log (with kept disclosures and their
/// keys) into PostgreSQL and back: each time `ledger verify` reports the
/// same size and root, the source is kept aside, and a second move to
/// where the log already is, is refused.
#[test]
fn migrate_moves_a_log_to_postgres_and_back_with_the_same_root() {
    let url = testkit::pg::url();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("demo");
    let out = ledger()
        .args(["demo", "--exit", "--data-dir"])
        .arg(&data)
        .env_remove("LEDGER_STORAGE")
        .output()
        .expect("demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = verified(&data);
    let out = ledger()
        .args(["migrate", "--quiet", "--from"])
        .arg(&data)
        .args(["--to", &url])
        .output()
        .expect("migrate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("the same size and root"), "{stdout}");
    assert!(data.join(ledger::store::STORAGE_FILE).exists());
    assert!(data.join("ledger.redb.moved").exists());
    assert!(!data.join(ledger::store::DB_FILE).exists());
    assert_eq!(verified(&data), before);
    let again = ledger()
        .args(["migrate", "--quiet", "--data-dir"])
        .arg(&data)
        .args(["--to", &url])
        .output()
        .expect("migrate");
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already in PostgreSQL"));
    let out = ledger()
        .args(["migrate", "--quiet", "--data-dir"])
        .arg(&data)
        .args(["--to", "file"])
        .output()
        .expect("migrate back");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(data.join(ledger::store::DB_FILE).exists());
    assert!(!data.join(ledger::store::STORAGE_FILE).exists());
    assert_eq!(verified(&data), before);
}
