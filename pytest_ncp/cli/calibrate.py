"""``ncp calibrate``: how good is an auditor on known answers (docs/auditor.md).

    ncp calibrate --check                              validate the gold set, print its balance
    ncp calibrate --auditor-model M [--out DIR]        run the auditor on every gold case and score it
    ncp calibrate --auditor-model M --min-recall 0.8   exit 1 when a conflict row's recall is lower

Exit codes: 0 fine; 1 the gold set has problems (--check) or a --min-recall / --min-precision
threshold is not met; 2 usage error (bad option, no gold set).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any
from pathlib import Path

from ..testing.calibration import MODES as SCRIPTED_MODES
from .common import EXIT_FAILED, EXIT_OK, add_options, client_settings, usage, whole_number



def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a rate between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a rate between 0 and 1, got {text!r}")
    return value


def register(sub: Any) -> None:
    from ..calibration.goldset import DEFAULT_SET
    from ..core.config import RECORD_MODES
    from ..core.options import CALL_OPTIONS

    p = sub.add_parser(
        "calibrate", help="score an auditor model on the gold-labelled calibration set (or --check the set)",
        description="Run the real audit steps (same prompts, parsing and fail-closed rules as episodes) on every "
                    "gold case and report precision, recall and F1 per step and conflict type. Exit 1 when "
                    "--min-recall / --min-precision is not met (or --check finds problems), 2 on usage errors.")
    p.add_argument("--check", action="store_true", help="only validate the gold set and print its balance")
    p.add_argument("--set", dest="gold", default=DEFAULT_SET, metavar="DIR", help=f"gold set (default: {DEFAULT_SET})")
    p.add_argument("--auditor-model", metavar="MODEL", help="litellm model of the auditor to score")
    p.add_argument("--api-base", help="OpenAI-compatible endpoint (overrides env vars)")
    p.add_argument("--out", metavar="DIR", help="write DIR/calibration.json (default: calibration-runs/<model>)")
    p.add_argument("--concurrency", type=whole_number(1), default=16, help="cases in flight")
    add_options(p, CALL_OPTIONS, "calibrate")  # the auditor's calls are shaped as in ncp run (README)
    p.add_argument("--cases", nargs="+", metavar="ID", help="only these case ids (or spec ids)")
    p.add_argument("--min-recall", type=_rate, metavar="R",
                   help="exit 1 when recall of any conflict row (any, fact, commitment, player_input) is below R")
    p.add_argument("--min-precision", type=_rate, metavar="P", help="exit 1 when precision of a conflict row is below P")
    p.add_argument("--record-mode", choices=RECORD_MODES,
                   help="record/replay the auditor calls to cassettes (none = replay only)")
    p.add_argument("--cassettes", metavar="DIR", help="cassette directory for --record-mode")
    p.add_argument("--scripted", choices=SCRIPTED_MODES,
                   help="offline: audit against the bundled scripted server answering every case with its gold "
                        "label, never a conflict, a conflict of every type, garbage, or the gold label except "
                        "where the narration addresses the auditor, which it obeys (gullible: what the injection "
                        "row catches) (scripted answers: shows what the figures mean, judges nothing)")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ..calibration.goldset import GoldSetError, balance, balance_lines, load_gold_set

    try:
        gold = load_gold_set(args.gold)
    except GoldSetError as exc:
        return usage(str(exc), "ncp calibrate")
    if args.check:
        for problem in gold.problems:
            print(problem)
        b = balance(gold.cases)
        print(f"gold set {args.gold}: {len(gold.cases)} case(s) over {b['specs']} spec(s), "
              f"{len(gold.problems)} problem(s)")
        for line in balance_lines(b):
            print("  " + line)
        reviewed = {f: r for f, r in gold.reviews.items() if r.get("status") == "reviewed"}
        files = len(list((Path(args.gold) / "cases").glob("*.yaml")))
        print(f"  review: {len(reviewed)} of {files} case file(s) reviewed"
              + "".join(f"\n    {f}: {r.get('reviewer')} ({r.get('date')}): {r.get('notes') or ''}".rstrip()
                        for f, r in sorted(reviewed.items())))
        return EXIT_FAILED if gold.problems else EXIT_OK
    if args.scripted:
        return _scripted(args, gold)
    if not args.auditor_model:
        return usage("give --auditor-model MODEL (the auditor to score), or --check to validate the set",
                     "ncp calibrate")
    if args.record_mode and not args.cassettes:
        return usage("a record mode needs a cassette directory (--cassettes DIR)", "ncp calibrate")
    if gold.problems:
        for problem in gold.problems:
            print(problem, file=sys.stderr)
        return usage(f"the gold set {args.gold} has {len(gold.problems)} problem(s); fix them (ncp calibrate --check)",
                     "ncp calibrate")
    cases = gold.cases
    if args.cases:
        wanted = set(args.cases)
        cases = [c for c in cases if c.id in wanted or c.spec.id in wanted]
        if not cases:
            return usage(f"no case or spec id matches {' '.join(args.cases)}", "ncp calibrate")

    try:
        settings = client_settings(args)
    except ValueError as exc:
        return usage(str(exc), "ncp calibrate")
    out = Path(args.out) if args.out else Path("calibration-runs") / args.auditor_model.replace("/", "_")
    data = run_calibration(cases, model=args.auditor_model, api_base=args.api_base, concurrency=args.concurrency,
                           record_mode=args.record_mode, cassettes=args.cassettes, gold_dir=args.gold,
                           client_settings=settings)
    from ..calibration.audit import write_calibration
    from ..calibration.scoring import gate_problems
    from ..report.calibration import calibration_table

    print(calibration_table(data))
    path = write_calibration(out, data)
    print(f"calibration: {path}")
    failed = gate_problems(data["summary"], min_recall=args.min_recall, min_precision=args.min_precision)
    if args.min_recall is not None or args.min_precision is not None:
        if failed:
            print("calibration gate FAILED: " + "; ".join(failed))
            return EXIT_FAILED
        print("calibration gate passed")
    return EXIT_OK


def _scripted(args: argparse.Namespace, gold: object) -> int:
    from ..testing import ScriptedModelServer
    from ..testing.calibration import install

    with ScriptedModelServer() as server:
        install(server, gold.cases, args.scripted)  # type: ignore[attr-defined]
        args.auditor_model = args.auditor_model or f"openai/scripted-{args.scripted}"
        args.api_base, args.scripted = server.base_url, None
        print(f"offline: the auditor is the scripted server at {server.base_url} answering '{args.auditor_model}' "
              "(scripted answers, not real judgments)")
        return cmd_calibrate(args)


def run_calibration(cases: list, *, model: str, api_base: str | None = None, concurrency: int = 16,
                    record_mode: str | None = None, cassettes: str | None = None, gold_dir: str = "",
                    client_settings: dict | None = None) -> dict:
    """Audit every case with ``model`` and score it: the content of calibration.json.

    ``client_settings`` are the RunConfig fields of the model-call options (``common.client_settings``: timeout,
    deadline, max tokens, structured-output and system-prompt modes), the same as an ``ncp run`` would use.
    """
    from ..engine.auditor import LLMAuditor
    from ..calibration.audit import CALIBRATION_VERSION, audit_cases
    from ..calibration.goldset import balance
    from ..calibration.scoring import score
    from ..core.config import RunConfig
    from ..llm import ModelClient, scrub
    from ..prompts import PROMPT_VERSION

    client = ModelClient.from_config(RunConfig(**{**(client_settings or {}), "api_base": api_base,
                                                  "concurrency": concurrency}))
    transport = None
    if record_mode:
        from ..llm.cassette import CassetteTransport

        transport = CassetteTransport(record_mode, cassettes or "cassettes", client.transport or client.model_call)
        client.transport = transport
    auditor = LLMAuditor(client, model)
    try:
        rows = asyncio.run(audit_cases(auditor, cases, concurrency=concurrency))
    finally:
        if transport is not None:
            transport.flush()
    return {
        "version": CALIBRATION_VERSION, "model": model, "prompt_version": PROMPT_VERSION,
        "api_base": scrub(api_base) if api_base else None, "set": str(gold_dir),
        "structured_output": client.structured_output,
        "structured_output_used": client.output_modes(),  # what ``auto`` chose per endpoint and model
        "balance": balance(cases), "summary": score(rows), "rows": rows,
    }
