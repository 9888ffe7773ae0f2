//! The auditor against a server that lies. A proxy in front of a real server
//! rewrites one kind of answer; the audit must fail with the matching typed
//! failure (and, for a stale checkpoint, exit status 3).

mod common;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use common::{seed, TestServer};
use events::model::{Event, Isolation, RunFinished};
use verifier::audit::{audit, AuditError, AuditFailure};
use verifier::client::Client;

#[derive(Clone, Copy, PartialEq)]
enum Lie {
    Stale,
    WrongInclusion,
    Inconsistent,
    EvidenceNotInLog,
    ForgedStatistics,
    /// One entry's leaf rewritten, with its leaf hash and the chain from
    /// it on recomputed to match: only the signed root can catch it.
    RewrittenEntry,
    /// One entry's chain hash changed, its leaf and the tree left alone.
    ForgedChain,
}

struct Proxy {
    upstream: String,
    lie: Lie,
    old_note: String,
    forged_note: String,
}

async fn forward(State(p): State<Arc<Proxy>>, req: Request) -> Response {
    let path = req
        .uri()
        .path_and_query()
        .map(|x| x.as_str().to_owned())
        .unwrap_or_default();
    let p2 = Arc::clone(&p);
    let path2 = path.clone();
    let reply =
        tokio::task::spawn_blocking(move || Client::new(&p2.upstream, None).get(&path2)).await;
    let Ok(Ok(reply)) = reply else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let mut body = reply.body.clone();
    if path == "/checkpoint" && p.lie == Lie::Stale {
        body = p.old_note.clone().into_bytes();
    } else if path == "/checkpoint" && p.lie == Lie::Inconsistent {
        body = p.forged_note.clone().into_bytes();
    } else if path.starts_with("/v1/proofs/inclusion") && p.lie == Lie::WrongInclusion {
        let mut v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        if let Some(first) = v["proof"].get_mut(0) {
            let mut h = hex::decode(first.as_str().expect("hex")).expect("hex");
            h[0] ^= 1;
            *first = hex::encode(h).into();
        }
        body = serde_json::to_vec(&v).expect("json");
    } else if path.starts_with("/v1/task-classes/") && p.lie == Lie::EvidenceNotInLog {
        let mut v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        let fake = br#"{"a score that was never logged":1.0}"#;
        let fake_hash = hex::encode(ledger::leaf_hash(fake).0);
        v["evidence"][0]["leaf"] = base64::engine::general_purpose::STANDARD
            .encode(fake)
            .into();
        v["evidence"][0]["leaf_hash"] = fake_hash.clone().into();
        v["view"]["evidence"][0]["leaf_hash"] = fake_hash.into();
        body = serde_json::to_vec(&v).expect("json");
    } else if path.starts_with("/v1/entries?") && p.lie == Lie::RewrittenEntry {
        let mut v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        let b64 = base64::engine::general_purpose::STANDARD;
        if let Some(entries) = v["entries"].as_array_mut().filter(|e| e.len() > 1) {
            let fake = br#"{"a rewritten entry":1}"#;
            entries[1]["leaf"] = b64.encode(fake).into();
            entries[1]["leaf_hash"] = hex::encode(ledger::leaf_hash(fake).0).into();
            let h = |x: &serde_json::Value| -> ledger::Hash {
                ledger::hash::from_hex(x.as_str().expect("hex")).expect("hash")
            };
            let mut chain = h(&entries[0]["chain_hash"]);
            for e in entries.iter_mut().skip(1) {
                let leaf = b64.decode(e["leaf"].as_str().expect("b64")).expect("b64");
                chain = ledger::chain_hash(&chain, &leaf);
                e["chain_hash"] = ledger::hash::to_hex(&chain).into();
            }
        }
        body = serde_json::to_vec(&v).expect("json");
    } else if path.starts_with("/v1/entries?") && p.lie == Lie::ForgedChain {
        let mut v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        if let Some(e) = v["entries"].get_mut(1) {
            e["chain_hash"] = hex::encode([7u8; 32]).into();
        }
        body = serde_json::to_vec(&v).expect("json");
    } else if path.starts_with("/v1/task-classes/") && p.lie == Lie::ForgedStatistics {
        // Every proof checks out; only the stated mean does not follow
        // from the evidence.
        let mut v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        v["view"]["held_out"]["mean"] = 0.5.into();
        body = serde_json::to_vec(&v).expect("json");
    }
    let ct = if path == "/checkpoint" {
        "text/plain; charset=utf-8"
    } else {
        "application/json"
    };
    (
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK),
        [(header::CONTENT_TYPE, ct)],
        body,
    )
        .into_response()
}

