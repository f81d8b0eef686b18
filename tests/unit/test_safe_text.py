"""One quote matcher, strict auditor answers, safe terminal text, scrubbed credentials, whole-word reasons."""

from __future__ import annotations

import pytest

from pytest_ncp.engine.auditor import parse_answer, quote_in
from pytest_ncp.llm import scrub
from pytest_ncp.llm.client import _retry_after
from pytest_ncp.core.quotes import check_quote, substantial
from pytest_ncp.report.html import find_quote as html_find_quote
from pytest_ncp.report.review_walk import highlight
from pytest_ncp.core.safe_text import one_line, printable

RESPONSE = "Alan\u2014still alive\u2014waves from the other side of the \ufb01eld. The door creaks open."


# --- the quote matcher -------------------------------------------------------------------------------


@pytest.mark.parametrize("quote", [".", "the", "a", "Alan", "the ... field"])
def test_tiny_quotes_prove_nothing(quote):
    assert check_quote(quote, RESPONSE) is not None


def test_a_short_response_can_only_be_quoted_whole():
    assert substantial("Cesare stirs", "Cesare stirs.")
    assert not substantial("Cesare", "Cesare stirs.")


def test_quotes_match_on_word_boundaries():
    assert not quote_in("he other side", RESPONSE)  # "he" inside "the"
    assert not quote_in("the door creak", RESPONSE)
    assert quote_in("The door creaks open", RESPONSE)


@pytest.mark.parametrize("quote", ["Alan-still alive-waves", "ALAN\u2013STILL ALIVE\u2013waves",
                                   "other side of the field", "the \ufb01eld. The door"])
def test_auditor_html_report_and_review_agree_on_every_quote(quote):
    verified = check_quote(quote, RESPONSE) is None
    spans = html_find_quote(quote, RESPONSE)
    marked, found = highlight(RESPONSE, quote, lambda s: f"[{s}]")
    assert verified and spans and found
    # The review marks exactly the spans the report highlights.
    assert [RESPONSE[a:b] for a, b in spans] == [marked[marked.index("[") + 1:marked.index("]")]]


# --- strict answers -------------------------------------------------------------------------------


class Ctx:
    response = "The fair is loud tonight."
    facts = ()
    player_input = "I listen."
    spec = type("Spec", (), {"commitments": (), "all_commitments": ()})()


@pytest.mark.parametrize("value", ["no", "yes", 0, 1, "off", "false", None])
def test_a_boolean_must_be_a_boolean(value):
    answer, problems = parse_answer("conflict_confirmation", f'{{"confirmed": {_json(value)}, "explanation": "x"}}',
                                    Ctx())
    assert answer is None and any("confirmed" in p for p in problems)


def test_strings_and_lists_are_strict_too():
    answer, problems = parse_answer("trajectory_update", '{"trigger_event_occurred": false, '
                                    '"key_delta_occurred": false, "evidence": 5}', Ctx())
    assert answer is None and problems
    answer, _ = parse_answer("conflict_confirmation", '{"confirmed": false, "explanation": "fine"}', Ctx())
    assert answer is not None and answer.confirmed is False


def _json(value):
    import json

    return json.dumps(value)


# --- terminal output ------------------------------------------------------------------------------------


def test_control_characters_are_shown_not_executed():
    text = "Fog\x1b[2J\x1b]0;pwned\x07 rolls in\u202e.\nNext line\tkept"
    safe = printable(text)
    assert "\x1b" not in safe and "\x07" not in safe and "\u202e" not in safe
    assert "\\x1b[2J" in safe and "\nNext line\tkept" in safe


def test_error_reasons_are_never_cut_mid_word():
    message = ("InternalServerError: litellm.InternalServerError: InternalServerError: OpenAIException - "
               "Connection error.")
    short = one_line(message, 60)
    assert short.endswith(" …") and message.startswith(short[:-2])
    assert message[len(short) - 2] == " "  # the cut falls on a space
    assert one_line("x" * 150, 100) == "x" * 150  # one long word is kept whole


# --- secrets and headers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("leak", [
    "https://generativelanguage.googleapis.com/v1/models?key=AIzaSyD-EXAMPLEEXAMPLEEXAMPLE123&alt=json",
    "https://api.example.com/x?token=ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "https://host/v1?foo=1&access_token=opaque.value.here",
])
def test_url_query_credentials_are_scrubbed(leak):
    cleaned = scrub(f"call to {leak} failed")
    assert "AIzaSy" not in cleaned and "ghp_" not in cleaned and "opaque.value" not in cleaned
    assert "***" in cleaned


@pytest.mark.parametrize("value", ["soon", "", "nan", "Tue, 99 Foo 2026 25:61:00", "inf"])
def test_malformed_retry_after_is_treated_as_absent(value):
    assert _retry_after({"retry-after": value}) is None


def test_well_formed_retry_after_is_read():
    assert _retry_after({"retry-after": "2"}) == 2.0
