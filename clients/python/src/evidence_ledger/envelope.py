"""DSSE envelopes and leaf records (docs/FORMAT.md sections 6-8).

An envelope carries the canonical JSON payload `{"schema", "id", "signer",
"issued_at", "event": {"kind", "body"}}`, signed with Ed25519 over DSSE's
pre-authentication encoding. The leaf the log hashes is the canonical JSON
of `{"envelope": <envelope>, "sequenced_at": <ledger time>, "v": 1}`.

Schema 1 holds every value in clear; schema 2 (docs/PRIVACY.md) holds each
sensitive field as a commitment `{"_sd": digest}`, whose disclosure travels
beside the envelope in the write body `{"disclosures": [...], "envelope":
{...}}` (`Envelope.write_body`); schema 3 also names case ids, identities and
workflow ids by handles, the value committed beside the identifier where it
is first named (docs/PRIVACY.md, "Handles"). This package signs schema 3
(`sign_payload`); it reads all three, since a log written before a switch
keeps its earlier leaves.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from . import canonical, disclose
from .errors import InvalidInput
from .note import SigningKey, VerifierKey, b64, b64decode_strict, key_id
from .timefmt import format_micros, now, parse_utc_micros

#: The DSSE payloadType of every event.
PAYLOAD_TYPE = "application/vnd.evidence-ledger.event+json"
#: The payload schema version this package writes (sensitive values as commitments,
#: case ids, identities and workflow ids as handles).
SCHEMA_VERSION = disclose.SCHEMA_HANDLES
#: The payload schema of logs written before the switch (every value in clear).
SCHEMA_CLEAR = disclose.SCHEMA_CLEAR
#: Sensitive values as commitments, identifiers in clear.
SCHEMA_COMMITTED = disclose.SCHEMA_COMMITTED
#: The payload schemas this package reads (and writes).
SCHEMAS = (SCHEMA_CLEAR, SCHEMA_COMMITTED, SCHEMA_VERSION)
#: The leaf record version.
LEAF_VERSION = 1


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def _ident_ok(s: str) -> bool:
    return 0 < len(s) <= 128 and all(c.isascii() and (c.isalnum() or c in "._:/@+-") for c in s)


@dataclass(frozen=True)
class Envelope:
    """A signed envelope: its canonical payload bytes, key id and signature, and the
    disclosures of its committed values that travel beside it (not signed, not in the
    leaf: each is bound to the envelope by the digest its payload holds)."""

    payload: bytes
    keyid: str
    signature: bytes
    disclosures: tuple[str, ...] = field(default=(), compare=False)

    @property
    def decoded(self) -> dict[str, Any]:
        value = json.loads(self.payload)
        if not isinstance(value, dict):
            raise InvalidInput("payload", "must be a JSON object")
        return value

    @property
    def id(self) -> str:
        return str(self.decoded["id"])

    @property
    def kind(self) -> str:
        return str(self.decoded["event"]["kind"])

    @property
    def body(self) -> dict[str, Any]:
        b = self.decoded["event"]["body"]
        return b if isinstance(b, dict) else {}

    @property
    def handle(self) -> Optional[str]:
        """The identifier of a kind that names a case id, identity or workflow id first
        (`case_id`, `draft.case_id`, `identity`, `workflow_id`) as signed: in schema 3
        the handle later events name the value by (None for other kinds)."""
        h = disclose.handle_field(self.kind, self.body)
        return h.handle if h is not None and isinstance(h.handle, str) else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "payload": b64(self.payload),
            "payloadType": PAYLOAD_TYPE,
            "signatures": [{"keyid": self.keyid, "sig": b64(self.signature)}],
        }

    def to_json(self) -> bytes:
        """The envelope alone: canonical JSON."""
        return canonical.encode(self.to_dict())

    def write_body(self) -> bytes:
        """What `POST /v1/events` takes (and each element of a batch): the envelope alone
        when it has no disclosures, else `{"disclosures": [...], "envelope": {...}}`
        (canonical JSON, so in that key order)."""
        return write_body(self.to_dict(), self.disclosures)

    def leaf_bytes(self, sequenced_at_micros: int) -> bytes:
        """The exact leaf the log hashes for this envelope, sequenced at that time."""
        return canonical.encode(
            {
                "envelope": self.to_dict(),
                "sequenced_at": format_micros(sequenced_at_micros),
                "v": LEAF_VERSION,
            }
        )

    def verify(self, key: "bytes | VerifierKey | SigningKey") -> bool:
        """Whether the signature verifies with the signer's public key."""
        import nacl.exceptions
        import nacl.signing

        raw = key.public_key if isinstance(key, (VerifierKey, SigningKey)) else key
        if key_id(raw) != self.keyid:
            return False
        try:
            nacl.signing.VerifyKey(raw).verify(pae(PAYLOAD_TYPE, self.payload), self.signature)
            return True
        except (nacl.exceptions.BadSignatureError, nacl.exceptions.CryptoError, ValueError):
            return False

    @classmethod
    def parse(cls, data: "bytes | str | Mapping[str, Any]", what: str = "envelope") -> "Envelope":
        """Decodes an envelope as the ledger does at its door: DSSE shape, payload type,
        one signature, canonical base64 and payload, the signer named in the payload.
        Raises `InvalidInput` naming the field (and the server's code)."""
        if isinstance(data, (bytes, str)):
            raw = data.encode("utf-8") if isinstance(data, str) else data
            obj = canonical.parse_strict(raw, what)
        else:
            obj = dict(data)
        if not isinstance(obj, dict) or set(obj) != {"payload", "payloadType", "signatures"}:
            raise InvalidInput(what, "a DSSE envelope has exactly payload, payloadType and signatures", "malformed_envelope")
        if obj["payloadType"] != PAYLOAD_TYPE:
            raise InvalidInput(f"{what}.payloadType", f"must be {PAYLOAD_TYPE}", "unsupported_payload_type")
        sigs = obj["signatures"]
        if not isinstance(sigs, list) or len(sigs) != 1:
            raise InvalidInput(f"{what}.signatures", "exactly one signature is required", "signature_count")
        sig = sigs[0]
        if not isinstance(sig, dict) or set(sig) != {"keyid", "sig"} or not all(isinstance(v, str) for v in sig.values()):
            raise InvalidInput(f"{what}.signatures[0]", "a signature is {keyid, sig}", "malformed_envelope")
        if not isinstance(obj["payload"], str):
            raise InvalidInput(f"{what}.payload", "must be base64 text", "malformed_base64")
        payload = b64decode_strict(f"{what}.payload", obj["payload"])
        signature = b64decode_strict(f"{what}.signatures[0].sig", sig["sig"])
        if len(signature) != 64:
            raise InvalidInput(f"{what}.signatures[0].sig", "an Ed25519 signature is 64 bytes", "malformed_base64")
        p = canonical.parse_canonical(payload, f"{what}.payload")
        check_payload_shape(p, f"{what}.payload")
        disclose.check_form(p, f"{what}.payload")
        if sig["keyid"] != p["signer"]:
            raise InvalidInput(f"{what}.signatures[0].keyid", "must equal the payload's signer", "signer_mismatch")
        return cls(payload, sig["keyid"], signature)


