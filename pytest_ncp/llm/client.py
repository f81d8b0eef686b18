"""The model client: every model call of the project goes through ``ModelClient.complete``.

Retries that honour Retry-After, per-endpoint limits that back off on 429, deadlines, the
structured-output mode negotiation and cost. The request goes by the lean OpenAI-compatible path
(``openai_compat``) or by litellm (``litellm_path``), both imported on the first call only.
"""

from __future__ import annotations

import asyncio
import collections
import email.utils
import json
import math
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence
from urllib.parse import urlsplit

from ..core.config import DEFAULT_MAX_TOKENS, OUTPUT_MODES, SYSTEM_PROMPT_MODES, RunConfig
from ..core.options import default
from ..core.redact import scrub, url_secrets
from .litellm_path import import_litellm, litellm_call
from .prices import Price, price_of, prompt_token_bound
from .request import CacheBreak, merge_system_prompt, request_params, shape_structured
from .types import Completion, CostCapReached, ModelError, Role, Usage, current_usage

# How many of its own failures a client remembers (each episode needs only the one that ended it).
RAISED_KEPT = 1024


# --- rate limiting -------------------------------------------------------------------------------


class AdaptiveLimiter:
    """Concurrency bound for one endpoint: halves on 429, creeps back up after sustained success."""

    def __init__(self, limit: int, *, recover_after: int = 8):
        self.max_limit = max(1, limit)
        self.limit = self.max_limit
        self.in_flight = 0
        self.waiting = 0
        self._ok_streak = 0
        self._recover_after = recover_after
        self._cond = asyncio.Condition()

    @property
    def saturated(self) -> bool:
        """Every slot taken or someone queued: the endpoint has no room for a retry right now."""
        return self.in_flight >= self.limit or self.waiting > 0

    async def __aenter__(self) -> AdaptiveLimiter:
        async with self._cond:
            self.waiting += 1
            try:
                await self._cond.wait_for(lambda: self.in_flight < self.limit)
            finally:
                self.waiting -= 1
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
_FORMAT_WORDS = ("response_format", "response format", "json_schema", "json_object")


