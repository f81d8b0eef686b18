"""pytest entry point (``pytest11: ncp``). Hooks and fixtures only; each delegates to the core.

Loaded by every pytest run where pytest-ncp is installed, so it imports nothing heavy: no litellm,
yaml or syrupy at import time.
"""

from __future__ import annotations

from typing import Iterator

import pytest


@pytest.fixture
def ncp_model_server() -> Iterator[object]:
    """A scripted OpenAI-compatible server on 127.0.0.1 (``pytest_ncp.testing.ScriptedModelServer``)."""
    from .testing import ScriptedModelServer

    with ScriptedModelServer() as server:
        yield server
