#!/usr/bin/env python3
"""Sign and post Evidence Ledger events from Python, then check the receipts.

Needs only the standard library and PyNaCl (`pip install pynacl`).

    python3 examples/python/post_event.py --server http://127.0.0.1:7878 \
        --operator-key ledger-data/operator.key

It enrols a new harness key (signed by the operator), registers a task class,
starts a run as the harness, and for every write checks, with no trust in the
server:
  * the signed checkpoint (C2SP signed note) against the log's verifier key;
  * the RFC 6962 inclusion proof of the entry against the checkpoint's root.
"""
import argparse
import base64
import hashlib
import json
import os
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone

import nacl.signing

PAYLOAD_TYPE = "application/vnd.evidence-ledger.event+json"


def canonical(obj) -> bytes:
    """The ledger's canonical JSON (docs/FORMAT.md section 7)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def pae(payload_type: str, payload: bytes) -> bytes:
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def key_id(verify_key: nacl.signing.VerifyKey) -> str:
    return hashlib.sha256(bytes(verify_key)).hexdigest()


def read_key(path: str) -> nacl.signing.SigningKey:
    """Key files use the note signer format PRIVATE+KEY+name+hash+base64(0x01 || seed)."""
    text = open(path).read().strip()
    _, _, _name, _hash, b64 = text.split("+", 4)
    raw = base64.b64decode(b64)
    assert raw[0] == 1 and len(raw) == 33, "not an Ed25519 key file"
    return nacl.signing.SigningKey(raw[1:])


def envelope(key: nacl.signing.SigningKey, kind: str, body: dict) -> bytes:
    payload = {
        "schema": 1,
        "id": "py-" + os.urandom(12).hex(),
        "signer": key_id(key.verify_key),
        "issued_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "event": {"kind": kind, "body": body},
    }
    data = canonical(payload)
    sig = key.sign(pae(PAYLOAD_TYPE, data)).signature
    return json.dumps({
        "payload": base64.b64encode(data).decode(),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [{"keyid": payload["signer"], "sig": base64.b64encode(sig).decode()}],
    }).encode()


def http(method: str, url: str, body: bytes = None):
    req = urllib.request.Request(url, data=body, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


# --- verification, trusting only the verifier key -------------------------

def open_checkpoint(note: str, vkey: str):
    """Verify a C2SP signed note with a note verifier key; return (origin, size, root)."""
    name, khash, b64 = vkey.split("+", 2)
    raw = base64.b64decode(b64)
    assert raw[0] == 1, "not an Ed25519 verifier key"
    verify_key = nacl.signing.VerifyKey(raw[1:])
    text, sigs = note.split("\n\n", 1)
    text += "\n"
    for line in sigs.splitlines():
        if not line.startswith("\u2014 "):
            continue
        sname, sig_b64 = line[2:].split(" ", 1)
        sig = base64.b64decode(sig_b64)
        if sname == name and sig[:4].hex() == khash:
            verify_key.verify(text.encode(), sig[4:])  # raises on a bad signature
            origin, size, root_b64 = text.splitlines()[:3]
            assert origin == name, "checkpoint origin is not the key name"
            return origin, int(size), base64.b64decode(root_b64)
    raise ValueError("no signature by the trusted key")


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_from_inclusion(index: int, size: int, leaf_hash: bytes, proof) -> bytes:
    """RFC 9162 section 2.1.3.2."""
    if index >= size:
        raise ValueError("index beyond size")
    fn, sn, r = index, size - 1, leaf_hash
    for p in proof:
        if sn == 0:
            raise ValueError("proof too long")
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
    if sn != 0:
        raise ValueError("proof too short")
    return r


def post(server: str, vkey: str, key, kind: str, body: dict) -> dict:
    started = time.monotonic()
    status, data = http("POST", server + "/v1/events", envelope(key, kind, body))
    elapsed = (time.monotonic() - started) * 1000
    if status not in (200, 201):
        raise SystemExit(f"{kind} refused ({status}): {data.decode()}")
    r = json.loads(data)
    size = check_receipt(r, vkey)
    print(f"{kind:<24} -> entry {r['index']:>5}  tree {size:>5}  proof and checkpoint verified  ({elapsed:.1f} ms)")
    return r


def check_receipt(r: dict, vkey: str) -> int:
    """Checks a write receipt's signed checkpoint and inclusion proof; returns the tree size."""
    _, size, root = open_checkpoint(r["checkpoint"], vkey)
    assert size == r["tree_size"] and root.hex() == r["root"], "receipt disagrees with its checkpoint"
    computed = root_from_inclusion(r["index"], size, bytes.fromhex(r["leaf_hash"]), [bytes.fromhex(h) for h in r["inclusion_proof"]])
    assert computed == root, "inclusion proof does not lead to the signed root"
    return size


