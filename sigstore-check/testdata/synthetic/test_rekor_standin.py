"""Self-test of rekor_standin.py (the loopback stand-ins for the Rekor v1 and
v2 APIs, the Fulcio v2 API and an RFC 3161 TSA; NOT REKOR, NOT FULCIO, NOT
A TSA).

Starts the stand-in as a subprocess on a port file and checks its answers
with code written here, not imported from gen.py: the inclusion proof
(RFC 9162 §2.1.3.2) against rootHash, the checkpoints (v1: ECDSA; v2:
Ed25519, C2SP key ID) and the SET against the Rekor keys read from
trusted_root.json; the certificates it issues against the CA chain and the
CT key read from trusted_root.json (only the precertificate's TBS is
rebuilt with gen.strip_sct and the RFC 6962 signed struct with
gen.sct_signed_data); the timestamps, taken apart with a DER reader written
here, against the TSA chain read from trusted_root.json and the rules of
sigstore-verify 0.15.1's TSA verifier. Bundles made from its answers
(keyless v1; keyless v2 with a timestamp) are also checked by
sigstore-python's verifier, and timestamps by rfc3161-client and
`openssl ts -verify`, when those are installed (skipped otherwise).

    python3 -m pytest -q -p no:cacheprovider test_rekor_standin.py
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.x509.oid import ExtendedKeyUsageOID, ObjectIdentifier

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "rekor_standin.py"

sys.dont_write_bytecode = True  # importing gen leaves no __pycache__ beside the fixtures
sys.path.insert(0, str(HERE))
import gen  # noqa: E402  (strip_sct and sct_signed_data only; importing it writes nothing)


def rekor_key() -> tuple[ec.EllipticCurvePublicKey, bytes]:
    """The Rekor v1 log's key and log ID (the v2 log's are further down)."""
    root = json.loads((HERE / "trusted_root.json").read_text())
    (tlog,) = [t for t in root["tlogs"] if t["baseUrl"] == "https://rekor.example.test"]
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


# --------------------------------------------------------------------------
# The Fulcio v2 stand-in (NOT FULCIO) and keyless signing
# --------------------------------------------------------------------------

ISSUER = "https://issuer.example.test"
OID_ISSUER_V1 = ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
OID_ISSUER_V2 = ObjectIdentifier("1.3.6.1.4.1.57264.1.8")


def ca_and_ct() -> tuple[x509.Certificate, x509.Certificate, ec.EllipticCurvePublicKey, bytes]:
    """(intermediate, root, CT key, CT log ID) from trusted_root.json."""
    root = json.loads((HERE / "trusted_root.json").read_text())
    (ca,) = root["certificateAuthorities"]
    intermediate, root_cert = (
        x509.load_der_x509_certificate(base64.b64decode(c["rawBytes"])) for c in ca["certChain"]["certificates"]
    )
    (ctlog,) = root["ctlogs"]
    spki = base64.b64decode(ctlog["publicKey"]["rawBytes"])
    key = serialization.load_der_public_key(spki)
    assert isinstance(key, ec.EllipticCurvePublicKey)
    return intermediate, root_cert, key, hashlib.sha256(spki).digest()


INTERMEDIATE, ROOT, CT_KEY, CT_LOG_ID = ca_and_ct()


def b64url(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def jwt(claims: dict) -> str:
    """An OIDC identity token as the stand-in reads it: header.payload.signature,
    each base64url without padding. The signature part is garbage: the
    stand-in does not check it (real Fulcio would refuse this token)."""
    header = {"alg": "RS256", "kid": "synthetic-not-checked", "typ": "JWT"}
    return ".".join(
        [
            b64url(json.dumps(header).encode()),
            b64url(json.dumps(claims).encode()),
            b64url(b"not a signature: the stand-in does not check it"),
        ]
    )


def claims(
    sub: str = "curator-subject-0001",
    *,
    email: str | None = "curator@example.org",
    exp: int | None = None,
    **extra: object,
) -> dict:
    """A token's claims: the synthetic issuer, ten minutes to live by default."""
    c: dict = {
        "iss": ISSUER,
        "sub": sub,
        "aud": "sigstore",
        "iat": int(time.time()),
        "exp": int(time.time()) + 600 if exp is None else exp,
        **extra,
    }
    if email is not None:
        c["email"] = email
        c.setdefault("email_verified", True)
    return c


def cert_request(key: ec.EllipticCurvePrivateKey, token: str, proof_over: bytes) -> dict:
    """The Fulcio v2 request: the public key as a PEM SubjectPublicKeyInfo, the
    proof of possession a DER ECDSA-SHA256 signature over the token's sub."""
    return {
        "credentials": {"oidcIdentityToken": token},
        "publicKeyRequest": {
            "publicKey": {"algorithm": "ECDSA", "content": pem(key).decode()},
            "proofOfPossession": base64.b64encode(key.sign(proof_over, ec.ECDSA(hashes.SHA256()))).decode(),
        },
    }


def signing_cert(s: Standin, request: object) -> tuple[int, dict, dict]:
    return s.request("POST", "/api/v2/signingCert", request)


def issue(s: Standin, key: ec.EllipticCurvePrivateKey, c: dict) -> x509.Certificate:
    status, _, answer = signing_cert(s, cert_request(key, jwt(c), c["sub"].encode()))
    assert status == 201, answer
    return check_chain(answer, key)


