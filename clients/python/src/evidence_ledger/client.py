"""A client for one ledger server that verifies every answer it returns.

    client = Client("http://127.0.0.1:7878", key=VKEY, trust=TrustedState.file("trusted.note"))
    receipt = client.post(ScoreRecorded(...).sign(harness_key))     # checked receipt
    view = client.projection("fix-flaky-test")                        # checked projection

Every receipt, proof and projection is checked against `key` (a note
verifier key the caller trusts) before it is returned, and every signed
checkpoint the client sees is proven consistent with its `TrustedState`.
A refusal raises the typed `ProblemError` for its code; an answer that does
not verify raises a `VerificationError`; a 503 is retried after its
`Retry-After` (writes are idempotent, so a retried post never appends
twice), up to `retries` times.

With a witness `policy` (C2SP tlog-policy, `cosign.Policy`), `checkpoint()`
returns only the server's witnessed checkpoint (`GET /checkpoint`, which
must carry cosignatures that meet the quorum, or `NoQuorum` is raised),
and the trusted state advances only to such checkpoints: every other
signed checkpoint (a receipt's, a proof's, a projection's) is still
proven consistent with the trusted state, but does not replace it.
`witnessed_inclusion(receipt)` proves a receipt's entry into the
witnessed tree.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from .cosign import Policy, WitnessedCheckpoint
from .disclose import check_disclosed
from .envelope import Envelope, decode_leaf
from .errors import (
    ForkDetected,
    InvalidInput,
    LeafMismatch,
    LedgerError,
    MalformedAnswer,
    NotYetWitnessed,
    ProblemError,
    ProofMismatch,
    ServiceUnavailable,
    TransportError,
    VerificationError,
    problem_from,
)
from .merkle import evidence_tree, leaf_hash, verify_inclusion
from .note import Checkpoint, KeyLike, VerifierKey, as_verifier, open_checkpoint
from .timefmt import parse_utc_micros
from .trust import TrustedState
from .verify import (
    BundleSummary,
    ReplayRules,
    VerifiedState,
    _hash,
    _proof,
    check_projection,
    check_receipt,
    check_state,
    verify_bundle,
)
from .wire import (
    EntryView,
    LogInfo,
    ProjectionResponse,
    RecommendationResponse,
    TaskClassSummary,
    TaskClassView,
    WriteReceipt,
    parse_batch,
    parse_consistency,
    parse_entry,
    parse_entry_page,
    parse_inclusion,
    parse_log_info,
    parse_projection,
    parse_receipt,
    parse_recommendation,
    parse_state,
    parse_task_classes,
)

#: The most bytes one batch request carries (under the server's default 1 MiB limit).
BATCH_BODY_BYTES = 512 * 1024
#: The most envelopes one batch request carries (the server takes up to 1,000).
BATCH_SIZE = 500


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class WitnessedInclusion:
    """A receipt's entry proven into the witnessed tree: entry `index` with leaf hash
    `leaf_hash` is included in `witnessed`, the checkpoint a quorum cosigned."""

    index: int
    leaf_hash: str
    witnessed: WitnessedCheckpoint


@dataclass(frozen=True)
class Posted:
    """One envelope's outcome in `post_many`: a checked receipt, or the typed refusal."""

    envelope: Envelope
    receipt: Optional[WriteReceipt]
    refusal: Optional[ProblemError]


