//! Handles (schema 3, docs/PRIVACY.md "Handles"): case ids, identities and
//! workflow ids named by the digest of the commitment beside them where
//! they are first named. One named test per attack, each expecting one
//! typed code and nothing appended.

use events::disclose::{self, Bound};
use events::envelope::{
    case_provenance_statement, format_micros, public_key_b64, sign_write_bound,
};
use events::model::*;
use events::sample::case_handle;
use events::RejectCode as C;
use events::Rejection;
use testkit::world::*;

/// The body `signer` posts for `event`, committed with `bound` (values
/// given their handles at random, as a real client does).
fn write(w: &mut World, signer: &str, event: Event, bound: &[Bound]) -> Vec<u8> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    signed(signer, &format!("handles-{}-{n}", w.size()), event, bound)
}

/// The body `signer` posts under the envelope id `id` for `event`,
/// committed with `bound`.
fn signed(signer: &str, id: &str, event: Event, bound: &[Bound]) -> Vec<u8> {
    let p = Payload {
        schema: SCHEMA_VERSION,
        id: id.into(),
        signer: events::key_id(&key(signer).verifying_key()),
        issued_at: format_micros(T0),
        event,
    };
    sign_write_bound(&key(signer), p, bound)
}

/// The world's log closed and opened again: its directory (kept while the
/// test runs) and the reopened log.
fn restart(w: World) -> (tempfile::TempDir, events::EventLog) {
    let dir = w.dir.path().to_owned();
    let World { dir: tmp, log, .. } = w;
    drop(log);
    (tmp, open_log(&dir))
}

/// Case `name` added under `b`'s handle, co-signed by curators a and b.
fn case_under(b: &Bound, name: &str) -> Event {
    let mut c = sample().case_added_as(
        TASK_CLASS,
        &b.handle,
        name,
        "held-out",
        &format_micros(T0),
        (&key("curator-a"), &key("curator-b")),
    );
    c.case_name = Some(name.into());
    Event::CaseAdded(c)
}

fn enrolment(who: &str, identity: &str, name: &str) -> Event {
    Event::PrincipalEnrolled(PrincipalEnrolled {
        sigstore: None,
        public_key: public_key_b64(&key(who).verifying_key()),
        identity: identity.into(),
        identity_name: Some(name.into()),
        roles: vec![Role::Curator],
    })
}

/// Alice's first key enrolled under a handle of her own; its binding.
fn enrol_alice(w: &mut World) -> Bound {
    let alice = disclose::bind("identity_name", "alice@example.org").expect("salt");
    let body = write(
        w,
        "operator",
        enrolment("alice-1", &alice.handle, "alice@example.org"),
        std::slice::from_ref(&alice),
    );
    w.log.append(&body).expect("alice's first key");
    alice
}

fn refused(w: &mut World, body: &[u8], code: C) -> Rejection {
    let before = w.size();
    let r = expect_code(w.log.append(body), code);
    assert_eq!(w.size(), before, "nothing is appended");
    r
}

#[test]
fn a_case_is_named_by_its_handle_and_its_name_is_not_in_the_leaf() {
    let mut w = World::new();
    let b = disclose::bind("case_name", "GHSA-2026-held-out-7").expect("salt");
    let body = write(
        &mut w,
        "curator-a",
        case_under(&b, "GHSA-2026-held-out-7"),
        std::slice::from_ref(&b),
    );
    let at = w.log.append(&body).expect("case").appended.index;
    let leaf = w.log.ledger().entry(at).expect("entry").leaf;
    let payload = events::decode_leaf(&leaf).expect("leaf").0.payload_bytes;
    let text = String::from_utf8(payload).expect("utf8");
    assert!(
        !text.contains("GHSA-2026"),
        "the name is in the leaf: {text}"
    );
    assert!(text.contains(&b.handle));
    // A score names the case by its handle; by its name it names nothing.
    let mut s = score("GHSA-2026-held-out-7", 0.9);
    s.case_id = b.handle.clone();
    s.case_digest = events::sample::digest(&b.handle);
    s.cassette_digest = events::sample::cassette_digest(&b.handle);
    w.post("harness", Event::ScoreRecorded(s.clone()))
        .expect("scored by handle");
    s.case_id = "GHSA-2026-held-out-7".into();
    expect_code(w.post("harness", Event::ScoreRecorded(s)), C::CaseUnknown);
    // A replay from the first entry agrees with the state.
    assert_eq!(w.log.replay_state().expect("replay"), w.log.state());
}

