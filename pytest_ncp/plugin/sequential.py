"""``--ncp-sequential`` in a pytest session: the controller reads every episode in start order and stops the session
as soon as its verdict is certain (``analysis/sequential_run.py``, docs/gates.md).

- The spec tests run in the seeded order of their episodes (``--ncp-seed``), every test of an episode together, so
  that episodes start in the order the gate reads them in, with pytest-xdist too (its schedulers hand tests out in
  collection order). Other tests keep their places.
- The controller feeds the records that reach it in the reports (``user_properties``, with or without xdist) to
  its ``SequentialRun``. Once the run stops, no episode starts: in this process the runner asks ``halt``; an xdist
  worker asks the same of a file the controller writes (its path travels in ``workerinput``), since xdist has no
  channel from the controller to a running worker. With ``--ncp-sequential-cancel`` episodes in flight end at their
  next turn as ``cancelled``.
- The tests of an episode that never started are skipped (``gate decided after N episodes``) and carry
  ``ncp.unstarted``, so the controller leaves them out of the episodes it waits for: a session that stopped early
  is complete.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from ..core.config import episode_key

if TYPE_CHECKING:
    import pytest

    from ..core.records import EpisodeRecord
    from ..analysis.sequential_run import SequentialRun
    from .options import Settings

# The worker input key of the file through which the controller tells the workers the session stopped.
STOP_FILE_KEY = "ncp_sequential_stop"
UNSTARTED = "unstarted"  # the user property (ncp.unstarted) of a test whose episode never started


class SessionStop:
    """The session's sequential checks (controller) or its view of them (an xdist worker)."""

    def __init__(self, settings: Settings, *, is_worker: bool, stop_file: str | None = None):
        self.settings = settings
        self.enabled = bool(settings.options.get("sequential")) and settings.gate is not None
        self.is_worker = is_worker
        self.stop_file = Path(stop_file) if stop_file else None
        self.run: SequentialRun | None = None
        self.unstarted: set[str] = set()
        self._stopped_seen = False  # a worker: the file was seen (it never goes away while the session runs)
        self._folder: Path | None = None

    # --- order ----------------------------------------------------------------------------------
    def order_items(self, items: list[pytest.Item], spec_item: type) -> None:
        """Spec tests (instances of ``spec_item``) in the seeded order of their episodes, each episode's tests
        together in their own order, in the places spec tests held."""
        from ..analysis.sequential_run import episode_order

        spec_items: list[Any] = [i for i in items if isinstance(i, spec_item)]
        if not self.enabled or not spec_items:
            return
        jobs = sorted({(i.spec.id, i.repeat) for i in spec_items})
        rank = {job: n for n, job in enumerate(episode_order(jobs, self.settings.run.seed))}
        ordered = iter(sorted(spec_items, key=lambda i: rank[(i.spec.id, i.repeat)]))  # stable: tests keep order
        items[:] = [next(ordered) if isinstance(i, spec_item) else i for i in items]

    # --- the controller -------------------------------------------------------------------------
    def monitor(self, expected: Iterable[str]) -> SequentialRun | None:
        """The controller's checks over the selected episodes (built once, when they are known)."""
        if not self.enabled or self.is_worker:
            return None
        if self.run is None:
            from ..analysis.results import split_key
            from ..analysis.sequential_run import SequentialPlan, SequentialRun, episode_order

            keys = sorted(expected)
            if not keys:
                return None
            s, gate = self.settings, self.settings.gate
            assert gate is not None
            plan = SequentialPlan(gate.rate, gate.turn, alpha=s.options["sequential-alpha"], seed=s.run.seed,
                                  cancel=s.options["sequential-cancel"], margin=s.options["margin"])
            self.run = SequentialRun(plan, episode_order([split_key(k) for k in keys], plan.seed),
                                     baseline=self._baseline(plan.turn))
        return self.run

    def _baseline(self, turn: int) -> dict[tuple[str, int], bool | None] | None:
        """The base run's outcomes (``--ncp-baseline``); None without one, or when it cannot be read (the
        fixed comparison then reports why)."""
        if self.settings.baseline is None:
            return None
        from ..analysis.results import load_results
        from ..analysis.sequential_run import baseline_outcomes

        try:
            return baseline_outcomes(load_results(self.settings.baseline).episodes, turn)
        except (OSError, ValueError):
            return None

    def read(self, record: EpisodeRecord, expected: Iterable[str]) -> None:
        """One episode's record reached the controller."""
        run = self.monitor(expected)
        if run is None:
            return
        was = run.stopped
        run.finished(record)
        if run.stopped and not was and self._folder is not None:
            self._tell_workers(run)

    def skipped(self, key: str, expected: Iterable[str]) -> None:
        """A test reported that its episode never started."""
        from ..analysis.results import split_key

        self.unstarted.add(key)
        run = self.monitor(expected)
        if run is not None:
            run.skip(split_key(key))

    def worker_file(self) -> str:
        """The file the workers watch (created with the first worker); written once the session stopped."""
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="pytest-ncp-sequential-"))
        if self.run is not None and self.run.stopped:
            self._tell_workers(self.run)
        return str(self._folder / "stopped.json")

    def _tell_workers(self, run: SequentialRun) -> None:
        from ..core.files import atomic_write_text

        assert self._folder is not None
        atomic_write_text(self._folder / "stopped.json", json.dumps({"read": run.read_at_stop,
                                                                     "planned": run.planned,
                                                                     "stopped_by": run.stopped_by}))

    def close(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    # --- both: may an episode start, and what an unstarted test says ---------------------------------
    def halt(self) -> bool:
        """Start no new episode: the session stopped (the controller's checks, or its file, on a worker)."""
        if not self.enabled:
            return False
        if self.is_worker:
            if not self._stopped_seen and self.stop_file is not None:
                self._stopped_seen = self.stop_file.exists()
            return self._stopped_seen
        return self.run is not None and self.run.stopped

    def cancel(self) -> bool:
        return bool(self.settings.options.get("sequential-cancel")) and self.halt()

    def skip_reason(self) -> str:
        read: Any = None
        if self.is_worker and self.stop_file is not None:
            try:
                read = json.loads(self.stop_file.read_text(encoding="utf-8")).get("read")
            except (OSError, ValueError):
                read = None
        elif self.run is not None:
            read = self.run.read_at_stop
        return f"gate decided after {read if read is not None else '?'} episodes: never started (--ncp-sequential)"

    def unstarted_property(self, spec_id: str, repeat: int) -> tuple[str, str]:
        from .options import PROPERTY_PREFIX

        return (PROPERTY_PREFIX + UNSTARTED, episode_key(spec_id, repeat))
