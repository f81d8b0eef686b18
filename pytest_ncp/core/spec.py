"""Narrative specs: the pydantic models of the public YAML format, and loading with file:line errors.

A spec is one narrative environment (DESIGN section 2). The YAML field names are the public format;
``ncp schema`` prints the JSON Schema produced from these models.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from .findings import Finding
from .ledger import FactLedger
from .quotes import check_quote, words
from .terms import COMMITMENT_KINDS, GENRES, ID_MAX_LENGTH, ID_PATTERN, MEDIA
from .world_rules import default_rules

Id = Field(pattern=ID_PATTERN, min_length=1, max_length=ID_MAX_LENGTH)
# Words per playthrough narration: long enough to be a real narrator turn, short enough to read.
NARRATION_WORDS = (80, 250)


class _Model(BaseModel):
    # Unknown keys are typos far more often than extensions: reject them so they are reported.
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Model):
    work: str = Field(min_length=1, description="Title of the film, book or play the spec retells.")
    year: int = Field(ge=1000, le=2100)
    medium: Literal[MEDIA]  # type: ignore[valid-type]
    public_domain: str | None = Field(
        default=None, min_length=1,
        description="Why the work, and any work it adapts (a film's novel, a play's story), is free to use: "
                    "e.g. 'US public domain: published 1925, before 1930' or 'copyright not renewed (1948 film); "
                    "the 1939 novel ...'. Optional for the schema; `ncp lint` flags a spec without it.",
    )


class PlayerCharacter(_Model):
    name: str = Field(min_length=1)
    briefing: str = Field(min_length=1, description="Everything the player may know at the start.")


class Fact(_Model):
    id: str = Id
    text: str = Field(min_length=1)


class Commitment(_Model):
    id: str = Id
    kind: Literal[COMMITMENT_KINDS]  # type: ignore[valid-type]
    text: str = Field(min_length=1)
    before: str | None = Field(
        default=None, description="For orderings: the trajectory node (or event) that must come first."
    )
    after: str | None = Field(
        default=None, description="For orderings: the trajectory node (or event) that must come later."
    )
    depends_on: list[str] = Field(
        default_factory=list,
        description="Ids of the initial facts and trajectory nodes this commitment is about; an achievement "
        "names the node(s) whose completion satisfies it.",
    )


class TrajectoryNode(_Model):
    id: str = Id
    description: str = Field(min_length=1)
    trigger_event: str = Field(min_length=1)
    key_delta: str = Field(min_length=1)


class IndependentRead(_Model):
    """A reader who wrote neither the playthrough nor the fixes read both against the spec and its sources."""

    reader: str = Field(min_length=1, description="Who read it (a person or a named model); not its writer.")
    date: _dt.date | None = None
    verdict: Literal["accepted", "changes-requested"]
    findings: list[str] = Field(default_factory=list, description="What the reader found, one item each.")


class Review(_Model):
    """Who read the spec against which checklist, what they found and what was changed.

    A reviewer is a fresh reader (a person or a named model) who did not write the spec.
    """

    status: Literal["draft", "reviewed"] = "draft"
    reviewer: str | None = Field(default=None, description="Who or what reviewed the spec; not its author.")
    date: _dt.date | None = None
    checklist: list[str] = Field(
        default_factory=list,
        description="The checks the reviewer made: lint rule names and REVIEW_CHECKS items (docs/specs.md).",
    )
    findings: list[str] = Field(default_factory=list, description="What the review found, one item each.")
    fixes: list[str] = Field(default_factory=list, description="What was changed because of the findings.")
    sources: list[str] = Field(
        default_factory=list,
        description="What the spec was checked against: each a stored public plot summary named with its address, "
                    "or 'none found: searched <where>'.")
    independent_read: IndependentRead | None = Field(
        default=None, description="The read of the playthrough and the fixes by someone who wrote neither.")
    notes: str | None = None


class PlaythroughFact(_Model):
    text: str = Field(min_length=1, description="The new ledger fact, as the auditor would record it.")
    quote: str = Field(min_length=1, description="A verbatim span of the turn's narration that establishes it.")


class PlaythroughNegation(_Model):
    fact_id: str = Field(pattern=ID_PATTERN, min_length=1, max_length=ID_MAX_LENGTH,
                         description="A fact of the ledger at this turn (an initial fact, or one an earlier turn added).")
    quote: str = Field(min_length=1, description="A verbatim span of the turn's narration that makes it untrue.")


class PlaythroughTurn(_Model):
    """One turn of a reference playthrough: a scripted input and what an ideal narrator answers, with its labels."""

    input: str = Field(min_length=1, description="The scripted input of this turn, verbatim.")
    narration: str = Field(min_length=1, description=f"The ideal narrator's answer: second person, "
                                                     f"{NARRATION_WORDS[0]}-{NARRATION_WORDS[1]} words.")
    advances: str | None = Field(default=None, description="The trajectory node whose key delta this turn shows.")
    trigger_quote: str | None = Field(
        default=None, description="Verbatim span showing the node's trigger (omit when an earlier turn showed it).")
    key_delta_quote: str | None = Field(
        default=None, description="Verbatim span showing the node's key delta; required with `advances`.")
    facts_added: list[PlaythroughFact] = Field(default_factory=list)
    facts_negated: list[PlaythroughNegation] = Field(default_factory=list)
    satisfies: list[str] = Field(default_factory=list,
                                 description="Ids of the achievements and orderings whose condition this turn meets.")


class WorldRules(_Model):
    """Per-spec changes to the shared default world rules (pytest_ncp/world_rules.yaml)."""

    drop: list[str] = Field(
        default_factory=list, description="Ids of default world rules that do not hold in this story (e.g. W1 "
                                          "where the dead walk).")
    replace: dict[str, str] = Field(
        default_factory=dict, description="Default world rule id -> this story's wording of it.")


def rules_in_force(overrides: WorldRules | None) -> list[Commitment]:
    """The default world rules minus those a spec drops, with its rewordings, as invariant commitments."""
    drop = set(overrides.drop) if overrides else set()
    replace = dict(overrides.replace) if overrides else {}
    return [Commitment(id=r.id, kind="invariant", text=replace.get(r.id, r.text))
            for r in default_rules() if r.id not in drop]


class NarrativeSpec(_Model):
    """One narrative environment: the story, its starting ledger, its rules and its plot steps."""

    id: str = Id
    title: str = Field(min_length=1)
    source: Source
    genres: list[Literal[GENRES]] = Field(  # type: ignore[valid-type]
        min_length=2, max_length=2, description="Primary and secondary genre, from the fixed list of 18."
    )
    player: PlayerCharacter
    synopsis: str = Field(min_length=1, description="The story as the narrator knows it; the player never sees it.")
    initial_facts: list[Fact] = Field(min_length=1)
    commitments: list[Commitment] = Field(min_length=1)
    trajectory: list[TrajectoryNode] = Field(min_length=1)
    scripted_inputs: list[str] = Field(default_factory=list)
    world_rules: WorldRules | None = Field(
        default=None, description="Drop or reword the shared default world rules (W1, W2, ...) for this story.")
    playthrough: list[PlaythroughTurn] | None = Field(
        default=None, description="The reference playthrough: one turn per scripted input, what an ideal narrator "
                                  "answers, labelled with the node it advances, the facts and the commitments.")
    review: Review | None = None

    # Where the spec came from, for file:line in headlines and errors (not part of the format).
    _path: str | None = PrivateAttr(default=None)
    _lines: dict[tuple[Any, ...], int] = PrivateAttr(default_factory=dict)
    _world: list[Commitment] | None = PrivateAttr(default=None)

    @field_validator("genres")
    @classmethod
    def _distinct_genres(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("primary and secondary genre must differ")
        return value

    # --- lookups used across the engine -------------------------------------------------------
    @property
    def achievements(self) -> list[Commitment]:
        return [c for c in self.commitments if c.kind == "achievement"]

    @property
    def world_rule_commitments(self) -> list[Commitment]:
        """The shared default world rules in force for this spec, as invariants (ids W1, W2, ...)."""
        if self._world is None:
            self._world = rules_in_force(self.world_rules)
        return list(self._world)

    @property
    def all_commitments(self) -> list[Commitment]:
        """What the auditor judges: the default world rules in force, then the spec's own commitments."""
        return [*self.world_rule_commitments, *self.commitments]

    def commitment_location(self, commitment_id: str) -> str:
        """Where a commitment is written: ``path:line`` in the spec, or the world rules file for a default."""
        own = [c.id for c in self.commitments]
        if commitment_id in own:
            return self.location("commitments", own.index(commitment_id))
        if self.world_rules and commitment_id in self.world_rules.replace:
            return self.location("world_rules", "replace", commitment_id)
        return f"pytest_ncp/world_rules.yaml ({commitment_id}, a default world rule)"

    def commitment(self, commitment_id: str) -> Commitment:
        for c in self.all_commitments:
            if c.id == commitment_id:
                return c
        raise KeyError(commitment_id)

    @property
    def complete(self) -> bool:
        """A benchmark spec proven and read: a playthrough (accepted at load), sources named, and an independent
        read that accepted it."""
        r = self.review
        return bool(self.playthrough and r and r.sources and r.independent_read
                    and r.independent_read.verdict == "accepted")

    def _hashed(self) -> dict[str, Any]:
        # A spec without a playthrough hashes as it did before the field existed, so recorded runs still resume.
        exclude = {"review"} if self.playthrough is not None else {"review", "playthrough"}
        return self.model_dump(mode="json", exclude=exclude)

    @property
    def fingerprint(self) -> str:
        """Hash of what an episode depends on (everything but the ``review`` record): ``--resume`` keeps an
        episode only when its spec still has this fingerprint."""
        import hashlib
        import json

        data = self._hashed()
        return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]

    @property
    def section_fingerprints(self) -> dict[str, str]:
        """A short hash per top-level field (``review`` aside), recorded in traces so that a forked
        episode whose spec changed can say which parts changed, not only that the whole hash differs."""
        import hashlib
        import json

        data = self._hashed()
        return {k: hashlib.sha256(json.dumps(v, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:12]
                for k, v in sorted(data.items())}

    @property
    def path(self) -> str | None:
        """File the spec was loaded from (None when built in code)."""
        return self._path

    def line_of(self, *field_path: str | int) -> int | None:
        """1-based line of a field in the YAML file, when the spec was loaded from one."""
        return _nearest_line(self._lines, tuple(field_path)) if self._lines else None

    def location(self, *field_path: str | int) -> str:
        """``path:line`` of a field, for headlines and error messages."""
        if self.path is None:
            return f"<spec {self.id}>"
        line = self.line_of(*field_path) if field_path else None
        return f"{self.path}:{line}" if line else self.path


@dataclass(frozen=True)
class SpecProblem(Finding):
    path: str
    line: int | None
    field: str
    message: str

    @property
    def what(self) -> str:
        return self.field


class SpecError(Exception):
    """One or more problems in one spec file; ``str()`` lists them as ``path:line: field: message``."""

    def __init__(self, problems: Sequence[SpecProblem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


# --- loading ----------------------------------------------------------------------------------


def load_spec(path: str | Path) -> NarrativeSpec:
    """Load and validate one spec file; raises SpecError listing every problem found."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError([SpecProblem(str(path), None, "<file>", f"cannot read: {exc.strerror or exc}")]) from None
    return parse_spec(text, str(path))


def parse_spec(text: str, path: str = "<string>") -> NarrativeSpec:
    import yaml  # deferred: the plugin imports this module, and yaml is not needed until a spec is read

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser, when libyaml is there: ~5x faster
    try:
        node = yaml.compose(text, Loader=loader)
        data = yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError([SpecProblem(path, line, "<yaml>", f"invalid YAML: {problem}")]) from None
    if not isinstance(data, dict):
        raise SpecError([SpecProblem(path, 1, "<root>", "a spec must be a mapping of fields (id, title, ...)")])
    lines = _line_map(node)
    problems: list[SpecProblem] = []
    try:
        spec = NarrativeSpec.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            loc = tuple(err["loc"])
            problems.append(SpecProblem(path, _nearest_line(lines, loc), _field_name(loc), _message(err)))
        problems.extend(_cross_checks(data, path, lines))
        raise SpecError(sorted(_dedupe(problems), key=lambda p: p.line or 0)) from None
    problems = _cross_checks(data, path, lines)
    if not problems and spec.playthrough is not None:
        problems = _playthrough_problems(spec, path, lines)
    if problems:
        raise SpecError(sorted(problems, key=lambda p: p.line or 0))
    spec._path = path
    spec._lines = lines
    return spec


def spec_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files and directories into a sorted list of spec files (``*.yaml`` / ``*.yml``)."""
    found: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found.update(q for q in p.rglob("*") if q.suffix in (".yaml", ".yml") and q.is_file())
        elif p.exists():
            found.add(p)
        else:
            raise SpecError([SpecProblem(str(p), None, "<file>", "no such file or directory")])
    return sorted(found)


def load_specs(paths: Iterable[str | Path]) -> tuple[list[NarrativeSpec], list[SpecError]]:
    """Load every spec under ``paths``; bad files are returned as errors, good ones still load."""
    specs: list[NarrativeSpec] = []
    errors: list[SpecError] = []
    seen: dict[str, str] = {}
    for f in spec_files(paths):
        try:
            spec = load_spec(f)
        except SpecError as exc:
            errors.append(exc)
            continue
        if spec.id in seen:
            errors.append(SpecError([SpecProblem(str(f), spec.line_of("id"), "id",
                                                 f"duplicate spec id {spec.id!r} (also in {seen[spec.id]})")]))
            continue
        seen[spec.id] = str(f)
        specs.append(spec)
    return specs, errors


def spec_json_schema() -> dict[str, Any]:
    schema = NarrativeSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "NCP narrative spec"
    return schema


# --- checks pydantic cannot express ------------------------------------------------------------


def _cross_checks(data: dict[str, Any], path: str, lines: dict[tuple[Any, ...], int]) -> list[SpecProblem]:
    problems: list[SpecProblem] = []

    def add(loc: tuple[Any, ...], message: str) -> None:
        problems.append(SpecProblem(path, _nearest_line(lines, loc), _field_name(loc), message))

    def items(key: str) -> list[tuple[int, dict[str, Any]]]:
        value = data.get(key)
        return [(i, v) for i, v in enumerate(value) if isinstance(v, dict)] if isinstance(value, list) else []

    for key in ("initial_facts", "commitments", "trajectory"):
        first: dict[str, int] = {}
        for i, item in items(key):
            ident = item.get("id")
            if not isinstance(ident, str):
                continue
            if ident in first:
                add((key, i, "id"), f"duplicate id {ident!r} (first used at {key}[{first[ident]}])")
            else:
                first[ident] = i

    nodes = {n.get("id") for _, n in items("trajectory")}
    facts = {f.get("id") for _, f in items("initial_facts")}
    commitments = items("commitments")
    for i, c in commitments:
        deps = c.get("depends_on")
        for j, ref in enumerate(deps if isinstance(deps, list) else []):
            if ref not in nodes and ref not in facts:
                add(("commitments", i, "depends_on", j),
                    f"{ref!r} names no initial fact or trajectory node (known: {_known(facts | nodes)})")
        for end in ("before", "after"):
            ref = c.get(end)
            if ref is not None and ref not in nodes:
                add(("commitments", i, end), f"{ref!r} names no trajectory node (known: {_known(nodes)})")
        if c.get("kind") == "ordering" and not (c.get("before") and c.get("after")):
            add(("commitments", i), "an ordering commitment needs both `before` and `after` (trajectory node ids)")
    if isinstance(data.get("commitments"), list) and not any(c.get("kind") == "achievement" for _, c in commitments):
        add(("commitments",), "a spec needs at least one `achievement` commitment (the run succeeds when all are met)")
    _check_world_rules(data, add, commitments)
    return problems


def _check_world_rules(data: dict[str, Any], add: Any, commitments: list[tuple[int, dict[str, Any]]]) -> None:
    defaults = {r.id for r in default_rules()}
    overrides = data.get("world_rules")
    if isinstance(overrides, dict):
        for key in ("drop", "replace"):
            value = overrides.get(key)
            for j, ref in enumerate(value if isinstance(value, (list, dict)) else []):
                if ref not in defaults:
                    loc = ("world_rules", key, j) if key == "drop" else ("world_rules", key, ref)
                    add(loc, f"{ref!r} names no default world rule (known: {_known(defaults)})")
    for i, c in commitments:
        if c.get("id") in defaults:
            add(("commitments", i, "id"), f"id {c.get('id')!r} is taken by a default world rule; "
                                          f"use another id (C1, C2, ...)")


def _playthrough_problems(spec: NarrativeSpec, path: str, lines: dict[tuple[str | int, ...], int]) -> list[SpecProblem]:
    """A playthrough proves its spec winnable: one turn per scripted input, every node advanced once and in
    order with its key delta quoted from that turn, every quote verifiable by the auditor's own matcher, and
    every achievement met by the end."""
    problems: list[SpecProblem] = []

    def add(loc: tuple[str | int, ...], message: str) -> None:
        problems.append(SpecProblem(path, _nearest_line(lines, loc), _field_name(loc), message))

    turns = spec.playthrough or []
    inputs = spec.scripted_inputs
    if len(turns) != len(inputs):
        add(("playthrough",), f"has {len(turns)} turn(s) but scripted_inputs has {len(inputs)}: one turn per "
                              "scripted input, in order (trim the script where the story has ended)")
    nodes = [n.id for n in spec.trajectory]
    own = {c.id: c for c in spec.commitments}
    ledger = FactLedger.from_initial((f.id, f.text) for f in spec.initial_facts)
    advanced: dict[str, int] = {}   # node id -> turn
    satisfied: dict[str, int] = {}  # commitment id -> turn
    low, high = NARRATION_WORDS
    for i, turn in enumerate(turns):
        t = i + 1
        at: tuple[str | int, ...] = ("playthrough", i)
        if i < len(inputs) and turn.input.strip() != inputs[i].strip():
            add((*at, "input"), f"turn {t} input differs from scripted_inputs[{i}] {inputs[i]!r}: copy it verbatim")
        count = words(turn.narration)
        if not low <= count <= high:
            add((*at, "narration"), f"turn {t} narration has {count} words; a reference narration has {low}-{high}")

        def quote(loc: tuple[str | int, ...], text: str, what: str) -> None:
            problem = check_quote(text, turn.narration)
            if problem:
                add(loc, f"turn {t} {what}: {problem.replace('the narrator' + chr(39) + 's response', 'the narration')}")

        if turn.advances is None:
            # A trigger_quote without `advances` labels the trigger of the next node, shown turns before its delta.
            if turn.key_delta_quote is not None:
                add((*at, "key_delta_quote"), f"turn {t} has a key_delta_quote but advances no node: add "
                                              "`advances: <node id>`")
            if turn.trigger_quote is not None:
                if len(advanced) >= len(nodes):
                    add((*at, "trigger_quote"), f"turn {t} has a trigger_quote but every node is already advanced")
                else:
                    quote((*at, "trigger_quote"), turn.trigger_quote, "trigger_quote")
        else:
            expected = nodes[len(advanced)] if len(advanced) < len(nodes) else None
            if turn.advances not in nodes:
                add((*at, "advances"), f"{turn.advances!r} names no trajectory node (known: {', '.join(nodes)})")
            elif turn.advances in advanced:
                add((*at, "advances"), f"node {turn.advances!r} is already advanced at turn {advanced[turn.advances]}: "
                                       "each node advances exactly once")
            elif turn.advances != expected:
                add((*at, "advances"), f"turn {t} advances {turn.advances!r} but the next node in trajectory order "
                                       f"is {expected!r}: nodes advance in order")
            if turn.advances in nodes:
                advanced.setdefault(turn.advances, t)
            if turn.key_delta_quote is None:
                add((*at, "advances"), f"turn {t} advances {turn.advances!r} without a key_delta_quote: quote the "
                                       "narration where the key delta happens")
            else:
                quote((*at, "key_delta_quote"), turn.key_delta_quote, "key_delta_quote")
            if turn.trigger_quote is not None:
                quote((*at, "trigger_quote"), turn.trigger_quote, "trigger_quote")
        for j, fact in enumerate(turn.facts_added):
            quote((*at, "facts_added", j, "quote"), fact.quote, "facts_added quote")
            ledger.add(fact.text, t)
        for j, neg in enumerate(turn.facts_negated):
            quote((*at, "facts_negated", j, "quote"), neg.quote, "facts_negated quote")
            if neg.fact_id not in ledger:
                add((*at, "facts_negated", j, "fact_id"), f"{neg.fact_id!r} names no fact of the ledger at turn {t} "
                                                          "(the initial facts, then those earlier turns added)")
            elif not ledger.is_active(neg.fact_id):
                add((*at, "facts_negated", j, "fact_id"), f"{neg.fact_id!r} is already negated before turn {t}")
            else:
                ledger.negate(neg.fact_id, t)
        for j, cid in enumerate(turn.satisfies):
            loc = (*at, "satisfies", j)
            c = own.get(cid)
            if c is None or c.kind == "invariant":
                kinds = [k for k, v in own.items() if v.kind != "invariant"]
                add(loc, f"{cid!r} names no achievement or ordering of this spec (known: {', '.join(kinds) or 'none'})")
            elif cid in satisfied:
                add(loc, f"{cid} is already satisfied at turn {satisfied[cid]}")
            else:
                satisfied[cid] = t
                late = [d for d in c.depends_on if d in nodes and advanced.get(d, t + 1) > t]
                if c.kind == "achievement" and late:
                    add(loc, f"{cid} is satisfied at turn {t}, before the node(s) it depends on advance: "
                             f"{', '.join(late)}")
    missing = [n for n in nodes if n not in advanced]
    if turns and missing:
        add(("playthrough",), f"node(s) never advanced: {', '.join(missing)}: every trajectory node advances once, "
                              "with its key delta shown (fix the spec or the script, not the playthrough)")
    unmet = [c.id for c in spec.achievements if c.id not in satisfied]
    if turns and unmet:
        add(("playthrough",), f"achievement(s) never satisfied: {', '.join(unmet)}: the playthrough wins the story "
                              "by its end (label the turn in `satisfies`)")
    return problems


def _known(ids: set[Any]) -> str:
    names = sorted(i for i in ids if isinstance(i, str))
    return ", ".join(names) if names else "none"


# --- line numbers ------------------------------------------------------------------------------


def _line_map(node: Any, prefix: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """Map every field path (``("commitments", 2, "kind")``) to its 1-based line in the YAML text."""
    import yaml

    lines: dict[tuple[Any, ...], int] = {}
    if node is None:
        return lines
    lines[prefix] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            path = prefix + (key.value,)
            lines.update(_line_map(value, path))
            lines[path] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, value in enumerate(node.value):
            lines.update(_line_map(value, prefix + (i,)))
    return lines


def _nearest_line(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int | None:
    while True:
        if loc in lines:
            return lines[loc]
        if not loc:
            return None
        loc = loc[:-1]


def _field_name(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<root>"


def _message(err: Mapping[str, Any]) -> str:
    kind = err.get("type")
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field (check the spelling; `ncp schema` lists the fields)"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return f"got {err.get('input')!r}; expected one of {expected}"
    return str(err.get("msg", "invalid value"))


def _dedupe(problems: list[SpecProblem]) -> list[SpecProblem]:
    seen: set[tuple[int | None, str, str]] = set()
    out = []
    for p in problems:
        key = (p.line, p.field, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
