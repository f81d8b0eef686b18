"""Gold cases from reference playthroughs: real-length clean turns, and the rules their edits must keep.

A playthrough turn is a clean case by construction (the loader proved it): the point is the story as the
labels of the turns before it leave it (node, facts added and negated, commitments met, the previous
narration), and the labels are the turn's own. A violation case is a minimal edit of such a turn: one
sentence changed or added, its length within ``edits.EDIT_LENGTH`` of the turn's, recorded with ``from_turn``,
so that length and style cannot tell a violation from a clean case (``length_auc``).

Case files built here reference the live spec (``live: {path, fingerprint}``), not a frozen copy: when the
spec changes, ``ncp calibrate --check`` fails until the clean cases are rebuilt (``ncp calibrate
--from-playthroughs``) and the violations re-read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..core.ledger import FactLedger
from ..core.quotes import words

if TYPE_CHECKING:
    from ..core.spec import NarrativeSpec

# Above this, length alone tells violations from clean cases too well (``ncp calibrate --check`` warns).
MAX_LENGTH_AUC = 0.6
CASE_FILE_SUFFIX = "-v4.yaml"


def clean_case_id(spec_id: str, turn: int) -> str:
    return f"{spec_id}-v4-t{turn:02d}"


def point_id(turn: int) -> str:
    return f"t{turn:02d}"


def playthrough_data(spec: NarrativeSpec) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """The points and clean cases of a spec's playthrough in the case-file format, and the turns left out
    (each with why): turns after the last node (an episode has ended or plays past the trajectory, which a
    point cannot express) and turns whose trigger label is unknown (the node's trigger was shown on an
    earlier turn that does not say which)."""
    turns = spec.playthrough or []
    nodes = [n.id for n in spec.trajectory]
    ledger = FactLedger.from_initial((f.id, f.text) for f in spec.initial_facts)
    added: dict[str, dict[str, Any]] = {}
    negated: dict[str, int] = {}
    met: dict[str, str] = {}
    points: dict[str, Any] = {}
    cases: list[dict[str, Any]] = []
    skipped: list[str] = []
    advanced = 0
    trigger_seen = False  # the current node's trigger was labelled on an earlier turn
    # Where the next advancing turn omits its trigger_quote and no earlier turn labelled it, the turns
    # between the two advances may or may not show the trigger: their label is unknown.
    unlabelled: set[int] = set()
    start = 0
    for i, turn in enumerate(turns):
        if turn.trigger_quote is not None and turn.advances is None:
            start = -1  # labelled: the turns before it are known not to show it
        if turn.advances is not None:
            if turn.trigger_quote is None and start >= 0:
                unlabelled.update(range(start, i))
            start = i + 1
    for i, turn in enumerate(turns):
        t = i + 1
        if advanced >= len(nodes):
            skipped.append(f"turn {t}: after the last node")
        elif i in unlabelled:
            skipped.append(f"turn {t}: the trigger of {nodes[advanced]!r} is shown on some turn before {t + 1} "
                           "that carries no trigger_quote")
        else:
            pid = point_id(t)
            point: dict[str, Any] = {"turn": t, "node": nodes[advanced]}
            trigger_done = trigger_seen or (turn.advances is not None and turn.trigger_quote is None)
            if trigger_done:
                point["trigger_done"] = True
            if added:
                point["added"] = {k: dict(v) for k, v in added.items()}
            if negated:
                point["negated"] = dict(negated)
            if met:
                point["commitments"] = dict(met)
            if i:
                point["previous"] = turns[i - 1].narration.strip()
            points[pid] = point
            case: dict[str, Any] = {"id": clean_case_id(spec.id, t), "point": pid, "from_turn": t,
                                    "input": turn.input.strip(), "response": turn.narration.strip()}
            if turn.trigger_quote is not None and not trigger_done:
                case["trigger"] = True
            if turn.advances is not None:
                case["delta"] = True
            if turn.facts_added:
                case["added"] = [f.quote for f in turn.facts_added]
            if turn.facts_negated:
                case["negated"] = [n.fact_id for n in turn.facts_negated]
            if turn.satisfies:
                case["satisfied"] = list(turn.satisfies)
            what = f"advances {turn.advances}" if turn.advances else "advances no node"
            case["why"] = f"reference playthrough turn {t}, clean by construction: {what}"
            cases.append(case)
        for fact in turn.facts_added:
            added[ledger.add(fact.text, t).id] = {"text": fact.text, "turn": t}
        for neg in turn.facts_negated:
            negated[neg.fact_id] = t
        for cid in turn.satisfies:
            met[cid] = "SATISFIED"
        if turn.advances is not None:
            advanced += 1
            trigger_seen = False
        elif turn.trigger_quote is not None:
            trigger_seen = True
    return points, cases, skipped


def case_file(spec: NarrativeSpec, gold_dir: str | Path, existing: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], list[str]]:
    """The case file of a spec's playthrough (``cases/<id>-v4.yaml``): points and clean cases rebuilt from
    the playthrough, the cases written by hand (violations, edited clean cases) kept, the live spec's
    fingerprint stamped. Returns the data and the turns left out."""
    import os

    points, cases, skipped = playthrough_data(spec)
    generated = {c["id"] for c in cases}
    kept = [c for c in (existing or {}).get("cases") or []
            if isinstance(c, dict) and not str(c.get("id", "")).startswith(f"{spec.id}-v4-t")]
    kept = [c for c in kept if c.get("id") not in generated]
    path = os.path.relpath(Path(spec.path or f"specs/{spec.id}.yaml").resolve(), Path(gold_dir).resolve())
    data: dict[str, Any] = {"spec": spec.id, "live": {"path": Path(path).as_posix(), "fingerprint": spec.fingerprint}}
    if existing and existing.get("review"):
        data["review"] = existing["review"]
    data["points"] = points
    data["cases"] = cases + kept
    return data, skipped


def write_case_file(spec: NarrativeSpec, gold_dir: str | Path) -> tuple[Path, int, list[str]]:
    """(Re)write ``gold_dir/cases/<id>-v4.yaml`` from the spec's playthrough; -> (path, clean cases, left out)."""
    import yaml

    from ..core.files import atomic_write_text

    path = Path(gold_dir) / "cases" / f"{spec.id}{CASE_FILE_SUFFIX}"
    existing = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
    data, skipped = case_file(spec, gold_dir, existing if isinstance(existing, dict) else None)
    header = (f"# Built from the reference playthrough of {spec.id} by `ncp calibrate --from-playthroughs`: the points\n"
              f"# and the {spec.id}-v4-tNN cases are rebuilt on every run; other cases (minimal edits, from_turn) are kept.\n")
    dumper_class: Any = type("Dumper", (yaml.SafeDumper,), {})  # its own representers, not the shared class's

    def text(dumper: Any, value: str) -> Any:
        # Narrations read as the specs' folded blocks do, not as one long quoted line.
        style = ">" if len(value) > 100 and "\n" not in value and value == value.strip() else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    dumper_class.add_representer(str, text)
    atomic_write_text(path, header + yaml.dump(data, Dumper=dumper_class, sort_keys=False, allow_unicode=True, width=110))
    return path, sum(1 for c in data["cases"] if str(c["id"]).startswith(f"{spec.id}-v4-t")), skipped


