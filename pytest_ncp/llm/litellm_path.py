"""The litellm path: every provider that is not OpenAI-compatible (and all of them with ``NCP_LEAN_CALLS=0``).

litellm is imported on the first call only: importing it costs seconds, and the pytest plugin is
loaded by every pytest run where it is installed. Nothing here changes litellm for the rest of the
process (a narrator under test may use litellm itself): settings go with each call.
"""

from __future__ import annotations

import os
from typing import Any

from .request import request_params, takes_breakpoints, with_cache_breakpoints
from .types import ROLE_HEADER, STEP_HEADER, Completion, cache_write_tokens, cached_tokens


async def litellm_call(request: dict[str, Any], *, api_base: str | None, api_key: str | None,
                       timeout: float) -> Completion:
    litellm = import_litellm()
    model = request["model"]
    headers = {ROLE_HEADER: request["role"]}
    if request.get("step"):
        headers[STEP_HEADER] = request["step"]
    kwargs: dict[str, Any] = {
        **request_params(request),
        "model": model,
        "timeout": request.get("timeout") or timeout,
        "num_retries": 0,  # we own the retry loop (litellm's needs tenacity, which it does not install)
        "extra_headers": headers,
        # Per call, never litellm.drop_params for the whole process: an unsupported parameter is an error
        # we want to see, and a narrator under test that uses litellm keeps its own setting.
        "drop_params": False,
    }
    if request.get("cache_breaks") and takes_breakpoints(model):
        # Anthropic caches nothing unmarked: the caller's boundaries (fixed for the run, for the episode, slowly
        # changing) become cache_control breakpoints.
        kwargs["messages"] = with_cache_breakpoints(kwargs["messages"], request["cache_breaks"])
    response_format = kwargs.get("response_format")
    if model.split("/", 1)[0] in ("ollama", "ollama_chat") and response_format \
            and response_format.get("type") == "json_object" and response_format.get("schema"):
        kwargs["format"] = kwargs.pop("response_format")["schema"]  # Ollama's native API: schema as `format`
    if api_base:
        kwargs["api_base"] = api_base
        # Local OpenAI-compatible servers (Ollama, vLLM, test servers) rarely need a key,
        # but the OpenAI client refuses to start without one.
        if api_key is None and model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            kwargs["api_key"] = "ncp-no-key"
    if api_key:
        kwargs["api_key"] = api_key
    response = await litellm.acompletion(**kwargs)
    choice = response.choices[0]
    text = choice.message.content or ""
    usage = getattr(response, "usage", None)
    hidden = getattr(response, "_hidden_params", None) or {}
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion = int(getattr(usage, "completion_tokens", 0) or 0)
    # litellm normalises Anthropic's cache_read_input_tokens, Gemini's cached content and DeepSeek's cache hits
    # into prompt_tokens_details.cached_tokens; Anthropic's cache writes stay cache_creation_input_tokens. Both
    # are counted in prompt_tokens.
    cached = min(cached_tokens(usage), prompt) if usage is not None else 0
    written = min(cache_write_tokens(usage), prompt - cached) if usage is not None else 0
    # litellm prices the call from the same cost map: writes at cache_creation_input_token_cost, reads at
    # cache_read_input_token_cost (prices.Price.cost is the same sum, for the lean path, the cap and --estimate).
    cost = float(hidden.get("response_cost") or 0.0)
    return Completion(
        text=text, model=model, role=request["role"], step=request.get("step"),
        prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached, cache_write_tokens=written,
        cost_usd=cost, finish_reason=getattr(choice, "finish_reason", None),
    )


_litellm: Any = None
_own_process = False


def quiet_in_own_process() -> None:
    """For the ``ncp`` command, which owns its process: litellm's help banners and debug logs stay off.

    The pytest plugin never calls this: a narrator under test shares pytest's process, and its litellm
    keeps whatever settings it chose.
    """
    global _own_process
    _own_process = True
    if _litellm is not None:
        _litellm.suppress_debug_info = True


def import_litellm() -> Any:
    """litellm, imported once on first use, without changing its settings for the rest of the process.

    One environment variable is set, and only when we are the ones importing litellm and the user has
    not set it: ``LITELLM_LOCAL_MODEL_COST_MAP``, read once at litellm's import, makes it read the price
    table it ships instead of downloading one (an import that reaches the network would hang an
    offline CI run). That is acceptable where a narrator under test also uses litellm: it only decides
    where the same table comes from, no call behaves differently, and there is no per-call way to say
    it. (``openai_compat`` reads that bundled table as a file when litellm is not needed at all.)
    """
    global _litellm
    if _litellm is None:
        import sys

        if "litellm" not in sys.modules:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            # Likewise its table of Anthropic beta headers, which it would otherwise fetch on an Anthropic call.
            os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
            if _own_process:
                os.environ.setdefault("LITELLM_LOG", "ERROR")
        import litellm

        if _own_process:
            litellm.suppress_debug_info = True
        _litellm = litellm
    return _litellm
