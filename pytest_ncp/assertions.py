"""Documented path of :mod:`pytest_ncp.plugin.assertions`."""
from .plugin.assertions import *  # noqa: F401,F403
