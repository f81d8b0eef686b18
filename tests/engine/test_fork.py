"""Forking a recorded episode at turn T: the state before T is rebuilt from the trace, turn T is sampled
again through litellm to the scripted server, and the verdict is the real auditor's."""

from __future__ import annotations

import asyncio
import json

import pytest

from pytest_ncp.core.config import RunConfig
from pytest_ncp.engine.auditor import LLMAuditor
from pytest_ncp.engine.episode import Termination
from pytest_ncp.engine.fork import EpisodeState, ForkError, fork
from pytest_ncp.llm import ModelClient

from tests.conftest import ListNarrator
from tests.engine.test_votes_and_screening import CONFLICT, cycle, played
from pytest_ncp.testing import opening
from pytest_ncp.testing import data_in

RESPONSES = ["The fair is loud and bright.", "Cesare stirs in his cabinet.",
             "Alan laughs at the door, alive and well.", "Morning comes over Holstenwall."]
FIXED = [*RESPONSES[:2], "Alan's grave lies quiet beneath the rain.", RESPONSES[3]]


def script(server) -> None:
    """The auditor finds a fact conflict whenever a narration has Alan laughing; every turn adds a fact;
    turn 2 triggers and reaches the first node."""
    server.add(step="conflict_check", regex=opening("narration") + r"[^<]*Alan laughs", reply={"conflicts": [{
        "type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": "Alan laughs at the door",
        "explanation": "Alan was stated dead."}]})
    server.add(step="fact_update", reply=lambda r: {"added": [{"text": "Something was narrated.",
                                                               "quote": "The fair is loud"}], "negated": []}
               if "The fair is loud" in (data_in(r.text, "narration") or "") else {"added": [], "negated": []})
    server.add(step="trajectory_update", contains="TURN 2.", reply={
        "trigger_event_occurred": True, "key_delta_occurred": True, "evidence": "Cesare stirs in his cabinet"})


@pytest.fixture
def recorded(play, caligari, ncp_model_server, tmp_path):
    """An episode that fails at turn 3 and its trace."""
    script(ncp_model_server)
    result = play(caligari, RESPONSES, max_turns=6)
    assert result.termination is Termination.CONFLICT_FACT and result.failure.turn == 3
    return result


def run_fork(state, spec, server, narrator_responses=RESPONSES, **kw):
    client = ModelClient(api_base=server.base_url, backoff=0.01, max_backoff=0.05)
    return asyncio.run(fork(state, spec, RunConfig(), narrator_factory=lambda: ListNarrator(narrator_responses),
                            auditor=LLMAuditor(client, "openai/auditor"), client=client, **kw))


def test_state_at_a_turn_is_the_episode_state_before_it(recorded, caligari):
    state = EpisodeState.at(recorded.trace, 3)
    assert state.turn == 3 and state.player_input == "I act, turn 3."
    assert state.history == [("I act, turn 1.", RESPONSES[0]), ("I act, turn 2.", RESPONSES[1])]
    assert [(f.id, f.text) for f in state.ledger.active()] == [(f.id, f.text) for f in recorded.ledger.active(2)]
    assert any(f.added_turn == 1 for f in state.ledger.active())  # a fact added by the narration of turn 1
    assert state.node_index == 1 and state.trigger_turn is None
    assert state.nodes == recorded.nodes  # node id, trigger turn and reached turn
    assert state.commitment_states == {c.id: "PENDING" for c in caligari.all_commitments}
    assert state.spec_fingerprint == caligari.fingerprint and state.prompt_version
    assert state.recorded["confirmed"][0]["quote"] == "Alan laughs at the door"
    early = EpisodeState.at(recorded.trace, 1)
    assert early.history == [] and early.node_index == 0 and len(early.ledger.active()) == len(caligari.initial_facts)


def test_fork_at_the_failure_turn_reproduces_the_recorded_verdict(recorded, caligari, ncp_model_server, tmp_path):
    state = EpisodeState.at(recorded.trace, 3)
    ncp_model_server.reset()
    script(ncp_model_server)
    outcome = run_fork(state, caligari, ncp_model_server, samples=3, out_dir=tmp_path / "fork")
    assert [r.failure for r in outcome.results] == [recorded.failure] * 3
    assert all(r.termination is recorded.termination for r in outcome.results)
    assert outcome.rate == 1.0 and outcome.interval[0] > 0.3
    # Turns 1 and 2 were not generated or audited again: every audit request is for turn 3.
    audited = {r.text.split("TURN ")[1].split(".")[0] for r in ncp_model_server.requests if r.step}
    assert audited == {"3"}
    traces = sorted((tmp_path / "fork" / "traces").glob("*.jsonl"))
    assert [p.name for p in traces] == [f"caligari--fork-t3-s{k}.jsonl" for k in range(3)]
    start = json.loads(traces[0].read_text().splitlines()[0])
    assert start["fork"] == {"trace": recorded.trace, "turn": 3, "sample": 0} and start["from_turn"] == 3
    text = "\n".join(outcome.lines())
    assert "conflict rate at turn 3: 3/3 = 100%" in text and '"Alan laughs at the door"' in text


def test_fork_at_an_earlier_clean_turn_finds_no_conflict(recorded, caligari, ncp_model_server):
    outcome = run_fork(EpisodeState.at(recorded.trace, 2), caligari, ncp_model_server, samples=2)
    assert outcome.rate == 0.0 and all(r.termination is Termination.TURN_LIMIT for r in outcome.results)
    assert all(r.turns == 2 and r.node_index == 1 for r in outcome.results)


def test_fork_with_a_fixed_narrator_clears_the_failure(recorded, caligari, ncp_model_server):
    outcome = run_fork(EpisodeState.at(recorded.trace, 3), caligari, ncp_model_server, FIXED, samples=3)
    assert outcome.rate == 0.0 and not outcome.conflicts
    assert "conflict rate at turn 3: 0/3 = 0%" in "\n".join(outcome.lines())