class Client:
    """A verifying client for one server (see the module's doc)."""

    def __init__(
        self,
        url: str,
        key: Union[KeyLike, Sequence[KeyLike]],
        *,
        trust: Optional[TrustedState] = None,
        token: Optional[str] = None,
        timeout: float = 30.0,
        retries: int = 5,
        max_retry_wait: float = 30.0,
        policy: Optional[Policy] = None,
    ) -> None:
        self.base = url.rstrip("/")
        keys = [key] if isinstance(key, (str, VerifierKey)) else list(key)
        if not keys:
            raise ValueError("at least one trusted verifier key is needed")
        self.keys: list[VerifierKey] = [as_verifier(k) for k in keys]
        if policy is not None:
            for k in self.keys:
                if not policy.allows_log(k):
                    raise InvalidInput("policy", f"the policy's log lines do not list the trusted key `{k}`")
        self.policy = policy
        self.trust = trust if trust is not None else TrustedState()
        self.trust.load(self.keys)
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.max_retry_wait = max_retry_wait

    @classmethod
    def trusting_server_key(cls, url: str, **kw: Any) -> "Client":
        """A client that takes the verifier key the server names (`GET /v1/log/key`).

        The server then vouches only for its own consistency: a server that
        lies from the start is not caught. Warns; pass a key you obtained
        elsewhere instead where it matters.
        """
        probe = cls.__new__(cls)
        probe.base, probe.token = url.rstrip("/"), kw.get("token")
        probe.timeout, probe.retries, probe.max_retry_wait = kw.get("timeout", 30.0), kw.get("retries", 5), 30.0
        text = probe._text("/v1/log/key").strip()
        warnings.warn(f"trusting the verifier key the server names: {text}", stacklevel=2)
        return cls(url, text, **kw)

    # --- transport ------------------------------------------------------------

    def _request(self, method: str, path: str, body: Optional[bytes] = None) -> Reply:
        """One request, with 503s retried after their Retry-After and connection
        failures retried with backoff (every request this client makes is safe
        to repeat: reads, and idempotent writes)."""
        url = self.base + path
        headers = {"accept": "application/json"}
        if body is not None:
            headers["content-type"] = "application/json"
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        attempt = 0
        while True:
            req = urllib.request.Request(url, data=body, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    reply = Reply(r.status, r.read(), {k.lower(): v for k, v in r.headers.items()})
            except urllib.error.HTTPError as e:
                reply = Reply(e.code, e.read(), {k.lower(): v for k, v in e.headers.items()})
            except (urllib.error.URLError, OSError) as e:
                if attempt >= self.retries:
                    raise TransportError(f"{method} {path}: {e}") from e
                time.sleep(min(0.2 * 2**attempt, self.max_retry_wait))
                attempt += 1
                continue
            if reply.status == 503 and attempt < self.retries:
                time.sleep(self._retry_after(reply))
                attempt += 1
                continue
            return reply

    def _retry_after(self, reply: Reply) -> float:
        try:
            wait = float(reply.headers.get("retry-after", "1"))
        except ValueError:
            wait = 1.0
        return min(max(wait, 0.0), self.max_retry_wait)

    def _raise(self, reply: Reply, what: str) -> None:
        try:
            doc = json.loads(reply.body)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("code"), str):
            raise problem_from(reply.status, doc, self._retry_after(reply) if reply.status == 503 else None)
        if reply.status == 503:
            raise ServiceUnavailable(503, "", f"{what}: {reply.body[:200]!r}")
        raise TransportError(f"{what}: status {reply.status}: {reply.body[:200]!r}")

    def _json(self, method: str, path: str, body: Optional[bytes] = None) -> Any:
        reply = self._request(method, path, body)
        if not 200 <= reply.status < 300:
            self._raise(reply, f"{method} {path}")
        try:
            return json.loads(reply.body)
        except ValueError:
            raise MalformedAnswer(path, "the answer is not JSON") from None

    def _text(self, path: str) -> str:
        reply = self._request("GET", path)
        if not 200 <= reply.status < 300:
            self._raise(reply, f"GET {path}")
        return reply.body.decode("utf-8", "replace")

    # --- trust ----------------------------------------------------------------

    def _consistency(self, first: int, second: int) -> list[bytes]:
        p = parse_consistency(self._json("GET", f"/v1/proofs/consistency?first={first}&second={second}"), "consistency")
        if p.first != first or p.second != second:
            raise MalformedAnswer("consistency", f"asked for {first} -> {second}, answered {p.first} -> {p.second}")
        return _proof("consistency.proof", p.proof)

    def _observe(self, cp: Checkpoint, *, allow_older: bool = True, witnessed: bool = False) -> None:
        advance = self.policy is None or witnessed
        self.trust.observe(cp, self._consistency, allow_older=allow_older, advance=advance)

    def consistency_proof(self, first: int, second: int) -> list[bytes]:
        """The server's RFC 6962 consistency proof between two tree sizes (unverified:
        `merkle.verify_consistency` checks it against roots you trust)."""
        return self._consistency(first, second)

    def observe(self, cp: Checkpoint) -> None:
        """Requires a verified checkpoint (one this client saw before, such as a replica's)
        to be consistent with the trusted state: a newer one is proven to extend it and
        becomes the trusted one (with a policy: only if it meets the quorum), an older one
        is proven a prefix of it."""
        witnessed = False
        if self.policy is not None:
            try:
                self.policy.open_checkpoint(cp.note, self.keys)
                witnessed = True
            except VerificationError:
                witnessed = False
        self._observe(cp, witnessed=witnessed)

    def checkpoint(self) -> Checkpoint:
        """The server's latest checkpoint: signed by a trusted key, not older than the
        trusted state and proven consistent with it (then it becomes the trusted state).
        With a policy, the witnessed one: cosigned by a quorum, or `NoQuorum`."""
        if self.policy is not None:
            return self.witnessed_checkpoint().checkpoint
        cp, _ = open_checkpoint(self._text("/checkpoint"), self.keys)
        self._observe(cp, allow_older=False)
        return cp

    def witnessed_checkpoint(self) -> WitnessedCheckpoint:
        """The server's witnessed checkpoint (`GET /checkpoint` of a server with a witness
        policy): signed by a trusted log key, cosigned by witnesses that meet this client's
        policy (`NoQuorum` otherwise), not older than the trusted state and proven
        consistent with it; it becomes the trusted state. Until the server's first quorum
        it answers 503 `checkpoint_not_witnessed` (retried, then raised)."""
        if self.policy is None:
            raise InvalidInput("policy", "a witnessed checkpoint needs a client with a witness policy")
        w = self.policy.open_checkpoint(self._text("/checkpoint"), self.keys)
        self._observe(w.checkpoint, allow_older=False, witnessed=True)
        return w

    def witnessed_inclusion(
        self,
        receipt: WriteReceipt,
        envelope: Optional[Envelope] = None,
        *,
        wait: float = 0.0,
        poll: float = 0.5,
    ) -> WitnessedInclusion:
        """Proves a receipt's entry into the witnessed tree: checks the receipt (and, given
        the `envelope` posted, that its leaf is that envelope), fetches the witnessed
        checkpoint (`witnessed_checkpoint`), then an inclusion proof of the entry at that
        tree size, verified against the cosigned root. Raises `NotYetWitnessed` while the
        witnessed tree does not cover the entry, after waiting up to `wait` seconds for it
        (polling every `poll` seconds); `ForkDetected` if the log signs another root for
        the witnessed size."""
        cp = check_receipt(receipt, self.keys, envelope)
        self._observe(cp)
        deadline = time.monotonic() + wait
        while True:
            w = self.witnessed_checkpoint()
            if w.size > receipt.index:
                break
            if time.monotonic() >= deadline:
                raise NotYetWitnessed(receipt.index, w.size)
            time.sleep(poll)
        size = w.size
        p = parse_inclusion(self._json("GET", f"/v1/proofs/inclusion?index={receipt.index}&tree_size={size}"), "inclusion")
        if p.index != receipt.index or p.tree_size != size:
            raise VerificationError("inclusion.tree_size", f"asked for entry {receipt.index} in the witnessed tree of size {size}, answered entry {p.index} at size {p.tree_size}")
        if p.leaf_hash != receipt.leaf_hash:
            raise VerificationError("inclusion.leaf_hash", "the proof is of another leaf than the receipt's")
        try:
            verify_inclusion(receipt.index, size, _hash("inclusion.leaf_hash", p.leaf_hash), _proof("inclusion.proof", p.proof), w.root)
        except ProofMismatch as e:
            raise ProofMismatch("inclusion.proof", f"not included in the witnessed tree: {e.reason}") from None
        # The log's own checkpoint at that size must name the root the witnesses cosigned.
        logs, _ = open_checkpoint(p.checkpoint, self.keys, "inclusion.checkpoint")
        if logs.size == size and logs.root != w.root:
            raise ForkDetected("inclusion.checkpoint", f"the log signs two roots for size {size}: the witnessed one and another")
        self._observe(logs)
        return WitnessedInclusion(receipt.index, receipt.leaf_hash, w)

    # --- writes ----------------------------------------------------------------

    def post(self, envelope: Envelope) -> WriteReceipt:
        """Posts one envelope, with the disclosures of its committed values
        (`Envelope.write_body`); returns its receipt once checked (checkpoint signature,
        inclusion proof, the leaf rebuilt from this envelope, consistency with the
        trusted state). A refusal raises its typed `ProblemError`."""
        r = parse_receipt(self._json("POST", "/v1/events", envelope.write_body()), "receipt")
        cp = check_receipt(r, self.keys, envelope)
        self._observe(cp)
        return r

    def post_many(self, envelopes: Iterable[Envelope], *, batch: int = BATCH_SIZE) -> list[Posted]:
        """Posts envelopes through `POST /v1/events/batch`, in order, in batches of at most
        `batch` envelopes and `BATCH_BODY_BYTES`. Each envelope is judged alone: the result
        holds its checked receipt or its typed refusal. Envelopes refused with a 503 code
        are posted again after Retry-After (re-posting is idempotent)."""
        items = list(envelopes)
        bodies = [e.write_body() for e in items]
        out: list[Optional[Posted]] = [None] * len(items)
        pending = list(range(len(items)))
        attempt = 0
        while pending:
            retry: list[int] = []
            wait = 0.0
            k = 0
            while k < len(pending):
                chunk: list[int] = []
                size = 2
                while k < len(pending) and len(chunk) < batch and (not chunk or size + len(bodies[pending[k]]) < BATCH_BODY_BYTES):
                    size += len(bodies[pending[k]]) + 1
                    chunk.append(pending[k])
                    k += 1
                answer = parse_batch(self._json("POST", "/v1/events/batch", b"[" + b",".join(bodies[i] for i in chunk) + b"]"))
                if len(answer.results) != len(chunk):
                    raise VerificationError("batch.results", f"{len(answer.results)} results for {len(chunk)} envelopes")
                checked: Optional[Checkpoint] = None
                for i, item in zip(chunk, answer.results):
                    if item.receipt is not None:
                        cp = check_receipt(item.receipt, self.keys, items[i])
                        if cp.size != answer.tree_size:
                            raise VerificationError("batch.tree_size", "every receipt of a batch is proven in one tree size")
                        checked = cp
                        out[i] = Posted(items[i], item.receipt, None)
                    elif item.problem is not None:
                        p = problem_from(item.status, item.problem)
                        if isinstance(p, ServiceUnavailable) and attempt < self.retries:
                            retry.append(i)
                            wait = max(wait, 1.0)
                        else:
                            out[i] = Posted(items[i], None, p)
                    else:
                        raise MalformedAnswer("batch.results", f"status {item.status} with neither a receipt nor a problem")
                if checked is not None:
                    self._observe(checked)
            pending = retry
            if pending:
                time.sleep(min(wait, self.max_retry_wait))
                attempt += 1
        return [p for p in out if p is not None]

    # --- reads -----------------------------------------------------------------

    def log_info(self) -> LogInfo:
        """`GET /v1/log` (unverified: what the server says of itself)."""
        return parse_log_info(self._json("GET", "/v1/log"))

    def task_classes(self) -> list[TaskClassSummary]:
        return parse_task_classes(self._json("GET", "/v1/task-classes"))

    def entry(self, index: int, tree_size: Optional[int] = None) -> EntryView:
        """Entry `index`, proven included in a signed checkpoint (the latest unless
        `tree_size` is given) that is consistent with the trusted state. To a reader
        with a role (`token` listed in the server's readers file), the disclosures
        served with it are checked against its leaf (`checked_disclosures`: each opens a
        commitment, and each committed field is disclosed or listed in `redacted`, not
        both) and their values returned in `disclosed`."""
        e = parse_entry(self._json("GET", f"/v1/entries/{index}"))
        if e.index != index:
            raise MalformedAnswer("entry.index", f"asked for {index}, answered {e.index}")
        leaf = _b64("entry.leaf", e.leaf)
        if leaf_hash(leaf).hex() != e.leaf_hash:
            raise VerificationError("entry.leaf", "the leaf does not hash to the leaf hash served")
        e = checked_disclosures(e, leaf)
        self.prove_included(index, leaf_hash(leaf), tree_size)
        return e

    def prove_included(self, index: int, leaf: bytes, tree_size: Optional[int] = None) -> Checkpoint:
        """Fetches and verifies an inclusion proof of `leaf` (a leaf hash) at `index`."""
        q = f"index={index}" + (f"&tree_size={tree_size}" if tree_size is not None else "")
        p = parse_inclusion(self._json("GET", f"/v1/proofs/inclusion?{q}"), "inclusion")
        cp, _ = open_checkpoint(p.checkpoint, self.keys, "inclusion.checkpoint")
        if p.tree_size != cp.size or p.index != index:
            raise VerificationError("inclusion.tree_size", "the proof is not for the entry or checkpoint asked for")
        try:
            verify_inclusion(index, cp.size, leaf, _proof("inclusion.proof", p.proof), cp.root)
        except ProofMismatch as e:
            raise ProofMismatch("inclusion.proof", e.reason) from None
        self._observe(cp)
        return cp

    def entries(self, start: int, limit: int = 1000) -> list[EntryView]:
        """A page of entries as served (not proven: `replay.Replica.follow` proves whole
        ranges, and requires a `field.redacted` entry for each field answered as
        redacted). Disclosures served with an entry are checked against its leaf as
        served (`checked_disclosures`), and their values returned in `disclosed`."""
        page = parse_entry_page(self._json("GET", f"/v1/entries?start={start}&limit={limit}")).entries
        return [checked_disclosures(e) for e in page]

    def projection(self, task_class: str) -> ProjectionResponse:
        """A task class's projection, checked (`verify.check_projection`): signed
        checkpoint, every evidence proof, statistics recomputed from the evidence;
        its checkpoint proven consistent with the trusted state."""
        p = parse_projection(self._json("GET", f"/v1/task-classes/{urllib.parse.quote(task_class, safe='')}"))
        if p.view.task_class != task_class:
            raise VerificationError("view.task_class", f"asked for `{task_class}`, answered `{p.view.task_class}`")
        cp, _ = check_projection(p, self.keys)
        self._observe(cp)
        return p

    def state(
        self, task_class: str, *, min_size: Optional[int] = None, rules: Optional[ReplayRules] = ReplayRules()
    ) -> VerifiedState:
        """A task class's committed state (`GET /v1/task-classes/{name}/state`), checked by
        `verify.check_state` with this client's keys and policy: the commitment proven in
        the signed (with a policy: witnessed) checkpoint, every case record of the class
        hashing to the committed state (or the class proven absent), the view recomputed
        from the records bit for bit, stating `rules`' settings and a current time (None:
        unchecked). The commitment may not be older than `min_size` (default: the trusted
        state's size, so no entry this client has already seen is left out:
        `StaleCommitment`); the checkpoint is then proven consistent with the trusted state.
        The server appends the commitment when its log's last entry is not one already."""
        known = self.trust.size if min_size is None else min_size
        answer = parse_state(self._json("GET", f"/v1/task-classes/{urllib.parse.quote(task_class, safe='')}/state"))
        v = check_state(answer, self.keys, task_class, policy=self.policy, min_size=known or 0, rules=rules)
        self._observe(v.checkpoint, witnessed=self.policy is not None)
        return v

    def bundle(self, task_class: str) -> tuple[bytes, BundleSummary]:
        """The task class's offline proof bundle (bytes to archive) and what it establishes."""
        reply = self._request("GET", f"/v1/task-classes/{urllib.parse.quote(task_class, safe='')}/bundle")
        if reply.status != 200:
            self._raise(reply, "bundle")
        summary = verify_bundle(reply.body, self.keys)
        if summary.task_class != task_class:
            raise VerificationError("bundle.view.task_class", f"asked for `{task_class}`, answered `{summary.task_class}`")
        cp, _ = open_checkpoint(summary.projection.checkpoint, self.keys)
        self._observe(cp)
        return reply.body, summary

    def recommend(self, request: Envelope) -> RecommendationResponse:
        """Posts a signed `promotion.requested`; returns the ledger's recommendation once
        checked: the receipt of the `promotion.recommended` entry, that entry read back
        (its sequencing time the receipt's), proven and signed by the ledger's key for
        this request, and the projection it
        was computed from (evidence and statistics), which the entry must state
        (`_check_recommendation_body`: task class, checkpoint, settings, current and
        recommended tiers, rationale and evidence). Advisory: only humans promote."""
        if request.kind != "promotion.requested":
            raise LedgerError(f"a recommendation is asked with promotion.requested, not {request.kind}")
        answer = parse_recommendation(self._json("POST", "/v1/recommendations", request.write_body()))
        rc = answer.recommendation
        cp = check_receipt(rc, self.keys)
        if rc.kind != "promotion.recommended":
            raise VerificationError("recommendation.kind", f"the receipt is for {rc.kind}")
        pcp, _ = check_projection(answer.projection, self.keys)
        self._observe(cp)
        self._observe(pcp)
        entry = parse_entry(self._json("GET", f"/v1/entries/{rc.index}"))
        leaf = _b64("recommendation.leaf", entry.leaf)
        if leaf_hash(leaf).hex() != rc.leaf_hash:
            raise VerificationError("recommendation.leaf_hash", "the entry read back is not the one the receipt proves")
        try:
            rec = decode_leaf(leaf, "recommendation")
        except InvalidInput as e:
            raise MalformedAnswer(e.field, e.rule) from None
        body = rec.body
        # The server names its ledger key; the entry's role was checked when it was
        # appended, and replay (`replay.Replica`) re-checks it from the enrolment.
        if rec.payload.get("signer") != self.log_info().ledger_key_id:
            raise VerificationError("recommendation.signer", "not signed by the ledger's key")
        if rec.kind != "promotion.recommended":
            raise VerificationError("recommendation.kind", f"the entry is {rec.kind}")
        if parse_utc_micros(rc.sequenced_at) != rec.sequenced_at:
            raise VerificationError("recommendation.sequenced_at", "differs from the sequencing time of the entry read back")
        if body.get("request_id") != request.id or body.get("task_class") != request.body.get("task_class"):
            raise VerificationError("recommendation.request_id", "the recommendation answers another request")
        if body.get("requires_human_approval") is not True:
            raise VerificationError("recommendation.requires_human_approval", "must be true")
        _check_recommendation_body(body, answer.projection.view)
        return answer

    def audit_bundle(self, data: bytes) -> BundleSummary:
        """Verifies bundle bytes against this client's keys (no request)."""
        return verify_bundle(data, self.keys)


