"""Run metrics (DESIGN section 4), computed from episode records: the ``episodes`` entries of results.json.

Pure functions over plain dicts, so the same numbers come out of a live run, a results file, or a
merge of pytest-xdist workers. Errored episodes are excluded from every denominator and counted
apart; in the survival curve they are right-censored at their last completed turn.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

CONFLICT_KINDS = ("fact", "commitment", "player_input")
Episode = Mapping[str, Any]


def is_error(e: Episode) -> bool:
    return e["termination"] == "error"


def is_conflict(e: Episode) -> bool:
    return str(e["termination"]).startswith("conflict:")


def conflict_turn(e: Episode) -> int:
    failure = e.get("failure") or {}
    return int(failure.get("turn", e["turns"]))


def kaplan_meier(episodes: Sequence[Episode], max_turn: int) -> dict[int, float]:
    """S(t) for t = 0..max_turn: probability of no confirmed conflict through turn t.

    Events are confirmed conflicts at their turn; errored episodes are censored at their last
    completed turn (still at risk at turns <= that turn). Every other episode survives throughout.
    With no errors this is exactly the share of episodes without a conflict up to t.
    """
    events: dict[int, int] = defaultdict(int)
    censored: list[int] = []
    survivors = 0
    for e in episodes:
        if is_conflict(e):
            events[conflict_turn(e)] += 1
        elif is_error(e):
            censored.append(int(e["turns"]))
        else:
            survivors += 1
    conflict_turns = [t for t, n in events.items() for _ in range(n)]
    curve: dict[int, float] = {}
    s = 1.0
    for t in range(0, max_turn + 1):
        d = events.get(t, 0)
        if d:
            at_risk = survivors + sum(1 for c in conflict_turns if c >= t) + sum(1 for c in censored if c >= t)
            s *= 1.0 - d / at_risk if at_risk else 1.0
        curve[t] = s
    return curve


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score 95% interval for a proportion; (0, 1) when n is 0."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def survival_counts(episodes: Sequence[Episode], turn: int) -> tuple[int, int]:
    """(survived through ``turn``, episodes whose outcome at ``turn`` is known) for the Wilson interval.

    An error before ``turn`` leaves the outcome unknown, so that episode is left out.
    """
    known = survived = 0
    for e in episodes:
        if is_error(e):
            if int(e["turns"]) >= turn:
                known += 1
                survived += 1
            continue
        known += 1
        if not (is_conflict(e) and conflict_turn(e) <= turn):
            survived += 1
    return survived, known


def pass_hat_k(episodes: Sequence[Episode], k: int) -> float | None:
    """pass^k: chance that k repeats of the same spec are all conflict-free, averaged over specs.

    Per spec with n judged repeats of which c passed: C(c, k) / C(n, k). Specs with fewer than k
    judged repeats are skipped; None when no spec has k.
    """
    by_spec: dict[str, list[bool]] = defaultdict(list)
    for e in episodes:
        if not is_error(e):
            by_spec[e["spec_id"]].append(not is_conflict(e))
    values = [math.comb(sum(p), k) / math.comb(len(p), k) for p in by_spec.values() if len(p) >= k]
    return sum(values) / len(values) if values else None


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson correlation; None when undefined (fewer than 2 points or a constant series)."""
    n = len(xs)
    if n != len(ys) or n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / math.sqrt(sxx * syy)


