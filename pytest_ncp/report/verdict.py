"""The lines that explain a run's verdict (``analysis.verdict.Verdict``), for ``ncp run`` and the pytest summary.

The verdict decides; this module only words it, so the CLI and the session say the same thing for the same
decision. ``name`` is what the run is called in the sentences: ``run`` for ``ncp run``, ``session`` for pytest.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any, Mapping

from ..analysis.metrics import BudgetVerdict, GateVerdict
from ..core.options import NCP, PYTEST
from ..analysis.verdict import (
    Baseline, Budget, Canaries, Completeness, CostCap, NarratorErrors, Part, Problems, SurvivalGate, Verdict,
)

if TYPE_CHECKING:
    from ..analysis.results import SequentialRecord
    from ..analysis.sequential_run import EarlyStop


def _flag(option: str, name: str) -> str:
    """An option as the front end that ran the ``name`` spells it: ``--ncp-max-cost`` for a pytest session."""
    return (PYTEST if name == "session" else NCP).flag(option)


def budget_line(b: BudgetVerdict, name: str = "run") -> str:
    verdict = "EXCEEDED" if b.exceeded else "ok"
    over = b.rate > b.max_rate + 1e-12
    line = (f"ncp error budget {verdict}: {b.unknown} of {b.episodes} episode(s) of the {name} could not "
            f"be judged (auditor, model or player errors, player faults, split verdicts: {b.rate:.1%}) "
            f"{'>' if over else '<='} allowed {b.max_rate:.1%} ({_flag('max-error-rate', name)})")
    if b.vanished:
        specs = ", ".join(f"{spec} ({n} of {k})" for spec, n, k in b.vanished)
        line += (f"; and no spec may lose more than half its episodes to unknown outcomes, which would take it out "
                 f"of the gate: {specs}")
    return line


def cost_cap_line(c: CostCap, name: str = "run") -> str:
    if not c.reached:
        return (f"ncp cost cap ok: the {name}'s episodes spent ${c.spent:.4f} of ${c.cap:.4f} "
                f"({_flag('max-cost', name)})")
    what = " and ".join(x for x in (f"{c.cut} episode(s) were cut short (budget: censored, never narrator failures)"
                                    if c.cut else "", "the auditor canaries could not finish" if c.canaries_cut
                                    else "") if x)
    return (f"ncp cost cap REACHED: ${c.spent:.4f} spent of ${c.cap:.4f} ({_flag('max-cost', name)}); {what}, so "
            f"the {name} is "
            "not the one asked for: raise the cap to finish them")


def gate_line(v: GateVerdict, name: str = "run", cut: int = 0) -> str:
    """The fixed survival gate's sentence: PASSED, FAILED, or FAILED: cannot decide (and why)."""
    t = v.gate.turn
    if v.budget.exceeded:
        b = v.budget
        if b.vanished and b.rate <= b.max_rate + 1e-12:
            specs = ", ".join(spec for spec, _, _ in b.vanished)
            return (f"ncp survival gate FAILED: cannot decide: spec(s) {specs} lost more than half their episodes "
                    "to unknown outcomes; see the errors above")
        return (f"ncp survival gate FAILED: cannot decide: {b.unknown} of {b.episodes} episode(s) could not be "
                f"judged ({b.rate:.1%} > error budget {b.max_rate:.1%}); see the errors above")
    if v.point.episodes == 0:
        return (f"ncp survival gate FAILED: cannot decide: no episode ran in this {name}, so survival@{t} cannot "
                "be measured")
    if not v.point.measurable:
        why = (f"the cost cap cut {cut} episode(s) short (raise {_flag('max-cost', name)})" if cut else
               "run more turns, or gate on an earlier turn")
        return (f"ncp survival gate FAILED: cannot decide: survival@{t} is {v.point.text()}; too few "
                f"episodes were observed up to turn {t} ({why})")
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
    stop = [stop_line(g.early, name)] if g.early is not None and g.early.stopped else []
    if g.sequential is not None and g.by == "sequential":
        verdict = "PASSED" if g.decision == "passed" else "FAILED"
        when = g.early.text() if g.early is not None and g.early.stopped else g.sequential.text()
        return [f"ncp survival gate {verdict} (sequential): {when}; survival@{g.gate.turn} "
                f"{'>=' if g.decision == 'passed' else '<'} {g.gate.rate:.1%} at the gate's confidence", *stop]
    if g.cut_short and g.early is not None:
        return [f"ncp survival gate FAILED: cannot decide: the {name} stopped early when the baseline check "
                f"decided ({g.early.text()}), before the sequential gate did; survival@{g.gate.turn} over the "
                "episodes played would judge part of it", *stop]
    if g.sequential is not None:
        planned = f" {g.sequential.planned}" if g.sequential.planned is not None else ""
        return [f"ncp sequential gate: undecided after all{planned} episodes (survival@{g.gate.turn} could still be "
                f"on either side of {g.gate.rate:.1%}): the fixed gate decides", gate_line(g.fixed, name, g.cut)]
    return [gate_line(g.fixed, name, g.cut)]