@dataclass
class ModelClient:
    """Async chat completions (lean path or litellm), shared by every episode of a run.

    ``api_base`` (``--api-base``) overrides litellm's own environment variables for every role.
    ``transport`` replaces the model call (cassettes use it to record and replay); whatever the
    transport, the request it gets is already shaped here: ``max_tokens``, the structured-output
    mode's ``response_format`` (or schema in the prompt), merged system prompts and the timeout.
    ``lean``: ``openai/...`` models go through one pooled aiohttp session (``openai_compat``) instead
    of litellm, 0.2-0.6 ms of client CPU per call instead of 6-7 ms; other providers always use
    litellm. Set ``NCP_LEAN_CALLS=0`` to send everything through litellm.

    ``timeout`` bounds one HTTP request; ``deadline`` (default 2.5 x timeout) bounds a call with all its
    retries, counted from the moment it gets an endpoint slot. A timed-out request is retried at most
    once, and not while other calls wait for the endpoint: a one-request-at-a-time server is most
    likely still generating the abandoned answer. ``concurrency_per_endpoint`` sets the endpoint's
    limiter (default: five calls per episode in flight).

    ``max_cost`` (``--max-cost``, US dollars at the cost map's list prices) caps what the client's calls may
    cost: a request starts only if what the calls cost so far, plus the most each request in flight may cost
    (its prompt counted as UTF-8 bytes, its completion at ``max_tokens``: ``llm/prices.py``), plus its own
    most, stays within the cap. Otherwise it raises ``CostCapReached``, and so does every call after it: the
    episodes end as ``budget``. A model with no price cannot be capped: its calls raise ``ModelError``.
    """

    api_base: str | None = None
    api_key: str | None = None
    timeout: float = default("timeout")  # the run options' defaults (core/options.py)
    deadline: float | None = None
    max_retries: int = 4
    backoff: float = 0.5
    max_backoff: float = 30.0
    concurrency: int = default("concurrency")
    concurrency_per_endpoint: int | None = None
    max_tokens: dict[str, int] = field(default_factory=dict)  # role -> limit, over DEFAULT_MAX_TOKENS
    structured_output: str = default("structured-output")
    system_prompt: str = default("system-prompt")
    transport: Transport | None = None
    lean: bool = field(default_factory=lambda: os.environ.get("NCP_LEAN_CALLS", "1") != "0")
    usage: Usage = field(default_factory=Usage)
    max_cost: float | None = None
    _spent: float = field(default=0.0, repr=False)      # what the calls cost so far (for the cap)
    _reserved: float = field(default=0.0, repr=False)   # the most the requests in flight may cost
    _in_flight: int = field(default=0, repr=False)
    _cap_reached: str | None = field(default=None, repr=False)  # why calls stopped, once they did
    _prices: dict[str, Price | None] = field(default_factory=dict, repr=False)
    _limiters: dict[str, AdaptiveLimiter] = field(default_factory=dict, repr=False)
    _lean_transport: Any = field(default=None, repr=False)
    _modes: dict[str, str] = field(default_factory=dict, repr=False)          # endpoint|model -> mode
    _mode_notes: dict[str, list[str]] = field(default_factory=dict, repr=False)  # why modes were skipped
    _refused_modes: dict[str, set[str]] = field(default_factory=dict, repr=False)  # endpoint|model -> refused
    # The failures this client raised, by identity (exceptions take no weak references): an episode tells an
    # outage or a cost cap that passed through a narrator's code from one the narrator raised itself.
    _raised: collections.deque[BaseException] = field(
        default_factory=lambda: collections.deque(maxlen=RAISED_KEPT), repr=False)

    @classmethod
    def from_config(cls, config: RunConfig, **host: Any) -> ModelClient:
        """The one way to build a run's client: every model-call setting of ``config`` reaches it.

        ``host`` holds what a caller decides itself, not the run (``ncp doctor``'s quick retries, a
        fixture's endpoint): anything else would be a setting the option table does not know."""
        settings: dict[str, Any] = {
            "api_base": config.api_base, "timeout": config.timeout, "deadline": config.deadline,
            "max_cost": config.max_cost, "max_retries": config.max_retries, "concurrency": config.concurrency,
            "concurrency_per_endpoint": config.concurrency_per_endpoint, "max_tokens": dict(config.max_tokens),
            "structured_output": config.structured_output, "system_prompt": config.system_prompt,
        }
        return cls(**{**settings, **host})

    def __post_init__(self) -> None:
        if self.structured_output not in OUTPUT_MODES:
            raise ValueError(f"unknown structured-output mode {self.structured_output!r}; "
                             f"valid: {', '.join(OUTPUT_MODES)}")
        if self.system_prompt not in SYSTEM_PROMPT_MODES:
            raise ValueError(f"unknown system-prompt mode {self.system_prompt!r}; "
                             f"valid: {', '.join(SYSTEM_PROMPT_MODES)}")

    @property
    def call_limit(self) -> int:
        if self.concurrency_per_endpoint:
            return self.concurrency_per_endpoint
        # Each episode has up to four audit calls in flight at once, plus the next turn's player or
        # narrator call played ahead of that audit (pipelining): five slots per episode.
        return self.concurrency * CALLS_PER_EPISODE

    @property
    def call_deadline(self) -> float:
        return self.deadline if self.deadline is not None else self.timeout * 2.5

    def max_tokens_for(self, role: str) -> int:
        return int(self.max_tokens.get(role, DEFAULT_MAX_TOKENS.get(role, DEFAULT_MAX_TOKENS["narrator"])))

    def endpoint(self, model: str) -> str:
        """Where calls for ``model`` go, as ``host:port`` (never a path, query or credentials)."""
        return endpoint_label(self.api_base, model)

    def limiter(self, model: str) -> AdaptiveLimiter:
        # One limiter per endpoint and event loop: asyncio primitives belong to the loop that made
        # them, and a client may serve several loops in turn (one asyncio.run per hand-written test).
        key = f"{self.api_base or model.split('/', 1)[0]}@{id(asyncio.get_running_loop())}"
        if key not in self._limiters:
            self._limiters[key] = AdaptiveLimiter(self.call_limit)
        return self._limiters[key]

    def output_modes(self) -> dict[str, str]:
        """The structured-output mode chosen per ``endpoint|model`` so far (what results.json records)."""
        return dict(self._modes)

    def mode_notes(self, model: str) -> list[str]:
        return list(self._mode_notes.get(self._mode_key(model), []))

    def _mode_key(self, model: str) -> str:
        return f"{self.endpoint(model)}|{model}"

    # --- the cost cap (--max-cost) ---------------------------------------------------------------
    @property
    def spent_usd(self) -> float:
        """What this client's calls have cost so far (list prices)."""
        return self._spent

    @property
    def cap_reached(self) -> str | None:
        """Why the cost cap stopped calls (None while it has not)."""
        return self._cap_reached

    def _price(self, model: str) -> Price | None:
        if model not in self._prices:
            self._prices[model] = price_of(model)
        return self._prices[model]

    async def _reserve(self, request: dict[str, Any]) -> float:
        """Reserve the most this request may cost before it starts, or raise ``CostCapReached``.

        While the calls in flight hold too much of the cap, the request waits for them (they usually cost far
        less than their bound); once none is in flight and it still would not fit, the cap is reached: this
        call and every later one is refused. The check and the reservation are one synchronous step, and so
        are a call's release and its cost (``_release``): ``spent + reserved`` never underestimates."""
        if self.max_cost is None:
            return 0.0
        price = self._price(request["model"])
        if price is None:  # _call refuses unpriced models under a cap before the first attempt
            raise ModelError(f"{request['model']} has no price", role=request["role"], model=request["model"])
        prompt = prompt_token_bound(request["messages"])
        if request.get("response_format"):
            prompt += len(json.dumps(request["response_format"]).encode("utf-8"))  # the schema is prompt too
        most = price.bound(prompt, int(request.get("max_tokens") or 0))
        while True:
            if self._cap_reached is not None:
                raise CostCapReached(self._cap_reached)
            if self._spent + self._reserved + most <= self.max_cost:
                self._reserved += most
                self._in_flight += 1
                return most
            if self._in_flight == 0:
                self._cap_reached = (
                    f"cost cap of ${self.max_cost:.4f} reached (--max-cost): ${self._spent:.4f} spent, and the next "
                    f"{request['role']} call may cost up to ${most:.4f}")
                raise CostCapReached(self._cap_reached)
            await asyncio.sleep(0.005)  # near the cap only: the calls in flight release their reservations

    def _release(self, reserved: float, completion: Completion | None, abandoned: bool = False) -> None:
        """A call's reservation ends: what it cost is spent. A call abandoned while out (cancelled: a turn played
        ahead and discarded, a refused input's narration; timed out) may still be billed for what it generated,
        so its whole reservation counts as spent: the cap stays an upper bound."""
        if self.max_cost is None:
            return
        self._reserved = max(0.0, self._reserved - reserved)
        self._in_flight -= 1
        if completion is not None:
            self._spent += completion.cost_usd
        elif abandoned:
            self._spent += reserved

    def raised(self, exc: BaseException) -> bool:
        """Whether this very exception object was raised by this client (a ``ModelError`` or
        ``CostCapReached`` of one of its calls), not merely one of the same class."""
        return any(e is exc for e in self._raised)

    async def complete(self, role: Role, model: str, messages: list[dict[str, Any]], *, step: str | None = None,
                       response_format: dict[str, Any] | None = None, temperature: float | None = None,
                       repeat: int = 0, max_tokens: int | None = None, output_mode: str | None = None,
                       cache_breaks: Sequence[CacheBreak] = ()) -> Completion:
        """One chat completion (see ``_complete``); its failure is remembered as this client's own."""
        try:
            return await self._complete(role, model, messages, step=step, response_format=response_format,
                                        temperature=temperature, repeat=repeat, max_tokens=max_tokens,
                                        output_mode=output_mode, cache_breaks=cache_breaks)
        except (ModelError, CostCapReached) as exc:
            self._raised.append(exc)
            raise

    async def _complete(
        self,
        role: Role,
        model: str,
        messages: list[dict[str, Any]],
        *,
        step: str | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
        repeat: int = 0,
        max_tokens: int | None = None,
        output_mode: str | None = None,
        cache_breaks: Sequence[CacheBreak] = (),
    ) -> Completion:
        """One chat completion. ``response_format`` is the OpenAI json_schema form; how it is actually
        asked for depends on the structured-output mode (``output_mode`` overrides the client's).
        ``cache_breaks``: where the prompt's parts that change less often end (``request.CacheBreak``); a provider
        that caches only marked prefixes (Anthropic) gets ``cache_control`` breakpoints there."""
        if self.system_prompt == "merge":
            messages = merge_system_prompt(messages)
            cache_breaks = ()  # the offsets were into the messages as they were
        request: dict[str, Any] = {"role": role, "model": model, "messages": messages, "step": step,
                                   "response_format": None, "temperature": temperature, "repeat": repeat,
                                   "max_tokens": max_tokens if max_tokens is not None else self.max_tokens_for(role)}
        if cache_breaks:
            request["cache_breaks"] = tuple(cache_breaks)
        if response_format is None:
            return await self._call(request, None)
        mode = output_mode or self.structured_output
        if mode != "auto":
            return await self._call(shape_structured(request, response_format, mode), mode)
        key = self._mode_key(model)
        known = self._modes.get(key)
        if known is not None:
            return await self._call(shape_structured(request, response_format, known), known)
        return await self._first_mode(key, request, response_format)

    async def _first_mode(self, key: str, request: dict[str, Any], response_format: dict[str, Any]) -> Completion:
        """A structured call while the mode of ``key`` is unknown: the best mode this endpoint and model has not
        refused, and the next one only on a refusal; the first accepted is remembered.

        The first calls of a run all go at once in the preferred mode (``json_schema``), which the hosted APIs
        takes: no probe call for the others to wait on, so a run starts one round trip sooner. A server that
        refuses it refuses each call of that first wave once (a refusal is an immediate 4xx/5xx); every call
        after it uses the mode found. A call that failed for another reason (timeout, 5xx) decides nothing."""
        refused = self._refused_modes.setdefault(key, set())
        tried: list[str] = []

        def shaped() -> tuple[dict[str, Any], str]:
            # Chosen once the call has its endpoint slot: a call that queued behind others (a small
            # --concurrency-per-endpoint) takes the mode they found instead of being refused in turn.
            mode = self._modes.get(key) or next(m for m in OUTPUT_MODES[1:] if m not in refused)
            tried.append(mode)
            return shape_structured(request, response_format, mode), mode

        while True:
            try:
                completion = await self._call(request, None, shaped)
            except ModelError as exc:
                candidate = tried[-1] if tried else OUTPUT_MODES[-1]
                # The prompt mode sends no response_format, so nothing can refuse it: the loop ends there.
                if not exc.rejects_format or candidate == OUTPUT_MODES[-1]:
                    raise
                if candidate not in refused:
                    refused.add(candidate)
                    self._mode_notes.setdefault(key, []).append(f"{candidate} rejected: {brief_error(str(exc))}")
                continue
            self._modes.setdefault(key, tried[-1])
            return completion

    def _through_litellm(self, model: str) -> bool:
        """Whether a call for ``model`` goes through litellm (directly or under a cassette)."""
        if self.transport is not None and getattr(self.transport, "inner", None) != self.model_call:
            return False
        return not (self.lean and _lean_handles(model))

    async def _call(self, request: dict[str, Any], mode: str | None,
                    shaped: Callable[[], tuple[dict[str, Any], str]] | None = None) -> Completion:
        """One call with its retries. ``shaped`` (a structured call whose mode is not known yet) gives the request
        and its mode once the call has its endpoint slot, again at each attempt."""
        if self.max_cost is not None and self._price(request["model"]) is None:
            raise ModelError(f"{request['role']} call to {request['model']} refused: it has no price in litellm's "
                             "cost map, so --max-cost cannot bound what it costs", role=request["role"],
                             model=request["model"])
        if self._through_litellm(request["model"]):
            import_litellm()  # seconds on a cold start: never counted against a request's timeout
        call = self.transport or self.model_call
        role, model = request["role"], request["model"]
        where = self.endpoint(model)
        limiter = self.limiter(model)
        deadline_at: float | None = None
        attempt = timeouts = 0
        while True:
            attempt += 1
            started = time.monotonic()
            try:
                async with limiter:
                    if shaped is not None:
                        request, mode = shaped()
                    # The cap: reserved once the request has its slot, before its deadline starts counting.
                    reserved = await self._reserve(request)
                    now = time.monotonic()
                    deadline_at = deadline_at or now + self.call_deadline
                    per_try = max(0.1, min(self.timeout, deadline_at - now))
                    request["timeout"] = per_try
                    started = now
                    answered: Completion | None = None
                    abandoned = True  # cancelled or timed out while the request was out: it may still be billed
                    try:
                        answered = await asyncio.wait_for(call(request), timeout=per_try + 2)
                        abandoned = False
                    except asyncio.TimeoutError:
                        raise
                    except Exception:
                        abandoned = False  # the endpoint answered with an error: nothing generated, nothing billed
                        raise
                    finally:
                        self._release(reserved, answered, abandoned)  # and what it cost, with no await in between
                    completion = answered
            except CostCapReached:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below, re-raised as ModelError
                status, retry_after = _classify(exc)
                timed_out = _timed_out(exc)
                if status == 429:
                    limiter.throttled()
                rejects_format = mode in ("json_schema", "json_object") and _names_format(exc, status)
                retryable = (status in _RETRYABLE_STATUS or status is None and _is_transient(exc)) \
                    and not _missing_key(exc) and not rejects_format
                delay = self._delay(attempt, retry_after)
                why = ""
                if timed_out:
                    timeouts += 1
                    if timeouts > 1:
                        retryable, why = False, " (a timed-out request is retried once at most)"
                    elif limiter.saturated:
                        retryable, why = False, " (not retried: other calls are waiting for this endpoint)"
                out_of_time = deadline_at is not None and time.monotonic() + delay >= deadline_at
                if retryable and out_of_time and attempt <= self.max_retries:
                    retryable, why = False, f" (call deadline of {self.call_deadline:g}s reached)"
                if not retryable or attempt > self.max_retries:
                    raise ModelError(
                        # An HTTP library's message may echo the URL or the key: scrubbed with both.
                        scrub(f"{role} call to {model} failed after {attempt} attempt(s) at {where}{why}: "
                              f"{_describe_failure(exc, where, request.get('timeout'))}",
                              extra=(self.api_key, *url_secrets(self.api_base))),
                        role=role, model=model, status=status, attempts=attempt, endpoint=where,
                        rejects_format=rejects_format,
                    ) from None
                await asyncio.sleep(delay)
                continue
            await limiter.succeeded()
            completion = _replace(completion, attempts=attempt, latency_s=time.monotonic() - started,
                                  max_tokens=request.get("max_tokens"), output_mode=mode)
            self.usage.add(completion)
            episode_usage = current_usage.get()
            if episode_usage is not None:
                episode_usage.add(completion)
            return completion

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_backoff)
        base: float = min(self.backoff * 2 ** (attempt - 1), self.max_backoff)
        return base * (0.5 + random.random() / 2)

    async def model_call(self, request: dict[str, Any]) -> Completion:
        """One attempt at a request, by the lean path or litellm (the transport cassettes wrap)."""
        if self.lean and _lean_handles(request["model"]):
            if self._lean_transport is None:
                from .openai_compat import LeanTransport

                self._lean_transport = LeanTransport(api_base=self.api_base, api_key=self.api_key,
                                                     timeout=self.timeout)
            completion: Completion = await self._lean_transport(request, request_params(request))
            return completion
        return await self._litellm_call(request)

    async def _litellm_call(self, request: dict[str, Any]) -> Completion:
        return await litellm_call(request, api_base=self.api_base, api_key=self.api_key, timeout=self.timeout)


