"""Typed constructors for every event kind of docs/EVENTS.md.

Each class checks its fields as the ledger will (identifiers, text,
digests, timestamps, numbers, banned breakdown keys, severities) and raises
`InvalidInput` naming the field as the server would name it
(`event.body.score.breakdown.model_confidence`) and the server's code.
`sign(key)` turns an event into a signed `Envelope`: in schema 3 (as in
schema 2), the sensitive values the constructors checked in clear
(docs/PRIVACY.md) are committed at signing, and their disclosures travel
with the envelope. Schema 3 also names case ids, identities and workflow
ids by handles (docs/PRIVACY.md, "Handles"): an event that names such a
value first (`CaseAdded`, `CaseProposed`'s draft, `PrincipalEnrolled`,
`CapabilityMinted`) gives it a handle at signing (`Envelope.handle`), and
every later event (`ScoreRecorded`, `RubricInvoked`, `CaseRetired`,
`RagExampleWritten`, the co-signed statements) names the handle. A value
whose handle a co-signed statement names is bound first
(`CaseDraft.bind`, `disclose.bind`) and its binding passed to `sign`.

Rules that need the log's state (an enrolled signer, an active case, the
current rubric digest, a declared breakdown key) are checked by the ledger
only; a refusal comes back as a typed `ProblemError`.
"""

from __future__ import annotations

import abc
import math
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Mapping, Optional, Sequence

from .disclose import SCHEMA_HANDLES, Bound, bind, parse
from .envelope import SCHEMA_VERSION, Envelope, sign_payload
from .errors import InvalidInput
from .note import SigningKey, b64
from .timefmt import parse_utc_micros

TIERS = ("bronze", "silver", "gold")
ROLES = ("harness", "curator", "gate", "rag-writer", "reconciler", "promotion-gate", "maintainer", "operator", "ledger")
SEVERITIES = ("block", "warn", "info")
DISPOSITIONS = ("positive", "negative", "ambiguous")
ISOLATIONS = ("microvm", "shared_kernel")
SOURCES = ("curated", "outcome-ledger-derived", "regression-converted")
BANNED_BREAKDOWN_SUBSTRINGS = ("confidence", "llm", "self_reported", "model_says")
RUBRIC_FAILURE_CODES = (
    "rubric.timeout",
    "rubric.killed_oom",
    "rubric.malformed_output",
    "rubric.unknown_breakdown_key",
    "rubric.unknown_failure_mode",
    "rubric.crashed",
    "rubric.sandbox_violation",
)


def _body(f: str) -> str:
    return f"event.body.{f}"


def ident(value: str, f: str) -> str:
    if not (isinstance(value, str) and 0 < len(value) <= 128 and all(c.isascii() and (c.isalnum() or c in "._:/@+-") for c in value)):
        raise InvalidInput(_body(f), "must be 1–128 characters from [A-Za-z0-9._:/@+-]", "invalid_identifier")
    return value


def text(value: str, f: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 4096 or any(unicodedata.category(c) == "Cc" for c in value):
        raise InvalidInput(_body(f), "must be 1–4096 characters with no control characters", "invalid_text")
    return value


def digest(value: str, f: str) -> str:
    ok = isinstance(value, str) and any(
        value.startswith(p) and len(value) == len(p) + 64 and all(c in "0123456789abcdef" for c in value[len(p):])
        for p in ("blake3:", "sha256:")
    )
    if not ok:
        raise InvalidInput(_body(f), "must be blake3:<64 lower-case hex> or sha256:<64 lower-case hex>", "invalid_digest")
    return value


def timestamp(value: str, f: str) -> str:
    if parse_utc_micros(value) is None:
        raise InvalidInput(_body(f), "must be RFC 3339 in UTC (ending in Z)", "invalid_timestamp")
    return value


def key_id_field(value: str, f: str) -> str:
    if not (isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)):
        raise InvalidInput(_body(f), "a key id is 64 lower-case hex digits", "invalid_identifier")
    return value


def one_of(value: str, allowed: Sequence[str], f: str) -> str:
    if value not in allowed:
        raise InvalidInput(_body(f), f"must be one of {', '.join(allowed)}", "invalid_value")
    return value


def number(value: float, f: str, low: Optional[float] = None, high: Optional[float] = None, code: str = "invalid_value") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(_body(f), "must be a number", "invalid_type")
    v = float(value)
    if not math.isfinite(v) or (low is not None and v < low) or (high is not None and v > high):
        bounds = f" within [{low}, {high}]" if high is not None else (f" and at least {low}" if low is not None else "")
        raise InvalidInput(_body(f), f"must be finite{bounds}", code)
    return v


