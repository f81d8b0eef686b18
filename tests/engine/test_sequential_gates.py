"""``ncp run --sequential`` on the scripted server: gates that stop as soon as the verdict is certain.

Every test runs the same specs twice, fixed and sequential, and compares what the server was asked (its requests
are the model calls: fewer episodes run means fewer requests) and what the run decided.
"""

from __future__ import annotations

import json
import re

import pytest

from pytest_ncp.analysis.sequential_run import episode_order
from pytest_ncp.cli import main
from tests.conftest import FIXTURES

QUOTE = "The lamps gutter as the night wears on"  # the scripted server's default narration
CONFLICT = {"conflicts": [{"type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": QUOTE,
                           "explanation": "Alan was said to be away."}]}


def write_specs(folder, n):
    folder.mkdir()
    text = (FIXTURES / "caligari.yaml").read_text()
    for i in range(n):
        (folder / f"story-{i:02d}.yaml").write_text(
            text.replace("id: caligari\n", f"id: story-{i:02d}\n", 1)
                .replace("title: The Cabinet of Dr. Caligari", f"title: Story {i:02d}", 1))
    return folder


def ncp_run(server, specs, out, *extra, gate="0.4@3", seed="0"):
    """``ncp run`` of the built-in LLM narrator (the server's narration) over ``specs``; returns (code, requests).

    ``seed``: the episode order these tests expect (None: the run draws its own, as a sequential run does)."""
    before = len(server.requests)
    seeded = ["--seed", seed] if seed is not None and "--seed" not in extra else []
    code = main(["run", "--narrator", "pytest_ncp.narrators:LLMNarrator", "--narrator-model", "openai/narrator",
                 "--specs", str(specs), "--api-base", server.base_url, "--auditor-model", "openai/auditor",
                 "--max-turns", "3", "--concurrency", "3", "--min-survival", gate, "--out", str(out), *seeded,
                 *extra])
    return code, len(server.requests) - before


def results(out):
    return json.loads((out / "results.json").read_text())


def conflicts_in(server, stories):
    """The auditor confirms a conflict at turn 2 in each of these stories (by title)."""
    for title in stories:
        server.add(step="conflict_check", contains="TURN 2.", regex=rf"STORY: {title}\.", reply=CONFLICT)


def test_a_narrator_that_never_conflicts_passes_early_with_fewer_calls(ncp_model_server, tmp_path, capsys):
    specs = write_specs(tmp_path / "specs", 30)
    fixed_code, fixed_calls = ncp_run(ncp_model_server, specs, tmp_path / "fixed")
    code, calls = ncp_run(ncp_model_server, specs, tmp_path / "seq", "--sequential")
    printed = capsys.readouterr().out
    assert code == fixed_code == 0
    data = results(tmp_path / "seq")
    seq = data["sequential"]
    assert seq["stopped"] and seq["stopped_by"] == "gate" and seq["gate"]["decision"] == "pass"
    assert seq["decided_after"] == 7 and seq["planned"] == 30  # seven survivors certify 40% at alpha 0.05
    ran = len(data["episodes"])
    # Those in flight when it decided finish too: with three slots a few, more when an early one was slow.
    assert 7 <= ran <= 15 and seq["started"] == ran and len(seq["unstarted"]) == 30 - ran
    assert calls < fixed_calls * ran / 30 + 10  # the calls are the episodes that ran
    assert data["complete"] and sorted(data["expected"]) == sorted(data["finished"])
    assert "ncp sequential: decided after 7 of 30 episodes (gate): no new episode starts" in printed
    assert "ncp survival gate PASSED (sequential): decided after 7 of 30 episodes" in printed
    # The episodes that ran are the first of the seeded order, whatever order they finished in.
    order = [f"{s}--r{r}" for s, r in episode_order([(f"story-{i:02d}", 0) for i in range(30)], 0)]
    assert set(data["finished"]) == set(order[:ran])
    assert [o["episode"] for o in seq["outcomes"]] == order[:ran]
    assert results(tmp_path / "fixed").get("sequential") is None


