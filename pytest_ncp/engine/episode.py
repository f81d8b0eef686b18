"""One episode: player <-> narrator <-> auditor on one spec, until a termination reason.

Turn t >= 1 is the t-th (player input, narrator response) pair; an opening narration is turn 0 and
is audited like any other turn (DESIGN 7.3). Every turn is appended to a JSON-lines trace as soon as
it is audited, so an interrupted run keeps everything it did.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from .auditor import (
    Auditor, AuditorError, PromptTooLarge, ScreenContext, TurnAudit, TurnContext, input_screener, success_confirmer,
)
from ..core.config import DEFAULT_MAX_RESPONSE_CHARS, RunConfig, episode_key
from ..core.options import DEFAULT_MAX_RESPONSE_TOKENS
from ..core.options import default
from ..core.ledger import FactLedger
from ..llm import (
    Completion, CostCapReached, ModelClient, ModelError, Usage, current_episode, current_usage, in_chain, scrub,
)
from .narrators import LLMNarrator, Narrator, NarratorContext, accepts_argument, call_maybe_async, call_narrator
from .players import Player, PlayerView, ScriptedPlayer
from ..core.quotes import words
from ..core.reading import read, unreadable
from ..core.records import (
    Agreement, CommitmentState, Ending, EpisodeRecord, ErrorKind, ErrorRecord, Failure, FlagCounts, ForkOrigin,
    NodeReached, Owner, PlayerFault, Screening, SpeculativeUsage, Termination,
)
from ..core.safe_text import format_traceback, one_line
from ..prompts import PROMPT_VERSION
from ..core.spec import NarrativeSpec
from ..core.traces import TraceWriter, read_trace


@dataclass(frozen=True)
class Turn:
    turn: int
    player_input: str | None
    response: str


@dataclass
class EpisodeResult:
    spec: NarrativeSpec
    repeat: int
    termination: Termination
    turns: int
    node_index: int
    commitment_states: dict[str, CommitmentState]
    ledger: FactLedger
    transcript: list[Turn] = field(default_factory=list)
    audits: list[TurnAudit] = field(default_factory=list)
    failure: Failure | None = None
    error: ErrorRecord | None = None
    usage: Usage = field(default_factory=Usage)
    trace: str | None = None
    # Nodes reached, in order: {"id", "trigger_turn", "reached_turn"} (the trigger may precede the key delta).
    nodes: list[dict[str, Any]] = field(default_factory=list)
    trigger_turn: int | None = None  # the current node's trigger happened at this turn; its key delta has not yet
    # Model calls of a turn played ahead and discarded because the episode ended first (pipelining).
    speculative: Usage = field(default_factory=Usage)
    # A forked episode: {"trace", "turn", "sample"} of its origin (``ncp fork``); None for a normal one.
    fork: dict[str, Any] | None = None
    cut_by: str | None = None  # termination budget: the option that cut it ("max-cost")
    # Termination PLAYER_FAULT: {"turn", "input", "problems", "attempts"} of the unfair input that provoked it.
    player_fault: dict[str, Any] | None = None
    # Simulated players' inputs, screened (issue 23): {"inputs", "unfair", "regenerated", "played_unfair",
    # "calls"}; empty when nothing was screened (scripted players).
    screening: dict[str, int] = field(default_factory=dict)

    @property
    def spec_id(self) -> str:
        return self.spec.id

    @property
    def progress(self) -> float:
        return self.node_index / len(self.spec.trajectory) if self.spec.trajectory else 0.0

    @property
    def satisfied(self) -> float:
        """Share of the spec's achievements and orderings whose condition was met (invariants are ``held``).

        Over the spec's own commitments: the default world rules (W1, ...) are invariants, held or violated."""
        states = [self.commitment_states[c.id] for c in self.spec.commitments
                  if c.kind != "invariant" and c.id in self.commitment_states]
        return sum(s == "SATISFIED" for s in states) / len(states) if states else 0.0

    @property
    def held(self) -> float | None:
        """Share of invariants (the default world rules included) never violated; None when there are none
        or no turn was audited."""
        states = [self.commitment_states[c.id] for c in self.spec.all_commitments
                  if c.kind == "invariant" and c.id in self.commitment_states]
        if not states or not self.audits:
            return None
        return sum(s != "VIOLATED" for s in states) / len(states)

    @property
    def ending(self) -> Ending:
        """What the ending means (``core.records.Ending``: owner, failure, judged, unknown, censored)."""
        return Ending.of(self.termination, self.error.kind if self.error is not None else None)

    @property
    def survived(self) -> bool:
        return self.ending.survived

    @property
    def owner(self) -> Owner:
        """Who owns the outcome (DESIGN 7.5): narrator, player, auditor, model, ..."""
        return self.ending.owner

    @property
    def unknown(self) -> bool:
        """An outcome that says nothing about the narrator: censored, bounded by the error budget, a pytest
        error and never a failure."""
        return self.ending.unknown

    @property
    def verdicts(self) -> list[dict[str, Any]]:
        return [a.verdicts() for a in self.audits]

    def flag_counts(self) -> dict[str, int]:
        """Flags the conflict check raised over the episode, and what became of the doubtful ones: a flag
        whose quote was never verified, or that the auditor withdrew on a retry, is counted, never dropped."""
        counts = {"raised": 0, "confirmed": 0, "unverified": 0, "unverified_confirmed": 0, "withdrawn": 0,
                  "withdrawn_confirmed": 0}
        split = split_confirmed = 0
        for audit in self.audits:
            for i, confirmation in enumerate(audit.confirmations):
                status = audit.status_of(i)
                counts["raised"] += 1
                counts["confirmed"] += confirmation.confirmed
                if status != "verified":
                    counts[status] += 1
                    counts[f"{status}_confirmed"] += confirmation.confirmed
                tally = audit.votes[i] if i < len(audit.votes) else None
                if tally is not None and max(tally["yes"], tally["no"]) < tally["of"]:
                    split += 1
                    split_confirmed += confirmation.confirmed
        if any(audit.votes for audit in self.audits):  # --audit-votes K > 1: verdicts short of unanimity
            counts.update(split=split, split_confirmed=split_confirmed)
        return counts

    def ledger_diff(self) -> str:
        last = self.failure.turn if self.failure else self.turns
        return self.ledger.diff(0, last)

    @property
    def record(self) -> EpisodeRecord:
        """The episode's record (DESIGN 7.4): its entry in results.json, what travels between processes."""
        # Set only when there is one: results.json keeps the keys it always had (written exclude_unset).
        optional: dict[str, Any] = {
            **({"fork": ForkOrigin(**self.fork)} if self.fork else {}),
            **({"cache_write_tokens": self.usage.cache_write_tokens} if self.usage.cache_write_tokens else {}),
            **({"cut_by": self.cut_by} if self.cut_by else {}),
            **({"player_fault": PlayerFault.model_validate(self.player_fault)} if self.player_fault else {}),
            **({"screening": Screening(**self.screening)} if self.screening else {}),
        }
        return EpisodeRecord(
            spec_id=self.spec.id, repeat=self.repeat, termination=self.termination, turns=self.turns,
            progress=round(self.progress, 6), satisfied=round(self.satisfied, 6),
            held=None if self.held is None else round(self.held, 6), spec_fingerprint=self.spec.fingerprint,
            failure=self.failure, error=self.error, commitments=dict(self.commitment_states),
            nodes_reached=self.node_index, nodes=[NodeReached(**n) for n in self.nodes],
            tokens=self.usage.tokens, prompt_tokens=self.usage.prompt_tokens,
            completion_tokens=self.usage.completion_tokens, cached_tokens=self.usage.cached_tokens,
            cost_usd=round(self.usage.cost_usd, 8), trace=self.trace,
            speculative=SpeculativeUsage(calls=self.speculative.calls, tokens=self.speculative.tokens,
                                         cost_usd=round(self.speculative.cost_usd, 8)),
            truncated_calls=len(self.usage.truncated), structured_output=dict(self.usage.output_modes),
            flags=FlagCounts(**self.flag_counts()), **optional,
        )

    @classmethod
    def from_trace(cls, spec: NarrativeSpec, path: str | Path) -> EpisodeResult | None:
        """Rebuild a finished episode from its trace; None when the trace has no end (interrupted)."""
        from ..core.wire import CommitmentCheck, Confirmation, Conflict, FactUpdate, TrajectoryUpdate

        trace = read_trace(path)
        if trace.end is None:
            return None
        end = EpisodeRecord.model_validate({k: v for k, v in trace.end.items() if k != "event"})
        ledger = FactLedger.from_initial((f.id, f.text) for f in spec.initial_facts)
        result = cls(spec=spec, repeat=end.repeat, termination=end.termination, turns=end.turns,
                     node_index=end.nodes_reached or 0, commitment_states=dict(end.commitments), ledger=ledger,
                     trace=str(path), nodes=[n.model_dump() for n in end.nodes],
                     fork=end.fork.model_dump(exclude_unset=True) if end.fork else None, cut_by=end.cut_by,
                     player_fault=end.player_fault.model_dump(mode="json") if end.player_fault else None,
                     screening=end.screening.model_dump(exclude_unset=True) if end.screening else {},
                     failure=end.failure, error=end.error)
        for r in trace.of("turn"):
            v = r["verdicts"]
            result.transcript.append(Turn(r["turn"], r.get("player_input"), r["response"]))
            result.audits.append(TurnAudit(
                turn=r["turn"],
                flagged=[Conflict.model_validate(c) for c in v["conflict_check"]["conflicts"]],
                flag_status=list(v.get("flag_status") or []),
                confirmations=[Confirmation.model_validate(c) for c in v["conflict_confirmation"]],
                votes=[dict(t) for t in v.get("conflict_votes") or []],
                fact_update=FactUpdate.model_validate(v["fact_update"]) if v.get("fact_update") else None,
                trajectory=TrajectoryUpdate.model_validate(v["trajectory_update"]) if v.get("trajectory_update") else None,
                commitments=CommitmentCheck.model_validate(v["commitment_check"]) if v.get("commitment_check") else None,
            ))
            for change in r.get("ledger_changes", []):
                if change["op"] == "add":
                    ledger.add(change["text"], change["turn"], change.get("quote"))
                else:
                    ledger.negate(change["fact_id"], change["turn"], change.get("quote"))
        if end.prompt_tokens is None:  # a trace from before the split: every token counted as a prompt token
            result.usage = Usage(prompt_tokens=end.tokens, cost_usd=end.cost_usd)
        else:
            result.usage = Usage(prompt_tokens=end.prompt_tokens, completion_tokens=end.completion_tokens or 0,
                                 cached_tokens=end.cached_tokens or 0, cache_write_tokens=end.cache_write_tokens or 0,
                                 cost_usd=end.cost_usd)
        return result