def _lean_handles(model: str) -> bool:
    """Whether the lean path serves ``model`` (``openai_compat.handles``, without importing it per call)."""
    return model.startswith("openai/")


def endpoint_label(api_base: str | None, model: str) -> str:
    """``host:port`` of the endpoint a model is reached at; never credentials, paths or queries."""
    base = api_base
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    if not base and provider == "openai":
        base = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or "https://api.openai.com"
    if not base and provider in ("ollama", "ollama_chat"):
        base = os.environ.get("OLLAMA_API_BASE") or "http://localhost:11434"
    if not base:
        return provider
    parts = urlsplit(base if "://" in base else f"http://{base}")
    host = parts.hostname or "?"
    port: int | str
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = "?"
    return f"{host}:{port}"


def brief_error(message: str, limit: int = 240) -> str:
    """A ModelError message on one line, from the server's own words on (litellm's class-name chatter
    and our 'call to ... at host:port' prefix dropped)."""
    text = " ".join(message.split())
    if " failed after " in text and ": " in text:
        text = text.split(": ", 1)[1]  # after "... attempt(s) at host:port"
    text = text.rsplit("Exception - ", 1)[-1]
    text = re.sub(r"^\w+Error: (?=HTTP \d{3}: )", "", text)  # the lean path's error class before its HTTP status
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


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


