"""Self-hosted servers: structured-output modes, bounded generations, calls that don't pile up,
merged system prompts, honest error labels and the evidence of an errored turn.

The scripted server imitates llama-cpp-python's server here (json_schema refused with a 500 naming
it, system messages dropped, max_tokens ignored, one request at a time), so the real request path
through litellm is exercised offline.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from pytest_ncp.engine.auditor import WIRE_SCHEMAS, response_format
from pytest_ncp.core.config import DEFAULT_MAX_TOKENS, RunConfig
from pytest_ncp.engine.episode import Termination
from pytest_ncp.llm import ModelClient, ModelError
from pytest_ncp.engine.runner import Runner
from pytest_ncp.testing import ScriptedModelServer
from tests.conftest import SPECS, ListNarrator

MSG = [{"role": "system", "content": "You judge."}, {"role": "user", "content": "Judge this."}]


def complete(client, *args, **kw):
    return asyncio.run(client.complete(*args, **kw))


def formats(server):
    return [(r.body.get("response_format") or {}).get("type") for r in server.requests]


# --- structured output ------------------------------------------------------------------------------


def test_auto_falls_back_once_to_json_object_with_the_schema_and_remembers_it():
    with ScriptedModelServer(reject_formats=("json_schema",)) as server:
        client = ModelClient(api_base=server.base_url, backoff=0.0)

        async def turn():  # four steps at once, as a turn's audit sends them
            return await asyncio.gather(*(client.complete("auditor", "openai/a", MSG, step=step,
                                                          response_format=response_format(step))
                                          for step in ("conflict_check", "fact_update", "trajectory_update",
                                                       "commitment_check")))

        asyncio.run(turn())
        asyncio.run(turn())
        port = server.port
    # One refused json_schema request for the whole run (not one per step, not retried), then json_object.
    assert formats(server) == ["json_schema"] + ["json_object"] * 8
    assert [r.status for r in server.requests][:2] == [500, 200]
    sent = server.requests[1].body["response_format"]
    assert sent["schema"] == WIRE_SCHEMAS[server.requests[1].step]
    assert client.output_modes() == {f"127.0.0.1:{port}|openai/a": "json_object"}
    assert "json_schema rejected" in client.mode_notes("openai/a")[0]


def test_concurrent_first_calls_under_auto_wait_for_the_probe_not_for_each_other():
    # Every call that arrived while the mode was probed used to make its whole request while
    # holding the probe's lock, so N episodes' first audit steps went one at a time (max in flight 1).
    n = 12
    with ScriptedModelServer(latency=0.2) as server:
        client = ModelClient(api_base=server.base_url, backoff=0.0)

        async def first_calls():
            return await asyncio.gather(*(client.complete("auditor", "openai/a", MSG, step="fact_update",
                                                          response_format=response_format("fact_update"))
                                          for _ in range(n)))

        asyncio.run(first_calls())
    assert len(server.requests) == n and formats(server) == ["json_schema"] * n
    # One probe, then everyone else at once: n - 1 requests in flight together.
    assert server.max_in_flight == n - 1


def test_waiters_on_a_probe_that_failed_for_another_reason_probe_at_once_each_for_itself():
    with ScriptedModelServer(latency=0.1) as server:
        server.add(status=503, times=1)  # the probe: not a format rejection, so it decides no mode
        client = ModelClient(api_base=server.base_url, backoff=0.0, max_retries=0)

        async def first_calls():
            return await asyncio.gather(*(client.complete("auditor", "openai/a", MSG, step="fact_update",
                                                          response_format=response_format("fact_update"))
                                          for _ in range(6)), return_exceptions=True)

        results = asyncio.run(first_calls())
        port = server.port
    assert sum(isinstance(r, ModelError) for r in results) == 1
    assert len(server.requests) == 6 and server.max_in_flight == 5
    assert client.output_modes() == {f"127.0.0.1:{port}|openai/a": "json_schema"}


def test_auto_ends_in_prompt_mode_when_every_response_format_is_refused():
    with ScriptedModelServer(reject_formats=("json_schema", "json_object")) as server:
        server.add(step="conflict_confirmation", reply={"confirmed": False, "explanation": "no"})
        client = ModelClient(api_base=server.base_url, backoff=0.0)
        c = complete(client, "auditor", "openai/a", MSG, step="conflict_confirmation",
                     response_format=response_format("conflict_confirmation"))
    assert formats(server) == ["json_schema", "json_object", None]
    last = server.requests[-1]
    # The schema comes before the data (the first message), never after it, where injected text would sit.
    first = last.body["messages"][0]["content"]
    assert "JSON Schema" in first and '"confirmed"' in first
    assert "JSON Schema" not in last.body["messages"][-1]["content"]
    assert last.step == "conflict_confirmation"  # named by header when no schema carries it
    assert c.output_mode == "prompt" and json.loads(c.text)["confirmed"] is False


@pytest.mark.parametrize("mode,expected", [("json_schema", "json_schema"), ("json_object", "json_object"),
                                           ("prompt", None)])
def test_a_set_mode_is_sent_as_is(ncp_model_server, mode, expected):
    client = ModelClient(api_base=ncp_model_server.base_url, structured_output=mode)
    complete(client, "auditor", "openai/a", MSG, step="fact_update", response_format=response_format("fact_update"))
    assert formats(ncp_model_server) == [expected]


def test_a_set_mode_that_the_server_refuses_is_a_model_error_without_retries():
    with ScriptedModelServer(reject_formats=("json_schema",)) as server:
        client = ModelClient(api_base=server.base_url, structured_output="json_schema", backoff=0.0)
        with pytest.raises(ModelError) as info:
            complete(client, "auditor", "openai/a", MSG, step="fact_update",
                     response_format=response_format("fact_update"))
        port = server.port
    assert len(server.requests) == 1  # a 500 naming the response format is deterministic
    assert info.value.rejects_format and info.value.status == 500
    assert f"127.0.0.1:{port}" in str(info.value)


def test_every_mode_is_verified_the_same_fail_closed_way(play, caligari):
    # Prompt mode: the answer is prose around JSON; it is rejected exactly as in json_schema mode.
    with ScriptedModelServer(reject_formats=("json_schema", "json_object")) as server:
        server.add(step="fact_update", reply='Sure! {"added": [], "negated": []}')
        client = ModelClient(api_base=server.base_url, backoff=0.0)
        result = play(caligari, ["The fair is loud."], max_turns=1, client=client)
    assert result.termination is Termination.ERROR and result.error.kind == "auditor"
    records = [json.loads(x) for x in open(result.trace, encoding="utf-8")]
    error = next(r for r in records if r["event"] == "error")
    rejected = [a for a in error["rejected_answers"] if a["step"] == "fact_update"]
    assert len(rejected) == 3 and all("not valid JSON" in a["problems"][0] for a in rejected)
    assert rejected[0]["output_mode"] == "prompt"


def test_results_json_records_the_mode_auto_chose(tmp_path):
    with ScriptedModelServer(reject_formats=("json_schema",)) as server:
        config = RunConfig(narrator="unused:X", auditor_model="openai/auditor", api_base=server.base_url, max_turns=1)
        runner = Runner(config, out_dir=tmp_path, narrator_factory=lambda: ListNarrator(["The fair is loud."]))
        from pytest_ncp.core.spec import load_spec

        asyncio.run(runner.run([load_spec(SPECS / "caligari.yaml")]))
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["config"]["structured_output"] == "auto"
    assert data["config"]["structured_output_used"] == {"openai/auditor": "json_object"}
    assert data["episodes"][0]["structured_output"] == {"openai/auditor": "json_object"}


# --- bounded generations ----------------------------------------------------------------------------


def test_every_call_carries_max_tokens_per_role_and_overrides_win(ncp_model_server):
    client = ModelClient(api_base=ncp_model_server.base_url, max_tokens={"narrator": 77})
    complete(client, "narrator", "openai/n", MSG)
    complete(client, "player", "openai/p", MSG)
    complete(client, "auditor", "openai/a", MSG, step="fact_update", response_format=response_format("fact_update"))
    sent = [r.body.get("max_tokens") for r in ncp_model_server.requests]
    assert sent == [77, DEFAULT_MAX_TOKENS["player"], DEFAULT_MAX_TOKENS["auditor"]]


def test_a_response_cut_by_the_limit_is_recorded(play, caligari, ncp_model_server):
    long_answer = " ".join(["word"] * 50)

    class ModelNarrator(ListNarrator):
        async def respond(self, player_input, context):
            c = await context.llm.complete("narrator", "openai/n", [{"role": "user", "content": player_input}])
            return c.text

    ncp_model_server.add(role="narrator", reply=long_answer)
    client = ModelClient(api_base=ncp_model_server.base_url, max_tokens={"narrator": 10})
    result = play(caligari, max_turns=1, narrator=ModelNarrator([]), client=client)
    assert result.transcript[0].response == " ".join(["word"] * 10)
    assert result.record.truncated_calls == 1
    turn = next(json.loads(x) for x in open(result.trace, encoding="utf-8") if '"event": "turn"' in x)
    assert turn["truncated_calls"] == [{"role": "narrator", "step": None, "model": "openai/n", "max_tokens": 10,
                                        "completion_tokens": 10}]


def test_a_truncated_auditor_answer_says_so_when_rejected(play, caligari):
    with ScriptedModelServer() as server:
        server.add(step="fact_update", reply='{"added": [{"text": "The fair is loud", "quote": "The fair is loud"}], '
                                              '"negated": []}')
        client = ModelClient(api_base=server.base_url, max_tokens={"auditor": 4}, backoff=0.0)
        result = play(caligari, ["The fair is loud."], max_turns=1, client=client)
    assert result.error.kind == "auditor"
    error = next(json.loads(x) for x in open(result.trace, encoding="utf-8") if '"event": "error"' in x)
    problems = [p for a in error["rejected_answers"] for p in a["problems"]]
    assert any("cut at max_tokens=4" in p for p in problems)


# --- timeouts, deadlines, per-endpoint limits ---------------------------------------------------------


def test_a_timed_out_request_is_retried_once_at_most():
    with ScriptedModelServer() as server:
        slow = server.add(role="narrator", delay=1.0)
        client = ModelClient(api_base=server.base_url, timeout=0.3, max_retries=4, backoff=0.0)
        with pytest.raises(ModelError) as info:
            complete(client, "narrator", "openai/n", MSG)
        port = server.port
    # Counted, not timed (a busy CI machine stretches any duration): two requests, then the error.
    assert slow.hits == 2, "one retry, not max_retries"
    assert info.value.attempts == 2
    assert "retried once at most" in str(info.value) and f"127.0.0.1:{port}" in str(info.value)


def test_a_timed_out_request_is_not_retried_while_others_wait_for_the_endpoint():
    with ScriptedModelServer(serial=True) as server:
        server.add(role="narrator", contains="slow", delay=1.0, times=1)
        client = ModelClient(api_base=server.base_url, timeout=0.4, backoff=0.0, concurrency_per_endpoint=1)

        async def both():
            slow = client.complete("narrator", "openai/n", [{"role": "user", "content": "slow"}])
            fast = client.complete("narrator", "openai/n", [{"role": "user", "content": "fast"}])
            return await asyncio.gather(slow, fast, return_exceptions=True)

        slow, fast = asyncio.run(both())
    assert isinstance(slow, ModelError) and slow.attempts == 1
    assert "other calls are waiting for this endpoint" in str(slow)
    assert not isinstance(fast, BaseException)
    assert [r.text for r in server.requests].count("slow") == 1


def test_the_call_deadline_bounds_retries():
    with ScriptedModelServer() as server:
        server.add(role="narrator", status=503)
        client = ModelClient(api_base=server.base_url, timeout=0.5, deadline=0.6, backoff=0.25, max_backoff=0.25,
                             max_retries=50)
        with pytest.raises(ModelError) as info:
            complete(client, "narrator", "openai/n", MSG)
    # With 0.25 s between attempts a 0.6 s deadline leaves room for 3 or 4 of the 51 allowed.
    assert "deadline" in str(info.value) and 2 <= len(server.requests) < 6
    assert info.value.attempts == len(server.requests)


def test_concurrency_per_endpoint_one_sends_one_request_at_a_time(ncp_model_server):
    ncp_model_server.latency = 0.05
    client = ModelClient(api_base=ncp_model_server.base_url, concurrency=8, concurrency_per_endpoint=1)

    async def many():
        await asyncio.gather(*(client.complete("narrator", "openai/n", [{"role": "user", "content": str(i)}])
                               for i in range(5)))

    asyncio.run(many())
    assert ncp_model_server.max_in_flight == 1 and len(ncp_model_server.requests) == 5


def test_a_refused_connection_names_the_endpoint_and_no_key(monkeypatch):
    secret = "sk-local-test-key-0000abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    client = ModelClient(api_base="http://127.0.0.1:9/v1", backoff=0.0, max_retries=1)
    with pytest.raises(ModelError) as info:
        complete(client, "auditor", "openai/a", MSG)
    message = str(info.value)
    assert "127.0.0.1:9" in message and "cannot connect" in message
    assert secret not in message


def test_an_endpoint_label_never_shows_credentials_paths_or_queries():
    from pytest_ncp.llm import endpoint_label

    assert endpoint_label("http://user:sk-secret-123456@10.0.0.5:8080/v1?key=abc", "openai/m") == "10.0.0.5:8080"
    assert endpoint_label("https://models.example.com/v1", "openai/m") == "models.example.com:443"


# --- system prompts -----------------------------------------------------------------------------------


def test_merge_folds_the_system_prompt_into_the_first_user_message(ncp_model_server):
    client = ModelClient(api_base=ncp_model_server.base_url, system_prompt="merge")
    complete(client, "narrator", "openai/n", [*MSG, {"role": "assistant", "content": "ok"},
                                              {"role": "user", "content": "again"}])
    sent = ncp_model_server.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"] == "You judge.\n\nJudge this."


def test_with_a_template_that_drops_system_messages_merge_gets_them_through():
    with ScriptedModelServer(drop_system=True) as server:
        keep = complete(ModelClient(api_base=server.base_url), "narrator", "openai/n", MSG)
        merged = complete(ModelClient(api_base=server.base_url, system_prompt="merge"), "narrator", "openai/n", MSG)
    assert merged.prompt_tokens == keep.prompt_tokens + len("You judge.".split())


# --- labels and evidence --------------------------------------------------------------------------------


class ModelNarrator:
    """A built-in style narrator: its only work is one call to the run's model client."""

    async def respond(self, player_input, context):
        completion = await context.llm.complete("narrator", "openai/n", [{"role": "user", "content": player_input}])
        return completion.text