def count(value: int, f: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 2**32 - 1:
        raise InvalidInput(_body(f), f"must be an integer of at least {low}", "invalid_value")
    return value


def index(value: int, f: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**53 - 1:
        raise InvalidInput(_body(f), "must be a log index (a non-negative integer)", "invalid_value")
    return value


def banned(key: str, f: str) -> None:
    lower = key.lower()
    for b in BANNED_BREAKDOWN_SUBSTRINGS:
        if b in lower:
            raise InvalidInput(_body(f), f"breakdown keys may not contain `{b}`", "breakdown_key_banned")


# --- co-signed statements (docs/EVENTS.md, "Co-signed statements") ---------


def case_provenance_statement(case_id: str, added_at: str, case_digest: str) -> bytes:
    return f"evidence-ledger/v1 case-provenance\n{case_id}\n{added_at}\n{case_digest}".encode()


def case_retire_statement(case_id: str, case_digest: str) -> bytes:
    return f"evidence-ledger/v1 case-retire\n{case_id}\n{case_digest}".encode()


def tier_change_statement(task_class: str, from_tier: str, to_tier: str, recommendation_index: int) -> bytes:
    return f"evidence-ledger/v1 tier-change\n{task_class}\n{from_tier}\n{to_tier}\n{recommendation_index}".encode()


def field_redact_statement(entry: int, leaf_hash: str, field_: str) -> bytes:
    return f"evidence-ledger/v1 field-redact\n{entry}\n{leaf_hash}\n{field_}".encode()


@dataclass(frozen=True)
class CoSignature:
    key_id: str
    signature: str

    @classmethod
    def sign(cls, key: SigningKey, statement: bytes) -> "CoSignature":
        return cls(key.key_id, b64(key.sign(statement)))

    def check(self, f: str) -> None:
        key_id_field(self.key_id, f"{f}.key_id")
        if not isinstance(self.signature, str) or len(self.signature) != 88:
            raise InvalidInput(_body(f"{f}.signature"), "base64 of a 64-byte signature", "cosignature_invalid")

    def to_json(self) -> dict[str, Any]:
        return {"key_id": self.key_id, "signature": self.signature}


@dataclass(frozen=True)
class CheckpointRef:
    size: int
    root: str

    def check(self, f: str) -> None:
        index(self.size, f"{f}.size")
        if not (isinstance(self.root, str) and len(self.root) == 64 and all(c in "0123456789abcdef" for c in self.root)):
            raise InvalidInput(_body(f"{f}.root"), "must be 64 lower-case hex digits", "invalid_value")

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "root": self.root}


class Event(abc.ABC):
    """Base of every event: `kind`, `body()` and `sign(key)`."""

    kind: ClassVar[str]

    @abc.abstractmethod
    def body(self) -> dict[str, Any]:
        """The event's body as JSON."""

    def sign(
        self,
        key: SigningKey,
        *,
        id: Optional[str] = None,
        issued_at: Optional[str] = None,
        schema: int = SCHEMA_VERSION,
        bound: Sequence[Bound] = (),
    ) -> Envelope:
        """This event signed by `key` as a new envelope (a fresh id, issued now, unless
        given). In schema 3 (the default) or 2 its sensitive values are committed and
        their disclosures travel with the envelope (`envelope.sign_payload`); in schema 3
        a value named here first gets its handle (`Envelope.handle`), or the one `bound`
        gave it (`disclose.bind`, `CaseDraft.bind`). `schema=1` signs the values in
        clear, for a log that has not switched yet."""
        return sign_payload(key, self.kind, self.body(), id=id, issued_at=issued_at, schema=schema, bound=bound)


# --- principals (operator) --------------------------------------------------


@dataclass(frozen=True)
class PrincipalEnrolled(Event):
    """A key enrolled for an identity with roles. In schema 3, `identity` is signed as a
    handle: the identity named first moves into `identity_name` (committed) and
    `identity` becomes its handle, or, for another key of a person already enrolled,
    `identity` is the handle they have and `identity_name` their identity again."""

    kind: ClassVar[str] = "principal.enrolled"
    public_key: str
    identity: str
    roles: Sequence[str]
    #: Schema 3: the identity whose handle `identity` is (None: `identity` itself).
    identity_name: Optional[str] = None

    @classmethod
    def of(cls, key: SigningKey, identity: str, roles: Sequence[str]) -> "PrincipalEnrolled":
        return cls(key.public_key_b64, identity, tuple(roles))

    def __post_init__(self) -> None:
        if not isinstance(self.public_key, str) or len(self.public_key) != 44:
            raise InvalidInput(_body("public_key"), "base64 of a 32-byte Ed25519 key", "invalid_value")
        text(self.identity, "identity")
        if self.identity_name is not None:
            text(self.identity_name, "identity_name")
        if not self.roles:
            raise InvalidInput(_body("roles"), "at least one role", "invalid_value")
        for i, r in enumerate(self.roles):
            one_of(r, ROLES, f"roles[{i}]")

    def body(self) -> dict[str, Any]:
        b: dict[str, Any] = {"public_key": self.public_key, "identity": self.identity, "roles": list(self.roles)}
        if self.identity_name is not None:
            b["identity_name"] = self.identity_name
        return b


@dataclass(frozen=True)
class PrincipalRevoked(Event):
    kind: ClassVar[str] = "principal.revoked"
    key_id: str
    reason: str

    def __post_init__(self) -> None:
        key_id_field(self.key_id, "key_id")
        text(self.reason, "reason")

    def body(self) -> dict[str, Any]:
        return {"key_id": self.key_id, "reason": self.reason}


# --- task classes and rubrics (operator) -------------------------------------


@dataclass(frozen=True)
class TierRule:
    min_cases_for_promotion: int
    score_threshold: float

    def check(self, f: str) -> None:
        count(self.min_cases_for_promotion, f"{f}.min_cases_for_promotion", 1)
        number(self.score_threshold, f"{f}.score_threshold", 0.0, 1.0, "tier_rules_invalid")

    def to_json(self) -> dict[str, Any]:
        return {"min_cases_for_promotion": self.min_cases_for_promotion, "score_threshold": float(self.score_threshold)}


@dataclass(frozen=True)
class FailureMode:
    code: str
    severity: str
    description: str

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "description": self.description}


