"""A run that may stop early (pytest_ncp.analysis.sequential_run): the order, outcomes read in it, the stop rule,
and the verdict's sentences for it."""

from __future__ import annotations

import random

import pytest

from pytest_ncp.analysis.metrics import Gate
from pytest_ncp.analysis.results import build_results, parse_results
from pytest_ncp.analysis.sequential import seeded_order
from pytest_ncp.analysis.sequential_run import (SequentialPlan, SequentialRun, baseline_outcomes, episode_order,
                                                merge_sequential)
from pytest_ncp.analysis.verdict import BaselineResult, decide
from pytest_ncp.core.exit_codes import EXIT_FAILED, EXIT_OK
from pytest_ncp.core.records import EpisodeRecord
from pytest_ncp.report.verdict import verdict_lines


def _ep_dict(spec, repeat=0, termination="turn_limit", turns=20, fail_turn=None):
    failed = fail_turn is not None
    return {"spec_id": spec, "repeat": repeat, "termination": "conflict:fact" if failed else termination,
            "turns": fail_turn if failed else turns, "progress": 0.0, "satisfied": 0.0,
            "failure": {"turn": fail_turn, "type": "fact"} if failed else None, "error": None}


def ep(*args, **kwargs):
    """The typed record the engine produces."""
    return EpisodeRecord.model_validate(_ep_dict(*args, **kwargs))


JOBS = [(f"s{i:02d}", 0) for i in range(40)]


def run_of(plan=SequentialPlan(0.4, 20), jobs=JOBS, baseline=None):
    return SequentialRun(plan, episode_order(jobs, plan.seed), baseline=baseline)


def test_the_order_is_seeded_reproducible_and_cut_into_shards():
    order = episode_order(JOBS, 7)
    assert order == episode_order(list(reversed(JOBS)), 7) == seeded_order(JOBS, 7)
    assert order != episode_order(JOBS, 8) and sorted(order) == sorted(JOBS)
    slices = [episode_order(JOBS, 7, (i, 3)) for i in (1, 2, 3)]
    assert slices[0] == order[0::3] and sorted(sum(slices, [])) == sorted(JOBS)


def test_a_run_that_always_survives_stops_after_seven_and_the_rest_never_start():
    run = run_of()
    for job in run.order[:7]:
        assert run.start(job)
    for n, job in enumerate(run.order[:7], 1):
        stopped = run.finished(ep(*job))
        assert (stopped is None) == (n < 7)
    assert run.stopped and run.stopped_by == "gate" and run.read_at_stop == 7 and run.gate.decision == "pass"
    assert not run.start(run.order[7]) and run.unstarted == [run.order[7]]
    assert run.summary().text() == "decided after 7 of 40 episodes"


def test_outcomes_are_read_in_start_order_not_finish_order():
    # The first two started survive; the third conflicts early and finishes first. Its outcome is held back until
    # the two before it finished: the gate reads survived, survived, failed.
    run = run_of()
    a, b, c = run.order[:3]
    run.finished(ep(*c, fail_turn=2))
    assert run.outcomes == []
    run.finished(ep(*a))
    assert run.outcomes == [(a, True)]
    run.finished(ep(*b))
    assert run.outcomes == [(a, True), (b, True), (c, False)]


def test_censored_outcomes_are_left_out_and_cancelled_episodes_are_counted():
    run = run_of(SequentialPlan(0.4, 20, cancel=True))
    run.finished(ep(*run.order[0], termination="script_exhausted", turns=5))
    assert run.gate.censored == 1 and run.gate.observed == 0
    for job in run.order[1:8]:
        run.finished(ep(*job))
    assert run.stopped and run.cancel_now and run.read_at_stop == 8  # 7 observed + 1 censored read
    run.finished(ep(*run.order[8], termination="cancelled", turns=3))
    assert run.cancelled == [run.order[8]] and run.summary().cancelled == 1


def test_a_run_that_always_fails_early_stops_and_fails():
    run = run_of()
    for job in run.order:
        if run.finished(ep(*job, fail_turn=2)):
            break
    assert run.gate.decision == "fail" and run.read_at_stop == 13


def test_a_borderline_run_never_stops():
    rng = random.Random(1)
    run = run_of(SequentialPlan(0.5, 20))
    for job in run.order:
        run.finished(ep(*job, fail_turn=None if rng.random() < 0.5 else 3))
    assert not run.stopped and run.summary().text() == "undecided after all 40 episodes"


