"""Drafting: the request, the strict answer schema, the prompt, and the model's answer assembled into a spec."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..core.terms import GENRES, ID_MAX_LENGTH, ID_PATTERN
from ..llm.structured import NoValidAnswer, ask_json, strip_fences
from .clean import name_parts, title_key
from .layout import render_spec_yaml
from .review import spec_problems

if TYPE_CHECKING:
    from ..llm import Completion, ModelClient, Role

DRAFT_STEP = "spec_draft"
DRAFT_ROLE: Role = "author"  # not narrator, player or auditor: sent as X-NCP-Role so a scripted server can tell
# Spec fields the command fills from what it already knows (or leaves to people: world_rules); the
# model writes the rest.
OWN_FIELDS: tuple[str, ...] = ("id", "title", "source", "genres", "review", "world_rules")
# Lint rules about facts only the person drafting knows; the model is not asked to fix them.
AUTHOR_RULES: tuple[str, ...] = ("missing-public-domain",)
PROSE_FIELDS: tuple[tuple[str, ...], ...] = (("player", "briefing"), ("synopsis",))
_ID = re.compile(ID_PATTERN)
# JSON-Schema keywords that strict structured outputs reject or that only restate what validation
# checks anyway (the validator, not the decoder, is the judge: its messages name the field).
_UNSTRICT_KEYWORDS = frozenset({"title", "default", "pattern", "minLength", "maxLength", "minItems", "maxItems",
                                "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})


@dataclass(frozen=True)
class DraftRequest:
    spec_id: str
    title: str
    year: int
    character: str
    synopsis: str
    genres: tuple[str, str] | None = None  # None: the model chooses
    medium: str = "film"
    public_domain: str | None = None  # source.public_domain; the person drafting knows it, not the model


def slug(text: str) -> str:
    s = "-".join(re.sub(r"[^a-z0-9]+", " ", title_key(text).encode("ascii", "ignore").decode()).split())[:64]
    s = s.strip("-")
    return s if s[:1].isalpha() else f"spec-{s}".strip("-")


def check_spec_id(spec_id: str) -> str | None:
    """Why ``spec_id`` cannot be a spec id, or None."""
    if not _ID.match(spec_id) or len(spec_id) > ID_MAX_LENGTH:
        return (f"{spec_id!r} is not a valid spec id (a letter, then letters, digits, '_', '.' or '-'; at most "
                "64 characters): name the output file after the id, e.g. specs/my-film.yaml")
    return None


def parse_genres(text: str) -> tuple[str, str]:
    """``"Horror,Mystery"`` -> ("Horror", "Mystery"); ValueError naming the valid genres otherwise."""
    lookup = {g.lower(): g for g in GENRES}
    parts = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in parts if p.lower() not in lookup]
    if unknown or len(parts) != 2 or parts[0].lower() == parts[1].lower():
        raise ValueError(f"--genres needs two different genres from: {', '.join(GENRES)} (got {text!r})")
    return (lookup[parts[0].lower()], lookup[parts[1].lower()])


def draft_schema(*, with_genres: bool = False) -> dict[str, Any]:
    """The strict JSON schema of a draft answer, derived from the spec models.

    Deriving it (instead of writing it by hand) keeps it in step with spec.py: a new spec field shows
    up here. Strict structured outputs need every property required, no additional properties and no
    ``$ref``; optional fields stay nullable (``before``/``after``) or may be empty lists.
    """
    from ..core.spec import NarrativeSpec

    full = NarrativeSpec.model_json_schema()
    defs = full.get("$defs", {})

    def strict(node: Any) -> Any:
        if isinstance(node, list):
            return [strict(n) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return strict(defs[node["$ref"].rsplit("/", 1)[-1]])
        out = {k: strict(v) for k, v in node.items() if k not in _UNSTRICT_KEYWORDS and k != "$defs"}
        if out.get("type") == "object" and "properties" in out:
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out

    properties = {k: strict(v) for k, v in full["properties"].items() if k not in OWN_FIELDS}
    if with_genres:
        properties = {"genres": {"type": "array", "items": {"type": "string", "enum": list(GENRES)},
                                 "description": "Primary and secondary genre (two different ones)."},
                      **properties}
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def draft_response_format(request: DraftRequest) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {
        "name": DRAFT_STEP, "schema": draft_schema(with_genres=request.genres is None), "strict": True}}


def draft_messages(request: DraftRequest, *, problems: Sequence[str] = (), previous: str | None = None,
                   template: str | Path = "spec_draft") -> list[dict[str, str]]:
    """Chat messages asking for a draft; on a retry they carry the previous draft and its problems."""
    from ..prompts import render

    return render(template, default_role="user", request=request, genres_list=GENRES,
                  problems=list(problems), previous=previous)


def parse_draft_answer(text: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The model's JSON answer as a dict, or None and the problem to tell it."""
    try:
        answer = json.loads(strip_fences(text))
    except ValueError as exc:
        return None, [f"the answer is not valid JSON ({exc}); answer with one JSON object only"]
    if not isinstance(answer, dict):
        return None, [f"the answer must be a JSON object with the spec fields, got {type(answer).__name__}"]
    return answer, []


