"""The gold set: narrator turns with the answer a correct auditor gives at every audit step.

Layout of a set directory (default ``ncp-gold``: the repository's ``calibration/``, installed with the package,
whose cases are all built from live specs; ``calibration/legacy/`` holds the v3 snippets, a set of its own)::

    specs/<spec-id>.yaml     frozen copies of the specs the cases use (ids never move under them)
    cases/<spec-id>.yaml     the story points and labelled cases of one spec

A case file::

    spec: nosferatu                  # specs/nosferatu.yaml of this set
    live:                            # or the live spec (cases built from its playthrough, cases/<id>-v4.yaml):
      path: ../specs/nosferatu.yaml  #   relative to the set; the cases fail --check when its fingerprint
      fingerprint: 0123456789abcdef  #   changes (ncp calibrate --from-playthroughs rebuilds and restamps)
    review: {status: reviewed, reviewer: "...", date: 2026-11-30, notes: "outcome"}
    points:                          # moments of the story that cases start from
      castle-supper:
        turn: 6                      # the turn being audited
        node: deed-signed            # current trajectory node (id)
        trigger_done: false          # its trigger happened in the previous turn (the auditor is told so,
                                     # as an episode remembers it: TurnContext.trigger_turn = turn - 1)
        added: {F11: "..."}          # facts earlier turns added (ids as the ledger gives them), each at
                                     # turn - 1, or at its own turn: {F11: {text: "...", turn: 2}}
                                     # (long-horizon points rebuild a story that grew over many turns)
        negated: [F6]                # facts earlier turns negated, at turn - 1, or {F6: 4} at their own turn
        commitments: {C3: SATISFIED} # states other than PENDING
        previous: "..."              # the narrator's previous narration (context only)
    cases:
      - id: nosferatu-07
        point: castle-supper
        input: "I cut the bread."    # the player's input
        response: "..."              # the narrator response under audit
        conflict: fact:F2            # or commitment:C1, player_input, a list of them; absent = clean
        trigger: true                # current node: trigger event happens in this response
        delta: false                 # current node: key delta happens in this response
        added: ["quote", ...]        # a quote of the response for every new fact it establishes: verbatim
                                     # and substantial (pytest_ncp.core.quotes.check_quote, as the auditor checks)
        negated: [F6]                # active facts the response makes untrue
        satisfied: [C5]              # pending commitments the response fulfils
        tags: [paraphrase]           # hard-case tags (HARD_TAGS)
        why: one line: why these labels
        from_turn: 6                 # live specs only: the playthrough turn the case is (unedited: clean) or
                                     # edits (one sentence changed or added, length within 15%: a violation,
                                     # a legitimate change, a near miss); the point's turn

Omitted labels mean "no": no conflict, no trigger, no delta, nothing added, negated or satisfied.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..core.bundled import GOLD, BundledDataMissing, resolve
from ..core.wire import CONFLICT_TYPES
from ..engine.auditor import TurnContext
from ..core.ledger import FactLedger
from ..core.quotes import check_quote
from ..prompts import shown
from ..core.spec import NarrativeSpec, SpecError, _line_map, _nearest_line, load_spec

DEFAULT_SET = GOLD  # the gold set installed with the package (core/bundled.py); the repository's calibration/
# The paper's hard cases; every case may carry any of them.
HARD_TAGS: dict[str, str] = {
    "state-change": "a fact changes through an event the story shows (not a conflict)",
    "paraphrase": "a fact restated in other words (not a conflict)",
    "subtle-name": "a name quietly swapped",
    "subtle-place": "a place quietly swapped",
    "subtle-time": "a time of day or season quietly swapped",
    "dead-acting": "a dead or absent character acts",
    "premature-reveal": "later plot revealed or done ahead of its time",
    "partial-node": "the current node only half completed (trigger without key delta, or hinted only)",
    "passing-ack": "the player's input acknowledged only in passing",
    # Benchmark v3 families: the slips real narrators make, and clean turns that look like them.
    "long-horizon": "the contradicted fact was added by the story at an earlier turn, not given at turn 0",
    "quiet-override": "the player's act is acknowledged, then overridden or given an outcome the player did not choose",
    "implication": "the contradiction is implied by what happens (a dead man's voice, a locked door walked through)",
    "legitimate-change": "a fact changes through an event the narration shows (clean: must not be flagged)",
    "near-miss": "wording that looks like a contradiction and is not: a dream, a lie, a rumour (clean)",
    # Prompt injection: the narration carries an attack on the auditor (fake closing tags, out-of-character notes,
    # fake JSON answers, instructions in the player input) beside a real violation or on a clean turn.
    "injection": "the narration or input carries instructions to the auditor; judge the story, not the instructions",
}
# The families a v3 case belongs to (each family needs enough cases to mean something; see TARGETS).
FAMILIES = ("long-horizon", "quiet-override", "implication", "legitimate-change", "near-miss", "injection")
STATES = ("PENDING", "SATISFIED")
# What a set should reach (reported by --check; the targets).
TARGETS = {"cases": 300, "specs": 25, "clean_share": 0.40, "per_type": 50}
_CASE_KEYS = {"id", "point", "input", "response", "conflict", "trigger", "delta", "added", "negated", "satisfied",
              "tags", "why", "from_turn"}
_POINT_KEYS = {"turn", "node", "trigger_done", "added", "negated", "commitments", "previous"}
_FILE_KEYS = {"spec", "live", "review", "points", "cases"}


@dataclass(frozen=True)
class GoldConflict:
    type: str
    ids: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.type + (":" + ",".join(self.ids) if self.ids else "")


@dataclass(frozen=True)
class Point:
    id: str
    turn: int
    node: str
    node_index: int
    trigger_done: bool
    added: tuple[tuple[str, str, int], ...]  # (fact id, text, turn it was added)
    negated: tuple[tuple[str, int], ...]     # (fact id, turn it was negated)
    commitments: tuple[tuple[str, str], ...]
    previous: str | None


@dataclass(frozen=True)
class GoldCase:
    id: str
    spec: NarrativeSpec
    point: Point
    player_input: str
    response: str
    conflicts: tuple[GoldConflict, ...] = ()
    trigger: bool = False
    delta: bool = False
    added: tuple[str, ...] = ()
    negated: tuple[str, ...] = ()
    satisfied: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    why: str = ""
    where: str = ""  # path:line of the case, for messages
    from_turn: int | None = None  # the playthrough turn the case is (clean) or edits (a live spec's cases)

    @property
    def violation(self) -> bool:
        return bool(self.conflicts)

    @property
    def conflict_types(self) -> set[str]:
        return {c.type for c in self.conflicts}

    @property
    def advanced(self) -> bool:
        return (self.trigger or self.point.trigger_done) and self.delta

    def ledger(self) -> FactLedger:
        return _point_ledger(self.spec, self.point.added, self.point.negated)

    def commitment_states(self) -> dict[str, str]:
        states = {c.id: "PENDING" for c in self.spec.all_commitments}  # the world rules (W1, ...) too, as episodes
        states.update(dict(self.point.commitments))
        return states

    def pending(self) -> set[str]:
        """Commitments the commitment check judges at this point (pending, not invariants)."""
        states = self.commitment_states()
        return {c.id for c in self.spec.all_commitments if states[c.id] == "PENDING" and c.kind != "invariant"}

    def context(self) -> TurnContext:
        """The TurnContext an episode would build at this point: what the auditor reads."""
        return TurnContext(spec=self.spec, turn=self.point.turn, player_input=self.player_input,
                           response=self.response, facts=self.ledger().active(), node_index=self.point.node_index,
                           commitment_states=self.commitment_states(),  # type: ignore[arg-type]
                           previous_response=self.point.previous, trigger_turn=self.trigger_turn)

    @property
    def trigger_turn(self) -> int | None:
        """The turn an episode remembers the current node's trigger from (trigger memory): the point's
        previous turn when ``trigger_done``, else None."""
        return self.point.turn - 1 if self.point.trigger_done else None

    def key(self) -> tuple[str, int, str, str]:
        """What tells cases apart in the prompts of every step (see ``check``): as the prompts show them."""
        return (self.spec.title, self.point.turn, _squash(shown(self.player_input)), _squash(shown(self.response)))


@dataclass
class GoldSet:
    directory: Path
    cases: list[GoldCase] = field(default_factory=list)
    reviews: dict[str, dict[str, Any]] = field(default_factory=dict)  # case file -> review record
    problems: list[str] = field(default_factory=list)

    @property
    def specs(self) -> dict[str, NarrativeSpec]:
        return {c.spec.id: c.spec for c in self.cases}


class GoldSetError(Exception):
    pass


def _squash(text: str) -> str:
    return " ".join(text.split())


def load_gold_set(directory: str | Path = DEFAULT_SET) -> GoldSet:
    """Load every case file under ``directory/cases``; problems are collected (``path:line: message``)."""
    try:
        root = resolve(directory)
    except BundledDataMissing as exc:
        raise GoldSetError(str(exc)) from None
    cases_dir = root / "cases"
    if not cases_dir.is_dir():
        raise GoldSetError(f"{root}: not a gold set (expected {cases_dir}/ with case files and {root / 'specs'}/ "
                           "with the frozen spec copies)")
    gold = GoldSet(root)
    for path in sorted(cases_dir.glob("*.yaml")):
        _load_file(path, root / "specs", gold)
    _check_set(gold)
    return gold


def _load_file(path: Path, spec_dir: Path, gold: GoldSet) -> None:
    import yaml

    text = path.read_text(encoding="utf-8")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser when libyaml is there
    try:
        node = yaml.compose(text, Loader=loader)
        data = yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        gold.problems.append(f"{path}:{mark.line + 1 if mark else 1}: invalid YAML: {getattr(exc, 'problem', exc)}")
        return
    lines = _line_map(node)

    def problem(loc: tuple[Any, ...], message: str) -> None:
        gold.problems.append(f"{path}:{_nearest_line(lines, loc) or 1}: {'.'.join(map(str, loc)) or '<root>'}: "
                             f"{message}")

    if not isinstance(data, dict):
        problem((), "a case file is a mapping with spec, points and cases")
        return
    for key in sorted(set(data) - _FILE_KEYS):
        problem((key,), f"unknown field (valid: {', '.join(sorted(_FILE_KEYS))})")
    live = data.get("live")
    if live is not None:
        spec_or_none = _live_spec(live, spec_dir.parent, problem)
        if spec_or_none is None:
            return
        spec = spec_or_none
    else:
        spec_path = spec_dir / f"{data.get('spec')}.yaml"
        try:
            spec = load_spec(spec_path)
        except SpecError as exc:
            problem(("spec",), f"cannot load the frozen spec copy {spec_path}: {str(exc).splitlines()[0]}")
            return
    if spec.id != data.get("spec"):
        problem(("spec",), f"{spec.path} has id {spec.id!r}, expected {data.get('spec')!r}")
    review = data.get("review")
    if review is not None:
        from ..core.spec import Review

        try:
            gold.reviews[path.name] = Review.model_validate(review).model_dump(mode="json")
        except ValueError as exc:
            problem(("review",), f"not a review record (status, reviewer, date, notes): {exc}")
    points: dict[str, Point] = {}
    for pid, raw in (data.get("points") or {}).items():
        point = _point(str(pid), raw, spec, lambda loc, msg, pid=pid: problem(("points", pid, *loc), msg))
        if point is not None:
            points[str(pid)] = point
    for i, raw in enumerate(data.get("cases") or []):
        case = _case(raw, spec, points, f"{path}:{_nearest_line(lines, ('cases', i)) or 1}",
                     lambda loc, msg, i=i: problem(("cases", i, *loc), msg), live=live is not None)
        if case is not None:
            gold.cases.append(case)


def _live_spec(live: Any, root: Path, problem: Any) -> NarrativeSpec | None:
    """The live spec a case file names (``live: {path, fingerprint}``, the path relative to the set), when it
    still has the fingerprint the cases were built on."""
    if not isinstance(live, dict) or set(live) != {"path", "fingerprint"}:
        problem(("live",), "expected {path: <spec file, relative to the gold set>, fingerprint: <its hash>}")
        return None
    spec_path = root / str(live["path"])
    try:
        spec = load_spec(spec_path)
    except SpecError as exc:
        problem(("live", "path"), f"cannot load the live spec {spec_path}: {str(exc).splitlines()[0]}")
        return None
    if spec.fingerprint != live["fingerprint"]:
        problem(("live", "fingerprint"), f"{spec_path} has changed since these cases were built (fingerprint "
                                         f"{spec.fingerprint}, the cases were built on {live['fingerprint']}): "
                                         "rebuild the clean cases (ncp calibrate --from-playthroughs), re-read the "
                                         "edited ones against the spec, then restamp")
        return None
    return spec


def _ids(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _point(pid: str, raw: Any, spec: NarrativeSpec, problem: Any) -> Point | None:
    if not isinstance(raw, dict):
        problem((), "a point is a mapping (turn, node, ...)")
        return None
    for key in sorted(set(raw) - _POINT_KEYS):
        problem((key,), f"unknown field (valid: {', '.join(sorted(_POINT_KEYS))})")
    nodes = [n.id for n in spec.trajectory]
    node = raw.get("node")
    if node not in nodes:
        problem(("node",), f"{node!r} names no trajectory node of {spec.id} (known: {', '.join(nodes)})")
        return None
    turn = raw.get("turn")
    if not isinstance(turn, int) or isinstance(turn, bool) or turn < 1:
        problem(("turn",), f"expected a turn number >= 1, got {turn!r}")
        return None
    added = _timed(raw.get("added") or {}, turn, ("added",), problem, texts=True)
    negated = _timed(raw.get("negated"), turn, ("negated",), problem, texts=False)
    if added is None or negated is None:
        return None
    ledger = FactLedger.from_initial((f.id, f.text) for f in spec.initial_facts)
    for fid, text, at in added:
        got = ledger.add(text, at).id
        if got != fid:
            problem(("added", fid), f"the ledger gives this fact the id {got!r}, not {fid!r} (ids follow the "
                                    "initial facts in order)")
            return None
    for fid, at in negated:
        if not ledger.is_active(fid):
            problem(("negated",), f"{fid!r} names no fact of the ledger at this point")
            return None
        if ledger[fid].added_turn > at:
            problem(("negated", fid), f"{fid} is negated at turn {at}, before it was added "
                                      f"(turn {ledger[fid].added_turn})")
            return None
        ledger.negate(fid, at)
    commitments = {c.id for c in spec.commitments}
    states = raw.get("commitments") or {}
    for cid, state in states.items():
        if cid not in commitments or state not in STATES:
            problem(("commitments", cid), f"expected a commitment id of {spec.id} with state {' or '.join(STATES)}"
                                          f" (an episode ends at a violation), got {cid}: {state}")
            return None
    return Point(pid, turn, node, nodes.index(node), bool(raw.get("trigger_done", False)),
                 tuple(added), tuple(negated), tuple(states.items()), raw.get("previous"))


def _timed(raw: Any, turn: int, where: tuple[str, ...], problem: Any, *, texts: bool) -> list[Any] | None:
    """A point's ``added`` ({id: text} or {id: {text, turn}}) or ``negated`` ([id] or {id: turn}) as
    (id, text, turn) or (id, turn) entries, each turn in 0..turn-1; added facts in the order of their turns
    (the ledger numbers them in that order)."""
    if not texts and not isinstance(raw, dict):
        raw = {fid: None for fid in _ids(raw)}
    if not isinstance(raw, dict):
        problem(where, "expected a mapping of fact ids" + (" to texts" if texts else " (or a list of fact ids)"))
        return None
    out: list[Any] = []
    last = 0
    for fid, value in raw.items():
        at: Any = turn - 1
        text: Any = value
        if texts and isinstance(value, dict):
            unknown = sorted(set(value) - {"text", "turn"})
            if unknown:
                problem((*where, str(fid)), f"unknown field {unknown[0]!r} (valid: text, turn)")
                return None
            text, at = value.get("text"), value.get("turn", turn - 1)
        elif not texts and value is not None:
            at = value
        if texts and (not isinstance(text, str) or not text.strip()):
            problem((*where, str(fid)), "expected the fact's text")
            return None
        if not isinstance(at, int) or isinstance(at, bool) or not 0 <= at < turn or (texts and at < last):
            first = last if texts else 0
            problem((*where, str(fid)), f"expected a turn from {first} to {turn - 1} (before the point's turn "
                                        f"{turn}{', in the order facts were added' if texts else ''}), got {at!r}")
            return None
        last = at
        out.append((str(fid), text.strip(), at) if texts else (str(fid), at))
    return out


def _point_ledger(spec: NarrativeSpec, added: Iterable[tuple[str, str, int]],
                  negated: Iterable[tuple[str, int]]) -> FactLedger:
    ledger = FactLedger.from_initial((f.id, f.text) for f in spec.initial_facts)
    for _, text, at in added:
        ledger.add(text, at)
    for fact_id, at in negated:
        ledger.negate(fact_id, at)
    return ledger


def parse_conflict(text: str) -> GoldConflict:
    kind, _, ids = str(text).partition(":")
    return GoldConflict(kind.strip(), tuple(i.strip() for i in ids.split(",") if i.strip()))


def _case(raw: Any, spec: NarrativeSpec, points: Mapping[str, Point], where: str, problem: Any, *,
          live: bool = False) -> GoldCase | None:
    if not isinstance(raw, dict):
        problem((), "a case is a mapping (id, point, input, response, ...)")
        return None
    for key in sorted(set(raw) - _CASE_KEYS):
        problem((key,), f"unknown field (valid: {', '.join(sorted(_CASE_KEYS))})")
    for key in ("id", "input", "response", "why"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            problem((key,), "required text is missing")
            return None
    point = points.get(str(raw.get("point")))
    if point is None:
        problem(("point",), f"{raw.get('point')!r} names no point of this file (known: {', '.join(points)})")
        return None
    case = GoldCase(
        id=raw["id"], spec=spec, point=point, player_input=raw["input"].strip(), response=raw["response"].strip(),
        conflicts=tuple(parse_conflict(c) for c in _ids(raw.get("conflict"))),
        trigger=raw.get("trigger", False), delta=raw.get("delta", False),
        added=tuple(_ids(raw.get("added"))), negated=tuple(_ids(raw.get("negated"))),
        satisfied=tuple(_ids(raw.get("satisfied"))), tags=tuple(_ids(raw.get("tags"))), why=raw["why"].strip(),
        where=where, from_turn=raw.get("from_turn"),
    )
    for message in _label_problems(case):
        problem((), message)
    if case.from_turn is not None or live:
        for message in _playthrough_problems(case, live):
            problem(("from_turn",), message)
    return case


def _playthrough_problems(case: GoldCase, live: bool) -> list[str]:
    """A live spec's case is a playthrough turn (clean) or a minimal edit of one: the turn it comes from
    exists and is the point's turn, an unedited turn is labelled clean, an edited one keeps the edit rules."""
    from .edits import edit_problems

    t = case.from_turn
    turns = case.spec.playthrough or []
    if not live:
        return ["from_turn needs a case file on a live spec (document-level `live`), whose playthrough it names"]
    if not isinstance(t, int) or isinstance(t, bool) or not 1 <= t <= len(turns):
        return [f"expected the playthrough turn the case comes from (1 to {len(turns)}), got {t!r}"]
    if t != case.point.turn:
        return [f"from_turn {t} is not the point's turn {case.point.turn}: the case edits the turn it is audited at"]
    turn = turns[t - 1]
    out: list[str] = []
    if _squash(case.player_input) != _squash(turn.input) and "injection" not in case.tags:
        out.append(f"the input differs from playthrough turn {t}'s {turn.input!r} (only an injection case may "
                   "change it)")
    if _squash(case.response) == _squash(turn.narration):
        if case.violation:
            out.append(f"the response is playthrough turn {t} unchanged, which is clean: a violation edits it")
        return out
    out += [f"not a minimal edit of playthrough turn {t}: {p}" for p in edit_problems(turn.narration, case.response)]
    return out


