"""pytest-ncp: regression-test LLM narrator agents (game masters) in CI, and NCP-Bench.

Nothing heavy is imported here: the pytest plugin loads this package in every pytest run. The names
below are re-exported lazily at run time, and for real under ``TYPE_CHECKING``, so type checkers see
their types. Everything else is imported from its module (``pytest_ncp.core.spec``,
``pytest_ncp.engine.episode``, ...; the README's "Code map" says which folder holds what).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .analysis.metrics import Gate, compute_metrics
    from .analysis.results import RunResults, load_results
    from .analysis.verdict import Verdict, decide
    from .core.config import RunConfig
    from .core.ledger import FactLedger
    from .core.spec import NarrativeSpec, SpecError, load_spec, load_specs
    from .engine.auditor import AuditorError, LLMAuditor, TurnAudit, TurnContext
    from .core.endings import Termination
    from .engine.episode import Episode, EpisodeResult
    from .engine.narrators import (
        LLMNarrator, MemoryNarrator, Narrator, NarratorContext, SpeculationSafe, SupportsOpening, SupportsReset,
        SupportsRestore, load_narrator,
    )
    from .engine.players import Player, PlayerView, ReplayPlayer, ScriptedPlayer, SimulatedPlayer
    from .engine.runner import Runner
    from .llm import ModelClient, ModelError

_EXPORTS = {
    "NarrativeSpec": "core.spec", "load_spec": "core.spec", "load_specs": "core.spec", "SpecError": "core.spec",
    "FactLedger": "core.ledger",
    "LLMAuditor": "engine.auditor", "AuditorError": "engine.auditor", "TurnAudit": "engine.auditor",
    "TurnContext": "engine.auditor",
    "ModelClient": "llm", "ModelError": "llm",
    "Narrator": "engine.narrators", "NarratorContext": "engine.narrators", "LLMNarrator": "engine.narrators",
    "MemoryNarrator": "engine.narrators", "load_narrator": "engine.narrators",
    "SupportsReset": "engine.narrators", "SupportsOpening": "engine.narrators", "SupportsRestore": "engine.narrators",
    "SpeculationSafe": "engine.narrators",
    "Player": "engine.players", "PlayerView": "engine.players", "ScriptedPlayer": "engine.players",
    "SimulatedPlayer": "engine.players", "ReplayPlayer": "engine.players",
    "Episode": "engine.episode", "EpisodeResult": "engine.episode", "Termination": "core.endings",
    "Runner": "engine.runner", "RunConfig": "core.config",
    "compute_metrics": "analysis.metrics", "Gate": "analysis.metrics",
    "RunResults": "analysis.results", "load_results": "analysis.results",
    "Verdict": "analysis.verdict", "decide": "analysis.verdict",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_ncp' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"pytest_ncp.{module}"), name)