class _Cut(Exception):
    """The run's budget refused a model call of this episode: it ends as ``budget`` (``by``: the option)."""

    def __init__(self, by: str, message: str):
        self.by, self.message = by, message
        super().__init__(message)


class _EpisodeError(Exception):
    """Why the episode could not go on: becomes its ``ErrorRecord``, with the turn it happened at."""

    def __init__(self, kind: ErrorKind, message: str, traceback: str | None = None, audit: TurnAudit | None = None):
        super().__init__(message)
        self.kind, self.message, self.traceback, self.audit = kind, message, traceback, audit
        self.player_input: str | None = None  # set when the turn's player had spoken


@dataclass
class _Ahead:
    """A turn played ahead of its predecessor's audit, and what its model calls used so far."""

    task: asyncio.Future[tuple[str, str] | None]
    usage: Usage
    narrated: bool


# --- the turn loop ---------------------------------------------------------------------------------


@dataclass
class Episode:
    spec: NarrativeSpec
    narrator: Narrator
    player: Player
    auditor: Auditor
    max_turns: int = 100
    repeat: int = 0
    # A longer response is the narrator's error before any audit call (issue 19): padded past the
    # auditor's context window it would otherwise become a model error, outside survival.
    max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS
    # Seconds a narrator hook may take (--narrator-timeout): a hung narrator is its own error, not a hung run.
    narrator_timeout: float | None = None
    # The same in tokens of the auditor's tokenizer (a conservative bound when litellm does not know it):
    # the unit the auditor's window overflows in.
    max_response_tokens: int = DEFAULT_MAX_RESPONSE_TOKENS
    client: ModelClient | None = None
    narrator_model: str | None = None
    trace_path: str | Path | None = None
    config: dict[str, Any] = field(default_factory=dict)
    on_turn: Callable[[], None] | None = None  # after each audited turn (progress displays)
    pipeline: bool = True  # play turn t+1 while turn t is audited (see _loop); False: the sequential reference
    # Asked between turns: True ends the episode as CANCELLED (a sequential gate decided, --sequential-cancel).
    stop: Callable[[], bool] | None = None
    # Start from a recorded state (a fork, see fork.py): turn ``start.turn`` is played with its recorded
    # player input after the recorded history; ``fork_origin`` ({"trace", "turn", "sample"}) marks the result.
    start: Any = None
    fork_origin: dict[str, Any] | None = None
    # Screening of simulated players' inputs (issue 23): None screens every player but a scripted (or replayed)
    # one, when the auditor can (``screen_input``); an unfair input is regenerated up to ``player_retries``
    # times with the problem told to the player, then played, and a conflict it provokes is a player fault.
    screen: bool | None = None
    player_retries: int = default("player-retries")
    # Screen records of replayed inputs, by turn (``ncp reaudit`` of a simulated player's run): a turn its
    # source played unfair stays unfair, so a conflict there is still the player's fault.
    recorded_screens: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Why the cost cap would not pay for this episode to its end (engine.admission): it ends as ``budget`` before
    # its first call, so the money goes to episodes that can finish.
    refused: str | None = None
    # The turn being audited or played (number, player input, narrator response): what an errored
    # turn's trace shows; and where the current turn's share of the truncated calls starts.
    _playing: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _truncated_mark: int = field(default=0, init=False, repr=False)
    _screens: dict[int, dict[str, Any]] = field(default_factory=dict, init=False, repr=False)  # by turn

    @classmethod
    def from_config(cls, spec: NarrativeSpec, config: RunConfig, *, narrator: Narrator, player: Player,
                    auditor: Auditor, client: ModelClient | None = None, repeat: int = 0,
                    trace_path: str | Path | None = None, max_turns: int | None = None,
                    on_turn: Callable[[], None] | None = None, stop: Callable[[], bool] | None = None,
                    start: Any = None, fork_origin: dict[str, Any] | None = None,
                    recorded_screens: dict[int, dict[str, Any]] | None = None) -> Episode:
        """The one way to build an episode: every episode setting of the run's ``config`` reaches it.

        The keywords are what a host decides itself: the agents it plays with, where the trace goes, and
        for a fork or a re-audit, where the episode starts and stops (``max_turns`` then overrides the
        run's turn limit) and what its source recorded."""
        return cls(
            spec=spec, narrator=narrator, player=player, auditor=auditor, client=client, repeat=repeat,
            max_turns=config.max_turns if max_turns is None else max_turns,
            max_response_chars=config.max_response_chars, max_response_tokens=config.max_response_tokens,
            narrator_timeout=config.narrator_timeout,
            player_retries=config.player_retries,
            narrator_model=config.narrator_model, pipeline=config.pipeline, config=config.to_dict(),
            trace_path=trace_path, on_turn=on_turn, stop=stop, start=start, fork_origin=fork_origin,
            recorded_screens=dict(recorded_screens or {}),
        )

    async def run(self) -> EpisodeResult:
        usage = Usage()
        token = current_usage.set(usage)
        key = episode_key(self.spec.id, self.repeat)
        if self.fork_origin is not None:  # its own cassette, apart from the episode it was forked from
            key = f"{self.spec.id}--fork-t{self.fork_origin['turn']}-s{self.fork_origin.get('sample', 0)}"
        episode_token = current_episode.set(key)
        trace = TraceWriter(self.trace_path) if self.trace_path else None
        result = EpisodeResult(
            spec=self.spec, repeat=self.repeat, termination=Termination.ERROR, turns=0, node_index=0,
            commitment_states={c.id: "PENDING" for c in self.spec.all_commitments},
            ledger=FactLedger.from_initial((f.id, f.text) for f in self.spec.initial_facts),
            usage=usage, trace=str(self.trace_path) if self.trace_path else None, fork=self.fork_origin,
        )
        if self.start is not None:
            self.start.apply(result)
        self._screens = {int(t): dict(v) for t, v in self.recorded_screens.items()}
        try:
            if trace:
                trace.write("start", spec_id=self.spec.id, spec_path=self.spec.path, repeat=self.repeat,
                            max_turns=self.max_turns, spec_fingerprint=self.spec.fingerprint,
                            spec_sections=self.spec.section_fingerprints,
                            prompt_version=PROMPT_VERSION, config=self.config,
                            ledger=result.ledger.to_list(),
                            **({"fork": self.fork_origin, "from_turn": self.start.turn} if self.start else {}))
            errored: _EpisodeError | None = None
            try:
                result.termination = await self._loop(result, trace)
            except _Cut as exc:
                result.termination, result.cut_by = Termination.BUDGET, exc.by
                if trace:
                    trace.write("budget", by=exc.by, message=exc.message, turn=self._playing.get("turn", result.turns),
                                last_completed_turn=result.turns)
            except _EpisodeError as exc:
                errored = exc
                result.termination = Termination.ERROR
                result.error = ErrorRecord(kind=exc.kind, message=exc.message, traceback=exc.traceback,
                                           turn=self._playing.get("turn", result.turns))
            if trace:
                if result.error:
                    trace.write("error", **self._error_evidence(result, errored))
                end = result.record.model_dump(mode="json", exclude_unset=True)
                trace.write("end", **{k: v for k, v in end.items() if k != "trace"})
            return result
        finally:
            current_usage.reset(token)
            current_episode.reset(episode_token)
            if trace:
                trace.close()

    def _error_evidence(self, result: EpisodeResult, errored: _EpisodeError | None) -> dict[str, Any]:
        """The trace record of an errored turn: where it happened and everything said in it."""
        assert result.error is not None
        audit = errored.audit if errored else None
        return {
            **result.error.model_dump(mode="json"),
            "turn": self._playing.get("turn", result.turns),
            "player_input": self._playing.get("player_input") or getattr(errored, "player_input", None),
            "response": self._playing.get("response"),
            "rejected_answers": list(audit.rejected_answers) if audit else [],
            "auditor_calls": [_call_record(c) for c in audit.calls] if audit else [],
            "truncated_calls": result.usage.truncated[self._truncated_mark:],
            "last_completed_turn": result.turns,
        }

    def _mark(self, turn: int, player_input: str | None = None, response: str | None = None) -> None:
        self._playing = {"turn": turn, "player_input": player_input, "response": response}

    async def _loop(self, result: EpisodeResult, trace: TraceWriter | None) -> Termination:
        """Play, audit and apply turns until one ends the episode.

        Pipelined (the default), turn t+1 is played while turn t is audited: the next input and
        narration depend only on the transcript, never on an audit. When the audit of t ends the
        episode, the speculative turn is discarded (its usage goes to ``result.speculative``), so
        transcripts, traces and verdicts are those of the sequential schedule. Only players and
        narrators that declare ``speculation_safe = True`` are called ahead: for them one extra call,
        whose answer is dropped, is harmless; any other narrator is called exactly as sequentially.
        """
        history: list[tuple[str, str]] = []
        played: tuple[str | None, str] | None
        self._mark(0)
        if self.refused is not None:
            raise _Cut("max-cost", self.refused)
        await self._guard("narrator", self._reset)
        if self.start is not None and self.start.turn >= 1:
            # A fork: the recorded history stands, only turn T (its recorded input) and later are played.
            history = [(str(i), str(r)) for i, r in self.start.history]
            await self._guard("narrator", self._restore, history)
            turn = self.start.turn
            self._mark(turn, self.start.player_input)
            played = await self._play(turn, tuple(history), player_input=self.start.player_input)
        elif (opening := await self._guard("narrator", self._opening, history)) is not None:
            played, turn = (None, self._check_response(opening, "opening()")), 0
        else:
            self._mark(1)
            played, turn = await self._play(1, tuple(history)), 1
        while played is not None:
            player_input, response = played
            self._mark(turn, player_input, response)
            following = turn + 1
            ahead = self._speculate(following, (*history, (player_input or "", response))) \
                if following <= self.max_turns else None
            try:
                end = await self._turn(result, trace, turn, player_input, response, history)
            except BaseException:
                await self._discard(ahead, result)
                raise
            if end:
                await self._discard(ahead, result)
                return end
            if following > self.max_turns:
                return Termination.TURN_LIMIT
            if self.stop is not None and self.stop():
                await self._discard(ahead, result)
                return Termination.CANCELLED
            self._mark(following)
            played, turn = await self._resume(ahead, following, history), following
        return Termination.SCRIPT_EXHAUSTED

    async def _play(self, turn: int, history: Sequence[tuple[str, str]], *, narrate: bool = True,
                    player_input: str | None = None) -> tuple[str, str] | None:
        """The player's input and the narrator's response for ``turn``; None when the script ran out."""
        if player_input is None:
            view = PlayerView(player=self.spec.player, turn=turn, history=tuple(history))
            said = await self._guard("player", call_maybe_async, self.player.next_input, view)
            if said is None:
                return None
            player_input = str(said)
            if self._screening():
                # A narrator that may be called ahead answers while its input is screened (pipelined runs):
                # the screen then costs no latency when the input is fair, and an unfair one's answer is dropped.
                alongside = narrate and self.pipeline and bool(getattr(self.narrator, "speculation_safe", False))
                player_input, narration = await self._screened(
                    view, player_input, (lambda said: self._narrate(turn, history, said)) if alongside else None)
                if narration is not None:
                    return player_input, await narration
        if not narrate:
            return player_input, ""
        return player_input, await self._narrate(turn, history, player_input)

    async def _narrate(self, turn: int, history: Sequence[tuple[str, str]], player_input: str) -> str:
        try:
            answered = await self._guard("narrator", self._hook, self.narrator.respond, "respond()",
                                         player_input, self._context(turn, list(history)))
            return self._check_response(answered, "respond()")
        except _EpisodeError as exc:
            exc.player_input = player_input  # the evidence of the errored turn, also when played ahead
            raise

    def _check_response(self, answered: Any, where: str) -> str:
        """The narrator's answer as the one exact ``str`` every check, the trace and the audit see; its error
        when it is no readable narration within the limits."""
        response = _exact_text(answered, where)
        _check_response(response, where, self.max_response_chars)
        from ..llm.tokens import count_tokens

        model = getattr(self.auditor, "model", None)
        tokens, exact = count_tokens(model if isinstance(model, str) else None, response)
        if tokens > self.max_response_tokens:
            how = f"{model}'s tokenizer" if exact else "a conservative count; litellm knows no tokenizer for the auditor"
            raise _EpisodeError("narrator", f"{where} returned about {tokens:,} tokens ({how}), over the "
                                            f"limit of {self.max_response_tokens:,} (--max-response-tokens)")
        return response

    def _screening(self) -> bool:
        """Whether this episode screens its player's inputs: a simulated (not scripted) player, an auditor
        that can; ``screen`` overrides."""
        can = input_screener(self.auditor) is not None
        if self.screen is not None:
            return self.screen and can
        return not isinstance(self.player, ScriptedPlayer) and can

    async def _screened(self, view: PlayerView, said: str, narrate: Callable[[str], Any] | None = None
                        ) -> tuple[str, asyncio.Future[str] | None]:
        """The input to play at ``view.turn``: ``said`` once the screen finds it fair, else the player asked
        again (told why) up to ``player_retries`` times; the last attempt is played even when still unfair,
        and the turn's screen record (``_screens``) says so (``_apply`` then blames the player for a conflict).

        With ``narrate``, each attempt is narrated while it is screened; the narration of the input played is
        returned (a task), the others are cancelled (a narrator error there never happened to the episode)."""
        screener = input_screener(self.auditor)
        assert screener is not None, "only an auditor that screens is asked to (_screening)"
        history = tuple(view.history)[-SCREEN_WINDOW:]
        attempts: list[dict[str, Any]] = []
        calls = 0
        while True:
            ctx = ScreenContext(spec=self.spec, turn=view.turn, player_input=said, history=history)
            narration = asyncio.ensure_future(narrate(said)) if narrate is not None else None
            try:
                verdict = await self._guard("auditor", screener.screen_input, ctx)
            except BaseException as exc:
                await _cancelled(narration)
                if isinstance(exc, _EpisodeError):
                    exc.player_input = said
                raise
            finally:
                calls += len(ctx.calls)
            attempts.append({"input": said, **verdict.model_dump()})
            if verdict.fair or len(attempts) > self.player_retries:
                break
            view = replace(view, rejected=(*view.rejected, (said, _why_unfair(verdict))))
            try:
                again = await self._guard("player", call_maybe_async, self.player.next_input, view)
            except BaseException:
                await _cancelled(narration)
                raise
            if again is None:  # nothing else to say: the unfair input is what the player plays
                break
            await _cancelled(narration)
            said = str(again)
        self._screens[view.turn] = {"fair": bool(verdict.fair), "attempts": attempts, "calls": calls}
        return said, narration

    def _speculate(self, turn: int, history: Sequence[tuple[str, str]]) -> _Ahead | None:
        """Start playing ``turn`` ahead of the audit of the turn before, where that is safe."""
        if not self.pipeline or not getattr(self.player, "speculation_safe", False):
            return None
        narrate = bool(getattr(self.narrator, "speculation_safe", False))
        usage = Usage()

        async def ahead() -> tuple[str, str] | None:
            current_usage.set(usage)  # this task's own context: its calls count apart until kept
            return await self._play(turn, history, narrate=narrate)

        return _Ahead(asyncio.ensure_future(ahead()), usage, narrate)

    async def _resume(self, ahead: _Ahead | None, turn: int,
                      history: list[tuple[str, str]]) -> tuple[str, str] | None:
        """The next turn: the speculative one when there is one (now kept), else played now."""
        if ahead is None:
            return await self._play(turn, tuple(history))
        try:
            played = await ahead.task
        finally:
            episode_usage = current_usage.get()
            if episode_usage is not None:
                episode_usage.merge(ahead.usage)
        if played is None or ahead.narrated:
            return played
        return await self._play(turn, tuple(history), player_input=played[0])

    @staticmethod
    async def _discard(ahead: _Ahead | None, result: EpisodeResult) -> None:
        if ahead is None:
            return
        ahead.task.cancel()
        await asyncio.gather(ahead.task, return_exceptions=True)
        result.speculative.merge(ahead.usage)

    async def _turn(self, result: EpisodeResult, trace: TraceWriter | None, turn: int,
                    player_input: str | None, response: str, history: list[tuple[str, str]]) -> Termination | None:
        ctx = TurnContext(
            spec=self.spec, turn=turn, player_input=player_input, response=response,
            facts=result.ledger.active(), node_index=result.node_index,
            commitment_states=dict(result.commitment_states),
            previous_response=history[-1][1] if history else None, trigger_turn=result.trigger_turn,
        )
        audit = await self._guard("auditor", self.auditor.audit, ctx)
        result.transcript.append(Turn(turn, player_input, response))
        result.audits.append(audit)
        screen = self._screens.pop(turn, None)
        if screen is not None:
            _count_screen(result.screening, screen)
        before = (dict(result.commitment_states), result.node_index, len(result.nodes), result.trigger_turn)
        end = self._apply(result, audit, turn, screen)

        def undo() -> None:  # what this turn satisfied or reached (its facts stay: they were verified)
            result.commitment_states, result.node_index, result.trigger_turn = before[0], before[1], before[3]
            del result.nodes[before[2]:]

        if end is Termination.SUCCESS:
            try:
                confirmed = await self._success_confirmed(ctx, audit, result, before[0])
            except (_EpisodeError, _Cut):
                undo()  # never confirmed (an auditor error, the cost cap): the success does not stand either
                raise
            if not confirmed:  # the confirmation found the story not done: the episode goes on
                undo()
                end = None
        history.append((player_input or "", response))
        if trace:
            trace.write(
                "turn", turn=turn, player_input=player_input, response=response, verdicts=audit.verdicts(),
                confirmed=[c.conflict.model_dump() for c in audit.confirmed],
                ledger_changes=[c.to_dict() for c in result.ledger.changes_at(turn)],
                node_index=result.node_index, trigger_turn=result.trigger_turn,
                commitments=dict(result.commitment_states), tokens=result.usage.tokens, cost_usd=round(result.usage.cost_usd, 8),
                auditor_calls=[_call_record(c) for c in audit.calls],
                rejected_answers=list(getattr(audit, "rejected_answers", [])),
                truncated_calls=result.usage.truncated[self._truncated_mark:],
                **({"screen": screen} if screen is not None else {}),
                **_reading_flags(player_input, response),
            )
        self._truncated_mark = len(result.usage.truncated)
        if self.on_turn is not None:
            self.on_turn()
        return end

    def _apply(self, result: EpisodeResult, audit: TurnAudit, turn: int,
               screen: dict[str, Any] | None = None) -> Termination | None:
        """DESIGN section 3, steps 2-4 and termination, from one turn's validated verdicts.

        A confirmed conflict ends the episode. It is the narrator's (``conflict:*``), also when it stood on a
        split vote (a strict majority of ``--audit-votes``; the split is recorded in ``failure.agreement``),
        unless the turn's input was played unfair and every confirmed conflict is one that input caused
        (``_caused_by_input``): then it is a ``player_fault``. Only the narrator's marks commitments VIOLATED."""
        if turn >= 1:
            result.turns = turn
        confirmed = audit.confirmed
        if confirmed:
            unfair = screen is not None and not screen["fair"]
            if unfair and screen is not None:
                # A narration can steer a simulated player into an unfair input: only what that input caused
                # is the player's; any other confirmed conflict of the turn is the narrator's.
                flagged = screen["attempts"][-1]["problems"]
                own = [c for c in confirmed if not self._caused_by_input(c.conflict, flagged, result.ledger)]
                confirmed, unfair = (own, False) if own else (confirmed, True)
            # Cite a unanimous conflict before a split one, a verified quote before an unverified one.
            first = min(confirmed, key=lambda c: (not c.unanimous, c.status != "verified"))
            ending = Termination.PLAYER_FAULT if unfair else Termination(f"conflict:{first.conflict.type}")
            if ending.is_conflict:
                for c in confirmed:
                    for cid in c.conflict.commitment_ids if c.conflict.type == "commitment" else ():
                        result.commitment_states[cid] = "VIOLATED"
            result.failure = Failure(
                turn=turn, type=first.conflict.type, fact_ids=list(first.conflict.fact_ids),
                commitment_ids=list(first.conflict.commitment_ids), quote=first.conflict.quote,
                explanation=first.conflict.explanation, confirmation=first.confirmation.explanation,
                quote_verified=first.status == "verified",
                **({"agreement": Agreement(yes=first.votes["yes"], of=first.votes["of"])} if first.votes else {}),
            )
            if unfair and screen is not None:
                last = screen["attempts"][-1]
                result.player_fault = {"turn": turn, "input": last["input"], "problems": list(last["problems"]),
                                       "attempts": len(screen["attempts"])}
            return ending
        # No confirmed conflict: the turn's fact update is committed.
        if audit.fact_update:
            for n in audit.fact_update.negated:
                if result.ledger.is_active(n.fact_id):
                    result.ledger.negate(n.fact_id, turn, n.quote)
            for a in audit.fact_update.added:
                result.ledger.add(a.text.strip(), turn, a.quote)
        self._advance(result, audit, turn)
        states = result.commitment_states
        if audit.commitments:
            for s in audit.commitments.satisfied:
                if states.get(s.commitment_id) == "PENDING" and self._claimable(s.commitment_id):
                    states[s.commitment_id] = "SATISFIED"
        self._derive_satisfaction(result)
        achievements = [c.id for c in self.spec.achievements]
        if achievements and all(states[c] == "SATISFIED" for c in achievements):
            return Termination.SUCCESS
        return None

    def _caused_by_input(self, conflict: Any, flagged: Sequence[dict[str, Any]], ledger: FactLedger) -> bool:
        """Whether a conflict is one an unfair input caused: the narrator refusing it (a player-input conflict),
        or a conflict whose quote, facts or commitments share a word of substance with what the screen flagged
        in the input ("The guard falls asleep" and a fact "The guard never sleeps at his post")."""
        if conflict.type == "player_input":
            return True
        said = _content_words(" ".join(str(p.get("quote", "")) for p in flagged))
        texts = [conflict.quote, *(f.text for f in ledger.active() if f.id in conflict.fact_ids),
                 *(c.text for c in self.spec.all_commitments if c.id in conflict.commitment_ids)]
        return bool(said & _content_words(" ".join(texts)))

    async def _success_confirmed(self, ctx: TurnContext, audit: TurnAudit, result: EpisodeResult,
                                 states_before: dict[str, CommitmentState]) -> bool:
        """A success ends the episode, so it is confirmed like a conflict (issue 19): a second auditor call
        reads the response and the achievements this turn completed. An auditor without ``confirm_success``
        (a custom one) is taken at its word."""
        confirmer = success_confirmer(self.auditor)
        if confirmer is None:
            return True
        done = [c for c in self.spec.achievements
                if result.commitment_states[c.id] == "SATISFIED" and states_before.get(c.id) != "SATISFIED"]
        evidence = {s.commitment_id: s.evidence for s in (audit.commitments.satisfied if audit.commitments else [])}
        trajectory = audit.trajectory.evidence if audit.trajectory else ""
        claims = [(c, evidence.get(c.id) or trajectory) for c in done]
        confirmation = await self._guard("auditor", confirmer.confirm_success, ctx, claims)
        audit.success_confirmation = confirmation
        return bool(confirmation.confirmed)

    def _advance(self, result: EpisodeResult, audit: TurnAudit, turn: int) -> None:
        """Step 3: the current node's trigger is remembered from the turn it happened; the node is reached
        when its key delta happens then or later. A key delta before the trigger does not count."""
        update = audit.trajectory
        if update is None or result.node_index >= len(self.spec.trajectory):
            return
        if result.trigger_turn is None and update.trigger_event_occurred:
            result.trigger_turn = turn
        if result.trigger_turn is not None and update.key_delta_occurred:
            node = self.spec.trajectory[result.node_index]
            result.nodes.append({"id": node.id, "trigger_turn": result.trigger_turn, "reached_turn": turn})
            result.node_index += 1
            result.trigger_turn = None

    def _claimable(self, commitment_id: str) -> bool:
        """Whether the commitment check's word can satisfy a commitment: never an invariant, and never one
        that names trajectory nodes, which is satisfied when the story reaches them (``_derive_satisfaction``)
        and not before: a narrator that writes an achievement's own words at turn 1 has not told the story."""
        c = self.spec.commitment(commitment_id)
        nodes = {n.id for n in self.spec.trajectory}
        named = {*c.depends_on, c.before, c.after} & nodes
        return c.kind != "invariant" and not named

    def _derive_satisfaction(self, result: EpisodeResult) -> None:
        """Commitments the trajectory itself fulfils: an ordering once its `after` node is reached (nodes
        are reached in order, so `before` came first), an achievement once every node it depends on is."""
        reached = {n.id for n in self.spec.trajectory[: result.node_index]}
        nodes = {n.id for n in self.spec.trajectory}
        for c in self.spec.commitments:
            if result.commitment_states[c.id] != "PENDING":
                continue
            if c.kind == "ordering" and c.after in reached and c.before in reached:
                result.commitment_states[c.id] = "SATISFIED"
            elif c.kind == "achievement":
                deps = [d for d in c.depends_on if d in nodes]
                if deps and all(d in reached for d in deps):
                    result.commitment_states[c.id] = "SATISFIED"

    # --- narrator hooks and error classification ---------------------------------------------
    def _context(self, turn: int, history: list[tuple[str, str]]) -> NarratorContext:
        return NarratorContext(spec=self.spec, turn=turn, history=tuple(history), llm=self.client,
                               model=self.narrator_model, repeat=self.repeat)

    # The optional hooks (narrators.SupportsReset, SupportsRestore, SupportsOpening, SpeculationSafe) are
    # looked up with getattr, not isinstance: a runtime protocol check reads attributes statically, and a
    # narrator behind a proxy (``__getattr__``) would lose its hooks.
    async def _hook(self, fn: Any, name: str, *args: Any) -> Any:
        """Call a narrator hook within ``narrator_timeout``. Built-in narrators only wait on model calls, which
        their own timeouts bound (a slow model is the model's error, not the narrator's)."""
        timeout = None if isinstance(self.narrator, LLMNarrator) else self.narrator_timeout
        return await call_narrator(fn, *args, timeout=timeout, name=name)

    async def _reset(self) -> None:
        reset = getattr(self.narrator, "reset", None)
        if callable(reset):
            await self._hook(reset, "reset()", self.spec)

    async def _restore(self, history: list[tuple[str, str]]) -> None:
        restore = getattr(self.narrator, "restore", None)
        if callable(restore):
            await self._hook(restore, "restore()", tuple(history))

    async def _opening(self, history: list[tuple[str, str]]) -> str | None:
        opening = getattr(self.narrator, "opening", None)
        if not callable(opening):
            return None
        args = (self._context(0, history),) if accepts_argument(opening) else ()
        opened: str | None = await self._hook(opening, "opening()", *args)
        return opened

    async def _guard(self, kind: ErrorKind, fn: Any, *args: Any) -> Any:
        """Run one part of a turn; classify what it raises by where it happened, never by its class.

        ``narrator`` / ``player``: anything their own code raised is theirs, whatever its class (a narrator
        that raises a ``ModelError``, a ``CostCapReached`` or an ``AuditorError`` of its own, or wraps one,
        fails like any narrator that raised), except a failure the run's own model client raised and that
        passed through the agent's code: that very object, recognised by identity (``ModelClient.raised``),
        stays the model endpoint's (``model``) or the budget's (a cost cap). ``auditor``: the harness's own
        audit, whose failures are classified by what they are.
        """
        try:
            return await call_maybe_async(fn, *args)
        except (_EpisodeError, _Cut):
            raise
        except Exception as exc:  # noqa: BLE001 - the agent under test may raise anything
            audit = getattr(exc, "audit", None)
            if kind in ("narrator", "player"):
                passed = self._passed_through(exc)
                if isinstance(passed, CostCapReached):
                    raise _Cut("max-cost", str(passed)) from exc
                if isinstance(passed, ModelError):
                    raise _EpisodeError("model", scrub(str(passed)), None, audit) from exc
                tb = scrub(format_traceback(exc))
                raise _EpisodeError(kind, scrub(f"{type(exc).__name__}: {exc}"), tb, audit) from exc
            cut = in_chain(exc, CostCapReached)  # also when a gather wrapped it
            if cut is not None:
                raise _Cut("max-cost", str(cut)) from exc
            model_error = _model_error_in(exc)
            if isinstance(exc, PromptTooLarge):
                owner: ErrorKind = "narrator" if exc.narrator_caused else "model"
                raise _EpisodeError(owner, scrub(str(exc)), None, audit) from exc
            if isinstance(exc, AuditorError):
                raise _EpisodeError("auditor", scrub(str(exc)), None, audit) from exc
            if model_error is not None:
                raise _EpisodeError("model", scrub(str(model_error)), None, audit) from exc
            tb = scrub(format_traceback(exc))
            raise _EpisodeError(kind, scrub(f"{type(exc).__name__}: {exc}"), tb, audit) from exc

    def _passed_through(self, exc: BaseException) -> BaseException | None:
        """The failure in ``exc``'s chain that one of the run's own model clients raised (the very object), if
        any: an outage or a cost cap the agent's call met, let through as it is or wrapped."""
        clients: list[Any] = [c for c in (self.client, getattr(self.player, "client", None),
                                          getattr(self.auditor, "client", None)) if callable(getattr(c, "raised", None))]
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            if isinstance(current, (ModelError, CostCapReached)) and any(c.raised(current) for c in clients):
                return current
            current = current.__cause__ or current.__context__
        return None


