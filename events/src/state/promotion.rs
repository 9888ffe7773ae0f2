//! Promotion and anchors: `promotion.requested`, `promotion.recommended`,
//! `tier.apply`, `promotion.apply_blocked`, `tier.changed` and
//! `anchor.published`. Requests, recommendations and blocked-apply records
//! name a registered task class; a recommendation must say it requires human
//! approval, start from the class's current tier, and cite a committed
//! checkpoint of this log. `tier.apply` is never appended: the ledger never
//! applies a tier change. The only way a tier changes is `tier.changed`, from
//! the class's current tier to another one, naming a `promotion.recommended`
//! entry for that class and that change, with two distinct maintainers
//! co-signing the tier-change statement. An anchor cites a committed
//! checkpoint and says where it was published.

use super::{body, text, Checkpoints, State};
use crate::envelope::{tier_change_statement, Preverified};
use crate::model::{
    AnchorPublished, PromotionApplyBlocked, PromotionRecommended, PromotionRequested, Role,
    StateCommitted, Tier, TierChanged,
};
use crate::reject::{reject, RejectCode as C, Rejection};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RecommendationState {
    pub task_class: String,
    pub from: Tier,
    pub to: Tier,
}

impl State {
    pub(super) fn check_promotion_requested(
        &self,
        e: &PromotionRequested,
    ) -> Result<(), Rejection> {
        self.task_class(&e.task_class).map(|_| ())
    }

    pub(super) fn check_promotion_recommended(
        &self,
        e: &PromotionRecommended,
        log: &dyn Checkpoints,
    ) -> Result<(), Rejection> {
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
        if let Some((field, rule)) = e.settings.as_ref().and_then(|s| s.out_of_range()) {
            return reject(C::InvalidValue, body(&format!("settings.{field}")), rule);
        }
        if let Some(tree) = &e.evidence_tree {
            if !e.evidence.is_empty() {
                return reject(
                    C::InvalidValue,
                    body("evidence"),
                    "must be empty when the evidence is cited by evidence_tree",
                );
            }
            if !hex_digest(&tree.root) {
                return reject(
                    C::InvalidDigest,
                    body("evidence_tree.root"),
                    "must be 64 lowercase hex digits",
                );
            }
        }
        self.checkpoint(&e.checkpoint, "checkpoint", log)
    }

    /// `tier.apply` is always refused; the sequencer records the refusal as
    /// `promotion.apply_blocked`.
    pub(super) fn check_tier_apply(&self) -> Result<(), Rejection> {
        reject(
            C::PromotionMustBeHumanAuthorized,
            "event.kind",
            "the ledger never applies a tier change; record a human decision as tier.changed signed by two maintainers",
        )
    }

    pub(super) fn check_promotion_apply_blocked(
        &self,
        e: &PromotionApplyBlocked,
    ) -> Result<(), Rejection> {
        self.task_class(&e.task_class).map(|_| ())
    }

    pub(super) fn check_tier_changed(
        &self,
        e: &TierChanged,
        preverified: &[Preverified],
    ) -> Result<(), Rejection> {
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
            preverified,
        )
    }

    pub(super) fn check_anchor_published(
        &self,
        e: &AnchorPublished,
        log: &dyn Checkpoints,
    ) -> Result<(), Rejection> {
        self.checkpoint(&e.checkpoint, "checkpoint", log)?;
        text(&e.location, "location")
    }

    /// A state commitment names the log just before it: its size must be
    /// the entry's own index, and its root the log's root there. What the
    /// state root commits to is the projection's business (it is checked by
    /// whoever replays the log), not the sequencer's.
    pub(super) fn check_state_committed(
        &self,
        e: &StateCommitted,
        log: &dyn Checkpoints,
    ) -> Result<(), Rejection> {
        if e.checkpoint.size != self.size {
            return reject(
                C::StateNotAtHead,
                body("checkpoint.size"),
                format!(
                    "must be this entry's own index ({}), not {}",
                    self.size, e.checkpoint.size
                ),
            );
        }
        self.checkpoint(&e.checkpoint, "checkpoint", log)?;
        if !hex_digest(&e.state_root) {
            return reject(
                C::InvalidDigest,
                body("state_root"),
                "must be 64 lowercase hex digits",
            );
        }
        Ok(())
    }

    /// Keeps the recommendation appended at `index`, for `tier.changed` to
    /// name.
    pub(super) fn apply_promotion_recommended(&mut self, e: &PromotionRecommended, index: u64) {
        self.recommendations.insert(
            index,
            RecommendationState {
                task_class: e.task_class.clone(),
                from: e.current_tier,
                to: e.recommended_tier,
            },
        );
    }

    pub(super) fn apply_tier_changed(&mut self, e: &TierChanged) {
        if let Some(t) = self.task_classes.get_mut(&e.task_class) {
            t.tier = e.to;
        }
    }
}

/// Whether `s` is 64 lowercase hex digits (a SHA-256 digest as the log
/// writes one).
fn hex_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
