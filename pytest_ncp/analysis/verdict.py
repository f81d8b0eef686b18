"""The run's verdict, decided once for ``ncp run`` and the pytest session alike.

:func:`decide` takes what a run produced (its episode records, the episodes it set out to finish, whether it
was interrupted) and what it was asked to check (the survival gate, the error budget, the auditor canaries,
a baseline comparison, problems the host already found) and returns a :class:`Verdict`: one decision per
part, and the exit code. It prints nothing: ``report/verdict.py`` turns a Verdict into the lines that
explain it, and the front ends print those lines and return ``exit_code``.

The parts, and the rule each applies (the stricter of the two front ends' old rules wherever they differed):

- **completeness**: an interrupted run, or one with an expected episode that never reported (a dead worker,
  ``pytest -x``), cannot be judged: undecided, exit 1. A gate never passes on part of a run.
- **error budget**: unknown outcomes (auditor, model, player errors) of *every* recorded episode, whichever
  tests were selected, against ``--max-error-rate``; exceeded: exit 6 (the run proves nothing either way),
  which wins over every other code.
- **cost cap** (with ``--max-cost``): episodes the cap cut short (termination ``budget``) leave the run
  undecided, exit 7, which wins over 1: the run is not the one asked for (raise the cap). Cut episodes are
  censored, so a survival gate they leave with too few episodes observed refuses to decide.
- **survival gate** (with ``--min-survival``): ``Gate.check`` (measurable, budget held, >= RATE); undecided
  when the run is incomplete or survival@T is not measurable. The sequential gate
  (``analysis/sequential.py``) is one more input: when given and decided early, its decision is the gate's.
  When the run stopped early (``early``: ``analysis.sequential_run.EarlyStop``) on another check's decision
  (a certain regression) before the gate decided, the gate is undecided: its fixed rule over the episodes
  played would judge part of the run. The unstarted episodes of a run that stopped early are not expected
  (the host leaves them out of ``expected``): such a run is complete.
- **narrator errors**: without a gate, a narrator that raised, timed out or answered nothing fails the run
  (a crash is a bug, not a measurement); with a gate they are counted as failures in survival.
- **canaries** (with ``--canaries``): the auditor must catch and pass enough known answers; canaries that
  could not run, or did not finish, fail too.
- **baseline** (with ``--ncp-baseline``): a significant drop fails; a comparison that cannot be made, or
  that has nothing measurable, is undecided, never a pass. With ``--ncp-sequential`` the paired sequential
  check decides first when it decided: a certain regression fails, a certain non-inferiority passes; undecided
  when the run stopped early on the gate's decision before it decided.
- **problems**: what the host reported (spec files that did not load, workers that died): exit 1.

Exit code: 6 when the error budget is exceeded, else 7 when the cost cap cut episodes short, else 1 when any
part failed or could not decide, else 0.
Pure: the inputs are plain records and the analysis layer's own value types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Sequence

from ..core.exit_codes import EXIT_COST_CAP, EXIT_ERROR_BUDGET, EXIT_FAILED, EXIT_OK
from ..core.endings import Ending
from .metrics import BudgetVerdict, Gate, GateVerdict, error_budget

if TYPE_CHECKING:
    from ..core.records import EpisodeRecord
    from .compare import Comparison
    from .sequential import GateVerdict as SequentialVerdict
    from .sequential import PairedSequentialTest, SequentialGate
    from .sequential_run import EarlyStop

Decision = Literal["passed", "failed", "undecided"]


@dataclass(frozen=True)
class Completeness:
    """Did every episode the run set out to finish report, without an interruption?"""

    decision: Decision
    expected: int
    finished: int
    missing: tuple[str, ...] = ()  # episode keys (spec--rN) that never reported
    interrupted: bool = False


@dataclass(frozen=True)
class Budget:
    decision: Decision
    budget: BudgetVerdict


@dataclass(frozen=True)
class CostCap:
    """``--max-cost``: how many episodes the cap cut short, whether it stopped the canaries, and what the run's
    episodes spent."""

    decision: Decision
    cap: float
    cut: int
    spent: float
    canaries_cut: bool = False

    @property
    def reached(self) -> bool:
        return bool(self.cut or self.canaries_cut)


@dataclass(frozen=True)
class SurvivalGate:
    decision: Decision
    gate: Gate
    fixed: GateVerdict                      # the fixed gate over the recorded episodes
    sequential: SequentialVerdict | None = None  # set when a sequential gate was given
    incomplete: bool = False                # undecided because the run is incomplete, whatever ``fixed`` says
    cut: int = 0                            # episodes the cost cap cut short (censored: fewer observed)
    early: EarlyStop | None = None          # how a sequential run stopped (or did not)
    cut_short: bool = False                 # undecided: another check stopped the run before this gate decided

    @property
    def by(self) -> str:
        """``sequential`` when the sequential gate decided early, else ``fixed``."""
        return self.sequential.by if self.sequential is not None else "fixed"


@dataclass(frozen=True)
class NarratorErrors:
    decision: Decision
    count: int


@dataclass(frozen=True)
class CanaryResult:
    """What the host knows of the auditor canaries: their summary, or why there is none."""

    summary: Mapping[str, Any] | None = None  # calibration.audit.canary_summary (results.json "canaries")
    error: str | None = None                  # they could not start or run
    cut_by: str | None = None                 # "max-cost": the cost cap refused their calls (the budget's, not the auditor's)


@dataclass(frozen=True)
class Canaries:
    decision: Decision
    result: CanaryResult


@dataclass(frozen=True)
class BaselineResult:
    """What the host knows of the baseline comparison (``--ncp-baseline``)."""

    path: str
    comparison: Comparison | None = None
    error: str | None = None  # the baseline could not be read or compared
    sequential: PairedSequentialTest | None = None  # with --ncp-sequential: the paired check, fed in start order


@dataclass(frozen=True)
class Baseline:
    decision: Decision
    result: BaselineResult


@dataclass(frozen=True)
class Problems:
    decision: Decision
    problems: tuple[str, ...]


Part = Completeness | Budget | CostCap | SurvivalGate | NarratorErrors | Canaries | Baseline | Problems


@dataclass(frozen=True)
class Verdict:
    """Each part's decision, in the order they are explained, and the run's exit code."""

    parts: tuple[Part, ...]
    exit_code: int
    episodes: int = 0

    @property
    def outcome(self) -> Decision:
        """``passed`` (exit 0), ``failed`` (a part failed), or ``undecided`` (none failed, but the run
        proves nothing: incomplete, unmeasurable, over the error budget)."""
        if self.exit_code == EXIT_OK:
            return "passed"
        decisions = {p.decision for p in self.parts if not isinstance(p, Budget)}
        return "failed" if "failed" in decisions else "undecided"

    def part(self, kind: type[Part]) -> Part | None:
        """The part of that type, if the run had one."""
        return next((p for p in self.parts if isinstance(p, kind)), None)

    @property
    def completeness(self) -> Completeness:
        part = self.part(Completeness)
        assert isinstance(part, Completeness)  # always decided first
        return part

    @property
    def budget(self) -> Budget:
        part = self.part(Budget)
        assert isinstance(part, Budget)
        return part

    @property
    def gate(self) -> SurvivalGate | None:
        part = self.part(SurvivalGate)
        return part if isinstance(part, SurvivalGate) else None


def decide(records: Sequence[EpisodeRecord], *, gate: Gate | None = None, max_error_rate: float = 0.0,
           expected: Iterable[str] | None = None, interrupted: bool = False,
           canaries: CanaryResult | None = None, baseline: BaselineResult | None = None,
           sequential: SequentialGate | None = None, early: EarlyStop | None = None,
           problems: Sequence[str] = (), max_cost: float | None = None) -> Verdict:
    """The run's verdict (module docstring): each part's decision, then the exit code.

    ``records`` are the run's episode records (results.json ``episodes``), every one, whichever tests a
    host selected; ``expected`` the episode keys it set out to finish (None: the records are all of
    them). ``canaries`` / ``baseline`` are None when not asked for. ``sequential`` is the
    ``SequentialGate`` fed with the run's outcomes, when the gate is sequential, and ``early`` how the run
    stopped (``SequentialRun.summary()``). ``max_cost`` is the cost cap (``--max-cost``), None without one.
    """
    records = list(records)
    finished = {e.key for e in records}
    wanted = sorted(set(expected)) if expected is not None else sorted(finished)
    missing = tuple(k for k in wanted if k not in finished)
    complete = not interrupted and not missing
    parts: list[Part] = [Completeness("passed" if complete else "undecided", len(wanted),
                                      len(finished & set(wanted)) if expected is not None else len(finished),
                                      missing, interrupted)]
    budget = error_budget(records, max_error_rate)
    parts.append(Budget("failed" if budget.exceeded else "passed", budget))
    cut = sum(e.ending is Ending.BUDGET and e.cut_by in (None, "max-cost") for e in records)
    if max_cost is not None:
        spent = sum(e.cost_usd + (e.speculative.cost_usd if e.speculative else 0.0) for e in records)
        canaries_cut = canaries is not None and canaries.cut_by is not None
        parts.append(CostCap("undecided" if cut or canaries_cut else "passed", max_cost, cut, spent, canaries_cut))
    if gate is not None:
        parts.append(_gate(gate, records, max_error_rate, complete, sequential, early, cut))
    else:
        count = sum(e.ending is Ending.NARRATOR_ERROR for e in records)
        parts.append(NarratorErrors("failed" if count else "passed", count))
    if canaries is not None:
        parts.append(Canaries(_canary_decision(canaries), canaries))
    if baseline is not None:
        parts.append(Baseline(_baseline_decision(baseline, bool(records), early), baseline))
    if problems:
        parts.append(Problems("failed", tuple(problems)))
    if budget.exceeded:
        code = EXIT_ERROR_BUDGET
    elif max_cost is not None and (cut or (canaries is not None and canaries.cut_by is not None)):
        code = EXIT_COST_CAP
    elif any(p.decision != "passed" for p in parts):
        code = EXIT_FAILED
    else:
        code = EXIT_OK
    return Verdict(tuple(parts), code, episodes=len(records))


def _gate(gate: Gate, records: list[EpisodeRecord], max_error_rate: float, complete: bool,
          sequential: SequentialGate | None, stop: EarlyStop | None, cut: int = 0) -> SurvivalGate:
    fixed = gate.check(records, max_error_rate)
    early = sequential.verdict(fixed.passed) if sequential is not None else None
    if not complete:
        return SurvivalGate("undecided", gate, fixed, early, incomplete=True, cut=cut, early=stop)
    if early is not None and early.by == "sequential":
        # Anytime-valid: an early decision holds however often the gate looked (analysis/sequential.py).
        # The error budget still applies (its own part, exit 6).
        return SurvivalGate("passed" if early.passed else "failed", gate, fixed, early, cut=cut, early=stop)
    if stop is not None and stop.stopped:
        return SurvivalGate("undecided", gate, fixed, early, cut=cut, early=stop, cut_short=True)
    if fixed.passed:
        return SurvivalGate("passed", gate, fixed, early, cut=cut, early=stop)
    return SurvivalGate("failed" if fixed.decided else "undecided", gate, fixed, early, cut=cut, early=stop)


def _canary_decision(c: CanaryResult) -> Decision:
    if c.cut_by is not None:
        return "undecided"  # the cost cap stopped them: the run is not the one asked for (exit 7), nobody's doubt
    if c.error is not None:
        return "failed"  # the auditor could not be checked: its verdicts cannot be trusted either
    if c.summary is None:
        return "undecided"  # asked for, never finished (the session was interrupted)
    return "passed" if c.summary.get("ok") else "failed"


def _baseline_decision(b: BaselineResult, ran: bool, stop: EarlyStop | None = None) -> Decision:
    if b.error is not None:
        return "failed"
    if b.sequential is not None and b.sequential.decision is not None:
        # Anytime-valid, as the sequential gate (analysis/sequential.py, "Paired regression check").
        return "failed" if b.sequential.decision == "regression" else "passed"
    if b.sequential is not None and stop is not None and stop.stopped:
        return "undecided"  # the gate stopped the run first: the fixed comparison would judge part of it
    if b.comparison is None or not ran:
        return "undecided"  # nothing of this run to compare: never "no regression"
    if not b.comparison.measurable:
        return "undecided"
    if b.comparison.regression:
        return "failed"
    return "undecided" if b.comparison.underpowered else "passed"  # too few pairs: no evidence of no regression


__all__ = ["Baseline", "BaselineResult", "Budget", "CanaryResult", "Canaries", "Completeness", "CostCap", "Decision",
           "NarratorErrors", "Part", "Problems", "SurvivalGate", "Verdict", "decide"]
