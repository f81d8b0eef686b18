"""The shared default world rules reach the auditor as commitments W1.. and are judged like any other."""

from __future__ import annotations

from pytest_ncp.engine.episode import Termination
from pytest_ncp.report.text import failure_text
from pytest_ncp.core.spec import parse_spec
from tests.conftest import FIXTURES

RESPONSES = ["The fair is loud.", "Alan walks in, alive again after his murder.", "Morning comes."]


def w1_conflict(rule="W1"):
    return {"conflicts": [{"type": "commitment", "fact_ids": [], "commitment_ids": [rule],
                           "quote": "alive again after his murder", "explanation": "Alan was murdered."}]}


def test_every_auditor_step_that_lists_commitments_lists_the_world_rules(play, caligari, ncp_model_server):
    play(caligari, RESPONSES, max_turns=1)
    prompts = [r.text for r in ncp_model_server.requests if r.step == "conflict_check"]
    assert "[W1] (invariant) The dead stay dead" in prompts[0] and "COMMITMENT STATES: all PENDING" in prompts[0]
    assert prompts[0].index("[W3]") < prompts[0].index("[C1]")


def test_the_prompts_name_every_settled_commitment_and_say_the_rest_are_pending(caligari):
    from pytest_ncp.core.ledger import FactLedger
    from pytest_ncp.engine.auditor import LLMAuditor, TurnContext
    from pytest_ncp.prompts import render

    states = {c.id: "PENDING" for c in caligari.all_commitments} | {"C6": "SATISFIED"}
    ctx = TurnContext(spec=caligari, turn=2, player_input="I wait.", response="The lamps gutter.",
                      facts=FactLedger.from_initial((f.id, f.text) for f in caligari.initial_facts).active(),
                      node_index=0, commitment_states=states, previous_response=None, trigger_turn=None)
    text = render("fact_update", **LLMAuditor(client=None, model="m")._variables(ctx))[1]["content"]  # type: ignore[arg-type]
    assert "COMMITMENT STATES: [C6] SATISFIED, every other one PENDING" in text


def test_a_world_rule_conflict_is_verified_and_ends_the_episode(play, caligari, ncp_model_server):
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", reply=w1_conflict())
    result = play(caligari, RESPONSES)
    assert result.termination is Termination.CONFLICT_COMMITMENT
    assert result.failure.turn == 2 and result.failure.commitment_ids == ["W1"]
    assert result.commitment_states["W1"] == "VIOLATED"
    assert result.record.commitments["W2"] == "PENDING"  # a conflict ends the episode: not held
    message = failure_text(result)
    assert "commitment W1 (invariant)" in message and "The dead stay dead" in message
    assert "pytest_ncp/world_rules.yaml (W1, a default world rule)" in message


def test_held_world_rules_are_reported_like_other_invariants(play, caligari):
    result = play(caligari, RESPONSES, max_turns=2)
    assert result.termination is Termination.TURN_LIMIT
    # Invariants are held (never violated), not "satisfied" by the episode ending.
    assert {cid: result.commitment_states[cid] for cid in ("W1", "W2", "W3", "C1")} == dict.fromkeys(
        ("W1", "W2", "W3", "C1"), "PENDING")
    assert result.held == 1.0  # the spec's two invariants and the three world rules
    # The satisfied share stays over the spec's own achievements and orderings (none met in two turns).
    assert result.satisfied == 0.0


def test_a_dropped_world_rule_is_an_unknown_id_and_fails_closed(play, ncp_model_server):
    spec = parse_spec((FIXTURES / "caligari.yaml").read_text() + "\nworld_rules: {drop: [W1]}\n", "c.yaml")
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", reply=w1_conflict())
    result = play(spec, RESPONSES)
    assert result.termination is Termination.ERROR and result.error.kind == "auditor"
    assert "commitment_ids ['W1'] name no commitment" in result.error.message
    assert "W1" not in result.commitment_states


def test_a_reworded_world_rule_reaches_the_auditor_in_the_spec_s_words(play, ncp_model_server):
    spec = parse_spec((FIXTURES / "caligari.yaml").read_text()
                      + '\nworld_rules: {replace: {W1: "The murdered walk again only in dreams."}}\n', "c.yaml")
    play(spec, RESPONSES, max_turns=1)
    prompt = next(r.text for r in ncp_model_server.requests if r.step == "conflict_check")
    assert "[W1] (invariant) The murdered walk again only in dreams." in prompt
    assert "The dead stay dead" not in prompt