@dataclass(frozen=True)
class TaskClassRegistered(Event):
    kind: ClassVar[str] = "task_class.registered"
    task_class: str
    silver: TierRule
    gold: TierRule
    failure_modes: Sequence[FailureMode]
    breakdown_keys: Sequence[str]
    rubric_digest: str
    initial_tier: str = "bronze"

    def __post_init__(self) -> None:
        ident(self.task_class, "task_class")
        self.silver.check("tiers.silver")
        self.gold.check("tiers.gold")
        if (
            self.gold.min_cases_for_promotion < self.silver.min_cases_for_promotion
            or self.gold.score_threshold < self.silver.score_threshold
        ):
            raise InvalidInput(_body("tiers.gold"), "gold must be at least as strict as silver", "tier_rules_invalid")
        seen: set[str] = set()
        for i, m in enumerate(self.failure_modes):
            ident(m.code, f"failure_modes[{i}].code")
            if m.severity not in SEVERITIES:
                raise InvalidInput(_body(f"failure_modes[{i}].severity"), "must be block, warn or info", "severity_invalid")
            text(m.description, f"failure_modes[{i}].description")
            if m.code in seen:
                raise InvalidInput(_body(f"failure_modes[{i}].code"), "failure mode codes are unique", "invalid_value")
            seen.add(m.code)
        for i, k in enumerate(self.breakdown_keys):
            banned(k, f"breakdown_keys[{i}]")
            ident(k, f"breakdown_keys[{i}]")
        digest(self.rubric_digest, "rubric_digest")
        one_of(self.initial_tier, TIERS, "initial_tier")

    def body(self) -> dict[str, Any]:
        return {
            "task_class": self.task_class,
            "tiers": {"silver": self.silver.to_json(), "gold": self.gold.to_json()},
            "failure_modes": [m.to_json() for m in self.failure_modes],
            "breakdown_keys": list(self.breakdown_keys),
            "rubric_digest": self.rubric_digest,
            "initial_tier": self.initial_tier,
        }


@dataclass(frozen=True)
class RubricUpdated(Event):
    kind: ClassVar[str] = "rubric.updated"
    task_class: str
    rubric_digest: str

    def __post_init__(self) -> None:
        ident(self.task_class, "task_class")
        digest(self.rubric_digest, "rubric_digest")

    def body(self) -> dict[str, Any]:
        return {"task_class": self.task_class, "rubric_digest": self.rubric_digest}


# --- cases (curators; reconcilers only propose) -------------------------------


