"""evidence-ledger: sign, post and verify Evidence Ledger events from Python.

The pieces, by user:

- the harness and reconcilers: `SigningKey`, the event classes of
  `evidence_ledger.events` (`ScoreRecorded(...).sign(key)`, schema 3: the
  sensitive values committed, their disclosures posted beside the
  envelope, and case ids, identities and workflow ids named by handles,
  `CaseDraft.bind` / `disclose.bind`), and `Client.post` /
  `Client.post_many`, which return only checked receipts;
- readers with a role (docs/PRIVACY.md): `Client(..., token=...)` with a
  token in the server's readers file; `Client.entry` checks the
  disclosures served against the leaf (`evidence_ledger.disclose`), and a
  replay with the token checks that one value has one handle
  (`evidence_ledger.handles`);
- the promotion gate: `Client.projection`, `Client.recommend` and
  `verify_bundle`, which recompute the held-out statistics from the
  evidence bit for bit;
- auditors: `TrustedState`, `Client.checkpoint`, `audit`, and the CLI
  (`python -m evidence_ledger verify-bundle FILE --key VKEY`,
  `python -m evidence_ledger audit URL --key VKEY --trusted FILE`);
  anchors: `check_anchors` (the audited tree extends every signed checkpoint
  of an anchors directory) and `check_rekor_bundles` (the Rekor bundles kept
  beside them, offline, with sigstore-python), `audit ... --anchors DIR`
  (`evidence_ledger.anchors`);
- completeness by replay, for the gate and auditors: `Replica`,
  `replay_projections` and `Gate` (`evidence_ledger.replay`), and
  `audit ... --projections DIR`: every projection must equal the one a
  replica of the whole log gives, bit for bit;
- witnesses: `Policy` (C2SP tlog-policy) and `Client(..., policy=...)`,
  under which the trusted state advances only to checkpoints a quorum of
  witnesses cosigned (`evidence_ledger.cosign`, type 0x04 cosignatures),
  `Client.witnessed_inclusion`, and `audit ... --policy FILE`;
- completeness by commitment, without replay: `Client.state` and
  `check_state` (`GET /v1/task-classes/{name}/state`: every case record of
  a class proven against the state root the ledger committed in its log,
  the view recomputed from them), the trees and records of
  `evidence_ledger.commit`, `Gate.verified_state`, and the CLI's `state`.

Errors: `InvalidInput` (your input), one `ProblemError` subclass per server
code (`evidence_ledger.problems`), `VerificationError` (an answer that does
not verify; `AnchorError` for an anchor the audited tree does not extend or
a Rekor bundle beside it that fails), `TransportError`, `ReplicaError` (a replica directory that
cannot be used), `NoQuorum` and `NotYetWitnessed` (witnesses), and
`SigstoreUnavailable` (a log holding Sigstore co-signatures, replayed
without the optional sigstore-python: `pip install evidence-ledger[sigstore]`).
"""

from __future__ import annotations

from . import anchors, commit, disclose, events, handles, problems
from .anchors import Anchor, AnchorsDir, BundlesChecked, CheckedAnchor, check_anchors, check_rekor_bundles, read_anchors
from .audit import AuditReport, audit
from .client import Client, Posted, WitnessedInclusion
from .cosign import Cosigned, CosignatureVerifier, CosignerKey, Policy, WitnessedCheckpoint, cosignatures
from .envelope import Envelope, decode_leaf, sign_payload
from .errors import (
    AbsenceNotProven,
    AnchorBundleError,
    AnchorBundleInvalid,
    AnchorBundleMissing,
    AnchorBundleStray,
    AnchorError,
    AnchorFork,
    AnchorRewrite,
    AnchorTruncation,
    AnchorUnknownKey,
    AnchorWrongLog,
    BadSignature,
    CasesMismatch,
    CommitmentMismatch,
    DisclosureMismatch,
    Conflict,
    EvidenceMismatch,
    Forbidden,
    ForkDetected,
    Incomplete,
    InvalidInput,
    LeafMismatch,
    LedgerError,
    LogNotListed,
    MalformedAnswer,
    MalformedRequest,
    NoQuorum,
    NotFoundError,
    NotCommitted,
    NotYetWitnessed,
    PolicyError,
    ProblemError,
    ProofMismatch,
    ReplicaError,
    RuleBroken,
    RuleViolation,
    ServerFault,
    ServiceUnavailable,
    SettingsMismatch,
    SigstoreUnavailable,
    StaleCheckpoint,
    StaleCommitment,
    TransportError,
    Unauthenticated,
    UnknownProblem,
    VerificationError,
    ViewMismatch,
    WrongStateRoot,
)
from .note import Checkpoint, SigningKey, VerifierKey, open_checkpoint
from .replay import Gate, Replayed, Replica, ReplayRules, VerifiedProjection, first_difference, replay_projections
from .trust import TrustedState
from .verify import BundleSummary, VerifiedState, check_projection, check_receipt, check_state, verify_bundle

__version__ = "0.1.0"

__all__ = [
    "AbsenceNotProven",
    "Anchor",
    "AnchorBundleError",
    "AnchorBundleInvalid",
    "AnchorBundleMissing",
    "AnchorBundleStray",
    "AnchorError",
    "AnchorFork",
    "AnchorRewrite",
    "AnchorTruncation",
    "AnchorUnknownKey",
    "AnchorWrongLog",
    "AnchorsDir",
    "AuditReport",
    "BadSignature",
    "BundleSummary",
    "BundlesChecked",
    "CasesMismatch",
    "CheckedAnchor",
    "Checkpoint",
    "Client",
    "CommitmentMismatch",
    "DisclosureMismatch",
    "Conflict",
    "CosignatureVerifier",
    "Cosigned",
    "CosignerKey",
    "Envelope",
    "EvidenceMismatch",
    "Forbidden",
    "ForkDetected",
    "Gate",
    "Incomplete",
    "InvalidInput",
    "LeafMismatch",
    "LedgerError",
    "LogNotListed",
    "MalformedAnswer",
    "MalformedRequest",
    "NoQuorum",
    "NotCommitted",
    "NotFoundError",
    "NotYetWitnessed",
    "Policy",
    "PolicyError",
    "Posted",
    "ProblemError",
    "ProofMismatch",
    "ReplayRules",
    "Replayed",
    "Replica",
    "ReplicaError",
    "RuleBroken",
    "RuleViolation",
    "ServerFault",
    "ServiceUnavailable",
    "SettingsMismatch",
    "SigningKey",
    "SigstoreUnavailable",
    "StaleCheckpoint",
    "StaleCommitment",
    "TransportError",
    "TrustedState",
    "Unauthenticated",
    "UnknownProblem",
    "VerificationError",
    "VerifiedProjection",
    "VerifiedState",
    "VerifierKey",
    "ViewMismatch",
    "WitnessedCheckpoint",
    "WitnessedInclusion",
    "WrongStateRoot",
    "anchors",
    "audit",
    "check_anchors",
    "check_projection",
    "check_receipt",
    "check_rekor_bundles",
    "check_state",
    "commit",
    "disclose",
    "cosignatures",
    "decode_leaf",
    "events",
    "first_difference",
    "handles",
    "open_checkpoint",
    "problems",
    "read_anchors",
    "replay_projections",
    "sign_payload",
    "verify_bundle",
]
