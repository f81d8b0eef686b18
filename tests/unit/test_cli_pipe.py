"""``ncp report ... | head``: a reader that closes the pipe ends the command quietly, not with a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("command", [["catalog", "ncp-bench"], ["schema"]])
def test_a_closed_pipe_ends_the_command_without_a_traceback(command: list[str], tmp_path: Path):
    # The read end is closed before the command writes a byte (it is still importing), so its first write, or the
    # flush of a short output, meets a closed pipe, as under `| head` once head has read its lines.
    proc = subprocess.Popen([sys.executable, "-m", "pytest_ncp.cli", *command], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 141
