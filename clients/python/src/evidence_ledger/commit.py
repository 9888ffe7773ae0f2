"""Completeness by commitment (`projections/src/commit.rs`, in Python).

The ledger commits the per-case state of every task class in Merkle trees
and records the root in its log (a `state.committed` entry, appended by
`GET /v1/task-classes/{name}/state`), so that an answer can prove it left
nothing out without the reader replaying the log. Two levels, both RFC 6962
trees over canonical JSON records (docs/FORMAT.md section 7):

- the **case tree** of a task class: one `CaseRecord` per case of the class
  (active or retired), sorted by case id;
- the **state tree**: one `ClassRecord` per registered task class, sorted by
  name, each carrying its case tree's size and root.

A leaf hash is `SHA-256(0x00 || canonical JSON of the record)`; the empty
tree's root is `SHA-256("")`. What is committed is what the recommendation
depends on: the tier and its rules, each case's curation class and status,
its latest eligible score and every failure of its eligible scores, with
their sequencing times (the window is applied by the reader, since it
depends on the time of the read). Cost, run and shared-kernel counts are
not committed, and a view computed from the records (`view`) has none of
them.

- `tree_root`, `tree_path`, `cases_root`: the trees; `State` (built by
  `fold.Projection.state`) with its `root`, `proof` and `neighbours`;
- `check_class`: the records given are exactly what a state root commits for
  a class; `check_absent`: a name is not in the state tree (its neighbours);
- `view`: the decision numbers from the records alone, equal bit for bit to
  the Rust `commit::view` (and to the fold's view at the committed size);
- `parse_*`: records as served, refused (`MalformedAnswer`) unless of the
  exact form the Rust types have.

The whole check of a served answer (checkpoint, commitment entry, proofs,
records, view) is `verify.check_state`.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from . import canonical
from .errors import AbsenceNotProven, CasesMismatch, MalformedAnswer, NotCommitted, ProofMismatch
from .fold import HELD_OUT, RuleInput, TierRule, _json_float, _sat, recommend, stats_json
from .merkle import leaf_hash, root_of, verify_inclusion
from .stats import ScoreStats, Settings, bca, bootstrap_seed, score_stats

#: The `record` field of each kind of record: a case record can never be read as a class record.
CASE = "case"
TASK_CLASS = "task_class"
TIERS = ("bronze", "silver", "gold")
#: Integers of the canonical form (docs/FORMAT.md section 7).
_SAFE = (1 << 53) - 1


@dataclass(frozen=True)
class LatestScore:
    """The newest eligible (microvm) score of a case."""

    index: int
    leaf_hash: str
    #: When the score was sequenced (µs since the Unix epoch, UTC).
    sequenced_at: int
    score: float
    passed: bool

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "leaf_hash": self.leaf_hash, "sequenced_at": self.sequenced_at,
                "score": float(self.score), "passed": self.passed}


@dataclass(frozen=True)
class FailedScore:
    """An eligible score of a case that carried failure modes, counted by severity."""

    index: int
    sequenced_at: int
    block: int
    warn: int
    info: int

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "sequenced_at": self.sequenced_at, "block": self.block, "warn": self.warn,
                "info": self.info}


@dataclass(frozen=True)
class CaseRecord:
    """One case of a task class, as committed."""

    task_class: str
    case_id: str
    curation_class: str
    #: False once the case was retired.
    active: bool
    #: The newest eligible score recorded for the class since it was registered, if any.
    latest: Optional[LatestScore]
    #: Every eligible score of the case with failure modes, in log order.
    failures: tuple[FailedScore, ...] = ()
    #: Always `case`.
    record: str = CASE

    def to_json(self) -> dict[str, Any]:
        return {
            "record": self.record,
            "task_class": self.task_class,
            "case_id": self.case_id,
            "curation_class": self.curation_class,
            "active": self.active,
            "latest": None if self.latest is None else self.latest.to_json(),
            "failures": [f.to_json() for f in self.failures],
        }


def _rule_json(r: TierRule) -> dict[str, Any]:
    return {"min_cases_for_promotion": r.min_cases_for_promotion, "score_threshold": float(r.score_threshold)}


@dataclass(frozen=True)
class ClassRecord:
    """One task class, as committed: its tier, rules and the root of its case tree."""

    task_class: str
    tier: str
    silver: TierRule
    gold: TierRule
    pending_proposals: int
    #: The log index of the registration the class's fold started at.
    registered: int
    #: How many case records the case tree holds, and its root (hex).
    cases: int
    cases_root: str
    #: Always `task_class`.
    record: str = TASK_CLASS

    def to_json(self) -> dict[str, Any]:
        return {
            "record": self.record,
            "task_class": self.task_class,
            "tier": self.tier,
            "silver": _rule_json(self.silver),
            "gold": _rule_json(self.gold),
            "pending_proposals": self.pending_proposals,
            "registered": self.registered,
            "cases": self.cases,
            "cases_root": self.cases_root,
        }


def record_bytes(record: "CaseRecord | ClassRecord") -> bytes:
    """A record's canonical JSON: the bytes its leaf hash is taken over."""
    return canonical.encode(record.to_json())


