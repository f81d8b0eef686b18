"""The built-in narrators under a short, stable path for the narrator option.

``--ncp-narrator=pytest_ncp.narrators:LLMNarrator`` (or ``ncp run --narrator ...``) names a narrator
as ``module:attribute``; this module is the documented spelling for the two that ship.
``from pytest_ncp import LLMNarrator`` is the same class.
"""

from __future__ import annotations

from .engine.narrators import LLMNarrator, MemoryNarrator

__all__ = ["LLMNarrator", "MemoryNarrator"]
