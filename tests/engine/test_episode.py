"""Episodes end for the right reason, at the right turn, through litellm to the scripted server."""

from __future__ import annotations

import json

from pytest_ncp.engine.episode import Termination


def conflict(kind="fact", facts=("F2",), commitments=(), quote="Alan laughs at the door"):
    return {"conflicts": [{"type": kind, "fact_ids": list(facts), "commitment_ids": list(commitments),
                           "quote": quote, "explanation": "Alan was stated dead."}]}


RESPONSES = ["The fair is loud.", "Cesare stirs.", "Alan laughs at the door, alive and well.", "Morning comes."]


def test_fact_conflict_ends_the_episode_at_that_turn_with_the_fact_id(play, caligari, ncp_model_server):
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=conflict())
    result = play(caligari, RESPONSES)
    assert result.termination is Termination.CONFLICT_FACT
    assert result.turns == 3
    assert result.failure.turn == 3 and result.failure.fact_ids == ["F2"]
    assert result.failure.quote == "Alan laughs at the door"


def test_rejected_flag_does_not_end_the_episode(play, caligari, ncp_model_server):
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=conflict())
    ncp_model_server.add(step="conflict_confirmation", reply={"confirmed": False, "explanation": "A state change."})
    result = play(caligari, RESPONSES, max_turns=5)
    assert result.termination is Termination.TURN_LIMIT
    assert result.turns == 5
    assert result.failure is None
    turn3 = result.audits[3 - 1]
    assert len(turn3.flagged) == 1 and turn3.confirmed == [] and len(turn3.rejected) == 1
    confirmations = [r for r in ncp_model_server.requests if r.step == "conflict_confirmation"]
    assert len(confirmations) == 1  # confirmation only for the flagged turn


def test_commitment_conflict_marks_the_commitment_violated(play, caligari, ncp_model_server):
    ncp_model_server.add(step="conflict_check", contains="TURN 2.",
                         reply=conflict("commitment", facts=(), commitments=("C1",), quote="Cesare stirs"))
    result = play(caligari, RESPONSES)
    assert result.termination is Termination.CONFLICT_COMMITMENT
    assert result.failure.turn == 2 and result.failure.commitment_ids == ["C1"]
    assert result.commitment_states["C1"] == "VIOLATED"


def test_player_input_conflict(play, caligari, ncp_model_server):
    ncp_model_server.add(step="conflict_check", contains="TURN 1.",
                         reply=conflict("player_input", facts=(), quote="The fair is loud"))
    result = play(caligari, RESPONSES)
    assert result.termination is Termination.CONFLICT_PLAYER_INPUT
    assert result.failure.turn == 1


def test_an_achievement_claimed_before_its_nodes_are_reached_is_not_satisfied(play, caligari, ncp_model_server):
    # Rushing to the ending: C5 and C6 name trajectory nodes; a narrator writing their own words at
    # turn 2 has not told the story, whatever one commitment-check call says.
    ncp_model_server.add(step="commitment_check", contains="TURN 2.", reply={"satisfied": [
        {"commitment_id": "C5", "evidence": "Cesare stirs"}, {"commitment_id": "C6", "evidence": "Cesare stirs."}]})
    result = play(caligari, RESPONSES, max_turns=4)
    assert result.termination is Termination.TURN_LIMIT
    assert result.commitment_states["C5"] == result.commitment_states["C6"] == "PENDING"


STEP = "The showman bows, and the story moves on."


def advance_every_turn(server):
    server.add(step="trajectory_update", reply={"trigger_event_occurred": True, "key_delta_occurred": True,
                                                "evidence": STEP})


def test_success_comes_with_the_story_and_is_confirmed(play, caligari, ncp_model_server):
    advance_every_turn(ncp_model_server)
    nodes = len(caligari.trajectory)
    result = play(caligari, [STEP], max_turns=nodes + 5)
    assert result.termination is Termination.SUCCESS and result.turns == nodes
    assert result.commitment_states["C5"] == result.commitment_states["C6"] == "SATISFIED"
    (confirmation,) = [r for r in ncp_model_server.requests if r.step == "success_confirmation"]
    assert "TURN %d." % nodes in confirmation.text and "[C5]" in confirmation.text and "[C6]" in confirmation.text
    # Invariants are never "satisfied" by an end without conflict: they held, and are reported apart.
    assert result.commitment_states["C1"] == "PENDING"
    assert result.held == 1.0 and result.record.held == 1.0
    kinds = {c.id: c.kind for c in caligari.commitments}
    met = [c for c, k in kinds.items() if k != "invariant" and result.commitment_states[c] == "SATISFIED"]
    assert result.satisfied == len(met) / sum(k != "invariant" for k in kinds.values())


