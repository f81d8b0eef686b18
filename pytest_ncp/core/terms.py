"""Names of the spec format that light modules share: no pydantic, yaml or model imports here.

``spec.py`` builds its pydantic models from these; the authoring tools (which must import cheaply)
and the linter use them directly, so each is defined once.
"""

from __future__ import annotations

# The fixed genre list of NCP-Bench: every spec carries two of these (primary, secondary).
GENRES: tuple[str, ...] = (
    "Action", "Adventure", "Comedy", "Crime", "Drama", "Family", "Fantasy", "Historical", "Horror",
    "Musical", "Mystery", "Romance", "Satire", "Sci-Fi", "Sports", "Thriller", "War", "Western",
)
COMMITMENT_KINDS: tuple[str, ...] = ("invariant", "ordering", "achievement")
MEDIA: tuple[str, ...] = ("film", "book", "play")  # what a retelling retells
# ``source.kind``: a retelling of a published work (the benchmark's specs; the default), or a world of your own.
SOURCE_KINDS: tuple[str, ...] = ("retelling", "original")
ORIGINAL_MEDIA: tuple[str, ...] = ("game", "story")  # what an original world is
# Lint rules and review checks about a published work: an original world has no rights to explain and no
# work to be true to (the spec itself is its canon), so they skip it.
RETELLING_ONLY_CHECKS: tuple[str, ...] = ("missing-public-domain", "true-to-source")
# Ids of specs, facts, commitments and nodes: a letter, then letters, digits, '_', '.' or '-'.
ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]*$"
ID_MAX_LENGTH = 64
