"""Sizes in the unit that overflows: tokens of a model's tokenizer, and the context a model accepts.

A narration's size matters to the auditor that reads it, and an endpoint counts tokens, not characters:
7,990 hieroglyphs are about 32,000 tokens. So the response limit and the audit prompt are measured here:

- :func:`count_tokens` uses the auditor model's own tokenizer where litellm knows it without the network
  (OpenAI models of its model map, through the tiktoken file litellm bundles); otherwise a **conservative bound** (:func:`token_bound`): every ASCII character pair and
  every UTF-8 byte of other text counts as one token. Tokenizers merge letters of ordinary text into far
  fewer tokens and never give a non-ASCII character more tokens than its bytes, so the bound errs on the
  side of a smaller narration.
- :func:`context_tokens` is the model's input window from litellm's model map (``max_input_tokens``);
  None when the map does not know the model (a self-hosted one): the run's ``--auditor-context-tokens``
  stands in.

litellm is never imported here: its model map and tokenizer file are read as files.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from .prices import _cost_map

TOKENS_PER_MESSAGE = 4  # the chat template's markers around each message
# What an endpoint says when a prompt does not fit its window (OpenAI, vLLM, llama.cpp, Anthropic, Ollama).
_CONTEXT_REFUSAL = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|too many tokens|prompt is too long|exceeds? the (model'?s? )?"
    r"(context|maximum)|input is too long|n_ctx", re.I)


def token_bound(text: str) -> int:
    """A conservative count of ``text``'s tokens under any tokenizer (see the module docstring)."""
    ascii_chars = len(text.encode("ascii", "ignore"))  # measured in C: every audit prompt of a turn is counted
    other = len(text.encode("utf-8")) - ascii_chars
    return -(-ascii_chars // 2) + other


def _model_info(model: str) -> Mapping[str, Any] | None:
    table = _cost_map()
    for name in (model, model.split("/", 1)[1] if "/" in model else model):
        info = table.get(name)
        if isinstance(info, Mapping):
            return info
    return None


# litellm ships tiktoken's cl100k_base file (its tokenizer for OpenAI models), named as tiktoken caches it: the
# SHA-1 of the file's address. Read from there, tiktoken never reaches the network.
_CL100K_CACHE_NAME = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"


@functools.lru_cache(maxsize=64)
def _counter(model: str) -> Callable[[str], int] | None:
    """The exact count for ``model`` when litellm's model map names OpenAI as its provider and the tokenizer
    file litellm bundles is there; None otherwise. litellm itself is not imported (seconds, and a run on the
    lean path never needs it): tiktoken reads the file litellm ships."""
    info = _model_info(model)
    if info is None or info.get("litellm_provider") not in ("openai", "azure", "text-completion-openai"):
        return None  # another provider's tokenizer would be a guess: the bound is safer
    import importlib.util
    import os
    from pathlib import Path

    found = importlib.util.find_spec("litellm")
    folders = [Path(f) / "litellm_core_utils" / "tokenizers" for f in (found.submodule_search_locations or [])] \
        if found is not None else []
    folder = next((f for f in folders if (f / _CL100K_CACHE_NAME).is_file()), None)
    cache = os.environ.get("TIKTOKEN_CACHE_DIR")
    if cache is None or not (Path(cache) / _CL100K_CACHE_NAME).is_file():
        if folder is None:
            return None
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)  # what importing litellm sets too
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base")
    except Exception:  # noqa: BLE001 - no tokenizer leaves the bound, never a failed run
        return None
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def count_tokens(model: str | None, text: str) -> tuple[int, bool]:
    """(tokens of ``text`` for ``model``, whether that is the model's own tokenizer's count)."""
    if text.isascii() and len(text) < 8:
        return token_bound(text), False
    counter = _counter(model) if model else None
    if counter is not None:
        try:
            return counter(text), True
        except Exception:  # noqa: BLE001 - a tokenizer that fails leaves the bound, never a crash
            pass
    return token_bound(text), False


def count_messages(model: str | None, messages: Sequence[Mapping[str, Any]]) -> int:
    """Tokens of a chat prompt: its messages' contents and a few per message for the template."""
    return sum(count_tokens(model, str(m.get("content") or ""))[0] + TOKENS_PER_MESSAGE for m in messages)


def context_tokens(model: str | None) -> int | None:
    """The input window of ``model`` as litellm's model map gives it; None when unknown."""
    info = _model_info(model) if model else None
    if info is None:
        return None
    value = info.get("max_input_tokens") or info.get("max_tokens")
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def context_refusal(exc: BaseException) -> bool:
    """Whether a model error says the prompt did not fit the model's context window."""
    return bool(_CONTEXT_REFUSAL.search(str(exc)))
