"""Documented path of :mod:`pytest_ncp.engine.auditor`."""
from .engine.auditor import *  # noqa: F401,F403
