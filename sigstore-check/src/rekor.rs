//! Publishing signed bytes to a Rekor log (v1, or v2 with an RFC 3161
//! timestamp) with a managed key or keyless, and the bundle that proves it
//! (docs/SIGSTORE.md, "Anchors in Rekor").
//!
//! The ledger signs an anchor (the exact bytes of a signed checkpoint) with
//! an anchoring key of its own, an ECDSA P-256 key: Rekor accepts it in a
//! `hashedrekord`, and an offline verifier checks it (Rekor takes Ed25519
//! only as Ed25519ph, which no Rust verifier checks for Rekor). This module
//! makes the request bodies (Rekor v1's `hashedrekord` 0.0.1; Rekor v2's
//! `hashedrekord` 0.0.2 and the RFC 3161 timestamp request its bundle
//! needs, since a v2 entry carries no integrated time), turns the answers
//! into a Sigstore bundle (v0.3, public-key hint or certificate, message
//! signature), and that bundle is kept only
//! once [`crate::verify`] accepts it against the pinned trusted root as a
//! signature by the anchoring key ([`crate::Signer::Key`]) or, keyless, by
//! the token's identity ([`crate::Signer::Identity`]). It does no I/O: the
//! caller posts the requests.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use sigstore_verify::bundle::{BundleV03, VerificationMaterialV03};
use sigstore_verify::crypto::KeyPair;
use sigstore_verify::rekor::LogEntry;
use sigstore_verify::types::bundle::{MessageDigest, MessageSignature, SignatureContent};
use sigstore_verify::types::{HashAlgorithm, KindVersion, Sha256Hash};

use crate::{Code, Refusal};

/// The path of Rekor v1's write endpoint, below the log's base URL.
pub const ENTRIES_PATH: &str = "/api/v1/log/entries";

/// The path of Rekor v2's write endpoint, below the log's base URL.
pub const ENTRIES_V2_PATH: &str = "/api/v2/log/entries";

/// The media type of an RFC 3161 timestamp request (RFC 3161 §3.4).
pub const TIMESTAMP_QUERY: &str = "application/timestamp-query";

/// An anchoring key: ECDSA P-256, kept as PKCS#8 in a PEM `PRIVATE KEY`.
pub struct AnchoringKey {
    pair: KeyPair,
    public_pem: String,
    /// The public key's SubjectPublicKeyInfo (DER).
    public_der: Vec<u8>,
}

impl std::fmt::Debug for AnchoringKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnchoringKey")
            .field("public_pem", &self.public_pem)
            .finish_non_exhaustive()
    }
}

fn key_refusal(detail: impl std::fmt::Display) -> Refusal {
    Refusal::new(Code::KeyInvalid, detail.to_string())
}

/// PEM of `der` under `label`, 64 characters a line.
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The DER inside the one PEM block labelled `label` in `text`.
fn unpem(label: &str, text: &str) -> Result<Vec<u8>, Refusal> {
    use base64::Engine as _;
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let body = text
        .split_once(&begin)
        .and_then(|(_, rest)| rest.split_once(&end))
        .map(|(body, _)| body)
        .ok_or_else(|| key_refusal(format!("no PEM `{label}` block")))?;
    let b64: String = body.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| key_refusal(format!("the PEM `{label}` block is not base64: {e}")))
}

impl AnchoringKey {
    /// A new key, and its PKCS#8 PEM to keep (mode 0600: whoever holds it
    /// can publish anchors in the ledger's name).
    pub fn generate() -> Result<(AnchoringKey, String), Refusal> {
        let doc =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &SystemRandom::new())
                .map_err(|e| key_refusal(format!("generating a P-256 key: {e}")))?;
        let text = pem("PRIVATE KEY", doc.as_ref());
        Ok((AnchoringKey::from_pem(&text)?, text))
    }

    /// The key from its PKCS#8 PEM.
    pub fn from_pem(text: &str) -> Result<AnchoringKey, Refusal> {
        let der = unpem("PRIVATE KEY", text)?;
        let pair = KeyPair::from_pkcs8_der(&der)
            .map_err(|e| key_refusal(format!("not an ECDSA P-256 PKCS#8 key: {e}")))?;
        let public = pair.public_key_der().map_err(key_refusal)?;
        Ok(AnchoringKey {
            public_pem: pem("PUBLIC KEY", public.as_bytes()),
            public_der: public.as_bytes().to_vec(),
            pair,
        })
    }

    /// The public key as a PEM `PUBLIC KEY` (SubjectPublicKeyInfo): what a
    /// verifier pins ([`crate::Signer::Key`]).
    pub fn public_pem(&self) -> &str {
        &self.public_pem
    }
}

