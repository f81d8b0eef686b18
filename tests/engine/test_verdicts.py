"""Verdicts a studio can trust, end to end through litellm and the scripted server: the auditor fails
closed, each error has its owner, narrator text is shown escaped, exit codes and comparisons count errors."""

from __future__ import annotations

import asyncio
import json

import pytest

from pytest_ncp.cli import main
from pytest_ncp.core.config import RunConfig
from pytest_ncp.engine.episode import Termination
from pytest_ncp.report.progress import episode_line
from pytest_ncp.llm import ModelClient
from pytest_ncp.engine.players import ScriptedPlayer, SimulatedPlayer
from pytest_ncp.report.text import failure_text
from pytest_ncp.analysis.reviews import ConflictItem
from pytest_ncp.report.review_walk import _EpisodeRecord, render_conflict
from pytest_ncp.engine.runner import Runner
from tests.conftest import SPECS, ListNarrator

RESPONSES = ["The fair is loud.", "Cesare stirs.", "Alan laughs at the door, alive and well.", "Morning comes."]
CONFLICT = {"conflicts": [{"type": "fact", "fact_ids": ["F2"], "commitment_ids": [],
                           "quote": "Alan laughs at the door", "explanation": "Alan was stated dead."}]}


def events(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


# --- a strict, fail-closed auditor ------------------------------------------------------------------------


def test_a_confirmed_conflict_stands_whatever_another_step_answered(play, caligari, ncp_model_server):
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=CONFLICT)
    ncp_model_server.add(step="fact_update", contains="TURN 3.", reply="garbage {")
    result = play(caligari, RESPONSES)
    assert result.termination is Termination.CONFLICT_FACT and result.failure.turn == 3
    # The other step's failure is in the trace, not lost and not promoted to the episode's outcome.
    turn3 = [e for e in events(result.trace) if e["event"] == "turn" and e["turn"] == 3][0]
    assert "fact_update" in turn3["verdicts"]["step_errors"]
    assert "not valid JSON" in turn3["verdicts"]["step_errors"]["fact_update"]


def test_without_a_confirmed_conflict_a_garbage_step_is_still_an_error(play, caligari, ncp_model_server):
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=CONFLICT)
    ncp_model_server.add(step="conflict_confirmation", reply={"confirmed": False, "explanation": "in-story"})
    ncp_model_server.add(step="fact_update", contains="TURN 3.", reply="garbage {")
    result = play(caligari, RESPONSES)
    assert result.termination is Termination.ERROR and "fact_update" in result.error.message


@pytest.mark.parametrize("confirmed", ["no", 0, "off"])
def test_a_garbage_confirmation_never_rejects_a_real_conflict(play, caligari, ncp_model_server, confirmed):
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=CONFLICT)
    ncp_model_server.add(step="conflict_confirmation", reply={"confirmed": confirmed, "explanation": "x"})
    result = play(caligari, RESPONSES)
    assert result.termination is Termination.ERROR and result.error.kind == "auditor"
    assert "conflict_confirmation" in result.error.message


def test_the_confirmation_prompt_sees_the_trajectory(play, caligari, ncp_model_server):
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=CONFLICT)
    play(caligari, RESPONSES)
    (confirm,) = [r for r in ncp_model_server.requests if r.step == "conflict_confirmation"]
    assert "PLOT (in order)" in confirm.text and "PLOT POSITION" in confirm.text
    assert all(f"[{node.id}]" in confirm.text for node in caligari.trajectory)


def test_an_added_fact_needs_a_substantial_verified_quote(play, caligari, ncp_model_server):
    ncp_model_server.add(step="fact_update", reply={"added": [{"text": "Alan is dead.", "quote": "the ... you"}],
                                                    "negated": []})
    result = play(caligari, ["The fair is loud and the crowd calls to you."], max_turns=2)
    assert result.termination is Termination.ERROR and "too short" in result.error.message
    assert all(f.added_turn == 0 for f in result.ledger.active())  # nothing committed


