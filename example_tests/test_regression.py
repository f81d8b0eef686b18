"""Regression tests a studio writes for its narrator, runnable offline.

The scripted model server stands in for both the studio's model and the auditor, so each test states
exactly what the auditor will find; with a real auditor the same tests gate a prompt or model change.
"""

from __future__ import annotations

import pytest

from pytest_ncp import assert_commitment, assert_no_conflict, assert_termination
from studio_narrator import StudioNarrator


@pytest.fixture
def ncp_narrator():
    # Override the plugin's fixture: these tests are about StudioNarrator, whatever --ncp-narrator says.
    return StudioNarrator


@pytest.mark.ncp(max_turns=4)
def test_scripted_opening_survives(run_episode, scripted_player, specs_dir, ncp_model_server):
    ncp_model_server.add(role="narrator", reply="The fair's lanterns swing as you walk, and Alan hums beside you.")
    player = scripted_player(["I walk to the fair with Alan.", "I look for the showman's booth."])
    result = run_episode(specs_dir / "caligari.yaml", player=player)
    assert_no_conflict(result)
    assert_termination(result, "script_exhausted")
    # The studio's prompt template reached the model, with the spec filled in.
    first = next(r for r in ncp_model_server.requests if r.role == "narrator")
    assert "game master of \"The Cabinet of Dr. Caligari\"" in first.text


def test_narrator_that_kills_alan_early_is_caught(run_episode, specs_dir, ncp_model_server):
    ncp_model_server.add(role="narrator", reply="Alan lies dead in the street before the fair even opens.")
    ncp_model_server.add(step="conflict_check", reply={"conflicts": [{
        "type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": "Alan lies dead",
        "explanation": "F2 says Alan is alive; nothing in the story has killed him yet."}]})
    result = run_episode(specs_dir / "caligari.yaml", max_turns=3)
    assert_termination(result, "conflict:fact")
    assert result.failure.turn == 1 and result.failure.fact_ids == ["F2"]


def test_the_sleepwalker_rule_holds(run_episode, specs_dir, ncp_model_server):
    # C1: Cesare acts only at Caligari's command. A narration that keeps him obedient must not
    # be flagged, and the rule then holds through the episode.
    ncp_model_server.add(role="narrator", reply="Cesare stands motionless until the showman taps the cabinet.")
    result = run_episode(specs_dir / "caligari.yaml", player=["I watch the cabinet."], max_turns=2)
    assert_commitment(result, "C1", "HELD")
