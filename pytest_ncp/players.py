"""Documented path of :mod:`pytest_ncp.engine.players`."""
from .engine.players import *  # noqa: F401,F403
