"""Human review of confirmed conflicts: is the auditor right? (DESIGN section 4, "human review").

``ncp review RUN_DIR`` (``report/review_walk.py``) walks the conflicts that ended episodes in ``RUN_DIR/results.json`` one at a
time in the terminal and asks a person to agree or dispute each. Labels go to
``RUN_DIR/reviews.json``::

    {"version": 1, "labels": [{"spec_id", "repeat", "turn", "type", "label": "agree" | "dispute",
                               "note", "reviewer", "date"}]}

The file is rewritten atomically after every label, so quitting (or a crash, or a closed terminal)
loses nothing, and the next ``ncp review`` resumes with the first conflict this reviewer has not
labelled. Keys are read line by line from stdin (type the letter, then Enter), so the walk works the
same under tmux, over ssh, and with piped input in tests; no curses.

A label is identified by (spec_id, repeat, turn, type, reviewer): labelling the same conflict again
replaces that reviewer's earlier label, and several reviewers may label the same conflict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..core.files import atomic_write_text
from .metrics import CONFLICT_KINDS, wilson
from ..core.traces import RunFileError

if TYPE_CHECKING:
    from .results import RunResults

REVIEWS_FILE = "reviews.json"
REVIEWS_VERSION = 1
# The walk writes agree or dispute; skip is accepted from other tools and counted, but not rated.
LABELS = ("agree", "dispute", "skip")
_LABEL_KEYS = ("spec_id", "turn", "type", "label")


@dataclass(frozen=True)
class ConflictItem:
    """One confirmed conflict that ended an episode, as results.json records it."""

    spec_id: str
    repeat: int
    turn: int
    type: str
    fact_ids: tuple[str, ...] = ()
    commitment_ids: tuple[str, ...] = ()
    quote: str = ""
    explanation: str = ""
    confirmation: str = ""
    trace: str | None = None

    @property
    def key(self) -> tuple[str, int, int, str]:
        return (self.spec_id, self.repeat, self.turn, self.type)


def conflicts_of(results: RunResults) -> list[ConflictItem]:
    """The confirmed conflicts of a run (one per conflict episode), in (spec_id, repeat) order."""
    items = []
    for e in results.episodes:
        f = e.failure
        if f is None or not e.termination.startswith("conflict:"):
            continue
        items.append(ConflictItem(
            spec_id=e.spec_id, repeat=e.repeat, turn=f.turn, type=f.type, fact_ids=tuple(f.fact_ids),
            commitment_ids=tuple(f.commitment_ids), quote=f.quote, explanation=f.explanation,
            confirmation=f.confirmation, trace=e.trace,
        ))
    return sorted(items, key=lambda i: i.key)


# --- reviews.json -----------------------------------------------------------------------------------


def label_key(label: Mapping[str, Any]) -> tuple[str, int, int, str]:
    return (str(label["spec_id"]), int(label.get("repeat", 0)), int(label["turn"]), str(label["type"]))


def load_reviews(run_dir: str | Path) -> dict[str, Any]:
    """``RUN_DIR/reviews.json``, checked, or an empty document when there is none yet.

    The labels keep one per (conflict, reviewer): a reviewer who labelled the same conflict twice
    changed their mind, so the later label wins (``put_label`` keeps it that way when writing).
    """
    path = Path(run_dir) / REVIEWS_FILE
    if not path.exists():
        return {"version": REVIEWS_VERSION, "labels": []}
    fix = "fix the entry or re-create the file with `ncp review`"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); fix or move the file aside "
                           "(labels are written atomically, so this file was edited by hand)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(f"{path}: cannot read it ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("labels"), list):
        raise RunFileError(f'{path}: expected {{"version": {REVIEWS_VERSION}, "labels": [...]}}; {fix}')
    if data.get("version", REVIEWS_VERSION) != REVIEWS_VERSION:
        raise RunFileError(f"{path}: reviews version {data.get('version')!r} is not supported (expected "
                           f"{REVIEWS_VERSION})")
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for i, label in enumerate(data["labels"]):
        if not isinstance(label, dict):
            raise RunFileError(f"{path}: labels[{i}] is not an object; {fix}")
        missing = [k for k in _LABEL_KEYS if k not in label]
        if missing:
            raise RunFileError(f"{path}: labels[{i}]: missing {', '.join(map(repr, missing))}; {fix}")
        for key, kind in {"spec_id": str, "turn": int, "type": str, "repeat": int}.items():
            if key in label and (not isinstance(label[key], kind) or isinstance(label[key], bool)):
                raise RunFileError(f"{path}: labels[{i}].{key}: expected {kind.__name__}, got {label[key]!r}; {fix}")
        if label["label"] not in LABELS:
            raise RunFileError(f"{path}: labels[{i}].label: got {label['label']!r}, expected one of "
                               f"{', '.join(LABELS)}; {fix}")
        ident = (*label_key(label), label.get("reviewer"))
        latest.pop(ident, None)  # re-insert so the labels keep the order of the latest ones
        latest[ident] = label
    return {**data, "labels": list(latest.values())}


def save_reviews(run_dir: str | Path, data: Mapping[str, Any]) -> Path:
    """Write ``RUN_DIR/reviews.json`` atomically (``core.files.atomic_write_text``): never half a file."""
    return atomic_write_text(Path(run_dir) / REVIEWS_FILE, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def put_label(data: dict[str, Any], label: dict[str, Any]) -> None:
    """Add ``label``, replacing the same reviewer's earlier label of the same conflict."""
    key, who = label_key(label), label.get("reviewer")
    data["labels"] = [x for x in data["labels"] if not (label_key(x) == key and x.get("reviewer") == who)]
    data["labels"].append(label)


def dispute_rates(labels: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per conflict type (and ``all``): disputed / (agreed + disputed), with a 95% Wilson interval.

    ``labels`` hold one label per (conflict, reviewer), as :func:`load_reviews` gives them, so with
    one reviewer this is the share of reviewed confirmed conflicts that the reviewer disputed.
    Skipped labels are counted but left out of the rate (the reviewer could not tell); ``value`` is
    None when nothing is rated.
    """
    out: dict[str, Any] = {"labels": len(labels)}
    kinds = [*CONFLICT_KINDS, *sorted({str(x["type"]) for x in labels} - set(CONFLICT_KINDS))]
    for kind in [*kinds, "all"]:
        mine = [x for x in labels if kind == "all" or x["type"] == kind]
        agree = sum(x["label"] == "agree" for x in mine)
        dispute = sum(x["label"] == "dispute" for x in mine)
        rated = agree + dispute
        out[kind] = {"agree": agree, "dispute": dispute, "skip": len(mine) - rated,
                     "value": round(dispute / rated, 6) if rated else None,
                     "ci": [round(x, 6) for x in wilson(dispute, rated)] if rated else None}
    return out


def dispute_line(labels: Sequence[Mapping[str, Any]]) -> str:
    rates = dispute_rates(labels)
    rated = {k: v for k, v in rates.items() if k != "labels" and v["agree"] + v["dispute"]}
    overall = rated.pop("all", None)
    if overall is None:
        return "human review: no conflict labelled yet"
    parts = [f"{t} {s['dispute']}/{s['agree'] + s['dispute']}" for t, s in rated.items()]
    return (f"human review: {overall['dispute']} of {overall['agree'] + overall['dispute']} labelled "
            f"conflict(s) disputed ({overall['value']:.0%}); by type: {', '.join(parts)}")