def _check_recommendation_body(body: Mapping[str, Any], view: TaskClassView) -> None:
    """Raises `VerificationError` (`recommendation.<field>`) unless the
    `promotion.recommended` `body` states the projection `view` it was computed from:
    the same task class; `checkpoint` `{size, root}` the view's tree size and root;
    `settings`, when present, an object (never `null`) stating the view's window,
    confidence and resamples (an entry without it states none); `current_tier` the
    view's current tier (`tier` and `recommendation.current_tier`); the recommended
    tier; `rationale` the view's outcomes `{rule, holds, detail}` in order; and the
    view's evidence (`_check_cited_evidence`)."""
    if body.get("task_class") != view.task_class:
        raise VerificationError("recommendation.task_class", "differs from its projection's")
    cp = body.get("checkpoint")
    if not (
        isinstance(cp, dict) and set(cp) == {"size", "root"} and type(cp["size"]) is int
        and cp["size"] == view.tree_size and cp["root"] == view.root
    ):
        raise VerificationError("recommendation.checkpoint", "differs from its projection's tree size and root")
    if "settings" in body:
        stated = body["settings"]
        if not isinstance(stated, dict):
            raise VerificationError(
                "recommendation.settings", "must be an object {window_seconds, confidence, resamples} when present (never null)"
            )
        want = view.settings
        confidence = stated.get("confidence")
        if not (
            set(stated) == {"window_seconds", "confidence", "resamples"}
            and type(stated["window_seconds"]) is int and stated["window_seconds"] == want.window_seconds
            and type(confidence) in (int, float) and confidence == want.confidence
            and type(stated["resamples"]) is int and stated["resamples"] == want.resamples
        ):
            raise VerificationError("recommendation.settings", "differs from its projection's settings")
    current = body.get("current_tier")
    if current != view.recommendation.current_tier or current != view.tier:
        raise VerificationError("recommendation.current_tier", "differs from its projection's")
    if body.get("recommended_tier") != view.recommendation.recommended_tier:
        raise VerificationError("recommendation.recommended_tier", "differs from its projection's")
    given = body.get("rationale")
    want_rationale = [{"rule": o.rule, "holds": o.holds, "detail": o.detail} for o in view.recommendation.rationale]
    if not (
        isinstance(given, list) and len(given) == len(want_rationale)
        and all(isinstance(g, dict) and g == w and type(g["holds"]) is bool for g, w in zip(given, want_rationale))
    ):
        raise VerificationError("recommendation.rationale", "differs from its projection's")
    _check_cited_evidence(body, [(e.index, e.leaf_hash) for e in view.evidence])


