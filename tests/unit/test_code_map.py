"""The README's "Code map" matches the code: every folder of pytest_ncp/ is on it and every folder on it
exists, and no folder imports one its line does not allow (imports inside functions included)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_ncp"


def code_map() -> list[tuple[str, set[str]]]:
    """(folder, the folders it may import), in the order of the map."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Code map\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    entries: list[tuple[str, set[str]]] = []
    folder = None
    for line in block.splitlines():
        m = re.match(r"^  (\w+)/ ", line)
        if m:
            folder = m.group(1)
        allowed = re.search(r"\[imports: ([^\]]+)\]", line)
        if allowed and folder is not None:
            above = {f for f, _ in entries}
            text = allowed.group(1).strip()
            if text == "nothing":
                names: set[str] = set()
            elif text.startswith("all above"):
                names = above - {n.strip() for n in text.removeprefix("all above").removeprefix(" but").split(",")
                                 if n.strip()}
            else:
                names = {n.strip() for n in text.split(",")}
            entries.append((folder, names))
            folder = None
    return entries


def test_every_folder_is_on_the_map_and_every_folder_on_it_exists():
    on_disk = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    mapped = [f for f, _ in code_map()]
    assert len(mapped) == len(set(mapped))
    assert sorted(mapped) == on_disk


def test_the_map_names_only_folders_above_each_line():
    seen: set[str] = set()
    for folder, allowed in code_map():
        assert allowed <= seen, f"{folder} may import {sorted(allowed - seen)}, which are not above it"
        seen.add(folder)


def test_no_folder_imports_what_its_line_does_not_allow():
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the test extra)")
    graph = grimp.build_graph("pytest_ncp")
    allowed = dict(code_map())
    wrong = []
    for module in sorted(graph.modules):
        parts = module.split(".")
        if len(parts) < 2 or parts[1] not in allowed:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            target = imported.split(".")
            if len(target) >= 2 and target[1] in allowed and target[1] != parts[1] \
                    and target[1] not in allowed[parts[1]]:
                wrong.append(f"{module} imports {imported}")
    assert not wrong, "\n".join(wrong)
