"""Is a new run worse than a baseline? Paired comparison of two results.json runs, and auditor agreement.

Two runs of the same specs pair up episode by episode on (spec_id, repeat). Each pair is a
survive/fail outcome at turn TURN on both sides, so the change in survival@TURN is tested with
exact McNemar on the discordant pairs (b = survived in base but failed in new, c = the reverse) and
described with a paired bootstrap 95% interval of the difference in survival rates. Pairing removes
the spec-to-spec spread (some stories are simply harder), which is what lets 100 episodes detect
a drop that two unpaired rates of that size could not.

Everything here is pure: results in (``analysis.results.RunResults``, or a parsed results.json document,
checked by ``parse_results``), frozen dataclasses out, deterministic given ``seed``.
``ncp compare`` / ``ncp agree`` print ``lines()``; the pytest plugin
can call :func:`compare_runs` on its baseline file and the run it just finished.

Survival at TURN is the same notion as :mod:`pytest_ncp.analysis.metrics`: an episode fails at TURN when it
ended in a confirmed conflict or a narrator error at a turn <= TURN; it survived when it succeeded or
was still playing at TURN. An episode that stopped before TURN without failing (turn limit, script
end) has no known outcome at TURN, and neither has an unknown outcome (auditor, model or player
error): a pair with either on one side is left out and counted.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..core.config import episode_name
from .metrics import MIN_OBSERVED_SHARE, CONFLICT_KINDS, compute_metrics, failure_turn, pearson
from .metrics import survival_at
from .metrics import survived_at as _survived_at
from .results import RunResults, parse_results

if TYPE_CHECKING:
    from ..core.records import EpisodeRecord

Key = tuple[str, int]
# spec_id -> commitment_id -> kind (invariant | ordering | achievement), e.g. from the spec files.
CommitmentKinds = Mapping[str, Mapping[str, str]]


def survived_at(e: EpisodeRecord, turn: int) -> bool | None:
    """Whether an episode had no failure through ``turn``; None when that is not known (censored)."""
    return _survived_at(e, turn)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: binomial test of b against Binomial(b + c, 1/2).

    p = min(1, 2 * P(X <= min(b, c))), computed with exact integers; 1.0 when there is no
    discordant pair (nothing changed, so no evidence of a change).
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    # Integer numerator over 2**n keeps the tail exact for any n; one division at the end.
    p: float = min(1.0, 2 * tail / 2 ** n)
    return p


def bootstrap_diff_ci(deltas: Sequence[int], *, resamples: int = 2000, seed: int = 0,
                      level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(deltas), resampling pairs with replacement.

    ``deltas`` are per-pair differences new - base (each -1, 0 or +1 for survive/fail outcomes), so
    the mean is the difference of survival rates. Deterministic for a given ``seed``. The bounds are
    the order statistics at floor(alpha/2 * R) and ceil((1 - alpha/2) * R) - 1 of the R sorted
    resampled means (0-based), e.g. the 51st and 1950th of 2000.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be within (0, 1), got {level}")
    n = len(deltas)
    if n == 0:
        return (0.0, 0.0)
    rng = random.Random(seed)
    data = list(deltas)
    means = sorted(sum(rng.choices(data, k=n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    lo = means[min(resamples - 1, math.floor(tail * resamples))]
    hi = means[max(0, math.ceil((1 - tail) * resamples) - 1)]
    return (lo, hi)


# --- comparison of two runs -----------------------------------------------------------------------


@dataclass(frozen=True)
class NewFailure:
    """An episode that survived TURN in the baseline and fails by TURN in the new run."""

    spec_id: str
    repeat: int
    termination: str
    turn: int

    def __str__(self) -> str:
        return f"{episode_name(self.spec_id, self.repeat)}: {self.termination} at turn {self.turn}"


@dataclass(frozen=True)
class CommitmentRegression:
    """A commitment kept (or achieved) in the baseline episode and broken (or missed) in the new one."""

    spec_id: str
    repeat: int
    commitment_id: str
    base: str
    new: str
    kind: str | None = None

    def __str__(self) -> str:
        kind = f" ({self.kind})" if self.kind else ""
        return f"{episode_name(self.spec_id, self.repeat)} {self.commitment_id}{kind}: {self.base} -> {self.new}"


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare_runs`. ``regression`` is the verdict a CI gate acts on."""

    pairs: int                      # pairs with both episodes judged (no error on either side)
    b: int                          # survived@turn in base, failed in new
    c: int                          # failed in base, survived in new
    p_value: float                  # two-sided exact McNemar
    base_rate: float                # survival@turn over the pairs, base run
    new_rate: float                 # same pairs, new run
    diff: float                     # new_rate - base_rate
    ci: tuple[float, float]         # paired bootstrap 95% interval of diff
    newly_failing_specs: tuple[NewFailure, ...]
    newly_failing_commitments: tuple[CommitmentRegression, ...]
    regression: bool                # p < alpha and new_rate < base_rate
    turn: int = 20
    alpha: float = 0.05
    resamples: int = 2000
    seed: int = 0
    errored: tuple[Key, ...] = ()   # pairs left out: an unknown outcome (non-narrator error) on either side
    unobserved: tuple[Key, ...] = ()  # pairs left out: one side stopped before ``turn`` without failing
    only_in_base: tuple[Key, ...] = ()
    only_in_new: tuple[Key, ...] = ()
    achievements_checked: bool = False  # commitment kinds were known, so missed achievements count too
    notes: tuple[str, ...] = ()
    base_survival: str = ""  # each run's own survival@turn, e.g. "n/a (0 of 100 reached turn 20)"
    new_survival: str = ""
    runs_measurable: bool = True  # each run's own survival@turn is measurable (metrics.SurvivalPoint)

    @property
    def improvement(self) -> bool:
        return self.measurable and self.p_value < self.alpha and self.new_rate > self.base_rate

    @property
    def measurable(self) -> bool:
        """survival@turn is comparable: each run's own survival@turn is measurable, and at least half of the
        pairs were observed to ``turn`` on both sides. (Pairs observed only because both failed early would
        otherwise make "0% vs 0%, unchanged" out of runs that never reached the turn.)"""
        return (self.runs_measurable and self.pairs > 0
                and self.pairs >= MIN_OBSERVED_SHARE * (self.pairs + len(self.unobserved)))

    @property
    def underpowered(self) -> bool:
        """Even a flip of every judged pair (all survived in base, all failed in new) could not reach
        significance: with so few pairs no regression can be shown (exact McNemar needs 6 discordant pairs
        at alpha 0.05), so "no significant change" would be no evidence at all."""
        return self.measurable and mcnemar_exact(self.pairs, 0) >= self.alpha

    def verdict(self) -> str:
        if not self.measurable:
            return "NOTHING TO COMPARE"
        if self.regression:
            return "REGRESSION"
        if self.underpowered:
            return "UNDERPOWERED"
        if self.improvement:
            return "IMPROVEMENT"
        return "NO SIGNIFICANT CHANGE"

    def lines(self) -> list[str]:
        """The comparison as text: a headline, the numbers, then what flipped, what was left out."""
        t = self.turn
        if self.pairs and not self.measurable:
            out = [f"ncp compare: NOTHING TO COMPARE: survival@{t} is n/a: too few episodes were observed to turn "
                   f"{t} ({self.pairs} of {self.pairs + len(self.unobserved)} pair(s) on both sides; compare an "
                   "earlier --turn)"]
        elif self.pairs == 0:
            head = (f"ncp compare: NOTHING TO COMPARE: no pair of episodes has a known outcome at turn {t} on both "
                    f"sides ({len(self.errored)} pair(s) with an unknown outcome, {len(self.unobserved)} not observed "
                    f"to turn {t}, {len(self.only_in_base)} only in base, {len(self.only_in_new)} only in new)")
            out = [head]
        else:
            lo, hi = self.ci
            if self.new_rate == self.base_rate:
                change = f"unchanged at {self.base_rate:.1%}"
            else:
                change = (f"{'fell' if self.diff < 0 else 'rose'} from {self.base_rate:.1%} to "
                          f"{self.new_rate:.1%}")
            head = (f"ncp compare: {self.verdict()}: survival@{t} {change} over {self.pairs} paired "
                    f"episode(s) (McNemar {_p(self.p_value)}, alpha {self.alpha:g})")
            if self.underpowered:
                head += (f"; even if all {self.pairs} pair(s) had flipped, McNemar p would be "
                         f"{mcnemar_exact(self.pairs, 0):.4f} >= alpha: too few pairs to show a "
                         "regression (compare more episodes, e.g. --repeats)")
            out = [
                head,
                f"  change in survival@{t}: {_points(self.diff)} (paired bootstrap 95% CI {_points(lo)} to "
                f"{_points(hi)}; {self.resamples} resamples, seed {self.seed})",
                f"  McNemar exact test: {self.b} pair(s) survived -> failed, {self.c} failed -> survived, "
                f"{self.pairs - self.b - self.c} unchanged; two-sided {_p(self.p_value)}",
            ]
        if not self.measurable and (self.base_survival or self.new_survival):
            out.append(f"  survival@{t} of each run: base {self.base_survival}, new {self.new_survival}")
        out += _listing(f"newly failing episodes (survived turn {t} in base, conflict by turn {t} in new)",
                        [str(x) for x in self.newly_failing_specs])
        kinds = "" if self.achievements_checked else "; missed achievements not checked: spec files not found"
        out += _listing(f"newly failing commitments (violated, or an achievement no longer satisfied{kinds})",
                        [str(x) for x in self.newly_failing_commitments])
        if self.errored:
            out += _listing("left out: pair(s) with an unknown outcome (auditor, model or player error)",
                            [episode_name(*k) for k in self.errored])
        if self.unobserved:
            out += _listing(f"left out: pair(s) not observed to turn {t} (turn limit or script end before it)",
                            [episode_name(*k) for k in self.unobserved])
        if self.only_in_base:
            out += _listing("unpaired: only in base", [episode_name(*k) for k in self.only_in_base])
        if self.only_in_new:
            out += _listing("unpaired: only in new", [episode_name(*k) for k in self.only_in_new])
        out += [f"  note: {n}" for n in self.notes]
        return out


