"""Documented path of :mod:`pytest_ncp.engine.narrators`, kept for ``--ncp-narrator=pytest_ncp.narrators:LLMNarrator`` ``pytest_ncp.narrators:MemoryNarrator`` and ``pytest_ncp.narrators:ReferenceNarrator``."""
from .engine.narrators import *  # noqa: F401,F403
