"""Metrics against values computed by hand."""

from __future__ import annotations

import math

import pytest

from pytest_ncp.analysis.metrics import Gate, compute_metrics, kaplan_meier, pass_hat_k, pearson, wilson
from pytest_ncp.core.records import EpisodeRecord
from pytest_ncp.report.verdict import gate_line


def ep(spec, termination, turns, progress=0.0, satisfied=0.0, repeat=0, tokens=10):
    failure = {"turn": turns, "type": termination.split(":")[1]} if termination.startswith("conflict:") else None
    return EpisodeRecord.model_validate({"spec_id": spec, "repeat": repeat, "termination": termination, "turns": turns,
                                         "progress": progress, "satisfied": satisfied, "failure": failure,
                                         "tokens": tokens, "cost_usd": 0.01})


EPISODES = [
    ep("a", "conflict:fact", 3, 0.25, 0.0),
    ep("b", "conflict:commitment", 10, 0.5, 0.2),
    ep("c", "success", 12, 1.0, 1.0),
    ep("d", "turn_limit", 30, 0.75, 0.5),
    ep("e", "error", 5),
]


def test_kaplan_meier_censors_errors_at_their_last_turn():
    s = kaplan_meier(EPISODES, 30)
    # t=3: 5 at risk, 1 event -> 4/5. Error censored at 5. t=10: at risk b, c, d -> 1 - 1/3.
    assert s[2] == 1.0
    assert s[3] == pytest.approx(0.8)
    assert s[9] == pytest.approx(0.8)
    assert s[10] == pytest.approx(0.8 * 2 / 3)
    assert s[30] == pytest.approx(0.8 * 2 / 3)


def test_without_errors_survival_is_the_surviving_share():
    judged = EPISODES[:4]
    s = kaplan_meier(judged, 20)
    assert s[5] == pytest.approx(3 / 4) and s[20] == pytest.approx(2 / 4)


def test_run_metrics_exclude_errors_from_denominators():
    m = compute_metrics(EPISODES, survival_turn=20)
    assert m["episodes"] == 5 and m["errors"] == 1
    assert m["avg_turns"] == pytest.approx((3 + 10 + 12 + 30) / 4)
    assert m["progress_pct"] == pytest.approx(100 * (0.25 + 0.5 + 1.0 + 0.75) / 4)
    assert m["satisfied_pct"] == pytest.approx(100 * 1.7 / 4)
    assert m["conflict_rates"] == {"fact": 0.25, "commitment": 0.25, "player_input": 0.0}
    assert (m["successes"], m["conflict_free"], m["turn_limit"]) == (1, 2, 1)
    assert m["survival_at_20"] == pytest.approx(0.8 * 2 / 3, abs=1e-6)
    assert m["survival"]["3"] == pytest.approx(0.8)
    assert m["tokens"] == 50


def test_wilson_interval_matches_the_formula():
    lo, hi = wilson(4, 10)
    # Hand computation: p=0.4, z=1.96 -> (0.1682, 0.6873)
    assert lo == pytest.approx(0.1682, abs=1e-4) and hi == pytest.approx(0.6873, abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_pass_hat_k():
    eps = [ep("a", "success", 5, repeat=0), ep("a", "success", 5, repeat=1), ep("a", "conflict:fact", 2, repeat=2),
           ep("b", "turn_limit", 9, repeat=0), ep("b", "turn_limit", 9, repeat=1), ep("b", "turn_limit", 9, repeat=2)]
    # spec a: C(2,2)/C(3,2) = 1/3; spec b: 1 -> mean 2/3
    assert pass_hat_k(eps, 2) == pytest.approx(2 / 3)
    assert pass_hat_k(eps, 1) == pytest.approx((2 / 3 + 1) / 2)
    assert compute_metrics(eps)["pass_k"]["3"] == pytest.approx((0 + 1) / 2)


def test_pearson():
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert pearson([1, 1], [1, 2]) is None


@pytest.mark.parametrize("text,rate,turn", [("0.4@20", 0.4, 20), ("0.5", 0.5, 20), ("40%@10", 0.4, 10)])
def test_gate_parse(text, rate, turn):
    gate = Gate.parse(text)
    assert math.isclose(gate.rate, rate) and gate.turn == turn


@pytest.mark.parametrize("text", ["abc", "1.5", "0.4@x", "-0.1"])
def test_gate_parse_rejects_bad_values(text):
    with pytest.raises(ValueError, match="RATE"):
        Gate.parse(text)


def test_gate_check():
    failing = Gate(0.6, 20).check(EPISODES, max_error_rate=0.2)
    assert not failing.passed and failing.measured == pytest.approx(0.8 * 2 / 3)
    assert gate_line(failing).startswith("ncp survival gate FAILED: survival@20 = 53.3% (95% CI")
    passing = Gate(0.5, 20).check(EPISODES, max_error_rate=0.2)
    assert passing.passed and "PASSED" in gate_line(passing) and ">= required 50.0%" in gate_line(passing)
