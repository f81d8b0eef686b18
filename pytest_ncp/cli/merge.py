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
                                   "count, no episode twice, no shard missing) and write one results.json, with "
                                   "the traces copied beside it, whose metrics are those of the whole run.")
    p.add_argument("runs", nargs="+", metavar="DIR", help="run folders (or their results.json) of the shards")
    p.add_argument("--out", required=True, metavar="DIR", help="folder of the merged run")
    p.add_argument("--allow-missing", action="store_true", help="merge even when some shards are missing")
    p.set_defaults(func=cmd_merge)


def cmd_merge(args: argparse.Namespace) -> int:
    from ..engine.shards import MergeError, merge_runs

    try:
        path, notes = merge_runs(args.runs, args.out, allow_missing=args.allow_missing)
    except MergeError as exc:
        print(f"ncp merge: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    import json

    data = json.loads(path.read_text(encoding="utf-8"))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    turn = int(data["config"].get("survival_turn", 20))
    print(summary(data["metrics"], turn))
    print(f"results: {path}")
    return EXIT_OK
