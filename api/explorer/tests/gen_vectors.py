"""Writes selftest_vectors.json, the expected values the explorer's modules
are checked against in the browser (test_explorer.py::test_modules_in_the_browser).

Independent implementations make them: the `blake3` package (the BLAKE3
team's Rust implementation) for the official test-vector inputs (bytes
i % 251), and the Python client's statistics (`evidence_ledger.stats`, the
port of projections/src/stats.rs) for the BCa and Wilson intervals, bit for
bit. Run from the repository root after `pip install ./clients/python`:

    python3 api/explorer/tests/gen_vectors.py
"""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path
from typing import Optional, Sequence

import blake3

from evidence_ledger import stats

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]

#: The input lengths of the official BLAKE3 test vectors the explorer is held to.
BLAKE3_LENGTHS = [0, 1, 1023, 1024, 1025, 2048, 3072, 31744]


def bca(values: Sequence[float], seed: int) -> Optional[stats.Interval]:
    return stats.bca(values, 0.95, 2000, seed)


def main() -> None:
    b3 = [{"input_len": n, "hash": blake3.blake3(bytes(i % 251 for i in range(n))).digest(131).hex()} for n in BLAKE3_LENGTHS]
    golden = json.loads((REPO / "projections/testdata/stats_golden.json").read_text(encoding="utf-8"))
    sets = [(b["name"], b["data"]) for b in golden["bca"]]
    rng = random.Random(11)
    for i in range(6):
        n = rng.choice([3, 7, 20, 40, 64])
        sets.append((f"random-{i}", [round(rng.random(), 3) for _ in range(n)]))
    settings = stats.Settings(30 * 24 * 3600, 0.95, 2000)
    out = []
    for name, data in sets:
        passed = sum(1 for x in data if x >= 0.6)
        seed = stats.bootstrap_seed(name)
        s = stats.score_stats(data, passed, settings, functools.partial(bca, seed=seed))

        def iv(i: Optional[stats.Interval]) -> Optional[dict[str, float]]:
            return None if i is None else {"low": i.low, "high": i.high}

        out.append({
            "name": name, "data": data, "passed": passed, "seed": str(seed),
            "expected": {"cases": s.cases, "mean": s.mean, "mean_ci": iv(s.mean_ci), "passed": s.passed,
                         "pass_rate": s.pass_rate, "pass_rate_ci": iv(s.pass_rate_ci)},
        })
    doc = {"generator": "api/explorer/tests/gen_vectors.py", "blake3": b3, "stats": out,
           "settings": {"confidence": 0.95, "resamples": 2000}}
    (HERE / "selftest_vectors.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
