"""Concurrency, rate limits, bounded prompts, record/replay and resume."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from pytest_ncp.core.config import RunConfig
from pytest_ncp.llm import AdaptiveLimiter, ModelClient
from pytest_ncp.engine.players import ScriptedPlayer
from pytest_ncp.engine.runner import Runner
from pytest_ncp.core.spec import parse_spec
from tests.conftest import FIXTURES, SPECS, ListNarrator, hold_until_in_flight
from pytest_ncp.testing import data_blocks

SECRET = "sk-proj-SECRETSECRET0123456789"


def twins(n):
    text = (FIXTURES / "caligari.yaml").read_text()
    return [parse_spec(text.replace("id: caligari\n", f"id: story-{i}\n", 1)
                       .replace("title: The Cabinet of Dr. Caligari", f"title: Story {i}", 1), f"story-{i}.yaml")
            for i in range(n)]


def runner(server, tmp_path, narrator=None, api_base=None, **config):
    settings = dict(narrator="unused:X", auditor_model="openai/auditor", api_base=api_base or server.base_url,
                    max_turns=3)
    settings.update(config)
    return Runner(RunConfig(**settings), out_dir=tmp_path,
                  narrator_factory=narrator or (lambda: ListNarrator(["The fair is loud."])),
                  player_factory=lambda spec: ScriptedPlayer(["I wait and watch."] * 100))


def test_a_turns_four_audit_steps_are_in_flight_together(ncp_model_server, tmp_path):
    # Two turns: with the default `auto` mode the run's first structured call finds the endpoint's
    # output mode alone; every later turn sends its four steps at once (held at the server until they are all
    # there, or 10 s: a turn that sent them one by one would count 1).
    hold_until_in_flight(ncp_model_server, 4, role="auditor", contains="TURN 2.")
    asyncio.run(runner(ncp_model_server, tmp_path, max_turns=2).run(twins(1)))
    assert ncp_model_server.max_in_flight == 4


def test_episode_concurrency_bound_is_respected(ncp_model_server, tmp_path):
    # Turn 2's audits wait at the server until a second episode's calls are in flight beside them (or 10 s).
    hold_until_in_flight(ncp_model_server, 5, role="auditor", contains="TURN 2.")
    results = asyncio.run(runner(ncp_model_server, tmp_path, concurrency=2).run(twins(6)))
    assert [r.spec.id for r in results] == [f"story-{i}" for i in range(6)]  # input order
    # Two episodes at a time, four audit calls each.
    assert 4 < ncp_model_server.max_in_flight <= 8


def test_call_limiter_bounds_requests_in_flight(ncp_model_server):
    ncp_model_server.latency = 0.05
    client = ModelClient(api_base=ncp_model_server.base_url, concurrency=1)  # 5 call slots

    async def many():
        await asyncio.gather(*(client.complete("narrator", "openai/n", [{"role": "user", "content": str(i)}])
                               for i in range(12)))

    asyncio.run(many())
    assert ncp_model_server.max_in_flight == 5


def test_rate_limit_storm_halves_the_limit_then_it_recovers(ncp_model_server):
    ncp_model_server.add(status=429, headers={"Retry-After": "0"}, times=6)
    client = ModelClient(api_base=ncp_model_server.base_url, concurrency=4, backoff=0.0, max_retries=10)

    async def storm():
        await asyncio.gather(*(client.complete("narrator", "openai/n", [{"role": "user", "content": str(i)}])
                               for i in range(8)))
        limiter = client.limiter("openai/n")
        lowered = limiter.limit
        for i in range(200):
            await client.complete("narrator", "openai/n", [{"role": "user", "content": f"calm {i}"}])
        return lowered, limiter.limit, limiter.max_limit

    lowered, recovered, top = asyncio.run(storm())
    assert lowered < top
    assert recovered == top
    assert sum(r.status == 429 for r in ncp_model_server.requests) == 6


def test_limiter_never_drops_below_one():
    async def go():
        limiter = AdaptiveLimiter(2)
        for _ in range(5):
            limiter.throttled()
        return limiter.limit

    assert asyncio.run(go()) == 1


def test_auditor_prompts_do_not_grow_with_the_turn(ncp_model_server, tmp_path):
    asyncio.run(runner(ncp_model_server, tmp_path, max_turns=30).run(twins(1)))
    checks = {int(re.search(r"TURN (\d+)\.", r.text).group(1)): r.text
              for r in ncp_model_server.requests if r.step == "conflict_check"}
    # Same ledger, same narration each turn: only the turn number's digits may differ.
    assert abs(len(checks[30]) - len(checks[3])) <= 2
    assert len(data_blocks(checks[30], "previous_narration")) == len(data_blocks(checks[3], "previous_narration")) == 1


def spec_of(request):
    found = re.search(r"STORY: (Story \d+)\.", request.text)
    return found.group(1) if found else None


def test_record_then_replay_with_the_server_stopped(ncp_model_server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", regex="Story 1", reply={"conflicts": [{
        "type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": "The fair is loud", "explanation": "x"}]})
    cassettes = tmp_path / "cassettes"
    recorded = asyncio.run(runner(ncp_model_server, tmp_path / "a", record_mode="once",
                                  cassettes=str(cassettes)).run(twins(2)))
    address = ncp_model_server.base_url
    ncp_model_server.stop()
    replayed = asyncio.run(runner(ncp_model_server, tmp_path / "b", api_base=address, record_mode="none",
                                  cassettes=str(cassettes)).run(twins(2)))
    assert [r.verdicts for r in replayed] == [r.verdicts for r in recorded]
    assert [r.termination for r in replayed] == [r.termination for r in recorded]
    assert replayed[1].termination.value == "conflict:fact"
    texts = "".join(p.read_text() for p in cassettes.glob("*.yaml"))
    assert SECRET not in texts and "Authorization" not in texts and "127.0.0.1" not in texts
    assert sorted(p.name for p in cassettes.glob("*.yaml")) == ["story-0--r0.yaml", "story-1--r0.yaml"]
    assert "step: conflict_check" in texts  # readable YAML, not a blob


def test_replay_miss_names_the_closest_recorded_request(ncp_model_server, tmp_path):
    cassettes = tmp_path / "cassettes"
    asyncio.run(runner(ncp_model_server, tmp_path / "a", record_mode="once", cassettes=str(cassettes),
                       max_turns=1).run(twins(1)))
    changed = runner(ncp_model_server, tmp_path / "b", record_mode="none", cassettes=str(cassettes), max_turns=1,
                     narrator=lambda: ListNarrator(["The fair is silent."]))
    result = asyncio.run(changed.run(twins(1)))[0]
    assert result.termination.value == "error" and result.error.kind == "model"
    assert "closest recorded request differs" in result.error.message
    assert "-[user]" in result.error.message and "The fair is silent." in result.error.message


def test_new_episodes_records_only_what_is_missing(ncp_model_server, tmp_path):
    cassettes = tmp_path / "cassettes"
    asyncio.run(runner(ncp_model_server, tmp_path / "a", record_mode="once", cassettes=str(cassettes),
                       max_turns=1).run(twins(1)))
    before = len(ncp_model_server.requests)
    asyncio.run(runner(ncp_model_server, tmp_path / "b", record_mode="new_episodes", cassettes=str(cassettes),
                       max_turns=2).run(twins(1)))
    assert len(ncp_model_server.requests) - before == 4  # turn 2's audit only; turn 1 replayed


def test_killed_run_resumes_without_rerunning_finished_episodes(ncp_model_server, tmp_path):
    specs = twins(4)
    first = runner(ncp_model_server, tmp_path, concurrency=1)

    async def run_until_two_done():
        task = asyncio.ensure_future(first.run(specs))
        while len(first.results) < 2:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run_until_two_done())
    done = set(first.results)
    assert len(done) >= 2
    saved = json.loads((tmp_path / "results.json").read_text())
    assert {f"{e['spec_id']}--r{e['repeat']}" for e in saved["episodes"]} == done
    ncp_model_server.reset()

    second = runner(ncp_model_server, tmp_path, concurrency=1)
    assert second.resume() == len(done)
    results = asyncio.run(second.run(specs))
    assert [r.termination.value for r in results] == ["turn_limit"] * 4
    rerun = {spec_of(r) for r in ncp_model_server.requests if r.step == "conflict_check"}
    assert rerun == {f"Story {i}" for i in range(4)} - {f"Story {k.split('--')[0].split('-')[1]}" for k in done}
    final = json.loads((tmp_path / "results.json").read_text())
    assert final["metrics"]["episodes"] == 4
    # Resumed and new episodes alike record their trace relative to the results folder.
    assert [e["trace"] for e in final["episodes"]] == [f"traces/{e['spec_id']}--r0.jsonl" for e in final["episodes"]]
    # Finished episodes come back whole from their traces.
    kept = next(r for r in results if f"{r.spec.id}--r0" in done)
    assert len(kept.transcript) == 3 and len(kept.audits) == 3


def test_once_keeps_recording_an_episode_while_others_finish(ncp_model_server, tmp_path):
    # story-0 ends first (its cassette is flushed) while story-1 is still mid-recording.
    ncp_model_server.add(step="conflict_check", contains="TURN 1.", regex="Story 0", reply={"conflicts": [{
        "type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": "The fair is loud", "explanation": "x"}]})
    ncp_model_server.add(step="conflict_confirmation", regex="Story 1", delay=0.2, reply={
        "confirmed": False, "explanation": "no"})
    ncp_model_server.add(step="conflict_check", contains="TURN 1.", regex="Story 1", reply={"conflicts": [{
        "type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": "The fair is loud", "explanation": "x"}]})
    results = asyncio.run(runner(ncp_model_server, tmp_path, record_mode="once",
                                 cassettes=str(tmp_path / "cassettes")).run(twins(2)))
    assert [r.termination.value for r in results] == ["conflict:fact", "turn_limit"]


def test_results_json_is_complete_only_once_the_run_ends(ncp_model_server, tmp_path):
    # Rewritten as every episode ends: until the last one and the run's end it says "running".
    seen = []
    r = runner(ncp_model_server, tmp_path, max_turns=2)
    r.on_episode = lambda result: seen.append(json.loads((tmp_path / "results.json").read_text())
                                              if (tmp_path / "results.json").exists() else None)
    asyncio.run(r.run(twins(3)))
    assert len(seen) == 3
    # on_episode runs before the file is rewritten: it holds the episodes before this one, never "complete".
    assert all(s is None or (not s["complete"] and s["stopped"] == "running") for s in seen)
    final = json.loads((tmp_path / "results.json").read_text())
    assert final["complete"] and final["stopped"] is None
    assert final["expected"] == final["finished"] == [f"story-{i}--r0" for i in range(3)]


def test_resume_runs_again_an_episode_whose_end_record_the_results_model_refuses(ncp_model_server, tmp_path):
    # A trace end written by another version or edited by hand: kept as it is, results.json could not be written.
    asyncio.run(runner(ncp_model_server, tmp_path, max_turns=2).run(twins(2)))
    trace = tmp_path / "traces" / "story-0--r0.jsonl"
    lines = trace.read_text().splitlines()
    end = json.loads(lines[-1])
    lines[-1] = json.dumps({**end, "termination": "exploded"})
    trace.write_text("\n".join(lines) + "\n")
    again = runner(ncp_model_server, tmp_path, max_turns=2)
    assert again.resume() == 1
    assert again.unreadable and again.unreadable[0].startswith("story-0--r0: Input should be")
    asyncio.run(again.run(twins(2)))
    final = json.loads((tmp_path / "results.json").read_text())
    assert final["complete"] and [e["termination"] for e in final["episodes"]] == ["turn_limit", "turn_limit"]
