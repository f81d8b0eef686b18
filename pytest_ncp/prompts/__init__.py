"""Versioned prompt templates (package data). Bump PROMPT_VERSION whenever a template's meaning changes:
it is recorded in every trace and results file, so verdicts from different prompt versions are never mixed
up silently."""

from __future__ import annotations

PROMPT_VERSION = "ncp-prompts/3"  # 2: the trajectory step is told when the trigger already happened; 3: quotes
# and evidence must be substantial verbatim spans, the confirmation step sees the trajectory


from functools import lru_cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
USER_MARKER = "---- user ----"


def untrusted(text: Any, tag: str) -> str:
    """Neutralise anything in untrusted text that could close the tag delimiting it."""
    text = "" if text is None else str(text)
    return text.replace(f"</{tag}", f"<\\/{tag}").replace(f"<{tag}", f"<\\{tag}")


@lru_cache(maxsize=None)
def _environment(directory: str) -> Any:
    import jinja2  # deferred: only needed when a prompt is rendered

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([directory, str(HERE)]),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=False,
    )
    env.filters["untrusted"] = untrusted
    return env


def render(template: str | Path, *, default_role: str = "user", **variables: Any) -> list[dict[str, str]]:
    """Render a template into chat messages.

    ``template`` is a bundled name (``"conflict_check"``) or a path to a user's template file. The
    text before a ``---- user ----`` line is the system message, the rest the user message; a
    template without the marker is one message of ``default_role``.
    """
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
