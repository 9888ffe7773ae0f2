"""The gate scenario end to end: the harness posts scores, the promotion gate reads a
verified projection and a verified recommendation, the apply is refused and recorded,
and only two maintainers' co-signed decision changes the tier; a request posted again
through the gate is answered with the recommendation made for it before."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import Bench, LedgerServer
from evidence_ledger import Client, Gate, Incomplete, TrustedState, problems, verify_bundle
from evidence_ledger import events as ev
from evidence_ledger.envelope import Envelope, decode_leaf
from evidence_ledger.merkle import evidence_tree
from evidence_ledger.timefmt import parse_utc_micros


def test_harness_scores_gate_reads_a_verified_recommendation_and_the_apply_is_refused(server: LedgerServer, tmp_path: Path) -> None:
    # The harness.
    b = Bench(server, "gate-e2e", cases=6, silver=0.6)
    posted = b.client.post_many([b.score(c, 0.9 + 0.01 * i).sign(b.harness) for i, c in enumerate(b.cases)])
    assert all(p.receipt is not None for p in posted)

    # The promotion gate: its own client, trusting only the log's verifier key.
    gate = Client(server.url, server.vkey)
    p = gate.projection(b.name)
    view = p.view
    assert view.held_out.cases == 6 and len(p.evidence) == 6
    assert view.recommendation.recommended_tier == "silver"
    assert view.recommendation.requires_human_approval is True
    assert {r.rule for r in view.recommendation.rationale} >= {"silver.lower_bound_meets_threshold", "silver.enough_held_out_cases"}

    answer = gate.recommend(ev.PromotionRequested(b.name).sign(b.gate))
    rec = answer.recommendation
    assert rec.kind == "promotion.recommended"
    assert answer.projection.view.recommendation.recommended_tier == "silver"

    # Asking the ledger to apply the tier is refused, and the refusal is recorded.
    with pytest.raises(problems.PromotionMustBeHumanAuthorized) as refused:
        gate.post(ev.TierApply(b.name, "silver").sign(b.gate))
    assert refused.value.status == 403 and refused.value.recorded_index is not None
    blocked = gate.entry(refused.value.recorded_index)
    assert blocked.kind == "promotion.apply_blocked"
    assert {t.task_class: t.tier for t in gate.task_classes()}[b.name] == "bronze"

    # The bundle is archived with the decision and verifies offline.
    data, summary = gate.bundle(b.name)
    (tmp_path / "bundle.json").write_bytes(data)
    assert verify_bundle(data, [server.vkey]).recommended_tier == "silver"

    # Humans promote: two maintainers co-sign a tier change citing the recommendation.
    with pytest.raises(problems.RecommendationUnknown):
        gate.post(ev.TierChanged.cosigned(b.name, "bronze", "gold", rec.index, decided_by=b.maintainers[0], confirmed_by=b.maintainers[1]).sign(b.maintainers[0]))
    done = gate.post(ev.TierChanged.cosigned(b.name, "bronze", "silver", rec.index, decided_by=b.maintainers[0], confirmed_by=b.maintainers[1]).sign(b.maintainers[0]))
    assert done.kind == "tier.changed"
    assert {t.task_class: t.tier for t in gate.task_classes()}[b.name] == "silver"


def test_the_recommendation_entry_is_the_ledgers_answer_to_this_request(server: LedgerServer) -> None:
    b = Bench(server, "gate-request", cases=5)
    b.client.post_many([b.score(c, 0.95).sign(b.harness) for c in b.cases])
    req = ev.PromotionRequested(b.name).sign(b.gate)
    answer = b.client.recommend(req)
    again = b.client.recommend(req)
    assert again.recommendation.index == answer.recommendation.index
    entry = b.client.entry(answer.recommendation.index)
    import base64

    leaf = decode_leaf(base64.b64decode(entry.leaf))
    assert leaf.body["request_id"] == req.id and leaf.body["requires_human_approval"] is True
    # The evidence is cited by its tree, over the projection's references in order.
    count, root = evidence_tree([(e.index, e.leaf_hash) for e in answer.projection.view.evidence])
    assert count == 5 and leaf.body["evidence"] == [] and leaf.body["evidence_tree"] == {"count": count, "root": root}


# --- a request posted again through the gate ---------------------------------------


class Rewriting:
    """A loopback proxy to the real server that passes everything through, but for the
    answers to `POST /v1/recommendations`, which `lie` rewrites (a dict)."""

    def __init__(self, upstream: str, lie: Callable[[dict[str, Any]], None]) -> None:
        proxy = self
        self.upstream, self.lie = upstream, lie

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                proxy.forward(self, None)

            def do_POST(self) -> None:
                proxy.forward(self, self.rfile.read(int(self.headers.get("content-length", "0"))))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def forward(self, h: BaseHTTPRequestHandler, body: bytes | None) -> None:
        req = urllib.request.Request(self.upstream + h.path, data=body, method=h.command,
                                     headers={"content-type": "application/json"} if body is not None else {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, data, ctype = r.status, r.read(), r.headers.get("content-type", "application/json")
        except urllib.error.HTTPError as e:
            status, data, ctype = e.code, e.read(), e.headers.get("content-type", "application/json")
        if status in (200, 201) and h.command == "POST" and h.path == "/v1/recommendations":
            answer = json.loads(data)
            self.lie(answer)
            data = json.dumps(answer).encode()
        h.send_response(status)
        h.send_header("content-type", ctype)
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def asked(server: LedgerServer) -> tuple[Bench, Envelope, int]:
    """A request the ledger answered, whose answer the gate never saw (a timeout), and a
    log that moved on after it: the bench, the request, the recommendation's index."""
    b = Bench(server, "gate-again", cases=5)
    b.client.post_many([b.score(c, 0.95).sign(b.harness) for c in b.cases])
    req = ev.PromotionRequested(b.name).sign(b.gate)
    lost = b.client.recommend(req)
    b.client.post(b.score(b.cases[0], 0.2).sign(b.harness))
    return b, req, lost.recommendation.index


