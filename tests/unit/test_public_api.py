"""The public API is one list: ``pytest_ncp.__all__``, documented on docs/api.md.

The names load lazily at run time (``_EXPORTS``) and for real under ``TYPE_CHECKING``; the two lists are
written by hand, so these tests keep them equal, and keep the package root free of modules nobody
documented (a root module is a path users will import).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_ncp

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_ncp"
API_DOC = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
# The package root's modules besides __init__.py: each an entry point documented on docs/api.md.
ENTRY_POINT_MODULES = {"narrators"}


def _type_checking_imports() -> dict[str, str]:
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    block = next(node for node in tree.body
                 if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
    return {alias.asname or alias.name: (node.module or "")
            for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}


def test_the_lazy_map_and_the_type_checking_block_name_the_same_things():
    assert _type_checking_imports() == pytest_ncp._EXPORTS
    assert sorted(pytest_ncp.__all__) == sorted(["__version__", *pytest_ncp._EXPORTS])


@pytest.mark.parametrize("name", sorted(pytest_ncp._EXPORTS))
def test_every_public_name_resolves_to_what_its_module_defines(name):
    target = getattr(pytest_ncp, name)
    assert target is getattr(importlib.import_module(f"pytest_ncp.{pytest_ncp._EXPORTS[name]}"), name)
    assert name in dir(pytest_ncp)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'runner'"):
        pytest_ncp.runner  # noqa: B018


@pytest.mark.parametrize("name", sorted(pytest_ncp.__all__))
def test_docs_api_lists_every_public_name(name):
    assert f"`{name}`" in API_DOC, f"docs/api.md does not list {name}"


def test_the_package_root_holds_only_documented_entry_points():
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert modules == ENTRY_POINT_MODULES and len(modules) <= 4
    for name in modules:
        module = importlib.import_module(f"pytest_ncp.{name}")
        assert f"pytest_ncp.{name}" in API_DOC
        public = {n for n in vars(module) if n.isidentifier() and not n.startswith("_") and n != "annotations"}
        assert set(module.__all__) == public, f"pytest_ncp.{name} exposes names outside its __all__"


@pytest.mark.parametrize("old", ["assertions", "auditor", "compare", "config", "fork", "metrics", "pipeline",
                                 "players", "quotes", "review", "runner", "spec", "workers"])
def test_removed_root_paths_do_not_import(old):
    assert importlib.util.find_spec(f"pytest_ncp.{old}") is None


def test_the_public_testing_module_exports_what_it_lists():
    testing = importlib.import_module("pytest_ncp.testing")
    for name in testing.__all__:
        assert getattr(testing, name) is not None and f"`{name}`" in API_DOC


def test_importing_the_public_api_loads_nothing_heavy():
    # The plugin imports this package in every pytest run: the lazy map must stay lazy.
    code = ("import sys, pytest_ncp; pytest_ncp.__all__; "
            "print(sorted(m for m in ('litellm', 'pydantic', 'yaml', 'syrupy', 'pytest_ncp.engine') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
