"""Run metrics (DESIGN section 4), computed from episode records: the ``episodes`` entries of results.json.

Pure functions over ``core.records.EpisodeRecord``, so the same numbers come out of a live run, a results
file, or a merge of pytest-xdist workers. What each ending means (failure, censored, unknown, judged) is
``core.endings.Ending``'s to say.

Outcomes, as the survival curve sees them:

- a confirmed conflict is an event (a failure) at its turn;
- a narrator error (the narrator raised, timed out or answered nothing) is the narrator's fault: an
  event at the turn it could not play (the one after its last completed turn);
- ``turn_limit``, ``script_exhausted``, ``budget`` (cut short by ``--max-cost``), ``cancelled`` (ended in
  flight after a sequential gate decided) and every other error (auditor, model, player: an *unknown*
  outcome) are right-censored at their last completed turn: nothing is known about later turns;
- a player fault (an unfair simulated input provoked the conflict) and a contested conflict (it stood on
  a split vote, ``--audit-votes``) are unknown outcomes too, censored at the turn before theirs: that
  turn was judged, but not as the narrator's doing alone (``analysis/owners.py``);
- ``success`` survives throughout: the story is complete.

Unknown outcomes are left out of every rate and counted apart, within an error budget; episodes the budget
cut short are left out of every rate too and counted apart, outside the error budget (they are the run's
choice, not a failure of anything).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..core.options import parse_gate, share
from ..core.endings import Ending, Termination
from .owners import blame_table

if TYPE_CHECKING:
    from ..core.records import EpisodeRecord

CONFLICT_KINDS = ("fact", "commitment", "player_input")
Z95 = 1.959964
# survival@T is a number only while at least this share of the episodes is still observed at T (reached
# turn T, or failed before it); beyond that the estimate would rest on the few that happened to last.
MIN_OBSERVED_SHARE = 0.5


def observed_turns(e: EpisodeRecord) -> int:
    """The last turn through which the narrator's outcome is known (where a censored episode is censored)."""
    if e.ending.censored_before_its_turn:  # its own turn was judged against something else
        return max(conflict_turn(e) - 1, 0)
    return e.turns


def conflict_turn(e: EpisodeRecord) -> int:
    return e.failure.turn if e.failure is not None else e.turns


def failure_turn(e: EpisodeRecord) -> int | None:
    """The turn at which the narrator failed (conflict or narrator error); None when it did not."""
    if e.termination.is_conflict:
        return conflict_turn(e)
    if e.ending is Ending.NARRATOR_ERROR:
        return e.turns + 1
    return None


def survived_at(e: EpisodeRecord, turn: int) -> bool | None:
    """Whether the narrator got through ``turn`` without failing; None when that is unknown (censored)."""
    failed = failure_turn(e)
    if failed is not None:
        return failed > turn
    if not e.ending.censored or observed_turns(e) >= turn:
        return True
    return None


@dataclass(frozen=True)
class SurvivalPoint:
    """survival@turn with its 95% interval and how many episodes it rests on."""

    turn: int
    value: float
    ci: tuple[float, float]
    reached: int    # episodes still in the story at ``turn`` (at risk there)
    observed: int   # reached, or failed before ``turn``: their outcome through ``turn`` is known
    episodes: int

    @property
    def measurable(self) -> bool:
        if self.episodes == 0 or self.observed < MIN_OBSERVED_SHARE * self.episodes:
            return False
        return self.reached > 0 or self.value == 0.0

    def text(self, digits: int = 1) -> str:
        """``31.0% (95% CI 22.1%-40.5%)``, or ``n/a (0 of 100 reached turn 20)``: never a number it cannot back."""
        if not self.measurable:
            return f"n/a ({self.reached} of {self.episodes} reached turn {self.turn})"
        lo, hi = self.ci
        return f"{self.value:.{digits}%} (95% CI {lo:.{digits}%}-{hi:.{digits}%})"

    def to_dict(self) -> dict[str, Any]:
        ok = self.measurable
        return {"turn": self.turn, "value": round(self.value, 6) if ok else None,
                "ci": [round(self.ci[0], 6), round(self.ci[1], 6)] if ok else None,
                "reached": self.reached, "observed": self.observed, "episodes": self.episodes, "text": self.text()}


