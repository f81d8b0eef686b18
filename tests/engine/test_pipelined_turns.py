"""Pipelined turns (turn t+1 played while turn t is audited) give exactly the sequential schedule's results.

Everything goes through the scripted server: the narrator is the built-in LLM narrator (or the
memory narrator), so its calls are real requests that can be played ahead and discarded.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from pytest_ncp.core.config import RunConfig
from pytest_ncp.engine.narrators import LLMNarrator, MemoryNarrator
from pytest_ncp.engine.players import ScriptedPlayer
from pytest_ncp.engine.runner import Runner
from pytest_ncp.plugin.snapshot import normalise
from pytest_ncp.core.spec import load_spec
from pytest_ncp.core.traces import read_trace
from tests.conftest import FIXTURES, ListNarrator


def conflict(quote, kind="fact", facts=("F2",), commitments=()):
    return {"conflicts": [{"type": kind, "fact_ids": list(facts), "commitment_ids": list(commitments),
                           "quote": quote, "explanation": "Alan was stated dead."}]}


def scene(request):
    """The narration of turn t is 'Scene t ...': t is the number of player messages in the prompt."""
    turn = sum(1 for m in request.body["messages"] if m["role"] == "user")
    return f"Scene {turn}: the lamps burn low over Holstenwall."


class Memory(MemoryNarrator):
    recent_turns, chunk, max_summaries = 2, 2, 2


SCENARIOS = {
    "conflict": dict(rules=[dict(step="conflict_check", contains="TURN 3.", reply=conflict("Scene 3: the lamps burn low"))], turns=6),
    # The achievements name trajectory nodes: success comes when the story has walked them all (8 turns).
    "success": dict(rules=[dict(step="trajectory_update", reply={
        "trigger_event_occurred": True, "key_delta_occurred": True, "evidence": "the lamps burn low"})],
        turns=10),
    "error": dict(rules=[dict(step="fact_update", contains="TURN 2.", reply="this is not JSON")], turns=6),
    "narrator-error": dict(rules=[dict(role="narrator", regex=r"turn 3\.", status=400)], turns=6),
    "script-end": dict(rules=[], turns=8, inputs=3),
    "turn-limit": dict(rules=[dict(step="fact_update", contains="TURN 2.", reply={
        "added": [{"text": "The lamps burn low.", "quote": "the lamps burn low"}], "negated": []})], turns=4),
}


def run(server, out, *, pipeline, narrator=LLMNarrator, scenario, latency=0.0, repeats=2, then=None):
    server.reset()
    server.latency = latency
    server.add(role="narrator", reply=scene)
    for rule in SCENARIOS[scenario]["rules"]:
        server.add(**rule)
    if then is not None:  # rules added last win
        then(server)
    inputs = [f"I act, turn {i}." for i in range(1, SCENARIOS[scenario].get("inputs", 50) + 1)]
    config = RunConfig(narrator="unused:X", narrator_model="openai/narrator", auditor_model="openai/auditor",
                       api_base=server.base_url, max_turns=SCENARIOS[scenario]["turns"], repeats=repeats,
                       pipeline=pipeline, max_retries=0)
    runner = Runner(config, out_dir=out, narrator_factory=narrator,
                    player_factory=lambda spec: ScriptedPlayer(inputs))
    results = asyncio.run(runner.run([load_spec(FIXTURES / "caligari.yaml")]))
    return results, json.loads((out / "results.json").read_text())


def _stable_trace(path):
    records = []
    for r in read_trace(path).events:
        r = dict(r)
        r.pop("speculative", None)
        for c in r.get("auditor_calls", []):
            c.pop("latency_s")
        if "auditor_calls" in r:  # the audit steps run concurrently: listed in the order they answered
            r["auditor_calls"] = sorted(r["auditor_calls"], key=lambda c: json.dumps(c, sort_keys=True))
        records.append(r)
    return records


@pytest.mark.parametrize("narrator", [LLMNarrator, Memory], ids=["llm", "memory"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_pipelined_and_sequential_schedules_give_identical_results(ncp_model_server, tmp_path, scenario, narrator):
    seq_results, sequential = run(ncp_model_server, tmp_path / "seq", pipeline=False, scenario=scenario,
                                  narrator=narrator)
    pipe_results, pipelined = run(ncp_model_server, tmp_path / "pipe", pipeline=True, scenario=scenario,
                                  narrator=narrator)
    for data in (sequential, pipelined):
        for e in data["episodes"]:
            assert set(e.pop("speculative")) == {"calls", "tokens", "cost_usd"}
    assert pipelined == sequential
    expected = {"conflict": "conflict:fact", "success": "success", "error": "error", "narrator-error": "error",
                "script-end": "script_exhausted", "turn-limit": "turn_limit"}[scenario]
    assert [e["termination"] for e in pipelined["episodes"]] == [expected, expected]
    for name in ("caligari--r0.jsonl", "caligari--r1.jsonl"):
        assert _stable_trace(tmp_path / "pipe" / "traces" / name) == _stable_trace(tmp_path / "seq" / "traces" / name)
    # What verdict snapshots and JUnit properties are made of.
    assert [normalise(r) for r in pipe_results] == [normalise(r) for r in seq_results]
    assert [r.transcript for r in pipe_results] == [r.transcript for r in seq_results]


def test_a_discarded_speculative_turn_is_reported_apart_and_nowhere_else(ncp_model_server, tmp_path):
    # Turn 3's conflict check waits at the server until the narration of turn 4, played ahead, has been answered.
    def after_turn_four_narrated(server):
        import threading
        import time

        stop = threading.Event()

        def held(request):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not any(
                    r.role == "narrator" and "turn 4." in r.text and r.status == 200 for r in server.requests):
                stop.wait(0.01)
            return conflict("Scene 3: the lamps burn low")

        server.add(step="conflict_check", contains="TURN 3.", reply=held, times=1)

    results, data = run(ncp_model_server, tmp_path, pipeline=True, scenario="conflict", then=after_turn_four_narrated)
    result = results[0]
    narrated = [r for r in ncp_model_server.requests if r.role == "narrator" and "turn 4." in r.text]
    assert narrated, "turn 4 was played ahead"
    assert result.turns == 3 and [t.turn for t in result.transcript] == [1, 2, 3]
    assert all("Scene 4" not in t.response for t in result.transcript)
    assert [r["turn"] for r in read_trace(result.trace).of("turn")] == [1, 2, 3]
    assert result.speculative.calls == 1 and result.speculative.tokens > 0
    assert data["episodes"][0]["speculative"]["calls"] == 1
    # Episode tokens count kept turns only: the same as the sequential schedule's.
    _, sequential = run(ncp_model_server, tmp_path / "seq", pipeline=False, scenario="conflict")
    assert data["episodes"][0]["tokens"] == sequential["episodes"][0]["tokens"]
    assert sequential["episodes"][0]["speculative"] == {"calls": 0, "tokens": 0, "cost_usd": 0.0}
    assert "Scene 4" not in json.dumps(normalise(result))


def hold_turn_three(server, in_flight):
    """Turn 3's audit requests and turn 4's narration wait at the server until ``in_flight`` requests are there at
    once (or 10 s pass): the overlap the test counts is made by the schedule under test, not by a latency that a
    busy machine may outrun. Afterwards every request is answered at once."""
    import threading
    import time

    opened, stop = threading.Event(), threading.Event()

    def hold():
        deadline = time.monotonic() + 10
        while not opened.is_set() and server.max_in_flight < in_flight and time.monotonic() < deadline:
            stop.wait(0.01)
        opened.set()

    def held(request):
        hold()
        return scene(request) if request.role == "narrator" else None

    server.add(role="auditor", contains="TURN 3.", reply=held)
    server.add(role="narrator", regex=r"turn 4\.", reply=held)


def test_the_next_narration_overlaps_the_audit(ncp_model_server, tmp_path):
    run(ncp_model_server, tmp_path / "seq", pipeline=False, scenario="turn-limit", repeats=1,
        then=lambda server: hold_turn_three(server, 4))
    assert ncp_model_server.max_in_flight == 4  # the four audit steps, then the narrator alone
    run(ncp_model_server, tmp_path / "pipe", pipeline=True, scenario="turn-limit", repeats=1,
        then=lambda server: hold_turn_three(server, 5))
    assert ncp_model_server.max_in_flight == 5  # the four audit steps and the next narration


class Counting(ListNarrator):
    """A stateful narrator that does not declare itself speculation-safe."""

    def __init__(self):
        super().__init__(["The fair is loud.", "Cesare stirs.", "Alan laughs at the door.", "Morning comes."])
        self.calls = []

    def respond(self, player_input, context):
        self.calls.append(context.turn)
        return super().respond(player_input, context)


class CountingSafe(Counting):
    speculation_safe = True


@pytest.mark.parametrize("kind", [Counting, CountingSafe], ids=["undeclared", "declared"])
def test_only_speculation_safe_narrators_are_called_ahead(ncp_model_server, tmp_path, kind):
    built = []

    def factory():
        built.append(kind())
        return built[-1]

    def go(pipeline, out):
        built.clear()
        ncp_model_server.reset()
        ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=conflict("Alan laughs at the door"))
        config = RunConfig(narrator="unused:X", auditor_model="openai/auditor", api_base=ncp_model_server.base_url,
                           max_turns=6, pipeline=pipeline)
        runner = Runner(config, out_dir=out, narrator_factory=factory,
                        player_factory=lambda spec: ScriptedPlayer(["I wait."] * 10))
        result = asyncio.run(runner.run([load_spec(FIXTURES / "caligari.yaml")]))[0]
        assert result.termination.value == "conflict:fact" and result.turns == 3
        return built[0].calls

    sequential, pipelined = go(False, tmp_path / "seq"), go(True, tmp_path / "pipe")
    assert sequential == [1, 2, 3]
    # Undeclared: exactly the sequential calls. Declared: the same calls, then one dropped extra.
    assert pipelined == ([1, 2, 3, 4] if kind is CountingSafe else [1, 2, 3])


def test_no_pipeline_options_reach_the_run(tmp_path):
    from pytest_ncp.cli import _parser

    args = _parser().parse_args(["run", "--narrator", "m:N", "--no-pipeline"])
    assert args.no_pipeline is True
    assert "pipeline" not in RunConfig(pipeline=False).to_dict()  # a schedule, not a result-changing setting
