//! Sensitive values as commitments (docs/PRIVACY.md): the door's checks of
//! disclosures, one named test per attack, the switch from schema 1, and
//! the vectors every checker (Rust, Python, the explorer) reads
//! (`events/testdata/disclosure_vectors.json`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine as _;
use events::canonical::Value;
use events::disclose;
use events::envelope::{sign_envelope, split_write, write_body};
use events::model::*;
use events::RejectCode as C;
use serde_json::json;
use testkit::world::*;

const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/testdata/disclosure_vectors.json"
);

/// A case.added whose payload commits, with its disclosures, not yet sent.
fn committed_case(w: &mut World, id: &str) -> (Payload, Vec<String>) {
    let c = w.case_added(id, "held-out");
    let mut p = w.payload("curator-a", Event::CaseAdded(c.clone()));
    // `payload` committed already: commit the clear event again to get
    // disclosures this test holds.
    p.event = Event::CaseAdded(c);
    let bound = events::sample::bindings_for(&p.event);
    let d = disclose::commit_with(&mut p, &bound).expect("randomness");
    (p, d)
}

fn post(w: &mut World, p: &Payload, disclosures: &[String]) -> Posted {
    let body = write_body(&sign_envelope(&key(&signer_name(p)), p), disclosures);
    w.log.append(&body)
}

fn signer_name(p: &Payload) -> String {
    ["curator-a", "harness", "operator", "gate"]
        .into_iter()
        .find(|n| events::key_id(&key(n).verifying_key()) == p.signer)
        .expect("a known signer")
        .to_owned()
}

#[test]
fn a_committed_case_is_appended_and_its_leaf_holds_no_value() {
    let mut w = World::new();
    let (p, d) = committed_case(&mut w, "case-secret");
    let r = post(&mut w, &p, &d).expect("accepted");
    let leaf = w.log.ledger().entry(r.appended.index).expect("entry").leaf;
    let text = String::from_utf8(leaf).expect("utf8");
    let payload = events::decode_leaf(text.as_bytes())
        .expect("leaf")
        .0
        .payload_bytes;
    let payload = String::from_utf8(payload).expect("utf8");
    assert!(payload.contains("\"_sd\""), "{payload}");
    assert!(!payload.contains("held-out-task case case-secret"));
    assert!(
        !payload.contains("bench/"),
        "the source reference is in clear: {payload}"
    );
    // The disclosures are kept beside the entry, in field order, and open.
    let kept: Vec<String> = w
        .log
        .ledger()
        .private_parts(r.appended.index)
        .expect("parts")
        .into_iter()
        .map(|p| match p {
            ledger::private::Part::Open(b) => String::from_utf8(b).expect("utf8"),
            ledger::private::Part::Shredded => panic!("shredded"),
        })
        .collect();
    let opened = disclose::check_disclosed(&p.event, &kept).expect("they open the leaf");
    assert!(opened.iter().all(|o| o.value.is_some()));
    let fields: Vec<&str> = opened.iter().map(|o| o.path).collect();
    assert_eq!(
        fields,
        [
            "title",
            "disposition",
            "difficulty",
            "provenance.source_ref",
            "case_name"
        ]
    );
}

#[test]
fn attack_a_disclosure_with_another_salt_is_refused() {
    let mut w = World::new();
    let (p, mut d) = committed_case(&mut w, "case-x");
    let o = disclose::parse(&d[0], "d").expect("parses");
    d[0] = disclose::disclosure(&[1u8; 32], &o.path, &o.value);
    let r = expect_code(post(&mut w, &p, &d), C::DisclosureMissing);
    assert_eq!(r.field, "event.body.title");
}

#[test]
fn attack_a_disclosure_of_another_value_is_refused() {
    let mut w = World::new();
    let (p, mut d) = committed_case(&mut w, "case-x");
    let bytes = B64URL.decode(&d[0]).expect("b64");
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
    let salt = B64URL.decode(v[0].as_str().expect("salt")).expect("salt");
    d[0] = disclose::disclosure(&salt, "title", &Value::Str("another title".into()));
    expect_code(post(&mut w, &p, &d), C::DisclosureMissing);
}

