"""An audit of a running server, trusting only a verifier key and the
checkpoint saved by the last audit (as `ledger audit` does):

1. the latest checkpoint is signed by a trusted key (and, for a client
   with a witness policy, cosigned by witnesses that meet its quorum);
2. it is not older than the trusted one, and a consistency proof shows the
   trusted tree is a prefix of it;
3. `samples` random entries re-hash to their leaf hash and are proven
   included under the checkpoint's root;
4. every task class's projection verifies (evidence proofs, statistics
   recomputed from the evidence) and was computed at a checkpoint
   consistent with the audited one.

On success the trusted state holds the new checkpoint. What it does not
prove: that nothing was left out of a projection (replay does), and, without
a witness policy, that other clients see the same log (anchors and witnesses do).
The CLI's `audit --anchors DIR` then requires the checkpoint it saves to
extend every anchor in DIR (`anchors.check_anchors`), before saving it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional

from .client import Client
from .errors import VerificationError


@dataclass(frozen=True)
class AuditReport:
    size: int
    root: str
    previous_size: Optional[int]
    entries_checked: int
    projections_checked: int
    evidence_checked: int
    #: The witnesses (key names) whose cosignatures on the audited checkpoint
    #: verified, when the client has a witness policy; empty otherwise.
    cosigned: tuple[str, ...] = ()


def audit(client: Client, *, samples: int = 16, seed: Optional[int] = None) -> AuditReport:
    """Runs the audit (see the module's doc); raises a `VerificationError` on a lie."""
    previous = client.trust.size
    cosigned: tuple[str, ...] = ()
    if client.policy is not None:
        w = client.witnessed_checkpoint()
        cp = w.checkpoint
        cosigned = tuple(c.witness for c in w.cosigned)
    else:
        cp = client.checkpoint()
    rng = random.Random(seed)
    n = min(samples, cp.size)
    for _ in range(n):
        client.entry(rng.randrange(cp.size), cp.size)
    projections = 0
    evidence = 0
    for c in client.task_classes():
        p = client.projection(c.task_class)
        projections += 1
        evidence += len(p.evidence)
    if client.trust.checkpoint is None:
        raise VerificationError("checkpoint", "no checkpoint was verified")
    return AuditReport(
        size=cp.size,
        root=cp.root_hex,
        previous_size=previous,
        entries_checked=n,
        projections_checked=projections,
        evidence_checked=evidence,
        cosigned=cosigned,
    )
