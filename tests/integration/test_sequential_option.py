"""--ncp-sequential: the session stops starting episodes once its verdict is certain; the tests of episodes that
never started are skipped (``gate decided after N episodes``), plain, with -n 2 and with -p no:xdist."""

from __future__ import annotations

import json
import re

import pytest

from pytest_ncp.analysis.sequential_run import episode_order
from tests.integration.conftest import FACT_CONFLICT

SPECS = 20
TESTS_PER_SPEC = 7  # the episode test and one per commitment of the caligari spec
UNMET = 2  # its two achievements are not reached in three turns: skipped


def many_specs(project, n=SPECS):
    for i in range(n):
        project.twin(f"story-{i:02d}", title=f"Story {i:02d}")
    (project.pytester.path / "specs" / "caligari.yaml").unlink()


def episodes_asked(project) -> set[str]:
    """The stories whose episode reached the model at all."""
    return {m[1] for r in project.server.requests if (m := re.search(r"STORY: (Story \d\d)", r.text))}


def results(out):
    return json.loads((out / "results.json").read_text())


GATE = ("--ncp-min-survival=0.4@3", "--ncp-concurrency=2", "-q", "-rs")


@pytest.mark.parametrize("how", [(), ("-p", "no:xdist"), ("-n", "2")], ids=["plain", "no-xdist", "xdist"])
def test_a_narrator_that_never_conflicts_passes_early_and_the_rest_is_skipped(project, how):
    many_specs(project)
    out = project.pytester.path / "out"
    result = project.run_subprocess(*how, *GATE, "--ncp-sequential", f"--ncp-report={out}", max_turns=3)
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, text
    data = results(out)
    seq = data["sequential"]
    ran = len(data["episodes"])
    assert seq["stopped"] and seq["gate"]["decision"] == "pass" and seq["decided_after"] == 7
    assert ran < SPECS and len(seq["unstarted"]) == SPECS - ran and data["complete"]
    assert len(episodes_asked(project)) == ran  # the unstarted episodes never called a model
    outcomes = result.parseoutcomes()
    # The gate's own item passes; the achievements the episodes never reached are skipped, not failures.
    assert outcomes["passed"] == ran * (TESTS_PER_SPEC - UNMET) + 1 and "xfailed" not in outcomes
    assert outcomes["skipped"] == (SPECS - ran) * TESTS_PER_SPEC + ran * UNMET
    assert f"SKIPPED [{(SPECS - ran) * TESTS_PER_SPEC}] " in text
    assert "gate decided after 7 episodes: never started (--ncp-sequential)" in text
    assert "ncp survival gate PASSED (sequential): decided after 7 of 20 episodes" in text
    assert f"ncp sequential: the session stopped early (gate, decided after 7 of 20 episodes): {SPECS - ran} " \
           "episode(s) never started; their tests are reported as skipped" in text
    # The episodes that ran are the first of the seeded order (the spec tests ran in it): the seed the session
    # drew (no --ncp-seed), one for every worker, recorded.
    assert data["config"]["seed"] == seq["seed"]
    order = [f"{s}--r{r}" for s, r in episode_order([(f"story-{i:02d}", 0) for i in range(SPECS)], seq["seed"])]
    assert [o["episode"] for o in seq["outcomes"]][:7] == order[:7]
    html = (out / "report.html").read_text()
    assert 'id="sequential"' in html and "decided after 7 of 20 episodes (gate: pass)" in html
    assert html.count("<title>threshold 40.0%</title>") == 1  # the confidence sequence is drawn against it


def test_the_ini_keys_do_the_same(project):
    many_specs(project)
    project.pytester.makeini("[pytest]\npythonpath = .\nncp_sequential = true\nncp_min_survival = 0.4@3\n"
                             "ncp_seed = 5\nncp_concurrency = 2\n")
    result = project.run_subprocess("-q", max_turns=3)
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, text
    assert "ncp survival gate PASSED (sequential): decided after 7 of 20 episodes" in text
    assert result.parseoutcomes()["skipped"] > 0


