#!/usr/bin/env python3
"""LOOPBACK STAND-INS for the Rekor v1 and Rekor v2 write APIs, the Fulcio v2
certificate API and an RFC 3161 timestamp authority. NOT REKOR. NOT FULCIO.
NOT A TSA. TEST-ONLY.

They sign with the SYNTHETIC keys of gen.py (the Rekor v1 and v2 log keys,
the Fulcio intermediate, the CT log key, the TSA leaf: all derived from
public labels, so anyone can sign with them) and implement only what the
ledger's tests need, so the ledger's anchor publication can be exercised
end to end, offline, against the synthetic trusted_root.json: with a
managed key (a hashedrekord with a public key), or keyless (an ephemeral
key, a short-lived certificate from the Fulcio stand-in for an OIDC token,
then a hashedrekord carrying that certificate); to Rekor v1, or to Rekor
v2 with an RFC 3161 timestamp over the signature (Rekor v2 gives no
integrated time: the TSA's is the bundle's time).

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

* POST /api/v1/timestamp, RFC 3161 over HTTP as Sigstore's
  timestamp-authority serves it (NOT A TSA). The request: Content-Type
  application/timestamp-query (else 400), the body a DER TimeStampReq:

      TimeStampReq ::= SEQUENCE {
        version        INTEGER (1),
        messageImprint SEQUENCE { AlgorithmIdentifier {sha256
                                  2.16.840.1.101.3.4.2.1, parameters NULL
                                  or absent}, OCTET STRING (32 bytes) },
        reqPolicy      OID OPTIONAL   -- only gen.TSA_POLICY
        nonce          INTEGER OPTIONAL,
        certReq        BOOLEAN DEFAULT FALSE }  -- no extensions

  Anything else (other hash algorithms, another policy, extensions, BER
  lengths, a non-minimal INTEGER, trailing bytes) is answered 400 with a
  text/plain message. The answer is 200, Content-Type
  application/timestamp-reply, a DER TimeStampResp (built by gen.py):

      TimeStampResp { status {0 granted},
        timeStampToken ContentInfo { id-signedData, [0] EXPLICIT
          SignedData { version 3, digestAlgorithms {sha256},
            encapContentInfo { id-ct-TSTInfo 1.2.840.113549.1.9.16.1.4,
                               [0] EXPLICIT OCTET STRING (TSTInfo DER) },
            certificates [0] IMPLICIT {the TSA leaf}  -- only if certReq
            signerInfos { SignerInfo { version 1,
              sid IssuerAndSerialNumber (the TSA leaf's), sha256,
              signedAttrs [0] IMPLICIT (DER order) { contentType
                id-ct-TSTInfo, messageDigest SHA-256(TSTInfo DER),
                signingCertificateV2 (RFC 5035) { ESSCertIDv2 { certHash
                SHA-256(leaf DER), issuerSerial } } },
              ecdsa-with-SHA256, signature: ECDSA P-256 (RFC 6979) over
              the DER of signedAttrs tagged SET (0x31) } } } } }
      TSTInfo { version 1, policy gen.TSA_POLICY (1.3.6.1.4.1.32473.3161.1),
                messageImprint (the request's, as sent), serialNumber (1, 2,
                ... per process), genTime (the stand-in's clock,
                YYYYMMDDHHMMSSZ), accuracy {seconds 1}, nonce (the
                request's, if it had one) }

  The TSA leaf and root are those of trusted_root.json's
  timestampAuthorities (the leaf: digitalSignature, the timeStamping EKU
  alone and critical). Not implemented: other hash algorithms, accuracy
  below a second, the tsa name, TSTInfo extensions, failure responses
  (a refusal is an HTTP 400, never a rejection TimeStampResp), the
  /api/v1/timestamp/certchain endpoint.

* POST /api/v2/log/entries, the Rekor v2 write API (NOT REKOR), a
  CreateEntryRequest in protobuf JSON, hashedrekord v0.0.2 only:

      {"hashedRekordRequestV002": {
         "digest": <base64 32-byte SHA-256 of the artifact>,
         "signature": {"content": <base64 DER ECDSA signature>,
                       "verifier": {"keyDetails": "PKIX_ECDSA_P256_SHA_256",
                                    "publicKey": {"rawBytes": <base64 SPKI DER>}
                                    -- or --
                                    "x509Certificate": {"rawBytes": <base64 DER>}}}}}

  (base64 as protobuf's JSON reads bytes: standard or URL-safe, padded or
  not; unknown fields are refused). The signature is VERIFIED over the
  digest (ECDSA P-256, prehashed SHA-256) with the key or the certificate's
  key (the certificate itself is not checked, as Rekor does not); a bad
  request or signature is answered 400 {"code": 3, "message": ...,
  "details": []} (gRPC INVALID_ARGUMENT, as Rekor v2's gateway writes it).
  Otherwise the canonicalized body

      {"apiVersion":"0.0.2","kind":"hashedrekord","spec":{"hashedRekordV002":
        {"data":{"algorithm":"SHA2_256","digest":...},
         "signature":{"content":...,"verifier":{"keyDetails":...,
                      "publicKey"|"x509Certificate":{"rawBytes":...}}}}}}

  (RFC 8785 JSON, the request's base64 re-encoded standard and padded) is
  appended to an in-memory RFC 6962 tree of its own (apart from the v1
  tree) that starts with DUMMY_LEAVES dummy leaves; an equal body already
  logged is not appended again (Rekor v2 deduplicates): its entry is
  answered, with a proof against the current tree. The answer is 201, the
  TransparencyLogEntry as protobuf JSON, as Rekor v2 answers:

      {"logIndex": "<n>",
       "logId": {"keyId": <base64 gen.REKOR_V2_KEY_ID, the C2SP key ID>},
       "kindVersion": {"kind": "hashedrekord", "version": "0.0.2"},
       "inclusionProof": {"logIndex": "<n>", "rootHash": <base64>,
                          "treeSize": "<size>", "hashes": [<base64>, ...],
                          "checkpoint": {"envelope": <signed note>}},
       "canonicalizedBody": <base64>}

  (no integratedTime, no inclusionPromise). The checkpoint is a C2SP signed
  note: "rekor-v2.example.test\n<size>\n<base64 root>\n\n— rekor-v2.example.test
  <base64(keyID[:4] || Ed25519 signature over the three lines)>\n".
* GET /api/v2/checkpoint: the v2 log's latest checkpoint (text/plain).

Not implemented: other entry kinds (dsse, v1's others), search,
consistency proofs, sharding, tree-ID-prefixed UUIDs, the v2 tile
endpoints, persistence (the logs live in memory); of Fulcio, the token's
signature, its audience, issuers other than those two, the extensions
Fulcio adds for a GitHub workflow (repository, ref, trigger), other key
types, detached SCTs, the trust bundle and configuration endpoints, the v1
API.

Usage:

    python3 rekor_standin.py --port-file PATH [--fail-first N]
        [--fulcio-fail-first N] [--tsa-fail-first N] [--rekor2-fail-first N]
        [--host 127.0.0.1] [--fixed-time UNIX] [--verbose]

It binds a free loopback port, writes the port number (decimal digits, no
newline) to PATH once listening (a temporary name, then a rename), and
serves until killed. --fail-first N answers the first N POSTs of Rekor v1
entries 503, --fulcio-fail-first N the first N POSTs to signingCert,
--tsa-fail-first N the first N POSTs to /api/v1/timestamp (text/plain),
--rekor2-fail-first N the first N POSTs of Rekor v2 entries ({"code": 14,
...}, gRPC UNAVAILABLE): an outage, for retry and catch-up tests, before
looking at the request (nothing is logged, issued or counted); each count
is kept apart from the others. --fixed-time is the stand-in's clock: every
integratedTime, every certificate's notBefore, every genTime, and the time
tokens must not have expired by (the default is the current time); with
it, a given sequence of requests gets byte-identical answers (ECDSA here
is RFC 6979 deterministic, Ed25519 deterministic).

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


# --------------------------------------------------------------------------
# The RFC 3161 TSA stand-in (NOT A TSA): POST /api/v1/timestamp
# --------------------------------------------------------------------------


class BadTimestampRequest(Exception):
    """A TimeStampReq this stand-in refuses: 400, a text message."""


def der_element(buf: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, contents start, contents end) of the DER element at pos, every
    length checked against end; BER forms (indefinite or non-minimal
    lengths, high tag numbers) are refused."""
    if pos + 2 > end:
        raise BadTimestampRequest("truncated DER")
    tag, n = buf[pos], buf[pos + 1]
    if tag & 0x1F == 0x1F:
        raise BadTimestampRequest("unexpected high-tag-number form")
    pos += 2
    if n & 0x80:
        count = n & 0x7F
        if not 1 <= count <= 4 or pos + count > end:
            raise BadTimestampRequest("bad DER length")
        n = int.from_bytes(buf[pos : pos + count], "big")
        if n < 0x80 or buf[pos] == 0:
            raise BadTimestampRequest("non-minimal DER length")
        pos += count
    if pos + n > end:
        raise BadTimestampRequest("truncated DER")
    return tag, pos, pos + n