def record_leaf(record: "CaseRecord | ClassRecord") -> bytes:
    """A record's RFC 6962 leaf hash."""
    return leaf_hash(record_bytes(record))


def tree_root(leaves: Sequence[bytes]) -> bytes:
    """The RFC 6962 root of the tree over `leaves` (leaf hashes); SHA-256("") when empty."""
    return root_of(leaves)


def tree_path(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """The RFC 6962 inclusion proof (PATH) of leaf `index` among `leaves`, leaf to root.
    Empty when `index` is out of range."""
    out: list[bytes] = []

    def path(d: Sequence[bytes], m: int) -> None:
        if len(d) <= 1:
            return
        # The largest power of two below the size (RFC 6962 section 2.1).
        k = 1 << ((len(d) - 1).bit_length() - 1)
        if m < k:
            path(d[:k], m)
            out.append(tree_root(d[k:]))
        else:
            path(d[k:], m - k)
            out.append(tree_root(d[:k]))

    if 0 <= index < len(leaves):
        path(leaves, index)
    return out


def cases_root(cases: Sequence[CaseRecord]) -> bytes:
    """The case tree's root over `cases` (as given: sorted by case id)."""
    return tree_root([record_leaf(c) for c in cases])


@dataclass(frozen=True)
class ClassProof:
    """Where a class record sits in the state tree: its position among `count`
    leaves and its inclusion proof (hex hashes, leaf to root)."""

    index: int
    count: int
    path: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "count": self.count, "path": list(self.path)}


@dataclass(frozen=True)
class Neighbour:
    """A class record shown as a neighbour of an absent name, with its proof."""

    class_: ClassRecord
    proof: ClassProof

    def to_json(self) -> dict[str, Any]:
        return {"class": self.class_.to_json(), "proof": self.proof.to_json()}


#: The classes just before and just after an absent name (either may be None).
Neighbours = tuple[Optional[Neighbour], Optional[Neighbour]]


@dataclass(frozen=True)
class ClassState:
    """A task class with all its cases."""

    class_: ClassRecord
    cases: tuple[CaseRecord, ...]

    @property
    def leaf(self) -> bytes:
        return record_leaf(self.class_)


@dataclass(frozen=True)
class State:
    """The committed state of a whole projection: every class, sorted by name."""

    classes: tuple[ClassState, ...] = ()

    def leaves(self) -> list[bytes]:
        return [c.leaf for c in self.classes]

    def root(self) -> bytes:
        """The state root: the RFC 6962 root over the class records."""
        return tree_root(self.leaves())

    def _names(self) -> list[str]:
        return [c.class_.task_class for c in self.classes]

    def class_(self, task_class: str) -> Optional[ClassState]:
        """The class named `task_class`, if registered."""
        names = self._names()
        i = bisect.bisect_left(names, task_class)
        return self.classes[i] if i < len(names) and names[i] == task_class else None

    def _proof_at(self, leaves: Sequence[bytes], i: int) -> ClassProof:
        return ClassProof(i, len(leaves), tuple(h.hex() for h in tree_path(leaves, i)))

    def proof(self, task_class: str) -> Optional[ClassProof]:
        """The inclusion proof of `task_class`'s record; None when it is not registered."""
        names = self._names()
        i = bisect.bisect_left(names, task_class)
        if i < len(names) and names[i] == task_class:
            return self._proof_at(self.leaves(), i)
        return None

    def neighbours(self, task_class: str) -> Neighbours:
        """For a name that is not registered: the classes just before and just after it,
        with their proofs. `ValueError` if it is registered."""
        names = self._names()
        i = bisect.bisect_left(names, task_class)
        if i < len(names) and names[i] == task_class:
            raise ValueError(f"task class `{task_class}` is registered")
        leaves = self.leaves()

        def at(j: int) -> Neighbour:
            return Neighbour(self.classes[j].class_, self._proof_at(leaves, j))

        return (at(i - 1) if i > 0 else None, at(i) if i < len(names) else None)


