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
- `check_state`: a state answer (`GET /v1/task-classes/{name}/state`) is the
  projection of the state the ledger committed and recorded in its log:
  the commitment entry is proven in the signed checkpoint, its records hash
  to the committed state root (nothing committed left out) or its
  neighbours prove the class absent, and its view follows from the records
  bit for bit (`commit`).

None of these proves that the log is the one everyone else sees: a
`TrustedState` (consistency with what this client saw before), anchors and
witnesses do that. Only `check_state` and replay (`replay`) show that
nothing was left out of a projection, and `check_state` trusts that the
committed state is the right fold of the log, which every replay checks
(`fold.Projection.apply` refuses a wrong commitment: `WrongStateRoot`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from . import canonical, commit
from .envelope import Envelope, decode_leaf
from .errors import (
    CommitmentMismatch,
    EvidenceMismatch,
    InvalidInput,
    LeafMismatch,
    MalformedAnswer,
    NotCommitted,
    ProofMismatch,
    SettingsMismatch,
    StaleCommitment,
    VerificationError,
    ViewMismatch,
)
from .evidence import check_view
from .fold import first_difference
from .merkle import leaf_hash, parse_hash, parse_proof, verify_consistency, verify_inclusion
from .note import Checkpoint, KeyLike, VerifierKey, open_checkpoint, open_note
from .stats import Settings
from .timefmt import now_micros as clock_micros
from .timefmt import parse_utc_micros
from .wire import ProjectionResponse, StateResponse, WriteReceipt, parse_projection

if TYPE_CHECKING:
    from .cosign import Policy, WitnessedCheckpoint

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


# --- state answers -------------------------------------------------------------------


@dataclass(frozen=True)
class ReplayRules:
    """What a reader holds the server to, besides the log itself: the settings every
    view must state and how far its stated time may be from this machine's clock (a
    shorter window or a later time would drop old failures from a view). Used by the
    replay (`replay`) and by state answers (`check_state`, `Client.state`)."""

    #: The settings every projection must state (the agreed window, confidence, resamples).
    settings: Settings = Settings()
    #: How far a projection's stated time may be from this machine's clock (µs).
    max_skew_micros: int = 300 * 1_000_000
    #: This machine's clock (µs since the Unix epoch, UTC); read when the check runs if None.
    now_micros: Optional[int] = None


@dataclass(frozen=True)
class VerifiedState:
    """A state answer that passed `check_state`: `task_class`'s records as the ledger
    committed them at size `index` (the commitment's own index: the state of every
    entry before it), proven in the signed `checkpoint`."""

    task_class: str
    checkpoint: Checkpoint
    #: The commitment's log index, the size of the log whose state it commits.
    index: int
    state_root: str
    task_classes: int
    #: The class record; None when the answer proved the class is not registered.
    class_: Optional[commit.ClassRecord]
    cases: tuple[commit.CaseRecord, ...]
    #: The view recomputed from the records (equal, bit for bit, to the served one).
    view: Optional[Mapping[str, Any]]
    answer: StateResponse
    #: The cosigned checkpoint, when the check was given a witness policy.
    witnessed: Optional["WitnessedCheckpoint"] = None

    @property
    def registered(self) -> bool:
        return self.class_ is not None

    @property
    def recommended_tier(self) -> Optional[str]:
        if self.view is None:
            return None
        return str(self.view["recommendation"]["recommended_tier"])


def _int(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _commitment_body(leaf: bytes, index: int) -> tuple[int, str, str, int]:
    """The `state.committed` event in `leaf`: (checkpoint size, checkpoint root, state
    root, task classes), checked to be well formed and to name its own index."""
    what = "state.commitment.leaf"
    try:
        d = decode_leaf(leaf, what)
    except InvalidInput as e:
        raise CommitmentMismatch(what, f"entry {index} is not a ledger event: {e}") from None
    if d.kind != "state.committed":
        raise CommitmentMismatch(what, f"entry {index} is a {d.kind}, not a state.committed")
    b = d.body
    cp = b.get("checkpoint")
    if set(b) != {"checkpoint", "state_root", "task_classes"} or not isinstance(cp, dict) or set(cp) != {"size", "root"}:
        raise CommitmentMismatch(what, f"entry {index} is not a well-formed state.committed")
    size, root, state_root, count = _int(cp["size"]), cp["root"], b["state_root"], _int(b["task_classes"])
    if size is None or count is None or not isinstance(root, str) or not isinstance(state_root, str):
        raise CommitmentMismatch(what, f"entry {index} is not a well-formed state.committed")
    if size != index:
        raise CommitmentMismatch(what, f"entry {index} commits the state at size {size}, not at its own index")
    return size, root, state_root, count


def _settings_of(view: Mapping[str, Any], what: str) -> tuple[int, Settings]:
    """The time and settings a view states."""
    s, now = view.get("settings"), _int(view.get("now_micros"))
    if not isinstance(s, dict) or now is None:
        raise MalformedAnswer(what, "a view states `now_micros` and `settings`")
    w, c, r = _int(s.get("window_seconds")), s.get("confidence"), _int(s.get("resamples"))
    if w is None or r is None or r < 0 or isinstance(c, bool) or not isinstance(c, (int, float)):
        raise MalformedAnswer(f"{what}.settings", "window_seconds and resamples are integers, confidence a number")
    return now, Settings(w, float(c), r)


def check_state(
    answer: StateResponse,
    keys: Sequence[KeyLike],
    task_class: Optional[str] = None,
    *,
    policy: Optional["Policy"] = None,
    min_size: int = 0,
    rules: Optional[ReplayRules] = None,
) -> VerifiedState:
    """Checks a state answer (`GET /v1/task-classes/{name}/state`), trusting only `keys`
    (and `policy`'s witnesses when given). In order:

    1. the checkpoint is signed by a trusted key (with `policy`: cosigned by its quorum,
       else `NoQuorum` / `LogNotListed`) and is the answer's `tree_size` and `root`;
    2. the commitment leaf is a `state.committed` whose `checkpoint.size` is its own index,
       included at that index in the signed tree (inclusion proof), and its `checkpoint.root`
       is the signed tree's prefix of that size (consistency proof); the answer's
       `state_root` and `task_classes` are the entry's (`CommitmentMismatch`, `ProofMismatch`);
    3. freshness: a log of `min_size` entries (one the caller already knows) has no entry
       after the commitment, `index + 1 >= min_size` (`StaleCommitment`);
    4. a registered class: its record is included in the committed state tree and the case
       records hash to its case tree (`commit.check_class`: `NotCommitted`, `CasesMismatch`);
       a class said absent: its neighbours prove it (`commit.check_absent`: `AbsenceNotProven`);
    5. the view states `rules`' settings and a time within their skew, when `rules` is given
       (`SettingsMismatch`), and equals, every key and every float to the bit, the view the
       records give at its stated time and settings (`commit.view`: `ViewMismatch`).

    `task_class` is the name asked for (default: the answer's). What it proves: the
    answer is the projection of the state the ledger committed and recorded in its log at
    `index`, nothing committed left out. What it trusts: that the committed state is the
    right fold of the log, which everyone who replays the log checks (the commitment is
    in it), and that the signer of the commitment holds the ledger role (the ledger's
    rules at append time; a replay re-checks it).
    """
    asked = answer.task_class if task_class is None else task_class
    witnessed: Optional["WitnessedCheckpoint"] = None
    if policy is not None:
        witnessed = policy.open_checkpoint(answer.checkpoint, keys, "state.checkpoint")
        cp = witnessed.checkpoint
    else:
        cp, _ = open_checkpoint(answer.checkpoint, keys, "state.checkpoint")
    if cp.size != answer.tree_size or cp.root.hex() != answer.root:
        raise CommitmentMismatch("state.tree_size", "the answer's tree size or root differs from its signed checkpoint")
    if answer.task_class != asked:
        raise CommitmentMismatch("state.task_class", f"asked for `{asked}`, answered `{answer.task_class}`")
    c = answer.commitment
    index = c.index
    if index >= cp.size:
        raise CommitmentMismatch("state.commitment.index", f"entry {index} is not in the signed tree of size {cp.size}")
    try:
        leaf = base64.b64decode(c.leaf.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise MalformedAnswer("state.commitment.leaf", "not base64") from None
    lh = leaf_hash(leaf)
    try:
        verify_inclusion(index, cp.size, lh, _proof("state.commitment.inclusion_proof", c.inclusion_proof), cp.root)
    except ProofMismatch as e:
        raise ProofMismatch("state.commitment.inclusion_proof", f"entry {index}: {e.reason}") from None
    _, root_hex, committed_state, committed_count = _commitment_body(leaf, index)
    committed_root = _hash("state.commitment.leaf.checkpoint.root", root_hex)
    try:
        verify_consistency(index, committed_root, cp.size, cp.root,
                           _proof("state.commitment.consistency_proof", c.consistency_proof))
    except ProofMismatch as e:
        raise ProofMismatch("state.commitment.consistency_proof",
                            f"the commitment's checkpoint ({index}, {root_hex}) is not a prefix of the signed tree: {e.reason}") from None
    if answer.state_root != committed_state or answer.task_classes != committed_count:
        raise CommitmentMismatch(
            "state.state_root",
            f"the answer's state root {answer.state_root} over {answer.task_classes} classes is not the committed "
            f"{committed_state} over {committed_count}",
        )
    if index + 1 < min_size:
        raise StaleCommitment(min_size, index)
    state_root = _hash("state.state_root", answer.state_root)
    if answer.class_ is not None:
        if answer.class_proof is None or answer.neighbours is not None:
            raise MalformedAnswer("state.class_proof", "a registered class comes with its class proof and no neighbours")
        if answer.class_.task_class != asked:
            raise NotCommitted("state.class.task_class", f"the class record is of `{answer.class_.task_class}`, not of `{asked}`")
        if answer.class_proof.count != answer.task_classes:
            raise NotCommitted("state.class_proof.count",
                                      f"proven among {answer.class_proof.count} classes; the state commits {answer.task_classes}")
        commit.check_class(state_root, answer.class_, answer.cases, answer.class_proof)
        if answer.view is None:
            raise MalformedAnswer("state.view", "a registered class comes with its view")
        now, settings = _settings_of(answer.view, "state.view")
        if rules is not None:
            if settings != rules.settings:
                raise SettingsMismatch("state.view.settings", f"stated settings {settings} are not the agreed {rules.settings}")
            clock = rules.now_micros if rules.now_micros is not None else clock_micros()
            if abs(now - clock) > rules.max_skew_micros:
                raise SettingsMismatch(
                    "state.view.now_micros",
                    f"stated time {now} µs is more than {rules.max_skew_micros // 1_000_000} s from this machine's clock",
                )
        recomputed = commit.view(answer.class_, answer.cases, index, now, settings)
        path = first_difference(answer.view, recomputed)
        if path is not None:
            raise ViewMismatch(f"state.{path}", f"is not what the committed records give at size {index}")
        return VerifiedState(asked, cp, index, answer.state_root, answer.task_classes, answer.class_,
                             tuple(answer.cases), recomputed, answer, witnessed)
    if answer.class_proof is not None or answer.cases or answer.view is not None:
        raise MalformedAnswer("state.class", "an absent class comes with no class proof, cases or view")
    if answer.neighbours is None:
        raise MalformedAnswer("state.neighbours", "an answer without a class record proves its absence by neighbours")
    commit.check_absent(state_root, answer.task_classes, asked, answer.neighbours)
    return VerifiedState(asked, cp, index, answer.state_root, answer.task_classes, None, (), None, answer, witnessed)
