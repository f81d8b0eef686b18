"""Forking a recorded episode at turn T: rebuild the state just before T, then sample T again.

A trace records, per audited turn, the player input, the response, the ledger changes, the node
index, the remembered trigger turn and the commitment states after it; its ``start`` event records
the spec fingerprint (and one hash per spec section), the prompt version and the initial ledger.
That is enough to rebuild the exact state before any turn T (``EpisodeState.at``) without
re-generating turns 0..T-1. ``fork`` then plays turn T K times concurrently with its recorded player
input, each audited by the full auditor against that state, optionally ``continue_turns`` more turns.

The narrator receives the recorded history: through its optional ``restore(history)`` hook (called
after ``reset(spec)``) when it has one, and always in ``context.history`` of each ``respond``. A
narrator that keeps its own memory and has no ``restore`` starts turn T with an empty memory.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..core.ledger import FactLedger
from ..core.traces import RunFileError, find_spec_file, read_trace

if TYPE_CHECKING:
    from ..core.config import RunConfig
    from ..core.endings import CommitmentState
    from .auditor import Auditor
    from .episode import EpisodeResult, Turn
    from ..llm import ModelClient
    from .narrators import NarratorFactory
    from .players import Player
    from ..core.spec import NarrativeSpec


class ForkError(ValueError):
    """A trace cannot be forked at that turn, or its spec changed since; the message says what and why."""


@dataclass
class EpisodeState:
    """Everything an episode holds just before turn ``turn`` of a recorded trace."""

    trace: str
    turn: int
    spec_id: str
    spec_path: str | None
    spec_fingerprint: str | None
    spec_sections: dict[str, str]
    prompt_version: str | None
    config: dict[str, Any]
    player_input: str | None          # the recorded input of turn ``turn`` (None for the opening)
    history: list[tuple[str, str]]    # (player input, narration) of turns before ``turn``; turn 0 input is ""
    transcript: list[Turn]
    ledger: FactLedger
    node_index: int
    trigger_turn: int | None
    nodes: list[dict[str, Any]]
    commitment_states: dict[str, CommitmentState]
    recorded: dict[str, Any] | None = None  # the recorded turn ``turn`` itself (verdicts, confirmed), if any
    repeat: int = 0
    last_recorded_turn: int = 0
    recorded_inputs: dict[int, str] = field(default_factory=dict)  # every recorded player input by turn

    @classmethod
    def at(cls, trace: str | Path, turn: int) -> EpisodeState:
        """The state just before ``turn`` of ``trace`` (a JSON-lines episode trace)."""
        from .episode import Turn

        path = Path(trace)
        try:
            recorded = read_trace(path, strict=True)
        except OSError as exc:
            raise ForkError(f"{path}: cannot read the trace: {exc}") from None
        start = recorded.start
        if not start:
            raise ForkError(f"{path}: no start event: not an ncp episode trace")
        turns = sorted(recorded.of("turn"), key=lambda r: int(r["turn"]))
        numbers = [int(r["turn"]) for r in turns]
        errored = next(iter(recorded.of("error")), None)
        at_turn = next((r for r in turns if int(r["turn"]) == turn), None)
        if at_turn is None and not (errored and errored.get("turn") == turn and errored.get("player_input")):
            have = f"turns {numbers[0]}..{numbers[-1]}" if numbers else "no audited turn"
            raise ForkError(f"{path}: cannot fork at turn {turn}: the trace has {have}"
                            + (f" (and an error at turn {errored.get('turn')})" if errored else ""))
        before = [r for r in turns if int(r["turn"]) < turn]
        initial = [f for f in start.get("ledger") or [] if int(f.get("added_turn", 0)) == 0]
        ledger = FactLedger.from_initial((f["id"], f["text"]) for f in initial)
        for r in before:
            for change in r.get("ledger_changes") or []:
                if change["op"] == "add":
                    fact = ledger.add(change["text"], change["turn"], change.get("quote"))
                    if fact.id != change["fact_id"]:
                        raise ForkError(f"{path}: turn {r['turn']}: ledger replay gave {fact.id} where the trace "
                                        f"recorded {change['fact_id']}: the trace was edited or is damaged")
                else:
                    ledger.negate(change["fact_id"], change["turn"], change.get("quote"))
        last = before[-1] if before else None
        any_turn = turns[0] if turns else {}
        states: dict[str, CommitmentState] = (dict(last["commitments"]) if last
                                              else {c: "PENDING" for c in any_turn.get("commitments") or {}})
        nodes: list[dict[str, Any]] = []
        trigger: int | None = None
        index = 0
        for r in before:  # a node is reached when the node index grows; its trigger was remembered before
            if int(r.get("node_index", index)) > index:
                nodes.append({"id": None, "trigger_turn": trigger if trigger is not None else int(r["turn"]),
                              "reached_turn": int(r["turn"])})
                index = int(r["node_index"])
            trigger = r.get("trigger_turn")
        end = recorded.end or {}
        for n, reached in zip(nodes, end.get("nodes") or start.get("nodes") or []):  # a stored failure: start
            n["id"] = reached.get("id")
        # No audited turn ``turn``: then the check above found the episode's error at that turn.
        player_input = (at_turn or errored or {}).get("player_input")
        return cls(
            trace=str(path), turn=turn, spec_id=start.get("spec_id", "?"), spec_path=start.get("spec_path"),
            spec_fingerprint=start.get("spec_fingerprint"), spec_sections=dict(start.get("spec_sections") or {}),
            prompt_version=start.get("prompt_version"), config=dict(start.get("config") or {}),
            player_input=player_input,
            history=[(r.get("player_input") or "", r["response"]) for r in before],
            transcript=[Turn(int(r["turn"]), r.get("player_input"), r["response"]) for r in before],
            ledger=ledger, node_index=int(last.get("node_index", 0)) if last else 0,
            trigger_turn=last.get("trigger_turn") if last else None, nodes=nodes, commitment_states=states,
            recorded=at_turn, repeat=int(start.get("repeat", 0)), last_recorded_turn=numbers[-1] if numbers else 0,
            recorded_inputs={int(r["turn"]): r["player_input"] for r in turns if r.get("player_input")},
        )

    # --- the spec ------------------------------------------------------------------------------
    def check_spec(self, spec: NarrativeSpec) -> None:
        """Raise ForkError unless ``spec`` is the one the trace was recorded with (same fingerprint)."""
        if spec.id != self.spec_id:
            raise ForkError(f"{self.trace}: recorded spec {self.spec_id!r}, given spec {spec.id!r} ({spec.path})")
        if self.spec_fingerprint is None or spec.fingerprint == self.spec_fingerprint:
            return
        now = spec.section_fingerprints
        changed = sorted(k for k in set(now) | set(self.spec_sections) if now.get(k) != self.spec_sections.get(k))
        what = (f"changed: {', '.join(changed)}" if self.spec_sections and changed
                else "the trace records no per-section hashes, so what changed cannot be named")
        raise ForkError(f"spec {spec.id} ({spec.path or 'built in code'}) changed since {self.trace} was recorded "
                        f"(fingerprint {self.spec_fingerprint} -> {spec.fingerprint}; {what}); a fork is only "
                        "meaningful against the spec the history was judged with: restore the spec or run the "
                        "episode again")

    def load_spec(self, given: str | Path | None = None) -> NarrativeSpec:
        """The spec (``given``, else the recorded spec path) checked against the recorded fingerprint."""
        from ..core.spec import load_spec

        path = Path(given) if given else find_spec_file(self.spec_path, Path(self.trace).parent,
                                                         Path(self.trace).parent.parent)
        if path is None:
            raise ForkError(f"{self.trace}: the recorded spec file {self.spec_path!r} is not found; give it with --spec")
        spec = load_spec(path)
        self.check_spec(spec)
        return spec

    # --- starting an episode from it -------------------------------------------------------------
    def apply(self, result: EpisodeResult) -> None:
        """Put this state into a fresh episode result (the episode then plays from turn ``turn``)."""
        result.ledger = self.ledger.copy()
        result.node_index, result.trigger_turn = self.node_index, self.trigger_turn
        result.nodes = [dict(n) for n in self.nodes]
        result.commitment_states.update(self.commitment_states)
        result.turns = max(0, self.turn - 1)

    def scripted_inputs(self, spec: NarrativeSpec) -> list[str]:
        """Inputs by turn for a scripted player after the fork: the recorded ones, then the spec's script."""
        n = max(len(spec.scripted_inputs), max(self.recorded_inputs, default=0))
        script = list(spec.scripted_inputs) + [""] * (n - len(spec.scripted_inputs))
        for t, said in self.recorded_inputs.items():
            script[t - 1] = said
        while script and not script[-1]:
            script.pop()
        return script


