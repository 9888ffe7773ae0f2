//! Completeness by replay against a server that leaves things out. Every
//! lie here keeps each cited entry real and proven and the stated held-out
//! statistics consistent with what is cited, so the evidence check (and
//! the plain audit) passes; only the replay of the whole log catches it.

mod common;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use common::{seed, TestServer};
use events::envelope::case_retire_statement;
use events::model::*;
use projections::evidence::{held_out_from_evidence, Cited, Window};
use verifier::audit::{audit_projections, AuditError, AuditFailure, ReplayRules};
use verifier::client::Client;
use verifier::replay::Replica;
use verifier::wire::{InclusionProof, ProjectionResponse};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Lie {
    /// The truth, passed through.
    None,
    /// A case's latest (lower) score left out of the evidence.
    OmittedScore,
    /// An older, higher score cited in place of a case's latest.
    OlderScore,
    /// A block-severity failure left out of the counts.
    DroppedBlockFailure,
    /// A retired case still counted as active.
    HiddenRetirement,
    /// A window of one day stated instead of the agreed thirty.
    OtherSettings,
    /// A time ten days ahead stated, which moves old failures out of the
    /// window.
    FutureTime,
    /// A task class left off the list of task classes.
    HiddenClass,
    /// A field the typed view does not have, added to the view served
    /// (what a reader of the raw JSON would see, and nothing checks).
    ExtraField,
}

struct Proxy {
    upstream: String,
    lie: Lie,
}

/// One cited evidence entry: index, leaf, inclusion proof, case, score.
type Cite = (u64, Vec<u8>, Vec<String>, String, f64);

/// Rewrites a projection's evidence to `cited` (index, leaf, proof) and
/// restates the held-out statistics from exactly those leaves, as a careful
/// liar would: every cited entry is real and proven.
fn restate(p: &mut ProjectionResponse, cited: Vec<Cite>) {
    let hashes: Vec<ledger::Hash> = cited.iter().map(|c| ledger::leaf_hash(&c.1)).collect();
    let leaves: Vec<Cited<'_>> = cited
        .iter()
        .zip(&hashes)
        .map(|((index, leaf, _, case, score), leaf_hash)| Cited {
            index: *index,
            leaf,
            leaf_hash,
            case_id: Some(case),
            score: Some(*score),
        })
        .collect();
    p.view.held_out = held_out_from_evidence(
        &p.view.task_class,
        &leaves,
        &p.view.settings,
        &Window {
            start_micros: Some(p.view.window_start_micros),
        },
    )
    .expect("restated statistics");
    p.view.evidence = cited
        .iter()
        .map(
            |(index, leaf, _, case, score)| projections::fold::Evidence {
                index: *index,
                leaf_hash: ledger::hash::to_hex(&ledger::leaf_hash(leaf)),
                case_id: case.clone(),
                score: *score,
            },
        )
        .collect();
    p.evidence = cited
        .into_iter()
        .map(|(index, leaf, proof, _, _)| verifier::wire::EvidenceProof {
            index,
            leaf_hash: ledger::hash::to_hex(&ledger::leaf_hash(&leaf)),
            leaf: B64.encode(&leaf),
            proof,
        })
        .collect();
}