#[test]
fn attack_a_case_id_in_clear_beside_its_commitment_is_refused() {
    let mut w = World::new();
    let b = disclose::bind("case_name", "GHSA-2026-clear").expect("salt");
    let mut e = case_under(&b, "GHSA-2026-clear");
    if let Event::CaseAdded(c) = &mut e {
        c.case_id = "GHSA-2026-clear-but-other".into();
    }
    let body = write(&mut w, "curator-a", e, &[b]);
    let r = refused(&mut w, &body, C::HandleNotDerived);
    assert_eq!(r.field, "event.body.case_id");
}

#[test]
fn attack_a_second_handle_for_one_case_is_refused() {
    let mut w = World::new();
    let first = disclose::bind("case_name", "GHSA-2026-twice").expect("salt");
    let body = write(
        &mut w,
        "curator-a",
        case_under(&first, "GHSA-2026-twice"),
        std::slice::from_ref(&first),
    );
    w.log.append(&body).expect("first");
    let second = disclose::bind("case_name", "GHSA-2026-twice").expect("salt");
    assert_ne!(first.handle, second.handle);
    let body = write(
        &mut w,
        "curator-a",
        case_under(&second, "GHSA-2026-twice"),
        &[second],
    );
    let r = refused(&mut w, &body, C::HandleValueBound);
    // A writer of cases does not learn which case a guessed name is.
    assert!(!r.message.contains(&first.handle), "{r}");
}

#[test]
fn attack_a_second_handle_for_one_case_in_the_same_batch_is_refused() {
    let mut w = World::new();
    let first = disclose::bind("case_name", "GHSA-2026-batch").expect("salt");
    let second = disclose::bind("case_name", "GHSA-2026-batch").expect("salt");
    let a = write(
        &mut w,
        "curator-a",
        case_under(&first, "GHSA-2026-batch"),
        &[first],
    );
    let b = write(
        &mut w,
        "curator-a",
        case_under(&second, "GHSA-2026-batch"),
        &[second],
    );
    let before = w.size();
    let results: Vec<_> = w
        .log
        .submit_many(&[a, b], 1)
        .into_iter()
        .map(|r| r.and_then(|p| p.wait()))
        .collect();
    assert!(results[0].is_ok());
    expect_code(
        results.into_iter().nth(1).expect("second"),
        C::HandleValueBound,
    );
    assert_eq!(w.size(), before + 1);
}

#[test]
fn attack_a_second_identity_handle_for_one_person_is_refused() {
    let mut w = World::new();
    let alice = enrol_alice(&mut w);
    // A second key, the same person, a new handle: she could co-sign as two.
    let again = disclose::bind("identity_name", "alice@example.org").expect("salt");
    let body = write(
        &mut w,
        "operator",
        enrolment("alice-2", &again.handle, "alice@example.org"),
        &[again],
    );
    refused(&mut w, &body, C::HandleValueBound);
    // Under her handle, the second key is enrolled, and the two keys are
    // one identity to the co-signature rule.
    let body = write(
        &mut w,
        "operator",
        enrolment("alice-2", &alice.handle, "alice@example.org"),
        &[],
    );
    w.log.append(&body).expect("alice's second key");
    let st = case_provenance_statement(
        &case_handle("case-9"),
        &format_micros(T0),
        &case_digest("case-9"),
    );
    let mut c = w.case_added("case-9", "held-out");
    c.provenance.added_by = events::cosign(&key("alice-1"), &st);
    c.provenance.reviewed_by = events::cosign(&key("alice-2"), &st);
    expect_code(
        w.post("curator-a", Event::CaseAdded(c)),
        C::CosignersNotDistinct,
    );
}

