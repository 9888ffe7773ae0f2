#!/usr/bin/env python3
"""SciPy reference intervals for the projections' statistics.

    pip install scipy numpy
    python3 projections/testdata/gen_stats_golden.py > projections/testdata/stats_golden.json

Wilson: scipy.stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson").
BCa:    scipy.stats.bootstrap((x,), np.mean, method="BCa", confidence_level=0.95,
        n_resamples=20000, random_state=seed).

The Rust tests compare the Wilson bounds within 1e-9 (a closed form) and the
BCa bounds within 0.01 (both are Monte Carlo estimates with different random
streams; 0.01 is well above their sampling error at 20,000 resamples for
these data and well below any threshold gap that matters for a tier).
"""
import json
import warnings

import numpy as np
import scipy
from scipy import stats

WILSON = [(0, 1), (1, 1), (0, 10), (10, 10), (7, 10), (1, 3), (45, 50), (0, 150), (150, 150), (112, 150), (500, 1000)]

rng = np.random.default_rng(20261122)
DATASETS = {
    "n2": [0.2, 0.9],
    "small": [0.1, 0.4, 0.9, 0.6, 0.8],
    "skewed": [0.95, 0.97, 0.99, 1.0, 0.2, 0.96, 0.98, 0.94, 1.0, 0.93],
    "binary_mostly_pass": [1.0] * 18 + [0.0] * 2,
    "uniform_40": [round(float(v), 6) for v in rng.uniform(0, 1, 40)],
    "beta_150": [round(float(v), 6) for v in rng.beta(8, 2, 150)],
    "near_threshold_30": [round(float(v), 6) for v in rng.normal(0.8, 0.05, 30).clip(0, 1)],
}


def main():
    out = {"scipy_version": scipy.__version__, "confidence": 0.95, "wilson": [], "bca": [], "bca_resamples": 20000}
    for k, n in WILSON:
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        out["wilson"].append({"k": k, "n": n, "low": float(ci.low), "high": float(ci.high)})
    for name, data in DATASETS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stats.bootstrap((np.array(data),), np.mean, method="BCa", confidence_level=0.95,
                                  n_resamples=20000, random_state=12345)
        out["bca"].append({
            "name": name,
            "data": data,
            "mean": float(np.mean(data)),
            "low": float(res.confidence_interval.low),
            "high": float(res.confidence_interval.high),
        })
    # Edges where SciPy has no number: documented as our own definitions.
    out["edges"] = {
        "n0": "no interval (None)",
        "n1": "degenerate [x, x]; SciPy returns NaN",
        "all_equal": "degenerate [x, x]; SciPy returns NaN",
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
