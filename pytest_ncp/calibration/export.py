"""``ncp review RUN_DIR --export-gold DIR``: turn reviewed conflicts into draft gold cases.

A disputed verdict is exactly the case a gold set needs: the reviewer's label becomes the conflict
label (agree: the auditor's conflict; dispute: no conflict), and the story point is rebuilt from the
trace (ledger, current node, commitment states, previous narration). The other steps' labels are
copied from the auditor's own answers at that turn, so the file is written as ``review: draft``:
a person checks them before ``review: reviewed`` (docs/auditor.md).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..analysis.reviews import conflicts_of, label_key, load_reviews
from ..analysis.results import load_results
from ..core.traces import episode_trace, find_spec_file, load_recorded_spec


def export_gold(run_dir: str | Path, out_dir: str | Path) -> tuple[list[Path], list[str]]:
    """Write draft cases for every agreed or disputed conflict; returns (files written, skipped reasons)."""
    run = Path(run_dir)
    out = Path(out_dir)
    results = load_results(run)
    labels: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for label in load_reviews(run)["labels"]:
        if label["label"] in ("agree", "dispute"):
            labels.setdefault(label_key(label), []).append(label)
    per_spec: dict[str, list[dict[str, Any]]] = {}
    points: dict[str, dict[str, Any]] = {}
    skipped: list[str] = []
    sources: dict[str, Path] = {}
    for item in conflicts_of(results):
        found = labels.get(item.key)
        if not found:
            continue
        verdicts = {x["label"] for x in found}
        if len(verdicts) > 1:
            skipped.append(f"{item.spec_id} turn {item.turn}: reviewers disagree ({', '.join(sorted(verdicts))})")
            continue
        trace = episode_trace(item.trace, run)
        spec = load_recorded_spec(trace.start.get("spec_path"), run) if trace.path else None
        if spec is None:
            skipped.append(f"{item.spec_id} turn {item.turn}: trace or spec not found")
            continue
        case, point, why_not = _case(item, found, trace, spec)
        if case is None:
            skipped.append(f"{item.spec_id} turn {item.turn}: {why_not}")
            continue
        per_spec.setdefault(spec.id, []).append(case)
        points[case["point"]] = point
        sources[spec.id] = Path(find_spec_file(trace.start.get("spec_path"), run) or spec.path)
    written = [_write(out, spec_id, cases, points, sources[spec_id]) for spec_id, cases in per_spec.items()]
    return written, skipped


def _case(item: Any, labels: list[dict[str, Any]], trace: Any, spec: Any) -> tuple[Any, Any, str]:
    if item.turn < 1:
        return None, None, "the opening narration has no player input (gold cases start at turn 1)"
    added: dict[str, str] = {}
    negated: list[str] = []
    node_index, states, previous, current, trigger_turn = 0, {}, None, None, None
    for event in trace.of("turn"):
        turn = int(event["turn"])
        if turn < item.turn:
            for change in event.get("ledger_changes") or ():
                if change["op"] == "add":
                    added[change["fact_id"]] = change["text"]
                elif change["fact_id"] not in negated:
                    negated.append(change["fact_id"])
            node_index = int(event.get("node_index", node_index))
            states = dict(event.get("commitments") or {})
            previous = event.get("response")
            trigger_turn = event.get("trigger_turn")  # trigger memory: the current node's trigger happened
        elif turn == item.turn:
            current = event
    if current is None or node_index >= len(spec.trajectory):
        return None, None, "the turn is missing from the trace, or the story was already complete"
    v = current.get("verdicts") or {}
    trajectory = v.get("trajectory_update") or {}
    facts = v.get("fact_update") or {}
    commitments = v.get("commitment_check") or {}
    agree = labels[0]["label"] == "agree"
    ids = list(item.fact_ids if item.type == "fact" else item.commitment_ids if item.type == "commitment" else ())
    conflict = (item.type + (":" + ",".join(ids) if ids else "")) if agree else None
    notes = "; ".join(f"{x.get('reviewer') or 'a reviewer'} {x['label']}d" + (f": {x['note']}" if x.get("note") else "")
                      for x in labels)
    import hashlib

    # Two runs can both have a conflict at repeat 0, turn 3: the text tells them apart.
    tag = hashlib.sha256((current.get("response") or "").encode()).hexdigest()[:6]
    point_id = f"r{item.repeat}-t{item.turn}-{tag}"
    point = {"turn": item.turn, "node": spec.trajectory[node_index].id, "added": added, "negated": negated,
             "commitments": {k: s for k, s in states.items() if s == "SATISFIED"}, "previous": previous}
    if trigger_turn is not None:
        point["trigger_done"] = True  # the auditor was told so; the case labels only what this response does
    case = {
        "id": f"{item.spec_id}-review-{point_id}", "point": point_id,
        "input": current.get("player_input") or "", "response": current.get("response") or "",
        **({"conflict": conflict} if conflict else {}),
        "trigger": trigger_turn is None and bool(trajectory.get("trigger_event_occurred")),
        "delta": bool(trajectory.get("key_delta_occurred")),
        "added": [a["quote"] for a in facts.get("added") or ()],
        "negated": [n["fact_id"] for n in facts.get("negated") or ()],
        "satisfied": [s["commitment_id"] for s in commitments.get("satisfied") or ()],
        "why": (f"{'agreed' if agree else 'disputed'} {item.type} conflict: {notes}. Other labels copied from the "
                "auditor's answers: check them."),
    }
    return case, point, ""


def _write(out: Path, spec_id: str, cases: list[dict[str, Any]], points: dict[str, dict[str, Any]],
           spec_source: Path) -> Path:
    import yaml

    (out / "specs").mkdir(parents=True, exist_ok=True)
    (out / "cases").mkdir(parents=True, exist_ok=True)
    frozen = out / "specs" / f"{spec_id}.yaml"
    if not frozen.exists():
        shutil.copyfile(spec_source, frozen)  # the copy the ids are checked against; never moves
    path = out / "cases" / f"{spec_id}--reviews.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
    data = data or {"spec": spec_id, "review": {"status": "draft", "notes": "exported from reviews of disputed "
                                                "verdicts; check every label, then mark reviewed"},
                    "points": {}, "cases": []}
    have = {c["id"] for c in data["cases"]}
    for case in cases:
        if case["id"] not in have:
            data["points"][case["point"]] = points[case["point"]]
            data["cases"].append(case)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8")
    return path
