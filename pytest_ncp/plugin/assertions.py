"""Assertion helpers for hand-written narrator tests; their failures show the headline and ledger diff."""

from __future__ import annotations

from typing import Any

from ..core.endings import Termination
from ..engine.episode import EpisodeResult
from ..core.ledger import FactLedger
from ..report.text import commitment_text, failure_text, headline


def assert_no_conflict(result: EpisodeResult) -> None:
    """The episode ended without a confirmed conflict (and without an error)."""
    if result.termination.is_conflict or result.error:
        raise AssertionError(failure_text(result))


def assert_termination(result: EpisodeResult, expected: str | Termination) -> None:
    expected = Termination(expected)
    if result.termination is not expected:
        raise AssertionError(f"expected {expected.value}, got {headline(result)}\n\n"
                             + (failure_text(result) if result.failure or result.error else
                                result.ledger.diff(0, result.turns)))


def assert_commitment(result: EpisodeResult, commitment_id: str, state: str = "SATISFIED") -> None:
    """The commitment ended in ``state`` (SATISFIED, PENDING or VIOLATED), or, for an invariant, ``HELD``:
    never violated (an invariant is never "satisfied" by an episode merely ending)."""
    actual = result.commitment_states.get(commitment_id)
    if actual is None:
        raise AssertionError(f"{result.spec.id} has no commitment {commitment_id!r} "
                             f"(it has {', '.join(result.commitment_states)})")
    if state == "HELD":
        if result.spec.commitment(commitment_id).kind != "invariant":
            raise AssertionError(f"{commitment_id} is not an invariant: HELD applies to invariants only")
        if actual == "VIOLATED":
            raise AssertionError(f"expected invariant {commitment_id} to hold, it was VIOLATED\n"
                                 + commitment_text(result, commitment_id))
        return
    if actual != state:
        raise AssertionError(f"expected {commitment_id} {state}, it is {actual}\n"
                             + commitment_text(result, commitment_id))


def explain_comparison(op: str, left: Any, right: Any) -> list[str] | None:
    """``pytest_assertrepr_compare``: ledgers compare by their active facts, shown as a diff."""
    if op != "==" or not (isinstance(left, FactLedger) and isinstance(right, FactLedger)):
        return None
    a = {f.id: f.text for f in left.active()}
    b = {f.id: f.text for f in right.active()}
    lines = ["fact ledgers differ (active facts):"]
    for fid in sorted(set(a) | set(b), key=lambda x: (len(x), x)):
        if a.get(fid) == b.get(fid):
            continue
        if fid in a:
            lines.append(f"- {fid}: {a[fid]}")
        if fid in b:
            lines.append(f"+ {fid}: {b[fid]}")
    return lines
