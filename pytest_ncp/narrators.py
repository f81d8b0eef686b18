"""The built-in narrators under a short, stable path for the narrator option.

``--ncp-narrator=pytest_ncp.narrators:LLMNarrator`` (or ``ncp run --narrator ...``) names a narrator
as ``module:attribute``; this module is the documented spelling for the three that ship
(``ReferenceNarrator`` answers with a spec's reference playthrough).
``from pytest_ncp import LLMNarrator`` is the same class.
"""

from __future__ import annotations

from .engine.narrators import LLMNarrator, MemoryNarrator, ReferenceNarrator

__all__ = ["LLMNarrator", "MemoryNarrator", "ReferenceNarrator"]
