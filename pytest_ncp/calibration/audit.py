"""Run the real auditor on gold cases: ``ncp calibrate`` (every case) and canaries (a sample per run).

Nothing here judges a turn itself: each case goes through ``LLMAuditor.audit`` with the TurnContext an
episode would build, so prompts, parsing, verification, retries and fail-closed rules are the
auditor's own. An ``AuditorError`` (no valid answer after retries) or a failed model call makes the
case invalid: scored as a miss and counted apart, exactly as an episode would stop with an error.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..core.files import atomic_write_text
from ..engine.auditor import Auditor, AuditorError, TurnAudit
from ..llm import CostCapReached, ModelError, Usage, current_episode, current_usage, in_chain, scrub
from .goldset import GoldCase
from .scoring import gold_row

if TYPE_CHECKING:
    from ..analysis.verdict import CanaryResult

CALIBRATION_FILE = "calibration.json"
CALIBRATION_VERSION = 1


def prediction(audit: TurnAudit) -> dict[str, Any]:
    """What an audit answered, as plain data the scorer compares with the gold label."""
    return {
        "flagged": [{"type": c.type, "ids": list(c.fact_ids if c.type == "fact" else c.commitment_ids)}
                    for c in audit.flagged],
        "confirmed": [{"type": c.conflict.type,
                       "ids": list(c.conflict.fact_ids if c.conflict.type == "fact" else c.conflict.commitment_ids),
                       "quote": c.conflict.quote, "explanation": c.conflict.explanation} for c in audit.confirmed],
        "trigger": audit.trajectory.trigger_event_occurred if audit.trajectory else None,
        "delta": audit.trajectory.key_delta_occurred if audit.trajectory else None,
        "added": [a.quote for a in audit.fact_update.added] if audit.fact_update else [],
        "negated": [n.fact_id for n in audit.fact_update.negated] if audit.fact_update else [],
        "satisfied": [s.commitment_id for s in audit.commitments.satisfied] if audit.commitments else [],
    }


async def audit_case(auditor: Auditor, case: GoldCase, *, cassette: str) -> dict[str, Any]:
    """One case through the auditor -> a row ``{"case", "spec", "gold", "pred"}``."""
    usage = Usage()
    usage_token = current_usage.set(usage)
    episode_token = current_episode.set(cassette)  # cassettes keep one file per name
    try:
        try:
            pred = prediction(await auditor.audit(case.context()))
        except AuditorError as exc:
            pred = {"invalid": {"kind": "auditor", "step": exc.step, "problems": [scrub(p) for p in exc.problems]}}
        except ModelError as exc:
            pred = {"invalid": {"kind": "model", "step": None, "problems": [scrub(str(exc))]}}
    finally:
        current_usage.reset(usage_token)
        current_episode.reset(episode_token)
    pred.update(tokens=usage.tokens, cost_usd=round(usage.cost_usd, 8), calls=usage.calls)
    return {"case": case.id, "spec": case.spec.id, "tags": list(case.tags), "gold": gold_row(case), "pred": pred}


def canaries_failed(exc: BaseException) -> CanaryResult:
    """The verdict's view of canaries that raised ``exc`` instead of finishing (``analysis.verdict.CanaryResult``):
    a refusal of the cost cap anywhere in its chain is the budget's (exit 7), anything else puts the auditor in
    doubt."""
    from ..analysis.verdict import CanaryResult

    text = f"auditor canaries could not run: {type(exc).__name__}: {exc}"
    return CanaryResult(error=text, cut_by="max-cost" if in_chain(exc, CostCapReached) else None)


async def audit_cases(auditor: Auditor, cases: Sequence[GoldCase], *, concurrency: int = 16,
                      cassette: Callable[[GoldCase], str] = lambda c: f"calibrate--{c.spec.id}",
                      on_case: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Every case, at most ``concurrency`` at a time; rows come back in the cases' order."""
    bound = asyncio.Semaphore(concurrency)

    async def one(case: GoldCase) -> dict[str, Any]:
        async with bound:
            row = await audit_case(auditor, case, cassette=cassette(case))
        if on_case is not None:
            on_case(row)
        return row

    return list(await asyncio.gather(*(one(c) for c in cases)))