class HorizonMismatch(ValueError):
    """Two runs measured survival at different turns, and no turn both observed was asked for."""


def comparison_turn(base: tuple[int, int | None], new: tuple[int, int | None], turn: int | None,
                    turn_flag: str = "--turn") -> int:
    """The turn two runs are compared at. ``base`` and ``new`` are each run's (headline survival turn, turn
    limit). Without ``turn`` the headlines must be one turn: the smaller one would let a candidate run with
    ``--max-turns 1`` "not regress" against a base run of 3. With ``turn``, both runs must have played to it."""
    (base_turn, base_limit), (new_turn, new_limit) = base, new
    horizons = (f"base measured survival@{base_turn} (max turns {base_limit if base_limit is not None else '?'}), "
                f"new survival@{new_turn} (max turns {new_limit if new_limit is not None else '?'})")
    if turn is None:
        if base_turn != new_turn:
            raise HorizonMismatch(f"the runs have different horizons: {horizons}; rerun one with the other's "
                                  f"--max-turns, or compare at a turn both played with {turn_flag} T")
        return base_turn
    short = [name for name, limit in (("base", base_limit), ("new", new_limit)) if limit is not None and limit < turn]
    if short:
        raise HorizonMismatch(f"{turn_flag} {turn}: {' and '.join(short)} never played to turn {turn} ({horizons})")
    return turn


