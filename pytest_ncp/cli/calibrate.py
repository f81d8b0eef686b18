"""``ncp calibrate``: how good is an auditor on known answers (docs/auditor.md).

    ncp calibrate --check                              validate the gold set, print its balance
    ncp calibrate --auditor-model M [--out DIR]        run the auditor on every gold case and score it
    ncp calibrate --auditor-model M --min-recall 0.8   exit 1 when a conflict row's recall is lower
    ncp calibrate --from-playthroughs [SPEC ...]       (re)build cases/<id>-v4.yaml from specs' playthroughs
    ncp calibrate --reference [SPEC ...] --auditor-model M   false alarms and progress recall of an auditor on
                                                       the reference playthroughs (every conflict a false alarm)

Exit codes: 0 fine; 1 the gold set has problems (--check) or a --min-recall / --min-precision
threshold is not met; 2 usage error (bad option, no gold set).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any
from pathlib import Path

from ..testing.calibration import MODES as SCRIPTED_MODES
from .common import (
    EXIT_FAILED, EXIT_OK, add_batch_options, add_options, batch_problem, client_settings, usage, whole_number,
)

if TYPE_CHECKING:
    from ..calibration.goldset import GoldCase


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
    from ..calibration.playthrough import MAX_LENGTH_AUC
    from ..core.config import RECORD_MODES
    from ..core.options import CALL_OPTIONS

    p = sub.add_parser(
        "calibrate", help="score an auditor model on the gold-labelled calibration set (or --check the set)",
        description="Run the real audit steps (same prompts, parsing and fail-closed rules as episodes) on every "
                    "gold case and report precision, recall and F1 per step and conflict type. Exit 1 when "
                    "--min-recall / --min-precision is not met (or --check finds problems), 2 on usage errors.")
    p.add_argument("--check", action="store_true",
                   help="only validate the gold set and print its balance and length AUC (warns above "
                        f"{MAX_LENGTH_AUC})")
    p.add_argument("--from-playthroughs", nargs="*", metavar="SPEC",
                   help="(re)build the set's cases/<id>-v4.yaml from the playthroughs of these spec files or "
                        "directories (default: specs): points and clean cases rebuilt, edited cases kept, the "
                        "live spec's fingerprint stamped")
    p.add_argument("--reference", nargs="*", metavar="SPEC",
                   help="audit every reference playthrough turn of these specs (default: specs) with the auditor "
                        "(--auditor-model or --scripted) and report its false-alarm rate per turn, progress "
                        "recall and fact-update agreement")
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
    add_batch_options(p, "DIR/batches.json")
    p.add_argument("--scripted", choices=SCRIPTED_MODES,
                   help="offline: audit against the bundled scripted server answering every case with its gold "
                        "label, never a conflict, a conflict of every type, garbage, or the gold label except "
                        "where the narration addresses the auditor, which it obeys (gullible: what the injection "
                        "row catches) (scripted answers: shows what the figures mean, judges nothing)")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ..calibration.goldset import GoldSetError, balance, balance_lines, load_gold_set
    from ..calibration.playthrough import MAX_LENGTH_AUC, length_auc

    if getattr(args, "from_playthroughs", None) is not None:
        return _from_playthroughs(args)
    if getattr(args, "reference", None) is not None:
        return _reference(args)
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
        auc = length_auc(gold.cases)
        if auc is not None:
            print(f"  length AUC (response words, violation vs clean): {auc:.3f}"
                  + (f": WARNING above {MAX_LENGTH_AUC}, length alone predicts the label" if auc > MAX_LENGTH_AUC
                     else f" (at most {MAX_LENGTH_AUC}: ok)"))
        live = [c for c in gold.cases if c.from_turn is not None]
        if live:
            edits = sum(1 for c in live if c.violation)
            print(f"  from playthroughs: {len(live)} case(s) on {len({c.spec.id for c in live})} live spec(s), "
                  f"{edits} violation(s) as minimal edits")
        reviewed = {f: r for f, r in gold.reviews.items() if r.get("status") == "reviewed"}
        files = len(list((gold.directory / "cases").glob("*.yaml")))
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
    refused = batch_problem(args, args.auditor_model)
    if refused:
        return usage(refused, "ncp calibrate")
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
                           client_settings=settings, batch_dir=out if args.batch else None,
                           batch_poll=args.batch_poll)
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


def _playthrough_specs(paths: list[str]) -> list[Any] | None:
    from .common import load_specs_or_report

    loaded = load_specs_or_report(paths or ["specs"])
    if loaded is None:
        return None
    specs, errors = loaded
    for err in errors:
        print(err, file=sys.stderr)
    return [s for s in specs if s.playthrough] if not errors else None


def _from_playthroughs(args: argparse.Namespace) -> int:
    from ..calibration.playthrough import write_case_file
    from ..core.bundled import writable_folder

    specs = _playthrough_specs(args.from_playthroughs)
    if specs is None:
        return EXIT_FAILED
    if not specs:
        return usage("no spec there has a playthrough (docs/specs.md, Writing a playthrough)", "ncp calibrate")
    target = writable_folder(args.gold)
    if target is None:  # the gold set installed with the package: build into a set of your own
        return usage(f"{args.gold} is the gold set installed with pytest-ncp, not a folder to build into: give "
                     "your own with --set DIR (a checkout of pytest-ncp builds into its calibration/)",
                     "ncp calibrate")
    for spec in specs:
        path, clean, skipped = write_case_file(spec, target)
        print(f"{path}: {clean} clean case(s) from {len(spec.playthrough or [])} turn(s)"
              + (f", {len(skipped)} left out" if skipped else ""))
        for why in skipped:
            print(f"  left out {why}")
    print(f"check the set: ncp calibrate --check --set {args.gold}")
    return EXIT_OK


def _reference(args: argparse.Namespace) -> int:
    from ..calibration.playthrough import reference_cases

    specs = _playthrough_specs(args.reference)
    if specs is None:
        return EXIT_FAILED
    cases, problems = reference_cases(specs)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return EXIT_FAILED
    if not cases:
        return usage("no spec there has a playthrough (docs/specs.md, Writing a playthrough)", "ncp calibrate")
    if args.scripted:
        from ..testing import ScriptedModelServer
        from ..testing.calibration import install

        with ScriptedModelServer() as server:
            install(server, cases, args.scripted)
            print(f"offline: the auditor is the scripted server at {server.base_url} answering "
                  f"'openai/scripted-{args.scripted}' (scripted answers, not real judgments)")
            return _reference_run(args, cases, f"openai/scripted-{args.scripted}", server.base_url)
    if not args.auditor_model:
        return usage("give --auditor-model MODEL (the auditor to judge), or --scripted MODE", "ncp calibrate")
    return _reference_run(args, cases, args.auditor_model, args.api_base)


def _reference_run(args: argparse.Namespace, cases: list[Any], model: str, api_base: str | None) -> int:
    import json

    from ..calibration.playthrough import reference_lines, reference_rows, reference_summary
    from ..core.files import atomic_write_text
    from ..core.config import RunConfig
    from ..engine.auditor import LLMAuditor
    from ..llm import ModelClient

    try:
        settings = client_settings(args)
    except ValueError as exc:
        return usage(str(exc), "ncp calibrate")
    client = ModelClient.from_config(RunConfig(**{**settings, "api_base": api_base, "concurrency": args.concurrency}))
    rows, late = asyncio.run(reference_rows(LLMAuditor(client, model), cases, concurrency=args.concurrency))
    summary = reference_summary(rows, late)
    for line in reference_lines(summary):
        print(line)
    if args.out:
        path = Path(args.out) / "reference.json"
        atomic_write_text(path, json.dumps({"model": model, "summary": summary, "rows": rows, "late_rows": late},
                                           indent=1, ensure_ascii=False))
        print(f"reference: {path}")
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


def run_calibration(cases: list[GoldCase], *, model: str, api_base: str | None = None, concurrency: int = 16,
                    record_mode: str | None = None, cassettes: str | None = None, gold_dir: str = "",
                    client_settings: dict[str, Any] | None = None, batch_dir: Path | None = None,
                    batch_poll: float = 30.0) -> dict[str, Any]:
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

    if batch_dir is not None:
        concurrency = max(concurrency, len(cases))  # every case at once: each round of calls is one batch
    client = ModelClient.from_config(RunConfig(**{**(client_settings or {}), "api_base": api_base,
                                                  "concurrency": concurrency}))
    transport = None
    if batch_dir is not None:
        from ..llm.batch import BatchTransport

        BatchTransport.attach(client, Path(batch_dir), poll=batch_poll,
                              on_status=lambda line: print(line, file=sys.stderr, flush=True))
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
        **({"batches": list(client.transport.submitted)} if batch_dir is not None else {}),  # type: ignore[union-attr]
        "balance": balance(cases), "summary": score(rows), "rows": rows,
    }