/// A message signed for Rekor: the request to post, and what the bundle
/// needs from it.
#[derive(Debug, Clone)]
pub struct Signed {
    digest: Sha256Hash,
    signature: sigstore_verify::types::SignatureBytes,
    /// The Fulcio certificate (DER) a keyless signature is made under;
    /// `None` for the anchoring key.
    certificate: Option<Vec<u8>>,
    /// The signing key's SubjectPublicKeyInfo (DER).
    public_key: Vec<u8>,
    /// The JSON body of `POST {log}/api/v1/log/entries`: a `hashedrekord`
    /// 0.0.1 entry with the SHA-256 of the message, the signature and the
    /// public key.
    pub request: Vec<u8>,
}

/// Signs `message` with `key` and makes the `hashedrekord` request.
pub fn sign(key: &AnchoringKey, message: &[u8]) -> Result<Signed, Refusal> {
    sign_as(key, None, message)
}

/// Signs `message` with the ephemeral `key` that the Fulcio certificate
/// `certificate` (DER) certifies, and makes the `hashedrekord` request
/// naming that certificate: a keyless signature.
pub fn sign_with_certificate(
    key: &AnchoringKey,
    certificate: &[u8],
    message: &[u8],
) -> Result<Signed, Refusal> {
    sign_as(key, Some(certificate), message)
}

fn sign_as(
    key: &AnchoringKey,
    certificate: Option<&[u8]>,
    message: &[u8],
) -> Result<Signed, Refusal> {
    use base64::Engine as _;
    let digest = Sha256Hash::new(sha256(message));
    let signature = key
        .pair
        .sign(message)
        .map_err(|e| Refusal::new(Code::SignatureInvalid, e.to_string()))?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let request = serde_json::json!({
        "apiVersion": "0.0.1",
        "kind": "hashedrekord",
        "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": digest.to_hex()}},
            "signature": {
                "content": b64.encode(signature.as_bytes()),
                "publicKey": {"content": b64.encode(match certificate {
                    Some(der) => pem("CERTIFICATE", der),
                    None => key.public_pem.clone(),
                })},
            },
        },
    });
    Ok(Signed {
        digest,
        signature,
        certificate: certificate.map(<[u8]>::to_vec),
        public_key: key.public_der.clone(),
        request: serde_json::to_vec(&request)
            .map_err(|e| Refusal::new(Code::Refused, e.to_string()))?,
    })
}

fn sha256(message: &[u8]) -> [u8; 32] {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, message);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

impl Signed {
    /// The JSON body of `POST {log}/api/v2/log/entries`: a `hashedrekord`
    /// 0.0.2 request with the SHA-256 of the message, the signature, and
    /// the verifier (the public key, or the Fulcio certificate).
    pub fn request_v2(&self) -> Vec<u8> {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let verifier = match &self.certificate {
            Some(der) => serde_json::json!({
                "x509Certificate": {"rawBytes": b64.encode(der)},
                "keyDetails": "PKIX_ECDSA_P256_SHA_256",
            }),
            None => serde_json::json!({
                "publicKey": {"rawBytes": b64.encode(&self.public_key)},
                "keyDetails": "PKIX_ECDSA_P256_SHA_256",
            }),
        };
        serde_json::json!({
            "hashedRekordRequestV002": {
                "digest": b64.encode(self.digest.as_bytes()),
                "signature": {
                    "content": b64.encode(self.signature.as_bytes()),
                    "verifier": verifier,
                },
            },
        })
        .to_string()
        .into_bytes()
    }