def survival_table(episodes: Sequence[EpisodeRecord], max_turn: int, z: float = Z95) -> dict[int, SurvivalPoint]:
    """Kaplan-Meier S(t) for t = 0..max_turn with Greenwood's variance and the log-log 95% interval.

    S(t) is the probability of no failure (confirmed conflict or narrator error) through turn t.
    A censored episode is at risk at turns <= its last turn. The interval is S^exp(+-z*sigma) with
    sigma = sqrt(sum d/(n(n-d))) / |log S| (Kalbfleisch-Prentice); where Greenwood's variance is 0
    (S = 1: no failure yet) it is the exact binomial bound for no failure among the episodes at risk.
    """
    failures: dict[int, int] = defaultdict(int)
    censored: dict[int, int] = defaultdict(int)
    forever = 0
    for e in episodes:
        failed = failure_turn(e)
        if failed is not None:
            failures[failed] += 1
        elif not e.ending.censored:
            forever += 1
        else:
            censored[observed_turns(e)] += 1
    n_all = len(episodes)
    # at risk at t: failures at >= t, censored at >= t, successes
    at_risk = n_all
    failed_before = censored_before = 0
    s, greenwood = 1.0, 0.0
    table: dict[int, SurvivalPoint] = {}
    for t in range(0, max_turn + 1):
        d = failures.get(t, 0)
        if d and at_risk:
            s *= 1.0 - d / at_risk
            greenwood = math.inf if at_risk == d else greenwood + d / (at_risk * (at_risk - d))
        observed = n_all - censored_before
        table[t] = SurvivalPoint(t, s, _log_log_interval(s, greenwood, at_risk, observed, z), at_risk,
                                 observed, n_all)
        failed_before += d
        censored_before += censored.get(t, 0)
        at_risk -= d + censored.get(t, 0)
    return table


def _log_log_interval(s: float, greenwood: float, at_risk: int, observed: int, z: float) -> tuple[float, float]:
    alpha = 2 * (1 - _normal_cdf(z))
    if s >= 1.0:
        n = max(at_risk, 1)
        return ((alpha / 2) ** (1 / n), 1.0)
    if s <= 0.0 or math.isinf(greenwood):
        n = max(observed, 1)
        return (0.0, 1 - (alpha / 2) ** (1 / n))
    sigma = math.sqrt(greenwood) / abs(math.log(s))
    return (s ** math.exp(z * sigma), s ** math.exp(-z * sigma))


def _normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def kaplan_meier(episodes: Sequence[EpisodeRecord], max_turn: int) -> dict[int, float]:
    """S(t) for t = 0..max_turn (see :func:`survival_table`)."""
    return {t: p.value for t, p in survival_table(episodes, max_turn).items()}


def survival_at(episodes: Sequence[EpisodeRecord], turn: int) -> SurvivalPoint:
    return survival_table(episodes, turn)[turn]


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score 95% interval for a proportion; (0, 1) when n is 0."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def pass_hat_k(episodes: Sequence[EpisodeRecord], k: int) -> float | None:
    """pass^k: chance that k repeats of the same spec are all conflict-free, averaged over specs.

    Per spec with n judged repeats of which c passed: C(c, k) / C(n, k). Specs with fewer than k
    judged repeats are skipped; None when no spec has k.
    """
    by_spec: dict[str, list[bool]] = defaultdict(list)
    for e in episodes:
        if e.ending.judged:
            by_spec[e.spec_id].append(failure_turn(e) is None)
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


