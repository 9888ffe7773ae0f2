"""A SYNTHETIC Sigstore instance that signs at run time (`sigstore_check::synthetic`,
in Python): bundles over messages that do not exist before a test runs (the ledger's
co-signed statements name the event's digest).

**Not Sigstore, and test-only.** The keys are those of
`sigstore-check/testdata/synthetic/gen.py`, derived from public labels, so anyone can
sign with them; the certificates are the ones gen.py issued (`signers.json`) and the
trusted root is gen.py's (`trusted_root.json`), read from there, never copied. A
bundle made here verifies against that root and no other.

Each bundle is a v0.3 message signature, made as `synthetic.rs` makes it: the message
signed with the certificate's leaf key (ECDSA P-256, SHA-256), a `hashedrekord` v0.0.1
body for it, an RFC 6962 tree of five leaves (three dummies, the entry, one more), a
checkpoint signed by the synthetic Rekor key, an inclusion proof and a SET. `Tamper`
breaks one of those on purpose.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

SYNTHETIC = Path(__file__).resolve().parents[3] / "sigstore-check" / "testdata" / "synthetic"
#: The synthetic instance's trusted root (gen.py's `trusted_root.json`): TEST ONLY.
TRUSTED_ROOT = (SYNTHETIC / "trusted_root.json").read_text()
#: The OIDC issuer every synthetic certificate names.
ISSUER = "https://issuer.example.test"
#: The SAN of the `curator` certificate.
CURATOR = "curator@example.org"
#: The SAN of the `curator-b` certificate.
CURATOR_B = "curator-b@example.org"


class Tamper(enum.Enum):
    """One thing broken on purpose in a bundle, each aimed at one check."""

    NONE = "none"
    #: Logged (SET and all, honestly) 20 minutes after the certificate's ten-minute
    #: validity ended.
    LOGGED_AFTER_EXPIRY = "logged-after-expiry"
    #: One byte of the SET flipped.
    SET_FLIPPED = "set-flipped"
    #: One byte of the checkpoint's signature flipped.
    CHECKPOINT_FLIPPED = "checkpoint-flipped"
    #: One byte of an inclusion-proof hash flipped.
    INCLUSION_FLIPPED = "inclusion-flipped"


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def sha256(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def leaf_hash(data: bytes) -> bytes:
    return sha256(b"\x00" + data)


def node_hash(left: bytes, right: bytes) -> bytes:
    return sha256(b"\x01" + left + right)


def split(n: int) -> int:
    """RFC 6962 §2.1: the largest power of two below `n`."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = split(len(leaves))
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


