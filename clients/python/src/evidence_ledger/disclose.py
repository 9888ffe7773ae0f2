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

Schema 3 ("Handles" in docs/PRIVACY.md) also names case ids, identities and
workflow ids by *handles*. Where such a value is first named (`handle_field`:
`case.added` `case_id`, a `case.proposed` draft's `case_id`,
`principal.enrolled` `identity`, `rag.capability.minted` `workflow_id`), the
event holds beside the identifier its *companion* (`case_name`,
`draft.case_name`, `identity_name`, `workflow_name`): the value, committed
like any sensitive field and listed last among the event's committed
fields. The identifier holds the handle, the companion's digest itself
(`derived`), or a handle the log already holds for the same value. Every
later event names the value by its handle, as a plain string.

- Writing: `commit(kind, body)` replaces each clear sensitive value with a
  commitment under a fresh 32-byte salt and returns the disclosures to send
  beside the envelope (`envelope.sign_payload` does it for schemas 2 and 3).
  In schema 3 a companion left out is the identifier's value, which moves
  into the companion while the identifier becomes its new handle; a
  companion given in clear beside an identifier holding the same value is
  derived the same way; one beside another identifier (an earlier handle)
  is committed and the identifier kept. `bind(path, value)` gives a value
  its handle before the event is built (for a co-signed statement that
  names it), and `commit(..., bound=...)` uses such bindings.
- Decoding: `check_form(payload)` is the ledger's rule on the form of a
  payload (schema 1: no commitment; schemas 2 and 3: a commitment in every
  sensitive field; schema 3: a companion beside each identifier that names
  a value first, schemas 1 and 2: none).
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
#: The payload schema that holds them as commitments (identifiers in clear).
SCHEMA_COMMITTED = 2
#: The payload schema that also names case ids, identities and workflow ids by handles.
SCHEMA_HANDLES = 3
#: The fewest and most bytes a salt may have.
SALT_BYTES = range(16, 65)
#: The salt length this package writes (RFC 9901 recommends 128 bits or more).
WRITE_SALT_BYTES = 32

#: The fields schemas 2 and 3 commit, for each kind, in order (`committed_paths` in
#: Rust). A schema-3 companion (`HANDLE_FIELDS`) comes last; schemas 1 and 2 hold none.
COMMITTED: Mapping[str, tuple[str, ...]] = {
    "principal.enrolled": ("identity_name",),
    "principal.revoked": ("reason",),
    "case.added": ("title", "disposition", "difficulty", "provenance.source_ref", "case_name"),
    "case.retired": ("reason",),
    "case.proposed": ("draft.title", "draft.disposition", "draft.difficulty", "production_ref", "draft.case_name"),
    "proposal.rejected": ("reason",),
    "score.recorded": ("operator_fingerprint",),
    "rag.capability.minted": ("workflow_name",),
    "rag.record.quarantined": ("reason",),
    "field.redacted": ("reason",),
}


class HandleSpec(NamedTuple):
    """Where a kind names a sensitive value first (`events::disclose::handle_field`)."""

    #: What the handle names: `case`, `identity` or `workflow`.
    class_: str
    #: The identifier's path in the body (`case_id`, `draft.case_id`).
    handle_path: str
    #: The companion's path in the body (`case_name`, `draft.case_name`).
    name_path: str
    #: The rule the value passes: `ident` (an identifier) or `text`.
    rule: str


#: The identifier and companion of each kind that names a value first.
HANDLE_FIELDS: Mapping[str, HandleSpec] = {
    "case.added": HandleSpec("case", "case_id", "case_name", "ident"),
    "case.proposed": HandleSpec("case", "draft.case_id", "draft.case_name", "ident"),
    "principal.enrolled": HandleSpec("identity", "identity", "identity_name", "text"),
    "rag.capability.minted": HandleSpec("workflow", "workflow_id", "workflow_name", "ident"),
}
#: The companion paths: the values behind handles.
HANDLE_NAME_PATHS = frozenset(h.name_path for h in HANDLE_FIELDS.values())

_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


class Disclosed(NamedTuple):
    """A committed field of an entry: its path in the body, and its value where it was
    disclosed (None where it was not)."""

    path: str
    value: Optional[Any]


class Bound(NamedTuple):
    """A value given a handle before the event that names it is built (a case's handle
    goes into the statement its curators co-sign): the handle, and the disclosure behind
    it (`events::disclose::Bound`)."""

    #: The handle: the digest of `disclosure`.
    handle: str
    disclosure: str


class HandleField(NamedTuple):
    """The identifier of an event body that names a sensitive value where that value is
    first named (`events::disclose::HandleField`)."""

    spec: HandleSpec
    #: The identifier: the value in clear (schemas 1 and 2), its handle (schema 3).
    handle: Any
    #: The companion as the body holds it (a commitment, or a value in clear), or None
    #: when absent (or `null`, which the ledger reads as absent).
    name: Any

    @property
    def class_(self) -> str:
        return self.spec.class_

    @property
    def derived(self) -> bool:
        """The handle is the digest of the commitment beside it: the event gives the
        value its handle."""
        return is_commitment(self.name) and self.name["_sd"] == self.handle


def committed_paths(kind: str) -> tuple[str, ...]:
    """The paths of the fields schemas 2 and 3 commit for `kind` (none for most kinds),
    a schema-3 companion last."""
    return COMMITTED.get(kind, ())


