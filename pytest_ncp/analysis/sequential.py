"""Anytime-valid gates: survival gates and regression checks that may stop as soon as the verdict is certain.

Pure standard-library Python with no import of the rest of pytest_ncp: callers pass plain data (one
outcome per episode, in the order the episodes were *started*; thresholds; alpha).

Method
------
The confidence sequence (CS) for a mean in [0, 1] is the *hedged capital* CS of

    I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by betting",
    Journal of the Royal Statistical Society Series B, 2023 (arXiv:2010.09686),
    section 4 (hedged capital process) with the predictable plug-in empirical-Bernstein bets
    (PrPl-EB) and the truncation c = 1/2 that the paper and its reference implementation (the
    ``confseq`` package, ``confseq.betting.hedged_cs``) use by default.

For a candidate mean m two capital processes bet on the next observation x_t (x_t in [0, 1]):

    K+_t(m) = prod_{i<=t} (1 + min(lam+_i, c/m)     (x_i - m))    bets that the mean is above m
    K-_t(m) = prod_{i<=t} (1 - min(lam-_i, c/(1-m)) (x_i - m))    bets that the mean is below m

    lam+-_t = sqrt(2 log(1/alpha+-) / (t log(1 + t) s2_{t-1}))       (predictable: uses x_1..x_{t-1})
    s2_t = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1),  mu_t = (1/2 + sum_{i<=t} x_i) / (t + 1),  s2_0 = 1/4

with alpha+ = split * alpha and alpha- = (1 - split) * alpha (split = 1/2 by default: the paper's
hedging weight theta). Each bet is >= 0 and below 1/m (resp. 1/(1-m)), so every factor is > 0, and
when every observation's conditional mean is <= m, E[factor | past] = 1 + bet (E x - m) <= 1: K+(m)
is a nonnegative supermartingale for the whole composite null "mean <= m" (K-(m) likewise for
"mean >= m"). Ville's inequality gives P(K+_t(m) >= 1/alpha+ for some t) <= alpha+, at every time
at once: that is what "anytime-valid" means, and why peeking after every episode costs nothing.
The CS at time t is the set of m that neither process has rejected:

    C_t = {m : K+_t(m) < 1/alpha+ and K-_t(m) < 1/alpha-},   P(mean in C_t for all t) >= 1 - alpha.

The bets do not depend on m (only their truncation does), so K+_t(m) falls and K-_t(m) rises with m:
C_t is an interval (l_t, u_t). :class:`ConfidenceSequence` reports its running intersection
(max of l, min of u over time, as ``hedged_cs`` does), computed exactly by root finding rather than
on a grid. The bets are the paper's defaults, not tuned to this project's benchmark: they meet the
issue's targets as they are (see benchmarks/README.md, "Sequential gates").

The gate: two one-sided tests of the threshold itself
------------------------------------------------------
For a gate ``survival@TURN >= RATE`` only m = RATE matters, so :class:`SequentialGate` tracks the
two capitals at RATE in O(1) per observed episode:

* **pass** at the first episode where K+(RATE) >= 1/alpha+, i.e. as soon as the CS lower bound
  reaches RATE: P(the gate ever passes early | true survival <= RATE) <= alpha+ = alpha/2;
* **fail** at the first episode where K-(RATE) >= 1/alpha-, i.e. as soon as the CS upper bound
  reaches RATE: P(the gate ever fails early | true survival >= RATE) <= alpha- = alpha/2;
* at a true survival of exactly RATE both nulls hold, so P(any early decision) <= alpha.

Both hold however often one looks, and whatever rule stops the run, because they are bounds on the
supremum over all times. K+(RATE) and K-(RATE) at the stopping time are e-values (expectation <= 1
under their null) and are what shards report (:func:`merge_shards`).

**Undecided at the end of the run**: the sequential part abstains and the run decides as the fixed
gate does (``Gate.check``: Kaplan-Meier survival@TURN >= RATE, measurable, error budget held). The
sequential part never changes that verdict's meaning; it only adds early verdicts, each of which
carries the guarantee above. The fixed verdict itself is a point-estimate rule, not an alpha-level
test: at a true rate at or near RATE it passes about half the time, as it always has.

Assumptions (what the guarantee rests on)
-----------------------------------------
* The outcomes are fed in the order the episodes were **started** (a seeded random order of
  (spec, repeat), :func:`seeded_order`), not the order they finish: failures end sooner, so finish
  order puts failures first and would bias the early evidence towards "fail". :class:`StartOrder`
  releases outcomes in start order whatever order they complete in.
* The guarantee is exact when the episodes are i.i.d. given the narrator (the benchmark's model).
  A random order of one fixed set of specs of unequal difficulty is sampling without replacement;
  the tests and the benchmark check by simulation that the gate is then more conservative, not
  less (the count of survivors of a mixed pool is less spread than a binomial's), but this module
  does not prove it for every pool.
* Censored episodes (an error that is not the narrator's, a script that ended before TURN) are
  left out and counted: valid when censoring is unrelated to survival. The error budget (a share of
  unknown outcomes) still applies and is the caller's.
* It measures what the auditor reports: an auditor that misses or invents conflicts biases every
  gate, sequential or fixed, and no alpha corrects that.

Paired regression check
-----------------------
For ``ncp compare BASE NEW --sequential`` each (spec, repeat) pair gives d = base_survived -
new_survived in {-1, 0, 1}, whose mean is delta = survival(base) - survival(new), the drop. The CS
above runs on y = (1 + d) / 2 in [0, 1] (mean (1 + delta) / 2) at m = (1 + margin) / 2:

* **regression** when K+ crosses: rejects H0 "drop <= margin"; P(ever | drop <= margin) <= alpha/2.
* **non-inferior** when K- crosses: rejects H0 "drop >= margin"; P(ever | drop >= margin) <= alpha/2.
  With margin 0 that means the new run is certainly *better*; with margin > 0, that any drop is
  certainly smaller than the margin.

Concordant pairs (y = 1/2) leave the capitals unchanged at margin 0, so this is a sequential
McNemar test on the discordant pairs; with a margin > 0 they count as evidence against a drop of
more than the margin, as they should. alpha/2 per side matches the fixed ``ncp compare``, whose
two-sided McNemar p < alpha with a drop is a one-sided test at alpha/2.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Hashable, Iterable, Sequence

PASS = "pass"
FAIL = "fail"
REGRESSION = "regression"
NON_INFERIOR = "non-inferior"

# Root finding of the interval's ends: stop when the bracket is this narrow.
_TOL = 1e-12


def _check_alpha(alpha: float, split: float, trunc: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be within (0, 1), got {alpha!r}")
    if not 0.0 < split < 1.0:
        raise ValueError(f"split must be within (0, 1), got {split!r}")
    if not 0.0 < trunc < 1.0:
        raise ValueError(f"trunc must be within (0, 1), got {trunc!r}")


def _check_unit(name: str, value: float) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be within [0, 1], got {value!r}")
    return value


class _Bets:
    """The predictable plug-in empirical-Bernstein bets (before truncation), updated in O(1).

    ``next()`` gives (lam+, lam-) for the coming observation from the past ones only; ``observe``
    then folds the observation into the running mean and variance.
    """

    __slots__ = ("t", "total", "squares", "var", "k_pos", "k_neg")

    def __init__(self, alpha_pos: float, alpha_neg: float):
        self.t = 0
        self.total = 0.0
        self.squares = 0.0
        self.var = 0.25
        self.k_pos = 2.0 * math.log(1.0 / alpha_pos)
        self.k_neg = 2.0 * math.log(1.0 / alpha_neg)

    def next(self) -> tuple[float, float]:
        t = self.t + 1
        d = t * math.log1p(t) * self.var
        return math.sqrt(self.k_pos / d), math.sqrt(self.k_neg / d)

    def observe(self, x: float) -> None:
        self.t += 1
        self.total += x
        mu = min((0.5 + self.total) / (self.t + 1), 1.0)
        self.squares += (x - mu) * (x - mu)
        self.var = (0.25 + self.squares) / (self.t + 1)


def _root(f: Any, a: float, b: float, fa: float, fb: float) -> float:
    """Where the monotone, continuous f crosses 0 in [a, b] (fa, fb of opposite signs), to _TOL.

    Regula falsi with the Illinois modification (the stale end's value is halved when the same end
    moves twice), so both ends close in and convergence is superlinear; bisection when a step would
    leave the bracket.
    """
    side = 0
    for _ in range(200):
        if abs(b - a) <= _TOL:
            break
        c = (a * fb - b * fa) / (fb - fa) if fb != fa else 0.5 * (a + b)
        if not min(a, b) <= c <= max(a, b):
            c = 0.5 * (a + b)
        fc = f(c)
        if fc == 0.0:
            return c
        if (fc > 0.0) == (fb > 0.0):
            b, fb = c, fc
            if side == -1:
                fa *= 0.5
            side = -1
        else:
            a, fa = c, fc
            if side == 1:
                fb *= 0.5
            side = 1
    return 0.5 * (a + b)


class ConfidenceSequence:
    """Anytime-valid (1 - alpha) confidence sequence for the mean of observations in [0, 1].

    ``update(x)`` after each observation, in the order observed (O(1)); ``lower``, ``upper`` are
    the running intersection of the CS up to now, exact to 1e-12 (computed lazily: O(t) per
    observation the first time they are asked for); ``e_values(m)`` are the two capitals at m now;
    ``decide(threshold)`` is the first-crossing verdict for any threshold, from the whole history.
    """

    def __init__(self, alpha: float = 0.05, *, split: float = 0.5, trunc: float = 0.5):
        _check_alpha(alpha, split, trunc)
        self.alpha, self.split, self.trunc = alpha, split, trunc
        self.log_pass_level = math.log(1.0 / (alpha * split))        # K+ >= this rejects "mean <= m"
        self.log_fail_level = math.log(1.0 / (alpha * (1.0 - split)))  # K- >= this rejects "mean >= m"
        self._bets = _Bets(alpha * split, alpha * (1.0 - split))
        self._xs: list[float] = []
        self._lp: list[float] = []
        self._ln: list[float] = []
        self._bounds: list[tuple[float, float]] = []  # running intersection after each observation

    # --- data -------------------------------------------------------------------------------------

    def update(self, x: float) -> tuple[float, float]:
        """Add one observation; returns the (untruncated) bets (lam+, lam-) it was met with."""
        x = _check_unit("an observation", x)
        lam = self._bets.next()
        self._bets.observe(x)
        self._xs.append(x)
        self._lp.append(lam[0])
        self._ln.append(lam[1])
        return lam

    def extend(self, xs: Iterable[float]) -> ConfidenceSequence:
        for x in xs:
            self.update(x)
        return self

    @property
    def n(self) -> int:
        return len(self._xs)

    @property
    def mean(self) -> float | None:
        return sum(self._xs) / len(self._xs) if self._xs else None

    # --- capitals -----------------------------------------------------------------------------

    def _log_pos(self, m: float, t: int) -> float:
        cap = math.inf if m <= 0.0 else self.trunc / m
        xs, lps, log1p = self._xs, self._lp, math.log1p
        total = 0.0
        for i in range(t):
            b = lps[i]
            total += log1p((b if b < cap else cap) * (xs[i] - m))
        return total

    def _log_neg(self, m: float, t: int) -> float:
        cap = math.inf if m >= 1.0 else self.trunc / (1.0 - m)
        xs, lns, log1p = self._xs, self._ln, math.log1p
        total = 0.0
        for i in range(t):
            b = lns[i]
            total += log1p(-(b if b < cap else cap) * (xs[i] - m))
        return total

    def log_capitals(self, m: float, t: int | None = None) -> tuple[float, float]:
        """(log K+_t(m), log K-_t(m)) after the first ``t`` observations (all by default). O(t)."""
        m = _check_unit("m", m)
        t = self.n if t is None else t
        return self._log_pos(m, t), self._log_neg(m, t)

    def e_values(self, m: float) -> tuple[float, float]:
        """(K+(m), K-(m)) now: e-values against "mean <= m" and against "mean >= m"."""
        lp, ln = self.log_capitals(m)
        return math.exp(lp), math.exp(ln)

    # --- the interval -------------------------------------------------------------------------

    def _catch_up(self) -> None:
        lo, hi = self._bounds[-1] if self._bounds else (0.0, 1.0)
        for t in range(len(self._bounds) + 1, self.n + 1):
            lo = self._raise_lower(t, lo)
            hi = self._lower_the_upper(t, hi)
            self._bounds.append((lo, hi))

    def _raise_lower(self, t: int, lo: float) -> float:
        level = self.log_pass_level

        def f(m: float) -> float:
            return self._log_pos(m, t) - level

        f_lo = f(lo)
        if f_lo < 0.0:          # lo is not rejected now: the running maximum stays
            return lo
        f_one = f(1.0)          # K+(1) <= 1 < level: never rejected
        return _root(f, lo, 1.0, f_lo, f_one)

    def _lower_the_upper(self, t: int, hi: float) -> float:
        level = self.log_fail_level

        def g(m: float) -> float:
            return self._log_neg(m, t) - level

        g_hi = g(hi)
        if g_hi < 0.0:
            return hi
        g_zero = g(0.0)         # K-(0) <= 1 < level
        return _root(g, 0.0, hi, g_zero, g_hi)

    def bounds(self) -> tuple[float, float]:
        """(lower, upper) of the running intersection now; (0, 1) before any observation."""
        if not self._xs:
            return (0.0, 1.0)
        self._catch_up()
        return self._bounds[-1]

    @property
    def lower(self) -> float:
        return self.bounds()[0]

    @property
    def upper(self) -> float:
        return self.bounds()[1]

    def history(self) -> list[tuple[float, float]]:
        """The running-intersection (lower, upper) after each observation, for drawing the CS."""
        self._catch_up()
        return list(self._bounds)

    # --- decisions ----------------------------------------------------------------------------

    def decide(self, threshold: float) -> Decision:
        """The gate's verdict on these observations for ``threshold``, as :class:`SequentialGate` reaches it.

        O(n): replays the two capitals at ``threshold`` and stops at the first crossing.
        """
        threshold = _check_unit("threshold", threshold)
        c = self.trunc
        bp_cap = math.inf if threshold <= 0.0 else c / threshold
        bn_cap = math.inf if threshold >= 1.0 else c / (1.0 - threshold)
        lp = ln = 0.0
        for i, x in enumerate(self._xs):
            d = x - threshold
            lp += math.log1p(min(self._lp[i], bp_cap) * d)
            ln += math.log1p(-min(self._ln[i], bn_cap) * d)
            up, down = lp >= self.log_pass_level, ln >= self.log_fail_level
            if up or down:
                verdict = None if up and down else (PASS if up else FAIL)
                return Decision(verdict, i + 1, math.exp(lp), math.exp(ln), conflict=up and down)
        return Decision(None, None, math.exp(lp), math.exp(ln))


@dataclass(frozen=True)
class Decision:
    """A first-crossing verdict: ``verdict`` is "pass", "fail" or None (undecided).

    ``at`` is the number of observations when it was reached; ``e_pass`` / ``e_fail`` the two
    capitals at the threshold then (now, when undecided). ``conflict``: both crossed on the same
    observation (the CS became empty, an event of probability <= alpha): the sequential part then
    abstains for good and the fixed gate decides.
    """

    verdict: str | None
    at: int | None
    e_pass: float
    e_fail: float
    conflict: bool = False


class SequentialGate:
    """The sequential survival gate ``--min-survival RATE@TURN --sequential`` (see the module docstring).

    ``observe(outcome)`` for each episode in start order: True (survived TURN), False (failed before
    TURN) or None (censored: counted, left out). O(1) per outcome. It returns the decision once
    reached ("pass" / "fail"), else None; the decision is final: outcomes observed afterwards (episodes
    that were in flight) extend the confidence sequence for the report but do not change it, and
    ``e_pass`` / ``e_fail`` stay as they were at the decision (the e-values at that stopping time).

    ``verdict(fixed_passed)`` gives the run's verdict: the early decision when there is one, else the
    fixed gate's (the caller computes it as today and applies the error budget and canary to both).
    """

    def __init__(self, threshold: float, alpha: float = 0.05, *, split: float = 0.5, trunc: float = 0.5,
                 planned: int | None = None):
        self.threshold = _check_unit("threshold", threshold)
        self.cs = ConfidenceSequence(alpha, split=split, trunc=trunc)
        self.alpha, self.planned = alpha, planned
        c = trunc
        self._bp_cap = math.inf if threshold <= 0.0 else c / threshold
        self._bn_cap = math.inf if threshold >= 1.0 else c / (1.0 - threshold)
        self._pass_level, self._fail_level = self.cs.log_pass_level, self.cs.log_fail_level
        self._lp = self._ln = 0.0
        self.observed = 0
        self.censored = 0
        self.decision: str | None = None
        self.decided_after: int | None = None   # observed (uncensored) outcomes at the decision
        self.seen_at_decision: int | None = None  # outcomes incl. censored ones at the decision
        self.conflict = False
        self._e_at_decision: tuple[float, float] | None = None

    def observe(self, outcome: bool | float | None) -> str | None:
        if outcome is None:
            self.censored += 1
            return self.decision
        x = float(outcome)
        lam_pos, lam_neg = self.cs.update(x)
        self.observed += 1
        if self.decision is not None or self.conflict:
            return self.decision
        d = x - self.threshold
        self._lp += math.log1p((lam_pos if lam_pos < self._bp_cap else self._bp_cap) * d)
        self._ln += math.log1p(-(lam_neg if lam_neg < self._bn_cap else self._bn_cap) * d)
        up, down = self._lp >= self._pass_level, self._ln >= self._fail_level
        if up or down:
            if up and down:
                self.conflict = True
            else:
                self.decision = PASS if up else FAIL
                self.decided_after = self.observed
                self.seen_at_decision = self.observed + self.censored
            self._e_at_decision = (math.exp(self._lp), math.exp(self._ln))
        return self.decision

    @property
    def decided(self) -> bool:
        return self.decision is not None

    @property
    def e_pass(self) -> float:
        """K+(RATE): the evidence that survival is above RATE (an e-value at the stopping time)."""
        return self._e_at_decision[0] if self._e_at_decision else math.exp(self._lp)

    @property
    def e_fail(self) -> float:
        """K-(RATE): the evidence that survival is below RATE."""
        return self._e_at_decision[1] if self._e_at_decision else math.exp(self._ln)

    @property
    def lower(self) -> float:
        return self.cs.lower

    @property
    def upper(self) -> float:
        return self.cs.upper

    def verdict(self, fixed_passed: bool) -> GateVerdict:
        """The run's verdict: the early decision if any, else ``fixed_passed`` (the fixed gate's)."""
        if self.decision is not None:
            return GateVerdict(self.decision == PASS, "sequential", self.decided_after, self.observed,
                               self.censored, self.planned)
        return GateVerdict(bool(fixed_passed), "fixed", None, self.observed, self.censored, self.planned)

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.cs.bounds()
        return {"threshold": self.threshold, "alpha": self.alpha, "split": self.cs.split, "trunc": self.cs.trunc,
                "decision": self.decision, "decided_after": self.decided_after,
                "seen_at_decision": self.seen_at_decision, "observed": self.observed,
                "censored": self.censored, "planned": self.planned, "conflict": self.conflict,
                "e_pass": self.e_pass, "e_fail": self.e_fail, "lower": lo, "upper": hi}


@dataclass(frozen=True)
class GateVerdict:
    passed: bool
    by: str                   # "sequential" (decided early) or "fixed" (ran to the end)
    decided_after: int | None  # observed outcomes when the sequential gate decided
    observed: int
    censored: int
    planned: int | None = None

    def text(self) -> str:
        if self.by == "sequential":
            of = f" of {self.planned}" if self.planned is not None else ""
            return f"decided after {self.decided_after}{of} episodes"
        return "undecided by the sequential gate: decided as the fixed gate"


def sequential_gate(outcomes: Iterable[bool | float | None], threshold: float, alpha: float = 0.05,
                    **kw: Any) -> SequentialGate:
    """A :class:`SequentialGate` fed ``outcomes`` in order (it keeps observing after a decision)."""
    gate = SequentialGate(threshold, alpha, **kw)
    for outcome in outcomes:
        gate.observe(outcome)
    return gate


# --- episode order ----------------------------------------------------------------------------------

Job = tuple[Hashable, int]


def seeded_order(jobs: Iterable[Job], seed: int | str) -> list[Job]:
    """A reproducible random order of (spec_id, repeat) jobs: the order the runner starts episodes in.

    The jobs are first sorted by (str(spec_id), repeat), so the order depends only on the set of jobs
    and the seed, not on the order specs were found in; then shuffled (Fisher-Yates) with draws of
    ``random.Random(seed).random()``, the one part of ``random`` whose output Python promises to keep
    across versions (``shuffle`` itself is not so promised), so a recorded seed replays the same order.
    A str seed is hashed with SHA-512 by ``random``: stable across processes and PYTHONHASHSEED.
    """
    if not isinstance(seed, (int, str)) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int or a str, got {type(seed).__name__}")
    ordered = sorted(jobs, key=lambda job: (str(job[0]), job[1]))
    if len(set(ordered)) != len(ordered):
        raise ValueError("a (spec, repeat) job is listed twice")
    draw = random.Random(seed).random
    for i in range(len(ordered) - 1, 0, -1):
        j = int(draw() * (i + 1))
        ordered[i], ordered[j] = ordered[j], ordered[i]
    return ordered


def shard_slice(order: Sequence[Job], index: int, count: int) -> list[Job]:
    """Shard ``index`` of ``count`` (1-based) of a seeded order: positions index-1, index-1+count, ...

    Each shard is then a uniformly random subset of the jobs in a uniformly random order, so its
    own gate tests the same survival rate as the whole run (see docs/gates.md, shards).
    """
    if not 1 <= index <= count:
        raise ValueError(f"shard {index}/{count}: expected 1 <= index <= count")
    return list(order[index - 1::count])


class StartOrder:
    """Releases outcomes in the order episodes were started, whatever order they finish in.

    ``add(job, outcome)`` records one finished episode and returns the outcomes that can now be fed
    to the gate, in start order: those of the longest started prefix that has finished. Finish order
    depends on the outcome (a conflict at turn 2 ends before a survivor reaches turn 20), so feeding
    outcomes as they finish would bias the early evidence; start order does not depend on outcomes.
    """

    def __init__(self, order: Iterable[Job]):
        self._order = list(order)
        self._index = {job: i for i, job in enumerate(self._order)}
        if len(self._index) != len(self._order):
            raise ValueError("the order lists a job twice")
        self._finished: dict[int, Any] = {}
        self._next = 0

    def add(self, job: Job, outcome: Any) -> list[tuple[Job, Any]]:
        i = self._index[job]
        if i < self._next or i in self._finished:
            raise ValueError(f"job {job!r} finished twice")
        self._finished[i] = outcome
        ready = []
        while self._next in self._finished:
            ready.append((self._order[self._next], self._finished.pop(self._next)))
            self._next += 1
        return ready

    @property
    def released(self) -> int:
        return self._next

    @property
    def waiting(self) -> int:
        """Finished episodes held back until an earlier-started one finishes."""
        return len(self._finished)


# --- paired regression check ------------------------------------------------------------------------


class PairedSequentialTest:
    """Sequential paired test for ``ncp compare BASE NEW --sequential`` (see the module docstring).

    ``observe(base_survived, new_survived)`` per (spec, repeat) pair in start order; a pair with
    either side None (censored) is skipped and counted. Returns "regression" (the drop in survival
    is certainly above ``margin``), "non-inferior" (certainly below it) or None; final once reached.
    """

    def __init__(self, margin: float = 0.0, alpha: float = 0.05, *, split: float = 0.5, trunc: float = 0.5):
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"margin must be within [0, 1), got {margin!r}")
        self.margin = margin
        self._gate = SequentialGate((1.0 + margin) / 2.0, alpha, split=split, trunc=trunc)
        self.alpha = alpha
        self.skipped = 0
        self.base_only = 0   # survived in base, failed in new: b of McNemar
        self.new_only = 0    # failed in base, survived in new: c
        self.both = 0
        self.neither = 0

    def observe(self, base_survived: bool | None, new_survived: bool | None) -> str | None:
        if base_survived is None or new_survived is None:
            self.skipped += 1
            return self.decision
        b, n = bool(base_survived), bool(new_survived)
        if b and not n:
            self.base_only += 1
        elif n and not b:
            self.new_only += 1
        elif b:
            self.both += 1
        else:
            self.neither += 1
        self._gate.observe((1.0 + int(b) - int(n)) / 2.0)
        return self.decision

    @property
    def decision(self) -> str | None:
        d = self._gate.decision
        return None if d is None else (REGRESSION if d == PASS else NON_INFERIOR)

    @property
    def decided_after(self) -> int | None:
        return self._gate.decided_after

    @property
    def pairs(self) -> int:
        return self._gate.observed

    @property
    def e_regression(self) -> float:
        """Evidence against "drop <= margin" (an e-value at the stopping time)."""
        return self._gate.e_pass

    @property
    def e_non_inferior(self) -> float:
        """Evidence against "drop >= margin"."""
        return self._gate.e_fail

    def drop_bounds(self) -> tuple[float, float]:
        """Anytime-valid (1 - alpha) bounds of survival(base) - survival(new)."""
        lo, hi = self._gate.cs.bounds()
        return (2.0 * lo - 1.0, 2.0 * hi - 1.0)

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.drop_bounds()
        return {"margin": self.margin, "alpha": self.alpha, "decision": self.decision,
                "decided_after": self.decided_after, "pairs": self.pairs, "skipped": self.skipped,
                "base_only": self.base_only, "new_only": self.new_only,
                "e_regression": self.e_regression, "e_non_inferior": self.e_non_inferior,
                "drop_lower": lo, "drop_upper": hi}


# --- shards -----------------------------------------------------------------------------------------


def shard_alpha(alpha: float, count: int) -> float:
    """The alpha each of ``count`` shards runs its own :class:`SequentialGate` at: alpha / count.

    A shard that decides on its own then has an e-value >= count / (alpha * split), so the mean
    over the shards (:func:`merge_shards`) reaches 1 / (alpha * split) from that shard alone.
    """
    if count < 1:
        raise ValueError(f"shard count must be >= 1, got {count}")
    return alpha / count


def combine_e_values(values: Sequence[float], method: str = "mean") -> float:
    """Merge the shards' e-values for one null hypothesis.

    ``mean``: valid whatever the dependence between the shards (E of a mean of e-values is <= 1).
    ``product``: valid only when the shards are independent under the null (disjoint episodes of
    i.i.d. outcomes); larger when several shards carry some evidence. See docs/gates.md.
    """
    if not values:
        raise ValueError("no e-values to combine")
    if any(v < 0 or math.isnan(v) for v in values):
        raise ValueError("e-values must be >= 0")
    if method == "mean":
        return math.fsum(values) / len(values)
    if method == "product":
        return math.exp(math.fsum(math.log(v) if v > 0 else -math.inf for v in values))
    raise ValueError(f"unknown method {method!r}: expected 'mean' or 'product'")


@dataclass(frozen=True)
class MergedDecision:
    verdict: str | None   # "pass", "fail" or None (the merged run decides as the fixed gate)
    e_pass: float
    e_fail: float
    conflict: bool = False


def merge_shards(e_pass: Sequence[float], e_fail: Sequence[float], alpha: float = 0.05, *,
                 split: float = 0.5, method: str = "mean") -> MergedDecision:
    """The merged sequential verdict from each shard's (e_pass, e_fail) at its stopping time.

    Pass when the combined e_pass >= 1/(alpha * split), fail when the combined e_fail >=
    1/(alpha * (1 - split)); both (shards that decided opposite ways) or neither: None, and the
    merged run decides as the fixed gate does on all its episodes.
    """
    _check_alpha(alpha, split, 0.5)
    if len(e_pass) != len(e_fail):
        raise ValueError("one e_pass and one e_fail per shard")
    ep, ef = combine_e_values(e_pass, method), combine_e_values(e_fail, method)
    up, down = ep >= 1.0 / (alpha * split), ef >= 1.0 / (alpha * (1.0 - split))
    if up and down:
        return MergedDecision(None, ep, ef, conflict=True)
    return MergedDecision(PASS if up else FAIL if down else None, ep, ef)