# --- the length artefact --------------------------------------------------------------------------------


def length_auc(cases: Iterable[Any]) -> float | None:
    """How well a response's length alone tells violations from clean cases: the area under the ROC curve
    of word count, direction-free (0.5 = no information, 1.0 = length decides); None without both kinds."""
    every = list(cases)
    return _auc([words(c.response) for c in every if c.violation], [words(c.response) for c in every if not c.violation])


def _auc(positives: Sequence[int], negatives: Sequence[int]) -> float | None:
    if not positives or not negatives:
        return None
    # Mann-Whitney U by ranks (ties share their mean rank): O(n log n) over the whole set.
    pooled = sorted([(v, 1) for v in positives] + [(v, 0) for v in negatives])
    rank_sum, i = 0.0, 0
    while i < len(pooled):
        j = i
        while j < len(pooled) and pooled[j][0] == pooled[i][0]:
            j += 1
        mean_rank = (i + 1 + j) / 2
        rank_sum += mean_rank * sum(1 for k in range(i, j) if pooled[k][1])
        i = j
    u = rank_sum - len(positives) * (len(positives) + 1) / 2
    auc = u / (len(positives) * len(negatives))
    return max(auc, 1 - auc)


# --- the reference run: an auditor judged on turns that are right by construction ------------------------


