//! Principals: `principal.enrolled` and `principal.revoked`, and who may sign
//! and co-sign. A key is enrolled once, as base64 of a valid Ed25519 key, with
//! a non-empty identity and at least one role; the empty log accepts only the
//! operator enrolling its own key with the operator role. Only an active
//! (enrolled, not revoked) principal can be revoked; from then on its key
//! writes and co-signs nothing. A signer's roles must allow the event kind, and
//! a co-signed statement needs two distinct active principals (different keys
//! and identities) holding the required role, each signature verifying over the
//! statement.

use std::collections::BTreeSet;

use ed25519_dalek::{Signature, VerifyingKey};

use super::{body, key_id_format, parse_public_key, sensitive_text, signature_bytes, text, State};
use crate::envelope::{key_id, Decoded, Preverified};
use crate::model::{CoSignature, Event, PrincipalEnrolled, PrincipalRevoked, Role};
use crate::reject::{reject, RejectCode as C, Rejection};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Principal {
    pub public_key: [u8; 32],
    pub identity: String,
    pub roles: BTreeSet<Role>,
    pub revoked: bool,
}

impl State {
    /// A principal that may sign: enrolled and not revoked.
    fn active(&self, key: &str) -> Option<&Principal> {
        self.principals.get(key).filter(|p| !p.revoked)
    }

    /// The public key the envelope of `d` must verify with, if any.
    pub fn signer_key(&self, d: &Decoded) -> Option<VerifyingKey> {
        if let Some(p) = self.principals.get(&d.keyid) {
            return VerifyingKey::from_bytes(&p.public_key).ok();
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
            let sig: [u8; 64] = signature_bytes(&cs.signature).ok_or_else(|| {
                Rejection::new(
                    C::MalformedBase64,
                    body(&format!("{field}.signature")),
                    "not base64 of 64 bytes",
                )
            })?;
            let already = statement_digest.is_some_and(|statement_digest| {
                preverified.contains(&Preverified {
                    public_key: p.public_key,
                    signature: sig,
                    statement_digest,
                })
            });
            if !already {
                // Decompressing the key is a field square root: on the
                // serial path, paid only when the signature is checked here.
                let key = VerifyingKey::from_bytes(&p.public_key).map_err(|_| {
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
            identities.push((cs.key_id.clone(), p.identity.clone()));
        }
        if identities[0].0 == identities[1].0 || identities[0].1 == identities[1].1 {
            return reject(
                C::CosignersNotDistinct,
                body(pair[1].1),
                "the two co-signers must be different principals with different identities",
            );
        }
        Ok(())
    }

    pub(super) fn check_principal_enrolled(&self, e: &PrincipalEnrolled) -> Result<(), Rejection> {
        let key = parse_public_key(&e.public_key).ok_or_else(|| {
            Rejection::new(
                C::InvalidValue,
                body("public_key"),
                "not base64 of a valid 32-byte Ed25519 public key",
            )
        })?;
        text(&e.identity, "identity")?;
        if e.roles.is_empty() {
            return reject(
                C::InvalidValue,
                body("roles"),
                "at least one role is required",
            );
        }
        if self.principals.contains_key(&key_id(&key)) {
            return reject(
                C::PrincipalExists,
                body("public_key"),
                "this key is already enrolled",
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
        if let Some(k) = parse_public_key(&e.public_key) {
            self.principals.insert(
                key_id(&k),
                Principal {
                    public_key: k.to_bytes(),
                    identity: e.identity.clone(),
                    roles: e.roles.iter().copied().collect(),
                    revoked: false,
                },
            );
        }
    }

    pub(super) fn apply_principal_revoked(&mut self, e: &PrincipalRevoked) {
        if let Some(p) = self.principals.get_mut(&e.key_id) {
            p.revoked = true;
        }
    }
}
