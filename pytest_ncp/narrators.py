"""Documented path of :mod:`pytest_ncp.engine.narrators`, kept for ``--ncp-narrator=pytest_ncp.narrators:LLMNarrator`` and ``pytest_ncp.narrators:MemoryNarrator``."""
from .engine.narrators import *  # noqa: F401,F403