fn lie_about(upstream: &Client, lie: Lie, mut p: ProjectionResponse) -> ProjectionResponse {
    let cited: Vec<Cite> = p
        .evidence
        .iter()
        .zip(&p.view.evidence)
        .map(|(e, v)| {
            let leaf = B64.decode(&e.leaf).expect("leaf");
            (e.index, leaf, e.proof.clone(), v.case_id.clone(), v.score)
        })
        .collect();
    match lie {
        Lie::None => {}
        Lie::OmittedScore => {
            let kept = cited
                .into_iter()
                .filter(|c| c.3 != events::sample::case_handle("case-1"))
                .collect();
            restate(&mut p, kept);
        }
        Lie::OlderScore => {
            // case-1's first score (0.95, in run-1), proven in this tree.
            let older = (0..p.tree_size)
                .find(|&i| {
                    let e: verifier::wire::EntryView = upstream
                        .get_json(&format!("/v1/entries/{i}"))
                        .expect("entry");
                    e.kind == "score.recorded"
                        && e.payload["event"]["body"]["case_id"]
                            == events::sample::case_handle("case-1").as_str()
                })
                .expect("an older score of case-1");
            let e: verifier::wire::EntryView = upstream
                .get_json(&format!("/v1/entries/{older}"))
                .expect("entry");
            let proof: InclusionProof = upstream
                .get_json(&format!(
                    "/v1/proofs/inclusion?index={older}&tree_size={}",
                    p.tree_size
                ))
                .expect("proof");
            let swapped = cited
                .into_iter()
                .map(|c| {
                    if c.3 == events::sample::case_handle("case-1") {
                        (
                            older,
                            B64.decode(&e.leaf).expect("leaf"),
                            proof.proof.clone(),
                            c.3,
                            0.95,
                        )
                    } else {
                        c
                    }
                })
                .collect();
            restate(&mut p, swapped);
        }
        Lie::DroppedBlockFailure => {
            assert!(p.view.failures.block > 0, "the log has a block failure");
            p.view.failures.block -= 1;
        }
        Lie::HiddenRetirement => {
            *p.view
                .active_cases_by_curation_class
                .entry("held-out".into())
                .or_default() += 1;
        }
        Lie::OtherSettings => p.view.settings.window_seconds = 24 * 3600,
        Lie::FutureTime => p.view.now_micros += 10 * 24 * 3600 * 1_000_000,
        Lie::HiddenClass | Lie::ExtraField => {}
    }
    p
}

async fn forward(State(p): State<Arc<Proxy>>, req: Request) -> Response {
    let path = req
        .uri()
        .path_and_query()
        .map(|x| x.as_str().to_owned())
        .unwrap_or_default();
    let p2 = Arc::clone(&p);
    let answer = tokio::task::spawn_blocking(move || {
        let upstream = Client::new(&p2.upstream, None);
        let reply = upstream.get(&path).expect("upstream");
        // The lies are told about the first task class only.
        let is_view = path == format!("/v1/task-classes/{}", testkit::world::TASK_CLASS);
        if path == "/v1/task-classes" && p2.lie == Lie::HiddenClass {
            let mut list: Vec<serde_json::Value> = reply.json().expect("list");
            list.retain(|c| c["task_class"] != "another-class");
            (
                200,
                "application/json",
                serde_json::to_vec(&list).expect("json"),
            )
        } else if is_view && reply.status == 200 {
            let served: ProjectionResponse = reply.json().expect("projection");
            let mut answer =
                serde_json::to_value(lie_about(&upstream, p2.lie, served)).expect("json");
            if p2.lie == Lie::ExtraField {
                answer["view"]["promotion_blocked"] = false.into();
            }
            let body = serde_json::to_vec(&answer).expect("json");
            (200, "application/json", body)
        } else if path == "/checkpoint" || path == "/v1/log/key" {
            (reply.status, "text/plain; charset=utf-8", reply.body)
        } else {
            (reply.status, "application/json", reply.body)
        }
    })
    .await;
    let Ok((status, ct, body)) = answer else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
        [(header::CONTENT_TYPE, ct)],
        body,
    )
        .into_response()
}

/// A server whose log has, besides the seed (three held-out cases scored
/// 0.95 in run-1): a newer, lower score of case-1 and a score of case-2
/// with a block failure (run-2), and case-3 retired.
fn world() -> TestServer {
    world_on(TestServer::start(|_| {}))
}

/// [`world`] on a log kept in the redb data file, for a test that copies
/// the data directory to fork the log.
fn world_in_file() -> TestServer {
    world_on(TestServer::start_file(|_| {}))
}

