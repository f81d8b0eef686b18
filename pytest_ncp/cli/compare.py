"""``ncp compare`` and ``ncp agree``: is a new run worse than a baseline, and do two auditors agree?

    ncp compare BASE NEW            paired survival test; exit 1 on a significant drop, 6 over the error budget
    ncp agree RUN_A RUN_B [...]     auditor agreement: Pearson r of per-episode turns, profiles side by side

The work is in :mod:`pytest_ncp.analysis.compare`; this module parses options, reads files and prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.config import episode_name
from .common import EXIT_ERROR_BUDGET, EXIT_FAILED, EXIT_OK, add_options, error_rate, positive, resolve_args, usage, \
    whole_number


if TYPE_CHECKING:
    from ..analysis.results import RunResults


def register(sub: Any) -> None:
    _non_negative = whole_number(0)

    p = sub.add_parser("compare", help="is NEW worse than BASE? paired survival test, exit 1 on a significant drop",
                       description="Pair the episodes of two runs on (spec_id, repeat), list newly failing "
                                   "episodes and commitments, and test the change in survival@TURN (exact "
                                   "McNemar, paired bootstrap 95% CI). Exit 1 when NEW is worse with "
                                   "p < ALPHA, when no pair can be compared, or when an episode of BASE has "
                                   "no partner in NEW (see --allow-unpaired); exit 6 when either run has "
                                   "more unknown outcomes (auditor, model, player errors) than --max-error-rate "
                                   "allows; 0 otherwise.")
    p.add_argument("base", metavar="BASE", help="baseline run: a run directory or its results.json")
    p.add_argument("new", metavar="NEW", help="new run: a run directory or its results.json")
    p.add_argument("--turn", type=_non_negative, default=None,
                   help="turn of the survival figure (default: the headline survival turn of both runs; runs "
                        "with different ones are refused unless --turn names a turn both played to)")
    p.add_argument("--alpha", type=_alpha, default=0.05, help="significance level (default 0.05)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--resamples", type=positive, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--specs", nargs="+", metavar="PATH",
                   help="spec files or directories, for commitment kinds (default: the traces' spec paths)")
    p.add_argument("--max-error-rate", metavar="RATE", type=error_rate, default=0.0,
                   help="share of episodes of either run allowed to end in an auditor, model or player error, "
                        "e.g. 0.05 or 5%%; above it compare exits 6 (default 0: any such error)")
    p.add_argument("--allow-underpowered", action="store_true",
                   help="exit 0 on a comparison with too few pairs to show any regression (by default it exits 1: "
                        "'no significant change' over 4 pairs is no evidence)")
    p.add_argument("--allow-unpaired", action="store_true",
                   help="compare even when episodes of BASE have no partner in NEW (a partial or interrupted "
                        "run, another spec set); without it compare exits 1, since a missing episode may be the "
                        "failing one")
    p.add_argument("--sequential", action="store_true",
                   help="decide with the anytime-valid paired check over the (spec, repeat) pairs in NEW's seeded "
                        "order (docs/gates.md): exit 1 once a regression is certain, 0 once a non-inferiority is "
                        "(see --margin); undecided, the exact McNemar test decides as without it. Episodes NEW "
                        "never started because its own sequential gate stopped it are not unpaired")
    from ..core.options import OPTION

    add_options(p, [OPTION["margin"]], "compare")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("agree", help="auditor agreement between runs of the same transcripts",
                       description="Pairwise Pearson correlation of per-episode turns between runs (e.g. the "
                                   "same transcripts re-audited by different auditor models) and each run's "
                                   "conflict profile side by side.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="two or more run directories or results.json files")
    p.add_argument("--turn", type=_non_negative, default=20, help="turn of the survival column (default 20)")
    p.set_defaults(func=cmd_agree)


def _alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 0.05, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), got {value}")
    return value


def cmd_compare(args: argparse.Namespace) -> int:
    from ..analysis.compare import HorizonMismatch, compare_runs, comparison_turn
    from ..analysis.results import load_results, results_path
    from ..core.traces import RunFileError

    try:
        resolve_args(args)  # --margin, from the option table
        base, new = load_results(args.base), load_results(args.new)
        kinds = _commitment_kinds(args.specs, [(new, results_path(args.new).parent),
                                               (base, results_path(args.base).parent)])
        turn = comparison_turn((base.metrics.survival_turn, base.config.max_turns),
                               (new.metrics.survival_turn, new.config.max_turns), args.turn)
        result = compare_runs(base, new, turn=turn, alpha=args.alpha, seed=args.seed,
                              resamples=args.resamples, kinds=kinds)
    except HorizonMismatch as exc:
        print(f"ncp compare: cannot compare: {exc}", file=sys.stderr)
        return EXIT_FAILED  # two horizons are no evidence either way: never a pass
    except (RunFileError, ValueError) as exc:
        return usage(str(exc))
    lines = result.lines()
    print(lines[0])
    print(f"  base: {results_path(args.base)} ({_describe(base)})")
    print(f"  new:  {results_path(args.new)} ({_describe(new)})")
    print("\n".join(lines[1:]))
    from ..analysis.metrics import error_budget
    from ..report.verdict import budget_line

    budgets = [(name, error_budget(run.episodes, args.max_error_rate)) for name, run in (("base", base), ("new", new))]
    for name, budget in budgets:
        if budget.unknown or budget.exceeded:
            print(budget_line(budget, f"{name} run"))
    check = _sequential(base, new, args, turn) if args.sequential else None
    if any(b.exceeded for _, b in budgets):
        return EXIT_ERROR_BUDGET
    if check is not None and check.decision == "regression":
        return EXIT_FAILED  # certain, whatever else is missing: the pairs it read already show it
    if not result.measurable and check is None:
        return EXIT_FAILED  # no evidence either way: never a pass
    # Episodes new never started because its own sequential gate stopped it are no partial run (--sequential).
    unstarted = set(new.sequential.unstarted) if args.sequential and new.sequential is not None else set()
    unpaired = [k for k in result.only_in_base if f"{k[0]}--r{k[1]}" not in unstarted]
    if unpaired and not args.allow_unpaired:
        # A run that stopped early (SIGINT, a dead worker, a shard merged without its slice) lacks exactly the
        # episodes it never finished, and one of them may be the one that fails: no verdict over the rest.
        print(f"ncp compare: cannot decide: {len(unpaired)} episode(s) of base have no partner in new "
              f"(first: {episode_name(*unpaired[0])}); a partial run may lack the failing one. Re-run "
              "them (e.g. --resume), or pass --allow-unpaired to judge the pairs alone")
        return EXIT_FAILED
    if check is not None and check.decision is None and unstarted:
        # The episodes new played are the stretch after which its own gate found it good: a fixed test over
        # them leans towards "no change" (the pytest session refuses the same judgement, analysis/verdict.py).
        print(f"ncp compare: cannot decide: new stopped early ({len(unstarted)} episode(s) never started) when its "
              "own sequential gate decided, before the paired check did; the fixed comparison over the episodes it "
              "played would judge a biased part of it. Re-run new without --sequential to compare it")
        return EXIT_FAILED
    if check is not None and check.decision == "non-inferior":
        return EXIT_OK  # certain at the check's level: no power question is left
    if not result.measurable:
        return EXIT_FAILED
    if result.underpowered and not args.allow_underpowered:
        print("ncp compare: cannot decide: the comparison is underpowered (see above); pass --allow-underpowered "
              "to accept it as no evidence of a change")
        return EXIT_FAILED
    return EXIT_FAILED if result.regression else EXIT_OK


def _sequential(base: RunResults, new: RunResults, args: argparse.Namespace, turn: int) -> Any:
    """``--sequential``: the paired check in new's seeded order; prints its line and returns it."""
    from ..analysis.results import split_key
    from ..analysis.sequential_run import paired_check

    seed = new.config.seed if new.config.seed is not None else 0
    planned_jobs = {(e.spec_id, e.repeat) for e in new.episodes}
    for key in [*(new.sequential.unstarted if new.sequential is not None else []), *(new.expected or [])]:
        planned_jobs.add(split_key(key))
    check, planned = paired_check(base.episodes, new.episodes, turn=turn, margin=args.margin,
                                  alpha=args.alpha, seed=seed, new_jobs=planned_jobs)
    lo, hi = check.drop_bounds()
    bounds = f"anytime-valid {1 - args.alpha:.0%} bounds of the drop {lo:+.1%} to {hi:+.1%}"
    if check.decision is None:
        print(f"ncp compare (sequential): undecided after all {planned} pair(s) ({check.pairs} with an outcome on "
              f"both sides; {bounds}): the exact test above decides")
    else:
        said = (f"the drop in survival@{turn} is certainly above {args.margin:.1%}" if check.decision == "regression"
                else f"any drop in survival@{turn} is certainly below {args.margin:.1%}" if args.margin > 0
                else f"survival@{turn} is certainly higher in new")
        print(f"ncp compare (sequential): {check.decision.upper()} decided after {check.decided_after} of {planned} "
              f"pair(s) (seed {seed}): {said} ({bounds})")
    return check


