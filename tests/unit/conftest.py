"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest

from pytest_ncp.core.spec import SpecError
from pytest_ncp.lint import LintFinding, lint_paths
from tests.conftest import SPECS


@pytest.fixture(scope="session")
def bundled_lint() -> tuple[list[LintFinding], list[SpecError]]:
    """``lint_paths`` over the 100 bundled specs, computed once: several tests check the same findings
    under different rules, and linting every spec takes seconds."""
    return lint_paths([SPECS])