fn world_on(s: TestServer) -> TestServer {
    let c = s.client();
    seed(&s, &c);
    let mut p = s.poster(&c);
    p.post(
        "harness",
        Event::RunStarted(testkit::world::run("run-2", Isolation::Microvm)),
    )
    .expect("run-2");
    let mut lower = testkit::world::score("case-1", 0.10);
    lower.run_id = "run-2".into();
    p.post("harness", Event::ScoreRecorded(lower))
        .expect("a newer, lower score");
    let mut broken = testkit::world::score("case-2", 0.90);
    broken.run_id = "run-2".into();
    broken.score.failure_modes = vec![ScoreFailureMode {
        code: "build_broken".into(),
        severity: "block".into(),
    }];
    p.post("harness", Event::ScoreRecorded(broken))
        .expect("a block failure");
    p.post(
        "operator",
        Event::TaskClassRegistered(testkit::world::task_class("another-class")),
    )
    .expect("a second task class");
    let st = case_retire_statement(
        &events::sample::case_handle("case-3"),
        &testkit::world::case_digest("case-3"),
    );
    let (a, b) = (p.key("curator-a"), p.key("curator-b"));
    p.post(
        "curator-a",
        Event::CaseRetired(CaseRetired {
            case_id: events::sample::case_handle("case-3"),
            reason: "superseded".into(),
            retired_by: events::cosign(&a, &st),
            reviewed_by: events::cosign(&b, &st),
        }),
    )
    .expect("retire case-3");
    s.wait_verified();
    s
}

/// The runtime the lying proxies run on.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("rt")
}

fn proxy(rt: &tokio::runtime::Runtime, upstream: &str, lie: Lie) -> String {
    let app = axum::Router::new()
        .fallback(forward)
        .with_state(Arc::new(Proxy {
            upstream: upstream.to_owned(),
            lie,
        }));
    common::serve_on_loopback(rt, app)
}

fn replay(base: &str, vkey: &str, dir: &std::path::Path) -> Result<u64, AuditError> {
    replay_in_steps(base, vkey, dir, verifier::replay::STEP).map(|r| r.followed)
}

/// A replay that checks `step` entries at a time against the signed root.
fn replay_in_steps(
    base: &str,
    vkey: &str,
    dir: &std::path::Path,
    step: u64,
) -> Result<verifier::replay::Replayed, AuditError> {
    let client = Client::new(base, None);
    let note = client.get_text("/checkpoint").expect("checkpoint");
    let cp = anchors::open_checkpoint(note.as_bytes(), vkey).expect("signed");
    let rules = ReplayRules {
        audited: (cp.size, cp.root),
        origin: cp.origin.clone(),
        settings: projections::Settings::default(),
        now_micros: events::Clock::now_micros(&events::SystemClock),
        max_skew_micros: 300 * 1_000_000,
    };
    let mut replica = Replica::open(dir).expect("replica");
    replica.set_step(step);
    audit_projections(
        &client,
        &[vkey.to_owned()],
        &rules,
        &mut replica,
        &mut |_, _, _| {},
    )
}

