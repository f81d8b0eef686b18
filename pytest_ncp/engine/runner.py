"""Many episodes at once: one engine for ``ncp run`` and the pytest plugin.

Episodes wait on models almost all the time, so they run concurrently on one event loop under a
bound; the model client adds a per-endpoint bound that backs off on rate limits. Each episode writes
its own JSON-lines trace turn by turn, and ``results.json`` is rewritten atomically as episodes end (at
most once per ``SAVE_EVERY`` seconds, and always when the run ends or stops), so a killed run loses
nothing (``resume`` reads the traces) and continues where it stopped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Sequence

from pydantic import ValidationError

from .auditor import Auditor, LLMAuditor
from .episode import Episode, EpisodeResult
from ..llm import ModelClient, scrub
from .narrators import NarratorFactory, load_narrator
from ..core.config import DEFAULT_AUDITOR_MODEL, RunConfig, Shard, episode_key
from .players import Player, make_player
from ..analysis.results import RunResults, Stopped, build_results, write_results
from ..core.records import Ending, EpisodeRecord, ErrorRecord, Termination
from ..analysis.sequential_run import SequentialPlan, SequentialRun, episode_order
from ..core.spec import NarrativeSpec

if TYPE_CHECKING:
    from ..llm.cassette import CassetteTransport
    from .admission import CostAdmission

# results.json is rebuilt whole on each rewrite: once per episode would cost O(episodes^2) (a 192-episode run
# spent a tenth of its CPU there); a reader sees the file at most this many seconds behind the traces.
SAVE_EVERY = 1.0
# Endings that leave an episode unfinished, so --resume plays it again: an error (infrastructure), a cut by the
# cost cap (the README's "raise the cap to finish it") and a cancellation after an early gate decision.
RERUN_ON_RESUME: tuple[Termination, ...] = tuple(t for t in Termination
                                                 if t is Termination.ERROR or Ending.of(t).stopped)


def _narrators_error(end: dict[str, Any]) -> bool:
    """An episode that ended in the narrator's own error: a failure like a conflict (its ``Ending``'s owner is
    the narrator), kept by ``--resume``; run again, a narrator that fails now and then would pass on resume."""
    try:
        ending = Ending.of(Termination(end.get("termination")), (end.get("error") or {}).get("kind"))
    except ValueError:  # an ending or error kind this version does not know: run again, as before
        return False
    return ending.failure


def _changed(field: str, before: Any, now: Any) -> str:
    """One setting that differs between a recorded episode and this run, as a resume refusal names it."""
    if isinstance(before, dict) and isinstance(now, dict):
        keys = sorted(k for k in {*before, *now} if before.get(k) != now.get(k))
        return "; ".join(f"{field}.{k}: {before.get(k)!r} -> {now.get(k)!r}" for k in keys)
    return f"{field}: {before!r} -> {now!r}"


def run_jobs(specs: Sequence[NarrativeSpec], config: RunConfig, *, sequential: bool) -> list[tuple[NarrativeSpec, int]]:
    """The (spec, repeat) episodes a run of ``config`` plays, in start order (``Runner.jobs`` says how a shard's
    slice is dealt); ``--estimate`` prices the same ones."""
    every = [(s, r) for s in specs for r in range(config.repeats)]
    by_key = {(s.id, r): (s, r) for s, r in every}
    shard = Shard.parse(config.shard) if config.shard else None
    if shard is not None and not sequential:
        keys = [(s.id, r) for s, r in shard.select(every)]
        return [by_key[k] for k in episode_order(keys, config.seed)]
    cut = (shard.index, shard.count) if shard is not None else None
    return [by_key[k] for k in episode_order(by_key, config.seed, cut)]


class ResumeMismatch(Exception):
    """``--resume`` found finished episodes run with other settings or another version of their spec."""


@dataclass
class RunProgress:
    """Live counters of a run, for progress displays (read from any thread; updated on the loop)."""

    total: int = 0
    running: int = 0
    finished: int = 0
    conflicts: int = 0
    errors: int = 0
    turns: int = 0


@dataclass
class Runner:
    """Runs (spec, repeat) episodes concurrently and keeps results.json current in ``out_dir``.

    ``narrator_factory``, ``auditor`` and ``player_factory`` default to what ``config`` names; hosts
    (the pytest plugin, tests) pass their own.
    """

    config: RunConfig
    out_dir: Path | None = None
    narrator_factory: NarratorFactory | None = None
    auditor: Auditor | None = None
    player_factory: Callable[[NarrativeSpec], Player] | None = None
    client: ModelClient | None = None
    on_episode: Callable[[EpisodeResult], None] | None = None
    on_turn: Callable[[], None] | None = None  # after each audited turn of any episode (worker processes)
    write_results: bool = True  # False where another process merges results (pytest-xdist workers)
    results: dict[str, EpisodeRecord] = field(default_factory=dict)
    _finished: dict[str, Path] = field(default_factory=dict, repr=False)  # from resume()
    changed: list[str] = field(default_factory=list)  # episodes resume() found changed and re-runs (force)
    unreadable: list[str] = field(default_factory=list)  # finished episodes resume() could not read back: re-run
    canaries: dict[str, Any] | None = None  # the auditor canaries' summary, once scored (docs/auditor.md)
    verdict: dict[str, Any] | None = None  # the ended run's verdict (report.verdict.verdict_record)
    progress: RunProgress = field(default_factory=RunProgress)
    # results.json says whether the run is complete: the episodes it set out to finish (``plan``), and why it
    # is not (yet) complete: "running" until the host calls ``end()``, "interrupted" after Ctrl-C.
    expected: set[str] = field(default_factory=set)
    stopped: Stopped | None = "running"
    _saved_at: float = field(default=0.0, repr=False)  # time.monotonic() of the last results.json rewrite
    # --sequential: ``plan()`` builds ``monitor`` from it, which reads every finished episode in start
    # order and stops the run (``analysis/sequential_run.py``). Hosts whose decision is taken elsewhere (a
    # pytest-xdist worker: the controller decides) pass ``halt`` (start no new episode) and ``cancel`` (end the
    # episodes in flight at their next turn) instead.
    sequential: SequentialPlan | None = None
    halt: Callable[[], bool] | None = None
    cancel: Callable[[], bool] | None = None
    on_stop: Callable[[SequentialRun], None] | None = None  # once, when ``monitor`` stops the run
    provenance: dict[str, Any] | None = None  # results.json's provenance (engine.provenance), set by the host

    def __post_init__(self) -> None:
        self.monitor: SequentialRun | None = None
        self._admit: CostAdmission | None = None
        if self.client is None:
            self.client = ModelClient.from_config(self.config)
        self.cassettes: CassetteTransport | None = None
        if self.config.record_mode is not None:
            from ..llm.cassette import CassetteTransport

            assert self.config.cassettes, "a record mode needs a cassette directory"
            self.cassettes = CassetteTransport(self.config.record_mode, self.config.cassettes,
                                               self.client.transport or self.client.model_call)
            self.client.transport = self.cassettes
        if self.narrator_factory is None:
            if not self.config.narrator:
                raise ValueError("no narrator: give module:Attr (e.g. my_agent:Narrator)")
            self.narrator_factory = load_narrator(self.config.narrator)
        if self.auditor is None:
            self.auditor = LLMAuditor.from_config(self.config, self.client)
        if self.player_factory is None:
            self.player_factory = lambda spec: make_player(
                self.config.player, spec, client=self.client, model=self.config.player_model)
        if self.out_dir is not None:
            self.out_dir = Path(self.out_dir)
            (self.out_dir / "traces").mkdir(parents=True, exist_ok=True)

    # --- running -------------------------------------------------------------------------------
    def episode(self, spec: NarrativeSpec, repeat: int = 0) -> Episode:
        assert self.narrator_factory and self.player_factory and self.auditor
        trace = self.out_dir / "traces" / f"{episode_key(spec.id, repeat)}.jsonl" if self.out_dir else None
        return Episode.from_config(
            spec, self.config, narrator=self.narrator_factory(), player=self.player_factory(spec),
            auditor=self.auditor, client=self.client, repeat=repeat, trace_path=trace, on_turn=self._turn_done,
            stop=self._cancelled,
        )

    def _admission(self) -> CostAdmission | None:
        """Under ``--max-cost``, what decides when an episode may start (``engine.admission``)."""
        client = self.client
        if client is None or client.max_cost is None:
            return None
        if self._admit is None:
            from .admission import CostAdmission

            self._admit = CostAdmission(self.config, client.max_cost, lambda: client.spent_usd, self.narrator_factory)
        return self._admit

    def _cancelled(self) -> bool:
        """Should the episodes in flight end now (``--sequential-cancel`` once the run stopped)?"""
        if self.monitor is not None and self.monitor.cancel_now:
            return True
        return self.cancel is not None and self.cancel()

    def may_start(self, spec_id: str, repeat: int) -> bool:
        """May this episode start? False once a sequential decision stopped the run (``monitor``, or ``halt``)."""
        if episode_key(spec_id, repeat) in self._finished:
            return True  # already finished (resume): read again, never run
        if self.monitor is not None:
            return self.monitor.start((spec_id, repeat))
        return not (self.halt is not None and self.halt())

    def _observe(self, record: EpisodeRecord) -> None:
        """A finished episode, for the sequential checks (``monitor``), in whatever order episodes finish."""
        if self.monitor is None:
            return
        was = self.monitor.stopped
        self.monitor.finished(record)
        if self.monitor.stopped and not was:
            if self.on_stop is not None:
                self.on_stop(self.monitor)
            # results.json says so at once, not at the next throttled save: whoever watches it (a CI step, a
            # dashboard) learns the run has decided while its last episodes finish.
            self.save(force=True)

    def resume(self, specs: Sequence[NarrativeSpec] = (), *, force: bool = False,
               force_flag: str = "--resume --force") -> int:
        """Take every episode already finished in ``out_dir`` (its trace has an end) as done.

        Errored episodes are not finished (but for the narrator's own errors, which are its outcome): they ended
        for infrastructure reasons and run again, as do episodes
        the cost cap cut short or a sequential decision cancelled (``RERUN_ON_RESUME``), and so do
        episodes whose end record the results model refuses (``unreadable`` says which and why). An
        episode run with other settings (``FINGERPRINT_FIELDS``) or another version of its spec (one of
        ``specs``) is never mixed in: ``ResumeMismatch`` says what changed, or with ``force`` it runs
        again (listed in ``changed``). Returns how many episodes will be skipped.
        """
        from ..core.config import FINGERPRINT_FIELDS
        from ..core.traces import read_trace

        assert self.out_dir is not None, "resuming needs the output directory of the earlier run"
        self._finished.clear()
        self.changed.clear()
        self.unreadable.clear()
        current = self.config.to_dict()
        by_id = {s.id: s for s in specs}
        mismatches: dict[str, list[str]] = {}
        for trace in sorted((self.out_dir / "traces").glob("*.jsonl")):
            recorded = read_trace(trace)
            end = recorded.end
            if end is None or (end.get("termination") in RERUN_ON_RESUME and not _narrators_error(end)) \
                    or (recorded.start or {}).get("fork"):
                continue  # a fork's trace (ncp fork --out into a run folder) is never one of the run's episodes
            key = episode_key(end["spec_id"], int(end["repeat"]))
            spec = by_id.get(end["spec_id"])
            if specs and (spec is None or int(end["repeat"]) >= self.config.repeats):
                continue  # not an episode of this run (another spec set, more repeats before): left out
            start = recorded.start or {}
            before = {**(start.get("config") or {}), "prompt_version": start.get("prompt_version")}
            why = [_changed(f, before.get(f), current.get(f)) for f in FINGERPRINT_FIELDS
                   if before.get(f) != current.get(f)]
            if spec is not None and start.get("spec_fingerprint") != spec.fingerprint:
                why.append(f"spec {spec.id} ({spec.path or 'built in code'}) changed since the episode ran"
                           + ("" if start.get("spec_fingerprint") else " (or was recorded without a fingerprint)"))
            if why:
                mismatches[key] = why
                continue
            try:  # the record goes back into results.json: it must be one the results model accepts
                record = EpisodeRecord.model_validate({**{k: v for k, v in end.items() if k != "event"},
                                                       "trace": str(trace)})
            except ValidationError as exc:
                self.unreadable.append(f"{key}: {exc.errors(include_url=False)[0]['msg']}")
                continue  # run again, as an episode whose trace has no end
            self._finished[key] = trace
            self.results[key] = record
        if mismatches and not force:
            self._finished.clear()
            self.results.clear()
            grouped: dict[str, list[str]] = {}
            for key, why in sorted(mismatches.items()):
                grouped.setdefault("; ".join(why), []).append(key)
            lines = [f"cannot resume {self.out_dir}: {len(mismatches)} finished episode(s) there were run with "
                     "other settings or another version of their spec:"]
            for reason, keys in grouped.items():
                shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
                lines.append(f"  {shown}: {reason}")
            lines.append(f"Mixing them would report figures no single configuration produced. Re-run the changed "
                         f"episodes with {force_flag}, or write to a new directory.")
            raise ResumeMismatch("\n".join(lines))
        self.changed = sorted(mismatches)
        return len(self._finished)

    async def run_one(self, spec: NarrativeSpec, repeat: int = 0) -> EpisodeResult:
        finished = self._finished.get(episode_key(spec.id, repeat))
        if finished is not None:
            done = EpisodeResult.from_trace(spec, finished)
            if done is not None:
                self.progress.finished += 1
                self.progress.conflicts += done.termination.is_conflict
                self._observe(self.results[episode_key(spec.id, repeat)])
                return done
        try:
            episode = self.episode(spec, repeat)
        except Exception as exc:  # noqa: BLE001 - a narrator factory or player that cannot be built
            failed = _setup_error(spec, repeat, exc)
            self.record(failed)
            return failed
        admission = self._admission()
        token = None
        if admission is not None:
            token, episode.refused = await admission.admit(spec)
        self.progress.running += 1
        result: EpisodeResult | None = None
        try:
            result = await episode.run()
        finally:
            self.progress.running -= 1
            if self.cassettes is not None:
                self.cassettes.flush()
            if admission is not None:
                cost = (result.usage.cost_usd + result.speculative.cost_usd) if result is not None else 0.0
                admission.finished(token, spec, cost, measured=result is not None and result.cut_by is None
                                   and result.error is None)
        assert result is not None  # episode.run() returned (else its exception went up)
        self.record(result)
        return result

    def _turn_done(self) -> None:
        self.progress.turns += 1
        if self.on_turn is not None:
            self.on_turn()

    async def run(self, specs: Sequence[NarrativeSpec]) -> list[EpisodeResult]:
        """The episodes of ``specs`` x ``repeats`` that ran, in input order. They start in ``jobs()`` order, at
        most ``concurrency`` at a time (the bound is first come, first served); once a sequential decision
        stopped the run, the rest never start."""
        bound = asyncio.Semaphore(self.config.concurrency)

        async def one(spec: NarrativeSpec, repeat: int) -> EpisodeResult | None:
            async with bound:
                if not self.may_start(spec.id, repeat):
                    return None
                return await self.run_one(spec, repeat)

        jobs = [one(s, r) for s, r in self.plan(specs)]
        self.progress.total += len(jobs)
        try:
            done = [r for r in await asyncio.gather(*jobs) if r is not None]
        finally:
            self.save(force=True)  # cancelled too: results.json holds every episode that finished
        self.end()  # also after a resume that ran nothing: results.json then carries this run's configuration
        place = {(s.id, r): i for i, (s, r) in enumerate((s, r) for s in specs for r in range(self.config.repeats))}
        return sorted(done, key=lambda e: place[(e.spec.id, e.repeat)])

    def jobs(self, specs: Sequence[NarrativeSpec]) -> list[tuple[NarrativeSpec, int]]:
        """The (spec, repeat) episodes of this run, in the order they start: the seeded order (``--seed``) of every
        one, or of this shard's slice (``--shard i/n``). A shard's slice is the sorted episodes dealt round-robin
        (``Shard.select``); with ``--sequential`` it is dealt from the seeded order instead, so that each shard's
        gate tests the run's survival rate (``analysis.sequential_run.episode_order``, docs/gates.md). Starting in
        the seeded order changes which episode starts first, never what one produces."""
        return run_jobs(specs, self.config, sequential=self.sequential is not None)

    def plan(self, specs: Sequence[NarrativeSpec]) -> list[tuple[NarrativeSpec, int]]:
        """``jobs(specs)``, now expected to finish: results.json is complete only once all of them have (bar those
        a sequential decision left unstarted)."""
        jobs = self.jobs(specs)
        self.expect(episode_key(s.id, r) for s, r in jobs)
        if self.sequential is not None and self.monitor is None:
            self.monitor = SequentialRun(self.sequential, [(s.id, r) for s, r in jobs])
        return jobs

    def expect(self, keys: Any) -> None:
        """Episode keys (``spec--rN``) this run sets out to finish; the run runs until ``end()``."""
        self.expected.update(keys)
        self.stopped = "running"

    def end(self, stopped: Stopped | None = None) -> None:
        """The run is over: ``stopped`` None when it ended by itself (results.json then says complete when no
        expected episode is missing), ``"interrupted"`` after Ctrl-C. Rewrites results.json."""
        self.stopped = stopped
        if self.monitor is not None:  # never started by design: not expected (results.json is complete without them)
            self.expected.difference_update(self.monitor.unstarted_keys())
        self.save(force=True)

    # --- results.json --------------------------------------------------------------------------
    def record(self, result: EpisodeResult) -> None:
        self.progress.finished += 1
        self.progress.conflicts += result.termination.is_conflict
        self.progress.errors += result.error is not None
        record = self.results[episode_key(result.spec.id, result.repeat)] = result.record
        self._observe(record)
        if self.on_episode:
            self.on_episode(result)
        self.save()

    def results_now(self) -> RunResults:
        """The run's results as results.json would hold them now."""
        shard = Shard.parse(self.config.shard).to_dict() if self.config.shard else None
        return build_results(
            self.config.to_dict(), list(self.results.values()), survival_turn=self.config.survival_turn,
            expected=self.expected, stopped=self.stopped, shard=shard, canaries=self.canaries,
            sequential=self.monitor.to_dict() if self.monitor is not None else None, provenance=self.provenance,
            verdict=self.verdict)

    def save(self, *, force: bool = False) -> None:
        """Rewrite results.json from every episode recorded so far (when this runner writes it): at most once
        per ``SAVE_EVERY`` seconds while the run goes on, always with ``force``."""
        import time

        if not force and time.monotonic() - self._saved_at < SAVE_EVERY:
            return
        self._saved_at = time.monotonic()
        if self.out_dir is not None and self.write_results:
            write_results(self.out_dir, self.results_now())


class BackgroundRunner:
    """Runs episodes on an event loop in a background thread, for hosts that are not async (pytest).

    ``submit`` starts an episode at once (bounded by the run's concurrency) and returns a future, so
    a host can start every selected episode up front and still consume results in its own order.
    """

    def __init__(self, runner: Runner):
        self.runner = runner
        self._futures: dict[str, concurrent.futures.Future[Any]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._bound: asyncio.Semaphore | None = None
        self._lock = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                self._bound = asyncio.Semaphore(self.runner.config.concurrency)
                ready.set()
                loop.run_forever()

            self._thread = threading.Thread(target=serve, name="ncp-episodes", daemon=True)
            self._thread.start()
            ready.wait()
            self._loop = loop
        return self._loop

    def submit(self, spec: NarrativeSpec, repeat: int = 0) -> concurrent.futures.Future[EpisodeResult | None]:
        key = episode_key(spec.id, repeat)
        with self._lock:
            if key not in self._futures:
                loop = self._start()
                self._futures[key] = asyncio.run_coroutine_threadsafe(self._bounded(spec, repeat), loop)
            return self._futures[key]

    def call(self, key: str, make: Callable[[], Coroutine[Any, Any, Any]]) -> concurrent.futures.Future[Any]:
        """Run ``make()`` (a coroutine) on the loop once per ``key`` (forks of stored failures)."""
        with self._lock:
            if key not in self._futures:
                self._futures[key] = asyncio.run_coroutine_threadsafe(make(), self._start())
            return self._futures[key]

    async def _bounded(self, spec: NarrativeSpec, repeat: int) -> EpisodeResult | None:
        assert self._bound is not None
        async with self._bound:
            if not self.runner.may_start(spec.id, repeat):
                return None  # a sequential decision stopped the run first: never started
            return await self.runner.run_one(spec, repeat)

    def result(self, spec: NarrativeSpec, repeat: int = 0) -> EpisodeResult | None:
        """The episode's result; None when a sequential decision stopped the run before it started."""
        return self.submit(spec, repeat).result()

    def run_coroutine(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        """Run other work of the session (auditor canaries) on the episodes' loop and client."""
        return asyncio.run_coroutine_threadsafe(coro, self._start())

    def close(self) -> None:
        """Cancel what is still running and stop the loop; finished traces stay as written."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(timeout=10)
        except Exception:  # noqa: BLE001 - shutting down; nothing left to report to
            pass
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        loop.close()


async def _cancel_all() -> None:
    # Episodes still running, and background tasks of the model library, end with the loop.
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    # Async generators hold per-loop resources (the lean path's HTTP session); asyncio.run does this.
    await asyncio.get_running_loop().shutdown_asyncgens()


def _setup_error(spec: NarrativeSpec, repeat: int, exc: Exception) -> EpisodeResult:
    from ..core.ledger import FactLedger

    return EpisodeResult(
        spec=spec, repeat=repeat, termination=Termination.ERROR, turns=0, node_index=0,
        commitment_states={c.id: "PENDING" for c in spec.all_commitments},
        ledger=FactLedger.from_initial((f.id, f.text) for f in spec.initial_facts),
        error=ErrorRecord(kind="narrator", message=scrub(f"could not build the episode: {type(exc).__name__}: {exc}"),
                          traceback=None, turn=None),
    )
