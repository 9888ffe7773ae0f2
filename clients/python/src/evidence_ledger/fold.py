"""The projection fold (`projections/src/fold.rs` and `rules.rs`), in Python.

`Projection.apply(index, leaf)` folds one entry: pure, no clock, no I/O.
`Projection.view(task_class, now_micros, settings, size, root)` answers for
one task class, only at exactly the checkpoint the fold has reached, with
the view as JSON exactly as the server serializes its `TaskClassView`
(every key; `null` where Rust has `None` or a float that is not finite).

The Rust fold keeps sums over its window and reads leaving scores back from
the log (`Projection::view_cached`); its definition, `Projection::view`,
sums the window afresh. This port keeps one small record per score (what
the sums take from it) and does what the definition does: every view sums
its window afresh. Both are tested in the Rust crate to give the same bits.

`Projection.state()` is the state the ledger commits (`commit`: every
registered class's record and case records, as `Projection::state` builds
them from the newest eligible score and the failing eligible scores of
each case); `apply` checks every `state.committed` entry against the state
of the entries before it, before folding it, and raises `WrongStateRoot`
(naming the entry) when the ledger committed a state its log does not give.
`first_difference` compares a served view with a recomputed one.

What counts (docs/PROJECTIONS.md): windows on the ledger's `sequenced_at`;
only scores of a class registered before them; eligible scores are those
of runs started (before the score) with `microvm` isolation; the latest
eligible score per active case; failures by severity among eligible scores
of active cases, reruns included; shared-kernel scores shown, never
counted; the cost as an exact, correctly rounded sum. The rules and their
rationale text are those of `projections/src/rules.rs`, character for
character.
"""

from __future__ import annotations

import bisect
import math
import struct
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from .envelope import Leaf, decode_leaf
from .errors import InvalidInput, WrongStateRoot
from .merkle import Frontier, leaf_hash
from .stats import Interval, ScoreStats, Settings, bca, bootstrap_seed, score_stats

if TYPE_CHECKING:
    from .commit import ClassState, State

#: The curation class whose scores are promotion evidence.
HELD_OUT = "held-out"
#: Largest and smallest i64 (the Rust fold's times saturate there).
I64_MAX = 2**63 - 1
I64_MIN = -(2**63)

ENOUGH_HELD_OUT_CASES = "enough_held_out_cases"
EVERY_CASE_SCORED_IN_WINDOW = "every_case_scored_in_window"
LOWER_BOUND_MEETS_THRESHOLD = "lower_bound_meets_threshold"
NO_BLOCK_FAILURE_IN_WINDOW = "no_block_failure_in_window"


class ProjectionError(Exception):
    """The fold cannot answer (`ProjectionError` of the Rust crate)."""


class Unverified(ProjectionError):
    """The fold is not at exactly the checkpoint asked for."""


class UnknownTaskClass(ProjectionError):
    """The task class is not registered in the folded log."""


def _sat(v: int) -> int:
    return max(I64_MIN, min(I64_MAX, v))