def der_elements(buf: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, element start, contents start, contents end) of each element in buf[start:end]."""
    out, pos = [], start
    while pos < end:
        tag, c, e = der_element(buf, pos, end)
        out.append((tag, pos, c, e))
        pos = e
    return out


def minimal_integer(contents: bytes) -> bool:
    return bool(contents) and not (
        len(contents) > 1
        and ((contents[0] == 0 and contents[1] < 0x80) or (contents[0] == 0xFF and contents[1] >= 0x80))
    )


SHA256_OID_DER = gen.der_oid(gen.OID_SHA256)
NULL_DER = b"\x05\x00"


class TimestampRequest:
    """The parts of a TimeStampReq the answer uses (their DER, as received)."""

    def __init__(self, imprint: bytes, nonce: bytes | None, cert_req: bool) -> None:
        self.imprint, self.nonce, self.cert_req = imprint, nonce, cert_req


def parse_timestamp_request(raw: bytes) -> TimestampRequest:
    """TimeStampReq ::= SEQUENCE { version INTEGER (1), messageImprint
    {AlgorithmIdentifier sha256 (parameters NULL or absent), OCTET STRING of
    32 bytes}, reqPolicy OID OPTIONAL (TSA_POLICY only), nonce INTEGER
    OPTIONAL, certReq BOOLEAN DEFAULT FALSE, extensions [0] (refused) }."""
    tag, c, e = der_element(raw, 0, len(raw))
    if tag != 0x30 or e != len(raw):
        raise BadTimestampRequest("the body is not one DER SEQUENCE (a TimeStampReq)")
    fields = der_elements(raw, c, e)
    if len(fields) < 2:
        raise BadTimestampRequest("a TimeStampReq needs version and messageImprint")
    (vtag, _, vc, ve), (itag, istart, ic, ie), *rest = fields
    if vtag != 0x02 or raw[vc:ve] != b"\x01":
        raise BadTimestampRequest("TimeStampReq version must be 1")
    if itag != 0x30:
        raise BadTimestampRequest("messageImprint must be a SEQUENCE")
    imprint = der_elements(raw, ic, ie)
    if len(imprint) != 2 or imprint[0][0] != 0x30 or imprint[1][0] != 0x04:
        raise BadTimestampRequest("messageImprint must be {AlgorithmIdentifier, OCTET STRING}")
    alg = der_elements(raw, imprint[0][2], imprint[0][3])
    if not alg or raw[alg[0][1] : alg[0][3]] != SHA256_OID_DER:
        raise BadTimestampRequest("this stand-in timestamps only SHA-256 imprints (2.16.840.1.101.3.4.2.1)")
    if len(alg) > 2 or (len(alg) == 2 and raw[alg[1][1] : alg[1][3]] != NULL_DER):
        raise BadTimestampRequest("the sha256 AlgorithmIdentifier's parameters must be NULL or absent")
    if imprint[1][3] - imprint[1][2] != 32:
        raise BadTimestampRequest("a SHA-256 imprint is 32 bytes")
    nonce, cert_req, seen = None, False, -1
    order = {0x06: 0, 0x02: 1, 0x01: 2, 0xA0: 3}
    for tag, start, fc, fe in rest:
        if tag not in order or order[tag] <= seen:
            raise BadTimestampRequest(f"unexpected field (tag 0x{tag:02x}) in TimeStampReq")
        seen = order[tag]
        if tag == 0x06 and raw[start:fe] != gen.der_oid(gen.TSA_POLICY):
            raise BadTimestampRequest(f"unaccepted reqPolicy (this stand-in's policy is {gen.TSA_POLICY})")
        if tag == 0x02:
            if not minimal_integer(raw[fc:fe]):
                raise BadTimestampRequest("the nonce is not a DER INTEGER")
            nonce = raw[start:fe]
        if tag == 0x01:
            if raw[fc:fe] not in (b"\x00", b"\xff"):
                raise BadTimestampRequest("certReq is not a DER BOOLEAN")
            cert_req = raw[fc:fe] == b"\xff"
        if tag == 0xA0:
            raise BadTimestampRequest("this stand-in takes no TimeStampReq extensions")
    return TimestampRequest(raw[istart:ie], nonce, cert_req)


class StandinTSA:
    """gen.py's TSA answering RFC 3161 requests (NOT A TSA): the synthetic
    TSA leaf signs; serial numbers count up from 1 per process."""

    def __init__(self, fixed_time: int | None) -> None:
        self.fixed_time = fixed_time
        self.leaf = gen.make_tsa_leaf()
        self.lock = threading.Lock()
        self.issued = 0

    def timestamp(self, raw: bytes) -> bytes:
        request = parse_timestamp_request(raw)
        with self.lock:
            self.issued += 1
            serial_number = self.issued
        tst = gen.tst_info(request.imprint, serial_number, clock(self.fixed_time), request.nonce)
        token = gen.timestamp_token(tst, embed=[self.leaf] if request.cert_req else [], leaf=self.leaf)
        return gen.timestamp_response(token)


# --------------------------------------------------------------------------
# The Rekor v2 stand-in (NOT REKOR): POST /api/v2/log/entries
# --------------------------------------------------------------------------


def only_keys(obj: object, what: str, required: set[str], optional: set[str] = frozenset()) -> dict:
    """obj as a JSON object with the required keys and nothing unknown (as
    protobuf's JSON parsing refuses unknown fields)."""
    if not isinstance(obj, dict):
        raise BadEntry(f"{what} must be a JSON object")
    missing = required - obj.keys()
    if missing:
        raise BadEntry(f"{what} misses {', '.join(sorted(missing))}")
    unknown = obj.keys() - required - optional
    if unknown:
        raise BadEntry(f"unknown field(s) in {what}: {', '.join(sorted(unknown))}")
    return obj


def hashedrekord_v2_body(request: object) -> bytes:
    """Validates a Rekor v2 CreateEntryRequest holding a hashedrekord v0.0.2,
    verifies its signature and returns the canonicalized body to log."""
    if isinstance(request, dict) and "dsseRequestV002" in request:
        raise BadEntry("this stand-in accepts only hashedRekordRequestV002")
    top = only_keys(request, "the request", {"hashedRekordRequestV002"})
    req = only_keys(top["hashedRekordRequestV002"], "hashedRekordRequestV002", {"digest", "signature"})
    digest = b64decode_lenient(req["digest"], "digest", BadEntry)
    if len(digest) != 32:
        raise BadEntry("digest must be the 32-byte SHA-256 of the artifact")
    sig = only_keys(req["signature"], "signature", {"content", "verifier"})
    signature = b64decode_lenient(sig["content"], "signature.content", BadEntry)
    if not signature:
        raise BadEntry("signature.content is empty")
    verifier = only_keys(sig["verifier"], "signature.verifier", {"keyDetails"}, {"publicKey", "x509Certificate"})
    if verifier["keyDetails"] != gen.HASHEDREKORD_V2_KEY_DETAILS:
        raise BadEntry(f"this stand-in accepts only keyDetails {gen.HASHEDREKORD_V2_KEY_DETAILS}")
    kinds = [k for k in ("publicKey", "x509Certificate") if k in verifier]
    if len(kinds) != 1:
        raise BadEntry("signature.verifier needs exactly one of publicKey and x509Certificate")
    raw = b64decode_lenient(
        only_keys(verifier[kinds[0]], f"verifier.{kinds[0]}", {"rawBytes"})["rawBytes"],
        f"verifier.{kinds[0]}.rawBytes",
        BadEntry,
    )
    try:
        if kinds[0] == "publicKey":
            public_key = serialization.load_der_public_key(raw)
            body_verifier = gen.hashedrekord_v2_verifier(public_key_der=raw)
        else:
            public_key = x509.load_der_x509_certificate(raw).public_key()
            body_verifier = gen.hashedrekord_v2_verifier(certificate_der=raw)
    except (ValueError, TypeError) as e:
        raise BadEntry(f"invalid {kinds[0]}: {e}") from None
    if not isinstance(public_key, ec.EllipticCurvePublicKey) or public_key.curve.name != "secp256r1":
        raise BadEntry("keyDetails PKIX_ECDSA_P256_SHA_256 needs an ECDSA P-256 key")
    try:
        public_key.verify(signature, digest, ec.ECDSA(utils.Prehashed(hashes.SHA256())))
    except (InvalidSignature, ValueError):
        raise BadEntry("the signature does not verify over the digest") from None
    return gen.hashedrekord_v2_body(digest, signature, body_verifier)


class StandinLogV2:
    """gen.LogV2, resealed after every append; its own tree, apart from v1's."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log = gen.LogV2()
        self.index_of: dict[bytes, int] = {}
        for i in range(DUMMY_LEAVES):
            self.log.dummy(i)
        self.log.seal()

    def append(self, body: bytes) -> dict:
        """The entry for body, logged now unless an equal body already is."""
        with self.lock:
            index = self.index_of.get(body)
            if index is None:
                index = self.log.append(body)
                self.index_of[body] = index
                self.log.seal()
            return self.log.tlog_entry(index)

    def checkpoint(self) -> str:
        with self.lock:
            return self.log.checkpoint


REKOR_ENTRIES = "/api/v1/log/entries"
FULCIO_SIGNING_CERT = "/api/v2/signingCert"
TSA_TIMESTAMP = "/api/v1/timestamp"
REKOR_V2_ENTRIES = "/api/v2/log/entries"
#: The option counting each endpoint's outage.
FAIL_OPTION = {
    REKOR_ENTRIES: "--fail-first",
    FULCIO_SIGNING_CERT: "--fulcio-fail-first",
    TSA_TIMESTAMP: "--tsa-fail-first",
    REKOR_V2_ENTRIES: "--rekor2-fail-first",
}


class Handler(BaseHTTPRequestHandler):
    server_version = "sigstore-standin/0 (NOT REKOR, NOT FULCIO, NOT A TSA, TEST-ONLY)"
    sys_version = ""
    standin: StandinLog
    fulcio: StandinFulcio
    tsa: StandinTSA
    rekor2: StandinLogV2
    # POSTs still to answer 503, per endpoint (FAIL_OPTION names the options).
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

    def reply_bytes(self, status: int, content_type: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def text_error(self, status: int, message: str) -> None:
        self.reply_bytes(status, "text/plain; charset=utf-8", (message + "\n").encode())

    def grpc_error(self, status: int, grpc_code: int, message: str) -> None:
        """An error as Rekor v2's gRPC gateway writes it."""
        self.reply(status, {"code": grpc_code, "message": message, "details": []})

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
        if path not in FAIL_OPTION:
            self.json_error(404, "not found")
            return
        with Handler.fail_lock:
            outage = Handler.fail_left[path] > 0
            if outage:
                Handler.fail_left[path] -= 1
        if outage:
            message = f"stand-in outage ({FAIL_OPTION[path]})"
            if path == TSA_TIMESTAMP:
                self.text_error(503, message)
            elif path == REKOR_V2_ENTRIES:
                self.grpc_error(503, 14, message)  # UNAVAILABLE
            else:
                self.json_error(503, message)
            return
        if path == TSA_TIMESTAMP:
            self.timestamp(raw)
            return
        if path == REKOR_V2_ENTRIES:
            self.rekor2_entry(raw)
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

    def timestamp(self, raw: bytes) -> None:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if content_type != "application/timestamp-query":
            self.text_error(400, "Content-Type must be application/timestamp-query")
            return
        try:
            answer = self.tsa.timestamp(raw)
        except BadTimestampRequest as e:
            self.text_error(400, f"bad TimeStampReq: {e}")
            return
        self.reply_bytes(200, "application/timestamp-reply", answer)

    def rekor2_entry(self, raw: bytes) -> None:
        try:
            body = hashedrekord_v2_body(json.loads(raw))
        except ValueError as e:  # a JSONDecodeError, or bytes that are not UTF-8
            self.grpc_error(400, 3, f"invalid JSON: {e}")  # INVALID_ARGUMENT
            return
        except BadEntry as e:
            self.grpc_error(400, 3, str(e))
            return
        self.reply(201, self.rekor2.append(body))

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
        if path == "/api/v2/checkpoint":
            self.reply_bytes(200, "text/plain; charset=utf-8", self.rekor2.checkpoint().encode())
            return
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
    Handler.tsa = StandinTSA(args.fixed_time)
    Handler.rekor2 = StandinLogV2()
    Handler.fail_left = {
        REKOR_ENTRIES: args.fail_first,
        FULCIO_SIGNING_CERT: args.fulcio_fail_first,
        TSA_TIMESTAMP: args.tsa_fail_first,
        REKOR_V2_ENTRIES: args.rekor2_fail_first,
    }
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
        description="Loopback stand-ins for the Rekor v1 and v2 write APIs, the Fulcio v2 signingCert "
        "API and an RFC 3161 timestamp authority (NOT REKOR, NOT FULCIO, NOT A TSA, TEST-ONLY; sign "
        "with the synthetic keys of gen.py; identity tokens are read WITHOUT checking their signature)."
    )
    p.add_argument("--port-file", required=True, help="where to write the port once listening")
    p.add_argument(
        "--fail-first", type=int, default=0, metavar="N", help="answer the first N POSTs of Rekor v1 entries 503"
    )
    p.add_argument(
        "--fulcio-fail-first", type=int, default=0, metavar="N", help="answer the first N signingCert POSTs 503"
    )
    p.add_argument(
        "--tsa-fail-first", type=int, default=0, metavar="N", help="answer the first N timestamp POSTs 503"
    )
    p.add_argument(
        "--rekor2-fail-first", type=int, default=0, metavar="N", help="answer the first N Rekor v2 entry POSTs 503"
    )
    p.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    p.add_argument(
        "--fixed-time",
        type=int,
        default=None,
        metavar="UNIX",
        help="the stand-in's clock: integratedTime of every v1 entry, notBefore of every "
        "certificate, genTime of every timestamp, the time tokens are checked at (default: now)",
    )
    p.add_argument("--verbose", action="store_true", help="log each request to stderr")
    args = p.parse_args(argv)
    if min(args.fail_first, args.fulcio_fail_first, args.tsa_fail_first, args.rekor2_fail_first) < 0:
        p.error("the --*fail-first counts must not be negative")
    serve(args)


if __name__ == "__main__":
    main()
