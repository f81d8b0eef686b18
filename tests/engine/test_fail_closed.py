"""The auditor fails closed: answers it cannot parse or verify end the episode as error, never as a pass."""

from __future__ import annotations

import json

import pytest

from pytest_ncp.engine.episode import Termination

GOOD = {"conflicts": []}
BAD_ANSWERS = {
    "not json": "definitely not json {",
    "schema-invalid": {"conflicts": [{"type": "vibes", "fact_ids": [], "commitment_ids": [], "quote": "x",
                                      "explanation": "x"}]},
    "missing field": {"conflicts": [{"type": "fact", "fact_ids": ["F1"], "quote": "The fair"}]},
    "unknown fact id": {"conflicts": [{"type": "fact", "fact_ids": ["F99"], "commitment_ids": [],
                                       "quote": "The fair is loud", "explanation": "x"}]},
    "quote not in response": {"conflicts": [{"type": "fact", "fact_ids": ["F2"], "commitment_ids": [],
                                             "quote": "Alan rides a dragon", "explanation": "x"}]},
    "fact conflict without ids": {"conflicts": [{"type": "fact", "fact_ids": [], "commitment_ids": [],
                                                 "quote": "The fair is loud", "explanation": "x"}]},
}


@pytest.mark.parametrize("answer", list(BAD_ANSWERS.values()), ids=list(BAD_ANSWERS))
def test_invalid_conflict_check_is_retried_then_an_auditor_error(play, caligari, ncp_model_server, answer):
    ncp_model_server.add(step="conflict_check", reply=answer)
    result = play(caligari, ["The fair is loud."])
    assert result.termination is Termination.ERROR
    assert result.error.kind == "auditor"
    assert "conflict_check" in result.error.message
    assert result.failure is None and not result.survived
    assert len([r for r in ncp_model_server.requests if r.step == "conflict_check"]) == 3  # bounded retries


def test_retry_explains_the_problem_and_a_corrected_answer_is_accepted(play, caligari, ncp_model_server):
    ncp_model_server.add(step="conflict_check", reply=BAD_ANSWERS["unknown fact id"], times=1)
    result = play(caligari, ["The fair is loud."], max_turns=1)
    assert result.termination is Termination.TURN_LIMIT
    retry = [r for r in ncp_model_server.requests if r.step == "conflict_check"][1]
    assert "F99" in retry.text and "invalid" in retry.text


@pytest.mark.parametrize("step,answer,why", [
    ("fact_update", {"added": [{"text": "x", "quote": "nowhere in the text"}], "negated": []},
     "added[0]: quote 'nowhere in the text' does not occur in the narrator's response"),
    ("fact_update", {"added": [], "negated": [{"fact_id": "F42", "quote": "The fair is loud"}]},
     "negated[0]: fact_id 'F42' names no active ledger fact"),
    ("commitment_check", {"satisfied": [{"commitment_id": "C99", "evidence": "x"}]},
     "satisfied[0]: commitment_id 'C99' names no commitment"),
    ("trajectory_update", {"trigger_event_occurred": "maybe", "key_delta_occurred": True, "evidence": "x"},
     "trigger_event_occurred: Input should be a valid boolean"),
    ("conflict_confirmation", {"explanation": "no verdict"}, "confirmed: Field required"),
])
def test_every_step_fails_closed(play, caligari, ncp_model_server, step, answer, why):
    if step == "conflict_confirmation":  # only asked about a flagged conflict
        ncp_model_server.add(step="conflict_check", reply={"conflicts": [{
            "type": "fact", "fact_ids": ["F1"], "commitment_ids": [], "quote": "The fair is loud",
            "explanation": "x"}]})
    ncp_model_server.add(step=step, reply=answer)
    result = play(caligari, ["The fair is loud."])
    assert result.termination is Termination.ERROR and result.turns == 0
    assert result.error.kind == "auditor"
    assert result.error.message.startswith(f"auditor step {step} gave no valid answer after 3 attempt(s): ")
    assert why in result.error.message
    # The trace keeps every rejected answer of that step, each with the same reason: retried, never passed.
    error = next(json.loads(x) for x in open(result.trace, encoding="utf-8") if '"event": "error"' in x)
    rejected = [a for a in error["rejected_answers"] if a["step"] == step]
    assert [a["attempt"] for a in rejected] == [1, 2, 3]
    assert all(why in a["problems"] for a in rejected)


def test_garbage_never_counts_as_success(play, caligari, ncp_model_server):
    # Even an answer that would satisfy every achievement cannot pass when another step is garbage.
    ncp_model_server.add(step="commitment_check", reply={"satisfied": [
        {"commitment_id": "C5", "evidence": "x"}, {"commitment_id": "C6", "evidence": "x"}]})
    ncp_model_server.add(step="trajectory_update", reply="{{{")
    result = play(caligari, ["The fair is loud."])
    assert result.termination is Termination.ERROR
