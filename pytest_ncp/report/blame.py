"""The blame table as people read it: who owns each episode's outcome (``analysis.owners``; DESIGN 7.5).

One row per owner, always in the same order, with the kinds of outcome and the episodes; the rows sum to the
run's episodes. Plain text for the terminal summaries and ``ncp report``, Markdown for ``--markdown``; the
HTML report renders the same rows (``rows``) with links to the episodes.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..analysis.owners import OWNER_LABELS, OWNERS, blame_table, kind_label
from ..analysis.results import split_key
from ..core.config import episode_name
from ..core.safe_text import printable

if TYPE_CHECKING:
    from ..core.records import EpisodeRecord

TITLE = "who owns each outcome (docs/auditor.md): only the narrator's count against survival"
MAX_IDS = 10  # per row in the terminal; results.json and the HTML report list every one


def rows(blame: Mapping[str, Any] | None, episodes: Iterable[EpisodeRecord] | None = None) -> list[dict[str, Any]]:
    """``[{"owner", "label", "count", "kinds": "fact conflict 2, ...", "episodes": ["caligari[r0]", ...],
    "keys": [...]}]``, every owner in order. ``blame`` is results.json's ``metrics.blame``; when it is absent
    (an older file) it is computed from ``episodes``."""
    if not blame:
        blame = blame_table(episodes or [])
    owners = blame.get("owners") or {}
    out = []
    for owner in OWNERS:
        row = owners.get(owner) or {"count": 0, "kinds": {}, "episodes": []}
        keys = [str(k) for k in row.get("episodes") or []]
        split = ", ".join(f"{n} at {votes}" for votes, n in sorted((row.get("split") or {}).items()))
        out.append({"owner": owner, "label": OWNER_LABELS[owner], "count": int(row.get("count", 0)),
                    "cost_usd": float(row.get("cost_usd") or 0.0),
                    "kinds": ", ".join(f"{kind_label(k)} {n}" for k, n in (row.get("kinds") or {}).items())
                             + (f" (split votes: {split})" if split else ""),
                    "episodes": [_name(k) for k in keys], "keys": keys})
    return out


def _name(key: str) -> str:
    try:
        return episode_name(*split_key(key))
    except ValueError:
        return key


def blame_lines(blame: Mapping[str, Any] | None, episodes: Iterable[EpisodeRecord] | None = None, *, max_ids: int | None = MAX_IDS) -> list[str]:
    """The table as aligned plain text: a title, one line per owner, the total."""
    table = rows(blame, episodes)
    width = max(len(r["label"]) for r in table)
    total = sum(r["count"] for r in table)
    spent = sum(r["cost_usd"] for r in table)
    # A priced run shows what each owner's episodes cost; an unpriced one (a local or scripted model) keeps
    # the table as narrow as it was.
    money = [_dollars(r["cost_usd"]) for r in table] + [_dollars(spent)] if spent > 0 else []
    cash = max((len(m) for m in money), default=0)
    lines = [TITLE]
    for i, r in enumerate(table):
        ids = r["episodes"] if max_ids is None else r["episodes"][:max_ids]
        more = len(r["episodes"]) - len(ids)
        what = r["kinds"] + (": " + ", ".join(ids) if ids else "") + (f" and {more} more" if more else "")
        cost = f"  {money[i]:>{cash}}" if money else ""
        lines.append(f"  {r['label']:<{width}}  {r['count']:>4}{cost}" + (f"  {what}" if what else ""))
    lines.append(f"  {'total':<{width}}  {total:>4}" + (f"  {money[-1]:>{cash}}" if money else ""))
    return [printable(line) for line in lines]


def _dollars(amount: float) -> str:
    return f"${amount:,.4f}"


def blame_markdown(blame: Mapping[str, Any] | None, episodes: Iterable[EpisodeRecord] | None = None, *, label: str = "") -> str:
    """GitHub-flavoured Markdown: one table per run."""
    def md(text: str) -> str:
        return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")

    table = rows(blame, episodes)
    priced = sum(r["cost_usd"] for r in table) > 0
    out = [f"**{md(TITLE)}**" + (f" ({md(label)})" if label else ""), "",
           "| owner | episodes | " + ("cost | " if priced else "") + "outcomes | ids |",
           "|:---|---:|" + ("---:|" if priced else "") + ":---|:---|"]
    for r in table:
        ids = r["episodes"][:MAX_IDS]
        more = len(r["episodes"]) - len(ids)
        out.append(f"| {md(r['label'])} | {r['count']} | " + (f"{_dollars(r['cost_usd'])} | " if priced else "")
                   + f"{md(r['kinds'])} | {md(', '.join(ids) + (f' and {more} more' if more else ''))} |")
    return "\n".join(out) + "\n"


__all__ = ["TITLE", "blame_lines", "blame_markdown", "rows"]
