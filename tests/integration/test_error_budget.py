"""The error budget in pytest and its exit code 6, narrator errors as failures, honest
survival in the terminal table and results.json, resume fingerprints."""

from __future__ import annotations

import json

import pytest


def test_unknown_outcomes_exceed_the_default_budget_with_exit_code_6(project):
    project.server.add(step="fact_update", reply="not json at all")
    result = project.run("-q", "--ncp-min-survival=0.5@2")
    assert result.ret == 6, result.stdout.str()
    out = result.stdout.str()
    assert "ncp error budget EXCEEDED: 1 of 1 episode(s) of the session could not be judged" in out
    assert "ncp survival gate FAILED: cannot decide: 1 of 1 episode(s) could not be judged" in out


def test_within_the_budget_unknown_outcomes_are_skipped_and_the_session_passes(project):
    project.server.add(step="fact_update", reply="not json at all")
    result = project.run("-q", "-rs", "--ncp-max-error-rate=1")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(skipped=7, passed=1)  # the budget (above 0) is a test of its own, and held
    result.stdout.fnmatch_lines(["*unknown outcome, counted against the error budget: caligari: auditor error*"])


def test_a_bad_error_rate_is_a_usage_error(project):
    result = project.run("--ncp-max-error-rate=lots")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--ncp-max-error-rate='lots': expected a share within 0..1*"])


def test_a_narrator_error_fails_the_episode_test_and_counts_in_the_table(project):
    result = project.run("-q", narrator="agent:Exploding")
    assert result.ret == 1
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1 and "error" not in outcomes and "errors" not in outcomes
    out = result.stdout.str()
    assert "caligari: narrator error after turn 1: RuntimeError: narrator backend fell over" in out
    assert "1 narrator error(s) counted as failures" in out


def test_the_terminal_table_says_n_a_when_no_episode_reached_the_turn(project):
    project.succeed_at(3)
    out_dir = project.pytester.path / "out"
    result = project.run("-q", f"--ncp-report={out_dir}")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*survival@4 [*]*100.0% (95% CI*", "*invariants held [*][*]*",
                                 "*[*] Kaplan-Meier*log-log (Greenwood)*", "*[*][*] satisfied: achievements*"])
    # A success survives throughout: measured at 20 although the story ended at turn 3.
    assert json.loads((out_dir / "results.json").read_text())["metrics"]["survival_at_20"] == 1.0
    project.server.reset()
    # A gate no episode can reach is refused before anything runs; a table of a short run says n/a at turn 20.
    limited = project.run("-q", f"--ncp-report={out_dir}", "--ncp-min-survival=0.5@20", max_turns=3)
    assert limited.ret == pytest.ExitCode.USAGE_ERROR
    limited.stderr.fnmatch_lines(["*--ncp-min-survival=0.5@20 gates survival@20, but --ncp-max-turns=3*"])
    limited = project.run("-q", f"--ncp-report={out_dir}", "--ncp-min-survival=0.5@3", max_turns=3)
    limited.stdout.fnmatch_lines(["*survival@3 [*]*"])
    data = json.loads((out_dir / "results.json").read_text())
    assert data["metrics"]["survival_at_20"] is None
    assert data["config"]["fingerprint"] and data["episodes"][0]["spec_fingerprint"]
