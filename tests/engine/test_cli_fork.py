"""``ncp fork`` end to end: a recorded run through the scripted server, forked at its failing turn."""

from __future__ import annotations

import json

import pytest

from pytest_ncp.cli import main
from tests.conftest import FIXTURES
from tests.fixtures.fork_narrators import script

NARRATORS = "tests.fixtures.fork_narrators"


@pytest.fixture
def failed_run(ncp_model_server, tmp_path, capsys):
    script(ncp_model_server)
    out = tmp_path / "run"
    code = main(["run", "--narrator", f"{NARRATORS}:Breaks", "--specs", str(FIXTURES / "caligari.yaml"),
                 "--api-base", ncp_model_server.base_url, "--auditor-model", "openai/auditor",
                 "--max-turns", "6", "--out", str(out), "--workers", "1"])
    assert code == 0, capsys.readouterr()
    episode = json.loads((out / "results.json").read_text())["episodes"][0]
    assert episode["termination"] == "conflict:fact" and episode["failure"]["turn"] == 3
    capsys.readouterr()
    return out, episode


def fork(trace, server, tmp_path, *extra):
    return main(["fork", str(trace), "--api-base", server.base_url, "--out", str(tmp_path / "fork"), *extra])


def test_fork_at_the_failing_turn_reproduces_it(failed_run, ncp_model_server, tmp_path, capsys):
    out, episode = failed_run
    code = fork(out / episode["trace"], ncp_model_server, tmp_path, "--turn", "3", "--samples", "4")
    text = capsys.readouterr().out
    assert code == 1
    assert "recorded: conflict:fact" in text
    assert "conflict rate at turn 3: 4/4 = 100% (95% CI 51%-100%); fact 4" in text
    assert text.count('"Alan laughs at the door"') == 4
    data = json.loads((tmp_path / "fork" / "results.json").read_text())
    assert [e["fork"]["sample"] for e in data["episodes"]] == [0, 1, 2, 3]
    assert all(e["failure"] == episode["failure"] for e in data["episodes"])
    assert data["config"]["fork"]["turn"] == 3
    # The same format as a run's: ncp report reads it.
    assert main(["report", str(tmp_path / "fork")]) == 0
    report = capsys.readouterr().out
    assert "100.0% (51.0-100.0)" in report and "Breaks         4" in report


def test_fork_with_the_fixed_narrator_clears_it_and_continues(failed_run, ncp_model_server, tmp_path, capsys):
    out, episode = failed_run
    code = fork(out / episode["trace"], ncp_model_server, tmp_path, "--turn", "3", "--samples", "2",
                "--narrator", f"{NARRATORS}:Fixed", "--continue", "2")
    text = capsys.readouterr().out
    assert code == 0, text
    assert "conflict rate at turn 3: 0/2 = 0%" in text
    assert "after 2 more turn(s): 2/2 sample(s) without a conflict" in text
    data = json.loads((tmp_path / "fork" / "results.json").read_text())
    assert [e["turns"] for e in data["episodes"]] == [5, 5]
    # Before vs after the fix, sample by sample: ncp compare reads two forks like two runs.
    assert fork(out / episode["trace"], ncp_model_server, tmp_path / "before", "--turn", "3", "--samples", "2") == 1
    capsys.readouterr()
    main(["compare", str(tmp_path / "before" / "fork"), str(tmp_path / "fork"), "--turn", "3"])
    compared = capsys.readouterr().out
    assert "survival@3 rose from 0.0% to 100.0% over 2 paired episode(s)" in compared
    assert "2 failed -> survived" in compared


def test_fork_at_a_clean_turn_finds_nothing(failed_run, ncp_model_server, tmp_path, capsys):
    out, episode = failed_run
    assert fork(out / episode["trace"], ncp_model_server, tmp_path, "--turn", "2") == 0
    assert "conflict rate at turn 2: 0/3 = 0%" in capsys.readouterr().out