#[test]
fn every_omission_passes_the_evidence_check_and_is_caught_by_the_replay() {
    let s = world();
    let rt = runtime();
    let size = s.state.events.ledger().head().size;

    // The truth passes, checked three entries at a time (every step
    // proven a prefix of the signed tree), and a second run folds nothing
    // new.
    let dir = tempfile::tempdir().expect("tmp");
    let truth = proxy(&rt, &s.base, Lie::None);
    assert_eq!(
        replay_in_steps(&truth, &s.vkey, dir.path(), 3)
            .expect("the truth")
            .followed,
        size
    );
    assert_eq!(replay(&truth, &s.vkey, dir.path()).expect("again"), 0);

    // What the answer states besides numbers is held to the agreed rules.
    for (lie, rule) in [
        (Lie::OtherSettings, "stated settings"),
        (Lie::FutureTime, "stated time"),
    ] {
        match replay(&proxy(&rt, &s.base, lie), &s.vkey, dir.path()) {
            Err(AuditError::Failed(AuditFailure::BadProjection { reason, .. })) => {
                assert!(reason.contains(rule), "{lie:?}: {reason}")
            }
            other => panic!("{lie:?}: expected a refused projection, got {other:?}"),
        }
    }
    match replay(&proxy(&rt, &s.base, Lie::HiddenClass), &s.vkey, dir.path()) {
        Err(AuditError::Failed(AuditFailure::Incomplete { task_class, reason })) => {
            assert_eq!(task_class, "another-class");
            assert!(reason.contains("left off the list"), "{reason}");
        }
        other => panic!("a hidden task class: expected it found, got {other:?}"),
    }

    for lie in [
        Lie::OmittedScore,
        Lie::OlderScore,
        Lie::DroppedBlockFailure,
        Lie::HiddenRetirement,
        Lie::ExtraField,
    ] {
        let base = proxy(&rt, &s.base, lie);
        let served: ProjectionResponse = Client::new(&base, None)
            .get_json(&format!("/v1/task-classes/{}", testkit::world::TASK_CLASS))
            .expect("projection");
        verifier::check::check_projection(&served, &s.vkey)
            .unwrap_or_else(|e| panic!("{lie:?} should pass the evidence check: {e:#}"));
        // A fresh replica and one that already holds the log both catch it.
        for dir in [tempfile::tempdir().expect("tmp"), copy_of(dir.path())] {
            match replay(&base, &s.vkey, dir.path()) {
                Err(AuditError::Failed(AuditFailure::Incomplete { task_class, reason })) => {
                    assert_eq!(task_class, testkit::world::TASK_CLASS);
                    assert!(
                        reason.contains("is not what the log up to size"),
                        "{reason}"
                    );
                }
                other => panic!("{lie:?}: expected an incomplete projection, got {other:?}"),
            }
        }
    }
    // The honest server still passes.
    assert_eq!(replay(&s.base, &s.vkey, dir.path()).expect("honest"), 0);
}

