"""``ncp doctor``: a preflight of one model endpoint, in seconds, before a long run.

One line per check (endpoint reachable, model listed, structured-output mode, system prompt, max_tokens,
speed), each saying what to set when it fails. The calls go through the run's ``ModelClient``, so they
take the same path (and the same options) as a real run. Exit 1 when the model cannot serve as an
auditor: the endpoint is unreachable or no structured-output mode gives a valid answer.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from typing import Any

from ..core.options import CALL_OPTIONS, default
from .common import EXIT_FAILED, EXIT_OK, add_options, call_config, usage

OK, FIX, FAIL, INFO = "ok", "FIX", "FAIL", "info"

# A small auditor-shaped answer: the confirmation step's model, with bounded strings so that even a
# model that never stops on its own ends inside the grammar of servers that compile the schema.
PROBE_STEP = "conflict_confirmation"
PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirmed": {"type": "boolean"}, "explanation": {"type": "string", "maxLength": 80}},
    "required": ["confirmed", "explanation"], "additionalProperties": False,
}
PROBE_MESSAGES = [
    {"role": "system", "content": "You check statements against a story. Answer in JSON only."},
    {"role": "user", "content": 'Story: "The lamp in the tower is lit every night." Statement: "The lamp is lit." '
                                'Is the statement confirmed by the story? Answer with JSON: '
                                '{"confirmed": true or false, "explanation": "one short sentence"}'},
]
SYSTEM_PROBE = ("You are the narrator of a quiet story set in a lighthouse on a northern coast. The keeper "
                "is old, the lamp must be lit at dusk, the supply boat comes on Thursdays, and the radio has "
                "been silent for a week. Keep every answer short and never contradict these facts.")
MAX_TOKENS_PROBE = 8


@dataclass
class Check:
    status: str
    name: str
    text: str
    setting: str | None = None  # what to set when it is not ok

    def line(self) -> str:
        return f"{self.status:<4}  {self.name:<17} {self.text}"


def register(sub: Any) -> None:

    p = sub.add_parser(
        "doctor", help="preflight a model endpoint: reachable, listed, structured output, system prompt, "
                       "max_tokens, speed",
        description="Check in seconds whether MODEL at --api-base can serve pytest-ncp, one line per check "
                    "with what to set when it fails. Exit 1 when it cannot serve as an auditor.")
    p.add_argument("--model", required=True, help="litellm model name, e.g. openai/gemma (openai/ is assumed "
                                                  "with --api-base when no provider is given)")
    p.add_argument("--api-base", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1")
    add_options(p, CALL_OPTIONS, "doctor")
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    from ..llm import ModelClient

    model = args.model if "/" in args.model or not args.api_base else f"openai/{args.model}"
    try:
        # The doctor tries every structured-output mode itself, from the client's first (auto).
        config = call_config(args, api_base=args.api_base, structured_output=default("structured-output"))
    except ValueError as exc:
        return usage(str(exc))
    client = ModelClient.from_config(config, max_retries=1, backoff=0.2)
    print(f"ncp doctor: {model} at {client.endpoint(model)}")
    usable = asyncio.run(_run(client, model, args.api_base, args.structured_output, print))
    return EXIT_OK if usable else EXIT_FAILED


async def _run(client: Any, model: str, api_base: str | None, wanted_mode: str, emit: Any) -> bool:
    """Run every check, printing each line as it is known; True when the model can serve as an auditor."""
    endpoint = client.endpoint(model)
    listing = _list_models(api_base, model)
    if isinstance(listing, Check):
        emit(listing.line())
        if listing.status == FAIL:
            emit(f"verdict: {model} cannot serve as an auditor: {endpoint} is unreachable")
            return False
    else:
        ids, seconds = listing
        emit(Check(OK, "endpoint", f"{endpoint} answers (GET models in {seconds:.2f}s)").line())
        name = model.split("/", 1)[1] if "/" in model else model
        if name in ids:
            emit(Check(OK, "model", f"{name!r} is listed").line())
        else:
            shown = ", ".join(ids[:5]) or "none"
            emit(Check(FIX, "model", f"{name!r} is not among the listed models ({shown}); servers with one model "
                                     f"(llama.cpp) may answer anyway, else use --model openai/<listed id>").line())

    structured = await _structured(client, model, wanted_mode)
    emit(structured[0].line())
    system = await _system_prompt(client, model)
    emit(system.line())
    limit = await _max_tokens(client, model)
    emit(limit.line())
    speed = await _speed(client, model)
    emit(speed.line())

    mode = structured[1]
    if mode is None:
        emit(f"verdict: {model} cannot serve as an auditor: no structured-output mode gave a valid answer")
        return False
    advice = [c.setting for c in (structured[0], system, limit, speed) if c.setting]
    emit(f"verdict: usable as an auditor ({mode})" + (f"; suggested: {' '.join(advice)}" if advice else ""))
    return True


def _list_models(api_base: str | None, model: str) -> tuple[list[str], float] | Check:
    from ..llm.preflight import probe_endpoint

    probe = probe_endpoint(api_base, model)  # the same probe a run makes before its episodes start
    if probe.status == "ok":
        return list(probe.models), probe.seconds
    status = {"skipped": INFO, "answers": FIX}.get(probe.status, FAIL)
    return Check(status, "endpoint", probe.text)


async def _structured(client: Any, model: str, wanted: str) -> tuple[Check, str | None]:
    """Try every mode (or only the one asked for); the first that gives a valid answer is the auditor's."""
    from ..engine.auditor import decode_answer
    from ..llm import ModelError

    fmt = {"type": "json_schema", "json_schema": {"name": PROBE_STEP, "schema": PROBE_SCHEMA, "strict": True}}
    modes = ("json_schema", "json_object", "prompt") if wanted == "auto" else (wanted,)
    notes: list[str] = []
    accepted: str | None = None
    usable: str | None = None
    for mode in modes:
        try:
            completion = await client.complete("auditor", model, [dict(m) for m in PROBE_MESSAGES], step=PROBE_STEP,
                                               response_format=fmt, temperature=0.0, max_tokens=120,
                                               output_mode=mode)
        except ModelError as exc:
            detail = _tail(str(exc))
            status = f"HTTP {exc.status}: " if exc.status and not detail.startswith("HTTP ") else ""
            notes.append(f"{mode} {'rejected' if exc.rejects_format else 'failed'} ({status}{detail})")
            if not exc.rejects_format:
                accepted = accepted or mode  # auto moves on only when the response format is refused
            continue
        accepted = accepted or mode
        answer, problems = decode_answer(PROBE_STEP, completion.text)
        if answer is None:
            cut = " (cut by max_tokens)" if completion.truncated else ""
            notes.append(f"{mode} accepted but the answer is invalid{cut}: {problems[0]}")
            continue
        usable = mode
        break
    if usable is not None:
        others = f" ({'; '.join(notes)})" if notes else ""
        if wanted != "auto":
            return Check(OK, "structured output", f"{usable} gives valid answers{others}"), usable
        if accepted == usable:
            return Check(OK, "structured output", f"{usable} gives valid answers, auto picks it{others}"), usable
        return Check(FIX, "structured output", f"{usable} gives valid answers, but auto would stay with {accepted}"
                                               f"{others} -> set --structured-output={usable}",
                     f"--structured-output={usable}"), usable
    hint = ("no mode works: this model cannot judge turns; use another --auditor-model"
            if wanted == "auto" else f"try --structured-output=auto")
    return Check(FAIL, "structured output", f"{'; '.join(notes)} -> {hint}"), None


