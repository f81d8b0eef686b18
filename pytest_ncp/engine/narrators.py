"""The Narrator protocol, loading narrators from ``module:Attr``, and the built-in LLM narrators."""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import inspect
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol, Sequence, cast, runtime_checkable

from ..prompts import render, untrusted

if TYPE_CHECKING:
    from ..llm import ModelClient
    from ..core.spec import NarrativeSpec, PlaythroughTurn


@dataclass(frozen=True)
class NarratorContext:
    """What a narrator may read when it answers turn ``turn``."""

    spec: NarrativeSpec
    turn: int
    history: Sequence[tuple[str, str]]  # earlier (player input, narrator response); turn 0 input is ""
    llm: ModelClient | None = None      # the run's model client (built-in narrators use it)
    model: str | None = None            # ``--narrator-model``
    repeat: int = 0


@runtime_checkable
class Narrator(Protocol):
    """The agent under test. ``respond`` may be a coroutine function.

    Optional hooks, each its own protocol below (a narrator has any of them, or none): ``reset(spec)``
    before an episode (``SupportsReset``), ``opening(context)`` (or ``opening()``) returning the turn-0
    narration or None (``SupportsOpening``), ``restore(history)`` after ``reset`` when an episode is
    forked (``SupportsRestore``), and ``speculation_safe = True`` (``SpeculationSafe``).
    """

    def respond(self, player_input: str, context: NarratorContext) -> str | Awaitable[str]: ...


@runtime_checkable
class SupportsReset(Protocol):
    """Called with the spec before each episode (may be a coroutine function)."""

    def reset(self, spec: NarrativeSpec) -> None | Awaitable[None]: ...


@runtime_checkable
class SupportsOpening(Protocol):
    """The turn-0 narration, audited like any other turn, or None for none (may be a coroutine function).

    ``opening()`` without the context is accepted too: the episode passes it only when the hook takes it.
    """

    def opening(self, context: NarratorContext) -> str | None | Awaitable[str | None]: ...


@runtime_checkable
class SupportsRestore(Protocol):
    """Called after ``reset`` when an episode is forked at turn T (``ncp fork``, stored failures) with the
    recorded (player input, narration) pairs before T, for narrators that keep their own memory; without
    it a forked narrator sees that history only in ``context.history``."""

    def restore(self, history: Sequence[tuple[str, str]]) -> None | Awaitable[None]: ...


@runtime_checkable
class SpeculationSafe(Protocol):
    """``speculation_safe = True`` lets the episode ask a narrator (or player) for turn t+1 while turn t is
    audited (pipelining): when that audit ends the episode, the answer is dropped, so it may see one more
    call than the sequential schedule makes, always the last one. Leave it unset when that extra call
    would matter (side effects, call counting)."""

    speculation_safe: bool


NarratorFactory = Callable[[], Narrator]


class NarratorLoadError(ValueError):
    """``module:Attr`` does not lead to a narrator; the message says what was expected."""


def load_narrator(path: str) -> NarratorFactory:
    """Resolve ``module:Attr`` into a factory that builds a fresh narrator per episode.

    A class is instantiated with no arguments; any other callable is called with no arguments and
    must return a narrator; an object that already has ``respond`` is shared as it is.
    """
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise NarratorLoadError(f"narrator {path!r} must look like 'module:Attr' (e.g. my_agent:Narrator)")
    # sys.path is left alone: the narrator under test shares the process, and so does every other import.
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is a configuration error here
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name is not None and (
                module_name == exc.name or module_name.startswith(exc.name + ".")):
            hint = (f"; make it importable: for pytest add `pythonpath = .` (the folder holding {exc.name}) to "
                    "the [pytest] ini section, or install your project (`pip install -e .`), or set PYTHONPATH")
        raise NarratorLoadError(
            f"cannot import narrator module {module_name!r}: {type(exc).__name__}: {exc}{hint}") from exc
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            names = sorted(n for n in dir(module) if not n.startswith("_"))
            raise NarratorLoadError(
                f"module {module_name!r} has no attribute {attr!r} (it has: {', '.join(names[:20]) or 'nothing'})"
            ) from None
    if inspect.isclass(target):
        if not callable(getattr(target, "respond", None)):
            raise NarratorLoadError(f"{path} is a class without a respond(player_input, context) method")
        return cast(NarratorFactory, target)  # a class builds a fresh narrator per call
    if callable(getattr(target, "respond", None)):
        return lambda: target
    if callable(target):
        def build() -> Narrator:
            narrator: Narrator = target()
            if not callable(getattr(narrator, "respond", None)):
                raise NarratorLoadError(f"{path}() returned {type(narrator).__name__}, which has no respond() method")
            return narrator
        return build
    raise NarratorLoadError(f"{path} is a {type(target).__name__}: expected a narrator class, a factory or an object "
                            "with a respond(player_input, context) method")


