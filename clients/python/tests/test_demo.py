"""The sample bench of `ledger demo` (three task classes, 90 cases, realistic scores):
every projection and bundle the server serves verifies here, statistics bit for bit."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from conftest import LedgerServer, ledger_bin
from evidence_ledger import Client, TrustedState, audit, verify_bundle


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerServer]:
    data = tmp_path_factory.mktemp("demo") / "data"
    subprocess.run([str(ledger_bin()), "demo", "--exit", "--data-dir", str(data)], check=True, capture_output=True, timeout=300)
    s = LedgerServer(data, init=False).start()
    yield s
    s.stop()


def test_every_demo_projection_and_bundle_verifies_bit_for_bit(demo: LedgerServer) -> None:
    c = Client(demo.url, demo.vkey)
    classes = c.task_classes()
    assert len(classes) == 3
    cases = {}
    for t in classes:
        p = c.projection(t.task_class)
        cases[t.task_class] = p.view.held_out.cases
        assert p.view.held_out.mean_ci is not None and p.view.held_out.mean_ci.low < p.view.held_out.mean_ci.high
        data, summary = c.bundle(t.task_class)
        assert verify_bundle(data, [demo.vkey]).evidence == summary.evidence == p.view.held_out.cases
    assert sorted(cases.values()) == [20, 30, 40]


def test_audit_of_the_demo_passes_and_then_checks_consistency(demo: LedgerServer, tmp_path: Path) -> None:
    trust = TrustedState.file(tmp_path / "trusted.note")
    first = audit(Client(demo.url, demo.vkey, trust=trust), samples=20, seed=1)
    assert first.previous_size is None and first.projections_checked == 3 and first.evidence_checked == 90
    second = audit(Client(demo.url, demo.vkey, trust=TrustedState.file(tmp_path / "trusted.note")), samples=5, seed=2)
    assert second.previous_size == first.size


def test_a_replay_of_the_demo_agrees_bit_for_bit_with_every_projection(demo: LedgerServer, tmp_path: Path) -> None:
    from evidence_ledger import Replica, replay_projections

    client = Client(demo.url, demo.vkey)
    size = client.checkpoint().size
    r = replay_projections(client, Replica.open(tmp_path / "replica", client.keys))
    assert (r.task_classes, r.followed, r.size) == (3, size, size)
    again = replay_projections(Client(demo.url, demo.vkey), Replica.open(tmp_path / "replica", client.keys))
    assert again.followed == 0


def test_every_payload_of_the_demo_validates_against_the_served_json_schemas(demo: LedgerServer) -> None:
    """The JSON Schemas the server publishes (`/v1/schemas/events`, and one
    per kind) are generated from the types it decodes with: every payload
    of the demo log validates, and one with a field added, a field taken
    away or a number given as text does not."""
    import json
    import urllib.request

    import jsonschema

    def get(path: str) -> object:
        with urllib.request.urlopen(demo.url + path, timeout=10) as r:
            return json.load(r)

    payload_schema = get("/v1/schemas/events")
    payload_check = jsonschema.Draft202012Validator(payload_schema)  # type: ignore[arg-type]
    bodies: dict[str, jsonschema.Draft202012Validator] = {}
    kinds = set()
    start = 0
    while True:
        page = get(f"/v1/entries?start={start}&limit=1000")
        assert isinstance(page, dict)
        for e in page["entries"]:
            p = e["payload"]
            payload_check.validate(p)
            kind = p["event"]["kind"]
            kinds.add(kind)
            if kind not in bodies:
                bodies[kind] = jsonschema.Draft202012Validator(get(f"/v1/schemas/events/{kind}"))  # type: ignore[arg-type]
            bodies[kind].validate(p["event"]["body"])
        if page["next"] is None:
            break
        start = page["next"]
    assert {"principal.enrolled", "task_class.registered", "case.added", "run.started", "score.recorded"} <= kinds
    score = next(v for k, v in bodies.items() if k == "score.recorded")
    good = None
    start = 0
    page = get(f"/v1/entries?start={start}&limit=1000")
    assert isinstance(page, dict)
    for e in page["entries"]:
        if e["payload"]["event"]["kind"] == "score.recorded":
            good = e["payload"]["event"]["body"]
            break
    assert good is not None
    for bad in (
        {**good, "confidence": 0.9},
        {k: v for k, v in good.items() if k != "case_id"},
        {**good, "score": {**good["score"], "score": "0.9"}},
    ):
        assert not score.is_valid(bad), bad
