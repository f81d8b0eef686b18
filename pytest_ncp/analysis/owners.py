"""Who owns an episode's outcome (DESIGN 7.5), and the blame table: every episode of a run in one row.

Pure functions over episode records (results.json ``episodes``), like the metrics:

- **narrator**: confirmed conflicts (by type) and narrator errors (it raised, timed out, answered nothing or
  no words, or over the size limit). The only outcomes that count against survival.
- **player**: the player simulator: player faults (an unfair simulated input, still unfair after its
  regenerations, provoked the conflict that ended the episode) and player errors.
- **auditor**: auditor errors, and conflicts that stood on a majority of ``--audit-votes`` K > 1
  confirmation samples short of unanimity (``contested``: the judge itself disagreed).
- **model**: the model endpoints: model errors (timeouts, refusals, rate limits past the retries).
- **harness**: anything else: an error of a kind or an ending this version does not know.
- **budget**: episodes a cost cap or an early gate decision left unfinished (``BUDGET_TERMINATIONS``).
- **none**: no fault: success, turn limit, script exhausted.

Everything but the narrator's and ``none`` is censored in survival and counted apart; the table's counts
sum to the episode count.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..core.config import episode_key

Episode = Mapping[str, Any]

OWNERS: tuple[str, ...] = ("narrator", "player", "auditor", "model", "harness", "budget", "none")
OWNER_LABELS: dict[str, str] = {
    "narrator": "narrator", "player": "player simulator", "auditor": "auditor", "model": "model endpoints",
    "harness": "harness", "budget": "budget", "none": "no fault",
}
# The outcome kinds within a row, as people read them (the keys are what ``outcome`` returns).
KIND_LABELS: dict[str, str] = {
    "conflict:fact": "fact conflict", "conflict:commitment": "commitment conflict",
    "conflict:player_input": "player-input conflict", "error:narrator": "narrator error",
    "player_fault": "player fault", "error:player": "player error",
    "error:auditor": "auditor error", "contested": "split verdict",
    "error:model": "model error",
    "budget": "cut short by the cost cap", "cancelled": "cancelled after an early decision",
    "success": "success", "turn_limit": "turn limit", "script_exhausted": "script exhausted",
}
CLEAN_TERMINATIONS: tuple[str, ...] = ("success", "turn_limit", "script_exhausted")
# Endings of the cost cap (issue 20) and of an early gate decision (issue 21): their owner is the budget.
BUDGET_TERMINATIONS: tuple[str, ...] = ("budget", "cancelled")
# Endings that are nobody's failure and no known outcome: censored, bounded by the error budget.
UNKNOWN_TERMINATIONS: tuple[str, ...] = ("player_fault", "contested")
_ERROR_OWNERS = {"narrator": "narrator", "player": "player", "auditor": "auditor", "model": "model"}


def outcome(e: Episode) -> tuple[str, str]:
    """(owner, kind) of one episode: ``("narrator", "conflict:fact")``, ``("player", "player_fault")``, ..."""
    termination = str(e.get("termination"))
    if termination.startswith("conflict:"):
        return "narrator", termination
    if termination == "player_fault":
        return "player", termination
    if termination == "contested":
        return "auditor", termination
    if termination == "error":
        kind = str((e.get("error") or {}).get("kind"))
        return _ERROR_OWNERS.get(kind, "harness"), f"error:{kind}"
    if termination in CLEAN_TERMINATIONS:
        return "none", termination
    if termination in BUDGET_TERMINATIONS:
        return "budget", termination
    return "harness", termination


def owner(e: Episode) -> str:
    return outcome(e)[0]


def blame_table(episodes: Iterable[Episode]) -> dict[str, Any]:
    """Every episode in the row of its owner, with the kinds of outcome and the episode keys (``spec--rN``).

    ``{"episodes": N, "owners": {owner: {"count", "kinds": {kind: n}, "episodes": [key, ...]}}}``, every owner
    of ``OWNERS`` present (0 when none), in that order; the counts sum to N."""
    rows: dict[str, dict[str, Any]] = {o: {"count": 0, "kinds": {}, "episodes": []} for o in OWNERS}
    n = 0
    for e in episodes:
        who, kind = outcome(e)
        row = rows[who]
        row["count"] += 1
        row["kinds"][kind] = row["kinds"].get(kind, 0) + 1
        row["episodes"].append(episode_key(str(e["spec_id"]), int(e.get("repeat", 0) or 0)))
        n += 1
    for row in rows.values():
        row["episodes"].sort()
        row["kinds"] = dict(sorted(row["kinds"].items(), key=lambda kv: _kind_order(kv[0])))
    return {"episodes": n, "owners": rows}


def _kind_order(kind: str) -> tuple[int, str]:
    order = list(KIND_LABELS)
    return (order.index(kind), kind) if kind in order else (len(order), kind)


def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, kind.replace("error:", "").replace("_", " ") + (" error" if kind.startswith("error:")
                                                                                  else ""))


__all__ = ["BUDGET_TERMINATIONS", "CLEAN_TERMINATIONS", "KIND_LABELS", "OWNERS", "OWNER_LABELS",
           "UNKNOWN_TERMINATIONS", "blame_table", "kind_label", "outcome", "owner"]
