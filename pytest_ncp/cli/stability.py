"""``ncp stability RUN --votes K [--clean-sample N]``: how often would a recorded verdict flip if audited again?

The work is in :mod:`pytest_ncp.engine.stability` (re-auditing) and :mod:`pytest_ncp.analysis.stability`
(flip rates); this module parses options and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack
from typing import Any

from ..core.options import OPTION
from .common import EXIT_OK, add_options, positive, resolve_args, usage, whole_number


def register(sub: Any) -> None:
    p = sub.add_parser(
        "stability", help="re-audit the turns that ended episodes (and a sample of clean ones) K times: flip rates",
        description="Audit again, K times each, every recorded turn whose confirmed conflict ended an episode, "
                    "and a seeded sample of clean turns; report per conflict type how often the verdict flips, "
                    "with a Wilson 95% interval. Calls only the auditor (conflict check and confirmation); "
                    "writes nothing to the run.")
    p.add_argument("source", metavar="RUN", help="a run directory or its results.json (its traces/ beside it)")
    p.add_argument("--votes", type=positive, required=True, metavar="K", help="re-audits per turn")
    p.add_argument("--clean-sample", type=whole_number(0), default=0, metavar="N",
                   help="also re-audit N clean turns (no confirmed conflict), drawn with --seed (default: 0)")
    p.add_argument("--seed", type=whole_number(0), default=0, metavar="S", help="seed of the clean sample (default: 0)")
    p.add_argument("--auditor-model", metavar="MODEL", help="the auditor to ask (default: the run's)")
    p.add_argument("--api-base", metavar="URL", help="OpenAI-compatible endpoint (overrides env vars)")
    p.add_argument("--temperature", type=float, default=None, metavar="T",
                   help="of every re-audit call (default: 0.7, as --audit-votes samples; 0 measures only how "
                        "far the provider's greedy answers wander)")
    p.add_argument("--specs", nargs="+", metavar="PATH", help="spec files or directories, when the recorded "
                                                                "spec paths moved")
    p.add_argument("--json", action="store_true", help="print the flip rates and every turn as JSON")
    p.add_argument("--demo", action="store_true", help="ask the bundled scripted server (a run of `ncp demo`; "
                                                       "judges nothing real)")
    add_options(p, (OPTION["concurrency"], OPTION["timeout"]), "stability")
    p.set_defaults(func=cmd_stability)


def cmd_stability(args: argparse.Namespace) -> int:
    import asyncio

    from ..analysis.results import load_results, results_path
    from ..analysis.stability import flip_summary
    from ..core.config import RunConfig
    from ..core.traces import RunFileError, resolve_trace
    from ..engine.auditor import VOTE_TEMPERATURE
    from ..engine.fork import ForkError
    from ..engine.reaudit import read_recorded, resolve_specs
    from ..engine.stability import reaudit_turns, select_turns
    from ..llm import ModelClient
    from ..report.stability import stability_lines

    try:
        resolve_args(args)
    except ValueError as exc:
        return usage(str(exc))
    try:
        run = load_results(args.source)
        folder = results_path(args.source).parent
        episodes, missing = [], []
        for e in run.episodes:
            trace = resolve_trace(e.trace, folder)
            if trace is not None:
                episodes.append((e, trace))
            elif e.failure is not None:
                missing.append(f"{e.key} ({e.trace or 'no trace recorded'})")
        if missing:
            return usage(f"{args.source}: trace(s) of ending turns not found: {', '.join(missing)}; keep the run's "
                         "traces/ directory next to results.json")
        turns = select_turns(episodes, clean_sample=args.clean_sample, seed=args.seed)
        specs, problems = resolve_specs([read_recorded(t) for _, t in episodes], args.specs, args.source)
    except (RunFileError, OSError) as exc:
        return usage(str(exc))
    if problems:
        for problem in problems:
            print(problem, file=sys.stderr)
        return usage(f"{len(problems)} problem(s) before re-auditing; nothing was run")
    if not turns:
        return usage(f"{args.source}: no turn to re-audit (no episode ended in a conflict; ask for --clean-sample N)")
    config = run.config
    model = args.auditor_model or config.auditor_model
    if not model:
        return usage("the run records no auditor model: give --auditor-model")
    audit_votes = int(config.audit_votes or 1)
    temperature = VOTE_TEMPERATURE if args.temperature is None else float(args.temperature)
    print(f"re-auditing {len(turns)} turn(s) of {args.source} {args.votes} time(s) each", file=sys.stderr)
    if config.demo and not args.demo:
        return usage(f"{args.source} is an offline demo run (its models were the bundled scripted server): re-audit "
                     "it with --demo, never against a real endpoint")
    with ExitStack() as stack:
        api_base = args.api_base
        if args.demo:
            from ..testing import ScriptedModelServer
            from ..testing.demo import install_demo_script

            server = stack.enter_context(ScriptedModelServer())
            install_demo_script(server)
            api_base = server.base_url
        client = ModelClient.from_config(RunConfig(api_base=api_base, concurrency=args.concurrency,
                                                   timeout=args.timeout))
        try:
            observations = asyncio.run(reaudit_turns(turns, specs, client=client, model=model, votes=args.votes,
                                                     audit_votes=audit_votes, temperature=temperature,
                                                     concurrency=args.concurrency))
        except (RunFileError, ForkError) as exc:  # a trace that is not there, a spec changed since the run
            return usage(str(exc))
    summary = flip_summary(observations)
    if args.json:
        print(json.dumps({"source": str(args.source), "votes": args.votes, "model": model, "temperature": temperature,
                          "audit_votes": audit_votes, "clean_sample": args.clean_sample, "seed": args.seed,
                          **summary}, indent=2))
    else:
        print("\n".join(stability_lines(summary, source=str(args.source), votes=args.votes, model=model,
                                        temperature=temperature, audit_votes=audit_votes)))
    return EXIT_OK
