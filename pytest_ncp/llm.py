"""The one place that talks to litellm: lazy import, retries that honour Retry-After, limits, cost.

Every model call of the project (narrator, player, auditor) goes through ``ModelClient.complete``.
litellm is imported on the first call only: importing it costs seconds, and the pytest plugin is
loaded by every pytest run where it is installed.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import math
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal

Role = Literal["narrator", "player", "auditor", "author"]  # author: drafting specs

ROLE_HEADER = "X-NCP-Role"  # lets a scripted test server (pytest_ncp.testing) answer per role


class ModelError(Exception):
    """A model call failed for infrastructure reasons (after retries). Never a narrator verdict."""

    def __init__(self, message: str, *, role: str | None = None, model: str | None = None,
                 status: int | None = None, attempts: int = 1):
        self.role, self.model, self.status, self.attempts = role, model, status, attempts
        super().__init__(scrub(message))


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    role: str
    step: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    attempts: int = 1
    latency_s: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Usage:
    """Running totals; one per episode, and one per client for the whole run."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, c: Completion) -> None:
        self.calls += 1
        self.prompt_tokens += c.prompt_tokens
        self.completion_tokens += c.completion_tokens
        self.cost_usd += c.cost_usd

    def merge(self, other: Usage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd


# Per-episode usage: every completion made inside an episode's task tree is added to it as well.
current_usage: contextvars.ContextVar[Usage | None] = contextvars.ContextVar("ncp_usage", default=None)
# The running episode's key (``<spec>--r<repeat>``): cassettes keep one file per episode.
current_episode: contextvars.ContextVar[str | None] = contextvars.ContextVar("ncp_episode", default=None)


# --- secrets -------------------------------------------------------------------------------------

# (pattern, replacement): key-shaped tokens go whole; after a header or field name, only the value.
_KEY_PATTERNS = [
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{6,}"), "***"),
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9_\-\.=]{6,}"), r"\1***"),
    (re.compile(r"(?i)((?:api[_-]?key|x-api-key|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{4,}"), r"\1***"),
    # Credentials in URL queries (``?key=AIza...``, ``&token=ghp_...``), whatever their shape.
    (re.compile(r"(?i)([?&;](?:key|api[_-]?key|apikey|token|access[_-]?token|auth|secret|client[_-]?secret|"
                r"password|pass|pwd|sig|signature|code)=)[^&#\s\"'<>]+"), r"\1***"),
    # Well-known key shapes: Google (AIza...), GitHub (ghp_..., github_pat_...), Slack (xox.-...).
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"), "***"),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), "***"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"), "***"),
]


def _secret_values() -> list[str]:
    return [v for k, v in os.environ.items() if v and len(v) >= 6 and re.search(r"(KEY|TOKEN|SECRET)", k)]


def scrub(text: str, extra: tuple[str, ...] = ()) -> str:
    """Remove API keys and auth headers from text that may reach traces, results or errors."""
    for value in (*extra, *_secret_values()):
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    for pattern, replacement in _KEY_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


# --- rate limiting -------------------------------------------------------------------------------


class AdaptiveLimiter:
    """Concurrency bound for one endpoint: halves on 429, creeps back up after sustained success."""

    def __init__(self, limit: int, *, recover_after: int = 8):
        self.max_limit = max(1, limit)
        self.limit = self.max_limit
        self.in_flight = 0
        self._ok_streak = 0
        self._recover_after = recover_after
        self._cond = asyncio.Condition()

    async def __aenter__(self) -> AdaptiveLimiter:
        async with self._cond:
            await self._cond.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        async with self._cond:
            self.in_flight -= 1
            self._cond.notify_all()

    def throttled(self) -> None:
        self._ok_streak = 0
        self.limit = max(1, self.limit // 2)

    async def succeeded(self) -> None:
        self._ok_streak += 1
        if self._ok_streak >= self._recover_after and self.limit < self.max_limit:
            self._ok_streak = 0
            async with self._cond:
                self.limit += 1
                self._cond.notify_all()


# --- the client ----------------------------------------------------------------------------------

Transport = Callable[[dict[str, Any]], Awaitable[Completion]]

CALLS_PER_EPISODE = 5  # in flight at once: four audit steps and the turn played ahead

_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}


