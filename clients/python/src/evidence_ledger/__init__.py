"""evidence-ledger: sign, post and verify Evidence Ledger events from Python.

The pieces, by user:

- the harness and reconcilers: `SigningKey`, the event classes of
  `evidence_ledger.events` (`ScoreRecorded(...).sign(key)`), and
  `Client.post` / `Client.post_many`, which return only checked receipts;
- the promotion gate: `Client.projection`, `Client.recommend` and
  `verify_bundle`, which recompute the held-out statistics from the
  evidence bit for bit;
- auditors: `TrustedState`, `Client.checkpoint`, `audit`, and the CLI
  (`python -m evidence_ledger verify-bundle FILE --key VKEY`,
  `python -m evidence_ledger audit URL --key VKEY --trusted FILE`).

Errors: `InvalidInput` (your input), one `ProblemError` subclass per server
code (`evidence_ledger.problems`), `VerificationError` (an answer that does
not verify), `TransportError`.
"""

from __future__ import annotations

from . import events, problems
from .audit import AuditReport, audit
from .client import Client, Posted
from .envelope import Envelope, decode_leaf, sign_payload
from .errors import (
    BadSignature,
    Conflict,
    EvidenceMismatch,
    Forbidden,
    ForkDetected,
    Incomplete,
    InvalidInput,
    LeafMismatch,
    LedgerError,
    MalformedAnswer,
    MalformedRequest,
    NotFoundError,
    ProblemError,
    ProofMismatch,
    RuleViolation,
    ServerFault,
    ServiceUnavailable,
    StaleCheckpoint,
    TransportError,
    Unauthenticated,
    UnknownProblem,
    VerificationError,
)
from .note import Checkpoint, SigningKey, VerifierKey, open_checkpoint
from .trust import TrustedState
from .verify import BundleSummary, check_projection, check_receipt, verify_bundle

__version__ = "0.1.0"

__all__ = [
    "AuditReport",
    "BadSignature",
    "BundleSummary",
    "Checkpoint",
    "Client",
    "Conflict",
    "Envelope",
    "EvidenceMismatch",
    "Forbidden",
    "ForkDetected",
    "Incomplete",
    "InvalidInput",
    "LeafMismatch",
    "LedgerError",
    "MalformedAnswer",
    "MalformedRequest",
    "NotFoundError",
    "Posted",
    "ProblemError",
    "ProofMismatch",
    "RuleViolation",
    "ServerFault",
    "ServiceUnavailable",
    "SigningKey",
    "StaleCheckpoint",
    "TransportError",
    "TrustedState",
    "Unauthenticated",
    "UnknownProblem",
    "VerificationError",
    "VerifierKey",
    "audit",
    "check_projection",
    "check_receipt",
    "decode_leaf",
    "events",
    "open_checkpoint",
    "problems",
    "sign_payload",
    "verify_bundle",
]
