"""The fixed audit protocol (DESIGN section 3) with the wire contract of DESIGN 7.1.

Per turn, four structured calls judge the same narrator response: conflict check, fact update,
trajectory update and commitment check. They are independent reads of one response, so they run
concurrently (one model round trip of latency); a confirmation call follows for every flagged
conflict. The episode commits the fact update only when no conflict is confirmed.

Fail closed: an answer that is not JSON, misses a field, has a value of the wrong type (parsing is
strict: ``"no"`` or ``0`` is not a boolean), names an unknown id or quotes text that is not a
substantial span of the response is retried with the problem explained; when retries run out the
turn raises ``AuditorError``, which ends the episode as ``error`` and is never a pass or a narrator
conflict. Added facts, trajectory advances and commitment satisfactions all rest on quotes verified
by the project's one quote matcher (:mod:`pytest_ncp.core.quotes`). A confirmed conflict stands whatever
another step of the same turn answered: that step's failure is recorded in the turn's verdicts.

Votes (``votes`` K > 1, ``--audit-votes``): each flagged conflict is confirmed by K independent samples of
the confirmation step at ``vote_temperature`` and stands on a strict majority; the tally of every flag is
recorded (``TurnAudit.votes``). With K = 1 the confirmation is the one call it always was.

Input screening (``screen_input``): a simulated player's input is checked before the narrator sees
it against the rules scripted inputs follow (the player character's own acts and words).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, cast

from pydantic import ValidationError

from ..core.config import RunConfig
from ..core.ledger import LedgerFact
from ..core.options import DEFAULT_AUDITOR_CONTEXT_TOKENS
from ..llm import Completion, ModelClient, ModelError
from ..llm.structured import NoValidAnswer, ask_again, ask_json, strip_fences
from ..prompts import PROMPT_VERSION, call_nonce, macro, render
from ..core.quotes import check_quote, quote_in  # noqa: F401 - quote_in is part of this module's API
from ..core.spec import Commitment, NarrativeSpec
from ..core.wire import (  # noqa: F401 - the wire contract is part of this module's API, as it was
    ANSWER_MODELS, CONFLICT_TYPES, SCREEN_RULES, STEPS, WIRE_SCHEMAS, AddedFact, CommitmentCheck, CommitmentState,
    Confirmation, Conflict, ConflictCheck, ConflictType, FactUpdate, InputScreen, NegatedFact, SatisfiedCommitment,
    ScreenProblem, ScreenRule, Step, TrajectoryUpdate, response_format,
)

# Votes beyond the first are independent samples: at temperature 0 they would repeat one another (the same
# prompt, greedy decoding), and their agreement would measure nothing. 0.7 varies the judgement while keeping
# answers on the schema.
VOTE_TEMPERATURE = 0.7


# --- what one turn's audit sees and produces ------------------------------------------------------


@dataclass(frozen=True)
class TurnContext:
    """Everything an audit of turn t reads: the state, not the transcript (prompts stay bounded)."""

    spec: NarrativeSpec
    turn: int
    player_input: str | None  # None for the opening narration (turn 0)
    response: str
    facts: Sequence[LedgerFact]
    node_index: int
    commitment_states: dict[str, CommitmentState]
    previous_response: str | None = None
    # The turn at which the current node's trigger event happened, when that was an earlier turn:
    # its key delta may come now (DESIGN section 3, step 3).
    trigger_turn: int | None = None


@dataclass(frozen=True)
class ScreenContext:
    """What screening a simulated player's input reads: who the character is, the story so far, the input.

    ``calls`` and ``rejected_answers`` collect the screen's model calls and refused answers (for the trace)."""

    spec: NarrativeSpec
    turn: int
    player_input: str
    history: Sequence[tuple[str, str]] = ()  # earlier (player input, narration), as the player saw them
    calls: list[Completion] = field(default_factory=list)
    rejected_answers: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ConfirmedConflict:
    conflict: Conflict
    confirmation: Confirmation
    status: str = "verified"  # see TurnAudit.flag_status
    votes: dict[str, Any] | None = None  # see TurnAudit.votes; None with one vote

    @property
    def unanimous(self) -> bool:
        """Every confirmation sample agreed (always, with one vote)."""
        return self.votes is None or self.votes["yes"] == self.votes["of"]

    @property
    def agreement(self) -> str | None:
        """``2/3``: confirmation samples that confirmed, of those asked; None with one vote."""
        return None if self.votes is None else f"{self.votes['yes']}/{self.votes['of']}"


