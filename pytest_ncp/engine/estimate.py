"""What a run may cost before it starts (``ncp run --estimate``, ``pytest --ncp-estimate``): no model is called.

An upper bound of the model calls, per role and audit step, and of their prompt and completion tokens, and
its price at the cost map's list prices. Every bound is built from what the run will send:

- **turns**: a scripted player plays at most its spec's inputs (or ``--max-turns``), a simulated one
  ``--max-turns``; turn 0 is audited too when the narrator opens the story;
- **calls**: the narrator (built-in narrators: one call per turn, and the memory narrator's summaries), a
  simulated player (one per turn) and the screen of its inputs (one ``input_screen`` call per
  input; each of up to ``--player-retries`` regenerations adds a player call, a screen and, pipelined, the
  narration of the refused input played ahead), and per audited turn the auditor's four steps, the
  confirmation of ``FLAGS_PER_TURN`` flagged conflicts (``--audit-votes`` samples each) and a success
  confirmation, each with every retry taken (``LLMAuditor.max_attempts`` attempts);
- **prompt tokens**: the real prompts of each spec rendered at turn 1, counted as UTF-8 bytes (no tokenizer
  makes more tokens than bytes; English prompts have about four bytes per token), with the narrator's and
  player's texts at their ``--max-tokens``, the ledger growing by ``LEDGER_GROWTH_TOKENS`` per audited turn,
  and each retry carrying the rejected answer;
- **completion tokens**: every call at its role's ``--max-tokens``.

Two parts are allowances rather than bounds, and the estimate says so: ledger growth, and flags per turn (a
conflict check may flag any number of conflicts, each confirmed by its own call). ``--max-cost`` is the
hard limit. A custom narrator's own model calls are not known here: only built-in narrators are counted.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..core.config import DEFAULT_MAX_TOKENS, RunConfig
from ..core.ledger import FactLedger
from ..core.spec import NarrativeSpec
from ..llm.prices import TOKENS_PER_MESSAGE, Price, price_of
from ..prompts import render
from ..core.wire import STEPS, Conflict, Step
from .auditor import LLMAuditor, TurnContext
from .narrators import LLMNarrator, MemoryNarrator

LEDGER_GROWTH_TOKENS = 100  # allowance: tokens the fact ledger grows by per audited turn (about five facts)
FLAGS_PER_TURN = 1          # allowance: flagged conflicts confirmed per audited turn
RETRY_NOTE_TOKENS = 200     # what a retry adds besides the rejected answer: the problems and the hint
AUDIT_STEPS = tuple(s for s in STEPS if s != Step.INPUT_SCREEN)
SCREEN_STEP = Step.INPUT_SCREEN  # a simulated player's input, screened before the narrator sees it
# The expected figure (``Estimate.expected``): a run where every answer is valid at once, nothing is flagged, and
# answers have a typical length rather than their --max-tokens (a narration of about 150 words, an auditor's
# JSON of about 60, a player's line of about 30), prompts at BYTES_PER_TOKEN bytes per token, the ledger growing
# by TYPICAL_LEDGER_GROWTH tokens per audited turn; and episodes that end early: TYPICAL_TURN_HAZARD of those still
# playing end at each turn (a conflict, a success), the rate of the bundled demo (`ncp demo`: 9.9 turns on
# average over scripts of 24 to 32 inputs, survival@20 about 10%), so an episode plays expected_turns() turns.
TYPICAL_COMPLETION = {"narrator": 200, "player": 40, "auditor": 80}
BYTES_PER_TOKEN = 4
TYPICAL_LEDGER_GROWTH = 30
TYPICAL_TURN_HAZARD = 0.09


def expected_turns(turns: int, hazard: float = TYPICAL_TURN_HAZARD) -> int:
    """Turns an episode that may play ``turns`` plays on average when ``hazard`` of them end at each turn."""
    return max(1, min(turns, round(sum((1 - hazard) ** t for t in range(turns)))))


@dataclass
class Line:
    """One role (and audit step) of the estimate: calls, tokens, and the model that prices them."""

    role: str
    step: str | None
    model: str | None
    calls: int = 0
    plain_calls: int = 0  # without retries or flagged conflicts: what a clean run makes
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, prompt: int, completion: int, *, plain: bool = True) -> None:
        self.calls += 1
        self.plain_calls += plain
        self.prompt_tokens += prompt
        self.completion_tokens += completion

    @property
    def price(self) -> Price | None:
        return price_of(self.model) if self.model else None

    @property
    def cost_usd(self) -> float | None:
        price = self.price
        return price.bound(self.prompt_tokens, self.completion_tokens) if price is not None else None


@dataclass
class Estimate:
    episodes: int
    turns: int                  # turns played, at most, over every episode
    audited_turns: int
    lines: list[Line]
    canaries: int = 0
    notes: list[str] = field(default_factory=list)  # what is not counted, and why
    expected: Estimate | None = None  # the same run at typical sizes (TYPICAL_COMPLETION): what to plan with

    @property
    def calls(self) -> int:
        return sum(line.calls for line in self.lines)

    @property
    def plain_calls(self) -> int:
        return sum(line.plain_calls for line in self.lines)

    @property
    def prompt_tokens(self) -> int:
        return sum(line.prompt_tokens for line in self.lines)

    @property
    def completion_tokens(self) -> int:
        return sum(line.completion_tokens for line in self.lines)

    @property
    def models(self) -> list[str]:
        return sorted({line.model for line in self.lines if line.model and line.calls})

    @property
    def unpriced(self) -> list[str]:
        return [m for m in self.models if price_of(m) is None]

    @property
    def cost_usd(self) -> float:
        """The priced part of the bound (``unpriced`` lists the models it leaves out)."""
        return sum(line.cost_usd or 0.0 for line in self.lines)


def estimate_run(config: RunConfig, jobs: Sequence[tuple[NarrativeSpec, int]], *,
                 narrator_factory: Callable[[], Any] | None = None,
                 canaries: Sequence[TurnContext] = (), max_attempts: int | None = None,
                 typical: bool = False) -> Estimate:
    """The estimate of running ``jobs`` ((spec, repeat) episodes) with ``config`` (module docstring), with its
    ``expected`` figure; ``typical``: only that figure (TYPICAL_COMPLETION), no bound.

    ``narrator_factory`` is what ``config.narrator`` loads to (a class is inspected, never built: the built-in
    narrators' calls are counted); ``canaries`` the contexts of the auditor canaries the run audits beside."""
    limits = {**DEFAULT_MAX_TOKENS, **config.max_tokens}
    attempts = max_attempts or LLMAuditor.max_attempts
    growth = LEDGER_GROWTH_TOKENS
    if typical:
        limits = {role: min(limit, TYPICAL_COMPLETION.get(role, limit)) for role, limit in limits.items()}
        attempts, growth = 1, TYPICAL_LEDGER_GROWTH
    narrator_cls = narrator_factory if inspect.isclass(narrator_factory) else None
    built_in = narrator_cls is not None and issubclass(narrator_cls, LLMNarrator)
    narrator_model = (getattr(narrator_cls, "model", None) if built_in else None) or config.narrator_model
    simulated = config.player != "scripted"
    lines = {(role, step): Line(role, step, model) for role, step, model in (
        ("narrator", None, narrator_model if built_in else None),
        ("narrator", "memory_summary", narrator_model if built_in else None),
        ("player", None, config.player_model if simulated else None),
        ("auditor", SCREEN_STEP, config.auditor_model),
        *(("auditor", step, config.auditor_model) for step in AUDIT_STEPS))}
    regenerations = config.player_retries if simulated and not typical else 0
    opening = _opens(narrator_factory)
    turns = audited = 0
    for spec, _repeat in jobs:
        played = config.max_turns if simulated else min(config.max_turns, len(spec.scripted_inputs))
        if typical:
            played = expected_turns(played)
        # a scripted input is known (its bytes); a simulated player's is at most its --max-tokens
        inputs = [limits["player"]] * played if simulated else [_bytes(x) for x in spec.scripted_inputs[:played]]
        turns += played
        if built_in:
            # Pipelined, a refused input's narration was played ahead while it was screened, then dropped.
            ahead = regenerations if config.pipeline else 0
            _narrator(lines, narrator_cls, spec, inputs, limits["narrator"], opening, dropped=ahead)
        if simulated:
            _player(lines, config.player, spec, played, limits, regenerations=regenerations)
            _screens(lines, spec, played, limits, attempts, regenerations)
        audited_turns = [0] * bool(opening) + list(range(1, played + 1))
        audited += len(audited_turns)
        static = _audit_sizes(spec)
        for index, turn in enumerate(audited_turns):
            said = inputs[turn - 1] if turn >= 1 else 0
            turn_data = said + limits["narrator"] * (2 if turn >= 2 else 1) + growth * index
            _audit_turn(lines, static, turn_data, limits["auditor"], attempts, spec, votes=config.audit_votes,
                        success=not typical, flags=0 if typical else FLAGS_PER_TURN)
    for ctx in canaries:
        sizes = _audit_sizes(ctx.spec, ctx)
        _audit_turn(lines, sizes, 0, limits["auditor"], attempts, ctx.spec, success=False, votes=config.audit_votes,
                    flags=0 if typical else FLAGS_PER_TURN)
    notes = []
    if not built_in and config.narrator:
        notes.append(f"{config.narrator} is not a built-in narrator: its own model calls are not counted")
    found = [line for line in lines.values() if line.calls]
    if typical:
        for line in found:  # prompts were counted in bytes: a typical tokenizer makes about one token of four
            line.prompt_tokens = math.ceil(line.prompt_tokens / BYTES_PER_TOKEN)
        return Estimate(len(jobs), turns, audited, found, len(canaries), notes)
    expected = estimate_run(config, jobs, narrator_factory=narrator_factory, canaries=canaries,
                            max_attempts=max_attempts, typical=True)
    return Estimate(len(jobs), turns, audited, found, len(canaries), notes, expected)


def _opens(factory: Any) -> bool:
    """Whether the narrator may narrate a turn 0 (audited like any other): a built-in narrator when it has an
    opening instruction, another class when it has an ``opening`` hook, any factory (it cannot be told)."""
    if factory is None:
        return False
    if inspect.isclass(factory):
        if issubclass(factory, LLMNarrator):
            return bool(factory.opening_instruction)
        return callable(getattr(factory, "opening", None))
    return True


def _bytes(text: Any) -> int:
    return len(str(text or "").encode("utf-8"))


def _messages_bytes(messages: Sequence[dict[str, Any]]) -> int:
    return sum(_bytes(m.get("content")) + TOKENS_PER_MESSAGE for m in messages)


def _narrator(lines: dict[tuple[str, str | None], Line], cls: Any, spec: NarrativeSpec, inputs: list[int],
              limit: int, opening: bool, *, dropped: int = 0) -> None:
    """The built-in narrator: its prompt is the spec's template, then the whole history as chat turns; each
    turn may also narrate ``dropped`` refused inputs of a screened player (played ahead, never kept)."""
    system = _messages_bytes(render(cls.prompt, default_role="system", spec=spec, memory=[]))
    tags = 40 + 2 * TOKENS_PER_MESSAGE  # <player_input> tags and two messages per exchange
    history = 0
    if opening:
        lines[("narrator", None)].add(system + _bytes(cls.opening_instruction) + tags, limit)
        history += limit
    summaries = 0
    for said in inputs:
        memory = 0
        if issubclass(cls, MemoryNarrator):  # at most max_summaries + 1 summaries in its prompt
            memory = (cls.max_summaries + 1) * limit
        lines[("narrator", None)].add(system + memory + history + said + tags, limit)
        for _ in range(dropped):
            lines[("narrator", None)].add(system + memory + history + said + tags, limit, plain=False)
        history += said + limit + tags
    if issubclass(cls, MemoryNarrator):
        # one summary per chunk of folded turns, and a refold each time the summaries overflow
        summaries = 2 * math.ceil(len(inputs) / cls.chunk)
        fold = _messages_bytes(render("memory_summary", spec=spec, items=[])) + cls.chunk * (limit * 2 + 60)
        for _ in range(summaries):
            lines[("narrator", "memory_summary")].add(fold, limit)


def _player(lines: dict[tuple[str, str | None], Line], persona: str, spec: NarrativeSpec, played: int,
            limits: dict[str, int], *, regenerations: int = 0) -> None:
    """A simulated player: its persona prompt, then up to 20 exchanges (its inputs and the narrations); each
    regeneration of a refused input carries that input and why it was refused."""
    from .players import SimulatedPlayer

    system = _messages_bytes(render(f"player_{persona}", default_role="system", player=spec.player))
    per_exchange = limits["player"] + limits["narrator"] + 60 + 2 * TOKENS_PER_MESSAGE
    for turn in range(1, played + 1):
        window = min(turn - 1, SimulatedPlayer.window)
        prompt = system + window * per_exchange + 40
        lines[("player", None)].add(prompt, limits["player"])
        for k in range(1, regenerations + 1):
            refused = k * (limits["player"] + limits["auditor"] + RETRY_NOTE_TOKENS)
            lines[("player", None)].add(prompt + refused, limits["player"], plain=False)


def _screens(lines: dict[tuple[str, str | None], Line], spec: NarrativeSpec, played: int, limits: dict[str, int],
             attempts: int, regenerations: int) -> None:
    """The input screen of a simulated player: one call per input and per regeneration, each with every retry;
    its prompt holds the character's briefing and the story so far (the player's window of exchanges)."""
    from .players import SimulatedPlayer

    briefing = _messages_bytes(render(SCREEN_STEP, ctx=None, spec=spec, player=spec.player, turn=1, history=[],
                                      player_input="", nonce="0" * 12))
    per_exchange = limits["player"] + limits["narrator"] + 120  # two blocks and their delimiters
    for turn in range(1, played + 1):
        window = min(turn - 1, SimulatedPlayer.window)
        for screen in range(1 + regenerations):
            for attempt in range(attempts):
                prompt = briefing + window * per_exchange + limits["player"] + attempt * (
                    limits["auditor"] + RETRY_NOTE_TOKENS)
                lines[("auditor", SCREEN_STEP)].add(prompt, limits["auditor"], plain=screen == 0 and attempt == 0)


def _audit_sizes(spec: NarrativeSpec, ctx: TurnContext | None = None) -> dict[str, int]:
    """Bytes of each audit step's prompt for ``spec`` at turn 1 with empty turn data (or for a canary's real
    context ``ctx``): the story state, the task and the blocks' delimiters."""
    if ctx is None:
        ledger = FactLedger.from_initial((f.id, f.text) for f in spec.initial_facts)
        ctx = TurnContext(spec=spec, turn=1, player_input="", response="", facts=ledger.active(), node_index=0,
                          commitment_states={c.id: "PENDING" for c in spec.all_commitments},
                          previous_response="x", trigger_turn=None)
    auditor = LLMAuditor(client=None, model="estimate")  # type: ignore[arg-type]
    base = auditor._variables(ctx)
    flag = Conflict(type="fact", fact_ids=[], commitment_ids=[], quote="", explanation="")
    extra: dict[str, dict[str, Any]] = {
        Step.CONFLICT_CONFIRMATION: {"conflict": flag, "unverified": True, "withdrawn": False,
                                     "flag_nonce": base["nonce"]},
        Step.TRAJECTORY_UPDATE: {"node": spec.trajectory[0] if spec.trajectory else None},
        Step.COMMITMENT_CHECK: {"pending": [auditor._commitment_view(c, ctx) for c in spec.commitments
                                         if c.kind != "invariant"]},
        Step.SUCCESS_CONFIRMATION: {"evidence_nonce": base["nonce"], "claims": [
            {"id": c.id, "text": c.text, "evidence": ""} for c in spec.achievements]},
    }
    return {step: _messages_bytes(render(step, **base, **extra.get(step, {}))) for step in AUDIT_STEPS}


def _audit_turn(lines: dict[tuple[str, str | None], Line], sizes: dict[str, int], turn_data: int, limit: int,
                attempts: int, spec: NarrativeSpec, *, success: bool = True, votes: int = 1,
                flags: int = FLAGS_PER_TURN) -> None:
    """One audited turn: every step with all its attempts (each retry carries the rejected answer); each of
    ``flags`` flagged conflicts confirmed by ``votes`` samples."""
    steps = [Step.CONFLICT_CHECK, Step.FACT_UPDATE]
    if spec.trajectory:
        steps.append(Step.TRAJECTORY_UPDATE)
    if any(c.kind != "invariant" for c in spec.commitments):
        steps.append(Step.COMMITMENT_CHECK)
    calls = [(step, 1) for step in steps] + [(Step.CONFLICT_CONFIRMATION, flags * max(1, votes))]
    if success and spec.achievements:
        calls.append((Step.SUCCESS_CONFIRMATION, 1))
    for step, times in calls:
        plain = step not in (Step.CONFLICT_CONFIRMATION, Step.SUCCESS_CONFIRMATION)
        flag = limit if step == Step.CONFLICT_CONFIRMATION else 0  # the flag's quote and explanation
        for _ in range(times):
            for attempt in range(attempts):
                prompt = sizes[step] + turn_data + flag + attempt * (limit + RETRY_NOTE_TOKENS)
                lines[("auditor", step)].add(prompt, limit, plain=plain and attempt == 0)


def run_models(config: RunConfig) -> dict[str, str]:
    """The models a run calls, by role: the auditor, the narrator model (built-in narrators, and any narrator
    calling ``context.llm`` with ``context.model``) and a simulated player's."""
    models = {"auditor": config.auditor_model}
    if config.narrator_model:
        models["narrator"] = config.narrator_model
    if config.player != "scripted" and config.player_model:
        models["player"] = config.player_model
    return models


def unpriced_under_cap(config: RunConfig, cap_flag: str = "--max-cost") -> list[str]:
    """Why a cost cap cannot start: a model of the run with no list price (its calls could not be bounded, so
    the cap would promise what it cannot keep). Empty without a cap, or when every model is priced."""
    if config.max_cost is None:
        return []
    missing = [f"{model} ({role})" for role, model in run_models(config).items() if price_of(model) is None]
    if not missing:
        return []
    return [f"{cap_flag}={config.max_cost:g}: {', '.join(missing)} ha{'s' if len(missing) == 1 else 've'} no price "
            "in litellm's cost map, so the cap could not bound what its calls cost; use a model name the map "
            "prices (e.g. openai/gpt-4o-mini behind --api-base), or run without a cap"]