async def _cancelled(task: asyncio.Future[Any] | None) -> None:
    """Cancel a narration nobody will read, and let it finish (whatever it raised is dropped with it)."""
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# The exchanges the screen reads before an input: as many as the simulated player itself sees
# (SimulatedPlayer.window), so nothing the player was shown looks unknowable to the screen.
SCREEN_WINDOW = 20


def _why_unfair(verdict: Any) -> str:
    """What the player is told about an unfair input: each broken rule with the words that break it."""
    rules = {"world_event": "it says what happens in the world or what comes of your attempt",
             "other_character": "it says what another character does, says or decides",
             "unknowable": "it uses something your character cannot know yet"}
    parts = [f"{rules.get(p.rule, p.rule)} (\"{p.quote}\": {p.explanation})" for p in verdict.problems]
    return "; ".join(parts) or str(verdict.explanation)


def _count_screen(counts: dict[str, int], screen: dict[str, Any]) -> None:
    """Add one turn's screening to the episode's counts (``EpisodeResult.screening``)."""
    attempts = screen["attempts"]
    for key, n in (("inputs", 1), ("unfair", sum(not a["fair"] for a in attempts)),
                   ("regenerated", len(attempts) - 1), ("played_unfair", int(not screen["fair"])),
                   ("calls", int(screen["calls"]))):
        counts[key] = counts.get(key, 0) + n