def check_chain(answer: dict, key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    """The chain as a verifier checks it (but for the time); returns the leaf."""
    (top,) = answer.keys()
    assert top == "signedCertificateEmbeddedSct"
    pems = answer["signedCertificateEmbeddedSct"]["chain"]["certificates"]
    assert len(pems) == 3 and all(p.startswith("-----BEGIN CERTIFICATE-----\n") for p in pems)
    leaf, intermediate, root = (x509.load_pem_x509_certificate(p.encode()) for p in pems)
    der = serialization.Encoding.DER
    assert intermediate.public_bytes(der) == INTERMEDIATE.public_bytes(der)
    assert root.public_bytes(der) == ROOT.public_bytes(der)
    leaf.verify_directly_issued_by(INTERMEDIATE)
    INTERMEDIATE.verify_directly_issued_by(ROOT)
    assert leaf.public_key() == key.public_key()
    assert leaf.not_valid_after_utc - leaf.not_valid_before_utc == dt.timedelta(minutes=10)
    ext = leaf.extensions
    assert ext.get_extension_for_class(x509.KeyUsage).value.digital_signature
    assert list(ext.get_extension_for_class(x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CODE_SIGNING]
    # The embedded SCT: from the trusted CT log, over the precertificate.
    (sct,) = ext.get_extension_for_class(x509.PrecertificateSignedCertificateTimestamps).value
    assert sct.log_id == CT_LOG_ID
    assert sct.entry_type == x509.certificate_transparency.LogEntryType.PRE_CERTIFICATE
    ts_ms = (sct.timestamp - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1)
    issuer_spki = INTERMEDIATE.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signed = gen.sct_signed_data(ts_ms, issuer_spki, gen.strip_sct(leaf))
    CT_KEY.verify(sct.signature, signed, ec.ECDSA(hashes.SHA256()))
    with pytest.raises(InvalidSignature):  # the check is not vacuous
        CT_KEY.verify(sct.signature, signed[:-3] + b"\xff" + signed[-2:], ec.ECDSA(hashes.SHA256()))
    return leaf


def san(cert: x509.Certificate) -> list:
    return list(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)


def issuer_extensions(cert: x509.Certificate) -> tuple[bytes, bytes]:
    get = cert.extensions.get_extension_for_oid
    return get(OID_ISSUER_V1).value.value, get(OID_ISSUER_V2).value.value


def test_signing_cert_for_an_email_token(standin: Standin) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    before = int(time.time())
    leaf = issue(standin, key, claims())
    after = int(time.time())
    assert san(leaf) == [x509.RFC822Name("curator@example.org")]
    raw = ISSUER.encode()
    assert issuer_extensions(leaf) == (raw, b"\x0c" + bytes([len(raw)]) + raw)
    not_before = int(leaf.not_valid_before_utc.timestamp())
    assert before <= not_before <= after
    # Another certificate for the same key and token: another serial.
    again = issue(standin, key, claims())
    assert again.serial_number != leaf.serial_number
    # Nothing was logged in Rekor.
    assert standin.request("GET", "/api/v1/log")[2]["treeSize"] == 5


def test_signing_cert_for_a_uri_subject_and_a_bearer_token(standin: Standin) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    uri = "https://ci.example.test/workflows/release.yml@refs/heads/main"
    leaf = issue(standin, key, claims(uri, email=None))
    assert san(leaf) == [x509.UniformResourceIdentifier(uri)]
    # The token in an Authorization header, as Fulcio also takes it.
    c = claims(uri, email=None)
    request = cert_request(key, jwt(c), uri.encode())
    del request["credentials"]
    req = urllib.request.Request(
        standin.url + "/api/v2/signingCert", data=json.dumps(request).encode(), method="POST"
    )
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", f"Bearer {jwt(c)}")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 201
        assert san(check_chain(json.loads(resp.read()), key)) == [x509.UniformResourceIdentifier(uri)]


def test_signing_cert_for_a_github_actions_workflow(standin: Standin) -> None:
    """As Fulcio names a GitHub Actions workflow: its file at its ref, not sub."""
    key = ec.generate_private_key(ec.SECP256R1())
    gh = "https://token.actions.githubusercontent.com"
    ref = "acme/ledger/.github/workflows/anchor.yml@refs/heads/main"
    c = claims("repo:acme/ledger:ref:refs/heads/main", email=None, job_workflow_ref=ref)
    c["iss"] = gh
    leaf = issue(standin, key, c)
    assert san(leaf) == [x509.UniformResourceIdentifier("https://github.com/" + ref)]
    assert issuer_extensions(leaf)[0] == gh.encode()
    # Without the claim, nothing is named: 400.
    del c["job_workflow_ref"]
    status, _, answer = signing_cert(standin, cert_request(key, jwt(c), c["sub"].encode()))
    assert status == 400 and "job_workflow_ref" in answer["message"]


def test_signing_cert_refusals(standin: Standin) -> None:
    key = ec.generate_private_key(ec.SECP256R1())

    def answer(
        c: dict | None = None,
        *,
        token: str | None = None,
        proof_over: bytes | None = None,
        request: object = None,
    ) -> tuple[int, str]:
        if request is None:
            c = claims() if c is None else c
            token = jwt(c) if token is None else token
            request = cert_request(key, token, c["sub"].encode() if proof_over is None else proof_over)
        status, headers, body = signing_cert(standin, request)
        assert headers["Content-Type"] == "application/json"
        assert body["code"] == status and isinstance(body["message"], str)
        return status, body["message"]

    # The token: 401, as Fulcio answers an unauthenticated request.
    assert answer(claims(iss="https://accounts.example.test"))[0] == 401
    status, message = answer(claims(exp=int(time.time()) - 1))
    assert status == 401 and "expired" in message
    no_sub = claims()
    del no_sub["sub"]
    assert answer(no_sub, proof_over=b"")[0] == 401
    no_exp = claims()
    del no_exp["exp"]
    assert answer(no_exp)[0] == 401
    assert answer(claims(email_verified=False))[0] == 401
    assert answer(token="not-a-jwt")[0] == 401
    assert answer(token="a.b")[0] == 401
    assert answer(token=b64url(b"{}") + "." + b64url(b"[1]") + ".")[0] == 401
    no_token = cert_request(key, jwt(claims()), b"curator-subject-0001")
    del no_token["credentials"]
    assert answer(request=no_token)[0] == 401

    # The proof of possession and the key: 400.
    status, message = answer(proof_over=b"another subject")
    assert status == 400 and "proof of possession" in message
    other = cert_request(ec.generate_private_key(ec.SECP256R1()), jwt(claims()), b"curator-subject-0001")
    other["publicKeyRequest"]["publicKey"] = cert_request(key, "", b"")["publicKeyRequest"]["publicKey"]
    assert answer(request=other)[0] == 400  # signed by another key than the one given
    p384 = ec.generate_private_key(ec.SECP384R1())
    status, message = answer(request=cert_request(p384, jwt(claims()), b"curator-subject-0001"))
    assert status == 400 and "P-256" in message
    rsa_named = cert_request(key, jwt(claims()), b"curator-subject-0001")
    rsa_named["publicKeyRequest"]["publicKey"]["algorithm"] = "RSA"
    assert answer(request=rsa_named)[0] == 400
    not_pem = cert_request(key, jwt(claims()), b"curator-subject-0001")
    not_pem["publicKeyRequest"]["publicKey"]["content"] = "not a PEM"
    assert answer(request=not_pem)[0] == 400
    no_proof = cert_request(key, jwt(claims()), b"curator-subject-0001")
    del no_proof["publicKeyRequest"]["proofOfPossession"]
    assert answer(request=no_proof)[0] == 400
    no_key = cert_request(key, jwt(claims()), b"curator-subject-0001")
    del no_key["publicKeyRequest"]
    assert answer(request=no_key)[0] == 400
    # An identity the certificate cannot name: 400.
    assert answer(claims("not-a-uri", email=None))[0] == 400
    assert answer(claims(email="no at sign"))[0] == 400
    # Not JSON at all: 400.
    req = urllib.request.Request(standin.url + "/api/v2/signingCert", data=b"{not json", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 400 and json.loads(e.value.read())["code"] == 400

    # Still serving, and the same key is certified once the request is right.
    assert san(issue(standin, key, claims())) == [x509.RFC822Name("curator@example.org")]


def bundle_v03(leaf: x509.Certificate, artifact: bytes, signature: bytes, entry: dict) -> dict:
    """A Sigstore bundle v0.3 (messageSignature) from a v1 entry, in the shape
    gen.py's Signing.bundle and Log.tlog_entry write."""
    proof = entry["verification"]["inclusionProof"]
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {
            "certificate": {"rawBytes": b64(leaf.public_bytes(serialization.Encoding.DER))},
            "tlogEntries": [
                {
                    "logIndex": str(entry["logIndex"]),
                    "logId": {"keyId": b64(bytes.fromhex(entry["logID"]))},
                    "kindVersion": {"kind": "hashedrekord", "version": "0.0.1"},
                    "integratedTime": str(entry["integratedTime"]),
                    "inclusionPromise": {"signedEntryTimestamp": entry["verification"]["signedEntryTimestamp"]},
                    "inclusionProof": {
                        "logIndex": str(proof["logIndex"]),
                        "rootHash": b64(bytes.fromhex(proof["rootHash"])),
                        "treeSize": str(proof["treeSize"]),
                        "hashes": [b64(bytes.fromhex(h)) for h in proof["hashes"]],
                        "checkpoint": {"envelope": proof["checkpoint"]},
                    },
                    "canonicalizedBody": entry["body"],
                }
            ],
        },
        "messageSignature": {
            "messageDigest": {"algorithm": "SHA2_256", "digest": b64(hashlib.sha256(artifact).digest())},
            "signature": b64(signature),
        },
    }


def shape(obj: object) -> object:
    if isinstance(obj, dict):
        return {k: shape(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [shape(v) for v in obj[:1]]
    return type(obj).__name__


def check_bundle(bundle: dict, artifact: bytes) -> tuple[x509.Certificate, int]:
    """Every piece of a keyless bundle, from the bundle alone (the Rust side
    runs sigstore-verify on it); returns (leaf, integrated time)."""
    assert shape(bundle) == shape(json.loads((HERE / "good.bundle.json").read_text()))
    material = bundle["verificationMaterial"]
    leaf = x509.load_der_x509_certificate(base64.b64decode(material["certificate"]["rawBytes"]))
    leaf.verify_directly_issued_by(INTERMEDIATE)
    signature = base64.b64decode(bundle["messageSignature"]["signature"])
    digest = base64.b64decode(bundle["messageSignature"]["messageDigest"]["digest"])
    assert digest == hashlib.sha256(artifact).digest()
    leaf.public_key().verify(signature, artifact, ec.ECDSA(hashes.SHA256()))
    (tlog,) = material["tlogEntries"]
    body_raw = base64.b64decode(tlog["canonicalizedBody"])
    body = json.loads(body_raw)
    assert body["kind"] == tlog["kindVersion"]["kind"] == "hashedrekord"
    assert body["apiVersion"] == tlog["kindVersion"]["version"] == "0.0.1"
    assert body["spec"]["data"]["hash"] == {"algorithm": "sha256", "value": digest.hex()}
    assert base64.b64decode(body["spec"]["signature"]["content"]) == signature
    logged_pem = base64.b64decode(body["spec"]["signature"]["publicKey"]["content"])
    assert logged_pem == leaf.public_bytes(serialization.Encoding.PEM)  # the certificate, LF line ends
    assert base64.b64decode(tlog["logId"]["keyId"]) == LOG_ID
    index, integrated = int(tlog["logIndex"]), int(tlog["integratedTime"])
    proof = tlog["inclusionProof"]
    size, root = int(proof["treeSize"]), base64.b64decode(proof["rootHash"])
    leaf_hash = hashlib.sha256(b"\x00" + body_raw).digest()
    path = [base64.b64decode(h) for h in proof["hashes"]]
    assert int(proof["logIndex"]) == index
    assert root_from_proof(index, size, leaf_hash, path) == root
    assert check_checkpoint(proof["checkpoint"]["envelope"]) == (size, root)
    payload = json.dumps(
        {"body": tlog["canonicalizedBody"], "integratedTime": integrated, "logID": LOG_ID.hex(), "logIndex": index},
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    set_sig = base64.b64decode(tlog["inclusionPromise"]["signedEntryTimestamp"])
    REKOR_KEY.verify(set_sig, payload, ec.ECDSA(hashes.SHA256()))
    # Signed while the certificate was valid.
    assert leaf.not_valid_before_utc.timestamp() <= integrated <= leaf.not_valid_after_utc.timestamp()
    return leaf, integrated


def keyless(s: Standin, artifact: bytes, c: dict) -> dict:
    """An ephemeral key, a certificate for the token, a signature, a log entry:
    the keyless flow, as a Sigstore client runs it; returns the bundle."""
    key = ec.generate_private_key(ec.SECP256R1())
    status, _, answer = signing_cert(s, cert_request(key, jwt(c), c["sub"].encode()))
    assert status == 201, answer
    leaf_pem = answer["signedCertificateEmbeddedSct"]["chain"]["certificates"][0]
    leaf = check_chain(answer, key)
    signature = key.sign(artifact, ec.ECDSA(hashes.SHA256()))
    request = {
        "apiVersion": "0.0.1",
        "kind": "hashedrekord",
        "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": hashlib.sha256(artifact).hexdigest()}},
            "signature": {
                "content": base64.b64encode(signature).decode(),
                # The leaf alone, base64 of its PEM (CRLF, as Rust's `pem` crate writes it).
                "publicKey": {"content": base64.b64encode(leaf_pem.replace("\n", "\r\n").encode()).decode()},
            },
        },
    }
    status, headers, answer = s.post(request)
    assert status == 201, answer
    ((uuid, entry),) = answer.items()
    check_entry(uuid, entry)
    bundle = bundle_v03(leaf, artifact, signature, entry)
    assert check_bundle(bundle, artifact) == (leaf, entry["integratedTime"])
    return bundle


def test_keyless_signing_logged_and_bundled(standin: Standin) -> None:
    artifact = b"evidence-ledger keyless anchor\n"
    bundle = keyless(standin, artifact, claims())
    assert bundle["verificationMaterial"]["tlogEntries"][0]["logIndex"] == "5"
    key = ec.generate_private_key(ec.SECP256R1())
    status, _, answer = signing_cert(standin, cert_request(key, jwt(claims()), b"curator-subject-0001"))
    assert status == 201
    leaf_pem, *rest = answer["signedCertificateEmbeddedSct"]["chain"]["certificates"]
    # The whole chain in the PEM: refused (the stand-in takes the leaf alone).
    request = hashedrekord(key, artifact)
    chain = "".join([leaf_pem, *rest]).encode()
    request["spec"]["signature"]["publicKey"]["content"] = base64.b64encode(chain).decode()
    status, _, answer = standin.post(request)
    assert status == 400 and "chain" in answer["message"]
    # A signature by another key than the certificate's: 400.
    request = hashedrekord(ec.generate_private_key(ec.SECP256R1()), artifact)
    request["spec"]["signature"]["publicKey"]["content"] = base64.b64encode(leaf_pem.encode()).decode()
    status, _, answer = standin.post(request)
    assert status == 400 and "signature" in answer["message"]
    # Nothing logged but the first entry.
    assert standin.request("GET", "/api/v1/log")[2]["treeSize"] == 6


def test_fulcio_fail_first_is_counted_apart_from_fail_first(tmp_path: Path) -> None:
    s = Standin(tmp_path, "--fail-first", "1", "--fulcio-fail-first", "2")
    try:
        key = ec.generate_private_key(ec.SECP256R1())
        request = cert_request(key, jwt(claims()), b"curator-subject-0001")
        for _ in range(2):
            status, _, answer = signing_cert(s, request)
            assert status == 503 and answer["code"] == 503 and "--fulcio-fail-first" in answer["message"]
        entry = hashedrekord(key, b"after the outages\n")
        status, _, answer = s.post(entry)
        assert status == 503 and "--fail-first" in answer["message"]
        assert signing_cert(s, request)[0] == 201
        status, _, answer = s.post(entry)
        assert status == 201
        ((uuid, logged),) = answer.items()
        assert check_entry(uuid, logged) == (5, 6)
    finally:
        s.stop()


def test_fixed_time_is_the_certificate_clock_and_answers_are_reproducible(tmp_path: Path) -> None:
    fixed = 1750000000  # 2025-06-15, before now: the token's exp is judged by this clock
    key = ec.generate_private_key(ec.SECP256R1())
    c = claims(exp=fixed + 60, iat=fixed - 60)
    request = cert_request(key, jwt(c), c["sub"].encode())
    artifact = b"reproducible keyless\n"
    answers = []
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        s = Standin(tmp_path / run, "--fixed-time", str(fixed))
        try:
            status, _, answer = signing_cert(s, request)
            assert status == 201, answer
            leaf = check_chain(answer, key)
            assert int(leaf.not_valid_before_utc.timestamp()) == fixed
            answers.append(answer)
            expired = claims(exp=fixed)
            assert signing_cert(s, cert_request(key, jwt(expired), expired["sub"].encode()))[0] == 401
            if run == "a":
                # The keyless flow under the fixed clock: logged at `fixed`,
                # inside the certificate's validity.
                bundle = keyless(s, artifact, c)
                assert bundle["verificationMaterial"]["tlogEntries"][0]["integratedTime"] == str(fixed)
        finally:
            s.stop()
    assert answers[0] == answers[1]


def sigstore_python_verifies(bundle: dict, artifact: bytes, identity: str) -> None:
    from sigstore.models import Bundle, TrustedRoot
    from sigstore.verify import Verifier, policy

    verifier = Verifier(trusted_root=TrustedRoot.from_file(str(HERE / "trusted_root.json")))
    verifier.verify_artifact(
        artifact, Bundle.from_json(json.dumps(bundle)), policy.Identity(identity=identity, issuer=ISSUER)
    )


def test_sigstore_python_verifies_keyless_bundles(standin: Standin) -> None:
    """The bundles as a real verifier reads them (sigstore-python, if installed;
    the Rust tests run sigstore-verify)."""
    try:
        from sigstore.errors import VerificationError
        from sigstore.verify import Verifier  # noqa: F401
    except ImportError as e:
        pytest.skip(f"sigstore-python is not importable: {e}")

    artifact = b"evidence-ledger keyless anchor, verified\n"
    bundle = keyless(standin, artifact, claims())
    sigstore_python_verifies(bundle, artifact, "curator@example.org")
    uri = "https://ci.example.test/workflows/release.yml@refs/heads/main"
    sigstore_python_verifies(keyless(standin, artifact, claims(uri, email=None)), artifact, uri)
    with pytest.raises(VerificationError):
        sigstore_python_verifies(bundle, artifact, "someone-else@example.org")
    with pytest.raises(VerificationError):
        sigstore_python_verifies(bundle, b"other bytes\n", "curator@example.org")


def test_sigstore_python_signs_keyless_through_the_standins(standin: Standin) -> None:
    """sigstore-python's own keyless signer (if installed) against both
    stand-ins: a CSR and a Bearer token to signingCert, the SCT checked with
    the CT key of trusted_root.json, a hashedrekord with the certificate;
    then its verifier. A check of the stand-ins' wire shapes by another
    client than the ledger's (its Fulcio and Rekor clients are internal
    modules of sigstore-python 4.x: skipped if they moved)."""
    try:
        from sigstore._internal.fulcio.client import FulcioClient
        from sigstore._internal.rekor.client import RekorClient
        from sigstore.models import TrustedRoot
        from sigstore.oidc import IdentityToken
        from sigstore.sign import SigningContext
    except ImportError as e:
        pytest.skip(f"sigstore-python's signer is not importable: {e}")

    root = TrustedRoot.from_file(str(HERE / "trusted_root.json"))
    context = SigningContext(
        fulcio=FulcioClient(standin.url), rekor=RekorClient(standin.url), trusted_root=root
    )
    c = claims(nbf=int(time.time()))
    artifact = b"signed by sigstore-python through the stand-ins\n"
    with context.signer(IdentityToken(jwt(c))) as signer:
        bundle = json.loads(signer.sign_artifact(artifact).to_json())
    sigstore_python_verifies(bundle, artifact, "curator@example.org")
    # Its bundle is the shape gen.py writes, but for an empty list of
    # RFC 3161 timestamps (none was asked for).
    tsa = bundle["verificationMaterial"].pop("timestampVerificationData", {})
    assert not tsa.get("rfc3161Timestamps")
    leaf, _ = check_bundle(bundle, artifact)
    assert san(leaf) == [x509.RFC822Name("curator@example.org")]


# --------------------------------------------------------------------------
# The RFC 3161 TSA stand-in (NOT A TSA) and the Rekor v2 stand-in (NOT REKOR)
#
# Checked with code written here (a small DER reader and writer, the proof
# check above, the keys and certificates read from trusted_root.json), then
# end to end by sigstore-python's verifier, rfc3161-client and, if present,
# `openssl ts -verify`; and against the rules of sigstore-verify 0.15.1's
# TSA verifier (sigstore-tsa 0.15.1 src/verify.rs), restated below.
# --------------------------------------------------------------------------

TSA_PATH = "/api/v1/timestamp"
REKOR_V2_PATH = "/api/v2/log/entries"
FIXED = 1750000000  # 2025-06-15T15:06:40Z
FIXED_GENTIME = "20250615150640Z"
OID_SHA256 = "2.16.840.1.101.3.4.2.1"
OID_TSTINFO = "1.2.840.113549.1.9.16.1.4"
OID_SIGNED_DATA = "1.2.840.113549.1.7.2"
OID_CONTENT_TYPE = "1.2.840.113549.1.9.3"
OID_MESSAGE_DIGEST = "1.2.840.113549.1.9.4"
OID_SIGNING_CERT_V2 = "1.2.840.113549.1.9.16.2.47"
OID_ECDSA_SHA256 = "1.2.840.10045.4.3.2"


def tsa_authority() -> tuple[x509.Certificate, x509.Certificate, dict]:
    """(leaf, root, the entry) of the one timestamp authority of trusted_root.json."""
    root = json.loads((HERE / "trusted_root.json").read_text())
    (tsa,) = root["timestampAuthorities"]
    leaf, top = (x509.load_der_x509_certificate(base64.b64decode(c["rawBytes"])) for c in tsa["certChain"]["certificates"])
    return leaf, top, tsa


TSA_LEAF, TSA_ROOT, TSA_ENTRY = tsa_authority()


def rekor_v2_log() -> tuple[Ed25519PublicKey, bytes]:
    """The Rekor v2 log's Ed25519 key and its log ID from trusted_root.json,
    the ID checked against the C2SP signed-note key ID computed here."""
    root = json.loads((HERE / "trusted_root.json").read_text())
    (tlog,) = [t for t in root["tlogs"] if t["baseUrl"] == "https://rekor-v2.example.test"]
    assert tlog["publicKey"]["keyDetails"] == "PKIX_ED25519" and tlog["hashAlgorithm"] == "SHA2_256"
    key = serialization.load_der_public_key(base64.b64decode(tlog["publicKey"]["rawBytes"]))
    assert isinstance(key, Ed25519PublicKey)
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    key_id = hashlib.sha256(b"rekor-v2.example.test\n\x01" + raw).digest()
    assert base64.b64decode(tlog["logId"]["keyId"]) == key_id
    return key, key_id


REKOR_V2_KEY, REKOR_V2_ID = rekor_v2_log()


# A small DER reader and writer, independent of gen.py's.


def tlv(buf: bytes, pos: int = 0) -> tuple[int, int, int]:
    """(tag, contents start, end) of the DER element at pos."""
    tag, n = buf[pos], buf[pos + 1]
    pos += 2
    if n & 0x80:
        count = n & 0x7F
        n = int.from_bytes(buf[pos : pos + count], "big")
        pos += count
    assert pos + n <= len(buf), "truncated DER"
    return tag, pos, pos + n


def items(contents: bytes) -> list[tuple[int, bytes, bytes]]:
    """(tag, whole element, contents) of each element of a constructed value's contents."""
    out, pos = [], 0
    while pos < len(contents):
        tag, c, e = tlv(contents, pos)
        out.append((tag, contents[pos:e], contents[c:e]))
        pos = e
    return out


def one(der: bytes, tag: int) -> bytes:
    """The contents of der, one element with this tag and nothing after it."""
    t, c, e = tlv(der)
    assert t == tag and e == len(der), (hex(t), hex(tag))
    return der[c:e]


def enc(tag: int, contents: bytes) -> bytes:
    n = len(contents)
    length = bytes([n]) if n < 0x80 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag]) + length + contents


