"""Every import path, ``module:Attr`` string and package file the docs (and examples) name still resolves.

The paths are collected from README.md and the Markdown under docs/ (and benchmarks/) by pattern, so a
new mention in the docs is covered without touching this test. What users may import is docs/api.md
(tests/unit/test_public_api.py); other paths the docs name are pointers to where a rule lives.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "benchmarks").glob("*.md")])
TEXT = {doc.relative_to(ROOT).as_posix(): doc.read_text(encoding="utf-8") for doc in DOCS}
# What a studio copies: the example tests and the benchmark scripts import through the public paths too.
CODE = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted([*(ROOT / "example_tests").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")])}

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
MODULE_ATTR = re.compile(rf"\bpytest_ncp(?:\.{_NAME})*:{_NAME}(?:\.{_NAME})*")
FROM_IMPORT = re.compile(rf"^\s*from (pytest_ncp(?:\.{_NAME})*) import \(?([\w ,]+)\)?", re.M)
DOTTED = re.compile(rf"\bpytest_ncp(?:\.{_NAME})+")
FILE = re.compile(r"\bpytest_ncp/[\w./-]*\w")


def _mentions(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    return sorted({(m.group(0), doc) for doc, text in TEXT.items() for m in pattern.finditer(text)})


def _resolve(dotted: str) -> object:
    """``a.b.c`` -> the longest importable module prefix, then attributes for the rest."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            target = getattr(target, attr)
        return target
    raise ModuleNotFoundError(dotted)


def test_the_docs_mention_public_paths_at_all():
    # Guards the patterns: the README's own example strings must be found.
    assert ("pytest_ncp.narrators:LLMNarrator", "README.md") in _mentions(MODULE_ATTR)
    assert any(path.startswith("pytest_ncp.testing") for path, _ in _mentions(DOTTED))


@pytest.mark.parametrize("spec,doc", _mentions(MODULE_ATTR))
def test_module_attr_strings_resolve(spec, doc):
    module, _, attr = spec.partition(":")
    target: object = importlib.import_module(module)
    for part in attr.split("."):
        target = getattr(target, part)
    assert target is not None, f"{doc}: {spec}"


@pytest.mark.parametrize("statement,doc", sorted(
    {(f"from {m.group(1)} import {', '.join(n.strip() for n in m.group(2).split(',') if n.strip())}", doc)
     for doc, text in {**TEXT, **CODE}.items() for m in FROM_IMPORT.finditer(text)}))
def test_from_imports_in_the_docs_work(statement, doc):
    exec(compile(statement, f"<{doc}>", "exec"), {})


@pytest.mark.parametrize("dotted,doc", _mentions(DOTTED))
def test_dotted_paths_resolve(dotted, doc):
    assert _resolve(dotted) is not None, f"{doc}: {dotted}"


@pytest.mark.parametrize("path,doc", _mentions(FILE))
def test_package_files_the_docs_name_exist(path, doc):
    assert (ROOT / path).exists(), f"{doc} names {path}"