def _model_error_in(exc: BaseException) -> ModelError | None:
    """The ModelError that caused ``exc``, also when a narrator wrapped it in its own exception."""
    return in_chain(exc, ModelError)


_FUNCTION_WORDS = frozenset("that this with from have your they them then there their into what when will would "
                             "were been being which while where about after before over under upon".split())


def _content_words(text: str) -> set[str]:
    """The words of substance in ``text`` as the quote matcher reads them (four letters or more)."""
    from ..core.quotes import normalise

    return {w for w in re.findall(r"\w{4,}", normalise(text)[0]) if w not in _FUNCTION_WORDS}


def _exact_text(value: Any, where: str) -> str:
    """``value`` as an exact ``str``, converted once. A subclass of ``str`` can answer ``len``, ``strip`` or
    ``str()`` with other text than it holds; its characters, copied into a plain ``str``, are the narration."""
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str.__str__(value)  # the characters held, whatever the subclass's own __str__ says
    raise _EpisodeError("narrator", f"{where} returned {type(value).__name__}, expected str")


def _check_response(response: Any, where: str, max_chars: int = DEFAULT_MAX_RESPONSE_CHARS) -> None:
    """What the narrator answered must be narration a person can read: its fault otherwise, never an unknown.

    No words after invisible characters are removed ("…", "* * *", emoji, zero-width spaces) cannot be
    quoted, so no auditor could convict it; over ``max_chars`` it would not fit the auditor's window."""
    if not isinstance(response, str):
        raise _EpisodeError("narrator", f"{where} returned {type(response).__name__}, expected str")
    if not response.strip():
        raise _EpisodeError("narrator", f"{where} returned an empty response")
    if (problem := unreadable(response)) is not None:
        raise _EpisodeError("narrator", f"{where} returned text a reader cannot read one way: {problem}")
    if words(response) == 0:
        raise _EpisodeError("narrator", f"{where} returned no words a reader can read "
                                        f"({one_line(response, 60)!r}): nothing to audit")
    if len(response) > max_chars:
        raise _EpisodeError("narrator", f"{where} returned {len(response):,} characters, over the limit "
                                        f"of {max_chars:,} (--max-response-chars)")


def _reading_flags(player_input: str | None, response: str) -> dict[str, Any]:
    """What reading the turn's text as a person does changed (invisible characters, look-alike letters,
    words mixing scripts): recorded in the trace, so text hidden from the reader is visible to a reviewer."""
    flags = {name: read(text).flags() for name, text in (("player_input", player_input), ("response", response))}
    flags = {name: f for name, f in flags.items() if f}
    return {"reading": flags} if flags else {}


def _call_record(c: Completion) -> dict[str, Any]:
    return {"step": c.step, "model": c.model, "attempts": c.attempts, "prompt_tokens": c.prompt_tokens,
            "completion_tokens": c.completion_tokens, "cached_tokens": c.cached_tokens,
            **({"cache_write_tokens": c.cache_write_tokens} if c.cache_write_tokens else {}),
            "cost_usd": c.cost_usd, "latency_s": round(c.latency_s, 4),
            "finish_reason": c.finish_reason, "output_mode": c.output_mode}
