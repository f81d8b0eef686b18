"""The self-contained HTML report: tables, survival curves and a turn-by-turn view of every episode.

One file, nothing fetched: inline CSS, inline SVG, no script, no fonts, and a Content-Security-Policy
that forbids loading anything, so it opens from a CI artifact or an e-mail attachment as it is.

Narrator output, player input, auditor quotes and explanations, spec ids and labels are untrusted
text (a narrator can be prompted into writing markup). Everything goes through Jinja2 autoescaping;
the one place that builds markup in Python, the highlighted narration, escapes every piece itself
and hands Jinja2 a ``Markup`` of known tags only.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..analysis.metrics import CONFLICT_KINDS, survival_table
from ..core.quotes import find_quote  # the project's one quote matcher (re-exported for callers of this module)
from ..core.traces import Trace, episode_trace
from .runs import RunData, iter_labels, load_runs, spec_outline
from .tables import KIND_LABELS, run_rows, sections

if TYPE_CHECKING:
    from ..core.records import EpisodeRecord

# Okabe-Ito: distinguishable with the common colour-vision deficiencies, and in greyscale print.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#999933")
STATES = ("PENDING", "SATISFIED", "VIOLATED")
FAILURE_KEYS = ("turn", "type", "fact_ids", "commitment_ids", "quote", "explanation", "confirmation", "agreement")
ERROR_KEYS = ("kind", "message", "traceback")
REVIEW_KEYS = ("spec_id", "repeat", "turn", "type", "label", "note", "reviewer", "date")
LEDGER_KEYS = ("turn", "op", "fact_id", "text", "quote")
TRAJECTORY_KEYS = ("trigger_event_occurred", "key_delta_occurred", "evidence")
SATISFIED_KEYS = ("commitment_id", "evidence")

# Where quotes overlap, the stronger finding shows: a confirmed conflict over a rejected one over a fact.
_MARK_PRIORITY = {"fact": 1, "rejected": 2, "confirmed": 3}
_MARK_TITLE = {"fact": "source of a ledger change", "rejected": "flagged, rejected on confirmation",
               "confirmed": "confirmed conflict"}


def write_html(results_paths: Sequence[str | Path], out: str | Path, *,
               labels: Sequence[str] | None = None, calibrations: Sequence[str | Path] = ()) -> Path:
    """Write one self-contained HTML report of these results files to ``out``; returns its path.

    ``calibrations`` (calibration.json files of ``ncp calibrate``) add an auditor-calibration section;
    a calibration.json beside a results.json is found without being named.
    """
    runs = load_runs(list(results_paths), labels)
    out = Path(out)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(runs, calibrations=find_calibrations(runs, calibrations)), encoding="utf-8")
    return out


def find_calibrations(runs: Sequence[RunData], given: Sequence[str | Path] = ()) -> list[dict[str, Any]]:
    """calibration.json files named, plus any lying beside a run's results.json (read, not checked)."""
    import json

    from ..calibration.audit import CALIBRATION_FILE

    paths = [Path(p) / CALIBRATION_FILE if Path(p).is_dir() else Path(p) for p in given]
    paths += [p for p in (r.path.parent / CALIBRATION_FILE for r in runs) if p.is_file() and p not in paths]
    return [json.loads(p.read_text(encoding="utf-8")) for p in paths]


def _calibration_view(data: Mapping[str, Any]) -> dict[str, Any]:
    from .calibration import calibration_head, calibration_rows

    return {"model": data.get("model"), "head": calibration_head(data), "rows": calibration_rows(data)}