def _timed_out(exc: BaseException) -> bool:
    return isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or type(exc).__name__ in (
        "Timeout", "APITimeoutError", "ReadTimeout", "TimeoutException", "ServerTimeoutError")


def _names_format(exc: BaseException, status: int | None) -> bool:
    """A 4xx/5xx rejection whose message names the response format: the same request fails every time."""
    if status is None or status < 400 or status in (408, 429):
        return False
    text = str(exc).lower()
    return any(word in text for word in _FORMAT_WORDS)


def _is_connection_failure(exc: BaseException) -> bool:
    text = str(exc)
    return type(exc).__name__ in ("APIConnectionError", "ConnectError", "ConnectionRefusedError", "ClientConnectorError",
                                  "ClientConnectionError", "ServerDisconnectedError", "ClientOSError") \
        or isinstance(exc, ConnectionError) or "Connection error" in text or "Connection refused" in text \
        or "Cannot connect" in text


def _describe_failure(exc: BaseException, where: str, timeout: float | None) -> str:
    if _timed_out(exc):
        return f"no answer within {timeout:g}s (--timeout) from {where}" if timeout else f"timed out ({where})"
    if _is_connection_failure(exc):
        return f"cannot connect to {where} ({type(exc).__name__}: {_first_line(str(exc))})"
    return f"{type(exc).__name__}: {exc}"


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


