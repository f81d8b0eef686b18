"""A run that may stop early: the order episodes start in, their outcomes read in that order, the
sequential checks, and the rule that stops the run.

The statistics are :mod:`pytest_ncp.analysis.sequential`; this module applies them to a run's episode records, so
``ncp run`` (one process or ``--workers``), its shards, the pytest session (with or without pytest-xdist) and
``ncp merge`` stop and report by the same rule. Pure: records in, plain data out.

- **Order.** Episodes start in :func:`episode_order`: the seeded random order of (spec, repeat) (``--seed``,
  recorded), or, for a sequential shard, its slice of that order. Every run starts its episodes in it, sequential
  or not: the order decides which episode starts first, never what an episode produces.
- **Outcomes.** Each finished episode's survival at the gate's TURN (``metrics.survived_at``: True, False, or None
  when censored) is held back until every episode before it in the order has finished (``StartOrder``), then fed
  to the ``SequentialGate``; with a baseline, the pair (base, new) goes to the ``PairedSequentialTest``. Finish
  order would put failures first (they end sooner); the start order does not depend on any outcome.
- **The stop rule.** No new episode starts once the run's verdict is certain: a check decided *against* the run
  (the gate failed, or a regression), or every check decided *for* it (the gate passed and, with a baseline, a
  non-inferiority). A check still undecided when another one stopped the run stays undecided: judging it on the
  episodes played would judge part of the run (``analysis.verdict``). Episodes in flight finish, or with
  ``cancel`` end at their next turn as ``cancelled`` (right-censored; DESIGN 7.5's owner "budget").
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from ..core.config import episode_key
from ..core.endings import Termination
from .metrics import survived_at
from .sequential import (
    FAIL, NON_INFERIOR, PASS, REGRESSION, PairedSequentialTest, SequentialGate, StartOrder, seeded_order,
    shard_alpha, shard_slice,
)

if TYPE_CHECKING:
    from ..core.records import EpisodeRecord

Job = tuple[str, int]  # (spec_id, repeat)


def episode_order(jobs: Iterable[Job], seed: int | str, shard: tuple[int, int] | None = None) -> list[Job]:
    """The order a run starts its (spec_id, repeat) episodes in: seeded, then cut to ``shard`` (index, count).

    A shard's slice of the seeded order (positions index-1, index-1+count, ...) is a random subset of the run in a
    random order, so a shard's own gate tests the run's survival rate (docs/gates.md, "Shards").
    """
    order = seeded_order(jobs, seed)
    if shard is not None:
        order = shard_slice(order, *shard)
    return [(str(s), int(r)) for s, r in order]


@dataclass(frozen=True)
class SequentialPlan:
    """What a sequential run checks: the front ends build one from their options."""

    rate: float               # the gate: survival@turn >= rate
    turn: int
    alpha: float = 0.05       # the run's; a shard's gate runs at alpha / shards
    seed: int | str = 0
    cancel: bool = False      # cancel the episodes in flight once the run stopped
    shards: int = 1
    margin: float = 0.0       # the paired regression check's, with a baseline


@dataclass(frozen=True)
class EarlyStop:
    """How a sequential run went, for the verdict and its sentences (``SequentialRun.summary``)."""

    planned: int               # episodes the run (or shard) set out to play
    stopped_by: str | None     # "gate", "baseline", "gate and baseline"; None: it ran to the end
    read: int | None           # outcomes read, in start order, when it stopped (censored ones included)
    unstarted: int = 0
    cancelled: int = 0

    @property
    def stopped(self) -> bool:
        return self.stopped_by is not None

    def text(self) -> str:
        """``decided after 9 of 100 episodes`` (or why it did not stop)."""
        if self.stopped_by is None:
            return f"undecided after all {self.planned} episodes"
        return f"decided after {self.read} of {self.planned} episodes"


class SequentialRun:
    """One run's sequential checks over its episode records (module docstring).

    The host calls ``start(job)`` before it starts an episode (False once the run stopped: do not start it) and
    ``finished(record)`` when one ends (``EpisodeResult.record``). A host whose episodes
    are started elsewhere (pytest-xdist workers, told by a file) calls ``skip(job)`` for each one it learns was
    never started. ``baseline`` maps (spec_id, repeat) to the base run's survival at ``plan.turn`` (None:
    censored or missing) and adds the paired regression check. Safe to share between threads (the pytest
    session's episodes finish on a background loop while its reports are written on the main thread).
    """

    def __init__(self, plan: SequentialPlan, order: Sequence[Job],
                 baseline: Mapping[Job, bool | None] | None = None):
        self.plan = plan
        self.order = [(str(s), int(r)) for s, r in order]
        self.alpha = shard_alpha(plan.alpha, plan.shards)
        self.gate = SequentialGate(plan.rate, self.alpha, planned=len(self.order))
        self.paired = PairedSequentialTest(plan.margin, self.alpha) if baseline is not None else None
        self._baseline = dict(baseline or {})
        self._buffer = StartOrder(self.order)
        self._jobs = set(self.order)
        self._finished: set[Job] = set()
        self.outcomes: list[tuple[Job, bool | None]] = []  # read so far, in start order
        self.unstarted: list[Job] = []
        self.cancelled: list[Job] = []
        self.stopped_by: str | None = None
        self.read_at_stop: int | None = None
        self._lock = threading.RLock()

    # --- the host's calls ------------------------------------------------------------------------
    def start(self, job: Job) -> bool:
        """May ``job`` start? False once the run stopped (it is then recorded as never started)."""
        with self._lock:
            if self.stopped:
                self.skip(job)
                return False
            return True

    def skip(self, job: Job) -> None:
        job = (str(job[0]), int(job[1]))
        with self._lock:
            if job in self._jobs and job not in self.unstarted and job not in self._finished:
                self.unstarted.append(job)

    def finished(self, record: EpisodeRecord) -> str | None:
        """Read one finished episode; returns what stopped the run, once something has (``stopped_by``)."""
        with self._lock:
            return self._finished_locked(record)

    def _finished_locked(self, record: EpisodeRecord) -> str | None:
        job = (record.spec_id, record.repeat)
        if job not in self._jobs or job in self._finished:
            return self.stopped_by  # not one of this run's (a fork), or already read (resumed, then reported)
        self._finished.add(job)
        if record.termination is Termination.CANCELLED:
            self.cancelled.append(job)
        for ready, rec in self._buffer.add(job, record):
            done = (str(ready[0]), int(ready[1]))
            outcome = survived_at(rec, self.plan.turn)
            self.outcomes.append((done, outcome))
            self.gate.observe(outcome)
            if self.paired is not None:
                self.paired.observe(self._baseline.get(done), outcome)
            if self.stopped_by is None:
                self.stopped_by = self._stop_reason()
                if self.stopped_by is not None:
                    self.read_at_stop = len(self.outcomes)
        return self.stopped_by

    # --- what it says ----------------------------------------------------------------------------
    def _stop_reason(self) -> str | None:
        gate, paired = self.gate.decision, self.paired.decision if self.paired is not None else None
        if gate == FAIL and paired == REGRESSION:
            return "gate and baseline"
        if gate == FAIL:
            return "gate"
        if paired == REGRESSION:
            return "baseline"
        if gate == PASS and self.paired is None:
            return "gate"
        if gate == PASS and paired == NON_INFERIOR:
            return "gate and baseline"
        return None

    @property
    def stopped(self) -> bool:
        return self.stopped_by is not None

    @property
    def cancel_now(self) -> bool:
        """Episodes in flight should end at their next turn (``--sequential-cancel`` after the stop)."""
        return self.plan.cancel and self.stopped

    @property
    def planned(self) -> int:
        return len(self.order)

    def summary(self) -> EarlyStop:
        with self._lock:
            return self._summary()

    def _summary(self) -> EarlyStop:
        return EarlyStop(self.planned, self.stopped_by, self.read_at_stop, len(self.unstarted), len(self.cancelled))

    def unstarted_keys(self) -> list[str]:
        return sorted(episode_key(*job) for job in self.unstarted)

    def to_dict(self) -> dict[str, Any]:
        """results.json's ``sequential`` record (``analysis.results.SequentialRecord``)."""
        with self._lock:
            return self._to_dict_locked()

    def _to_dict_locked(self) -> dict[str, Any]:
        gate = self.gate.to_dict()
        gate["history"] = [[round(lo, 6), round(hi, 6)] for lo, hi in self.gate.cs.history()]
        return {
            "rate": self.plan.rate, "turn": self.plan.turn, "alpha": self.alpha, "run_alpha": self.plan.alpha,
            "shards": self.plan.shards, "seed": self.plan.seed, "cancel": self.plan.cancel,
            "planned": self.planned, "started": self.planned - len(self.unstarted),
            "stopped": self.stopped, "stopped_by": self.stopped_by, "decided_after": self.read_at_stop,
            "unstarted": self.unstarted_keys(), "cancelled": sorted(episode_key(*j) for j in self.cancelled),
            "outcomes": [{"episode": episode_key(*job), "survived": outcome} for job, outcome in self.outcomes],
            "gate": gate, "baseline": self.paired.to_dict() if self.paired is not None else None,
        }


def baseline_outcomes(records: Iterable[EpisodeRecord], turn: int) -> dict[Job, bool | None]:
    """(spec_id, repeat) -> the base run's survival at ``turn`` (None when censored): the paired check's base side."""
    return {(e.spec_id, e.repeat): survived_at(e, turn) for e in records}


def paired_check(base: Iterable[EpisodeRecord], new: Iterable[EpisodeRecord], *, turn: int,
                 margin: float = 0.0, alpha: float = 0.05, seed: int | str = 0,
                 new_jobs: Iterable[Job] | None = None) -> tuple[PairedSequentialTest, int]:
    """``ncp compare BASE NEW --sequential``: the paired check over (spec, repeat) pairs taken in NEW's seeded order
    (the order its episodes started in: ``episode_order`` of every episode it planned, ``new_jobs``, by default
    those it recorded), as the live check of the pytest session reads them; a pair missing or censored on either
    side is skipped and counted. Returns the check and the number of pairs in the order."""
    base_at, new_at = baseline_outcomes(base, turn), baseline_outcomes(new, turn)
    order = episode_order(set(new_jobs) if new_jobs is not None else set(new_at), seed)
    check = PairedSequentialTest(margin, alpha)
    for job in order:
        check.observe(base_at.get(job), new_at.get(job))
    return check, len(order)


@dataclass(frozen=True)
class MergedSequential:
    """``ncp merge`` of sequential shards: the mean of their e-values (``sequential.merge_shards``)."""

    decision: str | None
    e_pass: float
    e_fail: float
    conflict: bool
    record: dict[str, Any] = field(default_factory=dict)


def merge_sequential(parts: Sequence[Mapping[str, Any]]) -> MergedSequential:
    """Combine the ``sequential`` records of every shard of one run (each decided at alpha / shards)."""
    from .sequential import merge_shards

    first = parts[0]
    e_pass = [float(p["gate"]["e_pass"]) for p in parts]
    e_fail = [float(p["gate"]["e_fail"]) for p in parts]
    merged = merge_shards(e_pass, e_fail, float(first["run_alpha"]))
    record = {
        "rate": first["rate"], "turn": first["turn"], "alpha": first["run_alpha"], "run_alpha": first["run_alpha"],
        "shards": len(parts), "seed": first["seed"], "cancel": first["cancel"],
        "planned": sum(int(p["planned"]) for p in parts), "started": sum(int(p["started"]) for p in parts),
        "stopped": any(p["stopped"] for p in parts), "stopped_by": None, "decided_after": None,
        "unstarted": sorted(k for p in parts for k in p["unstarted"]),
        "cancelled": sorted(k for p in parts for k in p["cancelled"]),
        "merged": {"method": "mean", "decision": merged.verdict, "e_pass": merged.e_pass, "e_fail": merged.e_fail,
                   "conflict": merged.conflict,
                   "shards": [{"decision": p["gate"]["decision"], "decided_after": p["decided_after"],
                               "planned": p["planned"], "e_pass": p["gate"]["e_pass"], "e_fail": p["gate"]["e_fail"]}
                              for p in parts]},
    }
    return MergedSequential(merged.verdict, merged.e_pass, merged.e_fail, merged.conflict, record)


__all__ = ["EarlyStop", "Job", "MergedSequential", "SequentialPlan", "SequentialRun",
           "baseline_outcomes", "episode_order", "merge_sequential", "paired_check"]
