"""``ncp run``: play, audit and score episodes of a narrator over specs; writes DIR/results.json and traces."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from .common import EXIT_ERROR_BUDGET, EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_options, resolve_args, summary, usage


def register(sub: Any) -> None:
    p = sub.add_parser("run", help="run episodes of a narrator over specs")
    run_options(p, "run")
    p.set_defaults(func=cmd_run)


def run_options(p: argparse.ArgumentParser, command: str) -> None:
    """The options of a run, from the option table: ``ncp run`` (and ``ncp demo``, which brings its own narrator)."""
    from ..core.options import RUN_OPTIONS

    add_options(p, (o for o in RUN_OPTIONS if command == "run" or o.name != "narrator"), command)


def cmd_run(args: argparse.Namespace, *, narrator: str | None = None, api_base: str | None = None,
            demo: bool = False) -> int:
    from ..analysis.metrics import Gate, error_budget
    from ..core.config import RunConfig
    from ..core.spec import load_specs
    from ..engine.narrators import NarratorLoadError
    from ..engine.runner import Runner
    from ..report.progress import ProgressDisplay

    try:
        options = resolve_args(args)  # every table option parsed and checked; args now hold the values
    except ValueError as exc:
        return usage(str(exc))
    config = RunConfig.from_options(options, narrator=narrator, api_base=api_base, demo=demo or None)
    gate = Gate.parse(args.min_survival) if args.min_survival else None
    canary_cases, problem = _canary_cases(args)
    if problem:
        return usage(problem)
    problems: list[str] = config.validate(options)
    if problems:
        return usage("\n  ".join(problems))
    specs, errors = load_specs(args.specs)
    for err in errors:
        print(err, file=sys.stderr)
    if not specs:
        return usage(f"no valid spec found in {' '.join(args.specs)}")
    try:
        runner = Runner(config, out_dir=Path(args.out) if args.out else None)
    except (NarratorLoadError, ValueError) as exc:
        return usage(str(exc))
    if args.resume and not _resume(runner, specs, args):
        return EXIT_USAGE
    assert runner.client is not None
    display = ProgressDisplay(runner.progress, runner.client.usage)
    runner.on_episode = display.episode_done
    jobs = runner.jobs(specs)
    problems, canaries = _execute(runner, specs, len(jobs), canary_cases, args, display)
    for problem in problems:
        print(f"ncp: error: {problem}", file=sys.stderr)
    entries, metrics = _report(runner, jobs, canaries, args)
    budget = error_budget(entries, args.max_error_rate)
    if budget.unknown or budget.exceeded:
        print(budget.line())
    if gate:
        verdict = gate.check(entries, args.max_error_rate)
        print(verdict.line())
        if not verdict.passed:
            return verdict.exit_code
    if budget.exceeded:
        return EXIT_ERROR_BUDGET
    if canaries is not None and not canaries["ok"]:
        return EXIT_FAILED  # the canary verdict above says the auditor, not the narrator, is in doubt
    if not gate and metrics["narrator_errors"]:
        # Without a gate conflicts are measurements, but a narrator that crashes or answers nothing is a bug.
        print(f"ncp: {metrics['narrator_errors']} episode(s) ended in a narrator error (raised, timed out or "
              "answered nothing)", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_FAILED if errors or problems else EXIT_OK


def _canary_cases(args: argparse.Namespace) -> tuple[list[Any], str | None]:
    """The gold cases of ``--canaries K`` (none without it), or the usage problem."""
    if not args.canaries:
        return [], None
    from ..calibration.audit import pick_canaries
    from ..calibration.goldset import GoldSetError

    try:
        return pick_canaries(args.canary_set, args.canaries, seed=args.canary_seed), None
    except GoldSetError as exc:
        return [], f"--canaries: {exc}"


def _resume(runner: Any, specs: list[Any], args: argparse.Namespace) -> bool:
    """``--resume``: keep the finished episodes of ``--out``; False (said on stderr) when settings changed."""
    from ..engine.runner import ResumeMismatch

    try:
        kept = runner.resume(specs, force=args.force)
    except ResumeMismatch as exc:
        print(f"ncp: error: {exc}", file=sys.stderr)
        return False
    print(f"resuming: {kept} finished episode(s) in {args.out} are kept"
          + (f"; {len(runner.changed)} changed one(s) run again (--force)" if runner.changed else ""))
    return True


def _execute(runner: Any, specs: list[Any], jobs: int, canary_cases: list[Any], args: argparse.Namespace,
             display: Any) -> tuple[list[str], dict[str, Any] | None]:
    """Run the episodes (in this process or ``--workers``) and the canaries; the workers' problems and the
    canary summary. Ctrl-C says where the finished episodes are, then goes on up."""
    config = runner.config
    if args.workers == "auto":
        from ..engine.workers import default_workers

        workers = default_workers(min(config.concurrency, jobs))
    else:
        workers = int(args.workers)

    async def run_canaries() -> dict[str, Any] | None:
        if not canary_cases:
            return None
        from ..calibration.audit import run_canaries

        assert runner.auditor is not None
        return await run_canaries(runner.auditor, canary_cases, model=config.auditor_model, seed=args.canary_seed,
                                  min_recall=args.min_canary_recall, concurrency=config.concurrency)

    async def run_here() -> dict[str, Any] | None:  # episodes and canaries share one loop and client
        return (await asyncio.gather(runner.run(specs), run_canaries()))[1]

    problems: list[str] = []
    try:
        with display:
            if workers > 1:
                from ..engine.workers import run_in_workers

                problems = run_in_workers(runner, specs, workers, display=display)
                canaries = asyncio.run(run_canaries()) if canary_cases else None
            else:
                canaries = asyncio.run(run_here())
    except KeyboardInterrupt:
        if args.out:
            print(f"interrupted: {len(runner.results)} finished episode(s) are in {Path(args.out) / 'results.json'}; "
                  f"continue with the same command plus --resume", file=sys.stderr)
        raise
    return problems, canaries


def _report(runner: Any, jobs: list[tuple[Any, int]], canaries: dict[str, Any] | None,
            args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Print the run's summary (and the canaries'); the episode records of this run and their metrics."""
    from ..analysis.metrics import compute_metrics
    from ..core.config import episode_key

    config = runner.config
    entries = [runner.results[k] for k in (episode_key(s.id, r) for s, r in jobs) if k in runner.results]
    metrics = compute_metrics(entries, survival_turn=config.survival_turn)
    print(summary(metrics, config.survival_turn))
    if config.demo:
        print("offline demo: every model was the bundled scripted server; these figures judge no real model")
    if canaries is not None:
        from ..calibration.audit import canary_line, canary_verdict

        print(canary_line(canaries))
        print(canary_verdict(canaries))
        runner.canaries = canaries
        runner.save()  # results.json carries the canary score (and a shard's record)
    if args.out:
        print(f"results: {Path(args.out) / 'results.json'}")
    if args.shard:
        print(f"shard {args.shard}: {len(jobs)} episode(s); join the shards' folders with ncp merge")
    return entries, metrics
