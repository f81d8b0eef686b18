"""Survival that means what it says, gates that fail closed: hand-computed values, no server needed."""

from __future__ import annotations

import pytest

from pytest_ncp.analysis.metrics import (
    Gate,
    compute_metrics,
    error_budget,
    parse_error_rate,
    survival_at,
)
from pytest_ncp.analysis.verdict import decide
from pytest_ncp.core.exit_codes import EXIT_ERROR_BUDGET, EXIT_GATE_FAILED
from pytest_ncp.core.records import EpisodeRecord
from pytest_ncp.report.verdict import budget_line, gate_line


def _ep_dict(termination, turns, *, spec="s", repeat=0, kind=None, held=None):
    """An episode record; conflicts happen at ``turns``; ``kind`` is an error's kind."""
    return {"spec_id": spec, "repeat": repeat, "termination": termination, "turns": turns, "progress": 0.5,
            "satisfied": 0.5, "held": held,
            "failure": {"turn": turns, "type": termination.split(":")[1]} if termination.startswith("conflict:") else None,
            "error": {"kind": kind or "auditor", "message": "m"} if termination == "error" else None,
            "tokens": 0, "cost_usd": 0.0}


def ep(*args, **kwargs):
    """The typed record the engine produces."""
    return EpisodeRecord.model_validate(_ep_dict(*args, **kwargs))


def many(n, termination, turns, **kw):
    return [ep(termination, turns, spec=f"{termination}{i}", **kw) for i in range(n)]


# --- censoring -------------------------------------------------------------------------------------


def test_script_exhausted_is_censored_at_its_last_turn_not_a_survivor_of_later_turns():
    # The demo's shape: scripts of 14 inputs, conflicts early, no episode past turn 14.
    episodes = many(31, "script_exhausted", 14) + many(69, "conflict:fact", 5)
    m = compute_metrics(episodes, survival_turn=20)
    assert m["survival_at_20"] is None
    assert m["survival_point"]["text"] == "n/a (0 of 100 reached turn 20)"
    # Up to turn 14 it is measured: 31 of 100 survived the conflicts at turn 5.
    assert compute_metrics(episodes, survival_turn=14)["survival_at_14"] == pytest.approx(0.31)


def test_turn_limit_is_censored_too_and_success_survives_throughout():
    limited = many(10, "turn_limit", 3)
    assert survival_at(limited, 20).text() == "n/a (0 of 10 reached turn 20)"
    assert survival_at(limited, 3).measurable and survival_at(limited, 3).value == 1.0
    done = many(10, "success", 3)
    point = survival_at(done, 20)
    assert point.measurable and point.value == 1.0 and point.reached == 10


def test_survival_is_not_a_number_when_most_episodes_left_before_t():
    # 5 reached turn 20, 45 left before it without failing, none failed: 5 of 50 observed.
    episodes = many(5, "turn_limit", 20) + many(45, "script_exhausted", 10)
    point = survival_at(episodes, 20)
    assert not point.measurable and point.text() == "n/a (5 of 50 reached turn 20)"
    assert point.to_dict()["value"] is None and point.to_dict()["ci"] is None


def test_all_failed_is_a_measured_zero():
    point = survival_at(many(4, "conflict:fact", 2), 20)
    assert point.measurable and point.value == 0.0 and point.reached == 0


# --- the interval --------------------------------------------------------------------------------


def test_interval_is_greenwood_log_log_for_the_kaplan_meier_estimate():
    # 10 episodes, one conflict at turn 1, nine reach turn 20: S = 0.9.
    # sigma = sqrt(1/(10*9)) / |ln 0.9| = 1.000463; CI = 0.9^exp(+-1.959964 sigma) = (0.4730, 0.9853),
    # the values R's survfit(conf.type="log-log") gives for this data.
    episodes = [ep("conflict:fact", 1)] + many(9, "turn_limit", 20)
    point = survival_at(episodes, 20)
    assert point.value == pytest.approx(0.9)
    assert point.ci == pytest.approx((0.47301, 0.98528), abs=1e-4)