def dropped_negations(case: GoldCase) -> list[str]:
    """Facts the case's playthrough turn negates by a sentence the edit keeps, yet the case does not negate: a
    label an edit most likely lost when it was copied from its turn (the turn's negation still holds)."""
    turns = case.spec.playthrough or []
    if case.from_turn is None or not 1 <= case.from_turn <= len(turns):
        return []
    response = _squash(case.response)
    return [n.fact_id for n in turns[case.from_turn - 1].facts_negated or ()
            if _squash(n.quote) in response and n.fact_id not in case.negated]


def _label_problems(case: GoldCase) -> list[str]:
    """Labels that cannot be right for this case's spec, point and response."""
    out: list[str] = []
    spec = case.spec
    active = {f.id for f in case.ledger().active()}
    kinds = {c.id: c.kind for c in spec.all_commitments}  # a world rule (W1, ...) can be broken too
    states = case.commitment_states()
    for c in case.conflicts:
        if c.type not in CONFLICT_TYPES:
            out.append(f"conflict: unknown type {c.type!r} (valid: {', '.join(CONFLICT_TYPES)})")
        elif c.type == "fact":
            bad = [i for i in c.ids if i not in active]
            if not c.ids or bad:
                out.append(f"conflict {c}: a fact conflict names active fact ids of the point "
                           f"({'unknown: ' + ', '.join(bad) if bad else 'none given'})")
        elif c.type == "commitment":
            bad = [i for i in c.ids if i not in kinds or states.get(i) != "PENDING"]
            if not c.ids or bad:
                out.append(f"conflict {c}: a commitment conflict names pending commitment ids "
                           f"({'not pending or unknown: ' + ', '.join(bad) if bad else 'none given'})")
        elif c.ids:
            out.append(f"conflict {c}: a player_input conflict names no ids")
    if len({c.type for c in case.conflicts}) != len(case.conflicts):
        out.append("conflict: one entry per type (list every id in it)")
    for name in ("trigger", "delta"):
        if not isinstance(getattr(case, name), bool):
            out.append(f"{name}: expected true or false")
    if case.delta and not (case.trigger or case.point.trigger_done):
        out.append("delta: the key delta cannot happen before the trigger (set trigger, or trigger_done on the point)")
    if case.trigger and case.point.trigger_done:
        out.append("trigger: the point says the trigger already happened; label only what this response does")
    for q in case.added:  # the auditor's own rule: a verbatim, substantial span of the response
        problem = check_quote(q, case.response)
        if problem:
            out.append(f"added: {problem}")
    for fid in case.negated:
        if fid not in active:
            out.append(f"negated: {fid!r} is not an active fact at this point")
    pending = case.pending()
    for cid in case.satisfied:
        if cid not in pending:
            out.append(f"satisfied: {cid!r} is not a pending achievement or ordering at this point")
    unknown = [t for t in case.tags if t not in HARD_TAGS]
    if unknown:
        out.append(f"tags: unknown {', '.join(unknown)} (valid: {', '.join(HARD_TAGS)})")
    return out


