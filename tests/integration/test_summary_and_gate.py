"""The terminal table, the survival gate and its exit code, results.json."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import FACT_CONFLICT
from pytest_ncp.testing import opening


def four_specs(project):
    for name in ("b-spec", "c-spec", "d-spec"):
        project.twin(name)
    # One of four episodes ends in a conflict at turn 3: survival@4 = 75%.
    project.server.add(step="conflict_check", contains="TURN 3.", regex=r"(?s)STORY:.*" + opening("narration"),
                       reply=lambda r: FACT_CONFLICT if "Holstenwall" in r.text and _first(project, r) else {"conflicts": []})


def _first(project, request):
    seen = project.__dict__.setdefault("_flagged", set())
    if seen:
        return False
    seen.add(id(request))
    return True


def test_summary_table_is_printed(project):
    four_specs(project)
    result = project.run("-q", "--ncp-max-turns=4")
    result.stdout.fnmatch_lines([
        "*= ncp: narrative commitment preservation =*",
        "narrator agent:Narrator | auditor openai/gpt-4o-mini | player scripted | max turns 4",
        "  episodes * 4 (0 narrator error(s) counted as failures, 0 unknown outcome(s) excluded below)",
        # A 4-turn run reports the turn it can measure, not survival@20.
        "  survival@4 * 75.0% (95% CI *",
        "  fact conflicts * 25.0% *",
    ])
    assert "survival@20" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_gate_passes_with_conflicts_as_xfail(project):
    four_specs(project)
    result = project.run("-q", "-rx", "--ncp-min-survival=0.7@4")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["ncp survival gate PASSED: survival@4 = 75.0% (95% CI *), 4 of 4 episode(s) observed to turn 4; "
                                 ">= required 70.0%"])
    outcomes = result.parseoutcomes()
    # The conflict: expected within the gate; the achievements no episode reached (two per spec) are skipped; the
    # gate is a passed test of its own.
    assert outcomes["xfailed"] == 1 and outcomes["skipped"] == 4 * 2 and "failed" not in outcomes
    result.stdout.fnmatch_lines(["*passed*"])
    assert "ncp::gate" not in result.stdout.str() or "FAILED ncp::gate" not in result.stdout.str()
    result.stdout.fnmatch_lines(["XFAIL specs/*::episode?*? - *: fact conflict at turn 3 (F2) specs/*.yaml:*"])


def test_gate_fails_the_session(project):
    four_specs(project)
    result = project.run("-q", "--ncp-min-survival=80%@4")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["ncp survival gate FAILED: survival@4 = 75.0% (95% CI *), 4 of 4 episode(s) observed to turn 4; "
                                 "< required 80.0%"])


def test_report_writes_results_json_and_traces(project):
    four_specs(project)
    result = project.run("-q", f"--ncp-report={project.pytester.path / 'out'}")
    data = json.loads((project.pytester.path / "out" / "results.json").read_text())
    assert data["version"] == 3 and data["config"]["narrator"] == "agent:Narrator"
    assert [e["spec_id"] for e in data["episodes"]] == ["b-spec", "c-spec", "caligari", "d-spec"]
    assert data["metrics"]["episodes"] == 4 and data["metrics"]["conflict_rates"]["fact"] == 0.25
    for e in data["episodes"]:  # recorded relative to the results folder, like `ncp run --out`
        assert e["trace"] == f"traces/{e['spec_id']}--r0.jsonl"
        assert (project.pytester.path / "out" / e["trace"]).exists()
    result.stdout.fnmatch_lines(["results: *out/results.json, report: *out/report.html"])