def rust_display(x: float) -> str:
    """`format!("{}", x)` for an f64: the shortest digits that round-trip, never an exponent."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0.0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    s = format(Decimal(repr(x)), "f")
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


class ExactSum:
    """`stats::ExactSum`: Shewchuk partials, the exact sum correctly rounded
    (Python's `math.fsum`); a term of 2^960 or more is counted and makes the sum infinite."""

    HUGE = 2.0**960

    def __init__(self) -> None:
        self.partials: list[float] = []
        self.huge = 0

    def add(self, x: float) -> None:
        if not math.isfinite(x) or abs(x) >= self.HUGE:
            self.huge += 1
            return
        kept: list[float] = []
        for y in self.partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo != 0.0:
                kept.append(lo)
            x = hi
        if x != 0.0:
            kept.append(x)
        self.partials = kept

    def value(self) -> float:
        if self.huge > 0:
            return math.inf
        p = self.partials
        if not p:
            return 0.0
        n = len(p) - 1
        hi = p[n]
        lo = 0.0
        while n > 0:
            x = hi
            n -= 1
            y = p[n]
            hi = x + y
            lo = y - (hi - x)
            if lo != 0.0:
                break
        if n > 0 and ((lo < 0.0 and p[n - 1] < 0.0) or (lo > 0.0 and p[n - 1] > 0.0)):
            y = lo * 2.0
            x = hi + y
            if y == x - hi:
                hi = x
        return hi


# --- the promotion rules (projections/src/rules.rs) ----------------------------


@dataclass(frozen=True)
class TierRule:
    min_cases_for_promotion: int
    score_threshold: float


@dataclass(frozen=True)
class RuleInput:
    active_held_out: int
    scored_held_out: int
    lower_bound: Optional[float]
    block_failures: int


def _outcome(tier: str, rule: str, holds: bool, detail: str) -> dict[str, Any]:
    return {"rule": f"{tier}.{rule}", "holds": holds, "detail": detail}


def rules_for(tier: str, i: RuleInput, rule: TierRule) -> list[dict[str, Any]]:
    """All four rules for `tier`, in order, as `RuleOutcome` JSON."""
    need = rule.min_cases_for_promotion
    if i.lower_bound is not None:
        lb = f"lower 95% bound {'%.4f' % i.lower_bound}; {tier} needs at least {rust_display(rule.score_threshold)}"
    else:
        lb = f"no scores in the window; {tier} needs a lower bound of at least {rust_display(rule.score_threshold)}"
    return [
        _outcome(tier, ENOUGH_HELD_OUT_CASES, i.active_held_out >= need,
                 f"{i.active_held_out} active held-out cases; {tier} needs at least {need}"),
        _outcome(tier, EVERY_CASE_SCORED_IN_WINDOW, i.active_held_out > 0 and i.scored_held_out == i.active_held_out,
                 f"{i.scored_held_out} of {i.active_held_out} active held-out cases have a microvm score in the window"),
        _outcome(tier, LOWER_BOUND_MEETS_THRESHOLD, i.lower_bound is not None and i.lower_bound >= rule.score_threshold, lb),
        _outcome(tier, NO_BLOCK_FAILURE_IN_WINDOW, i.block_failures == 0,
                 f"{i.block_failures} block-severity failures in the window"),
    ]


_BELOW = {"gold": "silver", "silver": "bronze", "bronze": "bronze"}
_ABOVE = {"bronze": "silver", "silver": "gold"}


def recommend(current: str, i: RuleInput, rule_of: Callable[[str], Optional[TierRule]]) -> tuple[str, list[dict[str, Any]]]:
    """The recommended tier and the rationale (every rule evaluated, in order)."""
    rationale: list[dict[str, Any]] = []
    if current != "bronze":
        r = rule_of(current)
        if r is not None:
            kept = rules_for(current, i, r)
            rationale.extend(kept)
            if not all(o["holds"] for o in kept):
                return _BELOW[current], rationale
    nxt = _ABOVE.get(current)
    if nxt is not None:
        r = rule_of(nxt)
        if r is not None:
            up = rules_for(nxt, i, r)
            rationale.extend(up)
            if all(o["holds"] for o in up):
                return nxt, rationale
    return current, rationale


# --- the fold ------------------------------------------------------------------


@dataclass
class ScoreObs:
    """What a window's sums take from one score (fixed when it is folded)."""

    index: int
    at: int
    case_id: str
    cost: float
    eligible: bool
    block: int
    warn: int
    info: int
    leaf_hash: str
    score: float
    passed: bool

    def to_json(self) -> list[Any]:
        return [self.index, self.at, self.case_id, self.cost, self.eligible, self.block, self.warn, self.info,
                self.leaf_hash, self.score, self.passed]

    @classmethod
    def from_json(cls, v: list[Any]) -> "ScoreObs":
        return cls(int(v[0]), int(v[1]), str(v[2]), float(v[3]), bool(v[4]), int(v[5]), int(v[6]), int(v[7]),
                   str(v[8]), float(v[9]), bool(v[10]))


@dataclass
class ClassFold:
    tier: str
    silver: TierRule
    gold: TierRule
    registered: int
    pending: set[str] = field(default_factory=set)
    #: (sequenced at, run id, isolation), in log order.
    runs: list[tuple[int, str, str]] = field(default_factory=list)
    #: The class's counted scores, in log order.
    scores: list[ScoreObs] = field(default_factory=list)
    #: By case id: the newest eligible score, and the eligible scores that carried
    #: failure modes (in log order). Derived from `scores`, so not saved.
    newest: dict[str, ScoreObs] = field(default_factory=dict)
    failing: dict[str, list[ScoreObs]] = field(default_factory=dict)

    def count(self, s: ScoreObs) -> None:
        """Takes the counted score `s` (the next one in log order)."""
        self.scores.append(s)
        if s.eligible:
            self.newest[s.case_id] = s
            if s.block + s.warn + s.info > 0:
                self.failing.setdefault(s.case_id, []).append(s)

    def to_json(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "silver": [self.silver.min_cases_for_promotion, self.silver.score_threshold],
            "gold": [self.gold.min_cases_for_promotion, self.gold.score_threshold],
            "registered": self.registered,
            "pending": sorted(self.pending),
            "runs": [list(r) for r in self.runs],
            "scores": [s.to_json() for s in self.scores],
        }

    @classmethod
    def from_json(cls, v: dict[str, Any]) -> "ClassFold":
        c = cls(
            tier=str(v["tier"]),
            silver=TierRule(int(v["silver"][0]), float(v["silver"][1])),
            gold=TierRule(int(v["gold"][0]), float(v["gold"][1])),
            registered=int(v["registered"]),
            pending=set(v["pending"]),
            runs=[(int(a), str(b), str(c)) for a, b, c in v["runs"]],
        )
        for s in v["scores"]:
            c.count(ScoreObs.from_json(s))
        return c


@dataclass
class CaseFold:
    task_class: str
    curation_class: str
    active: bool
    source: str


def _f(v: Any) -> float:
    return float(v)


def _json_float(x: Optional[float]) -> Optional[float]:
    """serde_json writes a float that is not finite as `null`."""
    return x if x is not None and math.isfinite(x) else None


def _interval(i: Optional[Interval]) -> Optional[dict[str, Optional[float]]]:
    return None if i is None else {"low": _json_float(i.low), "high": _json_float(i.high)}


def stats_json(s: ScoreStats) -> dict[str, Any]:
    return {
        "cases": s.cases,
        "mean": _json_float(s.mean),
        "mean_ci": _interval(s.mean_ci),
        "passed": s.passed,
        "pass_rate": _json_float(s.pass_rate),
        "pass_rate_ci": _interval(s.pass_rate_ci),
    }


class Projection:
    """The folded log (see the module's doc)."""

    def __init__(self) -> None:
        self.size = 0
        self.frontier = Frontier()
        self.classes: dict[str, ClassFold] = {}
        self.cases: dict[str, CaseFold] = {}
        #: Proposal id -> (task class, case id, curation class).
        self.proposals: dict[str, tuple[str, str, str]] = {}
        #: Run id -> (task class, isolation, index of its start).
        self.runs: dict[str, tuple[str, str, int]] = {}
        #: The sequencing time of every entry is at least this (the last one's).
        self.last_at: Optional[int] = None
        #: Derived, not saved: the case ids of each task class (as `cases` says), the
        #: committed state of each class as last built, and the classes changed since.
        self._members: dict[str, set[str]] = {}
        self._committed: dict[str, "ClassState"] = {}
        self._changed: set[str] = set()

    def root(self) -> bytes:
        return self.frontier.root()

    def task_classes(self) -> list[str]:
        return sorted(self.classes)

    def _set_case(self, case_id: str, case: CaseFold) -> None:
        old = self.cases.get(case_id)
        if old is not None:
            self._members.get(old.task_class, set()).discard(case_id)
            self._changed.add(old.task_class)
        self.cases[case_id] = case
        self._members.setdefault(case.task_class, set()).add(case_id)
        self._changed.add(case.task_class)

    def apply(self, index: int, leaf: bytes, decoded: Optional[Leaf] = None) -> None:
        """Folds entry `index` (leaf bytes already proven to be the log's; `decoded`,
        if given, is `decode_leaf(leaf)`). A `state.committed` entry is first checked
        against the state of the entries before it (`WrongStateRoot`)."""
        if index != self.size:
            raise ProjectionError(f"entry {index} arrived while the fold expected entry {self.size}")
        if decoded is None:
            try:
                decoded = decode_leaf(leaf, f"entry {index}")
            except InvalidInput as e:
                raise ProjectionError(f"entry {index} is not a ledger event: {e}") from None
        d = decoded
        kind, b = d.kind, d.body
        if kind == "state.committed":
            self._check_commitment(index, b)
        lh = leaf_hash(leaf)
        at = d.sequenced_at
        self.frontier.push(lh)
        self.size += 1
        self.last_at = at
        if kind == "task_class.registered":
            tiers = b.get("tiers", {})
            s, g = tiers.get("silver"), tiers.get("gold")
            if s is None or g is None:
                return
            self.classes[b["task_class"]] = ClassFold(
                tier=b["initial_tier"],
                silver=TierRule(int(s["min_cases_for_promotion"]), _f(s["score_threshold"])),
                gold=TierRule(int(g["min_cases_for_promotion"]), _f(g["score_threshold"])),
                registered=index,
            )
            self._changed.add(b["task_class"])
        elif kind == "tier.changed":
            c = self.classes.get(b["task_class"])
            if c is not None:
                c.tier = b["to"]
                self._changed.add(b["task_class"])
        elif kind == "case.added":
            self._set_case(b["case_id"], CaseFold(b["task_class"], b["curation_class"], True, b["provenance"]["source"]))
        elif kind == "case.retired":
            old = self.cases.get(b["case_id"])
            if old is not None:
                old.active = False
                self._changed.add(old.task_class)
        elif kind == "case.proposed":
            c = self.classes.get(b["task_class"])
            if c is not None:
                c.pending.add(b["proposal_id"])
                self._changed.add(b["task_class"])
            self.proposals[b["proposal_id"]] = (b["task_class"], b["draft"]["case_id"], b["draft"]["curation_class"])
        elif kind == "proposal.approved":
            p = self.proposals.get(b["proposal_id"])
            if p is not None:
                tc, case_id, curation = p
                c = self.classes.get(tc)
                if c is not None:
                    c.pending.discard(b["proposal_id"])
                    self._changed.add(tc)
                self._set_case(case_id, CaseFold(tc, curation, True, "outcome-ledger-derived"))
        elif kind == "proposal.rejected":
            p = self.proposals.get(b["proposal_id"])
            if p is not None:
                c = self.classes.get(p[0])
                if c is not None:
                    c.pending.discard(b["proposal_id"])
                    self._changed.add(p[0])
        elif kind == "run.started":
            c = self.classes.get(b["task_class"])
            if c is not None:
                c.runs.append((at, b["run_id"], b["isolation_class"]))
            # The log refuses a second start of a run; were one there, the first would stand.
            self.runs.setdefault(b["run_id"], (b["task_class"], b["isolation_class"], index))
        elif kind == "score.recorded":
            c = self.classes.get(b["task_class"])
            if c is not None and c.registered < index:
                run = self.runs.get(b["run_id"])
                s = b["score"]
                sev = [f["severity"] for f in s["failure_modes"]]
                c.count(
                    ScoreObs(
                        index=index,
                        at=at,
                        case_id=b["case_id"],
                        cost=_f(s["cost_usd"]),
                        eligible=run is not None and run[2] < index and run[1] == "microvm",
                        block=sev.count("block"),
                        warn=sev.count("warn"),
                        info=sev.count("info"),
                        leaf_hash=lh.hex(),
                        score=_f(s["score"]),
                        passed=bool(s["passed"]),
                    )
                )
                self._changed.add(b["task_class"])

    def _check_commitment(self, index: int, b: dict[str, Any]) -> None:
        """A `state.committed` entry at `index` must commit the state of the log before
        it (`projections::fold` checks the size and the root; the class count is
        checked here too, since a reader of a state answer relies on it)."""
        cp = b.get("checkpoint")
        size = cp.get("size") if isinstance(cp, dict) else None
        root, count = b.get("state_root"), b.get("task_classes")
        if not isinstance(size, int) or not isinstance(root, str) or not isinstance(count, int):
            raise ProjectionError(f"entry {index} is not a ledger event: a malformed state.committed body")
        st = self.state()
        folded = st.root().hex()
        if size != index:
            raise WrongStateRoot(index, root, folded, count, len(st.classes),
                                 f"commits the state at size {size}, not at its own index {index}")
        if root != folded or count != len(st.classes):
            raise WrongStateRoot(index, root, folded, count, len(st.classes))

    def state(self) -> "State":
        """The state committed at this size (`Projection::state`): every registered
        class with all its cases, sorted by name and case id. A class's records are
        built again only when an entry since the last call changed them."""
        from .commit import State

        for name in self._changed:
            self._committed.pop(name, None)
        self._changed.clear()
        classes = []
        for name in sorted(self.classes):
            cs = self._committed.get(name)
            if cs is None:
                cs = self._class_state(name)
                self._committed[name] = cs
            classes.append(cs)
        return State(tuple(classes))

    def _class_state(self, name: str) -> "ClassState":
        from .commit import CaseRecord, ClassRecord, ClassState, FailedScore, LatestScore, cases_root

        c = self.classes[name]
        records = []
        for case_id in sorted(self._members.get(name, ())):
            case = self.cases[case_id]
            n = c.newest.get(case_id)
            records.append(
                CaseRecord(
                    task_class=name,
                    case_id=case_id,
                    curation_class=case.curation_class,
                    active=case.active,
                    latest=None if n is None else LatestScore(n.index, n.leaf_hash, n.at, n.score, n.passed),
                    failures=tuple(FailedScore(f.index, f.at, f.block, f.warn, f.info) for f in c.failing.get(case_id, ())),
                )
            )
        cases = tuple(records)
        return ClassState(
            ClassRecord(
                task_class=name,
                tier=c.tier,
                silver=c.silver,
                gold=c.gold,
                pending_proposals=len(c.pending),
                registered=c.registered,
                cases=len(cases),
                cases_root=cases_root(cases).hex(),
            ),
            cases,
        )

    def _active_case(self, case_id: str, task_class: str) -> Optional[CaseFold]:
        c = self.cases.get(case_id)
        return c if c is not None and c.active and c.task_class == task_class else None

    def view(self, task_class: str, now: int, settings: Settings, size: int, root: bytes) -> dict[str, Any]:
        """The view of `task_class` at `now` (µs, UTC) as the server serializes it,
        only if the fold is at exactly the checkpoint (`size`, `root`)."""
        have = self.root()
        if self.size != size or have != root:
            raise Unverified(
                f"projection at size {self.size} (root {have.hex()}) does not match checkpoint size {size} (root {root.hex()})"
            )
        cls = self.classes.get(task_class)
        if cls is None:
            raise UnknownTaskClass(f"task class `{task_class}` is not registered")
        start = _sat(now - _sat(settings.window_seconds * 1_000_000))
        # Sequencing time never decreases along the log, so the window is a suffix.
        first = bisect.bisect_left([s.at for s in cls.scores], start)
        cost = ExactSum()
        scores = shared_scores = 0
        shared = {"block": 0, "warn": 0, "info": 0}
        failures = {"block": 0, "warn": 0, "info": 0}
        latest: dict[str, ScoreObs] = {}
        for s in cls.scores[first:]:
            cost.add(s.cost)
            scores += 1
            if s.eligible:
                if self._active_case(s.case_id, task_class) is not None:
                    failures["block"] += s.block
                    failures["warn"] += s.warn
                    failures["info"] += s.info
                    latest[s.case_id] = s
            else:
                shared_scores += 1
                shared["block"] += s.block
                shared["warn"] += s.warn
                shared["info"] += s.info
        by_class: dict[str, int] = {}
        for c in self.cases.values():
            if c.active and c.task_class == task_class:
                by_class[c.curation_class] = by_class.get(c.curation_class, 0) + 1
        ordered = sorted(latest.items())
        held = [(cid, s) for cid, s in ordered if self.cases[cid].curation_class == HELD_OUT]
        seed = bootstrap_seed(task_class)

        def stats_of(items: list[tuple[str, ScoreObs]]) -> ScoreStats:
            xs = [s.score for _, s in items]
            return score_stats(xs, sum(1 for _, s in items if s.passed), settings,
                               lambda v: bca(v, settings.confidence, settings.resamples, seed))

        held_stats = stats_of(held)
        ri = RuleInput(
            active_held_out=by_class.get(HELD_OUT, 0),
            scored_held_out=len(held),
            lower_bound=held_stats.mean_ci.low if held_stats.mean_ci is not None else None,
            block_failures=failures["block"],
        )
        recommended, rationale = recommend(
            cls.tier, ri, lambda t: cls.silver if t == "silver" else cls.gold if t == "gold" else None
        )
        runs_in_window = len(cls.runs) - bisect.bisect_left([r[0] for r in cls.runs], start)
        last_run = cls.runs[-1] if cls.runs else None
        return {
            "task_class": task_class,
            "tree_size": size,
            "root": root.hex(),
            "now_micros": now,
            "window_start_micros": start,
            "settings": {
                "window_seconds": settings.window_seconds,
                "confidence": _json_float(settings.confidence),
                "resamples": settings.resamples,
            },
            "tier": cls.tier,
            "active_cases_by_curation_class": dict(sorted(by_class.items())),
            "pending_proposals": len(cls.pending),
            "runs_in_window": runs_in_window,
            "scores_in_window": scores,
            "shared_kernel_scores_in_window": shared_scores,
            "held_out": stats_json(held_stats),
            "all_cases": stats_json(stats_of(ordered)),
            "failures": failures,
            "shared_kernel_failures": shared,
            "cost_usd_in_window": _json_float(cost.value()),
            "latest_run": None if last_run is None else {
                "run_id": last_run[1], "started_micros": last_run[0], "isolation": last_run[2]
            },
            "evidence": [
                {"index": s.index, "leaf_hash": s.leaf_hash, "case_id": cid, "score": _json_float(s.score)}
                for cid, s in held
            ],
            "recommendation": {
                "current_tier": cls.tier,
                "recommended_tier": recommended,
                "rationale": rationale,
                "requires_human_approval": True,
            },
        }

    # --- saved form ---------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "frontier": [[lvl, h.hex()] for lvl, h in self.frontier.nodes],
            "last_at": self.last_at,
            "classes": {k: v.to_json() for k, v in sorted(self.classes.items())},
            "cases": {k: [c.task_class, c.curation_class, c.active, c.source] for k, c in sorted(self.cases.items())},
            "proposals": {k: list(v) for k, v in sorted(self.proposals.items())},
            "runs": {k: list(v) for k, v in sorted(self.runs.items())},
        }

    @classmethod
    def from_json(cls, v: dict[str, Any]) -> "Projection":
        p = cls()
        p.size = int(v["size"])
        p.frontier = Frontier.from_nodes(p.size, [(int(lvl), bytes.fromhex(h)) for lvl, h in v["frontier"]])
        p.last_at = None if v["last_at"] is None else int(v["last_at"])
        p.classes = {k: ClassFold.from_json(c) for k, c in v["classes"].items()}
        p.cases = {k: CaseFold(str(c[0]), str(c[1]), bool(c[2]), str(c[3])) for k, c in v["cases"].items()}
        for k, c in p.cases.items():
            p._members.setdefault(c.task_class, set()).add(k)
        p.proposals = {k: (str(a), str(b), str(c)) for k, (a, b, c) in v["proposals"].items()}
        p.runs = {k: (str(a), str(b), int(c)) for k, (a, b, c) in v["runs"].items()}
        return p