def test_interval_contains_its_estimate_under_censoring():
    # Heavy early censoring made the old (Wilson on a plain count) interval exclude its own estimate.
    episodes = ([ep("conflict:fact", 2)] * 3 + many(3, "script_exhausted", 5) + [ep("conflict:fact", 8)] * 2
                + many(6, "turn_limit", 20))
    point = survival_at(episodes, 20)
    assert point.measurable
    lo, hi = point.ci
    assert lo < point.value < hi
    m = compute_metrics(episodes, survival_turn=20)
    assert m["survival_ci"][0] < m["survival_at_20"] < m["survival_ci"][1]


def test_no_failure_yet_gives_the_exact_binomial_lower_bound():
    point = survival_at(many(10, "turn_limit", 20), 20)
    assert point.ci == pytest.approx((0.025 ** (1 / 10), 1.0), abs=1e-4)


# --- narrator errors and unknown outcomes ---------------------------------------------------------------


def test_narrator_errors_are_failures_in_survival_rates_and_counts():
    episodes = many(5, "error", 2, kind="narrator") + many(5, "turn_limit", 20)
    m = compute_metrics(episodes, survival_turn=20)
    assert m["narrator_errors"] == 5 and m["unknown"] == 0 and m["judged"] == 10
    assert m["survival_at_20"] == pytest.approx(0.5)  # failed at turn 3, the turn they could not play
    assert m["conflict_free"] == 5 and m["error_rate"] == 0.0
    verdict = Gate(0.4, 20).check(episodes)
    assert verdict.passed and "5 narrator error(s) counted as failures" in gate_line(verdict)
    assert not Gate(0.6, 20).check(episodes).passed


def test_an_all_error_run_reports_nothing_and_fails_the_budget():
    episodes = many(10, "error", 0, kind="model")
    m = compute_metrics(episodes)
    assert m["survival_at_20"] is None and m["survival_point"]["text"] == "n/a (0 of 10 reached turn 20)"
    assert m["unknown"] == 10 and m["error_rate"] == 1.0
    budget = error_budget(episodes)
    assert budget.exceeded and "10 of 10" in budget_line(budget)
    verdict = Gate(0.0, 20).check(episodes)
    assert not verdict.passed and decide(episodes, gate=Gate(0.0, 20)).exit_code == EXIT_ERROR_BUDGET
    assert "cannot decide" in gate_line(verdict)


def test_gate_refuses_to_decide_on_one_judged_episode_of_ten():
    episodes = [ep("turn_limit", 20)] + many(9, "error", 0, kind="auditor")
    verdict = Gate(0.5, 20).check(episodes, max_error_rate=1.0)  # the budget allows it...
    assert not verdict.passed and not verdict.decided  # ...but one episode of ten decides nothing
    assert decide(episodes, gate=Gate(0.5, 20), max_error_rate=1.0).exit_code == EXIT_GATE_FAILED
    assert gate_line(verdict).startswith("ncp survival gate FAILED: cannot decide: survival@20 is n/a (1 of 10")


def test_gate_refuses_when_no_episode_reached_the_gate_turn():
    verdict = Gate(0.1, 20).check(many(10, "script_exhausted", 12))
    assert not verdict.passed and "n/a (0 of 10 reached turn 20)" in gate_line(verdict)


def test_error_budget_allows_what_the_user_allows():
    episodes = [ep("error", 1, kind="player")] + many(19, "turn_limit", 20)
    assert error_budget(episodes, 0.0).exceeded
    assert not error_budget(episodes, 0.05).exceeded
    assert Gate(0.9, 20).check(episodes, max_error_rate=0.05).passed
    assert not Gate(0.9, 20).check(episodes, max_error_rate=0.0).passed


