"""The held-out statistics recomputed from the evidence a view cites, and
nothing else (`projections/src/evidence.rs`): the check the server runs
before it signs a recommendation, `ledger verify-bundle` runs on a bundle,
and the promotion gate runs here.

What it proves: the stated held-out count, mean, BCa interval, passes,
pass rate and Wilson interval follow, bit for bit, from exactly the cited
score leaves, within the view's window, with its settings and the task
class's bootstrap seed. What it does not prove: that nothing was left out
(a newer, lower score omitted; a retired case still counted). Replaying
the log (`replay`) checks that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

from .envelope import decode_leaf
from .errors import EvidenceMismatch, InvalidInput
from .stats import ScoreStats, Settings, bca, bootstrap_seed, score_stats
from .wire import TaskClassView


@dataclass(frozen=True)
class Cited:
    """One cited evidence leaf (already proven to be the log's own)."""

    index: int
    leaf: bytes
    case_id: Optional[str] = None
    # The score the view says the leaf records (compared bit for bit), when it says one.
    score: Optional[float] = None


def held_out_from_evidence(
    task_class: str, cited: Sequence[Cited], settings: Settings, window_start_micros: Optional[int]
) -> ScoreStats:
    """Recomputes the held-out statistics of `task_class` from the cited score leaves, in the order given."""
    scores: list[float] = []
    passed = 0
    seen: set[int] = set()
    cases: set[str] = set()
    for c in cited:
        what = f"evidence {c.index}"
        if c.index in seen:
            raise EvidenceMismatch(what, "appears more than once")
        seen.add(c.index)
        try:
            leaf = decode_leaf(c.leaf, f"evidence[{c.index}].leaf")
        except InvalidInput as e:
            raise EvidenceMismatch(what, f"is not a ledger event: {e}") from e
        if leaf.kind != "score.recorded":
            raise EvidenceMismatch(what, "is not a score")
        body = leaf.body
        found = body.get("task_class")
        if found != task_class:
            raise EvidenceMismatch(what, f"is a score of `{found}`, not of `{task_class}`")
        if window_start_micros is not None and leaf.sequenced_at < window_start_micros:
            raise EvidenceMismatch(what, "was sequenced before the window starts")
        case_id = body.get("case_id")
        if not isinstance(case_id, str):
            raise EvidenceMismatch(what, "names no case")
        if c.case_id is not None and c.case_id != case_id:
            raise EvidenceMismatch(what, f"names case `{case_id}`; the view says `{c.case_id}`")
        if case_id in cases:
            raise EvidenceMismatch(what, f"case `{case_id}` is cited twice (only the latest score of a case counts)")
        cases.add(case_id)
        s = body.get("score")
        p = s.get("passed") if isinstance(s, dict) else None
        v = s.get("score") if isinstance(s, dict) else None
        if not isinstance(p, bool) or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise EvidenceMismatch(what, "its score is not {passed: bool, score: number}")
        if c.score is not None and not _same(float(c.score), float(v)):
            raise EvidenceMismatch(what, f"scored {float(v)!r}; the view says {c.score!r}")
        passed += int(p)
        scores.append(float(v))
    seed = bootstrap_seed(task_class)
    return score_stats(scores, passed, settings, lambda xs: bca(xs, settings.confidence, settings.resamples, seed))


def _same(a: Optional[float], b: Optional[float]) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.copysign(1.0, a) == math.copysign(1.0, b) and (a == b or (a != a and b != b))


def check_stated(stated: ScoreStats, recomputed: ScoreStats, what: str = "view.held_out") -> None:
    """Raises `EvidenceMismatch` naming the first field of `stated` that differs (floats bit for bit)."""
    fields = [
        ("cases", stated.cases == recomputed.cases),
        ("mean", _same(stated.mean, recomputed.mean)),
        ("mean_ci", stated.mean_ci == recomputed.mean_ci),
        ("passed", stated.passed == recomputed.passed),
        ("pass_rate", _same(stated.pass_rate, recomputed.pass_rate)),
        ("pass_rate_ci", stated.pass_rate_ci == recomputed.pass_rate_ci),
    ]
    for name, ok in fields:
        if not ok:
            raise EvidenceMismatch(f"{what}.{name}", "the stated value does not follow from the evidence")


def check_view(view: TaskClassView, leaves: Sequence[bytes]) -> None:
    """Checks a view's held-out statistics against the leaves of the evidence it cites
    (`leaves[i]` is the log's own leaf for `view.evidence[i]`)."""
    if len(view.evidence) != len(leaves):
        raise EvidenceMismatch("view.evidence", f"the view cites {len(view.evidence)} entries; {len(leaves)} leaves were given")
    cited = [Cited(e.index, leaf, e.case_id, e.score) for e, leaf in zip(view.evidence, leaves)]
    recomputed = held_out_from_evidence(view.task_class, cited, view.settings, view.window_start_micros)
    check_stated(view.held_out, recomputed)
