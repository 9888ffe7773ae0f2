#!/usr/bin/env python3
"""A LOOPBACK STAND-IN for the Rekor v1 write API. NOT REKOR. TEST-ONLY.

It signs with the SYNTHETIC Rekor log key of gen.py (derived from a public
label: anyone can sign with it) and implements only what the ledger's tests
need, so the ledger's Rekor client (sigstore-rekor 0.15.1) can be exercised
end to end, offline, against the synthetic trusted_root.json:

* POST /api/v1/log/entries with a hashedrekord v0.0.1 entry (the JSON
  sigstore-rekor's `HashedRekord` serializes):

      {"apiVersion": "0.0.1", "kind": "hashedrekord",
       "spec": {"data": {"hash": {"algorithm": "sha256", "value": <hex>}},
                "signature": {"content": <base64 DER ECDSA signature>,
                              "publicKey": {"content": <base64 of a PEM
                                            PUBLIC KEY or CERTIFICATE>}}}}

  The signature is VERIFIED over the digest (ECDSA, prehashed SHA-256) with
  the key (or the certificate's key); a bad request or signature is
  answered 400 {"code": 400, "message": ...} as Rekor does, an entry already
  in the log 409 (Location: its entry). Otherwise the canonical body (the
  PEM re-encoded, as Rekor canonicalizes it; RFC 8785 JSON) is appended as
  a leaf of an in-memory RFC 6962 tree that starts with DUMMY_LEAVES dummy
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

Not implemented: other entry kinds, search, consistency proofs, sharding,
tree-ID-prefixed UUIDs, persistence (the log lives in memory).

Usage:

    python3 rekor_standin.py --port-file PATH [--fail-first N]
        [--host 127.0.0.1] [--fixed-time UNIX] [--verbose]

It binds a free loopback port, writes the port number (decimal digits, no
newline) to PATH once listening (a temporary name, then a rename), and
serves until killed. --fail-first N answers the first N POSTs 503 (an
outage, for retry and catch-up tests) before looking at them.
--fixed-time makes every integratedTime that value (the default is the
current time); with it, a given sequence of requests gets byte-identical
answers (ECDSA here is RFC 6979 deterministic).

Needs Python 3.11 and `cryptography` >= 44, like gen.py.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import ipaddress
import json
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
    # way into the body.
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
            t = self.fixed_time if self.fixed_time is not None else int(time.time())
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


class Handler(BaseHTTPRequestHandler):
    server_version = "rekor-standin/0 (NOT REKOR, TEST-ONLY)"
    sys_version = ""
    standin: StandinLog
    fail_left: int
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
        with Handler.fail_lock:
            outage = Handler.fail_left > 0
            if outage:
                Handler.fail_left -= 1
        if outage:
            self.json_error(503, "stand-in outage (--fail-first)")
            return
        if urlsplit(self.path).path.rstrip("/") != "/api/v1/log/entries":
            self.json_error(404, "not found")
            return
        try:
            body = canonical_body(json.loads(raw))
        except json.JSONDecodeError as e:
            self.json_error(400, f"invalid JSON: {e}")
            return
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
    Handler.fail_left = args.fail_first
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
        description="Loopback stand-in for the Rekor v1 write API (NOT REKOR, TEST-ONLY; "
        "signs with the synthetic Rekor key of gen.py)."
    )
    p.add_argument("--port-file", required=True, help="where to write the port once listening")
    p.add_argument("--fail-first", type=int, default=0, metavar="N", help="answer the first N POSTs 503")
    p.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    p.add_argument("--fixed-time", type=int, default=None, metavar="UNIX", help="integratedTime of every entry")
    p.add_argument("--verbose", action="store_true", help="log each request to stderr")
    args = p.parse_args(argv)
    if args.fail_first < 0:
        p.error("--fail-first must not be negative")
    serve(args)


if __name__ == "__main__":
    main()