#[test]
fn attack_an_earlier_handle_beside_another_value_is_refused() {
    let mut w = World::new();
    let alice = enrol_alice(&mut w);
    // Mallory's key under Alice's handle: the two would look like one.
    let body = write(
        &mut w,
        "operator",
        enrolment("mallory", &alice.handle, "mallory@example.org"),
        &[],
    );
    let r = refused(&mut w, &body, C::HandleValueMismatch);
    assert_eq!(r.field, "event.body.identity");
}

#[test]
fn attack_a_handle_of_another_class_is_refused() {
    let mut w = World::new();
    let head = w.log.ledger().head();
    let e = Event::CapabilityMinted(CapabilityMinted {
        capability_id: "cap-1".into(),
        workflow_id: case_handle("case-1"),
        workflow_name: Some("wf-1".into()),
        validated_at: format_micros(T0),
        minted_at: CheckpointRef {
            size: head.size,
            root: ledger::hash::to_hex(&head.root),
        },
        expires_at: format_micros(T0 + 3_600_000_000),
    });
    let body = write(&mut w, "gate", e, &[]);
    let r = refused(&mut w, &body, C::HandleNotDerived);
    assert_eq!(r.field, "event.body.workflow_id");
}

#[test]
fn attack_a_schema_3_case_without_its_companion_is_refused() {
    let mut w = World::new();
    let mut p = w.payload(
        "curator-a",
        Event::CaseAdded(w.case_added("case-x", "held-out")),
    );
    if let Event::CaseAdded(c) = &mut p.event {
        c.case_name = None;
    }
    let body = w.with_disclosures(&events::sign_envelope(&key("curator-a"), &p));
    let r = refused(&mut w, &body, C::MissingField);
    assert_eq!(r.field, "event.body.case_name");
}

#[test]
fn attack_a_companion_under_schema_2_is_refused() {
    let mut w = World::new();
    let mut p = w.payload(
        "curator-a",
        Event::CaseAdded(w.case_added("case-x", "held-out")),
    );
    p.schema = SCHEMA_COMMITTED;
    let body = w.with_disclosures(&events::sign_envelope(&key("curator-a"), &p));
    let r = refused(&mut w, &body, C::UnknownField);
    assert_eq!(r.field, "event.body.case_name");
}

#[test]
fn attack_schema_2_after_the_switch_is_refused() {
    let mut w = World::new();
    let mut p = w.payload("harness", Event::ScoreRecorded(score("case-1", 0.9)));
    p.schema = SCHEMA_COMMITTED;
    let body = w.with_disclosures(&events::sign_envelope(&key("harness"), &p));
    let r = refused(&mut w, &body, C::SchemaSuperseded);
    assert!(r.message.contains("handles"), "{r}");
}

#[test]
fn the_door_knows_every_handle_again_after_a_restart() {
    let mut w = World::new();
    let first = disclose::bind("case_name", "GHSA-2026-restart").expect("salt");
    let body = write(
        &mut w,
        "curator-a",
        case_under(&first, "GHSA-2026-restart"),
        &[first],
    );
    w.log.append(&body).expect("first");
    let (tmp, log) = restart(w);
    expect_code(
        log.append(&second_case("GHSA-2026-restart", "handles-after-restart")),
        C::HandleValueBound,
    );
    drop(log);
    drop(tmp);
}

