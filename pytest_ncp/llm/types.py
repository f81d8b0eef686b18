"""What a model call returns and how it fails: plain data every layer above the client may hold."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, TypeVar

from ..core.redact import scrub

Role = Literal["narrator", "player", "auditor", "author"]  # author: drafting specs

ROLE_HEADER = "X-NCP-Role"  # lets a scripted test server (pytest_ncp.testing) answer per role
STEP_HEADER = "X-NCP-Step"  # the auditor step, also when no json_schema names it (json_object / prompt modes)


class ModelError(Exception):
    """A model call failed for infrastructure reasons (after retries). Never a narrator verdict."""

    def __init__(self, message: str, *, role: str | None = None, model: str | None = None,
                 status: int | None = None, attempts: int = 1, endpoint: str | None = None,
                 rejects_format: bool = False):
        self.role, self.model, self.status, self.attempts = role, model, status, attempts
        self.endpoint = endpoint
        # The server refused the request because of its response_format (a deterministic rejection).
        self.rejects_format = rejects_format
        super().__init__(scrub(message))


class CostCapReached(Exception):
    """``--max-cost``: the call was not made, because it could have taken the run's spending past the cap.

    Not a ModelError: an episode it stops ends as ``budget`` (right-censored, never the narrator's failure,
    never an unknown outcome counted against the error budget)."""


E = TypeVar("E", bound=BaseException)


def in_chain(exc: BaseException, kind: type[E]) -> E | None:
    """The exception of type ``kind`` in ``exc``'s chain of causes, if any: a ``ModelError`` or a
    ``CostCapReached`` also when a narrator (or a gather) wrapped it in an exception of its own."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    role: str
    step: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached_tokens: int = 0             # of the prompt tokens, those a provider's prompt cache served
    cache_write_tokens: int = 0        # of the prompt tokens, those written to a provider's cache (Anthropic)
    attempts: int = 1
    latency_s: float = 0.0
    finish_reason: str | None = None   # "length": the answer was cut by max_tokens
    max_tokens: int | None = None
    output_mode: str | None = None     # structured-output mode of the call (None: plain text)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


@dataclass
class Usage:
    """Running totals; one per episode, and one per client for the whole run."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached_tokens: int = 0  # prompt tokens served from a provider's prompt cache
    cache_write_tokens: int = 0  # prompt tokens written to a provider's prompt cache (billed at its write rate)
    truncated: list[dict[str, Any]] = field(default_factory=list)  # calls cut by max_tokens
    output_modes: dict[str, str] = field(default_factory=dict)     # model -> structured-output mode used

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, c: Completion) -> None:
        self.calls += 1
        self.prompt_tokens += c.prompt_tokens
        self.completion_tokens += c.completion_tokens
        self.cost_usd += c.cost_usd
        self.cached_tokens += c.cached_tokens
        self.cache_write_tokens += c.cache_write_tokens
        if c.truncated:
            self.truncated.append({"role": c.role, "step": c.step, "model": c.model, "max_tokens": c.max_tokens,
                                   "completion_tokens": c.completion_tokens})
        if c.output_mode:
            self.output_modes[c.model] = c.output_mode

    def merge(self, other: Usage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd
        self.cached_tokens += other.cached_tokens
        self.cache_write_tokens += other.cache_write_tokens

    @property
    def cached_share(self) -> float | None:
        """Share of the prompt tokens a provider's prompt cache served; None before any prompt token."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None


def cached_tokens(usage: Any) -> int:
    """Prompt tokens a provider's cache served, from a ``usage`` block (a dict, or litellm's Usage object).

    OpenAI (and litellm, which maps Anthropic's ``cache_read_input_tokens``, DeepSeek's
    ``prompt_cache_hit_tokens`` and Gemini's cached content tokens there): ``prompt_tokens_details.cached_tokens``;
    the raw Anthropic and DeepSeek fields when a server sends them as they are."""
    def get(obj: Any, key: str) -> Any:
        return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)

    details = get(usage, "prompt_tokens_details")
    for value in (get(details, "cached_tokens") if details is not None else None,
                  get(usage, "cache_read_input_tokens"), get(usage, "prompt_cache_hit_tokens")):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return int(value)
    return 0


def cache_write_tokens(usage: Any) -> int:
    """Prompt tokens written to a provider's cache, from a ``usage`` block: Anthropic's
    ``cache_creation_input_tokens`` (litellm keeps it, and copies it to ``prompt_tokens_details``)."""
    def get(obj: Any, key: str) -> Any:
        return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)

    details = get(usage, "prompt_tokens_details")
    for value in (get(usage, "cache_creation_input_tokens"),
                  get(details, "cache_write_tokens") if details is not None else None):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return int(value)
    return 0


# Per-episode usage: every completion made inside an episode's task tree is added to it as well.
current_usage: contextvars.ContextVar[Usage | None] = contextvars.ContextVar("ncp_usage", default=None)
# The running episode's key (``<spec>--r<repeat>``): cassettes keep one file per episode.
current_episode: contextvars.ContextVar[str | None] = contextvars.ContextVar("ncp_episode", default=None)
