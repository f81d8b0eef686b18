"""A scripted, local stand-in for an OpenAI-compatible chat-completions endpoint.

pytest-ncp drives narrators, players and auditors through litellm. Mocking litellm itself would
skip the code paths that break in practice (request building, retries, rate-limit handling,
streaming, JSON decoding), so tests instead point litellm at a real HTTP server on 127.0.0.1 whose
answers come from a script. Nothing here ever opens an outbound connection.

Typical use::

    with ScriptedModelServer() as server:
        server.add(step="conflict_check", reply={"conflicts": [{"fact": "f1"}]}, times=1)
        server.add(role="narrator", status=429, headers={"Retry-After": "0.1"}, times=1)
        server.add(role="auditor", usage={"prompt_tokens": 1200, "prompt_tokens_details": {"cached_tokens": 1024}})
        litellm.completion(model="openai/test-model", api_base=server.base_url, api_key="sk-test",
                           messages=[{"role": "user", "content": "hi"}])
        assert server.requests[0].status == 200

Requests that no rule matches get a neutral default (``DEFAULT_REPLIES``) so a test only scripts
the turns it cares about.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Mapping

from ..core.wire import Step

__all__ = ["DEFAULT_REPLIES", "RecordedRequest", "Rule", "ScriptedModelServer"]

NARRATION_DEFAULT = "The lamps gutter as the night wears on. Nothing else changes."
PLAYER_DEFAULT = "I look around carefully."

# Keyed by auditor step name or by role. The step defaults are the "nothing happened" answer of each
# auditor step, so an unscripted turn never invents conflicts or facts.
DEFAULT_REPLIES: dict[str, Any] = {
    Step.CONFLICT_CHECK: {"conflicts": []},
    Step.CONFLICT_CONFIRMATION: {"confirmed": True, "explanation": "Confirmed by the scripted server."},
    Step.SUCCESS_CONFIRMATION: {"confirmed": True, "explanation": "Confirmed by the scripted server."},
    Step.FACT_UPDATE: {"added": [], "negated": []},
    Step.TRAJECTORY_UPDATE: {
        "trigger_event_occurred": False,
        "key_delta_occurred": False,
        "evidence": "No step completed.",
    },
    Step.COMMITMENT_CHECK: {"satisfied": []},
    Step.INPUT_SCREEN: {"fair": True, "problems": [], "explanation": "The player character's own act."},
    "narrator": NARRATION_DEFAULT,
    "player": PLAYER_DEFAULT,
}

ROLE_HEADER = "x-ncp-role"
STEP_HEADER = "x-ncp-step"

_ERROR_KINDS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("not_found_error", "model_not_found"),
    408: ("timeout_error", "request_timeout"),
    413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", "unprocessable_entity"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", "internal_error"),
    502: ("server_error", "bad_gateway"),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", "gateway_timeout"),
}

_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
_MODEL_PATHS = ("/v1/models", "/models")
_STATIC_MODELS = ("test-model", "narrator-model", "auditor-model")


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it, plus the HTTP status it was answered with.

    A reply callable receives the request before the answer exists, so there ``status`` is 0.
    """

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    step: str | None
    role: str | None
    model: str | None
    text: str
    received_at: float
    status: int


Reply = Any  # dict | list | str | Callable[[RecordedRequest], ...] | None


