"""Sensitive fields as commitments (docs/PRIVACY.md; `events/src/disclose.rs`, in Python).

From payload schema 2 on, each field `committed_paths(kind)` lists holds a
commitment `{"_sd": digest}` instead of its value. The value travels beside
the envelope in a *disclosure*, shaped as RFC 9901 (SD-JWT) shapes one for
an object property: the base64url (no padding) of the canonical JSON array
`[salt, field, value]`, where `salt` is the base64url of 16 to 64 random
bytes and `field` the field's path in the body (`provenance.source_ref`).
The digest is the base64url of the SHA-256 of the disclosure's ASCII
bytes. The signature and the leaf hash cover the digest, never the value;
the path inside the disclosure keeps a disclosure from opening another
field.

- Writing: `commit(kind, body)` replaces each clear sensitive value with a
  commitment under a fresh 32-byte salt and returns the disclosures to send
  beside the envelope (`envelope.sign_payload` does it for schema 2).
- Decoding: `check_form(payload)` is the ledger's rule on the form of a
  payload (schema 1: no commitment; schema 2: a commitment in every
  sensitive field).
- Reading: `check_disclosed(kind, body, disclosures)` checks what a reader
  with a role was served against the leaf's commitments, as any holder of
  the disclosures can.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import os
from typing import Any, Mapping, NamedTuple, Optional, Sequence

from . import canonical
from .errors import DisclosureMismatch, InvalidInput

#: The payload schema that holds sensitive values in clear.
SCHEMA_CLEAR = 1
#: The payload schema that holds them as commitments.
SCHEMA_COMMITTED = 2
#: The fewest and most bytes a salt may have.
SALT_BYTES = range(16, 65)
#: The salt length this package writes (RFC 9901 recommends 128 bits or more).
WRITE_SALT_BYTES = 32

#: The fields schema 2 commits, for each kind, in order (`committed_paths` in Rust).
COMMITTED: Mapping[str, tuple[str, ...]] = {
    "principal.revoked": ("reason",),
    "case.added": ("title", "disposition", "difficulty", "provenance.source_ref"),
    "case.retired": ("reason",),
    "case.proposed": ("draft.title", "draft.disposition", "draft.difficulty", "production_ref"),
    "proposal.rejected": ("reason",),
    "score.recorded": ("operator_fingerprint",),
    "rag.record.quarantined": ("reason",),
    "field.redacted": ("reason",),
}

_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


class Disclosed(NamedTuple):
    """A committed field of an entry: its path in the body, and its value where it was
    disclosed (None where it was not)."""

    path: str
    value: Optional[Any]


def committed_paths(kind: str) -> tuple[str, ...]:
    """The paths of the fields schema 2 commits for `kind` (none for most kinds)."""
    return COMMITTED.get(kind, ())


def b64url(data: bytes) -> str:
    """Base64url without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> Optional[bytes]:
    """The bytes of `text` if it is base64url without padding in its one canonical
    encoding (no stray bits), else None."""
    if not isinstance(text, str) or any(c not in _B64URL for c in text) or len(text) % 4 == 1:
        return None
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return raw if b64url(raw) == text else None


def is_digest(d: Any) -> bool:
    """Whether `d` is the base64url (no padding) of a 32-byte SHA-256 digest."""
    if not isinstance(d, str) or len(d) != 43:
        return False
    raw = b64url_decode(d)
    return raw is not None and len(raw) == 32


def is_commitment(v: Any) -> bool:
    """Whether `v` has the form of a commitment: `{"_sd": <string>}` and nothing else."""
    return isinstance(v, dict) and set(v) == {"_sd"} and isinstance(v["_sd"], str)


def digest(disclosure: str) -> str:
    """The digest of a disclosure: base64url of the SHA-256 of its (ASCII) bytes."""
    return b64url(hashlib.sha256(disclosure.encode("utf-8")).digest())


def disclosure(salt: bytes, field: str, value: Any) -> str:
    """The disclosure of `value` for the field at path `field` with `salt`."""
    return b64url(canonical.encode([b64url(salt), field, value]))


def parse(disclosure: str, at: str = "disclosure") -> tuple[str, Any]:
    """Takes a disclosure apart into (field, value): base64url without padding of the
    canonical JSON array `[salt, field, value]`, the salt base64url of 16 to 64 bytes.
    Raises `InvalidInput` naming `at` with code `disclosure_malformed` otherwise."""

    def malformed(why: str) -> InvalidInput:
        return InvalidInput(
            at,
            f"{why}; a disclosure is the base64url (no padding) of the canonical JSON array [salt, field, value]",
            "disclosure_malformed",
        )

    raw = b64url_decode(disclosure)
    if raw is None:
        raise malformed("not base64url without padding")
    try:
        value = canonical.parse_strict(raw, at)
    except InvalidInput:
        raise malformed("not strict JSON") from None
    try:
        again = canonical.encode(value)
    except InvalidInput:
        again = b""
    if again != raw:
        raise malformed("not canonical JSON")
    if not isinstance(value, list):
        raise malformed("not a JSON array")
    if len(value) != 3:
        raise malformed("not three elements")
    salt, field, v = value
    if not isinstance(salt, str) or not isinstance(field, str):
        raise malformed("the salt and the field must be strings")
    s = b64url_decode(salt)
    if s is None or len(s) not in SALT_BYTES:
        raise malformed("the salt must be base64url of 16 to 64 bytes")
    return field, v


