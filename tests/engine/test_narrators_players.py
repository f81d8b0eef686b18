"""Narrator loading, the built-in LLM and memory narrators, and player isolation."""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest

from pytest_ncp.llm import ModelClient
from pytest_ncp.engine.narrators import LLMNarrator, MemoryNarrator, NarratorContext, NarratorLoadError, load_narrator
from pytest_ncp.engine.players import PlayerView, ReplayPlayer, ScriptedPlayer, SimulatedPlayer, make_player


@pytest.fixture
def agent_module(tmp_path, monkeypatch):
    (tmp_path / "my_agent.py").write_text(textwrap.dedent("""
        class Narrator:
            def respond(self, player_input, context):
                return "ok"

        def make():
            return Narrator()

        def broken():
            return 42

        shared = Narrator()
        NOT_A_NARRATOR = 3
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_agent"
    sys.modules.pop("my_agent", None)


def test_load_class_factory_and_instance(agent_module):
    cls = load_narrator("my_agent:Narrator")
    assert cls() is not cls()  # a fresh instance per episode
    assert load_narrator("my_agent:make")().respond("x", None) == "ok"
    shared = load_narrator("my_agent:shared")
    assert shared() is shared()


@pytest.mark.parametrize("path,message", [
    ("my_agent", "must look like 'module:Attr'"),
    ("no_such_module_xyz:Narrator", "cannot import narrator module 'no_such_module_xyz'"),
    ("my_agent:Missing", "has no attribute 'Missing' (it has: NOT_A_NARRATOR, Narrator, broken"),
    ("my_agent:NOT_A_NARRATOR", "is a int: expected a narrator class"),
])
def test_bad_narrator_paths_say_what_is_expected(agent_module, path, message):
    with pytest.raises(NarratorLoadError, match=None) as info:
        load_narrator(path)
    assert message in str(info.value)


def test_factory_returning_garbage_is_reported(agent_module):
    with pytest.raises(NarratorLoadError, match="returned int"):
        load_narrator("my_agent:broken")()


def context(spec, client, turn, history=()):
    return NarratorContext(spec=spec, turn=turn, history=tuple(history), llm=client, model="openai/narrator")


def test_llm_narrator_prompts_with_the_spec_and_history(caligari, ncp_model_server):
    client = ModelClient(api_base=ncp_model_server.base_url)
    ncp_model_server.add(role="narrator", reply="The fair glitters.")
    narrator = LLMNarrator()
    narrator.reset(caligari)
    out = asyncio.run(narrator.respond("I enter the fair.", context(caligari, client, 2, [("I wake.", "Dawn.")])))
    assert out == "The fair glitters."
    request = ncp_model_server.requests[-1]
    assert request.role == "narrator" and request.body.get("response_format") is None
    messages = request.body["messages"]
    assert messages[0]["role"] == "system" and "Cesare" in messages[0]["content"]  # synopsis
    assert "[fair-visit]" not in messages[0]["content"] and "Francis" in messages[0]["content"]
    assert [m["role"] for m in messages[1:]] == ["user", "assistant", "user"]
    assert "I enter the fair." in messages[-1]["content"]


def test_memory_narrator_keeps_its_prompt_bounded(caligari, ncp_model_server):
    client = ModelClient(api_base=ncp_model_server.base_url)
    narrator = MemoryNarrator()
    narrator.reset(caligari)
    sizes = []
    history = []
    for turn in range(1, 41):
        reply = asyncio.run(narrator.respond(f"I do thing {turn}.", context(caligari, client, turn, history)))
        history.append((f"I do thing {turn}.", reply))
        sizes.append(len(ncp_model_server.requests[-1].body["messages"]))
    summaries = [r for r in ncp_model_server.requests if "long-term memory" in r.text]
    assert summaries, "older turns are folded by a model call"
    assert max(sizes[20:]) <= 2 * (MemoryNarrator.recent_turns + MemoryNarrator.chunk) + 2
    assert len(narrator.memory(None)) <= MemoryNarrator.max_summaries + 1


def test_simulated_player_sees_only_briefing_and_narration(caligari, ncp_model_server):
    client = ModelClient(api_base=ncp_model_server.base_url)
    ncp_model_server.add(role="player", reply="I follow the crowd.")
    player = SimulatedPlayer("adversarial", "openai/player", client)
    view = PlayerView(player=caligari.player, turn=2, history=(("I wake.", "The fair is open."),))
    assert asyncio.run(player.next_input(view)) == "I follow the crowd."
    text = ncp_model_server.requests[-1].text
    assert "Holstenwall" in text and "The fair is open." in text
    for secret in ("asylum", "somnambulist", "strait-jacket", "dummy"):
        assert secret not in text.lower()


def test_make_player_validates_kind_and_model(caligari):
    assert isinstance(make_player("scripted", caligari), ScriptedPlayer)
    with pytest.raises(ValueError, match="expected one of scripted, adversarial, natural"):
        make_player("chaotic", caligari)
    with pytest.raises(ValueError, match="needs a model"):
        make_player("natural", caligari)


def test_replay_player_reads_inputs_from_a_trace(play, caligari):
    result = play(caligari, ["Morning."], inputs=["I wake.", "I walk."], max_turns=5)
    replay = ReplayPlayer.from_trace(result.trace)
    assert replay.inputs == ["I wake.", "I walk."]