def enc_int(n: int) -> bytes:
    return enc(0x02, n.to_bytes(n.bit_length() // 8 + 1, "big", signed=True))


def enc_oid(dotted: str) -> bytes:
    arcs = [int(a) for a in dotted.split(".")]
    out = b""
    for arc in [40 * arcs[0] + arcs[1], *arcs[2:]]:
        groups = [arc & 0x7F]
        while arc > 0x7F:
            arc >>= 7
            groups.append(0x80 | (arc & 0x7F))
        out += bytes(reversed(groups))
    return enc(0x06, out)


def oid(contents: bytes) -> str:
    arcs, value = [], 0
    for b in contents:
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            arcs.append(value)
            value = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in [first, arcs[0] - 40 * first, *arcs[1:]])


def sorted_set(elements: list[bytes]) -> bytes:
    """SET OF contents in DER order (X.690 §11.6)."""
    width = max(len(e) for e in elements)
    return b"".join(sorted(elements, key=lambda e: e.ljust(width, b"\0")))


def timestamp_request(
    digest: bytes,
    *,
    nonce: int | None = None,
    cert_req: bool = True,
    null_params: bool = True,
    algorithm: str = OID_SHA256,
    version: int = 1,
    policy: str | None = None,
    extra: bytes = b"",
) -> bytes:
    """A DER TimeStampReq (RFC 3161 §2.4.1), as sigstore-tsa's client writes it by default."""
    alg = enc(0x30, enc_oid(algorithm) + (b"\x05\x00" if null_params else b""))
    body = enc_int(version) + enc(0x30, alg + enc(0x04, digest))
    if policy is not None:
        body += enc_oid(policy)
    if nonce is not None:
        body += enc_int(nonce)
    if cert_req:
        body += b"\x01\x01\xff"
    return enc(0x30, body + extra)


class Reply:
    """A TimeStampResp taken apart, every field's DER kept."""

    def __init__(self, der: bytes) -> None:
        self.der = der
        (_, status, _), (_, token, token_c) = items(one(der, 0x30))
        assert one(status, 0x30) == enc_int(0), "PKIStatus granted"
        (_, ct, ct_c), (_, explicit, explicit_c) = items(token_c)
        assert oid(ct_c) == OID_SIGNED_DATA and explicit[0] == 0xA0
        fields = items(one(explicit_c, 0x30))
        version, digest_algs, encap, *rest = fields
        self.signed_data_version = version[1]
        self.digest_algorithms = [a for _, a, _ in items(digest_algs[2])]
        (_, econtent_type, ect_c), (t, _, octets) = items(encap[2])
        assert oid(ect_c) == OID_TSTINFO and t == 0xA0
        self.tst_der = one(octets, 0x04)
        self.certificates: list[bytes] = []
        if rest[0][0] == 0xA0:  # certificates [0] IMPLICIT
            self.certificates = [c for _, c, _ in items(rest[0][2])]
            self.certificates_in_der_order = rest[0][2] == sorted_set(self.certificates)
            rest = rest[1:]
        ((tag, _, signer_infos_c),) = rest  # no CRLs
        assert tag == 0x31
        ((_, _, si),) = items(signer_infos_c)
        si_version, sid, digest_alg, attrs, sig_alg, signature = items(si)
        assert si_version[1] == enc_int(1)
        (_, issuer, _), (_, serial, serial_c) = items(sid[2])
        self.sid_issuer, self.sid_serial = issuer, int.from_bytes(serial_c, "big")
        self.digest_alg = digest_alg[1]
        assert attrs[0] == 0xA0, "signedAttrs [0] IMPLICIT"
        self.signed_attrs = attrs[2]
        self.attributes: dict[str, list[bytes]] = {}
        for _, _, attr in items(self.signed_attrs):
            (_, _, attr_oid), (t, _, values) = items(attr)
            assert t == 0x31
            self.attributes[oid(attr_oid)] = [v for _, v, _ in items(values)]
        self.sig_alg = oid(items(sig_alg[2])[0][2])
        self.signature = one(signature[1], 0x04)
        # The TSTInfo.
        self.tst = items(one(self.tst_der, 0x30))
        assert self.tst[0][1] == enc_int(1), "TSTInfo version 1"
        self.policy = oid(self.tst[1][2])
        self.imprint = self.tst[2][1]
        self.serial = int.from_bytes(self.tst[3][2], "big")
        assert self.tst[4][0] == 0x18
        self.gen_time = self.tst[4][2].decode()
        optional = {t: whole for t, whole, _ in self.tst[5:]}
        self.accuracy = optional.get(0x30)
        self.nonce = optional.get(0x02)
        assert set(optional) <= {0x30, 0x02}, "no ordering (DEFAULT FALSE), tsa name or extensions"

    def signed_attrs_as_set(self) -> bytes:
        """What the signature covers: signedAttrs re-tagged SET (RFC 5652 §5.4)."""
        return enc(0x31, self.signed_attrs)


def check_reply(reply: Reply, digest: bytes, *, nonce: int | None, gen_time: str, cert_req: bool) -> None:
    """Every field a verifier reads, against the request and trusted_root.json."""
    der = serialization.Encoding.DER
    assert reply.signed_data_version == enc_int(3)
    assert reply.digest_algorithms == [enc(0x30, enc_oid(OID_SHA256))]
    assert reply.imprint == enc(0x30, enc(0x30, enc_oid(OID_SHA256) + b"\x05\x00") + enc(0x04, digest))
    assert reply.nonce == (None if nonce is None else enc_int(nonce))
    assert reply.gen_time == gen_time
    assert reply.accuracy == enc(0x30, enc_int(1))
    assert reply.policy == "1.3.6.1.4.1.32473.3161.1"
    # The signer: the TSA leaf of trusted_root.json, named by issuer and serial.
    assert reply.sid_issuer == TSA_LEAF.issuer.public_bytes()
    assert reply.sid_serial == TSA_LEAF.serial_number
    assert reply.digest_alg == enc(0x30, enc_oid(OID_SHA256))
    assert reply.sig_alg == OID_ECDSA_SHA256
    if cert_req:
        assert TSA_LEAF.public_bytes(der) in reply.certificates and reply.certificates_in_der_order
    else:
        assert reply.certificates == []
    # The signed attributes: in DER order, exactly these three.
    assert reply.signed_attrs == sorted_set([a for _, a, _ in items(reply.signed_attrs)])
    assert set(reply.attributes) == {OID_CONTENT_TYPE, OID_MESSAGE_DIGEST, OID_SIGNING_CERT_V2}
    assert reply.attributes[OID_CONTENT_TYPE] == [enc_oid(OID_TSTINFO)]
    assert reply.attributes[OID_MESSAGE_DIGEST] == [enc(0x04, hashlib.sha256(reply.tst_der).digest())]
    # ESS signingCertificateV2: certs SEQUENCE OF ESSCertIDv2 {certHash, issuerSerial}.
    ((_, ess, _),) = [(0, v, 0) for v in reply.attributes[OID_SIGNING_CERT_V2]]
    ((_, _, certs),) = items(one(ess, 0x30))
    ((_, _, cert_id),) = items(certs)
    (_, cert_hash, _), (_, _, issuer_serial) = items(cert_id)  # hashAlgorithm sha256: the DEFAULT, absent
    assert one(cert_hash, 0x04) == hashlib.sha256(TSA_LEAF.public_bytes(der)).digest()
    (_, _, general_names), (_, serial, _) = items(issuer_serial)
    assert general_names == enc(0xA4, TSA_LEAF.issuer.public_bytes())  # directoryName
    assert serial == enc_int(TSA_LEAF.serial_number)
    # The signature: over the SET-tagged attributes, by the leaf's key.
    TSA_LEAF.public_key().verify(reply.signature, reply.signed_attrs_as_set(), ec.ECDSA(hashes.SHA256()))


def tsa_chain_valid_at(when: dt.datetime) -> None:
    """The TSA leaf chains to the TSA root as webpki checks it (rustls-webpki's
    verify_for_usage with the timeStamping EKU required): the signature,
    validity and EKU checked here, then (cryptography >= 45) cryptography's
    webpki-style verifier with that EKU required and, as webpki does not
    ask for one, no SAN required."""
    TSA_LEAF.verify_directly_issued_by(TSA_ROOT)
    TSA_ROOT.verify_directly_issued_by(TSA_ROOT)
    for cert in (TSA_LEAF, TSA_ROOT):
        assert cert.version == x509.Version.v3
        if not cert.not_valid_before_utc <= when <= cert.not_valid_after_utc:
            raise ValueError("a TSA certificate is not valid at genTime")
    assert ExtendedKeyUsageOID.TIME_STAMPING in TSA_LEAF.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert TSA_ROOT.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    try:
        from cryptography.x509.verification import Criticality, ExtensionPolicy, PolicyBuilder, Store
    except ImportError:  # cryptography < 45
        return

    def time_stamping(_policy, _cert, ext) -> None:
        if ext is None or ExtendedKeyUsageOID.TIME_STAMPING not in ext:
            raise ValueError("the TSA leaf has no timeStamping EKU")

    ee = (
        ExtensionPolicy.webpki_defaults_ee()
        .require_present(x509.ExtendedKeyUsage, Criticality.AGNOSTIC, time_stamping)
        .may_be_present(x509.SubjectAlternativeName, Criticality.AGNOSTIC, None)
    )
    verifier = (
        PolicyBuilder()
        .store(Store([TSA_ROOT]))
        .time(when)
        .extension_policies(ca_policy=ExtensionPolicy.webpki_defaults_ca(), ee_policy=ee)
        .build_client_verifier()
    )
    assert verifier.verify(TSA_LEAF, []).chain[1] == TSA_ROOT


def sigstore_tsa_accepts(response: bytes, signature: bytes) -> None:
    """The checks of sigstore-verify 0.15.1's TSA verifier
    (sigstore-tsa 0.15.1, verify.rs `verify_timestamp_for_authority`),
    restated: raises AssertionError (or InvalidSignature) where it would
    refuse. It reads: the TimeStampResp (status granted or grantedWithMods,
    a token), a ContentInfo of signedData whose eContentType is TSTInfo;
    the imprint (SHA-256/384/512) must be the hash of the bundle's signature
    bytes; the FIRST SignerInfo's sid (IssuerAndSerialNumber or
    SubjectKeyIdentifier) must name the authority's leaf from the trusted
    root (embedded certificates are never used); signedAttrs must be present
    with exactly one messageDigest equal to the SignerInfo's digestAlgorithm
    hash of the TSTInfo; the signature must verify over the attributes
    re-encoded as a DER SET (sorted) with the leaf's P-256 or P-384 key and
    that same digest algorithm (the signatureAlgorithm field is not read);
    the leaf must chain to the authority's root (webpki, timeStamping EKU
    required) at genTime; genTime must fall in the authority's validFor.
    Its DER parser (der 0.7, const-oid 0.9) also wants: GeneralizedTime
    YYYYMMDDHHMMSSZ, OIDs whose second arc is at most 39, no explicit
    DEFAULT values (TSTInfo.ordering left out)."""
    reply = Reply(response)
    hashes_by_oid = {
        OID_SHA256: hashlib.sha256,
        "2.16.840.1.101.3.4.2.2": hashlib.sha384,
        "2.16.840.1.101.3.4.2.3": hashlib.sha512,
    }
    (_, alg, _), (_, _, hashed) = items(one(reply.imprint, 0x30))
    ((_, _, alg_oid), *_params) = items(one(alg, 0x30))
    assert oid(alg_oid) in hashes_by_oid, "unsupported imprint hash"
    assert hashes_by_oid[oid(alg_oid)](signature).digest() == hashed, "imprint is not the hash of the signature"
    assert re.fullmatch(r"\d{14}Z", reply.gen_time), "GeneralizedTime must be YYYYMMDDHHMMSSZ"
    when = dt.datetime.strptime(reply.gen_time, "%Y%m%d%H%M%SZ").replace(tzinfo=dt.timezone.utc)
    assert (reply.sid_issuer, reply.sid_serial) == (TSA_LEAF.issuer.public_bytes(), TSA_LEAF.serial_number), (
        "the CMS signer is not the trusted TSA leaf"
    )
    digest_oid = oid(items(one(reply.digest_alg, 0x30))[0][2])
    assert digest_oid in hashes_by_oid
    (md,) = reply.attributes[OID_MESSAGE_DIGEST]
    assert one(md, 0x04) == hashes_by_oid[digest_oid](reply.tst_der).digest(), "messageDigest mismatch"
    resorted = enc(0x31, sorted_set([a for _, a, _ in items(reply.signed_attrs)]))
    key = TSA_LEAF.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name in ("secp256r1", "secp384r1")
    chosen = {OID_SHA256: hashes.SHA256(), "2.16.840.1.101.3.4.2.2": hashes.SHA384()}[digest_oid]
    key.verify(reply.signature, resorted, ec.ECDSA(chosen))
    tsa_chain_valid_at(when)
    window = TSA_ENTRY["validFor"]
    start = dt.datetime.fromisoformat(window["start"].replace("Z", "+00:00"))
    end = dt.datetime.fromisoformat(window["end"].replace("Z", "+00:00")) if "end" in window else None
    assert start <= when and (end is None or when <= end), "genTime outside the authority's validFor"
    for _, whole, contents in reply.tst:
        if whole[0] == 0x06:
            arcs = oid(contents).split(".")
            assert int(arcs[0]) < 2 or int(arcs[1]) <= 39, "const-oid 0.9 refuses a second arc above 39"


class Tsa:
    """The stand-in's timestamp endpoint, as raw bytes."""

    def __init__(self, s: Standin) -> None:
        self.url = s.url + TSA_PATH

    def post(self, body: bytes, content_type: str = "application/timestamp-query") -> tuple[int, str, bytes]:
        req = urllib.request.Request(self.url, data=body, method="POST")
        req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.headers["Content-Type"], resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers["Content-Type"], e.read()

    def stamp(self, signature: bytes, **request: object) -> bytes:
        status, content_type, body = self.post(timestamp_request(hashlib.sha256(signature).digest(), **request))
        assert status == 200 and content_type == "application/timestamp-reply", (status, body)
        return body


def flip_last(b: bytes) -> bytes:
    return b[:-1] + bytes([b[-1] ^ 1])


def test_timestamp_answer_parses_and_verifies(tmp_path: Path) -> None:
    s = Standin(tmp_path, "--fixed-time", str(FIXED))
    try:
        tsa = Tsa(s)
        signature = b"a signature, as bytes"
        digest = hashlib.sha256(signature).digest()
        nonce = 0x1988D59F676A2883
        reply = Reply(tsa.stamp(signature, nonce=nonce))
        check_reply(reply, digest, nonce=nonce, gen_time=FIXED_GENTIME, cert_req=True)
        assert reply.serial == 1
        assert reply.certificates == [TSA_LEAF.public_bytes(serialization.Encoding.DER)]
        sigstore_tsa_accepts(reply.der, signature)

        # No certReq, no nonce, no NULL parameters: no certificates, no nonce,
        # the imprint as sent; the next serial.
        status, _, body = tsa.post(timestamp_request(digest, cert_req=False, null_params=False))
        assert status == 200
        bare = Reply(body)
        assert bare.certificates == [] and bare.nonce is None and bare.serial == 2
        assert bare.imprint == enc(0x30, enc(0x30, enc_oid(OID_SHA256)) + enc(0x04, digest))
        sigstore_tsa_accepts(bare.der, signature)  # sigstore-verify needs no embedded certificate

        # The checks are not vacuous: a flipped signature byte, a TSTInfo
        # byte changed (genTime's last second digit), a timestamp over other bytes.
        with pytest.raises(InvalidSignature):
            check_reply(Reply(flip_last(reply.der)), digest, nonce=nonce, gen_time=FIXED_GENTIME, cert_req=True)
        with pytest.raises(InvalidSignature):
            sigstore_tsa_accepts(flip_last(reply.der), signature)
        gen_time = reply.tst[4][1]
        altered = reply.der.replace(gen_time, gen_time[:-2] + bytes([gen_time[-2] ^ 1]) + gen_time[-1:])
        assert altered.count(gen_time[:-2]) == 1 and Reply(altered).gen_time == "20250615150641Z"
        with pytest.raises(AssertionError, match="messageDigest"):
            sigstore_tsa_accepts(altered, signature)
        with pytest.raises(AssertionError, match="imprint"):
            sigstore_tsa_accepts(reply.der, b"another signature")
        with pytest.raises(Exception):
            tsa_chain_valid_at(dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc))  # before the TSA's validity
    finally:
        s.stop()


