"""A narrator that never answers is the narrator's error within --narrator-timeout, and the process still ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, caligari_twins

# Each hook waits on an event nobody sets: a call stuck in user code. The sync ones block their thread for good.
STUCK = """\
import asyncio, threading

NEVER = threading.Event()


class Respond:
    def respond(self, player_input, context):
        NEVER.wait()


class Opening:
    def opening(self):
        NEVER.wait()

    def respond(self, player_input, context):
        return "Night."


class Reset:
    def reset(self, spec):
        NEVER.wait()

    def respond(self, player_input, context):
        return "Night."


class AsyncRespond:
    async def respond(self, player_input, context):
        await asyncio.Event().wait()
"""


@pytest.mark.parametrize("narrator, hook", [("Respond", "respond()"), ("Opening", "opening()"), ("Reset", "reset()"),
                                            ("AsyncRespond", "respond()")])
def test_a_stuck_narrator_is_its_error_and_the_run_ends(ncp_model_server, tmp_path, narrator, hook):
    (tmp_path / "stuck.py").write_text(STUCK)
    out = tmp_path / "run"
    command = [sys.executable, "-m", "pytest_ncp.cli", "run", "--narrator", f"stuck:{narrator}",
               "--specs", *caligari_twins(tmp_path, 2), "--api-base", ncp_model_server.base_url, "--max-turns", "3",
               "--narrator-timeout", "0.5", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr  # the narrator failed; the process did not hang on its threads
    episodes = json.loads((out / "results.json").read_text())["episodes"]
    assert len(episodes) == 2  # the run went on past the first stuck episode
    for e in episodes:
        assert e["termination"] == "error" and e["error"]["kind"] == "narrator", e
        assert f"NarratorTimeout: {hook} did not answer within 0.5 s (the narrator timeout" in e["error"]["message"]
