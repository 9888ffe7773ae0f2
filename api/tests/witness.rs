//! Witnesses (C2SP tlog-witness, tlog-cosignature, tlog-policy): a split
//! view cannot get both sides cosigned, a witness killed and restarted keeps
//! its state, and a server with a policy serves only checkpoints a quorum
//! cosigned, which `ledger audit --policy` checks and an independent
//! Ed25519 implementation (PyNaCl) verifies.

mod common;

use std::io::{Read as _, Write as _};
use std::sync::Arc;

use anchors::{CosignerKey, LogKey, Policy};
use api::witness::{Witness, WitnessError};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use common::{run_ledger, seed, within_30s, TestServer};
use ledger::{Config, Hash, Ledger, Raw};

fn raw_log(prefix: &str, n: u64) -> (tempfile::TempDir, Ledger<Raw>) {
    let d = tempfile::tempdir().expect("dir");
    let log = Ledger::open(d.path(), Config::default()).expect("open");
    for i in 0..n {
        log.append(format!("{prefix} {i}").into_bytes())
            .expect("append");
    }
    (d, log)
}

fn request(old: u64, proof: &[Hash], note: &str) -> Vec<u8> {
    let mut b = format!("old {old}\n");
    for h in proof {
        b.push_str(&B64.encode(h.0));
        b.push('\n');
    }
    b.push('\n');
    b.push_str(note);
    b.into_bytes()
}

fn note_of(key: &LogKey, log: &Ledger<Raw>) -> String {
    let h = log.head();
    key.sign_checkpoint(h.size, &h.root).expect("note")
}

#[test]
fn a_split_view_cannot_get_both_sides_cosigned() {
    let key = LogKey::from_seed("split.test/log", [4; 32]).expect("key");
    let dir = tempfile::tempdir().expect("state");
    let w = Witness::open(
        CosignerKey::from_seed("witness.test/w", [5; 32]).expect("key"),
        &[key.verifier_key().to_owned()],
        dir.path(),
    )
    .expect("witness");
    // Two trees of 10 entries, both signed with the real log key: what one
    // party and another are shown.
    let (_a, shown_to_alice) = raw_log("alice", 10);
    let (_b, shown_to_bob) = raw_log("bob", 10);
    let alice = note_of(&key, &shown_to_alice);
    let bob = note_of(&key, &shown_to_bob);
    w.add_checkpoint(&request(0, &[], &alice))
        .expect("the first is cosigned");
    // Bob's tree, as if the witness had seen nothing: it holds 10.
    assert_eq!(
        w.add_checkpoint(&request(0, &[], &bob)),
        Err(WitnessError::Conflict(10))
    );
    // The same size with another root.
    assert_eq!(
        w.add_checkpoint(&request(10, &[], &bob)),
        Err(WitnessError::Conflict(10))
    );
    // Bob's tree grown, with a genuine proof from Bob's own size 10: it
    // does not extend what the witness cosigned.
    for i in 10..15 {
        shown_to_bob
            .append(format!("bob {i}").into_bytes())
            .expect("append");
    }
    let proof = shown_to_bob.consistency_proof(10, 15).expect("proof");
    let e = w
        .add_checkpoint(&request(10, &proof, &note_of(&key, &shown_to_bob)))
        .expect_err("refused");
    assert!(matches!(e, WitnessError::BadProof(_)), "{e}");
    // Alice's tree, grown honestly, is cosigned.
    for i in 10..15 {
        shown_to_alice
            .append(format!("alice {i}").into_bytes())
            .expect("append");
    }
    let proof = shown_to_alice.consistency_proof(10, 15).expect("proof");
    let line = w
        .add_checkpoint(&request(10, &proof, &note_of(&key, &shown_to_alice)))
        .expect("cosigned");
    assert!(line.starts_with("— witness.test/w "), "{line}");
    assert_eq!(
        w.latest("split.test/log").expect("state"),
        Some((15, shown_to_alice.head().root))
    );
}

