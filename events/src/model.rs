//! The event catalogue (MISSION.md §3; docs/EVENTS.md). Every struct refuses
//! unknown fields. Field names follow the design documents (`BenchScore`,
//! `BenchRunRecord`, `case.yaml`, `SolvedExampleWriteCapability`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The JSON Schema of the signed payload (every kind, `{"kind", "body"}`),
/// generated from [`Payload`], the type every envelope is decoded into.
/// What it cannot say (identifier and text rules, digest and time formats,
/// the rules that depend on the log) is checked by the sequencer and listed
/// in docs/EVENTS.md.
pub fn payload_schema() -> schemars::Schema {
    schemars::schema_for!(Payload)
}

/// The schema version this build writes. A log accepts a schema until its
/// first entry of a later one, and from that entry on only that schema or
/// later (docs/PRIVACY.md).
pub const SCHEMA_VERSION: u32 = SCHEMA_HANDLES;

/// The first schema: every field in clear.
pub const SCHEMA_CLEAR: u32 = 1;

/// Schema 2: sensitive fields hold commitments; identifiers are in clear.
pub const SCHEMA_COMMITTED: u32 = 2;

/// Schema 3: as schema 2, and the identifiers that name a sensitive value
/// (case ids, identities, workflow ids) are handles: the value is committed
/// in a companion field where it is first named, and every event names it
/// by the handle (docs/PRIVACY.md, "Handles").
pub const SCHEMA_HANDLES: u32 = 3;

/// A sensitive field (docs/EVENTS.md, "What each field reveals"): its value
/// in clear (schema 1), or, from schema 2 on, a commitment to it, the
/// digest of a disclosure that travels beside the envelope
/// ([`crate::disclose`], docs/PRIVACY.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Sensitive<T> {
    Committed(Commitment),
    Clear(T),
}

/// A commitment to a sensitive value: `{"_sd": digest}`, where the digest
/// is the SD-JWT digest (RFC 9901 §4.2.3) of the value's disclosure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Commitment {
    /// Base64url (no padding) of the SHA-256 of the disclosure's ASCII bytes.
    #[serde(rename = "_sd")]
    pub sd: String,
}

impl<T> Sensitive<T> {
    /// The value, when it is in clear.
    pub fn clear(&self) -> Option<&T> {
        match self {
            Sensitive::Clear(v) => Some(v),
            Sensitive::Committed(_) => None,
        }
    }

    /// The commitment's digest, when the value is committed.
    pub fn committed(&self) -> Option<&str> {
        match self {
            Sensitive::Committed(c) => Some(&c.sd),
            Sensitive::Clear(_) => None,
        }
    }
}

impl From<String> for Sensitive<String> {
    fn from(v: String) -> Self {
        Sensitive::Clear(v)
    }
}

impl From<&str> for Sensitive<String> {
    fn from(v: &str) -> Self {
        Sensitive::Clear(v.to_owned())
    }
}

impl From<Disposition> for Sensitive<Disposition> {
    fn from(v: Disposition) -> Self {
        Sensitive::Clear(v)
    }
}

/// The signed payload of every event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Payload {
    /// Schema version: 1 (every field in clear), 2 (sensitive fields
    /// committed) or 3 (also identifiers as handles).
    pub schema: u32,
    /// The envelope id: unique per event. Re-posting the same envelope is
    /// idempotent; reusing the id for other content is refused.
    pub id: String,
    /// Key id of the signing principal (hex SHA-256 of its public key).
    pub signer: String,
    /// When the client says it issued the event (RFC 3339, UTC). Kept and
    /// shown; never used for windows or expiry.
    pub issued_at: String,
    pub event: Event,
}

