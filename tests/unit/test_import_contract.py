"""The import contract of pyproject.toml ([tool.importlinter]) holds: layers import only downwards, no
cycles (imports inside functions included), pytest only in plugin/, argparse only in cli/, the network
only in llm/. .ci/run runs ``lint-imports`` too; this test makes a back-edge fail the suite locally."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_contract_holds(capsys):
    cli = pytest.importorskip("importlinter.cli", reason="import-linter is in the test extra")
    code = cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    assert code == 0, capsys.readouterr().out
