"""``results.json``: the one place that builds, writes, locates, loads and checks a run's results file.

Written by ``ncp run --out DIR``, ``pytest --ncp-report=DIR``, ``ncp merge`` and ``ncp fork --out``; read by
``ncp compare``/``agree``/``reaudit``/``review``/``report``, the HTML report and ``Runner.resume``. The
file is an input a person may have moved, truncated or edited: every problem is a ``RunFileError``
naming the file (and entry) and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_text
from .metrics import compute_metrics
from ..core.traces import RunFileError, trace_reference

RESULTS_FILE = "results.json"
RESULTS_VERSION = 1
# The order matters only for the message: the keys most often missing come first.
_EPISODE_KEYS = ("spec_id", "termination", "turns", "progress", "satisfied", "repeat")
_HINT = "give the results.json written by `ncp run --out DIR` or `pytest --ncp-report=DIR`, or its directory"


def results_path(path: str | Path) -> Path:
    """``DIR`` -> ``DIR/results.json``; a file path is returned as it is."""
    p = Path(path)
    return p / RESULTS_FILE if p.is_dir() else p


def load_results(path: str | Path) -> dict[str, Any]:
    """Load and check a results file, or the ``results.json`` of a run directory (DESIGN 7.4)."""
    p = results_path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunFileError(f"{p}: no such file; {_HINT}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(f"{p}: cannot read it ({exc}); {_HINT}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg}); a run that was killed while "
                           "writing leaves the previous complete file, so re-run or restore it") from None
    check_results(data, str(p))
    return data


def check_results(data: Any, name: str) -> None:
    """Raise RunFileError unless ``data`` is a results.json document every reader can rely on.

    ``name`` starts each message: the file, or a role such as ``base`` for a document in memory.
    """
    if not isinstance(data, dict) or not isinstance(data.get("episodes"), list):
        raise RunFileError(f"{name}: not an ncp results file: expected an object with an 'episodes' list ({_HINT})")
    version = data.get("version", RESULTS_VERSION)
    if version != RESULTS_VERSION:
        raise RunFileError(f"{name}: results version {version!r} is not supported (this pytest-ncp reads "
                           f"version {RESULTS_VERSION}); read it with the pytest-ncp that wrote it")
    if data.get("config") is not None and not isinstance(data["config"], dict):
        raise RunFileError(f"{name}: 'config' must be an object")
    for i, e in enumerate(data["episodes"]):
        where = f"{name}: episodes[{i}]"
        if not isinstance(e, dict):
            raise RunFileError(f"{where} is not an object")
        missing = [k for k in _EPISODE_KEYS if k not in e]
        if missing:
            raise RunFileError(f"{where}: missing {', '.join(map(repr, missing))}; {_HINT}")
        for key in ("turns", "repeat"):
            if not isinstance(e[key], int) or isinstance(e[key], bool) or e[key] < 0:
                raise RunFileError(f"{where}.{key}: expected a whole number >= 0, got {e[key]!r}")
        for key in ("progress", "satisfied", "tokens", "cost_usd"):
            if e.get(key) is not None and (not isinstance(e[key], (int, float)) or isinstance(e[key], bool)):
                raise RunFileError(f"{where}.{key}: expected a number, got {e[key]!r}")
        failure = e.get("failure")
        if failure is not None and not (isinstance(failure, dict) and isinstance(failure.get("turn", 0), int)):
            raise RunFileError(f"{where}.failure: expected null or an object with a whole-number turn")
        if not isinstance(e["termination"], str) or not isinstance(e["spec_id"], str):
            raise RunFileError(f"{where}: spec_id and termination must be strings")
        if e.get("trace") is not None and not isinstance(e["trace"], str):
            raise RunFileError(f"{where}.trace: expected a path, got {e['trace']!r}")


def build_results(config: dict[str, Any], episodes: list[dict[str, Any]], *, survival_turn: int = 20,
                  shard: dict[str, int] | None = None, canaries: dict[str, Any] | None = None) -> dict[str, Any]:
    episodes = sorted(episodes, key=lambda e: (e["spec_id"], e["repeat"]))
    # The structured-output mode each model ended up with (``auto`` chooses per endpoint and model);
    # gathered from the episodes, so it is the same with or without pytest-xdist.
    modes: dict[str, str] = {}
    for e in episodes:
        modes.update(e.get("structured_output") or {})
    config = {**config, "structured_output_used": modes}
    data = {"version": RESULTS_VERSION, "config": config, "episodes": episodes,
            "metrics": compute_metrics(episodes, survival_turn=survival_turn)}
    if shard is not None:
        data["shard"] = shard  # one slice of a run (ncp run --shard i/n); ncp merge joins the slices
    if canaries is not None:
        data["canaries"] = canaries  # the auditor's score on known answers (docs/auditor.md)
    return data


def write_results(out_dir: str | Path, config: dict[str, Any], episodes: list[dict[str, Any]],
                  *, survival_turn: int = 20, shard: dict[str, int] | None = None,
                  canaries: dict[str, Any] | None = None) -> Path:
    """Write ``results.json`` atomically (``core.files.atomic_write_text``): readers never see half a file."""
    out = Path(out_dir)
    # Traces inside the results folder are recorded relative to it, so the folder can move whole.
    episodes = [{**e, "trace": trace_reference(e["trace"], out)} if e.get("trace") else e for e in episodes]
    data = build_results(config, episodes, survival_turn=survival_turn, shard=shard, canaries=canaries)
    return atomic_write_text(out / RESULTS_FILE, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