def render_html(runs: Sequence[RunData], *, title: str = "NCP-Bench report",
                calibrations: Sequence[Mapping[str, Any]] = ()) -> str:
    """The report as one HTML string (``runs`` from ``pytest_ncp.report.runs.load_runs``)."""
    import jinja2
    from markupsafe import Markup

    rows = [run_rows(r.results, r.label, reviews=r.reviews) for r in runs]
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    template = env.from_string(resources.files(__package__).joinpath("report.html.j2").read_text("utf-8"))
    # Not `from .. import __version__`: the package root is the public facade, which re-exports every layer.
    from importlib import metadata

    try:
        __version__ = metadata.version("pytest-ncp")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        __version__ = "unknown"

    views = [_run_view(i, r) for i, r in enumerate(runs)]
    # One episode open on arrival, the first that failed, shows what the report is for; the rest
    # stay folded so a hundred-episode run is a list to scan, not a wall of text.
    episodes = [e for v in views for e in v["episodes"]]
    first = next((e for e in episodes if e["kind"] == "conflict"), episodes[0] if episodes else None)
    if first is not None:
        first["open"] = True
    sequential = [c for i, r in enumerate(runs) if (c := sequential_chart(r, PALETTE[i % len(PALETTE)])) is not None]
    return template.render(
        title=title, version=__version__, rows=rows, sections=sections(rows), runs=views, chart=survival_chart(runs),
        sequential=sequential,
        kinds=CONFLICT_KINDS, kind_labels=KIND_LABELS, states=STATES, Markup=Markup,
        calibrations=[_calibration_view(c) for c in calibrations],
    )


# --- survival chart ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    lo: float
    hi: float
    start: float
    length: float

    def __call__(self, v: float) -> float:
        span = (self.hi - self.lo) or 1.0
        return round(self.start + (v - self.lo) / span * self.length, 2)


