"""pytest options for self-hosted models: limits, timeouts, modes, system prompts, and no cache dir."""

from __future__ import annotations

import json

import pytest


def test_model_call_options_reach_every_request(project):
    project.server.reject_formats = ("json_schema",)
    project.server.drop_system = True
    result = project.run("--ncp-max-tokens=auditor=300,narrator=50", "--ncp-system-prompt=merge",
                         "--ncp-concurrency-per-endpoint=1", "--ncp-timeout=30", "--ncp-report=out", max_turns=1)
    assert result.parseoutcomes()["passed"] >= 1  # the episode passed (achievements need more turns)
    # The chat calls (the run's preflight GETs the model list first).
    requests = [r for r in project.server.requests if r.path.endswith("/completions")]
    assert {r.body.get("max_tokens") for r in requests} == {300}
    assert all(m["role"] != "system" for r in requests for m in r.body["messages"])
    assert project.server.max_in_flight == 1
    formats = [(r.body.get("response_format") or {}).get("type") for r in requests]
    assert formats[0] == "json_schema" and set(formats[1:]) == {"json_object"}
    data = json.loads((project.pytester.path / "out" / "results.json").read_text())
    assert data["config"]["structured_output_used"] == {"openai/gpt-4o-mini": "json_object"}
    assert data["config"]["max_tokens"]["auditor"] == 300 and data["config"]["max_tokens"]["player"] == 150


@pytest.mark.parametrize("flag,message", [
    ("--ncp-max-tokens=judge=5", "*expected ROLE=N with ROLE one of narrator, player, auditor, author*"),
    ("--ncp-max-tokens=auditor=0", "*N must be a whole number >= 1*"),
    ("--ncp-structured-output=xml", "*valid: auto, json_schema, json_object, prompt*"),
    ("--ncp-system-prompt=drop", "*valid: keep, merge*"),
    ("--ncp-timeout=soon", "*expected a number of seconds > 0*"),
    ("--ncp-concurrency-per-endpoint=0", "*expected a whole number >= 1*"),
])
def test_bad_model_call_options_are_usage_errors(project, flag, message):
    result = project.run(flag)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_ini_sets_max_tokens_and_the_command_line_wins(project):
    project.pytester.makeini("""
        [pytest]
        pythonpath = .
        ncp_max_tokens = auditor=111 narrator=22
        ncp_structured_output = json_object
    """)
    project.run(max_turns=1)
    calls = [r for r in project.server.requests if r.path.endswith("/completions")]  # not the preflight's GET
    assert {r.body.get("max_tokens") for r in calls} == {111}
    assert {r.body["response_format"]["type"] for r in calls} == {"json_object"}
    project.server.reset()
    project.run("--ncp-max-tokens=auditor=222", max_turns=1)
    assert {r.body.get("max_tokens") for r in project.server.requests if r.path.endswith("/completions")} == {222}


def test_no_cacheprovider_leaves_no_pytest_cache(project):
    result = project.run_subprocess("-p", "no:cacheprovider", max_turns=1)
    assert result.parseoutcomes()["passed"] >= 1
    assert not (project.pytester.path / ".pytest_cache").exists()


def test_with_the_cache_traces_go_to_pytest_cache(project):
    result = project.run_subprocess(max_turns=1)
    assert result.parseoutcomes()["passed"] >= 1
    assert list((project.pytester.path / ".pytest_cache" / "ncp" / "traces").glob("*.jsonl"))