async def call_maybe_async(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


class NarratorTimeout(Exception):
    """A narrator hook did not answer within ``--narrator-timeout``: the narrator's error."""


# One lock per narrator object: its synchronous hooks run one at a time, as they did on the event loop, though in
# threads now (a narrator shared by every episode need not be thread-safe).
_hook_locks: dict[int, threading.Lock] = {}


async def call_narrator(fn: Callable[..., Any], *args: Any, timeout: float | None, name: str) -> Any:
    """Call a narrator hook (``respond``, ``opening``, ``reset``...), bounded by ``timeout`` seconds.

    A coroutine function runs on the loop; any other function in a daemon thread, so that a call stuck in user
    code (a lock, a socket without a timeout) blocks neither the other episodes nor the process's exit: the
    thread is never joined. Whatever it returns that is awaitable is awaited within what is left of
    ``timeout``. Raises ``NarratorTimeout`` naming the hook."""
    loop = asyncio.get_running_loop()
    started = loop.time()

    def left() -> float | None:
        return None if timeout is None else max(0.0, timeout - (loop.time() - started))

    async def bounded(awaitable: Awaitable[Any]) -> Any:
        try:
            return await asyncio.wait_for(awaitable, left())
        except asyncio.TimeoutError:
            raise NarratorTimeout(f"{name} did not answer within {timeout:g} s (the narrator timeout: "
                                  "--narrator-timeout, or --ncp-narrator-timeout under pytest)") from None

    if inspect.iscoroutinefunction(fn):
        return await bounded(fn(*args))
    future: asyncio.Future[Any] = loop.create_future()
    owner = getattr(fn, "__self__", fn)
    lock = _hook_locks.setdefault(id(owner), threading.Lock())
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        value, error = None, None
        with lock:
            try:
                value = context.run(fn, *args)
            except BaseException as exc:  # noqa: BLE001 - the narrator under test may raise anything
                error = exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop ended while this call was stuck: nobody waits for it any more
            pass

    threading.Thread(target=work, name=f"ncp-narrator-{name}", daemon=True).start()
    result = await bounded(future)
    if inspect.isawaitable(result):
        result = await bounded(result)
    return result


def accepts_argument(fn: Callable[..., Any]) -> bool:
    """Whether an optional hook takes a parameter (``opening()`` vs ``opening(context)``)."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):
        return False
    return bool(params)


# --- built-in narrators ------------------------------------------------------------------------------


class LLMNarrator:
    """A narrator backed by any litellm model, prompted from a template file.

    Configure by subclassing (class attributes) or by the run's options: ``model`` defaults to
    ``--narrator-model``; ``prompt`` is a template path (Jinja2, ``---- user ----`` optional) or the
    bundled ``"narrator"``. The template sees ``spec`` (synopsis, commitments, trajectory, facts) and
    ``memory``; the history follows as chat turns, so the prompt grows with the episode.
    """

    model: str | None = None
    prompt: str | Path = "narrator"
    # A call depends only on the history it is given; an extra, dropped last call changes nothing.
    speculation_safe = True
    temperature: float | None = 0.7
    opening_instruction: str | None = None  # e.g. "Open the story." to narrate a turn 0

    def reset(self, spec: NarrativeSpec) -> None:
        self.spec = spec

    def opening(self, context: NarratorContext) -> Awaitable[str | None] | None:
        if not self.opening_instruction:
            return None
        return self._complete(context, self.opening_instruction, context.history)

    async def respond(self, player_input: str, context: NarratorContext) -> str:
        return await self._complete(context, player_input, context.history)

    def memory(self, context: NarratorContext) -> list[str]:
        return []

    async def _complete(self, context: NarratorContext, player_input: str,
                        history: Sequence[tuple[str, str]]) -> str:
        if context.llm is None:
            raise RuntimeError("LLMNarrator needs the run's model client (context.llm)")
        model = self.model or context.model
        if not model:
            raise RuntimeError("LLMNarrator has no model: pass --narrator-model or set `model` on a subclass")
        memory = self.memory(context)
        key = (str(self.prompt), id(context.spec), tuple(memory))
        cached = getattr(self, "_system", None)
        if cached is None or cached[0] != key:  # the same spec and memory: the same system prompt, rendered once
            cached = self._system = (key, context.spec, render(self.prompt, default_role="system", spec=context.spec,
                                                                memory=memory))
        messages = [dict(m) for m in cached[2]]
        for said, answered in history:
            if said:
                messages.append({"role": "user", "content": _player(said)})
            messages.append({"role": "assistant", "content": answered})
        messages.append({"role": "user", "content": _player(player_input)})
        completion = await context.llm.complete("narrator", model, messages, temperature=self.temperature)
        return completion.text


def _player(text: str) -> str:
    return f"<player_input>\n{untrusted(text, 'player_input')}\n</player_input>"


@dataclass
class _MemoryState:
    summaries: list[str] = field(default_factory=list)  # oldest first, each covering a chunk of turns
    folded_turns: int = 0


class MemoryNarrator(LLMNarrator):
    """The paper's memory-augmented narrator: hierarchical memory in the spirit of HiAgent.

    The last ``recent_turns`` turns stay verbatim; older turns are folded, ``chunk`` at a time, by a
    model call into subgoal-level summaries; when there are more than ``max_summaries`` summaries the
    oldest ones are folded again into one higher-level summary. The prompt therefore stays bounded
    however long the episode runs.
    """

    recent_turns: int = 6
    chunk: int = 4
    max_summaries: int = 4

    def reset(self, spec: NarrativeSpec) -> None:
        super().reset(spec)
        self._state = _MemoryState()

    def memory(self, context: NarratorContext) -> list[str]:
        return list(self._state.summaries)

    async def respond(self, player_input: str, context: NarratorContext) -> str:
        if not hasattr(self, "_state"):
            self.reset(context.spec)
        await self._fold(context)
        recent = list(context.history)[self._state.folded_turns:]
        return await self._complete(context, player_input, recent)

    async def _fold(self, context: NarratorContext) -> None:
        state = self._state
        history = list(context.history)
        while len(history) - state.folded_turns > self.recent_turns + self.chunk - 1:
            part = history[state.folded_turns:state.folded_turns + self.chunk]
            items = [f"Player: {said}\nNarrator: {answered}" for said, answered in part]
            state.summaries.append(await self._summarise(context, items))
            state.folded_turns += len(part)
        if len(state.summaries) > self.max_summaries:
            oldest = state.summaries[: self.chunk]
            state.summaries[: self.chunk] = [await self._summarise(context, oldest)]

    async def _summarise(self, context: NarratorContext, items: list[str]) -> str:
        assert context.llm is not None
        model = self.model or context.model
        messages = render("memory_summary", spec=context.spec, items=items)
        completion = await context.llm.complete("narrator", model or "", messages, temperature=0.0)
        return completion.text.strip()


class ReferenceNarrator:
    """Plays a spec's reference playthrough: turn t answers with ``playthrough[t-1].narration``.

    An ideal narrator by construction (the loader proved the playthrough), so with any auditor every
    conflict it gets is the auditor's false alarm and every node it fails to reach is the auditor's miss
    (``ncp calibrate --reference``). It plays only the scripted inputs its playthrough answers.
    """

    speculation_safe = True  # a pure function of the turn

    def reset(self, spec: NarrativeSpec) -> None:
        _playthrough_of(spec)

    def respond(self, player_input: str, context: NarratorContext) -> str:
        turns = _playthrough_of(context.spec)
        if not 1 <= context.turn <= len(turns):
            raise ValueError(f"spec {context.spec.id!r}: its playthrough has {len(turns)} turn(s), no turn "
                             f"{context.turn}")
        turn = turns[context.turn - 1]
        if " ".join(player_input.split()) != " ".join(turn.input.split()):
            raise ValueError(f"spec {context.spec.id!r} turn {context.turn}: the reference narrator answers only "
                             f"its scripted input {turn.input!r}, got {player_input!r} (play it with the scripted "
                             "player)")
        return turn.narration


def _playthrough_of(spec: NarrativeSpec) -> Sequence[PlaythroughTurn]:
    if not spec.playthrough:
        raise ValueError(f"spec {spec.id!r} has no reference playthrough, so ReferenceNarrator cannot play it "
                         "(docs/specs.md, Writing a playthrough)")
    return spec.playthrough
