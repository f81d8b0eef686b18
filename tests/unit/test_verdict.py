"""The one verdict function (analysis/verdict.py) and its lines (report/verdict.py): pure, no server."""

from __future__ import annotations

import pytest

from pytest_ncp.analysis.compare import compare_runs
from pytest_ncp.analysis.metrics import Gate
from pytest_ncp.analysis.sequential import sequential_gate
from pytest_ncp.analysis.verdict import (
    Baseline, BaselineResult, Canaries, CanaryResult, Completeness, NarratorErrors, SurvivalGate, decide,
)
from pytest_ncp.core.exit_codes import EXIT_ERROR_BUDGET, EXIT_FAILED, EXIT_OK
from pytest_ncp.core.records import EpisodeRecord
from pytest_ncp.report.session import session_lines
from pytest_ncp.report.verdict import verdict_lines


def _ep_dict(spec, termination="turn_limit", turns=4, kind=None):
    return {"spec_id": spec, "repeat": 0, "termination": termination, "turns": turns, "progress": 0.0,
            "satisfied": 0.0,
            "failure": {"turn": turns, "type": termination.split(":")[1]} if termination.startswith("conflict") else None,
            "error": {"kind": kind, "message": "m"} if termination == "error" else None}


def ep(*args, **kwargs):
    """The typed record the engine produces."""
    return EpisodeRecord.model_validate(_ep_dict(*args, **kwargs))


CLEAN = [ep(f"s{i}") for i in range(4)]
KEYS = [f"s{i}--r0" for i in range(4)]
OK_CANARIES = {"k": 2, "seed": 0, "model": "m", "min_recall": 0.8, "violations": 1, "caught": 1, "clean": 1,
               "passed": 1, "invalid": 0, "recall": 1.0, "clean_rate": 1.0, "ok": True}


def text(verdict, name="run"):
    return "\n".join(verdict_lines(verdict, name))


def test_a_complete_clean_run_passes_its_gate():
    v = decide(CLEAN, gate=Gate(0.5, 4), expected=KEYS)
    assert (v.exit_code, v.outcome) == (EXIT_OK, "passed")
    assert text(v).startswith("ncp survival gate PASSED: survival@4 = 100.0%")


@pytest.mark.parametrize("expected, interrupted, why", [
    (KEYS + ["s4--r0"], False, "4 of 5 expected episode(s) finished; 1 never reported (first: s4--r0)"),
    (KEYS, True, "4 of 4 expected episode(s) finished; it was interrupted"),
])
def test_an_incomplete_run_never_passes_its_gate(expected, interrupted, why):
    # Every finished episode survived: the fixed gate alone would pass. A dead worker or Ctrl-C left the rest.
    v = decide(CLEAN, gate=Gate(0.5, 4), expected=expected, interrupted=interrupted)
    assert v.completeness.decision == "undecided" and v.gate.decision == "undecided" and v.gate.fixed.passed
    assert (v.exit_code, v.outcome) == (EXIT_FAILED, "undecided")
    out = text(v, "session")
    assert "PASSED" not in out
    assert f"ncp: INCOMPLETE session: {why}" in out
    assert "ncp survival gate FAILED: cannot decide: the session is incomplete" in out


def test_an_incomplete_run_without_a_gate_exits_1_too():
    v = decide(CLEAN, expected=KEYS + ["s4--r0"])
    assert v.exit_code == EXIT_FAILED and "INCOMPLETE run" in text(v)


def test_the_error_budget_counts_every_record_and_exit_6_wins():
    records = CLEAN + [ep("e", "error", 1, kind="auditor")]
    v = decide(records, gate=Gate(0.5, 4), max_error_rate=0.1, canaries=CanaryResult({**OK_CANARIES, "ok": False}))
    assert v.exit_code == EXIT_ERROR_BUDGET and v.outcome == "failed"  # the canaries failed as well
    out = text(v)
    assert "ncp error budget EXCEEDED: 1 of 5 episode(s) of the run could not be judged (auditor, model or " \
           "player errors, player faults, split verdicts: 20.0%) > allowed 10.0%" in out
    assert "ncp survival gate FAILED: cannot decide: 1 of 5 episode(s) could not be judged" in out
    assert decide(records, max_error_rate=0.25).exit_code == EXIT_OK
    assert "ncp error budget ok: 1 of 5" in text(decide(records, max_error_rate=0.25))


