"""Fixtures shared by the project's own tests: a scripted narrator and episode runners over litellm."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Sequence

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


class ListNarrator:
    """Answers turn t with responses[t-1]; an opening when given. Stands in for the agent under test."""

    def __init__(self, responses: Sequence[str], opening: str | None = None):
        self.responses, self._opening = list(responses), opening

    def opening(self) -> str | None:
        return self._opening

    def respond(self, player_input: str, context: Any) -> str:
        return self.responses[(context.turn - 1) % len(self.responses)]


@pytest.fixture
def caligari():
    """A frozen, lint-clean copy of the caligari spec: engine tests do not move when specs/ is rewritten."""
    from pytest_ncp.core.spec import load_spec

    return load_spec(FIXTURES / "caligari.yaml")


@pytest.fixture
def play(ncp_model_server, tmp_path):
    """play(spec, responses, max_turns=..., narrator=..., inputs=...) -> EpisodeResult through the server."""
    from pytest_ncp.engine.auditor import LLMAuditor
    from pytest_ncp.engine.episode import Episode
    from pytest_ncp.llm import ModelClient
    from pytest_ncp.engine.players import ScriptedPlayer

    def run(spec, responses=("The night passes quietly.",), *, max_turns=5, narrator=None, inputs=None,
            trace=True, client=None, **kw):
        client = client or ModelClient(api_base=ncp_model_server.base_url, backoff=0.01, max_backoff=0.05)
        episode = Episode(
            spec=spec, narrator=narrator or ListNarrator(responses),
            player=ScriptedPlayer(inputs or [f"I act, turn {i}." for i in range(1, 200)]),
            auditor=LLMAuditor(client, "openai/auditor"), max_turns=max_turns, client=client,
            trace_path=tmp_path / f"{spec.id}.jsonl" if trace else None, **kw,
        )
        return asyncio.run(episode.run())

    return run


def caligari_twins(folder: Path, n: int) -> list[str]:
    """``n`` copies of the caligari fixture in ``folder`` as specs ``twin-0`` .. (other ids and titles): the paths."""
    text = (FIXTURES / "caligari.yaml").read_text()
    files = []
    for i in range(n):
        twin = text.replace("id: caligari\n", f"id: twin-{i}\n", 1).replace(
            "title: The Cabinet of Dr. Caligari\n", f"title: Twin {i}\n", 1)
        (folder / f"twin-{i}.yaml").write_text(twin)
        files.append(str(folder / f"twin-{i}.yaml"))
    return files


def edit(text: str, old: str, new: str) -> str:
    """``text`` with one occurrence of ``old`` replaced (lint tests edit a known-good spec)."""
    assert text.count(old) == 1, f"{old!r} must occur once in the test spec"
    return text.replace(old, new)


def lint(text: str) -> list:
    from pytest_ncp.lint import lint_spec
    from pytest_ncp.core.spec import parse_spec

    return lint_spec(parse_spec(text, "s.yaml"))


def line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "packaging: builds the wheel and runs it from a fresh environment (slow; "
                                       "select with -m packaging)")


def hold_until_in_flight(server: Any, in_flight: int, **match: Any) -> Any:
    """Requests matching ``match`` (a ``ScriptedModelServer.add`` rule) wait at the server until ``in_flight``
    requests are there at once, or 10 s pass; then every request is answered at once. An overlap a test counts is
    then made by the schedule under test, not by a latency that a busy machine may outrun."""
    import threading
    import time

    opened, stop = threading.Event(), threading.Event()

    def held(request: Any) -> None:
        deadline = time.monotonic() + 10
        while not opened.is_set() and server.max_in_flight < in_flight and time.monotonic() < deadline:
            stop.wait(0.01)
        opened.set()

    return server.add(reply=held, **match)
