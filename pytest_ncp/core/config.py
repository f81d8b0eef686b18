"""Run settings as plain data: light to import (the pytest plugin resolves them at configure time)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

# The audit prompts' version (pytest_ncp/prompts/*.j2): bump it whenever a template's meaning changes.
PROMPT_VERSION = "ncp-prompts/4"  # 2: the trajectory step is told when the trigger already happened; 3: quotes
# and evidence must be substantial verbatim spans, the confirmation step sees the trajectory; 4: injection-
# hardened data blocks (per-call delimiters, tags neutralised, the narration shown as a person reads it),
# one system message for every audit step, and the story state first, byte for byte the same in every
# step of a turn (provider prompt caches), facts the story added dated by turn

PLAYER_KINDS: tuple[str, ...] = ("scripted", "adversarial", "natural")
DEFAULT_AUDITOR_MODEL = "openai/gpt-4o-mini"
# What an episode's outcome depends on: ``--resume`` keeps an episode only when these are unchanged.
# (Endpoint, concurrency, timeouts and cassettes change how a run is served, not what it measures.)
FINGERPRINT_FIELDS: tuple[str, ...] = ("narrator", "narrator_model", "player", "player_model", "auditor_model",
                                       "max_turns", "prompt_version")

ROLES: tuple[str, ...] = ("narrator", "player", "auditor", "author")  # author: drafting specs
# Every call is bounded: a model that never stops (a base model, a chat template that lost its stop
# token) would otherwise generate until its context is full. Per role, overridable (--max-tokens ROLE=N).
DEFAULT_MAX_TOKENS: dict[str, int] = {"narrator": 600, "player": 150, "auditor": 1024, "author": 4096}
# A narrator response longer than this is the narrator's error, before any audit call (--max-response-chars):
# about 2,000 tokens, over three times the built-in narrator's 600-token limit, well inside any auditor's window.
DEFAULT_MAX_RESPONSE_CHARS = 8000
# How structured (auditor, spec-drafting) answers are asked for. ``auto`` tries the others in this
# order, once per endpoint and model, moving on only when the server rejects the response format.
OUTPUT_MODES: tuple[str, ...] = ("auto", "json_schema", "json_object", "prompt")
# ``merge`` folds system prompts into the first user message, for chat templates that drop them.
SYSTEM_PROMPT_MODES: tuple[str, ...] = ("keep", "merge")
# Record / replay of model calls (``llm/cassette.py`` says what each mode does); pytest-recording's names.
RECORD_MODES: tuple[str, ...] = ("none", "once", "new_episodes", "all")


def parse_max_tokens(items: list[str] | tuple[str, ...] | str | None) -> dict[str, int]:
    """``["narrator=300", "auditor=800,player=100"]`` -> ``{"narrator": 300, ...}``; ValueError says what is valid."""
    if not items:
        return {}
    if isinstance(items, str):
        items = [items]
    limits: dict[str, int] = {}
    for item in items:
        for part in (p.strip() for p in str(item).replace(" ", ",").split(",")):
            if not part:
                continue
            role, sep, number = part.partition("=")
            if not sep or role not in ROLES:
                raise ValueError(f"max tokens {part!r}: expected ROLE=N with ROLE one of {', '.join(ROLES)}")
            try:
                limits[role] = int(number)
            except ValueError:
                raise ValueError(f"max tokens {part!r}: N must be a whole number >= 1") from None
            if limits[role] < 1:
                raise ValueError(f"max tokens {part!r}: N must be a whole number >= 1")
    return limits


SCHEDULE_FIELDS: tuple[str, ...] = ("pipeline", "shard")


@dataclass(frozen=True)
class Shard:
    """One slice of a run's episodes (``--shard i/n``); ``engine/shards.py`` says how slices are cut and merged."""

    index: int  # 1-based, as CI matrices count
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``i/n`` with 1 <= i <= n; the message says what is expected."""
        left, sep, right = str(text).partition("/")
        try:
            index, count = int(left), int(right)
        except ValueError:
            index = count = 0
        if not sep or count < 1 or not 1 <= index <= count:
            raise ValueError(f"--shard {text!r}: expected i/n with 1 <= i <= n (e.g. 1/4 ... 4/4)")
        return cls(index, count)

    def select(self, jobs: Sequence[tuple[Any, int]]) -> list[tuple[Any, int]]:
        """This shard's share of ``(spec, repeat)`` jobs, in the order given."""
        def ident(job: tuple[Any, int]) -> tuple[str, int]:
            spec, repeat = job
            return (getattr(spec, "id", spec), repeat)

        ordered = sorted(jobs, key=ident)
        mine = {ident(job) for k, job in enumerate(ordered) if k % self.count == self.index - 1}
        return [job for job in jobs if ident(job) in mine]

    def to_dict(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass
class RunConfig:
    """Every setting of a run, as plain strings and numbers (serialisable, shared with pytest-xdist)."""

    narrator: str | None = None
    narrator_model: str | None = None
    player: str = "scripted"
    player_model: str | None = None
    auditor_model: str = DEFAULT_AUDITOR_MODEL
    api_base: str | None = None
    max_turns: int = 100
    repeats: int = 1
    concurrency: int = 16
    timeout: float = 120.0           # seconds per model request
    deadline: float | None = None    # seconds per model call with its retries (default 2.5 x timeout)
    max_retries: int = 4
    concurrency_per_endpoint: int | None = None  # 1 for servers that answer one request at a time
    max_tokens: dict[str, int] = field(default_factory=dict)  # role -> limit over DEFAULT_MAX_TOKENS
    structured_output: str = "auto"  # one of OUTPUT_MODES
    system_prompt: str = "keep"      # one of SYSTEM_PROMPT_MODES
    survival_turn: int = 20
    record_mode: str | None = None  # none | once | new_episodes | all; None: cassettes off
    cassettes: str | None = None    # directory of cassettes
    demo: bool = False              # every model is the bundled scripted server: figures judge no model
    # How episodes are scheduled, never what they produce: left out of to_dict (results.json's config)
    # so that runs differing only here compare, merge and resume as the same configuration.
    pipeline: bool = True           # play turn t+1 while turn t is audited (--no-pipeline: sequential)
    shard: str | None = None        # "i/n": run only this slice of the episodes (results.json says which)

    def validate(self) -> list[str]:
        problems = []
        if self.player not in PLAYER_KINDS:
            problems.append(f"unknown player {self.player!r}; valid: {', '.join(PLAYER_KINDS)}")
        if self.player in ("adversarial", "natural") and not self.player_model:
            problems.append(f"the {self.player} player needs a model: set the player model "
                            "(e.g. openai/gpt-4o-mini)")
        if self.record_mode is not None:
            if self.record_mode not in RECORD_MODES:
                problems.append(f"unknown record mode {self.record_mode!r}; valid: {', '.join(RECORD_MODES)}")
            if not self.cassettes:
                problems.append("a record mode needs a cassette directory (--cassettes DIR)")
        if self.shard is not None:
            try:
                Shard.parse(self.shard)
            except ValueError as exc:
                problems.append(str(exc))
        for name in ("max_turns", "repeats", "concurrency"):
            if int(getattr(self, name)) < 1:
                problems.append(f"{name} must be at least 1 (got {getattr(self, name)})")
        if self.concurrency_per_endpoint is not None and self.concurrency_per_endpoint < 1:
            problems.append(f"concurrency per endpoint must be at least 1 (got {self.concurrency_per_endpoint})")
        if not self.timeout > 0:
            problems.append(f"timeout must be more than 0 seconds (got {self.timeout})")
        if self.deadline is not None and self.deadline < self.timeout:
            problems.append(f"deadline ({self.deadline}s) must be at least the timeout ({self.timeout}s)")
        if self.structured_output not in OUTPUT_MODES:
            problems.append(f"unknown structured-output mode {self.structured_output!r}; valid: {', '.join(OUTPUT_MODES)}")
        if self.system_prompt not in SYSTEM_PROMPT_MODES:
            problems.append(f"unknown system-prompt mode {self.system_prompt!r}; valid: {', '.join(SYSTEM_PROMPT_MODES)}")
        bad = [r for r in self.max_tokens if r not in ROLES]
        if bad:
            problems.append(f"max tokens for unknown role(s) {', '.join(bad)}; valid: {', '.join(ROLES)}")
        return problems

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments of the run's ``ModelClient``."""
        return {"api_base": self.api_base, "timeout": self.timeout, "deadline": self.deadline,
                "max_retries": self.max_retries, "concurrency": self.concurrency,
                "concurrency_per_endpoint": self.concurrency_per_endpoint, "max_tokens": dict(self.max_tokens),
                "structured_output": self.structured_output, "system_prompt": self.system_prompt}

    def to_dict(self) -> dict[str, Any]:
        from .redact import scrub

        data = asdict(self)
        for name in SCHEDULE_FIELDS:
            data.pop(name, None)
        data["api_base"] = scrub(self.api_base) if self.api_base else None
        data["prompt_version"] = PROMPT_VERSION
        data["models"] = {"narrator": self.narrator_model, "player": self.player_model,
                          "auditor": self.auditor_model}
        data["max_tokens"] = {**DEFAULT_MAX_TOKENS, **self.max_tokens}
        data["fingerprint"] = config_fingerprint(data)
        return data


def config_fingerprint(config: dict[str, Any]) -> str:
    """Hash of the settings an episode's outcome depends on (``FINGERPRINT_FIELDS``)."""
    import hashlib
    import json

    judged = {k: config.get(k) for k in FINGERPRINT_FIELDS}
    return hashlib.sha256(json.dumps(judged, sort_keys=True).encode()).hexdigest()[:16]


def episode_key(spec_id: str, repeat: int) -> str:
    """An episode in file names and dict keys: ``caligari--r0`` (traces/caligari--r0.jsonl)."""
    return f"{spec_id}--r{repeat}"


def episode_name(spec_id: str, repeat: int) -> str:
    """An episode as people read it in command output and messages: ``caligari[r0]``."""
    return f"{spec_id}[r{repeat}]"
