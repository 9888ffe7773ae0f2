#!/usr/bin/env python3
"""Independent (Python) vectors for signed events: canonical JSON and DSSE.

Uses only the standard library's json and hashlib, plus PyNaCl for Ed25519:

    pip install pynacl
    python3 docs/vectors/gen_event_vectors.py > events/testdata/event_vectors.json

The Rust tests check that the ledger's canonical encoder writes exactly what
Python's json.dumps writes, and that an envelope signed here verifies there.
"""
import base64
import hashlib
import json
import random

import nacl.signing

PAYLOAD_TYPE = "application/vnd.evidence-ledger.event+json"


def canonical(obj) -> bytes:
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def pae(payload_type: str, payload: bytes) -> bytes:
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def rfc6962_root(leaves) -> bytes:
    """RFC 6962 Merkle tree hash (MTH) of the leaf data in `leaves`."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + rfc6962_root(leaves[:k]) + rfc6962_root(leaves[k:])).digest()


def evidence_trees():
    """A recommendation's evidence tree: MTH over the canonical JSON of each reference."""
    rng = random.Random(20261127)
    lists = [
        [],
        [{"index": 5, "leaf_hash": "aa" * 32}],
        [{"index": 5, "leaf_hash": "aa" * 32}, {"index": 17, "leaf_hash": "bb" * 32},
         {"index": 1000000, "leaf_hash": "0123456789abcdef" * 4}],
        [{"index": rng.randrange(2**53), "leaf_hash": "%064x" % rng.getrandbits(256)} for _ in range(13)],
    ]
    out = []
    for refs in lists:
        leaves = [canonical(r) for r in refs]
        out.append({
            "refs": refs,
            "leaves": [leaf.decode("utf-8") for leaf in leaves],
            "count": len(refs),
            "root": rfc6962_root(leaves).hex(),
        })
    return out


def main():
    rng = random.Random(20261122)
    floats = [0.0, -0.0, 1.0, 0.5, 0.1, 1e16, 1e15, 1e-4, 1e-5, 1.5e300, 5e-324, 123456789.125, 2.0**53, 1 / 3]
    floats += [rng.uniform(0, 1) for _ in range(200)]
    floats += [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(200)]
    canon = []
    for x in floats:
        canon.append({"value": x, "canonical": canonical({"x": x}).decode("utf-8")})
    objects = [
        {"b": [1, 2.5, "\u00e9\n\u0001\t\"\\"], "a": None, "c": {"z": True, "y": False}},
        {"emoji": "\U0001F600 ok", "nested": [[], {}], "neg": -9007199254740991},
        # Every character the canonical form escapes, and neighbours it does not.
        {"ctl": "".join(chr(i) for i in range(0x20)) + " ~\x7f\u2028\"\\/"},
    ]
    object_vectors = [{"object": o, "canonical": canonical(o).decode("utf-8")} for o in objects]

    seed = hashlib.sha256(b"python-harness").digest()
    sk = nacl.signing.SigningKey(seed)
    pk = bytes(sk.verify_key)
    keyid = hashlib.sha256(pk).hexdigest()
    payload = {
        "schema": 1,
        "id": "py-envelope-0001",
        "signer": keyid,
        "issued_at": "2026-11-22T08:00:00Z",
        "event": {"kind": "run.finished", "body": {"run_id": "run-1"}},
    }
    body = canonical(payload)
    sig = sk.sign(pae(PAYLOAD_TYPE, body)).signature
    envelope = {
        "payload": base64.b64encode(body).decode(),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [{"keyid": keyid, "sig": base64.b64encode(sig).decode()}],
    }
    out = {
        "generator": "docs/vectors/gen_event_vectors.py",
        "floats": canon,
        "objects": object_vectors,
        "evidence_trees": evidence_trees(),
        "dsse": {
            "seed_hex": seed.hex(),
            "public_key_b64": base64.b64encode(pk).decode(),
            "keyid": keyid,
            "payload_canonical": body.decode("utf-8"),
            "envelope": envelope,
        },
    }
    print(json.dumps(out, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