def test_timestamp_verified_by_rfc3161_client_and_openssl(standin: Standin, tmp_path: Path) -> None:
    """Two independent RFC 3161 verifiers: rfc3161-client (sigstore-python's,
    if installed) and `openssl ts -verify` (if on PATH; it also checks the
    ESS signingCertificateV2 attribute against the signer)."""
    tsa = Tsa(standin)
    signature = b"timestamped by the stand-in"
    nonce = 0x7FEDCBA987654321
    response = tsa.stamp(signature, nonce=nonce)
    checked = 0
    try:
        from rfc3161_client import VerifierBuilder, decode_timestamp_response
        from rfc3161_client.errors import VerificationError as TsaVerificationError
    except ImportError:
        pass
    else:
        verifier = VerifierBuilder().tsa_certificate(TSA_LEAF).add_root_certificate(TSA_ROOT).build()
        parsed = decode_timestamp_response(response)
        assert parsed.tst_info.nonce == nonce
        assert verifier.verify_message(parsed, signature)
        with pytest.raises(TsaVerificationError):
            verifier.verify_message(parsed, b"other bytes")
        with pytest.raises((TsaVerificationError, ValueError)):
            verifier.verify_message(decode_timestamp_response(flip_last(response)), signature)
        checked += 1
    openssl = shutil.which("openssl")
    if openssl:
        pem = serialization.Encoding.PEM
        files = {
            "data": signature,
            "reply.tsr": response,
            "flipped.tsr": flip_last(response),
            "root.pem": TSA_ROOT.public_bytes(pem),
            "leaf.pem": TSA_LEAF.public_bytes(pem),
        }
        for name_, data in files.items():
            (tmp_path / name_).write_bytes(data)

        def verify(reply: str) -> int:
            return subprocess.run(
                [openssl, "ts", "-verify", "-data", "data", "-in", reply, "-CAfile", "root.pem", "-untrusted", "leaf.pem"],
                cwd=tmp_path,
                capture_output=True,
            ).returncode

        assert verify("reply.tsr") == 0
        assert verify("flipped.tsr") != 0
        checked += 1
    if not checked:
        pytest.skip("neither rfc3161-client nor openssl is available")


