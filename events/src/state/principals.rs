//! Principals: `principal.enrolled` and `principal.revoked`, and who may sign
//! and co-sign. A key is enrolled once, as base64 of a valid Ed25519 key, with
//! a non-empty identity and at least one role; the empty log accepts only the
//! operator enrolling its own key with the operator role. Only an active
//! (enrolled, not revoked) principal can be revoked; from then on its key
//! writes and co-signs nothing. A signer's roles must allow the event kind, and
//! a co-signed statement needs two distinct active principals (different keys
//! and identities) holding the required role, each signature verifying over the
//! statement.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use ed25519_dalek::{Signature, VerifyingKey};

use super::{body, key_id_format, parse_public_key, sensitive_text, signature_bytes, text, State};
use crate::envelope::{key_id, Decoded, Preverified};
use crate::model::{
    CoSignature, Event, PrincipalEnrolled, PrincipalRevoked, Role, SigstoreIdentity,
    SigstoreRootTrusted,
};
use crate::reject::{reject, RejectCode as C, Rejection};
use sigstore_check::{verify_message, Signer, TrustRoot};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Principal {
    /// The Ed25519 key; `None` for a principal enrolled by Sigstore
    /// identity, which signs no envelope and co-signs with bundles.
    pub public_key: Option<[u8; 32]>,
    pub identity: String,
    pub roles: BTreeSet<Role>,
    pub revoked: bool,
    /// The Sigstore identity a principal enrolled by one co-signs as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigstore: Option<SigstoreIdentity>,
}

/// The Sigstore trust a log records (`sigstore.root_trusted`): its origin,
/// and the trusted root in force since entry `since`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SigstoreTrust {
    pub origin: String,
    pub trusted_root: String,
    pub since: u64,
}

/// The key id of a principal enrolled by Sigstore identity: hex SHA-256 of
/// `evidence-ledger/v1 sigstore-principal\n{issuer}\n{identity}`.
pub fn sigstore_principal_id(id: &SigstoreIdentity) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(
        format!(
            "evidence-ledger/v1 sigstore-principal\n{}\n{}",
            id.issuer, id.identity
        )
        .as_bytes(),
    ))
}

/// The bytes a principal enrolled by Sigstore identity signs for a
/// co-signed `statement` (docs/EVENTS.md, "Co-signed statements"): the
/// statement, prefixed with the log's origin and the role it is signed in,
/// so that a bundle (public in Sigstore's log) cannot be replayed for
/// another log, another role or another event.
pub fn sigstore_statement(origin: &str, role: Role, statement: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "evidence-ledger/v1 sigstore-cosign\n{origin}\n{}\n",
        role.as_str()
    )
    .into_bytes();
    out.extend_from_slice(statement);
    out
}

/// Parsed trusted roots, by the BLAKE3 of their JSON: a root is parsed once
/// per process however often its bundles are checked.
fn parsed_root(json: &str) -> Result<Arc<TrustRoot>, sigstore_check::Refusal> {
    static ROOTS: OnceLock<Mutex<HashMap<[u8; 32], Arc<TrustRoot>>>> = OnceLock::new();
    let key = *blake3::hash(json.as_bytes()).as_bytes();
    let roots = ROOTS.get_or_init(Default::default);
    if let Some(r) = roots.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(Arc::clone(r));
    }
    let root = Arc::new(TrustRoot::from_json(json)?);
    let mut roots = roots.lock().unwrap_or_else(|p| p.into_inner());
    // A log records a handful of roots over its life; a process that
    // checks more (a fuzzer, a hostile operator) keeps the cache bounded.
    if roots.len() >= 16 {
        roots.clear();
    }
    roots.insert(key, Arc::clone(&root));
    Ok(root)
}

impl State {
    /// A principal that may sign: enrolled and not revoked.
    fn active(&self, key: &str) -> Option<&Principal> {
        self.principals.get(key).filter(|p| !p.revoked)
    }

    /// The public key the envelope of `d` must verify with, if any.
    pub fn signer_key(&self, d: &Decoded) -> Option<VerifyingKey> {
        if let Some(p) = self.principals.get(&d.keyid) {
            return VerifyingKey::from_bytes(p.public_key.as_ref()?).ok();
        }
        match &d.payload.event {
            Event::PrincipalEnrolled(e) => {
                parse_public_key(&e.public_key).filter(|k| key_id(k) == d.keyid)
            }
            _ => None,
        }
    }