def compute_metrics(episodes: Iterable[EpisodeRecord], *, survival_turn: int = 20,
                    max_turn: int | None = None) -> dict[str, Any]:
    """Every run-level number of DESIGN section 4 (the ``metrics`` object of results.json).

    Rates and means are over judged episodes (everything but unknown outcomes); narrator errors are
    judged, and count as failures. ``survival_at_<T>`` is None when survival@T is not measurable
    (``survival_point`` then says how many episodes reached turn T).
    """
    episodes = list(episodes)
    judged = [e for e in episodes if e.ending.judged]
    n = len(judged)
    horizon = max([survival_turn, 20, *(e.turns + 1 for e in episodes)]) if max_turn is None \
        else max(max_turn, survival_turn, 20)
    table = survival_table(episodes, horizon)
    point, at_20 = table[survival_turn], table[20]
    counts = {k: sum(e.termination == Termination(f"conflict:{k}") for e in judged) for k in CONFLICT_KINDS}
    rates = {k: (counts[k] / n if n else 0.0) for k in CONFLICT_KINDS}
    narrator_errors = sum(e.ending is Ending.NARRATOR_ERROR for e in episodes)
    unknown = sum(e.ending.unknown for e in episodes)
    repeats = max((e.repeat + 1 for e in episodes), default=1)
    held = [e.held for e in judged if e.held is not None]
    successes = sum(e.ending is Ending.SUCCESS for e in judged)
    return {
        "episodes": len(episodes),
        "judged": n,
        "errors": sum(e.termination is Termination.ERROR for e in episodes),
        "narrator_errors": narrator_errors,
        "unknown": unknown,
        "error_rate": round(unknown / len(episodes), 6) if episodes else 0.0,
        "survival": {str(t): round(p.value, 6) for t, p in table.items()},
        "survival_turn": survival_turn,
        "survival_point": point.to_dict(),
        f"survival_at_{survival_turn}": point.to_dict()["value"],
        "survival_at_20": at_20.to_dict()["value"],
        "survival_ci": point.to_dict()["ci"],
        "avg_turns": round(sum(e.turns for e in judged) / n if n else 0.0, 4),
        "progress_pct": round(100 * (sum(e.progress for e in judged) / n if n else 0.0), 4),
        "satisfied_pct": round(100 * (sum(e.satisfied for e in judged) / n if n else 0.0), 4),
        "held_pct": round(100 * sum(held) / len(held), 4) if held else None,
        "conflict_rates": {k: round(v, 6) for k, v in rates.items()},
        "conflict_rate_ci": {k: list(wilson(counts[k], n)) for k in CONFLICT_KINDS},
        "narrator_error_rate": round(narrator_errors / n, 6) if n else 0.0,
        "successes": successes,
        "conflict_free": sum(failure_turn(e) is None for e in judged),
        "turn_limit": sum(e.ending is Ending.TURN_LIMIT for e in judged),
        "script_exhausted": sum(e.ending is Ending.SCRIPT_EXHAUSTED for e in judged),
        "budget": sum(e.ending is Ending.BUDGET for e in episodes),
        "pass_k": {str(k): pass_hat_k(episodes, k) for k in range(1, repeats + 1)} if repeats > 1 else {},
        "tokens": sum(e.tokens for e in episodes),
        **cache_figures(episodes),
        "cost_usd": round(sum(e.cost_usd for e in episodes), 8),
        # what the episodes' calls cost, the turns played ahead and discarded included (--max-cost counts both)
        "spent_usd": round(sum(e.cost_usd + (e.speculative.cost_usd if e.speculative else 0.0)
                               for e in episodes), 8),
        "blame": blame_table(episodes),
        "flags": flag_totals(episodes),
    }


def flag_totals(episodes: Sequence[EpisodeRecord]) -> dict[str, int]:
    """What became of every flag the conflict check raised over the run: the episodes' ``flags`` summed.
    A flag whose quote was never verified, or that the auditor withdrew on a retry, went to confirmation and
    is counted here, never dropped (issue 19); ``split`` only when some episode voted (``--audit-votes``)."""
    totals = {k: 0 for k in ("raised", "confirmed", "unverified", "unverified_confirmed", "withdrawn",
                             "withdrawn_confirmed")}
    voted = False
    for e in episodes:
        for key, value in (e.flags.model_dump() if e.flags is not None else {}).items():
            if not isinstance(value, int):
                continue
            voted = voted or key == "split"
            totals[key] = totals.get(key, 0) + int(value)
    if not voted:
        for key in ("split", "split_confirmed"):
            totals.pop(key, None)
    return totals



