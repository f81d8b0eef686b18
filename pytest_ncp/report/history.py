"""The run history in words: the list and trend tables (with a sparkline), a diff, and the pull-request summary.

Reads what ``analysis.history`` returns; prints nothing itself (``cli/history.py`` and ``cli/report.py`` do).
Runs that are not comparable (``analysis.history.COMPARABLE_FIELDS``) are never on one line: every table is
split into comparable groups, each with a header saying what its runs share.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..analysis.history import CommitmentChange, EpisodeChange, HistoryDiff, RunRow, groups
from ..core.config import episode_name

if TYPE_CHECKING:
    from ..analysis.results import RunResults

SPARKS = "▁▂▃▄▅▆▇█"
MARKER = "<!-- ncp-history -->"


def sparkline(values: Sequence[float | None]) -> str:
    """One character per value on a fixed 0..1 scale (so two groups read alike); ``·`` where it is n/a."""
    return "".join("·" if v is None else SPARKS[min(len(SPARKS) - 1, int(v * len(SPARKS)))] for v in values)


def _ci(row: RunRow) -> str:
    return "n/a" if row.survival_ci is None else f"{row.survival_ci[0]:.1%}-{row.survival_ci[1]:.1%}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]


def group_header(index: int, group: Sequence[RunRow]) -> str:
    return f"group {index + 1} ({len(group)} run(s)): {group[0].comparable_text()}"


def list_lines(runs: Sequence[RunRow]) -> list[str]:
    """``ncp history``: every run, in comparable groups, oldest first, with survival@T and its interval."""
    if not runs:
        return ["no run recorded (or none matches the filters)"]
    out: list[str] = []
    for i, group in enumerate(groups(runs)):
        t = group[0].survival_turn
        out.append(group_header(i, group))
        out += _table(("run", "started", "commit", "branch", "narrator", "episodes", f"survival@{t}", "95% CI",
                       "cost", ""),
                      [(r.run_id[:10], r.when[:19].replace("T", " "), r.short, r.branch or "-",
                        _narrator(r), str(r.episodes), _pct(r.survival), _ci(r), f"${r.cost_usd:.4f}",
                        ("" if r.complete else "incomplete") + (" demo" if r.demo else "")) for r in group])
        out.append(f"  trend: {sparkline([r.survival for r in group])}")
    return out


def trend_lines(runs: Sequence[RunRow]) -> list[str]:
    """``ncp history trend``: survival@T per commit with its interval, a sparkline and a bar per run."""
    if not runs:
        return ["no run recorded (or none matches the filters)"]
    out: list[str] = []
    for i, group in enumerate(groups(runs)):
        t = group[0].survival_turn
        values = [r.survival for r in group]
        out.append(group_header(i, group))
        out.append(f"  survival@{t}: {sparkline(values)}  (oldest to latest; · = n/a)")
        out += _table(("commit", "branch", f"survival@{t}", "95% CI", "", "run"),
                      [(r.short, r.branch or "-", _pct(r.survival), _ci(r), _bar(r), r.run_id[:10]) for r in group])
    return out


def _bar(row: RunRow, width: int = 20) -> str:
    """The interval as a bar over 0..100%: ``-`` inside it, ``|`` at the estimate."""
    if row.survival is None or row.survival_ci is None:
        return " " * width
    cells = [" "] * width
    lo, hi = (min(width - 1, int(x * width)) for x in row.survival_ci)
    for j in range(lo, hi + 1):
        cells[j] = "-"
    cells[min(width - 1, int(row.survival * width))] = "|"
    return "[" + "".join(cells) + "]"


def _narrator(r: RunRow) -> str:
    name = (r.narrator or "?").rpartition(":")[2]
    return f"{name} ({r.narrator_model})" if r.narrator_model else name


def _run_line(label: str, r: RunRow) -> str:
    return (f"{label}: run {r.run_id[:10]}, commit {r.short} on {r.branch or '-'}, {r.when[:19].replace('T', ' ')}: "
            f"survival@{r.survival_turn} {r.survival_text}")


def _episode(c: EpisodeChange) -> str:
    return f"{episode_name(c.spec_id, c.repeat)}: {c.base} -> {c.new}"


def _commitment(c: CommitmentChange) -> str:
    return f"{episode_name(c.spec_id, c.repeat)} {c.commitment_id}: {c.base} -> {c.new}"


def diff_lines(diff: HistoryDiff) -> list[str]:
    """``ncp history diff A B``: the two runs, the paired test, then what started and stopped holding."""
    out = [_run_line("A (base)", diff.base), _run_line("B (new) ", diff.new)]
    if not diff.comparable:
        return [*out, "not comparable: shown apart, never on one line; they differ in",
                *(f"  {why}" for why in diff.apart)]
    assert diff.comparison is not None
    out += diff.comparison.lines()[:3]
    sections = [
        (f"specs that stopped holding (survived turn {diff.new.survival_turn} in A, failed by it in B)",
         [_episode(c) for c in diff.specs_stopped]),
        (f"specs that started holding (failed by turn {diff.new.survival_turn} in A, survived it in B)",
         [_episode(c) for c in diff.specs_started]),
        ("first-failure turns that moved", [_episode(c) for c in diff.turns_moved]),
        ("commitments that stopped holding (violated in B, not in A)",
         [_commitment(c) for c in diff.commitments_stopped]),
        ("commitments that started holding (violated in A, not in B)",
         [_commitment(c) for c in diff.commitments_started]),
        ("other commitment changes", [_commitment(c) for c in diff.commitments_other]),
    ]
    for title, items in sections:
        out.append(f"{title}: {len(items)}")
        out += [f"  {x}" for x in items]
    return out


# --- the pull-request summary ------------------------------------------------------------------------------


def report_link(run: RunRow, template: str | None, anchor: str | None = None,
                relative_to: Path | None = None) -> str | None:
    """Where a run's report is: ``template`` with ``{run_id}``, ``{commit}``, ``{branch}`` and ``{ci_run_id}`` (the
    CI's GITHUB_RUN_ID) filled in (a CI artifact's or workflow run's URL), else the report.html (or results.json)
    in the folder the run was added from, relative to
    ``relative_to`` when given; None when there is neither."""
    if template:
        base = template.format(run_id=run.run_id, commit=run.commit or "no-git", branch=run.branch or "",
                               ci_run_id=(run.ci_run or "").partition(".")[0])
        if not base.endswith(".html"):  # a page that is not the run's own report has no episode anchors
            return base
    else:
        source = Path(run.source) if run.source else None
        if source is not None and source.is_file():  # added as a results file of its own (a history branch)
            found = [source]
        else:
            found = [p for p in (source / "report.html", source / "results.json") if p.is_file()] if source else []
        if not found:
            return None
        base = os.path.relpath(found[0], relative_to) if relative_to is not None else str(found[0])
        if found[0].name != "report.html":
            return base
    return f"{base}#{anchor}" if anchor else base


def episode_anchors(results: RunResults) -> dict[tuple[str, int], str]:
    """(spec id, repeat) -> the episode's anchor in its run's own report.html (``report.html``'s ``r0-eJ``)."""
    return {(e.spec_id, e.repeat): f"r0-e{j}" for j, e in enumerate(results.episodes)}


def _md(text: str) -> str:
    """Untrusted text in a Markdown table cell or list: no markup, no table breaks."""
    out = text.replace("\\", "\\\\")
    for ch in "|`*_[]<>#":
        out = out.replace(ch, "\\" + ch)
    return out.replace("\n", " ")


def _code(text: str) -> str:
    """Untrusted text as a code span: nothing inside is markup, and no backtick can close it early."""
    return "`" + text.replace("`", "'").replace("\n", " ") + "`"


def pull_request_markdown(run: RunRow, diff: HistoryDiff | None, *, base_branch: str,
                          anchors: dict[tuple[str, int], str] | None = None,
                          report_url: str | None = None) -> str:
    """The sticky pull-request comment: ``run`` against the latest comparable run of ``base_branch``, the regression
    verdict, and the newly failing specs with links to their failures. Starts with ``MARKER`` (found and edited
    in place by the CI recipe of docs/ci.md)."""
    t = run.survival_turn
    this = report_link(run, report_url)
    out = [MARKER, f"## NCP-Bench: survival@{t} on {_code(run.branch or 'this run')} vs {_code(base_branch)}", ""]
    if diff is None:
        out += [f"**NO BASELINE**: no run comparable with this one is recorded on {_code(base_branch)} yet "
                "(same spec set, horizon, auditor, player and prompts); this run is the first of its line.", ""]
        rows = [("this run", run)]
    elif not diff.comparable:
        out += ["**NOT COMPARABLE**: " + "; ".join(_md(a) for a in diff.apart), ""]
        rows = [("this run", run)]
    else:
        assert diff.comparison is not None
        head = diff.comparison.lines()[0].removeprefix("ncp compare: ")
        verdict, _, rest = head.partition(": ")
        out += [f"**{verdict}**: {_md(rest)}", ""]
        rows = [(f"{_code(base_branch)} (base)", diff.base), ("this run", diff.new)]
    out += [f"| | commit | survival@{t} | 95% CI | episodes | conflicts (fact / commitment / player input) | cost |",
            "|---|---|---|---|---|---|---|"]
    for label, r in rows:
        link = report_link(r, report_url)
        commit = f"[`{r.short}`]({link})" if link else f"`{r.short}`"
        rates = " / ".join(f"{r.conflict_rates[k]:.0%}" for k in ("fact", "commitment", "player_input"))
        out.append(f"| {label} | {commit} | {_pct(r.survival)} | {_ci(r)} | {r.episodes} | {rates} | "
                   f"${r.cost_usd:.4f} |")
    if diff is not None and diff.comparable:
        out += ["", f"### Newly failing specs ({len(diff.specs_stopped)})", ""]
        if not diff.specs_stopped:
            out.append(f"None: every spec that survived turn {t} on {_code(base_branch)} still does.")
        for c in diff.specs_stopped:
            anchor = (anchors or {}).get((c.spec_id, c.repeat))
            link = report_link(run, report_url, anchor)
            name = _code(episode_name(c.spec_id, c.repeat))
            out.append(f"- {f'[{name}]({link})' if link else name}: {_md(c.new)} (base: {_md(c.base)})")
        if diff.commitments_stopped:
            out += ["", f"### Commitments that stopped holding ({len(diff.commitments_stopped)})", ""]
            out += [f"- {_code(episode_name(c.spec_id, c.repeat))} {_code(c.commitment_id)}: {c.base} -> {c.new}"
                    for c in diff.commitments_stopped]
        if diff.specs_started or diff.commitments_started:
            out += ["", f"Fixed: {len(diff.specs_started)} spec(s) and {len(diff.commitments_started)} "
                        "commitment(s) hold again."]
    out += ["", f"<sub>pytest-ncp history; full report: {this or 'not linked'}</sub>", ""]
    return "\n".join(out)


# --- the HTML history page --------------------------------------------------------------------------------


def history_chart(group: Sequence[RunRow], link: Callable[[RunRow], str | None], width: int = 900,
                  height: int = 300) -> dict[str, Any]:
    """Geometry of one comparable group's chart: a point per run (survival@T), its interval, a link, a tooltip."""
    left, right, top, bottom = 56, 24, 16, 40
    n = len(group)
    step = (width - left - right) / max(1, n - 1) if n > 1 else 0.0

    def y(v: float) -> float:
        return round(top + (1 - v) * (height - top - bottom), 2)

    points = []
    for i, r in enumerate(group):
        x = round(left + (i * step if n > 1 else (width - left - right) / 2), 2)
        measurable = r.survival is not None
        lo, hi = r.survival_ci or (0.0, 0.0)
        points.append({
            "x": x, "y": y(r.survival) if r.survival is not None else y(0.0), "y_lo": y(lo), "y_hi": y(hi),
            "measurable": measurable, "href": link(r), "run": r.run_id[:10], "commit": r.short[:7],
            "tooltip": f"{r.short} on {r.branch or '-'}, {r.when[:19].replace('T', ' ')}: survival@{r.survival_turn} "
                       f"{r.survival_text}; {r.episodes} episode(s), ${r.cost_usd:.4f}",
        })
    measured = [p for p in points if p["measurable"]]
    path = " ".join(f"{'M' if j == 0 else 'L'}{p['x']},{p['y']}" for j, p in enumerate(measured))
    return {"width": width, "height": height, "left": left, "right": width - right, "bottom": height - bottom,
            "points": points, "path": path,
            "yticks": [{"y": y(v / 100), "label": f"{v}%"} for v in (0, 25, 50, 75, 100)]}


def render_history_html(runs: Sequence[RunRow], *, link: Callable[[RunRow], str | None],
                        title: str = "NCP-Bench history") -> str:
    """The history page: per comparable group, survival@T per run with intervals (each point a link to the run's
    report), then its figures: conflict-type rates, tokens, cost."""
    from importlib import resources

    import jinja2

    from ..core.config import environment  # not the package root: it re-exports every layer, the plugin too

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    template = env.from_string(resources.files(__package__).joinpath("history.html.j2").read_text("utf-8"))
    views = []
    for group in groups(runs):
        chart = history_chart(group, link)
        rows = [{"run": r.run_id[:10], "href": link(r), "started": r.when[:19].replace("T", " "), "commit": r.short,
                 "branch": r.branch or "-", "episodes": r.episodes, "survival": _pct(r.survival), "ci": _ci(r),
                 **{k: f"{v:.1%}" for k, v in r.conflict_rates.items()}, "tokens": f"{r.tokens:,}",
                 "cost": f"${r.cost_usd:.4f}"} for r in group]
        views.append({**chart, "turn": group[0].survival_turn, "shares": group[0].comparable_text(), "rows": rows})
    return template.render(title=title, version=environment()["pytest_ncp"], runs=len(runs), groups=views)



def estimate_history_lines(db: str, config: dict[str, Any], specs: Sequence[Any], episodes: int,
                  *, flag: str = "--history") -> list[str]:
    """``--estimate`` with a history: the expected tokens and cost, from what the last comparable run (same spec
    set, horizon, auditor, player and prompts; the same narrator when there is one) measured per episode."""
    from ..analysis.history import HistoryError, measured_usage, open_history
    from ..engine.provenance import spec_set_fingerprint

    def usd(value: float) -> str:
        return f"${value:,.4f}"

    try:
        conn = open_history(db, create=False)
    except HistoryError as exc:
        return [f"expected from history: not available ({exc})"]
    try:
        spec_set = spec_set_fingerprint((s.id, s.fingerprint) for s in specs)
        usage = measured_usage(conn, config, spec_set, narrator=config.get("narrator"))
    finally:
        conn.close()
    if usage is None:
        return [f"expected from history: no comparable run in the history {db} (same spec set, max turns, auditor, "
                "player and prompts); the bound above is all there is"]
    r = usage.run
    tokens, cost = round(usage.tokens_per_episode * episodes), usage.cost_per_episode * episodes
    return [f"expected from history: {tokens:,} tokens, {usd(cost)} for {episodes} episode(s), at the "
            f"{usage.tokens_per_episode:,.0f} tokens and {usd(usage.cost_per_episode)} per episode run "
            f"{r.run_id[:10]} (commit {r.short}, {r.when[:10]}, {r.episodes} episode(s)) measured ({flag} {db})"]


__all__ = ["MARKER", "diff_lines", "episode_anchors", "estimate_history_lines", "history_chart", "list_lines", "pull_request_markdown",
           "render_history_html", "report_link", "sparkline", "trend_lines"]
