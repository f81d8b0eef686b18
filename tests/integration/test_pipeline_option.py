"""--ncp-no-pipeline: the plugin's sequential reference schedule, with the same outcomes as the default."""

from __future__ import annotations

import json


def scene(request):
    """Turn t's narration is 'Scene t. The fair is loud.' (t = player messages in the prompt)."""
    turn = sum(1 for m in request.body["messages"] if m["role"] == "user")
    return f"Scene {turn}. The fair is loud."


def test_no_pipeline_gives_the_same_outcomes_without_playing_ahead(project, tmp_path):
    def narrations():
        return sum(r.role == "narrator" for r in project.server.requests)

    project.server.latency = 0.05  # the narration played ahead answers before the conflict is confirmed
    outcomes = {}
    for flags in ((), ("--ncp-no-pipeline",)):
        project.server.reset()
        project.conflict_at(2)
        project.server.add(role="narrator", reply=scene)
        report = tmp_path / ("seq" if flags else "pipe")
        result = project.run(*flags, f"--ncp-report={report}", "--ncp-narrator-model=openai/narrator",
                             f"--junitxml={report / 'junit.xml'}", narrator="pytest_ncp.narrators:LLMNarrator")
        # The narration of turn 3 exists only as a dropped speculative turn: nowhere in the outputs.
        assert "Scene 3" not in (report / "junit.xml").read_text()
        assert "Scene 2" in (report / "junit.xml").read_text()
        assert not any("Scene 3" in p.read_text() for p in (report / "traces").glob("*.jsonl"))
        episodes = json.loads((report / "results.json").read_text())["episodes"]
        outcomes[flags] = (result.parseoutcomes(), [(e["termination"], e["turns"], e["tokens"]) for e in episodes])
        # Turn 3 is played ahead (and dropped) by default; never asked for in the sequential schedule.
        assert narrations() == (2 if flags else 3)
        assert episodes[0]["speculative"]["calls"] == (0 if flags else 1)
    assert outcomes[()] == outcomes[("--ncp-no-pipeline",)]
    assert outcomes[()][1][0][:2] == ("conflict:fact", 2)
