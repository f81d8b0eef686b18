"""``ncp init`` in an empty directory, with only the built wheel installed: ``pytest`` there passes offline
and plays the starter's spec; its offline auditor reads the narration for the spec's facts; existing files
are never overwritten without --force."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.packaging.conftest import clean_env, run

pytestmark = pytest.mark.packaging

STARTER = ["narrator.py", "specs/glasswater-relay.yaml", "pytest.ini", "conftest.py", "tests/test_narrator.py",
           ".github/workflows/narrator.yml"]
FORGETFUL = '''
from narrator import Narrator


class Forgetful(Narrator):
    async def respond(self, player_input, context):
        if context.turn == 2:
            return "The Lantern Bridge is open again, its lamps lit, and you hurry over it to the Upper Basin."
        return await super().respond(player_input, context)
'''


def pytest_in(project: Path, wheel_env: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(wheel_env / "pytest"), "-p", "no:cacheprovider", *args], cwd=project, env=clean_env(),
                          capture_output=True, text=True, timeout=900)


def test_init_then_pytest_passes_offline_and_plays_the_spec(wheel_env: Path, empty_dir: Path):
    out = run([str(wheel_env / "ncp"), "init"], cwd=empty_dir, env=clean_env()).stdout
    assert all((empty_dir / name).is_file() and f"wrote {name}" in out for name in STARTER)
    run([str(wheel_env / "ncp"), "lint", "specs"], cwd=empty_dir, env=clean_env())
    proc = pytest_in(empty_dir, wheel_env, "-rA", "--ncp-report=runs/first")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "PASSED specs/glasswater-relay.yaml::episode[glasswater-relay]" in proc.stdout
    assert "PASSED tests/test_narrator.py::test_a_narrator_that_reopens_the_bridge_is_caught" in proc.stdout
    results = json.loads((empty_dir / "runs" / "first" / "results.json").read_text(encoding="utf-8"))
    [episode] = results["episodes"]
    assert episode["spec_id"] == "glasswater-relay" and episode["termination"] == "success"
    assert episode["turns"] >= 5 and episode["nodes_reached"] == 5


def test_the_starter_narrator_calls_its_model_on_the_recorded_path(wheel_env: Path, empty_dir: Path):
    """README "Record and replay": calls through context.llm are recorded, so the stub must make them there."""
    run([str(wheel_env / "ncp"), "init"], cwd=empty_dir, env=clean_env())
    proc = pytest_in(empty_dir, wheel_env, "specs", "--ncp-record-mode=once", "--ncp-cassettes=cassettes")
    assert proc.returncode == 0, proc.stdout[-3000:]
    cassette = (empty_dir / "cassettes" / "glasswater-relay--r0.yaml").read_text(encoding="utf-8")
    assert "role: narrator" in cassette and "role: auditor" in cassette


def test_the_offline_auditor_catches_a_narrator_that_breaks_a_fact(wheel_env: Path, empty_dir: Path):
    run([str(wheel_env / "ncp"), "init"], cwd=empty_dir, env=clean_env())
    (empty_dir / "forgetful.py").write_text(FORGETFUL, encoding="utf-8")
    proc = pytest_in(empty_dir, wheel_env, "specs", "--ncp-narrator=forgetful:Forgetful")
    assert proc.returncode == 1, proc.stdout[-4000:]
    assert "fact conflict at turn 2" in proc.stdout and "F4" in proc.stdout


def test_init_refuses_to_overwrite_and_force_replaces(wheel_env: Path, empty_dir: Path):
    (empty_dir / "pytest.ini").write_text("[pytest]\n# ours\n", encoding="utf-8")
    (empty_dir / "narrator.py").write_text("# ours\n", encoding="utf-8")
    proc = subprocess.run([str(wheel_env / "ncp"), "init"], cwd=empty_dir, env=clean_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2
    assert "narrator.py" in proc.stderr and "pytest.ini" in proc.stderr and "--force" in proc.stderr
    assert (empty_dir / "narrator.py").read_text(encoding="utf-8") == "# ours\n"
    assert not (empty_dir / "specs").exists()  # nothing written at all
    run([str(wheel_env / "ncp"), "init", "--force"], cwd=empty_dir, env=clean_env())
    assert "class Narrator" in (empty_dir / "narrator.py").read_text(encoding="utf-8")