@dataclass(frozen=True)
class CaseDraft:
    """A case's fields without provenance (a reconciler's proposal). In schema 3,
    `case_id` is the case's handle and `case_name` its name (the id in clear, committed
    at signing): `bind` gives a draft named by its id a handle."""

    case_id: str
    title: str
    disposition: str
    difficulty: str
    curation_class: str
    case_digest: str
    cassette_digest: str
    #: Schema 3: the case's name, whose handle `case_id` is (None: `case_id` itself).
    case_name: Optional[str] = None

    def bind(self, path: str = "case_name") -> tuple["CaseDraft", Bound]:
        """This draft, whose `case_id` is the case's name (or whose `case_name` is, when
        set), named by a new handle (`disclose.bind`, a random salt): `case_id` the
        handle, `case_name` the name. Returns it with the binding, to pass to `sign(...,
        bound=...)`. `path` is the companion's path in the event: `case_name` for
        `CaseAdded`, `draft.case_name` for `CaseProposed`. The handle is what the
        curators co-sign (`CaseAdded.cosigned`, `ProposalApproved.cosigned`) and every
        later event names (`ScoreRecorded`, `RubricInvoked`, `CaseRetired`)."""
        if path not in ("case_name", "draft.case_name"):
            raise InvalidInput("path", "a case's companion is `case_name` or `draft.case_name`", "invalid_value")
        name = self.case_name if self.case_name is not None else self.case_id
        ident(name, path)
        b = bind(path, name)
        return replace(self, case_id=b.handle, case_name=name), b

    def check(self, prefix: str) -> None:
        ident(self.case_id, f"{prefix}case_id")
        if self.case_name is not None:
            ident(self.case_name, f"{prefix}case_name")
        text(self.title, f"{prefix}title")
        one_of(self.disposition, DISPOSITIONS, f"{prefix}disposition")
        text(self.difficulty, f"{prefix}difficulty")
        ident(self.curation_class, f"{prefix}curation_class")
        digest(self.case_digest, f"{prefix}case_digest")
        digest(self.cassette_digest, f"{prefix}cassette_digest")

    def to_json(self) -> dict[str, Any]:
        b: dict[str, Any] = {
            "case_id": self.case_id,
            "title": self.title,
            "disposition": self.disposition,
            "difficulty": self.difficulty,
            "curation_class": self.curation_class,
            "case_digest": self.case_digest,
            "cassette_digest": self.cassette_digest,
        }
        if self.case_name is not None:
            b["case_name"] = self.case_name
        return b


@dataclass(frozen=True)
class Provenance:
    source: str
    source_ref: str
    added_at: str
    added_by: CoSignature
    reviewed_by: CoSignature

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "source_ref": self.source_ref,
            "added_at": self.added_at,
            "added_by": self.added_by.to_json(),
            "reviewed_by": self.reviewed_by.to_json(),
        }


@dataclass(frozen=True)
class CaseAdded(Event):
    kind: ClassVar[str] = "case.added"
    task_class: str
    case: CaseDraft
    provenance: Provenance

    @classmethod
    def cosigned(
        cls,
        task_class: str,
        case: CaseDraft,
        *,
        source: str,
        source_ref: str,
        added_at: str,
        added_by: SigningKey,
        reviewed_by: SigningKey,
    ) -> "CaseAdded":
        """A case added by one curator and reviewed by another, both co-signing its
        provenance: a statement over `case.case_id`. In schema 3 that is the case's
        handle: give the case one first (`CaseDraft.bind`) and sign with its binding
        (`sign(key, bound=[binding])`)."""
        st = case_provenance_statement(case.case_id, added_at, case.case_digest)
        return cls(
            task_class,
            case,
            Provenance(source, source_ref, added_at, CoSignature.sign(added_by, st), CoSignature.sign(reviewed_by, st)),
        )

    def __post_init__(self) -> None:
        ident(self.task_class, "task_class")
        self.case.check("")
        p = self.provenance
        one_of(p.source, SOURCES, "provenance.source")
        text(p.source_ref, "provenance.source_ref")
        timestamp(p.added_at, "provenance.added_at")
        p.added_by.check("provenance.added_by")
        p.reviewed_by.check("provenance.reviewed_by")
        if p.added_by.key_id == p.reviewed_by.key_id:
            raise InvalidInput(_body("provenance.reviewed_by"), "two different curators co-sign", "cosigners_not_distinct")

    def sign(
        self,
        key: SigningKey,
        *,
        id: Optional[str] = None,
        issued_at: Optional[str] = None,
        schema: int = SCHEMA_VERSION,
        bound: Sequence[Bound] = (),
    ) -> Envelope:
        """As `Event.sign`. In schema 3 a case whose name is `case_id`, with no binding
        of that name in `bound`, would get a fresh handle the curators did not co-sign:
        refused here (`missing_field` on `case_name`) rather than at the door
        (`cosignature_invalid`)."""
        c = self.case
        if schema >= SCHEMA_HANDLES and c.case_name is None and not any(_binds(b, "case_name", c.case_id) for b in bound):
            raise InvalidInput(
                _body("case_name"),
                "in schema 3 the curators co-sign the case's handle: give the case its handle before they sign "
                "(CaseDraft.bind, or disclose.bind and sign(..., bound=...))",
                "missing_field",
            )
        return super().sign(key, id=id, issued_at=issued_at, schema=schema, bound=bound)

    def body(self) -> dict[str, Any]:
        b = {"task_class": self.task_class, **self.case.to_json(), "provenance": self.provenance.to_json()}
        return b


