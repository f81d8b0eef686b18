"""Reading what a run left on disk: results.json, the reviews.json beside it, and episode traces.

The files are inputs a person may have moved, truncated or edited, so every problem becomes a
``ReportError`` naming the file (and line or entry) and what to do, never a traceback. Traces are
read leniently: a run killed mid-write leaves a half line at the end, which is skipped and counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

RESULTS_VERSION = 1
REVIEWS_VERSION = 1
REVIEW_LABELS = ("agree", "dispute", "skip")
_EPISODE_KEYS = ("spec_id", "termination", "turns", "progress", "satisfied")
_LABEL_KEYS = ("spec_id", "turn", "type", "label")


class ReportError(Exception):
    """A results, reviews or trace file the report cannot use; the message says which and why."""


@dataclass
class RunData:
    """One results file and what belongs to it."""

    path: Path
    results: dict[str, Any]
    label: str
    reviews: list[dict[str, Any]] = field(default_factory=list)
    reviews_path: Path | None = None

    @property
    def config(self) -> dict[str, Any]:
        return self.results.get("config") or {}

    @property
    def episodes(self) -> list[dict[str, Any]]:
        return self.results["episodes"]

    @property
    def max_turns(self) -> int:
        """The run's turn limit; from the episodes when an older file does not record it."""
        value = self.config.get("max_turns")
        if isinstance(value, int) and value >= 0:
            return value
        return max((int(e["turns"]) for e in self.episodes), default=0)


def results_file(path: str | Path) -> Path:
    """A results.json path, accepting the run folder that holds it."""
    p = Path(path)
    return p / "results.json" if p.is_dir() else p


def load_results(path: str | Path) -> dict[str, Any]:
    """Read and check a results.json (DESIGN 7.4); ReportError with file and entry on any problem."""
    p = results_file(path)
    hint = "give the results.json written by `ncp run --out DIR` or `pytest --ncp-report=DIR`"
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{p}: no such file; {hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{p}: cannot read it ({exc}); {hint}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg}); a run that was killed while "
                          "writing leaves the previous complete file, so re-run or restore it") from None
    if not isinstance(data, dict) or not isinstance(data.get("episodes"), list):
        raise ReportError(f"{p}: no 'episodes' list; this is not an ncp results file ({hint})")
    version = data.get("version", RESULTS_VERSION)
    if version != RESULTS_VERSION:
        raise ReportError(f"{p}: results version {version!r} is not supported (this pytest-ncp reads version "
                          f"{RESULTS_VERSION}); report it with the pytest-ncp that wrote it")
    if data.get("config") is not None and not isinstance(data["config"], dict):
        raise ReportError(f"{p}: 'config' must be an object")
    for i, e in enumerate(data["episodes"]):
        if not isinstance(e, dict):
            raise ReportError(f"{p}: episodes[{i}] is not an object")
        missing = [k for k in _EPISODE_KEYS if k not in e]
        if missing:
            raise ReportError(f"{p}: episodes[{i}]: missing {', '.join(map(repr, missing))}; {hint}")
        for key in ("turns", "repeat"):
            if key in e and (not isinstance(e[key], int) or isinstance(e[key], bool) or e[key] < 0):
                raise ReportError(f"{p}: episodes[{i}].{key}: expected a whole number >= 0, got {e[key]!r}")
        for key in ("progress", "satisfied", "tokens", "cost_usd"):
            if e.get(key) is not None and (not isinstance(e[key], (int, float)) or isinstance(e[key], bool)):
                raise ReportError(f"{p}: episodes[{i}].{key}: expected a number, got {e[key]!r}")
        failure = e.get("failure")
        if failure is not None and not (isinstance(failure, dict) and isinstance(failure.get("turn", 0), int)):
            raise ReportError(f"{p}: episodes[{i}].failure: expected null or an object with a whole-number turn")
        if not isinstance(e["termination"], str) or not isinstance(e["spec_id"], str):
            raise ReportError(f"{p}: episodes[{i}]: spec_id and termination must be strings")
        if e.get("trace") is not None and not isinstance(e["trace"], str):
            raise ReportError(f"{p}: episodes[{i}].trace: expected a path, got {e['trace']!r}")
    return data


def load_reviews(results_path: str | Path) -> tuple[list[dict[str, Any]], Path | None]:
    """The human review labels in ``reviews.json`` next to a results file ([] and None when absent).

    A reviewer who labels the same conflict twice changed their mind: the later label wins, so
    counts are per (episode, turn, type, reviewer), not per click.
    """
    p = results_file(results_path).parent / "reviews.json"
    if not p.exists():
        return [], None
    fix = "fix the entry or re-create the file with `ncp review`"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReportError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg}); {fix}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{p}: cannot read it ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("labels"), list):
        raise ReportError(f'{p}: expected {{"version": 1, "labels": [...]}}; {fix}')
    if data.get("version", REVIEWS_VERSION) != REVIEWS_VERSION:
        raise ReportError(f"{p}: reviews version {data.get('version')!r} is not supported (expected "
                          f"{REVIEWS_VERSION})")
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for i, label in enumerate(data["labels"]):
        if not isinstance(label, dict):
            raise ReportError(f"{p}: labels[{i}] is not an object; {fix}")
        missing = [k for k in _LABEL_KEYS if k not in label]
        if missing:
            raise ReportError(f"{p}: labels[{i}]: missing {', '.join(map(repr, missing))}; {fix}")
        types = {"spec_id": str, "turn": int, "type": str, "repeat": int}
        for key, kind in types.items():
            if key in label and (not isinstance(label[key], kind) or isinstance(label[key], bool)):
                raise ReportError(f"{p}: labels[{i}].{key}: expected {kind.__name__}, got {label[key]!r}; {fix}")
        if label["label"] not in REVIEW_LABELS:
            raise ReportError(f"{p}: labels[{i}].label: got {label['label']!r}, expected one of "
                              f"{', '.join(REVIEW_LABELS)}; {fix}")
        key = (label["spec_id"], label.get("repeat", 0), label["turn"], label["type"], label.get("reviewer"))
        latest.pop(key, None)  # re-insert so the dict keeps the order of the latest labels
        latest[key] = label
    return list(latest.values()), p


