"""Completeness by replay against a server that leaves things out.

A small HTTP proxy in front of a real `ledger serve` tells one lie about
the first task class's projection. Every lie keeps each cited entry real
and proven and the held-out statistics consistent with what is cited, so
the evidence check (`check_projection`) passes; only the replay of the whole
log catches it, each lie as one typed failure. The honest server passes, a
second run fetches nothing, and a run after new entries folds only those.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

from conftest import Bench, LedgerServer, case_named, digest
from evidence_ledger import (
    Client,
    ForkDetected,
    Gate,
    Incomplete,
    Replica,
    ReplicaError,
    ReplayRules,
    SettingsMismatch,
    StaleCheckpoint,
    TrustedState,
    replay_projections,
)
from evidence_ledger import events as ev
from evidence_ledger.evidence import Cited, held_out_from_evidence
from evidence_ledger.fold import stats_json
from evidence_ledger.merkle import leaf_hash
from evidence_ledger.stats import Settings
from evidence_ledger.verify import check_projection
from evidence_ledger.wire import parse_projection

Lie = Callable[["Proxy", dict[str, Any]], None]


class Proxy:
    """Forwards every request to `upstream`; `lie` rewrites the first task class's
    projection answer (a dict) and `hide` drops a task class from the list."""

    def __init__(self, upstream: str, task_class: str, lie: Optional[Lie] = None, hide: Optional[str] = None) -> None:
        self.upstream, self.task_class, self.lie, self.hide = upstream, task_class, lie, hide
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                proxy.forward(self, None)

            def do_POST(self) -> None:
                n = int(self.headers.get("content-length", "0"))
                proxy.forward(self, self.rfile.read(n))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.upstream + path, timeout=30) as r:
            return json.loads(r.read())

    def forward(self, h: BaseHTTPRequestHandler, body: Optional[bytes]) -> None:
        req = urllib.request.Request(self.upstream + h.path, data=body, method=h.command,
                                     headers={"content-type": "application/json"} if body is not None else {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, data, ctype = r.status, r.read(), r.headers.get("content-type", "application/json")
        except urllib.error.HTTPError as e:
            status, data, ctype = e.code, e.read(), e.headers.get("content-type", "application/json")
        if status == 200 and h.path == f"/v1/task-classes/{self.task_class}" and self.lie is not None:
            answer = json.loads(data)
            self.lie(self, answer)
            data = json.dumps(answer).encode()
        elif status == 200 and h.path == "/v1/task-classes" and self.hide is not None:
            data = json.dumps([c for c in json.loads(data) if c["task_class"] != self.hide]).encode()
        h.send_response(status)
        h.send_header("content-type", ctype)
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- the lies --------------------------------------------------------------------


def restate(p: dict[str, Any], cited: list[tuple[int, bytes, list[str], str, float]]) -> None:
    """Cites exactly `cited` (index, leaf, proof, case, score) and restates the held-out
    statistics from those leaves, as a careful liar would."""
    v = p["view"]
    s = v["settings"]
    settings = Settings(s["window_seconds"], s["confidence"], s["resamples"])
    stats = held_out_from_evidence(v["task_class"], [Cited(i, leaf, case) for i, leaf, _, case, _ in cited], settings,
                                   v["window_start_micros"])
    v["held_out"] = stats_json(stats)
    v["evidence"] = [{"index": i, "leaf_hash": leaf_hash(leaf).hex(), "case_id": case, "score": score}
                     for i, leaf, _, case, score in cited]
    p["evidence"] = [{"index": i, "leaf_hash": leaf_hash(leaf).hex(), "leaf": base64.b64encode(leaf).decode(), "proof": proof}
                     for i, leaf, proof, _, _ in cited]


def cited_of(p: dict[str, Any]) -> list[tuple[int, bytes, list[str], str, float]]:
    return [(e["index"], base64.b64decode(e["leaf"]), e["proof"], v["case_id"], v["score"])
            for e, v in zip(p["evidence"], p["view"]["evidence"])]


def omitted_score(px: Proxy, p: dict[str, Any]) -> None:
    """The latest (lower) score of case 1 left out of the evidence."""
    restate(p, [c for c in cited_of(p) if not case_named(c[3], "-case-1")])


def older_score(px: Proxy, p: dict[str, Any]) -> None:
    """Case 1's first (higher) score, proven in this tree, cited in place of its latest."""
    size = p["tree_size"]
    older = next(
        e for e in px.get(f"/v1/entries?start=0&limit={size}")["entries"]
        if e["kind"] == "score.recorded" and case_named(e["payload"]["event"]["body"]["case_id"], "-case-1")
    )
    proof = px.get(f"/v1/proofs/inclusion?index={older['index']}&tree_size={size}")["proof"]
    score = older["payload"]["event"]["body"]["score"]["score"]
    restate(p, [(older["index"], base64.b64decode(older["leaf"]), proof, c[3], score) if case_named(c[3], "-case-1") else c
                for c in cited_of(p)])


