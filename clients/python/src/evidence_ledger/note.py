"""Keys, C2SP signed notes and tlog checkpoints.

Every key the ledger uses is an Ed25519 key in the note key formats of
Go's `golang.org/x/mod/sumdb/note` (C2SP signed-note): a signer key
`PRIVATE+KEY+<name>+<hash>+base64(0x01 || seed)` and a verifier key
`<name>+<hash>+base64(0x01 || public key)`, where `<hash>` is 8 hex digits
of `SHA-256(name || "\\n" || 0x01 || public key)`. A principal's key file
and the log key use the same format.

A signed note is text ending in a newline, a blank line, and signature
lines `— <name> base64(key hash (4) || signature (64))`. A checkpoint
(C2SP tlog-checkpoint) is the note text `<origin>\\n<size>\\n<base64 root>\\n`
followed by optional extension lines.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

import nacl.exceptions
import nacl.signing

from .errors import BadSignature, InvalidInput, MalformedAnswer

_SIG_PREFIX = "\u2014 "
_ED25519 = b"\x01"


def b64decode_strict(field: str, text: str) -> bytes:
    """Standard base64 with padding, in its one canonical encoding; `InvalidInput` otherwise."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise InvalidInput(field, "must be standard base64 with padding") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise InvalidInput(field, "must be canonical base64 (no stray bits, standard padding)")
    return raw


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def is_valid_key_name(name: str) -> bool:
    """A note key name: non-empty, no `+`, no white space (as Go's note package)."""
    return bool(name) and "+" not in name and not any(c.isspace() for c in name)


def key_hash(name: str, typed_public: bytes) -> int:
    """The 32-bit key hash of a note key."""
    return int.from_bytes(hashlib.sha256(name.encode() + b"\n" + typed_public).digest()[:4], "big")


def key_id(public_key: bytes) -> str:
    """A principal's key id: lower-case hex SHA-256 of its raw 32-byte public key."""
    return hashlib.sha256(public_key).hexdigest()


class VerifierKey:
    """A note verifier key `name+hash+base64(0x01 || public key)`."""

    def __init__(self, text: str) -> None:
        text = text.strip()
        parts = text.split("+", 2)
        if len(parts) != 3:
            raise InvalidInput("verifier_key", "must be name+hash+base64 key")
        name, hash_hex, key_b64 = parts
        if not is_valid_key_name(name):
            raise InvalidInput("verifier_key", f"`{name}` is not a valid key name")
        if len(hash_hex) != 8 or any(c not in "0123456789abcdef" for c in hash_hex):
            raise InvalidInput("verifier_key", "the key hash must be 8 lower-case hex digits")
        typed = b64decode_strict("verifier_key", key_b64)
        if len(typed) != 33 or typed[:1] != _ED25519:
            raise InvalidInput("verifier_key", "must be an Ed25519 (type 0x01) key of 32 bytes")
        if key_hash(name, typed) != int(hash_hex, 16):
            raise InvalidInput("verifier_key", "the key hash does not match the name and key")
        self.text = text
        self.name = name
        self.hash = int(hash_hex, 16)
        self.public_key = typed[1:]
        try:
            self._key = nacl.signing.VerifyKey(self.public_key)
        except (nacl.exceptions.CryptoError, ValueError, TypeError) as e:
            raise InvalidInput("verifier_key", f"not an Ed25519 public key: {e}") from e

    def verify(self, message: bytes, signature: bytes) -> bool:
        try:
            self._key.verify(message, signature)
            return True
        except (nacl.exceptions.BadSignatureError, nacl.exceptions.CryptoError, ValueError):
            return False

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"VerifierKey({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VerifierKey) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


KeyLike = Union[str, VerifierKey]


def as_verifier(key: KeyLike) -> VerifierKey:
    return key if isinstance(key, VerifierKey) else VerifierKey(key)


