"""Documented path of :mod:`pytest_ncp.engine.workers`."""
from .engine.workers import *  # noqa: F401,F403
