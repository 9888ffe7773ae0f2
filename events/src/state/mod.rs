//! The state machine: everything the log has established that decides whether
//! the next event is allowed. `check` is pure (the sequencing time and the
//! log's checkpoints are inputs); `apply` folds an accepted event in.
//! Replaying the log through `check` + `apply` rebuilds the same state.
//!
//! This module holds [`State`], the field validators every rule shares, the
//! envelope checks, replay and snapshots, and dispatches each event kind to
//! the aggregate that owns it: `principals` (enrolment, keys, roles,
//! revocation, co-signatures), `catalogue` (task classes, rubrics, cases,
//! proposals), `runs` (runs, rubric invocations, scores), `capabilities`
//! (RAG write capabilities) and `promotion` (requests, recommendations,
//! refused applies, tier changes, anchors). Each aggregate module owns both
//! the checks and the folds of its kinds.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ed25519_dalek::VerifyingKey;

use crate::envelope::{decode_leaf, parse_utc_micros, Decoded};
use crate::model::{CheckpointRef, Event, RubricCompleted, RubricFailed};
use crate::reject::{reject, RejectCode as C, Rejection};
use ledger::hash::Hash;

mod capabilities;
mod catalogue;
mod principals;
mod promotion;
mod redactions;
mod runs;
mod tracked;

pub use capabilities::CapabilityState;
pub use catalogue::{CaseState, CaseStatus, ProposalState, ProposalStatus, TaskClassState};
pub use principals::{sigstore_principal_id, sigstore_statement, Principal, SigstoreTrust};
pub use promotion::RecommendationState;
pub use runs::{InvocationState, RunState};
pub use tracked::{Tracked, TrackedSet};

/// Breakdown keys may not contain these (case-insensitive): they smuggle a
/// model's opinion of itself into a score.
pub const BANNED_BREAKDOWN_SUBSTRINGS: &[&str] =
    &["confidence", "llm", "self_reported", "model_says"];

/// Roots of this log at past sizes, for events that name a checkpoint.
pub trait Checkpoints {
    /// The root at `size`, if `size` is a committed size the event may name.
    fn root_at(&self, size: u64) -> Option<Hash>;

    /// The leaf and leaf hash of entry `index`, if it is an entry the event
    /// may name (a redaction names one).
    fn entry_leaf(&self, _index: u64) -> Option<(Vec<u8>, Hash)> {
        None
    }
}

impl Checkpoints for ledger::LogView<'_> {
    fn root_at(&self, size: u64) -> Option<Hash> {
        ledger::LogView::root_at(self, size).ok()
    }

    fn entry_leaf(&self, index: u64) -> Option<(Vec<u8>, Hash)> {
        (index < self.head().size)
            .then(|| self.entry(index).ok())
            .flatten()
            .map(|e| (e.leaf, e.leaf_hash))
    }
}

/// Everything the log has established, as of `size` entries.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct State {
    pub principals: Tracked<String, Principal>,
    pub task_classes: Tracked<String, TaskClassState>,
    pub cases: Tracked<String, CaseState>,
    pub proposals: Tracked<String, ProposalState>,
    pub runs: Tracked<String, RunState>,
    pub invocations: Tracked<String, InvocationState>,
    pub capabilities: Tracked<String, CapabilityState>,
    pub recommendations: Tracked<u64, RecommendationState>,
    pub size: u64,
    /// The latest sequencing time (µs, UTC); sequencing never goes back.
    pub last_sequenced_at: i64,
    /// The index of the log's first schema-2 entry, from which it holds
    /// sensitive values only as commitments (docs/PRIVACY.md). Snapshots
    /// written before schema 2 existed lack it: no log had one then.
    #[serde(default)]
    pub commitments_from: Option<u64>,
    /// The index of the log's first schema-3 entry, from which identifiers
    /// that name sensitive values are handles. Absent from the snapshots
    /// of logs that have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handles_from: Option<u64>,
    /// Every handle a schema-3 event gave, by class and handle
    /// (`case/…`, `identity/…`, `workflow/…`): the entry that gave it,
    /// whose kept disclosure holds its value.
    #[serde(default, skip_serializing_if = "tracked::is_empty")]
    pub handles: Tracked<String, u64>,
    /// Every redacted field: (entry index, field path).
    #[serde(default)]
    pub redactions: TrackedSet<(u64, String)>,
    /// The Sigstore trusted root in force and the log's origin, once a
    /// `sigstore.root_trusted` entry recorded them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigstore: Option<SigstoreTrust>,
    /// The size from which the tracked maps note their changes
    /// ([`State::track_changes`]): bookkeeping for saving the state as the
    /// changes since the last save, not state.
    #[serde(skip)]
    tracked_from: tracked::Mark,
}

