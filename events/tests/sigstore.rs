//! Co-signatures by Sigstore identity in every co-signed kind the HTTP
//! suite (`api/tests/sigstore_approvals.rs`) does not post: a case retired
//! and a field redacted, each co-signed by two principals enrolled by
//! identity; a bundle bound to the role it was signed in; and the root in
//! force at an entry's position, not today's, deciding its bundles on
//! every replay. Bundles come from the SYNTHETIC Sigstore instance
//! (`sigstore_check::synthetic`, public test keys), made at run time.

use events::model::FieldRedacted;
use events::model::{CoSignature, Event, Role, SigstoreIdentity};
use events::{sigstore_principal_id, sigstore_statement, RejectCode as C};
use sigstore_check::synthetic::{Synthetic, CURATOR, CURATOR_B, ISSUER, TRUSTED_ROOT};
use testkit::world::{expect_code, World};

const ORIGIN: &str = "world.example/log";

fn id(identity: &str) -> SigstoreIdentity {
    SigstoreIdentity {
        identity: identity.into(),
        issuer: ISSUER.into(),
    }
}

/// The world, a root recorded, and the two synthetic identities enrolled
/// as curators and maintainers.
fn world() -> World {
    let mut w = World::new();
    w.trust_sigstore_root(ORIGIN, TRUSTED_ROOT);
    for (who, identity) in [("s-a", CURATOR), ("s-b", CURATOR_B)] {
        w.enrol_by_identity(who, identity, ISSUER, vec![Role::Curator, Role::Maintainer]);
    }
    w
}

/// A co-signature by the synthetic certificate `label` (whose SAN is
/// `identity`) over `statement` in `role`.
fn by(label: &str, identity: &str, role: Role, statement: &[u8]) -> CoSignature {
    let bundle = Synthetic::load()
        .expect("synthetic")
        .sign(label, &sigstore_statement(ORIGIN, role, statement))
        .expect("signed");
    CoSignature {
        key_id: sigstore_principal_id(&id(identity)),
        signature: String::new(),
        sigstore_bundle: Some(bundle),
    }
}

fn retire_statement(c: &events::model::CaseRetired) -> Vec<u8> {
    events::envelope::case_retire_statement(&c.case_id, &testkit::world::case_digest("case-1"))
}

/// Case `name` retired, co-signed by both synthetic identities as curators.
fn retired_by_identities(w: &World, name: &str) -> events::model::CaseRetired {
    let mut c = w.retire(name);
    let st =
        events::envelope::case_retire_statement(&c.case_id, &testkit::world::case_digest(name));
    c.retired_by = by("curator", CURATOR, Role::Curator, &st);
    c.reviewed_by = by("curator-b", CURATOR_B, Role::Curator, &st);
    c
}

#[test]
fn a_case_is_retired_by_two_curators_enrolled_by_identity() {
    let mut w = world();
    let c = retired_by_identities(&w, "case-1");
    w.post("curator-a", Event::CaseRetired(c)).expect("retired");
    assert_eq!(w.log.replay_state().expect("replay"), w.log.state());
}

#[test]
fn a_field_is_redacted_by_two_maintainers_enrolled_by_identity() {
    let mut w = world();
    let at = w.log.ledger().head().size;
    let c = w.case_added("case-r", "held-out");
    w.post("curator-a", Event::CaseAdded(c)).expect("case");
    let leaf_hash = ledger::hash::to_hex(&w.log.ledger().entry(at).expect("entry").leaf_hash);
    let field = "provenance.source_ref";
    let st = events::envelope::field_redact_statement(at, &leaf_hash, field);
    let r = FieldRedacted {
        entry: at,
        leaf_hash,
        field: field.into(),
        reason: "a secret was pasted into it".into(),
        requested_by: by("curator", CURATOR, Role::Maintainer, &st),
        confirmed_by: by("curator-b", CURATOR_B, Role::Maintainer, &st),
    };
    w.post("maintainer-a", Event::FieldRedacted(r))
        .expect("redacted");
    assert!(w.log.state().redactions.contains(&(at, field.to_owned())));
    assert_eq!(w.log.replay_state().expect("replay"), w.log.state());
}

#[test]
fn attack_a_bundle_signed_in_another_role_is_refused() {
    let mut w = world();
    let mut c = w.retire("case-1");
    let st = retire_statement(&c);
    // Signed as a maintainer, offered where a curator co-signs.
    c.retired_by = by("curator", CURATOR, Role::Maintainer, &st);
    c.reviewed_by = by("curator-b", CURATOR_B, Role::Curator, &st);
    let size = w.size();
    let r = expect_code(
        w.post("curator-a", Event::CaseRetired(c)),
        C::SigstoreMessageMismatch,
    );
    assert_eq!(r.field, "event.body.retired_by.sigstore_bundle");
    assert_eq!(w.size(), size, "nothing appended");
}

#[test]
fn each_bundle_is_judged_by_the_root_in_force_where_it_was_appended() {
    let mut w = world();
    let c = retired_by_identities(&w, "case-1");
    w.post("curator-a", Event::CaseRetired(c)).expect("retired");
    // The operator moves the log to the production root: the synthetic
    // instance's bundles no longer verify from here on (the first check
    // that fails: no Rekor key of that root signed its SET).
    w.trust_sigstore_root(ORIGIN, sigstore_check::production_root_json());
    let c = retired_by_identities(&w, "case-2");
    let size = w.size();
    let r = expect_code(
        w.post("curator-a", Event::CaseRetired(c)),
        C::SigstoreTlogPromiseInvalid,
    );
    assert!(r.field.ends_with("retired_by.sigstore_bundle"), "{r:?}");
    assert_eq!(w.size(), size);
    // A replay from the first entry checks the earlier bundles against the
    // root recorded before them, and agrees.
    assert_eq!(w.log.replay_state().expect("replay"), w.log.state());
    assert_eq!(
        w.log.state().sigstore.map(|t| t.trusted_root),
        Some(sigstore_check::production_root_json().to_owned())
    );
}
