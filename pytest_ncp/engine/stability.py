"""``ncp stability``: audit recorded turns again, K times each, and count how often the verdict flips.

Which turns: every turn whose confirmed conflict ended an episode (whoever owned it: the narrator, a player
fault, a split verdict), and a seeded sample of clean turns (no confirmed conflict) from the same run. Each
is rebuilt from its trace exactly as the auditor saw it (``fork.EpisodeState.at``: the ledger, plot position
and commitment states before the turn, the recorded input and response) and judged again by
``LLMAuditor.judge_conflicts``: the conflict check and its confirmations (with the run's ``--audit-votes``),
not the other steps, whose answers cannot flip a conflict. Nothing is written to the run.

The re-audits sample the auditor (``temperature``, 0.7 by default): at the run's temperature 0 a re-audit
mostly repeats itself, and the flip rate would show only a provider's nondeterminism. What comes out is the
observations of ``analysis.stability.flip_summary``.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..analysis.stability import CLEAN
from ..core.config import episode_key
from ..core.traces import RunFileError, read_trace
from ..llm import ModelError
from .auditor import VOTE_TEMPERATURE, AuditorError, LLMAuditor, TurnContext
from .fork import EpisodeState

if TYPE_CHECKING:
    from ..core.spec import NarrativeSpec
    from ..llm import ModelClient


@dataclass(frozen=True)
class RecordedTurn:
    """One turn of a run to audit again: where it is, and what the run recorded for it."""

    episode: str          # spec--rN
    spec_id: str
    trace: Path
    turn: int
    recorded: str         # the conflict type that ended the episode there, or "clean"


def select_turns(episodes: Sequence[tuple[Any, Path]], *, clean_sample: int = 0,
                 seed: int = 0) -> list[RecordedTurn]:
    """The ending turns of ``episodes`` ((results.json episode record, its trace)) and ``clean_sample`` clean
    turns drawn with ``seed`` (the same seed and run give the same turns), ending turns first."""
    ending: list[RecordedTurn] = []
    clean: list[RecordedTurn] = []
    for e, trace in episodes:
        key = episode_key(e.spec_id, e.repeat)
        if e.failure is not None:
            ending.append(RecordedTurn(key, e.spec_id, trace, int(e.failure.turn), str(e.failure.type)))
        for event in read_trace(trace).of("turn"):
            turn = int(event.get("turn", -1))
            if not event.get("confirmed") and (e.failure is None or turn != e.failure.turn):
                clean.append(RecordedTurn(key, e.spec_id, trace, turn, CLEAN))
    clean.sort(key=lambda t: (t.episode, t.turn))
    drawn = random.Random(seed).sample(clean, min(clean_sample, len(clean))) if clean_sample else []
    return [*sorted(ending, key=lambda t: (t.episode, t.turn)), *sorted(drawn, key=lambda t: (t.episode, t.turn))]


def turn_context(turn: RecordedTurn, spec: NarrativeSpec) -> TurnContext:
    """The audit's view of a recorded turn, rebuilt from the trace (RunFileError when it is not there)."""
    state = EpisodeState.at(turn.trace, turn.turn)
    state.check_spec(spec)
    if state.recorded is None:
        raise RunFileError(f"{turn.trace}: turn {turn.turn} was never audited; nothing to judge again")
    return TurnContext(
        spec=spec, turn=turn.turn, player_input=state.player_input if turn.turn >= 1 else None,
        response=str(state.recorded["response"]), facts=state.ledger.active(), node_index=state.node_index,
        commitment_states=dict(state.commitment_states),
        previous_response=state.history[-1][1] if state.history else None, trigger_turn=state.trigger_turn,
    )


async def reaudit_turns(turns: Sequence[RecordedTurn], specs: dict[str, NarrativeSpec], *, client: ModelClient,
                        model: str, votes: int, audit_votes: int = 1, temperature: float = VOTE_TEMPERATURE,
                        concurrency: int = 16) -> list[dict[str, Any]]:
    """Audit each turn ``votes`` times; one observation per turn (``analysis.stability``)."""
    auditor = LLMAuditor(client, model, temperature=temperature, votes=audit_votes, vote_temperature=temperature)
    bound = asyncio.Semaphore(concurrency)
    contexts = [turn_context(t, specs[t.spec_id]) for t in turns]

    async def once(ctx: TurnContext) -> set[str] | None:
        async with bound:
            try:
                audit = await auditor.judge_conflicts(ctx)
            except (AuditorError, ModelError):
                # No valid verdict (the auditor's answers, or its endpoint past the retries): counted apart,
                # never a flip either way, and the other re-audits go on.
                return None
            return {c.conflict.type for c in audit.confirmed}

    outcomes = await asyncio.gather(*(once(ctx) for ctx in contexts for _ in range(votes)))
    return [{"episode": t.episode, "turn": t.turn, "recorded": t.recorded, "trace": str(t.trace),
             "outcomes": list(outcomes[i * votes:(i + 1) * votes])} for i, t in enumerate(turns)]


__all__ = ["RecordedTurn", "reaudit_turns", "select_turns", "turn_context"]