def path(m: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 §2.1.1 PATH(m, D[n]), leaf to root."""
    if len(leaves) == 1:
        return []
    k = split(len(leaves))
    if m < k:
        return path(m, leaves[:k]) + [mth(leaves[k:])]
    return path(m - k, leaves[k:]) + [mth(leaves[:k])]


def pem_certificate(der: bytes) -> str:
    b = b64(der)
    lines = [b[i : i + 64] for i in range(0, len(b), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "".join(f"{line}\n" for line in lines) + "-----END CERTIFICATE-----\n"


def flip_last(b: bytes) -> bytes:
    return b[:-1] + bytes([b[-1] ^ 1])


def private_key(pkcs8_b64: str) -> ec.EllipticCurvePrivateKey:
    k = serialization.load_der_private_key(base64.b64decode(pkcs8_b64), password=None)
    assert isinstance(k, ec.EllipticCurvePrivateKey)
    return k


def sign(key: ec.EllipticCurvePrivateKey, message: bytes) -> bytes:
    return key.sign(message, ec.ECDSA(hashes.SHA256()))


@dataclass(frozen=True)
class Cert:
    der: bytes
    key: ec.EllipticCurvePrivateKey
    not_before: int


class Synthetic:
    """The synthetic CA's certificates, by label (`curator`, `curator-b`, `uri`, `bad-sct`:
    curator@example.org with its SCT signature flipped, `rogue-ct`: curator@example.org
    with an SCT from a CT log the root does not name), and the synthetic Rekor log's key."""

    def __init__(self) -> None:
        v = json.loads((SYNTHETIC / "signers.json").read_text())
        self.rekor_name: str = v["rekor"]["name"]
        self.tree_id: str = v["rekor"]["treeId"]
        self.rekor = private_key(v["rekor"]["pkcs8"])
        spki = self.rekor.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        self.log_id = sha256(spki)
        self.certs = {
            label: Cert(base64.b64decode(s["certificate"]), private_key(s["pkcs8"]), int(s["notBefore"]))
            for label, s in v["signers"].items()
        }

    def issue(self, label: str, identity: str, issuer: str, minute: int = 10) -> None:
        """Issues the certificate `label` naming `identity` and `issuer` with gen.py's own
        synthetic CA (its keys derived from public labels; importing gen.py writes
        nothing), valid from `minute` minutes after gen.py's T0, as gen.py issues its
        signers' certificates. For identities signers.json has no certificate for (the
        same SAN under another issuer)."""
        import datetime as dt
        import importlib.util

        spec = importlib.util.spec_from_file_location("synthetic_sigstore_gen", SYNTHETIC / "gen.py")
        assert spec is not None and spec.loader is not None
        gen = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gen)
        key = gen.key("leaf/" + label, ec.SECP256R1())
        not_before = gen.T0 + dt.timedelta(minutes=minute)
        cert = gen.make_leaf(label, identity, key, not_before, issuer=issuer)
        self.certs[label] = Cert(cert.public_bytes(serialization.Encoding.DER), key, int(not_before.timestamp()))

    def sign(self, label: str, message: bytes, tamper: Tamper = Tamper.NONE) -> str:
        """A bundle (v0.3 JSON) in which the certificate `label` signs `message`, logged
        30 s after the certificate's validity began, with `tamper` broken."""
        cert = self.certs[label]
        signature = sign(cert.key, message)
        integrated_time = cert.not_before + (30 * 60 if tamper is Tamper.LOGGED_AFTER_EXPIRY else 30)
        body = (
            '{"apiVersion":"0.0.1","kind":"hashedrekord","spec":{"data":{"hash":{"algorithm":"sha256","value":"'
            + sha256(message).hex()
            + '"}},"signature":{"content":"' + b64(signature)
            + '","publicKey":{"content":"' + b64(pem_certificate(cert.der).encode()) + '"}}}}'
        ).encode()
        bodies = [f'{{"synthetic-dummy-leaf":{i}}}'.encode() for i in range(3)]
        index = len(bodies)
        bodies += [body, b'{"synthetic-dummy-leaf":3}']
        leaves = [leaf_hash(b) for b in bodies]
        root = mth(leaves)
        proof = path(index, leaves)
        if tamper is Tamper.INCLUSION_FLIPPED:
            proof[0] = bytes([proof[0][0] ^ 1]) + proof[0][1:]
        note = f"{self.rekor_name} - {self.tree_id}\n{len(leaves)}\n{b64(root)}\n"
        note_sig = self.log_id[:4] + sign(self.rekor, note.encode())
        if tamper is Tamper.CHECKPOINT_FLIPPED:
            note_sig = flip_last(note_sig)
        checkpoint = f"{note}\n\u2014 {self.rekor_name} {b64(note_sig)}\n"
        set_payload = (
            f'{{"body":"{b64(body)}","integratedTime":{integrated_time},'
            f'"logID":"{self.log_id.hex()}","logIndex":{index}}}'
        )
        set_sig = sign(self.rekor, set_payload.encode())
        if tamper is Tamper.SET_FLIPPED:
            set_sig = flip_last(set_sig)
        return json.dumps({
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": {"rawBytes": b64(cert.der)},
                "tlogEntries": [{
                    "logIndex": str(index),
                    "logId": {"keyId": b64(self.log_id)},
                    "kindVersion": {"kind": "hashedrekord", "version": "0.0.1"},
                    "integratedTime": str(integrated_time),
                    "inclusionPromise": {"signedEntryTimestamp": b64(set_sig)},
                    "inclusionProof": {
                        "logIndex": str(index),
                        "rootHash": b64(root),
                        "treeSize": str(len(leaves)),
                        "hashes": [b64(h) for h in proof],
                        "checkpoint": {"envelope": checkpoint},
                    },
                    "canonicalizedBody": b64(body),
                }],
            },
            "messageSignature": {
                "messageDigest": {"algorithm": "SHA2_256", "digest": b64(sha256(message))},
                "signature": b64(signature),
            },
        }, separators=(",", ":"))
