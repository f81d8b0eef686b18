"""Snapshot the auditor's verdicts on a fixed transcript: a prompt or auditor-model change that alters
a judgment shows up as a snapshot diff in review (update with --snapshot-update)."""

from __future__ import annotations

from pytest_ncp import ScriptedPlayer

TRANSCRIPT = [
    ("I walk with Alan to the fair.", "The fair is a tangle of painted tents; Alan drags you towards a crowd."),
    ("I ask who the showman is.", "A hunched man in a top hat bows and invites you to see his sleepwalker."),
]


class FixedTranscript:
    """Replays recorded narrations, so only the auditor is under test."""

    def respond(self, player_input, context):
        return TRANSCRIPT[context.turn - 1][1]


def test_verdicts_on_a_fixed_transcript(run_episode, specs_dir, ncp_model_server, ncp_snapshot):
    ncp_model_server.add(step="fact_update", contains="TURN 2.", reply={
        "added": [{"text": "A hunched showman in a top hat exhibits a sleepwalker.", "quote": "hunched man in a top hat"}],
        "negated": []})
    ncp_model_server.add(step="trajectory_update", contains="TURN 2.", reply={
        "trigger_event_occurred": True, "key_delta_occurred": True, "evidence": "invites you to see his sleepwalker"})
    result = run_episode(specs_dir / "caligari.yaml", narrator=FixedTranscript(),
                         player=ScriptedPlayer([said for said, _ in TRANSCRIPT]), max_turns=2)
    assert result.verdicts == ncp_snapshot
    assert result == ncp_snapshot