def reference_cases(specs: Iterable[NarrativeSpec]) -> tuple[list[Any], list[str]]:
    """Every playthrough turn of ``specs`` as a clean gold case at the point its labels give, through the
    gold set's own loader (so the labels are checked as a case file's are); -> (cases, problems)."""
    from .goldset import GoldSet, _case, _point

    gold = GoldSet(Path("."))
    for spec in specs:
        if not spec.playthrough:
            continue
        points_data, cases_data, _ = playthrough_data(spec)
        where = spec.path or spec.id

        def problem(loc: tuple[Any, ...], message: str, where: str = where) -> None:
            gold.problems.append(f"{where}: {'.'.join(map(str, loc))}: {message}")

        points = {pid: p for pid, raw in points_data.items()
                  if (p := _point(pid, raw, spec, lambda loc, msg, pid=pid: problem(("points", pid, *loc), msg)))}
        for raw in cases_data:
            case = _case(raw, spec, points, f"{where} turn {raw['from_turn']}",
                         lambda loc, msg, cid=raw["id"]: problem((cid, *loc), msg), live=True)
            if case is not None:
                gold.cases.append(case)
    return gold.cases, gold.problems


def late_cases(missed: Any, cases: Sequence[Any]) -> list[Any]:
    """The turns after a missed advance, up to the next labelled advance, audited as an episode would see
    them with the node still current (its trigger remembered): where a late advance would come."""
    import dataclasses

    later = sorted((c for c in cases if c.spec.id == missed.spec.id and c.point.turn > missed.point.turn),
                   key=lambda c: c.point.turn)
    out = []
    for case in later:
        point = dataclasses.replace(case.point, node=missed.point.node, node_index=missed.point.node_index,
                                    trigger_done=True)
        out.append(dataclasses.replace(case, id=f"{case.id}-late-{missed.point.node}", point=point, trigger=False,
                                       delta=True))
        if case.delta:
            break
    return out


