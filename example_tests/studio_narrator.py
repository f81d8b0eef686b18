"""The narrator a studio ships, as far as the tests are concerned.

A real one would call its production model; this one subclasses the built-in LLM narrator with the
studio's own prompt template, so the examples exercise the full request path through litellm.
"""

from __future__ import annotations

from pathlib import Path

from pytest_ncp import LLMNarrator


class StudioNarrator(LLMNarrator):
    model = "openai/studio-gm"  # whatever the studio serves; the examples point it at a scripted server
    prompt = Path(__file__).with_name("studio_prompt.j2")
    temperature = 0.0