def _binds(b: Bound, path: str, value: str) -> bool:
    """Whether the binding `b` discloses `value` at `path`."""
    try:
        return parse(b.disclosure) == (path, value)
    except InvalidInput:
        return False


@dataclass(frozen=True)
class CaseRetired(Event):
    kind: ClassVar[str] = "case.retired"
    case_id: str
    reason: str
    retired_by: CoSignature
    reviewed_by: CoSignature

    @classmethod
    def cosigned(cls, case_id: str, case_digest: str, reason: str, *, retired_by: SigningKey, reviewed_by: SigningKey) -> "CaseRetired":
        """Two curators retire the case `case_id` (its handle, in a log that gave it one
        in schema 3), co-signing the case-retire statement over it."""
        st = case_retire_statement(case_id, case_digest)
        return cls(case_id, reason, CoSignature.sign(retired_by, st), CoSignature.sign(reviewed_by, st))

    def __post_init__(self) -> None:
        ident(self.case_id, "case_id")
        text(self.reason, "reason")
        self.retired_by.check("retired_by")
        self.reviewed_by.check("reviewed_by")
        if self.retired_by.key_id == self.reviewed_by.key_id:
            raise InvalidInput(_body("reviewed_by"), "two different curators co-sign", "cosigners_not_distinct")

    def body(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "reason": self.reason,
            "retired_by": self.retired_by.to_json(),
            "reviewed_by": self.reviewed_by.to_json(),
        }


@dataclass(frozen=True)
class CaseProposed(Event):
    """A reconciler's pending case: never scored until two curators approve it."""

    kind: ClassVar[str] = "case.proposed"
    proposal_id: str
    task_class: str
    draft: CaseDraft
    production_ref: str

    def __post_init__(self) -> None:
        ident(self.proposal_id, "proposal_id")
        ident(self.task_class, "task_class")
        self.draft.check("draft.")
        text(self.production_ref, "production_ref")

    def body(self) -> dict[str, Any]:
        return {
            "proposal_id": self.proposal_id,
            "task_class": self.task_class,
            "draft": self.draft.to_json(),
            "production_ref": self.production_ref,
        }


@dataclass(frozen=True)
class ProposalApproved(Event):
    kind: ClassVar[str] = "proposal.approved"
    proposal_id: str
    added_at: str
    added_by: CoSignature
    reviewed_by: CoSignature

    @classmethod
    def cosigned(cls, proposal_id: str, draft: CaseDraft, added_at: str, *, added_by: SigningKey, reviewed_by: SigningKey) -> "ProposalApproved":
        """Two curators co-sign the draft's case-provenance statement, over
        `draft.case_id`: in schema 3, the handle the proposal gave the case (as signed:
        `Envelope.handle` of the proposal, or the draft `CaseDraft.bind` returned)."""
        st = case_provenance_statement(draft.case_id, added_at, draft.case_digest)
        return cls(proposal_id, added_at, CoSignature.sign(added_by, st), CoSignature.sign(reviewed_by, st))

    def __post_init__(self) -> None:
        ident(self.proposal_id, "proposal_id")
        timestamp(self.added_at, "added_at")
        self.added_by.check("added_by")
        self.reviewed_by.check("reviewed_by")
        if self.added_by.key_id == self.reviewed_by.key_id:
            raise InvalidInput(_body("reviewed_by"), "two different curators co-sign", "cosigners_not_distinct")

    def body(self) -> dict[str, Any]:
        return {
            "proposal_id": self.proposal_id,
            "added_at": self.added_at,
            "added_by": self.added_by.to_json(),
            "reviewed_by": self.reviewed_by.to_json(),
        }


@dataclass(frozen=True)
class ProposalRejected(Event):
    kind: ClassVar[str] = "proposal.rejected"
    proposal_id: str
    reason: str

    def __post_init__(self) -> None:
        ident(self.proposal_id, "proposal_id")
        text(self.reason, "reason")

    def body(self) -> dict[str, Any]:
        return {"proposal_id": self.proposal_id, "reason": self.reason}


# --- runs, rubrics, scores (harness) -----------------------------------------


