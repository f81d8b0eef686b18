"""``--max-cost`` and ``--estimate``, against the scripted server with a priced model name.

The scripted server reports every call as 2,000 prompt and 100 completion tokens (its ``usage`` block is the
test's), so what a call costs at ``openai/gpt-4o-mini``'s list prices is known exactly, and so is what the
server was asked for: the cap holds when the calls the server answered cost no more than it.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from pytest_ncp.cli import main
from pytest_ncp.core.config import RunConfig
from pytest_ncp.core.exit_codes import EXIT_COST_CAP
from pytest_ncp.core.spec import load_spec
from pytest_ncp.engine.runner import Runner
from pytest_ncp.llm import CostCapReached, ModelClient, ModelError
from pytest_ncp.llm.prices import price_of
from tests.conftest import FIXTURES, caligari_twins

PRICED = "openai/gpt-4o-mini"
USAGE = {"prompt_tokens": 2000, "completion_tokens": 100}
PER_CALL = price_of(PRICED).cost(2000, 100)  # type: ignore[union-attr]
SPEC_FILES: list[str] = []  # four twins of the caligari fixture (``specs`` fixture)


@pytest.fixture(autouse=True)
def specs(tmp_path_factory):
    SPEC_FILES[:] = caligari_twins(tmp_path_factory.mktemp("specs"), 4)
    return SPEC_FILES


@pytest.fixture
def priced(ncp_model_server):
    ncp_model_server.add(usage=USAGE)
    return ncp_model_server


def answered(server) -> int:
    return sum(r.status == 200 and r.path.endswith("/chat/completions") for r in server.requests)


def run_ncp(server, *extra, out=None):
    return main(["run", "--narrator", "pytest_ncp.narrators:LLMNarrator", "--narrator-model", PRICED,
                 "--auditor-model", PRICED, "--api-base", server.base_url, "--specs", *SPEC_FILES, "--max-turns", "6",
                 "--workers", "1", *(["--out", str(out)] if out else []), *extra])


def test_the_cap_stops_the_run_within_it_and_cut_episodes_are_budget(priced, tmp_path, capsys):
    cap = 60 * PER_CALL  # about a third of the 4 x 6 turns x 6 calls the run would make
    code = run_ncp(priced, "--max-cost", f"{cap}", out=tmp_path / "run")
    text = capsys.readouterr().out
    assert code == EXIT_COST_CAP == 7, text
    spent = answered(priced) * PER_CALL
    assert 0.8 * cap < spent <= cap  # within the cap, and most of it used
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    cut = [e for e in results["episodes"] if e["termination"] == "budget"]
    assert cut and all(e["cut_by"] == "max-cost" and e["error"] is None for e in cut)
    m = results["metrics"]
    assert m["budget"] == len(cut) and m["unknown"] == 0 and m["narrator_errors"] == 0
    assert m["judged"] == len(results["episodes"]) - len(cut)  # left out of every rate
    assert results["complete"] is True and results["config"]["max_cost"] == pytest.approx(cap)
    assert m["spent_usd"] == pytest.approx(spent, rel=1e-6)
    assert f"{len(cut)} cut short by the cost cap (budget)" in text
    assert f"ncp cost cap REACHED: ${spent:.4f} spent of ${cap:.4f} (--max-cost); {len(cut)} episode(s)" in text


def test_resume_plays_the_episodes_the_cap_cut_short_again(priced, tmp_path, capsys):
    # The README tells a user whose run exited 7 to raise the cap and finish it: --resume must not keep the cut
    # episodes as finished.
    out = tmp_path / "run"
    assert run_ncp(priced, "--max-cost", f"{60 * PER_CALL}", out=out) == EXIT_COST_CAP
    first = json.loads((out / "results.json").read_text())
    cut = {f"{e['spec_id']}--r{e['repeat']}" for e in first["episodes"] if e["termination"] == "budget"}
    kept = {f"{e['spec_id']}--r{e['repeat']}" for e in first["episodes"]} - cut
    assert cut
    capsys.readouterr()
    assert run_ncp(priced, "--resume", out=out) == 0
    again = json.loads((out / "results.json").read_text())
    assert {e["termination"] for e in again["episodes"]} <= {"turn_limit", "script_exhausted", "success"}
    assert again["metrics"]["budget"] == 0 and len(again["episodes"]) == 4 and again["complete"] is True
    assert f"resuming: {len(kept)} finished episode(s)" in capsys.readouterr().out


def test_cut_episodes_are_censored_never_failures(priced, tmp_path):
    from pytest_ncp.analysis.metrics import error_budget, survival_table

    cap = 20 * PER_CALL
    config = RunConfig(narrator="pytest_ncp.narrators:LLMNarrator", narrator_model=PRICED, auditor_model=PRICED,
                       api_base=priced.base_url, max_turns=6, max_cost=cap)
    runner = Runner(config, out_dir=tmp_path)
    results = asyncio.run(runner.run([load_spec(p) for p in SPEC_FILES]))
    records = [r.record for r in results]
    assert all(r.termination.value == "budget" and not r.survived for r in results if r.cut_by)
    assert any(r.cut_by for r in results)
    # No conflict and no narrator error anywhere: survival stays 1 at every turn; cut episodes only leave the
    # curve (censored at their last turn), and the error budget does not count them.
    assert all(p.value == 1.0 for p in survival_table(records, 6).values())
    cut_turns = sorted(e.turns for e in records if e.termination == "budget")
    assert survival_table(records, 6)[cut_turns[-1] + 1].reached <= len(records) - len(cut_turns)
    assert error_budget(records).unknown == 0
    trace = (tmp_path / "traces" / f"{results[-1].spec.id}--r0.jsonl").read_text()
    assert '"event": "budget"' in trace and "cost cap of $" in trace


def test_a_gate_refuses_to_decide_when_the_cap_left_too_few_episodes_observed(priced, capsys):
    code = run_ncp(priced, "--max-cost", f"{30 * PER_CALL}", "--min-survival", "0.5@5")
    text = capsys.readouterr().out
    assert code == EXIT_COST_CAP, text
    assert "ncp survival gate FAILED: cannot decide: survival@5 is n/a" in text
    assert "the cost cap cut" in text and "raise --max-cost" in text


def test_an_unpriced_model_under_a_cap_refuses_to_start(ncp_model_server, capsys):
    code = main(["run", "--narrator", "pytest_ncp.narrators:LLMNarrator", "--narrator-model", PRICED,
                 "--auditor-model", "openai/my-local-judge", "--api-base", ncp_model_server.base_url,
                 "--specs", SPEC_FILES[0], "--max-cost", "5"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--max-cost=5: openai/my-local-judge (auditor) has no price in litellm's cost map" in err
    assert not ncp_model_server.requests


def test_the_client_refuses_a_call_past_the_cap_and_every_call_after(priced):
    client = ModelClient(api_base=priced.base_url, max_cost=1e-9)
    with pytest.raises(CostCapReached, match=r"cost cap of \$0.0000 reached"):
        asyncio.run(client.complete("narrator", PRICED, [{"role": "user", "content": "hi"}]))
    assert client.cap_reached and not priced.requests  # the request never started
    with pytest.raises(ModelError, match="no price"):
        asyncio.run(ModelClient(api_base=priced.base_url, max_cost=1.0).complete(
            "narrator", "openai/unpriced", [{"role": "user", "content": "hi"}]))


def test_calls_wait_for_the_calls_in_flight_before_the_cap_is_called_reached(ncp_model_server):
    """A hundred concurrent calls, each bounded at about 15 times what it costs, under a cap of three bounds: the
    calls in flight hold the cap, the others wait for them instead of giving up, and the run stops within it."""
    ncp_model_server.add(usage={"prompt_tokens": 100, "completion_tokens": 50})
    message = [{"role": "user", "content": "x " * 2000}]
    price = price_of(PRICED)
    assert price is not None
    actual = price.cost(100, 50)
    bound = price.bound(len("x " * 2000) + 8, 100)
    assert bound > 10 * actual
    client = ModelClient(api_base=ncp_model_server.base_url, max_cost=3 * bound)

    async def many() -> list:
        return await asyncio.gather(*(client.complete("narrator", PRICED, message, max_tokens=100)
                                      for _ in range(100)), return_exceptions=True)

    outcomes = asyncio.run(many())
    done = [o for o in outcomes if not isinstance(o, BaseException)]
    assert all(isinstance(o, CostCapReached) for o in outcomes if isinstance(o, BaseException))
    assert len(done) * actual <= 3 * bound < 100 * actual  # within the cap, which did bind
    assert len(done) >= (2 * bound) / actual  # the waiting calls went once reservations freed up (not just 3)
    assert client.spent_usd == pytest.approx(len(done) * actual)
    assert answered(ncp_model_server) == len(done)


def test_estimate_makes_no_model_call_and_bounds_the_run(priced, capsys):
    code = run_ncp(priced, "--estimate")
    text = capsys.readouterr().out
    assert code == 0 and not priced.requests
    assert "ncp estimate: 4 episode(s), at most 24 turn(s) and 24 audited turn(s); no model was called" in text
    assert "nothing was run (--estimate)" in text
    rows = {tuple(line.split()[:2]): line.split() for line in text.splitlines() if line.startswith("  ")}
    assert rows[("narrator", "-")][2] == "24"             # one narrator call per turn
    assert rows[("auditor", "conflict_check")][2] == "72"  # 24 turns x 3 attempts
    assert rows[("auditor", "conflict_check")][3] == "24"  # without retries
    # The bound holds: the run itself makes fewer calls and costs less.
    total = rows[("total", "24")] if ("total", "24") in rows else next(v for k, v in rows.items() if k[0] == "total")
    bound_calls, bound_cost = int(total[1].replace(",", "")), float(total[-1].lstrip("$").replace(",", ""))
    assert run_ncp(priced) == 0
    assert answered(priced) <= bound_calls
    assert answered(priced) * PER_CALL <= bound_cost


def test_estimate_says_which_models_are_unpriced(ncp_model_server, capsys):
    code = main(["run", "--narrator", "tests.conftest:ListNarrator", "--auditor-model", "openai/local-judge",
                 "--api-base", ncp_model_server.base_url, "--specs", str(FIXTURES / "caligari.yaml"), "--estimate"])
    text = capsys.readouterr().out
    assert code == 0 and not ncp_model_server.requests
    assert "unpriced (the cost map has no price; their calls are not in the cost): openai/local-judge" in text
    assert "tests.conftest:ListNarrator is not a built-in narrator: its own model calls are not counted" in text


def test_the_estimate_bounds_votes_and_screening_per_step(tmp_path, capsys):
    # Screening and votes add calls an estimate of narrator and audit calls alone would miss: K confirmation
    # samples per flag, and a simulated player's screened inputs (a screen per input, regenerations,
    # narrations of refused inputs played ahead).
    # The demo's adversarial player god-modes and its auditor flags conflicts: every step's real calls stay
    # within the estimate's.
    from collections import Counter

    from pytest_ncp.testing import ScriptedModelServer
    from pytest_ncp.testing.demo import install_demo_script
    from tests.conftest import SPECS

    specs = [str(SPECS / f"{name}.yaml") for name in ("black-pirate", "caligari", "all-quiet")]
    argv = ["run", "--narrator", "pytest_ncp.narrators:LLMNarrator", "--narrator-model", "openai/demo-narrator",
            "--auditor-model", "openai/demo-auditor", "--player", "adversarial", "--player-model",
            "openai/demo-player", "--audit-votes", "3", "--max-turns", "10", "--max-error-rate", "1",
            "--specs", *specs]
    with ScriptedModelServer() as server:
        install_demo_script(server)
        assert main([*argv, "--api-base", server.base_url, "--estimate"]) == 0
        rows = {tuple(line.split()[:2]): int(line.split()[2].replace(",", ""))
                for line in capsys.readouterr().out.splitlines() if line.startswith("  ") and line.split()[0] != "role"}
        assert not server.requests
        assert rows[("auditor", "conflict_confirmation")] == 3 * rows[("auditor", "conflict_check")]  # 3 votes
        assert rows[("auditor", "input_screen")] == 3 * 3 * 30  # (1 + 2 regenerations) x 3 attempts x 30 turns
        main([*argv, "--api-base", server.base_url, "--out", str(tmp_path / "run")])
        made = Counter((r.role, r.step or "-") for r in server.requests if r.path.endswith("/chat/completions"))
    screened = json.loads((tmp_path / "run" / "results.json").read_text())["episodes"]
    assert sum(e["screening"]["regenerated"] for e in screened) > 0  # the player did god-mode
    assert made[("auditor", "conflict_confirmation")] >= 3  # a flag, confirmed by three votes
    for key, calls in made.items():
        assert calls <= rows[key], (key, calls, rows[key])


def test_a_cap_of_thirty_percent_judges_about_thirty_percent_of_the_episodes_fully(priced, tmp_path, capsys):
    """Before: every episode started at once and the cap was spread over all of them (21 of 21 cut short, nothing
    judged). An episode now starts only while the cap can pay for it to its end."""
    specs = caligari_twins(tmp_path, 10)

    def run(out, *extra):
        return main(["run", "--narrator", "pytest_ncp.narrators:LLMNarrator", "--narrator-model", PRICED,
                     "--auditor-model", PRICED, "--api-base", priced.base_url, "--specs", *specs, "--max-turns", "4",
                     "--concurrency", "16", "--workers", "1", "--out", str(out), *extra])

    assert run(tmp_path / "full") == 0
    whole = answered(priced) * PER_CALL
    priced.reset()
    priced.add(usage=USAGE)
    cap = 0.32 * whole
    assert run(tmp_path / "capped", "--max-cost", f"{cap}") == EXIT_COST_CAP
    capsys.readouterr()
    episodes = json.loads((tmp_path / "capped" / "results.json").read_text())["episodes"]
    judged = [e for e in episodes if e["termination"] != "budget"]
    assert len(judged) == 3 and all(e["turns"] == 4 for e in judged), [e["termination"] for e in episodes]
    assert all(e["turns"] == 0 for e in episodes if e["termination"] == "budget")  # not started, not cut mid-way
    assert answered(priced) * PER_CALL <= cap


def test_the_estimate_gives_an_expected_figure_beside_the_bound(priced, capsys):
    assert run_ncp(priced, "--estimate", "--max-cost", "0.01") == 0
    text = capsys.readouterr().out
    assert "upper bound: every episode plays its whole script" in text
    line = next(x for x in text.splitlines() if x.startswith("expected: about "))
    assert "end at each turn" in line and "answers of typical length" in line
    assert "of the episodes fit the cap at the expected cost" in text