def test_success_never_rests_on_unchecked_evidence(play, caligari, ncp_model_server):
    ncp_model_server.add(step="commitment_check", reply={"satisfied": [
        {"commitment_id": "C5", "evidence": ""}, {"commitment_id": "C6", "evidence": "the director is mad"}]})
    result = play(caligari, RESPONSES, max_turns=3)
    assert result.termination is Termination.ERROR and "satisfied[0].evidence" in result.error.message
    assert result.commitment_states["C5"] == "PENDING"


def test_progress_needs_evidence_quoted_from_the_response(play, caligari, ncp_model_server):
    ncp_model_server.add(step="trajectory_update", reply={
        "trigger_event_occurred": True, "key_delta_occurred": True, "evidence": "Scripted progress."})
    result = play(caligari, RESPONSES, max_turns=2)
    assert result.termination is Termination.ERROR and result.node_index == 0
    assert "evidence" in result.error.message


# --- narrator and player errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("reply", ["", "   \n\t"])
def test_an_empty_narrator_response_is_the_narrators_failure(play, caligari, reply):
    result = play(caligari, ["The fair is loud.", reply])
    assert result.termination is Termination.ERROR and result.error.kind == "narrator"
    assert "empty response" in result.error.message and result.turns == 1


@pytest.mark.parametrize("reply", ["\u2026", "* * *", "\U0001f3b2\U0001f3b2", "\u200b", "\u200b\u00ad\u2060"])
def test_a_wordless_narrator_response_is_the_narrators_error_before_any_audit(play, caligari, ncp_model_server,
                                                                            reply):
    # No words after invisible characters are removed cannot be quoted, so no auditor can convict it;
    # it used to become an auditor error (an unknown, outside survival) and pass any budget above 0.
    result = play(caligari, ["The fair is loud.", reply])
    assert result.termination is Termination.ERROR and result.error.kind == "narrator"
    assert "no words a reader can read" in result.error.message and result.turns == 1
    turn_2 = [r for r in ncp_model_server.requests if r.role == "auditor" and "TURN 2." in r.text]
    assert turn_2 == []  # the auditor was never asked


def test_a_narrator_response_over_the_size_limit_is_the_narrators_error_before_any_audit(play, caligari,
                                                                                       ncp_model_server):
    padded = "Alan walks the fair at dusk. " * 400  # 11,600 characters
    result = play(caligari, ["The fair is loud.", padded], max_response_chars=8000)
    assert result.termination is Termination.ERROR and result.error.kind == "narrator"
    assert "11,600 characters, over the limit of 8,000 (--max-response-chars)" in result.error.message
    assert not [r for r in ncp_model_server.requests if r.role == "auditor" and "TURN 2." in r.text]
    assert play(caligari, ["The fair is loud.", padded], max_response_chars=20000,
                max_response_tokens=10000).termination is not Termination.ERROR


def test_an_empty_llm_player_reply_is_a_player_error(play, caligari, ncp_model_server):
    ncp_model_server.add(role="player", contains="What do you do?", reply="   ")
    client = ModelClient(api_base=ncp_model_server.base_url, backoff=0.01, max_backoff=0.05)
    from pytest_ncp.engine.auditor import LLMAuditor
    from pytest_ncp.engine.episode import Episode

    episode = Episode(spec=caligari, narrator=ListNarrator(RESPONSES), player=SimulatedPlayer(
        "natural", "openai/player", client), auditor=LLMAuditor(client, "openai/auditor"), max_turns=3,
        client=client)
    result = asyncio.run(episode.run())
    assert result.termination is Termination.ERROR and result.error.kind == "player"
    assert "empty reply" in result.error.message


# --- terminal output and reasons ----------------------------------------------------------------------------


