"""The fact ledger F_t: facts are added or negated per turn, never edited, so any two turns can be diffed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Literal


@dataclass(frozen=True)
class LedgerFact:
    id: str
    text: str
    added_turn: int
    quote: str | None = None  # the narration that established it (None for initial facts)


@dataclass(frozen=True)
class LedgerChange:
    """One entry of the ledger's history: what happened to which fact at which turn."""

    turn: int
    op: Literal["add", "negate"]
    fact_id: str
    text: str
    quote: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "op": self.op, "fact_id": self.fact_id, "text": self.text, "quote": self.quote}


class LedgerError(ValueError):
    pass


@dataclass
class FactLedger:
    """Append-only record of facts. ``active(t)`` is F_t; ``diff(a, b)`` shows what changed between turns."""

    _facts: dict[str, LedgerFact] = field(default_factory=dict)
    _negated: dict[str, LedgerChange] = field(default_factory=dict)
    _history: list[LedgerChange] = field(default_factory=list)
    _next: int = 1

    @classmethod
    def from_initial(cls, facts: Iterable[tuple[str, str]]) -> FactLedger:
        """Turn-0 ledger from (id, text) pairs, e.g. a spec's ``initial_facts``."""
        ledger = cls()
        for fact_id, text in facts:
            ledger._put(LedgerFact(fact_id, text, 0))
        return ledger

    # --- changes -----------------------------------------------------------------------------
    def add(self, text: str, turn: int, quote: str | None = None) -> LedgerFact:
        while f"F{self._next}" in self._facts:
            self._next += 1
        return self._put(LedgerFact(f"F{self._next}", text, turn, quote))

    def negate(self, fact_id: str, turn: int, quote: str | None = None) -> LedgerChange:
        if fact_id not in self._facts:
            raise LedgerError(f"no fact {fact_id!r} in the ledger")
        if fact_id in self._negated:
            raise LedgerError(f"fact {fact_id!r} was already negated at turn {self._negated[fact_id].turn}")
        change = LedgerChange(turn, "negate", fact_id, self._facts[fact_id].text, quote)
        self._negated[fact_id] = change
        self._history.append(change)
        return change

    def _put(self, fact: LedgerFact) -> LedgerFact:
        if fact.id in self._facts:
            raise LedgerError(f"duplicate fact id {fact.id!r}")
        self._facts[fact.id] = fact
        self._history.append(LedgerChange(fact.added_turn, "add", fact.id, fact.text, fact.quote))
        return fact

    def copy(self) -> FactLedger:
        """An independent ledger with the same facts and history (forks start from one)."""
        return FactLedger(dict(self._facts), dict(self._negated), list(self._history), self._next)

    # --- reading -----------------------------------------------------------------------------
    def __contains__(self, fact_id: object) -> bool:
        return fact_id in self._facts

    def __getitem__(self, fact_id: str) -> LedgerFact:
        return self._facts[fact_id]

    def __iter__(self) -> Iterator[LedgerFact]:
        return iter(self.active())

    def __len__(self) -> int:
        return len(self.active())

    def is_active(self, fact_id: str, turn: int | None = None) -> bool:
        fact = self._facts.get(fact_id)
        if fact is None or (turn is not None and fact.added_turn > turn):
            return False
        neg = self._negated.get(fact_id)
        return neg is None or (turn is not None and neg.turn > turn)

    def active(self, turn: int | None = None) -> list[LedgerFact]:
        """Facts in force after ``turn`` (all turns when None), in the order they were added."""
        return [f for f in self._facts.values() if self.is_active(f.id, turn)]

    def history(self, since: int | None = None, until: int | None = None) -> list[LedgerChange]:
        return [
            c for c in self._history
            if (since is None or c.turn > since) and (until is None or c.turn <= until)
        ]

    def changes_at(self, turn: int) -> list[LedgerChange]:
        return [c for c in self._history if c.turn == turn]

    def diff(self, turn_a: int, turn_b: int) -> str:
        """Unified-style diff of the active ledger after ``turn_a`` vs after ``turn_b``.

        Unchanged facts are context lines (two spaces), negated ones ``-``, added ones ``+``, each
        with the turn of the change and the quote that caused it.
        """
        before = {f.id for f in self.active(turn_a)}
        after = {f.id for f in self.active(turn_b)}
        lines = [f"--- ledger after turn {turn_a}", f"+++ ledger after turn {turn_b}"]
        for fact in self._facts.values():
            if fact.id in before and fact.id in after:
                lines.append(f"  {fact.id}: {fact.text}")
            elif fact.id in before:
                neg = self._negated[fact.id]
                lines.append(f"- {fact.id}: {fact.text}  (negated at turn {neg.turn}{_said(neg.quote)})")
            elif fact.id in after:
                lines.append(f"+ {fact.id}: {fact.text}  (added at turn {fact.added_turn}{_said(fact.quote)})")
        return "\n".join(lines)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FactLedger):
            return NotImplemented
        return [(f.id, f.text) for f in self.active()] == [(f.id, f.text) for f in other.active()]

    __hash__ = None  # type: ignore[assignment]

    def to_list(self) -> list[dict[str, Any]]:
        """Every fact ever recorded with its state, for traces and reports."""
        return [
            {"id": f.id, "text": f.text, "added_turn": f.added_turn, "quote": f.quote,
             "negated_turn": self._negated[f.id].turn if f.id in self._negated else None}
            for f in self._facts.values()
        ]


def _said(quote: str | None) -> str:
    if not quote:
        return ""
    short = quote if len(quote) <= 80 else quote[:77] + "..."
    return f': "{short}"'
