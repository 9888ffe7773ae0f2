#!/usr/bin/env python3
"""Generator of a SYNTHETIC Sigstore instance and the fixtures that test it.

SYNTHETIC, TEST-ONLY. Every key below is derived from a public label in
this file: anyone can recompute it. Nothing made here is, or chains to,
real Sigstore trust material.

What it makes, so sigstore-check/tests/synthetic.rs can run the real
`sigstore-verify` 0.15.1 checks offline with nothing mocked:

* a Fulcio-style CA: a self-signed root (ECDSA P-384) and an intermediate
  (P-384) that issues leaf certificates (P-256 keys) with an e-mail or URI
  SAN, the OIDC issuer extensions 1.3.6.1.4.1.57264.1.8 (DER UTF8String)
  and 1.3.6.1.4.1.57264.1.1 (raw bytes, the legacy form), code-signing
  EKU, digitalSignature key usage, a ten-minute validity, and an embedded
  SCT (1.3.6.1.4.1.11129.2.4.2) from a test CT log (P-256), signed over
  the precertificate exactly as RFC 6962 §3.2 says: SHA-256 of the
  issuer's SubjectPublicKeyInfo, then the TBSCertificate without the SCT
  list extension (what sigstore-verify's verify_impl/sct.rs rebuilds);
* a Rekor v1 log (P-256 key, log ID = SHA-256 of its SPKI) holding
  hashedrekord v0.0.1 entries among dummy leaves, one RFC 6962 tree, a
  checkpoint in the signed-note form Rekor writes (origin, size, base64
  root, blank line, "— <name> base64(4-byte key hint || signature)"), and
  per entry an inclusion proof and a SET (ECDSA over the canonical JSON of
  {body, integratedTime, logID, logIndex});
* a Rekor v2 log: an Ed25519 key (its 32-byte seed SHA-256 of a label),
  checkpoint origin "rekor-v2.example.test", log ID the C2SP signed-note
  key ID SHA-256(origin || 0x0A || 0x01 || raw public key), as Rekor v2's
  is; hashedrekord v0.0.2 entries (the canonicalized body real Rekor v2
  logs) in an RFC 6962 tree; checkpoints signed with Ed25519, their
  signature line "— rekor-v2.example.test base64(keyID[:4] || sig)"; no
  integrated time, no SET (Rekor v2 has neither);
* an RFC 3161 timestamp authority: a self-signed root (P-384) and a
  signing leaf (P-256; digitalSignature, the timeStamping EKU alone and
  critical), and the DER of a TSTInfo, of the CMS SignedData around it
  (signed attributes contentType, messageDigest, ESS signingCertificateV2;
  ECDSA-SHA256 over them) and of a TimeStampResp, hand-built here as
  `cryptography` has no builder for them;
* trusted_root.json naming the CA, both Rekor logs (v1: P-256; v2:
  Ed25519), the CT key and the TSA, each with a validFor window;
* bundles (application/vnd.dev.sigstore.bundle.v0.3+json) with a
  messageSignature over statement.txt, and one bundle per attack; and one
  Rekor v2 bundle (a hashedrekord v0.0.2 entry and an RFC 3161 timestamp).

Requires Python 3.11 and the `cryptography` package (>= 44, for
deterministic ECDSA), needed ONLY to regenerate the fixtures; the Rust
tests read the committed files. Run from anywhere:

    python3 gen.py

The output is deterministic: keys come from fixed seeds, ECDSA is RFC 6979
deterministic, and every time is fixed, so a rerun rewrites the same bytes.

rekor_standin.py (loopback stand-ins for the Rekor v1 and v2 write APIs,
Fulcio's signingCert and an RFC 3161 TSA) imports the keys, the CA and
certificate builders, the tree, checkpoint and SET helpers, the Rekor v2
log (LogV2, hashedrekord_v2_body, checkpoint signing) and the TSA's
certificates and DER builders (tst_info, timestamp_token,
timestamp_response) from here; importing this module writes nothing.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import hashlib
import json
import struct
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

# The fixtures go beside this file, or into the folder given as the one
# argument (CI regenerates them there and compares); main() sets it, so
# importing this module (rekor_standin.py does) reads no argument.
OUT = Path(__file__).resolve().parent
SEED = b"evidence-ledger synthetic sigstore v1/"

# Fixed times: everything happened in June 2025.
UTC = dt.timezone.utc
TRUST_START = dt.datetime(2025, 1, 1, tzinfo=UTC)
TRUST_END = dt.datetime(2125, 1, 1, tzinfo=UTC)
T0 = dt.datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
LEAF_VALIDITY = dt.timedelta(minutes=10)

ISSUER = "https://issuer.example.test"
CURATOR = "curator@example.org"
CURATOR_B = "curator-b@example.org"
URI_IDENTITY = "https://ci.example.test/workflows/release.yml@refs/heads/main"

STATEMENT = b"evidence-ledger/v1 case-cosign\nexample\n"
OTHER_STATEMENT = b"evidence-ledger/v1 case-cosign\nanother example\n"

REKOR_NAME = "rekor.example.test"
REKOR_TREE_ID = 4242424242424242424

OID_ISSUER_V1 = ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
OID_ISSUER_V2 = ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
OID_SCT_LIST = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")


# --------------------------------------------------------------------------
# Keys and small encodings
# --------------------------------------------------------------------------


def key(label: str, curve: ec.EllipticCurve) -> ec.EllipticCurvePrivateKey:
    """A private key derived from a public label (test-only by design)."""
    order = {
        "secp256r1": 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551,
        "secp384r1": int(
            "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF"
            "C7634D81F4372DDF581A0DB248B0A77AECEC196ACCC52973",
            16,
        ),
    }[curve.name]
    digest = hashlib.sha512(SEED + label.encode()).digest()
    return ec.derive_private_key(int.from_bytes(digest, "big") % (order - 1) + 1, curve)


def sign(k: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    """DER ECDSA, RFC 6979 deterministic; SHA-384 for P-384, else SHA-256."""
    h = hashes.SHA384() if k.curve.name == "secp384r1" else hashes.SHA256()
    return k.sign(data, ec.ECDSA(h, deterministic_signing=True))


def spki(k) -> bytes:
    pub = k.public_key() if hasattr(k, "public_key") else k
    return pub.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def sha256(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def canonical_json(obj) -> bytes:
    """RFC 8785 for what this file emits (ASCII keys, strings and integers)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def der_len(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def der_utf8(s: str) -> bytes:
    raw = s.encode()
    return b"\x0c" + der_len(len(raw)) + raw


def der_octets(b: bytes) -> bytes:
    return b"\x04" + der_len(len(b)) + b


def serial(label: str) -> int:
    return int.from_bytes(sha256(SEED + b"serial/" + label.encode())[:16], "big") | 1


def iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def flip_last_byte_of_der_signature(sig: bytes) -> bytes:
    """Flips the last byte of s in a DER ECDSA signature: still DER, wrong value."""
    return sig[:-1] + bytes([sig[-1] ^ 0x01])


# --------------------------------------------------------------------------
# Fulcio-style CA
# --------------------------------------------------------------------------

ROOT_KEY = key("fulcio root", ec.SECP384R1())
INTERMEDIATE_KEY = key("fulcio intermediate", ec.SECP384R1())
CT_KEY = key("ct log", ec.SECP256R1())
ROGUE_CT_KEY = key("rogue ct log (not in the trusted root)", ec.SECP256R1())
REKOR_KEY = key("rekor log", ec.SECP256R1())


def name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "synthetic.example.test"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


ROOT_NAME = name("synthetic-fulcio-root (TEST ONLY)")
INTERMEDIATE_NAME = name("synthetic-fulcio-intermediate (TEST ONLY)")


def ca_issued(subject: x509.Name, issuer: x509.Name, k, serial_label: str) -> x509.CertificateBuilder:
    """A certificate for `k`'s public key, named `subject`, issued by `issuer`,
    valid over the trust window: what every CA-made certificate here starts
    from."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(k.public_key())
        .serial_number(serial(serial_label))
        .not_valid_before(TRUST_START)
        .not_valid_after(TRUST_END)
    )


def self_signed_ca(subject: x509.Name, k, serial_label: str, path_length: int) -> x509.Certificate:
    """A self-signed CA certificate for `k`: certificate and CRL signing, the
    trust window, SHA-384."""
    return (
        ca_issued(subject, subject, k, serial_label)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(k.public_key()), critical=False
        )
        .sign(k, hashes.SHA384(), ecdsa_deterministic=True)
    )


def make_root() -> x509.Certificate:
    return self_signed_ca(ROOT_NAME, ROOT_KEY, "root", 1)


def make_intermediate() -> x509.Certificate:
    return (
        ca_issued(INTERMEDIATE_NAME, ROOT_NAME, INTERMEDIATE_KEY, "intermediate")
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(INTERMEDIATE_KEY.public_key()),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ROOT_KEY.public_key()),
            critical=False,
        )
        .sign(ROOT_KEY, hashes.SHA384(), ecdsa_deterministic=True)
    )


# --------------------------------------------------------------------------
# RFC 6962 SCT
# --------------------------------------------------------------------------


def u16(n: int) -> bytes:
    return struct.pack(">H", n)


def u24(n: int) -> bytes:
    return struct.pack(">I", n)[1:]


def sct_signed_data(timestamp_ms: int, issuer_spki: bytes, precert_tbs: bytes) -> bytes:
    """RFC 6962 §3.2 digitally-signed struct for a precert_entry."""
    return (
        b"\x00"  # sct_version v1
        + b"\x00"  # signature_type certificate_timestamp
        + struct.pack(">Q", timestamp_ms)
        + u16(1)  # entry_type precert_entry
        + sha256(issuer_spki)  # issuer_key_hash
        + u24(len(precert_tbs))
        + precert_tbs
        + u16(0)  # CtExtensions, empty
    )


def sct_list(log_key, timestamp_ms: int, signature: bytes) -> bytes:
    """A SignedCertificateTimestampList holding one SCT (TLS encoding)."""
    sct = (
        b"\x00"  # v1
        + sha256(spki(log_key))  # LogID = SHA-256 of the log's SPKI
        + struct.pack(">Q", timestamp_ms)
        + u16(0)  # extensions
        + b"\x04\x03"  # SignatureAndHashAlgorithm: sha256, ecdsa
        + u16(len(signature))
        + signature
    )
    serialized = u16(len(sct)) + sct
    return u16(len(serialized)) + serialized


# --------------------------------------------------------------------------
# Leaf certificates
# --------------------------------------------------------------------------


def leaf_builder(
    label: str, identity: str, issuer: str, leaf_key, not_before: dt.datetime
) -> x509.CertificateBuilder:
    san = (
        x509.UniformResourceIdentifier(identity)
        if identity.startswith("https://")
        else x509.RFC822Name(identity)
    )
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([]))
        .issuer_name(INTERMEDIATE_NAME)
        .public_key(leaf_key.public_key())
        .serial_number(serial("leaf/" + label))
        .not_valid_before(not_before)
        .not_valid_after(not_before + LEAF_VALIDITY)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, False, False, False, False),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(leaf_key.public_key()), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(INTERMEDIATE_KEY.public_key()),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName([san]), critical=True)
        # Legacy issuer extension: the issuer URL as raw bytes.
        .add_extension(x509.UnrecognizedExtension(OID_ISSUER_V1, issuer.encode()), critical=False)
        # Current issuer extension: a DER UTF8String.
        .add_extension(x509.UnrecognizedExtension(OID_ISSUER_V2, der_utf8(issuer)), critical=False)
    )


def make_leaf(
    label: str,
    identity: str,
    leaf_key,
    not_before: dt.datetime,
    *,
    issuer: str = ISSUER,
    ct_key=CT_KEY,
    corrupt_sct: bool = False,
) -> x509.Certificate:
    """A leaf with an embedded SCT over its precertificate.

    The precertificate TBS is the final certificate's TBS without the SCT
    list extension: the same builder signed once without that extension
    (its TBS is what the log signs), then once with it appended.
    """
    builder = leaf_builder(label, identity, issuer, leaf_key, not_before)
    precert = builder.sign(INTERMEDIATE_KEY, hashes.SHA384(), ecdsa_deterministic=True)
    ts_ms = int(not_before.timestamp()) * 1000 + 250
    signed = sct_signed_data(ts_ms, spki(INTERMEDIATE_KEY), precert.tbs_certificate_bytes)
    sct_sig = sign(ct_key, signed)
    if corrupt_sct:
        sct_sig = flip_last_byte_of_der_signature(sct_sig)
    ext_value = der_octets(sct_list(ct_key, ts_ms, sct_sig))
    cert = builder.add_extension(
        x509.UnrecognizedExtension(OID_SCT_LIST, ext_value), critical=False
    ).sign(INTERMEDIATE_KEY, hashes.SHA384(), ecdsa_deterministic=True)
    assert strip_sct(cert) == precert.tbs_certificate_bytes
    return cert


def der_read(buf: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of contents, end of contents) of the DER element at pos."""
    tag = buf[pos]
    n = buf[pos + 1]
    pos += 2
    if n & 0x80:
        count = n & 0x7F
        n = int.from_bytes(buf[pos : pos + count], "big")
        pos += count
    return tag, pos, pos + n


def der_children(buf: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, element start, contents start, end) of each child in buf[start:end]."""
    out, pos = [], start
    while pos < end:
        tag, c, e = der_read(buf, pos)
        out.append((tag, pos, c, e))
        pos = e
    return out


def der_tlv(tag: int, contents: bytes) -> bytes:
    return bytes([tag]) + der_len(len(contents)) + contents


def strip_sct(cert: x509.Certificate) -> bytes:
    """The final certificate's TBS with the SCT list extension cut out at
    the DER level, as a verifier rebuilds it (independent of make_leaf)."""
    tbs = cert.tbs_certificate_bytes
    _, c, e = der_read(tbs, 0)
    fields = der_children(tbs, c, e)
    out = b""
    for tag, start, fc, fe in fields:
        if tag != 0xA3:  # [3] EXPLICIT Extensions
            out += tbs[start:fe]
            continue
        _, xc, xe = der_read(tbs, fc)
        kept = b""
        for _, xs, ec_, ee in der_children(tbs, xc, xe):
            _, oc, oe = der_read(tbs, ec_)
            if tbs[oc:oe] != bytes.fromhex("2b06010401d679020402"):  # 1.3.6.1.4.1.11129.2.4.2
                kept += tbs[xs:ee]
        out += der_tlv(0xA3, der_tlv(0x30, kept))
    return der_tlv(0x30, out)


# --------------------------------------------------------------------------
# Rekor v1: hashedrekord entries in one RFC 6962 tree
# --------------------------------------------------------------------------


def leaf_hash(data: bytes) -> bytes:
    return sha256(b"\x00" + data)


def node_hash(left: bytes, right: bytes) -> bytes:
    return sha256(b"\x01" + left + right)


def mth(leaves: list[bytes]) -> bytes:
    """RFC 6962 §2.1 Merkle Tree Hash over leaf hashes."""
    n = len(leaves)
    if n == 1:
        return leaves[0]
    k = 1 << ((n - 1).bit_length() - 1)
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


def inclusion_path(m: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 §2.1.1 PATH(m, D[n]), leaf to root."""
    n = len(leaves)
    if n == 1:
        return []
    k = 1 << ((n - 1).bit_length() - 1)
    if m < k:
        return inclusion_path(m, leaves[:k]) + [mth(leaves[k:])]
    return inclusion_path(m - k, leaves[k:]) + [mth(leaves[:k])]


def root_from_path(index: int, size: int, leaf: bytes, path: list[bytes]) -> bytes:
    """RFC 9162 §2.1.3.2 verification, to check the proofs made here."""
    fn, sn, r = index, size - 1, leaf
    for p in path:
        assert sn != 0
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    assert sn == 0
    return r


def hashedrekord_body_pem(pem: bytes, signature: bytes, digest_hex: str) -> bytes:
    """The canonical hashedrekord v0.0.1 body Rekor v1 stores: the PEM
    certificate or public key, the signature and the hex SHA-256 digest."""
    return canonical_json(
        {
            "apiVersion": "0.0.1",
            "kind": "hashedrekord",
            "spec": {
                "data": {"hash": {"algorithm": "sha256", "value": digest_hex}},
                "signature": {"content": b64(signature), "publicKey": {"content": b64(pem)}},
            },
        }
    )


def hashedrekord_body(cert: x509.Certificate, signature: bytes, artifact: bytes) -> bytes:
    pem = cert.public_bytes(serialization.Encoding.PEM)
    return hashedrekord_body_pem(pem, signature, hashlib.sha256(artifact).hexdigest())


class Log:
    """A synthetic Rekor v1 log: append bodies, then seal one checkpoint."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.times: list[int] = []
        self.log_id = sha256(spki(REKOR_KEY))

    def append(self, body: bytes, integrated_time: int) -> int:
        self.bodies.append(body)
        self.times.append(integrated_time)
        return len(self.bodies) - 1

    def dummy(self, i: int, integrated_time: int) -> None:
        self.append(canonical_json({"synthetic-dummy-leaf": i}), integrated_time)

    def seal(self) -> None:
        self.leaves = [leaf_hash(b) for b in self.bodies]
        self.size = len(self.leaves)
        self.root = mth(self.leaves)
        note = f"{REKOR_NAME} - {REKOR_TREE_ID}\n{self.size}\n{b64(self.root)}\n"
        hint = self.log_id[:4]
        sig = sign(REKOR_KEY, note.encode())
        self.note = note
        self.checkpoint_sig = sig
        self.checkpoint = f"{note}\n\u2014 {REKOR_NAME} {b64(hint + sig)}\n"

    def set_for(self, index: int, integrated_time: int) -> bytes:
        payload = canonical_json(
            {
                "body": b64(self.bodies[index]),
                "integratedTime": integrated_time,
                "logID": self.log_id.hex(),
                "logIndex": index,
            }
        )
        return sign(REKOR_KEY, payload)

    def tlog_entry(self, index: int) -> dict:
        path = inclusion_path(index, self.leaves)
        assert root_from_path(index, self.size, self.leaves[index], path) == self.root
        t = self.times[index]
        return {
            "logIndex": str(index),
            "logId": {"keyId": b64(self.log_id)},
            "kindVersion": {"kind": "hashedrekord", "version": "0.0.1"},
            "integratedTime": str(t),
            "inclusionPromise": {"signedEntryTimestamp": b64(self.set_for(index, t))},
            "inclusionProof": {
                "logIndex": str(index),
                "rootHash": b64(self.root),
                "treeSize": str(self.size),
                "hashes": [b64(h) for h in path],
                "checkpoint": {"envelope": self.checkpoint},
            },
            "canonicalizedBody": b64(self.bodies[index]),
        }


# --------------------------------------------------------------------------
# Rekor v2: hashedrekord v0.0.2 entries, an Ed25519 C2SP signed-note log
# --------------------------------------------------------------------------

REKOR_V2_ORIGIN = "rekor-v2.example.test"
# Ed25519: the 32-byte private seed is SHA-256 of a public label.
REKOR_V2_KEY = ed25519.Ed25519PrivateKey.from_private_bytes(sha256(SEED + b"rekor v2 log"))
HASHEDREKORD_V2_KEY_DETAILS = "PKIX_ECDSA_P256_SHA_256"  # the only verifier key type the v2 stand-in takes


def ed25519_raw(k) -> bytes:
    pub = k.public_key() if hasattr(k, "public_key") else k
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def signed_note_key_id(origin: str, k) -> bytes:
    """The C2SP signed-note key ID of an Ed25519 key: SHA-256(name || 0x0A ||
    0x01 || raw 32-byte public key). Rekor v2's log ID (logId.keyId) is this
    32-byte value; its first 4 bytes are the key hint in signature lines."""
    return sha256(origin.encode() + b"\n\x01" + ed25519_raw(k))


REKOR_V2_KEY_ID = signed_note_key_id(REKOR_V2_ORIGIN, REKOR_V2_KEY)


def checkpoint_v2_note(size: int, root: bytes) -> str:
    """The C2SP checkpoint body: origin, size, base64 root, each ending in LF."""
    return f"{REKOR_V2_ORIGIN}\n{size}\n{b64(root)}\n"


def checkpoint_v2_envelope(note: str, signature: bytes) -> str:
    """The signed note: body, blank line, `— origin base64(keyID[:4] || sig)`."""
    return f"{note}\n\u2014 {REKOR_V2_ORIGIN} {b64(REKOR_V2_KEY_ID[:4] + signature)}\n"


def sign_checkpoint_v2(note: str) -> bytes:
    """Ed25519 over the note body (deterministic, as Ed25519 is)."""
    return REKOR_V2_KEY.sign(note.encode())


def hashedrekord_v2_verifier(*, certificate_der: bytes | None = None, public_key_der: bytes | None = None) -> dict:
    """The `verifier` of a hashedrekord v0.0.2: one of an X.509 certificate or
    an SPKI public key (DER), with its key details."""
    assert (certificate_der is None) != (public_key_der is None)
    if certificate_der is not None:
        return {"keyDetails": HASHEDREKORD_V2_KEY_DETAILS, "x509Certificate": {"rawBytes": b64(certificate_der)}}
    return {"keyDetails": HASHEDREKORD_V2_KEY_DETAILS, "publicKey": {"rawBytes": b64(public_key_der)}}


def hashedrekord_v2_body(digest: bytes, signature: bytes, verifier: dict) -> bytes:
    """The canonicalized body Rekor v2 logs for a hashedrekord v0.0.2 (RFC 8785
    JSON, the shape and key order of the real Rekor v2's bodies)."""
    return canonical_json(
        {
            "apiVersion": "0.0.2",
            "kind": "hashedrekord",
            "spec": {
                "hashedRekordV002": {
                    "data": {"algorithm": "SHA2_256", "digest": b64(digest)},
                    "signature": {"content": b64(signature), "verifier": verifier},
                }
            },
        }
    )


class LogV2:
    """A synthetic Rekor v2 log: an RFC 6962 tree of canonicalized bodies, a
    C2SP checkpoint signed with the Ed25519 key after every seal. No
    integrated time, no SET: Rekor v2 has neither."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def append(self, body: bytes) -> int:
        self.bodies.append(body)
        return len(self.bodies) - 1

    def dummy(self, i: int) -> None:
        self.append(canonical_json({"synthetic-dummy-leaf-v2": i}))

    def seal(self) -> None:
        self.leaves = [leaf_hash(b) for b in self.bodies]
        self.size = len(self.leaves)
        self.root = mth(self.leaves)
        self.note = checkpoint_v2_note(self.size, self.root)
        self.checkpoint_sig = sign_checkpoint_v2(self.note)
        self.checkpoint = checkpoint_v2_envelope(self.note, self.checkpoint_sig)

    def tlog_entry(self, index: int) -> dict:
        """The TransparencyLogEntry (protobuf JSON) Rekor v2 answers, and a
        bundle carries: int64 fields as strings, bytes base64."""
        path = inclusion_path(index, self.leaves)
        assert root_from_path(index, self.size, self.leaves[index], path) == self.root
        return {
            "logIndex": str(index),
            "logId": {"keyId": b64(REKOR_V2_KEY_ID)},
            "kindVersion": {"kind": "hashedrekord", "version": "0.0.2"},
            "inclusionProof": {
                "logIndex": str(index),
                "rootHash": b64(self.root),
                "treeSize": str(self.size),
                "hashes": [b64(h) for h in path],
                "checkpoint": {"envelope": self.checkpoint},
            },
            "canonicalizedBody": b64(self.bodies[index]),
        }


# --------------------------------------------------------------------------
# RFC 3161 timestamp authority (TSA): certificates, TSTInfo, CMS SignedData
# --------------------------------------------------------------------------

TSA_ROOT_KEY = key("tsa root", ec.SECP384R1())
TSA_LEAF_KEY = key("tsa leaf", ec.SECP256R1())
TSA_ROOT_NAME = name("synthetic-tsa-root (TEST ONLY)")
TSA_LEAF_NAME = name("synthetic-tsa (TEST ONLY)")
TSA_URL = "https://tsa.example.test/api/v1/timestamp"
# The TSTInfo policy: under 1.3.6.1.4.1.32473, the enterprise number RFC 5612
# reserves for documentation. (Not an OID under 2.999: const-oid 0.9, which
# sigstore-tsa parses TSTInfo with, refuses a second arc above 39.)
TSA_POLICY = "1.3.6.1.4.1.32473.3161.1"

OID_SHA256 = "2.16.840.1.101.3.4.2.1"
OID_ECDSA_SHA256 = "1.2.840.10045.4.3.2"
OID_ECDSA_SHA384 = "1.2.840.10045.4.3.3"
OID_SIGNED_DATA = "1.2.840.113549.1.7.2"
OID_CT_TSTINFO = "1.2.840.113549.1.9.16.1.4"
OID_CONTENT_TYPE = "1.2.840.113549.1.9.3"
OID_MESSAGE_DIGEST = "1.2.840.113549.1.9.4"
OID_SIGNING_CERTIFICATE_V2 = "1.2.840.113549.1.9.16.2.47"


def make_tsa_root() -> x509.Certificate:
    return self_signed_ca(TSA_ROOT_NAME, TSA_ROOT_KEY, "tsa root", 0)


def make_tsa_leaf() -> x509.Certificate:
    """The TSA's signing certificate, issued by the TSA root: digitalSignature,
    the timeStamping EKU (alone, critical, as RFC 3161 §2.3 requires)."""
    return (
        ca_issued(TSA_LEAF_NAME, TSA_ROOT_NAME, TSA_LEAF_KEY, "tsa leaf")
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, False, False, False, False),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(TSA_LEAF_KEY.public_key()), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(TSA_ROOT_KEY.public_key()),
            critical=False,
        )
        .sign(TSA_ROOT_KEY, hashes.SHA384(), ecdsa_deterministic=True)
    )


def der_int(n: int) -> bytes:
    """A DER INTEGER (minimal two's complement)."""
    return der_tlv(0x02, n.to_bytes(n.bit_length() // 8 + 1, "big", signed=True))


def der_oid(dotted: str) -> bytes:
    arcs = [int(a) for a in dotted.split(".")]
    body = b""
    for arc in [arcs[0] * 40 + arcs[1], *arcs[2:]]:
        chunk = [arc & 0x7F]
        arc >>= 7
        while arc:
            chunk.append(0x80 | (arc & 0x7F))
            arc >>= 7
        body += bytes(reversed(chunk))
    return der_tlv(0x06, body)


def der_seq(*parts: bytes) -> bytes:
    return der_tlv(0x30, b"".join(parts))


def der_set_contents(*parts: bytes) -> bytes:
    """The contents of a DER SET OF: the encodings in ascending order (X.690
    §11.6), the shorter padded with zero octets for the comparison."""
    width = max((len(p) for p in parts), default=0)
    return b"".join(sorted(parts, key=lambda p: p.ljust(width, b"\x00")))


def der_set(*parts: bytes) -> bytes:
    return der_tlv(0x31, der_set_contents(*parts))


def der_generalized_time(unix: int) -> bytes:
    """GeneralizedTime YYYYMMDDHHMMSSZ (whole seconds, UTC, as DER wants)."""
    t = dt.datetime.fromtimestamp(unix, UTC)
    return der_tlv(0x18, t.strftime("%Y%m%d%H%M%SZ").encode())


def sha256_algorithm() -> bytes:
    """AlgorithmIdentifier sha256, parameters absent (as Sigstore's TSA writes it)."""
    return der_seq(der_oid(OID_SHA256))


def message_imprint(digest: bytes) -> bytes:
    """MessageImprint {sha256, digest}."""
    return der_seq(sha256_algorithm(), der_octets(digest))


def tst_info(imprint_der: bytes, serial_number: int, gen_time: int, nonce_der: bytes | None = None) -> bytes:
    """The DER TSTInfo (RFC 3161 §2.4.2): version 1, TSA_POLICY, the request's
    MessageImprint and nonce (their DER, as received), a serial number,
    genTime, accuracy one second; no ordering (DEFAULT FALSE), no tsa name,
    no extensions."""
    parts = [
        der_int(1),
        der_oid(TSA_POLICY),
        imprint_der,
        der_int(serial_number),
        der_generalized_time(gen_time),
        der_seq(der_int(1)),  # Accuracy { seconds 1 }
    ]
    if nonce_der is not None:
        parts.append(nonce_der)
    return der_seq(*parts)


def cms_attribute(oid: str, value: bytes) -> bytes:
    return der_seq(der_oid(oid), der_set(value))


def tsa_signed_attributes(tst_der: bytes, leaf: x509.Certificate) -> bytes:
    """The CONTENTS of signedAttrs (the SET OF, in DER order): contentType
    id-ct-TSTInfo, messageDigest SHA-256(TSTInfo), and the ESS
    signingCertificateV2 (RFC 5035) naming the leaf: ESSCertIDv2 {certHash
    SHA-256 of the leaf's DER (hashAlgorithm sha256, the DEFAULT, omitted),
    issuerSerial {directoryName of the issuer, serial}}."""
    leaf_der = leaf.public_bytes(serialization.Encoding.DER)
    issuer_serial = der_seq(der_seq(der_tlv(0xA4, leaf.issuer.public_bytes())), der_int(leaf.serial_number))
    ess_cert_id_v2 = der_seq(der_octets(sha256(leaf_der)), issuer_serial)
    signing_certificate_v2 = der_seq(der_seq(ess_cert_id_v2))
    return der_set_contents(
        cms_attribute(OID_CONTENT_TYPE, der_oid(OID_CT_TSTINFO)),
        cms_attribute(OID_MESSAGE_DIGEST, der_octets(sha256(tst_der))),
        cms_attribute(OID_SIGNING_CERTIFICATE_V2, signing_certificate_v2),
    )


def timestamp_token(
    tst_der: bytes,
    *,
    embed: list[x509.Certificate],
    leaf: x509.Certificate,
    leaf_key=TSA_LEAF_KEY,
) -> bytes:
    """The TimeStampToken: ContentInfo {id-signedData, [0] EXPLICIT SignedData
    v3 {digestAlgorithms {sha256}, encapContentInfo {id-ct-TSTInfo, [0]
    EXPLICIT OCTET STRING TSTInfo}, certificates [0] IMPLICIT (`embed`, left
    out when empty), signerInfos {SignerInfo v1 {sid IssuerAndSerialNumber of
    the leaf, sha256, signedAttrs [0] IMPLICIT, ecdsa-with-SHA256 (SHA384 for a
    P-384 key), signature over the DER of signedAttrs tagged SET (0x31)}}}}."""
    attrs = tsa_signed_attributes(tst_der, leaf)
    signature = sign(leaf_key, der_tlv(0x31, attrs))
    sig_alg = OID_ECDSA_SHA384 if leaf_key.curve.name == "secp384r1" else OID_ECDSA_SHA256
    signer_info = der_seq(
        der_int(1),
        der_seq(leaf.issuer.public_bytes(), der_int(leaf.serial_number)),
        sha256_algorithm(),
        der_tlv(0xA0, attrs),
        der_seq(der_oid(sig_alg)),
        der_octets(signature),
    )
    certificates = b""
    if embed:
        ders = [c.public_bytes(serialization.Encoding.DER) for c in embed]
        certificates = der_tlv(0xA0, der_set_contents(*ders))
    signed_data = der_seq(
        der_int(3),
        der_set(sha256_algorithm()),
        der_seq(der_oid(OID_CT_TSTINFO), der_tlv(0xA0, der_octets(tst_der))),
        certificates,
        der_set(signer_info),
    )
    return der_seq(der_oid(OID_SIGNED_DATA), der_tlv(0xA0, signed_data))


def timestamp_response(token: bytes) -> bytes:
    """TimeStampResp {PKIStatusInfo {granted (0)}, timeStampToken}."""
    return der_seq(der_seq(der_int(0)), token)


def timestamp_signature(
    signature: bytes, serial_number: int, gen_time: int, *, nonce: int | None = None, embed_leaf: bool = True
) -> bytes:
    """A whole TimeStampResp over SHA-256 of `signature` (what a Sigstore
    bundle's rfc3161Timestamps[].signedTimestamp holds)."""
    leaf = make_tsa_leaf()
    tst = tst_info(message_imprint(sha256(signature)), serial_number, gen_time,
                   None if nonce is None else der_int(nonce))
    return timestamp_response(timestamp_token(tst, embed=[leaf] if embed_leaf else [], leaf=leaf))


# --------------------------------------------------------------------------
# Signings, bundles, trusted root
# --------------------------------------------------------------------------


class Signing:
    """One keyless signing of STATEMENT: a leaf, its signature, its log entry."""

    def __init__(self, log: Log, label: str, identity: str, minute: int, *, integrated_after=30, **leaf_opts):
        self.label = label
        self.leaf_key = key("leaf/" + label, ec.SECP256R1())
        not_before = T0 + dt.timedelta(minutes=minute)
        self.cert = make_leaf(label, identity, self.leaf_key, not_before, **leaf_opts)
        self.signature = sign(self.leaf_key, STATEMENT)
        self.integrated_time = int(not_before.timestamp()) + integrated_after
        body = hashedrekord_body(self.cert, self.signature, STATEMENT)
        self.index = log.append(body, self.integrated_time)
        self.log = log

    def bundle(self) -> dict:
        return {
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": {"rawBytes": b64(self.cert.public_bytes(serialization.Encoding.DER))},
                "tlogEntries": [self.log.tlog_entry(self.index)],
            },
            "messageSignature": {
                "messageDigest": {"algorithm": "SHA2_256", "digest": b64(sha256(STATEMENT))},
                "signature": b64(self.signature),
            },
        }


class SigningV2:
    """One keyless signing of STATEMENT logged in Rekor v2 (hashedrekord
    v0.0.2) and timestamped by the TSA over SHA-256 of the signature: the
    Rekor v2 bundle shape (no integrated time; the TSA's time is the one)."""

    def __init__(self, log: LogV2, label: str, identity: str, minute: int, *, tsa_serial: int, timestamped_after=30):
        self.leaf_key = key("leaf/" + label, ec.SECP256R1())
        not_before = T0 + dt.timedelta(minutes=minute)
        self.cert = make_leaf(label, identity, self.leaf_key, not_before)
        self.signature = sign(self.leaf_key, STATEMENT)
        self.timestamp = timestamp_signature(
            self.signature, tsa_serial, int(not_before.timestamp()) + timestamped_after
        )
        verifier = hashedrekord_v2_verifier(certificate_der=self.cert.public_bytes(serialization.Encoding.DER))
        self.index = log.append(hashedrekord_v2_body(sha256(STATEMENT), self.signature, verifier))
        self.log = log

    def bundle(self) -> dict:
        return {
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": {"rawBytes": b64(self.cert.public_bytes(serialization.Encoding.DER))},
                "tlogEntries": [self.log.tlog_entry(self.index)],
                "timestampVerificationData": {"rfc3161Timestamps": [{"signedTimestamp": b64(self.timestamp)}]},
            },
            "messageSignature": {
                "messageDigest": {"algorithm": "SHA2_256", "digest": b64(sha256(STATEMENT))},
                "signature": b64(self.signature),
            },
        }


def trusted_root(
    root: x509.Certificate,
    intermediate: x509.Certificate,
    tsa_root: x509.Certificate,
    tsa_leaf: x509.Certificate,
) -> dict:
    window = {"start": iso(TRUST_START), "end": iso(TRUST_END)}
    der = serialization.Encoding.DER
    return {
        "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
        "tlogs": [
            {
                "baseUrl": f"https://{REKOR_NAME}",
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": b64(spki(REKOR_KEY)),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": window,
                },
                "logId": {"keyId": b64(sha256(spki(REKOR_KEY)))},
            },
            {
                "baseUrl": f"https://{REKOR_V2_ORIGIN}",
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": b64(spki(REKOR_V2_KEY)),
                    "keyDetails": "PKIX_ED25519",
                    "validFor": window,
                },
                # Rekor v2's log ID: the C2SP signed-note key ID, not SHA-256(SPKI).
                "logId": {"keyId": b64(REKOR_V2_KEY_ID)},
            },
        ],
        "certificateAuthorities": [
            {
                "subject": {
                    "organization": "synthetic.example.test",
                    "commonName": "synthetic-fulcio (TEST ONLY)",
                },
                "uri": "https://fulcio.example.test",
                "certChain": {
                    "certificates": [
                        {"rawBytes": b64(intermediate.public_bytes(der))},
                        {"rawBytes": b64(root.public_bytes(der))},
                    ]
                },
                "validFor": window,
            }
        ],
        "ctlogs": [
            {
                "baseUrl": "https://ctfe.example.test/test",
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": b64(spki(CT_KEY)),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": window,
                },
                "logId": {"keyId": b64(sha256(spki(CT_KEY)))},
            }
        ],
        "timestampAuthorities": [
            {
                "subject": {
                    "organization": "synthetic.example.test",
                    "commonName": "synthetic-tsa (TEST ONLY)",
                },
                "uri": TSA_URL,
                "certChain": {
                    "certificates": [
                        {"rawBytes": b64(tsa_leaf.public_bytes(der))},
                        {"rawBytes": b64(tsa_root.public_bytes(der))},
                    ]
                },
                "validFor": window,
            }
        ],
    }