@dataclass
class ModelClient:
    """Async chat completions (lean path or litellm), shared by every episode of a run.

    ``api_base`` (``--api-base``) overrides litellm's own environment variables for every role.
    ``transport`` replaces the model call (cassettes use it to record and replay).
    ``lean``: ``openai/...`` models go through one pooled aiohttp session (``openai_compat``) instead
    of litellm, 0.2-0.6 ms of client CPU per call instead of 6-7 ms; other providers always use
    litellm. Set ``NCP_LEAN_CALLS=0`` to send everything through litellm.
    """

    api_base: str | None = None
    api_key: str | None = None
    timeout: float = 120.0
    max_retries: int = 4
    backoff: float = 0.5
    max_backoff: float = 30.0
    concurrency: int = 16
    transport: Transport | None = None
    lean: bool = field(default_factory=lambda: os.environ.get("NCP_LEAN_CALLS", "1") != "0")
    usage: Usage = field(default_factory=Usage)
    _limiters: dict[str, AdaptiveLimiter] = field(default_factory=dict, repr=False)
    _lean_transport: Any = field(default=None, repr=False)

    @property
    def call_limit(self) -> int:
        # Each episode has up to four audit calls in flight at once, plus the next turn's player or
        # narrator call played ahead of that audit (pipelining): five slots per episode.
        return self.concurrency * CALLS_PER_EPISODE

    def limiter(self, model: str) -> AdaptiveLimiter:
        # One limiter per endpoint and event loop: asyncio primitives belong to the loop that made
        # them, and a client may serve several loops in turn (one asyncio.run per hand-written test).
        key = f"{self.api_base or model.split('/', 1)[0]}@{id(asyncio.get_running_loop())}"
        if key not in self._limiters:
            self._limiters[key] = AdaptiveLimiter(self.call_limit)
        return self._limiters[key]

    async def complete(
        self,
        role: Role,
        model: str,
        messages: list[dict[str, Any]],
        *,
        step: str | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
        repeat: int = 0,
    ) -> Completion:
        request: dict[str, Any] = {"role": role, "model": model, "messages": messages, "step": step,
                                   "response_format": response_format, "temperature": temperature,
                                   "repeat": repeat}
        call = self.transport or self.model_call
        limiter = self.limiter(model)
        attempt = 0
        while True:
            attempt += 1
            started = time.monotonic()
            try:
                async with limiter:
                    completion = await asyncio.wait_for(call(request), timeout=self.timeout + 5)
            except Exception as exc:  # noqa: BLE001 - classified below, re-raised as ModelError
                status, retry_after = _classify(exc)
                if status == 429:
                    limiter.throttled()
                retryable = (status in _RETRYABLE_STATUS or status is None and _is_transient(exc)) \
                    and not _missing_key(exc)
                if not retryable or attempt > self.max_retries:
                    raise ModelError(
                        f"{role} call to {model} failed after {attempt} attempt(s): "
                        f"{type(exc).__name__}: {exc}",
                        role=role, model=model, status=status, attempts=attempt,
                    ) from None
                await asyncio.sleep(self._delay(attempt, retry_after))
                continue
            await limiter.succeeded()
            completion = _replace(completion, attempts=attempt, latency_s=time.monotonic() - started)
            self.usage.add(completion)
            episode_usage = current_usage.get()
            if episode_usage is not None:
                episode_usage.add(completion)
            return completion

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_backoff)
        base = min(self.backoff * 2 ** (attempt - 1), self.max_backoff)
        return base * (0.5 + random.random() / 2)

    async def model_call(self, request: dict[str, Any]) -> Completion:
        """One attempt at a request, by the lean path or litellm (the transport cassettes wrap)."""
        if self.lean:
            from .openai_compat import LeanTransport, handles

            if handles(request["model"]):
                if self._lean_transport is None:
                    self._lean_transport = LeanTransport(api_base=self.api_base, api_key=self.api_key,
                                                         timeout=self.timeout)
                return await self._lean_transport(request, request_params(request))
        return await self._litellm_call(request)

    async def _litellm_call(self, request: dict[str, Any]) -> Completion:
        litellm = import_litellm()
        model = request["model"]
        kwargs: dict[str, Any] = {
            **request_params(request),
            "model": model,
            "timeout": self.timeout,
            "num_retries": 0,  # we own the retry loop (litellm's needs tenacity, which it does not install)
            "extra_headers": {ROLE_HEADER: request["role"]},
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
            # Local OpenAI-compatible servers (Ollama, vLLM, test servers) rarely need a key,
            # but the OpenAI client refuses to start without one.
            if self.api_key is None and model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
                kwargs["api_key"] = "ncp-no-key"
        if self.api_key:
            kwargs["api_key"] = self.api_key
        response = await litellm.acompletion(**kwargs)
        text = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        # litellm prices the call itself (from its local cost map); unknown models have no price.
        hidden = getattr(response, "_hidden_params", None) or {}
        cost = float(hidden.get("response_cost") or 0.0)
        return Completion(
            text=text, model=model, role=request["role"], step=request.get("step"),
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=cost,
        )


def request_params(request: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions parameters of a request, as both paths send them (one place to shape requests)."""
    params: dict[str, Any] = {"messages": request["messages"]}
    if request.get("temperature") is not None:
        params["temperature"] = request["temperature"]
    if request.get("response_format") is not None:
        params["response_format"] = request["response_format"]
    return params


def _replace(c: Completion, **changes: Any) -> Completion:
    from dataclasses import replace

    return replace(c, **changes)


def _classify(exc: BaseException) -> tuple[int | None, float | None]:
    """HTTP status and Retry-After seconds of a failed call, when it had them."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return 408, None
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    name = type(exc).__name__
    if status is None:
        status = {"RateLimitError": 429, "Timeout": 408, "InternalServerError": 500,
                  "ServiceUnavailableError": 503, "BadGatewayError": 502}.get(name)
    headers: Any = getattr(exc, "litellm_response_headers", None)
    response = getattr(exc, "response", None)
    if headers is None and response is not None:
        headers = getattr(response, "headers", None)
    return status, _retry_after(headers)


def _retry_after(headers: Any) -> float | None:
    if not headers:
        return None
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
    except Exception:  # noqa: BLE001 - odd header containers
        return None
    if value is None:
        return None
    # A malformed value ("soon", "nan") is treated as absent: the usual backoff applies.
    try:
        seconds = float(value)
        return seconds if math.isfinite(seconds) else None
    except (TypeError, ValueError):
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed is None or parsed.tzinfo is None:
        return None
    return max(0.0, parsed.timestamp() - time.time())


def _missing_key(exc: BaseException) -> bool:
    # The OpenAI client refuses to start without a key; litellm reports that as a server error (500),
    # but no retry can fix a missing setting.
    text = str(exc)
    return "Missing credentials" in text or "api_key client option must be set" in text


def _is_transient(exc: BaseException) -> bool:
    name = type(exc).__name__
    return name in {"APIConnectionError", "Timeout", "ServiceUnavailableError", "InternalServerError",
                    "ConnectError", "ReadTimeout", "RemoteProtocolError",
                    # the lean path's client (aiohttp)
                    "ClientConnectorError", "ClientConnectionError", "ServerDisconnectedError", "ClientOSError",
                    "ClientPayloadError", "ServerTimeoutError"} or isinstance(exc, ConnectionError)


_litellm: Any = None


def import_litellm() -> Any:
    """Import litellm once, with its local cost map so that the import never reaches the network."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LITELLM_LOG", "ERROR")
        import litellm

        litellm.telemetry = False
        litellm.suppress_debug_info = True
        litellm.drop_params = False
        _litellm = litellm
    return _litellm