def compute_metrics(episodes: Iterable[Episode], *, survival_turn: int = 20,
                    max_turn: int | None = None) -> dict[str, Any]:
    """Every run-level number of DESIGN section 4 (the ``metrics`` object of results.json)."""
    episodes = list(episodes)
    judged = [e for e in episodes if not is_error(e)]
    n = len(judged)
    horizon = max([survival_turn, *(int(e["turns"]) for e in episodes)]) if max_turn is None else max_turn
    curve = kaplan_meier(episodes, horizon)
    survived, known = survival_counts(episodes, survival_turn)
    rates = {k: (sum(e["termination"] == f"conflict:{k}" for e in judged) / n if n else 0.0)
             for k in CONFLICT_KINDS}
    counts = {k: sum(e["termination"] == f"conflict:{k}" for e in judged) for k in CONFLICT_KINDS}
    repeats = max((int(e.get("repeat", 0)) + 1 for e in episodes), default=1)

    def mean(key: str) -> float:
        return sum(float(e[key]) for e in judged) / n if n else 0.0

    successes = sum(e["termination"] == "success" for e in judged)
    return {
        "episodes": len(episodes),
        "errors": len(episodes) - n,
        "survival": {str(t): round(s, 6) for t, s in curve.items()},
        "survival_turn": survival_turn,
        f"survival_at_{survival_turn}": round(curve.get(survival_turn, curve[max(curve)]), 6),
        "survival_at_20": round(kaplan_meier(episodes, max(20, horizon))[20], 6),
        "survival_ci": list(wilson(survived, known)),
        "avg_turns": round(mean("turns"), 4),
        "progress_pct": round(100 * mean("progress"), 4),
        "satisfied_pct": round(100 * mean("satisfied"), 4),
        "conflict_rates": {k: round(v, 6) for k, v in rates.items()},
        "conflict_rate_ci": {k: list(wilson(counts[k], n)) for k in CONFLICT_KINDS},
        "successes": successes,
        "conflict_free": sum(not is_conflict(e) for e in judged),
        "turn_limit": sum(e["termination"] == "turn_limit" for e in judged),
        "script_exhausted": sum(e["termination"] == "script_exhausted" for e in judged),
        "pass_k": {str(k): pass_hat_k(episodes, k) for k in range(1, repeats + 1)} if repeats > 1 else {},
        "tokens": sum(int(e.get("tokens", 0) or 0) for e in episodes),
        "cost_usd": round(sum(float(e.get("cost_usd", 0) or 0) for e in episodes), 8),
    }


@dataclass(frozen=True)
class Gate:
    """``--ncp-min-survival=RATE[@TURN]``: the session passes when survival@TURN >= RATE."""

    rate: float
    turn: int = 20

    @classmethod
    def parse(cls, text: str) -> Gate:
        rate_s, _, turn_s = text.strip().partition("@")
        try:
            rate = float(rate_s.rstrip("%")) / (100 if rate_s.endswith("%") else 1)
            turn = int(turn_s) if turn_s else 20
        except ValueError:
            raise ValueError(f"invalid survival gate {text!r}: expected RATE[@TURN], e.g. 0.4@20 or 40%@20") from None
        if not 0.0 <= rate <= 1.0 or turn < 0:
            raise ValueError(f"invalid survival gate {text!r}: RATE must be within 0..1 (or 0%..100%), TURN >= 0")
        return cls(rate, turn)

    def check(self, episodes: Sequence[Episode]) -> GateVerdict:
        horizon = max([self.turn, *(int(e["turns"]) for e in episodes)])
        measured = kaplan_meier(episodes, horizon)[self.turn] if episodes else 0.0
        survived, known = survival_counts(episodes, self.turn)
        judged = sum(not is_error(e) for e in episodes)
        return GateVerdict(self, measured, wilson(survived, known), judged, measured >= self.rate and judged > 0)


@dataclass(frozen=True)
class GateVerdict:
    gate: Gate
    measured: float
    interval: tuple[float, float]
    judged: int
    passed: bool

    def line(self) -> str:
        lo, hi = self.interval
        verdict = "PASSED" if self.passed else "FAILED"
        if not self.judged:
            return f"ncp survival gate {verdict}: no judged episode (survival@{self.gate.turn} needs at least one)"
        return (f"ncp survival gate {verdict}: survival@{self.gate.turn} = {self.measured:.1%} "
                f"(95% CI {lo:.1%}-{hi:.1%}, {self.judged} episodes) "
                f"{'>=' if self.passed else '<'} required {self.gate.rate:.1%}")
