"""Run settings as plain data: light to import (the pytest plugin resolves them at configure time)."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from .options import (  # noqa: F401 - re-exported: the option values have always been importable from here
    CONFIG_OPTIONS, DEFAULT_AUDITOR_MODEL, DEFAULT_MAX_RESPONSE_CHARS, DEFAULT_MAX_TOKENS, DEFAULT_SURVIVAL_TURN,
    DEMO_MODELS, FINGERPRINT, FLAG, NCP, OUTPUT_MODES, PLAYER_KINDS, RECORD_MODES, ROLES, SCHEDULE, SYSTEM_PROMPT_MODES, Resolved, Spelling, default,
    parse_shard, survival_turn, unmet_needs,
)

# The values options may take live with the option table; imported from here too.
__all__ = ["DEFAULT_AUDITOR_MODEL", "DEFAULT_MAX_RESPONSE_CHARS", "DEFAULT_MAX_TOKENS", "FINGERPRINT_FIELDS", "OUTPUT_MODES", "PLAYER_KINDS",
           "RECORD_MODES", "ROLES", "SCHEDULE_FIELDS", "SYSTEM_PROMPT_MODES", "RunConfig", "Shard",
           "PROMPT_VERSION", "config_fingerprint", "episode_key", "episode_name"]

# The audit prompts' version (pytest_ncp/prompts/*.j2): bump it whenever a template's meaning changes.
PROMPT_VERSION = "ncp-prompts/9"  # 2: the trajectory step is told when the trigger already happened; 3: quotes
# and evidence must be substantial verbatim spans, the confirmation step sees the trajectory; 4: injection-
# hardened data blocks (per-call delimiters, tags neutralised, the narration shown as a person reads it),
# one system message for every audit step, and the story state first, byte for byte the same in every
# step of a turn (provider prompt caches), facts the story added dated by turn; 5: the turn's data before the
# step's task (the four steps of a turn share everything but the task), commitment states listed only when
# settled, and the input_screen step, simulated players told to write only their character's acts and
# words, and why an input was refused; 6: facts the story added shown as data blocks, like narration; 7: each
# step shows only the state it reads, its task in its system message, ordered for a prefix cache (run-fixed,
# then episode-fixed, then slow-changing, then the turn); 8: the same layout, data-block codes of 9 decimal
# digits (the neutralised "<" is what keeps data inside its block; decimal digits cost fewer tokens than hex),
# the rules and tasks said shorter, one line per rule; 9: the conflict check's player-input exception says what
# an in-story reason is (the world prevents the act; a motive or temptation of the player character is none)

# What an episode's outcome depends on: ``--resume`` keeps an episode only when these are unchanged.
# (Endpoint, concurrency, timeouts and cassettes change how a run is served, not what it measures.)
# Every setting that can change a verdict: the narrator and models, the endpoint, the player, the
# limits, how answers are asked for, the record mode, the demo flag; and what the package brings (``environment``:
# its version, the shared world rules, the prompt templates). Only how a run is served and scheduled stays
# out (concurrency, timeouts, retries, repeats, workers, shard, pipeline; where the cassettes are, not what they
# hold, since a replay is keyed by the request): an errored episode runs again anyway.
# ``narrator_code``: a hash of the narrator's module file, so a resumed run does not mix episodes of two versions
# of the narrator under test (or a note that its code could not be read).
FINGERPRINT_FIELDS: tuple[str, ...] = (*(o.field_name for o in CONFIG_OPTIONS if o.config == FINGERPRINT),
                                       "prompt_version", "environment", "narrator_code")
# How episodes are scheduled, never what they produce: left out of to_dict (results.json's config).
SCHEDULE_FIELDS: tuple[str, ...] = tuple(o.field_name for o in CONFIG_OPTIONS if o.config == SCHEDULE)


@dataclass(frozen=True)
class Shard:
    """One slice of a run's episodes (``--shard i/n``); ``engine/shards.py`` says how slices are cut and merged."""

    index: int  # 1-based, as CI matrices count
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``i/n`` with 1 <= i <= n; the message says what is expected."""
        try:
            return cls(*parse_shard(text))
        except ValueError as exc:
            raise ValueError(f"--shard {text!r}: {exc}") from None

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


@dataclass(frozen=True)
class RunConfig:
    """Every setting of a run, as plain strings and numbers (serialisable, shared with pytest-xdist).

    Defaults and validation come from the option table (``core/options.py``); the front ends build one
    with ``from_options``. Frozen: the settings a session stored are the ones it reports; a host that
    needs others (a marker, the demo's server) makes a new value with ``dataclasses.replace``."""

    narrator: str | None = default("narrator")
    narrator_model: str | None = default("narrator-model")
    player: str = default("player")
    player_model: str | None = default("player-model")
    auditor_model: str = default("auditor-model")
    api_base: str | None = default("api-base")
    max_turns: int = default("max-turns")
    max_response_chars: int = default("max-response-chars")
    narrator_timeout: float = default("narrator-timeout")  # seconds per narrator hook call (engine.narrators)
    max_response_tokens: int = default("max-response-tokens")
    auditor_context_tokens: int = default("auditor-context-tokens")
    audit_votes: int = default("audit-votes")          # confirmation samples per flagged conflict
    player_retries: int = default("player-retries")    # regenerations of an unfair simulated input
    repeats: int = default("repeats")
    concurrency: int = default("concurrency")
    max_cost: float | None = default("max-cost")            # US dollars; the model client enforces it
    timeout: float = default("timeout")                     # seconds per model request
    deadline: float | None = default("deadline")            # seconds per call with its retries (2.5 x timeout)
    max_retries: int = 4
    concurrency_per_endpoint: int | None = default("concurrency-per-endpoint")
    max_tokens: dict[str, int] = field(default_factory=lambda: default("max-tokens"))  # over DEFAULT_MAX_TOKENS
    structured_output: str = default("structured-output")
    system_prompt: str = default("system-prompt")
    survival_turn: int = DEFAULT_SURVIVAL_TURN             # options.survival_turn is the rule from_options applies
    record_mode: str | None = default("record-mode")       # None: cassettes off
    cassettes: str | None = default("cassettes")
    demo: bool = default("demo")  # every model is the bundled scripted server: figures judge no model
    seed: int = default("seed")   # the episodes' start order (analysis.sequential.seeded_order)
    # How episodes are scheduled, never what they produce (SCHEDULE_FIELDS): left out of to_dict.
    pipeline: bool = default("no-pipeline")  # play turn t+1 while turn t is audited (--no-pipeline: sequential)
    shard: str | None = default("shard")     # "i/n": run only this slice of the episodes

    @classmethod
    def from_options(cls, options: Resolved, **overrides: Any) -> RunConfig:
        """The settings of ``options`` (resolved by a front end), with ``overrides`` (field -> value, None
        meaning none) on top: ``ncp demo`` names its narrator and endpoint."""
        fields = {o.field_name: o.to_field(options[o.name]) if o.to_field else options[o.name]
                  for o in CONFIG_OPTIONS if o.name in options.values}
        fields.update((k, v) for k, v in overrides.items() if v is not None)
        missing = set(fields) - {f.name for f in dataclasses.fields(cls)}
        if missing:  # a table entry with config=... and no field here (core/options.py says how to add one)
            raise TypeError(f"RunConfig has no field for option(s) {', '.join(sorted(missing))}: declare it, typed, "
                            "with its default from the table")
        if not fields.get("record_mode"):
            fields["cassettes"] = None  # a cassette directory means nothing without a record mode
        max_turns = fields.get("max_turns", cls.max_turns)
        fields["survival_turn"] = survival_turn(max_turns, options.values.get("survival-turn"),
                                                options.values.get("min-survival"))
        if options.values.get("sequential") and not options.given("seed"):
            # An order fixed in advance (seed 0) lets a narrator be good on exactly the episodes that decide
            # early: a sequential run draws its own seed, recorded in results.json (--seed reproduces it).
            import secrets

            fields["seed"] = secrets.randbelow(2**31)
        if fields.get("demo"):  # the demo's scripted server answers these names, unless others were asked for
            fields["narrator_model"] = fields.get("narrator_model") or DEMO_MODELS["narrator"]
            if fields.get("player", cls.player) != "scripted":
                fields["player_model"] = fields.get("player_model") or DEMO_MODELS["player"]
            if not options.given("auditor-model"):
                fields["auditor_model"] = DEMO_MODELS["auditor"]
        return cls(**fields)

    def validate(self, spelling: Spelling = NCP) -> list[str]:
        """Every problem of these settings, naming each option as ``spelling`` says the user wrote it
        (``--ncp-max-turns`` in pytest, ``--max-turns`` in ncp, the default) and saying what is valid."""
        problems = []
        given = getattr(spelling, "given", None)
        if self.shard and getattr(spelling, "values", {}).get("sequential") and callable(given) \
                and not given("seed"):
            problems.append(f"{spelling.spell('shard')} with {spelling.spell('sequential')} needs "
                            f"{spelling.spell('seed')}: the shards of one sequential run must start their episodes in "
                            f"one order, so give every shard the same seed (e.g. {spelling.spell('seed')} "
                            "$CI_PIPELINE_ID)")
        values = {o.name: getattr(self, o.field_name) for o in CONFIG_OPTIONS}
        for option in CONFIG_OPTIONS:
            value = values[option.name]
            if value is not None and option.kind != FLAG:
                try:
                    option.parse(value)
                except ValueError as exc:
                    problems.append(f"{spelling.spell(option.name)}={value!r}: {exc}")
            problems.extend(unmet_needs(option, values, spelling))
        if self.player in PLAYER_KINDS and self.player != "scripted" and not self.player_model:
            problems.append(f"{spelling.spell('player')}={self.player} needs {spelling.example('player-model')}: "
                            "a simulated player is a model (e.g. openai/gpt-4o-mini)")
        if self.deadline is not None and self.timeout is not None and 0 < self.deadline < self.timeout:
            problems.append(f"{spelling.spell('deadline')}={self.deadline:g} must be at least "
                            f"{spelling.spell('timeout')}={self.timeout:g}: a call's deadline covers its requests")
        return problems

    def to_dict(self) -> dict[str, Any]:
        from .redact import scrub

        data = asdict(self)
        for name in SCHEDULE_FIELDS:
            data.pop(name, None)
        # The demo's scripted server listens on a new port every run: its URL says nothing (demo says it all).
        data["api_base"] = scrub(self.api_base) if self.api_base and not self.demo else None
        data["prompt_version"] = PROMPT_VERSION
        data["models"] = {"narrator": self.narrator_model, "player": self.player_model,
                          "auditor": self.auditor_model}
        data["max_tokens"] = {**DEFAULT_MAX_TOKENS, **self.max_tokens}
        data["environment"] = environment()
        data["narrator_code"] = narrator_code(self.narrator)
        data["fingerprint"] = config_fingerprint(data)
        return data


@functools.lru_cache(maxsize=1)
def _environment() -> tuple[tuple[str, str], ...]:
    import hashlib
    from importlib import metadata, resources

    try:
        version = metadata.version("pytest-ncp")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        version = "unknown"
    package = resources.files("pytest_ncp")  # files only: importing pytest_ncp.prompts here would be a back-edge
    rules = hashlib.sha256(package.joinpath("world_rules.yaml").read_bytes()).hexdigest()[:16]
    templates = hashlib.sha256()
    for template in sorted(package.joinpath("prompts").iterdir(), key=lambda t: t.name):
        if template.name.endswith(".j2"):
            templates.update(template.name.encode() + b"\0" + template.read_bytes() + b"\0")
    return (("pytest_ncp", version), ("world_rules", rules), ("prompts", templates.hexdigest()[:16]))


def environment() -> dict[str, str]:
    """What the installed package contributes to every verdict: its version, a hash of the shared world
    rules (``world_rules.yaml``) and one of the prompt templates, so a template changed without a
    PROMPT_VERSION bump still tells a resumed run apart."""
    return dict(_environment())


def narrator_code(narrator: str | None) -> dict[str, str] | None:
    """What identifies the narrator's code: the module of ``module:Attr`` and a hash of its file, or why it
    cannot be read (a module without a source file, a built-in one); None without a narrator. Only that one
    file is hashed: code it imports from other modules is not covered (the note says so)."""
    if not narrator:
        return None
    import hashlib
    import importlib.util
    import sys

    module = narrator.partition(":")[0]
    path = getattr(sys.modules.get(module), "__file__", None)
    try:
        if path is None:
            found = importlib.util.find_spec(module)
            path = found.origin if found is not None and found.has_location else None
        if not path:
            raise OSError("no source file")
        with open(path, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()[:16]
    except (OSError, ImportError, ValueError) as exc:
        return {"module": module, "note": f"the narrator's code could not be read ({exc}): --resume cannot tell "
                                          "whether it changed"}
    return {"module": module, "sha256": digest, "note": "the module file only, not what it imports"}


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
