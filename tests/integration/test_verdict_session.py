"""The pytest session reaches its verdict through analysis/verdict.py: what it refuses to call a pass."""

from __future__ import annotations

import json
import textwrap

import pytest

INTERRUPT_AFTER_FIRST = textwrap.dedent('''
    import pytest

    def pytest_runtest_logreport(report):
        # Ctrl-C once the first spec test has reported: the session stops with the other episodes unreported.
        if report.when == "teardown" and "::episode[" in report.nodeid:
            raise KeyboardInterrupt
''')


def twins(project, *names):
    for name in names:
        project.twin(name, title=f"The {name}")


def test_an_interrupted_session_never_says_gate_passed(project):
    # Before: "ncp survival gate PASSED" on the one episode that finished, and results.json looked whole.
    twins(project, "b-spec", "c-spec")
    project.pytester.makeconftest(INTERRUPT_AFTER_FIRST)
    out = project.pytester.path / "out"
    result = project.run_subprocess("-q", "--ncp-min-survival=0.5@4", f"--ncp-report={out}", "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    text = result.stdout.str()
    assert "gate PASSED" not in text
    result.stdout.fnmatch_lines([
        "ncp: INCOMPLETE session: 1 of 3 expected episode(s) finished; it was interrupted. *",
        "ncp survival gate FAILED: cannot decide: the session is incomplete *",
    ])
    data = json.loads((out / "results.json").read_text())
    assert (data["complete"], data["stopped"], len(data["expected"]), len(data["finished"])) == \
        (False, "interrupted", 3, 1)


def test_the_error_budget_counts_episodes_whose_tests_are_commitment_tests_only(project):
    # Adversarial finding 10: every conflict check unparseable, budget 0.1, `-k commitment`: 6 skipped, exit 0.
    project.server.add(step="conflict_check", reply="not json at all")
    result = project.run("-q", "-k", "commitment", "--ncp-max-error-rate=0.1")
    assert result.ret == 6, result.stdout.str()
    result.stdout.fnmatch_lines(["ncp error budget EXCEEDED: 1 of 1 episode(s) of the session could not be judged*"])
    assert "deselected" in result.stdout.str()


def test_a_narrator_error_fails_the_session_even_when_only_invariant_tests_ran(project):
    # The episode test (which fails on a narrator error) is deselected; the invariants it left PENDING pass, and
    # the session's narrator-errors check is the one failed test (before: exit 1 behind "2 passed").
    result = project.run("-q", "-k", "C1 or C2", narrator="agent:Exploding")
    assert result.parseoutcomes().get("failed", 0) == 1
    result.stdout.fnmatch_lines(["FAILED ncp::gate[[]narrator-errors[]] - *"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["ncp: 1 episode(s) ended in a narrator error (raised, timed out or answered nothing)"])


def test_a_session_stopped_by_collection_errors_is_interrupted_and_undecided(project):
    # pytest stops before running anything ("Interrupted: 1 error during collection"): exit 2, and the gate
    # must not judge the spec tests it collected but never ran.
    project.pytester.makepyfile(test_broken="def test_x(:\n    pass\n")
    result = project.run("-q", "--ncp-min-survival=0.5@4")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["ncp: INCOMPLETE session: 0 of 1 expected episode(s) finished; it was interrupted. *",
                                 "ncp survival gate FAILED: cannot decide: the session is incomplete *"])


@pytest.mark.parametrize("args", [["--collect-only"], ["--collect-only", "--ncp-min-survival=0.5@2"], ["--fixtures"]])
def test_a_session_that_runs_no_test_by_design_has_no_verdict(project, args):
    # --collect-only with a gate exited 1 with no reason on main; counting its selected episodes as missing
    # would make every --collect-only "incomplete".
    result = project.run("-q", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "INCOMPLETE" not in result.stdout.str() and "gate" not in result.stdout.str()
