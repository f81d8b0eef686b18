"""A failure pinned as a hand-written test: rebuild the state just before the failing turn, check what the
story held there, and sample that turn again with the narrator (offline: the scripted server plays the
studio's model and the auditor)."""

from __future__ import annotations

import pytest

from pytest_ncp.testing import opening
from studio_narrator import StudioNarrator

DEAD_ALAN = "Alan laughs at the door, alive and well, and waves you inside."
CONFLICT = {"conflicts": [{"type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": "Alan laughs at the door",
                           "explanation": "The narration contradicts F2."}]}


@pytest.fixture
def ncp_narrator():
    return StudioNarrator


def slips_at_turn_3(third_input):
    """The studio's model: it brings dead Alan back when answering the third action."""
    def reply(request):
        last = request.body["messages"][-1]["content"]
        return DEAD_ALAN if third_input in str(last) else "The fair's lanterns swing in the wind."
    return reply


@pytest.fixture
def failing_trace(run_episode, load_spec, ncp_model_server):
    """A nightly run's trace, recorded here: the studio's model slips at turn 3."""
    spec = load_spec("ncp-bench/caligari.yaml")
    ncp_model_server.add(role="narrator", reply=slips_at_turn_3(spec.scripted_inputs[2]))
    # opening("narration"): the narration's data block in the audit prompt (its delimiter changes per call).
    ncp_model_server.add(step="conflict_check", regex=opening("narration") + r"[^<]*Alan laughs", reply=CONFLICT)
    result = run_episode("ncp-bench/caligari.yaml", max_turns=5)
    assert result.failure is not None and result.failure.turn == 3
    return result.trace


def test_the_state_before_the_failure_is_rebuilt(ncp_fork, failing_trace):
    state = ncp_fork(failing_trace, 3)
    assert len(state.history) == 2 and state.player_input
    assert state.ledger.is_active("F2")  # the fact the failing turn contradicted was in force
    assert state.spec_fingerprint == state.load_spec().fingerprint


def test_the_failing_turn_resampled_after_the_fix(ncp_fork, failing_trace, ncp_model_server):
    state = ncp_fork(failing_trace, 3)
    assert ncp_fork.sample(state, samples=2).rate == 1.0  # the same model answer: the same verdict
    ncp_model_server.add(role="narrator", reply="Alan's grave lies quiet beneath the rain.")  # the fixed model
    outcome = ncp_fork.sample(state, samples=3)
    assert outcome.rate == 0.0 and not outcome.conflicts
