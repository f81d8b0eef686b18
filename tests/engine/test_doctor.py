"""`ncp doctor`: one line per check against servers that behave like self-hosted ones."""

from __future__ import annotations

import pytest

from pytest_ncp.cli import main
from pytest_ncp.testing import ScriptedModelServer

GOOD = {"confirmed": True, "explanation": "The story says the lamp is lit."}


def doctor(capsys, *args):
    code = main(["doctor", *args])
    out = capsys.readouterr().out
    return code, {line.split()[1] if line.split()[0] in ("ok", "FIX", "FAIL", "info") else line.split()[0]: line
                  for line in out.splitlines()[1:]}, out


def test_a_llama_cpp_like_server_gets_json_object_and_merge(capsys):
    with ScriptedModelServer(reject_formats=("json_schema",), drop_system=True) as server:
        server.add(step="conflict_confirmation", reply=GOOD)
        code, lines, out = doctor(capsys, "--model", "openai/test-model", "--api-base", server.base_url)
    assert code == 0
    assert lines["endpoint"].startswith("ok") and lines["model"].startswith("ok")
    assert lines["structured"].startswith("ok") and "json_object gives valid answers, auto picks it" in lines["structured"]
    assert "json_schema rejected (HTTP 500" in lines["structured"]
    assert lines["system"].startswith("FIX") and "--system-prompt=merge" in lines["system"]
    assert lines["max_tokens"].startswith("ok")
    assert "tokens/s" in lines["speed"]
    assert out.rstrip().endswith("suggested: --system-prompt=merge")


def test_a_server_that_ignores_max_tokens_is_reported(capsys):
    with ScriptedModelServer(honour_max_tokens=False) as server:
        server.add(step="conflict_confirmation", reply=GOOD)
        server.add(role="narrator", reply=" ".join(["one"] * 40))
        code, lines, _ = doctor(capsys, "--model", "openai/test-model", "--api-base", server.base_url)
    assert code == 0
    assert lines["max_tokens"].startswith("FIX") and "ignored (40 tokens" in lines["max_tokens"]
    assert lines["system"].startswith("ok")
    assert "json_schema gives valid answers" in lines["structured"]


def test_a_model_without_valid_structured_answers_cannot_be_an_auditor(capsys):
    with ScriptedModelServer(reject_formats=("json_schema",)) as server:
        server.add(step="conflict_confirmation", reply="The lamp is lit, yes.")
        code, lines, out = doctor(capsys, "--model", "openai/test-model", "--api-base", server.base_url)
    assert code == 1
    assert lines["structured"].startswith("FAIL")
    assert "json_object accepted but the answer is invalid" in lines["structured"]
    assert "cannot serve as an auditor" in out


def test_an_unreachable_endpoint_fails_at_once_naming_it(capsys):
    code, lines, out = doctor(capsys, "--model", "gemma", "--api-base", "http://127.0.0.1:9/v1")
    assert code == 1
    assert lines["endpoint"].startswith("FAIL") and "127.0.0.1:9" in lines["endpoint"]
    assert "structured" not in lines


def test_an_unlisted_model_is_a_hint_not_a_failure(capsys):
    with ScriptedModelServer() as server:
        server.add(step="conflict_confirmation", reply=GOOD)
        code, lines, _ = doctor(capsys, "--model", "openai/elsewhere", "--api-base", server.base_url)
    assert code == 0 and lines["model"].startswith("FIX") and "test-model" in lines["model"]


def test_a_slow_model_gets_a_timeout_suggestion(capsys):
    with ScriptedModelServer() as server:
        server.add(step="conflict_confirmation", reply=GOOD)
        server.add(role="narrator", contains="lighthouse at night", reply=" ".join(["wave"] * 32), delay=0.5)
        code, lines, out = doctor(capsys, "--model", "openai/test-model", "--api-base", server.base_url,
                                  "--timeout", "5")
    assert code == 0 and lines["speed"].startswith("FIX") and "--timeout=" in lines["speed"]


def test_bad_options_are_usage_errors(capsys):
    assert main(["doctor", "--model", "openai/m", "--api-base", "http://127.0.0.1:9/v1",
                 "--max-tokens", "judge=5"]) == 2
    assert "ROLE one of narrator, player, auditor, author" in capsys.readouterr().err
    assert main(["doctor", "--model", "openai/m", "--timeout", "0"]) == 2
    assert "--timeout='0': expected a number of seconds > 0" in capsys.readouterr().err
