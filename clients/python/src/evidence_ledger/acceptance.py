"""The ledger's acceptance rules, replayed (`events/src/state`, in Python).

The ledger checks every event against these rules before it appends it, in
log order, and its log does not open if one entry breaks them. A replica
that folds a server's log replays them too: an entry the rules refuse
cannot be in an honest log, so finding one disproves the server (a forged
score signed by no enrolled harness, a case without two curators, a score
for a retired case, a second use of an envelope id).

`State.check(leaf, index)` checks one decoded leaf against the state of the
entries before it and raises `RuleBroken` naming the entry, the field and
the server's code; `State.apply` folds it in. Every rule of docs/EVENTS.md
is checked, with these differences (docs/PROJECTIONS.md says why):

- envelope and co-signatures are verified with libsodium (PyNaCl), not
  with `ed25519-dalek`'s `verify_strict`; a key that is not a valid curve
  point is refused only when something it signed is verified;
- a checkpoint an event cites (`rag.capability.minted`, `promotion.recommended`,
  `anchor.published`, `state.committed`) is checked by the caller: `State`
  hands each one to `cite(size, root, what)`, and the replica compares it
  with its own root when it names the log just before the entry (as a
  `state.committed` must), or proves it with a consistency proof against
  the signed root it follows;
- the sequencing time must never decrease along the log (the ledger's clock
  is made monotonic; windows rely on it);
- a `field.redacted` naming an earlier entry that holds no commitment is
  refused as `redaction_field_not_committed` whatever leaf hash it gives
  (the ledger compares that leaf hash first: `redaction_target_mismatch`);
  `State` keeps the leaf hash of the entries that hold commitments only.

Sensitive fields (docs/PRIVACY.md): a schema-2 or schema-3 entry holds each as a
commitment `{"_sd": digest}`, whose form `envelope.decode_leaf` checked
(`disclose.check_form`); its value was checked at the door, when its
disclosure was opened, so the rules check a sensitive value only when it is
in clear. The first schema-2 entry switches the log: a schema-1 entry after
it is refused (`schema_superseded`).

Handles (docs/PRIVACY.md, "Handles"): a schema-3 entry that names a case id,
identity or workflow id first holds beside the identifier its companion,
the value committed, and the identifier must be that commitment's digest
or a handle the log already holds for that class (one a schema-3 entry
gave, or a value in clear from before the switch): `handle_not_derived`
otherwise. The first schema-3 entry switches the log again: a schema-1 or
schema-2 entry after it is refused (`schema_superseded`). That one value
has one handle is checked by the ledger at its door, where it holds the
values (`handle_value_bound`, `handle_value_mismatch`); the rules here,
which read the leaves only, do not check it: a replay with a reader token
checks it again from the disclosures (`handles.Audit`).

Sigstore (docs/SIGSTORE.md): a principal is enrolled by an Ed25519 key or by a
Sigstore identity (SAN and OIDC issuer, `sigstore_principal_id`), never both; one
enrolled by identity holds neither the operator nor the ledger role, signs no
envelope (`unknown_signer`), and co-signs with a Sigstore bundle over
`sigstore_statement(origin, role, statement)`. The bundle is verified offline
against the trusted root the log records at that point (the last
`sigstore.root_trusted` before the entry), every check required, by
`sigstore_check` with sigstore-python, an optional dependency: without it a
log holding a bundle or a root stops the replay at that entry with
`SigstoreUnavailable` (`pip install evidence-ledger[sigstore]`), never
accepting it unverified. Before any cryptography, a bundle must be in the one shape
the ledger accepts (`bundle_profile`: strict JSON of at most 16 KiB, a known media
type, one log entry with its inclusion proof, no field the format does not define),
else `sigstore_bundle_unsupported`. One SAN is one person: a principal enrolled by
Sigstore identity whose SAN (ignoring ASCII case) an active one already holds,
under any issuer, is refused (`principal_exists`), and two co-signers with the same
SAN are not distinct (`cosigners_not_distinct`). A root names the log's origin:
another origin than the one recorded is refused (`sigstore_origin_mismatch`), and
so is, given the log's checkpoint origin (`check(..., origin=...)`, as
`Replica.follow` passes it), a first root naming another (the ledger's door
refuses it).

`tier.apply` is never appended by an honest ledger: one in the log breaks
the rules.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import nacl.exceptions
import nacl.signing

from . import merkle, sigstore_check
from .canonical import MAX_SAFE_INTEGER
from .disclose import SCHEMA_CLEAR, SCHEMA_COMMITTED, SCHEMA_HANDLES, commitments, handle_field, is_commitment
from .envelope import Leaf
from .errors import InvalidInput, RuleBroken, SigstoreUnavailable
from .note import b64decode_strict
from .timefmt import parse_utc_micros


class _Refused(Exception):
    def __init__(self, code: str, field_: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.field = field_
        self.reason = reason


def _no(code: str, f: str, reason: str) -> _Refused:
    return _Refused(code, f, reason)


class _Unverifiable(Exception):
    """A Sigstore bundle or root at `field` that cannot be verified here (no sigstore-python)."""

    def __init__(self, field_: str) -> None:
        super().__init__(field_)
        self.field = field_


TIERS = ("bronze", "silver", "gold")
ROLES = ("harness", "curator", "gate", "rag-writer", "reconciler", "promotion-gate", "maintainer", "operator", "ledger")
DISPOSITIONS = ("positive", "negative", "ambiguous")
SOURCES = ("curated", "outcome-ledger-derived", "regression-converted")
ISOLATIONS = ("microvm", "shared_kernel")
BANNED = ("confidence", "llm", "self_reported", "model_says")
RUBRIC_FAILURE_CODES = (
    "rubric.timeout", "rubric.killed_oom", "rubric.malformed_output", "rubric.unknown_breakdown_key",
    "rubric.unknown_failure_mode", "rubric.crashed", "rubric.sandbox_violation",
)

#: Which kinds each role may append (`Role::may_append`); `tier.apply` is open to all.
MAY_APPEND: Mapping[str, frozenset[str]] = {
    "operator": frozenset({"principal.enrolled", "principal.revoked", "task_class.registered", "rubric.updated", "anchor.published",
                           "sigstore.root_trusted"}),
    "curator": frozenset({"case.added", "case.retired", "proposal.approved", "proposal.rejected"}),
    "reconciler": frozenset({"case.proposed"}),
    "harness": frozenset({"run.started", "run.finished", "rubric.invoked", "rubric.completed", "rubric.failed", "score.recorded"}),
    "gate": frozenset({"rag.capability.minted", "rag.record.quarantined"}),
    "rag-writer": frozenset({"rag.example.written"}),
    "promotion-gate": frozenset({"promotion.requested"}),
    "maintainer": frozenset({"tier.changed", "field.redacted"}),
    "ledger": frozenset({"promotion.recommended", "promotion.apply_blocked", "anchor.published", "state.committed"}),
}

# --- the bodies' schema (events/src/model.rs: every struct refuses unknown fields) ---

S, U32, U64, I64, F64, B = "str", "u32", "u64", "i64", "f64", "bool"
Schema = Any
CHECKPOINT: Schema = {"size": U64, "root": S}
#: The most bootstrap resamples a recommendation may state (`events::model::MAX_RESAMPLES`).
MAX_RESAMPLES = 100_000


class Sensitive:
    """A sensitive field's type (`Sensitive<T>`): a commitment `{"_sd": string}`, or the
    value in clear, of type `clear`."""

    def __init__(self, clear: Schema) -> None:
        self.clear = clear


class Omittable:
    """An optional field (`Option<T>` with `#[serde(default)]` and a present value read
    as `T`): absent, or a value of type `inner`. A present `null` is refused as `inner`
    refuses it (one event, one byte sequence)."""

    def __init__(self, inner: Schema) -> None:
        self.inner = inner


class Nullable(Omittable):
    """An optional field as serde reads a plain `Option<T>` with `#[serde(default)]`:
    absent, `null` (read as absent), or a value of type `inner`. The schema-3
    companions are of this type (`events::model`)."""


TEXT = Sensitive(S)
#: A co-signature: a key's signature over the statement (`signature`; absent: empty), or
#: a Sigstore bundle over its Sigstore form, kept verbatim (`sigstore_bundle`).
COSIG: Schema = {"key_id": S, "signature": Omittable(S), "sigstore_bundle": Omittable(S)}
DISPOSITION = Sensitive(DISPOSITIONS)
#: A schema-3 companion: the value behind a handle (`Option<Sensitive<String>>`).
COMPANION = Nullable(Sensitive(S))
DRAFT: Schema = {"case_id": S, "case_name": COMPANION, "title": TEXT, "disposition": DISPOSITION, "difficulty": TEXT,
                 "curation_class": S, "case_digest": S, "cassette_digest": S}
BODIES: Mapping[str, Schema] = {
    "principal.enrolled": {"public_key": Omittable(S), "sigstore": Omittable({"identity": S, "issuer": S}), "identity": S,
                           "identity_name": COMPANION, "roles": [ROLES]},
    "principal.revoked": {"key_id": S, "reason": TEXT},
    "task_class.registered": {
        "task_class": S,
        "tiers": ("map", TIERS, {"min_cases_for_promotion": U32, "score_threshold": F64}),
        "failure_modes": [{"code": S, "severity": S, "description": S}],
        "breakdown_keys": [S], "rubric_digest": S, "initial_tier": TIERS,
    },
    "rubric.updated": {"task_class": S, "rubric_digest": S},
    "case.added": {
        "task_class": S, "case_id": S, "case_name": COMPANION, "title": TEXT, "disposition": DISPOSITION, "difficulty": TEXT, "curation_class": S,
        "provenance": {"source": SOURCES, "source_ref": TEXT, "added_at": S, "added_by": COSIG, "reviewed_by": COSIG},
        "case_digest": S, "cassette_digest": S,
    },
    "case.retired": {"case_id": S, "reason": TEXT, "retired_by": COSIG, "reviewed_by": COSIG},
    "case.proposed": {"proposal_id": S, "task_class": S, "draft": DRAFT, "production_ref": TEXT},
    "proposal.approved": {"proposal_id": S, "added_at": S, "added_by": COSIG, "reviewed_by": COSIG},
    "proposal.rejected": {"proposal_id": S, "reason": TEXT},
    "run.started": {"run_id": S, "task_class": S, "harness_version": S, "rubric_digest": S, "sandbox_image_digest": S,
                    "isolation_class": ISOLATIONS},
    "run.finished": {"run_id": S},
    "rubric.invoked": {"run_id": S, "case_id": S, "invocation_id": S},
    "rubric.completed": {"invocation_id": S},
    "rubric.failed": {"invocation_id": S, "failure_code": S},
    "score.recorded": {
        "run_id": S, "task_class": S, "case_id": S, "case_digest": S, "rubric_digest": S, "cassette_digest": S,
        "harness_version": S, "image_digest": S,
        "score": {"passed": B, "score": F64, "breakdown": ("map", None, F64), "failure_modes": [{"code": S, "severity": S}],
                  "cost_usd": F64, "duration_seconds": F64},
        "started_at": S, "finished_at": S, "operator_fingerprint": TEXT,
    },
    "rag.capability.minted": {"capability_id": S, "workflow_id": S, "workflow_name": COMPANION, "validated_at": S, "minted_at": CHECKPOINT, "expires_at": S},
    "rag.example.written": {"capability_id": S, "workflow_id": S, "example_digest": S},
    "rag.record.quarantined": {"capability_id": S, "reason": TEXT},
    "promotion.requested": {"task_class": S},
    "promotion.recommended": {
        "task_class": S, "current_tier": TIERS, "recommended_tier": TIERS,
        "evidence": [{"index": U64, "leaf_hash": S}], "evidence_tree": Omittable({"count": U64, "root": S}),
        "settings": Omittable({"window_seconds": I64, "confidence": F64, "resamples": U64}),
        "rationale": [{"rule": S, "holds": B, "detail": S}], "checkpoint": CHECKPOINT, "requires_human_approval": B, "request_id": S,
    },
    "tier.apply": {"task_class": S, "to": TIERS},
    "promotion.apply_blocked": {"task_class": S, "requested_tier": TIERS, "requested_by": S, "request_id": S, "code": S},
    "tier.changed": {"task_class": S, "from": TIERS, "to": TIERS, "recommendation_index": U64,
                     "decided_by": COSIG, "confirmed_by": COSIG},
    "anchor.published": {"checkpoint": CHECKPOINT, "location": S},
    "state.committed": {"checkpoint": CHECKPOINT, "state_root": S, "task_classes": U64},
    "field.redacted": {"entry": U64, "leaf_hash": S, "field": S, "reason": TEXT,
                       "requested_by": COSIG, "confirmed_by": COSIG},
    "sigstore.root_trusted": {"origin": S, "trusted_root": S},
}


def _typed(v: Any, schema: Schema, path: str) -> None:
    """Raises `_Refused` unless `v` has the type `schema` describes (serde's view of it)."""
    if isinstance(schema, Nullable):
        # Present: `null` (read as absent) or a value of the inner type.
        if v is not None:
            _typed(v, schema.inner, path)
    elif isinstance(schema, Omittable):
        # Present: a value of the inner type, never `null` (the caller skips it when absent).
        _typed(v, schema.inner, path)
    elif isinstance(schema, Sensitive):
        if isinstance(v, dict):
            if not is_commitment(v):
                raise _no("invalid_type", path, 'must be a commitment {"_sd": digest} or the value')
        else:
            _typed(v, schema.clear, path)
    elif isinstance(schema, dict):
        if not isinstance(v, dict):
            raise _no("invalid_type", path, "must be an object")
        for k in v:
            if k not in schema:
                raise _no("unknown_field", f"{path}.{k}", "unknown field")
        for k, sub in schema.items():
            if k in v:
                _typed(v[k], sub, f"{path}.{k}")
            elif not isinstance(sub, Omittable):
                raise _no("missing_field", f"{path}.{k}", "missing")
    elif isinstance(schema, list):
        if not isinstance(v, list):
            raise _no("invalid_type", path, "must be a list")
        for i, item in enumerate(v):
            _typed(item, schema[0], f"{path}[{i}]")
    elif isinstance(schema, tuple) and schema and schema[0] == "map":
        _, keys, sub = schema
        if not isinstance(v, dict):
            raise _no("invalid_type", path, "must be an object")
        for k, item in v.items():
            if keys is not None and k not in keys:
                raise _no("invalid_value", f"{path}.{k}", "not a known key")
            _typed(item, sub, f"{path}.{k}")
    elif isinstance(schema, tuple):
        if not isinstance(v, str) or v not in schema:
            raise _no("invalid_value", path, f"must be one of {', '.join(schema)}")
    elif schema == S:
        if not isinstance(v, str):
            raise _no("invalid_type", path, "must be a string")
    elif schema == B:
        if not isinstance(v, bool):
            raise _no("invalid_type", path, "must be a boolean")
    elif schema in (U32, U64, I64):
        low, top = (-(2**63), 2**63 - 1) if schema == I64 else (0, 2**32 - 1 if schema == U32 else 2**64 - 1)
        # serde: another type is `invalid type`, an integer out of range `invalid value`.
        if isinstance(v, bool) or not isinstance(v, int):
            raise _no("invalid_type", path, f"must be an integer in {low}..={top}")
        if not low <= v <= top:
            raise _no("invalid_value", path, f"must be an integer in {low}..={top}")
    elif schema == F64:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _no("invalid_type", path, "must be a number")


# --- field formats (events/src/state/mod.rs) ----------------------------------------


def _body(f: str) -> str:
    return f"event.body.{f}"


def _ident(s: str, f: str) -> None:
    if not (0 < len(s) <= 128 and all(c.isascii() and (c.isalnum() or c in "._:/@+-") for c in s)):
        raise _no("invalid_identifier", _body(f), "must be 1–128 characters from [A-Za-z0-9._:/@+-]")


def _text(s: str, f: str) -> None:
    if not s.strip() or len(s) > 4096 or any(unicodedata.category(c) == "Cc" for c in s):
        raise _no("invalid_text", _body(f), "must be 1–4096 characters with no control characters")


def _sensitive_text(v: Any, f: str) -> None:
    """A sensitive text field: checked when in clear. A commitment's value was checked
    at the door, when its disclosure was opened."""
    if isinstance(v, str):
        _text(v, f)


def _digest(s: str, f: str) -> None:
    for p in ("blake3:", "sha256:"):
        h = s[len(p):]
        if s.startswith(p) and len(h) == 64 and all(c in "0123456789abcdef" for c in h):
            return
    raise _no("invalid_digest", _body(f), "must be blake3:<64 lower-case hex> or sha256:<64 lower-case hex>")


def _timestamp(s: str, f: str) -> int:
    t = parse_utc_micros(s)
    if t is None:
        raise _no("invalid_timestamp", _body(f), "must be RFC 3339 in UTC (ending in Z)")
    return t


def _key_id_format(s: str, f: str) -> None:
    if not (len(s) == 64 and all(c in "0123456789abcdef" for c in s)):
        raise _no("invalid_identifier", _body(f), "a key id is 64 lower-case hex digits")


def _severity(s: str, f: str) -> None:
    if s not in ("block", "warn", "info"):
        raise _no("severity_invalid", _body(f), f"`{s}` is not one of block, warn, info")


def _banned(k: str, f: str) -> None:
    lower = k.lower()
    for b in BANNED:
        if b in lower:
            raise _no("breakdown_key_banned", _body(f), f"breakdown keys may not contain `{b}`")


def _public_key(s: str) -> Optional[bytes]:
    try:
        raw = b64decode_strict("public_key", s)
    except InvalidInput:
        return None
    return raw if len(raw) == 32 else None


def _key_id(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _verifies(public_key: bytes, message: bytes, signature: bytes) -> bool:
    try:
        nacl.signing.VerifyKey(public_key).verify(message, signature)
        return True
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.CryptoError, ValueError, TypeError):
        return False


def case_provenance_statement(case_id: str, added_at: str, case_digest: str) -> bytes:
    return f"evidence-ledger/v1 case-provenance\n{case_id}\n{added_at}\n{case_digest}".encode()


def case_retire_statement(case_id: str, case_digest: str) -> bytes:
    return f"evidence-ledger/v1 case-retire\n{case_id}\n{case_digest}".encode()


def tier_change_statement(task_class: str, from_tier: str, to_tier: str, index: int) -> bytes:
    return f"evidence-ledger/v1 tier-change\n{task_class}\n{from_tier}\n{to_tier}\n{index}".encode()


def field_redact_statement(entry: int, leaf_hash: str, field_: str) -> bytes:
    return f"evidence-ledger/v1 field-redact\n{entry}\n{leaf_hash}\n{field_}".encode()


def sigstore_principal_id(identity: str, issuer: str) -> str:
    """The key id of a principal enrolled by Sigstore identity: hex SHA-256 of
    `evidence-ledger/v1 sigstore-principal\n{issuer}\n{identity}` (`events::sigstore_principal_id`)."""
    return hashlib.sha256(f"evidence-ledger/v1 sigstore-principal\n{issuer}\n{identity}".encode()).hexdigest()


def sigstore_statement(origin: str, role: str, statement: bytes) -> bytes:
    """What a principal enrolled by Sigstore identity signs for the co-signed `statement`:
    the statement prefixed with the log's origin and the role it is signed in, so that a
    bundle (public in Sigstore's log) is never good for another log, role or event
    (`events::sigstore_statement`)."""
    return f"evidence-ledger/v1 sigstore-cosign\n{origin}\n{role}\n".encode() + statement


def _sigstore_identity(s: Mapping[str, str]) -> None:
    """A Sigstore identity as enrolled: an e-mail address or an `https://` URI of
    printable characters, and an `https://` issuer (`principals::sigstore_identity`)."""

    def ok(v: str) -> bool:
        return 0 < len(v) <= 512 and all("!" <= c <= "~" for c in v)

    if not ok(s["identity"]) or not ("@" in s["identity"] or s["identity"].startswith("https://")):
        raise _no("invalid_value", _body("sigstore.identity"), "an e-mail address or an https:// URI, as the certificate's SAN names it")
    if not ok(s["issuer"]) or not s["issuer"].startswith("https://"):
        raise _no("invalid_value", _body("sigstore.issuer"), "the OIDC issuer's https:// URL, as the certificate names it")


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _ascii_lower(s: str) -> str:
    """`s` with ASCII letters lower-cased, nothing else changed (`str::to_ascii_lowercase`)."""
    return s.translate(_ASCII_LOWER)


def _san(p: Mapping[str, Any]) -> Optional[str]:
    """The SAN a principal enrolled by Sigstore identity signs as, compared without regard
    to ASCII case (e-mail addresses are matched so by the issuers); None for one enrolled
    by key (`principals::san`)."""
    s = p.get("sigstore")
    return None if s is None else _ascii_lower(s["identity"])


#: The most bytes (UTF-8) a co-signature's bundle may hold: a bundle with one certificate
#: and one log entry is 4 to 6 KiB (`principals::MAX_BUNDLE_BYTES`).
MAX_BUNDLE_BYTES = 16 * 1024

_BUNDLE_MEDIA = (
    "application/vnd.dev.sigstore.bundle+json;version=0.1",
    "application/vnd.dev.sigstore.bundle+json;version=0.2",
    "application/vnd.dev.sigstore.bundle.v0.3+json",
)
_U64_MAX = (1 << 64) - 1
#: serde_json's nesting limit: the 128th nested array or object is refused.
_JSON_DEPTH = 128


class _OutOfProfile(Exception):
    pass


def _json_float(text: str) -> float:
    x = float(text)
    if math.isinf(x):
        raise _OutOfProfile(f"not strict JSON: number out of range: {text[:40]}")
    return x


def _json_int(text: str) -> Any:
    """An integer literal as serde_json reads it and `canonical::parse_strict` checks it: a
    magnitude beyond u64 is a float (refused if infinite); a negative one beyond 2^63 a
    float; any other beyond ±(2^53 − 1) refused (integer precision)."""
    digits = text[1:] if text.startswith("-") else text
    if len(digits) > 20 or int(digits) > _U64_MAX:
        return _json_float(text)
    n = int(digits)
    if not text.startswith("-"):
        if n > MAX_SAFE_INTEGER:
            raise _OutOfProfile(f"not strict JSON: integer precision {text}")
        return n
    if n == 0 or n > 1 << 63:  # (n as i64).wrapping_neg() >= 0: serde_json reads a float
        return -float(n)
    if n > MAX_SAFE_INTEGER:
        raise _OutOfProfile(f"not strict JSON: integer precision {text}")
    return -n


def _json_constant(text: str) -> Any:
    raise _OutOfProfile(f"not strict JSON: {text} is not JSON")


def _json_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _OutOfProfile(f"not strict JSON: duplicate key {k!r}")
        out[k] = v
    return out


def _parse_strict_bundle(bundle: str) -> Any:
    """`bundle` read as `canonical::parse_strict` reads its UTF-8 bytes (serde_json, then
    the ledger's checks): no repeated key, no integer beyond ±(2^53 − 1) (as serde_json
    reads integer literals), no NaN or infinity, no trailing data, no lone surrogate
    escape, nesting under serde_json's limit."""
    try:
        v = json.loads(bundle, object_pairs_hook=_json_pairs, parse_int=_json_int,
                       parse_float=_json_float, parse_constant=_json_constant)
    except (ValueError, RecursionError) as e:
        raise _OutOfProfile(f"not strict JSON: {e}") from None
    stack: list[tuple[Any, int]] = [(v, 0)]
    while stack:
        x, depth = stack.pop()
        strings: list[str] = []
        if isinstance(x, str):
            strings.append(x)
        elif isinstance(x, (list, dict)):
            if depth + 1 >= _JSON_DEPTH:
                raise _OutOfProfile("not strict JSON: recursion limit exceeded")
            if isinstance(x, dict):
                strings.extend(x)
                stack.extend((y, depth + 1) for y in x.values())
            else:
                stack.extend((y, depth + 1) for y in x)
        if any("\ud800" <= c <= "\udfff" for t in strings for c in t):
            raise _OutOfProfile("not strict JSON: lone surrogate in hex escape")
    return v


def _keys(v: Any, path: str, allowed: tuple[str, ...]) -> None:
    if not isinstance(v, dict):
        raise _OutOfProfile(f"`{path}` is not an object")
    for k in sorted(v):  # serde_json's map is sorted: the same first offender
        if k not in allowed:
            raise _OutOfProfile(f"`{path}.{k}` is not a field of this profile")


def _array(v: Any, path: str, least: int, most: int) -> list[Any]:
    if not isinstance(v, list):
        raise _OutOfProfile(f"`{path}` is not an array")
    if not least <= len(v) <= most:
        raise _OutOfProfile(f"`{path}` holds {len(v)} items, not {least} to {most}")
    return v


def _at(v: Any, k: str) -> Any:
    """`v[k]` as serde_json indexes: a missing key (or a non-object) is null."""
    return v.get(k) if isinstance(v, dict) else None


_MISSING = object()


def bundle_profile(bundle: str) -> Optional[str]:
    """Why `bundle` is outside the one shape of bundle a co-signature may have, or None
    (`principals::bundle_profile`), checked before any cryptography: JSON without repeated
    keys, at most `MAX_BUNDLE_BYTES`, a known media type, a message signature, a Fulcio
    certificate (or chain), exactly one transparency-log entry with its inclusion proof,
    and no field the Sigstore bundle format does not define. The bundle's JSON is not
    covered by its signatures: whoever posts it could otherwise pad a genuine bundle with
    what one verifier ignores and another refuses."""
    try:
        _bundle_profile(bundle)
    except _OutOfProfile as e:
        return str(e)
    return None


def _bundle_profile(bundle: str) -> None:
    try:
        size = len(bundle.encode("utf-8"))
    except UnicodeEncodeError:
        raise _OutOfProfile("not strict JSON: not valid Unicode") from None
    if size > MAX_BUNDLE_BYTES:
        raise _OutOfProfile(f"more than {MAX_BUNDLE_BYTES} bytes")
    v = _parse_strict_bundle(bundle)
    _keys(v, "", ("mediaType", "verificationMaterial", "messageSignature"))
    media = _at(v, "mediaType")
    if not (isinstance(media, str) and media in _BUNDLE_MEDIA):
        raise _OutOfProfile("`mediaType` is not a bundle version 0.1 to 0.3")
    m = _at(v, "verificationMaterial")
    _keys(m, "verificationMaterial", ("certificate", "x509CertificateChain", "tlogEntries", "timestampVerificationData"))
    cert, chain = m.get("certificate", _MISSING), m.get("x509CertificateChain", _MISSING)
    if cert is not _MISSING and chain is _MISSING:
        _keys(cert, "verificationMaterial.certificate", ("rawBytes",))
    elif cert is _MISSING and chain is not _MISSING:
        _keys(chain, "verificationMaterial.x509CertificateChain", ("certificates",))
        for i, c in enumerate(_array(_at(chain, "certificates"), "x509CertificateChain.certificates", 1, 3)):
            _keys(c, f"x509CertificateChain.certificates[{i}]", ("rawBytes",))
    else:
        raise _OutOfProfile("not exactly one of `certificate`, `x509CertificateChain`")
    if "timestampVerificationData" in m:
        t = m["timestampVerificationData"]
        _keys(t, "timestampVerificationData", ("rfc3161Timestamps",))
        for i, stamp in enumerate(_array(_at(t, "rfc3161Timestamps"), "rfc3161Timestamps", 0, 2)):
            _keys(stamp, f"rfc3161Timestamps[{i}]", ("signedTimestamp",))
    e = _array(_at(m, "tlogEntries"), "tlogEntries", 1, 1)[0]
    _keys(e, "tlogEntries[0]", ("logIndex", "logId", "kindVersion", "integratedTime", "inclusionPromise",
                                "inclusionProof", "canonicalizedBody"))
    _keys(_at(e, "logId"), "tlogEntries[0].logId", ("keyId",))
    _keys(_at(e, "kindVersion"), "tlogEntries[0].kindVersion", ("kind", "version"))
    if "inclusionPromise" in e:
        _keys(e["inclusionPromise"], "tlogEntries[0].inclusionPromise", ("signedEntryTimestamp",))
    if "inclusionProof" not in e:
        raise _OutOfProfile("the log entry has no inclusion proof")
    p = e["inclusionProof"]
    _keys(p, "tlogEntries[0].inclusionProof", ("logIndex", "rootHash", "treeSize", "hashes", "checkpoint"))
    _keys(_at(p, "checkpoint"), "inclusionProof.checkpoint", ("envelope",))
    s = _at(v, "messageSignature")
    _keys(s, "messageSignature", ("messageDigest", "signature"))
    _keys(_at(s, "messageDigest"), "messageSignature.messageDigest", ("algorithm", "digest"))


#: Called for each checkpoint an event cites: (size, root hex, field).
Cite = Callable[[int, str, str], None]


@dataclass
class State:
    """What the log has established that decides whether the next entry is allowed."""

    #: key id -> {public_key (hex; None for a principal enrolled by Sigstore identity),
    #: identity, roles, revoked, and sigstore ({identity, issuer}) for one enrolled by it}
    principals: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: name -> {registration (body), rubric_digest, tier}
    task_classes: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: case id -> {task_class, case_digest, cassette_digest, curation_class, active}
    cases: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: proposal id -> {task_class, draft, status}
    proposals: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: run id -> {task_class, isolation, finished}
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: invocation id -> open
    invocations: dict[str, bool] = field(default_factory=dict)
    #: capability id -> {workflow_id, expires_at, spent_at, quarantined}
    capabilities: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: index -> [task_class, from, to]
    recommendations: dict[int, list[str]] = field(default_factory=dict)
    #: Every envelope id in the log.
    ids: set[str] = field(default_factory=set)
    size: int = 0
    last_sequenced_at: Optional[int] = None
    #: The first schema-2 (or later) entry (None while the log holds only schema 1):
    #: from it on, the log accepts no schema 1.
    commitments_from: Optional[int] = None
    #: The first schema-3 entry (None while the log holds none): from it on, the log
    #: accepts only schema 3, and case ids, identities and workflow ids are handles.
    handles_from: Optional[int] = None
    #: Every handle a schema-3 entry gave, by class and handle (`case/…`, `identity/…`,
    #: `workflow/…`): the entry that gave it (`State::handles` in Rust).
    handles: dict[str, int] = field(default_factory=dict)
    #: index -> [leaf hash (hex), [committed field paths]], for each entry holding commitments.
    committed: dict[int, list[Any]] = field(default_factory=dict)
    #: Every redacted field: (entry index, field path).
    redactions: set[tuple[int, str]] = field(default_factory=set)
    #: The Sigstore trust the log records (`sigstore.root_trusted`): {origin, trusted_root
    #: (its JSON, verbatim), since (the entry that recorded it)}; None before the first.
    sigstore: Optional[dict[str, Any]] = None

    # --- signers and co-signers ---------------------------------------------------

    def _check_signer(self, leaf: Leaf) -> None:
        kind, keyid = leaf.kind, leaf.envelope.keyid
        if not self.principals:
            body = leaf.body
            raw = _public_key(body.get("public_key", "")) if kind == "principal.enrolled" else None
            if raw is None or "operator" not in body.get("roles", []) or _key_id(raw) != keyid:
                raise _no("genesis_required", "event",
                          "the first event must be the operator enrolling its own key with the operator role")
            if not leaf.envelope.verify(raw):
                raise _no("signature_invalid", "signatures[0].sig", "does not verify with the signer's key")
            return
        p = self.principals.get(keyid)
        if p is None:
            raise _no("unknown_signer", "signer", "no enrolled principal has this key id")
        if p.get("public_key") is None:
            raise _no("unknown_signer", "signer",
                      "this principal is enrolled by Sigstore identity: it co-signs with bundles and signs no envelope")
        if not leaf.envelope.verify(bytes.fromhex(p["public_key"])):
            raise _no("signature_invalid", "signatures[0].sig", "does not verify with the signer's enrolled key")
        if p["revoked"]:
            raise _no("signer_revoked", "signer", "this key has been revoked and may write nothing")
        if kind != "tier.apply" and not any(kind in MAY_APPEND.get(r, frozenset()) for r in p["roles"]):
            raise _no("role_not_permitted", "event.kind", f"roles [{', '.join(p['roles'])}] may not append {kind}")

    def _check_cosigners(self, pair: list[tuple[Mapping[str, str], str]], role: str, statement: bytes) -> None:
        identities: list[tuple[str, str, Optional[str]]] = []
        for cs, f in pair:
            _key_id_format(cs["key_id"], f"{f}.key_id")
            p = self.principals.get(cs["key_id"])
            if p is None:
                raise _no("cosigner_unknown", _body(f"{f}.key_id"), "no enrolled principal has this key id")
            if p["revoked"]:
                raise _no("cosigner_revoked", _body(f"{f}.key_id"), "this co-signer's key has been revoked")
            if role not in p["roles"]:
                raise _no("cosigner_not_permitted", _body(f"{f}.key_id"), f"co-signer must have the {role} role")
            public_key, sigstore, bundle = p.get("public_key"), p.get("sigstore"), cs.get("sigstore_bundle")
            if public_key is None and sigstore is not None and bundle is not None:
                if cs.get("signature", ""):
                    raise _no("invalid_value", _body(f"{f}.signature"),
                              "a co-signature by Sigstore identity carries its bundle and no signature")
                self._check_bundle(bundle, sigstore, role, statement, f)
                identities.append((cs["key_id"], p["identity"], _san(p)))
                continue
            if public_key is not None and bundle is not None:
                raise _no("cosignature_invalid", _body(f"{f}.sigstore_bundle"),
                          "this co-signer is enrolled by key: it signs the statement with that key")
            if public_key is None and bundle is None:
                raise _no("cosignature_invalid", _body(f"{f}.sigstore_bundle"),
                          "this co-signer is enrolled by Sigstore identity: a Sigstore bundle over the statement is required")
            if public_key is None:
                raise _no("cosigner_unknown", _body(f"{f}.key_id"), "the enrolled principal has neither a key nor a Sigstore identity")
            try:
                sig = b64decode_strict(f, cs.get("signature", ""))
            except InvalidInput:
                sig = b""
            if len(sig) != 64:
                raise _no("malformed_base64", _body(f"{f}.signature"), "not base64 of 64 bytes")
            if not _verifies(bytes.fromhex(public_key), statement, sig):
                raise _no("cosignature_invalid", _body(f"{f}.signature"), "does not verify over the statement")
            identities.append((cs["key_id"], p["identity"], _san(p)))
        a, b = identities
        if a[0] == b[0] or a[1] == b[1] or (a[2] is not None and a[2] == b[2]):
            raise _no("cosigners_not_distinct", _body(pair[1][1]),
                      "the two co-signers must be different principals with different identities (and, by Sigstore "
                      "identity, different SANs whatever their issuers)")

    def _check_bundle(self, bundle: str, signer: Mapping[str, str], role: str, statement: bytes, f: str) -> None:
        """A Sigstore bundle by `signer` over the Sigstore form of `statement`, verified
        offline against the trusted root this log records now, every check required."""
        at = _body(f"{f}.sigstore_bundle")
        if self.sigstore is None:
            raise _no("sigstore_root_missing", at, "no Sigstore trusted root is recorded in this log (sigstore.root_trusted)")
        why = bundle_profile(bundle)
        if why is not None:
            raise _no("sigstore_bundle_unsupported", at, f"outside the profile this ledger accepts (docs/SIGSTORE.md): {why}")
        message = sigstore_statement(self.sigstore["origin"], role, statement)
        try:
            sigstore_check.verify_message(bundle, message, signer["identity"], signer["issuer"], self.sigstore["trusted_root"])
        except sigstore_check.Refusal as r:
            raise _no(r.code, at, r.detail) from None
        except SigstoreUnavailable:
            raise _Unverifiable(at) from None

    # --- schemas and handles --------------------------------------------------------

    def schema(self) -> int:
        """The schema this log accepts now: 1 until its first schema-2 entry, 2 from then
        on until its first schema-3 entry, 3 from then on (`State::schema`)."""
        if self.handles_from is not None:
            return SCHEMA_HANDLES
        return SCHEMA_CLEAR if self.commitments_from is None else SCHEMA_COMMITTED

    def handle_origin(self, class_: str, handle: str) -> Optional[int]:
        """The entry that gave `handle` of `class_` (`case`, `identity`, `workflow`), when a
        schema-3 entry did."""
        return self.handles.get(f"{class_}/{handle}")

    def handle_known(self, class_: str, handle: str) -> bool:
        """`handle` is an identifier of `class_` this log already holds: given by a
        schema-3 entry, or a value in clear from before the log's switch to schema 3."""
        if self.handle_origin(class_, handle) is not None:
            return True
        if class_ == "case":
            return handle in self.cases or any(p["draft"]["case_id"] == handle for p in self.proposals.values())
        if class_ == "identity":
            return any(p["identity"] == handle for p in self.principals.values())
        if class_ == "workflow":
            return any(c["workflow_id"] == handle for c in self.capabilities.values())
        return False

    def _check_handle(self, leaf: Leaf) -> None:
        """From schema 3: the identifier that names a sensitive value where it is first
        named is the digest of the commitment beside it (a value named here first) or a
        handle this log already holds for its class (the same value again: the ledger
        checks at its door that it is)."""
        h = handle_field(leaf.kind, leaf.body)
        if h is None or leaf.payload["schema"] < SCHEMA_HANDLES or h.derived or self.handle_known(h.class_, h.handle):
            return
        raise _no(
            "handle_not_derived",
            _body(h.spec.handle_path),
            f"must be the digest `{h.spec.name_path}._sd` beside it, or the handle an earlier event gave the same "
            f'{h.class_} (docs/PRIVACY.md, "Handles")',
        )

    # --- lookups ------------------------------------------------------------------

    def _task_class(self, name: str) -> dict[str, Any]:
        tc = self.task_classes.get(name)
        if tc is None:
            raise _no("task_class_unknown", _body("task_class"), f"task class `{name}` is not registered")
        return tc

    def _pending_case(self, case_id: str) -> bool:
        return any(p["draft"]["case_id"] == case_id and p["status"] == "pending" for p in self.proposals.values())

    def _active_case(self, case_id: str, f: str) -> dict[str, Any]:
        c = self.cases.get(case_id)
        if c is not None:
            if not c["active"]:
                raise _no("case_not_active", _body(f), "the case is retired")
            return c
        if self._pending_case(case_id):
            raise _no("case_pending", _body(f), "the case is a pending proposal; it is never scored until approved")
        raise _no("case_unknown", _body(f), "no such case")

    def _case_id_free(self, case_id: str, f: str) -> None:
        if case_id in self.cases or self._pending_case(case_id):
            raise _no("case_exists", _body(f), f"case id `{case_id}` is already used")

    def _pending_proposal(self, pid: str) -> dict[str, Any]:
        p = self.proposals.get(pid)
        if p is None:
            raise _no("proposal_unknown", _body("proposal_id"), "no such proposal")
        if p["status"] != "pending":
            raise _no("proposal_not_pending", _body("proposal_id"), "already approved or rejected")
        return p

    def _open_run(self, run_id: str) -> dict[str, Any]:
        r = self.runs.get(run_id)
        if r is None:
            raise _no("run_unknown", _body("run_id"), "no such run")
        if r["finished"]:
            raise _no("run_finished", _body("run_id"), "the run has finished")
        return r

    def _open_invocation(self, inv: str) -> None:
        if not self.invocations.get(inv, False):
            raise _no("invocation_unknown", _body("invocation_id"), "no open invocation has this id")

    # --- the rules ----------------------------------------------------------------

    def check(self, leaf: Leaf, index: int, cite: Cite, origin: Optional[str] = None) -> None:
        """Raises `RuleBroken` unless the ledger's rules accept `leaf` as entry `index`
        after the entries folded so far. `origin`, the log's checkpoint origin when the
        caller knows it, is what a `sigstore.root_trusted` must name (the ledger's door
        refuses another). An entry holding a Sigstore bundle or root raises
        `SigstoreUnavailable` when sigstore-python is not installed: it is not accepted
        unverified."""
        try:
            self._check(leaf, index, cite, origin)
        except _Refused as r:
            raise RuleBroken(index, r.code, r.field, r.reason) from None
        except _Unverifiable as u:
            raise SigstoreUnavailable(f"entry {index}: {u.field}", index, u.field) from None

    def _check(self, leaf: Leaf, index: int, cite: Cite, origin: Optional[str] = None) -> None:
        if index != self.size:
            raise _no("out_of_order", "index", f"the rules have seen {self.size} entries")
        if self.last_sequenced_at is not None and leaf.sequenced_at < self.last_sequenced_at:
            raise _no("sequenced_at_decreased", "sequenced_at", "the ledger's sequencing time went back")
        p, kind, b = leaf.payload, leaf.kind, leaf.body
        schema = BODIES.get(kind)
        if schema is None:
            raise _no("unknown_event_kind", "event.kind", f"`{kind}` is not an event kind")
        _typed(b, schema, "event.body")
        if kind == "sigstore.root_trusted" and origin is not None and b["origin"] != origin:
            # The ledger's door (`EventLog::checked`), before any rule.
            raise _no("sigstore_origin_mismatch", _body("origin"), f"this log's origin is {json.dumps(origin)}")
        if p["schema"] < self.schema():
            if self.handles_from is not None:
                since, what = self.handles_from, "identifiers that name sensitive values only as handles"
            else:
                since, what = self.commitments_from or 0, "sensitive values only as commitments"
            raise _no("schema_superseded", "schema",
                      f"this log holds {what} from entry {since} on: sign schema {self.schema()} (docs/PRIVACY.md)")
        eid = p["id"]
        if len(eid) < 8 or not (len(eid) <= 128 and all(c.isascii() and (c.isalnum() or c in "._:/@+-") for c in eid)):
            raise _no("invalid_identifier", "id", "the envelope id must be 8–128 characters from [A-Za-z0-9._:/@+-]")
        if parse_utc_micros(p["issued_at"]) is None:
            raise _no("invalid_timestamp", "issued_at", "must be RFC 3339 in UTC (ending in Z)")
        self._check_signer(leaf)
        if eid in self.ids:
            raise _no("envelope_id_reused", "id", "an envelope id appears twice in the log")
        self._check_handle(leaf)
        getattr(self, "_check_" + kind.replace(".", "_"))(b, leaf.sequenced_at, index, cite)

    def _check_principal_enrolled(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        sigstore, public_key = b.get("sigstore"), b.get("public_key", "")
        if sigstore is None:
            raw = _public_key(public_key)
            if raw is None:
                raise _no("invalid_value", _body("public_key"), "not base64 of a valid 32-byte Ed25519 public key")
            pid = _key_id(raw)
        elif public_key == "":
            _sigstore_identity(sigstore)
            if "operator" in b["roles"] or "ledger" in b["roles"]:
                raise _no("invalid_value", _body("roles"),
                          "a principal enrolled by Sigstore identity signs no envelope: the operator and ledger roles need a key")
            pid = sigstore_principal_id(sigstore["identity"], sigstore["issuer"])
        else:
            raise _no("invalid_value", _body("sigstore"), "a principal is enrolled by a key or by a Sigstore identity, not both")
        _text(b["identity"], "identity")
        if not b["roles"]:
            raise _no("invalid_value", _body("roles"), "at least one role is required")
        if sigstore is not None:
            wanted = _ascii_lower(sigstore["identity"])
            other = next((p for p in self.principals.values() if not p["revoked"] and _san(p) == wanted), None)
            if other is not None:
                raise _no("principal_exists", _body("sigstore.identity"),
                          f"this SAN is already enrolled (issuer {other['sigstore']['issuer']}): one person, one principal, "
                          "whichever issuer vouches")
        if pid in self.principals:
            raise _no("principal_exists", _body("sigstore" if sigstore is not None else "public_key"),
                      "this key or Sigstore identity is already enrolled")

    def _check_principal_revoked(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        _key_id_format(b["key_id"], "key_id")
        _sensitive_text(b["reason"], "reason")
        p = self.principals.get(b["key_id"])
        if p is None or p["revoked"]:
            raise _no("principal_unknown", _body("key_id"), "no active principal has this key id")

    def _check_task_class_registered(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        _ident(b["task_class"], "task_class")
        if b["task_class"] in self.task_classes:
            raise _no("task_class_exists", _body("task_class"), "already registered")
        tiers = b["tiers"]
        s, g = tiers.get("silver"), tiers.get("gold")
        if s is None or g is None:
            raise _no("tier_rules_invalid", _body("tiers"), "rules for silver and gold are required")
        if "bronze" in tiers:
            raise _no("tier_rules_invalid", _body("tiers.bronze"), "bronze is the floor and has no promotion rule")
        for t, r in (("silver", s), ("gold", g)):
            thr = float(r["score_threshold"])
            if not (math.isfinite(thr) and 0.0 <= thr <= 1.0):
                raise _no("tier_rules_invalid", _body(f"tiers.{t}.score_threshold"), "must be within [0, 1]")
            if r["min_cases_for_promotion"] == 0:
                raise _no("tier_rules_invalid", _body(f"tiers.{t}.min_cases_for_promotion"), "must be at least 1")
        if g["min_cases_for_promotion"] < s["min_cases_for_promotion"] or float(g["score_threshold"]) < float(s["score_threshold"]):
            raise _no("tier_rules_invalid", _body("tiers.gold"), "gold's rules must be at least as strict as silver's")
        codes: set[str] = set()
        for i, f in enumerate(b["failure_modes"]):
            _ident(f["code"], f"failure_modes[{i}].code")
            _severity(f["severity"], f"failure_modes[{i}].severity")
            _text(f["description"], f"failure_modes[{i}].description")
            if f["code"] in codes:
                raise _no("invalid_value", _body(f"failure_modes[{i}].code"), "failure mode codes must be unique")
            codes.add(f["code"])
        for i, k in enumerate(b["breakdown_keys"]):
            _ident(k, f"breakdown_keys[{i}]")
            _banned(k, f"breakdown_keys[{i}]")
        _digest(b["rubric_digest"], "rubric_digest")

    def _check_rubric_updated(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        self._task_class(b["task_class"])
        _digest(b["rubric_digest"], "rubric_digest")

    def _check_case_added(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        self._task_class(b["task_class"])
        _ident(b["case_id"], "case_id")
        self._case_id_free(b["case_id"], "case_id")
        _sensitive_text(b["title"], "title")
        _sensitive_text(b["difficulty"], "difficulty")
        _ident(b["curation_class"], "curation_class")
        _digest(b["case_digest"], "case_digest")
        _digest(b["cassette_digest"], "cassette_digest")
        pv = b["provenance"]
        _sensitive_text(pv["source_ref"], "provenance.source_ref")
        _timestamp(pv["added_at"], "provenance.added_at")
        st = case_provenance_statement(b["case_id"], pv["added_at"], b["case_digest"])
        self._check_cosigners([(pv["added_by"], "provenance.added_by"), (pv["reviewed_by"], "provenance.reviewed_by")], "curator", st)

    def _check_case_retired(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        c = self.cases.get(b["case_id"])
        if c is None:
            raise _no("case_unknown", _body("case_id"), "no such case")
        if not c["active"]:
            raise _no("case_not_active", _body("case_id"), "the case is already retired")
        _sensitive_text(b["reason"], "reason")
        st = case_retire_statement(b["case_id"], c["case_digest"])
        self._check_cosigners([(b["retired_by"], "retired_by"), (b["reviewed_by"], "reviewed_by")], "curator", st)

    def _check_case_proposed(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        _ident(b["proposal_id"], "proposal_id")
        if b["proposal_id"] in self.proposals:
            raise _no("proposal_exists", _body("proposal_id"), "already used")
        self._task_class(b["task_class"])
        d = b["draft"]
        _ident(d["case_id"], "draft.case_id")
        _sensitive_text(d["title"], "draft.title")
        _sensitive_text(d["difficulty"], "draft.difficulty")
        _ident(d["curation_class"], "draft.curation_class")
        _digest(d["case_digest"], "draft.case_digest")
        _digest(d["cassette_digest"], "draft.cassette_digest")
        self._case_id_free(d["case_id"], "draft.case_id")
        _sensitive_text(b["production_ref"], "production_ref")

    def _check_proposal_approved(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        prop = self._pending_proposal(b["proposal_id"])
        _timestamp(b["added_at"], "added_at")
        d = prop["draft"]
        if d["case_id"] in self.cases:
            raise _no("case_exists", _body("proposal_id"), "the draft's case id is already used")
        st = case_provenance_statement(d["case_id"], b["added_at"], d["case_digest"])
        self._check_cosigners([(b["added_by"], "added_by"), (b["reviewed_by"], "reviewed_by")], "curator", st)

    def _check_proposal_rejected(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        self._pending_proposal(b["proposal_id"])
        _sensitive_text(b["reason"], "reason")

    def _check_run_started(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        _ident(b["run_id"], "run_id")
        if b["run_id"] in self.runs:
            raise _no("run_exists", _body("run_id"), "already used")
        tc = self._task_class(b["task_class"])
        _text(b["harness_version"], "harness_version")
        _digest(b["rubric_digest"], "rubric_digest")
        _digest(b["sandbox_image_digest"], "sandbox_image_digest")
        if b["rubric_digest"] != tc["rubric_digest"]:
            raise _no("rubric_digest_mismatch", _body("rubric_digest"), "differs from the task class's current rubric")

    def _check_run_finished(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        self._open_run(b["run_id"])

    def _check_rubric_invoked(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        run = self._open_run(b["run_id"])
        case = self._active_case(b["case_id"], "case_id")
        if case["task_class"] != run["task_class"]:
            raise _no("case_task_class_mismatch", _body("case_id"), "the case belongs to another task class")
        _ident(b["invocation_id"], "invocation_id")
        if b["invocation_id"] in self.invocations:
            raise _no("invocation_exists", _body("invocation_id"), "already used")

    def _check_rubric_completed(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        self._open_invocation(b["invocation_id"])

    def _check_rubric_failed(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        self._open_invocation(b["invocation_id"])
        if b["failure_code"] not in RUBRIC_FAILURE_CODES:
            raise _no("rubric_failure_code_unknown", _body("failure_code"), f"must be one of {', '.join(RUBRIC_FAILURE_CODES)}")

    def _check_score_recorded(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        run = self._open_run(b["run_id"])
        if run["task_class"] != b["task_class"]:
            raise _no("run_task_class_mismatch", _body("task_class"), "the run is for another task class")
        tc = self._task_class(b["task_class"])
        case = self._active_case(b["case_id"], "case_id")
        if case["task_class"] != b["task_class"]:
            raise _no("case_task_class_mismatch", _body("case_id"), "the case belongs to another task class")
        for f in ("case_digest", "rubric_digest", "cassette_digest", "image_digest"):
            _digest(b[f], f)
        if b["case_digest"] != case["case_digest"]:
            raise _no("case_digest_mismatch", _body("case_digest"), "differs from the active case's digest (stale or poisoned case)")
        if b["rubric_digest"] != tc["rubric_digest"]:
            raise _no("rubric_digest_mismatch", _body("rubric_digest"), "differs from the task class's current rubric")
        if b["cassette_digest"] != case["cassette_digest"]:
            raise _no("cassette_digest_mismatch", _body("cassette_digest"), "differs from the case's cassette (a swapped cassette)")
        s = b["score"]
        score, cost, duration = float(s["score"]), float(s["cost_usd"]), float(s["duration_seconds"])
        if not (math.isfinite(score) and 0.0 <= score <= 1.0):
            raise _no("score_out_of_range", _body("score.score"), "must be finite and within [0, 1]")
        if not (math.isfinite(cost) and cost >= 0.0):
            raise _no("cost_out_of_range", _body("score.cost_usd"), "must be finite and at least 0")
        if not (math.isfinite(duration) and duration >= 0.0):
            raise _no("duration_out_of_range", _body("score.duration_seconds"), "must be finite and at least 0")
        reg = tc["registration"]
        for k, v in sorted(s["breakdown"].items()):
            f = f"score.breakdown.{k}"
            _banned(k, f)
            if k not in reg["breakdown_keys"]:
                raise _no("breakdown_key_undeclared", _body(f), "not declared by the task class")
            if not math.isfinite(float(v)):
                raise _no("breakdown_value_out_of_range", _body(f), "must be finite")
        for i, fm in enumerate(s["failure_modes"]):
            _severity(fm["severity"], f"score.failure_modes[{i}].severity")
            t = next((t for t in reg["failure_modes"] if t["code"] == fm["code"]), None)
            if t is None:
                raise _no("failure_mode_unknown", _body(f"score.failure_modes[{i}].code"),
                          f"`{fm['code']}` is not in the task class's taxonomy")
            if t["severity"] != fm["severity"]:
                raise _no("severity_mismatch", _body(f"score.failure_modes[{i}].severity"), f"the taxonomy says {t['severity']}")
        _text(b["harness_version"], "harness_version")
        _sensitive_text(b["operator_fingerprint"], "operator_fingerprint")
        _timestamp(b["started_at"], "started_at")
        _timestamp(b["finished_at"], "finished_at")

    def _cited(self, cp: Mapping[str, Any], f: str, index: int, cite: Cite) -> None:
        root = cp["root"]
        if cp["size"] > index or not (len(root) == 64 and all(c in "0123456789abcdef" for c in root)):
            raise _no("checkpoint_unknown", _body(f), f"({cp['size']}, {root}) is not a committed checkpoint of this log")
        cite(int(cp["size"]), root, _body(f))

    def _check_rag_capability_minted(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        _ident(b["capability_id"], "capability_id")
        if b["capability_id"] in self.capabilities:
            raise _no("capability_exists", _body("capability_id"), "already used")
        _ident(b["workflow_id"], "workflow_id")
        _timestamp(b["validated_at"], "validated_at")
        if _timestamp(b["expires_at"], "expires_at") <= at:
            raise _no("capability_expired", _body("expires_at"), "already expired when minted")
        self._cited(b["minted_at"], "minted_at", index, cite)

    def _check_rag_example_written(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        cap = self.capabilities.get(b["capability_id"])
        if cap is None:
            raise _no("capability_unknown", _body("capability_id"), "no such capability")
        if cap["workflow_id"] != b["workflow_id"]:
            raise _no("capability_workflow_mismatch", _body("workflow_id"), "the capability was minted for another workflow")
        if cap["spent_at"] is not None:
            raise _no("capability_spent", _body("capability_id"), f"already spent by entry {cap['spent_at']}")
        if cap["quarantined"]:
            raise _no("capability_quarantined", _body("capability_id"), "the capability was quarantined")
        if at >= cap["expires_at"]:
            raise _no("capability_expired", _body("capability_id"), "expired before this write was sequenced")
        _digest(b["example_digest"], "example_digest")

    def _check_rag_record_quarantined(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        if b["capability_id"] not in self.capabilities:
            raise _no("capability_unknown", _body("capability_id"), "no such capability")
        _sensitive_text(b["reason"], "reason")

    def _check_promotion_requested(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        self._task_class(b["task_class"])

    def _check_promotion_recommended(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        tc = self._task_class(b["task_class"])
        if b["requires_human_approval"] is not True:
            raise _no("requires_human_approval", _body("requires_human_approval"), "must be true: the ledger recommends, humans promote")
        if b["current_tier"] != tc["tier"]:
            raise _no("tier_mismatch", _body("current_tier"), "differs from the task class's tier")
        settings = b.get("settings")
        if settings is not None:
            if settings["window_seconds"] < 1:
                raise _no("invalid_value", _body("settings.window_seconds"), "must be at least 1")
            if not 0 < settings["confidence"] < 1:
                raise _no("invalid_value", _body("settings.confidence"), "must be strictly between 0 and 1")
            if not 1 <= settings["resamples"] <= MAX_RESAMPLES:
                raise _no("invalid_value", _body("settings.resamples"), f"must be from 1 to {MAX_RESAMPLES}")
        tree = b.get("evidence_tree")
        if tree is not None:
            if b["evidence"]:
                raise _no("invalid_value", _body("evidence"), "must be empty when the evidence is cited by evidence_tree")
            root = tree["root"]
            if not (len(root) == 64 and all(c in "0123456789abcdef" for c in root)):
                raise _no("invalid_digest", _body("evidence_tree.root"), "must be 64 lowercase hex digits")
        self._cited(b["checkpoint"], "checkpoint", index, cite)

    def _check_tier_apply(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        raise _no("promotion_must_be_human_authorized", "event.kind", "the ledger never applies a tier change")

    def _check_promotion_apply_blocked(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        self._task_class(b["task_class"])

    def _check_tier_changed(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        tc = self._task_class(b["task_class"])
        if b["from"] != tc["tier"] or b["to"] == b["from"]:
            raise _no("tier_mismatch", _body("from"),
                      f"the task class is at {tc['tier']}; a change must start there and go elsewhere")
        r = self.recommendations.get(b["recommendation_index"])
        if r is None or r != [b["task_class"], b["from"], b["to"]]:
            raise _no("recommendation_unknown", _body("recommendation_index"),
                      "must be a promotion.recommended entry for this task class recommending this change")
        st = tier_change_statement(b["task_class"], b["from"], b["to"], b["recommendation_index"])
        self._check_cosigners([(b["decided_by"], "decided_by"), (b["confirmed_by"], "confirmed_by")], "maintainer", st)

    def _check_anchor_published(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        self._cited(b["checkpoint"], "checkpoint", index, cite)
        _text(b["location"], "location")

    def _check_field_redacted(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        entry = b["entry"]
        if entry >= index:
            raise _no("redaction_target_mismatch", _body("entry"), "names no earlier entry of this log")
        target = self.committed.get(entry)
        if target is not None and target[0] != b["leaf_hash"]:
            raise _no("redaction_target_mismatch", _body("leaf_hash"), "is not the leaf hash of that entry")
        if target is None or b["field"] not in target[1]:
            raise _no("redaction_field_not_committed", _body("field"), "that entry holds no commitment in this field")
        if (entry, b["field"]) in self.redactions:
            raise _no("already_redacted", _body("field"), "this field of that entry is already redacted")
        _sensitive_text(b["reason"], "reason")
        st = field_redact_statement(entry, b["leaf_hash"], b["field"])
        self._check_cosigners([(b["requested_by"], "requested_by"), (b["confirmed_by"], "confirmed_by")], "maintainer", st)

    def _check_sigstore_root_trusted(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        _text(b["origin"], "origin")
        if self.sigstore is not None and self.sigstore["origin"] != b["origin"]:
            raise _no("sigstore_origin_mismatch", _body("origin"), f"this log's origin is {json.dumps(self.sigstore['origin'])}")
        try:
            sigstore_check.check_root(b["trusted_root"])
        except sigstore_check.Refusal as r:
            raise _no("sigstore_trust_root_invalid", _body("trusted_root"), r.detail) from None
        except SigstoreUnavailable:
            raise _Unverifiable(_body("trusted_root")) from None

    def _check_state_committed(self, b: Mapping[str, Any], at: int, index: int, cite: Cite) -> None:
        # The sequencer's check (events/src/state/promotion.rs): the commitment names
        # the log just before it; what its state root commits to is the fold's
        # business (`fold.Projection.apply` checks it), not the rules'.
        size = b["checkpoint"]["size"]
        if size != self.size:
            raise _no("state_not_at_head", _body("checkpoint.size"), f"must be this entry's own index ({self.size}), not {size}")
        self._cited(b["checkpoint"], "checkpoint", index, cite)
        root = b["state_root"]
        if not (len(root) == 64 and all(c in "0123456789abcdef" for c in root)):
            raise _no("invalid_digest", _body("state_root"), "must be 64 lowercase hex digits")

    # --- folding an accepted entry ------------------------------------------------

    def apply(self, leaf: Leaf, index: int) -> None:
        """Folds the accepted entry `index`."""
        self.size = index + 1
        if leaf.payload["schema"] != SCHEMA_CLEAR and self.commitments_from is None:
            self.commitments_from = index
        if leaf.payload["schema"] >= SCHEMA_HANDLES:
            if self.handles_from is None:
                self.handles_from = index
            h = handle_field(leaf.kind, leaf.body)
            if h is not None and h.derived:
                self.handles[f"{h.class_}/{h.handle}"] = index
        at = leaf.sequenced_at
        self.last_sequenced_at = at if self.last_sequenced_at is None else max(self.last_sequenced_at, at)
        self.ids.add(leaf.payload["id"])
        kind, b = leaf.kind, leaf.body
        paths = [p for p, _ in commitments(kind, b)]
        if paths:
            self.committed[index] = [merkle.leaf_hash(leaf.envelope.leaf_bytes(at)).hex(), paths]
        if kind == "principal.enrolled":
            sigstore = b.get("sigstore")
            raw = _public_key(b.get("public_key", ""))
            if sigstore is not None:
                self.principals[sigstore_principal_id(sigstore["identity"], sigstore["issuer"])] = {
                    "public_key": None, "identity": b["identity"], "roles": sorted(set(b["roles"])), "revoked": False,
                    "sigstore": {"identity": sigstore["identity"], "issuer": sigstore["issuer"]}}
            elif raw is not None:
                self.principals[_key_id(raw)] = {"public_key": raw.hex(), "identity": b["identity"],
                                                 "roles": sorted(set(b["roles"])), "revoked": False}
        elif kind == "principal.revoked":
            p = self.principals.get(b["key_id"])
            if p is not None:
                p["revoked"] = True
        elif kind == "task_class.registered":
            self.task_classes[b["task_class"]] = {"registration": b, "rubric_digest": b["rubric_digest"], "tier": b["initial_tier"]}
        elif kind == "rubric.updated":
            self.task_classes[b["task_class"]]["rubric_digest"] = b["rubric_digest"]
        elif kind == "case.added":
            self.cases[b["case_id"]] = {"task_class": b["task_class"], "case_digest": b["case_digest"],
                                        "cassette_digest": b["cassette_digest"], "curation_class": b["curation_class"], "active": True}
        elif kind == "case.retired":
            self.cases[b["case_id"]]["active"] = False
        elif kind == "case.proposed":
            self.proposals[b["proposal_id"]] = {"task_class": b["task_class"], "draft": b["draft"], "status": "pending"}
        elif kind == "proposal.approved":
            p = self.proposals[b["proposal_id"]]
            p["status"] = "approved"
            d = p["draft"]
            self.cases[d["case_id"]] = {"task_class": p["task_class"], "case_digest": d["case_digest"],
                                        "cassette_digest": d["cassette_digest"], "curation_class": d["curation_class"], "active": True}
        elif kind == "proposal.rejected":
            self.proposals[b["proposal_id"]]["status"] = "rejected"
        elif kind == "run.started":
            self.runs[b["run_id"]] = {"task_class": b["task_class"], "isolation": b["isolation_class"], "finished": False}
        elif kind == "run.finished":
            self.runs[b["run_id"]]["finished"] = True
        elif kind == "rubric.invoked":
            self.invocations[b["invocation_id"]] = True
        elif kind in ("rubric.completed", "rubric.failed"):
            self.invocations[b["invocation_id"]] = False
        elif kind == "rag.capability.minted":
            self.capabilities[b["capability_id"]] = {"workflow_id": b["workflow_id"], "expires_at": parse_utc_micros(b["expires_at"]),
                                                     "spent_at": None, "quarantined": False}
        elif kind == "rag.example.written":
            self.capabilities[b["capability_id"]]["spent_at"] = index
        elif kind == "rag.record.quarantined":
            self.capabilities[b["capability_id"]]["quarantined"] = True
        elif kind == "promotion.recommended":
            self.recommendations[index] = [b["task_class"], b["current_tier"], b["recommended_tier"]]
        elif kind == "tier.changed":
            self.task_classes[b["task_class"]]["tier"] = b["to"]
        elif kind == "field.redacted":
            self.redactions.add((b["entry"], b["field"]))
        elif kind == "sigstore.root_trusted":
            self.sigstore = {"origin": b["origin"], "trusted_root": b["trusted_root"], "since": index}

    # --- saved form ---------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "principals": self.principals, "task_classes": self.task_classes, "cases": self.cases,
            "proposals": self.proposals, "runs": self.runs, "invocations": self.invocations,
            "capabilities": self.capabilities,
            "recommendations": {str(k): v for k, v in sorted(self.recommendations.items())},
            "ids": sorted(self.ids), "size": self.size, "last_sequenced_at": self.last_sequenced_at,
            "commitments_from": self.commitments_from,
            "handles_from": self.handles_from,
            "handles": dict(sorted(self.handles.items())),
            "committed": {str(k): v for k, v in sorted(self.committed.items())},
            "redactions": sorted([e, f] for e, f in self.redactions),
            "sigstore": self.sigstore,
        }

    @classmethod
    def from_json(cls, v: Mapping[str, Any]) -> "State":
        return cls(
            principals=dict(v["principals"]), task_classes=dict(v["task_classes"]), cases=dict(v["cases"]),
            proposals=dict(v["proposals"]), runs=dict(v["runs"]), invocations=dict(v["invocations"]),
            capabilities=dict(v["capabilities"]),
            recommendations={int(k): list(r) for k, r in v["recommendations"].items()},
            ids=set(v["ids"]), size=int(v["size"]), last_sequenced_at=v["last_sequenced_at"],
            commitments_from=v.get("commitments_from"),
            handles_from=v.get("handles_from"),
            handles={str(k): int(i) for k, i in v.get("handles", {}).items()},
            committed={int(k): list(c) for k, c in v.get("committed", {}).items()},
            redactions={(int(e), str(f)) for e, f in v.get("redactions", [])},
            sigstore=_sigstore_trust(v.get("sigstore")),
        )


def _sigstore_trust(v: Any) -> Optional[dict[str, Any]]:
    """The saved Sigstore trust (absent from states saved before it existed)."""
    if v is None:
        return None
    return {"origin": str(v["origin"]), "trusted_root": str(v["trusted_root"]), "since": int(v["since"])}
