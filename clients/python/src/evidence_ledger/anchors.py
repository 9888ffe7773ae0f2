"""Anchors: the audited tree must extend every signed checkpoint kept in an anchors
directory (`ledger audit --anchors DIR` in Rust: `anchors::check_anchors`, and
`api::rekor::check_bundles` for the Rekor bundles kept beside them).

An anchors directory holds one file per anchor, named
`<UTC date>T<time>Z-<size>.checkpoint` by `ledger anchor publish` (or `ledger serve`
on its schedule), each a C2SP signed checkpoint of the log. Other files are ignored,
except the Rekor bundles `<anchor file name>.sigstore.json` kept beside an anchor.

`check_anchors(source, anchors, keys, checkpoint)` checks every anchor, oldest first
(by name), against a checkpoint already verified (the audited one):

1. it opens as a checkpoint signed by one of `keys`, its origin the signing key's name
   (`AnchorUnknownKey` otherwise);
2. its origin is the checkpoint's (`AnchorWrongLog`);
3. it is not larger than the checkpoint (`AnchorTruncation`);
4. at the same size, it has the same root (`AnchorRewrite`); at a smaller size, the
   consistency proof `source` gives from the anchor's size to the checkpoint's leads
   to both roots (`AnchorFork`; the proof is the server's, checked here).

`check_rekor_bundles(anchors, identity, issuer, trusted_root)` checks each anchor's
kept bundle offline (`sigstore_check.verify_message`, with sigstore-python): a
Sigstore message signature by that identity and OIDC issuer over exactly the bytes of
the anchor file, logged in Rekor, against the trusted root. A bundle beside no anchor
fails (`AnchorBundleStray`); an anchor without a bundle is listed as not yet
published, or fails with `require_all` (`AnchorBundleMissing`). Only keyless bundles
(a Fulcio certificate naming the identity) are checked here: sigstore-python reads no
bundle signed by a bare key, so bundles signed with an anchoring key (`ledger anchor
publish --rekor-key`) are checked by the Rust `ledger audit --rekor-pub`.

What an anchor proves: the log's key signed that (size, root), and the audited tree
extends it, so a log rebuilt or rewritten since cannot pass without the key. What it
does not: anything about an anchor that is no longer in the directory. Whoever can
rewrite the directory can delete anchors (a bundle left behind fails as a stray, but
an anchor removed with its bundle leaves no trace here): keep the anchors where the
log's host cannot rewrite them (a git repository it cannot push to with force,
another machine), and read them from there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Protocol, Sequence, Union

from .errors import (
    AnchorBundleInvalid,
    AnchorBundleMissing,
    AnchorBundleStray,
    AnchorFork,
    AnchorRewrite,
    AnchorTruncation,
    AnchorUnknownKey,
    AnchorWrongLog,
    InvalidInput,
    MalformedAnswer,
    ProblemError,
    ProofMismatch,
    VerificationError,
)
from .merkle import EMPTY_ROOT, verify_consistency
from .note import Checkpoint, KeyLike, open_checkpoint

#: The suffix of an anchor file.
ANCHOR_SUFFIX = ".checkpoint"
#: The suffix of a kept Rekor bundle: `<anchor file name>.sigstore.json`.
BUNDLE_SUFFIX = ".sigstore.json"


class ProofSource(Protocol):
    """What gives consistency proofs (a `Client`): the server's proof between two tree
    sizes, unverified (it is checked here)."""

    def consistency_proof(self, first: int, second: int) -> list[bytes]: ...


#: A proof source, or a function (first, second) -> proof hashes.
ProofSourceLike = Union[ProofSource, Callable[[int, int], list[bytes]]]


@dataclass(frozen=True)
class Anchor:
    """An anchor file as read: its name, its bytes, and the bytes of the Rekor bundle
    kept beside it (`None` when there is none)."""

    name: str
    note: bytes
    bundle: Optional[bytes] = None

    @property
    def bundle_name(self) -> str:
        return self.name + BUNDLE_SUFFIX


@dataclass(frozen=True)
class AnchorsDir:
    """An anchors directory read once: its anchors, sorted by name (oldest first), and
    the names of the Rekor bundles that stand beside no anchor file. Both checks read
    the same bytes."""

    path: Path
    anchors: tuple[Anchor, ...]
    strays: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckedAnchor:
    """An anchor the audited tree extends: its file name and its verified checkpoint."""

    name: str
    checkpoint: Checkpoint

    @property
    def size(self) -> int:
        return self.checkpoint.size


@dataclass(frozen=True)
class BundlesChecked:
    """What the check of the kept Rekor bundles found: the anchors whose bundle verified,
    and those without a bundle (not yet published to Rekor), by file name."""

    verified: tuple[str, ...]
    missing: tuple[str, ...]


AnchorsLike = Union[str, "os.PathLike[str]", AnchorsDir]


def read_anchors(directory: Union[str, "os.PathLike[str]"]) -> AnchorsDir:
    """Reads every anchor file of `directory` (`*.checkpoint`, sorted by name) with the
    Rekor bundle kept beside it, and lists the bundles beside no anchor. A directory
    that does not exist is `InvalidInput` (no anchors to check is not a pass)."""
    path = Path(directory)
    if not path.is_dir():
        raise InvalidInput(str(path), "the anchors directory does not exist (or is not a directory)")
    names = sorted(os.listdir(path))
    anchor_names = [n for n in names if n.endswith(ANCHOR_SUFFIX)]
    bundle_names = {n for n in names if n.endswith(BUNDLE_SUFFIX)}
    anchors: list[Anchor] = []
    for n in anchor_names:
        note = (path / n).read_bytes()
        bundle = (path / (n + BUNDLE_SUFFIX)).read_bytes() if n + BUNDLE_SUFFIX in bundle_names else None
        anchors.append(Anchor(n, note, bundle))
    kept = {a.bundle_name for a in anchors}
    strays = tuple(sorted(b for b in bundle_names if b not in kept))
    return AnchorsDir(path, tuple(anchors), strays)


def _as_dir(anchors: AnchorsLike) -> AnchorsDir:
    return anchors if isinstance(anchors, AnchorsDir) else read_anchors(anchors)


def _fetcher(source: ProofSourceLike) -> Callable[[int, int], list[bytes]]:
    if callable(source):
        return source
    return source.consistency_proof


def open_anchor(anchor: Anchor, keys: Sequence[KeyLike], origin: str) -> Checkpoint:
    """The anchor's checkpoint, signed by one of `keys` (any of them: keys from before a
    rotation stay trusted), naming the log `origin`. `AnchorUnknownKey` or
    `AnchorWrongLog` otherwise."""
    last = "no trusted keys"
    for k in keys:
        # One key at a time, as the Rust check does: the first that opens it (its origin
        # that key's name) is the one.
        try:
            cp, _ = open_checkpoint(anchor.note, [k], f"anchor {anchor.name}")
        except (VerificationError, InvalidInput) as e:
            last = e.reason if isinstance(e, VerificationError) else str(e)
            continue
        if cp.origin != origin:
            raise AnchorWrongLog(anchor.name, origin, cp.origin)
        return cp
    raise AnchorUnknownKey(anchor.name, f"signed by no trusted key ({last})")


def check_anchors(
    source: ProofSourceLike,
    anchors: AnchorsLike,
    keys: Sequence[KeyLike],
    checkpoint: Checkpoint,
) -> list[CheckedAnchor]:
    """Checks that `checkpoint` (verified already: the audited one) extends every anchor
    of `anchors` (a directory, or one read with `read_anchors`); see the module's doc.
    Returns the anchors checked, oldest first; raises the `AnchorError` of the first
    that fails, naming its file. A network failure while fetching a proof is a
    `TransportError`, not a failed check."""
    d = _as_dir(anchors)
    fetch = _fetcher(source)
    size, root = checkpoint.size, checkpoint.root
    out: list[CheckedAnchor] = []
    for a in d.anchors:
        cp = open_anchor(a, keys, checkpoint.origin)
        if cp.size > size:
            raise AnchorTruncation(a.name, size, cp.size)
        if cp.size == size:
            if cp.root != root:
                raise AnchorRewrite(a.name, size, root.hex(), cp.root.hex())
        elif cp.size == 0:
            # The empty tree is a prefix of every tree; its root is SHA-256 of nothing.
            if cp.root != EMPTY_ROOT:
                raise AnchorFork(a.name, 0, size, "the root of the empty tree is SHA-256 of nothing")
        else:
            try:
                proof = fetch(cp.size, size)
            except (ProblemError, MalformedAnswer, InvalidInput) as e:
                raise AnchorFork(a.name, cp.size, size, f"the server gave no proof: {e}") from None
            try:
                verify_consistency(cp.size, cp.root, size, root, proof)
            except ProofMismatch as e:
                raise AnchorFork(a.name, cp.size, size, e.reason) from None
        out.append(CheckedAnchor(a.name, cp))
    return out


def check_rekor_bundles(
    anchors: AnchorsLike,
    identity: str,
    issuer: str,
    trusted_root: str,
    *,
    require_all: bool = False,
    now: Optional[int] = None,
) -> BundlesChecked:
    """Checks the Rekor bundle kept beside each anchor of `anchors`, offline: it must
    verify (`sigstore_check.verify_message`) as a Sigstore message signature by the
    certificate naming `identity` and `issuer`, over exactly the anchor file's bytes,
    logged in Rekor, against `trusted_root` (its JSON). A bundle beside no anchor is
    `AnchorBundleStray`; an anchor without a bundle is listed in `missing`, or, with
    `require_all`, `AnchorBundleMissing`; a bundle that does not verify is
    `AnchorBundleInvalid` naming the anchor and the refusal's code. Needs
    sigstore-python (`SigstoreUnavailable` otherwise, whether or not there is a bundle
    to check); a trusted root that is not one is `InvalidInput`."""
    from . import sigstore_check

    if not sigstore_check.available():
        from .errors import SigstoreUnavailable

        raise SigstoreUnavailable("the Rekor bundles kept beside the anchors")
    try:
        sigstore_check.check_root(trusted_root)
    except sigstore_check.Refusal as e:
        raise InvalidInput("trusted_root", e.detail, e.code) from None
    d = _as_dir(anchors)
    if d.strays:
        raise AnchorBundleStray(d.strays[0])
    verified: list[str] = []
    missing: list[str] = []
    for a in d.anchors:
        if a.bundle is None:
            if require_all:
                raise AnchorBundleMissing(a.name)
            missing.append(a.name)
            continue
        try:
            text = a.bundle.decode("utf-8")
        except UnicodeDecodeError:
            raise AnchorBundleInvalid(a.name, a.bundle_name, "sigstore_bundle_malformed", "the bundle is not UTF-8") from None
        try:
            sigstore_check.verify_message(text, a.note, identity, issuer, trusted_root, now=now)
        except sigstore_check.Refusal as e:
            raise AnchorBundleInvalid(a.name, a.bundle_name, e.code, e.detail) from None
        verified.append(a.name)
    return BundlesChecked(tuple(verified), tuple(missing))
