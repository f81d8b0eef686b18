"""--ncp-narrator=module:Attr imports like any Python import: the plugin never edits sys.path, and a
narrator that cannot be imported is told how to make it importable (README)."""

from __future__ import annotations

import sys

import pytest

from pytest_ncp.engine.narrators import NarratorLoadError, load_narrator

AGENT = "class Narrator:\n    def respond(self, player_input, context):\n        return 'The fair is loud.'\n"


def test_a_module_in_the_working_directory_is_not_imported_behind_the_users_back(tmp_path, monkeypatch):
    (tmp_path / "ncp_cwd_agent.py").write_text(AGENT)
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    with pytest.raises(NarratorLoadError) as info:
        load_narrator("ncp_cwd_agent:Narrator")
    assert sys.path == before
    message = str(info.value)
    assert "No module named 'ncp_cwd_agent'" in message
    for fix in ("`pythonpath = .`", "`pip install -e .`", "PYTHONPATH"):
        assert fix in message


def test_a_narrator_on_the_path_loads(tmp_path, monkeypatch):
    (tmp_path / "ncp_path_agent.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))  # what PYTHONPATH or pytest's pythonpath ini key do
    narrator = load_narrator("ncp_path_agent:Narrator")()
    assert narrator.respond("I look.", None) == "The fair is loud."


def test_an_error_inside_the_narrator_module_is_not_mistaken_for_a_path_problem(tmp_path, monkeypatch):
    (tmp_path / "ncp_broken_agent.py").write_text("import ncp_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(NarratorLoadError) as info:
        load_narrator("ncp_broken_agent:Narrator")
    assert "ncp_no_such_dependency" in str(info.value) and "pythonpath" not in str(info.value)