def test_a_narrator_that_always_conflicts_fails_early_with_the_fixed_verdict(project):
    many_specs(project)
    project.conflict_at(2)
    fixed = project.run_subprocess(*GATE, max_turns=3)
    fixed_calls = len(project.server.requests)
    assert fixed.ret == pytest.ExitCode.TESTS_FAILED
    result = project.run_subprocess(*GATE, "--ncp-sequential", max_turns=3)
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert "ncp survival gate FAILED (sequential): decided after 13 of 20 episodes" in text
    outcomes = result.parseoutcomes()
    assert outcomes["skipped"] >= TESTS_PER_SPEC and outcomes["xfailed"] >= 13  # conflicts within the gate: xfail
    assert len(project.server.requests) - fixed_calls < 0.9 * fixed_calls


def test_without_a_gate_sequential_is_a_usage_error(project):
    result = project.run("--ncp-sequential")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--ncp-sequential needs --ncp-min-survival=RATE[@TURN] (the survival gate it decides early)" in \
        result.stderr.str()


def test_a_baseline_regression_stops_the_candidate_session(project):
    many_specs(project)
    base = project.pytester.path / "base"
    assert project.run_subprocess(*GATE, f"--ncp-report={base}", max_turns=3).ret == pytest.ExitCode.OK
    project.server.reset()
    project.conflict_at(2)
    result = project.run_subprocess(*GATE, "--ncp-sequential", f"--ncp-baseline={base / 'results.json'}",
                                    f"--ncp-report={project.pytester.path / 'new'}", max_turns=3)
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    # Every pair survived -> failed: the paired check is certain before the gate (9 pairs against 13 episodes).
    assert re.search(r"ncp baseline .*results.json \(sequential\): REGRESSION decided after \d+ pair\(s\)", text)
    assert "stopped early when the baseline check decided" in text
    seq = results(project.pytester.path / "new")["sequential"]
    assert seq["stopped_by"] == "baseline" and seq["baseline"]["decision"] == "regression" and seq["unstarted"]


def test_no_change_within_a_margin_stops_once_both_checks_pass(project):
    many_specs(project)
    base = project.pytester.path / "base"
    assert project.run_subprocess(*GATE, f"--ncp-report={base}", max_turns=3).ret == pytest.ExitCode.OK
    result = project.run_subprocess(*GATE, "--ncp-sequential", f"--ncp-baseline={base / 'results.json'}",
                                    "--ncp-margin=0.4", f"--ncp-report={project.pytester.path / 'new'}",
                                    max_turns=3)
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, text
    assert re.search(r"\(sequential\): NON-INFERIOR decided after \d+ pair\(s\): any drop in survival is certainly "
                     r"below 40.0%", text)
    seq = results(project.pytester.path / "new")["sequential"]
    assert seq["stopped_by"] == "gate and baseline" and seq["unstarted"]


def test_episodes_cancelled_after_the_decision_are_skipped_never_passed(project):
    # --ncp-sequential-cancel ends the episodes in flight at their next turn: censored, judged by no one, so
    # their tests are skipped with the reason, like the budget's other ending (--ncp-max-cost).
    many_specs(project)
    # The 8th and 9th episodes of seed 0's order are slow, so they are in flight when the 7th outcome decides
    # (the seed is given: without it each run draws its own order).
    order = [s for s, _ in episode_order([(f"story-{i:02d}", 0) for i in range(SPECS)], 0)]
    for spec_id in order[7:9]:
        project.server.add(step="conflict_check", contains=f"STORY: Story {spec_id[-2:]}", delay=0.4)
    out = project.pytester.path / "out"
    result = project.run_subprocess("-p", "no:xdist", "--ncp-min-survival=0.4@6", "--ncp-concurrency=2", "-q", "-rs",
                                    "--ncp-sequential", "--ncp-sequential-cancel", "--ncp-seed=0", f"--ncp-report={out}",
                                    max_turns=6)
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, text
    cancelled = [e for e in results(out)["episodes"] if e["termination"] == "cancelled"]
    assert {e["spec_id"] for e in cancelled} & set(order[7:9]), "an episode in flight when the gate decided"
    for e in cancelled:
        assert f"{e['spec_id']}: cancelled at turn {e['turns']} after the sequential gate decided " \
               "(--ncp-sequential-cancel): not judged" in text
    assert results(out)["metrics"]["blame"]["owners"]["budget"]["count"] == len(cancelled)
