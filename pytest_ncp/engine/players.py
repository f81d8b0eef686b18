"""Players produce the next player input: scripted, LLM-simulated (adversarial / natural), or replayed.

A simulated player sees only the player character's briefing and the narration, never the synopsis,
the commitments or the trajectory: ``PlayerView`` carries nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Protocol, Sequence, runtime_checkable

from ..core.config import PLAYER_KINDS
from ..prompts import call_nonce, data_block, render

if TYPE_CHECKING:
    from ..llm import ModelClient
    from ..core.spec import NarrativeSpec, PlayerCharacter



@dataclass(frozen=True)
class PlayerView:
    """All a player may know: who they play, and the exchange so far."""

    player: PlayerCharacter
    turn: int                                   # the turn this input is for (1-based)
    history: Sequence[tuple[str, str]]          # earlier (player input, narration); turn 0 input is ""
    # This turn's earlier inputs the screen found unfair, each with why: the player is asked again.
    rejected: Sequence[tuple[str, str]] = ()


@runtime_checkable
class Player(Protocol):
    """Produces the player's inputs; ``speculation_safe = True`` (``narrators.SpeculationSafe``) lets the
    episode ask for the next input while the current turn is audited."""

    def next_input(self, view: PlayerView) -> str | None | Awaitable[str | None]:
        """The next input, or None when the player has nothing more to say (script exhausted)."""


class ScriptedPlayer:
    """Plays a fixed list of inputs in order; returns None when they run out."""

    speculation_safe = True  # a pure function of the turn: may be asked ahead (episode pipelining)

    def __init__(self, inputs: Sequence[str]):
        self.inputs = list(inputs)

    @classmethod
    def from_spec(cls, spec: NarrativeSpec) -> ScriptedPlayer:
        return cls(spec.scripted_inputs)

    def next_input(self, view: PlayerView) -> str | None:
        i = view.turn - 1
        return self.inputs[i] if 0 <= i < len(self.inputs) else None


class ReplayPlayer(ScriptedPlayer):
    """Replays the player inputs of a recorded episode trace (JSON lines)."""

    @classmethod
    def from_trace(cls, path: str | Path) -> ReplayPlayer:
        from ..core.traces import read_trace

        return cls([e["player_input"] for e in read_trace(path, strict=True).of("turn") if e.get("turn", 0) >= 1])


class SimulatedPlayer:
    """An LLM plays the character with a persona: ``adversarial`` probes consistency, ``natural`` cooperates."""

    window = 20  # exchanges kept in the player's prompt
    speculation_safe = True  # one model call from the view alone: may be asked ahead (episode pipelining)

    def __init__(self, persona: str, model: str, client: ModelClient, temperature: float = 0.9):
        if persona not in ("adversarial", "natural"):
            raise ValueError(f"unknown persona {persona!r}; expected adversarial or natural")
        self.persona, self.model, self.client, self.temperature = persona, model, client, temperature

    async def next_input(self, view: PlayerView) -> str | None:
        history = list(view.history)[-self.window:]
        # One delimiter code for the call's narrations (prompts.call_nonce): no narration can close its block.
        nonce = call_nonce(*(narration for _, narration in history))
        messages = render(f"player_{self.persona}", default_role="system", player=view.player)
        for said, narration in history:
            if said:
                messages.append({"role": "assistant", "content": said})
            messages.append({"role": "user", "content": data_block(narration, "narration", nonce)})
        if len(messages) == 1:
            messages.append({"role": "user", "content": "The story begins. What do you do?"})
        for attempt, why in view.rejected:  # the screen found these unfair: say why, and ask again
            messages.append({"role": "assistant", "content": attempt})
            messages.append({"role": "user", "content": render("player_retry", why=why)[0]["content"]})
        completion = await self.client.complete("player", self.model, messages, temperature=self.temperature)
        said = completion.text.strip()
        if not said:
            # Not the end of a script: a player that produced nothing is a player error (an unknown outcome),
            # never an episode that "survived".
            raise RuntimeError(f"the {self.persona} player model {self.model} returned an empty reply")
        return said


def make_player(kind: str, spec: NarrativeSpec, *, client: ModelClient | None = None,
                model: str | None = None) -> Player:
    if kind == "scripted":
        return ScriptedPlayer.from_spec(spec)
    if kind in ("adversarial", "natural"):
        if client is None or not model:
            raise ValueError(f"the {kind} player needs a model (--player-model)")
        return SimulatedPlayer(kind, model, client)
    raise ValueError(f"unknown player {kind!r}; expected one of {', '.join(PLAYER_KINDS)}")
