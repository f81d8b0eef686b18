"""Documented path of :mod:`pytest_ncp.core.spec`."""
from .core.spec import *  # noqa: F401,F403
