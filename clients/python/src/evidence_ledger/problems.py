"""One exception class per problem code the server answers with.

Written from docs/reject_codes.md and the API codes of docs/API.md;
`tests/test_problems.py` checks that every documented code has its class
here, so the two cannot drift apart. The classes group by what the caller
must do (see `errors.py`).
"""
from __future__ import annotations

from .errors import (
    Conflict,
    Forbidden,
    MalformedRequest,
    NotFoundError,
    ProblemError,
    RuleViolation,
    ServerFault,
    ServiceUnavailable,
    Unauthenticated,
)


class MalformedEnvelope(MalformedRequest):
    """`malformed_envelope`: The envelope is not JSON, or not a DSSE envelope."""

    code = "malformed_envelope"


class UnsupportedPayloadType(MalformedRequest):
    """`unsupported_payload_type`: The envelope's payloadType is not the ledger's event type."""

    code = "unsupported_payload_type"


class MalformedJson(MalformedRequest):
    """`malformed_json`: The payload is not JSON."""

    code = "malformed_json"


class DuplicateKey(MalformedRequest):
    """`duplicate_key`: An object repeats a key."""

    code = "duplicate_key"


class IntegerPrecision(MalformedRequest):
    """`integer_precision`: An integer is outside ±(2^53 − 1) and would lose precision."""

    code = "integer_precision"


class NonCanonicalPayload(MalformedRequest):
    """`non_canonical_payload`: The payload bytes are not in canonical form (docs/FORMAT.md)."""

    code = "non_canonical_payload"


class UnknownField(MalformedRequest):
    """`unknown_field`: A field is not part of the event's schema."""

    code = "unknown_field"


class MissingField(MalformedRequest):
    """`missing_field`: A required field is absent."""

    code = "missing_field"


class InvalidType(MalformedRequest):
    """`invalid_type`: A field has the wrong JSON type."""

    code = "invalid_type"


class InvalidValue(MalformedRequest):
    """`invalid_value`: A field's value is not one of those allowed."""

    code = "invalid_value"


class UnknownEventKind(MalformedRequest):
    """`unknown_event_kind`: The event kind is not in the catalogue."""

    code = "unknown_event_kind"


class UnsupportedSchema(MalformedRequest):
    """`unsupported_schema`: The payload's schema version is not supported."""

    code = "unsupported_schema"


class SchemaSuperseded(RuleViolation):
    """`schema_superseded`: The log holds entries of a later schema, and from its first one on accepts only that schema or later (docs/PRIVACY.md)."""

    code = "schema_superseded"


class SensitiveValueInClear(RuleViolation):
    """`sensitive_value_in_clear`: A schema-2 payload holds a sensitive field's value in clear instead of a commitment."""

    code = "sensitive_value_in_clear"


class CommitmentNotAllowed(RuleViolation):
    """`commitment_not_allowed`: A schema-1 payload holds a commitment, which only schema 2 may."""

    code = "commitment_not_allowed"


class DisclosureMalformed(RuleViolation):
    """`disclosure_malformed`: A disclosure is not the base64url of the canonical JSON array [salt, field, value] with a salt of 16 to 64 bytes."""

    code = "disclosure_malformed"


class DisclosureMissing(RuleViolation):
    """`disclosure_missing`: A committed field has no disclosure whose digest it holds."""

    code = "disclosure_missing"


class DisclosureUnused(RuleViolation):
    """`disclosure_unused`: A disclosure matches no commitment in the event."""

    code = "disclosure_unused"


class DisclosureFieldMismatch(RuleViolation):
    """`disclosure_field_mismatch`: A disclosure names another field than the one whose commitment it opens."""

    code = "disclosure_field_mismatch"


class HandleNotDerived(RuleViolation):
    """`handle_not_derived`: A schema-3 handle (case id, identity, workflow id) is neither the digest of the commitment beside it nor a handle an earlier event gave (docs/PRIVACY.md, "Handles")."""

    code = "handle_not_derived"


class HandleValueMismatch(RuleViolation):
    """`handle_value_mismatch`: A schema-3 event names an earlier handle for another value than the one that handle was given for, or for a value the ledger can no longer read."""

    code = "handle_value_mismatch"


