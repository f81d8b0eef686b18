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
import unicodedata
from functools import lru_cache

from .reading import canonical, match_char
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
# Negations and words that reverse or hedge a statement ("hardly", "far from"), in English and in the
# languages written in the scripts whose look-alike letters are folded (Latin, Cyrillic, Greek): the
# narration is matched after folding, so each word is folded the same way before it is looked for.
# Left out: forms that are also common English words ("sin", "en", "et", "mal"), which would refuse
# honest quotes of English narration far more often than they guard anything.
NEGATIONS: tuple[str, ...] = (
    # English
    "not", "no", "never", "nor", "neither", "none", "nobody", "nothing", "nowhere", "without", "cannot",
    "hardly", "scarcely", "barely", "far from", "rather than", "instead of", "lest", "unless", "except",
    "n't",
    # German, Dutch
    "nicht", "kein", "keine", "keinen", "keinem", "keiner", "keines", "nie", "niemals", "nichts", "niemand",
    "nirgends", "ohne", "weder", "kaum", "niet", "geen", "nooit", "niets", "zonder", "nergens",
    # French, Spanish, Italian, Portuguese, Catalan
    "ne", "n'", "pas", "jamais", "rien", "personne", "aucun", "aucune", "sans", "ni", "guère", "nunca",
    "jamás", "nada", "nadie", "ningún", "ninguno", "ninguna", "tampoco", "non", "mai", "niente",
    "nulla", "nessuno", "nessuna", "senza", "né", "não", "ninguém", "nenhum", "nenhuma", "nem",
    # Polish, Czech, Slovak, Croatian, Slovene, Romanian, Hungarian, Swedish, Norwegian, Danish, Finnish
    "nie", "nigdy", "nic", "nikt", "bez", "ne", "nikdy", "nikdo", "nič", "nikada", "ništa", "nitko", "nikoli",
    "niciodată", "nimic", "nimeni", "fără", "nem", "soha", "semmi", "senki", "nélkül", "inte", "aldrig",
    "ingen", "inget", "ikke", "aldri", "ingenting", "uden", "uten", "utan", "emme", "ette",
    "eivät", "koskaan", "mitään", "ilman",
    # Russian, Ukrainian, Belarusian, Bulgarian, Serbian, Macedonian (Cyrillic)
    "не", "ни", "нет", "никогда", "ничего", "ничто", "никто", "нигде", "без", "вряд", "едва", "ні", "ніколи",
    "нічого", "ніхто", "немає", "нема", "няма", "никой", "нищо", "нисам", "није", "ништа", "нико",
    # Greek
    "δεν", "δε", "μη", "μην", "όχι", "ποτέ", "τίποτα", "τίποτε", "κανείς", "καμία", "χωρίς", "ούτε", "μήτε",
    "ουδέν", "ου",
)


def _negation_pattern() -> re.Pattern[str]:
    forms = sorted({normalise(w)[0] for w in NEGATIONS}, key=len, reverse=True)
    # "n't" and "n'" attach to the word before or after them; every other entry is a whole word.
    whole = [re.escape(f) for f in forms if not f.startswith("n'") and not f.endswith("'")]
    glued = [re.escape(f) for f in forms if f.startswith("n'") or f.endswith("'")]
    return re.compile(r"(?<!\w)(?:" + "|".join(whole) + r")(?!\w)" + ("|" + "|".join(glued) if glued else ""))
_WORD = re.compile(r"\w+", re.UNICODE)
_EDGE = " \"'"


@lru_cache(maxsize=8192)
def _normalise_char(ch: str) -> str:
    return match_char(unicodedata.normalize("NFC", ch)).translate(_CHARS)


@lru_cache(maxsize=256)
def normalise(text: str) -> tuple[str, tuple[int, ...]]:
    """The normalised text and, for each of its characters, the index of the original character.

    Both sides are first put in the one canonical form of :func:`pytest_ncp.core.reading.canonical` (NFC,
    bidi controls resolved); spans index ``text`` itself whenever that form leaves its characters where they
    are (everything but resolved bidi controls, which move them). A letter is normalised with the combining
    marks that follow it, so a decomposed accent compares equal to the composed letter.

    Cached: every step of a turn checks its quotes against the same narration, and a character folds the same
    way wherever it occurs."""
    text = text or ""
    form = canonical(text)
    if form != text and unicodedata.normalize("NFC", text) == form:
        form = text  # composition only: normalise each letter with its marks, keeping indices into ``text``
    out: list[str] = []
    where: list[int] = []
    for i, ch in _clusters(form):
        for n in _normalise_char(ch):
            if n.isspace():
                if out and out[-1] == " ":
                    continue
                n = " "
            out.append(n)
            where.append(i)
    return "".join(out), tuple(where)


def _clusters(text: str) -> list[tuple[int, str]]:
    """Each base character with the combining marks after it, by the index of the base."""
    out: list[tuple[int, str]] = []
    for i, ch in enumerate(text):
        if out and unicodedata.combining(ch):
            out[-1] = (out[-1][0], out[-1][1] + ch)
        else:
            out.append((i, ch))
    return out


@lru_cache(maxsize=1)
def _negation() -> re.Pattern[str]:
    return _negation_pattern()


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
            if len(_WORD.findall(skipped)) > MAX_ELIDED_WORDS or _negation().search(skipped):
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
