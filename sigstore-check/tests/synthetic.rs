//! A SYNTHETIC Sigstore instance (testdata/synthetic/, made by its gen.py
//! with test-only keys): a Fulcio-style CA, a CT log and a Rekor v1 log of
//! our own, so bundles can be made that real Sigstore would never issue.
//! Nothing in the verifier is mocked: each bundle goes through
//! `sigstore_check::verify` against the synthetic trusted root, the good
//! ones verify and report who signed and when, and each attack breaks one
//! check and is refused with the code naming that check.

use sigstore_check::{verify, Code, Refusal, Signer, TrustRoot, Verified};

const TRUSTED_ROOT: &str = include_str!("../testdata/synthetic/trusted_root.json");
const STATEMENT: &[u8] = include_bytes!("../testdata/synthetic/statement.txt");
const OTHER_STATEMENT: &[u8] = include_bytes!("../testdata/synthetic/other-statement.txt");

const GOOD: &str = include_str!("../testdata/synthetic/good.bundle.json");
const SECOND_CURATOR: &str = include_str!("../testdata/synthetic/second-curator.bundle.json");
const URI_IDENTITY: &str = include_str!("../testdata/synthetic/uri-identity.bundle.json");
const CERT_EXPIRED: &str = include_str!("../testdata/synthetic/cert-expired.bundle.json");
const SET_FLIPPED: &str = include_str!("../testdata/synthetic/set-flipped.bundle.json");
const CHECKPOINT_FLIPPED: &str =
    include_str!("../testdata/synthetic/checkpoint-flipped.bundle.json");
const INCLUSION_FLIPPED: &str = include_str!("../testdata/synthetic/inclusion-flipped.bundle.json");
const SCT_BAD_SIGNATURE: &str = include_str!("../testdata/synthetic/sct-bad-signature.bundle.json");
const SCT_UNTRUSTED_LOG: &str = include_str!("../testdata/synthetic/sct-untrusted-log.bundle.json");
const REKOR_V2: &str = include_str!("../testdata/synthetic/rekor-v2.bundle.json");

const ISSUER: &str = "https://issuer.example.test";
const CURATOR: &str = "curator@example.org";
const CURATOR_B: &str = "curator-b@example.org";
const OTHER_ISSUER: &str = "https://other-issuer.example.test";
const URI: &str = "https://ci.example.test/workflows/release.yml@refs/heads/main";

/// gen.py's T0, 2025-06-01T12:00:00Z: each signing's certificate starts at
/// T0 plus a whole number of minutes and is logged 30 s later.
const T0: i64 = 1_748_779_200;

fn root() -> TrustRoot {
    TrustRoot::from_json(TRUSTED_ROOT).expect("the synthetic trusted root loads")
}

fn check(bundle: &str, message: &[u8], identity: &str, issuer: &str) -> Result<Verified, Refusal> {
    verify(
        bundle,
        message,
        &Signer::Identity { identity, issuer },
        &root(),
    )
}

fn refused(bundle: &str, message: &[u8], identity: &str, issuer: &str) -> Refusal {
    check(bundle, message, identity, issuer).expect_err("the attack is refused")
}

/// The refusal has `code`, and the library's words say why: an attack
/// refused by another check than the one it targets would be a finding.
fn assert_refused(e: &Refusal, code: Code, because: &str) {
    assert_eq!(e.code, code, "{e}");
    assert!(e.detail.contains(because), "expected {because:?} in: {e}");
}

// ---------------------------------------------------------------- good

#[test]
fn good_bundle_verifies_and_reports_signer_and_time() {
    let v = check(GOOD, STATEMENT, CURATOR, ISSUER).expect("the good bundle verifies");
    assert_eq!(v.identity.as_deref(), Some(CURATOR));
    assert_eq!(v.issuer.as_deref(), Some(ISSUER));
    assert_eq!(v.signed_at, Some(T0 + 30));
}

#[test]
fn second_curator_bundle_verifies_as_the_second_curator() {
    let v = check(SECOND_CURATOR, STATEMENT, CURATOR_B, ISSUER).expect("verifies");
    assert_eq!(v.identity.as_deref(), Some(CURATOR_B));
    assert_eq!(v.issuer.as_deref(), Some(ISSUER));
    assert_eq!(v.signed_at, Some(T0 + 60 + 30));
}

#[test]
fn uri_identity_bundle_verifies() {
    let v = check(URI_IDENTITY, STATEMENT, URI, ISSUER).expect("verifies");
    assert_eq!(v.identity.as_deref(), Some(URI));
    assert_eq!(v.issuer.as_deref(), Some(ISSUER));
    assert_eq!(v.signed_at, Some(T0 + 2 * 60 + 30));
}

