"""Who owns an episode's outcome (DESIGN 7.5), and the blame table: every episode of a run in one row.

Pure functions over episode records (results.json ``episodes``), like the metrics; who owns which ending is
``core.endings.Ending``'s table:

- **narrator**: confirmed conflicts (by type) and narrator errors (it raised, timed out, answered nothing or
  no words, or over the size limit). The only outcomes that count against survival.
- **player**: the player simulator: player faults (an unfair simulated input, still unfair after its
  regenerations, provoked the conflict that ended the episode) and player errors.
- **auditor**: auditor errors, and conflicts that stood on a majority of ``--audit-votes`` K > 1
  confirmation samples short of unanimity (``contested``: the judge itself disagreed).
- **model**: the model endpoints: model errors (timeouts, refusals, rate limits past the retries).
- **harness**: anything else: an error of a kind or an ending this version does not know.
- **budget**: episodes a cost cap or an early gate decision left unfinished.
- **none**: no fault: success, turn limit, script exhausted.

Everything but the narrator's and ``none`` is censored in survival and counted apart; the table's counts
sum to the episode count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from ..core.endings import Ending, Owner

if TYPE_CHECKING:
    from ..core.records import EpisodeRecord

OWNERS: tuple[str, ...] = tuple(o.value for o in Owner)
OWNER_LABELS: dict[str, str] = {o.value: o.label for o in Owner}
# The outcome kinds within a row, as people read them (the keys are what ``outcome`` returns).
KIND_LABELS: dict[str, str] = {e.value: e.label for e in Ending}


def outcome(e: EpisodeRecord) -> tuple[str, str]:
    """(owner, kind) of one episode: ``("narrator", "conflict:fact")``, ``("player", "player_fault")``, ..."""
    ending = e.ending
    return ending.owner.value, ending.value


def blame_table(episodes: Iterable[EpisodeRecord]) -> dict[str, Any]:
    """Every episode in the row of its owner, with the kinds of outcome and the episode keys (``spec--rN``).

    ``{"episodes": N, "owners": {owner: {"count", "kinds": {kind: n}, "episodes": [key, ...], "cost_usd"}}}``,
    every owner of ``OWNERS`` present (0 when none), in that order; the counts sum to N. ``cost_usd`` is what
    the row's episodes spent, as their records price it (cache reads and writes at their own rates), so a run
    sees what the outcomes that are not the narrator's cost it. A row whose conflicts stood on a split vote also
    has ``"split": {"2/3": n}``."""
    rows: dict[str, dict[str, Any]] = {o: {"count": 0, "kinds": {}, "episodes": [], "cost_usd": 0.0}
                                       for o in OWNERS}
    n = 0
    for e in episodes:
        who, kind = outcome(e)
        row = rows[who]
        row["count"] += 1
        row["cost_usd"] += e.cost_usd + (e.speculative.cost_usd if e.speculative is not None else 0.0)
        row["kinds"][kind] = row["kinds"].get(kind, 0) + 1
        row["episodes"].append(e.key)
        agreement = e.failure.agreement if e.failure is not None else None
        if agreement is not None and agreement.yes < agreement.of:
            # A strict majority stood short of unanimity: the narrator's all the same, and shown as such.
            splits = row.setdefault("split", {})
            text = f"{agreement.yes}/{agreement.of}"
            splits[text] = splits.get(text, 0) + 1
        n += 1
    for row in rows.values():
        row["episodes"].sort()
        row["cost_usd"] = round(row["cost_usd"], 6)
        row["kinds"] = dict(sorted(row["kinds"].items(), key=lambda kv: _kind_order(kv[0])))
    return {"episodes": n, "owners": rows}


def _kind_order(kind: str) -> tuple[int, str]:
    order = list(KIND_LABELS)
    return (order.index(kind), kind) if kind in order else (len(order), kind)


def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, kind.replace("error:", "").replace("_", " ") + (" error" if kind.startswith("error:")
                                                                                  else ""))


__all__ = ["KIND_LABELS", "OWNERS", "OWNER_LABELS", "blame_table", "kind_label", "outcome"]