def test_a_narrator_that_always_conflicts_at_turn_2_fails_early_with_the_fixed_verdict(ncp_model_server, tmp_path,
                                                                                       capsys):
    specs = write_specs(tmp_path / "specs", 30)
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", reply=CONFLICT)
    fixed_code, fixed_calls = ncp_run(ncp_model_server, specs, tmp_path / "fixed")
    code, calls = ncp_run(ncp_model_server, specs, tmp_path / "seq", "--sequential")
    printed = capsys.readouterr().out
    assert code == fixed_code == 1
    assert "ncp survival gate FAILED: survival@3 = 0.0%" in printed  # the fixed run's own sentence
    seq = results(tmp_path / "seq")["sequential"]
    assert seq["gate"]["decision"] == "fail" and seq["decided_after"] == 13
    assert "ncp survival gate FAILED (sequential): decided after 13 of 30 episodes" in printed
    assert len(results(tmp_path / "seq")["episodes"]) <= 20
    assert calls < 0.6 * fixed_calls


def test_a_borderline_narrator_does_not_stop_early_and_gets_the_fixed_verdict(ncp_model_server, tmp_path, capsys):
    specs = write_specs(tmp_path / "specs", 20)
    conflicts_in(ncp_model_server, [f"Story {i:02d}" for i in range(0, 20, 2)])  # half of the stories
    fixed_code, fixed_calls = ncp_run(ncp_model_server, specs, tmp_path / "fixed", gate="0.5@3")
    code, calls = ncp_run(ncp_model_server, specs, tmp_path / "seq", "--sequential", gate="0.5@3")
    printed = capsys.readouterr().out
    assert code == fixed_code == 0  # 50% >= 50%: the fixed rule passes, and so does the undecided sequential run
    seq = results(tmp_path / "seq")["sequential"]
    assert not seq["stopped"] and seq["gate"]["decision"] is None and seq["unstarted"] == []
    assert calls == fixed_calls and len(results(tmp_path / "seq")["episodes"]) == 20
    assert "ncp sequential gate: undecided after all 20 episodes" in printed
    assert "ncp survival gate PASSED: survival@3 = 50.0%" in printed
    fixed, seq_run = results(tmp_path / "fixed"), results(tmp_path / "seq")
    assert fixed["metrics"]["survival_point"] == seq_run["metrics"]["survival_point"]


def story_order(server, since):
    """The stories in the order their first narrator request reached the server (the start order)."""
    seen = []
    for r in server.requests[since:]:
        found = re.search(r"Story (\d\d)", r.text) if r.role == "narrator" else None
        if found and found.group(1) not in seen:
            seen.append(found.group(1))
    return seen


def test_episodes_start_in_the_seeded_order_reproducibly(ncp_model_server, tmp_path):
    specs = write_specs(tmp_path / "specs", 8)
    starts = []
    for out, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        since = len(ncp_model_server.requests)
        assert main(["run", "--narrator", "pytest_ncp.narrators:LLMNarrator", "--narrator-model", "openai/narrator",
                     "--specs", str(specs), "--api-base", ncp_model_server.base_url, "--auditor-model", "openai/a",
                     "--max-turns", "1", "--concurrency", "1", "--seed", seed, "--out", str(tmp_path / out)]) == 0
        starts.append(story_order(ncp_model_server, since))
        assert results(tmp_path / out)["config"]["seed"] == int(seed)
    expected = [s.split("-")[1] for s, _ in episode_order([(f"story-{i:02d}", 0) for i in range(8)], 3)]
    assert starts[0] == starts[1] == expected
    assert starts[2] != starts[0] and sorted(starts[2]) == sorted(expected)
    # The results are those of the run, whatever the order: the same episodes, the same records.
    a, c = results(tmp_path / "a"), results(tmp_path / "c")
    assert [e["termination"] for e in a["episodes"]] == [e["termination"] for e in c["episodes"]]


