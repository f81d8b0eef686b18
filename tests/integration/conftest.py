"""A throwaway studio project for black-box plugin tests: a narrator module, specs, a scripted server."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from tests.conftest import FIXTURES

AGENT = textwrap.dedent('''
    class Narrator:
        """Answers every action the same way; the scripted auditor decides what that means."""

        def respond(self, player_input, context):
            return f"The fair is loud. You {player_input.lower().rstrip('.')}."

    class Exploding(Narrator):
        def respond(self, player_input, context):
            if context.turn == 2:
                raise RuntimeError("narrator backend fell over")
            return super().respond(player_input, context)
''')

INI = "[pytest]\npythonpath = .\n"

FACT_CONFLICT = {"conflicts": [{"type": "fact", "fact_ids": ["F2"], "commitment_ids": [],
                                "quote": "The fair is loud", "explanation": "Alan was said to be away."}]}


def caligari_text() -> str:
    """The caligari fixture with its two achievements named by facts, not trajectory nodes: the scripted
    auditor of these plugin tests can then end an episode in success at any turn (``succeed_at``), which
    an achievement that names nodes only reaches once the story has walked them (Episode._claimable)."""
    text = (FIXTURES / "caligari.yaml").read_text()
    for node in ("asylum-revealed", "caligari-restrained"):
        assert f"    depends_on: [{node}]\n" in text
        text = text.replace(f"    depends_on: [{node}]\n", "    depends_on: [F1]\n", 1)
    return text


class Project:
    def __init__(self, pytester: pytest.Pytester, server: Any):
        self.pytester, self.server = pytester, server
        pytester.makepyfile(agent=AGENT)
        # What a studio does to make its narrator module importable by --ncp-narrator (README): pytest's
        # own `pythonpath` ini key (tests that write their own ini add it too).
        pytester.makeini(INI)
        (pytester.path / "specs").mkdir()
        (pytester.path / "specs" / "caligari.yaml").write_text(caligari_text())

    def add_spec(self, name: str, text: str) -> None:
        (self.pytester.path / "specs" / name).write_text(text)

    def twin(self, spec_id: str, title: str | None = None) -> None:
        text = caligari_text().replace("id: caligari\n", f"id: {spec_id}\n", 1)
        if title is not None:  # prompts name the story by title: a distinct title tells episodes apart
            text = text.replace("title: The Cabinet of Dr. Caligari\n", f"title: {title}\n", 1)
        self.add_spec(f"{spec_id}.yaml", text)

    def args(self, *extra: str, narrator: str = "agent:Narrator", max_turns: int = 4) -> list[str]:
        return [f"--ncp-narrator={narrator}", f"--ncp-api-base={self.server.base_url}",
                f"--ncp-max-turns={max_turns}", "-p", "no:randomly", *extra]

    def run(self, *extra: str, **kw: Any) -> pytest.RunResult:
        return self.pytester.runpytest(*self.args(*extra, **kw))

    def run_subprocess(self, *extra: str, **kw: Any) -> pytest.RunResult:
        return self.pytester.runpytest_subprocess(*self.args(*extra, **kw), timeout=180)

    def succeed_at(self, turn: int) -> None:
        """The scripted auditor finds both achievements of the Caligari spec fulfilled at ``turn``."""
        self.server.add(step="commitment_check", contains=f"TURN {turn}.", reply={"satisfied": [
            {"commitment_id": "C5", "evidence": "The fair is loud"},
            {"commitment_id": "C6", "evidence": "The fair is loud."}]})

    def conflict_at(self, turn: int, answer: dict = FACT_CONFLICT, spec: str | None = None) -> None:
        marker = f"TURN {turn}."
        self.server.add(step="conflict_check", contains=marker, reply=answer,
                        **({"regex": rf"STORY: {spec}\b"} if spec else {}))


@pytest.fixture(scope="session", autouse=True)
def _import_once() -> None:
    # In-process pytester runs drop the modules they imported when they end; the next run imports them
    # again beside objects still held from the first (pydantic models, yaml loaders, the aiohttp session
    # of the lean path), and breaks. Importing the engine and the libraries it loads lazily here, once,
    # keeps every inner run on the same module objects. litellm is not among them (seconds to import):
    # every model of these tests is openai/..., which takes the lean path.
    import aiohttp  # noqa: F401
    import jinja2  # noqa: F401
    import yaml  # noqa: F401

    import pytest_ncp.analysis.results  # noqa: F401
    import pytest_ncp.engine.runner  # noqa: F401
    import pytest_ncp.llm.cassette  # noqa: F401
    import pytest_ncp.llm.openai_compat  # noqa: F401
    import pytest_ncp.plugin.collect  # noqa: F401
    import pytest_ncp.plugin.session  # noqa: F401
    import pytest_ncp.report.html  # noqa: F401


@pytest.fixture
def project(pytester: pytest.Pytester, ncp_model_server: Any) -> Project:
    return Project(pytester, ncp_model_server)
