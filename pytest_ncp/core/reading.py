"""Narration as a person reads it: the one normalisation that prompts, quotes and word counts share.

A narrator under test writes the very text the auditor judges, so anything a person does not see
must not change what the auditor reads or what a quote must match:

- **Format characters** (Unicode category Cf: zero-width spaces and joiners, soft hyphens, the byte
  order mark, bidirectional controls, invisible tag characters) and the other invisible fillers
  (combining grapheme joiner, Hangul fillers, variation selectors) are removed: ``de\\u200bad`` reads
  ``dead``, and text hidden in tag characters is not read at all.
- **Compatibility forms** (full-width letters, ligatures, mathematical alphanumerics) take their
  plain form (NFKC), so a closing tag written with full-width angle brackets reads as one.
- **Look-alike letters** of another script are folded to the Latin letter they imitate, using the
  Unicode TR39 confusables data that the ``confusable-homoglyphs`` package ships (a maintained,
  pure-Python copy of ``confusables.txt``): a letter is folded where it has exactly one ASCII
  look-alike. In the text shown to the auditor (:func:`read`) letters are folded inside words that
  mix Latin with another script, and everywhere in a narration that is mostly Latin ("dead" written
  with a Cyrillic e and a reads "dead"); a narration written in Cyrillic or Greek keeps its letters.
  For matching (:func:`match_key`) every look-alike is folded on both sides, so a quote copied from
  either form verifies.

``read`` also reports what it changed (:class:`Reading`): the trace records it, so a narration that
hides text from its reader is visible to whoever reviews the run.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

# Invisible characters outside category Cf (which is removed whole): combining grapheme joiner,
# Hangul fillers, variation selectors.
_INVISIBLE = frozenset(
    [0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)])
_WORD = re.compile(r"\w+")


def invisible(ch: str) -> bool:
    """Whether a person reading ``ch`` sees nothing at all (a format character or an invisible filler)."""
    return unicodedata.category(ch) == "Cf" or ord(ch) in _INVISIBLE


@lru_cache(maxsize=1)
def _folds() -> dict[str, str]:
    """Letter -> its one ASCII look-alike (TR39 confusables), for letters outside ASCII."""
    data = json.loads(resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8"))
    folds: dict[str, str] = {}
    for ch, glyphs in data.items():
        if len(ch) != 1 or ch.isascii() or not ch.isalpha():
            continue
        ascii_ = {g["c"] for g in glyphs if len(g["c"]) == 1 and g["c"].isascii() and g["c"].isalnum()}
        if len(ascii_) == 1:
            folds[ch] = ascii_.pop()
    return folds


def fold(ch: str) -> str:
    """``ch`` as the Latin letter it imitates, case kept (Cyrillic a -> a, Greek capital kappa -> K); else ``ch``."""
    folds = _folds()
    lower = ch.lower()
    if lower != ch and lower in folds:  # a capital whose small form imitates a Latin letter
        target = folds[lower]
        return target.upper() if len(target) == 1 else ch
    return folds.get(ch, ch)


def script(ch: str) -> str | None:
    """The script of a letter as its Unicode name starts (LATIN, CYRILLIC, GREEK, ...); None for others."""
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    return name.split(" ", 1)[0] if name else None


@dataclass(frozen=True)
class Reading:
    """A text as read: ``text``, and what was changed to get there."""

    text: str
    removed: int = 0                       # invisible characters dropped
    folded: int = 0                        # look-alike letters shown as the Latin letter they imitate
    mixed_words: tuple[str, ...] = field(default=())  # words (as written) that mixed Latin and another script

    @property
    def changed(self) -> bool:
        return bool(self.removed or self.folded)

    def flags(self) -> dict[str, object]:
        """What a trace records of the reading (empty when nothing was changed)."""
        out: dict[str, object] = {}
        if self.removed:
            out["invisible_chars"] = self.removed
        if self.folded:
            out["folded_letters"] = self.folded
        if self.mixed_words:
            out["mixed_script_words"] = list(self.mixed_words[:20])
        return out


def _visible(text: str) -> tuple[str, int]:
    kept = [ch for ch in text if not invisible(ch)]
    return unicodedata.normalize("NFKC", "".join(kept)), len(text) - len(kept)


def read(text: str | None) -> Reading:
    """``text`` as a person reads it (see the module docstring): what the auditor is shown."""
    raw = text or ""
    if raw.isascii():  # no format character, nothing NFKC changes, no other script: read as written
        return Reading(raw)
    return _read(raw)


@lru_cache(maxsize=2048)
def _read(raw: str) -> Reading:
    # Every audit step of a turn shows the same narration, input and previous narration: read them once.
    visible, removed = _visible(raw)
    letters = [s for s in map(script, visible) if s]
    mostly_latin = bool(letters) and sum(s == "LATIN" for s in letters) * 2 > len(letters)
    mixed: list[str] = []
    folded = 0

    def word(m: re.Match[str]) -> str:
        nonlocal folded
        w = m.group(0)
        scripts = {s for s in map(script, w) if s}
        is_mixed = "LATIN" in scripts and len(scripts) > 1
        if is_mixed:
            mixed.append(w)
        if not (is_mixed or (mostly_latin and scripts - {"LATIN"})):
            return w
        out = "".join(fold(ch) if script(ch) not in (None, "LATIN") else ch for ch in w)
        folded += sum(a != b for a, b in zip(w, out))
        return out

    shown = _WORD.sub(word, visible)
    return Reading(shown, removed, folded, tuple(mixed))


def match_char(ch: str) -> str:
    """One character as the quote matcher compares it: invisible ones vanish, the rest is NFKC, every
    look-alike letter folded, lower case. Applied alike to quotes and narration."""
    if invisible(ch):
        return ""
    return "".join(fold(c).lower() for c in unicodedata.normalize("NFKC", ch))


def words(text: str | None) -> int:
    """The number of words a person reads in ``text`` (0 for an ellipsis, "* * *", emoji or invisible text)."""
    return len(_WORD.findall(read(text).text))