def test_fork_refuses_a_changed_spec_naming_the_change(failed_run, ncp_model_server, tmp_path, capsys):
    out, episode = failed_run
    spec = tmp_path / "caligari.yaml"
    spec.write_text((FIXTURES / "caligari.yaml").read_text().replace("title: The Cabinet of Dr. Caligari",
                                                                   "title: The Cabinet"))
    code = fork(out / episode["trace"], ncp_model_server, tmp_path, "--turn", "3", "--spec", str(spec))
    err = capsys.readouterr().err
    assert code == 2 and "changed: title" in err and "fingerprint" in err


def test_a_fork_written_into_a_run_folder_never_joins_that_run(failed_run, ncp_model_server, tmp_path, capsys):
    out, episode = failed_run
    # Fork with the fixed narrator into the run's own folder: resuming the run must not take the fork's
    # clean episode for the run's failed one.
    assert main(["fork", str(out / episode["trace"]), "--turn", "3", "--api-base", ncp_model_server.base_url,
                 "--narrator", f"{NARRATORS}:Fixed", "--out", str(tmp_path / "elsewhere")]) == 0
    import shutil

    for trace in (tmp_path / "elsewhere" / "traces").glob("*.jsonl"):
        shutil.copy(trace, out / "traces" / trace.name)
    from pytest_ncp.core.config import RunConfig
    from pytest_ncp.engine.runner import Runner

    runner = Runner(RunConfig(narrator=f"{NARRATORS}:Breaks", api_base=ncp_model_server.base_url,
                              auditor_model="openai/auditor", max_turns=6), out_dir=out)
    from pytest_ncp.core.spec import load_spec

    assert runner.resume([load_spec(FIXTURES / "caligari.yaml")], force=True) == 1
    assert [r.termination for r in runner.results.values()] == ["conflict:fact"]
    assert runner.changed == [] and [p.name for p in runner._finished.values()] == ["caligari--r0.jsonl"]


def test_fork_records_and_replays_cassettes(failed_run, ncp_model_server, tmp_path, capsys):
    out, episode = failed_run
    tape = ["--cassettes", str(tmp_path / "tapes"), "--turn", "3", "--samples", "2"]
    assert fork(out / episode["trace"], ncp_model_server, tmp_path, "--record-mode", "once", *tape) == 1
    recorded = capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "tapes").iterdir()) == ["caligari--fork-t3-s0.yaml",
                                                                      "caligari--fork-t3-s1.yaml"]
    ncp_model_server.stop()  # replay only: no request may reach a server
    assert main(["fork", str(out / episode["trace"]), "--api-base", "http://127.0.0.1:9", "--out",
                 str(tmp_path / "replayed"), "--record-mode", "none", *tape]) == 1
    replayed = capsys.readouterr().out
    assert "conflict rate at turn 3: 2/2 = 100%" in recorded and "conflict rate at turn 3: 2/2 = 100%" in replayed


def test_continue_with_a_simulated_player(failed_run, ncp_model_server, tmp_path, capsys):
    out, episode = failed_run
    ncp_model_server.add(role="player", reply="I follow the sleepwalker into the alley.")
    code = fork(out / episode["trace"], ncp_model_server, tmp_path, "--turn", "3", "--samples", "1",
                "--narrator", f"{NARRATORS}:Fixed", "--continue", "2", "--player", "natural",
                "--player-model", "openai/player")
    assert code == 0, capsys.readouterr()
    trace = (tmp_path / "fork" / "traces" / "caligari--fork-t3-s0.jsonl").read_text().splitlines()
    inputs = [json.loads(line).get("player_input") for line in trace if '"event": "turn"' in line]
    # Turn 3 is the recorded input; after the fork the simulated player speaks.
    assert inputs[1:] == ["I follow the sleepwalker into the alley."] * 2 and inputs[0] != inputs[1]