def pkcs8(k) -> str:
    return b64(
        k.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def signers(*signings: "Signing") -> dict:
    """What a signer at test time needs to make bundles over statements that
    do not exist yet (the ledger's co-signed statements name the event's
    digest): the Rekor key and, per signing's certificate, the certificate
    and its leaf key. A certificate signs nothing by itself; each bundle
    made from it gets its own signature, log entry, checkpoint and SET."""
    return {
        "SYNTHETIC": "test-only keys derived from public labels in gen.py",
        "rekor": {
            "name": REKOR_NAME,
            "treeId": str(REKOR_TREE_ID),
            "pkcs8": pkcs8(REKOR_KEY),
        },
        "signers": {
            s.label: {
                "certificate": b64(s.cert.public_bytes(serialization.Encoding.DER)),
                "pkcs8": pkcs8(s.leaf_key),
                "notBefore": int(s.cert.not_valid_before_utc.timestamp()),
                "notAfter": int(s.cert.not_valid_after_utc.timestamp()),
            }
            for s in signings
        },
    }


def write_json(name: str, obj: dict) -> None:
    (OUT / name).write_text(json.dumps(obj, indent=2) + "\n")


def main(argv: list[str]) -> None:
    global OUT
    if len(argv) > 1:
        OUT = Path(argv[1])
    root = make_root()
    intermediate = make_intermediate()

    log = Log()
    t = int(T0.timestamp())
    for i in range(3):
        log.dummy(i, t - 3600 + i)
    good = Signing(log, "curator", CURATOR, 0)
    second = Signing(log, "curator-b", CURATOR_B, 1)
    uri = Signing(log, "uri", URI_IDENTITY, 2)
    # Logged (honestly, SET and all) 20 minutes after its 10-minute
    # certificate expired.
    expired = Signing(log, "expired", CURATOR, 3, integrated_after=20 * 60)
    # A CA-signed certificate whose SCT signature has one byte flipped.
    bad_sct = Signing(log, "bad-sct", CURATOR, 4, corrupt_sct=True)
    # An SCT from a CT log the trusted root does not name (its own log ID).
    rogue_ct = Signing(log, "rogue-ct", CURATOR, 5, ct_key=ROGUE_CT_KEY)
    log.dummy(3, int(T0.timestamp()) + 3600)
    log.seal()

    OUT.joinpath("statement.txt").write_bytes(STATEMENT)
    OUT.joinpath("other-statement.txt").write_bytes(OTHER_STATEMENT)
    write_json("trusted_root.json", trusted_root(root, intermediate, make_tsa_root(), make_tsa_leaf()))

    good_bundle = good.bundle()
    write_json("good.bundle.json", good_bundle)
    write_json("second-curator.bundle.json", second.bundle())
    write_json("uri-identity.bundle.json", uri.bundle())
    write_json("cert-expired.bundle.json", expired.bundle())
    write_json("sct-bad-signature.bundle.json", bad_sct.bundle())
    write_json("sct-untrusted-log.bundle.json", rogue_ct.bundle())
    write_json("signers.json", signers(good, second, uri, bad_sct, rogue_ct))

    # Byte flips on the good bundle's log evidence.
    b = copy.deepcopy(good_bundle)
    entry = b["verificationMaterial"]["tlogEntries"][0]
    set_sig = base64.b64decode(entry["inclusionPromise"]["signedEntryTimestamp"])
    entry["inclusionPromise"]["signedEntryTimestamp"] = b64(flip_last_byte_of_der_signature(set_sig))
    write_json("set-flipped.bundle.json", b)

    b = copy.deepcopy(good_bundle)
    entry = b["verificationMaterial"]["tlogEntries"][0]
    bad = flip_last_byte_of_der_signature(log.checkpoint_sig)
    envelope = f"{log.note}\n\u2014 {REKOR_NAME} {b64(log.log_id[:4] + bad)}\n"
    entry["inclusionProof"]["checkpoint"]["envelope"] = envelope
    write_json("checkpoint-flipped.bundle.json", b)

    b = copy.deepcopy(good_bundle)
    proof = b["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]
    h = bytearray(base64.b64decode(proof["hashes"][0]))
    h[0] ^= 0x01
    proof["hashes"][0] = b64(bytes(h))
    write_json("inclusion-flipped.bundle.json", b)

    # Rekor v2: a keyless signing in an Ed25519-checkpointed log, its time
    # from the TSA (T0 + 6 min + 30 s).
    log_v2 = LogV2()
    for i in range(3):
        log_v2.dummy(i)
    v2 = SigningV2(log_v2, "curator-v2", CURATOR, 6, tsa_serial=1)
    log_v2.dummy(3)
    log_v2.seal()
    write_json("rekor-v2.bundle.json", v2.bundle())


if __name__ == "__main__":
    main(sys.argv)
