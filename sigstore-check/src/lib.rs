//! Sigstore bundles verified offline, with every check required.
//!
//! One entry point, [`verify`]: a Sigstore bundle (v0.1, v0.2 or v0.3) over
//! some message, the signer it must come from, and the trusted root the
//! operator pinned. The checks are `sigstore-verify`'s (docs/DECISIONS.md
//! says why that crate): for a signer named by identity, the Fulcio
//! certificate chains to a trusted authority with code-signing usage and is
//! valid at a verified time (the SET's integrated time, or an RFC 3161
//! timestamp, which Rekor v2 bundles need), its SCT verifies against a
//! trusted CT log, its SAN and OIDC issuer equal the expected ones, the
//! transparency-log inclusion proof and checkpoint (and the SET, when
//! present) verify against a trusted Rekor key (a v0.1 bundle may carry the
//! SET alone, as the Sigstore clients accept), and the signature verifies
//! over the message. For a signer named by a public key there is no
//! certificate: the signature must verify under that key and the log
//! evidence as above, and the bundle must carry a verified time (a SET or
//! an RFC 3161 timestamp), which the library leaves optional for a managed
//! key. None of the library's switches that skip a check is
//! ever set, and a result that does not report every check as done is
//! refused as well ([`Code::ChecksIncomplete`]).
//!
//! Nothing here reaches the network: there is no TUF client and no HTTP.
//! A refusal is a [`Refusal`] with a stable [`Code`] naming what failed.

#![forbid(unsafe_code)]

pub mod rekor;
pub mod synthetic;

use sigstore_verify::bundle::Error as BundleError;
use sigstore_verify::trust_root::{TrustedRoot, SIGSTORE_PRODUCTION_TRUSTED_ROOT};
use sigstore_verify::types::{Bundle, DerPublicKey};
use sigstore_verify::{
    CertificateError, Error as LibError, PublicKeyVerificationPolicy, TimestampError,
    TransparencyLogError, VerificationPolicy, Verifier,
};

/// What failed, as a stable code (`sigstore_…`), for HTTP problems and
/// tests to match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// The bundle is not JSON of a Sigstore bundle, or is inconsistent.
    BundleMalformed,
    /// A well-formed bundle of a version, content or key type not supported.
    BundleUnsupported,
    /// The trusted root is malformed or unusable.
    TrustRootInvalid,
    /// The signing certificate is malformed or does not chain to a trusted
    /// Fulcio authority with code-signing usage.
    CertificateInvalid,
    /// The signing certificate was not valid at the verified signing time.
    CertificateNotValidAtTime,
    /// The certificate's signed certificate timestamp is missing or does not
    /// verify against a trusted CT log.
    SctInvalid,
    /// An RFC 3161 timestamp did not verify, or no verified time exists.
    TimestampInvalid,
    /// The log entry names a transparency log the trusted root lacks.
    TlogUnknown,
    /// The inclusion proof does not prove the entry into the log.
    TlogInclusionInvalid,
    /// The log's checkpoint is missing, malformed or not signed by it.
    TlogCheckpointInvalid,
    /// The inclusion promise (SET) is missing or does not verify.
    TlogPromiseInvalid,
    /// The log entry does not describe this bundle.
    TlogEntryMismatch,
    /// The entry's integrated time is in the future or outside the
    /// certificate's validity.
    TlogTimeInvalid,
    /// The signature does not verify over the message.
    SignatureInvalid,
    /// The bundle signs another message.
    MessageMismatch,
    /// The certificate names another identity.
    IdentityMismatch,
    /// The certificate names another OIDC issuer.
    IssuerMismatch,
    /// The expected public key is not a PEM `PUBLIC KEY`.
    KeyInvalid,
    /// The verification reported a check as not done.
    ChecksIncomplete,
    /// Refused for a reason this build does not classify.
    Refused,
}

impl Code {
    /// Every code, for tests and documentation.
    pub const ALL: [Code; 20] = [
        Code::BundleMalformed,
        Code::BundleUnsupported,
        Code::TrustRootInvalid,
        Code::CertificateInvalid,
        Code::CertificateNotValidAtTime,
        Code::SctInvalid,
        Code::TimestampInvalid,
        Code::TlogUnknown,
        Code::TlogInclusionInvalid,
        Code::TlogCheckpointInvalid,
        Code::TlogPromiseInvalid,
        Code::TlogEntryMismatch,
        Code::TlogTimeInvalid,
        Code::SignatureInvalid,
        Code::MessageMismatch,
        Code::IdentityMismatch,
        Code::IssuerMismatch,
        Code::KeyInvalid,
        Code::ChecksIncomplete,
        Code::Refused,
    ];

