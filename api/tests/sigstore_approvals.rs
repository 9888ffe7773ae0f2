//! Approvals by Sigstore identity, end to end through the server: a curator
//! enrolled only by SAN and OIDC issuer co-signs a case with a Sigstore
//! bundle, verified offline at append time against the trusted root the log
//! records. The bundles come from the SYNTHETIC Sigstore instance
//! (`sigstore_check::synthetic`: a test CA, CT log and Rekor key whose
//! private keys are public), made at run time over the ledger's own
//! statements; nothing in the verifier is mocked. Each attack breaks one
//! thing, is refused with the code naming it, and appends nothing.

mod common;

use common::{seed, TestServer};
use events::envelope::{case_provenance_statement, format_micros};
use events::model::Role;
use events::model::{CaseAdded, CoSignature, Event, SigstoreIdentity};
use events::{sigstore_principal_id, sigstore_statement};
use sigstore_check::synthetic::{Synthetic, Tamper, CURATOR, CURATOR_B, ISSUER, TRUSTED_ROOT};
use testkit::world::{sample, T0, TASK_CLASS};
use verifier::client::Client;

const ORIGIN: &str = "test.example/log";

struct Fixture {
    s: TestServer,
    c: Client,
    synthetic: Synthetic,
}

impl Fixture {
    /// The seeded server, its trusted root recorded (unless `root` is
    /// false), and the synthetic curators enrolled by identity.
    fn new(root: bool) -> Fixture {
        Fixture::enrolled(root, ISSUER)
    }

    /// [`Fixture::new`], curator@example.org enrolled under `issuer`.
    fn enrolled(root: bool, issuer: &str) -> Fixture {
        let s = TestServer::start(|c| c.sigstore_allow_synthetic_root = true);
        let c = s.client();
        seed(&s, &c);
        let mut f = Fixture {
            s,
            c,
            synthetic: Synthetic::load().expect("the synthetic instance"),
        };
        if root {
            f.post("operator", root_event(ORIGIN, TRUSTED_ROOT))
                .expect("root recorded");
        }
        for (who, identity, issuer) in [
            ("sigstore-curator", CURATOR, issuer),
            ("sigstore-curator-b", CURATOR_B, ISSUER),
        ] {
            f.post("operator", enrol_by_identity(who, identity, issuer))
                .expect("enrolled by identity");
        }
        f
    }

    fn post(&mut self, signer: &str, event: Event) -> anyhow::Result<()> {
        self.s.poster(&self.c).post(signer, event).map(|_| ())
    }

    fn size(&self) -> u64 {
        self.s.state.events.ledger().head().size
    }

    /// Posts `event` as curator-a, expects it refused with `code` (its
    /// field ending in `field`), and nothing appended.
    fn refused(&mut self, event: Event, code: &str, field: &str) {
        let before = self.size();
        let r = self
            .s
            .poster(&self.c)
            .post_refused("curator-a", event)
            .expect("refused");
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("a problem document");
        assert_eq!(v["code"], code, "{v}");
        assert!(
            v["field"].as_str().unwrap_or_default().ends_with(field),
            "field {field}: {v}"
        );
        assert!((400..500).contains(&r.status), "{v}");
        assert_eq!(self.size(), before, "nothing appended");
    }

    /// Case `name`, added by curator-a's key and reviewed by `label`'s
    /// bundle (the synthetic certificate of that label) as principal
    /// `reviewer`, over the statement for `origin` and `role`.
    fn case(
        &self,
        name: &str,
        reviewer: (&str, &str),
        label: &str,
        tamper: Tamper,
        origin: &str,
        role: Role,
    ) -> CaseAdded {
        let mut c = case(name);
        let st = statement(&c);
        let bundle = self
            .synthetic
            .sign_tampered(label, &sigstore_statement(origin, role, &st), tamper)
            .expect("signed");
        c.provenance.reviewed_by = by_bundle(reviewer, bundle);
        c
    }
}

fn root_event(origin: &str, root: &str) -> Event {
    testkit::world::root_trusted(origin, root)
}

fn enrol_by_identity(who: &str, identity: &str, issuer: &str) -> Event {
    testkit::world::enrolled_by_identity(who, identity, issuer, vec![Role::Curator])
}

fn principal(identity: &str, issuer: &str) -> String {
    sigstore_principal_id(&SigstoreIdentity {
        identity: identity.into(),
        issuer: issuer.into(),
    })
}

