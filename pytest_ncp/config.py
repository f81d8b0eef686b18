"""Run settings as plain data: light to import (the pytest plugin resolves them at configure time)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PLAYER_KINDS: tuple[str, ...] = ("scripted", "adversarial", "natural")
DEFAULT_AUDITOR_MODEL = "openai/gpt-4o-mini"
# What an episode's outcome depends on: ``--resume`` keeps an episode only when these are unchanged.
# (Endpoint, concurrency, timeouts and cassettes change how a run is served, not what it measures.)
FINGERPRINT_FIELDS: tuple[str, ...] = ("narrator", "narrator_model", "player", "player_model", "auditor_model",
                                       "max_turns", "prompt_version")


SCHEDULE_FIELDS: tuple[str, ...] = ("pipeline", "shard")


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
    timeout: float = 120.0
    max_retries: int = 4
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
            from .cassette import RECORD_MODES

            if self.record_mode not in RECORD_MODES:
                problems.append(f"unknown record mode {self.record_mode!r}; valid: {', '.join(RECORD_MODES)}")
            if not self.cassettes:
                problems.append("a record mode needs a cassette directory (--cassettes DIR)")
        if self.shard is not None:
            from .shards import Shard

            try:
                Shard.parse(self.shard)
            except ValueError as exc:
                problems.append(str(exc))
        for name in ("max_turns", "repeats", "concurrency"):
            if int(getattr(self, name)) < 1:
                problems.append(f"{name} must be at least 1 (got {getattr(self, name)})")
        return problems

    def to_dict(self) -> dict[str, Any]:
        from .llm import scrub
        from .prompts import PROMPT_VERSION

        data = asdict(self)
        for name in SCHEDULE_FIELDS:
            data.pop(name, None)
        data["api_base"] = scrub(self.api_base) if self.api_base else None
        data["prompt_version"] = PROMPT_VERSION
        data["models"] = {"narrator": self.narrator_model, "player": self.player_model,
                          "auditor": self.auditor_model}
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
