"""``ncp review RUN_DIR``: label each confirmed conflict agree / dispute (RUN_DIR/reviews.json).

The walk is :mod:`pytest_ncp.report.review_walk`, the data :mod:`pytest_ncp.analysis.reviews`.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import EXIT_OK, usage


def register(sub: Any) -> None:
    p = sub.add_parser("review", help="label each confirmed conflict of a run: agree or dispute",
                       description="Walk the confirmed conflicts of RUN_DIR/results.json in the terminal. "
                                   "For each conflict, answer with one line: a = agree, d = dispute, "
                                   "s = skip, q = quit; then an optional note. Labels are saved to "
                                   "RUN_DIR/reviews.json after each answer; the next run resumes where this one "
                                   "stopped.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (with results.json and traces/)")
    p.add_argument("--reviewer", help="your name in the labels (default: the login name)")
    p.add_argument("--all", action="store_true", dest="relabel",
                   help="also show conflicts you already labelled (a new answer replaces the old)")
    p.add_argument("--export-gold", metavar="DIR",
                   help="instead of reviewing: write the labelled conflicts as draft gold cases into the gold set DIR "
                        "(DIR/cases/<spec>--reviews.yaml, frozen spec copies in DIR/specs/); see docs/auditor.md")
    p.set_defaults(func=cmd_review)


def cmd_review(args: argparse.Namespace) -> int:
    from ..report.review_walk import walk
    from ..core.traces import RunFileError

    if getattr(args, "export_gold", None):
        from ..calibration.export import export_gold

        try:
            written, skipped = export_gold(args.run_dir, args.export_gold)
        except RunFileError as exc:
            return usage(str(exc))
        for reason in skipped:
            print(f"skipped: {reason}")
        for path in written:
            print(f"wrote {path} (review: draft)")
        print(f"{len(written)} case file(s) written; check the labels, then: ncp calibrate --check --set "
              f"{args.export_gold}")
        return EXIT_OK
    reviewer = args.reviewer or _login()
    try:
        walk(args.run_dir, reviewer=reviewer, relabel=args.relabel)
    except RunFileError as exc:
        return usage(str(exc))
    return EXIT_OK


def _login() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name in some containers; labels still need a name
        return "anonymous"