def test_no_spec_can_vanish_from_the_gate_through_errors_whatever_the_budget():
    # --repeats 3 --max-error-rate 0.25 with every repeat of one spec errored
    # passed its gate, "9 of 12 episode(s) observed".
    def reps(spec, termination="turn_limit", n=3):
        return [EpisodeRecord.model_validate({**_ep_dict(spec, termination, kind="auditor"), "repeat": r})
                for r in range(n)]
    records = reps("tiny", "error") + reps("a") + reps("b") + reps("c")
    keys = [e.key for e in records]
    v = decide(records, gate=Gate(0.9, 4), max_error_rate=0.25, expected=keys)
    assert v.exit_code == EXIT_ERROR_BUDGET and v.budget.budget.vanished == (("tiny", 3, 3),)
    assert "no spec may lose more than half its episodes to unknown outcomes" in text(v) and "tiny (3 of 3)" in text(v)
    assert "lost more than half their episodes" in text(v)
    # One errored repeat of three is within both rules.
    records = reps("a") + reps("b") + reps("c")[:2] + [
        EpisodeRecord.model_validate({**_ep_dict("c", "error", kind="model"), "repeat": 2})]
    keys = [e.key for e in records]
    assert decide(records, gate=Gate(0.9, 4), max_error_rate=0.25, expected=keys).exit_code == EXIT_OK


def test_narrator_errors_fail_a_run_without_a_gate_and_count_as_failures_with_one():
    records = CLEAN + [ep("n", "error", 1, kind="narrator")]
    v = decide(records)
    assert isinstance(v.parts[2], NarratorErrors) and v.exit_code == EXIT_FAILED
    assert "ncp: 1 episode(s) ended in a narrator error (raised, timed out or answered nothing)" in text(v)
    gated = decide(records, gate=Gate(0.5, 4))
    assert gated.exit_code == EXIT_OK and "1 narrator error(s) counted as failures" in text(gated)
    assert not any(isinstance(p, NarratorErrors) for p in gated.parts)


@pytest.mark.parametrize("result, decision, line", [
    (CanaryResult(OK_CANARIES), "passed", "canary gate PASSED: auditor m caught and passed at least 80%"),
    (CanaryResult({**OK_CANARIES, "caught": 0, "recall": 0.0, "ok": False}), "failed", "canary gate FAILED: the auditor"),
    (CanaryResult(error="auditor canaries could not start: no gold set"), "failed",
     "canary gate FAILED: the AUDITOR, not the narrator, is in doubt"),
    (CanaryResult(), "undecided", "canary gate FAILED: cannot decide: the auditor canaries did not finish"),
])
def test_canaries(result, decision, line):
    v = decide(CLEAN, canaries=result)
    assert v.part(Canaries).decision == decision
    assert v.exit_code == (EXIT_OK if decision == "passed" else EXIT_FAILED)
    assert line in text(v)


def test_baseline_regression_unmeasurable_error_and_nothing_to_compare():
    base = {"episodes": [ep(f"s{i:02d}", "turn_limit", 20) for i in range(10)]}
    worse = {"episodes": [ep(f"s{i:02d}", "conflict:fact", 2) for i in range(10)]}
    new_records = worse["episodes"]
    regression = compare_runs(base, worse, turn=4)
    v = decide(new_records, baseline=BaselineResult("base.json", regression))
    assert v.part(Baseline).decision == "failed" and v.exit_code == EXIT_FAILED
    assert "ncp baseline base.json:\nncp compare: REGRESSION" in text(v)
    same = compare_runs(base, base, turn=4)
    assert decide(base["episodes"], baseline=BaselineResult("b", same)).exit_code == EXIT_OK
    unmeasurable = compare_runs(base, base, turn=30)
    assert decide(base["episodes"], baseline=BaselineResult("b", unmeasurable)).part(Baseline).decision == "undecided"
    broken = decide(CLEAN, baseline=BaselineResult("b", error="ncp baseline b: cannot compare: no such file"))
    assert broken.exit_code == EXIT_FAILED and "cannot compare: no such file" in text(broken)
    nothing = decide([], baseline=BaselineResult("b"))
    assert nothing.exit_code == EXIT_FAILED
    assert "ncp baseline b: cannot decide: no episode of this session to compare" in text(nothing, "session")


def test_a_gate_with_no_episode_says_why_it_exits_1():
    # pytest --ncp-failures-only --ncp-min-survival=...: only stored failures ran (adversarial finding 13).
    v = decide([], gate=Gate(0.5, 2))
    assert v.exit_code == EXIT_FAILED
    lines = session_lines(verdict=v, metrics=None, title="t", failures=["stored failures: 1 of 1 pass"])
    assert lines == ["stored failures: 1 of 1 pass", "",
                     "ncp survival gate FAILED: cannot decide: no episode ran in this session, so survival@2 cannot "
                     "be measured"]


def test_problems_the_host_found_fail_the_run():
    v = decide(CLEAN, problems=["1 episode(s) did not finish (ncp-worker-1 exit 9): s3--r0"])
    assert v.exit_code == EXIT_FAILED and "ncp: 1 problem(s) above" in text(v)