class HandleValueBound(RuleViolation):
    """`handle_value_bound`: A schema-3 event gives a new handle to a value that already has one: name that handle instead."""

    code = "handle_value_bound"


class RedactionTargetMismatch(RuleViolation):
    """`redaction_target_mismatch`: A redaction names an entry the log does not hold, or gives another leaf hash than the entry's."""

    code = "redaction_target_mismatch"


class RedactionFieldNotCommitted(RuleViolation):
    """`redaction_field_not_committed`: A redaction names a field the entry does not hold as a commitment."""

    code = "redaction_field_not_committed"


class AlreadyRedacted(RuleViolation):
    """`already_redacted`: That field of that entry is already redacted."""

    code = "already_redacted"


class InvalidIdentifier(MalformedRequest):
    """`invalid_identifier`: An identifier is empty, too long, or has characters outside [A-Za-z0-9._:/@+-]."""

    code = "invalid_identifier"


class InvalidText(MalformedRequest):
    """`invalid_text`: A text field is empty, too long, or holds control characters."""

    code = "invalid_text"


class InvalidDigest(MalformedRequest):
    """`invalid_digest`: A digest is not blake3: or sha256: followed by 64 lower-case hex digits."""

    code = "invalid_digest"


class InvalidTimestamp(MalformedRequest):
    """`invalid_timestamp`: A timestamp is not RFC 3339 in UTC."""

    code = "invalid_timestamp"


class SignatureCount(MalformedRequest):
    """`signature_count`: The envelope must carry exactly one signature."""

    code = "signature_count"


class SignerMismatch(MalformedRequest):
    """`signer_mismatch`: The envelope's keyid differs from the payload's signer."""

    code = "signer_mismatch"


class EntryTooLarge(MalformedRequest):
    """`entry_too_large`: The leaf record (the envelope as logged) would exceed 65,535 bytes, the most a C2SP tlog-tiles entry bundle can hold."""

    code = "entry_too_large"


class UnknownSigner(Unauthenticated):
    """`unknown_signer`: The signer's key is not enrolled."""

    code = "unknown_signer"


class SignatureInvalid(Unauthenticated):
    """`signature_invalid`: The envelope signature does not verify (strict Ed25519)."""

    code = "signature_invalid"


class SignerRevoked(Forbidden):
    """`signer_revoked`: The signer's key has been revoked."""

    code = "signer_revoked"


class RoleNotPermitted(Forbidden):
    """`role_not_permitted`: The signer's roles do not allow this event kind."""

    code = "role_not_permitted"


class GenesisRequired(Forbidden):
    """`genesis_required`: The log is empty: its first event must be the operator enrolling its own key."""

    code = "genesis_required"


class EnvelopeIdReused(Conflict):
    """`envelope_id_reused`: Another envelope with this id, but different content, is already in the log."""

    code = "envelope_id_reused"


class SequencedAtDecreased(RuleViolation):
    """`sequenced_at_decreased`: A logged entry's sequencing time is earlier than the entry before it (a replay's refusal: the ledger never sequences one so)."""

    code = "sequenced_at_decreased"


class PrincipalExists(Conflict):
    """`principal_exists`: The key is already enrolled."""

    code = "principal_exists"


class PrincipalUnknown(RuleViolation):
    """`principal_unknown`: No principal has this key id."""

    code = "principal_unknown"


class TaskClassExists(Conflict):
    """`task_class_exists`: The task class is already registered."""

    code = "task_class_exists"


class TaskClassUnknown(RuleViolation):
    """`task_class_unknown`: The task class is not registered."""

    code = "task_class_unknown"


class TierRulesInvalid(RuleViolation):
    """`tier_rules_invalid`: A tier rule is missing or out of order."""

    code = "tier_rules_invalid"


class CaseExists(Conflict):
    """`case_exists`: The case id is already used."""

    code = "case_exists"


class CaseUnknown(RuleViolation):
    """`case_unknown`: No case has this id."""

    code = "case_unknown"


class CaseNotActive(RuleViolation):
    """`case_not_active`: The case is retired."""

    code = "case_not_active"


