"""Old import path of the spec-authoring tools, kept so ``from pytest_ncp.pipeline import ...`` works.

They live in ``pytest_ncp.authoring``, one module per step.
"""

from __future__ import annotations

from .authoring import *  # noqa: F401,F403
from .authoring import __all__  # noqa: F401