@dataclass(frozen=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run.started"
    run_id: str
    task_class: str
    harness_version: str
    rubric_digest: str
    sandbox_image_digest: str
    isolation_class: str = "microvm"

    def __post_init__(self) -> None:
        ident(self.run_id, "run_id")
        ident(self.task_class, "task_class")
        text(self.harness_version, "harness_version")
        digest(self.rubric_digest, "rubric_digest")
        digest(self.sandbox_image_digest, "sandbox_image_digest")
        one_of(self.isolation_class, ISOLATIONS, "isolation_class")

    def body(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "task_class": self.task_class,
            "harness_version": self.harness_version,
            "rubric_digest": self.rubric_digest,
            "sandbox_image_digest": self.sandbox_image_digest,
            "isolation_class": self.isolation_class,
        }


@dataclass(frozen=True)
class RunFinished(Event):
    kind: ClassVar[str] = "run.finished"
    run_id: str

    def __post_init__(self) -> None:
        ident(self.run_id, "run_id")

    def body(self) -> dict[str, Any]:
        return {"run_id": self.run_id}


@dataclass(frozen=True)
class RubricInvoked(Event):
    kind: ClassVar[str] = "rubric.invoked"
    run_id: str
    case_id: str
    invocation_id: str

    def __post_init__(self) -> None:
        ident(self.run_id, "run_id")
        ident(self.case_id, "case_id")
        ident(self.invocation_id, "invocation_id")

    def body(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "case_id": self.case_id, "invocation_id": self.invocation_id}


@dataclass(frozen=True)
class RubricCompleted(Event):
    kind: ClassVar[str] = "rubric.completed"
    invocation_id: str

    def __post_init__(self) -> None:
        ident(self.invocation_id, "invocation_id")

    def body(self) -> dict[str, Any]:
        return {"invocation_id": self.invocation_id}


@dataclass(frozen=True)
class RubricFailed(Event):
    kind: ClassVar[str] = "rubric.failed"
    invocation_id: str
    failure_code: str

    def __post_init__(self) -> None:
        ident(self.invocation_id, "invocation_id")
        if self.failure_code not in RUBRIC_FAILURE_CODES:
            raise InvalidInput(_body("failure_code"), "must be one of " + ", ".join(RUBRIC_FAILURE_CODES), "rubric_failure_code_unknown")

    def body(self) -> dict[str, Any]:
        return {"invocation_id": self.invocation_id, "failure_code": self.failure_code}


@dataclass(frozen=True)
class BenchScore:
    """`BenchScore`: passed, score in [0, 1], breakdown, failure modes, cost, duration."""

    passed: bool
    score: float
    breakdown: Mapping[str, float] = field(default_factory=dict)
    failure_modes: Sequence[tuple[str, str]] = ()
    cost_usd: float = 0.0
    duration_seconds: float = 0.0

    def check(self) -> None:
        if not isinstance(self.passed, bool):
            raise InvalidInput(_body("score.passed"), "must be true or false", "invalid_type")
        number(self.score, "score.score", 0.0, 1.0, "score_out_of_range")
        number(self.cost_usd, "score.cost_usd", 0.0, None, "cost_out_of_range")
        number(self.duration_seconds, "score.duration_seconds", 0.0, None, "duration_out_of_range")
        for k, v in self.breakdown.items():
            banned(k, f"score.breakdown.{k}")
            number(v, f"score.breakdown.{k}", None, None, "breakdown_value_out_of_range")
        for i, (code, severity) in enumerate(self.failure_modes):
            if severity not in SEVERITIES:
                raise InvalidInput(_body(f"score.failure_modes[{i}].severity"), "must be block, warn or info", "severity_invalid")
            if not isinstance(code, str) or not code:
                raise InvalidInput(_body(f"score.failure_modes[{i}].code"), "must be a failure mode code", "invalid_value")

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "score": float(self.score),
            "breakdown": {k: float(v) for k, v in self.breakdown.items()},
            "failure_modes": [{"code": c, "severity": s} for c, s in self.failure_modes],
            "cost_usd": float(self.cost_usd),
            "duration_seconds": float(self.duration_seconds),
        }


@dataclass(frozen=True)
class ScoreRecorded(Event):
    """`BenchRunRecord`: one case's score in one run."""

    kind: ClassVar[str] = "score.recorded"
    run_id: str
    task_class: str
    case_id: str
    case_digest: str
    rubric_digest: str
    cassette_digest: str
    harness_version: str
    image_digest: str
    score: BenchScore
    started_at: str
    finished_at: str
    operator_fingerprint: str

    def __post_init__(self) -> None:
        ident(self.run_id, "run_id")
        ident(self.task_class, "task_class")
        ident(self.case_id, "case_id")
        digest(self.case_digest, "case_digest")
        digest(self.rubric_digest, "rubric_digest")
        digest(self.cassette_digest, "cassette_digest")
        digest(self.image_digest, "image_digest")
        self.score.check()
        text(self.harness_version, "harness_version")
        text(self.operator_fingerprint, "operator_fingerprint")
        timestamp(self.started_at, "started_at")
        timestamp(self.finished_at, "finished_at")

    def body(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "task_class": self.task_class,
            "case_id": self.case_id,
            "case_digest": self.case_digest,
            "rubric_digest": self.rubric_digest,
            "cassette_digest": self.cassette_digest,
            "harness_version": self.harness_version,
            "image_digest": self.image_digest,
            "score": self.score.to_json(),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "operator_fingerprint": self.operator_fingerprint,
        }


