"""The one quote matcher of the project: the auditor verifies quotes with it, reports highlight with it.

A quote is found in a text after the same normalisation on both sides, the one of
:mod:`pytest_ncp.core.reading` (the text as a person reads it): invisible format characters removed,
compatibility forms (ligatures, full-width letters, the ellipsis character) in their plain form,
look-alike letters of other scripts folded to the Latin letter they imitate; then typographic quote
marks and dashes as their ASCII forms, case and runs of whitespace ignored. So a narration that hides
a zero-width space inside "dead", or writes it with Cyrillic letters, is quoted as "dead", as it reads.

An elision (``...`` or ``…``) in a quote skips text: each piece is found in order, at most
``MAX_ELIDED_WORDS`` words after the one before and never across a negation. Every piece must start
and end on a word boundary, so ``"the"`` is not found inside ``"other"``. Spans are reported in the
original text, so a report can mark exactly what was quoted.

A quote that *verifies* a verdict must also be substantial (:func:`substantial`): at least
``MIN_QUOTE_WORDS`` words in all and no piece of a single word, unless it is the whole response
(a response shorter than that can only be quoted whole). ``"."`` or ``"the"`` prove nothing.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .reading import match_char
from .reading import words as _visible_words

MIN_QUOTE_WORDS = 3

_CHARS = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u201c": '"', "\u201d": '"',
                        "\u201e": '"', "\u2014": "-", "\u2013": "-", "\u2012": "-", "\u2010": "-", "\u2011": "-",
                        "\u00a0": " ",
                        # The prompts show a tag-like "<" in data as a guillemet (prompts.neutralise).
                        "\u2039": "<", "\u203a": ">"})
_ELISION = re.compile(r"\s*\.\.\.\s*")
# An elision skips at most this many words, and never a negation: "You have ... found the letter" must
# not verify against "You have not found the letter" (the skipped words would reverse the meaning).
MAX_ELIDED_WORDS = 25
_NEGATION = re.compile(r"(?<!\w)(?:not|no|never|nor|neither|none|nobody|nothing|nowhere|without|cannot)(?!\w)|n't")
_WORD = re.compile(r"\w+", re.UNICODE)
_EDGE = " \"'"


@lru_cache(maxsize=8192)
def _normalise_char(ch: str) -> str:
    return match_char(ch).translate(_CHARS)


@lru_cache(maxsize=256)
def normalise(text: str) -> tuple[str, tuple[int, ...]]:
    """The normalised text and, for each of its characters, the index of the original character.

    Cached: every step of a turn checks its quotes against the same narration, and a character folds the same
    way wherever it occurs."""
    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text or ""):
        for n in _normalise_char(ch):
            if n.isspace():
                if out and out[-1] == " ":
                    continue
                n = " "
            out.append(n)
            where.append(i)
    return "".join(out), tuple(where)


def pieces(quote: str) -> list[str]:
    """The normalised pieces of a quote, split at elisions, without surrounding quote marks."""
    text, _ = normalise(quote)
    parts = (p.strip(_EDGE) for p in _ELISION.split(text.strip()))
    return [p for p in parts if p.strip()]


def _pattern(piece: str) -> re.Pattern[str]:
    start = r"(?<!\w)" if piece[:1].isalnum() or piece[:1] == "_" else ""
    end = r"(?!\w)" if piece[-1:].isalnum() or piece[-1:] == "_" else ""
    return re.compile(start + re.escape(piece) + end)


def find_quote(quote: str, text: str) -> list[tuple[int, int]]:
    """Character spans (in ``text``) of each piece of ``quote``, found in order; [] when it is not there."""
    parts = pieces(quote)
    if not parts:
        return []
    haystack, where = normalise(text)
    spans: list[tuple[int, int]] = []
    pos = 0
    for piece in parts:
        m = _pattern(piece).search(haystack, pos)
        if not m:
            return []
        if spans:
            skipped = haystack[pos:m.start()]
            if len(_WORD.findall(skipped)) > MAX_ELIDED_WORDS or _NEGATION.search(skipped):
                return []
        spans.append((where[m.start()], where[m.end() - 1] + 1))
        pos = m.end()
    return spans


def quote_in(quote: str, text: str) -> bool:
    """Whether ``quote`` occurs in ``text`` (see the module docstring for what is ignored)."""
    return bool(find_quote(quote, text))


def words(text: str) -> int:
    """The words a person reads in ``text`` (invisible characters and symbols are no words)."""
    return _visible_words(text)


def substantial(quote: str, response: str) -> bool:
    """Whether a quote is long enough to prove something about the response (it need not occur in it)."""
    parts = pieces(quote)
    if not parts:
        return False
    counts = [words(p) for p in parts]
    if sum(counts) >= MIN_QUOTE_WORDS and min(counts) >= 2:
        return True
    # A short response can only be quoted whole.
    whole = words(response)
    return 0 < whole < MIN_QUOTE_WORDS and len(parts) == 1 and counts[0] == whole


def check_quote(quote: str, response: str) -> str | None:
    """None when ``quote`` verifies against ``response``; otherwise what is wrong with it."""
    if not substantial(quote, response):
        return (f"quote {quote!r} is too short to verify anything: copy at least {MIN_QUOTE_WORDS} consecutive "
                "words of the narrator's response (or the whole response when it is shorter)")
    if not quote_in(quote, response):
        return f"quote {quote!r} does not occur in the narrator's response"
    return None