def test_continue_plays_more_turns_with_recorded_then_scripted_inputs(recorded, caligari, ncp_model_server):
    outcome = run_fork(EpisodeState.at(recorded.trace, 3), caligari, ncp_model_server, FIXED, samples=1,
                       continue_turns=2)
    (result,) = outcome.results
    assert result.termination is Termination.TURN_LIMIT and result.turns == 5
    assert [t.turn for t in result.transcript] == [3, 4, 5]
    # Turn 3 is the recorded input; the trace ends there, so turns 4 and 5 follow the spec's script.
    assert [t.player_input for t in result.transcript] == ["I act, turn 3.", *caligari.scripted_inputs[3:5]]


def test_restore_hook_gets_the_recorded_history(recorded, caligari, ncp_model_server):
    seen = []

    class Stateful(ListNarrator):
        def restore(self, history):
            seen.append(list(history))

        def respond(self, player_input, context):
            seen.append(("history", len(context.history)))
            return super().respond(player_input, context)

    client = ModelClient(api_base=ncp_model_server.base_url, backoff=0.01, max_backoff=0.05)
    asyncio.run(fork(EpisodeState.at(recorded.trace, 3), caligari, RunConfig(),
                     narrator_factory=lambda: Stateful(FIXED), auditor=LLMAuditor(client, "openai/auditor"),
                     client=client, samples=1))
    assert seen == [[("I act, turn 1.", RESPONSES[0]), ("I act, turn 2.", RESPONSES[1])], ("history", 2)]


def test_a_changed_spec_is_refused_naming_what_changed(recorded, caligari):
    changed = caligari.model_copy(update={"scripted_inputs": ["I leave the fair."]})
    with pytest.raises(ForkError, match=r"changed: scripted_inputs"):
        EpisodeState.at(recorded.trace, 3).check_spec(changed)


def test_a_turn_the_trace_does_not_have_is_a_clear_error(recorded):
    with pytest.raises(ForkError, match=r"cannot fork at turn 9: the trace has turns 1..3"):
        EpisodeState.at(recorded.trace, 9)


def test_an_episode_that_errored_can_be_forked_at_the_errored_turn(play, caligari, ncp_model_server):
    class Raises(ListNarrator):
        def respond(self, player_input, context):
            if context.turn == 3:
                raise RuntimeError("backend fell over")
            return super().respond(player_input, context)

    errored = play(caligari, narrator=Raises(FIXED), max_turns=5)
    assert errored.termination is Termination.ERROR and errored.error.turn == 3
    state = EpisodeState.at(errored.trace, 3)
    assert state.player_input == "I act, turn 3." and state.recorded is None and len(state.history) == 2
    outcome = run_fork(state, caligari, ncp_model_server, FIXED, samples=2)
    assert outcome.rate == 0.0 and [r.turns for r in outcome.results] == [3, 3]


def test_ncp_fork_does_not_pass_when_every_sample_is_a_split_verdict(ncp_model_server, tmp_path, capsys):
    """A run with --audit-votes 3 fails at turn 3 (3/3). Forked there (the fork takes the run's audit votes),
    every sample's conflict stands on 2/3: a majority, so the narrator's conflict with its split recorded.
    ``ncp fork`` must not exit 0 (its 'no conflict, fixed' answer) while printing a 100% conflict rate."""
    from pytest_ncp.cli import main
    from tests.conftest import FIXTURES
    from tests.fixtures.fork_narrators import script

    script(ncp_model_server)
    out = tmp_path / "run"
    assert main(["run", "--narrator", "tests.fixtures.fork_narrators:Breaks", "--specs", str(FIXTURES / "caligari.yaml"),
                 "--api-base", ncp_model_server.base_url, "--auditor-model", "openai/auditor", "--max-turns", "6",
                 "--out", str(out), "--workers", "1", "--audit-votes", "3"]) == 0
    episode = json.loads((out / "results.json").read_text())["episodes"][0]
    assert episode["termination"] == "conflict:fact" and episode["failure"]["agreement"] == {"yes": 3, "of": 3}
    capsys.readouterr()
    ncp_model_server.add(step="conflict_confirmation", reply=cycle(True, False, True))
    code = main(["fork", str(out / episode["trace"]), "--turn", "3", "--samples", "1", "--api-base",
                 ncp_model_server.base_url, "--out", str(tmp_path / "fork")])
    text = capsys.readouterr().out
    forked = json.loads((tmp_path / "fork" / "results.json").read_text())["episodes"]
    assert [e["termination"] for e in forked] == ["conflict:fact"]
    assert forked[0]["failure"]["agreement"] == {"yes": 2, "of": 3}
    assert code != 0, f"ncp fork exited 0 (pass) on a split verdict:\n{text}"


def test_a_fork_sample_whose_conflict_stood_on_a_split_vote_counts_as_the_narrators(ncp_model_server, caligari):
    """``ForkOutcome.conflicts`` (the fork's conflict rate, and the pytest fork test's "still failing") counts
    every sample with a narrator failure at turn T: a majority of votes is one, split or not."""
    from pytest_ncp.engine.fork import EpisodeState, ForkOutcome

    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=CONFLICT)
    ncp_model_server.add(step="conflict_confirmation", reply=cycle(True, False, True))
    result = played(ncp_model_server, caligari, votes=3)
    assert result.termination is Termination.CONFLICT_FACT and result.failure.turn == 3
    state = EpisodeState.__new__(EpisodeState)
    state.turn = 3
    outcome = ForkOutcome(state, [result])
    assert len(outcome.conflicts) == 1
