"""--ncp-report writes results.json and a self-contained report.html; --ncp-baseline gates on a regression."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import FACT_CONFLICT


def eight_specs(project):
    for i in range(7):
        project.twin(f"twin-{i}")
    project.succeed_at(2)


def test_report_dir_gets_results_and_html(project):
    eight_specs(project)
    out = project.pytester.path / "out"
    result = project.run("-q", f"--ncp-report={out}")
    assert result.ret == 0, result.stdout.str()
    html = (out / "report.html").read_text()
    assert "twin-3" in html and "<svg" in html and "http://" not in html.split("<body", 1)[1][:2000]
    assert json.loads((out / "results.json").read_text())["metrics"]["episodes"] == 8
    result.stdout.fnmatch_lines(["results: *out/results.json, report: *out/report.html"])


def test_baseline_regression_fails_the_session_and_the_same_run_does_not(project):
    eight_specs(project)
    base = project.pytester.path / "base"
    assert project.run("-q", f"--ncp-report={base}").ret == 0

    same = project.run("-q", f"--ncp-baseline={base / 'results.json'}", "--ncp-min-survival=0@4")
    assert same.ret == 0, same.stdout.str()
    same.stdout.fnmatch_lines(["ncp baseline *results.json:", "ncp compare: *survival@4 unchanged at 100.0%*"])

    project.server.add(step="conflict_check", contains="TURN 1.", reply=FACT_CONFLICT)
    worse = project.run("-q", f"--ncp-baseline={base / 'results.json'}", "--ncp-min-survival=0@4")
    assert worse.ret == pytest.ExitCode.TESTS_FAILED
    worse.stdout.fnmatch_lines(["ncp survival gate PASSED*",
                                "ncp compare: *survival@4 fell from 100.0% to 0.0% over 8 paired episode(s)*"])
    assert "twin-3" in worse.stdout.str()


def test_missing_baseline_is_a_usage_error(project):
    result = project.run("--ncp-baseline=nowhere.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no such results file: nowhere.json*"])