def test_a_success_the_confirmation_rejects_is_undone_and_the_story_goes_on(play, caligari, ncp_model_server):
    advance_every_turn(ncp_model_server)
    ncp_model_server.add(step="success_confirmation", reply={"confirmed": False, "explanation": "rushed"})
    nodes = len(caligari.trajectory)
    result = play(caligari, [STEP], max_turns=nodes + 2)
    assert result.termination is Termination.TURN_LIMIT
    assert result.node_index == nodes - 1 and result.commitment_states["C6"] == "PENDING"
    assert len([r for r in ncp_model_server.requests if r.step == "success_confirmation"]) == 3


def test_commitment_check_cannot_satisfy_an_invariant(play, caligari, ncp_model_server):
    ncp_model_server.add(step="commitment_check", reply={"satisfied": [{"commitment_id": "C1",
                                                                         "evidence": "The fair is loud"}]})
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", reply=conflict(quote="Cesare stirs"))
    result = play(caligari, RESPONSES)
    assert result.termination is Termination.CONFLICT_FACT
    assert result.commitment_states["C1"] == "PENDING"


def trajectory(turn: int, trigger: bool, delta: bool) -> dict:
    return {"step": "trajectory_update", "contains": f"TURN {turn}.", "reply": {
        "trigger_event_occurred": trigger, "key_delta_occurred": delta,
        "evidence": RESPONSES[(turn - 1) % len(RESPONSES)]}}  # progress rests on a verified quote


def test_a_remembered_trigger_lets_the_key_delta_come_in_a_later_turn(play, caligari, ncp_model_server):
    # fair-visit: trigger at turn 1, key delta at turn 3; prophecy: both at turn 4.
    for turn, trigger, delta in ((1, True, False), (2, False, False), (3, False, True), (4, True, True)):
        ncp_model_server.add(**trajectory(turn, trigger, delta))
    result = play(caligari, RESPONSES, max_turns=4)
    assert result.node_index == 2 and result.progress == 2 / len(caligari.trajectory)
    assert result.nodes == [{"id": "fair-visit", "trigger_turn": 1, "reached_turn": 3},
                            {"id": "prophecy", "trigger_turn": 4, "reached_turn": 4}]
    # The prompt says the trigger already happened while it is remembered, and only then.
    prompts = [r.text for r in ncp_model_server.requests if r.step == "trajectory_update"]
    assert "already happened" not in prompts[0]
    assert "Its trigger event already happened at turn 1" in prompts[1] and "the current step is 1 [fair-visit]" in prompts[2]
    assert "Its trigger event already happened at turn 1" in prompts[2]
    assert "already happened" not in prompts[3] and "the current step is 2 [prophecy]" in prompts[3]
    # Both turns are in the results and in the trace, which rebuilds the same episode.
    assert [n.model_dump() for n in result.record.nodes] == result.nodes
    records = [json.loads(line) for line in open(result.trace, encoding="utf-8")]
    assert [r["trigger_turn"] for r in records if r["event"] == "turn"] == [1, 1, None, None]
    assert records[-1]["event"] == "end" and records[-1]["nodes"] == result.nodes
    from pytest_ncp.engine.episode import EpisodeResult

    assert EpisodeResult.from_trace(caligari, result.trace).nodes == result.nodes


def test_a_key_delta_before_its_trigger_does_not_count(play, caligari, ncp_model_server):
    # Turn 1: the key delta alone. Turn 2: the trigger alone (remembered). Turn 3: the key delta again.
    for turn, trigger, delta in ((1, False, True), (2, True, False), (3, False, True)):
        ncp_model_server.add(**trajectory(turn, trigger, delta))
    result = play(caligari, RESPONSES, max_turns=3)
    assert result.nodes == [{"id": "fair-visit", "trigger_turn": 2, "reached_turn": 3}]
    result = play(caligari, RESPONSES, max_turns=2)
    assert result.node_index == 0 and result.nodes == [] and result.trigger_turn == 2


