"""Options and ini keys: bad values stop the run at configure time saying what is valid."""

from __future__ import annotations

import pytest


def test_without_a_narrator_no_spec_test_is_collected(project):
    project.pytester.makepyfile(test_plain="def test_ok(): pass")
    result = project.pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_plain.py::test_ok", "1 test collected*"])
    assert "episode[" not in result.stdout.str()


@pytest.mark.parametrize("flag,message", [
    ("--ncp-player=chaotic", "*unknown player; valid: scripted, adversarial, natural*"),
    ("--ncp-min-survival=lots", "*--ncp-min-survival='lots': expected RATE[[]@TURN]*"),
    ("--ncp-max-turns=0", "*--ncp-max-turns='0': expected a whole number >= 1*"),
    ("--ncp-player=natural", "*--ncp-player=natural needs --ncp-player-model*"),
    ("--ncp-specs=nowhere", "*no such spec file or directory: nowhere*"),
])
def test_bad_values_are_usage_errors(project, flag, message):
    result = project.run(flag)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_unloadable_narrator_is_a_usage_error(project):
    result = project.run(narrator="agent:Nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*module 'agent' has no attribute 'Nope'*"])
    result = project.run(narrator="agent")
    result.stderr.fnmatch_lines(["*must look like 'module:Attr'*"])


def test_ini_keys_configure_the_run_and_the_command_line_wins(project):
    project.pytester.makeini(f"""
        [pytest]
        pythonpath = .
        ncp_narrator = agent:Narrator
        ncp_api_base = {project.server.base_url}
        ncp_max_turns = 2
        ncp_player = chaotic
    """)
    project.succeed_at(2)
    result = project.pytester.runpytest("--ncp-player=scripted", "-q")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*7 passed*"])
    result = project.pytester.runpytest("--ncp-player=scripted", "--ncp-max-turns=1", "-q")
    result.stdout.fnmatch_lines(["*2 failed, 5 passed*"])  # the achievements were due at turn 2


def test_options_are_listed_in_help(project):
    result = project.pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*narrative commitment preservation*", "*--ncp-narrator=NCP_NARRATOR*",
                                 "*--ncp-min-survival=*"])
