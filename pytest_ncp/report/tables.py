"""The paper's tables for one or more runs: terminal (rich, or plain when piped), Markdown, JSON.

``run_rows`` turns one results.json into a row of figures, recomputed from the episodes (the
source of truth; the stored ``metrics`` may come from an older pytest-ncp). The renderers share one
column layout (``SECTIONS``), so the terminal, Markdown and HTML tables always agree.
"""

from __future__ import annotations

import html
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..analysis.metrics import CONFLICT_KINDS, compute_metrics, survival_table, wilson
from ..core.endings import Ending, Termination
from ..analysis.reviews import dispute_rates

if TYPE_CHECKING:
    from ..analysis.results import RunResults

SURVIVAL_TURNS = (10, 20, 50, 100)
KIND_LABELS = {"fact": "fact", "commitment": "commitment", "player_input": "player input"}

Row = dict[str, Any]


def run_rows(results: RunResults | Mapping[str, Any], label: str, *,
             reviews: Sequence[Mapping[str, Any]] | None = None) -> Row:
    """Every figure of one run (one results.json) as plain JSON-ready values.

    Rates are fractions in 0..1 with a 95% Wilson interval ``ci``; survival@T is the Kaplan-Meier
    estimate with its log-log (Greenwood) interval, and ``value`` is ``None`` (shown as
    ``n/a (k of N reached turn T)``) when too few episodes were observed up to T. ``reviews`` are the
    labels of the run's reviews.json; without them ``review`` is ``None``.
    """
    from ..analysis.results import parse_results  # pydantic: only once a table is computed

    run = parse_results(results, label)
    config = run.config.model_dump(mode="json", exclude_unset=True)  # as the file has it
    episodes = run.episodes
    max_turns = config.get("max_turns")
    if not isinstance(max_turns, int):
        max_turns = max((e.turns for e in episodes), default=0)
    m = compute_metrics(episodes, max_turn=max(max_turns, *(e.turns for e in episodes), 0))
    judged = [e for e in episodes if e.ending.judged]
    n = len(judged)
    horizon = max([max_turns, *SURVIVAL_TURNS, *(e.turns + 1 for e in episodes)])
    table = survival_table(episodes, horizon)

    survival: dict[str, Any] = {}
    for t in SURVIVAL_TURNS:
        point = table[t]
        survival[str(t)] = {"value": round(point.value, 6) if point.measurable else None,
                            "ci": _ci(point.ci) if point.measurable else None, "n": point.observed,
                            "reached": point.reached, "episodes": point.episodes, "text": point.text()}

    conflicts = {}
    for kind in CONFLICT_KINDS:
        count = sum(e.termination == Termination(f"conflict:{kind}") for e in judged)
        conflicts[kind] = {"value": round(count / n, 6) if n else None, "count": count,
                           "ci": _ci(wilson(count, n)) if n else None}

    models = config.get("models") or {}
    return {
        "label": label,
        "narrator": config.get("narrator"),
        "narrator_model": config.get("narrator_model") or models.get("narrator"),
        "player": config.get("player"),
        "player_model": config.get("player_model") or models.get("player"),
        "auditor_model": config.get("auditor_model") or models.get("auditor"),
        "prompt_version": config.get("prompt_version"),
        "max_turns": max_turns,
        "repeats": config.get("repeats") or 1,
        "episodes": len(episodes),
        "judged": n,
        "errors": m["unknown"],
        "budget": m["budget"],
        "narrator_errors": sum(e.ending is Ending.NARRATOR_ERROR for e in episodes),
        "survival": survival,
        "avg_turns": m["avg_turns"] if n else None,
        "progress_pct": m["progress_pct"] if n else None,
        "satisfied_pct": m["satisfied_pct"] if n else None,
        "held_pct": m["held_pct"] if n else None,
        "conflict_rates": conflicts,
        "successes": m["successes"],
        "conflict_free": m["conflict_free"],
        "turn_limit": m["turn_limit"],
        "script_exhausted": m["script_exhausted"],
        "pass_k": m["pass_k"],
        "tokens": m["tokens"],
        "cached_share": m.get("cached_share"),
        "cost_usd": m["cost_usd"],
        "blame": m["blame"],
        "flags": m.get("flags"),
        "review": dispute_rates(reviews) if reviews else None,
        "complete": run.complete,
        "incomplete": run.incompleteness(),
    }


def _ci(interval: tuple[float, float]) -> list[float]:
    return [round(interval[0], 6), round(interval[1], 6)]


# --- one layout for every renderer ---------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    text: str
    ci: str = ""  # "23.0-41.0": shown after the value, or under it where space allows

    def plain(self) -> str:
        return f"{self.text} ({self.ci})" if self.ci else self.text


