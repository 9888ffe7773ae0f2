//! The HTTP API against a real server on loopback: every route, every API
//! error code, hostile input, and concurrent writers.

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;

use common::{seed, TestServer};
use verifier::check::{check_projection, check_receipt};
use verifier::client::Client;
use verifier::wire::{
    ConsistencyProof, EntryPage, EntryView, InclusionProof, LogInfo, ProjectionResponse,
    RecommendationResponse, WriteReceipt,
};

use events::model::*;
use testkit::world::{run, score, task_class, TASK_CLASS};

fn problem(r: &verifier::client::Reply, status: u16, code: &str) {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(r.code().as_deref(), Some(code), "{}", r.text());
}

#[test]
fn every_route_answers_and_every_proof_verifies() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    s.wait_verified();
    assert_eq!(c.get("/healthz").expect("healthz").status, 200);
    assert_eq!(c.get("/readyz").expect("readyz").status, 200);
    let _ = c.get("/v1/entries/999999");
    let m = c.get("/metrics").expect("metrics").text();
    assert!(
        m.contains("ledger_tree_size")
            && m.contains("ledger_append_latency_seconds")
            && m.contains("ledger_http_requests_in_flight 1")
            && m.contains("# TYPE ledger_appends counter")
            && m.contains("ledger_appends_total ")
            && m.contains("ledger_commit_batches_total "),
        "{m}"
    );
    // The JSON Schemas writers sign against, as docs/schemas/ publishes them.
    let schema: serde_json::Value = c
        .get_json("/v1/schemas/events/score.recorded")
        .expect("body schema");
    let published: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/schemas/events/score.recorded.json"
        ))
        .expect("docs/schemas"),
    )
    .expect("json");
    assert_eq!(schema, published);
    let payload: serde_json::Value = c.get_json("/v1/schemas/events").expect("payload schema");
    assert!(payload["properties"]["event"].is_object(), "{payload}");
    problem(
        &c.get("/v1/schemas/events/score.invented").expect("r"),
        404,
        "not_found",
    );
    // Per route template (never the path itself), the build and the
    // process.
    assert!(
        m.contains(
            "ledger_http_requests_total{method=\"GET\",route=\"/v1/entries/{index}\",status=\"404\"} 1"
        ) && m.contains("ledger_http_request_duration_seconds_count{method=\"GET\",route=\"/readyz\"}")
            && m.contains("ledger_build_info{version=\"")
            && m.contains("process_resident_memory_bytes ")
            && m.contains("process_cpu_seconds_total ")
            && m.contains("process_open_fds "),
        "{m}"
    );
    assert!(
        m.contains("ledger_problem_responses_total{code=\"not_found\"}"),
        "{m}"
    );

    let doc: serde_json::Value = c.get_json("/openapi.json").expect("openapi");
    assert!(doc["openapi"].as_str().expect("version").starts_with("3.1"));
    for path in [
        "/v1/events",
        "/v1/events/batch",
        "/v1/recommendations",
        "/v1/entries",
        "/v1/entries/{index}",
        "/v1/entries/by-id/{id}",
        "/v1/proofs/inclusion",
        "/v1/proofs/consistency",
        "/checkpoint",
        "/v1/log",
        "/v1/log/key",
        "/v1/task-classes",
        "/v1/task-classes/{name}",
        "/healthz",
        "/readyz",
        "/metrics",
        "/openapi.json",
    ] {
        assert!(doc["paths"].get(path).is_some(), "OpenAPI lacks {path}");
    }
    let problem_doc = doc["components"]["schemas"]["Problem"]["description"]
        .as_str()
        .expect("codes");
    for code in events::RejectCode::ALL {
        assert!(
            problem_doc.contains(code.as_str()),
            "OpenAPI lacks code {}",
            code.as_str()
        );
    }

    let info: LogInfo = c.get_json("/v1/log").expect("log");
    assert_eq!(info.verifier_key, s.vkey);
    assert_eq!(c.get("/v1/log/key").expect("key").text().trim(), s.vkey);
    let cp = c.get("/checkpoint").expect("checkpoint");
    let cp = anchors::open_checkpoint(&cp.body, &s.vkey).expect("signed checkpoint");
    assert_eq!(cp.size, info.tree_size);

    // Writes: 201, then 200 with the same entry for a re-post.
    let mut p = s.poster(&c);
    let env = p.envelope(
        "harness",
        Event::RunFinished(RunFinished {
            run_id: "run-1".into(),
        }),
    );
    let first = c.post_json("/v1/events", &env).expect("post");
    assert_eq!(first.status, 201);
    // Written by hand, as serde would write a `WriteReceipt`.
    let first: WriteReceipt = as_serde_writes(&first.body);
    check_receipt(&first, &s.vkey).expect("receipt verifies");
    let again = c.post_json("/v1/events", &env).expect("re-post");
    assert_eq!(again.status, 200);
    let again: WriteReceipt = as_serde_writes(&again.body);
    assert!(again.existing && again.index == first.index);
    check_receipt(&again, &s.vkey).expect("re-post receipt verifies");

    // Reads.
    let e: EntryView = c
        .get_json(&format!("/v1/entries/{}", first.index))
        .expect("entry");
    assert_eq!(
        (e.kind.as_str(), e.leaf_hash.as_str()),
        ("run.finished", first.leaf_hash.as_str())
    );
    let by_id: EntryView = c
        .get_json(&format!("/v1/entries/by-id/{}", e.id))
        .expect("by id");
    assert_eq!(by_id.index, e.index);
    let page: EntryPage = c.get_json("/v1/entries?start=0&limit=5").expect("page");
    assert_eq!((page.entries.len(), page.next), (5, Some(5)));

    // Proofs by index and by leaf hash, and consistency.
    let size = c.get_json::<LogInfo>("/v1/log").expect("log").tree_size;
    let inc: InclusionProof = c
        .get_json("/v1/proofs/inclusion?index=3")
        .expect("inclusion");
    let cp = anchors::open_checkpoint(inc.checkpoint.as_bytes(), &s.vkey).expect("cp");
    let h = |x: &str| ledger::Hash(hex::decode(x).expect("hex").try_into().expect("32"));
    ledger::merkle::verify_inclusion(
        &h(&inc.leaf_hash),
        3,
        cp.size,
        &inc.proof.iter().map(|x| h(x)).collect::<Vec<_>>(),
        &cp.root,
    )
    .expect("verifies");
    let by_leaf: InclusionProof = c
        .get_json(&format!(
            "/v1/proofs/inclusion?leaf_hash={}&tree_size={size}",
            inc.leaf_hash
        ))
        .expect("by leaf");
    assert_eq!(by_leaf.index, 3);
    let cons: ConsistencyProof = c
        .get_json("/v1/proofs/consistency?first=4")
        .expect("consistency");
    ledger::merkle::verify_consistency(
        4,
        &h(&cons.first_root),
        cons.second,
        &h(&cons.second_root),
        &cons.proof.iter().map(|x| h(x)).collect::<Vec<_>>(),
    )
    .expect("consistent");

    // Projections with proof bundles, and a recommendation.
    let classes: Vec<serde_json::Value> = c.get_json("/v1/task-classes").expect("classes");
    assert_eq!(classes[0]["task_class"], TASK_CLASS);
    let proj: ProjectionResponse = as_serde_writes(
        &c.get(&format!("/v1/task-classes/{TASK_CLASS}"))
            .expect("projection")
            .body,
    );
    assert_eq!(
        check_projection(&proj, &s.vkey).expect("bundle verifies"),
        3
    );
    // The numbers alone: the same view at the same signed checkpoint,
    // without the evidence entries and their proofs.
    let numbers: verifier::wire::ViewResponse = c
        .get_json(&format!("/v1/task-classes/{TASK_CLASS}/view"))
        .expect("view");
    // Both at the same tree, each at its own request's time.
    let timeless = |v: &projections::TaskClassView| {
        let mut j = serde_json::to_value(v).expect("json");
        for time in ["now_micros", "window_start_micros"] {
            j.as_object_mut().expect("object").remove(time);
        }
        j
    };
    assert_eq!(timeless(&numbers.view), timeless(&proj.view));
    assert_eq!(
        (numbers.tree_size, &numbers.root),
        (proj.tree_size, &proj.root)
    );
    let (cp, _) =
        anchors::open_checkpoint_any(numbers.checkpoint.as_bytes(), std::slice::from_ref(&s.vkey))
            .expect("the view's checkpoint is signed");
    assert_eq!(
        (cp.size, ledger::hash::to_hex(&cp.root)),
        (proj.tree_size, proj.root.clone())
    );
    let req = p.envelope(
        "promotion-gate",
        Event::PromotionRequested(PromotionRequested {
            task_class: TASK_CLASS.into(),
        }),
    );
    let r = c.post_json("/v1/recommendations", &req).expect("recommend");
    assert_eq!(r.status, 201, "{}", r.text());
    let rec: RecommendationResponse = as_serde_writes(&r.body);
    check_receipt(&rec.recommendation, &s.vkey).expect("recommendation receipt");
    check_projection(&rec.projection, &s.vkey).expect("recommendation bundle");
    assert_eq!(
        rec.projection.view.recommendation.recommended_tier,
        Tier::Silver
    );
    assert!(rec.projection.view.recommendation.requires_human_approval);
    assert_eq!(
        c.post_json("/v1/recommendations", &req)
            .expect("again")
            .status,
        200
    );

    // Request ids on every response.
    let raw = raw_request(&s, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: trace-me-42\r\nConnection: close\r\n\r\n");
    assert!(
        raw.to_ascii_lowercase()
            .contains("x-request-id: trace-me-42"),
        "{raw}"
    );
    let raw = raw_request(
        &s,
        "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(raw.to_ascii_lowercase().contains("x-request-id: "), "{raw}");
}

/// The answer `body` read as a `T`, once it is exactly the bytes serde
/// writes for that `T` (the server writes its projection answers directly,
/// not through serde).
fn as_serde_writes<T: serde::Serialize + serde::de::DeserializeOwned>(body: &[u8]) -> T {
    let t: T = serde_json::from_slice(body).expect("json");
    let again = serde_json::to_vec(&t).expect("serialize");
    assert!(
        again == body,
        "the answer is not what serde writes:\n{}\n{}",
        String::from_utf8_lossy(body),
        String::from_utf8_lossy(&again)
    );
    t
}

fn raw_request(s: &TestServer, req: &str) -> String {
    let mut t = TcpStream::connect(s.addr).expect("connect");
    t.write_all(req.as_bytes()).expect("write");
    let mut out = String::new();
    let _ = t.read_to_string(&mut out);
    out
}

#[test]
fn every_api_error_code_is_a_problem_document() {
    let s = TestServer::start(|c| c.max_body_bytes = 64 * 1024);
    let c = s.client();
    seed(&s, &c);
    s.wait_verified();
    problem(&c.get("/v1/nope").expect("r"), 404, "not_found");
    problem(&c.get("/v1/entries/999999").expect("r"), 404, "not_found");
    problem(
        &c.get("/v1/entries/by-id/no-such-envelope").expect("r"),
        404,
        "not_found",
    );
    problem(
        &c.get("/v1/task-classes/no-such-class").expect("r"),
        404,
        "not_found",
    );
    problem(
        &c.get("/v1/task-classes/no-such-class/view").expect("r"),
        404,
        "not_found",
    );
    problem(
        &c.get("/v1/proofs/inclusion?leaf_hash=".to_owned().as_str())
            .expect("r"),
        400,
        "invalid_parameter",
    );
    problem(
        &c.post_json("/checkpoint", b"{}").expect("r"),
        405,
        "method_not_allowed",
    );
    problem(
        &c.get("/v1/entries/abc").expect("r"),
        400,
        "invalid_parameter",
    );
    problem(
        &c.get("/v1/entries?limit=0").expect("r"),
        400,
        "invalid_parameter",
    );
    problem(
        &c.get("/v1/proofs/inclusion?index=1&tree_size=999999")
            .expect("r"),
        400,
        "invalid_parameter",
    );
    problem(
        &c.get("/v1/proofs/inclusion?index=1&leaf_hash=00")
            .expect("r"),
        400,
        "invalid_parameter",
    );
    problem(
        &c.get("/v1/proofs/consistency?first=9&second=3").expect("r"),
        400,
        "invalid_parameter",
    );
    let wrong_type = raw_request(&s, "POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
    assert!(
        wrong_type.starts_with("HTTP/1.1 415") && wrong_type.contains("unsupported_media_type"),
        "{wrong_type}"
    );
    problem(
        &c.post_json("/v1/events", &vec![b' '; 70 * 1024])
            .expect("r"),
        413,
        "payload_too_large",
    );
    // Event rejections over HTTP carry their code, field and status.
    let mut p = s.poster(&c);
    let mut bad = score("case-1", 0.9);
    bad.score
        .breakdown
        .insert("self_reported_quality".into(), 1.0);
    let r = p
        .post_refused("harness", Event::ScoreRecorded(bad))
        .expect("refused");
    problem(&r, 422, "breakdown_key_banned");
    assert_eq!(
        r.json::<serde_json::Value>().expect("json")["field"],
        "event.body.score.breakdown.self_reported_quality"
    );
    problem(
        &p.post_refused(
            "intruder",
            Event::RunFinished(RunFinished {
                run_id: "run-1".into(),
            }),
        )
        .expect("r"),
        401,
        "unknown_signer",
    );
    problem(
        &p.post_refused("harness", Event::TaskClassRegistered(task_class("x")))
            .expect("r"),
        403,
        "role_not_permitted",
    );
    let r = p
        .post_refused(
            "promotion-gate",
            Event::TierApply(TierApply {
                task_class: TASK_CLASS.into(),
                to: Tier::Gold,
            }),
        )
        .expect("r");
    problem(&r, 403, "promotion_must_be_human_authorized");
    assert!(
        r.json::<serde_json::Value>().expect("json")["recorded_index"].is_u64(),
        "the refusal was recorded"
    );

    // Read token.
    let t = TestServer::start(|c| c.read_token = Some("s3cret".into()));
    problem(
        &t.client().get("/v1/log").expect("r"),
        401,
        "read_token_required",
    );
    assert_eq!(
        Client::new(&t.base, Some("s3cret".into()))
            .get("/v1/log")
            .expect("r")
            .status,
        200
    );
    assert_eq!(
        t.client().get("/healthz").expect("r").status,
        200,
        "health stays open"
    );
    // A HEAD is a read too: without the token it learns nothing, not even
    // whether the entry exists or how long the answer is.
    for path in ["/v1/log", "/v1/entries/0", "/checkpoint"] {
        use std::io::{Read as _, Write as _};
        let addr = t.base.trim_start_matches("http://");
        let mut conn = std::net::TcpStream::connect(addr).expect("connect");
        write!(
            conn,
            "HEAD {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut answer = String::new();
        conn.read_to_string(&mut answer).expect("read");
        assert!(
            answer.starts_with("HTTP/1.1 401"),
            "HEAD {path} without the token: {answer}"
        );
    }

    // Timeout: a request whose body never finishes arriving. (A limit of
    // 0 ms is not a sure timeout: the first poll of a write can find it
    // already committed on a loaded machine, and then it succeeds.)
    let slow = TestServer::start(|c| c.request_timeout_ms = 200);
    let mut stalled = TcpStream::connect(slow.addr).expect("connect");
    stalled
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .expect("read timeout");
    stalled.write_all(b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{").expect("write");
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&answer).contains("}") {
        match stalled.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("\"code\":\"timeout\""), "{answer}");
    drop(stalled);

    // Overloaded: one slot, held by a client that never finishes its body.
    // Probe only once the held request has the slot: a probe sent earlier
    // can take the slot first and leave the held request the 503.
    let busy = TestServer::start(|c| c.max_concurrent_requests = 1);
    let mut hold = TcpStream::connect(busy.addr).expect("connect");
    hold.write_all(b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{").expect("write");
    assert!(
        common::within_30s(|| busy.state.requests_in_flight() == 1),
        "the held request never took the slot"
    );
    let r = busy.client().get("/v1/log").expect("r");
    problem(&r, 503, "overloaded");
    drop(hold);
}

#[test]
fn a_log_that_fails_verification_serves_no_numbers() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    s.wait_verified();
    // An attacker edits a middle entry on disk.
    let s = s.restart(|dir| testkit::RawDisk::open(dir).set_leaf(5, b"{\"forged\":true}"));
    let c = s.client();
    let mut code = None;
    for _ in 0..3000 {
        let r = c.get(&format!("/v1/task-classes/{TASK_CLASS}")).expect("r");
        code = r.code();
        if code.as_deref() == Some("log_unverified") {
            assert_eq!(r.status, 503);
            assert!(
                !r.text().contains("mean"),
                "numbers served from an unverified log"
            );
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(code.as_deref(), Some("log_unverified"));
    problem(&c.get("/readyz").expect("r"), 503, "log_unverified");
    problem(&c.get("/v1/entries/5").expect("r"), 503, "log_corrupt");
}

#[test]
fn hostile_input_gets_4xx_problems_never_5xx() {
    let s = TestServer::start(|c| c.max_body_bytes = 256 * 1024);
    let c = s.client();
    s.wait_verified();
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("malformed json", b"{\"payload\": ".to_vec()),
        ("not an envelope", b"[1,2,3]".to_vec()),
        ("deep nesting", deep.into_bytes()),
        (
            "invalid utf-8",
            vec![b'{', b'"', 0xff, 0xfe, b'"', b':', b'1', b'}'],
        ),
        ("empty", Vec::new()),
        ("huge", vec![b'x'; 300 * 1024]),
        ("nul bytes", vec![0u8; 64]),
    ];
    for (what, body) in cases {
        let r = c.post_json("/v1/events", &body).expect("post");
        assert!(
            (400..500).contains(&r.status),
            "{what}: {} {}",
            r.status,
            r.text()
        );
        assert!(
            r.code().is_some(),
            "{what}: not a problem document: {}",
            r.text()
        );
    }
    for path in [
        "/v1/entries/99999999999999999999999999",
        "/v1/entries/-1",
        "/v1/entries/18446744073709551615",
        "/v1/entries?start=18446744073709551615&limit=1000",
        "/v1/entries?limit=99999999999",
        "/v1/proofs/inclusion?index=18446744073709551615",
        "/v1/proofs/inclusion?index=0&tree_size=18446744073709551615",
        "/v1/proofs/consistency?first=18446744073709551615",
        "/v1/proofs/consistency?first=abc",
        "/v1/entries/by-id/%FF%FE",
        "/v1/task-classes/%00",
    ] {
        let r = c.get(path).expect("get");
        assert!(
            (200..500).contains(&r.status) && r.status != 200 || path.contains("start="),
            "{path}: {} {}",
            r.status,
            r.text()
        );
        if r.status >= 400 {
            assert!(r.code().is_some(), "{path}: not a problem document");
        }
    }
    assert_eq!(c.get("/healthz").expect("alive").status, 200);
}

#[test]
fn concurrent_writers_32_by_500() {
    const WRITERS: usize = 32;
    const EACH: usize = 500;
    let s = TestServer::start(|_| {});
    let c = s.client();
    let mut p = s.poster(&c);
    p.post(
        "operator",
        Event::TaskClassRegistered(task_class(TASK_CLASS)),
    )
    .expect("register");
    let mut names = Vec::new();
    for w in 0..WRITERS {
        let name = format!("harness-{w}");
        p.enrol(&name, Role::Harness).expect("enrol");
        names.push(name);
    }
    let base = s.base.clone();
    let vkey = s.vkey.clone();
    let operator = s.operator.clone();
    let handles: Vec<_> = names
        .into_iter()
        .map(|name| {
            let (base, vkey, operator) = (base.clone(), vkey.clone(), operator.clone());
            std::thread::spawn(move || {
                let client = Client::new(&base, None);
                let mut p = api::demo::Poster::new(&client, vkey, operator);
                (0..EACH)
                    .map(|i| {
                        let mut r = run(&format!("{name}-run-{i}"), Isolation::Microvm);
                        r.task_class = TASK_CLASS.into();
                        p.post(&name, Event::RunStarted(r))
                            .expect("write acknowledged")
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let receipts: Vec<WriteReceipt> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("writer"))
        .collect();
    assert_eq!(receipts.len(), WRITERS * EACH);
    // Every receipt's proof and checkpoint were checked by Poster::post.
    let mut indices: Vec<u64> = receipts.iter().map(|r| r.index).collect();
    indices.sort_unstable();
    let first = indices[0];
    for (k, i) in indices.iter().enumerate() {
        assert_eq!(*i, first + k as u64, "indices unique and dense");
    }
    // Checkpoints: one root per size, and each consistent with the final one.
    let mut by_size = std::collections::BTreeMap::new();
    for r in &receipts {
        let prev = by_size.insert(r.tree_size, r.root.clone());
        assert!(
            prev.is_none() || prev.as_ref() == Some(&r.root),
            "two roots for size {}",
            r.tree_size
        );
    }
    let last: LogInfo = c.get_json("/v1/log").expect("log");
    let h = |x: &str| ledger::Hash(hex::decode(x).expect("hex").try_into().expect("32"));
    let sizes: Vec<_> = by_size.iter().collect();
    for (size, root) in sizes.iter().step_by((sizes.len() / 150).max(1)) {
        let p: ConsistencyProof = c
            .get_json(&format!(
                "/v1/proofs/consistency?first={size}&second={}",
                last.tree_size
            ))
            .expect("proof");
        ledger::merkle::verify_consistency(
            **size,
            &h(root),
            last.tree_size,
            &h(&last.root),
            &p.proof.iter().map(|x| h(x)).collect::<Vec<_>>(),
        )
        .expect("an earlier checkpoint is consistent with the latest");
    }
}

/// The periodic save of derived state (projection checkpoint, event-state
/// snapshot) is whole-state work; an idle server must not repeat it.
#[test]
fn derived_state_is_saved_again_only_after_the_log_grows() {
    let s = TestServer::start(|_| {});
    // Nothing derived is saved before the background check has passed.
    s.wait_verified();
    let c = s.client();
    let mut p = s.poster(&c);
    p.enrol("harness", Role::Harness).expect("enrol");
    assert!(s.state.save_derived(), "the first save runs");
    assert!(!s.state.save_derived(), "nothing new: skipped");
    p.enrol("curator-a", Role::Curator).expect("enrol");
    assert!(s.state.save_derived(), "the log grew: saved");
    assert!(!s.state.save_derived());
}

/// The projection is loaded in the background on start, with the verify:
/// a restarted server takes a write before it is ready, and once ready
/// answers from its saved projection with that write folded in.
#[test]
fn a_restarted_server_takes_writes_at_once_and_answers_numbers_once_its_projection_is_loaded() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    s.wait_verified();
    let path = format!("/v1/task-classes/{TASK_CLASS}");
    let before: ProjectionResponse = c.get_json(&path).expect("projection");
    assert_eq!(before.view.scores_in_window, 3);
    // Stopping saves the projection checkpoint the restart loads.
    let s = s.restart(|_| {});
    let c = s.client();
    s.poster(&c)
        .post("harness", Event::ScoreRecorded(score("case-1", 0.5)))
        .expect("a write is taken whether or not the projection is loaded");
    s.wait_verified();
    let after: ProjectionResponse = c.get_json(&path).expect("projection");
    assert_eq!(after.view.scores_in_window, 4);
    // The stop committed the state (one entry) before the score landed.
    assert_eq!(after.view.tree_size, before.view.tree_size + 2);
    check_projection(&after, &s.vkey).expect("bundle verifies");
}

/// Once a start's background check has passed, the evidence of the task
/// classes' views has been read back once, and the log keeps it: the first
/// answer after a start does not read it from the log.
#[test]
fn a_start_reads_the_evidence_of_the_views_back_before_the_first_answer() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    s.wait_verified();
    let s = s.restart(|_| {});
    s.wait_verified();
    let log = s.state.events.ledger();
    assert!(
        common::within_30s(|| log.kept_entries() == 3),
        "the three scores the view cites are kept: {}",
        log.kept_entries()
    );
    let c = s.client();
    let p: ProjectionResponse = c
        .get_json(&format!("/v1/task-classes/{TASK_CLASS}"))
        .expect("projection");
    assert_eq!(p.evidence.len(), 3);
    assert_eq!(log.kept_entries(), 3, "the answer read nothing new");
}

/// `POST /v1/events/batch`: one result per envelope, in order, each what
/// `POST /v1/events` would have answered; every receipt is for its own
/// envelope and proven in the answer's one checkpoint. A body that is not a
/// batch is refused whole, and nothing is appended.
#[test]
fn a_batch_is_answered_envelope_by_envelope_in_one_checkpoint() {
    use verifier::wire::BatchResponse;
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    let mut p = s.poster(&c);
    let good = |p: &mut api::demo::Poster<'_>, id: &str| {
        p.envelope("harness", Event::RunStarted(run(id, Isolation::Microvm)))
    };
    let first = good(&mut p, "run-a");
    let unknown = p.envelope(
        "stranger",
        Event::RunFinished(RunFinished {
            run_id: "run-x".into(),
        }),
    );
    let items: Vec<Vec<u8>> = vec![
        first.clone(),
        unknown,
        b"42".to_vec(),
        first.clone(),
        good(&mut p, "run-b"),
    ];
    let body = format!(
        "[{}]",
        items
            .iter()
            .map(|e| String::from_utf8(e.clone()).expect("utf8"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let size_before = c.get_json::<LogInfo>("/v1/log").expect("log").tree_size;
    let r = c
        .post_json("/v1/events/batch", body.as_bytes())
        .expect("batch");
    assert_eq!(r.status, 200, "{}", r.text());
    let answer: BatchResponse = as_serde_writes(&r.body);
    let statuses: Vec<u16> = answer.results.iter().map(|i| i.status).collect();
    assert_eq!(statuses, [201, 401, 400, 200, 201]);
    assert_eq!(answer.appended, 2);
    let codes: Vec<Option<&str>> = answer
        .results
        .iter()
        .map(|i| i.problem.as_ref().map(|p| p.code.as_str()))
        .collect();
    assert_eq!(
        codes,
        [
            None,
            Some("unknown_signer"),
            Some("malformed_envelope"),
            None,
            None
        ]
    );
    let mut checker = verifier::check::ReceiptChecker::new(&s.vkey);
    for (item, env) in answer.results.iter().zip(&items) {
        if let Some(rc) = &item.receipt {
            checker
                .check(rc, Some(env))
                .expect("each receipt is for its own envelope");
            assert_eq!(
                rc.tree_size, answer.tree_size,
                "one checkpoint for the batch"
            );
        }
    }
    let receipts: Vec<&WriteReceipt> = answer
        .results
        .iter()
        .filter_map(|i| i.receipt.as_ref())
        .collect();
    assert_eq!(
        receipts[0].index, receipts[1].index,
        "a repeat names the first entry"
    );
    assert!(receipts[1].existing);
    assert_eq!(
        receipts[2].index,
        receipts[0].index + 1,
        "appended in order"
    );
    assert_eq!(
        c.get_json::<LogInfo>("/v1/log").expect("log").tree_size,
        size_before + 2
    );

    // Refused whole: not an array, empty, too many, not JSON.
    let many = format!("[{}]", vec!["{}"; api::server::MAX_BATCH + 1].join(","));
    for bad in ["{}", "[]", many.as_str(), "[1,", "[{}] trailing"] {
        problem(
            &c.post_json("/v1/events/batch", bad.as_bytes()).expect("r"),
            400,
            "invalid_parameter",
        );
    }
    assert_eq!(
        c.get_json::<LogInfo>("/v1/log").expect("log").tree_size,
        size_before + 2,
        "a refused batch appends nothing"
    );
}