#[test]
fn attack_a_disclosure_naming_another_field_is_refused() {
    let mut w = World::new();
    let mut c = w.case_added("case-x", "held-out");
    // The title's disclosure names `difficulty`: a client that lets one
    // field's disclosure open another is refused, whatever the value.
    c.title = "medium".into();
    let mut p = w.payload("curator-a", Event::CaseAdded(c));
    let salt = [3u8; 32];
    let forged = disclose::disclosure(&salt, "difficulty", &Value::Str("medium".into()));
    if let Event::CaseAdded(e) = &mut p.event {
        e.title = Sensitive::Committed(Commitment {
            sd: disclose::digest(&forged),
        });
    }
    let mut all = vec![forged];
    // The other fields' disclosures, as the world made them.
    let body = w.with_disclosures(&sign_envelope(&key("curator-a"), &p));
    all.extend(split_write(&body).expect("write").disclosures);
    let r = expect_code(post(&mut w, &p, &all), C::DisclosureFieldMismatch);
    assert_eq!(r.field, "disclosures[0]");
}

#[test]
fn attack_a_committed_field_without_its_disclosure_is_refused() {
    let mut w = World::new();
    let (p, mut d) = committed_case(&mut w, "case-x");
    d.remove(3);
    let r = expect_code(post(&mut w, &p, &d), C::DisclosureMissing);
    assert_eq!(r.field, "event.body.provenance.source_ref");
}

#[test]
fn attack_an_extra_disclosure_is_refused() {
    let mut w = World::new();
    let (p, mut d) = committed_case(&mut w, "case-x");
    d.push(disclose::disclosure(
        &[5u8; 16],
        "title",
        &Value::Str("smuggled".into()),
    ));
    let r = expect_code(post(&mut w, &p, &d), C::DisclosureUnused);
    assert_eq!(r.field, "disclosures[5]");
}

#[test]
fn attack_one_disclosure_opening_two_fields_is_refused() {
    let mut w = World::new();
    let (mut p, d) = committed_case(&mut w, "case-x");
    if let Event::CaseAdded(e) = &mut p.event {
        e.difficulty = e.title.clone();
    }
    expect_code(post(&mut w, &p, &d), C::DisclosureMissing);
}

#[test]
fn attack_a_disclosed_value_that_breaks_the_fields_rule_is_refused() {
    let mut w = World::new();
    let mut c = w.case_added("case-x", "held-out");
    c.title = "bad\u{7}title".into();
    let mut p = w.payload("curator-a", Event::CaseAdded(c));
    p.schema = SCHEMA_VERSION;
    let body = w.with_disclosures(&sign_envelope(&key("curator-a"), &p));
    let r = expect_code(w.log.append(&body), C::InvalidText);
    assert_eq!(r.field, "event.body.title");
}

#[test]
fn attack_a_disposition_disclosed_outside_its_values_is_refused() {
    let mut w = World::new();
    let (mut p, mut d) = committed_case(&mut w, "case-x");
    let forged = disclose::disclosure(&[9u8; 32], "disposition", &Value::Str("maybe".into()));
    if let Event::CaseAdded(e) = &mut p.event {
        e.disposition = Sensitive::Committed(Commitment {
            sd: disclose::digest(&forged),
        });
    }
    d[1] = forged;
    let r = expect_code(post(&mut w, &p, &d), C::InvalidValue);
    assert_eq!(r.field, "event.body.disposition");
}

