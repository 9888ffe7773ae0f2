"""Self-test of rekor_standin.py (the loopback Rekor v1 stand-in, NOT REKOR).

Starts the stand-in as a subprocess on a port file and checks its answers
with code written here, not imported from gen.py: the inclusion proof
(RFC 9162 §2.1.3.2) against rootHash, the checkpoint and the SET against
the Rekor key read from trusted_root.json.

    python3 -m pytest -q -p no:cacheprovider test_rekor_standin.py
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "rekor_standin.py"


def rekor_key() -> tuple[ec.EllipticCurvePublicKey, bytes]:
    root = json.loads((HERE / "trusted_root.json").read_text())
    (tlog,) = root["tlogs"]
    spki = base64.b64decode(tlog["publicKey"]["rawBytes"])
    key = serialization.load_der_public_key(spki)
    assert isinstance(key, ec.EllipticCurvePublicKey)
    log_id = hashlib.sha256(spki).digest()
    assert base64.b64decode(tlog["logId"]["keyId"]) == log_id
    return key, log_id


REKOR_KEY, LOG_ID = rekor_key()


class Standin:
    def __init__(self, tmp: Path, *extra: str) -> None:
        port_file = tmp / "port"
        self.proc = subprocess.Popen(
            [sys.executable, str(STANDIN), "--port-file", str(port_file), *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 20
        while not port_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"stand-in exited: {self.proc.stderr.read().decode()}")  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                raise RuntimeError("stand-in wrote no port file")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{int(port_file.read_text())}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def request(self, method: str, path: str, obj: object = None) -> tuple[int, dict, dict]:
        data = None if obj is None else json.dumps(obj).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, dict(resp.headers), json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), json.loads(e.read())

    def post(self, obj: object) -> tuple[int, dict, dict]:
        return self.request("POST", "/api/v1/log/entries", obj)


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[Standin]:
    s = Standin(tmp_path)
    yield s
    s.stop()


def pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def hashedrekord(key: ec.EllipticCurvePrivateKey, artifact: bytes, signed: bytes | None = None) -> dict:
    """What sigstore-rekor's HashedRekord serializes (with a PEM public key;
    the PEM given CRLF line ends, as Rust's `pem` crate writes them)."""
    signature = key.sign(artifact if signed is None else signed, ec.ECDSA(hashes.SHA256()))
    return {
        "apiVersion": "0.0.1",
        "kind": "hashedrekord",
        "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": hashlib.sha256(artifact).hexdigest()}},
            "signature": {
                "content": base64.b64encode(signature).decode(),
                "publicKey": {"content": base64.b64encode(pem(key).replace(b"\n", b"\r\n")).decode()},
            },
        },
    }


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_from_proof(index: int, size: int, leaf: bytes, path: list[bytes]) -> bytes:
    """RFC 9162 §2.1.3.2."""
    assert index < size
    fn, sn, r = index, size - 1, leaf
    for p in path:
        assert sn != 0
        if fn & 1 or fn == sn:
            r = node(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node(r, p)
        fn >>= 1
        sn >>= 1
    assert sn == 0
    return r


def check_checkpoint(text: str) -> tuple[int, bytes]:
    """Verifies the signed note with the Rekor key; returns (size, root)."""
    note, sigs = text.split("\n\n", 1)
    lines = note.split("\n")
    assert lines[0] == "rekor.example.test - 4242424242424242424"
    (sig_line,) = sigs.rstrip("\n").split("\n")
    dash, name, blob = sig_line.split(" ")
    assert dash == "\u2014" and name == "rekor.example.test"
    raw = base64.b64decode(blob)
    assert raw[:4] == LOG_ID[:4]  # key hint
    REKOR_KEY.verify(raw[4:], (note + "\n").encode(), ec.ECDSA(hashes.SHA256()))
    return int(lines[1]), base64.b64decode(lines[2])


def check_entry(uuid: str, entry: dict) -> tuple[int, int]:
    """All a verifier checks of a v1 entry; returns (logIndex, treeSize)."""
    body = base64.b64decode(entry["body"])
    leaf = hashlib.sha256(b"\x00" + body).digest()
    assert uuid == leaf.hex()
    assert entry["logID"] == LOG_ID.hex()
    proof = entry["verification"]["inclusionProof"]
    assert proof["logIndex"] == entry["logIndex"]
    root = bytes.fromhex(proof["rootHash"])
    hashes_ = [bytes.fromhex(h) for h in proof["hashes"]]
    assert hashes_, "a trivial proof: the tree should start with dummy leaves"
    assert root_from_proof(proof["logIndex"], proof["treeSize"], leaf, hashes_) == root
    assert check_checkpoint(proof["checkpoint"]) == (proof["treeSize"], root)
    payload = json.dumps(
        {k: entry[k] for k in ("body", "integratedTime", "logID", "logIndex")},
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    sig = base64.b64decode(entry["verification"]["signedEntryTimestamp"])
    REKOR_KEY.verify(sig, payload, ec.ECDSA(hashes.SHA256()))
    return proof["logIndex"], proof["treeSize"]


def test_valid_entry_logged_and_bad_signature_refused(standin: Standin) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    artifact = b"evidence-ledger stand-in test\n"
    request = hashedrekord(key, artifact)
    before = int(time.time())
    status, headers, answer = standin.post(request)
    assert status == 201, answer
    ((uuid, entry),) = answer.items()
    assert headers["Location"] == f"/api/v1/log/entries/{uuid}"
    assert before <= entry["integratedTime"] <= int(time.time())
    index, size = check_entry(uuid, entry)
    assert (index, size) == (5, 6)  # after five dummy leaves

    # The body is the request's spec, the PEM re-encoded (LF), canonical JSON.
    body = base64.b64decode(entry["body"])
    logged = json.loads(body)
    assert body == json.dumps(logged, sort_keys=True, separators=(",", ":")).encode()
    expected = json.loads(json.dumps(request))
    expected["spec"]["signature"]["publicKey"]["content"] = base64.b64encode(pem(key)).decode()
    assert logged == expected
    # What sigstore-verify compares with a managed key: the SPKI DER.
    logged_pem = base64.b64decode(logged["spec"]["signature"]["publicKey"]["content"])
    assert serialization.load_pem_public_key(logged_pem).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) == key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )

    # A signature over other bytes: 400 with a JSON error, nothing logged.
    status, _, answer = standin.post(hashedrekord(key, artifact, signed=b"other bytes"))
    assert status == 400
    assert answer["code"] == 400 and "signature" in answer["message"]
    # A signature by another key than the one given: 400 too.
    bad = hashedrekord(key, artifact)
    bad["spec"]["signature"]["publicKey"]["content"] = base64.b64encode(
        pem(ec.generate_private_key(ec.SECP256R1()))
    ).decode()
    assert standin.post(bad)[0] == 400
    # Not a hashedrekord v0.0.1: 400.
    assert standin.post({**request, "apiVersion": "0.0.2"})[0] == 400
    status, _, head = standin.request("GET", "/api/v1/log")
    assert status == 200 and head["treeSize"] == 6
    assert check_checkpoint(head["signedTreeHead"]) == (6, bytes.fromhex(head["rootHash"]))

    # The same entry again: 409 pointing at it, nothing logged.
    status, headers, answer = standin.post(request)
    assert status == 409 and headers["Location"] == f"/api/v1/log/entries/{uuid}"
    # A second entry; the first one's proof, fetched again, is against the new tree.
    status, _, answer = standin.post(hashedrekord(key, b"second artifact\n"))
    assert status == 201
    ((uuid2, entry2),) = answer.items()
    assert check_entry(uuid2, entry2) == (6, 7)
    for path in (f"/api/v1/log/entries/{uuid}", "/api/v1/log/entries?logIndex=5"):
        status, _, answer = standin.request("GET", path)
        assert status == 200
        ((got_uuid, got),) = answer.items()
        assert got_uuid == uuid
        assert check_entry(got_uuid, got) == (5, 7)
        assert got["verification"]["signedEntryTimestamp"] == entry["verification"]["signedEntryTimestamp"]


