"""Documented path of :mod:`pytest_ncp.engine.runner`."""
from .engine.runner import *  # noqa: F401,F403
