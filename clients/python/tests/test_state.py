"""Completeness by commitment against a real server (`GET /v1/task-classes/{name}/state`).

The server commits its projection state in the log (`state.committed`) and answers a
class's records with their proofs. The package's own replay of the log must give the
state root the Rust server computed (so the records' canonical bytes and both trees are
the same on both sides), and the answer must verify. A small HTTP proxy then tells one
lie at a time about the answer, each as a careful liar would (the view restated from the
altered records); the state check alone, with no replica, catches each with one typed
exception.
"""

from __future__ import annotations

import base64
import json
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
    AbsenceNotProven,
    CasesMismatch,
    Client,
    CommitmentMismatch,
    Gate,
    NoQuorum,
    NotCommitted,
    Policy,
    ProofMismatch,
    Replica,
    ReplayRules,
    SettingsMismatch,
    StaleCommitment,
    TrustedState,
    VerificationError,
    ViewMismatch,
    check_state,
)
from evidence_ledger import events as ev
from evidence_ledger.commit import (
    ClassProof,
    cases_root,
    parse_case_record,
    parse_class_record,
    record_bytes,
    record_leaf,
    tree_path,
    tree_root,
    view,
)
from evidence_ledger.cosign import CosignerKey
from evidence_ledger.fold import first_difference
from evidence_ledger.stats import Settings
from evidence_ledger.timefmt import parse_utc_micros
from evidence_ledger.wire import parse_state

Lie = Callable[["Proxy", dict[str, Any]], None]


class Proxy:
    """Forwards every request to `upstream`; `lie` rewrites the answers of
    `GET /v1/task-classes/{name}/state` (a dict), or `canned` replaces them."""

    def __init__(self, upstream: str, lie: Optional[Lie] = None, canned: Optional[bytes] = None) -> None:
        self.upstream, self.lie, self.canned = upstream, lie, canned
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
        state = h.path.startswith("/v1/task-classes/") and h.path.endswith("/state")
        if state and self.canned is not None:
            status, data, ctype = 200, self.canned, "application/json"
        else:
            req = urllib.request.Request(self.upstream + h.path, data=body, method=h.command,
                                         headers={"content-type": "application/json"} if body is not None else {})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    status, data, ctype = r.status, r.read(), r.headers.get("content-type", "application/json")
            except urllib.error.HTTPError as e:
                status, data, ctype = e.code, e.read(), e.headers.get("content-type", "application/json")
            if status == 200 and state and self.lie is not None:
                answer = json.loads(data)
                self.lie(self, answer)
                data = json.dumps(answer).encode()
        h.send_response(status)
        h.send_header("content-type", ctype)
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class World:
    server: LedgerServer
    bench: Bench
    other: Bench


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """Three held-out cases scored in run 1 (1.0, 0.95, 0.0: floats that print as
    integers too); then, in run 2, a newer, lower score of case 1 and a score of case 2
    with a block and a warn failure; case 0 retired; a pending proposal; a shared-kernel
    score; a second task class (its name sorts first)."""
    s = LedgerServer(tmp_path_factory.mktemp("state") / "data").start()
    b = Bench(s, "state", cases=3, silver=0.5, gold=1.0)
    b.client.post_many([b.score(c, v).sign(b.harness) for c, v in zip(b.cases, (1.0, 0.95, 0.0))])
    run2 = f"{b.name}-run-2"
    b.client.post(ev.RunStarted(run2, b.name, "harness 1.0", b.rubric, digest("image")).sign(b.harness))
    b.client.post(replace(b.score(b.cases[1], 0.10, passed=False), run_id=run2).sign(b.harness))
    b.client.post(replace(b.score(b.cases[2], 0.90, failures=(("build_broken", "block"), ("slow", "warn"))), run_id=run2)
                  .sign(b.harness))
    sk = f"{b.name}-run-sk"
    b.client.post(ev.RunStarted(sk, b.name, "harness 1.0", b.rubric, digest("image"), "shared_kernel").sign(b.harness))
    b.client.post(replace(b.score(b.cases[1], 0.2, failures=(("build_broken", "block"),)), run_id=sk).sign(b.harness))
    c0 = b.cases[0]
    b.client.post(ev.CaseRetired.cosigned(c0.case_id, c0.case_digest, "superseded",
                                          retired_by=b.curators[0], reviewed_by=b.curators[1]).sign(b.curators[0]))
    draft = b.draft(f"{b.name}-proposed")
    b.client.post(ev.CaseProposed(f"{b.name}-proposal", b.name, draft, "outcome-ledger INC-1").sign(b.reconciler))
    other = Bench(s, "another", cases=2)
    other.client.post_many([other.score(c, 0.5).sign(other.harness) for c in other.cases])
    yield World(s, b, other)
    s.stop()


