#!/usr/bin/env python3
"""LOOPBACK STAND-INS for the Rekor v1 write API and the Fulcio v2 certificate
API. NOT REKOR. NOT FULCIO. TEST-ONLY.

They sign with the SYNTHETIC keys of gen.py (the Rekor log key, the Fulcio
intermediate, the CT log key: all derived from public labels, so anyone can
sign with them) and implement only what the ledger's tests need, so the
ledger's anchor publication can be exercised end to end, offline, against
the synthetic trusted_root.json: with a managed key (a hashedrekord with a
PEM public key), or keyless (an ephemeral key, a short-lived certificate
from the Fulcio stand-in for an OIDC token, then a hashedrekord carrying
that certificate).

* POST /api/v1/log/entries with a hashedrekord v0.0.1 entry (the JSON
  sigstore-rekor's `HashedRekord` serializes):

      {"apiVersion": "0.0.1", "kind": "hashedrekord",
       "spec": {"data": {"hash": {"algorithm": "sha256", "value": <hex>}},
                "signature": {"content": <base64 DER ECDSA signature>,
                              "publicKey": {"content": <base64 of a PEM
                                            PUBLIC KEY or one CERTIFICATE>}}}}

  The signature is VERIFIED over the digest (ECDSA, prehashed SHA-256) with
  the key (or the certificate's key; the certificate itself is not checked,
  as Rekor v1 does not); a bad request or signature is answered 400
  {"code": 400, "message": ...} as Rekor does, an entry already in the log
  409 (Location: its entry). Otherwise the canonical body (the PEM
  re-encoded, as Rekor canonicalizes it; RFC 8785 JSON) is appended as a
  leaf of an in-memory RFC 6962 tree that starts with DUMMY_LEAVES dummy
  leaves, and the answer is 201 with the v1 entry map sigstore-rekor's
  `LogEntry` parses:

      {"<uuid = hex leaf hash>": {
         "body": <base64 canonical body>,
         "integratedTime": <unix seconds>,
         "logID": <hex SHA-256 of the Rekor key's SPKI>,
         "logIndex": n,
         "verification": {
           "inclusionProof": {"checkpoint": <signed note>, "hashes": [<hex>],
                              "logIndex": n, "rootHash": <hex>,
                              "treeSize": size},
           "signedEntryTimestamp": <base64 DER ECDSA over the canonical JSON
                                    {body, integratedTime, logID, logIndex}>}}}

* GET /api/v1/log/entries/<uuid> and GET /api/v1/log/entries?logIndex=n:
  the same map, with a proof against the current tree.
* GET /api/v1/log: {"rootHash", "signedTreeHead", "treeID", "treeSize"}.

* POST /api/v2/signingCert, the Fulcio v2 request (JSON):

      {"credentials": {"oidcIdentityToken": <JWT>},
       "publicKeyRequest": {"publicKey": {"algorithm": "ECDSA",
                                          "content": <PEM SubjectPublicKeyInfo, P-256>},
                            "proofOfPossession": <base64 DER ECDSA-SHA256
                                                  signature over the UTF-8
                                                  bytes of the token's sub>}}

  (or, as Fulcio also takes it, {"certificateSigningRequest": <base64 of a
  PEM CSR>} in place of publicKeyRequest, the CSR's own signature being the
  proof; and the token in an `Authorization: Bearer` header in place of
  credentials). THE TOKEN'S SIGNATURE IS NOT CHECKED: the payload is
  decoded and read as it is (real Fulcio verifies the token against its
  issuer's published keys; here anyone can mint a token, which is the
  point for tests). Read: `iss` (gen.ISSUER or GitHub Actions' issuer
  https://token.actions.githubusercontent.com, else 401), `sub` (a
  non-empty string), `exp` (a number after the stand-in's clock, else
  401), `email` (optional) and `email_verified` (if present, must be
  true). 401 and 400 answers are {"code": 401|400, "message": ...}. The
  proof of possession is VERIFIED with the request's key (P-256 ECDSA only;
  400 otherwise). The certificate is gen.make_leaf's, for the request's
  key: SAN the `email` claim (RFC 822 name) if present; for GitHub
  Actions' issuer, the URI https://github.com/<job_workflow_ref> as Fulcio
  names a workflow (the claim is required, else 400); else `sub` (a URI
  SAN; it must start with https://, else 400); OIDC issuer extensions =
  `iss`; notBefore the stand-in's clock in whole seconds, ten minutes of
  validity; an embedded SCT signed by the synthetic CT key over the
  precertificate; a serial derived from a per-process counter and the key.
  The answer is 201:

      {"signedCertificateEmbeddedSct": {"chain": {"certificates":
          [<leaf PEM>, <intermediate PEM>, <root PEM>]}}}

Not implemented: other entry kinds, search, consistency proofs, sharding,
tree-ID-prefixed UUIDs, persistence (the log lives in memory); of Fulcio,
the token's signature, its audience, issuers other than those two, the
extensions Fulcio adds for a GitHub workflow (repository, ref, trigger),
other key types, detached SCTs, the trust bundle and configuration
endpoints, the v1 API.

Usage:

    python3 rekor_standin.py --port-file PATH [--fail-first N]
        [--fulcio-fail-first N] [--host 127.0.0.1] [--fixed-time UNIX]
        [--verbose]

It binds a free loopback port, writes the port number (decimal digits, no
newline) to PATH once listening (a temporary name, then a rename), and
serves until killed. --fail-first N answers the first N POSTs of Rekor
entries 503, --fulcio-fail-first N the first N POSTs to signingCert (an
outage, for retry and catch-up tests), before looking at them.
--fixed-time is the stand-in's clock: every integratedTime, every
certificate's notBefore, and the time tokens must not have expired by (the
default is the current time); with it, a given sequence of requests gets
byte-identical answers (ECDSA here is RFC 6979 deterministic).

Needs Python 3.11 and `cryptography` >= 44, like gen.py.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import ipaddress
import json
import math
import os
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

sys.dont_write_bytecode = True  # leave no __pycache__ beside the fixtures
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cryptography import x509  # noqa: E402
from cryptography.exceptions import InvalidSignature  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, utils  # noqa: E402

import gen  # noqa: E402

DUMMY_LEAVES = 5
# The dummy leaves' integrated times: fixed, before everything else.
DUMMY_TIME = int(gen.T0.timestamp()) - 3600
MAX_BODY = 1 << 20
HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


class BadEntry(Exception):
    """A request Rekor would refuse with 400."""


def b64decode_strict(s: object, what: str) -> bytes:
    if not isinstance(s, str):
        raise BadEntry(f"{what} must be a base64 string")
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError) as e:
        raise BadEntry(f"{what} is not valid base64: {e}") from None


def field(obj: object, *path: str) -> object:
    for name in path:
        if not isinstance(obj, dict) or name not in obj:
            raise BadEntry(f"missing field {'.'.join(path)}")
        obj = obj[name]
    return obj


def canonical_body(request: object) -> bytes:
    """Validates a hashedrekord v0.0.1 request, verifies its signature and
    returns the canonical body Rekor would store."""
    if field(request, "kind") != "hashedrekord":
        raise BadEntry("this stand-in accepts only kind hashedrekord")
    if field(request, "apiVersion") != "0.0.1":
        raise BadEntry("this stand-in accepts only hashedrekord apiVersion 0.0.1")
    algorithm = field(request, "spec", "data", "hash", "algorithm")
    value = field(request, "spec", "data", "hash", "value")
    if algorithm != "sha256":
        raise BadEntry("this stand-in accepts only sha256 digests")
    if not isinstance(value, str) or not HEX64.match(value):
        raise BadEntry("spec.data.hash.value must be 64 hex digits")
    signature = b64decode_strict(field(request, "spec", "signature", "content"), "signature content")
    pem = b64decode_strict(
        field(request, "spec", "signature", "publicKey", "content"), "public key content"
    )

    # Like Rekor: a PEM certificate or a PEM public key, re-encoded on the
    # way into the body. (Rekor also takes a PEM chain, and logs it all;
    # sigstore clients send the leaf alone, and so must a test here.)
    if pem.count(b"-----BEGIN CERTIFICATE-----") > 1:
        raise BadEntry("this stand-in accepts one PEM certificate, not a chain")
    try:
        if b"-----BEGIN CERTIFICATE-----" in pem:
            cert = x509.load_pem_x509_certificate(pem)
            public_key = cert.public_key()
            canonical_pem = cert.public_bytes(serialization.Encoding.PEM)
        else:
            public_key = serialization.load_pem_public_key(pem)
            canonical_pem = public_key.public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
    except (ValueError, TypeError) as e:
        raise BadEntry(f"invalid public key: {e}") from None
    if not isinstance(public_key, ec.EllipticCurvePublicKey):
        raise BadEntry("this stand-in verifies only ECDSA keys")
    try:
        public_key.verify(
            signature, bytes.fromhex(value), ec.ECDSA(utils.Prehashed(hashes.SHA256()))
        )
    except (InvalidSignature, ValueError):
        raise BadEntry(
            "verifying signature: invalid signature when validating ASN.1 encoded signature"
        ) from None
    return gen.hashedrekord_body_pem(canonical_pem, signature, value)


def clock(fixed_time: int | None) -> int:
    """The stand-in's time in whole seconds: --fixed-time, else now."""
    return fixed_time if fixed_time is not None else int(time.time())


