"""Scoring an auditor against gold labels: counting rules and intervals (pure, no model)."""

from __future__ import annotations

import pytest

from pytest_ncp.calibration.scoring import figures, quotes_match, score
from pytest_ncp.analysis.metrics import wilson


def row(gold_conflicts=(), confirmed=(), invalid=False, **gold):
    g = {"conflicts": [{"type": t, "ids": list(ids)} for t, ids in gold_conflicts], "trigger": False,
         "delta": False, "trigger_done": False, "added": [], "negated": [], "satisfied": [], "pending": []}
    g.update(gold)
    pred = {"invalid": {"step": "conflict_check", "problems": ["x"]}} if invalid else {
        "flagged": [{"type": t, "ids": list(ids)} for t, ids in confirmed],
        "confirmed": [{"type": t, "ids": list(ids)} for t, ids in confirmed],
        "trigger": False, "delta": False, "added": [], "negated": [], "satisfied": []}
    return {"case": "c", "gold": g, "pred": pred}


def test_precision_recall_and_wilson_intervals_from_counts():
    rows = ([row([("fact", ["F1"])], [("fact", ["F1"])])] * 6 + [row([("fact", ["F1"])])] * 2
            + [row(confirmed=[("fact", ["F2"])])] * 3 + [row()] * 9)
    fact = score(rows)["rows"]["conflict: fact"]
    assert (fact["tp"], fact["fp"], fact["fn"], fact["tn"]) == (6, 3, 2, 9)
    assert fact["precision"] == pytest.approx(6 / 9) and fact["precision_ci"] == pytest.approx(list(wilson(6, 9)))
    assert fact["recall"] == pytest.approx(6 / 8) and fact["recall_ci"] == pytest.approx(list(wilson(6, 8)))
    assert fact["f1"] == pytest.approx(2 * 6 / (12 + 3 + 2))
    lo, hi = fact["f1_ci"]
    assert 0 < lo < fact["f1"] < hi < 1
    assert fact["specificity"] == pytest.approx(9 / 12)


def test_an_invalid_answer_is_a_miss_counted_apart_never_a_true_negative():
    rows = [row([("player_input", [])], invalid=True), row(invalid=True), row([("player_input", [])],
                                                                              [("player_input", [])])]
    r = score(rows)["rows"]["conflict: player_input"]
    assert (r["tp"], r["fn"], r["invalid_pos"], r["invalid_neg"], r["tn"]) == (1, 0, 1, 1, 0)
    assert r["recall"] == 0.5 and r["precision"] == 1.0 and r["specificity"] == 0.0
    assert score(rows)["invalid"] == {"cases": 2, "rate": pytest.approx(2 / 3), "by_step": {"conflict_check": 2}}


def test_added_facts_match_by_shared_words_one_to_one():
    assert quotes_match("a thin book bound in cracked leather", "You find a thin book bound in leather")
    assert not quotes_match("the innkeeper warns you", "a thin book bound in cracked leather")
    r = row(added=["a thin book bound in cracked leather", "the innkeeper begs you to stay"])
    r["pred"]["added"] = ["a thin book bound in cracked leather", "a thin book", "the fire crackles"]
    added = score([r])["rows"]["facts added"]
    assert (added["tp"], added["fp"], added["fn"]) == (1, 2, 1) and added["specificity"] is None


def test_rows_that_do_not_apply_are_left_out():
    done = row(trigger_done=True)  # the trigger was earlier: nothing to judge for it at this turn
    s = score([done, row(pending=["C5"], satisfied=["C5"])])
    assert s["rows"]["trajectory: trigger"]["cases"] == 1
    assert s["rows"]["commitments satisfied"]["cases"] == 1 and s["rows"]["commitments satisfied"]["fn"] == 1


def test_f1_interval_is_reproducible_and_absent_without_positives():
    counts = [(1, 0, 0, 0, 0, 0)] * 5 + [(0, 1, 0, 0, 0, 0)] * 2 + [(0, 0, 0, 1, 0, 0)] * 10
    assert figures(counts)["f1_ci"] == figures(counts)["f1_ci"]
    assert figures([(0, 0, 0, 1, 0, 0)] * 4)["f1_ci"] is None
