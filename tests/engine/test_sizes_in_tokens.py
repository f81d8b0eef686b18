"""Narration is measured in the unit that overflows: tokens, of the response and of every audit prompt."""

from __future__ import annotations

import asyncio

from pytest_ncp.engine.auditor import LLMAuditor
from pytest_ncp.engine.episode import Episode, Termination
from pytest_ncp.engine.players import ScriptedPlayer
from pytest_ncp.llm import ModelClient
from tests.conftest import ListNarrator

HIEROGLYPHS = "\U00013000" * 7990  # under 8,000 characters, about 32,000 tokens


def _episode(server, tmp_path, spec, responses, *, context_tokens=None, max_turns=3, **kw):
    client = ModelClient(api_base=server.base_url, backoff=0.01, max_backoff=0.05)
    auditor = LLMAuditor(client, "openai/auditor", **({"context_tokens": context_tokens} if context_tokens else {}))
    episode = Episode(spec=spec, narrator=ListNarrator(responses), player=ScriptedPlayer([f"I act, turn {i}."
                                                                                        for i in range(1, 50)]),
                      auditor=auditor, max_turns=max_turns, client=client, trace_path=tmp_path / "t.jsonl", **kw)
    return asyncio.run(episode.run())


def _audited(server, turn):
    return [r for r in server.requests if r.role == "auditor" and f"TURN {turn}." in r.text]


def test_a_response_under_the_character_limit_but_over_the_token_limit_is_the_narrators_error(
        ncp_model_server, tmp_path, caligari):
    result = _episode(ncp_model_server, tmp_path, caligari, ["The fair is loud.", HIEROGLYPHS])
    assert result.termination is Termination.ERROR and result.error.kind == "narrator" and result.turns == 1
    assert "--max-response-tokens" in result.error.message
    assert _audited(ncp_model_server, 2) == []


def test_two_turns_that_together_overflow_the_auditors_window_are_the_narrators_error_before_any_call(
        ncp_model_server, tmp_path, caligari):
    long = ("Alan walks the fair at dusk and the crowd parts for him. " * 64).strip()  # ~1,800 tokens (bound)
    # Turn 1's prompt fits; turn 2's carries turn 1's narration too and does not (with prompts 7
    # the test holds for windows of 4,000 to 5,500 tokens plus the reply's 1,024: the middle is taken).
    result = _episode(ncp_model_server, tmp_path, caligari, [long, long.replace("dusk", "dawn")],
                      context_tokens=4700 + 1024)
    assert result.turns == 1, result.error
    assert result.termination is Termination.ERROR and result.error.kind == "narrator"
    assert "context" in result.error.message
    assert _audited(ncp_model_server, 2) == []


def test_a_prompt_too_large_without_the_narration_is_not_the_narrators(ncp_model_server, tmp_path, caligari):
    result = _episode(ncp_model_server, tmp_path, caligari, ["The fair is loud."], context_tokens=1024 + 600)
    assert result.termination is Termination.ERROR and result.error.kind == "model"
    assert ncp_model_server.requests == [] or _audited(ncp_model_server, 1) == []


def test_an_endpoints_context_refusal_on_a_turn_the_narration_fills_is_the_narrators_error(
        ncp_model_server, tmp_path, caligari):
    long = ("Alan walks the fair at dusk and the crowd parts for him. " * 64).strip()  # ~1,800 tokens (bound)
    # Turn 2's prompt carries turn 1's narration and its own: most of the prompt.
    ncp_model_server.add(role="auditor", contains="TURN 2.", status=400, body=(
        '{"error": {"message": "This model\'s maximum context length is 4096 tokens. However, your messages '
        'resulted in 5310 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}'))
    result = _episode(ncp_model_server, tmp_path, caligari, [long, long.replace("dusk", "dawn")])
    assert result.termination is Termination.ERROR and result.error.kind == "narrator", result.error
    assert "refused" in result.error.message


def test_an_endpoints_context_refusal_on_a_short_narration_stays_the_models(ncp_model_server, tmp_path, caligari):
    ncp_model_server.add(role="auditor", contains="TURN 2.", status=400, body=(
        '{"error": {"message": "maximum context length is 4096 tokens", "code": "context_length_exceeded"}}'))
    result = _episode(ncp_model_server, tmp_path, caligari, ["The fair is loud.", "Alan waves."])
    assert result.termination is Termination.ERROR and result.error.kind == "model"
