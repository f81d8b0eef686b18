"""``ncp failures list|prune DIR``: the stored failures of ``pytest --ncp-failures=DIR``.

    ncp failures list failures/                 each stored failure, its spec's state and its passing streak
    ncp failures prune failures/ --passed 5     remove those whose spec changed and those fixed 5 sessions running

The work is in :mod:`pytest_ncp.engine.failures`; imports stay inside the command functions.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import EXIT_OK, EXIT_USAGE, whole_number



def register(sub: Any) -> None:

    p = sub.add_parser("failures", help="list or prune the stored failures of pytest --ncp-failures=DIR")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    v = verbs.add_parser("list", help="each stored failure: spec, turn, conflict, spec state, passing streak")
    v.add_argument("folder", metavar="DIR", help="the failures folder")
    v.set_defaults(func=cmd_list)
    v = verbs.add_parser("prune", help="remove stored failures whose spec changed (or is gone), and with --passed N "
                                       "those whose fork test passed N sessions in a row")
    v.add_argument("folder", metavar="DIR", help="the failures folder")
    v.add_argument("--passed", type=whole_number(1), default=None, metavar="N",
                   help="also remove failures that passed N sessions in a row (default: keep fixed ones)")
    v.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")
    v.set_defaults(func=cmd_prune)


def _folder(args: argparse.Namespace) -> Any:
    from pathlib import Path

    folder = Path(args.folder)
    if not folder.is_dir():
        print(f"ncp failures: error: {folder}: no such folder (the DIR of pytest --ncp-failures=DIR)", file=sys.stderr)
        return None
    return folder


def cmd_list(args: argparse.Namespace) -> int:
    from ..engine.failures import list_failures
    from ..core.safe_text import one_line, printable

    folder = _folder(args)
    if folder is None:
        return EXIT_USAGE
    stored = list_failures(folder)
    for f in stored:
        failure = f.start.get("failure") or {}
        what = f"conflict:{failure.get('type')}" if failure else "conflict"
        quote = f' "{one_line(printable(failure["quote"]), 60)}"' if failure.get("quote") else ""
        problem = f.spec_problem()
        spec = "spec changed or missing (prune removes it)" if problem else "spec unchanged"
        print(f"{f.name}: {what}{quote}; {spec}; passed {f.passes} session(s) in a row  [{f.path.name}]")
    print(f"{len(stored)} stored failure(s) in {folder}")
    return EXIT_OK


def cmd_prune(args: argparse.Namespace) -> int:
    from ..engine.failures import prune

    folder = _folder(args)
    if folder is None:
        return EXIT_USAGE
    removed = prune(folder, passed=args.passed, dry_run=args.dry_run)
    for f, why in removed:
        print(f"{'would remove' if args.dry_run else 'removed'} {f.path.name}: {why.splitlines()[0]}")
    print(f"{len(removed)} stored failure(s) {'to remove' if args.dry_run else 'removed'} from {folder}")
    return EXIT_OK
