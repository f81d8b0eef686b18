"""The auditor reads what a person reads: invisible characters and look-alike
letters can neither hide a contradiction from a quote nor make a wordless answer look like narration."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ncp.core.quotes import check_quote, find_quote, quote_in, words
from pytest_ncp.core.reading import fold, invisible, read

ZWSP, SOFT_HYPHEN, WORD_JOINER, BOM, RLO, TAG_A = "\u200b", "\u00ad", "\u2060", "\ufeff", "\u202e", "\U000e0041"
CYRILLIC_A, CYRILLIC_E, CYRILLIC_O, GREEK_CAPITAL_IOTA = "\u0430", "\u0435", "\u043e", "\u0399"


def test_the_reviews_hidden_contradictions_are_quoted_as_they_read():
    # Each of these read "Tom is dead" to a person; the honest auditor's quote used to be refused.
    for hidden in (f"Tom is de{ZWSP}ad", f"Tom is de{SOFT_HYPHEN}ad", f"Tom is de{WORD_JOINER}ad",
                   f"Tom is de{CYRILLIC_A}d", f"Tom is d{CYRILLIC_E}{CYRILLIC_A}d", f"{BOM}Tom is dead{RLO}\u202c"):
        narration = f"The bell tolls. {hidden}, and the village mourns him."
        assert check_quote("Tom is dead", narration) is None, repr(hidden)
        assert read(narration).text == "The bell tolls. Tom is dead, and the village mourns him."


def test_what_reads_differently_still_does_not_match():
    # A zero-width space between words is no space: "Tomisdead" is what a person sees.
    assert not quote_in("Tom is dead", f"Tom{ZWSP}is{ZWSP}dead today")
    assert not quote_in("Tom is dead", "Tom is alive and well today")


def test_the_reading_shows_the_auditor_the_visible_text_and_says_what_it_changed():
    r = read(f"The lamp is out. De{CYRILLIC_A}d men tell no t{CYRILLIC_A}les{ZWSP}{TAG_A}{TAG_A}.")
    assert r.text == "The lamp is out. Dead men tell no tales."
    assert r.removed == 3 and r.folded == 2
    assert r.flags() == {"invisible_chars": 3, "folded_letters": 2,
                         "mixed_script_words": [f"De{CYRILLIC_A}d", f"t{CYRILLIC_A}les"]}
    assert read("A plain narration.").flags() == {}


def test_a_narration_in_another_script_keeps_its_letters():
    russian = "\u0422\u043e\u043c \u043c\u0435\u0440\u0442\u0432, \u0438 \u0434\u0435\u0440\u0435\u0432\u043d\u044f \u043f\u043b\u0430\u0447\u0435\u0442."
    assert read(russian).text == russian and read(russian).folded == 0
    assert check_quote(russian[:12], russian) is None  # quotes still match it (three words)


def test_capitals_fold_to_the_capital_they_imitate():
    assert fold(GREEK_CAPITAL_IOTA) == "I" and fold(CYRILLIC_O) == "o" and fold("x") == "x"
    assert read(f"{GREEK_CAPITAL_IOTA}ris waits.").text == "Iris waits."
    assert check_quote("Iris waits by the gate", f"{GREEK_CAPITAL_IOTA}ris waits by the gate.") is None


def test_wordless_answers_have_no_words():
    for wordless in ("…", "* * *", "🎲🎲", ZWSP, f"{ZWSP}{SOFT_HYPHEN}", "— — —", "...!?", TAG_A * 5):
        assert words(wordless) == 0, repr(wordless)
    assert words("One word.") == 2


def test_an_elision_cannot_skip_a_negation_or_a_whole_page():
    assert not quote_in("You have ... found the letter", "You have not found the letter.")
    assert not quote_in("Tom is ... alive and well", "Tom is gone. Nobody is alive and well here.")
    assert quote_in("You have ... found the letter", "You have, at long last, found the letter.")
    filler = " ".join(["and then the wind blew"] * 6)  # 30 words
    assert not quote_in("The door ... Alan steps in", f"The door opens {filler} and Alan steps in.")
    assert find_quote("The door ... Alan steps in", "The door opens and Alan steps in.")


# --- property: any insertion of invisible characters or look-alikes leaves the visible text quotable -------

_LOOKALIKES = {"a": CYRILLIC_A, "e": CYRILLIC_E, "o": CYRILLIC_O, "p": "\u0440", "c": "\u0441", "x": "\u0445",
               "y": "\u0443", "i": "\u0456", "s": "\u0455", "I": GREEK_CAPITAL_IOTA, "A": "\u0391", "O": "\u039f"}
# An override closed at once changes no order (one that runs on reverses what follows: read as displayed).
_INVISIBLE = [ZWSP, SOFT_HYPHEN, WORD_JOINER, BOM, RLO + "\u202c", "\u200e", "\u200c", "\u200d", "\u2061", TAG_A, "\u034f", "\ufe0f"]
_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyzAIO", min_size=1, max_size=9)


@st.composite
def narration_and_quote(draw):
    text_words = draw(st.lists(_words, min_size=3, max_size=30))
    start = draw(st.integers(0, len(text_words) - 3))
    length = draw(st.integers(3, len(text_words) - start))
    narration = " ".join(text_words) + "."
    quote = " ".join(text_words[start:start + length])
    chars = list(narration)
    out = []
    for ch in chars:
        if draw(st.booleans()) and ch in _LOOKALIKES:
            ch = _LOOKALIKES[ch]
        out.append(ch)
        if draw(st.integers(0, 4)) == 0:
            out.append(draw(st.sampled_from(_INVISIBLE)))
    return "".join(out), quote


@settings(max_examples=300, deadline=None)
@given(narration_and_quote())
def test_any_invisible_or_lookalike_insertion_leaves_a_quote_of_the_visible_text_verifiable(case):
    corrupted, quote = case
    assert check_quote(quote, corrupted) is None
    # And what the auditor is shown is the visible text: a quote copied from it verifies too.
    shown = read(corrupted).text
    assert not any(invisible(ch) for ch in shown)
    assert check_quote(shown, corrupted) is None or words(corrupted) < 3


def test_every_format_character_is_invisible():
    import sys

    cf = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    assert len(cf) > 150 and all(invisible(ch) for ch in cf)