def _check_cited_evidence(body: Mapping[str, Any], evidence: Sequence[tuple[int, str]]) -> None:
    """Raises `VerificationError` unless the `promotion.recommended` `body` cites exactly
    `evidence`, the (index, leaf hash) pairs its projection lists, in order: by
    `evidence_tree` (count and root of `merkle.evidence_tree`, with `evidence` empty),
    or, in a body without one, by its `evidence` list. A present `evidence_tree` is a
    tree: `null` is not read as absent (the ledger refuses it, `invalid_type`)."""
    cited, tree = body.get("evidence"), body.get("evidence_tree")
    if "evidence_tree" in body:
        if not isinstance(tree, dict):
            raise VerificationError("recommendation.evidence_tree", "must be an object {count, root} when present (never null)")
        if cited != []:
            raise VerificationError("recommendation.evidence", "must be empty when the evidence is cited by evidence_tree")
        count, root = evidence_tree(evidence)
        if tree != {"count": count, "root": root} or type(tree["count"]) is not int:
            raise VerificationError("recommendation.evidence_tree", "the recommendation cites other evidence than its projection")
        return
    cited_pairs = [(e.get("index"), e.get("leaf_hash")) for e in cited if isinstance(e, dict)] if isinstance(cited, list) else None
    if cited_pairs != list(evidence):
        raise VerificationError("recommendation.evidence", "the recommendation cites other evidence than its projection")