/// The changes to a [`State`] between two sizes of the log: every key of a
/// tracked map that changed, with its value at `size` (`None`: removed),
/// what the set of redactions gained, and the rest of the state (a few
/// numbers and the Sigstore root in force) whole. Applied to the state at `from`,
/// it gives the state at `size`; the state at a size is a function of the
/// log's first entries, so it does so whichever save made that state.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StateDelta {
    /// Written before the JSON ([`StateDelta::encode`]), so that a delta
    /// left by an earlier chain is told apart without decoding it.
    #[serde(skip)]
    pub from: u64,
    pub size: u64,
    pub last_sequenced_at: i64,
    pub commitments_from: Option<u64>,
    pub handles_from: Option<u64>,
    /// The redactions recorded since `from` (the set only grows).
    pub redactions_added: Vec<(u64, String)>,
    pub sigstore: Option<SigstoreTrust>,
    pub principals: BTreeMap<String, Option<Principal>>,
    pub task_classes: BTreeMap<String, Option<TaskClassState>>,
    pub cases: BTreeMap<String, Option<CaseState>>,
    pub proposals: BTreeMap<String, Option<ProposalState>>,
    pub runs: BTreeMap<String, Option<RunState>>,
    pub invocations: BTreeMap<String, Option<InvocationState>>,
    pub capabilities: BTreeMap<String, Option<CapabilityState>>,
    pub recommendations: BTreeMap<u64, Option<RecommendationState>>,
    pub handles: BTreeMap<String, Option<u64>>,
    /// The changes to the door's index of the values behind handles over
    /// the same entries ([`crate::handles::HandleValues::take_changes`],
    /// base64), when the saver noted them. The ledger's, not the state's:
    /// a state is a function of the log, the index also of the kept
    /// disclosures. A start folds them into the saved index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle_index: Option<String>,
}

impl StateDelta {
    /// The delta as bytes: `from` (u64 BE) ‖ JSON of the rest. Derived
    /// data, never hashed into the log.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.from.to_be_bytes().to_vec();
        // Writes to memory: serializing these types does not fail (if it
        // did, the JSON would be cut short, and no start decodes it).
        let _ = serde_json::to_writer(&mut out, self);
        out
    }

    /// The size the encoded delta `b` continues from, read without
    /// decoding the rest; `None` when too short.
    pub fn from_of(b: &[u8]) -> Option<u64> {
        Some(u64::from_be_bytes(b.get(..8)?.try_into().ok()?))
    }

    /// Parses [`StateDelta::encode`]'s bytes; `None` when malformed or
    /// when it does not move forward.
    pub fn decode(b: &[u8]) -> Option<StateDelta> {
        let from = StateDelta::from_of(b)?;
        let mut d = serde_json::from_slice::<StateDelta>(&b[8..]).ok()?;
        d.from = from;
        (d.from <= d.size).then_some(d)
    }
}

impl State {
    /// Starts noting the keys that change from here on, so that
    /// [`State::take_delta`] can hand over the changes since this size.
    pub fn track_changes(&mut self) {
        self.principals.track();
        self.task_classes.track();
        self.cases.track();
        self.proposals.track();
        self.runs.track();
        self.invocations.track();
        self.capabilities.track();
        self.recommendations.track();
        self.handles.track();
        self.redactions.track();
        self.tracked_from = tracked::Mark(Some(self.size));
    }

