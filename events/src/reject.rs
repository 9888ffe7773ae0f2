//! Why an event was refused: a stable code, the field it concerns, and a
//! message. Codes never change meaning; new ones may be added.

macro_rules! codes {
    ($( $(#[doc = $doc:literal])* $variant:ident = $code:literal, )*) => {
        /// Stable rejection codes. `as_str` is the wire form (`code` in
        /// `application/problem+json`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum RejectCode {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl RejectCode {
            /// Every code, for documentation and API schemas.
            pub const ALL: &'static [RejectCode] = &[$(RejectCode::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self { $(RejectCode::$variant => $code,)* }
            }

            /// The doc line for `self`.
            pub fn description(self) -> &'static str {
                match self { $(RejectCode::$variant => concat!($($doc),*).trim_ascii(),)* }
            }
        }
    };
}

codes! {
    /// The envelope is not JSON, or not a DSSE envelope.
    MalformedEnvelope = "malformed_envelope",
    /// The envelope's payloadType is not the ledger's event type.
    UnsupportedPayloadType = "unsupported_payload_type",
    /// A base64 field does not decode.
    MalformedBase64 = "malformed_base64",
    /// The payload is not JSON.
    MalformedJson = "malformed_json",
    /// An object repeats a key.
    DuplicateKey = "duplicate_key",
    /// An integer is outside ±(2^53 − 1) and would lose precision.
    IntegerPrecision = "integer_precision",
    /// The payload bytes are not in canonical form (docs/FORMAT.md).
    NonCanonicalPayload = "non_canonical_payload",
    /// A field is not part of the event's schema.
    UnknownField = "unknown_field",
    /// A required field is absent.
    MissingField = "missing_field",
    /// A field has the wrong JSON type.
    InvalidType = "invalid_type",
    /// A field's value is not one of those allowed.
    InvalidValue = "invalid_value",
    /// The event kind is not in the catalogue.
    UnknownEventKind = "unknown_event_kind",
    /// The payload's schema version is not supported.
    UnsupportedSchema = "unsupported_schema",
    /// The log holds entries of a later schema, and from its first one on accepts only that schema or later (docs/PRIVACY.md).
    SchemaSuperseded = "schema_superseded",
    /// A schema-2 or schema-3 payload holds a sensitive field's value in clear instead of a commitment.
    SensitiveValueInClear = "sensitive_value_in_clear",
    /// A schema-1 payload holds a commitment, which only schema 2 and later may.
    CommitmentNotAllowed = "commitment_not_allowed",
    /// A disclosure is not the base64url of the canonical JSON array [salt, field, value] with a salt of 16 to 64 bytes.
    DisclosureMalformed = "disclosure_malformed",
    /// A committed field has no disclosure whose digest it holds.
    DisclosureMissing = "disclosure_missing",
    /// A disclosure matches no commitment in the event.
    DisclosureUnused = "disclosure_unused",
    /// A disclosure names another field than the one whose commitment it opens.
    DisclosureFieldMismatch = "disclosure_field_mismatch",
    /// A schema-3 handle (case id, identity, workflow id) is neither the digest of the commitment beside it nor a handle the log already holds for its class (given by an earlier event, or a value in clear before the switch; docs/PRIVACY.md, "Handles").
    HandleNotDerived = "handle_not_derived",
    /// A schema-3 event names an earlier handle for another value than the one that handle was given for, or for a value the ledger can no longer read.
    HandleValueMismatch = "handle_value_mismatch",
    /// A schema-3 event gives a new handle to a value that already has one: name that handle instead.
    HandleValueBound = "handle_value_bound",
    /// A redaction names an entry the log does not hold, or gives another leaf hash than the entry's.
    RedactionTargetMismatch = "redaction_target_mismatch",
    /// A redaction names a field the entry does not hold as a commitment.
    RedactionFieldNotCommitted = "redaction_field_not_committed",
    /// That field of that entry is already redacted.
    AlreadyRedacted = "already_redacted",
    /// An identifier is empty, too long, or has characters outside [A-Za-z0-9._:/@+-].
    InvalidIdentifier = "invalid_identifier",
    /// A text field is empty, too long, or holds control characters.
    InvalidText = "invalid_text",
    /// A digest is not `blake3:` or `sha256:` followed by 64 lower-case hex digits.
    InvalidDigest = "invalid_digest",
    /// A timestamp is not RFC 3339 in UTC.
    InvalidTimestamp = "invalid_timestamp",
    /// The envelope must carry exactly one signature.
    SignatureCount = "signature_count",
    /// The envelope's keyid differs from the payload's signer.
    SignerMismatch = "signer_mismatch",
    /// The leaf record (the envelope as logged) would exceed 65,535 bytes, the most a C2SP tlog-tiles entry bundle can hold.
    EntryTooLarge = "entry_too_large",
    /// The signer's key is not enrolled.
    UnknownSigner = "unknown_signer",
    /// The envelope signature does not verify (strict Ed25519).
    SignatureInvalid = "signature_invalid",
    /// The signer's key has been revoked.
    SignerRevoked = "signer_revoked",
    /// The signer's roles do not allow this event kind.
    RoleNotPermitted = "role_not_permitted",
    /// The log is empty: its first event must be the operator enrolling its own key.
    GenesisRequired = "genesis_required",
    /// Another envelope with this id, but different content, is already in the log.
    EnvelopeIdReused = "envelope_id_reused",
    /// A logged entry's sequencing time is earlier than the entry before it (a replay's refusal: the ledger never sequences one so).
    SequencedAtDecreased = "sequenced_at_decreased",
    /// The key is already enrolled.
    PrincipalExists = "principal_exists",
    /// No principal has this key id.
    PrincipalUnknown = "principal_unknown",
    /// The task class is already registered.
    TaskClassExists = "task_class_exists",
    /// The task class is not registered.
    TaskClassUnknown = "task_class_unknown",
    /// A tier rule is missing or out of order.
    TierRulesInvalid = "tier_rules_invalid",
    /// The case id is already used.
    CaseExists = "case_exists",
    /// No case has this id.
    CaseUnknown = "case_unknown",
    /// The case is retired.
    CaseNotActive = "case_not_active",
    /// The case is a pending proposal and cannot be scored.
    CasePending = "case_pending",
    /// The case belongs to another task class.
    CaseTaskClassMismatch = "case_task_class_mismatch",
    /// The score's case digest differs from the active case's (a poisoned or stale case).
    CaseDigestMismatch = "case_digest_mismatch",
    /// The rubric digest differs from the task class's current rubric.
    RubricDigestMismatch = "rubric_digest_mismatch",
    /// The score's cassette digest differs from its case's (a swapped cassette).
    CassetteDigestMismatch = "cassette_digest_mismatch",
    /// score must be finite and within [0, 1].
    ScoreOutOfRange = "score_out_of_range",
    /// cost_usd must be finite and at least 0.
    CostOutOfRange = "cost_out_of_range",
    /// duration_seconds must be finite and at least 0.
    DurationOutOfRange = "duration_out_of_range",
    /// A breakdown value must be finite.
    BreakdownValueOutOfRange = "breakdown_value_out_of_range",
    /// A breakdown key contains confidence, llm, self_reported or model_says.
    BreakdownKeyBanned = "breakdown_key_banned",
    /// A breakdown key is not declared by the task class.
    BreakdownKeyUndeclared = "breakdown_key_undeclared",
    /// A failure mode is not in the task class's taxonomy.
    FailureModeUnknown = "failure_mode_unknown",
    /// A severity is not one of block, warn, info.
    SeverityInvalid = "severity_invalid",
    /// A failure mode's severity differs from the taxonomy's.
    SeverityMismatch = "severity_mismatch",
    /// A co-signer's key is not enrolled.
    CosignerUnknown = "cosigner_unknown",
    /// A co-signer's key has been revoked.
    CosignerRevoked = "cosigner_revoked",
    /// A co-signer lacks the role the event needs (curator or maintainer).
    CosignerNotPermitted = "cosigner_not_permitted",
    /// The two co-signers must be different principals with different identities.
    CosignersNotDistinct = "cosigners_not_distinct",
    /// A co-signature does not verify.
    CosignatureInvalid = "cosignature_invalid",
    /// No Sigstore trusted root is recorded in this log yet (`sigstore.root_trusted`), so no Sigstore bundle can be verified.
    SigstoreRootMissing = "sigstore_root_missing",
    /// A `sigstore.root_trusted` event names another origin than this log's.
    SigstoreOriginMismatch = "sigstore_origin_mismatch",
    /// A Sigstore bundle is not JSON of a Sigstore bundle, or is inconsistent.
    SigstoreBundleMalformed = "sigstore_bundle_malformed",
    /// A Sigstore bundle of a version, content or key type not supported (a DSSE envelope where a message signature is needed, say).
    SigstoreBundleUnsupported = "sigstore_bundle_unsupported",
    /// The Sigstore trusted root is malformed or unusable.
    SigstoreTrustRootInvalid = "sigstore_trust_root_invalid",
    /// The bundle's certificate does not chain to a trusted Fulcio authority with code-signing usage.
    SigstoreCertificateInvalid = "sigstore_certificate_invalid",
    /// The bundle's certificate was expired, or not yet valid, at the verified signing time.
    SigstoreCertificateNotValidAtTime = "sigstore_certificate_not_valid_at_time",
    /// The certificate's SCT is missing or not signed by a trusted CT log.
    SigstoreSctInvalid = "sigstore_sct_invalid",
    /// An RFC 3161 timestamp did not verify, or the bundle has no verified time.
    SigstoreTimestampInvalid = "sigstore_timestamp_invalid",
    /// The bundle's log entry names a transparency log the trusted root lacks.
    SigstoreTlogUnknown = "sigstore_tlog_unknown",
    /// The inclusion proof is missing or does not prove the entry into the log.
    SigstoreTlogInclusionInvalid = "sigstore_tlog_inclusion_invalid",
    /// The log's checkpoint is missing, malformed, or not signed by the log.
    SigstoreTlogCheckpointInvalid = "sigstore_tlog_checkpoint_invalid",
    /// The SET is missing or does not verify.
    SigstoreTlogPromiseInvalid = "sigstore_tlog_promise_invalid",
    /// The log entry describes another signature, key or artifact.
    SigstoreTlogEntryMismatch = "sigstore_tlog_entry_mismatch",
    /// The integrated time is in the future or outside the certificate's validity.
    SigstoreTlogTimeInvalid = "sigstore_tlog_time_invalid",
    /// The bundle's signature does not verify.
    SigstoreSignatureInvalid = "sigstore_signature_invalid",
    /// The bundle signs another statement (one for another event, role or log: a replay).
    SigstoreMessageMismatch = "sigstore_message_mismatch",
    /// The bundle's certificate names another identity than the co-signer's enrolled one.
    SigstoreIdentityMismatch = "sigstore_identity_mismatch",
    /// The bundle's certificate names another OIDC issuer than the co-signer's enrolled one.
    SigstoreIssuerMismatch = "sigstore_issuer_mismatch",
    /// The verification reported a required check as not done.
    SigstoreChecksIncomplete = "sigstore_checks_incomplete",
    /// A Sigstore bundle refused for a reason this build does not classify.
    SigstoreRefused = "sigstore_refused",
    /// The proposal id is already used.
    ProposalExists = "proposal_exists",
    /// No proposal has this id.
    ProposalUnknown = "proposal_unknown",
    /// The proposal was already approved or rejected.
    ProposalNotPending = "proposal_not_pending",
    /// The run id is already used.
    RunExists = "run_exists",
    /// No run has this id.
    RunUnknown = "run_unknown",
    /// The run has finished.
    RunFinished = "run_finished",
    /// The run is for another task class.
    RunTaskClassMismatch = "run_task_class_mismatch",
    /// The invocation id is already used.
    InvocationExists = "invocation_exists",
    /// No open invocation has this id.
    InvocationUnknown = "invocation_unknown",
    /// A rubric failure code is not one of the known rubric.* codes.
    RubricFailureCodeUnknown = "rubric_failure_code_unknown",
    /// The capability id is already used.
    CapabilityExists = "capability_exists",
    /// No capability has this id.
    CapabilityUnknown = "capability_unknown",
    /// The capability was already spent.
    CapabilitySpent = "capability_spent",
    /// The capability expired before this write was sequenced.
    CapabilityExpired = "capability_expired",
    /// The capability belongs to another workflow.
    CapabilityWorkflowMismatch = "capability_workflow_mismatch",
    /// The capability was quarantined.
    CapabilityQuarantined = "capability_quarantined",
    /// The named checkpoint (size, root) is not a checkpoint of this log.
    CheckpointUnknown = "checkpoint_unknown",
    /// A state commitment must name the log's size just before it (its own index).
    StateNotAtHead = "state_not_at_head",
    /// Tier changes are applied only by a tier.changed event signed by two maintainers.
    PromotionMustBeHumanAuthorized = "promotion_must_be_human_authorized",
    /// The cited recommendation does not exist or does not match.
    RecommendationUnknown = "recommendation_unknown",
    /// The tier change does not start from the task class's current tier, or goes nowhere.
    TierMismatch = "tier_mismatch",
    /// requires_human_approval must be true.
    RequiresHumanApproval = "requires_human_approval",
    /// The ledger cannot validate writes right now (its state could not be rebuilt); retry later.
    LedgerUnavailable = "ledger_unavailable",
}

