"""The trusted state: the last (size, root) this client verified.

As immudb's and sigstore's clients do, a client keeps the last checkpoint
it verified and requires every later one to be proven consistent with it
(an RFC 6962 consistency proof, verified here). A server that rewrote,
truncated or forked its log since then fails with `ForkDetected`; one that
shows an older tree than already seen fails with `StaleCheckpoint`.

`TrustedState()` keeps it in memory; `TrustedState.file(path)` in a file
(the signed note itself, so the file can be checked again with the key
alone), replaced atomically on every advance, or only when `save()` is
called (`autosave=False`: an audit saves once everything has passed). The
state is only as safe as where it is kept: keep the file where the server
cannot write it.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

from .errors import ForkDetected, ProofMismatch, StaleCheckpoint
from .merkle import verify_consistency
from .note import Checkpoint, KeyLike, open_checkpoint

#: Fetches the consistency proof between two sizes: (first, second) -> proof hashes.
ProofFetcher = Callable[[int, int], list[bytes]]


class TrustedState:
    """The last verified checkpoint, in memory or in a file."""

    def __init__(self, path: Optional[Union[str, Path]] = None, *, autosave: bool = True) -> None:
        self.path = Path(path) if path is not None else None
        self.checkpoint: Optional[Checkpoint] = None
        self.autosave = autosave
        self._lock = threading.Lock()

    @classmethod
    def file(cls, path: Union[str, Path], *, autosave: bool = True) -> "TrustedState":
        """A state kept in `path` (loaded when the client first checks it against a key),
        written on every advance, or with `autosave=False` only by `save()`."""
        return cls(path, autosave=autosave)

    @property
    def size(self) -> Optional[int]:
        return self.checkpoint.size if self.checkpoint else None

    def load(self, keys: Sequence[KeyLike]) -> None:
        """Reads the saved note, if any, and verifies its signature with `keys`."""
        if self.path is None or self.checkpoint is not None or not self.path.exists():
            return
        note = self.path.read_text(encoding="utf-8")
        self.checkpoint, _ = open_checkpoint(note, keys, f"trusted checkpoint {self.path}")

    def save(self) -> None:
        """Writes the trusted checkpoint to the file now (atomically)."""
        if self.path is None or self.checkpoint is None:
            return
        directory = self.path.parent
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".trusted-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(self.checkpoint.note)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def observe(self, cp: Checkpoint, fetch: ProofFetcher, *, allow_older: bool = True, advance: bool = True) -> None:
        """Requires the verified checkpoint `cp` to be consistent with the trusted one.

        A newer `cp` is proven an extension of the trusted tree and becomes
        the trusted one (unless `advance` is false: a client with a witness
        policy advances only to checkpoints that meet its quorum, and only
        checks the others). An older `cp` is proven a prefix of it (the
        trusted state does not move back), or, with `allow_older` false,
        refused as stale. The same size must have the same root.
        """
        with self._lock:
            old = self.checkpoint
            if old is None:
                if advance:
                    self.checkpoint = cp
                    self._advanced()
                return
            if cp.size == old.size:
                if cp.root != old.root:
                    raise ForkDetected("checkpoint", f"two different roots for size {cp.size}")
                return
            if cp.size < old.size and not allow_older:
                raise StaleCheckpoint(old.size, cp.size)
            first, second = (old, cp) if old.size < cp.size else (cp, old)
            proof = fetch(first.size, second.size)
            try:
                verify_consistency(first.size, first.root, second.size, second.root, proof)
            except ProofMismatch as e:
                raise ForkDetected(
                    "checkpoint",
                    f"size {cp.size} is not consistent with the trusted size {old.size}: {e.reason}",
                ) from None
            if cp.size > old.size and advance:
                self.checkpoint = cp
                self._advanced()

    def _advanced(self) -> None:
        if self.autosave:
            self.save()
