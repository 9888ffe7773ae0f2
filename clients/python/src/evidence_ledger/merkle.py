"""RFC 6962 / RFC 9162 hashing and proofs (docs/FORMAT.md sections 1-2).

Leaf hash `SHA-256(0x00 || leaf)`, interior node `SHA-256(0x01 || l || r)`,
inclusion proofs nearest sibling first, consistency proofs in SUBPROOF
order. Also the BLAKE3 content digest and the SHA-256 hash chain over it.
A proof binds a leaf hash, an index and a root; it does not always bind
the tree size, so always verify against a (size, root) taken from one
signed checkpoint.

`evidence_tree` is the tree a `promotion.recommended` entry cites its
evidence by (`events::model::EvidenceTree`): the same hashing over the
canonical JSON of each evidence reference.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Mapping, Sequence, Union

import blake3

from . import canonical
from .errors import InvalidInput, ProofMismatch

#: The root of the empty tree: SHA-256 of nothing.
EMPTY_ROOT = hashlib.sha256(b"").digest()
#: The chain value before entry 0.
GENESIS_CHAIN = bytes(32)
#: The longest proof a tree of up to 2^64 leaves can need.
MAX_PROOF_LEN = 128


def leaf_hash(leaf: bytes) -> bytes:
    """RFC 6962 leaf hash."""
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 interior node hash."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def content_digest(leaf: bytes) -> bytes:
    """BLAKE3 of the leaf (unkeyed, 32 bytes)."""
    return blake3.blake3(leaf).digest()


def chain_hash(prev: bytes, leaf: bytes) -> bytes:
    """`SHA-256(prev_chain || BLAKE3(leaf))`."""
    return hashlib.sha256(prev + content_digest(leaf)).digest()


def parse_hash(field: str, text: object) -> bytes:
    """A hash written as exactly 64 hex digits; `InvalidInput` naming `field` otherwise."""
    if not isinstance(text, str) or len(text) != 64:
        raise InvalidInput(field, "must be hex: 32 bytes, 64 hex digits")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise InvalidInput(field, "must be hex: 32 bytes, 64 hex digits") from None


def parse_proof(field: str, items: object) -> list[bytes]:
    """A proof: a list of hex hashes."""
    if not isinstance(items, list):
        raise InvalidInput(field, "must be a list of hex hashes")
    return [parse_hash(f"{field}[{i}]", h) for i, h in enumerate(items)]


def root_of(leaf_hashes: Sequence[bytes]) -> bytes:
    """The RFC 6962 root of a list of leaf hashes."""
    f = Frontier()
    for h in leaf_hashes:
        f.push(h)
    return f.root()


def evidence_tree_leaf(index: int, leaf_hash_hex: str) -> bytes:
    """The leaf data of one evidence reference: its canonical JSON,
    `{"index":N,"leaf_hash":"..."}`."""
    return canonical.encode({"index": index, "leaf_hash": leaf_hash_hex})


def evidence_tree(refs: Iterable[Union[tuple[int, str], Mapping[str, Any]]]) -> tuple[int, str]:
    """The evidence tree of `refs` in their order, as a recommendation states it:
    (count, hex root). Each reference is an (index, leaf hash) pair or a mapping
    with `index` and `leaf_hash`; the root is the RFC 6962 root over
    `evidence_tree_leaf` of each (`SHA-256("")` for none)."""
    f = Frontier()
    for r in refs:
        index, lh = (r["index"], r["leaf_hash"]) if isinstance(r, Mapping) else r
        f.push(leaf_hash(evidence_tree_leaf(index, lh)))
    return f.size, f.root().hex()


class Frontier:
    """The right edge of a tree being built leaf by leaf: O(log n) memory."""

    def __init__(self) -> None:
        self.size = 0
        self._nodes: list[tuple[int, bytes]] = []

    @classmethod
    def from_nodes(cls, size: int, nodes: Sequence[tuple[int, bytes]]) -> "Frontier":
        """A frontier saved as `nodes` (levels and hashes, largest subtree first) after `size` leaves.
        Raises `InvalidInput` unless the levels are the binary digits of `size`."""
        levels = [lvl for lvl, _ in nodes]
        want = [lvl for lvl in range(size.bit_length() - 1, -1, -1) if size >> lvl & 1]
        if levels != want or any(len(h) != 32 for _, h in nodes):
            raise InvalidInput("frontier", f"not the right edge of a tree of {size} leaves")
        f = cls()
        f.size = size
        f._nodes = list(nodes)
        return f

    @property
    def nodes(self) -> list[tuple[int, bytes]]:
        """The right edge: (level, hash) of each perfect subtree, largest first."""
        return list(self._nodes)

    def push(self, leaf: bytes) -> None:
        level, h = 0, leaf
        while self._nodes and self._nodes[-1][0] == level:
            _, left = self._nodes.pop()
            h = node_hash(left, h)
            level += 1
        self._nodes.append((level, h))
        self.size += 1

    def root(self) -> bytes:
        if not self._nodes:
            return EMPTY_ROOT
        h = self._nodes[-1][1]
        for _, left in reversed(self._nodes[:-1]):
            h = node_hash(left, h)
        return h


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """The root an inclusion proof leads to (RFC 9162 section 2.1.3.2)."""
    if not 0 <= index < size:
        raise ProofMismatch("inclusion_proof", f"index {index} is not below the tree size {size}")
    if len(proof) > MAX_PROOF_LEN:
        raise ProofMismatch("inclusion_proof", "longer than any tree needs")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise ProofMismatch("inclusion_proof", "longer than the tree needs")
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
    if sn != 0:
        raise ProofMismatch("inclusion_proof", "shorter than the tree needs")
    return r


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> None:
    """Raises `ProofMismatch` unless `proof` puts `leaf` at `index` in the tree (`size`, `root`)."""
    if root_from_inclusion(index, size, leaf, proof) != root:
        raise ProofMismatch(
            "inclusion_proof", f"entry {index} is not included under the root of size {size}"
        )


def verify_consistency(
    old_size: int, old_root: bytes, new_size: int, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Raises `ProofMismatch` unless `proof` shows (old_size, old_root) is a prefix of
    (new_size, new_root) (RFC 9162 section 2.1.4.2)."""
    what = "consistency_proof"
    if not 0 <= old_size <= new_size:
        raise ProofMismatch(what, f"old size {old_size} exceeds new size {new_size}")
    if len(proof) > MAX_PROOF_LEN:
        raise ProofMismatch(what, "longer than any tree needs")
    if old_size == 0:
        if proof:
            raise ProofMismatch(what, "a proof from size 0 is empty")
        return
    if old_size == new_size:
        if proof or old_root != new_root:
            raise ProofMismatch(what, f"two different roots for size {old_size}")
        return
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        # old_size is a power of two: the old root is itself a node of the new tree.
        path.insert(0, old_root)
    if not path:
        raise ProofMismatch(what, "empty proof")
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofMismatch(what, "longer than the trees need")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofMismatch(what, "shorter than the trees need")
    if fr != old_root:
        raise ProofMismatch(what, f"does not lead to the trusted root of size {old_size}")
    if sr != new_root:
        raise ProofMismatch(what, f"does not lead to the signed root of size {new_size}")