    /// Checks a timestamp authority's answer (a DER `TimeStampResp`)
    /// before anything is logged with it: granted, over the SHA-256 of this
    /// signature, signed by an authority of `root` within its validity.
    /// Returns the time it states (unix seconds).
    pub fn check_timestamp(&self, answer: &[u8], root: &crate::TrustRoot) -> Result<i64, Refusal> {
        let token = sigstore_verify::types::TimestampToken::new(answer.to_vec());
        let mut why = String::from("the trusted root names no timestamp authority");
        for authority in &root.timestamp_authorities {
            match sigstore_verify::tsa::verify_timestamp_for_authority(
                &token,
                &self.signature,
                authority,
            ) {
                Ok(t) => return Ok(t.as_second()),
                Err(e) => why = e.to_string(),
            }
        }
        Err(Refusal::new(
            Code::TimestampInvalid,
            format!("the timestamp authority's answer does not verify: {why}"),
        ))
    }

    /// The DER `TimeStampReq` (RFC 3161 §2.4.1) for a timestamp over the
    /// SHA-256 of the signature, as a Sigstore bundle's
    /// `rfc3161Timestamps` carry: version 1, the message imprint, no
    /// policy, no nonce (the signature is new on every try, so an old
    /// answer cannot stand for a new one), and `certReq` so the authority
    /// embeds its certificate.
    pub fn timestamp_request(&self) -> Vec<u8> {
        // AlgorithmIdentifier { id-sha256 (2.16.840.1.101.3.4.2.1), NULL }.
        const SHA256_ALG: [u8; 15] = [
            0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05,
            0x00,
        ];
        let mut imprint = SHA256_ALG.to_vec();
        imprint.extend_from_slice(&[0x04, 0x20]);
        imprint.extend_from_slice(&sha256(self.signature.as_bytes()));
        let mut body = vec![0x02, 0x01, 0x01]; // version 1
        body.extend_from_slice(&[0x30, imprint.len() as u8]);
        body.extend_from_slice(&imprint);
        body.extend_from_slice(&[0x01, 0x01, 0xff]); // certReq TRUE
        let mut der = vec![0x30, body.len() as u8];
        der.extend_from_slice(&body);
        der
    }
}

/// A bundle made from Rekor's answer, and where the entry is.
#[derive(Debug, Clone)]
pub struct Logged {
    /// The bundle, v0.3 JSON.
    pub bundle: String,
    /// The entry's index in the Rekor log.
    pub log_index: u64,
    /// The entry's UUID, as Rekor v1 names it (Rekor v2 names entries by
    /// index only).
    pub uuid: Option<String>,
}

/// The bundle (v0.3 JSON) for `signed`, from Rekor's answer to its
/// request: `{"<uuid>": <log entry>}` with the entry's body, integrated
/// time, log id and index, inclusion proof with its checkpoint, and SET.
/// This is format conversion only: check the bundle with [`crate::verify`]
/// before trusting it.
pub fn bundle(signed: &Signed, answer: &[u8]) -> Result<Logged, Refusal> {
    let malformed = |why: String| Refusal::new(Code::BundleMalformed, why);
    let entries: std::collections::BTreeMap<String, LogEntry> = serde_json::from_slice(answer)
        .map_err(|e| malformed(format!("Rekor's answer is not a log entry: {e}")))?;
    let mut entries = entries.into_iter();
    let (Some((uuid, entry)), None) = (entries.next(), entries.next()) else {
        return Err(malformed(
            "Rekor's answer holds not exactly one log entry".into(),
        ));
    };
    let log_index = entry.log_index.get();
    let tlog = entry
        .to_bundle_entry(KindVersion::HashedRekordV001)
        .map_err(|e| malformed(format!("Rekor's log entry: {e}")))?;
    make_bundle(signed, tlog, None).map(|bundle| Logged {
        bundle,
        log_index,
        uuid: Some(uuid),
    })
}

