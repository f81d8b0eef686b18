"""pytest-ncp: regression-test LLM narrator agents (game masters) in CI, and NCP-Bench.

Nothing heavy is imported here: the pytest plugin loads this package in every pytest run.
Import the parts you need from their modules (``pytest_ncp.spec``, ``pytest_ncp.episode``, ...);
the names below are re-exported lazily.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "NarrativeSpec": "spec", "load_spec": "spec", "load_specs": "spec", "SpecError": "spec",
    "FactLedger": "ledger",
    "LLMAuditor": "auditor", "AuditorError": "auditor", "TurnAudit": "auditor", "TurnContext": "auditor",
    "ModelClient": "llm", "ModelError": "llm",
    "Narrator": "narrators", "NarratorContext": "narrators", "LLMNarrator": "narrators",
    "MemoryNarrator": "narrators", "load_narrator": "narrators",
    "Player": "players", "PlayerView": "players", "ScriptedPlayer": "players", "SimulatedPlayer": "players",
    "ReplayPlayer": "players",
    "Episode": "episode", "EpisodeResult": "episode", "Termination": "episode",
    "Runner": "runner", "RunConfig": "config",
    "compute_metrics": "metrics", "Gate": "metrics",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_ncp' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"pytest_ncp.{module}"), name)