@dataclass(eq=False)
class Rule:
    """A scripted answer and the conditions under which it is given.

    Every matcher that is not None must match. ``times=None`` means unlimited; ``hits`` counts how
    often the rule has answered so a test can assert a scripted turn was actually reached. ``usage``
    (a mapping, or a callable of the request returning one) is merged over the answer's ``usage`` block,
    whose default counts one token per word: a test sets what a provider would report (cached tokens in
    ``prompt_tokens_details``, a size worth a price).
    """

    step: str | None = None
    role: str | None = None
    model: str | None = None
    contains: str | None = None
    regex: str | re.Pattern[str] | None = None
    reply: Reply = None
    status: int = 200
    headers: Mapping[str, str] | None = None
    body: str | bytes | None = None
    delay: float = 0.0
    times: int | None = None
    usage: Mapping[str, Any] | Any = None
    hits: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.times is not None and self.times < 1:
            raise ValueError(f"times must be >= 1 or None, got {self.times!r}")
        if self.delay < 0:
            raise ValueError(f"delay must be >= 0, got {self.delay!r}")
        if not 100 <= int(self.status) <= 599:
            raise ValueError(f"status must be an HTTP status code, got {self.status!r}")
        # Compile once up front so a bad pattern fails in the test that wrote it, not in a
        # server thread where the error would surface as a confusing 500.
        self._pattern = re.compile(self.regex) if isinstance(self.regex, str) else self.regex

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.hits >= self.times

    def matches(self, request: RecordedRequest) -> bool:
        if self.step is not None and request.step != self.step:
            return False
        if self.role is not None and request.role != self.role:
            return False
        if self.model is not None and request.model != self.model:
            return False
        if self.contains is not None and self.contains not in request.text:
            return False
        if self._pattern is not None and self._pattern.search(request.text) is None:
            return False
        return True


@dataclass
class _Answer:
    status: int
    headers: dict[str, str]
    content: str | None  # message content for 200 answers, error message otherwise
    body: bytes | None  # verbatim override of the whole HTTP body
    delay: float
    usage: Mapping[str, Any] | None = None  # merged over the default usage block


