#!/usr/bin/env python3
"""Independent (non-Rust) generator for docs/FORMAT.md's test vectors.

It implements, from their written definitions (docs/FORMAT.md), the
per-entry hashes and the RFC 6962 root (§1–2), and the log key's signed
notes and keys (§9): the verifier key, a signed checkpoint, a signed
projection-bundle attestation and the derived event signing key. It uses
only the standard library, the `blake3` package and PyNaCl (Ed25519) from
PyPI:

    pip install blake3 pynacl
    python3 docs/vectors/gen_format_vectors.py > ledger/testdata/format_vectors.json

The Rust tests `format_vectors_match_independent_python_implementation`
(ledger/tests/log.rs) and `log_key_notes_match_independent_python_implementation`
(anchors/tests/vectors.rs) check the ledger against the committed output.
Ed25519 signatures are deterministic, so the notes are pinned byte for byte.
"""
import base64
import hashlib
import json

import blake3
import nacl.signing


def leaf_hash(b: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + b).digest()


def node_hash(l: bytes, r: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + l + r).digest()


def mth(hs):
    if not hs:
        return hashlib.sha256(b"").digest()
    if len(hs) == 1:
        return hs[0]
    k = 1
    while k * 2 < len(hs):
        k *= 2
    return node_hash(mth(hs[:k]), mth(hs[k:]))


LEAVES = [
    b"",
    b"evidence ledger",
    bytes(range(256)),
    "caf\u00e9 \u2713".encode("utf-8"),
    b"\x00" * 64,
]


# §9: the log key. A fixed seed, and the default origin (api/src/init.rs),
# which is also the key's name.
LOG_SEED = bytes(range(32))
ORIGIN = "localhost/evidence-ledger"
# The first line of a projection-bundle attestation (verifier/src/check.rs).
BUNDLE_STATEMENT = "evidence-ledger/v1 projection-bundle"
# The BLAKE3 derive_key context of the ledger's event signing key.
EVENT_KEY_CONTEXT = "evidence-ledger/v1 event signing key"
# An example bundle body, as canonical JSON (FORMAT.md §7).
ATTESTATION_BODY = {"example": "projection body", "tree_size": 5}

ED25519 = b"\x01"  # the note signature type of an Ed25519 key


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def canonical(obj) -> bytes:
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def key_hash(name: str, public: bytes) -> bytes:
    """C2SP signed-note key ID: SHA-256(name || "\n" || 0x01 || key)[:4]."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + ED25519 + public).digest()[:4]


def sign_note(text: str, name: str, sk: nacl.signing.SigningKey) -> str:
    """A C2SP signed note: the text, a blank line, one signature line."""
    assert text.endswith("\n")
    public = sk.verify_key.encode()
    sig = sk.sign(text.encode("utf-8")).signature
    return text + "\n" + "\u2014 " + name + " " + b64(key_hash(name, public) + sig) + "\n"


def log_key_vectors(size: int, root: bytes):
    sk = nacl.signing.SigningKey(LOG_SEED)
    public = sk.verify_key.encode()
    kh = key_hash(ORIGIN, public).hex()
    checkpoint_text = f"{ORIGIN}\n{size}\n{b64(root)}\n"
    body = canonical(ATTESTATION_BODY)
    body_sha256 = hashlib.sha256(body).hexdigest()
    attestation_text = f"{BUNDLE_STATEMENT}\n{ORIGIN}\n{body_sha256}\n"
    event_seed = blake3.blake3(LOG_SEED, derive_key_context=EVENT_KEY_CONTEXT).digest()
    event_public = nacl.signing.SigningKey(event_seed).verify_key.encode()
    return {
        "log_key": {
            "seed_hex": LOG_SEED.hex(),
            "origin": ORIGIN,
            "public_key_hex": public.hex(),
            "key_hash": kh,
            "verifier_key": f"{ORIGIN}+{kh}+{b64(ED25519 + public)}",
            "private_key": f"PRIVATE+KEY+{ORIGIN}+{kh}+{b64(ED25519 + LOG_SEED)}",
        },
        "checkpoint": {
            "size": size,
            "root_hex": root.hex(),
            "text": checkpoint_text,
            "note": sign_note(checkpoint_text, ORIGIN, sk),
        },
        "bundle_attestation": {
            "body": body.decode("utf-8"),
            "body_sha256": body_sha256,
            "text": attestation_text,
            "note": sign_note(attestation_text, ORIGIN, sk),
        },
        "event_signing_key": {
            "context": EVENT_KEY_CONTEXT,
            "seed_hex": event_seed.hex(),
            "public_key_hex": event_public.hex(),
            "public_key_b64": b64(event_public),
            "key_id": hashlib.sha256(event_public).hexdigest(),
        },
    }


def main():
    chain = bytes(32)
    out = {"generator": "docs/vectors/gen_format_vectors.py", "entries": []}
    hs = []
    for i, leaf in enumerate(LEAVES):
        digest = blake3.blake3(leaf).digest()
        chain = hashlib.sha256(chain + digest).digest()
        hs.append(leaf_hash(leaf))
        out["entries"].append(
            {
                "index": i,
                "leaf_hex": leaf.hex(),
                "leaf_hash": hs[-1].hex(),
                "content_digest_blake3": digest.hex(),
                "chain_hash": chain.hex(),
                "root_after": mth(hs).hex(),
            }
        )
    # The checkpoint signs the tree of the entries above.
    out.update(log_key_vectors(len(hs), mth(hs)))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
