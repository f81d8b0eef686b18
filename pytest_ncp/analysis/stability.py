"""How stable a verdict is: flip rates of re-audited turns (``ncp stability``), pure functions over observations.

An observation is one recorded turn audited again K times: what the run recorded for it (a conflict type,
for the turn that ended an episode, or ``clean`` for a turn with no confirmed conflict) and what each
re-audit confirmed (the set of conflict types, or None when the re-audit gave no valid verdict). A re-audit
**flips** when it disagrees with the record: for a conflict turn, when it confirms no conflict of the
recorded type; for a clean turn, when it confirms any conflict. Invalid re-audits are counted apart and
left out of the rate.

The flip rate of a row is flips / valid re-audits with a Wilson 95% interval. The interval treats the
re-audits as independent; the K re-audits of one turn share that turn, so with few turns and large K the
interval is narrower than the truth (``per_turn`` shows how the flips spread over turns).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from .metrics import CONFLICT_KINDS, wilson

CLEAN = "clean"
ROWS: tuple[str, ...] = (*CONFLICT_KINDS, CLEAN)
Observation = Mapping[str, Any]  # {"episode", "turn", "recorded", "outcomes": [set[str] | None, ...]}


def flipped(recorded: str, confirmed: Iterable[str]) -> bool:
    """Whether one re-audit that confirmed ``confirmed`` (conflict types) disagrees with ``recorded``."""
    types = set(confirmed)
    return bool(types) if recorded == CLEAN else recorded not in types


def flip_summary(observations: Sequence[Observation]) -> dict[str, Any]:
    """Per row (each conflict type, ``clean``, and ``conflicts``: all conflict turns together): turns, re-audits,
    invalid ones, flips, the flip rate and its Wilson 95% interval (None when there is no valid re-audit);
    and ``per_turn``, each turn's record and flips."""
    rows: dict[str, dict[str, Any]] = {}
    per_turn = []
    for name in (*ROWS, "conflicts"):
        rows[name] = {"turns": 0, "reaudits": 0, "invalid": 0, "flips": 0}
    for o in observations:
        recorded = str(o["recorded"])
        outcomes = list(o["outcomes"])
        valid = [set(x) for x in outcomes if x is not None]
        flips = sum(flipped(recorded, x) for x in valid)
        targets = [recorded] + (["conflicts"] if recorded != CLEAN else [])
        for name in targets:
            row = rows.setdefault(name, {"turns": 0, "reaudits": 0, "invalid": 0, "flips": 0})
            row["turns"] += 1
            row["reaudits"] += len(valid)
            row["invalid"] += len(outcomes) - len(valid)
            row["flips"] += flips
        per_turn.append({"episode": o["episode"], "turn": int(o["turn"]), "recorded": recorded,
                         "reaudits": len(valid), "invalid": len(outcomes) - len(valid), "flips": flips,
                         "confirmed": [sorted(x) if x is not None else None for x in outcomes]})
    for row in rows.values():
        n = row["reaudits"]
        row["rate"] = round(row["flips"] / n, 6) if n else None
        row["ci"] = [round(x, 6) for x in wilson(row["flips"], n)] if n else None
    return {"rows": rows, "per_turn": per_turn}


__all__ = ["CLEAN", "ROWS", "flip_summary", "flipped"]