def test_concurrent_posts_get_distinct_indices(standin: Standin) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    results: list[tuple[int, dict, dict]] = []
    lock = threading.Lock()

    def post(i: int) -> None:
        r = standin.post(hashedrekord(key, f"artifact {i}\n".encode()))
        with lock:
            results.append(r)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    indices = []
    for status, _, answer in results:
        assert status == 201
        ((uuid, entry),) = answer.items()
        indices.append(check_entry(uuid, entry)[0])
    assert sorted(indices) == list(range(5, 13))


def test_fail_first_answers_503_then_logs(tmp_path: Path) -> None:
    s = Standin(tmp_path, "--fail-first", "1")
    try:
        request = hashedrekord(ec.generate_private_key(ec.SECP256R1()), b"after an outage\n")
        status, _, answer = s.post(request)
        assert status == 503 and answer["code"] == 503
        status, _, answer = s.post(request)
        assert status == 201
        ((uuid, entry),) = answer.items()
        assert check_entry(uuid, entry) == (5, 6)  # the outage logged nothing
    finally:
        s.stop()


def test_fixed_time_answers_are_reproducible(tmp_path: Path) -> None:
    # One request (its signature is randomized), posted to two fresh stand-ins.
    request = hashedrekord(ec.generate_private_key(ec.SECP256R1()), b"reproducible\n")
    answers = []
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        s = Standin(tmp_path / run, "--fixed-time", "1750000000")
        try:
            status, _, answer = s.post(request)
            assert status == 201
            answers.append(answer)
        finally:
            s.stop()
    assert answers[0] == answers[1]
    ((_, entry),) = answers[0].items()
    assert entry["integratedTime"] == 1750000000


def test_checkpoint_check_rejects_a_flipped_signature(standin: Standin) -> None:
    """The test's own checkpoint check is not vacuous."""
    head = standin.request("GET", "/api/v1/log")[2]["signedTreeHead"]
    note, sig_line = head.split("\n\n", 1)
    dash, name, blob = sig_line.rstrip("\n").split(" ")
    raw = bytearray(base64.b64decode(blob))
    raw[-1] ^= 1
    flipped = f"{note}\n\n{dash} {name} {base64.b64encode(bytes(raw)).decode()}\n"
    with pytest.raises(InvalidSignature):
        check_checkpoint(flipped)
