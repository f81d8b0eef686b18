"""The lines that explain a run's verdict (``analysis.verdict.Verdict``), for ``ncp run`` and the pytest summary.

The verdict decides; this module only words it, so the CLI and the session say the same thing for the same
decision. ``name`` is what the run is called in the sentences: ``run`` for ``ncp run``, ``session`` for pytest.
"""

from __future__ import annotations

from ..analysis.metrics import BudgetVerdict, GateVerdict
from ..analysis.verdict import (
    Baseline, Budget, Canaries, Completeness, NarratorErrors, Part, Problems, SurvivalGate, Verdict,
)


def budget_line(b: BudgetVerdict, name: str = "run") -> str:
    verdict = "EXCEEDED" if b.exceeded else "ok"
    return (f"ncp error budget {verdict}: {b.unknown} of {b.episodes} episode(s) of the {name} could not "
            f"be judged (auditor, model or player errors, player faults, split verdicts: {b.rate:.1%}) "
            f"{'>' if b.exceeded else '<='} allowed {b.max_rate:.1%} (--max-error-rate)")


def gate_line(v: GateVerdict, name: str = "run") -> str:
    """The fixed survival gate's sentence: PASSED, FAILED, or FAILED: cannot decide (and why)."""
    t = v.gate.turn
    if v.budget.exceeded:
        b = v.budget
        return (f"ncp survival gate FAILED: cannot decide: {b.unknown} of {b.episodes} episode(s) could not be "
                f"judged ({b.rate:.1%} > error budget {b.max_rate:.1%}); see the errors above")
    if v.point.episodes == 0:
        return (f"ncp survival gate FAILED: cannot decide: no episode ran in this {name}, so survival@{t} cannot "
                "be measured")
    if not v.point.measurable:
        return (f"ncp survival gate FAILED: cannot decide: survival@{t} is {v.point.text()}; too few "
                f"episodes were observed up to turn {t} (run more turns, or gate on an earlier turn)")
    errors = f", {v.narrator_errors} narrator error(s) counted as failures" if v.narrator_errors else ""
    verdict = "PASSED" if v.passed else "FAILED"
    return (f"ncp survival gate {verdict}: survival@{t} = {v.point.text()}, {v.point.observed} of "
            f"{v.point.episodes} episode(s) observed to turn {t}{errors}; "
            f"{'>=' if v.passed else '<'} required {v.gate.rate:.1%}")


def _completeness(c: Completeness, name: str) -> list[str]:
    if c.decision == "passed":
        return []
    why = "it was interrupted" if c.interrupted else (
        f"{len(c.missing)} never reported (first: {c.missing[0]})" if c.missing else "it did not end")
    return [f"ncp: INCOMPLETE {name}: {c.finished} of {c.expected} expected episode(s) finished; {why}. Nothing "
            f"is decided on part of a {name}: a missing episode may be the failing one"]


def _gate(g: SurvivalGate, name: str) -> list[str]:
    if g.incomplete:
        return [f"ncp survival gate FAILED: cannot decide: the {name} is incomplete (see above); survival@"
                f"{g.gate.turn} over the finished episodes would judge part of it"]
    if g.sequential is not None and g.by == "sequential":
        verdict = "PASSED" if g.decision == "passed" else "FAILED"
        return [f"ncp survival gate {verdict} (sequential): {g.sequential.text()}; survival@{g.gate.turn} "
                f"{'>=' if g.decision == 'passed' else '<'} {g.gate.rate:.1%} at the gate's confidence"]
    return [gate_line(g.fixed, name)]


def _canaries(c: Canaries) -> list[str]:
    from ..calibration.audit import canary_line, canary_verdict

    r = c.result
    if r.error is not None:
        return [r.error, "canary gate FAILED: the AUDITOR, not the narrator, is in doubt"]
    if r.summary is None:
        return ["canary gate FAILED: cannot decide: the auditor canaries did not finish"]
    return [canary_line(dict(r.summary)), canary_verdict(dict(r.summary))]


def _baseline(b: Baseline, name: str) -> list[str]:
    r = b.result
    if r.error is not None:
        return [r.error]
    if r.comparison is None:
        return [f"ncp baseline {r.path}: cannot decide: no episode of this {name} to compare"]
    return [f"ncp baseline {r.path}:", *r.comparison.lines()]


def part_lines(part: Part, name: str = "run") -> list[str]:
    """The lines of one part (none when there is nothing worth saying: a part that passed quietly)."""
    if isinstance(part, Completeness):
        return _completeness(part, name)
    if isinstance(part, Budget):
        b = part.budget
        return [budget_line(b, name)] if b.unknown or b.exceeded else []
    if isinstance(part, SurvivalGate):
        return _gate(part, name)
    if isinstance(part, NarratorErrors):
        return [] if part.decision == "passed" else [
            f"ncp: {part.count} episode(s) ended in a narrator error (raised, timed out or answered nothing)"]
    if isinstance(part, Canaries):
        return _canaries(part)
    if isinstance(part, Baseline):
        return _baseline(part, name)
    if isinstance(part, Problems):
        return [f"ncp: {len(part.problems)} problem(s) above (spec files that did not load, workers that died): "
                f"this is not the whole {name} that was asked for"]
    raise TypeError(f"unknown verdict part {part!r}")  # pragma: no cover - Part is a closed union


def verdict_blocks(verdict: Verdict, name: str = "run") -> list[list[str]]:
    """One block of lines per part that has something to say, in the verdict's order."""
    return [lines for lines in (part_lines(p, name) for p in verdict.parts) if lines]


def verdict_lines(verdict: Verdict, name: str = "run") -> list[str]:
    return [line for block in verdict_blocks(verdict, name) for line in block]