async def _system_prompt(client: Any, model: str) -> Check:
    """Does a system message reach the model? Compared by prompt tokens: with and without one."""
    from ..llm import ModelError

    user = {"role": "user", "content": "Say OK."}
    try:
        bare = await client.complete("narrator", model, [dict(user)], temperature=0.0, max_tokens=1)
        with_system = await client.complete("narrator", model, [{"role": "system", "content": SYSTEM_PROBE},
                                                                 dict(user)], temperature=0.0, max_tokens=1)
    except ModelError as exc:
        return Check(FAIL, "system prompt", f"could not check: {_tail(str(exc))}")
    if not bare.prompt_tokens or not with_system.prompt_tokens:
        return Check(INFO, "system prompt", "unknown: the server reports no token usage")
    grew = with_system.prompt_tokens - bare.prompt_tokens
    merged = " (merged into the first user message: --system-prompt=merge)" if client.system_prompt == "merge" else ""
    if grew >= len(SYSTEM_PROBE.split()) // 3:
        return Check(OK, "system prompt", f"reaches the model (+{grew} prompt tokens){merged}")
    return Check(FIX, "system prompt", f"dropped by the server's chat template ({bare.prompt_tokens} prompt tokens "
                                       f"without it, {with_system.prompt_tokens} with it) -> set --system-prompt=merge",
                 "--system-prompt=merge")


async def _max_tokens(client: Any, model: str) -> Check:
    from ..llm import ModelError

    messages = [{"role": "user", "content": "Count from 1 to 100 in words, separated by commas."}]
    try:
        c = await client.complete("narrator", model, messages, temperature=0.0, max_tokens=MAX_TOKENS_PROBE)
    except ModelError as exc:
        return Check(FAIL, "max_tokens", f"could not check: {_tail(str(exc))}")
    produced = c.completion_tokens or len(c.text.split())
    if produced <= MAX_TOKENS_PROBE + 1:
        return Check(OK, "max_tokens", f"honoured ({produced} tokens with max_tokens={MAX_TOKENS_PROBE}, "
                                       f"finish_reason={c.finish_reason})")
    return Check(FIX, "max_tokens", f"ignored ({produced} tokens with max_tokens={MAX_TOKENS_PROBE}): generations "
                                    "are bounded only by --timeout; set the limit on the server (e.g. llama.cpp -n)")


async def _speed(client: Any, model: str) -> Check:
    from ..llm import ModelError

    messages = [{"role": "user", "content": "Describe a lighthouse at night in three sentences."}]
    try:
        c = await client.complete("narrator", model, messages, temperature=0.0, max_tokens=32)
    except ModelError as exc:
        return Check(FAIL, "speed", f"could not check: {_tail(str(exc))}")
    produced = c.completion_tokens or len(c.text.split())
    rate = produced / c.latency_s if c.latency_s > 0 else 0.0
    text = f"{c.latency_s:.2f}s for {produced} tokens ({rate:.1f} tokens/s)"
    if rate > 0:
        worst = max(client.max_tokens_for("auditor"), client.max_tokens_for("narrator"))
        needed = worst / rate + c.latency_s
        if needed > client.timeout:
            return Check(FIX, "speed", f"{text}: a {worst}-token answer needs ~{needed:.0f}s, more than --timeout "
                                       f"{client.timeout:g}s -> set --timeout={needed * 1.5:.0f} or lower --max-tokens",
                         f"--timeout={needed * 1.5:.0f}")
    return Check(OK, "speed", text)


def _tail(message: str) -> str:
    from ..llm import brief_error

    return brief_error(message, limit=160)