def parse_private_key(text: str, sig_type: bytes, kind: str) -> tuple[str, str, bytes]:
    """Splits a note signer key `PRIVATE+KEY+name+hash+base64(type || seed)` of
    signature type `sig_type` into its name, hash text and 32-byte seed; the
    caller checks the hash."""
    text = text.strip()
    if not text.startswith("PRIVATE+KEY+"):
        raise InvalidInput("key", "missing PRIVATE+KEY+ prefix")
    parts = text[len("PRIVATE+KEY+") :].split("+", 2)
    if len(parts) != 3:
        raise InvalidInput("key", "expected PRIVATE+KEY+name+hash+key")
    name, hash_hex, key_b64 = parts
    typed = b64decode_strict("key", key_b64)
    if len(typed) != 33 or typed[:1] != sig_type:
        raise InvalidInput("key", f"not {kind} key with a 32-byte seed")
    return name, hash_hex, typed[1:]


def read_key_file(path: Union[str, Path]) -> str:
    """A key file's text; an unreadable file is bad input naming the path."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidInput(str(path), f"cannot read the key file: {e}") from e


class SigningKey:
    """An Ed25519 key with a note key name: a principal's key or a log key.

    `generate` makes a new one; `load` reads a key file written by
    `ledger init`, `ledger keygen` or `save`.
    """

    def __init__(self, name: str, seed: bytes) -> None:
        if not is_valid_key_name(name):
            raise InvalidInput("name", f"`{name}` is not a valid note key name (no `+`, no spaces)")
        if len(seed) != 32:
            raise InvalidInput("seed", "an Ed25519 seed is 32 bytes")
        self.name = name
        self._seed = bytes(seed)
        self._key = nacl.signing.SigningKey(self._seed)
        self.public_key = bytes(self._key.verify_key)
        self.key_id = key_id(self.public_key)
        self._hash = key_hash(name, _ED25519 + self.public_key)

    @classmethod
    def generate(cls, name: str) -> "SigningKey":
        return cls(name, os.urandom(32))

    @classmethod
    def from_private(cls, text: str) -> "SigningKey":
        """Parses `PRIVATE+KEY+name+hash+base64(0x01 || seed)`."""
        name, hash_hex, seed = parse_private_key(text, _ED25519, "an Ed25519 (type 0x01)")
        key = cls(name, seed)
        if f"{key._hash:08x}" != hash_hex:
            raise InvalidInput("key", "the key hash does not match the name and key")
        return key

    @classmethod
    def load(cls, path: Union[str, Path]) -> "SigningKey":
        return cls.from_private(read_key_file(path))

    def private_key(self) -> str:
        """The note signer key text (keep it secret)."""
        return f"PRIVATE+KEY+{self.name}+{self._hash:08x}+{b64(_ED25519 + self._seed)}"

    def save(self, path: Union[str, Path]) -> None:
        """Writes the key to a new file readable only by its owner (0600); never overwrites."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(self.private_key() + "\n")
            f.flush()
            os.fsync(f.fileno())

    @property
    def verifier_key(self) -> VerifierKey:
        return VerifierKey(f"{self.name}+{self._hash:08x}+{b64(_ED25519 + self.public_key)}")

    @property
    def public_key_b64(self) -> str:
        return b64(self.public_key)

    def sign(self, message: bytes) -> bytes:
        return bytes(self._key.sign(message).signature)

    def sign_note(self, text: bytes) -> str:
        """A signed note of `text` (which must end in a newline) with this key."""
        if not text.endswith(b"\n"):
            raise InvalidInput("text", "note text ends in a newline")
        sig = self._hash.to_bytes(4, "big") + self.sign(text)
        return text.decode("utf-8") + "\n" + _SIG_PREFIX + self.name + " " + b64(sig) + "\n"

    def __repr__(self) -> str:
        return f"SigningKey(name={self.name!r}, key_id={self.key_id!r})"


@dataclass(frozen=True)
class NoteSignature:
    name: str
    hash: int
    signature: bytes


@dataclass(frozen=True)
class Note:
    text: bytes
    signatures: tuple[NoteSignature, ...]


