"""Documented path of :mod:`pytest_ncp.analysis.metrics`."""
from .analysis.metrics import *  # noqa: F401,F403