/// Defines the event catalogue once: the [`Event`] enum (tagged as
/// `{"kind": "...", "body": {...}}`, each variant carrying its body type of
/// the same name), the bodiless [`Kind`], [`Kind::ALL`], each kind's wire
/// name, and the decoding of a body by kind.
macro_rules! catalogue {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// The event kinds, tagged as `{"kind": "...", "body": {...}}`.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", content = "body", deny_unknown_fields)]
        pub enum Event {
            $($(#[$doc])* #[serde(rename = $name)] $variant($variant),)*
        }

        impl Event {
            /// The event's kind.
            pub fn kind(&self) -> Kind {
                match self {
                    $(Event::$variant(_) => Kind::$variant,)*
                }
            }
        }

        /// Event kinds without their bodies.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Kind {
            $($variant,)*
        }

        impl Kind {
            /// Every kind, in catalogue order.
            pub const ALL: [Kind; [$($name),*].len()] = [$(Kind::$variant),*];

            /// The kind's wire name (`case.added`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Kind::$variant => $name,)*
                }
            }

            /// The JSON Schema of this kind's body, generated from the
            /// type the sequencer decodes it into.
            pub fn body_schema(self) -> schemars::Schema {
                match self {
                    $(Kind::$variant => schemars::schema_for!($variant),)*
                }
            }

            /// The kind whose wire name is `name`.
            pub fn from_name(name: &str) -> Option<Kind> {
                match name {
                    $($name => Some(Kind::$variant),)*
                    _ => None,
                }
            }

            /// The event of this kind whose body is `body` (JSON); a body
            /// that is not one is refused naming the field at fault
            /// (`event.body.…`).
            pub(crate) fn event(self, body: &[u8]) -> Result<Event, crate::reject::Rejection> {
                match self {
                    $(Kind::$variant => Ok(Event::$variant(
                        crate::envelope::deserialize_naming_path(body, "event.body")?,
                    )),)*
                }
            }
        }
    };
}

catalogue! {
    PrincipalEnrolled = "principal.enrolled",
    PrincipalRevoked = "principal.revoked",
    TaskClassRegistered = "task_class.registered",
    RubricUpdated = "rubric.updated",
    CaseAdded = "case.added",
    CaseRetired = "case.retired",
    CaseProposed = "case.proposed",
    ProposalApproved = "proposal.approved",
    ProposalRejected = "proposal.rejected",
    RunStarted = "run.started",
    RunFinished = "run.finished",
    RubricInvoked = "rubric.invoked",
    RubricCompleted = "rubric.completed",
    RubricFailed = "rubric.failed",
    ScoreRecorded = "score.recorded",
    CapabilityMinted = "rag.capability.minted",
    RagExampleWritten = "rag.example.written",
    RagRecordQuarantined = "rag.record.quarantined",
    PromotionRequested = "promotion.requested",
    PromotionRecommended = "promotion.recommended",
    /// A request to apply a tier change. Never appended: it is always refused
    /// with `promotion_must_be_human_authorized`, and the refusal is recorded
    /// as `promotion.apply_blocked`.
    TierApply = "tier.apply",
    PromotionApplyBlocked = "promotion.apply_blocked",
    TierChanged = "tier.changed",
    AnchorPublished = "anchor.published",
    StateCommitted = "state.committed",
    /// Two maintainers destroy the kept disclosure of one committed field of
    /// an earlier entry (docs/PRIVACY.md, "Redaction").
    FieldRedacted = "field.redacted",
    /// The operator records the Sigstore trusted root that co-signatures by
    /// Sigstore identity are verified against from here on (docs/SIGSTORE.md).
    SigstoreRootTrusted = "sigstore.root_trusted",
}

/// Roles decide which event kinds a principal may append.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Harness,
    Curator,
    Gate,
    RagWriter,
    Reconciler,
    PromotionGate,
    Maintainer,
    Operator,
    /// The ledger's own key: recommendations and blocked-apply records.
    Ledger,
}