@dataclass(frozen=True)
class Column:
    header: str
    cell: Callable[[Row], Cell]
    numeric: bool = True


@dataclass(frozen=True)
class Section:
    title: str
    columns: tuple[Column, ...]
    note: str = ""


def _pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f}%"


def _rate(fig: Mapping[str, Any] | None) -> Cell:
    if not fig or fig.get("value") is None:
        if fig and fig.get("text"):  # survival@T: "n/a (k of N reached turn T)"
            return Cell(str(fig["text"]))
        return Cell("n/a")
    lo, hi = fig["ci"]
    return Cell(_pct(fig["value"]), f"{100 * lo:.1f}-{100 * hi:.1f}")


def _survival_at(turn: int) -> Callable[[Mapping[str, Any]], Cell]:
    return lambda r: _rate(r["survival"][str(turn)])


def _conflict_rate(kind: str) -> Callable[[Mapping[str, Any]], Cell]:
    return lambda r: _rate(r["conflict_rates"][kind])


def _num(key: str, fmt: str = "{}") -> Callable[[Row], Cell]:
    return lambda r: Cell("n/a" if r.get(key) is None else fmt.format(r[key]))


def _pass_k(r: Row) -> Cell:
    values = r.get("pass_k") or {}
    if not values:
        return Cell("n/a")
    k = max(values, key=int)
    return Cell(f"k={k}: {_pct(values[k])}")


def sections(rows: Sequence[Row]) -> list[Section]:
    """The tables for these rows; pass^k and human review appear only when some run has them."""
    label = Column("run", lambda r: Cell(str(r["label"])), numeric=False)
    survival = Section(
        "Survival: no confirmed conflict or narrator error through turn T (Kaplan-Meier, 95% log-log interval)",
        (label, Column("episodes", lambda r: Cell(f"{r['judged']}" + (f" (+{r['errors']} err)" if r["errors"] else "")
                                                  + (f" (+{r['budget']} cut)" if r.get("budget") else ""))),
         Column("max turns", _num("max_turns")),
         *(Column(f"survival@{t}", _survival_at(t)) for t in SURVIVAL_TURNS),
         Column("avg turns", _num("avg_turns", "{:.2f}"))),
        note="Turn limit, script end, budget (cut by --max-cost) and unknown outcomes (auditor, model, player errors) "
             "are censored at their last "
             "turn; narrator errors are failures. n/a (k of N reached T): fewer than half the episodes were "
             "observed up to T.",
    )
    outcomes = [
        label,
        Column("progress", lambda r: Cell(_pct(None if r["progress_pct"] is None else r["progress_pct"] / 100))),
        Column("satisfied", lambda r: Cell(_pct(None if r["satisfied_pct"] is None else r["satisfied_pct"] / 100))),
        Column("held", lambda r: Cell(_pct(None if r.get("held_pct") is None else r["held_pct"] / 100))),
        *(Column(f"{KIND_LABELS[k]} conflicts", _conflict_rate(k)) for k in CONFLICT_KINDS),
    ]
    if any(r.get("pass_k") for r in rows):
        outcomes.append(Column("pass^k", _pass_k))
    out = [
        survival,
        Section("Outcomes: trajectory progress, satisfied commitments, conflict-type rates (95% Wilson interval)",
                tuple(outcomes),
                note="satisfied: achievements and orderings whose condition was met; held: invariants never "
                     "violated. Rates are over judged episodes (narrator errors included)."),
        Section("Counts and cost", (
            label, Column("successes", _num("successes")), Column("conflict-free", _num("conflict_free")),
            Column("turn limit", _num("turn_limit")), Column("script exhausted", _num("script_exhausted")),
            Column("narrator errors", _num("narrator_errors")),
            Column("unknown (errors)", lambda r: Cell(str(r["errors"]))),
            *((Column("cut (budget)", _num("budget")),) if any(r.get("budget") for r in rows) else ()),
            Column("tokens", _num("tokens", "{:,}")),
            Column("cached", lambda r: Cell(_pct(r.get("cached_share")))),
            Column("cost", _num("cost_usd", "${:.4f}"))),
                note="cached: share of the prompt tokens a provider's prompt cache served (priced at the cost map's "
                     "cached rate); n/a when the run recorded no prompt tokens."),
    ]
    if any((r.get("flags") or {}).get("raised") for r in rows):
        def flags(key: str) -> Callable[[Row], Cell]:
            def cell(r: Row) -> Cell:
                f = r.get("flags") or {}
                if key not in f:
                    return Cell("n/a")
                confirmed = f.get(f"{key}_confirmed")
                return Cell(str(f[key]) if confirmed is None else f"{f[key]} ({confirmed} confirmed)")
            return cell

        out.append(Section(
            "Conflict-check flags: what became of each (never dropped)",
            (label, Column("raised", flags("raised")), Column("confirmed", flags("confirmed")),
             Column("quote never verified", flags("unverified")), Column("withdrawn on a retry", flags("withdrawn")),
             *((Column("split by the votes", flags("split")),) if any("split" in (r.get("flags") or {})
                                                                      for r in rows) else ())),
            note="A flag whose quote could not be verified, or that the auditor withdrew when asked again, still goes "
                 "to confirmation (docs/auditor.md); a confirmed one ends the episode like any other."))
    if any(r.get("review") for r in rows):
        def disputed(kind: str) -> Callable[[Row], Cell]:
            return lambda r: _rate((r.get("review") or {}).get(kind))

        out.append(Section(
            "Human review: disputed / (agreed + disputed) confirmed conflicts (95% Wilson interval)",
            (label, Column("labels", lambda r: Cell(str((r.get("review") or {}).get("labels", 0)))),
             *(Column(KIND_LABELS[k], disputed(k)) for k in CONFLICT_KINDS), Column("all", disputed("all"))),
            note="From reviews.json next to each results.json (`ncp review`); skipped labels are not counted."))
    return out


