"""The same run with -n 2, with -p no:xdist, and into JUnit XML: same outcomes, same gate, properties kept."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.integration.conftest import FACT_CONFLICT


def three_specs(project):
    project.twin("b-spec")
    project.twin("c-spec")
    project.server.add(step="conflict_check", contains="TURN 2.",
                       reply=lambda r: FACT_CONFLICT if "<narration>" in r.text and _once(project) else {"conflicts": []})
    project.succeed_at(3)


def _once(project):
    if project.__dict__.get("_done"):
        return False
    project.__dict__["_done"] = True
    return True


def test_xdist_gives_the_same_outcomes_and_gate(project):
    three_specs(project)
    out = project.pytester.path / "out"
    result = project.run_subprocess("-n", "2", "-q", "--ncp-min-survival=0.6@4", f"--ncp-report={out}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*ncp survival gate PASSED: survival@4 = 66.7% (95% CI *, 3 episodes)*"])
    outcomes = result.parseoutcomes()
    # The conflicting episode and its two achievements are xfailed; two specs pass all 7 tests.
    assert outcomes["passed"] == 14 + 4 and outcomes["xfailed"] == 3
    data = json.loads((out / "results.json").read_text())
    assert len(data["episodes"]) == 3 and data["metrics"]["conflict_rates"]["fact"] == pytest.approx(1 / 3)
    # Each episode ran exactly once although its tests were spread over workers' schedules.
    # conflict at turn 2 in one spec, success at turn 3 in the others: no episode ran twice.
    assert len([r for r in project.server.requests if r.step == "conflict_check"]) == 2 + 3 + 3


def test_without_xdist(project):
    three_specs(project)
    result = project.run_subprocess("-p", "no:xdist", "-q", "--ncp-min-survival=0.7@4")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*ncp survival gate FAILED: survival@4 = 66.7%*< required 70.0%"])


def test_junit_xml_carries_ncp_properties(project):
    project.conflict_at(2)
    xml = project.pytester.path / "ncp.xml"
    project.run("-q", f"--junitxml={xml}")
    root = ET.parse(xml).getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    episode = cases["episode[caligari]"]
    props = {p.get("name"): p.get("value") for p in episode.iter("property")}
    assert props["ncp.termination"] == "conflict:fact" and props["ncp.turns"] == "2"
    assert props["ncp.survived"] == "False" and props["ncp.spec_id"] == "caligari"
    assert {"ncp.progress", "ncp.tokens", "ncp.cost_usd", "ncp.trace"} <= set(props)
    failure = episode.find("failure")
    assert failure is not None and failure.get("message").startswith("caligari: fact conflict at turn 2 (F2)")
    c1 = {p.get("name"): p.get("value") for p in cases["commitment[caligari:C1]"].iter("property")}
    assert c1 == {"ncp.commitment": "C1", "ncp.state": "PENDING"}


def test_an_xdist_worker_starts_the_next_episode_early(project):
    for i in range(3):
        project.twin(f"t-{i}")
    project.server.latency = 0.05
    result = project.run_subprocess("-n", "1", "-q", "-k", "episode")
    assert result.ret in (0, 1), result.stdout.str()
    # One episode alone has its four audit calls in flight; two overlapping episodes have more.
    assert project.server.max_in_flight > 4
