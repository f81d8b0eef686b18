"""``ncp run``'s line per episode shows an error's message whole, fix included."""

from __future__ import annotations

from pytest_ncp.core.records import EpisodeRecord
from pytest_ncp.report.progress import episode_line

MESSAGE = ("narrator call to openai/gpt-4o-mini failed after 1 attempt(s) at api.openai.com:443: MissingKeyError: "
           "Missing credentials: set OPENAI_API_KEY (or pass --api-base for a local OpenAI-compatible server)")


def test_an_error_line_keeps_the_fix_at_the_end_of_the_message():
    record = EpisodeRecord.model_validate({"spec_id": "caligari", "repeat": 0, "termination": "error", "turns": 0,
                                           "progress": 0.0, "satisfied": 0.0,
                                           "error": {"kind": "model", "message": MESSAGE}})
    line = episode_line(record)
    assert f"caligari[r0]: error (model: {MESSAGE}); turns=0" in line and "…" not in line
