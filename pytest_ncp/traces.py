"""Reading finished runs back: ``results.json`` and the JSON-lines episode traces it points to.

Used by the commands that work on recorded runs (``ncp compare``, ``agree``, ``reaudit``,
``review``). Runs get moved and copied between machines, so every lookup tolerates a run directory
that is no longer where it was written, and every error names the file (and line) and the fix.
Standard library only: cheap to import.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

RESULTS_FILE = "results.json"


class RunFileError(ValueError):
    """A results file or trace cannot be read; the message names the file and what to do."""


def results_path(path: str | Path) -> Path:
    """``DIR`` -> ``DIR/results.json``; a file path is returned as it is."""
    p = Path(path)
    return p / RESULTS_FILE if p.is_dir() else p


def load_run(path: str | Path) -> dict[str, Any]:
    """Load and check a results file (or the ``results.json`` of a run directory).

    Checks only what the commands rely on: ``version`` 1 and ``episodes`` entries carrying
    ``spec_id``, ``repeat``, ``termination`` and ``turns``.
    """
    file = results_path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunFileError(f"{file}: no such file (expected a run directory written by `ncp run --out DIR` "
                           "or `pytest --ncp-report=DIR`, or its results.json)") from None
    except OSError as exc:
        raise RunFileError(f"{file}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{file}:{exc.lineno}: invalid JSON: {exc.msg} (is the file complete?)") from None
    check_run(data, str(file))
    return data


def check_run(data: Any, name: str) -> None:
    """Raise RunFileError unless ``data`` looks like a results.json document."""
    if not isinstance(data, dict) or not isinstance(data.get("episodes"), list):
        raise RunFileError(f"{name}: not an ncp results file: expected an object with an 'episodes' list "
                           "(the results.json written by ncp run --out DIR)")
    if data.get("version", 1) != 1:
        raise RunFileError(f"{name}: results version {data.get('version')!r} is not supported (expected 1); "
                           "upgrade pytest-ncp or re-run")
    for i, e in enumerate(data["episodes"]):
        missing = [k for k in ("spec_id", "repeat", "termination", "turns") if not isinstance(e, dict) or k not in e]
        if missing:
            raise RunFileError(f"{name}: episodes[{i}] lacks {', '.join(missing)}")


def resolve_trace(recorded: str | Path | None, run_dir: str | Path) -> Path | None:
    """Where an episode's trace is now: as recorded (absolute, or relative to the working directory),
    else under ``run_dir/traces/`` by file name (the run directory was moved). None when not found."""
    if not recorded:
        return None
    p = Path(recorded)
    candidates = [p, Path(run_dir) / "traces" / p.name, Path(run_dir) / p.name]
    if not p.is_absolute():
        candidates.insert(1, Path(run_dir) / p)
    for c in candidates:
        if c.is_file():
            return c
    return None


def read_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """The events of a trace, in order. A torn last line (a run killed mid-write) is ignored."""
    p = Path(path)
    with open(p, encoding="utf-8") as fh:
        lines = fh.readlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as exc:
            if n == len(lines) and not line.endswith("\n"):
                return
            raise RunFileError(f"{p}:{n}: invalid JSON in trace: {exc.msg}") from None
        if not isinstance(event, dict) or "event" not in event:
            raise RunFileError(f"{p}:{n}: not a trace event (expected an object with an 'event' key)")
        yield event


def start_event(path: str | Path) -> dict[str, Any] | None:
    """The first event of a trace when it is its ``start`` event (cheap: reads one line)."""
    try:
        with open(path, encoding="utf-8") as fh:
            first = fh.readline()
        event = json.loads(first)
    except (OSError, json.JSONDecodeError):
        return None
    return event if isinstance(event, dict) and event.get("event") == "start" else None


def find_spec_file(spec_path: str | None, *places: str | Path) -> Path | None:
    """A spec file recorded as ``spec_path``: as is, else relative to each of ``places`` and their parents."""
    if not spec_path:
        return None
    p = Path(spec_path)
    if p.is_file():
        return p
    if p.is_absolute():
        return None
    for place in places:
        for base in (Path(place), *Path(place).resolve().parents):
            if (base / p).is_file():
                return base / p
    return None


def episode_name(spec_id: str, repeat: int) -> str:
    return f"{spec_id}[r{repeat}]"