    /// The size from which changes are noted, when they are.
    pub fn tracked_from(&self) -> Option<u64> {
        self.tracked_from.0
    }

    /// The changes since tracking began or the last delta was taken (at
    /// [`State::tracked_from`]); tracking goes on from this size. `None`
    /// when changes are not being noted (then only a whole snapshot saves
    /// this state).
    pub fn take_delta(&mut self) -> Option<StateDelta> {
        let from = self.tracked_from.0?;
        let tracking = self.principals.tracking()
            && self.task_classes.tracking()
            && self.cases.tracking()
            && self.proposals.tracking()
            && self.runs.tracking()
            && self.invocations.tracking()
            && self.capabilities.tracking()
            && self.recommendations.tracking()
            && self.handles.tracking()
            && self.redactions.tracking();
        if !tracking {
            return None;
        }
        let delta = StateDelta {
            from,
            size: self.size,
            last_sequenced_at: self.last_sequenced_at,
            commitments_from: self.commitments_from,
            handles_from: self.handles_from,
            redactions_added: self.redactions.take_added()?,
            sigstore: self.sigstore.clone(),
            principals: self.principals.take_changes()?,
            task_classes: self.task_classes.take_changes()?,
            cases: self.cases.take_changes()?,
            proposals: self.proposals.take_changes()?,
            runs: self.runs.take_changes()?,
            invocations: self.invocations.take_changes()?,
            capabilities: self.capabilities.take_changes()?,
            recommendations: self.recommendations.take_changes()?,
            handles: self.handles.take_changes()?,
            handle_index: None,
        };
        self.tracked_from = tracked::Mark(Some(self.size));
        Some(delta)
    }

    /// Applies a delta taken at this state's size; false (and nothing
    /// changed) when it was taken at another.
    pub fn apply_delta(&mut self, d: StateDelta) -> bool {
        if d.from != self.size || d.size < d.from {
            return false;
        }
        self.size = d.size;
        self.last_sequenced_at = d.last_sequenced_at;
        self.commitments_from = d.commitments_from;
        self.handles_from = d.handles_from;
        self.redactions.apply_added(d.redactions_added);
        self.sigstore = d.sigstore;
        self.principals.apply_changes(d.principals);
        self.task_classes.apply_changes(d.task_classes);
        self.cases.apply_changes(d.cases);
        self.proposals.apply_changes(d.proposals);
        self.runs.apply_changes(d.runs);
        self.invocations.apply_changes(d.invocations);
        self.capabilities.apply_changes(d.capabilities);
        self.recommendations.apply_changes(d.recommendations);
        self.handles.apply_changes(d.handles);
        true
    }
}

/// The key of a handle in [`State::handles`].
fn handle_key(class: crate::disclose::HandleClass, handle: &str) -> String {
    format!("{}/{handle}", class.as_str())
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
    check_ident(s, &body(field))
}

/// The *identifier* rule, for the field named `field` in full.
pub(crate) fn check_ident(s: &str, field: &str) -> Result<(), Rejection> {
    let ok = !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:/@+-".contains(&b));
    if ok {
        Ok(())
    } else {
        reject(
            C::InvalidIdentifier,
            field,
            "must be 1–128 characters from [A-Za-z0-9._:/@+-]",
        )
    }
}

fn text(s: &str, field: &str) -> Result<(), Rejection> {
    check_text(s, &body(field))
}

/// A sensitive text field: checked when in clear. A commitment's value was
/// checked at the door, when its disclosure was opened
/// ([`crate::disclose::open`]).
fn sensitive_text(s: &crate::model::Sensitive<String>, field: &str) -> Result<(), Rejection> {
    match s.clear() {
        Some(v) => text(v, field),
        None => Ok(()),
    }
}