class CasePending(RuleViolation):
    """`case_pending`: The case is a pending proposal and cannot be scored."""

    code = "case_pending"


class CaseTaskClassMismatch(RuleViolation):
    """`case_task_class_mismatch`: The case belongs to another task class."""

    code = "case_task_class_mismatch"


class CaseDigestMismatch(RuleViolation):
    """`case_digest_mismatch`: The score's case digest differs from the active case's (a poisoned or stale case)."""

    code = "case_digest_mismatch"


class RubricDigestMismatch(RuleViolation):
    """`rubric_digest_mismatch`: The rubric digest differs from the task class's current rubric."""

    code = "rubric_digest_mismatch"


class CassetteDigestMismatch(RuleViolation):
    """`cassette_digest_mismatch`: The score's cassette digest differs from its case's (a swapped cassette)."""

    code = "cassette_digest_mismatch"


class ScoreOutOfRange(RuleViolation):
    """`score_out_of_range`: score must be finite and within [0, 1]."""

    code = "score_out_of_range"


class CostOutOfRange(RuleViolation):
    """`cost_out_of_range`: cost_usd must be finite and at least 0."""

    code = "cost_out_of_range"


class DurationOutOfRange(RuleViolation):
    """`duration_out_of_range`: duration_seconds must be finite and at least 0."""

    code = "duration_out_of_range"


class BreakdownValueOutOfRange(RuleViolation):
    """`breakdown_value_out_of_range`: A breakdown value must be finite."""

    code = "breakdown_value_out_of_range"


class BreakdownKeyBanned(RuleViolation):
    """`breakdown_key_banned`: A breakdown key contains confidence, llm, self_reported or model_says."""

    code = "breakdown_key_banned"


class BreakdownKeyUndeclared(RuleViolation):
    """`breakdown_key_undeclared`: A breakdown key is not declared by the task class."""

    code = "breakdown_key_undeclared"


class FailureModeUnknown(RuleViolation):
    """`failure_mode_unknown`: A failure mode is not in the task class's taxonomy."""

    code = "failure_mode_unknown"


class SeverityInvalid(RuleViolation):
    """`severity_invalid`: A severity is not one of block, warn, info."""

    code = "severity_invalid"


class SeverityMismatch(RuleViolation):
    """`severity_mismatch`: A failure mode's severity differs from the taxonomy's."""

    code = "severity_mismatch"


class CosignerUnknown(RuleViolation):
    """`cosigner_unknown`: A co-signer's key is not enrolled."""

    code = "cosigner_unknown"


class CosignerRevoked(RuleViolation):
    """`cosigner_revoked`: A co-signer's key has been revoked."""

    code = "cosigner_revoked"


class CosignerNotPermitted(RuleViolation):
    """`cosigner_not_permitted`: A co-signer lacks the role the event needs (curator or maintainer)."""

    code = "cosigner_not_permitted"


class CosignersNotDistinct(RuleViolation):
    """`cosigners_not_distinct`: The two co-signers must be different principals with different identities."""

    code = "cosigners_not_distinct"


class CosignatureInvalid(RuleViolation):
    """`cosignature_invalid`: A co-signature does not verify."""

    code = "cosignature_invalid"


class SigstoreRootMissing(RuleViolation):
    """`sigstore_root_missing`: No Sigstore trusted root is recorded in this log yet (`sigstore.root_trusted`), so no Sigstore bundle can be verified."""

    code = "sigstore_root_missing"


class SigstoreOriginMismatch(RuleViolation):
    """`sigstore_origin_mismatch`: A `sigstore.root_trusted` event names another origin than this log's."""

    code = "sigstore_origin_mismatch"


class SigstoreBundleMalformed(RuleViolation):
    """`sigstore_bundle_malformed`: A Sigstore bundle is not JSON of a Sigstore bundle, or is inconsistent."""

    code = "sigstore_bundle_malformed"


class SigstoreBundleUnsupported(RuleViolation):
    """`sigstore_bundle_unsupported`: A Sigstore bundle of a version, content or key type not supported (a DSSE envelope where a message signature is needed, say)."""

    code = "sigstore_bundle_unsupported"