    /// Authorization: the signer exists, is not revoked, and its roles allow
    /// the event kind. The empty log accepts only the operator's self-enrolment.
    pub fn check_signer(&self, d: &Decoded) -> Result<(), Rejection> {
        let kind = d.payload.event.kind();
        if self.principals.is_empty() {
            return match &d.payload.event {
                Event::PrincipalEnrolled(e)
                    if e.roles.contains(&Role::Operator)
                        && parse_public_key(&e.public_key).map(|k| key_id(&k)) == Some(d.keyid.clone()) =>
                {
                    Ok(())
                }
                _ => reject(C::GenesisRequired, "event", "the first event must be the operator enrolling its own key with the operator role"),
            };
        }
        let Some(p) = self.principals.get(&d.keyid) else {
            return reject(
                C::UnknownSigner,
                "signer",
                "no enrolled principal has this key id",
            );
        };
        if p.public_key.is_none() {
            return reject(
                C::UnknownSigner,
                "signer",
                "this principal is enrolled by Sigstore identity: it co-signs with bundles and signs no envelope",
            );
        }
        if p.revoked {
            return reject(
                C::SignerRevoked,
                "signer",
                "this key has been revoked and may write nothing",
            );
        }
        if !p.roles.iter().any(|r| r.may_append(kind)) {
            let roles: Vec<_> = p.roles.iter().map(|r| r.as_str()).collect();
            return reject(
                C::RoleNotPermitted,
                "event.kind",
                format!(
                    "roles [{}] may not append {}",
                    roles.join(", "),
                    kind.as_str()
                ),
            );
        }
        Ok(())
    }

    /// Two co-signatures over `statement` by distinct active principals with
    /// `role`. Signatures the submitting thread already verified
    /// (`preverified`) are not checked again.
    pub(super) fn check_cosigners(
        &self,
        pair: [(&CoSignature, &str); 2],
        role: Role,
        statement: &[u8],
        preverified: &[Preverified],
    ) -> Result<(), Rejection> {
        // Hashed only when the submitting thread verified something: replays
        // and other co-signed kinds pay nothing extra on the serial path.
        let statement_digest =
            (!preverified.is_empty()).then(|| *blake3::hash(statement).as_bytes());
        let mut identities = Vec::new();
        for (cs, field) in pair {
            key_id_format(&cs.key_id, &format!("{field}.key_id"))?;
            let Some(p) = self.principals.get(&cs.key_id) else {
                return reject(
                    C::CosignerUnknown,
                    body(&format!("{field}.key_id")),
                    "no enrolled principal has this key id",
                );
            };
            if p.revoked {
                return reject(
                    C::CosignerRevoked,
                    body(&format!("{field}.key_id")),
                    "this co-signer's key has been revoked",
                );
            }
            if !p.roles.contains(&role) {
                return reject(
                    C::CosignerNotPermitted,
                    body(&format!("{field}.key_id")),
                    format!("co-signer must have the {} role", role.as_str()),
                );
            }
            let public_key = match (p.public_key, &p.sigstore, &cs.sigstore_bundle) {
                (Some(k), _, None) => k,
                (None, Some(id), Some(bundle)) => {
                    if !cs.signature.is_empty() {
                        return reject(
                            C::InvalidValue,
                            body(&format!("{field}.signature")),
                            "a co-signature by Sigstore identity carries its bundle and no signature",
                        );
                    }
                    self.check_bundle(bundle, id, role, statement, field)?;
                    identities.push((cs.key_id.clone(), p.identity.clone(), san(p)));
                    continue;
                }
                (Some(_), _, Some(_)) => {
                    return reject(
                        C::CosignatureInvalid,
                        body(&format!("{field}.sigstore_bundle")),
                        "this co-signer is enrolled by key: it signs the statement with that key",
                    )
                }
                (None, _, None) => {
                    return reject(
                        C::CosignatureInvalid,
                        body(&format!("{field}.sigstore_bundle")),
                        "this co-signer is enrolled by Sigstore identity: a Sigstore bundle over the statement is required",
                    )
                }
                (None, None, Some(_)) => {
                    return reject(
                        C::CosignerUnknown,
                        body(&format!("{field}.key_id")),
                        "the enrolled principal has neither a key nor a Sigstore identity",
                    )
                }
            };
            let sig: [u8; 64] = signature_bytes(&cs.signature).ok_or_else(|| {
                Rejection::new(
                    C::MalformedBase64,
                    body(&format!("{field}.signature")),
                    "not base64 of 64 bytes",
                )
            })?;
            let already = statement_digest.is_some_and(|statement_digest| {
                preverified.contains(&Preverified {
                    public_key,
                    signature: sig,
                    statement_digest,
                })
            });
            if !already {
                // Decompressing the key is a field square root: on the
                // serial path, paid only when the signature is checked here.
                let key = VerifyingKey::from_bytes(&public_key).map_err(|_| {
                    Rejection::new(C::CosignerUnknown, body(field), "stored key is invalid")
                })?;
                if !crate::ed25519::verify_strict(&key, statement, &Signature::from_bytes(&sig)) {
                    return Err(Rejection::new(
                        C::CosignatureInvalid,
                        body(&format!("{field}.signature")),
                        "does not verify over the statement",
                    ));
                }
            }
            identities.push((cs.key_id.clone(), p.identity.clone(), san(p)));
        }
        let [a, b] = [&identities[0], &identities[1]];
        if a.0 == b.0 || a.1 == b.1 || (a.2.is_some() && a.2 == b.2) {
            return reject(
                C::CosignersNotDistinct,
                body(pair[1].1),
                "the two co-signers must be different principals with different identities (and, by Sigstore identity, different SANs whatever their issuers)",
            );
        }
        Ok(())
    }