# --- sampling turn T K times -----------------------------------------------------------------------


@dataclass
class ForkOutcome:
    """K samples of one turn: the conflict rate there, with a 95% Wilson interval."""

    state: EpisodeState
    results: list[EpisodeResult]

    @property
    def judged(self) -> list[EpisodeResult]:
        """Samples whose turn T was judged: an error at or before T, a player fault or a split verdict at T are
        unknown outcomes (the auditor's, the player's or the endpoint's), not in the rate."""
        turn = self.state.turn
        return [r for r in self.results
                if not (r.error and (r.error.turn is None or r.error.turn <= turn))
                and not (r.unknown and not r.error and r.failure is not None and r.failure.turn <= turn)]

    @property
    def unknown(self) -> list[EpisodeResult]:
        """Samples that say nothing about the narrator at T (the complement of ``judged``)."""
        return [r for r in self.results if r not in self.judged]

    @property
    def conflicts(self) -> list[EpisodeResult]:
        """The narrator's confirmed conflicts at T."""
        return [r for r in self.judged if r.termination.is_conflict and r.failure is not None
                and r.failure.turn == self.state.turn]

    @property
    def rate(self) -> float | None:
        return len(self.conflicts) / len(self.judged) if self.judged else None

    @property
    def interval(self) -> tuple[float, float] | None:
        from ..analysis.metrics import wilson

        return wilson(len(self.conflicts), len(self.judged)) if self.judged else None

    def lines(self) -> list[str]:
        from ..core.safe_text import one_line, printable

        s = self.state
        out = [f"fork {s.spec_id} at turn {s.turn} of {s.trace}: {len(self.results)} sample(s)"]
        if s.player_input is not None:
            out.append(f"  player input at turn {s.turn}: {one_line(printable(s.player_input), 100)}")
        if s.recorded is not None:
            confirmed = s.recorded.get("confirmed") or []
            out.append("  recorded: " + (f"conflict:{confirmed[0]['type']}" if confirmed else "no conflict"))
        for i, r in enumerate(self.results):
            if r not in self.judged and r.error is not None:  # not judged: it errored at or before T
                out.append(f"  sample {i}: error ({r.error.kind}: {one_line(printable(r.error.message), 100)})")
            elif r not in self.judged:  # a player fault or a split verdict: the narrator is not judged by it
                out.append(f"  sample {i}: {r.termination.value} at turn {r.turns} (not the narrator's: not in "
                           "the rate)")
            elif r.failure is not None:
                ids = ",".join(r.failure.fact_ids + r.failure.commitment_ids)
                out.append(f"  sample {i}: conflict:{r.failure.type} at turn {r.failure.turn}"
                           + (f" ({ids})" if ids else "") + f": \"{one_line(printable(r.failure.quote), 100)}\"")
            else:
                out.append(f"  sample {i}: {r.termination.value} (turns={r.turns})")
        interval = self.interval
        if self.rate is None or interval is None:
            out.append(f"conflict rate at turn {s.turn}: n/a (no sample was judged)")
        else:
            lo, hi = interval
            types: dict[str, int] = {}
            for r in self.conflicts:
                if r.failure is not None:  # a conflict has its failure
                    types[r.failure.type] = types.get(r.failure.type, 0) + 1
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(types.items()))
            out.append(f"conflict rate at turn {s.turn}: {len(self.conflicts)}/{len(self.judged)} = {self.rate:.0%} "
                       f"(95% CI {lo:.0%}-{hi:.0%})" + (f"; {kinds}" if kinds else ""))
        return out