_MISSING = object()


def _get(body: Any, path: str) -> Any:
    """The value at the dotted `path` in `body`, or `_MISSING`."""
    v = body
    for part in path.split("."):
        if not isinstance(v, dict) or part not in v:
            return _MISSING
        v = v[part]
    return v


def _set(body: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    v = body
    for part in parents:
        v = v[part]
    v[last] = value


def commitments(kind: str, body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The committed fields of a body, in order: (path, digest)."""
    out = []
    for path in committed_paths(kind):
        v = _get(body, path)
        if is_commitment(v):
            out.append((path, v["_sd"]))
    return out


def commit(kind: str, body: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Commits every sensitive value `body` holds in clear, each with a fresh random
    32-byte salt: what a client does before it signs schema 2. Returns the committed
    body (a copy) and the disclosures to send beside the envelope, in field order."""
    out = copy.deepcopy(dict(body))
    disclosures = []
    for path in committed_paths(kind):
        v = _get(out, path)
        if v is _MISSING or is_commitment(v):
            continue
        d = disclosure(os.urandom(WRITE_SALT_BYTES), path, v)
        _set(out, path, {"_sd": digest(d)})
        disclosures.append(d)
    return out, disclosures


def check_form(payload: Mapping[str, Any], what: str = "payload") -> None:
    """The ledger's rule on a payload's form: schema 1 holds every sensitive value in
    clear (`commitment_not_allowed`), schema 2 a commitment in each sensitive field
    (`sensitive_value_in_clear`) whose digest is base64url of 32 bytes (`invalid_value`).
    A field of another type is left to the body's type check. Raises `InvalidInput`."""
    event = payload.get("event")
    if not isinstance(event, dict):
        return
    kind, body = event.get("kind"), event.get("body")
    if not isinstance(kind, str) or not isinstance(body, dict):
        return
    clear_schema = payload.get("schema") == SCHEMA_CLEAR
    for path in committed_paths(kind):
        v = _get(body, path)
        field = f"{what}.event.body.{path}"
        if is_commitment(v):
            if clear_schema:
                raise InvalidInput(field, "schema 1 holds this field in clear; commitments need schema 2", "commitment_not_allowed")
            if not is_digest(v["_sd"]):
                raise InvalidInput(f"{field}._sd", "must be the base64url (no padding) of a 32-byte SHA-256 digest", "invalid_value")
        elif isinstance(v, str) and not clear_schema:
            raise InvalidInput(
                field,
                'schema 2 holds a commitment {"_sd": digest} in this field, never the value (docs/PRIVACY.md)',
                "sensitive_value_in_clear",
            )


def check_disclosed(kind: str, body: Mapping[str, Any], disclosures: Sequence[str], what: str = "entry") -> list[Disclosed]:
    """Checks disclosures a reader received against the commitments of an event body,
    as any holder of them can: each must be a well-formed disclosure whose digest one
    committed field holds and that names that field, and each field is opened at most
    once. Returns every committed field, in order, with its value where it was
    disclosed. Raises `DisclosureMismatch` naming `what` (the entry) and the disclosure."""
    committed = commitments(kind, body)
    out = [Disclosed(p, None) for p, _ in committed]
    opened = [False] * len(committed)
    for i, d in enumerate(disclosures):
        at = f"{what}.disclosures[{i}]"
        if not isinstance(d, str):
            raise DisclosureMismatch(at, f"disclosure {i} is not a string", i)
        want = digest(d)
        k = next((k for k, (_, c) in enumerate(committed) if c == want), None)
        if k is None:
            raise DisclosureMismatch(at, f"disclosure {i} matches no commitment in the entry (a wrong value or salt, or another entry's)", i)
        path = committed[k][0]
        try:
            named, value = parse(d, at)
        except InvalidInput as e:
            raise DisclosureMismatch(at, f"disclosure {i} opens `{path}` but is malformed: {e.rule}", i, path) from None
        if named != path:
            raise DisclosureMismatch(at, f"disclosure {i} names `{named}` but opens `{path}`", i, path)
        if opened[k]:
            raise DisclosureMismatch(at, f"disclosure {i} opens `{path}` twice", i, path)
        opened[k] = True
        out[k] = Disclosed(path, value)
    return out