def test_timestamp_refusals(standin: Standin) -> None:
    tsa = Tsa(standin)
    digest = hashlib.sha256(b"sig").digest()
    good = timestamp_request(digest, nonce=5)
    nonminimal_nonce = good.replace(enc_int(5), b"\x02\x02\x00\x05")
    refused = {
        "not DER": b"not a timestamp request",
        "trailing bytes": good + b"\x00",
        "SHA-1": timestamp_request(hashlib.sha1(b"sig").digest(), algorithm="1.3.14.3.2.26"),
        "short digest": timestamp_request(digest[:31]),
        "version 2": timestamp_request(digest, version=2),
        "extensions": timestamp_request(digest, extra=enc(0xA0, b"")),
        "another policy": timestamp_request(digest, policy="1.2.3.4"),
        "non-minimal nonce": nonminimal_nonce,
        "certReq twice": timestamp_request(digest, extra=b"\x01\x01\xff"),
    }
    for what, body in refused.items():
        status, content_type, answer = tsa.post(body)
        assert status == 400, what
        assert content_type.startswith("text/plain") and answer, what
    # The policy it names is accepted.
    assert tsa.post(timestamp_request(digest, policy="1.3.6.1.4.1.32473.3161.1"))[0] == 200
    status, _, answer = tsa.post(good, content_type="application/json")
    assert status == 400 and b"Content-Type" in answer
    # The refusals used no serial number.
    assert Reply(tsa.stamp(b"sig", nonce=5)).serial == 2