/// A copy of a replica directory (each failing run must start from the
/// same replica).
fn copy_of(dir: &std::path::Path) -> tempfile::TempDir {
    let out = tempfile::tempdir().expect("tmp");
    for e in walk(dir) {
        let rel = e.strip_prefix(dir).expect("rel");
        let to = out.path().join(rel);
        std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        std::fs::copy(&e, &to).expect("copy");
    }
    out
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A server whose log does not extend what the replica holds (a fork,
/// signed with the same key) is refused before any projection is compared.
#[test]
fn a_log_that_does_not_extend_the_replica_is_refused() {
    let s = world_in_file();
    let operator = s.operator.clone();
    let vkey = s.vkey.clone();
    let data = s.stop();
    let key_text = std::fs::read_to_string(data.path().join("log.key")).expect("log key");
    let key = || anchors::LogKey::from_private(&key_text).expect("log key");
    let fork_data = copy_of(data.path());
    // The real log goes on with one entry...
    let real = TestServer::start_on(data, key(), operator.clone(), |_| {});
    let c = real.client();
    real.poster(&c)
        .post(
            "harness",
            Event::RunStarted(testkit::world::run("run-real", Isolation::Microvm)),
        )
        .expect("real");
    real.wait_verified();
    let dir = tempfile::tempdir().expect("tmp");
    replay(&real.base, &vkey, dir.path()).expect("the real log");
    // ...and the fork, from before it, goes on with others.
    let fork = TestServer::start_on(fork_data, key(), operator, |_| {});
    let c = fork.client();
    for id in ["run-fork-1", "run-fork-2"] {
        fork.poster(&c)
            .post(
                "harness",
                Event::RunStarted(testkit::world::run(id, Isolation::Microvm)),
            )
            .expect("fork");
    }
    fork.wait_verified();
    match replay(&fork.base, &vkey, dir.path()) {
        Err(AuditError::Failed(AuditFailure::Diverged(why))) => {
            assert!(
                why.contains("first bad index") || why.contains("not a prefix"),
                "{why}"
            )
        }
        other => panic!("expected a divergence, got {other:?}"),
    }
}

/// Every `promotion.recommended` the replay folds is held to the replica's
/// own view at the recommendation's checkpoint and time. An honest one, made
/// through `POST /v1/recommendations`, is counted as checked; one the
/// ledger's key signed that the log does not give (gold recommended with no
/// evidence, appended through the door, which does not recompute it) fails
/// the replay, naming the entry, run after run.
#[test]
fn attack_a_signed_recommendation_the_log_does_not_give_fails_the_replay() {
    let s = world();
    let c = s.client();
    let mut p = s.poster(&c);
    let req = p.envelope(
        "promotion-gate",
        Event::PromotionRequested(PromotionRequested {
            task_class: testkit::world::TASK_CLASS.into(),
        }),
    );
    let r = c.post_json("/v1/recommendations", &req).expect("recommend");
    assert_eq!(r.status, 201, "{}", r.text());
    let dir = tempfile::tempdir().expect("tmp");
    let honest = replay_in_steps(&s.base, &s.vkey, dir.path(), verifier::replay::STEP)
        .expect("an honest log");
    assert_eq!(honest.recommendations, 1);

    let mut ledger =
        api::demo::Poster::new(&c, s.vkey.clone(), s.state.log_key.event_signing_key());
    let head = s.state.events.ledger().head();
    let forged = ledger
        .post(
            "operator",
            Event::PromotionRecommended(PromotionRecommended {
                task_class: testkit::world::TASK_CLASS.into(),
                current_tier: Tier::Bronze,
                recommended_tier: Tier::Silver,
                evidence: vec![],
                evidence_tree: Some(EvidenceTree::of(&[])),
                settings: None,
                rationale: vec![],
                checkpoint: CheckpointRef {
                    size: head.size,
                    root: ledger::hash::to_hex(&head.root),
                },
                requires_human_approval: true,
                request_id: "a-request-never-made".into(),
            }),
        )
        .expect("the door takes it: the ledger's key signed it");
    // The failed run kept the entries it had checked against the signed
    // tree; the next run, from that replica, still checks the
    // recommendation among them.
    for run in ["the first run", "the run after it"] {
        match replay(&s.base, &s.vkey, dir.path()) {
            Err(AuditError::Failed(AuditFailure::Diverged(why))) => assert!(
                why.contains(&format!("the recommendation at entry {}", forged.index)),
                "{run}: {why}"
            ),
            other => panic!("{run}: a forged recommendation passed the replay: {other:?}"),
        }
    }
}

/// An entry whose envelope signature was forged, written into the
/// server's store past the door (by whoever holds its disk): the server's
/// start finds it and withholds its checkpoints; a remote auditor holding
/// a checkpoint of that log finds it too, since the replay verifies every
/// signature and rule again, and fails at that entry.
#[test]
fn attack_an_entry_with_a_forged_signature_fails_the_audit_replay() {
    let s = world();
    let c = s.client();
    let leaf = new_leaf(
        &s,
        &c,
        Event::RunStarted(testkit::world::run("run-forged", Isolation::Microvm)),
        // Later than anything the server sequences meanwhile.
        events::Clock::now_micros(&events::SystemClock) + 3_600_000_000,
    );
    let (why, at) = replay_after_raw_append(s, forge_signature(&leaf));
    assert!(
        why.contains(&format!(
            "entry {at} breaks the event rules: signature_invalid"
        )),
        "{why}"
    );
}

/// The leaf of a new envelope for `event`, signed by the harness's key
/// and sequenced at `at` (µs).
fn new_leaf(s: &TestServer, c: &Client, event: Event, at: i64) -> Vec<u8> {
    let body = s.poster(c).envelope("harness", event);
    let w = events::envelope::split_write(&body).expect("a write");
    events::envelope::decode_envelope(w.envelope)
        .expect("an envelope")
        .leaf_bytes(at)
}

/// An exact second copy of a validly signed entry, written into the
/// server's store past its door: the door appends an envelope id once, so
/// the audit's replay refuses the copy (`envelope_id_reused`).
#[test]
fn attack_an_envelope_appended_twice_fails_the_audit_replay() {
    let s = world();
    let last = s.state.events.ledger().head().size - 1;
    let leaf = s.state.events.ledger().entry(last).expect("entry").leaf;
    let (why, at) = replay_after_raw_append(s, leaf);
    assert!(
        why.contains(&format!(
            "entry {at} breaks the event rules: envelope_id_reused: entry {last} already has the envelope id"
        )),
        "{why}"
    );
}

/// A validly signed new entry whose sequencing time is older than the
/// entry before it, written past the door (the ledger sequences at the
/// latest of its clock and the last entry): refused by the replay
/// (`sequenced_at_decreased`).
#[test]
fn attack_an_entry_sequenced_back_in_time_fails_the_audit_replay() {
    let s = world();
    let c = s.client();
    let leaf = new_leaf(
        &s,
        &c,
        Event::RunStarted(testkit::world::run("run-late", Isolation::Microvm)),
        testkit::world::T0 - 1,
    );
    let (why, at) = replay_after_raw_append(s, leaf);
    assert!(
        why.contains(&format!(
            "entry {at} breaks the event rules: sequenced_at_decreased"
        )),
        "{why}"
    );
}

/// Appends `leaf` to `s`'s log past the door (the server stopped), restarts
/// it, and runs the audit's replay of its head from a new replica; returns
/// why it failed and the appended entry's index.
fn replay_after_raw_append(s: TestServer, leaf: Vec<u8>) -> (String, u64) {
    let origin = s.state.log_key.origin().to_owned();
    let mut at = 0;
    let s = s.restart(|dir| {
        let log = ledger::Ledger::open(dir, ledger::Config::default()).expect("open");
        at = log
            .submit(leaf)
            .expect("submitted")
            .wait()
            .expect("appended past the door")
            .index;
    });
    let head = s.state.events.ledger().head();
    let rules = ReplayRules {
        audited: (head.size, head.root),
        origin,
        settings: projections::Settings::default(),
        now_micros: events::Clock::now_micros(&events::SystemClock),
        max_skew_micros: 300 * 1_000_000,
    };
    let dir = tempfile::tempdir().expect("tmp");
    let mut replica = Replica::open(dir.path()).expect("replica");
    match audit_projections(
        &s.client(),
        std::slice::from_ref(&s.vkey),
        &rules,
        &mut replica,
        &mut |_, _, _| {},
    ) {
        Err(AuditError::Failed(AuditFailure::Diverged(why))) => (why, at),
        other => panic!("the replay accepted the entry appended past the door: {other:?}"),
    }
}

/// The replica seals its rule state beside its projection: a later run
/// resumes it; a sealed state changed on disk is refused, said so, and the
/// whole replica checked against the rules again.
#[test]
fn a_replica_resumes_its_sealed_rule_state_and_refuses_a_changed_one() {
    let s = world();
    let dir = tempfile::tempdir().expect("tmp");
    replay(&s.base, &s.vkey, dir.path()).expect("an honest log");
    let r = Replica::open(dir.path()).expect("replica");
    assert_eq!(r.rules_refused(), None);
    drop(r);
    {
        let log = ledger::Ledger::open(&dir.path().join("log"), ledger::Config::default())
            .expect("the replica's log");
        let mut rec = log.get_aux("replica.rules").expect("aux").expect("sealed");
        let last = rec.len() - 1;
        rec[last] ^= 1;
        log.put_aux("replica.rules", &rec).expect("changed");
    }
    let r = Replica::open(dir.path()).expect("replica");
    assert!(
        r.rules_refused().is_some_and(|why| why.contains("seal")),
        "{:?}",
        r.rules_refused()
    );
    drop(r);
    replay(&s.base, &s.vkey, dir.path()).expect("checked again from the start, and passes");
}

/// `leaf` again, its envelope signature's first bit flipped (the leaf's
/// JSON is canonical: sorted keys, no spaces, as serde_json writes it).
fn forge_signature(leaf: &[u8]) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_slice(leaf).expect("a leaf");
    let sig = &mut v["envelope"]["signatures"][0]["sig"];
    let mut bytes = B64.decode(sig.as_str().expect("sig")).expect("base64");
    bytes[0] ^= 1;
    *sig = B64.encode(bytes).into();
    serde_json::to_vec(&v).expect("json")
}

/// `ledger audit --projections DIR`: the replica is made on the first run
/// and kept; a server that leaves a score out fails the audit with exit 1,
/// and the trusted checkpoint is not replaced.
#[test]
fn the_audit_command_replays_with_projections() {
    let s = world();
    let rt = runtime();
    let work = tempfile::tempdir().expect("tmp");
    let (trusted, replica) = (work.path().join("trusted"), work.path().join("replica"));
    let audit = |base: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ledger"))
            .args([
                "audit", "--quiet", "--init", "--server", base, "--key", &s.vkey,
            ])
            .arg("--trusted")
            .arg(&trusted)
            .arg("--projections")
            .arg(&replica)
            .output()
            .expect("audit")
    };
    let out = audit(&s.base);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("replay:      2 task classes equal"), "{text}");
    let out = audit(&s.base);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("(0 new entries"),
        "the second run folds nothing new: {text}"
    );
    let saved = std::fs::read(&trusted).expect("trusted");

    let liar = proxy(&rt, &s.base, Lie::OmittedScore);
    let out = audit(&liar);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("does not follow from the whole log"),
        "{text}"
    );
    assert_eq!(std::fs::read(&trusted).expect("trusted"), saved);
}

