//! The public sigstore-conformance bundle-verification cases, real data,
//! read from `../shared/sigstore-conformance/` beside the checkout (its
//! SOURCE.md names the upstream commit; the files are not copied into this
//! repository). Every case must give its expected answer through
//! `sigstore_check::verify`, and every case expected to fail must fail with
//! the code this table names: a forged bundle refused for the wrong reason
//! is a finding too.

use std::path::{Path, PathBuf};

use sigstore_check::{verify, Code, Signer, TrustRoot};

/// The identity and issuer the suite signs with, where a case names none.
const DEFAULT_IDENTITY: &str = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
const DEFAULT_ISSUER: &str = "https://token.actions.githubusercontent.com";

/// Each case expected to fail, and the code it must fail with.
const EXPECTED_REFUSALS: &[(&str, Code)] = &[
    // A v0.1 bundle without a checkpoint: refused at that, before its chain is read.
    (
        "bundle-empty-certificate-chain_fail",
        Code::TlogCheckpointInvalid,
    ),
    ("bundle-from-wrong-instance_fail", Code::TlogPromiseInvalid),
    (
        "bundle-invalid-base64-signature_fail",
        Code::BundleMalformed,
    ),
    ("bundle-malformed-json_fail", Code::BundleMalformed),
    ("bundle-negative-log-index_fail", Code::BundleMalformed),
    ("bundle-unknown-version_fail", Code::BundleMalformed),
    // As above: no checkpoint, refused before its chain is read.
    ("bundle-with-root-cert_fail", Code::TlogCheckpointInvalid),
    ("checkpoint-bad-keyhint_fail", Code::TlogCheckpointInvalid),
    (
        "checkpoint-wrong-roothash_fail",
        Code::TlogCheckpointInvalid,
    ),
    ("dsse-invalid-sig_fail", Code::SignatureInvalid),
    ("dsse-mismatch-envelope_fail", Code::TlogEntryMismatch),
    ("dsse-mismatch-sig_fail", Code::TlogEntryMismatch),
    (
        "inclusion-proof-corrupted-hash_fail",
        Code::TlogInclusionInvalid,
    ),
    ("incorrect-public-key_fail", Code::TlogPromiseInvalid),
    (
        "integrated-time-in-future_fail",
        Code::CertificateNotValidAtTime,
    ),
    (
        "intoto-expired-certificate_fail",
        Code::CertificateNotValidAtTime,
    ),
    ("intoto-log-entry-mismatch_fail", Code::TlogEntryMismatch),
    (
        "intoto-missing-inclusion-proof_fail",
        Code::TlogInclusionInvalid,
    ),
    (
        "intoto-set-outside-signing-cert-validity_fail",
        Code::CertificateNotValidAtTime,
    ),
    (
        "intoto-tsa-timestamp-outside-cert-validity_fail",
        Code::CertificateNotValidAtTime,
    ),
    (
        "invalid-checkpoint-signature_fail",
        Code::TlogCheckpointInvalid,
    ),
    ("invalid-ct-key_fail", Code::SctInvalid),
    // As above: no checkpoint, refused before its proof is checked.
    ("invalid-inclusion-proof_fail", Code::TlogCheckpointInvalid),
    ("managed-key-no-key_fail", Code::BundleMalformed),
    // Its key.pub is not valid base64 (the case garbles the key itself).
    ("managed-key-wrong-key_fail", Code::KeyInvalid),
    ("message-digest-mismatch_fail", Code::MessageMismatch),
    (
        "rekor2-checkpoint-missing-log-signature_fail",
        Code::BundleMalformed,
    ),
    (
        "rekor2-checkpoint-missing-origin_fail",
        Code::BundleMalformed,
    ),
    (
        "rekor2-checkpoint-missing-root-hash_fail",
        Code::BundleMalformed,
    ),
    ("rekor2-checkpoint-missing-size_fail", Code::BundleMalformed),
    (
        "rekor2-checkpoint-no-matching-signature_fail",
        Code::TlogCheckpointInvalid,
    ),
    ("rekor2-dsse-invalid-sig_fail", Code::SignatureInvalid),
    ("rekor2-dsse-mismatch-envelope_fail", Code::MessageMismatch),
    ("rekor2-dsse-mismatch-sig_fail", Code::TlogEntryMismatch),
    ("rekor2-no-inclusion-proof_fail", Code::TlogInclusionInvalid),
    ("rekor2-no-timestamp_fail", Code::TimestampInvalid),
    (
        "rekor2-timestamp-outside-trust-root-tsa-validity_fail",
        Code::TimestampInvalid,
    ),
    (
        "rekor2-timestamp-outside-tsa-cert-validity_fail",
        Code::TimestampInvalid,
    ),
    (
        "rekor2-timestamp-payload-mismatch_fail",
        Code::TimestampInvalid,
    ),
    (
        "rekor2-timestamp-untrusted-tsa-with-embedded-cert_fail",
        Code::TimestampInvalid,
    ),
    (
        "rekor2-timestamp-untrusted-tsa-without-embedded-cert_fail",
        Code::TimestampInvalid,
    ),
    // Its timestamp is base64 wrapped with newlines (as the case was made):
    // refused as malformed before the time is compared.
    (
        "rekor2-timestamp-with-incorrect-time_fail",
        Code::BundleMalformed,
    ),
    ("set-invalid-signature_fail", Code::TlogPromiseInvalid),
    ("signature-mismatch_fail", Code::SignatureInvalid),
    (
        "trust-root-tlog-missing-validity-start_fail",
        Code::TrustRootInvalid,
    ),
    ("wrong-hashedrekord-artifact_fail", Code::MessageMismatch),
    (
        "wrong-hashedrekord-cert-and-sig_fail",
        Code::TlogEntryMismatch,
    ),
    ("wrong-hashedrekord-entry_fail", Code::MessageMismatch),
    ("wrong-material_fail", Code::MessageMismatch),
];

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/sigstore-conformance")
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The answer of one case: Ok, or the refusal's code and detail.
fn run(dir: &Path) -> Result<(), (Code, String)> {
    let bundle = read(&dir.join("bundle.sigstore.json")).expect("bundle.sigstore.json");
    let artifact = std::fs::read(dir.join("artifact"))
        .or_else(|_| std::fs::read(dir.join("../a.txt")))
        .expect("the artifact");
    let root = match read(&dir.join("trusted_root.json")) {
        Some(json) => TrustRoot::from_json(&json),
        None => TrustRoot::production(),
    }
    .map_err(|r| (r.code, r.detail))?;
    let identity = read(&dir.join("identity"));
    let issuer = read(&dir.join("issuer"));
    let key = read(&dir.join("key.pub"));
    let signer = match &key {
        Some(pem) => Signer::Key { pem },
        None => Signer::Identity {
            identity: identity.as_deref().map_or(DEFAULT_IDENTITY, str::trim),
            issuer: issuer.as_deref().map_or(DEFAULT_ISSUER, str::trim),
        },
    };
    verify(&bundle, &artifact, &signer, &root)
        .map(|_| ())
        .map_err(|r| (r.code, r.detail))
}

