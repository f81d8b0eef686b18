"""A problem found at a place in a file, printed ``path:line: what: message`` (spec validation, the linter).

Stdlib only, so the linter can share it without importing the spec models (pydantic).
"""

from __future__ import annotations


class Finding:
    """The shared printed form; ``SpecProblem`` says which field, ``LintFinding`` which rule."""

    path: str
    line: int | None
    message: str

    @property
    def what(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.what}: {self.message}"
