"""Completeness by replay (`verifier/src/replay.rs` and `audit.rs`, in Python).

A projection answer proves that every evidence entry it cites is in the
log. It does not prove that nothing was left out: a server can omit a
case's newer, lower score, cite an older one in its place, drop a block
failure or count a retired case, and every cited entry is still real. A
replica closes that gap. It follows the server's log from a trusted
checkpoint, checks every entry, folds each one with the ledger's rules
(`acceptance`) and the projection fold (`fold`), and then requires each
projection the server answers to equal its own view at the same tree size,
time and settings: every key of the JSON as served, floats bit for bit.

- `Replica`: the replica, kept in a directory (`replica.json`, see
  `Replica.save`). `follow` fetches `/v1/entries` from where it stands to a
  signed checkpoint: each leaf must re-hash to the leaf hash served, each
  chain hash follow from the entries before it, and every `STEP` entries
  must hash to a root proven (RFC 6962 consistency proof) to be a prefix of
  the signed tree, before anything is folded for good. To a reader with a
  role, each entry's disclosures must open its commitments and each of its
  committed fields be disclosed or answered as redacted
  (`client.checked_disclosures`), each field answered as redacted must
  be recorded by a `field.redacted` entry of the walk (docs/PRIVACY.md),
  and no value may be given a second handle nor a handle be named beside
  another value (`handles.Audit`, as `ledger verify --token` checks it;
  values in clear before the switch to schema 3 are checked for any
  reader), over the entries followed since the replica was opened.
- `first_difference`: the first JSON path where a served view differs
  from the replayed one (`verifier::replay::first_difference`).
- `replay_projections`: the audit of every listed task class
  (`ledger audit --projections DIR`); `Gate`: one task class's verified
  projection, or a recommendation, for a promotion gate. `Gate` does not
  hold the `promotion.recommended` entries among those it follows to the
  replica's view (below); `replay_projections` and `audit --projections`
  do.

Every `state.committed` entry the replica folds is checked against its own
fold (`WrongStateRoot`), so a replay also audits the state commitments that
state answers (`verify.check_state`) rest on; `Gate.verified_state` checks
a state answer and then the commitment it rests on. With the agreed
settings (`replay_projections`, or `Replica.check_recommendations_with`;
not `Gate`), every `promotion.recommended` entry the replica follows is
held to its own view at the recommendation's checkpoint and time, computed
with the settings the recommendation states (the agreed ones for an entry
that states none): that time must lie between the sequencing times of the
last entry it rests on and of the recommendation itself, the settings it
states must be in range (a window of at least 1 s, a confidence strictly
between 0 and 1, 1 to 100,000 resamples), and the current and recommended
tiers, the rationale and the evidence (tree or list) must be what the log
up to that checkpoint gives (`Incomplete`, naming the entry);
`Replayed.recommendations` counts them.

What it proves: each projection compared is the one the whole log up to its
signed checkpoint gives, at the agreed settings and a current time, and the
log obeys the ledger's rules. What it still trusts: the verifier key; the
trusted checkpoint and the replica's directory (keep both where the server
cannot write); that everyone else is shown the same log (anchors and
witnesses answer that, not a replay).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import tempfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from .acceptance import MAX_RESAMPLES, State
from .client import Client
from .envelope import Envelope, Leaf, decode_leaf
from .errors import (
    ForkDetected,
    Incomplete,
    InvalidInput,
    LeafMismatch,
    ProofMismatch,
    ReplicaError,
    RuleBroken,
    SettingsMismatch,
    StaleCheckpoint,
    VerificationError,
    WrongStateRoot,
)
from .fold import Projection, ProjectionError, UnknownTaskClass
from .fold import first_difference as first_difference
from .handles import Audit
from .merkle import EMPTY_ROOT, GENESIS_CHAIN, Frontier, chain_hash, evidence_tree, leaf_hash, verify_consistency
from .note import Checkpoint, KeyLike, as_verifier, open_checkpoint
from .stats import Settings
from .timefmt import now_micros as clock_micros
from .timefmt import parse_utc_micros
from .verify import ReplayRules as ReplayRules
from .verify import VerifiedState
from .wire import EntryView, ProjectionResponse, RecommendationResponse

#: How many entries are folded between two proofs against the signed root.
STEP = 10_000
#: How many entries one page request asks for.
PAGE = 1000
#: How many entries the fold may stay behind the replica's head while recommendations
#: are checked (`Replica.check_recommendations_with`): a recommendation whose checkpoint
#: is further back is checked on a projection folded afresh from the first entry.
LAG = 1024
#: The replica file's name in its directory, its format and version.
STATE_FILE = "replica.json"
FORMAT = "evidence-ledger/python-replica"
VERSION = 1

#: Progress callback: (what, done, total).
Progress = Callable[[str, int, int], None]


def _quiet(what: str, done: int, total: int) -> None:
    pass


class Replica:
    """A replica of one server's log and its projection, kept in a directory.

    `Replica.open(dir, keys)` loads what the last run saved (or starts
    empty); `follow` brings it to a signed checkpoint; `view` answers as the
    server must; `save` keeps it for the next run, which then fetches and
    folds only what is new.
    """

    def __init__(self, directory: Union[str, Path], keys: Sequence[KeyLike]) -> None:
        self.dir = Path(directory)
        self.path = self.dir / STATE_FILE
        self.keys = [as_verifier(k) for k in keys]
        self.fold = Projection()
        self.rules = State()
        self.chain = GENESIS_CHAIN
        #: The signed checkpoint the replica is at (None while empty and never saved).
        self.checkpoint: Optional[Checkpoint] = None
        self.step = STEP
        #: Entries fetched and folded since the replica was opened.
        self.followed = 0
        #: Recommendations `follow` checked since `check_recommendations_with` (None before it).
        self.recommendations: Optional[int] = None
        #: The settings recommendations are checked with (None: they are not checked).
        self._agreed: Optional[Settings] = None
        #: While recommendations are checked: the entries taken and not yet folded, in
        #: order, and the tree of every entry taken (read only while some wait).
        self._unfolded: deque[tuple[int, bytes, Leaf]] = deque()
        self._tree = Frontier()
        #: One value, one handle, over the entries followed since the replica was opened
        #: (`handles.Audit`; in memory only, never saved).
        self.handles = Audit()

    @classmethod
    def open(cls, directory: Union[str, Path], keys: Sequence[KeyLike]) -> "Replica":
        """The replica saved in `directory`, or an empty one. Raises `ReplicaError` when
        the file is not a replica of this format and version, was changed, is not at a
        checkpoint signed by one of `keys`, or its fold is not at that checkpoint."""
        r = cls(directory, keys)
        if not r.path.exists():
            return r
        where = str(r.path)
        try:
            doc = json.loads(r.path.read_bytes())
        except (OSError, ValueError) as e:
            raise ReplicaError(f"{where}: not readable JSON: {e}") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ReplicaError(f"{where}: not a replica file ({FORMAT})")
        if doc.get("version") != VERSION:
            raise ReplicaError(f"{where}: replica version {doc.get('version')!r}; this package reads version {VERSION}")
        body = doc.get("body")
        if not isinstance(body, dict) or doc.get("sha256") != _digest(body):
            raise ReplicaError(f"{where}: the body does not match its SHA-256 (the file was changed or damaged)")
        try:
            cp, _ = open_checkpoint(body["checkpoint"], r.keys, "replica checkpoint")
        except VerificationError as e:
            raise ReplicaError(f"{where}: its checkpoint is not signed by a trusted key: {e}") from None
        except (KeyError, TypeError) as e:
            raise ReplicaError(f"{where}: no checkpoint: {e}") from None
        try:
            r.fold = Projection.from_json(body["fold"])
            r.rules = State.from_json(body["rules"])
            r.chain = bytes.fromhex(body["chain"])
        except (KeyError, TypeError, ValueError, IndexError, InvalidInput) as e:
            raise ReplicaError(f"{where}: malformed state: {e!r}") from None
        if not (r.fold.size == r.rules.size == cp.size) or r.fold.root() != cp.root or len(r.chain) != 32:
            raise ReplicaError(
                f"{where}: the folded state (size {r.fold.size}, root {r.fold.root().hex()}) is not at its "
                f"signed checkpoint (size {cp.size}, root {cp.root_hex})"
            )
        r.checkpoint = cp
        return r

    @property
    def size(self) -> int:
        return self.fold.size + len(self._unfolded)

    def root(self) -> bytes:
        return self._tree.root() if self._unfolded else self.fold.root()

    def check_recommendations_with(self, settings: Settings) -> None:
        """With the settings a server computes its projections with (the agreed ones):
        from then on, `follow` also holds every `promotion.recommended` entry it takes to
        the replica's own view of its task class at its checkpoint, at its `issued_at`
        time and with the settings it states (`settings` for an entry that states
        none), and counts them in `recommendations`
        (`verifier::replay::Replica::check_recommendations_with`). Stated settings out
        of range (a window under 1 s, a confidence not strictly between 0 and 1,
        resamples not from 1 to `MAX_RESAMPLES`) fail the check. Its time decides where
        the window starts, so it must be no later than the entry's own sequencing time
        and, for a checkpoint of size n > 0, no earlier than entry n - 1's (the last it
        rests on: an honest ledger states max(its clock, the request's and that entry's
        sequencing times)). The current and
        recommended tiers and the rationale must be the view's, and the evidence the
        view's (index, leaf hash) references: by `evidence_tree` (`merkle.evidence_tree`,
        with `evidence` empty) or, in an entry without a tree, as the `evidence` list. A
        difference raises `Incomplete`, naming the entry and the part. While `follow`
        runs, the fold stays up to `LAG` entries behind the entries taken; a checkpoint
        it is already past is folded afresh from the first entry, each one fetched again
        and proven a prefix of the replica's tree."""
        self._agreed = settings
        self.recommendations = 0

    def task_classes(self) -> list[str]:
        """The task classes the log registers, up to the replica's size."""
        return self.fold.task_classes()

    @property
    def last_sequenced_at(self) -> Optional[int]:
        """When the replica's last entry was sequenced (µs, UTC)."""
        return self.fold.last_at

    def follow(self, client: Client, cp: Checkpoint, progress: Progress = _quiet) -> int:
        """Brings the replica to the signed, verified checkpoint `cp` (see the module's doc);
        returns how many entries were added. `StaleCheckpoint` if `cp` is older than the
        replica, `ForkDetected` if the served log does not extend it or is not the signed
        one, `LeafMismatch` for an entry that is not what it claims, `RuleBroken` for an
        entry the ledger's rules refuse (and, from the disclosures served to a reader with
        a role, for a value given a second handle, `handle_value_bound`, or a handle named
        beside another value, `handle_value_mismatch`: `handles.Audit`, over the entries
        followed since the replica was opened), `DisclosureMismatch` or `MalformedAnswer` for
        disclosures served to a reader with a role that do not answer for the entry's
        committed fields (`client.checked_disclosures`), and `Incomplete` for a field
        answered as redacted that no `field.redacted` entry up to `cp` records: the
        server withholds a disclosure under a redaction the log does not hold (or the
        redaction was appended after `cp` while this ran: run again), and
        `SigstoreUnavailable` for an entry holding a Sigstore bundle or trusted root when
        the optional sigstore-python is not installed (never accepted unverified). After
        `check_recommendations_with`, each `promotion.recommended` entry taken must be
        the replica's own view at its checkpoint and time, a time between the sequencing
        times of the last entry it rests on and of itself (`Incomplete` otherwise,
        naming the entry). On any failure the replica must not be saved."""
        head = self.size
        size, root = cp.size, cp.root
        if size < head:
            raise StaleCheckpoint(head, size)
        if size == head:
            if root != self.root():
                raise ForkDetected("checkpoint", f"the server signs a root for size {size} that is not the replica's")
            self.checkpoint = cp
            return 0
        cites: list[tuple[int, str, str, int]] = []
        # Committed fields answered as redacted: (entry, path).
        claimed: set[tuple[int, str]] = set()
        nxt = head
        while nxt < size:
            end = min(nxt + self.step, size)
            while self.size < end:
                at = self.size
                page = client.entries(at, min(end - at, PAGE))
                if not page:
                    raise ForkDetected("entries", f"the server returned no entries at {at} below its checkpoint size {size}")
                for e in page[: end - at]:
                    decoded = self._take(e, cites, cp.origin)
                    claimed.update((e.index, path) for path in e.redacted or [])
                    if self._agreed is not None:
                        if decoded.kind == "promotion.recommended":
                            self._check_recommendation(client, e.index, decoded, self._agreed)
                        self._fold_to(self.size - LAG)
            step_root = self.root()
            if end < size:
                try:
                    verify_consistency(end, step_root, size, root, client.consistency_proof(end, size))
                except ProofMismatch as err:
                    raise ForkDetected(
                        "entries", f"entries {nxt}..{end} are not a prefix of the signed tree of size {size}: {err.reason}"
                    ) from None
            elif step_root != root:
                raise ForkDetected("entries", f"the {size} entries served do not hash to the signed root")
            for csize, croot, field, index in cites:
                self._prove_cited(client, csize, croot, field, index, end, step_root)
            cites.clear()
            nxt = end
            progress("following the log", nxt - head, size - head)
        self._fold_to(size)
        self._redactions_recorded(claimed, size)
        self.checkpoint = cp
        self.followed += size - head
        return size - head

    def _take(self, e: EntryView, cites: list[tuple[int, str, str, int]], origin: Optional[str] = None) -> Leaf:
        """Checks the served entry `e` as the next one and folds it (while recommendations
        are checked: keeps it to be folded, `_fold_to`); returns it decoded. `origin` is
        the log's checkpoint origin, which a `sigstore.root_trusted` entry must name."""
        index = self.size
        if e.index != index:
            raise ForkDetected("entries", f"the server returned entry {e.index} where {index} was expected")
        try:
            leaf = base64.b64decode(e.leaf.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise LeafMismatch(f"entry {index}", "the leaf is not base64") from None
        lh = leaf_hash(leaf)
        if lh.hex() != e.leaf_hash:
            raise LeafMismatch(f"entry {index}", f"first bad index {index}: the leaf does not hash to the leaf hash served")
        chain = chain_hash(self.chain, leaf)
        if chain.hex() != e.chain_hash:
            raise ForkDetected(f"entry {index}", f"first bad index {index}: the chain hash served is not the chain of the entries before it")
        try:
            decoded: Leaf = decode_leaf(leaf, f"entry {index}")
        except InvalidInput as err:
            raise RuleBroken(index, err.code or "malformed_envelope", err.field, err.rule) from None

        def cite(csize: int, croot: str, field: str) -> None:
            # The log just before this entry is the replica's own (proven with the step).
            if csize == index:
                if croot != self.root().hex():
                    raise RuleBroken(index, "checkpoint_unknown", field, f"({csize}, {croot}) is not a committed checkpoint of this log")
                return
            cites.append((csize, croot, field, index))

        self.rules.check(decoded, index, cite, origin)
        # One value, one handle (docs/PRIVACY.md, "Handles"): from the disclosures served
        # to a reader with a role, and from the values in clear before the switch.
        self.handles.see(index, decoded.payload, e.disclosed)
        self.rules.apply(decoded, index)
        if self._agreed is None:
            self.fold.apply(index, leaf, decoded)
        else:
            if not self._unfolded:
                self._tree = Frontier.from_nodes(self.fold.frontier.size, self.fold.frontier.nodes)
            self._unfolded.append((index, leaf, decoded))
            self._tree.push(lh)
        self.chain = chain
        return decoded

    def _fold_to(self, size: int) -> None:
        """Folds the entries taken and not yet folded, up to `size` entries."""
        while self._unfolded and self.fold.size < size:
            index, leaf, decoded = self._unfolded[0]
            self.fold.apply(index, leaf, decoded)
            self._unfolded.popleft()

    def _check_recommendation(self, client: Client, index: int, d: Leaf, settings: Settings) -> None:
        """Holds the `promotion.recommended` entry `d` at `index` to the view of the log up
        to its checkpoint, at its time, with the settings it states, or `settings` for an
        entry that states none (`check_recommendations_with`;
        `projections::driver::Projector::check_recommendation`). Raises `Incomplete`.
        Entry size - 1's sequencing time, the lower bound of its time, is the `last_at`
        of the projection of the first `size` entries the view is computed from: the
        fold itself (at `size` already, or folded to it from the entries it lags
        behind), or the one folded afresh."""
        r = d.body
        size = r["checkpoint"]["size"]

        def differs(what: str) -> Incomplete:
            return Incomplete(f"the recommendation at entry {index}", f"{what}, not what the log up to size {size} gives")

        if size > index:
            raise differs(f"its checkpoint {size} is past it")
        issued = d.payload.get("issued_at")
        now = parse_utc_micros(issued) if isinstance(issued, str) else None
        if now is None:
            raise differs(f"its time `{issued}` does not parse")
        # Its time decides the window: no later than it was itself sequenced, and no
        # earlier than the last entry it rests on (entry size - 1, the last one folded
        # into the projection of its first `size` entries, whichever way it is folded).
        if now > d.sequenced_at:
            raise differs(f"its time {issued} is after it was sequenced")
        if self.fold.size <= size:
            self._fold_to(size)
            fold = self.fold
        else:
            fold = self._fold_afresh(client, size)
        last = fold.last_at
        if fold.size != size or (last is None) != (size == 0):
            raise ReplicaError(f"the fold of {fold.size} entries is not the {size} the recommendation at entry {index} rests on")
        if last is not None and now < last:
            raise differs(f"its time {issued} is before entry {size - 1} it rests on was sequenced")
        stated = r.get("settings")
        if stated is not None:
            window, confidence, resamples = stated["window_seconds"], stated["confidence"], stated["resamples"]
            if not (window >= 1 and 0 < confidence < 1 and 1 <= resamples <= MAX_RESAMPLES):
                raise differs("its settings are out of range")
            settings = Settings(window, float(confidence), resamples)
        try:
            view = fold.view(r["task_class"], now, settings, size, fold.root())
        except ProjectionError as e:
            raise differs(str(e)) from None
        refs = [(int(e["index"]), str(e["leaf_hash"])) for e in view["evidence"]]
        tree = r.get("evidence_tree")
        if tree is not None:
            count, root = evidence_tree(refs)
            same_evidence = r["evidence"] == [] and tree == {"count": count, "root": root}
        else:
            same_evidence = r["evidence"] == [{"index": i, "leaf_hash": lh} for i, lh in refs]
        if r["current_tier"] != view["tier"]:
            raise differs("its current tier")
        if r["recommended_tier"] != view["recommendation"]["recommended_tier"]:
            raise differs("its recommended tier")
        if r["rationale"] != view["recommendation"]["rationale"]:
            raise differs("its rationale")
        if not same_evidence:
            raise differs("its evidence")
        self.recommendations = (self.recommendations or 0) + 1

    def _fold_afresh(self, client: Client, size: int) -> Projection:
        """A projection of the first `size` entries, fetched again from the server, for a
        checkpoint the fold is already past. They must be the replica's own: an entry
        that does not fold, or a tree of them that is not proven a prefix of the
        replica's (a consistency proof from `size` to the replica's size), is
        `ForkDetected`."""
        fresh = Projection()
        try:
            while fresh.size < size:
                at = fresh.size
                page = client.entries(at, min(size - at, PAGE))
                if not page:
                    raise ForkDetected("entries", f"the server returned no entries at {at} below size {size}")
                for e in page[: size - at]:
                    if e.index != fresh.size:
                        raise ForkDetected("entries", f"the server returned entry {e.index} where {fresh.size} was expected")
                    fresh.apply(e.index, base64.b64decode(e.leaf.encode("ascii"), validate=True))
        except (binascii.Error, UnicodeEncodeError, ValueError, ProjectionError, WrongStateRoot) as err:
            raise ForkDetected("entries", f"an entry below {size}, served again, is not the replica's: {err}") from None
        if size == 0:
            return fresh
        try:
            verify_consistency(size, fresh.root(), self.size, self.root(), client.consistency_proof(size, self.size))
        except ProofMismatch as err:
            raise ForkDetected("entries", f"the first {size} entries, served again, are not the replica's: {err.reason}") from None
        return fresh

    def _redactions_recorded(self, claimed: set[tuple[int, str]], size: int) -> None:
        """Once the walk to `size` is over: every field answered as redacted, (entry,
        path) in `claimed`, is recorded as redacted by a `field.redacted` entry the
        replica folded (`State.redactions`, read from the leaves and checked by the
        ledger's rules, whatever kind the server names). A redaction comes after the
        entry it redacts, so it is one of this walk's entries. Raises `Incomplete`."""
        missing = sorted(claimed - self.rules.redactions)
        if missing:
            entry, path = missing[0]
            raise Incomplete(
                f"entry {entry}.redacted",
                f"`{path}` is answered as redacted, but no `field.redacted` entry below {size} records it "
                "(a redaction appended while this ran is past the checkpoint: run again)",
            )

    @staticmethod
    def _prove_cited(client: Client, csize: int, croot: str, field: str, index: int, size: int, root: bytes) -> None:
        """A checkpoint entry `index` cites is one of this log's: (csize, croot) is a
        prefix of the proven tree (size, root)."""
        claimed = bytes.fromhex(croot)
        ok = True
        if csize == 0:
            ok = claimed == EMPTY_ROOT
        elif csize == size:
            ok = claimed == root
        else:
            try:
                verify_consistency(csize, claimed, size, root, client.consistency_proof(csize, size))
            except ProofMismatch:
                ok = False
        if not ok:
            raise RuleBroken(index, "checkpoint_unknown", field, f"({csize}, {croot}) is not a committed checkpoint of this log")

    def view(self, task_class: str, now_micros: int, settings: Settings) -> dict[str, Any]:
        """The replica's view of `task_class` at its checkpoint, as the server must serialize it."""
        cp = self.checkpoint
        if cp is None:
            raise ReplicaError("the replica has followed no checkpoint yet")
        return self.fold.view(task_class, now_micros, settings, cp.size, cp.root)

    def save(self) -> None:
        """Writes the replica to `replica.json` in its directory, atomically:
        `{"format", "version", "sha256", "body": {"checkpoint", "chain", "fold", "rules"}}`,
        where `sha256` is over the body's canonical JSON (sorted keys, no spaces)."""
        if self.checkpoint is None:
            raise ReplicaError("the replica has followed no checkpoint yet")
        if self._unfolded:
            raise ReplicaError("the replica's last follow did not finish")
        body = {
            "checkpoint": self.checkpoint.note,
            "chain": self.chain.hex(),
            "fold": self.fold.to_json(),
            "rules": self.rules.to_json(),
        }
        doc = {"format": FORMAT, "version": VERSION, "sha256": _digest(body), "body": body}
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".replica-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, sort_keys=True, separators=(",", ":"), allow_nan=False)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def _digest(body: Any) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()).hexdigest()


# --- the audit and the gate --------------------------------------------------------


@dataclass(frozen=True)
class Replayed:
    """What a replay established."""

    #: The replica's size after the run.
    size: int
    #: Entries fetched, checked and folded in this run.
    followed: int
    #: Task classes whose served view equals the replica's, bit for bit.
    task_classes: int
    #: Recommendations among the entries followed that equal the replica's own view
    #: at their checkpoint and time (`Replica.check_recommendations_with`).
    recommendations: int


def _stated(p: ProjectionResponse, cp: Checkpoint, audited: Optional[Checkpoint], rules: ReplayRules, now: int) -> None:
    """The answer is no older than the audited checkpoint and states the agreed settings and a current time."""
    tc = p.view.task_class
    if audited is not None and cp.size < audited.size:
        raise StaleCheckpoint(audited.size, cp.size)
    if p.view.settings != rules.settings:
        raise SettingsMismatch(
            f"projection `{tc}`.view.settings", f"stated settings {p.view.settings} are not the agreed {rules.settings}"
        )
    if abs(p.view.now_micros - now) > rules.max_skew_micros:
        raise SettingsMismatch(
            f"projection `{tc}`.view.now_micros",
            f"stated time {p.view.now_micros} µs is more than {rules.max_skew_micros // 1_000_000} s from this machine's clock",
        )


def _compare(client: Client, replica: Replica, p: ProjectionResponse, cp: Checkpoint) -> None:
    """Follows `cp` (the answer's signed checkpoint) and requires the served view to be the
    replica's, at a stated time no earlier than its last entry was sequenced."""
    tc = p.view.task_class
    replica.follow(client, cp)
    last = replica.last_sequenced_at
    if last is not None and p.view.now_micros < last:
        raise Incomplete(
            f"projection `{tc}`",
            f"stated time {p.view.now_micros} µs is before its last entry was sequenced ({last} µs)",
        )
    try:
        replayed = replica.view(tc, p.view.now_micros, p.view.settings)
    except UnknownTaskClass:
        raise Incomplete(f"projection `{tc}`", f"not registered in the log up to size {cp.size}") from None
    path = first_difference(p.raw.get("view"), replayed)
    if path is not None:
        raise Incomplete(f"projection `{tc}`", f"`{path}` is not what the log up to size {cp.size} gives")


def _compare_answered(client: Client, replica: Replica, answer: RecommendationResponse, cp: Checkpoint, rules: ReplayRules) -> None:
    """The projection of a recommendation made before (`Gate.recommend`, a request posted
    again), at `cp`, its signed checkpoint, which the replica is already past: it states
    the agreed settings, `cp` is a prefix of the replica's tree (`ForkDetected`), its
    stated time lies between the sequencing times of entry `cp.size - 1` and of the
    recommendation (`Client.recommend` checked the receipt's against the entry read
    back), and the view equals the one the log up to `cp` gives at that time, folded
    afresh (`Replica._fold_afresh`: the entries fetched again and proven the replica's).
    Raises `SettingsMismatch`, `ForkDetected` or `Incomplete`."""
    p = answer.projection
    tc = p.view.task_class
    if p.view.settings != rules.settings:
        raise SettingsMismatch(
            f"projection `{tc}`.view.settings", f"stated settings {p.view.settings} are not the agreed {rules.settings}"
        )
    fold = replica._fold_afresh(client, cp.size)
    if fold.root() != cp.root:
        raise ForkDetected(f"projection `{tc}`.checkpoint", f"the server signs a root for size {cp.size} that is not the replica's")
    now = p.view.now_micros
    last = fold.last_at
    if last is not None and now < last:
        raise Incomplete(f"projection `{tc}`", f"stated time {now} µs is before its last entry was sequenced ({last} µs)")
    answered = parse_utc_micros(answer.recommendation.sequenced_at)
    if answered is None or now > answered:
        raise Incomplete(
            f"projection `{tc}`",
            f"stated time {now} µs is after its recommendation (entry {answer.recommendation.index}) was sequenced ({answered} µs)",
        )
    try:
        replayed = fold.view(tc, now, p.view.settings, cp.size, cp.root)
    except UnknownTaskClass:
        raise Incomplete(f"projection `{tc}`", f"not registered in the log up to size {cp.size}") from None
    path = first_difference(p.raw.get("view"), replayed)
    if path is not None:
        raise Incomplete(f"projection `{tc}`", f"`{path}` is not what the log up to size {cp.size} gives")


def _checkpoint_of(p: ProjectionResponse, keys: Sequence[KeyLike]) -> Checkpoint:
    cp, _ = open_checkpoint(p.checkpoint, keys, f"projection `{p.view.task_class}`.checkpoint")
    return cp


def replay_projections(
    client: Client,
    replica: Replica,
    rules: ReplayRules = ReplayRules(),
    progress: Progress = _quiet,
) -> Replayed:
    """Checks every task class's projection for completeness by replay
    (`verifier::audit::audit_projections`), then saves the replica.

    The replica is first proven consistent with the client's trusted state and
    follows the server's latest checkpoint (which becomes the trusted one). Each
    listed task class's projection is then checked (`Client.projection`: signature,
    evidence, statistics), must be no older than that checkpoint, state the agreed
    settings and a time within the allowed skew; the replica follows each answer's
    checkpoint in order of size (`Replica.follow`, which also holds the disclosures
    and redactions served to a reader with a role to the log, and every
    `promotion.recommended` entry it takes to its own view at the settings the entry
    states, or the agreed ones for an entry that states none:
    `Replica.check_recommendations_with`), and its own view must equal the served
    one. Every task class the log registers must be on the list.
    Raises `SettingsMismatch`, `Incomplete`, `StaleCheckpoint`, `ForkDetected`,
    `LeafMismatch`, `RuleBroken` or any other `VerificationError` of the checks; the
    replica is saved only on success.
    """
    start = replica.size
    replica.check_recommendations_with(rules.settings)
    audited = _start(client, replica)
    now = rules.now_micros if rules.now_micros is not None else clock_micros()
    answers: list[tuple[Checkpoint, ProjectionResponse]] = []
    for c in client.task_classes():
        p = client.projection(c.task_class)
        cp = _checkpoint_of(p, client.keys)
        _stated(p, cp, audited, rules, now)
        answers.append((cp, p))
    answers.sort(key=lambda a: a[0].size)
    for k, (cp, p) in enumerate(answers):
        progress("replaying the log", k, len(answers))
        _compare(client, replica, p, cp)
    listed = {c.task_class for c in client.task_classes()}
    for hidden in replica.task_classes():
        if hidden not in listed:
            raise Incomplete(f"task class `{hidden}`", "registered in the log but left off the list of task classes")
    progress("replaying the log", len(answers), len(answers))
    replica.save()
    return Replayed(
        size=replica.size,
        followed=replica.size - start,
        task_classes=len(answers),
        recommendations=replica.recommendations or 0,
    )


def _start(client: Client, replica: Replica) -> Checkpoint:
    """Proves the replica's checkpoint consistent with the client's trusted state (the
    replica's is a checkpoint this client saw before), then follows the latest one."""
    if replica.checkpoint is not None:
        client.observe(replica.checkpoint)
    audited = client.checkpoint()
    if client.policy is not None and replica.checkpoint is not None and audited.size < replica.size:
        # The witnessed checkpoint lags the log's head, which the replica may have
        # followed through a projection's checkpoint: it must be a prefix of the replica.
        try:
            verify_consistency(audited.size, audited.root, replica.size, replica.root(), client.consistency_proof(audited.size, replica.size))
        except ProofMismatch as e:
            raise ForkDetected("checkpoint", f"the witnessed tree of size {audited.size} is not a prefix of the replica's: {e.reason}") from None
        return audited
    replica.follow(client, audited)
    return audited


@dataclass(frozen=True)
class VerifiedProjection:
    """A projection that passed the evidence check and equals the replica's own view."""

    projection: ProjectionResponse
    #: The replica's size when it agreed.
    replica_size: int

    @property
    def recommended_tier(self) -> str:
        return self.projection.view.recommendation.recommended_tier


class Gate:
    """The promotion gate's replayed reads: one task class at a time.

        gate = Gate(client, "gate-replica")          # client with a TrustedState.file(...)
        v = gate.verified_projection("dependency-bump")
        answer = gate.recommend(ev.PromotionRequested("dependency-bump").sign(gate_key))

    Each call brings the replica to the server's latest checkpoint, requires the
    answer to state the agreed settings and a current time, to pass the evidence
    check, and to equal the replica's own view bit for bit; then saves the replica.
    It does not hold the `promotion.recommended` entries among those the replica
    follows to the replica's own view (`Replica.check_recommendations_with`):
    `replay_projections` and `audit --projections` do. `recommend` checks the one
    recommendation it is answered with as `Client.recommend` does, and its
    projection against the replica (for a request posted again, the recommendation
    made for it before, against the log up to its checkpoint).
    """

    def __init__(self, client: Client, directory: Union[str, Path], rules: ReplayRules = ReplayRules()) -> None:
        self.client = client
        self.replica = Replica.open(directory, client.keys)
        self.rules = rules

    def _now(self) -> int:
        return self.rules.now_micros if self.rules.now_micros is not None else clock_micros()

    def verified_projection(self, task_class: str) -> VerifiedProjection:
        """The task class's projection, checked complete against the whole log."""
        audited = _start(self.client, self.replica)
        p = self.client.projection(task_class)
        cp = _checkpoint_of(p, self.client.keys)
        _stated(p, cp, audited, self.rules, self._now())
        _compare(self.client, self.replica, p, cp)
        self.replica.save()
        return VerifiedProjection(p, self.replica.size)

    def verified_recommendation(self, task_class: str) -> VerifiedProjection:
        """`verified_projection`: the recommendation it carries (advisory; humans promote)."""
        return self.verified_projection(task_class)

    def verified_state(self, task_class: str) -> VerifiedState:
        """The task class's committed state (`Client.state`: the answer proven against the
        committed state root, nothing the replica holds left out, the view recomputed from
        the records), and that commitment checked against the replica's own fold of the
        log: the replica follows the answer's checkpoint and folds the commitment, which
        must commit exactly the state the log before it gives (`WrongStateRoot`)."""
        _start(self.client, self.replica)
        v = self.client.state(task_class, min_size=self.replica.size, rules=self.rules)
        self.replica.follow(self.client, v.checkpoint)
        self.replica.save()
        return v

    def recommend(self, request: Envelope) -> RecommendationResponse:
        """`Client.recommend`, and the projection the ledger's signed recommendation
        rests on checked complete against the whole log.

        A request posted again (a retry after a timeout, the same request asked twice) is
        answered with the recommendation made for it the first time (docs/API.md: 200,
        `existing`), as of that recommendation's checkpoint and time, which the replica
        may be past. Such an answer is taken when the log shows it was made before: its
        `promotion.recommended` entry is one the replica had already followed. Its
        projection must then state the agreed settings and a time between the sequencing
        times of the last entry its checkpoint covers and of the recommendation (not a
        time near this machine's clock), its checkpoint must be a prefix of the
        replica's tree, and its view must equal, bit for bit, the view of the log up to
        that checkpoint, folded afresh from entries fetched again (in time proportional
        to the checkpoint, as the server's own answer is: `_compare_answered`). It is
        the answer of that time: sign a new request for a recommendation of the log as
        it is now. A projection older than the replica that answers with a
        recommendation the replica had not followed is no stored answer
        (`StaleCheckpoint`)."""
        audited = _start(self.client, self.replica)
        answer = self.client.recommend(request)
        p = answer.projection
        cp = _checkpoint_of(p, self.client.keys)
        if cp.size < self.replica.size and answer.recommendation.index < self.replica.size:
            _compare_answered(self.client, self.replica, answer, cp, self.rules)
        else:
            _stated(p, cp, audited, self.rules, self._now())
            # The ledger states the view's time as the latest of its clock, the request's
            # sequencing time and that of the last entry at the view's checkpoint, so it
            # is no earlier than the last entry the replica follows to.
            _compare(self.client, self.replica, p, cp)
        self.replica.save()
        return answer