fn by_bundle((identity, issuer): (&str, &str), bundle: String) -> CoSignature {
    CoSignature {
        key_id: principal(identity, issuer),
        signature: String::new(),
        sigstore_bundle: Some(bundle),
    }
}

/// A held-out case co-signed by curators a and b's keys.
fn case(name: &str) -> CaseAdded {
    sample().case_added(
        TASK_CLASS,
        name,
        "held-out",
        &format_micros(T0),
        (&demo_key("curator-a"), &demo_key("curator-b")),
    )
}

/// The key the seeded server's poster holds for `name`.
fn demo_key(name: &str) -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(
        blake3::hash(format!("evidence-ledger demo key {name}").as_bytes()).as_bytes(),
    )
}

fn statement(c: &CaseAdded) -> Vec<u8> {
    case_provenance_statement(&c.case_id, &c.provenance.added_at, &c.case_digest)
}

const GOOD: (&str, &str) = (CURATOR, ISSUER);

#[test]
fn a_curator_enrolled_by_sigstore_identity_co_signs_a_case() {
    let mut f = Fixture::new(true);
    let c = f.case(
        "sig-1",
        GOOD,
        "curator",
        Tamper::None,
        ORIGIN,
        Role::Curator,
    );
    let before = f.size();
    f.post("curator-a", Event::CaseAdded(c)).expect("appended");
    assert_eq!(f.size(), before + 1);
    // Both co-signatures by Sigstore identity: two distinct identities.
    let mut c = case("sig-2");
    let st = sigstore_statement(ORIGIN, Role::Curator, &statement(&c));
    c.provenance.added_by = by_bundle(
        (CURATOR_B, ISSUER),
        f.synthetic.sign("curator-b", &st).expect("signed"),
    );
    c.provenance.reviewed_by = by_bundle(GOOD, f.synthetic.sign("curator", &st).expect("signed"));
    f.post("curator-a", Event::CaseAdded(c)).expect("appended");
    // An auditor's replica replays the log through the server's API and
    // finds every projection equal to its own fold.
    let replica = tempfile::tempdir().expect("tempdir");
    let note = f.c.get_text("/checkpoint").expect("checkpoint");
    let cp = anchors::open_checkpoint(note.as_bytes(), &f.s.vkey).expect("signed");
    let rules = verifier::audit::ReplayRules {
        audited: (cp.size, cp.root),
        origin: cp.origin.clone(),
        settings: projections::Settings::default(),
        now_micros: events::Clock::now_micros(&events::SystemClock),
        max_skew_micros: 300 * 1_000_000,
    };
    let mut r = verifier::replay::Replica::open(replica.path()).expect("replica");
    verifier::audit::audit_projections(
        &f.c,
        &[f.s.vkey.clone()],
        &rules,
        &mut r,
        &mut |_, _, _| {},
    )
    .expect("the audit's replay accepts the log");
    // The bundles are kept in the leaves: a restart re-checks the whole
    // log (every bundle verified again against the root recorded before
    // it) and finds it sound.
    let s = f.s.restart(|_| {});
    s.wait_verified();
    assert_eq!(
        common::metric(&s.client(), "ledger_derived_check_status"),
        1.0
    );
}

#[test]
fn attack_wrong_identity_is_refused() {
    let mut f = Fixture::new(true);
    // curator-b's certificate, presented for the principal enrolled as curator.
    let c = f.case(
        "w-id",
        GOOD,
        "curator-b",
        Tamper::None,
        ORIGIN,
        Role::Curator,
    );
    f.refused(
        Event::CaseAdded(c),
        "sigstore_identity_mismatch",
        "reviewed_by.sigstore_bundle",
    );
}

#[test]
fn attack_wrong_issuer_is_refused() {
    // Enrolled under another issuer than its certificates name.
    let other = (CURATOR, "https://other-issuer.example.test");
    let mut f = Fixture::enrolled(true, other.1);
    let c = f.case(
        "w-iss",
        other,
        "curator",
        Tamper::None,
        ORIGIN,
        Role::Curator,
    );
    f.refused(
        Event::CaseAdded(c),
        "sigstore_issuer_mismatch",
        "reviewed_by.sigstore_bundle",
    );
}

