"""pytest entry point (``pytest11: ncp``): the hooks, each delegating to the session, collection and report.

The fixtures live in ``fixtures.py`` and register through this module (pytest reads a plugin's
attributes); xdist hooks in ``xdist.py``, registered only when pytest-xdist is installed.

Loaded by every pytest run where pytest-ncp is installed, so it imports nothing heavy: no litellm,
yaml, pydantic or syrupy at import time, and without a narrator configured it collects nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..core.config import episode_key
from ..core.exit_codes import EXIT_COST_CAP, EXIT_ERROR_BUDGET
from . import options
from .fixtures import (  # noqa: F401 - fixtures register through the plugin module
    load_spec, ncp_api_base, ncp_auditor, ncp_client, ncp_demo_server, ncp_fork, ncp_model_server, ncp_narrator,
    ncp_settings, ncp_snapshot, run_episode, scripted_player,
)
from .options import SETTINGS_KEY
from .session import SESSION_KEY, NcpSession


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hooks

    pluginmanager.add_hookspecs(hooks)


def _xdist_workers(config: pytest.Config) -> int:
    """How many pytest-xdist workers run the session's tests (0 without xdist), in the controller and in every
    worker alike: each has its own model client, and the cost cap is shared out between them (``cap_share``)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return int(workerinput.get("workercount", 1))
    n = getattr(config.option, "numprocesses", None)  # xdist resolves "auto" before pytest_configure
    return n if isinstance(n, int) and n > 0 and config.pluginmanager.hasplugin("xdist") else 0


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    if early_config.pluginmanager.hasplugin("xdist"):
        from .xdist import default_dist

        default_dist(early_config, args)  # -n without --dist: --dist loadscope


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{options.MARKER}(**settings): a pytest-ncp narrative test; as a marker on "
                                       "a hand-written test, overrides run_episode settings (max_turns, player, ...)")
    settings = options.resolve(config)
    config.stash[SETTINGS_KEY] = settings
    from .collect import bundled_args

    bundled_args(config, settings.specs)
    if not settings.enabled:
        return
    if settings.options.get("estimate"):
        from .estimate import print_estimate

        print_estimate(config, settings)  # then exits 0: nothing is collected or run, no model is called
    if config.pluginmanager.hasplugin("xdist"):
        from .xdist import check_dist

        check_dist(config)
    is_worker = hasattr(config, "workerinput")
    trace_root = settings.report or _trace_root(config)
    from .sequential import STOP_FILE_KEY

    stop_file = getattr(config, "workerinput", {}).get(STOP_FILE_KEY)  # --ncp-sequential under xdist
    ncp = config.stash[SESSION_KEY] = NcpSession(settings, is_worker=is_worker, trace_root=trace_root,
                                                 workers=_xdist_workers(config), stop_file=stop_file,
                                                 hook=config.hook)
    config.pluginmanager.register(_ReportListener(ncp), "ncp-reports")
    if not is_worker:
        from .gate import GateItems, selection

        ncp.selection = selection(config)
        config.pluginmanager.register(GateItems(ncp), "ncp-gate")
    from .collect import add_default_spec_paths

    add_default_spec_paths(config, settings.specs)
    from .collect import add_failures_path

    add_failures_path(config, settings.failures, settings.failures_only)
    if config.pluginmanager.hasplugin("xdist"):
        from .xdist import XdistHooks

        config.pluginmanager.register(XdistHooks(), "ncp-xdist")


def _trace_root(config: pytest.Config) -> Path:
    """Where traces go without --ncp-report: pytest's cache directory, or, when the cache is off
    (``-p no:cacheprovider``), a fresh temporary directory, so no ``.pytest_cache`` appears."""
    if config.pluginmanager.has_plugin("cacheprovider"):
        return Path(config.rootpath) / str(config.getini("cache_dir")) / "ncp"
    import tempfile

    return Path(tempfile.mkdtemp(prefix="pytest-ncp-traces-"))


def _ncp(config: pytest.Config) -> NcpSession | None:
    return config.stash.get(SESSION_KEY, None)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    # Spec files are collected the pytest way, so paths and node ids on the command line, -k, --lf,
    # --ff and --sw select them like any test file (collect.is_spec_file says which YAML files count).
    ncp = _ncp(parent.config)
    if ncp is None or file_path.suffix not in (".yaml", ".yml", ".jsonl"):
        return None
    from .collect import FailureFile, SpecFile, is_failure_file, is_spec_file

    if file_path.suffix == ".jsonl":
        if is_failure_file(parent.config, ncp.settings.failures, file_path):
            return FailureFile.from_parent(parent, path=file_path)
        return None

    if not is_spec_file(parent.config, ncp.settings.specs, file_path):
        return None
    return SpecFile.from_parent(parent, path=file_path)


