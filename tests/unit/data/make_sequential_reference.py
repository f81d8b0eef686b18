"""Writes sequential_confseq.json: reference values for tests/unit/test_sequential.py. Not run by the tests.

The numbers come from the reference implementation of Waudby-Smith & Ramdas (2023), the ``confseq``
package (PyPI, version 0.0.11), installed in a scratch virtualenv that is not the project's (confseq
is not a dependency of pytest-ncp: it needs numpy, scipy and a C++ build). Run once, with that
virtualenv's python:

    python tests/unit/data/make_sequential_reference.py > tests/unit/data/sequential_confseq.json

Calls used (confseq 0.0.11):
* confseq.betting.hedged_cs(x, alpha=ALPHA, theta=THETA, breaks=BREAKS, running_intersection=True)
  (defaults otherwise: trunc_scale=1/2, prior_mean=1/2, prior_variance=1/4, fake_obs=1);
* confseq.betting.betting_mart(x, m, theta=1, trunc_scale=1/2,
      lambdas_fn_positive=lambda x, m: lambda_predmix_eb(x, alpha=ALPHA * THETA))      -> K+_t(m)
  and the same with theta=0, lambdas_fn_negative=... alpha=ALPHA * (1 - THETA)        -> K-_t(m)
  (lambda_predmix_eb from confseq.betting_strategies).
"""

import json
import sys
from importlib.metadata import version

import numpy as np
from confseq.betting import betting_mart, hedged_cs
from confseq.betting_strategies import lambda_predmix_eb

BREAKS = 100_000


def sequences() -> dict[str, list[float]]:
    rng = np.random.default_rng(20260121)
    return {
        "bernoulli_70": [float(v) for v in (rng.random(80) < 0.7)],
        "bernoulli_25": [float(v) for v in (rng.random(80) < 0.25)],
        # values on a 0.001 grid, so the JSON decimals are the exact inputs on both sides
        "bounded": [round(float(v), 3) for v in rng.random(50)],
        # paired differences (1 + base - new) / 2: mostly concordant, some regressions
        "paired": [float(v) for v in rng.choice([0.0, 0.5, 1.0], size=60, p=[0.1, 0.6, 0.3])],
    }


CASES = [
    # (sequence, alpha, theta, candidate means for the capitals)
    ("bernoulli_70", 0.05, 0.5, [0.4, 0.6]),
    ("bernoulli_70", 0.10, 0.3, [0.4]),
    ("bernoulli_25", 0.05, 0.5, [0.4, 0.1]),
    ("bounded", 0.05, 0.5, [0.5]),
    ("paired", 0.05, 0.5, [0.5, 0.55]),
]


def main() -> None:
    seqs = sequences()
    out = {"confseq_version": version("confseq"), "numpy_version": np.__version__,
           "breaks": BREAKS, "sequences": seqs, "cases": []}
    for name, alpha, theta, ms in CASES:
        x = np.array(seqs[name])
        lower, upper = hedged_cs(x, alpha=alpha, theta=theta, breaks=BREAKS, running_intersection=True)
        capitals = {}
        for m in ms:
            kp = betting_mart(x, m, alpha=alpha, theta=1, trunc_scale=0.5,
                              lambdas_fn_positive=lambda x, m: lambda_predmix_eb(x, alpha=alpha * theta))
            kn = betting_mart(x, m, alpha=alpha, theta=0, trunc_scale=0.5,
                              lambdas_fn_negative=lambda x, m: lambda_predmix_eb(x, alpha=alpha * (1 - theta)))
            capitals[str(m)] = {"pos": [float(v) for v in kp], "neg": [float(v) for v in kn]}
        out["cases"].append({"sequence": name, "alpha": alpha, "theta": theta,
                             "lower": [float(v) for v in lower], "upper": [float(v) for v in upper],
                             "capitals": capitals})
        print(f"{name} alpha={alpha} theta={theta} done", file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