# --- RAG write capabilities (gate; RAG writer) -------------------------------


@dataclass(frozen=True)
class CapabilityMinted(Event):
    """A RAG write capability for a workflow. In schema 3, `workflow_id` is signed as a
    handle (the workflow id named first moves into `workflow_name`), or is the handle an
    earlier capability gave the workflow, with `workflow_name` its id again; the
    example written with the capability names that handle."""

    kind: ClassVar[str] = "rag.capability.minted"
    capability_id: str
    workflow_id: str
    validated_at: str
    minted_at: CheckpointRef
    expires_at: str
    #: Schema 3: the workflow id whose handle `workflow_id` is (None: `workflow_id` itself).
    workflow_name: Optional[str] = None

    def __post_init__(self) -> None:
        ident(self.capability_id, "capability_id")
        ident(self.workflow_id, "workflow_id")
        if self.workflow_name is not None:
            ident(self.workflow_name, "workflow_name")
        timestamp(self.validated_at, "validated_at")
        self.minted_at.check("minted_at")
        timestamp(self.expires_at, "expires_at")

    def body(self) -> dict[str, Any]:
        b: dict[str, Any] = {
            "capability_id": self.capability_id,
            "workflow_id": self.workflow_id,
            "validated_at": self.validated_at,
            "minted_at": self.minted_at.to_json(),
            "expires_at": self.expires_at,
        }
        if self.workflow_name is not None:
            b["workflow_name"] = self.workflow_name
        return b


@dataclass(frozen=True)
class RagExampleWritten(Event):
    kind: ClassVar[str] = "rag.example.written"
    capability_id: str
    workflow_id: str
    example_digest: str

    def __post_init__(self) -> None:
        ident(self.capability_id, "capability_id")
        ident(self.workflow_id, "workflow_id")
        digest(self.example_digest, "example_digest")

    def body(self) -> dict[str, Any]:
        return {"capability_id": self.capability_id, "workflow_id": self.workflow_id, "example_digest": self.example_digest}


@dataclass(frozen=True)
class RagRecordQuarantined(Event):
    kind: ClassVar[str] = "rag.record.quarantined"
    capability_id: str
    reason: str

    def __post_init__(self) -> None:
        ident(self.capability_id, "capability_id")
        text(self.reason, "reason")

    def body(self) -> dict[str, Any]:
        return {"capability_id": self.capability_id, "reason": self.reason}


# --- promotion (promotion gate; maintainers) ---------------------------------


@dataclass(frozen=True)
class PromotionRequested(Event):
    """The promotion gate asks the ledger for a recommendation (`POST /v1/recommendations`)."""

    kind: ClassVar[str] = "promotion.requested"
    task_class: str

    def __post_init__(self) -> None:
        ident(self.task_class, "task_class")

    def body(self) -> dict[str, Any]:
        return {"task_class": self.task_class}


@dataclass(frozen=True)
class TierApply(Event):
    """A request to apply a tier change. The ledger always refuses it
    (`PromotionMustBeHumanAuthorized`) and records the refusal."""

    kind: ClassVar[str] = "tier.apply"
    task_class: str
    to: str

    def __post_init__(self) -> None:
        ident(self.task_class, "task_class")
        one_of(self.to, TIERS, "to")

    def body(self) -> dict[str, Any]:
        return {"task_class": self.task_class, "to": self.to}


@dataclass(frozen=True)
class TierChanged(Event):
    """A human decision, co-signed by two maintainers, citing a recommendation."""

    kind: ClassVar[str] = "tier.changed"
    task_class: str
    from_tier: str
    to_tier: str
    recommendation_index: int
    decided_by: CoSignature
    confirmed_by: CoSignature

    @classmethod
    def cosigned(cls, task_class: str, from_tier: str, to_tier: str, recommendation_index: int, *, decided_by: SigningKey, confirmed_by: SigningKey) -> "TierChanged":
        st = tier_change_statement(task_class, from_tier, to_tier, recommendation_index)
        return cls(task_class, from_tier, to_tier, recommendation_index, CoSignature.sign(decided_by, st), CoSignature.sign(confirmed_by, st))

    def __post_init__(self) -> None:
        ident(self.task_class, "task_class")
        one_of(self.from_tier, TIERS, "from")
        one_of(self.to_tier, TIERS, "to")
        if self.from_tier == self.to_tier:
            raise InvalidInput(_body("to"), "a tier change goes somewhere", "tier_mismatch")
        index(self.recommendation_index, "recommendation_index")
        self.decided_by.check("decided_by")
        self.confirmed_by.check("confirmed_by")
        if self.decided_by.key_id == self.confirmed_by.key_id:
            raise InvalidInput(_body("confirmed_by"), "two different maintainers co-sign", "cosigners_not_distinct")

    def body(self) -> dict[str, Any]:
        return {
            "task_class": self.task_class,
            "from": self.from_tier,
            "to": self.to_tier,
            "recommendation_index": self.recommendation_index,
            "decided_by": self.decided_by.to_json(),
            "confirmed_by": self.confirmed_by.to_json(),
        }