/// A refused event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {field}: {message}", code = .code.as_str())]
pub struct Rejection {
    pub code: RejectCode,
    /// The JSON path of the field concerned, e.g. `event.body.score.breakdown`.
    pub field: String,
    pub message: String,
}

impl Rejection {
    pub fn new(code: RejectCode, field: impl Into<String>, message: impl Into<String>) -> Self {
        Rejection {
            code,
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Shorthand for a rejection result.
pub(crate) fn reject<T>(
    code: RejectCode,
    field: impl Into<String>,
    message: impl Into<String>,
) -> Result<T, Rejection> {
    Err(Rejection::new(code, field, message))
}

impl RejectCode {
    /// The code for a Sigstore check that failed ([`sigstore_check::Code`]).
    pub fn sigstore(code: sigstore_check::Code) -> RejectCode {
        use sigstore_check::Code as S;
        match code {
            S::BundleMalformed => RejectCode::SigstoreBundleMalformed,
            S::BundleUnsupported => RejectCode::SigstoreBundleUnsupported,
            S::TrustRootInvalid => RejectCode::SigstoreTrustRootInvalid,
            S::CertificateInvalid => RejectCode::SigstoreCertificateInvalid,
            S::CertificateNotValidAtTime => RejectCode::SigstoreCertificateNotValidAtTime,
            S::SctInvalid => RejectCode::SigstoreSctInvalid,
            S::TimestampInvalid => RejectCode::SigstoreTimestampInvalid,
            S::TlogUnknown => RejectCode::SigstoreTlogUnknown,
            S::TlogInclusionInvalid => RejectCode::SigstoreTlogInclusionInvalid,
            S::TlogCheckpointInvalid => RejectCode::SigstoreTlogCheckpointInvalid,
            S::TlogPromiseInvalid => RejectCode::SigstoreTlogPromiseInvalid,
            S::TlogEntryMismatch => RejectCode::SigstoreTlogEntryMismatch,
            S::TlogTimeInvalid => RejectCode::SigstoreTlogTimeInvalid,
            S::SignatureInvalid => RejectCode::SigstoreSignatureInvalid,
            S::MessageMismatch => RejectCode::SigstoreMessageMismatch,
            S::IdentityMismatch => RejectCode::SigstoreIdentityMismatch,
            S::IssuerMismatch => RejectCode::SigstoreIssuerMismatch,
            // The expected key is the enrolled identity, never a PEM key,
            // in a co-signature: unreachable here, and still typed.
            S::KeyInvalid | S::Refused => RejectCode::SigstoreRefused,
            S::ChecksIncomplete => RejectCode::SigstoreChecksIncomplete,
        }
    }
}

#[cfg(test)]
mod sigstore_codes {
    /// Every Sigstore refusal keeps its wire code as a rejection.
    #[test]
    fn each_sigstore_code_keeps_its_name() {
        for c in sigstore_check::Code::ALL {
            let r = super::RejectCode::sigstore(c);
            if !matches!(c, sigstore_check::Code::KeyInvalid) {
                assert_eq!(r.as_str(), c.as_str());
            }
        }
    }
}