/// A real server with history, the trusted checkpoint of its past, and a
/// lying proxy in front of it.
struct Scene {
    server: TestServer,
    trusted: String,
    proxies: Vec<(Lie, String)>,
    _rt: tokio::runtime::Runtime,
}

fn scene() -> Scene {
    let server = TestServer::start(|_| {});
    let c = server.client();
    seed(&server, &c);
    server.wait_verified();
    let old_note = c.get("/checkpoint").expect("checkpoint").text();
    // More history after the trusted checkpoint.
    let mut p = server.poster(&c);
    p.post(
        "harness",
        Event::RunStarted(testkit::world::run("run-2", Isolation::Microvm)),
    )
    .expect("run");
    p.post(
        "harness",
        Event::RunFinished(RunFinished {
            run_id: "run-2".into(),
        }),
    )
    .expect("finish");
    let head = server.state.events.ledger().head();
    let forged_root = ledger::leaf_hash(b"a rewritten history");
    let forged_note = server
        .state
        .log_key
        .sign_checkpoint(head.size, &forged_root)
        .expect("sign");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("rt");
    let mut proxies = Vec::new();
    for lie in [
        Lie::Stale,
        Lie::WrongInclusion,
        Lie::Inconsistent,
        Lie::EvidenceNotInLog,
        Lie::ForgedStatistics,
        Lie::RewrittenEntry,
        Lie::ForgedChain,
    ] {
        let proxy = Arc::new(Proxy {
            upstream: server.base.clone(),
            lie,
            old_note: old_note.clone(),
            forged_note: forged_note.clone(),
        });
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = axum::Router::new().fallback(forward).with_state(proxy);
        rt.spawn(async move { axum::serve(listener, app).await });
        proxies.push((lie, format!("http://{addr}")));
    }
    // The trusted checkpoint is the newer one, so the old one is stale.
    Scene {
        trusted: c.get("/checkpoint").expect("checkpoint").text(),
        server,
        proxies,
        _rt: rt,
    }
}

fn run_audit(
    base: &str,
    scene: &Scene,
    trusted: &str,
) -> Result<verifier::audit::AuditReport, AuditError> {
    audit(
        &Client::new(base, None),
        std::slice::from_ref(&scene.server.vkey),
        Some(trusted.as_bytes()),
        16,
        7,
        &mut |_, _, _| {},
    )
}

fn proxy(s: &Scene, lie: Lie) -> String {
    s.proxies
        .iter()
        .find(|(l, _)| *l == lie)
        .map(|(_, b)| b.clone())
        .expect("proxy")
}

#[test]
fn an_honest_server_passes_and_the_auditor_lies_are_all_caught() {
    let s = scene();
    let c = s.server.client();
    let first_note = {
        // A checkpoint from before the last two writes.
        let size = s.server.state.events.ledger().head().size - 2;
        let root = s.server.state.events.ledger().root_at(size).expect("root");
        s.server
            .state
            .log_key
            .sign_checkpoint(size, &root)
            .expect("sign")
    };
    // Honest: consistent from the older checkpoint, spot checks and projections verify.
    let report = run_audit(&s.server.base, &s, &first_note).expect("honest server passes");
    assert_eq!(
        report.previous_size,
        Some(s.server.state.events.ledger().head().size - 2)
    );
    assert!(
        report.entries_checked > 0
            && report.projections_checked == 1
            && report.evidence_checked == 3
    );
    assert_eq!(c.get("/checkpoint").expect("cp").text(), report.checkpoint);

    // A stale checkpoint: older than the one we trust.
    match run_audit(&proxy(&s, Lie::Stale), &s, &s.trusted) {
        Err(AuditError::Failed(AuditFailure::Stale { trusted, served })) => {
            assert!(served < trusted)
        }
        other => panic!("stale checkpoint not caught: {other:?}"),
    }
    // A wrong inclusion proof.
    match run_audit(&proxy(&s, Lie::WrongInclusion), &s, &first_note) {
        Err(AuditError::Failed(AuditFailure::BadEntry { reason, .. })) => {
            assert!(reason.contains("inclusion"), "{reason}")
        }
        other => panic!("wrong inclusion proof not caught: {other:?}"),
    }
    // An inconsistent checkpoint (validly signed, over a rewritten history).
    match run_audit(&proxy(&s, Lie::Inconsistent), &s, &first_note) {
        Err(AuditError::Failed(AuditFailure::Inconsistent(_))) => {}
        other => panic!("inconsistent checkpoint not caught: {other:?}"),
    }
    // A projection whose evidence is not in the log.
    match run_audit(&proxy(&s, Lie::EvidenceNotInLog), &s, &first_note) {
        Err(AuditError::Failed(AuditFailure::BadProjection { reason, .. })) => {
            assert!(reason.contains("evidence"), "{reason}")
        }
        other => panic!("evidence not in the log not caught: {other:?}"),
    }
    // Statistics that do not follow from the evidence they cite.
    match run_audit(&proxy(&s, Lie::ForgedStatistics), &s, &first_note) {
        Err(AuditError::Failed(AuditFailure::BadProjection { reason, .. })) => {
            assert!(reason.contains("held-out mean"), "{reason}")
        }
        other => panic!("forged statistics not caught: {other:?}"),
    }
}

