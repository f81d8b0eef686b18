"""``ncp stability``: a recorded run's ending turns and a seeded sample of clean turns, audited
again K times against a scripted flip pattern, give exactly the flip rates the pattern implies."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest

from pytest_ncp.analysis.metrics import wilson
from pytest_ncp.analysis.stability import flip_summary, flipped
from pytest_ncp.cli import main
from pytest_ncp.core.config import RunConfig
from pytest_ncp.engine.runner import Runner
from tests.conftest import ListNarrator

# Every narration holds the quote, so a flag may be raised at any turn.
RESPONSES = ["Alan laughs at the door; the fair is loud.", "Alan laughs at the door; Cesare stirs.",
             "Alan laughs at the door, alive and well.", "Alan laughs at the door; morning comes."]
FLAG = {"conflicts": [{"type": "fact", "fact_ids": ["F2"], "commitment_ids": [], "quote": "Alan laughs at the door",
                       "explanation": "Alan was stated dead."}]}
NONE = {"conflicts": []}


def recorded_run(server, out):
    """Two episodes, each ending in a fact conflict at turn 3 (turns 1 and 2 clean: four clean turns)."""
    server.add(step="conflict_check", contains="TURN 3.", reply=FLAG)
    config = RunConfig(narrator="unused:X", auditor_model="openai/auditor", api_base=server.base_url, max_turns=5,
                       repeats=2)
    runner = Runner(config, out_dir=out, narrator_factory=lambda: ListNarrator(RESPONSES))
    from pytest_ncp.core.spec import load_spec
    from tests.conftest import FIXTURES

    results = asyncio.run(runner.run([load_spec(FIXTURES / "caligari.yaml")]))
    assert [r.termination.value for r in results] == ["conflict:fact", "conflict:fact"]


def pattern(*answers):
    counter = itertools.count()
    return lambda request: answers[next(counter) % len(answers)]


def test_stability_reports_the_flip_rate_of_a_scripted_pattern(ncp_model_server, tmp_path, capsys):
    recorded_run(ncp_model_server, tmp_path / "run")
    ncp_model_server.reset()
    # The ending turns (two, 4 re-audits each): 1 in 4 re-audits finds no conflict there -> 2 flips of 8.
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=pattern(FLAG, FLAG, NONE, FLAG))
    # Clean turns (3 of the 4 sampled, 4 re-audits each): 1 in 4 re-audits confirms a conflict -> 3 flips of 12.
    ncp_model_server.add(step="conflict_check", regex=r"TURN [12]\.", reply=pattern(NONE, NONE, NONE, FLAG))
    code = main(["stability", str(tmp_path / "run"), "--votes", "4", "--clean-sample", "3", "--seed", "7",
                 "--api-base", ncp_model_server.base_url, "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["rows"]
    assert (rows["fact"]["turns"], rows["fact"]["reaudits"], rows["fact"]["flips"]) == (2, 8, 2)
    assert rows["fact"]["rate"] == 0.25 and rows["fact"]["ci"] == [round(x, 6) for x in wilson(2, 8)]
    assert (rows["clean"]["turns"], rows["clean"]["reaudits"], rows["clean"]["flips"]) == (3, 12, 3)
    assert rows["clean"]["rate"] == 0.25
    assert rows["conflicts"]["flips"] == 2 and rows["commitment"]["rate"] is None
    assert data["temperature"] == 0.7 and data["model"] == "openai/auditor"
    # Only the conflict verdict is asked again: check and confirmation, at the sampling temperature.
    steps = {r.step for r in ncp_model_server.requests}
    assert steps == {"conflict_check", "conflict_confirmation"}
    assert {r.body["temperature"] for r in ncp_model_server.requests} == {0.7}
    assert len([r for r in ncp_model_server.requests if r.step == "conflict_check"]) == 5 * 4


def test_the_clean_sample_is_seeded_and_the_table_reads(ncp_model_server, tmp_path, capsys):
    recorded_run(ncp_model_server, tmp_path / "run")

    def sampled(seed):
        ncp_model_server.reset()
        assert main(["stability", str(tmp_path / "run"), "--votes", "1", "--clean-sample", "2", "--seed", str(seed),
                     "--api-base", ncp_model_server.base_url, "--json"]) == 0
        return [(t["episode"], t["turn"]) for t in json.loads(capsys.readouterr().out)["per_turn"]
                if t["recorded"] == "clean"]

    assert sampled(3) == sampled(3) and len(sampled(3)) == 2
    ncp_model_server.reset()
    assert main(["stability", str(tmp_path / "run"), "--votes", "2", "--api-base", ncp_model_server.base_url]) == 0
    out = capsys.readouterr().out
    assert "each turn audited 2 more time(s) by openai/auditor at temperature 0.7" in out
    assert "fact conflict" in out and "0.0% (" in out and "clean (no conflict)" in out


def test_a_run_without_an_ending_conflict_and_no_sample_has_nothing_to_reaudit(ncp_model_server, tmp_path, capsys):
    config = RunConfig(narrator="unused:X", auditor_model="openai/auditor", api_base=ncp_model_server.base_url,
                       max_turns=2)
    from pytest_ncp.core.spec import load_spec
    from tests.conftest import FIXTURES

    asyncio.run(Runner(config, out_dir=tmp_path / "run", narrator_factory=lambda: ListNarrator(RESPONSES))
                .run([load_spec(FIXTURES / "caligari.yaml")]))
    assert main(["stability", str(tmp_path / "run"), "--votes", "3"]) == 2
    assert "no turn to re-audit" in capsys.readouterr().err


def test_flips_are_counted_against_the_record():
    assert flipped("fact", set()) and flipped("fact", {"commitment"}) and not flipped("fact", {"fact", "commitment"})
    assert flipped("clean", {"fact"}) and not flipped("clean", set())
    summary = flip_summary([{"episode": "a--r0", "turn": 3, "recorded": "fact", "outcomes": [{"fact"}, set(), None]}])
    assert summary["rows"]["fact"] == {"turns": 1, "reaudits": 2, "invalid": 1, "flips": 1, "rate": 0.5,
                                       "ci": [round(x, 6) for x in wilson(1, 2)]}


def test_votes_screening_and_stability_end_to_end_on_the_offline_demo(tmp_path, capsys):
    from tests.conftest import SPECS

    # The demo's sampled votes follow the story and the data each call judges, not the prompts' wording: a prompt
    # change leaves these outcomes alone (a change to one of these specs may move them).
    specs = [str(SPECS / f"{name}.yaml") for name in ("hound-baskervilles", "time-machine", "big-parade")]
    assert main(["demo", "--specs", *specs, "--player", "adversarial", "--audit-votes", "3", "--max-turns", "20",
                 "--max-error-rate", "1", "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "player simulator     1  player fault 1 (split votes: 1 at 2/3): hound-baskervilles[r0]" in out
    # A conflict that stood on 2 of 3 votes is the narrator's, its split shown in the table.
    assert "narrator             1  fact conflict 1 (split votes: 1 at 2/3): time-machine[r0]" in out
    data = json.loads((tmp_path / "run" / "results.json").read_text())
    by_spec = {e["spec_id"]: e for e in data["episodes"]}
    assert by_spec["hound-baskervilles"]["termination"] == "player_fault"
    assert by_spec["time-machine"]["termination"] == "conflict:fact"
    assert by_spec["time-machine"]["failure"]["agreement"] == {"yes": 2, "of": 3}
    assert all(e["screening"]["inputs"] >= 1 for e in data["episodes"])
    assert main(["stability", str(tmp_path / "run"), "--votes", "2", "--clean-sample", "4", "--demo", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows["conflicts"]["turns"] == sum(e.get("failure") is not None for e in data["episodes"])
    assert rows["clean"]["turns"] == 4 and rows["conflicts"]["reaudits"] + rows["conflicts"]["invalid"] == \
        2 * rows["conflicts"]["turns"]


def test_stability_survives_a_model_error_in_one_reaudit(ncp_model_server, tmp_path, capsys):
    """One re-audit whose endpoint refuses (HTTP 400, not retried) gives no verdict: it should be counted apart
    (or at worst end the command with a clean message), never crash ``ncp stability`` with a traceback and
    lose every other re-audit."""
    from pytest_ncp.cli import main
    from tests.engine.test_stability import recorded_run

    recorded_run(ncp_model_server, tmp_path / "run")
    ncp_model_server.reset()
    ncp_model_server.add(step="conflict_check", status=400, times=1)
    try:
        code = main(["stability", str(tmp_path / "run"), "--votes", "3", "--api-base", ncp_model_server.base_url,
                     "--json"])
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"ncp stability crashed on one model error: {type(exc).__name__}: {str(exc)[:200]}")
    assert code in (0, 2)


def test_stability_on_a_changed_spec_is_a_usage_error_not_a_traceback(ncp_model_server, tmp_path, capsys):
    """The spec was edited since the run: the recorded turns cannot be rebuilt against it. ``ncp stability``
    should say so (exit 2, like ``ncp fork``), not raise ForkError out of the command."""
    from pytest_ncp.cli import main
    from tests.conftest import FIXTURES
    from tests.engine.test_stability import recorded_run

    recorded_run(ncp_model_server, tmp_path / "run")
    specs = tmp_path / "specs"
    specs.mkdir()
    text = (FIXTURES / "caligari.yaml").read_text(encoding="utf-8")
    (specs / "caligari.yaml").write_text(text.replace("The Cabinet of Dr. Caligari", "The Cabinet of Dr. Caligari (2)", 1),
                                         encoding="utf-8")
    try:
        code = main(["stability", str(tmp_path / "run"), "--votes", "1", "--specs", str(specs),
                     "--api-base", ncp_model_server.base_url])
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"ncp stability crashed on a changed spec: {type(exc).__name__}: {str(exc)[:160]}")
    assert code == 2


def test_stability_on_a_demo_run_without_demo_is_a_clean_error(tmp_path, capsys, monkeypatch):
    """A run of ``ncp demo`` records ``demo: true`` and the demo's auditor model: re-audited without ``--demo``
    (and no endpoint) ``ncp stability`` should refuse cleanly (or use the demo server), not send the run's
    prompts towards api.openai.com and die with a ModelError traceback."""
    from pytest_ncp.cli import main
    from tests.conftest import SPECS

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["demo", "--specs", str(SPECS / "black-pirate.yaml"), "--player", "adversarial", "--max-turns", "10",
                 "--max-error-rate", "1", "--out", str(tmp_path / "run")]) == 0
    data = json.loads((tmp_path / "run" / "results.json").read_text())
    assert data["config"]["demo"] is True and any(e.get("failure") for e in data["episodes"])
    capsys.readouterr()
    try:
        code = main(["stability", str(tmp_path / "run"), "--votes", "1", "--timeout", "5"])
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"ncp stability crashed on a demo run: {type(exc).__name__}: {str(exc)[:200]}")
    assert code in (0, 2)
