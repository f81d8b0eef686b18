"""Request shaping shared by every transport: what both paths send, merged system prompts, and how a
structured answer is asked for in each output mode."""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..core.config import OUTPUT_MODES

# Where a prompt is worth caching: (message index, character offset), the cached prefix ending just before that
# character; offset None: the end of the message. ``ModelClient.complete(cache_breaks=...)``.
CacheBreak = tuple[int, int | None]
# Anthropic's limit of cache_control breakpoints per request.
MAX_BREAKPOINTS = 4
# The cache lifetime asked for: Anthropic's default, 5 minutes (writes billed at 1.25x the input price; an hour
# costs 2x). The calls of an episode come seconds apart, and each read renews the 5 minutes.
CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}


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
    """The request for one structured-output mode; ``response_format`` is the OpenAI json_schema form.

    The audit prompts do not spell out their answer's shape: ``json_schema`` sends the schema as the API's
    own field, and the other two modes write it into the prompt (``json_object`` also sends it as a grammar
    for the servers that take one; OpenAI-compatible servers that do not would otherwise never see it)."""
    schema = (response_format.get("json_schema") or {}).get("schema") or {}
    shaped = dict(request)
    if mode == "json_schema":
        shaped["response_format"] = response_format
    elif mode == "json_object":
        # llama-cpp-python (and others) turn the schema into a grammar; plain OpenAI ignores it.
        shaped["messages"] = _schema_in_prompt(request["messages"], schema)
        shaped["response_format"] = {"type": "json_object", "schema": schema}
    elif mode == "prompt":
        shaped["messages"], shaped["response_format"] = _schema_in_prompt(request["messages"], schema), None
    else:
        raise ValueError(f"unknown structured-output mode {mode!r}; valid: {', '.join(OUTPUT_MODES[1:])}")
    return shaped


def _schema_in_prompt(messages: list[dict[str, Any]], schema: dict[str, Any]) -> list[dict[str, Any]]:
    copied = [dict(m) for m in messages]
    instruction = ("Answer with one JSON object and nothing else (no prose, no code fence). "
                   "It must follow this JSON Schema:\n" + json.dumps(schema, separators=(",", ":")))
    # Before the data, never after it: text that comes after the narration is where an injected
    # instruction would sit, so the instructions end where the data begins.
    first = copied[0] if copied and copied[0].get("role") in ("system", "user") else None
    if first is None:
        copied.insert(0, {"role": "system", "content": instruction})
    else:
        first["content"] = f"{first.get('content') or ''}\n\n{instruction}"
    return copied


def takes_breakpoints(model: str) -> bool:
    """Whether the provider caches only where the request marks it (``cache_control``): Anthropic's models."""
    provider, _, name = model.partition("/")
    return provider == "anthropic" or (not name and provider.startswith("claude"))


def with_cache_breakpoints(messages: list[dict[str, Any]], breaks: Sequence[CacheBreak]) -> list[dict[str, Any]]:
    """``messages`` with Anthropic ``cache_control`` breakpoints: each message holding a break becomes text blocks
    split at its offsets, the block that ends at a break marked. The provider caches the prompt up to a marked
    block and serves it to a later request with the same prefix; nothing is cached without a mark. At most
    ``MAX_BREAKPOINTS`` (the last ones: each covers the prefix of those before it)."""
    valid: list[tuple[int, int]] = []
    for index, offset in breaks:
        if 0 <= index < len(messages) and isinstance(messages[index].get("content"), str):
            text = messages[index]["content"]
            at = len(text) if offset is None else offset
            if 0 < at <= len(text) and (index, at) not in valid:
                valid.append((index, at))
    wanted: dict[int, set[int]] = {}
    for index, at in sorted(valid)[-MAX_BREAKPOINTS:]:
        wanted.setdefault(index, set()).add(at)
    out = [dict(m) for m in messages]
    for index, cuts in wanted.items():
        text = out[index]["content"]
        edges = [0, *sorted(cuts)]
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text[a:b], "cache_control": dict(CACHE_CONTROL)}
                                        for a, b in zip(edges, edges[1:])]
        if edges[-1] < len(text):
            blocks.append({"type": "text", "text": text[edges[-1]:]})
        out[index]["content"] = blocks
    return out