def test_the_sequential_gate_is_one_more_input():
    # The sequential gate decided early (forty survivals against 0.4): its decision is the gate's, by "sequential".
    early = sequential_gate([True] * 40, 0.4)
    assert early.decided
    # The episodes recorded so far would fail the fixed gate (50% < 60%): the early decision is what counts.
    half = [ep("a", "conflict:fact", 1), ep("b", "conflict:fact", 1), *CLEAN[:2]]
    assert not Gate(0.6, 4).check(half).passed
    v = decide(half, gate=Gate(0.6, 4), sequential=sequential_gate([True] * 40, 0.6))
    gate = v.gate
    assert isinstance(gate, SurvivalGate) and gate.by == "sequential" and gate.decision == "passed"
    assert v.exit_code == EXIT_OK
    assert "ncp survival gate PASSED (sequential): decided after" in text(v)
    # Undecided sequentially: the fixed gate decides, as without it.
    undecided = sequential_gate([True, False], 0.4)
    fixed = decide([ep("a", "conflict:fact", 1)] * 1 + CLEAN[:1], gate=Gate(0.9, 4), sequential=undecided)
    assert fixed.gate.by == "fixed" and fixed.gate.decision == "failed"
    # And never on an incomplete run, nor over the error budget.
    assert decide(CLEAN, gate=Gate(0.4, 4), sequential=early, interrupted=True).exit_code == EXIT_FAILED
    over = decide(CLEAN + [ep("e", "error", 0, kind="model")], gate=Gate(0.4, 4), sequential=early)
    assert over.exit_code == EXIT_ERROR_BUDGET


def test_parts_come_in_the_order_they_are_explained():
    v = decide(CLEAN, gate=Gate(0.5, 4), canaries=CanaryResult(OK_CANARIES), baseline=BaselineResult("b"),
               problems=["x"])
    assert [type(p).__name__ for p in v.parts] == ["Completeness", "Budget", "SurvivalGate", "Canaries", "Baseline",
                                                   "Problems"]
    assert isinstance(v.completeness, Completeness)


# --- the cost cap (--max-cost) ----------------------------------------------------------------


def cut(spec, turns=1):
    return EpisodeRecord.model_validate({**_ep_dict(spec, "budget", turns), "cut_by": "max-cost", "cost_usd": 0.25})


def test_episodes_cut_by_the_cost_cap_exit_7_and_never_count_against_the_error_budget():
    from pytest_ncp.analysis.verdict import CostCap
    from pytest_ncp.core.exit_codes import EXIT_COST_CAP

    records = [*CLEAN[:2], cut("s2"), cut("s3")]
    v = decide(records, expected=KEYS, max_cost=0.5)
    assert v.exit_code == EXIT_COST_CAP == 7 and v.outcome == "undecided"
    part = v.part(CostCap)
    assert isinstance(part, CostCap) and (part.cut, part.spent) == (2, 0.5)
    assert v.budget.budget.unknown == 0 and not v.budget.budget.exceeded
    assert "ncp cost cap REACHED: $0.5000 spent of $0.5000 (--max-cost); 2 episode(s) were cut short" in text(v)


def test_the_cost_cap_code_wins_over_a_failure_and_the_error_budget_over_it():
    from pytest_ncp.core.exit_codes import EXIT_COST_CAP

    failing = [ep("s0", "conflict:fact", 2), ep("s1"), cut("s2"), cut("s3")]
    assert decide(failing, expected=KEYS, max_cost=1.0).exit_code == EXIT_COST_CAP
    over = [ep("s0", "error", 2, kind="auditor"), ep("s1"), cut("s2"), cut("s3")]
    assert decide(over, expected=KEYS, max_cost=1.0).exit_code == EXIT_ERROR_BUDGET
    assert decide(CLEAN, expected=KEYS, max_cost=1.0).exit_code == EXIT_OK  # a cap that did not bind


def test_a_gate_the_cap_left_with_too_few_episodes_observed_cannot_decide_and_says_why():
    records = [ep("s0", turns=20), cut("s1", 2), cut("s2", 3), cut("s3", 1)]
    v = decide(records, gate=Gate(0.5, 20), expected=KEYS, max_cost=1.0)
    assert v.gate is not None and v.gate.decision == "undecided" and v.gate.cut == 3
    assert ("ncp survival gate FAILED: cannot decide: survival@20 is n/a (1 of 4 reached turn 20); too few episodes "
            "were observed up to turn 20 (the cost cap cut 3 episode(s) short (raise --max-cost))") in text(v)


def test_cut_episodes_are_censored_and_left_out_of_every_rate():
    from pytest_ncp.analysis.metrics import compute_metrics, survival_at

    records = [ep("s0", "conflict:fact", 2), ep("s1", turns=6), cut("s2", 1), cut("s3", 1)]
    m = compute_metrics(records, survival_turn=4)
    assert (m["episodes"], m["judged"], m["budget"], m["unknown"], m["errors"]) == (4, 2, 2, 0, 0)
    assert m["conflict_rates"]["fact"] == 0.5  # of the two judged episodes, not of four
    assert survival_at(records, 4).value == 0.5 and survival_at(records, 4).reached == 1  # cut: censored at 1
