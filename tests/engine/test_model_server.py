"""ScriptedModelServer: raw protocol checks with urllib, end-to-end checks through litellm."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from pytest_ncp.testing import (
    DEFAULT_REPLIES,
    RecordedRequest,
    Rule,
    ScriptedModelServer,
)

MESSAGES = [{"role": "user", "content": "The guard asks for the password."}]


def _litellm():
    """litellm, imported by the tests that use it (not at collection: the import takes seconds)."""
    from pytest_ncp.llm import import_litellm  # with the local cost map: no network at import

    return import_litellm()


@pytest.fixture
def server():
    with ScriptedModelServer() as srv:
        yield srv


def schema_format(name: str) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": {"type": "object"}, "strict": True}}


def post(
    server: ScriptedModelServer,
    body: dict[str, Any] | bytes,
    *,
    headers: dict[str, str] | None = None,
    path: str = "/v1/chat/completions",
) -> tuple[int, dict[str, str], bytes]:
    """POST without raising on HTTP errors; returns (status, lower-cased headers, raw body)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    url = server.base_url.removesuffix("/v1") + path
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


def chat(server: ScriptedModelServer, **extra: Any) -> dict[str, Any]:
    headers = extra.pop("_headers", None)
    status, _, raw = post(server, {"model": "test-model", "messages": MESSAGES, **extra}, headers=headers)
    assert status == 200, raw
    return json.loads(raw)


def content_of(response: dict[str, Any]) -> str:
    return response["choices"][0]["message"]["content"]


def complete(server: ScriptedModelServer, **kwargs: Any) -> Any:
    kwargs.setdefault("messages", MESSAGES)
    return _litellm().completion(model="openai/test-model", api_base=server.base_url, api_key="sk-test",
                              num_retries=0, **kwargs)


# -- raw protocol ------------------------------------------------------------------------------


def test_default_completion_shape_and_usage(server):
    response = chat(server)
    assert response["object"] == "chat.completion"
    assert response["id"] and isinstance(response["created"], int)
    assert response["model"] == "test-model"
    choice = response["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["content"] == DEFAULT_REPLIES["narrator"]
    usage = response["usage"]
    assert usage["prompt_tokens"] == len(MESSAGES[0]["content"].split())
    assert usage["completion_tokens"] == len(DEFAULT_REPLIES["narrator"].split())
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ("conflict_check", {"conflicts": []}),
        ("conflict_confirmation", {"confirmed": True, "explanation": "Confirmed by the scripted server."}),
        ("fact_update", {"added": [], "negated": []}),
        ("trajectory_update", {"trigger_event_occurred": False, "key_delta_occurred": False,
                               "evidence": "No step completed."}),
        ("commitment_check", {"satisfied": []}),
        ("some_future_step", {}),
    ],
)
def test_step_defaults(server, step, expected):
    response = chat(server, response_format=schema_format(step))
    assert json.loads(content_of(response)) == expected
    recorded = server.requests[-1]
    assert recorded.step == step
    assert recorded.role == "auditor"  # inferred from the json_schema response_format


@pytest.mark.parametrize(
    ("role", "expected"),
    [("player", "I look around carefully."), ("narrator", DEFAULT_REPLIES["narrator"])],
)
def test_role_defaults_from_header(server, role, expected):
    response = chat(server, _headers={"X-NCP-Role": role})
    assert content_of(response) == expected
    assert server.requests[-1].role == role
    assert server.requests[-1].step is None


def test_no_step_no_role_gets_narration(server):
    chat(server)
    assert server.requests[0].role is None
    assert content_of(chat(server)) == DEFAULT_REPLIES["narrator"]


def test_later_rules_take_precedence_and_times_expire(server):
    server.add(step="conflict_check", reply={"conflicts": ["base"]})
    override = server.add(step="conflict_check", reply={"conflicts": ["once"]}, times=1)
    fmt = schema_format("conflict_check")
    answers = [json.loads(content_of(chat(server, response_format=fmt)))["conflicts"] for _ in range(3)]
    assert answers == [["once"], ["base"], ["base"]]
    assert override.hits == 1 and override.exhausted

    server.add(step="conflict_check", reply={"conflicts": []}, times=2)
    answers = [json.loads(content_of(chat(server, response_format=fmt)))["conflicts"] for _ in range(3)]
    assert answers == [[], [], ["base"]]


def test_contains_regex_and_model_matchers(server):
    server.add(contains="password", reply="contains-hit")
    server.add(regex=r"dragon\s+\d+", reply="regex-hit")
    server.add(model="other-model", reply="model-hit")
    # Every given matcher must match: this rule needs both role and substring.
    server.add(role="player", contains="password", reply="player-and-contains")

    assert content_of(chat(server)) == "contains-hit"
    assert content_of(chat(server, messages=[{"role": "user", "content": "a dragon   42 appears"}])) == "regex-hit"
    assert content_of(chat(server, messages=[{"role": "user", "content": "a dragon appears"}])) == DEFAULT_REPLIES["narrator"]
    assert content_of(chat(server, model="other-model")) == "model-hit"
    assert content_of(chat(server, model="other-model-2")) == "contains-hit"
    assert content_of(chat(server, _headers={"X-NCP-Role": "player"})) == "player-and-contains"
    assert content_of(chat(server, messages=[{"role": "user", "content": "hello"}],
                           _headers={"X-NCP-Role": "player"})) == DEFAULT_REPLIES["player"]


