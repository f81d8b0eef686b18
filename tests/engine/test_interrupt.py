"""Ctrl-C on `ncp run` keeps every finished episode, says how to resume, and --resume finishes the rest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.conftest import ROOT, FIXTURES, SPECS


def twin_specs(tmp_path, n):
    text = (FIXTURES / "caligari.yaml").read_text()
    folder = tmp_path / "specs"
    folder.mkdir()
    for i in range(n):
        (folder / f"s{i}.yaml").write_text(text.replace("id: caligari\n", f"id: s{i}\n", 1))
    return folder


# The third episode's narrator says it has started (a marker file) and then waits for an event nobody sets: Ctrl-C
# lands while exactly two episodes are finished and one is mid-run, however slow the machine. A resumed run finds the
# marker and narrates at once.
HOLDING_NARRATOR = """\
import asyncio, pathlib

MARKER = pathlib.Path(__file__).with_name("holding")
seen = []


class Narrator:
    async def respond(self, player_input, context):
        if context.spec.id not in seen:
            seen.append(context.spec.id)
        if len(seen) == 3 and not MARKER.exists():
            MARKER.write_text(context.spec.id)
            await asyncio.Event().wait()
        return "Night."
"""


def test_sigint_then_resume(ncp_model_server, tmp_path):
    (tmp_path / "agent.py").write_text(HOLDING_NARRATOR)
    out = tmp_path / "run"
    command = [sys.executable, "-m", "pytest_ncp.cli", "run", "--narrator", "agent:Narrator",
               "--specs", str(twin_specs(tmp_path, 6)), "--api-base", ncp_model_server.base_url,
               "--max-turns", "6", "--concurrency", "1", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results, marker = out / "results.json", tmp_path / "holding"
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)  # waits for the marker, which the run cannot pass without: no race
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "continue with the same command plus --resume" in stderr
    cut = json.loads(results.read_text())
    finished = {e["spec_id"] for e in cut["episodes"]}
    assert len(finished) == 2 and marker.read_text() not in finished
    # The file says it is a partial run: what it set out to do, what finished, and why it stopped.
    assert (cut["complete"], cut["stopped"]) == (False, "interrupted")
    assert cut["expected"] == [f"s{i}--r0" for i in range(6)] and cut["finished"] == sorted(f"{s}--r0" for s in finished)
    # The episode cut off mid-run left a trace with no end; nothing finished was lost.
    for spec_id in finished:
        assert '"event": "end"' in (out / "traces" / f"{spec_id}--r0.jsonl").read_text()

    ncp_model_server.reset()
    done = subprocess.run(command + ["--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"resuming: {len(finished)} finished episode(s)" in done.stdout
    rerun = {line.split("[")[0] for line in done.stdout.splitlines() if "[r0]:" in line}
    assert rerun == {f"s{i}" for i in range(6)} - finished
    resumed = json.loads(results.read_text())
    assert resumed["metrics"]["episodes"] == 6 and resumed["complete"] and resumed["stopped"] is None