# --- the checks ---------------------------------------------------------------------


def _path(p: ClassProof, what: str) -> list[bytes]:
    out = []
    for i, h in enumerate(p.path):
        try:
            out.append(bytes.fromhex(h) if len(h) == 64 else b"")
        except ValueError:
            out.append(b"")
        if len(out[-1]) != 32:
            raise MalformedAnswer(f"{what}.path[{i}]", "not a 64-digit hex hash")
    return out


def _included(root: bytes, c: ClassRecord, p: ClassProof, what: str) -> Optional[str]:
    """Why `c` is not included at `p` under `root`, or None."""
    if c.record != TASK_CLASS:
        return f"`{what}.record` must be `{TASK_CLASS}`"
    try:
        verify_inclusion(p.index, p.count, record_leaf(c), _path(p, what), root)
    except ProofMismatch as e:
        return f"`{c.task_class}` at {p.index} of {p.count}: {e.reason}"
    return None


def check_class(root: bytes, class_: ClassRecord, cases: Sequence[CaseRecord], proof: ClassProof) -> None:
    """Checks that `class_` and `cases` are exactly what the state root `root` commits for
    the class (`commit::check_class`): the cases are case records of the class, sorted by
    case id without repeats, and hash to the class record's case tree (`CasesMismatch`);
    the class record is included at `proof` under `root` (`NotCommitted`)."""
    for i, c in enumerate(cases):
        if c.record != CASE:
            raise CasesMismatch(f"cases[{i}]", "is not a case record")
        if c.task_class != class_.task_class:
            raise CasesMismatch(f"cases[{i}]", f"case `{c.case_id}` belongs to `{c.task_class}`")
        if i > 0 and cases[i - 1].case_id >= c.case_id:
            raise CasesMismatch(f"cases[{i}]", f"case `{c.case_id}` is out of order or repeated")
    got = cases_root(cases).hex()
    if class_.cases != len(cases) or got != class_.cases_root:
        raise CasesMismatch(
            "cases",
            f"the {len(cases)} records given (root {got}) do not hash to the committed case tree "
            f"({class_.cases} cases, root {class_.cases_root})",
        )
    why = _included(root, class_, proof, "class")
    if why is not None:
        raise NotCommitted("class_proof", f"the class record is not in the committed state: {why}")


def check_absent(root: bytes, count: int, task_class: str, neighbours: Neighbours) -> None:
    """Checks that the state root `root` (over `count` classes) has no class named
    `task_class` (`commit::check_absent`): its neighbours are proven adjacent leaves whose
    names enclose it, or the first (last) leaf is above (below) it, or the tree is empty.
    Raises `AbsenceNotProven` otherwise."""
    def no(why: str) -> AbsenceNotProven:
        return AbsenceNotProven("neighbours", f"the absence of task class `{task_class}` is not proven: {why}")

    for k, n in enumerate(neighbours):
        if n is None:
            continue
        if n.proof.count != count:
            raise no("a neighbour is proven in a tree of another size")
        why = _included(root, n.class_, n.proof, f"neighbours[{k}].class")
        if why is not None:
            raise no(f"a neighbour is not in the committed state: {why}")
    left, right = neighbours
    if left is None and right is None:
        if not (count == 0 and root == tree_root([])):
            raise no("no neighbours were given for a non-empty state")
    elif right is None:
        assert left is not None
        if not (left.class_.task_class < task_class and left.proof.index + 1 == count):
            raise no("the left neighbour is not the last class before the name")
    elif left is None:
        if not (right.class_.task_class > task_class and right.proof.index == 0):
            raise no("the right neighbour is not the first class after the name")
    elif not (left.class_.task_class < task_class < right.class_.task_class and left.proof.index + 1 == right.proof.index):
        raise no("the neighbours are not adjacent around the name")


