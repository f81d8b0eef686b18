"""pytest-ncp: regression-test LLM narrator agents (game masters) in CI, and NCP-Bench.

The public API is ``__all__`` below, plus the scripted model server in :mod:`pytest_ncp.testing` and
the entry-point module :mod:`pytest_ncp.narrators`; docs/api.md lists it beside the fixtures. Every
other module is private by convention: its path may change in any release.

Nothing heavy is imported here: the pytest plugin loads this package in every pytest run. The names
are re-exported lazily at run time, and for real under ``TYPE_CHECKING`` so type checkers see their
types (tests/unit/test_public_api.py keeps the two lists equal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .analysis.compare import compare_runs
    from .analysis.metrics import Gate, compute_metrics
    from .analysis.results import RunResults, load_results
    from .analysis.verdict import Verdict, decide
    from .core.config import RunConfig
    from .core.endings import Termination
    from .core.ledger import FactLedger
    from .core.records import EpisodeRecord
    from .core.spec import NarrativeSpec, SpecError, load_spec, load_specs
    from .engine.auditor import Auditor, AuditorError, LLMAuditor, TurnAudit, TurnContext
    from .engine.episode import Episode, EpisodeResult
    from .engine.narrators import (
        LLMNarrator, MemoryNarrator, Narrator, NarratorContext, ReferenceNarrator, SpeculationSafe, SupportsOpening,
        SupportsReset, SupportsRestore, load_narrator,
    )
    from .engine.players import Player, PlayerView, ReplayPlayer, ScriptedPlayer, SimulatedPlayer
    from .engine.runner import Runner
    from .llm import ModelClient, ModelError
    from .plugin.assertions import assert_commitment, assert_no_conflict, assert_termination

# name -> module (relative to the package) that defines it.
_EXPORTS = {
    # what a studio implements, and the built-in narrators
    "Narrator": "engine.narrators", "NarratorContext": "engine.narrators", "SupportsReset": "engine.narrators",
    "SupportsOpening": "engine.narrators", "SupportsRestore": "engine.narrators",
    "SpeculationSafe": "engine.narrators", "LLMNarrator": "engine.narrators", "MemoryNarrator": "engine.narrators",
    "ReferenceNarrator": "engine.narrators", "load_narrator": "engine.narrators",
    "Player": "engine.players", "PlayerView": "engine.players", "ScriptedPlayer": "engine.players",
    "SimulatedPlayer": "engine.players", "ReplayPlayer": "engine.players",
    "Auditor": "engine.auditor", "LLMAuditor": "engine.auditor", "AuditorError": "engine.auditor",
    "TurnAudit": "engine.auditor", "TurnContext": "engine.auditor",
    "ModelClient": "llm", "ModelError": "llm",
    # specs and settings
    "NarrativeSpec": "core.spec", "load_spec": "core.spec", "load_specs": "core.spec", "SpecError": "core.spec",
    "RunConfig": "core.config",
    # running episodes, and what they produce
    "Episode": "engine.episode", "EpisodeResult": "engine.episode", "Termination": "core.endings",
    "FactLedger": "core.ledger", "Runner": "engine.runner",
    "RunResults": "analysis.results", "EpisodeRecord": "core.records", "load_results": "analysis.results",
    # judging a run
    "compute_metrics": "analysis.metrics", "Gate": "analysis.metrics",
    "Verdict": "analysis.verdict", "decide": "analysis.verdict", "compare_runs": "analysis.compare",
    # assertions for hand-written tests
    "assert_no_conflict": "plugin.assertions", "assert_termination": "plugin.assertions",
    "assert_commitment": "plugin.assertions",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_ncp' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"pytest_ncp.{module}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
