"""Witnesses against live processes: two `ledger witness serve` (keys from `ledger
witness keygen`) that know the log's key, and a `ledger serve --witness-policy` that
submits its head every second. A client with the policy accepts the checkpoints the
quorum cosigned; a policy needing an absent witness and a cosignature with one flipped
byte are refused, each with its typed error, and the trusted state does not move; a
receipt is proven into the witnessed tree once that tree covers it."""

from __future__ import annotations

import base64
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

from conftest import LedgerServer, free_port, ledger_bin
from evidence_ledger import (
    BadSignature,
    Client,
    CosignerKey,
    NoQuorum,
    NotYetWitnessed,
    Policy,
    SigningKey,
    TrustedState,
)
from evidence_ledger import events as ev
from evidence_ledger.__main__ import main
from evidence_ledger.problems import CheckpointNotWitnessed


class WitnessProcess:
    """`ledger witness serve` with a key from `ledger witness keygen`, on a loopback port."""

    def __init__(self, directory: Path, name: str, log_vkey: str) -> None:
        self.dir = directory
        self.key_file = directory / f"{name.replace('/', '_')}.key"
        out = subprocess.run(
            [str(ledger_bin()), "witness", "keygen", "--name", name, "--out", str(self.key_file)],
            check=True, capture_output=True, text=True,
        )
        printed = next(line.split(": ", 1)[1] for line in out.stdout.splitlines() if line.startswith("verifier key:"))
        self.key = CosignerKey.load(self.key_file)
        assert self.key.verifier_key.text == printed.strip(), "the package reads the key `ledger witness keygen` writes"
        self.vkey = printed.strip()
        self.log_vkey = log_vkey
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: Optional[subprocess.Popen[bytes]] = None

    def start(self) -> None:
        state = self.dir / f"{self.key.name.replace('/', '_')}-state"
        self.log = open(self.dir / f"{self.key.name.replace('/', '_')}.log", "ab")
        self.proc = subprocess.Popen(
            [str(ledger_bin()), "witness", "serve", "--key", str(self.key_file), "--log", self.log_vkey,
             "--state-dir", str(state), "--listen", f"127.0.0.1:{self.port}"],
            stdout=self.log, stderr=self.log,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"ledger witness serve exited with {self.proc.returncode}"
            try:
                urllib.request.urlopen(self.url + "/add-checkpoint", timeout=1)
            except urllib.error.HTTPError:
                return  # up: it answers (a GET is not the protocol)
            except OSError:
                time.sleep(0.1)
                continue
            return
        raise RuntimeError("ledger witness serve did not start in 30 s")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.proc = None
        self.log.close()


@dataclass
class Witnessed:
    server: LedgerServer
    witnesses: tuple[WitnessProcess, WitnessProcess]
    policy_file: Path
    policy: Policy
    dir: Path

    def client(self, policy: Optional[Policy] = None, **kw: Any) -> Client:
        return Client(self.server.url, self.server.vkey, policy=policy or self.policy, **kw)


@pytest.fixture(scope="module")
def witnessed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Witnessed]:
    d = tmp_path_factory.mktemp("witnessed")
    server = LedgerServer(d / "data")  # `ledger init`: the log key exists before the witnesses start
    vkey = server.vkey.text
    ws = (WitnessProcess(d, "witness.test/w0", vkey), WitnessProcess(d, "witness.test/w1", vkey))
    for w in ws:
        w.start()
    text = f"log {vkey}\n" + "".join(f"witness w{i} {w.vkey} {w.url}\n" for i, w in enumerate(ws)) + "group both all w0 w1\nquorum both\n"
    policy_file = d / "policy"
    policy_file.write_text(text, encoding="utf-8")
    server.start("--witness-policy", str(policy_file), "--witness-interval-secs", "1")
    try:
        yield Witnessed(server, ws, policy_file, Policy.load(policy_file), d)
    finally:
        server.stop()
        for w in ws:
            w.stop()


