"""Every failure has an owner: player-input screening, confirmation votes, and the blame table,
end to end through litellm and the scripted server."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest

from pytest_ncp.analysis.metrics import compute_metrics, survival_at
from pytest_ncp.analysis.owners import outcome
from pytest_ncp.engine.auditor import LLMAuditor
from pytest_ncp.engine.episode import Episode, Termination
from pytest_ncp.engine.players import ScriptedPlayer, SimulatedPlayer
from pytest_ncp.llm import ModelClient
from pytest_ncp.testing.prompts import data_in
from tests.conftest import ListNarrator

RESPONSES = ["The fair is loud.", "Cesare stirs.", "Alan laughs at the door, alive and well.", "Morning comes."]
CONFLICT = {"conflicts": [{"type": "fact", "fact_ids": ["F2"], "commitment_ids": [],
                           "quote": "Alan laughs at the door", "explanation": "Alan was stated dead."}]}
GOD_MODE = "The guard falls asleep and I take his keys."
FAIR = "I try the door of the booth."


def events(path, kind="turn"):
    return [e for e in map(json.loads, open(path, encoding="utf-8")) if e["event"] == kind]


def cycle(*answers):
    """A reply that gives ``answers`` in turn, whatever order concurrent requests arrive in."""
    counter = itertools.count()

    def reply(request):
        confirmed = answers[next(counter) % len(answers)]
        return {"confirmed": confirmed, "explanation": "Scripted vote: " + ("yes" if confirmed else "no") + "."}

    return reply


def episode(server, spec, *, votes=1, player=None, max_turns=4, trace=None, **kw):
    client = ModelClient(api_base=server.base_url, backoff=0.01, max_backoff=0.05)
    return Episode(spec=spec, narrator=ListNarrator(RESPONSES),
                   player=player or ScriptedPlayer([f"I act, turn {i}." for i in range(1, 50)]),
                   auditor=LLMAuditor(client, "openai/auditor", votes=votes), max_turns=max_turns, client=client,
                   trace_path=trace, **kw)


def played(server, spec, **kw):
    return asyncio.run(episode(server, spec, **kw).run())


# --- votes ----------------------------------------------------------------------------------------------


def test_one_vote_changes_nothing_and_costs_what_it_always_did(ncp_model_server, caligari, tmp_path):
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=CONFLICT)
    result = played(ncp_model_server, caligari, votes=1, trace=tmp_path / "t.jsonl")
    assert result.termination is Termination.CONFLICT_FACT and result.failure.agreement is None
    steps = [r.step for r in ncp_model_server.requests]
    # Turns 1-3, four steps each (trajectory and commitments still open), and one confirmation for one flag.
    assert steps.count("conflict_confirmation") == 1 and len(steps) == 3 * 4 + 1
    (confirm,) = [r for r in ncp_model_server.requests if r.step == "conflict_confirmation"]
    assert confirm.body["temperature"] == 0
    record = result.record.model_dump(mode="json", exclude_unset=True)
    assert "agreement" not in record["failure"] and "split" not in record["flags"]
    assert all("conflict_votes" not in e["verdicts"] for e in events(result.trace))


def test_votes_yes_no_yes_stand_with_two_of_three_recorded(ncp_model_server, caligari, tmp_path):
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=CONFLICT)
    ncp_model_server.add(step="conflict_confirmation", reply=cycle(True, False, True))
    result = played(ncp_model_server, caligari, votes=3, trace=tmp_path / "t.jsonl")
    assert result.failure is not None and result.failure.turn == 3
    assert result.failure.agreement.model_dump() == {"yes": 2, "of": 3} and result.failure.agreement_text == "2/3"
    # A strict majority stands: the narrator's conflict, whatever the split (a narration hedged to split the
    # judge gains nothing); the split is recorded.
    assert result.termination is Termination.CONFLICT_FACT and result.owner == "narrator" and not result.unknown
    votes = [r for r in ncp_model_server.requests if r.step == "conflict_confirmation"]
    assert len(votes) == 3 and {r.body["temperature"] for r in votes} == {0.7}
    (turn3,) = [e for e in events(result.trace) if e["turn"] == 3]
    (tally,) = turn3["verdicts"]["conflict_votes"]
    assert (tally["yes"], tally["no"], tally["invalid"], tally["of"]) == (2, 1, 0, 3) and len(tally["answers"]) == 3
    record = result.record.model_dump(mode="json", exclude_unset=True)
    assert record["failure"]["agreement"] == {"yes": 2, "of": 3}
    assert record["flags"]["split"] == 1 and record["flags"]["split_confirmed"] == 1
    assert result.commitment_states.get("C1") != "VIOLATED"


def test_votes_no_no_yes_reject_the_flag_and_the_episode_goes_on(ncp_model_server, caligari, tmp_path):
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=CONFLICT)
    ncp_model_server.add(step="conflict_confirmation", reply=cycle(False, False, True))
    result = played(ncp_model_server, caligari, votes=3, trace=tmp_path / "t.jsonl")
    assert result.termination is Termination.TURN_LIMIT and result.failure is None and result.turns == 4
    (turn3,) = [e for e in events(result.trace) if e["turn"] == 3]
    assert turn3["verdicts"]["conflict_confirmation"][0]["confirmed"] is False
    assert turn3["verdicts"]["conflict_votes"][0]["yes"] == 1
    assert result.record.flags.split == 1 and result.record.flags.split_confirmed == 0


def test_unanimous_votes_are_the_narrators_conflict(ncp_model_server, caligari):
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=CONFLICT)
    result = played(ncp_model_server, caligari, votes=3)
    assert result.termination is Termination.CONFLICT_FACT and result.owner == "narrator"
    assert result.failure.agreement.model_dump() == {"yes": 3, "of": 3}


def test_a_vote_without_a_valid_answer_counts_for_neither_side(ncp_model_server, caligari):
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=CONFLICT)
    answers = itertools.count()

    def reply(request):  # yes, then garbage on every retry of the second sample... and of the third
        n = next(answers)
        return {"confirmed": True, "explanation": "yes"} if n == 0 else "not json"

    ncp_model_server.add(step="conflict_confirmation", reply=reply)
    # One yes and two samples with no valid answer: no majority either way, an auditor error (fail closed).
    result = played(ncp_model_server, caligari, votes=3)
    assert result.termination is Termination.ERROR and result.error.kind == "auditor"


# --- screening -------------------------------------------------------------------------------------------


def god_moding_player(server, *, learns=False):
    """The player model dictates a world event; with ``learns`` it plays fair once told why it was refused."""
    def reply(request):
        return FAIR if learns and "cannot be played" in request.text else GOD_MODE

    server.add(role="player", reply=reply)
    client = ModelClient(api_base=server.base_url, backoff=0.01, max_backoff=0.05)
    return SimulatedPlayer("adversarial", "openai/player", client)


def screen(request):
    said = data_in(request.text, "player_input") or ""
    if "falls asleep" in said:
        return {"fair": False, "explanation": "It dictates a world event.", "problems": [
            {"rule": "world_event", "quote": "The guard falls asleep", "explanation": "The narrator decides that."}]}
    return {"fair": True, "problems": [], "explanation": "The character's own act."}


def conflict_at_turn(turn, said=None):
    def reply(request):
        if f"TURN {turn}." in request.text and (said is None or said in (data_in(request.text, "player_input") or "")):
            return {"conflicts": [{"type": "player_input", "fact_ids": [], "commitment_ids": [],
                                   "quote": "Alan laughs at the door", "explanation": "The action is ignored."}]}
        return {"conflicts": []}

    return reply


def test_a_god_moding_player_is_screened_regenerated_and_then_owns_the_conflict(ncp_model_server, caligari,
                                                                                 tmp_path):
    ncp_model_server.add(step="input_screen", reply=screen)
    ncp_model_server.add(step="conflict_check", reply=conflict_at_turn(3))
    player = god_moding_player(ncp_model_server)
    result = played(ncp_model_server, caligari, player=player, trace=tmp_path / "t.jsonl", player_retries=2)
    assert result.termination is Termination.PLAYER_FAULT and result.owner == "player" and result.unknown
    assert result.failure.turn == 3 and result.player_fault["turn"] == 3
    assert result.player_fault["input"] == GOD_MODE and result.player_fault["attempts"] == 3
    assert result.player_fault["problems"][0]["rule"] == "world_event"
    # Each of turns 1-3: the input, two regenerations told why, three screens.
    by_step = [r.step or r.role for r in ncp_model_server.requests]
    assert by_step.count("input_screen") >= 9 and by_step.count("player") >= 9
    retries = [r for r in ncp_model_server.requests if r.role == "player" and "cannot be played" in r.text]
    assert retries and "world" in retries[0].text and "The guard falls asleep" in retries[0].text
    (turn3,) = [e for e in events(result.trace) if e["turn"] == 3]
    assert turn3["screen"]["fair"] is False and len(turn3["screen"]["attempts"]) == 3
    record = result.record.model_dump(mode="json", exclude_unset=True)
    assert record["termination"] == "player_fault" and record["player_fault"]["input"] == GOD_MODE
    assert record["screening"]["inputs"] == 3 and record["screening"]["played_unfair"] == 3
    assert record["screening"]["regenerated"] == 6 and record["screening"]["calls"] == 9
    # Censored before its turn, never a failure: survival through turn 2 is known, turn 3 is not.
    assert result.record.ending.unknown and outcome(result.record) == ("player", "player_fault")
    assert survival_at([result.record], 2).value == 1.0 and survival_at([result.record], 2).reached == 1
    assert survival_at([result.record], 3).reached == 0
    assert all(state != "VIOLATED" for state in result.commitment_states.values())


def test_a_player_that_plays_fair_once_told_why_leaves_the_conflict_to_the_narrator(ncp_model_server, caligari):
    ncp_model_server.add(step="input_screen", reply=screen)
    ncp_model_server.add(step="conflict_check", reply=conflict_at_turn(3))
    player = god_moding_player(ncp_model_server, learns=True)
    result = played(ncp_model_server, caligari, player=player)
    assert result.termination is Termination.CONFLICT_PLAYER_INPUT and result.owner == "narrator"
    assert [t.player_input for t in result.transcript] == [FAIR, FAIR, FAIR]
    assert result.screening == {"inputs": 3, "unfair": 3, "regenerated": 3, "played_unfair": 0, "calls": 6}


def test_zero_retries_plays_the_unfair_input_at_once(ncp_model_server, caligari):
    ncp_model_server.add(step="input_screen", reply=screen)
    player = god_moding_player(ncp_model_server, learns=True)
    result = played(ncp_model_server, caligari, player=player, player_retries=0, max_turns=2)
    assert result.termination is Termination.TURN_LIMIT  # unfair, but nothing it provoked: the turns count
    assert [t.player_input for t in result.transcript] == [GOD_MODE, GOD_MODE]
    assert result.screening["played_unfair"] == 2 and result.screening["regenerated"] == 0


def test_scripted_inputs_are_not_screened(ncp_model_server, caligari):
    result = played(ncp_model_server, caligari, max_turns=2)
    assert result.termination is Termination.TURN_LIMIT and result.screening == {}
    assert not [r for r in ncp_model_server.requests if r.step == "input_screen"]
    assert result.record.screening is None


def test_an_invalid_screen_answer_is_retried_then_an_auditor_error(ncp_model_server, caligari):
    ncp_model_server.add(step="input_screen", reply={"fair": False, "problems": [], "explanation": "unfair"})
    result = played(ncp_model_server, caligari, player=god_moding_player(ncp_model_server), max_turns=2)
    assert result.termination is Termination.ERROR and result.error.kind == "auditor"
    assert "input_screen" in result.error.message and '"problems" is empty' in result.error.message


def test_a_screen_quote_must_come_from_the_input(ncp_model_server, caligari):
    ncp_model_server.add(step="input_screen", reply={"fair": False, "explanation": "x", "problems": [
        {"rule": "world_event", "quote": "the castle burns down", "explanation": "x"}]})
    result = played(ncp_model_server, caligari, player=god_moding_player(ncp_model_server), max_turns=2)
    assert result.termination is Termination.ERROR and "player's input" in result.error.message


def test_the_screen_runs_while_the_previous_turn_is_audited(ncp_model_server, caligari):
    # Pipelined: turn 2's input is asked for and screened while turn 1's audit is still out.
    ncp_model_server.add(step="fact_update", contains="TURN 1.", delay=0.5)
    ncp_model_server.add(step="input_screen", reply=screen)
    played(ncp_model_server, caligari, player=god_moding_player(ncp_model_server, learns=True), max_turns=2)
    requests = ncp_model_server.requests
    audit_1 = next(r for r in requests if r.step == "fact_update" and "TURN 1." in r.text)
    screens_2 = [r for r in requests if r.step == "input_screen" and "TURN 2." in r.text]
    assert screens_2 and all(r.received_at < audit_1.received_at + 0.5 for r in screens_2)


def test_the_blame_table_of_a_run_sums_to_its_episodes(ncp_model_server, caligari, tmp_path):
    from pytest_ncp.core.config import RunConfig
    from pytest_ncp.engine.runner import Runner

    ncp_model_server.add(step="input_screen", reply=screen)
    ncp_model_server.add(step="conflict_check", reply=conflict_at_turn(2, said="falls asleep"))
    answers = itertools.cycle([GOD_MODE, FAIR, FAIR, FAIR])
    ncp_model_server.add(role="player", reply=lambda request: next(answers))
    config = RunConfig(narrator="unused:X", player="adversarial", player_model="openai/player",
                       auditor_model="openai/auditor", api_base=ncp_model_server.base_url, max_turns=3, repeats=4,
                       player_retries=0)
    runner = Runner(config, out_dir=tmp_path, narrator_factory=lambda: ListNarrator(RESPONSES))
    results = asyncio.run(runner.run([caligari]))
    records = [r.record for r in results]
    blame = compute_metrics(records)["blame"]
    assert blame["episodes"] == 4 == sum(row["count"] for row in blame["owners"].values())
    assert sorted(k for row in blame["owners"].values() for k in row["episodes"]) == \
        sorted(f"caligari--r{i}" for i in range(4))
    assert list(blame["owners"]) == ["narrator", "player", "auditor", "model", "harness", "budget", "none"]
    stored = json.loads((tmp_path / "results.json").read_text())
    assert stored["metrics"]["blame"] == blame


def test_a_reaudit_keeps_the_player_fault_of_an_input_its_source_played_unfair(ncp_model_server, caligari, tmp_path):
    from pytest_ncp.cli import main
    from pytest_ncp.core.config import RunConfig
    from pytest_ncp.engine.runner import Runner

    ncp_model_server.add(step="input_screen", reply=screen)
    ncp_model_server.add(step="conflict_check", reply=conflict_at_turn(2))
    ncp_model_server.add(role="player", reply=GOD_MODE)
    config = RunConfig(narrator="tests.conftest:ListNarrator", player="adversarial", player_model="openai/player",
                       auditor_model="openai/auditor", api_base=ncp_model_server.base_url, max_turns=3)
    runner = Runner(config, out_dir=tmp_path / "run", narrator_factory=lambda: ListNarrator(RESPONSES))
    (source,) = asyncio.run(runner.run([caligari]))
    assert source.termination is Termination.PLAYER_FAULT
    screens = len([r for r in ncp_model_server.requests if r.step == "input_screen"])
    assert main(["reaudit", str(tmp_path / "run"), "--auditor-model", "openai/auditor2", "--api-base",
                 ncp_model_server.base_url, "--out", str(tmp_path / "again"), "--specs", str(caligari.path)]) == 0
    again = json.loads((tmp_path / "again" / "results.json").read_text())["episodes"][0]
    assert again["termination"] == "player_fault" and again["player_fault"]["input"] == GOD_MODE
    # The recorded inputs are replayed as they were: neither asked for nor screened again.
    assert len([r for r in ncp_model_server.requests if r.step == "input_screen"]) == screens


def test_a_narrator_that_may_be_called_ahead_answers_while_its_input_is_screened(ncp_model_server, caligari):
    from pytest_ncp.engine.narrators import LLMNarrator

    def echo(request):  # the narration names the input it answers
        return "Alan laughs at the door: " + request.body["messages"][-1]["content"][-60:]

    ncp_model_server.add(role="narrator", reply=echo)
    ncp_model_server.add(step="input_screen", reply=screen, delay=0.4)
    client = ModelClient(api_base=ncp_model_server.base_url, backoff=0.01, max_backoff=0.05)
    result = asyncio.run(Episode(
        spec=caligari, narrator=LLMNarrator(), player=god_moding_player(ncp_model_server, learns=True),
        auditor=LLMAuditor(client, "openai/auditor"), max_turns=2, client=client, narrator_model="openai/narrator",
    ).run())
    assert result.termination is Termination.TURN_LIMIT
    assert [t.player_input for t in result.transcript] == [FAIR, FAIR]
    assert all(FAIR in t.response and GOD_MODE not in t.response for t in result.transcript)
    requests = ncp_model_server.requests
    # The unfair input was narrated while it was screened, and that narration dropped.
    assert any(r.role == "narrator" and GOD_MODE in r.text for r in requests)
    for turn in (1, 2):
        fair_screen = next(r for r in requests if r.step == "input_screen" and f"TURN {turn}." in r.text
                           and FAIR in (data_in(r.text, "player_input") or ""))
        narration = next(r for r in requests if r.role == "narrator" and r.received_at >= fair_screen.received_at - 0.05
                         and FAIR in r.body["messages"][-1]["content"])
        assert narration.received_at < fair_screen.received_at + 0.4  # before the screen had answered


@pytest.mark.parametrize("votes,answers", [(2, (True, False)), (4, (True, False, True, False))])
def test_a_tied_vote_is_not_a_pass_for_the_narrator(ncp_model_server, caligari, votes, answers):
    """docs/auditor.md: "a tie is no majority ... a flag neither side can win is an auditor error (fail
    closed)"; option help: "a conflict short of unanimity is the auditor's doubt, not the narrator's" pass.
    A 1/2 or 2/4 split must not let the turn through as clean."""
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=CONFLICT)
    ncp_model_server.add(step="conflict_confirmation", reply=cycle(*answers))
    result = played(ncp_model_server, caligari, votes=votes)
    assert result.termination is not Termination.TURN_LIMIT, (
        f"a {votes // 2}/{votes} tie was taken as a rejection: the turn passed as clean")
    assert result.termination is Termination.ERROR and result.error.kind == "auditor"
    assert "tied" in result.error.message
