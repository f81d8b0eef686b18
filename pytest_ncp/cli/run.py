"""``ncp run``: play, audit and score episodes of a narrator over specs; writes DIR/results.json and traces."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import (
    EXIT_USAGE, client_settings, error_rate, model_call_options, positive, summary, usage, whole_number, worker_count,
)

if TYPE_CHECKING:
    from ..analysis.metrics import Gate
    from ..analysis.verdict import CanaryResult


def register(sub: Any) -> None:
    p = sub.add_parser("run", help="run episodes of a narrator over specs")
    p.add_argument("--narrator", required=True, metavar="MODULE:ATTR",
                   help="the narrator under test, e.g. my_agent:Narrator or pytest_ncp.narrators:LLMNarrator")
    run_options(p)
    p.set_defaults(func=cmd_run)


def run_options(p: argparse.ArgumentParser) -> None:
    """The options of a run (``ncp run`` and ``ncp demo``)."""
    from ..core.config import DEFAULT_AUDITOR_MODEL, PLAYER_KINDS, RECORD_MODES

    p.add_argument("--specs", nargs="+", default=["specs"], metavar="PATH", help="spec files or directories")
    p.add_argument("--player", default="scripted", choices=PLAYER_KINDS,
                   help="who plays: the spec's scripted inputs, or an LLM-simulated player (needs --player-model)")
    p.add_argument("--narrator-model", help="litellm model for built-in narrators (e.g. openai/gpt-4o-mini)")
    p.add_argument("--player-model", help="litellm model for simulated players")
    p.add_argument("--auditor-model", default=None,
                   help=f"litellm model of the auditor (default: {DEFAULT_AUDITOR_MODEL})")
    p.add_argument("--api-base", help="OpenAI-compatible endpoint for every role (overrides env vars)")
    p.add_argument("--max-turns", type=positive, default=100, help="turn limit per episode")
    p.add_argument("--repeats", type=positive, default=1, help="episodes per spec (pass^k needs k >= 2)")
    p.add_argument("--concurrency", type=positive, default=16, help="episodes and calls in flight")
    model_call_options(p)
    p.add_argument("--survival-turn", type=positive, default=None,
                   help="turn of the headline survival figure (default: 20, or --max-turns when lower)")
    p.add_argument("--min-survival", metavar="RATE[@TURN]",
                   help="exit 1 when survival@TURN < RATE, or when it cannot be measured (too few episodes "
                        "observed up to TURN)")
    p.add_argument("--max-error-rate", metavar="RATE", type=error_rate, default=0.0,
                   help="share of episodes allowed to end in an auditor, model or player error (unknown "
                        "outcome), e.g. 0.05 or 5%%; above it ncp exits 6 (default 0: any such error)")
    p.add_argument("--out", metavar="DIR", help="write DIR/results.json and DIR/traces/*.jsonl")
    p.add_argument("--resume", action="store_true",
                   help="skip episodes already finished in --out DIR; run the rest (errored ones again). "
                        "Refuses when the settings or a spec changed since (see --force)")
    p.add_argument("--force", action="store_true",
                   help="with --resume: re-run the episodes whose settings or spec changed instead of refusing")
    p.add_argument("--record-mode", choices=RECORD_MODES,
                   help="record/replay every model call to cassettes (none = replay only)")
    p.add_argument("--cassettes", metavar="DIR", help="cassette directory for --record-mode")
    p.add_argument("--no-pipeline", action="store_true",
                   help="audit each turn before playing the next (the sequential reference; same results, slower)")
    p.add_argument("--workers", type=worker_count, default="auto", metavar="N|auto",
                   help="processes to spread episodes over (default auto: 1 up to 32 episodes in flight, "
                        "then one more per 32, at most one per core); one results.json, one progress bar")
    p.add_argument("--shard", metavar="I/N",
                   help="run only slice I of N of the (spec, repeat) episodes (CI matrices); "
                        "join the slices' --out folders with ncp merge")
    p.add_argument("--canaries", type=whole_number(0), default=0, metavar="K",
                   help="audit K gold cases beside the episodes with the same auditor (docs/auditor.md)")
    p.add_argument("--min-canary-recall", type=float, default=0.8, metavar="R",
                   help="exit 1 when fewer canary violations are caught, or clean canaries passed, than R "
                        "(default 0.8)")
    p.add_argument("--canary-set", default="calibration", metavar="DIR", help="gold set of the canaries")
    p.add_argument("--canary-seed", type=whole_number(0), default=0, help="seed of the canary sample")


def cmd_run(args: argparse.Namespace, *, narrator: str | None = None, api_base: str | None = None,
            demo: bool = False) -> int:
    from ..analysis.metrics import Gate
    from ..core.config import DEFAULT_AUDITOR_MODEL, RunConfig
    from ..core.spec import load_specs
    from ..engine.narrators import NarratorLoadError
    from ..engine.runner import Runner
    from ..report.progress import ProgressDisplay

    gate = None
    if args.min_survival:
        try:
            gate = Gate.parse(args.min_survival)
        except ValueError as exc:
            return usage(str(exc))
    try:
        call_settings = client_settings(args)
    except ValueError as exc:
        return usage(str(exc))
    config = RunConfig(
        narrator=narrator or args.narrator, narrator_model=args.narrator_model, player=args.player,
        player_model=args.player_model, auditor_model=args.auditor_model or DEFAULT_AUDITOR_MODEL,
        api_base=api_base or args.api_base, max_turns=args.max_turns, repeats=args.repeats,
        concurrency=args.concurrency,
        survival_turn=args.survival_turn or min(20, args.max_turns),
        record_mode=args.record_mode, cassettes=args.cassettes, demo=demo, pipeline=not args.no_pipeline,
        shard=args.shard, **call_settings,
    )
    if args.resume and not args.out:
        return usage("--resume needs --out DIR (the directory of the run to continue)")
    canary_cases, problem = _canary_cases(args)
    if problem:
        return usage(problem)
    problems: list[str] = config.validate()
    if problems:
        return usage("; ".join(problems))
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
    entries = _report(runner, jobs, canaries, args)
    return _verdict(entries, runner.expected, gate, canaries, [*map(str, errors), *problems], args)


def _verdict(entries: list[dict[str, Any]], expected: set[str], gate: Gate | None, canaries: CanaryResult | None,
             problems: list[str], args: argparse.Namespace) -> int:
    """The run's verdict, through the one function the pytest session uses too: print its lines, return its
    exit code. ``expected`` are the episodes this run set out to finish (``Runner.plan``)."""
    from ..analysis.verdict import decide
    from ..report.verdict import verdict_lines

    verdict = decide(entries, gate=gate, max_error_rate=args.max_error_rate, expected=expected, canaries=canaries,
                     problems=problems)
    for line in verdict_lines(verdict, "run"):
        print(line)
    return verdict.exit_code


def _canary_cases(args: argparse.Namespace) -> tuple[list[Any], str | None]:
    """The gold cases of ``--canaries K`` (none without it), or the usage problem."""
    if not args.canaries:
        return [], None
    from ..calibration.audit import pick_canaries
    from ..calibration.goldset import GoldSetError

    if not 0.0 <= args.min_canary_recall <= 1.0:
        return [], f"--min-canary-recall must be a rate between 0 and 1, got {args.min_canary_recall}"
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
             if runner.unreadable else ""))
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
        except Exception as exc:  # noqa: BLE001 - reported: the canary gate then fails, as in the pytest session
            return CanaryResult(error=f"auditor canaries could not run: {type(exc).__name__}: {exc}")

    async def run_here() -> CanaryResult | None:  # episodes and canaries share one loop and client
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
        runner.end("interrupted")  # results.json: complete false, what finished, and why the rest did not
        if args.out:
            print(f"interrupted: {len(runner.results)} finished episode(s) are in {Path(args.out) / 'results.json'}; "
                  f"continue with the same command plus --resume", file=sys.stderr)
        raise
    return problems, canaries


def _report(runner: Any, jobs: list[tuple[Any, int]], canaries: CanaryResult | None,
            args: argparse.Namespace) -> list[dict[str, Any]]:
    """Print the run's summary; the episode records of this run (the verdict's lines follow)."""
    from ..analysis.metrics import compute_metrics
    from ..core.config import episode_key

    config = runner.config
    entries = [runner.results[k] for k in (episode_key(s.id, r) for s, r in jobs) if k in runner.results]
    print(summary(compute_metrics(entries, survival_turn=config.survival_turn), config.survival_turn))
    if config.demo:
        print("offline demo: every model was the bundled scripted server; these figures judge no real model")
    if canaries is not None and canaries.summary is not None:
        runner.canaries = dict(canaries.summary)
        runner.save()  # results.json carries the canary score (and a shard's record)
    if args.out:
        print(f"results: {Path(args.out) / 'results.json'}")
    if args.shard:
        print(f"shard {args.shard}: {len(jobs)} episode(s); join the shards' folders with ncp merge")
    return entries
