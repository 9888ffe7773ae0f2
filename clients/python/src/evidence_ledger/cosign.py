"""Witness cosignatures (C2SP tlog-cosignature, Ed25519, type 0x04) and
witness policies (C2SP tlog-policy): a port of `anchors/src/cosign.rs`.

A cosignature is a note signature line `— <name> base64(key ID ‖
timestamp ‖ signature)`: the key ID is `SHA-256(name ‖ "\\n" ‖ 0x04 ‖
public key)[:4]`, the timestamp a big-endian u64 of POSIX seconds (below
2^63), and the Ed25519 signature covers `cosignature/v1\\ntime <timestamp>\\n`
followed by the checkpoint's note text. It states that, at that time, the
witness had verified that this checkpoint extends every checkpoint of the
log it had cosigned before. It says nothing about the entries, and nothing
about freshness beyond its timestamp.

A `Policy` names the logs, the witnesses and the quorum a checkpoint must
meet; `Policy.open_checkpoint` opens a note signed by a trusted log key and
cosigned by witnesses that meet the quorum, or raises `NoQuorum`.

What is left out: submitting checkpoints to witnesses (the server does
that), and HTTP (`Client` fetches; this module only checks). Signatures
are verified with libsodium (PyNaCl), not with `ed25519-dalek`'s
`verify_strict` as the server does; both refuse non-canonical and
small-order encodings.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

import nacl.exceptions
import nacl.signing

from .errors import BadSignature, InvalidInput, LogNotListed, NoQuorum, PolicyError
from .note import (
    Checkpoint,
    KeyLike,
    VerifierKey,
    as_verifier,
    b64,
    b64decode_strict,
    is_valid_key_name,
    open_checkpoint,
    parse_note,
    parse_private_key,
    read_key_file,
)

#: The signature type byte of an Ed25519 cosignature.
COSIGNATURE_TYPE = 0x04
_TYPE = bytes([COSIGNATURE_TYPE])
_SIG_PREFIX = "\u2014 "


def cosigned_message(text: bytes, timestamp: int) -> bytes:
    """The message a cosignature signs: `cosignature/v1\\ntime <timestamp>\\n` ‖ note text."""
    return f"cosignature/v1\ntime {timestamp}\n".encode() + text


def cosigner_key_id(name: str, public_key: bytes) -> int:
    """The 32-bit key ID of a type 0x04 key."""
    return int.from_bytes(hashlib.sha256(name.encode() + b"\n" + _TYPE + public_key).digest()[:4], "big")


class CosignatureVerifier:
    """A witness's verifier key `name+hash+base64(0x04 ‖ public key)`."""

    def __init__(self, text: str) -> None:
        text = text.strip()
        parts = text.split("+", 2)
        if len(parts) != 3:
            raise InvalidInput("witness_key", "expected name+hash+base64 key")
        name, hash_hex, key_b64 = parts
        if not is_valid_key_name(name):
            raise InvalidInput("witness_key", f"`{name}` is not a valid key name")
        if len(hash_hex) != 8 or any(c not in "0123456789abcdef" for c in hash_hex):
            raise InvalidInput("witness_key", "the key hash must be 8 lower-case hex digits")
        typed = b64decode_strict("witness_key", key_b64)
        if len(typed) != 33 or typed[:1] != _TYPE:
            raise InvalidInput("witness_key", "not an Ed25519 cosignature (type 0x04) key of 32 bytes")
        self.public_key = typed[1:]
        self.key_id = cosigner_key_id(name, self.public_key)
        if f"{self.key_id:08x}" != hash_hex:
            raise InvalidInput("witness_key", "the key hash does not match the name and key")
        try:
            self._key = nacl.signing.VerifyKey(self.public_key)
        except (nacl.exceptions.CryptoError, ValueError, TypeError) as e:
            raise InvalidInput("witness_key", f"not an Ed25519 public key: {e}") from e
        self.name = name
        self.text = text

    def verify(self, text: bytes, signature: bytes) -> Optional[int]:
        """The timestamp of `signature` (timestamp ‖ Ed25519 signature, the blob after
        the key ID) over note text `text`, or None when it does not verify."""
        if len(signature) != 8 + 64:
            return None
        ts = int.from_bytes(signature[:8], "big")
        if ts >= 1 << 63:
            return None
        try:
            self._key.verify(cosigned_message(text, ts), signature[8:])
        except (nacl.exceptions.BadSignatureError, nacl.exceptions.CryptoError, ValueError):
            return None
        return ts

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"CosignatureVerifier({self.text!r})"


