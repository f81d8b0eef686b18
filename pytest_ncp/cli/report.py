"""``ncp report RESULTS.json [more.json ...]``: the paper's tables, and a self-contained HTML report.

    ncp report runs/a/results.json runs/b              tables in the terminal, one row per run
    ncp report runs/a --markdown >> "$GITHUB_STEP_SUMMARY"
    ncp report runs/a --json                           the computed rows, for dashboards
    ncp report runs/a runs/b --html report.html        one file: tables, curves, every episode
"""

from __future__ import annotations

import argparse
import sys
from typing import Any
from pathlib import Path

from .common import EXIT_OK, EXIT_USAGE



def register(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="tables of one or more runs (terminal, --markdown, --json) and an --html report",
        description="Print the NCP-Bench tables of one or more results.json files (or run folders), one row "
                    "per run; optionally write a self-contained HTML report with every episode, turn by turn.")
    p.add_argument("results", nargs="*", metavar="RESULTS",
                   help="results.json files, or the run folders holding them (none with --history)")
    p.add_argument("--history", metavar="DB", help="report from a history database (docs/history.md): --html writes "
                                                   "the history page, --markdown the pull-request summary")
    p.add_argument("--run", metavar="REF", default="latest",
                   help="with --history --markdown: the run to summarise (a run id or commit prefix)")
    p.add_argument("--base", metavar="BRANCH", help="with --history --markdown: the branch to compare with (default: "
                                                    "the run's base branch, GITHUB_BASE_REF, else main)")
    p.add_argument("--report-url", metavar="URL", help="with --history: where each run's report is, with {run_id}, "
                                                       "{commit}, {branch} and {ci_run_id} filled in (e.g. a CI artifact's URL); "
                                                       "default: the report.html in the folder it was added from")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="GitHub-flavoured Markdown (for $GITHUB_STEP_SUMMARY)")
    fmt.add_argument("--json", action="store_true", help="the computed rows as JSON (for dashboards)")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report to FILE")
    p.add_argument("--label", action="append", metavar="NAME",
                   help="name of a run in the tables, once per RESULTS in order (default: narrator (model))")
    p.add_argument("--calibration", action="append", default=[], metavar="FILE",
                   help="calibration.json of `ncp calibrate` (or its folder) to add to the HTML report; one beside "
                        "a results.json is found without this")
    p.add_argument("--title", default="NCP-Bench report", help="heading of the Markdown and HTML reports")
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    if args.history:
        return _history_report(args)
    if not args.results:
        print("ncp report: error: give RESULTS (results.json files or run folders), or --history DB", file=sys.stderr)
        return EXIT_USAGE
    from ..report.runs import load_runs
    from ..report.tables import render_json, render_markdown, render_terminal, run_rows
    from ..core.traces import RunFileError

    try:
        runs = load_runs(args.results, args.label)
    except RunFileError as exc:
        print(f"ncp report: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    rows = [run_rows(r.results, r.label, reviews=r.reviews) for r in runs]
    for r in runs:  # stderr: stdout may be JSON or Markdown being piped somewhere
        if not r.results.complete:
            print(f"ncp report: note: {r.label} is incomplete: {r.results.incompleteness()}", file=sys.stderr)
    from ..report.blame import blame_lines, blame_markdown

    if args.json:
        sys.stdout.write(render_json(rows))
    elif args.markdown:
        sys.stdout.write(render_markdown(rows, title=args.title))
        for row in rows:  # who owns each run's outcomes, with the episodes
            sys.stdout.write("\n" + blame_markdown(row["blame"], label=str(row["label"])))
        from ..report.verdict import verdict_markdown

        for r in runs:  # the gate's verdict, where the run recorded one: what a CI job summary is read for
            if r.results.verdict is not None:
                sys.stdout.write("\n" + verdict_markdown(r.results.verdict.model_dump(mode="json"), label=r.label))
    else:
        sys.stdout.write(render_terminal(rows))
        for row in rows:
            sys.stdout.write(f"\n{row['label']}: " + "\n".join(blame_lines(row["blame"])) + "\n")
    if args.html:
        from ..report.html import find_calibrations, render_html

        out = Path(args.html)
        try:
            calibrations = find_calibrations(runs, args.calibration)
        except (OSError, ValueError) as exc:
            print(f"ncp report: error: cannot read a calibration file: {exc}", file=sys.stderr)
            return EXIT_USAGE
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(render_html(runs, title=args.title, calibrations=calibrations), encoding="utf-8")
        except OSError as exc:
            print(f"ncp report: error: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        # stderr: stdout may be JSON or Markdown being piped somewhere.
        print(f"html report: {out}", file=sys.stderr)
    return EXIT_OK


def _history_report(args: argparse.Namespace) -> int:
    """``--history DB``: the history page (--html) and the pull-request summary (--markdown)."""
    from ..analysis.history import find_run, list_runs, pull_request_diff, rebuild
    from .history import with_history
    from ..report.history import episode_anchors, pull_request_markdown, render_history_html, report_link

    if args.results or args.json or not (args.html or args.markdown):
        print("ncp report: error: --history takes no RESULTS and writes --html FILE, --markdown or both",
              file=sys.stderr)
        return EXIT_USAGE
    def work(conn: Any) -> int:
        try:
            if args.markdown:
                run = find_run(conn, args.run)
                base = args.base or run.base_branch or "main"
                diff = pull_request_diff(conn, run, base_branch=base)
                sys.stdout.write(pull_request_markdown(run, diff, base_branch=base,
                                                       anchors=episode_anchors(rebuild(conn, run.run_id)),
                                                       report_url=args.report_url))
            if args.html:
                out = Path(args.html)
                out.parent.mkdir(parents=True, exist_ok=True)
                title = args.title if args.title != "NCP-Bench report" else "NCP-Bench history"
                page = render_history_html(list_runs(conn), title=title,
                                           link=lambda r: report_link(r, args.report_url,
                                                                      relative_to=out.resolve().parent))
                out.write_text(page, encoding="utf-8")
                print(f"html history: {out}", file=sys.stderr)
        except OSError as exc:
            print(f"ncp report: error: cannot write {args.html}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        return EXIT_OK

    return with_history(args.history, "ncp report", work)
