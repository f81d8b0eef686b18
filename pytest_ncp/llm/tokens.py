"""Sizes in the unit that overflows: tokens of a model's tokenizer, and the context a model accepts.

A narration's size matters to the auditor that reads it, and an endpoint counts tokens, not characters:
7,990 hieroglyphs are about 32,000 tokens. So the response limit and the audit prompt are measured here:

- :func:`count_tokens` uses the auditor model's own tokenizer where litellm knows it without the network
  (OpenAI models through the tiktoken files litellm bundles, and the tokenizers it ships for Anthropic and
  DeepSeek models); otherwise a **conservative bound** (:func:`token_bound`): every ASCII character pair and
  every UTF-8 byte of other text counts as one token. Tokenizers merge letters of ordinary text into far
  fewer tokens and never give a non-ASCII character more tokens than its bytes, so the bound errs on the
  side of a smaller narration.
- :func:`context_tokens` is the model's input window from litellm's model map (``max_input_tokens``);
  None when the map does not know the model (a self-hosted one): the run's ``--auditor-context-tokens``
  stands in.

litellm is imported on the first count that needs it, never at import.
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
    ascii_chars = sum(ch.isascii() for ch in text)
    other = len(text.encode("utf-8")) - ascii_chars
    return -(-ascii_chars // 2) + other


def _model_info(model: str) -> Mapping[str, Any] | None:
    table = _cost_map()
    for name in (model, model.split("/", 1)[1] if "/" in model else model):
        info = table.get(name)
        if isinstance(info, Mapping):
            return info
    return None


@functools.lru_cache(maxsize=64)
def _counter(model: str) -> Callable[[str], int] | None:
    """litellm's exact count for ``model`` when it knows the tokenizer offline; None otherwise."""
    info = _model_info(model)
    if info is None:
        return None
    from .litellm_path import import_litellm

    litellm = import_litellm()
    name = model.split("/", 1)[1] if "/" in model else model
    try:
        from litellm.utils import huggingface_tokenizer_kind
        kind: str | None = huggingface_tokenizer_kind(name)
    except ImportError:  # an older litellm: only OpenAI's tokenizer is known to be local
        kind = None
    if kind is None and info.get("litellm_provider") not in ("openai", "azure", "text-completion-openai"):
        return None  # tiktoken would be a guess for this model: the bound is safer
    if kind is not None and kind not in ("anthropic", "deepseek"):
        return None  # those tokenizers would be downloaded from a hub: never at run time
    return lambda text: int(litellm.token_counter(model=name, text=text))


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
