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


@pytest.mark.parametrize("flag,message", [
    ("--ncp-player=chaotic", "  --ncp-player='chaotic': unknown player; valid: scripted, adversarial, natural"),
    ("--ncp-max-turns=-3", "  --ncp-max-turns='-3': expected a whole number >= 1"),
    ("--ncp-min-survival=0.4@x", "  --ncp-min-survival='0.4@x': expected RATE[[]@TURN], e.g. 0.4@20 or 40%@20"),
    ("--ncp-min-survival=150%", "  --ncp-min-survival='150%': RATE must be within 0..1 (or 0%..100%), TURN >= 1"),
    ("--ncp-max-tokens=auditor=many", "  --ncp-max-tokens='auditor=many': ROLE=N: N must be a whole number >= 1"),
])
def test_a_bad_value_stops_the_run_naming_the_option_and_what_is_valid(project, flag, message):
    result = project.run(flag)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-ncp: invalid options:", message])
    assert "passed" not in result.stdout.str() and not project.server.requests  # nothing started


def test_every_bad_value_is_listed_at_once_and_an_ini_key_is_named_as_such(project):
    project.pytester.makeini("""
        [pytest]
        pythonpath = .
        ncp_narrator = agent:Narrator
        ncp_max_turns = -3
    """)
    result = project.pytester.runpytest("--ncp-player=chaotic", "--ncp-resume")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--ncp-player='chaotic': unknown player*",
                                 "*ini ncp_max_turns='-3': expected a whole number >= 1*",
                                 "*--ncp-resume needs --ncp-report=DIR (the run to continue)*"])


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
    result.stdout.fnmatch_lines(["*5 passed, 2 skipped*"])  # the achievements were due at turn 2: not reached


def test_options_are_listed_in_help(project):
    result = project.pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*narrative commitment preservation*", "*--ncp-narrator=NCP_NARRATOR*",
                                 "*--ncp-min-survival=*"])


@pytest.mark.parametrize("how", ["flag", "ini"])
def test_an_expert_setting_works_as_ini_key_and_as_its_unlisted_flag(project, how):
    # --ncp-max-response-chars is out of --help (an expert setting) but parsed like any option.
    given = ("--ncp-max-response-chars=20",) if how == "flag" else ()
    if how == "ini":
        project.pytester.makeini("[pytest]\npythonpath = .\nncp_max_response_chars = 20\n")
    result = project.run("-q", "-k", "episode", *given)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*narrator error*over the limit of 20*"])  # without it the episode passes
    assert "--ncp-max-response-chars" not in project.pytester.runpytest("--help").stdout.str().split("[pytest] ini")[0]