    /// A Sigstore bundle by `id` over the Sigstore form of `statement`,
    /// verified offline against the trusted root this log records now,
    /// every check required (docs/SIGSTORE.md).
    fn check_bundle(
        &self,
        bundle: &str,
        id: &SigstoreIdentity,
        role: Role,
        statement: &[u8],
        field: &str,
    ) -> Result<(), Rejection> {
        let at = || body(&format!("{field}.sigstore_bundle"));
        let Some(trust) = &self.sigstore else {
            return reject(
                C::SigstoreRootMissing,
                at(),
                "no Sigstore trusted root is recorded in this log (sigstore.root_trusted)",
            );
        };
        bundle_profile(bundle).map_err(|why| {
            Rejection::new(
                C::SigstoreBundleUnsupported,
                at(),
                format!("outside the profile this ledger accepts (docs/SIGSTORE.md): {why}"),
            )
        })?;
        let refused =
            |e: sigstore_check::Refusal| Rejection::new(C::sigstore(e.code), at(), e.detail);
        let root = parsed_root(&trust.trusted_root).map_err(refused)?;
        verify_message(
            bundle,
            &sigstore_statement(&trust.origin, role, statement),
            &Signer::Identity {
                identity: &id.identity,
                issuer: &id.issuer,
            },
            &root,
        )
        .map_err(refused)?;
        Ok(())
    }

    pub(super) fn check_sigstore_root_trusted(
        &self,
        e: &SigstoreRootTrusted,
    ) -> Result<(), Rejection> {
        text(&e.origin, "origin")?;
        if let Some(t) = &self.sigstore {
            if t.origin != e.origin {
                return reject(
                    C::SigstoreOriginMismatch,
                    body("origin"),
                    format!("this log's origin is {:?}", t.origin),
                );
            }
        }
        parsed_root(&e.trusted_root).map_err(|r| {
            Rejection::new(C::SigstoreTrustRootInvalid, body("trusted_root"), r.detail)
        })?;
        Ok(())
    }

    pub(super) fn apply_sigstore_root_trusted(&mut self, e: &SigstoreRootTrusted, index: u64) {
        self.sigstore = Some(SigstoreTrust {
            origin: e.origin.clone(),
            trusted_root: e.trusted_root.clone(),
            since: index,
        });
    }

