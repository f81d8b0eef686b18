"""pytest-xdist: every test of one episode runs on one worker (or the episode would run once per worker).

``XdistHooks`` is registered only when pytest-xdist is installed: its hooks are unknown to pytest otherwise.
"""

from __future__ import annotations

import re
from typing import Any

import pytest


class XdistHooks:
    """The plugin's pytest-xdist hooks."""

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        # Every test of a (spec, repeat) reads one episode: they must run on one worker, or the
        # episode runs once per worker. Grouping by xdist_group marks depends on how each xdist
        # version rewrites node ids on the worker, so the grouping is done here, from node ids alone.
        if config.getvalue("dist") in ("load", "loadgroup", "worksteal"):
            return episode_scheduler(config, log)
        return None  # loadscope / loadfile keep a file together already; each runs everything anyway

    def pytest_configure_node(self, node: Any) -> None:
        # --ncp-sequential: the file through which the controller tells this worker that the session stopped.
        from .sequential import STOP_FILE_KEY
        from .session import SESSION_KEY

        ncp = node.config.stash.get(SESSION_KEY, None)
        if ncp is not None and ncp.stop.enabled:
            node.workerinput[STOP_FILE_KEY] = ncp.stop.worker_file()

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # The controller collects nothing itself: the episodes its results.json waits for are those of the
        # spec tests the workers collected (each worker collects the same selection).
        from .collect import episode_of
        from .session import SESSION_KEY

        ncp = node.config.stash.get(SESSION_KEY, None)
        if ncp is not None:
            ncp.started = True  # the workers run the tests (the controller's own runtestloop is xdist's)
            repeats = ncp.settings.run.repeats
            ncp.expect(k for k in (episode_of(i, repeats) for i in ids) if k is not None)


def episode_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist scheduling that sends every test of one episode to the same worker.

    A scope per (spec file, episode key) for spec items; any other test keeps its own scope, so it
    is load-balanced as with ``--dist load`` (or grouped by ``xdist_group`` under ``loadgroup``).
    """
    from xdist.scheduler import LoadGroupScheduling

    class EpisodeScheduling(LoadGroupScheduling):  # type: ignore[misc]  # xdist publishes no types for its schedulers
        def _split_scope(self, nodeid: str) -> str:
            scope = episode_scope(nodeid)
            return scope if scope is not None else super()._split_scope(nodeid)

    return EpisodeScheduling(config, log)


_SPEC_ITEM = re.compile(r"^(?P<file>[^:]+\.ya?ml)::(?:episode\[(?P<e>[^\]]+)\]|commitment\[(?P<c>[^\]]+):[^:\]]+\])")


_FORK_ITEM = re.compile(r"^[^:]+\.jsonl::fork\[[^\]]+\]$")


def episode_scope(nodeid: str) -> str | None:
    """``specs/x.yaml::episode[x]`` and ``specs/x.yaml::commitment[x:C1]`` -> ``specs/x.yaml::x``; a stored
    failure's ``failures/x@t3.jsonl::fork[x@t3]`` is a scope of its own (it shares no episode)."""
    if _FORK_ITEM.match(nodeid):
        return f"fork::{nodeid}"
    m = _SPEC_ITEM.match(nodeid)
    if m is None:
        return None
    return f"{m['file']}::{m['e'] or m['c']}"
