"""What the ``ncp`` sub-commands share: exit codes, argument types, the model-call options, the error line
and the one-line run summary. Every command module imports from here, never from another command."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Sequence

from ..core.exit_codes import EXIT_ERROR_BUDGET, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

__all__ = [
    "EXIT_ERROR_BUDGET", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "check_specs", "client_settings",
    "error_rate", "load_specs_or_report", "model_call_options", "positive", "seconds", "summary", "usage",
    "whole_number", "worker_count",
]


def usage(message: str, command: str = "ncp") -> int:
    """Say what is wrong on stderr (``ncp: error: ...``) and return the usage exit code."""
    print(f"{command}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def model_call_options(p: argparse.ArgumentParser, *, timeout: float = 120.0) -> None:
    """Options that shape every model call (shared by run, demo, reaudit and doctor)."""
    from ..core.config import DEFAULT_MAX_TOKENS, OUTPUT_MODES, SYSTEM_PROMPT_MODES

    p.add_argument("--timeout", type=seconds, default=timeout,
                   help=f"seconds per model request (default {timeout:g}); a call with its retries gets 2.5x that")
    p.add_argument("--deadline", type=seconds, default=None,
                   help="seconds per model call including retries (default 2.5 x --timeout)")
    p.add_argument("--concurrency-per-endpoint", type=positive, default=None, metavar="N",
                   help="model requests in flight per endpoint (default 4 per episode); 1 for llama.cpp-style "
                        "servers that answer one request at a time")
    p.add_argument("--max-tokens", action="append", default=None, metavar="ROLE=N",
                   help="limit on generated tokens per call, repeatable; defaults: "
                        + ", ".join(f"{r}={n}" for r, n in DEFAULT_MAX_TOKENS.items()))
    p.add_argument("--structured-output", choices=OUTPUT_MODES, default="auto",
                   help="how auditor answers are asked for (default auto: json_schema, then json_object, then "
                        "prompt, chosen once per endpoint and model)")
    p.add_argument("--system-prompt", choices=SYSTEM_PROMPT_MODES, default="keep",
                   help="merge: fold system prompts into the first user message (chat templates that drop them)")


def client_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The RunConfig fields of ``model_call_options``; ValueError for a bad --max-tokens."""
    from ..core.config import parse_max_tokens

    return {"timeout": args.timeout, "deadline": args.deadline,
            "concurrency_per_endpoint": args.concurrency_per_endpoint,
            "max_tokens": parse_max_tokens(args.max_tokens), "structured_output": args.structured_output,
            "system_prompt": args.system_prompt}


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def whole_number(minimum: int) -> Callable[[str], int]:
    """argparse type: a whole number >= ``minimum``, with a message that says so."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


positive = whole_number(1)


def worker_count(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return whole_number(1)(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (or auto)") from None


def error_rate(text: str) -> float:
    from ..analysis.metrics import parse_error_rate

    try:
        return parse_error_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def load_specs_or_report(paths: Sequence[str]) -> tuple[list, list] | None:
    """Load specs for a command; a path that does not exist is reported on stderr (None returned)."""
    from ..core.spec import SpecError, load_specs

    try:
        return load_specs(paths)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return None


def check_specs(paths: Sequence[str], *, lint: bool, quiet: bool = False) -> tuple[list, list, list] | None:
    """Load specs and print their problems (and, with ``lint``, their lint findings): validate and lint share it."""
    loaded = load_specs_or_report(paths)
    if loaded is None:
        return None
    specs, errors = loaded
    for err in errors:
        print(err)
    findings: list = []
    if lint:
        from ..lint import lint_spec

        findings = [f for spec in specs for f in lint_spec(spec)]
        for finding in findings if not quiet else ():
            print(finding)
    return specs, errors, findings


def summary(m: dict, turn: int) -> str:
    rates = m["conflict_rates"]
    held = "n/a" if m.get("held_pct") is None else f"{m['held_pct']:.1f}%"
    if not m.get("judged", m["episodes"] - m["errors"]):
        figures = "nothing judged: every figure is n/a"
    else:
        figures = (f"avg turns {m['avg_turns']:.2f}, progress {m['progress_pct']:.1f}%, satisfied "
                   f"{m['satisfied_pct']:.1f}%, invariants held {held}, conflicts fact {rates['fact']:.0%} / "
                   f"commitment {rates['commitment']:.0%} / player input {rates['player_input']:.0%}, "
                   f"successes {m['successes']}, conflict-free {m['conflict_free']}, turn limit {m['turn_limit']}, "
                   f"script exhausted {m['script_exhausted']}")
    return (f"{m['episodes']} episode(s), {m['narrator_errors']} narrator error(s) (failures), {m['unknown']} "
            f"unknown (auditor/model/player errors): survival@{turn} {m['survival_point']['text']}, {figures}, "
            f"tokens {m['tokens']}, cost ${m['cost_usd']:.4f}")