    /// The stable code.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::BundleMalformed => "sigstore_bundle_malformed",
            Code::BundleUnsupported => "sigstore_bundle_unsupported",
            Code::TrustRootInvalid => "sigstore_trust_root_invalid",
            Code::CertificateInvalid => "sigstore_certificate_invalid",
            Code::CertificateNotValidAtTime => "sigstore_certificate_not_valid_at_time",
            Code::SctInvalid => "sigstore_sct_invalid",
            Code::TimestampInvalid => "sigstore_timestamp_invalid",
            Code::TlogUnknown => "sigstore_tlog_unknown",
            Code::TlogInclusionInvalid => "sigstore_tlog_inclusion_invalid",
            Code::TlogCheckpointInvalid => "sigstore_tlog_checkpoint_invalid",
            Code::TlogPromiseInvalid => "sigstore_tlog_promise_invalid",
            Code::TlogEntryMismatch => "sigstore_tlog_entry_mismatch",
            Code::TlogTimeInvalid => "sigstore_tlog_time_invalid",
            Code::SignatureInvalid => "sigstore_signature_invalid",
            Code::MessageMismatch => "sigstore_message_mismatch",
            Code::IdentityMismatch => "sigstore_identity_mismatch",
            Code::IssuerMismatch => "sigstore_issuer_mismatch",
            Code::KeyInvalid => "sigstore_key_invalid",
            Code::ChecksIncomplete => "sigstore_checks_incomplete",
            Code::Refused => "sigstore_refused",
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused bundle (or trusted root): what failed, and the library's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {detail}")]
pub struct Refusal {
    pub code: Code,
    pub detail: String,
}

impl Refusal {
    pub(crate) fn new(code: Code, detail: impl Into<String>) -> Refusal {
        Refusal {
            code,
            detail: detail.into(),
        }
    }
}

/// A trusted root (`trusted_root.json`, the Sigstore `TrustedRoot` message
/// in JSON), parsed and checked once.
pub struct TrustRoot {
    verifier: Verifier,
    /// The root's timestamp authorities, for checking a timestamp before
    /// it goes into a bundle ([`rekor::Signed::check_timestamp`]).
    pub(crate) timestamp_authorities: Vec<sigstore_verify::types::TsaAuthority>,
}

impl std::fmt::Debug for TrustRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustRoot").finish_non_exhaustive()
    }
}

impl TrustRoot {
    /// The Sigstore public-good production root as `sigstore-verify`
    /// 0.15.1 embeds it. It is as fresh as that release: an operator pins
    /// and refreshes a root of their own for anything long-lived.
    pub fn production() -> Result<TrustRoot, Refusal> {
        TrustRoot::from_json(SIGSTORE_PRODUCTION_TRUSTED_ROOT)
    }

    /// A root from its JSON. Malformed, duplicate or unusable trust
    /// material is refused here, before any bundle is read.
    pub fn from_json(json: &str) -> Result<TrustRoot, Refusal> {
        let root = TrustedRoot::from_json(json)
            .map_err(|e| Refusal::new(Code::TrustRootInvalid, e.to_string()))?;
        let verifier = Verifier::new(&root).map_err(|e| {
            let r = refusal(e);
            Refusal::new(Code::TrustRootInvalid, r.detail)
        })?;
        Ok(TrustRoot {
            verifier,
            timestamp_authorities: root.tsa_authorities(),
        })
    }
}

/// The JSON of the Sigstore public-good production root this build embeds.
pub fn production_root_json() -> &'static str {
    SIGSTORE_PRODUCTION_TRUSTED_ROOT
}

/// Whom a bundle must come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signer<'a> {
    /// A keyless signature: a Fulcio certificate whose SAN (an e-mail
    /// address or a URI) equals `identity` and whose OIDC issuer extension
    /// equals `issuer`, both compared exactly.
    Identity { identity: &'a str, issuer: &'a str },
    /// A managed key, as a PEM `PUBLIC KEY` (SubjectPublicKeyInfo).
    Key { pem: &'a str },
}

/// What a bundle that passed establishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The certificate's SAN, for a keyless signature.
    pub identity: Option<String>,
    /// The certificate's OIDC issuer, for a keyless signature.
    pub issuer: Option<String>,
    /// The earliest verified signing time (unix seconds): an integrated
    /// time covered by a verified SET or log entry, or an RFC 3161 time.
    pub signed_at: Option<i64>,
}

