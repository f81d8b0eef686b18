"""Live-model tests: skipped unless `--live-models` is given (they need the network and API keys)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--live-models", action="store_true", default=False,
                     help="run tests/live against real models (needs network and keys, e.g. OPENAI_API_KEY)")
    parser.addoption("--live-auditor-model", default="openai/gpt-4o-mini")
    parser.addoption("--live-narrator-model", default="openai/gpt-4o-mini")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--live-models"):
        return
    skip = pytest.mark.skip(reason="live-model test: pass --live-models (needs network and API keys)")
    for item in items:
        if "tests/live/" in item.nodeid:
            item.add_marker(skip)
