"""The auditor's wire contract (DESIGN 7.1): its steps, the answer each step must give, and the
``response_format`` that asks a model for exactly that answer.

A public contract: a custom auditor model, the scripted test server (``pytest_ncp.testing``), the call
estimate and the HTML report all name the steps through :class:`Step`, never by retyping them. Answers
carry exactly the listed fields; parsing is strict (``engine/auditor.py`` checks quotes and ids on top).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

from .endings import CommitmentState, ConflictType


class Step:
    """The auditor's structured calls, by the name the prompts, traces and ``response_format`` use."""

    CONFLICT_CHECK: Final = "conflict_check"
    CONFLICT_CONFIRMATION: Final = "conflict_confirmation"
    FACT_UPDATE: Final = "fact_update"
    TRAJECTORY_UPDATE: Final = "trajectory_update"
    COMMITMENT_CHECK: Final = "commitment_check"
    SUCCESS_CONFIRMATION: Final = "success_confirmation"
    INPUT_SCREEN: Final = "input_screen"


STEPS: tuple[str, ...] = (Step.CONFLICT_CHECK, Step.CONFLICT_CONFIRMATION, Step.FACT_UPDATE, Step.TRAJECTORY_UPDATE,
                          Step.COMMITMENT_CHECK, Step.SUCCESS_CONFIRMATION, Step.INPUT_SCREEN)
# The four reads of every narrator response (DESIGN section 3); the confirmations and the screen follow them.
TURN_STEPS: tuple[str, ...] = (Step.CONFLICT_CHECK, Step.FACT_UPDATE, Step.TRAJECTORY_UPDATE, Step.COMMITMENT_CHECK)
CONFLICT_TYPES: tuple[str, ...] = ("fact", "commitment", "player_input")
# What makes a simulated player's input unfair (input_screen.j2 says each in full; docs/specs.md rule 7).
SCREEN_RULES: tuple[str, ...] = ("world_event", "other_character", "unknowable")
ScreenRule = Literal["world_event", "other_character", "unknowable"]


class _Answer(BaseModel):
    # strict: no lax coercion, so "no", 0 or "off" is an invalid boolean, not False. Unknown fields are
    # refused: {"conflicts": [], "verdict": "CONFLICT", ...} is not a clean verdict with a remark.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Conflict(_Answer):
    type: ConflictType
    fact_ids: list[str]
    commitment_ids: list[str]
    quote: str
    explanation: str


class ConflictCheck(_Answer):
    conflicts: list[Conflict]


class Confirmation(_Answer):
    confirmed: bool
    explanation: str


class AddedFact(_Answer):
    text: str
    quote: str


class NegatedFact(_Answer):
    fact_id: str
    quote: str


class FactUpdate(_Answer):
    added: list[AddedFact]
    negated: list[NegatedFact]


class TrajectoryUpdate(_Answer):
    trigger_event_occurred: bool
    key_delta_occurred: bool
    evidence: str

    @property
    def advanced(self) -> bool:
        return self.trigger_event_occurred and self.key_delta_occurred


class SatisfiedCommitment(_Answer):
    commitment_id: str
    evidence: str


class CommitmentCheck(_Answer):
    satisfied: list[SatisfiedCommitment]


class ScreenProblem(_Answer):
    rule: ScreenRule
    quote: str
    explanation: str


class InputScreen(_Answer):
    """A simulated player's input, checked: fair exactly when no problem is found."""

    fair: bool
    problems: list[ScreenProblem]
    explanation: str


ANSWER_MODELS: dict[str, type[_Answer]] = {
    Step.CONFLICT_CHECK: ConflictCheck,
    Step.CONFLICT_CONFIRMATION: Confirmation,
    Step.SUCCESS_CONFIRMATION: Confirmation,
    Step.FACT_UPDATE: FactUpdate,
    Step.TRAJECTORY_UPDATE: TrajectoryUpdate,
    Step.COMMITMENT_CHECK: CommitmentCheck,
    Step.INPUT_SCREEN: InputScreen,
}


def _obj(properties: dict[str, Any]) -> dict[str, Any]:
    # Strict structured outputs require every property listed and no additional ones.
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


_STR = {"type": "string"}
_BOOL = {"type": "boolean"}
_IDS = {"type": "array", "items": _STR}

WIRE_SCHEMAS: dict[str, dict[str, Any]] = {
    Step.CONFLICT_CHECK: _obj({"conflicts": {"type": "array", "items": _obj({
        "type": {"type": "string", "enum": list(CONFLICT_TYPES)},
        "fact_ids": _IDS, "commitment_ids": _IDS, "quote": _STR, "explanation": _STR})}}),
    Step.CONFLICT_CONFIRMATION: _obj({"confirmed": _BOOL, "explanation": _STR}),
    Step.SUCCESS_CONFIRMATION: _obj({"confirmed": _BOOL, "explanation": _STR}),
    Step.FACT_UPDATE: _obj({
        "added": {"type": "array", "items": _obj({"text": _STR, "quote": _STR})},
        "negated": {"type": "array", "items": _obj({"fact_id": _STR, "quote": _STR})}}),
    Step.TRAJECTORY_UPDATE: _obj({"trigger_event_occurred": _BOOL, "key_delta_occurred": _BOOL, "evidence": _STR}),
    Step.COMMITMENT_CHECK: _obj({"satisfied": {"type": "array", "items": _obj({
        "commitment_id": _STR, "evidence": _STR})}}),
    Step.INPUT_SCREEN: _obj({"fair": _BOOL, "problems": {"type": "array", "items": _obj({
        "rule": {"type": "string", "enum": list(SCREEN_RULES)}, "quote": _STR, "explanation": _STR})},
        "explanation": _STR}),
}


def response_format(step: str) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": step, "schema": WIRE_SCHEMAS[step], "strict": True}}


__all__ = ["ANSWER_MODELS", "CONFLICT_TYPES", "SCREEN_RULES", "STEPS", "TURN_STEPS", "WIRE_SCHEMAS", "AddedFact",
           "CommitmentCheck", "CommitmentState", "Confirmation", "Conflict", "ConflictCheck", "ConflictType",
           "FactUpdate", "InputScreen", "NegatedFact", "SatisfiedCommitment", "ScreenProblem", "ScreenRule", "Step",
           "TrajectoryUpdate", "response_format"]