#[test]
fn rekor_v2_bundle_verifies_at_its_rfc3161_time() {
    // A Rekor v2 entry states no time: the timestamp authority's is the
    // verified time.
    let v = check(REKOR_V2, STATEMENT, CURATOR, ISSUER).expect("verifies");
    assert_eq!(v.identity.as_deref(), Some(CURATOR));
    assert_eq!(v.signed_at, Some(T0 + 6 * 60 + 30));
}

// ---------------------------------------------------------------- attacks

#[test]
fn attack_rekor_v2_bundle_without_its_timestamp() {
    let mut b: serde_json::Value = serde_json::from_str(REKOR_V2).expect("json");
    b["verificationMaterial"]
        .as_object_mut()
        .expect("material")
        .remove("timestampVerificationData");
    let e = refused(&b.to_string(), STATEMENT, CURATOR, ISSUER);
    assert_refused(
        &e,
        Code::TimestampInvalid,
        "V2 bundle requires RFC3161 timestamp",
    );
}

#[test]
fn attack_wrong_identity_expected() {
    let e = refused(GOOD, STATEMENT, "someone-else@example.org", ISSUER);
    assert_refused(
        &e,
        Code::IdentityMismatch,
        &format!("identity mismatch: expected someone-else@example.org, got {CURATOR}"),
    );
}

#[test]
fn attack_second_curator_presented_as_the_first() {
    // A genuine bundle by curator-b does not count as curator's.
    let e = refused(SECOND_CURATOR, STATEMENT, CURATOR, ISSUER);
    assert_refused(
        &e,
        Code::IdentityMismatch,
        &format!("identity mismatch: expected {CURATOR}, got {CURATOR_B}"),
    );
}

#[test]
fn attack_wrong_issuer_expected() {
    let e = refused(GOOD, STATEMENT, CURATOR, OTHER_ISSUER);
    assert_refused(
        &e,
        Code::IssuerMismatch,
        &format!("issuer mismatch: expected {OTHER_ISSUER}, got {ISSUER}"),
    );
}

#[test]
fn attack_replay_over_another_statement() {
    let e = refused(GOOD, OTHER_STATEMENT, CURATOR, ISSUER);
    assert_refused(
        &e,
        Code::MessageMismatch,
        "message digest in bundle does not match artifact hash",
    );
}

#[test]
fn attack_certificate_expired_at_integrated_time() {
    // Logged, with a valid SET, 20 minutes after its 10-minute certificate
    // expired. The chain check at the SET's time refuses it first (the
    // tlog's own integrated-time check would refuse it later).
    let e = refused(CERT_EXPIRED, STATEMENT, CURATOR, ISSUER);
    assert_refused(&e, Code::CertificateNotValidAtTime, "CertExpired");
}

#[test]
fn attack_set_signature_flipped() {
    let e = refused(SET_FLIPPED, STATEMENT, CURATOR, ISSUER);
    assert_refused(&e, Code::TlogPromiseInvalid, "SET verification failed");
}

#[test]
fn attack_checkpoint_signature_flipped() {
    let e = refused(CHECKPOINT_FLIPPED, STATEMENT, CURATOR, ISSUER);
    assert_refused(
        &e,
        Code::TlogCheckpointInvalid,
        "No valid Rekor signature found on checkpoint",
    );
}

#[test]
fn attack_inclusion_proof_hash_flipped() {
    let e = refused(INCLUSION_FLIPPED, STATEMENT, CURATOR, ISSUER);
    assert_refused(
        &e,
        Code::TlogInclusionInvalid,
        "inclusion proof verification failed",
    );
}

#[test]
fn attack_sct_signature_flipped() {
    let e = refused(SCT_BAD_SIGNATURE, STATEMENT, CURATOR, ISSUER);
    // The trusted CT key was found (its log ID is the SCT's): the signature
    // is what fails.
    assert_refused(&e, Code::SctInvalid, "SCT signature verification failed: ");
    assert!(!e.detail.contains("key not found"), "{e}");
}

#[test]
fn attack_sct_from_a_ct_log_not_in_the_trusted_root() {
    let e = refused(SCT_UNTRUSTED_LOG, STATEMENT, CURATOR, ISSUER);
    // The rogue log signs under its own log ID, which the root lacks.
    assert_refused(&e, Code::SctInvalid, "key not found or not valid at");
}
