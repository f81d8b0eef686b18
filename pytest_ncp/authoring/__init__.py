"""Building NCP-Bench specs: from the CMU Movie Summary Corpus to reviewed spec files.

The paper builds its 100 environments in three steps, and ``ncp specs`` follows them, one module
per step:

1. ``import-cmu``: ``corpus`` reads the corpus (plot summaries, movie metadata, character metadata),
   ``clean`` drops unusable (movie, character) candidates, ``genres`` maps the corpus's free-form
   genres onto the 18 NCP genres, and ``select`` picks a genre-diverse subset;
2. ``draft``: a model drafts a spec from one synopsis and character; the draft is validated and
   linted, and regenerated with the problems until it is clean; ``layout`` writes it as YAML;
3. ``review``: a person reads the draft and records their review in the spec file.

Everything here is pure (files in, values out; no model calls, no printing), so each step is tested
on its own; ``pytest_ncp.cli.specs`` wires them to the command line. yaml, pydantic and jinja2
are imported inside the functions that need them.
"""

from __future__ import annotations

from ..core.terms import GENRES
from .clean import DEFAULT_MIN_WORDS, DROP_REASONS, Candidate, Cleaned, clean, mentions, name_parts, title_key
from .corpus import CorpusError, CorpusRead, Movie, parse_year, read_corpus
from .draft import (
    AUTHOR_RULES, DRAFT_ROLE, DRAFT_STEP, OWN_FIELDS, DraftRequest, assemble_spec, check_spec_id, draft_messages,
    draft_problems, draft_response_format, draft_schema, draft_spec, parse_draft_answer, parse_genres, slug,
)
from .genres import GENRE_KEYWORDS, GENRE_TABLE, NON_FICTION_GENRES, map_genre, primary_secondary
from .layout import WIDTH, render_spec_yaml, review_block
from .review import REVIEW_CHECKS, ReviewEditError, outline, set_review, spec_problems
from .select import DEFAULT_COUNT, ImportReport, import_cmu, read_candidates, select_diverse, write_candidates

__all__ = [
    "AUTHOR_RULES", "Candidate", "Cleaned", "CorpusError", "CorpusRead", "DEFAULT_COUNT", "DEFAULT_MIN_WORDS",
    "DRAFT_ROLE", "DRAFT_STEP", "DROP_REASONS", "DraftRequest", "GENRES", "GENRE_KEYWORDS", "GENRE_TABLE", "ImportReport", "Movie",
    "NON_FICTION_GENRES", "OWN_FIELDS", "REVIEW_CHECKS", "ReviewEditError", "WIDTH", "assemble_spec", "check_spec_id", "clean",
    "draft_messages", "draft_problems", "draft_response_format", "draft_schema", "draft_spec", "import_cmu", "map_genre",
    "mentions", "name_parts", "outline", "parse_draft_answer", "parse_genres", "parse_year", "primary_secondary",
    "read_candidates", "read_corpus", "render_spec_yaml", "review_block", "select_diverse", "set_review", "slug",
    "spec_problems", "title_key", "write_candidates",
]