class SigstoreTrustRootInvalid(RuleViolation):
    """`sigstore_trust_root_invalid`: The Sigstore trusted root is malformed or unusable."""

    code = "sigstore_trust_root_invalid"


class SigstoreCertificateInvalid(RuleViolation):
    """`sigstore_certificate_invalid`: The bundle's certificate does not chain to a trusted Fulcio authority with code-signing usage."""

    code = "sigstore_certificate_invalid"


class SigstoreCertificateNotValidAtTime(RuleViolation):
    """`sigstore_certificate_not_valid_at_time`: The bundle's certificate was expired, or not yet valid, at the verified signing time."""

    code = "sigstore_certificate_not_valid_at_time"


class SigstoreSctInvalid(RuleViolation):
    """`sigstore_sct_invalid`: The certificate's SCT is missing or not signed by a trusted CT log."""

    code = "sigstore_sct_invalid"


class SigstoreTimestampInvalid(RuleViolation):
    """`sigstore_timestamp_invalid`: An RFC 3161 timestamp did not verify, or the bundle has no verified time."""

    code = "sigstore_timestamp_invalid"


class SigstoreTlogUnknown(RuleViolation):
    """`sigstore_tlog_unknown`: The bundle's log entry names a transparency log the trusted root lacks."""

    code = "sigstore_tlog_unknown"


class SigstoreTlogInclusionInvalid(RuleViolation):
    """`sigstore_tlog_inclusion_invalid`: The inclusion proof is missing or does not prove the entry into the log."""

    code = "sigstore_tlog_inclusion_invalid"


class SigstoreTlogCheckpointInvalid(RuleViolation):
    """`sigstore_tlog_checkpoint_invalid`: The log's checkpoint is missing, malformed, or not signed by the log."""

    code = "sigstore_tlog_checkpoint_invalid"


class SigstoreTlogPromiseInvalid(RuleViolation):
    """`sigstore_tlog_promise_invalid`: The SET is missing or does not verify."""

    code = "sigstore_tlog_promise_invalid"


class SigstoreTlogEntryMismatch(RuleViolation):
    """`sigstore_tlog_entry_mismatch`: The log entry describes another signature, key or artifact."""

    code = "sigstore_tlog_entry_mismatch"


class SigstoreTlogTimeInvalid(RuleViolation):
    """`sigstore_tlog_time_invalid`: The integrated time is in the future or outside the certificate's validity."""

    code = "sigstore_tlog_time_invalid"


class SigstoreSignatureInvalid(RuleViolation):
    """`sigstore_signature_invalid`: The bundle's signature does not verify."""

    code = "sigstore_signature_invalid"


class SigstoreMessageMismatch(RuleViolation):
    """`sigstore_message_mismatch`: The bundle signs another statement (one for another event, role or log: a replay)."""

    code = "sigstore_message_mismatch"


class SigstoreIdentityMismatch(RuleViolation):
    """`sigstore_identity_mismatch`: The bundle's certificate names another identity than the co-signer's enrolled one."""

    code = "sigstore_identity_mismatch"


class SigstoreIssuerMismatch(RuleViolation):
    """`sigstore_issuer_mismatch`: The bundle's certificate names another OIDC issuer than the co-signer's enrolled one."""

    code = "sigstore_issuer_mismatch"


class SigstoreChecksIncomplete(RuleViolation):
    """`sigstore_checks_incomplete`: The verification reported a required check as not done."""

    code = "sigstore_checks_incomplete"


class SigstoreRefused(RuleViolation):
    """`sigstore_refused`: A Sigstore bundle refused for a reason this build does not classify."""

    code = "sigstore_refused"


class ProposalExists(Conflict):
    """`proposal_exists`: The proposal id is already used."""

    code = "proposal_exists"


class ProposalUnknown(RuleViolation):
    """`proposal_unknown`: No proposal has this id."""

    code = "proposal_unknown"


class ProposalNotPending(RuleViolation):
    """`proposal_not_pending`: The proposal was already approved or rejected."""

    code = "proposal_not_pending"


class RunExists(Conflict):
    """`run_exists`: The run id is already used."""

    code = "run_exists"


class RunUnknown(RuleViolation):
    """`run_unknown`: No run has this id."""

    code = "run_unknown"


