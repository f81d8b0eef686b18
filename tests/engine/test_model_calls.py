"""Model calls: retries honour Retry-After, secrets never reach traces, narrator errors stay errors."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from pytest_ncp.engine.episode import Termination
from pytest_ncp.llm import ModelClient, ModelError
from tests.conftest import ListNarrator

SECRET = "sk-live-0123456789abcdefSECRET"


def test_500_then_200_is_retried_and_succeeds(play, caligari, ncp_model_server):
    ncp_model_server.add(step="conflict_check", status=500, times=1)
    result = play(caligari, ["The fair is loud."], max_turns=1)
    assert result.termination is Termination.TURN_LIMIT
    statuses = [r.status for r in ncp_model_server.requests if r.step == "conflict_check"]
    assert statuses == [500, 200]
    calls = result.audits[0].calls
    assert any(c.step == "conflict_check" and c.attempts == 2 for c in calls)


def test_429_waits_for_retry_after(ncp_model_server):
    ncp_model_server.add(status=429, headers={"Retry-After": "0.3"}, times=1)
    client = ModelClient(api_base=ncp_model_server.base_url, backoff=0.0)
    started = time.monotonic()
    completion = asyncio.run(client.complete("narrator", "openai/n", [{"role": "user", "content": "hi"}]))
    assert time.monotonic() - started >= 0.3
    assert completion.attempts == 2 and completion.text


def test_retries_are_bounded_and_raise_a_model_error(ncp_model_server):
    ncp_model_server.add(status=503)
    client = ModelClient(api_base=ncp_model_server.base_url, backoff=0.0, max_retries=2)
    with pytest.raises(ModelError) as info:
        asyncio.run(client.complete("auditor", "openai/a", [{"role": "user", "content": "hi"}]))
    assert info.value.attempts == 3 and info.value.status == 503
    assert len(ncp_model_server.requests) == 3


def test_client_errors_are_not_retried(ncp_model_server):
    ncp_model_server.add(status=400)
    client = ModelClient(api_base=ncp_model_server.base_url, backoff=0.0)
    with pytest.raises(ModelError):
        asyncio.run(client.complete("auditor", "openai/a", [{"role": "user", "content": "hi"}]))
    assert len(ncp_model_server.requests) == 1


def test_api_key_never_reaches_the_trace(play, caligari, ncp_model_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    # The server echoes the key in its error, as real providers do for a bad key.
    ncp_model_server.add(step="fact_update", status=401, reply=f"Incorrect API key provided: {SECRET}")
    result = play(caligari, ["The fair is loud."])
    assert ncp_model_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"  # it was sent
    assert result.termination is Termination.ERROR
    trace = open(result.trace, encoding="utf-8").read()
    assert SECRET not in trace and SECRET[10:] not in trace
    assert SECRET not in result.record.model_dump_json()
    assert "Incorrect API key" in result.error.message


class Exploding(ListNarrator):
    def respond(self, player_input, context):
        if context.spec.id == "caligari" and context.turn == 2:
            raise RuntimeError("narrator backend fell over")
        return "The fair is loud."


def test_narrator_exception_is_an_error_with_traceback_and_other_episodes_go_on(ncp_model_server, tmp_path):
    from pytest_ncp.engine.runner import RunConfig, Runner
    from pytest_ncp.core.spec import parse_spec
    from tests.conftest import FIXTURES

    caligari = (FIXTURES / "caligari.yaml").read_text()
    other = parse_spec(caligari.replace("id: caligari\n", "id: caligari-twin\n", 1), "twin.yaml")
    first = parse_spec(caligari, "caligari.yaml")
    config = RunConfig(narrator="unused:X", auditor_model="openai/a", api_base=ncp_model_server.base_url,
                       max_turns=3)
    runner = Runner(config, out_dir=tmp_path, narrator_factory=lambda: Exploding([]))
    results = asyncio.run(runner.run([first, other]))
    by_id = {r.spec.id: r for r in results}
    broken = by_id["caligari"]
    assert broken.termination is Termination.ERROR and broken.error.kind == "narrator"
    assert broken.turns == 1
    assert "narrator backend fell over" in broken.error.traceback and "Traceback" in broken.error.traceback
    assert by_id["caligari-twin"].termination is Termination.TURN_LIMIT
    records = [json.loads(x) for x in open(broken.trace, encoding="utf-8")]
    assert [r["event"] for r in records] == ["start", "turn", "error", "end"]
    assert "narrator backend fell over" in records[2]["traceback"]
    results_json = json.loads((tmp_path / "results.json").read_text())
    assert results_json["metrics"]["errors"] == 1 and results_json["metrics"]["episodes"] == 2


def test_tokens_are_counted_per_episode(play, caligari):
    result = play(caligari, ["The fair is loud."], max_turns=2)
    assert result.usage.calls == 8  # four audit steps per turn, no narrator model calls
    assert result.usage.tokens > 0
    assert result.record.tokens == result.usage.tokens


def test_a_missing_api_key_fails_at_once_and_says_which_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = ModelClient(backoff=0.0)  # no api_base: the OpenAI client checks its key before any request
    with pytest.raises(ModelError) as info:
        asyncio.run(client.complete("narrator", "openai/gpt-4o-mini", [{"role": "user", "content": "hi"}]))
    assert info.value.attempts == 1
    assert "OPENAI_API_KEY" in str(info.value)