def merged_sequential_line(record: SequentialRecord) -> str:
    """``ncp merge`` of sequential shards: their merged decision (the mean of their e-values)."""
    m = record.merged
    if m is None:
        return ""
    verdict = {"pass": "PASSED", "fail": "FAILED"}.get(m.decision or "", "undecided: the fixed gate decides on the "
                                                                         "merged episodes")
    decided = ", ".join(f"{s.get('decision') or 'undecided'}" + (f" after {s['decided_after']} of {s['planned']}"
                                                                 if s.get("decided_after") else "")
                        for s in m.shards)
    return (f"ncp sequential gate over {record.shards} shard(s) (mean of their e-values): {verdict}; e_pass "
            f"{m.e_pass:.3g}, e_fail {m.e_fail:.3g} against 2/alpha = {2 / record.run_alpha:g}; shards: {decided}")


def stopped_line(e: EarlyStop, cancel: bool = False) -> str:
    """The progress line at the moment a sequential decision stops the run."""
    return (f"ncp sequential: {e.text()} ({e.stopped_by}): no new episode starts; those in flight "
            + ("are cancelled at their next turn" if cancel else "finish"))


def stop_line(e: EarlyStop, name: str = "run") -> str:
    """What a run that stopped early left out: ``ncp sequential: the run stopped early (gate) ...``."""
    cancelled = f", {e.cancelled} cancelled in flight (censored)" if e.cancelled else ""
    skipped = "; their tests are reported as skipped" if name == "session" and e.unstarted else ""
    return (f"ncp sequential: the {name} stopped early ({e.stopped_by}, {e.text()}): {e.unstarted} episode(s) "
            f"never started{cancelled}{skipped}")


def _canaries(c: Canaries) -> list[str]:
    from ..calibration.audit import canary_line, canary_verdict

    r = c.result
    if r.cut_by is not None:
        return [f"canary gate: cannot decide: the cost cap (--{r.cut_by}) refused the canaries' calls; {r.error}"]
    if r.error is not None:
        return [r.error, "canary gate FAILED: the AUDITOR, not the narrator, is in doubt"]
    if r.summary is None:
        return ["canary gate FAILED: cannot decide: the auditor canaries did not finish"]
    return [canary_line(dict(r.summary)), canary_verdict(dict(r.summary))]


def _baseline(b: Baseline, name: str) -> list[str]:
    r = b.result
    if r.error is not None:
        return [r.error]
    paired = r.sequential
    if paired is not None and paired.decision is not None:
        lo, hi = paired.drop_bounds()
        said = (f"the drop in survival is certainly above {paired.margin:.1%}" if paired.decision == "regression"
                else f"any drop in survival is certainly below {paired.margin:.1%}" if paired.margin > 0
                else "the new run is certainly better")
        head = (f"ncp baseline {r.path} (sequential): {paired.decision.upper()} decided after {paired.decided_after} "
                f"pair(s): {said} (anytime-valid bounds of the drop {lo:+.1%} to {hi:+.1%}, alpha "
                f"{paired.alpha:g})")
        return [head, *(r.comparison.lines() if r.comparison is not None else [])]
    if paired is not None and b.decision == "undecided" and r.comparison is not None and r.comparison.measurable:
        return [f"ncp baseline {r.path}: cannot decide: the {name} stopped early when the sequential gate decided, "
                "before the paired check did; the comparison below judges part of it", *r.comparison.lines()]
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
    if isinstance(part, CostCap):
        return [cost_cap_line(part, name)]
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