#[test]
fn a_client_that_writes_the_value_in_the_identifier_gets_a_handle() {
    let mut w = World::new();
    let head = w.log.ledger().head();
    let mint = |id: &str| {
        Event::CapabilityMinted(CapabilityMinted {
            capability_id: id.into(),
            workflow_id: "deploy-prod-eu".into(),
            workflow_name: None,
            validated_at: format_micros(T0),
            minted_at: CheckpointRef {
                size: head.size,
                root: ledger::hash::to_hex(&head.root),
            },
            expires_at: format_micros(T0 + 3_600_000_000),
        })
    };
    let mut p = Payload {
        schema: SCHEMA_VERSION,
        id: "handles-mint".into(),
        signer: events::key_id(&key("gate").verifying_key()),
        issued_at: format_micros(T0),
        event: mint("cap-1"),
    };
    let d = disclose::commit(&mut p).expect("salt");
    let Event::CapabilityMinted(m) = &p.event else {
        unreachable!()
    };
    let handle = m.workflow_id.clone();
    assert_eq!(
        m.workflow_name.as_ref().and_then(|n| n.committed()),
        Some(handle.as_str())
    );
    let body = events::envelope::write_body(&events::sign_envelope(&key("gate"), &p), &d);
    w.log.append(&body).expect("minted");
    // The example names the workflow by that handle.
    w.post(
        "rag-writer",
        Event::RagExampleWritten(RagExampleWritten {
            capability_id: "cap-1".into(),
            workflow_id: handle,
            example_digest: case_digest("solved example"),
        }),
    )
    .expect("written");
}

/// A log that switches to schema 3 while it runs: an identity enrolled in
/// clear before the switch is its own handle, at once, not only after a
/// restart; one that is the digest a later disclosure gives stays its own,
/// and that disclosure is refused beside it.
#[test]
fn a_value_written_in_clear_before_the_switch_keeps_its_one_handle() {
    let dir = tempfile::tempdir().expect("dir");
    let log = open_log(dir.path());
    let payload = |id: &str, schema: u32, event: Event| Payload {
        schema,
        id: id.into(),
        signer: events::key_id(&key("operator").verifying_key()),
        issued_at: format_micros(T0),
        event,
    };
    let enrol = |who: &str, identity: &str, name: Option<Sensitive<String>>| {
        Event::PrincipalEnrolled(PrincipalEnrolled {
            sigstore: None,
            public_key: public_key_b64(&key(who).verifying_key()),
            identity: identity.into(),
            identity_name: name,
            roles: vec![if who == "operator" {
                Role::Operator
            } else {
                Role::Curator
            }],
        })
    };
    let clear = |id: &str, event: Event| {
        events::sign_envelope(&key("operator"), &payload(id, SCHEMA_CLEAR, event))
    };
    log.append(&clear(
        "genesis-operator",
        enrol("operator", "operator", None),
    ))
    .expect("a schema-1 genesis");
    log.append(&clear(
        "enrol-alice-1",
        enrol("alice-1", "alice@example.org", None),
    ))
    .expect("alice in clear");
    let bob = disclose::bind("identity_name", "bob@example.org").expect("salt");
    log.append(&clear(
        "enrol-mallory-1",
        enrol("mallory-1", &bob.handle, None),
    ))
    .expect("an identifier in clear that a later disclosure's digest is");
    // After the switch, a new handle for alice is refused: her id is hers.
    let body = sign_write_bound(
        &key("operator"),
        payload(
            "enrol-alice-2",
            SCHEMA_VERSION,
            enrol("alice-2", "alice@example.org", None),
        ),
        &[],
    );
    let r = expect_code(log.append(&body), C::HandleValueBound);
    assert!(r.message.contains("`alice@example.org`"), "{r}");
    // Named by that handle, with her identity committed beside it, her
    // second key is enrolled.
    let b = disclose::bind("identity_name", "alice@example.org").expect("salt");
    let body = sign_write_bound(
        &key("operator"),
        payload(
            "enrol-alice-2-again",
            SCHEMA_VERSION,
            enrol(
                "alice-2",
                "alice@example.org",
                Some(Sensitive::Committed(Commitment {
                    sd: b.handle.clone(),
                })),
            ),
        ),
        &[b],
    );
    log.append(&body).expect("alice's second key");
    let body = sign_write_bound(
        &key("operator"),
        payload(
            "enrol-bob-1",
            SCHEMA_VERSION,
            enrol(
                "bob-1",
                &bob.handle,
                Some(Sensitive::Committed(Commitment {
                    sd: bob.handle.clone(),
                })),
            ),
        ),
        &[bob],
    );
    let r = expect_code(log.append(&body), C::HandleValueMismatch);
    assert!(r.message.contains("another identity"), "{r}");
}

