"""``ncp run --workers N``: episodes spread over N processes when one core is not enough.

One event loop drives hundreds of episodes while they wait on models, but every model call costs
CPU (building the prompt, HTTP, parsing, the trace), so past some number of episodes in flight one
core is the bound, not the models (benchmarks/README.md measures where). The parent hands the episodes
out in the run's start order to whichever worker has a free slot (each holds its share of
``--concurrency``), so a sequential gate decided in the parent stops the run as it would in one process;
the parent keeps the one progress display and the one results.json, written as each episode's record
arrives. Traces and cassettes are per episode, so workers never write the same file.
"""

from __future__ import annotations

import asyncio
import math
import os
import queue as queues
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from ..core.config import episode_key
from ..llm import Usage

if TYPE_CHECKING:
    from ..core.records import EpisodeRecord
    from .runner import Runner
    from ..core.spec import NarrativeSpec

class EpisodeSink(Protocol):
    """Where the parent shows a worker's finished episodes (``report.progress.ProgressDisplay``)."""

    def episode_done(self, record: EpisodeRecord) -> None: ...


# Episodes in flight one process keeps up with at the lean path's CPU per call (see benchmarks/README.md).
EPISODES_PER_PROCESS = 32


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def cap_share(cap: float | None, processes: int, *, canaries_apart: bool = False) -> float | None:
    """One model client's share of a cost cap (``--max-cost``): every process that calls models has its own
    client, so the cap is shared out evenly between the ``processes`` that run episodes, and one more share
    when the auditor canaries run on a client of their own (``ncp run --workers``' parent, the pytest-xdist
    controller); together they stay within the cap. None without a cap."""
    if cap is None:
        return None
    return cap / max(1, processes + (1 if canaries_apart else 0))


def default_workers(in_flight: int, cores: int | None = None) -> int:
    """One process until more than EPISODES_PER_PROCESS episodes are in flight; then up to one per core."""
    cores = cores or available_cores()
    return max(1, min(cores, math.ceil(in_flight / EPISODES_PER_PROCESS)))


def run_in_workers(runner: Runner, specs: Sequence[NarrativeSpec], workers: int, *,
                   display: EpisodeSink | None = None, canaries_apart: bool = False,
                   narrator_factory: Callable[[], Any] | None = None,
                   player_factory: Callable[[Any], Any] | None = None) -> list[str]:
    """Run ``runner``'s episodes of ``specs`` in ``workers`` processes; records land in ``runner.results``.

    The parent hands episodes out one at a time, in the run's start order (``Runner.jobs``), to the worker with a
    free slot (each keeps at most its share of ``--concurrency`` in flight), and reads every finished episode as it
    arrives; so with ``--sequential`` the parent decides, and once decided hands out no more (``Runner.may_start``)
    and, with ``--sequential-cancel``, tells the workers to end the episodes in flight at their next turn.
    Episodes ``runner`` already holds as finished (``resume()``) are not run again. Factories, when given, must be
    picklable (module-level); by default each worker loads the narrator ``config`` names. ``canaries_apart``: the
    caller audits canaries on its own client afterwards, so the workers leave it a share of the cap
    (``cap_share``). Returns problems (a worker that died with episodes unfinished), empty when all went well.
    """
    jobs = runner.plan(specs)
    todo = [(s, r) for s, r in jobs if episode_key(s.id, r) not in runner._finished]
    for s, r in jobs:  # resumed episodes are read first: the sequential checks see the whole run in start order
        key = episode_key(s.id, r)
        if key in runner._finished:
            runner._observe(runner.results[key])
    runner.progress.total += len(jobs)
    runner.progress.finished += len(jobs) - len(todo)
    dispatch = _Dispatch(runner, todo, max(1, min(workers, len(todo))), display, narrator_factory, player_factory,
                         canaries_apart=canaries_apart)
    try:
        dispatch.run()
    finally:
        dispatch.stop()
    runner.progress.running = 0
    runner.end()  # results.json: complete, or "unfinished" with the episodes a dead worker left
    return dispatch.problems()