# --- comparing views ---------------------------------------------------------------


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _same_number(a: Union[int, float], b: Union[int, float]) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return _bits(float(a)) == _bits(float(b))
        except OverflowError:
            return False
    return a == b


def first_difference(served: Any, replayed: Any, path: str = "view") -> Optional[str]:
    """The first JSON path (keys in sorted order, depth first) where `served` (the view
    as it arrived) differs from `replayed`, or None: every key counts, floats are
    compared bit for bit (-0.0 is not 0.0), a list of another length differs as a whole."""
    if isinstance(served, dict) and isinstance(replayed, dict):
        for k in sorted(set(served) | set(replayed)):
            if k not in served or k not in replayed:
                return f"{path}.{k}"
            d = first_difference(served[k], replayed[k], f"{path}.{k}")
            if d is not None:
                return d
        return None
    if isinstance(served, list) and isinstance(replayed, list) and len(served) == len(replayed):
        for i, (a, b) in enumerate(zip(served, replayed)):
            d = first_difference(a, b, f"{path}[{i}]")
            if d is not None:
                return d
        return None
    if _is_number(served) and _is_number(replayed):
        return None if _same_number(served, replayed) else path
    same = type(served) is type(replayed) and served == replayed and not isinstance(served, (dict, list))
    return None if same else path
