"""Checks of what a server answered, trusting only a verifier key.

- `check_receipt`: a write receipt's checkpoint is signed by a trusted key
  and covers the entry, its inclusion proof leads to the signed root, and
  (given the envelope that was posted) the proven leaf is that envelope,
  sequenced at the receipt's `sequenced_at`.
- `check_projection`: a projection's checkpoint is signed, every evidence
  leaf re-hashes to its leaf hash and is included under the signed root,
  the evidence is exactly what the view says it used, and the held-out
  statistics follow from those leaves bit for bit (`evidence`).
- `verify_bundle`: an offline bundle (`ledger bundle`) is canonical JSON,
  its attestation is signed by a trusted key over the body's SHA-256, and
  its projection passes `check_projection`.

None of these proves that the log is the one everyone else sees, or that
nothing was left out of a projection: a `TrustedState` (consistency with
what this client saw before), anchors and replay (`replay`) do that.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence

from . import canonical
from .envelope import Envelope
from .errors import EvidenceMismatch, InvalidInput, LeafMismatch, MalformedAnswer, ProofMismatch, VerificationError
from .evidence import check_view
from .merkle import leaf_hash, parse_hash, parse_proof, verify_consistency, verify_inclusion
from .note import Checkpoint, KeyLike, VerifierKey, open_checkpoint, open_note
from .timefmt import parse_utc_micros
from .wire import ProjectionResponse, WriteReceipt, parse_projection

if TYPE_CHECKING:
    from .cosign import Policy

#: The first line of a bundle attestation note.
BUNDLE_STATEMENT = "evidence-ledger/v1 projection-bundle"


def _hash(field: str, text: str) -> bytes:
    try:
        return parse_hash(field, text)
    except InvalidInput as e:
        raise MalformedAnswer(e.field, e.rule) from None


def _proof(field: str, items: Sequence[str]) -> list[bytes]:
    try:
        return parse_proof(field, list(items))
    except InvalidInput as e:
        raise MalformedAnswer(e.field, e.rule) from None


def check_receipt(r: WriteReceipt, keys: Sequence[KeyLike], envelope: Optional[Envelope] = None) -> Checkpoint:
    """Checks a write receipt; returns the verified checkpoint it is proven in."""
    cp, _ = open_checkpoint(r.checkpoint, keys, "receipt.checkpoint")
    if cp.size != r.tree_size or cp.root.hex() != r.root:
        raise VerificationError("receipt.tree_size", "the receipt's tree size or root differs from its signed checkpoint")
    lh = _hash("receipt.leaf_hash", r.leaf_hash)
    if envelope is not None:
        at = parse_utc_micros(r.sequenced_at)
        if at is None:
            raise MalformedAnswer("receipt.sequenced_at", "not an RFC 3339 UTC timestamp")
        if r.id != envelope.id or r.kind != envelope.kind:
            raise LeafMismatch("receipt.id", f"the receipt is for {r.kind} `{r.id}`, not the posted {envelope.kind} `{envelope.id}`")
        if leaf_hash(envelope.leaf_bytes(at)) != lh:
            raise LeafMismatch("receipt.leaf_hash", f"entry {r.index} is not the posted envelope sequenced at {r.sequenced_at}")
    try:
        verify_inclusion(r.index, cp.size, lh, _proof("receipt.inclusion_proof", r.inclusion_proof), cp.root)
    except ProofMismatch as e:
        raise ProofMismatch("receipt.inclusion_proof", e.reason) from None
    return cp


def check_projection(p: ProjectionResponse, keys: Sequence[KeyLike]) -> tuple[Checkpoint, list[bytes]]:
    """Checks a projection and its proof bundle; returns the checkpoint and the evidence leaves."""
    cp, _ = open_checkpoint(p.checkpoint, keys, "projection.checkpoint")
    if cp.size != p.tree_size or cp.root.hex() != p.root:
        raise VerificationError("projection.tree_size", "the projection's tree size or root differs from its signed checkpoint")
    if p.view.tree_size != cp.size or p.view.root != p.root:
        raise VerificationError("view.tree_size", "the projection was computed at another tree size or root")
    claimed = [(e.index, e.leaf_hash) for e in p.view.evidence]
    given = [(e.index, e.leaf_hash) for e in p.evidence]
    if claimed != given:
        raise EvidenceMismatch("projection.evidence", "the evidence bundle does not match the evidence the projection used")
    leaves = []
    for k, e in enumerate(p.evidence):
        try:
            leaf = base64.b64decode(e.leaf.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise MalformedAnswer(f"projection.evidence[{k}].leaf", "not base64") from None
        lh = leaf_hash(leaf)
        if lh.hex() != e.leaf_hash:
            raise LeafMismatch(f"projection.evidence[{k}].leaf", f"evidence {e.index}: the leaf does not hash to its leaf hash")
        try:
            verify_inclusion(e.index, cp.size, lh, _proof(f"projection.evidence[{k}].proof", e.proof), cp.root)
        except ProofMismatch as err:
            raise ProofMismatch(f"projection.evidence[{k}].proof", f"evidence {e.index}: {err.reason}") from None
        leaves.append(leaf)
    check_view(p.view, leaves)
    return cp, leaves


@dataclass(frozen=True)
class BundleSummary:
    """What a verified bundle establishes."""

    task_class: str
    tree_size: int
    root: str
    evidence: int
    current_tier: str
    recommended_tier: str
    requires_human_approval: bool
    key: VerifierKey
    projection: ProjectionResponse
    #: With a `witnessed` part (`ledger bundle --policy`): the size of the
    #: witnessed tree the body's tree is proven a prefix of.
    witnessed_size: Optional[int] = None


def verify_bundle(data: bytes, keys: Sequence[KeyLike], policy: Optional["Policy"] = None) -> BundleSummary:
    """Verifies an offline proof bundle with no server (see the module's doc). A
    `witnessed` part (`ledger bundle --policy`), when present, must prove the body's
    tree a prefix of a checkpoint signed by the same key; with `policy` that part is
    required and its checkpoint must carry the policy's quorum."""
    try:
        value: Any = canonical.parse_strict(data, "bundle")
    except InvalidInput as e:
        raise MalformedAnswer("bundle", f"not strict JSON: {e.rule}") from None
    try:
        same = canonical.encode(value) == data
    except InvalidInput:
        same = False
    if not same:
        raise MalformedAnswer("bundle", "not in canonical form (it was edited)")
    if not isinstance(value, dict) or set(value) - {"witnessed"} != {"attestation", "body"}:
        raise MalformedAnswer("bundle", "a bundle has exactly `attestation`, `body` and, when witnessed, `witnessed`")
    note, body = value["attestation"], value["body"]
    if not isinstance(note, str) or not isinstance(body, dict):
        raise MalformedAnswer("bundle", "a bundle has a string `attestation` and an object `body`")
    digest = hashlib.sha256(canonical.encode(body)).hexdigest()
    text, key = open_note(note, keys, "bundle.attestation")
    if text != f"{BUNDLE_STATEMENT}\n{key.name}\n{digest}\n".encode():
        raise VerificationError("bundle.attestation", "the attestation does not cover this body")
    p = parse_projection(body, "bundle.body")
    cp, leaves = check_projection(p, [key])
    witnessed_size = _check_witnessed(value.get("witnessed"), cp, key, policy)
    return BundleSummary(
        task_class=p.view.task_class,
        tree_size=p.tree_size,
        root=p.root,
        evidence=len(leaves),
        current_tier=p.view.recommendation.current_tier,
        recommended_tier=p.view.recommendation.recommended_tier,
        requires_human_approval=p.view.recommendation.requires_human_approval,
        key=key,
        projection=p,
        witnessed_size=witnessed_size,
    )


def _check_witnessed(part: Any, body: Checkpoint, key: VerifierKey, policy: Optional["Policy"]) -> Optional[int]:
    """Checks a bundle's `witnessed` part against the body's checkpoint."""
    what = "bundle.witnessed"
    if part is None:
        if policy is not None:
            raise VerificationError(what, "the policy needs a witnessed checkpoint and the bundle has none")
        return None
    if not isinstance(part, dict) or set(part) != {"checkpoint", "consistency"}:
        raise MalformedAnswer(what, "has exactly `checkpoint` and `consistency`")
    note, proof = part["checkpoint"], part["consistency"]
    if not isinstance(note, str) or not isinstance(proof, list):
        raise MalformedAnswer(what, "a string `checkpoint` and a list `consistency`")
    if policy is not None:
        w = policy.open_checkpoint(note, [key], what + ".checkpoint").checkpoint
    else:
        w, _ = open_checkpoint(note, [key], what + ".checkpoint")
    verify_consistency(body.size, body.root, w.size, w.root, parse_proof(what + ".consistency", proof))
    return w.size