def checked_disclosures(e: EntryView, leaf: Optional[bytes] = None) -> EntryView:
    """`e` with its disclosures checked against its leaf (`leaf`, or the one served) and
    their values in `disclosed`; `e` itself when it carries none (a reader without a
    role). Raises `DisclosureMismatch` for a disclosure that does not open a commitment
    of the leaf, `LeafMismatch` for an entry served as another kind than its leaf's
    (`entry N.kind`), and `MalformedAnswer` for a leaf that does not decode, or for an answer
    that breaks docs/PRIVACY.md's rule that each committed field is served to a reader
    with a role either disclosed or listed in `redacted`, never both and never neither:
    a `redacted` path that is not a committed field of the entry (`entry N.redacted[i]`),
    a path both disclosed and listed in `redacted` (`entry N.redacted[i]`), or, where
    disclosures are served, a committed field neither disclosed nor listed in `redacted`
    (`entry N.disclosures`, naming the field).

    An answer alone cannot show that a field listed in `redacted` was redacted: a walk
    of the log (`replay.Replica.follow`) requires a `field.redacted` entry for each."""
    if e.disclosures is None and e.redacted is None:
        return e
    what = f"entry {e.index}"
    raw = leaf if leaf is not None else _b64(f"{what}.leaf", e.leaf)
    try:
        d = decode_leaf(raw, f"{what}.leaf")
    except InvalidInput as err:
        raise MalformedAnswer(err.field, err.rule) from None
    if d.kind != e.kind:
        # The disclosures are read by the leaf's kind; a server that serves another
        # kind beside them misleads whoever reads the kind alone.
        raise LeafMismatch(f"{what}.kind", f"served as `{e.kind}`, but its leaf is a `{d.kind}`")
    opened = check_disclosed(d.kind, d.body, e.disclosures or [], what)
    disclosed = {o.path: o.value is not None for o in opened}
    redacted = e.redacted or []
    for i, path in enumerate(redacted):
        if path not in disclosed:
            raise MalformedAnswer(f"{what}.redacted[{i}]", f"`{path}` is answered as redacted, but the entry commits to no such field")
        if disclosed[path]:
            raise MalformedAnswer(f"{what}.redacted[{i}]", f"`{path}` is both disclosed and answered as redacted")
    if e.disclosures is not None:
        for o in opened:
            if o.value is None and o.path not in redacted:
                raise MalformedAnswer(
                    f"{what}.disclosures",
                    f"`{o.path}` is neither disclosed nor answered as redacted (a reader with a role is served "
                    "each committed field's disclosure, or the field under `redacted`)",
                )
    return dataclasses.replace(e, disclosed=opened)


def _b64(field: str, text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise MalformedAnswer(field, "not base64") from None