/// Verifies `bundle_json`, a Sigstore bundle, as a signature by `signer`
/// over `message`, against `root`. Every check is required (see the crate
/// documentation); the first that fails is the refusal.
pub fn verify(
    bundle_json: &str,
    message: &[u8],
    signer: &Signer<'_>,
    root: &TrustRoot,
) -> Result<Verified, Refusal> {
    verify_as(bundle_json, message, signer, root, false)
}

/// [`verify`], and with `message_only` [`verify_message`]'s refusal of a
/// DSSE envelope, on one parse of the bundle.
fn verify_as(
    bundle_json: &str,
    message: &[u8],
    signer: &Signer<'_>,
    root: &TrustRoot,
    message_only: bool,
) -> Result<Verified, Refusal> {
    // The expected key is the verifier's own input: checked first.
    let key = match signer {
        Signer::Key { pem } => Some(
            DerPublicKey::from_pem(pem)
                .map_err(|e| Refusal::new(Code::KeyInvalid, e.to_string()))?,
        ),
        Signer::Identity { .. } => None,
    };
    let bundle = Bundle::from_json(bundle_json)
        .map_err(|e| Refusal::new(Code::BundleMalformed, e.to_string()))?;
    if message_only
        && !matches!(
            bundle.content,
            sigstore_verify::types::bundle::SignatureContent::MessageSignature(_)
        )
    {
        return Err(Refusal::new(
            Code::BundleUnsupported,
            "a DSSE envelope, where a signature over the message itself is required",
        ));
    }
    let result = match (signer, key) {
        (Signer::Identity { identity, issuer }, _) => {
            let policy = VerificationPolicy::new(*identity, *issuer);
            let r = root
                .verifier
                .verify(message, &bundle, &policy)
                .map_err(refusal)?;
            let done = [
                ("certificate chain", r.certificate_verified()),
                ("SCT", r.sct_verified()),
                ("transparency log", r.tlog_verified()),
                ("identity and issuer", r.identity_policy_checked()),
            ];
            if let Some((what, _)) = done.iter().find(|(_, ok)| !ok) {
                return Err(Refusal::new(
                    Code::ChecksIncomplete,
                    format!("the {what} check was not done"),
                ));
            }
            r
        }
        (Signer::Key { .. }, key) => {
            let key = key.ok_or_else(|| Refusal::new(Code::KeyInvalid, "no key"))?;
            let policy = PublicKeyVerificationPolicy::new(key);
            let r = root
                .verifier
                .verify(message, &bundle, &policy)
                .map_err(refusal)?;
            if !r.tlog_verified() {
                return Err(Refusal::new(
                    Code::ChecksIncomplete,
                    "the transparency log check was not done",
                ));
            }
            // The library takes a managed-key bundle with no verified time
            // (a Rekor v2 entry carries none); the ledger requires one, as
            // for a certificate: a SET, or an RFC 3161 timestamp.
            if r.verified_timestamps().is_empty() && r.integrated_time().is_none() {
                return Err(Refusal::new(
                    Code::TimestampInvalid,
                    "no verified time: a managed-key bundle must carry a Rekor v1 SET or an RFC 3161 timestamp (a Rekor v2 entry states no time)",
                ));
            }
            r
        }
    };
    let signed_at = result
        .verified_timestamps()
        .iter()
        .chain(result.integrated_time().as_ref())
        .map(|t| t.as_second())
        .min();
    Ok(Verified {
        identity: result.identity().map(|s| s.as_str().to_owned()),
        issuer: result.issuer().map(str::to_owned),
        signed_at,
    })
}

/// [`verify`], for a bundle that must sign `message` itself: a message
/// signature, never a DSSE envelope. A DSSE attestation passes [`verify`]
/// when any of its subjects has the message's digest, whatever its
/// predicate says; the ledger's own statements and anchors are signed as
/// messages, so nothing else stands for them ([`Code::BundleUnsupported`]).
pub fn verify_message(
    bundle_json: &str,
    message: &[u8],
    signer: &Signer<'_>,
    root: &TrustRoot,
) -> Result<Verified, Refusal> {
    verify_as(bundle_json, message, signer, root, true)
}

