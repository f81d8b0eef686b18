"""``ncp lint``: content checks on specs (``ncp catalog`` writes the specs/README.md page).

    ncp lint specs/                     path:line: rule: message per finding, exit 1 when any
    ncp lint --list-rules               the rules and what each one checks
    ncp lint --summary specs/           only the count of findings per rule (and of specs flagged), and how
                                        many specs are complete (playthrough, sources, accepted independent read)
    ncp lint --llm MODEL specs/         also model-assisted checks (one call per spec; needs a model)
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ..core.options import CALL_OPTIONS
from .common import EXIT_FAILED, EXIT_OK, add_options, call_config, check_specs, completeness_line, usage

if TYPE_CHECKING:
    from ..core.config import RunConfig
    from ..core.spec import NarrativeSpec
    from ..lint.core import LintFinding


def register(sub: Any) -> None:
    p = sub.add_parser("lint", help="check spec content (future sight, duplicate facts, unreachable achievements, ...)")
    p.add_argument("paths", nargs="*", default=["specs"], help="spec files or directories (default: specs)")
    p.add_argument("--list-rules", action="store_true", help="print the rules and exit")
    p.add_argument("--summary", action="store_true",
                   help="print only the number of findings (and of specs flagged) per rule, not each finding")
    p.add_argument("--llm", metavar="MODEL",
                   help="also ask this litellm model for the defects text rules cannot see (llm-* rules; "
                        "one call per valid spec); without it the linter makes no model call")
    p.add_argument("--api-base", help="OpenAI-compatible endpoint for --llm (overrides env vars)")
    add_options(p, CALL_OPTIONS, "lint")  # --llm's calls are shaped as in ncp run
    p.set_defaults(func=cmd_lint)


def cmd_lint(args: argparse.Namespace) -> int:
    from ..lint import RULES
    from ..lint.model import LLM_RULES

    rules = {**RULES, **LLM_RULES} if args.llm or args.list_rules else dict(RULES)
    if args.list_rules:
        width = max(map(len, rules))
        for name, description in rules.items():
            print(f"{name:<{width}}  {description}")
        return EXIT_OK
    checked = check_specs(args.paths, lint=True, quiet=args.summary)
    if checked is None:
        return EXIT_FAILED
    specs, errors, findings = checked
    failed: list[str] = []
    if args.llm:
        try:
            config = call_config(args, api_base=args.api_base)
        except ValueError as exc:
            return usage(str(exc), "ncp lint")
        llm_found, failed = _llm_findings(args, specs, config)
        for finding in llm_found if not args.summary else ():
            print(finding)
        for problem in failed:
            print(f"llm check failed: {problem}", file=sys.stderr)
        findings = findings + llm_found
    failing = [f for f in findings if f.fails]
    notices = len(findings) - len(failing)
    flagged = len({f.path for f in failing})
    if args.summary:
        print(rule_counts(findings, rules))
        complete = completeness_line(specs)
        if complete:
            print(complete)
    invalid = f", {len(errors)} invalid (fix them first: `ncp validate`)" if errors else ""
    unchecked = f", {len(failed)} not checked by {args.llm}" if failed else ""
    noted = f", {notices} notice(s) (not failures)" if notices else ""
    print(f"{len(specs)} spec(s) linted: {len(failing)} finding(s) in {flagged} spec(s){noted}{invalid}{unchecked}")
    return EXIT_FAILED if failing or errors or failed else EXIT_OK


def _llm_findings(args: argparse.Namespace, specs: list[NarrativeSpec],
                  config: RunConfig) -> tuple[list[LintFinding], list[str]]:
    """Model-assisted findings for every spec, concurrently; a spec the model could not check is a problem."""
    import asyncio
    from pathlib import Path

    from ..llm import ModelClient, ModelError
    from ..lint.model import LLMLintError, llm_findings

    client = ModelClient.from_config(config)

    async def one(spec: NarrativeSpec) -> list[LintFinding]:
        return await llm_findings(spec, Path(spec.path or "").read_text(encoding="utf-8"), client, args.llm)

    async def every() -> list[list[LintFinding] | BaseException]:
        return await asyncio.gather(*(one(s) for s in specs), return_exceptions=True)

    found: list[LintFinding] = []
    failed: list[str] = []
    for spec, result in zip(specs, asyncio.run(every())):
        if isinstance(result, (LLMLintError, ModelError, OSError)):
            failed.append(str(result) if isinstance(result, LLMLintError) else f"{spec.path}: {result}")
        elif isinstance(result, BaseException):
            raise result
        else:
            found.extend(result)
    return sorted(found, key=lambda f: (f.path, f.line or 0, f.rule)), failed


def rule_counts(findings: list[LintFinding], rules: dict[str, str] | None = None) -> str:
    """One line per rule (every rule, zero counts too, so before/after figures line up)."""
    from ..lint import RULES

    rules = rules or RULES
    width = max(map(len, rules))
    lines = [f"{'rule':<{width}}  findings  specs"]
    for rule in rules:
        mine = [f for f in findings if f.rule == rule]
        lines.append(f"{rule:<{width}}  {len(mine):>8}  {len({f.path for f in mine}):>5}")
    return "\n".join(lines)
