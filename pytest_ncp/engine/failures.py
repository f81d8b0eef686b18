"""The failures folder: every confirmed conflict kept as a small fork point, replayed until fixed.

``pytest --ncp-failures=DIR`` writes ``DIR/<spec-id>@t<turn>.jsonl`` for each confirmed conflict of the
session: the episode trace cut after the failing turn and stripped to what a fork needs (the start
record, then per turn the player input, the response, ledger changes, node index, remembered trigger,
commitment states and the confirmed conflicts), secrets scrubbed. It is an ordinary trace, so
``EpisodeState.at`` and ``ncp fork`` read it. Later sessions collect each file as a ``fork[...]`` test.
``DIR/.passes.json`` counts, per file, the sessions in a row its fork test passed (for ``prune``).
Standard library only, besides what ``fork`` imports lazily.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_text

PASSES_FILE = ".passes.json"
SUFFIX = ".jsonl"
_START_KEYS = ("spec_id", "spec_path", "repeat", "spec_fingerprint", "spec_sections", "prompt_version", "ledger")
_TURN_KEYS = ("turn", "player_input", "response", "ledger_changes", "node_index", "trigger_turn", "commitments",
              "confirmed")
_CONFIG_KEYS = ("narrator", "narrator_model", "auditor_model", "player", "prompt_version")


def failure_name(spec_id: str, turn: int) -> str:
    return f"{spec_id}@t{turn}"


def store_failure(trace: str | Path, turn: int, folder: str | Path) -> Path | None:
    """Write the fork point of ``trace``'s failure at ``turn`` into ``folder``; None when one is there already.

    The recorded spec path is stored relative to ``folder`` (both usually sit in one repository).
    """
    from ..llm import scrub
    from ..core.traces import read_trace

    recorded = read_trace(trace)
    start = recorded.start
    folder = Path(folder)
    path = folder / f"{failure_name(start['spec_id'], turn)}{SUFFIX}"
    if path.exists():
        return None  # the same spec failing at the same turn: the stored one (perhaps committed) stays
    kept = {k: start[k] for k in _START_KEYS if k in start}
    if start.get("spec_path"):
        spec = Path(start["spec_path"]).resolve()
        kept["spec_path"] = os.path.relpath(spec, folder.resolve()) if spec.exists() else start["spec_path"]
    config = start.get("config") or {}
    kept["config"] = {k: config[k] for k in _CONFIG_KEYS if config.get(k) is not None}
    end = recorded.end or {}
    kept["nodes"] = [n for n in end.get("nodes") or [] if int(n.get("reached_turn", 0)) < turn]
    kept["failure"] = end.get("failure")
    lines = [{"event": "start", **kept}]
    lines += [{"event": "turn", **{k: r.get(k) for k in _TURN_KEYS}} for r in recorded.of("turn") if r["turn"] <= turn]
    text = "".join(scrub(json.dumps(line, ensure_ascii=False)) + "\n" for line in lines)
    return atomic_write_text(path, text)


@dataclass
class StoredFailure:
    path: Path
    spec_id: str
    turn: int
    start: dict[str, Any]
    passes: int = 0

    @property
    def name(self) -> str:
        return failure_name(self.spec_id, self.turn)

    def state(self) -> Any:
        from .fork import EpisodeState

        return EpisodeState.at(self.path, self.turn)

    def spec_problem(self) -> str | None:
        """Why this failure can no longer be forked (spec gone or changed); None when it can."""
        from .fork import ForkError
        from ..core.spec import SpecError

        try:
            self.state().load_spec()
        except (ForkError, SpecError) as exc:
            return str(exc)
        return None


_NAME = re.compile(r"^(?P<spec>.+)@t(?P<turn>\d+)$")


def read_failure(path: str | Path) -> StoredFailure:
    from ..core.traces import start_event

    p = Path(path)
    m = _NAME.match(p.stem)
    start = start_event(p) or {}
    if m is None or not start:
        from ..core.traces import RunFileError

        raise RunFileError(f"{p}: not a stored failure (expected <spec-id>@t<turn>.jsonl written by --ncp-failures)")
    return StoredFailure(p, m["spec"], int(m["turn"]), start)


def list_failures(folder: str | Path) -> list[StoredFailure]:
    folder = Path(folder)
    if not folder.is_dir():
        return []
    passes = read_passes(folder)
    found = [read_failure(p) for p in sorted(folder.glob(f"*{SUFFIX}"))]
    for f in found:
        f.passes = int(passes.get(f.path.name, 0))
    return found


def read_passes(folder: str | Path) -> dict[str, int]:
    try:
        data = json.loads((Path(folder) / PASSES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: int(v) for k, v in data.items() if isinstance(v, int)} if isinstance(data, dict) else {}


def record_passes(folder: str | Path, outcomes: dict[str, bool]) -> None:
    """After a session: a passing fork test adds one to its file's count, a failing one resets it to 0."""
    if not outcomes:
        return
    folder = Path(folder)
    passes = read_passes(folder)
    for name, passed in outcomes.items():
        passes[name] = passes.get(name, 0) + 1 if passed else 0
    passes = {k: v for k, v in sorted(passes.items()) if (folder / k).exists()}
    (folder / PASSES_FILE).write_text(json.dumps(passes, indent=2) + "\n", encoding="utf-8")


def prune(folder: str | Path, *, passed: int | None, dry_run: bool = False) -> list[tuple[StoredFailure, str]]:
    """Remove stored failures whose spec changed (or is gone), and those that passed ``passed`` sessions in a row."""
    removed = []
    for f in list_failures(folder):
        problem = f.spec_problem()
        why = f"spec: {problem}" if problem else (
            f"passed {f.passes} session(s) in a row" if passed is not None and f.passes >= passed else None)
        if why:
            removed.append((f, why))
            if not dry_run:
                f.path.unlink()
    if removed and not dry_run:
        passes = read_passes(folder)
        kept = {k: v for k, v in passes.items() if (Path(folder) / k).exists()}
        if passes != kept:
            (Path(folder) / PASSES_FILE).write_text(json.dumps(kept, indent=2) + "\n", encoding="utf-8")
    return removed