@dataclass
class TurnAudit:
    """The verdicts of one turn, validated against the ledger, the spec and the response."""

    turn: int
    flagged: list[Conflict] = field(default_factory=list)
    confirmations: list[Confirmation] = field(default_factory=list)
    # Per flag: "verified" (its quote occurs in the response), "unverified" (still not found after the
    # auditor was asked to repair it) or "withdrawn" (dropped from a later answer after its quote was
    # refused). Unverified and withdrawn flags go to confirmation all the same: a retry never lets a flag
    # vanish unrecorded.
    flag_status: list[str] = field(default_factory=list)
    fact_update: FactUpdate | None = None
    trajectory: TrajectoryUpdate | None = None  # None when the trajectory is already complete
    commitments: CommitmentCheck | None = None  # None when nothing is pending
    calls: list[Completion] = field(default_factory=list)
    # step -> why it gave no valid answer, on a turn whose confirmed conflict stands regardless
    step_errors: dict[str, str] = field(default_factory=dict)
    # Answers that failed parsing or verification (each later retried): {step, answer, problems, ...}.
    rejected_answers: list[dict[str, Any]] = field(default_factory=list)
    # The second look at a turn that would end the episode in success (Episode._success_confirmed).
    success_confirmation: Confirmation | None = None
    # With votes K > 1, per flag: {"yes", "no", "invalid", "of": K, "answers": [each sample's answer, or
    # {"error": why it gave none}]}; ``confirmations`` then holds the majority's answer. Empty with one vote.
    votes: list[dict[str, Any]] = field(default_factory=list)

    def _judged(self) -> list[ConfirmedConflict]:
        return [ConfirmedConflict(c, v, self.status_of(i), self.votes[i] if i < len(self.votes) else None)
                for i, (c, v) in enumerate(zip(self.flagged, self.confirmations))]

    @property
    def confirmed(self) -> list[ConfirmedConflict]:
        return [j for j in self._judged() if j.confirmation.confirmed]

    @property
    def rejected(self) -> list[ConfirmedConflict]:
        return [j for j in self._judged() if not j.confirmation.confirmed]

    def status_of(self, index: int) -> str:
        return self.flag_status[index] if index < len(self.flag_status) else "verified"

    def verdicts(self) -> dict[str, Any]:
        """Plain data of every verdict (what traces store and snapshots compare)."""
        return {
            "turn": self.turn,
            Step.CONFLICT_CHECK: {"conflicts": [c.model_dump() for c in self.flagged]},
            **({"flag_status": list(self.flag_status)} if any(x != "verified" for x in self.flag_status) else {}),
            Step.CONFLICT_CONFIRMATION: [v.model_dump() for v in self.confirmations],
            **({"conflict_votes": [dict(v) for v in self.votes]} if self.votes else {}),
            Step.FACT_UPDATE: self.fact_update.model_dump() if self.fact_update else None,
            Step.TRAJECTORY_UPDATE: self.trajectory.model_dump() if self.trajectory else None,
            Step.COMMITMENT_CHECK: self.commitments.model_dump() if self.commitments else None,
            **({"step_errors": dict(self.step_errors)} if self.step_errors else {}),
            **({Step.SUCCESS_CONFIRMATION: self.success_confirmation.model_dump()}
               if self.success_confirmation else {}),
        }


class AuditorError(Exception):
    """The auditor could not produce a valid verdict: an infrastructure error, not a narrator failure.

    ``audit`` (set by ``LLMAuditor.audit``) is the turn's partial audit: its calls and every rejected
    answer, so the trace of the errored turn shows what the auditor said and why it was refused.
    """

    audit: TurnAudit | None = None

    def __init__(self, step: str, problems: Sequence[str], answers: Sequence[str] = ()):
        self.step, self.problems, self.answers = step, list(problems), list(answers)
        super().__init__(f"auditor step {step} gave no valid answer after {len(self.answers) or 1} attempt(s): "
                         + "; ".join(self.problems))


class PromptTooLarge(Exception):
    """An audit prompt that does not fit the auditor's context window (checked before sending it, or refused by
    the endpoint). ``narrator_caused``: the narrator's own text (this turn's and the previous narration) is
    what makes it too large, so it is the narrator's error; otherwise the model endpoint's."""

    def __init__(self, step: str, tokens: int, limit: int, narration: int, *, refused: bool = False):
        self.step, self.tokens, self.limit, self.narration = step, tokens, limit, narration
        self.refused = refused
        # Checked before sending: without the narration it would fit. Refused by the endpoint (whose count we
        # only estimate): the narration is most of the prompt.
        self.narrator_caused = narration * 2 > tokens if refused else tokens - narration <= limit
        said = ("the endpoint refused it as over its context window" if refused
                else f"over the auditor's context of {limit:,} tokens")
        super().__init__(f"the {step} prompt is about {tokens:,} tokens, {said}; the narration is {narration:,} "
                         "of them" + (" (narrator's text makes it too large: shorten the narration)"
                                      if self.narrator_caused else ""))