/// A change a liar makes to a state answer.
type StateLie = dyn Fn(&mut verifier::wire::StateResponse);

/// The committed state of a task class, fetched from the server.
fn state_of(base: &str, task_class: &str) -> verifier::wire::StateResponse {
    Client::new(base, None)
        .get_json(&format!("/v1/task-classes/{task_class}/state"))
        .expect("state")
}

/// The record of the case named `id` (found by its handle).
fn case_mut<'a>(
    r: &'a mut verifier::wire::StateResponse,
    id: &str,
) -> &'a mut projections::commit::CaseRecord {
    r.cases
        .iter_mut()
        .find(|c| c.case_id == events::sample::case_handle(id))
        .expect("case record")
}

/// Completeness without replay: the committed state of a class passes its
/// check, and each omission the replay catches is caught by the answer's
/// own proofs, with nothing replayed.
#[test]
fn every_omission_is_caught_by_the_committed_state_alone() {
    use projections::commit::CommitError;
    use verifier::state::{check_state, StateError};
    let s = world();
    let rules = verifier::state::StateRules {
        settings: projections::Settings::default(),
        now_micros: events::Clock::now_micros(&events::SystemClock),
        max_skew_micros: 300 * 1_000_000,
    };
    let tc = testkit::world::TASK_CLASS;
    let truth = state_of(&s.base, tc);
    let ok = check_state(&truth, &s.vkey, None, 0, &rules).expect("the truth");
    let view = ok.view.as_ref().expect("a registered class");
    assert_eq!(view.failures.block, 1);
    assert_eq!(view.held_out.cases, 2, "case-3 is retired");
    assert_eq!(
        view.evidence
            .iter()
            .find(|e| e.case_id == events::sample::case_handle("case-1"))
            .map(|e| e.score),
        Some(0.10),
        "the newest score of case-1"
    );
    // The log's last entry is the commitment: asked again, the server
    // answers from it rather than appending another.
    let again = state_of(&s.base, tc);
    assert_eq!(again.commitment.index, truth.commitment.index);

    let lies: Vec<(&str, Box<StateLie>)> = vec![
        (
            "omitted case",
            Box::new(|r| {
                r.cases
                    .retain(|c| c.case_id != events::sample::case_handle("case-1"))
            }),
        ),
        (
            "older score in place of the latest",
            Box::new(|r| {
                let l = case_mut(r, "case-1").latest.as_mut().expect("scored");
                l.score = 0.95;
            }),
        ),
        (
            "dropped block failure",
            Box::new(|r| case_mut(r, "case-2").failures.clear()),
        ),
        (
            "retired case counted",
            Box::new(|r| case_mut(r, "case-3").active = true),
        ),
    ];
    for (name, lie) in &lies {
        let mut r = truth.clone();
        lie(&mut r);
        // The liar also restates the view, so that it follows from the
        // altered records: only the commitment can catch it.
        let class = r.class.clone().expect("class");
        let v = r.view.clone().expect("view");
        r.view = Some(projections::commit::view(
            &class,
            &r.cases,
            r.commitment.index,
            v.now_micros,
            &v.settings,
        ));
        match check_state(&r, &s.vkey, None, 0, &rules) {
            Err(StateError::Records(CommitError::Cases(_))) => {}
            other => panic!("{name}: expected the case tree to refuse it, got {other:?}"),
        }
        // A liar who also rebuilds the class record's case tree is caught
        // by the class record's proof under the committed state root.
        let class = r.class.as_mut().expect("class");
        class.cases = r.cases.len() as u64;
        class.cases_root = ledger::hash::to_hex(&projections::commit::cases_root(&r.cases));
        match check_state(&r, &s.vkey, None, 0, &rules) {
            Err(StateError::Records(CommitError::NotCommitted(_))) => {}
            other => panic!("{name} with a rebuilt case tree: expected it refused, got {other:?}"),
        }
    }

    // A view stated over another window, or at another time, is refused
    // before anything is computed from it.
    let mut r = truth.clone();
    r.view.as_mut().expect("view").settings.window_seconds = 24 * 3600;
    assert!(matches!(
        check_state(&r, &s.vkey, None, 0, &rules),
        Err(StateError::Settings { .. })
    ));
    let mut r = truth.clone();
    r.view.as_mut().expect("view").now_micros += 10 * 24 * 3600 * 1_000_000;
    assert!(matches!(
        check_state(&r, &s.vkey, None, 0, &rules),
        Err(StateError::Time { .. })
    ));

    // Numbers served that do not follow from the records.
    let mut r = truth.clone();
    r.view.as_mut().expect("view").failures.block = 0;
    match check_state(&r, &s.vkey, None, 0, &rules) {
        Err(StateError::View(field)) => assert_eq!(field, "failures"),
        other => panic!("a dropped failure in the view: expected it refused, got {other:?}"),
    }

    // A registered class claimed absent: its neighbour is not adjacent
    // around the name (the only honest neighbours would enclose it).
    let other = state_of(&s.base, "another-class");
    check_state(&other, &s.vkey, None, 0, &rules).expect("another-class is committed");
    let mut hidden = other.clone();
    let real = truth.class.clone().expect("class");
    hidden.neighbours = Some([
        None,
        Some(projections::commit::Neighbour {
            class: real,
            proof: truth.class_proof.clone().expect("proof"),
        }),
    ]);
    hidden.class = None;
    hidden.class_proof = None;
    hidden.cases.clear();
    hidden.view = None;
    match check_state(&hidden, &s.vkey, None, 0, &rules) {
        Err(StateError::Records(CommitError::NotAbsent(..))) => {}
        other => panic!("a hidden class: expected it refused, got {other:?}"),
    }
    // A name that is not registered is proven absent.
    let absent = state_of(&s.base, "no-such-class");
    let v = check_state(&absent, &s.vkey, None, 0, &rules).expect("absent");
    assert!(v.view.is_none());

    // A commitment older than what the gate already knows.
    check_state(&truth, &s.vkey, None, truth.commitment.index + 1, &rules)
        .expect("as fresh as known");
    match check_state(&truth, &s.vkey, None, truth.commitment.index + 2, &rules) {
        Err(StateError::Stale { .. }) => {}
        other => panic!("a stale commitment: expected it refused, got {other:?}"),
    }
    // Another entry passed off as the commitment.
    let mut r = truth.clone();
    let e: verifier::wire::EntryView = Client::new(&s.base, None)
        .get_json("/v1/entries/3")
        .expect("entry");
    r.commitment.leaf = e.leaf;
    match check_state(&r, &s.vkey, None, 0, &rules) {
        Err(StateError::Commitment(_)) => {}
        other => panic!("another entry as the commitment: expected it refused, got {other:?}"),
    }

    // Commitments are entries like any other: a replay of the log checks
    // each committed root against its own fold, and passes.
    let dir = tempfile::tempdir().expect("tmp");
    replay(&s.base, &s.vkey, dir.path()).expect("a log with commitments replays");

    // `ledger state` checks the same answer and prints the decision.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ledger"))
        .args(["state", tc, "--server", &s.base, "--key", &s.vkey])
        .output()
        .expect("ledger state");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("OK:") && text.contains("1 block failures"),
        "{text}"
    );
}
