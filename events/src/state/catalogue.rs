//! The catalogue: `task_class.registered`, `rubric.updated`, `case.added`,
//! `case.retired`, `case.proposed`, `proposal.approved` and
//! `proposal.rejected`. A task class is registered once, with silver and gold
//! rules (and none for bronze) where gold is at least as strict as silver,
//! unique failure-mode codes of a valid severity, and breakdown keys free of
//! banned substrings; a rubric update names a registered class. A case id is
//! used once, counting pending proposals; adding a case or approving a
//! proposal needs two curators co-signing the case-provenance statement, and
//! retiring an active case two curators co-signing the retirement statement.
//! A proposal stays pending, never scored, until it is approved (the case
//! becomes active as `outcome-ledger-derived`) or rejected; only a pending
//! proposal can be either.

use std::collections::BTreeSet;

use super::{banned_key, body, digest, ident, sensitive_text, severity, text, timestamp, State};
use crate::envelope::{case_provenance_statement, case_retire_statement, Preverified};
use crate::model::{
    CaseAdded, CaseDraft, CaseProposed, CaseRetired, CaseSource, ProposalApproved,
    ProposalRejected, Role, RubricUpdated, TaskClassRegistered, Tier,
};
use crate::reject::{reject, RejectCode as C, Rejection};

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

impl State {
    /// A registered task class.
    pub(super) fn task_class(&self, name: &str) -> Result<&TaskClassState, Rejection> {
        self.task_classes.get(name).ok_or_else(|| {
            Rejection::new(
                C::TaskClassUnknown,
                body("task_class"),
                format!("task class `{name}` is not registered"),
            )
        })
    }

    /// An active case; a pending proposal's case is refused as pending.
    pub(super) fn active_case(&self, id: &str, field: &str) -> Result<&CaseState, Rejection> {
        match self.cases.get(id) {
            Some(c) if c.status == CaseStatus::Active => Ok(c),
            Some(_) => reject(C::CaseNotActive, body(field), "the case is retired"),
            None if self.pending_case(id) => reject(
                C::CasePending,
                body(field),
                "the case is a pending proposal; it is never scored until approved",
            ),
            None => reject(C::CaseUnknown, body(field), "no such case"),
        }
    }

    /// Whether a pending proposal drafts the case `id`.
    fn pending_case(&self, id: &str) -> bool {
        self.proposals
            .values()
            .any(|p| p.draft.case_id == id && p.status == ProposalStatus::Pending)
    }

