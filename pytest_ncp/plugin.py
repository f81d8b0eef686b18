"""pytest entry point (``pytest11: ncp``). Hooks and fixtures only; each delegates to the core.

Loaded by every pytest run where pytest-ncp is installed, so it imports nothing heavy: no litellm,
yaml, pydantic or syrupy at import time, and without a narrator configured it collects nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import pytest

from . import options
from .exit_codes import EXIT_ERROR_BUDGET
from .options import SETTINGS_KEY
from .session import SESSION_KEY, NcpSession

if TYPE_CHECKING:
    from .episode import EpisodeResult
    from .spec import NarrativeSpec


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{options.MARKER}(**settings): a pytest-ncp narrative test; as a marker on "
                                       "a hand-written test, overrides run_episode settings (max_turns, player, ...)")
    settings = options.resolve(config)
    config.stash[SETTINGS_KEY] = settings
    if not settings.enabled:
        return
    is_worker = hasattr(config, "workerinput")
    trace_root = settings.report or _trace_root(config)
    ncp = config.stash[SESSION_KEY] = NcpSession(settings, is_worker=is_worker, trace_root=trace_root)
    config.pluginmanager.register(_ReportListener(ncp), "ncp-reports")
    from .collect import add_default_spec_paths

    add_default_spec_paths(config, settings.specs)
    from .collect import add_failures_path

    add_failures_path(config, settings.failures, settings.failures_only)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "ncp-xdist")


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
    # Auditor canaries run once, on the controller, beside the episodes. Not in pytest_runtestloop: under
    # xdist the controller's own runtestloop answers that hook first and ours never runs.
    ncp.start_canaries()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    ncp = _ncp(config)
    if ncp is None or ncp.settings.failures is None:
        return
    from .collect import failures_first

    failures_first(config, items, ncp.settings.failures_only)


def pytest_runtestloop(session: pytest.Session) -> None:
    ncp = _ncp(session.config)
    if ncp is None or ncp.is_worker or session.config.option.collectonly:
        return
    from .collect import EpisodeItem

    # Start every selected episode now, so they run concurrently while items report in order.
    ncp.prefetch([(i.spec, i.repeat) for i in session.items if isinstance(i, EpisodeItem)])
    from .collect import ForkItem

    for item in session.items:  # stored failures too: each samples its turn concurrently with the rest
        if isinstance(item, ForkItem):
            ncp.fork(item.stored)


class _XdistHooks:
    """Registered only when pytest-xdist is installed (its hooks are unknown to pytest otherwise)."""

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        # Every test of a (spec, repeat) reads one episode: they must run on one worker, or the
        # episode runs once per worker. Grouping by xdist_group marks depends on how each xdist
        # version rewrites node ids on the worker, so the grouping is done here, from node ids alone.
        if config.getvalue("dist") in ("load", "loadgroup", "worksteal"):
            from .collect import episode_scheduler

            return episode_scheduler(config, log)
        return None  # loadscope / loadfile keep a file together already; each runs everything anyway


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
        self.ncp.interrupted = True  # the summary then says how to resume


@pytest.hookimpl(tryfirst=True)  # before junitxml writes its file, so the canary properties reach it
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    ncp = _ncp(session.config)
    if ncp is None:
        return
    ncp.close()
    code = ncp.finish()
    # An exceeded error budget has its own exit code (6), over "tests failed": the run proves nothing.
    if code == EXIT_ERROR_BUDGET and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        session.exitstatus = EXIT_ERROR_BUDGET
    elif code and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    from _pytest.junitxml import xml_key

    xml = session.config.stash.get(xml_key, None)
    for name, value in ncp.junit_properties() if xml is not None else ():
        xml.add_global_property(name, value)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    ncp = _ncp(config)
    if ncp is None:
        return
    lines = ncp.summary_lines()
    if ncp.interrupted and ncp.settings.report:
        lines.append(f"interrupted: {len(ncp.episodes)} finished episode(s) are in {ncp.settings.report / 'results.json'}"
                     f"; run the same command with --ncp-resume to continue")
    if lines:
        terminalreporter.write_sep("=", "ncp: narrative commitment preservation")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: Any, right: Any) -> list[str] | None:
    from .assertions import explain_comparison

    return explain_comparison(op, left, right)


# --- fixtures for hand-written narrator tests --------------------------------------------------------


@pytest.fixture
def ncp_settings(request: pytest.FixtureRequest) -> options.Settings:
    """The resolved ``--ncp-*`` / ``ncp_*`` settings of this session."""
    return request.config.stash[SETTINGS_KEY]


@pytest.fixture
def ncp_model_server() -> Iterator[Any]:
    """A scripted OpenAI-compatible server on 127.0.0.1 (``pytest_ncp.testing.ScriptedModelServer``)."""
    from .testing import ScriptedModelServer

    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def ncp_api_base(ncp_settings: options.Settings) -> str | None:
    """Endpoint for every role; override it (e.g. with ``ncp_model_server.base_url``) to test offline."""
    return ncp_settings.run.api_base


@pytest.fixture
def ncp_client(request: pytest.FixtureRequest, ncp_api_base: str | None, ncp_settings: options.Settings) -> Iterator[Any]:
    """The model client of hand-written tests; with ``--ncp-record-mode`` its calls go through cassettes
    kept per test (``<cassettes>/<test file>/<test name>/``)."""
    from .llm import ModelClient

    client = ModelClient(**{**ncp_settings.run.client_options(), "api_base": ncp_api_base})
    run = ncp_settings.run
    cassettes = None
    if run.record_mode and run.cassettes:
        import re

        from .llm.cassette import CassetteTransport

        where = Path(run.cassettes) / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.path.stem) / re.sub(
            r"[^A-Za-z0-9_.-]+", "_", request.node.name)
        cassettes = CassetteTransport(run.record_mode, where, client.model_call)
        client.transport = cassettes
    yield client
    if cassettes is not None:
        cassettes.flush()


@pytest.fixture
def ncp_narrator(ncp_settings: options.Settings) -> Callable[[], Any]:
    """Factory of the narrator under test (``--ncp-narrator``); override it to test another narrator."""
    if not ncp_settings.run.narrator:
        pytest.fail("no narrator configured: pass --ncp-narrator=module:Attr, set ini ncp_narrator, "
                    "or override the ncp_narrator fixture", pytrace=False)
    from .narrators import load_narrator

    return load_narrator(ncp_settings.run.narrator)


@pytest.fixture
def ncp_auditor(ncp_client: Any, ncp_settings: options.Settings) -> Any:
    """The fixed LLM auditor with ``--ncp-auditor-model``."""
    from .auditor import LLMAuditor

    return LLMAuditor(ncp_client, ncp_settings.run.auditor_model)


@pytest.fixture
def scripted_player() -> Callable[[Sequence[str]], Any]:
    """``scripted_player(["I open the door.", ...])`` -> a player that says these, in order."""
    from .players import ScriptedPlayer

    return ScriptedPlayer


@pytest.fixture
def load_spec(request: pytest.FixtureRequest) -> Callable[[str | Path], NarrativeSpec]:
    """``load_spec("specs/caligari.yaml")`` (relative to the rootdir) -> a validated NarrativeSpec."""
    from .spec import load_spec as _load

    def load(path: str | Path) -> NarrativeSpec:
        p = Path(path)
        return _load(p if p.is_absolute() or p.exists() else Path(request.config.rootpath) / p)

    return load


@pytest.fixture
def run_episode(request: pytest.FixtureRequest, ncp_settings: options.Settings, ncp_auditor: Any, ncp_client: Any,
                load_spec: Callable[..., NarrativeSpec], tmp_path: Path) -> Callable[..., EpisodeResult]:
    """``run_episode(spec, narrator=..., player=..., max_turns=...)`` -> EpisodeResult.

    Precedence for each setting: the call's argument > ``@pytest.mark.ncp(...)`` > ``--ncp-*`` / ini.
    ``spec`` is a NarrativeSpec or a path; ``narrator`` an instance, class or factory (default: the
    ``ncp_narrator`` fixture, looked up only when needed); ``player`` a Player or a list of inputs
    (default: the spec's script). Each call writes its own trace under the test's tmp_path.
    """
    import asyncio
    import itertools

    from .episode import Episode
    from .players import ScriptedPlayer, make_player

    marker = request.node.get_closest_marker(options.MARKER)
    marked: dict[str, Any] = dict(marker.kwargs) if marker else {}
    calls = itertools.count(1)

    def run(spec: Any, *, narrator: Any = None, player: Any = None, max_turns: int | None = None,
            auditor: Any = None, repeat: int = 0) -> EpisodeResult:
        spec = spec if hasattr(spec, "commitments") else load_spec(spec)
        if narrator is None:
            narrator = request.getfixturevalue("ncp_narrator")
        if isinstance(narrator, type) or not hasattr(narrator, "respond"):
            narrator = narrator()  # a class or a factory: a fresh narrator for this episode
        if player is None:
            player = make_player(marked.get("player", ncp_settings.run.player), spec, client=ncp_client,
                                 model=marked.get("player_model", ncp_settings.run.player_model))
        elif isinstance(player, (list, tuple)):
            player = ScriptedPlayer(player)
        episode = Episode(
            spec=spec, narrator=narrator, player=player, auditor=auditor or ncp_auditor,
            max_turns=int(max_turns or marked.get("max_turns") or ncp_settings.run.max_turns), repeat=repeat,
            client=ncp_client, narrator_model=marked.get("narrator_model", ncp_settings.run.narrator_model),
            trace_path=tmp_path / f"{spec.id}--r{repeat}--{next(calls)}.jsonl", pipeline=ncp_settings.run.pipeline,
        )
        return asyncio.run(episode.run())

    return run


@pytest.fixture
def ncp_fork(request: pytest.FixtureRequest, ncp_auditor: Any, ncp_client: Any,
             ncp_settings: options.Settings) -> Callable[..., Any]:
    """``ncp_fork(trace_path, turn)`` -> the ``EpisodeState`` just before ``turn`` of a recorded trace (or a
    stored failure of ``--ncp-failures``): ledger, node index and remembered trigger, commitment states,
    transcript and history, the player's input at ``turn``, spec fingerprint and prompt version.

    ``state.load_spec()`` loads the recorded spec and refuses one whose fingerprint changed;
    ``ncp_fork.sample(state, narrator=..., samples=3)`` plays ``turn`` from it with this test's auditor and
    client and returns a ``ForkOutcome`` (``.rate``, ``.conflicts``, ``.results``). A relative trace path is
    taken from the rootdir.
    """
    import asyncio

    from .fork import EpisodeState, fork

    def at(trace_path: str | Path, turn: int) -> EpisodeState:
        p = Path(trace_path)
        return EpisodeState.at(p if p.is_absolute() or p.exists() else Path(request.config.rootpath) / p, turn)

    def sample(state: EpisodeState, *, narrator: Any = None, samples: int = 3, continue_turns: int = 0,
               spec: Any = None) -> Any:
        narrator = narrator if narrator is not None else request.getfixturevalue("ncp_narrator")
        factory = narrator if isinstance(narrator, type) or not hasattr(narrator, "respond") else (lambda: narrator)
        return asyncio.run(fork(state, spec or state.load_spec(), narrator_factory=factory, auditor=ncp_auditor,
                                samples=samples, continue_turns=continue_turns, client=ncp_client,
                                narrator_model=ncp_settings.run.narrator_model, pipeline=ncp_settings.run.pipeline))

    at.sample = sample  # type: ignore[attr-defined]
    return at


@pytest.fixture
def ncp_snapshot(snapshot: Any) -> Any:
    """syrupy's ``snapshot`` with pytest-ncp's extension: stable, readable JSON of verdicts and episodes."""
    from .snapshot import NcpSnapshotExtension

    return snapshot.use_extension(NcpSnapshotExtension)