def test_narrator_text_reaches_the_terminal_escaped(play, caligari, ncp_model_server):
    evil = "Alan laughs at the door\x1b[2J\x1b]0;owned\x07, alive and well."
    ncp_model_server.add(step="conflict_check", contains="TURN 1.", reply=CONFLICT)
    result = play(caligari, [evil])
    assert result.termination is Termination.CONFLICT_FACT
    text = failure_text(result)
    assert "\x1b" not in text and "\x07" not in text and "\\x1b[2J" in text
    item = ConflictItem("caligari", 0, 1, "fact", ("F2",), (), "Alan laughs at the door", "x\x1b[31m", "y")
    record = _EpisodeRecord(turns={1: ("I go\x1b[1A", evil)})
    shown = render_conflict(item, record, 1, 1, color=True)
    # Only the highlight's own escape codes remain; the narration's are shown as text.
    assert shown.replace("\x1b[1;7m", "").replace("\x1b[0m", "").count("\x1b") == 0
    assert "\\x1b[2J" in shown and "\\x1b[31m" in shown and "\\x1b[1A" in shown


def test_error_reasons_in_episode_lines_end_on_a_whole_word(ncp_model_server, tmp_path, caligari):
    class Raises:
        def respond(self, player_input, context):
            # Longer than an episode line shows (400 characters): it is cut, at a word.
            raise RuntimeError("InternalServerError: litellm.InternalServerError: OpenAIException - the "
                               "upstream connection was refused by the remote host \x1b[31mred\x1b[0m again. "
                               + "The proxy retried the upstream and was refused again. " * 8)

    runner = Runner(RunConfig(narrator="x:Y", auditor_model="openai/a", api_base=ncp_model_server.base_url,
                              max_turns=2), narrator_factory=Raises,
                    player_factory=lambda spec: ScriptedPlayer(["I wait."] * 5))
    (result,) = asyncio.run(runner.run([caligari]))
    line = episode_line(result.record)
    reason = line.split("(narrator: ", 1)[1].split(");", 1)[0]
    assert reason.endswith(" …") and "\x1b" not in line
    full = result.error.message.replace("\x1b", "\\x1b")  # the line shows escape codes as text
    assert full.startswith(reason[:-2]) and full[len(reason) - 2] == " "


# --- ncp run and ncp compare: exit codes ----------------------------------------------------------------------


RAISES = "class Narrator:\n    def respond(self, player_input, context):\n        raise RuntimeError('boom')\n"


def test_ncp_run_on_a_narrator_that_always_raises_fails(ncp_model_server, tmp_path, monkeypatch, capsys):
    (tmp_path / "raising.py").write_text(RAISES)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["run", "--narrator", "raising:Narrator", "--specs", str(SPECS / "caligari.yaml"),
                 "--auditor-model", "openai/a", "--api-base", ncp_model_server.base_url, "--max-turns", "5"])
    out = capsys.readouterr()
    assert code == 1
    assert ("1 episode(s), 1 narrator error(s) (failures), 0 unknown (auditor/model/player errors, player faults, split verdicts): "
            "survival@5 0.0% (95% CI 0.0%-97.5%)") in out.out
    assert "invariants held n/a" in out.out  # nothing was played, so nothing held
    # The verdict's lines (gate, budget, narrator errors) all go to stdout, as the pytest summary's do.
    assert "ncp: 1 episode(s) ended in a narrator error (raised, timed out or answered nothing)" in out.out


def test_ncp_run_error_budget_and_gate_exit_codes(ncp_model_server, tmp_path, capsys):
    ncp_model_server.add(step="conflict_check", reply="not json")
    base = ["run", "--narrator", "quiet:Narrator", "--specs", str(SPECS / "caligari.yaml"),
            "--auditor-model", "openai/a", "--api-base", ncp_model_server.base_url, "--max-turns", "2"]
    (tmp_path / "quiet.py").write_text("class Narrator:\n    def respond(self, i, c):\n        return 'All is calm.'\n")
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        assert main(base) == 6  # every audit failed: unknown outcomes over the default budget of 0
        assert "ncp error budget EXCEEDED: 1 of 1 episode(s)" in capsys.readouterr().out
        assert main([*base, "--max-error-rate", "1"]) == 0  # the user allows it
        assert main([*base, "--max-error-rate", "1", "--min-survival", "0.5@2"]) == 1  # nothing judged: gate refuses
        assert "cannot decide" in capsys.readouterr().out
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("quiet", None)


def _results(episodes):
    return {"version": 1, "config": {"max_turns": 20}, "episodes": episodes}


