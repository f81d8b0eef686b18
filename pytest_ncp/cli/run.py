"""``ncp run``: play, audit and score episodes of a narrator over specs; writes DIR/results.json and traces."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import EXIT_USAGE, add_options, load_specs_or_report, resolve_args, summary, usage

if TYPE_CHECKING:
    from ..analysis.metrics import Gate
    from ..analysis.sequential_run import SequentialPlan, SequentialRun
    from ..analysis.verdict import CanaryResult
    from ..core.records import EpisodeRecord


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
    from ..analysis.metrics import Gate
    from ..core.config import RunConfig
    from ..engine.narrators import NarratorLoadError
    from ..engine.runner import Runner
    from ..report.progress import ProgressDisplay
    from ..report.verdict import stopped_line

    try:
        options = resolve_args(args)  # every table option parsed and checked; args now hold the values
    except ValueError as exc:
        return usage(str(exc))
    config = RunConfig.from_options(options, narrator=narrator, api_base=api_base, demo=demo or None)
    gate = Gate.parse(args.min_survival) if args.min_survival else None
    canary_cases, problem = _canary_cases(args)
    if problem:
        return usage(problem)
    from ..engine.estimate import unpriced_under_cap

    problems: list[str] = [*config.validate(options), *unpriced_under_cap(config)]
    if problems:
        return usage("\n  ".join(problems))
    loaded = load_specs_or_report(args.specs)  # a path that does not exist: said on stderr, nothing run
    if loaded is None:
        return EXIT_USAGE
    specs, errors = loaded
    for err in errors:
        print(err, file=sys.stderr)
    if not specs:
        return usage(f"no valid spec found in {' '.join(args.specs)}")
    if args.estimate:
        return _estimate(config, specs, canary_cases, sequential=bool(args.sequential), history=args.history)
    try:
        runner = Runner(config, out_dir=Path(args.out) if args.out else None, sequential=_plan(gate, config, args))
    except (NarratorLoadError, ValueError) as exc:
        return usage(str(exc))
    if args.resume and not _resume(runner, specs, args):
        return EXIT_USAGE
    from ..engine.preflight import endpoint_problems, preflight_message

    broken = endpoint_problems(config, runner.narrator_factory)
    if broken:  # one message in seconds, not one error per call of every episode
        from ..core.exit_codes import EXIT_ERROR_BUDGET

        print(preflight_message(broken), file=sys.stderr)
        return EXIT_ERROR_BUDGET
    from ..engine.provenance import collect_provenance

    runner.provenance = collect_provenance(config.to_dict(), specs, branch=args.branch)
    assert runner.client is not None
    display = ProgressDisplay(runner.progress, runner.client.usage)
    runner.on_episode = lambda result: display.episode_done(result.record)
    runner.on_stop = lambda monitor: display.line(stopped_line(monitor.summary(), monitor.plan.cancel))
    jobs = runner.jobs(specs)
    problems, canaries = _execute(runner, specs, len(jobs), canary_cases, args, display)
    for problem in problems:
        print(f"ncp: error: {problem}", file=sys.stderr)
    entries = _report(runner, jobs, canaries, args)
    if args.history and not _record(runner, args):
        problems.append(f"the run could not be recorded in --history {args.history}")
    return _verdict(entries, runner.expected, gate, canaries, [*map(str, errors), *problems], args, runner.monitor,
                    runner=runner)


def _record(runner: Any, args: argparse.Namespace) -> bool:
    """``--history DB``: record the finished run (its results.json when written, else the results in memory)."""
    from ..analysis.history import HistoryError, add_run, open_history
    from ..analysis.results import load_results
    from ..core.traces import RunFileError

    try:
        results = load_results(args.out) if args.out else runner.results_now()
        conn = open_history(args.history)
        try:
            added = add_run(conn, results, Path(args.out).resolve() if args.out else None)
        finally:
            conn.close()
    except (HistoryError, RunFileError, OSError) as exc:
        print(f"ncp: error: --history: {exc}", file=sys.stderr)
        return False
    print(f"history: run {added.run_id[:10]} {added.outcome} in {args.history}")
    return True


def _plan(gate: Gate | None, config: Any, args: argparse.Namespace) -> SequentialPlan | None:
    """``--sequential``'s plan (``resolve_args`` already refused it without ``--min-survival``)."""
    if not args.sequential or gate is None:
        return None
    from ..analysis.sequential_run import SequentialPlan
    from ..core.config import Shard

    shards = Shard.parse(config.shard).count if config.shard else 1
    return SequentialPlan(gate.rate, gate.turn, alpha=args.sequential_alpha, seed=config.seed,
                          cancel=args.sequential_cancel, shards=shards)


def _estimate(config: Any, specs: list[Any], canary_cases: list[Any], *, sequential: bool = False,
              history: str | None = None) -> int:
    """``--estimate``: the upper bound of the run's calls, tokens and cost; nothing runs, no model is called."""
    from ..engine.estimate import estimate_run
    from ..engine.runner import run_jobs
    from ..engine.narrators import NarratorLoadError, load_narrator
    from ..report.estimate import estimate_lines

    try:
        factory = load_narrator(config.narrator) if config.narrator else None
    except NarratorLoadError as exc:
        return usage(str(exc))
    jobs = run_jobs(specs, config, sequential=sequential)  # the episodes the run would play (its shard's too)
    estimate = estimate_run(config, jobs, narrator_factory=factory, canaries=[c.context() for c in canary_cases])
    print("\n".join(estimate_lines(estimate, cap=config.max_cost)))
    if history:
        from ..report.history import estimate_history_lines

        print("\n".join(estimate_history_lines(history, config.to_dict(), specs, len(jobs))))
    return 0


