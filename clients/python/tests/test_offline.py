"""Input checks that need no server: each bad input is one typed error naming its field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evidence_ledger import canonical, problems
from evidence_ledger import events as ev
from evidence_ledger.envelope import Envelope, decode_leaf
from evidence_ledger.errors import (
    BadSignature,
    Conflict,
    Forbidden,
    InvalidInput,
    MalformedAnswer,
    MalformedRequest,
    RuleViolation,
    ServiceUnavailable,
    Unauthenticated,
    UnknownProblem,
    problem_from,
)
from evidence_ledger.note import SigningKey, VerifierKey, open_checkpoint, open_note

REPO = Path(__file__).resolve().parents[3]
D = "blake3:" + "ab" * 32


def test_every_documented_problem_code_has_its_typed_exception() -> None:
    codes = re.findall(r"^\| `([a-z_]+)` \|", (REPO / "docs/reject_codes.md").read_text(), re.M)
    api = re.search(r"The API codes are (.*?)\.\s*A 503", (REPO / "docs/API.md").read_text(), re.S)
    assert api is not None
    api_codes = re.findall(r"`([a-z_]+)`", api.group(1))
    assert len(codes) > 70 and len(api_codes) > 10
    # The package knows exactly the documented codes, no more.
    assert set(problems.BY_CODE) == set(codes) | set(api_codes)
    for code in codes + api_codes:
        cls = problems.BY_CODE[code]
        assert cls.code == code
    assert set(problems.BY_CODE) == set(codes) | set(api_codes)


def test_the_replayed_role_table_is_the_documented_role_matrix() -> None:
    from evidence_ledger.acceptance import BODIES, MAY_APPEND

    lines = [l for l in (REPO / "docs/role_matrix.md").read_text().splitlines() if l.startswith("| `")]
    header = [c.strip() for c in (REPO / "docs/role_matrix.md").read_text().splitlines()[0].strip("|").split("|")][1:]
    documented: dict[str, set[str]] = {}
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        kind = cells[0].strip("`")
        documented[kind] = {role for role, mark in zip(header, cells[1:]) if mark == "✓"}
    assert set(documented) == set(BODIES) and "state.committed" in documented
    for kind, roles in documented.items():
        replayed = {r for r, kinds in MAY_APPEND.items() if kind in kinds}
        assert replayed == roles or (kind == "tier.apply" and roles == set(header)), kind


def test_the_replayed_body_schemas_have_the_published_schemas_fields_and_required_fields() -> None:
    import json

    from evidence_ledger.acceptance import BODIES, Omittable

    for kind, schema in BODIES.items():
        published = json.loads((REPO / "docs/schemas/events" / f"{kind}.json").read_text())
        assert set(schema) == set(published["properties"]), kind
        assert {k for k, sub in schema.items() if not isinstance(sub, Omittable)} == set(published["required"]), kind


def test_a_recommendation_cites_exactly_its_projections_evidence_by_tree_or_by_list() -> None:
    from evidence_ledger.client import _check_cited_evidence
    from evidence_ledger.errors import VerificationError
    from evidence_ledger.merkle import EMPTY_ROOT, evidence_tree

    pairs = [(5, "aa" * 32), (17, "bb" * 32), (40, "cc" * 32)]
    count, root = evidence_tree(pairs)

    def by_tree(c: object = count, r: object = root, **more: object) -> dict[str, object]:
        return {"evidence": [], "evidence_tree": {"count": c, "root": r, **more}}

    listed: dict[str, object] = {"evidence": [{"index": i, "leaf_hash": h} for i, h in pairs]}
    _check_cited_evidence(by_tree(), pairs)
    _check_cited_evidence(listed, pairs)
    _check_cited_evidence(by_tree(0, EMPTY_ROOT.hex()), [])
    _check_cited_evidence({"evidence": []}, [])
    refusals: list[tuple[dict[str, object], list[tuple[int, str]], str]] = [
        (by_tree(), pairs[:2], "recommendation.evidence_tree"),
        (by_tree(), [pairs[1], pairs[0], pairs[2]], "recommendation.evidence_tree"),
        (by_tree(), [*pairs[:2], (40, "cd" * 32)], "recommendation.evidence_tree"),
        (by_tree(4), pairs, "recommendation.evidence_tree"),
        (by_tree(3.0), pairs, "recommendation.evidence_tree"),
        (by_tree(r=root.upper()), pairs, "recommendation.evidence_tree"),
        (by_tree(depth=2), pairs, "recommendation.evidence_tree"),
        ({**by_tree(), **listed}, pairs, "recommendation.evidence"),
        # A present tree is a tree: `null` is not read as absent (the ledger refuses it).
        ({"evidence_tree": None, **listed}, pairs, "recommendation.evidence_tree"),
        ({"evidence": [], "evidence_tree": None}, [], "recommendation.evidence_tree"),
        (listed, pairs[:2], "recommendation.evidence"),
        (listed, [], "recommendation.evidence"),
    ]
    for body, evidence, what in refusals:
        with pytest.raises(VerificationError) as e:
            _check_cited_evidence(body, evidence)
        assert e.value.what == what, body


def test_a_recommendation_states_the_projection_it_comes_with() -> None:
    """`Client.recommend`'s check of the entry read back against the projection served
    with it: every part of the body the view gives, and the settings when stated."""
    import copy
    from typing import Any, Callable

    from evidence_ledger.client import _check_recommendation_body
    from evidence_ledger.errors import VerificationError
    from evidence_ledger.merkle import evidence_tree
    from evidence_ledger.wire import parse_view

    rationale = [
        {"rule": "silver.enough_held_out_cases", "holds": True, "detail": "2 active held-out cases; silver needs at least 1"},
        {"rule": "silver.lower_bound_meets_threshold", "holds": False, "detail": "lower 95% bound 0.4000; silver needs at least 0.5"},
    ]
    served: dict[str, Any] = {
        "task_class": "tc", "tree_size": 9, "root": "ee" * 32, "now_micros": 5, "window_start_micros": 0,
        "settings": {"window_seconds": 2592000, "confidence": 0.95, "resamples": 2000}, "tier": "bronze",
        "held_out": {"cases": 2, "mean": 0.5, "mean_ci": None, "passed": 1, "pass_rate": 0.5, "pass_rate_ci": None},
        "all_cases": {"cases": 2, "mean": 0.5, "mean_ci": None, "passed": 1, "pass_rate": 0.5, "pass_rate_ci": None},
        "evidence": [{"index": 1, "leaf_hash": "aa" * 32, "case_id": "c1", "score": 0.25},
                     {"index": 2, "leaf_hash": "bb" * 32, "case_id": "c2", "score": 0.75}],
        "recommendation": {"current_tier": "bronze", "recommended_tier": "bronze", "rationale": rationale,
                           "requires_human_approval": True},
    }
    view = parse_view(served)
    count, root = evidence_tree([(1, "aa" * 32), (2, "bb" * 32)])
    honest: dict[str, Any] = {
        "task_class": "tc", "current_tier": "bronze", "recommended_tier": "bronze", "evidence": [],
        "evidence_tree": {"count": count, "root": root},
        "settings": {"window_seconds": 2592000, "confidence": 0.95, "resamples": 2000},
        "rationale": copy.deepcopy(rationale), "checkpoint": {"size": 9, "root": "ee" * 32},
        "requires_human_approval": True, "request_id": "promotion-requested-1",
    }

    def body(f: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
        b = copy.deepcopy(honest)
        f(b)
        return b

    _check_recommendation_body(honest, view)
    # An entry that states no settings.
    _check_recommendation_body(body(lambda b: b.pop("settings")), view)
    refusals: list[tuple[Callable[[dict[str, Any]], object], str]] = [
        (lambda b: b.update(task_class="other"), "recommendation.task_class"),
        (lambda b: b["checkpoint"].update(size=8), "recommendation.checkpoint"),
        (lambda b: b["checkpoint"].update(size=9.0), "recommendation.checkpoint"),
        (lambda b: b["checkpoint"].update(root="ef" * 32), "recommendation.checkpoint"),
        (lambda b: b["checkpoint"].update(root=("ee" * 32).upper()), "recommendation.checkpoint"),
        (lambda b: b["checkpoint"].update(depth=1), "recommendation.checkpoint"),
        (lambda b: b["checkpoint"].pop("root"), "recommendation.checkpoint"),
        (lambda b: b.pop("checkpoint"), "recommendation.checkpoint"),
        # Present settings are settings: `null` is not read as absent (the ledger refuses it).
        (lambda b: b.update(settings=None), "recommendation.settings"),
        (lambda b: b.update(settings=[2592000, 0.95, 2000]), "recommendation.settings"),
        (lambda b: b["settings"].update(window_seconds=7 * 24 * 3600), "recommendation.settings"),
        (lambda b: b["settings"].update(window_seconds=2592000.0), "recommendation.settings"),
        (lambda b: b["settings"].update(confidence=0.9), "recommendation.settings"),
        (lambda b: b["settings"].update(confidence="0.95"), "recommendation.settings"),
        (lambda b: b["settings"].update(resamples=1999), "recommendation.settings"),
        (lambda b: b["settings"].update(resamples=2000.0), "recommendation.settings"),
        (lambda b: b["settings"].update(seed=7), "recommendation.settings"),
        (lambda b: b["settings"].pop("resamples"), "recommendation.settings"),
        (lambda b: b.update(current_tier="silver"), "recommendation.current_tier"),
        (lambda b: b.pop("current_tier"), "recommendation.current_tier"),
        (lambda b: b.update(recommended_tier="silver"), "recommendation.recommended_tier"),
        (lambda b: b["rationale"].reverse(), "recommendation.rationale"),
        (lambda b: b["rationale"].pop(), "recommendation.rationale"),
        (lambda b: b["rationale"].append(rationale[0]), "recommendation.rationale"),
        (lambda b: b["rationale"][1].update(holds=True), "recommendation.rationale"),
        (lambda b: b["rationale"][0].update(holds=1), "recommendation.rationale"),
        (lambda b: b["rationale"][1].update(detail="lower 95% bound 0.4001; silver needs at least 0.5"), "recommendation.rationale"),
        (lambda b: b["rationale"][0].update(rule="gold.enough_held_out_cases"), "recommendation.rationale"),
        (lambda b: b["rationale"][0].update(weight=1), "recommendation.rationale"),
        (lambda b: b["rationale"][0].pop("detail"), "recommendation.rationale"),
        (lambda b: b.update(rationale=None), "recommendation.rationale"),
        (lambda b: b["evidence_tree"].update(count=1), "recommendation.evidence_tree"),
        (lambda b: (b.pop("evidence_tree"), b["evidence"].append({"index": 1, "leaf_hash": "aa" * 32})), "recommendation.evidence"),
    ]
    for f, what in refusals:
        with pytest.raises(VerificationError) as e:
            _check_recommendation_body(body(f), view)
        assert e.value.what == what, body(f)
    # A view whose tier and recommendation disagree is not the one any body states.
    for torn in ({**served, "tier": "silver"},
                 {**served, "recommendation": {**served["recommendation"], "current_tier": "silver"}}):
        with pytest.raises(VerificationError) as e:
            _check_recommendation_body(honest, parse_view(torn))
        assert e.value.what == "recommendation.current_tier"


def test_problem_documents_map_to_their_group_and_name_the_field() -> None:
    p = problem_from(422, {"code": "breakdown_key_banned", "detail": "no", "field": "event.body.score.breakdown.model_confidence"})
    assert isinstance(p, problems.BreakdownKeyBanned) and isinstance(p, RuleViolation)
    assert p.field == "event.body.score.breakdown.model_confidence"
    assert isinstance(problem_from(400, {"code": "invalid_digest"}), MalformedRequest)
    assert isinstance(problem_from(401, {"code": "unknown_signer"}), Unauthenticated)
    assert isinstance(problem_from(403, {"code": "promotion_must_be_human_authorized", "recorded_index": 7}), Forbidden)
    assert problem_from(403, {"code": "promotion_must_be_human_authorized", "recorded_index": 7}).recorded_index == 7
    assert isinstance(problem_from(409, {"code": "capability_spent"}), Conflict)
    assert isinstance(problem_from(503, {"code": "overloaded"}), ServiceUnavailable)
    assert isinstance(problem_from(418, {"code": "from_the_future"}), UnknownProblem)


@pytest.mark.parametrize(
    "text, rule",
    [
        (b'{"a":1,"a":2}', "duplicate_key"),
        (b'{"a":9007199254740992}', "integer_precision"),
        (b'{"a":NaN}', "malformed_json"),
        (b'{"a":1e400}', "malformed_json"),
        (b'{"a":', "malformed_json"),
    ],
)
def test_strict_json_refuses_what_the_ledger_refuses(text: bytes, rule: str) -> None:
    with pytest.raises(InvalidInput, match=rule):
        canonical.parse_strict(text)


def test_non_canonical_bytes_are_refused() -> None:
    with pytest.raises(InvalidInput, match="canonical"):
        canonical.parse_canonical(b'{"b":1, "a":2}')
    with pytest.raises(InvalidInput, match="finite"):
        canonical.encode({"x": float("nan")})
    with pytest.raises(InvalidInput) as e:
        canonical.encode({"x": [1, 2**60]})
    assert e.value.field == "x[1]"


@pytest.mark.parametrize(
    "make, field, code",
    [
        (lambda: ev.RunStarted("run 1", "tc", "h", D, D), "event.body.run_id", "invalid_identifier"),
        (lambda: ev.RunStarted("r1", "tc", "h", "md5:nope", D), "event.body.rubric_digest", "invalid_digest"),
        (lambda: ev.RunStarted("r1", "tc", "h\x07", D, D), "event.body.harness_version", "invalid_text"),
        (lambda: ev.RunStarted("r1", "tc", "h", D, D, "container"), "event.body.isolation_class", "invalid_value"),
        (lambda: ev.BenchScore(True, 1.5).check(), "event.body.score.score", "score_out_of_range"),
        (lambda: ev.BenchScore(True, 0.5, cost_usd=-1).check(), "event.body.score.cost_usd", "cost_out_of_range"),
        (lambda: ev.BenchScore(True, 0.5, duration_seconds=float("inf")).check(), "event.body.score.duration_seconds", "duration_out_of_range"),
        (lambda: ev.BenchScore(True, 0.5, {"model_confidence": 1.0}).check(), "event.body.score.breakdown.model_confidence", "breakdown_key_banned"),
        (lambda: ev.BenchScore(True, 0.5, {"ok": float("nan")}).check(), "event.body.score.breakdown.ok", "breakdown_value_out_of_range"),
        (lambda: ev.BenchScore(True, 0.5, failure_modes=[("x", "fatal")]).check(), "event.body.score.failure_modes[0].severity", "severity_invalid"),
        (lambda: ev.RubricFailed("inv-1", "rubric.bored"), "event.body.failure_code", "rubric_failure_code_unknown"),
        (lambda: ev.TierApply("tc", "platinum"), "event.body.to", "invalid_value"),
        (lambda: ev.TaskClassRegistered("tc", ev.TierRule(5, 0.8), ev.TierRule(3, 0.9), [], [], D), "event.body.tiers.gold", "tier_rules_invalid"),
        (lambda: ev.TaskClassRegistered("tc", ev.TierRule(5, 0.8), ev.TierRule(5, 0.9), [], ["llm_judge"], D), "event.body.breakdown_keys[0]", "breakdown_key_banned"),
        (lambda: ev.CapabilityMinted("cap-1", "wf", "2026-11-22T00:00:00+01:00", ev.CheckpointRef(1, "00" * 32), "2026-11-23T00:00:00Z"), "event.body.validated_at", "invalid_timestamp"),
        (lambda: ev.PrincipalRevoked("ABC", "lost"), "event.body.key_id", "invalid_identifier"),
    ],
)
def test_event_constructors_refuse_bad_fields_naming_field_and_rule(make: object, field: str, code: str) -> None:
    with pytest.raises(InvalidInput) as e:
        make()  # type: ignore[operator]
    assert e.value.field == field and e.value.code == code


def test_co_signatures_by_one_curator_twice_are_refused() -> None:
    k = SigningKey.generate("curator")
    d = ev.CaseDraft("case-1", "t", "positive", "easy", "held-out", D, D)
    with pytest.raises(InvalidInput) as e:
        ev.CaseAdded.cosigned("tc", d, source="curated", source_ref="r", added_at="2026-11-22T00:00:00Z", added_by=k, reviewed_by=k)
    assert e.value.code == "cosigners_not_distinct"


def test_envelope_round_trip_and_leaf_decoding() -> None:
    k = SigningKey.generate("harness")
    env = ev.RunFinished("run-1").sign(k, id="py-test-0001", issued_at="2026-11-22T08:00:00Z")
    assert Envelope.parse(env.to_json()) == env and env.verify(k.public_key)
    assert not env.verify(SigningKey.generate("other").public_key)
    leaf = decode_leaf(env.leaf_bytes(1_795_334_400_000_000))
    assert leaf.envelope == env and leaf.kind == "run.finished" and leaf.sequenced_at == 1_795_334_400_000_000
    with pytest.raises(InvalidInput) as e:
        Envelope.parse(env.to_json().replace(b'"keyid":"', b'"keyid":"0'))
    assert e.value.code == "signer_mismatch"


def test_key_files_round_trip_and_a_wrong_hash_is_refused(tmp_path: Path) -> None:
    k = SigningKey.generate("alice")
    k.save(tmp_path / "alice.key")
    assert (tmp_path / "alice.key").stat().st_mode & 0o777 == 0o600
    again = SigningKey.load(tmp_path / "alice.key")
    assert again.key_id == k.key_id and again.verifier_key == k.verifier_key
    text = k.private_key()
    bad = text.replace(text.split("+")[3], "00000000")
    with pytest.raises(InvalidInput, match="key hash"):
        SigningKey.from_private(bad)
    with pytest.raises(FileExistsError):
        k.save(tmp_path / "alice.key")


def test_signed_notes_verify_and_a_changed_byte_or_other_key_is_refused() -> None:
    k = SigningKey.generate("example.org/log")
    body = b"example.org/log\n5\n" + __import__("base64").b64encode(b"\x01" * 32) + b"\n"
    note = k.sign_note(body)
    cp, key = open_checkpoint(note, [k.verifier_key])
    assert cp.size == 5 and cp.root == b"\x01" * 32 and key == k.verifier_key
    with pytest.raises(BadSignature):
        open_checkpoint(note.replace("\n5\n", "\n6\n"), [k.verifier_key])
    with pytest.raises(BadSignature):
        open_note(note, [SigningKey.generate("example.org/log").verifier_key])
    with pytest.raises(MalformedAnswer):
        open_note(note.replace("\n\n", "\n"), [k.verifier_key])
    with pytest.raises(InvalidInput):
        VerifierKey(str(k.verifier_key).replace("+", "-", 1))
