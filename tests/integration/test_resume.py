"""--ncp-resume keeps the episodes a killed session finished and runs only the rest."""

from __future__ import annotations

import json


def test_resume_skips_finished_episodes(project):
    project.twin("b-spec")
    project.succeed_at(2)
    out = project.pytester.path / "out"
    first = project.run("-q", f"--ncp-report={out}", "-k", "b-spec")
    assert first.ret == 0
    project.server.reset()
    project.succeed_at(2)

    again = project.run("-q", f"--ncp-report={out}", "--ncp-resume")
    assert again.ret == 0, again.stdout.str()
    again.assert_outcomes(passed=14)
    # Only caligari ran (success at turn 2: two conflict checks); b-spec came back from its trace.
    assert len([r for r in project.server.requests if r.step == "conflict_check"]) == 2
    assert len(json.loads((out / "results.json").read_text())["episodes"]) == 2


def test_resume_needs_a_report_dir(project):
    result = project.run("--ncp-resume")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--ncp-resume needs --ncp-report=DIR*"])


def test_ctrl_c_says_how_to_resume(project):
    project.twin("b-spec")
    project.succeed_at(2)
    out = project.pytester.path / "out"
    project.pytester.makeconftest("""
        def pytest_runtest_logreport(report):
            if report.when == "call" and "episode[b-spec]" in report.nodeid:
                raise KeyboardInterrupt
    """)
    result = project.run_subprocess(f"--ncp-report={out}")
    assert result.ret == 2  # pytest's INTERRUPTED
    result.stdout.fnmatch_lines(["interrupted: 1 finished episode(s) are in *results.json; run the same command "
                                 "with --ncp-resume to continue"])
    assert json.loads((out / "results.json").read_text())["episodes"][0]["spec_id"] == "b-spec"