def test_a_built_in_narrators_endpoint_failure_is_a_model_error_naming_the_endpoint(play, caligari,
                                                                                     ncp_model_server):
    ncp_model_server.add(role="narrator", status=503)
    client = ModelClient(api_base=ncp_model_server.base_url, backoff=0.0, max_retries=1)
    result = play(caligari, max_turns=2, narrator=ModelNarrator(), client=client)
    assert result.error.kind == "model"
    assert f"127.0.0.1:{ncp_model_server.port}" in result.error.message
    assert result.error.turn == 1


class Wrapping:
    """A narrator that wraps the client's failure in its own exception: still the model's fault."""

    async def respond(self, player_input, context):
        try:
            return (await context.llm.complete("narrator", "openai/n", [{"role": "user", "content": "x"}])).text
        except ModelError as exc:
            raise RuntimeError("backend down") from exc


def test_a_wrapped_model_failure_is_still_labelled_model(play, caligari, ncp_model_server):
    ncp_model_server.add(role="narrator", status=503)
    client = ModelClient(api_base=ncp_model_server.base_url, backoff=0.0, max_retries=0)
    assert play(caligari, narrator=Wrapping(), client=client).error.kind == "model"


def test_an_empty_narrator_response_is_the_narrators_error(play, caligari):
    result = play(caligari, ["   "], max_turns=2)
    assert result.error.kind == "narrator" and "empty" in result.error.message


def test_the_trace_of_an_errored_turn_holds_its_evidence(play, caligari, ncp_model_server):
    bad = {"conflicts": [{"type": "fact", "fact_ids": [""], "commitment_ids": [], "quote": "...",
                          "explanation": "template copied"}]}
    ncp_model_server.add(step="conflict_check", contains="TURN 2.", reply=bad)
    result = play(caligari, ["The fair is loud.", "The fair is quiet now."], max_turns=3,
                  inputs=["I walk to the fair.", "I listen at the tent."])
    assert result.termination is Termination.ERROR and result.error.kind == "auditor"
    records = [json.loads(x) for x in open(result.trace, encoding="utf-8")]
    error = next(r for r in records if r["event"] == "error")
    assert error["turn"] == 2 and error["last_completed_turn"] == 1
    assert error["player_input"] == "I listen at the tent."
    assert error["response"] == "The fair is quiet now."
    rejected = error["rejected_answers"]
    assert len(rejected) == 3 and {a["step"] for a in rejected} == {"conflict_check"}
    assert "name no active ledger fact" in " ".join(rejected[0]["problems"])
    assert json.loads(rejected[0]["answer"]) == bad
    assert result.record.error.turn == 2