# --- the view -----------------------------------------------------------------------


def view(class_: ClassRecord, cases: Sequence[CaseRecord], tree_size: int, now: int, settings: Settings) -> dict[str, Any]:
    """The view of a class from its records at `now` (µs, UTC) with `settings`, as the
    server serializes `CommittedView`: the same numbers, bit for bit, as the fold's view
    at the size the records were committed at, for the fields it has."""
    start = _sat(now - _sat(settings.window_seconds * 1_000_000))
    by_class: dict[str, int] = {}
    failures = {"block": 0, "warn": 0, "info": 0}
    latest: list[tuple[CaseRecord, LatestScore]] = []
    for c in cases:
        if not c.active:
            continue
        by_class[c.curation_class] = by_class.get(c.curation_class, 0) + 1
        for f in c.failures:
            if f.sequenced_at >= start:
                failures["block"] += f.block
                failures["warn"] += f.warn
                failures["info"] += f.info
        if c.latest is not None and c.latest.sequenced_at >= start:
            latest.append((c, c.latest))
    seed = bootstrap_seed(class_.task_class)

    def stats_of(items: Sequence[tuple[CaseRecord, LatestScore]]) -> ScoreStats:
        xs = [l.score for _, l in items]
        return score_stats(xs, sum(1 for _, l in items if l.passed), settings,
                           lambda v: bca(v, settings.confidence, settings.resamples, seed))

    held = [(c, l) for c, l in latest if c.curation_class == HELD_OUT]
    held_out = stats_of(held)
    ri = RuleInput(
        active_held_out=by_class.get(HELD_OUT, 0),
        scored_held_out=len(held),
        lower_bound=held_out.mean_ci.low if held_out.mean_ci is not None else None,
        block_failures=failures["block"],
    )
    recommended, rationale = recommend(
        class_.tier, ri, lambda t: class_.silver if t == "silver" else class_.gold if t == "gold" else None
    )
    return {
        "task_class": class_.task_class,
        "tree_size": tree_size,
        "now_micros": now,
        "window_start_micros": start,
        "settings": {
            "window_seconds": settings.window_seconds,
            "confidence": _json_float(settings.confidence),
            "resamples": settings.resamples,
        },
        "tier": class_.tier,
        "active_cases_by_curation_class": dict(sorted(by_class.items())),
        "pending_proposals": class_.pending_proposals,
        "held_out": stats_json(held_out),
        "all_cases": stats_json(stats_of(latest)),
        "failures": failures,
        "evidence": [
            {"index": l.index, "leaf_hash": l.leaf_hash, "case_id": c.case_id, "score": _json_float(l.score)}
            for c, l in held
        ],
        "recommendation": {
            "current_tier": class_.tier,
            "recommended_tier": recommended,
            "rationale": rationale,
            "requires_human_approval": True,
        },
    }


# --- records as served ----------------------------------------------------------------


def _object(v: Any, keys: Sequence[str], what: str) -> Mapping[str, Any]:
    """`v` as an object with exactly `keys` (the Rust types refuse unknown fields)."""
    if not isinstance(v, dict):
        raise MalformedAnswer(what, "must be a JSON object")
    for k in v:
        if k not in keys:
            raise MalformedAnswer(f"{what}.{k}", "unknown field")
    for k in keys:
        if k not in v:
            raise MalformedAnswer(f"{what}.{k}", "missing")
    return v


def _str(d: Mapping[str, Any], k: str, what: str) -> str:
    v = d[k]
    if not isinstance(v, str):
        raise MalformedAnswer(f"{what}.{k}", "must be a string")
    return v


def _bool(d: Mapping[str, Any], k: str, what: str) -> bool:
    v = d[k]
    if not isinstance(v, bool):
        raise MalformedAnswer(f"{what}.{k}", "must be a boolean")
    return v