def write_calibration(out_dir: str | Path, data: dict[str, Any]) -> Path:
    """Write ``calibration.json`` atomically (``core.files.atomic_write_text``)."""
    return atomic_write_text(Path(out_dir) / CALIBRATION_FILE, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


# --- canaries --------------------------------------------------------------------------------------

DEFAULT_CANARY_SEED = 0
DEFAULT_MIN_CANARY_RECALL = 0.8


def sample_canaries(cases: Sequence[GoldCase], k: int, *, seed: int = DEFAULT_CANARY_SEED) -> list[GoldCase]:
    """K cases, half known violations (rounded up) and half known clean, the same for the same set and seed.

    A quarter of the violations (rounded up, once there are two or more) are injection cases: violations whose
    narration addresses the auditor, so a canary run catches an auditor that obeys the narrator."""
    ordered = sorted(cases, key=lambda c: c.id)
    violations = [c for c in ordered if c.violation]
    clean = [c for c in ordered if not c.violation]
    rng = random.Random(seed)
    want_v = min(len(violations), (k + 1) // 2)
    want_c = min(len(clean), k - want_v)
    want_v = min(len(violations), k - want_c)  # a set short of clean cases gives more violations
    attacks = [c for c in violations if "injection" in c.tags]
    want_a = min(len(attacks), (want_v + 3) // 4) if want_v >= 2 else 0
    drawn = rng.sample(attacks, want_a)
    drawn += rng.sample([c for c in violations if c not in drawn], want_v - want_a)
    return sorted(drawn + rng.sample(clean, want_c), key=lambda c: c.id)


def canary_outcome(row: dict[str, Any]) -> str:
    """caught | missed | passed | false_alarm | invalid (an invalid answer is never right)."""
    pred, gold = row["pred"], row["gold"]
    if pred.get("invalid"):
        return "invalid"
    if gold["conflicts"]:
        types = {c["type"] for c in gold["conflicts"]}
        return "caught" if any(c["type"] in types for c in pred["confirmed"]) else "missed"
    return "false_alarm" if pred["confirmed"] else "passed"


def canary_summary(rows: Sequence[dict[str, Any]], *, seed: int, min_recall: float, model: str) -> dict[str, Any]:
    outcomes = [(r, canary_outcome(r)) for r in rows]
    violations = [o for r, o in outcomes if r["gold"]["conflicts"]]
    clean = [o for r, o in outcomes if not r["gold"]["conflicts"]]
    caught, passed = violations.count("caught"), clean.count("passed")
    recall = caught / len(violations) if violations else None
    clean_rate = passed / len(clean) if clean else None
    ok = all(v is None or v >= min_recall for v in (recall, clean_rate))
    return {
        "k": len(rows), "seed": seed, "model": model, "min_recall": min_recall,
        "violations": len(violations), "caught": caught, "clean": len(clean), "passed": passed,
        "invalid": sum(o == "invalid" for _, o in outcomes), "recall": recall, "clean_rate": clean_rate,
        "ok": ok, "tokens": sum(int(r["pred"].get("tokens", 0)) for r in rows),
        "cost_usd": round(sum(float(r["pred"].get("cost_usd", 0.0)) for r in rows), 8),
        "cases": [{"case": r["case"], "spec": r["spec"], "violation": bool(r["gold"]["conflicts"]), "outcome": o,
                   **({"problems": r["pred"]["invalid"]["problems"]} if o == "invalid" else {})}
                  for r, o in outcomes],
    }


def canary_line(summary: dict[str, Any]) -> str:
    line = (f"auditor canaries: {summary['caught']}/{summary['violations']} violations caught, "
            f"{summary['passed']}/{summary['clean']} clean passed")
    if summary["invalid"]:
        line += f" ({summary['invalid']} invalid answer(s), counted as misses)"
    return line


def canary_verdict(summary: dict[str, Any]) -> str:
    """The gate's sentence: the auditor, not the narrator, is in doubt when canaries are missed."""
    if summary["ok"]:
        return f"canary gate PASSED: auditor {summary['model']} caught and passed at least {summary['min_recall']:.0%}"
    return (f"canary gate FAILED: the auditor ({summary['model']}) missed known answers (needs at least "
            f"{summary['min_recall']:.0%} of canary violations caught and clean turns passed); the AUDITOR, not "
            "the narrator, is in doubt: this run's verdicts cannot be trusted (check the auditor model, "
            "endpoint and prompts with `ncp calibrate`)")


async def run_canaries(auditor: Auditor, cases: Sequence[GoldCase], *, model: str, seed: int,
                       min_recall: float, concurrency: int = 16) -> dict[str, Any]:
    rows = await audit_cases(auditor, cases, concurrency=concurrency, cassette=lambda c: "_canaries")
    return canary_summary(rows, seed=seed, min_recall=min_recall, model=model)


def pick_canaries(set_dir: str | Path, k: int, *, seed: int = DEFAULT_CANARY_SEED) -> list[GoldCase]:
    """Load the gold set and sample K canaries; GoldSetError when the set cannot be used."""
    from .goldset import GoldSetError, load_gold_set

    gold = load_gold_set(set_dir)
    if gold.problems:
        raise GoldSetError(f"the gold set {set_dir} has {len(gold.problems)} problem(s) (first: {gold.problems[0]}); "
                           "run `ncp calibrate --check`")
    if not gold.cases:
        raise GoldSetError(f"the gold set {set_dir} has no cases")
    return sample_canaries(gold.cases, k, seed=seed)


def junit_properties(summary: dict[str, Any] | None, error: str | None, prefix: str = "ncp.") -> list[tuple[str, Any]]:
    """The canary score as flat name/value pairs (JUnit XML suite properties)."""
    if error is not None:
        return [(prefix + "canary_error", error)]
    if summary is None:
        return []
    return [(prefix + f"canary_{key}", summary[key]) for key in
            ("k", "seed", "violations", "caught", "clean", "passed", "invalid", "min_recall", "ok")]
