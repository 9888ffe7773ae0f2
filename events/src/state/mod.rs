//! The state machine: everything the log has established that decides whether
//! the next event is allowed. `check` is pure (the sequencing time and the
//! log's checkpoints are inputs); `apply` folds an accepted event in.
//! Replaying the log through `check` + `apply` rebuilds the same state.

use std::collections::{BTreeMap, BTreeSet};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ed25519_dalek::{Signature, VerifyingKey};

use crate::envelope::{
    case_provenance_statement, case_retire_statement, decode_leaf, key_id, parse_utc_micros,
    tier_change_statement, Decoded, Preverified,
};
use crate::model::*;
use crate::reject::{reject, RejectCode as C, Rejection};
use ledger::hash::Hash;

/// Breakdown keys may not contain these (case-insensitive): they smuggle a
/// model's opinion of itself into a score.
pub const BANNED_BREAKDOWN_SUBSTRINGS: &[&str] =
    &["confidence", "llm", "self_reported", "model_says"];

/// Roots of this log at past sizes, for events that name a checkpoint.
pub trait Checkpoints {
    /// The root at `size`, if `size` is a committed size the event may name.
    fn root_at(&self, size: u64) -> Option<Hash>;
}

impl Checkpoints for ledger::LogView<'_> {
    fn root_at(&self, size: u64) -> Option<Hash> {
        ledger::LogView::root_at(self, size).ok()
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Principal {
    pub public_key: [u8; 32],
    pub identity: String,
    pub roles: BTreeSet<Role>,
    pub revoked: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TaskClassState {
    pub registration: TaskClassRegistered,
    pub rubric_digest: String,
    pub tier: Tier,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CaseStatus {
    Active,
    Retired,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CaseState {
    pub task_class: String,
    pub case_digest: String,
    pub cassette_digest: String,
    pub curation_class: String,
    pub status: CaseStatus,
    pub source: CaseSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ProposalStatus {
    Pending,
    Approved,
    Rejected,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProposalState {
    pub task_class: String,
    pub draft: CaseDraft,
    pub status: ProposalStatus,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunState {
    pub task_class: String,
    pub isolation: Isolation,
    pub finished: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InvocationState {
    pub run_id: String,
    pub case_id: String,
    pub open: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CapabilityState {
    pub workflow_id: String,
    pub expires_at: i64,
    pub spent_at: Option<u64>,
    pub quarantined: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RecommendationState {
    pub task_class: String,
    pub from: Tier,
    pub to: Tier,
}

/// Everything the log has established, as of `size` entries.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct State {
    pub principals: BTreeMap<String, Principal>,
    pub task_classes: BTreeMap<String, TaskClassState>,
    pub cases: BTreeMap<String, CaseState>,
    pub proposals: BTreeMap<String, ProposalState>,
    pub runs: BTreeMap<String, RunState>,
    pub invocations: BTreeMap<String, InvocationState>,
    pub capabilities: BTreeMap<String, CapabilityState>,
    pub recommendations: BTreeMap<u64, RecommendationState>,
    pub size: u64,
    /// The latest sequencing time (µs, UTC); sequencing never goes back.
    pub last_sequenced_at: i64,
}

/// Why a replay stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Log(#[from] ledger::Error),
    #[error("entry {index} does not replay: {rejection}")]
    Invalid { index: u64, rejection: Rejection },
}

fn body(f: &str) -> String {
    format!("event.body.{f}")
}

fn ident(s: &str, field: &str) -> Result<(), Rejection> {
    let ok = !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:/@+-".contains(&b));
    if ok {
        Ok(())
    } else {
        reject(
            C::InvalidIdentifier,
            body(field),
            "must be 1–128 characters from [A-Za-z0-9._:/@+-]",
        )
    }
}

fn text(s: &str, field: &str) -> Result<(), Rejection> {
    if s.trim().is_empty() || s.chars().count() > 4096 || s.chars().any(char::is_control) {
        reject(
            C::InvalidText,
            body(field),
            "must be 1–4096 characters with no control characters",
        )
    } else {
        Ok(())
    }
}

fn digest(s: &str, field: &str) -> Result<(), Rejection> {
    let hexpart = s
        .strip_prefix("blake3:")
        .or_else(|| s.strip_prefix("sha256:"));
    match hexpart {
        Some(h)
            if h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
        {
            Ok(())
        }
        _ => reject(
            C::InvalidDigest,
            body(field),
            "must be blake3:<64 lower-case hex> or sha256:<64 lower-case hex>",
        ),
    }
}

fn timestamp(s: &str, field: &str) -> Result<i64, Rejection> {
    parse_utc_micros(s).ok_or_else(|| {
        Rejection::new(
            C::InvalidTimestamp,
            body(field),
            "must be RFC 3339 in UTC (ending in Z)",
        )
    })
}

fn key_id_format(s: &str, field: &str) -> Result<(), Rejection> {
    if s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        reject(
            C::InvalidIdentifier,
            body(field),
            "a key id is 64 lower-case hex digits",
        )
    }
}

fn severity(s: &str, field: &str) -> Result<(), Rejection> {
    if matches!(s, "block" | "warn" | "info") {
        Ok(())
    } else {
        reject(
            C::SeverityInvalid,
            body(field),
            format!("`{s}` is not one of block, warn, info"),
        )
    }
}

/// Parses a base64 Ed25519 public key.
/// A co-signature's 64 bytes, if it is base64 of exactly that many.
pub(crate) fn signature_bytes(b64: &str) -> Option<[u8; 64]> {
    B64.decode(b64).ok().and_then(|v| v.try_into().ok())
}

pub fn parse_public_key(s: &str) -> Option<VerifyingKey> {
    let bytes: [u8; 32] = B64.decode(s).ok()?.try_into().ok()?;
    VerifyingKey::from_bytes(&bytes).ok()
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

    fn check_cosigners(
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

    fn task_class(&self, name: &str) -> Result<&TaskClassState, Rejection> {
        self.task_classes.get(name).ok_or_else(|| {
            Rejection::new(
                C::TaskClassUnknown,
                body("task_class"),
                format!("task class `{name}` is not registered"),
            )
        })
    }

    fn case_id_free(&self, id: &str, field: &str) -> Result<(), Rejection> {
        if self.cases.contains_key(id)
            || self
                .proposals
                .values()
                .any(|p| p.draft.case_id == id && p.status == ProposalStatus::Pending)
        {
            reject(
                C::CaseExists,
                body(field),
                format!("case id `{id}` is already used"),
            )
        } else {
            Ok(())
        }
    }

    fn checkpoint(
        &self,
        c: &CheckpointRef,
        field: &str,
        log: &dyn Checkpoints,
    ) -> Result<(), Rejection> {
        let root = log.root_at(c.size);
        if root.map(|r| hex::encode(r.0)) == Some(c.root.clone()) {
            Ok(())
        } else {
            reject(
                C::CheckpointUnknown,
                body(field),
                format!(
                    "({}, {}) is not a committed checkpoint of this log",
                    c.size, c.root
                ),
            )
        }
    }

    /// Checks whether the signed, verified event `d` may be appended at time
    /// `at` (µs, UTC) given this state.
    pub fn check(&self, d: &Decoded, at: i64, log: &dyn Checkpoints) -> Result<(), Rejection> {
        let p = &d.payload;
        if p.id.len() < 8 || ident(&p.id, "id").is_err() {
            return reject(
                C::InvalidIdentifier,
                "id",
                "the envelope id must be 8–128 characters from [A-Za-z0-9._:/@+-]",
            );
        }
        if parse_utc_micros(&p.issued_at).is_none() {
            return reject(
                C::InvalidTimestamp,
                "issued_at",
                "must be RFC 3339 in UTC (ending in Z)",
            );
        }
        self.check_signer(d)?;
        match &p.event {
            Event::PrincipalEnrolled(e) => {
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
            }
            Event::PrincipalRevoked(e) => {
                key_id_format(&e.key_id, "key_id")?;
                text(&e.reason, "reason")?;
                if self.active(&e.key_id).is_none() {
                    return reject(
                        C::PrincipalUnknown,
                        body("key_id"),
                        "no active principal has this key id",
                    );
                }
            }
            Event::TaskClassRegistered(e) => {
                ident(&e.task_class, "task_class")?;
                if self.task_classes.contains_key(&e.task_class) {
                    return reject(C::TaskClassExists, body("task_class"), "already registered");
                }
                let (Some(s), Some(g)) = (e.tiers.get(&Tier::Silver), e.tiers.get(&Tier::Gold))
                else {
                    return reject(
                        C::TierRulesInvalid,
                        body("tiers"),
                        "rules for silver and gold are required",
                    );
                };
                if e.tiers.contains_key(&Tier::Bronze) {
                    return reject(
                        C::TierRulesInvalid,
                        body("tiers.bronze"),
                        "bronze is the floor and has no promotion rule",
                    );
                }
                for (t, r) in [("silver", s), ("gold", g)] {
                    if !(r.score_threshold.is_finite() && (0.0..=1.0).contains(&r.score_threshold))
                    {
                        return reject(
                            C::TierRulesInvalid,
                            body(&format!("tiers.{t}.score_threshold")),
                            "must be within [0, 1]",
                        );
                    }
                    if r.min_cases_for_promotion == 0 {
                        return reject(
                            C::TierRulesInvalid,
                            body(&format!("tiers.{t}.min_cases_for_promotion")),
                            "must be at least 1",
                        );
                    }
                }
                if g.min_cases_for_promotion < s.min_cases_for_promotion
                    || g.score_threshold < s.score_threshold
                {
                    return reject(
                        C::TierRulesInvalid,
                        body("tiers.gold"),
                        "gold's rules must be at least as strict as silver's",
                    );
                }
                let mut codes = BTreeSet::new();
                for (i, f) in e.failure_modes.iter().enumerate() {
                    ident(&f.code, &format!("failure_modes[{i}].code"))?;
                    severity(&f.severity, &format!("failure_modes[{i}].severity"))?;
                    text(&f.description, &format!("failure_modes[{i}].description"))?;
                    if !codes.insert(&f.code) {
                        return reject(
                            C::InvalidValue,
                            body(&format!("failure_modes[{i}].code")),
                            "failure mode codes must be unique",
                        );
                    }
                }
                for (i, k) in e.breakdown_keys.iter().enumerate() {
                    ident(k, &format!("breakdown_keys[{i}]"))?;
                    banned_key(k, &format!("breakdown_keys[{i}]"))?;
                }
                digest(&e.rubric_digest, "rubric_digest")?;
            }
            Event::RubricUpdated(e) => {
                self.task_class(&e.task_class)?;
                digest(&e.rubric_digest, "rubric_digest")?;
            }
            Event::CaseAdded(e) => {
                self.task_class(&e.task_class)?;
                ident(&e.case_id, "case_id")?;
                self.case_id_free(&e.case_id, "case_id")?;
                text(&e.title, "title")?;
                text(&e.difficulty, "difficulty")?;
                ident(&e.curation_class, "curation_class")?;
                digest(&e.case_digest, "case_digest")?;
                digest(&e.cassette_digest, "cassette_digest")?;
                text(&e.provenance.source_ref, "provenance.source_ref")?;
                timestamp(&e.provenance.added_at, "provenance.added_at")?;
                let st =
                    case_provenance_statement(&e.case_id, &e.provenance.added_at, &e.case_digest);
                self.check_cosigners(
                    [
                        (&e.provenance.added_by, "provenance.added_by"),
                        (&e.provenance.reviewed_by, "provenance.reviewed_by"),
                    ],
                    Role::Curator,
                    &st,
                    &d.preverified,
                )?;
            }
            Event::CaseRetired(e) => {
                let case = self.cases.get(&e.case_id).ok_or_else(|| {
                    Rejection::new(C::CaseUnknown, body("case_id"), "no such case")
                })?;
                if case.status != CaseStatus::Active {
                    return reject(
                        C::CaseNotActive,
                        body("case_id"),
                        "the case is already retired",
                    );
                }
                text(&e.reason, "reason")?;
                let st = case_retire_statement(&e.case_id, &case.case_digest);
                self.check_cosigners(
                    [
                        (&e.retired_by, "retired_by"),
                        (&e.reviewed_by, "reviewed_by"),
                    ],
                    Role::Curator,
                    &st,
                    &d.preverified,
                )?;
            }
            Event::CaseProposed(e) => {
                ident(&e.proposal_id, "proposal_id")?;
                if self.proposals.contains_key(&e.proposal_id) {
                    return reject(C::ProposalExists, body("proposal_id"), "already used");
                }
                self.task_class(&e.task_class)?;
                check_draft(&e.draft)?;
                self.case_id_free(&e.draft.case_id, "draft.case_id")?;
                text(&e.production_ref, "production_ref")?;
            }
            Event::ProposalApproved(e) => {
                let prop = self.pending_proposal(&e.proposal_id)?;
                timestamp(&e.added_at, "added_at")?;
                if self.cases.contains_key(&prop.draft.case_id) {
                    return reject(
                        C::CaseExists,
                        body("proposal_id"),
                        "the draft's case id is already used",
                    );
                }
                let st = case_provenance_statement(
                    &prop.draft.case_id,
                    &e.added_at,
                    &prop.draft.case_digest,
                );
                self.check_cosigners(
                    [(&e.added_by, "added_by"), (&e.reviewed_by, "reviewed_by")],
                    Role::Curator,
                    &st,
                    &d.preverified,
                )?;
            }
            Event::ProposalRejected(e) => {
                self.pending_proposal(&e.proposal_id)?;
                text(&e.reason, "reason")?;
            }
            Event::RunStarted(e) => {
                ident(&e.run_id, "run_id")?;
                if self.runs.contains_key(&e.run_id) {
                    return reject(C::RunExists, body("run_id"), "already used");
                }
                let tc = self.task_class(&e.task_class)?;
                text(&e.harness_version, "harness_version")?;
                digest(&e.rubric_digest, "rubric_digest")?;
                digest(&e.sandbox_image_digest, "sandbox_image_digest")?;
                if e.rubric_digest != tc.rubric_digest {
                    return reject(
                        C::RubricDigestMismatch,
                        body("rubric_digest"),
                        "differs from the task class's current rubric",
                    );
                }
            }
            Event::RunFinished(e) => {
                self.open_run(&e.run_id)?;
            }
            Event::RubricInvoked(e) => {
                let run = self.open_run(&e.run_id)?;
                let case = self.active_case(&e.case_id, "case_id")?;
                if case.task_class != run.task_class {
                    return reject(
                        C::CaseTaskClassMismatch,
                        body("case_id"),
                        "the case belongs to another task class",
                    );
                }
                ident(&e.invocation_id, "invocation_id")?;
                if self.invocations.contains_key(&e.invocation_id) {
                    return reject(C::InvocationExists, body("invocation_id"), "already used");
                }
            }
            Event::RubricCompleted(e) => {
                self.open_invocation(&e.invocation_id)?;
            }
            Event::RubricFailed(e) => {
                self.open_invocation(&e.invocation_id)?;
                if !RUBRIC_FAILURE_CODES.contains(&e.failure_code.as_str()) {
                    return reject(
                        C::RubricFailureCodeUnknown,
                        body("failure_code"),
                        format!("must be one of {}", RUBRIC_FAILURE_CODES.join(", ")),
                    );
                }
            }
            Event::ScoreRecorded(e) => self.check_score(e)?,
            Event::CapabilityMinted(e) => {
                ident(&e.capability_id, "capability_id")?;
                if self.capabilities.contains_key(&e.capability_id) {
                    return reject(C::CapabilityExists, body("capability_id"), "already used");
                }
                ident(&e.workflow_id, "workflow_id")?;
                timestamp(&e.validated_at, "validated_at")?;
                let expires = timestamp(&e.expires_at, "expires_at")?;
                if expires <= at {
                    return reject(
                        C::CapabilityExpired,
                        body("expires_at"),
                        "already expired when minted",
                    );
                }
                self.checkpoint(&e.minted_at, "minted_at", log)?;
            }
            Event::RagExampleWritten(e) => {
                let cap = self.capabilities.get(&e.capability_id).ok_or_else(|| {
                    Rejection::new(
                        C::CapabilityUnknown,
                        body("capability_id"),
                        "no such capability",
                    )
                })?;
                if cap.workflow_id != e.workflow_id {
                    return reject(
                        C::CapabilityWorkflowMismatch,
                        body("workflow_id"),
                        "the capability was minted for another workflow",
                    );
                }
                if let Some(i) = cap.spent_at {
                    return reject(
                        C::CapabilitySpent,
                        body("capability_id"),
                        format!("already spent by entry {i}"),
                    );
                }
                if cap.quarantined {
                    return reject(
                        C::CapabilityQuarantined,
                        body("capability_id"),
                        "the capability was quarantined",
                    );
                }
                if at >= cap.expires_at {
                    return reject(
                        C::CapabilityExpired,
                        body("capability_id"),
                        "expired before this write was sequenced",
                    );
                }
                digest(&e.example_digest, "example_digest")?;
            }
            Event::RagRecordQuarantined(e) => {
                if !self.capabilities.contains_key(&e.capability_id) {
                    return reject(
                        C::CapabilityUnknown,
                        body("capability_id"),
                        "no such capability",
                    );
                }
                text(&e.reason, "reason")?;
            }
            Event::PromotionRequested(e) => {
                self.task_class(&e.task_class)?;
            }
            Event::PromotionRecommended(e) => {
                let tc = self.task_class(&e.task_class)?;
                if !e.requires_human_approval {
                    return reject(
                        C::RequiresHumanApproval,
                        body("requires_human_approval"),
                        "must be true: the ledger recommends, humans promote",
                    );
                }
                if e.current_tier != tc.tier {
                    return reject(
                        C::TierMismatch,
                        body("current_tier"),
                        "differs from the task class's tier",
                    );
                }
                self.checkpoint(&e.checkpoint, "checkpoint", log)?;
            }
            Event::TierApply(_) => {
                return reject(
                    C::PromotionMustBeHumanAuthorized,
                    "event.kind",
                    "the ledger never applies a tier change; record a human decision as tier.changed signed by two maintainers",
                );
            }
            Event::PromotionApplyBlocked(e) => {
                self.task_class(&e.task_class)?;
            }
            Event::TierChanged(e) => {
                let tc = self.task_class(&e.task_class)?;
                if e.from != tc.tier || e.to == e.from {
                    return reject(
                        C::TierMismatch,
                        body("from"),
                        format!(
                            "the task class is at {}; a change must start there and go elsewhere",
                            tc.tier.as_str()
                        ),
                    );
                }
                match self.recommendations.get(&e.recommendation_index) {
                    Some(r) if r.task_class == e.task_class && r.to == e.to && r.from == e.from => {}
                    _ => {
                        return reject(
                            C::RecommendationUnknown,
                            body("recommendation_index"),
                            "must be a promotion.recommended entry for this task class recommending this change",
                        )
                    }
                }
                let st = tier_change_statement(
                    &e.task_class,
                    e.from.as_str(),
                    e.to.as_str(),
                    e.recommendation_index,
                );
                self.check_cosigners(
                    [
                        (&e.decided_by, "decided_by"),
                        (&e.confirmed_by, "confirmed_by"),
                    ],
                    Role::Maintainer,
                    &st,
                    &d.preverified,
                )?;
            }
            Event::AnchorPublished(e) => {
                self.checkpoint(&e.checkpoint, "checkpoint", log)?;
                text(&e.location, "location")?;
            }
        }
        Ok(())
    }

    fn pending_proposal(&self, id: &str) -> Result<&ProposalState, Rejection> {
        let p = self.proposals.get(id).ok_or_else(|| {
            Rejection::new(C::ProposalUnknown, body("proposal_id"), "no such proposal")
        })?;
        if p.status != ProposalStatus::Pending {
            return reject(
                C::ProposalNotPending,
                body("proposal_id"),
                "already approved or rejected",
            );
        }
        Ok(p)
    }

    fn open_run(&self, id: &str) -> Result<&RunState, Rejection> {
        let r = self
            .runs
            .get(id)
            .ok_or_else(|| Rejection::new(C::RunUnknown, body("run_id"), "no such run"))?;
        if r.finished {
            return reject(C::RunFinished, body("run_id"), "the run has finished");
        }
        Ok(r)
    }

    fn open_invocation(&self, id: &str) -> Result<&InvocationState, Rejection> {
        match self.invocations.get(id) {
            Some(i) if i.open => Ok(i),
            _ => reject(
                C::InvocationUnknown,
                body("invocation_id"),
                "no open invocation has this id",
            ),
        }
    }

    fn active_case(&self, id: &str, field: &str) -> Result<&CaseState, Rejection> {
        match self.cases.get(id) {
            Some(c) if c.status == CaseStatus::Active => Ok(c),
            Some(_) => reject(C::CaseNotActive, body(field), "the case is retired"),
            None if self
                .proposals
                .values()
                .any(|p| p.draft.case_id == id && p.status == ProposalStatus::Pending) =>
            {
                reject(
                    C::CasePending,
                    body(field),
                    "the case is a pending proposal; it is never scored until approved",
                )
            }
            None => reject(C::CaseUnknown, body(field), "no such case"),
        }
    }

    fn check_score(&self, e: &ScoreRecorded) -> Result<(), Rejection> {
        let run = self.open_run(&e.run_id)?;
        if run.task_class != e.task_class {
            return reject(
                C::RunTaskClassMismatch,
                body("task_class"),
                "the run is for another task class",
            );
        }
        let tc = self.task_class(&e.task_class)?;
        let case = self.active_case(&e.case_id, "case_id")?;
        if case.task_class != e.task_class {
            return reject(
                C::CaseTaskClassMismatch,
                body("case_id"),
                "the case belongs to another task class",
            );
        }
        digest(&e.case_digest, "case_digest")?;
        digest(&e.rubric_digest, "rubric_digest")?;
        digest(&e.cassette_digest, "cassette_digest")?;
        digest(&e.image_digest, "image_digest")?;
        if e.case_digest != case.case_digest {
            return reject(
                C::CaseDigestMismatch,
                body("case_digest"),
                "differs from the active case's digest (stale or poisoned case)",
            );
        }
        if e.rubric_digest != tc.rubric_digest {
            return reject(
                C::RubricDigestMismatch,
                body("rubric_digest"),
                "differs from the task class's current rubric",
            );
        }
        if e.cassette_digest != case.cassette_digest {
            return reject(
                C::CassetteDigestMismatch,
                body("cassette_digest"),
                "differs from the case's cassette (a swapped cassette)",
            );
        }
        let s = &e.score;
        if !(s.score.is_finite() && (0.0..=1.0).contains(&s.score)) {
            return reject(
                C::ScoreOutOfRange,
                body("score.score"),
                "must be finite and within [0, 1]",
            );
        }
        if !(s.cost_usd.is_finite() && s.cost_usd >= 0.0) {
            return reject(
                C::CostOutOfRange,
                body("score.cost_usd"),
                "must be finite and at least 0",
            );
        }
        if !(s.duration_seconds.is_finite() && s.duration_seconds >= 0.0) {
            return reject(
                C::DurationOutOfRange,
                body("score.duration_seconds"),
                "must be finite and at least 0",
            );
        }
        for (k, v) in &s.breakdown {
            let field = format!("score.breakdown.{k}");
            banned_key(k, &field)?;
            if !tc.registration.breakdown_keys.iter().any(|d| d == k) {
                return reject(
                    C::BreakdownKeyUndeclared,
                    body(&field),
                    "not declared by the task class",
                );
            }
            if !v.is_finite() {
                return reject(C::BreakdownValueOutOfRange, body(&field), "must be finite");
            }
        }
        for (i, f) in s.failure_modes.iter().enumerate() {
            severity(&f.severity, &format!("score.failure_modes[{i}].severity"))?;
            let Some(t) = tc
                .registration
                .failure_modes
                .iter()
                .find(|t| t.code == f.code)
            else {
                return reject(
                    C::FailureModeUnknown,
                    body(&format!("score.failure_modes[{i}].code")),
                    format!("`{}` is not in the task class's taxonomy", f.code),
                );
            };
            if t.severity != f.severity {
                return reject(
                    C::SeverityMismatch,
                    body(&format!("score.failure_modes[{i}].severity")),
                    format!("the taxonomy says {}", t.severity),
                );
            }
        }
        text(&e.harness_version, "harness_version")?;
        text(&e.operator_fingerprint, "operator_fingerprint")?;
        timestamp(&e.started_at, "started_at")?;
        timestamp(&e.finished_at, "finished_at")?;
        Ok(())
    }

    /// Folds an accepted event, appended at `index` and sequenced at `at`.
    pub fn apply(&mut self, d: &Decoded, index: u64, at: i64) {
        let p = &d.payload;
        self.size = index + 1;
        self.last_sequenced_at = self.last_sequenced_at.max(at);
        match &p.event {
            Event::PrincipalEnrolled(e) => {
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
            Event::PrincipalRevoked(e) => {
                if let Some(p) = self.principals.get_mut(&e.key_id) {
                    p.revoked = true;
                }
            }
            Event::TaskClassRegistered(e) => {
                self.task_classes.insert(
                    e.task_class.clone(),
                    TaskClassState {
                        registration: e.clone(),
                        rubric_digest: e.rubric_digest.clone(),
                        tier: e.initial_tier,
                    },
                );
            }
            Event::RubricUpdated(e) => {
                if let Some(t) = self.task_classes.get_mut(&e.task_class) {
                    t.rubric_digest = e.rubric_digest.clone();
                }
            }
            Event::CaseAdded(e) => {
                self.cases.insert(
                    e.case_id.clone(),
                    CaseState {
                        task_class: e.task_class.clone(),
                        case_digest: e.case_digest.clone(),
                        cassette_digest: e.cassette_digest.clone(),
                        curation_class: e.curation_class.clone(),
                        status: CaseStatus::Active,
                        source: e.provenance.source,
                    },
                );
            }
            Event::CaseRetired(e) => {
                if let Some(c) = self.cases.get_mut(&e.case_id) {
                    c.status = CaseStatus::Retired;
                }
            }
            Event::CaseProposed(e) => {
                self.proposals.insert(
                    e.proposal_id.clone(),
                    ProposalState {
                        task_class: e.task_class.clone(),
                        draft: e.draft.clone(),
                        status: ProposalStatus::Pending,
                    },
                );
            }
            Event::ProposalApproved(e) => {
                if let Some(p) = self.proposals.get_mut(&e.proposal_id) {
                    p.status = ProposalStatus::Approved;
                    self.cases.insert(
                        p.draft.case_id.clone(),
                        CaseState {
                            task_class: p.task_class.clone(),
                            case_digest: p.draft.case_digest.clone(),
                            cassette_digest: p.draft.cassette_digest.clone(),
                            curation_class: p.draft.curation_class.clone(),
                            status: CaseStatus::Active,
                            source: CaseSource::OutcomeLedgerDerived,
                        },
                    );
                }
            }
            Event::ProposalRejected(e) => {
                if let Some(p) = self.proposals.get_mut(&e.proposal_id) {
                    p.status = ProposalStatus::Rejected;
                }
            }
            Event::RunStarted(e) => {
                self.runs.insert(
                    e.run_id.clone(),
                    RunState {
                        task_class: e.task_class.clone(),
                        isolation: e.isolation_class,
                        finished: false,
                    },
                );
            }
            Event::RunFinished(e) => {
                if let Some(r) = self.runs.get_mut(&e.run_id) {
                    r.finished = true;
                }
            }
            Event::RubricInvoked(e) => {
                self.invocations.insert(
                    e.invocation_id.clone(),
                    InvocationState {
                        run_id: e.run_id.clone(),
                        case_id: e.case_id.clone(),
                        open: true,
                    },
                );
            }
            Event::RubricCompleted(RubricCompleted { invocation_id })
            | Event::RubricFailed(RubricFailed { invocation_id, .. }) => {
                if let Some(i) = self.invocations.get_mut(invocation_id) {
                    i.open = false;
                }
            }
            Event::ScoreRecorded(_)
            | Event::PromotionRequested(_)
            | Event::PromotionApplyBlocked(_)
            | Event::AnchorPublished(_)
            | Event::TierApply(_) => {}
            Event::CapabilityMinted(e) => {
                self.capabilities.insert(
                    e.capability_id.clone(),
                    CapabilityState {
                        workflow_id: e.workflow_id.clone(),
                        expires_at: parse_utc_micros(&e.expires_at).unwrap_or(i64::MIN),
                        spent_at: None,
                        quarantined: false,
                    },
                );
            }
            Event::RagExampleWritten(e) => {
                if let Some(c) = self.capabilities.get_mut(&e.capability_id) {
                    c.spent_at = Some(index);
                }
            }
            Event::RagRecordQuarantined(e) => {
                if let Some(c) = self.capabilities.get_mut(&e.capability_id) {
                    c.quarantined = true;
                }
            }
            Event::PromotionRecommended(e) => {
                self.recommendations.insert(
                    index,
                    RecommendationState {
                        task_class: e.task_class.clone(),
                        from: e.current_tier,
                        to: e.recommended_tier,
                    },
                );
            }
            Event::TierChanged(e) => {
                if let Some(t) = self.task_classes.get_mut(&e.task_class) {
                    t.tier = e.to;
                }
            }
        }
    }

    /// Rebuilds the state from the first `log.head().size` entries. With
    /// `verify_signatures`, every envelope signature is checked again; every
    /// event is always re-checked against the rules.
    pub fn replay(
        log: &ledger::LogView<'_>,
        verify_signatures: bool,
    ) -> Result<State, ReplayError> {
        State::default().replay_from(log, verify_signatures)
    }

    /// Folds the entries from `self.size` to the head into `self`, re-checking
    /// each one (the tail after a state snapshot).
    pub fn replay_from(
        mut self,
        log: &ledger::LogView<'_>,
        verify_signatures: bool,
    ) -> Result<State, ReplayError> {
        for index in self.size..log.head().size {
            let entry = log.entry(index)?;
            self.replay_one(index, &entry.leaf, log, verify_signatures)?;
        }
        Ok(self)
    }

    /// The state as bytes: `u32` BE length ‖ JSON. Derived data, never
    /// hashed into the log. Envelope ids are not part of it: they are in the
    /// log's key index, written with each entry.
    pub fn encode_snapshot(&self) -> Vec<u8> {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let mut out = Vec::with_capacity(json.len() + 4);
        out.extend_from_slice(&(json.len() as u32).to_be_bytes());
        out.extend_from_slice(&json);
        out
    }

    /// Parses [`State::encode_snapshot`]'s bytes; `None` when malformed.
    /// Bytes after the JSON (the id records earlier builds wrote there) are
    /// ignored.
    pub fn decode_snapshot(b: &[u8]) -> Option<State> {
        let len = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
        serde_json::from_slice(b.get(4..4usize.checked_add(len)?)?).ok()
    }

    /// Folds one logged leaf, re-checking it.
    pub fn replay_one(
        &mut self,
        index: u64,
        leaf: &[u8],
        log: &dyn Checkpoints,
        verify_signatures: bool,
    ) -> Result<(), ReplayError> {
        let invalid = |rejection| ReplayError::Invalid { index, rejection };
        let (d, at) = decode_leaf(leaf).map_err(invalid)?;
        if verify_signatures {
            let key = self.signer_key(&d).ok_or_else(|| {
                invalid(Rejection::new(C::UnknownSigner, "signer", "not enrolled"))
            })?;
            d.verify(&key).map_err(invalid)?;
        }
        let before = Limited { log, limit: index };
        self.check(&d, at, &before).map_err(invalid)?;
        self.apply(&d, index, at);
        Ok(())
    }
}

/// Checkpoints below a size: what an entry at `limit` could have named.
struct Limited<'a> {
    log: &'a dyn Checkpoints,
    limit: u64,
}

impl Checkpoints for Limited<'_> {
    fn root_at(&self, size: u64) -> Option<Hash> {
        (size <= self.limit)
            .then(|| self.log.root_at(size))
            .flatten()
    }
}

fn banned_key(k: &str, field: &str) -> Result<(), Rejection> {
    let lower = k.to_lowercase();
    match BANNED_BREAKDOWN_SUBSTRINGS
        .iter()
        .find(|b| lower.contains(*b))
    {
        Some(b) => reject(
            C::BreakdownKeyBanned,
            body(field),
            format!("breakdown keys may not contain `{b}`"),
        ),
        None => Ok(()),
    }
}

fn check_draft(d: &CaseDraft) -> Result<(), Rejection> {
    ident(&d.case_id, "draft.case_id")?;
    text(&d.title, "draft.title")?;
    text(&d.difficulty, "draft.difficulty")?;
    ident(&d.curation_class, "draft.curation_class")?;
    digest(&d.case_digest, "draft.case_digest")?;
    digest(&d.cassette_digest, "draft.cassette_digest")
}