def _verdict(entries: list[EpisodeRecord], expected: set[str], gate: Gate | None, canaries: CanaryResult | None,
             problems: list[str], args: argparse.Namespace, monitor: SequentialRun | None = None,
             runner: Any = None) -> int:
    """The run's verdict, through the one function the pytest session uses too: print its lines, return its
    exit code. ``expected`` are the episodes this run set out to finish (``Runner.plan``), less those a sequential
    decision (``monitor``) left unstarted. The verdict is recorded in the ``runner``'s results.json."""
    from ..analysis.verdict import decide
    from ..report.verdict import verdict_lines, verdict_record

    verdict = decide(entries, gate=gate, max_error_rate=args.max_error_rate, expected=expected, canaries=canaries,
                     problems=problems, max_cost=args.max_cost,
                     sequential=monitor.gate if monitor is not None else None,
                     early=monitor.summary() if monitor is not None else None)
    for line in verdict_lines(verdict, "run"):
        print(line)
    if runner is not None and args.out:
        runner.verdict = verdict_record(verdict, "run")
        runner.save(force=True)
    return verdict.exit_code


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
          + (f"; {len(runner.changed)} changed one(s) run again (--force)" if runner.changed else "")
          + (f"; {len(runner.unreadable)} unreadable one(s) run again ({runner.unreadable[0]})"
             if runner.unreadable else "")
          + ". Every setting, the specs, the prompts and pytest-ncp's version are checked; the narrator's own code "
            "is not: after changing it, write to a new directory")
    return True


def _execute(runner: Any, specs: list[Any], jobs: int, canary_cases: list[Any], args: argparse.Namespace,
             display: Any) -> tuple[list[str], CanaryResult | None]:
    """Run the episodes (in this process or ``--workers``) and the canaries; the workers' problems and the
    canaries' result. Ctrl-C marks results.json interrupted, says where the finished episodes are, then goes
    on up."""
    config = runner.config
    if args.workers == "auto":
        from ..engine.workers import default_workers

        workers = default_workers(min(config.concurrency, jobs))
    else:
        workers = int(args.workers)

    async def run_canaries() -> CanaryResult | None:
        if not canary_cases:
            return None
        from ..analysis.verdict import CanaryResult
        from ..calibration.audit import run_canaries

        assert runner.auditor is not None
        try:
            return CanaryResult(await run_canaries(
                runner.auditor, canary_cases, model=config.auditor_model, seed=args.canary_seed,
                min_recall=args.min_canary_recall, concurrency=config.concurrency))
        except Exception as exc:  # noqa: BLE001 - reported: the canary gate then fails (or the cap says it stopped them)
            from ..calibration.audit import canaries_failed

            return canaries_failed(exc)

    async def run_here() -> CanaryResult | None:  # episodes and canaries share one loop and client
        return (await asyncio.gather(runner.run(specs), run_canaries()))[1]

    problems: list[str] = []
    try:
        with display:
            if workers > 1:
                from ..engine.workers import run_in_workers

                problems = run_in_workers(runner, specs, workers, display=display,
                                          canaries_apart=bool(canary_cases))
                if canary_cases and runner.client is not None:  # the canaries' share of the cap (cap_share)
                    from ..engine.workers import cap_share

                    runner.client.max_cost = cap_share(config.max_cost, workers, canaries_apart=True)
                canaries = asyncio.run(run_canaries()) if canary_cases else None
            else:
                canaries = asyncio.run(run_here())
    except KeyboardInterrupt:
        runner.end("interrupted")  # results.json: complete false, what finished, and why the rest did not
        if args.out:
            print(f"interrupted: {len(runner.results)} finished episode(s) are in {Path(args.out) / 'results.json'}; "
                  f"continue with the same command plus --resume", file=sys.stderr)
        raise
    return problems, canaries


def _report(runner: Any, jobs: list[tuple[Any, int]], canaries: CanaryResult | None,
            args: argparse.Namespace) -> list[EpisodeRecord]:
    """Print the run's summary; the episode records of this run (the verdict's lines follow)."""
    from ..analysis.metrics import compute_metrics
    from ..core.config import episode_key

    config = runner.config
    from ..report.blame import blame_lines

    entries = [runner.results[k] for k in (episode_key(s.id, r) for s, r in jobs) if k in runner.results]
    metrics = compute_metrics(entries, survival_turn=config.survival_turn)
    print(summary(metrics, config.survival_turn))
    print("\n".join(blame_lines(metrics["blame"])))
    from ..report.text import repeated_error_lines

    for line in repeated_error_lines(entries):
        print(line)
    if config.demo:
        print("offline demo: every model was the bundled scripted server; these figures judge no real model")
    if canaries is not None and canaries.summary is not None:
        runner.canaries = dict(canaries.summary)
        runner.save(force=True)  # results.json carries the canary score (and a shard's record)
    if args.out:
        print(f"results: {Path(args.out) / 'results.json'}")
    if args.shard:
        print(f"shard {args.shard}: {len(jobs)} episode(s); join the shards' folders with ncp merge")
    return entries