def first_witnessed(c: Client) -> Any:
    deadline = time.monotonic() + 30
    while True:
        try:
            return c.witnessed_checkpoint()
        except CheckpointNotWitnessed:
            if time.monotonic() > deadline:
                raise


def test_checkpoints_meeting_the_quorum_are_accepted(witnessed: Witnessed, tmp_path: Path) -> None:
    trusted = tmp_path / "trusted.note"
    c = witnessed.client(trust=TrustedState.file(trusted))
    w = first_witnessed(c)
    assert sorted(x.witness for x in w.cosigned) == ["witness.test/w0", "witness.test/w1"]
    assert all(abs(x.timestamp - time.time()) < 300 for x in w.cosigned)
    assert c.trust.checkpoint == w.checkpoint
    # The trusted file holds the cosigned note, which opens under the policy again.
    saved = trusted.read_text(encoding="utf-8")
    assert witnessed.policy.open_checkpoint(saved, [witnessed.server.vkey]).size == w.size
    # The log grows; the trusted state follows only once the witnesses cosign.
    r = c.post(ev.PrincipalEnrolled.of(SigningKey.generate("grown"), "grown@example.org", ["harness"]).sign(witnessed.server.operator))
    assert c.trust.size == w.size <= r.index, "a receipt's own checkpoint is not witnessed: the trusted state stays"
    deadline = time.monotonic() + 30
    while c.checkpoint().size <= r.index:
        assert time.monotonic() < deadline, "never cosigned past the new entry"
        time.sleep(0.3)
    assert c.trust.size is not None and c.trust.size > r.index


