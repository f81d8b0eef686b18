"""Repo-level fixtures shared by tests/ and example_tests/.

The examples run offline in CI: every model call (narrator and auditor) goes to the bundled scripted
model server instead of a provider. A studio's own conftest would leave ``ncp_api_base`` alone and
pass ``--ncp-auditor-model`` / API keys for a real auditor.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent


@pytest.fixture
def ncp_api_base(ncp_model_server) -> str:
    """Route the examples' model calls to the scripted server started for each test."""
    return ncp_model_server.base_url


@pytest.fixture
def specs_dir() -> Path:
    return ROOT / "specs"