def compare_runs(base: RunResults | Mapping[str, Any], new: RunResults | Mapping[str, Any], *, turn: int = 20,
                 alpha: float = 0.05,
                 seed: int = 0, resamples: int = 2000, kinds: CommitmentKinds | None = None) -> Comparison:
    """Compare two runs' results (``base`` the baseline, ``new`` the candidate).

    Pairs episodes on (spec_id, repeat); pairs with an errored episode on either side are left out
    and listed, as are episodes present in one run only. Reports the newly failing episodes, and the
    newly failing commitments: VIOLATED in new but not in base, and, when ``kinds`` gives the
    commitment kinds (spec_id -> commitment_id -> kind), achievements SATISFIED in base but not in
    new. Without kinds a PENDING commitment cannot be told apart from an invariant merely left
    unsettled by an early conflict, so only violations are reported.

    ``regression`` is True only when the change is significant (McNemar p < alpha) and survival@turn
    is lower in new. A run compared with itself has no discordant pair (p = 1): never a regression.
    Raises ValueError for a document that is not a results file or repeats an episode.
    """
    if turn < 0:
        raise ValueError(f"turn must be >= 0, got {turn}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be within (0, 1), got {alpha}")
    base_run, new_run = parse_results(base, "base"), parse_results(new, "new")
    base_eps, new_eps = _by_key(base_run), _by_key(new_run)
    paired = sorted(base_eps.keys() & new_eps.keys())
    errored = tuple(k for k in paired if base_eps[k].ending.unknown or new_eps[k].ending.unknown)
    unobserved = tuple(k for k in paired if k not in errored and (
        survived_at(base_eps[k], turn) is None or survived_at(new_eps[k], turn) is None))
    judged = [k for k in paired if k not in errored and k not in unobserved]
    b = c = base_survived = new_survived = 0
    deltas: list[int] = []
    newly_failing: list[NewFailure] = []
    commitments: list[CommitmentRegression] = []
    for key in judged:
        e0, e1 = base_eps[key], new_eps[key]
        # Judged pairs were observed up to ``turn`` in both runs: survived_at is True or False, never None.
        s0, s1 = bool(survived_at(e0, turn)), bool(survived_at(e1, turn))
        base_survived += s0
        new_survived += s1
        deltas.append(int(s1) - int(s0))
        if s0 and not s1:
            b += 1
            newly_failing.append(NewFailure(key[0], key[1], e1.termination.value, failure_turn(e1) or 0))
        elif s1 and not s0:
            c += 1
        commitments += _commitment_regressions(key, e0, e1, (kinds or {}).get(key[0]))
    n = len(judged)
    base_point, new_point = survival_at(list(base_eps.values()), turn), survival_at(list(new_eps.values()), turn)
    base_rate = base_survived / n if n else 0.0
    new_rate = new_survived / n if n else 0.0
    p = mcnemar_exact(b, c)
    ci = bootstrap_diff_ci(deltas, resamples=resamples, seed=seed) if n else (0.0, 0.0)
    return Comparison(
        pairs=n, b=b, c=c, p_value=p, base_rate=base_rate, new_rate=new_rate, diff=new_rate - base_rate,
        ci=ci, newly_failing_specs=tuple(newly_failing), newly_failing_commitments=tuple(commitments),
        regression=bool(n) and base_point.measurable and new_point.measurable and p < alpha
        and new_rate < base_rate, turn=turn, alpha=alpha,
        resamples=resamples, seed=seed, errored=errored, unobserved=unobserved,
        only_in_base=tuple(sorted(base_eps.keys() - new_eps.keys())),
        only_in_new=tuple(sorted(new_eps.keys() - base_eps.keys())),
        achievements_checked=kinds is not None and all(k[0] in kinds for k in judged),
        notes=tuple(_notes(base_run, new_run, turn)),
        base_survival=base_point.text(), new_survival=new_point.text(),
        runs_measurable=base_point.measurable and new_point.measurable,
    )