def parse_note(data: Union[str, bytes], what: str = "checkpoint") -> Note:
    """Splits a signed note into its text and signature lines (no verification)."""
    msg = data.encode("utf-8") if isinstance(data, str) else data
    try:
        s = msg.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedAnswer(what, "a signed note is UTF-8") from None
    if any((ord(c) < 0x20 and c != "\n") for c in s):
        raise MalformedAnswer(what, "a signed note holds no control characters but newlines")
    split = msg.rfind(b"\n\n")
    if split < 0:
        raise MalformedAnswer(what, "no blank line before the signatures")
    text, sigs = msg[: split + 1], msg[split + 2 :]
    if not sigs or not sigs.endswith(b"\n"):
        raise MalformedAnswer(what, "the signature block ends in a newline")
    out: list[NoteSignature] = []
    for line_b in sigs[:-1].split(b"\n"):
        line = line_b.decode("utf-8")
        if not line.startswith(_SIG_PREFIX):
            raise MalformedAnswer(what, "a signature line starts with an em dash and a space")
        name, _, sig_b64 = line[len(_SIG_PREFIX) :].partition(" ")
        try:
            raw = base64.b64decode(sig_b64.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise MalformedAnswer(what, "a signature is not base64") from None
        if not is_valid_key_name(name) or not sig_b64 or len(raw) < 5:
            raise MalformedAnswer(what, "malformed signature line")
        out.append(NoteSignature(name, int.from_bytes(raw[:4], "big"), raw[4:]))
        if len(out) > 100:
            raise MalformedAnswer(what, "more than 100 signatures")
    return Note(text, tuple(out))


def open_note(data: Union[str, bytes], keys: Sequence[KeyLike], what: str = "checkpoint") -> tuple[bytes, VerifierKey]:
    """The text of a note signed by one of `keys`, and the key that verified it.

    Raises `BadSignature` when no trusted key signed it, or when a signature
    by a trusted key (same name and key hash) does not verify: a note is
    refused whole then, as Go's `note.Open` does.
    """
    note = parse_note(data, what)
    verifiers = [as_verifier(k) for k in keys]
    if not verifiers:
        raise BadSignature(what, "no trusted keys")
    found: Optional[VerifierKey] = None
    for sig in note.signatures:
        for v in verifiers:
            if v.name == sig.name and v.hash == sig.hash:
                if not v.verify(note.text, sig.signature):
                    raise BadSignature(what, f"the signature by `{v.name}` does not verify")
                found = found or v
    if found is None:
        names = ", ".join(v.name for v in verifiers)
        raise BadSignature(what, f"no signature by a trusted key ({names})")
    return note.text, found


@dataclass(frozen=True)
class Checkpoint:
    """A verified checkpoint: origin, tree size and root, and the note it came in."""

    origin: str
    size: int
    root: bytes
    note: str

    @property
    def root_hex(self) -> str:
        return self.root.hex()


def parse_checkpoint_body(text: bytes, what: str = "checkpoint") -> tuple[str, int, bytes]:
    """The origin, size and root of a C2SP tlog-checkpoint body."""
    lines = text.decode("utf-8").split("\n")
    if len(lines) < 4 or lines[-1] != "":
        raise MalformedAnswer(what, "a checkpoint body is origin, size and root lines")
    origin, size_s, root_s = lines[0], lines[1], lines[2]
    if not origin:
        raise MalformedAnswer(what, "empty origin")
    if not size_s.isascii() or not size_s.isdigit() or (size_s != "0" and size_s.startswith("0")):
        raise MalformedAnswer(what, "the size is a decimal number without leading zeros")
    size = int(size_s)
    if size >= 1 << 64:
        raise MalformedAnswer(what, "the size does not fit 64 bits")
    try:
        root = b64decode_strict(what, root_s)
    except InvalidInput:
        raise MalformedAnswer(what, "the root is not base64") from None
    if len(root) != 32:
        raise MalformedAnswer(what, "the root is 32 bytes")
    if any(line == "" for line in lines[3:-1]):
        raise MalformedAnswer(what, "empty extension line")
    return origin, size, root


def open_checkpoint(note: Union[str, bytes], keys: Sequence[KeyLike], what: str = "checkpoint") -> tuple[Checkpoint, VerifierKey]:
    """Verifies a signed checkpoint with one of `keys`; its origin must be that key's name."""
    text, key = open_note(note, keys, what)
    origin, size, root = parse_checkpoint_body(text, what)
    if origin != key.name:
        raise BadSignature(what, f"origin `{origin}` is not the key's name `{key.name}`")
    note_s = note if isinstance(note, str) else note.decode("utf-8")
    return Checkpoint(origin, size, root, note_s), key
