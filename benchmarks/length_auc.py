"""How well a gold case's length alone predicts its label: the length AUC of violation vs clean cases.

    python benchmarks/length_auc.py                   # the gold set in calibration/
    python benchmarks/length_auc.py --set DIR         # another set
    python benchmarks/length_auc.py --live-only       # only the cases built from playthroughs (from_turn)

Figures, not a test. The AUC is the chance that a random violation and a random clean case are told apart
by word count alone (direction-free: 0.5 means length says nothing, 1.0 that it decides); ``ncp calibrate
--check`` warns above 0.6 (``MAX_LENGTH_AUC``). Also printed: the median words of each kind and the best
single length threshold's accuracy against the majority baseline.
"""
from __future__ import annotations

import argparse
import statistics
import sys

from pytest_ncp.calibration.goldset import DEFAULT_SET, load_gold_set
from pytest_ncp.calibration.playthrough import MAX_LENGTH_AUC, length_auc
from pytest_ncp.core.quotes import words


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default=DEFAULT_SET, help=f"gold set directory (default {DEFAULT_SET})")
    parser.add_argument("--live-only", action="store_true", help="only cases built from playthroughs (from_turn)")
    args = parser.parse_args()
    gold = load_gold_set(args.set)
    cases = [c for c in gold.cases if c.from_turn is not None] if args.live_only else gold.cases
    violations = sorted(words(c.response) for c in cases if c.violation)
    clean = sorted(words(c.response) for c in cases if not c.violation)
    if not violations or not clean:
        print(f"{args.set}: {len(violations)} violation(s), {len(clean)} clean case(s): no AUC without both")
        return 1
    auc = length_auc(cases)
    assert auc is not None
    lengths = sorted(set(violations + clean))
    # The best rule "at most N words means violation" (or "at least", whichever direction is better).
    best = max(max(sum(v <= n for v in violations) + sum(c > n for c in clean),
                   sum(v > n for v in violations) + sum(c <= n for c in clean)) for n in lengths)
    n = len(cases)
    print(f"{args.set}: {n} case(s), {len(violations)} violation(s) (median {statistics.median(violations):g} words), "
          f"{len(clean)} clean (median {statistics.median(clean):g} words), longest {max(lengths)} words")
    print(f"length AUC, violation vs clean: {auc:.3f} (at most {MAX_LENGTH_AUC} wanted: "
          f"{'ok' if auc <= MAX_LENGTH_AUC else 'length predicts the label'})")
    print(f"best length threshold: {best / n:.1%} accurate, against a majority baseline of "
          f"{max(len(violations), len(clean)) / n:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
