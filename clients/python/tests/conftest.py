"""A live `ledger serve` for the tests, started by the tests.

The binary comes from `LEDGER_BIN` (CI sets it to target/debug/ledger),
else the repository's target/debug/ledger. Each server gets a fresh data
directory (`ledger init`) and a free loopback port, and must stop cleanly
(exit 0) when the test is done. The verifier key the tests trust is
derived from the data directory's `log.key`, never taken from the server.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Iterator, Optional

import pytest

from evidence_ledger import Client, SigningKey, VerifierKey
from evidence_ledger import events as ev

REPO = Path(__file__).resolve().parents[3]


def ledger_bin() -> Path:
    env = os.environ.get("LEDGER_BIN")
    path = Path(env) if env else REPO / "target" / "debug" / "ledger"
    if not path.exists():
        pytest.fail(f"no ledger binary at {path}: build it (cargo build -p api --bin ledger) or set LEDGER_BIN")
    return path.resolve()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LedgerServer:
    """`ledger serve` over a data directory, on a loopback port."""

    def __init__(self, data: Path, init: bool = True) -> None:
        self.data = data
        self.bin = ledger_bin()
        if init:
            subprocess.run([str(self.bin), "init", "--data-dir", str(data)], check=True, capture_output=True)
        self.log_key = SigningKey.load(data / "log.key")
        self.operator = SigningKey.load(data / "operator.key")
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.url = ""

    @property
    def vkey(self) -> VerifierKey:
        return self.log_key.verifier_key

    def start(self, *extra: str) -> "LedgerServer":
        """Serves on a free port (`extra`: more `ledger serve` options) until ready."""
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(self.data.parent / f"{self.data.name}-server.log", "ab")
        # The server appends a state commitment of its own with each periodic
        # save (every 60 s by default): tests that compare the log's size at two
        # moments would see it grow by one when a save falls between them. A
        # stop still saves (and commits); so does every /state answer.
        env = {**os.environ}
        env.setdefault("LEDGER_PROJECTION_SAVE_SECS", "3600")
        self.proc = subprocess.Popen(
            [str(self.bin), "serve", "--data-dir", str(self.data), "--listen", f"127.0.0.1:{port}", *extra],
            stdout=self.log,
            stderr=self.log,
            env=env,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ledger serve exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("ledger serve did not become ready in 60 s")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        self.proc = None
        self.log.close()
        assert code == 0, f"ledger serve exited with {code}"

    def client(self, **kw: object) -> Client:
        return Client(self.url, self.vkey, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerServer]:
    s = LedgerServer(tmp_path_factory.mktemp("ledger") / "data").start()
    yield s
    s.stop()


def readers_file(path: Path, readers: dict[str, tuple[str, str]]) -> Path:
    """Writes a readers file (docs/PRIVACY.md): one `<role> sha256:<hex> <name>` line per
    token in `readers` (token -> (role, name)), the SHA-256 of the token, never the token."""
    lines = [f"{role} sha256:{hashlib.sha256(t.encode()).hexdigest()} {name}\n" for t, (role, name) in readers.items()]
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def auditor_token() -> str:
    """The bearer token of the auditor listed in `reader_server`'s readers file."""
    return os.urandom(24).hex()


@pytest.fixture(scope="session")
def reader_server(tmp_path_factory: pytest.TempPathFactory, auditor_token: str) -> Iterator[LedgerServer]:
    """A server with a readers file listing one auditor (`auditor_token`), who receives
    the disclosures of committed values with every entry."""
    root = tmp_path_factory.mktemp("readers")
    readers = readers_file(root / "readers", {auditor_token: ("auditor", "py-auditor")})
    s = LedgerServer(root / "data").start("--readers-file", str(readers))
    yield s
    s.stop()


#: The name of each case a `Bench` added, by its handle: what the log and every answer
#: name it by in schema 3 (docs/PRIVACY.md, "Handles").
CASE_NAMES: dict[str, str] = {}


def case_named(handle: str, suffix: str) -> bool:
    """Whether the case of `handle` was added by a `Bench` under a name ending in `suffix`."""
    return CASE_NAMES.get(handle, "").endswith(suffix)


