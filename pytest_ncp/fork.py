"""Documented path of :mod:`pytest_ncp.engine.fork`."""
from .engine.fork import *  # noqa: F401,F403
