"""Simulated sequential survival gates: wrong decisions and episodes needed, by true survival rate.

A figure, not a test. Each simulated run plays EPISODES episodes whose outcomes (survived TURN or
not) are i.i.d. Bernoulli(rate); the sequential gate (pytest_ncp.analysis.sequential.SequentialGate)
peeks after every episode and stops at its first decision; otherwise the run goes to the end and
decides as the fixed gate does (survival >= threshold; with no censoring the Kaplan-Meier estimate
is the share that survived). For contrast, "naive peeking" stops as soon as a fixed-sample Wilson
95% interval excludes the threshold.

Wrong decision: a pass when rate < threshold, a fail when rate > threshold. At rate == threshold:
* for an early decision (sequential, naive peeking) both a pass and a fail are wrong: a pass
  claims survival is above the threshold, a fail that it is below, and neither is true; this is
  the error the anytime guarantee bounds (by alpha/2 per side, alpha in all);
* for a verdict at the end (the fixed gate, and sequential + fallback) a fail is wrong: the gate's
  own rule is "passes when survival >= RATE", which a narrator at exactly RATE meets. That verdict
  is a coin flip at the threshold by construction, sequential or not.

    python benchmarks/sequential.py                  # 10,000 runs per rate (about a minute on 2 cores)
    python benchmarks/sequential.py --runs 2000      # a quicker look
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone

from pytest_ncp.analysis.sequential import FAIL, PASS, PairedSequentialTest, SequentialGate

RATES = [0.0, 0.05, 0.1, 0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.8, 1.0]
Z95 = 1.959964
CHUNK = 500


def wilson_excludes(s: int, n: int, threshold: float) -> str | None:
    p = s / n
    denom = 1 + Z95 * Z95 / n
    centre = (p + Z95 * Z95 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95 * Z95 / (4 * n * n)) / denom
    if centre - half > threshold:
        return PASS
    if centre + half < threshold:
        return FAIL
    return None


def simulate_rate(args: tuple[float, int, int, float, float, int]) -> dict:
    """``runs`` simulated runs at one true rate; counts and per-run episodes needed."""
    rate, runs, episodes, threshold, alpha, seed = args
    rng = random.Random(seed)
    out = {"seq_pass": 0, "seq_fail": 0, "final_pass": 0, "fixed_pass": 0, "changed": 0,
           "naive_pass": 0, "naive_fail": 0, "needed": [], "naive_needed": []}
    for _ in range(runs):
        xs = [rng.random() < rate for _ in range(episodes)]
        fixed = sum(xs) / episodes >= threshold
        gate = SequentialGate(threshold, alpha)
        for x in xs:
            if gate.observe(x):
                break
        decision = gate.decision
        final = fixed if decision is None else decision == PASS
        out["seq_pass"] += decision == PASS
        out["seq_fail"] += decision == FAIL
        out["final_pass"] += final
        out["fixed_pass"] += fixed
        out["changed"] += final != fixed
        out["needed"].append(gate.decided_after or episodes)
        s, naive, used = 0, None, episodes
        for n, x in enumerate(xs, start=1):
            s += x
            naive = wilson_excludes(s, n, threshold)
            if naive:
                used = n
                break
        out["naive_pass"] += naive == PASS
        out["naive_fail"] += naive == FAIL
        out["naive_needed"].append(used)
    return out


def simulate_pool(args: tuple[list[float], int, float, float, int]) -> dict:
    """Runs over one fixed pool of episodes of unequal difficulty, each run a fresh random order."""
    pool, runs, threshold, alpha, seed = args
    rng = random.Random(seed)
    out = {"seq_pass": 0, "seq_fail": 0, "needed": []}
    for _ in range(runs):
        order = pool[:]
        rng.shuffle(order)
        gate = SequentialGate(threshold, alpha)
        for p in order:
            if gate.observe(rng.random() < p):
                break
        out["seq_pass"] += gate.decision == PASS
        out["seq_fail"] += gate.decision == FAIL
        out["needed"].append(gate.decided_after or len(pool))
    return out


def simulate_paired(args: tuple[float, float, float, int, int, float, int]) -> dict:
    base, new, margin, runs, pairs, alpha, seed = args
    rng = random.Random(seed)
    out = {"regression": 0, "non_inferior": 0, "needed": []}
    for _ in range(runs):
        test = PairedSequentialTest(margin, alpha)
        for _ in range(pairs):
            if test.observe(rng.random() < base, rng.random() < new):
                break
        out["regression"] += test.decision == "regression"
        out["non_inferior"] += test.decision == "non-inferior"
        out["needed"].append(test.decided_after or pairs)
    return out


def merge(parts: list[dict]) -> dict:
    total: dict = {}
    for part in parts:
        for key, value in part.items():
            total[key] = total.get(key, [] if isinstance(value, list) else 0) + value
    return total


def chunks(runs: int) -> list[int]:
    return [min(CHUNK, runs - i) for i in range(0, runs, CHUNK)]


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000, help="simulated runs per true rate (default 10,000)")
    ap.add_argument("--episodes", type=int, default=100, help="episodes per run (default 100)")
    ap.add_argument("--threshold", type=float, default=0.4)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-extras", action="store_true", help="only the main table (no pools, no paired test)")
    a = ap.parse_args(argv)
    n, th, alpha = a.episodes, a.threshold, a.alpha
    started = time.perf_counter()
    print(f"# sequential survival gate: threshold {th:g}, alpha {alpha:g} ({alpha / 2:g} per side), "
          f"{a.runs:,} runs x {n} episodes per rate, peeking after every episode")
    print(f"# {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, Python {platform.python_version()}, "
          f"{os.cpu_count()} cores, {a.workers} worker process(es), seed {a.seed}")

    with ProcessPoolExecutor(max_workers=a.workers) as pool:
        jobs = {rate: [pool.submit(simulate_rate, (rate, k, n, th, alpha, a.seed * 1_000_003 + r * 10_007 + c))
                       for c, k in enumerate(chunks(a.runs))] for r, rate in enumerate(RATES)}
        extras = {}
        if not a.no_extras:
            pools = {
                "half the specs never survive, half 80%": [0.0] * (n // 2) + [0.8] * (n - n // 2),
                "specs that always or never survive (40% always)": [1.0] * round(0.4 * n) + [0.0] * (n - round(0.4 * n)),
                "half 10%, half 70%": [0.1] * (n // 2) + [0.7] * (n - n // 2),
                "half 0%, half 70% (pool 35%)": [0.0] * (n // 2) + [0.7] * (n - n // 2),
                "half 10%, half 90% (pool 50%)": [0.1] * (n // 2) + [0.9] * (n - n // 2),
            }
            extras["pools"] = {name: [pool.submit(simulate_pool, (p, k, th, alpha, a.seed * 7 + i * 101 + c))
                                      for c, k in enumerate(chunks(a.runs))] for i, (name, p) in enumerate(pools.items())}
            extras["pool_means"] = {name: sum(p) / len(p) for name, p in pools.items()}
            cases = [(0.6, 0.6, 0.0), (0.6, 0.5, 0.0), (0.6, 0.4, 0.0), (0.6, 0.3, 0.0), (0.8, 0.3, 0.0),
                     (0.6, 0.6, 0.1), (0.6, 0.55, 0.1), (0.6, 0.45, 0.1)]
            extras["paired"] = {case: [pool.submit(simulate_paired, (*case, k, n, alpha, a.seed * 13 + i * 1009 + c))
                                       for c, k in enumerate(chunks(a.runs))] for i, case in enumerate(cases)}
        results = {rate: merge([f.result() for f in fs]) for rate, fs in jobs.items()}
        pool_results = {name: merge([f.result() for f in fs]) for name, fs in extras.get("pools", {}).items()}
        paired_results = {case: merge([f.result() for f in fs]) for case, fs in extras.get("paired", {}).items()}

    print()
    print("| true rate | seq. pass | seq. fail | **wrong: sequential alone** | wrong: seq. + fixed fallback "
          "| wrong: fixed gate alone | verdict changed vs full fixed run | episodes needed, mean (median) "
          "| wrong: naive Wilson peeking |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rate in RATES:
        r, runs = results[rate], a.runs
        sp, sf = r["seq_pass"] / runs, r["seq_fail"] / runs
        final_pass, fixed_pass = r["final_pass"] / runs, r["fixed_pass"] / runs
        naive_pass, naive_fail = r["naive_pass"] / runs, r["naive_fail"] / runs
        if rate < th:
            wrong_seq, wrong_final, wrong_fixed, wrong_naive = sp, final_pass, fixed_pass, naive_pass
        elif rate > th:
            wrong_seq, wrong_final, wrong_fixed, wrong_naive = sf, 1 - final_pass, 1 - fixed_pass, naive_fail
        else:
            wrong_seq, wrong_naive = sp + sf, naive_pass + naive_fail
            wrong_final, wrong_fixed = 1 - final_pass, 1 - fixed_pass
        needed = r["needed"]
        print(f"| {rate:g}{' (threshold)' if rate == th else ''} | {pct(sp)} | {pct(sf)} | **{pct(wrong_seq)}** "
              f"| {pct(wrong_final)} | {pct(wrong_fixed)} | {pct(r['changed'] / runs)} "
              f"| {pct(statistics.fmean(needed) / n)} ({pct(statistics.median(needed) / n)}) | {pct(wrong_naive)} |")

    if pool_results:
        print()
        print(f"Fixed pools of {n} episodes of unequal difficulty, a fresh random order each run "
              f"(sampling without replacement; the guarantee is proven for i.i.d. episodes only):")
        print()
        print("| pool | pool survival | seq. pass | seq. fail | episodes needed, mean |")
        print("|---|---|---|---|---|")
        for name, r in pool_results.items():
            print(f"| {name} | {pct(extras['pool_means'][name])} | {pct(r['seq_pass'] / a.runs)} "
                  f"| {pct(r['seq_fail'] / a.runs)} | {pct(statistics.fmean(r['needed']) / n)} |")
    if paired_results:
        print()
        print(f"Sequential paired check (`ncp compare --sequential`), {n} pairs, base and new independent given the rates:")
        print()
        print("| base | new | margin | regression | non-inferior | pairs needed, mean |")
        print("|---|---|---|---|---|---|")
        for (base, new, margin), r in paired_results.items():
            print(f"| {base:g} | {new:g} | {margin:g} | {pct(r['regression'] / a.runs)} "
                  f"| {pct(r['non_inferior'] / a.runs)} | {pct(statistics.fmean(r['needed']) / n)} |")
    print()
    print(f"# runtime {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
