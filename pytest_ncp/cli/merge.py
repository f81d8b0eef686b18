"""``ncp merge``: join the run folders of ``ncp run --shard i/n`` into one results.json.

    ncp merge runs/shard-*/ --out runs/all     one results.json (and traces) with the unsharded run's metrics

The work is in :mod:`pytest_ncp.engine.shards`; imports stay inside the command function.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import EXIT_OK, EXIT_USAGE, summary



def register(sub: Any) -> None:
    p = sub.add_parser("merge", help="join the --out folders of sharded runs (ncp run --shard i/n) into one",
                       description="Check that the runs are shards of one run (same configuration, same shard "
                                   "count, no episode twice, no shard missing, each shard complete with exactly "
                                   "its slice) and write one results.json, with "
                                   "the traces copied beside it, whose metrics are those of the whole run.")
    p.add_argument("runs", nargs="+", metavar="DIR", help="run folders (or their results.json) of the shards")
    p.add_argument("--out", required=True, metavar="DIR", help="folder of the merged run")
    p.add_argument("--allow-missing", action="store_true", help="merge even when some shards are missing")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="merge shards that did not finish their slice (interrupted, a dead worker); the merged "
                        "results.json then says complete: false and lists them under merge.incomplete")
    p.set_defaults(func=cmd_merge)


def cmd_merge(args: argparse.Namespace) -> int:
    from ..engine.shards import MergeError, merge_runs

    try:
        path, merged, notes = merge_runs(args.runs, args.out, allow_missing=args.allow_missing,
                                         allow_incomplete=args.allow_incomplete)
    except MergeError as exc:
        print(f"ncp merge: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    print(summary(merged.metrics.model_dump(mode="json"), merged.metrics.survival_turn))
    if merged.sequential is not None:
        from ..report.verdict import merged_sequential_line

        print(merged_sequential_line(merged.sequential))
    if not merged.complete:
        print(f"INCOMPLETE: {merged.incompleteness()}: a gate or compare over it judges part of the run")
    print(f"results: {path}")
    return EXIT_OK
