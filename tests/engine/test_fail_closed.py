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


UNQUOTABLE = {"conflicts": [{"type": "fact", "fact_ids": ["F2"], "commitment_ids": [],
                             "quote": "Alan rides a dragon", "explanation": "Alan is no dragon rider."}]}


def _records(result):
    return [json.loads(x) for x in open(result.trace, encoding="utf-8")]


def test_a_flag_whose_quote_never_verifies_is_confirmed_or_refused_never_dropped(play, caligari, ncp_model_server):
    # A flag whose quote fails is asked to be repaired; still failing, it goes to confirmation marked
    # unverified. Confirmed, it is the narrator's conflict, and the failure says its quote was not verified.
    ncp_model_server.add(step="conflict_check", reply=UNQUOTABLE)
    result = play(caligari, ["The fair is loud."])
    assert result.termination is Termination.CONFLICT_FACT and result.failure.quote_verified is False
    checks = [r for r in ncp_model_server.requests if r.step == "conflict_check"]
    assert len(checks) == 3 and "Repair the quote of conflicts[0] (the fact conflict naming F2)" in checks[1].text
    confirmation = next(r for r in ncp_model_server.requests if r.step == "conflict_confirmation")
    assert "NOT found word for word" in confirmation.text
    assert result.record.flags.model_dump(exclude_unset=True) == {
        "raised": 1, "confirmed": 1, "unverified": 1, "unverified_confirmed": 1, "withdrawn": 0,
        "withdrawn_confirmed": 0}
    assert result.record.failure.quote_verified is False


def test_an_unverified_flag_the_confirmation_rejects_is_an_auditor_error_not_a_pass(play, caligari, ncp_model_server):
    ncp_model_server.add(step="conflict_check", reply=UNQUOTABLE)
    ncp_model_server.add(step="conflict_confirmation", reply={"confirmed": False, "explanation": "not shown"})
    result = play(caligari, ["The fair is loud."])
    assert result.termination is Termination.ERROR and result.error.kind == "auditor"
    assert "conflict_check" in result.error.message and "does not occur" in result.error.message


@pytest.mark.parametrize("confirmed", [True, False])
def test_a_flag_withdrawn_on_a_retry_still_goes_to_confirmation_and_is_counted(play, caligari, ncp_model_server,
                                                                               confirmed):
    # The cheapest valid answer to "that answer is invalid" is {"conflicts": []}: the withdrawn flag is judged
    # by the confirmation step all the same, and counted in results.json either way.
    ncp_model_server.add(step="conflict_check", reply=UNQUOTABLE, times=1)
    ncp_model_server.add(step="conflict_confirmation", reply={"confirmed": confirmed, "explanation": "judged"})
    result = play(caligari, ["The fair is loud."], max_turns=1)
    assert len([r for r in ncp_model_server.requests if r.step == "conflict_check"]) == 2
    confirmation = next(r for r in ncp_model_server.requests if r.step == "conflict_confirmation")
    assert "withdrew the flag" in confirmation.text
    flags = result.record.flags.model_dump(exclude_unset=True)
    assert flags["withdrawn"] == 1 and flags["withdrawn_confirmed"] == int(confirmed)
    if confirmed:
        assert result.termination is Termination.CONFLICT_FACT and result.failure.quote_verified is False
    else:
        assert result.termination is Termination.TURN_LIMIT
        turn = next(r for r in _records(result) if r["event"] == "turn")
        assert turn["verdicts"]["flag_status"] == ["withdrawn"]


def test_a_repaired_quote_is_a_verified_flag(play, caligari, ncp_model_server):
    ncp_model_server.add(step="conflict_check", reply={"conflicts": [{
        "type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": "The fair is loud",
        "explanation": "repaired"}]})
    ncp_model_server.add(step="conflict_check", reply=UNQUOTABLE, times=1)
    result = play(caligari, ["The fair is loud."], max_turns=1)
    assert result.termination is Termination.CONFLICT_FACT and result.failure.quote_verified is True
    assert result.record.flags.unverified == 0 and result.record.flags.withdrawn == 0


def test_retry_explains_the_problem_and_a_corrected_answer_is_accepted(play, caligari, ncp_model_server):
    corrected = {"conflicts": [{**BAD_ANSWERS["unknown fact id"]["conflicts"][0], "fact_ids": ["F2"]}]}
    ncp_model_server.add(step="conflict_check", reply=corrected)
    ncp_model_server.add(step="conflict_check", reply=BAD_ANSWERS["unknown fact id"], times=1)
    ncp_model_server.add(step="conflict_confirmation", reply={"confirmed": False, "explanation": "in-story"})
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