# --------------------------------------------------------------------------
# The Fulcio v2 stand-in (NOT FULCIO): POST /api/v2/signingCert
# --------------------------------------------------------------------------


class Refused(Exception):
    """A signingCert request Fulcio would refuse: 400 or 401."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def bad_request(message: str) -> Refused:
    return Refused(400, message)


def unauthenticated(message: str) -> Refused:
    return Refused(401, message)


class PublicOnly:
    """gen.leaf_builder and gen.spki call `.public_key()` on the leaf key and
    nothing else: this carries a public key (from a request) in its place."""

    def __init__(self, public_key: ec.EllipticCurvePublicKey) -> None:
        self._public_key = public_key

    def public_key(self) -> ec.EllipticCurvePublicKey:
        return self._public_key


def b64decode_lenient(s: object, what: str, error=bad_request) -> bytes:
    """Base64 as protobuf's JSON mapping reads bytes: standard or URL-safe,
    with or without padding."""
    if not isinstance(s, str) or not re.fullmatch(r"[A-Za-z0-9+/_-]*={0,2}", s):
        raise error(f"{what} is not base64")
    s = s.rstrip("=")
    if len(s) % 4 == 1:
        raise error(f"{what} is not base64")
    try:
        return base64.b64decode(s.replace("-", "+").replace("_", "/") + "=" * (-len(s) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise error(f"{what} is not base64") from None


def token_claims(token: object, now: int) -> dict:
    """The claims of a JWT, read WITHOUT checking its signature (NOT FULCIO:
    Fulcio verifies the token against its issuer's keys), then checked as
    the module's docstring says; 401 on any fault of the token."""
    if not isinstance(token, str) or token.count(".") != 2:
        raise unauthenticated("the identity token is not a JWT (three base64url parts)")
    header_b64, payload_b64, _signature_not_checked = token.split(".")
    claims = {}
    for part, what in ((header_b64, "header"), (payload_b64, "payload")):
        raw = b64decode_lenient(part, f"the identity token's {what}", unauthenticated)
        try:
            obj = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            obj = None
        if not isinstance(obj, dict):
            raise unauthenticated(f"the identity token's {what} is not a JSON object")
        claims = obj
    iss = claims.get("iss")
    if not isinstance(iss, str):
        raise unauthenticated("the identity token has no iss claim")
    if iss not in ISSUERS:
        raise unauthenticated(
            f"the identity token's issuer {iss!r} is not trusted (this stand-in trusts {', '.join(ISSUERS)})"
        )
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub:
        raise unauthenticated("the identity token has no sub claim")
    exp = claims.get("exp")
    if isinstance(exp, bool) or not isinstance(exp, (int, float)) or not math.isfinite(exp):
        raise unauthenticated("the identity token has no numeric exp claim")
    if exp <= now:
        raise unauthenticated(f"the identity token expired (exp {exp}, the stand-in's time {now})")
    if "email" in claims:
        if not isinstance(claims["email"], str):
            raise unauthenticated("the identity token's email claim is not a string")
        if claims.get("email_verified", True) is not True:
            raise unauthenticated("the identity token's email is not verified")
    return claims


#: GitHub Actions' token issuer: Fulcio names its workflows by URI.
GITHUB_ACTIONS = "https://token.actions.githubusercontent.com"
#: The issuers whose tokens this stand-in takes.
ISSUERS = (gen.ISSUER, GITHUB_ACTIONS)

PRINTABLE_ASCII = re.compile(r"[!-~]+")
EMAIL = re.compile(r"[^@]+@[^@]+")


def san_of(claims: dict) -> str:
    """The identity the certificate names, as gen.leaf_builder reads it: an
    e-mail address (RFC 822 SAN), else a URI starting with https:// (for a
    GitHub Actions token, its workflow's)."""
    email = claims.get("email")
    if email is not None:
        if not (PRINTABLE_ASCII.fullmatch(email) and EMAIL.fullmatch(email)) or email.startswith("https://"):
            raise bad_request(f"the email claim {email!r} is not an ASCII e-mail address")
        return email
    if claims["iss"] == GITHUB_ACTIONS:
        ref = claims.get("job_workflow_ref")
        if not (isinstance(ref, str) and PRINTABLE_ASCII.fullmatch(ref)):
            raise bad_request("a GitHub Actions token needs a job_workflow_ref claim (ASCII) to be named")
        return "https://github.com/" + ref
    sub = claims["sub"]
    if not (PRINTABLE_ASCII.fullmatch(sub) and sub.startswith("https://") and len(sub) > len("https://")):
        raise bad_request(
            "without an email claim, sub must be an https:// URI (ASCII) to be named in the certificate"
        )
    return sub


def p256_key(key: object) -> ec.EllipticCurvePublicKey:
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise bad_request("this stand-in certifies only ECDSA P-256 keys")
    return key


def requested_key(request: dict, sub: str) -> ec.EllipticCurvePublicKey:
    """The request's public key, once its proof of possession verifies."""
    if "publicKeyRequest" in request:
        public_key = field(request, "publicKeyRequest", "publicKey")
        if not isinstance(public_key, dict) or public_key.get("algorithm", "ECDSA") != "ECDSA":
            raise bad_request("this stand-in certifies only ECDSA keys (publicKey.algorithm ECDSA)")
        content = field(public_key, "content")
        if not isinstance(content, str):
            raise bad_request("publicKeyRequest.publicKey.content must be a PEM string")
        try:
            key = p256_key(serialization.load_pem_public_key(content.encode()))
        except (ValueError, TypeError, UnicodeEncodeError) as e:
            raise bad_request(f"invalid public key: {e}") from None
        proof = b64decode_lenient(
            field(request, "publicKeyRequest", "proofOfPossession"), "proofOfPossession"
        )
        try:
            key.verify(proof, sub.encode(), ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, ValueError):
            raise bad_request("the proof of possession does not verify over the token's sub") from None
        return key
    if "certificateSigningRequest" in request:
        pem = b64decode_lenient(request["certificateSigningRequest"], "certificateSigningRequest")
        try:
            csr = x509.load_pem_x509_csr(pem)
            key = p256_key(csr.public_key())
            valid = csr.is_signature_valid
        except (ValueError, TypeError) as e:
            raise bad_request(f"invalid certificate signing request: {e}") from None
        if not valid:
            raise bad_request("the certificate signing request's signature does not verify")
        return key
    raise bad_request("missing publicKeyRequest (or certificateSigningRequest)")


class StandinFulcio:
    """The synthetic CA of gen.py issuing leaves for requests (NOT FULCIO)."""

    def __init__(self, fixed_time: int | None) -> None:
        self.fixed_time = fixed_time
        self.lock = threading.Lock()
        self.issued = 0
        pem = serialization.Encoding.PEM
        self.chain = [
            gen.make_intermediate().public_bytes(pem).decode(),
            gen.make_root().public_bytes(pem).decode(),
        ]

    def issue(self, request: object, bearer: str | None) -> dict:
        if not isinstance(request, dict):
            raise bad_request("the request is not a JSON object")
        credentials = request.get("credentials")
        token = credentials.get("oidcIdentityToken") if isinstance(credentials, dict) else None
        if token is None:
            token = bearer
        if token is None:
            raise unauthenticated("missing credentials.oidcIdentityToken (or an Authorization: Bearer token)")
        now = clock(self.fixed_time)
        claims = token_claims(token, now)
        key = requested_key(request, claims["sub"])
        identity = san_of(claims)
        with self.lock:
            n = self.issued
            self.issued += 1
        # The serial: a counter (unique in this process) and the key (so two
        # stand-ins, or two runs, give two keys two serials), through gen.serial.
        label = f"standin/{n}/{gen.sha256(gen.spki(key)).hex()}"
        not_before = gen.dt.datetime.fromtimestamp(now, gen.UTC)
        cert = gen.make_leaf(label, identity, PublicOnly(key), not_before, issuer=claims["iss"])
        leaf = cert.public_bytes(serialization.Encoding.PEM).decode()
        return {"signedCertificateEmbeddedSct": {"chain": {"certificates": [leaf, *self.chain]}}}


class StandinLog:
    """gen.Log, resealed after every append; one lock around everything."""

    def __init__(self, fixed_time: int | None) -> None:
        self.lock = threading.Lock()
        self.log = gen.Log()
        self.fixed_time = fixed_time
        self.index_of: dict[str, int] = {}
        for i in range(DUMMY_LEAVES):
            self.log.dummy(i, DUMMY_TIME + i)
        self.log.seal()

    def append(self, body: bytes) -> tuple[str, dict, bool]:
        """(uuid, entry, created): created False if the body was already logged."""
        uuid = gen.leaf_hash(body).hex()
        with self.lock:
            if uuid in self.index_of:
                return uuid, self._entry(self.index_of[uuid]), False
            t = clock(self.fixed_time)
            index = self.log.append(body, t)
            self.index_of[uuid] = index
            self.log.seal()
            return uuid, self._entry(index), True

    def entry_by_uuid(self, uuid: str) -> dict | None:
        with self.lock:
            index = self.index_of.get(uuid.lower())
            return None if index is None else self._entry(index)

    def entry_by_index(self, index: int) -> tuple[str, dict] | None:
        with self.lock:
            if not DUMMY_LEAVES <= index < self.log.size:
                return None
            return self.log.leaves[index].hex(), self._entry(index)

    def tree_head(self) -> dict:
        with self.lock:
            return {
                "rootHash": self.log.root.hex(),
                "signedTreeHead": self.log.checkpoint,
                "treeID": str(gen.REKOR_TREE_ID),
                "treeSize": self.log.size,
            }

    def _entry(self, index: int) -> dict:
        log = self.log
        path = gen.inclusion_path(index, log.leaves)
        assert gen.root_from_path(index, log.size, log.leaves[index], path) == log.root
        t = log.times[index]
        return {
            "body": gen.b64(log.bodies[index]),
            "integratedTime": t,
            "logID": log.log_id.hex(),
            "logIndex": index,
            "verification": {
                "inclusionProof": {
                    "checkpoint": log.checkpoint,
                    "hashes": [h.hex() for h in path],
                    "logIndex": index,
                    "rootHash": log.root.hex(),
                    "treeSize": log.size,
                },
                "signedEntryTimestamp": gen.b64(log.set_for(index, t)),
            },
        }


REKOR_ENTRIES = "/api/v1/log/entries"
FULCIO_SIGNING_CERT = "/api/v2/signingCert"


class Handler(BaseHTTPRequestHandler):
    server_version = "sigstore-standin/0 (NOT REKOR, NOT FULCIO, TEST-ONLY)"
    sys_version = ""
    standin: StandinLog
    fulcio: StandinFulcio
    # POSTs still to answer 503, per endpoint: --fail-first, --fulcio-fail-first.
    fail_left: dict[str, int]
    fail_lock: threading.Lock
    verbose: bool

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        if self.verbose:
            super().log_message(format, *args)

    def reply(self, status: int, obj: object, headers: dict[str, str] | None = None) -> None:
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def json_error(self, status: int, message: str) -> None:
        self.reply(status, {"code": status, "message": message})

    def do_POST(self) -> None:  # noqa: N802
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True
            self.json_error(413, "request body missing a valid Content-Length, or too large")
            return
        raw = self.rfile.read(length)
        path = urlsplit(self.path).path.rstrip("/")
        if path not in (REKOR_ENTRIES, FULCIO_SIGNING_CERT):
            self.json_error(404, "not found")
            return
        with Handler.fail_lock:
            outage = Handler.fail_left[path] > 0
            if outage:
                Handler.fail_left[path] -= 1
        if outage:
            option = "--fail-first" if path == REKOR_ENTRIES else "--fulcio-fail-first"
            self.json_error(503, f"stand-in outage ({option})")
            return
        try:
            request = json.loads(raw)
        except ValueError as e:  # a JSONDecodeError, or bytes that are not UTF-8
            self.json_error(400, f"invalid JSON: {e}")
            return
        if path == FULCIO_SIGNING_CERT:
            self.signing_cert(request)
            return
        try:
            body = canonical_body(request)
        except BadEntry as e:
            self.json_error(400, str(e))
            return
        uuid, entry, created = self.standin.append(body)
        location = {"Location": f"/api/v1/log/entries/{uuid}"}
        if not created:
            self.reply(
                409,
                {
                    "code": 409,
                    "message": f"an equivalent entry already exists in the transparency log with UUID {uuid}",
                },
                location,
            )
            return
        self.reply(201, {uuid: entry}, {**location, "ETag": uuid})

    def signing_cert(self, request: object) -> None:
        authorization = self.headers.get("Authorization") or ""
        bearer = authorization[len("Bearer ") :] if authorization.startswith("Bearer ") else None
        try:
            answer = self.fulcio.issue(request, bearer)
        except Refused as e:
            self.json_error(e.status, str(e))
            return
        except BadEntry as e:  # a missing field
            self.json_error(400, str(e))
            return
        self.reply(201, answer)

    def do_GET(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        if path == "/api/v1/log":
            self.reply(200, self.standin.tree_head())
            return
        if path == "/api/v1/log/entries":
            values = parse_qs(url.query).get("logIndex", [])
            if len(values) != 1 or not values[0].isdigit():
                self.json_error(400, "logIndex required")
                return
            found = self.standin.entry_by_index(int(values[0]))
            if found is None:
                self.json_error(404, "entry not found")
                return
            self.reply(200, {found[0]: found[1]})
            return
        prefix = "/api/v1/log/entries/"
        if path.startswith(prefix):
            uuid = path[len(prefix) :]
            entry = self.standin.entry_by_uuid(uuid)
            if entry is None:
                self.json_error(404, "entry not found")
                return
            self.reply(200, {uuid.lower(): entry})
            return
        self.json_error(404, "not found")


def serve(args: argparse.Namespace) -> None:
    try:
        if not ipaddress.ip_address(args.host).is_loopback:
            sys.exit(f"rekor_standin: {args.host} is not a loopback address")
    except ValueError:
        sys.exit(f"rekor_standin: --host must be a loopback IP address, not {args.host!r}")

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
        daemon_threads = True

    Handler.standin = StandinLog(args.fixed_time)
    Handler.fulcio = StandinFulcio(args.fixed_time)
    Handler.fail_left = {REKOR_ENTRIES: args.fail_first, FULCIO_SIGNING_CERT: args.fulcio_fail_first}
    Handler.fail_lock = threading.Lock()
    Handler.verbose = args.verbose
    server = Server((args.host, 0), Handler)  # bound and listening on return
    port = server.server_address[1]

    port_file = Path(args.port_file)
    tmp = port_file.with_name(f".{port_file.name}.{os.getpid()}.tmp")
    tmp.write_text(str(port))
    os.replace(tmp, port_file)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description="Loopback stand-ins for the Rekor v1 write API and the Fulcio v2 signingCert "
        "API (NOT REKOR, NOT FULCIO, TEST-ONLY; sign with the synthetic keys of gen.py; "
        "identity tokens are read WITHOUT checking their signature)."
    )
    p.add_argument("--port-file", required=True, help="where to write the port once listening")
    p.add_argument(
        "--fail-first", type=int, default=0, metavar="N", help="answer the first N POSTs of Rekor entries 503"
    )
    p.add_argument(
        "--fulcio-fail-first", type=int, default=0, metavar="N", help="answer the first N signingCert POSTs 503"
    )
    p.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    p.add_argument(
        "--fixed-time",
        type=int,
        default=None,
        metavar="UNIX",
        help="the stand-in's clock: integratedTime of every entry, notBefore of every "
        "certificate, the time tokens are checked at (default: now)",
    )
    p.add_argument("--verbose", action="store_true", help="log each request to stderr")
    args = p.parse_args(argv)
    if args.fail_first < 0 or args.fulcio_fail_first < 0:
        p.error("--fail-first and --fulcio-fail-first must not be negative")
    serve(args)


if __name__ == "__main__":
    main()
