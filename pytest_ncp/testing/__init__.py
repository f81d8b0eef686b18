"""Test helpers for pytest-ncp users and for the project's own tests.

``ScriptedModelServer`` is a local OpenAI-compatible endpoint that answers from a script, so
narrator and auditor code can be tested through litellm's real request path without a network.
"""

from __future__ import annotations

from .demo import install_demo_script
from .prompts import data_blocks, data_in, opening
from .server import DEFAULT_REPLIES, RecordedRequest, Rule, ScriptedModelServer

__all__ = ["DEFAULT_REPLIES", "RecordedRequest", "Rule", "ScriptedModelServer", "data_blocks", "data_in",
           "install_demo_script", "opening"]
