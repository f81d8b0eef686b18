"""Fixtures for hand-written narrator tests (registered through the plugin module, ``plugin/__init__.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import pytest

from . import options
from .options import SETTINGS_KEY

if TYPE_CHECKING:
    from syrupy.assertion import SnapshotAssertion

    from ..core.spec import NarrativeSpec
    from ..engine.auditor import LLMAuditor
    from ..engine.episode import EpisodeResult
    from ..engine.fork import EpisodeState, ForkOutcome
    from ..engine.narrators import NarratorFactory
    from ..engine.players import ScriptedPlayer
    from ..llm import ModelClient
    from ..testing import ScriptedModelServer


@pytest.fixture
def ncp_settings(request: pytest.FixtureRequest) -> options.Settings:
    """The resolved ``--ncp-*`` / ``ncp_*`` settings of this session."""
    return request.config.stash[SETTINGS_KEY]


@pytest.fixture
def ncp_model_server() -> Iterator[ScriptedModelServer]:
    """A scripted OpenAI-compatible server on 127.0.0.1 (``pytest_ncp.testing.ScriptedModelServer``)."""
    from ..testing import ScriptedModelServer

    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def ncp_api_base(ncp_settings: options.Settings) -> str | None:
    """Endpoint for every role; override it (e.g. with ``ncp_model_server.base_url``) to test offline."""
    return ncp_settings.run.api_base


@pytest.fixture
def ncp_client(request: pytest.FixtureRequest, ncp_api_base: str | None,
               ncp_settings: options.Settings) -> Iterator[ModelClient]:
    """The model client of hand-written tests; with ``--ncp-record-mode`` its calls go through cassettes
    kept per test (``<cassettes>/<test file>/<test name>/``)."""
    from ..llm import ModelClient

    client = ModelClient.from_config(ncp_settings.run, api_base=ncp_api_base)
    run = ncp_settings.run
    cassettes = None
    if run.record_mode and run.cassettes:
        import re

        from ..llm.cassette import CassetteTransport

        where = Path(run.cassettes) / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.path.stem) / re.sub(
            r"[^A-Za-z0-9_.-]+", "_", request.node.name)
        cassettes = CassetteTransport(run.record_mode, where, client.model_call)
        client.transport = cassettes
    yield client
    if cassettes is not None:
        cassettes.flush()


@pytest.fixture
def ncp_narrator(ncp_settings: options.Settings) -> NarratorFactory:
    """Factory of the narrator under test (``--ncp-narrator``); override it to test another narrator."""
    if not ncp_settings.run.narrator:
        pytest.fail("no narrator configured: pass --ncp-narrator=module:Attr, set ini ncp_narrator, "
                    "or override the ncp_narrator fixture", pytrace=False)
    from ..engine.narrators import load_narrator

    return load_narrator(ncp_settings.run.narrator)


@pytest.fixture
def ncp_auditor(ncp_client: ModelClient, ncp_settings: options.Settings) -> LLMAuditor:
    """The fixed LLM auditor with ``--ncp-auditor-model`` (and ``--ncp-audit-votes``)."""
    from ..engine.auditor import LLMAuditor

    return LLMAuditor.from_config(ncp_settings.run, ncp_client)


@pytest.fixture
def scripted_player() -> Callable[[Sequence[str]], ScriptedPlayer]:
    """``scripted_player(["I open the door.", ...])`` -> a player that says these, in order."""
    from ..engine.players import ScriptedPlayer

    return ScriptedPlayer


@pytest.fixture
def load_spec(request: pytest.FixtureRequest) -> Callable[[str | Path], NarrativeSpec]:
    """``load_spec("specs/caligari.yaml")`` (relative to the rootdir) -> a validated NarrativeSpec."""
    from ..core.spec import load_spec as _load

    def load(path: str | Path) -> NarrativeSpec:
        p = Path(path)
        return _load(p if p.is_absolute() or p.exists() else Path(request.config.rootpath) / p)

    return load


@pytest.fixture
def run_episode(request: pytest.FixtureRequest, ncp_settings: options.Settings, ncp_auditor: LLMAuditor,
                ncp_client: ModelClient,
                load_spec: Callable[..., NarrativeSpec], tmp_path: Path) -> Callable[..., EpisodeResult]:
    """``run_episode(spec, narrator=..., player=..., max_turns=...)`` -> EpisodeResult.

    Precedence for each setting: the call's argument > ``@pytest.mark.ncp(...)`` > ``--ncp-*`` / ini.
    ``spec`` is a NarrativeSpec or a path; ``narrator`` an instance, class or factory (default: the
    ``ncp_narrator`` fixture, looked up only when needed); ``player`` a Player or a list of inputs
    (default: the spec's script). Each call writes its own trace under the test's tmp_path.
    """
    import asyncio
    import itertools
    from dataclasses import replace

    from ..engine.episode import Episode
    from ..engine.players import ScriptedPlayer, make_player

    marker = request.node.get_closest_marker(options.MARKER)
    marked: dict[str, Any] = dict(marker.kwargs) if marker else {}
    # The marker's settings (checked at collection: options.MARKER_ARGUMENTS, each a RunConfig field) over the
    # session's, as a new value: the stored settings stay as they are.
    overrides: dict[str, Any] = {k: v for k, v in marked.items() if k in options.MARKER_ARGUMENTS}
    config = replace(ncp_settings.run, **overrides)
    calls = itertools.count(1)

    def run(spec: Any, *, narrator: Any = None, player: Any = None, max_turns: int | None = None,
            auditor: Any = None, repeat: int = 0) -> EpisodeResult:
        spec = spec if hasattr(spec, "commitments") else load_spec(spec)
        if narrator is None:
            narrator = request.getfixturevalue("ncp_narrator")
        if isinstance(narrator, type) or not hasattr(narrator, "respond"):
            narrator = narrator()  # a class or a factory: a fresh narrator for this episode
        if player is None:
            player = make_player(config.player, spec, client=ncp_client, model=config.player_model)
        elif isinstance(player, (list, tuple)):
            player = ScriptedPlayer(player)
        episode = Episode.from_config(
            spec, config, narrator=narrator, player=player, auditor=auditor or ncp_auditor, client=ncp_client,
            repeat=repeat, max_turns=int(max_turns) if max_turns else None,
            trace_path=tmp_path / f"{spec.id}--r{repeat}--{next(calls)}.jsonl",
        )
        return asyncio.run(episode.run())

    return run


class ForkAt:
    """What ``ncp_fork`` is: call it for the state before a turn of a recorded trace, ``sample`` to play it."""

    def __init__(self, request: pytest.FixtureRequest, auditor: LLMAuditor, client: ModelClient,
                 settings: options.Settings) -> None:
        self._request, self._auditor, self._client, self._settings = request, auditor, client, settings

    def __call__(self, trace_path: str | Path, turn: int) -> EpisodeState:
        from ..engine.fork import EpisodeState

        p = Path(trace_path)
        return EpisodeState.at(p if p.is_absolute() or p.exists() else Path(self._request.config.rootpath) / p, turn)

    def sample(self, state: EpisodeState, *, narrator: Any = None, samples: int = 3, continue_turns: int = 0,
               spec: NarrativeSpec | None = None) -> ForkOutcome:
        import asyncio

        from ..engine.fork import fork

        narrator = narrator if narrator is not None else self._request.getfixturevalue("ncp_narrator")
        factory = narrator if isinstance(narrator, type) or not hasattr(narrator, "respond") else (lambda: narrator)
        return asyncio.run(fork(state, spec or state.load_spec(), self._settings.run, narrator_factory=factory,
                                auditor=self._auditor, samples=samples, continue_turns=continue_turns,
                                client=self._client))


@pytest.fixture
def ncp_fork(request: pytest.FixtureRequest, ncp_auditor: LLMAuditor, ncp_client: ModelClient,
             ncp_settings: options.Settings) -> ForkAt:
    """``ncp_fork(trace_path, turn)`` -> the ``EpisodeState`` just before ``turn`` of a recorded trace (or a
    stored failure of ``--ncp-failures``): ledger, node index and remembered trigger, commitment states,
    transcript and history, the player's input at ``turn``, spec fingerprint and prompt version.

    ``state.load_spec()`` loads the recorded spec and refuses one whose fingerprint changed;
    ``ncp_fork.sample(state, narrator=..., samples=3)`` plays ``turn`` from it with this test's auditor and
    client and returns a ``ForkOutcome`` (``.rate``, ``.conflicts``, ``.results``). A relative trace path is
    taken from the rootdir.
    """
    return ForkAt(request, ncp_auditor, ncp_client, ncp_settings)


@pytest.fixture
def ncp_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """syrupy's ``snapshot`` with pytest-ncp's extension: stable, readable JSON of verdicts and episodes."""
    from .snapshot import NcpSnapshotExtension

    return snapshot.use_extension(NcpSnapshotExtension)