def _commitment_regressions(key: Key, e0: EpisodeRecord, e1: EpisodeRecord,
                            kinds: Mapping[str, str] | None) -> list[CommitmentRegression]:
    before, after = e0.commitments, e1.commitments
    found = []
    for cid in sorted(before.keys() & after.keys()):
        s0, s1 = before[cid], after[cid]
        kind = kinds.get(cid) if kinds else None
        violated = s1 == "VIOLATED" and s0 != "VIOLATED"
        missed = kind == "achievement" and s0 == "SATISFIED" and s1 != "SATISFIED"
        if violated or missed:
            found.append(CommitmentRegression(key[0], key[1], cid, s0, s1, kind))
    return found


def _by_key(run: RunResults) -> dict[Key, EpisodeRecord]:
    # The results model already refused a file that holds an episode twice.
    return {(e.spec_id, e.repeat): e for e in run.episodes}


def _notes(base: RunResults, new: RunResults, turn: int) -> list[str]:
    notes = []
    for name, run in (("base", base), ("new", new)):
        max_turns = run.config.max_turns
        if max_turns is not None and max_turns < turn:
            notes.append(f"{name} ran at most {max_turns} turns, so survival@{turn} there means no conflict "
                         f"in {max_turns} turns")
        why = run.incompleteness()
        if why is not None and run.stopped != "unrecorded":
            notes.append(f"{name} is incomplete: {why}")
    for field in ("auditor_model", "prompt_version", "player"):
        a, b = getattr(base.config, field), getattr(new.config, field)
        if a and b and a != b:
            notes.append(f"{field} differs (base {a}, new {b}): the change may not be the narrator's")
    return notes