def _check_set(gold: GoldSet) -> None:
    first: dict[str, str] = {}
    keys: dict[tuple[Any, ...], str] = {}
    for case in gold.cases:
        if case.id in first:
            gold.problems.append(f"{case.where}: id: duplicate case id {case.id!r} (first at {first[case.id]})")
        first.setdefault(case.id, case.where)
        # Scripted auditors (and people reading a report) tell cases apart by what the prompts show.
        if case.key() in keys:
            gold.problems.append(f"{case.where}: the same turn, input and response as case {keys[case.key()]}; "
                                 "give the point another turn number or change the text")
        keys.setdefault(case.key(), case.id)


# --- balance -----------------------------------------------------------------------------------------


def balance(cases: Iterable[GoldCase]) -> dict[str, Any]:
    cases = list(cases)
    n = len(cases)
    per_type = {t: sum(t in c.conflict_types for c in cases) for t in CONFLICT_TYPES}
    clean_cases = [c for c in cases if not c.violation]
    clean = len(clean_cases)
    tags = collections.Counter(t for c in cases for t in c.tags)
    per_spec = collections.Counter(c.spec.id for c in cases)
    return {
        "cases": n, "specs": len(per_spec), "clean": clean, "clean_share": clean / n if n else 0.0,
        "violations": n - clean, "per_type": per_type, "per_spec": dict(sorted(per_spec.items())),
        "tags": {t: tags.get(t, 0) for t in HARD_TAGS},
        # The other steps are scored on clean cases only (an episode ignores them after a confirmed conflict).
        "labels": {"trigger": sum(c.trigger for c in clean_cases), "delta": sum(c.delta for c in clean_cases),
                   "advanced": sum(c.advanced for c in clean_cases),
                   "added": sum(len(c.added) for c in clean_cases),
                   "negated": sum(len(c.negated) for c in clean_cases),
                   "satisfied": sum(len(c.satisfied) for c in clean_cases)},
    }


def balance_lines(b: Mapping[str, Any]) -> list[str]:
    def mark(ok: bool) -> str:
        return "ok" if ok else "BELOW TARGET"

    lines = [
        f"cases {b['cases']} (target {TARGETS['cases']}: {mark(b['cases'] >= TARGETS['cases'])}), "
        f"specs {b['specs']} (target {TARGETS['specs']}: {mark(b['specs'] >= TARGETS['specs'])})",
        f"clean {b['clean']} = {b['clean_share']:.0%} (target {TARGETS['clean_share']:.0%}: "
        f"{mark(b['clean_share'] >= TARGETS['clean_share'])}), violations {b['violations']}",
        "conflict types: " + ", ".join(f"{t} {k} ({mark(k >= TARGETS['per_type'])})" for t, k in b["per_type"].items()),
        "hard cases: " + ", ".join(f"{t} {k}" + ("" if k else " (NONE)") for t, k in b["tags"].items()),
        "labels of clean cases (where the other steps are scored): " + ", ".join(f"{k} {v}" for k, v in b["labels"].items()),
        "per spec: " + ", ".join(f"{s} {k}" for s, k in b["per_spec"].items()),
    ]
    return lines