#[test]
fn attack_certificate_expired_at_the_verified_time_is_refused() {
    let mut f = Fixture::new(true);
    let c = f.case(
        "w-exp",
        GOOD,
        "curator",
        Tamper::LoggedAfterExpiry,
        ORIGIN,
        Role::Curator,
    );
    f.refused(
        Event::CaseAdded(c),
        "sigstore_certificate_not_valid_at_time",
        "reviewed_by.sigstore_bundle",
    );
}

#[test]
fn attack_flipped_set_checkpoint_and_proof_are_refused() {
    let mut f = Fixture::new(true);
    for (name, tamper, code) in [
        ("w-set", Tamper::SetFlipped, "sigstore_tlog_promise_invalid"),
        (
            "w-cp",
            Tamper::CheckpointFlipped,
            "sigstore_tlog_checkpoint_invalid",
        ),
        (
            "w-proof",
            Tamper::InclusionFlipped,
            "sigstore_tlog_inclusion_invalid",
        ),
    ] {
        let c = f.case(name, GOOD, "curator", tamper, ORIGIN, Role::Curator);
        f.refused(Event::CaseAdded(c), code, "reviewed_by.sigstore_bundle");
    }
}

#[test]
fn attack_flipped_sct_and_untrusted_ct_key_are_refused() {
    let mut f = Fixture::new(true);
    for (name, label) in [("w-sct", "bad-sct"), ("w-ct", "rogue-ct")] {
        let c = f.case(name, GOOD, label, Tamper::None, ORIGIN, Role::Curator);
        f.refused(
            Event::CaseAdded(c),
            "sigstore_sct_invalid",
            "reviewed_by.sigstore_bundle",
        );
    }
}

#[test]
fn attack_the_same_curator_twice_is_refused() {
    let mut f = Fixture::new(true);
    let mut c = case("w-twice");
    let st = sigstore_statement(ORIGIN, Role::Curator, &statement(&c));
    let bundle = f.synthetic.sign("curator", &st).expect("signed");
    c.provenance.added_by = by_bundle(GOOD, bundle.clone());
    c.provenance.reviewed_by = by_bundle(GOOD, bundle);
    f.refused(Event::CaseAdded(c), "cosigners_not_distinct", "reviewed_by");
}

#[test]
fn attack_replayed_bundle_is_refused() {
    let mut f = Fixture::new(true);
    // A bundle that approved another case (public in Rekor once logged).
    let approved = f.case("r-1", GOOD, "curator", Tamper::None, ORIGIN, Role::Curator);
    let bundle = approved.provenance.reviewed_by.sigstore_bundle.clone();
    f.post("curator-a", Event::CaseAdded(approved))
        .expect("appended");
    let mut c = case("r-2");
    c.provenance.reviewed_by.key_id = principal(CURATOR, ISSUER);
    c.provenance.reviewed_by.signature = String::new();
    c.provenance.reviewed_by.sigstore_bundle = bundle;
    f.refused(
        Event::CaseAdded(c),
        "sigstore_message_mismatch",
        "reviewed_by.sigstore_bundle",
    );
}

#[test]
fn attack_bundle_for_another_log_or_role_is_refused() {
    let mut f = Fixture::new(true);
    let c = f.case(
        "o-1",
        GOOD,
        "curator",
        Tamper::None,
        "other.example/log",
        Role::Curator,
    );
    f.refused(
        Event::CaseAdded(c),
        "sigstore_message_mismatch",
        "reviewed_by.sigstore_bundle",
    );
    let c = f.case(
        "o-2",
        GOOD,
        "curator",
        Tamper::None,
        ORIGIN,
        Role::Maintainer,
    );
    f.refused(
        Event::CaseAdded(c),
        "sigstore_message_mismatch",
        "reviewed_by.sigstore_bundle",
    );
}

#[test]
fn a_bundle_before_any_trusted_root_is_refused() {
    let mut f = Fixture::new(false);
    let c = f.case("n-1", GOOD, "curator", Tamper::None, ORIGIN, Role::Curator);
    f.refused(
        Event::CaseAdded(c),
        "sigstore_root_missing",
        "reviewed_by.sigstore_bundle",
    );
}

