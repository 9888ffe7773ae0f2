#!/usr/bin/env python3
"""The evaluation harness: enrol principals, register a task class, add cases, post scores.

    python3 examples/python/harness.py --server http://127.0.0.1:7878 \
        --key "$(cat verifier.key)" --operator-key ledger-data/operator.key --keys-dir keys

Built on the `evidence-ledger` package (pip install ./clients/python). Every
receipt it prints was checked: the checkpoint signature against the key you
gave, the inclusion proof, and that the proven leaf is the envelope posted.
It writes the keys of the principals it enrols to --keys-dir, for
reconciler.py and gate.py, and the task class name to keys/task_class.

Events are signed in payload schema 3 (docs/PRIVACY.md): sensitive values
are committed, and a case is named by its handle, the digest of the
commitment to its name. The curators co-sign that handle, so each case is
given its handle before they sign (`CaseDraft.bind`), and every score names
the handle, never the name.
"""

import argparse
import hashlib
import os
from pathlib import Path

from evidence_ledger import Client, SigningKey, problems
from evidence_ledger import events as ev


def digest(tag: str) -> str:
    return "blake3:" + hashlib.sha256(tag.encode()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default="http://127.0.0.1:7878")
    ap.add_argument("--key", required=True, help="the log's note verifier key, obtained out of band")
    ap.add_argument("--operator-key", required=True)
    ap.add_argument("--keys-dir", required=True)
    args = ap.parse_args()
    keys = Path(args.keys_dir)
    keys.mkdir(parents=True, exist_ok=True)
    client = Client(args.server, args.key)
    operator = SigningKey.load(args.operator_key)
    name = f"example-{os.urandom(3).hex()}"

    people = {"harness": "harness", "curator-a": "curator", "curator-b": "curator",
              "reconciler": "reconciler", "gate": "promotion-gate"}
    k = {}
    for who, role in people.items():
        k[who] = SigningKey.generate(f"{name}-{who}")
        k[who].save(keys / f"{who}.key")
        r = client.post(ev.PrincipalEnrolled.of(k[who], f"{who}@example.org", [role]).sign(operator))
        print(f"enrolled {who:<11} as {role:<15} entry {r.index}")
    (keys / "task_class").write_text(name)

    rubric = digest("rubric v1")
    client.post(ev.TaskClassRegistered(
        task_class=name, silver=ev.TierRule(5, 0.6), gold=ev.TierRule(20, 0.9),
        failure_modes=[ev.FailureMode("build_broken", "block", "the change does not build")],
        breakdown_keys=["correctness"], rubric_digest=rubric,
    ).sign(operator))
    cases = []
    for i in range(6):
        # The case's name (an advisory id, say) is committed; its handle names it.
        case, bound = ev.CaseDraft(f"{name}-case-{i}", f"case {i}", "positive", "medium", "held-out",
                                   digest(f"case {i}"), digest(f"cassette {i}")).bind()
        client.post(ev.CaseAdded.cosigned(name, case, source="curated", source_ref="bench/v1",
                                          added_at="2026-11-20T00:00:00Z",
                                          added_by=k["curator-a"], reviewed_by=k["curator-b"]).sign(k["curator-a"], bound=[bound]))
        cases.append(case)
    print(f"case {cases[0].case_name} is named by its handle {cases[0].case_id}")
    run = f"{name}-run-1"
    client.post(ev.RunStarted(run, name, "harness 1.0", rubric, digest("image")).sign(k["harness"]))
    print(f"registered {name} with {len(cases)} held-out cases co-signed by two curators; run {run} started")

    def score(case: ev.CaseDraft, value: float, breakdown: dict[str, float]) -> ev.ScoreRecorded:
        return ev.ScoreRecorded(
            run_id=run, task_class=name, case_id=case.case_id, case_digest=case.case_digest,
            rubric_digest=rubric, cassette_digest=case.cassette_digest, harness_version="harness 1.0",
            image_digest=digest("image"), score=ev.BenchScore(True, value, breakdown, cost_usd=0.02, duration_seconds=41.0),
            started_at="2026-11-20T00:00:00Z", finished_at="2026-11-20T00:01:00Z", operator_fingerprint="ci-runner-7",
        )

    envelopes = [score(c, 0.86 + 0.02 * i, {"correctness": 0.9}).sign(k["harness"]) for i, c in enumerate(cases)]
    results = client.post_many(envelopes)
    print(f"posted {len(results)} scores in one batch; every receipt checked, "
          f"trusted tree size now {client.trust.size}")
    again = client.post(envelopes[0])
    print(f"re-posted a score: existing={again.existing}, same entry {again.index} (retries are safe)")

    from evidence_ledger.envelope import sign_payload

    body = score(cases[0], 0.99, {"correctness": 0.9}).body()
    body["score"]["breakdown"] = {"model_confidence": 0.99}
    try:
        client.post(sign_payload(k["harness"], "score.recorded", body))
        raise SystemExit("a banned breakdown key was accepted")
    except problems.BreakdownKeyBanned as e:
        print(f"refused as it should be: {e.code} on {e.field}")
    client.post(ev.RunFinished(run).sign(k["harness"]))
    print("OK")


if __name__ == "__main__":
    main()