def fork_trace_path(out_dir: Path, state: EpisodeState, sample: int) -> Path:
    return out_dir / "traces" / f"{state.spec_id}--fork-t{state.turn}-s{sample}.jsonl"


async def fork(state: EpisodeState, spec: NarrativeSpec, config: RunConfig, *, narrator_factory: NarratorFactory,
               auditor: Auditor, samples: int = 3, continue_turns: int = 0, client: ModelClient | None = None,
               player_factory: Callable[[NarrativeSpec], Player] | None = None,
               out_dir: str | Path | None = None) -> ForkOutcome:
    """Play turn ``state.turn`` ``samples`` times concurrently from ``state`` (then ``continue_turns`` more),
    with the episode settings of ``config`` (the run's: the session's, or ``ncp fork``'s).

    Sample k is episode repeat k of the fork's results (the origin's repeat is in its ``fork`` record), so
    ``ncp compare`` pairs sample k of two forks of the same turn (before and after a prompt change)."""
    from .episode import Episode
    from .players import ScriptedPlayer

    if samples < 1:
        raise ForkError(f"samples must be >= 1, got {samples}")
    if continue_turns < 0:
        raise ForkError(f"continue must be >= 0, got {continue_turns}")
    if state.turn < 1:
        raise ForkError(f"{state.trace}: forking is from turn 1 on (turn 0 is the opening, played without history)")
    state.check_spec(spec)
    make_player = player_factory or (lambda s: ScriptedPlayer(state.scripted_inputs(s)))
    out = Path(out_dir) if out_dir is not None else None
    episodes = [
        Episode.from_config(spec, config, narrator=narrator_factory(), player=make_player(spec), auditor=auditor,
                            client=client, repeat=k, max_turns=state.turn + continue_turns,
                            trace_path=fork_trace_path(out, state, k) if out is not None else None, start=state,
                            fork_origin={"trace": state.trace, "turn": state.turn, "sample": k})
        for k in range(samples)
    ]
    results = await asyncio.gather(*(e.run() for e in episodes))
    return ForkOutcome(state, list(results))


def fork_results(outcome: ForkOutcome, out_dir: str | Path, config: dict[str, Any]) -> Path:
    """results.json of a fork (same format as a run's; every episode carries its ``fork`` origin)."""
    from ..analysis.results import build_results, write_results

    episodes = [r.record for r in outcome.results]
    return write_results(out_dir, build_results(
        {**config, "fork": {"trace": outcome.state.trace, "turn": outcome.state.turn}}, episodes))