def handle_field(kind: str, body: Mapping[str, Any]) -> Optional[HandleField]:
    """The identifier of `body` that names a sensitive value where it is first named, with
    its companion, for the four kinds that have one (None for the others, and for a body
    without the identifier)."""
    spec = HANDLE_FIELDS.get(kind)
    if spec is None:
        return None
    handle = _get(body, spec.handle_path)
    if handle is _MISSING:
        return None
    name = _get(body, spec.name_path)
    return HandleField(spec, handle, None if name is _MISSING else name)


def is_handle_name_path(path: str) -> bool:
    """Whether `path` is a schema-3 companion: the value behind a handle."""
    return path in HANDLE_NAME_PATHS


def bind(path: str, value: str) -> Bound:
    """Gives `value`, for the companion field at `path` (`case_name`, `draft.case_name`,
    `identity_name`, `workflow_name`), a handle, with a fresh random 32-byte salt
    (`events::disclose::bind`): put `handle` in the event (and in any statement that
    names the value), and pass the `Bound` to `commit` (or `sign(..., bound=...)`)."""
    return bind_with_salt(os.urandom(WRITE_SALT_BYTES), path, value)


def bind_with_salt(salt: bytes, path: str, value: str) -> Bound:
    """`bind` with a given salt (tests and vectors that must be repeatable)."""
    d = disclosure(salt, path, value)
    return Bound(digest(d), d)


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


def commit(
    kind: str, body: Mapping[str, Any], *, schema: int = SCHEMA_HANDLES, bound: Sequence[Bound] = ()
) -> tuple[dict[str, Any], list[str]]:
    """Commits every sensitive value `body` holds in clear, each with a fresh random
    32-byte salt: what a client does before it signs schema 2 or 3
    (`events::disclose::commit_with`). Returns the committed body (a copy) and the
    disclosures to send beside the envelope, in field order.

    In schema 3, a companion left out is the identifier's value, named here first: it
    moves into the companion. A companion in clear whose identifier holds the same value
    is a value named here first: the identifier becomes the new commitment's digest, its
    handle. A companion in clear beside another identifier (an earlier handle) is
    committed and the identifier kept.

    `bound` holds values given their handles before the body was built (`bind`): a field
    committed already is opened by the one whose handle is its digest, and a field in
    clear is committed with the one that discloses its path and value."""
    out = copy.deepcopy(dict(body))
    if schema >= SCHEMA_HANDLES:
        _fill_companion(kind, out)
    h = handle_field(kind, out)
    derive = h is not None and isinstance(h.name, str) and h.name == h.handle
    disclosures = []
    handle: Optional[str] = None
    for path in committed_paths(kind):
        v = _get(out, path)
        if v is _MISSING or v is None:
            continue
        if is_commitment(v):
            given = next((b for b in bound if b.handle == v["_sd"]), None)
            if given is not None:
                disclosures.append(given.disclosure)
            continue
        d = next((b.disclosure for b in bound if _discloses(b.disclosure, path, v)), None)
        if d is None:
            d = disclosure(os.urandom(WRITE_SALT_BYTES), path, v)
        sd = digest(d)
        if derive and is_handle_name_path(path):
            handle = sd
        _set(out, path, {"_sd": sd})
        disclosures.append(d)
    if h is not None and handle is not None:
        _set(out, h.spec.handle_path, handle)
    return out, disclosures


def _discloses(d: str, path: str, value: Any) -> bool:
    """Whether the disclosure `d` is well formed and discloses `value` at `path`."""
    try:
        return parse(d) == (path, value)
    except InvalidInput:
        return False


def _fill_companion(kind: str, body: dict[str, Any]) -> None:
    """A companion left out is the identifier's value in clear: the value is named here
    first, under the identifier."""
    h = handle_field(kind, body)
    if h is not None and h.name is None:
        _set(body, h.spec.name_path, h.handle)


def check_form(payload: Mapping[str, Any], what: str = "payload") -> None:
    """The ledger's rule on a payload's form (`events::disclose::check_form`): schema 1
    holds every sensitive value in clear (`commitment_not_allowed`), schemas 2 and 3 a
    commitment in each sensitive field (`sensitive_value_in_clear`) whose digest is
    base64url of 32 bytes (`invalid_value`); schema 3 holds the companion of an
    identifier that names a value first (`missing_field`), schemas 1 and 2 hold none
    (`unknown_field`). A field of another type is left to the body's type check. Raises
    `InvalidInput`."""
    event = payload.get("event")
    if not isinstance(event, dict):
        return
    kind, body = event.get("kind"), event.get("body")
    if not isinstance(kind, str) or not isinstance(body, dict):
        return
    schema = payload.get("schema")
    clear_schema = schema == SCHEMA_CLEAR
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
                'from schema 2, this field holds a commitment {"_sd": digest}, never the value (docs/PRIVACY.md)',
                "sensitive_value_in_clear",
            )
    h = handle_field(kind, body)
    if h is None or not isinstance(schema, int) or isinstance(schema, bool):
        return
    if h.name is not None and not (isinstance(h.name, str) or is_commitment(h.name)):
        return
    field = f"{what}.event.body.{h.spec.name_path}"
    if schema < SCHEMA_HANDLES and h.name is not None:
        raise InvalidInput(field, f"schema 3 adds this field; schema {schema} does not have it", "unknown_field")
    if schema >= SCHEMA_HANDLES and h.name is None:
        raise InvalidInput(
            field,
            f"schema 3 commits here the value `{h.spec.handle_path}` is the handle of (docs/PRIVACY.md, \"Handles\")",
            "missing_field",
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
