"""pytest-ncp: regression-test LLM narrator agents (game masters) in CI, and NCP-Bench.

Nothing heavy is imported here: the pytest plugin loads this package in every pytest run.
Import the parts you need from their modules (``pytest_ncp.core.spec``, ``pytest_ncp.engine.episode``, ...; the README's "Code map" says which folder holds what);
the names below are re-exported lazily.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "NarrativeSpec": "core.spec", "load_spec": "core.spec", "load_specs": "core.spec", "SpecError": "core.spec",
    "FactLedger": "core.ledger",
    "LLMAuditor": "engine.auditor", "AuditorError": "engine.auditor", "TurnAudit": "engine.auditor", "TurnContext": "engine.auditor",
    "ModelClient": "llm", "ModelError": "llm",
    "Narrator": "engine.narrators", "NarratorContext": "engine.narrators", "LLMNarrator": "engine.narrators",
    "MemoryNarrator": "engine.narrators", "load_narrator": "engine.narrators",
    "Player": "engine.players", "PlayerView": "engine.players", "ScriptedPlayer": "engine.players", "SimulatedPlayer": "engine.players",
    "ReplayPlayer": "engine.players",
    "Episode": "engine.episode", "EpisodeResult": "engine.episode", "Termination": "engine.episode",
    "Runner": "engine.runner", "RunConfig": "core.config",
    "compute_metrics": "analysis.metrics", "Gate": "analysis.metrics",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_ncp' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"pytest_ncp.{module}"), name)