impl Role {
    pub const ALL: [Role; 9] = [
        Role::Harness,
        Role::Curator,
        Role::Gate,
        Role::RagWriter,
        Role::Reconciler,
        Role::PromotionGate,
        Role::Maintainer,
        Role::Operator,
        Role::Ledger,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Harness => "harness",
            Role::Curator => "curator",
            Role::Gate => "gate",
            Role::RagWriter => "rag-writer",
            Role::Reconciler => "reconciler",
            Role::PromotionGate => "promotion-gate",
            Role::Maintainer => "maintainer",
            Role::Operator => "operator",
            Role::Ledger => "ledger",
        }
    }

    /// May a principal with this role append `kind`?
    pub fn may_append(self, kind: Kind) -> bool {
        use Kind::*;
        if kind == TierApply {
            // Any enrolled principal may ask; the ask is always refused and
            // recorded.
            return true;
        }
        match self {
            Role::Operator => matches!(
                kind,
                PrincipalEnrolled
                    | PrincipalRevoked
                    | TaskClassRegistered
                    | RubricUpdated
                    | AnchorPublished
                    | SigstoreRootTrusted
            ),
            Role::Curator => matches!(
                kind,
                CaseAdded | CaseRetired | ProposalApproved | ProposalRejected
            ),
            Role::Reconciler => matches!(kind, CaseProposed),
            Role::Harness => matches!(
                kind,
                RunStarted
                    | RunFinished
                    | RubricInvoked
                    | RubricCompleted
                    | RubricFailed
                    | ScoreRecorded
            ),
            Role::Gate => matches!(kind, CapabilityMinted | RagRecordQuarantined),
            Role::RagWriter => matches!(kind, RagExampleWritten),
            Role::PromotionGate => matches!(kind, PromotionRequested),
            Role::Maintainer => matches!(kind, TierChanged | FieldRedacted),
            Role::Ledger => matches!(
                kind,
                PromotionRecommended | PromotionApplyBlocked | AnchorPublished | StateCommitted
            ),
        }
    }
}

/// Trust tiers, lowest first.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Bronze,
    Silver,
    Gold,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Bronze => "bronze",
            Tier::Silver => "silver",
            Tier::Gold => "gold",
        }
    }
}

/// A co-signature by a named principal over a statement the event defines
/// (docs/EVENTS.md, "Co-signed statements").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CoSignature {
    /// The co-signer's key id: the hex SHA-256 of its Ed25519 public key, or
    /// of its Sigstore identity ([`crate::sigstore_principal_id`]).
    pub key_id: String,
    /// Base64 of the 64-byte Ed25519 signature (a principal enrolled by key).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
    /// A Sigstore bundle (JSON, kept verbatim) whose certificate names the
    /// principal's enrolled Sigstore identity and signs the Sigstore form of
    /// the statement ([`crate::sigstore_statement`]): a principal enrolled by
    /// identity (docs/SIGSTORE.md).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    #[schemars(with = "String")]
    pub sigstore_bundle: Option<String>,
}

/// A principal named by its Sigstore identity: the certificate's SAN (an
/// e-mail address or a URI) and its OIDC issuer, both compared exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SigstoreIdentity {
    pub identity: String,
    pub issuer: String,
}