class Auditor(Protocol):
    """What the episode needs from an auditor. ``LLMAuditor`` is the fixed protocol; tests may swap it.

    Optional: ``confirm_success`` (``ConfirmsSuccess``: a success is confirmed like a conflict) and
    ``screen_input`` (``ScreensInput``: simulated players' inputs are screened); an auditor without them is
    taken at its word, and does not screen."""

    async def audit(self, ctx: TurnContext) -> TurnAudit: ...


class ConfirmsSuccess(Protocol):
    """An auditor that confirms a success before it ends the episode: ``claims`` are the achievements the
    turn completed, each with the evidence its satisfaction rests on."""

    async def confirm_success(self, ctx: TurnContext, claims: Sequence[tuple[Commitment, str]]) -> Confirmation: ...


class ScreensInput(Protocol):
    """An auditor that screens a simulated player's input before the narrator sees it."""

    async def screen_input(self, ctx: ScreenContext) -> InputScreen: ...


# The optional hooks are looked up as attributes, not with a runtime protocol check: an auditor behind a proxy
# (``__getattr__``) keeps its hooks.
def success_confirmer(auditor: object) -> ConfirmsSuccess | None:
    """``auditor`` when it confirms successes, else None."""
    return cast(ConfirmsSuccess, auditor) if callable(getattr(auditor, "confirm_success", None)) else None


def input_screener(auditor: object) -> ScreensInput | None:
    """``auditor`` when it screens simulated players' inputs, else None."""
    return cast(ScreensInput, auditor) if callable(getattr(auditor, "screen_input", None)) else None


# --- the LLM auditor ----------------------------------------------------------------------------


