"""``--ncp-estimate`` and ``--ncp-max-cost`` (ini ``ncp_max_cost``) in pytest, black-box.

The auditor is named ``openai/gpt-4o-mini`` (priced in litellm's cost map) and answered by the scripted
server, which reports every call as 2,000 prompt and 100 completion tokens: what each call costs is known.
"""

from __future__ import annotations

import pytest

from pytest_ncp.core.exit_codes import EXIT_COST_CAP
from pytest_ncp.llm.prices import price_of

PRICED = "openai/gpt-4o-mini"
PER_CALL = price_of(PRICED).cost(2000, 100)  # type: ignore[union-attr]


@pytest.fixture
def priced(project):
    project.server.add(usage={"prompt_tokens": 2000, "completion_tokens": 100})
    for name in ("b-spec", "c-spec", "d-spec"):
        project.twin(name, title=f"The {name}")
    return project


def chat_calls(server) -> int:
    return sum(r.path.endswith("/chat/completions") and r.status == 200 for r in server.requests)


@pytest.mark.parametrize("xdist", [False, True], ids=["plain", "n2"])
def test_estimate_prints_the_bound_and_makes_no_model_call(priced, xdist):
    extra = ("-n", "2") if xdist else ("-p", "no:xdist")
    result = priced.run_subprocess(f"--ncp-auditor-model={PRICED}", "--ncp-estimate", *extra)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([
        "ncp estimate: 4 episode(s), at most 16 turn(s) and 16 audited turn(s); no model was called",
        "*auditor  conflict_check*48*16*",
        "agent:Narrator is not a built-in narrator: its own model calls are not counted",
        "nothing was run (--ncp-estimate)",
    ])
    assert "passed" not in result.stdout.str() and chat_calls(priced.server) == 0


def test_the_cap_stops_the_session_within_it_with_its_own_exit_code(priced):
    cap = 30 * PER_CALL  # 4 episodes x 4 turns x 4 audit calls would be 64 calls
    result = priced.run("-q", f"--ncp-auditor-model={PRICED}", f"--ncp-max-cost={cap}", "-p", "no:xdist",
                        "-rs")
    text = result.stdout.str()
    assert result.ret == EXIT_COST_CAP == 7, text
    assert chat_calls(priced.server) * PER_CALL <= cap
    outcomes = result.parseoutcomes()
    # The episodes the cap could not pay for are skipped (neither passes nor failures); the one failed test is
    # the cost cap's own gate item, and 7 still wins over "tests failed".
    assert outcomes.get("skipped", 0) >= 7 and outcomes.get("failed", 0) == 1 and "error" not in outcomes
    result.stdout.fnmatch_lines(["*_ gate[[]cost-cap[]] _*", "ncp cost cap REACHED*"])
    result.stdout.fnmatch_lines(["*by the cost cap (--ncp-max-cost): not judged*"])
    result.stdout.fnmatch_lines(["*cut short (budget)*(by the cost cap; censored, not failures)*",
                                 "ncp cost cap REACHED: $* spent of $* (--ncp-max-cost); * episode(s) were cut short*"])


def test_the_cap_is_an_ini_key_too_and_a_cap_that_does_not_bind_changes_nothing(priced):
    # Without a cap the achievements of these 4-turn episodes are not reached: 8 commitment tests are skipped.
    free = priced.run("-q", f"--ncp-auditor-model={PRICED}", "-p", "no:xdist")
    priced.pytester.makeini("[pytest]\npythonpath = .\nncp_max_cost = 100\n")
    capped = priced.run("-q", f"--ncp-auditor-model={PRICED}", "-p", "no:xdist")
    assert capped.ret == free.ret == pytest.ExitCode.OK
    # The same outcomes, plus the cost cap's own passed gate item.
    expected = {**free.parseoutcomes(), "passed": free.parseoutcomes()["passed"] + 1}
    assert capped.parseoutcomes() == expected and capped.parseoutcomes()["skipped"] == 8
    capped.stdout.fnmatch_lines(["ncp cost cap ok: the session's episodes spent $* of $100.0000 (--ncp-max-cost)"])


def test_an_unpriced_model_under_a_cap_refuses_to_start(project):
    result = project.run("--ncp-auditor-model=openai/local-judge", "--ncp-max-cost=1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--ncp-max-cost=1: openai/local-judge (auditor) has no price in litellm's cost map" in result.stderr.str()
    assert chat_calls(project.server) == 0


def test_under_xdist_the_canaries_get_a_share_of_the_cap_not_the_whole_cap_again(priced):
    # The controller used to audit the canaries on a client with the whole cap while each worker
    # had cap / N: together up to twice the cap. Now N + 1 shares (engine/workers.py cap_share).
    from tests.conftest import ROOT

    cap = 40 * PER_CALL
    result = priced.run_subprocess("-q", f"--ncp-auditor-model={PRICED}", f"--ncp-max-cost={cap}", "-n", "2",
                                   "--ncp-canaries=30", f"--ncp-canary-set={ROOT / 'calibration'}")
    text = result.stdout.str()
    assert chat_calls(priced.server) * PER_CALL <= cap, text
    assert result.ret == EXIT_COST_CAP, text
