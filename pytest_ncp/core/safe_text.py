"""Text from models made safe for a terminal, and one-line reasons shortened on word boundaries.

Narration, auditor explanations and error messages come from models and agents under test: an
escape sequence in them could recolour, move the cursor or retitle the window of whoever reads a
CI log or runs ``ncp review``. Control characters are shown escaped (``\\x1b``), never emitted; line
breaks and tabs stay. (The HTML report escapes its own way.)
"""

from __future__ import annotations

import re
import traceback

# C0 controls except tab and newline, DEL, C1 controls, and the Unicode line/paragraph separators and
# bidirectional overrides that can make a line read differently from what it contains.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str | None) -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``, ``\\u202e``)."""
    if not text:
        return text or ""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


def one_line(text: str | None, width: int = 100) -> str:
    """The first line of ``text``, printable, cut at a word boundary to at most ``width`` characters.

    A cut is marked with an ellipsis; a first word longer than ``width`` is kept whole, never cut.
    """
    line = printable((text or "").strip().splitlines()[0] if (text or "").strip() else "")
    if len(line) <= width:
        return line
    cut = line.rfind(" ", 0, width)
    if cut <= 0:
        cut = line.find(" ", width)
        return line if cut < 0 else line[:cut].rstrip() + " …"
    return line[:cut].rstrip() + " …"


def format_traceback(exc: BaseException) -> str:
    """A plain traceback (file, line, function, source line) without column carets.

    Episodes run on a background thread; on Python 3.11 computing carets parses source with ``ast``,
    which is not safe while another thread (pytest itself) parses too ("AST constructor recursion
    depth mismatch"). Frames without column numbers skip that step.
    """
    frames = [traceback.FrameSummary(f.filename, f.lineno, f.name, line=f.line)
              for f in traceback.extract_tb(exc.__traceback__)]
    lines = ["Traceback (most recent call last):\n", *traceback.StackSummary.from_list(frames).format()]
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines)
