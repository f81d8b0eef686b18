"""Reading the prompts a scripted server receives: the data blocks the audit and player prompts carry.

Audit prompts delimit every untrusted field with a per-call code (``<narration-741209583>`` ...
``</narration-741209583>``, see ``pytest_ncp.prompts.data_block``); a narrator's own prompt may use
plain tags (``<player_input>``). These helpers find either, with a code of any length (the benchmarks
replay older prompt versions against the same server), so scripted answers can key on what a
prompt shows.
"""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=None)
def _block(kind: str) -> re.Pattern[str]:
    return re.compile(rf"<{re.escape(kind)}(-[0-9a-f]+|)>\n(.*?)\n</{re.escape(kind)}\1>", re.S)


def data_blocks(text: str, kind: str) -> list[str]:
    """The contents of every ``kind`` block in ``text``, in order."""
    return [m.group(2) for m in _block(kind).finditer(text)]


def data_in(text: str, kind: str) -> str | None:
    """The content of the last ``kind`` block in ``text`` (the turn's own, after any history); None if none."""
    found = data_blocks(text, kind)
    return found[-1] if found else None


def opening(kind: str) -> str:
    """A regular expression for the opening line of a ``kind`` block (for ``ScriptedModelServer.add(regex=...)``):
    ``opening("narration") + "[^<]*Alan laughs"`` matches a prompt whose narration says Alan laughs."""
    return rf"<{re.escape(kind)}(?:-[0-9a-f]+)?>\n"