def default_label(config: dict[str, Any]) -> str:
    """``Attr (model)`` of the narrator under test, e.g. ``LLMNarrator (openai/gpt-4o-mini)``."""
    narrator = str(config.get("narrator") or "narrator")
    attr = narrator.rpartition(":")[2] or narrator
    model = config.get("narrator_model") or (config.get("models") or {}).get("narrator")
    return f"{attr} ({model})" if model else attr


def load_run(path: str | Path, label: str | None = None) -> RunData:
    p = results_file(path)
    results = load_results(p)
    reviews, reviews_path = load_reviews(p)
    return RunData(p, results, label or default_label(results.get("config") or {}), reviews, reviews_path)


def load_runs(paths: Sequence[str | Path], labels: Sequence[str] | None = None) -> list[RunData]:
    """Every results file, labelled; runs that would share a label get their folder name appended."""
    if labels and len(labels) != len(paths):
        raise ReportError(f"{len(labels)} label(s) for {len(paths)} results file(s): give one --label per file")
    runs = [load_run(p, labels[i] if labels else None) for i, p in enumerate(paths)]
    _disambiguate(runs)
    return runs


def _disambiguate(runs: list[RunData]) -> None:
    # Two runs of the same narrator (a prompt change, another turn limit) are the usual comparison,
    # so identical labels are common; the run folder is what the person chose to tell them apart.
    def clashing() -> list[RunData]:
        return [r for r in runs if sum(x.label == r.label for x in runs) > 1]

    for r in clashing():
        r.label = f"{r.label} [{r.path.parent.resolve().name}]"
    for i, r in enumerate(clashing(), 1):  # same folder names too (a/run and b/run): number them
        r.label = f"{r.label} #{i}"


# --- traces --------------------------------------------------------------------------------------


def resolve_path(recorded: str | None, results_path: Path, subdir: str | None = None) -> Path | None:
    """Find a file a run recorded by path, wherever the run folder has moved since.

    The runner records paths as it was given them: absolute, or relative to the working directory
    of the run. A relative path is tried against the results file's folder first (the documented
    rule), then the current directory, then, for a downloaded CI artifact, ``<folder>/<subdir>/<name>``.
    """
    if not recorded:
        return None
    p = Path(recorded)
    base = results_path.parent
    candidates = [p] if p.is_absolute() else [base / p, p]
    if subdir:
        candidates.append(base / subdir / p.name)
    for c in candidates:
        if c.is_file():
            return c
    return None


@dataclass
class Trace:
    path: Path | None
    events: list[dict[str, Any]]
    bad_lines: int = 0
    problem: str | None = None  # why there are no events, for the report's note

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == kind]

    @property
    def start(self) -> dict[str, Any]:
        found = self.of("start")
        return found[0] if found else {}


def read_trace(episode: dict[str, Any], results_path: Path) -> Trace:
    recorded = episode.get("trace")
    path = resolve_path(recorded, results_path, "traces")
    if path is None:
        why = f"trace not found: {recorded}" if recorded else "no trace was recorded for this episode"
        return Trace(None, [], problem=why)
    events, bad = [], 0
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        return Trace(path, [], problem=f"cannot read trace {path}: {exc}")
    for line in lines:
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(event, dict):
            events.append(event)
        else:
            bad += 1
    return Trace(path, events, bad)


def spec_outline(trace: Trace, results_path: Path) -> dict[str, Any] | None:
    """Node count and commitment texts from the spec the trace names, if it can still be found.

    Best effort: the spec may have moved or changed since the run, and the report must still render,
    so any problem means "no outline" and the report falls back to ids.
    """
    path = resolve_path(trace.start.get("spec_path"), results_path)
    if path is None:
        return None
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    return _outline(str(path.resolve()), mtime)


# One report reads the same spec for every repeat; keyed by mtime so a long-lived host (a pytest
# session writing reports) never shows a spec as it was before an edit.
_OUTLINES: dict[tuple[str, int], dict[str, Any] | None] = {}


def _outline(path: str, mtime: int) -> dict[str, Any] | None:
    key = (path, mtime)
    if key not in _OUTLINES:
        try:
            from ..spec import load_spec

            spec = load_spec(path)
            _OUTLINES[key] = {
                "nodes": len(spec.trajectory),
                "node_descriptions": [n.description for n in spec.trajectory],
                "commitments": {c.id: {"kind": c.kind, "text": c.text} for c in spec.commitments},
                "title": spec.title,
            }
        except Exception:  # noqa: BLE001 - any unreadable spec just means the report shows ids only
            _OUTLINES[key] = None
    return _OUTLINES[key]


def iter_labels(reviews: Iterable[dict[str, Any]], spec_id: str, repeat: int, turn: int | None = None,
                kind: str | None = None) -> list[dict[str, Any]]:
    """Review labels of one episode (and turn, and conflict type when given)."""
    return [r for r in reviews
            if r.get("spec_id") == spec_id and r.get("repeat", 0) == repeat
            and (turn is None or r.get("turn") == turn) and (kind is None or r.get("type") == kind)]
