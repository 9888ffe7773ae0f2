#!/usr/bin/env python3
"""The promotion gate: read a verified projection, ask for a recommendation, archive its bundle.

    python3 examples/python/gate.py --server http://127.0.0.1:7878 --key "$(cat verifier.key)" \
        --keys-dir keys --trusted gate-trusted.note --bundle-out bundle.json

Trusts only the log's verifier key and its own saved checkpoint: every
projection's evidence is proven in a signed checkpoint consistent with the
one it saw last, and the held-out statistics (mean, BCa, Wilson) are
recomputed from the evidence bit for bit. The gate needs no Rust. Asking the
ledger to apply the tier is refused and recorded: only humans promote.
"""

import argparse
from pathlib import Path

from evidence_ledger import Client, SigningKey, TrustedState, problems, verify_bundle
from evidence_ledger import events as ev


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default="http://127.0.0.1:7878")
    ap.add_argument("--key", required=True)
    ap.add_argument("--keys-dir", required=True)
    ap.add_argument("--trusted", required=True, help="where the gate keeps the last checkpoint it verified")
    ap.add_argument("--bundle-out", required=True)
    args = ap.parse_args()
    keys = Path(args.keys_dir)
    gate = SigningKey.load(keys / "gate.key")
    name = (keys / "task_class").read_text().strip()
    client = Client(args.server, args.key, trust=TrustedState.file(args.trusted))

    p = client.projection(name)
    v = p.view
    ci = v.held_out.mean_ci
    print(f"{name}: {v.held_out.cases} held-out cases, mean {v.held_out.mean:.3f} "
          f"[{ci.low:.3f}, {ci.high:.3f}] (recomputed from {len(p.evidence)} proven evidence entries)")
    for r in v.recommendation.rationale:
        print(f"  {'✓' if r.holds else '✗'} {r.rule:<38} {r.detail}")

    answer = client.recommend(ev.PromotionRequested(name).sign(gate))
    rec = answer.projection.view.recommendation
    print(f"recommendation entry {answer.recommendation.index}: {rec.current_tier} -> {rec.recommended_tier}, "
          f"human approval required: {rec.requires_human_approval}")

    try:
        client.post(ev.TierApply(name, rec.recommended_tier).sign(gate))
        raise SystemExit("a tier was applied")
    except problems.PromotionMustBeHumanAuthorized as e:
        print(f"apply refused ({e.code}) and recorded at entry {e.recorded_index}")

    data, summary = client.bundle(name)
    Path(args.bundle_out).write_bytes(data)
    again = verify_bundle(Path(args.bundle_out).read_bytes(), [args.key])
    print(f"bundle saved to {args.bundle_out}: {again.evidence} evidence entries at tree size {again.tree_size}, verified offline")
    print("OK")


if __name__ == "__main__":
    main()