/// The bundle (v0.3 JSON) for `signed`, from Rekor v2's answer to its
/// request (a `TransparencyLogEntry`: the entry's index, log id, kind and
/// version, canonicalized body, and inclusion proof with its checkpoint;
/// no integrated time) and the timestamp authority's DER `TimeStampResp`
/// over the signature. Format conversion only: check the bundle with
/// [`crate::verify`] before trusting it.
pub fn bundle_v2(signed: &Signed, answer: &[u8], timestamp: &[u8]) -> Result<Logged, Refusal> {
    let malformed = |why: String| Refusal::new(Code::BundleMalformed, why);
    let tlog: sigstore_verify::types::TransparencyLogEntry = serde_json::from_slice(answer)
        .map_err(|e| malformed(format!("Rekor v2's answer is not a log entry: {e}")))?;
    if tlog.kind_version != KindVersion::HashedRekordV002 {
        return Err(malformed(
            "Rekor v2's answer is not a hashedrekord 0.0.2 entry".into(),
        ));
    }
    if tlog.inclusion_proof.is_none() {
        return Err(malformed(
            "Rekor v2's answer carries no inclusion proof".into(),
        ));
    }
    // A v2 entry states no time and carries no promise: whatever the
    // answer says of either is not kept.
    let mut tlog = tlog;
    tlog.integrated_time = None;
    tlog.inclusion_promise = None;
    let log_index = tlog.log_index.get();
    let stamp = sigstore_verify::types::TimestampToken::new(timestamp.to_vec());
    make_bundle(signed, tlog, Some(stamp)).map(|bundle| Logged {
        bundle,
        log_index,
        uuid: None,
    })
}

fn make_bundle(
    signed: &Signed,
    tlog: sigstore_verify::types::TransparencyLogEntry,
    timestamp: Option<sigstore_verify::types::TimestampToken>,
) -> Result<String, Refusal> {
    let content = SignatureContent::MessageSignature(
        MessageSignature::new(signed.signature.clone()).with_message_digest(MessageDigest::new(
            HashAlgorithm::Sha2256,
            signed.digest.into(),
        )),
    );
    let material = match &signed.certificate {
        Some(der) => VerificationMaterialV03::Certificate(
            sigstore_verify::types::DerCertificate::new(der.clone()),
        ),
        None => VerificationMaterialV03::PublicKey {
            hint: signed.digest_hint(),
        },
    };
    let mut b = BundleV03::new(material, content).with_tlog_entry(tlog);
    if let Some(t) = timestamp {
        b = b.with_rfc3161_timestamp(t);
    }
    b.into_bundle()
        .to_json()
        .map_err(|e| Refusal::new(Code::BundleMalformed, e.to_string()))
}

/// The path of Fulcio v2's certificate endpoint, below its base URL.
pub const FULCIO_CERT_PATH: &str = "/api/v2/signingCert";

/// What an OIDC identity token says of its holder, read (not verified:
/// Fulcio verifies it) to make the request and to know which identity the
/// certificate must name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenClaims {
    /// `sub`: what the proof of possession signs, except for the issuers
    /// Fulcio names by e-mail ([`TokenClaims::principal_name`]).
    pub subject: String,
    /// `iss`: the OIDC issuer the certificate names.
    pub issuer: String,
    /// `email`, when the token has one.
    pub email: Option<String>,
    /// The SAN Fulcio names in the certificate for this token
    /// ([`fulcio_identity`]).
    pub identity: String,
}

impl TokenClaims {
    /// The SAN the certificate is expected to name.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// What the proof of possession signs: the name Fulcio gives the
    /// token's principal, the e-mail address for the issuers public Fulcio
    /// configures as e-mail identities ([`EMAIL_ISSUERS`]), `sub` for
    /// every other (a CI workflow, a URI subject), as the Sigstore clients
    /// sign it.
    pub fn principal_name(&self) -> &str {
        match &self.email {
            Some(email) if EMAIL_ISSUERS.contains(&self.issuer.as_str()) => email,
            _ => &self.subject,
        }
    }
}

