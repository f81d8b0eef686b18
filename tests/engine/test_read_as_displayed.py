"""The auditor, the quote matcher and every check read narration as a display shows it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ncp.core.quotes import check_quote, quote_in
from pytest_ncp.core.reading import read
from pytest_ncp.engine.episode import Termination

RLO, LRO, RLE, PDF, RLI, PDI = "\u202e", "\u202d", "\u202b", "\u202c", "\u2067", "\u2069"
SHOWN = "Alan laughs at the door, alive and well."
CONFLICT = {"conflicts": [{"type": "fact", "fact_ids": ["F2"], "commitment_ids": [],
                           "quote": "Alan laughs at the door", "explanation": "Alan was stated dead."}]}


def overridden(text: str) -> str:
    """``text`` stored reversed inside a right-to-left override: a display shows ``text``."""
    return RLO + text[::-1] + PDF


def test_a_right_to_left_override_is_audited_as_the_display_shows_it(play, caligari, ncp_model_server):
    # The display shows "Alan laughs at the door, alive and well."; the stored characters are reversed.
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", reply=CONFLICT)
    result = play(caligari, ["The fair is loud.", overridden(SHOWN)], max_turns=3)
    assert result.termination is Termination.CONFLICT_FACT and result.failure.turn == 2
    check = [r for r in ncp_model_server.requests if r.step == "conflict_check" and "TURN 2." in r.text][0]
    assert SHOWN in check.text and SHOWN[::-1] not in check.text


def test_a_decomposed_accent_verifies_against_the_composed_quote(play, caligari, ncp_model_server):
    # The prompt shows "René" composed; an honest auditor copies it so, and must not be refused for it
    # (three refusals made the turn an auditor error: an unknown, inside the error budget).
    ncp_model_server.add(step="fact_update", contains="TURN 2.", reply={
        "added": [{"text": "Alan greets René.", "quote": "Alan greets René at the door"}], "negated": []})
    result = play(caligari, ["The fair is loud.", "Alan greets Rene\u0301 at the door, alive and well."], max_turns=2)
    assert result.termination is not Termination.ERROR, result.error
    assert any(f.text == "Alan greets René." for f in result.ledger.active())


def test_controls_no_display_can_resolve_are_the_narrators_error_before_any_audit(play, caligari,
                                                                                 ncp_model_server):
    # No control-free text lays this line out the same way: there is no one reading to audit.
    tangled = "Alan waits by the door b)\u05d02)\u202a1. and smiles."
    result = play(caligari, ["The fair is loud.", tangled], max_turns=3)
    assert result.termination is Termination.ERROR and result.error.kind == "narrator"
    assert "bidirectional controls" in result.error.message
    assert [r for r in ncp_model_server.requests if r.role == "auditor" and "TURN 2." in r.text] == []


def test_ordinary_right_to_left_text_stays_in_logical_order():
    hebrew = "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd, said Alan at the door."
    assert read(hebrew).text == hebrew
    assert quote_in("\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd, said Alan", hebrew)


@pytest.mark.parametrize("control", [RLI + "{}" + PDI, RLE + "{}" + PDF])
def test_isolates_and_embeddings_of_latin_text_read_as_written(control):
    text = "Tom says " + control.format("the bridge is down") + " and leaves."
    assert read(text).text == "Tom says the bridge is down and leaves."


_words = st.lists(st.sampled_from(["Tom", "is", "dead", "and", "buried", "the", "old", "mill", "burns", "Alan",
                                   "René", "Zoë", "café", "\u05e9\u05dc\u05d5\u05dd", "wakes", "at", "dawn"]),
                  min_size=3, max_size=12)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(before=_words, hidden=_words, after=_words, how=st.sampled_from(["rlo", "nfd", "rlo+nfd", "isolate"]))
def test_a_quote_of_what_a_reader_sees_verifies(before, hidden, after, how):
    import unicodedata

    seen = " ".join(hidden)
    if "rlo" in how and any("\u0590" <= ch <= "\u05ff" for ch in seen):
        latin = [w for w in hidden if not any("\u0590" <= ch <= "\u05ff" for ch in w)]
        seen = " ".join(latin) if len(latin) >= 3 else "Tom is dead"
    stored = seen
    if "nfd" in how:
        stored = unicodedata.normalize("NFD", stored)
    if "rlo" in how:
        stored = overridden(stored)
    if how == "isolate":
        stored = LRI_ + stored + PDI
    narration = " ".join(before) + ". " + stored + ". " + " ".join(after) + "."
    # What a reader sees is the words in ``seen``: a quote of them verifies, and the auditor is shown them.
    assert check_quote(seen, narration) is None, (narration, seen)
    assert unicodedata.normalize("NFC", seen) in read(narration).text


LRI_ = "\u2066"


@pytest.mark.parametrize("quote,narration", [
    ("Er ist ... tot und begraben", "Er ist nicht tot und begraben."),
    ("Tom is ... dead and buried", "Tom is hardly dead and buried."),
    ("Tom is ... dead and buried", "Tom is far from dead and buried."),
    ("\u041e\u043d \u0441\u043d\u043e\u0432\u0430 ... \u043c\u0451\u0440\u0442\u0432 \u0438 \u043f\u043e\u0445\u043e\u0440\u043e\u043d\u0435\u043d",
     "\u041e\u043d \u0441\u043d\u043e\u0432\u0430 \u043d\u0435 \u043c\u0451\u0440\u0442\u0432 \u0438 \u043f\u043e\u0445\u043e\u0440\u043e\u043d\u0435\u043d."),
])
def test_the_elision_guard_knows_negations_beyond_english(quote, narration):
    assert check_quote(quote, narration) is not None
    assert check_quote(quote, narration.replace(" nicht", "").replace(" hardly", "").replace(" far from", "")
                       .replace(" \u043d\u0435", " \u0442\u0430\u043a")) is None


def test_look_alike_words_in_a_latin_sentence_are_shown_as_read_in_mostly_cyrillic_narration():
    padding = ("\u042d\u0442\u043e \u0434\u043b\u0438\u043d\u043d\u044b\u0439 \u0440\u0430\u0441\u0441\u043a\u0430"
               "\u0437 \u043e \u0437\u0430\u043c\u043a\u0435. ") * 6
    disguised = "\u0501\u0435\u0430\u0501"  # "dead" in Cyrillic look-alikes
    text = padding + "Alan is " + disguised + " and buried."
    assert "Alan is dead and buried." in read(text).text
    # Cyrillic words among their own keep their letters.
    assert read(padding).text == padding