def digest(tag: str) -> str:
    return "blake3:" + hashlib.sha256(tag.encode()).hexdigest()


class Bench:
    """Principals and a task class on a server, built through the package."""

    def __init__(self, server: LedgerServer, name: str, *, cases: int = 6, silver: float = 0.5, gold: float = 0.95) -> None:
        self.server = server
        self.client = server.client()
        self.name = name = f"{name}-{os.urandom(3).hex()}"
        op = server.operator
        self.harness = SigningKey.generate(f"{name}-harness")
        self.curators = (SigningKey.generate(f"{name}-curator-a"), SigningKey.generate(f"{name}-curator-b"))
        self.reconciler = SigningKey.generate(f"{name}-reconciler")
        self.gate = SigningKey.generate(f"{name}-gate")
        self.maintainers = (SigningKey.generate(f"{name}-maint-a"), SigningKey.generate(f"{name}-maint-b"))
        people = [
            (self.harness, "harness"),
            (self.curators[0], "curator"),
            (self.curators[1], "curator"),
            (self.reconciler, "reconciler"),
            (self.gate, "promotion-gate"),
            (self.maintainers[0], "maintainer"),
            (self.maintainers[1], "maintainer"),
        ]
        for k, role in people:
            self.client.post(ev.PrincipalEnrolled.of(k, f"{k.name}@example.org", [role]).sign(op))
        self.rubric = digest(f"{name}-rubric")
        self.client.post(
            ev.TaskClassRegistered(
                task_class=name,
                silver=ev.TierRule(5, silver),
                gold=ev.TierRule(10, gold),
                failure_modes=[ev.FailureMode("build_broken", "block", "does not build"), ev.FailureMode("slow", "warn", "slow")],
                breakdown_keys=["correctness", "style"],
                rubric_digest=self.rubric,
            ).sign(op)
        )
        self.cases: list[ev.CaseDraft] = []
        for i in range(cases):
            self.add_case(f"{name}-case-{i}")
        self.run_id = f"{name}-run-1"
        self.client.post(
            ev.RunStarted(self.run_id, name, "harness 1.0", self.rubric, digest("image")).sign(self.harness)
        )

    def draft(self, case_id: str) -> ev.CaseDraft:
        return ev.CaseDraft(case_id, f"case {case_id}", "positive", "medium", "held-out", digest(case_id), digest(case_id + "-cassette"))

    def add_case(self, case_id: str) -> ev.CaseDraft:
        """Adds case `case_id` (its name) under a new handle; returns its draft, whose
        `case_id` is the handle (what scores name) and `case_name` the name."""
        d, bound = self.draft(case_id).bind()
        self.client.post(
            ev.CaseAdded.cosigned(
                self.name, d, source="curated", source_ref="bench/curated", added_at="2026-11-20T00:00:00Z",
                added_by=self.curators[0], reviewed_by=self.curators[1],
            ).sign(self.curators[0], bound=[bound])
        )
        self.cases.append(d)
        CASE_NAMES[d.case_id] = case_id
        return d

    def score(self, case: ev.CaseDraft, value: float, passed: bool = True, failures: tuple[tuple[str, str], ...] = ()) -> ev.ScoreRecorded:
        return ev.ScoreRecorded(
            run_id=self.run_id, task_class=self.name, case_id=case.case_id, case_digest=case.case_digest,
            rubric_digest=self.rubric, cassette_digest=case.cassette_digest, harness_version="harness 1.0",
            image_digest=digest("image"),
            score=ev.BenchScore(passed, value, {"correctness": value}, failures, cost_usd=0.01, duration_seconds=3.5),
            started_at="2026-11-20T00:00:00Z", finished_at="2026-11-20T00:01:00Z", operator_fingerprint="ci",
        )


@pytest.fixture()
def twins(tmp_path: Path) -> Iterator[tuple[LedgerServer, LedgerServer]]:
    a = LedgerServer(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    b = LedgerServer(tmp_path / "b", init=False)
    a.start()
    b.start()
    yield a, b
    a.stop()
    b.stop()
