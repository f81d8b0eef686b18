"""Two runs are compared at one horizon: a shorter candidate run never "does not regress" by default."""

from __future__ import annotations

import pytest

from pytest_ncp.cli import main
from tests.conftest import SPECS


@pytest.fixture
def two_horizons(tmp_path, capsys):
    spec = str(SPECS / "caligari.yaml")
    for name, turns in (("base", "3"), ("new", "1")):
        assert main(["demo", "--specs", spec, "--max-turns", turns, "--out", str(tmp_path / name)]) in (0, 1)
    capsys.readouterr()
    return str(tmp_path / "base"), str(tmp_path / "new")


@pytest.mark.parametrize("budget", [(), ("--max-error-rate", "0.25")], ids=["default", "error-budget"])
def test_ncp_compare_refuses_two_horizons_naming_both(two_horizons, capsys, budget):
    base, new = two_horizons
    assert main(["compare", base, new, *budget]) == 1
    err = capsys.readouterr().err
    assert "different horizons" in err and "survival@3" in err and "survival@1" in err


def test_ncp_compare_at_a_turn_both_runs_played(two_horizons, capsys):
    base, new = two_horizons
    assert main(["compare", base, new, "--turn", "1"]) in (0, 1)
    assert "different horizons" not in capsys.readouterr().err
    assert main(["compare", base, new, "--turn", "3"]) == 1
    assert "new never played to turn 3" in capsys.readouterr().err


def test_a_baseline_of_another_horizon_fails_the_session(project):
    project.succeed_at(1)
    base = project.pytester.path / "base"
    assert project.run("-q", f"--ncp-report={base}", max_turns=3).ret == 0
    assert project.run("-q", max_turns=1).ret == 0  # the shorter session passes on its own
    shorter = project.run("-q", f"--ncp-baseline={base / 'results.json'}", max_turns=1)
    assert shorter.ret != 0, shorter.stdout.str()
    shorter.stdout.fnmatch_lines(["*different horizons*survival@3*survival@1*"])