def test_reaching_both_nodes_of_an_ordering_satisfies_it(play, caligari, ncp_model_server):
    for turn, evidence in ((1, "The fair is loud"), (2, "Cesare stirs"), (3, "alive and well")):
        ncp_model_server.add(step="trajectory_update", contains=f"TURN {turn}.", reply={
            "trigger_event_occurred": True, "key_delta_occurred": True, "evidence": evidence})
    result = play(caligari, RESPONSES, max_turns=3)
    assert result.node_index == 3
    assert result.commitment_states["C3"] == "SATISFIED"  # prophecy before alan-murdered
    assert result.commitment_states["C4"] == "PENDING"


def test_fact_update_is_not_committed_on_a_confirmed_conflict(play, caligari, ncp_model_server):
    ncp_model_server.add(step="fact_update", contains="TURN 2.", reply={
        "added": [{"text": "Cesare is awake.", "quote": "Cesare stirs"}], "negated": [{"fact_id": "F8", "quote": "Cesare stirs"}]})
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", reply=conflict(quote="Cesare stirs"))
    result = play(caligari, RESPONSES)
    assert result.termination is Termination.CONFLICT_FACT
    # The turn-2 fact update was asked for (concurrently with the conflict check) and was valid...
    assert result.audits[1].fact_update.added[0].text == "Cesare is awake."
    # ...but a confirmed conflict means it is not committed.
    assert [f.text for f in result.ledger.active() if f.added_turn > 0] == []
    assert result.ledger.is_active("F8")


def test_fact_updates_are_committed_with_provenance(play, caligari, ncp_model_server):
    ncp_model_server.add(step="fact_update", contains="TURN 2.", reply={
        "added": [{"text": "Cesare is awake.", "quote": "Cesare stirs"}],
        "negated": [{"fact_id": "F8", "quote": "Cesare stirs"}]})
    result = play(caligari, RESPONSES, max_turns=3)
    added = [f for f in result.ledger.active() if f.added_turn == 2]
    assert [(f.id, f.text, f.quote) for f in added] == [("F10", "Cesare is awake.", "Cesare stirs")]
    assert not result.ledger.is_active("F8") and result.ledger.is_active("F8", turn=1)
    diff = result.ledger.diff(0, 3)
    assert "- F8:" in diff and "+ F10: Cesare is awake." in diff


def test_opening_narration_is_turn_zero_and_audited(play, caligari, ncp_model_server):
    from tests.conftest import ListNarrator

    ncp_model_server.add(step="conflict_check", contains="TURN 0.", reply=conflict(quote="Alan is dead"))
    result = play(caligari, narrator=ListNarrator(["x"], opening="Alan is dead already."))
    assert result.termination is Termination.CONFLICT_FACT
    assert result.failure.turn == 0 and result.turns == 0
    assert "opening narration" in next(r.text for r in ncp_model_server.requests if r.step == "conflict_check")


def test_scripted_player_running_out_is_script_exhausted(play, caligari):
    result = play(caligari, RESPONSES, inputs=["I look.", "I wait."], max_turns=10)
    assert result.termination is Termination.SCRIPT_EXHAUSTED
    assert result.turns == 2 and result.survived


def test_trace_has_one_line_per_turn_with_verdicts(play, caligari, ncp_model_server, tmp_path):
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=conflict())
    result = play(caligari, RESPONSES)
    records = [json.loads(line) for line in open(result.trace, encoding="utf-8")]
    assert [r["event"] for r in records] == ["start", "turn", "turn", "turn", "end"]
    third = records[3]
    assert third["turn"] == 3 and third["response"] == RESPONSES[2]
    assert third["confirmed"][0]["fact_ids"] == ["F2"]
    assert set(third["verdicts"]) >= {"conflict_check", "fact_update", "trajectory_update", "commitment_check"}
    assert records[-1]["termination"] == "conflict:fact"
