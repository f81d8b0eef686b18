"""Versioned prompt templates (package data). Bump PROMPT_VERSION (``core/config.py``, beside the other
settings a run records) whenever a template's meaning changes: it is recorded in every trace and results
file, so verdicts from different prompt versions are never mixed up silently."""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.config import PROMPT_VERSION as PROMPT_VERSION  # re-exported: where the prompts say their version
from ..core.reading import read

HERE = Path(__file__).parent
USER_MARKER = "---- user ----"
# Decimal digits of a data block's code (about 30 bits): the tag-like "<" that could close a block is
# neutralised anyway (``neutralise``), so the code is a second lock, and every digit is paid for in every
# block of every call; tokenizers read decimal digits three at a time, hex two or three at a time.
NONCE_DIGITS = 9


def untrusted(text: Any, tag: str) -> str:
    """Neutralise anything in untrusted text that could close the tag delimiting it (any tag, in any case).

    Kept for templates of users' own narrators; the audit prompts use :func:`data_block`."""
    return neutralise("" if text is None else str(text))


# "<" that starts something shaped like a tag (an opening or closing one, any name, any case, spaces
# allowed): shown as a single guillemet, so no data can open or close a block of the prompt. The quote
# matcher reads the guillemet as "<", so a quote copied from the prompt still verifies.
_TAG_START = re.compile(r"<(?=\s*/?\s*[^\W\d])")


def neutralise(text: str) -> str:
    return _TAG_START.sub("\u2039", text)


def shown(text: Any) -> str:
    """Untrusted text as a prompt shows it: as a person reads it (invisible characters removed, look-alike
    letters folded; :mod:`pytest_ncp.core.reading`), with every tag-like ``<`` neutralised."""
    return neutralise(read(None if text is None else str(text)).text)


def call_nonce(*texts: Any) -> str:
    """The delimiter code of one call's data blocks: a hash of everything untrusted the call shows.

    Data cannot carry the code of the block it sits in (that would need a hash fixed point), so it cannot
    close its block early, and the prompt stays the same for the same data (cassettes replay it)."""
    digest = hashlib.sha256("\x00".join("" if t is None else str(t) for t in texts).encode("utf-8"))
    return str(int.from_bytes(digest.digest()[:8], "big") % 10**NONCE_DIGITS).zfill(NONCE_DIGITS)


def data_block(text: Any, kind: str, nonce: str) -> str:
    """One untrusted field of a prompt, delimited: ``<kind-NONCE>`` text ``</kind-NONCE>``."""
    return f"<{kind}-{nonce}>\n{shown(text)}\n</{kind}-{nonce}>"


@lru_cache(maxsize=None)
def _environment(directory: str) -> Any:
    import jinja2  # deferred: only needed when a prompt is rendered

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([directory, str(HERE)]),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=False,
        auto_reload=False,  # a run renders the templates it started with; no stat() of every file per call
    )
    env.filters["untrusted"] = untrusted
    env.filters["shown"] = shown
    env.globals["data_block"] = data_block
    return env


def macro(template: str, name: str, *args: Any) -> str:
    """One macro of a bundled template, rendered: the auditor renders the blocks every step of a turn shares
    (``_context.j2``'s ``state`` and ``turn``) once per turn, not once per step."""
    module = _environment(str(HERE)).get_template(f"{template}.j2").module
    return str(getattr(module, name)(*args))


def render(template: str | Path, *, default_role: str = "user", **variables: Any) -> list[dict[str, str]]:
    """Render a template into chat messages.

    ``template`` is a bundled name (``"conflict_check"``) or a path to a user's template file. The
    text before a ``---- user ----`` line is the system message, the rest the user message; a
    template without the marker is one message of ``default_role``.
    """
    if isinstance(template, str) and template.isidentifier():  # a bundled name: every audit call has one
        env, name = _environment(str(HERE)), f"{template}.j2"
    else:
        path = Path(template)
        if path.suffix or path.parent != Path("."):
            env, name = _environment(str(path.resolve().parent)), path.name
        else:
            env, name = _environment(str(HERE)), f"{template}.j2"
    text = env.get_template(name).render(**variables)
    if USER_MARKER in text:
        system, user = text.split(USER_MARKER, 1)
        return [{"role": "system", "content": system.strip()}, {"role": "user", "content": user.strip()}]
    return [{"role": default_role, "content": text.strip()}]