def test_the_audit_cli_passes_with_the_policy(witnessed: Witnessed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first_witnessed(witnessed.client())
    trusted = tmp_path / "audit.note"
    args = ["audit", witnessed.server.url, "--key", witnessed.server.vkey.text, "--trusted", str(trusted), "--samples", "4"]
    assert main([*args, "--policy", str(witnessed.policy_file)]) == 0
    assert "cosigned by 2 witnesses (witness.test/w0, witness.test/w1)" in capsys.readouterr().out
    bad = tmp_path / "bad.policy"
    bad.write_text("quorum nobody\n", encoding="utf-8")
    assert main([*args, "--policy", str(bad)]) == 2
    assert "line 1" in capsys.readouterr().err


def test_a_policy_needing_an_absent_witness_is_refused(witnessed: Witnessed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first_witnessed(witnessed.client())
    absent = CosignerKey.generate("witness.test/absent").verifier_key
    stricter = tmp_path / "stricter.policy"
    stricter.write_text(f"witness w0 {witnessed.witnesses[0].vkey}\nwitness w2 {absent}\ngroup g all w0 w2\nquorum g\n", encoding="utf-8")
    c = witnessed.client(Policy.load(stricter))
    with pytest.raises(NoQuorum) as e:
        c.checkpoint()
    assert e.value.have == ("w0",) and e.value.needs == "g"
    assert c.trust.checkpoint is None, "nothing trusted from a checkpoint without the quorum"
    # The audit CLI fails (exit 1) and writes no trusted checkpoint.
    trusted = tmp_path / "audit.note"
    code = main(["audit", witnessed.server.url, "--key", witnessed.server.vkey.text, "--trusted", str(trusted), "--policy", str(stricter)])
    assert code == 1 and "quorum `g` is not met" in capsys.readouterr().err
    assert not trusted.exists()


class CheckpointProxy:
    """Forwards GETs to the server; `/checkpoint` passes through `tamper` first."""

    def __init__(self, upstream: str, tamper: Callable[[str], str]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                with urllib.request.urlopen(upstream + self.path, timeout=30) as r:
                    body = r.read()
                if self.path == "/checkpoint":
                    body = tamper(body.decode("utf-8")).encode("utf-8")
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def flip_cosignature_byte(name: str, at: int) -> Callable[[str], str]:
    def tamper(note: str) -> str:
        out = []
        for line in note.split("\n"):
            if line.startswith(f"\u2014 {name} "):
                prefix, sig = line.rsplit(" ", 1)
                blob = bytearray(base64.b64decode(sig))
                blob[at] ^= 0x01
                line = f"{prefix} {base64.b64encode(bytes(blob)).decode()}"
            out.append(line)
        return "\n".join(out)

    return tamper


@pytest.mark.parametrize("at,part", [(11, "timestamp"), (12 + 31, "signature")])
def test_a_cosignature_with_one_flipped_byte_is_refused(witnessed: Witnessed, at: int, part: str) -> None:
    first_witnessed(witnessed.client())
    proxy = CheckpointProxy(witnessed.server.url, flip_cosignature_byte("witness.test/w1", at))
    try:
        c = Client(proxy.url, witnessed.server.vkey, policy=witnessed.policy, retries=0)
        with pytest.raises(BadSignature) as e:
            c.checkpoint()
        assert "witness.test/w1" in str(e.value), part
        assert c.trust.checkpoint is None
        # The same note, untouched, passes: the one byte is what is refused.
        honest = Client(proxy.url, witnessed.server.vkey, policy=witnessed.policy)
        with urllib.request.urlopen(witnessed.server.url + "/checkpoint") as r:
            witnessed.policy.open_checkpoint(r.read(), honest.keys)
    finally:
        proxy.close()


def test_a_receipt_is_proven_into_the_witnessed_tree_once_it_covers_it(witnessed: Witnessed) -> None:
    c = witnessed.client()
    before = first_witnessed(c)
    # With one witness down, the server cannot get a new quorum: the witnessed tree
    # stays where it is, below the next entry.
    w1 = witnessed.witnesses[1]
    w1.stop()
    try:
        envelope = ev.PrincipalEnrolled.of(SigningKey.generate("late"), "late@example.org", ["harness"]).sign(witnessed.server.operator)
        r = c.post(envelope)
        assert r.index >= before.size
        with pytest.raises(NotYetWitnessed) as e:
            c.witnessed_inclusion(r, envelope)
        assert e.value.index == r.index and e.value.witnessed_size <= r.index
        time.sleep(2)  # two submission rounds with w1 down
        with pytest.raises(NotYetWitnessed):
            c.witnessed_inclusion(r, envelope)
    finally:
        w1.start()  # same key, state and port: it cosigns the grown tree
    proven = c.witnessed_inclusion(r, envelope, wait=30)
    assert proven.index == r.index and proven.leaf_hash == r.leaf_hash
    assert proven.witnessed.size > r.index
    assert sorted(x.witness for x in proven.witnessed.cosigned) == ["witness.test/w0", "witness.test/w1"]
    assert c.trust.checkpoint == proven.witnessed.checkpoint


def test_a_replay_audit_with_the_policy_passes_twice_while_the_witnessed_tree_lags(
    witnessed: Witnessed, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A projection's checkpoint is the log's head, newer than the witnessed one: the
    # replica follows it, and the next run finds the witnessed tree behind the replica.
    c = witnessed.client()
    first_witnessed(c)
    w1 = witnessed.witnesses[1]
    w1.stop()
    try:
        op = witnessed.server.operator
        c.post(ev.TaskClassRegistered(
            task_class="witnessed-class", silver=ev.TierRule(5, 0.5), gold=ev.TierRule(10, 0.95),
            failure_modes=[ev.FailureMode("build_broken", "block", "does not build")],
            breakdown_keys=["correctness"], rubric_digest="blake3:" + "ab" * 32,
        ).sign(op))
        args = ["audit", witnessed.server.url, "--key", witnessed.server.vkey.text, "--trusted", str(tmp_path / "t.note"),
                "--policy", str(witnessed.policy_file), "--projections", str(tmp_path / "replica")]
        assert main(args) == 0, capsys.readouterr().err
        assert main(args) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert "1 task classes equal" in out or "task classes equal" in out
    finally:
        w1.start()