class _Dispatch:
    """The parent's side of ``run_in_workers``: the worker processes, the episodes waiting and handed out, and
    what each message from a worker changes."""

    def __init__(self, runner: Runner, todo: list[tuple[NarrativeSpec, int]], workers: int,
                 display: EpisodeSink | None, narrator_factory: Callable[[], Any] | None,
                 player_factory: Callable[[Any], Any] | None, *, canaries_apart: bool = False) -> None:
        import multiprocessing
        from collections import deque

        self.runner, self.display = runner, display
        # Each worker has its own model client: the cost cap is shared out (cap_share).
        self.config = replace(runner.config, concurrency=max(1, math.ceil(runner.config.concurrency / workers)),
                              shard=None, max_cost=cap_share(runner.config.max_cost, workers,
                                                             canaries_apart=canaries_apart))
        out_dir = str(runner.out_dir) if runner.out_dir is not None else None
        used = list({s.id: s for s, _ in todo}.values())
        self.place = {s.id: i for i, s in enumerate(used)}
        ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads (the display)
        self.inbox = ctx.Queue()
        self.outboxes = [ctx.Queue() for _ in range(workers)]
        self.processes = [ctx.Process(target=_worker, name=f"ncp-worker-{i}", daemon=True,
                                      args=(i, self.config, used, out_dir, self.inbox, self.outboxes[i],
                                            narrator_factory, player_factory))
                          for i in range(workers)]
        for p in self.processes:
            p.start()
        self.running = [0] * workers
        self.in_flight = [0] * workers
        self.ready = [False] * workers  # a worker gets episodes once it is up: a slow start must not hold early ones
        self.waiting = deque(todo)
        self.expected: set[str] = set()  # handed out, not reported yet
        self.ended = self.cancelled = False
        self.usage = runner.client.usage if runner.client is not None else Usage()

    def hand_out(self, worker: int) -> None:
        while (self.waiting and self.ready[worker] and self.in_flight[worker] < self.config.concurrency
               and self.processes[worker].is_alive()):
            spec, repeat = self.waiting[0]
            if not self.runner.may_start(spec.id, repeat):  # a sequential decision: none of the rest starts
                for s, r in self.waiting:
                    self.runner.may_start(s.id, r)
                self.waiting.clear()
                break
            self.waiting.popleft()
            self.outboxes[worker].put(("job", self.place[spec.id], repeat))
            self.in_flight[worker] += 1
            self.expected.add(episode_key(spec.id, repeat))

    def tell(self, *message: Any) -> None:
        for box in self.outboxes:
            box.put(message)

    def run(self) -> None:
        """Until every episode handed out has reported and none waits (or every worker is gone)."""
        monitor = self.runner.monitor
        while self.expected or self.waiting:
            if not self.cancelled and monitor is not None and monitor.cancel_now:
                self.tell("cancel")
                self.cancelled = True
            if not self.waiting and not self.ended:
                self.tell("end")  # each worker finishes what it holds, then exits
                self.ended = True
            try:
                message = self.inbox.get(timeout=0.25)
            except queues.Empty:
                alive = [w for w, p in enumerate(self.processes) if p.is_alive()]
                if not alive and self.inbox.empty():
                    break
                for worker in alive:  # a worker died: the others take what is left
                    self.hand_out(worker)
                continue
            self.receive(message)

    def receive(self, message: tuple[Any, ...]) -> None:
        kind, worker, progress = message[0], message[1], self.runner.progress
        if kind == "ready":
            self.ready[worker] = True
            self.hand_out(worker)
        elif kind == "turn":
            progress.turns += 1
            self.running[worker] = message[2]
            progress.running = sum(self.running)
        elif kind == "episode":
            _, _, key, entry = message
            self.expected.discard(key)
            self.in_flight[worker] -= 1
            self.runner.results[key] = entry
            progress.finished += 1
            progress.conflicts += entry.termination.is_conflict
            progress.errors += entry.error is not None
            self.usage.merge(Usage(calls=0, prompt_tokens=entry.tokens, cost_usd=entry.cost_usd))
            if self.display is not None:
                self.display.episode_done(entry)
            self.runner._observe(entry)
            self.runner.save()
            self.hand_out(worker)

    def stop(self) -> None:
        if not self.ended:
            self.tell("end")
        for p in self.processes:
            p.join(timeout=5 if not self.expected else 0.5)
            if p.is_alive():
                p.terminate()
                p.join()

    def problems(self) -> list[str]:
        missing = self.expected | {episode_key(s.id, r) for s, r in self.waiting}
        if not missing:
            return []
        codes = ", ".join(f"{p.name} exit {p.exitcode}" for p in self.processes if p.exitcode)
        return [f"{len(missing)} episode(s) did not finish ({codes or 'workers ended early'}): "
                + ", ".join(sorted(missing)[:10])]


def _worker(index: int, config: Any, specs: list[Any], out_dir: str | None, outbox: Any, inbox: Any,
            narrator_factory: Callable[[], Any] | None, player_factory: Callable[[Any], Any] | None) -> None:
    """Run the episodes the parent hands out (``("job", spec index, repeat)``) until it says ``("end",)`` and
    every one has finished; ``("cancel",)`` ends those in flight at their next turn (``--sequential-cancel``)."""
    import functools
    from pathlib import Path

    from .runner import Runner

    runner = Runner(config, out_dir=Path(out_dir) if out_dir else None, write_results=False,
                    narrator_factory=narrator_factory, player_factory=player_factory)
    runner.on_turn = lambda: outbox.put(("turn", index, runner.progress.running))
    runner.on_episode = lambda r: outbox.put(("episode", index, episode_key(r.spec.id, r.repeat), r.record))
    told = {"cancel": False}
    runner.cancel = lambda: told["cancel"]
    outbox.put(("ready", index))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Future[Any]] = set()
        ended = False
        while not ended or tasks:
            try:
                message = await loop.run_in_executor(None, functools.partial(inbox.get, timeout=0.1))
            except queues.Empty:
                message = None
            for task in [t for t in tasks if t.done()]:
                tasks.discard(task)
                task.result()  # an engine bug surfaces here (the worker dies; the parent reports what is missing)
            if message is None:
                continue
            if message[0] == "job":
                tasks.add(asyncio.ensure_future(runner.run_one(specs[message[1]], message[2])))
            elif message[0] == "cancel":
                told["cancel"] = True
            elif message[0] == "end":
                ended = True

    try:
        asyncio.run(main())
    except KeyboardInterrupt:  # the parent reports the interruption; traces already written stay
        pass
