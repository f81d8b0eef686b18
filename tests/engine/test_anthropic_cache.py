"""Anthropic prompt caching: the audit prompts reach an Anthropic model with ``cache_control`` breakpoints at the
boundaries of their layout, and the cache writes and reads the provider reports are priced and recorded.

Against the scripted server's Anthropic Messages API (litellm's anthropic route, ``api_base`` pointed at it)."""

from __future__ import annotations

import asyncio
import json

import pytest

from pytest_ncp.core.config import RunConfig
from pytest_ncp.core.ledger import FactLedger
from pytest_ncp.core.spec import load_spec
from pytest_ncp.engine.auditor import LLMAuditor, TurnContext
from pytest_ncp.engine.runner import Runner
from pytest_ncp.llm import ModelClient
from pytest_ncp.llm.prices import price_of
from pytest_ncp.llm.request import MAX_BREAKPOINTS, with_cache_breakpoints
from pytest_ncp.testing import ScriptedModelServer
from tests.conftest import SPECS, ListNarrator

CLAUDE = "anthropic/claude-haiku-4-5"  # in litellm's cost map, with cache read and write prices
USAGE = {"input_tokens": 300, "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 2000,
         "output_tokens": 40}


@pytest.fixture(scope="module")
def ctx() -> TurnContext:
    spec = load_spec(SPECS / "caligari.yaml")
    ledger = FactLedger.from_initial((f.id, f.text) for f in spec.initial_facts)
    return TurnContext(spec=spec, turn=3, player_input="I open the cabinet.", response="You open the cabinet slowly, "
                       "and the sleeper inside stirs.", facts=ledger.active(), node_index=1,
                       commitment_states={c.id: "PENDING" for c in spec.all_commitments},
                       previous_response="The fair is loud.")


def blocks(content: object) -> list[tuple[bool, str]]:
    assert isinstance(content, list), content
    return [("cache_control" in b, b["text"]) for b in content]


def test_every_audit_step_marks_the_ends_of_its_run_episode_and_slow_parts(ctx):
    with ScriptedModelServer() as server:
        client = ModelClient(api_base=server.root_url, api_key="sk-test")
        asyncio.run(LLMAuditor(client, CLAUDE).audit(ctx))
        requests = {r.step: r for r in server.requests}
    assert set(requests) == {"conflict_check", "fact_update", "trajectory_update", "commitment_check"}
    starts = {"conflict_check": "ACTIVE FACT LEDGER", "fact_update": "ACTIVE FACT LEDGER",
              "trajectory_update": "PLOT POSITION:", "commitment_check": "PENDING COMMITMENTS:"}
    for step, request in requests.items():
        assert request.path == "/v1/messages"
        system = blocks(request.body["system"])
        assert system == [(True, system[0][1])] and system[0][1].startswith("You audit ONE narrator response")
        (user,) = request.body["messages"]
        parts = blocks(user["content"])
        # fixed for the episode | slowly changing | the turn (not cached: it is new every time)
        assert [marked for marked, _ in parts] == [True, True, False], step
        assert parts[0][1].startswith("STORY: The Cabinet of Dr. Caligari.")
        assert parts[1][1].startswith(starts[step]) and parts[2][1].startswith("TURN 3."), step
        assert sum(marked for marked, _ in system + parts) <= MAX_BREAKPOINTS


def test_openai_models_get_the_prompt_as_it_is_and_merged_system_prompts_no_breakpoints(ctx):
    with ScriptedModelServer() as server:
        asyncio.run(LLMAuditor(ModelClient(api_base=server.base_url), "openai/auditor").audit(ctx))
        asyncio.run(LLMAuditor(ModelClient(api_base=server.root_url, api_key="sk-test", system_prompt="merge"),
                               CLAUDE).audit(ctx))
        requests = server.requests
    for r in requests:
        assert "cache_control" not in json.dumps(r.body), (r.path, r.step)
    assert {r.path for r in requests} == {"/v1/chat/completions", "/v1/messages"}


def test_breakpoints_split_a_message_without_changing_its_text_and_keep_the_last_four():
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "abcdefghij"}]
    out = with_cache_breakpoints(messages, [(0, None), (1, 3), (1, 7), (1, 0), (5, 1)])
    assert out[0]["content"] == [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}]
    assert blocks(out[1]["content"]) == [(True, "abc"), (True, "defg"), (False, "hij")]
    assert messages[1]["content"] == "abcdefghij"  # the caller's messages are left alone
    many = with_cache_breakpoints([{"role": "user", "content": "abcdefgh"}], [(0, i) for i in range(1, 7)])
    assert [m for m, _ in blocks(many[0]["content"])] == [True] * 4 + [False]
    assert "".join(t for _, t in blocks(many[0]["content"])) == "abcdefgh"
    assert blocks(many[0]["content"])[0] == (True, "abc")  # the last four: each covers those before it


def test_cache_writes_and_reads_are_priced_at_their_own_rates_and_recorded(ctx, tmp_path, monkeypatch):
    price = price_of(CLAUDE)
    assert price is not None and price.cache_write == pytest.approx(1.25 * price.input)
    assert price.cached_input == pytest.approx(0.1 * price.input)
    expected = (300 * price.input + 1000 * price.cache_write + 2000 * price.cached_input + 40 * price.output)
    with ScriptedModelServer() as server:
        server.add(role="auditor", usage=USAGE)
        audit = asyncio.run(LLMAuditor(ModelClient(api_base=server.root_url, api_key="sk-test"), CLAUDE).audit(ctx))
        for call in audit.calls:
            assert (call.prompt_tokens, call.cached_tokens, call.cache_write_tokens) == (3300, 2000, 1000)
            assert call.cost_usd == pytest.approx(expected)
        assert price.cost(3300, 40, 2000, 1000) == pytest.approx(expected)
        # The cap's bound of a call that may write all of its prompt: every prompt token at the write rate.
        assert price.bound(3300, 40) == pytest.approx(3300 * price.cache_write + 40 * price.output)

        # An episode records them per call in its trace and in total in results.json.
        server.reset()
        server.add(role="auditor", usage=USAGE)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        config = RunConfig(narrator="unused:X", auditor_model=CLAUDE, api_base=server.root_url, max_turns=2)
        asyncio.run(Runner(config, out_dir=tmp_path / "run", narrator_factory=lambda: ListNarrator(
            ["The fair is loud.", "The lamps gutter."])).run([load_spec(SPECS / "caligari.yaml")]))
    data = json.loads((tmp_path / "run" / "results.json").read_text())
    (episode,) = data["episodes"]
    calls = [c for line in (tmp_path / "run" / episode["trace"]).read_text().splitlines()
             for c in json.loads(line).get("auditor_calls", [])]
    assert calls and all(c["cache_write_tokens"] == 1000 and c["cached_tokens"] == 2000 for c in calls)
    assert episode["cache_write_tokens"] == 1000 * len(calls) and episode["cached_tokens"] == 2000 * len(calls)
    assert data["metrics"]["cache_write_tokens"] == episode["cache_write_tokens"]
