"""The JSON-lines episode traces ``results.json`` points to: written as episodes play, read back after.

The one place that writes trace events (``TraceWriter``), finds recorded traces and spec files and reads
trace events (``results.py`` loads and checks the results files themselves); ``ncp compare``/``agree``/
``reaudit``/``review``/``report``, the HTML report and ``Runner.resume`` all go through it. The files
are inputs a person may have moved, truncated or edited, so every lookup tolerates a run directory that
is no longer where it was written, and every problem is a ``RunFileError`` naming the file (and line or entry) and the fix.
Standard library only: cheap to import.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

TRACES_DIR = "traces"


class RunFileError(ValueError):
    """A results, reviews or trace file cannot be used; the message names the file and what to do."""


# --- recorded paths ----------------------------------------------------------------------------------


def trace_reference(trace: str | Path | None, run_dir: str | Path) -> str | None:
    """How results.json in ``run_dir`` records a trace: relative to ``run_dir`` when the trace is inside
    it (``traces/x--r0.jsonl``: the run folder stays whole when moved or downloaded), else as given."""
    if not trace:
        return None
    try:
        return Path(trace).resolve().relative_to(Path(run_dir).resolve()).as_posix()
    except ValueError:
        return str(trace)


def _first_file(candidates: Iterable[Path]) -> Path | None:
    return next((c for c in candidates if c.is_file()), None)


def _as_recorded(p: Path, places: tuple[Path, ...]) -> list[Path]:
    # Absolute: as is. Relative: against the run's own folder(s) first (what results.json means by a
    # relative path), then the current directory (older runs recorded paths relative to their cwd).
    return [p] if p.is_absolute() else [*(place / p for place in places), p]


def resolve_trace(recorded: str | Path | None, run_dir: str | Path) -> Path | None:
    """Where an episode's trace is now; None when it cannot be found.

    ``run_dir`` is the folder of the results file. Tried in order: an absolute path as is, a relative
    one against ``run_dir`` then the current directory, and finally the file name under
    ``run_dir/traces/`` and ``run_dir`` (the run folder was moved, e.g. downloaded as a CI artifact).
    """
    if not recorded:
        return None
    p, base = Path(recorded), Path(run_dir)
    return _first_file([*_as_recorded(p, (base,)), base / TRACES_DIR / p.name, base / p.name])


def find_spec_file(spec_path: str | None, *places: str | Path) -> Path | None:
    """A spec file recorded as ``spec_path``: as is when absolute; else relative to each of ``places``,
    the current directory, then the parents of ``places`` (specs usually sit beside the runs folder)."""
    if not spec_path:
        return None
    p = Path(spec_path)
    bases = tuple(Path(place) for place in places)
    if p.is_absolute():
        return _first_file([p])
    parents = (parent / p for base in bases for parent in base.resolve().parents)
    return _first_file(_as_recorded(p, bases)) or _first_file(parents)


def load_recorded_spec(spec_path: str | None, *places: str | Path) -> Any:
    """The NarrativeSpec a trace recorded, if it can still be found and loaded; else None.

    For showing titles, texts and kinds: the run's own files are what matter, so a spec that moved
    or no longer loads just means less detail.
    """
    found = find_spec_file(spec_path, *places)
    if found is None:
        return None
    from .spec import SpecError, load_spec

    try:
        return load_spec(found)
    except SpecError:
        return None


# --- traces ----------------------------------------------------------------------------------------


@dataclass
class Trace:
    """The events of one episode trace, and what could not be read."""

    path: Path | None
    events: list[dict[str, Any]]
    bad_lines: int = 0          # lines skipped, a torn last line included
    problem: str | None = None  # why there are no events (not found, unreadable)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == kind]

    @property
    def start(self) -> dict[str, Any]:
        return next(iter(self.of("start")), {})

    @property
    def end(self) -> dict[str, Any] | None:
        """The end event; None for an episode that was interrupted."""
        return next(iter(self.of("end")), None)


class TraceWriter:
    """Appends one JSON object per line and flushes it, so nothing written is lost on a crash."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] = open(self.path, "w", encoding="utf-8")

    def write(self, event: str, **data: Any) -> None:
        self._fh.write(json.dumps({"event": event, **data}, ensure_ascii=False, default=str) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()


def _events(fh: IO[str], path: Path, strict: bool, bad: list[int]) -> Iterator[dict[str, Any]]:
    for n, line in enumerate(fh, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as exc:
            # Only the last line can lack its newline: the writer was killed mid-line. What was
            # written before it is complete (each event is flushed whole), so it is skipped.
            if strict and line.endswith("\n"):
                raise RunFileError(f"{path}:{n}: invalid JSON in trace: {exc.msg}") from None
            bad.append(n)
            continue
        if not isinstance(event, dict) or "event" not in event:
            if strict:
                raise RunFileError(f"{path}:{n}: not a trace event (expected an object with an 'event' key)")
            bad.append(n)
            continue
        yield event


def read_trace(path: str | Path, *, strict: bool = False) -> Trace:
    """Every event of a trace, in order; a torn last line (a run killed mid-write) is skipped.

    Lenient (the default, for showing and resuming): other unreadable lines are skipped and counted.
    ``strict`` (for re-judging, where a silently shortened transcript would be wrong): they raise
    RunFileError with file and line. OSError propagates.
    """
    p, bad = Path(path), list[int]()
    try:
        with open(p, encoding="utf-8", errors="strict" if strict else "replace") as fh:
            events = list(_events(fh, p, strict, bad))
    except UnicodeDecodeError as exc:
        raise RunFileError(f"{p}: not UTF-8 text ({exc.reason}); is this an ncp episode trace?") from None
    return Trace(p, events, len(bad))


def start_event(path: str | Path) -> dict[str, Any] | None:
    """The first event of a trace when it is its ``start`` event (cheap: reads one line)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            first = next(_events(fh, Path(path), False, []), None)
    except OSError:
        return None
    return first if first is not None and first.get("event") == "start" else None


def episode_trace(recorded: str | None, run_dir: str | Path) -> Trace:
    """The trace results.json records for an episode, read leniently; ``problem`` says why it has no
    events (not recorded, not found, unreadable), for a note where the turns would be."""
    path = resolve_trace(recorded, run_dir)
    if path is None:
        why = f"trace not found: {recorded}" if recorded else "no trace was recorded for this episode"
        return Trace(None, [], problem=why)
    try:
        return read_trace(path)
    except OSError as exc:
        return Trace(path, [], problem=f"cannot read trace {path}: {exc}")