def check_payload_shape(p: Any, what: str) -> None:
    """The payload's outer shape: `{schema: 1, 2 or 3, id, signer, issued_at, event: {kind, body}}`."""
    if not isinstance(p, dict) or set(p) != {"schema", "id", "signer", "issued_at", "event"}:
        raise InvalidInput(what, "a payload has exactly schema, id, signer, issued_at and event", "unknown_field")
    if isinstance(p["schema"], bool) or p["schema"] not in SCHEMAS:
        raise InvalidInput(f"{what}.schema", f"schema {p['schema']!r} is not supported; this package reads 1 to {SCHEMA_VERSION}", "unsupported_schema")
    for f in ("id", "signer", "issued_at"):
        if not isinstance(p[f], str):
            raise InvalidInput(f"{what}.{f}", "must be a string", "invalid_type")
    ev = p["event"]
    if not isinstance(ev, dict) or set(ev) != {"kind", "body"} or not isinstance(ev["kind"], str):
        raise InvalidInput(f"{what}.event", "an event is {kind, body}", "invalid_type")
    if not isinstance(ev["body"], dict):
        raise InvalidInput(f"{what}.event.body", "must be an object", "invalid_type")


def new_id(prefix: str = "py") -> str:
    """A fresh envelope id: `prefix-` and 16 random hex digits."""
    eid = f"{prefix}-{os.urandom(8).hex()}"
    if not 8 <= len(eid) <= 128 or not _ident_ok(eid):
        raise InvalidInput("id", "the envelope id must be 8–128 characters from [A-Za-z0-9._:/@+-]", "invalid_identifier")
    return eid