def test_cancel_ends_the_episodes_in_flight_as_censored(ncp_model_server, tmp_path, capsys):
    specs = write_specs(tmp_path / "specs", 20)
    order = episode_order([(f"story-{i:02d}", 0) for i in range(20)], 0)
    # The first 13 episodes of the start order conflict at turn 2, which fails the gate; the later ones would
    # survive 30 turns, so those started by then are in flight when the gate decides.
    conflicts_in(ncp_model_server, [f"Story {s.split('-')[1]}" for s, _ in order[:13]])
    ncp_model_server.latency = 0.01
    code, _ = ncp_run(ncp_model_server, specs, tmp_path / "seq", "--sequential", "--sequential-cancel",
                      "--max-turns", "30", "--concurrency", "6")
    printed = capsys.readouterr().out
    assert code == 1
    data = results(tmp_path / "seq")
    cancelled = [e for e in data["episodes"] if e["termination"] == "cancelled"]
    assert cancelled and all(e["turns"] < 30 and e["failure"] is None for e in cancelled)
    assert data["sequential"]["cancelled"] == sorted(f"{e['spec_id']}--r{e['repeat']}" for e in cancelled)
    assert data["complete"] and data["metrics"]["unknown"] == 0  # censored, never an unknown outcome
    assert "are cancelled at their next turn" in printed


def hold_until_decided(server, out, titles):
    """Audit requests of these stories wait at the server until the parent's results.json says the sequential
    gate stopped (or 60 s pass): how far a run gets before it decides is then the schedule's, not the machine's."""
    import threading
    import time

    never = threading.Event()

    def held(request):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if (results(out).get("sequential") or {}).get("stopped"):
                    return None
            except (OSError, ValueError):  # not written yet
                pass
            never.wait(0.02)
        return None

    server.add(role="auditor", regex=rf"STORY: (?:{'|'.join(map(re.escape, titles))})\.", reply=held)


def test_workers_hand_out_no_episode_once_the_parent_decided(ncp_model_server, tmp_path, capsys):
    specs = write_specs(tmp_path / "specs", 30)
    fixed_code, fixed_calls = ncp_run(ncp_model_server, specs, tmp_path / "fixed", "--workers", "2")
    # The first 7 episodes of the run's order decide it; the ones after wait at the server until it has decided.
    order = episode_order([(f"story-{i:02d}", 0) for i in range(30)], 0)
    hold_until_decided(ncp_model_server, tmp_path / "seq", [f"Story {s.split('-')[1]}" for s, _ in order[7:]])
    code, calls = ncp_run(ncp_model_server, specs, tmp_path / "seq", "--workers", "2", "--sequential")
    printed = capsys.readouterr().out
    assert code == fixed_code == 0
    data = results(tmp_path / "seq")
    ran = len(data["episodes"])
    # Two workers, two slots each: at most the 4 episodes in flight when it decided finish after it, and none of
    # the others is handed out (the server never hears of them).
    assert data["sequential"]["decided_after"] == 7 and 7 <= ran <= 7 + 4
    unstarted = data["sequential"]["unstarted"]
    assert len(unstarted) == 30 - ran and data["complete"]
    asked = {m.group(1) for r in ncp_model_server.requests[-calls:] if (m := re.search(r"STORY: (Story \d+)\.", r.text))}
    assert not asked & {f"Story {key.split('--')[0].split('-')[1]}" for key in unstarted}
    assert calls < fixed_calls * ran / 30 + 10
    assert "ncp survival gate PASSED (sequential): decided after 7 of 30 episodes" in printed


def test_workers_cancel_their_episodes_in_flight_when_told(ncp_model_server, tmp_path):
    specs = write_specs(tmp_path / "specs", 20)
    order = episode_order([(f"story-{i:02d}", 0) for i in range(20)], 0)
    conflicts_in(ncp_model_server, [f"Story {s.split('-')[1]}" for s, _ in order[:13]])
    ncp_model_server.latency = 0.01
    code, _ = ncp_run(ncp_model_server, specs, tmp_path / "seq", "--workers", "2", "--sequential",
                      "--sequential-cancel", "--max-turns", "30", "--concurrency", "6")
    assert code == 1
    data = results(tmp_path / "seq")
    assert data["sequential"]["gate"]["decision"] == "fail" and data["sequential"]["cancelled"]
    assert all(e["turns"] < 30 for e in data["episodes"]) and data["complete"]