    fn case_id_free(&self, id: &str, field: &str) -> Result<(), Rejection> {
        if self.cases.contains_key(id) || self.pending_case(id) {
            reject(
                C::CaseExists,
                body(field),
                format!("case id `{id}` is already used"),
            )
        } else {
            Ok(())
        }
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

    pub(super) fn check_task_class_registered(
        &self,
        e: &TaskClassRegistered,
    ) -> Result<(), Rejection> {
        ident(&e.task_class, "task_class")?;
        if self.task_classes.contains_key(&e.task_class) {
            return reject(C::TaskClassExists, body("task_class"), "already registered");
        }
        let (Some(s), Some(g)) = (e.tiers.get(&Tier::Silver), e.tiers.get(&Tier::Gold)) else {
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
            if !(r.score_threshold.is_finite() && (0.0..=1.0).contains(&r.score_threshold)) {
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
        digest(&e.rubric_digest, "rubric_digest")
    }

    pub(super) fn check_rubric_updated(&self, e: &RubricUpdated) -> Result<(), Rejection> {
        self.task_class(&e.task_class)?;
        digest(&e.rubric_digest, "rubric_digest")
    }

    pub(super) fn check_case_added(
        &self,
        e: &CaseAdded,
        preverified: &[Preverified],
    ) -> Result<(), Rejection> {
        self.task_class(&e.task_class)?;
        ident(&e.case_id, "case_id")?;
        self.case_id_free(&e.case_id, "case_id")?;
        sensitive_text(&e.title, "title")?;
        sensitive_text(&e.difficulty, "difficulty")?;
        ident(&e.curation_class, "curation_class")?;
        digest(&e.case_digest, "case_digest")?;
        digest(&e.cassette_digest, "cassette_digest")?;
        sensitive_text(&e.provenance.source_ref, "provenance.source_ref")?;
        timestamp(&e.provenance.added_at, "provenance.added_at")?;
        let st = case_provenance_statement(&e.case_id, &e.provenance.added_at, &e.case_digest);
        self.check_cosigners(
            [
                (&e.provenance.added_by, "provenance.added_by"),
                (&e.provenance.reviewed_by, "provenance.reviewed_by"),
            ],
            Role::Curator,
            &st,
            preverified,
        )
    }

    pub(super) fn check_case_retired(
        &self,
        e: &CaseRetired,
        preverified: &[Preverified],
    ) -> Result<(), Rejection> {
        let case = self
            .cases
            .get(&e.case_id)
            .ok_or_else(|| Rejection::new(C::CaseUnknown, body("case_id"), "no such case"))?;
        if case.status != CaseStatus::Active {
            return reject(
                C::CaseNotActive,
                body("case_id"),
                "the case is already retired",
            );
        }
        sensitive_text(&e.reason, "reason")?;
        let st = case_retire_statement(&e.case_id, &case.case_digest);
        self.check_cosigners(
            [
                (&e.retired_by, "retired_by"),
                (&e.reviewed_by, "reviewed_by"),
            ],
            Role::Curator,
            &st,
            preverified,
        )
    }

    pub(super) fn check_case_proposed(&self, e: &CaseProposed) -> Result<(), Rejection> {
        ident(&e.proposal_id, "proposal_id")?;
        if self.proposals.contains_key(&e.proposal_id) {
            return reject(C::ProposalExists, body("proposal_id"), "already used");
        }
        self.task_class(&e.task_class)?;
        check_draft(&e.draft)?;
        self.case_id_free(&e.draft.case_id, "draft.case_id")?;
        sensitive_text(&e.production_ref, "production_ref")
    }

    pub(super) fn check_proposal_approved(
        &self,
        e: &ProposalApproved,
        preverified: &[Preverified],
    ) -> Result<(), Rejection> {
        let prop = self.pending_proposal(&e.proposal_id)?;
        timestamp(&e.added_at, "added_at")?;
        if self.cases.contains_key(&prop.draft.case_id) {
            return reject(
                C::CaseExists,
                body("proposal_id"),
                "the draft's case id is already used",
            );
        }
        let st =
            case_provenance_statement(&prop.draft.case_id, &e.added_at, &prop.draft.case_digest);
        self.check_cosigners(
            [(&e.added_by, "added_by"), (&e.reviewed_by, "reviewed_by")],
            Role::Curator,
            &st,
            preverified,
        )
    }

    pub(super) fn check_proposal_rejected(&self, e: &ProposalRejected) -> Result<(), Rejection> {
        self.pending_proposal(&e.proposal_id)?;
        sensitive_text(&e.reason, "reason")
    }

    pub(super) fn apply_task_class_registered(&mut self, e: &TaskClassRegistered) {
        self.task_classes.insert(
            e.task_class.clone(),
            TaskClassState {
                registration: e.clone(),
                rubric_digest: e.rubric_digest.clone(),
                tier: e.initial_tier,
            },
        );
    }

    pub(super) fn apply_rubric_updated(&mut self, e: &RubricUpdated) {
        if let Some(t) = self.task_classes.get_mut(&e.task_class) {
            t.rubric_digest = e.rubric_digest.clone();
        }
    }

    pub(super) fn apply_case_added(&mut self, e: &CaseAdded) {
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

    pub(super) fn apply_case_retired(&mut self, e: &CaseRetired) {
        if let Some(c) = self.cases.get_mut(&e.case_id) {
            c.status = CaseStatus::Retired;
        }
    }

    pub(super) fn apply_case_proposed(&mut self, e: &CaseProposed) {
        self.proposals.insert(
            e.proposal_id.clone(),
            ProposalState {
                task_class: e.task_class.clone(),
                draft: e.draft.clone(),
                status: ProposalStatus::Pending,
            },
        );
    }

    pub(super) fn apply_proposal_approved(&mut self, e: &ProposalApproved) {
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

    pub(super) fn apply_proposal_rejected(&mut self, e: &ProposalRejected) {
        if let Some(p) = self.proposals.get_mut(&e.proposal_id) {
            p.status = ProposalStatus::Rejected;
        }
    }
}

fn check_draft(d: &CaseDraft) -> Result<(), Rejection> {
    ident(&d.case_id, "draft.case_id")?;
    sensitive_text(&d.title, "draft.title")?;
    sensitive_text(&d.difficulty, "draft.difficulty")?;
    ident(&d.curation_class, "draft.curation_class")?;
    digest(&d.case_digest, "draft.case_digest")?;
    digest(&d.cassette_digest, "draft.cassette_digest")
}
