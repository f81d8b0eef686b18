"""Pytest habits for specs: a folder on the command line collects its specs, a gate that cannot work is refused
at once, and an achievement the episode never reached is skipped, not failed."""

from __future__ import annotations

import pytest

from tests.integration.conftest import caligari_text


def test_a_folder_named_on_the_command_line_collects_its_specs(project):
    suite = project.pytester.path / "suite"
    suite.mkdir()
    (suite / "lighthouse.yaml").write_text(caligari_text().replace("id: caligari\n", "id: lighthouse\n", 1))
    (suite / "settings.yml").write_text("id: tool\nname: not a spec\n")  # other YAML is left alone
    result = project.run("-q", "suite/")
    result.stdout.fnmatch_lines(["*passed*"])
    assert "lighthouse" in result.stdout.str() or result.parseoutcomes().get("passed", 0) > 0
    outcomes = result.parseoutcomes()
    assert sum(outcomes.get(k, 0) for k in ("passed", "failed", "skipped", "xfailed")) == 7, result.stdout.str()
    assert "error" not in outcomes and "errors" not in outcomes, result.stdout.str()


def test_a_folder_without_specs_says_where_spec_tests_come_from(project):
    other = project.pytester.path / "other"
    other.mkdir()
    (other / "compose.yaml").write_text("services:\n  web:\n    image: x\n")
    result = project.run("other/")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["pytest-ncp: no spec test collected (the YAML under other does not look like a "
                                 "spec*); spec tests come from --ncp-specs*"])


@pytest.mark.parametrize("gate, max_turns, expected", [
    ("0.4@0", 4, "--ncp-min-survival='0.4@0': TURN must be at least 1*"),
    ("0.4@50", 3, "*--ncp-min-survival=0.4@50 gates survival@50, but --ncp-max-turns=3: no episode can reach turn 50*"),
])
def test_a_gate_that_cannot_work_is_a_usage_error(project, gate, max_turns, expected):
    result = project.run(f"--ncp-min-survival={gate}", max_turns=max_turns)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{expected}"])
    assert not project.server.requests  # refused before any model call


def test_an_achievement_the_episode_never_reached_is_skipped_not_failed(project):
    result = project.run("-rs", max_turns=2)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes and outcomes["skipped"] == 2, result.stdout.str()
    result.stdout.fnmatch_lines(["SKIPPED *caligari: achievement C5 not reached in 2 turn(s) (the episode ended: "
                                 "turn_limit)*"])