def cache_figures(episodes: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """Prompt tokens, those a provider's prompt cache served, and their share (over the episodes that
    recorded prompt tokens: older files did not)."""
    prompt = sum(e.prompt_tokens or 0 for e in episodes)
    cached = sum(e.cached_tokens or 0 for e in episodes)
    return {"prompt_tokens": prompt, "cached_tokens": cached,
            "cached_share": round(cached / prompt, 6) if prompt else None}


# --- gates: the error budget and the survival gate ----------------------------------------------------
# What they decide for a run, and its exit code, is analysis/verdict.py; their sentences are report/verdict.py.



def parse_error_rate(text: str | float) -> float:
    """``--max-error-rate``: a share within 0..1 (``0.05``) or a percentage (``5%``)."""
    try:
        return share(text)
    except ValueError as exc:
        raise ValueError(f"invalid error rate {text!r}: {exc}") from None


# No spec may lose more than this share of its episodes (with two or more: --repeats) to unknown outcomes,
# whatever the run's budget: otherwise one spec could vanish from a gate through errors alone (issue 19).
MAX_SPEC_ERROR_SHARE = 0.5


@dataclass(frozen=True)
class BudgetVerdict:
    """Unknown outcomes (auditor, model, player errors) against ``--max-error-rate``, and per spec."""

    unknown: int
    episodes: int
    max_rate: float
    # Specs of two or more episodes that lost more than MAX_SPEC_ERROR_SHARE of them: (spec id, unknown, episodes).
    vanished: tuple[tuple[str, int, int], ...] = ()

    @property
    def rate(self) -> float:
        return self.unknown / self.episodes if self.episodes else 0.0

    @property
    def exceeded(self) -> bool:
        return self.rate > self.max_rate + 1e-12 or bool(self.vanished)


def error_budget(episodes: Sequence[EpisodeRecord], max_rate: float = 0.0) -> BudgetVerdict:
    per_spec: dict[str, list[bool]] = {}
    for e in episodes:
        per_spec.setdefault(e.spec_id, []).append(e.ending.unknown)
    vanished = tuple((spec, sum(flags), len(flags)) for spec, flags in sorted(per_spec.items())
                     if len(flags) >= 2 and sum(flags) / len(flags) > MAX_SPEC_ERROR_SHARE + 1e-12)
    return BudgetVerdict(sum(e.ending.unknown for e in episodes), len(episodes), max_rate, vanished)


@dataclass(frozen=True)
class Gate:
    """``--ncp-min-survival=RATE[@TURN]``: the session passes when survival@TURN >= RATE."""

    rate: float
    turn: int = 20

    @classmethod
    def parse(cls, text: str) -> Gate:
        """``0.4@20``, ``40%`` (TURN defaults to 20); the option table's parser (``core/options.py``)."""
        try:
            return cls(*parse_gate(text))
        except ValueError as exc:
            raise ValueError(f"invalid survival gate {text!r}: {exc}") from None

    def check(self, episodes: Sequence[EpisodeRecord], max_error_rate: float = 0.0) -> GateVerdict:
        """Passes only when the error budget holds, survival@TURN is measurable, and it is >= RATE."""
        point = survival_at(list(episodes), self.turn)
        budget = error_budget(episodes, max_error_rate)
        passed = not budget.exceeded and point.measurable and point.value >= self.rate
        return GateVerdict(self, point, budget, sum(e.ending is Ending.NARRATOR_ERROR for e in episodes), passed)


@dataclass(frozen=True)
class GateVerdict:
    gate: Gate
    point: SurvivalPoint
    budget: BudgetVerdict
    narrator_errors: int
    passed: bool

    @property
    def measured(self) -> float | None:
        return self.point.value if self.point.measurable else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return self.point.ci if self.point.measurable else None

    @property
    def decided(self) -> bool:
        return not self.budget.exceeded and self.point.measurable