#[test]
fn attack_trusted_root_for_another_origin_or_malformed_is_refused() {
    let f = Fixture::new(false);
    let before = f.size();
    for (event, code) in [
        (
            root_event("other.example/log", TRUSTED_ROOT),
            "sigstore_origin_mismatch",
        ),
        (
            root_event(ORIGIN, "{\"mediaType\": 1}"),
            "sigstore_trust_root_invalid",
        ),
    ] {
        let r =
            f.s.poster(&f.c)
                .post_refused("operator", event)
                .expect("refused");
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("problem");
        assert_eq!(v["code"], code, "{v}");
    }
    assert_eq!(f.size(), before, "nothing appended");
}

/// A root for another origin appended past the door (by a tool that opened
/// the data directory itself, which knows no origin): the server's start
/// finds it and withholds numbers, proofs and writes.
#[test]
fn attack_a_root_for_another_origin_appended_past_the_door_stops_the_server() {
    let s = root_for_another_origin_past_the_door();
    let c = s.client();
    assert!(
        common::within_30s(|| c
            .get("/readyz")
            .map(|r| r.status == 503 && r.text().contains("log_unverified"))
            .unwrap_or(false)),
        "the start does not accept the log"
    );
    let detail = s.state.verify_detail.lock().expect("detail").clone();
    assert!(
        detail.contains("Sigstore trusted root for origin \"other.example/log\""),
        "{detail}"
    );
}

/// A server restarted on its log after a root for "other.example/log" was
/// appended past the door.
fn root_for_another_origin_past_the_door() -> TestServer {
    past_the_door(Fixture::new(false))
}

fn past_the_door(f: Fixture) -> TestServer {
    let envelope =
        f.s.poster(&f.c)
            .envelope("operator", root_event("other.example/log", TRUSTED_ROOT));
    f.s.restart(|dir| {
        let text = std::fs::read_to_string(dir.join("log.key")).expect("key");
        let key = anchors::LogKey::from_private(&text).expect("key");
        let log = events::EventLog::open(
            dir,
            ledger::Config::default(),
            key.event_signing_key(),
            std::sync::Arc::new(events::SystemClock),
        )
        .expect("open");
        log.append(&envelope).expect("appended past the door");
    })
}

/// The audit's replay of `s`'s log up to its head into the replica in `dir`.
fn audit_replay(
    s: &TestServer,
    dir: &std::path::Path,
) -> Result<verifier::replay::Replayed, verifier::audit::AuditError> {
    // The server withholds its checkpoints from a log it does not accept;
    // the auditor holds one from earlier (here: the log's head).
    let head = s.state.events.ledger().head();
    let rules = verifier::audit::ReplayRules {
        audited: (head.size, head.root),
        origin: ORIGIN.into(),
        settings: projections::Settings::default(),
        now_micros: events::Clock::now_micros(&events::SystemClock),
        max_skew_micros: 300 * 1_000_000,
    };
    let mut r = verifier::replay::Replica::open(dir).expect("replica");
    verifier::audit::audit_projections(
        &s.client(),
        std::slice::from_ref(&s.vkey),
        &rules,
        &mut r,
        &mut |_, _, _| {},
    )
}

/// The same log, audited remotely by a replica that had checked the log
/// before (its rule state sealed and resumed): the audit's replay checks
/// the rules itself, and refuses a root that names another origin than the
/// audited checkpoint's, whatever the server says of it.
#[test]
fn attack_a_root_for_another_origin_fails_the_audit_replay() {
    let f = Fixture::new(false);
    let replica = tempfile::tempdir().expect("tempdir");
    audit_replay(&f.s, replica.path()).expect("the log before passes, and is sealed");
    let s = past_the_door(f);
    let r = verifier::replay::Replica::open(replica.path()).expect("replica");
    assert_eq!(r.rules_refused(), None, "the sealed rule state is resumed");
    drop(r);
    match audit_replay(&s, replica.path()) {
        Err(verifier::audit::AuditError::Failed(verifier::audit::AuditFailure::Diverged(why))) => {
            assert!(
                why.contains("Sigstore trusted root for origin \"other.example/log\""),
                "{why}"
            )
        }
        other => panic!("the replay accepted a root for another origin: {other:?}"),
    }
}

#[test]
fn a_key_co_signature_for_a_sigstore_principal_and_the_reverse_are_refused() {
    let mut f = Fixture::new(true);
    // The principal enrolled by identity, named with a key signature.
    let mut c = case("k-1");
    c.provenance.reviewed_by.key_id = principal(CURATOR, ISSUER);
    f.refused(
        Event::CaseAdded(c),
        "cosignature_invalid",
        "reviewed_by.sigstore_bundle",
    );
    // A principal enrolled by key, given a bundle.
    let mut c = f.case("k-2", GOOD, "curator", Tamper::None, ORIGIN, Role::Curator);
    c.provenance.reviewed_by.key_id = events::key_id(&demo_key("curator-b").verifying_key());
    f.refused(
        Event::CaseAdded(c),
        "cosignature_invalid",
        "reviewed_by.sigstore_bundle",
    );
}