/// The issuer of GitHub Actions' identity tokens (github.com).
pub const GITHUB_ACTIONS_ISSUER: &str = "https://token.actions.githubusercontent.com";

/// The SAN Fulcio names for a token with these claims, by the kind of
/// identity Fulcio's issuer configuration gives it:
/// - a GitHub Actions workflow (issuer [`GITHUB_ACTIONS_ISSUER`]): the URI
///   `https://github.com/{job_workflow_ref}`, the workflow file at its ref
///   (not `sub`, which names the repository and ref);
/// - a GitLab.com CI pipeline (issuer [`GITLAB_ISSUER`]): the URI
///   `https://{ci_config_ref_uri}`;
/// - another issuer's token with an `email` claim: that address (an RFC
///   822 SAN);
/// - anything else (a SPIFFE ID, a URI subject): `sub`.
///
/// A certificate that names another SAN is not kept: the bundle made with
/// it must verify as this identity's.
pub fn fulcio_identity(claims: &serde_json::Value) -> Option<String> {
    let text = |k: &str| claims.get(k).and_then(|x| x.as_str());
    match text("iss") {
        Some(GITHUB_ACTIONS_ISSUER) => {
            text("job_workflow_ref").map(|r| format!("https://github.com/{r}"))
        }
        Some(GITLAB_ISSUER) => text("ci_config_ref_uri").map(|uri| format!("https://{uri}")),
        _ => text("email").or_else(|| text("sub")).map(str::to_owned),
    }
}

/// The issuer of GitLab.com's CI identity tokens.
pub const GITLAB_ISSUER: &str = "https://gitlab.com";

/// The OIDC issuers public-good Fulcio names by the token's `email` claim,
/// whose proof of possession signs that address (the list sigstore-python
/// keeps; every other issuer's proof signs `sub`).
pub const EMAIL_ISSUERS: [&str; 3] = [
    "https://accounts.google.com",
    "https://oauth2.sigstore.dev/auth",
    "https://oauth2.sigstage.dev/auth",
];

/// The claims of a JWT identity token (its payload, base64url JSON).
pub fn token_claims(token: &str) -> Result<TokenClaims, Refusal> {
    use base64::Engine as _;
    let bad = |why: &str| Refusal::new(Code::KeyInvalid, format!("identity token: {why}"));
    let mut parts = token.trim().split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("not a JWT (three base64url parts)"));
    };
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| bad("the payload is not base64url"))?;
    let v: serde_json::Value =
        serde_json::from_slice(&json).map_err(|_| bad("the payload is not JSON"))?;
    let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
    let issuer = text("iss").ok_or_else(|| bad("no `iss` claim"))?;
    let identity = fulcio_identity(&v).ok_or_else(|| {
        bad(if issuer == GITHUB_ACTIONS_ISSUER {
            "a GitHub Actions token without a `job_workflow_ref` claim"
        } else {
            "no `sub` claim"
        })
    })?;
    Ok(TokenClaims {
        subject: text("sub").ok_or_else(|| bad("no `sub` claim"))?,
        issuer,
        email: text("email"),
        identity,
    })
}

/// The body of `POST {fulcio}/api/v2/signingCert` for the ephemeral `key`:
/// the token, the public key, and the proof that the key's holder signed
/// the principal's name ([`TokenClaims::principal_name`]).
pub fn fulcio_request(key: &AnchoringKey, token: &str) -> Result<Vec<u8>, Refusal> {
    use base64::Engine as _;
    let claims = token_claims(token)?;
    let proof = key
        .pair
        .sign(claims.principal_name().as_bytes())
        .map_err(|e| Refusal::new(Code::SignatureInvalid, e.to_string()))?;
    serde_json::to_vec(&serde_json::json!({
        "credentials": {"oidcIdentityToken": token.trim()},
        "publicKeyRequest": {
            "publicKey": {"algorithm": "ECDSA", "content": key.public_pem},
            "proofOfPossession": base64::engine::general_purpose::STANDARD.encode(proof.as_bytes()),
        },
    }))
    .map_err(|e| Refusal::new(Code::Refused, e.to_string()))
}

