"""``ncp history``: the run history (SQLite, docs/history.md): record runs, list them, the trend, a diff.

    ncp history add runs/a runs/b [--db PATH]       record results folders (the same run twice: no-op)
    ncp history [--branch main] [--since 7d]        every run, in comparable groups, with survival@T
    ncp history trend                               survival@T per commit with its interval, a sparkline
    ncp history diff A B                            what started or stopped holding; the paired test
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE


def register(sub: Any) -> None:
    def common(p: argparse.ArgumentParser, *, top: bool) -> None:
        # The sub-commands' copies default to SUPPRESS, so `ncp history --db X list` keeps X.
        keep: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
        from ..analysis.history import DEFAULT_DB

        p.add_argument("--db", metavar="PATH", help=f"the history database (default: {DEFAULT_DB})",
                       **({"default": DEFAULT_DB} if top else keep))

    def filters(p: argparse.ArgumentParser, *, top: bool) -> None:
        keep: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
        p.add_argument("--branch", help="only runs of this branch", **keep)
        p.add_argument("--narrator", help="only runs of this narrator (module:Attr, part of it, or its model)", **keep)
        p.add_argument("--spec-set", metavar="HASH", help="only runs of this spec set (a prefix of its fingerprint)",
                       **keep)
        p.add_argument("--since", metavar="WHEN", help="only runs started since: 2026-12-01, 2026-12-01T10:00 (UTC), "
                                                       "or an age such as 7d or 12h", **keep)

    p = sub.add_parser("history", help="the run history: record runs, list them with survival@T, trend, diff",
                       description="The run history (docs/history.md): every run recorded with its git commit, "
                                   "branch and fingerprints in one SQLite file. Without a sub-command: list the runs.")
    common(p, top=True)
    filters(p, top=True)
    p.set_defaults(func=cmd_list)
    subs = p.add_subparsers(dest="history_command", metavar="{add,list,trend,diff}")
    add = subs.add_parser("add", help="record results folders (or results.json files)")
    add.add_argument("runs", nargs="+", metavar="RUN_DIR", help="folders written by ncp run --out / --ncp-report, "
                                                                "shards and ncp merge outputs included")
    common(add, top=False)
    add.set_defaults(func=cmd_add)
    for name, func, text in (("list", cmd_list, "list the runs (the default)"),
                             ("trend", cmd_trend, "survival@T per commit with its interval, and a sparkline")):
        q = subs.add_parser(name, help=text)
        common(q, top=False)
        filters(q, top=False)
        q.set_defaults(func=func)
    diff = subs.add_parser("diff", help="what changed from run A to run B, with ncp compare's paired test")
    diff.add_argument("a", metavar="A", help="the base: a run id (or its start), a commit (its latest run), or latest")
    diff.add_argument("b", metavar="B", help="the new run, likewise")
    common(diff, top=False)
    diff.set_defaults(func=cmd_diff)


def with_history(path: str, prog: str, work: Callable[[Any], int], *, create: bool = False) -> int:
    """``work(conn)`` on the history at ``path``; a history that cannot be opened or read is ``prog``'s usage
    error, and the connection is closed either way."""
    from ..analysis.history import HistoryError, open_history

    try:
        conn = open_history(path, create=create)
    except HistoryError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return work(conn)
    except HistoryError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        conn.close()


def cmd_add(args: argparse.Namespace) -> int:
    from ..analysis.history import HistoryError, add_runs
    from ..analysis.results import load_results
    from ..core.traces import RunFileError

    import sqlite3

    try:
        added = add_runs(args.db, args.runs, load_results)
    except (RunFileError, HistoryError) as exc:
        print(f"ncp history: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except sqlite3.Error as exc:  # e.g. still locked after the busy timeout: nothing of that run was written
        print(f"ncp history: error: {args.db}: {exc}; the run being added was not recorded (each is one "
              "transaction): add it again", file=sys.stderr)
        return EXIT_FAILED
    for a in added:
        what = {"added": f"recorded ({a.episodes} episode(s))",
                "extended": f"{a.episodes} more episode(s) of a run already recorded",
                "unchanged": "already recorded: nothing to add"}[a.outcome]
        print(f"{a.source}: run {a.run_id[:10]}: {what}")
    print(f"history: {args.db}")
    return EXIT_OK


def _listed(args: argparse.Namespace, conn: Any) -> list[Any]:
    from ..analysis.history import list_runs, parse_since

    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as exc:
        from ..analysis.history import HistoryError

        raise HistoryError(str(exc)) from None
    return list_runs(conn, branch=args.branch, narrator=args.narrator, spec_set=args.spec_set, since=since)


def cmd_list(args: argparse.Namespace) -> int:
    from ..report.history import list_lines

    def work(conn: Any) -> int:
        print("\n".join(list_lines(_listed(args, conn))))
        return EXIT_OK

    return with_history(args.db, "ncp history", work)


def cmd_trend(args: argparse.Namespace) -> int:
    from ..report.history import trend_lines

    def work(conn: Any) -> int:
        print("\n".join(trend_lines(_listed(args, conn))))
        return EXIT_OK

    return with_history(args.db, "ncp history", work)


def cmd_diff(args: argparse.Namespace) -> int:
    from ..analysis.history import diff_runs, find_run
    from ..report.history import diff_lines

    def work(conn: Any) -> int:
        diff = diff_runs(conn, find_run(conn, args.a), find_run(conn, args.b))
        print("\n".join(diff_lines(diff)))
        if not diff.comparable:
            return EXIT_FAILED
        return EXIT_FAILED if diff.comparison is not None and diff.comparison.regression else EXIT_OK

    return with_history(args.db, "ncp history", work)