/// A client that puts a person's handle in the identifier and leaves the
/// companion out asks, by the commit's rule, for a new handle whose value
/// is the old handle: the door refuses it rather than give the person a
/// second handle it cannot see is theirs.
#[test]
fn attack_a_handle_committed_as_a_value_is_refused() {
    let mut w = World::new();
    let alice = enrol_alice(&mut w);
    let mut e = enrolment("alice-2", &alice.handle, "");
    if let Event::PrincipalEnrolled(p) = &mut e {
        p.identity_name = None;
    }
    let body = write(&mut w, "operator", e, &[]);
    let r = refused(&mut w, &body, C::HandleValueBound);
    assert_eq!(r.field, "event.body.identity_name");
}

/// A second handle for the case named `name`, written by curator a: what
/// the door must refuse once `name` has a handle.
fn second_case(name: &str, id: &str) -> Vec<u8> {
    let second = disclose::bind("case_name", name).expect("salt");
    signed("curator-a", id, case_under(&second, name), &[second])
}

/// Case `name` added under a handle of its own.
fn add_case(w: &mut World, name: &str) {
    let b = disclose::bind("case_name", name).expect("salt");
    let body = write(w, "curator-a", case_under(&b, name), &[b]);
    w.log.append(&body).expect("a case");
}

/// A start resumes the door's index from the state it saved (whole, then
/// as a delta) and learns the handles given after it: every value keeps
/// its one handle, and the replay check agrees with the saved index.
#[test]
fn the_door_resumes_its_index_saved_with_the_state() {
    let mut w = World::new();
    add_case(&mut w, "GHSA-2026-whole");
    enrol_alice(&mut w);
    let whole = w.log.save_state().expect("save").expect("taken");
    add_case(&mut w, "GHSA-2026-tail");
    let dir = w.dir.path().to_owned();
    let (tmp, log) = restart(w);
    assert_eq!(
        log.handle_index_resumed(),
        Some(whole),
        "loaded, not resumed"
    );
    assert_eq!(log.check_snapshot(), Ok(Some(whole)));
    expect_code(
        log.append(&second_case("GHSA-2026-whole", "again-whole")),
        C::HandleValueBound,
    );
    expect_code(
        log.append(&second_case("GHSA-2026-tail", "again-tail")),
        C::HandleValueBound,
    );
    // A delta carries the handles given since the whole save.
    let b = disclose::bind("case_name", "GHSA-2026-delta").expect("salt");
    let body = signed(
        "curator-a",
        "handles-delta",
        case_under(&b, "GHSA-2026-delta"),
        &[b],
    );
    log.append(&body).expect("a case after the restart");
    let delta = log.save_state().expect("save").expect("taken");
    assert!(log
        .ledger()
        .get_aux(&events::sequencer::state_delta_aux(0))
        .expect("read")
        .is_some_and(|d| !d.is_empty()));
    drop(log);
    let log = open_log(&dir);
    assert_eq!(log.handle_index_resumed(), Some(delta));
    assert_eq!(log.check_snapshot(), Ok(Some(delta)));
    for (name, id) in [
        ("GHSA-2026-whole", "again-whole-2"),
        ("GHSA-2026-tail", "again-tail-2"),
        ("GHSA-2026-delta", "again-delta"),
    ] {
        expect_code(log.append(&second_case(name, id)), C::HandleValueBound);
    }
    drop(log);
    drop(tmp);
}