# --- renderers -----------------------------------------------------------------------------------


def render_terminal(rows: Sequence[Row], *, tty: bool | None = None, width: int | None = None) -> str:
    """rich tables on a terminal; plain aligned text when piped (logs, grep, files)."""
    if tty is None:
        tty = sys.stdout.isatty()
    if not tty:
        return render_plain(rows)
    import io
    import shutil

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=width or shutil.get_terminal_size((120, 24)).columns,
                      highlight=False)
    for section in sections(rows):
        table = Table(title=section.title, title_justify="left", caption=section.note or None,
                      caption_justify="left", header_style="bold")
        for col in section.columns:
            table.add_column(col.header, justify="right" if col.numeric else "left",
                             overflow="fold", no_wrap=False)
        for row in rows:
            cells = []
            for col in section.columns:
                c = col.cell(row)
                # Text, not a str: labels come from files, and rich would read "[...]" in them as markup.
                t = Text(c.text)
                if c.ci:
                    t.append(f"\n{c.ci}", style="dim")
                cells.append(t)
            table.add_row(*cells)
        console.print(table)
        console.print()
    return buf.getvalue().rstrip("\n") + "\n"


def render_plain(rows: Sequence[Row]) -> str:
    out: list[str] = []
    for section in sections(rows):
        grid = [[c.header for c in section.columns]]
        grid += [[c.cell(r).plain() for c in section.columns] for r in rows]
        widths = [max(len(line[i]) for line in grid) for i in range(len(section.columns))]

        def line(cells: list[str]) -> str:
            return "  ".join(cell.rjust(w) if col.numeric else cell.ljust(w)
                             for cell, w, col in zip(cells, widths, section.columns)).rstrip()

        out += [section.title, line(grid[0]), "  ".join("-" * w for w in widths)]
        out += [line(cells) for cells in grid[1:]]
        if section.note:
            out.append(section.note)
        out.append("")
    return "\n".join(out)


def _md(text: str) -> str:
    # Labels come from results files: neutralise HTML (GitHub renders it in tables) and pipes.
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def render_markdown(rows: Sequence[Row], *, title: str = "NCP-Bench report") -> str:
    """GitHub-flavoured Markdown, e.g. ``ncp report r.json --markdown >> "$GITHUB_STEP_SUMMARY"``."""
    out = [f"## {_md(title)}", ""]
    for section in sections(rows):
        out += [f"**{_md(section.title)}**", ""]
        out.append("| " + " | ".join(_md(c.header) for c in section.columns) + " |")
        out.append("|" + "|".join("---:" if c.numeric else ":---" for c in section.columns) + "|")
        for r in rows:
            cells = []
            for c in section.columns:
                cell = c.cell(r)
                cells.append(_md(cell.text) + (f" <sub>{_md(cell.ci)}</sub>" if cell.ci else ""))
            out.append("| " + " | ".join(cells) + " |")
        if section.note:
            out += ["", f"<sub>{_md(section.note)}</sub>"]
        out.append("")
    return "\n".join(out)


def render_json(rows: Sequence[Row]) -> str:
    """The computed rows for dashboards: fractions in 0..1, ``null`` for n/a."""
    return json.dumps({"version": 1, "runs": list(rows)}, indent=2, ensure_ascii=False) + "\n"