/// A tree size and its RFC 6962 root (hex) in this log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRef {
    pub size: u64,
    pub root: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrincipalEnrolled {
    /// Base64 of the 32-byte Ed25519 public key; empty (absent) for a
    /// principal enrolled by Sigstore identity.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub public_key: String,
    /// A principal that co-signs with Sigstore bundles instead of a key. Its
    /// SAN and issuer are in clear: every bundle it signs names them in its
    /// certificate, as Sigstore's public log does (docs/PRIVACY.md).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    #[schemars(with = "SigstoreIdentity")]
    pub sigstore: Option<SigstoreIdentity>,
    /// The identity (schema 1 and 2), or its handle (schema 3).
    pub identity: String,
    /// Schema 3: the commitment to the identity (an e-mail address, say)
    /// whose handle `identity` is.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    #[schemars(with = "Sensitive<String>")]
    pub identity_name: Option<Sensitive<String>>,
    pub roles: Vec<Role>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrincipalRevoked {
    pub key_id: String,
    pub reason: Sensitive<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TierRule {
    /// Active held-out cases needed for this tier.
    pub min_cases_for_promotion: u32,
    /// The lower 95% confidence bound of the mean score must reach this.
    pub score_threshold: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FailureMode {
    pub code: String,
    /// `block`, `warn` or `info`.
    pub severity: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskClassRegistered {
    pub task_class: String,
    /// Rules for `silver` and `gold` (bronze is the floor).
    pub tiers: BTreeMap<Tier, TierRule>,
    pub failure_modes: Vec<FailureMode>,
    pub breakdown_keys: Vec<String>,
    pub rubric_digest: String,
    pub initial_tier: Tier,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RubricUpdated {
    pub task_class: String,
    pub rubric_digest: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Disposition {
    Positive,
    Negative,
    Ambiguous,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CaseSource {
    Curated,
    OutcomeLedgerDerived,
    RegressionConverted,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    pub source: CaseSource,
    pub source_ref: Sensitive<String>,
    pub added_at: String,
    pub added_by: CoSignature,
    pub reviewed_by: CoSignature,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaseAdded {
    pub task_class: String,
    /// The case id (schema 1 and 2), or its handle (schema 3).
    pub case_id: String,
    /// Schema 3: the commitment to the case's name (an advisory id, say)
    /// whose handle `case_id` is.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    #[schemars(with = "Sensitive<String>")]
    pub case_name: Option<Sensitive<String>>,
    pub title: Sensitive<String>,
    pub disposition: Sensitive<Disposition>,
    pub difficulty: Sensitive<String>,
    /// `held-out`, or a corpus-derived class such as `corpus-derived`.
    pub curation_class: String,
    pub provenance: Provenance,
    pub case_digest: String,
    pub cassette_digest: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaseRetired {
    pub case_id: String,
    pub reason: Sensitive<String>,
    pub retired_by: CoSignature,
    pub reviewed_by: CoSignature,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaseDraft {
    /// The case id (schema 1 and 2), or its handle (schema 3).
    pub case_id: String,
    /// Schema 3: the commitment to the case's name (an advisory id, say)
    /// whose handle `case_id` is.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    #[schemars(with = "Sensitive<String>")]
    pub case_name: Option<Sensitive<String>>,
    pub title: Sensitive<String>,
    pub disposition: Sensitive<Disposition>,
    pub difficulty: Sensitive<String>,
    pub curation_class: String,
    pub case_digest: String,
    pub cassette_digest: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaseProposed {
    pub proposal_id: String,
    pub task_class: String,
    pub draft: CaseDraft,
    /// The production incident or outcome the draft came from.
    pub production_ref: Sensitive<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposalApproved {
    pub proposal_id: String,
    pub added_at: String,
    pub added_by: CoSignature,
    pub reviewed_by: CoSignature,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposalRejected {
    pub proposal_id: String,
    pub reason: Sensitive<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    Microvm,
    SharedKernel,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunStarted {
    pub run_id: String,
    pub task_class: String,
    pub harness_version: String,
    pub rubric_digest: String,
    pub sandbox_image_digest: String,
    pub isolation_class: Isolation,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunFinished {
    pub run_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RubricInvoked {
    pub run_id: String,
    pub case_id: String,
    pub invocation_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RubricCompleted {
    pub invocation_id: String,
}

/// Rubric failure codes (seed 001).
pub const RUBRIC_FAILURE_CODES: &[&str] = &[
    "rubric.timeout",
    "rubric.killed_oom",
    "rubric.malformed_output",
    "rubric.unknown_breakdown_key",
    "rubric.unknown_failure_mode",
    "rubric.crashed",
    "rubric.sandbox_violation",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RubricFailed {
    pub invocation_id: String,
    pub failure_code: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScoreFailureMode {
    pub code: String,
    pub severity: String,
}

/// `BenchScore` (seed 000).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BenchScore {
    pub passed: bool,
    pub score: f64,
    pub breakdown: BTreeMap<String, f64>,
    pub failure_modes: Vec<ScoreFailureMode>,
    pub cost_usd: f64,
    pub duration_seconds: f64,
}

/// `BenchRunRecord` (seed 000), without `prev_hash`: the log links entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScoreRecorded {
    pub run_id: String,
    pub task_class: String,
    pub case_id: String,
    pub case_digest: String,
    pub rubric_digest: String,
    pub cassette_digest: String,
    pub harness_version: String,
    pub image_digest: String,
    pub score: BenchScore,
    pub started_at: String,
    pub finished_at: String,
    pub operator_fingerprint: Sensitive<String>,
}

/// `SolvedExampleWriteCapability` (seed 002).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityMinted {
    pub capability_id: String,
    /// The workflow's id (schema 1 and 2), or its handle (schema 3).
    pub workflow_id: String,
    /// Schema 3: the commitment to the workflow id whose handle
    /// `workflow_id` is.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    #[schemars(with = "Sensitive<String>")]
    pub workflow_name: Option<Sensitive<String>>,
    pub validated_at: String,
    /// The ledger checkpoint the capability was minted at.
    pub minted_at: CheckpointRef,
    pub expires_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RagExampleWritten {
    pub capability_id: String,
    pub workflow_id: String,
    pub example_digest: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RagRecordQuarantined {
    pub capability_id: String,
    pub reason: Sensitive<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromotionRequested {
    pub task_class: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceRef {
    pub index: u64,
    /// Hex RFC 6962 leaf hash.
    pub leaf_hash: String,
}

impl EvidenceRef {
    /// The bytes of this reference as a leaf of an evidence tree
    /// ([`EvidenceTree`]): its canonical JSON, `{"index":N,"leaf_hash":"…"}`.
    pub fn tree_leaf(&self) -> Vec<u8> {
        let mut out = String::with_capacity(96);
        out.push_str("{\"index\":");
        out.push_str(&self.index.to_string());
        out.push_str(",\"leaf_hash\":");
        crate::canonical::write_str(&mut out, &self.leaf_hash);
        out.push('}');
        out.into_bytes()
    }
}

/// The most bootstrap resamples a recommendation may state
/// ([`ViewSettings`]): enough for any interval, and a bound on what a
/// replay of it costs.
pub const MAX_RESAMPLES: u64 = 100_000;

/// The settings a projection is computed with, as a recommendation states
/// them (the `settings` of a projection's view).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ViewSettings {
    /// The trailing window, in seconds (at least 1).
    pub window_seconds: i64,
    /// The confidence level of both intervals (strictly between 0 and 1).
    pub confidence: f64,
    /// Bootstrap resamples for the BCa interval (1 to [`MAX_RESAMPLES`]).
    pub resamples: u64,
}

impl ViewSettings {
    /// The first field out of its range, with the rule it breaks; `None`
    /// for settings a projection can be computed with.
    pub fn out_of_range(&self) -> Option<(&'static str, String)> {
        if self.window_seconds < 1 {
            return Some(("window_seconds", "must be at least 1".into()));
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Some(("confidence", "must be strictly between 0 and 1".into()));
        }
        if !(1..=MAX_RESAMPLES).contains(&self.resamples) {
            return Some(("resamples", format!("must be from 1 to {MAX_RESAMPLES}")));
        }
        None
    }
}

/// An optional field that is absent or a value, never `null`: one event,
/// one byte sequence.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// A recommendation's evidence cited by commitment rather than listed: the
/// number of evidence references and the RFC 6962 Merkle tree hash (hex)
/// over them, in the order the projection lists them, each leaf the
/// canonical JSON of one [`EvidenceRef`]. It binds exactly the list a
/// projection at the recommendation's checkpoint cites, at any length,
/// where a list in the entry would be bounded by the 65,535 bytes a logged
/// entry may take; one reference is proven in it by an RFC 6962 inclusion
/// proof.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceTree {
    pub count: u64,
    /// Hex RFC 6962 Merkle tree hash of the references.
    pub root: String,
}

impl EvidenceTree {
    /// The tree of `refs`, in their order.
    pub fn of(refs: &[EvidenceRef]) -> EvidenceTree {
        let mut f = ledger::merkle::Frontier::new();
        for r in refs {
            f.push(ledger::leaf_hash(&r.tree_leaf()));
        }
        EvidenceTree {
            count: refs.len() as u64,
            root: ledger::hash::to_hex(&f.root()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleOutcome {
    pub rule: String,
    pub holds: bool,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromotionRecommended {
    pub task_class: String,
    pub current_tier: Tier,
    pub recommended_tier: Tier,
    /// The evidence listed (empty when it is cited by `evidence_tree`).
    pub evidence: Vec<EvidenceRef>,
    /// The evidence cited by commitment: how the ledger cites it. A
    /// recommendation carries either this (with `evidence` empty) or the
    /// list; readers accept an entry that carries only the list.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    #[schemars(with = "EvidenceTree")]
    pub evidence_tree: Option<EvidenceTree>,
    /// The settings its projection was computed with: how the ledger
    /// states them. An entry without them was computed with settings it
    /// does not state.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    #[schemars(with = "ViewSettings")]
    pub settings: Option<ViewSettings>,
    pub rationale: Vec<RuleOutcome>,
    pub checkpoint: CheckpointRef,
    /// Always true: the ledger recommends, humans promote.
    pub requires_human_approval: bool,
    /// The envelope id of the promotion.requested event it answers.
    pub request_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TierApply {
    pub task_class: String,
    pub to: Tier,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromotionApplyBlocked {
    pub task_class: String,
    pub requested_tier: Tier,
    pub requested_by: String,
    pub request_id: String,
    pub code: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TierChanged {
    pub task_class: String,
    pub from: Tier,
    pub to: Tier,
    /// Index of the promotion.recommended entry this decision follows.
    pub recommendation_index: u64,
    pub decided_by: CoSignature,
    pub confirmed_by: CoSignature,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SigstoreRootTrusted {
    /// The log's origin (its checkpoints' first line): what every Sigstore
    /// statement of this log names, so a bundle signed for another log is
    /// refused here.
    pub origin: String,
    /// The Sigstore trusted root (`trusted_root.json`), verbatim: the one
    /// every Sigstore bundle appended after this entry is verified against,
    /// until the next such entry.
    pub trusted_root: String,
}

/// An anchor published (a file, a git repository, Rekor).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnchorPublished {
    pub checkpoint: CheckpointRef,
    pub location: String,
}

/// The redaction of one committed field of an earlier entry: its kept
/// disclosure is destroyed (docs/PRIVACY.md); the entry, its commitment and
/// every proof stay as they were.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldRedacted {
    /// The index of the entry whose field is redacted.
    pub entry: u64,
    /// That entry's RFC 6962 leaf hash (hex): what the maintainers saw.
    pub leaf_hash: String,
    /// The field's path in that entry's body (`title`, `provenance.source_ref`).
    pub field: String,
    /// Why, in words.
    pub reason: Sensitive<String>,
    pub requested_by: CoSignature,
    pub confirmed_by: CoSignature,
}

/// The ledger's commitment to its projection state (docs/COMPLETENESS.md):
/// the root of the state tree its fold of the log gives at `checkpoint`.
/// The checkpoint's size is this entry's own index, so the state is that of
/// every entry before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateCommitted {
    pub checkpoint: CheckpointRef,
    /// The RFC 6962 root (hex) of the state tree over the task class records.
    pub state_root: String,
    /// How many task classes the state tree holds.
    pub task_classes: u64,
}