#[test]
fn every_conformance_case_gives_its_expected_answer() {
    let dir = cases_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e}; the conformance cases are read from shared/ beside the checkout",
                dir.display()
            )
        })
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("bundle.sigstore.json").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 70, "only {} cases", names.len());
    let mut wrong = Vec::new();
    let mut refused = Vec::new();
    for name in &names {
        let answer = run(&dir.join(name));
        let should_fail = name.ends_with("_fail");
        match (&answer, should_fail) {
            (Ok(()), false) => {}
            (Ok(()), true) => wrong.push(format!("{name}: accepted, must be refused")),
            (Err((code, detail)), false) => {
                wrong.push(format!("{name}: refused ({code}: {detail}), must verify"))
            }
            (Err((code, detail)), true) => {
                refused.push(format!("{name}: {code}"));
                match EXPECTED_REFUSALS.iter().find(|(n, _)| n == name) {
                    Some((_, expected)) if expected == code => {}
                    Some((_, expected)) => wrong.push(format!(
                        "{name}: refused with {code} ({detail}), expected {expected}"
                    )),
                    None => wrong.push(format!(
                        "{name}: refused with {code} ({detail}), but the table names no code for it"
                    )),
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases wrong:\n{}\n\nrefusals:\n{}",
        wrong.len(),
        names.len(),
        wrong.join("\n"),
        refused.join("\n")
    );
    for (name, _) in EXPECTED_REFUSALS {
        assert!(names.iter().any(|n| n == name), "{name}: no such case");
    }
}

/// The suite's happy-path v0.3 bundle, its artifact and the production root.
fn happy_path() -> (String, Vec<u8>, TrustRoot) {
    let dir = cases_dir();
    let bundle = read(&dir.join("happy-path-v0.3/bundle.sigstore.json")).expect("bundle");
    let artifact = std::fs::read(dir.join("a.txt")).expect("a.txt");
    (bundle, artifact, TrustRoot::production().expect("root"))
}

#[test]
fn attack_a_genuine_bundle_presented_for_another_identity_is_refused() {
    let (bundle, artifact, root) = happy_path();
    let signer = Signer::Identity {
        identity: "curator@example.org",
        issuer: DEFAULT_ISSUER,
    };
    let e = verify(&bundle, &artifact, &signer, &root).expect_err("refused");
    assert_eq!(e.code, Code::IdentityMismatch, "{e}");
}

#[test]
fn attack_a_genuine_bundle_presented_for_another_issuer_is_refused() {
    let (bundle, artifact, root) = happy_path();
    let signer = Signer::Identity {
        identity: DEFAULT_IDENTITY,
        issuer: "https://accounts.google.com",
    };
    let e = verify(&bundle, &artifact, &signer, &root).expect_err("refused");
    assert_eq!(e.code, Code::IssuerMismatch, "{e}");
}

#[test]
fn attack_a_genuine_bundle_replayed_over_another_message_is_refused() {
    let (bundle, mut artifact, root) = happy_path();
    artifact.push(b'!');
    let signer = Signer::Identity {
        identity: DEFAULT_IDENTITY,
        issuer: DEFAULT_ISSUER,
    };
    let e = verify(&bundle, &artifact, &signer, &root).expect_err("refused");
    assert_eq!(e.code, Code::MessageMismatch, "{e}");
}

#[test]
fn a_genuine_bundle_tells_who_signed_and_when() {
    let (bundle, artifact, root) = happy_path();
    let signer = Signer::Identity {
        identity: DEFAULT_IDENTITY,
        issuer: DEFAULT_ISSUER,
    };
    let v = verify(&bundle, &artifact, &signer, &root).expect("verifies");
    assert_eq!(v.identity.as_deref(), Some(DEFAULT_IDENTITY));
    assert_eq!(v.issuer.as_deref(), Some(DEFAULT_ISSUER));
    assert!(v.signed_at.is_some_and(|t| t > 1_600_000_000), "{v:?}");
}

#[test]
fn attack_a_dsse_attestation_is_not_taken_for_a_signature_over_the_message() {
    let dir = cases_dir().join("happy-path-intoto-in-dsse-v3");
    let bundle = read(&dir.join("bundle.sigstore.json")).expect("bundle");
    let artifact = std::fs::read(dir.join("artifact"))
        .or_else(|_| std::fs::read(cases_dir().join("a.txt")))
        .expect("artifact");
    let signer = Signer::Identity {
        identity: DEFAULT_IDENTITY,
        issuer: DEFAULT_ISSUER,
    };
    let root = TrustRoot::production().expect("root");
    verify(&bundle, &artifact, &signer, &root).expect("a valid attestation of the artifact");
    let e = sigstore_check::verify_message(&bundle, &artifact, &signer, &root)
        .expect_err("refused as a message signature");
    assert_eq!(e.code, Code::BundleUnsupported, "{e}");
}
