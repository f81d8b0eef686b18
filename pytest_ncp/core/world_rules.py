"""Shared default world rules: invariants every story obeys, applied by the auditor to every spec.

They live in ``world_rules.yaml`` (package data) with ids W1, W2, ...; a spec drops or rewords them
with its ``world_rules`` field. In force (``spec.rules_in_force``), each is a ``Commitment`` of kind ``invariant``: the auditor
lists it with the spec's own commitments, may name its id in a commitment conflict, and reports show
it held or violated like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class WorldRule:
    id: str
    text: str
    signals: tuple[str, ...]  # phrases that mark a spec invariant restating this rule (the linter)


@lru_cache(maxsize=1)
def default_rules() -> tuple[WorldRule, ...]:
    import yaml

    raw = yaml.safe_load(resources.files("pytest_ncp").joinpath("world_rules.yaml").read_text(encoding="utf-8"))
    return tuple(WorldRule(r["id"], r["text"], tuple(s.lower() for s in r.get("signals", ()))) for r in raw)