def test_sequential_shards_stop_on_their_alpha_share_and_merge_by_their_e_values(ncp_model_server, tmp_path,
                                                                                   capsys):
    specs = write_specs(tmp_path / "specs", 30)
    every = [(f"story-{i:02d}", 0) for i in range(30)]
    for i in (1, 2):
        code, _ = ncp_run(ncp_model_server, specs, tmp_path / f"shard-{i}", "--shard", f"{i}/2", "--sequential",
                          "--seed", "0")
        assert code == 0
        part = results(tmp_path / f"shard-{i}")
        seq = part["sequential"]
        # Dealt from the run's seeded order: this shard's slice, run or left unstarted.
        assert sorted(part["expected"] + seq["unstarted"]) == sorted(f"{s}--r{r}" for s, r in
                                                                     episode_order(every, 0, (i, 2)))
        assert seq["alpha"] == 0.025 and seq["shards"] == 2 and seq["gate"]["decision"] == "pass"
        assert seq["decided_after"] == 8 and seq["unstarted"]  # alpha / 2 costs one more episode than 7
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "shard-1"), str(tmp_path / "shard-2"), "--out", str(tmp_path / "all")]) == 0
    printed = capsys.readouterr().out
    assert "ncp sequential gate over 2 shard(s) (mean of their e-values): PASSED" in printed
    merged = results(tmp_path / "all")
    assert merged["complete"] and merged["sequential"]["merged"]["decision"] == "pass"
    assert merged["sequential"]["merged"]["e_pass"] >= 2 / 0.05
    assert len(merged["sequential"]["unstarted"]) == 30 - len(merged["episodes"])


@pytest.mark.parametrize("bad, message", [
    (["--sequential"], "--sequential needs --min-survival RATE[@TURN] (the survival gate it decides early)"),
    (["--sequential-cancel", "--min-survival", "0.4"], "--sequential-cancel needs --sequential"),
    (["--sequential-alpha", "1.5"], "--sequential-alpha='1.5': expected a number within (0, 1)"),
    (["--seed", "-1"], "--seed='-1': expected a whole number >= 0"),
    (["--sequential", "--min-survival", "0.4", "--shard", "1/2"], "--shard with --sequential needs --seed"),
])
def test_bad_sequential_options_are_usage_errors(bad, message, tmp_path, capsys):
    assert main(["run", "--narrator", "pytest_ncp.narrators:LLMNarrator", "--specs", str(FIXTURES / "caligari.yaml"),
                 *bad]) == 2
    assert message in capsys.readouterr().err


def test_a_sequential_run_draws_its_own_seed_and_records_it(ncp_model_server, tmp_path, capsys):
    # A fixed default order lets a narrator be good on exactly the episodes that decide early.
    specs = write_specs(tmp_path / "specs", 8)
    seeds, orders = [], []
    for out in ("a", "b"):
        since = len(ncp_model_server.requests)
        code, _ = ncp_run(ncp_model_server, specs, tmp_path / out, "--sequential", "--concurrency", "1", seed=None)
        assert code == 0
        seed = results(tmp_path / out)["config"]["seed"]
        assert results(tmp_path / out)["sequential"]["seed"] == seed
        seeds.append(seed)
        every = [(f"story-{i:02d}", 0) for i in range(8)]
        started = story_order(ncp_model_server, since)
        assert started == [s.split("-")[1] for s, _ in episode_order(every, seed)][:len(started)]
    assert seeds[0] != seeds[1]
    # --seed reproduces a run's order.
    since = len(ncp_model_server.requests)
    assert ncp_run(ncp_model_server, specs, tmp_path / "again", "--sequential", "--concurrency", "1",
                   "--seed", str(seeds[0]))[0] == 0
    assert results(tmp_path / "again")["config"]["seed"] == seeds[0]
