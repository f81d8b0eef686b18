"""``ncp reaudit SOURCE --auditor-model M --out DIR``: re-judge recorded transcripts with another auditor.

The work is in :mod:`pytest_ncp.engine.reaudit`; this module parses options and prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..core.options import OPTION
from .common import EXIT_OK, add_options, resolve_args, summary, usage


def register(sub: Any) -> None:
    p = sub.add_parser("reaudit", help="re-judge recorded transcripts with another auditor model",
                       description="Replay every recorded transcript of SOURCE (narrator responses and player "
                                   "inputs from the traces; no narrator or player call) and audit it with "
                                   "--auditor-model; writes DIR/results.json and DIR/traces like ncp run.")
    p.add_argument("source", metavar="SOURCE",
                   help="a run directory, its results.json, a directory of traces, or one trace (.jsonl)")
    p.add_argument("--auditor-model", required=True, help="litellm model of the new auditor")
    p.add_argument("--api-base", help="OpenAI-compatible endpoint (overrides env vars)")
    p.add_argument("--out", required=True, metavar="DIR", help="write DIR/results.json and DIR/traces/*.jsonl")
    p.add_argument("--specs", nargs="+", metavar="PATH",
                   help="spec files or directories, when the recorded spec paths moved")
    add_options(p, (OPTION["concurrency"], OPTION["timeout"]), "reaudit")
    p.set_defaults(func=cmd_reaudit)


def cmd_reaudit(args: argparse.Namespace) -> int:
    import asyncio
    from ..report.progress import episode_line
    from ..analysis.metrics import compute_metrics
    from ..engine.reaudit import check_distinct, find_traces, read_recorded, reaudit, reaudit_config, resolve_specs
    from ..core.traces import RunFileError

    try:
        resolve_args(args)
    except ValueError as exc:
        return usage(str(exc))
    try:
        paths, source_config = find_traces(args.source)
        recorded = [read_recorded(p) for p in paths]
    except (RunFileError, OSError) as exc:
        return usage(str(exc))
    if not recorded:
        return usage(f"{args.source}: no episode recorded")
    out = Path(args.out)
    source_dir = Path(args.source) if Path(args.source).is_dir() else Path(args.source).parent
    if out.resolve() in {source_dir.resolve(), *(p.parent.resolve() for p in paths)}:
        return usage(f"--out {args.out} is where the source traces are; choose a new directory "
                      "(the re-audit writes its own results.json and traces)")
    specs, problems = resolve_specs(recorded, args.specs, args.source)
    problems += check_distinct(recorded)
    if problems:
        for problem in problems:
            print(problem, file=sys.stderr)
        return usage(f"{len(problems)} problem(s) before re-auditing; nothing was run")
    config = reaudit_config(recorded, source_config, source=args.source, auditor_model=args.auditor_model,
                            api_base=args.api_base, concurrency=args.concurrency, timeout=args.timeout)
    print(f"re-auditing {len(recorded)} recorded episode(s) of {args.source} with {args.auditor_model}")
    results = asyncio.run(reaudit(recorded, specs, config, out_dir=out,
                                  on_episode=lambda r: print(episode_line(r.record), flush=True)))
    episodes = [r.record for r in results]
    print(summary(compute_metrics(episodes, survival_turn=config.survival_turn), config.survival_turn))
    changed = sum(r.termination.value != rec.termination for r, rec in zip(results, recorded))
    print(f"{changed} of {len(results)} episode(s) end differently from the source")
    print(f"results: {out / 'results.json'}")
    return EXIT_OK
