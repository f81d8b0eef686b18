"""``--max-cost`` admits an episode only while the cap can still pay for it to its end.

Without it, every episode starts at once and the cap is spread over all of them: a cap of a third of a run's
cost could cut every episode short and judge none. So an episode starts only when what the cap has left,
less what the episodes in flight are still expected to spend, covers its own expected cost; otherwise it
waits for an episode to finish, and once none is in flight and it still does not fit it ends as ``budget``
before its first call. Until one episode has ended by itself, episodes start one at a time: the estimate is
not measured yet. A cap of 30% of a run's cost then judges about 30% of its episodes fully.

The expected cost of an episode is ``engine.estimate``'s typical figure for its spec, corrected by what the
finished episodes really cost against their own figures (the run measures itself as it goes).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from ..core.config import RunConfig
from ..core.spec import NarrativeSpec


class CostAdmission:
    def __init__(self, config: RunConfig, cap: float, spent: Callable[[], float], narrator_factory: Any = None):
        self.config, self.cap, self.spent = config, cap, spent
        self.narrator_factory = narrator_factory
        self._prior: dict[str, float] = {}       # spec id -> its typical estimate (USD)
        self._running: dict[int, float] = {}     # admitted episode token -> its expected cost
        self._finished_spent = 0.0               # what the finished episodes spent (theirs, in the client's total)
        self._measured = 0.0                     # actual cost of finished, uncut episodes ...
        self._estimated = 0.0                    # ... and their prior estimates
        self._changed = asyncio.Event()
        self._tokens = 0

    def prior(self, spec: NarrativeSpec) -> float:
        if spec.id not in self._prior:
            from .estimate import estimate_run

            estimate = estimate_run(self.config, [(spec, 0)], narrator_factory=self.narrator_factory, typical=True)
            self._prior[spec.id] = estimate.cost_usd
        return self._prior[spec.id]

    def expected(self, spec: NarrativeSpec) -> float:
        """The episode's expected cost: its prior, scaled by what finished episodes cost against theirs."""
        prior = self.prior(spec)
        if self._estimated > 0 and self._measured > 0:
            return prior * self._measured / self._estimated
        return prior

    def _committed(self) -> float:
        """What the episodes in flight are still expected to spend (their expected cost less what they spent)."""
        running_spent = max(0.0, self.spent() - self._finished_spent)
        return max(0.0, sum(self._running.values()) - running_spent)

    async def admit(self, spec: NarrativeSpec) -> tuple[int | None, str | None]:
        """Wait until the cap can pay for this episode: (a token for ``finished``, None), or (None, why not)."""
        while True:
            need = self.expected(spec)
            left = self.cap - self.spent() - self._committed()
            # Until one episode has ended by itself, the estimate is unmeasured: episodes start one at a time.
            calibrating = self._estimated == 0 and bool(self._running)
            if need <= left and not calibrating:
                self._tokens += 1
                self._running[self._tokens] = need
                return self._tokens, None
            if not self._running:
                return None, (f"cost cap of ${self.cap:.4f} (--max-cost): not started, ${max(left, 0.0):.4f} is left "
                              f"and this episode is expected to cost ${need:.4f} to its end")
            self._changed.clear()
            await self._changed.wait()

    def finished(self, token: int | None, spec: NarrativeSpec, cost: float, measured: bool) -> None:
        """An admitted episode ended (``cost``: what it spent, speculative calls included; ``measured``: it ended
        by itself, neither cut nor errored, so its cost is a measure of an episode's)."""
        if token is None:
            return
        self._running.pop(token, None)
        self._finished_spent += cost
        if measured and cost > 0:
            self._measured += cost
            self._estimated += self.prior(spec)
        self._changed.set()
