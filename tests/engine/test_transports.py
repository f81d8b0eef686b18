"""The two model-call paths (lean aiohttp for ``openai/...`` models, litellm for the rest) behave the same.

Every test here runs once per path against the real scripted HTTP server: retries, Retry-After, the
AIMD limiter, secret scrubbing, the X-NCP-Role header, missing keys, cost, cassettes and results.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import yaml

from pytest_ncp.core.config import RunConfig
from pytest_ncp.llm import ModelClient, ModelError
from pytest_ncp.engine.players import ScriptedPlayer
from pytest_ncp.engine.runner import Runner
from tests.conftest import FIXTURES, ListNarrator

SECRET = "sk-live-0123456789abcdefTRANSPORT"
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(params=["lean", "litellm"])
def path(request):
    return request.param


def client_for(path, server=None, **kw):
    return ModelClient(api_base=server.base_url if server else None, lean=path == "lean", backoff=0.0, **kw)


def call(client, role="narrator", model="openai/n", **kw):
    return asyncio.run(client.complete(role, model, HI, **kw))


def test_the_path_taken_is_the_one_asked_for(path, ncp_model_server):
    call(client_for(path, ncp_model_server))
    agent = ncp_model_server.requests[0].headers.get("user-agent", "")
    print(agent)
    assert ("aiohttp" in agent) == (path == "lean"), agent


def test_role_header_model_name_and_request_shape(path, ncp_model_server):
    client = client_for(path, ncp_model_server)
    fmt = {"type": "json_schema", "json_schema": {"name": "fact_update", "schema": {"type": "object"}}}
    completion = call(client, "auditor", "openai/auditor-model", step="fact_update", response_format=fmt,
                      temperature=0.0)
    request = ncp_model_server.requests[0]
    assert request.headers["x-ncp-role"] == "auditor" and request.step == "fact_update"
    assert request.model == "auditor-model"  # the provider prefix is not sent
    assert request.body["temperature"] == 0.0 and request.body["response_format"] == fmt
    assert request.body["messages"] == HI
    assert json.loads(completion.text) == {"added": [], "negated": []}
    assert completion.prompt_tokens == 1 and completion.completion_tokens > 0 and completion.step == "fact_update"


def test_server_errors_are_retried(path, ncp_model_server):
    ncp_model_server.add(status=500, times=1)
    completion = call(client_for(path, ncp_model_server))
    assert completion.attempts == 2 and [r.status for r in ncp_model_server.requests] == [500, 200]


def test_retry_after_is_honoured_and_429_halves_the_limit(path, ncp_model_server):
    ncp_model_server.add(status=429, headers={"Retry-After": "0.3"}, times=1)
    client = client_for(path, ncp_model_server, concurrency=4)

    async def go():
        started = time.monotonic()
        completion = await client.complete("narrator", "openai/n", HI)
        return time.monotonic() - started, completion, client.limiter("openai/n").limit

    waited, completion, limit = asyncio.run(go())
    assert waited >= 0.3 and completion.attempts == 2
    assert limit == 10  # 20 call slots halved once


def test_retries_are_bounded(path, ncp_model_server):
    ncp_model_server.add(status=503)
    with pytest.raises(ModelError) as info:
        call(client_for(path, ncp_model_server, max_retries=2))
    assert info.value.attempts == 3 and info.value.status == 503 and len(ncp_model_server.requests) == 3


def test_client_errors_are_not_retried(path, ncp_model_server):
    ncp_model_server.add(status=400, reply="bad request body")
    with pytest.raises(ModelError) as info:
        call(client_for(path, ncp_model_server))
    assert info.value.status == 400 and len(ncp_model_server.requests) == 1
    assert "bad request body" in str(info.value)


def test_a_key_echoed_by_the_server_is_scrubbed(path, ncp_model_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    ncp_model_server.add(status=401, reply=f"Incorrect API key provided: {SECRET}")
    with pytest.raises(ModelError) as info:
        call(client_for(path, ncp_model_server))
    assert ncp_model_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in str(info.value) and SECRET[10:] not in str(info.value)
    assert "Incorrect API key" in str(info.value)


def test_a_missing_key_fails_at_once(path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    with pytest.raises(ModelError) as info:
        call(client_for(path), model="openai/gpt-4o-mini")
    assert info.value.attempts == 1 and "OPENAI_API_KEY" in str(info.value)


def test_a_server_that_is_down_is_retried_then_an_error(path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = ModelClient(api_base=f"http://127.0.0.1:{port}/v1", lean=path == "lean", backoff=0.0, max_retries=1)
    with pytest.raises(ModelError) as info:
        call(client)
    assert info.value.attempts == 2


def test_cost_comes_from_litellms_cost_map(path, ncp_model_server):
    """A priced model costs the same on both paths: litellm's own figure for the same tokens."""
    from pytest_ncp.llm import import_litellm

    completion = call(client_for(path, ncp_model_server), model="openai/gpt-4o-mini")
    expected = sum(import_litellm().cost_per_token(
        model="openai/gpt-4o-mini", prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens))
    assert completion.cost_usd > 0 and completion.cost_usd == pytest.approx(expected, rel=1e-9)