async def reference_rows(auditor: Any, cases: Sequence[Any], *, concurrency: int = 16
                         ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Audit every reference case, then the later turns of each node the auditor missed; -> (rows, late rows)."""
    from .audit import audit_cases

    def with_point(rows: list[dict[str, Any]], audited: Sequence[Any]) -> list[dict[str, Any]]:
        for row, case in zip(rows, audited):
            row.update(node=case.point.node, turn=case.point.turn)
        return rows

    def cassette(case: Any) -> str:
        return f"reference--{case.spec.id}"

    rows = with_point(await audit_cases(auditor, cases, concurrency=concurrency, cassette=cassette), cases)
    missed = [c for c, r in zip(cases, rows) if c.delta and not _advanced(r)]
    late = [x for c in missed for x in late_cases(c, cases)]
    late_rows = with_point(await audit_cases(auditor, late, concurrency=concurrency, cassette=cassette), late)
    return rows, late_rows


def _advanced(r: dict[str, Any]) -> bool:
    """Whether an audited turn advanced its node as an episode would: trigger (or remembered) and key delta,
    and no confirmed conflict ending the episode first."""
    pred = r["pred"]
    return "invalid" not in pred and not pred["confirmed"] and bool(pred["delta"]) and bool(
        pred["trigger"] or r["gold"].get("trigger_done"))


def reference_summary(rows: Sequence[dict[str, Any]], late_rows: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """An auditor's figures on reference turns (every conflict a false alarm, every missed node its miss).

    ``rows`` are ``audit_case`` rows of the reference cases with the point's ``node`` and ``turn`` added
    (``reference_rows``); ``late_rows`` those of ``late_cases``, which say whether a missed node was
    advanced on a later turn."""
    judged = [r for r in rows if "invalid" not in r["pred"]]
    alarms = [r for r in judged if r["pred"]["confirmed"]]
    by_type: dict[str, int] = {}
    for r in alarms:
        for c in r["pred"]["confirmed"]:
            by_type[c["type"]] = by_type.get(c["type"], 0) + 1

    advanced = _advanced
    nodes = [r for r in rows if r["gold"]["delta"]]
    on_time = [r for r in nodes if advanced(r)]
    late_by_node = {(r["spec"], r["case"].split("-late-")[-1]) for r in late_rows if advanced(r)}
    late = [r for r in nodes if not advanced(r) and (r["spec"], r["node"]) in late_by_node]

    def agreement(key: str) -> dict[str, Any]:
        gold = sum(len(r["gold"][key]) for r in judged)
        pred = sum(len(r["pred"][key]) for r in judged)
        both = sum(len(set(r["gold"][key]) & set(r["pred"][key])) for r in judged)
        return {"gold": gold, "predicted": pred, "agreed": both,
                "recall": both / gold if gold else None, "precision": both / pred if pred else None}

    return {
        "specs": len({r["spec"] for r in rows}), "turns": len(rows), "judged": len(judged),
        "invalid": len(rows) - len(judged),
        "false_alarms": len(alarms), "false_alarm_rate": len(alarms) / len(judged) if judged else None,
        "false_alarms_by_type": dict(sorted(by_type.items())),
        "false_alarm_turns": [r["case"] for r in alarms],
        "nodes": len(nodes), "advanced_on_time": len(on_time), "advanced_late": len(late),
        "progress_recall": (len(on_time) + len(late)) / len(nodes) if nodes else None,
        "missed_nodes": [f"{r['spec']}:{r['node']} (turn {r['turn']})" for r in nodes
                         if not advanced(r) and r not in late],
        "negated": agreement("negated"), "satisfied": agreement("satisfied"),
    }


def reference_lines(s: dict[str, Any]) -> list[str]:
    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.1%}"

    types = ", ".join(f"{k} {v}" for k, v in s["false_alarms_by_type"].items()) or "none"
    lines = [
        f"reference playthroughs: {s['specs']} spec(s), {s['turns']} turn(s) audited, {s['invalid']} invalid "
        "(auditor or model errors, counted apart)",
        f"false alarms: {s['false_alarms']} of {s['judged']} turn(s) = {pct(s['false_alarm_rate'])} per turn "
        f"(every conflict on a reference turn is a false alarm; by type: {types})",
        f"progress recall: {s['advanced_on_time'] + s['advanced_late']} of {s['nodes']} node(s) = "
        f"{pct(s['progress_recall'])} ({s['advanced_on_time']} at the labelled turn, {s['advanced_late']} later)",
    ]
    for key in ("negated", "satisfied"):
        a = s[key]
        lines.append(f"{key}: {a['agreed']} agreed of {a['gold']} labelled, {a['predicted']} predicted "
                     f"(recall {pct(a['recall'])}, precision {pct(a['precision'])})")
    lines += [f"  false alarm: {c}" for c in s["false_alarm_turns"]]
    lines += [f"  missed node: {m}" for m in s["missed_nodes"]]
    return lines