def test_tsa_and_rekor2_fail_first_are_counted_apart(tmp_path: Path) -> None:
    s = Standin(tmp_path, "--tsa-fail-first", "2", "--rekor2-fail-first", "1")
    try:
        tsa = Tsa(s)
        request = timestamp_request(hashlib.sha256(b"sig").digest(), nonce=1)
        status, content_type, body = tsa.post(request)
        assert status == 503 and content_type.startswith("text/plain") and b"--tsa-fail-first" in body
        key = ec.generate_private_key(ec.SECP256R1())
        entry = v2_request(key, b"after the outages\n")
        status, _, answer = s.request("POST", REKOR_V2_PATH, entry)
        assert status == 503 and answer["code"] == 14 and "--rekor2-fail-first" in answer["message"]
        # The other endpoints are not in an outage.
        assert s.post(hashedrekord(key, b"v1 entry\n"))[0] == 201
        assert tsa.post(request)[0] == 503
        assert Reply(tsa.stamp(b"sig", nonce=1)).serial == 1  # the outages issued nothing
        status, _, answer = s.request("POST", REKOR_V2_PATH, entry)
        assert status == 201
        assert check_v2_entry(answer, entry) == (5, 6)  # the outage logged nothing
    finally:
        s.stop()


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def v2_request(
    key: ec.EllipticCurvePrivateKey, artifact: bytes, *, certificate: bytes | None = None, signed: bytes | None = None
) -> dict:
    """A Rekor v2 CreateEntryRequest for a hashedrekord v0.0.2 (as
    sigstore-rekor's HashedRekordV2 serializes it): the digest, the DER
    signature, and the SPKI key (or the certificate, keyless)."""
    signature = key.sign(artifact if signed is None else signed, ec.ECDSA(hashes.SHA256()))
    if certificate is None:
        spki = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        verifier = {"keyDetails": "PKIX_ECDSA_P256_SHA_256", "publicKey": {"rawBytes": b64(spki)}}
    else:
        verifier = {"keyDetails": "PKIX_ECDSA_P256_SHA_256", "x509Certificate": {"rawBytes": b64(certificate)}}
    return {
        "hashedRekordRequestV002": {
            "digest": b64(hashlib.sha256(artifact).digest()),
            "signature": {"content": b64(signature), "verifier": verifier},
        }
    }