class RunFinished(RuleViolation):
    """`run_finished`: The run has finished."""

    code = "run_finished"


class RunTaskClassMismatch(RuleViolation):
    """`run_task_class_mismatch`: The run is for another task class."""

    code = "run_task_class_mismatch"


class InvocationExists(Conflict):
    """`invocation_exists`: The invocation id is already used."""

    code = "invocation_exists"


class InvocationUnknown(RuleViolation):
    """`invocation_unknown`: No open invocation has this id."""

    code = "invocation_unknown"


class RubricFailureCodeUnknown(RuleViolation):
    """`rubric_failure_code_unknown`: A rubric failure code is not one of the known rubric.* codes."""

    code = "rubric_failure_code_unknown"


class CapabilityExists(Conflict):
    """`capability_exists`: The capability id is already used."""

    code = "capability_exists"


class CapabilityUnknown(RuleViolation):
    """`capability_unknown`: No capability has this id."""

    code = "capability_unknown"


class CapabilitySpent(Conflict):
    """`capability_spent`: The capability was already spent."""

    code = "capability_spent"


class CapabilityExpired(RuleViolation):
    """`capability_expired`: The capability expired before this write was sequenced."""

    code = "capability_expired"


class CapabilityWorkflowMismatch(RuleViolation):
    """`capability_workflow_mismatch`: The capability belongs to another workflow."""

    code = "capability_workflow_mismatch"


class CapabilityQuarantined(RuleViolation):
    """`capability_quarantined`: The capability was quarantined."""

    code = "capability_quarantined"


class CheckpointUnknown(RuleViolation):
    """`checkpoint_unknown`: The named checkpoint (size, root) is not a checkpoint of this log."""

    code = "checkpoint_unknown"


class StateNotAtHead(RuleViolation):
    """`state_not_at_head`: A state commitment must name the log's size just before it (its own index)."""

    code = "state_not_at_head"


class PromotionMustBeHumanAuthorized(Forbidden):
    """`promotion_must_be_human_authorized`: Tier changes are applied only by a tier.changed event signed by two maintainers."""

    code = "promotion_must_be_human_authorized"


class RecommendationUnknown(RuleViolation):
    """`recommendation_unknown`: The cited recommendation does not exist or does not match."""

    code = "recommendation_unknown"


class TierMismatch(RuleViolation):
    """`tier_mismatch`: The tier change does not start from the task class's current tier, or goes nowhere."""

    code = "tier_mismatch"


class RequiresHumanApproval(RuleViolation):
    """`requires_human_approval`: requires_human_approval must be true."""

    code = "requires_human_approval"


class LedgerUnavailable(ServiceUnavailable):
    """`ledger_unavailable`: The ledger cannot validate writes right now (its state could not be rebuilt); retry later."""

    code = "ledger_unavailable"


class NotFound(NotFoundError):
    """`not_found` (HTTP 404): The route or the thing asked for does not exist."""

    code = "not_found"


class MethodNotAllowed(MalformedRequest):
    """`method_not_allowed` (HTTP 405): The route does not take this method."""

    code = "method_not_allowed"


class InvalidParameter(MalformedRequest):
    """`invalid_parameter` (HTTP 400): A path, query or body parameter is not valid."""

    code = "invalid_parameter"


class UnsupportedMediaType(MalformedRequest):
    """`unsupported_media_type` (HTTP 415): The body is not application/json."""

    code = "unsupported_media_type"


class PayloadTooLarge(MalformedRequest):
    """`payload_too_large` (HTTP 413): The body is over the server's limit."""

    code = "payload_too_large"


class ReadTokenRequired(Unauthenticated):
    """`read_token_required` (HTTP 401): Reads need the server's read token."""

    code = "read_token_required"


class Overloaded(ServiceUnavailable):
    """`overloaded` (HTTP 503): Too many requests at once; retry after Retry-After."""

    code = "overloaded"


class Timeout(ServiceUnavailable):
    """`timeout` (HTTP 503): The request took longer than the server allows."""

    code = "timeout"


class CheckpointNotWitnessed(ServiceUnavailable):
    """`checkpoint_not_witnessed` (HTTP 503): The server's checkpoints are witnessed and none has a quorum of cosignatures yet."""

    code = "checkpoint_not_witnessed"


