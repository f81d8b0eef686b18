"""What an episode's ending means, defined once: its termination, its owner (DESIGN 7.5), and from the owner
whether it is a narrator failure, judged, unknown, censored or left unfinished by the run's budget.

The metrics, the blame table, the verdict, ``ncp compare``, the HTML report and the pytest outcome all read
:class:`Ending`'s properties; none decides it again. Standard library only: cheap to import (the report
tables and the plugin's summary read it).
"""

from __future__ import annotations

import enum
from typing import Literal

class Termination(str, enum.Enum):
    """How an episode ended, as results.json and traces record it."""

    CONFLICT_FACT = "conflict:fact"
    CONFLICT_COMMITMENT = "conflict:commitment"
    CONFLICT_PLAYER_INPUT = "conflict:player_input"
    SUCCESS = "success"
    TURN_LIMIT = "turn_limit"
    # The scripted player ran out of inputs before the turn limit: survived, not successful.
    SCRIPT_EXHAUSTED = "script_exhausted"
    ERROR = "error"  # refined by ``error.kind`` (Ending)
    # Cut short by the run's budget (--max-cost refused a model call).
    BUDGET = "budget"
    # A sequential gate decided and --sequential-cancel ended the episode at its next turn.
    CANCELLED = "cancelled"
    # A confirmed conflict provoked by a simulated player's input the screen found unfair (still unfair
    # after its regenerations).
    PLAYER_FAULT = "player_fault"
    # A conflict that stood on a majority of --audit-votes samples short of unanimity.
    CONTESTED = "contested"

    @property
    def is_conflict(self) -> bool:
        return self.value.startswith("conflict:")

    def __str__(self) -> str:
        return self.value


ConflictType = Literal["fact", "commitment", "player_input"]
ErrorKind = Literal["narrator", "auditor", "model", "player"]
CommitmentState = Literal["PENDING", "SATISFIED", "VIOLATED"]


class Owner(str, enum.Enum):
    """Who owns an episode's outcome (DESIGN 7.5)."""

    NARRATOR = "narrator"
    PLAYER = "player"
    AUDITOR = "auditor"
    MODEL = "model"
    HARNESS = "harness"
    BUDGET = "budget"
    NONE = "none"

    @property
    def label(self) -> str:
        return _OWNER_LABELS[self]

    def __str__(self) -> str:
        return self.value


_OWNER_LABELS: dict[Owner, str] = {
    Owner.NARRATOR: "narrator", Owner.PLAYER: "player simulator", Owner.AUDITOR: "auditor",
    Owner.MODEL: "model endpoints", Owner.HARNESS: "harness", Owner.BUDGET: "budget", Owner.NONE: "no fault",
}


class Ending(str, enum.Enum):
    """What an episode's ending means: its termination, with an error refined by the error's kind.

    Members are in the order the blame table lists them; the value is the kind of outcome it shows."""

    CONFLICT_FACT = "conflict:fact"
    CONFLICT_COMMITMENT = "conflict:commitment"
    CONFLICT_PLAYER_INPUT = "conflict:player_input"
    NARRATOR_ERROR = "error:narrator"
    PLAYER_FAULT = "player_fault"
    PLAYER_ERROR = "error:player"
    AUDITOR_ERROR = "error:auditor"
    CONTESTED = "contested"
    MODEL_ERROR = "error:model"
    HARNESS_ERROR = "error"  # an error whose kind is not recorded
    BUDGET = "budget"
    CANCELLED = "cancelled"
    SUCCESS = "success"
    TURN_LIMIT = "turn_limit"
    SCRIPT_EXHAUSTED = "script_exhausted"

    @classmethod
    def of(cls, termination: Termination, error_kind: ErrorKind | None = None) -> Ending:
        if termination is Termination.ERROR:
            return cls(f"error:{error_kind}") if error_kind is not None else cls.HARNESS_ERROR
        return cls(termination.value)

    @property
    def owner(self) -> Owner:
        return _MEANING[self][0]

    @property
    def label(self) -> str:
        """As people read it in the blame table."""
        return _MEANING[self][1]

    @property
    def failure(self) -> bool:
        """A failure of the narrator (a confirmed conflict, a narrator error): the only endings that count
        against survival."""
        return self.owner is Owner.NARRATOR

    @property
    def unknown(self) -> bool:
        """Says nothing about the narrator (the player simulator's, the auditor's, a model endpoint's, the
        harness's): censored, bounded by the error budget, a pytest error and never a failure."""
        return self.owner in (Owner.PLAYER, Owner.AUDITOR, Owner.MODEL, Owner.HARNESS)

    @property
    def stopped(self) -> bool:
        """Left unfinished by the run itself (the cost cap, an early gate decision): censored, outside the
        error budget."""
        return self.owner is Owner.BUDGET

    @property
    def judged(self) -> bool:
        """Counted in the rates and means: neither unknown nor left unfinished by the run."""
        return self.owner in (Owner.NARRATOR, Owner.NONE)

    @property
    def survived(self) -> bool:
        """Played to a clean end: success, turn limit, script exhausted."""
        return self.owner is Owner.NONE

    @property
    def censored(self) -> bool:
        """Right-censored in survival: nothing is known about the narrator past its last observed turn
        (success survives throughout; a failure is an event)."""
        return not self.failure and self is not Ending.SUCCESS

    @property
    def censored_before_its_turn(self) -> bool:
        """A conflict judged against someone else (a player fault, a split verdict): its own turn says
        nothing about the narrator, so it is censored at the turn before."""
        return self in (Ending.PLAYER_FAULT, Ending.CONTESTED)

    @property
    def display(self) -> str:
        """How the HTML report shows it: conflict, error (every unknown outcome), success, budget, survived."""
        if self.failure and self is not Ending.NARRATOR_ERROR:
            return "conflict"
        if self.unknown or self is Ending.NARRATOR_ERROR:
            return "error"
        return self.value if self in (Ending.SUCCESS, Ending.BUDGET) else "survived"

    def __str__(self) -> str:
        return self.value


# The one table of what each ending means: its owner and its label.
_MEANING: dict[Ending, tuple[Owner, str]] = {
    Ending.CONFLICT_FACT: (Owner.NARRATOR, "fact conflict"),
    Ending.CONFLICT_COMMITMENT: (Owner.NARRATOR, "commitment conflict"),
    Ending.CONFLICT_PLAYER_INPUT: (Owner.NARRATOR, "player-input conflict"),
    Ending.NARRATOR_ERROR: (Owner.NARRATOR, "narrator error"),
    Ending.PLAYER_FAULT: (Owner.PLAYER, "player fault"),
    Ending.PLAYER_ERROR: (Owner.PLAYER, "player error"),
    Ending.AUDITOR_ERROR: (Owner.AUDITOR, "auditor error"),
    Ending.CONTESTED: (Owner.AUDITOR, "split verdict"),
    Ending.MODEL_ERROR: (Owner.MODEL, "model error"),
    Ending.HARNESS_ERROR: (Owner.HARNESS, "harness error"),
    Ending.BUDGET: (Owner.BUDGET, "cut short by the cost cap"),
    Ending.CANCELLED: (Owner.BUDGET, "cancelled after an early decision"),
    Ending.SUCCESS: (Owner.NONE, "success"),
    Ending.TURN_LIMIT: (Owner.NONE, "turn limit"),
    Ending.SCRIPT_EXHAUSTED: (Owner.NONE, "script exhausted"),
}


__all__ = ["CommitmentState", "ConflictType", "Ending", "ErrorKind", "Owner", "Termination"]