def post_batch(server: str, vkey: str, envelopes: list) -> list:
    """POST /v1/events/batch: one result per envelope, in order, every receipt in one checkpoint."""
    status, data = http("POST", server + "/v1/events/batch", b"[" + b",".join(envelopes) + b"]")
    assert status == 200, (status, data)
    answer = json.loads(data)
    assert len(answer["results"]) == len(envelopes), answer
    for item in answer["results"]:
        if "receipt" in item:
            assert check_receipt(item["receipt"], vkey) == answer["tree_size"], "one checkpoint per batch"
    return answer["results"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default="http://127.0.0.1:7878")
    ap.add_argument("--operator-key", required=True)
    args = ap.parse_args()
    server = args.server.rstrip("/")
    status, info = http("GET", server + "/v1/log")
    assert status == 200, info
    vkey = json.loads(info)["verifier_key"]
    operator = read_key(args.operator_key)
    harness = nacl.signing.SigningKey.generate()
    suffix = os.urandom(4).hex()
    rubric = "blake3:" + hashlib.sha256(b"rubric").hexdigest()
    post(server, vkey, operator, "principal.enrolled", {
        "public_key": base64.b64encode(bytes(harness.verify_key)).decode(),
        "identity": f"python-harness-{suffix}@example.org",
        "roles": ["harness"],
    })
    task_class = f"python-example-{suffix}"
    post(server, vkey, operator, "task_class.registered", {
        "task_class": task_class,
        "tiers": {"silver": {"min_cases_for_promotion": 5, "score_threshold": 0.7},
                  "gold": {"min_cases_for_promotion": 10, "score_threshold": 0.9}},
        "failure_modes": [{"code": "build_broken", "severity": "block", "description": "does not build"}],
        "breakdown_keys": ["correctness"],
        "rubric_digest": rubric,
        "initial_tier": "bronze",
    })
    post(server, vkey, harness, "run.started", {
        "run_id": f"python-run-{suffix}",
        "task_class": task_class,
        "harness_version": "python example 1.0",
        "rubric_digest": rubric,
        "sandbox_image_digest": "sha256:" + hashlib.sha256(b"image").hexdigest(),
        "isolation_class": "microvm",
    })
    # A malformed digest is refused with a typed problem naming the field; nothing is appended.
    status, data = http("POST", server + "/v1/events", envelope(operator, "rubric.updated", {"task_class": task_class, "rubric_digest": "md5:nope"}))
    problem = json.loads(data)
    assert status == 400 and problem["code"] == "invalid_digest", (status, problem)
    assert problem["field"] == "event.body.rubric_digest", problem
    print(f"{'rubric.updated (bad)':<24} -> refused {status} {problem['code']} on {problem['field']}")
    # A batch: each envelope is judged alone, in order; the bad one is refused and the others go in.
    runs = [envelope(harness, "run.started", {
        "run_id": f"python-run-{suffix}-{i}",
        "task_class": task_class,
        "harness_version": "python example 1.0",
        "rubric_digest": rubric,
        "sandbox_image_digest": "sha256:" + hashlib.sha256(b"image").hexdigest(),
        "isolation_class": "microvm",
    }) for i in range(3)]
    bad = envelope(operator, "rubric.updated", {"task_class": task_class, "rubric_digest": "md5:nope"})
    results = post_batch(server, vkey, [runs[0], bad, runs[1], runs[2]])
    assert [i["status"] for i in results] == [201, 400, 201, 201], results
    assert results[1]["problem"]["code"] == "invalid_digest", results[1]
    indices = [i["receipt"]["index"] for i in results if "receipt" in i]
    assert indices == sorted(indices), "appended in the order posted"
    print(f"{'batch of 4':<24} -> 3 appended, 1 refused (invalid_digest); every proof verified in one checkpoint")
    print("OK")


if __name__ == "__main__":
    main()
