"""A conflict named in any answer of the conflict check is remembered, whatever made that answer invalid."""

from __future__ import annotations

import json

import pytest

from pytest_ncp.engine.episode import Termination

FLAG = {"type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": "Alan laughs at the door",
        "explanation": "Alan was stated dead."}
RESPONSES = ["The fair is loud.", "Alan laughs at the door, alive and well.", "Morning comes."]


@pytest.mark.parametrize("first", [
    json.dumps({"conflicts": [FLAG], "verdict": "CONFLICT"}),                      # an unexpected key
    json.dumps({"conflicts": [FLAG]}) + "\nI am confident in this verdict.",        # prose after the JSON
    json.dumps({"conflicts": [{**FLAG, "note": "dead men do not laugh"}]}),         # an unexpected key in the flag
], ids=["unexpected-key", "prose-after-json", "unexpected-flag-key"])
def test_a_flag_in_an_answer_refused_as_a_whole_goes_to_confirmation(play, caligari, ncp_model_server, first):
    # The retry withdraws it ({"conflicts": []} is the scripted default); the flag must not vanish.
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", reply=first, times=1)
    result = play(caligari, RESPONSES, max_turns=3)
    assert result.termination is Termination.CONFLICT_FACT and result.failure.turn == 2
    confirm = [r for r in ncp_model_server.requests if r.step == "conflict_confirmation"]
    assert len(confirm) == 1 and "Alan laughs at the door" in confirm[0].text


@pytest.mark.parametrize("flag", [
    {**FLAG, "fact_ids": ["F99"]},                                  # an unknown id
    {**FLAG, "fact_ids": [], "commitment_ids": ["C1"]},             # a fact conflict naming no fact
    {"type": "fact", "fact_ids": ["F2"], "quote": "Alan laughs at the door"},  # fields missing
], ids=["unknown-id", "mismatched-id", "missing-fields"])
def test_a_flag_that_cannot_be_confirmed_as_named_is_never_a_pass(play, caligari, ncp_model_server, flag):
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", reply={"conflicts": [flag]}, times=1)
    result = play(caligari, RESPONSES, max_turns=3)
    assert result.termination is Termination.ERROR and result.error.kind == "auditor" and result.turns == 1
    assert "refused answer" in result.error.message


def test_a_flag_repaired_by_the_valid_answer_is_judged_as_repaired(play, caligari, ncp_model_server):
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", reply={"conflicts": [FLAG]})
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", reply={"conflicts": [{**FLAG, "fact_ids": ["F99"]}]},
                         times=1)
    result = play(caligari, RESPONSES, max_turns=3)
    assert result.termination is Termination.CONFLICT_FACT and result.failure.turn == 2
