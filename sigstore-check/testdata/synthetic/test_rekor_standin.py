"""Self-test of rekor_standin.py (the loopback stand-ins for the Rekor v1 and
Fulcio v2 APIs; NOT REKOR, NOT FULCIO).

Starts the stand-in as a subprocess on a port file and checks its answers
with code written here, not imported from gen.py: the inclusion proof
(RFC 9162 §2.1.3.2) against rootHash, the checkpoint and the SET against
the Rekor key read from trusted_root.json; the certificates it issues
against the CA chain and the CT key read from trusted_root.json (only the
precertificate's TBS is rebuilt with gen.strip_sct and the RFC 6962 signed
struct with gen.sct_signed_data). Keyless bundles made from its answers are
also checked by sigstore-python's verifier when sigstore-python is
installed (skipped otherwise).

    python3 -m pytest -q -p no:cacheprovider test_rekor_standin.py
"""

from __future__ import annotations

import base64
import datetime as dt
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
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, ObjectIdentifier

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "rekor_standin.py"

sys.dont_write_bytecode = True  # importing gen leaves no __pycache__ beside the fixtures
sys.path.insert(0, str(HERE))
import gen  # noqa: E402  (strip_sct and sct_signed_data only; importing it writes nothing)


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
