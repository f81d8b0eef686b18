"""Documented path of :mod:`pytest_ncp.analysis.compare`."""
from .analysis.compare import *  # noqa: F401,F403