def _int(d: Mapping[str, Any], k: str, what: str, low: int = 0, high: int = _SAFE) -> int:
    v = d[k]
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise MalformedAnswer(f"{what}.{k}", f"must be an integer in {low}..={high}")
    return v


def _f64(d: Mapping[str, Any], k: str, what: str) -> float:
    v = d[k]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise MalformedAnswer(f"{what}.{k}", "must be a finite number")
    return float(v)


def _rule(v: Any, what: str) -> TierRule:
    d = _object(v, ("min_cases_for_promotion", "score_threshold"), what)
    return TierRule(_int(d, "min_cases_for_promotion", what, 0, 2**32 - 1), _f64(d, "score_threshold", what))


def parse_case_record(v: Any, what: str = "case") -> CaseRecord:
    d = _object(v, ("record", "task_class", "case_id", "curation_class", "active", "latest", "failures"), what)
    latest: Optional[LatestScore] = None
    if d["latest"] is not None:
        w = f"{what}.latest"
        ld = _object(d["latest"], ("index", "leaf_hash", "sequenced_at", "score", "passed"), w)
        latest = LatestScore(_int(ld, "index", w), _str(ld, "leaf_hash", w), _int(ld, "sequenced_at", w, -_SAFE),
                             _f64(ld, "score", w), _bool(ld, "passed", w))
    fs = d["failures"]
    if not isinstance(fs, list):
        raise MalformedAnswer(f"{what}.failures", "must be a list")
    failures = []
    for i, f in enumerate(fs):
        w = f"{what}.failures[{i}]"
        fd = _object(f, ("index", "sequenced_at", "block", "warn", "info"), w)
        u32 = 2**32 - 1
        failures.append(FailedScore(_int(fd, "index", w), _int(fd, "sequenced_at", w, -_SAFE), _int(fd, "block", w, 0, u32),
                                    _int(fd, "warn", w, 0, u32), _int(fd, "info", w, 0, u32)))
    return CaseRecord(
        task_class=_str(d, "task_class", what),
        case_id=_str(d, "case_id", what),
        curation_class=_str(d, "curation_class", what),
        active=_bool(d, "active", what),
        latest=latest,
        failures=tuple(failures),
        record=_str(d, "record", what),
    )


def parse_class_record(v: Any, what: str = "class") -> ClassRecord:
    d = _object(v, ("record", "task_class", "tier", "silver", "gold", "pending_proposals", "registered", "cases",
                    "cases_root"), what)
    tier = _str(d, "tier", what)
    if tier not in TIERS:
        raise MalformedAnswer(f"{what}.tier", f"must be one of {', '.join(TIERS)}")
    return ClassRecord(
        task_class=_str(d, "task_class", what),
        tier=tier,
        silver=_rule(d["silver"], f"{what}.silver"),
        gold=_rule(d["gold"], f"{what}.gold"),
        pending_proposals=_int(d, "pending_proposals", what),
        registered=_int(d, "registered", what),
        cases=_int(d, "cases", what),
        cases_root=_str(d, "cases_root", what),
        record=_str(d, "record", what),
    )


def parse_class_proof(v: Any, what: str = "class_proof") -> ClassProof:
    d = _object(v, ("index", "count", "path"), what)
    path = d["path"]
    if not isinstance(path, list) or not all(isinstance(h, str) for h in path):
        raise MalformedAnswer(f"{what}.path", "must be a list of hex hashes")
    return ClassProof(_int(d, "index", what), _int(d, "count", what), tuple(path))


def parse_neighbours(v: Any, what: str = "neighbours") -> Neighbours:
    if not isinstance(v, list) or len(v) != 2:
        raise MalformedAnswer(what, "must be a list of two neighbours (each null or an object)")
    out: list[Optional[Neighbour]] = []
    for i, n in enumerate(v):
        w = f"{what}[{i}]"
        if n is None:
            out.append(None)
            continue
        d = _object(n, ("class", "proof"), w)
        out.append(Neighbour(parse_class_record(d["class"], f"{w}.class"), parse_class_proof(d["proof"], f"{w}.proof")))
    return (out[0], out[1])