    pub(super) fn check_principal_enrolled(&self, e: &PrincipalEnrolled) -> Result<(), Rejection> {
        let id = match (&e.sigstore, e.public_key.is_empty()) {
            (None, _) => {
                let key = parse_public_key(&e.public_key).ok_or_else(|| {
                    Rejection::new(
                        C::InvalidValue,
                        body("public_key"),
                        "not base64 of a valid 32-byte Ed25519 public key",
                    )
                })?;
                key_id(&key)
            }
            (Some(s), true) => {
                sigstore_identity(s)?;
                if e.roles.contains(&Role::Operator) || e.roles.contains(&Role::Ledger) {
                    return reject(
                        C::InvalidValue,
                        body("roles"),
                        "a principal enrolled by Sigstore identity signs no envelope: the operator and ledger roles need a key",
                    );
                }
                sigstore_principal_id(s)
            }
            (Some(_), false) => {
                return reject(
                    C::InvalidValue,
                    body("sigstore"),
                    "a principal is enrolled by a key or by a Sigstore identity, not both",
                )
            }
        };
        text(&e.identity, "identity")?;
        if e.roles.is_empty() {
            return reject(
                C::InvalidValue,
                body("roles"),
                "at least one role is required",
            );
        }
        if let Some(s) = &e.sigstore {
            let wanted = s.identity.to_ascii_lowercase();
            if let Some(other) = self
                .principals
                .values()
                .filter(|p| !p.revoked)
                .find(|p| san(p).as_deref() == Some(wanted.as_str()))
            {
                return reject(
                    C::PrincipalExists,
                    body("sigstore.identity"),
                    format!(
                        "this SAN is already enrolled (issuer {}): one person, one principal, whichever issuer vouches",
                        other.sigstore.as_ref().map(|o| o.issuer.as_str()).unwrap_or_default()
                    ),
                );
            }
        }
        if self.principals.contains_key(&id) {
            return reject(
                C::PrincipalExists,
                body(if e.sigstore.is_some() {
                    "sigstore"
                } else {
                    "public_key"
                }),
                "this key or Sigstore identity is already enrolled",
            );
        }
        Ok(())
    }

    pub(super) fn check_principal_revoked(&self, e: &PrincipalRevoked) -> Result<(), Rejection> {
        key_id_format(&e.key_id, "key_id")?;
        sensitive_text(&e.reason, "reason")?;
        if self.active(&e.key_id).is_none() {
            return reject(
                C::PrincipalUnknown,
                body("key_id"),
                "no active principal has this key id",
            );
        }
        Ok(())
    }

    pub(super) fn apply_principal_enrolled(&mut self, e: &PrincipalEnrolled) {
        let principal = |public_key, sigstore| Principal {
            public_key,
            identity: e.identity.clone(),
            roles: e.roles.iter().copied().collect(),
            revoked: false,
            sigstore,
        };
        if let Some(s) = &e.sigstore {
            self.principals
                .insert(sigstore_principal_id(s), principal(None, Some(s.clone())));
        } else if let Some(k) = parse_public_key(&e.public_key) {
            self.principals
                .insert(key_id(&k), principal(Some(k.to_bytes()), None));
        }
    }

    pub(super) fn apply_principal_revoked(&mut self, e: &PrincipalRevoked) {
        if let Some(p) = self.principals.get_mut(&e.key_id) {
            p.revoked = true;
        }
    }
}

/// The most bytes a co-signature's bundle may hold: a bundle with one
/// certificate and one log entry is 4 to 6 KiB.
pub const MAX_BUNDLE_BYTES: usize = 16 * 1024;