def _ep(spec, termination="turn_limit", turns=20, kind=None):
    return {"spec_id": spec, "repeat": 0, "termination": termination, "turns": turns, "progress": 0.0,
            "satisfied": 0.0, "failure": None, "commitments": {}, "tokens": 0, "cost_usd": 0.0, "trace": None,
            "error": {"kind": kind, "message": "m"} if kind else None}


def test_ncp_compare_fails_when_new_errored_on_every_episode(tmp_path, capsys):
    (tmp_path / "base.json").write_text(json.dumps(_results([_ep(f"s{i}") for i in range(5)])))
    (tmp_path / "new.json").write_text(json.dumps(_results([_ep(f"s{i}", "error", 0, "model") for i in range(5)])))
    code = main(["compare", str(tmp_path / "base.json"), str(tmp_path / "new.json")])
    out = capsys.readouterr().out
    assert code == 6 and "NOTHING TO COMPARE" in out and "ncp error budget EXCEEDED: 5 of 5" in out
    # Even when errors are allowed, a comparison without a single pair is no evidence of "no regression".
    assert main(["compare", str(tmp_path / "base.json"), str(tmp_path / "new.json"), "--max-error-rate", "1"]) == 1


def test_ncp_compare_counts_narrator_errors_as_failures(tmp_path, capsys):
    (tmp_path / "base.json").write_text(json.dumps(_results([_ep(f"s{i}") for i in range(8)])))
    (tmp_path / "new.json").write_text(json.dumps(_results([_ep(f"s{i}", "error", 3, "narrator") for i in range(8)])))
    assert main(["compare", str(tmp_path / "base.json"), str(tmp_path / "new.json")]) == 1
    assert "REGRESSION" in capsys.readouterr().out


# --- cassettes and Retry-After -------------------------------------------------------------------------------------


def test_a_cassette_replays_model_text_byte_for_byte(ncp_model_server, tmp_path, monkeypatch):
    from pytest_ncp.llm.cassette import CassetteTransport

    # A secret-looking environment value that also happens to be an ordinary word of the narration.
    monkeypatch.setenv("STUDIO_SERVICE_TOKEN", "lanterns")
    text = "The lanterns gutter.  \nTrailing spaces stay   \n\tand tabs, \u201cquotes\u201d and \x1b escapes."
    ncp_model_server.add(role="narrator", reply=text)
    messages = [{"role": "user", "content": "Tell me about the lanterns."}]

    address = ncp_model_server.base_url

    def client(mode):
        c = ModelClient(api_base=address, backoff=0.01)
        c.transport = CassetteTransport(mode, tmp_path / "cassettes", None if mode == "none" else c._litellm_call)
        return c

    recording = client("once")
    recorded = asyncio.run(recording.complete("narrator", "openai/n", messages))
    recording.transport.flush()
    ncp_model_server.stop()
    replayed = asyncio.run(client("none").complete("narrator", "openai/n", messages))
    assert recorded.text == text and replayed.text == text


def test_a_malformed_retry_after_is_treated_as_absent(ncp_model_server):
    ncp_model_server.add(status=429, headers={"Retry-After": "soon"}, times=1)
    client = ModelClient(api_base=ncp_model_server.base_url, backoff=0.01, max_backoff=0.05)
    completion = asyncio.run(client.complete("narrator", "openai/n", [{"role": "user", "content": "hi"}]))
    assert completion.attempts == 2 and completion.text


def test_invisible_characters_and_look_alike_letters_are_flagged_in_the_trace(play, caligari):
    hidden = "Alan is de\u200bad, and the fair falls silent. Cesare sleeps in his c\u0430binet."
    result = play(caligari, ["The fair is loud.", hidden], max_turns=2)
    turns = [json.loads(x) for x in open(result.trace, encoding="utf-8") if '"event": "turn"' in x]
    assert "reading" not in turns[0]
    assert turns[1]["reading"] == {"response": {"invisible_chars": 1, "folded_letters": 1,
                                                "mixed_script_words": ["c\u0430binet"]}}
