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
MEDIA: tuple[str, ...] = ("film", "book", "play")
# Ids of specs, facts, commitments and nodes: a letter, then letters, digits, '_', '.' or '-'.
ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]*$"
ID_MAX_LENGTH = 64