/// The one shape of bundle a co-signature may have, checked before any
/// cryptography: JSON without repeated keys, at most
/// [`MAX_BUNDLE_BYTES`], a known media type, a message signature, a
/// Fulcio certificate (or chain), exactly one transparency-log entry with
/// its inclusion proof, and no field the Sigstore bundle format does not
/// define. The bundle's JSON is not covered by its signatures, so whoever
/// posts it could otherwise pad a genuine bundle with what one verifier
/// ignores and another refuses (a second log entry, an unknown field),
/// making replays disagree, or with work for the serial committer.
fn bundle_profile(bundle: &str) -> Result<(), String> {
    use serde_json::Value;
    fn keys(v: &Value, path: &str, allowed: &[&str]) -> Result<(), String> {
        let o = v
            .as_object()
            .ok_or_else(|| format!("`{path}` is not an object"))?;
        match o.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(format!("`{path}.{k}` is not a field of this profile")),
            None => Ok(()),
        }
    }
    fn array<'a>(v: &'a Value, path: &str, min: usize, max: usize) -> Result<&'a [Value], String> {
        let a = v
            .as_array()
            .ok_or_else(|| format!("`{path}` is not an array"))?;
        if a.len() < min || a.len() > max {
            return Err(format!(
                "`{path}` holds {} items, not {min} to {max}",
                a.len()
            ));
        }
        Ok(a)
    }
    const MEDIA: [&str; 3] = [
        "application/vnd.dev.sigstore.bundle+json;version=0.1",
        "application/vnd.dev.sigstore.bundle+json;version=0.2",
        "application/vnd.dev.sigstore.bundle.v0.3+json",
    ];
    if bundle.len() > MAX_BUNDLE_BYTES {
        return Err(format!("more than {MAX_BUNDLE_BYTES} bytes"));
    }
    let v = crate::canonical::parse_strict(bundle.as_bytes())
        .map_err(|e| format!("not strict JSON: {e:?}"))?;
    let v = crate::canonical::to_json(&v);
    keys(
        &v,
        "",
        &["mediaType", "verificationMaterial", "messageSignature"],
    )?;
    if !v["mediaType"].as_str().is_some_and(|m| MEDIA.contains(&m)) {
        return Err("`mediaType` is not a bundle version 0.1 to 0.3".into());
    }
    let m = &v["verificationMaterial"];
    keys(
        m,
        "verificationMaterial",
        &[
            "certificate",
            "x509CertificateChain",
            "tlogEntries",
            "timestampVerificationData",
        ],
    )?;
    match (m.get("certificate"), m.get("x509CertificateChain")) {
        (Some(c), None) => keys(c, "verificationMaterial.certificate", &["rawBytes"])?,
        (None, Some(c)) => {
            keys(
                c,
                "verificationMaterial.x509CertificateChain",
                &["certificates"],
            )?;
            let chain = array(
                &c["certificates"],
                "x509CertificateChain.certificates",
                1,
                3,
            )?;
            for (i, c) in chain.iter().enumerate() {
                keys(
                    c,
                    &format!("x509CertificateChain.certificates[{i}]"),
                    &["rawBytes"],
                )?;
            }
        }
        _ => return Err("not exactly one of `certificate`, `x509CertificateChain`".into()),
    }
    if let Some(t) = m.get("timestampVerificationData") {
        keys(t, "timestampVerificationData", &["rfc3161Timestamps"])?;
        let stamps = array(&t["rfc3161Timestamps"], "rfc3161Timestamps", 0, 2)?;
        for (i, t) in stamps.iter().enumerate() {
            keys(t, &format!("rfc3161Timestamps[{i}]"), &["signedTimestamp"])?;
        }
    }
    let e = &array(&m["tlogEntries"], "tlogEntries", 1, 1)?[0];
    keys(
        e,
        "tlogEntries[0]",
        &[
            "logIndex",
            "logId",
            "kindVersion",
            "integratedTime",
            "inclusionPromise",
            "inclusionProof",
            "canonicalizedBody",
        ],
    )?;
    keys(&e["logId"], "tlogEntries[0].logId", &["keyId"])?;
    keys(
        &e["kindVersion"],
        "tlogEntries[0].kindVersion",
        &["kind", "version"],
    )?;
    if let Some(p) = e.get("inclusionPromise") {
        keys(
            p,
            "tlogEntries[0].inclusionPromise",
            &["signedEntryTimestamp"],
        )?;
    }
    let p = e
        .get("inclusionProof")
        .ok_or("the log entry has no inclusion proof")?;
    keys(
        p,
        "tlogEntries[0].inclusionProof",
        &["logIndex", "rootHash", "treeSize", "hashes", "checkpoint"],
    )?;
    keys(&p["checkpoint"], "inclusionProof.checkpoint", &["envelope"])?;
    let s = &v["messageSignature"];
    keys(s, "messageSignature", &["messageDigest", "signature"])?;
    keys(
        &s["messageDigest"],
        "messageSignature.messageDigest",
        &["algorithm", "digest"],
    )?;
    Ok(())
}

/// The SAN a principal enrolled by Sigstore identity signs as, compared
/// without regard to ASCII case (e-mail addresses are matched so by the
/// issuers).
fn san(p: &Principal) -> Option<String> {
    p.sigstore.as_ref().map(|s| s.identity.to_ascii_lowercase())
}

/// A Sigstore identity as enrolled: an e-mail address or an `https://` URI
/// of printable characters, and an `https://` issuer.
fn sigstore_identity(s: &SigstoreIdentity) -> Result<(), Rejection> {
    let ok = |v: &str| !v.is_empty() && v.len() <= 512 && v.bytes().all(|b| b.is_ascii_graphic());
    if !ok(&s.identity) || !(s.identity.contains('@') || s.identity.starts_with("https://")) {
        return reject(
            C::InvalidValue,
            body("sigstore.identity"),
            "an e-mail address or an https:// URI, as the certificate's SAN names it",
        );
    }
    if !ok(&s.issuer) || !s.issuer.starts_with("https://") {
        return reject(
            C::InvalidValue,
            body("sigstore.issuer"),
            "the OIDC issuer's https:// URL, as the certificate names it",
        );
    }
    Ok(())
}