def test_text_includes_list_content_parts_and_all_messages(server):
    server.add(contains="second part", reply="found")
    messages = [
        {"role": "system", "content": "You are the auditor."},
        {"role": "user", "content": [{"type": "text", "text": "first part"},
                                     {"type": "image_url", "image_url": {"url": "data:,"}},
                                     {"type": "text", "text": "second part"}]},
    ]
    assert content_of(chat(server, messages=messages)) == "found"
    text = server.requests[0].text
    assert "You are the auditor." in text and "first part" in text and "second part" in text


def test_callable_reply_sees_request_and_may_override_whole_answer(server):
    seen: list[RecordedRequest] = []

    def reply(request: RecordedRequest) -> Any:
        seen.append(request)
        return {"echo": request.text}

    server.add(step="fact_update", reply=reply)
    response = chat(server, response_format=schema_format("fact_update"))
    assert json.loads(content_of(response)) == {"echo": MESSAGES[0]["content"]}
    assert seen[0].step == "fact_update" and seen[0].model == "test-model"

    server.add(role="player", reply=lambda request: Rule(status=503, reply="overloaded"))
    status, _, raw = post(server, {"model": "m", "messages": MESSAGES}, headers={"X-NCP-Role": "player"})
    assert status == 503
    assert json.loads(raw)["error"]["message"] == "overloaded"


def test_rate_limit_status_and_retry_after_header(server):
    server.add(status=429, headers={"Retry-After": "0.1"}, times=1)
    status, headers, raw = post(server, {"model": "test-model", "messages": MESSAGES})
    assert status == 429
    assert headers["retry-after"] == "0.1"
    error = json.loads(raw)["error"]
    assert error["type"] == "rate_limit_error" and error["code"] and error["message"]
    assert server.requests[0].status == 429
    # times=1 used up: the next request gets the default answer.
    assert content_of(chat(server)) == DEFAULT_REPLIES["narrator"]
    assert [r.status for r in server.requests] == [429, 200]


def test_server_error_and_verbatim_body(server):
    server.add(role="narrator", status=500)
    server.add(role="player", body="<html>502 Bad Gateway</html>")
    status, _, raw = post(server, {"model": "m", "messages": MESSAGES}, headers={"X-NCP-Role": "narrator"})
    assert status == 500
    assert json.loads(raw)["error"]["type"] == "server_error"
    status, _, raw = post(server, {"model": "m", "messages": MESSAGES}, headers={"X-NCP-Role": "player"})
    assert status == 200
    assert raw == b"<html>502 Bad Gateway</html>"
    assert [r.status for r in server.requests] == [500, 200]


def test_raw_stream_is_sse_ending_with_done(server):
    server.add(reply="one two three four five six")
    req = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=json.dumps({"model": "test-model", "messages": MESSAGES, "stream": True,
                         "stream_options": {"include_usage": True}}).encode(),
        headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        payload = resp.read().decode()
    lines = [line for line in payload.split("\n\n") if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[len("data: "):]) for line in lines[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len(chunks) >= 3
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == "one two three four five six"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] == 6


def test_routes_models_and_404(server):
    status, _, raw = post(server, {"model": "m", "messages": MESSAGES}, path="/chat/completions")
    assert status == 200 and content_of(json.loads(raw)) == DEFAULT_REPLIES["narrator"]

    with urllib.request.urlopen(server.base_url + "/models", timeout=5) as resp:
        models = json.loads(resp.read())
    assert models["object"] == "list" and any(m["id"] == "test-model" for m in models["data"])

    status, _, raw = post(server, {"x": 1}, path="/v1/embeddings")
    assert status == 404 and "error" in json.loads(raw)
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(server.base_url + "/nope", timeout=5)
    assert info.value.code == 404
    assert [r.status for r in server.requests] == [200, 200, 404, 404]


def test_invalid_json_request_is_400_and_recorded(server):
    status, _, raw = post(server, b"{not json")
    assert status == 400 and json.loads(raw)["error"]["type"] == "invalid_request_error"
    assert server.requests[0].status == 400 and server.requests[0].body == {}


def test_keep_alive_connection_is_reused(server):
    # http.client reconnects without a word when the server closes the connection, so statuses and the
    # request count hold either way: the socket itself must be the same one for every request.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    sockets = []
    try:
        for stream in (False, True, False):
            body = json.dumps({"model": "m", "messages": MESSAGES, "stream": stream})
            conn.request("POST", "/v1/chat/completions", body=body,
                         headers={"Content-Type": "application/json"})
            sockets.append(conn.sock)
            resp = conn.getresponse()
            assert resp.status == 200
            assert not resp.will_close
            resp.read()
        server.add(status=429, headers={"Retry-After": "0"})
        conn.request("POST", "/v1/chat/completions", body=json.dumps({"messages": MESSAGES}))
        sockets.append(conn.sock)
        resp = conn.getresponse()
        assert resp.status == 429
        assert not resp.will_close
        resp.read()
        assert conn.sock is sockets[0]  # still open after the last answer
    finally:
        conn.close()
    assert sockets[0] is not None and all(sock is sockets[0] for sock in sockets)
    assert len(server.requests) == 4