def assemble_spec(request: DraftRequest, answer: Mapping[str, Any]) -> dict[str, Any]:
    """The spec as data, in the field order of the bundled specs, marked as a draft for review.

    Fields the command knows (id, title, source, the given genres) are never taken from the model.
    """
    genres = list(request.genres) if request.genres else answer.get("genres")
    data: dict[str, Any] = {
        "id": request.spec_id, "title": request.title,
        "source": {"work": request.title, "year": request.year, "medium": request.medium,
                   **({"public_domain": request.public_domain} if request.public_domain else {})},
        "genres": genres,
    }
    for key in ("player", "synopsis", "initial_facts", "commitments", "trajectory", "scripted_inputs"):
        if key in answer:
            data[key] = answer[key]
    # Unknown keys are kept so validation reports them to the model instead of their vanishing.
    for key, value in answer.items():
        if key not in data and key not in OWN_FIELDS:
            data[key] = value
    for commitment in data.get("commitments") or []:
        if isinstance(commitment, dict):
            # Strict schemas make every field present; absent optional fields read better than nulls.
            for opt in ("before", "after"):
                if opt in commitment and commitment[opt] is None:
                    del commitment[opt]
            if commitment.get("depends_on") == []:
                del commitment["depends_on"]
    data["review"] = {"status": "draft"}
    return _normalise_prose(data)


def _normalise_prose(data: dict[str, Any]) -> dict[str, Any]:
    """Re-flow the long prose fields: whitespace collapsed, one newline between paragraphs.

    That is exactly what a folded block scalar (``>``) can hold, so the file reads like the bundled
    specs and the value loaded back from it is the value that was validated.
    """
    for path in PROSE_FIELDS:
        holder: Any = data
        for key in path[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and isinstance(holder.get(path[-1]), str):
            paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", holder[path[-1]])]
            text = "\n".join(p for p in paragraphs if p)
            holder[path[-1]] = text + "\n" if text else ""
    return data


def draft_problems(text: str, path: str, request: DraftRequest) -> list[str]:
    """Everything wrong with a rendered draft that the model can fix: validation, lint, the player it must be."""
    spec, problems, _notices = spec_problems(text, path)
    problems = [p for p in problems if not any(f": {rule}: " in p for rule in AUTHOR_RULES)]
    if spec is not None:
        wanted = {p.casefold() for p in name_parts(request.character) or [request.character]}
        got = {p.casefold() for p in name_parts(spec.player.name) or [spec.player.name]}
        if not wanted & got:
            line = spec.line_of("player", "name")
            problems.insert(0, f"{path}:{line}: player.name: the player must be {request.character!r} "
                               f"(got {spec.player.name!r}); write the spec from that character's point of view")
    return problems


async def draft_spec(client: ModelClient, model: str, request: DraftRequest, path: str, *, attempts: int,
                     report: Callable[[str], Any] = lambda line: None) -> tuple[str | None, list[str]]:
    """Draft, check, and redraft with the problems: (spec YAML, []) on success, (None, last problems) else.

    Each retry shows the model its previous draft (with line numbers) and what is wrong with it;
    ``report`` gets one line per attempt.
    """
    previous: str | None = None

    def parse(completion: Completion) -> tuple[str | None, list[str]]:
        nonlocal previous
        answer, problems = parse_draft_answer(completion.text)
        if answer is None:
            previous = completion.text[:8000]
            return None, problems
        text = render_spec_yaml(assemble_spec(request, answer))
        problems = draft_problems(text, path, request)
        if problems:
            previous = "\n".join(f"{n:>4}  {line}" for n, line in enumerate(text.splitlines(), 1))
            return None, problems
        return text, []

    def retry(messages: list[dict[str, Any]], completion: Completion, problems: list[str]) -> list[dict[str, Any]]:
        return draft_messages(request, problems=[_for_model(p, path) for p in problems], previous=previous)

    def seen(attempt: int, completion: Completion, problems: list[str]) -> None:
        if not problems:
            report(f"attempt {attempt}/{attempts}: valid and lint-clean")
        else:
            report(f"attempt {attempt}/{attempts}: {len(problems)} problem(s)"
                   + ("; asking again" if attempt < attempts else ""))

    try:
        text = await ask_json(client, DRAFT_ROLE, model, draft_messages(request), parse=parse, attempts=attempts,
                              retry=retry, step=DRAFT_STEP, response_format=draft_response_format(request),
                              on_answer=seen)
    except NoValidAnswer as exc:
        return None, exc.problems
    return text, []


def _for_model(problem: str, path: str) -> str:
    # The model sees the draft with line numbers, not the file path.
    return f"line {problem[len(path) + 1:]}" if problem.startswith(path + ":") else problem