/// Someone who holds the ledger's key drops a case's binding from the
/// index saved with the state and seals it again, so that a second handle
/// for the case would pass the door: the replay check loads the index
/// from the kept disclosures, disagrees, and the state saved in its place
/// has no index, so the next start loads it and refuses the second handle.
#[test]
fn attack_handle_index_resealed_with_the_key_is_caught_by_a_replay() {
    let mut w = World::new();
    add_case(&mut w, "GHSA-2026-forged");
    let at = w.log.save_state().expect("save").expect("taken");
    let rec = w
        .log
        .ledger()
        .get_aux(events::sequencer::STATE_AUX)
        .expect("read")
        .expect("saved");
    let parts = ledger::sealed::split(&rec).expect("a sealed record");
    let state = events::State::decode_snapshot(parts.body).expect("decode");
    let mut body = state.encode_snapshot();
    events::handles::HandleValues::new(events::sequencer::handle_index_key(&key("ledger")))
        .encode_into(&mut body);
    let forged = ledger::sealed::seal(
        &events::sequencer::snapshot_seal_key(&key("ledger")),
        &parts.magic,
        at,
        &parts.root,
        &body,
    );
    w.log
        .ledger()
        .put_aux(events::sequencer::STATE_AUX, &forged)
        .expect("write");
    let dir = w.dir.path().to_owned();
    let (tmp, log) = restart(w);
    assert_eq!(log.handle_index_resumed(), Some(at), "the seal verifies");
    let err = log.check_snapshot().expect_err("the replay must disagree");
    assert!(err.contains("index of the values behind handles"), "{err}");
    assert_eq!(
        log.save_state().expect("save"),
        None,
        "distrusted, not saved"
    );
    drop(log);
    let log = open_log(&dir);
    assert_eq!(
        log.handle_index_resumed(),
        None,
        "loaded from the disclosures"
    );
    assert_eq!(log.check_snapshot(), Ok(Some(at)));
    expect_code(
        log.append(&second_case("GHSA-2026-forged", "again-forged")),
        C::HandleValueBound,
    );
    drop(log);
    drop(tmp);
}

/// A person's identity redacted where their handle was given: the same
/// disclosure posted again (another key of theirs) names that handle for a
/// value the door no longer knows, and is refused; a new handle for the
/// value is taken. The redaction and the new handle travel in a delta, and
/// the index a start resumes from it agrees with the replay check.
#[test]
fn attack_a_handle_given_again_after_its_value_was_redacted_is_refused() {
    let mut w = World::new();
    let alice = enrol_alice(&mut w);
    let at = w.size() - 1;
    w.log.save_state().expect("save").expect("taken");
    let r = w.redaction(at, "identity_name", ("maintainer-a", "maintainer-b"));
    w.post("maintainer-a", Event::FieldRedacted(r))
        .expect("redacted");
    let again = write(
        &mut w,
        "operator",
        enrolment("alice-2", &alice.handle, "alice@example.org"),
        &[alice],
    );
    let r = refused(&mut w, &again, C::HandleValueMismatch);
    assert!(r.message.contains("redacted"), "{r}");
    let fresh = disclose::bind("identity_name", "alice@example.org").expect("salt");
    let body = write(
        &mut w,
        "operator",
        enrolment("alice-3", &fresh.handle, "alice@example.org"),
        &[fresh],
    );
    w.log.append(&body).expect("a new handle for her");
    let delta = w.log.save_state().expect("save").expect("taken");
    let (tmp, log) = restart(w);
    assert_eq!(log.handle_index_resumed(), Some(delta));
    assert_eq!(log.check_snapshot(), Ok(Some(delta)));
    let another = disclose::bind("identity_name", "alice@example.org").expect("salt");
    let body = signed(
        "operator",
        "handles-alice-4",
        enrolment("alice-4", &another.handle, "alice@example.org"),
        &[another],
    );
    expect_code(log.append(&body), C::HandleValueBound);
    drop(log);
    drop(tmp);
}