@dataclass
class LLMAuditor:
    client: ModelClient
    model: str
    max_attempts: int = 3
    temperature: float = 0.0
    prompt_version: str = PROMPT_VERSION
    votes: int = 1  # confirmation samples per flagged conflict (--audit-votes); a strict majority stands
    vote_temperature: float = VOTE_TEMPERATURE  # of every sample when votes > 1
    # The auditor's input window when litellm's model map does not know the model (--auditor-context-tokens).
    context_tokens: int = DEFAULT_AUDITOR_CONTEXT_TOKENS

    def context_limit(self) -> int:
        """Tokens an audit prompt may take: the model's window (litellm's map, else ``context_tokens``) less
        the room its answer needs."""
        from ..llm.tokens import context_tokens

        window = context_tokens(self.model) or self.context_tokens
        answer = self.client.max_tokens_for("auditor") if hasattr(self.client, "max_tokens_for") else 1024
        return max(1, window - answer)

    def _narration_tokens(self, ctx: Any) -> int:
        from ..llm.tokens import count_tokens

        texts = [getattr(ctx, "response", None), getattr(ctx, "previous_response", None)]
        return sum(count_tokens(self.model, t)[0] for t in texts if isinstance(t, str))

    def _fit(self, step: str, messages: list[dict[str, Any]], ctx: Any) -> None:
        """Raise PromptTooLarge before sending a prompt that cannot fit the auditor's window."""
        from ..llm.tokens import count_messages

        tokens, limit = count_messages(self.model, messages), self.context_limit()
        if tokens > limit:
            raise PromptTooLarge(step, tokens, limit, self._narration_tokens(ctx))

    def _refused(self, step: str, exc: ModelError, messages: list[dict[str, Any]], ctx: Any) -> BaseException:
        """A model error as it stands, or PromptTooLarge when the endpoint refused the prompt's size."""
        from ..llm.tokens import context_refusal, count_messages

        if not context_refusal(exc):
            return exc
        return PromptTooLarge(step, count_messages(self.model, messages), self.context_limit(),
                              self._narration_tokens(ctx), refused=True)

    @classmethod
    def from_config(cls, config: RunConfig, client: ModelClient) -> LLMAuditor:
        """The run's auditor: ``config``'s auditor model and votes."""
        return cls(client, config.auditor_model, votes=config.audit_votes,
                   context_tokens=config.auditor_context_tokens)

    async def audit(self, ctx: TurnContext) -> TurnAudit:
        audit = TurnAudit(turn=ctx.turn)
        try:
            return await self._audit(ctx, audit)
        except Exception as exc:
            # The episode records the partial audit (rejected answers, calls) of an errored turn.
            exc.audit = audit  # type: ignore[attr-defined]
            raise

    async def _audit(self, ctx: TurnContext, audit: TurnAudit) -> TurnAudit:
        pending = [c for c in ctx.spec.commitments if ctx.commitment_states.get(c.id) == "PENDING"
                   and c.kind != "invariant"]
        node = ctx.spec.trajectory[ctx.node_index] if ctx.node_index < len(ctx.spec.trajectory) else None
        base = self._variables(ctx)
        # Every step's prompt is measured before any is sent: a turn too large to audit makes no call.
        self._fit(Step.CONFLICT_CHECK, render(Step.CONFLICT_CHECK, **base), ctx)
        self._fit(Step.FACT_UPDATE, render(Step.FACT_UPDATE, **base), ctx)
        if node is not None:
            self._fit(Step.TRAJECTORY_UPDATE, render(Step.TRAJECTORY_UPDATE, node=node, **base), ctx)
        if pending:
            self._fit(Step.COMMITMENT_CHECK, render(Step.COMMITMENT_CHECK, **base,
                                                 pending=[self._commitment_view(c, ctx) for c in pending]), ctx)

        jobs: dict[str, Any] = {
            Step.CONFLICT_CHECK: self._check_conflicts(audit, base),
            Step.FACT_UPDATE: self._ask(Step.FACT_UPDATE, audit, **base),
        }
        if node is not None:
            jobs[Step.TRAJECTORY_UPDATE] = self._ask(Step.TRAJECTORY_UPDATE, audit, node=node, **base)
        if pending:
            jobs[Step.COMMITMENT_CHECK] = self._ask(
                Step.COMMITMENT_CHECK, audit, pending=[self._commitment_view(c, ctx) for c in pending], **base)
        results = await _gather(jobs)
        check = results[Step.CONFLICT_CHECK]
        if isinstance(check, BaseException):
            raise check
        results = {**results, **await self._settle(audit, base, ctx, check)}
        failed = {step: r for step, r in results.items() if isinstance(r, BaseException)}
        if failed and not audit.confirmed:
            raise next(iter(failed.values()))
        # With a confirmed conflict the other steps do not matter (the paper's order): a failed one is
        # recorded, never allowed to turn the conflict into an error.
        audit.step_errors = {step: f"{type(exc).__name__}: {exc}" for step, exc in failed.items()}
        audit.fact_update = _value(results[Step.FACT_UPDATE])
        audit.trajectory = _value(results.get(Step.TRAJECTORY_UPDATE))
        audit.commitments = _value(results.get(Step.COMMITMENT_CHECK))
        return audit

    async def judge_conflicts(self, ctx: TurnContext) -> TurnAudit:
        """Only the conflict verdict of a turn: the check and its confirmations (with votes), as ``audit`` does
        them, without the other steps (``ncp stability`` re-judges recorded turns this way). Fails closed the
        same way: AuditorError when no valid verdict stands."""
        audit = TurnAudit(turn=ctx.turn)
        try:
            base = self._variables(ctx)
            await self._settle(audit, base, ctx, await self._check_conflicts(audit, base))
            return audit
        except Exception as exc:
            exc.audit = audit  # type: ignore[attr-defined]
            raise

    async def _settle(self, audit: TurnAudit, base: dict[str, Any], ctx: TurnContext,
                      check: tuple[list[tuple[Conflict, str]], AuditorError | None]) -> dict[str, BaseException]:
        """Confirm the check's flags into ``audit``; the confirmations that gave no answer, by name.

        Raises when nothing can stand: a failed confirmation and no confirmed flag, or a check that never gave
        a fully valid answer and no confirmed flag (an unknown outcome, never a pass)."""
        flags, unresolved = check
        audit.flagged, audit.flag_status = [f for f, _ in flags], [status for _, status in flags]
        failed: dict[str, BaseException] = {}
        if flags:
            confirmations = await self._confirm(audit, base, ctx, flags)
            answered = [(c, status, confirmations[i]) for i, (c, status) in enumerate(flags)]
            failed = {f"conflict_confirmation[{i}]": v for i, (_, _, v) in enumerate(answered)
                      if isinstance(v, BaseException)}
            kept = [(i, c, status, v) for i, (c, status, v) in enumerate(answered) if not isinstance(v, BaseException)]
            if failed and not any(v.confirmed for _, _, _, v in kept):
                raise next(iter(failed.values()))
            audit.flagged = [c for _, c, _, _ in kept]
            audit.flag_status = [status for _, _, status, _ in kept]
            audit.confirmations = [v for _, _, _, v in kept]
            audit.votes = [audit.votes[i] for i, _, _, _ in kept] if audit.votes else []
        if unresolved is not None and not audit.confirmed:
            raise unresolved
        return failed

    async def _confirm(self, audit: TurnAudit, base: dict[str, Any], ctx: TurnContext,
                       flags: list[tuple[Conflict, str]]) -> list[Any]:
        """Per flag, the confirmation that decides it (or the exception that left it undecided).

        One vote: the one call, at the auditor's temperature, as always. K votes: K calls per flag at
        ``vote_temperature``, all at once; the flag stands when a strict majority confirms and is rejected when a
        strict majority rejects (a sample with no valid answer counts for neither side); otherwise (a tie, or
        too many invalid samples) the first sample's error, or an AuditorError for a tie, stands for it: never
        a pass. Each flag's tally goes to ``audit.votes``."""
        votes = max(1, int(self.votes))
        temperature = self.temperature if votes == 1 else self.vote_temperature
        jobs = {
            f"{i}.{k}": self._ask(Step.CONFLICT_CONFIRMATION, audit, temperature=temperature, **{
                **base, "conflict": c, "unverified": status != "verified", "withdrawn": status == "withdrawn",
                # The turn's blocks keep the turn's code (the prompt shares its prefix with the other steps');
                # the flag's own blocks get a code of everything this call shows.
                "flag_nonce": call_nonce(ctx.previous_response, ctx.player_input, ctx.response, c.quote,
                                         c.explanation)})
            for i, (c, status) in enumerate(flags) for k in range(votes)
        }
        answers = await _gather(jobs)
        if votes == 1:
            return [answers[f"{i}.0"] for i in range(len(flags))]
        decided: list[Any] = []
        audit.votes = []
        for i in range(len(flags)):
            samples = [answers[f"{i}.{k}"] for k in range(votes)]
            valid = [a for a in samples if not isinstance(a, BaseException)]
            yes = [a for a in valid if a.confirmed]
            no = [a for a in valid if not a.confirmed]
            invalid = votes - len(valid)
            audit.votes.append({"yes": len(yes), "no": len(no), "invalid": invalid, "of": votes, "answers": [
                {"error": f"{type(a).__name__}: {a}"} if isinstance(a, BaseException) else a.model_dump()
                for a in samples]})
            need = votes // 2 + 1  # a strict majority, either way: a tie (1 of 2, 2 of 4) decides nothing
            if len(yes) >= need:
                decided.append(Confirmation(confirmed=True, explanation=yes[0].explanation))
            elif len(no) >= need:
                decided.append(Confirmation(confirmed=False, explanation=no[0].explanation))
            else:
                decided.append(next((a for a in samples if isinstance(a, BaseException)), AuditorError(
                    Step.CONFLICT_CONFIRMATION, [f"the {votes} votes on conflicts[{i}] are tied ({len(yes)} confirm, "
                                              f"{len(no)} reject, {invalid} invalid): no majority either way"],
                    [json.dumps(v) for v in audit.votes[-1]["answers"]])))
        return decided

    async def screen_input(self, ctx: ScreenContext) -> InputScreen:
        """Is a simulated player's input fair: only the player character's own acts and words? One call
        (retried when invalid, like every step); no valid answer is an AuditorError."""
        nonce = call_nonce(ctx.player_input, *(text for pair in ctx.history for text in pair))
        collect = TurnAudit(turn=ctx.turn)
        try:
            screen: InputScreen = await self._ask(
                Step.INPUT_SCREEN, collect, ctx=ctx, spec=ctx.spec, player=ctx.spec.player, turn=ctx.turn,
                history=list(ctx.history), player_input=ctx.player_input, nonce=nonce)
            return screen
        except AuditorError as exc:
            exc.audit = collect
            raise
        finally:
            ctx.calls.extend(collect.calls)
            ctx.rejected_answers.extend(collect.rejected_answers)

    def _variables(self, ctx: TurnContext) -> dict[str, Any]:
        commitments = [self._commitment_view(c, ctx) for c in ctx.spec.all_commitments]
        facts = list(ctx.facts)
        # The delimiter code of the turn's data blocks (see prompts.call_nonce).
        nonce = call_nonce(ctx.previous_response, ctx.player_input, ctx.response)
        return {
            "spec": ctx.spec, "ctx": ctx, "facts": facts, "node_index": ctx.node_index, "commitments": commitments,
            "nonce": nonce,
            # What every step of the turn shows first, byte for byte the same: rendered once for all of them.
            # Facts the story added were written from narration: data, in blocks whose code is a hash of those
            # texts alone, so the story state stays the same across turns that add no fact (prompt caches).
            "shared": macro("_context", "state", ctx.spec, facts, commitments, ctx.node_index, ctx,
                            call_nonce(*(f.text for f in facts if f.added_turn))) + "\n"
                      + macro("_context", "turn", ctx, nonce),
        }

    @staticmethod
    def _commitment_view(c: Any, ctx: TurnContext) -> dict[str, Any]:
        return {"id": c.id, "kind": c.kind, "text": c.text, "before": c.before, "after": c.after,
                "state": ctx.commitment_states.get(c.id, "PENDING")}

    async def confirm_success(self, ctx: TurnContext, claims: Sequence[tuple[Commitment, str]]) -> Confirmation:
        """Whether the response really completes the story: every achievement in ``claims`` (commitment,
        the evidence its satisfaction rests on) accomplished as the narration shows it. One call, like a
        conflict's confirmation; an invalid answer after the retries is an AuditorError, never a success."""
        audit = TurnAudit(turn=ctx.turn)
        base = self._variables(ctx)
        evidence = [e for _, e in claims]
        confirmation: Confirmation = await self._ask(
            Step.SUCCESS_CONFIRMATION, audit, **base,
            evidence_nonce=call_nonce(ctx.previous_response, ctx.player_input, ctx.response, *evidence),
            claims=[{"id": c.id, "text": c.text, "evidence": e} for c, e in claims])
        return confirmation

    async def _check_conflicts(self, audit: TurnAudit, base: dict[str, Any]) -> tuple[
            list[tuple[Conflict, str]], AuditorError | None]:
        """The conflict check, whose retries repair flags instead of letting them go.

        A flag that names valid ids is remembered from the first answer that raises it. When its quote does
        not occur in the response, the next attempt asks to repair that quote for that flag (and to keep every
        other flag). Flags whose quote is still not found are returned "unverified", flags a later answer
        dropped "withdrawn": both go to confirmation. Returns the flags with their status and, when no
        attempt gave a fully valid answer, the AuditorError that stands unless a flag is confirmed.
        """
        ctx: TurnContext = base["ctx"]
        messages = render(Step.CONFLICT_CHECK, **base)
        self._fit(Step.CONFLICT_CHECK, messages, ctx)
        raised: dict[tuple[Any, ...], tuple[Conflict, bool]] = {}  # flag key -> (latest version, verified)
        final: set[tuple[Any, ...]] | None = None
        settled: set[str] = set()  # conflict types the valid answer names
        # Conflicts named in a refused answer that cannot go to confirmation as named: (type, what was said).
        unsettled: list[tuple[str | None, str]] = []
        answers: list[str] = []
        problems: list[str] = []
        for attempt in range(1, self.max_attempts + 1):
            try:
                completion = await self.client.complete(
                    "auditor", self.model, messages, step=Step.CONFLICT_CHECK,
                    response_format=response_format(Step.CONFLICT_CHECK), temperature=self.temperature)
            except ModelError as exc:
                raise self._refused(Step.CONFLICT_CHECK, exc, messages, ctx) from exc
            audit.calls.append(completion)
            answers.append(completion.text)
            answer, problems = decode_answer(Step.CONFLICT_CHECK, completion.text)
            repairs: list[str] = []
            # Every conflict the answer names counts, also in an answer refused as a whole (an unexpected key,
            # prose after the JSON): an invalid answer never makes a flag vanish.
            named = answer.conflicts if answer is not None else _named_conflicts(completion.text)
            for i, c in enumerate(named):
                if isinstance(c, tuple):  # named, but not as a conflict the schema allows
                    unsettled.append((c[0], f"attempt {attempt}: {c[1]}"))
                    continue
                id_problems, quote_problem = _flag_problems(c, i, ctx)
                if answer is not None:
                    problems += id_problems
                    if quote_problem:
                        problems.append(quote_problem)
                if id_problems:
                    # Not confirmable as named (an unknown or mismatched id): it must be settled by a valid answer.
                    unsettled.append((c.type, f"attempt {attempt}: {_flag_name(c)} ({'; '.join(id_problems)})"))
                    continue
                key = _flag_key(c)
                if quote_problem:
                    repairs.append(f"conflicts[{i}] ({_flag_name(c)})")
                if key not in raised or not raised[key][1]:
                    raised[key] = (c, quote_problem is None)
            if not problems and answer is not None:
                final = {_flag_key(c) for c in answer.conflicts}
                settled = {c.type for c in answer.conflicts}
                break
            if completion.truncated:
                problems = [*problems, f"the answer was cut at max_tokens={completion.max_tokens} "
                                       "(finish_reason=length); raise the auditor's limit (--max-tokens auditor=N)"]
            audit.rejected_answers.append({"step": Step.CONFLICT_CHECK, "attempt": attempt, "answer": completion.text,
                                           "problems": list(problems), "finish_reason": completion.finish_reason,
                                           "output_mode": completion.output_mode})
            hint = (" Repair the quote of " + " and of ".join(repairs) + ": copy the exact words of the narrator's "
                    "response that show the conflict. Do not drop a conflict because its quote was wrong, and keep "
                    "every other conflict as it was." if repairs else "")
            messages = _RETRY(messages, completion, [*problems, hint.strip()] if hint else problems)
        flags: list[tuple[Conflict, str]] = []
        for key, (conflict, verified) in raised.items():
            if final is not None and key not in final:
                flags.append((conflict, "withdrawn"))
            elif final is not None or verified:
                flags.append((conflict, "verified" if verified else "unverified"))
            else:
                flags.append((conflict, "unverified"))
        unresolved = None if final is not None else AuditorError(Step.CONFLICT_CHECK, problems, answers)
        dropped = [said for kind, said in unsettled if kind is None or kind not in settled]
        if unresolved is None and dropped:
            # The valid answer names no conflict of the type a refused one raised: nothing settles that flag.
            unresolved = AuditorError(Step.CONFLICT_CHECK, [
                "a conflict named in a refused answer was not confirmed or repaired by the valid one: "
                + "; ".join(dropped)], answers)
        if unresolved is not None and not flags:
            raise unresolved
        return flags, unresolved

    async def _ask(self, step: str, audit: TurnAudit, *, temperature: float | None = None, **variables: Any) -> Any:
        ctx: TurnContext = variables["ctx"]

        def parse(completion: Completion) -> tuple[Any | None, list[str]]:
            parsed, problems = parse_answer(step, completion.text, ctx)
            if parsed is None and completion.truncated:
                problems = [*problems, f"the answer was cut at max_tokens={completion.max_tokens} "
                                       "(finish_reason=length); raise the auditor's limit (--max-tokens auditor=N)"]
            return parsed, problems

        def seen(attempt: int, completion: Completion, problems: list[str]) -> None:
            audit.calls.append(completion)
            if problems:
                audit.rejected_answers.append({"step": step, "attempt": attempt, "answer": completion.text,
                                               "problems": list(problems), "finish_reason": completion.finish_reason,
                                               "output_mode": completion.output_mode})

        messages = render(step, **variables)
        if step != Step.INPUT_SCREEN:
            self._fit(step, messages, ctx)
        try:
            return await ask_json(self.client, "auditor", self.model, messages, parse=parse,
                                  attempts=self.max_attempts,
                                  retry=_SCREEN_RETRY if step == Step.INPUT_SCREEN else _RETRY,
                                  step=step, response_format=response_format(step),
                                  temperature=self.temperature if temperature is None else temperature,
                                  on_answer=seen)
        except NoValidAnswer as exc:
            raise AuditorError(step, exc.problems, exc.answers) from None
        except ModelError as exc:
            if step == Step.INPUT_SCREEN:
                raise
            raise self._refused(step, exc, messages, ctx) from exc


