"""Review: the spec's problems and outline, and recording the review block in the file byte-for-byte."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Mapping

from .layout import review_block

if TYPE_CHECKING:
    from ..core.spec import NarrativeSpec

# What a reviewer checks by reading, beyond the lint rules (which `ncp specs review` runs itself).
REVIEW_CHECKS: dict[str, str] = {
    "facts-true-at-turn-0": "every initial fact and the briefing hold at the start of the story",
    "commitments-auditable-from-one-response": "each commitment can be judged from one narrator response",
    # The source re-review of benchmark v3: a finding names its class as a prefix, e.g.
    # "true-to-source: node inn-castle comes after sheep-armies; in the novel it comes before".
    "true-to-source": "synopsis, facts, nodes and commitments agree with the work (order, who, what, where)",
    "delta-not-player-choice": "no key delta is the player character's own decision, oath, feeling or conclusion",
    "inputs-assume-no-unshown-event": "no scripted input presupposes a thing or event the narrator has not yet "
                                      "shown (the card, the note, the man at my table)",
}


class ReviewEditError(Exception):
    """The review block cannot be written without touching the rest of the file."""


def set_review(text: str, review: Mapping[str, Any]) -> str:
    """``text`` with its top-level ``review`` block replaced by ``review`` (appended when absent).

    Only the lines of the old block change: every other byte of the file stays as it was (comments,
    quoting, layout). The result is loaded back and compared with the intended data before it is
    returned, so a file this cannot edit safely raises ReviewEditError instead of being damaged.
    """
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ReviewEditError(f"{where}invalid YAML ({getattr(exc, 'problem', None) or exc}): fix it first") from None
    if not isinstance(root, yaml.MappingNode) or root.flow_style or not isinstance(data, dict):
        raise ReviewEditError("a spec file must be a block mapping of fields (id: ..., title: ...)")
    newline = "\r\n" if "\r\n" in text else "\n"
    block = review_block(review).replace("\n", newline)
    for key, value in root.value:
        if key.value == "review":
            start = key.start_mark.index - key.start_mark.column
            end = _line_end(text, _content_end(value))
            new = text[:start] + block + text[end:]
            break
    else:
        end = _line_end(text, _content_end(root)) if root.value else len(text)
        head = text[:end]
        if head and not head.endswith("\n"):
            head += newline
        new = head + (newline if head.strip() else "") + block + text[end:]
    expected = {**data, "review": dict(review)}
    try:
        reloaded = yaml.safe_load(new)
    except yaml.YAMLError:
        reloaded = None
    if reloaded != expected:
        raise ReviewEditError("the review block could not be replaced without changing other fields "
                              "(unusual layout around `review:`); edit it by hand")
    return new


def _content_end(node: Any) -> Any:
    """Mark just after the last character of a node's content (block collections end later, at the
    next token, which may sit after comments and blank lines that belong to what follows)."""
    import yaml

    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        return _content_end(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return _content_end(node.value[-1])
    return node.end_mark


def _line_end(text: str, mark: Any) -> int:
    """Offset just past the line holding ``mark`` (a mark at column 0 already starts the next line)."""
    index: int = mark.index
    if mark.column == 0 and index > 0:
        return index
    nl = text.find("\n", index)
    return len(text) if nl < 0 else nl + 1


def outline(spec: NarrativeSpec) -> str:
    """A short outline for a reviewer: who the player is, what is in the spec, the plot steps."""
    kinds = Counter(c.kind for c in spec.commitments)
    src = spec.source
    lines = [
        f"{spec.id}: {spec.title} ({src.medium}, {src.year}; {spec.genres[0]} / {spec.genres[1]})",
        f"player: {spec.player.name}",
        f"{len(spec.initial_facts)} initial fact(s), {len(spec.commitments)} commitment(s) ("
        + ", ".join(f"{kinds[k]} {k}" for k in ("invariant", "ordering", "achievement")) + "), "
        f"{len(spec.trajectory)} trajectory node(s), {len(spec.scripted_inputs)} scripted input(s)",
        "nodes:",
    ]
    lines += [f"  {i}. {n.id}: {n.description}" for i, n in enumerate(spec.trajectory, 1)]
    r = spec.review
    if r is None:
        lines.append("review: none")
    elif r.status == "reviewed":
        lines.append(f"review: reviewed by {r.reviewer or '?'} on {r.date or '?'}" + (f": {r.notes}" if r.notes else ""))
        lines += [f"  checked: {', '.join(r.checklist)}"] if r.checklist else []
        lines += [f"  found: {x}" for x in r.findings] + [f"  fixed: {x}" for x in r.fixes]
    else:
        lines.append("review: draft (not yet reviewed)")
    return "\n".join(lines)


def spec_problems(text: str, path: str) -> tuple[NarrativeSpec | None, list[str], list[str]]:
    """(spec, problems, notices) as ``path:line: ...`` lines: validation problems, or (when the spec is valid)
    the lint findings that fail it; notices (work still to do, such as a missing playthrough) never block."""
    from ..lint import lint_spec
    from ..core.spec import SpecError, parse_spec

    try:
        spec = parse_spec(text, path)
    except SpecError as exc:
        return None, [str(p) for p in exc.problems], []
    findings = lint_spec(spec)
    return spec, [str(f) for f in findings if f.fails], [str(f) for f in findings if not f.fails]