@pytest.mark.parametrize("text,value", [("0", 0.0), ("0.05", 0.05), ("5%", 0.05), ("1", 1.0)])
def test_error_rate_parses(text, value):
    assert parse_error_rate(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["-0.1", "1.5", "lots", "nan", "150%"])
def test_error_rate_rejects(text):
    with pytest.raises(ValueError, match="error rate"):
        parse_error_rate(text)


# --- satisfied vs held ---------------------------------------------------------------------------------


def test_held_invariants_are_reported_apart_from_satisfied_commitments():
    episodes = [ep("turn_limit", 20, held=1.0), ep("conflict:commitment", 3, held=0.5), ep("success", 9)]
    m = compute_metrics(episodes)
    assert m["held_pct"] == pytest.approx(75.0)  # over episodes whose spec has invariants
    assert m["satisfied_pct"] == pytest.approx(50.0)


def test_compare_refuses_when_too_few_pairs_were_observed_to_the_turn():
    from pytest_ncp.analysis.compare import compare_runs

    def run(episodes):
        return {"version": 1, "config": {"max_turns": 20}, "episodes": episodes}

    # Scripts of 14 inputs: survival@20 is not observed in either run, whatever NEW did before turn 14.
    base = run([ep("script_exhausted", 14, spec=f"s{i}") for i in range(10)])
    new = run([ep("script_exhausted", 14, spec=f"s{i}") for i in range(9)] + [ep("conflict:fact", 20, spec="s9")])
    result = compare_runs(base, new, turn=20)
    assert not result.measurable and not result.regression and result.verdict() == "NOTHING TO COMPARE"
    assert len(result.unobserved) == 10
    assert compare_runs(base, new, turn=14).measurable


def test_compare_names_each_runs_unmeasured_survival():
    from pytest_ncp.analysis.compare import compare_runs

    run = {"version": 1, "config": {"max_turns": 20},
           "episodes": [ep("script_exhausted", 14, spec=f"s{i}") for i in range(4)]}
    text = "\n".join(compare_runs(run, run, turn=20).lines())
    assert "survival@20 of each run: base n/a (0 of 4 reached turn 20), new n/a (0 of 4 reached turn 20)" in text


def test_compare_does_not_call_early_failures_alone_a_comparison_at_a_later_turn():
    from pytest_ncp.analysis.compare import compare_runs

    # 69 pairs failed early on both sides, 31 scripts ended at turn 14: nothing is known about turn 20,
    # although most pairs are "observed" (as failures); "0% vs 0%, unchanged" would be a fiction.
    episodes = ([ep("conflict:fact", 5, spec=f"c{i}") for i in range(69)]
                + [ep("script_exhausted", 14, spec=f"s{i}") for i in range(31)])
    run = {"version": 1, "config": {"max_turns": 20}, "episodes": episodes}
    result = compare_runs(run, run, turn=20)
    assert result.pairs == 69 and not result.measurable and result.verdict() == "NOTHING TO COMPARE"
    assert compare_runs(run, run, turn=10).measurable


def test_a_cancelled_episode_is_left_out_of_every_rate_like_a_cut_one():
    # Ended by the run after an early gate decision: unfinished, so never conflict-free, never in pass^k.
    from pytest_ncp.analysis.metrics import compute_metrics
    from pytest_ncp.core.records import EpisodeRecord

    def ep(spec, repeat, termination, turns):
        return EpisodeRecord(spec_id=spec, repeat=repeat, termination=termination, turns=turns, progress=0.0,
                             satisfied=0.0)

    m = compute_metrics([ep("a", 0, "turn_limit", 5), ep("a", 1, "cancelled", 2), ep("b", 0, "budget", 1)],
                        survival_turn=5)
    assert m["judged"] == 1 and m["conflict_free"] == 1 and m["turn_limit"] == 1
    assert m["blame"]["owners"]["budget"]["count"] == 2 and m["unknown"] == 0