class CosignerKey:
    """A witness's cosigning key (`ledger witness keygen` writes one): for tests and
    for running a witness in Python; verifiers need only `CosignatureVerifier`."""

    def __init__(self, name: str, seed: bytes) -> None:
        if not is_valid_key_name(name):
            raise InvalidInput("name", f"`{name}` is not a valid key name")
        if len(seed) != 32:
            raise InvalidInput("seed", "an Ed25519 seed is 32 bytes")
        self.name = name
        self._seed = bytes(seed)
        self._key = nacl.signing.SigningKey(self._seed)
        self.public_key = bytes(self._key.verify_key)
        self.key_id = cosigner_key_id(name, self.public_key)

    @classmethod
    def generate(cls, name: str) -> "CosignerKey":
        return cls(name, os.urandom(32))

    @classmethod
    def from_private(cls, text: str) -> "CosignerKey":
        """Parses `PRIVATE+KEY+name+hash+base64(0x04 ‖ seed)`."""
        name, hash_hex, seed = parse_private_key(text, _TYPE, "an Ed25519 cosignature (type 0x04)")
        key = cls(name, seed)
        if f"{key.key_id:08x}" != hash_hex:
            raise InvalidInput("key", "the key hash does not match the name and key")
        return key

    @classmethod
    def load(cls, path: Union[str, Path]) -> "CosignerKey":
        return cls.from_private(read_key_file(path))

    @property
    def verifier_key(self) -> CosignatureVerifier:
        return CosignatureVerifier(f"{self.name}+{self.key_id:08x}+{b64(_TYPE + self.public_key)}")

    def cosign(self, text: bytes, timestamp: int) -> str:
        """The cosignature line (with its newline) over note text `text` at `timestamp`."""
        if not 0 <= timestamp < 1 << 63:
            raise InvalidInput("timestamp", "POSIX seconds below 2^63")
        sig = bytes(self._key.sign(cosigned_message(text, timestamp)).signature)
        blob = self.key_id.to_bytes(4, "big") + timestamp.to_bytes(8, "big") + sig
        return f"{_SIG_PREFIX}{self.name} {b64(blob)}\n"

    def __repr__(self) -> str:
        return f"CosignerKey(name={self.name!r}, key_id={self.key_id:08x})"


@dataclass(frozen=True)
class Cosigned:
    """A cosignature that verified: the witness's key name and its timestamp."""

    witness: str
    timestamp: int


def cosignatures(note: Union[str, bytes], witnesses: Sequence[CosignatureVerifier], what: str = "checkpoint") -> list[Cosigned]:
    """The cosignatures on `note` by any of `witnesses` that verify. Lines by other keys
    are ignored; a line that names a known witness's key (name and key ID) but does not
    verify raises `BadSignature`: the note was tampered with."""
    note_v = parse_note(note, what)
    out: list[Cosigned] = []
    for sig in note_v.signatures:
        for w in witnesses:
            if w.name == sig.name and w.key_id == sig.hash:
                ts = w.verify(note_v.text, sig.signature)
                if ts is None:
                    raise BadSignature(what, f"the cosignature by `{w.name}` does not verify")
                if all(c.witness != w.name or c.timestamp != ts for c in out):
                    out.append(Cosigned(w.name, ts))
    return out


@dataclass(frozen=True)
class Witness:
    """A witness a policy names: the policy's name for it (not the key name), its key,
    and its tlog-witness submission prefix when given."""

    name: str
    verifier: CosignatureVerifier
    url: Optional[str]


@dataclass(frozen=True)
class _Group:
    k: int
    members: tuple[str, ...]


@dataclass(frozen=True)
class WitnessedCheckpoint:
    """A checkpoint signed by a trusted log key and cosigned by a quorum of witnesses:
    `cosigned` holds every policy witness's cosignature that verified."""

    checkpoint: Checkpoint
    cosigned: tuple[Cosigned, ...]

    @property
    def size(self) -> int:
        return self.checkpoint.size

    @property
    def root(self) -> bytes:
        return self.checkpoint.root