/// A raw HTTP POST: status, content type and body.
fn post(addr: &str, path: &str, body: &[u8]) -> (u16, String, String) {
    let mut t = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        t,
        "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .expect("write");
    t.write_all(body).expect("body");
    let mut raw = String::new();
    t.read_to_string(&mut raw).expect("read");
    let (head, body) = raw.split_once("\r\n\r\n").expect("headers");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    let ct = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_default();
    (status, ct, body.to_owned())
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").to_string()
}

fn spawn_witness(key_file: &str, state: &str, log_vkey: &str, addr: &str) -> std::process::Child {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_ledger"))
        .args(["witness", "serve", "--key", key_file, "--state-dir", state])
        .args(["--log", log_vkey, "--listen", addr])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("witness");
    let up = within_30s(|| std::net::TcpStream::connect(addr).is_ok());
    assert!(up, "the witness did not start");
    child
}

#[test]
fn a_witness_killed_and_restarted_keeps_its_state() {
    let dir = tempfile::tempdir().expect("dir");
    let key_file = dir.path().join("witness.key");
    let key_file = key_file.to_str().expect("utf-8");
    let out = run_ledger(&[
        "witness",
        "keygen",
        "--name",
        "witness.test/w",
        "--out",
        key_file,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let state = dir.path().join("state");
    let state = state.to_str().expect("utf-8");
    let key = LogKey::from_seed("restart.test/log", [6; 32]).expect("key");
    let (_d, log) = raw_log("entry", 7);
    let addr = free_addr();
    let mut w = spawn_witness(key_file, state, key.verifier_key(), &addr);
    let (status, _, body) = post(
        &addr,
        "/add-checkpoint",
        &request(0, &[], &note_of(&key, &log)),
    );
    assert_eq!(status, 200, "{body}");
    // SIGKILL, then a new process on the same state.
    w.kill().expect("kill");
    w.wait().expect("wait");
    let addr = free_addr();
    let mut w = spawn_witness(key_file, state, key.verifier_key(), &addr);
    log.append(b"entry 7".to_vec()).expect("append");
    let (status, ct, body) = post(
        &addr,
        "/add-checkpoint",
        &request(0, &[], &note_of(&key, &log)),
    );
    assert_eq!(
        (status, ct.as_str(), body.as_str()),
        (409, "text/x.tlog.size", "7\n")
    );
    let proof = log.consistency_proof(7, 8).expect("proof");
    let (status, _, body) = post(
        &addr,
        "/add-checkpoint",
        &request(7, &proof, &note_of(&key, &log)),
    );
    assert_eq!(status, 200, "{body}");
    // The protocol's other answers, through HTTP.
    let (status, ct, _) = post(&addr, "/add-checkpoint", b"old 0\n");
    assert_eq!((status, ct.as_str()), (400, "application/problem+json"));
    let stranger = LogKey::from_seed("other.test/log", [7; 32]).expect("key");
    let (status, _, _) = post(
        &addr,
        "/add-checkpoint",
        &request(0, &[], &note_of(&stranger, &log)),
    );
    assert_eq!(status, 404);
    let mut bad = proof.clone();
    bad[0].0[0] ^= 1;
    log.append(b"entry 8".to_vec()).expect("append");
    let (status, _, _) = post(
        &addr,
        "/add-checkpoint",
        &request(8, &bad, &note_of(&key, &log)),
    );
    assert_eq!(status, 422);
    w.kill().expect("kill");
    w.wait().expect("wait");
}

/// An in-process witness on a free port; the thread serves until the test ends.
fn serve_witness(name: &str, seed: u8, log_vkey: &str) -> (String, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("state");
    let key = CosignerKey::from_seed(name, [seed; 32]).expect("key");
    let vkey = key.verifier_key();
    let w = Arc::new(Witness::open(key, &[log_vkey.to_owned()], dir.path()).expect("witness"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        rt.block_on(async move {
            let _ = axum::serve(listener, w.router()).await;
        })
    });
    (url, vkey, dir)
}

#[test]
fn a_server_with_witnesses_serves_only_cosigned_checkpoints() {
    // The log key is made before the server so that the witnesses know it.
    let data = tempfile::tempdir().expect("data");
    let init = api::init::init(
        data.path(),
        "witnessed.test/log",
        "operator@test",
        None,
        None,
    )
    .expect("init");
    let vkey = init.log_key.verifier_key().to_owned();
    let (u0, v0, _s0) = serve_witness("witness.test/w0", 20, &vkey);
    let (u1, v1, _s1) = serve_witness("witness.test/w1", 21, &vkey);
    let policy = format!(
        "log {vkey}\nwitness w0 {v0} {u0}\nwitness w1 {v1} {u1}\ngroup both all w0 w1\nquorum both\n"
    );
    let policy_file = data.path().join("policy");
    std::fs::write(&policy_file, &policy).expect("policy");
    let pf = policy_file.clone();
    let s = TestServer::start_on(data, init.log_key, init.operator, move |c| {
        c.witness_policy = Some(pf);
        c.witness_interval_secs = 1;
        // No state commitment may grow the log behind the test's back.
        c.projection_save_secs = 3600;
    });
    let c = s.client();
    let p = Policy::parse(&policy).expect("policy");
    let cosigned_at = |size: u64| {
        c.get("/checkpoint").ok().is_some_and(|r| {
            r.status == 200
                && p.open_checkpoint(&r.body, &vkey)
                    .is_ok_and(|w| w.checkpoint.size == size && w.cosigned.len() == 2)
        })
    };
    seed(&s, &c);
    let size = s.state.events.ledger().head().size;
    assert!(within_30s(|| cosigned_at(size)), "never cosigned at {size}");
    // The log grows: the witnesses are sent a consistency proof and cosign again.
    let mut poster = s.poster(&c);
    poster
        .post(
            "harness",
            events::model::Event::ScoreRecorded(testkit::world::score("case-2", 0.5)),
        )
        .expect("score");
    assert!(
        within_30s(|| cosigned_at(size + 1)),
        "never cosigned at {}",
        size + 1
    );
    // `/checkpoint` serves the cosigned note before the gauge is set.
    assert!(
        within_30s(|| common::metric(&c, "ledger_witnessed_size") == (size + 1) as f64),
        "ledger_witnessed_size never reached {}",
        size + 1
    );

    // An independent Ed25519 implementation verifies each cosignature.
    let note = c.get("/checkpoint").expect("checkpoint").text();
    let script = r#"
import base64, hashlib, sys
from nacl.signing import VerifyKey
note, vkeys = sys.argv[1], sys.argv[2:]
text, _, sigs = note.rpartition("\n\n")
text += "\n"
for vk in vkeys:
    name, _, key = vk.split("+", 2)
    raw = base64.b64decode(key)
    assert raw[0] == 4, "a cosigner key is type 0x04"
    line = next(l for l in sigs.splitlines() if l.startswith("\u2014 " + name + " "))
    blob = base64.b64decode(line.split(" ")[2])
    assert blob[:4] == hashlib.sha256(name.encode() + b"\n\x04" + raw[1:]).digest()[:4], "key ID"
    ts = int.from_bytes(blob[4:12], "big")
    msg = f"cosignature/v1\ntime {ts}\n".encode() + text.encode()
    VerifyKey(raw[1:]).verify(msg, blob[12:])
print("verified", len(vkeys))
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script, &note, &v0, &v1])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "PyNaCl refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // `ledger audit --policy` passes with this policy and fails with one
    // that needs a witness that never cosigned.
    let dir = tempfile::tempdir().expect("dir");
    let trusted = dir.path().join("trusted");
    let pfile = policy_file.to_str().expect("utf-8");
    let audit = |policy: &str| {
        run_ledger(&[
            "audit",
            "--server",
            &s.base,
            "--key",
            &vkey,
            "--init",
            "--quiet",
            "--trusted",
            trusted.to_str().expect("utf-8"),
            "--policy",
            policy,
        ])
    };
    let out = audit(pfile);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("cosigned by 2"), "{text}");
    let absent = CosignerKey::from_seed("witness.test/absent", [22; 32]).expect("key");
    let stricter = dir.path().join("stricter");
    std::fs::write(
        &stricter,
        format!(
            "witness w0 {v0}\nwitness w2 {}\ngroup g all w0 w2\nquorum g\n",
            absent.verifier_key()
        ),
    )
    .expect("write");
    let out = audit(stricter.to_str().expect("utf-8"));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("witness policy"));

    // A receipt's entry proven into the witnessed tree; one the witnesses
    // have not seen yet is not, and the stricter policy refuses the tree.
    let proof = |index: u64, policy: &str| {
        run_ledger(&[
            "proof",
            "--server",
            &s.base,
            "--key",
            &vkey,
            "--index",
            &index.to_string(),
            "--policy",
            policy,
        ])
    };
    let out = proof(size, pfile);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("cosigned by witness.test/w0, witness.test/w1"),
        "{text}"
    );
    let out = proof(size + 1, pfile);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not in the witnessed tree"));
    let out = proof(0, stricter.to_str().expect("utf-8"));
    assert_eq!(out.status.code(), Some(1));

    // An offline bundle whose tree is proven a prefix of a witnessed one.
    let bundle = dir.path().join("bundle.json");
    let b = bundle.to_str().expect("utf-8");
    let out = run_ledger(&[
        "bundle",
        "--server",
        &s.base,
        "--task-class",
        testkit::world::TASK_CLASS,
        "--out",
        b,
        "--policy",
        pfile,
        "--key",
        &vkey,
        "--wait-secs",
        "30",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verify =
        |policy: &str| run_ledger(&["verify-bundle", b, "--key", &vkey, "--policy", policy]);
    let out = verify(pfile);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("cosigned by witness.test/w0, witness.test/w1"),
        "{text}"
    );
    assert_eq!(
        verify(stricter.to_str().expect("utf-8")).status.code(),
        Some(1)
    );
    // The Python package, an implementation of its own, agrees.
    let python = |file: &str| {
        std::process::Command::new("python3")
            .args([
                "-m",
                "evidence_ledger",
                "verify-bundle",
                file,
                "--key",
                &vkey,
            ])
            .args(["--policy", pfile])
            .env(
                "PYTHONPATH",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../clients/python/src"),
            )
            .output()
            .expect("python3")
    };
    let out = python(b);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("a prefix of the witnessed tree"));
    // Its witnessed part must prove the body's tree a prefix: one proof hash
    // too many (re-encoded canonically, so only that check can catch it).
    let bytes = std::fs::read(&bundle).expect("bundle");
    let mut v: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
    v["witnessed"]["consistency"] = serde_json::json!(["ab".repeat(32)]);
    let forged = events::canonical::encode(&events::canonical::from_json(&v).expect("canonical"));
    let e = verifier::check::verify_bundle_with(&forged, std::slice::from_ref(&vkey), Some(&p))
        .expect_err("refused");
    assert!(format!("{e:#}").contains("not proven a prefix"), "{e:#}");
    // A bundle with no witnessed part does not meet a policy.
    let plain = dir.path().join("plain.json");
    let out = run_ledger(&[
        "bundle",
        "--server",
        &s.base,
        "--task-class",
        testkit::world::TASK_CLASS,
        "--out",
        plain.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    let out = run_ledger(&[
        "verify-bundle",
        plain.to_str().expect("utf-8"),
        "--key",
        &vkey,
        "--policy",
        pfile,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("has none"));
    assert_eq!(
        python(plain.to_str().expect("utf-8")).status.code(),
        Some(1)
    );

    // Restarted while its witnesses are unreachable, the server serves the
    // witnessed checkpoint it saved, at once.
    let served_before = c.get("/checkpoint").expect("checkpoint").body;
    let key_text = std::fs::read_to_string(s.path().join("log.key")).expect("key");
    let operator = s.operator.clone();
    let data = s.stop();
    let unreachable = dir.path().join("unreachable");
    let dead = "http://127.0.0.1:9";
    std::fs::write(
        &unreachable,
        format!(
            "witness w0 {v0} {dead}\nwitness w1 {v1} {dead}\ngroup both all w0 w1\nquorum both\n"
        ),
    )
    .expect("policy");
    let s = TestServer::start_on(
        data,
        anchors::LogKey::from_private(&key_text).expect("key"),
        operator,
        move |c| {
            c.witness_policy = Some(unreachable);
            c.witness_interval_secs = 1;
        },
    );
    let r = s.client().get("/checkpoint").expect("checkpoint");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.body, served_before);
}