def test_with_a_baseline_the_run_stops_on_a_regression_or_once_both_checks_passed():
    base = baseline_outcomes([ep(*job) for job in JOBS], 20)
    regressed = run_of(baseline=base)
    for job in regressed.order:  # the gate is not sure yet at 50% survival; the paired check is
        if regressed.finished(ep(*job, fail_turn=None if job[0] < "s20" else 2)):
            break
    assert regressed.stopped_by == "baseline" and regressed.paired.decision == "regression"
    # No change with margin 0: the gate passes after 7, but "certainly better" never comes: the run goes on.
    same = run_of(baseline=base)
    for job in same.order:
        same.finished(ep(*job))
    assert same.gate.decision == "pass" and same.paired.decision is None and not same.stopped
    # With a margin, no change is soon certainly within it: both checks decided for the run, and it stops.
    within = run_of(SequentialPlan(0.4, 20, margin=0.2), baseline=base)
    for job in within.order:
        if within.finished(ep(*job)):
            break
    assert within.stopped_by == "gate and baseline" and within.paired.decision == "non-inferior"


def test_the_verdict_says_decided_after_n_of_m_and_the_unstarted_are_not_missing():
    run = run_of()
    for job in run.order[:7]:
        run.finished(ep(*job))
    for job in run.order[7:]:
        assert not run.start(job)
    records = [ep(*job) for job in run.order[:7]]
    started = {f"{s}--r{r}" for s, r in run.order[:7]}
    v = decide(records, gate=Gate(0.4, 20), expected=started, sequential=run.gate, early=run.summary())
    lines = "\n".join(verdict_lines(v, "run"))
    assert v.exit_code == EXIT_OK
    assert "ncp survival gate PASSED (sequential): decided after 7 of 40 episodes" in lines
    assert "ncp sequential: the run stopped early (gate, decided after 7 of 40 episodes): 33 episode(s) never started" \
        in lines
    # results.json: the unstarted episodes are not expected, so the run that stopped early is complete.
    results = build_results({}, records, survival_turn=20, expected={f"{s}--r{r}" for s, r in run.order},
                            sequential=run.to_dict())
    assert results.complete and len(results.expected) == 7
    assert parse_results(results.document(), "x").sequential.decided_after == 7
    assert results.sequential.gate.history[-1][0] > 0.4  # the confidence sequence's lower bound cleared RATE


def test_a_regression_that_stopped_the_run_leaves_the_gate_undecided():
    base = baseline_outcomes([ep(*job) for job in JOBS], 20)
    run = run_of(baseline=base)
    records = []
    for job in run.order:
        records.append(ep(*job, fail_turn=None if job[0] < "s20" else 2))
        if run.finished(records[-1]):
            break
    v = decide(records, gate=Gate(0.4, 20), sequential=run.gate, early=run.summary(),
               baseline=BaselineResult("base.json", sequential=run.paired))
    lines = "\n".join(verdict_lines(v, "session"))
    assert v.exit_code == EXIT_FAILED and v.gate.decision == "undecided" and v.gate.cut_short
    assert "ncp baseline base.json (sequential): REGRESSION decided after" in lines
    assert "stopped early when the baseline check decided" in lines


def test_undecided_runs_say_so_and_fall_back_to_the_fixed_gate():
    run = run_of(SequentialPlan(0.5, 20), jobs=JOBS[:4])
    records = [ep(*job, fail_turn=None if i % 2 else 3) for i, job in enumerate(run.order)]
    for r in records:
        run.finished(r)
    v = decide(records, gate=Gate(0.5, 20), sequential=run.gate, early=run.summary())
    assert v.gate.by == "fixed" and v.gate.decision == "passed"  # 50% >= 50%: the fixed rule, as without it
    assert "ncp sequential gate: undecided after all 4 episodes" in "\n".join(verdict_lines(v))


def test_shards_merge_by_the_mean_of_their_e_values():
    parts = []
    for i in (1, 2):
        plan = SequentialPlan(0.4, 20, shards=2)
        run = SequentialRun(plan, episode_order(JOBS, 0, (i, 2)))
        for job in run.order:
            if run.finished(ep(*job)):
                break
        assert run.alpha == pytest.approx(0.025) and run.gate.decision == "pass"
        parts.append(run.to_dict())
    merged = merge_sequential(parts)
    assert merged.decision == "pass" and merged.e_pass >= 2 / 0.05
    assert merged.record["planned"] == 40 and merged.record["merged"]["shards"][0]["decision"] == "pass"