class EndpointError(Exception):
    """``GET /models`` failed: an HTTP status, an unreachable endpoint (``reason``), or an answer that is not JSON."""

    def __init__(self, reason: Any, *, status: int | None = None, not_json: bool = False):
        self.reason, self.status, self.not_json = reason, status, not_json
        super().__init__(str(reason))


def _without_userinfo(url: str) -> tuple[str, str | None]:
    """``http://user:pass@host/v1`` -> (``http://host/v1``, base64 of ``user:pass``); urllib would take the
    credentials for part of the host name."""
    import base64
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.username is None or parts.hostname is None:
        return url, None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = host + (f":{parts.port}" if parts.port else "")
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return urlunsplit(parts._replace(netloc=netloc)), base64.b64encode(pair.encode("utf-8")).decode("ascii")


def get_models(base: str, *, api_key: str | None, timeout: float = 10) -> Any:
    """The JSON answer of an OpenAI-compatible ``GET {base}/models`` (``ncp doctor``'s first check)."""
    import json
    import urllib.error
    import urllib.request

    base, basic = _without_userinfo(base)
    request = urllib.request.Request(base.rstrip("/") + "/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    elif basic:  # credentials in the URL (http://user:pass@host/v1), sent as the model calls send them
        request.add_header("Authorization", f"Basic {basic}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the user's own endpoint
            data = json.loads(response.read().decode("utf-8") or "{}")
    except urllib.error.HTTPError as exc:
        raise EndpointError(exc.reason, status=exc.code) from None
    except (urllib.error.URLError, OSError) as exc:
        raise EndpointError(getattr(exc, "reason", exc)) from None
    except ValueError as exc:
        raise EndpointError(exc, not_json=True) from None
    return data