def _describe(run: RunResults) -> str:
    c = run.config
    narrator_model = c.models.narrator if c.models else None
    complete = "" if run.complete else f"; INCOMPLETE: {run.incompleteness()}"
    return (f"{len(run.episodes)} episode(s); narrator {c.narrator or '?'}"
            f"{' / ' + narrator_model if narrator_model else ''}, player {c.player or '?'}, "
            f"auditor {c.auditor_model or '?'}{complete}")


def _commitment_kinds(spec_paths: list[str] | None,
                      runs: list[tuple[RunResults, Path]]) -> dict[str, dict[str, str]] | None:
    """spec_id -> commitment_id -> kind, from --specs or from the spec files the traces recorded.

    None when no spec file could be read (compare then reports violations only).
    """
    from ..core.spec import SpecError, load_specs
    from ..core.traces import load_recorded_spec, resolve_trace, start_event

    if spec_paths:
        try:
            specs, errors = load_specs(spec_paths)
        except SpecError as exc:
            raise ValueError(str(exc)) from None
        for err in errors:
            print(err, file=sys.stderr)
        return {s.id: {c.id: c.kind for c in s.all_commitments} for s in specs} or None
    kinds: dict[str, dict[str, str]] = {}
    for run, run_dir in runs:
        for e in run.episodes:
            if e.spec_id in kinds:
                continue
            trace = resolve_trace(e.trace, run_dir)
            start = start_event(trace) if trace else None
            spec = load_recorded_spec(start.get("spec_path") if start else None, run_dir)
            if spec is not None and spec.id == e.spec_id:
                kinds[spec.id] = {c.id: c.kind for c in spec.all_commitments}
    return kinds or None


# --- agree ------------------------------------------------------------------------------------------


def cmd_agree(args: argparse.Namespace) -> int:
    from ..analysis.compare import agreement
    from ..analysis.results import load_results
    from ..core.traces import RunFileError

    if len(args.runs) < 2:
        return usage("agree needs at least two runs (e.g. the same transcripts re-audited by two auditors)")
    try:
        runs = [load_results(r) for r in args.runs]
        result = agreement(runs, [str(r) for r in args.runs], turn=args.turn)
    except (RunFileError, ValueError) as exc:
        return usage(str(exc))
    print("\n".join(result.lines()))
    return EXIT_OK
