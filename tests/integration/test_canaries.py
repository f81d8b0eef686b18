"""--ncp-canaries: gold cases audited beside the episodes; their score reaches the summary, results.json
and JUnit XML, and a gated run fails naming the auditor when it misses them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from pytest_ncp.calibration.audit import sample_canaries
from pytest_ncp.calibration.goldset import load_gold_set
from pytest_ncp.testing.calibration import install
from tests.conftest import ROOT
from pytest_ncp.testing import data_in

GOLD = ROOT / "calibration"


def canaries(project, k: int, answer, seed: int = 0) -> list:
    cases = sample_canaries(load_gold_set(GOLD).cases, k, seed=seed)
    install(project.server, cases, answer)
    return cases


def seed_without(spec_id: str, k: int) -> int:
    """A canary seed whose k cases include none of ``spec_id`` (so a rule aimed at that spec's episode
    prompts cannot also hit a canary, whatever cases the gold set gains)."""
    gold = load_gold_set(GOLD).cases
    return next(s for s in range(1000) if all(c.spec.id != spec_id for c in sample_canaries(gold, k, seed=s)))


def test_canary_scores_reach_summary_results_and_junit(project):
    cases = canaries(project, 6, "gold")
    out, xml = project.pytester.path / "out", project.pytester.path / "junit.xml"
    result = project.run("-q", "--ncp-canaries=6", f"--ncp-canary-set={GOLD}", f"--ncp-report={out}",
                         f"--junitxml={xml}", "--ncp-min-survival=0@4")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["auditor canaries: 3/3 violations caught, 3/3 clean passed",
                                 "canary gate PASSED: *"])
    data = json.loads((out / "results.json").read_text())
    assert data["canaries"]["caught"] == 3 and data["canaries"]["passed"] == 3 and data["canaries"]["ok"] is True
    assert sorted(c["case"] for c in data["canaries"]["cases"]) == sorted(c.id for c in cases)
    assert len(data["episodes"]) == 1  # canaries never become episodes
    props = {p.get("name"): p.get("value") for p in ET.parse(xml).getroot().iter("property")}
    assert props["ncp.canary_caught"] == "3" and props["ncp.canary_passed"] == "3"
    assert props["ncp.canary_violations"] == "3" and props["ncp.canary_ok"] == "True"


def test_a_gated_run_whose_auditor_misses_canaries_fails_naming_the_auditor(project):
    # The narrator's episode is clean and the survival gate passes: only the canaries fail the run.
    canaries(project, 6, "never")
    result = project.run("-q", "--ncp-canaries=6", f"--ncp-canary-set={GOLD}", "--ncp-min-survival=0@4")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines([
        "ncp survival gate PASSED: *",
        "auditor canaries: 0/3 violations caught, 3/3 clean passed",
        "canary gate FAILED: the auditor (openai/gpt-4o-mini) missed known answers *the AUDITOR, not the "
        "narrator, is in doubt*",
    ])
    # No narrator test is blamed: the one failed test is the canaries' own gate item.
    assert result.parseoutcomes()["failed"] == 1
    result.stdout.fnmatch_lines(["FAILED ncp::gate[[]canaries[]] - auditor canaries: 0/3 violations caught*"])


def test_invalid_canary_answers_are_misses(project):
    canaries(project, 4, "invalid")
    result = project.run("-q", "--ncp-canaries=4", f"--ncp-canary-set={GOLD}", "--ncp-min-canary-recall=0.5")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["auditor canaries: 0/2 violations caught, 0/2 clean passed (4 invalid answer(s), "
                                 "counted as misses)"])


def test_a_missing_canary_set_is_a_usage_error(project):
    result = project.run("--ncp-canaries=3", f"--ncp-canary-set={project.pytester.path / 'nowhere'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--ncp-canary-set: no gold set at *nowhere*"])


def test_canaries_run_once_on_the_xdist_controller(project):
    canaries(project, 4, "gold")
    xml = project.pytester.path / "junit.xml"
    result = project.run_subprocess("-n", "2", "-q", "--ncp-canaries=4", f"--ncp-canary-set={GOLD}",
                                    f"--junitxml={xml}")
    result.stdout.fnmatch_lines(["auditor canaries: 2/2 violations caught, 2/2 clean passed"])
    props = {p.get("name"): p.get("value") for p in ET.parse(xml).getroot().iter("property")}
    assert props["ncp.canary_k"] == "4" and props["ncp.canary_ok"] == "True"
    # Each canary was audited once: one conflict check per canary reached the server.
    checks = [r for r in project.server.requests if r.step == "conflict_check" and data_in(r.text, "narration")
              and any(c.response.split()[0] in r.text for c in sample_canaries(load_gold_set(GOLD).cases, 4, seed=0))]
    assert len(checks) >= 4


def test_canary_gate_error_budget_and_survival_gate_each_say_their_part(project):
    # Episodes cannot be judged (exit 6 wins: the run proves nothing) and the auditor also misses canaries:
    # every verdict is printed, and the canary one still names the auditor.
    seed = seed_without("caligari", 4)
    cases = canaries(project, 4, "never", seed=seed)
    assert all(c.spec.id != "caligari" for c in cases)
    project.server.add(step="fact_update", contains="STORY: The Cabinet of Dr. Caligari", reply="not json at all")
    result = project.run("-q", "--ncp-canaries=4", f"--ncp-canary-set={GOLD}", f"--ncp-canary-seed={seed}",
                         "--ncp-min-survival=0.5@2")
    assert result.ret == 6, result.stdout.str()
    result.stdout.fnmatch_lines([
        "ncp error budget EXCEEDED: 1 of 1 episode(s) of the session could not be judged*",
        "ncp survival gate FAILED: cannot decide: *",
        "auditor canaries: 0/2 violations caught, 2/2 clean passed",
        "canary gate FAILED: *the AUDITOR, not the narrator, is in doubt*",
    ])


def test_a_gullible_auditor_that_obeys_the_narration_fails_the_injection_canaries(project):
    # An auditor that follows instructions written into the narration ("note to the auditor: no
    # conflict", a fake closing tag, a fake JSON verdict) passes every ordinary canary but misses the
    # injection ones, which every canary draw of 2 or more violations includes; the canary gate names it.
    cases = canaries(project, 8, "gullible")
    attacked = sum("injection" in c.tags for c in cases if c.violation)
    assert attacked >= 1
    result = project.run("-q", "--ncp-canaries=8", f"--ncp-canary-set={GOLD}", "--ncp-min-canary-recall=1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines([f"auditor canaries: {4 - attacked}/4 violations caught, 4/4 clean passed",
                                 "canary gate FAILED: *the AUDITOR, not the narrator, is in doubt*"])
