"""Votes, forks and ncp stability fail closed (found in review of issue 23): a tied vote is no verdict, a split
verdict or a player fault in a fork is nobody's conflict, and ncp stability ends cleanly on a model error, a demo
run or a changed spec."""

from __future__ import annotations

import json

import pytest

from pytest_ncp.engine.episode import Termination
from tests.engine.test_owners_engine import CONFLICT, cycle, played


@pytest.mark.parametrize("votes,answers", [(2, (True, False)), (4, (True, False, True, False))])
def test_a_tied_vote_is_not_a_pass_for_the_narrator(ncp_model_server, caligari, votes, answers):
    """docs/auditor.md: "a tie is no majority ... a flag neither side can win is an auditor error (fail
    closed)"; option help: "a conflict short of unanimity is the auditor's doubt, not the narrator's" pass.
    A 1/2 or 2/4 split must not let the turn through as clean."""
    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=CONFLICT)
    ncp_model_server.add(step="conflict_confirmation", reply=cycle(*answers))
    result = played(ncp_model_server, caligari, votes=votes)
    assert result.termination is not Termination.TURN_LIMIT, (
        f"a {votes // 2}/{votes} tie was taken as a rejection: the turn passed as clean")
    assert result.termination is Termination.ERROR and result.error.kind == "auditor"
    assert "tied" in result.error.message


# --- ncp stability: an endpoint failure in one re-audit --------------------------------------------------


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


# --- ncp fork under votes: a split verdict is no pass ------------------------------------------------------


def test_ncp_fork_does_not_pass_when_every_sample_is_a_split_verdict(ncp_model_server, tmp_path, capsys):
    """A run with --audit-votes 3 fails at turn 3 (3/3). Forked there (the fork takes the run's audit votes),
    every sample's conflict stands on 2/3: ``contested``, an unknown outcome. ``ncp fork`` must not exit 0 (its
    'no conflict, fixed' answer) while printing a 100% conflict rate."""
    from pytest_ncp.cli import main
    from tests.conftest import FIXTURES
    from tests.fixtures.fork_narrators import script

    script(ncp_model_server)
    out = tmp_path / "run"
    assert main(["run", "--narrator", "tests.fixtures.fork_narrators:Breaks", "--specs", str(FIXTURES / "caligari.yaml"),
                 "--api-base", ncp_model_server.base_url, "--auditor-model", "openai/auditor", "--max-turns", "6",
                 "--out", str(out), "--workers", "1", "--audit-votes", "3"]) == 0
    episode = json.loads((out / "results.json").read_text())["episodes"][0]
    assert episode["termination"] == "conflict:fact" and episode["failure"]["agreement"] == {"yes": 3, "of": 3}
    capsys.readouterr()
    ncp_model_server.add(step="conflict_confirmation", reply=cycle(True, False, True))
    code = main(["fork", str(out / episode["trace"]), "--turn", "3", "--samples", "1", "--api-base",
                 ncp_model_server.base_url, "--out", str(tmp_path / "fork")])
    text = capsys.readouterr().out
    forked = json.loads((tmp_path / "fork" / "results.json").read_text())["episodes"]
    assert [e["termination"] for e in forked] == ["contested"]
    assert code != 0, f"ncp fork exited 0 (pass) on a split verdict:\n{text}"


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


def test_a_fork_sample_that_ended_contested_is_not_counted_as_a_narrator_conflict(ncp_model_server, caligari):
    """``ForkOutcome.conflicts`` (the fork's conflict rate, and the pytest fork test's "still failing") counts
    every sample with a failure at turn T, a split verdict too: the pytest ``fork[...]`` test then fails the
    narrator (NarrativeFailure) for the auditor's doubt, while ``ncp fork`` exits 0 on the same outcome."""
    from pytest_ncp.engine.fork import EpisodeState, ForkOutcome

    ncp_model_server.add(step="conflict_check", contains="TURN 3.", reply=CONFLICT)
    ncp_model_server.add(step="conflict_confirmation", reply=cycle(True, False, True))
    result = played(ncp_model_server, caligari, votes=3)
    assert result.termination is Termination.CONTESTED and result.failure.turn == 3
    state = EpisodeState.__new__(EpisodeState)
    state.turn = 3
    outcome = ForkOutcome(state, [result])
    assert outcome.conflicts == [], "a split verdict is counted as the narrator's conflict at the forked turn"


def test_a_cancelled_episode_is_left_out_of_every_rate_like_a_cut_one():
    # Ended by the run after an early gate decision: unfinished, so never conflict-free, never in pass^k.
    from pytest_ncp.analysis.metrics import compute_metrics
    from pytest_ncp.core.records import EpisodeRecord

    def ep(spec, repeat, termination, turns):
        return EpisodeRecord(spec_id=spec, repeat=repeat, termination=termination, turns=turns, progress=0.0,
                             satisfied=0.0)

    m = compute_metrics([ep("a", 0, "turn_limit", 5), ep("a", 1, "cancelled", 2), ep("b", 0, "budget", 1)],
                        survival_turn=5)
    assert m["judged"] == 1 and m["conflict_free"] == 1 and m["turn_limit"] == 1
    assert m["blame"]["owners"]["budget"]["count"] == 2 and m["unknown"] == 0
