"""Who owns an outcome is decided by where it came from, never by an exception's class or a string's type."""

from __future__ import annotations

import asyncio
import textwrap

import pytest

from pytest_ncp.cli import main
from pytest_ncp.engine.auditor import AuditorError, LLMAuditor
from pytest_ncp.engine.episode import Episode, Termination
from pytest_ncp.engine.players import ScriptedPlayer, SimulatedPlayer
from pytest_ncp.llm import CostCapReached, ModelClient, ModelError
from pytest_ncp.testing.prompts import data_in
from tests.conftest import SPECS, ListNarrator

ALIVE = "Alan laughs at the door, alive and well."
CONFLICT = {"conflicts": [{"type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": "Alan laughs at the door",
                           "explanation": "Alan was stated dead."}]}


def play(server, spec, narrator, *, client=None, player=None, max_turns=3, **kw):
    client = client or ModelClient(api_base=server.base_url, backoff=0.01, max_backoff=0.05)
    episode = Episode(spec=spec, narrator=narrator, player=player or ScriptedPlayer([f"I act, turn {i}."
                                                                                       for i in range(1, 50)]),
                      auditor=LLMAuditor(client, "openai/auditor"), max_turns=max_turns, client=client, **kw)
    return asyncio.run(episode.run())


class Raising:
    def __init__(self, exc):
        self.exc = exc

    def respond(self, player_input, context):
        if context.turn == 2:
            raise self.exc
        return "The fair is loud."


def _wrapped(inner):
    try:
        raise inner
    except Exception as exc:
        try:
            raise RuntimeError("backend fell over") from exc
        except RuntimeError as outer:
            return outer


@pytest.mark.parametrize("exc", [
    CostCapReached("the cost cap is reached"),
    ModelError("the endpoint is down", role="narrator", status=503),
    AuditorError("conflict_check", ["no valid answer"]),
    _wrapped(ModelError("the endpoint is down", status=503)),
    _wrapped(CostCapReached("the cost cap is reached")),
], ids=["own-cost-cap", "own-model-error", "own-auditor-error", "wrapped-model-error", "wrapped-cost-cap"])
def test_an_exception_the_narrator_raised_is_the_narrators_whatever_its_class(ncp_model_server, caligari, exc):
    result = play(ncp_model_server, caligari, Raising(exc))
    assert result.termination is Termination.ERROR and result.error.kind == "narrator", result.termination
    assert result.turns == 1


class BuiltIn:
    """Narrates through the run's own client (context.llm), as the built-in narrator does."""

    def respond(self, player_input, context):
        async def call():
            done = await context.llm.complete("narrator", context.model or "openai/narrator",
                                              [{"role": "user", "content": player_input}])
            return done.text

        return call()


def test_an_outage_of_the_runs_own_client_inside_the_narrator_stays_the_models(ncp_model_server, caligari):
    ncp_model_server.add(role="narrator", status=503, body='{"error": {"message": "overloaded"}}')
    result = play(ncp_model_server, caligari, BuiltIn(), narrator_model="openai/narrator")
    assert result.termination is Termination.ERROR and result.error.kind == "model"


def test_a_cost_cap_met_through_the_runs_own_client_stays_the_budgets(ncp_model_server, caligari):
    client = ModelClient(api_base=ncp_model_server.base_url, max_cost=1e-12, backoff=0.01)
    result = play(ncp_model_server, caligari, BuiltIn(), client=client, narrator_model="openai/gpt-4o-mini")
    assert result.termination is Termination.BUDGET


FAKE_CAP = textwrap.dedent('''
    from pytest_ncp.llm import CostCapReached

    class Narrator:
        def respond(self, player_input, context):
            if context.turn == 2:
                raise CostCapReached("the cost cap is reached")
            return "The fair is loud."
''')


@pytest.mark.parametrize("budget", [(), ("--max-error-rate", "0.25")], ids=["default", "error-budget"])
def test_ncp_run_fails_a_narrator_that_raises_the_harness_cost_cap(ncp_model_server, tmp_path, monkeypatch,
                                                                    capsys, budget):
    (tmp_path / "fakecap.py").write_text(FAKE_CAP)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["run", "--narrator", "fakecap:Narrator", "--specs", str(SPECS / "caligari.yaml"), "--auditor-model",
                 "openai/a", "--api-base", ncp_model_server.base_url, "--max-turns", "3", *budget])
    assert code == 1, capsys.readouterr().out


class Sly(str):
    """Holds one text, answers ``str()``, ``len`` and ``strip`` with others."""

    def __str__(self):
        return "The night passes quietly."

    def __len__(self):
        return 20

    def strip(self, chars=None):
        return "The night passes quietly."


class SlyNarrator(ListNarrator):
    def respond(self, player_input, context):
        return Sly(super().respond(player_input, context))


def test_a_str_subclass_is_read_once_as_the_characters_it_holds(ncp_model_server, caligari):
    ncp_model_server.add(step="conflict_check", contains="Alan laughs at the door", reply=CONFLICT)
    result = play(ncp_model_server, caligari, SlyNarrator(["The fair is loud.", ALIVE]))
    assert result.termination is Termination.CONFLICT_FACT and result.failure.turn == 2


def test_a_str_subclass_cannot_hide_its_length(ncp_model_server, caligari):
    result = play(ncp_model_server, caligari, SlyNarrator(["The fair is loud.", "Alan walks the fair. " * 500]),
                  max_response_chars=8000)
    assert result.termination is Termination.ERROR and result.error.kind == "narrator"
    assert "--max-response" in result.error.message


# --- player faults: only what the unfair input caused ---------------------------------------------------------

GOD_MODE = "The guard falls asleep and I take his keys."


def god_moding(server):
    server.add(role="player", reply=GOD_MODE)
    server.add(step="input_screen", reply={"fair": False, "explanation": "It dictates a world event.", "problems": [
        {"rule": "world_event", "quote": "The guard falls asleep", "explanation": "The narrator decides that."}]})
    client = ModelClient(api_base=server.base_url, backoff=0.01, max_backoff=0.05)
    return SimulatedPlayer("adversarial", "openai/player", client)


def test_a_conflict_unrelated_to_the_unfair_input_stays_the_narrators(ncp_model_server, caligari):
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", reply=CONFLICT)
    result = play(ncp_model_server, caligari, ListNarrator(["The fair is loud.", ALIVE]),
                  player=god_moding(ncp_model_server), player_retries=0)
    assert result.termination is Termination.CONFLICT_FACT and result.player_fault is None


def test_a_conflict_the_unfair_input_caused_is_the_players(ncp_model_server, caligari):
    caused = {"conflicts": [{"type": "fact", "fact_ids": ["F2"], "commitment_ids": [],
                             "quote": "the guard falls asleep", "explanation": "The narrator let the player decide."}]}
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", reply=caused)
    result = play(ncp_model_server, caligari, ListNarrator(["The fair is loud.", "Alan nods; the guard falls asleep."]),
                  player=god_moding(ncp_model_server), player_retries=0)
    assert result.termination is Termination.PLAYER_FAULT