def test_requests_record_headers_body_and_arrival_order(server):
    chat(server, _headers={"Authorization": "Bearer sk-raw", "X-NCP-Role": "narrator"})
    chat(server, model="second", response_format=schema_format("commitment_check"))
    first, second = server.requests
    assert first.path == "/v1/chat/completions"
    assert first.headers["authorization"] == "Bearer sk-raw"
    assert first.headers["x-ncp-role"] == "narrator"
    assert first.body["messages"] == MESSAGES
    assert first.model == "test-model" and second.model == "second"
    assert first.text == MESSAGES[0]["content"]
    assert first.received_at <= second.received_at
    with pytest.raises(AttributeError):
        first.status = 500  # type: ignore[misc]


def test_reset_drops_rules_and_requests_but_keeps_defaults(server):
    server.add(reply="scripted")
    assert content_of(chat(server)) == "scripted"
    server.reset()
    assert server.requests == [] and server.max_in_flight == 0
    assert content_of(chat(server)) == DEFAULT_REPLIES["narrator"]


def test_delay_latency_and_max_in_flight():
    with ScriptedModelServer(latency=0.1) as server:
        server.add(contains="slow", delay=0.1)
        start = time.monotonic()
        chat(server)
        assert time.monotonic() - start >= 0.1
        start = time.monotonic()
        chat(server, messages=[{"role": "user", "content": "slow please"}])
        assert time.monotonic() - start >= 0.2
        assert server.max_in_flight == 1

        errors: list[BaseException] = []

        def worker() -> None:
            try:
                chat(server)
            except BaseException as exc:  # pragma: no cover - surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
        assert not errors
        assert server.max_in_flight == 5  # answered concurrently, not one after another
        assert len(server.requests) == 7


def test_stop_twice_and_lifecycle():
    server = ScriptedModelServer()
    with pytest.raises(RuntimeError):
        server.base_url
    server.start()
    url = server.base_url
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    # Leave a keep-alive connection open: stop() must not hang on it.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("POST", "/v1/chat/completions", body=json.dumps({"messages": MESSAGES}))
    conn.getresponse().read()
    stopping = threading.Thread(target=lambda: (server.stop(), server.stop()))
    stopping.start()
    stopping.join(30)  # a hang, not a slow machine, is what this catches
    assert not stopping.is_alive()
    assert not server.running
    conn.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/models", timeout=1)


# -- end to end through litellm ----------------------------------------------------------------


def test_litellm_completion_default_narration(server):
    response = complete(server)
    assert response.choices[0].message.content == DEFAULT_REPLIES["narrator"]
    recorded = server.requests[0]
    assert recorded.model == "test-model"
    assert recorded.headers["authorization"] == "Bearer sk-test"
    assert recorded.text == MESSAGES[0]["content"]


def test_litellm_json_schema_step_default(server):
    response = complete(server, response_format=schema_format("conflict_check"))
    assert json.loads(response.choices[0].message.content) == {"conflicts": []}
    assert server.requests[0].step == "conflict_check"
    assert server.requests[0].role == "auditor"


def test_litellm_role_header(server):
    response = complete(server, extra_headers={"X-NCP-Role": "player"})
    assert response.choices[0].message.content == "I look around carefully."
    assert server.requests[0].role == "player"


def test_litellm_malformed_content_passes_through(server):
    server.add(step="conflict_check", reply="not json {")
    response = complete(server, response_format=schema_format("conflict_check"))
    assert response.choices[0].message.content == "not json {"


def test_litellm_rate_limit_error(server):
    server.add(status=429, headers={"Retry-After": "0.1"})
    with pytest.raises(_litellm().RateLimitError):
        complete(server)
    assert server.requests and all(r.status == 429 for r in server.requests)


def test_litellm_server_error(server):
    server.add(status=500, reply="boom")
    with pytest.raises(_litellm().InternalServerError):
        complete(server, max_retries=0)
    assert server.requests[0].status == 500


def test_litellm_streaming(server):
    server.add(reply="Rain hammers the tin roof of the station.")
    chunks = list(complete(server, stream=True))
    text = "".join((c.choices[0].delta.content or "") for c in chunks if c.choices)
    assert text == "Rain hammers the tin roof of the station."
    assert server.requests[0].body["stream"] is True


def test_litellm_acompletion(server):
    server.add(role="narrator", reply="Async narration.")

    async def run() -> Any:
        return await _litellm().acompletion(
            model="openai/test-model", api_base=server.base_url, api_key="sk-test",
            messages=MESSAGES, num_retries=0, extra_headers={"X-NCP-Role": "narrator"})

    response = asyncio.run(run())
    assert response.choices[0].message.content == "Async narration."
    assert response.usage.prompt_tokens == len(MESSAGES[0]["content"].split())
