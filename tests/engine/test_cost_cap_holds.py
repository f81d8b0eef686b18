"""The cost cap holds where a review found it did not: canaries beside workers, canaries stopped by the cap,
calls abandoned in flight, and a success whose confirmation the cap refused."""

from __future__ import annotations

import asyncio
import json

import pytest

from pytest_ncp.cli import main
from pytest_ncp.core.exit_codes import EXIT_COST_CAP
from pytest_ncp.llm import CostCapReached, ModelClient
from pytest_ncp.llm.prices import price_of, prompt_token_bound
from tests.conftest import FIXTURES, ROOT, caligari_twins

PRICED = "openai/gpt-4o-mini"
USAGE = {"prompt_tokens": 2000, "completion_tokens": 100}
PER_CALL = price_of(PRICED).cost(2000, 100)  # type: ignore[union-attr]
GOLD = ROOT / "calibration"


def answered(server) -> int:
    return sum(r.status == 200 and r.path.endswith("/chat/completions") for r in server.requests)


@pytest.fixture
def twins(tmp_path):
    return caligari_twins(tmp_path, 2)


def test_workers_and_canaries_together_stay_within_the_cap(ncp_model_server, twins, tmp_path, capsys):
    """--workers 2: each worker gets half the cap, but the canaries then run in the parent on a client that
    still has the whole cap (cli/run.py _execute, engine/workers.py): the run may spend up to twice the cap."""
    ncp_model_server.add(usage=USAGE)
    cap = 60 * PER_CALL
    code = main(["run", "--narrator", "pytest_ncp.narrators:LLMNarrator", "--narrator-model", PRICED,
                 "--auditor-model", PRICED, "--api-base", ncp_model_server.base_url, "--specs", *twins,
                 "--max-turns", "6", "--workers", "2", "--canaries", "30", "--canary-set", str(GOLD),
                 "--max-cost", f"{cap}", "--out", str(tmp_path / "run")])
    capsys.readouterr()
    spent = answered(ncp_model_server) * PER_CALL
    assert spent <= cap, f"the server answered {answered(ncp_model_server)} calls = ${spent:.5f} > cap ${cap:.5f} (exit {code})"


def test_a_cap_that_stopped_only_the_canaries_is_the_caps_outcome_not_the_auditors(ncp_model_server, tmp_path, capsys):
    """The episode finishes within the cap; the canaries then reach it. CostCapReached is neither an AuditorError nor
    a ModelError, so calibration/audit.py audit_case lets it out, cli/run.py run_canaries turns it into "auditor
    canaries could not run", and the verdict blames the auditor (exit 1) while saying the cap was not reached."""
    ncp_model_server.add(usage=USAGE)
    cap = 30 * PER_CALL
    code = main(["run", "--narrator", "pytest_ncp.narrators:LLMNarrator", "--narrator-model", PRICED,
                 "--auditor-model", PRICED, "--api-base", ncp_model_server.base_url,
                 "--specs", str(FIXTURES / "caligari.yaml"), "--max-turns", "1", "--workers", "2",
                 "--canaries", "10", "--canary-set", str(GOLD), "--max-cost", f"{cap}", "--out", str(tmp_path / "run")])
    text = capsys.readouterr().out
    assert "CostCapReached" in text  # the cap did stop calls (the canaries')
    assert "ncp cost cap ok" not in text, text
    assert "the AUDITOR, not the narrator, is in doubt" not in text, text
    assert code == EXIT_COST_CAP, text


def test_a_call_cancelled_in_flight_keeps_its_reservation(ncp_model_server):
    """A request the client abandons mid-flight (a speculative turn discarded at an episode's end, a narration
    of a refused input, a timeout) was sent: the provider may bill it. Its whole reservation counts as spent, so
    under a cap of one and a half bounds a second such request is refused instead of sent."""
    import threading

    from pytest_ncp.testing import ScriptedModelServer

    messages = [{"role": "user", "content": "x " * 1000}]
    prompt = prompt_token_bound(messages)
    price = price_of(PRICED)
    assert price is not None
    bound = price.bound(prompt, 100)
    arrived, release, sent = threading.Event(), threading.Event(), []

    def held(request):  # the first request is at the server, and stays there until the test lets it go
        sent.append(request)
        if len(sent) == 1:
            arrived.set()
            release.wait(30)

    with ScriptedModelServer() as server:
        server.add(usage={"prompt_tokens": prompt, "completion_tokens": 100}, reply=held)
        client = ModelClient(api_base=server.base_url, max_cost=1.5 * bound)

        async def run() -> None:
            first = asyncio.ensure_future(client.complete("narrator", PRICED, messages, max_tokens=100))
            assert await asyncio.get_running_loop().run_in_executor(None, arrived.wait, 30)
            first.cancel()
            await asyncio.gather(first, return_exceptions=True)
            with pytest.raises(CostCapReached):
                await client.complete("narrator", PRICED, messages, max_tokens=100)

        try:
            asyncio.run(run())
        finally:
            release.set()
    assert len(sent) == 1 and client.spent_usd == pytest.approx(bound)


def test_a_success_whose_confirmation_the_cap_refused_is_not_recorded_as_satisfied(play, caligari, ncp_model_server):
    """The cap refuses the success confirmation of the turn that completes the story. _Episode._turn applied the
    turn (achievements SATISFIED, nodes reached) before confirming it; the refusal then ends the episode as budget
    with that unconfirmed success kept in its record. A success the confirmation rejects is undone; one it never
    checked must not stand either (fail closed)."""
    from pytest_ncp.engine.episode import Termination

    step = "The showman bows, and the story moves on."
    ncp_model_server.add(step="trajectory_update", reply={"trigger_event_occurred": True, "key_delta_occurred": True,
                                                          "evidence": step})

    class RefusesTheConfirmation(ModelClient):
        async def _reserve(self, request):
            if request.get("step") == "success_confirmation":
                raise CostCapReached("cost cap reached (--max-cost)")
            return await super()._reserve(request)

    client = RefusesTheConfirmation(api_base=ncp_model_server.base_url, backoff=0.01, max_backoff=0.05)
    nodes = len(caligari.trajectory)
    result = play(caligari, [step], max_turns=nodes + 2, client=client)
    assert result.termination is Termination.BUDGET
    record = result.record.model_dump(mode="json", exclude_unset=True)
    assert record["commitments"]["C6"] != "SATISFIED" and record["satisfied"] < 1, (
        f"a budget episode records an unconfirmed success: commitments={record['commitments']}, "
        f"satisfied={record['satisfied']}, nodes_reached={record['nodes_reached']} of {nodes}, turns={record['turns']}")