def raw_state(url: str, name: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/v1/task-classes/{name}/state", timeout=30) as r:
        answer: dict[str, Any] = json.loads(r.read())
        return answer


COMMITTED_KEYS = ("task_class", "now_micros", "window_start_micros", "settings", "tier", "active_cases_by_curation_class",
                  "pending_proposals", "held_out", "all_cases", "failures", "evidence", "recommendation")


# --- the honest server ------------------------------------------------------------------


def test_the_servers_state_root_is_the_packages_own_fold_of_the_log(world: World, tmp_path: Path) -> None:
    name = world.bench.name
    client = Client(world.server.url, world.server.vkey)
    v = client.state(name)
    assert v.registered and v.checkpoint.size == v.index + 1 == client.trust.size
    raw = v.answer.raw
    # The package's own replay of the log up to the answer's checkpoint: folding the
    # commitment checks it, and the state there is the state the commitment names.
    replica = Replica.open(tmp_path / "r", client.keys)
    replica.follow(client, v.checkpoint)
    st = replica.fold.state()
    assert st.root().hex() == v.state_root == raw["state_root"] and len(st.classes) == v.task_classes == 2
    mine = st.class_(name)
    assert mine is not None and mine.class_ == v.class_ and mine.cases == v.cases
    # Every record's canonical JSON, as this package writes it, is what the server hashed:
    # the Rust case tree root over the served records is this package's.
    assert cases_root(v.cases).hex() == raw["class"]["cases_root"]
    for served, own in zip(raw["cases"], mine.cases):
        assert record_bytes(parse_case_record(served)) == record_bytes(own)
        assert first_difference(served, own.to_json(), "case") is None
    assert first_difference(raw["class"], mine.class_.to_json(), "class") is None
    assert record_bytes(parse_class_record(raw["class"])) == record_bytes(mine.class_)
    records = {c.case_id: c for c in v.cases}
    c0, c1, c2 = (records[c.case_id] for c in world.bench.cases)
    assert not c0.active and c0.latest is not None and c0.latest.score == 1.0
    assert c1.latest is not None and c1.latest.score == 0.1 and not c1.failures
    assert c2.latest is not None and c2.latest.score == 0.9 and [(f.block, f.warn, f.info) for f in c2.failures] == [(1, 1, 0)]
    assert b'"score":1.0' in record_bytes(c0) and b'"score_threshold":1.0' in record_bytes(v.class_)
    # The served view is the fold's view at the committed size, bit for bit, for the keys it has.
    assert v.view is not None and raw["view"]["tree_size"] == v.index
    s = raw["view"]["settings"]
    folded = replica.fold.view(name, raw["view"]["now_micros"], Settings(s["window_seconds"], s["confidence"], s["resamples"]),
                               replica.size, replica.root())
    assert first_difference(raw["view"], {**{k: folded[k] for k in COMMITTED_KEYS}, "tree_size": v.index}) is None
    assert folded["shared_kernel_scores_in_window"] == 1  # present in the fold, not committed
    assert v.view["failures"] == {"block": 1, "warn": 1, "info": 0} and v.view["active_cases_by_curation_class"] == {"held-out": 2}
    assert v.view["pending_proposals"] == 1 and v.recommended_tier == "bronze"


def test_a_second_read_with_nothing_new_reuses_the_commitment(world: World) -> None:
    client = Client(world.server.url, world.server.vkey)
    first = client.state(world.bench.name)
    again = client.state(world.other.name)
    assert again.index == first.index and again.state_root == first.state_root and client.trust.size == first.index + 1
    assert again.view is not None and again.view["held_out"]["cases"] == 2


@pytest.mark.parametrize("name", ["0-absent", "b-absent", "zz-absent", "state"])
def test_an_unregistered_class_is_proven_absent_before_between_and_after_the_classes(world: World, name: str) -> None:
    v = Client(world.server.url, world.server.vkey).state(name)
    assert not v.registered and v.view is None and v.recommended_tier is None and v.task_classes == 2
    left, right = v.answer.neighbours or (None, None)
    names = sorted([world.bench.name, world.other.name])
    assert (left.class_.task_class if left else None, right.class_.task_class if right else None) == {
        "0-absent": (None, names[0]), "b-absent": (names[0], names[1]), "state": (names[0], names[1]),
        "zz-absent": (names[1], None)}[name]


# --- the lies -----------------------------------------------------------------------------


def case_index(p: dict[str, Any], suffix: str) -> int:
    return next(i for i, c in enumerate(p["cases"]) if case_named(c["case_id"], suffix))


def restate(p: dict[str, Any]) -> None:
    """Restates the view from the (altered) records, at its stated time and settings."""
    v = p["view"]
    s = v["settings"]
    cases = [parse_case_record(c) for c in p["cases"]]
    p["view"] = view(parse_class_record(p["class"]), cases, v["tree_size"], v["now_micros"],
                     Settings(s["window_seconds"], s["confidence"], s["resamples"]))


def omitted_case(px: Proxy, p: dict[str, Any]) -> None:
    """Case 1 (its newer, lower score) left out of the records."""
    del p["cases"][case_index(p, "-case-1")]
    restate(p)


def omitted_case_tree_restated(px: Proxy, p: dict[str, Any]) -> None:
    """Case 1 left out, and the class record's case tree restated to match."""
    omitted_case(px, p)
    cases = [parse_case_record(c) for c in p["cases"]]
    p["class"]["cases"], p["class"]["cases_root"] = len(cases), cases_root(cases).hex()
    restate(p)


def older_score(px: Proxy, p: dict[str, Any]) -> None:
    """Case 1's first (higher, passing) score, a real entry, in place of its latest."""
    i = case_index(p, "-case-1")
    first = next(e for e in px.get(f"/v1/entries?start=0&limit={p['tree_size']}")["entries"]
                 if e["kind"] == "score.recorded" and e["payload"]["event"]["body"]["case_id"] == p["cases"][i]["case_id"])
    p["cases"][i]["latest"] = {"index": first["index"], "leaf_hash": first["leaf_hash"],
                               "sequenced_at": parse_utc_micros(first["sequenced_at"]), "score": 0.95, "passed": True}
    restate(p)


def dropped_block_failure(px: Proxy, p: dict[str, Any]) -> None:
    i = case_index(p, "-case-2")
    assert p["cases"][i]["failures"][0]["block"] == 1
    p["cases"][i]["failures"][0]["block"] = 0
    restate(p)


def dropped_block_failure_in_the_view(px: Proxy, p: dict[str, Any]) -> None:
    p["view"]["failures"]["block"] -= 1


def retired_case_active(px: Proxy, p: dict[str, Any]) -> None:
    i = case_index(p, "-case-0")
    assert p["cases"][i]["active"] is False
    p["cases"][i]["active"] = True
    restate(p)


def retired_case_counted_in_the_view(px: Proxy, p: dict[str, Any]) -> None:
    p["view"]["active_cases_by_curation_class"]["held-out"] += 1


def claimed_absent(px: Proxy, p: dict[str, Any]) -> None:
    """The class hidden: its real neighbour before it (the other class, proven) shown
    as the last class before its name."""
    other = next(c for c in px.get("/v1/task-classes") if c["task_class"] != p["task_class"])["task_class"]
    honest = px.get(f"/v1/task-classes/{other}/state")
    p["neighbours"] = [{"class": honest["class"], "proof": honest["class_proof"]}, None]
    p["class"], p["class_proof"], p["cases"], p["view"] = None, None, [], None


def claimed_absent_with_a_moved_neighbour(px: Proxy, p: dict[str, Any]) -> None:
    """The same, with the neighbour's proof claiming it is the last leaf."""
    claimed_absent(px, p)
    p["neighbours"][0]["proof"]["index"] = p["task_classes"] - 1


def another_state_root(px: Proxy, p: dict[str, Any]) -> None:
    """Records and class proof of a state the ledger did not commit (case 1 left out and the
    state tree restated over the altered class record)."""
    omitted_case_tree_restated(px, p)
    other = next(c for c in px.get("/v1/task-classes") if c["task_class"] != p["task_class"])["task_class"]
    leaves = sorted([(p["task_class"], record_leaf(parse_class_record(p["class"]))),
                     (other, record_leaf(parse_class_record(px.get(f"/v1/task-classes/{other}/state")["class"])))])
    hashes = [h for _, h in leaves]
    i = [n for n, _ in leaves].index(p["task_class"])
    p["state_root"] = tree_root(hashes).hex()
    p["class_proof"] = ClassProof(i, 2, tuple(h.hex() for h in tree_path(hashes, i))).to_json()


def another_entry_as_the_commitment(px: Proxy, p: dict[str, Any]) -> None:
    """The entry before the commitment (a real, proven entry) shown as the commitment."""
    index, size = p["commitment"]["index"] - 1, p["tree_size"]
    e = px.get(f"/v1/entries/{index}")
    p["commitment"].update(index=index, leaf=e["leaf"],
                           inclusion_proof=px.get(f"/v1/proofs/inclusion?index={index}&tree_size={size}")["proof"],
                           consistency_proof=px.get(f"/v1/proofs/consistency?first={index}&second={size}")["proof"])


def shorter_window(px: Proxy, p: dict[str, Any]) -> None:
    """A one-second window, the view restated from the records for it (drops every failure)."""
    p["view"]["settings"]["window_seconds"] = 1
    restate(p)
    assert p["view"]["failures"]["block"] == 0


def flipped_inclusion(px: Proxy, p: dict[str, Any]) -> None:
    h = p["commitment"]["inclusion_proof"][0]
    p["commitment"]["inclusion_proof"][0] = ("0" if h[0] != "0" else "1") + h[1:]


LIES: list[tuple[Lie, type[VerificationError], str]] = [
    (omitted_case, CasesMismatch, "do not hash to the committed case tree"),
    (omitted_case_tree_restated, NotCommitted, "not in the committed state"),
    (older_score, CasesMismatch, "do not hash to the committed case tree"),
    (dropped_block_failure, CasesMismatch, "do not hash to the committed case tree"),
    (dropped_block_failure_in_the_view, ViewMismatch, "state.view.failures.block"),
    (retired_case_active, CasesMismatch, "do not hash to the committed case tree"),
    (retired_case_counted_in_the_view, ViewMismatch, "state.view.active_cases_by_curation_class.held-out"),
    (claimed_absent, AbsenceNotProven, "not the last class before the name"),
    (claimed_absent_with_a_moved_neighbour, AbsenceNotProven, "not in the committed state"),
    (another_state_root, CommitmentMismatch, "is not the committed"),
    (another_entry_as_the_commitment, CommitmentMismatch, "not a state.committed"),
    (shorter_window, SettingsMismatch, "stated settings"),
    (flipped_inclusion, ProofMismatch, "state.commitment.inclusion_proof"),
]


@pytest.mark.parametrize("lie, expected, message", LIES, ids=[lie.__name__ for lie, _, _ in LIES])
def test_each_lie_is_caught_by_the_state_check_alone(world: World, lie: Lie, expected: type[VerificationError], message: str) -> None:
    px = Proxy(world.server.url, lie)
    try:
        client = Client(px.url, world.server.vkey, retries=0)
        with pytest.raises(expected) as e:
            client.state(world.bench.name)
        assert type(e.value) is expected and message in str(e.value), e.value
        assert client.trust.checkpoint is None  # nothing was trusted from the lie
    finally:
        px.close()


def test_a_commitment_older_than_the_log_already_known_is_stale(world: World) -> None:
    b = world.bench
    old = raw_state(world.server.url, b.name)
    index = old["commitment"]["index"]
    b.client.post(b.score(b.cases[2], 0.8).sign(b.harness))  # the log moves on past the commitment
    answer = parse_state(old)
    keys = [world.server.vkey]
    assert check_state(answer, keys, b.name, min_size=index + 1).index == index
    with pytest.raises(StaleCommitment) as e:
        check_state(answer, keys, b.name, min_size=index + 2)
    assert (e.value.known, e.value.index) == (index + 2, index)
    px = Proxy(world.server.url, canned=json.dumps(old).encode())
    try:
        client = Client(px.url, world.server.vkey, retries=0)
        client.checkpoint()  # this client has seen the newer log
        with pytest.raises(StaleCommitment):
            client.state(b.name)
    finally:
        px.close()
    # The honest server commits the newer state.
    assert Client(world.server.url, world.server.vkey).state(b.name).index > index


def test_a_witness_policy_needs_the_quorums_cosignatures_on_the_answers_checkpoint(world: World) -> None:
    answer = raw_state(world.server.url, world.bench.name)
    w = CosignerKey("witness.example/w1", bytes([7] * 32))
    policy = Policy.parse(f"log {world.server.vkey}\nwitness w1 {w.verifier_key}\nquorum w1\n")
    with pytest.raises(NoQuorum):
        check_state(parse_state(answer), [world.server.vkey], policy=policy)
    note = answer["checkpoint"]
    text = note.split("\n\n", 1)[0] + "\n"
    cosigned = dict(answer, checkpoint=note + w.cosign(text.encode(), 1_700_000_000))
    v = check_state(parse_state(cosigned), [world.server.vkey], policy=policy)
    assert v.witnessed is not None and [c.witness for c in v.witnessed.cosigned] == ["witness.example/w1"]


def test_the_settings_and_time_are_held_to_the_rules_given(world: World) -> None:
    answer = parse_state(raw_state(world.server.url, world.bench.name))
    keys = [world.server.vkey]
    assert answer.view is not None
    now = answer.view["now_micros"]
    check_state(answer, keys, rules=ReplayRules(now_micros=now + 299 * 1_000_000))
    with pytest.raises(SettingsMismatch, match="stated time"):
        check_state(answer, keys, rules=ReplayRules(now_micros=now + 301 * 1_000_000))
    with pytest.raises(SettingsMismatch, match="stated settings"):
        check_state(answer, keys, rules=ReplayRules(Settings(window_seconds=7 * 24 * 3600), now_micros=now))
    with pytest.raises(CommitmentMismatch, match="asked for"):
        check_state(answer, keys, world.other.name)


# --- the gate and the CLI ---------------------------------------------------------------


def test_the_gate_checks_the_answer_and_its_commitment_against_its_replica(world: World, tmp_path: Path) -> None:
    trust = TrustedState.file(tmp_path / "gate.note")
    gate = Gate(Client(world.server.url, world.server.vkey, trust=trust), tmp_path / "gate")
    v = gate.verified_state(world.bench.name)
    assert gate.replica.size == v.index + 1 == trust.size
    assert gate.replica.fold.state().root().hex() == v.state_root
    px = Proxy(world.server.url, retired_case_active)
    try:
        liar = Gate(Client(px.url, world.server.vkey, trust=TrustedState.file(tmp_path / "gate.note")), tmp_path / "gate")
        with pytest.raises(CasesMismatch):
            liar.verified_state(world.bench.name)
    finally:
        px.close()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evidence_ledger", *args], capture_output=True, text=True, timeout=120)


def test_cli_state_verifies_an_answer_refuses_a_liar_and_a_stale_commitment(world: World, tmp_path: Path) -> None:
    key, trusted, name = str(world.server.vkey), tmp_path / "trusted.note", world.bench.name
    ok = run_cli("state", world.server.url, name, "--key", key, "--trusted", str(trusted))
    assert ok.returncode == 0, ok.stderr
    assert f"state verified: task class {name} as committed at size" in ok.stdout and "view recomputed bit for bit" in ok.stdout
    assert trusted.exists()
    absent = run_cli("state", world.server.url, "zz-absent", "--key", key, "--json")
    assert absent.returncode == 0, absent.stderr
    doc = json.loads(absent.stdout)
    assert doc["registered"] is False and doc["task_classes"] == 2
    saved = trusted.read_bytes()
    px = Proxy(world.server.url, dropped_block_failure)
    try:
        liar = run_cli("state", px.url, name, "--key", key, "--trusted", str(trusted))
    finally:
        px.close()
    assert liar.returncode == 1 and "FAILED" in liar.stderr and "committed case tree" in liar.stderr
    assert trusted.read_bytes() == saved
    stale = run_cli("state", world.server.url, name, "--key", key, "--min-size", str(10**9))
    assert stale.returncode == 3 and "stale" in stale.stderr
    window = run_cli("state", world.server.url, name, "--key", key, "--window-days", "7")
    assert window.returncode == 1 and "stated settings" in window.stderr


def test_a_log_with_commitments_replays_and_every_projection_still_agrees(world: World, tmp_path: Path) -> None:
    from evidence_ledger import replay_projections

    client = Client(world.server.url, world.server.vkey)
    client.state(world.other.name)
    b = world.bench
    b.client.post(b.score(b.cases[1], 0.3).sign(b.harness))
    client.state(b.name)
    entries = client.entries(0, 1000)
    assert sum(e.kind == "state.committed" for e in entries) >= 3
    assert replay_projections(client, Replica.open(tmp_path / "r", client.keys)).task_classes == 2


def test_base64_of_the_commitment_leaf_is_checked(world: World) -> None:
    answer = raw_state(world.server.url, world.bench.name)
    answer["commitment"]["leaf"] = base64.b64encode(b"not a leaf").decode()
    with pytest.raises(VerificationError):
        check_state(parse_state(answer), [world.server.vkey])
