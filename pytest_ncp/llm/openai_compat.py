"""The lean path: OpenAI-compatible chat completions over one pooled aiohttp session, without litellm.

``ModelClient`` sends ``openai/...`` models here (the OpenAI API itself, or ``--api-base`` pointing at
vLLM, Ollama's OpenAI API, LM Studio, a test server). litellm stays for every other provider and for
what it is for: its cost map prices these calls too, looked up once per model.

Why aiohttp (a litellm dependency, so nothing new to install): ``benchmarks/clients.py`` measures the
CPU per call of the candidates against the scripted server. One call at a time: aiohttp 0.6 ms,
httpx 1.7 ms, the openai SDK 2.7 ms, ``litellm.acompletion`` 7 ms. With 120 calls in flight (24
episodes), what a real run pays: aiohttp 0.2 ms, httpx 5.6 ms (httpcore's pool scans every
connection on every event), the SDK 3.5 ms (httpx underneath), litellm 6 ms.

Request shaping stays in ``request.request_params`` so that both paths send the same body.
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from typing import Any

from .prices import Price, model_price, price_of  # noqa: F401 - model_price: its old home
from .types import ROLE_HEADER, STEP_HEADER, Completion, cache_write_tokens, cached_tokens

DEFAULT_BASE = "https://api.openai.com/v1"
PREFIX = "openai/"


class HTTPError(Exception):
    """A 4xx/5xx answer. ``status_code`` and ``response.headers`` are what ``client._classify`` reads."""

    def __init__(self, status_code: int, message: str, response: Any):
        self.status_code, self.response = status_code, response
        super().__init__(message)


class MissingKeyError(Exception):
    """No key for the OpenAI API itself (a local ``--api-base`` needs none)."""


def handles(model: str) -> bool:
    """Whether the lean path serves this model: OpenAI-compatible chat completions."""
    return model.startswith(PREFIX)


class LeanTransport:
    """One pooled ``aiohttp.ClientSession`` per event loop (connections belong to the loop that opened them).

    Each session is closed when its loop shuts down: an async generator per loop holds it, and
    ``asyncio.run`` (or ``loop.shutdown_asyncgens()``) finalises it.
    """

    def __init__(self, *, api_base: str | None, api_key: str | None, timeout: float):
        self.api_base, self.api_key, self.timeout = api_base, api_key, timeout
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, Any]] = \
            weakref.WeakKeyDictionary()
        self._prices: dict[str, Price | None] = {}
        self._resolved: tuple[str, str] | None = None

    async def _session(self) -> Any:
        loop = asyncio.get_running_loop()
        held = self._sessions.get(loop)
        if held is None or held[0].closed:
            import aiohttp

            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30.0),
                timeout=aiohttp.ClientTimeout(total=self.timeout, connect=min(self.timeout, 30.0)))

            async def holder() -> Any:
                try:
                    yield session
                finally:
                    await session.close()

            keeper = holder()
            await keeper.__anext__()
            held = self._sessions[loop] = (session, keeper)
        return held[0]

    def _endpoint(self) -> tuple[str, str]:
        if self._resolved is None:
            self._resolved = self._resolve_endpoint()
        return self._resolved

    def _resolve_endpoint(self) -> tuple[str, str]:
        """The URL and key, from the client's settings or the environment: read once per transport."""
        base = self.api_base or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") \
            or DEFAULT_BASE
        key = self.api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if base == DEFAULT_BASE:
                raise MissingKeyError("Missing credentials: set OPENAI_API_KEY (or pass --api-base for a local "
                                      "OpenAI-compatible server)")
            key = "ncp-no-key"  # local servers rarely check a key
        return base.rstrip("/") + "/chat/completions", key

    async def __call__(self, request: dict[str, Any], body: dict[str, Any]) -> Completion:
        url, key = self._endpoint()
        model = request["model"]
        payload = json.dumps({**body, "model": model[len(PREFIX):]}).encode()
        session = await self._session()
        extra: dict[str, Any] = {}
        if request.get("timeout"):  # a per-call timeout in the request wins over the client's
            import aiohttp

            extra["timeout"] = aiohttp.ClientTimeout(total=float(request["timeout"]))
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", ROLE_HEADER: request["role"]}
        if request.get("step"):
            headers[STEP_HEADER] = request["step"]  # names the auditor step in every output mode
        async with session.post(url, data=payload, headers=headers, **extra) as response:
            raw = await response.read()
            if response.status >= 400:
                raise HTTPError(response.status, _error_message(response.status, raw), _Answer(response.headers))
        try:
            data = json.loads(raw)
            text = data["choices"][0]["message"].get("content") or ""
            finish_reason = data["choices"][0].get("finish_reason")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise HTTPError(502, f"the answer has no choices[0].message: {raw[:300]!r}",
                            _Answer(response.headers)) from None
        usage = data.get("usage") or {}
        if not isinstance(usage, dict):
            usage = {}
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        cached = min(cached_tokens(usage), prompt)
        written = min(cache_write_tokens(usage), prompt - cached)  # a proxy in front of Anthropic reports them
        price = self.price(model)
        return Completion(text=text, model=model, role=request["role"], step=request.get("step"),
                          prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached,
                          cache_write_tokens=written,
                          cost_usd=price.cost(prompt, completion, cached, written) if price else 0.0,
                          finish_reason=finish_reason)

    def price(self, model: str) -> Price | None:
        """The model's list prices from litellm's cost map (``llm/prices.py``), looked up once per model."""
        if model not in self._prices:
            self._prices[model] = price_of(model)
        return self._prices[model]


class _Answer:
    """What an error keeps of the HTTP answer: its headers (Retry-After), readable after the body is."""

    def __init__(self, headers: Any):
        self.headers = {k.lower(): v for k, v in headers.items()}


def _error_message(status: int, raw: bytes) -> str:
    try:
        error = json.loads(raw).get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {status}: {message or raw[:300].decode('utf-8', 'replace')}"