/// The *text* rule, for the field named `field` in full.
pub(crate) fn check_text(s: &str, field: &str) -> Result<(), Rejection> {
    if s.trim().is_empty() || s.chars().count() > 4096 || s.chars().any(char::is_control) {
        reject(
            C::InvalidText,
            field,
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

/// A co-signature's 64 bytes, if it is base64 of exactly that many.
pub(crate) fn signature_bytes(b64: &str) -> Option<[u8; 64]> {
    B64.decode(b64).ok().and_then(|v| v.try_into().ok())
}

/// Parses a base64 Ed25519 public key.
pub fn parse_public_key(s: &str) -> Option<VerifyingKey> {
    let bytes: [u8; 32] = B64.decode(s).ok()?.try_into().ok()?;
    VerifyingKey::from_bytes(&bytes).ok()
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

impl State {
    /// A checkpoint `(size, root)` the event names is one of this log's.
    fn checkpoint(
        &self,
        c: &CheckpointRef,
        field: &str,
        log: &dyn Checkpoints,
    ) -> Result<(), Rejection> {
        let root = log.root_at(c.size);
        if root.map(|r| ledger::hash::to_hex(&r)) == Some(c.root.clone()) {
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
        if p.schema < self.schema() {
            let (from, what) = match self.handles_from {
                Some(from) => (
                    from,
                    "identifiers that name sensitive values only as handles",
                ),
                None => (
                    self.commitments_from.unwrap_or_default(),
                    "sensitive values only as commitments",
                ),
            };
            return reject(
                C::SchemaSuperseded,
                "schema",
                format!(
                    "this log holds {what} from entry {from} on: sign schema {} (docs/PRIVACY.md)",
                    self.schema()
                ),
            );
        }
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
        self.check_handle(p)?;
        let preverified = &d.preverified;
        match &p.event {
            Event::PrincipalEnrolled(e) => self.check_principal_enrolled(e),
            Event::PrincipalRevoked(e) => self.check_principal_revoked(e),
            Event::TaskClassRegistered(e) => self.check_task_class_registered(e),
            Event::RubricUpdated(e) => self.check_rubric_updated(e),
            Event::CaseAdded(e) => self.check_case_added(e, preverified),
            Event::CaseRetired(e) => self.check_case_retired(e, preverified),
            Event::CaseProposed(e) => self.check_case_proposed(e),
            Event::ProposalApproved(e) => self.check_proposal_approved(e, preverified),
            Event::ProposalRejected(e) => self.check_proposal_rejected(e),
            Event::RunStarted(e) => self.check_run_started(e),
            Event::RunFinished(e) => self.check_run_finished(e),
            Event::RubricInvoked(e) => self.check_rubric_invoked(e),
            Event::RubricCompleted(e) => self.check_rubric_completed(e),
            Event::RubricFailed(e) => self.check_rubric_failed(e),
            Event::ScoreRecorded(e) => self.check_score_recorded(e),
            Event::CapabilityMinted(e) => self.check_capability_minted(e, at, log),
            Event::RagExampleWritten(e) => self.check_rag_example_written(e, at),
            Event::RagRecordQuarantined(e) => self.check_rag_record_quarantined(e),
            Event::PromotionRequested(e) => self.check_promotion_requested(e),
            Event::PromotionRecommended(e) => self.check_promotion_recommended(e, log),
            Event::TierApply(_) => self.check_tier_apply(),
            Event::PromotionApplyBlocked(e) => self.check_promotion_apply_blocked(e),
            Event::TierChanged(e) => self.check_tier_changed(e, preverified),
            Event::FieldRedacted(e) => self.check_field_redacted(e, preverified, log),
            Event::AnchorPublished(e) => self.check_anchor_published(e, log),
            Event::StateCommitted(e) => self.check_state_committed(e, log),
            Event::SigstoreRootTrusted(e) => self.check_sigstore_root_trusted(e),
        }
    }

    /// Folds an accepted event, appended at `index` and sequenced at `at`.
    pub fn apply(&mut self, d: &Decoded, index: u64, at: i64) {
        let p = &d.payload;
        self.size = index + 1;
        if p.schema != crate::model::SCHEMA_CLEAR && self.commitments_from.is_none() {
            self.commitments_from = Some(index);
        }
        if p.schema >= crate::model::SCHEMA_HANDLES {
            if self.handles_from.is_none() {
                self.handles_from = Some(index);
            }
            if let Some(h) = crate::disclose::handle_field(&p.event).filter(|h| h.derived()) {
                let key = handle_key(h.class, h.handle);
                if !self.handles.contains_key(&key) {
                    self.handles.insert(key, index);
                }
            }
        }
        self.last_sequenced_at = self.last_sequenced_at.max(at);
        match &p.event {
            Event::PrincipalEnrolled(e) => self.apply_principal_enrolled(e),
            Event::PrincipalRevoked(e) => self.apply_principal_revoked(e),
            Event::TaskClassRegistered(e) => self.apply_task_class_registered(e),
            Event::RubricUpdated(e) => self.apply_rubric_updated(e),
            Event::CaseAdded(e) => self.apply_case_added(e),
            Event::CaseRetired(e) => self.apply_case_retired(e),
            Event::CaseProposed(e) => self.apply_case_proposed(e),
            Event::ProposalApproved(e) => self.apply_proposal_approved(e),
            Event::ProposalRejected(e) => self.apply_proposal_rejected(e),
            Event::RunStarted(e) => self.apply_run_started(e),
            Event::RunFinished(e) => self.apply_run_finished(e),
            Event::RubricInvoked(e) => self.apply_rubric_invoked(e),
            Event::RubricCompleted(RubricCompleted { invocation_id })
            | Event::RubricFailed(RubricFailed { invocation_id, .. }) => {
                self.apply_rubric_closed(invocation_id)
            }
            Event::CapabilityMinted(e) => self.apply_capability_minted(e),
            Event::RagExampleWritten(e) => self.apply_rag_example_written(e, index),
            Event::RagRecordQuarantined(e) => self.apply_rag_record_quarantined(e),
            Event::PromotionRecommended(e) => self.apply_promotion_recommended(e, index),
            Event::TierChanged(e) => self.apply_tier_changed(e),
            Event::FieldRedacted(e) => self.apply_field_redacted(e),
            Event::SigstoreRootTrusted(e) => self.apply_sigstore_root_trusted(e, index),
            // Records that change no rule's inputs.
            Event::ScoreRecorded(_)
            | Event::PromotionRequested(_)
            | Event::PromotionApplyBlocked(_)
            | Event::AnchorPublished(_)
            | Event::StateCommitted(_)
            | Event::TierApply(_) => {}
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
        // Read in runs: one pass over each run of the store (two queries
        // on PostgreSQL, where a frontend folds in every batch the others
        // committed), not one read per entry.
        const RUN: u64 = 256;
        let end = log.head().size;
        while self.size < end {
            let start = self.size;
            for (index, entry) in (start..).zip(log.entries(start, (start + RUN).min(end))?) {
                self.replay_one(index, &entry.leaf, log, verify_signatures)?;
            }
            if self.size == start {
                break;
            }
        }
        Ok(self)
    }

    /// The state as bytes: `u32` BE length ‖ JSON. Derived data, never
    /// hashed into the log. Envelope ids are not part of it: they are in the
    /// log's key index, written with each entry.
    /// The schema this log accepts now, and the ledger writes its own
    /// events in: 1 until its first schema-2 entry, 2 from then on until
    /// its first schema-3 entry, 3 from then on.
    pub fn schema(&self) -> u32 {
        match (self.handles_from, self.commitments_from) {
            (Some(_), _) => crate::model::SCHEMA_HANDLES,
            (None, Some(_)) => crate::model::SCHEMA_COMMITTED,
            (None, None) => crate::model::SCHEMA_CLEAR,
        }
    }

    /// The entry that gave `handle` of `class`, when a schema-3 event did.
    pub fn handle_origin(&self, class: crate::disclose::HandleClass, handle: &str) -> Option<u64> {
        self.handles.get(&handle_key(class, handle)).copied()
    }

    /// `handle` is an identifier of `class` this log already holds: given
    /// by a schema-3 event, or a value in clear from before the log's
    /// switch to schema 3.
    pub fn handle_known(&self, class: crate::disclose::HandleClass, handle: &str) -> bool {
        use crate::disclose::HandleClass::*;
        self.handle_origin(class, handle).is_some()
            || match class {
                Case => {
                    self.cases.contains_key(handle)
                        || self.proposals.values().any(|p| p.draft.case_id == handle)
                }
                Identity => self.principals.values().any(|p| p.identity == handle),
                Workflow => self.capabilities.values().any(|c| c.workflow_id == handle),
            }
    }

    /// From schema 3: the identifier that names a sensitive value where it
    /// is first named is the digest of the commitment beside it (a value
    /// named here first) or a handle this log already holds for its class
    /// (the same value again: the ledger checks at the door that it is).
    fn check_handle(&self, p: &crate::model::Payload) -> Result<(), Rejection> {
        let Some(h) = crate::disclose::handle_field(&p.event) else {
            return Ok(());
        };
        if p.schema < crate::model::SCHEMA_HANDLES
            || h.derived()
            || self.handle_known(h.class, h.handle)
        {
            return Ok(());
        }
        reject(
            C::HandleNotDerived,
            body(h.handle_path),
            format!(
                "must be the digest `{}._sd` beside it, or the handle an earlier event gave the same {} (docs/PRIVACY.md, \"Handles\")",
                h.name_path,
                h.class.as_str()
            ),
        )
    }

    pub fn encode_snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_snapshot_into(&mut out);
        out
    }

    /// [`State::encode_snapshot`]'s bytes appended to `out` (a sealed
    /// record's body, written in place): the JSON is written once, behind
    /// its length, rather than into a buffer of its own and then copied.
    pub fn encode_snapshot_into<B: std::io::Write + AsMut<[u8]>>(&self, out: &mut B) {
        let at = out.as_mut().len();
        // Writes to memory: they do not fail.
        let _ = out.write_all(&[0; 4]);
        let written = serde_json::to_writer(&mut *out, self).is_ok();
        // A state that does not encode (it always does) is saved as an empty
        // JSON text, which no start accepts: the state is then replayed.
        let len = if written {
            out.as_mut().len() - at - 4
        } else {
            0
        };
        out.as_mut()[at..at + 4].copy_from_slice(&(len as u32).to_be_bytes());
    }

    /// Parses [`State::encode_snapshot`]'s bytes; `None` when malformed.
    /// Bytes after the JSON (the id records earlier builds wrote there) are
    /// ignored.
    pub fn decode_snapshot(b: &[u8]) -> Option<State> {
        let len = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
        serde_json::from_slice(b.get(4..4usize.checked_add(len)?)?).ok()
    }

    /// The bytes after the state in [`State::encode_snapshot`]'s (where
    /// the sequencer saves its index of the values behind handles); empty
    /// when there are none or the bytes are too short.
    pub fn snapshot_trailer(b: &[u8]) -> &[u8] {
        let len = b
            .get(..4)
            .and_then(|l| l.try_into().ok())
            .map(|l| u32::from_be_bytes(l) as usize);
        len.and_then(|len| b.get(4usize.checked_add(len)?..))
            .unwrap_or_default()
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
        // The ledger sequences every entry at the latest of its clock and
        // the entry before: a time that goes back was not its doing.
        if at < self.last_sequenced_at {
            return Err(invalid(Rejection::new(
                C::SequencedAtDecreased,
                "sequenced_at",
                format!(
                    "{} is earlier than the entry before it ({})",
                    crate::envelope::format_micros(at),
                    crate::envelope::format_micros(self.last_sequenced_at)
                ),
            )));
        }
        // An entry that enrols or revokes a key is checked even when
        // signatures are not: a forged one would hand out the power to
        // write before anything else looks.
        let changes_keys = matches!(
            d.payload.event,
            Event::PrincipalEnrolled(_) | Event::PrincipalRevoked(_)
        );
        if verify_signatures || changes_keys {
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

    fn entry_leaf(&self, index: u64) -> Option<(Vec<u8>, Hash)> {
        (index < self.limit)
            .then(|| self.log.entry_leaf(index))
            .flatten()
    }
}