def _message_text(body: Mapping[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    parts: list[str] = []
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif isinstance(part, str):
                    parts.append(part)
    return "\n".join(parts)


def _response_format_type(body: Mapping[str, Any]) -> str | None:
    response_format = body.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, Mapping) else None
    return kind if isinstance(kind, str) else None


def _without_system(body: Mapping[str, Any]) -> dict[str, Any]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return dict(body)
    return {**body, "messages": [m for m in messages if not (isinstance(m, Mapping) and m.get("role") == "system")]}


def _json_schema_name(body: Mapping[str, Any]) -> tuple[bool, str | None]:
    response_format = body.get("response_format")
    if not isinstance(response_format, Mapping):
        return False, None
    schema = response_format.get("json_schema")
    if not isinstance(schema, Mapping):
        return False, None
    name = schema.get("name")
    return True, name if isinstance(name, str) else None


def _word_count(text: str) -> int:
    return max(1, len(text.split()))


def _encode_content(reply: Any) -> str:
    if isinstance(reply, str):
        return reply
    if isinstance(reply, bytes):
        return reply.decode("utf-8", errors="replace")
    return json.dumps(reply)


def default_reply(step: str | None, role: str | None) -> Any:
    """The answer given when no rule matches (see ``DEFAULT_REPLIES``)."""
    if step is not None:
        return copy.deepcopy(DEFAULT_REPLIES.get(step, {}))
    if role is not None and role in DEFAULT_REPLIES:
        return copy.deepcopy(DEFAULT_REPLIES[role])
    if role == "auditor":
        # An auditor call without a named step still expects a JSON object back.
        return {}
    return NARRATION_DEFAULT


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # Bursts of concurrent clients in the concurrency tests would otherwise hit the default of 5.
    request_queue_size = 128

    owner: ScriptedModelServer

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup that can stall for
        # seconds on machines without a resolver. The name is never used here.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up mid-answer (timeouts, stop()) are expected; don't spray tracebacks
        # into the pytest output for them.
        pass


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so httpx can keep connections alive; every answer therefore carries Content-Length.
    protocol_version = "HTTP/1.1"
    server_version = "ScriptedModelServer/1.0"
    in_flight = False  # set while this connection's current request counts as in flight
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without TCP_NODELAY, Nagle's algorithm and the
        # client's delayed ACK hold the body back ~40 ms per answer, which swamps every timing.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._track_connection(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track_connection(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:
        self.server.owner._handle(self, "GET")

    def do_POST(self) -> None:
        self.server.owner._handle(self, "POST")


class ScriptedModelServer:
    """An OpenAI-compatible chat-completions server on 127.0.0.1 that answers from a script.

    It can imitate the self-hosted servers pytest-ncp meets (llama.cpp, Ollama, LM Studio...):

    - ``reject_formats=("json_schema",)``: answer HTTP 500 naming the response format, as
      llama-cpp-python's server does for OpenAI's ``json_schema`` (``"prompt"``-mode requests carry none);
    - ``drop_system=True``: act as a chat template that drops system messages (they count for nothing
      in ``prompt_tokens`` and rules matching text never see them);
    - ``honour_max_tokens=False``: ignore ``max_tokens`` (by default an answer longer than it, counted
      in words, is cut and ends with ``finish_reason: "length"``);
    - ``serial=True``: serve one request at a time, and keep working on a request whose client hung
      up (its scripted ``delay`` runs to the end), as a single-slot llama.cpp server does.
    """

    def __init__(self, latency: float = 0.0, *, reject_formats: tuple[str, ...] = (), drop_system: bool = False,
                 honour_max_tokens: bool = True, serial: bool = False) -> None:
        if latency < 0:
            raise ValueError(f"latency must be >= 0, got {latency!r}")
        self.latency = float(latency)
        self.reject_formats = tuple(reject_formats)
        self.drop_system = drop_system
        self.honour_max_tokens = honour_max_tokens
        self.serial = serial
        self._serial_lock = threading.Lock()
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        # Slots are reserved on arrival and filled once the status is known, so the list stays in
        # arrival order even when a slow early request finishes after a fast later one. reset()
        # swaps in a new list, which keeps in-flight requests from writing into the fresh one.
        self._slots: list[RecordedRequest | None] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._connections: set[socket.socket] = set()
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> ScriptedModelServer:
        if self._httpd is not None:
            raise RuntimeError("ScriptedModelServer is already running")
        self._stopping.clear()
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"ScriptedModelServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._httpd = None
        self._thread = None
        # Wake handlers sleeping on latency/delay so they don't outlive the server.
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        # Keep-alive connections park a handler thread in readline() until the client hangs up;
        # close them so no thread from this server lingers after stop().
        with self._lock:
            connections = list(self._connections)
            self._connections.clear()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("ScriptedModelServer is not running; call start() first")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- script ----------------------------------------------------------------------------

    def add(
        self,
        *,
        step: str | None = None,
        role: str | None = None,
        model: str | None = None,
        contains: str | None = None,
        regex: str | re.Pattern[str] | None = None,
        reply: Reply = None,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        body: str | bytes | None = None,
        delay: float = 0.0,
        times: int | None = None,
        usage: Mapping[str, Any] | Any = None,
    ) -> Rule:
        """Script an answer. Later rules win over earlier ones; ``reply=None`` keeps the default."""
        rule = Rule(
            step=step, role=role, model=model, contains=contains, regex=regex, reply=reply,
            status=status, headers=dict(headers) if headers else None, body=body, delay=delay,
            times=times, usage=usage,
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    @property
    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self._slots if r is not None]

    @property
    def max_in_flight(self) -> int:
        with self._lock:
            return self._max_in_flight

    def reset(self) -> None:
        with self._lock:
            self._rules = []
            self._slots = []
            self._max_in_flight = self._in_flight

    # -- request handling ------------------------------------------------------------------

    def _track_connection(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _claim_rule(self, request: RecordedRequest) -> Rule | None:
        with self._lock:
            for rule in reversed(self._rules):
                if not rule.exhausted and rule.matches(request):
                    # Counted under the lock so `times=1` holds even with concurrent clients.
                    rule.hits += 1
                    return rule
        return None

    def _resolve(self, request: RecordedRequest) -> _Answer:
        rule = self._claim_rule(request)
        if rule is None:
            return _Answer(200, {}, _encode_content(default_reply(request.step, request.role)),
                           None, 0.0)
        status, headers, body, delay = rule.status, dict(rule.headers or {}), rule.body, rule.delay
        reply = rule.reply
        if callable(reply):
            reply = reply(request)
            if isinstance(reply, Rule):
                # A callable may decide the whole answer, not just the content.
                override = reply
                status, body, delay = override.status, override.body, override.delay
                headers = dict(override.headers or {})
                reply = override.reply(request) if callable(override.reply) else override.reply
        if reply is None and status == 200:
            reply = default_reply(request.step, request.role)
        raw = body.encode("utf-8") if isinstance(body, str) else body
        content = None if reply is None else _encode_content(reply)
        usage = rule.usage(request) if callable(rule.usage) else rule.usage
        return _Answer(int(status), headers, content, raw, float(delay), dict(usage) if usage else None)

    def _handle(self, handler: _Handler, method: str) -> None:
        received_at = time.monotonic()
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            slots = self._slots
            slot = len(slots)
            slots.append(None)
        handler.in_flight = True
        try:
            if self.serial and method == "POST":
                with self._serial_lock:
                    self._answer(handler, method, received_at, slots, slot)
            else:
                self._answer(handler, method, received_at, slots, slot)
        finally:
            self._release(handler)

    def _release(self, handler: _Handler) -> None:
        # A request stops counting as in flight just before its answer goes out, so a client that
        # has read the answer never sees it still counted (reset() right after a call is exact).
        with self._lock:
            if getattr(handler, "in_flight", False):
                handler.in_flight = False
                self._in_flight -= 1

    def _answer(
        self,
        handler: _Handler,
        method: str,
        received_at: float,
        slots: list[RecordedRequest | None],
        slot: int,
    ) -> None:
        path = handler.path.split("?", 1)[0]
        headers: dict[str, str] = {}
        for key, value in handler.headers.items():
            key = key.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        # Always drain the body, even for paths we reject, or the next request on this
        # keep-alive connection would be parsed from the leftover bytes.
        length = int(headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length > 0 else b""

        body: dict[str, Any] = {}
        parse_error: str | None = None
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError as exc:
                parse_error = f"Request body is not valid JSON: {exc}"
            else:
                if isinstance(parsed, dict):
                    body = parsed
                else:
                    parse_error = "Request body must be a JSON object."

        has_schema, step = _json_schema_name(body)
        step = step or headers.get(STEP_HEADER)
        format_type = _response_format_type(body)
        role = headers.get(ROLE_HEADER) or ("auditor" if has_schema or format_type else None)
        model = body.get("model") if isinstance(body.get("model"), str) else None
        # What the model would see: a template that drops system messages drops them from everything.
        text = _message_text(_without_system(body) if self.drop_system else body)

        def record(status: int) -> RecordedRequest:
            request = RecordedRequest(
                path=path, headers=headers, body=body, step=step, role=role, model=model,
                text=text, received_at=received_at, status=status,
            )
            # Recorded before the answer is written: once a client has its response the request
            # must already be visible in `requests`.
            with self._lock:
                slots[slot] = request
            return request

        self._sleep(self.latency)

        if method == "GET":
            if path in _MODEL_PATHS:
                record(200)
                self._send_json(handler, 200, self._model_list())
            else:
                record(404)
                self._send_error(handler, 404, f"No route for GET {path}", {})
            return
        if path not in _CHAT_PATHS:
            record(404)
            self._send_error(handler, 404, f"No route for POST {path}", {})
            return
        if parse_error is not None:
            record(400)
            self._send_error(handler, 400, parse_error, {})
            return
        if format_type is not None and format_type in self.reject_formats:
            # llama-cpp-python's words for a response_format type it does not take (pydantic's literal error).
            allowed = " or ".join(f"'{t}'" for t in ("text", "json_object", "json_schema") if t not in self.reject_formats)
            record(500)
            self._send_error(handler, 500, f"1 validation error for CreateChatCompletionRequest\n"
                             f"response_format.type\n  Input should be {allowed} "
                             f"[type=literal_error, input_value='{format_type}', input_type=str]", {})
            return

        provisional = RecordedRequest(
            path=path, headers=headers, body=body, step=step, role=role, model=model, text=text,
            received_at=received_at, status=0,
        )
        try:
            answer = self._resolve(provisional)
        except Exception as exc:  # a broken reply callable must still produce an answer
            record(500)
            self._send_error(handler, 500, f"Scripted reply raised {type(exc).__name__}: {exc}", {})
            return
        self._sleep(answer.delay)
        record(answer.status)

        stream = body.get("stream") is True
        if answer.body is not None:
            content_type = "text/event-stream" if stream else "application/json"
            self._send(handler, answer.status, answer.body, content_type, answer.headers)
        elif answer.status != 200:
            self._send_error(handler, answer.status, answer.content, answer.headers)
        elif stream:
            self._send_stream(handler, body, model, text, answer.content or "", answer.headers, answer.usage)
        else:
            content, finish = self._limit(answer.content or "", body.get("max_tokens"))
            self._send_json(
                handler, 200, self._completion(model, text, content, finish, answer.usage), answer.headers
            )

    def _limit(self, content: str, max_tokens: Any) -> tuple[str, str]:
        # One word is one token here (as in ``usage``): an answer longer than max_tokens is cut.
        if not self.honour_max_tokens or not isinstance(max_tokens, int) or max_tokens < 1:
            return content, "stop"
        words = content.split()
        if len(words) <= max_tokens:
            return content, "stop"
        return " ".join(words[:max_tokens]), "length"

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    # -- response building -----------------------------------------------------------------

    def _model_list(self) -> dict[str, Any]:
        names = list(_STATIC_MODELS)
        for rule in self.rules:
            if rule.model is not None and rule.model not in names:
                names.append(rule.model)
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "pytest-ncp"}
                for name in names
            ],
        }

    def _usage(self, text: str, content: str, scripted: Mapping[str, Any] | None = None) -> dict[str, Any]:
        prompt, completion = _word_count(text), _word_count(content)
        usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion}
        usage.update(scripted or {})
        if "total_tokens" not in (scripted or {}):
            usage["total_tokens"] = int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
        return usage

    def _completion(self, model: str | None, text: str, content: str, finish: str = "stop",
                    usage: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-scripted-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model or "unknown",
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": self._usage(text, content, usage),
        }

    def _send_stream(
        self,
        handler: _Handler,
        body: Mapping[str, Any],
        model: str | None,
        text: str,
        content: str,
        headers: Mapping[str, str],
        usage: Mapping[str, Any] | None = None,
    ) -> None:
        base = {
            "id": f"chatcmpl-scripted-{next(self._ids)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model or "unknown",
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        # A few pieces rather than one, so client-side reassembly is actually exercised.
        pieces = max(1, min(4, len(content)))
        size = -(-len(content) // pieces) if content else 0
        events = [chunk({"role": "assistant", "content": ""})]
        for start in range(0, len(content), max(1, size)):
            events.append(chunk({"content": content[start:start + size]}))
        final = chunk({}, "stop")
        options = body.get("stream_options")
        if isinstance(options, Mapping) and options.get("include_usage") is True:
            final["usage"] = self._usage(text, content, usage)
        events.append(final)
        payload = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
        # The whole stream is known up front, so it is sent with a Content-Length and the
        # connection stays reusable instead of being closed to mark the end.
        merged = {"Cache-Control": "no-cache", **headers}
        self._send(handler, 200, payload.encode("utf-8"), "text/event-stream", merged)

    def _send_json(
        self,
        handler: _Handler,
        status: int,
        payload: Any,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._send(handler, status, json.dumps(payload).encode("utf-8"), "application/json",
                   headers or {})

    def _send_error(
        self,
        handler: _Handler,
        status: int,
        message: str | None,
        headers: Mapping[str, str],
    ) -> None:
        kind, code = _ERROR_KINDS.get(
            status, ("server_error" if status >= 500 else "invalid_request_error", str(status))
        )
        error = {
            "message": message or f"Scripted error: HTTP {status}",
            "type": kind,
            "param": None,
            "code": code,
        }
        self._send_json(handler, status, {"error": error}, headers)

    def _send(
        self,
        handler: _Handler,
        status: int,
        payload: bytes,
        content_type: str,
        headers: Mapping[str, str],
    ) -> None:
        self._release(handler)
        try:
            handler.send_response(status)
            names = {name.lower() for name in headers}
            if "content-type" not in names:
                handler.send_header("Content-Type", content_type)
            for name, value in headers.items():
                if name.lower() != "content-length":
                    handler.send_header(name, str(value))
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            handler.close_connection = True