#[test]
fn a_principal_enrolled_by_identity_cannot_hold_the_operator_role() {
    let f = Fixture::new(true);
    let Event::PrincipalEnrolled(mut e) = enrol_by_identity("op", "op@example.org", ISSUER) else {
        unreachable!()
    };
    e.roles = vec![Role::Operator];
    let before = f.size();
    let r =
        f.s.poster(&f.c)
            .post_refused("operator", Event::PrincipalEnrolled(e))
            .expect("refused");
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("problem");
    assert_eq!(v["code"], "invalid_value", "{v}");
    assert_eq!(f.size(), before);
}

#[test]
fn attack_one_san_enrolled_again_under_another_issuer_is_refused() {
    // Public-good Fulcio issues one e-mail SAN through several issuers:
    // enrolled twice, one person would be two co-signers.
    let f = Fixture::new(true);
    let before = f.size();
    for identity in [CURATOR, "Curator@Example.org"] {
        let r =
            f.s.poster(&f.c)
                .post_refused(
                    "operator",
                    enrol_by_identity("again", identity, "https://github.com/login/oauth"),
                )
                .expect("refused");
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("problem");
        assert_eq!(v["code"], "principal_exists", "{v}");
        assert_eq!(v["field"], "event.body.sigstore.identity", "{v}");
    }
    assert_eq!(f.size(), before);
}

#[test]
fn attack_the_synthetic_root_on_a_server_not_configured_for_it_is_refused() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    let before = s.state.events.ledger().head().size;
    // However it is written: the same keys, re-indented.
    let v: serde_json::Value = serde_json::from_str(TRUSTED_ROOT).expect("json");
    for root in [
        TRUSTED_ROOT.to_owned(),
        serde_json::to_string_pretty(&v).expect("json"),
    ] {
        let r = s
            .poster(&c)
            .post_refused("operator", root_event(ORIGIN, &root))
            .expect("refused");
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("problem");
        assert_eq!(v["code"], "sigstore_trust_root_invalid", "{v}");
        assert_eq!(v["field"], "event.body.trusted_root", "{v}");
    }
    assert_eq!(s.state.events.ledger().head().size, before);
}

#[test]
fn attack_a_genuine_bundle_padded_outside_the_profile_is_refused() {
    // The bundle's JSON is not signed: whoever posts it can add what one
    // verifier ignores and another refuses. Each pad is refused before
    // any cryptography, and nothing is appended.
    let mut f = Fixture::new(true);
    let good = f.case("p-0", GOOD, "curator", Tamper::None, ORIGIN, Role::Curator);
    let bundle = good
        .provenance
        .reviewed_by
        .sigstore_bundle
        .clone()
        .expect("bundle");
    let v: serde_json::Value = serde_json::from_str(&bundle).expect("json");
    let mut unknown = v.clone();
    unknown["verificationMaterial"]["note"] = "ignored by one verifier".into();
    let mut two_entries = v.clone();
    let entry = two_entries["verificationMaterial"]["tlogEntries"][0].clone();
    two_entries["verificationMaterial"]["tlogEntries"]
        .as_array_mut()
        .expect("entries")
        .push(entry);
    let repeated = bundle.replacen('{', r#"{"mediaType":"x","#, 1);
    let huge = {
        let mut h = v.clone();
        h["messageSignature"]["signature"] = "A".repeat(20_000).into();
        h
    };
    for (i, padded) in [
        unknown.to_string(),
        two_entries.to_string(),
        repeated,
        huge.to_string(),
    ]
    .into_iter()
    .enumerate()
    {
        let mut c = case(&format!("p-{}", i + 1));
        c.provenance.reviewed_by = by_bundle(GOOD, padded);
        f.refused(
            Event::CaseAdded(c),
            "sigstore_bundle_unsupported",
            "reviewed_by.sigstore_bundle",
        );
    }
    // The bundle as made still goes in.
    f.post("curator-a", Event::CaseAdded(good))
        .expect("appended");
}
