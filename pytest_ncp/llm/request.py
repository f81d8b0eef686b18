"""Request shaping shared by every transport: what both paths send, merged system prompts, and how a
structured answer is asked for in each output mode."""

from __future__ import annotations

import json
from typing import Any

from ..core.config import OUTPUT_MODES


def request_params(request: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions parameters of a request, as both paths send them (one place to shape requests)."""
    params: dict[str, Any] = {"messages": request["messages"]}
    if request.get("temperature") is not None:
        params["temperature"] = request["temperature"]
    if request.get("max_tokens"):
        params["max_tokens"] = request["max_tokens"]
    if request.get("response_format") is not None:
        params["response_format"] = request["response_format"]
    return params
def merge_system_prompt(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fold system messages into the first user message, for chat templates that drop the system role."""
    system = [str(m.get("content") or "") for m in messages if m.get("role") == "system"]
    if not system:
        return messages
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    prefix = "\n\n".join(system)
    for m in rest:
        if m.get("role") == "user":
            m["content"] = f"{prefix}\n\n{m.get('content') or ''}"
            return rest
    return [{"role": "user", "content": prefix}, *rest]


def shape_structured(request: dict[str, Any], response_format: dict[str, Any], mode: str) -> dict[str, Any]:
    """The request for one structured-output mode; ``response_format`` is the OpenAI json_schema form."""
    schema = (response_format.get("json_schema") or {}).get("schema") or {}
    shaped = dict(request)
    if mode == "json_schema":
        shaped["response_format"] = response_format
    elif mode == "json_object":
        # llama-cpp-python (and others) turn the schema into a grammar; plain OpenAI ignores it.
        shaped["response_format"] = {"type": "json_object", "schema": schema}
    elif mode == "prompt":
        messages = [dict(m) for m in request["messages"]]
        instruction = ("Answer with one JSON object and nothing else (no prose, no code fence). "
                       "It must follow this JSON Schema:\n" + json.dumps(schema, separators=(",", ":")))
        # Before the data, never after it: text that comes after the narration is where an injected
        # instruction would sit, so the instructions end where the data begins.
        first = messages[0] if messages and messages[0].get("role") in ("system", "user") else None
        if first is None:
            messages.insert(0, {"role": "system", "content": instruction})
        else:
            first["content"] = f"{first.get('content') or ''}\n\n{instruction}"
        shaped["messages"], shaped["response_format"] = messages, None
    else:
        raise ValueError(f"unknown structured-output mode {mode!r}; valid: {', '.join(OUTPUT_MODES[1:])}")
    return shaped