class Policy:
    """A C2SP tlog-policy: the logs, the witnesses and the quorum a checkpoint must meet.

        policy = Policy.load("policy.txt")
        w = policy.open_checkpoint(note, [VKEY])      # NoQuorum if the quorum is not met

    Lines: `log <vkey> [url]`, `witness <name> <vkey> [url]`, `group <name>
    <all|any|k> <member>...` and exactly one `quorum <name|none>`; `#` starts
    a comment line. A name is defined once, before it is used; two witnesses
    never share a key; `k` is 1 to the number of members, without leading
    zeros. A file that breaks a rule raises `PolicyError` naming its line.
    """

    def __init__(
        self,
        logs: Sequence[VerifierKey],
        witnesses: Sequence[Witness],
        groups: dict[str, _Group],
        quorum: Optional[str],
    ) -> None:
        self.logs = tuple(logs)
        self.witnesses = tuple(witnesses)
        self._groups = dict(groups)
        #: The quorum's name; None for `quorum none`.
        self.quorum = quorum

    @classmethod
    def load(cls, path: Union[str, Path]) -> "Policy":
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InvalidInput(str(path), f"cannot read the policy file: {e}") from e
        return cls.parse(text, str(path))

    @classmethod
    def parse(cls, text: str, source: str = "policy") -> "Policy":
        logs: list[VerifierKey] = []
        witnesses: list[Witness] = []
        groups: dict[str, _Group] = {}
        names: set[str] = set()
        quorum: Optional[tuple[Optional[str], str]] = None
        for i, raw in enumerate(text.split("\n")):
            line = i + 1

            def err(rule: str) -> PolicyError:
                return PolicyError(line, rule, source)

            if any((ord(c) < 0x20 and c not in "\t\r") or ord(c) == 0x7F for c in raw):
                raise err("only tab and newline may be control characters")
            words = [w for w in raw.replace("\t", " ").replace("\r", " ").split(" ") if w]
            if not words or words[0].startswith("#"):
                continue
            head, rest = words[0], words[1:]
            if head == "log" and len(rest) in (1, 2):
                try:
                    v = VerifierKey(rest[0])
                except InvalidInput as e:
                    raise err(f"log key `{rest[0]}`: {e.rule}") from None
                if any(l.text == v.text for l in logs):
                    raise err(f"log `{rest[0]}` is listed twice")
                logs.append(v)
            elif head == "witness" and len(rest) in (2, 3):
                name, vkey = rest[0], rest[1]
                try:
                    verifier = CosignatureVerifier(vkey)
                except InvalidInput as e:
                    raise err(f"witness `{name}`: {e.rule}") from None
                if name == "none" or name in names:
                    raise err(f"the name `{name}` is already defined")
                if any(w.verifier.public_key == verifier.public_key for w in witnesses):
                    raise err(f"witness `{name}` repeats another's key")
                names.add(name)
                witnesses.append(Witness(name, verifier, rest[2].rstrip("/") if len(rest) == 3 else None))
            elif head == "group" and len(rest) >= 2:
                name, k_s, members = rest[0], rest[1], rest[2:]
                if not members:
                    raise err(f"group `{name}` has no members")
                if name == "none" or name in names:
                    raise err(f"the name `{name}` is already defined")
                seen: list[str] = []
                for m in members:
                    if m not in names:
                        raise err(f"group `{name}`: `{m}` is not defined on an earlier line")
                    if m in seen:
                        raise err(f"group `{name}` lists `{m}` twice")
                    seen.append(m)
                n = len(members)
                if k_s == "all":
                    k = n
                elif k_s == "any":
                    k = 1
                elif k_s.isascii() and k_s.isdigit() and str(int(k_s)) == k_s and 1 <= int(k_s) <= n:
                    k = int(k_s)
                else:
                    raise err(f"group `{name}`: the threshold must be all, any or 1 to {n}")
                names.add(name)
                groups[name] = _Group(k, tuple(members))
            elif head == "quorum" and len(rest) == 1:
                if quorum is not None:
                    raise err("a policy has exactly one quorum line")
                name = rest[0]
                if name != "none" and name not in names:
                    raise err(f"quorum `{name}` is not defined on an earlier line")
                quorum = (None if name == "none" else name, name)
            else:
                raise err(f"`{head}` is not log, witness, group or quorum (or the line has the wrong number of items)")
        if quorum is None:
            raise PolicyError(0, "a policy needs a quorum line", source)
        return cls(logs, witnesses, groups, quorum[0])

    @property
    def needs_witnesses(self) -> bool:
        """Whether the quorum needs any cosignature at all (not `quorum none`)."""
        return self.quorum is not None

    def satisfied_by(self, cosigned: Union[set[str], frozenset[str]]) -> bool:
        """Whether the witnesses named in `cosigned` (policy names) meet the quorum."""
        return self.quorum is None or self._holds(self.quorum, cosigned)

    def _holds(self, name: str, cosigned: Union[set[str], frozenset[str]]) -> bool:
        g = self._groups.get(name)
        if g is None:
            return name in cosigned
        return sum(1 for m in g.members if self._holds(m, cosigned)) >= g.k

    def allows_log(self, key: KeyLike) -> bool:
        """Whether `key` may sign checkpoints under this policy: listed, or no log is listed."""
        text = as_verifier(key).text
        return not self.logs or any(l.text == text for l in self.logs)

    def open_checkpoint(self, note: Union[str, bytes], keys: Sequence[KeyLike], what: str = "checkpoint") -> WitnessedCheckpoint:
        """Opens `note`: signed by one of `keys` (which the policy must allow) and cosigned
        by witnesses that meet the quorum. Raises `BadSignature` (no trusted log signature,
        or a tampered cosignature by a policy witness), `LogNotListed` or `NoQuorum`."""
        cp, key = open_checkpoint(note, keys, what)
        if not self.allows_log(key):
            raise LogNotListed(what, f"the policy does not list the log key `{key.text}`")
        cosigned: list[Cosigned] = []
        have: list[str] = []
        for w in self.witnesses:
            found = cosignatures(note, [w.verifier], what)
            if found:
                have.append(w.name)
                cosigned.extend(found)
        if not self.satisfied_by(set(have)):
            raise NoQuorum(have, self.quorum or "none")
        return WitnessedCheckpoint(cp, tuple(cosigned))
