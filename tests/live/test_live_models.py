"""One short episode against real models: the wire contract holds with a provider's structured output.

    python -m pytest tests/live --live-models [--live-auditor-model M] [--live-narrator-model M]
"""

from __future__ import annotations

import asyncio

from pytest_ncp.engine.auditor import LLMAuditor
from pytest_ncp.engine.episode import Episode, Termination
from pytest_ncp.llm import ModelClient
from pytest_ncp.engine.narrators import LLMNarrator
from pytest_ncp.engine.players import ScriptedPlayer
from pytest_ncp.core.spec import load_spec
from tests.conftest import SPECS


def test_a_real_narrator_and_auditor_complete_two_turns(request, tmp_path):
    client = ModelClient(max_retries=2)
    spec = load_spec(SPECS / "caligari.yaml")
    episode = Episode(
        spec=spec, narrator=LLMNarrator(), player=ScriptedPlayer(spec.scripted_inputs[:2]),
        auditor=LLMAuditor(client, request.config.getoption("--live-auditor-model")), max_turns=2, client=client,
        narrator_model=request.config.getoption("--live-narrator-model"), trace_path=tmp_path / "live.jsonl",
    )
    result = asyncio.run(episode.run())
    assert result.termination is not Termination.ERROR, result.error
    assert len(result.audits) == result.turns >= 1
    for audit in result.audits:
        assert audit.fact_update is not None and audit.trajectory is not None
    assert result.usage.tokens > 0
