"""`ncp run` checks each endpoint it will call once before any episode: a broken one stops it with one message."""

from __future__ import annotations

import socket

from pytest_ncp.cli import main
from pytest_ncp.core.exit_codes import EXIT_ERROR_BUDGET
from tests.conftest import caligari_twins


def test_ncp_run_stops_on_an_unreachable_endpoint_before_any_episode(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "run"
    code = main(["run", "--narrator", "pytest_ncp.narrators:LLMNarrator", "--narrator-model", "openai/gm",
                 "--api-base", f"http://127.0.0.1:{port}/v1", "--specs", *caligari_twins(tmp_path, 3),
                 "--max-turns", "3", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == EXIT_ERROR_BUDGET
    assert captured.err.count("cannot reach") == 2  # the auditor's and the narrator's model, one line each
    assert "auditor openai/gpt-4o-mini" in captured.err and "narrator openai/gm" in captured.err
    assert not (out / "results.json").exists()  # nothing ran


def test_the_probe_is_the_doctors(ncp_model_server):
    from pytest_ncp.llm.preflight import preflight

    assert preflight([("auditor", "openai/x"), ("narrator", "openai/y")], ncp_model_server.base_url) == []
    assert len([r for r in ncp_model_server.requests if r.path.endswith("/models")]) == 1  # one endpoint, one probe
