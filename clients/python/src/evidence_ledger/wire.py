"""The server's answers as typed values (`verifier/src/wire.rs`).

Each `parse_*` takes decoded JSON and raises `MalformedAnswer` naming the
field that is missing or of the wrong type. Nothing here verifies anything:
`verify` does, against the keys and state the caller trusts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, TypeVar

from .commit import (
    CaseRecord,
    ClassProof,
    ClassRecord,
    Neighbours,
    parse_case_record,
    parse_class_proof,
    parse_class_record,
    parse_neighbours,
)
from .disclose import Disclosed
from .errors import MalformedAnswer
from .stats import Interval, ScoreStats, Settings

T = TypeVar("T")


def _obj(v: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(v, dict):
        raise MalformedAnswer(what, "must be a JSON object")
    return v


def _field(d: Mapping[str, Any], key: str, typ: type[T], what: str) -> T:
    if key not in d:
        raise MalformedAnswer(f"{what}.{key}", "missing")
    v = d[key]
    if typ is float and isinstance(v, int) and not isinstance(v, bool):
        return float(v)  # type: ignore[return-value]
    if not isinstance(v, typ) or (typ is int and isinstance(v, bool)):
        raise MalformedAnswer(f"{what}.{key}", f"must be {typ.__name__}")
    return v


def _uint(d: Mapping[str, Any], key: str, what: str) -> int:
    v = _field(d, key, int, what)
    if v < 0:
        raise MalformedAnswer(f"{what}.{key}", "must not be negative")
    return v


def _opt(d: Mapping[str, Any], key: str, typ: type[T], what: str) -> Optional[T]:
    if d.get(key) is None:
        return None
    return _field(d, key, typ, what)


def _strs(d: Mapping[str, Any], key: str, what: str) -> list[str]:
    v = _field(d, key, list, what)
    for i, s in enumerate(v):
        if not isinstance(s, str):
            raise MalformedAnswer(f"{what}.{key}[{i}]", "must be a string")
    return list(v)


@dataclass(frozen=True)
class WriteReceipt:
    index: int
    leaf_hash: str
    chain_hash: str
    tree_size: int
    root: str
    inclusion_proof: list[str]
    checkpoint: str
    id: str
    kind: str
    existing: bool
    sequenced_at: str


def parse_receipt(v: Any, what: str = "receipt") -> WriteReceipt:
    d = _obj(v, what)
    return WriteReceipt(
        index=_uint(d, "index", what),
        leaf_hash=_field(d, "leaf_hash", str, what),
        chain_hash=_field(d, "chain_hash", str, what),
        tree_size=_uint(d, "tree_size", what),
        root=_field(d, "root", str, what),
        inclusion_proof=_strs(d, "inclusion_proof", what),
        checkpoint=_field(d, "checkpoint", str, what),
        id=_field(d, "id", str, what),
        kind=_field(d, "kind", str, what),
        existing=_field(d, "existing", bool, what),
        sequenced_at=_field(d, "sequenced_at", str, what),
    )


@dataclass(frozen=True)
class EntryView:
    """An entry as served. `disclosures` (the disclosures of its committed values, in
    field order) and `redacted` (the paths of committed fields whose disclosure is no
    longer kept) come only to a reader with a role (docs/PRIVACY.md); `disclosed` is
    set by the client once the disclosures are checked against the leaf
    (`disclose.check_disclosed`): every committed field, with its value where disclosed."""

    index: int
    leaf: str
    leaf_hash: str
    chain_hash: str
    sequenced_at: str
    id: str
    kind: str
    signer: str
    payload: Mapping[str, Any]
    disclosures: Optional[list[str]] = None
    redacted: Optional[list[str]] = None
    disclosed: Optional[list[Disclosed]] = None


def parse_entry(v: Any, what: str = "entry") -> EntryView:
    d = _obj(v, what)
    return EntryView(
        index=_uint(d, "index", what),
        leaf=_field(d, "leaf", str, what),
        leaf_hash=_field(d, "leaf_hash", str, what),
        chain_hash=_field(d, "chain_hash", str, what),
        sequenced_at=_field(d, "sequenced_at", str, what),
        id=_field(d, "id", str, what),
        kind=_field(d, "kind", str, what),
        signer=_field(d, "signer", str, what),
        payload=_obj(d.get("payload"), f"{what}.payload"),
        disclosures=None if d.get("disclosures") is None else _strs(d, "disclosures", what),
        redacted=None if d.get("redacted") is None else _strs(d, "redacted", what),
    )


@dataclass(frozen=True)
class EntryPage:
    entries: list[EntryView]
    next: Optional[int]
    tree_size: int


def parse_entry_page(v: Any, what: str = "page") -> EntryPage:
    d = _obj(v, what)
    items = _field(d, "entries", list, what)
    return EntryPage(
        [parse_entry(e, f"{what}.entries[{i}]") for i, e in enumerate(items)],
        _opt(d, "next", int, what),
        _uint(d, "tree_size", what),
    )


@dataclass(frozen=True)
class InclusionProof:
    index: int
    tree_size: int
    leaf_hash: str
    root: str
    proof: list[str]
    checkpoint: str


def parse_inclusion(v: Any, what: str = "inclusion") -> InclusionProof:
    d = _obj(v, what)
    return InclusionProof(
        _uint(d, "index", what),
        _uint(d, "tree_size", what),
        _field(d, "leaf_hash", str, what),
        _field(d, "root", str, what),
        _strs(d, "proof", what),
        _field(d, "checkpoint", str, what),
    )


@dataclass(frozen=True)
class ConsistencyProof:
    first: int
    second: int
    first_root: str
    second_root: str
    proof: list[str]
    checkpoint: str


def parse_consistency(v: Any, what: str = "consistency") -> ConsistencyProof:
    d = _obj(v, what)
    return ConsistencyProof(
        _uint(d, "first", what),
        _uint(d, "second", what),
        _field(d, "first_root", str, what),
        _field(d, "second_root", str, what),
        _strs(d, "proof", what),
        _field(d, "checkpoint", str, what),
    )


@dataclass(frozen=True)
class LogInfo:
    origin: str
    verifier_key: str
    ledger_key_id: str
    tree_size: int
    root: str
    verify_status: str


def parse_log_info(v: Any, what: str = "log") -> LogInfo:
    d = _obj(v, what)
    return LogInfo(
        _field(d, "origin", str, what),
        _field(d, "verifier_key", str, what),
        _field(d, "ledger_key_id", str, what),
        _uint(d, "tree_size", what),
        _field(d, "root", str, what),
        _field(d, "verify_status", str, what),
    )


@dataclass(frozen=True)
class TaskClassSummary:
    task_class: str
    tier: str


def parse_task_classes(v: Any, what: str = "task_classes") -> list[TaskClassSummary]:
    if not isinstance(v, list):
        raise MalformedAnswer(what, "must be a list")
    out = []
    for i, item in enumerate(v):
        d = _obj(item, f"{what}[{i}]")
        out.append(TaskClassSummary(_field(d, "task_class", str, f"{what}[{i}]"), _field(d, "tier", str, f"{what}[{i}]")))
    return out


@dataclass(frozen=True)
class Evidence:
    index: int
    leaf_hash: str
    case_id: str
    score: float


@dataclass(frozen=True)
class RuleOutcome:
    rule: str
    holds: bool
    detail: str


@dataclass(frozen=True)
class Recommendation:
    current_tier: str
    recommended_tier: str
    rationale: list[RuleOutcome]
    requires_human_approval: bool


@dataclass(frozen=True)
class TaskClassView:
    """One task class's projection at one checkpoint (docs/PROJECTIONS.md).

    `raw` is the view exactly as served, every key of it.
    """

    task_class: str
    tree_size: int
    root: str
    now_micros: int
    window_start_micros: int
    settings: Settings
    tier: str
    held_out: ScoreStats
    all_cases: ScoreStats
    evidence: list[Evidence]
    recommendation: Recommendation
    raw: Mapping[str, Any]


def _interval(v: Any, what: str) -> Optional[Interval]:
    if v is None:
        return None
    d = _obj(v, what)
    return Interval(_field(d, "low", float, what), _field(d, "high", float, what))


def _stats(v: Any, what: str) -> ScoreStats:
    d = _obj(v, what)
    return ScoreStats(
        cases=_uint(d, "cases", what),
        mean=_opt(d, "mean", float, what),
        mean_ci=_interval(d.get("mean_ci"), f"{what}.mean_ci"),
        passed=_uint(d, "passed", what),
        pass_rate=_opt(d, "pass_rate", float, what),
        pass_rate_ci=_interval(d.get("pass_rate_ci"), f"{what}.pass_rate_ci"),
    )


def parse_view(v: Any, what: str = "view") -> TaskClassView:
    d = _obj(v, what)
    s = _obj(d.get("settings"), f"{what}.settings")
    settings = Settings(
        _field(s, "window_seconds", int, f"{what}.settings"),
        _field(s, "confidence", float, f"{what}.settings"),
        _uint(s, "resamples", f"{what}.settings"),
    )
    ev = []
    for i, e in enumerate(_field(d, "evidence", list, what)):
        w = f"{what}.evidence[{i}]"
        ed = _obj(e, w)
        ev.append(Evidence(_uint(ed, "index", w), _field(ed, "leaf_hash", str, w), _field(ed, "case_id", str, w), _field(ed, "score", float, w)))
    r = _obj(d.get("recommendation"), f"{what}.recommendation")
    rw = f"{what}.recommendation"
    rationale = []
    for i, o in enumerate(_field(r, "rationale", list, rw)):
        od = _obj(o, f"{rw}.rationale[{i}]")
        rationale.append(RuleOutcome(_field(od, "rule", str, f"{rw}.rationale[{i}]"), _field(od, "holds", bool, f"{rw}.rationale[{i}]"), _field(od, "detail", str, f"{rw}.rationale[{i}]")))
    return TaskClassView(
        task_class=_field(d, "task_class", str, what),
        tree_size=_uint(d, "tree_size", what),
        root=_field(d, "root", str, what),
        now_micros=_field(d, "now_micros", int, what),
        window_start_micros=_field(d, "window_start_micros", int, what),
        settings=settings,
        tier=_field(d, "tier", str, what),
        held_out=_stats(d.get("held_out"), f"{what}.held_out"),
        all_cases=_stats(d.get("all_cases"), f"{what}.all_cases"),
        evidence=ev,
        recommendation=Recommendation(
            _field(r, "current_tier", str, rw),
            _field(r, "recommended_tier", str, rw),
            rationale,
            _field(r, "requires_human_approval", bool, rw),
        ),
        raw=d,
    )


@dataclass(frozen=True)
class EvidenceProof:
    index: int
    leaf_hash: str
    leaf: str
    proof: list[str]


@dataclass(frozen=True)
class ProjectionResponse:
    checkpoint: str
    verifier_key: str
    tree_size: int
    root: str
    view: TaskClassView
    evidence: list[EvidenceProof]
    raw: Mapping[str, Any]


def parse_projection(v: Any, what: str = "projection") -> ProjectionResponse:
    d = _obj(v, what)
    ev = []
    for i, e in enumerate(_field(d, "evidence", list, what)):
        w = f"{what}.evidence[{i}]"
        ed = _obj(e, w)
        ev.append(EvidenceProof(_uint(ed, "index", w), _field(ed, "leaf_hash", str, w), _field(ed, "leaf", str, w), _strs(ed, "proof", w)))
    return ProjectionResponse(
        checkpoint=_field(d, "checkpoint", str, what),
        verifier_key=_field(d, "verifier_key", str, what),
        tree_size=_uint(d, "tree_size", what),
        root=_field(d, "root", str, what),
        view=parse_view(d.get("view"), f"{what}.view"),
        evidence=ev,
        raw=d,
    )


@dataclass(frozen=True)
class RecommendationResponse:
    recommendation: WriteReceipt
    projection: ProjectionResponse


def parse_recommendation(v: Any, what: str = "answer") -> RecommendationResponse:
    d = _obj(v, what)
    return RecommendationResponse(
        parse_receipt(d.get("recommendation"), f"{what}.recommendation"),
        parse_projection(d.get("projection"), f"{what}.projection"),
    )


@dataclass(frozen=True)
class BatchItem:
    status: int
    receipt: Optional[WriteReceipt]
    problem: Optional[Mapping[str, Any]]


@dataclass(frozen=True)
class BatchResponse:
    results: list[BatchItem]
    appended: int
    tree_size: int


def parse_batch(v: Any, what: str = "batch") -> BatchResponse:
    d = _obj(v, what)
    items = []
    for i, it in enumerate(_field(d, "results", list, what)):
        w = f"{what}.results[{i}]"
        idict = _obj(it, w)
        rc = idict.get("receipt")
        pr = idict.get("problem")
        items.append(
            BatchItem(
                _uint(idict, "status", w),
                parse_receipt(rc, f"{w}.receipt") if rc is not None else None,
                _obj(pr, f"{w}.problem") if pr is not None else None,
            )
        )
    return BatchResponse(items, _uint(d, "appended", what), _uint(d, "tree_size", what))


@dataclass(frozen=True)
class CommitmentProof:
    """The `state.committed` entry a state answer rests on, with its proofs."""

    #: Its log index: the size of the log whose state it commits.
    index: int
    #: Base64 of the leaf bytes.
    leaf: str
    #: RFC 6962 inclusion proof of the leaf in the checkpoint's tree.
    inclusion_proof: list[str]
    #: RFC 6962 consistency proof from the committed size (`index`) to the checkpoint's size.
    consistency_proof: list[str]


@dataclass(frozen=True)
class StateResponse:
    """`GET /v1/task-classes/{name}/state`: a task class's committed state with its proofs
    (every case record, the class record's place under the committed state root, the
    commitment's place in the signed log), or, for a class that is not registered, its
    two neighbours. `raw` is the answer exactly as served."""

    task_class: str
    checkpoint: str
    verifier_key: str
    tree_size: int
    root: str
    commitment: CommitmentProof
    state_root: str
    task_classes: int
    class_: Optional[ClassRecord]
    class_proof: Optional[ClassProof]
    cases: list[CaseRecord]
    neighbours: Optional[Neighbours]
    #: The decision numbers the records give at `view["now_micros"]`, as served.
    view: Optional[Mapping[str, Any]]
    raw: Mapping[str, Any]


def parse_state(v: Any, what: str = "state") -> StateResponse:
    d = _obj(v, what)
    c = _obj(d.get("commitment"), f"{what}.commitment")
    cw = f"{what}.commitment"
    cases = _field(d, "cases", list, what)
    view = d.get("view")
    if view is not None and not isinstance(view, dict):
        raise MalformedAnswer(f"{what}.view", "must be a JSON object or null")
    return StateResponse(
        task_class=_field(d, "task_class", str, what),
        checkpoint=_field(d, "checkpoint", str, what),
        verifier_key=_field(d, "verifier_key", str, what),
        tree_size=_uint(d, "tree_size", what),
        root=_field(d, "root", str, what),
        commitment=CommitmentProof(
            _uint(c, "index", cw), _field(c, "leaf", str, cw), _strs(c, "inclusion_proof", cw), _strs(c, "consistency_proof", cw)
        ),
        state_root=_field(d, "state_root", str, what),
        task_classes=_uint(d, "task_classes", what),
        class_=None if d.get("class") is None else parse_class_record(d["class"], f"{what}.class"),
        class_proof=None if d.get("class_proof") is None else parse_class_proof(d["class_proof"], f"{what}.class_proof"),
        cases=[parse_case_record(x, f"{what}.cases[{i}]") for i, x in enumerate(cases)],
        neighbours=None if d.get("neighbours") is None else parse_neighbours(d["neighbours"], f"{what}.neighbours"),
        view=view,
        raw=d,
    )