def write_body(envelope: Mapping[str, Any], disclosures: Sequence[str]) -> bytes:
    """The body that posts `envelope` (its JSON object) with `disclosures`: the envelope
    alone when there are none (`events::envelope::write_body`)."""
    if not disclosures:
        return canonical.encode(dict(envelope))
    return canonical.encode({"disclosures": list(disclosures), "envelope": dict(envelope)})


def sign_payload(
    key: SigningKey,
    kind: str,
    body: Mapping[str, Any],
    *,
    id: Optional[str] = None,
    issued_at: Optional[str] = None,
    schema: int = SCHEMA_VERSION,
    bound: Sequence[disclose.Bound] = (),
) -> Envelope:
    """Signs `{"kind": kind, "body": body}` with `key` as a new envelope.

    With `schema` 3 (the default) or 2, every sensitive value the body holds in clear
    is first committed under a fresh 32-byte random salt (`disclose.commit`); the
    disclosures travel with the envelope (`Envelope.disclosures`, posted by
    `Envelope.write_body`), as `events::envelope::sign_write_bound` does. In schema 3,
    a case id, identity or workflow id named here first becomes a handle: the value
    moves into its companion field (`case_name`, ...) and the identifier holds the
    handle (`Envelope.handle`), unless the body already names the value by a handle.
    `bound` holds the disclosures of values given their handles before the body was
    built (`disclose.bind`), as for a case whose curators co-signed its handle. With
    `schema` 1 the body is signed as it is, values in clear. A log accepts a schema
    until its first entry of a later one (`schema_superseded` after it).

    `id` defaults to a fresh random one; `issued_at` to this machine's clock
    (kept by the ledger, never used for windows).
    """
    if schema not in SCHEMAS:
        raise InvalidInput("schema", f"this package writes schemas 1 to {SCHEMA_VERSION}", "unsupported_schema")
    eid = id if id is not None else new_id(kind.replace("_", "-"))
    if not 8 <= len(eid) <= 128 or not _ident_ok(eid):
        raise InvalidInput("id", "the envelope id must be 8–128 characters from [A-Za-z0-9._:/@+-]", "invalid_identifier")
    at = issued_at if issued_at is not None else now()
    if parse_utc_micros(at) is None:
        raise InvalidInput("issued_at", "must be RFC 3339 in UTC (ending in Z)", "invalid_timestamp")
    signed, disclosures = (dict(body), []) if schema == SCHEMA_CLEAR else disclose.commit(kind, body, schema=schema, bound=bound)
    payload = canonical.encode(
        {
            "schema": schema,
            "id": eid,
            "signer": key.key_id,
            "issued_at": at,
            "event": {"kind": kind, "body": signed},
        }
    )
    return Envelope(payload, key.key_id, key.sign(pae(PAYLOAD_TYPE, payload)), tuple(disclosures))


@dataclass(frozen=True)
class Leaf:
    """A decoded leaf record: the envelope, its payload, and the ledger's sequencing time."""

    envelope: Envelope
    payload: dict[str, Any]
    sequenced_at: int

    @property
    def kind(self) -> str:
        return str(self.payload["event"]["kind"])

    @property
    def body(self) -> dict[str, Any]:
        b = self.payload["event"]["body"]
        assert isinstance(b, dict)
        return b


def decode_leaf(leaf: bytes, what: str = "leaf") -> Leaf:
    """Decodes a leaf record `{"envelope", "sequenced_at", "v": 1}` (strictly: no other key)."""
    obj = canonical.parse_strict(leaf, what)
    if not isinstance(obj, dict) or set(obj) != {"envelope", "sequenced_at", "v"}:
        raise InvalidInput(what, "a leaf record is {envelope, sequenced_at, v}", "malformed_envelope")
    if obj["v"] != LEAF_VERSION or isinstance(obj["v"], bool):
        raise InvalidInput(f"{what}.v", f"leaf version {obj['v']!r} is not {LEAF_VERSION}", "unsupported_schema")
    at = parse_utc_micros(obj["sequenced_at"]) if isinstance(obj["sequenced_at"], str) else None
    if at is None:
        raise InvalidInput(f"{what}.sequenced_at", "not RFC 3339 UTC", "invalid_timestamp")
    if not isinstance(obj["envelope"], dict):
        raise InvalidInput(f"{what}.envelope", "must be an object", "malformed_envelope")
    env = Envelope.parse(obj["envelope"], f"{what}.envelope")
    payload = canonical.parse_strict(env.payload)
    return Leaf(env, payload, at)
