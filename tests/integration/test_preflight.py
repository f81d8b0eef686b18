"""A broken endpoint stops the run before any episode, with one message and the model error's exit code (6)."""

from __future__ import annotations

import socket

import pytest

from pytest_ncp.core.exit_codes import EXIT_ERROR_BUDGET


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_endpoint_stops_the_session_with_one_message(project):
    for name in ("b-spec", "c-spec", "d-spec"):
        project.twin(name)
    base = f"http://127.0.0.1:{closed_port()}/v1"
    result = project.pytester.runpytest(*project.args("-q", "--ncp-min-survival=0.5@4")[:1], f"--ncp-api-base={base}",
                                        "--ncp-max-turns=4", "-p", "no:randomly")
    assert result.ret == EXIT_ERROR_BUDGET, result.stdout.str()
    text = result.stdout.str() + result.stderr.str()
    assert text.count("cannot reach") == 1, text
    assert "auditor openai/gpt-4o-mini at 127.0.0.1:" in text and "ncp doctor" in text
    assert "passed" not in text and "failed" not in text  # no test ran


def test_a_replayed_run_probes_nothing(project, tmp_path):
    # Replay only (--ncp-record-mode=none): no call reaches an endpoint, so none is probed; the empty cassettes
    # then fail the episodes as missing recordings, not the preflight.
    base = f"http://127.0.0.1:{closed_port()}/v1"
    result = project.pytester.runpytest("--ncp-narrator=agent:Narrator", f"--ncp-api-base={base}", "--ncp-max-turns=2",
                                        "--ncp-record-mode=none", f"--ncp-cassettes={tmp_path / 'none'}", "-q")
    assert "cannot reach" not in result.stdout.str() + result.stderr.str()


def test_the_same_error_in_every_episode_is_shown_in_full_once(project):
    for name in ("b-spec", "c-spec"):
        project.twin(name)
    project.server.add(step="conflict_check", status=400, body='{"error": {"message": "model is not loaded"}}')
    result = project.run("-q")
    text = result.stdout.str()
    assert result.ret == EXIT_ERROR_BUDGET, text
    assert text.count("shown there in full") >= 2, text
    result.stdout.fnmatch_lines(["ncp: 3 episodes ended in the same model error: *"])