def dropped_block_failure(px: Proxy, p: dict[str, Any]) -> None:
    assert p["view"]["failures"]["block"] > 0, "the log has a block failure"
    p["view"]["failures"]["block"] -= 1


def hidden_retirement(px: Proxy, p: dict[str, Any]) -> None:
    p["view"]["active_cases_by_curation_class"]["held-out"] += 1


def hidden_pending_proposal(px: Proxy, p: dict[str, Any]) -> None:
    assert p["view"]["pending_proposals"] == 1
    p["view"]["pending_proposals"] = 0


def extra_field(px: Proxy, p: dict[str, Any]) -> None:
    p["view"]["promotion_blocked"] = False


def other_window(px: Proxy, p: dict[str, Any]) -> None:
    p["view"]["settings"]["window_seconds"] = 24 * 3600


def future_time(px: Proxy, p: dict[str, Any]) -> None:
    p["view"]["now_micros"] += 10 * 24 * 3600 * 1_000_000


# --- the world -------------------------------------------------------------------


@dataclass
class World:
    server: LedgerServer
    bench: Bench
    other: Bench


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """Three held-out cases scored 0.95 in run 1; then, in run 2, a newer, lower score
    of case 1 and a score of case 2 with a block failure; case 0 retired; a pending
    proposal; a second task class."""
    s = LedgerServer(tmp_path_factory.mktemp("replay") / "data").start()
    b = Bench(s, "replay", cases=3)
    b.client.post_many([b.score(c, 0.95).sign(b.harness) for c in b.cases])
    run2 = f"{b.name}-run-2"
    b.client.post(ev.RunStarted(run2, b.name, "harness 1.0", b.rubric, digest("image")).sign(b.harness))
    b.client.post(replace(b.score(b.cases[1], 0.10, passed=False), run_id=run2).sign(b.harness))
    b.client.post(replace(b.score(b.cases[2], 0.90, failures=(("build_broken", "block"),)), run_id=run2).sign(b.harness))
    c0 = b.cases[0]
    b.client.post(ev.CaseRetired.cosigned(c0.case_id, c0.case_digest, "superseded",
                                          retired_by=b.curators[0], reviewed_by=b.curators[1]).sign(b.curators[0]))
    draft = b.draft(f"{b.name}-proposed")
    b.client.post(ev.CaseProposed(f"{b.name}-proposal", b.name, draft, "outcome-ledger INC-1").sign(b.reconciler))
    other = Bench(s, "another", cases=2)
    yield World(s, b, other)
    s.stop()


def replay(url: str, w: World, directory: Path, *, step: Optional[int] = None, rules: ReplayRules = ReplayRules()) -> int:
    """One replay run through `url` with a fresh client (its trust starts at the replica's checkpoint)."""
    client = Client(url, w.server.vkey, retries=0)
    replica = Replica.open(directory, client.keys)
    if step is not None:
        replica.step = step
    return replay_projections(client, replica, rules).followed