class LogVerifying(ServiceUnavailable):
    """`log_verifying` (HTTP 503): The server is still checking its log; no numbers yet."""

    code = "log_verifying"


class LogUnverified(ServiceUnavailable):
    """`log_unverified` (HTTP 503): The server's log failed its check; it serves no numbers, proofs or writes."""

    code = "log_unverified"


class LogCorrupt(ServiceUnavailable):
    """`log_corrupt` (HTTP 503): The server found its storage disagreeing with itself."""

    code = "log_corrupt"


class DerivedStateMismatch(ServiceUnavailable):
    """`derived_state_mismatch` (HTTP 503): Derived state did not match the log; nothing was signed."""

    code = "derived_state_mismatch"


class WritesHalted(ServiceUnavailable):
    """`writes_halted` (HTTP 503): The server's committer has stopped; writes are refused."""

    code = "writes_halted"


class StorageUnavailable(ServiceUnavailable):
    """`storage_unavailable` (HTTP 503): Storage refused a commit (a full disk, a failed fsync); reads go on."""

    code = "storage_unavailable"


class Internal(ServerFault):
    """`internal` (HTTP 500): An internal error on the server."""

    code = "internal"


#: Every problem code the server documents, and its exception class.
BY_CODE: dict[str, type[ProblemError]] = {
    "malformed_envelope": MalformedEnvelope,
    "unsupported_payload_type": UnsupportedPayloadType,
    "malformed_json": MalformedJson,
    "duplicate_key": DuplicateKey,
    "integer_precision": IntegerPrecision,
    "non_canonical_payload": NonCanonicalPayload,
    "unknown_field": UnknownField,
    "missing_field": MissingField,
    "invalid_type": InvalidType,
    "invalid_value": InvalidValue,
    "unknown_event_kind": UnknownEventKind,
    "unsupported_schema": UnsupportedSchema,
    "schema_superseded": SchemaSuperseded,
    "sensitive_value_in_clear": SensitiveValueInClear,
    "commitment_not_allowed": CommitmentNotAllowed,
    "disclosure_malformed": DisclosureMalformed,
    "disclosure_missing": DisclosureMissing,
    "disclosure_unused": DisclosureUnused,
    "disclosure_field_mismatch": DisclosureFieldMismatch,
    "handle_not_derived": HandleNotDerived,
    "handle_value_mismatch": HandleValueMismatch,
    "handle_value_bound": HandleValueBound,
    "redaction_target_mismatch": RedactionTargetMismatch,
    "redaction_field_not_committed": RedactionFieldNotCommitted,
    "already_redacted": AlreadyRedacted,
    "invalid_identifier": InvalidIdentifier,
    "invalid_text": InvalidText,
    "invalid_digest": InvalidDigest,
    "invalid_timestamp": InvalidTimestamp,
    "signature_count": SignatureCount,
    "signer_mismatch": SignerMismatch,
    "entry_too_large": EntryTooLarge,
    "unknown_signer": UnknownSigner,
    "signature_invalid": SignatureInvalid,
    "signer_revoked": SignerRevoked,
    "role_not_permitted": RoleNotPermitted,
    "genesis_required": GenesisRequired,
    "envelope_id_reused": EnvelopeIdReused,
    "sequenced_at_decreased": SequencedAtDecreased,
    "principal_exists": PrincipalExists,
    "principal_unknown": PrincipalUnknown,
    "task_class_exists": TaskClassExists,
    "task_class_unknown": TaskClassUnknown,
    "tier_rules_invalid": TierRulesInvalid,
    "case_exists": CaseExists,
    "case_unknown": CaseUnknown,
    "case_not_active": CaseNotActive,
    "case_pending": CasePending,
    "case_task_class_mismatch": CaseTaskClassMismatch,
    "case_digest_mismatch": CaseDigestMismatch,
    "rubric_digest_mismatch": RubricDigestMismatch,
    "cassette_digest_mismatch": CassetteDigestMismatch,
    "score_out_of_range": ScoreOutOfRange,
    "cost_out_of_range": CostOutOfRange,
    "duration_out_of_range": DurationOutOfRange,
    "breakdown_value_out_of_range": BreakdownValueOutOfRange,
    "breakdown_key_banned": BreakdownKeyBanned,
    "breakdown_key_undeclared": BreakdownKeyUndeclared,
    "failure_mode_unknown": FailureModeUnknown,
    "severity_invalid": SeverityInvalid,
    "severity_mismatch": SeverityMismatch,
    "cosigner_unknown": CosignerUnknown,
    "cosigner_revoked": CosignerRevoked,
    "cosigner_not_permitted": CosignerNotPermitted,
    "cosigners_not_distinct": CosignersNotDistinct,
    "cosignature_invalid": CosignatureInvalid,
    "sigstore_root_missing": SigstoreRootMissing,
    "sigstore_origin_mismatch": SigstoreOriginMismatch,
    "sigstore_bundle_malformed": SigstoreBundleMalformed,
    "sigstore_bundle_unsupported": SigstoreBundleUnsupported,
    "sigstore_trust_root_invalid": SigstoreTrustRootInvalid,
    "sigstore_certificate_invalid": SigstoreCertificateInvalid,
    "sigstore_certificate_not_valid_at_time": SigstoreCertificateNotValidAtTime,
    "sigstore_sct_invalid": SigstoreSctInvalid,
    "sigstore_timestamp_invalid": SigstoreTimestampInvalid,
    "sigstore_tlog_unknown": SigstoreTlogUnknown,
    "sigstore_tlog_inclusion_invalid": SigstoreTlogInclusionInvalid,
    "sigstore_tlog_checkpoint_invalid": SigstoreTlogCheckpointInvalid,
    "sigstore_tlog_promise_invalid": SigstoreTlogPromiseInvalid,
    "sigstore_tlog_entry_mismatch": SigstoreTlogEntryMismatch,
    "sigstore_tlog_time_invalid": SigstoreTlogTimeInvalid,
    "sigstore_signature_invalid": SigstoreSignatureInvalid,
    "sigstore_message_mismatch": SigstoreMessageMismatch,
    "sigstore_identity_mismatch": SigstoreIdentityMismatch,
    "sigstore_issuer_mismatch": SigstoreIssuerMismatch,
    "sigstore_checks_incomplete": SigstoreChecksIncomplete,
    "sigstore_refused": SigstoreRefused,
    "proposal_exists": ProposalExists,
    "proposal_unknown": ProposalUnknown,
    "proposal_not_pending": ProposalNotPending,
    "run_exists": RunExists,
    "run_unknown": RunUnknown,
    "run_finished": RunFinished,
    "run_task_class_mismatch": RunTaskClassMismatch,
    "invocation_exists": InvocationExists,
    "invocation_unknown": InvocationUnknown,
    "rubric_failure_code_unknown": RubricFailureCodeUnknown,
    "capability_exists": CapabilityExists,
    "capability_unknown": CapabilityUnknown,
    "capability_spent": CapabilitySpent,
    "capability_expired": CapabilityExpired,
    "capability_workflow_mismatch": CapabilityWorkflowMismatch,
    "capability_quarantined": CapabilityQuarantined,
    "checkpoint_unknown": CheckpointUnknown,
    "state_not_at_head": StateNotAtHead,
    "promotion_must_be_human_authorized": PromotionMustBeHumanAuthorized,
    "recommendation_unknown": RecommendationUnknown,
    "tier_mismatch": TierMismatch,
    "requires_human_approval": RequiresHumanApproval,
    "ledger_unavailable": LedgerUnavailable,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "invalid_parameter": InvalidParameter,
    "unsupported_media_type": UnsupportedMediaType,
    "payload_too_large": PayloadTooLarge,
    "read_token_required": ReadTokenRequired,
    "overloaded": Overloaded,
    "timeout": Timeout,
    "checkpoint_not_witnessed": CheckpointNotWitnessed,
    "log_verifying": LogVerifying,
    "log_unverified": LogUnverified,
    "log_corrupt": LogCorrupt,
    "derived_state_mismatch": DerivedStateMismatch,
    "writes_halted": WritesHalted,
    "storage_unavailable": StorageUnavailable,
    "internal": Internal,
}