def check_checkpoint_v2(text: str) -> tuple[int, bytes]:
    """Verifies the C2SP signed note with the v2 log's Ed25519 key from
    trusted_root.json; returns (size, root)."""
    note, sigs = text.split("\n\n", 1)
    lines = note.split("\n")
    assert len(lines) == 3 and lines[0] == "rekor-v2.example.test"
    (sig_line,) = sigs.rstrip("\n").split("\n")
    dash, name_, blob = sig_line.split(" ")
    assert dash == "\u2014" and name_ == "rekor-v2.example.test"
    raw = base64.b64decode(blob)
    assert raw[:4] == REKOR_V2_ID[:4] and len(raw) == 4 + 64
    REKOR_V2_KEY.verify(raw[4:], (note + "\n").encode())
    return int(lines[1]), base64.b64decode(lines[2])


def check_v2_entry(entry: dict, request: dict) -> tuple[int, int]:
    """A Rekor v2 TransparencyLogEntry, as the real one answers (the fields
    of the conformance suite's rekor2-happy-path bundle, no integratedTime,
    no inclusionPromise), against the request it logs; returns (index, size)."""
    assert list(entry) == ["logIndex", "logId", "kindVersion", "inclusionProof", "canonicalizedBody"]
    assert entry["kindVersion"] == {"kind": "hashedrekord", "version": "0.0.2"}
    assert entry["logId"] == {"keyId": b64(REKOR_V2_ID)}
    proof = entry["inclusionProof"]
    assert list(proof) == ["logIndex", "rootHash", "treeSize", "hashes", "checkpoint"]
    assert all(isinstance(proof[k], str) for k in ("logIndex", "treeSize")) and isinstance(entry["logIndex"], str)
    assert proof["logIndex"] == entry["logIndex"]
    # The body: the request's content as a hashedrekord v0.0.2 entry, RFC 8785
    # JSON (sorted keys: the key order of the real Rekor v2's bodies).
    req = request["hashedRekordRequestV002"]
    expected = {
        "apiVersion": "0.0.2",
        "kind": "hashedrekord",
        "spec": {
            "hashedRekordV002": {
                "data": {"algorithm": "SHA2_256", "digest": req["digest"]},
                "signature": {"content": req["signature"]["content"], "verifier": req["signature"]["verifier"]},
            }
        },
    }
    body = base64.b64decode(entry["canonicalizedBody"])
    assert body == json.dumps(expected, sort_keys=True, separators=(",", ":")).encode()
    index, size = int(entry["logIndex"]), int(proof["treeSize"])
    root = base64.b64decode(proof["rootHash"])
    leaf = hashlib.sha256(b"\x00" + body).digest()
    path = [base64.b64decode(h) for h in proof["hashes"]]
    assert path, "a trivial proof: the tree should start with dummy leaves"
    assert root_from_proof(index, size, leaf, path) == root
    assert check_checkpoint_v2(proof["checkpoint"]["envelope"]) == (size, root)
    return index, size


def test_rekor_v2_entries_with_a_key_and_a_certificate(standin: Standin) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    request = v2_request(key, b"managed-key artifact\n")
    status, headers, entry = standin.request("POST", REKOR_V2_PATH, request)
    assert status == 201 and headers["Content-Type"] == "application/json"
    assert check_v2_entry(entry, request) == (5, 6)  # after five dummy leaves

    # Keyless: the certificate from the Fulcio stand-in in the verifier.
    leaf = issue(standin, key, claims())
    der = leaf.public_bytes(serialization.Encoding.DER)
    keyless_request = v2_request(key, b"keyless artifact\n", certificate=der)
    status, _, keyless_entry = standin.request("POST", REKOR_V2_PATH, keyless_request)
    assert status == 201
    assert check_v2_entry(keyless_entry, keyless_request) == (6, 7)

    # The first request again: deduplicated, its index, a proof against the new tree.
    status, _, again = standin.request("POST", REKOR_V2_PATH, request)
    assert status == 201 and check_v2_entry(again, request) == (5, 7)
    # The checkpoint endpoint: the latest signed note.
    with urllib.request.urlopen(standin.url + "/api/v2/checkpoint", timeout=10) as resp:
        assert resp.read().decode() == keyless_entry["inclusionProof"]["checkpoint"]["envelope"]
    # The v1 log is another tree: nothing was logged there.
    assert standin.request("GET", "/api/v1/log")[2]["treeSize"] == 5


def test_rekor_v2_refusals(standin: Standin) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    artifact = b"refused\n"

    def refused(request: object, word: str = "") -> None:
        data = request if isinstance(request, bytes) else json.dumps(request).encode()
        req = urllib.request.Request(standin.url + REKOR_V2_PATH, data=data, method="POST")
        req.add_header("Content-Type", "application/json")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        answer = json.loads(e.value.read())
        assert e.value.code == 400 and answer["code"] == 3 and word in answer["message"], answer

    refused(v2_request(key, artifact, signed=b"other bytes"), "signature")  # over other bytes
    other_key = v2_request(key, artifact)
    other_key["hashedRekordRequestV002"]["signature"]["verifier"] = v2_request(
        ec.generate_private_key(ec.SECP256R1()), artifact
    )["hashedRekordRequestV002"]["signature"]["verifier"]
    refused(other_key, "signature")  # by another key than the one given
    def edited(change) -> dict:  # noqa: E306
        r = v2_request(key, artifact)
        change(r["hashedRekordRequestV002"])
        return r

    refused(edited(lambda r: r["signature"]["verifier"].update(keyDetails="PKIX_ED25519")), "keyDetails")
    refused(edited(lambda r: r["signature"]["verifier"].update(x509Certificate={"rawBytes": "AAAA"})), "exactly one")
    refused(edited(lambda r: r["signature"]["verifier"].pop("publicKey")), "exactly one")
    refused(edited(lambda r: r.update(digest=b64(b"\0" * 31))), "32-byte")
    refused(edited(lambda r: r.pop("digest")), "digest")
    refused(edited(lambda r: r.update(extra=1)), "unknown")
    refused(edited(lambda r: r["signature"].update(content="not base64!")), "base64")
    p384 = ec.generate_private_key(ec.SECP384R1())
    refused(v2_request(p384, artifact), "P-256")
    refused(v2_request(key, artifact, certificate=b"not a certificate"), "x509Certificate")
    refused({"dsseRequestV002": {}}, "hashedRekordRequestV002")
    refused(b"{not json", "JSON")
    # Nothing was logged.
    request = v2_request(key, artifact)
    status, _, entry = standin.request("POST", REKOR_V2_PATH, request)
    assert status == 201 and check_v2_entry(entry, request) == (5, 6)


