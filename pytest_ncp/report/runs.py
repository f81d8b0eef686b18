"""The runs a report shows: each results.json with its label and the review labels beside it.

Reading and checking the files is :mod:`pytest_ncp.analysis.results` and :mod:`pytest_ncp.core.traces` and
:mod:`pytest_ncp.analysis.reviews` (reviews.json); every problem is a ``RunFileError`` naming the file (and
line or entry) and what to do, never a traceback. This module adds what only the report needs:
labels that tell runs apart, the spec outline behind a trace, and the labels of one episode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..analysis.reviews import REVIEWS_FILE, load_reviews
from ..core.traces import RunFileError, Trace, find_spec_file

if TYPE_CHECKING:
    from ..analysis.results import RunResults
    from ..core.records import EpisodeRecord


@dataclass
class RunData:
    """One results file and what belongs to it."""

    path: Path
    results: RunResults
    label: str
    reviews: list[dict[str, Any]] = field(default_factory=list)
    reviews_path: Path | None = None

    @property
    def config(self) -> dict[str, Any]:
        return self.results.config.model_dump(mode="json", exclude_unset=True)

    @property
    def episodes(self) -> list[EpisodeRecord]:
        return self.results.episodes

    @property
    def max_turns(self) -> int:
        """The run's turn limit; from the episodes when an older file does not record it."""
        value = self.results.config.max_turns
        if value is not None:
            return value
        return max((e.turns for e in self.results.episodes), default=0)


def default_label(config: dict[str, Any]) -> str:
    """``Attr (model)`` of the narrator under test, e.g. ``LLMNarrator (openai/gpt-4o-mini)``."""
    narrator = str(config.get("narrator") or "narrator")
    attr = narrator.rpartition(":")[2] or narrator
    model = config.get("narrator_model") or (config.get("models") or {}).get("narrator")
    return f"{attr} ({model})" if model else attr


def load_run(path: str | Path, label: str | None = None) -> RunData:
    from ..analysis.results import load_results, results_path  # pydantic: only once a report is made

    p = results_path(path)
    results = load_results(p)
    reviews = load_reviews(p.parent)["labels"]
    reviews_path = p.parent / REVIEWS_FILE
    config = results.config.model_dump(mode="json", exclude_unset=True)
    return RunData(p, results, label or default_label(config), reviews,
                   reviews_path if reviews_path.exists() else None)


def load_runs(paths: Sequence[str | Path], labels: Sequence[str] | None = None) -> list[RunData]:
    """Every results file, labelled; runs that would share a label get their folder name appended."""
    if labels and len(labels) != len(paths):
        raise RunFileError(f"{len(labels)} label(s) for {len(paths)} results file(s): give one --label per file")
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


# --- specs ---------------------------------------------------------------------------------------


def spec_outline(trace: Trace, run_dir: Path) -> dict[str, Any] | None:
    """Node count and commitment texts from the spec the trace names, if it can still be found.

    Best effort: the spec may have moved or changed since the run, and the report must still render,
    so any problem means "no outline" and the report falls back to ids.
    """
    path = find_spec_file(trace.start.get("spec_path"), run_dir)
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
            from ..core.spec import load_spec

            spec = load_spec(path)
            _OUTLINES[key] = {
                "nodes": len(spec.trajectory),
                "node_descriptions": [n.description for n in spec.trajectory],
                "commitments": {c.id: {"kind": c.kind, "text": c.text} for c in spec.all_commitments},
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
