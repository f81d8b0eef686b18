"""The anytime-valid gates of pytest_ncp.analysis.sequential.

The confidence sequence is pinned against frozen values of the reference implementation, the
``confseq`` package (version 0.0.11), computed once in a scratch virtualenv by
tests/unit/data/make_sequential_reference.py (its docstring gives the exact calls):
``confseq.betting.hedged_cs(x, alpha, theta, breaks=100000, running_intersection=True)`` for the
interval and ``confseq.betting.betting_mart(x, m, theta=1 | 0, trunc_scale=1/2, lambdas_fn_... =
lambda_predmix_eb(x, alpha=alpha*theta | alpha*(1-theta)))`` for the two capital processes.
confseq finds the interval on a grid of 1/breaks and widens it by one step; ours is exact, so each
bound must lie within that one step of confseq's, on the inside.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from pytest_ncp.analysis import sequential as sq
from pytest_ncp.analysis.sequential import (FAIL, NON_INFERIOR, PASS, REGRESSION, ConfidenceSequence,
                                            PairedSequentialTest, SequentialGate, StartOrder, combine_e_values,
                                            merge_shards, seeded_order, sequential_gate, shard_alpha, shard_slice)

REFERENCE = json.loads((Path(__file__).parent / "data" / "sequential_confseq.json").read_text(encoding="utf-8"))
CASES = [pytest.param(c, id=f"{c['sequence']}-a{c['alpha']}-theta{c['theta']}") for c in REFERENCE["cases"]]


def bernoulli(p: float, n: int, rng: random.Random) -> list[bool]:
    return [rng.random() < p for _ in range(n)]


# --- pinned against confseq ---------------------------------------------------------------------------


def test_reference_data_is_confseq_0_0_11():
    assert REFERENCE["confseq_version"] == "0.0.11" and REFERENCE["breaks"] == 100_000


@pytest.mark.parametrize("case", CASES)
def test_capital_processes_match_confseq(case):
    x = REFERENCE["sequences"][case["sequence"]]
    cs = ConfidenceSequence(case["alpha"], split=case["theta"]).extend(x)
    for m, ref in case["capitals"].items():
        for t in range(1, len(x) + 1):
            log_pos, log_neg = cs.log_capitals(float(m), t)
            assert math.exp(log_pos) == pytest.approx(ref["pos"][t - 1], rel=1e-9), (m, t)
            assert math.exp(log_neg) == pytest.approx(ref["neg"][t - 1], rel=1e-9), (m, t)


@pytest.mark.parametrize("case", CASES)
def test_interval_matches_confseq_hedged_cs(case):
    x = REFERENCE["sequences"][case["sequence"]]
    step = 1.0 / REFERENCE["breaks"]
    history = ConfidenceSequence(case["alpha"], split=case["theta"]).extend(x).history()
    assert len(history) == len(x)
    for t, (lo, hi) in enumerate(history):
        ref_lo, ref_hi = case["lower"][t], case["upper"][t]
        assert ref_lo - 1e-9 <= lo <= ref_lo + step + 1e-9, (t, lo, ref_lo)
        assert ref_hi - step - 1e-9 <= hi <= ref_hi + 1e-9, (t, hi, ref_hi)


def test_the_pin_would_catch_a_different_split():
    """The bounds depend on the split enough for the one-step tolerance to notice a wrong one."""
    case = next(c for c in REFERENCE["cases"] if c["theta"] == 0.3)
    x = REFERENCE["sequences"][case["sequence"]]
    lo, hi = ConfidenceSequence(case["alpha"], split=0.5).extend(x).bounds()
    assert abs(lo - case["lower"][-1]) > 10 / REFERENCE["breaks"] or abs(hi - case["upper"][-1]) > 10 / REFERENCE["breaks"]


# --- the confidence sequence itself --------------------------------------------------------------------


def test_interval_is_nested_and_holds_the_mean():
    rng = random.Random(3)
    cs = ConfidenceSequence(0.05)
    previous = (0.0, 1.0)
    for x in bernoulli(0.3, 200, rng):
        cs.update(x)
        lo, hi = cs.bounds()
        assert previous[0] <= lo <= hi <= previous[1]
        previous = (lo, hi)
    assert lo < cs.mean < hi
    assert hi - lo < 0.3


def test_no_observation_no_information():
    cs = ConfidenceSequence()
    assert cs.bounds() == (0.0, 1.0) and cs.n == 0 and cs.mean is None
    assert cs.decide(0.4).verdict is None


@pytest.mark.parametrize("bad", [dict(alpha=0.0), dict(alpha=1.0), dict(split=0.0), dict(split=1.0),
                                 dict(trunc=1.0), dict(trunc=0.0)])
def test_invalid_parameters_are_refused(bad):
    with pytest.raises(ValueError):
        ConfidenceSequence(**bad)


def test_observations_outside_unit_interval_are_refused():
    with pytest.raises(ValueError, match="within \\[0, 1\\]"):
        ConfidenceSequence().update(1.5)
    with pytest.raises(ValueError):
        SequentialGate(1.2)


def test_gate_decision_is_the_interval_crossing_the_threshold():
    """Pass exactly when the lower bound reaches RATE, fail exactly when the upper bound does."""
    rng = random.Random(11)
    seen = {PASS: 0, FAIL: 0, None: 0}
    for run in range(120):
        p = rng.choice([0.1, 0.3, 0.4, 0.5, 0.7])
        gate = SequentialGate(0.4, 0.05)
        first_cross = None
        for t, x in enumerate(bernoulli(p, 80, rng), start=1):
            gate.observe(x)
            lo, hi = gate.lower, gate.upper
            if first_cross is None and (lo >= 0.4 or hi <= 0.4):
                first_cross = (PASS if lo >= 0.4 else FAIL, t)
        decided = (gate.decision, gate.decided_after) if gate.decision else None
        assert decided == first_cross, run
        assert gate.cs.decide(0.4).verdict == gate.decision
        assert gate.cs.decide(0.4).at == gate.decided_after
        seen[gate.decision] += 1
    assert all(seen.values())   # the check saw passes, fails and undecided runs


# --- the gate --------------------------------------------------------------------------------------


def test_never_conflicting_narrator_passes_early():
    gate = SequentialGate(0.4, 0.05, planned=100)
    for _ in range(100):
        if gate.observe(True):
            break
    assert gate.decision == PASS
    assert gate.decided_after <= 10          # 7 with these bets: 10 of 100 is plenty of room
    verdict = gate.verdict(fixed_passed=True)
    assert verdict.passed and verdict.by == "sequential"
    assert verdict.text() == f"decided after {gate.decided_after} of 100 episodes"
    assert gate.lower >= 0.4 and gate.e_pass >= 1 / 0.025


def test_always_failing_narrator_fails_early():
    gate = SequentialGate(0.4, 0.05)
    steps = 0
    while gate.observe(False) is None:
        steps += 1
        assert steps < 100
    assert gate.decision == FAIL and gate.decided_after <= 15   # 13
    assert not gate.verdict(fixed_passed=False).passed
    assert gate.upper <= 0.4 and gate.e_fail >= 1 / 0.025


def test_borderline_narrator_never_decides_and_falls_back_to_the_fixed_verdict():
    outcomes = [True, False, True, False, False] * 20          # survival exactly 40% all along
    gate = sequential_gate(outcomes, 0.4, 0.05)
    assert gate.decision is None and gate.observed == 100
    assert gate.lower < 0.4 < gate.upper
    assert gate.verdict(fixed_passed=True).passed and gate.verdict(fixed_passed=True).by == "fixed"
    assert not gate.verdict(fixed_passed=False).passed


def test_early_verdict_does_not_consult_the_fixed_gate():
    gate = sequential_gate([True] * 12, 0.4)
    assert gate.verdict(fixed_passed=False).passed


def test_decision_is_final_and_e_values_are_those_of_the_stopping_time():
    gate = SequentialGate(0.4, 0.05)
    while gate.observe(True) is None:
        pass
    at, e_pass, e_fail = gate.decided_after, gate.e_pass, gate.e_fail
    for _ in range(30):                       # episodes that were in flight: all failures
        assert gate.observe(False) == PASS
    assert (gate.decided_after, gate.e_pass, gate.e_fail) == (at, e_pass, e_fail)
    assert gate.observed == at + 30
    assert gate.lower >= 0.4                  # the running intersection keeps what was proven


def test_censored_outcomes_are_counted_and_left_out():
    with_censored = sequential_gate([None, True, None, True, True, None] * 5, 0.4)
    without = sequential_gate([True, True, True] * 5, 0.4)
    assert with_censored.censored == 15 and with_censored.observed == 15
    assert with_censored.decided_after == without.decided_after
    assert with_censored.seen_at_decision > with_censored.decided_after
    assert with_censored.to_dict()["censored"] == 15


def test_threshold_at_the_ends():
    assert sequential_gate([False] * 200, 0.0).decision is None   # survival >= 0 cannot fail
    assert sequential_gate([True] * 200, 1.0).decision is None    # survival > 1 cannot be shown
    assert sequential_gate([True] * 30, 0.0).decision == PASS
    assert sequential_gate([False] * 30, 1.0).decision == FAIL


def test_smaller_alpha_needs_more_episodes():
    loose = sequential_gate([True] * 50, 0.4, 0.10).decided_after
    strict = sequential_gate([True] * 50, 0.4, 0.01).decided_after
    assert loose < strict


def test_false_pass_rate_at_the_threshold_stays_under_alpha_when_peeking_every_episode():
    """Time-uniform validity, cheaply: 1,500 runs of 100 episodes at true survival = RATE."""
    rng = random.Random(20260121)
    runs, passes, fails = 1500, 0, 0
    for _ in range(runs):
        gate = SequentialGate(0.4, 0.05)
        for x in bernoulli(0.4, 100, rng):
            if gate.observe(x):
                break
        passes += gate.decision == PASS
        fails += gate.decision == FAIL
    # alpha/2 per side; slack of about 3 standard errors of a rate of 2.5% over 1,500 runs
    assert passes / runs <= 0.025 + 0.012
    assert fails / runs <= 0.025 + 0.012
    assert (passes + fails) / runs <= 0.05 + 0.017


def test_peeking_at_a_fixed_sample_interval_would_fail_the_same_check():
    """The contrast the issue names: stop when a Wilson 95% interval excludes RATE (must be > alpha)."""
    rng = random.Random(20260121)
    runs, wrong = 600, 0
    z = 1.959964
    for _ in range(runs):
        s = 0
        for n, x in enumerate(bernoulli(0.4, 100, rng), start=1):
            s += x
            p = s / n
            centre = (p + z * z / (2 * n)) / (1 + z * z / n)
            half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
            if centre - half > 0.4 or centre + half < 0.4:
                wrong += 1
                break
    assert wrong / runs > 0.10


def test_heterogeneous_specs_in_random_order_stay_conservative():
    """Half the specs always fail, half survive 80%: pool survival 40%, drawn without replacement."""
    rng = random.Random(5)
    pool = [0.0] * 50 + [0.8] * 50
    runs, decided = 800, 0
    for _ in range(runs):
        order = pool[:]
        rng.shuffle(order)
        gate = SequentialGate(0.4, 0.05)
        for p in order:
            if gate.observe(rng.random() < p):
                break
        decided += gate.decided
    assert decided / runs <= 0.05


# --- seeded order ------------------------------------------------------------------------------------


JOBS = [(f"spec-{i:02d}", r) for i in range(12) for r in range(3)]


def test_seeded_order_is_reproducible_and_a_permutation():
    a = seeded_order(JOBS, 1234)
    assert a == seeded_order(list(reversed(JOBS)), 1234)      # independent of discovery order
    assert sorted(a) == sorted(JOBS) and a != sorted(JOBS)


def test_seeded_order_differs_across_seeds():
    orders = {tuple(seeded_order(JOBS, seed)) for seed in range(20)}
    assert len(orders) == 20
    assert seeded_order(JOBS, "nightly") != seeded_order(JOBS, "nightly2")


def test_seeded_order_is_pinned():
    """A recorded seed must replay the same order on any Python: pinned, and built only on random()."""
    jobs = [(s, r) for s in ("a", "b", "c") for r in (0, 1)]
    assert seeded_order(jobs, 7) == [("b", 1), ("c", 1), ("c", 0), ("b", 0), ("a", 0), ("a", 1)]
    assert seeded_order(jobs, "nightly") == [("b", 0), ("c", 1), ("c", 0), ("a", 0), ("b", 1), ("a", 1)]


def test_seeded_order_refuses_bad_input():
    with pytest.raises(TypeError):
        seeded_order(JOBS, 1.5)
    with pytest.raises(ValueError, match="twice"):
        seeded_order([("a", 0), ("a", 0)], 1)


def test_shard_slices_partition_the_seeded_order():
    order = seeded_order(JOBS, 9)
    parts = [shard_slice(order, i, 4) for i in range(1, 5)]
    assert sorted(job for part in parts for job in part) == sorted(JOBS)
    assert {len(p) for p in parts} == {9}
    with pytest.raises(ValueError):
        shard_slice(order, 0, 4)


def test_start_order_releases_outcomes_in_the_order_episodes_started():
    order = seeded_order(JOBS[:5], 2)
    buffer = StartOrder(order)
    assert buffer.add(order[2], False) == []          # finished early: held back
    assert buffer.add(order[1], True) == []
    assert buffer.waiting == 2
    assert buffer.add(order[0], None) == [(order[0], None), (order[1], True), (order[2], False)]
    assert buffer.released == 3 and buffer.waiting == 0
    with pytest.raises(ValueError, match="twice"):
        buffer.add(order[1], True)


# --- paired regression check -----------------------------------------------------------------------


def paired(p_base: float, p_new: float, n: int, seed: int, margin: float = 0.0) -> PairedSequentialTest:
    rng = random.Random(seed)
    test = PairedSequentialTest(margin)
    for _ in range(n):
        test.observe(rng.random() < p_base, rng.random() < p_new)
    return test


def test_clear_regression_is_found_early():
    test = paired(0.8, 0.3, 100, seed=1)
    assert test.decision == REGRESSION and test.decided_after <= 40
    lo, hi = test.drop_bounds()
    assert lo > 0 and test.e_regression >= 40
    assert test.base_only > test.new_only


def test_no_change_is_not_a_regression():
    test = PairedSequentialTest()
    rng = random.Random(2)
    for _ in range(200):
        same = rng.random() < 0.6
        test.observe(same, same)               # identical outcomes: every pair concordant
    assert test.decision is None
    assert test.e_regression == pytest.approx(1.0) and test.e_non_inferior == pytest.approx(1.0)


def test_false_regressions_under_no_change_stay_under_alpha():
    runs = 600
    found = sum(paired(0.6, 0.6, 100, seed=s).decision == REGRESSION for s in range(runs))
    assert found / runs <= 0.025 + 0.02


def test_margin_absorbs_a_small_drop_and_can_declare_non_inferiority():
    # the same data: a 10-point drop among mostly concordant pairs
    data = [(True, True)] * 150 + [(True, False)] * 20 + [(False, False)] * 30
    random.Random(4).shuffle(data)
    strict, lenient = PairedSequentialTest(0.0), PairedSequentialTest(0.25)
    for b, n in data:
        strict.observe(b, n)
        lenient.observe(b, n)
    assert strict.decision == REGRESSION
    assert lenient.decision == NON_INFERIOR       # certain the drop is below 25 points
    assert lenient.drop_bounds()[1] <= 0.25


def test_margin_zero_non_inferior_means_certainly_better():
    test = PairedSequentialTest(0.0)
    for _ in range(60):
        test.observe(False, True)
    assert test.decision == NON_INFERIOR and test.drop_bounds()[1] < 0


def test_paired_skips_censored_pairs():
    test = PairedSequentialTest()
    test.observe(None, True)
    test.observe(True, None)
    test.observe(True, False)
    assert test.skipped == 2 and test.pairs == 1 and test.to_dict()["base_only"] == 1
    with pytest.raises(ValueError):
        PairedSequentialTest(margin=1.0)


# --- shards ------------------------------------------------------------------------------------------


def test_combine_e_values():
    assert combine_e_values([2.0, 8.0]) == 5.0
    assert combine_e_values([2.0, 8.0], "product") == pytest.approx(16.0)
    assert combine_e_values([0.0, 8.0], "product") == 0.0
    for bad in ([], [-1.0]):
        with pytest.raises(ValueError):
            combine_e_values(bad)
    with pytest.raises(ValueError, match="unknown method"):
        combine_e_values([1.0], "max")


def test_a_shard_that_decides_alone_decides_the_merge():
    alpha, k = 0.05, 4
    shards = []
    for i in range(k):
        gate = SequentialGate(0.4, shard_alpha(alpha, k))
        for x in ([True] * 40 if i == 0 else [True, False] * 3):
            if gate.observe(x):
                break
        shards.append(gate)
    assert [g.decision for g in shards] == [PASS, None, None, None]
    merged = merge_shards([g.e_pass for g in shards], [g.e_fail for g in shards], alpha)
    assert merged.verdict == PASS and merged.e_pass >= 1 / (alpha / 2)


def test_undecided_shards_can_add_up_and_opposite_shards_abstain():
    assert merge_shards([30.0, 30.0], [0.1, 0.1], 0.05).verdict is None          # mean 30 < 40
    assert merge_shards([30.0, 30.0], [0.1, 0.1], 0.05, method="product").verdict == PASS
    opposite = merge_shards([170.0, 0.01], [0.01, 170.0], 0.05)
    assert opposite.verdict is None and opposite.conflict
    assert merge_shards([0.5, 0.2], [50.0, 45.0], 0.05).verdict == FAIL
    with pytest.raises(ValueError):
        merge_shards([1.0], [1.0, 2.0])


def test_module_imports_nothing_from_the_rest_of_the_package():
    source = Path(sq.__file__).read_text(encoding="utf-8")
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert all(line.split()[1] in {"__future__", "math", "random", "dataclasses", "typing"} for line in imports), imports