@pytest.fixture(scope="module")
def honest_replica(world: World, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("honest") / "replica"
    replay(world.server.url, world, d, step=3)
    return d


def test_an_honest_server_passes_checked_three_entries_at_a_time_and_a_second_run_fetches_nothing(
    world: World, tmp_path: Path
) -> None:
    size = Client(world.server.url, world.server.vkey).checkpoint().size
    assert replay(world.server.url, world, tmp_path / "r", step=3) == size
    assert replay(world.server.url, world, tmp_path / "r") == 0
    through = Proxy(world.server.url, world.bench.name)
    try:
        assert replay(through.url, world, tmp_path / "r") == 0
    finally:
        through.close()


def caught(world: World, honest: Path, tmp_path: Path, lie: Optional[Lie], expected: type[Exception], hide: Optional[str] = None) -> str:
    """Runs the replay through a proxy telling `lie`, from a fresh replica and from a copy of
    one that holds the log; both must fail with `expected`. Returns the message."""
    px = Proxy(world.server.url, world.bench.name, lie, hide)
    try:
        if lie is not None and expected is Incomplete:
            served = parse_projection(px.get(f"/v1/task-classes/{world.bench.name}"))
            check_projection(served, [world.server.vkey])  # the lie passes the evidence check
        messages = []
        for d in (tmp_path / "fresh", tmp_path / "held"):
            if d.name == "held":
                shutil.copytree(honest, d)
            with pytest.raises(expected) as e:
                replay(px.url, world, d)
            messages.append(str(e.value))
            assert not (d / "replica.json").exists() or d.name == "held"
        return messages[0]
    finally:
        px.close()


def test_an_omitted_latest_score_is_incomplete(world: World, honest_replica: Path, tmp_path: Path) -> None:
    msg = caught(world, honest_replica, tmp_path, omitted_score, Incomplete)
    assert "`view.evidence`" in msg and "is not what the log up to size" in msg


def test_an_older_score_in_place_of_the_latest_is_incomplete(world: World, honest_replica: Path, tmp_path: Path) -> None:
    assert "is not what the log up to size" in caught(world, honest_replica, tmp_path, older_score, Incomplete)


def test_a_dropped_block_failure_is_incomplete(world: World, honest_replica: Path, tmp_path: Path) -> None:
    assert "`view.failures.block`" in caught(world, honest_replica, tmp_path, dropped_block_failure, Incomplete)


def test_a_retired_case_still_counted_is_incomplete(world: World, honest_replica: Path, tmp_path: Path) -> None:
    msg = caught(world, honest_replica, tmp_path, hidden_retirement, Incomplete)
    assert "`view.active_cases_by_curation_class.held-out`" in msg


def test_a_hidden_pending_proposal_is_incomplete(world: World, honest_replica: Path, tmp_path: Path) -> None:
    assert "`view.pending_proposals`" in caught(world, honest_replica, tmp_path, hidden_pending_proposal, Incomplete)


def test_a_field_the_typed_view_does_not_have_is_incomplete(world: World, honest_replica: Path, tmp_path: Path) -> None:
    assert "`view.promotion_blocked`" in caught(world, honest_replica, tmp_path, extra_field, Incomplete)


def test_another_window_stated_is_a_settings_mismatch(world: World, honest_replica: Path, tmp_path: Path) -> None:
    assert "stated settings" in caught(world, honest_replica, tmp_path, other_window, SettingsMismatch)


def test_a_future_time_stated_is_a_settings_mismatch(world: World, honest_replica: Path, tmp_path: Path) -> None:
    assert "stated time" in caught(world, honest_replica, tmp_path, future_time, SettingsMismatch)


def test_a_task_class_left_off_the_list_is_incomplete(world: World, honest_replica: Path, tmp_path: Path) -> None:
    msg = caught(world, honest_replica, tmp_path, None, Incomplete, hide=world.other.name)
    assert world.other.name in msg and "left off the list" in msg


def test_a_settings_agreement_other_than_the_servers_is_a_settings_mismatch(world: World, tmp_path: Path) -> None:
    with pytest.raises(SettingsMismatch):
        replay(world.server.url, world, tmp_path / "r", rules=ReplayRules(Settings(window_seconds=7 * 24 * 3600)))


def test_a_run_after_new_entries_folds_only_those(world: World, honest_replica: Path, tmp_path: Path) -> None:
    d = tmp_path / "r"
    shutil.copytree(honest_replica, d)
    b = world.other
    b.client.post_many([b.score(c, 0.5).sign(b.harness) for c in b.cases])
    assert replay(world.server.url, world, d) == 2
    assert replay(world.server.url, world, d) == 0


# --- the replica's own state -----------------------------------------------------


def test_a_changed_replica_file_is_refused(world: World, honest_replica: Path, tmp_path: Path) -> None:
    d = tmp_path / "r"
    shutil.copytree(honest_replica, d)
    f = d / "replica.json"
    doc = json.loads(f.read_text())
    doc["body"]["fold"]["classes"][world.bench.name]["tier"] = "gold"
    f.write_text(json.dumps(doc))
    with pytest.raises(ReplicaError, match="SHA-256"):
        Replica.open(d, [world.server.vkey])
    doc["version"] = 2
    f.write_text(json.dumps(doc))
    with pytest.raises(ReplicaError, match="version"):
        Replica.open(d, [world.server.vkey])


def test_a_replica_of_another_log_is_refused(world: World, honest_replica: Path, server: LedgerServer) -> None:
    with pytest.raises(ReplicaError, match="not signed by a trusted key"):
        Replica.open(honest_replica, [server.vkey])


def test_a_fork_signed_with_the_real_key_is_refused(twins: tuple[LedgerServer, LedgerServer], tmp_path: Path) -> None:
    a, b = twins
    from evidence_ledger import SigningKey

    for s, names in ((a, ["real"]), (b, ["fork-1", "fork-2"])):
        for n in names:
            k = SigningKey.generate(n)
            s.client().post(ev.PrincipalEnrolled.of(k, f"{n}@example.org", ["harness"]).sign(s.operator))
    replica = Replica.open(tmp_path / "r", [a.vkey])
    replay_projections(Client(a.url, a.vkey), replica)
    # The fork is longer; its entries past the common prefix are not the replica's.
    fork = Client(b.url, b.vkey)
    with pytest.raises(ForkDetected, match="first bad index|not a prefix|do not hash to the signed root"):
        Replica.open(tmp_path / "r", [a.vkey]).follow(fork, fork.checkpoint())
    with pytest.raises(ForkDetected):
        replay_projections(Client(b.url, b.vkey), Replica.open(tmp_path / "r", [a.vkey]))


def test_a_server_behind_the_replica_is_stale(twins: tuple[LedgerServer, LedgerServer], tmp_path: Path) -> None:
    a, b = twins
    from evidence_ledger import SigningKey

    k = SigningKey.generate("ahead")
    a.client().post(ev.PrincipalEnrolled.of(k, "ahead@example.org", ["harness"]).sign(a.operator))
    replay_projections(Client(a.url, a.vkey), Replica.open(tmp_path / "r", [a.vkey]))
    behind = Client(b.url, b.vkey)
    with pytest.raises(StaleCheckpoint):
        Replica.open(tmp_path / "r", [a.vkey]).follow(behind, behind.checkpoint())
    with pytest.raises(StaleCheckpoint):
        replay_projections(Client(b.url, b.vkey), Replica.open(tmp_path / "r", [a.vkey]))


# --- the gate --------------------------------------------------------------------


def test_the_gate_reads_a_verified_recommendation_and_catches_an_omission(world: World, tmp_path: Path) -> None:
    trust = TrustedState.file(tmp_path / "gate.note")
    gate = Gate(Client(world.server.url, world.server.vkey, trust=trust), tmp_path / "gate")
    v = gate.verified_recommendation(world.bench.name)
    assert v.recommended_tier == "bronze" and v.replica_size == trust.size
    answer = gate.recommend(ev.PromotionRequested(world.other.name).sign(world.other.gate))
    assert answer.projection.view.task_class == world.other.name
    px = Proxy(world.server.url, world.bench.name, omitted_score)
    try:
        liar = Gate(Client(px.url, world.server.vkey, trust=TrustedState.file(tmp_path / "gate.note")), tmp_path / "gate")
        with pytest.raises(Incomplete):
            liar.verified_recommendation(world.bench.name)
    finally:
        px.close()


# --- the CLI ---------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evidence_ledger", *args], capture_output=True, text=True, timeout=300)


def test_cli_audit_with_projections_passes_then_fails_a_liar_and_keeps_the_trusted_checkpoint(world: World, tmp_path: Path) -> None:
    trusted, replica = tmp_path / "trusted.note", tmp_path / "replica"
    key = str(world.server.vkey)

    def audit(url: str) -> subprocess.CompletedProcess[str]:
        return run_cli("audit", url, "--key", key, "--trusted", str(trusted), "--projections", str(replica))

    first = audit(world.server.url)
    assert first.returncode == 0, first.stderr
    assert "replay: 2 task classes equal" in first.stdout
    second = audit(world.server.url)
    assert second.returncode == 0 and "(0 new entries" in second.stdout, second.stderr
    saved = trusted.read_bytes()
    px = Proxy(world.server.url, world.bench.name, omitted_score)
    try:
        liar = audit(px.url)
    finally:
        px.close()
    assert liar.returncode == 1 and "FAILED" in liar.stderr and "is not what the log up to size" in liar.stderr
    assert trusted.read_bytes() == saved
    bad = run_cli("audit", world.server.url, "--key", key, "--trusted", str(trusted), "--projections", str(tmp_path / "x"),
                  "--window-days", "7")
    assert bad.returncode == 1 and "stated settings" in bad.stderr


# --- every kind of event, every task class -----------------------------------------


def test_every_projection_of_a_log_with_every_kind_of_event_equals_the_replicas(server: LedgerServer, tmp_path: Path) -> None:
    """The session server's log (every earlier test's events too) plus a bench with
    shared-kernel runs, failures of each severity, proposals pending, approved and
    rejected, a rubric update, a human tier change, capabilities, an anchor and a
    revocation: every task class's projection equals the replica's, bit for bit."""
    from evidence_ledger import SigningKey

    b = Bench(server, "rich", cases=6, silver=0.5)
    c = b.client
    op = server.operator
    c.post_many([b.score(x, 0.9 - 0.01 * i, failures=(("slow", "warn"),) if i == 3 else ()).sign(b.harness)
                 for i, x in enumerate(b.cases)])
    sk = f"{b.name}-run-sk"
    c.post(ev.RunStarted(sk, b.name, "harness 1.0", b.rubric, digest("image"), "shared_kernel").sign(b.harness))
    c.post_many([replace(b.score(x, 0.2, failures=(("build_broken", "block"),)), run_id=sk).sign(b.harness) for x in b.cases[:2]])
    drafts = []
    for i in range(3):
        d, bound = replace(b.draft(f"{b.name}-p{i}"), curation_class="corpus-derived").bind("draft.case_name")
        c.post(ev.CaseProposed(f"{b.name}-prop-{i}", b.name, d, f"outcome-ledger INC-{i}").sign(b.reconciler, bound=[bound]))
        drafts.append(d)
    c.post(ev.ProposalApproved.cosigned(f"{b.name}-prop-1", drafts[1], "2026-11-21T00:00:00Z",
                                        added_by=b.curators[0], reviewed_by=b.curators[1]).sign(b.curators[1]))
    c.post(ev.ProposalRejected(f"{b.name}-prop-2", "not reproducible").sign(b.curators[0]))
    c.post(b.score(drafts[1], 0.7).sign(b.harness))
    inv = f"{b.name}-inv"
    c.post(ev.RubricInvoked(b.run_id, b.cases[0].case_id, inv + "-1").sign(b.harness))
    c.post(ev.RubricCompleted(inv + "-1").sign(b.harness))
    c.post(ev.RubricInvoked(b.run_id, b.cases[1].case_id, inv + "-2").sign(b.harness))
    c.post(ev.RubricFailed(inv + "-2", "rubric.timeout").sign(b.harness))
    answer = c.recommend(ev.PromotionRequested(b.name).sign(b.gate))
    assert answer.projection.view.recommendation.recommended_tier == "silver"
    c.post(ev.TierChanged.cosigned(b.name, "bronze", "silver", answer.recommendation.index,
                                   decided_by=b.maintainers[0], confirmed_by=b.maintainers[1]).sign(b.maintainers[1]))
    c.post(ev.RunFinished(b.run_id).sign(b.harness))
    rubric2 = digest(f"{b.name}-rubric-2")
    c.post(ev.RubricUpdated(b.name, rubric2).sign(op))
    b.rubric, b.run_id = rubric2, f"{b.name}-run-2"
    c.post(ev.RunStarted(b.run_id, b.name, "harness 1.1", rubric2, digest("image")).sign(b.harness))
    c.post(b.score(b.cases[0], 0.6, passed=False, failures=(("slow", "warn"),)).sign(b.harness))
    gate, writer = SigningKey.generate(f"{b.name}-vgate"), SigningKey.generate(f"{b.name}-writer")
    for k, role in ((gate, "gate"), (writer, "rag-writer")):
        c.post(ev.PrincipalEnrolled.of(k, f"{k.name}@example.org", [role]).sign(op))
    cp = c.checkpoint()
    ref = ev.CheckpointRef(cp.size, cp.root_hex)
    # The first capability gives the workflow its handle; the second names it beside the
    # workflow id again; the example names it.
    wf = f"{b.name}-wf"
    first = ev.CapabilityMinted(f"{b.name}-cap-0", wf, "2026-11-21T00:00:00Z", ref, "2099-01-01T00:00:00Z").sign(gate)
    c.post(first)
    assert first.handle is not None and first.handle != wf
    c.post(ev.CapabilityMinted(f"{b.name}-cap-1", first.handle, "2026-11-21T00:00:00Z", ref, "2099-01-01T00:00:00Z",
                               workflow_name=wf).sign(gate))
    c.post(ev.RagExampleWritten(f"{b.name}-cap-0", first.handle, digest("example")).sign(writer))
    c.post(ev.RagRecordQuarantined(f"{b.name}-cap-1", "poisoned").sign(gate))
    c.post(ev.AnchorPublished(ref, "file:///anchors/test").sign(op))
    c.post(ev.PrincipalRevoked(writer.key_id, "rotated").sign(op))

    client = Client(server.url, server.vkey)
    rp = replay_projections(client, Replica.open(tmp_path / "r", client.keys))
    assert rp.task_classes == len(client.task_classes()) >= 1
    # Every recommendation the ledger signed equals the replica's view at its checkpoint and time.
    kinds = [e.kind for at in range(0, rp.size, 1000) for e in client.entries(at, min(1000, rp.size - at))]
    assert rp.recommendations == kinds.count("promotion.recommended") >= 1
    v = client.projection(b.name).view.raw
    assert v["tier"] == "silver" and v["pending_proposals"] == 1
    assert v["active_cases_by_curation_class"] == {"held-out": 6, "corpus-derived": 1}
    assert v["shared_kernel_scores_in_window"] == 2 and v["shared_kernel_failures"]["block"] == 2
    assert v["failures"] == {"block": 0, "warn": 2, "info": 0} and v["scores_in_window"] == 10
