"""``ncp validate``: check spec files, ``path:line: field: message`` per problem (``--strict``: lint too)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import EXIT_FAILED, EXIT_OK, check_specs, completeness_line


def register(sub: Any) -> None:
    p = sub.add_parser("validate", help="check spec files; print path:line: field: message for each problem")
    p.add_argument("paths", nargs="*", default=["specs"], help="spec files or directories (default: specs)")
    p.add_argument("--strict", action="store_true",
                   help="also run the content linter (ncp lint) on the valid specs; findings exit 1 too")
    p.set_defaults(func=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    checked = check_specs(args.paths, lint=getattr(args, "strict", False))
    if checked is None:
        return EXIT_FAILED
    specs, errors, findings = checked
    problems = sum(len(e.problems) for e in errors)
    print(f"{len(specs)} spec(s) valid, {len(errors)} with problems ({problems} problem(s))")
    complete = completeness_line(specs)
    if complete:
        print(complete)
    failing = [f for f in findings if f.fails]
    if getattr(args, "strict", False):
        notices = len(findings) - len(failing)
        noted = f", {notices} notice(s) (not failures)" if notices else ""
        print(f"strict: {len(failing)} lint finding(s) in {len({f.path for f in failing})} spec(s){noted}")
    return EXIT_FAILED if errors or failing else EXIT_OK