# --- strict answers: a narration cannot make a malformed answer pass -------------------------------------------------------------

FLAG = '{"type": "fact", "fact_ids": ["F1"], "commitment_ids": [], "quote": "The fair is loud", "explanation": "x"}'


@pytest.mark.parametrize("text,problem", [
    ('{"conflicts": [' + FLAG + '], "conflicts": []}', "the key 'conflicts' is given more than once"),
    ('{"confirmed": true, "confirmed": false, "explanation": "x"}', "the key 'confirmed' is given more than once"),
    ('{"conflicts": [], "verdict": "CONFLICT", "conflict": ' + FLAG + '}', "verdict: Extra inputs are not permitted"),
    ('{"conflicts": [{"type": "fact", "fact_ids": ["F1"], "commitment_ids": [], "quote": "q", "explanation": "x", '
     '"withdrawn": true}]}', "conflicts.0.withdrawn: Extra inputs are not permitted"),
])
def test_repeated_keys_and_unknown_fields_are_refused(text, problem):
    from pytest_ncp.engine.auditor import decode_answer

    step = "conflict_confirmation" if "confirmed" in text else "conflict_check"
    answer, problems = decode_answer(step, text)
    assert answer is None and problem in problems


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "prompt"])
def test_a_repeated_key_cannot_turn_a_flag_into_a_pass_in_any_output_mode(play, caligari, ncp_model_server, mode):
    from pytest_ncp.llm import ModelClient

    ncp_model_server.add(step="conflict_check", reply='{"conflicts": [' + FLAG + '], "conflicts": []}')
    client = ModelClient(api_base=ncp_model_server.base_url, structured_output=mode, backoff=0.0)
    result = play(caligari, ["The fair is loud."], client=client)
    # The flag the refused answer names is remembered and confirmed: never a pass.
    assert result.termination is Termination.CONFLICT_FACT and result.failure.turn == 1
    turn = next(r for r in _records(result) if r["event"] == "turn")
    assert "given more than once" in json.dumps(turn)


def test_withdrawn_and_unverified_flags_reach_the_summary_the_table_and_the_html_report(tmp_path, ncp_model_server):
    # Counted in results.json is not enough; a person reading the run must see them too.
    import asyncio

    from pytest_ncp.cli.common import summary
    from pytest_ncp.core.config import RunConfig
    from pytest_ncp.core.spec import load_spec
    from pytest_ncp.engine.auditor import LLMAuditor
    from pytest_ncp.engine.players import ScriptedPlayer
    from pytest_ncp.engine.runner import Runner
    from pytest_ncp.llm import ModelClient
    from pytest_ncp.report.html import write_html
    from pytest_ncp.report.text import metrics_table
    from tests.conftest import FIXTURES, ListNarrator

    ncp_model_server.add(step="conflict_check", reply=UNQUOTABLE, times=1)  # then withdrawn on the retry
    ncp_model_server.add(step="conflict_confirmation", reply={"confirmed": False, "explanation": "not shown"})
    client = ModelClient(api_base=ncp_model_server.base_url, backoff=0.01, max_backoff=0.05)
    out = tmp_path / "run"
    runner = Runner(RunConfig(narrator="tests:List", narrator_model="openai/n", max_turns=2), out_dir=out,
                    narrator_factory=lambda: ListNarrator(["The fair is loud."] * 2),
                    auditor=LLMAuditor(client, "openai/auditor"),
                    player_factory=lambda _spec: ScriptedPlayer(["I listen.", "I wait."]), client=client)
    asyncio.run(runner.run([load_spec(FIXTURES / "caligari.yaml")]))
    metrics = json.loads((out / "results.json").read_text())["metrics"]
    assert metrics["flags"] == {"raised": 1, "confirmed": 0, "unverified": 0, "unverified_confirmed": 0,
                                "withdrawn": 1, "withdrawn_confirmed": 0}
    expected = "1 raised, 0 confirmed; 1 withdrawn on a retry (0 confirmed)"
    assert f"conflict-check flags {expected}" in summary(metrics, 2)
    assert expected in metrics_table(metrics)
    page = write_html([out / "results.json"], tmp_path / "report.html").read_text()
    assert "Conflict-check flags" in page and "withdrawn on a retry" in page