def test_a_request_posted_again_through_the_gate_is_answered_with_its_first_recommendation(
    server: LedgerServer, asked: tuple[Bench, Envelope, int], tmp_path: Path
) -> None:
    """A retry after a timeout (docs/API.md: a request answered before is answered again,
    200, with the recommendation made for it): its projection is at that recommendation's
    checkpoint, older than the one the gate trusts once it follows the log. The gate
    takes it, its view equal to the log's up to that checkpoint at its stated time, and
    does not take it for a fresh one."""
    b, req, index = asked
    gate = Gate(Client(server.url, server.vkey, trust=TrustedState.file(tmp_path / "gate.note")), tmp_path / "gate")
    again = gate.recommend(req)
    rec, p = again.recommendation, again.projection
    assert rec.existing and rec.index == index and p.tree_size <= index < gate.replica.size
    assert p.view.now_micros <= (parse_utc_micros(rec.sequenced_at) or 0)
    # Asked again through the same gate, and a new request, answered at the head.
    assert gate.recommend(req).recommendation.index == index
    fresh = gate.recommend(ev.PromotionRequested(b.name).sign(b.gate))
    assert not fresh.recommendation.existing and fresh.projection.tree_size > index
    assert fresh.projection.view.held_out.mean != p.view.held_out.mean


def test_attack_a_request_posted_again_answered_at_a_later_time_is_refused(
    server: LedgerServer, asked: tuple[Bench, Envelope, int], tmp_path: Path
) -> None:
    """The stored answer's view restated one second after its recommendation was
    sequenced (the window moved with it): the log up to its checkpoint gives the same view
    at that time, and the evidence and the entry agree with it; only the time bound tells."""
    b, req, _ = asked

    def later(answer: dict[str, Any]) -> None:
        v = answer["projection"]["view"]
        answered = parse_utc_micros(answer["recommendation"]["sequenced_at"])
        assert answered is not None
        shift = answered + 1_000_000 - v["now_micros"]
        v["now_micros"] += shift
        v["window_start_micros"] += shift

    px = Rewriting(server.url, later)
    try:
        gate = Gate(Client(px.url, server.vkey, trust=TrustedState.file(tmp_path / "gate.note")), tmp_path / "gate")
        with pytest.raises(Incomplete, match="after its recommendation"):
            gate.recommend(req)
    finally:
        px.close()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evidence_ledger", *args], capture_output=True, text=True, timeout=300)


def test_cli_verify_bundle_passes_and_a_changed_bundle_fails(server: LedgerServer, tmp_path: Path) -> None:
    b = Bench(server, "cli-bundle", cases=5)
    b.client.post_many([b.score(c, 0.8).sign(b.harness) for c in b.cases])
    data, _ = b.client.bundle(b.name)
    f = tmp_path / "b.json"
    f.write_bytes(data)
    ok = run_cli("verify-bundle", str(f), "--key", str(server.vkey))
    assert ok.returncode == 0, ok.stderr
    assert "bundle verified" in ok.stdout
    f.write_bytes(data.replace(b'"passed":', b'"passed" :', 1))
    bad = run_cli("verify-bundle", str(f), "--key", str(server.vkey))
    assert bad.returncode == 1 and "FAILED" in bad.stderr
    nokey = run_cli("verify-bundle", str(f))
    assert nokey.returncode == 2


def test_cli_audit_saves_the_checkpoint_and_checks_consistency_next_time(server: LedgerServer, tmp_path: Path) -> None:
    trusted = tmp_path / "trusted.note"
    first = run_cli("audit", server.url, "--key", str(server.vkey), "--trusted", str(trusted))
    assert first.returncode == 0, first.stderr
    assert "first audit" in first.stdout and trusted.exists()
    second = run_cli("audit", server.url, "--key", str(server.vkey), "--trusted", str(trusted))
    assert second.returncode == 0, second.stderr
    assert "consistent with trusted size" in second.stdout


def test_cli_audit_of_a_server_behind_the_trusted_checkpoint_exits_3(twins: tuple[LedgerServer, LedgerServer], tmp_path: Path) -> None:
    a, b = twins
    trusted = tmp_path / "trusted.note"
    from evidence_ledger import SigningKey, TrustedState

    ca = Client(a.url, a.vkey, trust=TrustedState.file(trusted))
    k = SigningKey.generate("cli-stale")
    ca.post(ev.PrincipalEnrolled.of(k, "cli-stale@example.org", ["harness"]).sign(a.operator))
    r = run_cli("audit", b.url, "--key", str(b.vkey), "--trusted", str(trusted))
    assert r.returncode == 3, r.stderr