def _step(max_turn: int) -> int:
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000):
        if max_turn / step <= 10:
            return step
    return max(1, max_turn // 10)


def survival_chart(runs: Sequence[RunData], width: int = 760, height: int = 320) -> dict[str, Any]:
    """Geometry of the S(t) step curves, one per run, for the template to draw as SVG."""
    left, right, top, bottom = 64, 24, 16, 48
    horizon = max([1, *(r.max_turns for r in runs), *(e.turns for r in runs for e in r.episodes)])
    x = Axis(0, horizon, left, width - left - right)
    y = Axis(1, 0, top, height - top - bottom)  # S = 1 at the top
    curves = []
    for i, run in enumerate(runs):
        end = max([run.max_turns, *(e.turns for e in run.episodes)]) if run.episodes else 0
        if not run.episodes:
            continue
        table = survival_table(run.episodes, end)
        s = {t: p.value for t, p in table.items()}
        # Stop where no episode is observed any more: beyond it the curve would be extrapolation.
        end = max([0, *(t for t, p in table.items() if p.reached or p.value == 0.0)])
        # Right-continuous step function: S holds over [t-1, t) and drops at t.
        d = [f"M{x(0)},{y(s[0])}"]
        for t in range(1, end + 1):
            d.append(f"H{x(t)}")
            if s[t] != s[t - 1]:
                d.append(f"V{y(s[t])}")
        curves.append({"label": run.label, "colour": PALETTE[i % len(PALETTE)], "d": " ".join(d),
                       "end": end, "final": s[end], "end_x": x(end), "end_y": y(s[end])})
    step = _step(horizon)
    return {
        "width": width, "height": height, "left": left, "right": width - right, "top": top,
        "bottom": height - bottom, "curves": curves,
        "xticks": [{"v": t, "x": x(t)} for t in range(0, horizon + 1, step)],
        "yticks": [{"v": f"{p}%", "y": y(p / 100)} for p in (0, 25, 50, 75, 100)],
    }


# --- episodes ------------------------------------------------------------------------------------


def sequential_chart(run: RunData, colour: str, width: int = 760, height: int = 260) -> dict[str, Any] | None:
    """The confidence sequence of a sequential gate over the episodes it read (``results.json`` ``sequential``),
    with the threshold and the decision; None for a run without one. Shards merged by ``ncp merge`` have no one
    sequence: their merged decision is given in words."""
    seq = run.results.sequential
    if seq is None:
        return None
    left, right, top, bottom = 64, 24, 16, 48
    gate = seq.gate
    history = gate.history if gate is not None else []
    n = max(1, len(history))
    x = Axis(0, n, left, width - left - right)
    y = Axis(1, 0, top, height - top - bottom)

    def steps(values: Sequence[float], start: float) -> str:
        """A step line: each bound holds from one observed episode to the next (running intersection)."""
        d, last = [f"M{x(0)},{y(start)}"], start
        for t, v in enumerate(values, 1):
            if v != last:
                d += [f"H{x(t)}", f"V{y(v)}"]
                last = v
        d.append(f"H{x(len(values))}")
        return " ".join(d)

    decided_at = gate.decided_after if gate is not None else None
    if seq.merged is not None:
        verdict = seq.merged.decision or "undecided"
        headline = (f"{seq.shards} shards merged (mean of their e-values): {verdict}; e_pass {seq.merged.e_pass:.3g}, "
                    f"e_fail {seq.merged.e_fail:.3g} against 2/alpha = {2 / seq.run_alpha:g}")
    elif seq.stopped:
        headline = (f"decided after {seq.decided_after} of {seq.planned} episodes ({seq.stopped_by}"
                    f"{': ' + gate.decision if gate is not None and gate.decision else ''}); {len(seq.unstarted)} "
                    f"never started, {len(seq.cancelled)} cancelled")
    else:
        headline = f"undecided after all {seq.planned} episodes: decided as the fixed gate"
    step = _step(n)
    return {
        "label": run.label, "colour": colour, "width": width, "height": height, "left": left, "right": width - right,
        "top": top, "bottom": height - bottom, "headline": headline, "rate": seq.rate, "turn": seq.turn,
        "alpha": seq.alpha, "observed": len(history),
        "lower": steps([lo for lo, _ in history], 0.0), "upper": steps([hi for _, hi in history], 1.0),
        "threshold_y": y(seq.rate), "decision_x": x(decided_at) if decided_at else None,
        "xticks": [{"v": t, "x": x(t)} for t in range(0, n + 1, step)],
        "yticks": [{"v": f"{p}%", "y": y(p / 100)} for p in (0, 25, 50, 75, 100)],
    }


def _run_view(index: int, run: RunData) -> dict[str, Any]:
    config = run.config
    return {
        "index": index, "label": run.label, "path": str(run.path), "colour": PALETTE[index % len(PALETTE)],
        "config": [(k, config.get(k)) for k in ("narrator", "narrator_model", "player", "player_model",
                                                 "auditor_model", "max_turns", "repeats", "prompt_version")
                   if config.get(k) is not None],
        "reviews_path": str(run.reviews_path) if run.reviews_path else None,
        "demo": bool(config.get("demo")),
        "canaries": _canaries(run.results.canaries.model_dump(mode="json") if run.results.canaries else None),
        "incomplete": run.results.incompleteness(),
        "verdict": run.results.verdict.model_dump(mode="json") if run.results.verdict is not None else None,
        "episodes": [_episode_view(run, f"r{index}-e{j}", e) for j, e in enumerate(run.episodes)],
        "blame": _blame_view(index, run),
    }


def _blame_view(index: int, run: RunData) -> list[dict[str, Any]]:
    """The run's blame table (``report.blame.rows``), each episode a link to its view below."""
    from .blame import rows

    anchors = {e.key: f"r{index}-e{j}" for j, e in enumerate(run.episodes)}
    blame = run.results.metrics.blame
    table = rows(blame.model_dump(mode="json") if blame is not None else None, run.episodes)
    for row in table:
        row["links"] = [{"name": name, "anchor": anchors.get(key)} for name, key in zip(row["episodes"], row["keys"])]
    return table


def _canaries(summary: Any) -> dict[str, Any] | None:
    if not isinstance(summary, Mapping):
        return None
    from ..calibration.audit import canary_line

    try:
        return {"line": canary_line(dict(summary)), "ok": bool(summary.get("ok"))}
    except KeyError:
        return None


def _episode_view(run: RunData, anchor: str, e: EpisodeRecord) -> dict[str, Any]:
    trace = episode_trace(e.trace, run.path.parent)
    outline = spec_outline(trace, run.path.parent) if trace.events else None
    nodes = outline["nodes"] if outline else _node_count(e)
    commitment_info = outline["commitments"] if outline else {}
    repeat = e.repeat
    reviews = [p for r in iter_labels(run.reviews, e.spec_id, repeat) if (p := _pick(r, REVIEW_KEYS)) is not None]
    failure = _pick(e.failure.model_dump(mode="json") if e.failure else None, FAILURE_KEYS,
                    lists=("fact_ids", "commitment_ids"))
    turns = [_turn_view(ev, nodes, reviews) for ev in trace.of("turn")]
    previous = 0
    for t in turns:
        t["advanced"] = t["node"] is not None and t["node"] > previous
        previous = t["node"] if t["node"] is not None else previous
    ending = e.ending
    return {
        "anchor": anchor, "spec_id": e.spec_id, "repeat": repeat, "title": outline["title"] if outline else None,
        "termination": e.termination.value, "kind": ending.display, "turns_done": e.turns,
        "owner": ending.owner.label, "outcome": ending.value,
        "agreement": e.failure.agreement_text if e.failure else None,
        "player_fault": e.player_fault.model_dump(mode="json") if e.player_fault else None,
        "progress": e.progress, "satisfied": e.satisfied, "nodes_reached": e.nodes_reached,
        "nodes": nodes, "tokens": e.tokens, "cost_usd": e.cost_usd,
        "failure": failure, "failure_refs": _failure_refs(failure, trace, commitment_info),
        "failure_reviews": [r for r in reviews if r["turn"] == failure["turn"] and r["type"] == failure["type"]]
        if failure else [],
        "error": _pick(e.error.model_dump(mode="json") if e.error else _trace_error(trace), ERROR_KEYS),
        "trace_path": str(trace.path) if trace.path else e.trace, "trace_problem": trace.problem,
        "bad_lines": trace.bad_lines, "turn_views": turns,
        "lanes": _lanes(turns, e, commitment_info),
        "open": False,
    }


def _failure_refs(failure: dict[str, Any] | None, trace: Trace, commitments: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The text of the facts and commitments a failure names, so the reader need not open the spec."""
    if not failure:
        return []
    facts = {str(f.get("id")): f.get("text") for f in trace.start.get("ledger") or [] if isinstance(f, dict)}
    for ev in trace.of("turn"):
        for change in ev.get("ledger_changes") or []:
            if isinstance(change, dict) and change.get("op") == "add":
                facts.setdefault(str(change.get("fact_id")), change.get("text"))
    refs = [{"id": f, "what": "fact", "text": facts[f]} for f in failure["fact_ids"] if facts.get(f)]
    for c in failure["commitment_ids"]:
        meta = commitments.get(c)
        if meta:
            refs.append({"id": c, "what": f"{meta['kind']} commitment", "text": meta["text"]})
    return refs


def _cell(turn: Any, state: Any) -> dict[str, Any]:
    state = str(state)
    return {"turn": turn, "state": state, "css": state.lower() if state in STATES else "unknown"}


def _pick(value: Any, keys: Sequence[str], lists: Sequence[str] = ()) -> dict[str, Any] | None:
    """A record from a file with every key the template reads present (None, or [] for ``lists``)."""
    if not isinstance(value, Mapping):
        return None
    out: dict[str, Any] = {k: value.get(k) for k in keys}
    for k in lists:
        out[k] = [str(x) for x in out[k]] if isinstance(out[k], list) else []
    return out


def _node_count(e: EpisodeRecord) -> int | None:
    # Without the spec, N follows from progress = nodes_reached / N whenever a node was reached.
    if e.nodes_reached is not None and e.progress > 0:
        return round(e.nodes_reached / e.progress)
    return None


def _trace_error(trace: Trace) -> dict[str, Any] | None:
    found = trace.of("error")
    return found[-1] if found else None


def _turn_view(ev: Mapping[str, Any], nodes: int | None, reviews: list[dict[str, Any]]) -> dict[str, Any]:
    # Traces are files: a hand-edited or foreign one may hold anything, and one odd event must cost
    # its own details, not the whole report. Hence _map/_list around every level read.
    from ..core.wire import Step  # pydantic: only once a report is drawn

    verdicts = _map(ev.get("verdicts"))
    response = str(ev.get("response") or "")
    flagged = [c for c in _list(_map(verdicts.get(Step.CONFLICT_CHECK)).get("conflicts")) if isinstance(c, Mapping)]
    confirmations = _list(verdicts.get(Step.CONFLICT_CONFIRMATION))
    votes = _list(verdicts.get("conflict_votes"))
    confirmed_quotes = {(c.get("type"), c.get("quote")) for c in _list(ev.get("confirmed")) if isinstance(c, Mapping)}
    conflicts = []
    spans: list[tuple[str, str]] = []
    for i, c in enumerate(flagged):
        conf = confirmations[i] if i < len(confirmations) and isinstance(confirmations[i], Mapping) else None
        is_confirmed = bool(conf.get("confirmed")) if conf else (c.get("type"), c.get("quote")) in confirmed_quotes
        quote = str(c.get("quote") or "")
        spans.append((quote, "confirmed" if is_confirmed else "rejected"))
        conflicts.append({
            "type": str(c.get("type")),
            "ids": [str(x) for x in [*_list(c.get("fact_ids")), *_list(c.get("commitment_ids"))]],
            "quote": quote, "found": bool(find_quote(quote, response)), "explanation": c.get("explanation"),
            "confirmed": is_confirmed, "confirmation": conf.get("explanation") if conf else None,
            "votes": (f"{_map(votes[i]).get('yes')}/{_map(votes[i]).get('of')}" if i < len(votes) and
                      isinstance(votes[i], Mapping) else None),
            # ``reviews`` are this episode's already: keep the labels of this turn and conflict type.
            "reviews": [r for r in reviews if r["turn"] == ev.get("turn") and r["type"] == c.get("type")],
        })
    ledger = [_pick(c, LEDGER_KEYS) for c in _list(ev.get("ledger_changes")) if isinstance(c, Mapping)]
    # The quotes of ledger changes, not of the fact-update verdict: after a confirmed conflict the
    # update is not committed, and marking it would suggest the ledger moved.
    spans += [(str(c["quote"]), "fact") for c in ledger if c and c["quote"]]
    satisfied = _list(_map(verdicts.get(Step.COMMITMENT_CHECK)).get("satisfied"))
    node = ev.get("node_index")
    screen = _map(ev.get("screen"))
    return {
        "turn": ev.get("turn"), "player_input": ev.get("player_input"), "response": response,
        "screen": {"fair": bool(screen.get("fair")), "attempts": [
            {"input": str(a.get("input") or ""), "fair": bool(a.get("fair")),
             "problems": [_pick(x, ("rule", "quote", "explanation")) for x in _list(a.get("problems"))
                          if isinstance(x, Mapping)]}
            for a in _list(screen.get("attempts")) if isinstance(a, Mapping)]} if screen else None,
        "narration": highlight(response, spans), "conflicts": conflicts, "ledger": ledger,
        "node": node if isinstance(node, int) and not isinstance(node, bool) else None, "nodes": nodes,
        "trajectory": _pick(verdicts.get(Step.TRAJECTORY_UPDATE), TRAJECTORY_KEYS),
        "satisfied": [_pick(x, SATISFIED_KEYS) for x in satisfied if isinstance(x, Mapping)],
        "commitments": dict(_map(ev.get("commitments"))),
    }


def _number(value: Any) -> int | float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _lanes(turns: list[dict[str, Any]], e: EpisodeRecord, info: Mapping[str, Any]) -> dict[str, Any]:
    """One row per commitment, one cell per audited turn, from each turn's recorded states."""
    final = e.commitments
    ids: list[str] = [str(c) for c in final]
    for t in turns:
        ids += [c for c in t["commitments"] if c not in ids]
    rows = []
    for cid in ids:
        meta = info.get(cid) or {}
        rows.append({"id": cid, "kind": meta.get("kind"), "text": meta.get("text"),
                     "cells": [_cell(t["turn"], t["commitments"].get(cid, "PENDING")) for t in turns],
                     "final": str(final.get(cid, ""))})
    nodes = []
    previous = 0
    for t in turns:
        node = t["node"] if t["node"] is not None else previous
        nodes.append({"turn": t["turn"], "node": node, "advanced": node > previous})
        previous = node
    return {"turns": [t["turn"] for t in turns], "rows": rows, "nodes": nodes}


# --- quotes inside the narration -----------------------------------------------------------------


def highlight(text: str, quotes: Sequence[tuple[str, str]]) -> Any:
    """``text`` escaped, with each quote wrapped in ``<mark class="q-<kind>">``; a ``Markup``."""
    from markupsafe import Markup, escape

    level = [0] * len(text)
    for quote, kind in quotes:
        for a, b in find_quote(quote, text):
            for i in range(a, b):
                level[i] = max(level[i], _MARK_PRIORITY[kind])
    names = {v: k for k, v in _MARK_PRIORITY.items()}
    out, i = [], 0
    while i < len(text):
        j = i
        while j < len(text) and level[j] == level[i]:
            j += 1
        piece = escape(text[i:j])
        if level[i]:
            kind = names[level[i]]
            out.append(Markup('<mark class="q-{}" title="{}">{}</mark>').format(kind, _MARK_TITLE[kind], piece))
        else:
            out.append(piece)
        i = j
    return Markup("").join(out)
