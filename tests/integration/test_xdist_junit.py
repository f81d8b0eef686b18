"""The same run with -n 2, with -p no:xdist, and into JUnit XML: same outcomes, same gate, properties kept."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from tests.integration.conftest import FACT_CONFLICT
from pytest_ncp.testing import data_in


def three_specs(project):
    project.twin("b-spec", title="Second Cabinet")
    project.twin("c-spec", title="Third Cabinet")
    project.server.add(step="conflict_check", contains="TURN 2.",
                       reply=lambda r: FACT_CONFLICT if data_in(r.text, "narration") and _once(project) else {"conflicts": []})
    project.succeed_at(3)


def _once(project):
    if project.__dict__.get("_done"):
        return False
    project.__dict__["_done"] = True
    return True


def _calls_per_episode(project) -> Counter:
    """(story title, step, turn) -> requests: an episode that ran twice shows up as a count of 2."""
    calls: Counter = Counter()
    for r in project.server.requests:
        if r.path.endswith("/models"):  # the run's preflight of the endpoint, before any episode
            continue
        story = re.search(r"STORY: ([^.\n]+)", r.text)
        turn = re.search(r"TURN (\d+)\.", r.text)
        calls[(story and story[1], r.step or r.role, turn and turn[1])] += 1
    return calls


def _verdicts(out) -> dict:
    data = json.loads((out / "results.json").read_text())
    return {(e["spec_id"], e["repeat"]): (e["termination"], e["turns"], e["failure"], e["commitments"])
            for e in data["episodes"]}


COUNTING = """
import os
from agent import Narrator


class Counting(Narrator):
    \"\"\"Appends one line per narrated turn (spec, repeat, turn, worker) to narrations.txt.\"\"\"

    def respond(self, player_input, context):
        with open("narrations.txt", "a") as log:
            log.write(f"{context.spec.id} {context.repeat} {context.turn} {os.getpid()}\\n")
        return super().respond(player_input, context)
"""


def _narrated_turns(project) -> Counter:
    lines = (project.pytester.path / "narrations.txt").read_text().splitlines()
    return Counter(tuple(line.split()[:3]) for line in lines)


@pytest.mark.parametrize("dist", [None, "loadscope", "loadfile"])
def test_xdist_runs_each_episode_once_with_the_same_verdicts(project, dist):
    three_specs(project)
    project.pytester.makepyfile(counting=COUNTING)
    out = project.pytester.path / "out"
    chosen = () if dist is None else (f"--dist={dist}",)  # None: -n alone, xdist's default mode
    result = project.run_subprocess("-n", "2", *chosen, "-q", "--ncp-min-survival=0.6@4", f"--ncp-report={out}",
                                    narrator="counting:Counting")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    narrated = _narrated_turns(project)
    # The narrator played every turn of every episode exactly once: no episode ran on two workers.
    assert {spec for spec, _, _ in narrated} == {"caligari", "b-spec", "c-spec"}
    assert max(narrated.values()) == 1, {k: v for k, v in narrated.items() if v > 1}
    result.stdout.fnmatch_lines(["*ncp survival gate PASSED: survival@4 = 66.7% (95% CI *), 3 of 3 episode(s) observed to turn 4; *"])
    outcomes = result.parseoutcomes()
    # The conflicting episode is xfailed and its two achievements, never reached, skipped; two specs pass all 7
    # tests; the gate is one more passed test.
    assert outcomes["passed"] == 14 + 4 + 1 and outcomes["xfailed"] == 1 and outcomes["skipped"] == 2
    calls = _calls_per_episode(project)
    # Every (episode, step, turn) reached the model exactly once: no episode ran on two workers.
    assert calls and max(calls.values()) == 1, {k: v for k, v in calls.items() if v > 1}
    assert {story for story, _, _ in calls} == {"The Cabinet of Dr", "Second Cabinet", "Third Cabinet"}
    # The controller collects nothing: it learned the selected episodes from the workers' collections.
    data = json.loads((out / "results.json").read_text())
    assert data["complete"] and data["expected"] == ["b-spec--r0", "c-spec--r0", "caligari--r0"]
    parallel = _verdicts(out)

    project.server.reset()
    project.__dict__.pop("_done", None)
    three_specs(project)
    serial_out = project.pytester.path / "serial"
    serial = project.run_subprocess("-n", "0", "-q", "--ncp-min-survival=0.6@4", f"--ncp-report={serial_out}")
    assert serial.ret == pytest.ExitCode.OK, serial.stdout.str()
    # Which spec conflicts depends on which episode asks first; the verdicts as a set are the same.
    assert sorted(parallel.values(), key=str) == sorted(_verdicts(serial_out).values(), key=str)


@pytest.mark.parametrize("dist", ["load", "worksteal", "each", "loadgroup"])
def test_a_dist_mode_that_could_split_an_episode_is_a_usage_error_naming_loadscope(project, dist):
    project.pytester.makepyfile(counting=COUNTING)
    result = project.run_subprocess("-n", "2", f"--dist={dist}", "-q", narrator="counting:Counting")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"*pytest-ncp: --dist {dist} *an episode would be played more than once; use "
                                 "--dist loadscope or --dist loadfile*"])
    assert not (project.pytester.path / "narrations.txt").exists() and not project.server.requests


def test_without_a_narrator_the_dist_mode_is_the_users(project):
    project.pytester.makepyfile(test_plain="def test_ok(): pass")
    result = project.pytester.runpytest_subprocess("-n", "2", "--dist=worksteal", "-q", "-p", "no:randomly")
    result.assert_outcomes(passed=1)


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
    assert props["ncp.owner"] == "narrator"
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
    # Nothing fulfils the achievements, but only commitment tests check them: every episode passes.
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    # One episode alone has its four audit calls in flight; two overlapping episodes have more.
    assert project.server.max_in_flight > 4
