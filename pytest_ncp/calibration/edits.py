"""Minimal edits: a gold violation built from a reference turn changes or adds one sentence and keeps its length.

Kept apart from ``playthrough`` so that the gold set's loader (``goldset``) can check edits without
importing the module that builds cases from it.
"""

from __future__ import annotations

import difflib
import re

from ..core.quotes import words
from ..lint.core import ABBREVIATIONS

# A violation's length may differ from its turn's by at most this share (a longer or shorter edit would
# let length predict the label again).
EDIT_LENGTH = 0.15
# A full stop, "!" or "?", with any closing quotes or brackets, before a space: where a sentence may end.
_STOP = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(?=\s)")
_LAST_WORD = re.compile(r"([^\W\d_]+)\.$")
# "No." and "etc." end sentences in narration more often than they abbreviate anything.
_TITLES = ABBREVIATIONS - {"no", "etc"}


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` as a minimal edit counts them. A stop ends no sentence after a title or an
    initial ("Mr. Utterson", "St. Paul's", "J. G. Lanyon"), nor when the next word goes on in lower case
    ('"Who are you?" he asks'): counted at every stop, an edit of one sentence naming Mr. Utterson is two."""
    text = " ".join(text.split())
    out: list[str] = []
    start = 0
    for m in _STOP.finditer(text):
        word = _LAST_WORD.search(text, 0, m.start() + 1)
        if word and (word.group(1).lower() in _TITLES or (len(word.group(1)) == 1 and word.group(1).isupper())):
            continue
        if text[m.end() + 1:m.end() + 2].islower():
            continue
        out.append(text[start:m.end()].strip())
        start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def edit_problems(original: str, edited: str) -> list[str]:
    """Why ``edited`` is not a minimal edit of ``original``: one sentence changed or added, and a length
    within ``EDIT_LENGTH`` of the original's; [] when it is one."""
    out: list[str] = []
    before, after = words(original), words(edited)
    if before and abs(after - before) > EDIT_LENGTH * before:
        out.append(f"{after} words against the turn's {before}: a minimal edit keeps within "
                   f"{EDIT_LENGTH:.0%} ({round(before * (1 - EDIT_LENGTH))}-{int(before * (1 + EDIT_LENGTH))})")
    ops = [op for op in difflib.SequenceMatcher(a=sentences(original), b=sentences(edited), autojunk=False)
           .get_opcodes() if op[0] != "equal"]
    if not ops:
        out.append("the response is the turn's narration unchanged: an unedited playthrough turn is clean")
    elif len(ops) > 1 or not ((ops[0][0] == "replace" and ops[0][2] - ops[0][1] == 1 and ops[0][4] - ops[0][3] == 1)
                              or (ops[0][0] == "insert" and ops[0][4] - ops[0][3] == 1)):
        changed = sum(max(i2 - i1, j2 - j1) for _, i1, i2, j1, j2 in ops)
        out.append(f"{changed} sentence(s) changed, added or removed: a minimal edit changes or adds exactly one")
    return out
