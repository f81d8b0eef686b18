"""Documented path of :mod:`pytest_ncp.core.quotes`."""
from .core.quotes import *  # noqa: F401,F403