# --- the verdict as data: results.json ``verdict``, the pytest items ncp::gate[KIND] ------------------------------

PART_KINDS: dict[type, str] = {Completeness: "complete", Budget: "error-budget", CostCap: "cost-cap",
                               SurvivalGate: "survival", NarratorErrors: "narrator-errors", Canaries: "canaries",
                               Baseline: "baseline", Problems: "problems"}


def _figures(part: Part) -> dict[str, Any]:
    """threshold, value, interval (and the gate's turn) of one part, in the threshold's unit."""
    if isinstance(part, Completeness):
        return {"threshold": part.expected, "value": part.finished}
    if isinstance(part, Budget):
        return {"threshold": part.budget.max_rate, "value": round(part.budget.rate, 6)}
    if isinstance(part, CostCap):
        return {"threshold": part.cap, "value": round(part.spent, 6)}
    if isinstance(part, SurvivalGate):
        interval = part.fixed.interval
        return {"threshold": part.gate.rate, "turn": part.gate.turn,
                "value": round(part.fixed.measured, 6) if part.fixed.measured is not None else None,
                "interval": [round(interval[0], 6), round(interval[1], 6)] if interval is not None else None}
    if isinstance(part, NarratorErrors):
        return {"threshold": 0, "value": part.count}
    if isinstance(part, Canaries):
        summary = part.result.summary or {}
        rates = [r for r in (summary.get("recall"), summary.get("clean_rate")) if isinstance(r, (int, float))]
        return {"threshold": summary.get("min_recall"), "value": min(rates) if rates else None}
    if isinstance(part, Baseline):
        c = part.result.comparison
        if c is None or not c.measurable:
            return {}
        return {"threshold": c.alpha, "value": round(c.diff, 6), "interval": [round(c.ci[0], 6), round(c.ci[1], 6)],
                "turn": c.turn}
    return {"value": len(part.problems)} if isinstance(part, Problems) else {}


def check_record(part: Part, name: str = "run") -> dict[str, Any]:
    """One part as a ``analysis.results.VerdictCheck`` document."""
    reason = part_lines(part, name) or [f"{PART_KINDS[type(part)]}: {part.decision}"]
    return {"kind": PART_KINDS[type(part)], "decision": part.decision, **_figures(part), "reason": "\n".join(reason)}


def verdict_record(verdict: Verdict, name: str = "run", selection: str | None = None) -> dict[str, Any]:
    """The verdict as a ``analysis.results.VerdictRecord`` document (results.json ``verdict``)."""
    record: dict[str, Any] = {"outcome": verdict.outcome, "exit_code": verdict.exit_code,
                              "checks": [check_record(p, name) for p in verdict.parts]}
    if selection is not None:
        record["selection"] = selection
    return record


def verdict_markdown(record: Mapping[str, Any], *, label: str) -> str:
    """A run's verdict as a Markdown table (``ncp report --markdown``, for a CI job summary)."""
    def md(text: str) -> str:
        return html.escape(text, quote=False).replace("|", "\\|").replace("\n", "<br>")

    out = [f"**Verdict: {md(label)}: {str(record['outcome']).upper()} (exit {record['exit_code']})**", ""]
    if record.get("selection"):
        out += [f"<sub>{md(str(record['selection']))}</sub>", ""]
    out += ["| check | decision | required | measured | why |", "|:---|:---|---:|---:|:---|"]
    for c in record["checks"]:
        interval = c.get("interval")
        measured = "" if c.get("value") is None else f"{c['value']:g}" + (
            f" ({interval[0]:g}-{interval[1]:g})" if interval else "")
        required = "" if c.get("threshold") is None else f"{c['threshold']:g}" + (
            f" @{c['turn']}" if c.get("turn") is not None and c["kind"] == "survival" else "")
        out.append(f"| {md(c['kind'])} | {md(c['decision'])} | {required} | {measured} | {md(c['reason'])} |")
    return "\n".join(out) + "\n"
