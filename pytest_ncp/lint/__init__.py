"""The spec linter: deterministic content checks that schema validation cannot make.

``ncp validate`` checks that a spec is well formed; the linter checks that it is *sound*: that the
starting ledger does not leak the future, that facts do not repeat, that every commitment can be
judged and every achievement reached, and that the scripted player does not know names before the
story has introduced them. Each finding is ``path:line: rule: message`` (``ncp lint``,
``ncp validate --strict``). Everything here is pure text analysis: no pytest, no models (yaml only to
read the shared world rules). 
The linter is in these modules: ``core`` (findings, words and proper names, the per-spec context),
``structure`` (the structural rules), ``story`` (the playability rules of the benchmark review), ``shown``
(what the narrator can show) and ``playthrough`` (benchmark specs proven by a reference playthrough).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from .core import (
    CONTENT_STOPWORDS, NAME_STOPWORDS, NEGATIONS, Context, LintFinding, content_words, jaccard, name_keys,
    proper_names, spec_lexicon,
)
from .playthrough import PLAYTHROUGH_CHECKS, PLAYTHROUGH_RULES
from .shown import SHOWN_CHECKS, SHOWN_RULES
from .story import STORY_CHECKS, STORY_RULES
from .structure import DUPLICATE_THRESHOLD, STRUCTURE_CHECKS, STRUCTURE_RULES

if TYPE_CHECKING:  # the spec module imports pydantic; the linter only reads its objects
    from ..core.spec import NarrativeSpec, SpecError

__all__ = [
    "CONTENT_STOPWORDS", "DUPLICATE_THRESHOLD", "NAME_STOPWORDS", "NEGATIONS", "RULES", "LintFinding",
    "content_words", "jaccard", "lint_paths", "lint_spec", "name_keys", "proper_names", "spec_lexicon",
]

RULES: dict[str, str] = {**STRUCTURE_RULES, **STORY_RULES, **SHOWN_RULES, **PLAYTHROUGH_RULES}
_CHECKS = (*STRUCTURE_CHECKS, *STORY_CHECKS, *SHOWN_CHECKS, *PLAYTHROUGH_CHECKS)


def lint_spec(spec: NarrativeSpec) -> list[LintFinding]:
    """Every finding for one (valid) spec, ordered by line then rule."""
    cx = Context(spec)
    findings = [f for check in _CHECKS for f in check(cx)]
    return sorted(findings, key=lambda f: (f.line or 0, f.rule, f.message))


def lint_paths(paths: Sequence[str | Path]) -> tuple[list[LintFinding], list[SpecError]]:
    """Lint every valid spec under ``paths``; specs that fail validation come back as errors."""
    from ..core.spec import load_specs

    specs, errors = load_specs(paths)
    return [f for spec in specs for f in lint_spec(spec)], errors
