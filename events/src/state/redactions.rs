//! Redactions (docs/PRIVACY.md): two maintainers destroy the kept
//! disclosure of one committed field of an earlier entry. The entry, its
//! commitment and every proof stay as they were.

use super::{body, sensitive_text, Checkpoints, State};
use crate::envelope::{decode_logged_leaf, field_redact_statement, Preverified};
use crate::model::{FieldRedacted, Role};
use crate::reject::{reject, RejectCode as C, Rejection};

impl State {
    pub(super) fn check_field_redacted(
        &self,
        e: &FieldRedacted,
        preverified: &[Preverified],
        log: &dyn Checkpoints,
    ) -> Result<(), Rejection> {
        let Some((leaf, leaf_hash)) = log.entry_leaf(e.entry) else {
            return reject(
                C::RedactionTargetMismatch,
                body("entry"),
                "names no earlier entry of this log",
            );
        };
        if ledger::hash::to_hex(&leaf_hash) != e.leaf_hash {
            return reject(
                C::RedactionTargetMismatch,
                body("leaf_hash"),
                "is not the leaf hash of that entry",
            );
        }
        let committed = decode_logged_leaf(&leaf)
            .ok()
            .and_then(|(d, _)| crate::disclose::part_of(&d.payload.event, &e.field));
        if committed.is_none() {
            return reject(
                C::RedactionFieldNotCommitted,
                body("field"),
                "that entry holds no commitment in this field",
            );
        }
        if self.redactions.contains(&(e.entry, e.field.clone())) {
            return reject(
                C::AlreadyRedacted,
                body("field"),
                "this field of that entry is already redacted",
            );
        }
        sensitive_text(&e.reason, "reason")?;
        let statement = field_redact_statement(e.entry, &e.leaf_hash, &e.field);
        self.check_cosigners(
            [
                (&e.requested_by, "requested_by"),
                (&e.confirmed_by, "confirmed_by"),
            ],
            Role::Maintainer,
            &statement,
            preverified,
        )
    }

    pub(super) fn apply_field_redacted(&mut self, e: &FieldRedacted) {
        self.redactions.insert((e.entry, e.field.clone()));
    }
}