/// The leaf certificate (DER) of Fulcio's answer: the first of its chain
/// (`signedCertificateEmbeddedSct`, or the older detached-SCT form). Format
/// conversion only: the bundle made with it is verified before use.
pub fn fulcio_leaf(answer: &[u8]) -> Result<Vec<u8>, Refusal> {
    let malformed =
        |why: &str| Refusal::new(Code::CertificateInvalid, format!("Fulcio's answer: {why}"));
    let v: serde_json::Value = serde_json::from_slice(answer).map_err(|_| malformed("not JSON"))?;
    let chain = v
        .get("signedCertificateEmbeddedSct")
        .or_else(|| v.get("signedCertificateDetachedSct"))
        .and_then(|c| c["chain"]["certificates"].as_array())
        .ok_or_else(|| malformed("no certificate chain"))?;
    let leaf = chain
        .first()
        .and_then(|c| c.as_str())
        .ok_or_else(|| malformed("an empty chain"))?;
    unpem("CERTIFICATE", leaf).map_err(|e| malformed(&e.detail))
}

impl Signed {
    /// The public-key hint the bundle names: not the key (a verifier pins
    /// that), just a label, here the message digest's first bytes.
    fn digest_hint(&self) -> String {
        format!("evidence-ledger-anchor-{}", &self.digest.to_hex()[..16])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_round_trips_through_its_pem_and_signs_what_it_says() {
        let (key, text) = AnchoringKey::generate().expect("key");
        let again = AnchoringKey::from_pem(&text).expect("reloads");
        assert_eq!(key.public_pem(), again.public_pem());
        assert!(key.public_pem().starts_with("-----BEGIN PUBLIC KEY-----\n"));
        let s = sign(&again, b"checkpoint bytes").expect("signs");
        let v: serde_json::Value = serde_json::from_slice(&s.request).expect("json");
        assert_eq!(v["kind"], "hashedrekord");
        assert_eq!(
            v["spec"]["data"]["hash"]["value"],
            Sha256Hash::new(sha256(b"checkpoint bytes")).to_hex()
        );
    }

    #[test]
    fn a_key_that_is_not_p256_pkcs8_is_refused() {
        let e = AnchoringKey::from_pem(
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .expect_err("refused");
        assert_eq!(e.code, Code::KeyInvalid);
        let e = AnchoringKey::from_pem("nothing").expect_err("refused");
        assert_eq!(e.code, Code::KeyInvalid);
    }

    #[test]
    fn an_answer_that_is_not_one_log_entry_is_refused() {
        let (key, _) = AnchoringKey::generate().expect("key");
        let s = sign(&key, b"m").expect("signs");
        for answer in [&b"{}"[..], b"[]", b"not json"] {
            let e = bundle(&s, answer).expect_err("refused");
            assert_eq!(e.code, Code::BundleMalformed, "{e}");
        }
    }

    #[test]
    fn the_identity_fulcio_names_follows_the_kind_of_token() {
        use serde_json::json;
        let cases = [
            // An e-mail identity, whatever the issuer.
            (
                json!({"iss": "https://accounts.google.com", "sub": "1234", "email": "ops@example.org"}),
                Some("ops@example.org"),
            ),
            // A GitHub Actions workflow: the workflow file at its ref, not `sub`.
            (
                json!({
                    "iss": GITHUB_ACTIONS_ISSUER,
                    "sub": "repo:acme/ledger:ref:refs/heads/main",
                    "job_workflow_ref": "acme/ledger/.github/workflows/anchor.yml@refs/heads/main",
                }),
                Some("https://github.com/acme/ledger/.github/workflows/anchor.yml@refs/heads/main"),
            ),
            // A GitHub Actions token without the claim names nothing.
            (
                json!({"iss": GITHUB_ACTIONS_ISSUER, "sub": "repo:acme/ledger"}),
                None,
            ),
            // A GitLab CI pipeline.
            (
                json!({
                    "iss": "https://gitlab.com",
                    "sub": "project_path:acme/ledger:ref_type:branch:ref:main",
                    "ci_config_ref_uri": "gitlab.com/acme/ledger//.gitlab-ci.yml@refs/heads/main",
                }),
                Some("https://gitlab.com/acme/ledger//.gitlab-ci.yml@refs/heads/main"),
            ),
            // Anything else: `sub`.
            (
                json!({"iss": "https://issuer.example", "sub": "spiffe://example.org/anchor"}),
                Some("spiffe://example.org/anchor"),
            ),
        ];
        for (claims, want) in cases {
            assert_eq!(fulcio_identity(&claims).as_deref(), want, "{claims}");
        }
        // GitLab's claim from another issuer names nothing special.
        let other = json!({"iss": "https://gitlab.example", "sub": "s", "ci_config_ref_uri": "x"});
        assert_eq!(fulcio_identity(&other).as_deref(), Some("s"));
    }

    #[test]
    fn the_proof_of_possession_signs_the_principals_name() {
        use base64::Engine as _;
        let jwt = |claims: serde_json::Value| {
            let b = base64::engine::general_purpose::URL_SAFE_NO_PAD;
            format!("{}.{}.x", b.encode("{}"), b.encode(claims.to_string()))
        };
        // Fulcio names an e-mail identity by its address, anything else by `sub`.
        let email = token_claims(&jwt(serde_json::json!({
            "iss": "https://accounts.google.com", "sub": "1234", "email": "ops@example.org"
        })))
        .expect("claims");
        assert_eq!(email.principal_name(), "ops@example.org");
        let workflow = token_claims(&jwt(serde_json::json!({
            "iss": GITHUB_ACTIONS_ISSUER, "sub": "repo:acme/ledger:ref:refs/heads/main",
            "job_workflow_ref": "acme/ledger/.github/workflows/a.yml@refs/heads/main",
            "email": "not-named@example.org",
        })))
        .expect("claims");
        assert_eq!(
            workflow.principal_name(),
            "repo:acme/ledger:ref:refs/heads/main"
        );
        // An issuer Fulcio is not known to name by e-mail: `sub`.
        let other = token_claims(&jwt(serde_json::json!({
            "iss": "https://issuer.example.test", "sub": "operator-7", "email": "ops@example.org"
        })))
        .expect("claims");
        assert_eq!(other.principal_name(), "operator-7");
    }

    #[test]
    fn the_v2_request_and_the_timestamp_request_carry_this_signature() {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let (key, _) = AnchoringKey::generate().expect("key");
        let s = sign(&key, b"checkpoint bytes").expect("signs");
        let v: serde_json::Value = serde_json::from_slice(&s.request_v2()).expect("json");
        let r = &v["hashedRekordRequestV002"];
        assert_eq!(r["digest"], b64.encode(sha256(b"checkpoint bytes")));
        assert_eq!(
            r["signature"]["content"],
            b64.encode(s.signature.as_bytes())
        );
        assert_eq!(
            r["signature"]["verifier"]["keyDetails"],
            "PKIX_ECDSA_P256_SHA_256"
        );
        let spki = b64
            .decode(
                r["signature"]["verifier"]["publicKey"]["rawBytes"]
                    .as_str()
                    .expect("b64"),
            )
            .expect("spki");
        assert!(key.public_pem().contains(&b64.encode(&spki)[..40]));
        // TimeStampReq { 1, { {sha256, NULL}, SHA-256(signature) }, certReq TRUE }.
        let der = s.timestamp_request();
        assert_eq!(der.len(), 59);
        assert_eq!(&der[..7], &[0x30, 57, 0x02, 0x01, 0x01, 0x30, 49]);
        assert_eq!(&der[22..24], &[0x04, 0x20]);
        assert_eq!(&der[24..56], &sha256(s.signature.as_bytes()));
        assert_eq!(&der[56..], &[0x01, 0x01, 0xff]);
    }
}
