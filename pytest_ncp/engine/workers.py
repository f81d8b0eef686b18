"""``ncp run --workers N``: episodes spread over N processes when one core is not enough.

One event loop drives hundreds of episodes while they wait on models, but every model call costs
CPU (building the prompt, HTTP, parsing, the trace), so past some number of episodes in flight one
core is the bound, not the models (benchmarks/README.md measures where). Workers each run a
balanced share of the episodes (round-robin over the run's (spec, repeat) order) with their share
of ``--concurrency``; the parent process keeps the one progress display and the one results.json,
written as each episode's record arrives. Traces and cassettes are per episode, so workers never
write the same file.
"""

from __future__ import annotations

import asyncio
import math
import os
import queue as queues
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

if TYPE_CHECKING:
    from .runner import Runner
    from ..core.spec import NarrativeSpec

class LineSink(Protocol):
    """Where the parent prints a worker's episode lines (``report.progress.ProgressDisplay``)."""

    def line(self, line: str) -> None: ...


# Episodes in flight one process keeps up with at the lean path's CPU per call (see benchmarks/README.md).
EPISODES_PER_PROCESS = 32


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_workers(in_flight: int, cores: int | None = None) -> int:
    """One process until more than EPISODES_PER_PROCESS episodes are in flight; then up to one per core."""
    cores = cores or available_cores()
    return max(1, min(cores, math.ceil(in_flight / EPISODES_PER_PROCESS)))


def run_in_workers(runner: Runner, specs: Sequence[NarrativeSpec], workers: int, *,
                   display: LineSink | None = None,
                   narrator_factory: Callable[[], Any] | None = None,
                   player_factory: Callable[[Any], Any] | None = None) -> list[str]:
    """Run ``runner``'s episodes of ``specs`` in ``workers`` processes; records land in ``runner.results``.

    Episodes ``runner`` already holds as finished (``resume()``) are not run again. Factories, when
    given, must be picklable (module-level); by default each worker loads the narrator ``config`` names.
    Returns problems (a worker that died with episodes unfinished), empty when all went well.
    """
    import multiprocessing

    from ..core.config import episode_key
    from ..llm import Usage

    jobs = runner.plan(specs)
    todo = [(s, r) for s, r in jobs if episode_key(s.id, r) not in runner._finished]
    runner.progress.total += len(jobs)
    runner.progress.finished += len(jobs) - len(todo)
    workers = max(1, min(workers, len(todo)))
    # Each worker has its own model client: the cost cap is shared out evenly, so together they stay within it.
    cap = runner.config.max_cost
    config = replace(runner.config, concurrency=max(1, math.ceil(runner.config.concurrency / workers)), shard=None,
                     max_cost=cap / workers if cap is not None else None)
    out_dir = str(runner.out_dir) if runner.out_dir is not None else None
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads (the display)
    inbox = ctx.Queue()
    processes = [ctx.Process(target=_worker, name=f"ncp-worker-{i}", daemon=True,
                             args=(i, config, todo[i::workers], out_dir, inbox, narrator_factory, player_factory))
                 for i in range(workers)]
    for p in processes:
        p.start()
    running = [0] * workers
    expected = {episode_key(s.id, r) for s, r in todo}
    usage = runner.client.usage if runner.client is not None else Usage()
    try:
        while expected:
            try:
                message = inbox.get(timeout=0.25)
            except queues.Empty:
                if not any(p.is_alive() for p in processes) and inbox.empty():
                    break
                continue
            kind, worker = message[0], message[1]
            if kind == "turn":
                runner.progress.turns += 1
                running[worker] = message[2]
                runner.progress.running = sum(running)
            elif kind == "episode":
                _, _, key, entry, line = message
                expected.discard(key)
                runner.results[key] = entry
                runner.progress.finished += 1
                runner.progress.conflicts += str(entry.get("termination", "")).startswith("conflict:")
                runner.progress.errors += entry.get("error") is not None
                usage.merge(Usage(calls=0, prompt_tokens=int(entry.get("tokens") or 0),
                                  cost_usd=float(entry.get("cost_usd") or 0.0)))
                if display is not None:
                    display.line(line)
                runner.save()
    finally:
        for p in processes:
            p.join(timeout=5 if not expected else 0.5)
            if p.is_alive():
                p.terminate()
                p.join()
    runner.progress.running = 0
    runner.end()  # results.json: complete, or "unfinished" with the episodes a dead worker left
    problems = []
    if expected:
        codes = ", ".join(f"{p.name} exit {p.exitcode}" for p in processes if p.exitcode)
        problems.append(f"{len(expected)} episode(s) did not finish ({codes or 'workers ended early'}): "
                        + ", ".join(sorted(expected)[:10]))
    return problems


def _worker(index: int, config: Any, jobs: list[tuple[Any, int]], out_dir: str | None, outbox: Any,
            narrator_factory: Callable[[], Any] | None, player_factory: Callable[[Any], Any] | None) -> None:
    from pathlib import Path

    from ..core.config import episode_key
    from .episode import episode_line
    from .runner import Runner

    runner = Runner(config, out_dir=Path(out_dir) if out_dir else None, write_results=False,
                    narrator_factory=narrator_factory, player_factory=player_factory)
    runner.on_turn = lambda: outbox.put(("turn", index, runner.progress.running))
    runner.on_episode = lambda r: outbox.put(("episode", index, episode_key(r.spec.id, r.repeat), r.to_dict(),
                                              episode_line(r)))

    async def main() -> None:
        bound = asyncio.Semaphore(config.concurrency)

        async def one(spec: Any, repeat: int) -> None:
            async with bound:
                await runner.run_one(spec, repeat)

        await asyncio.gather(*(one(s, r) for s, r in jobs))

    try:
        asyncio.run(main())
    except KeyboardInterrupt:  # the parent reports the interruption; traces already written stay
        pass
