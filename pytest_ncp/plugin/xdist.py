"""pytest-xdist: every test of one episode runs on one worker (or the episode would run once per worker).

Through xdist's own schedulers only: the tests of an episode share a spec file (one spec per file), and
``--dist loadscope`` and ``--dist loadfile`` send a file's tests to one worker. ``load``, ``worksteal``,
``each`` and ``loadgroup`` can hand one episode's tests to several workers (``loadgroup`` groups by a
suffix xdist 3.8 writes into node ids, which pytest 9.2 no longer reads), so with a narrator configured
they are a usage error naming ``loadscope``. With ``-n`` and no ``--dist``, the plugin asks for
``loadscope`` itself (``default_dist``), so ``pytest -n 4`` keeps working.

``XdistHooks`` is registered only when pytest-xdist is installed: its hooks are unknown to pytest otherwise.
"""

from __future__ import annotations

from typing import Any

import pytest

from .options import ini_key

# The --dist modes that keep every test of a spec file, hence of an episode, on one worker.
GROUPING_MODES = ("loadscope", "loadfile")
EPISODE_DIST = "loadscope"


def _narrator_configured(early_config: pytest.Config) -> bool:
    given = getattr(early_config.known_args_namespace, ini_key("narrator"), None)
    return bool(given or early_config.getini(ini_key("narrator")))


def default_dist(early_config: pytest.Config, args: list[str]) -> None:
    """With ``-n N``, no ``--dist`` and a narrator, add ``--dist loadscope`` to the command line.

    xdist's default for ``-n`` is ``load``, which splits an episode's tests between workers. Done on
    the arguments, as pytest documents for ``pytest_load_initial_conftests``, so the session reports
    the mode it runs with (and a test file of the user's is then one unit of work, as under loadscope).
    """
    known = early_config.known_args_namespace
    if not getattr(known, "numprocesses", None) or getattr(known, "dist", "no") != "no" \
            or getattr(known, "distload", False) or not _narrator_configured(early_config):
        return
    args.insert(0, f"--dist={EPISODE_DIST}")


def check_dist(config: pytest.Config) -> None:
    """A --dist mode that may play an episode on more than one worker is a usage error naming the fix."""
    dist = config.getoption("dist", "no")
    if dist in ("no", *GROUPING_MODES) or hasattr(config, "workerinput"):
        return
    why = ("runs every test on every worker" if dist == "each" else
           "can hand the tests of one episode to different workers")
    raise pytest.UsageError(
        f"pytest-ncp: --dist {dist} {why}, so an episode would be played more than once; use "
        f"--dist {EPISODE_DIST} or --dist loadfile (each keeps a spec file on one worker), or leave --dist "
        f"out with -n (pytest-ncp then picks {EPISODE_DIST})")


class XdistHooks:
    """The plugin's pytest-xdist hooks."""

    def pytest_configure_node(self, node: Any) -> None:
        # --ncp-sequential: the file through which the controller tells this worker that the session stopped.
        from .options import SEED_KEY
        from .sequential import STOP_FILE_KEY
        from .session import SESSION_KEY

        ncp = node.config.stash.get(SESSION_KEY, None)
        if ncp is not None and ncp.stop.enabled:
            node.workerinput[STOP_FILE_KEY] = ncp.stop.worker_file()
        if ncp is not None:  # one episode order for the whole session: the seed the controller drew, if it drew one
            node.workerinput[SEED_KEY] = ncp.settings.run.seed

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