#[test]
fn attack_a_malformed_disclosure_is_refused() {
    let mut w = World::new();
    let (mut p, mut d) = committed_case(&mut w, "case-x");
    let bad = B64URL.encode(br#"["c2FsdA","title","t"]"#);
    if let Event::CaseAdded(e) = &mut p.event {
        e.title = Sensitive::Committed(Commitment {
            sd: disclose::digest(&bad),
        });
    }
    d[0] = bad;
    let r = expect_code(post(&mut w, &p, &d), C::DisclosureMalformed);
    assert_eq!(r.field, "disclosures[0]");
}

#[test]
fn attack_a_sensitive_value_in_clear_under_schema_2_is_refused() {
    let mut w = World::new();
    let c = w.case_added("case-x", "held-out");
    let p = Payload {
        schema: SCHEMA_VERSION,
        id: "clear-in-schema-2".into(),
        signer: events::key_id(&key("curator-a").verifying_key()),
        issued_at: "2026-11-01T00:00:00Z".into(),
        event: Event::CaseAdded(c),
    };
    let r = expect_code(post(&mut w, &p, &[]), C::SensitiveValueInClear);
    assert_eq!(r.field, "event.body.title");
}

#[test]
fn attack_a_commitment_under_schema_1_is_refused() {
    let mut w = World::new();
    let (mut p, d) = committed_case(&mut w, "case-x");
    p.schema = SCHEMA_CLEAR;
    let r = expect_code(post(&mut w, &p, &d), C::CommitmentNotAllowed);
    assert_eq!(r.field, "event.body.title");
}

#[test]
fn attack_a_commitment_that_is_not_a_digest_is_refused() {
    let mut w = World::new();
    let (mut p, d) = committed_case(&mut w, "case-x");
    if let Event::CaseAdded(e) = &mut p.event {
        e.title = Sensitive::Committed(Commitment { sd: "short".into() });
    }
    let r = expect_code(post(&mut w, &p, &d), C::InvalidValue);
    assert_eq!(r.field, "event.body.title._sd");
}

#[test]
fn attack_schema_1_after_the_log_switched_is_refused() {
    let mut w = World::new();
    let p = Payload {
        schema: SCHEMA_CLEAR,
        id: "clear-after-switch".into(),
        signer: events::key_id(&key("harness").verifying_key()),
        issued_at: "2026-11-01T00:00:00Z".into(),
        event: Event::ScoreRecorded(score("case-1", 0.5)),
    };
    let r = expect_code(post(&mut w, &p, &[]), C::SchemaSuperseded);
    assert_eq!(r.field, "schema");
    assert!(r.message.contains("from entry 0"), "{}", r.message);
}

/// A log written before schema 2 keeps its clear leaves; its first
/// schema-2 entry switches it, and the ledger's own events follow.
#[test]
fn a_schema_1_log_switches_at_its_first_schema_2_entry() {
    let dir = tempfile::tempdir().expect("dir");
    let log = open_log(dir.path());
    let clear = |id: &str, signer: &str, event: Event| {
        let p = Payload {
            schema: SCHEMA_CLEAR,
            id: id.into(),
            signer: events::key_id(&key(signer).verifying_key()),
            issued_at: "2026-11-01T00:00:00Z".into(),
            event,
        };
        sign_envelope(&key(signer), &p)
    };
    log.append(&clear(
        "genesis-operator",
        "operator",
        Event::PrincipalEnrolled(PrincipalEnrolled {
            sigstore: None,
            public_key: events::envelope::public_key_b64(&key("operator").verifying_key()),
            identity: "operator".into(),
            identity_name: None,
            roles: vec![Role::Operator],
        }),
    ))
    .expect("a schema-1 genesis");
    assert_eq!(log.schema(), SCHEMA_CLEAR);
    let enrol = |name: &str, role: Role| {
        Event::PrincipalEnrolled(PrincipalEnrolled {
            sigstore: None,
            public_key: events::envelope::public_key_b64(&key(name).verifying_key()),
            identity: format!("{name}@example.org"),
            identity_name: None,
            roles: vec![role],
        })
    };
    log.append(&clear(
        "enrol-harness",
        "operator",
        enrol("harness", Role::Harness),
    ))
    .expect("schema 1 before the switch");
    let mut p = Payload {
        schema: SCHEMA_VERSION,
        id: "revoke-harness".into(),
        signer: events::key_id(&key("operator").verifying_key()),
        issued_at: "2026-11-01T00:00:00Z".into(),
        event: Event::PrincipalRevoked(PrincipalRevoked {
            key_id: events::key_id(&key("harness").verifying_key()),
            reason: "laptop lost at INC-7".into(),
        }),
    };
    let d = disclose::commit(&mut p).expect("randomness");
    let r = log
        .append(&write_body(&sign_envelope(&key("operator"), &p), &d))
        .expect("the first schema-2 entry");
    assert_eq!(log.schema(), SCHEMA_VERSION);
    assert_eq!(log.state().commitments_from, Some(r.appended.index));
    let refused = log
        .append(&clear(
            "enrol-gate-late",
            "operator",
            enrol("gate", Role::Gate),
        ))
        .map(|_| ())
        .map_err(|e| match e {
            ledger::AppendError::Rejected { reason, .. } => reason.code,
            other => panic!("{other:?}"),
        });
    assert_eq!(refused, Err(C::SchemaSuperseded));
    // A replay from the first entry reads both schemas and finds the switch.
    let replayed = log.replay_state().expect("replay");
    assert_eq!(replayed.commitments_from, Some(r.appended.index));
}

/// One vector: a disclosure made of a salt, a field and a value, and its
/// digest; or bytes that are not a disclosure, and why.
fn vectors() -> serde_json::Value {
    let valid = [
        (vec![0u8; 16], "title", "A held-out case"),
        (
            (0..32).collect::<Vec<u8>>(),
            "provenance.source_ref",
            "GHSA-2024-0001 \"axios\" \u{e9}\u{2603}",
        ),
        (vec![0xff; 64], "disposition", "negative"),
        // Schema-3 companions: each digest is the handle of its value.
        ((0..32).collect::<Vec<u8>>(), "case_name", "GHSA-2024-0001"),
        (vec![0u8; 16], "identity_name", "ada@example.org"),
        (vec![0xff; 32], "draft.case_name", "INC-4411"),
    ];
    let valid: Vec<serde_json::Value> = valid
        .iter()
        .map(|(salt, field, value)| {
            let d = disclose::disclosure(salt, field, &Value::Str((*value).to_owned()));
            json!({
                "salt_hex": hex::encode(salt),
                "field": field,
                "value": value,
                "disclosure": d,
                "digest": disclose::digest(&d),
            })
        })
        .collect();
    let invalid = [
        (
            B64URL.encode(br#"["AAAAAAAAAAAAAAAAAAAAAA", "title", "t"]"#),
            "not canonical JSON (spaces)",
        ),
        (
            disclose::disclosure(&[0u8; 15], "title", &Value::Str("t".into())),
            "a salt of 15 bytes",
        ),
        (
            disclose::disclosure(&[0u8; 65], "title", &Value::Str("t".into())),
            "a salt of 65 bytes",
        ),
        (
            format!(
                "{}=",
                disclose::disclosure(&[0u8; 16], "title", &Value::Str("t".into()))
            ),
            "base64 padding",
        ),
        (
            B64URL.encode(br#"["AAAAAAAAAAAAAAAAAAAAAA","title"]"#),
            "two elements",
        ),
        (
            B64URL.encode(br#"["AAAAAAAAAAAAAAAAAAAAAA",7,"t"]"#),
            "a field that is not a string",
        ),
        (
            B64URL.encode(br#"{"salt":"AAAAAAAAAAAAAAAAAAAAAA"}"#),
            "not an array",
        ),
        ("not base64url!".to_owned(), "not base64url"),
    ];
    let invalid: Vec<serde_json::Value> = invalid
        .iter()
        .map(|(d, why)| json!({"disclosure": d, "why": why}))
        .collect();
    json!({
        "about": "Disclosures (docs/PRIVACY.md): each valid one is base64url of canonical JSON [salt, field, value] and hashes to its digest (for a schema-3 companion, case_name, draft.case_name, identity_name or workflow_name, the digest is the handle); each invalid one is refused with disclosure_malformed. Generated by events/tests/disclosures.rs (UPDATE_GOLDEN=1).",
        "valid": valid,
        "invalid": invalid,
    })
}

#[test]
fn the_disclosure_vectors_are_what_the_code_makes_and_refuses() {
    let v = vectors();
    let text = serde_json::to_string_pretty(&v).expect("json") + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(VECTORS, &text).expect("write");
    }
    let golden = std::fs::read_to_string(VECTORS).expect("vectors (UPDATE_GOLDEN=1)");
    assert_eq!(
        golden, text,
        "{VECTORS} is stale; regenerate with UPDATE_GOLDEN=1"
    );
    for case in v["valid"].as_array().expect("valid") {
        let d = case["disclosure"].as_str().expect("d");
        let o = disclose::parse(d, "d").expect("a valid vector parses");
        assert_eq!(o.path, case["field"].as_str().expect("field"));
        assert_eq!(
            disclose::digest(d),
            case["digest"].as_str().expect("digest")
        );
    }
    for case in v["invalid"].as_array().expect("invalid") {
        let d = case["disclosure"].as_str().expect("d");
        let r = disclose::parse(d, "d").expect_err(case["why"].as_str().expect("why"));
        assert_eq!(r.code, C::DisclosureMalformed);
    }
}

/// A case with commitments, appended; its index.
fn added_case(w: &mut World, id: &str) -> u64 {
    let c = w.case_added(id, "held-out");
    w.post("curator-a", Event::CaseAdded(c))
        .expect("case")
        .appended
        .index
}

fn redaction(w: &World, entry: u64, field: &str, by: (&str, &str)) -> FieldRedacted {
    w.redaction(entry, field, by)
}

fn parts(w: &World, entry: u64) -> Vec<ledger::private::Part> {
    w.log.ledger().private_parts(entry).expect("parts")
}

#[test]
fn a_redaction_by_two_maintainers_destroys_that_fields_disclosure_only() {
    let mut w = World::new();
    let at = added_case(&mut w, "case-r");
    let before = w.log.ledger().head();
    let r = redaction(
        &w,
        at,
        "provenance.source_ref",
        ("maintainer-a", "maintainer-b"),
    );
    w.post("maintainer-a", Event::FieldRedacted(r))
        .expect("redacted");
    let p = parts(&w, at);
    assert_eq!(p.len(), 5);
    assert_eq!(p[3], ledger::private::Part::Shredded);
    assert!(p[..3]
        .iter()
        .chain(&p[4..])
        .all(|p| matches!(p, ledger::private::Part::Open(_))));
    assert!(w
        .log
        .state()
        .redactions
        .contains(&(at, "provenance.source_ref".to_owned())));
    // The entry and every proof are as they were.
    let head = w.log.ledger().head();
    let proof = w
        .log
        .ledger()
        .consistency_proof(before.size, head.size)
        .expect("proof");
    ledger::merkle::verify_consistency(before.size, &before.root, head.size, &head.root, &proof)
        .expect("consistent");
    // A replay from the first entry agrees, and the log verifies.
    assert_eq!(w.log.replay_state().expect("replay"), w.log.state());
    let dir = w.dir.path().to_owned();
    let World { log, .. } = w;
    drop(log);
    ledger::verify_dir(&dir, &mut |_, _| {}).expect("verifies");
}

#[test]
fn attack_a_redaction_naming_another_leaf_hash_is_refused() {
    let mut w = World::new();
    let at = added_case(&mut w, "case-r");
    let mut r = redaction(&w, at, "title", ("maintainer-a", "maintainer-b"));
    r.leaf_hash = "00".repeat(32);
    let e = expect_code(
        w.post("maintainer-a", Event::FieldRedacted(r)),
        C::RedactionTargetMismatch,
    );
    assert_eq!(e.field, "event.body.leaf_hash");
    assert!(parts(&w, at)
        .iter()
        .all(|p| matches!(p, ledger::private::Part::Open(_))));
}

#[test]
fn attack_a_redaction_of_a_field_held_in_clear_is_refused() {
    let mut w = World::new();
    let at = added_case(&mut w, "case-r");
    let r = redaction(&w, at, "case_id", ("maintainer-a", "maintainer-b"));
    let e = expect_code(
        w.post("maintainer-a", Event::FieldRedacted(r)),
        C::RedactionFieldNotCommitted,
    );
    assert_eq!(e.field, "event.body.field");
}

#[test]
fn attack_a_redaction_of_a_later_entry_is_refused() {
    let mut w = World::new();
    let at = added_case(&mut w, "case-r");
    let mut r = redaction(&w, at, "title", ("maintainer-a", "maintainer-b"));
    r.entry = w.size() + 5;
    expect_code(
        w.post("maintainer-a", Event::FieldRedacted(r)),
        C::RedactionTargetMismatch,
    );
}

#[test]
fn attack_a_redaction_by_one_maintainer_twice_is_refused() {
    let mut w = World::new();
    let at = added_case(&mut w, "case-r");
    let r = redaction(&w, at, "title", ("maintainer-a", "maintainer-a"));
    expect_code(
        w.post("maintainer-a", Event::FieldRedacted(r)),
        C::CosignersNotDistinct,
    );
    assert!(parts(&w, at)
        .iter()
        .all(|p| matches!(p, ledger::private::Part::Open(_))));
}

#[test]
fn attack_a_redaction_confirmed_by_a_curator_is_refused() {
    let mut w = World::new();
    let at = added_case(&mut w, "case-r");
    let r = redaction(&w, at, "title", ("maintainer-a", "curator-b"));
    expect_code(
        w.post("maintainer-a", Event::FieldRedacted(r)),
        C::CosignerNotPermitted,
    );
}

#[test]
fn attack_a_redaction_by_a_curator_is_refused() {
    let mut w = World::new();
    let at = added_case(&mut w, "case-r");
    let r = redaction(&w, at, "title", ("maintainer-a", "maintainer-b"));
    expect_code(
        w.post("curator-a", Event::FieldRedacted(r)),
        C::RoleNotPermitted,
    );
}

#[test]
fn a_field_is_redacted_once() {
    let mut w = World::new();
    let at = added_case(&mut w, "case-r");
    let r = redaction(&w, at, "title", ("maintainer-a", "maintainer-b"));
    w.post("maintainer-a", Event::FieldRedacted(r))
        .expect("redacted");
    let again = redaction(&w, at, "title", ("maintainer-b", "maintainer-a"));
    expect_code(
        w.post("maintainer-b", Event::FieldRedacted(again)),
        C::AlreadyRedacted,
    );
}

/// A crash after the redaction is durable but before its key is destroyed
/// leaves the key; the next open destroys it.
#[test]
fn a_key_left_by_a_crash_is_destroyed_at_the_next_open() {
    let mut w = World::new();
    let at = added_case(&mut w, "case-r");
    let before = testkit::raw_keys(w.dir.path());
    let r = redaction(&w, at, "title", ("maintainer-a", "maintainer-b"));
    w.post("maintainer-a", Event::FieldRedacted(r))
        .expect("redacted");
    let dir = w.dir.path().to_owned();
    let World { dir: tmp, log, .. } = w;
    drop(log);
    // Put the destroyed key back, as if the process died before destroying it.
    let after = testkit::raw_keys(&dir);
    let slot = (0..before.len())
        .find(|&i| before[i] != after[i])
        .expect("one key destroyed");
    assert_eq!(after[slot], [0; 32]);
    testkit::put_raw_key(&dir, slot as u64, before[slot]);
    let log = open_log(&dir);
    assert_eq!(
        log.ledger().private_parts(at).expect("parts")[0],
        ledger::private::Part::Shredded
    );
    drop(log);
    drop(tmp);
}
