"""Live progress of ``ncp run``: a bar with episodes done / running / failed, turns per second, tokens
and cost on a terminal; plain lines (one per finished episode) anywhere else, e.g. in CI logs."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from ..core.config import episode_name
from ..core.safe_text import one_line

if TYPE_CHECKING:
    from ..core.records import EpisodeRecord
    from ..llm import Usage
    from ..engine.runner import RunProgress


class ProgressDisplay:
    def __init__(self, progress: RunProgress, usage: Usage, *, stream: TextIO | None = None,
                 live: bool | None = None):
        self.progress, self.usage = progress, usage
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self._started = time.monotonic()
        self._live: Any = None
        self._console: Any = None

    def status(self) -> str:
        p = self.progress
        elapsed = max(time.monotonic() - self._started, 1e-9)
        return (f"{p.finished}/{p.total} episodes done, {p.running} running, {p.conflicts} conflict(s), "
                f"{p.errors} error(s) | {p.turns / elapsed:.1f} turns/s | {self.usage.tokens:,} tokens, "
                f"${self.usage.cost_usd:.4f}")

    def episode_done(self, record: EpisodeRecord) -> None:
        self.line(episode_line(record))

    def line(self, line: str) -> None:
        """Print one line above the live bar (or plainly)."""
        if self._console is not None:
            self._console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self.stream, flush=True)

    def __enter__(self) -> ProgressDisplay:
        if self.live:
            from rich.console import Console
            from rich.live import Live
            from rich.progress_bar import ProgressBar
            from rich.table import Table

            display = self

            class _View:
                def __rich__(self) -> Any:
                    grid = Table.grid(padding=(0, 1))
                    grid.add_row(ProgressBar(total=max(display.progress.total, 1), completed=display.progress.finished,
                                             width=30), display.status())
                    return grid

            self._console = Console(file=self.stream)
            self._live = Live(_View(), console=self._console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None
        print(self.status(), file=self.stream, flush=True)


def episode_line(r: EpisodeRecord) -> str:
    """One line per finished episode, for the command line."""
    what = r.termination.value
    if r.failure:
        ids = ",".join(r.failure.fact_ids + r.failure.commitment_ids)
        what += f" at turn {r.failure.turn}" + (f" ({ids})" if ids else "")
    elif r.error:
        what += f" ({r.error.kind}: {one_line(r.error.message, 100)})"
    return (f"{episode_name(r.spec_id, r.repeat)}: {what}; turns={r.turns} progress={r.progress:.0%} "
            f"satisfied={r.satisfied:.0%} tokens={r.tokens}")
