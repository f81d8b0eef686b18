"""Model-assisted lint checks (``ncp lint --llm MODEL``): the defects text rules cannot see.

One call per spec through the project's model client (role ``author``, step ``spec_lint``, a strict
JSON-schema answer, temperature 0). Each finding names a rule of ``LLM_RULES`` and a field of the
spec, which gives it a ``path:line`` like the deterministic rules. The check fails closed: an answer
that is not JSON, names an unknown rule or a field the spec does not have is retried with the
problem spelled out, then reported as an error, never read as "no findings". Without ``--llm`` none
of this runs (the linter stays offline and deterministic).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ..llm.structured import NoValidAnswer, ask_again, ask_json, strip_fences
from .core import LintFinding

if TYPE_CHECKING:
    from ..llm import ModelClient, Role
    from ..core.spec import NarrativeSpec

LINT_STEP = "spec_lint"
LINT_ROLE: Role = "author"
MAX_ATTEMPTS = 2

LLM_RULES: dict[str, str] = {
    "llm-outside-player-view": "(model) a node's trigger or key delta happens where or when the player "
                               "character cannot see or hear it",
    "llm-invariant-binds-player": "(model) an invariant constrains what the player character does, says, "
                                  "feels or decides",
    "llm-multi-event-node": "(model) a trigger or key delta needs several events, more than one response tells",
    "llm-fact-not-true-at-turn-0": "(model) an initial fact or the briefing is not true when play begins, or "
                                   "leaks the future",
    "llm-commitment-not-auditable": "(model) a commitment cannot be judged from one narrator response",
}

_FIELD = re.compile(r"[a-z_]+(?:\[\d+\])?(?:\.[a-z_]+(?:\[\d+\])?)*")
_STR = {"type": "string"}


class LLMLintError(Exception):
    """The model gave no usable answer for a spec: reported as an error, never as a clean spec."""


def response_format() -> dict[str, Any]:
    finding = {"type": "object", "additionalProperties": False, "required": ["rule", "field", "explanation"],
               "properties": {"rule": {"type": "string", "enum": list(LLM_RULES)}, "field": _STR,
                              "explanation": _STR}}
    schema = {"type": "object", "additionalProperties": False, "required": ["findings"],
              "properties": {"findings": {"type": "array", "items": finding}}}
    return {"type": "json_schema", "json_schema": {"name": LINT_STEP, "schema": schema, "strict": True}}


def _path(field: str) -> tuple[str | int, ...] | None:
    if not _FIELD.fullmatch(field):
        return None
    return tuple(int(p) if p.isdigit() else p for p in re.findall(r"[a-z_]+|\d+", field))


def _resolve(spec: NarrativeSpec, path: tuple[str | int, ...]) -> bool:
    """Whether ``path`` names a field the spec has (so the finding's line is that field's)."""
    node: Any = spec
    for part in path:
        if isinstance(part, int):
            if not isinstance(node, list) or not 0 <= part < len(node):
                return False
            node = node[part]
        elif part in getattr(type(node), "model_fields", {}):
            node = getattr(node, part)
        else:
            return False
    return True


def parse_answer(spec: NarrativeSpec, text: str) -> tuple[list[LintFinding] | None, list[str]]:
    """The findings of one answer, or None and the problems to tell the model."""
    try:
        data = json.loads(strip_fences(text))
    except ValueError as exc:
        return None, [f"not valid JSON ({exc})"]
    items = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None, ['the answer must be an object with a "findings" list']
    out, problems = [], []
    where = spec.path or f"<spec {spec.id}>"
    for i, item in enumerate(items):
        if not (isinstance(item, dict) and all(isinstance(item.get(k), str) for k in ("rule", "field", "explanation"))):
            problems.append(f"findings[{i}]: needs string rule, field and explanation")
            continue
        path = _path(item["field"].strip())
        if item["rule"] not in LLM_RULES:
            problems.append(f"findings[{i}]: unknown rule {item['rule']!r} (known: {', '.join(LLM_RULES)})")
        elif path is None or not _resolve(spec, path):
            problems.append(f"findings[{i}]: field {item['field']!r} names nothing in the spec "
                            f"(e.g. trajectory[2].key_delta, commitments[0])")
        else:
            out.append(LintFinding(where, spec.line_of(*path), item["rule"],
                                   f"{item['field'].strip()}: {item['explanation'].strip()}"))
    return (None, problems) if problems else (out, [])


async def llm_findings(spec: NarrativeSpec, text: str, client: ModelClient, model: str) -> list[LintFinding]:
    """Ask ``model`` to review one spec (its file ``text``); raises LLMLintError when no answer is usable."""
    from ..prompts import render

    try:
        return await ask_json(client, LINT_ROLE, model, render("spec_lint", text=text),
                              parse=lambda completion: parse_answer(spec, completion.text), attempts=MAX_ATTEMPTS,
                              retry=_RETRY, step=LINT_STEP, response_format=response_format(), temperature=0.0)
    except NoValidAnswer as exc:
        raise LLMLintError(f"{spec.path or spec.id}: no usable answer from {model} after {MAX_ATTEMPTS} "
                           "attempt(s): " + "; ".join(exc.problems)) from None


_RETRY = ask_again(". Answer again with JSON that follows the schema.")