# Retry with the problem spelled out: most invalid answers are near misses.
_RETRY = ask_again(". Answer again with JSON that follows the schema, using only ids listed above "
                   "and quotes copied exactly from the narrator's response.")
_SCREEN_RETRY = ask_again(". Answer again with JSON that follows the schema, with quotes copied exactly from the "
                          "player's input.")


async def _gather(jobs: dict[str, Any]) -> dict[str, Any]:
    """Every job's answer, or the exception it raised (cancellation is never swallowed)."""
    keys = list(jobs)
    results = await asyncio.gather(*jobs.values(), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, Exception):
            raise r
    return dict(zip(keys, results))


def _value(result: Any) -> Any:
    return None if isinstance(result, BaseException) else result


# --- fail-closed parsing --------------------------------------------------------------------------


def parse_answer(step: str, text: str, ctx: TurnContext) -> tuple[Any | None, list[str]]:
    """Parse and verify one answer. Returns (verdict, []) or (None, problems)."""
    answer, problems = decode_answer(step, text)
    if answer is None:
        return None, problems
    problems = _verify(step, answer, ctx)
    return (None, problems) if problems else (answer, [])


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def decode_answer(step: str, text: str) -> tuple[Any | None, list[str]]:
    """The strict half of parsing (JSON, then the step's typed model), the same for every output mode.

    A key given twice is refused (plain JSON keeps the last one, so {"conflicts": [...], "conflicts": []}
    would read as clean), and so is any field the step does not define."""
    try:
        data = json.loads(strip_fences(text), object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKey as exc:
        return None, [f"the key {exc.args[0]!r} is given more than once"]
    except (json.JSONDecodeError, TypeError) as exc:
        return None, [f"not valid JSON ({exc.msg if hasattr(exc, 'msg') else exc})"]
    if not isinstance(data, dict):
        return None, ["the answer must be a JSON object"]
    try:
        answer = ANSWER_MODELS[step].model_validate(data, strict=True)
    except ValidationError as exc:
        return None, [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()]
    return answer, []


def _verify(step: str, answer: Any, ctx: TurnContext) -> list[str]:
    if isinstance(answer, InputScreen):  # judged against the player's input, not a narrator response
        return _screen_problems(answer, str(getattr(ctx, "player_input", "") or ""))
    problems: list[str] = []
    active = {f.id for f in ctx.facts}
    commitments = {c.id for c in ctx.spec.all_commitments}  # the default world rules (W1, ...) too

    def quote(q: str, where: str) -> None:
        problem = check_quote(q, ctx.response)
        if problem:
            problems.append(f"{where}: {problem}")

    if isinstance(answer, ConflictCheck):
        for i, c in enumerate(answer.conflicts):
            id_problems, quote_problem = _flag_problems(c, i, ctx)
            problems += id_problems + ([quote_problem] if quote_problem else [])
    elif isinstance(answer, FactUpdate):
        for i, a in enumerate(answer.added):
            if not a.text.strip():
                problems.append(f"added[{i}]: empty fact text")
            quote(a.quote, f"added[{i}]")
        for i, n in enumerate(answer.negated):
            if n.fact_id not in active:
                problems.append(f"negated[{i}]: fact_id {n.fact_id!r} names no active ledger fact")
            quote(n.quote, f"negated[{i}]")
    elif isinstance(answer, CommitmentCheck):
        for i, s in enumerate(answer.satisfied):
            if s.commitment_id not in commitments:
                problems.append(f"satisfied[{i}]: commitment_id {s.commitment_id!r} names no commitment")
            quote(s.evidence, f"satisfied[{i}].evidence")
    elif isinstance(answer, TrajectoryUpdate):
        # Progress (and so success) never rests on unchecked text.
        if answer.trigger_event_occurred or answer.key_delta_occurred:
            quote(answer.evidence, "evidence")
    return problems


def _screen_problems(answer: InputScreen, player_input: str) -> list[str]:
    """A screen is consistent (unfair exactly when it names a problem) and quotes the input it judged."""
    problems = []
    if answer.fair and answer.problems:
        problems.append('"fair" is true but "problems" is not empty: a fair input has no problem')
    if not answer.fair and not answer.problems:
        problems.append('"fair" is false but "problems" is empty: name each rule the input breaks, with a quote')
    for i, p in enumerate(answer.problems):
        problem = check_quote(p.quote, player_input)
        if problem:
            problems.append(f"problems[{i}]: " + problem.replace("the narrator's response", "the player's input"))
    return problems


def _flag_problems(c: Conflict, i: int, ctx: TurnContext) -> tuple[list[str], str | None]:
    """What is wrong with one flag: its ids (the flag cannot stand) and its quote (it can be repaired)."""
    where = f"conflicts[{i}]"
    active = {f.id for f in ctx.facts}
    commitments = {x.id for x in ctx.spec.all_commitments}
    problems = []
    unknown_f = [f for f in c.fact_ids if f not in active]
    unknown_c = [x for x in c.commitment_ids if x not in commitments]
    if unknown_f:
        problems.append(f"{where}: fact_ids {unknown_f} name no active ledger fact")
    if unknown_c:
        problems.append(f"{where}: commitment_ids {unknown_c} name no commitment")
    if c.type == "fact" and not c.fact_ids:
        problems.append(f"{where}: a fact conflict must name the ledger fact ids it contradicts")
    if c.type == "commitment" and not c.commitment_ids:
        problems.append(f"{where}: a commitment conflict must name the commitment ids it breaks")
    if c.type == "player_input" and ctx.player_input is None:
        problems.append(f"{where}: there is no player input at the opening turn")
    quote_problem = check_quote(c.quote, ctx.response)
    return problems, f"{where}: {quote_problem}" if quote_problem else None


def _named_conflicts(text: str) -> list[Conflict | tuple[str | None, str]]:
    """The conflicts an answer refused as a whole names: the first JSON object in it, read leniently (prose
    after it, other keys and a repeated ``conflicts`` key allowed). Each entry is a ``Conflict`` when it is
    one, else (its type when it gives one, a description of what was named)."""
    body = strip_fences(text)
    start = body.find("{")
    if start < 0:
        return []
    lists: list[Any] = []

    def collect(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        lists.extend(v for k, v in pairs if k == "conflicts")
        return dict(pairs)

    try:
        data, _ = json.JSONDecoder(object_pairs_hook=collect).raw_decode(body[start:])
    except json.JSONDecodeError:
        return [(None, "an answer naming conflicts that is not JSON")] if '"type"' in body else []
    if not isinstance(data, dict):
        return []
    named: list[Conflict | tuple[str | None, str]] = []
    for value in lists:
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, dict):
                continue  # the object hook also sees nested objects: only list entries are flags
            fields = {k: item[k] for k in Conflict.model_fields if k in item}
            try:
                named.append(Conflict.model_validate(fields, strict=True))
            except ValidationError:
                kind = item.get("type")
                named.append((kind if isinstance(kind, str) else None, f"a malformed conflict {json.dumps(item)[:200]}"))
    return named


def _flag_key(c: Conflict) -> tuple[Any, ...]:
    """What makes two answers' flags the same flag: its type and the ids it names."""
    return (c.type, tuple(sorted(c.fact_ids)), tuple(sorted(c.commitment_ids)))


def _flag_name(c: Conflict) -> str:
    ids = ", ".join([*c.fact_ids, *c.commitment_ids])
    return f"the {c.type} conflict" + (f" naming {ids}" if ids else "")