/// The library's error as a refusal with a code.
fn refusal(e: LibError) -> Refusal {
    let code =
        match &e {
            LibError::IdentityMismatch { .. } => Code::IdentityMismatch,
            LibError::IssuerMismatch { .. } => Code::IssuerMismatch,
            LibError::SignatureInvalid(_) | LibError::Crypto(_) => Code::SignatureInvalid,
            LibError::ArtifactMismatch(_) => Code::MessageMismatch,
            LibError::UnsupportedArtifact(_) | LibError::UnsupportedBundle(_) => {
                Code::BundleUnsupported
            }
            LibError::Certificate(c) => match c {
                CertificateError::NotYetValid { .. } | CertificateError::Expired { .. } => {
                    Code::CertificateNotValidAtTime
                }
                // The chain check reports the leaf's validity through webpki's
                // error; the crate is pinned, and the conformance cases hold
                // this reading to its words.
                CertificateError::ChainInvalid(d)
                    if d.contains("CertExpired") || d.contains("CertNotValidYet") =>
                {
                    Code::CertificateNotValidAtTime
                }
                CertificateError::Sct(_) => Code::SctInvalid,
                _ => Code::CertificateInvalid,
            },
            LibError::TransparencyLog(t) => match t {
                TransparencyLogError::UnknownLog { .. } => Code::TlogUnknown,
                TransparencyLogError::InclusionProof(_) => Code::TlogInclusionInvalid,
                TransparencyLogError::Checkpoint(_) => Code::TlogCheckpointInvalid,
                TransparencyLogError::InclusionPromise(_) => Code::TlogPromiseInvalid,
                TransparencyLogError::EntryMismatch(_)
                | TransparencyLogError::MalformedEntry(_) => Code::TlogEntryMismatch,
                TransparencyLogError::IntegratedTime(_) => Code::TlogTimeInvalid,
                _ => Code::Refused,
            },
            LibError::Timestamp(
                TimestampError::Invalid(_)
                | TimestampError::OutsideAuthorityValidity { .. }
                | TimestampError::NoVerifiedTimestamp(_),
            ) => Code::TimestampInvalid,
            LibError::Bundle(b) => match b {
                BundleError::MissingInclusionProof(_) | BundleError::LogIndexOutOfRange { .. } => {
                    Code::TlogInclusionInvalid
                }
                BundleError::MissingCheckpoint | BundleError::CheckpointRootMismatch => {
                    Code::TlogCheckpointInvalid
                }
                BundleError::MissingInclusionPromise(_) => Code::TlogPromiseInvalid,
                BundleError::MissingSigningTimeEvidence | BundleError::MissingTimestamp => {
                    Code::TimestampInvalid
                }
                BundleError::UnsupportedMediaType(_)
                | BundleError::UnsupportedVerificationMaterial => Code::BundleUnsupported,
                _ => Code::BundleMalformed,
            },
            LibError::InvalidBundle(_) | LibError::Types(_) => Code::BundleMalformed,
            LibError::InvalidTrustRoot(_)
            | LibError::TrustRoot(_)
            | LibError::TrustedCertificate(_) => Code::TrustRootInvalid,
            _ => Code::Refused,
        };
    Refusal::new(code, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_prefixed() {
        let mut seen = std::collections::HashSet::new();
        for c in Code::ALL {
            assert!(c.as_str().starts_with("sigstore_"), "{c}");
            assert!(seen.insert(c.as_str()), "{c} twice");
        }
    }

    #[test]
    fn the_embedded_production_root_loads() {
        TrustRoot::production().expect("the production root");
    }

    #[test]
    fn a_root_that_is_not_json_is_refused_with_its_code() {
        let e = TrustRoot::from_json("{").expect_err("refused");
        assert_eq!(e.code, Code::TrustRootInvalid);
    }

    #[test]
    fn a_bundle_that_is_not_json_is_refused_before_any_check() {
        let root = TrustRoot::production().expect("root");
        let e = verify(
            "not json",
            b"m",
            &Signer::Identity {
                identity: "a@example.org",
                issuer: "https://issuer.example",
            },
            &root,
        )
        .expect_err("refused");
        assert_eq!(e.code, Code::BundleMalformed);
    }

    #[test]
    fn a_key_that_is_not_a_pem_public_key_is_refused() {
        let root = TrustRoot::production().expect("root");
        let bundle = r#"{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}"#;
        let e = verify(bundle, b"m", &Signer::Key { pem: "nope" }, &root).expect_err("refused");
        assert_eq!(e.code, Code::KeyInvalid);
    }
}
