#!/usr/bin/env python3
"""A reconciler: propose a pending case from a production incident (it can write nothing else).

    python3 examples/python/reconciler.py --server http://127.0.0.1:7878 --key "$(cat verifier.key)" --keys-dir keys

Uses the keys harness.py wrote. The proposal stays pending, and is never
scored, until two curators approve it. It names the case first, so it gives
the case its handle (payload schema 3, docs/PRIVACY.md): the case id is
committed, and the approval and every score name the handle.
"""

import argparse
import hashlib
import os
from pathlib import Path

from evidence_ledger import Client, SigningKey, problems
from evidence_ledger import events as ev


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default="http://127.0.0.1:7878")
    ap.add_argument("--key", required=True)
    ap.add_argument("--keys-dir", required=True)
    args = ap.parse_args()
    keys = Path(args.keys_dir)
    client = Client(args.server, args.key)
    me = SigningKey.load(keys / "reconciler.key")
    name = (keys / "task_class").read_text().strip()
    incident = f"INC-{os.urandom(2).hex()}"
    # Nothing public is derived from the incident (docs/PRIVACY.md, "Handles"):
    # the proposal id is random, and the digests are of the case's own bytes
    # (here, stand-ins made of random bytes).
    case_bytes = os.urandom(32)
    draft = ev.CaseDraft(f"{name}-{incident}", f"regression from {incident}", "negative", "hard",
                         "corpus-derived", "blake3:" + hashlib.sha256(case_bytes).hexdigest(),
                         "blake3:" + hashlib.sha256(b"cassette " + case_bytes).hexdigest())
    proposal = ev.CaseProposed(f"proposal-{os.urandom(8).hex()}", name, draft,
                               f"outcome-ledger {incident}").sign(me)
    r = client.post(proposal)
    print(f"proposed {draft.case_id} as {proposal.handle}: entry {r.index}, pending until two curators approve it")
    sneaky, bound = draft.bind()
    try:
        client.post(ev.CaseAdded.cosigned(name, sneaky, source="curated", source_ref="sneaky",
                                          added_at="2026-11-20T00:00:00Z", added_by=me,
                                          reviewed_by=SigningKey.generate("nobody")).sign(me, bound=[bound]))
        raise SystemExit("a reconciler added a case")
    except problems.RoleNotPermitted as e:
        print(f"a reconciler cannot add a case: {e.code}")
    print("OK")


if __name__ == "__main__":
    main()
