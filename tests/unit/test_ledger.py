from __future__ import annotations

import pytest

from pytest_ncp.core.ledger import FactLedger, LedgerError


def ledger() -> FactLedger:
    return FactLedger.from_initial([("F1", "The door is locked."), ("F2", "Alan is alive.")])


def test_add_and_negate_keep_history_and_provenance():
    led = ledger()
    new = led.add("The key is under the mat.", turn=2, quote="a key glints under the mat")
    led.negate("F1", turn=3, quote="the door swings open")
    assert new.id == "F3"
    assert [f.id for f in led.active()] == ["F2", "F3"]
    assert [f.id for f in led.active(turn=2)] == ["F1", "F2", "F3"]
    assert [f.id for f in led.active(turn=1)] == ["F1", "F2"]
    assert [(c.turn, c.op, c.fact_id) for c in led.history(since=0)] == [(2, "add", "F3"), (3, "negate", "F1")]


def test_facts_cannot_be_negated_twice_or_invented():
    led = ledger()
    led.negate("F1", 1)
    with pytest.raises(LedgerError):
        led.negate("F1", 2)
    with pytest.raises(LedgerError):
        led.negate("F9", 2)


def test_diff_reads_like_a_unified_diff():
    led = ledger()
    led.add("The key is under the mat.", 2, "a key glints under the mat")
    led.negate("F1", 3, "the door swings open")
    assert led.diff(0, 3).splitlines() == [
        "--- ledger after turn 0",
        "+++ ledger after turn 3",
        '- F1: The door is locked.  (negated at turn 3: "the door swings open")',
        "  F2: Alan is alive.",
        '+ F3: The key is under the mat.  (added at turn 2: "a key glints under the mat")',
    ]
    assert "F1" in led.diff(0, 2).splitlines()[2] and led.diff(0, 2).splitlines()[2].startswith("  F1")


def test_added_ids_skip_initial_ids():
    led = FactLedger.from_initial([("F1", "a"), ("F2", "b")])
    assert led.add("c", 1).id == "F3"