# --- redactions (maintainers) -------------------------------------------------


@dataclass(frozen=True)
class FieldRedacted(Event):
    """Two maintainers destroy the kept disclosure of one committed field of an earlier
    entry (docs/PRIVACY.md): `entry` and its `leaf_hash` (hex), the field's path in its
    body. The entry, its commitment and every proof stay as they were."""

    kind: ClassVar[str] = "field.redacted"
    entry: int
    leaf_hash: str
    field: str
    reason: str
    requested_by: CoSignature
    confirmed_by: CoSignature

    @classmethod
    def cosigned(cls, entry: int, leaf_hash: str, field: str, reason: str, *, requested_by: SigningKey, confirmed_by: SigningKey) -> "FieldRedacted":
        st = field_redact_statement(entry, leaf_hash, field)
        return cls(entry, leaf_hash, field, reason, CoSignature.sign(requested_by, st), CoSignature.sign(confirmed_by, st))

    def __post_init__(self) -> None:
        index(self.entry, "entry")
        if not (isinstance(self.leaf_hash, str) and len(self.leaf_hash) == 64 and all(c in "0123456789abcdef" for c in self.leaf_hash)):
            raise InvalidInput(_body("leaf_hash"), "must be 64 lower-case hex digits", "invalid_value")
        if not isinstance(self.field, str) or not self.field:
            raise InvalidInput(_body("field"), "must be the path of a committed field", "invalid_value")
        text(self.reason, "reason")
        self.requested_by.check("requested_by")
        self.confirmed_by.check("confirmed_by")
        if self.requested_by.key_id == self.confirmed_by.key_id:
            raise InvalidInput(_body("confirmed_by"), "two different maintainers co-sign", "cosigners_not_distinct")

    def body(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "leaf_hash": self.leaf_hash,
            "field": self.field,
            "reason": self.reason,
            "requested_by": self.requested_by.to_json(),
            "confirmed_by": self.confirmed_by.to_json(),
        }


# --- anchors (operator) ------------------------------------------------------


@dataclass(frozen=True)
class AnchorPublished(Event):
    kind: ClassVar[str] = "anchor.published"
    checkpoint: CheckpointRef
    location: str

    def __post_init__(self) -> None:
        self.checkpoint.check("checkpoint")
        text(self.location, "location")

    def body(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint.to_json(), "location": self.location}


# --- state commitments (the ledger) ---------------------------------------------


@dataclass(frozen=True)
class StateCommitted(Event):
    """The ledger's commitment to its projection state (`GET /v1/task-classes/{name}/state`
    appends it): the root of the state tree (`commit.State.root`) its fold of the log
    gives at `checkpoint`, whose size must be this entry's own index. Written by the
    ledger's own key only; here for tools and tests that build logs."""

    kind: ClassVar[str] = "state.committed"
    checkpoint: CheckpointRef
    state_root: str
    task_classes: int

    def __post_init__(self) -> None:
        self.checkpoint.check("checkpoint")
        if not (isinstance(self.state_root, str) and len(self.state_root) == 64 and all(c in "0123456789abcdef" for c in self.state_root)):
            raise InvalidInput(_body("state_root"), "must be 64 lowercase hex digits", "invalid_digest")
        index(self.task_classes, "task_classes")

    def body(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint.to_json(), "state_root": self.state_root, "task_classes": self.task_classes}


#: The kinds a client can write, by wire name. `promotion.recommended`,
#: `promotion.apply_blocked` and `state.committed` are written by the
#: ledger's own key only.
CLIENT_KINDS: dict[str, type[Event]] = {
    c.kind: c
    for c in (
        PrincipalEnrolled, PrincipalRevoked, TaskClassRegistered, RubricUpdated, CaseAdded, CaseRetired,
        CaseProposed, ProposalApproved, ProposalRejected, RunStarted, RunFinished, RubricInvoked,
        RubricCompleted, RubricFailed, ScoreRecorded, CapabilityMinted, RagExampleWritten,
        RagRecordQuarantined, PromotionRequested, TierApply, TierChanged, AnchorPublished, FieldRedacted,
    )
}
