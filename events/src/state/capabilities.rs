//! RAG write capabilities: `rag.capability.minted`, `rag.example.written` and
//! `rag.record.quarantined`. A capability id is minted once, for a workflow,
//! at a committed checkpoint of this log, and must not already be expired at
//! the sequencing time. A write spends it exactly once: by the workflow it was
//! minted for, not already spent, not quarantined, and sequenced before it
//! expires (the sequencing time decides, never the client's clock). Only a
//! minted capability can be quarantined.

use super::{body, digest, ident, sensitive_text, timestamp, Checkpoints, State};
use crate::envelope::parse_utc_micros;
use crate::model::{CapabilityMinted, RagExampleWritten, RagRecordQuarantined};
use crate::reject::{reject, RejectCode as C, Rejection};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CapabilityState {
    pub workflow_id: String,
    pub expires_at: i64,
    pub spent_at: Option<u64>,
    pub quarantined: bool,
}

impl State {
    pub(super) fn check_capability_minted(
        &self,
        e: &CapabilityMinted,
        at: i64,
        log: &dyn Checkpoints,
    ) -> Result<(), Rejection> {
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
        self.checkpoint(&e.minted_at, "minted_at", log)
    }

    pub(super) fn check_rag_example_written(
        &self,
        e: &RagExampleWritten,
        at: i64,
    ) -> Result<(), Rejection> {
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
        digest(&e.example_digest, "example_digest")
    }

    pub(super) fn check_rag_record_quarantined(
        &self,
        e: &RagRecordQuarantined,
    ) -> Result<(), Rejection> {
        if !self.capabilities.contains_key(&e.capability_id) {
            return reject(
                C::CapabilityUnknown,
                body("capability_id"),
                "no such capability",
            );
        }
        sensitive_text(&e.reason, "reason")
    }

    pub(super) fn apply_capability_minted(&mut self, e: &CapabilityMinted) {
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

    /// Spends the capability: the write appended at `index`.
    pub(super) fn apply_rag_example_written(&mut self, e: &RagExampleWritten, index: u64) {
        if let Some(c) = self.capabilities.get_mut(&e.capability_id) {
            c.spent_at = Some(index);
        }
    }

    pub(super) fn apply_rag_record_quarantined(&mut self, e: &RagRecordQuarantined) {
        if let Some(c) = self.capabilities.get_mut(&e.capability_id) {
            c.quarantined = true;
        }
    }
}
