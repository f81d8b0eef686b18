"""A failing gate is a failed test: pytest's last line, -rA, JUnit XML and results.json say so, with -k and -n 2."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.integration.conftest import FACT_CONFLICT


def one_conflict(project):
    """Two episodes; one ends in a fact conflict at turn 2: survival@4 = 50%."""
    project.twin("b-spec", title="Second Cabinet")
    project.server.add(step="conflict_check", contains="TURN 2.", regex=r"STORY: Second Cabinet\b", reply=FACT_CONFLICT)


def junit(project, name="out.xml"):
    root = ET.parse(project.pytester.path / name).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    return suite


def last_line(result):
    return [line for line in result.stdout.lines if line.strip()][-1]


@pytest.mark.parametrize("extra", [[], ["-k", "episode"], ["-n", "2"]], ids=["all", "k", "xdist"])
def test_a_failing_gate_is_one_failed_test(project, extra):
    one_conflict(project)
    out = project.pytester.path / "report"
    result = project.run_subprocess("-rA", "--ncp-min-survival=0.9@4", "--junitxml=out.xml", f"--ncp-report={out}",
                                    *extra)
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert "1 failed" in last_line(result), text
    result.stdout.fnmatch_lines(["FAILED ncp::gate[[]survival[]] - ncp survival gate FAILED: survival@4 = 50.0%*"])
    suite = junit(project)
    assert int(suite.get("failures")) == 1, ET.tostring(suite)
    case = next(c for c in suite.iter("testcase") if c.get("name") == "gate[survival]")
    failure = case.find("failure")
    assert failure is not None and "survival@4 = 50.0%" in (failure.get("message") or "")
    verdict = json.loads((out / "results.json").read_text())["verdict"]
    assert (verdict["outcome"], verdict["exit_code"]) == ("failed", 1)
    survival = next(c for c in verdict["checks"] if c["kind"] == "survival")
    assert (survival["decision"], survival["threshold"], survival["value"], survival["turn"]) == \
        ("failed", 0.9, 0.5, 4)
    assert len(survival["interval"]) == 2 and "survival gate FAILED" in survival["reason"]
    if extra[:1] == ["-k"]:
        assert "selected tests only (-k 'episode')" in text and verdict["selection"]
    assert "gate verdict" in (out / "report.html").read_text()


def test_a_passing_gate_is_a_passed_test(project):
    one_conflict(project)
    result = project.run_subprocess("-rA", "--ncp-min-survival=0.4@4", "--junitxml=out.xml")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes, result.stdout.str()
    result.stdout.fnmatch_lines(["PASSED ncp::gate[[]survival[]]"])
    assert int(junit(project).get("failures")) == 0


def test_an_exceeded_error_budget_fails_its_item_and_keeps_exit_6(project):
    project.server.add(step="conflict_check", reply="not json at all")
    result = project.run_subprocess("-rA", "--ncp-max-error-rate=0.1", "--ncp-min-survival=0.5@4")
    assert result.ret == 6, result.stdout.str()
    result.stdout.fnmatch_lines(["FAILED ncp::gate[[]error-budget[]] - ncp error budget EXCEEDED*"])
    assert "failed" in last_line(result)


def test_without_a_gate_a_passing_session_has_no_gate_item(project):
    result = project.run("-q")
    assert "ncp::gate" not in result.stdout.str() and "gate[" not in result.stdout.str()