def _pct_or_na(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _listing(title: str, items: list[str]) -> list[str]:
    if not items:
        return []
    return [f"  {title}: {len(items)}", *(f"    {x}" for x in items)]


def _points(x: float) -> str:
    return f"{100 * x:+.1f} points"


def _p(p: float) -> str:
    return "p < 0.0001" if p < 0.0001 else f"p = {p:.4f}"


# --- auditor agreement ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairAgreement:
    """Agreement of runs ``a`` and ``b`` (indexes into ``Agreement.labels``) over their paired episodes."""

    a: int
    b: int
    n: int                         # episodes judged in both runs
    pearson: float | None          # of per-episode turns; None when undefined (n < 2 or constant)
    same_termination: float | None  # share of paired episodes ending the same way


@dataclass(frozen=True)
class Agreement:
    """Runs of the same transcripts judged by different auditors, side by side."""

    labels: tuple[str, ...]
    auditors: tuple[str, ...]
    metrics: tuple[Mapping[str, Any], ...]
    pairs: tuple[PairAgreement, ...]
    turn: int = 20

    def lines(self) -> list[str]:
        header = ("run", "auditor", "episodes", "errors", f"surv@{self.turn}", "avg turns", "progress",
                  "satisfied", "fact", "commitment", "player input", "successes")
        rows: list[tuple[str, ...]] = [header]
        for label, auditor, m in zip(self.labels, self.auditors, self.metrics):
            rates = m["conflict_rates"]
            rows.append((label, auditor, str(m["episodes"]), str(m["errors"]),
                         _pct_or_na(m[f'survival_at_{self.turn}']), f"{m['avg_turns']:.2f}",
                         f"{m['progress_pct']:.1f}%", f"{m['satisfied_pct']:.1f}%",
                         *(f"{rates[k]:.1%}" for k in CONFLICT_KINDS), str(m["successes"])))
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        out = ["ncp agree: conflict profile per run (conflict rates = share of judged episodes)"]
        out += ["  " + "  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in
                                 enumerate(zip(row, widths))).rstrip() for row in rows]
        out.append("pairwise agreement over episodes judged in both runs (Pearson r of per-episode turns):")
        for p in self.pairs:
            r = "n/a (fewer than 2 episodes or constant turns)" if p.pearson is None else f"{p.pearson:.3f}"
            same = "n/a" if p.same_termination is None else f"{p.same_termination:.0%}"
            out.append(f"  {self.labels[p.a]} vs {self.labels[p.b]}: r = {r} over {p.n} episode(s); "
                       f"same termination in {same}")
        return out


def agreement(runs: Sequence[RunResults | Mapping[str, Any]], labels: Sequence[str] | None = None, *,
              turn: int = 20) -> Agreement:
    """Pairwise Pearson correlation of per-episode turns between runs, and each run's conflict profile.

    Episodes pair on (spec_id, repeat); an episode errored in either run is left out of that pair.
    Each run's metrics (its row) are over all of its own episodes, as ``ncp run`` reports them.
    """
    if len(runs) < 2:
        raise ValueError("agreement needs at least two runs")
    labels = tuple(labels) if labels is not None else tuple(f"run {i + 1}" for i in range(len(runs)))
    if len(labels) != len(runs):
        raise ValueError(f"{len(labels)} label(s) for {len(runs)} run(s)")
    checked = [parse_results(run, label) for run, label in zip(runs, labels)]
    keyed = [_by_key(run) for run in checked]
    metrics = tuple(compute_metrics(list(k.values()), survival_turn=turn) for k in keyed)
    auditors = tuple(str(run.config.auditor_model or "?") for run in checked)
    pairs = []
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            common = sorted(k for k in keyed[i].keys() & keyed[j].keys()
                            if not keyed[i][k].ending.unknown and not keyed[j][k].ending.unknown)
            xs = [float(keyed[i][k].turns) for k in common]
            ys = [float(keyed[j][k].turns) for k in common]
            same = (sum(keyed[i][k].termination == keyed[j][k].termination for k in common) / len(common)
                    if common else None)
            pairs.append(PairAgreement(i, j, len(common), pearson(xs, ys), same))
    return Agreement(labels, auditors, metrics, tuple(pairs), turn)