def _run(server, out, path, **config):
    from pytest_ncp.core.spec import load_spec

    settings = dict(narrator="unused:X", auditor_model="openai/auditor", api_base=server.base_url, max_turns=3,
                    record_mode="all", cassettes=str(out / "cassettes"))
    settings.update(config)
    runner = Runner(RunConfig(**settings), out_dir=out / "run", client=client_for(path, server),
                    narrator_factory=lambda: ListNarrator(["The fair is loud.", "Cesare sleeps.", "Rain."]),
                    player_factory=lambda spec: ScriptedPlayer(["I wait and watch."] * 10))
    asyncio.run(runner.run([load_spec(FIXTURES / "caligari.yaml")]))
    return out


def test_both_paths_record_identical_cassettes_and_results(ncp_model_server, tmp_path):
    def run(path):
        ncp_model_server.reset()
        ncp_model_server.add(step="fact_update", contains="Cesare sleeps.", times=1, reply={
            "added": [{"text": "Cesare is asleep.", "quote": "Cesare sleeps."}], "negated": []})
        return _run(ncp_model_server, tmp_path / path, path)

    lean, slow = run("lean"), run("litellm")
    # Audit calls run concurrently, so entries are in arrival order: compare them as a set of recordings.
    recorded = [sorted(json.dumps(e, sort_keys=True) for e in yaml.safe_load(
        (d / "cassettes" / "caligari--r0.yaml").read_text())["interactions"]) for d in (lean, slow)]
    assert recorded[0] == recorded[1] and len(recorded[0]) >= 12
    a, b = (json.loads((d / "run" / "results.json").read_text()) for d in (lean, slow))
    assert a["config"].pop("cassettes") != b["config"].pop("cassettes")  # the only difference: where
    assert a == b
    assert a["episodes"][0]["tokens"] > 0 and a["episodes"][0]["termination"] == "turn_limit"


CACHED_USAGE = {"prompt_tokens": 2000, "completion_tokens": 40, "prompt_tokens_details": {"cached_tokens": 1536}}


def test_cached_tokens_are_recorded_and_priced_at_the_cached_rate(path, ncp_model_server):
    """A provider's prompt cache served 1,536 of 2,000 prompt tokens: recorded per call, and those tokens cost
    the cost map's cache_read_input_token_cost (half the input price for gpt-4o-mini), on both paths."""
    from pytest_ncp.llm.prices import price_of

    ncp_model_server.add(usage=CACHED_USAGE)
    completion = call(client_for(path, ncp_model_server), model="openai/gpt-4o-mini")
    assert (completion.prompt_tokens, completion.cached_tokens, completion.completion_tokens) == (2000, 1536, 40)
    price = price_of("openai/gpt-4o-mini")
    assert price is not None and price.cached_input == pytest.approx(price.input / 2)
    expected = 464 * price.input + 1536 * price.cached_input + 40 * price.output
    assert completion.cost_usd == pytest.approx(expected, rel=1e-9)
    assert completion.cost_usd < price.cost(2000, 40)  # cheaper than without the cache


def test_cached_tokens_reach_the_episode_the_trace_and_results(ncp_model_server, tmp_path):
    ncp_model_server.add(role="auditor", usage=CACHED_USAGE)
    out = _run(ncp_model_server, tmp_path, "lean", auditor_model="openai/gpt-4o-mini", record_mode=None,
               cassettes=None)
    results = json.loads((out / "run" / "results.json").read_text())
    episode, metrics = results["episodes"][0], results["metrics"]
    audit_calls = [c for line in (out / "run" / "traces" / "caligari--r0.jsonl").read_text().splitlines()
                   if (record := json.loads(line))["event"] == "turn" for c in record["auditor_calls"]]
    assert audit_calls and all(c["cached_tokens"] == 1536 for c in audit_calls)
    assert episode["cached_tokens"] == 1536 * len(audit_calls)
    assert episode["prompt_tokens"] == 2000 * len(audit_calls)  # the list narrator makes no model call
    assert metrics["cached_share"] == pytest.approx(1536 / 2000)
    assert episode["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in audit_calls))


def test_cached_tokens_survive_a_cassette(ncp_model_server, tmp_path):
    ncp_model_server.add(role="auditor", usage=CACHED_USAGE)
    recorded = json.loads((_run(ncp_model_server, tmp_path / "a", "lean") / "run" / "results.json").read_text())
    ncp_model_server.reset()
    ncp_model_server.add(status=500)  # replay only: a call that reached the server would fail
    replayed = json.loads((_run(ncp_model_server, tmp_path / "a", "lean", record_mode="none")
                           / "run" / "results.json").read_text())
    assert recorded["episodes"][0]["cached_tokens"] > 0
    assert replayed["episodes"][0]["cached_tokens"] == recorded["episodes"][0]["cached_tokens"]
    assert replayed["metrics"]["cached_share"] == recorded["metrics"]["cached_share"]
    assert not ncp_model_server.requests
