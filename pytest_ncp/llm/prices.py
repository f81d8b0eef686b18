"""List prices of models, from litellm's cost map: what a call costs, and what one may cost at most.

One table for every path: the lean OpenAI-compatible path prices its calls here, ``--estimate`` prices a
run before it starts, and ``--max-cost`` reserves each call's upper-bound cost before it is sent. When
litellm is not imported yet (a run whose every model is OpenAI-compatible), its bundled map is read as a
file: importing litellm costs seconds and about 100 MB for one table.

Cached prompt tokens (a provider's prompt cache served them; ``types.cached_tokens`` reads them from a
usage block) cost ``cache_read_input_token_cost`` where the map has it, and the full input price where it
does not.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

# A prompt's tokens are at most its UTF-8 bytes (byte-level BPE never makes more tokens than bytes), plus
# the few tokens a chat template adds around each message.
TOKENS_PER_MESSAGE = 8


@dataclass(frozen=True)
class Price:
    """US dollars per token of one model (the cost map's list prices)."""

    input: float
    output: float
    cached_input: float  # per prompt token served from the provider's cache

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        cached = max(0, min(cached_tokens, prompt_tokens))
        return (prompt_tokens - cached) * self.input + cached * self.cached_input + completion_tokens * self.output

    def bound(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The most a call with these token counts can cost: no cached discount assumed."""
        return prompt_tokens * self.input + completion_tokens * self.output


def price_of(model: str) -> Price | None:
    """The list price of ``model`` (a litellm name: ``openai/gpt-4o-mini``, ``anthropic/claude-haiku-4-5``);
    None when the cost map has no price for it (a self-hosted model, a name the map does not know)."""
    table = _cost_map()
    names = [model]
    if "/" in model:
        names.append(model.split("/", 1)[1])  # the map keys most models without their provider
    for name in names:
        info = table.get(name)
        if isinstance(info, Mapping):
            per_in = _number(info.get("input_cost_per_token"))
            per_out = _number(info.get("output_cost_per_token"))
            if per_in is None and per_out is None:
                continue
            cached = _number(info.get("cache_read_input_token_cost"))
            return Price(per_in or 0.0, per_out or 0.0, (per_in or 0.0) if cached is None else cached)
    return None


def model_price(model: str) -> tuple[float, float]:
    """(input, output) USD per token of ``model``; (0, 0) when it has no price."""
    price = price_of(model)
    return (price.input, price.output) if price is not None else (0.0, 0.0)


def prompt_token_bound(messages: Any) -> int:
    """An upper bound on the prompt tokens of ``messages``: their UTF-8 bytes, plus a few per message."""
    total = 0
    for message in messages or ():
        content = message.get("content") if isinstance(message, Mapping) else message
        if isinstance(content, list):  # content parts
            content = " ".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content)
        total += len(str(content or "").encode("utf-8")) + TOKENS_PER_MESSAGE
    return total


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


@functools.lru_cache(maxsize=1)
def _cost_map() -> dict[str, Any]:
    import importlib.util
    import sys
    from pathlib import Path

    costs: dict[str, Any]
    if "litellm" in sys.modules and hasattr(sys.modules["litellm"], "model_cost"):
        costs = sys.modules["litellm"].model_cost
        return costs
    spec = importlib.util.find_spec("litellm")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "model_prices_and_context_window_backup.json"
        if path.exists():
            costs = json.loads(path.read_text(encoding="utf-8"))
            return costs
    from .litellm_path import import_litellm

    costs = import_litellm().model_cost
    return costs
