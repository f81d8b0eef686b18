"""``ncp lint`` (content checks on specs) and ``ncp catalog`` (the specs/README.md page).

    ncp lint specs/                     path:line: rule: message per finding, exit 1 when any
    ncp lint --list-rules               the rules and what each one checks
    ncp lint --summary specs/           only the count of findings per rule (and of specs flagged)
    ncp catalog specs/ > specs/README.md
"""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_FAILED = 0, 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lint", help="check spec content (future sight, duplicate facts, unreachable achievements, ...)")
    p.add_argument("paths", nargs="*", default=["specs"], help="spec files or directories (default: specs)")
    p.add_argument("--list-rules", action="store_true", help="print the rules and exit")
    p.add_argument("--summary", action="store_true",
                   help="print only the number of findings (and of specs flagged) per rule, not each finding")
    p.set_defaults(func=cmd_lint)

    p = sub.add_parser("catalog", help="print the specs catalog (specs/README.md) generated from the specs")
    p.add_argument("paths", nargs="*", default=["specs"], help="spec files or directories (default: specs)")
    p.set_defaults(func=cmd_catalog)


def cmd_lint(args: argparse.Namespace) -> int:
    from ..cli import check_specs
    from ..lint import RULES

    if args.list_rules:
        width = max(map(len, RULES))
        for name, description in RULES.items():
            print(f"{name:<{width}}  {description}")
        return EXIT_OK
    checked = check_specs(args.paths, lint=True, quiet=args.summary)
    if checked is None:
        return EXIT_FAILED
    specs, errors, findings = checked
    flagged = len({f.path for f in findings})
    if args.summary:
        print(rule_counts(findings))
    invalid = f", {len(errors)} invalid (fix them first: `ncp validate`)" if errors else ""
    print(f"{len(specs)} spec(s) linted: {len(findings)} finding(s) in {flagged} spec(s){invalid}")
    return EXIT_FAILED if findings or errors else EXIT_OK


def rule_counts(findings: list) -> str:
    """One line per rule (every rule, zero counts too, so before/after figures line up)."""
    from ..lint import RULES

    width = max(map(len, RULES))
    lines = [f"{'rule':<{width}}  findings  specs"]
    for rule in RULES:
        mine = [f for f in findings if f.rule == rule]
        lines.append(f"{rule:<{width}}  {len(mine):>8}  {len({f.path for f in mine}):>5}")
    return "\n".join(lines)


def cmd_catalog(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..catalog import catalog_markdown
    from ..cli import load_specs_or_report

    loaded = load_specs_or_report(args.paths)
    if loaded is None:
        return EXIT_FAILED
    specs, errors = loaded
    if errors:
        # A catalog of only the valid specs would silently drop rows; make the author fix them.
        for err in errors:
            print(err, file=sys.stderr)
        print(f"{len(errors)} spec(s) invalid: fix them (`ncp validate`) before generating the catalog",
              file=sys.stderr)
        return EXIT_FAILED
    # Links in the page are relative to the directory it describes (the usual `ncp catalog specs/`).
    base = Path(args.paths[0]) if len(args.paths) == 1 and Path(args.paths[0]).is_dir() else None
    sys.stdout.write(catalog_markdown(specs, base=base))
    return EXIT_OK