def pytest_sessionstart(session: pytest.Session) -> None:
    ncp = _ncp(session.config)
    if ncp is None or ncp.is_worker or session.config.option.collectonly:
        return
    if _xdist_workers(session.config):  # the controller collects nothing: it checks before the workers start
        _preflight(session, ncp)
    # Auditor canaries run once, on the controller, beside the episodes. Not in pytest_runtestloop: under
    # xdist the controller's own runtestloop answers that hook first and ours never runs.
    ncp.start_canaries()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    options.check_markers(config, items)  # also without a narrator: run_episode reads the marker in any test
    ncp = _ncp(config)
    if ncp is None:
        return
    from .collect import _SpecItem

    ncp.stop.order_items(items, _SpecItem)  # --ncp-sequential: spec tests in their episodes' seeded order
    if ncp.settings.failures is None:
        return
    from .collect import failures_first

    failures_first(config, items, ncp.settings.failures_only)


def pytest_runtest_setup(item: pytest.Item) -> None:
    options.fail_on_marker_problems(item)


def pytest_collection_finish(session: pytest.Session) -> None:
    ncp = _ncp(session.config)
    if ncp is None or ncp.is_worker:
        return
    from .collect import _SpecItem

    # The episodes the selected spec tests read (after -k, --lf, deselection): results.json is complete, and
    # a gate can decide, only once every one of them has reported. (Under xdist the controller collects
    # nothing; XdistHooks learns them from the workers' collections instead.)
    ncp.expect(episode_key(i.spec.id, i.repeat) for i in session.items if isinstance(i, _SpecItem))
    if not _xdist_workers(session.config):  # under xdist the controller collects nothing itself
        if not session.config.option.collectonly and any(isinstance(i, _SpecItem) for i in session.items):
            _preflight(session, ncp)  # only a session that will play episodes calls their endpoints
        from .collect import no_spec_collected_line

        line = no_spec_collected_line(session.config, ncp.settings.specs, session.items)
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if line is not None and reporter is not None:
            reporter.write_line(line, yellow=True)


def _preflight(session: pytest.Session, ncp: NcpSession) -> None:
    """A broken endpoint stops the session before any episode, in seconds, with one message (exit 6)."""
    broken = ncp.preflight()
    if broken is None:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(broken, red=True)
    pytest.exit("pytest-ncp: a model endpoint is broken (above)" if reporter is not None else broken,
                returncode=EXIT_ERROR_BUDGET)


def pytest_runtestloop(session: pytest.Session) -> None:
    ncp = _ncp(session.config)
    if ncp is None or ncp.is_worker or session.config.option.collectonly:
        return
    from .collect import EpisodeItem

    ncp.started = True  # tests run (not --collect-only, --fixtures): the session will have a verdict
    # Start every selected episode now, so they run concurrently while items report in order.
    ncp.prefetch([(i.spec, i.repeat) for i in session.items if isinstance(i, EpisodeItem)])
    from .collect import ForkItem

    for item in session.items:  # stored failures too: each samples its turn concurrently with the rest
        if isinstance(item, ForkItem):
            ncp.fork(item.stored)


def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    ncp = _ncp(item.config)
    if ncp is None or not ncp.is_worker:
        return
    from .collect import _SpecItem

    # An xdist worker learns its items one at a time: start the next item's episode now, so it runs
    # while this one is reported (the controller's prefetch covers runs without xdist).
    ncp.prefetch([(i.spec, i.repeat) for i in (item, nextitem) if isinstance(i, _SpecItem)])


class _ReportListener:
    """Registered only when a narrator is configured: feeds every report to the session's merger
    (on the xdist controller, reports arrive from all workers)."""

    def __init__(self, ncp: NcpSession):
        self.ncp = ncp

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.user_properties:
            # A skipped setup is an unknown outcome within --ncp-max-error-rate: it still counts.
            self.ncp.record_report(report.nodeid, report.when, report.failed or report.skipped,
                                   report.user_properties)

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # Ctrl-C, pytest.exit(), errors during collection: the verdict then cannot decide, and the summary
        # says how to resume.
        self.ncp.interrupted = True


@pytest.hookimpl(tryfirst=True)  # before junitxml writes its file, so the canary properties reach it
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    ncp = _ncp(session.config)
    if ncp is None:
        return
    code = ncp.conclude()
    if ncp.status_before_items is not None and session.exitstatus in (
            pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = ncp.status_before_items  # what the tests alone gave: the verdict's code follows
    from .gate import report_items

    report_items(session.config, ncp)  # when the test loop never ended (collection errors, Ctrl-C)
    # An exceeded error budget (6) and a cost cap that cut episodes short (7) have their own exit codes, over
    # "tests failed": the run proves nothing either way, or is not the run that was asked for.
    if code in (EXIT_ERROR_BUDGET, EXIT_COST_CAP) and session.exitstatus in (pytest.ExitCode.OK,
                                                                             pytest.ExitCode.TESTS_FAILED):
        session.exitstatus = code
    elif code and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    try:
        from _pytest.junitxml import xml_key  # private: guarded, a pytest without it just gets no properties
    except ImportError:  # pragma: no cover
        return
    xml = session.config.stash.get(xml_key, None)
    if xml is not None:
        for name, value in ncp.junit_properties():
            xml.add_global_property(name, value)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    ncp = _ncp(config)
    if ncp is None:
        return
    lines = ncp.summary_lines()
    if lines:
        terminalreporter.write_sep("=", "ncp: narrative commitment preservation")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: Any, right: Any) -> list[str] | None:
    from .assertions import explain_comparison

    return explain_comparison(op, left, right)