/// `ledger audit --quiet --server BASE --key VKEY --trusted FILE`.
fn audit_cli(base: &str, vkey: &str, trusted: &std::path::Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_ledger"))
        .args([
            "audit",
            "--quiet",
            "--server",
            base,
            "--key",
            vkey,
            "--trusted",
        ])
        .arg(trusted)
        .output()
        .expect("audit")
}

#[test]
fn the_audit_command_exits_3_on_a_stale_checkpoint_and_saves_only_after_a_pass() {
    let s = scene();
    let dir = tempfile::tempdir().expect("tempdir");
    let trusted = dir.path().join("trusted.checkpoint");
    std::fs::write(&trusted, &s.trusted).expect("write");
    let out = audit_cli(&proxy(&s, Lie::Stale), &s.server.vkey, &trusted);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(&trusted).expect("read"),
        s.trusted,
        "a failed audit saves nothing"
    );
    let out = audit_cli(&proxy(&s, Lie::WrongInclusion), &s.server.vkey, &trusted);
    assert_eq!(out.status.code(), Some(1));
    let out = audit_cli(&proxy(&s, Lie::ForgedStatistics), &s.server.vkey, &trusted);
    assert_eq!(
        out.status.code(),
        Some(1),
        "statistics that do not follow from the evidence: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = audit_cli(&s.server.base, &s.server.vkey, &trusted);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("OK: saved the new trusted checkpoint"));
}

/// A server that rewrites an entry (and recomputes its leaf hash so the
/// entry alone looks whole) is caught by the one walk that `verify
/// --server`, `export --server` and `backup` share: the entries do not hash
/// to the signed root. The backup writes nothing, and both commands exit 1.
#[test]
fn a_rewritten_entry_is_caught_by_verify_export_and_backup() {
    let s = scene();
    let base = proxy(&s, Lie::RewrittenEntry);
    let c = Client::new(&base, None);
    let note = c.get("/checkpoint").expect("checkpoint").text();
    let cp = anchors::open_checkpoint(note.as_bytes(), &s.server.vkey).expect("signed");
    let walked =
        verifier::entries_verified(&c, cp.size, &cp.root, &mut |_, _| Ok(()), &mut |_, _| {});
    match walked {
        Err(verifier::CheckError::Disproved(m)) => {
            assert!(m.contains("do not hash to the signed root"), "{m}")
        }
        other => panic!("expected a disproof, got {other:?}"),
    }
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("backup.jsonl");
    verifier::backup::backup(&c, &s.server.vkey, &file, &mut |_, _| {})
        .expect_err("a rewritten entry");
    assert!(
        std::fs::read_dir(dir.path()).expect("dir").next().is_none(),
        "nothing written, not even a partial file"
    );
    for cmd in ["verify", "export"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ledger"))
            .args([cmd, "--server", &base, "--key", &s.server.vkey])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(1), "{cmd}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("do not hash to the signed root"),
            "{cmd}: {out:?}"
        );
    }
    // Nothing unproven is written out: not to --out, not to standard output.
    let out_file = dir.path().join("export.jsonl");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ledger"))
        .args([
            "export",
            "--server",
            &base,
            "--key",
            &s.server.vkey,
            "--out",
        ])
        .arg(&out_file)
        .output()
        .expect("export");
    assert_eq!(out.status.code(), Some(1));
    assert!(!out_file.exists(), "no export file");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ledger"))
        .args(["export", "--server", &base, "--key", &s.server.vkey])
        .output()
        .expect("export");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("\"index\""),
        "no entry line on standard output: {out:?}"
    );
    // A forged chain hash is caught at its entry, though the tree is whole.
    let forged = Client::new(&proxy(&s, Lie::ForgedChain), None);
    match verifier::entries_verified(
        &forged,
        cp.size,
        &cp.root,
        &mut |_, _| Ok(()),
        &mut |_, _| {},
    ) {
        Err(verifier::CheckError::Disproved(m)) => assert!(
            m.starts_with("first bad index 1: the chain hash served"),
            "{m}"
        ),
        other => panic!("expected a disproof, got {other:?}"),
    }
    // The honest server passes the same walk.
    let honest = s.server.client();
    verifier::entries_verified(
        &honest,
        cp.size,
        &cp.root,
        &mut |_, _| Ok(()),
        &mut |_, _| {},
    )
    .expect("the honest server's entries prove");
}
