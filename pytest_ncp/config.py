"""Documented path of :mod:`pytest_ncp.core.config`."""
from .core.config import *  # noqa: F401,F403