def test_fixed_time_timestamps_and_v2_entries_are_reproducible(tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    request = v2_request(key, b"reproducible v2\n")
    stamp = timestamp_request(hashlib.sha256(b"sig").digest(), nonce=42)
    answers = []
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        s = Standin(tmp_path / run, "--fixed-time", str(FIXED))
        try:
            status, _, timestamp = Tsa(s).post(stamp)
            assert status == 200
            status, _, entry = s.request("POST", REKOR_V2_PATH, request)
            assert status == 201
            answers.append((timestamp, entry))
        finally:
            s.stop()
    assert answers[0] == answers[1]
    assert Reply(answers[0][0]).gen_time == FIXED_GENTIME


def keyless_v2_bundle(s: Standin, artifact: bytes, c: dict, *, timestamped: bytes | None = None) -> dict:
    """The Rekor v2 keyless flow: an ephemeral key, a certificate, a
    signature, an RFC 3161 timestamp over SHA-256 of the signature (or of
    `timestamped`), a hashedrekord v0.0.2 with the certificate; the bundle
    (v0.3) built from the answers."""
    key = ec.generate_private_key(ec.SECP256R1())
    status, _, answer = signing_cert(s, cert_request(key, jwt(c), c["sub"].encode()))
    assert status == 201, answer
    leaf = check_chain(answer, key)
    der = leaf.public_bytes(serialization.Encoding.DER)
    signature = key.sign(artifact, ec.ECDSA(hashes.SHA256()))
    timestamp = Tsa(s).stamp(signature if timestamped is None else timestamped, nonce=int.from_bytes(os.urandom(8), "big"))
    request = {
        "hashedRekordRequestV002": {
            "digest": b64(hashlib.sha256(artifact).digest()),
            "signature": {
                "content": b64(signature),
                "verifier": {"keyDetails": "PKIX_ECDSA_P256_SHA_256", "x509Certificate": {"rawBytes": b64(der)}},
            },
        }
    }
    status, _, entry = s.request("POST", REKOR_V2_PATH, request)
    assert status == 201, entry
    check_v2_entry(entry, request)
    return {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {
            "certificate": {"rawBytes": b64(der)},
            "tlogEntries": [entry],
            "timestampVerificationData": {"rfc3161Timestamps": [{"signedTimestamp": b64(timestamp)}]},
        },
        "messageSignature": {
            "messageDigest": {"algorithm": "SHA2_256", "digest": b64(hashlib.sha256(artifact).digest())},
            "signature": b64(signature),
        },
    }


def bundle_timestamp(bundle: dict) -> bytes:
    (ts,) = bundle["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"]
    return base64.b64decode(ts["signedTimestamp"])


def with_timestamp(bundle: dict, response: bytes) -> dict:
    b = json.loads(json.dumps(bundle))
    b["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"] = [{"signedTimestamp": b64(response)}]
    return b


def with_flipped_checkpoint_signature(bundle: dict) -> dict:
    b = json.loads(json.dumps(bundle))
    proof = b["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]
    note, sig_line = proof["checkpoint"]["envelope"].split("\n\n", 1)
    dash, name_, blob = sig_line.rstrip("\n").split(" ")
    proof["checkpoint"]["envelope"] = f"{note}\n\n{dash} {name_} {b64(flip_last(base64.b64decode(blob)))}\n"
    with pytest.raises(InvalidSignature):  # the flip is one the test's own check catches
        check_checkpoint_v2(proof["checkpoint"]["envelope"])
    return b


def test_sigstore_python_verifies_rekor_v2_bundles(standin: Standin) -> None:
    """End to end with an independent verifier: sigstore-python 4.x checks the
    bundle offline against trusted_root.json (the TSA's time is its only
    time: a Rekor v2 entry has no integrated time), for the identity; and
    refuses each attack. The timestamp is also held to sigstore-verify's
    TSA rules (restated in sigstore_tsa_accepts)."""
    try:
        from sigstore.errors import VerificationError
        from sigstore.models import InvalidBundle
        from sigstore.verify import Verifier  # noqa: F401
    except ImportError as e:
        pytest.skip(f"sigstore-python is not importable: {e}")

    artifact = b"evidence-ledger anchor, Rekor v2\n"
    bundle = keyless_v2_bundle(standin, artifact, claims())
    signature = base64.b64decode(bundle["messageSignature"]["signature"])
    sigstore_tsa_accepts(bundle_timestamp(bundle), signature)
    sigstore_python_verifies(bundle, artifact, "curator@example.org")
    uri = "https://ci.example.test/workflows/release.yml@refs/heads/main"
    sigstore_python_verifies(keyless_v2_bundle(standin, artifact, claims(uri, email=None)), artifact, uri)

    # Each attack, refused.
    with pytest.raises(VerificationError, match="checkpoint: invalid signature"):
        sigstore_python_verifies(with_flipped_checkpoint_signature(bundle), artifact, "curator@example.org")
    flipped_tsa = flip_last(bundle_timestamp(bundle))  # the last byte of the CMS signature
    with pytest.raises(InvalidSignature):
        sigstore_tsa_accepts(flipped_tsa, signature)
    # (A timestamp that does not verify is dropped: then no time is left.)
    with pytest.raises(VerificationError, match="verified time"):
        sigstore_python_verifies(with_timestamp(bundle, flipped_tsa), artifact, "curator@example.org")
    other = keyless_v2_bundle(standin, artifact, claims(), timestamped=b"another signature")
    with pytest.raises(AssertionError, match="imprint"):
        sigstore_tsa_accepts(bundle_timestamp(other), base64.b64decode(other["messageSignature"]["signature"]))
    with pytest.raises(VerificationError, match="verified time"):
        sigstore_python_verifies(other, artifact, "curator@example.org")
    # The good timestamp of another bundle: over another signature too.
    with pytest.raises(VerificationError, match="verified time"):
        sigstore_python_verifies(with_timestamp(other, bundle_timestamp(bundle)), artifact, "curator@example.org")
    # No timestamp at all: no verified time.
    untimed = json.loads(json.dumps(bundle))
    del untimed["verificationMaterial"]["timestampVerificationData"]
    with pytest.raises(InvalidBundle, match="signed timestamp"):
        sigstore_python_verifies(untimed, artifact, "curator@example.org")
    with pytest.raises(VerificationError):
        sigstore_python_verifies(bundle, artifact, "someone-else@example.org")
    with pytest.raises(VerificationError):
        sigstore_python_verifies(bundle, b"other bytes\n", "curator@example.org")
    # Unchanged, it still verifies (the attacks worked on copies).
    sigstore_python_verifies(bundle, artifact, "curator@example.org")


def test_sigstore_python_signs_with_rekor_v2_and_the_tsa(standin: Standin) -> None:
    """sigstore-python's own signer, configured the way its users configure it
    (a ClientTrustConfig: the synthetic trusted root and a signing config
    naming the stand-ins: Fulcio, Rekor v2, the TSA), through both new
    endpoints; then its verifier. A check of the wire shapes by another
    client than the ledger's (skipped if those internal modules moved)."""
    try:
        from sigstore.models import ClientTrustConfig
        from sigstore.oidc import IdentityToken
        from sigstore.sign import SigningContext
    except ImportError as e:
        pytest.skip(f"sigstore-python's signer is not importable: {e}")

    def service(url: str, version: int) -> dict:
        return {"url": url, "majorApiVersion": version, "validFor": {"start": "2025-01-01T00:00:00Z"}, "operator": "synthetic.example.test"}

    config = ClientTrustConfig.from_json(
        json.dumps(
            {
                "mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
                "trustedRoot": json.loads((HERE / "trusted_root.json").read_text()),
                "signingConfig": {
                    "mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json",
                    "caUrls": [service(standin.url, 1)],
                    "oidcUrls": [],
                    "rekorTlogUrls": [service(standin.url, 2)],
                    "rekorTlogConfig": {"selector": "ANY"},
                    "tsaUrls": [service(standin.url + TSA_PATH, 1)],
                    "tsaConfig": {"selector": "ANY"},
                },
            }
        )
    )
    context = SigningContext.from_trust_config(config)
    artifact = b"signed by sigstore-python through Rekor v2 and the TSA stand-ins\n"
    with context.signer(IdentityToken(jwt(claims(nbf=int(time.time()))))) as signer:
        bundle = json.loads(signer.sign_artifact(artifact).to_json())
    (entry,) = bundle["verificationMaterial"]["tlogEntries"]
    assert entry["kindVersion"] == {"kind": "hashedrekord", "version": "0.0.2"}
    assert "integratedTime" not in entry or entry["integratedTime"] in ("0", 0)
    signature = base64.b64decode(bundle["messageSignature"]["signature"])
    sigstore_tsa_accepts(bundle_timestamp(bundle), signature)
    from sigstore.models import Bundle
    from sigstore.verify import Verifier, policy

    Verifier(trusted_root=config.trusted_root).verify_artifact(
        artifact, Bundle.from_json(json.dumps(bundle)), policy.Identity(identity="curator@example.org", issuer=ISSUER)
    )
    assert standin.request("GET", "/api/v1/log")[2]["treeSize"] == 5  # nothing went to v1


def test_rekor_v2_fixture_bundle(standin: Standin) -> None:
    """gen.py's rekor-v2.bundle.json: the same checks, from the committed file."""
    bundle = json.loads((HERE / "rekor-v2.bundle.json").read_text())
    statement = (HERE / "statement.txt").read_bytes()
    (entry,) = bundle["verificationMaterial"]["tlogEntries"]
    body = json.loads(base64.b64decode(entry["canonicalizedBody"]))
    request = {"hashedRekordRequestV002": {"digest": body["spec"]["hashedRekordV002"]["data"]["digest"],
                                           "signature": body["spec"]["hashedRekordV002"]["signature"]}}
    assert check_v2_entry(entry, request) == (3, 5)
    signature = base64.b64decode(bundle["messageSignature"]["signature"])
    reply = Reply(bundle_timestamp(bundle))
    assert reply.gen_time == "20250601120630Z"  # T0 + 6 min 30 s
    sigstore_tsa_accepts(reply.der, signature)
    try:
        from sigstore.errors import VerificationError
    except ImportError:
        return
    sigstore_python_verifies(bundle, statement, "curator@example.org")
    with pytest.raises(VerificationError):
        sigstore_python_verifies(bundle, (HERE / "other-statement.txt").read_bytes(), "curator@example.org")
