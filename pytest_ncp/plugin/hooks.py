"""Hooks a project's ``conftest.py`` may implement (added to pytest's hook specs by ``pytest_addhooks``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from ..testing import ScriptedModelServer

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_ncp_demo_server(server: ScriptedModelServer) -> None:
    """Script the offline models of ``--ncp-demo`` for this project.

    ``server`` already answers every role with the demo script (``pytest_ncp.testing.demo``), whose
    auditor flags turns by a hash of (story, turn), not by what the narration says. Rules added here win
    over it (``server.add(step="conflict_check", contains="STORY: My World", reply=...)``), so a project
    can make the offline auditor read its own world's facts. Called once per process that plays
    episodes or runs hand-written tests under ``--ncp-demo``.
    """
