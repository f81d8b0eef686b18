"""Failures read well: headline first, finding, transcript excerpt, ledger diff; errors are errors."""

from __future__ import annotations

from tests.integration.conftest import FACT_CONFLICT


def test_conflict_fails_the_episode_with_a_headline_and_ledger_diff(project):
    project.server.add(step="fact_update", contains="TURN 1.", reply={
        "added": [{"text": "The fair is noisy.", "quote": "The fair is loud"}], "negated": []})
    project.conflict_at(3)
    result = project.run("-q")
    result.assert_outcomes(failed=3, passed=4)  # the episode and the two unmet achievements
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*_ episode?caligari? _*",
        "caligari: fact conflict at turn 3 (F2) specs/caligari.yaml:*",
        "",
        "auditor finding:",
        "    Alan was said to be away.",
        "quoted from the narration:",
        '    "The fair is loud"',
    ])
    assert "turn 2 player:" in out and "turn 3 narrator:" in out
    assert "--- ledger after turn 0" in out and "+ F10: The fair is noisy.  (added at turn 1" in out
    assert "Captured ncp transcript call" in out
    result.stdout.fnmatch_lines(["caligari:C5: achievement not satisfied by the end of the episode*"])


def test_commitment_conflict_fails_that_commitment(project):
    project.conflict_at(2, {"conflicts": [{"type": "commitment", "fact_ids": [], "commitment_ids": ["C1"],
                                          "quote": "The fair is loud", "explanation": "Cesare acts alone."}]})
    result = project.run("-q", "-k", "C1 or episode")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["caligari:C1: invariant violated at turn 2 specs/caligari.yaml:*"])


def test_narrator_exception_is_an_error_not_a_failure_and_the_rest_runs(project):
    project.twin("other")
    result = project.run("-q", narrator="agent:Exploding")
    result.assert_outcomes(errors=14)
    project.succeed_at(3)
    result = project.run("-q", "-k", "caligari")
    result.assert_outcomes(passed=7)


def test_auditor_garbage_is_an_error(project):
    project.server.add(step="trajectory_update", reply="not json at all")
    result = project.run("-q", "-k", "episode")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*caligari: auditor error after turn 0: auditor step trajectory_update*"])


def test_success_passes_every_test(project):
    project.succeed_at(2)
    result = project.run("-q", "-rA")
    result.assert_outcomes(passed=7)
    assert len([r for r in project.server.requests if r.step == "conflict_check"]) == 2
